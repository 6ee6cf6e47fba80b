#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Side-by-side benchmark runs of asi=off, asi=on and ASI compiled out.

  bench.py [--quick] [--reps N] [--clocks realtime,icount]

Boots the test kernel in QEMU (TCG) with the "bench" plan, which runs
asi_exits_perf_test: per exit type (CPUID, MSR read and write, PIO and MMIO to
in-kernel devices, PIO to user space) the host time per exit, and a
CPU-bound guest loop with no exits as the control, each with the vCPU's
KVM statistics. The variants alternate in every repetition (off, on,
compiled out, off, on, ...) so that drift of the machine hits them alike.

Two clocks: "realtime" (the emulated machine's clock follows the host's)
and "icount" (QEMU -icount shift=0: the clock advances one nanosecond per
emulated instruction, so a time is an instruction count and repeatable).
The realtime boots run the plan "bench" (exits, one L2 guest); the
icount boots run the exit micro-benchmarks only (plan "bench-exits"): an
instruction count is what they are for, and the L2 workloads under
icount would not fit the time budget. Twelve L2 guests run separately:
bench.py --clocks realtime --plan bench-l2-12 (make bench-l2-12).

A boot whose kernel fails is run once more; one whose L2 guest stalls
(see docs/performance.md) is not: its workloads that finished count, and
the table gives each workload's number of samples. Every attempt is in
the results file.

Writes benchmarks/results/<date>-<commit>.json (every sample, kernel and
QEMU versions, command lines) and .md (median, min, max per variant and the
ratio on/off per workload), and an SVG plot with gnuplot when it is there.
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "selftests", "harness"))
import asitest  # noqa: E402

OUT = asitest.OUT
# "bench: NAME key=value ...": asi_exits_perf_test's lines and l2mon's (which
# add cpu_ms, wall_ms, ops, frames and l2_ms); ns is the figure compared.
BENCH = re.compile(r"^bench: (\S+) (ns=.*)$")
FIELDS = ("ns", "exits", "enters", "fallbacks", "flushes", "skipped")
NUMBER = re.compile(r"(\w+)=(\d+(?:\.\d+)?)")
VARIANTS = [
    # name, kernel configuration, command line
    ("asi=off", "default", "asi=off"),
    ("asi=on", "default", "asi=on"),
    ("compiled-out", "noasi", ""),
]
# clock: (QEMU arguments, TCG mode, plan). realtime runs multi-threaded
# TCG (QEMU 10, need_qemu()): with it twelve L2 guests run every phase,
# where single-threaded TCG leaves some stalled at boot (L1's KVM hands an
# L2 guest its timer interrupt a second time inside the handler of the
# first; docs/performance.md, "The L2 stall"). Multi-threaded TCG can
# still take a host interrupt right after VMRUN, before KVM restores the
# host's GS base (QEMU 7.2 and 10 alike, with or without ASI): such a boot
# fails, is run once more, and is listed in the report. icount needs
# single-threaded TCG (QEMU allows no other): the exit micro-benchmarks,
# counted in instructions.
CLOCKS = {"realtime": ([], "tcg,thread=multi", "bench"),
          "icount": (["-icount", "shift=0"], "tcg,thread=single", "bench-exits")}
# The seed's workloads, as l2mon names them, for the comparison table.
SEED_PHASES = {"disk read": "disk-read", "disk write": "disk-write",
               "network send": "net-send"}
# What the proof of concept reported for its workloads (host CPU time, one
# guest / more than ten), for the comparison in docs/performance.md.
SEED = {"disk read": (1.2, 1.3), "disk write": (1.1, 1.2), "network send": (2.6, 3.8)}


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()


