// SPDX-License-Identifier: GPL-2.0
/*
 * x86 Address Space Isolation (ASI): building and freeing restricted tables.
 *
 * A domain's table is built out of 4 KiB copies of the kernel's own entries,
 * so a range backed by a large page in the kernel map is split in the
 * restricted table only; the kernel's page table is only ever read. Entries
 * copied into a domain are never global. Every mapped range is recorded with
 * its owner in the domain's maple tree: that is what debugfs shows, what
 * asi_unmap() checks against and what destruction tears down. The user half
 * of an mm can be shared (asi_share_user()); the cpu_entry_area's tables are
 * shared, as PTI shares them.
 */
#define pr_fmt(fmt) "ASI: " fmt

#include <linux/asi.h>
#include <linux/kasan.h>
#include <linux/maple_tree.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <asm/cpu_entry_area.h>
#include <asm/pgalloc.h>
#include <asm/tlbflush.h>

#include "../mm_internal.h"
#include "internal.h"

/*
 * The 4 KiB PTE that maps @va in the kernel's page table, whatever the
 * size of the kernel's mapping; never global. -EFAULT if the kernel does
 * not map @va.
 */
static int asi_kernel_pte(unsigned long va, pte_t *out)
{
	unsigned int level;
	unsigned long pfn;
	pgprot_t prot;
	pte_t *kpte;

	kpte = lookup_address(va, &level);
	if (!kpte || !pte_present(*kpte))
		return -EFAULT;

	switch (level) {
	case PG_LEVEL_4K:
		pfn = pte_pfn(*kpte);
		prot = pte_pgprot(*kpte);
		break;
	case PG_LEVEL_2M:
		pfn = pmd_pfn(*(pmd_t *)kpte) + ((va & ~PMD_MASK) >> PAGE_SHIFT);
		prot = pgprot_large_2_4k(pmd_pgprot(*(pmd_t *)kpte));
		break;
	case PG_LEVEL_1G:
		pfn = pud_pfn(*(pud_t *)kpte) + ((va & ~PUD_MASK) >> PAGE_SHIFT);
		prot = pgprot_large_2_4k(pud_pgprot(*(pud_t *)kpte));
		break;
	default:
		return -EFAULT;
	}
	/* pgprot_large_2_4k() moved PAT into bit 7; only drop global. */
	pgprot_val(prot) &= ~_PAGE_GLOBAL;
	*out = pfn_pte(pfn, prot);
	return 0;
}

/* The PTE of @va in @asi's table, or NULL where no PTE page exists. */
static pte_t *asi_lookup_pte(struct asi *asi, unsigned long va)
{
	unsigned int level;
	pte_t *pte;

	pte = lookup_address_in_pgd(asi->pgd + pgd_index(va), va, &level);
	if (!pte || WARN_ON_ONCE(level != PG_LEVEL_4K))
		return NULL;
	return pte;
}

/**
 * asi_lookup() - where a domain maps a kernel address
 * @asi: the domain
 * @addr: a kernel virtual address
 *
 * Return: the PTE that maps @addr in @asi's table, or an empty PTE.
 */
pte_t asi_lookup(struct asi *asi, unsigned long addr)
{
	pte_t *pte = asi_lookup_pte(asi, addr);

	return pte ? *pte : __pte(0);
}
EXPORT_SYMBOL_GPL(asi_lookup);

/* Clear [start, end) in @asi's table; the PTE pages stay until destroy. */
static void asi_clear_ptes(struct asi *asi, unsigned long start, unsigned long end)
{
	unsigned long va;
	pte_t *pte;

	for (va = start; va < end; va += PAGE_SIZE) {
		pte = asi_lookup_pte(asi, va);
		if (pte)
			pte_clear(&init_mm, va, pte);
	}
}

/* A CPU on @info's table, or relaxed on it (see asi_flush_domain()). */
static bool asi_cpu_in_domain(int cpu, void *info)
{
	return READ_ONCE(per_cpu(asi_cpu.curr, cpu)) == info;
}

