// SPDX-License-Identifier: GPL-2.0
/*
 * KVM and Address Space Isolation: the MMU's page pool of a VM's domain.
 */
#include <linux/asi.h>
#include <linux/kvm_host.h>
#include <linux/slab.h>

#include "mmu_internal.h"
#include "../asi.h"

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

void kvm_asi_pt_init(struct kvm_asi_pt_pool *pool)
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
void kvm_asi_pt_destroy(struct kvm *kvm, struct asi *asi)
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
