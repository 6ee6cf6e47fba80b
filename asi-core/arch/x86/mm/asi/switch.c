// SPDX-License-Identifier: GPL-2.0
/*
 * x86 Address Space Isolation (ASI): the switch. Everything here runs on a
 * restricted table, or on the way to or from one, and is noinstr: per-CPU
 * state, PCIDs, asi_enter() and __asi_exit(), the fallback of a fault on a
 * restricted table and its recording, the decision to flush and the hooks
 * the TLB flush code calls. What it may touch there is the always-mapped
 * set (domain.c) and the SMT protocol's per-CPU state (smt.h).
 */
#define pr_fmt(fmt) "ASI: " fmt

#include <linux/asi.h>
#include <linux/init.h>
#include <linux/mm.h>
#include <asm/msr.h>
#include <asm/nospec-branch.h>
#include <asm/processor.h>
#include <asm/special_insns.h>
#include <asm/tlbflush.h>
#include <kunit/visibility.h>
#include <trace/events/asi.h>
#include <trace/events/asi_smt.h>

#include "internal.h"
#include "smt.h"

/*
 * need_flush starts true: before its first entry a CPU has run only on the
 * full table, so the first entry must not skip the flush.
 */
DEFINE_PER_CPU_ASI(struct asi_cpu_state, asi_cpu) = { .need_flush = true };
EXPORT_PER_CPU_SYMBOL_GPL(asi_cpu);

/*
 * The switch and the fault hook are noinstr, and may run where RCU does not
 * watch (a VM-entry on a nohz_full CPU, the NMI entry before nmi_enter()):
 * an event is emitted only where RCU watches, else counted in
 * asi_cpu.trace_missed. Each costs a not-taken static branch while its
 * tracepoint is off. The test is inside the instrumentation region too:
 * trace_*_enabled() is plain inline, and out of line in some
 * configurations (the debug one).
 */
#define asi_trace(event, ...)						\
	do {								\
		instrumentation_begin();				\
		if (trace_##event##_enabled()) {			\
			if (rcu_is_watching())				\
				trace_##event(__VA_ARGS__);		\
			else						\
				this_cpu_inc(asi_cpu.trace_missed);	\
		}							\
		instrumentation_end();					\
	} while (0)

/*
 * PCIDs (see asm/asi.h). A domain's table is loaded under the ASI PCID of
 * the dynamic ASID slot of the mm this CPU runs: the slot's kernel PCID
 * (slot + 1, as kern_pcid() in tlb.c has it) with ASI_PCID_BIT set. PTI's
 * user PCIDs set bit 11, so the three kinds never meet. The restricted
 * table shares the mm's user half, so its PCID belongs to the slot as the
 * kernel PCID does: the TLB flush code marks it stale whenever it flushes
 * the slot (asi_invalidate_pcid()) or a kernel range (all slots).
 */
static_assert(ASI_NR_PCIDS == TLB_NR_DYN_ASIDS);
static_assert(ASI_PCID_BIT < X86_CR3_PTI_PCID_USER_BIT);
static_assert(BIT(ASI_PCID_BIT) > TLB_NR_DYN_ASIDS);

/*
 * The CR3 value that loads @table (CR3 address bits) in place of @cr3, the
 * full table's: under the ASI PCID of ASID slot @asid if @pcid, else with
 * @cr3's low bits (PWT and PCD: 0). LAM bits are kept. Never CR3_NOFLUSH.
 */
static __always_inline unsigned long asi_table_cr3(unsigned long table, unsigned long cr3,
						   bool pcid, u16 asid)
{
	if (!pcid)
		return table | (cr3 & ~CR3_ADDR_MASK);
	return table | (cr3 & ~(CR3_ADDR_MASK | CR3_PCID_MASK)) |
	       ((asid + 1) | BIT(ASI_PCID_BIT));
}

