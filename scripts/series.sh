#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The upstream patch series, from the project's files:
#
#   scripts/series.sh write    build it in out/bisect/linux and write it
#                              with its cover letter to out/series/
#   scripts/series.sh verify   write it, then check it (below)
#
# The series is patches/series with the project's new files introduced
# where patches/upstream/layout says: as patches of their own (message in
# patches/upstream/) or folded into a hook patch. The cover letter is
# patches/upstream/cover-letter, with the latest benchmark table.
#
# verify checks that
#   - every new file is placed exactly once and the series' last commit
#     has exactly the tree that 'make check' tests (out/linux);
#   - the written patches apply, in order, to the pristine source;
#   - scripts/checkpatch.pl --strict (the series' own) reports no error
#     and no warning for any patch (checks are listed, not fatal);
#   - MAINTAINERS has an entry for every new file;
#   - every patch has a Signed-off-by: of its author, a subject whose
#     summary (after the "x86/mm: " or "KVM: x86: " prefixes) starts with
#     a capital, and a message that says why (a body of at least two
#     sentences beyond the subject);
#   - every commit builds (vmlinux, compiled and linked, in the default
#     configuration of configs/, through ccache; a commit that changes
#     only documentation, tools/, MAINTAINERS or checkpatch is not built
#     again); BISECT=tip builds only the last one, BISECT=last:K the
#     last K (for a change to the end of the series: each is built on
#     the build directory as the previous run left it), BISECT=none none.
set -euo pipefail
. "$(dirname "$0")/common.sh"

B=$OUT/bisect			# series tree and its build, laid out like
T=$B/linux			# out/linux and out/build/ so that ccache
BO=$B/build/default		# hits across the two
S=$OUT/series
LAYOUT=$TOP/patches/upstream/layout
WAIVERS=$TOP/patches/upstream/checkpatch-waivers
AUTHOR="KVM ASI developers <kvm-asi@kvm-asi.invalid>"

t() { git -C "$T" "$@"; }

# overlay_dir FILE: the overlay directory that holds kernel path FILE.
overlay_dir() {
	local d
	for d in $OVERLAYS; do
		[ -f "$TOP/$d/$1" ] && { echo "$d"; return; }
	done
	die "patches/upstream/layout names $1, which no overlay (asi-core/, asi-kvm/, selftests/) holds"
}

slug() { basename "$1" .patch | sed 's/^[0-9]*-//'; }

add_files() {
	local f d
	for f in "$@"; do
		d=$(overlay_dir "$f")
		mkdir -p "$(dirname "$T/$f")"
		cp "$TOP/$d/$f" "$T/$f"
		t add -f -- "$f"
	done
}

commit_new() {
	local msg=$TOP/patches/upstream/$1
	shift
	[ -f "$msg" ] || die "patches/upstream/layout names message $msg, which does not exist"
	add_files "$@"
	GIT_AUTHOR_NAME="${AUTHOR% <*}" GIT_AUTHOR_EMAIL=kvm-asi@kvm-asi.invalid \
	GIT_AUTHOR_DATE="$GIT_COMMITTER_DATE" t commit -q -F "$msg"
}

