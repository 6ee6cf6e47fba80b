// SPDX-License-Identifier: GPL-2.0
/*
 * x86 Address Space Isolation (ASI): /sys/kernel/debug/asi/ and the dumps
 * and logs that KVM's per-VM debugfs files show.
 *
 * The fault logs, every domain's mapped ranges and tables (in ptdump's
 * format, and checked for W+X mappings as CONFIG_DEBUG_WX checks the
 * kernel's), the allowlist, per-CPU counters, and what no domain may map,
 * for the audit (asi-pt audit).
 */
#define pr_fmt(fmt) "ASI: " fmt

#include <linux/asi.h>
#include <linux/debugfs.h>
#include <linux/init.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/ptdump.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <asm/cpu_entry_area.h>
#include <asm/sections.h>

#include "internal.h"

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

static int asi_cpus_show(struct seq_file *m, void *v)
{
	unsigned int cpu;

	seq_puts(m, "cpu\tdomain\tenters\texit_owner\texit_sched\texit_user\tfallbacks\tlast_fault_ip\tlast_fault_address\trelaxed_retries\tfallbacks_irq\texit_interrupt\ttrace_missed\tpcid_flushes\tpcid_kept\tunmap_flushes\tunmap_ipis\texit_planned\tnmi_flushes\n");
	for_each_online_cpu(cpu) {
		struct asi_cpu_state *st = per_cpu_ptr(&asi_cpu, cpu);

		seq_printf(m, "%u\t%u\t%lu\t%lu\t%lu\t%lu\t%lu\t%pS\t%#lx\t%lu\t%lu\t%lu\t%lu\t%lu\t%lu\t%lu\t%lu\t%lu\t%lu\n",
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
			   READ_ONCE(st->unmap_ipis), READ_ONCE(st->exits[ASI_EXIT_PLANNED]),
			   READ_ONCE(st->nmi_flushes));
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(asi_cpus);

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

#ifdef CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_TEST_HOOKS
/*
 * For the test hooks: whether @asi's table translates @va, the user half
 * included (under the shared mm's mmap lock), at any page size. KVM's
 * asi/translate test hook uses it.
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

/*
 * Test hook, built with
 * CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_TEST_HOOKS: what a domain can
 * read of every CPU's entry area (shared by all domains, as PTI shares it
 * with user space). Writing a 64-bit value to asi/residue sets a pattern;
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

/* The rest of asi/, with ASI on: see asi_report(). */
void __init asi_debugfs_init(struct dentry *dir)
{
	debugfs_create_file("domains", 0400, dir, NULL, &asi_domains_fops);
	debugfs_create_file("allowlist", 0400, dir, NULL, &asi_allowlist_fops);
	debugfs_create_file("cpus", 0400, dir, NULL, &asi_cpus_fops);
	if (IS_ENABLED(CONFIG_DEBUG_WX) && IS_ENABLED(CONFIG_PTDUMP))
		debugfs_create_file("checkwx", 0400, dir, NULL, &asi_checkwx_fops);
	debugfs_create_file("faults", 0600, dir, NULL, &asi_faults_fops);
	debugfs_create_file("secrets", 0400, dir, NULL, &asi_secrets_fops);
#ifdef CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_TEST_HOOKS
	debugfs_create_file("residue", 0600, dir, NULL, &asi_residue_fops);
#endif
}
