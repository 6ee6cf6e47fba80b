// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for x86 Address Space Isolation.
 *
 * asi_param: the asi= parser. asi_domain: domains and the mapping API,
 * checked against the kernel's own page table. asi_switch: entering and
 * leaving a domain, and the fault-driven fallback, for real on this CPU.
 * asi_domain and asi_switch run with asi=on and are skipped otherwise,
 * since no domain can exist with ASI off.
 */
#include <kunit/test.h>
#include <linux/asi.h>
#include <linux/gfp.h>
#include <linux/irq_work.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <asm/apic.h>
#include <asm/cpu_entry_area.h>
#include <asm/nmi.h>
#include <asm/pgtable.h>
#include <asm/special_insns.h>
#include <asm/tlbflush.h>

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

/*
 * The switch tests run on the domain created by asi_domain_init(), with
 * this test's stack and one page ("mapped") mapped into it and another
 * page ("unmapped") left out. Between asi_enter() and asi_exit() they
 * touch only the stack, those pages and the per-CPU ASI state.
 */
struct asi_switch_env {
	struct asi *asi;
	unsigned long *mapped;
	unsigned long *unmapped;
	bool mapped_mapped;
	/* The case's stack, held until unmapped: exit runs in another task. */
	struct task_struct *stack_task;
};

static int asi_switch_init(struct kunit *test)
{
	struct asi_switch_env *env;
	int err;

	env = kunit_kzalloc(test, sizeof(*env), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, env);
	err = asi_domain_init(test);
	if (err)
		return err;
	env->asi = test->priv;
	test->priv = env;
	env->mapped = (unsigned long *)__get_free_page(GFP_KERNEL);
	env->unmapped = (unsigned long *)__get_free_page(GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, env->mapped);
	KUNIT_ASSERT_NOT_NULL(test, env->unmapped);
	*env->mapped = 0x1234;
	*env->unmapped = 0x5678;
	KUNIT_ASSERT_EQ(test, asi_map(env->asi, env->mapped, PAGE_SIZE, "kunit"), 0);
	env->mapped_mapped = true;
	KUNIT_ASSERT_EQ(test, asi_map_task(env->asi, current, "kunit stack"), 0);
	env->stack_task = get_task_struct(current);
	return 0;
}

static void asi_switch_exit(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;

	if (!env)
		return;
	if (env->stack_task) {
		asi_unmap_task(env->asi, env->stack_task);
		put_task_struct(env->stack_task);
	}
	if (env->mapped_mapped)
		asi_unmap(env->asi, env->mapped, PAGE_SIZE);
	asi_put(env->asi);
	free_page((unsigned long)env->mapped);
	free_page((unsigned long)env->unmapped);
}

static unsigned long cr3_addr(unsigned long cr3)
{
	return cr3 & CR3_ADDR_MASK;
}

struct asi_probe {
	unsigned long cr3_before, cr3_in, cr3_after_mapped, cr3_after_unmapped, cr3_out;
	unsigned long v_mapped, v_unmapped;
	unsigned long fb_before, fb_after_mapped, fb_after_unmapped;
	unsigned long enters_before, enters_after;
	unsigned long fault_address;
	unsigned int fault_domain;
};

