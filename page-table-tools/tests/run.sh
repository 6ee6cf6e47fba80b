#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Unit tests of asi-pt on recorded debugfs trees (data/, recorded from a
# live asi=on boot of this kernel with two VMs of one process, one of them
# with a page of the other's struct kvm planted by the asi/plant test hook;
# "unrecorded" is "clean" with one mappings line deleted). The recording
# predates asi/secrets and the pagetable's "# user half: N top-level
# entries" line: "old-kernel" is it as recorded; the other trees were
# edited to the current format, asi/secrets synthesized (see ../README.md).
# Usage: run.sh ASI_PT
set -u

pt=${1:?usage: run.sh ASI_PT}
d=$(dirname "$0")/data
pass=0 fail=0
out=$(mktemp)
bad=$(mktemp -d)
trap 'rm -rf "$out" "$bad"' EXIT

# t NAME RC PATTERN ARGS...: asi-pt ARGS exits RC and prints PATTERN;
# t_cmd: the same for a whole command line.
t() {
	name=$1 rc=$2 pat=$3
	shift 3
	t_cmd "$name" "$rc" "$pat" "$pt" "$@"
}
t_cmd() {
	name=$1 rc=$2 pat=$3
	shift 3
	"$@" >"$out" 2>&1
	got=$?
	if [ $got -eq "$rc" ] && grep -q -e "$pat" "$out"; then
		pass=$((pass + 1))
		echo "ok $name"
	else
		fail=$((fail + 1))
		echo "not ok $name: exit $got (want $rc), want /$pat/ in:"
		sed 's/^/    | /' "$out" | head -20
	fi
}

a=173-4 b=173-7
t audit-clean 0 "audit: 2 VMs, 5108 pages mapped, 1 absent ranges, 0 user halves shared, 0 violations: passed" \
	--debugfs "$d/clean" audit
t audit-one-vm 0 "audit: 1 VMs, 2554 pages mapped, 1 absent ranges, 0 user halves shared, 0 violations: passed" \
	--debugfs "$d/clean" audit $a
t audit-residual 0 "^residual: 4 ranges every domain maps by design (asi/secrets)$" \
	--debugfs "$d/clean" audit
t audit-planted 1 "VIOLATION: 0xffffc90000271000-0xffffc90000272000 is VM $a's own (planted (test hook)) and VM $b's own (struct kvm): mapped by both" \
	--debugfs "$d/planted" audit
t audit-planted-verdict 1 "1 violations: FAILED" --debugfs "$d/planted" audit
t audit-unrecorded 1 "VIOLATION: VM $a maps 0xffff888107392000-0xffff888107393000, which no owner recorded" \
	--debugfs "$d/unrecorded" audit
# asi/secrets: a page of the absent range mapped (asi/plant's "secret").
secret="ro_after_init secrets (__ro_after_init_secret: seeds, keys)"
t audit-planted-secret 1 "^VIOLATION: VM $a maps 0xffffffff81ecb000-0xffffffff81ecc000, which holds $secret (no domain may map it)$" \
	--debugfs "$d/planted-secret" audit
t audit-planted-secret-verdict 1 "1 absent ranges, 0 user halves shared, 1 violations: FAILED" \
	--debugfs "$d/planted-secret" audit
t audit-planted-secret-other 0 "0 violations: passed" --debugfs "$d/planted-secret" audit $b
t audit-no-secrets 2 "^secrets: not checked (no asi/secrets)$" --debugfs "$d/no-secrets" audit
t audit-no-secrets-verdict 2 "secrets not checked, 0 user halves shared, 0 violations: INCOMPLETE" \
	--debugfs "$d/no-secrets" audit
mkdir -p "$bad/asi" && cp "$d/clean/asi/state" "$bad/asi/" && cp -r "$d/clean/kvm" "$bad/" &&
	{ cat "$d/clean/asi/secrets"; echo "0x1000-0x2000 1 hidden something"; } >"$bad/asi/secrets"
t audit-bad-secrets 2 "asi/secrets: unknown rule 'hidden'" --debugfs "$bad" audit

