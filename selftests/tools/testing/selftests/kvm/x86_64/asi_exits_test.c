// SPDX-License-Identifier: GPL-2.0
/*
 * asi_exits_test: what Address Space Isolation does on each common VM exit.
 *
 * The guest (lib/x86_64/asi_exits.c) runs each common exit type thousands
 * of times, after a warm-up; between the phases it syncs with the host,
 * which reads the vCPU's ASI statistics (KVM_GET_STATS_FD) and prints,
 * per exit type, fallback faults per 1,000 exits and switches of CR3
 * (into and out of the restricted table) per exit. One TAP result per
 * phase; asi_exits_perf_test times the same phases.
 *
 * With asi=on it checks that every phase ran on the restricted table, that
 * an exit to user space costs exactly one switch out and one back in,
 * and that the exits listed as fault-free in Documentation/arch/x86/asi.rst
 * take no fallback fault. With ASI off (or compiled out) every ASI
 * statistic must stay 0.
 *
 * Dirty logging: the guest writes to the pages of a dirty-logged memslot
 * in turn, and after each round the host collects the log
 * (KVM_GET_DIRTY_LOG), which write-protects the pages again: every write
 * is an NPT fault on mapped guest memory, which KVM fixes without leaving
 * the kernel (a "fast" page fault, KVM's pf_fast counter), and each round
 * one exit to user space. Each collection must find every page dirty.
 * The same writes run again in a VM of their own with the dirty ring
 * (KVM_CAP_DIRTY_LOG_RING, run_dirty_ring()), harvested and reset after
 * each round: each fault pushes the page to the vCPU's ring.
 *
 * HLT, interrupt windows and PAUSE: the guest sends itself an IPI with
 * interrupts off, then halts right after STI (HLT in the STI shadow: the
 * halt finds the interrupt pending and does not block) or opens an
 * interrupt window (STI; NOP); each iteration also has the ICR write and
 * the handler's EOI write. The host checks KVM's own halt_exits and
 * irq_window_exits counters, so each phase is shown to exercise what it
 * names.
 *
 * Two exits need the full table for part of their work, and leave the
 * domain first as planned exits, counted by cause: TSC-deadline MSR writes
 * (a Linux guest's timer; KVM re-arms the APIC timer's hrtimer) and MMIO
 * writes to an ioeventfd (a virtio queue's notify; the eventfd signal
 * wakes its reader). Both must take no fallback; the host checks the
 * planned-exit counts and, for the ioeventfd, the eventfd's count.
 *
 * CR4 writes (the guest toggles CR4.PGE, as Linux does for a global TLB
 * flush without INVPCID) exit on SVM whatever the paging mode; on VMX the
 * guest owns PGE and the phase says so and skips its exit-count check.
 *
 * INVLPG and CR3 writes exit only with shadow paging (kvm_amd npt=0,
 * kvm_intel ept=0), where KVM walks and syncs its shadow page tables for
 * them; with nested paging those phases say so and skip their exit-count
 * checks. With shadow paging the dirty_log phase's writes are fixed by
 * the shadow MMU's page fault handler (pf_fixed), which resolves each page
 * through get_user_pages(): they fall back, and are printed, not checked.
 *
 * Then IPIs between two vCPUs of a second VM (run_ipi_pair()): to a vCPU
 * that halts, so that KVM halt-polls or blocks (it leaves the table first,
 * as a schedule-out: see vcpu_block()), and to a vCPU that runs in the
 * guest, which KVM kicks out of guest mode; a third pair, with halt
 * polling off, wakes a blocked vCPU on every round. Neither vCPU may take
 * a fallback fault: the sender leaves the table before it wakes a vCPU
 * that blocked (kvm_vcpu_wake_up()).
 *
 * Last, a nested guest (SVM, run_nested()): L2's CPUIDs, which KVM
 * handles for L2 itself, and round trips through L1 (nested VM-exits,
 * VMRUN, VMLOAD, VMSAVE) must be fault-free, with L2 on L1's page tables
 * and again with nested paging for L2 (where KVM offers it).
 * Once L1 turned EFER.SVME on, the domain maps vmcb02 and the nested MSR
 * permission map, once each, with EFER.SVME turned off and on again too.
 */

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asi.h"
#include "asi_exits.h"
#include "kselftest.h"
#include "kvm_util.h"
#include "processor.h"
#include "test_util.h"

/* The current result's checks: a failed one is printed and fails it. */
static bool result_ok = true;

