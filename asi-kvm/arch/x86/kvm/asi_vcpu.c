// SPDX-License-Identifier: GPL-2.0
/*
 * KVM and Address Space Isolation: a vCPU in its VM's domain.
 *
 * What each vCPU maps (its own data, its task's stack), entering the
 * domain on KVM_RUN and leaving it (kvm_asi_leave(), the only way out of
 * the domain for KVM), and the statistics of both.
 */
#include <linux/asi.h>
#include <linux/kvm_host.h>
#include <linux/sched/smt.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "kvm_emulate.h"
#include "lapic.h"

#include "asi.h"

/*
 * A task's kernel stack, mapped in a VM's domain for as long as one of the
 * VM's vCPUs was last run by the task, and the task ran no other VM's vCPU
 * since. On kvm->arch.asi_stacks, under kvm->arch.asi_lock, while @task is
 * set; a record whose stack another VM took (@task NULL) stays until its
 * vCPUs drop it.
 */
struct kvm_asi_stack {
	struct list_head list;
	struct kvm *kvm;
	struct task_struct *task;
	unsigned int vcpus;
};

/*
 * The record of the one VM whose domain maps a task's stack, by task: a
 * stack holds the residue of the exits it handled, and no VM's domain may
 * map another VM's. A task that runs a vCPU of another VM takes its stack
 * from the first (kvm_asi_take_stack()). kvm_asi_stacks_lock, taken before
 * any VM's asi_lock, covers finding a record there and freeing one: a
 * record found holds its VM, whose vCPUs cannot drop it meanwhile.
 */
static DEFINE_MUTEX(kvm_asi_stacks_lock);
static DEFINE_XARRAY(kvm_asi_task_stacks);

/* Unmap a record's stack; it stays allocated for its vCPUs. */
static void kvm_asi_unmap_stack(struct kvm *kvm, struct kvm_asi_stack *st)
{
	lockdep_assert_held(&kvm_asi_stacks_lock);
	lockdep_assert_held(&kvm->arch.asi_lock);
	list_del(&st->list);
	xa_cmpxchg(&kvm_asi_task_stacks, (unsigned long)st->task, st, NULL, GFP_KERNEL);
	asi_unmap_task(kvm->arch.asi, st->task);
	WRITE_ONCE(st->task, NULL);
}

/* Drop the vCPU's stack; unmap it if no other vCPU uses it. */
static void kvm_asi_put_stack(struct kvm_vcpu *vcpu)
{
	struct kvm_asi_stack *st = vcpu->arch.asi.stack;
	struct kvm *kvm = vcpu->kvm;

	lockdep_assert_held(&kvm_asi_stacks_lock);
	lockdep_assert_held(&kvm->arch.asi_lock);
	if (!st)
		return;
	vcpu->arch.asi.stack = NULL;
	if (--st->vcpus)
		return;
	if (st->task)
		kvm_asi_unmap_stack(kvm, st);
	kfree(st);
}

/*
 * The calling task is about to run a vCPU of @kvm: if another VM's domain
 * maps its stack, unmap it there. That VM's vCPUs that the task last ran
 * map it again when they next run. Before @kvm's lock is taken: the other
 * VM's is taken alone.
 */
static void kvm_asi_take_stack(struct kvm *kvm)
{
	struct kvm_asi_stack *st;
	struct kvm *other;

	lockdep_assert_held(&kvm_asi_stacks_lock);
	st = xa_load(&kvm_asi_task_stacks, (unsigned long)current);
	if (!st || st->kvm == kvm)
		return;
	other = st->kvm;
	mutex_lock(&other->arch.asi_lock);
	kvm_asi_unmap_stack(other, st);
	mutex_unlock(&other->arch.asi_lock);
}

/**
 * kvm_asi_vcpu_run() - map the calling task's stack for a vCPU
 * @vcpu: the vCPU about to run, at the start of KVM_RUN
 *
 * Return: 0, or -ENOMEM if the stack could not be mapped (KVM_RUN fails
 * then, with nothing left behind).
 */
