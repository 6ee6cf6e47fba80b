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

BUILD_PKGS="build-essential flex bison bc libelf-dev libssl-dev cpio ccache xz-utils git python3 kmod rsync"
# checkpatch.pl runs scripts/spdxcheck.py, which needs these.
CHECK_PKGS="python3-ply python3-git"
RUN_PKGS="qemu-system-x86 busybox-static"
# The Bochs machine (make check-vmx): an Intel CPU with VMX and PCID,
# booted from an ISO made with isolinux and xorriso.
BOCHS_PKGS="bochs bochsbios vgabios isolinux syslinux-common xorriso"