/* Everything between enter and exit stays in registers, stack, ASI state. */
static noinline void asi_probe_run(struct asi_switch_env *env, struct asi_probe *p)
{
	unsigned long *mapped = env->mapped, *unmapped = env->unmapped;
	struct asi *asi = env->asi;
	unsigned long flags;

	local_irq_save(flags);
	p->cr3_before = __native_read_cr3();
	p->fb_before = this_cpu_read(asi_cpu.fallbacks);
	p->enters_before = this_cpu_read(asi_cpu.enters);
	asi_enter(asi);
	asi_enter(asi);		/* idempotent */
	p->cr3_in = __native_read_cr3();
	p->v_mapped = READ_ONCE(*mapped);
	p->fb_after_mapped = this_cpu_read(asi_cpu.fallbacks);
	p->cr3_after_mapped = __native_read_cr3();
	p->v_unmapped = READ_ONCE(*unmapped);
	p->fb_after_unmapped = this_cpu_read(asi_cpu.fallbacks);
	p->cr3_after_unmapped = __native_read_cr3();
	p->enters_after = this_cpu_read(asi_cpu.enters);
	asi_exit(ASI_EXIT_OWNER);
	p->cr3_out = __native_read_cr3();
	/* This CPU's record: the test may migrate once interrupts are on. */
	p->fault_address = this_cpu_read(asi_cpu.last_fault.address);
	p->fault_domain = this_cpu_read(asi_cpu.last_fault.domain);
	local_irq_restore(flags);
}

static void asi_enter_switches_and_fallback_restores(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	struct asi_probe p = {};

	asi_probe_run(env, &p);

	KUNIT_EXPECT_EQ(test, cr3_addr(p.cr3_in), (unsigned long)__pa(env->asi->pgd));
	KUNIT_EXPECT_EQ(test, p.enters_after, p.enters_before + 1);
	/* A mapped page reads fine, on the restricted table, no fault. */
	KUNIT_EXPECT_EQ(test, p.v_mapped, 0x1234UL);
	KUNIT_EXPECT_EQ(test, p.fb_after_mapped, p.fb_before);
	KUNIT_EXPECT_EQ(test, p.cr3_after_mapped, p.cr3_in);
	/* An unmapped one falls back to the full table and reads fine too. */
	KUNIT_EXPECT_EQ(test, p.v_unmapped, 0x5678UL);
	KUNIT_EXPECT_EQ(test, p.fb_after_unmapped, p.fb_before + 1);
	KUNIT_EXPECT_EQ(test, cr3_addr(p.cr3_after_unmapped), cr3_addr(p.cr3_before));
	/* And exit returns to exactly where enter started. */
	KUNIT_EXPECT_EQ(test, cr3_addr(p.cr3_out), cr3_addr(p.cr3_before));
	KUNIT_EXPECT_PTR_EQ(test, asi_current(), NULL);
	KUNIT_EXPECT_EQ(test, p.fault_address, (unsigned long)env->unmapped);
	KUNIT_EXPECT_EQ(test, p.fault_domain, env->asi->id);
}

static noinline long asi_probe_bad_read(struct asi_switch_env *env, void *bad,
					unsigned long *fallbacks)
{
	struct asi *asi = env->asi;
	unsigned long flags, v, before;
	long ret;

	local_irq_save(flags);
	before = this_cpu_read(asi_cpu.fallbacks);
	asi_enter(asi);
	ret = copy_from_kernel_nofault(&v, bad, sizeof(v));
	*fallbacks = this_cpu_read(asi_cpu.fallbacks) - before;
	asi_exit(ASI_EXIT_OWNER);
	local_irq_restore(flags);
	return ret;
}

/* Invariant 6: what the full table does not map either still faults. */
static void asi_fault_unmapped_everywhere_still_faults(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	void *area = vmalloc(PAGE_SIZE);
	unsigned long fallbacks;

	KUNIT_ASSERT_NOT_NULL(test, area);
	/* The guard page after a vmalloc area is mapped nowhere. */
	KUNIT_EXPECT_EQ(test, asi_probe_bad_read(env, area + PAGE_SIZE, &fallbacks), -EFAULT);
	KUNIT_EXPECT_EQ(test, fallbacks, 1UL);
	vfree(area);
}

