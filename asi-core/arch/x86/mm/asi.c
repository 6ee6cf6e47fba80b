// SPDX-License-Identifier: GPL-2.0
/*
 * x86 Address Space Isolation (ASI): restricted kernel page tables.
 *
 * A domain (struct asi) is a kernel page table of its own that maps only
 * what was asked for: the always-mapped set and the allowlist that every
 * domain shares, and the ranges its owner maps with asi_map(). It is built out of 4 KiB copies of
 * the kernel's own entries, so a range backed by a large page in the kernel
 * map is split in the restricted table only; the kernel's page table is
 * only ever read (invariant 3 of the design). Entries copied into a domain
 * are never global, and where the CPU has PCIDs a domain's translations
 * live under an ASI PCID that is flushed before another domain uses it, so
 * no translation of one domain outlives a switch to another.
 *
 * Every mapped range is recorded with its owner in the domain's maple tree:
 * that is what debugfs shows, what asi_unmap() checks against and what
 * destruction tears down.
 *
 * The asi= parameter is parsed in early boot (after jump_label_init(), so
 * the static key can be flipped right away); the result is reported once in
 * the boot log and in /sys/kernel/debug/asi/state.
 */
#define pr_fmt(fmt) "ASI: " fmt

#include <kunit/visibility.h>
#include <linux/asi.h>
#include <linux/cpuhotplug.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/kasan.h>
#include <linux/init.h>
#include <linux/math64.h>
#include <linux/maple_tree.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/ptdump.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/sched/task_stack.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <asm/apic.h>
#include <asm/cpu_entry_area.h>
#include <asm/fixmap.h>
#include <asm/irq_vectors.h>
#include <asm/msr.h>
#include <asm/pgalloc.h>
#include <asm/processor.h>
#include <asm/sections.h>
#include <asm/set_memory.h>
#include <asm/special_insns.h>
#include <asm/tlbflush.h>
#include <asm/tsc.h>

#define CREATE_TRACE_POINTS
#include <trace/events/asi.h>
#include <trace/events/asi_smt.h>

/* TSC cycles in ns, for the asi_guest event (0 without a known TSC rate). */
u64 asi_tsc_to_ns(u64 cycles)
{
	return tsc_khz ? mul_u64_u32_div(cycles, USEC_PER_SEC, tsc_khz) : 0;
}

#include "mm_internal.h"

struct static_key_false asi_enabled_key = STATIC_KEY_FALSE_INIT;
EXPORT_SYMBOL_GPL(asi_enabled_key);

static enum asi_boot_mode asi_boot_mode __ro_after_init = ASI_BOOT_DEFAULT;
/* The rejected value, kept for the boot message and debugfs. */
static char asi_bad_arg[32] __ro_after_init;

/**
 * asi_parse_boot_mode() - interpret the value of the asi= boot parameter
 * @arg: the text after "asi=", or NULL for a bare "asi"
 *
 * Return: %ASI_BOOT_ON for "on", %ASI_BOOT_OFF for "off" and
 * %ASI_BOOT_INVALID for anything else, including an empty value.
 */
enum asi_boot_mode asi_parse_boot_mode(const char *arg)
{
	if (!arg)
		return ASI_BOOT_INVALID;
	if (!strcmp(arg, "on"))
		return ASI_BOOT_ON;
	if (!strcmp(arg, "off"))
		return ASI_BOOT_OFF;
	return ASI_BOOT_INVALID;
}

/* The last asi= on the command line wins, as for other parameters. */
static int __init asi_setup(char *arg)
{
	asi_boot_mode = asi_parse_boot_mode(arg);
	if (asi_boot_mode == ASI_BOOT_INVALID) {
		strscpy(asi_bad_arg, arg ? arg : "", sizeof(asi_bad_arg));
		pr_warn("invalid value \"%s\" for asi= (expected \"on\" or \"off\"), using the default: off\n",
			asi_bad_arg);
	} else {
		asi_bad_arg[0] = '\0';
	}

	if (asi_boot_mode == ASI_BOOT_ON)
		static_branch_enable(&asi_enabled_key);
	else
		static_branch_disable(&asi_enabled_key);
	/* Reported above; returning an error would only add "Malformed". */
	return 0;
}
early_param("asi", asi_setup);

/* Page-table pages come from here; failures are the caller's to report. */
#define ASI_GFP		(GFP_KERNEL_ACCOUNT | __GFP_NOWARN)

/*
 * One mapped range of a domain or of asi_global_ranges. Stored in maple
 * trees keyed by [start, end - 1]; the owner is a string that outlives
 * the range (a module's name, for a module's ranges).
 */
struct asi_range {
	unsigned long start;
	unsigned long end;
	const char *owner;
	enum asi_owner_class class;
	bool ro;	/* mapped without write access */
};

/*
 * Every live domain, and what every domain maps beyond its always-mapped
 * set (the allowlist, loaded modules); both under asi_domains_lock.
 */
static LIST_HEAD(asi_domains);
static DEFINE_MUTEX(asi_domains_lock);
static DEFINE_MTREE(asi_global_ranges);
static atomic_t asi_next_id = ATOMIC_INIT(0);
static atomic64_t asi_next_gen = ATOMIC64_INIT(0);

/*
 * need_flush starts true: before its first entry a CPU has run only on the
 * full table, so the first entry must not skip the flush.
 */
DEFINE_PER_CPU_ASI(struct asi_cpu_state, asi_cpu) = { .need_flush = true };
EXPORT_PER_CPU_SYMBOL_GPL(asi_cpu);

static const char * const asi_owner_class_names[] = {
	[ASI_OWNER_ALWAYS]	= "always",
	[ASI_OWNER_ALLOWLIST]	= "allowlist",
	[ASI_OWNER_DOMAIN]	= "domain",
};

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
static struct asi_range *asi_range_alloc(unsigned long start, unsigned long end,
					 const char *owner, enum asi_owner_class class,
					 gfp_t gfp)
{
	struct asi_range *r = kmalloc(sizeof(*r), gfp);

	if (r)
		*r = (struct asi_range){ .start = start, .end = end, .owner = owner,
					 .class = class };
	return r;
}

