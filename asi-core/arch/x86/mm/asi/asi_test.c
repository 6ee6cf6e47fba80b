// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for x86 Address Space Isolation: boot parsing, domains and
 * the mapping API. The switch's suite is in switch_test.c.
 *
 * asi_param: what needs no domain: the asi= parser, the refusal to create
 * one with ASI off, and the CR3 values and reuse of the ASI PCIDs.
 * asi_domain: domains and the mapping API, checked against the kernel's
 * own page table. asi_domain runs with asi=on and is skipped otherwise,
 * since no domain can exist with ASI off.
 */
#include <kunit/test.h>
#include <linux/asi.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <asm/cpu_entry_area.h>
#include <asm/pgtable.h>
#include <asm/tlbflush.h>

#include "internal.h"
#include "test.h"

static void asi_parse_accepts_on(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, asi_parse_boot_mode("on"), ASI_BOOT_ON);
}

static void asi_parse_accepts_off(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, asi_parse_boot_mode("off"), ASI_BOOT_OFF);
}

static void asi_parse_rejects_empty_and_bare(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, asi_parse_boot_mode(""), ASI_BOOT_INVALID);
	KUNIT_EXPECT_EQ(test, asi_parse_boot_mode(NULL), ASI_BOOT_INVALID);
}

static void asi_parse_rejects_other_values(struct kunit *test)
{
	static const char * const bad[] = {
		"On", "OFF", "1", "0", "yes", "onn", "of", " on", "on ", "auto",
	};
	int i;

	for (i = 0; i < ARRAY_SIZE(bad); i++)
		KUNIT_EXPECT_EQ_MSG(test, asi_parse_boot_mode(bad[i]),
				    ASI_BOOT_INVALID, "value \"%s\"", bad[i]);
}

/* With ASI off no domain can exist. */
static void asi_create_refused_when_off(struct kunit *test)
{
	if (asi_enabled())
		kunit_skip(test, "ASI is on");
	KUNIT_EXPECT_EQ(test, PTR_ERR(asi_create("kunit")), -EOPNOTSUPP);
}

/*
 * The CR3 value of a restricted table: with PCIDs, the ASI PCID of the ASID
 * slot (kernel PCID | bit 10), apart from the kernel's (slot + 1) and PTI's
 * user PCIDs (| bit 11); without, the full table's low bits. The full
 * table's LAM bits are kept either way, and the no-flush bit is never set.
 */
static void asi_pcid_cr3_layout(struct kunit *test)
{
	const unsigned long table = 0x12345000UL, lam = BIT_ULL(61);
	unsigned long cr3;
	u16 asid;

	cr3 = asi_test_table_cr3(table, 0xabcde000UL | X86_CR3_PWT | X86_CR3_PCD, false, 0);
	KUNIT_EXPECT_EQ(test, cr3, table | X86_CR3_PWT | X86_CR3_PCD);
	KUNIT_EXPECT_EQ(test, asi_test_table_cr3(table, 0xabcde000UL | lam, false, 0),
			table | lam);

	for (asid = 0; asid < ASI_NR_PCIDS; asid++) {
		cr3 = asi_test_table_cr3(table, 0xabcde000UL | lam | (asid + 1), true, asid);
		KUNIT_EXPECT_EQ(test, cr3 & CR3_ADDR_MASK, table);
		KUNIT_EXPECT_EQ(test, cr3 & CR3_PCID_MASK, (asid + 1) | BIT(ASI_PCID_BIT));
		KUNIT_EXPECT_NE(test, cr3 & CR3_PCID_MASK, asid + 1);
		KUNIT_EXPECT_NE(test, cr3 & CR3_PCID_MASK,
				(asid + 1) | BIT(X86_CR3_PTI_PCID_USER_BIT));
		KUNIT_EXPECT_TRUE(test, cr3 & lam);
		KUNIT_EXPECT_FALSE(test, cr3 & CR3_NOFLUSH);
	}
}

/*
 * An ASI PCID is loaded without a flush only by the domain that loaded it
 * last, and only if the TLB flush code did not mark it stale since; one
 * slot's state does not affect another's. On this CPU's state, interrupts
 * off; the state is given back with every PCID marked stale, which is
 * always safe.
 */