static noinline void asi_probe_flush(struct asi_switch_env *env, bool need[5])
{
	unsigned long *unmapped = env->unmapped;
	struct asi *asi = env->asi;
	unsigned long flags;

	local_irq_save(flags);
	asi_need_flush();
	asi_enter(asi);
	need[0] = asi_need_flush();		/* restricted only: no */
	READ_ONCE(*unmapped);			/* fallback */
	need[1] = asi_need_flush();		/* yes */
	asi_enter(asi);				/* relaxed -> active */
	need[2] = asi_need_flush();		/* yes: ran on the full table */
	need[3] = asi_need_flush();		/* no */
	asi_exit(ASI_EXIT_OWNER);
	need[4] = asi_need_flush();		/* yes */
	local_irq_restore(flags);
}

/*
 * The flush indication: set by a fallback and by leaving the table, and by
 * going back onto it from relaxed (the CPU ran on the full table there,
 * and the fallback's indication may have been taken meanwhile, as by a
 * flush decision that an NMI's fallback interrupted); taken by the call.
 */
static void asi_need_flush_only_after_full_table_use(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	bool need[5];

	asi_probe_flush(env, need);
	KUNIT_EXPECT_TRUE(test, need[1]);
	KUNIT_EXPECT_TRUE(test, need[2]);
	KUNIT_EXPECT_TRUE(test, need[4]);
	/*
	 * With an SMT sibling the protocol is on, and the sibling's own
	 * leaves and returns mark this CPU's flush too, at any time: only
	 * without it is a flush needed after this CPU's own use alone.
	 */
	if (asi_smt_active())
		return;
	KUNIT_EXPECT_FALSE(test, need[0]);
	KUNIT_EXPECT_FALSE(test, need[3]);
}

static unsigned long fallbacks(void)
{
	unsigned long n = 0;
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		n += READ_ONCE(per_cpu(asi_cpu.fallbacks, cpu));
	return n;
}

/* Exits for @reason on every CPU. */
static unsigned long exits(enum asi_exit_reason reason)
{
	unsigned long n = 0;
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		n += READ_ONCE(per_cpu(asi_cpu.exits[reason], cpu));
	return n;
}

/* Invariant 4: a context switch leaves the domain, interrupts and all. */
static void asi_context_switch_leaves_domain(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	unsigned long before = exits(ASI_EXIT_SCHED) + exits(ASI_EXIT_INTERRUPT) + fallbacks();
	struct asi *asi = env->asi;

	local_irq_disable();
	asi_enter(asi);
	local_irq_enable();
	/* An interrupt may land here, on the restricted table, and leave. */
	schedule_timeout_uninterruptible(2);
	KUNIT_EXPECT_PTR_EQ(test, asi_current(), NULL);
	KUNIT_EXPECT_NE(test, cr3_addr(__native_read_cr3()), cr3_addr(__pa(asi->pgd)));
	/*
	 * The exit is counted as a schedule-out when the CPU was still on the
	 * restricted table; an interrupt may have left first, or schedule()
	 * touched unmapped data and fell back (counted there) before the
	 * switch.
	 */
	KUNIT_EXPECT_GE(test, exits(ASI_EXIT_SCHED) + exits(ASI_EXIT_INTERRUPT) + fallbacks(),
			before + 1);
}

/* In the ASI per-CPU section: the test reads it on the restricted table. */
static DEFINE_PER_CPU_ASI(int, asi_test_irq_seen);
static DEFINE_PER_CPU(unsigned long, asi_test_irq_cr3);

static void asi_test_irq_work(struct irq_work *work)
{
	this_cpu_write(asi_test_irq_cr3, __native_read_cr3());
	this_cpu_write(asi_test_irq_seen, 1);
}

/* What a probe saw, read on its CPU before the test may migrate. */
struct asi_probe_result {
	unsigned long cr3;		/* CR3 after the event */
	unsigned long full_cr3;		/* the CPU's full table */
	unsigned long handler_cr3;	/* CR3 inside the handler */
	unsigned long exits;		/* interrupt exits */
	unsigned long fallbacks;	/* fallback faults */
	int seen;			/* the handler ran */
	int consistent;			/* the handler saw the full table */
};

