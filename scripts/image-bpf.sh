#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# scripts/image-bpf.sh: the test image with bpftrace and perf (Debian's,
# with their libraries, about 220 MB more) and page-table-tools' bpftrace
# scripts, for the one boot of make check that runs them (plan "bpf").
# Built from the default image's root (scripts/image.sh default runs
# first).
set -euo pipefail
. "$(dirname "$0")/common.sh"

need_pkgs bpftrace linux-perf cpio
img=$OUT/image
src=$img/root-default
root=$img/root-bpf
[ -d "$src/tests" ] || die "no default image root; run scripts/image.sh default first"
rm -rf "$root"
cp -a "$src" "$root"

# bpftrace, perf and every library they load, at their paths.
install_with_libs "$root" bpftrace perf
# bpftrace's clang includes <linux/types.h>: the kernel's UAPI headers,
# as headers_install wrote them for the selftests.
hdr=$BUILD/default/usr/include
[ -f "$hdr/linux/types.h" ] || die "no installed kernel headers in $hdr; run 'make selftests' first"
mkdir -p "$root/usr/include"
cp -a "$hdr/." "$root/usr/include/"
mkdir -p "$root/tests/bpftrace"
install -m 644 "$TOP"/page-table-tools/bpftrace/*.bt "$root/tests/bpftrace/"

(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio -o -0 -H newc --quiet --reproducible) \
	>"$img/initramfs-bpf.cpio.tmp"
mv "$img/initramfs-bpf.cpio.tmp" "$img/initramfs-bpf.cpio"
note "image $img/initramfs-bpf.cpio: $(du -h "$img/initramfs-bpf.cpio" | cut -f1), bpftrace $(bpftrace --version | cut -d' ' -f2), perf $(perf --version | cut -d' ' -f3)"
