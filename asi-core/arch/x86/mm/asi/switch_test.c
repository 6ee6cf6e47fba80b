// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for x86 Address Space Isolation: the switch. asi_switch:
 * entering and leaving a domain and the fault-driven fallback, for real on
 * this CPU, entries taken on a restricted table, and the ASI PCIDs. It
 * runs with asi=on and is skipped otherwise. The other suites: asi_test.c.
 */
#include <kunit/test.h>
#include <linux/asi.h>
#include <linux/gfp.h>
#include <linux/irq_work.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <asm/apic.h>
#include <asm/nmi.h>
#include <asm/special_insns.h>
#include <asm/tlbflush.h>

#include "internal.h"
#include "test.h"

/*
 * The switch tests run on the domain created by asi_domain_init(), with
 * this test's stack and one page ("mapped") mapped into it and another
 * page ("unmapped") left out. Between asi_enter() and asi_exit() they
 * touch only the stack, those pages and the per-CPU ASI state.
 */
struct asi_switch_env {
	struct asi *asi;
	unsigned long *mapped;
	unsigned long *unmapped;
	bool mapped_mapped;
	/* The case's stack, held until unmapped: exit runs in another task. */
	struct task_struct *stack_task;
};

static int asi_switch_init(struct kunit *test)
{
	struct asi_switch_env *env;
	int err;

	env = kunit_kzalloc(test, sizeof(*env), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, env);
	err = asi_domain_init(test);
	if (err)
		return err;
	env->asi = test->priv;
	test->priv = env;
	env->mapped = (unsigned long *)__get_free_page(GFP_KERNEL);
	env->unmapped = (unsigned long *)__get_free_page(GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, env->mapped);
	KUNIT_ASSERT_NOT_NULL(test, env->unmapped);
	*env->mapped = 0x1234;
	*env->unmapped = 0x5678;
	KUNIT_ASSERT_EQ(test, asi_map(env->asi, env->mapped, PAGE_SIZE, "kunit"), 0);
	env->mapped_mapped = true;
	KUNIT_ASSERT_EQ(test, asi_map_task(env->asi, current, "kunit stack"), 0);
	env->stack_task = get_task_struct(current);
	return 0;
}

static void asi_switch_exit(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;

	if (!env)
		return;
	if (env->stack_task) {
		asi_unmap_task(env->asi, env->stack_task);
		put_task_struct(env->stack_task);
	}
	if (env->mapped_mapped)
		asi_unmap(env->asi, env->mapped, PAGE_SIZE);
	asi_put(env->asi);
	free_page((unsigned long)env->mapped);
	free_page((unsigned long)env->unmapped);
}

static unsigned long cr3_addr(unsigned long cr3)
{
	return cr3 & CR3_ADDR_MASK;
}

struct asi_probe {
	unsigned long cr3_before, cr3_in, cr3_after_mapped, cr3_after_unmapped, cr3_out;
	unsigned long v_mapped, v_unmapped;
	unsigned long fb_before, fb_after_mapped, fb_after_unmapped;
	unsigned long enters_before, enters_after;
	unsigned long fault_address;
	unsigned int fault_domain;
};

/* Everything between enter and exit stays in registers, stack, ASI state. */
static noinline void asi_probe_run(struct asi_switch_env *env, struct asi_probe *p)
{
	unsigned long *mapped = env->mapped, *unmapped = env->unmapped;
	struct asi *asi = env->asi;
	unsigned long flags;

	local_irq_save(flags);
	p->cr3_before = __native_read_cr3();
	p->fb_before = this_cpu_read(asi_cpu.fallbacks);
	p->enters_before = this_cpu_read(asi_cpu.enters);
	asi_enter(asi);
	asi_enter(asi);		/* idempotent */
	p->cr3_in = __native_read_cr3();
	p->v_mapped = READ_ONCE(*mapped);
	p->fb_after_mapped = this_cpu_read(asi_cpu.fallbacks);
	p->cr3_after_mapped = __native_read_cr3();
	p->v_unmapped = READ_ONCE(*unmapped);
	p->fb_after_unmapped = this_cpu_read(asi_cpu.fallbacks);
	p->cr3_after_unmapped = __native_read_cr3();
	p->enters_after = this_cpu_read(asi_cpu.enters);
	asi_exit(ASI_EXIT_OWNER);
	p->cr3_out = __native_read_cr3();
	/* This CPU's record: the test may migrate once interrupts are on. */
	p->fault_address = this_cpu_read(asi_cpu.last_fault.address);
	p->fault_domain = this_cpu_read(asi_cpu.last_fault.domain);
	local_irq_restore(flags);
}

