// SPDX-License-Identifier: GPL-2.0
/*
 * Print this machine's TSC frequency in kHz, measured against
 * CLOCK_MONOTONIC_RAW over 200 ms (median of 5).
 *
 * QEMU's TCG reads the host TSC for the guest's RDTSC, so this is the
 * emulated machine's TSC frequency too. The harness passes it as
 * tsc_early_khz=: without HPET or ACPI PM timer the guest's own PIT
 * calibration is at the mercy of emulation timing, and a failed one leaves
 * KVM without a TSC frequency.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(void)
{
	double khz[5];
	int i;

	for (i = 0; i < 5; i++) {
		double t0 = now(), t1;
		unsigned long long c0 = __rdtsc(), c1;

		do
			t1 = now();
		while (t1 - t0 < 0.2);
		c1 = __rdtsc();
		khz[i] = (c1 - c0) / (t1 - t0) / 1000.0;
	}
	qsort(khz, 5, sizeof(khz[0]), cmp);
	printf("%.0f\n", khz[2]);
	return 0;
}
