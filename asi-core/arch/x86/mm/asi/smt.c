// SPDX-License-Identifier: GPL-2.0
/*
 * x86 Address Space Isolation (ASI): SMT siblings.
 *
 * The sibling protocol's VM-entry gate and checks (noinstr, run on
 * restricted tables; the parts the switch itself runs are in smt.h), its
 * tracing, and its control: CPU hotplug pairs the two CPUs of a core, and
 * /sys/kernel/debug/asi/smt turns the protocol off and on.
 */
#define pr_fmt(fmt) "ASI: " fmt

#include <linux/asi.h>
#include <linux/cpuhotplug.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/init.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/uaccess.h>
#include <asm/apic.h>
#include <asm/msr.h>
#include <asm/tsc.h>
#include <trace/events/asi_smt.h>

#include "internal.h"
#include "smt.h"

DEFINE_PER_CPU_ASI(struct asi_smt, asi_smt);
DEFINE_STATIC_KEY_FALSE(asi_smt_key);
EXPORT_SYMBOL_GPL(asi_smt_key);
DEFINE_STATIC_KEY_FALSE(asi_guest_trace_key);
EXPORT_SYMBOL_GPL(asi_guest_trace_key);

/* Out of line and instrumentable: only ever called on the full table. */
noinline void asi_smt_emit_kick(unsigned int sibling, u64 cycles)
{
	if (rcu_is_watching())
		trace_asi_smt_kick(sibling, asi_tsc_to_ns(cycles));
	else
		this_cpu_inc(asi_cpu.trace_missed);
}

/**
 * __asi_smt_wake() - a CPU halted in idle is about to touch memory again
 *
 * From the interrupt and NMI entries and from cpuidle, through
 * asi_idle_exit() and asi_nmi_enter(): if this CPU was quiescent, it
 * leaves that state as it leaves a table (see asi_smt_leave()). Noinstr.
 */
noinstr void __asi_smt_wake(void)
{
	if (READ_ONCE(raw_cpu_ptr(&asi_smt)->state) == ASI_SMT_QUIESCENT) {
		asi_smt_leave();
		asi_smt_trace_kick();
	}
}

/**
 * __asi_idle_enter() - this CPU halts in idle and touches nothing
 *
 * Right before the idle instruction, IRQs off, on the full table: no
 * sibling runs a guest beside this CPU here (it would have waited for it
 * to leave its table), so no barrier is needed to become quiescent.
 */
noinstr void __asi_idle_enter(void)
{
	struct asi_smt *me = raw_cpu_ptr(&asi_smt);

	/* What the full table brought in, the sibling's next entry flushes. */
	if (READ_ONCE(me->sibling))
		WRITE_ONCE(*me->sibling_flush, true);
	barrier();
	WRITE_ONCE(me->state, ASI_SMT_QUIESCENT);
}

/**
 * asi_smt_guest_enter() - the SMT gate before a VM-entry
 * @asi: the VM's domain
 *
 * IRQs off, where the VM-entry may still be cancelled. Enters @asi, then
 * claims the core for @asi's guests: succeeds if the sibling is offline,
 * on @asi's table or halted in idle. On success the sibling, whatever it
 * does next, waits for asi_smt_guest_exit() before it touches anything
 * else.
 *
 * Return: ASI_SMT_GO, or why the entry must wait.
 */
