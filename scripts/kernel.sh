#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# scripts/kernel.sh [NAME...]: configure and build kernel configuration NAME
# (default: "default") out of tree in out/build/NAME. See configs/README.md.
# The configuration is regenerated only when a fragment changed; the build
# is make's own incremental build, through ccache when it is installed.
set -euo pipefail
. "$(dirname "$0")/common.sh"

fragments() {
	local f=("$SRC/kernel/configs/kvm_guest.config" "$TOP/configs/base.config")
	case "$1" in
	default) f+=("$TOP/configs/asi.config" "$TOP/configs/kvm-builtin.config") ;;
	modules) f+=("$TOP/configs/asi.config" "$TOP/configs/kvm-modules.config") ;;
	noasi)   f+=("$TOP/configs/noasi.config" "$TOP/configs/kvm-builtin.config") ;;
	debug)   f+=("$TOP/configs/asi.config" "$TOP/configs/kvm-builtin.config"
		     "$TOP/configs/debug.config") ;;
	l2hv)    f+=("$TOP/configs/noasi.config" "$TOP/configs/kvm-builtin.config"
		     "$TOP/configs/hyperv-guest.config") ;;
	*) die "unknown kernel configuration '$1' (known: default modules noasi debug l2hv)" ;;
	esac
	printf '%s\n' "${f[@]}"
}

kmake() {
	local cc=gcc
	command -v ccache >/dev/null && cc="ccache gcc"
	# Fixed build identity: reproducible images and better ccache hits.
	KBUILD_BUILD_TIMESTAMP="2024-11-17" KBUILD_BUILD_USER=kvm-asi KBUILD_BUILD_HOST=build \
		make -s -C "$SRC" O="$O" CC="$cc" HOSTCC="$cc" -j"$JOBS" "$@"
}

build_one() {
	local name=$1 frags hash log
	O=$BUILD/$name
	mkdir -p "$O" "$LOGS"
	mapfile -t frags < <(fragments "$name")
	# Reconfigure when a fragment or any Kconfig file of the tree changed.
	hash=$({ cat "${frags[@]}"; git -C "$SRC" ls-files -s -- '*Kconfig*'; } | sha256sum | cut -d' ' -f1)
	log=$LOGS/kernel-$name.log
	if [ ! -f "$O/.config" ] || [ "$(cat "$O/.asi-config-hash" 2>/dev/null)" != "$hash" ]; then
		note "configuring $name"
		(cd "$SRC" && scripts/kconfig/merge_config.sh -n -O "$O" "${frags[@]}") >"$log.config" 2>&1 ||
			{ tail -20 "$log.config" >&2; die "configuring $name failed (see $log.config)"; }
		# "is not set" requests for symbols that are not visible are met.
		bad=$(awk '/^Value requested for/ { sym = $4 }
			   /^Requested value:/ { req = $0 }
			   /^Actual value:/ { if (req !~ /is not set/ || $0 !~ /^Actual value: *$/)
						print "  " sym ": " req " / " $0 }' "$log.config")
		[ -z "$bad" ] || die "configuration $name: requested values that did not make it into .config:
$bad"
		echo "$hash" >"$O/.asi-config-hash"
	fi
	note "building $name"
	local targets=(bzImage)
	grep -q '^CONFIG_MODULES=y' "$O/.config" && targets+=(modules)
	local t0=$SECONDS head0 head1 try
	# A tree that moves during the build (make tree, refresh's rebase, a
	# commit in out/linux) leaves objects compiled from two states that
	# make will not rebuild: struct layouts that disagree, a kernel that
	# oopses. Seen once (the compiled-out kernel oopsed in
	# kvm_cpu_has_extint(): i8259.o had another struct kvm layout than
	# irq.o), and a clean build through ccache brought the same stale
	# objects back: rebuild from clean then, recompiling every object
	# and replacing what ccache holds for it (CCACHE_RECACHE).
	for try in 1 2; do
		head0=$(git -C "$SRC" rev-parse HEAD)
		if ! kmake "${targets[@]}" >"$log" 2>&1; then
			grep -E 'error|Error' "$log" | head -30 >&2
			die "building $name failed (full log: $log)"
		fi
		head1=$(git -C "$SRC" rev-parse HEAD)
		[ "$head0" != "$head1" ] || break
		[ "$try" -eq 1 ] ||
			die "out/linux moved again during the clean build of $name ($head0 -> $head1)"
		note "out/linux moved during the build of $name (${head0:0:7} -> ${head1:0:7}): building it again from clean, without ccache's copies"
		kmake clean >>"$log" 2>&1
		export CCACHE_RECACHE=1
	done
	unset CCACHE_RECACHE
	if grep -q '^CONFIG_MODULES=y' "$O/.config"; then
		rm -rf "$O/modinst"
		kmake INSTALL_MOD_PATH="$O/modinst" INSTALL_MOD_STRIP=1 modules_install >>"$log" 2>&1 ||
			die "modules_install for $name failed (see $log)"
	fi
	grep -E 'warning:' "$log" | grep -v '^scripts/' | head -20 >&2 || true
	note "built $name in $((SECONDS - t0)) s: $O/arch/x86/boot/bzImage"
}

need_pkgs $BUILD_PKGS
[ -f "$SRC/.git/asi-assembled" ] || die "no assembled tree; run 'make tree' first"
[ $# -gt 0 ] || set -- default
for n in "$@"; do
	build_one "$n"
done
