// SPDX-License-Identifier: GPL-2.0
/*
 * Walk a kernel page table other than the kernel's own (the PTI user copy,
 * an ASI restricted table), allocating the missing levels on the way down.
 *
 * These started as PTI's walkers of its user page table; they take the
 * target top-level entry instead, so that PTI and ASI share one walker.
 * Large mappings are never created: the target tables are built out of
 * copies of the kernel's entries, never the other way round, and the
 * kernel's own page table is never touched.
 */
#include <linux/mm.h>
#include <linux/pgtable.h>
#include <asm/pgalloc.h>

#include "mm_internal.h"

/**
 * pgtable_walk_alloc_p4d() - walk a kernel page table to the P4D level
 * @pgd: the top-level entry of the target table that covers @address
 * @address: a kernel virtual address
 * @gfp: allocation flags for missing page-table pages (%__GFP_ZERO implied)
 *
 * Return: the P4D entry for @address, or NULL if a page-table page could
 * not be allocated or @address is not a kernel address.
 */
p4d_t *pgtable_walk_alloc_p4d(pgd_t *pgd, unsigned long address, gfp_t gfp)
{
	if (address < PAGE_OFFSET) {
		WARN_ONCE(1, "attempt to walk user address\n");
		return NULL;
	}

	if (pgd_none(*pgd)) {
		unsigned long new_p4d_page = __get_free_page(gfp | __GFP_ZERO);

		if (!new_p4d_page)
			return NULL;

		set_pgd(pgd, __pgd(_KERNPG_TABLE | __pa(new_p4d_page)));
	}
	BUILD_BUG_ON(pgd_leaf(*pgd) != 0);

	return p4d_offset(pgd, address);
}

/**
 * pgtable_walk_alloc_pmd() - walk a kernel page table to the PMD level
 * @pgd: the top-level entry of the target table that covers @address
 * @address: a kernel virtual address
 * @gfp: allocation flags for missing page-table pages (%__GFP_ZERO implied)
 *
 * Return: the PMD entry for @address, or NULL on allocation failure or if
 * the target table maps @address with a large PUD.
 */
pmd_t *pgtable_walk_alloc_pmd(pgd_t *pgd, unsigned long address, gfp_t gfp)
{
	p4d_t *p4d;
	pud_t *pud;

	p4d = pgtable_walk_alloc_p4d(pgd, address, gfp);
	if (!p4d)
		return NULL;

	BUILD_BUG_ON(p4d_leaf(*p4d) != 0);
	if (p4d_none(*p4d)) {
		unsigned long new_pud_page = __get_free_page(gfp | __GFP_ZERO);

		if (!new_pud_page)
			return NULL;

		set_p4d(p4d, __p4d(_KERNPG_TABLE | __pa(new_pud_page)));
	}

	pud = pud_offset(p4d, address);
	/* The target page tables do not use large mappings: */
	if (pud_leaf(*pud)) {
		WARN_ON(1);
		return NULL;
	}
	if (pud_none(*pud)) {
		unsigned long new_pmd_page = __get_free_page(gfp | __GFP_ZERO);

		if (!new_pmd_page)
			return NULL;

		set_pud(pud, __pud(_KERNPG_TABLE | __pa(new_pmd_page)));
	}

	return pmd_offset(pud, address);
}

/**
 * pgtable_walk_alloc_pte() - walk a kernel page table to the PTE level
 * @pgd: the top-level entry of the target table that covers @address
 * @address: a kernel virtual address
 * @gfp: allocation flags for missing page-table pages (%__GFP_ZERO implied)
 * @late_text: replace a large PMD found on the way (PTI's second cloning
 *	       of the kernel text) instead of failing
 *
 * Return: the PTE for @address, or NULL on allocation failure, on a large
 * PMD (unless @late_text) or if the PTE found is a user one.
 */
pte_t *pgtable_walk_alloc_pte(pgd_t *pgd, unsigned long address, gfp_t gfp,
			      bool late_text)
{
	pmd_t *pmd;
	pte_t *pte;

	pmd = pgtable_walk_alloc_pmd(pgd, address, gfp);
	if (!pmd)
		return NULL;

	/* Large PMD mapping found */
	if (pmd_leaf(*pmd)) {
		/* Clear the PMD if we hit a large mapping from the first round */
		if (late_text) {
			set_pmd(pmd, __pmd(0));
		} else {
			WARN_ON_ONCE(1);
			return NULL;
		}
	}

	if (pmd_none(*pmd)) {
		unsigned long new_pte_page = __get_free_page(gfp | __GFP_ZERO);

		if (!new_pte_page)
			return NULL;

		set_pmd(pmd, __pmd(_KERNPG_TABLE | __pa(new_pte_page)));
	}

	pte = pte_offset_kernel(pmd, address);
	if (pte_flags(*pte) & _PAGE_USER) {
		WARN_ONCE(1, "attempt to walk to user pte\n");
		return NULL;
	}
	return pte;
}
