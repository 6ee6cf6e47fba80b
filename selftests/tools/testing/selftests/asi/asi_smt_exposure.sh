#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# SMT exposure, measured: on a machine whose two CPUs are hyperthreads of
# one core (QEMU -smp 2,sockets=1,cores=1,threads=2), two VMM processes
# run a VM with two vCPUs each (exits that fall back and exits that do
# not, host timer interrupts, and NMI storms sent to both CPUs by sysrq
# "l") while the asi and asi_smt (asi_guest) events, kvm_entry/kvm_exit and
# sched_switch are traced; asi-pt exposure then adds up the time one
# sibling ran a guest while the other ran on the full kernel table, or
# another VM's guest or domain.
#
# Twice: with ASI's sibling protocol on (asi/smt "on", the default), the
# exposure must be 0 ns and the protocol must have been used (kicks or
# waits counted); with it off, above 0, which shows that the checker sees
# what the protocol prevents. Both figures are printed.
#
# With --check-off (a machine without SMT): the protocol must be off and
# its counters and the vCPU stats smt_waits/smt_kicks 0.
#
# Usage: asi_smt_exposure.sh [SECONDS | --check-off]. KTAP output; exit:
# 0 pass, 1 fail, 4 skip. ("--trace", run by asi_multi_vm_test -x while
# the VMs run, prints no KTAP, and exits 1 if it cannot trace.)

. "$(dirname "$0")/asi_lib.sh"

pt=$ASI_PT
mvt=$KVM_SELFTESTS/x86_64/asi_multi_vm_test
tr=/sys/kernel/tracing
smt=$ASI_DEBUGFS/smt

# The counters of asi/smt summed over the CPUs: kicks waits refusals self_kicks timeouts.
smt_counts() {
	awk 'NR > 3 { k += $3; w += $4; r += $8; s += $9; t += $6 }
	     END { print k + 0, w + 0, r + 0, s + 0, t + 0 }' "$smt"
}

if [ "$1" = --trace ]; then
	# Called by the inner asi_multi_vm_test while both VMs run.
	echo 0 >"$tr/tracing_on"
	echo >"$tr/trace"
	echo 16384 >"$tr/buffer_size_kb"
	for e in asi/enable asi_smt/enable kvm/kvm_entry/enable kvm/kvm_exit/enable \
		 sched/sched_switch/enable; do
		echo 1 >"$tr/events/$e" || { asi_fail "cannot enable $e"; exit 1; }
	done
	echo 1 >"$tr/tracing_on"
	# NMIs at both CPUs, a few times over the window.
	i=0
	while [ $i -lt 4 ]; do
		echo l >/proc/sysrq-trigger
		sleep "$(awk -v s="$2" 'BEGIN { print s / 4 }')"
		i=$((i + 1))
	done
	echo 0 >"$tr/tracing_on"
	cat "$tr/trace" >"$3"
	echo 0 >"$tr/events/enable"
	exit 0
fi

if [ "$1" = --check-off ]; then
	# A machine without SMT (each core one CPU), after the plan's other
	# tests: the protocol must be off and never have acted, and no vCPU
	# stat of it may have moved.
	asi_require_on
	asi_require_files "$smt"
	asi_plan 3
	asi_show "$smt"
	grep -q '^protocol: off (no core with two CPUs online)' "$smt" &&
		grep -q '^pairs: 0$' "$smt" ||
		asi_fail "the sibling protocol is not off on a machine without SMT"
	asi_result "protocol off"
	set -- $(smt_counts)
	[ "$1$2$3$4$5" = 00000 ] ||
		asi_fail "the protocol acted without SMT: $*"
	asi_result "protocol counters zero"
	for f in /sys/kernel/debug/kvm/asi_smt_waits /sys/kernel/debug/kvm/asi_smt_kicks; do
		if [ ! -r "$f" ]; then
			asi_fail "$f missing"
		elif [ "$(cat "$f")" != 0 ]; then
			asi_fail "$f is $(cat "$f") without SMT"
		fi
	done
	asi_result "vCPU stats zero"
	ktap_finished
fi

asi_require_on
secs=${1:-1}
[ -x "$pt" ] || asi_bail "$pt missing"
[ -w "$smt" ] || asi_bail "$smt missing"
sib=$(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null)
case "$sib" in
*[-,]*) ;;
*)	asi_skip_all "CPU 0 has no SMT sibling (thread_siblings_list: '$sib')" ;;
esac

# The cases, checked once both runs are measured.
c_on="no exposure with the protocol on"
c_used="protocol used"
c_timeouts="no sibling wait timed out"
c_off="exposure seen with the protocol off"
asi_plan 4

asi_msg "CPU 0's siblings: $sib"
if ! grep -q '^protocol: on' "$smt"; then
	asi_show "$smt"
	asi_bail "the sibling protocol is not on"
fi