static void asi_pcid_claim_flushes_only_when_needed(struct kunit *test)
{
	u64 owner[ASI_NR_PCIDS];
	unsigned long flags, stale[3];
	bool r[11];
	int i, n = 0;

	local_irq_save(flags);
	for (i = 0; i < ASI_NR_PCIDS; i++) {
		owner[i] = this_cpu_read(asi_cpu.pcid_owner[i]);
		this_cpu_write(asi_cpu.pcid_owner[i], 0);
	}
	this_cpu_write(asi_cpu.pcid_stale, 0);

	r[n++] = asi_test_pcid_claim(0, 5);		/* first use: flush */
	r[n++] = asi_test_pcid_claim(0, 5);		/* same domain: keep */
	r[n++] = asi_test_pcid_claim(1, 5);		/* other slot: flush */
	r[n++] = asi_test_pcid_claim(0, 6);		/* other domain: flush */
	r[n++] = asi_test_pcid_claim(0, 5);		/* and back: flush */
	r[n++] = asi_test_pcid_claim(0, 5);		/* keep */
	this_cpu_or(asi_cpu.pcid_stale, BIT(1));	/* slot 1 flushed */
	r[n++] = asi_test_pcid_claim(0, 5);		/* keep */
	stale[0] = this_cpu_read(asi_cpu.pcid_stale);
	r[n++] = asi_test_pcid_claim(1, 5);		/* flush */
	stale[1] = this_cpu_read(asi_cpu.pcid_stale);
	r[n++] = asi_test_pcid_claim(1, 5);		/* keep */
	this_cpu_or(asi_cpu.pcid_stale, BIT(ASI_NR_PCIDS) - 1);	/* kernel page */
	r[n++] = asi_test_pcid_claim(0, 5);		/* flush */
	r[n++] = asi_test_pcid_claim(1, 5);		/* flush */
	stale[2] = this_cpu_read(asi_cpu.pcid_stale);

	for (i = 0; i < ASI_NR_PCIDS; i++)
		this_cpu_write(asi_cpu.pcid_owner[i], owner[i]);
	this_cpu_or(asi_cpu.pcid_stale, BIT(ASI_NR_PCIDS) - 1);
	local_irq_restore(flags);

	KUNIT_EXPECT_TRUE(test, r[0]);
	KUNIT_EXPECT_FALSE(test, r[1]);
	KUNIT_EXPECT_TRUE(test, r[2]);
	KUNIT_EXPECT_TRUE(test, r[3]);
	KUNIT_EXPECT_TRUE(test, r[4]);
	KUNIT_EXPECT_FALSE(test, r[5]);
	KUNIT_EXPECT_FALSE(test, r[6]);
	KUNIT_EXPECT_EQ(test, stale[0], BIT(1));	/* slot 0's claim kept it */
	KUNIT_EXPECT_TRUE(test, r[7]);
	KUNIT_EXPECT_EQ(test, stale[1], 0UL);
	KUNIT_EXPECT_FALSE(test, r[8]);
	KUNIT_EXPECT_TRUE(test, r[9]);
	KUNIT_EXPECT_TRUE(test, r[10]);
	KUNIT_EXPECT_EQ(test, stale[2], BIT(ASI_NR_PCIDS) - 1 - BIT(0) - BIT(1));
}

static struct kunit_case asi_param_cases[] = {
	KUNIT_CASE(asi_pcid_cr3_layout),
	KUNIT_CASE(asi_pcid_claim_flushes_only_when_needed),
	KUNIT_CASE(asi_create_refused_when_off),
	KUNIT_CASE(asi_parse_accepts_on),
	KUNIT_CASE(asi_parse_accepts_off),
	KUNIT_CASE(asi_parse_rejects_empty_and_bare),
	KUNIT_CASE(asi_parse_rejects_other_values),
	{}
};

static struct kunit_suite asi_param_suite = {
	.name = "asi_param",
	.test_cases = asi_param_cases,
};

/* The kernel's mapping of a page: its leaf entry and level. */
struct kmap_snap {
	unsigned long val;
	unsigned int level;
};