static noinline void asi_probe_irq(struct asi_switch_env *env, struct asi_probe_result *res)
{
	struct irq_work work = IRQ_WORK_INIT_HARD(asi_test_irq_work);
	unsigned long flags, exits_before, fallbacks_before;
	int i;

	local_irq_save(flags);
	res->full_cr3 = __native_read_cr3();
	this_cpu_write(asi_test_irq_seen, 0);
	exits_before = this_cpu_read(asi_cpu.exits[ASI_EXIT_INTERRUPT]);
	fallbacks_before = this_cpu_read(asi_cpu.fallbacks);
	/* Raises the irq_work self-IPI, pending until interrupts are on. */
	irq_work_queue(&work);
	asi_enter(env->asi);
	/* Raw: no IRQ-flags tracing, which would touch unmapped data. */
	raw_local_irq_enable();
	for (i = 0; i < 10000000 && !this_cpu_read(asi_test_irq_seen); i++)
		cpu_relax();
	raw_local_irq_disable();
	res->seen = this_cpu_read(asi_test_irq_seen);
	res->cr3 = __native_read_cr3();
	res->handler_cr3 = this_cpu_read(asi_test_irq_cr3);
	res->exits = this_cpu_read(asi_cpu.exits[ASI_EXIT_INTERRUPT]) - exits_before;
	res->fallbacks = this_cpu_read(asi_cpu.fallbacks) - fallbacks_before;
	asi_exit(ASI_EXIT_OWNER);
	local_irq_restore(flags);
	irq_work_sync(&work);
}

/*
 * Invariant 5, interrupts: a hardware interrupt taken on a restricted
 * table (here the irq_work self-IPI) leaves the domain on entry, so that
 * its handler runs on the full table without a fallback fault, and the
 * exit is counted as an interrupt one.
 */
static void asi_interrupt_leaves_domain(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	struct asi_probe_result res;

	asi_probe_irq(env, &res);
	KUNIT_ASSERT_EQ_MSG(test, res.seen, 1, "the irq_work interrupt did not arrive");
	KUNIT_EXPECT_GE(test, res.exits, 1UL);
	KUNIT_EXPECT_EQ(test, res.fallbacks, 0UL);
	KUNIT_EXPECT_EQ(test, cr3_addr(res.handler_cr3), cr3_addr(res.full_cr3));
	KUNIT_EXPECT_EQ(test, cr3_addr(res.cr3), cr3_addr(res.full_cr3));
	KUNIT_EXPECT_PTR_EQ(test, asi_current(), NULL);
}

/* In the ASI per-CPU section: readable on the restricted table. */
static DEFINE_PER_CPU_ASI(int, asi_test_nmis);
static DEFINE_PER_CPU(int, asi_test_nmi_consistent);

static int asi_test_nmi(unsigned int type, struct pt_regs *regs)
{
	if (this_cpu_read(asi_test_nmis) || !this_cpu_read(asi_cpu.curr))
		return NMI_DONE;
	/*
	 * The NMI entry path needs nothing unmapped; this handler's own data
	 * is not mapped, so this write falls back, inside the NMI.
	 */
	this_cpu_write(asi_test_nmi_consistent, 0);
	this_cpu_write(asi_test_nmi_consistent,
		       __native_read_cr3() == this_cpu_read(asi_cpu.full_cr3));
	this_cpu_write(asi_test_nmis, 1);
	return NMI_HANDLED;
}