/*
 * Sent to the CPUs in the domain: the interrupt's entry left it already
 * (ASI_EXIT_INTERRUPT); the caller's own CPU, which gets no interrupt,
 * leaves it here.
 */
static void asi_flush_domain_ipi(void *info)
{
	this_cpu_inc(asi_cpu.unmap_ipis);
	if (this_cpu_read(asi_cpu.curr) == info)
		__asi_exit(ASI_EXIT_OWNER);
}

/*
 * Translations of PTEs just cleared in @asi's table may still be cached
 * by CPUs on that table, or in ASI PCIDs that held it. Only this domain's
 * table had them (the kernel's own table still maps the range), so only
 * this domain's CPUs are disturbed: a guest that makes KVM unmap (an APIC
 * map rebuild, say) must not interrupt other tenants' CPUs.
 *
 * The domain takes a new generation: the next load of its table under an
 * ASI PCID on any CPU then flushes that PCID (asi_pcid_claim()); without
 * PCIDs every CR3 write flushes. A CPU in the domain now is sent an
 * interrupt, whose entry leaves the domain, and waited for. A CPU that
 * enters after the read of its asi_cpu.curr here reads the new generation:
 * asi_enter() orders its write of curr before its read of the generation,
 * as this orders the other way. So no CPU uses the cleared translations
 * once this returns, and the memory may be freed.
 */
static void asi_flush_domain(struct asi *asi)
{
	WRITE_ONCE(asi->gen, atomic64_inc_return(&asi_next_gen));
	/* The new generation before the reads of curr: see asi_enter(). */
	smp_mb();
	this_cpu_inc(asi_cpu.unmap_flushes);
	on_each_cpu_cond(asi_cpu_in_domain, asi_flush_domain_ipi, asi, true);
}

/* Copy the kernel's PTEs of [start, end); without write access if @ro. */
static int asi_set_ptes(struct asi *asi, unsigned long start, unsigned long end, bool ro)
{
	unsigned long va;
	pte_t kpte, *pte;
	int err;

	for (va = start; va < end; va += PAGE_SIZE) {
		err = asi_kernel_pte(va, &kpte);
		if (err)
			goto undo;
		/* As set_memory_ro(): Write=0 Dirty=1 would be a shadow stack. */
		if (ro)
			kpte = pte_clear_flags(kpte, _PAGE_RW | _PAGE_DIRTY);
		pte = pgtable_walk_alloc_pte(asi->pgd + pgd_index(va), va, ASI_GFP, false);
		if (!pte) {
			err = -ENOMEM;
			goto undo;
		}
		/* Ranges never overlap (the maple tree refuses it). */
		WARN_ON_ONCE(!pte_none(*pte));
		set_pte(pte, kpte);
	}
	return 0;
undo:
	asi_clear_ptes(asi, start, va);
	asi_flush_domain(asi);
	return err;
}

/* A record of [start, end) for a domain's or the allowlist's tree. */
struct asi_range *asi_range_alloc(unsigned long start, unsigned long end,
				  const char *owner, enum asi_owner_class class,
				  gfp_t gfp)
{
	struct asi_range *r = kmalloc(sizeof(*r), gfp);

	if (r)
		*r = (struct asi_range){ .start = start, .end = end, .owner = owner,
					 .class = class };
	return r;
}

int __asi_map_range(struct asi *asi, unsigned long start, unsigned long end,
		    const char *owner, enum asi_owner_class class, bool ro)
{
	struct asi_range *r;
	int err;

	r = asi_range_alloc(start, end, owner, class, GFP_KERNEL_ACCOUNT);
	if (!r)
		return -ENOMEM;
	r->ro = ro;

	mutex_lock(&asi->lock);
	err = mtree_insert_range(&asi->ranges, start, end - 1, r, GFP_KERNEL_ACCOUNT);
	if (!err) {
		err = asi_set_ptes(asi, start, end, ro);
		if (err)
			mtree_erase(&asi->ranges, start);
	}
	mutex_unlock(&asi->lock);
	if (err)
		kfree(r);
	return err;
}

int asi_map_range(struct asi *asi, unsigned long start, unsigned long end,
		  const char *owner, enum asi_owner_class class)
{
	return __asi_map_range(asi, start, end, owner, class, false);
}

