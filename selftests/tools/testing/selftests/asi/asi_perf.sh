#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# perf sees the asi tracepoints: "perf list" names them, "perf stat"
# counts them while a guest runs its exits (and finds as many asi_enter
# events as asi/cpus counted switches), and "perf record -e 'asi:*'" and
# "perf script" show the events with their fields (perf record may lose
# events under emulation: its counts are not compared). "perf trace" is
# not run: system-wide, it stalled the emulated machine for minutes.
# Skips with ASI off or without perf. Exit: 0 pass, 1 fail, 4 skip.

. "$(dirname "$0")/asi_lib.sh"

guest=${1:-$KVM_SELFTESTS/x86_64/asi_exits_test}
# perf enables the tracepoints while the guest may run: that patches text,
# and the patch's int3 on a restricted table falls back (bp_desc).
export ASI_EXITS_ALLOW_FALLBACKS=1
asi_require_on
command -v perf >/dev/null || { echo "SKIP: no perf in this image"; exit 4; }
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
fail=0
out=/tmp/asi_perf.out

check() {
	grep -q -e "$1" $out || { echo "FAIL: $2 printed no /$1/:"; head -30 $out; fail=1; }
}

perf list 'asi:*' >$out 2>&1
for e in asi_enter asi_exit asi_fault; do
	check "asi:$e" "perf list"
done

e0=$(asi_sum 3)
perf stat -a -e asi:asi_enter -e asi:asi_exit -x, -o $out -- "$guest" >/tmp/asi_perf.guest 2>&1 ||
	{ echo "FAIL: perf stat or $guest failed:"; cat $out /tmp/asi_perf.guest; fail=1; }
e1=$(asi_sum 3)
cat $out
n=$(awk -F, '$3 == "asi:asi_enter" { print $1 }' $out)
[ "$n" = "$((e1 - e0))" ] ||
	{ echo "FAIL: perf stat counted '$n' asi_enter, asi/cpus $((e1 - e0))"; fail=1; }

perf record -q -a -e 'asi:*' -o /tmp/asi_perf.data -- "$guest" >/tmp/asi_perf.guest 2>&1 ||
	{ echo "FAIL: perf record failed:"; cat /tmp/asi_perf.guest; fail=1; }
perf script -i /tmp/asi_perf.data >$out 2>&1
echo "perf script: $(grep -c 'asi:asi_enter' $out) asi_enter," \
     "$(grep -c 'asi:asi_exit' $out) asi_exit events"
check 'asi:asi_enter: domain=[1-9]' "perf script"
check 'asi:asi_exit: domain=[1-9][0-9]* reason=owner' "perf script"
check 'asi:asi_fault: domain=[1-9][0-9]* address=0x' "perf script"

[ $fail -eq 0 ] && echo "PASS"
exit $fail
