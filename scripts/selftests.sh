#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the KVM selftests of the assembled tree, statically linked, into
# out/build/selftests/kvm, against the UAPI headers of the default build.
set -euo pipefail
. "$(dirname "$0")/common.sh"

need_pkgs $BUILD_PKGS
K=$BUILD/default
[ -f "$K/.config" ] || die "no default kernel build; run 'make kernel' first"
log=$LOGS/selftests.log
mkdir -p "$LOGS" "$BUILD/selftests/kvm"
make -s -C "$SRC" O="$K" headers_install >"$log" 2>&1 || die "headers_install failed (see $log)"
cc=gcc
command -v ccache >/dev/null && cc="ccache gcc"
t0=$SECONDS
if ! LDFLAGS=-static make -C "$SRC/tools/testing/selftests/kvm" -j"$JOBS" CC="$cc" \
	OUTPUT="$BUILD/selftests/kvm" KHDR_INCLUDES="-isystem $K/usr/include" >>"$log" 2>&1; then
	grep -E 'error' "$log" | head -20 >&2
	die "building the KVM selftests failed (see $log)"
fi
note "KVM selftests built in $((SECONDS - t0)) s: $BUILD/selftests/kvm"
