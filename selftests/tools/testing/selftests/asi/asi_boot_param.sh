#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Check that the kernel took the asi= value on its command line: the state
# in /sys/kernel/debug/asi/state and the boot log must both agree with the
# last asi= on /proc/cmdline (ASI is off unless it is "on"; any value other
# than "on" or "off" must be named in a warning).
# KTAP output; exit: 0 pass, 1 fail, 4 skip (kselftest convention).

. "$(dirname "$0")/asi_lib.sh"

state=$ASI_DEBUGFS/state

grep -qs ' /sys/kernel/debug debugfs' /proc/mounts ||
	asi_skip_all "debugfs is not mounted at /sys/kernel/debug"
[ -r "$state" ] ||
	asi_bail "$state is missing" \
		"(kernel built without CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION?)"
asi_plan 4

# The last asi= wins; a bare "asi" counts as an invalid, empty value.
arg=none
for w in $(cat /proc/cmdline); do
	case "$w" in
	asi=*) arg=${w#asi=} ;;
	asi) arg= ;;
	esac
done

case "$arg" in
none) want_enabled=off want_reason=default ;;
on) want_enabled=on want_reason=asi=on ;;
off) want_enabled=off want_reason=asi=off ;;
*) want_enabled=off want_reason="invalid asi= value, default" ;;
esac

got_enabled=$(sed -n 's/^enabled: //p' "$state")
got_reason=$(sed -n 's/^reason: //p' "$state")
asi_msg "cmdline asi=${arg}: state says enabled=$got_enabled reason=\"$got_reason\""

[ "$got_enabled" = "$want_enabled" ] ||
	asi_fail "enabled is '$got_enabled', expected '$want_enabled'"
asi_result "enabled matches asi="

[ "$got_reason" = "$want_reason" ] ||
	asi_fail "reason is '$got_reason', expected '$want_reason'"
asi_result "reason matches asi="

if [ "$want_enabled" = on ]; then
	want_log="ASI: enabled ($want_reason)"
else
	want_log="ASI: disabled ($want_reason)"
fi
dmesg | grep -qF "$want_log" || asi_fail "boot log lacks \"$want_log\""
asi_result "boot log"

case "$arg" in
none|on|off)
	asi_skip "invalid value recorded" "no invalid asi= value on the command line"
	;;
*)
	if ! dmesg | grep -qF "invalid value \"$arg\" for asi="; then
		asi_fail "boot log does not name the invalid value \"$arg\""
	fi
	if ! grep -qxF "rejected: \"$arg\"" "$state"; then
		asi_fail "$state does not record the rejected value \"$arg\""
	fi
	asi_result "invalid value recorded"
	;;
esac
ktap_finished
