// SPDX-License-Identifier: GPL-2.0
/*
 * asi_exits_test: the cost of Address Space Isolation per VM exit.
 *
 * The guest runs each common exit type thousands of times, after a
 * warm-up; between the phases it syncs with the host, which reads the
 * vCPU's ASI statistics (KVM_GET_STATS_FD) and prints, per exit type,
 * fallback faults per 1,000 exits and switches of CR3 (into and out of
 * the restricted table) per exit.
 *
 * With asi=on it checks that every phase ran on the restricted table, that
 * an exit to user space costs exactly one switch out and one back in,
 * and that the exits listed as fault-free in Documentation/arch/x86/asi.rst
 * take no fallback fault. With ASI off (or compiled out) every ASI
 * statistic must stay 0.
 *
 * Each phase is timed on the host (CLOCK_MONOTONIC around the phase's
 * KVM_RUN calls) and printed as a "bench:" line with the counters, for
 * benchmarks/ to collect; under QEMU's -icount the clock counts emulated
 * instructions. A last phase runs a CPU-bound loop with no exits as the
 * control.
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
 * guest, which KVM kicks out of guest mode. Neither vCPU may take a
 * fallback fault, but the sender when it wakes a vCPU that blocked.
 *
 * Last, a nested guest (SVM, run_nested()): L2's CPUIDs, which KVM
 * handles for L2 itself, and round trips through L1 (nested VM-exits,
 * VMRUN, VMLOAD, VMSAVE) must be fault-free, with L2 on L1's page tables
 * and again with nested paging for L2 (where KVM offers it).
 * Once L1 turned EFER.SVME on, the domain maps vmcb02 and the nested MSR
 * permission map, once each, with EFER.SVME turned off and on again too.
 */
#include <pthread.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apic.h"
#include "asi.h"
#include "kvm_util.h"
#include "processor.h"
#include "svm_util.h"
#include "test_util.h"

#define WARMUP		200
#define ITERATIONS	5000
#define COMPUTE_LOOPS	20000000	/* the control: no exits */
/*
 * Fallback faults of the sync itself, which the deltas include: GUEST_SYNC
 * is a PIO exit to user space, fault-free like the others.
 */
#define SYNC_FALLBACKS	0

#define IOAPIC_GPA	0xfec00000ULL
/*
 * The xAPIC page: with the LAPIC in x2APIC mode, KVM's LAPIC device answers
 * reads of it in the kernel (all ones: KVM_X86_QUIRK_LAPIC_MMIO_HOLE).
 */
#define XAPIC_VERSION_GPA	(APIC_DEFAULT_GPA + APIC_LVR)
#define USER_PORT	0x80	/* no in-kernel device: KVM_EXIT_IO */
#define SELF_IPI_VECTOR	0xf1
#define PIC_PORT	0x21	/* the in-kernel PIC */
/* The dirty-logged memslot, and the port where the host collects its log. */
#define DIRTY_GPA	0xc0000000ULL
#define DIRTY_SLOT	10
#define DIRTY_PAGES	64
#define DIRTY_PORT	0x81
kvm_static_assert(DIRTY_PAGES % 64 == 0);	/* the log is read in 64-bit words */
/* An MMIO address with an ioeventfd, as a virtio-mmio queue's notify register. */
#define IOEVENTFD_GPA	0xfeb00000ULL
/* A TSC deadline that never comes within the test: each write re-arms. */
#define TSC_DEADLINE_AHEAD	BIT_ULL(40)

enum phase {
	PHASE_CPUID,
	PHASE_MSR_READ,
	PHASE_MSR_WRITE,
	PHASE_PIO_KERNEL,
	PHASE_MMIO_KERNEL,
	PHASE_MMIO_WALK,
	PHASE_PIO_USER,
	PHASE_DIRTY_LOG,
	PHASE_IRQ_WINDOW,
	PHASE_PAUSE,
	PHASE_HLT,
	PHASE_INVLPG,
	PHASE_CR3,
	PHASE_CR4,
	PHASE_TSC_DEADLINE,
	PHASE_IOEVENTFD,
	NR_PHASES,
};

