#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# vmx_machine.sh: the first test of the vmx plan (Bochs, make check-vmx).
# Prints what the emulated CPU offers (model, CPUID flags, VMX flags, the
# kernel's view of the speculation vulnerabilities, kvm_intel's features,
# ASI's state) as "vmx-machine:" lines, and fails unless kvm_intel loaded
# with EPT, VPID and unrestricted guest and, with asi=on, ASI runs its
# restricted tables under PCIDs of their own: without them the plan would
# test nothing it is meant to. The harness checks the same lines.

fail=0
say() { echo "vmx-machine: $*"; }
bad() { say "FAIL: $*"; fail=1; }

say "cpu:$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2-)"
say "flags:$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2-)"
say "vmx flags:$(grep -m1 '^vmx flags' /proc/cpuinfo | cut -d: -f2-)"
say "topology: $(grep -cE '^processor' /proc/cpuinfo) CPUs,$(grep -m1 '^siblings' /proc/cpuinfo | cut -d: -f2) siblings,$(grep -m1 '^cpu cores' /proc/cpuinfo | cut -d: -f2) cores"
say "bugs:$(grep -m1 '^bugs' /proc/cpuinfo | cut -d: -f2-)"
for v in /sys/devices/system/cpu/vulnerabilities/*; do
	say "vulnerability $(basename "$v"): $(cat "$v")"
done

# KVM is built in: kvm_intel's parameters exist (with their defaults) even
# where its init failed, so the kernel log decides which vendor module runs.
p=/sys/module/kvm_intel/parameters
if dmesg | grep -E 'kvm_intel: .*(not supported|disabled|[Ff]ail)'; then
	bad "kvm_intel did not load (the kernel log above)"
elif dmesg | grep -E 'kvm_amd: .*(enabled|supported)$'; then
	bad "kvm_amd runs KVM here, not kvm_intel"
elif [ -d "$p" ] && [ -e /dev/kvm ]; then
	line="kvm_intel"
	for k in ept unrestricted_guest vpid flexpriority enable_apicv pml \
		enable_shadow_vmcs nested vmentry_l1d_flush; do
		[ -r "$p/$k" ] && line="$line $k=$(cat "$p/$k")"
	done
	say "$line"
	for k in ept unrestricted_guest vpid; do
		[ "$(cat "$p/$k")" = Y ] || bad "kvm_intel runs without $k"
	done
else
	bad "kvm_intel did not load (no $p or no /dev/kvm)"
	dmesg | grep -iE 'kvm|vmx' | sed 's/^/vmx-machine: dmesg: /'
fi

st=/sys/kernel/debug/asi/state
if [ -r "$st" ]; then
	sed 's/^/vmx-machine: asi /' "$st"
	if grep -q '^enabled: on' "$st" && ! grep -q '^pcid: on' "$st"; then
		bad "asi=on but ASI's restricted tables run without PCIDs"
	fi
else
	bad "no $st"
fi
grep -q ' pcid' /proc/cpuinfo || bad "the CPU has no PCID"
grep -q ' invpcid' /proc/cpuinfo || bad "the CPU has no INVPCID"
exit $fail