static void asi_enter_switches_and_fallback_restores(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	struct asi_probe p = {};

	asi_probe_run(env, &p);

	KUNIT_EXPECT_EQ(test, cr3_addr(p.cr3_in), (unsigned long)__pa(env->asi->pgd));
	KUNIT_EXPECT_EQ(test, p.enters_after, p.enters_before + 1);
	/* A mapped page reads fine, on the restricted table, no fault. */
	KUNIT_EXPECT_EQ(test, p.v_mapped, 0x1234UL);
	KUNIT_EXPECT_EQ(test, p.fb_after_mapped, p.fb_before);
	KUNIT_EXPECT_EQ(test, p.cr3_after_mapped, p.cr3_in);
	/* An unmapped one falls back to the full table and reads fine too. */
	KUNIT_EXPECT_EQ(test, p.v_unmapped, 0x5678UL);
	KUNIT_EXPECT_EQ(test, p.fb_after_unmapped, p.fb_before + 1);
	KUNIT_EXPECT_EQ(test, cr3_addr(p.cr3_after_unmapped), cr3_addr(p.cr3_before));
	/* And exit returns to exactly where enter started. */
	KUNIT_EXPECT_EQ(test, cr3_addr(p.cr3_out), cr3_addr(p.cr3_before));
	KUNIT_EXPECT_PTR_EQ(test, asi_current(), NULL);
	KUNIT_EXPECT_EQ(test, p.fault_address, (unsigned long)env->unmapped);
	KUNIT_EXPECT_EQ(test, p.fault_domain, env->asi->id);
}

static noinline long asi_probe_bad_read(struct asi_switch_env *env, void *bad,
					unsigned long *fallbacks)
{
	struct asi *asi = env->asi;
	unsigned long flags, v, before;
	long ret;

	local_irq_save(flags);
	before = this_cpu_read(asi_cpu.fallbacks);
	asi_enter(asi);
	ret = copy_from_kernel_nofault(&v, bad, sizeof(v));
	*fallbacks = this_cpu_read(asi_cpu.fallbacks) - before;
	asi_exit(ASI_EXIT_OWNER);
	local_irq_restore(flags);
	return ret;
}

/*
 * Invariant "Real faults still oops": what the full table does not map either
 * still faults.
 */
static void asi_fault_unmapped_everywhere_still_faults(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	void *area = vmalloc(PAGE_SIZE);
	unsigned long fallbacks;

	KUNIT_ASSERT_NOT_NULL(test, area);
	/* The guard page after a vmalloc area is mapped nowhere. */
	KUNIT_EXPECT_EQ(test, asi_probe_bad_read(env, area + PAGE_SIZE, &fallbacks), -EFAULT);
	KUNIT_EXPECT_EQ(test, fallbacks, 1UL);
	vfree(area);
}

static noinline void asi_probe_flush(struct asi_switch_env *env, bool need[5])
{
	unsigned long *unmapped = env->unmapped;
	struct asi *asi = env->asi;
	unsigned long flags;

	local_irq_save(flags);
	asi_need_flush();
	asi_enter(asi);
	need[0] = asi_need_flush();		/* restricted only: no */
	READ_ONCE(*unmapped);			/* fallback */
	need[1] = asi_need_flush();		/* yes */
	asi_enter(asi);				/* relaxed -> active */
	need[2] = asi_need_flush();		/* yes: ran on the full table */
	need[3] = asi_need_flush();		/* no */
	asi_exit(ASI_EXIT_OWNER);
	need[4] = asi_need_flush();		/* yes */
	local_irq_restore(flags);
}

/*
 * The flush indication: set by a fallback and by leaving the table, and by
 * going back onto it from relaxed (the CPU ran on the full table there,
 * and the fallback's indication may have been taken meanwhile, as by a
 * flush decision that an NMI's fallback interrupted); taken by the call.
 */
static void asi_need_flush_only_after_full_table_use(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	bool need[5];

	asi_probe_flush(env, need);
	KUNIT_EXPECT_TRUE(test, need[1]);
	KUNIT_EXPECT_TRUE(test, need[2]);
	KUNIT_EXPECT_TRUE(test, need[4]);
	/*
	 * With an SMT sibling the protocol is on, and the sibling's own
	 * leaves and returns mark this CPU's flush too, at any time: only
	 * without it is a flush needed after this CPU's own use alone.
	 */
	if (asi_smt_active())
		return;
	KUNIT_EXPECT_FALSE(test, need[0]);
	KUNIT_EXPECT_FALSE(test, need[3]);
}

