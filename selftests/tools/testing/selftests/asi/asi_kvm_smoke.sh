#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# With asi=on, a KVM guest runs on its VM's restricted table: running a
# guest must add switches into a domain (asi/cpus "enters"), fallback
# faults must be counted, and the VM's domain must be gone once the VM is.
# Skips with ASI off. KTAP output; exit: 0 pass, 1 fail, 4 skip.

. "$(dirname "$0")/asi_lib.sh"

domains=$ASI_DEBUGFS/domains
guest=${1:-$KVM_SELFTESTS/x86_64/userspace_io_test}
out=/tmp/asi_kvm_smoke.out

asi_require_on
asi_require_files "$ASI_CPUS" "$domains"
asi_plan 3

e0=$(asi_sum 3) f0=$(asi_sum 7)
"$guest" >$out 2>&1 || { asi_fail "$guest failed:"; asi_show $out; }
e1=$(asi_sum 3) f1=$(asi_sum 7)
asi_msg "$guest: $((e1 - e0)) switches into a restricted table," \
	"$((f1 - f0)) fallback faults"
asi_show "$ASI_CPUS"
[ "$e1" -gt "$e0" ] || asi_fail "no switch into a restricted table while a guest ran"
asi_result "guest runs on its VM's restricted table"

[ "$f1" -ge "$f0" ] || asi_fail "fallback counter went backwards"
asi_result "fallback counter"

if grep -q 'kvm-' "$domains"; then
	asi_fail "a VM's domain outlived the VM:"
	asi_show "$domains"
fi
asi_result "VM's domain gone with the VM"
ktap_finished
