#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""asi/entry_window: what the KVM entry window reads must be mapped on ASI.

With asi=on, KVM switches to the VM's restricted page table and takes the
flush decision in kvm_asi_enter(), inlined into the noinstr functions
svm_vcpu_enter_exit() and vmx_vcpu_enter_exit(), and runs the guest on
that table; right after VM-exit it is still on it. A read there of
something the restricted table does not map faults and falls back to the
full kernel table, between the flush decision and VM-entry or before the
host's SPEC_CTRL is restored: that defeats the isolation. Much of this
code is patched in by alternatives only on CPUs with the feature, so an
emulator without the feature never runs it. This check reads it all from
the relocatable kernel, statically.

The window. The roots are the two functions, whole (svm_vcpu_enter_exit,
vmx_vcpu_enter_exit): a superset of the window proper; and the flush an
NMI that returns into the window runs (__asi_nmi_exit). The part of
svm_vcpu_enter_exit() before kvm_asi_enter() still runs on the full
table, but what it runs (context tracking, lockdep hooks) runs again
after VM-exit, on the restricted one. Every instruction of a function in
the window counts: both ways of every static branch (jump labels jump
within the function, so whole-function disassembly covers them), code
only exception fixups reach, and every alternative's original
instructions, unless they are replaced on every CPU (X86_FEATURE_ALWAYS,
or entries for a feature and for its absence at the same site).

What is followed, transitively: direct calls and jumps into noinstr-class
code (.noinstr.text, .entry.text, the .text..__x86.* thunk sections, the
.cold parts of followed functions); the replacement of every alternative
(.altinstructions) whose site lies in a followed function, disassembled
from exactly its range of .altinstr_replacement with its relocations,
and what the calls and jumps in it reach; paravirt direct calls
(ALT_FLAG_DIRECT_CALL) to the pv_ops slot's initial value. Return thunk
jumps and retpoline thunk calls are rewritten at boot (apply_returns(),
apply_retpolines()): every thunk they can become is followed
(RUNTIME_THUNKS, RETPOLINE_VARIANTS), and the call depth accounting thunk
that callthunks.c copies in front of called functions
(skl_call_thunk_template, X86_FEATURE_CALL_DEPTH) is checked too.

What is not followed, but counted and listed (-v): calls into ordinary
.text; by objtool's noinstr rules they lie inside instrumentation_begin()/
end() (tracing, lockdep, WARN, error helpers). Static calls: a
tracepoint's (__SCT__tp_func_*) go to __traceiter_* or a probe, all
ordinary .text, so they are listed with the calls not followed; any
other static call fails the check (its default target is followed, but
what static_call_update() may set at run time is not known). Indirect
calls and jumps are reported (INDIRECT): through a retpoline thunk, or
bare; their callees are not known to this check.

Where an instruction is not reached from its function's entry but only
through a jump in an alternative's replacement (e.g. the out-of-line
SPEC_CTRL code of svm/vmenter.S), or only from an exception fixup, its
VIOLATION line says so, with the alternative and its CPU feature.

What is checked: every memory operand that names a symbol through a
relocation (RIP-relative, absolute, %gs:-relative, a symbol displacement
with base or index registers), every symbol address used as an immediate
or by lea, and %gs: accesses at a constant offset. The symbol's section
decides (section_class()): mapped are kernel text, rodata (with
.data..ro_after_init and .data.rel.ro*), the ASI data sections .data..asi
and .data..asi..read_mostly (with __tracepoint_str, which the linker
script puts there), ASI's per-CPU section .data..percpu..asi and the
first per-CPU page (.data..percpu..first, fixed_percpu_data): what
asi_map_always() maps. With a build directory the classification is
cross-checked against the linked vmlinux, symbol by symbol: every symbol
of a section called mapped must lie in the ranges asi_map_always() maps
there, every symbol of a section called unmapped outside them (else a
LAYOUT failure). Data reached through registers (the VM's own
structures) is not this check's business. Modules (--module): their
text, rodata, .data..ro_after_init, .data..asi and .data..percpu..asi
are mapped (asi_map_module(), asi_percpu_alloc()); undefined symbols
are resolved in the other modules given, then in vmlinux.o.

Output: one VIOLATION line per instruction (function+offset, alternative
site and CPU feature where it is in a replacement, operand, symbol,
section, how the function was reached), then the summary line. Exit
status: 0 clean, 1 violations (or a layout mismatch), 2 could not run.

Usage:
  scripts/entry-window.py [--build out/build/default] [-v]
  scripts/entry-window.py --object FILE --root NAME [--root NAME]
  scripts/entry-window.py --module kvm-intel.ko [--module kvm-amd.ko] --build out/build/modules
  scripts/entry-window.py --self-test