static unsigned long fallbacks(void)
{
	unsigned long n = 0;
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		n += READ_ONCE(per_cpu(asi_cpu.fallbacks, cpu));
	return n;
}

/* Exits for @reason on every CPU. */
static unsigned long exits(enum asi_exit_reason reason)
{
	unsigned long n = 0;
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		n += READ_ONCE(per_cpu(asi_cpu.exits[reason], cpu));
	return n;
}

/*
 * Invariant "Never leave on a restricted table": a context switch leaves the
 * domain, interrupts and all.
 */
static void asi_context_switch_leaves_domain(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	unsigned long before = exits(ASI_EXIT_SCHED) + exits(ASI_EXIT_INTERRUPT) + fallbacks();
	struct asi *asi = env->asi;

	local_irq_disable();
	asi_enter(asi);
	local_irq_enable();
	/* An interrupt may land here, on the restricted table, and leave. */
	schedule_timeout_uninterruptible(2);
	KUNIT_EXPECT_PTR_EQ(test, asi_current(), NULL);
	KUNIT_EXPECT_NE(test, cr3_addr(__native_read_cr3()), cr3_addr(__pa(asi->pgd)));
	/*
	 * The exit is counted as a schedule-out when the CPU was still on the
	 * restricted table; an interrupt may have left first, or schedule()
	 * touched unmapped data and fell back (counted there) before the
	 * switch.
	 */
	KUNIT_EXPECT_GE(test, exits(ASI_EXIT_SCHED) + exits(ASI_EXIT_INTERRUPT) + fallbacks(),
			before + 1);
}

/* In the ASI per-CPU section: the test reads it on the restricted table. */
static DEFINE_PER_CPU_ASI(int, asi_test_irq_seen);
static DEFINE_PER_CPU(unsigned long, asi_test_irq_cr3);

static void asi_test_irq_work(struct irq_work *work)
{
	this_cpu_write(asi_test_irq_cr3, __native_read_cr3());
	this_cpu_write(asi_test_irq_seen, 1);
}

/* What a probe saw, read on its CPU before the test may migrate. */
struct asi_probe_result {
	unsigned long cr3;		/* CR3 after the event */
	unsigned long full_cr3;		/* the CPU's full table */
	unsigned long handler_cr3;	/* CR3 inside the handler */
	unsigned long exits;		/* interrupt exits */
	unsigned long fallbacks;	/* fallback faults */
	unsigned long fallbacks_irq;	/* those in interrupt or NMI context */
	unsigned long nmi_flushes;	/* NMIs that flushed on their way out */
	bool need_flush;		/* the flush indication after the event */
	int seen;			/* the handler ran */
	int consistent;			/* the handler saw the full table */
};

static noinline void asi_probe_irq(struct asi_switch_env *env, struct asi_probe_result *res)
{
	struct irq_work work = IRQ_WORK_INIT_HARD(asi_test_irq_work);
	unsigned long flags, exits_before, fallbacks_before;
	int i;

	local_irq_save(flags);
	res->full_cr3 = __native_read_cr3();
	this_cpu_write(asi_test_irq_seen, 0);
	exits_before = this_cpu_read(asi_cpu.exits[ASI_EXIT_INTERRUPT]);
	fallbacks_before = this_cpu_read(asi_cpu.fallbacks);
	/* Raises the irq_work self-IPI, pending until interrupts are on. */
	irq_work_queue(&work);
	asi_enter(env->asi);
	/* Raw: no IRQ-flags tracing, which would touch unmapped data. */
	raw_local_irq_enable();
	for (i = 0; i < 10000000 && !this_cpu_read(asi_test_irq_seen); i++)
		cpu_relax();
	raw_local_irq_disable();
	res->seen = this_cpu_read(asi_test_irq_seen);
	res->cr3 = __native_read_cr3();
	res->handler_cr3 = this_cpu_read(asi_test_irq_cr3);
	res->exits = this_cpu_read(asi_cpu.exits[ASI_EXIT_INTERRUPT]) - exits_before;
	res->fallbacks = this_cpu_read(asi_cpu.fallbacks) - fallbacks_before;
	asi_exit(ASI_EXIT_OWNER);
	local_irq_restore(flags);
	irq_work_sync(&work);
}