def one_boot(variant, config, append, clock, rep, logdir, attempt=0, plan=None):
    kernel = os.path.join(OUT, "build", config, "arch", "x86", "boot", "bzImage")
    image = os.path.join(OUT, "image", "initramfs-bench.cpio")
    name = f"{clock}-{variant.replace('=', '-')}-{rep}" + (f"-retry{attempt}" if attempt else "")
    qemu, accel, clock_plan = CLOCKS[clock]
    plan = plan or clock_plan
    b = asitest.Boot(name, kernel, image, f"{append} asitest.plan={plan}", logdir,
                     timeout=900, idle_timeout=150, qemu_extra=qemu, accel=accel)
    b.run()
    samples = {}
    for line in b.lines:
        m = BENCH.search(asitest.PRINTK_TIME.sub("", line))
        if m:
            # A kernel message can land in the middle of the line (the
            # console is shared): take each field's leading number only.
            kv = {k: v for k, v in NUMBER.findall(m.group(2))}
            if not all(k in kv for k in FIELDS):
                continue
            samples[m.group(1)] = {k: float(v) if "." in v or k == "ns" else int(v)
                                   for k, v in kv.items()}
    # A plan test that fails (an L2 guest that stalls) leaves the kernel
    # fine and the lines of what finished: the boot failed, the kernel not.
    failed = [m.group(3) for m in map(asitest.RESULT.search, b.lines)
              if m and m.group(1) == "not ok"]
    verdict = b.verdict() or (f"failed: {', '.join(failed)}" if failed else None) \
        or (None if samples else "no bench lines")
    print(f"  {name}: {'ok' if not verdict else 'FAILED: ' + verdict}"
          f" in {b.seconds:.0f} s", flush=True)
    if b.verdict():
        print(b.report())
    return {"boot": name, "command": b.cmd(), "ok": not verdict, "samples": samples,
            "seconds": round(b.seconds, 1), "verdict": verdict,
            "kernel_ok": b.verdict() is None}


def summarize(runs, clocks):
    """Samples per clock, workload and variant: one per repetition.

    Of the attempts of one repetition and variant, each workload's sample
    is the last one that finished (a "bench:" line is printed only when its
    workload completed). Boots whose kernel failed count for nothing.
    """
    merged = {}
    for r in runs:
        if r["kernel_ok"]:
            merged.setdefault((r["clock"], r["rep"], r["variant"]), {}).update(r["samples"])
    table = {}
    for (clock, rep, variant), samples in sorted(merged.items()):
        if clock not in clocks:
            continue
        for w, s in samples.items():
            table.setdefault(clock, {}).setdefault(w, {}).setdefault(
                variant, []).append(dict(s, rep=rep))
    return table


def stats(values):
    return statistics.median(values), min(values), max(values)


def pair_ratios(per):
    """on/off of the boots of the same repetition, where both finished."""
    off = {s["rep"]: s["ns"] for s in per.get("asi=off", [])}
    return [s["ns"] / off[s["rep"]] for s in per.get("asi=on", []) if off.get(s["rep"])]


def seed_table(table):
    """The seed's workloads: our median overhead next to the published one."""
    per = table.get("realtime", {})
    lines = ["### The seed's workloads: host CPU time, asi=on against asi=off", "",
             "Host CPU time of all QEMU processes per operation, by their CPU "
             "clocks (l2mon) and by `perf stat -e task-clock -p` over the same "
             "phase (the perf column: medians of each boot's perf task-clock per "
             "operation).", "",
             "| workload | guests | asi=off median ns/op | asi=on median ns/op | "
             "overhead (medians) | per pair (min-max) | overhead by perf task-clock | "
             "proof of concept (hardware) |",
             "|---|---|---|---|---|---|---|---|"]
    for label, phase in SEED_PHASES.items():
        for guests, idx in (("1", 0), ("12", 1)):
            w = per.get(f"l2-{guests}-{phase}", {})
            if not (w.get("asi=off") and w.get("asi=on")):
                lines.append(f"| {label} | {guests} | - | - | - | - | - | "
                             f"+{SEED[label][idx]} % |")
                continue
            off = statistics.median([s["ns"] for s in w["asi=off"]])
            on = statistics.median([s["ns"] for s in w["asi=on"]])
            pairs = pair_ratios(w)
            spread = (f"{100 * (min(pairs) - 1):+.1f} to {100 * (max(pairs) - 1):+.1f} % "
                      f"({len(pairs)})" if pairs else "no pair")
            perf = {v: [1e6 * s["perf_ms"] / s["ops"] for s in w[v]
                        if s.get("perf_ms") and s.get("ops")] for v in ("asi=off", "asi=on")}
            by_perf = "-"
            if perf["asi=off"] and perf["asi=on"]:
                ratio = statistics.median(perf["asi=on"]) / statistics.median(perf["asi=off"])
                by_perf = f"{100 * (ratio - 1):+.1f} %"
            lines.append(f"| {label} | {guests} | {off:.0f} (n={len(w['asi=off'])}) | "
                         f"{on:.0f} (n={len(w['asi=on'])}) | "
                         f"{100 * (on / off - 1):+.1f} % | {spread} | {by_perf} | "
                         f"+{SEED[label][idx]} % |")
    return lines + [""]