/* Unmap exactly the range that starts at @start; false if there is none. */
bool asi_unmap_range(struct asi *asi, unsigned long start, unsigned long end)
{
	struct asi_range *r;

	mutex_lock(&asi->lock);
	r = mtree_load(&asi->ranges, start);
	if (!r || r->start != start || r->end != end) {
		mutex_unlock(&asi->lock);
		return false;
	}
	mtree_erase(&asi->ranges, start);
	asi_clear_ptes(asi, start, end);
	mutex_unlock(&asi->lock);

	asi_flush_domain(asi);
	kfree(r);
	return true;
}

bool asi_range_valid(unsigned long start, unsigned long end)
{
	return start >= PAGE_OFFSET && end > start;
}

/**
 * asi_map() - map a kernel range into a domain
 * @asi: the domain
 * @addr: start of the range: direct map, vmalloc, per-CPU or kernel image
 * @len: length of the range in bytes
 * @owner: who the range belongs to, for debugfs (a string that outlives
 *	   the mapping)
 *
 * Maps every page that [@addr, @addr + @len) touches, at 4 KiB granularity
 * and with the kernel's protections, however the kernel maps it. The caller
 * owns those whole pages: whatever else they hold becomes visible in @asi.
 * A range may not overlap one that is already mapped. Can sleep.
 *
 * Return: 0, -EINVAL for an empty or non-kernel range, -EEXIST for an
 * overlap, -EFAULT if the kernel does not map the whole range, -ENOMEM.
 * On error nothing of the range is mapped.
 */
int asi_map(struct asi *asi, const void *addr, size_t len, const char *owner)
{
	unsigned long start = PAGE_ALIGN_DOWN((unsigned long)addr);
	unsigned long end = PAGE_ALIGN((unsigned long)addr + len);

	might_sleep();
	if (!len || !asi_range_valid(start, end) || !owner)
		return -EINVAL;
	return asi_map_range(asi, start, end, owner, ASI_OWNER_DOMAIN);
}
EXPORT_SYMBOL_GPL(asi_map);

/**
 * asi_unmap() - unmap a range mapped with asi_map()
 * @asi: the domain
 * @addr: @addr given to asi_map()
 * @len: @len given to asi_map()
 *
 * Removes the mapping from @asi's table and flushes its translations
 * before returning, so the memory can be freed right after: the CPUs in
 * @asi are interrupted, the others flush at their next entry into it
 * (asi_flush_domain()).
 * Unmapping a range that was not mapped exactly so is a bug (WARN). Can
 * sleep.
 */
void asi_unmap(struct asi *asi, const void *addr, size_t len)
{
	unsigned long start = PAGE_ALIGN_DOWN((unsigned long)addr);
	unsigned long end = PAGE_ALIGN((unsigned long)addr + len);

	might_sleep();
	WARN_ONCE(!asi_unmap_range(asi, start, end),
		  "ASI: %s: unmapping %#lx-%#lx, which is not a mapped range\n",
		  asi->name, start, end);
}
EXPORT_SYMBOL_GPL(asi_unmap);

/**
 * asi_map_task() - map a task's kernel stack and task_struct into a domain
 * @asi: the domain
 * @task: the task; both must stay mapped while it runs on @asi
 * @owner: as for asi_map()
 *
 * A CPU on a restricted table pushes exception frames onto the current
 * stack, and nearly all kernel code reads current: a task must have both
 * mapped before it enters a domain. With ASI on, every task_struct has
 * pages of its own (see fork_init()), so mapping it maps nothing else.
 * References on the stack and the task_struct are held until
 * asi_unmap_task(), so that neither is freed, and reused, while the
 * domain maps it, even if the task exits first. Can sleep.
 *
 * Return: 0, -ESRCH if @task has no stack any more, -EINVAL if its
 * task_struct does not have pages of its own, or asi_map()'s error.
 */