int kvm_asi_vcpu_run(struct kvm_vcpu *vcpu)
{
	struct kvm *kvm = vcpu->kvm;
	struct kvm_asi_stack *st = vcpu->arch.asi.stack;
	int err = 0;

	if (!kvm->arch.asi || (st && READ_ONCE(st->task) == current))
		return 0;

	mutex_lock(&kvm_asi_stacks_lock);
	kvm_asi_take_stack(kvm);
	mutex_lock(&kvm->arch.asi_lock);
	kvm_asi_put_stack(vcpu);
	list_for_each_entry(st, &kvm->arch.asi_stacks, list) {
		if (st->task == current)
			goto found;
	}
	st = kzalloc(sizeof(*st), GFP_KERNEL_ACCOUNT);
	if (!st) {
		err = -ENOMEM;
		goto out;
	}
	st->kvm = kvm;
	err = xa_err(xa_store(&kvm_asi_task_stacks, (unsigned long)current, st,
			      GFP_KERNEL_ACCOUNT));
	if (err)
		goto free;
	err = asi_map_task(kvm->arch.asi, current, "vCPU task");
	if (err) {
		xa_erase(&kvm_asi_task_stacks, (unsigned long)current);
		goto free;
	}
	WRITE_ONCE(st->task, current);
	list_add(&st->list, &kvm->arch.asi_stacks);
found:
	st->vcpus++;
	vcpu->arch.asi.stack = st;
	kvm_asi_core_cookie_adopt(kvm);
out:
	mutex_unlock(&kvm->arch.asi_lock);
	mutex_unlock(&kvm_asi_stacks_lock);
	return err;
free:
	kfree(st);
	goto out;
}

/**
 * kvm_asi_vcpu_destroy() - release what a vCPU holds in its VM's domain
 * @vcpu: the vCPU being destroyed
 */
void kvm_asi_vcpu_destroy(struct kvm_vcpu *vcpu)
{
	struct kvm *kvm = vcpu->kvm;

	if (!kvm->arch.asi)
		return;
	kvm_asi_vcpu_unmap_all(vcpu);
	if (vcpu->arch.asi.cpuid) {
		asi_unmap(kvm->arch.asi, vcpu->arch.asi.cpuid, vcpu->arch.asi.cpuid_len);
		vcpu->arch.asi.cpuid = NULL;
	}
	mutex_lock(&kvm_asi_stacks_lock);
	mutex_lock(&kvm->arch.asi_lock);
	kvm_asi_put_stack(vcpu);
	mutex_unlock(&kvm->arch.asi_lock);
	mutex_unlock(&kvm_asi_stacks_lock);
}

/**
 * kvm_asi_vcpu_map() - map a vCPU's data into its VM's domain
 * @vcpu: the vCPU
 * @addr: the data; whole pages that belong to this vCPU alone
 * @len: its length in bytes
 * @owner: what it is, for debugfs (a string with static lifetime)
 *
 * For the vCPU's data that every VM-entry or common exit touches. The
 * mapping lasts until kvm_asi_vcpu_unmap_all(), which destroying the vCPU
 * calls before anything of it is freed. A no-op with ASI off.
 *
 * Return: 0, -ENOSPC when the vCPU has no room for another record, or
 * asi_map()'s error.
 */
int kvm_asi_vcpu_map(struct kvm_vcpu *vcpu, const void *addr, size_t len,
		     const char *owner)
{
	struct kvm_asi_vcpu *av = &vcpu->arch.asi;
	struct asi *asi = vcpu->kvm->arch.asi;
	int err;

	if (!asi)
		return 0;
	if (WARN_ON_ONCE(av->nr_maps == ARRAY_SIZE(av->maps)))
		return -ENOSPC;
	err = asi_map(asi, addr, len, owner);
	if (err)
		return err;
	av->maps[av->nr_maps].addr = addr;
	av->maps[av->nr_maps].len = len;
	av->nr_maps++;
	return 0;
}
EXPORT_SYMBOL_GPL(kvm_asi_vcpu_map);

/**
 * kvm_asi_vcpu_unmap_all() - unmap what kvm_asi_vcpu_map() mapped
 * @vcpu: the vCPU
 *
 * In reverse order of mapping, flushing every CPU: the memory may be
 * freed right after.
 */
