#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The cost of one ASI enter+leave pair next to a plain CR3 reload, from
# /sys/kernel/debug/asi/bench, and checks that the benchmark did what it
# names: every pair was a counted switch into a restricted table and out
# again, and bad input is refused. Prints the figures for the log (KTAP
# diagnostics); they are emulator figures (TCG flushes its whole TLB on
# every CR3 write, and the emulated CPU has no PCID). Skips with ASI off.
# KTAP output; exit: 0 pass, 1 fail, 4 skip.
#
# Usage: asi_switch_bench.sh [ITERATIONS]

. "$(dirname "$0")/asi_lib.sh"

n=${1:-20000}
bench=$ASI_DEBUGFS/bench

asi_require_on
[ -e "$bench" ] ||
	asi_skip_all "no asi/bench (CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_BENCH)"
asi_require_files "$bench" "$ASI_CPUS"
asi_plan 3

for bad in 0 100001 x; do
	if echo "$bad" >"$bench" 2>/dev/null; then
		asi_fail "asi/bench accepted '$bad'"
	fi
done
asi_result "bad input refused"

e0=$(asi_sum 3) x0=$(asi_sum 4)
echo "$n" >"$bench" || asi_bail "writing $n to asi/bench failed"
e1=$(asi_sum 3) x1=$(asi_sum 4)
asi_show "$bench"

if [ $((e1 - e0)) -lt "$n" ] || [ $((x1 - x0)) -lt "$n" ]; then
	asi_fail "$((e1 - e0)) enters and $((x1 - x0)) owner exits for $n pairs"
fi
asi_result "pairs counted"

grep -q "^iterations: $n\$" "$bench" || asi_fail "result is not for $n iterations"
for k in enter_leave_cycles cr3_reload_cycles; do
	v=$(awk -v k="$k:" '$1 == k { print $2 }' "$bench")
	[ -n "$v" ] && [ "$v" -gt 0 ] || asi_fail "no $k"
done
asi_result "result fields"
ktap_finished
