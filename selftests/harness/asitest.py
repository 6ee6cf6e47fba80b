#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Boot the ASI kernel in an emulated machine and collect test results.

  asitest.py boot  --kernel K --initrd I --append '...' [--timeout S] ...
      one boot; prints the verdict and, on failure, the console's last lines
  asitest.py check [--plan short|full] ...
      the test suite: the boots listed in BOOTS below, each run once, with
      KUnit (KTAP on the console) and the image's plan ("asitest:" lines)
      parsed into one result list, ending with "N passed, N failed, N skipped"

A boot fails on a kernel panic, an oops, a WARN, a BUG, a lockup or stall
report, a hang (no console output for --idle-timeout seconds), or when it
runs past --timeout. A panic ends the boot at once (the kernel runs with
panic=-1 oops=panic and QEMU with -no-reboot).
"""

import argparse
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time

TOP = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.environ.get("OUT", os.path.join(TOP, "out"))
LOGS = os.path.join(OUT, "logs")

BASE_APPEND = ("console=ttyS0 panic=-1 oops=panic softlockup_panic=1 "
               "nmi_watchdog=0 tsc=reliable")

# A line that ends the boot at once.
FATAL = re.compile(r"Kernel panic - not syncing")
# Lines that make a boot fail (the boot goes on so that results are kept).
KERNEL_ERRORS = re.compile(
    r"(\bBUG: |\bOops\b|^\s*WARNING: |\bgeneral protection fault\b|"
    r"\bkernel BUG at\b|\bUBSAN: |\bKASAN: |unreferenced object 0x|"
    r"INFO: task .* blocked for more than|detected stalls on CPUs|"
    r"\bsoft lockup\b|\bhard LOCKUP\b|\bdouble fault\b)")
PRINTK_TIME = re.compile(r"^\[\s*\d+\.\d+\]\s?")

RESULT = re.compile(r"asitest: (ok|not ok) (\d+) (\S+)\s*(.*)$")
START = re.compile(r"asitest: START (\S+)")
KTAP_SUITE = re.compile(r"^(\s*)# Subtest: (\S+)")
KTAP_RESULT = re.compile(r"^(\s*)(ok|not ok) (\d+) (\S+)(.*)$")


def host_tsc_khz():
    """The host's (and so TCG's) TSC frequency, from a small helper."""
    src = os.path.join(TOP, "selftests", "harness", "tsc_khz.c")
    exe = os.path.join(OUT, "build", "tsc_khz")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        os.makedirs(os.path.dirname(exe), exist_ok=True)
        subprocess.run(["gcc", "-O2", "-o", exe, src], check=True)
    khz = int(subprocess.run([exe], check=True, capture_output=True,
                             text=True).stdout)
    if not 100000 < khz < 10000000:
        raise SystemExit(f"error: implausible host TSC frequency {khz} kHz")
    return khz


_TSC_KHZ = None


def tsc_append():
    global _TSC_KHZ
    if _TSC_KHZ is None:
        _TSC_KHZ = host_tsc_khz()
    return f" tsc_early_khz={_TSC_KHZ}"


_VERSIONS = {}


def emulator_version(binary="qemu-system-x86_64"):
    """The first line of the emulator's version, for every log and results file."""
    if binary not in _VERSIONS:
        try:
            p = subprocess.run([binary, "--version"] if "qemu" in binary else [binary, "--help"],
                               capture_output=True, text=True, timeout=30)
            lines = (p.stdout + p.stderr).splitlines()
            _VERSIONS[binary] = next((l.strip() for l in lines if "ersion" in l or "Bochs" in l),
                                     binary + ": version unknown")
        except (OSError, subprocess.SubprocessError) as e:
            _VERSIONS[binary] = f"{binary}: {e}"
    return _VERSIONS[binary]


# Lines in a test's log that say what failed: kselftest and TAP "not ok",
# "FAIL:" and the KVM selftests' assertion banner, also as the diagnostics
# ("# ", once or more) of a test that shows another's output.
FAIL_LINE = re.compile(r"^(?:# ?)*(not ok |FAIL:|==== Test Assertion Failure)")


def failure_lines(lines):
    """Each line FAIL_LINE matches, numbered; after an assertion banner
    also the lines that follow it (file and line, errno, the message)."""
    said = []
    for i, line in enumerate(lines):
        if FAIL_LINE.search(line):
            after = 6 if "==== Test Assertion Failure" in line else 0
            said += [f"{k + 1}: {lines[k]}"
                     for k in range(i, min(i + 1 + after, len(lines)))]
    return said


def tail(lines, n=40):
    return "\n".join("    | " + l for l in lines[-n:])


