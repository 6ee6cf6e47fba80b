#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# scripts/image-bench.sh: the test image for make bench. The default image
# plus what runs the seed's workloads in L2 guests (benchmarks/l2): Debian's
# QEMU with its libraries and the firmware of its microvm machine, l2mon and
# l2bench.sh, and the L2 guest (the default kernel's bzImage, booted
# asi=off, and a busybox initramfs with l2io; the Hyper-V-aware L2 kernel
# too when make kernel-l2hv built it). Built from the default
# image's root (scripts/image.sh default runs first).
set -euo pipefail
. "$(dirname "$0")/common.sh"

need_pkgs busybox-static cpio gcc libc6-dev linux-perf
need_qemu
img=$OUT/image
src=$img/root-default
root=$img/root-bench
l2=$img/root-l2
bin=$BUILD/bench
kernel=$BUILD/default/arch/x86/boot/bzImage
[ -d "$src/tests" ] || die "no default image root; run scripts/image.sh default first"
[ -f "$kernel" ] || die "no default kernel $kernel"
mkdir -p "$bin"
for t in l2mon l2io; do
	gcc -O2 -Wall -Wextra -Werror -static -o "$bin/$t" "$TOP/benchmarks/l2/$t.c" ||
		die "building $t failed"
done

# The L2 guest's initramfs.
rm -rf "$l2"
mkdir -p "$l2"/{bin,proc,sys,dev,tmp}
cp /bin/busybox "$l2/bin/busybox"
for a in $(/bin/busybox --list); do
	[ "$a" = busybox ] || ln -s busybox "$l2/bin/$a"
done
install -m 755 "$TOP/benchmarks/l2/init" "$l2/init"
install -m 755 "$bin/l2io" "$l2/bin/l2io"

rm -rf "$root"
cp -a "$src" "$root"
mkdir -p "$root/l2"
(cd "$l2" && find . -print0 | LC_ALL=C sort -z | cpio -o -0 -H newc --quiet --reproducible) \
	>"$root/l2/initramfs.cpio"
cp "$kernel" "$root/l2/bzImage"
# The Hyper-V-aware L2 kernel (make kernel-l2hv), for plan
# bench-faults-cpus, when it was built.
l2hv=$BUILD/l2hv/arch/x86/boot/bzImage
if [ -f "$l2hv" ]; then
	cp "$l2hv" "$root/l2/bzImage-hyperv"
else
	note "no $l2hv: plan bench-faults-cpus's Hyper-V guest will fail (make kernel-l2hv first)"
fi
install -m 755 "$bin/l2mon" "$TOP/benchmarks/l2/l2bench.sh" "$TOP/benchmarks/l2/l2faults.sh" \
	"$TOP/benchmarks/l2/l2perf.sh" "$TOP/benchmarks/l2/l2hv.sh" "$root/tests/bin/"

# QEMU and perf (l2mon runs perf stat over each phase), every library
# they load, and the microvm firmware.
install_with_libs "$root" qemu-system-x86_64 perf
# Debian's QEMU 10 finds SeaBIOS's images in /usr/share/seabios (its
# firmware path); the L2 guests' QEMU gets them all in /usr/share/qemu (-L).
mkdir -p "$root/usr/share/qemu"
for f in bios-microvm.bin qboot.rom linuxboot_dma.bin; do
	src=
	for d in /usr/share/qemu /usr/share/seabios; do
		[ -e "$d/$f" ] && { src=$d/$f; break; }
	done
	[ -n "$src" ] || die "no $f in /usr/share/qemu or /usr/share/seabios"
	cp -L "$src" "$root/usr/share/qemu/"
done

(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio -o -0 -H newc --quiet --reproducible) \
	>"$img/initramfs-bench.cpio.tmp"
mv "$img/initramfs-bench.cpio.tmp" "$img/initramfs-bench.cpio"
note "image $img/initramfs-bench.cpio: $(du -h "$img/initramfs-bench.cpio" | cut -f1), $(qemu-system-x86_64 --version | head -1)"
