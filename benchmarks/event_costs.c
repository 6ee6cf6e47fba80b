// SPDX-License-Identifier: GPL-2.0
/*
 * What the per-event cost model (benchmarks/model.py) can measure on the
 * machine it runs on, from user space: VERW with a valid selector (ASI's
 * flush on a VM-entry where the CPU has no L1D flush to do: every AMD CPU
 * and Intel CPUs not affected by L1TF) and, for scale, a getppid() system
 * call round trip. CR3 writes, L1D flushes and page faults need ring 0;
 * the model takes those from cited figures.
 *
 * Prints "event: NAME ticks=T" lines (TSC ticks per event, the median of
 * seven runs of 200,000), "tsc_khz: K" (the TSC's rate, measured against
 * CLOCK_MONOTONIC over 200 ms) and the CPU's name, family and model.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <x86intrin.h>

#define N	200000
#define RUNS	7

static inline uint64_t tsc(void)
{
	unsigned int aux;
	uint64_t t;

	_mm_lfence();
	t = __rdtscp(&aux);
	_mm_lfence();
	return t;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double verw(void)
{
	unsigned short sel;
	uint64_t t0;
	int i;

	/* The stack segment: a valid, writable user selector. */
	asm volatile("mov %%ss, %0" : "=r"(sel));
	t0 = tsc();
	for (i = 0; i < N; i++)
		asm volatile("verw %0" : : "m"(sel) : "cc");
	return (double)(tsc() - t0) / N;
}

static double getppid_syscall(void)
{
	uint64_t t0 = tsc();
	int i;

	for (i = 0; i < N; i++)
		syscall(SYS_getppid);
	return (double)(tsc() - t0) / N;
}

static double tsc_khz(void)
{
	struct timespec a, b;
	uint64_t t0, t1;
	double ns;

	clock_gettime(CLOCK_MONOTONIC, &a);
	t0 = tsc();
	do {
		clock_gettime(CLOCK_MONOTONIC, &b);
		ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
	} while (ns < 200e6);
	t1 = tsc();
	return (t1 - t0) / ns * 1e6;
}

static void report(const char *name, double (*fn)(void))
{
	double v[RUNS];
	int i;

	for (i = 0; i < RUNS; i++)
		v[i] = fn();
	qsort(v, RUNS, sizeof(v[0]), cmp);
	printf("event: %s ticks=%.1f min=%.1f max=%.1f\n", name, v[RUNS / 2], v[0],
	       v[RUNS - 1]);
}

int main(void)
{
	static char line[16384];
	FILE *f;

	report("verw", verw);
	report("getppid", getppid_syscall);
	printf("tsc_khz: %.0f\n", tsc_khz());
	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "model name", 10) || !strncmp(line, "cpu family", 10) ||
		    !strncmp(line, "model\t", 6)) {
			printf("cpu: %s", line);
		} else if (!strncmp(line, "flags", 5)) {
			printf("md_clear: %s\n", strstr(line, " md_clear") ? "yes" : "no");
			printf("hypervisor: %s\n", strstr(line, " hypervisor") ? "yes" : "no");
			break;
		}
	}
	if (f)
		fclose(f);
	return 0;
}