static noinline void asi_probe_nmi(struct asi_switch_env *env, struct asi_probe_result *res)
{
	struct asi *asi = env->asi;
	unsigned long flags, before;
	int i;

	local_irq_save(flags);
	res->full_cr3 = __native_read_cr3();
	this_cpu_write(asi_test_nmis, 0);
	before = this_cpu_read(asi_cpu.fallbacks);
	asi_enter(asi);
	/*
	 * By APIC ID, not as a self-IPI: in x2APIC mode the kernel sends
	 * those through the SELF IPI register, which delivers fixed
	 * interrupts only (vector 2 there, not an NMI).
	 */
	__apic_send_IPI(smp_processor_id(), NMI_VECTOR);
	for (i = 0; i < 10000000 && !this_cpu_read(asi_test_nmis); i++)
		cpu_relax();
	res->seen = this_cpu_read(asi_test_nmis);
	res->cr3 = __native_read_cr3();
	res->consistent = this_cpu_read(asi_test_nmi_consistent);
	res->fallbacks = this_cpu_read(asi_cpu.fallbacks) - before;
	asi_exit(ASI_EXIT_OWNER);
	local_irq_restore(flags);
}

/*
 * Invariant 5: an NMI on a restricted table is handled (its first access
 * to unmapped data falls back, inside the NMI), and when it returns CR3
 * and the ASI state agree: still in the domain, on the full table (PTI's
 * paranoid exit restores only a user CR3, which the restricted table's
 * is not; the check also accepts the restricted table, should an exit
 * path restore it).
 */
static void asi_nmi_on_restricted_table_falls_back(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	struct asi_probe_result res;
	bool on_a_table;
	int err;

	err = register_nmi_handler(NMI_LOCAL, asi_test_nmi, 0, "asi_test");
	KUNIT_ASSERT_EQ(test, err, 0);
	asi_probe_nmi(env, &res);
	unregister_nmi_handler(NMI_LOCAL, "asi_test");

	/* Read on the probe's CPU: the test may have migrated since. */
	KUNIT_EXPECT_EQ(test, res.seen, 1);
	KUNIT_EXPECT_EQ(test, res.consistent, 1);
	KUNIT_EXPECT_GE(test, res.fallbacks, 1UL);
	on_a_table = cr3_addr(res.cr3) == cr3_addr(__pa(env->asi->pgd)) ||
		     cr3_addr(res.cr3) == cr3_addr(res.full_cr3);
	KUNIT_EXPECT_TRUE_MSG(test, on_a_table,
			      "CR3 %#lx after the NMI is neither table (full: %#lx)",
			      res.cr3, res.full_cr3);
	KUNIT_EXPECT_PTR_EQ(test, asi_current(), NULL);
}

/*
 * With ASI on the kernel's mappings are not global, so a kernel page flush
 * must reach the other mms' PCIDs as with PTI (the flush code marks them
 * for a flush at their next use), and ASI's PCIDs.
 */
static void asi_kernel_flush_reaches_other_pcids(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	bool other_before, other;
	unsigned long stale;

	preempt_disable();
	other_before = this_cpu_read(cpu_tlbstate.invalidate_other);
	this_cpu_write(cpu_tlbstate.invalidate_other, false);
	stale = this_cpu_read(asi_cpu.pcid_stale);
	flush_tlb_one_kernel((unsigned long)env->mapped);
	other = this_cpu_read(cpu_tlbstate.invalidate_other);
	if (cpu_feature_enabled(X86_FEATURE_PCID))
		KUNIT_EXPECT_EQ(test, this_cpu_read(asi_cpu.pcid_stale), BIT(ASI_NR_PCIDS) - 1);
	else
		KUNIT_EXPECT_EQ(test, this_cpu_read(asi_cpu.pcid_stale), stale);
	this_cpu_write(cpu_tlbstate.invalidate_other, other || other_before);
	preempt_enable();
	KUNIT_EXPECT_TRUE(test, other);
}

/*
 * The hooks of the TLB flush code mark ASI PCIDs stale; one run while the
 * CPU is in a domain marks the full table's PCID too (the flush may have
 * hit the ASI PCID instead). Called directly: through asi_invalidate_pcid()
 * they do nothing on a CPU without PCIDs.
 */