void kvm_asi_vcpu_unmap_all(struct kvm_vcpu *vcpu)
{
	struct kvm_asi_vcpu *av = &vcpu->arch.asi;

	while (av->nr_maps) {
		av->nr_maps--;
		asi_unmap(vcpu->kvm->arch.asi, av->maps[av->nr_maps].addr,
			  av->maps[av->nr_maps].len);
	}
}
EXPORT_SYMBOL_GPL(kvm_asi_vcpu_unmap_all);

/**
 * kvm_asi_vcpu_set_cpuid() - map the CPUID entries a vCPU is about to take
 * @vcpu: the vCPU
 * @e2: the new entries, kvmalloc()ed; replaced by a mapped copy
 * @nent: their number
 *
 * CPUID exits look the entries up, so the domain maps them: a vmalloc()ed
 * copy, which owns its pages, replaces *@e2 (freed here). The previous
 * entries are unmapped, as the caller frees them next. A no-op with ASI
 * off.
 *
 * Return: 0, or -ENOMEM or asi_map()'s error, *@e2 and the previous
 * entries' mapping unchanged then.
 */
int kvm_asi_vcpu_set_cpuid(struct kvm_vcpu *vcpu, struct kvm_cpuid_entry2 **e2,
			   int nent)
{
	struct kvm_asi_vcpu *av = &vcpu->arch.asi;
	struct asi *asi = vcpu->kvm->arch.asi;
	size_t len = nent * sizeof(**e2);
	void *copy = NULL;
	int err;

	if (!asi)
		return 0;
	if (nent) {
		copy = __vmalloc(len, GFP_KERNEL_ACCOUNT);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, *e2, len);
		err = asi_map(asi, copy, len, "CPUID entries");
		if (err) {
			vfree(copy);
			return err;
		}
		kvfree(*e2);
		*e2 = copy;
	}
	if (av->cpuid)
		asi_unmap(asi, av->cpuid, av->cpuid_len);
	av->cpuid = copy;
	av->cpuid_len = len;
	return 0;
}

/**
 * kvm_asi_vcpu_create() - map a new vCPU's own data into its VM's domain
 * @vcpu: the vCPU, created by the vendor module
 *
 * Return: 0, or the error of mapping; on error whatever the vCPU had
 * mapped, the vendor's mappings included, is unmapped.
 */
int kvm_asi_vcpu_create(struct kvm_vcpu *vcpu)
{
	int err;

	if (!vcpu->kvm->arch.asi)
		return 0;

	/* The vendor module mapped its struct, with struct kvm_vcpu. */
	err = kvm_asi_vcpu_map(vcpu, vcpu->run, PAGE_SIZE, "kvm_run");
	if (!err)
		err = kvm_asi_vcpu_map(vcpu, vcpu->arch.pio_data, PAGE_SIZE, "PIO data");
	if (!err && vcpu->arch.apic)
		err = kvm_asi_vcpu_map(vcpu, vcpu->arch.apic,
				       sizeof(*vcpu->arch.apic), "local APIC");
	if (!err && vcpu->arch.apic)
		err = kvm_asi_vcpu_map(vcpu, vcpu->arch.apic->regs, PAGE_SIZE,
				       "local APIC registers");
	if (!err)
		err = kvm_asi_vcpu_map(vcpu, vcpu->arch.emulate_ctxt,
				       sizeof(*vcpu->arch.emulate_ctxt), "emulator context");
	if (err)
		kvm_asi_vcpu_unmap_all(vcpu);
	return err;
}

/*
 * Leave the VM's domain if this CPU is in it. True if this call switched
 * the CPU off the restricted table (and the core counted it under
 * @reason); false if it was not in the domain, or was in it on the full
 * table already after a fallback, which the core counted as such.
 * Interrupts off around it: asi_exit() must not see an interrupt and a
 * migration between its read of the CPU's state and its CR3 write.
 */
