#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# make demo, inside the emulated machine: show ASI's state, run KVM guests,
# show what ASI counted for them.
cpus=/sys/kernel/debug/asi/cpus
echo "=== ASI state (/sys/kernel/debug/asi/state)"
cat /sys/kernel/debug/asi/state || exit 1
echo "=== boot log"
dmesg | grep -E 'ASI:|kvm_amd|smp: Brought' | sed 's/^/  /'
echo "=== ASI per CPU before the guests (/sys/kernel/debug/asi/cpus)"
cat $cpus 2>/dev/null || echo "  (ASI is off)"
echo "=== KVM guests: upstream selftests x86_64/userspace_io_test (port I/O exits"
echo "    to user space) and x86_64/cpuid_test (CPUID exits handled in the kernel)"
/tests/kvm/x86_64/userspace_io_test || exit 1
/tests/kvm/x86_64/cpuid_test || exit 1
echo "=== ASI per CPU after them: switches into a VM's restricted table (enters),"
echo "    exits from it by reason, fallback faults and the last one"
cat $cpus 2>/dev/null || echo "  (ASI is off)"
echo "=== live ASI domains (/sys/kernel/debug/asi/domains): none, the VMs are gone"
cat /sys/kernel/debug/asi/domains 2>/dev/null || echo "  (ASI is off)"
echo "=== What this shows: every VM-entry switched to the VM's table and fell back"
echo "    once, at __svm_vcpu_run, because the vCPU's own data is not mapped yet:"
echo "    the guests still run on the full table. See README.md, State of the work."
