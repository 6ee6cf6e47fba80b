# SPDX-License-Identifier: GPL-2.0
#
# Shared by the ASI test scripts: sourced, not run. Exit codes of the
# tests: KSFT_PASS (0), KSFT_FAIL (1), KSFT_SKIP (4).

# The selftests' folder: tools/testing/selftests in the kernel tree, /tests
# in the project's test images. The KVM selftests are in its kvm/ folder
# (KVM_SELFTESTS to use others); asi-pt, the page-table tool, is $ASI_PT,
# or the one on $PATH, or the one in its bin/ folder.
ASI_SELFTESTS=$(CDPATH='' cd -- "$(dirname "$0")/.." && pwd)
KVM_SELFTESTS=${KVM_SELFTESTS:-$ASI_SELFTESTS/kvm}
ASI_PT=${ASI_PT:-$(command -v asi-pt || echo "$ASI_SELFTESTS/bin/asi-pt")}

# The exit codes (KSFT_PASS, KSFT_FAIL, KSFT_SKIP) and KTAP output.
[ -r "$ASI_SELFTESTS/kselftest/ktap_helpers.sh" ] || {
	echo "FAIL: $ASI_SELFTESTS/kselftest/ktap_helpers.sh missing"
	exit 1
}
. "$ASI_SELFTESTS/kselftest/ktap_helpers.sh"

ASI_DEBUGFS=/sys/kernel/debug/asi
ASI_CPUS=$ASI_DEBUGFS/cpus

# Skip unless the kernel runs with ASI on.
asi_require_on() {
	grep -q '^enabled: on' "$ASI_DEBUGFS/state" 2>/dev/null || {
		echo "SKIP: ASI is off"
		exit "$KSFT_SKIP"
	}
}

# Fail unless every file named is readable.
asi_require_files() {
	for f in "$@"; do
		[ -r "$f" ] || { echo "FAIL: $f missing"; exit "$KSFT_FAIL"; }
	done
}

# The sum over CPUs of column $1 of asi/cpus: enters (3), exits by owner
# (4), schedule-out (5), user return (6), fallbacks (7), fallbacks in
# interrupt or NMI context (11), exits on interrupt entry (12), trace
# events missed (13), planned exits (18).
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

# For the tests of KVM built as modules: set vendor (this CPU's vendor
# module), other (the other vendor's) and paging (the vendor module's
# nested paging parameter), and load the vendor module. Skip without SVM
# or VMX, or with KVM built in.
asi_kvm_modules() {
	if grep -q -w svm /proc/cpuinfo; then
		vendor=kvm_amd other=kvm_intel paging=npt
	elif grep -q -w vmx /proc/cpuinfo; then
		vendor=kvm_intel other=kvm_amd paging=ept
	else
		echo "SKIP: no SVM or VMX"
		exit "$KSFT_SKIP"
	fi
	[ -e /sys/module/kvm/initstate ] && return
	modprobe "$vendor" 2>/dev/null || true
	[ -e /sys/module/kvm/initstate ] || {
		echo "SKIP: KVM is built in, or $vendor does not load"
		exit "$KSFT_SKIP"
	}
}

# asi_run WHAT FILTER CMD...: run CMD with its output in $out (a file
# the caller made). On failure say "FAIL: WHAT failed:", show the output
# and set fail=1 (return 1); else show the output's lines that match the
# extended regular expression FILTER (return 0).
asi_run() {
	what=$1 filter=$2
	shift 2
	if ! "$@" >"$out" 2>&1; then
		echo "FAIL: $what failed:"
		cat "$out"
		fail=1
		return 1
	fi
	grep -E "$filter" "$out"
	return 0
}

# Fail (set fail=1) if the kernel log holds more WARN, BUG or oops reports
# than $1 (asi_warn_count's earlier count), and show them.
asi_check_warns() {
	w=$(asi_warn_count)
	[ "$w" -eq "$1" ] && return
	echo "FAIL: $((w - $1)) new WARN/BUG/Oops reports:"
	dmesg | grep -E -A20 'WARNING:|BUG:|Oops' | tail -60
	fail=1
}