static struct kmap_snap kernel_map_of(unsigned long va)
{
	struct kmap_snap s = {};
	pte_t *pte = lookup_address(va, &s.level);

	s.val = pte ? pte_val(*pte) : 0;
	return s;
}

/* The PFN the kernel maps @va to, whatever the page size. */
static unsigned long kernel_pfn_of(unsigned long va)
{
	return slow_virt_to_phys((void *)va) >> PAGE_SHIFT;
}

static void asi_domain_exit(struct kunit *test)
{
	asi_put(test->priv);
}

/* Every page of [va, va + len) maps the kernel's PFN, non-global. */
static void expect_mapped_like_kernel(struct kunit *test, struct asi *asi,
				      unsigned long va, size_t len)
{
	unsigned long p;

	for (p = PAGE_ALIGN_DOWN(va); p < va + len; p += PAGE_SIZE) {
		pte_t pte = asi_lookup(asi, p);

		KUNIT_EXPECT_TRUE_MSG(test, pte_present(pte), "%#lx not mapped", p);
		KUNIT_EXPECT_EQ_MSG(test, pte_pfn(pte), kernel_pfn_of(p), "%#lx", p);
		KUNIT_EXPECT_FALSE_MSG(test, pte_flags(pte) & _PAGE_GLOBAL, "%#lx global", p);
		KUNIT_EXPECT_FALSE_MSG(test, pte_flags(pte) & _PAGE_USER, "%#lx user", p);
	}
}

/* A page of the kernel image past rodata: not in the always-mapped set. */
static char asi_test_image_page[PAGE_SIZE] __aligned(PAGE_SIZE);

static void asi_create_maps_only_the_always_mapped_set(struct kunit *test)
{
	struct asi *asi = test->priv;
	void *page = kunit_kmalloc(test, PAGE_SIZE, GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, page);
	KUNIT_EXPECT_FALSE(test, pte_present(asi_lookup(asi, (unsigned long)page)));
	KUNIT_EXPECT_FALSE(test, pte_present(asi_lookup(asi, (unsigned long)asi_test_image_page)));
	KUNIT_EXPECT_FALSE(test, pte_present(asi_lookup(asi, (unsigned long)current)));
	/* Text, the ASI per-CPU state and the entry area are always there. */
	expect_mapped_like_kernel(test, asi, (unsigned long)_stext, PAGE_SIZE);
	expect_mapped_like_kernel(test, asi, (unsigned long)this_cpu_ptr(&asi_cpu),
				  sizeof(struct asi_cpu_state));
	KUNIT_EXPECT_TRUE(test, pte_present(asi_lookup(asi, CPU_ENTRY_AREA_RO_IDT)));
}

static void asi_map_direct_map_page_splits_only_the_domain(struct kunit *test)
{
	struct asi *asi = test->priv;
	struct page *page = alloc_page(GFP_KERNEL);
	unsigned long va;
	struct kmap_snap before, after;

	KUNIT_ASSERT_NOT_NULL(test, page);
	va = (unsigned long)page_address(page);
	before = kernel_map_of(va);
	KUNIT_EXPECT_EQ(test, asi_map(asi, (void *)va, PAGE_SIZE, "kunit"), 0);
	after = kernel_map_of(va);

	expect_mapped_like_kernel(test, asi, va, PAGE_SIZE);
	/*
	 * Invariant "Kernel table untouched": the kernel's mapping is what it
	 * was, large or not.
	 */
	KUNIT_EXPECT_EQ(test, after.level, before.level);
	KUNIT_EXPECT_EQ(test, after.val, before.val);
	/* Only that page: its neighbours stay unmapped. */
	KUNIT_EXPECT_FALSE(test, pte_present(asi_lookup(asi, va + PAGE_SIZE)));
	KUNIT_EXPECT_FALSE(test, pte_present(asi_lookup(asi, va - PAGE_SIZE)));

	asi_unmap(asi, (void *)va, PAGE_SIZE);
	KUNIT_EXPECT_FALSE(test, pte_present(asi_lookup(asi, va)));
	__free_page(page);
}

