#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# l2perf.sh [GUESTS DIVISOR]: where the emulated machine's CPU time goes
# while L2 guests run the seed's workloads. Runs l2bench.sh (twelve
# guests, an eighth of the work each, by default) under "perf record -a"
# with the cpu-clock software event (the emulated CPU has no PMU), then
# prints, one per line ("l2perf: ..."): the host's samples by object and
# how many of all samples they are (the rest were taken in L2 guests),
# and perf report's shares by command, by object, and its top symbols
# over everything and in the kernel (percent of all samples). Run by the
# plan bench-perf, asi=on and asi=off side by side (docs/performance.md
# says how). Exit: l2bench.sh's status, or 1 when perf is missing.
command -v perf >/dev/null || { echo "l2perf: no perf in this image"; exit 1; }
data=/tmp/l2perf.data
rc=0
L2_NO_PERF=1 perf record -q -a -e cpu-clock -F 250 -o $data -- \
	/tests/bin/l2bench.sh "${1:-12}" "${2:-8}" || rc=$?
# One pass of perf report by command and symbol: its header counts all
# samples, its rows are the top symbols below.
perf report -i $data --stdio --no-children --sort comm,sym >/tmp/l2perf.raw 2>/dev/null
report=/tmp/l2perf.report
awk '/^ *[0-9.]+%/ { printf "%s", $1; for (i = 2; i <= NF; i++)
	printf " %s", $i; print "" }' /tmp/l2perf.raw >$report
# The host's samples by the object they hit (perf script gives host
# samples only: KVM's perf callbacks give a sample taken while a vCPU
# runs its guest to the guest), next to the count of all samples.
perf script -i $data -F ip,dso 2>/dev/null >/tmp/l2perf.ips
n=$(wc -l </tmp/l2perf.ips)
sed 's/.*(\(.*\))$/\1/; t; s/.*/(no host object)/' /tmp/l2perf.ips | sort | uniq -c |
	sort -rn | head -8 |
	awk -v n="$n" '{ c = $1; $1 = ""; printf "l2perf: samples in%s: %.1f%%\n", $0,
		100 * c / n }'
all=$(sed -n "s/^# Samples: \([0-9.]*[KM]*\)  *of event 'cpu-clock'.*/\1/p" /tmp/l2perf.raw |
	head -1)
echo "l2perf: $n samples in the host, of $all in all (the rest: in L2 guests," \
	"which perf script leaves out)"
echo "l2perf: by command, percent of all samples:"
perf report -i $data --stdio --no-children --sort comm 2>/dev/null |
	grep -E '^ *[0-9.]+%' | head -12 | sed 's/^ */l2perf: /'
echo "l2perf: by object, percent of all samples:"
perf report -i $data --stdio --no-children --sort dso 2>/dev/null |
	grep -E '^ *[0-9.]+%' | head -12 | sed 's/^ */l2perf: /'
echo "l2perf: top symbols, percent of all samples:"
head -25 $report | sed 's/^/l2perf: /'
echo "l2perf: top kernel symbols, percent of all samples:"
grep ' \[k\] ' $report | head -25 | sed 's/^/l2perf: /'
exit $rc
