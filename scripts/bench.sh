#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# scripts/bench.sh [bench.py arguments]: the benchmarks (make bench,
# make bench-quick), with what they need installed.
set -euo pipefail
. "$(dirname "$0")/common.sh"
need_pkgs gnuplot-nox $RUN_PKGS
need_qemu
exec python3 "$TOP/benchmarks/bench.py" "$@"
