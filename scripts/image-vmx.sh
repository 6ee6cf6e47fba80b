#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# scripts/image-vmx.sh: the slim test image for the Bochs machine (make
# check-vmx): out/image/initramfs-vmx.cpio.gz. Bochs's BIOS reads the
# initramfs from an emulated CD-ROM and the kernel unpacks it, both at
# tens of emulated MIPS, so this image carries only what the vmx plans
# (selftests/harness/plans/vmx*.plan) run: busybox, the init, the guest
# scripts, the project's test scripts and the KVM selftests the plans
# name. Built from the default image's root (scripts/image.sh default
# runs first). Installs Bochs and the ISO tools the harness boots it with.
set -euo pipefail
. "$(dirname "$0")/common.sh"

need_pkgs $BOCHS_PKGS cpio gzip
img=$OUT/image
src=$img/root-default
root=$img/root-vmx
[ -d "$src/tests/kvm" ] || die "no default image root; run scripts/image.sh default first"
rm -rf "$root"
mkdir -p "$root/tests/kvm" "$root/tests/plans"
# Everything but the KVM selftests and the plans.
(cd "$src" && find . -mindepth 1 -maxdepth 1 ! -name tests -print0 | xargs -0 cp -a -t "$root")
(cd "$src/tests" && find . -mindepth 1 -maxdepth 1 ! -name kvm ! -name plans -print0 |
	xargs -0 cp -a -t "$root/tests")
# The harness's own files from the project, newer than the default image's
# maybe.
install -m 755 "$TOP/selftests/harness/init" "$root/init"
install -m 755 "$TOP"/selftests/harness/guest/* "$root/tests/bin/"
# The vmx plans and the KVM selftests they run.
for p in "$TOP"/selftests/harness/plans/vmx*.plan; do
	cp "$p" "$root/tests/plans/$(basename "$p" .plan)"
done
n=0
for t in $(cat "$TOP"/selftests/harness/plans/vmx*.plan | grep -vE '^(#|$)' |
	grep -oE '/tests/kvm/[^ ]+' | sort -u); do
	[ -f "$src$t" ] || die "${t#/tests/kvm/} (in a vmx plan) is not in the KVM selftest build"
	mkdir -p "$(dirname "$root$t")"
	cp -a "$src$t" "$root$t"
	n=$((n + 1))
done

(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio -o -0 -H newc --quiet --reproducible) |
	gzip -1 >"$img/initramfs-vmx.cpio.gz.tmp"
mv "$img/initramfs-vmx.cpio.gz.tmp" "$img/initramfs-vmx.cpio.gz"
note "image $img/initramfs-vmx.cpio.gz: $(du -h "$img/initramfs-vmx.cpio.gz" | cut -f1), $n KVM selftests"