"""

import argparse
import bisect
import collections
import mmap
import os
import re
import struct
import subprocess
import sys

PAGE = 4096
TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "asi/entry_window"

# ELF constants
SHT_SYMTAB, SHT_RELA, SHT_NOBITS = 2, 4, 8
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
STT_NOTYPE, STT_OBJECT, STT_FUNC, STT_SECTION, STT_FILE = 0, 1, 2, 3, 4
SHN_UNDEF, SHN_ABS, SHN_COMMON = 0, 0xfff1, 0xfff2
R_X86_64_NONE, R_X86_64_64, R_X86_64_PC32, R_X86_64_PLT32 = 0, 1, 2, 4
R_X86_64_32, R_X86_64_32S, R_X86_64_PC64 = 10, 11, 24
RELOC_SIZE = {R_X86_64_64: 8, R_X86_64_PC32: 4, R_X86_64_PLT32: 4,
              R_X86_64_32: 4, R_X86_64_32S: 4, R_X86_64_PC64: 8}
PCREL = {R_X86_64_PC32, R_X86_64_PLT32, R_X86_64_PC64}

# struct alt_instr (arch/x86/include/asm/alternative.h)
ALT_FMT = "<iiIBB"
ALT_SIZE = struct.calcsize(ALT_FMT)      # 14, __packed
ALT_FLAG_NOT, ALT_FLAG_DIRECT_CALL = 1, 2
X86_FEATURE_ALWAYS = 3 * 32 + 21

# The NMI exit's flush runs in the window too (last in exc_nmi(), after the
# guest's CR2 is restored): what it reads must be mapped as well.
ROOTS = ["svm_vcpu_enter_exit", "vmx_vcpu_enter_exit", "__asi_nmi_exit"]

# Sites the kernel rewrites at boot other than through .altinstructions,
# and every thunk they can become (arch/x86/kernel/alternative.c
# apply_returns()/apply_retpolines(), arch/x86/kernel/cpu/bugs.c
# set_return_thunk(), arch/x86/lib/retpoline.S). All are followed.
RUNTIME_THUNKS = {
    # jmp __x86_return_thunk: x86_return_thunk, or a plain ret
    "__x86_return_thunk": ["__x86_return_thunk", "retbleed_return_thunk",
                           "srso_return_thunk", "srso_alias_return_thunk",
                           "call_depth_return_thunk", "its_return_thunk"],
}
# call/jmp __x86_indirect_thunk_REG: the retpoline, the call depth and ITS
# variants, or call *%REG / lfence; call *%REG inline.
RETPOLINE_VARIANTS = ["__x86_indirect_thunk_{}", "__x86_indirect_call_thunk_{}",
                      "__x86_indirect_jump_thunk_{}", "__x86_indirect_its_thunk_{}"]
# A tracepoint's static call: __traceiter_NAME, or the single probe
# registered (include/trace/trace_events.h, perf_event.h, bpf_probe.h).
TRACEPOINT_PROBES = ["__traceiter_{}", "trace_event_raw_event_{}", "perf_trace_{}",
                     "__bpf_trace_{}", "__probestub_{}"]
CALL_THUNK_TEMPLATE = ("skl_call_thunk_template", "skl_call_thunk_tail")

# Waivers: findings that are genuinely unreachable on a restricted table,
# by (function, symbol), each with the reason. Every waiver used is
# printed. Nothing else is let through: a finding is fixed in the kernel
# or it fails.
WAIVERS = {
    ("asi_enter", "__tracepoint_asi_enter"):
        "asi_trace() in asi_enter() runs before asi_load_table(), on the full "
        "table (a no-op when already on the domain's table)",
    ("__asi_exit", "__tracepoint_asi_exit"):
        "asi_trace() in __asi_exit() runs after asi_load_full(), on the full table",
}

# Where the window ends inside a root: calls that run after the VM-entry
# code returned (kvm_asi_window_end()), with the host's state restored,
# where a fallback is harmless (counted, and the next VM-entry flushes).
# Not followed; each use is printed.
WINDOW_ENDS = {
    "vmx_do_nmi_irqoff":
        "the host NMI that caused the VM-exit, handled after the VM-entry code "
        "returned; an NMI handler may fall back (invariant: entries handled on a restricted table)",
    "fred_entry_from_kvm":
        "the same, on CPUs with FRED",
}


class CheckError(Exception):
    """The check could not run (exit status 2)."""


def hexs(n):
    return ("-0x%x" % -n) if n < 0 else ("0x%x" % n)


def plus(name, off):
    return name if off == 0 else "%s%s%s" % (name, "" if off < 0 else "+", hexs(off))


# --------------------------------------------------------------------------
# ELF

class Section:
    __slots__ = ("idx", "name", "type", "flags", "addr", "offset", "size",
                 "link", "info", "entsize")


class Sym:
    __slots__ = ("idx", "name", "value", "size", "type", "bind", "shndx")

    def __repr__(self):
        return "Sym(%s)" % self.name


class Elf:
    def __init__(self, path):
        self.path = path
        try:
            f = open(path, "rb")
        except OSError as e:
            raise CheckError("%s: %s" % (path, e.strerror))
        with f:
            try:
                self.mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (ValueError, OSError) as e:
                raise CheckError("%s: %s" % (path, e))
        mm = self.mm
        if len(mm) < 64 or mm[:4] != b"\x7fELF" or mm[4] != 2 or mm[5] != 1:
            raise CheckError("%s: not a 64-bit little-endian ELF file" % path)
        (self.e_type, machine, _, _, _, shoff, _, _, _, _, shentsize, shnum,
         shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", mm, 16)
        if machine != 62:
            raise CheckError("%s: not x86-64" % path)
        self.relocatable = self.e_type == 1
        self.sections = []
        for i in range(shnum):
            s = Section()
            (name, s.type, s.flags, s.addr, s.offset, s.size, s.link, s.info, _,
             s.entsize) = struct.unpack_from("<IIQQQQIIQQ", mm, shoff + i * shentsize)
            s.idx, s.name = i, name
            self.sections.append(s)
        strtab = self.sections[shstrndx]
        for s in self.sections:
            s.name = self._str(strtab.offset, s.name)
        self.by_name = {}
        for s in self.sections:
            self.by_name.setdefault(s.name, s)
        self.rela_of = {}
        for s in self.sections:
            if s.type == SHT_RELA:
                self.rela_of[s.info] = s
        self.syms = []
        symtab = next((s for s in self.sections if s.type == SHT_SYMTAB), None)
        if symtab is not None:
            stroff = self.sections[symtab.link].offset
            data = mm[symtab.offset:symtab.offset + symtab.size]
            for i, (nm, info, _, shndx, value, size) in enumerate(
                    struct.iter_unpack("<IBBHQQ", data)):
                y = Sym()
                y.idx, y.value, y.size, y.shndx = i, value, size, shndx
                y.type, y.bind = info & 0xf, info >> 4
                y.name = self._str(stroff, nm) if nm else ""
                if y.type == STT_SECTION and not y.name and shndx < len(self.sections):
                    y.name = self.sections[shndx].name
                self.syms.append(y)
        self._rela = {}

    def _str(self, base, off):
        end = self.mm.find(b"\0", base + off)
        return self.mm[base + off:end].decode("latin-1")

    def data(self, s, start=0, end=None):
        if end is None:
            end = s.size
        if s.type == SHT_NOBITS:
            return bytes(end - start)
        return self.mm[s.offset + start:s.offset + end]

    def relocs(self, secidx):
        """Relocations of a section: {offset: (type, symidx, addend)}."""
        r = self._rela.get(secidx)
        if r is None:
            r = {}
            rs = self.rela_of.get(secidx)
            if rs is not None:
                data = self.mm[rs.offset:rs.offset + rs.size]
                for off, info, addend in struct.iter_unpack("<QQq", data):
                    t = info & 0xffffffff
                    if t != R_X86_64_NONE:
                        r[off] = (t, info >> 32, addend)
            self._rela[secidx] = r
        return r


# --------------------------------------------------------------------------
# Section classes: what asi_map_always() maps (asi-core/arch/x86/mm/asi/domain.c)

MAPPED_NAMES = {
    # (.data.rel.ro* is in RO_DATA too: see the prefix rule below)
    ".data..percpu..asi": "ASI per-CPU section",
    ".data..asi": "ASI data section",
    ".data..asi..read_mostly": "ASI data section",
    ".data..ro_after_init": "rodata (ro_after_init)",
}
INIT_PREFIXES = (".init.", ".exit.", ".altinstr", ".discard", ".head.data",
                 ".meminit.", ".ref.data", ".x86_cpu_dev.init", ".apicdrivers")


def section_class(name, flags, module=False):
    """(mapped, label) by the section's name and flags; mapped is None where
    only the linked image can tell (a read-only section of no known kind)."""
    if not flags & SHF_ALLOC:
        return False, "not allocated"
    if name in MAPPED_NAMES:
        return True, MAPPED_NAMES[name]
    if name == ".data..ro_after_init..secret" and not module:
        return False, "ro_after_init secret (left out of rodata)"
    if name == ".data..percpu..first" and not module:
        return True, "first per-CPU page (fixed_percpu_data)"
    if name.startswith(".data..percpu"):
        return False, "per-CPU data"
    if name == "__tracepoint_str" and not module:
        return True, "ASI data section (tracepoint strings)"
    if name.startswith(INIT_PREFIXES):
        return False, "init or boot-time section"
    if flags & SHF_EXECINSTR:
        return True, "kernel text" if not module else "module text"
    if name == ".rodata" or name.startswith((".rodata.", ".rodata1", ".data.rel.ro")):
        return True, "rodata"
    if flags & SHF_WRITE:
        return False, "data"
    if module:
        return True, "module rodata"
    return None, "read-only section"


class Ranges:
    """asi_map_always()'s ranges in the linked vmlinux."""

    def __init__(self, vmlinux):
        self.elf = vmlinux
        self.addr = collections.defaultdict(list)
        for y in vmlinux.syms:
            if y.name and y.shndx != SHN_UNDEF and y.type != STT_SECTION:
                self.addr[y.name].append(y.value)

        def one(n):
            v = self.addr.get(n)
            if not v:
                raise CheckError("%s: no symbol %s" % (vmlinux.path, n))
            return v[0]

        def pfn_align(x):
            return (x + PAGE - 1) & ~(PAGE - 1)
        self.va = [
            (pfn_align(one("_text")), pfn_align(one("_etext")), "kernel text"),
            (pfn_align(one("__start_rodata")),
             pfn_align(one("__start_ro_after_init_secret")), "kernel rodata"),
            (pfn_align(one("__end_ro_after_init_secret")),
             pfn_align(one("__end_rodata")), "kernel rodata"),
            (one("__asi_data_start"), one("__asi_data_end"), "ASI data section"),
        ]
        fp = one("fixed_percpu_data")
        self.percpu = [
            (one("__per_cpu_asi_start"), one("__per_cpu_asi_end"), "per-CPU ASI section"),
            (fp, fp + PAGE, "fixed_percpu_data"),
        ]
        self.percpu_all = (one("__per_cpu_start"), one("__per_cpu_end"))

    def mapped(self, start, end, percpu):
        """True/False where [start, end) lies in/outside the mapped ranges,
        None where it straddles a boundary."""
        inside = 0
        for lo, hi, _ in (self.percpu if percpu else self.va):
            if lo <= start and end <= hi:
                return True
            if start < hi and lo < end:
                inside += 1
        return None if inside else False


# --------------------------------------------------------------------------
# Images: a relocatable object with its symbol indexes

class Func:
    __slots__ = ("img", "sec", "start", "end", "name")

    def __init__(self, img, sec, start, end, name):
        self.img, self.sec, self.start, self.end, self.name = img, sec, start, end, name

    def key(self):
        return (id(self.img), self.sec, self.start)

    def secname(self):
        return self.img.elf.sections[self.sec].name


