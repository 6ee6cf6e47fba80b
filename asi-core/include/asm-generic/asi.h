/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __ASM_GENERIC_ASI_H
#define __ASM_GENERIC_ASI_H

#include <linux/cache.h>
#include <linux/compiler.h>
#include <linux/types.h>

/*
 * Stubs for CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION=n: ASI is never
 * enabled, and every hook compiles to nothing.
 */
enum asi_exit_reason {
	ASI_EXIT_OWNER,
	ASI_EXIT_SCHED,
	ASI_EXIT_USER,
	ASI_EXIT_INTERRUPT,
	ASI_EXIT_PLANNED,
	ASI_EXIT_NR,
};

struct pt_regs;
struct asi;

#define DECLARE_PER_CPU_ASI(type, name)	DECLARE_PER_CPU(type, name)
#define DEFINE_PER_CPU_ASI(type, name)	DEFINE_PER_CPU(type, name)
#define DEFINE_PER_CPU_ASI_ALIGNED(type, name) DEFINE_PER_CPU_ALIGNED(type, name)
#define __asi_data
#define __asi_read_mostly	__read_mostly
#define __ro_after_init_secret	__ro_after_init

static __always_inline bool asi_enabled(void)
{
	return false;
}

static __always_inline void asi_exit(enum asi_exit_reason reason) { }

static __always_inline void asi_scrub_words(void *p, size_t size) { }
static __always_inline void asi_idle_enter(void) { }
static __always_inline void asi_idle_exit(void) { }
static __always_inline void asi_nmi_enter(void) { }
static __always_inline void asi_nmi_exit(void) { }

static __always_inline bool asi_handle_fault(struct pt_regs *regs,
					     unsigned long error_code,
					     unsigned long address)
{
	return false;
}

static __always_inline void asi_invalidate_pcid(u16 asid) { }
static __always_inline void asi_invalidate_pcid_all(void) { }

static __always_inline struct asi *asi_current(void)
{
	return NULL;
}

static inline int asi_allowlist_add(const char *owner, const void *addr, size_t len)
{
	return 0;
}

static inline void asi_allowlist_remove(const void *addr, size_t len) { }

#endif /* __ASM_GENERIC_ASI_H */
