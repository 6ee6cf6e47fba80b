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
# input. With ASI off, checks that the tool says so. KTAP output; exit:
# 0 pass, 1 fail, 4 skip.
#
# Usage: asi_audit.sh [VMS]; asi_multi_vm_test runs it again as
# "asi_audit.sh --live" while the VMs run (and "--live-shared", the two
# processes' half): those print diagnostics only, and exit 1 if a check
# failed; the test reports them as its cases.

. "$(dirname "$0")/asi_lib.sh"

pt=$ASI_PT
out=/tmp/asi_audit.out
# Left by the --live half when there is no asi/plant to plant with.
noplant=/tmp/asi_audit.noplant
if [ ! -x "$pt" ]; then
	case "$1" in
	--live*) asi_fail "$pt missing"; exit 1 ;;
	esac
	asi_bail "$pt missing"
fi

# expect RC PATTERN CMD...: CMD exits RC and prints a line matching PATTERN.
expect() {
	rc=$1 pat=$2
	shift 2
	"$@" >$out 2>&1
	got=$?
	if [ $got -ne "$rc" ] || ! grep -q -e "$pat" $out; then
		asi_fail "'$*' exited $got (want $rc), output (want /$pat/):"
		head -20 $out | asi_show
	fi
}

# --live-shared: two processes run a VM each.
if [ "$1" = --live-shared ]; then
	expect 0 "audit: 2 VMs, .* 2 user halves shared, 0 violations: passed" "$pt" audit
	asi_show $out
	exit $asi_failed
fi

if [ "$1" != --live ]; then
	if ! grep -q '^enabled: on' "$ASI_DEBUGFS/state" 2>/dev/null; then
		asi_plan 1
		expect 2 "ASI is off: boot with asi=on" "$pt" audit
		asi_result "asi-pt reports ASI off"
		ktap_finished
	fi
	vms=${1:-12}
	asi_plan 3
	rm -f "$noplant"
	$KVM_SELFTESTS/x86_64/asi_multi_vm_test -v "$vms" -c 2 -s 3 -x "$0 --live $vms" ||
		asi_bail "asi_multi_vm_test -x '$0 --live' failed"
	asi_result "audit, tools and MMU pools with $vms VMs live"
	if [ -e "$noplant" ]; then
		asi_skip "planted violations found" "no asi/plant (the ASI test hooks)"
	else
		asi_result "planted violations found"
	fi
	# Two processes with a VM each: each domain shares its VMM's user
	# half, and the audit accepts both.
	mvt=$KVM_SELFTESTS/x86_64/asi_multi_vm_test
	$mvt -v 1 -c 1 -s 2 -x "$mvt -v 1 -c 1 -s 2 -x '$0 --live-shared'" ||
		asi_bail "two processes with a VM each: asi_multi_vm_test -x failed"
	asi_result "two processes with a VM each"
	ktap_finished
fi

# --live VMS: the VMs of process $ASI_TEST_PID run.
vms=$2
kvm=/sys/kernel/debug/kvm
set -- $(cd $kvm && ls -d "$ASI_TEST_PID"-* 2>/dev/null)
[ $# -eq "$vms" ] || { asi_fail "$# VM folders for $vms VMs"; exit 1; }
a=$1 b=$2

expect 0 "audit: $vms VMs, .* 0 user halves shared, 0 violations: passed" "$pt" audit
asi_show $out
expect 0 "of the full kernel map" "$pt" summary "$a"
asi_show $out
expect 1 "only in $a" "$pt" diff "$a" "$b"
expect 1 "only in the full kernel map" "$pt" diff "$a" kernel
expect 0 "^ *1 " "$pt" suggest "$ASI_DEBUGFS/faults"
asi_show $out

# The TDP MMU's pool: every running VM's page tables come from blocks
# mapped as its own, with the memory map pages that describe them (the
# audit above found no two VMs mapping the same page).
for vm in "$@"; do
	pages=$(awk '$1 == "pages:" { print $2 }' "$kvm/$vm/asi/mmu_pages" 2>/dev/null)
	free=$(awk '$1 == "free:" { print $2 }' "$kvm/$vm/asi/mmu_pages" 2>/dev/null)
	if [ "${pages:-0}" -eq 0 ] || [ "${free:-0}" -ge "$pages" ]; then
		asi_fail "VM $vm: no page tables from its MMU pool:"
		asi_show "$kvm/$vm/asi/mmu_pages"
	fi
	grep -q "domain  *MMU pages' struct pages$" "$kvm/$vm/asi/mappings" ||
		asi_fail "VM $vm maps no memory map page of its MMU pool"
done
asi_msg "MMU pools of $# VMs in use, memory map pages mapped"

# The planted violations need the test hooks
# (CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_TEST_HOOKS): without them,
# the test's case of the plants is skipped.
if [ ! -w "$kvm/$a/asi/plant" ]; then
	asi_msg "no asi/plant (the ASI test hooks): not planting"
	touch "$noplant"
	exit $asi_failed
fi

# The planted violation, for as long as the file stays open.
exec 3>"$kvm/$a/asi/plant"
echo "$b" >&3 || asi_fail "planting $b's struct kvm into $a"
violation="VIOLATION: 0x.* is VM $a's own (planted (test hook))"
violation="$violation and VM $b's own (struct kvm): mapped by both"
expect 1 "$violation" \
	"$pt" audit
asi_show $out
exec 3>&-
expect 0 "0 violations: passed" "$pt" audit

# A planted secret: the first page of the absent range of asi/secrets
# mapped into $a's domain, for as long as the file stays open.
exec 3>"$kvm/$a/asi/plant"
echo secret >&3 || asi_fail "planting a secret into $a"
secret="^VIOLATION: VM $a maps 0x.*, which holds ro_after_init secrets"
expect 1 "$secret .*(no domain may map it)$" \
	"$pt" audit
asi_show $out
n=$(grep -c '^VIOLATION' $out)
[ "$n" -eq 1 ] || asi_fail "$n violations for one planted secret"
exec 3>&-
expect 0 "0 violations: passed" "$pt" audit

# Bad input: the tool and the hook.
expect 2 "no VM '999999-1'; live VMs: $a" "$pt" audit 999999-1
expect 2 "unknown command 'bogus'" "$pt" bogus
expect 2 "diff needs two VMs" "$pt" diff "$a"
expect 2 "cannot read /nonexistent" "$pt" suggest /nonexistent
if echo "$a" >"$kvm/$a/asi/plant" 2>/dev/null; then
	asi_fail "a VM's own name was accepted by asi/plant"
fi
if echo 999999-1 >"$kvm/$a/asi/plant" 2>/dev/null; then
	asi_fail "a VM that does not exist was accepted by asi/plant"
fi
exit $asi_failed