static const struct {
	const char *name;
	/* Must take no fallback fault after the warm-up (asi=on). */
	bool fault_free;
	/* Goes out to user space on every iteration. */
	bool user;
} phases[NR_PHASES] = {
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

static void guest_irq_handler(struct ex_regs *regs)
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
#define HALT_WARMUP	100
#define HALT_ROUNDS	2000

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
 * vCPU run under QEMU's single-threaded TCG; run_ipi_pair() turns PAUSE
 * exits off for the VM, so that a pause filter does not send the spinning
 * vCPU to kvm_vcpu_on_spin(), which yields through the scheduler.
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

/* vCPU 1 of run_ipi_pair(): takes the waker's IPIs, halting or running. */
static void guest_ipi_target(bool halt)
{
	x2apic_enable();
	guest_wait_irqs(HALT_WARMUP, halt);
	GUEST_SYNC(0);
	guest_wait_irqs(HALT_WARMUP + HALT_ROUNDS, halt);
	GUEST_SYNC(1);
	GUEST_DONE();
}

static void guest_halter(void)
{
	guest_ipi_target(true);
}

static void guest_spinner(void)
{
	guest_ipi_target(false);
}

/*
 * Counts the halter's interrupts, not its IPIs: one may be taken twice
 * (TCG, see check_ipis()). Waits with PAUSE, as guest_wait_irqs() does.
 */
static void guest_waker(void)
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
static void guest_nested(struct svm_test_data *svm, uint64_t npt_gpa)
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
static void guest_dirty_ring(void)
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

static void guest_code(void)
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

/* The ASI statistics of a vCPU, by their KVM_GET_STATS_FD names. */
static const char * const stat_names[] = {
	"exits", "asi_enters", "asi_exits_owner", "asi_exits_sched",
	"asi_exits_fallback", "asi_exits_interrupt", "asi_exits_user",
	"asi_fallbacks", "asi_flushes", "asi_flushes_skipped", "asi_late_fallbacks",
	"halt_exits", "irq_window_exits", "halt_attempted_poll",
	"halt_successful_poll", "halt_wakeup", "pf_fast", "pf_fixed",
	"nested_run", "asi_smt_waits", "asi_smt_kicks",
	"asi_exits_planned_timer", "asi_exits_planned_ioeventfd",
	"asi_exits_planned_faultin",
};

enum {
	S_EXITS, S_ENTERS, S_OWNER, S_SCHED, S_FALLBACK_EXITS, S_IRQ, S_USER, S_FALLBACKS,
	S_FLUSHES, S_SKIPPED, S_LATE, S_HALT, S_IRQ_WINDOW, S_POLLS,
	S_POLLED, S_WAKEUPS, S_PF_FAST, S_PF_FIXED, S_NESTED_RUN, S_SMT_WAITS,
	S_SMT_KICKS, S_TIMER, S_IOEVENTFD, S_FAULTIN, NR_STATS
};

/*
 * With APICv (AVIC), interrupts are delivered without interrupt-window
 * exits, and IPIs to a running vCPU without a kick: the checks on those
 * exit counts do not apply. QEMU's TCG has neither. The vendor module is
 * the one of this CPU's virtualization extension: with KVM built in, the
 * other one's parameters exist too.
 */
static bool apicv_on(void)
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
static bool pml_on(void)
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
static uint64_t run_to_sync(struct kvm_vcpu *vcpu, struct ucall *uc)
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
		printf("note: %s: %lu interrupts taken for %d IPIs, %lu before the HLT\n",
		       phases[p].name, taken, ITERATIONS, early);
	TEST_ASSERT(taken >= ITERATIONS, "%s: %lu interrupts taken for %d IPIs",
		    phases[p].name, taken, ITERATIONS);
	if (p == PHASE_HLT)
		TEST_ASSERT(named + early == ITERATIONS,
			    "%s: %lu halt exits for %d HLTs, %lu skipped", phases[p].name,
			    named, ITERATIONS, early);
	if (p == PHASE_IRQ_WINDOW && apicv) {
		printf("SKIP %s: %lu interrupt-window exits: APICv/AVIC delivers without them\n",
		       phases[p].name, named);
		return;
	}
	TEST_ASSERT(named >= ITERATIONS - ITERATIONS / 100,
		    "%s: %lu %s exits for %d iterations", phases[p].name, named,
		    p == PHASE_HLT ? "halt" : "interrupt-window", ITERATIONS);
}

/*
 * The dirty-logging phase: one collection per round of DIRTY_PAGES writes,
 * and each write after a collection a page fault (but the WARMUP %
 * DIRTY_PAGES pages that the warm-up left writable), which the TDP MMU
 * fixes in its fast path, the shadow MMU (which has none) in its page
 * fault handler. Not with PML: see pml_on().
 */
static void check_dirty_log(uint64_t user_pio, const uint64_t *d, bool shadow)
{
	TEST_ASSERT(user_pio == ITERATIONS / DIRTY_PAGES,
		    "dirty_log: %lu collections for %d writes", user_pio, ITERATIONS);
	if (shadow)
		TEST_ASSERT(d[S_PF_FIXED] >= ITERATIONS - DIRTY_PAGES,
			    "dirty_log: %lu page faults fixed for %d writes",
			    d[S_PF_FIXED], ITERATIONS);
	else
		TEST_ASSERT(d[S_PF_FAST] >= ITERATIONS - DIRTY_PAGES,
			    "dirty_log: %lu fast page faults for %d writes",
			    d[S_PF_FAST], ITERATIONS);
}

static double elapsed_ns(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) * 1e9 + (b->tv_nsec - a->tv_nsec);
}

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

/* Ranges the VM's domain maps for @owner now (asi/mappings). */
static int vm_asi_mapped(struct kvm_vm *vm, const char *owner)
{
	FILE *f = vm_asi_fopen(vm, "mappings", "r");
	char line[256];
	int n = 0, at;

	TEST_ASSERT(f, "ASI on, but no asi/mappings for the VM");
	/* "start-end pages class owner" */
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		at = -1;
		if (sscanf(line, "%*s %*s %*s %n", &at) != EOF && at > 0 &&
		    !strcmp(line + at, owner))
			n++;
	}
	fclose(f);
	return n;
}