class Boot:
    """One run of QEMU on a kernel and an initramfs."""

    def __init__(self, name, kernel, initrd, append, logdir, timeout=900,
                 idle_timeout=300, smp=2, mem="4G", qemu_extra=(), cpu="max",
                 accel="tcg,thread=single"):
        self.name = name
        self.accel = accel
        self.kernel = kernel
        self.initrd = initrd
        self.append = self.base_append() + " " + append
        self.logdir = logdir
        self.log = os.path.join(logdir, name + ".console.log")
        self.timeout = timeout
        self.idle_timeout = idle_timeout
        self.smp = smp
        self.mem = mem
        self.cpu = cpu
        self.qemu_extra = list(qemu_extra)
        self.lines = []
        self.errors = []
        self.status = None      # done | panic | timeout | hang | noexit | exited
        self.exit_how = ""      # for "exited": the emulator's exit status or signal
        self.seconds = 0.0

    machine = "QEMU"

    def base_append(self):
        return BASE_APPEND + tsc_append()

    def cmd(self):
        return ["qemu-system-x86_64", "-M", "q35", "-accel", self.accel,
                "-cpu", self.cpu, "-smp", str(self.smp), "-m", self.mem,
                "-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio",
                "-kernel", self.kernel, "-initrd", self.initrd,
                "-append", self.append] + self.qemu_extra

    def run(self):
        for f in (self.kernel, self.initrd):
            if not os.path.exists(f):
                raise SystemExit(f"error: {f} does not exist (run make kernel image)")
        os.makedirs(self.logdir, exist_ok=True)
        self.prepare()
        t0 = time.monotonic()
        last_output = t0
        deadline = None          # set once the run is over: wait for QEMU to exit
        proc, console = self.start()
        buf = b""
        with open(self.log, "w", errors="replace") as log:
            log.write("# " + " ".join(self.cmd()) + "\n")
            log.write("# " + emulator_version("bochs" if "bochs" in self.cmd()
                                              else "qemu-system-x86_64") + "\n")
            while True:
                now = time.monotonic()
                if deadline and now > deadline:
                    if self.status == "done":
                        self.status = "noexit"
                    break
                if not deadline:
                    if now - t0 > self.timeout:
                        self.status = "timeout"
                        break
                    if now - last_output > self.idle_timeout:
                        self.status = "hang"
                        break
                r, _, _ = select.select([console], [], [], 1.0)
                if not r:
                    if proc.poll() is not None:
                        break
                    continue
                data = os.read(console, 65536)
                if not data:
                    break
                last_output = time.monotonic()
                buf += data
                *complete, buf = buf.split(b"\n")
                for raw in complete:
                    line = raw.decode("utf-8", "replace").rstrip("\r")
                    log.write(line + "\n")
                    self.lines.append(line)
                    self.check_line(line)
                    if self.status in ("done", "panic") and not deadline:
                        # Keep the end of a panic's backtrace; let QEMU exit.
                        deadline = time.monotonic() + (3 if self.status == "panic"
                                                       else self.exit_grace)
                log.flush()
            if buf:
                line = buf.decode("utf-8", "replace")
                log.write(line + "\n")
                self.lines.append(line)
                self.check_line(line)
        # The console can close a moment before the emulator exits.
        try:
            proc.wait(timeout=5)
            killed = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            killed = True
        self.finish()
        self.seconds = time.monotonic() - t0
        if self.status is None:
            self.status = "exited"
            # Why: 0 with -no-reboot is a reset (a triple fault, or a
            # reboot the kernel asked for); a signal the harness did not
            # send is the emulator's own crash.
            rc = proc.returncode
            self.exit_how = ("killed by the harness" if killed else
                             f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}")
            with open(self.log, "a") as log:
                log.write(f"# {self.machine} {self.exit_how}\n")
        return self

    # Seconds the machine has to exit by itself after "asitest: DONE".
    exit_grace = 20

    def prepare(self):
        """Write what the machine needs before it starts (QEMU: nothing)."""

    def start(self):
        """Start the machine: (process, file descriptor of its console)."""
        proc = subprocess.Popen(self.cmd(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        return proc, proc.stdout.fileno()

    def finish(self):
        """Clean up after the machine stopped (QEMU: nothing)."""

    def check_line(self, line):
        text = PRINTK_TIME.sub("", line)
        if FATAL.search(text):
            self.status = "panic"
            self.errors.append(text)
        elif KERNEL_ERRORS.search(text):
            self.errors.append(text)
        elif text.startswith("asitest: DONE") and self.status is None:
            self.status = "done"

    def verdict(self):
        """None if the boot itself went well, else why it did not."""
        what = {
            "done": None,
            "panic": "kernel panic",
            "timeout": f"time limit of {self.timeout} s reached",
            "hang": f"no console output for {self.idle_timeout} s (hang)",
            "noexit": f"{self.machine} did not exit after the tests finished",
            "exited": f"{self.machine} exited before the tests finished "
                      f"({self.exit_how})",
        }[self.status]
        if what is None and self.errors:
            what = "kernel reported errors"
        return what

    def report(self):
        v = self.verdict()
        if v is None:
            return f"boot {self.name}: ok in {self.seconds:.0f} s"
        msg = [f"boot {self.name}: FAILED: {v} after {self.seconds:.0f} s (console: {self.log})"]
        for e in self.errors[:10]:
            msg.append("    ! " + e)
        msg.append("    last console lines:")
        msg.append(tail(self.lines))
        return "\n".join(msg)


# Bochs (Debian's bochs 2.7): an Intel Haswell (corei7_haswell_4770) with
# VMX (EPT, VPID, unrestricted guest), PCID, INVPCID and SPEC_CTRL: the
# paths QEMU's TCG CPU (AMD-flavoured: SVM, no PCID) never runs. What each
# machine exercises: docs/test-machines.md.
BOCHS_MODEL = "corei7_haswell_4770"
# No tsc_early_khz=: with "clock: sync=none" Bochs's TSC and PIT both count
# emulated instructions, so the kernel's calibration is right. The init
# powers the machine off at the end (Bochs has no -no-reboot).
BOCHS_APPEND = ("console=ttyS0 panic=-1 oops=panic softlockup_panic=1 "
                "nmi_watchdog=0 tsc=reliable asitest.poweroff")
KNOWN_BOCHS = os.path.join(TOP, "selftests", "harness", "known-failures-bochs")
WARN_AT = re.compile(r"^\s*WARNING: CPU: \d+ PID: \d+ at (\S+):\d+ ([\w.]+)\+")

BOCHSRC = """\
# Written by asitest.py for boot {name} (Debian's bochs 2.7).
config_interface: textconfig
# Debian's build has no "nogui" display: its VNC server, waiting for no
# one (timeout=0), in a network namespace of its own (unshare --net), so
# that it is reachable from nowhere.
display_library: rfb, options="timeout=0"
megs: {megs}
romimage: file=/usr/share/bochs/BIOS-bochs-latest, options=fastboot
vgaromimage: file=/usr/share/vgabios/vgabios.bin
cpu: model={model}, count={cpus}, ips={ips}, reset_on_triple_fault=1, ignore_bad_msrs=1
# Emulated time follows emulated instructions: a loaded host slows the
# guest down, never makes its timers fire early.
clock: sync=none, time0=utc
ata0-master: type=cdrom, path={iso}, status=inserted
boot: cdrom
# The serial console, into a FIFO the harness reads line by line.
com1: enabled=1, mode=file, dev={fifo}
# Without an ALSA card the default sound driver aborts Bochs.
sound: driver=dummy
speaker: enabled=0
mouse: enabled=0
log: {bochslog}
panic: action=fatal
error: action=report
info: action=report
debug: action=ignore
"""

ISOLINUX_CFG = """\
SERIAL 0 115200
PROMPT 0
TIMEOUT 0
DEFAULT linux
LABEL linux
  KERNEL /boot/kernel
  INITRD /boot/initrd
  APPEND {append}
"""


def known_bochs():
    """known-failures-bochs: ({test name: reason}, [(file, function, reason)])."""
    tests, warnings = {}, []
    with open(KNOWN_BOCHS) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            kind, _, rest = line.partition(" ")
            if kind == "test":
                name, _, why = rest.strip().partition(" ")
                tests[name] = why.strip()
            elif kind == "warning":
                where, func, why = (rest.strip().split(None, 2) + ["", ""])[:3]
                warnings.append((where, func, why))
            else:
                raise SystemExit(f"error: {KNOWN_BOCHS}: bad line: {line}")
    return tests, warnings


class BochsBoot(Boot):
    """One run of Bochs: the kernel and initramfs on an ISO (isolinux)."""

    machine = "Bochs"
    # The init powers off; Bochs exits at once (ACPI soft-off).
    exit_grace = 20

    def __init__(self, name, kernel, initrd, append, logdir, timeout=900,
                 idle_timeout=300, smp=1, mem="2G", cpu=BOCHS_MODEL,
                 ips=50000000, require_vmx=False):
        super().__init__(name, kernel, initrd, append, logdir, timeout=timeout,
                         idle_timeout=idle_timeout, smp=smp, mem=mem, cpu=cpu)
        self.ips = ips
        # The boot fails unless vmx_machine.sh found kvm_intel with EPT,
        # VPID and unrestricted guest, and with asi=on ASI's PCIDs.
        self.require_vmx = require_vmx
        base = os.path.join(logdir, name)
        self.rcfile = base + ".bochsrc"
        self.dbgfile = base + ".bochs-commands"
        self.bochslog = base + ".bochs.log"
        self.bochsout = base + ".bochs.out"
        self.fifo = base + ".com1"
        self.isodir = os.path.join(OUT, "image", "bochs", name)
        self.iso = self.isodir + ".iso"
        self.known_warnings = []        # console lines of known WARNs
        self.warn_patterns = known_bochs()[1]
        self._fifo_fd = None
        self._out = None

    def base_append(self):
        return BOCHS_APPEND

    def cmd(self):
        return ["unshare", "--net", "bochs", "-q", "-f", self.rcfile,
                "-rc", self.dbgfile]

    def megs(self):
        m = re.fullmatch(r"(\d+)([MG]?)", self.mem)
        if not m:
            raise SystemExit(f"error: bad memory size {self.mem}")
        return int(m.group(1)) * (1024 if m.group(2) == "G" else 1)

    def prepare(self):
        for f in ("/usr/share/bochs/BIOS-bochs-latest", "/usr/lib/ISOLINUX/isolinux.bin"):
            if not os.path.exists(f):
                raise SystemExit(f"error: {f} does not exist (run scripts/image-vmx.sh: "
                                 "it installs bochs, isolinux and xorriso)")
        # The ISO: isolinux with this boot's command line, the kernel, the
        # initramfs. Its isolinux.cfg is kept in the log directory.
        subprocess.run(["rm", "-rf", self.isodir], check=True)
        os.makedirs(os.path.join(self.isodir, "isolinux"))
        os.makedirs(os.path.join(self.isodir, "boot"))
        for src, dst in (("/usr/lib/ISOLINUX/isolinux.bin", "isolinux/isolinux.bin"),
                         ("/usr/lib/syslinux/modules/bios/ldlinux.c32",
                          "isolinux/ldlinux.c32"),
                         (self.kernel, "boot/kernel"), (self.initrd, "boot/initrd")):
            subprocess.run(["cp", src, os.path.join(self.isodir, dst)], check=True)
        cfg = ISOLINUX_CFG.format(append=self.append)
        with open(os.path.join(self.logdir, self.name + ".isolinux.cfg"), "w") as f:
            f.write(cfg)
        with open(os.path.join(self.isodir, "isolinux", "isolinux.cfg"), "w") as f:
            f.write(cfg)
        r = subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-R", "-o", self.iso,
                            "-b", "isolinux/isolinux.bin", "-c", "isolinux/boot.cat",
                            "-no-emul-boot", "-boot-load-size", "4", "-boot-info-table",
                            self.isodir], capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"error: xorriso failed:\n{r.stdout}{r.stderr}")
        subprocess.run(["rm", "-rf", self.isodir], check=True)
        with open(self.rcfile, "w") as f:
            f.write(BOCHSRC.format(name=self.name, megs=self.megs(), model=self.cpu,
                                   cpus=self.smp, ips=self.ips, iso=self.iso,
                                   fifo=self.fifo, bochslog=self.bochslog))
        # Debian's bochs is built with its debugger, which stops before the
        # first instruction: tell it to go on.
        with open(self.dbgfile, "w") as f:
            f.write("continue\n")
        if os.path.exists(self.fifo):
            os.remove(self.fifo)
        os.mkfifo(self.fifo)

    def start(self):
        # Read and write: the FIFO never reads as closed, before Bochs opens
        # it or after it exits; the run loop polls the process for that.
        self._fifo_fd = os.open(self.fifo, os.O_RDWR | os.O_NONBLOCK)
        self._out = open(self.bochsout, "w")
        proc = subprocess.Popen(self.cmd(), stdin=subprocess.DEVNULL, stdout=self._out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=self.logdir)
        return proc, self._fifo_fd

    def finish(self):
        os.close(self._fifo_fd)
        self._out.close()
        os.remove(self.fifo)
        self.shrink_bochs_log()

    def shrink_bochs_log(self, keep=300):
        """Bochs logs every unknown MSR read (APERF/MPERF, each timer tick)
        and every EPT violation: up to 150 MB a boot. Keep its first and
        last lines and a count of each message (long numbers elided)."""
        if not os.path.exists(self.bochslog):
            return
        head, last, counts, n = [], [], {}, 0
        with open(self.bochslog, errors="replace") as f:
            for line in f:
                n += 1
                if n <= keep:
                    head.append(line)
                    continue
                last.append(line)
                if len(last) > 2 * keep:
                    del last[:keep]
                key = re.sub(r"0x[0-9a-fA-F]{5,}", "0x...", re.sub(r"^\d+", "", line.rstrip()))
                counts[key] = counts.get(key, 0) + 1
        if n <= 3 * keep:
            return
        last = last[-keep:]
        with open(self.bochslog + ".tmp", "w") as f:
            f.writelines(head)
            f.write(f"# asitest.py: {n - len(head) - len(last)} lines left out; "
                    f"every line after the first {keep}, by message:\n")
            for key, c in sorted(counts.items(), key=lambda kv: -kv[1])[:200]:
                f.write(f"# {c:9d} {key}\n")
            f.write(f"# asitest.py: the last {keep} lines:\n")
            f.writelines(last)
        os.replace(self.bochslog + ".tmp", self.bochslog)

    def check_line(self, line):
        text = PRINTK_TIME.sub("", line)
        m = WARN_AT.match(text)
        if m and any(m.group(2) == func and
                     (m.group(1) == where or m.group(1).endswith("/" + where))
                     for where, func, _ in self.warn_patterns):
            self.known_warnings.append(text)
            return
        super().check_line(line)

    def asi_on(self):
        """Whether the command line turns ASI on (the last asi= counts)."""
        vals = [a[4:] for a in self.append.split() if a.startswith("asi=")]
        return bool(vals) and vals[-1] == "on"

    def verdict(self):
        what = super().verdict()
        if what is not None or not self.require_vmx:
            return what
        text = [PRINTK_TIME.sub("", l) for l in self.lines]
        bad = [t for t in text if re.match(r"kvm_intel: .*(not supported|disabled|[Ff]ail)", t)]
        if bad:
            return f"kvm_intel did not load: {bad[0]}"
        kvm = [t for t in text if t.startswith("vmx-machine: kvm_intel")]
        if not kvm:
            return "kvm_intel did not load (no 'vmx-machine: kvm_intel' line)"
        for k in ("ept", "unrestricted_guest", "vpid"):
            if f" {k}=Y" not in kvm[0]:
                return f"kvm_intel runs without {k}: {kvm[0]}"
        if self.asi_on() and not any(t.startswith("vmx-machine: asi pcid: on")
                                     for t in text):
            return "asi=on, but ASI's restricted tables run without PCIDs"
        return None


