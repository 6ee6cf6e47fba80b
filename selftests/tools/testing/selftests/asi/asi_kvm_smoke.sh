#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# With asi=on, a KVM guest runs on its VM's restricted table: running a
# guest must add switches into a domain (asi/cpus "enters"), fallback
# faults must be counted, and the VM's domain must be gone once the VM is.
# Skips with ASI off. Exit: 0 pass, 1 fail, 4 skip.

. "$(dirname "$0")/asi_lib.sh"

domains=$ASI_DEBUGFS/domains
guest=${1:-$KVM_SELFTESTS/x86_64/userspace_io_test}

asi_require_on
asi_require_files "$ASI_CPUS" "$domains"

e0=$(asi_sum 3) f0=$(asi_sum 7)
"$guest" >/tmp/asi_kvm_smoke.out 2>&1 || {
	echo "FAIL: $guest failed:"; cat /tmp/asi_kvm_smoke.out; exit 1
}
e1=$(asi_sum 3) f1=$(asi_sum 7)
echo "$guest: $((e1 - e0)) switches into a restricted table, $((f1 - f0)) fallback faults"
cat "$ASI_CPUS"

fail=0
if [ "$e1" -le "$e0" ]; then
	echo "FAIL: no switch into a restricted table while a guest ran"
	fail=1
fi
if [ "$f1" -lt "$f0" ]; then
	echo "FAIL: fallback counter went backwards"
	fail=1
fi
if grep -q 'kvm-' "$domains"; then
	echo "FAIL: a VM's domain outlived the VM:"
	cat "$domains"
	fail=1
fi
[ $fail -eq 0 ] && echo "PASS"
exit $fail