/* The VM's fault log (asi/faults) as it is now, or NULL. */
static char *read_faults(struct kvm_vm *vm)
{
	char *log = NULL;
	size_t len = 0;
	FILE *f, *m;
	int c;

	f = vm_asi_fopen(vm, "faults", "r");
	if (!f)
		return NULL;
	m = open_memstream(&log, &len);
	TEST_ASSERT(m, "open_memstream");
	while ((c = fgetc(f)) != EOF)
		fputc(c, m);
	fclose(m);
	fclose(f);
	return log;
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
	printf("MMU pool: %lu pages, %lu free, %lu misses\n", pages, free, misses);
	TEST_ASSERT(pages > free, "no MMU page from the VM's pool in use");
	TEST_ASSERT(allow_misses || !misses,
		    "%lu MMU page allocations the VM's pool could not serve", misses);
}

/*
 * One row of the table main() heads. The callers count @exits and the
 * CR3 writes per exit, @cr3, each its own way (main() drops the sync's
 * own exit to user space).
 */
static void print_row(const char *name, const uint64_t *d, double exits, double cr3)
{
	printf("%-12s %8lu %8lu %8lu %8lu %8lu %8lu %8lu %10.2f %10.3f %6lu\n",
	       name, d[S_EXITS], d[S_ENTERS], d[S_OWNER], d[S_SCHED], d[S_FALLBACK_EXITS],
	       d[S_IRQ], d[S_FLUSHES], exits ? 1000.0 * d[S_FALLBACKS] / exits : 0.0,
	       cr3, d[S_LATE]);
}

/*
 * Run the vCPU to its next GUEST_SYNC (left in *@uc), timed: the deltas of
 * its statistics in @d, the time in *@ns. Returns run_to_sync()'s exits to
 * user space.
 */
static uint64_t run_timed(struct kvm_vcpu *vcpu, struct vcpu_stats *r,
			  struct ucall *uc, uint64_t *d, double *ns)
{
	uint64_t before[NR_STATS], after[NR_STATS], user_pio;
	struct timespec t0, t1;
	int i;

	vcpu_stats_read(r, before);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	user_pio = run_to_sync(vcpu, uc);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	vcpu_stats_read(r, after);
	for (i = 0; i < NR_STATS; i++)
		d[i] = after[i] - before[i];
	*ns = elapsed_ns(&t0, &t1);
	return user_pio;
}

/*
 * print_row() for a phase run by run_timed(): the sync's own exit to user
 * space is in the deltas, and dropped. Returns the phase's exits.
 */
static double print_phase_row(const char *name, const uint64_t *d)
{
	double exits = d[S_EXITS] ? d[S_EXITS] - 1 : 0;

	print_row(name, d, exits, exits && d[S_ENTERS] ?
		  (double)(2 * d[S_ENTERS] - 2) / exits : 0.0);
	return exits;
}

/* With ASI off (or compiled out) no ASI statistic of @name moves. */
/* Switches off the restricted table, by every reason KVM counts. */
static uint64_t table_leaves(const uint64_t *d)
{
	return d[S_OWNER] + d[S_SCHED] + d[S_FALLBACK_EXITS] + d[S_IRQ] + d[S_USER] +
	       d[S_TIMER] + d[S_IOEVENTFD] + d[S_FAULTIN];
}

static void check_asi_off(const char *name, const uint64_t *d)
{
	int i;

	for (i = S_ENTERS; i < NR_STATS; i++)
		TEST_ASSERT(!d[i] || (i > S_LATE && i < S_SMT_WAITS),
			    "ASI off, but %s's %s moved by %lu", name, stat_names[i], d[i]);
}

/*
 * Nothing falls back between the flush decision and the return of the
 * VM-entry code, but NMIs sent on purpose (VMX takes them in that window).
 */
static void check_no_late(const char *name, const uint64_t *d, bool allow_fallbacks)
{
	TEST_ASSERT(allow_fallbacks || !d[S_LATE],
		    "%s: %lu late fallbacks (after the flush decision)",
		    name, d[S_LATE]);
}

static void print_faults(const char *when, const char *log)
{
	printf("VM fault log %s:\n%s", when, log ? log : "  (not readable)\n");
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

	run_to_sync(h->vcpu, &uc);		/* the warm-up */
	vcpu_stats_read(&h->r, h->before);
	run_to_sync(h->vcpu, &uc);
	vcpu_stats_read(&h->r, h->after);
	vcpu_run(h->vcpu);
	TEST_ASSERT(get_ucall(h->vcpu, &uc) == UCALL_DONE, "%s did not finish", h->name);
	return NULL;
}