class Results:
    def __init__(self):
        self.items = []     # (status, name, detail, log)

    def add(self, status, name, detail="", log=""):
        self.items.append((status, name, detail, log))

    def count(self, status):
        return sum(1 for i in self.items if i[0] == status)


def parse_plan(boot, results, expected):
    """Record the "asitest:" results of a boot; expected: names the plan runs."""
    current, out = None, []
    seen = set()
    testdir = os.path.join(boot.logdir, boot.name)
    os.makedirs(testdir, exist_ok=True)
    for line in boot.lines:
        text = PRINTK_TIME.sub("", line)
        m = START.search(text)
        if m:
            current, out = m.group(1), []
            continue
        m = RESULT.search(text)
        if m:
            status, _, name, rest = m.groups()
            log = os.path.join(testdir, name.replace("/", "_") + ".log")
            with open(log, "w") as f:
                f.write("\n".join(out) + "\n")
            seen.add(name)
            full = f"{boot.name}/{name}"
            if status == "ok" and "# SKIP" in rest:
                results.add("skip", full, rest, log)
            elif status == "ok":
                results.add("pass", full, rest, log)
            else:
                results.add("fail", full, rest, log)
            current = None
            continue
        if current:
            out.append(line)
    for name in expected:
        if name not in seen:
            why = "did not run" if current != name else "did not finish"
            if current == name:
                log = os.path.join(testdir, name.replace("/", "_") + ".log")
                with open(log, "w") as f:
                    f.write("\n".join(out) + "\n")
            else:
                log = boot.log
            results.add("fail", f"{boot.name}/{name}", f"{why} ({boot.status})", log)


