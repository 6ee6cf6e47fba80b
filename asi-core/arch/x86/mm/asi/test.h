/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the KUnit suites of the ASI core (asi_test.c, switch_test.c) share.
 */
#ifndef _ARCH_X86_MM_ASI_TEST_H
#define _ARCH_X86_MM_ASI_TEST_H

#include <kunit/test.h>
#include <linux/asi.h>

/*
 * A suite's init: a fresh domain in test->priv, or the case skipped when
 * ASI is off, since no domain can exist then.
 */
static inline int asi_domain_init(struct kunit *test)
{
	struct asi *asi;

	if (!asi_enabled())
		kunit_skip(test, "ASI is off (boot with asi=on)");
	asi = asi_create("kunit");
	KUNIT_ASSERT_NOT_ERR_OR_NULL(test, asi);
	test->priv = asi;
	return 0;
}

#endif /* _ARCH_X86_MM_ASI_TEST_H */
