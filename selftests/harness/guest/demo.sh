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
echo "=== ASI per CPU (/sys/kernel/debug/asi/cpus): switches into a restricted"
echo "    table, exits by reason, fallback faults, the last one"
cat /sys/kernel/debug/asi/cpus 2>/dev/null || echo "  (ASI is off)"
echo "=== live ASI domains (/sys/kernel/debug/asi/domains), after the guests exited"
cat /sys/kernel/debug/asi/domains 2>/dev/null || echo "  (ASI is off)"
echo "=== a guest with its stats read while it runs: /sys/kernel/debug/kvm/*/asi_*"
/tests/kvm/x86_64/userspace_io_test >/dev/null 2>&1 &
sleep 1
for f in /sys/kernel/debug/kvm/*/asi_enters /sys/kernel/debug/kvm/*/asi_fallbacks; do
	[ -r "$f" ] && printf '  %-40s %s\n' "$f" "$(cat "$f")"
done
wait