# Why a CPU left the restricted table, from l2mon's fields (asi=on).
LEAVES = (("fallbacks", "fallbacks"), ("x_irq", "interrupts"), ("x_sched", "schedule-outs"),
          ("x_user", "to user space"), ("x_timer", "planned: timer"),
          ("x_ioeventfd", "planned: ioeventfd"), ("x_faultin", "planned: page lookup"))


def leave_table(table):
    """Per L2 workload, asi=on: exits from the table per 1,000 VM exits, by
    reason, and flushes per VM-entry (one VM-entry per exit)."""
    per = table.get("realtime", {})
    rows = [(w, p["asi=on"]) for w, p in per.items()
            if w.startswith("l2-") and p.get("asi=on")]
    if not rows:
        return []
    lines = ["### Why the CPU left the restricted table (realtime clock, asi=on)", "",
             "Per 1,000 VM exits, summed over the asi=on boots; a VM-entry flushes "
             "when the CPU left the table since the last one, whatever the reason.", "",
             "| workload | exits | " + " | ".join(l for _, l in LEAVES) +
             " | flushes per VM-entry |", "|---|---:|" + "---:|" * (len(LEAVES) + 1)]
    for w, on in rows:
        exits = sum(s["exits"] for s in on)
        if not exits:
            continue
        cells = [w, str(exits)]
        for key, _ in LEAVES:
            have = [s[key] for s in on if key in s]
            cells.append(f"{1000 * sum(have) / exits:.1f}" if have else "-")
        cells.append(f"{sum(s['flushes'] for s in on) / exits:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def markdown(table, meta):
    lines = [f"Benchmark run {meta['date']} at {meta['commit']} on {meta['platform']}",
             f"({meta['reps']} repetitions per variant, alternating; kernel "
             f"{meta['kernel']}, {meta['qemu']}).", ""]
    if meta.get("failed_boots"):
        lines += ["Boots that failed (a kernel failure was run once more; a stalled "
                  "L2 guest was not: that boot's workloads that finished count, the "
                  "rest have no sample):", ""] + [f"- {f}" for f in meta["failed_boots"]] + [""]
    lines += seed_table(table)
    lines += leave_table(table)
    for clock, workloads in table.items():
        unit = "ns" if clock == "realtime" else "instructions"
        lines += [f"### Clock: {clock}", "",
                  f"Exit benchmarks: {unit} per exit (compute: per run of the guest "
                  f"loop); l2-*: host (L1) CPU {unit} of all QEMU processes per "
                  "operation. Counters: restricted-table entries per VM exit, "
                  "fallback faults per 1,000 exits, flushes done / skipped, summed "
                  "over the asi=on boots.", "",
                  "| workload | asi=off median (min-max, n) | asi=on median (min-max, n) | "
                  "on/off | on/off per pair (min-max) | compiled-out median | off/compiled-out | "
                  "enters/exit (on) | fallbacks/1000 exits (on) | flushes done/skipped (on) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for w, per in workloads.items():
            cells = [w]
            med = {}
            for v in ("asi=off", "asi=on"):
                if v in per:
                    m, lo, hi = stats([s["ns"] for s in per[v]])
                    med[v] = m
                    cells.append(f"{m:.0f} ({lo:.0f}-{hi:.0f}, n={len(per[v])})")
                else:
                    cells.append("-")
            cells.append(f"{med['asi=on'] / med['asi=off']:.3f}"
                         if med.get("asi=off") and med.get("asi=on") else "-")
            pairs = pair_ratios(per)
            cells.append(f"{min(pairs):.3f}-{max(pairs):.3f} ({len(pairs)})" if pairs else "-")
            if "compiled-out" in per:
                co = statistics.median([s["ns"] for s in per["compiled-out"]])
                cells.append(f"{co:.0f}")
                cells.append(f"{med['asi=off'] / co:.3f}" if med.get("asi=off") else "-")
            else:
                cells += ["-", "-"]
            on = per.get("asi=on", [])
            exits = sum(s["exits"] for s in on)
            if on and exits:
                cells.append(f"{sum(s['enters'] for s in on) / exits:.3f}")
                cells.append(f"{1000 * sum(s['fallbacks'] for s in on) / exits:.2f}")
                cells.append(f"{sum(s['flushes'] for s in on)}/"
                             f"{sum(s['skipped'] for s in on)}")
            else:
                cells += ["-", "-", "-"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(table, path):
    """Overhead of asi=on against asi=off per workload, per clock (SVG)."""
    if not subprocess.run(["sh", "-c", "command -v gnuplot"], capture_output=True).stdout:
        return None
    data = path + ".dat"
    clocks = list(table)
    workloads = sorted({w for c in clocks for w in table[c] if not w.endswith("-warmup")})
    with open(data, "w") as f:
        f.write("workload " + " ".join(clocks) + "\n")
        for w in workloads:
            row = [w]
            for c in clocks:
                per = table[c].get(w, {})
                if per.get("asi=off") and per.get("asi=on"):
                    off = statistics.median([s["ns"] for s in per["asi=off"]])
                    on = statistics.median([s["ns"] for s in per["asi=on"]])
                    row.append(f"{100 * (on / off - 1):.2f}")
                else:
                    row.append("NaN")
            f.write(" ".join(row) + "\n")
    script = f"""
set terminal svg size 900,480
set output '{path}'
set title 'asi=on against asi=off (QEMU TCG), median overhead per workload'
set ylabel 'overhead (%)'
set style data histograms
set style fill solid 0.8 border -1
set key top left
set grid ytics
set xtics rotate by -30
set arrow from graph 0, first 1.2 to graph 1, first 1.2 nohead dt 2 lc rgb 'gray'
set label 'seed: disk read +1.2 %' at graph 0.65, first 1.2 offset 0,0.6 tc rgb 'gray'
set arrow from graph 0, first 2.6 to graph 1, first 2.6 nohead dt 2 lc rgb 'gray'
set label 'seed: network send +2.6 %' at graph 0.65, first 2.6 offset 0,0.6 tc rgb 'gray'
plot '{data}' using 2:xtic(1) title columnheader(2)""" + "".join(
        f", '' using {i + 2} title columnheader({i + 2})" for i in range(1, len(clocks)))
    subprocess.run(["gnuplot"], input=script, text=True, check=False)
    os.remove(data)
    return path if os.path.exists(path) else None


def failed_boots(runs):
    return [f"{r['boot']}: {r.get('verdict') or 'no bench lines'}" for r in runs if not r["ok"]]


def write_report(runs, meta, base):
    """BASE.md (the tables) and BASE.svg (the plot) from the runs' samples."""
    table = summarize(runs, meta["clocks"])
    meta["failed_boots"] = failed_boots(runs)
    md = markdown(table, meta)
    svg = plot(table, base + ".svg")
    with open(base + ".md", "w") as f:
        f.write(md + ("\n![overhead](" + os.path.basename(svg) + ")\n" if svg else ""))
    print(md)
    return svg


def render(path):
    """The .md and .svg of a results file, from its samples (same names)."""
    with open(path) as f:
        res = json.load(f)
    for r in res["runs"]:
        r.setdefault("kernel_ok", r.get("ok", False))
    write_report(res["runs"], res["meta"], path[:-len(".json")])
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="one repetition of each")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--clocks", default="realtime,icount")
    p.add_argument("--render", metavar="JSON",
                   help="only write the table and plot of an earlier run's results file")
    p.add_argument("--plan", help="run this plan instead of each clock's own "
                   "(e.g. bench-l2-12); the results file is named after it")
    args = p.parse_args()
    if args.render:
        return render(args.render)
    reps = 1 if args.quick else args.reps
    clocks = [c for c in args.clocks.split(",") if c]
    for c in clocks:
        if c not in CLOCKS:
            sys.exit(f"error: unknown clock {c} (known: {', '.join(CLOCKS)})")
    if reps < 1:
        sys.exit("error: --reps must be at least 1")

    now = datetime.datetime.now(datetime.timezone.utc)
    commit = run(["git", "-C", TOP, "rev-parse", "--short", "HEAD"]) or "unknown"
    dirty = run(["git", "-C", TOP, "status", "--porcelain", "--untracked-files=no"])
    meta = {
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit + ("-dirty" if dirty else ""),
        "kernel": open(os.path.join(OUT, "kernel-version")).read().split("\n")[1]
        if os.path.exists(os.path.join(OUT, "kernel-version")) else "?",
        "qemu": run(["qemu-system-x86_64", "--version"]).split("\n")[0],
        "platform": "QEMU TCG -cpu max (AMD-flavoured, SVM with NPT, no PCID), "
                    "-smp 2 -m 4G, " + ", ".join(
                        f"{c}: {CLOCKS[c][1]}" for c in clocks) +
                    ", on a 2-core host without hardware virtualization",
        "reps": reps, "clocks": clocks, "plan": args.plan or "per clock",
    }
    logdir = os.path.join(OUT, "logs", "bench-" + now.strftime("%Y%m%d-%H%M%S") +
                          (f"-{args.plan}" if args.plan else ""))
    runs = []
    for rep in range(reps):
        for clock in clocks:
            print(f"repetition {rep + 1}/{reps}, clock {clock}:", flush=True)
            for variant, config, append in VARIANTS:
                # A kernel failure is run once more; an L2 guest that
                # stalls is not (it is the emulator's, and frequent: a
                # retry would double the run for little), its workloads
                # just have fewer samples.
                for attempt in range(2):
                    r = one_boot(variant, config, append, clock, rep, logdir, attempt,
                                 args.plan)
                    r.update(variant=variant, config=config, clock=clock, rep=rep)
                    runs.append(r)
                    if r["kernel_ok"]:
                        break

    meta["failed_boots"] = failed_boots(runs)
    resdir = os.path.join(HERE, "results")
    os.makedirs(resdir, exist_ok=True)
    base = os.path.join(resdir, f"{now.strftime('%Y-%m-%d')}-{meta['commit']}")
    if args.plan:
        base += "-" + args.plan
    if args.quick:
        base += "-quick"
    with open(base + ".json", "w") as f:
        json.dump({"meta": meta, "seed_overhead_percent": SEED, "runs": runs}, f, indent=1)
    print()
    svg = write_report(runs, meta, base)
    print(f"results: {base}.json, .md" + (", .svg" if svg else ""))
    failed = [r["boot"] for r in runs if not r["ok"]]
    if failed:
        print("failed boots: " + ", ".join(failed))
    # A kernel that failed twice in one repetition fails the run; a stalled
    # L2 guest only costs samples, which the table counts.
    lost = {(r["clock"], r["rep"], r["variant"]) for r in runs} - \
        {(r["clock"], r["rep"], r["variant"]) for r in runs if r["kernel_ok"]}
    if lost:
        print("LOST (kernel failed twice): " +
              ", ".join(f"{c} rep {n + 1} {v}" for c, n, v in sorted(lost)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
