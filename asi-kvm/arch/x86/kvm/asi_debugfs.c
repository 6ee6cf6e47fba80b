// SPDX-License-Identifier: GPL-2.0
/*
 * KVM and Address Space Isolation: the VM's asi/ debugfs folder, beside
 * KVM's own debugfs files of the VM.
 */
#include <linux/asi.h>
#include <linux/debugfs.h>
#include <linux/kvm_host.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include "mmu/mmu_internal.h"

#include "asi.h"

static int kvm_asi_faults_show(struct seq_file *m, void *v)
{
	struct kvm *kvm = m->private;

	asi_fault_log_show(m, kvm->arch.asi);
	return 0;
}

static int kvm_asi_mappings_show(struct seq_file *m, void *v)
{
	struct kvm *kvm = m->private;

	asi_mappings_show(m, kvm->arch.asi);
	return 0;
}

/* The VM's MMU page pool: pages in it, free, and allocations it missed. */
static int kvm_asi_mmu_pages_show(struct seq_file *m, void *v)
{
	struct kvm_asi_pt_pool *pool = &((struct kvm *)m->private)->arch.asi_pt_pool;
	unsigned long flags;

	spin_lock_irqsave(&pool->lock, flags);
	seq_printf(m, "pages: %u\nfree: %u\nmisses: %lu\n",
		   pool->nr_pages, pool->nr_free, pool->misses);
	spin_unlock_irqrestore(&pool->lock, flags);
	return 0;
}

static int kvm_asi_pagetable_show(struct seq_file *m, void *v)
{
	struct kvm *kvm = m->private;

	return asi_pagetable_show(m, kvm->arch.asi);
}

/* The VM may be on its way out: pin it while one of its files is open. */
static int kvm_asi_single_open(struct inode *inode, struct file *file,
			       int (*show)(struct seq_file *, void *))
{
	struct kvm *kvm = inode->i_private;
	int err;

	if (!kvm_get_kvm_safe(kvm))
		return -ENOENT;
	err = single_open(file, show, kvm);
	if (err)
		kvm_put_kvm(kvm);
	return err;
}

static int kvm_asi_faults_open(struct inode *inode, struct file *file)
{
	return kvm_asi_single_open(inode, file, kvm_asi_faults_show);
}

static int kvm_asi_release(struct inode *inode, struct file *file)
{
	kvm_put_kvm(inode->i_private);
	return single_release(inode, file);
}

/*
 * A read-only file of the VM's asi/ folder: kvm_asi_NAME_fops shows
 * kvm_asi_NAME_show(), with the VM pinned while the file is open.
 */
#define DEFINE_KVM_ASI_SHOW(name)					\
static int kvm_asi_##name##_open(struct inode *inode, struct file *file) \
{									\
	return kvm_asi_single_open(inode, file, kvm_asi_##name##_show);	\
}									\
									\
static const struct file_operations kvm_asi_##name##_fops = {		\
	.owner		= THIS_MODULE,					\
	.open		= kvm_asi_##name##_open,			\
	.read		= seq_read,					\
	.llseek		= seq_lseek,					\
	.release	= kvm_asi_release,				\
}

DEFINE_KVM_ASI_SHOW(mappings);
DEFINE_KVM_ASI_SHOW(pagetable);
DEFINE_KVM_ASI_SHOW(mmu_pages);

/* Writing 0 resets the VM's fault log. */
static ssize_t kvm_asi_faults_write(struct file *file, const char __user *buf,
				    size_t count, loff_t *ppos)
{
	struct kvm *kvm = file_inode(file)->i_private;

	return asi_fault_log_write(kvm->arch.asi, buf, count);
}

static const struct file_operations kvm_asi_faults_fops = {
	.owner		= THIS_MODULE,
	.open		= kvm_asi_faults_open,
	.read		= seq_read,
	.write		= kvm_asi_faults_write,
	.llseek		= seq_lseek,
	.release	= kvm_asi_release,
};

#ifdef CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_TEST_HOOKS
/*
 * Test hook for the isolation audit (asi-pt audit), built only with
 * CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_TEST_HOOKS: writing another VM's
 * debugfs name (PID-FD) to asi/plant maps the first page of that VM's struct
 * kvm into this VM's domain, a planted violation of invariant "No foreign
 * data", for as long as the file stays open. Both VMs are pinned meanwhile;
 * closing the file unmaps the page. Writing "secret" maps the page of the
 * kernel's ro_after_init secrets that holds the kmalloc cache seed instead
 * (see asi/secrets).
 */
static DEFINE_MUTEX(kvm_asi_plant_lock);
static char kvm_asi_planted_secret;

/*
 * The page of the kmalloc cache seed, one of the ro_after_init secrets
 * (exported, unlike the section's bounds, so that KVM built as modules
 * reaches it), or NULL without random kmalloc caches.
 */
static void *kvm_asi_secret_page(void)
{
#ifdef CONFIG_RANDOM_KMALLOC_CACHES
	return (void *)PAGE_ALIGN_DOWN((unsigned long)&random_kmalloc_seed);
#else
	return NULL;
#endif
}

static int kvm_asi_plant_open(struct inode *inode, struct file *file)
{
	if (!kvm_get_kvm_safe(inode->i_private))
		return -ENOENT;
	file->private_data = NULL;
	return 0;
}

