// SPDX-License-Identifier: GPL-2.0
/*
 * The exits workload of the ASI selftests (include/x86_64/asi_exits.h).
 *
 * asi_exits_guest_code() runs each common exit type (enum phase) WARMUP
 * times, syncs, runs it ITERATIONS times and syncs again, so that the host
 * reads the vCPU's statistics around each phase (asi_exits_run_timed());
 * then a CPU-bound loop with no exits, the control. asi_exits_test checks
 * what each phase does, asi_exits_perf_test times it.
 */
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

#include "apic.h"
#include "asi_exits.h"
#include "kvm_util.h"
#include "processor.h"
#include "svm_util.h"
#include "test_util.h"

kvm_static_assert(DIRTY_PAGES % 64 == 0);	/* the log is read in 64-bit words */

/*
 * STI; HLT with the interrupt pending: the STI shadow holds it off until
 * HLT has exited to KVM, which finds it pending and does not block. Should
 * the interrupt come in before the HLT all the same, the handler steps over
 * the HLT and counts it, so that the test fails instead of halting forever.
 */
static uint64_t guest_hlt_rip;
static uint64_t guest_irqs_before_hlt;

static void guest_sti_hlt(void)
{
	uint64_t rip;

	asm volatile("leaq 1f(%%rip), %0\n\t"
		     "movq %0, %1\n\t"
		     "sti\n"
		     "1:\thlt\n\t"
		     "cli"
		     : "=&r"(rip), "=m"(guest_hlt_rip) : : "memory");
}

/* Interrupts the guest took: SELF_IPI_VECTOR's handler counts them. */
static uint64_t guest_irqs;

void asi_exits_guest_irq_handler(struct ex_regs *regs)
{
	if (regs->rip == guest_hlt_rip) {
		regs->rip++;
		WRITE_ONCE(guest_irqs_before_hlt, guest_irqs_before_hlt + 1);
	}
	WRITE_ONCE(guest_irqs, guest_irqs + 1);
	x2apic_write_reg(APIC_EOI, 0);
}

/* With interrupts off: the IPI stays pending until the guest takes it. */
static void guest_self_ipi(void)
{
	x2apic_write_reg(APIC_ICR, APIC_DEST_SELF | APIC_DM_FIXED | SELF_IPI_VECTOR);
}

static inline uint8_t guest_inb(uint16_t port)
{
	uint8_t v;

	asm volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
	return v;
}

