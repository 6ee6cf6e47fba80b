/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The exits workload of the Address Space Isolation (ASI) selftests
 * (lib/x86_64/asi_exits.c): a guest that runs each common exit type
 * thousands of times after a warm-up, syncing with the host between the
 * phases; guests for IPIs between two vCPUs, for the dirty ring and for
 * a nested guest (SVM); and the host's side, which runs them and reads
 * the vCPU's statistics around each phase. asi_exits_test checks what the
 * exits do, asi_exits_perf_test times them.
 */
#ifndef SELFTEST_KVM_ASI_EXITS_H
#define SELFTEST_KVM_ASI_EXITS_H

#include <stdbool.h>
#include <stdint.h>

#include "apic.h"
#include "asi.h"
#include "kvm_util.h"
#include "processor.h"
#include "svm_util.h"

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

/**
 * struct asi_exits_phase - one phase of asi_exits_guest_code()
 * @name: its name in the tests' output
 * @fault_free: must take no fallback fault after the warm-up (asi=on)
 * @user: goes out to user space on every iteration
 */
struct asi_exits_phase {
	const char *name;
	bool fault_free;
	bool user;
};

extern const struct asi_exits_phase asi_exits_phases[NR_PHASES];

/*
 * The IPIs between two vCPUs (asi_exits_guest_waker() and the halter or
 * the spinner): HALT_ROUNDS of them after HALT_WARMUP.
 */
#define HALT_WARMUP	100
#define HALT_ROUNDS	2000

/**
 * struct asi_exits_nested_phase - one phase of asi_exits_guest_nested()
 * @name: its name in the tests' output
 * @trips: round trips through L1
 * @l2_exits: exits L0 handles for L2, at least
 * @npt: L2 runs with nested paging (L1's nested page tables, shadowed)
 */
struct asi_exits_nested_phase {
	const char *name;
	int trips;
	int l2_exits;
	bool npt;
};

#define NR_NESTED_PHASES	4
extern const struct asi_exits_nested_phase asi_exits_nested_phases[NR_NESTED_PHASES];

/* The statistics the host reads around each phase, in this order. */
enum {
	S_EXITS, S_ENTERS, S_OWNER, S_SCHED, S_FALLBACK_EXITS, S_IRQ, S_USER, S_FALLBACKS,
	S_FLUSHES, S_SKIPPED, S_LATE, S_HALT, S_IRQ_WINDOW, S_POLLS,
	S_POLLED, S_WAKEUPS, S_PF_FAST, S_PF_FIXED, S_NESTED_RUN, S_SMT_WAITS,
	S_SMT_KICKS, S_TIMER, S_IOEVENTFD, S_FAULTIN, NR_STATS
};

extern const char * const asi_exits_stat_names[NR_STATS];

/* The guests. */
void asi_exits_guest_code(void);
void asi_exits_guest_irq_handler(struct ex_regs *regs);
void asi_exits_guest_halter(void);
void asi_exits_guest_spinner(void);
void asi_exits_guest_waker(void);
void asi_exits_guest_nested(struct svm_test_data *svm, uint64_t npt_gpa);
void asi_exits_guest_dirty_ring(void);

/* The host's side. */
bool asi_exits_apicv_on(void);
bool asi_exits_pml_on(void);
struct kvm_vm *asi_exits_vm_create(struct kvm_vcpu **vcpu, int *efd);
struct kvm_vm *asi_exits_dirty_ring_vm_create(struct kvm_vcpu **vcpu);
struct kvm_vm *asi_exits_nested_vm_create(struct kvm_vcpu **vcpu, bool *npt);
uint64_t asi_exits_run_to_sync(struct kvm_vcpu *vcpu, struct ucall *uc);
uint64_t asi_exits_run_timed(struct kvm_vcpu *vcpu, struct vcpu_stats *r,
			     struct ucall *uc, uint64_t *d, double *ns);
const char *asi_exits_not_exercised(enum phase p, const uint64_t *d, bool shadow,
				    bool pml);
void asi_exits_print_header(void);
void asi_exits_print_row(const char *name, const uint64_t *d, double exits, double cr3);
double asi_exits_print_phase_row(const char *name, const uint64_t *d);

#endif /* SELFTEST_KVM_ASI_EXITS_H */