#define CHECK(cond, fmt, ...)						\
do {									\
	if (!(cond)) {							\
		ksft_print_msg("FAIL: " fmt "\n", ##__VA_ARGS__);	\
		result_ok = false;					\
	}								\
} while (0)

/* One TAP result for what ran since the last one: failed, skipped or passed. */
static void report(const char *name, const char *skip)
{
	if (!result_ok)
		ksft_test_result_fail("%s\n", name);
	else if (skip)
		ksft_test_result_skip("%s: %s\n", name, skip);
	else
		ksft_test_result_pass("%s\n", name);
	result_ok = true;
}

/*
 * The phases that send the guest IPIs: every IPI was taken, and (nearly)
 * every iteration ran the exit the phase is named after. Under QEMU TCG a
 * few IPIs in 5,000 are taken twice, or before the HLT in the STI shadow
 * (so that HLT does not exit), with ASI off as well: counted and shown,
 * not failed.
 */
static void check_ipis(enum phase p, struct ucall *uc, const uint64_t *d, bool apicv)
{
	uint64_t taken = uc->args[2], early = uc->args[3];
	uint64_t named = p == PHASE_HLT ? d[S_HALT] : d[S_IRQ_WINDOW];

	if (taken != ITERATIONS || early)
		ksft_print_msg("note: %s: %lu interrupts taken for %d IPIs, %lu before the HLT\n",
			       asi_exits_phases[p].name, taken, ITERATIONS, early);
	CHECK(taken >= ITERATIONS, "%s: %lu interrupts taken for %d IPIs",
	      asi_exits_phases[p].name, taken, ITERATIONS);
	if (p == PHASE_HLT)
		CHECK(named + early == ITERATIONS,
		      "%s: %lu halt exits for %d HLTs, %lu skipped", asi_exits_phases[p].name,
		      named, ITERATIONS, early);
	if (p == PHASE_IRQ_WINDOW && apicv) {
		ksft_print_msg("%s: %lu interrupt-window exits: APICv/AVIC delivers without them\n",
			       asi_exits_phases[p].name, named);
		return;
	}
	CHECK(named >= ITERATIONS - ITERATIONS / 100,
	      "%s: %lu %s exits for %d iterations", asi_exits_phases[p].name, named,
	      p == PHASE_HLT ? "halt" : "interrupt-window", ITERATIONS);
}

/*
 * The dirty-logging phase: one collection per round of DIRTY_PAGES writes,
 * and each write after a collection a page fault (but the WARMUP %
 * DIRTY_PAGES pages that the warm-up left writable), which the TDP MMU
 * fixes in its fast path, the shadow MMU (which has none) in its page
 * fault handler. Not with PML: see asi_exits_pml_on().
 */
static void check_dirty_log(uint64_t user_pio, const uint64_t *d, bool shadow)
{
	CHECK(user_pio == ITERATIONS / DIRTY_PAGES,
	      "dirty_log: %lu collections for %d writes", user_pio, ITERATIONS);
	if (shadow)
		CHECK(d[S_PF_FIXED] >= ITERATIONS - DIRTY_PAGES,
		      "dirty_log: %lu page faults fixed for %d writes",
		      d[S_PF_FIXED], ITERATIONS);
	else
		CHECK(d[S_PF_FAST] >= ITERATIONS - DIRTY_PAGES,
		      "dirty_log: %lu fast page faults for %d writes",
		      d[S_PF_FAST], ITERATIONS);
}

/*
 * With ASI on, the MMU's pages (the TDP MMU's or, with shadow paging, the
 * shadow MMU's) come from the VM's pool (asi/mmu_pages): pages in use,
 * and, unless fallbacks are allowed (a miss costs fallbacks), none the
 * pool could not serve.
 */
static void check_mmu_pool(struct kvm_vm *vm, bool allow_misses)
{
	unsigned long pages = 0, free = 0, misses = -1UL, v;
	FILE *f = vm_asi_fopen(vm, "mmu_pages", "r");
	char name[32];

	TEST_ASSERT(f, "ASI on, but no asi/mmu_pages for the VM");
	/* "name: value" lines */
	while (fscanf(f, "%31s %lu", name, &v) == 2) {
		if (!strcmp(name, "pages:"))
			pages = v;
		else if (!strcmp(name, "free:"))
			free = v;
		else if (!strcmp(name, "misses:"))
			misses = v;
	}
	fclose(f);
	ksft_print_msg("MMU pool: %lu pages, %lu free, %lu misses\n", pages, free, misses);
	CHECK(pages > free, "no MMU page from the VM's pool in use");
	CHECK(allow_misses || !misses,
	      "%lu MMU page allocations the VM's pool could not serve", misses);
}

/* Switches off the restricted table, by every reason KVM counts. */
static uint64_t table_leaves(const uint64_t *d)
{
	return d[S_OWNER] + d[S_SCHED] + d[S_FALLBACK_EXITS] + d[S_IRQ] + d[S_USER] +
	       d[S_TIMER] + d[S_IOEVENTFD] + d[S_FAULTIN];
}

/* With ASI off (or compiled out) no ASI statistic of @name moves. */
static void check_asi_off(const char *name, const uint64_t *d)
{
	int i;

	for (i = S_ENTERS; i < NR_STATS; i++)
		CHECK(!d[i] || (i > S_LATE && i < S_SMT_WAITS),
		      "ASI off, but %s's %s moved by %lu", name, asi_exits_stat_names[i], d[i]);
}

/*
 * Nothing falls back between the flush decision and the return of the
 * VM-entry code, but NMIs sent on purpose (VMX takes them in that window).
 */
static void check_no_late(const char *name, const uint64_t *d, bool allow_fallbacks)
{
	CHECK(allow_fallbacks || !d[S_LATE],
	      "%s: %lu late fallbacks (after the flush decision)",
	      name, d[S_LATE]);
}

/* A VM's fault log (vm_asi_read_faults()), as "#" lines. */
static void print_faults(const char *when, const char *log)
{
	const char *line = log, *end;

	ksft_print_msg("VM fault log %s:%s\n", when, log ? "" : " not readable");
	while (line && *line) {
		end = strchrnul(line, '\n');
		ksft_print_msg("%.*s\n", (int)(end - line), line);
		line = *end ? end + 1 : end;
	}
}

struct halt_vcpu {
	const char *name;
	struct kvm_vcpu *vcpu;
	struct vcpu_stats r;
	uint64_t before[NR_STATS], after[NR_STATS];
	pthread_t thread;
};

static void *halt_vcpu_thread(void *arg)
{
	struct halt_vcpu *h = arg;
	struct ucall uc;

	asi_exits_run_to_sync(h->vcpu, &uc);		/* the warm-up */
	vcpu_stats_read(&h->r, h->before);
	asi_exits_run_to_sync(h->vcpu, &uc);
	vcpu_stats_read(&h->r, h->after);
	vcpu_run(h->vcpu);
	TEST_ASSERT(get_ucall(h->vcpu, &uc) == UCALL_DONE, "%s did not finish", h->name);
	return NULL;
}

/*
 * IPIs between two vCPUs, in a VM of their own: vCPU 0 (asi_exits_guest_waker())
 * sends vCPU 1 an IPI and waits for its handler, round after round.
 *
 * With @halt, vCPU 1 halts in between (asi_exits_guest_halter()): a HLT that
 * halt-polls or blocks. KVM leaves the domain before it does
 * (vcpu_block()), so the halting vCPU must take no fallback fault. The
 * sender's wakeup of a vCPU that blocked runs the scheduler's
 * try_to_wake_up(), which no domain maps: KVM leaves first
 * (kvm_vcpu_wake_up()), so each wakeup (halt_wakeup) is a schedule-out of
 * the sender's, unless it was off the table already, and the sender takes
 * no fallback fault either, but for two (a vCPU that blocks between
 * KVM's test and the wakeup).
 *
 * Without, vCPU 1 spins in the guest (asi_exits_guest_spinner()) and each IPI kicks
 * its CPU out of guest mode with a host IPI: neither vCPU may fall back.
 *
 * With @halt and @no_poll, the VM's halt polling is off
 * (KVM_CAP_HALT_POLL 0): every HLT blocks, and every IPI wakes vCPU 1's
 * task, which the sender's leave before the wakeup must cover; at least
 * nine in ten rounds must wake it (a few IPIs land before the HLT).
 *
 * One result, named after vCPU 1 ("hlt_block", "hlt_sleep", "ipi_run").
 */
static void run_ipi_pair(bool halt, bool no_poll, bool on, bool apicv,
			 bool allow_fallbacks)
{
	struct halt_vcpu h[2] = {
		{ .name = !halt ? "ipi_send" : no_poll ? "sleep_wake" : "hlt_wake" },
		{ .name = !halt ? "ipi_run" : no_poll ? "hlt_sleep" : "hlt_block" },
	};
	const char *name = h[1].name;
	uint64_t d[2][NR_STATS];
	struct kvm_vm *vm;
	int i, j;

	vm = vm_create(2);
	if (kvm_check_cap(KVM_CAP_X86_DISABLE_EXITS) & KVM_X86_DISABLE_EXITS_PAUSE)
		vm_enable_cap(vm, KVM_CAP_X86_DISABLE_EXITS, KVM_X86_DISABLE_EXITS_PAUSE);
	if (no_poll)
		vm_enable_cap(vm, KVM_CAP_HALT_POLL, 0);
	h[0].vcpu = vm_vcpu_add(vm, 0, asi_exits_guest_waker);
	h[1].vcpu = vm_vcpu_add(vm, 1, halt ? asi_exits_guest_halter : asi_exits_guest_spinner);
	vm_install_exception_handler(vm, SELF_IPI_VECTOR, asi_exits_guest_irq_handler);
	for (i = 0; i < 2; i++) {
		vcpu_stats_open(&h[i].r, h[i].vcpu, asi_exits_stat_names, NR_STATS);
		TEST_ASSERT(!pthread_create(&h[i].thread, NULL, halt_vcpu_thread, &h[i]),
			    "pthread_create");
	}
	for (i = 0; i < 2; i++) {
		pthread_join(h[i].thread, NULL);
		for (j = 0; j < NR_STATS; j++)
			d[i][j] = h[i].after[j] - h[i].before[j];
		asi_exits_print_row(h[i].name, d[i], d[i][S_EXITS],
				    d[i][S_EXITS] ? 2.0 * d[i][S_ENTERS] / d[i][S_EXITS] : 0.0);
	}
	ksft_print_msg("%s: %lu halt exits for %d IPIs; %lu halt-polls (%lu ok); %lu wakeups\n",
		       name, d[1][S_HALT], HALT_ROUNDS, d[1][S_POLLS], d[1][S_POLLED],
		       d[1][S_WAKEUPS]);
	for (i = 0; i < 2; i++)
		check_no_late(h[i].name, d[i], allow_fallbacks);

	/* Each round halts, but where its IPI came before the HLT (TCG). */
	if (halt)
		CHECK(d[1][S_HALT] >= HALT_ROUNDS - HALT_ROUNDS / 100,
		      "%s: %lu halt exits for %d rounds", name, d[1][S_HALT],
		      HALT_ROUNDS);
	else
		CHECK(!d[1][S_HALT], "%s: %lu halt exits", name, d[1][S_HALT]);
	/* Each IPI kicked the running vCPU out of the guest (no APICv). */
	if (!halt && !apicv)
		CHECK(d[1][S_EXITS] >= HALT_ROUNDS,
		      "%s: %lu exits for %d IPIs", name, d[1][S_EXITS], HALT_ROUNDS);
	if (!on) {
		for (i = 0; i < 2; i++)
			check_asi_off(h[i].name, d[i]);
	} else {
		CHECK(!d[1][S_FALLBACKS] || allow_fallbacks,
		      "%s: %lu fallback faults in %lu exits",
		      name, d[1][S_FALLBACKS], d[1][S_EXITS]);
		CHECK(d[0][S_FALLBACKS] <= (halt ? 2 : 0) || allow_fallbacks,
		      "%s: %lu fallback faults in %lu exits, %lu wakeups",
		      h[0].name, d[0][S_FALLBACKS], d[0][S_EXITS], d[1][S_WAKEUPS]);
		/*
		 * The sender leaves before each wakeup (a schedule-out), but
		 * where an interrupt had left the table already; a wakeup
		 * that falls back instead counts as neither.
		 */
		if (halt)
			CHECK(d[0][S_SCHED] + d[0][S_IRQ] + d[0][S_USER] >=
			      d[1][S_WAKEUPS],
			      "%s: %lu schedule-outs, %lu interrupt and %lu user exits for %lu wakeups",
			      h[0].name, d[0][S_SCHED], d[0][S_IRQ], d[0][S_USER],
			      d[1][S_WAKEUPS]);
		if (no_poll)
			CHECK(d[1][S_WAKEUPS] >= HALT_ROUNDS - HALT_ROUNDS / 10,
			      "%s: %lu wakeups for %d rounds without halt polling",
			      name, d[1][S_WAKEUPS], HALT_ROUNDS);
		if (d[0][S_FALLBACKS] || d[1][S_FALLBACKS]) {
			char *faults = vm_asi_read_faults(vm);

			print_faults("of the two-vCPU VM", faults);
			free(faults);
		}
		/*
		 * Every halt that polls or blocks leaves the table first, as a
		 * schedule-out, but where an interrupt or a fallback (allowed
		 * with ASI_EXITS_ALLOW_FALLBACKS) had left it already.
		 */
		if (halt)
			CHECK(d[1][S_SCHED] + d[1][S_IRQ] + d[1][S_FALLBACK_EXITS] +
			      d[1][S_USER] >= d[1][S_POLLS],
			      "%s: %lu schedule-outs for %lu halt-polls",
			      name, d[1][S_SCHED], d[1][S_POLLS]);
	}
	report(name, NULL);
	for (i = 0; i < 2; i++)
		vcpu_stats_close(&h[i].r);
	kvm_vm_free(vm);
}

/*
 * Once L1 has turned SVM on, vmcb02, the nested MSR permission map and
 * the pages L1's VMCBs are copied into are mapped into the VM's domain,
 * once each, and stay so when L1 turns SVM off and on again: KVM keeps
 * them until the vCPU is destroyed, as unmapping them would flush every
 * CPU's TLB.
 */
static void check_nested_mapped(struct kvm_vm *vm, const char *when)
{
	int vmcb02 = vm_asi_mapped(vm, "vmcb02");
	int msrpm = vm_asi_mapped(vm, "nested MSR permission map");
	int copy = vm_asi_mapped(vm, "L1 VMCB copy");

	ksft_print_msg("nested: %s: mapped: vmcb02 %d, nested MSRPM %d, L1 VMCB copy %d\n",
		       when, vmcb02, msrpm, copy);
	CHECK(vmcb02 == 1 && msrpm == 1 && copy == 1,
	      "nested: %s: vmcb02 mapped %d times, the nested MSRPM %d, the L1 VMCB copy %d",
	      when, vmcb02, msrpm, copy);
}

/*
 * The checks of one nested phase (@p) whose statistics' deltas are @d
 * and exits @exits.
 */
static void check_nested_phase(struct kvm_vm *vm, int p, const uint64_t *d, double exits,
			       bool on, bool allow_fallbacks)
{
	const char *name = asi_exits_nested_phases[p].name;
	uint64_t trips = asi_exits_nested_phases[p].trips, leaves;

	ksft_print_msg("%s: %lu exits, %lu nested VMRUNs for %lu round trips through L1\n",
		       name, d[S_EXITS], d[S_NESTED_RUN], trips);
	CHECK(d[S_NESTED_RUN] == trips, "%s: %lu nested VMRUNs for %lu",
	      name, d[S_NESTED_RUN], trips);
	/* L2's exits, and L1's VMRUNs. */
	CHECK(d[S_EXITS] >= asi_exits_nested_phases[p].l2_exits + trips,
	      "%s: %lu exits", name, d[S_EXITS]);

	if (!on) {
		check_asi_off(name, d);
		return;
	}
	/*
	 * Every VM-entry, into L2 as into L1, runs on the restricted
	 * table (kvm_asi_flush_decide() flushes or skips the flush),
	 * nothing falls back after the decision, and the syncs find
	 * the vCPU off it, as in main().
	 */
	check_no_late(name, d, allow_fallbacks);
	CHECK(d[S_FLUSHES] + d[S_SKIPPED] >= exits,
	      "%s: %lu flushes, %lu skipped for %.0f exits", name,
	      d[S_FLUSHES], d[S_SKIPPED], exits);
	CHECK(d[S_FLUSHES] <= d[S_ENTERS] || asi_smt_protocol_on(),
	      "%s: %lu flushes for %lu entries", name, d[S_FLUSHES], d[S_ENTERS]);
	leaves = table_leaves(d);
	CHECK(d[S_ENTERS] == leaves, "%s: %lu switches onto the table, %lu off it",
	      name, d[S_ENTERS], leaves);
	if (d[S_FALLBACKS] && !allow_fallbacks) {
		char *faults = vm_asi_read_faults(vm);

		CHECK(false, "%s: %lu fallback faults in %lu exits", name,
		      d[S_FALLBACKS], d[S_EXITS]);
		print_faults("of the nested VM", faults);
		free(faults);
	}
}

/*
 * Runs the nested guest's phases, a result each, then "nested_mapped";
 * SVM only: nested VMX is not run here (no VMX under QEMU's TCG).
 */
static void run_nested(bool on, bool allow_fallbacks)
{
	struct vcpu_stats r = { };
	uint64_t d[NR_STATS];
	struct kvm_vcpu *vcpu;
	struct kvm_vm *vm;
	struct ucall uc;
	double exits, ns;
	bool npt;
	int p;

	if (!kvm_cpu_has(X86_FEATURE_SVM)) {
		for (p = 0; p < NR_NESTED_PHASES; p++)
			report(asi_exits_nested_phases[p].name, "KVM offers its guests no SVM");
		report("nested_mapped", "KVM offers its guests no SVM");
		return;
	}
	vm = asi_exits_nested_vm_create(&vcpu, &npt);
	vcpu_stats_open(&r, vcpu, asi_exits_stat_names, NR_STATS);

	for (p = 0; p < NR_NESTED_PHASES; p++) {
		const char *name = asi_exits_nested_phases[p].name;

		if (asi_exits_nested_phases[p].npt && !npt) {
			report(name, "KVM offers its guests no nested paging");
			continue;
		}
		asi_exits_run_to_sync(vcpu, &uc);		/* the warm-up */
		asi_exits_run_timed(vcpu, &r, &uc, d, &ns);
		exits = asi_exits_print_phase_row(name, d);
		check_nested_phase(vm, p, d, exits, on, allow_fallbacks);
		report(name, NULL);
	}

	if (on)
		check_nested_mapped(vm, "SVM on in L1");
	asi_exits_run_to_sync(vcpu, &uc);			/* L1 turns SVM off */
	if (on)
		check_nested_mapped(vm, "SVM off in L1");
	asi_exits_run_to_sync(vcpu, &uc);			/* and on again */
	if (on)
		check_nested_mapped(vm, "SVM on again");
	report("nested_mapped", on ? NULL : "ASI is off");
	vcpu_run(vcpu);
	TEST_ASSERT(get_ucall(vcpu, &uc) == UCALL_DONE, "nested guest did not finish");
	vcpu_stats_close(&r);
	kvm_vm_free(vm);
}

/*
 * The dirty_log phase with the dirty ring (KVM_CAP_DIRTY_LOG_RING) in
 * place of the bitmap, in a VM of its own (the ring is set up before the
 * vCPU): every write after a harvest is a page fault KVM fixes in its fast
 * path, which pushes the page to the vCPU's ring. Fault-free, but with
 * shadow paging (see main()'s dirty_log phase). Not run with PML (VMX),
 * where KVM pushes the pages when it empties the PML buffer at VM-exit:
 * untested here, and the buffer is not mapped.
 */
static void run_dirty_ring(bool on, bool shadow, bool pml, bool allow_fallbacks)
{
	const char *name = "dirty_ring";
	uint64_t d[NR_STATS], user_pio;
	struct vcpu_stats r = { };
	struct kvm_vcpu *vcpu;
	struct kvm_vm *vm;
	struct ucall uc;
	double ns;
	int i;

	if (!kvm_has_cap(KVM_CAP_DIRTY_LOG_RING) &&
	    !kvm_has_cap(KVM_CAP_DIRTY_LOG_RING_ACQ_REL)) {
		report(name, "no KVM_CAP_DIRTY_LOG_RING");
		return;
	}
	if (pml) {
		report(name, "PML logs the writes without faults");
		return;
	}
	vm = asi_exits_dirty_ring_vm_create(&vcpu);
	vcpu_stats_open(&r, vcpu, asi_exits_stat_names, NR_STATS);

	asi_exits_run_to_sync(vcpu, &uc);		/* the warm-up */
	user_pio = asi_exits_run_timed(vcpu, &r, &uc, d, &ns);
	asi_exits_print_phase_row(name, d);
	check_dirty_log(user_pio, d, shadow);

	if (!on) {
		check_asi_off(name, d);
	} else {
		/*
		 * The one vCPU's ring, mapped while the vCPU lives. A second
		 * vCPU 0 fails (-EEXIST) after its ring was mapped: the
		 * failure unmaps it again.
		 */
		i = vm_asi_mapped(vm, "dirty ring");
		CHECK(i == 1, "%s: the ring mapped %d times", name, i);
		CHECK(__vm_ioctl(vm, KVM_CREATE_VCPU, (void *)0) < 0 && errno == EEXIST,
		      "%s: a second vCPU 0 was not refused with EEXIST", name);
		i = vm_asi_mapped(vm, "dirty ring");
		CHECK(i == 1, "%s: %d rings mapped after a failed KVM_CREATE_VCPU", name, i);
	}
	if (on && shadow) {
		ksft_print_msg("%s: %lu fallbacks in %d writes with shadow paging (not checked)\n",
			       name, d[S_FALLBACKS], ITERATIONS);
	} else if (on && d[S_FALLBACKS] > SYNC_FALLBACKS && !allow_fallbacks) {
		char *faults = vm_asi_read_faults(vm);

		CHECK(false, "%s: %lu fallback faults in %lu exits", name,
		      d[S_FALLBACKS], d[S_EXITS]);
		print_faults("of the dirty ring's VM", faults);
		free(faults);
	}
	report(name, NULL);
	vcpu_run(vcpu);
	TEST_ASSERT(get_ucall(vcpu, &uc) == UCALL_DONE, "%s: guest did not finish", name);
	vcpu_stats_close(&r);
	kvm_vm_free(vm);
}

/* What main() found out about the host, once. */
struct host {
	bool on;		/* ASI is on */
	bool shadow;		/* npt=0 or ept=0: KVM shadows the guest's page tables */
	bool pml;		/* asi_exits_pml_on() */
	bool apicv;		/* asi_exits_apicv_on() */
	bool allow_fallbacks;	/* ASI_EXITS_ALLOW_FALLBACKS */
};

/*
 * The checks of one phase of asi_exits_guest_code() (@p) whose statistics'
 * deltas are @d, exits to user space @user_pio and interrupts taken, as
 * the guest reported them, in @uc; @skip if the phase did not run its
 * exit (asi_exits_not_exercised()).
 */
static void check_phase(enum phase p, const uint64_t *d, uint64_t user_pio,
			struct ucall *uc, int efd, const char *skip, const struct host *h)
{
	const char *name = asi_exits_phases[p].name;
	uint64_t signals, leaves;

	if (!skip)
		CHECK(d[S_EXITS] >= ITERATIONS, "%s: %lu exits for %d iterations", name,
		      d[S_EXITS], ITERATIONS);
	if (asi_exits_phases[p].user)
		CHECK(user_pio == ITERATIONS, "%s: %lu exits to user space", name, user_pio);
	if (p == PHASE_HLT || p == PHASE_IRQ_WINDOW)
		check_ipis(p, uc, d, h->apicv);
	if (p == PHASE_IOEVENTFD) {
		/* Every write signalled, the warm-up's too; none went to user space. */
		CHECK(read(efd, &signals, sizeof(signals)) == sizeof(signals) &&
		      signals == WARMUP + ITERATIONS,
		      "%s: eventfd counted %lu of %d writes", name, signals,
		      WARMUP + ITERATIONS);
		CHECK(!user_pio, "%s: %lu exits to user space", name, user_pio);
	}
	if (p == PHASE_DIRTY_LOG && !h->pml)
		check_dirty_log(user_pio, d, h->shadow);

	if (!h->on) {
		check_asi_off(name, d);
		return;
	}

	/* Every VM-entry runs on the restricted table. */
	CHECK(d[S_ENTERS] >= 1, "%s: never entered the restricted table", name);
	/*
	 * Both syncs find the vCPU off the table (KVM_RUN returned):
	 * every switch onto it in between was followed by one off it.
	 */
	leaves = table_leaves(d);
	CHECK(d[S_ENTERS] == leaves, "%s: %lu switches onto the table, %lu off it",
	      name, d[S_ENTERS], leaves);
	/*
	 * What needs the full table leaves as a planned exit, counted
	 * by its cause (an interrupt may have taken the CPU off the
	 * table first: then that exit is the interrupt's).
	 */
	if (p == PHASE_TSC_DEADLINE)
		CHECK(d[S_TIMER] && d[S_TIMER] + d[S_IRQ] >= ITERATIONS,
		      "%s: %lu planned timer exits, %lu on interrupts, for %d writes",
		      name, d[S_TIMER], d[S_IRQ], ITERATIONS);
	if (p == PHASE_IOEVENTFD)
		CHECK(d[S_IOEVENTFD] && d[S_IOEVENTFD] + d[S_IRQ] >= ITERATIONS,
		      "%s: %lu planned ioeventfd exits, %lu on interrupts, for %d writes",
		      name, d[S_IOEVENTFD], d[S_IRQ], ITERATIONS);
	/* Each exit to user space leaves the table, if not before. */
	if (asi_exits_phases[p].user)
		CHECK(leaves >= user_pio + 1,
		      "%s: %lu switches off the table for %lu exits to user space",
		      name, leaves, user_pio + 1);
	/*
	 * A flush decision per switch onto the table, but where the
	 * decision itself switched back onto it after a fallback
	 * since kvm_asi_enter() (the debug configuration's lockdep),
	 * and where SMT's gate entered the table for a VM-entry it
	 * then put off (smt_waits).
	 */
	CHECK(d[S_FLUSHES] + d[S_SKIPPED] + d[S_FALLBACKS] + d[S_SMT_WAITS] >= d[S_ENTERS],
	      "%s: %lu flushes, %lu skipped, %lu fallbacks, %lu SMT waits for %lu entries",
	      name, d[S_FLUSHES], d[S_SKIPPED], d[S_FALLBACKS], d[S_SMT_WAITS],
	      d[S_ENTERS]);
	/* A flush only after the full table was used (or the sibling's). */
	CHECK(d[S_FLUSHES] <= d[S_ENTERS] || asi_smt_protocol_on(),
	      "%s: %lu flushes for %lu entries", name, d[S_FLUSHES], d[S_ENTERS]);
	check_no_late(name, d, h->allow_fallbacks);
	/*
	 * Exactly one switch out and one back in per exit to user
	 * space (and the sync's), but where a host interrupt had left
	 * the table first: that exit is the interrupt's.
	 */
	if (asi_exits_phases[p].user && asi_exits_phases[p].fault_free &&
	    !d[S_FALLBACKS] && !d[S_SCHED])
		CHECK(d[S_OWNER] <= ITERATIONS + 1 &&
		      d[S_OWNER] + d[S_IRQ] >= ITERATIONS + 1 &&
		      d[S_ENTERS] == d[S_OWNER] + d[S_IRQ],
		      "%s: %lu switches out to user space, %lu on interrupts and %lu back in for %d exits",
		      name, d[S_OWNER], d[S_IRQ], d[S_ENTERS], ITERATIONS);
}

int main(void)
{
	const struct host h = {
		.on = asi_is_on(),
		.shadow = !kvm_is_tdp_enabled(),
		.pml = asi_exits_pml_on(),
		.apicv = asi_exits_apicv_on(),
		/*
		 * For runs that cause fallbacks on purpose (NMIs sent at the
		 * vCPU by asi_nmi_storm.sh): every other check still applies.
		 */
		.allow_fallbacks = !!getenv("ASI_EXITS_ALLOW_FALLBACKS"),
	};
	bool on = h.on, shadow = h.shadow, allow_fallbacks = h.allow_fallbacks;
	struct vcpu_stats r = { };
	uint64_t d[NR_STATS], user_pio;
	struct kvm_vcpu *vcpu;
	struct kvm_vm *vm;
	struct ucall uc;
	double ns;
	int p, efd;

	ksft_print_header();
	/* The phases, the MMU pool, three IPI pairs, the dirty ring, nested. */
	ksft_set_plan(NR_PHASES + 1 + 3 + 1 + NR_NESTED_PHASES + 1);

	vm = asi_exits_vm_create(&vcpu, &efd);
	vcpu_stats_open(&r, vcpu, asi_exits_stat_names, NR_STATS);
	ksft_print_msg("ASI is %s, %s paging; %d iterations per exit type after %d of warm-up\n",
		       on ? "on" : "off", shadow ? "shadow" : "nested", ITERATIONS, WARMUP);
	asi_exits_print_header();

	for (p = 0; p < NR_PHASES; p++) {
		const char *name = asi_exits_phases[p].name, *skip;
		char *faults_before;

		asi_exits_run_to_sync(vcpu, &uc);		/* the warm-up */
		/* On a failure, the log before and after tells the phase's sites. */
		faults_before = on ? vm_asi_read_faults(vm) : NULL;
		user_pio = asi_exits_run_timed(vcpu, &r, &uc, d, &ns);
		asi_exits_print_phase_row(name, d);
		skip = asi_exits_not_exercised(p, d, shadow, h.pml);
		check_phase(p, d, user_pio, &uc, efd, skip, &h);

		/*
		 * With shadow paging, every write after a collection resolves
		 * the page through get_user_pages(), which takes a reference
		 * on its struct page: guest memory's memory map is not mapped.
		 */
		if (on && p == PHASE_DIRTY_LOG && shadow) {
			ksft_print_msg("%s: %lu fallbacks (shadow paging: not checked)\n",
				       name, d[S_FALLBACKS]);
		} else if (on && asi_exits_phases[p].fault_free && !allow_fallbacks &&
			   d[S_FALLBACKS] > SYNC_FALLBACKS) {
			char *faults_after = vm_asi_read_faults(vm);

			CHECK(false, "%s: %lu fallback faults in %d exits and the sync's",
			      name, d[S_FALLBACKS], ITERATIONS);
			/* Each failing phase's: a new platform fails several. */
			print_faults("before the phase", faults_before);
			print_faults("after it", faults_after);
			free(faults_after);
		}
		free(faults_before);
		report(name, skip);
	}

	/* The control loop, timed by asi_exits_perf_test only. */
	asi_exits_run_to_sync(vcpu, &uc);
	asi_exits_run_to_sync(vcpu, &uc);
	vcpu_run(vcpu);
	TEST_ASSERT(get_ucall(vcpu, &uc) == UCALL_DONE, "guest did not finish");
	if (on)
		check_mmu_pool(vm, allow_fallbacks);
	report("mmu_pool", on ? NULL : "ASI is off");
	vcpu_stats_close(&r);
	kvm_vm_free(vm);

	run_ipi_pair(true, false, on, h.apicv, allow_fallbacks);
	run_ipi_pair(true, true, on, h.apicv, allow_fallbacks);
	run_ipi_pair(false, false, on, h.apicv, allow_fallbacks);
	run_dirty_ring(on, shadow, h.pml, allow_fallbacks);
	run_nested(on, allow_fallbacks);
	ksft_finished();
}