int asi_map_task(struct asi *asi, struct task_struct *task, const char *owner)
{
	void *stack;
	int err;

	if (WARN_ON_ONCE(!PAGE_ALIGNED(task)))
		return -EINVAL;
	stack = try_get_task_stack(task);
	if (!stack)
		return -ESRCH;
	err = asi_map(asi, stack, THREAD_SIZE, owner);
	if (err)
		goto put_stack;
	err = asi_map(asi, task, arch_task_struct_size, owner);
	if (err)
		goto unmap_stack;
	get_task_struct(task);
	return 0;

unmap_stack:
	asi_unmap(asi, stack, THREAD_SIZE);
put_stack:
	put_task_stack(task);
	return err;
}
EXPORT_SYMBOL_GPL(asi_map_task);

/**
 * asi_unmap_task() - undo asi_map_task()
 * @asi: the domain
 * @task: the task given to asi_map_task()
 *
 * Unmaps the stack and the task_struct (flushed as by asi_unmap()) and
 * drops the references. Can sleep.
 */
void asi_unmap_task(struct asi *asi, struct task_struct *task)
{
	asi_unmap(asi, task, arch_task_struct_size);
	asi_unmap(asi, task_stack_page(task), THREAD_SIZE);
	put_task_stack(task);
	put_task_struct(task);
}
EXPORT_SYMBOL_GPL(asi_unmap_task);

/*
 * The page-table pages below a PMD, PUD or P4D page of a domain, the page
 * itself included; freed too if @free. Restricted tables have no large
 * entries.
 */
static unsigned long asi_pmd_tables(pmd_t *pmd, bool free)
{
	unsigned long n = 1;
	int i;

	for (i = 0; i < PTRS_PER_PMD; i++) {
		if (pmd_none(pmd[i]) || WARN_ON_ONCE(pmd_leaf(pmd[i])))
			continue;
		n++;
		if (free)
			free_page((unsigned long)pmd_page_vaddr(pmd[i]));
	}
	if (free)
		free_page((unsigned long)pmd);
	return n;
}

static unsigned long asi_pud_tables(pud_t *pud, bool free)
{
	unsigned long n = 1;
	int i;

	for (i = 0; i < PTRS_PER_PUD; i++) {
		if (pud_none(pud[i]) || WARN_ON_ONCE(pud_leaf(pud[i])))
			continue;
		n += asi_pmd_tables(pud_pgtable(pud[i]), free);
	}
	if (free)
		free_page((unsigned long)pud);
	return n;
}

/*
 * @entries P4D entries of a domain and the kernel's at the same addresses
 * (@kp4d). An entry equal to the kernel's points at the kernel's own tables
 * (shared: the cpu_entry_area, the KASAN shadow), which are neither counted
 * nor freed.
 */
static unsigned long asi_p4d_tables(p4d_t *p4d, p4d_t *kp4d, int entries, bool free)
{
	unsigned long n = 0;
	int i;

	for (i = 0; i < entries; i++) {
		if (p4d_none(p4d[i]) || (kp4d && p4d_val(p4d[i]) == p4d_val(kp4d[i])))
			continue;
		n += asi_pud_tables(p4d_pgtable(p4d[i]), free);
	}
	return n;
}

/* @asi's page-table pages below its PGD; all freed if @free. */
static unsigned long asi_tables(struct asi *asi, bool free)
{
	unsigned long n = 0;
	int i;

	for (i = KERNEL_PGD_BOUNDARY; i < PTRS_PER_PGD; i++) {
		pgd_t *pgd = asi->pgd + i, *kpgd = init_mm.pgd + i;
		p4d_t *p4d;

		if (!pgtable_l5_enabled()) {
			/* The P4D level is folded into the PGD. */
			n += asi_p4d_tables((p4d_t *)pgd, (p4d_t *)kpgd, 1, free);
			continue;
		}
		if (pgd_none(*pgd))
			continue;
		p4d = (p4d_t *)pgd_page_vaddr(*pgd);
		n += 1 + asi_p4d_tables(p4d, pgd_none(*kpgd) ? NULL :
					(p4d_t *)pgd_page_vaddr(*kpgd), PTRS_PER_P4D, free);
		if (free)
			free_page((unsigned long)p4d);
	}
	return n;
}

