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

#include <linux/align.h>
#include <asm/page.h>

/**
 * asi_owned_size() - allocation size for an object a domain maps alone
 * @size: the object's size
 *
 * A domain maps whole pages. An object allocated with kmalloc() of this
 * size has its pages to itself when ASI is on (kmalloc() aligns objects
 * of a power-of-two size to that size, and larger ones come straight
 * from the page allocator), so mapping it maps nothing else.
 *
 * Return: @size rounded up to whole pages with ASI on, @size otherwise.
 */
static inline size_t asi_owned_size(size_t size)
{
	return asi_enabled() ? ALIGN(size, PAGE_SIZE) : size;
}

/**
 * asi_owned_cache_align() - slab alignment for objects a domain maps alone
 * @align: the alignment the cache needs without ASI
 *
 * For kmem_cache_create(), with asi_owned_size() as the object size.
 *
 * Return: PAGE_SIZE with ASI on, @align otherwise.
 */
static inline unsigned int asi_owned_cache_align(unsigned int align)
{
	return asi_enabled() ? PAGE_SIZE : align;
}

#endif /* _LINUX_ASI_H */