/*
 * Invariant "Entries handled on a restricted table", interrupts: a hardware
 * interrupt taken on a restricted table (here the irq_work self-IPI) leaves the
 * domain on entry, so that its handler runs on the full table without a
 * fallback fault, and the exit is counted as an interrupt one.
 */
static void asi_interrupt_leaves_domain(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	struct asi_probe_result res;

	asi_probe_irq(env, &res);
	KUNIT_ASSERT_EQ_MSG(test, res.seen, 1, "the irq_work interrupt did not arrive");
	KUNIT_EXPECT_GE(test, res.exits, 1UL);
	KUNIT_EXPECT_EQ(test, res.fallbacks, 0UL);
	KUNIT_EXPECT_EQ(test, cr3_addr(res.handler_cr3), cr3_addr(res.full_cr3));
	KUNIT_EXPECT_EQ(test, cr3_addr(res.cr3), cr3_addr(res.full_cr3));
	KUNIT_EXPECT_PTR_EQ(test, asi_current(), NULL);
}

/* In the ASI per-CPU section: readable on the restricted table. */
static DEFINE_PER_CPU_ASI(int, asi_test_nmis);
static DEFINE_PER_CPU(int, asi_test_nmi_consistent);

static int asi_test_nmi(unsigned int type, struct pt_regs *regs)
{
	if (this_cpu_read(asi_test_nmis) || !this_cpu_read(asi_cpu.curr))
		return NMI_DONE;
	/*
	 * The NMI entry path needs nothing unmapped; this handler's own data
	 * is not mapped, so this write falls back, inside the NMI.
	 */
	this_cpu_write(asi_test_nmi_consistent, 0);
	this_cpu_write(asi_test_nmi_consistent,
		       __native_read_cr3() == this_cpu_read(asi_cpu.full_cr3));
	this_cpu_write(asi_test_nmis, 1);
	return NMI_HANDLED;
}

/*
 * An NMI to this CPU, written to the ICR directly (@x2apic and @apicid read
 * before the CPU entered the domain): through the APIC driver the send
 * may read what no domain maps (x2APIC cluster mode's logical IDs, the
 * default with interrupt remapping) and fall back in the task, and the
 * NMI would then find the full table. By APIC ID, not as a self-IPI: in
 * x2APIC mode the kernel sends those through the SELF IPI register, which
 * delivers fixed interrupts only.
 */
static __always_inline void asi_test_send_nmi(bool x2apic, u32 apicid)
{
	u32 *icr = (u32 *)(APIC_BASE + APIC_ICR);

	if (x2apic) {
		native_wrmsrl(APIC_BASE_MSR + (APIC_ICR >> 4),
			      (u64)apicid << 32 | APIC_DEST_PHYSICAL | APIC_DM_NMI);
		return;
	}
	while (READ_ONCE(*icr) & APIC_ICR_BUSY)
		cpu_relax();
	WRITE_ONCE(*(u32 *)(APIC_BASE + APIC_ICR2), SET_XAPIC_DEST_FIELD(apicid));
	WRITE_ONCE(*icr, APIC_DEST_PHYSICAL | APIC_DM_NMI);
}

/* Where asi_probe_nmi() sends its NMI. */
enum asi_nmi_probe {
	ASI_NMI_OUTSIDE,	/* on the restricted table, no VM-entry window */
	ASI_NMI_WINDOW,		/* in a window, after the flush decision */
	ASI_NMI_WINDOW_RELAXED,	/* there, on the full table: fell back before */
};

/*
 * In a window, as a VM-entry would: open it and take the flush decision
 * before the NMI arrives (in the relaxed case after a fallback, so that
 * the decision flushes and the CPU stays on the full table), and close it
 * after. The flush indication is read without taking it.
 */
static noinline void asi_probe_nmi(struct asi_switch_env *env, struct asi_probe_result *res,
				   enum asi_nmi_probe where)
{
	struct asi *asi = env->asi;
	unsigned long flags, before, irq_before, nmi_flushes;
	bool x2apic = x2apic_enabled();
	u32 apicid;
	int i;