static void asi_invalidate_marks_stale(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	unsigned long flags, stale, stale_one, stale_all;
	bool full, full_idle, full_in;

	local_irq_save(flags);
	stale = this_cpu_read(asi_cpu.pcid_stale);
	full = this_cpu_read(asi_cpu.full_stale);
	this_cpu_write(asi_cpu.pcid_stale, 0);
	this_cpu_write(asi_cpu.full_stale, false);
	__asi_invalidate_pcid(3);
	stale_one = this_cpu_read(asi_cpu.pcid_stale);
	full_idle = this_cpu_read(asi_cpu.full_stale);
	__asi_invalidate_pcid_all();
	stale_all = this_cpu_read(asi_cpu.pcid_stale);
	asi_enter(env->asi);
	__asi_invalidate_pcid(0);
	full_in = this_cpu_read(asi_cpu.full_stale);
	asi_exit(ASI_EXIT_OWNER);
	this_cpu_write(asi_cpu.pcid_stale, stale | this_cpu_read(asi_cpu.pcid_stale));
	this_cpu_write(asi_cpu.full_stale, full || this_cpu_read(asi_cpu.full_stale));
	local_irq_restore(flags);

	KUNIT_EXPECT_EQ(test, stale_one, BIT(3));
	KUNIT_EXPECT_FALSE(test, full_idle);
	KUNIT_EXPECT_EQ(test, stale_all, BIT(ASI_NR_PCIDS) - 1);
	KUNIT_EXPECT_TRUE(test, full_in);
}

/*
 * The TLB flush code marks ASI PCIDs where it flushes: a local full flush
 * and a single page mark the loaded mm's slot, a kernel page every slot,
 * and a switch to an mm that needs a flush (always, without PCIDs) the
 * new slot. Every PCID is left marked, which is always safe.
 */
static void asi_flush_code_marks_pcids(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	unsigned long flags, local, one, kernel, use;
	struct mm_struct *mm;
	u16 asid, use_asid;
	bool other;

	mm = mm_alloc();
	KUNIT_ASSERT_NOT_NULL(test, mm);
	migrate_disable();
	local_irq_save(flags);
	asid = this_cpu_read(cpu_tlbstate.loaded_mm_asid);
	this_cpu_write(asi_cpu.pcid_stale, 0);
	flush_tlb_local();
	local = this_cpu_xchg(asi_cpu.pcid_stale, 0);
	flush_tlb_one_user((unsigned long)env->mapped);
	one = this_cpu_xchg(asi_cpu.pcid_stale, 0);
	other = this_cpu_read(cpu_tlbstate.invalidate_other);
	flush_tlb_one_kernel((unsigned long)env->mapped);
	this_cpu_write(cpu_tlbstate.invalidate_other,
		       other || this_cpu_read(cpu_tlbstate.invalidate_other));
	kernel = this_cpu_xchg(asi_cpu.pcid_stale, 0);
	local_irq_restore(flags);

	kthread_use_mm(mm);
	use = this_cpu_read(asi_cpu.pcid_stale);
	use_asid = this_cpu_read(cpu_tlbstate.loaded_mm_asid);
	kthread_unuse_mm(mm);
	this_cpu_or(asi_cpu.pcid_stale, BIT(ASI_NR_PCIDS) - 1);
	migrate_enable();
	mmput(mm);

	KUNIT_EXPECT_EQ(test, local, BIT(asid));
	KUNIT_EXPECT_EQ(test, one, BIT(asid));
	KUNIT_EXPECT_EQ(test, kernel, BIT(ASI_NR_PCIDS) - 1);
	KUNIT_EXPECT_TRUE(test, use & BIT(use_asid));	/* a new mm: flushed */
}

struct asi_pcid_probe {
	unsigned long cr3_in, cr3_again;
	unsigned long kept, flushes;
	u16 asid;
};