static void asi_map_vmalloc_range(struct kunit *test)
{
	struct asi *asi = test->priv;
	size_t len = 3 * PAGE_SIZE;
	void *buf = vmalloc(len);
	unsigned long p;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	KUNIT_EXPECT_EQ(test, asi_map(asi, buf, len, "kunit"), 0);
	expect_mapped_like_kernel(test, asi, (unsigned long)buf, len);
	for (p = 0; p < len; p += PAGE_SIZE)
		KUNIT_EXPECT_EQ(test, pte_pfn(asi_lookup(asi, (unsigned long)buf + p)),
				vmalloc_to_pfn(buf + p));
	asi_unmap(asi, buf, len);
	vfree(buf);
}

static DEFINE_PER_CPU(unsigned long, asi_test_percpu);

static void asi_map_percpu_and_kernel_image(struct kunit *test)
{
	struct asi *asi = test->priv;
	void *pcpu = per_cpu_ptr(&asi_test_percpu, raw_smp_processor_id());

	KUNIT_EXPECT_EQ(test, asi_map(asi, pcpu, sizeof(unsigned long), "kunit"), 0);
	expect_mapped_like_kernel(test, asi, (unsigned long)pcpu, sizeof(unsigned long));
	KUNIT_EXPECT_EQ(test, asi_map(asi, asi_test_image_page, PAGE_SIZE, "kunit"), 0);
	expect_mapped_like_kernel(test, asi, (unsigned long)asi_test_image_page, PAGE_SIZE);
	asi_unmap(asi, asi_test_image_page, PAGE_SIZE);
	/* The always-mapped set cannot be mapped over. */
	KUNIT_EXPECT_EQ(test, asi_map(asi, _stext, PAGE_SIZE, "kunit"), -EEXIST);
	asi_unmap(asi, pcpu, sizeof(unsigned long));
}

static void asi_map_rejects_bad_ranges(struct kunit *test)
{
	struct asi *asi = test->priv;
	void *buf = vmalloc(2 * PAGE_SIZE);

	KUNIT_ASSERT_NOT_NULL(test, buf);
	KUNIT_EXPECT_EQ(test, asi_map(asi, buf, 0, "kunit"), -EINVAL);
	KUNIT_EXPECT_EQ(test, asi_map(asi, (void *)0x1000, PAGE_SIZE, "kunit"), -EINVAL);
	KUNIT_EXPECT_EQ(test, asi_map(asi, buf, PAGE_SIZE, NULL), -EINVAL);

	KUNIT_EXPECT_EQ(test, asi_map(asi, buf, 2 * PAGE_SIZE, "kunit"), 0);
	/* Overlaps, even partial ones, are refused and change nothing. */
	KUNIT_EXPECT_EQ(test, asi_map(asi, buf + PAGE_SIZE, PAGE_SIZE, "kunit"), -EEXIST);
	KUNIT_EXPECT_EQ(test, asi_map(asi, buf, 1, "kunit"), -EEXIST);
	expect_mapped_like_kernel(test, asi, (unsigned long)buf, 2 * PAGE_SIZE);
	asi_unmap(asi, buf, 2 * PAGE_SIZE);
	vfree(buf);
}

static void asi_map_failure_maps_nothing(struct kunit *test)
{
	struct asi *asi = test->priv;
	unsigned long pages = asi_pgtable_pages(asi);
	void *buf = vmalloc(PAGE_SIZE);

	KUNIT_ASSERT_NOT_NULL(test, buf);
	/* The page after a vmalloc area is its guard page: unmapped. */
	KUNIT_EXPECT_EQ(test, asi_map(asi, buf, 2 * PAGE_SIZE, "kunit"), -EFAULT);
	KUNIT_EXPECT_FALSE(test, pte_present(asi_lookup(asi, (unsigned long)buf)));
	/* The range is not recorded: mapping the valid part works. */
	KUNIT_EXPECT_EQ(test, asi_map(asi, buf, PAGE_SIZE, "kunit"), 0);
	asi_unmap(asi, buf, PAGE_SIZE);
	/* Page-table pages allocated on the way stay until destroy, no more. */
	KUNIT_EXPECT_LE(test, asi_pgtable_pages(asi), pages + 4);
	vfree(buf);
}

