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
# exposure/: hand-written ftrace text traces of one core (CPUs 0 and 1),
# and sysfs topology trees, for asi-pt exposure.
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
# exposure: synthetic traces of one core, CPUs 0 and 1 (data/exposure/).
# VM 5 is in guest mode on CPU 1 from 100.000110 to 100.000610.
x=$d/exposure
xs="--siblings 0-1"
t exposure-full 0 "^exposure: 500000 ns over 0.001000 s traced, 1 cores (guest time 0.000500 s)$" \
	exposure $xs "$x/full.trace"
t exposure-full-core 0 "^  core 0-1: 500000 ns: full table 500000, other guest 0, other domain 0; sibling idle beside a guest 0 ns (not counted); from 100.000010 for 0.000990 s" \
	exposure $xs "$x/full.trace"
t exposure-full-vm 0 "^  VM 5: 500000 ns: full table 500000, " exposure $xs "$x/full.trace"
t exposure-idle 0 "^exposure: 0 ns over" exposure $xs "$x/idle.trace"
t exposure-idle-reported 0 "sibling idle beside a guest 500000 ns (not counted)" \
	exposure $xs "$x/idle.trace"
t exposure-idle-counted 0 "^exposure: 500000 ns over" exposure $xs --count-idle "$x/idle.trace"
# VM 7 on CPU 0 from 100.000060 to 100.000900, around VM 5's guest.
t exposure-other-guest 0 "^  core 0-1: 840000 ns: full table 240000, other guest 500000, other domain 100000;" \
	exposure $xs "$x/other-guest.trace"
t exposure-other-guest-pair 0 "^  VM 7 beside VM 5: 600000 ns: in guest mode 500000, in its domain 100000$" \
	exposure $xs "$x/other-guest.trace"
t exposure-other-guest-pair2 0 "^  VM 5 beside VM 7: 500000 ns: in guest mode 500000, in its domain 0$" \
	exposure $xs "$x/other-guest.trace"
t exposure-same-vm 0 "^exposure: 0 ns over 0.001000 s traced, 1 cores (guest time 0.001100 s)$" \
	exposure $xs "$x/same-vm.trace"
# A fallback on CPU 0 at 100.000300, back on VM 5's table at 100.000420
# (the asi_enter after kvm_entry, as the kernel has it).
t exposure-fallback 0 "^exposure: 120000 ns over .*(guest time 0.001470 s)$" \
	exposure $xs "$x/fallback.trace"
t exposure-unknown-task 0 "of the full table, 1500 ns beside a task not known yet" \
	exposure $xs "$x/unknown-task.trace"
t exposure-ns-clock 0 "from 200.000000100 for" exposure $xs "$x/unknown-task.trace"
t exposure-no-domain 0 "^warning: 1 guest entries with no domain entered (VM ?)" \
	exposure $xs "$x/unknown-task.trace"
t exposure-lost 0 "^  core 0-1: 200000 ns: .*from 300.000300 for 0.000410 s" \
	exposure $xs "$x/lost.trace"
t exposure-lost-warning 0 "^warning: CPU 1 lost events (1 LOST lines)" exposure $xs "$x/lost.trace"
t exposure-began-in-guest 0 "^note: 1 kvm_exit with no kvm_entry before it" \
	exposure $xs "$x/lost.trace"
t exposure-formats 0 "^exposure: 500000 ns over 0.001000 s traced, 1 cores" \
	exposure $xs "$x/formats.trace"
t exposure-max-over 1 "500000 ns is over --max-ns 499999" \
	exposure $xs --max-ns 499999 "$x/full.trace"
t exposure-max-ok 0 "^exposure: 500000 ns" exposure $xs --max-ns 500000 "$x/full.trace"
t exposure-sysfs 0 "^exposure: 500000 ns" exposure --sysfs "$x/sysfs-smt" "$x/full.trace"
# asi_guest windows: VM 5's guest ran from 100.000200 to 100.000550 on
# CPU 1 (kvm_entry and kvm_exit lie outside), CPU 0 ran make until
# 100.000300.
t exposure-window 0 "^exposure: 100000 ns over 0.001000 s traced, 1 cores (guest time 0.000350 s)$" \
	exposure $xs "$x/window.trace"
t exposure-window-source 0 "^  guest mode from asi_guest windows" exposure $xs "$x/window.trace"
t exposure-window-immediate 0 "^  2 VM-entries exited before the guest's first instruction" \
	exposure $xs "$x/window.trace"
t exposure-kvm-source 0 "^  guest mode from kvm_entry to kvm_exit$" exposure $xs "$x/full.trace"
t exposure-list 0 "^  exposed at 100.000110 for 500000 ns (other guest): CPU 0 restricted 7 task guest 7; CPU 1 restricted 5 task guest 5$" \
	exposure $xs --list 5 "$x/other-guest.trace"
t exposure-list-bad 2 "^asi-pt: --list: not a number" exposure $xs --list x "$x/full.trace"
t exposure-window-bad 2 "asi_guest without domain=, entry_ago_ns=, exit_ago_ns=" \
	exposure $xs "$x/window-bad.trace"
t exposure-no-smt 4 "^exposure: no SMT siblings" exposure --siblings 0,1 "$x/full.trace"
t exposure-no-smt-sysfs 4 "^exposure: no SMT siblings" exposure --sysfs "$x/sysfs-nosmt" "$x/full.trace"
t exposure-no-core-traced 4 "core 2-3: not counted: CPU 2 has no events" \
	exposure --siblings 2-3 "$x/full.trace"
t exposure-no-topology 2 "name the siblings with --siblings" exposure --sysfs /nonexistent "$x/full.trace"
t exposure-malformed 2 "malformed.trace:16: cannot parse 'this is not a trace line'" \
	exposure $xs "$x/malformed.trace"
t exposure-backwards 2 "backwards.trace:17: CPU 1's time goes backwards" \
	exposure $xs "$x/backwards.trace"
t exposure-bad-siblings 2 "--siblings: cannot parse '0-1x'" exposure --siblings 0-1x "$x/full.trace"
t exposure-no-trace 2 "exposure needs a trace file" exposure $xs
t exposure-empty 2 "no events" exposure $xs /dev/null

t unknown-command 2 "unknown command 'bogus'" bogus
t no-command 2 "usage:"
t help 0 "audit \[VM...\]" --help
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	t_cmd not-root 2 "must run as root" setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$pt" audit
fi

echo "asi-pt unit tests: $pass passed, $fail failed"
[ $fail -eq 0 ]