/*
 * IPIs between two vCPUs, in a VM of their own: vCPU 0 (guest_waker())
 * sends vCPU 1 an IPI and waits for its handler, round after round.
 *
 * With @halt, vCPU 1 halts in between (guest_halter()): a HLT that
 * halt-polls or blocks. KVM leaves the domain before it does
 * (vcpu_block()), so the halting vCPU must take no fallback fault. The
 * sender's wakeup of a vCPU that blocked runs the scheduler's
 * try_to_wake_up(), which no domain maps: at most one fallback per such
 * wakeup (halt_wakeup), with a little slack for the two vCPUs' windows.
 *
 * Without, vCPU 1 spins in the guest (guest_spinner()) and each IPI kicks
 * its CPU out of guest mode with a host IPI: neither vCPU may fall back.
 *
 * Returns false on a failed check that does not stop the test at once.
 */
static bool run_ipi_pair(bool halt, bool on, bool apicv, bool allow_fallbacks)
{
	struct halt_vcpu h[2] = {
		{ .name = halt ? "hlt_wake" : "ipi_send" },
		{ .name = halt ? "hlt_block" : "ipi_run" },
	};
	const char *name = h[1].name;
	uint64_t d[2][NR_STATS];
	struct kvm_vm *vm;
	bool ok = true;
	int i, j;

	vm = vm_create(2);
	if (kvm_check_cap(KVM_CAP_X86_DISABLE_EXITS) & KVM_X86_DISABLE_EXITS_PAUSE)
		vm_enable_cap(vm, KVM_CAP_X86_DISABLE_EXITS, KVM_X86_DISABLE_EXITS_PAUSE);
	h[0].vcpu = vm_vcpu_add(vm, 0, guest_waker);
	h[1].vcpu = vm_vcpu_add(vm, 1, halt ? guest_halter : guest_spinner);
	vm_install_exception_handler(vm, SELF_IPI_VECTOR, guest_irq_handler);
	for (i = 0; i < 2; i++) {
		vcpu_stats_open(&h[i].r, h[i].vcpu, stat_names, NR_STATS);
		TEST_ASSERT(!pthread_create(&h[i].thread, NULL, halt_vcpu_thread, &h[i]),
			    "pthread_create");
	}
	for (i = 0; i < 2; i++) {
		pthread_join(h[i].thread, NULL);
		for (j = 0; j < NR_STATS; j++)
			d[i][j] = h[i].after[j] - h[i].before[j];
		print_row(h[i].name, d[i], d[i][S_EXITS],
			  d[i][S_EXITS] ? 2.0 * d[i][S_ENTERS] / d[i][S_EXITS] : 0.0);
	}
	printf("%s: %lu halt exits for %d IPIs; %lu halt-polls (%lu successful); %lu wakeups\n",
	       name, d[1][S_HALT], HALT_ROUNDS, d[1][S_POLLS], d[1][S_POLLED],
	       d[1][S_WAKEUPS]);
	for (i = 0; i < 2; i++)
		check_no_late(h[i].name, d[i], allow_fallbacks);

	/* Each round halts, but where its IPI came before the HLT (TCG). */
	if (halt)
		TEST_ASSERT(d[1][S_HALT] >= HALT_ROUNDS - HALT_ROUNDS / 100,
			    "%s: %lu halt exits for %d rounds", name, d[1][S_HALT],
			    HALT_ROUNDS);
	else
		TEST_ASSERT(!d[1][S_HALT], "%s: %lu halt exits", name, d[1][S_HALT]);
	/* Each IPI kicked the running vCPU out of the guest (no APICv). */
	if (!halt && !apicv)
		TEST_ASSERT(d[1][S_EXITS] >= HALT_ROUNDS,
			    "%s: %lu exits for %d IPIs", name, d[1][S_EXITS], HALT_ROUNDS);
	if (!on) {
		for (i = 0; i < 2; i++)
			check_asi_off(h[i].name, d[i]);
	} else {
		uint64_t wakeups = halt ? d[1][S_WAKEUPS] + 2 : 0;

		if (d[1][S_FALLBACKS] && !allow_fallbacks) {
			printf("FAIL: %s: %lu fallback faults in %lu exits\n",
			       name, d[1][S_FALLBACKS], d[1][S_EXITS]);
			ok = false;
		}
		if (d[0][S_FALLBACKS] > wakeups && !allow_fallbacks) {
			printf("FAIL: %s: %lu fallback faults in %lu exits, %lu wakeups\n",
			       h[0].name, d[0][S_FALLBACKS], d[0][S_EXITS], d[1][S_WAKEUPS]);
			ok = false;
		}
		if (d[0][S_FALLBACKS] || d[1][S_FALLBACKS]) {
			char *faults = read_faults(vm);

			print_faults("of the two-vCPU VM", faults);
			free(faults);
		}
		/*
		 * Every halt that polls or blocks leaves the table first, as a
		 * schedule-out, but where an interrupt or a fallback (allowed
		 * with ASI_EXITS_ALLOW_FALLBACKS) had left it already.
		 */
		if (halt)
			TEST_ASSERT(d[1][S_SCHED] + d[1][S_IRQ] + d[1][S_FALLBACK_EXITS] +
				    d[1][S_USER] >= d[1][S_POLLS],
				    "%s: %lu schedule-outs for %lu halt-polls",
				    name, d[1][S_SCHED], d[1][S_POLLS]);
	}
	for (i = 0; i < 2; i++)
		vcpu_stats_close(&h[i].r);
	kvm_vm_free(vm);
	return ok;
}

