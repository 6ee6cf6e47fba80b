# SPDX-License-Identifier: GPL-2.0
# Shared settings for the project's scripts. Sourced, not run.

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$TOP/out}
SRC=$OUT/linux			# the assembled kernel tree (a git repository)
BUILD=$OUT/build		# kernel build directories, one per configuration
LOGS=$OUT/logs
TARBALL=/usr/src/linux-source-6.12.tar.xz
SRCPKG=linux-source-6.12

# Directories whose files are laid over the kernel tree at their own paths.
# Of selftests/, only tools/ is kernel-side (harness/ runs on the host).
OVERLAYS="asi-core asi-kvm selftests"

# overlay_files DIR: the files of an overlay directory, relative to it.
overlay_files() {
	local sub=.
	[ "$1" = selftests ] && sub=tools
	[ -d "$TOP/$1/$sub" ] || return 0
	(cd "$TOP/$1" && find "$sub" -type f ! -name '*~' ! -name '.*.swp' | sed 's|^\./||' | sort)
}

JOBS=${JOBS:-$(($(nproc) + 1))}

# ccache keys relative to the checkout, so that another clone (CI's, on
# this machine) hits the same cache.
export CCACHE_BASEDIR=$TOP

die() { echo "error: $*" >&2; exit 1; }
note() { echo ">>> $*" >&2; }

# Fixed identity for commits the scripts make, so that the assembled tree
# is reproducible and 'make refresh' exports byte-identical patches.
export GIT_COMMITTER_NAME="kvm-asi tree" GIT_COMMITTER_EMAIL="tree@kvm-asi.invalid"
export GIT_COMMITTER_DATE="2024-11-17 00:00:00 +0000"

# Install Debian packages that are missing (we are root on a Debian machine).
need_pkgs() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	note "installing ${missing[*]}"
	if [ ! -f "$OUT/.apt-updated" ]; then
		apt-get update -qq || die "apt-get update failed"
		mkdir -p "$OUT" && touch "$OUT/.apt-updated"
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		"${missing[@]}" >"$OUT/apt.log" 2>&1 ||
		{ tail -20 "$OUT/apt.log" >&2; die "apt-get install ${missing[*]} failed"; }
}

# install_with_libs ROOT TOOL...: each TOOL (a command on PATH) into ROOT
# at /usr/bin/TOOL, with every shared library it loads at its own path.
install_with_libs() {
	local root=$1 tool bin lib
	shift
	for tool; do
		bin=$(readlink -f "$(command -v "$tool")") || die "no $tool"
		install -D -m 755 "$bin" "$root/usr/bin/$tool"
		ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' |
			sort -u | while read -r lib; do
				install -D -m 755 "$(readlink -f "$lib")" "$root$lib"
			done
	done
}

BUILD_PKGS="build-essential flex bison bc libelf-dev libssl-dev cpio ccache xz-utils git python3 kmod rsync"
# checkpatch.pl runs scripts/spdxcheck.py, which needs these.
CHECK_PKGS="python3-ply python3-git"
RUN_PKGS="busybox-static"	# and QEMU: need_qemu()

# The emulator: QEMU 10 from Debian's bookworm-backports suite. Debian 12's
# QEMU 7.2 stalls with twelve L2 guests and its multi-threaded TCG can take
# a host interrupt between VMRUN's exit and KVM's restore of the host's GS
# base (docs/performance.md); QEMU 10's does not, which the twelve-guest
# workloads need. The suite is added with a pin at priority 100 (as
# Debian's own default for backports), so that nothing but what
# need_qemu() installs, and later upgrades of that, ever comes from it.
# KVM_ASI_QEMU=system keeps whatever QEMU is installed (with a warning).
QEMU_SUITE=bookworm-backports
QEMU_MIN_MAJOR=10
QEMU_SOURCES=/etc/apt/sources.list.d/kvm-asi-backports.sources
QEMU_PIN=/etc/apt/preferences.d/kvm-asi-backports

# Empty when no QEMU is installed (a fresh machine): under pipefail the
# missing command must not fail the caller's assignment.
qemu_major() {
	command -v qemu-system-x86_64 >/dev/null || return 0
	qemu-system-x86_64 --version 2>/dev/null |
		sed -n 's/^QEMU emulator version \([0-9]*\)\..*/\1/p'
}

need_qemu() {
	local have
	have=$(qemu_major)
	[ -n "$have" ] && [ "$have" -ge "$QEMU_MIN_MAJOR" ] && return 0
	if [ "${KVM_ASI_QEMU:-}" = system ]; then
		need_pkgs qemu-system-x86
		note "KVM_ASI_QEMU=system: using $(qemu-system-x86_64 --version | head -1)" \
			"(not $QEMU_SUITE's QEMU $QEMU_MIN_MAJOR: twelve L2 guests may stall)"
		return 0
	fi
	note "installing QEMU $QEMU_MIN_MAJOR from Debian's $QEMU_SUITE (pinned: nothing else from it)"
	if [ ! -f "$QEMU_SOURCES" ]; then
		cat >"$QEMU_SOURCES" <<-EOT
		# Added by kvm-asi (scripts/common.sh, need_qemu): QEMU $QEMU_MIN_MAJOR.
		Types: deb
		URIs: http://deb.debian.org/debian
		Suites: $QEMU_SUITE
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
		EOT
	fi
	if [ ! -f "$QEMU_PIN" ]; then
		cat >"$QEMU_PIN" <<-EOT
		Explanation: kvm-asi: only what is installed from $QEMU_SUITE explicitly
		Package: *
		Pin: release n=$QEMU_SUITE
		Pin-Priority: 100
		EOT
	fi
	apt-get update -qq >"$OUT/apt.log" 2>&1 ||
		{ tail -5 "$OUT/apt.log" >&2
		  die "apt-get update with $QEMU_SUITE failed: QEMU $QEMU_MIN_MAJOR cannot be installed" \
			"(to run with the installed QEMU instead: KVM_ASI_QEMU=system)"; }
	mkdir -p "$OUT" && touch "$OUT/.apt-updated"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		-t "$QEMU_SUITE" qemu-system-x86 qemu-system-data >>"$OUT/apt.log" 2>&1 ||
		{ tail -20 "$OUT/apt.log" >&2
		  die "installing qemu-system-x86 from $QEMU_SUITE failed" \
			"(to run with the installed QEMU instead: KVM_ASI_QEMU=system)"; }
	have=$(qemu_major)
	[ -n "$have" ] && [ "$have" -ge "$QEMU_MIN_MAJOR" ] ||
		die "$QEMU_SUITE gave $(qemu-system-x86_64 --version | head -1), not QEMU $QEMU_MIN_MAJOR"
	note "$(qemu-system-x86_64 --version | head -1)"
}
# The Bochs machine (make check-vmx): an Intel CPU with VMX and PCID,
# booted from an ISO made with isolinux and xorriso.
BOCHS_PKGS="bochs bochsbios vgabios isolinux syslinux-common xorriso"