class Target:
    """Where a relocation points: a defined place, or an undefined name."""
    __slots__ = ("img", "sec", "off", "name", "symoff")

    def __init__(self, img, sec, off, name=None, symoff=0):
        self.img, self.sec, self.off, self.name, self.symoff = img, sec, off, name, symoff


class Image:
    def __init__(self, path, kind):
        self.path, self.kind = path, kind
        self.elf = Elf(path)
        if not self.elf.relocatable:
            raise CheckError("%s: not a relocatable object (use vmlinux.o or a .ko)" % path)
        self.module = kind == "module"
        self.defined = {}
        self.local_by_name = collections.defaultdict(list)
        per_sec = collections.defaultdict(list)
        for y in self.elf.syms:
            if not y.name or y.type in (STT_SECTION, STT_FILE):
                continue
            if y.shndx in (SHN_UNDEF, SHN_ABS, SHN_COMMON) or y.shndx >= len(self.elf.sections):
                continue
            per_sec[y.shndx].append(y)
            if y.bind != 0:
                self.defined.setdefault(y.name, y)
            else:
                self.local_by_name[y.name].append(y)
        self.sec_syms = {}
        for idx, lst in per_sec.items():
            lst.sort(key=lambda y: (y.value, -y.size))
            self.sec_syms[idx] = (lst, [y.value for y in lst])
        self.classes = {}
        self.alts = None
        self.placed_mapped = {}       # read-only sections classed by placement

    def lookup(self, name):
        """A defined symbol by name: global first, then a unique local."""
        y = self.defined.get(name)
        if y is None:
            loc = self.local_by_name.get(name, [])
            if len(loc) == 1:
                y = loc[0]
        return y

    def func_at(self, sec, off):
        """The function containing sec+off: the smallest sized FUNC/NOTYPE
        symbol covering it, else from the nearest symbol before it to the
        next one."""
        lst, vals = self.sec_syms.get(sec, ([], []))
        i = bisect.bisect_right(vals, off)
        best = None
        j = i - 1
        while j >= 0 and off - lst[j].value < (1 << 20):
            y = lst[j]
            if y.type in (STT_FUNC, STT_NOTYPE) and y.size and y.value <= off < y.value + y.size:
                if best is None or y.size < best.size or \
                        (y.size == best.size and y.type == STT_FUNC and best.type != STT_FUNC):
                    best = y
            j -= 1
        if best is not None and not best.name.startswith("__pfx_"):
            return Func(self, sec, best.value, best.value + best.size, best.name)
        if i == 0:
            return None
        y = lst[i - 1]
        end = self.elf.sections[sec].size
        k = i
        while k < len(lst) and lst[k].value <= y.value:
            k += 1
        if k < len(lst):
            end = lst[k].value
        return Func(self, sec, y.value, end, y.name)

    def name_at(self, sec, off):
        """A name for sec+off: the symbol containing it (objects first)."""
        lst, vals = self.sec_syms.get(sec, ([], []))
        i = bisect.bisect_right(vals, off)
        cand = None
        j = i - 1
        while j >= 0 and off - lst[j].value < (1 << 16):
            y = lst[j]
            if y.size and y.value <= off < y.value + y.size:
                if cand is None or (y.type == STT_OBJECT and cand.type != STT_OBJECT):
                    cand = y
            j -= 1
        if cand is None and i > 0:
            cand = lst[i - 1]
        if cand is None:
            return plus(self.elf.sections[sec].name, off)
        return plus(cand.name, off - cand.value)

    def target(self, rel, field_off, insn_end=None):
        """Resolve relocation rel=(type, symidx, addend) at field_off. For a
        PC-relative one in an instruction, the target is S + A + (end - P)."""
        t, symidx, addend = rel
        adj = (insn_end - field_off) if (insn_end is not None and t in PCREL) else 0
        y = self.elf.syms[symidx]
        off = addend + adj
        if y.shndx == SHN_UNDEF:
            return Target(None, None, None, y.name, off)
        if y.shndx == SHN_ABS or y.shndx >= len(self.elf.sections):
            return Target(None, None, y.value + off, "*ABS*" if not y.name else y.name, off)
        if y.type == STT_SECTION:
            return Target(self, y.shndx, off)
        return Target(self, y.shndx, y.value + off, y.name, off)

    def alt_entries(self):
        """.altinstructions: {site section: sorted [(off, len, repl_sec,
        repl_off, repl_len, feature, flags, index)]}."""
        if self.alts is not None:
            return self.alts
        self.alts = collections.defaultdict(list)
        s = self.elf.by_name.get(".altinstructions")
        if s is None:
            return self.alts
        if s.size % ALT_SIZE:
            raise CheckError("%s: .altinstructions size %d is not a multiple of "
                             "sizeof(struct alt_instr) = %d" % (self.path, s.size, ALT_SIZE))
        data = self.elf.data(s)
        rel = self.elf.relocs(s.idx)
        for i in range(s.size // ALT_SIZE):
            base = i * ALT_SIZE
            _, _, ft, ilen, rlen = struct.unpack_from(ALT_FMT, data, base)
            r1, r2 = rel.get(base), rel.get(base + 4)
            if r1 is None or r2 is None:
                raise CheckError("%s: .altinstructions entry %d has no relocations"
                                 % (self.path, i))
            site, repl = self.target(r1, base), self.target(r2, base + 4)
            if site.img is None or repl.img is None:
                raise CheckError("%s: .altinstructions entry %d points to an undefined "
                                 "symbol" % (self.path, i))
            self.alts[site.sec].append((site.off, ilen, repl.sec, repl.off, rlen,
                                        ft & 0xffff, ft >> 16, i))
        for lst in self.alts.values():
            lst.sort()
        return self.alts

    def _pairs(self, secname, entsize):
        """(first, second) targets of the two s32 relative fields at the
        start of each entry of a table like __jump_table or __ex_table."""
        out = []
        s = self.elf.by_name.get(secname)
        if s is None:
            return out
        rel = self.elf.relocs(s.idx)
        for base in range(0, s.size - entsize + 1, entsize):
            r1, r2 = rel.get(base), rel.get(base + 4)
            if r1 is None or r2 is None:
                continue
            a, b = self.target(r1, base), self.target(r2, base + 4)
            if a.img is not None and b.img is not None:
                out.append((a.sec, a.off, b.sec, b.off))
        return out

    def flow_edges(self):
        """Static branch (jump label) edges {(sec, code): [target]} from
        __jump_table (struct jump_entry: s32 code, s32 target, long key)
        and exception fixups {sec: [(insn, fixup)]} from __ex_table
        (struct exception_table_entry: int insn, fixup, data)."""
        if getattr(self, "_flow", None) is None:
            jl = collections.defaultdict(list)
            for cs, co, ts, to in self._pairs("__jump_table", 16):
                if cs == ts:
                    jl[(cs, co)].append(to)
            ex = collections.defaultdict(list)
            for isec, io, fsec, fo in self._pairs("__ex_table", 12):
                if isec == fsec:
                    ex[isec].append((io, fo))
            self._flow = (jl, ex, self._warn_sites())
        return self._flow

    def _warn_sites(self):
        """{(sec, off)} of the ud2 of WARN()s, which resume after it:
        __bug_table entries with BUGFLAG_WARNING (struct bug_entry: s32
        bug_addr_disp, [s32 file_disp, u16 line,] u16 flags)."""
        out = set()
        s = self.elf.by_name.get("__bug_table")
        if s is None:
            return out
        rel = self.elf.relocs(s.idx)
        offs = sorted(rel)
        if len(offs) < 3:
            return out
        if offs[1] - offs[0] == 4:             # CONFIG_DEBUG_BUGVERBOSE
            ent, flags_at = offs[2] - offs[0], offs[2] - offs[0] - 2
        else:
            ent, flags_at = offs[1] - offs[0], 4
        data = self.elf.data(s)
        for base in range(0, s.size - ent + 1, ent):
            r = rel.get(base)
            if r is None:
                continue
            (flags,) = struct.unpack_from("<H", data, base + flags_at)
            if flags & 1:                      # BUGFLAG_WARNING
                t = self.target(r, base)
                if t.img is not None:
                    out.add((t.sec, t.off))
        return out

    def classify(self, sec, off):
        """(mapped, label) for a place in this image."""
        c = self.classes.get(sec)
        if c is None:
            s = self.elf.sections[sec]
            c = section_class(s.name, s.flags, self.module)
            self.classes[sec] = c
        mapped, label = c
        s = self.elf.sections[sec]
        if s.name == ".data..percpu..first" and mapped and not 0 <= off < PAGE:
            return False, "per-CPU data past the first per-CPU page"
        return mapped, label


# --------------------------------------------------------------------------
# Disassembly (objdump), cached per section or per range

INSN_RE = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+?)\s*(?:\t(.*))?$")
PREFIXES = {"lock", "rep", "repz", "repnz", "repe", "repne", "cs", "ds", "ss", "es",
            "fs", "gs", "data16", "addr32", "notrack", "bnd", "xacquire", "xrelease"}