/**
 * asi_pgtable_pages() - page-table pages of a domain
 * @asi: the domain
 *
 * Return: how many page-table pages @asi's table uses, its PGD included.
 */
unsigned long asi_pgtable_pages(struct asi *asi)
{
	unsigned long n;

	mutex_lock(&asi->lock);
	n = asi_tables(asi, false) + (1 << PGD_ALLOCATION_ORDER);
	mutex_unlock(&asi->lock);
	return n;
}
EXPORT_SYMBOL_GPL(asi_pgtable_pages);

static void asi_free_ranges(struct asi *asi)
{
	struct asi_range *r;
	unsigned long index = 0;

	mt_for_each(&asi->ranges, r, index, ULONG_MAX)
		kfree(r);
	mtree_destroy(&asi->ranges);
}

/*
 * Domains that share an mm's user half, and the switch that makes
 * asi_sync_user_pgd() look at them. A raw lock: top-level entries are
 * written under the mm's page_table_lock, in any context that may
 * allocate page tables.
 */
DEFINE_STATIC_KEY_FALSE(asi_user_key);
static DEFINE_RAW_SPINLOCK(asi_user_lock);
static LIST_HEAD(asi_user_domains);

/**
 * __asi_sync_user_pgd() - a top-level entry of some page table was written
 * @pgdp: the entry
 *
 * Called by native_set_pgd() and, with the P4D level folded,
 * native_set_p4d(), right after the write, through asi_sync_user_pgd()
 * (taken only while some domain shares an mm). If the entry is in the
 * user half of an mm's PGD that domains share, copy it into them, so
 * that no domain keeps pointing at lower-level tables the mm has freed:
 * the mm clears its entry before it frees the table below it, and the
 * TLB flush that precedes the free reaches every CPU running the mm, each
 * of which leaves its domain on the flush interrupt.
 */
void __asi_sync_user_pgd(pgd_t *pgdp)
{
	pgd_t *table = (pgd_t *)((unsigned long)pgdp & PAGE_MASK);
	unsigned long flags;
	struct asi *asi;
	pgd_t pgd;

	if (!pgdp_maps_userspace(pgdp))
		return;
	raw_spin_lock_irqsave(&asi_user_lock, flags);
	/*
	 * The entry as it is now, read under the lock: two writers of it
	 * may reach the lock in the other order than they wrote.
	 */
	pgd = READ_ONCE(*pgdp);
	list_for_each_entry(asi, &asi_user_domains, user_list) {
		if (asi->user_mm->pgd == table)
			WRITE_ONCE(asi->pgd[pgdp - table], pgd);
	}
	raw_spin_unlock_irqrestore(&asi_user_lock, flags);
}

/**
 * asi_share_user() - give a domain the user address space of an mm
 * @asi: the domain
 * @mm: the mm; the domain holds a reference on it (mmgrab()) until it goes
 *
 * For an owner whose code on the restricted table accesses @mm's user
 * memory (KVM: guest memory, through the VMM's mappings). The domain's
 * user half then holds @mm's top-level entries, kept in step by
 * asi_sync_user_pgd(), so that the lower levels are @mm's own tables. As
 * in the kernel's own table, user pages are reachable only by uaccess
 * (SMAP) and never executable (SMEP, and NX on the entries with PTI).
 * A domain shares at most one mm. Can sleep.
 *
 * Return: 0, or -EBUSY if @asi already shares an mm.
 */
int asi_share_user(struct asi *asi, struct mm_struct *mm)
{
	unsigned long flags;
	int i;

	might_sleep();
	if (asi->user_mm)
		return -EBUSY;
	mmgrab(mm);
	/* Before the domain is listed: no write may miss it after. */
	static_branch_inc(&asi_user_key);
	raw_spin_lock_irqsave(&asi_user_lock, flags);
	asi->user_mm = mm;
	list_add(&asi->user_list, &asi_user_domains);
	for (i = 0; i < PGD_KERNEL_START; i++)
		WRITE_ONCE(asi->pgd[i], READ_ONCE(mm->pgd[i]));
	raw_spin_unlock_irqrestore(&asi_user_lock, flags);
	return 0;
}
EXPORT_SYMBOL_GPL(asi_share_user);