	local_irq_save(flags);
	apicid = read_apic_id();
	res->full_cr3 = __native_read_cr3();
	this_cpu_write(asi_test_nmis, 0);
	before = this_cpu_read(asi_cpu.fallbacks);
	irq_before = this_cpu_read(asi_cpu.fallbacks_irq);
	nmi_flushes = this_cpu_read(asi_cpu.nmi_flushes);
	asi_enter(asi);
	if (where == ASI_NMI_WINDOW_RELAXED)
		READ_ONCE(*env->unmapped);
	if (where != ASI_NMI_OUTSIDE) {
		asi_entry_window(true);
		if (asi_need_flush())
			asi_flush_caches();
	}
	asi_test_send_nmi(x2apic, apicid);
	for (i = 0; i < 10000000 && !this_cpu_read(asi_test_nmis); i++)
		cpu_relax();
	res->seen = this_cpu_read(asi_test_nmis);
	res->cr3 = __native_read_cr3();
	res->consistent = this_cpu_read(asi_test_nmi_consistent);
	res->fallbacks = this_cpu_read(asi_cpu.fallbacks) - before;
	res->fallbacks_irq = this_cpu_read(asi_cpu.fallbacks_irq) - irq_before;
	res->need_flush = this_cpu_read(asi_cpu.need_flush);
	if (where != ASI_NMI_OUTSIDE)
		asi_entry_window(false);
	res->nmi_flushes = this_cpu_read(asi_cpu.nmi_flushes) - nmi_flushes;
	asi_exit(ASI_EXIT_OWNER);
	local_irq_restore(flags);
}

/* asi_probe_nmi(), with asi_test_nmi() registered for its NMI. */
static void asi_probe_nmi_handled(struct kunit *test, struct asi_probe_result *res,
				  enum asi_nmi_probe where)
{
	int err = register_nmi_handler(NMI_LOCAL, asi_test_nmi, 0, "asi_test");

	KUNIT_ASSERT_EQ(test, err, 0);
	asi_probe_nmi(test->priv, res, where);
	unregister_nmi_handler(NMI_LOCAL, "asi_test");
}

/*
 * Invariant "Entries handled on a restricted table": an NMI on a restricted
 * table is handled (its first access to unmapped data falls back, inside the
 * NMI), and when it returns CR3 and the ASI state agree: still in the domain,
 * on the full table (PTI's paranoid exit restores only a user CR3, which the
 * restricted table's is not; the check also accepts the restricted table,
 * should an exit path restore it).
 */
static void asi_nmi_on_restricted_table_falls_back(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	struct asi_probe_result res;
	bool on_a_table;

	asi_probe_nmi_handled(test, &res, ASI_NMI_OUTSIDE);

	/* Read on the probe's CPU: the test may have migrated since. */
	KUNIT_EXPECT_EQ(test, res.seen, 1);
	KUNIT_EXPECT_EQ(test, res.consistent, 1);
	KUNIT_EXPECT_GE(test, res.fallbacks_irq, 1UL);
	/* Outside a VM-entry window: the next entry's decision flushes. */
	KUNIT_EXPECT_EQ(test, res.nmi_flushes, 0UL);
	on_a_table = cr3_addr(res.cr3) == cr3_addr(__pa(env->asi->pgd)) ||
		     cr3_addr(res.cr3) == cr3_addr(res.full_cr3);
	KUNIT_EXPECT_TRUE_MSG(test, on_a_table,
			      "CR3 %#lx after the NMI is neither table (full: %#lx)",
			      res.cr3, res.full_cr3);
	KUNIT_EXPECT_PTR_EQ(test, asi_current(), NULL);
}

/*
 * The VM-entry window: an NMI that falls back after the owner's flush
 * decision, before its VM-entry (VMX takes host NMIs there), must flush on
 * its way out, else the guest runs on what the NMI's handlers brought into
 * the caches, and leave the flush indication set for the next entry. So
 * must one that finds the CPU on the full table already (a fallback
 * before the decision): its handlers read the full table's data without
 * a fault. (A perf or watchdog NMI may land in the window too: at least
 * one flush.)
 */
static void asi_nmi_in_entry_window_flushes(struct kunit *test)
{
	struct asi_probe_result res;

	asi_probe_nmi_handled(test, &res, ASI_NMI_WINDOW);

	KUNIT_EXPECT_EQ(test, res.seen, 1);
	KUNIT_EXPECT_GE(test, res.fallbacks_irq, 1UL);
	KUNIT_EXPECT_GE(test, res.nmi_flushes, 1UL);
	KUNIT_EXPECT_TRUE(test, res.need_flush);

	asi_probe_nmi_handled(test, &res, ASI_NMI_WINDOW_RELAXED);

	KUNIT_EXPECT_EQ(test, res.seen, 1);
	/* The task's fallback only: the NMI ran on the full table. */
	KUNIT_EXPECT_EQ(test, res.fallbacks, 1UL);
	KUNIT_EXPECT_GE(test, res.nmi_flushes, 1UL);
}

