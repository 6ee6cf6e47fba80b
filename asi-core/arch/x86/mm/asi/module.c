// SPDX-License-Identifier: GPL-2.0
/*
 * x86 Address Space Isolation (ASI): loaded modules in every domain.
 */
#define pr_fmt(fmt) "ASI: " fmt

#include <linux/asi.h>
#include <linux/module.h>
#include <linux/mm.h>
#include <asm/set_memory.h>

#include "internal.h"

/*
 * Modules: their text, rodata and ro_after_init data are mapped into
 * every domain while they are loaded, as vmlinux's are (vmlinux's
 * ro_after_init data lies in its rodata), and so are their __asi_data,
 * which the module loader gives pages of its own, and their
 * indirect-branch thunk pages on ITS-affected CPUs. Every module is, not
 * only KVM's: as with vmlinux, text and rodata hold nothing of any VM,
 * and an exit may call into any module (irqbypass, an eventfd's owner).
 * Mapped when the module is coming (ASI copies the kernel's PTEs: text and
 * rodata have their final protections then; ro_after_init data is still
 * written by the module's init, on the full table, and is mapped
 * read-only), unmapped when it is going, before the loader frees it. Init
 * text and data (freed after init) and other data are not mapped.
 */
static const struct {
	enum mod_mem_type type;
	bool ro;
} asi_module_mem[] = {
	{ MOD_TEXT, false },
	{ MOD_RODATA, false },
	{ MOD_RO_AFTER_INIT, true },
};

enum asi_module_op {
	ASI_MODULE_MAP,
	ASI_MODULE_UNDO,	/* of a failed map: skip what is not mapped */
	ASI_MODULE_UNMAP,
};

static int asi_module_range(struct module *mod, void *base, size_t size, bool ro,
			    enum asi_module_op op)
{
	switch (op) {
	case ASI_MODULE_MAP:
		return asi_global_add(mod->name, base, size, ASI_OWNER_ALWAYS, ro);
	case ASI_MODULE_UNDO:
		asi_global_remove(base, size, ASI_OWNER_ALWAYS);
		break;
	case ASI_MODULE_UNMAP:
		WARN_ON_ONCE(!asi_global_remove(base, size, ASI_OWNER_ALWAYS));
		break;
	}
	return 0;
}

/* Do @op on each range of @mod that every domain maps; stop at an error. */
static int asi_module_ranges(struct module *mod, enum asi_module_op op)
{
	int i, err;

	for (i = 0; i < ARRAY_SIZE(asi_module_mem); i++) {
		struct module_memory *mem = &mod->mem[asi_module_mem[i].type];

		if (!mem->size)
			continue;
		err = asi_module_range(mod, mem->base, mem->size, asi_module_mem[i].ro, op);
		if (err)
			return err;
	}
	if (mod->asi_data_size) {
		err = asi_module_range(mod, mod->asi_data, mod->asi_data_size, false, op);
		if (err)
			return err;
	}
#ifdef CONFIG_MITIGATION_ITS
	/* Indirect-branch thunks on ITS-affected CPUs: text outside mod->mem[]. */
	for (i = 0; i < mod->its_num_pages; i++) {
		err = asi_module_range(mod, mod->its_page_array[i], PAGE_SIZE, false, op);
		if (err)
			return err;
	}
#endif
	return 0;
}

static int asi_map_module(struct module *mod)
{
	int err = asi_module_ranges(mod, ASI_MODULE_MAP);

	if (err) {
		asi_module_ranges(mod, ASI_MODULE_UNDO);
		pr_warn("cannot map module %s: %d\n", mod->name, err);
	}
	return err;
}

static int asi_module_notify(struct notifier_block *nb, unsigned long action,
			     void *data)
{
	struct module *mod = data;

	switch (action) {
	case MODULE_STATE_COMING:
		return notifier_from_errno(asi_map_module(mod));
	case MODULE_STATE_GOING:
		asi_module_ranges(mod, ASI_MODULE_UNMAP);
		break;
	}
	return NOTIFY_OK;
}

static struct notifier_block asi_module_nb = {
	.notifier_call = asi_module_notify,
};

int __init asi_register_module_notifier(void)
{
	return register_module_notifier(&asi_module_nb);
}
