// SPDX-License-Identifier: GPL-2.0
/*
 * KVM and Address Space Isolation: one ASI domain per VM.
 *
 * The domain is created with the VM (a failure fails KVM_CREATE_VM) and
 * destroyed with it, after every vCPU is gone. It maps, beyond the
 * always-mapped set and the allowlist of the ASI core, the VM's own data:
 * so far struct kvm and its arch part (one vmalloc area of whole pages,
 * shared with nothing else) and the kernel stacks of the tasks that run
 * its vCPUs. Everything else KVM touches on the restricted table still
 * falls back to the full table; the per-vCPU statistics asi_enters and
 * asi_fallbacks say how often.
 *
 * The stack is not optional: a CPU on a restricted table that takes an
 * exception pushes its frame onto the current stack, and an unmapped one
 * turns every fault into a double fault. A task's stack is mapped when it
 * first runs one of the VM's vCPUs (KVM_RUN) and unmapped when no vCPU of
 * the VM was last run by it, with a reference on the stack in between, so
 * that it cannot be freed while mapped (the task may exit first).
 */
#include <linux/asi.h>
#include <linux/kvm_host.h>
#include <linux/sched/task.h>
#include <linux/slab.h>

#include "asi.h"

/**
 * kvm_asi_init_vm() - give a new VM its ASI domain
 * @kvm: the VM, its arch part allocated
 *
 * Return: 0 (also with ASI off: then there is no domain), or the error of
 * creating or populating the domain; nothing is left behind on error.
 */
int kvm_asi_init_vm(struct kvm *kvm)
{
	char name[32];
	struct asi *asi;
	int err;

	mutex_init(&kvm->arch.asi_lock);
	INIT_LIST_HEAD(&kvm->arch.asi_stacks);
	if (!asi_enabled())
		return 0;

	snprintf(name, sizeof(name), "kvm-%d", task_pid_nr(current));
	asi = asi_create(name);
	if (IS_ERR(asi))
		return PTR_ERR(asi);

	/* struct kvm is vmalloc()ed on x86: whole pages of its own. */
	err = asi_map(asi, kvm, kvm_x86_ops.vm_size, "struct kvm");
	if (err) {
		asi_put(asi);
		return err;
	}
	kvm->arch.asi = asi;
	return 0;
}

/**
 * kvm_asi_destroy_vm() - destroy a VM's ASI domain
 * @kvm: the VM, every vCPU already destroyed
 *
 * Unmaps the VM's data (before it is freed) and drops the domain.
 */
void kvm_asi_destroy_vm(struct kvm *kvm)
{
	struct asi *asi = kvm->arch.asi;

	if (!asi)
		return;
	WARN_ON_ONCE(!list_empty(&kvm->arch.asi_stacks));
	kvm->arch.asi = NULL;
	asi_unmap(asi, kvm, kvm_x86_ops.vm_size);
	asi_put(asi);
}

/*
 * A task's kernel stack, mapped in a VM's domain for as long as one of the
 * VM's vCPUs was last run by the task. On kvm->arch.asi_stacks, under
 * kvm->arch.asi_lock.
 */
struct kvm_asi_stack {
	struct list_head list;
	struct task_struct *task;
	unsigned int vcpus;
};

/* Drop the vCPU's stack; unmap it if no other vCPU uses it. */
static void kvm_asi_put_stack(struct kvm_vcpu *vcpu)
{
	struct kvm_asi_stack *st = vcpu->arch.asi_stack;
	struct kvm *kvm = vcpu->kvm;

	lockdep_assert_held(&kvm->arch.asi_lock);
	if (!st)
		return;
	vcpu->arch.asi_stack = NULL;
	if (--st->vcpus)
		return;
	list_del(&st->list);
	asi_unmap_task_stack(kvm->arch.asi, st->task);
	put_task_struct(st->task);
	kfree(st);
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
	struct kvm_asi_stack *st = vcpu->arch.asi_stack;
	int err = 0;

	if (!kvm->arch.asi || (st && st->task == current))
		return 0;

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
	err = asi_map_task_stack(kvm->arch.asi, current, "vCPU task stack");
	if (err) {
		kfree(st);
		goto out;
	}
	st->task = get_task_struct(current);
	list_add(&st->list, &kvm->arch.asi_stacks);
found:
	st->vcpus++;
	vcpu->arch.asi_stack = st;
out:
	mutex_unlock(&kvm->arch.asi_lock);
	return err;
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
	mutex_lock(&kvm->arch.asi_lock);
	kvm_asi_put_stack(vcpu);
	mutex_unlock(&kvm->arch.asi_lock);
}
