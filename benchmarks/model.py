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
sys.path.insert(0, HERE)
import bench  # noqa: E402
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
    os.makedirs(os.path.join(OUT, "build", "tools"), exist_ok=True)
    exe = os.path.join(OUT, "build", "tools", "event_costs")
    src = os.path.join(HERE, "event_costs.c")
    r = subprocess.run(["gcc", "-O2", "-Wall", "-o", exe, src], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"error: cannot build {src}:\n{r.stderr}")
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    events = {m.group(1): float(m.group(2))
              for m in re.finditer(r"^event: (\S+) ticks=([\d.]+)", out, re.M)}
    info = {}
    for line in out.splitlines():
        if line.startswith("event:"):
            continue
        k, _, v = line.partition(": ")
        if k == "cpu":
            k, _, v = v.partition(":")
        info[k.strip()] = v.strip()
    cpu = (f"{info.get('model name', '?')} family {info.get('cpu family', '?')} "
           f"model {info.get('model', '?')}, md_clear {info.get('md_clear', '?')}"
           + (", under a hypervisor" if info.get("hypervisor") == "yes" else ""))
    return events, cpu, info


def tsc_ghz(info):
    """TSC ticks per ns, as event_costs.c measured them (None if not)."""
    khz = info.get("tsc_khz")
    return float(khz) / 1e6 if khz else None


def samples(table, clock, workload, variant="asi=on"):
    """A workload's samples, one per repetition (bench.summarize(): the
    boots whose kernel did not fail, the last attempt's sample)."""
    return table.get(clock, {}).get(workload, {}).get(variant, [])


def median_of(table, clock, workload, fn, variant="asi=on"):
    vals = [v for v in map(fn, samples(table, clock, workload, variant)) if v is not None]
    return statistics.median(vals) if vals else None


def per(s, field, by="ops"):
    return s[field] / s[by] if s.get(by) else None


def icount_added(table):
    """Instructions asi=on adds per in-kernel exit (median over
    BASE_EXITS), and per switch pair (SWITCH_EXITS, which switch out and
    back on every exit, less the per-exit figure); None where the results
    file lacks the phases."""
    delta = {}
    for k in BASE_EXITS + SWITCH_EXITS:
        a = median_of(table, "icount", k, lambda s: s["ns"])
        b = median_of(table, "icount", k, lambda s: s["ns"], "asi=off")
        if a is not None and b is not None:
            delta[k] = a - b
    base = [delta[k] for k in BASE_EXITS if k in delta]
    if not base:
        return None, None
    base = statistics.median(base)
    pairs = []
    for k in SWITCH_EXITS:
        switches = median_of(table, "icount", k, lambda s: per(s, "enters", "exits"))
        if k in delta and switches and switches >= 0.5:
            pairs.append((delta[k] - base) / switches)
    return base, (statistics.median(pairs) if pairs else None)


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
    p.add_argument("--ghz", type=float,
                   help="cycles per ns (default: this machine's TSC frequency)")
    args = p.parse_args()

    path = args.results or latest_results()
    with open(path) as f:
        res = json.load(f)
    for r in res["runs"]:
        r.setdefault("kernel_ok", r.get("ok", False))
    table = bench.summarize(res["runs"], res["meta"]["clocks"])
    per_exit, per_switch = icount_added(table)
    if per_exit is None or per_switch is None:
        sys.exit(f"error: {path} lacks the -icount exit phases the model needs "
                 f"({', '.join(BASE_EXITS + SWITCH_EXITS)}, asi=on and asi=off)")
    events, cpu, info = measure_events()
    flush = args.flush_cycles if args.flush_cycles is not None else events["verw"]
    ghz = args.ghz or tsc_ghz(info)
    if not ghz:
        sys.exit("error: the TSC frequency is not known here: give --ghz")

    print(f"MODEL of ASI's cost on a real host (not a measurement); counts from "
          f"{os.path.relpath(path, TOP)}")
    print(f"  CR3 write {args.cr3_cycles:.0f} cycles (Documentation/arch/x86/pti.rst); "
          f"flush {flush:.1f} cycles ("
          + ("--flush-cycles" if args.flush_cycles is not None else
             f"VERW measured here: {cpu}") + ")")
    print(f"  fallback {args.fallback_cycles:.0f} cycles (assumed); ASI's instructions: "
          f"{per_exit:.1f} per exit, {per_switch:.1f} per switch pair (icount), "
          f"1 cycle each (assumed); {ghz:.3f} cycles per ns")
    print(f"  for scale, a getppid() round trip here: {events['getppid']:.0f} cycles")
    print()
    print("| workload | guests | exits/op | entries/op | flushes/op | fallbacks/op "
          "| cycles added/op | us added/op | host CPU/op for +1 % | for +5 % |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = 0
    for guests in (1, 12):
        for ph in PHASES:
            key = f"l2-{guests}-{ph}"
            cnt = {f: median_of(table, "realtime", key, lambda s, f=f: per(s, f))
                   for f in ("exits", "enters", "flushes", "fallbacks")}
            if None in cnt.values():
                continue
            cyc = (cnt["exits"] * per_exit
                   + cnt["enters"] * (2 * args.cr3_cycles + per_switch)
                   + cnt["flushes"] * flush + cnt["fallbacks"] * args.fallback_cycles)
            us = cyc / ghz / 1000
            print(f"| {ph} | {guests} | {cnt['exits']:.1f} | {cnt['enters']:.1f} | "
                  f"{cnt['flushes']:.1f} | {cnt['fallbacks']:.3f} | {cyc:.0f} | "
                  f"{us:.2f} | {100 * us:.0f} us | {20 * us:.0f} us |")
            rows += 1
    if not rows:
        sys.exit(f"error: {path} has no L2 workload samples of asi=on")
    return 0


if __name__ == "__main__":
    sys.exit(main())