static bool kvm_asi_switch_out(struct kvm_vcpu *vcpu, enum asi_exit_reason reason)
{
	struct asi *asi = vcpu->kvm->arch.asi;
	unsigned long flags, before;
	bool left = false;

	if (!asi)
		return false;
	local_irq_save(flags);
	if (asi_current() == asi) {
		before = this_cpu_read(asi_cpu.exits[reason]);
		asi_exit(reason);
		left = this_cpu_read(asi_cpu.exits[reason]) != before;
	}
	local_irq_restore(flags);
	return left;
}

/**
 * kvm_asi_leave() - leave the VM's domain, if this CPU is in it
 * @vcpu: the vCPU this task runs
 * @reason: why, for the statistics
 *
 * From any context.
 */
void kvm_asi_leave(struct kvm_vcpu *vcpu, enum asi_exit_reason reason)
{
	kvm_asi_switch_out(vcpu, reason);
}

/**
 * kvm_arch_asi_leave() - leave the VM's domain before work that needs the full table
 * @vcpu: the vCPU, run by the calling task
 * @why: what the work is, counted in the vCPU's statistics
 *
 * For work between VM-exit and VM-entry that reads what no domain can
 * map: arming or cancelling the APIC timer's hrtimer (this CPU's hrtimer
 * base, and a timer queue whose nodes are other tasks' and VMs'),
 * signalling an ioeventfd (the eventfd's wait queue, and the wakeup of a
 * VMM thread: another task's scheduler state), looking up the host page
 * behind a guest page (the VMM's mm and page tables, and a page
 * allocation when the page is new), searching for a vCPU to yield to
 * (the VM's vCPU xarray, other vCPUs' state and the scheduler's). Leaving
 * first costs the switch without the page fault, the fallback's
 * bookkeeping and the retry, and the counters tell these exits apart from
 * fallbacks, which are to be tuned away. The next VM-entry flushes as
 * after any exit from the table: the CPU used the full map. Counted only
 * when this call switched the CPU off the table (not when it was off
 * already, or on the full table after a fallback): the timer, ioeventfd
 * and page-lookup exits in asi_exits_planned_<cause>; work on other vCPUs
 * and their tasks (a directed yield, waking a blocked vCPU, Hyper-V's
 * lookups of the VM's vCPUs) in asi_exits_sched, as after a halt. From
 * any context.
 */
void kvm_arch_asi_leave(struct kvm_vcpu *vcpu, enum kvm_asi_leave why)
{
	u64 *planned;

	switch (why) {
	case KVM_ASI_LEAVE_TIMER:
		planned = &vcpu->stat.asi_exits_planned_timer;
		break;
	case KVM_ASI_LEAVE_IOEVENTFD:
		planned = &vcpu->stat.asi_exits_planned_ioeventfd;
		break;
	case KVM_ASI_LEAVE_FAULTIN:
		planned = &vcpu->stat.asi_exits_planned_faultin;
		break;
	default:
		/* Summed into asi_exits_sched by kvm_asi_vcpu_put(). */
		kvm_asi_switch_out(vcpu, ASI_EXIT_SCHED);
		return;
	}
	if (kvm_asi_switch_out(vcpu, ASI_EXIT_PLANNED))
		(*planned)++;
}
EXPORT_SYMBOL_GPL(kvm_arch_asi_leave);

/**
 * kvm_asi_vcpu_run_end() - KVM_RUN is returning to user space
 * @vcpu: the vCPU
 *
 * Leave the domain now, not only on the way to user space, since task
 * work on that way may destroy the VM.
 */
void kvm_asi_vcpu_run_end(struct kvm_vcpu *vcpu)
{
	kvm_asi_leave(vcpu, ASI_EXIT_OWNER);
}

/**
 * kvm_asi_vcpu_load() - the vCPU is loaded on this CPU
 * @vcpu: the vCPU
 *
 * Snapshots this CPU's ASI counters: until kvm_asi_vcpu_put(), what they
 * count is the vCPU's. Preemption is off.
 */
