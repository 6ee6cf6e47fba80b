#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# What ASI's sibling protocol costs, on a machine whose two CPUs are
# hyperthreads of one core (QEMU -smp 2,sockets=1,cores=1,threads=2):
# asi_exits_perf_test on CPU 0, with the protocol on and off (asi/smt),
# alternating, REPS times each, in two settings of CPU 1:
#
#   idle     nothing else runs: CPU 1 halts, and every interrupt that
#            wakes it kicks the guest beside it
#   busy     a second VMM process runs asi_exits_perf_test on CPU 1 (another
#            VM: core scheduling keeps the two off the core at once, and
#            the protocol holds back a guest whose sibling is elsewhere)
#
# Prints as KTAP diagnostics, per exit type and setting, the mean ns per
# exit (the "bench:" lines) with the protocol on and off, and the
# protocol's kicks and refused VM-entries per 1,000 exits. A benchmark: a
# case per setting, and it fails only if a run fails (it bails out).
# Usage: asi_smt_cost.sh [REPS]. KTAP output; exit: 0 pass, 1 fail,
# 4 skip.

. "$(dirname "$0")/asi_lib.sh"

reps=${1:-2}
exits=$KVM_SELFTESTS/x86_64/asi_exits_perf_test
smt=$ASI_DEBUGFS/smt
out=/tmp/asi_smt_cost

asi_require_on
[ -w "$smt" ] || asi_bail "$smt missing"
[ -x "$exits" ] || asi_bail "$exits missing"
grep -q '^pairs: [1-9]' "$smt" || {
	asi_header
	asi_show "$smt"
	asi_skip_all "no core with two CPUs online"
}
asi_plan 2

smt_counts() {
	awk 'NR > 3 { k += $3; r += $8 } END { print k + 0, r + 0 }' "$smt"
}

rm -rf "$out"
mkdir -p "$out"
for setting in idle busy; do
	r=1
	while [ $r -le "$reps" ]; do
		for mode in on off; do
			echo "$mode" >"$smt" ||
				asi_bail "cannot turn the protocol $mode"
			bg=
			if [ $setting = busy ]; then
				(while [ ! -e "$out/stop" ]; do
					ASI_EXITS_ALLOW_FALLBACKS=1 \
						asi_on_cpu 1 "$exits" >/dev/null 2>&1
				done) &
				bg=$!
			fi
			c0=$(smt_counts)
			ASI_EXITS_ALLOW_FALLBACKS=1 \
				asi_on_cpu 0 "$exits" >"$out/$setting.$mode.$r" 2>&1
			rc=$?
			c1=$(smt_counts)
			if [ -n "$bg" ]; then
				touch "$out/stop"
				wait "$bg"
				rm -f "$out/stop"
			fi
			if [ $rc -ne 0 ]; then
				asi_fail "asi_exits_perf_test ($setting, protocol $mode):"
				tail -20 "$out/$setting.$mode.$r" | asi_show
				echo on >"$smt"
				asi_bail "asi_exits_perf_test failed (sibling $setting)"
			fi
			echo "$c0 $c1" >"$out/$setting.$mode.$r.smt"
			# Progress on the console (the harness's idle timeout).
			asi_msg "run $r, sibling $setting, protocol $mode: done" \
				"($(grep -c '^bench: ' "$out/$setting.$mode.$r") bench lines)"
		done
		r=$((r + 1))
	done
	asi_result "sibling $setting runs"
done
echo on >"$smt"

# The tables, for the log.
tables() {
	echo "ns per exit, mean of $reps runs each (QEMU TCG, one core of two threads):"
	for setting in idle busy; do
		echo "sibling $setting:"
		printf '  %-14s %10s %10s %8s\n' exit "ns on" "ns off" "on/off"
		awk '/^bench: / {
			n = split(FILENAME, p, "."); mode = p[n - 1]
			v = $3; sub("ns=", "", v)
			if (!($2 in seen)) { seen[$2] = 1; order[++nx] = $2 }
			sum[$2, mode] += v; cnt[$2, mode]++
		}
		END {
			for (i = 1; i <= nx; i++) {
				e = order[i]
				on = cnt[e, "on"] ? sum[e, "on"] / cnt[e, "on"] : 0
				off = cnt[e, "off"] ? sum[e, "off"] / cnt[e, "off"] : 0
				printf "  %-14s %10.1f %10.1f %8.3f\n", e, on, off,
				       off ? on / off : 0
			}
		}' "$out/$setting".on.[0-9]* "$out/$setting".off.[0-9]*
		# Kicks and refusals over all of a setting's runs with the protocol
		# on, per 1,000 exits of CPU 0's asi_exits_perf_test.
		k=0 rf=0 ex=0
		r=1
		while [ $r -le "$reps" ]; do
			set -- $(cat "$out/$setting.on.$r.smt")
			k=$((k + $3 - $1)) rf=$((rf + $4 - $2))
			n=$(awk '/^bench: / { sub("exits=", "", $4); s += $4 }
				 END { print s + 0 }' "$out/$setting.on.$r")
			ex=$((ex + n))
			r=$((r + 1))
		done
		awk -v k=$k -v r=$rf -v x=$ex 'BEGIN {
			printf "  protocol on: %d kicks, %d refused VM-entries in %d exits:",
			       k, r, x
			printf " %.2f and %.2f per 1,000 exits\n",
			       x ? 1000 * k / x : 0, x ? 1000 * r / x : 0 }'
	done
}
tables | asi_show
ktap_finished
