/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _ASM_X86_ASI_H
#define _ASM_X86_ASI_H

/*
 * x86 Address Space Isolation: the contract.
 *
 * A domain (struct asi) is a restricted kernel page table: a PGD of its
 * own whose kernel half maps the allowlist and what the domain's owner
 * mapped with asi_map(), nothing else. Building or changing it never
 * changes the kernel's own page table. Its entries are never global.
 *
 * asi_create()		New domain, one reference; maps the allowlist.
 * asi_get()/asi_put()	References; the last put frees every page-table
 *			page and mapping record of the domain.
 * asi_map()		Map a kernel range (direct map, vmalloc, per-CPU,
 *			kernel image) at 4 KiB granularity; ranges of a
 *			domain never overlap. Sleeps.
 * asi_unmap()		Unmap exactly a range given to asi_map() and flush
 *			its translations on every CPU before returning: the
 *			memory may be freed right after. Sleeps.
 * asi_allowlist_add()	Map a range into every domain, now and later, on
 *			behalf of a named owner. Sleeps.
 * asi_allowlist_remove() Undo it, flushing on every CPU. Sleeps.
 *
 * Boot: ASI is off unless the kernel is booted with "asi=on". The decision
 * is taken once, in early boot, and is visible as the static key
 * asi_enabled_key; with ASI off every hook is a not-taken static branch.
 * Any value other than "on" or "off" is reported in the boot log and the
 * default (off) is used.
 *
 * asi_enabled()	Whether ASI was enabled at boot. Safe in any context,
 *			including noinstr code and NMIs: it is a static branch.
 *
 * The restricted page tables, the switch and the fault-driven fallback are
 * built on this: see Documentation/arch/x86/asi.rst.
 */

#include <linux/compiler.h>
#include <linux/jump_label.h>
#include <linux/list.h>
#include <linux/maple_tree.h>
#include <linux/mutex.h>
#include <linux/refcount.h>
#include <linux/types.h>
#include <asm/pgtable_types.h>

DECLARE_STATIC_KEY_FALSE(asi_enabled_key);

static __always_inline bool asi_enabled(void)
{
	return static_branch_unlikely(&asi_enabled_key);
}

/**
 * enum asi_boot_mode - what the asi= boot parameter asked for
 * @ASI_BOOT_DEFAULT: no asi= parameter (ASI off)
 * @ASI_BOOT_OFF: asi=off
 * @ASI_BOOT_ON: asi=on
 * @ASI_BOOT_INVALID: asi= with another value; the default applies
 */
enum asi_boot_mode {
	ASI_BOOT_DEFAULT,
	ASI_BOOT_OFF,
	ASI_BOOT_ON,
	ASI_BOOT_INVALID,
};

enum asi_boot_mode asi_parse_boot_mode(const char *arg);

/**
 * enum asi_owner_class - why a range is mapped in a domain
 * @ASI_OWNER_ALLOWLIST: on the allowlist, mapped in every domain
 * @ASI_OWNER_DOMAIN: mapped by the domain's owner with asi_map()
 */
enum asi_owner_class {
	ASI_OWNER_ALLOWLIST,
	ASI_OWNER_DOMAIN,
};

/**
 * struct asi - an ASI domain: a restricted kernel page table
 * @pgd: the top-level table (PGD_ALLOCATION_ORDER pages, like any PGD)
 * @refcount: references; the last asi_put() frees the domain
 * @lock: serializes changes to the table and to @ranges
 * @ranges: what is mapped, [start, end - 1] -> struct asi_range (owner)
 * @list: on the list of all domains
 * @id: unique, for debugfs and traces
 * @name: for debugfs and messages
 */
struct asi {
	pgd_t *pgd;
	refcount_t refcount;
	struct mutex lock;
	struct maple_tree ranges;
	struct list_head list;
	unsigned int id;
	char name[32];
};

struct asi *asi_create(const char *name);
struct asi *asi_get(struct asi *asi);
void asi_put(struct asi *asi);
int asi_map(struct asi *asi, const void *addr, size_t len, const char *owner);
void asi_unmap(struct asi *asi, const void *addr, size_t len);
int asi_allowlist_add(const char *owner, const void *addr, size_t len);
void asi_allowlist_remove(const void *addr, size_t len);
pte_t asi_lookup(struct asi *asi, unsigned long addr);
unsigned long asi_pgtable_pages(struct asi *asi);
void asi_for_each_range(struct asi *asi,
			void (*fn)(void *data, unsigned long start, unsigned long end,
				   const char *owner, enum asi_owner_class class),
			void *data);
const char *asi_owner_class_name(enum asi_owner_class class);

#endif /* _ASM_X86_ASI_H */
