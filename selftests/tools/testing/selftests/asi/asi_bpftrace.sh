#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The bpftrace scripts of page-table-tools (installed in /tests/bpftrace)
# against running guests: each one is started, attached (bpftrace reads
# the asi tracepoints' fields from tracefs), run while twelve VMs run
# their exits with vCPUs moved between CPUs, stopped with SIGINT, and must
# have printed what it is for (a case per script). Then "asi-pt suggest"
# must rank the faults the fault script collected. Skips with ASI off or
# without bpftrace. KTAP output; exit: 0 pass, 1 fail, 4 skip.

. "$(dirname "$0")/asi_lib.sh"

bt=$ASI_SELFTESTS/bpftrace
pt=$ASI_PT
asi_require_on
command -v bpftrace >/dev/null || asi_skip_all "no bpftrace in this image"
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
asi_plan 4

# run SCRIPT PATTERN...: SCRIPT's output must match every PATTERN; the
# case SCRIPT.
run() {
	script=$1
	shift
	out=/tmp/$(basename "$script" .bt).out
	bpftrace "$bt/$script" >"$out" 2>&1 &
	pid=$!
	i=0
	until grep -q '^Attaching' "$out" 2>/dev/null || [ $i -ge 180 ]; do
		kill -0 $pid 2>/dev/null || break
		sleep 1
		i=$((i + 1))
		[ $((i % 15)) -eq 0 ] && asi_msg "$script: waiting for bpftrace to attach (${i} s)"
	done
	if ! grep -q '^Attaching' "$out"; then
		asi_fail "$script did not attach in ${i} s:"
		asi_show "$out"
		kill -9 $pid 2>/dev/null
		asi_result "$script"
		return
	fi
	asi_msg "$script attached in ${i} s"
	vms=/tmp/asi_bpftrace.vms
	if "$KVM_SELFTESTS"/x86_64/asi_multi_vm_test -v 12 -c 2 -s 3 >$vms 2>&1; then
		# The guests' counters: what the script saw happen.
		grep -e '^ASI is' -e '^VM  0:' -e 'migrations' $vms | asi_show
	else
		asi_fail "the guests failed:"
		asi_show $vms
	fi
	kill -INT $pid
	wait $pid
	asi_msg "--- $script:"
	asi_show "$out"
	for p; do
		grep -q -e "$p" "$out" || asi_fail "$script printed no /$p/"
	done
	asi_result "$script"
}

# bpftrace prints the address pages as signed decimals.
run asi_faults.bt '^@faults\[.*, -*[0-9]*\]: [0-9]' '^@by_symbol\[[0-9]*, ' \
	'^@by_region\[[0-9]*, '
run asi_switches.bt '^@enter: [1-9]' '^@exit\[interrupt\]: [1-9]' '^@exit\[owner\]: [1-9]'
run asi_full_map_time.bt '^@full_map_ns\[[0-9]*\]:' '^\[[0-9]' \
	'^@full_map_total_ns\[[0-9]*\]: [1-9]'

"$pt" suggest /tmp/asi_faults.out >/tmp/asi_bpftrace.suggest 2>&1 &&
	grep -q '^   1 ' /tmp/asi_bpftrace.suggest ||
	asi_fail "asi-pt suggest on asi_faults.bt's output:"
asi_show /tmp/asi_bpftrace.suggest
asi_result "asi-pt suggest ranks the faults"
ktap_finished
