/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _LINUX_ASI_H
#define _LINUX_ASI_H

/*
 * Address Space Isolation (ASI): restricted kernel page tables that a CPU
 * runs on while it executes code that may be steered by an untrusted
 * context (a KVM guest). See Documentation/arch/x86/asi.rst.
 *
 * Callers include this header only. With the feature compiled out, the
 * generic stubs make every hook a compile-time constant, so no caller needs
 * an #ifdef.
 */
#ifdef CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION
#include <asm/asi.h>
#else
#include <asm-generic/asi.h>
#endif

#endif /* _LINUX_ASI_H */