static inline void guest_outb(uint16_t port, uint8_t v)
{
	asm volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

/* MSR_IA32_MISC_ENABLE as the guest found it, for PHASE_MSR_WRITE. */
static uint64_t guest_misc_enable;

static void guest_phase(enum phase p, int n)
{
	uint32_t eax, ebx, ecx, edx;
	int i;

	for (i = 0; i < n; i++) {
		switch (p) {
		case PHASE_CPUID:
			cpuid(0, &eax, &ebx, &ecx, &edx);
			break;
		case PHASE_MSR_READ:
			/*
			 * An MSR both vendors intercept and KVM handles itself.
			 * Not an x2APIC register: VMX with a TPR shadow or
			 * APIC virtualization reads and writes those without
			 * an exit.
			 */
			rdmsr(MSR_IA32_MISC_ENABLE);
			break;
		case PHASE_MSR_WRITE:
			/* The value it holds: KVM changes nothing. */
			wrmsr(MSR_IA32_MISC_ENABLE, guest_misc_enable);
			break;
		case PHASE_PIO_KERNEL:
			guest_inb(PIC_PORT);
			break;
		case PHASE_MMIO_KERNEL:
			(void)READ_ONCE(*(uint32_t *)IOAPIC_GPA);
			break;
		case PHASE_MMIO_WALK:
			/*
			 * Two pages in turn: KVM's one-entry MMIO cache misses
			 * every time, and each exit walks the TDP MMU, as a
			 * guest's exits to several MMIO devices do.
			 */
			if (i & 1)
				(void)READ_ONCE(*(uint32_t *)IOAPIC_GPA);
			else
				(void)READ_ONCE(*(uint32_t *)XAPIC_VERSION_GPA);
			break;
		case PHASE_PIO_USER:
			guest_outb(USER_PORT, 0);
			break;
		case PHASE_DIRTY_LOG:
			/*
			 * The phase's time includes the host's collections
			 * (one KVM_GET_DIRTY_LOG per DIRTY_PAGES writes).
			 */
			WRITE_ONCE(*(uint64_t *)(DIRTY_GPA + (i % DIRTY_PAGES) * PAGE_SIZE), i);
			if (i % DIRTY_PAGES == DIRTY_PAGES - 1)
				guest_outb(DIRTY_PORT, 0);
			break;
		case PHASE_HLT:
			guest_self_ipi();
			guest_sti_hlt();
			break;
		case PHASE_IRQ_WINDOW:
			guest_self_ipi();
			asm volatile("sti; nop; cli" ::: "memory");
			break;
		case PHASE_PAUSE:
			asm volatile("pause");
			break;
		case PHASE_INVLPG:
			/*
			 * Intercepted with shadow paging only: KVM walks its
			 * shadow page tables for the address and resyncs the
			 * SPTE from the guest's PTE.
			 */
			asm volatile("invlpg (%0)" : : "r"(&guest_irqs) : "memory");
			break;
		case PHASE_CR3:
			/*
			 * Intercepted with shadow paging only: KVM syncs the
			 * shadow roots and flushes the guest's TLB.
			 */
			asm volatile("mov %0, %%cr3" : : "r"(get_cr3()) : "memory");
			break;
		case PHASE_CR4:
			/*
			 * A Linux guest without INVPCID toggles CR4.PGE for
			 * each global TLB flush. SVM intercepts every CR4
			 * write; KVM flushes the guest's TLB and reads the
			 * host's CR4 (svm_set_cr4()). VMX lets the guest own
			 * PGE: no exit there.
			 */
			set_cr4(get_cr4() ^ X86_CR4_PGE);
			break;
		case PHASE_TSC_DEADLINE:
			/*
			 * A Linux guest's timer on SVM: KVM cancels and re-arms
			 * the LAPIC timer's hrtimer, which no domain maps: a
			 * planned exit (asi_exits_planned_timer), not a fallback.
			 */
			wrmsr(MSR_IA32_TSC_DEADLINE, rdtsc() + TSC_DEADLINE_AHEAD);
			break;
		case PHASE_IOEVENTFD:
			/*
			 * The bus walk stays on the table; the eventfd signal
			 * (a wakeup) is a planned exit (asi_exits_planned_ioeventfd).
			 */
			WRITE_ONCE(*(uint32_t *)IOEVENTFD_GPA, i);
			break;
		default:
			GUEST_FAIL("unknown phase %d", p);
		}
	}
}

/*
 * A halt that blocks: vCPU 1 halts with nothing pending, vCPU 0 sends it
 * an IPI and waits until its handler has run, HALT_ROUNDS times after
 * HALT_WARMUP. KVM halt-polls before it blocks, so a wakeup finds vCPU 1
 * polling or blocked.
 */

/*
 * The halter's interrupt count when it last got ready to halt (interrupts
 * off, its APIC enabled): the waker sends the next IPI only then, so that
 * every IPI finds a HLT to end, not the return from the last interrupt.
 */
static uint64_t guest_halter_waiting = -1ULL;

/*
 * Wait until the vCPU has taken @irqs interrupts. With @halt, halt for
 * each (STI;HLT), so that each IPI ends a HLT. Without, spin in the guest
 * with interrupts on, so that each IPI finds the vCPU in guest mode and
 * KVM kicks its CPU out of it. The spin uses PAUSE, which lets the other
 * vCPU run under QEMU's single-threaded TCG; asi_exits_test's
 * run_ipi_pair() turns PAUSE exits off for the VM, so that a pause filter
 * does not send the spinning vCPU to kvm_vcpu_on_spin(), which yields
 * through the scheduler.
 */
static void guest_wait_irqs(uint64_t irqs, bool halt)
{
	if (!halt)
		asm volatile("sti" ::: "memory");
	while (READ_ONCE(guest_irqs) < irqs) {
		WRITE_ONCE(guest_halter_waiting, READ_ONCE(guest_irqs));
		if (halt)
			guest_sti_hlt();
		else
			cpu_relax();
	}
	if (!halt)
		asm volatile("cli" ::: "memory");
}

/* vCPU 1 of asi_exits_test's IPI pairs: takes the waker's IPIs. */
static void guest_ipi_target(bool halt)
{
	x2apic_enable();
	guest_wait_irqs(HALT_WARMUP, halt);
	GUEST_SYNC(0);
	guest_wait_irqs(HALT_WARMUP + HALT_ROUNDS, halt);
	GUEST_SYNC(1);
	GUEST_DONE();
}

void asi_exits_guest_halter(void)
{
	guest_ipi_target(true);
}

void asi_exits_guest_spinner(void)
{
	guest_ipi_target(false);
}

/*
 * Counts the halter's interrupts, not its IPIs: one may be taken twice
 * (TCG, see asi_exits_test's check_ipis()). Waits with PAUSE, as
 * guest_wait_irqs() does.
 */
void asi_exits_guest_waker(void)
{
	bool synced = false;
	uint64_t seen;

	x2apic_enable();
	/*
	 * Interrupts on, though nothing is sent here: Bochs leaves guest mode
	 * for a host interrupt only while the guest has IF set, and with one
	 * host CPU the target's task would never run again.
	 */
	asm volatile("sti" ::: "memory");
	for (;;) {
		seen = READ_ONCE(guest_irqs);
		if (seen >= HALT_WARMUP + HALT_ROUNDS)
			break;
		if (!synced && seen >= HALT_WARMUP) {
			GUEST_SYNC(0);
			synced = true;
		}
		/*
		 * Re-read both until they agree: an IPI taken twice moves
		 * guest_irqs on after the target last said it was waiting.
		 */
		if (READ_ONCE(guest_halter_waiting) != seen) {
			cpu_relax();
			continue;
		}
		x2apic_write_reg(APIC_ICR, (1ULL << 32) | APIC_DM_FIXED | SELF_IPI_VECTOR);
		while (READ_ONCE(guest_irqs) == seen)
			cpu_relax();
	}
	GUEST_SYNC(1);
	GUEST_DONE();
}

/*
 * A nested guest (SVM). L2 runs l2_cpuids CPUIDs, which L1 does not
 * intercept, so that this KVM handles them for L2 itself, then a VMMCALL,
 * which L1 intercepts and steps over before it runs L2 again. Two phases,
 * each after a warm-up: ITERATIONS CPUIDs and one VMMCALL (phase
 * "nested_cpuid"), then ITERATIONS VMMCALLs alone ("nested_vmmcall");
 * then both again with nested paging for L2 ("npt_cpuid", "npt_vmmcall").
 */
#define L2_GUEST_STACK_SIZE	64

static int l2_cpuids;

static void l2_code(void)
{
	uint32_t eax, ebx, ecx, edx;
	int i;

	for (;;) {
		for (i = 0; i < READ_ONCE(l2_cpuids); i++)
			cpuid(0, &eax, &ebx, &ecx, &edx);
		asm volatile("vmmcall" ::: "memory");
	}
}

/* Run L2 until its @n-th VMMCALL. */
static void l1_run_l2(struct svm_test_data *svm, int n)
{
	struct vmcb *vmcb = svm->vmcb;
	int i;

	for (i = 0; i < n; i++) {
		run_guest(vmcb, svm->vmcb_gpa);
		GUEST_ASSERT_EQ(vmcb->control.exit_code, SVM_EXIT_VMMCALL);
		vmcb->save.rip += 3;	/* VMMCALL is 0f 01 d9 */
	}
}

/* The two phases: L2's CPUIDs with one round trip, then round trips. */
static void l1_run_phases(struct svm_test_data *svm)
{
	WRITE_ONCE(l2_cpuids, WARMUP);
	l1_run_l2(svm, 1);
	GUEST_SYNC(0);
	WRITE_ONCE(l2_cpuids, ITERATIONS);
	l1_run_l2(svm, 1);
	GUEST_SYNC(1);

	WRITE_ONCE(l2_cpuids, 0);
	l1_run_l2(svm, WARMUP);
	GUEST_SYNC(0);
	l1_run_l2(svm, ITERATIONS);
	GUEST_SYNC(1);
}

/*
 * L1 runs the phases with L2 on L1's own page tables, then, when @npt_gpa
 * names nested page tables (nested_npt_setup()), again with nested paging
 * for L2, which this KVM shadows (the shadow NPT MMU).
 */
void asi_exits_guest_nested(struct svm_test_data *svm, uint64_t npt_gpa)
{
	unsigned long l2_stack[L2_GUEST_STACK_SIZE];

	generic_svm_setup(svm, l2_code, &l2_stack[L2_GUEST_STACK_SIZE]);
	/*
	 * An MSR permission map of L1's (vcpu_alloc_svm()'s zeroed page:
	 * none of the MSRs L2 touches is intercepted), so that KVM runs L2
	 * with the nested one, merged from L0's and L1's.
	 */
	svm->vmcb->control.intercept |= BIT_ULL(INTERCEPT_MSR_PROT);
	l1_run_phases(svm);

	if (npt_gpa) {
		svm->vmcb->control.nested_ctl |= SVM_NESTED_CTL_NP_ENABLE;
		svm->vmcb->control.nested_cr3 = npt_gpa;
		l1_run_phases(svm);
		svm->vmcb->control.nested_ctl &= ~SVM_NESTED_CTL_NP_ENABLE;
	}

	/* Off and on again: with ASI, KVM keeps the nested state. */
	wrmsr(MSR_EFER, rdmsr(MSR_EFER) & ~EFER_SVME);
	GUEST_SYNC(2);
	wrmsr(MSR_EFER, rdmsr(MSR_EFER) | EFER_SVME);
	GUEST_SYNC(3);
	GUEST_DONE();
}

/* The dirty_ring phase's guest: dirty_log's writes, in a VM of its own. */
void asi_exits_guest_dirty_ring(void)
{
	guest_phase(PHASE_DIRTY_LOG, WARMUP);
	GUEST_SYNC(0);
	guest_phase(PHASE_DIRTY_LOG, ITERATIONS);
	GUEST_SYNC(1);
	GUEST_DONE();
}

static void guest_compute(void)
{
	uint64_t x = 88172645463325252ULL;
	int i;

	for (i = 0; i < COMPUTE_LOOPS; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	GUEST_ASSERT(x);
}

void asi_exits_guest_code(void)
{
	uint64_t irqs, early;
	int p;

	x2apic_enable();
	guest_misc_enable = rdmsr(MSR_IA32_MISC_ENABLE);
	/* Masked: the deadline is never reached, but KVM arms the timer all the same. */
	x2apic_write_reg(APIC_LVTT, APIC_LVT_TIMER_TSCDEADLINE | APIC_LVT_MASKED |
			 SELF_IPI_VECTOR);

	for (p = 0; p < NR_PHASES; p++) {
		guest_phase(p, WARMUP);
		/* Before the sync: a first touch of their page faults. */
		irqs = READ_ONCE(guest_irqs);
		early = READ_ONCE(guest_irqs_before_hlt);
		GUEST_SYNC(0);
		guest_phase(p, ITERATIONS);
		/* The interrupts taken, and those that came before the HLT. */
		GUEST_SYNC_ARGS(1, READ_ONCE(guest_irqs) - irqs,
				READ_ONCE(guest_irqs_before_hlt) - early, 0, 0);
	}
	GUEST_SYNC(2);
	guest_compute();
	GUEST_SYNC(3);
	GUEST_DONE();
}

const struct asi_exits_phase asi_exits_phases[NR_PHASES] = {
	/*
	 * Every exit type runs fault-free (see "What still falls back" in
	 * Documentation/arch/x86/asi.rst); a new one is added with its
	 * flag clear until it does.
	 */
	[PHASE_CPUID]		= { "cpuid",		true,	false },
	[PHASE_MSR_READ]	= { "msr_read",		true,	false },
	[PHASE_MSR_WRITE]	= { "msr_write",	true,	false },
	[PHASE_PIO_KERNEL]	= { "pio_kernel",	true,	false },
	[PHASE_MMIO_KERNEL]	= { "mmio_kernel",	true,	false },
	[PHASE_MMIO_WALK]	= { "mmio_walk",	true,	false },
	[PHASE_PIO_USER]	= { "pio_user",		true,	true },
	[PHASE_DIRTY_LOG]	= { "dirty_log",	true,	false },
	[PHASE_IRQ_WINDOW]	= { "irq_window",	true,	false },
	[PHASE_PAUSE]		= { "pause",		true,	false },
	[PHASE_HLT]		= { "hlt",		true,	false },
	[PHASE_INVLPG]		= { "invlpg",		true,	false },
	[PHASE_CR3]		= { "cr3_write",	true,	false },
	[PHASE_CR4]		= { "cr4_write",	true,	false },
	[PHASE_TSC_DEADLINE]	= { "tsc_deadline",	true,	false },
	[PHASE_IOEVENTFD]	= { "ioeventfd",	true,	false },
};

/*
 * The nested guest's phases (asi_exits_guest_nested()), each after a warm-up, both
 * fault-free. In "nested_cpuid" L2's CPUIDs exit to this KVM (L0), which
 * handles them on vmcb02 without L1 and enters L2 again; one VMMCALL
 * makes a round trip through L1. In "nested_vmmcall" each iteration is a
 * round trip: L2's VMMCALL is reflected to L1 (a nested VM-exit), L1's
 * VMRUN is emulated (a nested VM-entry, which merges L1's MSR permission
 * map into the nested one), and so are L1's VMLOAD and VMSAVE where the
 * CPU cannot virtualize them. Each of those reads or writes a VMCB of
 * L1's, which KVM copies through the VMM's mapping of guest memory (see
 * "Nested guests" in Documentation/arch/x86/asi.rst). "npt_cpuid" and
 * "npt_vmmcall" run the same with nested paging for L2 (L1's nested page
 * tables, which KVM shadows: each nested VMRUN and VM-exit switches the
 * vCPU between its own MMU and the shadow NPT MMU).
 */
const struct asi_exits_nested_phase asi_exits_nested_phases[NR_NESTED_PHASES] = {
	{ "nested_cpuid",	1,		ITERATIONS,	false },
	{ "nested_vmmcall",	ITERATIONS,	ITERATIONS,	false },
	{ "npt_cpuid",		1,		ITERATIONS,	true },
	{ "npt_vmmcall",	ITERATIONS,	ITERATIONS,	true },
};

/* The ASI statistics of a vCPU, by their KVM_GET_STATS_FD names. */
const char * const asi_exits_stat_names[NR_STATS] = {
	"exits", "asi_enters", "asi_exits_owner", "asi_exits_sched",
	"asi_exits_fallback", "asi_exits_interrupt", "asi_exits_user",
	"asi_fallbacks", "asi_flushes", "asi_flushes_skipped", "asi_late_fallbacks",
	"halt_exits", "irq_window_exits", "halt_attempted_poll",
	"halt_successful_poll", "halt_wakeup", "pf_fast", "pf_fixed",
	"nested_run", "asi_smt_waits", "asi_smt_kicks",
	"asi_exits_planned_timer", "asi_exits_planned_ioeventfd",
	"asi_exits_planned_faultin",
};

/*
 * With APICv (AVIC), interrupts are delivered without interrupt-window
 * exits, and IPIs to a running vCPU without a kick: the checks on those
 * exit counts do not apply. QEMU's TCG has neither. The vendor module is
 * the one of this CPU's virtualization extension: with KVM built in, the
 * other one's parameters exist too.
 */
bool asi_exits_apicv_on(void)
{
	if (this_cpu_has(X86_FEATURE_SVM))
		return get_kvm_amd_param_bool("avic");
	if (this_cpu_has(X86_FEATURE_VMX))
		return get_kvm_intel_param_bool("enable_apicv");
	return false;
}

/*
 * With PML (VMX) KVM logs dirty pages by clearing dirty bits, not by
 * write-protecting them: the dirty_log phase's writes do not exit.
 */
bool asi_exits_pml_on(void)
{
	return this_cpu_has(X86_FEATURE_VMX) && get_kvm_intel_param_bool("pml");
}

/*
 * Collect the dirty memslot's log, which write-protects the pages logged
 * dirty again. The guest wrote every page since the last collection.
 */
static void collect_dirty_log(struct kvm_vm *vm)
{
	unsigned long log[DIRTY_PAGES / 64] = { };
	int i, dirty = 0;

	kvm_vm_get_dirty_log(vm, DIRTY_SLOT, log);
	for (i = 0; i < ARRAY_SIZE(log); i++)
		dirty += __builtin_popcountl(log[i]);
	TEST_ASSERT(dirty == DIRTY_PAGES, "dirty log: %d of %d pages dirty",
		    dirty, DIRTY_PAGES);
}

/*
 * The dirty ring's entries, DIRTY_RING_ENTRIES per vCPU: room for a round
 * of DIRTY_PAGES writes and KVM's reserved entries.
 */
#define DIRTY_RING_ENTRIES	1024

/*
 * Harvest the vCPU's dirty ring (a VM with KVM_CAP_DIRTY_LOG_RING) and
 * reset it, which write-protects the pages harvested again. The guest
 * wrote every page of the dirty memslot since the last harvest.
 */
static void collect_dirty_ring(struct kvm_vcpu *vcpu)
{
	static uint32_t fetch;	/* the next entry of the one ring (one vCPU) */
	struct kvm_dirty_gfn *gfns = vcpu_map_dirty_ring(vcpu), *cur;
	uint64_t seen[DIRTY_PAGES / 64] = { };
	uint32_t n = 0, pages = 0;
	int reset, i;

	for (;;) {
		cur = &gfns[fetch % DIRTY_RING_ENTRIES];
		if (__atomic_load_n(&cur->flags, __ATOMIC_ACQUIRE) != KVM_DIRTY_GFN_F_DIRTY)
			break;
		TEST_ASSERT(cur->slot == DIRTY_SLOT && cur->offset < DIRTY_PAGES,
			    "dirty ring: slot %u offset %llu", cur->slot, cur->offset);
		seen[cur->offset / 64] |= 1ULL << (cur->offset % 64);
		__atomic_store_n(&cur->flags, KVM_DIRTY_GFN_F_RESET, __ATOMIC_RELEASE);
		fetch++;
		n++;
	}
	reset = kvm_vm_reset_dirty_ring(vcpu->vm);
	TEST_ASSERT(reset >= 0, "KVM_RESET_DIRTY_RINGS: %s", strerror(errno));
	/* A page written twice since the last reset (an MMU notifier zap) is pushed twice. */
	for (i = 0; i < ARRAY_SIZE(seen); i++)
		pages += __builtin_popcountll(seen[i]);
	TEST_ASSERT(pages == DIRTY_PAGES && reset == n,
		    "dirty ring: %u pages in %u entries harvested, %d reset, for %d pages written",
		    pages, n, reset, DIRTY_PAGES);
}

/*
 * Run until the guest's next GUEST_SYNC, which is left in *uc; count the
 * PIO exits to user space (to USER_PORT, and to DIRTY_PORT, where the
 * dirty log or the dirty ring is collected).
 */
uint64_t asi_exits_run_to_sync(struct kvm_vcpu *vcpu, struct ucall *uc)
{
	uint64_t user_pio = 0;

	for (;;) {
		vcpu_run(vcpu);
		switch (get_ucall(vcpu, uc)) {
		case UCALL_SYNC:
			return user_pio;
		case UCALL_ABORT:
			REPORT_GUEST_ASSERT(*uc);
			break;
		case UCALL_NONE:
			TEST_ASSERT(vcpu->run->exit_reason == KVM_EXIT_IO &&
				    (vcpu->run->io.port == USER_PORT ||
				     vcpu->run->io.port == DIRTY_PORT),
				    "unexpected exit %s",
				    exit_reason_str(vcpu->run->exit_reason));
			if (vcpu->run->io.port == DIRTY_PORT && vcpu->vm->dirty_ring_size)
				collect_dirty_ring(vcpu);
			else if (vcpu->run->io.port == DIRTY_PORT)
				collect_dirty_log(vcpu->vm);
			user_pio++;
			break;
		default:
			TEST_FAIL("unexpected ucall");
		}
	}
}

static double elapsed_ns(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1e9 + (b->tv_nsec - a->tv_nsec);
}

/*
 * One row of the table asi_exits_print_header() heads. The callers count
 * @exits and the CR3 writes per exit, @cr3, each its own way
 * (asi_exits_print_phase_row() drops the sync's own exit to user space).
 */
void asi_exits_print_row(const char *name, const uint64_t *d, double exits, double cr3)
{
	printf("# %-12s %8lu %8lu %8lu %8lu %8lu %8lu %8lu %10.2f %10.3f %6lu\n",
	       name, d[S_EXITS], d[S_ENTERS], d[S_OWNER], d[S_SCHED], d[S_FALLBACK_EXITS],
	       d[S_IRQ], d[S_FLUSHES], exits ? 1000.0 * d[S_FALLBACKS] / exits : 0.0,
	       cr3, d[S_LATE]);
}

/*
 * Run the vCPU to its next GUEST_SYNC (left in *@uc), timed: the deltas of
 * its statistics in @d, the time in *@ns. Returns
 * asi_exits_run_to_sync()'s exits to user space.
 */
uint64_t asi_exits_run_timed(struct kvm_vcpu *vcpu, struct vcpu_stats *r,
			     struct ucall *uc, uint64_t *d, double *ns)
{
	uint64_t before[NR_STATS], after[NR_STATS], user_pio;
	struct timespec t0, t1;
	int i;

	vcpu_stats_read(r, before);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	user_pio = asi_exits_run_to_sync(vcpu, uc);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	vcpu_stats_read(r, after);
	for (i = 0; i < NR_STATS; i++)
		d[i] = after[i] - before[i];
	*ns = elapsed_ns(&t0, &t1);
	return user_pio;
}

/*
 * asi_exits_print_row() for a phase run by asi_exits_run_timed(): the
 * sync's own exit to user space is in the deltas, and dropped. Returns
 * the phase's exits.
 */
double asi_exits_print_phase_row(const char *name, const uint64_t *d)
{
	double exits = d[S_EXITS] ? d[S_EXITS] - 1 : 0;

	asi_exits_print_row(name, d, exits, exits && d[S_ENTERS] ?
			    (double)(2 * d[S_ENTERS] - 2) / exits : 0.0);
	return exits;
}

/*
 * Nested page tables for L2 that map L1's first 4 GiB (every page the
 * test's guest uses) one to one, with 1 GiB pages: a PML4 and a PDPT.
 * Returns the PML4's guest physical address.
 */
static uint64_t nested_npt_setup(struct kvm_vm *vm)
{
	vm_vaddr_t pml4 = vm_vaddr_alloc_page(vm);
	vm_vaddr_t pdpt = vm_vaddr_alloc_page(vm);
	uint64_t *pml4e = addr_gva2hva(vm, pml4);
	uint64_t *pdpte = addr_gva2hva(vm, pdpt);
	/* Nested paging treats every access as a user access. */
	uint64_t flags = PTE_PRESENT_MASK | PTE_WRITABLE_MASK | PTE_USER_MASK;
	int i;

	pml4e[0] = addr_gva2gpa(vm, pdpt) | flags;
	for (i = 0; i < 4; i++)
		pdpte[i] = ((uint64_t)i << 30) | flags | PTE_LARGE_MASK;
	return addr_gva2gpa(vm, pml4);
}

/**
 * asi_exits_vm_create() - the VM of asi_exits_guest_code()
 * @vcpu: its one vCPU
 * @efd: the eventfd of its ioeventfd (IOEVENTFD_GPA), to read its count
 *
 * With the self-IPI handler, the TSC-deadline timer, the IOAPIC, the xAPIC
 * page and the ioeventfd's page mapped, and the dirty-logged memslot.
 */
struct kvm_vm *asi_exits_vm_create(struct kvm_vcpu **vcpu, int *efd)
{
	struct kvm_ioeventfd ioeventfd = { .addr = IOEVENTFD_GPA, .len = 4 };
	struct kvm_vm *vm;

	vm = vm_create_with_one_vcpu(vcpu, asi_exits_guest_code);
	vm_install_exception_handler(vm, SELF_IPI_VECTOR, asi_exits_guest_irq_handler);
	/* KVM offers the TSC-deadline mode only where CPUID says so. */
	vcpu_set_cpuid_feature(*vcpu, X86_FEATURE_TSC_DEADLINE_TIMER);
	virt_map(vm, IOAPIC_GPA, IOAPIC_GPA, 1);
	virt_map(vm, APIC_DEFAULT_GPA, APIC_DEFAULT_GPA, 1);
	virt_map(vm, IOEVENTFD_GPA, IOEVENTFD_GPA, 1);
	*efd = eventfd(0, EFD_NONBLOCK);
	TEST_ASSERT(*efd >= 0, "eventfd");
	ioeventfd.fd = *efd;
	vm_ioctl(vm, KVM_IOEVENTFD, &ioeventfd);
	vm_userspace_mem_region_add(vm, VM_MEM_SRC_ANONYMOUS, DIRTY_GPA, DIRTY_SLOT,
				    DIRTY_PAGES, KVM_MEM_LOG_DIRTY_PAGES);
	virt_map(vm, DIRTY_GPA, DIRTY_GPA, DIRTY_PAGES);
	return vm;
}

/**
 * asi_exits_dirty_ring_vm_create() - the VM of asi_exits_guest_dirty_ring()
 * @vcpu: its one vCPU
 *
 * With the dirty ring (KVM_CAP_DIRTY_LOG_RING, set up before the vCPU) and
 * the dirty-logged memslot. The caller checks that KVM has the ring.
 */
struct kvm_vm *asi_exits_dirty_ring_vm_create(struct kvm_vcpu **vcpu)
{
	struct kvm_vm *vm = vm_create(1);

	vm_enable_dirty_ring(vm, DIRTY_RING_ENTRIES * sizeof(struct kvm_dirty_gfn));
	*vcpu = vm_vcpu_add(vm, 0, asi_exits_guest_dirty_ring);
	vm_userspace_mem_region_add(vm, VM_MEM_SRC_ANONYMOUS, DIRTY_GPA, DIRTY_SLOT,
				    DIRTY_PAGES, KVM_MEM_LOG_DIRTY_PAGES);
	virt_map(vm, DIRTY_GPA, DIRTY_GPA, DIRTY_PAGES);
	return vm;
}

/**
 * asi_exits_nested_vm_create() - the VM of asi_exits_guest_nested()
 * @vcpu: its one vCPU
 * @npt: set if KVM offers nested paging, so that the npt_ phases run
 *
 * SVM only: the caller checks that KVM offers its guests SVM.
 */
struct kvm_vm *asi_exits_nested_vm_create(struct kvm_vcpu **vcpu, bool *npt)
{
	vm_vaddr_t svm_gva;
	struct kvm_vm *vm;

	vm = vm_create_with_one_vcpu(vcpu, asi_exits_guest_nested);
	vcpu_alloc_svm(vm, &svm_gva);
	*npt = kvm_cpu_has(X86_FEATURE_NPT);
	vcpu_args_set(*vcpu, 2, svm_gva, *npt ? nested_npt_setup(vm) : 0);
	return vm;
}

/**
 * asi_exits_not_exercised() - why a phase did not run the exit it names
 * @p: the phase
 * @d: its statistics' deltas (asi_exits_run_timed())
 * @shadow: KVM shadows the guest's page tables (npt=0, ept=0)
 * @pml: KVM logs dirty pages with PML (VMX)
 *
 * PAUSE exits only where the CPU intercepts it without a filter: QEMU's
 * TCG does not intercept it, and SVM's pause filter (VMX's PAUSE-loop
 * exiting) lets only long spins exit. VMX lets the guest own CR4.PGE. PML
 * logs the dirty_log phase's writes without faults. Nested paging does
 * not intercept INVLPG and CR3 writes.
 *
 * Return: NULL if it did, else the reason, to print.
 */
const char *asi_exits_not_exercised(enum phase p, const uint64_t *d, bool shadow, bool pml)
{
	if (p == PHASE_PAUSE && d[S_EXITS] < ITERATIONS)
		return "fewer exits than PAUSEs: filtered or not intercepted";
	if (p == PHASE_CR4 && d[S_EXITS] < ITERATIONS)
		return "fewer exits than writes: the guest owns CR4.PGE";
	if (p == PHASE_DIRTY_LOG && pml)
		return "PML logs the writes without faults";
	if ((p == PHASE_INVLPG || p == PHASE_CR3) && !shadow)
		return "nested paging does not intercept it";
	return NULL;
}

/* The table asi_exits_print_row() fills, as "#" lines. */
void asi_exits_print_header(void)
{
	printf("# %-12s %8s %8s %8s %8s %8s %8s %8s %10s %10s %6s\n", "exit", "exits",
	       "enters", "owner", "sched", "fallback", "irq", "flushes", "fb/1000",
	       "cr3/exit", "late");
}