def parse_kunit(boot, results, expected_suites):
    """Record KUnit results (KTAP on the console): one result per test case."""
    suite, suite_indent, done = None, 0, set()
    started, cases = [], {}
    for line in boot.lines:
        text = PRINTK_TIME.sub("", line)
        m = KTAP_SUITE.match(text)
        if m:
            suite, suite_indent = m.group(2), len(m.group(1))
            started.append(suite)
            continue
        m = KTAP_RESULT.match(text)
        if not m or suite is None:
            continue
        indent, status, _, name, rest = m.groups()
        full = f"{boot.name}/kunit/{suite}"
        # A suite's cases carry the indentation of its "# Subtest:" line,
        # its own result line one level less; deeper lines are parameters.
        if len(indent) == suite_indent:
            cases[suite] = cases.get(suite, 0) + 1
            if "# SKIP" in rest:
                results.add("skip", f"{full}/{name}", rest, boot.log)
            else:
                results.add("pass" if status == "ok" else "fail", f"{full}/{name}",
                            rest, boot.log)
        elif len(indent) < suite_indent and name == suite:
            done.add(suite)
            suite = None
    for s in started:
        if s not in done:
            results.add("fail", f"{boot.name}/kunit/{s}", "suite did not finish", boot.log)
        elif not cases.get(s):
            results.add("fail", f"{boot.name}/kunit/{s}", "no test case results", boot.log)
    for s in expected_suites:
        if s not in started:
            results.add("fail", f"{boot.name}/kunit/{s}", "suite did not run", boot.log)


