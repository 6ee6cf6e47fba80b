/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The SMT sibling protocol's per-CPU state and the parts of it that the
 * switch (switch.c) runs on restricted tables, inlined there; the rest of
 * the protocol is in smt.c.
 */
#ifndef _ARCH_X86_MM_ASI_SMT_H
#define _ARCH_X86_MM_ASI_SMT_H

#include <linux/asi.h>
#include <asm/apic.h>
#include <asm/irq_vectors.h>
#include <asm/msr.h>
#include <asm/tsc.h>
#include <trace/events/asi_smt.h>

/*
 * SMT siblings (see asm/asi.h, and "SMT" in Documentation/arch/x86/asi.rst).
 *
 * Each CPU publishes what it may bring into its core's caches, @state:
 * ASI_SMT_FULL (the full table, or not known), ASI_SMT_QUIESCENT (halted
 * in idle: nothing), or the domain whose table it runs on; and @guest, the
 * domain whose guest it runs or is about to run. The rule: while a CPU's
 * @guest is D, its sibling's @state is D or quiescent, or the sibling
 * waits for it and touches nothing but this structure.
 *
 * Each side is a store, a full barrier and a load of the other side's
 * variable, so that at least one of the two sees the other:
 *
 *  - the gate (asi_smt_guest_enter()) sets @guest, then reads the
 *    sibling's @state: unless it is D or quiescent, the entry is
 *    cancelled;
 *  - a CPU about to run on anything else (asi_smt_leave()) sets @state,
 *    then reads the sibling's @guest: if set, it kicks the sibling (an
 *    IPI: a guest exits on a host interrupt) and spins until the
 *    sibling's @guest is clear again.
 *
 * @guest stays set from the gate until KVM has traced the exit: the
 * entry and exit code around the guest may fall back and so leave in turn.
 * Two CPUs that each wait for the other would wait forever: of two waiting
 * CPUs that both hold @guest, the lower-numbered one goes on (the other
 * still waits, touching nothing), and asi_smt_guest_check() lets a CPU
 * enter its guest beside a sibling that waits for it.
 *
 * Every CPU's structure is in ASI's per-CPU section, which every domain
 * maps, and the kick writes the local APIC directly (the xAPIC page is in
 * the always-mapped set): nothing here can fall back.
 */
#define ASI_SMT_FULL		0UL
#define ASI_SMT_QUIESCENT	1UL

/**
 * struct asi_smt - a CPU's side of the SMT protocol (per-CPU, always mapped)
 * @state: ASI_SMT_FULL, ASI_SMT_QUIESCENT or the domain of the CPU's table
 * @guest: the domain whose guest the CPU runs or is about to, or NULL
 * @waiting: nesting count of asi_smt_leave()'s wait (an NMI may nest)
 * @kicked: the sibling kicked this CPU out of its guest
 * @sibling: the other CPU of the core, NULL while it is offline
 * @sibling_flush: the sibling's asi_cpu.need_flush
 * @cpu: this CPU
 * @apicid: this CPU's APIC ID
 * @sibling_apicid: the sibling's
 * @x2apic: the local APIC is in x2APIC mode
 * @timeout: TSC cycles after which a wait gives up (with a count)
 * @gate_spin: TSC cycles the gate waits for a sibling on the full table
 * @win_start: TSC at the first VM-entry of the current run (tracing only)
 * @win_end: TSC at the last VM-exit (tracing only)
 * @self_kicked: asi_smt_guest_check() made this VM-entry exit at once
 * @immediate: such VM-entries in the current run (tracing only)
 * @kick_pending: a kick to trace once on the full table: 1 + the wait
 * @kicks: kicks sent to the sibling
 * @waits: waits for the sibling to leave guest mode
 * @wait_cycles: TSC cycles spent in them
 * @timeouts: waits that gave up
 * @proceeds: waits ended because both CPUs waited (this is the lower)
 * @refusals: VM-entries the gate refused
 * @self_kicks: VM-entries made to exit at once (asi_smt_guest_check())
 */
struct asi_smt {
	unsigned long state;
	struct asi *guest;
	int waiting;
	bool kicked;
	struct asi_smt *sibling;
	bool *sibling_flush;
	unsigned int cpu;
	u32 apicid;
	u32 sibling_apicid;
	bool x2apic;
	u64 timeout;
	u64 gate_spin;
	u64 win_start;
	u64 win_end;
	bool self_kicked;
	unsigned int immediate;
	u64 kick_pending;
	unsigned long kicks;
	unsigned long waits;
	unsigned long wait_cycles;
	unsigned long timeouts;
	unsigned long proceeds;
	unsigned long refusals;
	unsigned long self_kicks;
};

DECLARE_PER_CPU_ASI(struct asi_smt, asi_smt);
void asi_smt_emit_kick(unsigned int sibling, u64 cycles);

/*
 * A fixed IPI to @apicid, as KVM's kick sends it (the reschedule vector: a
 * guest exits on it, the host's handler does nothing harmful). Written
 * here rather than through the APIC driver, which reads data no domain
 * maps. In xAPIC mode the ICR takes two writes: an NMI may land between
 * an interrupted sender's two, so ICR2 is put back.
 */
