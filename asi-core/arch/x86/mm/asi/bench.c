// SPDX-License-Identifier: GPL-2.0
/*
 * x86 Address Space Isolation (ASI): /sys/kernel/debug/asi/bench, the cost
 * of the switch (CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_BENCH).
 */
#define pr_fmt(fmt) "ASI: " fmt

#include <linux/asi.h>
#include <linux/debugfs.h>
#include <linux/init.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/uaccess.h>
#include <asm/special_insns.h>
#include <asm/tsc.h>

#include "internal.h"

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

/* After asi_report(), which makes the folder. */
static int __init asi_bench_init(void)
{
	if (asi_enabled())
		debugfs_create_file("bench", 0600, asi_debugfs_dir, NULL, &asi_bench_fops);
	return 0;
}
late_initcall_sync(asi_bench_init);