# Check the layout against the overlays and the series; fill the tables.
declare -A before_of=() with_of=() placed=()
end_entries=()
read_layout() {
	local kind where rest f slugs
	slugs=" $(grep -vE '^(#|$)' "$TOP/patches/series" | while read -r p _; do slug "$p"; done | tr '\n' ' ')"
	while read -r kind where rest; do
		case "$kind" in ''|'#'*) continue ;; esac
		case "$kind" in
		new)	[ "$where" = end ] || [[ "$slugs" == *" $where "* ]] ||
				die "layout: no patch named $where in patches/series"
			if [ "$where" = end ]; then
				end_entries+=("$rest")
			else
				before_of[$where]+="$rest"$'\n'
			fi
			set -- $rest; shift ;;
		with)	[[ "$slugs" == *" $where "* ]] || die "layout: no patch named $where in patches/series"
			with_of[$where]+=" $rest"
			set -- $rest ;;
		*)	die "layout: unknown line '$kind $where ...'" ;;
		esac
		for f in "$@"; do
			[ -z "${placed[$f]:-}" ] || die "layout: $f is placed twice"
			overlay_dir "$f" >/dev/null
			placed[$f]=1
		done
	done <"$LAYOUT"
	local d missing=
	for d in $OVERLAYS; do
		while read -r f; do
			[ -n "$f" ] && [ -z "${placed[$f]:-}" ] && missing+=" $f"
		done < <(overlay_files "$d")
	done
	[ -z "$missing" ] || die "patches/upstream/layout does not place these new files:$missing"
}

prepare_tree() {
	if ! git -C "$T" rev-parse -q --verify refs/tags/pristine >/dev/null 2>&1; then
		note "series: cloning the pristine tree into $T (once)"
		rm -rf "$T"
		mkdir -p "$B"
		git clone -q --shared --no-checkout "$SRC" "$T"
		t fetch -q --tags "$SRC"
	fi
	t fetch -q "$SRC" "+HEAD:refs/remotes/assembled"
	t checkout -q -f --detach refs/tags/pristine
	t clean -q -f -d
}

build_series() {
	local p s entry
	read_layout
	prepare_tree
	while read -r p _; do
		case "$p" in ''|'#'*) continue ;; esac
		s=$(slug "$p")
		if [ -n "${before_of[$s]:-}" ]; then
			while IFS= read -r entry; do
				[ -n "$entry" ] && commit_new $entry
			done <<<"${before_of[$s]}"
		fi
		t am -q --whitespace=error-all "$TOP/patches/$p" ||
			{ t am --abort || true; die "patches/$p does not apply in the series"; }
		if [ -n "${with_of[$s]:-}" ]; then
			add_files ${with_of[$s]}
			t commit -q --amend --no-edit
		fi
	done <"$TOP/patches/series"
	for entry in "${end_entries[@]}"; do
		commit_new $entry
	done
	local want got
	want=$(git -C "$SRC" rev-parse HEAD^{tree})
	got=$(t rev-parse HEAD^{tree})
	[ "$want" = "$got" ] || die "the series' last commit differs from out/linux (the tested tree):
$(t diff --stat refs/remotes/assembled HEAD | tail -5)"
	t tag -f series-tip >/dev/null
}

numbers() {
	local perf=$TOP/docs/performance.md
	if [ -f "$perf" ] && grep -q '^| ' "$perf"; then
		echo "From docs/performance.md (QEMU TCG; see there for what an emulated"
		echo "machine cannot show):"
		echo
		awk '/^\|/{print; n=1; next} n{exit}' "$perf"
	else
		echo "No benchmark run is recorded yet (docs/performance.md)."
	fi
}

# The checkpatch warnings the series keeps, for the cover letter.
waivers() {
	local patch type count reason
	if [ -z "$(waiver_lines)" ]; then
		echo "checkpatch --strict reports no errors and no warnings."
		return
	fi
	echo "checkpatch --strict reports no errors; the warnings it reports are"
	echo "false positives:"
	waiver_lines | while read -r patch type count reason; do
		echo "- $type in \"$(awk '/^Subject: /{ s = $0; while ((getline l) > 0 && l ~ /^ /) s = s l;
			sub(/^Subject: \[PATCH[^]]*\] */, "", s); print s; exit }' "$S"/[0-9][0-9][0-9][0-9]-"$patch".patch)\": $reason." |
			fold -s -w 70 | sed 's/ *$//; 1!s/^/  /'
	done
}