/*
 * With ASI on the kernel's mappings are not global, so a kernel page flush
 * must reach the other mms' PCIDs as with PTI (the flush code marks them
 * for a flush at their next use), and ASI's PCIDs.
 */
static void asi_kernel_flush_reaches_other_pcids(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	bool other_before, other;
	unsigned long stale;

	preempt_disable();
	other_before = this_cpu_read(cpu_tlbstate.invalidate_other);
	this_cpu_write(cpu_tlbstate.invalidate_other, false);
	stale = this_cpu_read(asi_cpu.pcid_stale);
	flush_tlb_one_kernel((unsigned long)env->mapped);
	other = this_cpu_read(cpu_tlbstate.invalidate_other);
	if (cpu_feature_enabled(X86_FEATURE_PCID))
		KUNIT_EXPECT_EQ(test, this_cpu_read(asi_cpu.pcid_stale), BIT(ASI_NR_PCIDS) - 1);
	else
		KUNIT_EXPECT_EQ(test, this_cpu_read(asi_cpu.pcid_stale), stale);
	this_cpu_write(cpu_tlbstate.invalidate_other, other || other_before);
	preempt_enable();
	KUNIT_EXPECT_TRUE(test, other);
}

/*
 * The hooks of the TLB flush code mark ASI PCIDs stale; one run while the
 * CPU is in a domain marks the full table's PCID too (the flush may have
 * hit the ASI PCID instead). Called directly: through asi_invalidate_pcid()
 * they do nothing on a CPU without PCIDs.
 */
static void asi_invalidate_marks_stale(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	unsigned long flags, stale, stale_one, stale_all;
	bool full, full_idle, full_in;

	local_irq_save(flags);
	stale = this_cpu_read(asi_cpu.pcid_stale);
	full = this_cpu_read(asi_cpu.full_stale);
	this_cpu_write(asi_cpu.pcid_stale, 0);
	this_cpu_write(asi_cpu.full_stale, false);
	__asi_invalidate_pcid(3);
	stale_one = this_cpu_read(asi_cpu.pcid_stale);
	full_idle = this_cpu_read(asi_cpu.full_stale);
	__asi_invalidate_pcid_all();
	stale_all = this_cpu_read(asi_cpu.pcid_stale);
	asi_enter(env->asi);
	__asi_invalidate_pcid(0);
	full_in = this_cpu_read(asi_cpu.full_stale);
	asi_exit(ASI_EXIT_OWNER);
	this_cpu_write(asi_cpu.pcid_stale, stale | this_cpu_read(asi_cpu.pcid_stale));
	this_cpu_write(asi_cpu.full_stale, full || this_cpu_read(asi_cpu.full_stale));
	local_irq_restore(flags);

	KUNIT_EXPECT_EQ(test, stale_one, BIT(3));
	KUNIT_EXPECT_FALSE(test, full_idle);
	KUNIT_EXPECT_EQ(test, stale_all, BIT(ASI_NR_PCIDS) - 1);
	KUNIT_EXPECT_TRUE(test, full_in);
}

/*
 * The TLB flush code marks ASI PCIDs where it flushes: a local full flush
 * and a single page mark the loaded mm's slot, a kernel page every slot,
 * and a switch to an mm that needs a flush (always, without PCIDs) the
 * new slot. Every PCID is left marked, which is always safe.
 */