/*
 * Whether loading the table of the domain of generation @gen under the ASI
 * PCID of slot @asid must flush that PCID: it held another domain's
 * translations, or the TLB flush code marked it stale since. Notes that it
 * holds @gen's from now on. Interrupts off; an NMI may mark PCIDs stale at
 * any point (a flush from an NMI handler): the marks are taken with one
 * exchange and the other slots' given back, so none is lost, and one set
 * for @asid after the exchange is seen by the caller's check after its
 * CR3 write.
 */
static __always_inline bool asi_pcid_claim(u16 asid, u64 gen)
{
	unsigned long stale = this_cpu_xchg(asi_cpu.pcid_stale, 0);
	bool flush = (stale & BIT(asid)) || this_cpu_read(asi_cpu.pcid_owner[asid]) != gen;

	if (stale & ~BIT(asid))
		this_cpu_or(asi_cpu.pcid_stale, stale & ~BIT(asid));
	this_cpu_write(asi_cpu.pcid_owner[asid], gen);
	return flush;
}

/* The ASID slot of a restricted table's CR3 value (PCIDs on). */
static __always_inline u16 asi_cr3_slot(unsigned long cr3)
{
	return (cr3 & CR3_PCID_MASK & ~BIT(ASI_PCID_BIT)) - 1;
}

/*
 * Load the restricted table of @asi (CR3 value @cr3, ASID slot @slot or -1
 * without PCIDs), keeping the ASI PCID's translations when they are still
 * good. A flush mark that an NMI set for the slot before the write, and so
 * missed, is seen right after it: then the PCID is flushed after all.
 */
static __always_inline void asi_load_table(struct asi *asi, unsigned long cr3, int slot)
{
	if (slot < 0) {
		native_write_cr3(cr3);
		return;
	}
	if (asi_pcid_claim(slot, READ_ONCE(asi->gen))) {
		this_cpu_inc(asi_cpu.pcid_flushes);
		native_write_cr3(cr3);
		return;
	}
	this_cpu_inc(asi_cpu.pcid_kept);
	native_write_cr3(cr3 | CR3_NOFLUSH);
	if (unlikely(this_cpu_read(asi_cpu.pcid_stale) & BIT(slot))) {
		asi_pcid_claim(slot, READ_ONCE(asi->gen));
		native_write_cr3(cr3);
	}
}

/* The ASID slot whose ASI PCID this CPU uses, or -1 without PCIDs. */
static __always_inline int asi_pcid_slot(void)
{
	u16 asid;

	if (!cpu_feature_enabled(X86_FEATURE_PCID))
		return -1;
	asid = this_cpu_read(cpu_tlbstate.loaded_mm_asid);
	return asid < ASI_NR_PCIDS ? asid : -1;
}

/*
 * Back to the full table: with CR3_NOFLUSH, unless a TLB flush ran while
 * this CPU was in a domain (and so perhaps on the ASI PCID instead of the
 * full table's), or the CPU has no PCIDs. A flush that an NMI runs on the
 * restricted table between the test and the write is seen after it.
 */
static __always_inline void asi_load_full(void)
{
	unsigned long cr3 = this_cpu_read(asi_cpu.full_cr3);

	if (!cpu_feature_enabled(X86_FEATURE_PCID) ||
	    this_cpu_xchg(asi_cpu.full_stale, false)) {
		native_write_cr3(cr3);
		return;
	}
	native_write_cr3(cr3 | CR3_NOFLUSH);
	if (unlikely(this_cpu_xchg(asi_cpu.full_stale, false)))
		native_write_cr3(cr3);
}

/*
 * Mark the ASI PCIDs of the slots in @slots stale on this CPU; and the full
 * table's PCID, if the flush that calls this ran while the CPU was in a
 * domain (it may have hit the ASI PCID rather than the full table's).
 */
static void asi_mark_stale(unsigned long slots)
{
	this_cpu_or(asi_cpu.pcid_stale, slots);
	if (this_cpu_read(asi_cpu.curr))
		this_cpu_write(asi_cpu.full_stale, true);
}

