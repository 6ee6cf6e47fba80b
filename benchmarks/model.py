#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A model of what ASI would cost the seed's workloads on a real host.

  model.py [RESULTS.json] [--cr3-cycles N] [--flush-cycles N]
           [--fallback-cycles N] [--ghz G]

A MODEL, not a measurement. The emulator gives counts that do not depend
on how fast the machine is (VM exits, restricted-table entries, flushes,
fallback faults per operation; instructions ASI adds per exit under
-icount), and this multiplies them by per-event costs on hardware:

  cycles added per operation =
        exits x instructions added per exit (icount, at one cycle each)
      + entries x (2 CR3 writes + the switch's own instructions)
      + flushes x one flush
      + fallbacks x one fallback fault

The costs: a CR3 write "on the order of a hundred cycles"
(Documentation/arch/x86/pti.rst, "Runtime Cost", with PCID); the flush
as the CPU this runs on executes it (benchmarks/event_costs.c: VERW from
user space, ASI's flush where no L1D flush is due, i.e. on AMD and on
Intel CPUs without L1TF), unless --flush-cycles gives one; a fallback
fault 2,000 cycles, an assumption (an exception, two CR3 writes and a
retried access; the steady-state counts are near 0, so it weighs
little). Not modelled: TLB refills (with PCIDs each domain keeps its
translations across switches; how many it loses to other work is not
known here), the L1D flush of L1TF-affected Intel CPUs, SMT kicks.

Counts come from the asi=on boots of the realtime clock (medians over
boots). Timer-driven exits per operation are inflated by the emulator
(an operation lasts milliseconds here, microseconds on hardware), so the
counts, and the model, err high. The result is cycles added per
operation and, because this machine cannot give a real host's CPU time
per operation, the host CPU time per operation at which the added
cycles are 1 % and 5 %.
"""

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
TOP = os.path.dirname(HERE)
OUT = os.path.join(TOP, "out")
PHASES = ("disk-read", "disk-write", "disk-randread", "disk-randwrite", "net-send")
# In-kernel exits handled on the table (no switch, no flush): what ASI adds
# to an exit; and the planned exits that switch out and back once per exit.
BASE_EXITS = ("cpuid", "msr_read", "msr_write", "cr4_write", "mmio_kernel")
SWITCH_EXITS = ("ioeventfd", "tsc_deadline")


def latest_results():
    files = [f for f in glob.glob(os.path.join(HERE, "results", "*.json"))
             if "-quick" not in f]
    if not files:
        sys.exit("error: no results file in benchmarks/results (run make bench)")
    return max(files, key=lambda f: (os.path.basename(f)[:10], os.path.getmtime(f)))


def measure_events():
    """Compile and run event_costs.c; its "event:" lines and the CPU it ran on."""
    os.makedirs(OUT, exist_ok=True)
    exe = os.path.join(OUT, "event_costs")
    src = os.path.join(HERE, "event_costs.c")
    r = subprocess.run(["gcc", "-O2", "-Wall", "-o", exe, src], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"error: cannot build {src}:\n{r.stderr}")
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    events = {m.group(1): float(m.group(2))
              for m in re.finditer(r"^event: (\S+) ticks=([\d.]+)", out, re.M)}
    info = {}
    for line in out.splitlines():
        k, _, v = line.partition(": ")
        if k == "cpu":
            k, _, v = v.partition(":")
        info[k.strip()] = v.strip()
    cpu = (f"{info.get('model name', '?')} family {info.get('cpu family', '?')} "
           f"model {info.get('model', '?')}, md_clear {info.get('md_clear', '?')}"
           + (", under a hypervisor" if info.get("hypervisor") == "yes" else ""))
    return events, cpu, out


def tsc_ghz():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("cpu MHz"):
                return float(line.split(":")[1]) / 1000
    return None


def runs_of(res, clock, variant):
    return [r for r in res["runs"]
            if r["clock"] == clock and r["variant"] == variant and r.get("samples")]


def median_of(runs, key, fn):
    vals = [fn(r["samples"][key]) for r in runs if key in r["samples"]]
    return statistics.median(vals) if vals else None


def icount_added(res):
    """Instructions asi=on adds per in-kernel exit, and per switch pair."""
    on, off = runs_of(res, "icount", "asi=on"), runs_of(res, "icount", "asi=off")
    if not on or not off:
        return None, None
    delta = {}
    for k in BASE_EXITS + SWITCH_EXITS:
        a, b = median_of(on, k, lambda s: s["ns"]), median_of(off, k, lambda s: s["ns"])
        if a is not None and b is not None:
            delta[k] = a - b
    base = statistics.median([delta[k] for k in BASE_EXITS if k in delta])
    per = [(delta[k] - base) / max(median_of(on, k, lambda s: s["enters"] / s["exits"]), 1e-9)
           for k in SWITCH_EXITS if k in delta]
    return base, (statistics.median(per) if per else None)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="?", help="a make bench results file "
                   "(default: the latest full run in benchmarks/results)")
    p.add_argument("--cr3-cycles", type=float, default=100.0,
                   help="one CR3 write with PCID (default 100: pti.rst)")
    p.add_argument("--flush-cycles", type=float,
                   help="one entry flush (default: VERW measured here)")
    p.add_argument("--fallback-cycles", type=float, default=2000.0,
                   help="one fallback fault (default 2000, an assumption)")
    p.add_argument("--ghz", type=float, help="cycles per ns (default: this CPU's clock)")
    args = p.parse_args()

    path = args.results or latest_results()
    with open(path) as f:
        res = json.load(f)
    events, cpu, _ = measure_events()
    flush = args.flush_cycles if args.flush_cycles is not None else events["verw"]
    ghz = args.ghz or tsc_ghz() or 2.0
    per_exit, per_switch = icount_added(res)
    if per_exit is None:
        sys.exit(f"error: {path} has no icount boots of asi=on and asi=off")

    print(f"MODEL of ASI's cost on a real host (not a measurement); counts from "
          f"{os.path.relpath(path, TOP)}")
    print(f"  CR3 write {args.cr3_cycles:.0f} cycles (Documentation/arch/x86/pti.rst); "
          f"flush {flush:.0f} cycles ("
          + ("--flush-cycles" if args.flush_cycles is not None else
             f"VERW measured here: {cpu}") + ")")
    print(f"  fallback {args.fallback_cycles:.0f} cycles (assumed); ASI's instructions: "
          f"{per_exit:.0f} per exit, {per_switch:.0f} per switch pair (icount), "
          f"1 cycle each (assumed); {ghz:.2f} cycles per ns")
    print(f"  for scale, a getppid() round trip here: {events['getppid']:.0f} cycles")
    print()
    print("| workload | guests | exits/op | entries/op | flushes/op | fallbacks/op "
          "| cycles added/op | us added/op | host CPU/op for +1 % | for +5 % |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    on = runs_of(res, "realtime", "asi=on")
    for guests in (1, 12):
        for ph in PHASES:
            key = f"l2-{guests}-{ph}"
            cnt = {f: median_of(on, key, lambda s, f=f: s[f] / s["ops"])
                   for f in ("exits", "enters", "flushes", "fallbacks")}
            if cnt["exits"] is None:
                continue
            cyc = (cnt["exits"] * per_exit
                   + cnt["enters"] * (2 * args.cr3_cycles + per_switch)
                   + cnt["flushes"] * flush + cnt["fallbacks"] * args.fallback_cycles)
            us = cyc / ghz / 1000
            print(f"| {ph} | {guests} | {cnt['exits']:.1f} | {cnt['enters']:.1f} | "
                  f"{cnt['flushes']:.1f} | {cnt['fallbacks']:.3f} | {cyc:.0f} | "
                  f"{us:.2f} | {100 * us:.0f} us | {20 * us:.0f} us |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
