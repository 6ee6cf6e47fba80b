#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# NMI storm (invariant "Entries handled on a restricted table"): while a vCPU
# runs guests on its VM's restricted table, send NMIs to every other CPU in a
# loop (sysrq "l": a backtrace of every CPU, by NMI). Nothing may oops, WARN or
# hang (the harness catches panics and hangs; oops=panic), the guests must pass,
# and some NMIs must have landed on a restricted table (fallback faults counted
# in interrupt or NMI context, asi/cpus column 11), else the test proved
# nothing. Skips with ASI off. Exit: 0 pass, 1 fail, 4 skip.
#
# With ASI_NMI_LANDING=optional (the debug kernel's plan) no NMI needs to
# land on a restricted table: with lockdep, the vCPU falls back right
# after every VM-exit, before STGI lets in the NMI that interrupted the
# guest (guest_state_exit_irqoff() reads lockdep's globals), and a run
# there saw 0 NMI-context fallbacks in 183,569 entries. The storm then
# checks that NMIs, lockdep and the guests get along; the KUnit suite's
# NMI case covers an NMI on a restricted table there.
#
# Usage: asi_nmi_storm.sh [ROUNDS [GUEST]]

. "$(dirname "$0")/asi_lib.sh"

rounds=${1:-300}
guest=${2:-$KVM_SELFTESTS/x86_64/asi_exits_test}
stop=/tmp/asi_nmi_storm.stop
failed=/tmp/asi_nmi_storm.failed

asi_require_on
asi_require_files "$ASI_CPUS"
[ -w /proc/sysrq-trigger ] || { echo "FAIL: no /proc/sysrq-trigger"; exit 1; }
[ -x "$guest" ] || { echo "FAIL: $guest missing"; exit 1; }
ncpus=$(awk 'NR > 1' "$ASI_CPUS" | wc -l)
[ "$ncpus" -ge 2 ] || { echo "SKIP: needs two CPUs, has $ncpus"; exit 4; }

# The guests and the storm on different CPUs (where taskset exists), so
# that the NMIs find the vCPU on its table rather than waiting for it.

rm -f "$stop" "$failed"
warn0=$(asi_warn_count)
e0=$(asi_sum 3) n0=$(asi_sum 11)
level=$(awk '{ print $1 }' /proc/sys/kernel/printk)
# The backtraces go to the log buffer only: a serial console under TCG
# would take minutes to print them.
echo 1 >/proc/sys/kernel/printk

(
	runs=0
	while [ ! -e "$stop" ] || [ $runs -eq 0 ]; do
		# The NMIs' fallbacks are the point here, not a failure.
		ASI_EXITS_ALLOW_FALLBACKS=1 asi_on_cpu 1 "$guest" >/tmp/asi_nmi_storm.out 2>&1 || {
			cp /tmp/asi_nmi_storm.out "$failed"
			break
		}
		runs=$((runs + 1))
	done
	echo "$runs" >/tmp/asi_nmi_storm.runs
) &
loop=$!

i=0
while [ $i -lt "$rounds" ]; do
	asi_on_cpu 0 sh -c 'echo l >/proc/sysrq-trigger'
	i=$((i + 1))
done
touch "$stop"
wait $loop
echo "$level" >/proc/sys/kernel/printk

e1=$(asi_sum 3) n1=$(asi_sum 11)
warn1=$(asi_warn_count)
echo "$rounds NMI rounds, $(cat /tmp/asi_nmi_storm.runs) guest runs of $guest:" \
	"$((e1 - e0)) switches into a restricted table," \
	"$((n1 - n0)) fallback faults in interrupt or NMI context"

fail=0
if [ -e "$failed" ]; then
	echo "FAIL: $guest failed during the storm:"
	cat "$failed"
	fail=1
fi
if [ "$warn1" -ne "$warn0" ]; then
	echo "FAIL: WARN, BUG or oops during the storm:"
	dmesg | grep -A20 -E 'WARNING:|BUG:|Oops' | head -60
	fail=1
fi
if [ "$n1" -le "$n0" ]; then
	if [ "${ASI_NMI_LANDING:-}" = optional ]; then
		echo "no NMI landed on a restricted table (ASI_NMI_LANDING=optional)"
	else
		echo "FAIL: no NMI landed on a restricted table (nothing was tested)"
		fail=1
	fi
fi
[ $fail -eq 0 ] && echo "PASS"
exit $fail