/*
 * The nested guest's phases (guest_nested()), each after a warm-up, both
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
static const struct {
	const char *name;
	int trips;		/* round trips through L1 */
	int l2_exits;		/* exits L0 handles for L2, at least */
	bool npt;		/* L2 with nested paging (L1's NPT, shadowed) */
} nested_phases[] = {
	{ "nested_cpuid",	1,		ITERATIONS,	false },
	{ "nested_vmmcall",	ITERATIONS,	ITERATIONS,	false },
	{ "npt_cpuid",		1,		ITERATIONS,	true },
	{ "npt_vmmcall",	ITERATIONS,	ITERATIONS,	true },
};

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

	printf("nested: %s: mapped: vmcb02 %d, nested MSR permission map %d, L1 VMCB copy %d\n",
	       when, vmcb02, msrpm, copy);
	TEST_ASSERT(vmcb02 == 1 && msrpm == 1 && copy == 1,
		    "nested: %s: %d mappings of vmcb02, %d of the nested MSR permission map, %d of the L1 VMCB copy",
		    when, vmcb02, msrpm, copy);
}

/*
 * Runs the nested guest's phases; SVM only: nested VMX is not run here
 * (no VMX under QEMU's TCG). Returns false on a failed check that does not
 * stop the test at once.
 */
static bool run_nested(bool on, bool allow_fallbacks)
{
	struct vcpu_stats r = { };
	uint64_t d[NR_STATS];
	struct kvm_vcpu *vcpu;
	vm_vaddr_t svm_gva;
	struct kvm_vm *vm;
	struct ucall uc;
	bool ok = true;
	bool npt;
	int p;

	if (!kvm_cpu_has(X86_FEATURE_SVM)) {
		printf("SKIP nested: KVM offers its guests no SVM\n");
		return true;
	}
	vm = vm_create_with_one_vcpu(&vcpu, guest_nested);
	vcpu_alloc_svm(vm, &svm_gva);
	npt = kvm_cpu_has(X86_FEATURE_NPT);
	vcpu_args_set(vcpu, 2, svm_gva, npt ? nested_npt_setup(vm) : 0);
	vcpu_stats_open(&r, vcpu, stat_names, NR_STATS);

	for (p = 0; p < ARRAY_SIZE(nested_phases); p++) {
		const char *name = nested_phases[p].name;
		uint64_t trips = nested_phases[p].trips, leaves;
		double exits, ns;

		if (nested_phases[p].npt && !npt) {
			printf("SKIP %s: KVM offers its guests no nested paging\n", name);
			continue;
		}

		run_to_sync(vcpu, &uc);		/* the warm-up */
		run_timed(vcpu, &r, &uc, d, &ns);
		exits = print_phase_row(name, d);
		print_bench(name, ns / ITERATIONS, d);
		printf("%s: %lu exits, %lu nested VMRUNs for %lu round trips through L1\n",
		       name, d[S_EXITS], d[S_NESTED_RUN], trips);
		TEST_ASSERT(d[S_NESTED_RUN] == trips, "%s: %lu nested VMRUNs for %lu",
			    name, d[S_NESTED_RUN], trips);
		/* L2's exits, and L1's VMRUNs. */
		TEST_ASSERT(d[S_EXITS] >= nested_phases[p].l2_exits + trips,
			    "%s: %lu exits", name, d[S_EXITS]);

		if (!on) {
			check_asi_off(name, d);
			continue;
		}
		/*
		 * Every VM-entry, into L2 as into L1, runs on the restricted
		 * table (kvm_asi_flush_decide() flushes or skips the flush),
		 * nothing falls back after the decision, and the syncs find
		 * the vCPU off it, as in main().
		 */
		check_no_late(name, d, allow_fallbacks);
		TEST_ASSERT(d[S_FLUSHES] + d[S_SKIPPED] >= exits,
			    "%s: %lu flushes, %lu skipped for %.0f exits", name,
			    d[S_FLUSHES], d[S_SKIPPED], exits);
		TEST_ASSERT(d[S_FLUSHES] <= d[S_ENTERS] || asi_smt_protocol_on(),
			    "%s: %lu flushes for %lu entries", name, d[S_FLUSHES], d[S_ENTERS]);
		leaves = table_leaves(d);
		TEST_ASSERT(d[S_ENTERS] == leaves, "%s: %lu switches onto the table, %lu off it",
			    name, d[S_ENTERS], leaves);
		if (d[S_FALLBACKS] && !allow_fallbacks) {
			char *faults = read_faults(vm);

			printf("FAIL: %s: %lu fallback faults in %lu exits\n", name,
			       d[S_FALLBACKS], d[S_EXITS]);
			print_faults("of the nested VM", faults);
			free(faults);
			ok = false;
		}
	}

	if (on)
		check_nested_mapped(vm, "SVM on in L1");
	run_to_sync(vcpu, &uc);			/* L1 turns SVM off */
	if (on)
		check_nested_mapped(vm, "SVM off in L1");
	run_to_sync(vcpu, &uc);			/* and on again */
	if (on)
		check_nested_mapped(vm, "SVM on again");
	vcpu_run(vcpu);
	TEST_ASSERT(get_ucall(vcpu, &uc) == UCALL_DONE, "nested guest did not finish");
	vcpu_stats_close(&r);
	kvm_vm_free(vm);
	return ok;
}

