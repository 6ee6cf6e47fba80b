#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# make demo, inside the emulated machine: show ASI's state, run a KVM guest,
# show what KVM counted for it.
echo "=== ASI state (/sys/kernel/debug/asi/state)"
cat /sys/kernel/debug/asi/state || exit 1
echo "=== boot log"
dmesg | grep -E 'ASI:|kvm_amd|SVM' | sed 's/^/  /'
echo "=== a KVM guest: 10000 port I/O exits to user space (x86_64/userspace_io_test), then CPUID"
/tests/kvm/x86_64/userspace_io_test || exit 1
/tests/kvm/x86_64/cpuid_test || exit 1
echo "=== KVM's global counters (/sys/kernel/debug/kvm)"
for f in exits io_exits halt_exits insn_emulation; do
	[ -r /sys/kernel/debug/kvm/$f ] && printf '  %-16s %s\n' "$f" "$(cat /sys/kernel/debug/kvm/$f)"
done
echo "=== ASI: restricted page tables, switches and fallback faults arrive with"
echo "    the asi-core and asi-kvm work; with this kernel ASI is the boot switch only."