def plan_names(initrd_root, plan):
    path = os.path.join(initrd_root, "tests", "plans", plan)
    names = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                names.append(line.split()[0])
    return names


def known_failures():
    path = os.path.join(TOP, "selftests", "harness", "known-failures")
    known = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                name, _, why = line.partition(" ")
                known["kvm/" + name] = why.strip()
    return known


def run_suite_boot(args, results, name, append, plan, kunit=True, image_name=None,
                   boot_class=None, **kw):
    image_name = image_name or args.config
    image = os.path.join(OUT, "image", f"initramfs-{image_name}.cpio")
    if not os.path.exists(image) and os.path.exists(image + ".gz"):
        image += ".gz"          # the vmx image (scripts/image-vmx.sh)
    kernel = os.path.join(OUT, "build", args.config, "arch", "x86", "boot", "bzImage")
    root = os.path.join(OUT, "image", f"root-{image_name}")
    expected = plan_names(root, plan)
    print(f"boot {name}: {append} ({len(expected)} tests) ...", flush=True)
    b = (boot_class or Boot)(name, kernel, image, f"{append} asitest.plan={plan}",
                             args.logdir, **kw).run()
    print(b.report(), flush=True)
    v = b.verdict()
    results.add("fail" if v else "pass", f"{name}/boot", v or "", b.log)
    if kunit:
        parse_kunit(b, results, ["asi_param", "asi_domain", "asi_switch"])
    parse_plan(b, results, expected)
    return b