static noinline void asi_pcid_probe_run(struct asi *asi, struct asi_pcid_probe *p)
{
	unsigned long flags, kept, flushes;

	local_irq_save(flags);
	p->asid = this_cpu_read(cpu_tlbstate.loaded_mm_asid);
	asi_enter(asi);
	p->cr3_in = __native_read_cr3();
	asi_exit(ASI_EXIT_OWNER);
	kept = this_cpu_read(asi_cpu.pcid_kept);
	flushes = this_cpu_read(asi_cpu.pcid_flushes);
	asi_enter(asi);				/* same domain, nothing flushed */
	asi_exit(ASI_EXIT_OWNER);
	p->kept = this_cpu_read(asi_cpu.pcid_kept) - kept;
	asi_invalidate_pcid(p->asid);		/* as the TLB flush code does */
	asi_enter(asi);
	p->cr3_again = __native_read_cr3();
	asi_exit(ASI_EXIT_OWNER);
	p->flushes = this_cpu_read(asi_cpu.pcid_flushes) - flushes;
	local_irq_restore(flags);
}

/* On a CPU with PCIDs: the restricted table runs under the ASI PCID. */
static void asi_pcid_switch_keeps_translations(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	struct asi_pcid_probe p = {};

	if (!cpu_feature_enabled(X86_FEATURE_PCID))
		kunit_skip(test, "the CPU has no PCIDs: every switch flushes the TLB");
	asi_pcid_probe_run(env->asi, &p);
	KUNIT_EXPECT_EQ(test, p.cr3_in & CR3_PCID_MASK, (p.asid + 1) | BIT(ASI_PCID_BIT));
	KUNIT_EXPECT_EQ(test, cr3_addr(p.cr3_in), cr3_addr(env->asi->cr3));
	KUNIT_EXPECT_EQ(test, p.kept, 1UL);
	KUNIT_EXPECT_EQ(test, p.flushes, 1UL);
	KUNIT_EXPECT_EQ(test, p.cr3_again, p.cr3_in);
}

struct asi_cr3_probe {
	unsigned long full_in, curr_in, full_out, curr_out;
};

static noinline void asi_cr3_probe_run(struct asi *asi, struct asi_cr3_probe *p)
{
	unsigned long flags;

	local_irq_save(flags);
	asi_enter(asi);
	p->full_in = this_cpu_read(asi_cpu.full_cr3);
	p->curr_in = this_cpu_read(asi_cpu.curr_cr3);
	asi_exit(ASI_EXIT_OWNER);
	p->full_out = this_cpu_read(asi_cpu.full_cr3);
	p->curr_out = this_cpu_read(asi_cpu.curr_cr3);
	local_irq_restore(flags);
}

/*
 * Every domain maps every CPU's asi_cpu: a CPU outside a domain keeps no
 * CR3 value there (full_cr3 names its task's page table).
 */
static void asi_cr3_values_cleared_on_exit(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	struct asi_cr3_probe p;

	asi_cr3_probe_run(env->asi, &p);
	KUNIT_EXPECT_NE(test, p.full_in, 0UL);
	KUNIT_EXPECT_EQ(test, cr3_addr(p.curr_in), cr3_addr(env->asi->cr3));
	KUNIT_EXPECT_EQ(test, p.full_out, 0UL);
	KUNIT_EXPECT_EQ(test, p.curr_out, 0UL);
}

struct asi_unmap_probe {
	unsigned long v_before, fb_before, fb_after, flushes;
};

static noinline void asi_unmap_probe_touch(struct asi_switch_env *env, unsigned long *page,
					   unsigned long *v, unsigned long *fallbacks,
					   unsigned long *flushes)
{
	unsigned long flags, fb, pcid_flushes;

	local_irq_save(flags);
	fb = this_cpu_read(asi_cpu.fallbacks);
	pcid_flushes = this_cpu_read(asi_cpu.pcid_flushes);
	asi_enter(env->asi);
	*v = READ_ONCE(*page);
	asi_exit(ASI_EXIT_OWNER);
	*fallbacks = this_cpu_read(asi_cpu.fallbacks) - fb;
	*flushes = this_cpu_read(asi_cpu.pcid_flushes) - pcid_flushes;
	local_irq_restore(flags);
}

