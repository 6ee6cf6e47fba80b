#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# l2faults.sh [GUESTS DIVISOR]: where an L2 guest's fallbacks come from.
# Runs l2bench.sh (one guest, the full work, by default) under
# asi_fault_stacks.sh (the ftrace "stacktrace" trigger on asi:asi_fault),
# which prints every distinct faulting ip with its call chain and count,
# most frequent first ("l2faults: COUNT ip=SITE < CALLER < ...").
# Run by the plan bench-faults (docs/performance.md says how).
L2_TIMEOUT=${L2_TIMEOUT:-150} ASI_STACKS_PREFIX=l2faults \
	exec /tests/asi/asi_fault_stacks.sh /tests/bin/l2bench.sh "${1:-1}" "${2:-1}"