def run_bochs_boots(args, results, limit, idle):
    """make check-vmx: the plan on Bochs's Haswell (VMX, EPT, VPID, PCID),
    asi=off (what fails there is Bochs's or upstream's) and asi=on."""
    known, warnings = known_bochs()
    first = len(results.items)
    kw = dict(boot_class=BochsBoot, image_name="vmx", timeout=limit,
              idle_timeout=idle, require_vmx=True)
    boots = [("bochs-asi-off", "asi=off", args.plan), ("bochs-asi-on", "asi=on", args.plan)]
    if args.plan == "vmx":
        # PAUSE-loop exits: with the default window only a few of
        # asi_exits_test's PAUSEs exit; with a window of one cycle that
        # does not grow, about one in twenty does.
        boots.append(("bochs-asi-on-ple",
                      "asi=on kvm_intel.ple_window=1 kvm_intel.ple_window_grow=1",
                      "vmx-exits"))
    for name, append, plan in boots:
        b = run_suite_boot(args, results, name, append, plan, **kw)
        for text in b.known_warnings:
            m = WARN_AT.match(text)
            where, func = m.groups()
            why = next(w for f, fn, w in warnings
                       if fn == func and (where == f or where.endswith("/" + f)))
            results.add("xfail", f"{name}/known-warning/{os.path.basename(where)}:{func}",
                        f"{text}: {why}", b.log)
        if name.startswith("bochs-asi-on"):
            # The PCID path must have run, not skipped (the CPU has PCIDs).
            must = f"{name}/kunit/asi_switch/asi_pcid_switch_keeps_translations"
            found = [i for i, it in enumerate(results.items) if it[1] == must]
            if not found:
                results.add("fail", must, "did not run", b.log)
            for i in found:
                st, n, detail, log = results.items[i]
                if st == "skip":
                    results.items[i] = ("fail", n, "skipped on a CPU with PCIDs: "
                                        + detail, log)
    # Known failures of the Bochs machine: expected, with their reason. One
    # that passes, or that matches nothing, is a failure: the list is stale.
    used = set()
    for i in range(first, len(results.items)):
        st, n, detail, log = results.items[i]
        rel = n.split("/", 1)[1]
        if rel not in known:
            continue
        used.add(rel)
        if st == "fail":
            results.items[i] = ("xfail", n, f"{known[rel]} (here: {detail})", log)
        elif st == "pass":
            results.items[i] = ("fail", n, "passed, but known-failures-bochs says it "
                                f"fails on Bochs ({known[rel]}): remove the line", log)
    for rel in sorted(set(known) - used):
        results.add("fail", f"known-failures-bochs/{rel}",
                    "listed, but no boot reported it: remove the line", KNOWN_BOCHS)


def expect_boot_failure(args, results, name, plan, want, **kw):
    """Harness self-test: the boot must fail with status 'want', in time."""
    image = os.path.join(OUT, "image", f"initramfs-{args.config}.cpio")
    kernel = os.path.join(OUT, "build", args.config, "arch", "x86", "boot", "bzImage")
    print(f"boot {name}: harness self-test, expecting '{want}' ...", flush=True)
    b = Boot(name, kernel, image, f"asitest.plan={plan}", args.logdir, **kw).run()
    rep = b.report()
    ok = b.status == want and "last console lines" in rep
    print(f"boot {name}: detected '{b.status}' in {b.seconds:.0f} s: "
          f"{'as expected' if ok else 'NOT as expected'}", flush=True)
    results.add("pass" if ok else "fail", f"{name}/detects-{want}",
                f"status {b.status}", b.log)


def run_entry_window(args, results, modules=()):
    """The static check of the VM-entry window (scripts/entry-window.py)
    on the built kernel, or on the KVM modules: its self-test first (a
    planted read must be found), then the check itself."""
    tool = os.path.join(TOP, "scripts", "entry-window.py")
    build = os.path.join(OUT, "build", args.config)
    runs = [("asi/entry_window_selftest", [tool, "--self-test"])]
    cmd = [tool, "--build", build]
    for m in modules:
        cmd += ["--module", os.path.join(build, m)]
    runs.append(("asi/entry_window" + ("_modules" if modules else ""), cmd))
    for name, cmd in runs:
        log = os.path.join(args.logdir, name.replace("/", "_") + ".log")
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        with open(log, "w") as f:
            f.write("# " + " ".join(cmd) + "\n" + p.stdout)
        lines = p.stdout.splitlines()
        summary = lines[-1] if lines else "(no output)"
        print(summary, flush=True)
        results.add("pass" if p.returncode == 0 else "fail", name,
                    "" if p.returncode == 0 else f"exit {p.returncode}: {summary}", log)


