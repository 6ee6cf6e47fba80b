#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Stress, bounded in time: while NMI storms (sysrq "l") and memory
# pressure (a tmpfs file filling a quarter of free memory, dropped caches,
# compaction) run in the background,
#   1. twelve VMs with two vCPUs each loop over the common exits while
#      their threads move between CPUs (asi_multi_vm_test);
#   2. VMs are created, run and destroyed one after another, then a
#      memslot is added, moved and deleted while a vCPU runs; ASI's
#      domains and page-table pages must be back to their baseline
#      (asi_churn_test);
#   3. upstream's memslot_modification_stress_test adds and deletes
#      memslots while vCPUs fault guest memory in;
#   4. the isolation audit runs with four VMs live and must pass.
# Nothing may oops, WARN or hang (the harness panics on an oops and
# catches hangs). A case per phase and one for WARNs; prints the number
# of lifecycles, NMI rounds, memslot changes and pressure rounds at the
# end. Skips with ASI off. KTAP output; exit: 0 pass, 1 fail, 4 skip.
#
# Usage: asi_stress.sh [SECONDS [LIFECYCLES]]  (default 10 s per phase,
# 1000 lifecycles; the short form in make check, longer on demand)

. "$(dirname "$0")/asi_lib.sh"

secs=${1:-10}
lifecycles=${2:-1000}
kvm=$KVM_SELFTESTS
pt=$ASI_PT
tmp=/tmp/asi_stress
stop=$tmp/stop

asi_require_on
for t in "$kvm/x86_64/asi_multi_vm_test" "$kvm/x86_64/asi_churn_test" \
	 "$kvm/memslot_modification_stress_test" "$pt"; do
	[ -x "$t" ] || asi_bail "$t missing"
done
[ -w /proc/sysrq-trigger ] || asi_bail "no /proc/sysrq-trigger"
asi_plan 5

rm -rf "$tmp"
mkdir -p "$tmp"
warn0=$(asi_warn_count)
f0=$(asi_sum 7) e0=$(asi_sum 3)
level=$(awk '{ print $1 }' /proc/sys/kernel/printk)
# The NMI backtraces to the log buffer only: the serial console is slow.
echo 1 >/proc/sys/kernel/printk

(
	n=0
	while [ ! -e "$stop" ]; do
		echo l >/proc/sysrq-trigger
		n=$((n + 1))
		sleep 0.3
	done
	echo $n >"$tmp/nmis"
) &
nmi_pid=$!

(
	n=0
	mkdir -p "$tmp/shm"
	mount -t tmpfs -o size=90% none "$tmp/shm" 2>/dev/null
	while [ ! -e "$stop" ]; do
		free_kb=$(awk '/^MemFree:/ { print $2 }' /proc/meminfo)
		dd if=/dev/zero of="$tmp/shm/fill" bs=1024 count=$((free_kb / 4)) 2>/dev/null
		echo 3 >/proc/sys/vm/drop_caches
		[ -w /proc/sys/vm/compact_memory ] && echo 1 >/proc/sys/vm/compact_memory
		rm -f "$tmp/shm/fill"
		n=$((n + 1))
		sleep 1
	done
	umount "$tmp/shm" 2>/dev/null
	echo $n >"$tmp/pressure"
) &
mem_pid=$!

# run NAME CMD...: CMD must exit 0; its output in $tmp/NAME.out.
run() {
	name=$1
	shift
	asi_msg "--- $name: $*"
	# Through tee: the harness takes a silent console for a hang. One sed
	# filters and prefixes: a grep writing into a pipe would buffer lines.
	{ "$@" 2>&1; echo $? >"$tmp/$name.rc"; } | tee "$tmp/$name.out" |
		sed -n -E 's/^(lifecycles|memslot|after|ASI is|migrations|audit|  )/# &/p'
	if [ "$(cat "$tmp/$name.rc")" != 0 ]; then
		asi_fail "$name exited $(cat "$tmp/$name.rc"):"
		tail -20 "$tmp/$name.out" | asi_show
	fi
}

run multi_vm "$kvm/x86_64/asi_multi_vm_test" -v 12 -c 2 -s "$secs"
asi_result "twelve VMs, vCPUs moving between CPUs"
run churn "$kvm/x86_64/asi_churn_test" -n "$lifecycles" -m "$secs"
asi_result "VM lifecycles and memslot churn"
run memslot_stress "$kvm/memslot_modification_stress_test" -v 2 -i 100
asi_result "memslot_modification_stress_test"
run audit "$kvm/x86_64/asi_multi_vm_test" -v 4 -c 2 -s 2 -x "$pt audit"
grep -q '^audit: .* 0 violations: passed' "$tmp/audit.out" || {
	asi_fail "the audit did not pass:"
	tail -10 "$tmp/audit.out" | asi_show
}
asi_result "audit with four VMs live"

touch "$stop"
wait $nmi_pid $mem_pid
echo "$level" >/proc/sys/kernel/printk

memslots=$(sed -n 's/^memslot churn: \([0-9]*\) memslot changes.*/\1/p' "$tmp/churn.out")
lc=$(sed -n 's/^lifecycles: \([0-9]*\) VMs.*/\1/p' "$tmp/churn.out")
asi_msg "stress: ${lc:-0} VM lifecycles, $(cat "$tmp/nmis") NMI rounds (sysrq l)," \
	"${memslots:-0} memslot changes under a running vCPU," \
	"$(cat "$tmp/pressure") memory-pressure rounds;" \
	"$(($(asi_sum 3) - e0)) switches into restricted tables," \
	"$(($(asi_sum 7) - f0)) fallback faults"
asi_check_warns "$warn0"
asi_result "no WARN, BUG or oops"
ktap_finished
