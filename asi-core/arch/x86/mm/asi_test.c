// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for x86 Address Space Isolation.
 *
 * asi_param: the asi= parser. asi_domain: domains and the mapping API,
 * checked against the kernel's own page table (run with asi=on; skipped
 * otherwise, since no domain can exist with ASI off).
 */
#include <kunit/test.h>
#include <linux/asi.h>
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <asm/pgtable.h>

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

static struct kunit_case asi_param_cases[] = {
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

static int asi_domain_init(struct kunit *test)
{
	struct asi *asi;

	if (!asi_enabled())
		kunit_skip(test, "ASI is off (boot with asi=on)");
	asi = asi_create("kunit");
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, asi);
	test->priv = asi;
	return 0;
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

static void asi_create_maps_nothing_of_the_caller(struct kunit *test)
{
	struct asi *asi = test->priv;
	void *page = kunit_kmalloc(test, PAGE_SIZE, GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, page);
	KUNIT_EXPECT_FALSE(test, pte_present(asi_lookup(asi, (unsigned long)page)));
	KUNIT_EXPECT_FALSE(test, pte_present(asi_lookup(asi, (unsigned long)_stext)));
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
	/* Invariant 3: the kernel's mapping is what it was, large or not. */
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
	KUNIT_EXPECT_EQ(test, asi_map(asi, _stext, PAGE_SIZE, "kunit"), 0);
	expect_mapped_like_kernel(test, asi, (unsigned long)_stext, PAGE_SIZE);
	asi_unmap(asi, _stext, PAGE_SIZE);
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
	asi_for_each_range(asi, count_range, &n);
	KUNIT_EXPECT_EQ(test, n, 1);
	asi_unmap(asi, buf, PAGE_SIZE);
	n = 0;
	asi_for_each_range(asi, count_range, &n);
	KUNIT_EXPECT_EQ(test, n, 0);
	vfree(buf);
}

static struct kunit_case asi_domain_cases[] = {
	KUNIT_CASE(asi_create_maps_nothing_of_the_caller),
	KUNIT_CASE(asi_map_direct_map_page_splits_only_the_domain),
	KUNIT_CASE(asi_map_vmalloc_range),
	KUNIT_CASE(asi_map_percpu_and_kernel_image),
	KUNIT_CASE(asi_map_rejects_bad_ranges),
	KUNIT_CASE(asi_map_failure_maps_nothing),
	KUNIT_CASE(asi_allowlist_reaches_every_domain),
	KUNIT_CASE(asi_ranges_record_owner),
	{}
};

static struct kunit_suite asi_domain_suite = {
	.name = "asi_domain",
	.init = asi_domain_init,
	.exit = asi_domain_exit,
	.test_cases = asi_domain_cases,
};

kunit_test_suites(&asi_param_suite, &asi_domain_suite);

MODULE_DESCRIPTION("KUnit tests for x86 Address Space Isolation");
MODULE_LICENSE("GPL");