void kvm_asi_vcpu_load(struct kvm_vcpu *vcpu)
{
	struct asi_cpu_state *st = this_cpu_ptr(&asi_cpu);
	struct kvm_asi_vcpu *av = &vcpu->arch.asi;

	if (!vcpu->kvm->arch.asi)
		return;
	av->enters = READ_ONCE(st->enters);
	av->fallbacks = READ_ONCE(st->fallbacks);
	av->fallbacks_irq = READ_ONCE(st->fallbacks_irq);
	av->exits_owner = READ_ONCE(st->exits[ASI_EXIT_OWNER]);
	av->exits_sched = READ_ONCE(st->exits[ASI_EXIT_SCHED]);
	av->exits_user = READ_ONCE(st->exits[ASI_EXIT_USER]);
	av->exits_interrupt = READ_ONCE(st->exits[ASI_EXIT_INTERRUPT]);
}

#define KVM_ASI_ADD(vcpu, name, delta)					\
	do {								\
		struct kvm_vcpu *__v = (vcpu);				\
		u64 __d = (delta);					\
									\
		__v->stat.asi_##name += __d;				\
		atomic64_add(__d, &__v->kvm->stat.vm_asi_##name);	\
	} while (0)

/* Add what the vCPU counted since the last put to the VM's sum. */
#define KVM_ASI_SUM(vcpu, name)						\
	do {								\
		struct kvm_vcpu *__v = (vcpu);				\
		u64 *__seen = &__v->arch.asi.name;			\
									\
		atomic64_add(__v->stat.asi_##name - *__seen,		\
			     &__v->kvm->stat.vm_asi_##name);		\
		*__seen = __v->stat.asi_##name;				\
	} while (0)

/**
 * kvm_asi_vcpu_put() - the vCPU leaves this CPU
 * @vcpu: the vCPU
 *
 * On a schedule-out (a preempt notifier, ahead of the context switch
 * itself) leaves the domain, so that the switch is the vCPU's and counted
 * as such; then adds what this CPU counted since kvm_asi_vcpu_load() to
 * the vCPU's and the VM's statistics. Preemption is off.
 */
void kvm_asi_vcpu_put(struct kvm_vcpu *vcpu)
{
	struct asi_cpu_state *st = this_cpu_ptr(&asi_cpu);
	struct kvm_asi_vcpu *av = &vcpu->arch.asi;
	unsigned long fallbacks, irq;

	if (!vcpu->kvm->arch.asi)
		return;
	kvm_asi_leave(vcpu, ASI_EXIT_SCHED);

	fallbacks = READ_ONCE(st->fallbacks) - av->fallbacks;
	irq = READ_ONCE(st->fallbacks_irq) - av->fallbacks_irq;
	KVM_ASI_ADD(vcpu, enters, READ_ONCE(st->enters) - av->enters);
	KVM_ASI_ADD(vcpu, fallbacks, fallbacks);
	/* Named as the core's exit reasons, plus the fallbacks. */
	KVM_ASI_ADD(vcpu, exits_owner, READ_ONCE(st->exits[ASI_EXIT_OWNER]) - av->exits_owner);
	KVM_ASI_ADD(vcpu, exits_sched, READ_ONCE(st->exits[ASI_EXIT_SCHED]) - av->exits_sched);
	KVM_ASI_ADD(vcpu, exits_user, READ_ONCE(st->exits[ASI_EXIT_USER]) - av->exits_user);
	KVM_ASI_ADD(vcpu, exits_interrupt,
		    READ_ONCE(st->exits[ASI_EXIT_INTERRUPT]) - av->exits_interrupt + irq);
	KVM_ASI_ADD(vcpu, exits_fallback, fallbacks - irq);
	/* Counted around VM-entry, into the vCPU's stats only: sum them here. */
	KVM_ASI_SUM(vcpu, flushes);
	KVM_ASI_SUM(vcpu, flushes_skipped);
	KVM_ASI_SUM(vcpu, late_fallbacks);
	KVM_ASI_SUM(vcpu, smt_waits);
	KVM_ASI_SUM(vcpu, smt_kicks);
	KVM_ASI_SUM(vcpu, exits_planned_timer);
	KVM_ASI_SUM(vcpu, exits_planned_ioeventfd);
	KVM_ASI_SUM(vcpu, exits_planned_faultin);
	WARN_ONCE(av->late_task,
		  "KVM ASI: %lu fallbacks between the flush decision and VM-entry, not an NMI's: see the VM's asi/faults\n",
		  av->late_task);
	av->late_task = 0;
}
