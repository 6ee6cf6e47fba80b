#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The asi tracepoints (events/asi/): their formats carry the fields that
# perf and bpftrace read, and, while a guest runs through every common
# exit and NMIs land on its restricted table, they report exactly the
# switches and fallback faults that asi/cpus counts: one asi_enter per
# switch onto a table, one asi_exit per switch off it (its reason counted
# in the matching column), one asi_fault per fallback. Skips with ASI off.
# KTAP output; exit: 0 pass, 1 fail, 4 skip.
#
# Usage: asi_trace.sh [NMI_ROUNDS [GUEST]]

. "$(dirname "$0")/asi_lib.sh"

rounds=${1:-50}
guest=${2:-$KVM_SELFTESTS/x86_64/asi_exits_test}
tr=/sys/kernel/tracing

asi_require_on
asi_require_files "$ASI_CPUS"
[ -x "$guest" ] || asi_bail "$guest missing"
[ -d "$tr/events" ] || mount -t tracefs nodev "$tr" 2>/dev/null
[ -d "$tr/events" ] || asi_bail "no tracefs at $tr"
# The formats, the guest, WARNs, lost events, one case per comparison
# (expect below) and one that there was something to compare.
asi_plan 13

check_field() {
	grep -q "field:$2;" "$tr/events/asi/$1/format" 2>/dev/null ||
		asi_fail "asi:$1 has no field '$2'"
}
check_field asi_enter "unsigned int domain"
check_field asi_exit "unsigned int domain"
check_field asi_exit "unsigned int reason"
check_field asi_fault "unsigned int domain"
check_field asi_fault "unsigned long address"
check_field asi_fault "unsigned long ip"
check_field asi_fault "unsigned long error_code"
check_field asi_fault "unsigned char irq"
formats_failed=$asi_failed
asi_result "tracepoint formats"
[ "$formats_failed" -eq 0 ] || asi_bail "the asi tracepoints lack fields"

echo 0 >"$tr/tracing_on"
echo 8192 >"$tr/buffer_size_kb"
: >"$tr/trace"
warn0=$(asi_warn_count)
set -- 3 4 5 6 7 11 12 13 18
for c; do eval "c0_$c=\$(asi_sum $c)"; done
echo 1 >"$tr/events/asi/enable"
echo 1 >"$tr/tracing_on"

# The guest on CPU 1, NMIs from CPU 0 while it runs: fallback faults.
level=$(awk '{ print $1 }' /proc/sys/kernel/printk)
echo 1 >/proc/sys/kernel/printk
ASI_EXITS_ALLOW_FALLBACKS=1 asi_on_cpu 1 "$guest" >/tmp/asi_trace.out 2>&1 &
pid=$!
i=0
while [ $i -lt "$rounds" ] && kill -0 $pid 2>/dev/null; do
	asi_on_cpu 0 sh -c 'echo l >/proc/sysrq-trigger'
	i=$((i + 1))
done
wait $pid
rc=$?
echo "$level" >/proc/sys/kernel/printk

echo 0 >"$tr/tracing_on"
echo 0 >"$tr/events/asi/enable"
for c; do eval "d_$c=\$((\$(asi_sum $c) - c0_$c))"; done
overrun=$(cat "$tr"/per_cpu/cpu*/stats | awk '/^overrun:/ { s += $2 } END { print s + 0 }')

count() { grep -c "$1" /tmp/asi_trace.txt; }
cat "$tr/trace" >/tmp/asi_trace.txt
enter=$(count ' asi_enter: ')
exit_owner=$(count ' asi_exit: .*reason=owner')
exit_sched=$(count ' asi_exit: .*reason=sched')
exit_user=$(count ' asi_exit: .*reason=user')
exit_irq=$(count ' asi_exit: .*reason=interrupt')
exit_planned=$(count ' asi_exit: .*reason=planned')
fault=$(count ' asi_fault: ')
fault_irq=$(count ' asi_fault: .* irq=1')
: >"$tr/trace"

asi_msg "$guest with $i NMI rounds: events (asi/cpus delta):" \
	"enter $enter ($d_3), exit owner $exit_owner ($d_4), sched $exit_sched ($d_5)," \
	"user $exit_user ($d_6), interrupt $exit_irq ($d_12), planned $exit_planned ($d_18)," \
	"fault $fault ($d_7)," \
	"fault in irq/NMI $fault_irq ($d_11); missed $d_13, overrun $overrun"
grep -m 3 ' asi_fault: ' /tmp/asi_trace.txt | asi_show

if [ $rc -ne 0 ]; then
	asi_fail "$guest failed:"
	asi_show /tmp/asi_trace.out
fi
asi_result "guest runs under tracing"

asi_check_warns "$warn0"
asi_result "no WARN"

if [ "$overrun" -ne 0 ] || [ "$d_13" -ne 0 ]; then
	asi_fail "events lost ($overrun overrun, $d_13 missed): the counts cannot be compared"
fi
asi_result "no events lost"

# expect EVENTS COUNTED ASI_CPUS_COUNT: a case of its own.
expect() {
	[ "$2" -eq "$3" ] || asi_fail "$1: $2 events, asi/cpus counted $3"
	asi_result "$1 events match asi/cpus"
}
expect asi_enter "$enter" "$d_3"
expect "asi_exit reason=owner" "$exit_owner" "$d_4"
expect "asi_exit reason=sched" "$exit_sched" "$d_5"
expect "asi_exit reason=user" "$exit_user" "$d_6"
expect "asi_exit reason=interrupt" "$exit_irq" "$d_12"
expect "asi_exit reason=planned" "$exit_planned" "$d_18"
expect asi_fault "$fault" "$d_7"
expect "asi_fault irq=1" "$fault_irq" "$d_11"

if [ "$enter" -eq 0 ] || [ "$fault" -eq 0 ]; then
	asi_fail "no asi_enter or no asi_fault event: nothing was compared"
fi
asi_result "asi_enter and asi_fault events traced"
ktap_finished