/* Stop sharing the user half; the caller flushes, if the domain is live. */
static void __asi_unshare_user(struct asi *asi)
{
	unsigned long flags;
	int i;

	if (!asi->user_mm)
		return;
	raw_spin_lock_irqsave(&asi_user_lock, flags);
	list_del(&asi->user_list);
	for (i = 0; i < PGD_KERNEL_START; i++)
		WRITE_ONCE(asi->pgd[i], __pgd(0));
	raw_spin_unlock_irqrestore(&asi_user_lock, flags);
	static_branch_dec(&asi_user_key);
	mmdrop(asi->user_mm);
	asi->user_mm = NULL;
}

/**
 * asi_unshare_user() - stop sharing an mm's user half with a live domain
 * @asi: the domain
 *
 * For an owner that finds the mm holds what the domain must not map (KVM:
 * a second VM in the VMM's process). The owner serializes it against
 * asi_share_user() (KVM: kvm_asi_vmm_lock). The domain's user half is emptied
 * and its translations flushed as by asi_unmap(): code on the restricted
 * table that touches user memory falls back from then on. A no-op if
 * @asi shares no mm. Can sleep.
 */
void asi_unshare_user(struct asi *asi)
{
	might_sleep();
	if (!asi->user_mm)
		return;
	__asi_unshare_user(asi);
	asi_flush_domain(asi);
}
EXPORT_SYMBOL_GPL(asi_unshare_user);

/* The domain's user half, ranges and tables, and the domain itself. */
void asi_free(struct asi *asi)
{
	__asi_unshare_user(asi);
	kfree(asi->faults);
	asi_free_ranges(asi);
	asi_tables(asi, true);
	free_pages((unsigned long)asi->pgd, PGD_ALLOCATION_ORDER);
	kfree(asi);
}

/*
 * Share the kernel's cpu_entry_area tables, as PTI does for its user
 * table: they hold only what entry needs (IDT, GDT, TSS, entry and
 * exception stacks) for every CPU, and sharing them keeps every CPU's
 * entry area mapped in every domain without copying it.
 */
static int asi_share_kernel_p4ds(struct asi *asi, unsigned long start,
				 unsigned long end, const char *name)
{
	unsigned long va;
	struct asi_range *r;
	p4d_t *p4d;
	int err;

	r = asi_range_alloc(start, end, name, ASI_OWNER_ALWAYS, GFP_KERNEL_ACCOUNT);
	if (!r)
		return -ENOMEM;
	err = mtree_insert_range(&asi->ranges, r->start, r->end - 1, r, GFP_KERNEL_ACCOUNT);
	if (err) {
		kfree(r);
		return err;
	}
	/* On failure, asi_free() tears down what was set up. */
	for (va = start; va - 1 < end - 1; va = ALIGN(va + 1, P4D_SIZE)) {
		p4d_t *kp4d = p4d_offset(pgd_offset_k(va), va);

		if (p4d_none(*kp4d))
			continue;
		p4d = pgtable_walk_alloc_p4d(asi->pgd + pgd_index(va), va, ASI_GFP);
		if (!p4d)
			return -ENOMEM;
		set_p4d(p4d, *kp4d);
	}
	return 0;
}

int asi_share_cea(struct asi *asi)
{
	return asi_share_kernel_p4ds(asi, CPU_ENTRY_AREA_BASE,
				     CPU_ENTRY_AREA_BASE + CPU_ENTRY_AREA_MAP_SIZE,
				     "cpu_entry_area");
}

/*
 * With KASAN, every instrumented access reads the shadow of its address:
 * share the kernel's shadow tables, whose top-level entries KASAN fills
 * at boot (the vmalloc area's too, so later shadow is found below them).
 * The shadow says which bytes are valid, not what they hold.
 */
int asi_share_kasan_shadow(struct asi *asi)
{
#ifdef CONFIG_KASAN
	return asi_share_kernel_p4ds(asi, KASAN_SHADOW_START, KASAN_SHADOW_END,
				     "KASAN shadow");
#else
	return 0;
#endif
}