/**
 * __asi_invalidate_pcid() - the TLB flush code flushed an ASID slot's mm
 * @asid: the dynamic ASID slot
 *
 * Called through asi_invalidate_pcid() wherever the TLB flush code flushes
 * the kernel PCID of @asid, or a page of it, on this CPU: the slot's ASI
 * PCID caches translations of the same user half, and is flushed at its
 * next load. A flush run while this CPU is in a domain may have hit the
 * ASI PCID rather than the full table's: the switch back flushes that.
 */
void __asi_invalidate_pcid(u16 asid)
{
	if (WARN_ON_ONCE(asid >= ASI_NR_PCIDS))
		asid = 0;
	asi_mark_stale(BIT(asid));
}

/**
 * __asi_invalidate_pcid_all() - the TLB flush code flushed a kernel range
 *
 * Called through asi_invalidate_pcid_all() when a kernel range is flushed
 * on this CPU: every ASI PCID may cache it, and each is flushed at its next
 * load; the full table's too, as above.
 */
void __asi_invalidate_pcid_all(void)
{
	asi_mark_stale(BIT(ASI_NR_PCIDS) - 1);
}

#if IS_ENABLED(CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_KUNIT_TEST)
/* For the KUnit suite: the CR3 value, and the claim on this CPU's state. */
unsigned long asi_test_table_cr3(unsigned long table, unsigned long cr3, bool pcid, u16 asid)
{
	return asi_table_cr3(table, cr3, pcid, asid);
}
EXPORT_SYMBOL_IF_KUNIT(asi_test_table_cr3);

bool asi_test_pcid_claim(u16 asid, u64 gen)
{
	return asi_pcid_claim(asid, gen);
}
EXPORT_SYMBOL_IF_KUNIT(asi_test_pcid_claim);
#endif

/*
 * The switch runs with interrupts off: an interrupt, and a migration,
 * between its read of the per-CPU state and its CR3 write would load
 * another CPU's full_cr3, another task's page table. The debug
 * configurations check it: with the flag, not lockdep's state, which no
 * restricted table maps.
 */
static __always_inline void asi_assert_irqs_off(void)
{
	if (IS_ENABLED(CONFIG_PROVE_LOCKING) || IS_ENABLED(CONFIG_DEBUG_ENTRY))
		WARN_ON_ONCE(!raw_irqs_disabled());
}

/**
 * asi_enter() - switch this CPU to a domain's restricted table
 * @asi: the domain
 *
 * From idle, or from relaxed on the same domain (after a fallback fault):
 * CR3 is loaded with @asi's table. Without PCIDs that flushes the TLB.
 * With PCIDs the table is loaded under the ASI PCID of the mm's ASID slot,
 * and keeps its translations unless another domain used that PCID last or
 * the TLB flush code marked it stale. A no-op if the CPU already runs on
 * @asi's table. Entering a second domain without leaving the first is a
 * bug: the first is left. Interrupts must be off (the state belongs to
 * this CPU until asi_exit()).
 */