class Insn:
    __slots__ = ("off", "len", "mnem", "ops", "text")

    def __init__(self, off, length, text):
        self.off, self.len = off, length
        text = text.split("#", 1)[0].strip() if "#" in text else text.strip()
        text = re.sub(r"\s+<[^>]*>", "", text)
        self.text = re.sub(r"\s+", " ", text)
        toks = self.text.split(" ")
        k = 0
        while k < len(toks) - 1 and (toks[k] in PREFIXES or toks[k].startswith("rex")):
            k += 1
        self.mnem = toks[k] if toks else ""
        self.ops = " ".join(toks[k + 1:])

    def end(self):
        return self.off + self.len

    def is_branch(self):
        m = self.mnem
        return m in ("call", "callq", "jmp", "jmpq") or \
            (m.startswith("j") and m not in ("jmpf", "jmpfq")) or m.startswith("loop")

    def is_call(self):
        return self.mnem in ("call", "callq")

    def indirect(self):
        return self.is_branch() and self.ops.startswith("*")

    def direct_target(self):
        """The target offset objdump printed (meaningful without a reloc)."""
        m = re.match(r"([0-9a-f]+)\b", self.ops)
        return int(m.group(1), 16) if m else None


class Disasm:
    def __init__(self, objdump):
        self.objdump = objdump
        self.cache = {}
        self.runs = 0

    def _run(self, img, secname, start=None, stop=None):
        cmd = [self.objdump, "-d", "-w", "-z", "-j", secname]
        if start is not None:
            cmd += ["--start-address=0x%x" % start, "--stop-address=0x%x" % stop]
        cmd.append(img.path)
        self.runs += 1
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, errors="replace")
        except OSError as e:
            raise CheckError("%s: %s" % (self.objdump, e))
        if p.returncode:
            raise CheckError("%s failed: %s" % (" ".join(cmd), p.stderr.strip()[:500]))
        out = []
        for line in p.stdout.splitlines():
            m = INSN_RE.match(line)
            if not m:
                continue
            nbytes = len(m.group(2).split())
            out.append(Insn(int(m.group(1), 16), nbytes, m.group(3) or "(bytes)"))
        return out

    def section(self, img, sec):
        key = (id(img), sec)
        d = self.cache.get(key)
        if d is None:
            insns = self._run(img, img.elf.sections[sec].name)
            d = (insns, [i.off for i in insns])
            self.cache[key] = d
        return d

    def range(self, img, sec, start, end, whole_section=False):
        """Instructions of [start, end); decoded from the whole-section
        listing where that has an instruction boundary at start and at
        end, else disassembled alone."""
        if whole_section:
            insns, offs = self.section(img, sec)
            i = bisect.bisect_left(offs, start)
            j = bisect.bisect_left(offs, end)
            sec_end = img.elf.sections[sec].size
            if (i < len(offs) and offs[i] == start or start == end) and \
                    (j < len(offs) and offs[j] == end or end >= sec_end or
                     (j > 0 and insns[j - 1].end() == end)):
                return insns[i:j]
        if start == end:
            return []
        return self._run(img, img.elf.sections[sec].name, start, end)


# --------------------------------------------------------------------------
# CPU feature names from cpufeatures.h

def feature_names(linux):
    names = {}
    path = os.path.join(linux or "", "arch/x86/include/asm/cpufeatures.h")
    try:
        text = open(path).read()
    except OSError:
        return names
    m = re.search(r"#define\s+NCAPINTS\s+(\d+)", text)
    ncap = int(m.group(1)) if m else 0
    for m in re.finditer(r"#define\s+(X86_FEATURE_\w+)\s+\(\s*(\d+)\s*\*\s*32\s*\+\s*(\d+)\s*\)",
                         text):
        names.setdefault(int(m.group(2)) * 32 + int(m.group(3)), m.group(1))
    for m in re.finditer(r"#define\s+(X86_BUG_\w+)\s+X86_BUG\(\s*(\d+)\s*\)", text):
        names.setdefault(ncap * 32 + int(m.group(2)), m.group(1))
    for m in re.finditer(r"#define\s+(X86_BUG_\w+)\s+X86_BUG\(\s*1\s*\*\s*32\s*\+\s*(\d+)\s*\)",
                         text):
        names.setdefault(ncap * 32 + 32 + int(m.group(2)), m.group(1))
    return names


# --------------------------------------------------------------------------
# The walk

class Ctx:
    """Where an instruction is: its function, and the alternative if it
    lies in a replacement."""
    __slots__ = ("func", "alt", "tag")

    def __init__(self, func, alt=None, tag=None):
        self.func, self.alt, self.tag = func, alt, tag


