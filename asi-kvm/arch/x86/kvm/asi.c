// SPDX-License-Identifier: GPL-2.0
/*
 * KVM and Address Space Isolation: one ASI domain per VM.
 *
 * The domain is created with the VM (a failure fails KVM_CREATE_VM) and
 * destroyed with it, after every vCPU is gone. It maps, beyond the
 * always-mapped set and the allowlist of the ASI core, the VM's own data:
 *
 * - struct kvm and its arch part (one vmalloc area of whole pages);
 * - each vCPU: the kvm_run and PIO pages, the local APIC and its register
 *   page, the emulator context, and what the vendor module maps with
 *   kvm_asi_vcpu_map(): its vCPU struct (from a cache of page-sized
 *   objects with ASI on), and on SVM the VMCB and the MSR permission map;
 *   its CPUID entries (a vmalloc()ed copy, replaced with them); on SVM,
 *   once the guest has turned EFER.SVME on, vmcb02 and the nested MSR
 *   permission map (kvm_asi_map(); kept until the vCPU is
 *   destroyed). Not the guest FPU state: XFD may reallocate it, and
 *   nothing would unmap the old one before it is freed;
 * - the per-CPU read-side counters of the VM's SRCU structs (page-owned
 *   with ASI on), which every exit takes;
 * - the kernel stacks and task_structs of the tasks that run its vCPUs;
 * - the user half of the VMM's mm (asi_share_user()): guest memory is
 *   reached through the VMM's mappings, by uaccess (instruction fetch and
 *   guest page-table walks of the emulator, kvm_read_guest()). What the
 *   VMM maps is the VMM's and its VM's, not another VM's: a process with
 *   two VMs shares its user half with neither (kvm_asi_share_user()).
 * - the VM's memslots (whole pages with ASI on), which every guest
 *   memory access looks up;
 * - the I/O buses and the in-kernel PIC and IOAPIC (kvm_arch_asi_map(),
 *   kvm_asi_map()), which in-kernel PIO and MMIO exits go through. The
 *   buses are replaced on every device registration: the new one is
 *   mapped before it is installed, the old one unmapped before it is
 *   freed.
 * - the MMU's page tables, their kvm_mmu_page headers, translation pages
 *   and struct pages, from a pool of blocks of whole memory map pages (see
 *   below), which MMIO and NPT faults, and with the shadow MMU INVLPG and
 *   CR3 writes, walk;
 * - the memslots' rmaps, large page info and write-tracking counts
 *   (kvm_asi_vcalloc()), which page faults read;
 * - the memslots' dirty bitmaps and the vCPUs' dirty rings
 *   (kvm_arch_asi_map()), which page faults that log a page dirty write.
 *
 * Everything else KVM touches on the restricted table falls back to the
 * full table; the per-vCPU and per-VM statistics and the VM's debugfs
 * fault log (asi/faults) say how often and where.
 *
 * The stack is not optional: a CPU on a restricted table that takes an
 * exception pushes its frame onto the current stack, and an unmapped one
 * turns every fault into a double fault. A task's stack is mapped when it
 * first runs one of the VM's vCPUs (KVM_RUN) and unmapped when no vCPU of
 * the VM was last run by it, or when it runs another VM's vCPU, with
 * references on the stack and the task in between, so that neither can be
 * freed while mapped.
 */
#include <linux/asi.h>
#include <linux/debugfs.h>
#include <linux/kvm_host.h>
#include <linux/sched/smt.h>
#include <linux/sched/task.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "kvm_emulate.h"
#include "lapic.h"
#include "mmu/mmu_internal.h"

#include "asi.h"

/* Unmap @ssp's per-CPU data from @asi, on the CPUs before @end. */
static void kvm_asi_unmap_srcu(struct asi *asi, struct srcu_struct *ssp,
			       unsigned int end)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu) {
		if (cpu >= end)
			break;
		asi_unmap(asi, per_cpu_ptr(ssp->sda, cpu), sizeof(struct srcu_data));
	}
}

/*
 * Map @ssp's per-CPU data, which srcu_read_lock() and srcu_read_unlock()
 * write: KVM takes kvm->srcu around every VM-entry. With ASI on each CPU's
 * srcu_data has a page of its own (see init_srcu_struct_fields()).
 */