# asi-pt exposure measured nothing: every case skipped, exit KSFT_SKIP.
nothing_measured() {
	for c in "$c_on" "$c_used" "$c_timeouts" "$c_off"; do
		asi_skip "$c" "asi-pt exposure measured nothing (no siblings, or no core traced)"
	done
	ktap_print_totals
	exit "$KSFT_SKIP"
}

# measure MODE TRACE: run the two VMs with the protocol MODE, trace them,
# leave the exposure in ns in $ns and asi-pt's report in TRACE.out.
measure() {
	tf=$2
	echo "$1" >"$smt" || asi_bail "cannot turn the protocol $1"
	rm -f "$2"
	level=$(awk '{ print $1 }' /proc/sys/kernel/printk)
	# The NMI backtraces to the log buffer only: the serial console is slow.
	echo 1 >/proc/sys/kernel/printk
	set -- "$1" "$2" "$(smt_counts)"
	$mvt -v 1 -c 2 -s 3 -x "$mvt -v 1 -c 2 -s 3 -x '$0 --trace $secs $2'" \
		>"$2.vms" 2>&1
	rc=$?
	echo "$level" >/proc/sys/kernel/printk
	if [ $rc -ne 0 ]; then
		asi_msg "the two VMs did not run (protocol $1):"
		tail -20 "$2.vms" | asi_show
		asi_bail "the two VMs did not run (protocol $1)"
	fi
	[ -s "$2" ] || asi_bail "no trace recorded (protocol $1)"
	grep -h 'core-scheduling cookies' "$2.vms" | sed 's/^/#   /'
	asi_msg "protocol $1: trace of $(grep -vc '^#' "$2") events," \
		"$(grep -c 'asi_guest:' "$2") guest windows"
	grep -q 'LOST' "$2" && asi_msg "note: the trace lost events (buffer full)"
	"$pt" exposure "$2" >"$2.out" 2>&1
	rc=$?
	sed 's/^/#   /' "$2.out"
	case $rc in
	0)	;;
	4)	nothing_measured ;;
	*)	asi_bail "asi-pt exposure exited $rc" ;;
	esac
	grep -q '^  guest mode from asi_guest windows' "$2.out" ||
		asi_bail "no asi_guest window in the trace (protocol $1)"
	ns=$(sed -n 's/^exposure: \([0-9]*\) ns.*/\1/p' "$2.out")
	[ -n "$ns" ] || asi_bail "no 'exposure: N ns' line"
	set -- $3 $(smt_counts)
	kicks=$(($6 - $1)) waits=$(($7 - $2)) refusals=$(($8 - $3))
	self=$(($9 - $4)) timeouts=$((${10} - $5))
	asi_msg "  asi/smt while traced: $kicks kicks, $waits waits," \
		"$refusals entries refused, $self self-kicks, $timeouts timeouts"
	kick_events=$(grep -c 'asi_smt_kick:' "$tf")
	wait_events=$(grep -c 'asi_smt_wait:' "$tf")
	asi_msg "  traced: $kick_events asi_smt_kick, $wait_events asi_smt_wait events"
	if [ "$kicks" -gt 0 ] && [ "$kick_events" -eq 0 ]; then
		asi_bail "$kicks kicks counted while traced, no asi_smt_kick event"
	fi
	sed 's/^/#   /' "$smt"
}

trace=/tmp/asi_smt
measure on "$trace.on"
on_ns=$ns on_used=$((kicks + refusals)) on_timeouts=$timeouts
measure off "$trace.off"
off_ns=$ns
echo on >"$smt"

asi_msg "exposure with the sibling protocol: $on_ns ns; without: $off_ns ns"

# exposed TRACE: the first intervals of exposure in TRACE, and the trace
# around them.
exposed() {
	"$pt" exposure --list 10 "$1" | grep '^  exposed at'
	"$pt" exposure --list 1 "$1" |
	sed -n 's/^  exposed at \([0-9.]*\) for \([0-9]*\) ns.*/\1 \2/p' |
	while read -r at dt; do
		echo "--- around $at:"
		awk -v a="$at" -v d="$dt" '!/^#/ {
			for (i = 1; i <= NF; i++)
				if ($i ~ /^[0-9]+\.[0-9]+:$/) { t = $i + 0; break }
			if (t >= a - 0.0003 && t <= a + d / 1e9 + 0.0003)
				print
		}' "$1" | cut -c1-150
	done
}

if [ "$on_ns" -ne 0 ]; then
	asi_fail "exposure $on_ns ns with the sibling protocol on;" \
		"the first intervals, and the trace around them:"
	exposed "$trace.on" | asi_show
fi
asi_result "$c_on"

[ "$on_used" -ne 0 ] || asi_fail "the protocol was on but neither kicked nor refused" \
	"an entry: nothing was tested"
asi_result "$c_used"

[ "$on_timeouts" -eq 0 ] || asi_fail "$on_timeouts waits for the sibling timed out"
asi_result "$c_timeouts"

[ "$off_ns" -ne 0 ] || asi_fail "exposure 0 ns with the protocol off:" \
	"the checker misses what it must see"
asi_result "$c_off"
ktap_finished
