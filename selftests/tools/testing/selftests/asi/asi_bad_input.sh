#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Bad input to every writable ASI debugfs file: each bad write fails with
# the error it documents, the good ones still work, and the kernel and
# the VMs keep running (no new WARN, BUG or oops; the harness panics on an
# oops). The global files directly; the per-VM files (asi/faults,
# asi/plant) of live VMs, from asi_multi_vm_test -x "asi_bad_input.sh
# --live", whose VMs must keep passing meanwhile. Skips with ASI off.
# KTAP output; exit: 0 pass, 1 fail, 4 skip. With --live, diagnostics
# only, and exit 1 if a write went wrong.

. "$(dirname "$0")/asi_lib.sh"

out=/tmp/asi_bad_input.out

# write WANT FILE VALUE: writing VALUE to FILE succeeds (WANT ok) or fails
# with an error message (strerror(), as the shell prints it) that matches
# the extended regular expression WANT.
write() {
	want=$1 file=$2 val=$3
	# One write(2) of the whole value; dd names the error (the shell's
	# printf does not).
	if printf '%s' "$val" | dd of="$file" bs=4096 conv=notrunc 2>$out >/dev/null &&
	   ! grep -q -i error $out; then
		got=ok
	else
		got=$(grep -i error $out | sed 's/.*: //' | head -1)
	fi
	if echo "$got" | grep -q -E "^($want)\$"; then
		asi_msg "ok   '$val' > $file: $got"
	else
		asi_fail "'$val' > $file: $got (want $want)"
	fi
}

if [ "$1" = --live ]; then
	[ -n "$ASI_TEST_PID" ] || { asi_fail "--live without ASI_TEST_PID"; exit 1; }
	set -- /sys/kernel/debug/kvm/"$ASI_TEST_PID"-*
	[ -d "$1/asi" ] ||
		{ asi_fail "no VM debugfs folder for pid $ASI_TEST_PID"; exit 1; }
	vm=$1 other=${2:-}
	for v in 1 -1 abc 0x " " "0 0"; do
		write "Invalid argument" "$vm/asi/faults" "$v"
	done
	write "Numerical result out of range" "$vm/asi/faults" 99999999999999999999
	write ok "$vm/asi/faults" 0
	if [ -e "$vm/asi/plant" ]; then
		write "No such file or directory" "$vm/asi/plant" "not-a-vm"
		write "No such file or directory" "$vm/asi/plant" "0-0"
		write "No such file or directory" "$vm/asi/plant" "$(basename "$vm")"
		write "Invalid argument" "$vm/asi/plant" \
			"$(printf '%0200d' 0)"
		[ -n "$other" ] && asi_msg "(another VM, $(basename "$other"), is live:" \
			"planting it is asi_audit.sh's test)"
	fi
	exit $asi_failed
fi

asi_require_on
guest=$KVM_SELFTESTS/x86_64/asi_multi_vm_test
[ -x "$guest" ] || asi_bail "$guest missing"
asi_plan 5
warn0=$(asi_warn_count)

for v in 1 abc -1 "0 1"; do
	write "Invalid argument" "$ASI_DEBUGFS/faults" "$v"
done
write ok "$ASI_DEBUGFS/faults" 0
asi_result "asi/faults"

for v in 0 abc -5 1000000000000; do
	write "Invalid argument" "$ASI_DEBUGFS/bench" "$v"
done
write ok "$ASI_DEBUGFS/bench" 10
asi_result "asi/bench"

for f in state domains allowlist cpus; do
	# Read-only: no write method (root passes the mode check).
	write "Invalid argument|Permission denied|Operation not permitted|Bad file descriptor" \
		"$ASI_DEBUGFS/$f" 0
done
asi_result "read-only files"

"$guest" -v 2 -c 1 -s 2 -x "$0 --live" >$out.vm 2>&1 || {
	asi_fail "the VMs or the per-VM checks failed:"
	tail -30 $out.vm | asi_show
}
# The --live half's lines (already diagnostics).
grep -E '^# (ok|FAIL:) ' $out.vm
asi_result "per-VM files, VMs live"

asi_check_warns "$warn0"
asi_result "no WARN, BUG or oops"
ktap_finished