# The user half: shared by one VM per process only, and recorded.
t audit-user-two-vms 1 "^VIOLATION: VM $a maps process 173's user half, which holds VM $b's guest memory$" \
	--debugfs "$d/user-two-vms" audit
t audit-user-two-vms-verdict 1 "1 user halves shared, 1 violations: FAILED" \
	--debugfs "$d/user-two-vms" audit
t audit-user-two-vms-named 1 "VIOLATION: VM $a maps process 173's user half" \
	--debugfs "$d/user-two-vms" audit $a
t audit-user-two-vms-other 0 "0 violations: passed" --debugfs "$d/user-two-vms" audit $b
t audit-user-unrecorded 1 "^VIOLATION: VM $b's table has 2 user top-level entries, which no owner recorded$" \
	--debugfs "$d/user-unrecorded" audit
t audit-user-unrecorded-verdict 1 "1 violations: FAILED" --debugfs "$d/user-unrecorded" audit
t audit-user-shared 0 "2 user halves shared, 0 violations: passed" --debugfs "$d/user-shared" audit
t audit-old-kernel 1 "^user half: VM $a not checked" --debugfs "$d/old-kernel" audit
t audit-old-kernel-user 1 "^VIOLATION: VM $b maps process 173's user half, which holds VM $a's guest memory$" \
	--debugfs "$d/old-kernel" audit
t audit-old-kernel-verdict 1 "secrets not checked, 2 user halves shared, 2 not checked, 2 violations: FAILED" \
	--debugfs "$d/old-kernel" audit

t audit-no-such-vm 2 "no VM '1-1'; live VMs: $a $b" --debugfs "$d/clean" audit 1-1
t audit-asi-off 2 "ASI is off: boot with asi=on" --debugfs "$d/off" audit
t audit-no-asi 2 "kernel built without CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION" \
	--debugfs "$d/noasi" audit
t summary-classes 0 "domain        23 ranges        30 pages mapped" \
	--debugfs "$d/clean" summary $a
t summary-kernel 0 "0.242% of the full kernel map's 1053505 pages" \
	--debugfs "$d/clean" summary $a
t summary-user 0 "shares the VMM's user address space (2 top-level entries)" \
	--debugfs "$d/user-shared" summary
t summary-not-shared 0 "^  user       not shared (0 top-level entries)$" --debugfs "$d/clean" summary $a
t summary-secrets 0 "^  residual       2 ranges         2 pages  stack canary of the task on this CPU" \
	--debugfs "$d/clean" summary
t summary-no-secrets 0 "^secrets: no asi/secrets$" --debugfs "$d/no-secrets" summary
t diff-vms 1 "only in $a: 16 ranges, 30 pages" --debugfs "$d/clean" diff $a $b
t diff-owner 1 "0xffff888106a18000-0xffff888106a19000        1  domain: VMCB" \
	--debugfs "$d/clean" diff $a $b
t diff-self 0 "only in $a: 0 ranges" --debugfs "$d/clean" diff $a $a
t diff-kernel 1 "only in the full kernel map: 103 ranges" --debugfs "$d/clean" diff $a kernel
t diff-usage 2 "diff needs two VMs" --debugfs "$d/clean" diff $a
t suggest-debugfs 0 "direct map: slab" suggest "$d/clean/asi/faults"
t suggest-rank 0 "^   1 " suggest "$d/clean/asi/faults"
t suggest-bpftrace 0 "^   1      415     3  direct map  *gup_fast_fallback+334" \
	suggest "$d/faults.bt.txt"
t suggest-bpftrace-image 0 "^   2       47     2  kernel image  *kvm_lapic_reg_write" \
	suggest "$d/faults.bt.txt"
t suggest-empty 2 "no fault records" suggest /dev/null
t suggest-missing 2 "cannot read /nonexistent" suggest /nonexistent
t unknown-command 2 "unknown command 'bogus'" bogus
t no-command 2 "usage:"
t help 0 "audit \[VM...\]" --help
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	t_cmd not-root 2 "must run as root" setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$pt" audit
fi

echo "asi-pt unit tests: $pass passed, $fail failed"
[ $fail -eq 0 ]
