#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# asi_fault_stacks.sh COMMAND [ARG...]: where the fallback faults of a
# workload come from. Runs COMMAND with the ftrace "stacktrace" trigger on
# asi:asi_fault, then prints every distinct faulting ip with its call
# chain and count, most frequent first, one per line:
#
#   asi_fault_stacks: COUNT ip=SITE < CALLER < CALLER ...
#
# and how many faults were traced and lost to a full buffer. A tool, not
# a test: its exit status is COMMAND's, or 1 when tracing cannot be set
# up. Environment: ASI_STACKS_TOP (lines printed, default 30),
# ASI_STACKS_DEPTH (callers per line, default 9), ASI_STACKS_PREFIX (the
# line prefix, default "asi_fault_stacks").

T=/sys/kernel/tracing
top=${ASI_STACKS_TOP:-30}
depth=${ASI_STACKS_DEPTH:-9}
prefix=${ASI_STACKS_PREFIX:-asi_fault_stacks}

if [ $# -eq 0 ]; then
	echo "usage: $0 COMMAND [ARG...]" >&2
	exit 1
fi
case "$top$depth" in
*[!0-9]*)
	echo "$prefix: ASI_STACKS_TOP and ASI_STACKS_DEPTH must be numbers" >&2
	exit 1
	;;
esac
[ -d $T/events ] || mount -t tracefs nodev $T 2>/dev/null
if [ ! -d $T/events/asi/asi_fault ]; then
	echo "$prefix: no asi:asi_fault tracepoint (ASI compiled out, or no tracefs)" >&2
	exit 1
fi
echo 8192 >$T/buffer_size_kb
echo >$T/trace
echo stacktrace >$T/events/asi/asi_fault/trigger || exit 1
echo 1 >$T/events/asi/asi_fault/enable
rc=0
"$@" || rc=$?
echo 0 >$T/events/asi/asi_fault/enable
echo '!stacktrace' >$T/events/asi/asi_fault/trigger
echo "$prefix: $(grep -c ' asi_fault: ' $T/trace) faults traced, events lost" \
	"to a full buffer: $(awk '/overrun/ { s += $2 } END { print s + 0 }' $T/per_cpu/cpu*/stats)"
# One record per fault: "ip=SITE < CALLER < ..." (the first frames are the
# tracepoint and the page-fault entry).
awk -v depth="$depth" '
/ asi_fault: / { if (st != "") cnt[st]++; st = ""; inst = 0
	match($0, /ip=[^ ]+/); hdr = substr($0, RSTART, RLENGTH); next }
/<stack trace>/ { inst = 1; n = 0; st = hdr; next }
/^ => / { if (inst && n < depth) { st = st " < " $2; n++ } next }
END { if (st != "") cnt[st]++; for (s in cnt) print cnt[s], s }' $T/trace |
	sort -rn | head -n "$top" | sed "s/^/$prefix: /"
exit $rc