noinstr void asi_enter(struct asi *asi)
{
	struct asi *curr;
	unsigned long cr3;
	int slot;

	asi_assert_irqs_off();
	curr = this_cpu_read(asi_cpu.curr);
	cr3 = __native_read_cr3();
	if (curr == asi && cr3 == this_cpu_read(asi_cpu.curr_cr3)) {
		/*
		 * On the table already (VMX's VM-exit loads it from HOST_CR3):
		 * flush its PCID if it was marked stale since it was loaded.
		 */
		slot = asi_cr3_slot(cr3);
		if (cpu_feature_enabled(X86_FEATURE_PCID) && slot < ASI_NR_PCIDS &&
		    (this_cpu_read(asi_cpu.pcid_stale) & BIT(slot)))
			asi_load_table(asi, cr3, slot);
		asi_smt_on_table(asi);
		return;
	}
	if (unlikely(curr && curr != asi)) {
		__asi_exit(ASI_EXIT_OWNER);
		curr = NULL;
		cr3 = __native_read_cr3();
	}

	slot = asi_pcid_slot();
	if (curr != asi) {
		/* Name the domain before CR3 holds its table. */
		this_cpu_write(asi_cpu.full_cr3, cr3);
		this_cpu_write(asi_cpu.curr_cr3,
			       asi_table_cr3(asi->cr3, cr3, slot >= 0, slot));
		this_cpu_write(asi_cpu.curr_id, asi->id);
		this_cpu_write(asi_cpu.retry_ip, 0);
		barrier();
		this_cpu_write(asi_cpu.curr, asi);
		/*
		 * The write of curr before the read of the generation:
		 * asi_flush_domain() orders them the other way, so that
		 * either it sees this CPU in the domain or this load sees
		 * the generation it set.
		 */
		smp_mb();
	} else {
		/*
		 * Relaxed: the CPU ran on the full table since it fell back,
		 * or since a VM-exit loaded the full table (VMX's HOST_CR3,
		 * when an NMI fell back during the flush decision), and the
		 * fallback's flush indication may have been taken already.
		 */
		this_cpu_write(asi_cpu.need_flush, true);
	}
	this_cpu_inc(asi_cpu.enters);
	asi_trace(asi_enter, asi->id);
	asi_load_table(asi, this_cpu_read(asi_cpu.curr_cr3), slot);
	/* Only once on the table: the sibling's gate reads it. */
	barrier();
	asi_smt_on_table(asi);
}
EXPORT_SYMBOL_GPL(asi_enter);

/**
 * __asi_exit() - leave the domain, back to the full table
 * @reason: why, for the counters
 *
 * Called through asi_exit(), which is a static branch with ASI off. A
 * no-op when no domain is entered. Interrupts must be off.
 */
noinstr void __asi_exit(enum asi_exit_reason reason)
{
	unsigned long fallbacks;

	asi_assert_irqs_off();
	if (!this_cpu_read(asi_cpu.curr)) {
		/* The interrupt entry of a CPU that was halted in idle. */
		if (static_branch_unlikely(&asi_smt_key))
			__asi_smt_wake();
		return;
	}
	/*
	 * An NMI between the CR3 test and the write may fall back, and so
	 * count this very switch as a fallback: then it is not counted
	 * again here. Past the write, an NMI finds the full table.
	 */
	fallbacks = this_cpu_read(asi_cpu.fallbacks);
	barrier();
	if (__native_read_cr3() == this_cpu_read(asi_cpu.curr_cr3)) {
		asi_smt_leave();
		asi_load_full();
		asi_smt_trace_kick();
		this_cpu_write(asi_cpu.need_flush, true);
		if (reason < ASI_EXIT_NR &&
		    this_cpu_read(asi_cpu.fallbacks) == fallbacks) {
			this_cpu_inc(asi_cpu.exits[reason]);
			asi_trace(asi_exit, this_cpu_read(asi_cpu.curr_id), reason);
		}
	} else if (static_branch_unlikely(&asi_smt_key) &&
		   READ_ONCE(raw_cpu_ptr(&asi_smt)->state) != ASI_SMT_FULL) {
		/* Relaxed, its state not said yet (VMX's HOST_CR3 load). */
		asi_smt_leave();
		asi_smt_trace_kick();
	}
	/* Forget the domain only once CR3 is off its table. */
	barrier();
	this_cpu_write(asi_cpu.curr, NULL);
	/*
	 * And the CR3 values: every domain maps every CPU's asi_cpu, and
	 * full_cr3 names another task's page table, a target for reads by
	 * physical address (L1TF). Only CPUs in a domain hold them.
	 */
	barrier();
	this_cpu_write(asi_cpu.full_cr3, 0);
	this_cpu_write(asi_cpu.curr_cr3, 0);
}
EXPORT_SYMBOL_GPL(__asi_exit);

/* Every domain's fallback faults, also those of domains gone since. */
struct asi_fault_log asi_all_faults;

/*
 * Count a fallback fault in @log, by ip and address page. Lockless and
 * NMI-safe: a slot is claimed by a cmpxchg of its ip, and a concurrent
 * claim of the same site may, rarely, give it a second slot. Runs on the
 * full table, after the switch.
 */
