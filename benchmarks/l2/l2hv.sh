#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# l2hv.sh: where an L2 guest that uses QEMU's Hyper-V enlightenments falls
# back (plan bench-faults-cpus). The guest boots the l2hv kernel
# (CONFIG_HYPERV) with two vCPUs and kvm=off, so that Linux takes Hyper-V
# over KVM (it prefers KVM's signature when it sees both): its clock event
# device is synthetic timer 0 in direct mode, its clock source the
# reference TSC page, its IPIs and remote TLB flushes hypercalls, its EOIs
# through the VP assist page where it can. l2mon's ready line says what it
# chose.
#
# First l2faults.sh (one guest, disk read and network send, half the
# work), with KVM's tracepoints off; then the same run again under perf
# stat counting the Hyper-V exits KVM handled ("l2hv: EVENT COUNT").
# Enabled KVM tracepoints fall back themselves (their data is not in any
# domain), so they cannot share the traced run.
set -u
export L2_KERNEL=/l2/bzImage-hyperv L2_SMP=2 \
	L2_CPU=host,-svm,kvm=off,hv-relaxed,hv-vapic,hv-time,hv-vpindex,hv-runtime,hv-synic,hv-stimer,hv-stimer-direct,hv-tlbflush,hv-ipi,hv-frequencies \
	L2_PHASES=${L2_PHASES:-"disk-read net-send"}
{ /tests/bin/l2faults.sh 1 2; echo $? >/tmp/l2hv.rc; } 2>&1 | tee /tmp/l2hv.faults
rc=$(cat /tmp/l2hv.rc)
[ "$rc" = 0 ] || exit "$rc"
# A guest that ignored the enlightenments would pass unnoticed.
if ! grep -q 'l2: ready .*hv=Microsoft_Hyper-V' /tmp/l2hv.faults; then
	echo "l2hv: FAIL: the guest did not take Hyper-V (no hv=Microsoft_Hyper-V in its ready line)"
	exit 1
fi
ev=
for e in hv_stimer_set_count hv_stimer_start_one_shot hv_stimer_expiration \
	 hv_hypercall hv_send_ipi hv_send_ipi_ex hv_flush_tlb hv_flush_tlb_ex \
	 hv_synic_set_msr msr; do
	ev="$ev${ev:+,}kvm:kvm_$e"
done
if ! perf stat -a -x, -o /tmp/l2hv.stat -e "$ev" /tests/bin/l2bench.sh 1 2 >/tmp/l2hv.out 2>&1; then
	tail -20 /tmp/l2hv.out | sed 's/^/l2hv: /'
	echo "l2hv: FAIL: the counted run failed"
	exit 1
fi
grep '^l2mon: guest .*ready' /tmp/l2hv.out | sed 's/^/l2hv: /'
grep -v '^#' /tmp/l2hv.stat | awk -F, 'NF > 2 { print "l2hv: " $3 " " $1 }'