def cmd_check(args):
    kind = "check-vmx" if args.machine == "bochs" else "check"
    args.logdir = os.path.join(LOGS, kind + "-" + time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(args.logdir, exist_ok=True)
    latest = os.path.join(LOGS, kind + "-latest")
    if os.path.islink(latest) or os.path.exists(latest):
        os.remove(latest)
    os.symlink(os.path.basename(args.logdir), latest)
    results = Results()
    t0 = time.monotonic()
    plan = args.plan
    # Per-test limits (plan files) stay below the idle limit, so that a
    # slow test is reported as a time-out and not as a hung machine.
    limit = 900 if plan != "full" else 5400
    idle = 200 if plan != "full" else 330

    if plan == "debug":
        run_suite_boot(args, results, "debug-asi-on", "asi=on", "debug",
                       timeout=3000, idle_timeout=330)
        return summarize(args, results, t0)
    if plan == "stress":
        run_suite_boot(args, results, "asi-on-stress", "asi=on", "stress",
                       timeout=5400, idle_timeout=330)
        return summarize(args, results, t0)
    if plan == "modules":
        run_entry_window(args, results, modules=(
            "arch/x86/kvm/kvm.ko", "arch/x86/kvm/kvm-intel.ko", "arch/x86/kvm/kvm-amd.ko"))
        run_suite_boot(args, results, "modules-asi-on", "asi=on", "modules",
                       timeout=limit, idle_timeout=idle)
        return summarize(args, results, t0)
    if (args.machine == "bochs") != plan.startswith("vmx"):
        raise SystemExit("error: the vmx plans run on --machine bochs, the others on qemu")
    if args.machine == "bochs":
        # No test of the vmx plans is silent for two minutes (guest time
        # runs ahead of wall time there).
        run_bochs_boots(args, results, 900 if plan == "vmx" else 5400, 150)
        return summarize(args, results, t0)
    run_entry_window(args, results)
    run_suite_boot(args, results, "asi-off", "asi=off", plan, timeout=limit,
                   idle_timeout=idle)
    run_suite_boot(args, results, "asi-on", "asi=on", plan, timeout=limit,
                   idle_timeout=idle)
    # PTI on, as on the Intel CPUs that need it: the switch tests must
    # hold with PTI's CR3 handling in the entry code.
    run_suite_boot(args, results, "asi-on-pti", "asi=on pti=on", "param",
                   timeout=300)
    # Bad input: the last asi= counts, an invalid value keeps the default.
    run_suite_boot(args, results, "asi-bad", "asi=on asi=bogus", "param",
                   timeout=300, kunit=False)
    run_suite_boot(args, results, "asi-empty", "asi=", "param",
                   timeout=300, kunit=False)
    # asi=on where KVM cannot load (a CPU without SVM): the core works,
    # KVM stays away cleanly.
    run_suite_boot(args, results, "asi-on-nosvm", "asi=on", "nosvm",
                   timeout=300, cpu="max,-svm")
    # Two hyperthreads of one core, ASI's sibling protocol on: KUnit, the
    # exits, and the SMT exposure measured from a trace with the protocol
    # on and off (asi_smt_exposure.sh).
    run_suite_boot(args, results, "asi-on-smt", "asi=on", "smt", timeout=900,
                   smp="2,sockets=1,cores=1,threads=2")
    # The image with bpftrace (scripts/image-bpf.sh): its scripts, live.
    run_suite_boot(args, results, "asi-on-bpf", "asi=on", "bpf", timeout=900,
                   kunit=False, image_name="bpf", idle_timeout=idle)
    if not args.no_selftest:
        expect_boot_failure(args, results, "harness-panic", "panic", "panic",
                            timeout=300, idle_timeout=120)
        expect_boot_failure(args, results, "harness-hang", "hang", "hang",
                            timeout=300, idle_timeout=30)
    if plan == "full":
        for name, why in sorted(known_failures().items()):
            results.add("skip", f"known-failure/{name}", why, "")

    return summarize(args, results, t0)


def summarize(args, results, t0):
    print()
    for status, name, detail, log in results.items:
        if status == "fail":
            print(f"FAIL {name}: {detail} (log: {log})")
            if log and log.endswith(".log") and os.path.exists(log) and \
                    not log.endswith(".console.log"):
                with open(log, errors="replace") as f:
                    lines = f.read().splitlines()
                # What the test said failed, wherever it is in the log,
                # then how the log ends.
                said = failure_lines(lines)
                if said:
                    print("  the log's failure lines:")
                    print(tail(said, 10))
                print(tail(lines, 15))
    for status, name, detail, log in results.items:
        if status == "skip":
            print(f"SKIP {name}: {detail}")
    for status, name, detail, log in results.items:
        if status == "xfail":
            print(f"XFAIL {name}: {detail}")
    print(f"\nlogs: {args.logdir}; {time.monotonic() - t0:.0f} s in all; "
          f"emulator: {emulator_version()}")
    xfail = results.count("xfail")
    print(f"{results.count('pass')} passed, {results.count('fail')} failed, "
          f"{results.count('skip')} skipped" +
          (f", {xfail} expected failures (known-failures-bochs)" if xfail else ""))
    return 1 if results.count("fail") or not results.count("pass") else 0


def cmd_demo(args):
    """Boot asi=on, run the demo plan and show what it printed."""
    args.logdir = os.path.join(LOGS, "demo")
    # The image with bpftrace: the demo ends with its fault sites.
    image = os.path.join(OUT, "image", "initramfs-bpf.cpio")
    kernel = os.path.join(OUT, "build", args.config, "arch", "x86", "boot", "bzImage")
    print(f"booting {kernel} with {args.append} under QEMU TCG (-cpu max) ...", flush=True)
    b = Boot("demo", kernel, image, f"{args.append} asitest.plan=demo", args.logdir,
             timeout=900).run()
    show = False
    for line in b.lines:
        text = PRINTK_TIME.sub("", line)
        if text.startswith("asitest: START demo"):
            show = True
        elif RESULT.search(text):
            show = False
            print(text)
        elif show:
            print("  " + line)
    print(b.report())
    results = Results()
    parse_plan(b, results, ["demo"])
    ok = b.verdict() is None and results.count("pass") == 1
    return 0 if demo_compare(args, kernel) and ok else 1


BENCH_LINE = re.compile(r"^bench: l2-1-(\S+) (ns=.*)$")


def demo_compare(args, kernel):
    """The comparison the feature is used for: asi=off against asi=on on a
    few seconds of a QEMU guest's virtio disk and network work (plan
    demo-l2), host CPU time per operation (l2mon's clocks and perf stat's
    task-clock) next to the exits, fallbacks and flushes."""
    image = os.path.join(OUT, "image", "initramfs-bench.cpio")
    if not os.path.exists(image):
        print(f"no {image}: run make image-bench for the asi=off / asi=on comparison")
        return False
    runs = {}
    for mode in ("off", "on"):
        print(f"\nbooting asi={mode}: virtio disk read, write and network send in an L2 "
              "QEMU guest, perf stat over each phase ...", flush=True)
        b = Boot(f"demo-l2-asi-{mode}", kernel, image, f"asi={mode} asitest.plan=demo-l2",
                 args.logdir, timeout=600, accel="tcg,thread=multi").run()
        runs[mode] = {}
        for line in b.lines:
            m = BENCH_LINE.search(PRINTK_TIME.sub("", line))
            if m and m.group(1) != "warmup":
                runs[mode][m.group(1)] = dict(re.findall(r"(\w+)=(\d+(?:\.\d+)?)",
                                                         m.group(2)))
        if b.verdict() or not runs[mode]:
            print(b.report())
    phases = [p for p in runs["on"] if p in runs["off"]]
    if not phases:
        print("no phase finished in both boots: no comparison")
        return False
    print(f"\nasi=off against asi=on, one L2 guest, {emulator_version()} multi-threaded TCG "
          "(emulated: see docs/performance.md for what the figures can show)")
    print(f"{'phase':<11} {'off us/op':>10} {'on us/op':>10} {'on/off':>7} "
          f"{'perf on/off':>11} {'exits':>6} {'fallbacks':>9} {'flushes':>8} {'planned':>8}")
    for p in phases:
        off, on = runs["off"][p], runs["on"][p]
        ratio = float(on["ns"]) / float(off["ns"])
        perf = "-"
        if "perf_ms" in on and "perf_ms" in off:
            per_op = {k: float(r["perf_ms"]) / float(r["ops"]) for k, r in (("on", on),
                                                                           ("off", off))}
            perf = f"{per_op['on'] / per_op['off']:.3f}"
        planned = sum(int(on.get(k, 0)) for k in ("x_timer", "x_ioeventfd", "x_faultin"))
        print(f"{p:<11} {float(off['ns']) / 1000:>10.1f} {float(on['ns']) / 1000:>10.1f} "
              f"{ratio:>7.3f} {perf:>11} {on['exits']:>6} {on['fallbacks']:>9} "
              f"{on['flushes']:>8} {planned:>8}")
    print("(exits, fallbacks, flushes and planned exits of the asi=on boot; one boot each: "
          "make bench repeats it)")
    return True


def cmd_boot(args):
    args.logdir = args.logdir or os.path.join(LOGS, "boot")
    if args.machine == "bochs" and args.qemu_args:
        raise SystemExit("error: --qemu-args is for --machine qemu only")
    if args.machine == "bochs":
        b = BochsBoot(args.name, args.kernel, args.initrd, args.append, args.logdir,
                      timeout=args.timeout, idle_timeout=args.idle_timeout,
                      smp=args.smp or 1, mem=args.mem or "2G",
                      require_vmx="asitest.plan=vmx" in args.append).run()
        for text in b.known_warnings:
            print(f"known warning (known-failures-bochs): {text}")
    else:
        b = Boot(args.name, args.kernel, args.initrd, args.append, args.logdir,
                 timeout=args.timeout, idle_timeout=args.idle_timeout,
                 smp=args.smp or 2, mem=args.mem or "4G", accel=args.accel,
                 qemu_extra=shlex.split(args.qemu_args)).run()
    if args.show:
        print("\n".join(l for l in b.lines if l.startswith(args.show)))
    print(b.report())
    return 0 if b.verdict() is None else 1


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="run the test suite")
    c.add_argument("--plan", default="short",
                   choices=["short", "full", "modules", "stress", "debug", "vmx", "vmx-all"])
    c.add_argument("--machine", default="qemu", choices=["qemu", "bochs"],
                   help="qemu: QEMU's TCG (-cpu max, SVM); bochs: Bochs's Haswell "
                   "(VMX, PCID), plans vmx and vmx-all (make check-vmx)")
    c.add_argument("--config", default="default", help="kernel configuration")
    c.add_argument("--no-selftest", action="store_true",
                   help="skip the harness's own panic/hang detection boots")
    d = sub.add_parser("demo", help="boot asi=on and run a KVM guest")
    d.add_argument("--config", default="default", help="kernel configuration")
    d.add_argument("--append", default="asi=on")
    b = sub.add_parser("boot", help="boot once and report")
    b.add_argument("--kernel", required=True)
    b.add_argument("--initrd", required=True)
    b.add_argument("--append", default="")
    b.add_argument("--name", default="boot")
    b.add_argument("--logdir")
    b.add_argument("--timeout", type=int, default=900)
    b.add_argument("--idle-timeout", type=int, default=300)
    b.add_argument("--machine", default="qemu", choices=["qemu", "bochs"],
                   help="qemu (default) or bochs (Haswell: VMX, PCID; the kernel "
                   "and initramfs go on an ISO)")
    b.add_argument("--smp", help="CPUs (QEMU: 2, Bochs: 1), or QEMU's full -smp value, "
                   "e.g. 2,sockets=1,cores=1,threads=2")
    b.add_argument("--accel", default="tcg,thread=single",
                   help="QEMU -accel (default: single-threaded TCG)")
    b.add_argument("--mem", help="memory (QEMU: 4G, Bochs: 2G)")
    b.add_argument("--qemu-args", default="",
                   help="more QEMU arguments, split as the shell would; e.g. "
                   "\"-d cpu_reset,guest_errors -D reset.log\" to log the CPU state "
                   "at a reset (a triple fault, or the reboot after a panic)")
    b.add_argument("--show", metavar="PREFIX",
                   help="print console lines starting with PREFIX")
    args = p.parse_args()
    return {"check": cmd_check, "demo": cmd_demo, "boot": cmd_boot}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
