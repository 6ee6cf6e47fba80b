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
 *   permission map (kvm_arch_asi_map(); kept until the vCPU is
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
 * - the I/O buses and the in-kernel PIC and IOAPIC (kvm_arch_asi_map()),
 *   which in-kernel PIO and MMIO exits go through. The buses are
 *   replaced on every device registration: the new one is mapped before
 *   it is installed, the old one unmapped before it is freed.
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

/*
 * The MMU's pages. Every exit that looks a guest physical address up in
 * the TDP MMU (an MMIO fault the MMIO cache misses, an NPT fault) walks
 * the VM's page-table pages, and finds each page's struct kvm_mmu_page
 * through the page's struct page (page_private()); so does the shadow MMU
 * (nested guests, npt=0), on MMIO faults, INVLPG and CR3 writes. For
 * those walks to run on the restricted table, all of it must be mapped,
 * and none of it may share a page with anyone else's data; but a struct
 * page shares its page of the memory map with the struct pages of its
 * neighbours in physical memory (63 of them, with 64-byte struct pages).
 *
 * So with ASI on the MMU takes its pages from a per-VM pool, filled in
 * naturally aligned blocks of as many pages as one page of the memory map
 * describes: a block and the memory map page that describes it belong to
 * the VM alone, and both are mapped when the block is allocated. A
 * kvm_mmu_page takes two or three pages of the pool: its header, its page
 * table and, for a shadow page of a guest page table, its translation
 * page. Freed pages go back to the pool, zeroed; blocks are unmapped and
 * freed with the VM. When the pool is empty or no block can be had
 * without reclaim (fragmented memory), the MMU uses its ordinary caches:
 * correct, but a walk through those pages falls back. The VM's
 * asi/mmu_pages debugfs file counts both.
 */
#define KVM_ASI_PT_BLOCK_PAGES	(PAGE_SIZE / sizeof(struct page))
#define KVM_ASI_PT_BLOCK_ORDER	ilog2(KVM_ASI_PT_BLOCK_PAGES)

/* A block of the pool; on kvm->arch.asi_pt_pool.blocks, under asi_lock. */
struct kvm_asi_pt_block {
	struct list_head list;
	struct page *page;
};

/*
 * A block's struct pages fill whole pages of the memory map only with a
 * virtually mapped memory map and a struct page size that divides the
 * page size.
 */
static bool kvm_asi_pt_possible(void)
{
	return IS_ENABLED(CONFIG_SPARSEMEM_VMEMMAP) &&
	       PAGE_SIZE % sizeof(struct page) == 0 &&
	       is_power_of_2(KVM_ASI_PT_BLOCK_PAGES);
}

static void kvm_asi_pt_init(struct kvm_asi_pt_pool *pool)
{
	spin_lock_init(&pool->lock);
	INIT_LIST_HEAD(&pool->free);
	INIT_LIST_HEAD(&pool->blocks);
	pool->nr_free = 0;
	pool->nr_pages = 0;
	pool->misses = 0;
}

/* Add a block to the pool; nothing is left behind when it fails. */
static int kvm_asi_pt_grow(struct kvm *kvm)
{
	struct kvm_asi_pt_pool *pool = &kvm->arch.asi_pt_pool;
	struct asi *asi = kvm->arch.asi;
	struct kvm_asi_pt_block *block;
	unsigned long flags, i;
	struct page *page;
	int err = -ENOMEM;

	lockdep_assert_held(&kvm->arch.asi_lock);
	block = kmalloc(sizeof(*block), GFP_KERNEL_ACCOUNT);
	if (!block)
		return -ENOMEM;
	/*
	 * Opportunistic: no direct reclaim or compaction for a block (the
	 * next page fault would wait for it), kswapd and kcompactd are woken.
	 */
	page = alloc_pages((GFP_KERNEL_ACCOUNT & ~__GFP_DIRECT_RECLAIM) | __GFP_ZERO |
			   __GFP_NOWARN, KVM_ASI_PT_BLOCK_ORDER);
	if (!page)
		goto err_free_block;
	/* Not page-aligned, it would map other pages' struct pages. */
	err = -EINVAL;
	if (WARN_ON_ONCE(!PAGE_ALIGNED(page)))
		goto err_free_pages;
	err = asi_map(asi, page_address(page), PAGE_SIZE << KVM_ASI_PT_BLOCK_ORDER,
		      "MMU pages");
	if (err)
		goto err_free_pages;
	err = asi_map(asi, page, sizeof(*page) << KVM_ASI_PT_BLOCK_ORDER,
		      "MMU pages' struct pages");
	if (err)
		goto err_unmap;

	/* Pages of their own: they go back to the pool one by one. */
	split_page(page, KVM_ASI_PT_BLOCK_ORDER);
	block->page = page;
	list_add(&block->list, &pool->blocks);
	spin_lock_irqsave(&pool->lock, flags);
	for (i = 0; i < KVM_ASI_PT_BLOCK_PAGES; i++)
		list_add_tail(page_address(page + i), &pool->free);
	pool->nr_free += KVM_ASI_PT_BLOCK_PAGES;
	pool->nr_pages += KVM_ASI_PT_BLOCK_PAGES;
	spin_unlock_irqrestore(&pool->lock, flags);
	return 0;

err_unmap:
	asi_unmap(asi, page_address(page), PAGE_SIZE << KVM_ASI_PT_BLOCK_ORDER);
err_free_pages:
	__free_pages(page, KVM_ASI_PT_BLOCK_ORDER);
err_free_block:
	kfree(block);
	return err;
}

/*
 * Unmap and free every block. The MMU is gone: every page must be back.
 * One that is not is still in use, and is leaked rather than freed.
 */
static void kvm_asi_pt_destroy(struct kvm *kvm, struct asi *asi)
{
	struct kvm_asi_pt_pool *pool = &kvm->arch.asi_pt_pool;
	struct kvm_asi_pt_block *block, *tmp;
	bool leak;
	unsigned long i;

	leak = WARN_ON_ONCE(pool->nr_free != pool->nr_pages);
	list_for_each_entry_safe(block, tmp, &pool->blocks, list) {
		asi_unmap(asi, block->page, sizeof(*block->page) << KVM_ASI_PT_BLOCK_ORDER);
		asi_unmap(asi, page_address(block->page), PAGE_SIZE << KVM_ASI_PT_BLOCK_ORDER);
		for (i = 0; !leak && i < KVM_ASI_PT_BLOCK_PAGES; i++)
			__free_page(block->page + i);
		list_del(&block->list);
		kfree(block);
	}
	INIT_LIST_HEAD(&pool->free);
	pool->nr_free = 0;
	pool->nr_pages = 0;
}

/**
 * kvm_asi_pt_topup() - make sure the VM's MMU page pool holds enough pages
 * @kvm: the VM
 * @min: how many free pages the next page fault may take
 *
 * Called where the MMU tops up its caches, before it takes mmu_lock. A
 * pool that cannot grow is no error: the MMU's ordinary caches serve
 * then. A no-op with ASI off. Can sleep.
 */
void kvm_asi_pt_topup(struct kvm *kvm, unsigned int min)
{
	struct kvm_asi_pt_pool *pool = &kvm->arch.asi_pt_pool;

	if (!asi_enabled() || !kvm->arch.asi || !kvm_asi_pt_possible() ||
	    READ_ONCE(pool->nr_free) >= min)
		return;
	mutex_lock(&kvm->arch.asi_lock);
	while (READ_ONCE(pool->nr_free) < min && !kvm_asi_pt_grow(kvm))
		;
	mutex_unlock(&kvm->arch.asi_lock);
}

/*
 * Take @n zeroed pages mapped into the VM's domain, all of them or none:
 * under mmu_lock, on the VM's restricted table. Returns the pool, to give
 * them back to with kvm_asi_pt_free(); NULL (and no pages) with ASI off
 * or when the pool holds fewer than @n.
 */
static struct kvm_asi_pt_pool *kvm_asi_pt_alloc(struct kvm *kvm, void **pages,
						unsigned int n)
{
	struct kvm_asi_pt_pool *pool = &kvm->arch.asi_pt_pool;
	struct list_head *p;
	unsigned long flags;
	unsigned int i;

	if (!asi_enabled() || !kvm->arch.asi)
		return NULL;
	spin_lock_irqsave(&pool->lock, flags);
	if (pool->nr_free < n) {
		pool->misses++;
		spin_unlock_irqrestore(&pool->lock, flags);
		return NULL;
	}
	for (i = 0; i < n; i++) {
		p = pool->free.next;
		list_del(p);
		/* The rest of the page was cleared when it was freed. */
		memset(p, 0, sizeof(*p));
		pages[i] = p;
	}
	pool->nr_free -= n;
	spin_unlock_irqrestore(&pool->lock, flags);
	return pool;
}

/*
 * Give a page back to its pool, cleared with its page_private(): what the
 * MMU left in it stays behind in no page. Any context; the page stays
 * mapped in the domain.
 */
static void kvm_asi_pt_free(struct kvm_asi_pt_pool *pool, void *page)
{
	unsigned long flags;

	set_page_private(virt_to_page(page), 0);
	clear_page(page);
	spin_lock_irqsave(&pool->lock, flags);
	list_add(page, &pool->free);
	pool->nr_free++;
	spin_unlock_irqrestore(&pool->lock, flags);
}

/**
 * kvm_asi_alloc_sp() - take an MMU page from the VM's pool
 * @kvm: the VM
 * @init_value: what every SPTE of the page table starts as
 * @shadowed_info: also a page for sp->shadowed_translation (a shadow page
 *	of a guest page table)
 *
 * The header, the page table and the translation page all come from the
 * pool, mapped into the VM's domain, so that walks through the page run
 * on the VM's restricted table. Under mmu_lock; any context.
 *
 * Return: the header, zeroed but for its pages, to be given back with
 * kvm_asi_free_sp(); NULL with ASI off or when the pool cannot serve: the
 * MMU's caches do then.
 */
struct kvm_mmu_page *kvm_asi_alloc_sp(struct kvm *kvm, u64 init_value,
				      bool shadowed_info)
{
	struct kvm_asi_pt_pool *pool;
	struct kvm_mmu_page *sp;
	void *pages[3];

	pool = kvm_asi_pt_alloc(kvm, pages, shadowed_info ? 3 : 2);
	if (!pool)
		return NULL;
	sp = pages[0];
	sp->spt = pages[1];
	if (shadowed_info)
		sp->shadowed_translation = pages[2];
	sp->asi_pt_pool = pool;
	if (init_value)
		memset64(sp->spt, init_value, PAGE_SIZE / sizeof(u64));
	return sp;
}

/**
 * kvm_asi_free_sp() - give an MMU page back to its pool
 * @sp: the page, unlinked and no longer reachable
 *
 * Return: true if @sp came from kvm_asi_alloc_sp() and is back in the
 * pool, cleared; false if it did not (nothing is done then).
 */
bool kvm_asi_free_sp(struct kvm_mmu_page *sp)
{
	struct kvm_asi_pt_pool *pool = sp->asi_pt_pool;
	void *info = sp->shadowed_translation;
	void *spt = sp->spt;

	if (!pool)
		return false;
	kvm_asi_pt_free(pool, spt);
	if (info)
		kvm_asi_pt_free(pool, info);
	kvm_asi_pt_free(pool, sp);
	return true;
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

static void kvm_asi_core_cookie_adopt(struct kvm *kvm)
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
 * kvm_arch_asi_map() - map a VM's data into its domain
 * @kvm: the VM
 * @addr: the data; whole pages that belong to this VM alone
 * @len: its length in bytes
 * @owner: what it is, for debugfs (a string with static lifetime)
 *
 * For the VM's data that common exits touch, allocated and freed by
 * generic or device code (the I/O buses, the PIC, the IOAPIC, the dirty
 * bitmap and the dirty ring), and for
 * vCPU state allocated after the vCPU (SVM's nested state, when the
 * guest first turns EFER.SVME on). A no-op with ASI off.
 *
 * Return: 0 or asi_map()'s error; nothing is mapped then.
 */
int kvm_arch_asi_map(struct kvm *kvm, const void *addr, size_t len,
		     const char *owner)
{
	if (!kvm->arch.asi)
		return 0;
	return asi_map(kvm->arch.asi, addr, len, owner);
}
EXPORT_SYMBOL_GPL(kvm_arch_asi_map);

/**
 * kvm_arch_asi_unmap() - unmap what kvm_arch_asi_map() mapped
 * @kvm: the VM
 * @addr: @addr given to kvm_arch_asi_map()
 * @len: @len given to kvm_arch_asi_map()
 *
 * Flushes as asi_unmap() does before returning: the memory may be freed
 * right after. A no-op with ASI off and once the domain is gone (its
 * destruction dropped every mapping).
 */
void kvm_arch_asi_unmap(struct kvm *kvm, const void *addr, size_t len)
{
	if (kvm->arch.asi)
		asi_unmap(kvm->arch.asi, addr, len);
}
EXPORT_SYMBOL_GPL(kvm_arch_asi_unmap);

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
 * allocation when the page is new). Leaving first costs the switch
 * without the page fault, the fallback's bookkeeping and the retry, and
 * the counters tell these exits apart from fallbacks, which are to be
 * tuned away. The next VM-entry flushes as after any exit from the
 * table: the CPU used the full map. Counted only when this call switched
 * the CPU off the table (not when it was off already, or on the full
 * table after a fallback). From any context.
 */
void kvm_arch_asi_leave(struct kvm_vcpu *vcpu, enum kvm_asi_leave why)
{
	if (!kvm_asi_switch_out(vcpu, ASI_EXIT_PLANNED))
		return;
	switch (why) {
	case KVM_ASI_LEAVE_TIMER:
		vcpu->stat.asi_exits_timer++;
		break;
	case KVM_ASI_LEAVE_IOEVENTFD:
		vcpu->stat.asi_exits_ioeventfd++;
		break;
	case KVM_ASI_LEAVE_FAULTIN:
		vcpu->stat.asi_exits_faultin++;
		break;
	}
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
	KVM_ASI_ADD(vcpu, exits_fault, fallbacks - irq);
	KVM_ASI_ADD(vcpu, exits_interrupt,
		    READ_ONCE(st->exits[ASI_EXIT_INTERRUPT]) - av->exits_interrupt + irq);
	KVM_ASI_ADD(vcpu, exits_user, READ_ONCE(st->exits[ASI_EXIT_OWNER]) - av->exits_owner);
	KVM_ASI_ADD(vcpu, exits_sched, READ_ONCE(st->exits[ASI_EXIT_SCHED]) - av->exits_sched);
	KVM_ASI_ADD(vcpu, exits_other, READ_ONCE(st->exits[ASI_EXIT_USER]) - av->exits_user);
	/* Counted around VM-entry, into the vCPU's stats only: sum them here. */
	KVM_ASI_SUM(vcpu, flushes);
	KVM_ASI_SUM(vcpu, flushes_skipped);
	KVM_ASI_SUM(vcpu, late_fallbacks);
	KVM_ASI_SUM(vcpu, smt_waits);
	KVM_ASI_SUM(vcpu, smt_kicks);
	KVM_ASI_SUM(vcpu, exits_timer);
	KVM_ASI_SUM(vcpu, exits_ioeventfd);
	KVM_ASI_SUM(vcpu, exits_faultin);
	WARN_ONCE(av->late_task,
		  "KVM ASI: %lu fallbacks between the flush decision and VM-entry, not an NMI's: see the VM's asi/faults\n",
		  av->late_task);
	av->late_task = 0;
}

static int kvm_asi_faults_show(struct seq_file *m, void *v)
{
	struct kvm *kvm = m->private;

	asi_fault_log_show(m, kvm->arch.asi);
	return 0;
}

static int kvm_asi_mappings_show(struct seq_file *m, void *v)
{
	struct kvm *kvm = m->private;

	asi_mappings_show(m, kvm->arch.asi);
	return 0;
}

/* The VM's MMU page pool: pages in it, free, and allocations it missed. */
static int kvm_asi_mmu_pages_show(struct seq_file *m, void *v)
{
	struct kvm_asi_pt_pool *pool = &((struct kvm *)m->private)->arch.asi_pt_pool;
	unsigned long flags;

	spin_lock_irqsave(&pool->lock, flags);
	seq_printf(m, "pages: %u\nfree: %u\nmisses: %lu\n",
		   pool->nr_pages, pool->nr_free, pool->misses);
	spin_unlock_irqrestore(&pool->lock, flags);
	return 0;
}

static int kvm_asi_pagetable_show(struct seq_file *m, void *v)
{
	struct kvm *kvm = m->private;

	return asi_pagetable_show(m, kvm->arch.asi);
}

/* The VM may be on its way out: pin it while one of its files is open. */
static int kvm_asi_single_open(struct inode *inode, struct file *file,
			       int (*show)(struct seq_file *, void *))
{
	struct kvm *kvm = inode->i_private;
	int err;

	if (!kvm_get_kvm_safe(kvm))
		return -ENOENT;
	err = single_open(file, show, kvm);
	if (err)
		kvm_put_kvm(kvm);
	return err;
}

static int kvm_asi_faults_open(struct inode *inode, struct file *file)
{
	return kvm_asi_single_open(inode, file, kvm_asi_faults_show);
}

static int kvm_asi_release(struct inode *inode, struct file *file)
{
	kvm_put_kvm(inode->i_private);
	return single_release(inode, file);
}

/*
 * A read-only file of the VM's asi/ folder: kvm_asi_NAME_fops shows
 * kvm_asi_NAME_show(), with the VM pinned while the file is open.
 */
#define DEFINE_KVM_ASI_SHOW(name)					\
static int kvm_asi_##name##_open(struct inode *inode, struct file *file) \
{									\
	return kvm_asi_single_open(inode, file, kvm_asi_##name##_show);	\
}									\
									\
static const struct file_operations kvm_asi_##name##_fops = {		\
	.owner		= THIS_MODULE,					\
	.open		= kvm_asi_##name##_open,			\
	.read		= seq_read,					\
	.llseek		= seq_lseek,					\
	.release	= kvm_asi_release,				\
}

DEFINE_KVM_ASI_SHOW(mappings);
DEFINE_KVM_ASI_SHOW(pagetable);
DEFINE_KVM_ASI_SHOW(mmu_pages);

/* Writing 0 resets the VM's fault log. */
static ssize_t kvm_asi_faults_write(struct file *file, const char __user *buf,
				    size_t count, loff_t *ppos)
{
	struct kvm *kvm = file_inode(file)->i_private;

	return asi_fault_log_write(kvm->arch.asi, buf, count);
}

static const struct file_operations kvm_asi_faults_fops = {
	.owner		= THIS_MODULE,
	.open		= kvm_asi_faults_open,
	.read		= seq_read,
	.write		= kvm_asi_faults_write,
	.llseek		= seq_lseek,
	.release	= kvm_asi_release,
};

#ifdef CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_KUNIT_TEST
/*
 * Test hook for the isolation audit (asi-pt audit), built with the KUnit
 * tests only: writing another VM's debugfs name (PID-FD) to asi/plant maps
 * the first page of that VM's struct kvm into this VM's domain, a planted
 * violation of invariant 1, for as long as the file stays open. Both VMs
 * are pinned meanwhile; closing the file unmaps the page. Writing
 * "secret" maps the page of the kernel's ro_after_init secrets that holds
 * the kmalloc cache seed instead (see asi/secrets).
 */
static DEFINE_MUTEX(kvm_asi_plant_lock);
static char kvm_asi_planted_secret;

/*
 * The page of the kmalloc cache seed, one of the ro_after_init secrets
 * (exported, unlike the section's bounds, so that KVM built as modules
 * reaches it), or NULL without random kmalloc caches.
 */
static void *kvm_asi_secret_page(void)
{
#ifdef CONFIG_RANDOM_KMALLOC_CACHES
	return (void *)PAGE_ALIGN_DOWN((unsigned long)&random_kmalloc_seed);
#else
	return NULL;
#endif
}

static int kvm_asi_plant_open(struct inode *inode, struct file *file)
{
	if (!kvm_get_kvm_safe(inode->i_private))
		return -ENOENT;
	file->private_data = NULL;
	return 0;
}

static ssize_t kvm_asi_plant_write(struct file *file, const char __user *ubuf,
				   size_t count, loff_t *ppos)
{
	struct kvm *kvm = file_inode(file)->i_private, *victim = NULL, *k;
	char buf[32];
	int err;

	if (!count || count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = 0;
	strim(buf);

	mutex_lock(&kvm_asi_plant_lock);
	err = -EBUSY;
	if (file->private_data)
		goto out;
	if (!strcmp(buf, "secret")) {
		err = -ENOENT;
		if (!kvm_asi_secret_page())
			goto out;
		err = asi_map(kvm->arch.asi, kvm_asi_secret_page(), PAGE_SIZE,
			      "planted secret (test hook)");
		if (!err)
			file->private_data = &kvm_asi_planted_secret;
		goto out;
	}
	mutex_lock(&kvm_lock);
	list_for_each_entry(k, &vm_list, vm_list) {
		if (k != kvm && k->arch.asi && !IS_ERR_OR_NULL(k->debugfs_dentry) &&
		    !strcmp(k->debugfs_dentry->d_name.name, buf) && kvm_get_kvm_safe(k)) {
			victim = k;
			break;
		}
	}
	mutex_unlock(&kvm_lock);
	err = -ENOENT;
	if (!victim)
		goto out;
	err = asi_map(kvm->arch.asi, victim, PAGE_SIZE, "planted (test hook)");
	if (err)
		goto out;
	file->private_data = victim;
	victim = NULL;
out:
	mutex_unlock(&kvm_asi_plant_lock);
	if (victim)
		kvm_put_kvm(victim);
	return err ?: count;
}

static int kvm_asi_plant_release(struct inode *inode, struct file *file)
{
	struct kvm *kvm = inode->i_private, *victim = file->private_data;

	if (file->private_data == &kvm_asi_planted_secret) {
		asi_unmap(kvm->arch.asi, kvm_asi_secret_page(), PAGE_SIZE);
		victim = NULL;
	}
	if (victim) {
		asi_unmap(kvm->arch.asi, victim, PAGE_SIZE);
		kvm_put_kvm(victim);
	}
	kvm_put_kvm(kvm);
	return 0;
}

static const struct file_operations kvm_asi_plant_fops = {
	.owner		= THIS_MODULE,
	.open		= kvm_asi_plant_open,
	.write		= kvm_asi_plant_write,
	.release	= kvm_asi_plant_release,
};

/*
 * Test hook for the tenant tests, with the KUnit tests only: writing an
 * address to asi/translate (of any VM) sets it; reading a VM's file says
 * whether that VM's table translates it, the user half included:
 * "<address> mapped" or "<address> unmapped". One address for all VMs,
 * for a test that runs alone.
 */
static unsigned long kvm_asi_translate_va;

static int kvm_asi_translate_show(struct seq_file *m, void *v)
{
	struct kvm *kvm = m->private;
	unsigned long va = READ_ONCE(kvm_asi_translate_va);

	seq_printf(m, "%#lx %s\n", va,
		   asi_test_translates(kvm->arch.asi, va) ? "mapped" : "unmapped");
	return 0;
}

static int kvm_asi_translate_open(struct inode *inode, struct file *file)
{
	return kvm_asi_single_open(inode, file, kvm_asi_translate_show);
}

static ssize_t kvm_asi_translate_write(struct file *file, const char __user *ubuf,
				       size_t count, loff_t *ppos)
{
	unsigned long va;
	int err;

	err = kstrtoul_from_user(ubuf, count, 0, &va);
	if (err)
		return err;
	WRITE_ONCE(kvm_asi_translate_va, va);
	return count;
}

static const struct file_operations kvm_asi_translate_fops = {
	.owner		= THIS_MODULE,
	.open		= kvm_asi_translate_open,
	.read		= seq_read,
	.write		= kvm_asi_translate_write,
	.llseek		= seq_lseek,
	.release	= kvm_asi_release,
};
#endif

/**
 * kvm_asi_create_vm_debugfs() - the VM's asi/ debugfs folder
 * @kvm: the VM, its debugfs folder created
 *
 * asi/faults: the VM's fallback faults by site (see asi_fault_log_show());
 * writing 0 resets them. asi/mappings: what the VM's domain maps and why
 * (asi_mappings_show()). asi/pagetable: its restricted table in ptdump's
 * format (asi_pagetable_show()). asi/mmu_pages: the MMU's page pool
 * (pages, free, allocations it could not serve). asi/plant and
 * asi/translate: test hooks (see above).
 */
void kvm_asi_create_vm_debugfs(struct kvm *kvm)
{
	struct dentry *dir;

	if (!kvm->arch.asi)
		return;
	dir = debugfs_create_dir("asi", kvm->debugfs_dentry);
	debugfs_create_file("faults", 0600, dir, kvm, &kvm_asi_faults_fops);
	debugfs_create_file("mappings", 0400, dir, kvm, &kvm_asi_mappings_fops);
	debugfs_create_file("pagetable", 0400, dir, kvm, &kvm_asi_pagetable_fops);
	debugfs_create_file("mmu_pages", 0400, dir, kvm, &kvm_asi_mmu_pages_fops);
#ifdef CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_KUNIT_TEST
	debugfs_create_file("plant", 0200, dir, kvm, &kvm_asi_plant_fops);
	debugfs_create_file("translate", 0600, dir, kvm, &kvm_asi_translate_fops);
#endif
}
