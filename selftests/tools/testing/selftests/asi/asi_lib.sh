# SPDX-License-Identifier: GPL-2.0
#
# Shared by the ASI test scripts: sourced, not run.
#
# Output is KTAP (Documentation/dev-tools/ktap.rst), through kselftest's
# ktap_helpers.sh, and the exit code KSFT_PASS (0), KSFT_FAIL (1) or
# KSFT_SKIP (4). A test script
#   - checks what it needs first: asi_skip_all REASON (a plan of 0 tests,
#     exit KSFT_SKIP) or asi_bail REASON ("# FAIL:" and "Bail out!",
#     exit KSFT_FAIL; also where a test cannot go on after its plan);
#   - states its plan, asi_plan N, and reports N test cases; a case is
#     any number of checks, asi_fail MESSAGE for each that fails (a
#     "# FAIL:" line), closed by asi_result NAME ("ok", or "not ok" if a
#     check failed since the last result) or asi_skip NAME REASON;
#   - prints what it measured as diagnostics: asi_msg TEXT, asi_show;
#   - ends with ktap_finished (KSFT_PASS if every case passed or skipped).
# The "--live" halves that asi_multi_vm_test -x runs inside a test print
# diagnostics only and exit 1 if a check failed; the test reports them.

# The selftests' folder: tools/testing/selftests in the kernel tree, /tests
# in the project's test images. The KVM selftests are in its kvm/ folder
# (KVM_SELFTESTS to use others); asi-pt, the page-table tool, is $ASI_PT,
# or the one on $PATH, or the one in its bin/ folder.
ASI_SELFTESTS=$(CDPATH='' cd -- "$(dirname "$0")/.." && pwd)
KVM_SELFTESTS=${KVM_SELFTESTS:-$ASI_SELFTESTS/kvm}
ASI_PT=${ASI_PT:-$(command -v asi-pt || echo "$ASI_SELFTESTS/bin/asi-pt")}

[ -r "$ASI_SELFTESTS/kselftest/ktap_helpers.sh" ] || {
	echo "Bail out! $ASI_SELFTESTS/kselftest/ktap_helpers.sh missing"
	exit 1
}
. "$ASI_SELFTESTS/kselftest/ktap_helpers.sh"

asi_failed=0

asi_header() {
	[ -n "${asi_header_done:-}" ] && return
	asi_header_done=1
	ktap_print_header
}

asi_plan() {
	asi_header
	ktap_set_plan "$1"
}

asi_skip_all() {
	asi_header
	ktap_skip_all "$*"
	exit "$KSFT_SKIP"
}

asi_bail() {
	asi_header
	echo "# FAIL: $*"
	echo "Bail out! $*"
	ktap_print_totals
	exit "$KSFT_FAIL"
}

asi_msg() {
	echo "# $*"
}

# asi_show [FILE...]: the files' lines, or standard input's, as
# diagnostics (a line that is one already is left as it is).
asi_show() {
	sed '/^#/!s/^/# /' "$@"
}

asi_fail() {
	echo "# FAIL: $*"
	asi_failed=1
}

asi_result() {
	if [ "$asi_failed" -eq 0 ]; then
		ktap_test_pass "$1"
	else
		ktap_test_fail "$1"
	fi
	asi_failed=0
}

asi_skip() {
	asi_msg "$1: $2"
	ktap_test_skip "$1"
	asi_failed=0
}

ASI_DEBUGFS=/sys/kernel/debug/asi
ASI_CPUS=$ASI_DEBUGFS/cpus

# Skip unless the kernel runs with ASI on.
asi_require_on() {
	grep -q '^enabled: on' "$ASI_DEBUGFS/state" 2>/dev/null ||
		asi_skip_all "ASI is off"
}

# Fail unless every file named is readable.
asi_require_files() {
	for f in "$@"; do
		[ -r "$f" ] || asi_bail "$f missing"
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
		asi_skip_all "no SVM or VMX"
	fi
	[ -e /sys/module/kvm/initstate ] && return
	modprobe "$vendor" 2>/dev/null || true
	[ -e /sys/module/kvm/initstate ] ||
		asi_skip_all "KVM is built in, or $vendor does not load"
}

# asi_run WHAT FILTER CMD...: run CMD with its output in $out (a file
# the caller made). On failure, asi_fail "WHAT failed" and show the
# output (return 1); else show the output's lines that match the extended
# regular expression FILTER (return 0).
asi_run() {
	what=$1 filter=$2
	shift 2
	if ! "$@" >"$out" 2>&1; then
		asi_fail "$what failed:"
		asi_show "$out"
		return 1
	fi
	grep -E "$filter" "$out" | asi_show
	return 0
}

# A failed check (asi_fail) if the kernel log holds more WARN, BUG or
# oops reports than $1 (asi_warn_count's earlier count); shows them.
asi_check_warns() {
	w=$(asi_warn_count)
	[ "$w" -eq "$1" ] && return
	asi_fail "$((w - $1)) new WARN/BUG/Oops reports:"
	dmesg | grep -E -A20 'WARNING:|BUG:|Oops' | tail -60 | asi_show
}