static int kvm_asi_map_srcu(struct asi *asi, struct srcu_struct *ssp,
			    const char *owner)
{
	unsigned int cpu;
	int err;

	for_each_possible_cpu(cpu) {
		err = asi_map(asi, per_cpu_ptr(ssp->sda, cpu),
			      sizeof(struct srcu_data), owner);
		if (err) {
			kvm_asi_unmap_srcu(asi, ssp, cpu);
			return err;
		}
	}
	return 0;
}

/* The buses kvm_create_vm() made, before the domain existed. */
static int kvm_asi_map_buses(struct kvm *kvm, struct asi *asi)
{
	struct kvm_io_bus *bus;
	int i, err;

	for (i = 0; i < KVM_NR_BUSES; i++) {
		bus = rcu_dereference_protected(kvm->buses[i], 1);
		err = asi_map(asi, bus, struct_size(bus, range, bus->dev_count), "I/O bus");
		if (err)
			goto err_unmap;
	}
	return 0;

err_unmap:
	while (i--) {
		bus = rcu_dereference_protected(kvm->buses[i], 1);
		asi_unmap(asi, bus, struct_size(bus, range, bus->dev_count));
	}
	return err;
}

/*
 * The VMs with a domain, by VMM process: a domain shares the VMM's user
 * half only while its VM is the process's only one. With two VMs in one
 * process each VM's guest memory is in the other's user half; neither
 * shares it then, and KVM's accesses to guest memory on the restricted
 * table fall back (counted, and named in the fault log as uaccess to
 * user addresses). A VM created once the others are gone shares again.
 */
struct kvm_asi_vmm_vm {
	struct list_head list;
	struct kvm *kvm;
	struct asi *asi;
};

static DEFINE_MUTEX(kvm_asi_vmm_lock);
static LIST_HEAD(kvm_asi_vmm_vms);

static int kvm_asi_share_user(struct kvm *kvm, struct asi *asi)
{
	struct kvm_asi_vmm_vm *rec, *v;
	unsigned int others = 0;
	int err = 0;

	rec = kzalloc(sizeof(*rec), GFP_KERNEL_ACCOUNT);
	if (!rec)
		return -ENOMEM;
	rec->kvm = kvm;
	rec->asi = asi;
	mutex_lock(&kvm_asi_vmm_lock);
	list_for_each_entry(v, &kvm_asi_vmm_vms, list) {
		if (v->kvm->mm != kvm->mm)
			continue;
		others++;
		asi_unshare_user(v->asi);	/* a no-op unless it shares */
	}
	/* Said once per process, when its second VM stops the sharing. */
	if (others == 1)
		pr_info_ratelimited("kvm-asi: process %d holds two VMs; their domains do not map its user memory\n",
				    task_pid_nr(current));
	if (!others)
		err = asi_share_user(asi, kvm->mm);
	if (!err)
		list_add(&rec->list, &kvm_asi_vmm_vms);
	mutex_unlock(&kvm_asi_vmm_lock);
	if (err)
		kfree(rec);
	return err;
}

static void kvm_asi_forget_vmm(struct kvm *kvm)
{
	struct kvm_asi_vmm_vm *v;

	mutex_lock(&kvm_asi_vmm_lock);
	list_for_each_entry(v, &kvm_asi_vmm_vms, list) {
		if (v->kvm == kvm) {
			list_del(&v->list);
			kfree(v);
			break;
		}
	}
	mutex_unlock(&kvm_asi_vmm_lock);
}

/*
 * SMT: with ASI on and SMT active when a VM is created, KVM gives the VM a
 * core-scheduling cookie and every task that runs one of its vCPUs adopts
 * it (kvm_asi_vcpu_run()), so that the scheduler puts on a core's other
 * thread only a vCPU task of the same VM, or nothing: the sibling protocol
 * (asm/asi.h) then rarely has to hold a guest back. A task that has a
 * cookie already keeps it (the VMM chose, with prctl(PR_SCHED_CORE)); it
 * is counted in the VM's core_cookie_foreign stat, and the protocol still
 * keeps the guests apart, at the cost of waits (smt_waits). Turned off
 * with kvm.asi_core_sched=0, for VMMs that manage cookies themselves.
 */