static void asi_flush_code_marks_pcids(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	unsigned long flags, local, one, kernel, use;
	struct mm_struct *mm;
	u16 asid, use_asid;
	bool other;

	mm = mm_alloc();
	KUNIT_ASSERT_NOT_NULL(test, mm);
	migrate_disable();
	local_irq_save(flags);
	asid = this_cpu_read(cpu_tlbstate.loaded_mm_asid);
	this_cpu_write(asi_cpu.pcid_stale, 0);
	flush_tlb_local();
	local = this_cpu_xchg(asi_cpu.pcid_stale, 0);
	flush_tlb_one_user((unsigned long)env->mapped);
	one = this_cpu_xchg(asi_cpu.pcid_stale, 0);
	other = this_cpu_read(cpu_tlbstate.invalidate_other);
	flush_tlb_one_kernel((unsigned long)env->mapped);
	this_cpu_write(cpu_tlbstate.invalidate_other,
		       other || this_cpu_read(cpu_tlbstate.invalidate_other));
	kernel = this_cpu_xchg(asi_cpu.pcid_stale, 0);
	local_irq_restore(flags);

	kthread_use_mm(mm);
	use = this_cpu_read(asi_cpu.pcid_stale);
	use_asid = this_cpu_read(cpu_tlbstate.loaded_mm_asid);
	kthread_unuse_mm(mm);
	this_cpu_or(asi_cpu.pcid_stale, BIT(ASI_NR_PCIDS) - 1);
	migrate_enable();
	mmput(mm);

	KUNIT_EXPECT_EQ(test, local, BIT(asid));
	KUNIT_EXPECT_EQ(test, one, BIT(asid));
	KUNIT_EXPECT_EQ(test, kernel, BIT(ASI_NR_PCIDS) - 1);
	KUNIT_EXPECT_TRUE(test, use & BIT(use_asid));	/* a new mm: flushed */
}

struct asi_pcid_probe {
	unsigned long cr3_in, cr3_again;
	unsigned long kept, flushes;
	u16 asid;
};

static noinline void asi_pcid_probe_run(struct asi *asi, struct asi_pcid_probe *p)
{
	unsigned long flags, kept, flushes;

	local_irq_save(flags);
	p->asid = this_cpu_read(cpu_tlbstate.loaded_mm_asid);
	asi_enter(asi);
	p->cr3_in = __native_read_cr3();
	asi_exit(ASI_EXIT_OWNER);
	kept = this_cpu_read(asi_cpu.pcid_kept);
	flushes = this_cpu_read(asi_cpu.pcid_flushes);
	asi_enter(asi);				/* same domain, nothing flushed */
	asi_exit(ASI_EXIT_OWNER);
	p->kept = this_cpu_read(asi_cpu.pcid_kept) - kept;
	asi_invalidate_pcid(p->asid);		/* as the TLB flush code does */
	asi_enter(asi);
	p->cr3_again = __native_read_cr3();
	asi_exit(ASI_EXIT_OWNER);
	p->flushes = this_cpu_read(asi_cpu.pcid_flushes) - flushes;
	local_irq_restore(flags);
}

/* On a CPU with PCIDs: the restricted table runs under the ASI PCID. */
static void asi_pcid_switch_keeps_translations(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	struct asi_pcid_probe p = {};

	if (!cpu_feature_enabled(X86_FEATURE_PCID))
		kunit_skip(test, "the CPU has no PCIDs: every switch flushes the TLB");
	asi_pcid_probe_run(env->asi, &p);
	KUNIT_EXPECT_EQ(test, p.cr3_in & CR3_PCID_MASK, (p.asid + 1) | BIT(ASI_PCID_BIT));
	KUNIT_EXPECT_EQ(test, cr3_addr(p.cr3_in), cr3_addr(env->asi->cr3));
	KUNIT_EXPECT_EQ(test, p.kept, 1UL);
	KUNIT_EXPECT_EQ(test, p.flushes, 1UL);
	KUNIT_EXPECT_EQ(test, p.cr3_again, p.cr3_in);
}

struct asi_cr3_probe {
	unsigned long full_in, curr_in, full_out, curr_out;
};

static noinline void asi_cr3_probe_run(struct asi *asi, struct asi_cr3_probe *p)
{
	unsigned long flags;

	local_irq_save(flags);
	asi_enter(asi);
	p->full_in = this_cpu_read(asi_cpu.full_cr3);
	p->curr_in = this_cpu_read(asi_cpu.curr_cr3);
	asi_exit(ASI_EXIT_OWNER);
	p->full_out = this_cpu_read(asi_cpu.full_cr3);
	p->curr_out = this_cpu_read(asi_cpu.curr_cr3);
	local_irq_restore(flags);
}

/*
 * Every domain maps every CPU's asi_cpu: a CPU outside a domain keeps no
 * CR3 value there (full_cr3 names its task's page table).
 */
static void asi_cr3_values_cleared_on_exit(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	struct asi_cr3_probe p;

	asi_cr3_probe_run(env->asi, &p);
	KUNIT_EXPECT_NE(test, p.full_in, 0UL);
	KUNIT_EXPECT_EQ(test, cr3_addr(p.curr_in), cr3_addr(env->asi->cr3));
	KUNIT_EXPECT_EQ(test, p.full_out, 0UL);
	KUNIT_EXPECT_EQ(test, p.curr_out, 0UL);
}

