#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# l2faults.sh [GUESTS DIVISOR]: where an L2 guest's fallbacks come from.
# Runs l2bench.sh (one guest, the full work, by default) with the ftrace
# "stacktrace" trigger on asi:asi_fault, then prints every distinct
# faulting ip with its call chain and count, most frequent first
# ("l2faults: COUNT ip=SITE < CALLER < ..."), and the VM's fault log.
# Run by the plan bench-faults (docs/performance.md says how).
set -u
T=/sys/kernel/tracing
[ -d $T/events ] || mount -t tracefs tracefs $T
if [ ! -d $T/events/asi/asi_fault ]; then
	echo "l2faults: no asi:asi_fault tracepoint (ASI compiled out?)"
	exit 1
fi
echo 8192 >$T/buffer_size_kb
echo >$T/trace
echo stacktrace >$T/events/asi/asi_fault/trigger || exit 1
echo 1 >$T/events/asi/asi_fault/enable
rc=0
L2_TIMEOUT=${L2_TIMEOUT:-150} /tests/bin/l2bench.sh "${1:-1}" "${2:-1}" || rc=$?
echo 0 >$T/events/asi/asi_fault/enable
echo '!stacktrace' >$T/events/asi/asi_fault/trigger
echo "l2faults: $(grep -c ' asi_fault: ' $T/trace) faults traced, events lost" \
	"to a full buffer: $(awk '/overrun/ { s += $2 } END { print s + 0 }' $T/per_cpu/cpu*/stats)"
# One record per fault: "ip=SITE < CALLER < ..." (the first frames are the
# tracepoint and the page-fault entry).
awk '
/ asi_fault: / { if (st != "") cnt[st]++; st = ""; inst = 0
	match($0, /ip=[^ ]+/); hdr = substr($0, RSTART, RLENGTH); next }
/<stack trace>/ { inst = 1; n = 0; st = hdr; next }
/^ => / { if (inst && n < 9) { st = st " < " $2; n++ } next }
END { if (st != "") cnt[st]++; for (s in cnt) print cnt[s], s }' $T/trace |
	sort -rn | head -30 | sed 's/^/l2faults: /'
exit $rc