static bool asi_core_sched = true;
module_param(asi_core_sched, bool, 0644);
MODULE_PARM_DESC(asi_core_sched,
		 "With asi=on on SMT hosts, give each VM's vCPU tasks a core-scheduling cookie of the VM's own (default: on)");

static void kvm_asi_core_cookie_create(struct kvm *kvm)
{
	if (READ_ONCE(asi_core_sched) && sched_smt_active())
		kvm->arch.asi_core_cookie = sched_core_cookie_create();
}

void kvm_asi_core_cookie_adopt(struct kvm *kvm)
{
	unsigned long cookie = kvm->arch.asi_core_cookie;

	if (cookie && !sched_core_cookie_adopt(current, cookie))
		atomic64_inc(&kvm->stat.vm_asi_core_cookie_foreign);
}

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
	kvm_asi_pt_init(&kvm->arch.asi_pt_pool);
	if (!asi_enabled())
		return 0;

	snprintf(name, sizeof(name), "kvm-%d", task_pid_nr(current));
	asi = asi_create(name);
	if (IS_ERR(asi))
		return PTR_ERR(asi);

	/* struct kvm is vmalloc()ed on x86: whole pages of its own. */
	err = asi_map(asi, kvm, kvm_x86_ops.vm_size, "struct kvm");
	if (err)
		goto err_put;
	/* Guest memory, as KVM reaches it: through the VMM's mappings. */
	err = kvm_asi_share_user(kvm, asi);
	if (err)
		goto err_unmap_kvm;
	err = kvm_asi_map_srcu(asi, &kvm->srcu, "kvm->srcu");
	if (err)
		goto err_forget;
	err = kvm_asi_map_srcu(asi, &kvm->irq_srcu, "kvm->irq_srcu");
	if (err)
		goto err_unmap_srcu;
	err = kvm_asi_map_buses(kvm, asi);
	if (err)
		goto err_unmap_irq_srcu;
	kvm->arch.asi = asi;
	kvm_asi_core_cookie_create(kvm);
	return 0;

err_unmap_irq_srcu:
	kvm_asi_unmap_srcu(asi, &kvm->irq_srcu, nr_cpu_ids);
err_unmap_srcu:
	kvm_asi_unmap_srcu(asi, &kvm->srcu, nr_cpu_ids);
err_forget:
	kvm_asi_forget_vmm(kvm);
err_unmap_kvm:
	asi_unmap(asi, kvm, kvm_x86_ops.vm_size);
err_put:
	asi_put(asi);
	return err;
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
	kvm_asi_forget_vmm(kvm);
	kvm->arch.asi = NULL;
	sched_core_cookie_put(kvm->arch.asi_core_cookie);
	kvm->arch.asi_core_cookie = 0;
	kvm_asi_pt_destroy(kvm, asi);
	kvm_asi_unmap_srcu(asi, &kvm->irq_srcu, nr_cpu_ids);
	kvm_asi_unmap_srcu(asi, &kvm->srcu, nr_cpu_ids);
	asi_unmap(asi, kvm, kvm_x86_ops.vm_size);
	asi_put(asi);
}

/**
 * kvm_asi_map() - map a VM's data into its domain
 * @kvm: the VM
 * @addr: the data; whole pages that belong to this VM alone
 * @len: its length in bytes
 * @owner: what it is, for debugfs (a string with static lifetime)
 *
 * For the VM's data that common exits touch and that is allocated after
 * the VM: the in-kernel PIC and IOAPIC, the MSR filter, the APIC map, and
 * vCPU state allocated after the vCPU (SVM's nested state, when the guest
 * first turns EFER.SVME on). The one way for x86 KVM code to map a VM's
 * data; kvm_asi_vcpu_map() is the one for a vCPU's. A no-op with ASI off.
 *
 * Return: 0 or asi_map()'s error; nothing is mapped then.
 */
int kvm_asi_map(struct kvm *kvm, const void *addr, size_t len, const char *owner)
{
	if (!kvm->arch.asi)
		return 0;
	return asi_map(kvm->arch.asi, addr, len, owner);
}
EXPORT_SYMBOL_GPL(kvm_asi_map);