static __always_inline void asi_smt_ipi(struct asi_smt *me, u32 apicid)
{
	u32 *icr = (u32 *)(APIC_BASE + APIC_ICR);
	u32 *icr2 = (u32 *)(APIC_BASE + APIC_ICR2);
	u32 old;

	if (me->x2apic) {
		/* As x2apic_send_IPI(): x2APIC MSR writes do not serialize. */
		alternative("mfence; lfence", "", ALT_NOT(X86_FEATURE_APIC_MSRS_FENCE));
		native_wrmsrl(APIC_BASE_MSR + (APIC_ICR >> 4),
			      (u64)apicid << 32 | APIC_DEST_PHYSICAL | APIC_DM_FIXED |
			      RESCHEDULE_VECTOR);
		return;
	}
	while (READ_ONCE(*icr) & APIC_ICR_BUSY)
		cpu_relax();
	old = READ_ONCE(*icr2);
	WRITE_ONCE(*icr2, SET_XAPIC_DEST_FIELD(apicid));
	WRITE_ONCE(*icr, APIC_DEST_PHYSICAL | APIC_DM_FIXED | RESCHEDULE_VECTOR);
	while (READ_ONCE(*icr) & APIC_ICR_BUSY)
		cpu_relax();
	WRITE_ONCE(*icr2, old);
}

/*
 * After a self-kick: wait (bounded) until the IPI is pending in the IRR, so
 * that the VM-entry finds it and exits before the guest's first
 * instruction. The ICR write does not serialize, and delivery takes time.
 */
static __always_inline void asi_smt_wait_pending(struct asi_smt *me)
{
	u32 reg = APIC_IRR + 0x10 * (RESCHEDULE_VECTOR / 32);
	u32 bit = BIT(RESCHEDULE_VECTOR % 32);
	u64 t0 = rdtsc();
	u32 irr;

	for (;;) {
		if (me->x2apic)
			irr = __rdmsr(APIC_BASE_MSR + (reg >> 4));
		else
			irr = READ_ONCE(*(u32 *)(APIC_BASE + reg));
		if ((irr & bit) || rdtsc() - t0 > me->timeout)
			return;
		cpu_relax();
	}
}

/*
 * This CPU is about to bring what no domain of its sibling's guest may
 * see into the core's caches: it runs on the full table from now on. If
 * the sibling runs a guest, kick it out of guest mode and wait until it is
 * out. Noinstr, IRQs off, before anything the restricted table lacks.
 */
static __always_inline void asi_smt_leave(void)
{
	struct asi_smt *me, *sib;
	u64 t0, t;

	if (!static_branch_unlikely(&asi_smt_key))
		return;
	me = raw_cpu_ptr(&asi_smt);
	WRITE_ONCE(me->state, ASI_SMT_FULL);
	sib = READ_ONCE(me->sibling);
	if (!sib)
		return;
	/* The state before the sibling's guest mark: see the gate. */
	smp_mb();
	/* What this CPU brings in, the sibling's next VM-entry flushes. */
	WRITE_ONCE(*me->sibling_flush, true);
	if (!READ_ONCE(sib->guest))
		return;
	WRITE_ONCE(sib->kicked, true);
	asi_smt_ipi(me, me->sibling_apicid);
	me->kicks++;
	WRITE_ONCE(me->waiting, me->waiting + 1);
	/* Waiting, before the sibling's waiting is read in the loop. */
	smp_mb();
	t0 = rdtsc();
	while (READ_ONCE(sib->guest)) {
		if (READ_ONCE(me->guest) && READ_ONCE(sib->waiting) && me->cpu < sib->cpu) {
			me->proceeds++;
			break;
		}
		if (rdtsc() - t0 > me->timeout) {
			me->timeouts++;
			break;
		}
		cpu_relax();
	}
	t = rdtsc() - t0;
	me->wait_cycles += t;
	me->waits++;
	WRITE_ONCE(me->waiting, me->waiting - 1);
	/* For the tracepoint, once on the full table (asi_smt_trace_kick()). */
	me->kick_pending = t + 1;
}

/* On the full table now: trace the kick of the asi_smt_leave() just done. */
static __always_inline void asi_smt_trace_kick(void)
{
	struct asi_smt *me;
	u64 t;

	if (!static_branch_unlikely(&asi_smt_key))
		return;
	me = raw_cpu_ptr(&asi_smt);
	t = me->kick_pending;
	if (!t)
		return;
	me->kick_pending = 0;
	instrumentation_begin();
	if (trace_asi_smt_kick_enabled())
		asi_smt_emit_kick(me->sibling ? me->sibling->cpu : 0, t - 1);
	instrumentation_end();
}

/*
 * Back on domain @asi's table: the sibling may run @asi's guests beside.
 * What this CPU brought in since it left, the sibling's next VM-entry
 * flushes: marked before the state, so that a gate that reads the state
 * then finds the mark (the mark of asi_smt_leave() may have been used up
 * while it waited). An NMI that fell back between the table's load and
 * the store would leave a state that CR3 belies: look again.
 */
static __always_inline void asi_smt_on_table(struct asi *asi)
{
	struct asi_smt *me;

	if (!static_branch_unlikely(&asi_smt_key))
		return;
	me = raw_cpu_ptr(&asi_smt);
	if (READ_ONCE(me->state) == (unsigned long)asi)
		return;
	if (READ_ONCE(me->sibling))
		WRITE_ONCE(*me->sibling_flush, true);
	WRITE_ONCE(me->state, (unsigned long)asi);
	barrier();
	if (__native_read_cr3() != this_cpu_read(asi_cpu.curr_cr3)) {
		asi_smt_leave();
		asi_smt_trace_kick();
	}
}

#endif /* _ARCH_X86_MM_ASI_SMT_H */
