#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# l2perf.sh [GUESTS DIVISOR]: where the emulated machine's CPU time goes
# while L2 guests run the seed's workloads. Runs l2bench.sh (twelve
# guests, an eighth of the work each, by default) under "perf record -a"
# with the cpu-clock software event (the emulated CPU has no PMU), then
# prints perf report's top symbols, over everything and over the kernel
# only, one per line ("l2perf: PERCENT COMMAND SYMBOL"). Run by the plan
# bench-perf, asi=on and asi=off side by side (docs/performance.md says
# how). Exit: l2bench.sh's status, or 1 when perf is missing.
command -v perf >/dev/null || { echo "l2perf: no perf in this image"; exit 1; }
data=/tmp/l2perf.data
rc=0
L2_NO_PERF=1 perf record -q -a -e cpu-clock -F 250 -o $data -- \
	/tests/bin/l2bench.sh "${1:-12}" "${2:-8}" || rc=$?
for what in all kernel; do
	opt=
	[ $what = kernel ] && opt=--kernel
	echo "l2perf: top symbols ($what), percent of samples:"
	perf report -i $data --stdio --no-children $opt --sort comm,sym 2>/dev/null |
		awk '/^ *[0-9.]+%/ { printf "l2perf: %s", $1; for (i = 2; i <= NF; i++)
			printf " %s", $i; print "" }' | head -25
done
exit $rc