noinstr enum asi_smt_verdict asi_smt_guest_enter(struct asi *asi)
{
	struct asi_smt *me = raw_cpu_ptr(&asi_smt), *sib;
	unsigned long s;
	u64 t0;

	asi_enter(asi);
	sib = READ_ONCE(me->sibling);
	if (!sib)
		return ASI_SMT_GO;
	t0 = rdtsc();
	for (;;) {
		WRITE_ONCE(me->guest, asi);
		/* The mark before the sibling's state: see asi_smt_leave(). */
		smp_mb();
		s = READ_ONCE(sib->state);
		if (s == (unsigned long)asi || s == ASI_SMT_QUIESCENT)
			return ASI_SMT_GO;
		WRITE_ONCE(me->guest, NULL);
		/*
		 * Beside the full table, wait a little on this table, touching
		 * nothing, without the mark (a sibling that leaves must not
		 * wait for this CPU): two vCPUs of a VM that each fell back on
		 * their way to the gate would otherwise refuse each other for
		 * as long as their retries fall back too. While this CPU waits
		 * its state says @asi, so the sibling's own gate lets it in.
		 */
		if (s != ASI_SMT_FULL || rdtsc() - t0 > me->gate_spin)
			break;
		cpu_relax();
	}
	me->refusals++;
	return s == ASI_SMT_FULL ? ASI_SMT_WAIT_FULL : ASI_SMT_WAIT_DOMAIN;
}
EXPORT_SYMBOL_GPL(asi_smt_guest_enter);

/**
 * asi_smt_guest_check() - the last look at the sibling before VM-entry
 * @asi: the VM's domain, entered
 *
 * Noinstr, after the flush decision, last before the VM-entry code. The
 * sibling cannot have left its table since the gate without waiting for
 * this CPU, unless both waited for each other and it went on first, or a
 * wait timed out: then this CPU sends itself an IPI, so that the VM-entry
 * exits before the guest's first instruction (as KVM's immediate exit).
 */
noinstr void asi_smt_guest_check(struct asi *asi)
{
	struct asi_smt *me = raw_cpu_ptr(&asi_smt), *sib = READ_ONCE(me->sibling);
	unsigned long s;

	if (!sib || !READ_ONCE(me->guest))
		return;
	s = READ_ONCE(sib->state);
	if (s == (unsigned long)asi || s == ASI_SMT_QUIESCENT || READ_ONCE(sib->waiting))
		return;
	me->self_kicks++;
	me->self_kicked = true;
	asi_smt_ipi(me, me->apicid);
	asi_smt_wait_pending(me);
}
EXPORT_SYMBOL_GPL(asi_smt_guest_check);

/**
 * asi_smt_guest_recheck() - may KVM re-enter the guest on its fast path?
 * @asi: the VM's domain
 *
 * Between a VM-exit handled in the fast path and the next VM-entry, which
 * the gate does not see: stop if the sibling waits for this CPU or left
 * @asi's table.
 *
 * Return: true if KVM must stop and go back through the gate.
 */
noinstr bool asi_smt_guest_recheck(struct asi *asi)
{
	struct asi_smt *me = raw_cpu_ptr(&asi_smt), *sib = READ_ONCE(me->sibling);
	unsigned long s;

	if (!sib || !READ_ONCE(me->guest))
		return false;
	s = READ_ONCE(sib->state);
	return READ_ONCE(sib->waiting) ||
	       (s != (unsigned long)asi && s != ASI_SMT_QUIESCENT);
}
EXPORT_SYMBOL_GPL(asi_smt_guest_recheck);

/**
 * asi_smt_guest_exit() - give the core back after a VM-exit
 *
 * IRQs off, once the exit is traced: a sibling waiting in
 * asi_smt_leave() goes on.
 *
 * Return: true if the sibling kicked this CPU out of its guest.
 */
noinstr bool asi_smt_guest_exit(void)
{
	struct asi_smt *me = raw_cpu_ptr(&asi_smt);

	WRITE_ONCE(me->guest, NULL);
	me->self_kicked = false;
	if (!READ_ONCE(me->kicked))
		return false;
	WRITE_ONCE(me->kicked, false);
	return true;
}
EXPORT_SYMBOL_GPL(asi_smt_guest_exit);

/**
 * asi_smt_backoff() - wait before trying the gate again
 * @why: what asi_smt_guest_enter() returned
 *
 * IRQs on, preemptible. Beside the full table: spin, the sibling is soon
 * back (or its task is preempted). Beside another domain (two VMs on one
 * core, which core scheduling prevents): of the two, the CPU with the
 * higher number leaves its domain and sleeps, so that its own CPU can
 * idle and the other VM run; both spinning would never end.
 */
