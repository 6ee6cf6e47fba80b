#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Assemble the ASI kernel tree under out/linux:
#
#   pristine   Debian's linux-source-6.12, unpacked once, first commit (tag)
#   overlay    the new files of asi-core/, asi-kvm/ and selftests/tools/
#   series     patches/series applied in order, one commit per patch
#
# The chain of commits is built in a private index, without touching the
# work tree, and the work tree is then moved to it with 'git reset --hard':
# git rewrites only the files whose content changed, so object files of the
# out-of-tree builds (O=out/build/...) stay valid and rebuilds are
# incremental. All commits carry fixed committer data, so the same inputs
# give the same commit ids and an unchanged project is a no-op.
#
# Edits made in out/linux must be exported with 'make refresh' first; this
# script refuses to overwrite them unless FORCE=1.
set -euo pipefail
. "$(dirname "$0")/common.sh"

unpack() {
	need_pkgs "$SRCPKG" git xz-utils
	[ -f "$TARBALL" ] || die "$TARBALL missing after installing $SRCPKG"
	local tmp=$OUT/linux.unpack
	rm -rf "$tmp"
	mkdir -p "$tmp"
	note "unpacking $TARBALL (once)"
	tar -C "$tmp" --strip-components=1 -xaf "$TARBALL"
	(
		cd "$tmp"
		git init -q -b asi
		git config core.autocrlf false
		git config gc.auto 0
		git add -A -f .
		GIT_AUTHOR_NAME="Debian $SRCPKG" GIT_AUTHOR_EMAIL="debian-kernel@lists.debian.org" \
		GIT_AUTHOR_DATE="$GIT_COMMITTER_DATE" \
			git commit -q -m "Linux $(make -s kernelversion) from Debian $SRCPKG $(dpkg-query -W -f='${Version}' $SRCPKG)"
		git tag pristine
	)
	{
		echo "package: $SRCPKG $(dpkg-query -W -f='${Version}' $SRCPKG)"
		echo "kernelversion: $(make -s -C "$tmp" kernelversion)"
		echo "tarball-sha256: $(sha256sum "$TARBALL" | cut -d' ' -f1)"
	} >"$tmp/.git/asi-kernel-version"
	rm -rf "$SRC"
	mv "$tmp" "$SRC"
}

# Build overlay + series commits on top of 'pristine' in a private index and
# print the resulting commit id.
assemble() {
	export GIT_INDEX_FILE=$SRC/.git/asi-assemble.index
	local author="GIT_AUTHOR_NAME=kvm-asi GIT_AUTHOR_EMAIL=tree@kvm-asi.invalid"
	git -C "$SRC" read-tree refs/tags/pristine

	local d f mode blob head
	for d in $OVERLAYS; do
		overlay_files "$d" | while read -r f; do
			if git -C "$SRC" cat-file -e "refs/tags/pristine:$f" 2>/dev/null; then
				die "$d/$f would replace the upstream file $f;" \
				    "changes to upstream files belong in patches/ (edit out/linux, then make refresh)"
			fi
			mode=100644
			[ -x "$TOP/$d/$f" ] && mode=100755
			blob=$(git -C "$SRC" hash-object -w "$TOP/$d/$f")
			printf '%s %s\t%s\n' "$mode" "$blob" "$f"
		done
	done | git -C "$SRC" update-index --add --index-info
	head=$(env $author GIT_AUTHOR_DATE="$GIT_COMMITTER_DATE" git -C "$SRC" commit-tree \
		"$(git -C "$SRC" write-tree)" -p refs/tags/pristine \
		-m "kvm-asi: add the project's new files" \
		-m "Laid over the pristine tree by scripts/tree.sh from $OVERLAYS.")

	local series=$TOP/patches/series p msg info err
	msg=$(mktemp) info=$(mktemp) err=$(mktemp)
	trap 'rm -f "$msg" "$info" "$err" "$msg.diff"' RETURN
	[ -f "$series" ] || : >"$series"
	while read -r p _; do
		case "$p" in ''|'#'*) continue ;; esac
		[ -f "$TOP/patches/$p" ] || die "patches/series names $p, which does not exist"
		git -C "$SRC" mailinfo -b "$msg" "$msg.diff" <"$TOP/patches/$p" >"$info"
		[ -s "$msg.diff" ] || die "patches/$p has no diff"
		if ! git -C "$SRC" apply --cached -p1 --whitespace=nowarn "$msg.diff" 2>"$err"; then
			echo "error: patches/$p does not apply to $(cat "$SRC/.git/asi-kernel-version" | sed -n 's/^kernelversion: //p'):" >&2
			sed 's/^/    /' "$err" >&2
			die "fix patches/$p (the file named above changed upstream)"
		fi
		local subj name email date
		subj=$(sed -n 's/^Subject: //p' "$info")
		name=$(sed -n 's/^Author: //p' "$info")
		email=$(sed -n 's/^Email: //p' "$info")
		date=$(sed -n 's/^Date: //p' "$info")
		[ -n "$subj" ] && [ -n "$name" ] || die "patches/$p lacks a From: or Subject: header"
		if [ -s "$msg" ]; then
			head=$(printf '%s\n\n%s\n' "$subj" "$(cat "$msg")" |
			       GIT_AUTHOR_NAME="$name" GIT_AUTHOR_EMAIL="$email" GIT_AUTHOR_DATE="$date" \
			       git -C "$SRC" commit-tree "$(git -C "$SRC" write-tree)" -p "$head")
		else
			head=$(printf '%s\n' "$subj" |
			       GIT_AUTHOR_NAME="$name" GIT_AUTHOR_EMAIL="$email" GIT_AUTHOR_DATE="$date" \
			       git -C "$SRC" commit-tree "$(git -C "$SRC" write-tree)" -p "$head")
		fi
	done <"$series"
	unset GIT_INDEX_FILE
	echo "$head"
}

mkdir -p "$OUT"
# One assembly at a time: two make targets run at once (say make check
# and make verify-series) would otherwise race on out/linux's index.
exec 9>"$OUT/.tree.lock"
flock 9
need_pkgs "$SRCPKG" $BUILD_PKGS $RUN_PKGS
need_qemu
if ! git -C "$SRC" rev-parse -q --verify refs/tags/pristine >/dev/null 2>&1; then
	unpack
fi

target=$(assemble)
cur=$(git -C "$SRC" rev-parse HEAD)
last=$(cat "$SRC/.git/asi-assembled" 2>/dev/null || echo none)

if [ "${FORCE:-0}" != 1 ]; then
	dirty=$(git -C "$SRC" status --porcelain --untracked-files=no)
	[ -z "$dirty" ] || die "out/linux has uncommitted edits:
$dirty
commit them there and run 'make refresh' to export them, or FORCE=1 make tree to discard them"
	if [ "$cur" != "$last" ] && [ "$cur" != "$(git -C "$SRC" rev-parse refs/tags/pristine)" ]; then
		die "out/linux HEAD ($(git -C "$SRC" log -1 --format='%h %s' HEAD)) has commits" \
		    "that are not exported; run 'make refresh', or FORCE=1 make tree to discard them"
	fi
fi

if [ "$cur" != "$target" ]; then
	git -C "$SRC" reset -q --hard "$target"
fi
echo "$target" >"$SRC/.git/asi-assembled"
cp "$SRC/.git/asi-kernel-version" "$OUT/kernel-version"
note "tree: $(sed -n 's/^kernelversion: //p' "$OUT/kernel-version") + $(grep -cvE '^(#|$)' "$TOP/patches/series" || true) patches, HEAD $(git -C "$SRC" log -1 --format=%h)"