struct asi_unmap_probe {
	unsigned long v_before, fb_before, fb_after, flushes;
};

static noinline void asi_unmap_probe_touch(struct asi_switch_env *env, unsigned long *page,
					   unsigned long *v, unsigned long *fallbacks,
					   unsigned long *flushes)
{
	unsigned long flags, fb, pcid_flushes;

	local_irq_save(flags);
	fb = this_cpu_read(asi_cpu.fallbacks);
	pcid_flushes = this_cpu_read(asi_cpu.pcid_flushes);
	asi_enter(env->asi);
	*v = READ_ONCE(*page);
	asi_exit(ASI_EXIT_OWNER);
	*fallbacks = this_cpu_read(asi_cpu.fallbacks) - fb;
	*flushes = this_cpu_read(asi_cpu.pcid_flushes) - pcid_flushes;
	local_irq_restore(flags);
}

/*
 * An unmap from a domain flushes only that domain: no CPU outside it is
 * interrupted (a guest makes KVM unmap, and must not disturb other
 * tenants' CPUs), the domain takes a new generation, and a translation
 * cached before the unmap is gone after it: the next load of the domain's
 * table under its PCID flushes it, and the access falls back.
 */
static void asi_unmap_flushes_only_the_domain(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	unsigned long *page, v, fb, flushes, ipis_before = 0, ipis_after = 0;
	unsigned int cpu;
	u64 gen;

	page = (unsigned long *)__get_free_page(GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, page);
	*page = 0x4242;
	KUNIT_ASSERT_EQ(test, asi_map(env->asi, page, PAGE_SIZE, "kunit"), 0);

	migrate_disable();
	asi_unmap_probe_touch(env, page, &v, &fb, &flushes);	/* caches it */
	KUNIT_EXPECT_EQ(test, v, 0x4242UL);
	KUNIT_EXPECT_EQ(test, fb, 0UL);

	for_each_online_cpu(cpu)
		if (cpu != smp_processor_id())
			ipis_before += READ_ONCE(per_cpu(asi_cpu.unmap_ipis, cpu));
	gen = READ_ONCE(env->asi->gen);
	asi_unmap(env->asi, page, PAGE_SIZE);
	for_each_online_cpu(cpu)
		if (cpu != smp_processor_id())
			ipis_after += READ_ONCE(per_cpu(asi_cpu.unmap_ipis, cpu));
	KUNIT_EXPECT_NE(test, READ_ONCE(env->asi->gen), gen);
	/* No other CPU was in this test's domain. */
	KUNIT_EXPECT_EQ(test, ipis_after, ipis_before);

	asi_unmap_probe_touch(env, page, &v, &fb, &flushes);
	migrate_enable();
	KUNIT_EXPECT_EQ(test, v, 0x4242UL);
	KUNIT_EXPECT_EQ(test, fb, 1UL);
	if (cpu_feature_enabled(X86_FEATURE_PCID))
		KUNIT_EXPECT_EQ(test, flushes, 1UL);
	free_page((unsigned long)page);
}

static struct kunit_case asi_switch_cases[] = {
	KUNIT_CASE(asi_kernel_flush_reaches_other_pcids),
	KUNIT_CASE(asi_invalidate_marks_stale),
	KUNIT_CASE(asi_flush_code_marks_pcids),
	KUNIT_CASE(asi_pcid_switch_keeps_translations),
	KUNIT_CASE(asi_enter_switches_and_fallback_restores),
	KUNIT_CASE(asi_fault_unmapped_everywhere_still_faults),
	KUNIT_CASE(asi_need_flush_only_after_full_table_use),
	KUNIT_CASE(asi_context_switch_leaves_domain),
	KUNIT_CASE(asi_interrupt_leaves_domain),
	KUNIT_CASE(asi_nmi_on_restricted_table_falls_back),
	KUNIT_CASE(asi_nmi_in_entry_window_flushes),
	KUNIT_CASE(asi_cr3_values_cleared_on_exit),
	KUNIT_CASE(asi_unmap_flushes_only_the_domain),
	{}
};

static struct kunit_suite asi_switch_suite = {
	.name = "asi_switch",
	.init = asi_switch_init,
	.exit = asi_switch_exit,
	.test_cases = asi_switch_cases,
};

kunit_test_suites(&asi_switch_suite);

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);
MODULE_DESCRIPTION("KUnit tests for the x86 Address Space Isolation switch");
MODULE_LICENSE("GPL");
