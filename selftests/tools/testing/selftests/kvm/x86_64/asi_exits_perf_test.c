// SPDX-License-Identifier: GPL-2.0
/*
 * asi_exits_perf_test: the cost of Address Space Isolation per VM exit.
 *
 * Times the phases of the exits workload (lib/x86_64/asi_exits.c), each
 * common exit type thousands of times after a warm-up, on the host
 * (CLOCK_MONOTONIC around the phase's KVM_RUN calls), and prints each as a
 * "bench:" line with the vCPU's ASI counters, for benchmarks/ to collect;
 * under QEMU's -icount the clock counts emulated instructions. Then the
 * control, a CPU-bound loop with no exits, the dirty ring's phase and, on
 * SVM, the nested guest's phases. A phase that did not run the exit it is
 * named after (asi_exits_not_exercised()) gets no "bench:" line.
 *
 * It checks nothing but that the guests ran: asi_exits_test checks what
 * the same phases do. Compare asi=on with asi=off in the same run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "asi.h"
#include "asi_exits.h"
#include "kselftest.h"
#include "kvm_util.h"
#include "processor.h"
#include "test_util.h"

/* One line per phase for benchmarks/: the time and the counters. */
static void print_bench(const char *name, double ns, const uint64_t *d)
{
	printf("bench: %s ns=%.1f exits=%lu enters=%lu fallbacks=%lu",
	       name, ns, d[S_EXITS], d[S_ENTERS], d[S_FALLBACKS]);
	printf(" flushes=%lu skipped=%lu late=%lu smt_waits=%lu smt_kicks=%lu", d[S_FLUSHES],
	       d[S_SKIPPED], d[S_LATE], d[S_SMT_WAITS], d[S_SMT_KICKS]);
	printf(" x_timer=%lu x_ioeventfd=%lu x_faultin=%lu\n", d[S_TIMER], d[S_IOEVENTFD],
	       d[S_FAULTIN]);
}

/* Run the vCPU's warm-up, then its phase timed: the row and "bench:" line. */
static void time_phase(struct kvm_vcpu *vcpu, struct vcpu_stats *r, const char *name)
{
	uint64_t d[NR_STATS];
	struct ucall uc;
	double ns;

	asi_exits_run_to_sync(vcpu, &uc);
	asi_exits_run_timed(vcpu, r, &uc, d, &ns);
	asi_exits_print_phase_row(name, d);
	print_bench(name, ns / ITERATIONS, d);
}

static void time_dirty_ring(void)
{
	struct vcpu_stats r = { };
	struct kvm_vcpu *vcpu;
	struct kvm_vm *vm;
	struct ucall uc;

	if (!kvm_has_cap(KVM_CAP_DIRTY_LOG_RING) &&
	    !kvm_has_cap(KVM_CAP_DIRTY_LOG_RING_ACQ_REL)) {
		printf("# dirty_ring: not timed: no KVM_CAP_DIRTY_LOG_RING\n");
		return;
	}
	if (asi_exits_pml_on()) {
		printf("# dirty_ring: not timed: PML logs the writes without faults\n");
		return;
	}
	vm = asi_exits_dirty_ring_vm_create(&vcpu);
	vcpu_stats_open(&r, vcpu, asi_exits_stat_names, NR_STATS);
	time_phase(vcpu, &r, "dirty_ring");
	vcpu_run(vcpu);
	TEST_ASSERT(get_ucall(vcpu, &uc) == UCALL_DONE, "dirty_ring: guest did not finish");
	vcpu_stats_close(&r);
	kvm_vm_free(vm);
}

/* SVM only: nested VMX is not run here (no VMX under QEMU's TCG). */
static void time_nested(void)
{
	struct vcpu_stats r = { };
	struct kvm_vcpu *vcpu;
	struct kvm_vm *vm;
	struct ucall uc;
	bool npt;
	int p;

	if (!kvm_cpu_has(X86_FEATURE_SVM)) {
		printf("# nested: not timed: KVM offers its guests no SVM\n");
		return;
	}
	vm = asi_exits_nested_vm_create(&vcpu, &npt);
	vcpu_stats_open(&r, vcpu, asi_exits_stat_names, NR_STATS);
	for (p = 0; p < NR_NESTED_PHASES; p++) {
		if (asi_exits_nested_phases[p].npt && !npt) {
			printf("# %s: not timed: KVM offers its guests no nested paging\n",
			       asi_exits_nested_phases[p].name);
			continue;
		}
		time_phase(vcpu, &r, asi_exits_nested_phases[p].name);
	}
	asi_exits_run_to_sync(vcpu, &uc);	/* L1 turns SVM off */
	asi_exits_run_to_sync(vcpu, &uc);	/* and on again */
	vcpu_run(vcpu);
	TEST_ASSERT(get_ucall(vcpu, &uc) == UCALL_DONE, "nested guest did not finish");
	vcpu_stats_close(&r);
	kvm_vm_free(vm);
}

int main(void)
{
	bool shadow = !kvm_is_tdp_enabled(), pml = asi_exits_pml_on();
	struct vcpu_stats r = { };
	uint64_t d[NR_STATS];
	struct kvm_vcpu *vcpu;
	struct kvm_vm *vm;
	struct ucall uc;
	double ns;
	int p, efd;

	vm = asi_exits_vm_create(&vcpu, &efd);
	vcpu_stats_open(&r, vcpu, asi_exits_stat_names, NR_STATS);
	printf("# ASI is %s, %s paging; %d iterations per exit type after %d of warm-up\n",
	       asi_is_on() ? "on" : "off", shadow ? "shadow" : "nested", ITERATIONS, WARMUP);
	asi_exits_print_header();

	for (p = 0; p < NR_PHASES; p++) {
		const char *name = asi_exits_phases[p].name, *skip;

		asi_exits_run_to_sync(vcpu, &uc);		/* the warm-up */
		asi_exits_run_timed(vcpu, &r, &uc, d, &ns);
		asi_exits_print_phase_row(name, d);
		skip = asi_exits_not_exercised(p, d, shadow, pml);
		if (skip)
			printf("# %s: not timed: %s\n", name, skip);
		else
			print_bench(name, ns / ITERATIONS, d);
	}

	/* The control: a CPU-bound loop, timed like the phases. */
	asi_exits_run_to_sync(vcpu, &uc);
	asi_exits_run_timed(vcpu, &r, &uc, d, &ns);
	printf("# compute: %d loops in %.1f ms with %lu exits\n", COMPUTE_LOOPS,
	       ns / 1e6, d[S_EXITS]);
	print_bench("compute", ns, d);
	vcpu_run(vcpu);
	TEST_ASSERT(get_ucall(vcpu, &uc) == UCALL_DONE, "guest did not finish");
	vcpu_stats_close(&r);
	kvm_vm_free(vm);
	close(efd);

	time_dirty_ring();
	time_nested();
	return 0;
}