void asi_smt_backoff(enum asi_smt_verdict why)
{
	struct asi_smt *me, *sib;
	bool yield;

	trace_asi_smt_wait(why);
	me = get_cpu_ptr(&asi_smt);
	sib = READ_ONCE(me->sibling);
	yield = why == ASI_SMT_WAIT_DOMAIN && sib && me->cpu > sib->cpu;
	put_cpu_ptr(&asi_smt);
	if (yield) {
		/* It blocks: counted as KVM counts leaving before HLT blocks. */
		local_irq_disable();
		__asi_exit(ASI_EXIT_SCHED);
		local_irq_enable();
		usleep_range(20, 50);
		return;
	}
	cpu_relax();
}
EXPORT_SYMBOL_GPL(asi_smt_backoff);

/**
 * __asi_guest_window() - note when this CPU entered or left guest mode
 * @end: right after the VM-entry instruction returned (else right before)
 *
 * Noinstr, while asi_smt:asi_guest is traced: the first entry and the last
 * exit of a run of VM-entries, for asi_trace_guest_window().
 */
noinstr void __asi_guest_window(bool end)
{
	struct asi_smt *me = raw_cpu_ptr(&asi_smt);
	u64 t = rdtsc();

	/*
	 * A VM-entry with the self-kick pending in the IRR exits before the
	 * guest's first instruction: counted, not guest time.
	 */
	if (me->self_kicked) {
		if (end) {
			me->self_kicked = false;
			me->immediate++;
		}
		return;
	}
	if (end)
		me->win_end = t;
	else if (!me->win_start)
		me->win_start = t;
}
EXPORT_SYMBOL_GPL(__asi_guest_window);

/**
 * asi_trace_guest_window() - trace the guest time noted since the last call
 * @asi: the domain whose guest ran
 *
 * After the VM-exit, IRQs off. The event gives the window as times before
 * it, from one TSC read as it is filled in, so that a tool can place it on
 * any trace clock (see the event).
 */
void asi_trace_guest_window(struct asi *asi)
{
	struct asi_smt *me = this_cpu_ptr(&asi_smt);

	if (!me->win_start && !me->immediate)
		return;
	if (me->win_end >= me->win_start)
		trace_asi_guest(asi->id, me->win_start, me->win_end, me->immediate);
	me->win_start = 0;
	me->win_end = 0;
	me->immediate = 0;
}
EXPORT_SYMBOL_GPL(asi_trace_guest_window);

int asi_guest_trace_reg(void)
{
	unsigned int cpu;

	/* A window noted before the event was last disabled is stale. */
	for_each_possible_cpu(cpu)
		per_cpu(asi_smt, cpu).win_start = 0;
	static_branch_inc(&asi_guest_trace_key);
	return 0;
}

void asi_guest_trace_unreg(void)
{
	static_branch_dec(&asi_guest_trace_key);
}

/*
 * SMT pairs: a CPU is paired with the other CPU of its core once it runs
 * (CPUHP_AP_ONLINE_DYN, where the sibling masks are known), and unpaired
 * once it is dead (from the control CPU). A core of more than two CPUs is
 * not paired: the protocol knows one sibling (said once in the boot log).
 * Until a CPU coming online runs its callback, its sibling does not know
 * it: the bring-up code is not covered.
 */
static bool asi_smt_wanted = true;
static DEFINE_MUTEX(asi_smt_lock);

/*
 * Run on a CPU by IPI, when the protocol is turned on or the CPU gets a
 * sibling: it sets its own state to the full table (it is in an interrupt
 * handler), and a guest it ran unchecked exits on this very IPI.
 */