write_series() {
	build_series
	rm -rf "$S"
	mkdir -p "$S"
	t format-patch -q --cover-letter --zero-commit --no-signature --no-renames \
		--thread=shallow -o "$S" refs/tags/pristine..HEAD
	local cover=$S/0000-cover-letter.patch subj body base
	subj=$(head -1 "$TOP/patches/upstream/cover-letter")
	base=$(sed -n 's/^package: //p' "$SRC/.git/asi-kernel-version")
	body=$(mktemp)
	tail -n +3 "$TOP/patches/upstream/cover-letter" >"$body"
	python3 - "$cover" "$subj" "$body" "$base" "$(numbers)" "$(waivers)" <<-'EOF'
	import sys
	cover, subj, body, base, numbers, waivers = sys.argv[1:]
	text = open(body).read().replace("@NUMBERS@", numbers).replace("@BASE@", base)
	text = text.replace("@WAIVERS@", waivers)
	s = open(cover).read()
	s = s.replace("*** SUBJECT HERE ***", subj).replace("*** BLURB HERE ***", text.rstrip())
	open(cover, "w").write(s)
	EOF
	rm -f "$body"
	note "series: $(ls "$S"/*.patch | grep -vc 0000-cover) patches and a cover letter in $S"
}

# msg_ok COMMIT: the message has a body that says why, and the author's
# Signed-off-by.
msg_ok() {
	local c=$1 body author subject
	# "x86/mm: Add ...", "KVM: x86: Map ...": after the prefixes, a
	# capital (the x86 and KVM maintainer guides).
	subject=$(t log -1 --format=%s "$c")
	[[ $(sed -E 's/^([^ :]+: )+//' <<<"$subject") =~ ^[A-Z] ]] ||
		{ echo "the subject's summary does not start with a capital: $subject"; return 1; }
	author=$(t log -1 --format='%an <%ae>' "$c")
	t log -1 --format=%B "$c" | grep -qxF "Signed-off-by: $author" ||
		{ echo "no Signed-off-by: $author"; return 1; }
	body=$(t log -1 --format=%b "$c" | grep -v -E '^[A-Za-z-]+-by: |^Link: |^Fixes: ')
	[ "$(grep -o '[.:][[:space:]]' <<<"$body " | wc -l)" -ge 2 ] && [ "$(wc -w <<<"$body")" -ge 25 ] ||
		{ echo "the message does not say why (its body has $(wc -w <<<"$body") words)"; return 1; }
}

kmake() {
	local cc=gcc
	command -v ccache >/dev/null && cc="ccache gcc"
	KBUILD_BUILD_TIMESTAMP="2024-11-17" KBUILD_BUILD_USER=kvm-asi KBUILD_BUILD_HOST=build \
		make -s -C "$T" O="$BO" CC="$cc" HOSTCC="$cc" -j"$JOBS" "$@"
}

# Whether commit $1 changes only what the kernel build does not read:
# documentation, tools/ (the selftests build on their own), MAINTAINERS,
# checkpatch.
build_irrelevant() {
	! t diff-tree --no-commit-id --name-only -r "$1" |
		grep -q -v -E '^(Documentation/|tools/|MAINTAINERS$|scripts/checkpatch\.pl$)'
}

build_commit() {
	local c=$1 log=$2 frags hash
	t checkout -q -f --detach "$c"
	mkdir -p "$BO"
	frags=("$T/kernel/configs/kvm_guest.config" "$TOP/configs/base.config"
	       "$TOP/configs/asi.config" "$TOP/configs/kvm-builtin.config")
	# Configure again only when a Kconfig file or a fragment changed.
	hash=$({ cat "${frags[@]}"; t ls-files -s -- '*Kconfig*'; } | sha256sum)
	if [ "$(cat "$BO/.asi-config-hash" 2>/dev/null)" != "$hash" ]; then
		(cd "$T" && scripts/kconfig/merge_config.sh -n -O "$BO" "${frags[@]}") >"$log" 2>&1 ||
			return 1
		echo "$hash" >"$BO/.asi-config-hash"
	fi
	# vmlinux: compiled and linked (objtool included); bzImage adds only
	# the compression of it.
	kmake vmlinux >>"$log" 2>&1
}