static ssize_t kvm_asi_plant_write(struct file *file, const char __user *ubuf,
				   size_t count, loff_t *ppos)
{
	struct kvm *kvm = file_inode(file)->i_private, *victim = NULL, *k;
	char buf[32];
	int err;

	if (!count || count >= sizeof(buf))
		return -EINVAL;
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = 0;
	strim(buf);

	mutex_lock(&kvm_asi_plant_lock);
	err = -EBUSY;
	if (file->private_data)
		goto out;
	if (!strcmp(buf, "secret")) {
		err = -ENOENT;
		if (!kvm_asi_secret_page())
			goto out;
		err = asi_map(kvm->arch.asi, kvm_asi_secret_page(), PAGE_SIZE,
			      "planted secret (test hook)");
		if (!err)
			file->private_data = &kvm_asi_planted_secret;
		goto out;
	}
	mutex_lock(&kvm_lock);
	list_for_each_entry(k, &vm_list, vm_list) {
		if (k != kvm && k->arch.asi && !IS_ERR_OR_NULL(k->debugfs_dentry) &&
		    !strcmp(k->debugfs_dentry->d_name.name, buf) && kvm_get_kvm_safe(k)) {
			victim = k;
			break;
		}
	}
	mutex_unlock(&kvm_lock);
	err = -ENOENT;
	if (!victim)
		goto out;
	err = asi_map(kvm->arch.asi, victim, PAGE_SIZE, "planted (test hook)");
	if (err)
		goto out;
	file->private_data = victim;
	victim = NULL;
out:
	mutex_unlock(&kvm_asi_plant_lock);
	if (victim)
		kvm_put_kvm(victim);
	return err ?: count;
}

static int kvm_asi_plant_release(struct inode *inode, struct file *file)
{
	struct kvm *kvm = inode->i_private, *victim = file->private_data;

	if (file->private_data == &kvm_asi_planted_secret) {
		asi_unmap(kvm->arch.asi, kvm_asi_secret_page(), PAGE_SIZE);
		victim = NULL;
	}
	if (victim) {
		asi_unmap(kvm->arch.asi, victim, PAGE_SIZE);
		kvm_put_kvm(victim);
	}
	kvm_put_kvm(kvm);
	return 0;
}

static const struct file_operations kvm_asi_plant_fops = {
	.owner		= THIS_MODULE,
	.open		= kvm_asi_plant_open,
	.write		= kvm_asi_plant_write,
	.release	= kvm_asi_plant_release,
};

/*
 * Test hook for the tenant tests, with the test hooks only: writing an
 * address to asi/translate (of any VM) sets it; reading a VM's file says
 * whether that VM's table translates it, the user half included:
 * "<address> mapped" or "<address> unmapped". One address for all VMs,
 * for a test that runs alone.
 */
static unsigned long kvm_asi_translate_va;

static int kvm_asi_translate_show(struct seq_file *m, void *v)
{
	struct kvm *kvm = m->private;
	unsigned long va = READ_ONCE(kvm_asi_translate_va);

	seq_printf(m, "%#lx %s\n", va,
		   asi_test_translates(kvm->arch.asi, va) ? "mapped" : "unmapped");
	return 0;
}

static int kvm_asi_translate_open(struct inode *inode, struct file *file)
{
	return kvm_asi_single_open(inode, file, kvm_asi_translate_show);
}

static ssize_t kvm_asi_translate_write(struct file *file, const char __user *ubuf,
				       size_t count, loff_t *ppos)
{
	unsigned long va;
	int err;

	err = kstrtoul_from_user(ubuf, count, 0, &va);
	if (err)
		return err;
	WRITE_ONCE(kvm_asi_translate_va, va);
	return count;
}

static const struct file_operations kvm_asi_translate_fops = {
	.owner		= THIS_MODULE,
	.open		= kvm_asi_translate_open,
	.read		= seq_read,
	.write		= kvm_asi_translate_write,
	.llseek		= seq_lseek,
	.release	= kvm_asi_release,
};
#endif

/**
 * kvm_asi_create_vm_debugfs() - the VM's asi/ debugfs folder
 * @kvm: the VM, its debugfs folder created
 *
 * asi/faults: the VM's fallback faults by site (see asi_fault_log_show());
 * writing 0 resets them. asi/mappings: what the VM's domain maps and why
 * (asi_mappings_show()). asi/pagetable: its restricted table in ptdump's
 * format (asi_pagetable_show()). asi/mmu_pages: the MMU's page pool
 * (pages, free, allocations it could not serve). asi/plant and
 * asi/translate: test hooks (see above).
 */
void kvm_asi_create_vm_debugfs(struct kvm *kvm)
{
	struct dentry *dir;

	if (!kvm->arch.asi)
		return;
	dir = debugfs_create_dir("asi", kvm->debugfs_dentry);
	debugfs_create_file("faults", 0600, dir, kvm, &kvm_asi_faults_fops);
	debugfs_create_file("mappings", 0400, dir, kvm, &kvm_asi_mappings_fops);
	debugfs_create_file("pagetable", 0400, dir, kvm, &kvm_asi_pagetable_fops);
	debugfs_create_file("mmu_pages", 0400, dir, kvm, &kvm_asi_mmu_pages_fops);
#ifdef CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_TEST_HOOKS
	debugfs_create_file("plant", 0200, dir, kvm, &kvm_asi_plant_fops);
	debugfs_create_file("translate", 0600, dir, kvm, &kvm_asi_translate_fops);
#endif
}
