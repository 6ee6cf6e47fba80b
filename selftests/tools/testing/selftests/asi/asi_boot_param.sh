#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Check that the kernel took the asi= value on its command line: the state
# in /sys/kernel/debug/asi/state and the boot log must both agree with the
# last asi= on /proc/cmdline (ASI is off unless it is "on"; any value other
# than "on" or "off" must be named in a warning).
# Exit: 0 pass, 1 fail, 4 skip (kselftest convention).

state=/sys/kernel/debug/asi/state
fail=0

if ! grep -qs ' /sys/kernel/debug debugfs' /proc/mounts; then
	echo "SKIP: debugfs is not mounted at /sys/kernel/debug"
	exit 4
fi
if [ ! -r "$state" ]; then
	echo "FAIL: $state is missing" \
	     "(kernel built without CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION?)"
	exit 1
fi

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
echo "cmdline asi=${arg}: state says enabled=$got_enabled reason=\"$got_reason\""

if [ "$got_enabled" != "$want_enabled" ]; then
	echo "FAIL: enabled is '$got_enabled', expected '$want_enabled'"
	fail=1
fi
if [ "$got_reason" != "$want_reason" ]; then
	echo "FAIL: reason is '$got_reason', expected '$want_reason'"
	fail=1
fi

if [ "$want_enabled" = on ]; then
	want_log="ASI: enabled ($want_reason)"
else
	want_log="ASI: disabled ($want_reason)"
fi
if ! dmesg | grep -qF "$want_log"; then
	echo "FAIL: boot log lacks \"$want_log\""
	fail=1
fi

case "$arg" in
none|on|off) ;;
*)
	if ! dmesg | grep -qF "invalid value \"$arg\" for asi="; then
		echo "FAIL: boot log does not name the invalid value \"$arg\""
		fail=1
	fi
	if ! grep -qxF "rejected: \"$arg\"" "$state"; then
		echo "FAIL: $state does not record the rejected value \"$arg\""
		fail=1
	fi
	;;
esac

[ $fail -eq 0 ] && echo "PASS"
exit $fail