/**
 * kvm_asi_unmap() - unmap what kvm_asi_map() mapped
 * @kvm: the VM
 * @addr: @addr given to kvm_asi_map()
 * @len: @len given to kvm_asi_map()
 *
 * Flushes as asi_unmap() does before returning: the memory may be freed
 * right after. A no-op with ASI off and once the domain is gone (its
 * destruction dropped every mapping).
 */
void kvm_asi_unmap(struct kvm *kvm, const void *addr, size_t len)
{
	if (kvm->arch.asi)
		asi_unmap(kvm->arch.asi, addr, len);
}
EXPORT_SYMBOL_GPL(kvm_asi_unmap);

/*
 * The same for generic KVM code (virt/kvm/: the I/O buses, the dirty
 * bitmap and ring, ioeventfds), through <linux/kvm_host.h>.
 */
int kvm_arch_asi_map(struct kvm *kvm, const void *addr, size_t len, const char *owner)
{
	return kvm_asi_map(kvm, addr, len, owner);
}

void kvm_arch_asi_unmap(struct kvm *kvm, const void *addr, size_t len)
{
	kvm_asi_unmap(kvm, addr, len);
}

/**
 * kvm_asi_vcalloc() - allocate a VM's array, mapped into its domain
 * @kvm: the VM
 * @n: number of elements
 * @size: size of an element
 * @owner: what it is, for debugfs (a string with static lifetime)
 *
 * __vcalloc(), and with ASI on mapped into the VM's domain: vmalloc()
 * gives the array pages of its own. For the memslots' MMU metadata
 * (rmaps, large page info, write-tracking counts), which page faults read
 * on the VM's restricted table. Can sleep.
 *
 * Return: the zeroed array, to be freed with kvm_asi_vfree(); NULL when
 * it could not be allocated or mapped (nothing is left behind then).
 */
void *kvm_asi_vcalloc(struct kvm *kvm, size_t n, size_t size, const char *owner)
{
	void *p = __vcalloc(n, size, GFP_KERNEL_ACCOUNT);

	if (p && kvm_arch_asi_map(kvm, p, n * size, owner)) {
		vfree(p);
		p = NULL;
	}
	return p;
}

/**
 * kvm_asi_vfree() - unmap and free what kvm_asi_vcalloc() allocated
 * @kvm: the VM
 * @p: the array, or NULL
 * @n: @n given to kvm_asi_vcalloc()
 * @size: @size given to kvm_asi_vcalloc()
 *
 * Flushes as asi_unmap() does before the array is freed.
 */
void kvm_asi_vfree(struct kvm *kvm, void *p, size_t n, size_t size)
{
	if (!p)
		return;
	kvm_arch_asi_unmap(kvm, p, n * size);
	vfree(p);
}

/**
 * kvm_asi_map_memslot() - map a memslot that is about to be installed
 * @kvm: the VM
 * @slot: the new slot, allocated in whole pages with ASI on
 *
 * Every guest memory access through the memslots (gfn_to_memslot(), the
 * emulator's guest page-table walks) reads the slot. A no-op with ASI off.
 *
 * Return: 0 or asi_map()'s error; the slot is not mapped then.
 */
int kvm_asi_map_memslot(struct kvm *kvm, struct kvm_memory_slot *slot)
{
	int err;

	slot->arch.asi_mapped = false;
	if (!kvm->arch.asi)
		return 0;
	err = asi_map(kvm->arch.asi, slot, sizeof(*slot), "memslot");
	if (!err)
		slot->arch.asi_mapped = true;
	return err;
}

/**
 * kvm_asi_unmap_memslot() - unmap a memslot before it is freed
 * @kvm: the VM
 * @slot: the slot, no longer reachable by any vCPU
 *
 * A no-op if the slot was not mapped, or once the domain is gone.
 */
void kvm_asi_unmap_memslot(struct kvm *kvm, struct kvm_memory_slot *slot)
{
	if (!slot->arch.asi_mapped)
		return;
	slot->arch.asi_mapped = false;
	if (kvm->arch.asi)
		asi_unmap(kvm->arch.asi, slot, sizeof(*slot));
}