static __always_inline void asi_log_fault(struct asi_fault_log *log, unsigned long ip,
					  unsigned long address, unsigned long error_code)
{
	unsigned long page = address & PAGE_MASK;
	unsigned int i, slot = (unsigned int)((ip ^ (page >> PAGE_SHIFT)) * 0x9e3779b9u);

	for (i = 0; i < 8; i++) {
		struct asi_fault_entry *e =
			&log->entries[(slot + i) % ASI_FAULT_LOG_SIZE];
		unsigned long old = READ_ONCE(e->ip);

		if (!old) {
			old = raw_cmpxchg(&e->ip, 0, ip);
			if (!old) {
				WRITE_ONCE(e->address, address);
				WRITE_ONCE(e->error_code, error_code);
				raw_atomic_long_inc(&e->count);
				return;
			}
		}
		if (old == ip && (READ_ONCE(e->address) & PAGE_MASK) == page) {
			raw_atomic_long_inc(&e->count);
			return;
		}
	}
	raw_atomic_long_inc(&log->dropped);
}

/**
 * __asi_handle_fault() - the fault-driven fallback
 * @regs: the faulting context
 * @error_code: the page-fault error code
 * @address: the faulting address
 *
 * Called first thing in the page-fault handler, through asi_handle_fault(),
 * before anything that the restricted table may not map. A kernel-mode
 * fault taken on a restricted table switches to the full table and is
 * recorded; the faulting access is then retried. Touches only the per-CPU
 * ASI state and the stack.
 *
 * Return: true if the fault was handled so and must be retried.
 */
noinstr bool __asi_handle_fault(struct pt_regs *regs, unsigned long error_code,
				unsigned long address)
{
	struct asi *curr = this_cpu_read(asi_cpu.curr);

	if (!curr || user_mode(regs))
		return false;
	if (__native_read_cr3() != this_cpu_read(asi_cpu.curr_cr3)) {
		/*
		 * Relaxed: the full table took this fault. But an NMI (or
		 * #DB, #MC) may have fallen back, and switched CR3, between
		 * this fault on the restricted table and this handler: retry
		 * once. The same fault again is a real one, as without ASI.
		 */
		if (this_cpu_read(asi_cpu.retry_ip) == regs->ip &&
		    this_cpu_read(asi_cpu.retry_address) == address)
			return false;
		this_cpu_write(asi_cpu.retry_ip, regs->ip);
		this_cpu_write(asi_cpu.retry_address, address);
		this_cpu_inc(asi_cpu.relaxed_retries);
		return true;
	}

	asi_smt_leave();
	/*
	 * An NMI that fell back while asi_smt_leave() waited counted this
	 * very switch: retry on the full table it loaded, uncounted.
	 */
	if (static_branch_unlikely(&asi_smt_key) &&
	    __native_read_cr3() != this_cpu_read(asi_cpu.curr_cr3)) {
		asi_smt_trace_kick();
		return true;
	}
	asi_load_full();
	asi_smt_trace_kick();
	this_cpu_write(asi_cpu.need_flush, true);
	this_cpu_inc(asi_cpu.fallbacks);
	if (preempt_count() & (NMI_MASK | HARDIRQ_MASK))
		this_cpu_inc(asi_cpu.fallbacks_irq);
	/* On the full table now: the logs need not be mapped. */
	asi_log_fault(curr->faults, regs->ip, address, error_code);
	asi_log_fault(&asi_all_faults, regs->ip, address, error_code);
	this_cpu_write(asi_cpu.last_fault.address, address);
	this_cpu_write(asi_cpu.last_fault.ip, regs->ip);
	this_cpu_write(asi_cpu.last_fault.error_code, error_code);
	this_cpu_write(asi_cpu.last_fault.domain, this_cpu_read(asi_cpu.curr_id));
	asi_trace(asi_fault, this_cpu_read(asi_cpu.curr_id), address, regs->ip,
		  error_code, preempt_count() & (NMI_MASK | HARDIRQ_MASK));
	return true;
}

