// SPDX-License-Identifier: GPL-2.0
/*
 * x86 Address Space Isolation (ASI): the asi= boot parameter, the static key
 * that is the off switch, the setup of the kernel map for restricted tables
 * and the boot report.
 *
 * The asi= parameter is parsed in early boot (after jump_label_init(), so
 * the static key can be flipped right away); the result is reported once in
 * the boot log and in /sys/kernel/debug/asi/state.
 */
#define pr_fmt(fmt) "ASI: " fmt

#include <linux/asi.h>
#include <linux/debugfs.h>
#include <linux/init.h>
#include <linux/math64.h>
#include <linux/seq_file.h>
#include <linux/string.h>
#include <asm/cpu.h>
#include <asm/msr-index.h>
#include <asm/sections.h>
#include <asm/set_memory.h>
#include <asm/tsc.h>

#include "internal.h"

#define CREATE_TRACE_POINTS
#include <trace/events/asi.h>
#include <trace/events/asi_smt.h>

/* TSC cycles in ns, for the asi_guest event (0 without a known TSC rate). */
u64 asi_tsc_to_ns(u64 cycles)
{
	return tsc_khz ? mul_u64_u32_div(cycles, USEC_PER_SEC, tsc_khz) : 0;
}

struct static_key_false asi_enabled_key = STATIC_KEY_FALSE_INIT;
EXPORT_SYMBOL_GPL(asi_enabled_key);

static enum asi_boot_mode asi_boot_mode __ro_after_init = ASI_BOOT_DEFAULT;
/* The rejected value, kept for the boot message and debugfs. */
static char asi_bad_arg[32] __ro_after_init;

/**
 * asi_parse_boot_mode() - interpret the value of the asi= boot parameter
 * @arg: the text after "asi=", or NULL for a bare "asi"
 *
 * Return: %ASI_BOOT_ON for "on", %ASI_BOOT_OFF for "off" and
 * %ASI_BOOT_INVALID for anything else, including an empty value.
 */
enum asi_boot_mode asi_parse_boot_mode(const char *arg)
{
	if (!arg)
		return ASI_BOOT_INVALID;
	if (!strcmp(arg, "on"))
		return ASI_BOOT_ON;
	if (!strcmp(arg, "off"))
		return ASI_BOOT_OFF;
	return ASI_BOOT_INVALID;
}

/* The last asi= on the command line wins, as for other parameters. */
static int __init asi_setup(char *arg)
{
	asi_boot_mode = asi_parse_boot_mode(arg);
	if (asi_boot_mode == ASI_BOOT_INVALID) {
		strscpy(asi_bad_arg, arg ? arg : "", sizeof(asi_bad_arg));
		pr_warn("invalid value \"%s\" for asi= (expected \"on\" or \"off\"), using the default: off\n",
			asi_bad_arg);
	} else {
		asi_bad_arg[0] = '\0';
	}

	if (asi_boot_mode == ASI_BOOT_ON)
		static_branch_enable(&asi_enabled_key);
	else
		static_branch_disable(&asi_enabled_key);
	/* Reported above; returning an error would only add "Malformed". */
	return 0;
}
early_param("asi", asi_setup);

const char *asi_boot_mode_str(void)
{
	switch (asi_boot_mode) {
	case ASI_BOOT_ON:
		return "asi=on";
	case ASI_BOOT_OFF:
		return "asi=off";
	case ASI_BOOT_INVALID:
		return "invalid asi= value, default";
	default:
		return "default";
	}
}

static int asi_state_show(struct seq_file *m, void *v)
{
	seq_printf(m, "enabled: %s\n", asi_enabled() ? "on" : "off");
	seq_printf(m, "reason: %s\n", asi_boot_mode_str());
	if (asi_boot_mode == ASI_BOOT_INVALID)
		seq_printf(m, "rejected: \"%s\"\n", asi_bad_arg);
	if (asi_enabled()) {
		unsigned long used, total;

		seq_printf(m, "pcid: %s\n", cpu_feature_enabled(X86_FEATURE_PCID) ?
			   "on (restricted tables keep their translations across switches)" :
			   "off (every switch flushes the TLB)");
		asi_percpu_usage(&used, &total);
		seq_printf(m, "module_percpu_bytes: %lu used of %lu\n", used, total);
	}
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(asi_state);

/*
 * With ASI on, nothing but kernel text and rodata may be global (every
 * domain maps both): a global translation survives the switch to a
 * restricted table. The direct map and vmalloc
 * are made non-global where the kernel's default protections are set up
 * (as for PTI); here the kernel image past rodata follows. Like PTI, clear
 * up to the PMD boundary: the image is mapped with PMDs. So do the pages
 * of __ro_after_init_secret data inside the rodata, which no domain maps:
 * random_kmalloc_seed is read on every kmalloc(), and its translation
 * would otherwise be cached, global, when a CPU enters a domain. Modules
 * loaded from now on are mapped into every domain (see asi_map_module()).
 */
static int __init asi_init(void)
{
	unsigned long start = (unsigned long)__end_rodata_aligned;
	unsigned long end = ALIGN((unsigned long)_end, PMD_SIZE);
	unsigned long secret = (unsigned long)__start_ro_after_init_secret;

	if (!asi_enabled())
		return 0;
	/* For __asi_nmi_exit(): KVM may turn VERW's fill-buffer clearing off. */
	if (x86_read_arch_cap_msr() & ARCH_CAP_FB_CLEAR_CTRL)
		static_branch_enable(&asi_fb_clear_ctrl);
	set_memory_nonglobal(start, (end - start) >> PAGE_SHIFT);
	if ((unsigned long)__end_ro_after_init_secret > secret)
		set_memory_nonglobal(secret, ((unsigned long)__end_ro_after_init_secret -
					      secret) >> PAGE_SHIFT);
	return asi_register_module_notifier();
}
early_initcall(asi_init);

struct dentry *asi_debugfs_dir __ro_after_init;

static int __init asi_report(void)
{
	pr_info("%s (%s)\n", asi_enabled() ? "enabled" : "disabled",
		asi_boot_mode_str());

	asi_debugfs_dir = debugfs_create_dir("asi", NULL);
	debugfs_create_file("state", 0444, asi_debugfs_dir, NULL, &asi_state_fops);
	if (asi_enabled())
		asi_debugfs_init(asi_debugfs_dir);
	return 0;
}
late_initcall(asi_report);
