#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The isolation audit, live (invariant "No foreign data"): with twelve VMs of
# one process running, the page-table tool (asi-pt) must find every VM's table
# clean, asi/secrets' absent ranges unmapped and no user half shared (the
# process holds twelve VMs); with a page of one VM's struct kvm planted into
# another VM's table (the asi/plant test hook) it must fail and name both; with
# a page of the ro_after_init secrets planted (asi/plant's "secret") it must
# fail and name the secret; with each plant gone, pass again. Also runs summary,
# diff and suggest against the live VMs and checks the tool's messages on bad
# input. With ASI off, checks that the tool says so. Exit: 0 pass, 1 fail, 4
# skip.
#
# Usage: asi_audit.sh [VMS]; asi_multi_vm_test runs it again as
# "asi_audit.sh --live" while the VMs run.

. "$(dirname "$0")/asi_lib.sh"

pt=$ASI_PT
[ -x "$pt" ] || { echo "FAIL: $pt missing"; exit 1; }
fail=0
out=/tmp/asi_audit.out

# expect RC PATTERN CMD...: CMD exits RC and prints a line matching PATTERN.
expect() {
	rc=$1 pat=$2
	shift 2
	"$@" >$out 2>&1
	got=$?
	if [ $got -ne "$rc" ] || ! grep -q -e "$pat" $out; then
		echo "FAIL: '$*' exited $got (want $rc), output (want /$pat/):"
		head -20 $out
		fail=1
	fi
}

# --live-shared: two processes run a VM each.
if [ "$1" = --live-shared ]; then
	expect 0 "audit: 2 VMs, .* 2 user halves shared, 0 violations: passed" "$pt" audit
	cat $out
	exit $fail
fi

if [ "$1" != --live ]; then
	if ! grep -q '^enabled: on' "$ASI_DEBUGFS/state" 2>/dev/null; then
		expect 2 "ASI is off: boot with asi=on" "$pt" audit
		[ $fail -eq 0 ] && echo "PASS (asi-pt reports ASI off)"
		exit $fail
	fi
	vms=${1:-12}
	$KVM_SELFTESTS/x86_64/asi_multi_vm_test -v "$vms" -c 2 -s 3 -x "$0 --live $vms" ||
		{ echo "FAIL: asi_multi_vm_test -x '$0 --live' failed"; exit 1; }
	# Two processes with a VM each: each domain shares its VMM's user
	# half, and the audit accepts both.
	mvt=$KVM_SELFTESTS/x86_64/asi_multi_vm_test
	$mvt -v 1 -c 1 -s 2 -x "$mvt -v 1 -c 1 -s 2 -x '$0 --live-shared'" ||
		{ echo "FAIL: two processes with a VM each: asi_multi_vm_test -x failed"; exit 1; }
	echo "PASS"
	exit 0
fi

# --live VMS: the VMs of process $ASI_TEST_PID run.
vms=$2
kvm=/sys/kernel/debug/kvm
set -- $(cd $kvm && ls -d "$ASI_TEST_PID"-* 2>/dev/null)
[ $# -eq "$vms" ] || { echo "FAIL: $# VM folders for $vms VMs"; exit 1; }
a=$1 b=$2

expect 0 "audit: $vms VMs, .* 0 user halves shared, 0 violations: passed" "$pt" audit
cat $out
expect 0 "of the full kernel map" "$pt" summary "$a"
cat $out
expect 1 "only in $a" "$pt" diff "$a" "$b"
expect 1 "only in the full kernel map" "$pt" diff "$a" kernel
expect 0 "^ *1 " "$pt" suggest "$ASI_DEBUGFS/faults"
cat $out

# The TDP MMU's pool: every running VM's page tables come from blocks
# mapped as its own, with the memory map pages that describe them (the
# audit above found no two VMs mapping the same page).
for vm in "$@"; do
	pages=$(awk '$1 == "pages:" { print $2 }' "$kvm/$vm/asi/mmu_pages" 2>/dev/null)
	free=$(awk '$1 == "free:" { print $2 }' "$kvm/$vm/asi/mmu_pages" 2>/dev/null)
	if [ "${pages:-0}" -eq 0 ] || [ "${free:-0}" -ge "$pages" ]; then
		echo "FAIL: VM $vm: no page tables from its MMU pool:"
		cat "$kvm/$vm/asi/mmu_pages"
		fail=1
	fi
	grep -q "domain  *MMU pages' struct pages$" "$kvm/$vm/asi/mappings" || {
		echo "FAIL: VM $vm maps no memory map page of its MMU pool"
		fail=1
	}
done
echo "MMU pools of $# VMs in use, memory map pages mapped"

# The planted violations need the test hooks
# (CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_TEST_HOOKS).
if [ ! -w "$kvm/$a/asi/plant" ]; then
	echo "SKIP: no asi/plant (the ASI test hooks): not planting"
	exit $fail
fi

# The planted violation, for as long as the file stays open.
exec 3>"$kvm/$a/asi/plant"
echo "$b" >&3 || { echo "FAIL: planting $b's struct kvm into $a"; fail=1; }
violation="VIOLATION: 0x.* is VM $a's own (planted (test hook))"
violation="$violation and VM $b's own (struct kvm): mapped by both"
expect 1 "$violation" \
	"$pt" audit
cat $out
exec 3>&-
expect 0 "0 violations: passed" "$pt" audit

# A planted secret: the first page of the absent range of asi/secrets
# mapped into $a's domain, for as long as the file stays open.
exec 3>"$kvm/$a/asi/plant"
echo secret >&3 || { echo "FAIL: planting a secret into $a"; fail=1; }
secret="^VIOLATION: VM $a maps 0x.*, which holds ro_after_init secrets"
expect 1 "$secret .*(no domain may map it)$" \
	"$pt" audit
cat $out
n=$(grep -c '^VIOLATION' $out)
[ "$n" -eq 1 ] || { echo "FAIL: $n violations for one planted secret"; fail=1; }
exec 3>&-
expect 0 "0 violations: passed" "$pt" audit

# Bad input: the tool and the hook.
expect 2 "no VM '999999-1'; live VMs: $a" "$pt" audit 999999-1
expect 2 "unknown command 'bogus'" "$pt" bogus
expect 2 "diff needs two VMs" "$pt" diff "$a"
expect 2 "cannot read /nonexistent" "$pt" suggest /nonexistent
if echo "$a" >"$kvm/$a/asi/plant" 2>/dev/null; then
	echo "FAIL: a VM's own name was accepted by asi/plant"
	fail=1
fi
if echo 999999-1 >"$kvm/$a/asi/plant" 2>/dev/null; then
	echo "FAIL: a VM that does not exist was accepted by asi/plant"
	fail=1
fi
exit $fail