/*
 * An unmap from a domain flushes only that domain: no CPU outside it is
 * interrupted (a guest makes KVM unmap, and must not disturb other
 * tenants' CPUs), the domain takes a new generation, and a translation
 * cached before the unmap is gone after it: the next load of the domain's
 * table under its PCID flushes it, and the access falls back.
 */
static void asi_unmap_flushes_only_the_domain(struct kunit *test)
{
	struct asi_switch_env *env = test->priv;
	unsigned long *page, v, fb, flushes, ipis_before = 0, ipis_after = 0;
	unsigned int cpu;
	u64 gen;

	page = (unsigned long *)__get_free_page(GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, page);
	*page = 0x4242;
	KUNIT_ASSERT_EQ(test, asi_map(env->asi, page, PAGE_SIZE, "kunit"), 0);

	migrate_disable();
	asi_unmap_probe_touch(env, page, &v, &fb, &flushes);	/* caches it */
	KUNIT_EXPECT_EQ(test, v, 0x4242UL);
	KUNIT_EXPECT_EQ(test, fb, 0UL);

	for_each_online_cpu(cpu)
		if (cpu != smp_processor_id())
			ipis_before += READ_ONCE(per_cpu(asi_cpu.unmap_ipis, cpu));
	gen = READ_ONCE(env->asi->gen);
	asi_unmap(env->asi, page, PAGE_SIZE);
	for_each_online_cpu(cpu)
		if (cpu != smp_processor_id())
			ipis_after += READ_ONCE(per_cpu(asi_cpu.unmap_ipis, cpu));
	KUNIT_EXPECT_NE(test, READ_ONCE(env->asi->gen), gen);
	/* No other CPU was in this test's domain. */
	KUNIT_EXPECT_EQ(test, ipis_after, ipis_before);

	asi_unmap_probe_touch(env, page, &v, &fb, &flushes);
	migrate_enable();
	KUNIT_EXPECT_EQ(test, v, 0x4242UL);
	KUNIT_EXPECT_EQ(test, fb, 1UL);
	if (cpu_feature_enabled(X86_FEATURE_PCID))
		KUNIT_EXPECT_EQ(test, flushes, 1UL);
	free_page((unsigned long)page);
}

static struct kunit_case asi_switch_cases[] = {
	KUNIT_CASE(asi_kernel_flush_reaches_other_pcids),
	KUNIT_CASE(asi_invalidate_marks_stale),
	KUNIT_CASE(asi_flush_code_marks_pcids),
	KUNIT_CASE(asi_pcid_switch_keeps_translations),
	KUNIT_CASE(asi_enter_switches_and_fallback_restores),
	KUNIT_CASE(asi_fault_unmapped_everywhere_still_faults),
	KUNIT_CASE(asi_need_flush_only_after_full_table_use),
	KUNIT_CASE(asi_context_switch_leaves_domain),
	KUNIT_CASE(asi_interrupt_leaves_domain),
	KUNIT_CASE(asi_nmi_on_restricted_table_falls_back),
	KUNIT_CASE(asi_cr3_values_cleared_on_exit),
	KUNIT_CASE(asi_unmap_flushes_only_the_domain),
	{}
};

static struct kunit_suite asi_switch_suite = {
	.name = "asi_switch",
	.init = asi_switch_init,
	.exit = asi_switch_exit,
	.test_cases = asi_switch_cases,
};

kunit_test_suites(&asi_param_suite, &asi_domain_suite, &asi_switch_suite);

MODULE_IMPORT_NS(EXPORTED_FOR_KUNIT_TESTING);
MODULE_DESCRIPTION("KUnit tests for x86 Address Space Isolation");
MODULE_LICENSE("GPL");