class Checker:
    def __init__(self, images, disasm, features, ranges=None, resolver=None, verbose=False):
        self.images = images          # searched in order for roots and undefined names
        self.dis = disasm
        self.features = features
        self.ranges = ranges          # Ranges of the linked vmlinux, or None
        self.resolver = resolver      # Image resolving undefined names (vmlinux.o)
        self.verbose = verbose
        self.funcs = {}               # key -> Func, walked
        self.parent = {}              # key -> (parent key, how)
        self.queue = collections.deque()
        self.n_insns = self.n_alt_insns = 0
        self.n_mem = self.n_addr = self.n_gs_const = 0
        self.violations = collections.OrderedDict()   # insn key -> [text]
        self.operand_violations = set()
        self.not_followed = collections.OrderedDict()  # (site) -> target
        self.window_ends = collections.OrderedDict()   # (site) -> text
        self.aux = []
        self.indirect = []
        self.static_calls = []
        self.dead_orig = 0
        self.n_jump_labels = 0
        self.waivers_used = []
        self.alt_sites = 0
        self.notes = []
        self.operands = []            # (where, kind, symbol, mapped, label), for --list
        self.call_thunk_checked = False

    # ---- naming
    def feature(self, num, flags):
        name = self.features.get(num, "feature %d*32+%d" % (num // 32, num % 32))
        s = "%s (%d*32+%d)" % (name, num // 32, num % 32)
        if flags & ALT_FLAG_NOT:
            s = "NOT " + s
        return s

    def where(self, ctx, insn):
        f = ctx.func
        if ctx.alt is None:
            w = plus(f.name, insn.off - f.start)
            return w + (" [%s]" % ctx.tag if ctx.tag else "")
        site_off, _, _, repl_off, _, feat, flags, idx = ctx.alt
        return "%s [alternative #%d for %s, replacement+%s]" % (
            plus(f.name, site_off - f.start), idx, self.feature(feat, flags),
            hexs(insn.off - repl_off))

    def chain(self, func):
        names = []
        k = func.key()
        seen = set()
        while k in self.parent and k not in seen:
            seen.add(k)
            pk, how = self.parent[k]
            if pk is None:
                break
            names.append(self.funcs[pk].name + (" (%s)" % how if how else ""))
            k = pk
        return " < ".join(names)

    # ---- resolution
    def resolve(self, tgt):
        """A Target with img set, if an undefined name is defined elsewhere."""
        if tgt.img is not None or tgt.name is None:
            return tgt
        for img in self.images + ([self.resolver] if self.resolver else []):
            y = img.lookup(tgt.name) if img is not None else None
            if y is not None and y.bind != 0:
                return Target(img, y.shndx, y.value + tgt.symoff, y.name, tgt.symoff)
        return tgt

    def target_name(self, tgt):
        if tgt.img is None:
            return plus(tgt.name or "?", tgt.symoff)
        if tgt.name and not tgt.name.startswith(".L"):
            sec = tgt.img.elf.sections[tgt.sec]
            y = tgt.img.lookup(tgt.name)
            if y is not None and y.size and 0 <= tgt.symoff < y.size or tgt.symoff == 0:
                return plus(tgt.name, tgt.symoff)
            if sec.name.startswith(".data..percpu") or tgt.symoff:
                return tgt.img.name_at(tgt.sec, tgt.off)
            return plus(tgt.name, tgt.symoff)
        return tgt.img.name_at(tgt.sec, tgt.off)

    def classify(self, tgt):
        """(mapped, label, section name) of a resolved target."""
        if tgt.img is None:
            if tgt.name == "*ABS*" or tgt.off is not None:
                return None, "absolute symbol", "*ABS*"
            # Undefined here: a linker script symbol, placed in vmlinux.
            if self.ranges is not None:
                addrs = self.ranges.addr.get(tgt.name)
                if addrs:
                    a = addrs[0] + tgt.symoff
                    percpu = self.ranges.percpu_all[0] <= a < self.ranges.percpu_all[1] \
                        and self.ranges.percpu_all[0] == 0
                    m = self.ranges.mapped(a, a + 1, percpu)
                    return bool(m), "linker symbol at %#x" % a, "vmlinux"
            return False, "undefined symbol, cannot be placed", "UNDEF"
        mapped, label = tgt.img.classify(tgt.sec, tgt.off)
        return mapped, label, tgt.img.elf.sections[tgt.sec].name

    # ---- walking
    def enqueue(self, func, parent, how):
        k = func.key()
        if k in self.funcs:
            return
        self.funcs[k] = func
        self.parent[k] = (parent.key() if parent else None, how)
        self.queue.append(func)

    def followable(self, func):
        sec = func.secname()
        return sec in (".noinstr.text", ".entry.text") or sec.startswith(".text..__x86.") \
            or ".cold" in func.name

    def whole_section(self, img, sec):
        name = img.elf.sections[sec].name
        return name in (".noinstr.text", ".entry.text", ".altinstr_replacement") or \
            name.startswith(".text..__x86.")

    def run(self, roots):
        missing = []
        for r in roots:
            f = None
            for img in self.images:
                y = img.lookup(r)
                if y is not None and y.type == STT_FUNC:
                    f = Func(img, y.shndx, y.value, y.value + y.size, y.name)
                    break
            if f is None:
                missing.append(r)
                continue
            self.enqueue(f, None, "root")
        if missing:
            raise CheckError("root function(s) not found: %s" % ", ".join(missing))
        while self.queue:
            self.walk(self.queue.popleft())

    def walk(self, func):
        img = func.img
        insns = self.dis.range(img, func.sec, func.start, func.end,
                               self.whole_section(img, func.sec))
        alts = img.alt_entries().get(func.sec, [])
        i = bisect.bisect_left(alts, (func.start,))
        mine = []
        while i < len(alts) and alts[i][0] < func.end:
            mine.append(alts[i])
            i += 1
        dead = self.dead_ranges(mine)
        rel = img.elf.relocs(func.sec)
        repl = {}
        for a in mine:
            if not a[6] & ALT_FLAG_DIRECT_CALL:
                repl[a] = self.dis.range(img, a[2], a[3], a[3] + a[4], True)
        tags = self.reach_tags(func, insns, rel, mine, repl, dead)
        jl = img.flow_edges()[0]
        self.n_jump_labels += sum(1 for ins in insns if (func.sec, ins.off) in jl)
        for insn in insns:
            if any(lo <= insn.off < hi for lo, hi in dead):
                self.dead_orig += 1
                continue
            self.n_insns += 1
            self.insn(Ctx(func, None, tags.get(insn.off)), insn, rel, None)
        for a in mine:
            self.alt_sites += 1
            if a in repl:
                self.walk_alt(func, a, repl[a])
            else:
                self.direct_call_alt(func, a)
        if self.n_insns and not self.call_thunk_checked:
            self.check_call_thunk(func)

    def branch_dest(self, img, sec, insn, rel):
        """(sec, off) of a direct branch, or None."""
        for p in range(insn.off, insn.end()):
            r = rel.get(p)
            if r is not None:
                t = img.target(r, p, insn.end())
                return (t.sec, t.off) if t.img is img else None
        t = insn.direct_target()
        return (sec, t) if t is not None else None

    def reach_tags(self, func, insns, rel, alts, repl, dead):
        """{offset: how} for the instructions of func that are reached only
        through one alternative's replacement ("reached only through
        alternative #N for FEATURE"), only from exception fixups, or not
        at all ("not reached statically"). Reaching follows fall-through,
        direct branches, static branches (both ways), and at an
        alternative site every variant: the original (unless replaced on
        every CPU) and each replacement's jumps back into the function and
        its fall-through to the end of the site."""
        img = func.img
        idx = {ins.off: k for k, ins in enumerate(insns)}
        jl, ex, warn = img.flow_edges()
        stop = ("ret", "retq", "jmp", "jmpq", "int3", "iretq", "sysretq", "sysretl",
                "iret", "lret", "sysexit", "ljmp", "ud2")
        site_end = {}
        for a in alts:
            site_end[a[0]] = max(site_end.get(a[0], 0), a[0] + a[1])
        dead_at = {lo for lo, hi in dead}

        def starts_of(a):
            starts = []
            if not any(ins.mnem in stop for ins in repl.get(a, ())):
                starts.append(site_end[a[0]])
            for ins in repl.get(a, ()):
                if ins.is_branch() and not ins.indirect():
                    d = self.branch_dest(img, a[2], ins, img.elf.relocs(a[2]))
                    if d is not None and d[0] == func.sec:
                        starts.append(d[1])
            return [o for o in starts if o in idx]
        at_site = collections.defaultdict(list)
        for a in alts:
            at_site[a[0]].append((a, starts_of(a)))
        fixups = [fo for io, fo in ex.get(func.sec, ()) if func.start <= io < func.end]

        def succ(o):
            ins = insns[idx[o]]
            out = []
            if ins.mnem not in stop or (func.sec, o) in jl or \
                    (ins.mnem == "ud2" and (func.sec, o) in warn):
                out.append(ins.end())      # a static branch's site goes both ways,
                                           # WARN()'s ud2 resumes after it
            if ins.is_branch() and not ins.indirect():
                d = self.branch_dest(img, func.sec, ins, rel)
                if d is not None and d[0] == func.sec:
                    out.append(d[1])
            out.extend(jl.get((func.sec, o), ()))
            return out

        entries = [func.start]
        lst, vals = img.sec_syms.get(func.sec, ([], []))
        k = bisect.bisect_left(vals, func.start)
        while k < len(vals) and vals[k] < func.end:
            entries.append(vals[k])
            k += 1

        def reach(without=None, with_fixups=True):
            seen = set()
            stack = [o for o in entries + (fixups if with_fixups else []) if o in idx]
            while stack:
                o = stack.pop()
                if o in seen:
                    continue
                seen.add(o)
                nxt = [] if o in dead_at else succ(o)
                for a, st in at_site.get(o, ()):
                    if a is not without:
                        nxt.extend(st)
                stack.extend(n for n in nxt if n in idx and n not in seen)
            return seen

        everything = reach()
        tags = {}
        for ins in insns:
            if ins.off not in everything:
                tags[ins.off] = "not reached statically from the function's entry"
        for o in reach() - reach(with_fixups=False):
            tags.setdefault(o, "exception fixup")
        # Replacements for X86_FEATURE_ALWAYS are applied on every CPU;
        # where a later entry for FEATURE at the same site overrides one,
        # it runs on CPUs without FEATURE (ALTERNATIVE_TERNARY).
        for a in alts:
            if not any(st for b, st in at_site[a[0]] if b is a):
                continue
            lost = everything - reach(without=a)
            if not lost:
                continue
            if a[5] == X86_FEATURE_ALWAYS and not a[6] & ALT_FLAG_NOT:
                over = [b for b in alts if b[0] == a[0] and b is not a]
                if not over:
                    continue
                tag = "reached only through alternative #%d (X86_FEATURE_ALWAYS) at %s, " \
                      "i.e. on CPUs %s" % (
                          a[7], plus(func.name, a[0] - func.start),
                          " and ".join(("with " if b[6] & ALT_FLAG_NOT else "without ") +
                                       self.feature(b[5], 0) for b in over))
            else:
                tag = "reached only through alternative #%d for %s at %s" % (
                    a[7], self.feature(a[5], a[6]), plus(func.name, a[0] - func.start))
            for o in lost:
                tags.setdefault(o, tag)
        return tags

    def dead_ranges(self, alts):
        """Original instructions replaced on every CPU: X86_FEATURE_ALWAYS,
        or entries for a feature and for its absence at the same site."""
        dead = []
        seen = {}
        for off, ilen, _, _, _, feat, flags, _ in alts:
            if feat == X86_FEATURE_ALWAYS and not flags & ALT_FLAG_NOT:
                dead.append((off, off + ilen))
            k = (off, feat)
            seen.setdefault(k, {})[bool(flags & ALT_FLAG_NOT)] = ilen
        for (off, _), st in seen.items():
            if len(st) == 2:
                dead.append((off, off + min(st.values())))
        return dead

    def walk_alt(self, func, a, insns):
        rsec, roff, rlen = a[2], a[3], a[4]
        ctx = Ctx(func, a)
        rel = func.img.elf.relocs(rsec)
        for insn in insns:
            self.n_insns += 1
            self.n_alt_insns += 1
            self.insn(ctx, insn, rel, (roff, roff + rlen))

    def direct_call_alt(self, func, a):
        """ALT_FLAG_DIRECT_CALL (paravirt): the original call *pv_ops.x is
        made a direct call to the pointer's value at patching time."""
        site_off = a[0]
        img = func.img
        rel = img.elf.relocs(func.sec)
        tgt = None
        for insn in self.dis.range(img, func.sec, site_off, site_off + a[1], False):
            for p in range(insn.off, insn.end()):
                r = rel.get(p)
                if r:
                    tgt = self.resolve(img.target(r, p, insn.end()))
        slot_fn = None
        if tgt is not None and tgt.img is not None:
            r = tgt.img.elf.relocs(tgt.sec).get(tgt.off)
            if r:
                slot = tgt.img.target(r, tgt.off)
                slot = self.resolve(slot)
                if slot.img is not None:
                    slot_fn = slot.img.func_at(slot.sec, slot.off)
        where = "%s [alternative #%d, %s, direct call]" % (
            plus(func.name, site_off - func.start), a[7], self.feature(a[5], a[6]))
        if slot_fn is None:
            self.add_violation(("dc", id(img), func.sec, site_off),
                               "%s: paravirt direct call through %s: its target is not "
                               "known statically" % (where, self.target_name(tgt) if tgt else "?"))
            return
        self.notes.append("paravirt direct call %s -> %s (the slot's initial value; "
                          "guests may change it)" % (where, slot_fn.name))
        self.branch_to(func, Ctx(func, a), None, slot_fn, True, "pv direct call")

    def check_call_thunk(self, func):
        """The call depth accounting thunk callthunks.c copies in front of
        every called function (X86_FEATURE_CALL_DEPTH)."""
        self.call_thunk_checked = True
        img = func.img
        a, b = img.lookup(CALL_THUNK_TEMPLATE[0]), img.lookup(CALL_THUNK_TEMPLATE[1])
        if a is None or b is None or a.shndx != b.shndx:
            return
        f = Func(img, a.shndx, a.value, b.value, "call depth thunk " + a.name)
        self.funcs[f.key()] = f
        self.parent[f.key()] = (func.key(), "in front of every called function, "
                                "X86_FEATURE_CALL_DEPTH")
        rel = img.elf.relocs(a.shndx)
        for insn in self.dis.range(img, a.shndx, a.value, b.value, False):
            self.n_insns += 1
            self.insn(Ctx(f), insn, rel, None)

    def add_violation(self, key, text, operand=False):
        """One VIOLATION line per instruction; operand: an operand outside
        the mapped set (the rest: what the check cannot see through)."""
        self.violations.setdefault(key, []).append(text)
        if operand:
            self.operand_violations.add(key)

    def insn(self, ctx, insn, rel, repl):
        func = ctx.func
        img = func.img
        found = False
        for p in range(insn.off, insn.end()):
            r = rel.get(p)
            if r is None:
                continue
            found = True
            self.operand(ctx, insn, p, r, repl)
        if insn.ops.startswith("(bad)") or insn.mnem == "(bad)":
            self.add_violation((id(img), func.sec, insn.off, repl),
                               "%s: undecodable instruction" % self.where(ctx, insn))
        if insn.is_branch():
            if insn.indirect():
                if not func.secname().startswith(".text..__x86."):
                    self.indirect.append("%s: %s (bare indirect branch: the target is not "
                                         "known)" % (self.where(ctx, insn), insn.text))
            elif not found:
                t = insn.direct_target()
                if t is not None:
                    if repl is not None:
                        if not repl[0] <= t <= repl[1]:
                            self.notes.append("%s: branch out of its replacement without "
                                              "a relocation" % self.where(ctx, insn))
                    elif not func.start <= t < func.end:
                        f = img.func_at(func.sec, t)
                        if f is not None:
                            self.branch_to(func, ctx, insn, f, insn.is_call(), None)
        elif "%gs:" in insn.ops and not found:
            m = re.search(r"%gs:(0x[0-9a-f]+|\d+)(?![0-9a-fx(])", insn.ops)
            if m and "(" not in insn.ops.split("%gs:", 1)[1].split(",")[0]:
                v = int(m.group(1), 0)
                self.n_gs_const += 1
                ok = 0 <= v < PAGE
                self.operands.append((self.where(ctx, insn), "mem", "%%gs:%#x" % v, ok,
                                      "first per-CPU page" if ok else "per-CPU offset"))
                if not ok:
                    self.add_violation((id(img), func.sec, insn.off, repl),
                                       "%s: %%gs:%#x is past the first per-CPU page and names "
                                       "no symbol; insn: %s" % (self.where(ctx, insn), v,
                                                                insn.text), True)

    def operand(self, ctx, insn, p, r, repl):
        func = ctx.func
        img = func.img
        size = RELOC_SIZE.get(r[0])
        if size is None:
            self.notes.append("%s: relocation type %d not understood" % (
                self.where(ctx, insn), r[0]))
            return
        tgt = self.resolve(img.target(r, p, insn.end()))
        at_end = p + size == insn.end()
        if insn.is_branch() and not insn.indirect():
            self.branch_reloc(ctx, insn, tgt, repl)
            return
        if "$" in insn.ops and at_end and not (insn.ops.startswith("*")):
            kind = "imm"
        elif insn.mnem.startswith("lea"):
            kind = "lea"
        else:
            kind = "mem"
        if kind == "mem":
            self.n_mem += 1
        else:
            self.n_addr += 1
        mapped, label, secname = self.classify(tgt)
        if mapped is None and tgt.img is not None and self.ranges is not None:
            mapped = tgt.img.placed_mapped.get(tgt.sec)
            if mapped is not None:
                label += " (placed %s)" % ("in rodata" if mapped else "outside rodata")
        name = self.target_name(tgt)
        gs = "%gs:" if "%gs:" in insn.ops and kind == "mem" else ""
        where = self.where(ctx, insn)
        self.operands.append((where, kind, gs + name, bool(mapped), label))
        if mapped:
            return
        what = {"mem": "accesses", "imm": "takes the address of",
                "lea": "takes the address of"}[kind]
        sym_only = re.sub(r"[+-]0x[0-9a-f]+$", "", name)
        w = WAIVERS.get((func.name, sym_only))
        text = "%s: %s %s%s (%s: %s, not mapped); insn: %s" % (
            where, what, gs, name, secname, label, insn.text)
        if func.key() in self.parent and self.parent[func.key()][0] is not None:
            text += "; reached via %s" % self.chain(func)
        if w is not None:
            self.waivers_used.append("%s (%s)" % (text, w))
            return
        self.add_violation((id(img), func.sec, insn.off, repl), text, True)

    def branch_reloc(self, ctx, insn, tgt, repl):
        func = ctx.func
        name = tgt.name or ""
        if tgt.img is None:
            self.not_followed[(self.where(ctx, insn), name)] = \
                "%s: %s %s: undefined, not followed" % (self.where(ctx, insn), insn.mnem, name)
            self.add_violation((id(func.img), func.sec, insn.off, repl),
                               "%s: %s to %s, which is not defined in the objects checked" %
                               (self.where(ctx, insn), insn.mnem, plus(name, tgt.symoff)))
            return
        timg = tgt.img
        tsec = timg.elf.sections[tgt.sec].name
        if repl is not None and timg is func.img and tgt.sec == func.sec and \
                func.start <= tgt.off < func.end:
            return              # back into the function around the site
        if timg is func.img and tgt.sec == func.sec and func.start <= tgt.off < func.end \
                and repl is None:
            return
        if tsec == ".altinstr_aux":
            self.aux.append("%s: %s %s (static_cpu_has() boot-time path, replaced on every "
                            "CPU)" % (self.where(ctx, insn), insn.mnem, timg.name_at(tgt.sec, tgt.off)))
            return
        if name.startswith("__SCT__"):
            self.static_call(ctx, insn, tgt, repl)
            return
        m = re.match(r"__x86_indirect_(?:call_|jump_|its_)?thunk_(\w+)$", name)
        if m:
            self.indirect.append("%s: %s %s (retpoline; the callee is not known)" % (
                self.where(ctx, insn), insn.mnem, name))
            for v in RETPOLINE_VARIANTS:
                self.follow_name(func, ctx, insn, v.format(m.group(1)), "retpoline variant")
        if name in RUNTIME_THUNKS:
            for v in RUNTIME_THUNKS[name]:
                self.follow_name(func, ctx, insn, v, "return thunk variant")
            return
        f = timg.func_at(tgt.sec, tgt.off)
        if f is None:
            self.notes.append("%s: %s to %s: no function there" % (
                self.where(ctx, insn), insn.mnem, self.target_name(tgt)))
            return
        self.branch_to(func, ctx, insn, f, insn.is_call(), None)

    def follow_name(self, func, ctx, insn, name, how):
        for img in self.images + ([self.resolver] if self.resolver else []):
            y = img.lookup(name) if img is not None else None
            if y is not None:
                f = img.func_at(y.shndx, y.value)
                if f is not None:
                    self.branch_to(func, ctx, insn, f, True, how)
                return

    def branch_to(self, func, ctx, insn, f, is_call, how):
        if f.key() == func.key():
            return
        if f.name in WINDOW_ENDS:
            site = self.where(ctx, insn) if insn is not None else func.name
            self.window_ends.setdefault(
                (site, f.name), "%s: %s %s (%s)" % (
                    site, "call" if is_call else "jmp", f.name, WINDOW_ENDS[f.name]))
            return
        if self.followable(f):
            self.enqueue(f, func, how or (ctx.alt and "alternative") or "")
        else:
            site = self.where(ctx, insn) if insn is not None else func.name
            self.not_followed.setdefault(
                (site, f.name),
                "%s: %s %s (%s)" % (site, "call" if is_call else "jmp", f.name, f.secname()))

    def static_call(self, ctx, insn, tgt, repl):
        func = ctx.func
        img = tgt.img
        tramp = img.func_at(tgt.sec, tgt.off)
        default = None
        if tramp is not None:
            rel = img.elf.relocs(tgt.sec)
            for ti in self.dis.range(img, tgt.sec, tramp.start, tramp.end, False):
                for p in range(ti.off, ti.end()):
                    if p in rel and ti.is_branch():
                        t = self.resolve(img.target(rel[p], p, ti.end()))
                        if t.img is not None:
                            default = t.img.func_at(t.sec, t.off)
                break
        site = self.where(ctx, insn)
        m = re.match(r"__SCT__tp_func_(\w+)$", tgt.name)
        if m:
            # A tracepoint: __traceiter_X, or the one probe registered (ftrace,
            # perf, BPF, modules' probes): instrumentable .text, called in
            # the tracepoint's instrumentation_begin()/end() region.
            cands = [default] if default is not None else []
            for pat in TRACEPOINT_PROBES:
                y = self.lookup_any(pat.format(m.group(1)))
                if y is not None:
                    f = y[0].func_at(y[1].shndx, y[1].value)
                    if f is not None and all(f.key() != c.key() for c in cands):
                        cands.append(f)
            self.static_calls.append(
                "%s: static call %s (tracepoint %s), targets %s and probes registered at run "
                "time" % (site, tgt.name, m.group(1), ", ".join(
                    "%s (%s)" % (c.name, c.secname()) for c in cands)))
            for c in cands:
                self.branch_to(func, ctx, insn, c, insn.is_call(), "tracepoint static call")
            return
        self.static_calls.append("%s: static call %s, default target %s" % (
            site, tgt.name, default.name if default else "none (ret)"))
        if default is not None:
            self.branch_to(func, ctx, insn, default, insn.is_call(), "static call default")
        self.add_violation((id(func.img), func.sec, insn.off, repl),
                           "%s: static call %s: the targets static_call_update() may set "
                           "at run time are not known to this check" % (site, tgt.name))

    def lookup_any(self, name):
        for img in self.images + ([self.resolver] if self.resolver else []):
            y = img.lookup(name) if img is not None else None
            if y is not None:
                return img, y
        return None

    # ---- report
    def report(self, out, layout_errors, layout_summary, image_desc):
        v = self.verbose
        p = lambda s: print(s, file=out)
        if v:
            p("%s: %s, roots %s (whole functions)" % (NAME, image_desc,
                                                      ", ".join(self.root_names())))
            p("functions walked:")
            for f in self.funcs.values():
                how = self.parent.get(f.key(), (None, ""))[1]
                p("  %-50s %-30s %s" % (f.name, f.secname(), how or ""))
            p("calls not followed (ordinary .text: instrumentation_begin()/end() regions):")
            for s in self.not_followed.values():
                p("  " + s)
            p("jumps into .altinstr_aux (boot-time only): %d" % len(self.aux))
            for s in self.aux:
                p("  " + s)
            if self.dead_orig:
                p("original instructions replaced on every CPU, not checked: %d"
                  % self.dead_orig)
            p("static branches (jump labels): %d sites; both ways lie in the function, so "
              "whole-function disassembly covers them" % self.n_jump_labels)
            if layout_summary:
                p(layout_summary)
        for s in self.notes:
            p("NOTE " + s)
        for s in self.indirect:
            p("INDIRECT " + s)
        for s in self.static_calls:
            p("STATIC_CALL " + s)
        for s in self.window_ends.values():
            p("WINDOW_END " + s)
        for s in self.waivers_used:
            p("WAIVER " + s)
        for s in layout_errors:
            p("LAYOUT " + s)
        for texts in self.violations.values():
            p("VIOLATION " + " / ".join(texts))
        other = len(self.violations) - len(self.operand_violations)
        p("%s: %d functions, %d instructions (%d in alternative replacements), %d memory "
          "operands naming symbols: %d outside the mapped set%s (of the operands %d are "
          "symbol addresses as immediates/lea; also %d %%gs: constant offsets, %d alternative sites, %d calls not "
          "followed, %d window ends, %d indirect, %d static calls, %d waivers used)" % (
              NAME, len(self.funcs), self.n_insns, self.n_alt_insns, self.n_mem + self.n_addr,
              len(self.operand_violations),
              "; %d other failure(s)" % other if other else "",
              self.n_addr, self.n_gs_const, self.alt_sites, len(self.not_followed),
              len(self.window_ends), len(self.indirect), len(self.static_calls), len(self.waivers_used)))

    def root_names(self):
        return [f.name for k, f in self.funcs.items() if self.parent[k][1] == "root"]


# --------------------------------------------------------------------------
# Layout cross-check against the linked vmlinux

def layout_check(img, ranges):
    """Check the name-based classes against the linked vmlinux: every
    symbol of vmlinux.o whose name is unique in both files must lie inside
    asi_map_always()'s ranges in vmlinux if its section is called mapped,
    outside them if called unmapped. (vmlinux is linked again from
    vmlinux.a, not from vmlinux.o, so a section of vmlinux.o need not stay
    in one piece: the check goes symbol by symbol.) Read-only sections of
    no known kind are classed by where most of their symbols lie. Returns
    (errors, summary); sets img.placed_mapped."""
    ocount = collections.Counter(y.name for y in img.elf.syms
                                 if y.name and y.type not in (STT_SECTION, STT_FILE))
    errors = []
    placed = {}
    counts = collections.Counter()
    nsyms = 0
    for sec in img.elf.sections:
        if not sec.flags & SHF_ALLOC or sec.size == 0:
            continue
        mapped, label = section_class(sec.name, sec.flags)
        percpu = sec.name.startswith(".data..percpu")
        votes = collections.Counter()
        bad = []
        for y in img.sec_syms.get(sec.idx, ([], []))[0]:
            if ocount[y.name] != 1 or len(ranges.addr.get(y.name, ())) != 1:
                continue
            a = ranges.addr[y.name][0]
            if percpu and not ranges.percpu_all[0] <= a < ranges.percpu_all[1]:
                bad.append("%s at %#x is not per-CPU" % (y.name, a))
                continue
            want = mapped
            if sec.name == ".data..percpu..first" and y.value >= PAGE:
                want = False
            got = ranges.mapped(a, a + max(y.size, 1), percpu)
            nsyms += 1
            if want is None:
                votes[got] += 1
            elif got != want:
                bad.append("%s at %#x" % (y.name, a))
        if mapped is None:
            if votes:
                placed[sec.idx] = votes.most_common(1)[0][0] is True
                counts["placed"] += 1
                if len(votes) > 1:
                    errors.append("%s (read-only, classed by placement) is split: %s" % (
                        sec.name, dict(votes)))
            continue
        if bad:
            errors.append("%s (%s, called %s): %d symbol(s) %s the ranges asi_map_always() "
                          "maps in vmlinux, e.g. %s" % (
                              sec.name, label, "mapped" if mapped else "unmapped", len(bad),
                              "outside" if mapped else "inside", ", ".join(bad[:3])))
        counts["mapped" if mapped else "unmapped"] += 1
    img.placed_mapped = placed
    summary = ("layout: %d sections called mapped and %d called unmapped checked against "
               "vmlinux (%d symbols); %d read-only sections classed by placement" % (
                   counts["mapped"], counts["unmapped"], nsyms, counts["placed"]))
    return errors, summary


# --------------------------------------------------------------------------
# Self-test

def self_test(args):
    src = os.path.join(TOP, "selftests/entry_window/plant.S")
    outdir = os.path.join(TOP, "out/build/entry_window")
    os.makedirs(outdir, exist_ok=True)
    obj = os.path.join(outdir, "plant.o")
    p = subprocess.run([os.environ.get("CC", "gcc"), "-c", src, "-o", obj],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode:
        print(p.stdout, file=sys.stderr)
        raise CheckError("assembling %s failed" % src)
    expect_v, expect_ok = {}, set()
    for line in open(src):
        m = re.search(r"expect-violation:\s*([a-z_][\w.]*)\s+([a-z_][\w.]*)", line)
        if m:
            expect_v[m.group(1)] = m.group(2)
        m = re.search(r"expect-clean:\s*([a-z_][\w.]*)", line)
        if m:
            expect_ok.add(m.group(1))
    if not expect_v:
        raise CheckError("%s: no expect-violation markers" % src)
    cmd = [sys.executable, os.path.abspath(__file__), "--object", obj, "--root", "plant_root",
           "--list", "-v", "--linux", args.linux, "--objdump", args.objdump]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.stdout
    problems = []
    found = {}
    for line in out.splitlines():
        if not line.startswith("VIOLATION "):
            continue
        m = re.match(r"VIOLATION (\S+?)(?:\+0x[0-9a-f]+)?[: ].*?(?:accesses|takes the "
                     r"address of) (?:%gs:)?(\w+(?:\.\w+)?)", line)
        if not m or m.group(2) not in expect_v:
            problems.append("unexpected: " + line)
            continue
        if m.group(2) in found:
            problems.append("reported twice: " + line)
        found[m.group(2)] = m.group(1)
        if m.group(1) != expect_v[m.group(2)]:
            problems.append("%s reported at %s, planted in %s" % (
                m.group(2), m.group(1), expect_v[m.group(2)]))
    for s in expect_v:
        if s not in found:
            problems.append("planted read of %s (in %s) not reported" % (s, expect_v[s]))
    if p.returncode != 1:
        problems.append("the checker exited with %d on the fixture, not 1" % p.returncode)
    if not re.search(r"^asi/entry_window: \d+ functions, \d+ instructions \(\d+ in alternative "
                     r"replacements\), \d+ memory operands naming symbols: %d outside the "
                     r"mapped set" % len(expect_v), out, re.M):
        problems.append("no summary line with %d outside the mapped set" % len(expect_v))
    clean_seen = set(re.findall(r"^OPERAND .*?: (?:mem|imm|lea) (?:%gs:)?([\w.]+): mapped", out,
                                re.M))
    for s in sorted(expect_ok - clean_seen):
        problems.append("mapped read of %s not resolved to that symbol as mapped" % s)
    alt = [ln for ln in out.splitlines() if ln.startswith("VIOLATION") and "plant_bss_secret " in ln
           and "alternative" not in ln]
    if alt:
        problems.append("the replacement's read is not attributed to its alternative")
    if not any("X86_FEATURE_MSR_SPEC_CTRL" in ln for ln in out.splitlines()
               if "plant_bss_secret " in ln) and os.path.isdir(args.linux or ""):
        problems.append("the replacement's CPU feature is not named")
    if not re.search(r"^  plant_root\+0x[0-9a-f]+: call plant_text_helper \(\.text\)", out, re.M):
        problems.append("the call into .text is not listed as not followed")
    if args.verbose or problems:
        sys.stdout.write(out)
    for s in problems:
        print("SELFTEST " + s)
    n = len(expect_v)
    k = len([s for s in expect_v if s in found])
    if problems:
        print("asi/entry_window_selftest: FAILED, planted reads detected (%d of %d), %d "
              "problem(s)" % (k, n, len(problems)))
        return 1
    print("asi/entry_window_selftest: planted reads detected (%d of %d)" % (k, n))
    return 0


# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(TOP, "out/build/default"),
                    help="kernel build directory with vmlinux.o and vmlinux "
                         "(default: out/build/default)")
    ap.add_argument("--object", metavar="FILE",
                    help="check one relocatable object instead (no layout cross-check)")
    ap.add_argument("--module", metavar="KO", action="append", default=[],
                    help="check a module (repeatable); undefined symbols are resolved "
                         "in the build directory's vmlinux.o")
    ap.add_argument("--root", action="append", default=[],
                    help="root function (repeatable; default: %s)" % ", ".join(ROOTS))
    ap.add_argument("--linux", default=os.path.join(TOP, "out/linux"),
                    help="kernel source, for CPU feature names (default: out/linux)")
    ap.add_argument("--objdump", default=os.environ.get("OBJDUMP", "objdump"))
    ap.add_argument("--list", action="store_true",
                    help="list every operand naming a symbol with its class")
    ap.add_argument("--self-test", action="store_true",
                    help="run the checker on selftests/entry_window/plant.S: it must "
                         "report exactly the planted reads")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="list the functions walked, the calls not followed, the layout check")
    args = ap.parse_args()
    try:
        if args.self_test:
            return self_test(args)
        features = feature_names(args.linux)
        dis = Disasm(args.objdump)
        ranges = None
        layout_errors, layout_summary = [], None
        resolver = None
        if args.object:
            images = [Image(args.object, "object")]
            desc = args.object
            roots = args.root or ROOTS
        else:
            vo = os.path.join(args.build, "vmlinux.o")
            vl = os.path.join(args.build, "vmlinux")
            for f in (vo, vl):
                if not os.path.exists(f):
                    raise CheckError("%s missing (build the kernel first: make kernel)" % f)
            kimg = Image(vo, "vmlinux.o")
            ranges = Ranges(Elf(vl))
            layout_errors, layout_summary = layout_check(kimg, ranges)
            if args.module:
                images = [Image(m, "module") for m in args.module]
                resolver = kimg
                desc = ", ".join(args.module) + " (undefined symbols from %s)" % vo
                roots = args.root or [r for r in ROOTS
                                      if any(i.lookup(r) for i in images)]
            else:
                images = [kimg]
                desc = vo
                roots = args.root or ROOTS
        chk = Checker(images, dis, features, ranges, resolver, args.verbose)
        chk.run(roots)
        if args.list:
            for o in chk.operands:
                print("OPERAND %s: %s %s: %s (%s)" % (o[0], o[1], o[2],
                                                     "mapped" if o[3] else "NOT MAPPED", o[4]))
        chk.report(sys.stdout, layout_errors, layout_summary, desc)
        return 1 if chk.violations or layout_errors else 0
    except CheckError as e:
        print("%s: cannot run: %s" % (NAME, e), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
