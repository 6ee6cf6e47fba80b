#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# KVM built as modules, asi=on. The module loader gives a module's
# __asi_data pages of its own and its DEFINE_PER_CPU_ASI() variables room
# in vmlinux's ASI per-CPU pages; ASI maps modules' text, rodata and ASI
# data into every domain while they are loaded. With kvm and the vendor
# module loaded, checks that:
#   - each module's .data..asi section starts on a page boundary;
#   - the modules' per-CPU room is in use (asi/state module_percpu_bytes);
#   - a guest's common exits run without fallback faults ($exits: asi_exits_test);
# then unloads both modules (the room must be free again, no WARN), loads
# them again and repeats the checks: unmapping on unload and mapping on
# reload are what this exercises. Skips with ASI off or KVM built in.
# Exit: 0 pass, 1 fail, 4 skip.

. "$(dirname "$0")/asi_lib.sh"

exits=${1:-/tests/kvm/x86_64/asi_exits_test}
sections=/sys/module/kvm/sections

asi_require_on
if grep -q -w svm /proc/cpuinfo; then
	vendor=kvm_amd
elif grep -q -w vmx /proc/cpuinfo; then
	vendor=kvm_intel
else
	echo "SKIP: no SVM or VMX"
	exit 4
fi
if [ ! -d /sys/module/kvm ] || [ ! -e /sys/module/kvm/initstate ]; then
	modprobe "$vendor" || { echo "SKIP: KVM is built in, or $vendor does not load"; exit 4; }
fi
[ -e /sys/module/kvm/initstate ] || { echo "SKIP: KVM is built in"; exit 4; }

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
		if [ $((addr & 4095)) -ne 0 ]; then
			echo "FAIL: $m's .data..asi at $addr is not page-aligned"
			fail=1
		else
			echo "$m: .data..asi at $addr"
		fi
	done
	used=$(percpu_used)
	echo "$(grep '^module_percpu_bytes' "$ASI_DEBUGFS/state")"
	if [ -z "$used" ] || [ "$used" -eq 0 ]; then
		echo "FAIL: no module per-CPU room in use with kvm and $vendor loaded"
		fail=1
	fi
	if ! "$exits" >/tmp/asi_modules.out 2>&1; then
		echo "FAIL: $exits failed:"
		cat /tmp/asi_modules.out
		fail=1
	else
		grep -E '^(exit|[a-z_]+ +[0-9])' /tmp/asi_modules.out
	fi
}

w0=$(asi_warn_count)
[ -r "$sections/.data..asi" ] || {
	echo "SKIP: no /sys/module/kvm/sections (CONFIG_KALLSYMS off?)"
	exit 4
}

echo "== loaded"
check_loaded
used_loaded=$used

echo "== unloaded"
rmmod "$vendor" && rmmod kvm || { echo "FAIL: cannot unload kvm and $vendor"; exit 1; }
used=$(percpu_used)
echo "$(grep '^module_percpu_bytes' "$ASI_DEBUGFS/state")"
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

w1=$(asi_warn_count)
if [ "$w1" -ne "$w0" ]; then
	echo "FAIL: $((w1 - w0)) new WARN/BUG/Oops reports:"
	dmesg | grep -E -A20 'WARNING:|BUG:|Oops' | tail -60
	fail=1
fi
[ $fail -eq 0 ] && echo "PASS"
exit $fail
