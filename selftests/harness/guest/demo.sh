#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# make demo, inside the emulated machine: ASI's state, four KVM guests
# running the common exits on their VMs' restricted tables, one VM's table
# as asi-pt and ptdump show it, and at the end the top fallback-fault
# sites (bpftrace, ranked by asi-pt suggest) and the isolation audit's
# verdict. "demo.sh --live" is the part run while the VMs are live.
pt=/tests/bin/asi-pt
kvm=/sys/kernel/debug/kvm

if [ "$1" = --live ]; then
	vm=$(cd $kvm && ls -d "$ASI_TEST_PID"-* | head -1)
	echo "=== VM $vm's restricted table: pages mapped per owner class (asi-pt summary)"
	$pt summary "$vm" || exit 1
	echo "=== what it maps and why, first lines ($kvm/$vm/asi/mappings)"
	head -12 $kvm/$vm/asi/mappings
	echo "=== the table itself in ptdump's format, first lines (asi/pagetable)"
	head -16 $kvm/$vm/asi/pagetable
	echo "=== the isolation audit of every live VM (asi-pt audit)"
	$pt audit >/tmp/demo.audit
	rc=$?
	cat /tmp/demo.audit
	exit $rc
fi

echo "=== ASI state (/sys/kernel/debug/asi/state)"
cat /sys/kernel/debug/asi/state || exit 1
echo "=== boot log"
dmesg | grep -E 'ASI:|kvm_amd|smp: Brought' | sed 's/^/  /'
if ! grep -q '^enabled: on' /sys/kernel/debug/asi/state; then
	echo "=== ASI is off: a guest runs on the full table, nothing to show"
	exec /tests/kvm/x86_64/cpuid_test
fi

bt=
if command -v bpftrace >/dev/null && [ -f /tests/bpftrace/asi_faults.bt ]; then
	[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
	echo "=== tracing fallback faults with bpftrace (page-table-tools/bpftrace/asi_faults.bt)"
	bpftrace /tests/bpftrace/asi_faults.bt >/tmp/demo.faults 2>&1 &
	bt=$!
	i=0
	until grep -q '^Attaching' /tmp/demo.faults 2>/dev/null || [ $i -ge 180 ]; do
		sleep 1
		i=$((i + 1))
	done
fi
echo "=== four VMs with two vCPUs each run CPUID, MSR, PIC, IOAPIC and user-space"
echo "    PIO exits for 3 s, their vCPU threads moved between CPUs"
/tests/kvm/x86_64/asi_multi_vm_test -v 4 -c 2 -s 3 -x "$0 --live" || exit 1
echo "=== ASI per CPU (/sys/kernel/debug/asi/cpus): switches onto restricted tables,"
echo "    exits by reason, fallback faults"
cut -f1-7,10-12 /sys/kernel/debug/asi/cpus
if [ -n "$bt" ]; then
	kill -INT $bt
	wait $bt
	echo "=== top fallback-fault sites, from bpftrace, ranked by asi-pt suggest"
	$pt suggest /tmp/demo.faults | head -12
else
	echo "=== top fallback-fault sites (no bpftrace in this image: the kernel's log)"
	$pt suggest /sys/kernel/debug/asi/faults | head -12
fi
echo "=== verdict of the isolation audit, with the four VMs live:"
tail -1 /tmp/demo.audit
grep -q 'violations: passed' /tmp/demo.audit