static void asi_allowlist_reaches_every_domain(struct kunit *test)
{
	struct asi *asi = test->priv, *later;
	struct page *page = alloc_page(GFP_KERNEL);
	unsigned long va;

	KUNIT_ASSERT_NOT_NULL(test, page);
	va = (unsigned long)page_address(page);
	KUNIT_ASSERT_EQ(test, asi_allowlist_add("kunit-allowlist", (void *)va, PAGE_SIZE), 0);
	later = asi_create("kunit-later");
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, later);

	expect_mapped_like_kernel(test, asi, va, PAGE_SIZE);
	expect_mapped_like_kernel(test, later, va, PAGE_SIZE);
	/* A domain cannot map over the allowlist. */
	KUNIT_EXPECT_EQ(test, asi_map(asi, (void *)va, PAGE_SIZE, "kunit"), -EEXIST);

	asi_allowlist_remove((void *)va, PAGE_SIZE);
	KUNIT_EXPECT_FALSE(test, pte_present(asi_lookup(asi, va)));
	KUNIT_EXPECT_FALSE(test, pte_present(asi_lookup(later, va)));
	asi_put(later);
	__free_page(page);
}

static void count_range(void *data, unsigned long start, unsigned long end,
			const char *owner, enum asi_owner_class class)
{
	if (class == ASI_OWNER_DOMAIN && !strcmp(owner, "kunit-owner"))
		(*(int *)data)++;
}

static void asi_ranges_record_owner(struct kunit *test)
{
	struct asi *asi = test->priv;
	void *buf = vmalloc(PAGE_SIZE);
	int n = 0;

	KUNIT_ASSERT_NOT_NULL(test, buf);
	KUNIT_ASSERT_EQ(test, asi_map(asi, buf, PAGE_SIZE, "kunit-owner"), 0);
	asi_walk_ranges(asi, count_range, &n);
	KUNIT_EXPECT_EQ(test, n, 1);
	asi_unmap(asi, buf, PAGE_SIZE);
	n = 0;
	asi_walk_ranges(asi, count_range, &n);
	KUNIT_EXPECT_EQ(test, n, 0);
	vfree(buf);
}

#ifdef CONFIG_SMP
/*
 * The room for modules' DEFINE_PER_CPU_ASI() variables: allocations are
 * aligned, lie in pages every domain maps on every CPU, are cleared when
 * freed, and the room is reused (first fit: at boot, before any module
 * took some of it); bad requests get NULL.
 */
static void asi_percpu_alloc_for_modules(struct kunit *test)
{
	unsigned long start = (unsigned long)__per_cpu_asi_module_start;
	unsigned long end = (unsigned long)__per_cpu_asi_end;
	struct asi *asi = test->priv;
	void __percpu *a, *b;
	unsigned int cpu;

	KUNIT_EXPECT_NULL(test, asi_percpu_alloc(0, 8));
	KUNIT_EXPECT_NULL(test, asi_percpu_alloc(8, 2 * PAGE_SIZE));
	KUNIT_EXPECT_NULL(test, asi_percpu_alloc(end - start + 8, 8));

	a = asi_percpu_alloc(24, 64);
	KUNIT_ASSERT_NOT_NULL(test, a);
	b = asi_percpu_alloc(8, 8);
	if (!b)
		asi_percpu_free(a, 24);
	KUNIT_ASSERT_NOT_NULL(test, b);
	KUNIT_EXPECT_TRUE(test, IS_ALIGNED((unsigned long)a, 64));
	KUNIT_EXPECT_GE(test, (unsigned long)a, start);
	KUNIT_EXPECT_LE(test, (unsigned long)a + 24, end);
	KUNIT_EXPECT_TRUE(test, (unsigned long)b + 8 <= (unsigned long)a ||
			  (unsigned long)b >= (unsigned long)a + 24);

	for_each_possible_cpu(cpu) {
		void *p = per_cpu_ptr(a, cpu);

		KUNIT_EXPECT_TRUE(test, pte_present(asi_lookup(asi, (unsigned long)p)));
		KUNIT_EXPECT_TRUE(test, pte_present(asi_lookup(asi, (unsigned long)p + 23)));
		memset(p, 0xa5, 24);
	}
	asi_percpu_free(a, 24);
	for_each_possible_cpu(cpu)
		KUNIT_EXPECT_NULL(test, memchr_inv(per_cpu_ptr(a, cpu), 0, 24));

	KUNIT_EXPECT_PTR_EQ(test, asi_percpu_alloc(24, 64), a);
	asi_percpu_free(a, 24);
	asi_percpu_free(b, 8);
}
#endif