static void asi_smt_resync(void *unused)
{
	struct asi_smt *me = this_cpu_ptr(&asi_smt);

	WRITE_ONCE(me->guest, NULL);
	WRITE_ONCE(me->state, ASI_SMT_FULL);
}

static struct asi_smt *asi_smt_init_cpu(unsigned int cpu)
{
	struct asi_smt *st = per_cpu_ptr(&asi_smt, cpu);

	st->cpu = cpu;
	st->apicid = per_cpu(x86_cpu_to_apicid, cpu);
	st->x2apic = x2apic_mode;
	/* 10 ms and 20 us, or about that many cycles if the TSC's rate is unknown. */
	st->timeout = (tsc_khz ? tsc_khz : 1000000) * 10ULL;
	st->gate_spin = (tsc_khz ? tsc_khz : 1000000) / 50;
	return st;
}

static int asi_smt_cpu_online(unsigned int cpu)
{
	const struct cpumask *mask = topology_sibling_cpumask(cpu);
	struct asi_smt *me = asi_smt_init_cpu(cpu), *sib;
	unsigned int other;

	if (cpumask_weight(mask) != 2) {
		if (cpumask_weight(mask) > 2)
			pr_warn_once("SMT: cores of %u CPUs: no sibling protocol\n",
				     cpumask_weight(mask));
		return 0;
	}
	other = cpumask_any_but(mask, cpu);
	if (other >= nr_cpu_ids || !cpu_online(other))
		return 0;
	sib = asi_smt_init_cpu(other);
	me->sibling_apicid = sib->apicid;
	me->sibling_flush = &per_cpu(asi_cpu, other).need_flush;
	sib->sibling_apicid = me->apicid;
	sib->sibling_flush = &per_cpu(asi_cpu, cpu).need_flush;
	WRITE_ONCE(me->state, ASI_SMT_FULL);
	/* The fields above before the pointers that publish them. */
	smp_wmb();
	WRITE_ONCE(me->sibling, sib);
	WRITE_ONCE(sib->sibling, me);
	if (!READ_ONCE(asi_smt_wanted))
		return 0;
	if (!static_branch_unlikely(&asi_smt_key)) {
		/* The states were not kept while the key was off. */
		WRITE_ONCE(sib->state, ASI_SMT_FULL);
		static_branch_enable_cpuslocked(&asi_smt_key);
	}
	/*
	 * A guest running on the sibling entered with no sibling to claim
	 * the core from: make it exit and come back through the gate, and
	 * both CPUs' next VM-entries flush what bring-up brought in.
	 */
	per_cpu(asi_cpu, cpu).need_flush = true;
	WRITE_ONCE(per_cpu(asi_cpu, other).need_flush, true);
	smp_call_function_single(other, asi_smt_resync, NULL, 1);
	return 0;
}

static int asi_smt_cpu_dead(unsigned int cpu)
{
	struct asi_smt *me = per_cpu_ptr(&asi_smt, cpu), *sib = me->sibling;

	if (sib)
		WRITE_ONCE(sib->sibling, NULL);
	WRITE_ONCE(me->sibling, NULL);
	WRITE_ONCE(me->guest, NULL);
	WRITE_ONCE(me->waiting, 0);
	WRITE_ONCE(me->kicked, false);
	me->win_start = 0;
	WRITE_ONCE(me->state, ASI_SMT_FULL);
	return 0;
}

static unsigned int asi_smt_pairs(void)
{
	unsigned int cpu, n = 0;

	for_each_online_cpu(cpu) {
		struct asi_smt *sib = READ_ONCE(per_cpu(asi_smt, cpu).sibling);

		n += sib && cpu < sib->cpu;
	}
	return n;
}

/*
 * Turning the protocol on: while the key is off nothing reads the states,
 * so set them all to the full table (and every CPU's next VM-entry to
 * flush) first; the gates then refuse until each CPU states its own. A
 * guest that entered while the protocol was off holds no mark: the
 * resync IPI makes it exit. The write returns once every CPU took it.
 */