# The waivers, one "PATCH TYPE COUNT REASON" per line.
waiver_lines() {
	[ ! -f "$WAIVERS" ] || grep -v '^[[:space:]]*\(#\|$\)' "$WAIVERS" || true
}

# Drop from the checkpatch output in variable $2 the warnings that
# patches/upstream/checkpatch-waivers waives for patch $1, and put one line
# per waiver used into variable $3. A waiver holds only for exactly COUNT
# warnings of its type; otherwise it fails, with the reason in $3, so that
# a waiver neither outlives its false positive nor hides a new warning.
waive() {
	local -n _out=$2 _note=$3
	local slug patch type count reason hits bad=0
	slug=$(slug "$1")
	_note=
	while read -r patch type count reason; do
		[ "$patch" = "$slug" ] || continue
		hits=$(grep -c ": WARNING:$type:" <<<"$_out" || true)
		if [ "$hits" != "$count" ]; then
			_note+="${_note:+$'\n'}       waiver of $count $type warning(s): the patch has $hits"
			bad=1
			continue
		fi
		_out=$(grep -v ": WARNING:$type:" <<<"$_out" || true)
		_note+="${_note:+$'\n'}       waived: $hits checkpatch $type warning(s): $reason"
	done < <(waiver_lines)
	return $bad
}

