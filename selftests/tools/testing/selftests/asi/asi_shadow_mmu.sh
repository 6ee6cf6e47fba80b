#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The shadow MMU under ASI: KVM built as modules, asi=on. Reloads the
# vendor module with nested paging off (kvm_amd npt=0, kvm_intel ept=0),
# so that KVM shadows every guest's page tables, as it does for a nested
# guest, and checks that:
#   - asi_exits_test passes: its common exits, and INVLPG and CR3 writes
#     (which walk and sync the shadow page tables), take no fallback fault;
#   - memslots added, moved and deleted under a running vCPU
#     (asi_churn_test) map and unmap their MMU metadata cleanly;
#   - with VMs live (asi_multi_vm_test -x), each VM's shadow pages come
#     from its MMU pool (asi/mmu_pages: pages in use, no miss), and its
#     memslots' rmaps, large page info and write-tracking counts are
#     mapped into its domain (asi/mappings);
# then reloads the vendor module with nested paging on. No WARN may appear
# throughout. Skips with ASI off or KVM built in. KTAP output; exit:
# 0 pass, 1 fail, 4 skip.
#
# Called as "asi_shadow_mmu.sh --live" by asi_multi_vm_test -x, it does
# the live check only: diagnostics, and exit 1 if it fails.

. "$(dirname "$0")/asi_lib.sh"

exits=${ASI_EXITS_TEST:-$KVM_SELFTESTS/x86_64/asi_exits_test}
multi=${ASI_MULTI_VM_TEST:-$KVM_SELFTESTS/x86_64/asi_multi_vm_test}
churn=${ASI_CHURN_TEST:-$KVM_SELFTESTS/x86_64/asi_churn_test}
kvm=/sys/kernel/debug/kvm

# field FILE NAME: the value of "NAME: value" in FILE.
field() {
	awk -v n="$2:" '$1 == n { print $2 }' "$1"
}

# With the VMs of $ASI_TEST_PID live: their shadow pages are the pool's,
# their memslots' metadata is mapped. asi_fail for what does not hold.
live_check() {
	n=0
	for d in $kvm/"${ASI_TEST_PID:?}"-*/asi; do
		[ -r "$d/mmu_pages" ] || continue
		n=$((n + 1))
		pages=$(field "$d/mmu_pages" pages)
		free=$(field "$d/mmu_pages" free)
		misses=$(field "$d/mmu_pages" misses)
		if [ "${pages:-0}" -eq 0 ] || [ "${free:-0}" -ge "$pages" ] ||
		   [ "${misses:-1}" -ne 0 ]; then
			asi_fail "$d: shadow pages not (all) from the MMU pool:"
			asi_show "$d/mmu_pages"
		fi
		asi_msg "$d: $(tr '\n' ' ' <"$d/mmu_pages")"
		for owner in rmap "large page info" "write tracking"; do
			if ! grep -q "domain  *$owner\$" "$d/mappings"; then
				asi_fail "$d maps no memslot $owner"
			fi
		done
	done
	if [ $n -eq 0 ]; then
		asi_fail "no live VM's asi folder found"
		return
	fi
	asi_msg "$n live VMs: shadow pages from their MMU pools, memslot metadata mapped"
}

if [ "${1:-}" = --live ]; then
	live_check
	exit $asi_failed
fi

asi_require_on
asi_kvm_modules
asi_plan 4

out=$(mktemp)
trap 'rm -f "$out"' EXIT
w0=$(asi_warn_count)

# reload VALUE: load the vendor module again with $paging=VALUE; on
# failure, with its defaults, so that later tests find KVM loaded.
reload() {
	rmmod "$vendor" 2>/dev/null
	if ! modprobe "$vendor" "$paging=$1"; then
		modprobe "$vendor"
		asi_bail "cannot load $vendor $paging=$1"
	fi
	asi_msg "$vendor loaded with $paging=$(cat /sys/module/$vendor/parameters/$paging)"
}

reload 0
if asi_run "$exits with shadow paging" \
	'^(ASI is|exit|SKIP|MMU pool|[a-z_0-9]+ +[0-9]|dirty_log:)' "$exits"; then
	grep -q 'shadow paging' "$out" ||
		asi_fail "$exits did not run with shadow paging"
fi
asi_result "asi_exits_test with shadow paging"
# Memslots added, moved and deleted under a running vCPU: with shadow
# paging each has rmaps and write-tracking counts, mapped when allocated
# and unmapped before they are freed (a range left mapped would make the
# next one at that address fail to map, and the memslot ioctl with it).
asi_run "$churn with shadow paging" '^(lifecycles|memslot churn|after):' \
	"$churn" -n 10 -m 3
asi_result "memslot churn with shadow paging"
asi_run "$multi with shadow paging and the live check" 'live VMs|/asi: pages|FAIL' \
	"$multi" -v 2 -c 1 -s 3 -x "$0 --live"
asi_result "live VMs' shadow pages from their MMU pools"
reload 1

asi_check_warns "$w0"
asi_result "no WARN, BUG or oops"
ktap_finished
