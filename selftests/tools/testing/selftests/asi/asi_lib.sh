# SPDX-License-Identifier: GPL-2.0
#
# Shared by the ASI test scripts: sourced, not run. Exit codes of the
# tests: 0 pass, 1 fail, 4 skip.

ASI_DEBUGFS=/sys/kernel/debug/asi
ASI_CPUS=$ASI_DEBUGFS/cpus

# Skip unless the kernel runs with ASI on.
asi_require_on() {
	grep -q '^enabled: on' "$ASI_DEBUGFS/state" 2>/dev/null || {
		echo "SKIP: ASI is off"
		exit 4
	}
}

# Fail unless every file named is readable.
asi_require_files() {
	for f in "$@"; do
		[ -r "$f" ] || { echo "FAIL: $f missing"; exit 1; }
	done
}

# The sum over CPUs of column $1 of asi/cpus: enters (3), exits by owner
# (4), schedule-out (5), user return (6), fallbacks (7), fallbacks in
# interrupt or NMI context (11), exits on interrupt entry (12), trace
# events missed (13).
asi_sum() {
	awk -v c="$1" 'NR > 1 { s += $c } END { print s + 0 }' "$ASI_CPUS"
}

# Run "$@" on CPU $1 where taskset exists.
asi_on_cpu() {
	c=$1
	shift
	if command -v taskset >/dev/null; then taskset -c "$c" "$@"; else "$@"; fi
}

# How many WARN, BUG or oops reports the kernel log holds.
asi_warn_count() {
	dmesg | grep -c -E 'WARNING:|BUG:|Oops'
}