/*
 * The dirty_log phase with the dirty ring (KVM_CAP_DIRTY_LOG_RING) in
 * place of the bitmap, in a VM of its own (the ring is set up before the
 * vCPU): every write after a harvest is a page fault KVM fixes in its fast
 * path, which pushes the page to the vCPU's ring. Fault-free, but with
 * shadow paging (see main()'s dirty_log phase). Not run with PML (VMX),
 * where KVM pushes the pages when it empties the PML buffer at VM-exit:
 * untested here, and the buffer is not mapped.
 *
 * Returns false on a failed check that does not stop the test at once.
 */
static bool run_dirty_ring(bool on, bool shadow, bool pml, bool allow_fallbacks)
{
	const char *name = "dirty_ring";
	uint64_t d[NR_STATS], user_pio;
	struct vcpu_stats r = { };
	struct kvm_vcpu *vcpu;
	struct kvm_vm *vm;
	struct ucall uc;
	double ns;
	bool ok = true;
	int i;

	if (!kvm_has_cap(KVM_CAP_DIRTY_LOG_RING) &&
	    !kvm_has_cap(KVM_CAP_DIRTY_LOG_RING_ACQ_REL)) {
		printf("SKIP %s: no KVM_CAP_DIRTY_LOG_RING\n", name);
		return true;
	}
	if (pml) {
		printf("SKIP %s: PML logs the writes without faults\n", name);
		return true;
	}
	vm = vm_create(1);
	vm_enable_dirty_ring(vm, DIRTY_RING_ENTRIES * sizeof(struct kvm_dirty_gfn));
	vcpu = vm_vcpu_add(vm, 0, guest_dirty_ring);
	vm_userspace_mem_region_add(vm, VM_MEM_SRC_ANONYMOUS, DIRTY_GPA, DIRTY_SLOT,
				    DIRTY_PAGES, KVM_MEM_LOG_DIRTY_PAGES);
	virt_map(vm, DIRTY_GPA, DIRTY_GPA, DIRTY_PAGES);
	vcpu_stats_open(&r, vcpu, stat_names, NR_STATS);

	run_to_sync(vcpu, &uc);			/* the warm-up */
	user_pio = run_timed(vcpu, &r, &uc, d, &ns);
	print_phase_row(name, d);
	print_bench(name, ns / ITERATIONS, d);
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
		TEST_ASSERT(i == 1, "%s: the ring mapped %d times", name, i);
		TEST_ASSERT(__vm_ioctl(vm, KVM_CREATE_VCPU, (void *)0) < 0 && errno == EEXIST,
			    "%s: a second vCPU 0 was not refused with EEXIST", name);
		i = vm_asi_mapped(vm, "dirty ring");
		TEST_ASSERT(i == 1, "%s: %d rings mapped after a failed KVM_CREATE_VCPU",
			    name, i);
	}
	if (on && shadow) {
		printf("%s: %lu fallbacks in %d writes with shadow paging (not checked)\n",
		       name, d[S_FALLBACKS], ITERATIONS);
	} else if (on && d[S_FALLBACKS] > SYNC_FALLBACKS && !allow_fallbacks) {
		char *faults = read_faults(vm);

		printf("FAIL: %s: %lu fallback faults in %lu exits\n", name,
		       d[S_FALLBACKS], d[S_EXITS]);
		print_faults("of the dirty ring's VM", faults);
		free(faults);
		ok = false;
	}
	vcpu_run(vcpu);
	TEST_ASSERT(get_ucall(vcpu, &uc) == UCALL_DONE, "%s: guest did not finish", name);
	vcpu_stats_close(&r);
	kvm_vm_free(vm);
	return ok;
}

