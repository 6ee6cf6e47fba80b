// SPDX-License-Identifier: GPL-2.0
/*
 * x86 Address Space Isolation (ASI): domains and what every domain maps.
 *
 * A domain (struct asi) is a kernel page table of its own that maps only
 * what was asked for: the always-mapped set and the allowlist that every
 * domain shares, and the ranges its owner maps with asi_map(). Where the CPU
 * has PCIDs a domain's translations live under an ASI PCID that is flushed
 * before another domain uses it (see switch.c), so no translation of one
 * domain outlives a switch to another. Modules' DEFINE_PER_CPU_ASI()
 * variables are allocated here too, from the room the linker script leaves
 * in ASI's per-CPU pages.
 */
#define pr_fmt(fmt) "ASI: " fmt

#include <linux/asi.h>
#include <linux/init.h>
#include <linux/maple_tree.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <asm/apic.h>
#include <asm/cpu_entry_area.h>
#include <asm/fixmap.h>
#include <asm/pgalloc.h>
#include <asm/processor.h>
#include <asm/sections.h>
#include <asm/tlbflush.h>

#include "internal.h"

/*
 * Every live domain, and what every domain maps beyond its always-mapped
 * set (the allowlist, loaded modules); both under asi_domains_lock.
 */
LIST_HEAD(asi_domains);
DEFINE_MUTEX(asi_domains_lock);	/* the list, the global ranges, the allowlist */
DEFINE_MTREE(asi_global_ranges);
static atomic_t asi_next_id = ATOMIC_INIT(0);
atomic64_t asi_next_gen = ATOMIC64_INIT(0);

static const char * const asi_owner_class_names[] = {
	[ASI_OWNER_ALWAYS]	= "always",
	[ASI_OWNER_ALLOWLIST]	= "allowlist",
	[ASI_OWNER_DOMAIN]	= "domain",
};

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
int asi_global_add(const char *owner, const void *addr, size_t len,
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
bool asi_global_remove(const void *addr, size_t len, enum asi_owner_class class)
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
void asi_percpu_usage(unsigned long *used, unsigned long *total)
{
	mutex_lock(&asi_percpu_lock);
	*used = bitmap_weight(asi_percpu_used, asi_percpu_units()) * ASI_PERCPU_UNIT;
	mutex_unlock(&asi_percpu_lock);
	*total = asi_percpu_units() * ASI_PERCPU_UNIT;
}
#else
void asi_percpu_usage(unsigned long *used, unsigned long *total)
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
