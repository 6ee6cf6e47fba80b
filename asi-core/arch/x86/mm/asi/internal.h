/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What only the ASI core (arch/x86/mm/asi/) uses: a domain's insides, the
 * records of mapped ranges and faults, the lists every domain is on, and
 * the functions the core's files call in each other. Users of ASI see
 * asm/asi.h.
 */
#ifndef _ARCH_X86_MM_ASI_INTERNAL_H
#define _ARCH_X86_MM_ASI_INTERNAL_H

#include <linux/asi.h>
#include <linux/maple_tree.h>
#include <linux/mutex.h>
#include <linux/refcount.h>

struct dentry;
struct seq_file;

/**
 * struct asi_fault_entry - one fault site of a fault log
 * @ip: the faulting instruction; 0 for a free slot
 * @address: the faulting address
 * @error_code: the page-fault error code of the first fault here
 * @count: fallback faults at this ip and address page
 */
struct asi_fault_entry {
	unsigned long ip;
	unsigned long address;
	unsigned long error_code;
	atomic_long_t count;
};

#define ASI_FAULT_LOG_SIZE	128

/**
 * struct asi_fault_log - fallback faults, deduplicated by ip and page
 * @entries: open-addressed by a hash of ip and page; never shrinks
 * @dropped: faults that found no free slot near their hash
 *
 * Written locklessly from the fault path (NMIs included), read and reset
 * through debugfs.
 */
struct asi_fault_log {
	struct asi_fault_entry entries[ASI_FAULT_LOG_SIZE];
	atomic_long_t dropped;
};

/**
 * struct asi - an ASI domain: a restricted kernel page table
 * @pgd: the top-level table (PGD_ALLOCATION_ORDER pages, like any PGD)
 * @cr3: the CR3 address bits that load @pgd
 * @refcount: references; the last asi_put() frees the domain
 * @lock: serializes changes to the table and to @ranges
 * @ranges: what is mapped, [start, end - 1] -> struct asi_range (owner)
 * @list: on the list of all domains
 * @id: unique, for debugfs and traces
 * @gen: unique and never reused: names the domain's translations in the
 *	 ASI PCIDs of each CPU (see asi_enter())
 * @name: for debugfs and messages
 * @faults: this domain's fallback faults
 * @user_mm: the mm whose user half the domain shares, or NULL
 * @user_list: on the list of domains sharing a user half
 */
struct asi {
	pgd_t *pgd;
	unsigned long cr3;
	refcount_t refcount;
	struct mutex lock;		/* the table and @ranges */
	struct maple_tree ranges;
	struct list_head list;
	unsigned int id;
	u64 gen;
	char name[32];
	struct asi_fault_log *faults;
	struct mm_struct *user_mm;
	struct list_head user_list;
};

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

/* domain.c: every live domain and the ranges every domain maps. */
extern struct list_head asi_domains;
extern struct mutex asi_domains_lock;
extern struct maple_tree asi_global_ranges;
/* Never reused: a domain's translations in the ASI PCIDs (see asi_enter()). */
extern atomic64_t asi_next_gen;

int asi_global_add(const char *owner, const void *addr, size_t len,
		   enum asi_owner_class class, bool ro);
bool asi_global_remove(const void *addr, size_t len, enum asi_owner_class class);
void asi_percpu_usage(unsigned long *used, unsigned long *total);

/* pgtable.c: the table of one domain. */
struct asi_range *asi_range_alloc(unsigned long start, unsigned long end,
				  const char *owner, enum asi_owner_class class,
				  gfp_t gfp);
int __asi_map_range(struct asi *asi, unsigned long start, unsigned long end,
		    const char *owner, enum asi_owner_class class, bool ro);
int asi_map_range(struct asi *asi, unsigned long start, unsigned long end,
		  const char *owner, enum asi_owner_class class);
bool asi_unmap_range(struct asi *asi, unsigned long start, unsigned long end);
bool asi_range_valid(unsigned long start, unsigned long end);
int asi_share_cea(struct asi *asi);
int asi_share_kasan_shadow(struct asi *asi);
void asi_free(struct asi *asi);

/* switch.c: fallback faults of every domain, also of domains gone since. */
extern struct asi_fault_log asi_all_faults;

/* module.c */
#ifdef CONFIG_MODULES
int asi_register_module_notifier(void);
#else
static inline int asi_register_module_notifier(void)
{
	return 0;
}
#endif

/* init.c, debugfs.c */
DECLARE_STATIC_KEY_FALSE(asi_fb_clear_ctrl);

extern struct dentry *asi_debugfs_dir;
const char *asi_boot_mode_str(void);
void asi_debugfs_init(struct dentry *dir);

/* Test hooks, built with the KUnit tests only. */
#if IS_ENABLED(CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_KUNIT_TEST)
unsigned long asi_test_table_cr3(unsigned long table, unsigned long cr3, bool pcid, u16 asid);
bool asi_test_pcid_claim(u16 asid, u64 gen);
#endif

#endif /* _ARCH_X86_MM_ASI_INTERNAL_H */
