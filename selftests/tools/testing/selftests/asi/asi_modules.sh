#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# KVM built as modules, asi=on. The module loader gives a module's
# __asi_data pages of its own and its DEFINE_PER_CPU_ASI() variables room
# in vmlinux's ASI per-CPU pages; ASI maps modules' text, rodata,
# ro_after_init and ASI data into every domain while they are loaded.
# With kvm and the vendor module loaded, checks that:
#   - each module's .data..asi section starts on a page boundary;
#   - the modules' per-CPU room is in use (asi/state module_percpu_bytes),
#     and its symbols are in kallsyms where data symbols are;
#   - a guest's common exits run without fallback faults (asi_exits_test);
#   - with VMs live (asi_multi_vm_test -x), their domains map kvm's and the
#     vendor module's ranges, and loading the other vendor's module, whose
#     init fails here, maps and unmaps it in those live domains: none of
#     its ranges is left in any domain;
# then unloads both modules (the room must be free again), loads them
# again and repeats the checks. No WARN may appear throughout. Skips with
# ASI off or KVM built in. Exit: 0 pass, 1 fail, 4 skip.
#
# Called as "asi_modules.sh --live VENDOR OTHER" by asi_multi_vm_test -x,
# it does the live-domain check only.

. "$(dirname "$0")/asi_lib.sh"

exits=${ASI_EXITS_TEST:-$KVM_SELFTESTS/x86_64/asi_exits_test}
multi=${ASI_MULTI_VM_TEST:-$KVM_SELFTESTS/x86_64/asi_multi_vm_test}

# has_range MAPPINGS OWNER [CLASS]: asi/mappings file MAPPINGS has a range
# of OWNER (of CLASS).
has_range() {
	awk -v o="$2" -v c="${3:-}" '$4 == o && (c == "" || $3 == c) { f = 1 }
		END { exit !f }' "$1"
}

# has_ksym SYMBOL MODULE: /proc/kallsyms lists SYMBOL of MODULE.
has_ksym() {
	awk -v s="$1" -v m="[$2]" '$3 == s && $4 == m { f = 1 } END { exit !f }' /proc/kallsyms
}

# With VMs live: every VM's domain maps kvm and $1; loading $2 (which must
# fail) leaves nothing of it mapped.
live_check() {
	vendor=$1 other=$2 n=0 rc=0
	for m in /sys/kernel/debug/kvm/${ASI_TEST_PID:-*}-*/asi/mappings; do
		[ -r "$m" ] || continue
		n=$((n + 1))
		for mod in kvm "$vendor"; do
			if ! has_range "$m" "$mod" always; then
				echo "FAIL: $m maps nothing of module $mod"
				rc=1
			fi
		done
	done
	if [ $n -eq 0 ]; then
		echo "FAIL: no live VM's asi/mappings found"
		return 1
	fi
	if modprobe "$other" 2>/dev/null; then
		echo "FAIL: $other loaded on this CPU; cannot check a failed load"
		rmmod "$other"
		return 1
	fi
	for m in /sys/kernel/debug/kvm/${ASI_TEST_PID:-*}-*/asi/mappings; do
		[ -r "$m" ] || continue
		if has_range "$m" "$other"; then
			echo "FAIL: $m still maps $other after its load failed:"
			grep " $other\$" "$m"
			rc=1
		fi
	done
	echo "$n live domains map kvm and $vendor; $other came and went"
	return $rc
}

if [ "${1:-}" = --live ]; then
	live_check "$2" "$3"
	exit $?
fi

asi_require_on
asi_kvm_modules
[ -d /sys/module/kvm/sections ] || {
	echo "SKIP: no /sys/module/kvm/sections (CONFIG_KALLSYMS off?)"
	exit 4
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT

# module_percpu_bytes: USED used of TOTAL
percpu_used() {
	sed -n 's/^module_percpu_bytes: \([0-9]*\) used of [0-9]*$/\1/p' "$ASI_DEBUGFS/state"
}

fail=0
check_loaded() {
	for m in kvm "$vendor"; do
		f=/sys/module/$m/sections/.data..asi
		if [ ! -r "$f" ]; then
			echo "FAIL: $m has no .data..asi section ($f)"
			fail=1
			continue
		fi
		addr=$(cat "$f")
		case $addr in
		0x0000000000000000|0)
			echo "SKIP: section addresses are hidden (kptr_restrict)"
			exit 4 ;;
		*000)
			echo "$m: .data..asi at $addr" ;;
		*)
			echo "FAIL: $m's .data..asi at $addr is not page-aligned"
			fail=1 ;;
		esac
	done
	# With data symbols in kallsyms (KALLSYMS_ALL), the ASI per-CPU ones too.
	if has_ksym kvm_caps kvm && ! has_ksym kvm_running_vcpu kvm; then
		echo "FAIL: kvm_running_vcpu (kvm's ASI per-CPU section) is not in /proc/kallsyms"
		fail=1
	fi
	used=$(percpu_used)
	grep '^module_percpu_bytes' "$ASI_DEBUGFS/state"
	if [ -z "$used" ] || [ "$used" -eq 0 ]; then
		echo "FAIL: no module per-CPU room in use with kvm and $vendor loaded"
		fail=1
	fi
	asi_run "$exits" '^(exit|[a-z_]+ +[0-9])' "$exits"
	asi_run "$multi with the live-domain check" 'live domains|^FAIL' \
		"$multi" -v 2 -c 1 -s 3 -x "$0 --live $vendor $other"
}

w0=$(asi_warn_count)

echo "== loaded"
check_loaded
used_loaded=$used

echo "== unloaded"
if ! { rmmod "$vendor" && rmmod kvm; }; then
	echo "FAIL: cannot unload kvm and $vendor"
	exit 1
fi
used=$(percpu_used)
grep '^module_percpu_bytes' "$ASI_DEBUGFS/state"
if [ "$used" != 0 ]; then
	echo "FAIL: $used bytes of the modules' per-CPU room still in use after unloading"
	fail=1
fi

echo "== loaded again"
modprobe "$vendor" || { echo "FAIL: cannot load $vendor again"; exit 1; }
check_loaded
if [ "$used" != "$used_loaded" ]; then
	echo "FAIL: per-CPU room in use: $used_loaded bytes at first, $used after reloading"
	fail=1
fi

asi_check_warns "$w0"
[ $fail -eq 0 ] && echo "PASS"
exit $fail
