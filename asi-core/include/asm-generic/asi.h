/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __ASM_GENERIC_ASI_H
#define __ASM_GENERIC_ASI_H

#include <linux/compiler.h>
#include <linux/types.h>

/*
 * Stubs for CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION=n: ASI is never
 * enabled, and every hook compiles to nothing.
 */
static __always_inline bool asi_enabled(void)
{
	return false;
}

#endif /* __ASM_GENERIC_ASI_H */
