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
# ASI off or KVM built in. KTAP output; exit: 0 pass, 1 fail, 4 skip.
#
# Called as "asi_modules.sh --live VENDOR OTHER" by asi_multi_vm_test -x,
# it does the live-domain check only: diagnostics, and exit 1 if it fails.

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
# fail) leaves nothing of it mapped. asi_fail for what does not hold.
live_check() {
	vendor=$1 other=$2 n=0
	for m in /sys/kernel/debug/kvm/${ASI_TEST_PID:-*}-*/asi/mappings; do
		[ -r "$m" ] || continue
		n=$((n + 1))
		for mod in kvm "$vendor"; do
			if ! has_range "$m" "$mod" always; then
				asi_fail "$m maps nothing of module $mod"
			fi
		done
	done
	if [ $n -eq 0 ]; then
		asi_fail "no live VM's asi/mappings found"
		return
	fi
	if modprobe "$other" 2>/dev/null; then
		asi_fail "$other loaded on this CPU; cannot check a failed load"
		rmmod "$other"
		return
	fi
	for m in /sys/kernel/debug/kvm/${ASI_TEST_PID:-*}-*/asi/mappings; do
		[ -r "$m" ] || continue
		if has_range "$m" "$other"; then
			asi_fail "$m still maps $other after its load failed:"
			grep " $other\$" "$m" | asi_show
		fi
	done
	asi_msg "$n live domains map kvm and $vendor; $other came and went"
}

if [ "${1:-}" = --live ]; then
	live_check "$2" "$3"
	exit $asi_failed
fi

asi_require_on
asi_kvm_modules
[ -d /sys/module/kvm/sections ] ||
	asi_skip_all "no /sys/module/kvm/sections (CONFIG_KALLSYMS off?)"
# With section addresses hidden (kptr_restrict) .data..asi reads 0: skip.
for m in kvm "$vendor"; do
	f=/sys/module/$m/sections/.data..asi
	[ -r "$f" ] || continue
	case $(cat "$f") in
	0x0000000000000000|0)
		asi_skip_all "section addresses are hidden (kptr_restrict)" ;;
	esac
done
# Four cases loaded, one unloaded, five loaded again, one for WARNs.
asi_plan 11

out=$(mktemp)
trap 'rm -f "$out"' EXIT

# module_percpu_bytes: USED used of TOTAL
percpu_used() {
	sed -n 's/^module_percpu_bytes: \([0-9]*\) used of [0-9]*$/\1/p' "$ASI_DEBUGFS/state"
}

# check_loaded WHEN: four cases, named "WHEN: ...".
check_loaded() {
	for m in kvm "$vendor"; do
		f=/sys/module/$m/sections/.data..asi
		if [ ! -r "$f" ]; then
			asi_fail "$m has no .data..asi section ($f)"
			continue
		fi
		addr=$(cat "$f")
		case $addr in
		0x0000000000000000|0)
			# Checked before the plan: a reloaded module's only.
			asi_fail "$m's .data..asi address is hidden (kptr_restrict)" ;;
		*000)
			asi_msg "$m: .data..asi at $addr" ;;
		*)
			asi_fail "$m's .data..asi at $addr is not page-aligned" ;;
		esac
	done
	asi_result "$1: .data..asi sections page-aligned"
	# With data symbols in kallsyms (KALLSYMS_ALL), the ASI per-CPU ones too.
	if has_ksym kvm_caps kvm && ! has_ksym kvm_running_vcpu kvm; then
		asi_fail "kvm_running_vcpu (kvm's ASI per-CPU section) is not in /proc/kallsyms"
	fi
	used=$(percpu_used)
	grep '^module_percpu_bytes' "$ASI_DEBUGFS/state" | asi_show
	if [ -z "$used" ] || [ "$used" -eq 0 ]; then
		asi_fail "no module per-CPU room in use with kvm and $vendor loaded"
	fi
	asi_result "$1: per-CPU room in use"
	asi_run "$exits" '^(exit|[a-z_]+ +[0-9])' "$exits"
	asi_result "$1: asi_exits_test"
	asi_run "$multi with the live-domain check" 'live domains|FAIL' \
		"$multi" -v 2 -c 1 -s 3 -x "$0 --live $vendor $other"
	asi_result "$1: live domains map the modules"
}

w0=$(asi_warn_count)

asi_msg "== loaded"
check_loaded loaded
used_loaded=$used

asi_msg "== unloaded"
{ rmmod "$vendor" && rmmod kvm; } || asi_bail "cannot unload kvm and $vendor"
used=$(percpu_used)
grep '^module_percpu_bytes' "$ASI_DEBUGFS/state" | asi_show
if [ "$used" != 0 ]; then
	asi_fail "$used bytes of the modules' per-CPU room still in use after unloading"
fi
asi_result "unloaded: per-CPU room free"

asi_msg "== loaded again"
modprobe "$vendor" || asi_bail "cannot load $vendor again"
check_loaded "loaded again"
if [ "$used" != "$used_loaded" ]; then
	asi_fail "per-CPU room in use: $used_loaded bytes at first, $used after reloading"
fi
asi_result "loaded again: per-CPU room as before"

asi_check_warns "$w0"
asi_result "no WARN, BUG or oops"
ktap_finished