/*
 * Boot-time secrets among the ro_after_init data (__ro_after_init_secret)
 * are in pages of their own inside the rodata, which is still read-only
 * after init, and no domain maps them; the rodata around them is mapped.
 * The kernel's own translations of them are not global.
 */
static void asi_secret_data_not_mapped(struct kunit *test)
{
	unsigned long start = (unsigned long)__start_ro_after_init_secret;
	unsigned long end = (unsigned long)__end_ro_after_init_secret;
	struct asi *asi = test->priv;
	unsigned long va;

	KUNIT_EXPECT_TRUE(test, PAGE_ALIGNED(start) && PAGE_ALIGNED(end));
	KUNIT_EXPECT_GE(test, start, (unsigned long)__start_rodata);
	KUNIT_EXPECT_LE(test, end, (unsigned long)__end_rodata);
#ifdef CONFIG_RANDOM_KMALLOC_CACHES
	KUNIT_EXPECT_GE(test, (unsigned long)&random_kmalloc_seed, start);
	KUNIT_EXPECT_LT(test, (unsigned long)&random_kmalloc_seed, end);
	KUNIT_EXPECT_FALSE_MSG(test,
			       pte_present(asi_lookup(asi, (unsigned long)&random_kmalloc_seed)),
			       "random_kmalloc_seed is mapped");
#endif
	for (va = start; va < end; va += PAGE_SIZE) {
		unsigned int level;
		pte_t *kpte = lookup_address(va, &level);

		KUNIT_EXPECT_FALSE_MSG(test, pte_present(asi_lookup(asi, va)),
				       "secret page %#lx is mapped", va);
		/* A global translation would survive the switch to a domain. */
		KUNIT_ASSERT_NOT_NULL(test, kpte);
		KUNIT_EXPECT_FALSE_MSG(test, pte_flags(*kpte) & _PAGE_GLOBAL,
				       "secret page %#lx is global in the kernel's table", va);
	}
	KUNIT_EXPECT_TRUE(test, pte_present(asi_lookup(asi, PFN_ALIGN(__start_rodata))));
	KUNIT_EXPECT_TRUE(test, pte_present(asi_lookup(asi, PFN_ALIGN(__end_rodata) - PAGE_SIZE)));
}

static struct kunit_case asi_domain_cases[] = {
	KUNIT_CASE(asi_create_maps_only_the_always_mapped_set),
	KUNIT_CASE(asi_map_direct_map_page_splits_only_the_domain),
	KUNIT_CASE(asi_map_vmalloc_range),
	KUNIT_CASE(asi_map_percpu_and_kernel_image),
	KUNIT_CASE(asi_map_rejects_bad_ranges),
	KUNIT_CASE(asi_map_failure_maps_nothing),
	KUNIT_CASE(asi_allowlist_reaches_every_domain),
	KUNIT_CASE(asi_ranges_record_owner),
	KUNIT_CASE(asi_secret_data_not_mapped),
#ifdef CONFIG_SMP
	KUNIT_CASE(asi_percpu_alloc_for_modules),
#endif
	{}
};

static struct kunit_suite asi_domain_suite = {
	.name = "asi_domain",
	.init = asi_domain_init,
	.exit = asi_domain_exit,
	.test_cases = asi_domain_cases,
};

kunit_test_suites(&asi_param_suite, &asi_domain_suite);

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);
MODULE_DESCRIPTION("KUnit tests for x86 Address Space Isolation");
MODULE_LICENSE("GPL");
