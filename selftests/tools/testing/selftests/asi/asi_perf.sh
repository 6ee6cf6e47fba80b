#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# perf sees the asi tracepoints: "perf list" names them, "perf stat"
# counts them while a guest runs its exits (and finds as many asi_enter
# events as asi/cpus counted switches), and "perf record -e 'asi:*'" and
# "perf script" show the events with their fields (perf record may lose
# events under emulation: its counts are not compared). "perf trace" is
# not run: system-wide, it stalled the emulated machine for minutes.
# Skips with ASI off or without perf. KTAP output; exit: 0 pass, 1 fail,
# 4 skip.

. "$(dirname "$0")/asi_lib.sh"

guest=${1:-$KVM_SELFTESTS/x86_64/asi_exits_test}
# perf enables the tracepoints while the guest may run: that patches text,
# and the patch's int3 on a restricted table falls back (bp_desc).
export ASI_EXITS_ALLOW_FALLBACKS=1
asi_require_on
command -v perf >/dev/null || asi_skip_all "no perf in this image"
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
out=/tmp/asi_perf.out
asi_plan 3

check() {
	grep -q -e "$1" $out || {
		asi_fail "$2 printed no /$1/:"
		head -30 $out | asi_show
	}
}

perf list 'asi:*' >$out 2>&1
for e in asi_enter asi_exit asi_fault; do
	check "asi:$e" "perf list"
done
asi_result "perf list"

e0=$(asi_sum 3)
perf stat -a -e asi:asi_enter -e asi:asi_exit -x, -o $out -- "$guest" >/tmp/asi_perf.guest 2>&1 ||
	{ asi_fail "perf stat or $guest failed:"; asi_show $out /tmp/asi_perf.guest; }
e1=$(asi_sum 3)
asi_show $out
n=$(awk -F, '$3 == "asi:asi_enter" { print $1 }' $out)
[ "$n" = "$((e1 - e0))" ] ||
	asi_fail "perf stat counted '$n' asi_enter, asi/cpus $((e1 - e0))"
asi_result "perf stat"

perf record -q -a -e 'asi:*' -o /tmp/asi_perf.data -- "$guest" >/tmp/asi_perf.guest 2>&1 ||
	{ asi_fail "perf record failed:"; asi_show /tmp/asi_perf.guest; }
perf script -i /tmp/asi_perf.data >$out 2>&1
asi_msg "perf script: $(grep -c 'asi:asi_enter' $out) asi_enter," \
	"$(grep -c 'asi:asi_exit' $out) asi_exit events"
check 'asi:asi_enter: domain=[1-9]' "perf script"
check 'asi:asi_exit: domain=[1-9][0-9]* reason=owner' "perf script"
check 'asi:asi_fault: domain=[1-9][0-9]* address=0x' "perf script"
asi_result "perf record and perf script"
ktap_finished