/**
 * asi_flush_caches() - flush what the full table may have left in the caches
 *
 * For the owner of a domain, before untrusted code runs on this CPU: the
 * L1D where the CPU is affected by L1TF and can flush it, else the CPU
 * buffers (VERW), which every CPU executes. Static branches only: this
 * runs on the restricted table, which does not map boot_cpu_data, and in
 * NMIs (__asi_nmi_exit()).
 */
noinstr void asi_flush_caches(void)
{
	if (static_cpu_has_bug(X86_BUG_L1TF) && static_cpu_has(X86_FEATURE_FLUSH_L1D))
		native_wrmsrl(MSR_IA32_FLUSH_CMD, L1D_FLUSH);
	else
		x86_clear_cpu_buffers();
}
EXPORT_SYMBOL_GPL(asi_flush_caches);

/*
 * The CPU can turn VERW's fill-buffer clearing off (FB_CLEAR_CTRL), read at
 * boot: a late microcode load that adds it is not seen here.
 */
DEFINE_STATIC_KEY_FALSE_RO(asi_fb_clear_ctrl);

/**
 * __asi_nmi_exit() - flush after an NMI that fell back in a VM-entry window
 *
 * Last in exc_nmi(), through asi_nmi_exit(), on a CPU
 * between its owner's flush decision and the return of the VM-entry code
 * (see asi_entry_window()). The guest about to run would meet what the
 * NMI's handlers brought into the caches, if they used the full table:
 * the flush indication is set again (the decision cleared it, so this
 * NMI's handlers, or a nested NMI's, fell back), or the CPU is on the full
 * table already (an NMI fell back before the decision took the
 * indication, and the handlers since read the full table's data without a
 * fault). Flush then, after the last of the NMI's own accesses. The
 * indication stays as it is: the guest's exit is handled on the table the
 * CPU is on, and the next entry flushes if that was the full one.
 *
 * KVM may have turned VERW's fill-buffer clearing off for the guest
 * already (FB_CLEAR_DIS, on Intel CPUs not affected by MDS or TAA): it is
 * turned on for this flush and off again.
 *
 * Also flushes, needlessly, for an NMI landing between the window's
 * opening and the decision after an exit that had fallen back, or between
 * VM-exit and the window's end, and when the SMT sibling set the
 * indication: rare, and never wrong.
 */
noinstr void __asi_nmi_exit(void)
{
	u64 opt = 0;

	if (!this_cpu_read(asi_cpu.need_flush) &&
	    __native_read_cr3() == this_cpu_read(asi_cpu.curr_cr3))
		return;
	if (static_branch_unlikely(&asi_fb_clear_ctrl)) {
		opt = __rdmsr(MSR_IA32_MCU_OPT_CTRL);
		if (opt & FB_CLEAR_DIS)
			native_wrmsrl(MSR_IA32_MCU_OPT_CTRL, opt & ~FB_CLEAR_DIS);
	}
	asi_flush_caches();
	if (opt & FB_CLEAR_DIS)
		native_wrmsrl(MSR_IA32_MCU_OPT_CTRL, opt);
	this_cpu_inc(asi_cpu.nmi_flushes);
}

/**
 * asi_need_flush() - did this CPU use the full table since the last call?
 *
 * For the domain's owner, right before it runs untrusted code on the
 * restricted table: a flush of what the full table may have brought into
 * the caches is needed only if so. Clears the indication.
 *
 * Return: true if this CPU left a restricted table since the last call.
 */
noinstr bool asi_need_flush(void)
{
	/*
	 * One instruction: an NMI's fallback cannot slip in between. Locked
	 * (xchg), not this_cpu_xchg(): the SMT sibling writes it too.
	 */
	return arch_xchg(raw_cpu_ptr(&asi_cpu.need_flush), false);
}
EXPORT_SYMBOL_GPL(asi_need_flush);