static void asi_smt_set(bool on)
{
	unsigned int cpu;

	mutex_lock(&asi_smt_lock);
	WRITE_ONCE(asi_smt_wanted, on);
	if (!on) {
		static_branch_disable(&asi_smt_key);
	} else if (asi_smt_pairs()) {
		for_each_possible_cpu(cpu) {
			WRITE_ONCE(per_cpu(asi_smt, cpu).state, ASI_SMT_FULL);
			WRITE_ONCE(per_cpu(asi_cpu, cpu).need_flush, true);
		}
		static_branch_enable(&asi_smt_key);
		on_each_cpu(asi_smt_resync, NULL, 1);
	}
	mutex_unlock(&asi_smt_lock);
}

static int asi_smt_show(struct seq_file *m, void *v)
{
	unsigned int cpu;

	seq_printf(m, "protocol: %s\npairs: %u\n",
		   static_branch_unlikely(&asi_smt_key) ? "on" :
		   READ_ONCE(asi_smt_wanted) ? "off (no core with two CPUs online)" :
		   "off (turned off)", asi_smt_pairs());
	seq_puts(m, "cpu\tsibling\tkicks\twaits\twait_us\ttimeouts\tproceeds\trefusals\tself_kicks\n");
	for_each_online_cpu(cpu) {
		struct asi_smt *st = per_cpu_ptr(&asi_smt, cpu);
		struct asi_smt *sib = READ_ONCE(st->sibling);

		seq_printf(m, "%u\t%d\t%lu\t%lu\t%llu\t%lu\t%lu\t%lu\t%lu\n", cpu,
			   sib ? (int)sib->cpu : -1, READ_ONCE(st->kicks),
			   READ_ONCE(st->waits),
			   tsc_khz ? div_u64((u64)READ_ONCE(st->wait_cycles) * 1000, tsc_khz) : 0,
			   READ_ONCE(st->timeouts), READ_ONCE(st->proceeds),
			   READ_ONCE(st->refusals), READ_ONCE(st->self_kicks));
	}
	return 0;
}

static int asi_smt_open(struct inode *inode, struct file *file)
{
	return single_open(file, asi_smt_show, NULL);
}

/* "on" or "off": for tests that must see the exposure without the protocol. */
static ssize_t asi_smt_write(struct file *file, const char __user *ubuf,
			     size_t count, loff_t *ppos)
{
	bool on;
	int err;

	err = kstrtobool_from_user(ubuf, count, &on);
	if (err)
		return err;
	asi_smt_set(on);
	return count;
}

static const struct file_operations asi_smt_fops = {
	.open		= asi_smt_open,
	.read		= seq_read,
	.write		= asi_smt_write,
	.llseek		= seq_lseek,
	.release	= single_release,
};

static int __init asi_smt_init(void)
{
	int dead, ret;

	if (!asi_enabled())
		return 0;
	debugfs_create_file("smt", 0600, asi_debugfs_dir, NULL, &asi_smt_fops);
	dead = cpuhp_setup_state_nocalls(CPUHP_BP_PREPARE_DYN, "x86/asi/smt:dead",
					 NULL, asi_smt_cpu_dead);
	if (dead < 0) {
		ret = dead;
		goto fail;
	}
	ret = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "x86/asi/smt:online",
				asi_smt_cpu_online, NULL);
	if (ret < 0) {
		cpuhp_remove_state_nocalls(dead);
		goto fail;
	}
	if (asi_smt_pairs())
		pr_info("SMT: %u cores with two CPUs online: sibling protocol on\n",
			asi_smt_pairs());
	else
		pr_info("SMT: no core with two CPUs online: sibling protocol off\n");
	return 0;
fail:
	pr_err("SMT: cannot track CPU hotplug (%d): sibling protocol off\n", ret);
	return 0;
}

/* After asi_report(): its line says whether ASI is on at all. */
late_initcall_sync(asi_smt_init);