verify_series() {
	need_pkgs $BUILD_PKGS $CHECK_PKGS
	write_series
	local fails=0 n=0 c p name out waived errs warns checks total_checks=0

	# 1. The written patches apply to the pristine source, in order, and
	#    give the tested tree.
	t checkout -q -f --detach refs/tags/pristine
	if t am -q --whitespace=error-all $(ls "$S"/*.patch | grep -v 0000-cover) &&
	   [ "$(t rev-parse HEAD^{tree})" = "$(t rev-parse series-tip^{tree})" ]; then
		echo "ok   the series applies to $(sed -n 's/^package: //p' "$SRC/.git/asi-kernel-version") (pristine)"
	else
		t am --abort 2>/dev/null || true
		echo "FAIL the series does not apply to the pristine source"; fails=$((fails + 1))
	fi
	t checkout -q -f --detach series-tip

	# 2. checkpatch and the messages, patch by patch.
	# checkpatch asks of every patch that adds a file whether MAINTAINERS
	# needs updating; answered once, for every new file, below.
	local cp="$T/scripts/checkpatch.pl --strict -q --terse --no-summary --show-types"
	cp+=" --ignore FILE_PATH_CHANGES"
	while read -r c; do
		n=$((n + 1))
		p=$(ls "$S"/$(printf '%04d' "$n")-*.patch)
		name=$(basename "$p")
		out=$(cd "$T" && $cp "$p" 2>&1 || true)
		if ! waive "$name" out waived; then
			echo "FAIL $name: checkpatch waivers do not match"
			echo "$waived"
			fails=$((fails + 1))
			continue
		fi
		errs=$(grep -c ': ERROR:' <<<"$out" || true)
		warns=$(grep -c ': WARNING:' <<<"$out" || true)
		checks=$(grep -c ': CHECK:' <<<"$out" || true)
		total_checks=$((total_checks + checks))
		if [ "$errs" -gt 0 ] || [ "$warns" -gt 0 ]; then
			echo "FAIL $name: checkpatch: $errs errors, $warns warnings"
			grep -E ': (ERROR|WARNING):' <<<"$out" | sed 's/^/       /'
			fails=$((fails + 1))
		elif ! why=$(msg_ok "$c"); then
			echo "FAIL $name: $why"; fails=$((fails + 1))
		else
			echo "ok   $name${checks:+$( [ "$checks" -gt 0 ] && echo " ($checks checkpatch checks)")}"
			[ -z "$waived" ] || echo "$waived"
		fi
	done < <(t rev-list --reverse refs/tags/pristine..series-tip)

	# A waiver for a patch that is no longer in the series is stale too,
	# and one without a count or a reason is malformed.
	local slug type count reason
	while read -r slug type count reason; do
		[[ "$count" =~ ^[1-9][0-9]*$ ]] && [ -n "$reason" ] ||
			{ echo "FAIL $(basename "$WAIVERS"): '$slug $type $count': needs PATCH TYPE COUNT REASON"; fails=$((fails + 1)); }
		ls "$S"/[0-9][0-9][0-9][0-9]-"$slug".patch >/dev/null 2>&1 ||
			{ echo "FAIL $(basename "$WAIVERS") names $slug, which no patch is"; fails=$((fails + 1)); }
	done < <(waiver_lines)

	# 3. MAINTAINERS names the ASI entry for every new file.
	local f orphans=
	for f in "${!placed[@]}"; do
		(cd "$T" && scripts/get_maintainer.pl --no-git --no-git-fallback --no-rolestats \
			--no-l --no-r --no-s -f "$f" 2>/dev/null) | grep -qF "$AUTHOR" || orphans+=" $f"
	done
	if [ -z "$orphans" ]; then
		echo "ok   MAINTAINERS covers all ${#placed[@]} new files"
	else
		echo "FAIL MAINTAINERS does not name $AUTHOR for:$orphans"; fails=$((fails + 1))
	fi

	# 4. Every commit builds.
	local mode=${BISECT:-all} list t0=$SECONDS built=0 irrelevant=0
	case "$mode" in
	all)  list=$(t rev-list --reverse refs/tags/pristine..series-tip) ;;
	tip)  list=$(t rev-parse series-tip) ;;
	last:[1-9]*)
	      [[ ${mode#last:} =~ ^[0-9]+$ ]] || die "BISECT=$mode: K must be a number"
	      list=$(t rev-list --reverse refs/tags/pristine..series-tip | tail -n "${mode#last:}") ;;
	none) list= ;;
	*)    die "BISECT=$mode: use all, tip, last:K or none" ;;
	esac
	mkdir -p "$LOGS"
	for c in $list; do
		local subj log=$LOGS/bisect-$(t log -1 --format=%h "$c").log
		subj=$(t log -1 --format=%s "$c")
		if [ "$mode" != tip ] && [ "$c" != "$(t rev-parse series-tip)" ] &&
		   build_irrelevant "$c"; then
			irrelevant=$((irrelevant + 1))
			echo "ok   builds: $subj (nothing the kernel build reads changed)"
			continue
		fi
		local tc=$SECONDS
		if build_commit "$c" "$log"; then
			built=$((built + 1))
			echo "ok   builds: $subj ($((SECONDS - tc)) s)"
		else
			echo "FAIL does not build: $subj (log: $log)"
			grep -E 'error|Error' "$log" | head -10 | sed 's/^/       /'
			fails=$((fails + 1))
		fi
	done
	if [ "$mode" != none ]; then
		grep -q '^CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION=y' "$BO/.config" ||
			{ echo "FAIL the last commit's build does not have ASI enabled"; fails=$((fails + 1)); }
	fi
	t checkout -q -f --detach series-tip
	echo
	echo "verify-series: $n patches; of $(wc -w <<<"$list") commits (BISECT=$mode) $built built" \
		"and $irrelevant changed nothing the kernel build reads, in $((SECONDS - t0)) s;" \
		"$total_checks checkpatch checks; $fails failures"
	[ "$fails" -eq 0 ]
}

[ -f "$SRC/.git/asi-assembled" ] || die "no assembled tree; run 'make tree' first"
case "${1:-}" in
write)	write_series ;;
verify)	verify_series ;;
*)	die "usage: scripts/series.sh write|verify" ;;
esac