static int __asi_map_range(struct asi *asi, unsigned long start, unsigned long end,
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

static int asi_map_range(struct asi *asi, unsigned long start, unsigned long end,
			 const char *owner, enum asi_owner_class class)
{
	return __asi_map_range(asi, start, end, owner, class, false);
}

/* Unmap exactly the range that starts at @start; false if there is none. */
static bool asi_unmap_range(struct asi *asi, unsigned long start, unsigned long end)
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

static bool asi_range_valid(unsigned long start, unsigned long end)
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

static void asi_free(struct asi *asi)
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

static int asi_share_cea(struct asi *asi)
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
static int asi_share_kasan_shadow(struct asi *asi)
{
#ifdef CONFIG_KASAN
	return asi_share_kernel_p4ds(asi, KASAN_SHADOW_START, KASAN_SHADOW_END,
				     "KASAN shadow");
#else
	return 0;
#endif
}

/*
 * The always-mapped set: what any code needs to run on a restricted table
 * and what the switch, entry and fault paths touch there.
 */
static int asi_map_always(struct asi *asi)
{
	unsigned int cpu;
	int err;

	/*
	 * Kernel text and rodata, as PTI may map them to user space: their
	 * contents are those of the kernel image, but for the ro_after_init
	 * data set at boot. Of that, what is secret (__ro_after_init_secret:
	 * seeds and keys) is left out. What remains reveals the kernel's
	 * layout (the KASLR bases), which every mapped pointer reveals too.
	 * Past rodata lie secrets, and so may the gaps around rodata, which
	 * are freed at boot.
	 */
	err = asi_map_range(asi, PFN_ALIGN(_text), PFN_ALIGN(_etext),
			    "kernel text", ASI_OWNER_ALWAYS);
	if (err)
		return err;
	err = asi_map_range(asi, PFN_ALIGN(__start_rodata),
			    PFN_ALIGN(__start_ro_after_init_secret),
			    "kernel rodata", ASI_OWNER_ALWAYS);
	if (err)
		return err;
	err = asi_map_range(asi, PFN_ALIGN(__end_ro_after_init_secret),
			    PFN_ALIGN(__end_rodata), "kernel rodata", ASI_OWNER_ALWAYS);
	if (err)
		return err;
	err = asi_share_cea(asi);
	if (err)
		return err;
	err = asi_share_kasan_shadow(asi);
	if (err)
		return err;
	/* __asi_data: global variables in pages of their own. */
	if ((unsigned long)__asi_data_end > (unsigned long)__asi_data_start) {
		err = asi_map_range(asi, (unsigned long)__asi_data_start,
				    (unsigned long)__asi_data_end, "ASI data section",
				    ASI_OWNER_ALWAYS);
		if (err)
			return err;
	}
	/* In xAPIC mode, interrupt handlers write the EOI register. */
	if (boot_cpu_has(X86_FEATURE_APIC) && !x2apic_mode) {
		unsigned long apic = fix_to_virt(FIX_APIC_BASE);

		err = asi_map_range(asi, apic, apic + PAGE_SIZE, "local APIC",
				    ASI_OWNER_ALWAYS);
		if (err)
			return err;
	}

	for_each_possible_cpu(cpu) {
		unsigned long off = per_cpu_offset(cpu);

		/* DEFINE_PER_CPU_ASI() variables: pages of their own. */
		if ((unsigned long)__per_cpu_asi_end > (unsigned long)__per_cpu_asi_start) {
			err = asi_map_range(asi, (unsigned long)__per_cpu_asi_start + off,
					    (unsigned long)__per_cpu_asi_end + off,
					    "per-CPU ASI section", ASI_OWNER_ALWAYS);
			if (err)
				return err;
		}
		/* The first per-CPU page: the gs base and stack canary. */
		err = asi_map_range(asi, (unsigned long)&per_cpu(fixed_percpu_data, cpu),
				    (unsigned long)&per_cpu(fixed_percpu_data, cpu) + PAGE_SIZE,
				    "fixed_percpu_data", ASI_OWNER_ALWAYS);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Map every range of asi_global_add() (the allowlist, loaded modules) into
 * a new domain; asi_domains_lock held.
 */
static int asi_map_allowlist(struct asi *asi)
{
	struct asi_range *r;
	unsigned long index = 0;
	int err;

	lockdep_assert_held(&asi_domains_lock);
	mt_for_each(&asi_global_ranges, r, index, ULONG_MAX) {
		err = __asi_map_range(asi, r->start, r->end, r->owner, r->class, r->ro);
		if (err)
			return err;
	}
	return 0;
}

/**
 * asi_create() - create a domain
 * @name: a name for debugfs and messages (copied, truncated to 31 bytes)
 *
 * The new domain maps the always-mapped set and the allowlist, nothing
 * else. Can sleep.
 *
 * Return: the domain with one reference; ERR_PTR(-EOPNOTSUPP) when ASI is
 * off, or the error of mapping the allowlist (-ENOMEM). Nothing is left
 * allocated on failure.
 */
struct asi *asi_create(const char *name)
{
	struct asi *asi;
	int err;

	might_sleep();
	if (!asi_enabled())
		return ERR_PTR(-EOPNOTSUPP);
	asi = kzalloc(sizeof(*asi), GFP_KERNEL_ACCOUNT);
	if (!asi)
		return ERR_PTR(-ENOMEM);
	asi->faults = kzalloc(sizeof(*asi->faults), GFP_KERNEL_ACCOUNT);
	asi->pgd = (pgd_t *)__get_free_pages(ASI_GFP | __GFP_ZERO, PGD_ALLOCATION_ORDER);
	if (!asi->pgd || !asi->faults) {
		free_pages((unsigned long)asi->pgd, PGD_ALLOCATION_ORDER);
		kfree(asi->faults);
		kfree(asi);
		return ERR_PTR(-ENOMEM);
	}
	refcount_set(&asi->refcount, 1);
	asi->cr3 = __sme_pa(asi->pgd);
	mutex_init(&asi->lock);
	mt_init(&asi->ranges);
	strscpy(asi->name, name, sizeof(asi->name));
	asi->id = atomic_inc_return(&asi_next_id);
	asi->gen = atomic64_inc_return(&asi_next_gen);

	mutex_lock(&asi_domains_lock);
	err = asi_map_always(asi);
	if (!err)
		err = asi_map_allowlist(asi);
	if (!err)
		list_add_tail(&asi->list, &asi_domains);
	mutex_unlock(&asi_domains_lock);
	if (err) {
		asi_free(asi);
		return ERR_PTR(err);
	}
	return asi;
}
EXPORT_SYMBOL_GPL(asi_create);

/*
 * No CPU may still have @asi entered when its last reference goes: CPUs
 * leave their domain before any context switch, so the owner's tasks
 * having stopped means the CPUs are gone from it. Translations of its
 * table were flushed when each CPU left (every switch flushes).
 */
static void asi_check_unused(struct asi *asi)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		WARN_ONCE(READ_ONCE(per_cpu(asi_cpu.curr, cpu)) == asi,
			  "ASI: %s destroyed while CPU %u is on it\n", asi->name, cpu);
}

/**
 * asi_get() - take a reference on a domain
 * @asi: the domain
 *
 * Return: @asi.
 */
struct asi *asi_get(struct asi *asi)
{
	refcount_inc(&asi->refcount);
	return asi;
}
EXPORT_SYMBOL_GPL(asi_get);

/**
 * asi_put() - drop a reference; the last one destroys the domain
 * @asi: the domain, or NULL
 *
 * Destruction frees every mapping record and page-table page of @asi. Its
 * owner must have unmapped the memory it mapped before freeing it; what
 * is still mapped at this point only loses its restricted mapping. Can
 * sleep.
 */
void asi_put(struct asi *asi)
{
	if (!asi)
		return;
	might_sleep();
	if (!refcount_dec_and_mutex_lock(&asi->refcount, &asi_domains_lock))
		return;
	list_del(&asi->list);
	mutex_unlock(&asi_domains_lock);
	asi_check_unused(asi);
	asi_free(asi);
}
EXPORT_SYMBOL_GPL(asi_put);

/*
 * Map a range into every domain, now and at creation: the allowlist, and
 * loaded modules' text, rodata, ro_after_init and ASI data (class always;
 * see asi_map_module()).
 */
static int asi_global_add(const char *owner, const void *addr, size_t len,
			  enum asi_owner_class class, bool ro)
{
	unsigned long start = PAGE_ALIGN_DOWN((unsigned long)addr);
	unsigned long end = PAGE_ALIGN((unsigned long)addr + len);
	struct asi_range *r;
	struct asi *asi;
	int err;

	might_sleep();
	if (!len || !asi_range_valid(start, end) || !owner)
		return -EINVAL;
	r = asi_range_alloc(start, end, owner, class, GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	r->ro = ro;

	mutex_lock(&asi_domains_lock);
	err = mtree_insert_range(&asi_global_ranges, start, end - 1, r, GFP_KERNEL);
	if (err)
		goto out;
	list_for_each_entry(asi, &asi_domains, list) {
		err = __asi_map_range(asi, start, end, owner, class, ro);
		if (err)
			break;
	}
	if (err) {
		list_for_each_entry_continue_reverse(asi, &asi_domains, list)
			asi_unmap_range(asi, start, end);
		mtree_erase(&asi_global_ranges, start);
	}
out:
	mutex_unlock(&asi_domains_lock);
	if (err)
		kfree(r);
	return err;
}

/**
 * asi_allowlist_add() - map a range into every domain, present and future
 * @owner: the subsystem the range belongs to (a string with static lifetime)
 * @addr: start of the range
 * @len: its length in bytes
 *
 * For data that holds nothing secret and that the code running on a
 * restricted table needs. Whole pages are mapped, as for asi_map(). Can
 * sleep.
 *
 * Return: 0, or the error of asi_map(); on error no domain maps the range.
 */
int asi_allowlist_add(const char *owner, const void *addr, size_t len)
{
	return asi_global_add(owner, addr, len, ASI_OWNER_ALLOWLIST, false);
}
EXPORT_SYMBOL_GPL(asi_allowlist_add);

/*
 * Undo asi_global_add() of a range of @class: unmap it from every domain,
 * flushing each (asi_flush_domain()). False if there is no such range.
 */
static bool asi_global_remove(const void *addr, size_t len, enum asi_owner_class class)
{
	unsigned long start = PAGE_ALIGN_DOWN((unsigned long)addr);
	unsigned long end = PAGE_ALIGN((unsigned long)addr + len);
	struct asi_range *r;
	struct asi *asi;

	might_sleep();
	mutex_lock(&asi_domains_lock);
	r = mtree_load(&asi_global_ranges, start);
	if (!r || r->start != start || r->end != end || r->class != class) {
		mutex_unlock(&asi_domains_lock);
		return false;
	}
	mtree_erase(&asi_global_ranges, start);
	list_for_each_entry(asi, &asi_domains, list)
		WARN_ON_ONCE(!asi_unmap_range(asi, start, end));
	mutex_unlock(&asi_domains_lock);
	kfree(r);
	return true;
}

/**
 * asi_allowlist_remove() - undo asi_allowlist_add()
 * @addr: @addr given to asi_allowlist_add()
 * @len: @len given to asi_allowlist_add()
 *
 * Unmaps the range from every domain and flushes it as asi_unmap() does.
 * Can sleep.
 */
void asi_allowlist_remove(const void *addr, size_t len)
{
	bool removed = asi_global_remove(addr, len, ASI_OWNER_ALLOWLIST);

	WARN_ONCE(!removed, "ASI: %#lx+%zu is not on the allowlist\n",
		  (unsigned long)addr, len);
}
EXPORT_SYMBOL_GPL(asi_allowlist_remove);

#ifdef CONFIG_MODULES
/*
 * Modules: their text, rodata and ro_after_init data are mapped into
 * every domain while they are loaded, as vmlinux's are (vmlinux's
 * ro_after_init data lies in its rodata), and so are their __asi_data,
 * which the module loader gives pages of its own, and their
 * indirect-branch thunk pages on ITS-affected CPUs. Every module is, not
 * only KVM's: as with vmlinux, text and rodata hold nothing of any VM,
 * and an exit may call into any module (irqbypass, an eventfd's owner).
 * Mapped when the module is coming (ASI copies the kernel's PTEs: text and
 * rodata have their final protections then; ro_after_init data is still
 * written by the module's init, on the full table, and is mapped
 * read-only), unmapped when it is going, before the loader frees it. Init
 * text and data (freed after init) and other data are not mapped.
 */
static const struct {
	enum mod_mem_type type;
	bool ro;
} asi_module_mem[] = {
	{ MOD_TEXT, false },
	{ MOD_RODATA, false },
	{ MOD_RO_AFTER_INIT, true },
};

enum asi_module_op {
	ASI_MODULE_MAP,
	ASI_MODULE_UNDO,	/* of a failed map: skip what is not mapped */
	ASI_MODULE_UNMAP,
};

static int asi_module_range(struct module *mod, void *base, size_t size, bool ro,
			    enum asi_module_op op)
{
	switch (op) {
	case ASI_MODULE_MAP:
		return asi_global_add(mod->name, base, size, ASI_OWNER_ALWAYS, ro);
	case ASI_MODULE_UNDO:
		asi_global_remove(base, size, ASI_OWNER_ALWAYS);
		break;
	case ASI_MODULE_UNMAP:
		WARN_ON_ONCE(!asi_global_remove(base, size, ASI_OWNER_ALWAYS));
		break;
	}
	return 0;
}

/* Do @op on each range of @mod that every domain maps; stop at an error. */
static int asi_module_ranges(struct module *mod, enum asi_module_op op)
{
	int i, err;

	for (i = 0; i < ARRAY_SIZE(asi_module_mem); i++) {
		struct module_memory *mem = &mod->mem[asi_module_mem[i].type];

		if (!mem->size)
			continue;
		err = asi_module_range(mod, mem->base, mem->size, asi_module_mem[i].ro, op);
		if (err)
			return err;
	}
	if (mod->asi_data_size) {
		err = asi_module_range(mod, mod->asi_data, mod->asi_data_size, false, op);
		if (err)
			return err;
	}
#ifdef CONFIG_MITIGATION_ITS
	/* Indirect-branch thunks on ITS-affected CPUs: text outside mod->mem[]. */
	for (i = 0; i < mod->its_num_pages; i++) {
		err = asi_module_range(mod, mod->its_page_array[i], PAGE_SIZE, false, op);
		if (err)
			return err;
	}
#endif
	return 0;
}

static int asi_map_module(struct module *mod)
{
	int err = asi_module_ranges(mod, ASI_MODULE_MAP);

	if (err) {
		asi_module_ranges(mod, ASI_MODULE_UNDO);
		pr_warn("cannot map module %s: %d\n", mod->name, err);
	}
	return err;
}

static int asi_module_notify(struct notifier_block *nb, unsigned long action,
			     void *data)
{
	struct module *mod = data;

	switch (action) {
	case MODULE_STATE_COMING:
		return notifier_from_errno(asi_map_module(mod));
	case MODULE_STATE_GOING:
		asi_module_ranges(mod, ASI_MODULE_UNMAP);
		break;
	}
	return NOTIFY_OK;
}

static struct notifier_block asi_module_nb = {
	.notifier_call = asi_module_notify,
};

static int __init asi_register_module_notifier(void)
{
	return register_module_notifier(&asi_module_nb);
}
#else
static inline int asi_register_module_notifier(void)
{
	return 0;
}
#endif

#ifdef CONFIG_SMP
/*
 * Modules' DEFINE_PER_CPU_ASI() variables, allocated from the room that
 * vmlinux.lds.h leaves after vmlinux's in the ASI per-CPU pages, which
 * every domain maps: a bitmap of 8-byte units. The room stays mapped, so
 * what a module leaves there is cleared when it is freed.
 */
#define ASI_PERCPU_UNIT		8
#define ASI_PERCPU_UNITS	(2 * PAGE_SIZE / ASI_PERCPU_UNIT)

static DECLARE_BITMAP(asi_percpu_used, ASI_PERCPU_UNITS);
static DEFINE_MUTEX(asi_percpu_lock);

static unsigned long asi_percpu_units(void)
{
	unsigned long size = __per_cpu_asi_end - __per_cpu_asi_module_start;

	/* The room is PERCPU_ASI_MODULE_RESERVE and less than a page. */
	WARN_ON_ONCE(size / ASI_PERCPU_UNIT > ASI_PERCPU_UNITS);
	return min(size / ASI_PERCPU_UNIT, ASI_PERCPU_UNITS);
}

/**
 * asi_percpu_alloc() - room for a module's DEFINE_PER_CPU_ASI() variables
 * @size: size of the module's .data..percpu..asi section
 * @align: its alignment, at most a page
 *
 * For the module loader. The room lies in vmlinux's ASI per-CPU pages,
 * which every domain maps, and is zeroed on every CPU. Can sleep.
 *
 * Return: the per-CPU pointer, or NULL if @size is 0, @align is more than
 * a page or the room is used up.
 */
void __percpu *asi_percpu_alloc(size_t size, size_t align)
{
	unsigned long base = (unsigned long)__per_cpu_asi_module_start;
	unsigned long nr = DIV_ROUND_UP(size, ASI_PERCPU_UNIT);
	unsigned long units = asi_percpu_units();
	unsigned long mask, start;

	if (!size || align > PAGE_SIZE)
		return NULL;
	mask = max_t(unsigned long, align, ASI_PERCPU_UNIT) / ASI_PERCPU_UNIT - 1;

	mutex_lock(&asi_percpu_lock);
	start = bitmap_find_next_zero_area_off(asi_percpu_used, units, 0, nr, mask,
					       base / ASI_PERCPU_UNIT);
	if (start + nr <= units)
		bitmap_set(asi_percpu_used, start, nr);
	mutex_unlock(&asi_percpu_lock);
	if (start + nr > units) {
		pr_warn("no room for %zu bytes of module per-CPU data (%lu bytes in all)\n",
			size, units * ASI_PERCPU_UNIT);
		return NULL;
	}
	return (void __percpu *)(base + start * ASI_PERCPU_UNIT);
}

/**
 * asi_percpu_free() - free what asi_percpu_alloc() returned
 * @ptr: the per-CPU pointer
 * @size: @size given to asi_percpu_alloc()
 *
 * Clears the room on every CPU first. Can sleep.
 */
void asi_percpu_free(void __percpu *ptr, size_t size)
{
	unsigned long base = (unsigned long)__per_cpu_asi_module_start;
	unsigned long start = ((unsigned long)ptr - base) / ASI_PERCPU_UNIT;
	unsigned long nr = DIV_ROUND_UP(size, ASI_PERCPU_UNIT);
	unsigned int cpu;

	if (WARN_ON_ONCE((unsigned long)ptr < base || start + nr > asi_percpu_units()))
		return;
	mutex_lock(&asi_percpu_lock);
	/* Not allocated so: clearing it would clear another module's. */
	if (!WARN_ON_ONCE(find_next_zero_bit(asi_percpu_used, start + nr, start) <
			  start + nr)) {
		for_each_possible_cpu(cpu)
			memset(per_cpu_ptr(ptr, cpu), 0, size);
		bitmap_clear(asi_percpu_used, start, nr);
	}
	mutex_unlock(&asi_percpu_lock);
}

/* Bytes of the modules' room in use, and in all, for debugfs. */
static void asi_percpu_usage(unsigned long *used, unsigned long *total)
{
	mutex_lock(&asi_percpu_lock);
	*used = bitmap_weight(asi_percpu_used, asi_percpu_units()) * ASI_PERCPU_UNIT;
	mutex_unlock(&asi_percpu_lock);
	*total = asi_percpu_units() * ASI_PERCPU_UNIT;
}
#else
static void asi_percpu_usage(unsigned long *used, unsigned long *total)
{
	*used = *total = 0;
}
#endif

/**
 * asi_walk_ranges() - walk what a domain maps, for debugfs and tools
 * @asi: the domain
 * @fn: called for each range, in address order, under the domain's lock
 * @data: passed to @fn
 */
void asi_walk_ranges(struct asi *asi, asi_range_fn_t fn, void *data)
{
	struct asi_range *r;
	unsigned long index = 0;

	mutex_lock(&asi->lock);
	mt_for_each(&asi->ranges, r, index, ULONG_MAX)
		fn(data, r->start, r->end, r->owner, r->class);
	mutex_unlock(&asi->lock);
}
EXPORT_SYMBOL_GPL(asi_walk_ranges);

static void asi_mapping_show(void *data, unsigned long start, unsigned long end,
			     const char *owner, enum asi_owner_class class)
{
	seq_printf(data, "0x%016lx-0x%016lx %8lu %-9s %s\n", start, end,
		   (end - start) >> PAGE_SHIFT, asi_owner_class_name(class), owner);
}

/**
 * asi_mappings_show() - print what a domain maps and why
 * @m: the seq_file
 * @asi: the domain
 *
 * One line per range, in address order: start-end, pages, owner class
 * ("always", "allowlist", "domain") and owner. A domain that shares an
 * mm's user half (asi_share_user()) has a last line of class "user".
 */
void asi_mappings_show(struct seq_file *m, struct asi *asi)
{
	seq_puts(m, "# start-end pages class owner\n");
	asi_walk_ranges(asi, asi_mapping_show, m);
	if (READ_ONCE(asi->user_mm))
		seq_printf(m, "0x%016lx-0x%016lx %8s %-9s %s\n", 0UL,
			   (unsigned long)PGD_KERNEL_START << PGDIR_SHIFT, "-", "user",
			   "the owner's user address space (asi_share_user())");
}
EXPORT_SYMBOL_GPL(asi_mappings_show);

/*
 * ptdump's walker on a copy of @asi's PGD with the user half left empty:
 * dumped into @m, or (@checkwx) checked for writable and executable
 * mappings, as CONFIG_DEBUG_WX checks the kernel's table at boot (a W+X
 * page WARNs once). Return: 0, -ENOMEM, -ENODEV without CONFIG_PTDUMP, or
 * -EACCES if @checkwx found W+X pages.
 */
static int asi_walk_kernel_half(struct seq_file *m, struct asi *asi, bool checkwx)
{
	bool ok;
	pgd_t *pgd;

	if (!IS_ENABLED(CONFIG_PTDUMP))
		return -ENODEV;
	pgd = (pgd_t *)get_zeroed_page(GFP_KERNEL);
	if (!pgd)
		return -ENOMEM;
	mutex_lock(&asi->lock);
	memcpy(pgd + PGD_KERNEL_START, asi->pgd + PGD_KERNEL_START,
	       (PTRS_PER_PGD - PGD_KERNEL_START) * sizeof(*pgd));
	if (m) {
		unsigned int i, n = 0;

		for (i = 0; i < PGD_KERNEL_START; i++)
			n += native_pgd_val(READ_ONCE(asi->pgd[i])) != 0;
		seq_printf(m, "# user half: %u top-level entries, %s\n", n, asi->user_mm ?
			   "the owner's user address space (asi_share_user()), not dumped" :
			   "not shared");
	}
	ok = ptdump_walk_pgd_level_core(checkwx ? NULL : m, &init_mm, pgd, checkwx, false);
	mutex_unlock(&asi->lock);
	free_page((unsigned long)pgd);
	return ok ? 0 : -EACCES;
}

/**
 * asi_pagetable_show() - dump a domain's restricted table, as ptdump does
 * @m: the seq_file
 * @asi: the domain
 *
 * The kernel half, in the format of /sys/kernel/debug/page_tables/kernel
 * (the same walker). The user half is summed up in a first line, the
 * number of its top-level entries: when the domain shares an mm's, its
 * lower levels are the mm's own and change under the mm's locks.
 *
 * Return: 0, -ENOMEM, or -ENODEV without CONFIG_PTDUMP.
 */
int asi_pagetable_show(struct seq_file *m, struct asi *asi)
{
	return asi_walk_kernel_half(m, asi, false);
}
EXPORT_SYMBOL_GPL(asi_pagetable_show);

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

/*
 * For test hooks: whether @asi's table translates @va, the user half
 * included (under the shared mm's mmap lock), at any page size. Exported
 * as GPL, not for KUnit only: KVM's asi/translate test hook uses it.
 */
bool asi_test_translates(struct asi *asi, unsigned long va)
{
	struct mm_struct *mm = READ_ONCE(asi->user_mm);
	unsigned int level;
	bool user = va < TASK_SIZE_MAX;
	pte_t *pte;
	bool ret;

	if (user && !mm)
		return false;
	if (user)
		mmap_read_lock(mm);
	pte = lookup_address_in_pgd(asi->pgd + pgd_index(va), va, &level);
	ret = pte && pte_present(*pte);
	if (user)
		mmap_read_unlock(mm);
	return ret;
}
EXPORT_SYMBOL_GPL(asi_test_translates);
#endif

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

static DEFINE_PER_CPU_ASI(struct asi_smt, asi_smt);
DEFINE_STATIC_KEY_FALSE(asi_smt_key);
EXPORT_SYMBOL_GPL(asi_smt_key);
DEFINE_STATIC_KEY_FALSE(asi_guest_trace_key);
EXPORT_SYMBOL_GPL(asi_guest_trace_key);

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

/* Out of line and instrumentable: only ever called on the full table. */
static noinline void asi_smt_emit_kick(unsigned int sibling, u64 cycles)
{
	if (rcu_is_watching())
		trace_asi_smt_kick(sibling, asi_tsc_to_ns(cycles));
	else
		this_cpu_inc(asi_cpu.trace_missed);
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
static struct asi_fault_log asi_all_faults;

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

/**
 * asi_owner_class_name() - the name of an owner class
 * @class: the class
 *
 * Return: "always", "allowlist" or "domain".
 */
const char *asi_owner_class_name(enum asi_owner_class class)
{
	if (WARN_ON_ONCE(class >= ARRAY_SIZE(asi_owner_class_names)))
		return "?";
	return asi_owner_class_names[class];
}
EXPORT_SYMBOL_GPL(asi_owner_class_name);

/* What a kernel address belongs to, for the fault logs. */
static void asi_describe(struct seq_file *m, unsigned long addr)
{
	struct vm_struct *area;
	unsigned int cpu;

	if (addr < TASK_SIZE_MAX) {
		seq_puts(m, "user");
		return;
	}
	for_each_possible_cpu(cpu) {
		unsigned long base = (unsigned long)__per_cpu_start + per_cpu_offset(cpu);

		if (addr >= base && addr < base + (__per_cpu_end - __per_cpu_start)) {
			seq_printf(m, "per-CPU %pS (cpu %u)",
				   (void *)(addr - per_cpu_offset(cpu)), cpu);
			return;
		}
	}
	if (addr >= (unsigned long)_text && addr < (unsigned long)_end) {
		seq_printf(m, "kernel %pS", (void *)addr);
		return;
	}
	if (virt_addr_valid((void *)addr)) {
		struct page *page = virt_to_page((void *)addr);

		if (PageSlab(page))
			seq_puts(m, "direct map: slab");
		else if (PageTable(page))
			seq_puts(m, "direct map: page table");
		else
			seq_puts(m, "direct map: page");
		return;
	}
	if (is_module_address(addr)) {
		seq_printf(m, "module %pS", (void *)addr);
		return;
	}
	if (is_vmalloc_addr((void *)addr)) {
		area = find_vm_area((void *)addr);
		if (area)
			seq_printf(m, "vmalloc from %pS", area->caller);
		else
			seq_puts(m, "vmalloc");
		return;
	}
	if (addr >= CPU_ENTRY_AREA_BASE && addr < CPU_ENTRY_AREA_BASE + CPU_ENTRY_AREA_MAP_SIZE) {
		seq_puts(m, "cpu_entry_area");
		return;
	}
	if (addr >= VMEMMAP_START && addr < CPU_ENTRY_AREA_BASE) {
		seq_puts(m, "struct page (vmemmap)");
		return;
	}
	seq_puts(m, "?");
}

/**
 * asi_fault_log_show() - print a domain's fallback faults
 * @m: the seq_file of a debugfs file
 * @asi: the domain, or NULL for the faults of every domain
 *
 * One line per fault site (ip and address page): how often it faulted,
 * the ip as a symbol, the address and what the address belongs to.
 */
void asi_fault_log_show(struct seq_file *m, struct asi *asi)
{
	struct asi_fault_log *log = asi ? asi->faults : &asi_all_faults;
	unsigned int i;

	seq_puts(m, "count\tip\taddress\terror_code\twhat\n");
	for (i = 0; i < ASI_FAULT_LOG_SIZE; i++) {
		struct asi_fault_entry *e = &log->entries[i];
		unsigned long ip = READ_ONCE(e->ip);
		unsigned long address = READ_ONCE(e->address);

		if (!ip)
			continue;
		seq_printf(m, "%ld\t%pS\t%#lx\t%#lx\t", atomic_long_read(&e->count),
			   (void *)ip, address, READ_ONCE(e->error_code));
		asi_describe(m, address);
		seq_putc(m, '\n');
	}
	seq_printf(m, "dropped\t%ld\n", atomic_long_read(&log->dropped));
}
EXPORT_SYMBOL_GPL(asi_fault_log_show);

/*
 * Racing faults may survive the reset, or be lost; the log is for finding
 * fault sites, the per-CPU and KVM counters are exact.
 */
static void asi_fault_log_reset(struct asi *asi)
{
	struct asi_fault_log *log = asi ? asi->faults : &asi_all_faults;
	unsigned int i;

	for (i = 0; i < ASI_FAULT_LOG_SIZE; i++) {
		atomic_long_set(&log->entries[i].count, 0);
		WRITE_ONCE(log->entries[i].ip, 0);
	}
	atomic_long_set(&log->dropped, 0);
}

/**
 * asi_fault_log_write() - a write to a fault log's debugfs file
 * @asi: the domain, or NULL for the log of every domain
 * @buf: what user space wrote
 * @count: its length
 *
 * Writing 0 resets the log; anything else is refused.
 *
 * Return: @count, -EINVAL for a value other than 0, or the error of
 * parsing @buf.
 */
ssize_t asi_fault_log_write(struct asi *asi, const char __user *buf, size_t count)
{
	unsigned int val;
	int err;

	err = kstrtouint_from_user(buf, count, 0, &val);
	if (err)
		return err;
	if (val)
		return -EINVAL;
	asi_fault_log_reset(asi);
	return count;
}
EXPORT_SYMBOL_GPL(asi_fault_log_write);

static int asi_faults_show(struct seq_file *m, void *v)
{
	asi_fault_log_show(m, NULL);
	return 0;
}

static int asi_faults_open(struct inode *inode, struct file *file)
{
	return single_open(file, asi_faults_show, NULL);
}

static ssize_t asi_faults_write(struct file *file, const char __user *buf,
				size_t count, loff_t *ppos)
{
	return asi_fault_log_write(NULL, buf, count);
}

static const struct file_operations asi_faults_fops = {
	.owner		= THIS_MODULE,
	.open		= asi_faults_open,
	.read		= seq_read,
	.write		= asi_faults_write,
	.llseek		= seq_lseek,
	.release	= single_release,
};

static const char *asi_boot_mode_str(void)
{
	switch (asi_boot_mode) {
	case ASI_BOOT_ON:
		return "asi=on";
	case ASI_BOOT_OFF:
		return "asi=off";
	case ASI_BOOT_INVALID:
		return "invalid asi= value, default";
	default:
		return "default";
	}
}

static int asi_state_show(struct seq_file *m, void *v)
{
	seq_printf(m, "enabled: %s\n", asi_enabled() ? "on" : "off");
	seq_printf(m, "reason: %s\n", asi_boot_mode_str());
	if (asi_boot_mode == ASI_BOOT_INVALID)
		seq_printf(m, "rejected: \"%s\"\n", asi_bad_arg);
	if (asi_enabled()) {
		unsigned long used, total;

		seq_printf(m, "pcid: %s\n", cpu_feature_enabled(X86_FEATURE_PCID) ?
			   "on (restricted tables keep their translations across switches)" :
			   "off (every switch flushes the TLB)");
		asi_percpu_usage(&used, &total);
		seq_printf(m, "module_percpu_bytes: %lu used of %lu\n", used, total);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(asi_state);

static int asi_domains_show(struct seq_file *m, void *v)
{
	struct asi *asi;

	seq_puts(m, "id\tname\trefs\tpgtable_pages\n");
	mutex_lock(&asi_domains_lock);
	list_for_each_entry(asi, &asi_domains, list)
		seq_printf(m, "%u\t%s\t%u\t%lu\n", asi->id, asi->name,
			   refcount_read(&asi->refcount), asi_pgtable_pages(asi));
	mutex_unlock(&asi_domains_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(asi_domains);

/* CONFIG_DEBUG_WX for the restricted tables: every live domain, on read. */
static int asi_checkwx_show(struct seq_file *m, void *v)
{
	struct asi *asi;
	int err;

	mutex_lock(&asi_domains_lock);
	list_for_each_entry(asi, &asi_domains, list) {
		err = asi_walk_kernel_half(NULL, asi, true);
		seq_printf(m, "%u\t%s\t%s\n", asi->id, asi->name,
			   !err ? "passed" : err == -EACCES ? "FAILED: W+X pages" : "not checked");
	}
	mutex_unlock(&asi_domains_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(asi_checkwx);

static int asi_allowlist_show(struct seq_file *m, void *v)
{
	struct asi_range *r;
	unsigned long index = 0;

	mutex_lock(&asi_domains_lock);
	mt_for_each(&asi_global_ranges, r, index, ULONG_MAX) {
		if (r->class != ASI_OWNER_ALLOWLIST)
			continue;
		seq_printf(m, "0x%016lx-0x%016lx %6lu pages  %s\n", r->start, r->end,
			   (r->end - r->start) >> PAGE_SHIFT, r->owner);
	}
	mutex_unlock(&asi_domains_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(asi_allowlist);

/*
 * With ASI on, nothing but kernel text and rodata may be global (every
 * domain maps both): a global translation survives the switch to a
 * restricted table. The direct map and vmalloc
 * are made non-global where the kernel's default protections are set up
 * (as for PTI); here the kernel image past rodata follows. Like PTI, clear
 * up to the PMD boundary: the image is mapped with PMDs. So do the pages
 * of __ro_after_init_secret data inside the rodata, which no domain maps:
 * random_kmalloc_seed is read on every kmalloc(), and its translation
 * would otherwise be cached, global, when a CPU enters a domain. Modules
 * loaded from now on are mapped into every domain (see asi_map_module()).
 */
static int __init asi_init(void)
{
	unsigned long start = (unsigned long)__end_rodata_aligned;
	unsigned long end = ALIGN((unsigned long)_end, PMD_SIZE);
	unsigned long secret = (unsigned long)__start_ro_after_init_secret;

	if (!asi_enabled())
		return 0;
	set_memory_nonglobal(start, (end - start) >> PAGE_SHIFT);
	if ((unsigned long)__end_ro_after_init_secret > secret)
		set_memory_nonglobal(secret, ((unsigned long)__end_ro_after_init_secret -
					      secret) >> PAGE_SHIFT);
	return asi_register_module_notifier();
}
early_initcall(asi_init);

static int asi_cpus_show(struct seq_file *m, void *v)
{
	unsigned int cpu;

	seq_puts(m, "cpu\tdomain\tenters\texit_owner\texit_sched\texit_user\tfallbacks\tlast_fault_ip\tlast_fault_address\trelaxed_retries\tfallbacks_irq\texit_interrupt\ttrace_missed\tpcid_flushes\tpcid_kept\tunmap_flushes\tunmap_ipis\texit_planned\n");
	for_each_online_cpu(cpu) {
		struct asi_cpu_state *st = per_cpu_ptr(&asi_cpu, cpu);

		seq_printf(m, "%u\t%u\t%lu\t%lu\t%lu\t%lu\t%lu\t%pS\t%#lx\t%lu\t%lu\t%lu\t%lu\t%lu\t%lu\t%lu\t%lu\t%lu\n",
			   cpu,
			   READ_ONCE(st->curr) ? READ_ONCE(st->curr_id) : 0,
			   READ_ONCE(st->enters), READ_ONCE(st->exits[ASI_EXIT_OWNER]),
			   READ_ONCE(st->exits[ASI_EXIT_SCHED]),
			   READ_ONCE(st->exits[ASI_EXIT_USER]), READ_ONCE(st->fallbacks),
			   (void *)READ_ONCE(st->last_fault.ip),
			   READ_ONCE(st->last_fault.address),
			   READ_ONCE(st->relaxed_retries), READ_ONCE(st->fallbacks_irq),
			   READ_ONCE(st->exits[ASI_EXIT_INTERRUPT]),
			   READ_ONCE(st->trace_missed), READ_ONCE(st->pcid_flushes),
			   READ_ONCE(st->pcid_kept), READ_ONCE(st->unmap_flushes),
			   READ_ONCE(st->unmap_ipis), READ_ONCE(st->exits[ASI_EXIT_PLANNED]));
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(asi_cpus);

/*
 * The cost of the switch: writing N to asi/bench runs N enter+leave pairs
 * on a scratch domain, then N reloads of the current CR3, in batches with
 * interrupts off, timed with the TSC; reading asi/bench shows the last
 * result. Without PCIDs every switch is a CR3 write that flushes the TLB,
 * so a pair costs about two reloads plus ASI's bookkeeping. With PCIDs the
 * pairs keep their translations (CR3_NOFLUSH both ways, after the first)
 * while each reload flushes the current PCID.
 */
#define ASI_BENCH_MAX	100000
#define ASI_BENCH_BATCH	1000

static DEFINE_MUTEX(asi_bench_lock);
static struct {
	unsigned long n;
	u64 pair_cycles;
	u64 reload_cycles;
} asi_bench_last;

/* The pairs touch only registers, the stack and ASI's per-CPU state. */
static noinline u64 asi_bench_pairs(struct asi *asi, unsigned long n)
{
	unsigned long flags, i;
	u64 t;

	local_irq_save(flags);
	t = rdtsc_ordered();
	for (i = 0; i < n; i++) {
		asi_enter(asi);
		asi_exit(ASI_EXIT_OWNER);
	}
	t = rdtsc_ordered() - t;
	local_irq_restore(flags);
	return t;
}

static noinline u64 asi_bench_reloads(unsigned long n)
{
	unsigned long flags, i;
	u64 t;

	local_irq_save(flags);
	t = rdtsc_ordered();
	for (i = 0; i < n; i++)
		native_write_cr3(__native_read_cr3());
	t = rdtsc_ordered() - t;
	local_irq_restore(flags);
	return t;
}

static ssize_t asi_bench_write(struct file *file, const char __user *buf,
			       size_t count, loff_t *ppos)
{
	u64 pair = 0, reload = 0;
	unsigned long n, done, b;
	struct asi *asi;
	int err;

	err = kstrtoul_from_user(buf, count, 0, &n);
	if (err)
		return err;
	if (!n || n > ASI_BENCH_MAX)
		return -EINVAL;
	asi = asi_create("bench");
	if (IS_ERR(asi))
		return PTR_ERR(asi);
	err = asi_map_task(asi, current, "benchmark task");
	if (err)
		goto out_put;

	mutex_lock(&asi_bench_lock);
	for (done = 0; done < n; done += b) {
		b = min(n - done, (unsigned long)ASI_BENCH_BATCH);
		/* One CPU for both loops of a batch. */
		migrate_disable();
		pair += asi_bench_pairs(asi, b);
		reload += asi_bench_reloads(b);
		migrate_enable();
		cond_resched();
	}
	asi_bench_last.n = n;
	asi_bench_last.pair_cycles = pair;
	asi_bench_last.reload_cycles = reload;
	mutex_unlock(&asi_bench_lock);

	asi_unmap_task(asi, current);
out_put:
	asi_put(asi);
	return err ? err : count;
}

static int asi_bench_show(struct seq_file *m, void *v)
{
	unsigned long n, khz = tsc_khz;
	u64 pair, reload;

	mutex_lock(&asi_bench_lock);
	n = asi_bench_last.n;
	pair = asi_bench_last.pair_cycles;
	reload = asi_bench_last.reload_cycles;
	mutex_unlock(&asi_bench_lock);
	if (!n) {
		seq_puts(m, "no run yet: write the number of iterations\n");
		return 0;
	}
	seq_printf(m, "iterations: %lu\n", n);
	seq_printf(m, "tsc_khz: %lu\n", khz);
	seq_printf(m, "enter_leave_cycles: %llu\n", div_u64(pair, n));
	seq_printf(m, "cr3_reload_cycles: %llu\n", div_u64(reload, n));
	if (khz) {
		seq_printf(m, "enter_leave_ns: %llu\n", div64_u64(pair * 1000000, (u64)khz * n));
		seq_printf(m, "cr3_reload_ns: %llu\n", div64_u64(reload * 1000000, (u64)khz * n));
	}
	return 0;
}

static int asi_bench_open(struct inode *inode, struct file *file)
{
	return single_open(file, asi_bench_show, NULL);
}

static const struct file_operations asi_bench_fops = {
	.owner		= THIS_MODULE,
	.open		= asi_bench_open,
	.read		= seq_read,
	.write		= asi_bench_write,
	.llseek		= seq_lseek,
	.release	= single_release,
};

/*
 * What no domain may map ("absent"), and what every domain maps although
 * it is another tenant's or the host's ("residual", see the threat model
 * in Documentation/arch/x86/asi.rst): for the audit (asi-pt audit), which
 * checks the first against every VM's table and lists the second.
 */
static void asi_secret_line(struct seq_file *m, unsigned long start, unsigned long end,
			    const char *rule, const char *what)
{
	seq_printf(m, "0x%016lx-0x%016lx %8lu %-8s %s\n", start, end,
		   (end - start) >> PAGE_SHIFT, rule, what);
}

static int asi_secrets_show(struct seq_file *m, void *v)
{
	unsigned int cpu;

	seq_puts(m, "# start-end pages rule what\n");
	if ((unsigned long)__end_ro_after_init_secret > (unsigned long)__start_ro_after_init_secret)
		asi_secret_line(m, (unsigned long)__start_ro_after_init_secret,
				(unsigned long)__end_ro_after_init_secret, "absent",
				"ro_after_init secrets (__ro_after_init_secret: seeds, keys)");
	for_each_possible_cpu(cpu) {
		unsigned long fp = (unsigned long)&per_cpu(fixed_percpu_data, cpu);
		unsigned long cpu_state = (unsigned long)per_cpu_ptr(&asi_cpu, cpu);

		asi_secret_line(m, fp, fp + PAGE_SIZE, "residual",
				"stack canary of the task on this CPU (fixed_percpu_data)");
		asi_secret_line(m, cpu_state & PAGE_MASK,
				PAGE_ALIGN(cpu_state + sizeof(struct asi_cpu_state)), "residual",
				"CR3 values while this CPU is in a domain (asi_cpu)");
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(asi_secrets);

#if IS_ENABLED(CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_KUNIT_TEST)
/*
 * Test hook, built with the KUnit tests only: what a domain can read of
 * every CPU's entry area (shared by all domains, as PTI shares it with
 * user space). Writing a 64-bit value to asi/residue sets a pattern;
 * reading counts, per live domain, per CPU and per part of the CPU's
 * cpu_entry_area, the pages the domain's table translates and the aligned
 * words in them equal to the pattern, read through those translations. A
 * selftest spins a user task with the pattern in its registers on one CPU
 * and looks for it from another (asi_tenant_test).
 */
static u64 asi_residue_pattern;

static const struct {
	const char *name;
	size_t offset;
	size_t size;
} asi_cea_parts[] = {
#define ASI_CEA_PART(name, field)					\
	{ name, offsetof(struct cpu_entry_area, field),			\
	  sizeof_field(struct cpu_entry_area, field) }
	ASI_CEA_PART("gdt", gdt),
	ASI_CEA_PART("entry_stack", entry_stack_page),
	ASI_CEA_PART("tss", tss),
	ASI_CEA_PART("exception_stacks", estacks),
	ASI_CEA_PART("debug_store", cpu_debug_store),
	ASI_CEA_PART("debug_buffers", cpu_debug_buffers),
#undef ASI_CEA_PART
};

/* Pages of [start, start + size) that @asi translates, and pattern hits. */
static void asi_residue_scan(struct asi *asi, unsigned long start, size_t size,
			     unsigned long *pages, unsigned long *hits)
{
	unsigned long va, end = start + size;
	u64 pattern = READ_ONCE(asi_residue_pattern);

	*pages = 0;
	*hits = 0;
	for (va = start & PAGE_MASK; va < end; va += PAGE_SIZE) {
		pte_t pte = asi_lookup(asi, va);
		unsigned long from = max(va, start), to = min(va + PAGE_SIZE, end);
		u64 *words;

		if (!pte_present(pte) || !pfn_valid(pte_pfn(pte)))
			continue;
		(*pages)++;
		words = page_address(pfn_to_page(pte_pfn(pte)));
		for (from = ALIGN(from, 8); from + 8 <= to; from += 8)
			*hits += READ_ONCE(words[(from & ~PAGE_MASK) / 8]) == pattern;
	}
}

static int asi_residue_show(struct seq_file *m, void *v)
{
	unsigned long pages, hits;
	unsigned int cpu, i;
	struct asi *asi;

	seq_puts(m, "domain\tname\tcpu\tpart\tpages\thits\n");
	mutex_lock(&asi_domains_lock);
	list_for_each_entry(asi, &asi_domains, list) {
		for_each_online_cpu(cpu) {
			unsigned long cea = (unsigned long)get_cpu_entry_area(cpu);

			for (i = 0; i < ARRAY_SIZE(asi_cea_parts); i++) {
				asi_residue_scan(asi, cea + asi_cea_parts[i].offset,
						 asi_cea_parts[i].size, &pages, &hits);
				seq_printf(m, "%u\t%s\t%u\t%s\t%lu\t%lu\n", asi->id,
					   asi->name, cpu, asi_cea_parts[i].name, pages, hits);
			}
			cond_resched();
		}
	}
	mutex_unlock(&asi_domains_lock);
	return 0;
}

static int asi_residue_open(struct inode *inode, struct file *file)
{
	return single_open(file, asi_residue_show, NULL);
}

static ssize_t asi_residue_write(struct file *file, const char __user *ubuf,
				 size_t count, loff_t *ppos)
{
	u64 pattern;
	int err;

	err = kstrtou64_from_user(ubuf, count, 0, &pattern);
	if (err)
		return err;
	WRITE_ONCE(asi_residue_pattern, pattern);
	return count;
}

static const struct file_operations asi_residue_fops = {
	.open		= asi_residue_open,
	.read		= seq_read,
	.write		= asi_residue_write,
	.llseek		= seq_lseek,
	.release	= single_release,
};
#endif

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

static int __init asi_report(void)
{
	struct dentry *dir;

	pr_info("%s (%s)\n", asi_enabled() ? "enabled" : "disabled",
		asi_boot_mode_str());

	dir = debugfs_create_dir("asi", NULL);
	debugfs_create_file("state", 0444, dir, NULL, &asi_state_fops);
	if (asi_enabled()) {
		debugfs_create_file("domains", 0400, dir, NULL, &asi_domains_fops);
		debugfs_create_file("allowlist", 0400, dir, NULL, &asi_allowlist_fops);
		debugfs_create_file("cpus", 0400, dir, NULL, &asi_cpus_fops);
		if (IS_ENABLED(CONFIG_DEBUG_WX) && IS_ENABLED(CONFIG_PTDUMP))
			debugfs_create_file("checkwx", 0400, dir, NULL, &asi_checkwx_fops);
		debugfs_create_file("faults", 0600, dir, NULL, &asi_faults_fops);
		debugfs_create_file("bench", 0600, dir, NULL, &asi_bench_fops);
		debugfs_create_file("secrets", 0400, dir, NULL, &asi_secrets_fops);
		debugfs_create_file("smt", 0600, dir, NULL, &asi_smt_fops);
#if IS_ENABLED(CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_KUNIT_TEST)
		debugfs_create_file("residue", 0600, dir, NULL, &asi_residue_fops);
#endif
	}
	return 0;
}
late_initcall(asi_report);