int main(void)
{
	bool on = asi_is_on(), apicv = apicv_on(), pml = pml_on(), failed = false;
	/* npt=0 or ept=0: KVM shadows the guest's page tables. */
	bool shadow = !kvm_is_tdp_enabled();
	/*
	 * For runs that cause fallbacks on purpose (NMIs sent at the vCPU by
	 * asi_nmi_storm.sh): every other check still applies.
	 */
	bool allow_fallbacks = !!getenv("ASI_EXITS_ALLOW_FALLBACKS");
	struct vcpu_stats r = { };
	struct kvm_ioeventfd ioeventfd = { .addr = IOEVENTFD_GPA, .len = 4 };
	uint64_t d[NR_STATS], signals;
	struct kvm_vcpu *vcpu;
	struct kvm_vm *vm;
	struct ucall uc;
	double ns;
	int p, efd;

	vm = vm_create_with_one_vcpu(&vcpu, guest_code);
	vm_install_exception_handler(vm, SELF_IPI_VECTOR, guest_irq_handler);
	/* KVM offers the TSC-deadline mode only where CPUID says so. */
	vcpu_set_cpuid_feature(vcpu, X86_FEATURE_TSC_DEADLINE_TIMER);
	virt_map(vm, IOAPIC_GPA, IOAPIC_GPA, 1);
	virt_map(vm, APIC_DEFAULT_GPA, APIC_DEFAULT_GPA, 1);
	virt_map(vm, IOEVENTFD_GPA, IOEVENTFD_GPA, 1);
	efd = eventfd(0, EFD_NONBLOCK);
	TEST_ASSERT(efd >= 0, "eventfd");
	ioeventfd.fd = efd;
	vm_ioctl(vm, KVM_IOEVENTFD, &ioeventfd);
	vm_userspace_mem_region_add(vm, VM_MEM_SRC_ANONYMOUS, DIRTY_GPA, DIRTY_SLOT,
				    DIRTY_PAGES, KVM_MEM_LOG_DIRTY_PAGES);
	virt_map(vm, DIRTY_GPA, DIRTY_GPA, DIRTY_PAGES);
	vcpu_stats_open(&r, vcpu, stat_names, NR_STATS);

	printf("ASI is %s, %s paging; %d iterations per exit type after %d of warm-up\n",
	       on ? "on" : "off", shadow ? "shadow" : "nested", ITERATIONS, WARMUP);
	printf("%-12s %8s %8s %8s %8s %8s %8s %8s %10s %10s %6s\n", "exit", "exits",
	       "enters", "owner", "sched", "fallback", "irq", "flushes", "fb/1000",
	       "cr3/exit", "late");

	for (p = 0; p < NR_PHASES; p++) {
		uint64_t user_pio, leaves;
		char *faults_before;

		run_to_sync(vcpu, &uc);			/* the warm-up */
		/* On a failure, the log before and after tells the phase's sites. */
		faults_before = on ? read_faults(vm) : NULL;
		user_pio = run_timed(vcpu, &r, &uc, d, &ns);
		print_phase_row(phases[p].name, d);

		/*
		 * PAUSE exits only where the CPU intercepts it without a
		 * filter: QEMU's TCG does not intercept it, and SVM's pause
		 * filter (VMX's PAUSE-loop exiting) lets only long spins exit.
		 * Such a phase timed PAUSEs, not exits: no "bench:" line.
		 */
		if (p == PHASE_PAUSE && d[S_EXITS] < ITERATIONS) {
			printf("SKIP %s: %lu exits for %d PAUSEs (filtered or not intercepted)\n",
			       phases[p].name, d[S_EXITS], ITERATIONS);
		} else if (p == PHASE_CR4 && d[S_EXITS] < ITERATIONS) {
			printf("SKIP %s: %lu exits for %d writes: the guest owns CR4.PGE\n",
			       phases[p].name, d[S_EXITS], ITERATIONS);
		} else if (p == PHASE_DIRTY_LOG && pml) {
			printf("SKIP %s: %lu exits for %d writes: PML logs them without faults\n",
			       phases[p].name, d[S_EXITS], ITERATIONS);
		} else if ((p == PHASE_INVLPG || p == PHASE_CR3) && !shadow) {
			printf("SKIP %s: %lu exits for %d: nested paging does not intercept it\n",
			       phases[p].name, d[S_EXITS], ITERATIONS);
		} else {
			print_bench(phases[p].name, ns / ITERATIONS, d);
			TEST_ASSERT(d[S_EXITS] >= ITERATIONS,
				    "%s: %lu exits for %d iterations", phases[p].name,
				    d[S_EXITS], ITERATIONS);
		}
		if (phases[p].user)
			TEST_ASSERT(user_pio == ITERATIONS, "%s: %lu exits to user space",
				    phases[p].name, user_pio);
		if (p == PHASE_HLT || p == PHASE_IRQ_WINDOW)
			check_ipis(p, &uc, d, apicv);
		if (p == PHASE_IOEVENTFD) {
			/* Every write signalled, the warm-up's too; none went to user space. */
			TEST_ASSERT(read(efd, &signals, sizeof(signals)) == sizeof(signals) &&
				    signals == WARMUP + ITERATIONS,
				    "%s: eventfd counted %lu of %d writes", phases[p].name,
				    signals, WARMUP + ITERATIONS);
			TEST_ASSERT(!user_pio, "%s: %lu exits to user space", phases[p].name,
				    user_pio);
		}
		if (p == PHASE_DIRTY_LOG && !pml)
			check_dirty_log(user_pio, d, shadow);

		if (!on) {
			check_asi_off(phases[p].name, d);
			continue;
		}

		/* Every VM-entry runs on the restricted table. */
		TEST_ASSERT(d[S_ENTERS] >= 1, "%s: never entered the restricted table",
			    phases[p].name);
		/*
		 * Both syncs find the vCPU off the table (KVM_RUN returned):
		 * every switch onto it in between was followed by one off it.
		 */
		leaves = table_leaves(d);
		TEST_ASSERT(d[S_ENTERS] == leaves, "%s: %lu switches onto the table, %lu off it",
			    phases[p].name, d[S_ENTERS], leaves);
		/*
		 * What needs the full table leaves as a planned exit, counted
		 * by its cause (an interrupt may have taken the CPU off the
		 * table first: then that exit is the interrupt's).
		 */
		if (p == PHASE_TSC_DEADLINE)
			TEST_ASSERT(d[S_TIMER] && d[S_TIMER] + d[S_IRQ] >= ITERATIONS,
				    "%s: %lu planned timer exits, %lu on interrupts, for %d writes",
				    phases[p].name, d[S_TIMER], d[S_IRQ], ITERATIONS);
		if (p == PHASE_IOEVENTFD)
			TEST_ASSERT(d[S_IOEVENTFD] && d[S_IOEVENTFD] + d[S_IRQ] >= ITERATIONS,
				    "%s: %lu planned ioeventfd exits, %lu on interrupts, for %d writes",
				    phases[p].name, d[S_IOEVENTFD], d[S_IRQ], ITERATIONS);
		/* Each exit to user space leaves the table, if not before. */
		if (phases[p].user)
			TEST_ASSERT(leaves >= user_pio + 1,
				    "%s: %lu switches off the table for %lu exits to user space",
				    phases[p].name, leaves, user_pio + 1);
		/*
		 * A flush decision per switch onto the table, but where the
		 * decision itself switched back onto it after a fallback
		 * since kvm_asi_enter() (the debug configuration's lockdep),
		 * and where SMT's gate entered the table for a VM-entry it
		 * then put off (smt_waits).
		 */
		TEST_ASSERT(d[S_FLUSHES] + d[S_SKIPPED] + d[S_FALLBACKS] + d[S_SMT_WAITS] >=
			    d[S_ENTERS],
			    "%s: %lu flushes, %lu skipped, %lu fallbacks, %lu SMT waits for %lu entries",
			    phases[p].name, d[S_FLUSHES], d[S_SKIPPED], d[S_FALLBACKS],
			    d[S_SMT_WAITS], d[S_ENTERS]);
		/* A flush only after the full table was used (or the sibling's). */
		TEST_ASSERT(d[S_FLUSHES] <= d[S_ENTERS] || asi_smt_protocol_on(),
			    "%s: %lu flushes for %lu entries", phases[p].name,
			    d[S_FLUSHES], d[S_ENTERS]);
		check_no_late(phases[p].name, d, allow_fallbacks);
		/*
		 * Exactly one switch out and one back in per exit to user
		 * space (and the sync's), but where a host interrupt had left
		 * the table first: that exit is the interrupt's.
		 */
		if (phases[p].user && phases[p].fault_free && !d[S_FALLBACKS] && !d[S_SCHED])
			TEST_ASSERT(d[S_OWNER] <= ITERATIONS + 1 &&
				    d[S_OWNER] + d[S_IRQ] >= ITERATIONS + 1 &&
				    d[S_ENTERS] == d[S_OWNER] + d[S_IRQ],
				    "%s: %lu switches out to user space, %lu on interrupts and %lu back in for %d exits",
				    phases[p].name, d[S_OWNER], d[S_IRQ], d[S_ENTERS], ITERATIONS);
		/*
		 * With shadow paging, every write after a collection resolves
		 * the page through get_user_pages(), which takes a reference
		 * on its struct page: guest memory's memory map is not mapped.
		 */
		if (p == PHASE_DIRTY_LOG && shadow) {
			printf("%s: %lu fallbacks in %d writes with shadow paging (not checked)\n",
			       phases[p].name, d[S_FALLBACKS], ITERATIONS);
		} else if (phases[p].fault_free && !allow_fallbacks &&
			   d[S_FALLBACKS] > SYNC_FALLBACKS) {
			char *faults_after = read_faults(vm);

			printf("FAIL: %s: %lu fallback faults in %d exits and the sync's\n",
			       phases[p].name, d[S_FALLBACKS], ITERATIONS);
			/* Each failing phase's: a new platform fails several. */
			print_faults("before the phase", faults_before);
			print_faults("after it", faults_after);
			free(faults_after);
			failed = true;
		}
		free(faults_before);
	}

	/* The control: a CPU-bound loop, timed like the phases. */
	run_to_sync(vcpu, &uc);
	run_timed(vcpu, &r, &uc, d, &ns);
	printf("compute: %d loops in %.1f ms with %lu exits\n", COMPUTE_LOOPS,
	       ns / 1e6, d[S_EXITS]);
	print_bench("compute", ns, d);

	vcpu_run(vcpu);
	TEST_ASSERT(get_ucall(vcpu, &uc) == UCALL_DONE, "guest did not finish");
	if (on)
		check_mmu_pool(vm, allow_fallbacks);
	vcpu_stats_close(&r);
	kvm_vm_free(vm);

	if (!run_ipi_pair(true, on, apicv, allow_fallbacks))
		failed = true;
	if (!run_ipi_pair(false, on, apicv, allow_fallbacks))
		failed = true;
	if (!run_dirty_ring(on, shadow, pml, allow_fallbacks))
		failed = true;
	if (!run_nested(on, allow_fallbacks))
		failed = true;
	TEST_ASSERT(!failed, "fallback faults on exits that must be fault-free");
	return 0;
}
