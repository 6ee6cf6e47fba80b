/* SPDX-License-Identifier: GPL-2.0 */
#ifndef ARCH_X86_KVM_ASI_H
#define ARCH_X86_KVM_ASI_H

/*
 * KVM's use of Address Space Isolation: every VM gets an ASI domain, a
 * restricted kernel page table, when the host runs with asi=on. Its vCPUs
 * enter it right before VM-entry and stay on it while KVM handles the
 * exit; anything KVM touches that the domain does not map falls back to
 * the full table (counted), and the next VM-entry returns to it. The CPU
 * leaves the domain when KVM_RUN returns to user space and when the vCPU
 * task is scheduled out (both forced by the ASI core).
 *
 * What the domain maps beyond the kernel's always-mapped set is this VM's
 * own data; see arch/x86/kvm/asi.c.
 */
#include <linux/asi.h>
#include <linux/kvm_host.h>

#ifdef CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION

int kvm_asi_init_vm(struct kvm *kvm);
void kvm_asi_destroy_vm(struct kvm *kvm);
int kvm_asi_vcpu_run(struct kvm_vcpu *vcpu);
void kvm_asi_vcpu_destroy(struct kvm_vcpu *vcpu);

/*
 * Right before VM-entry, in the noinstr enter/exit region with IRQs off:
 * run the guest on the VM's restricted table.
 */
static __always_inline void kvm_asi_enter(struct kvm_vcpu *vcpu)
{
	struct asi *asi = asi_enabled() ? vcpu->kvm->arch.asi : NULL;

	if (asi)
		asi_enter(asi);
}

/*
 * KVM_RUN is returning: leave the domain now, not only on the way to user
 * space, since task work on that way may destroy the VM.
 */
static inline void kvm_asi_vcpu_run_end(void)
{
	unsigned long flags;

	if (!asi_enabled())
		return;
	local_irq_save(flags);
	asi_exit(ASI_EXIT_OWNER);
	local_irq_restore(flags);
}

/* ASI's per-CPU counters, sampled around a VM-entry to account them. */
struct kvm_asi_sample {
	unsigned long enters;
	unsigned long fallbacks;
};

static __always_inline void kvm_asi_sample(struct kvm_asi_sample *s)
{
	if (!asi_enabled())
		return;
	s->enters = this_cpu_read(asi_cpu.enters);
	s->fallbacks = this_cpu_read(asi_cpu.fallbacks);
}

/* Add what this CPU counted since @before to the vCPU's stats. */
static __always_inline void kvm_asi_account(struct kvm_vcpu *vcpu,
					    const struct kvm_asi_sample *before)
{
	if (!asi_enabled())
		return;
	vcpu->stat.asi_enters += this_cpu_read(asi_cpu.enters) - before->enters;
	vcpu->stat.asi_fallbacks += this_cpu_read(asi_cpu.fallbacks) - before->fallbacks;
}

#else

static inline int kvm_asi_init_vm(struct kvm *kvm) { return 0; }
static inline void kvm_asi_destroy_vm(struct kvm *kvm) { }
static inline int kvm_asi_vcpu_run(struct kvm_vcpu *vcpu) { return 0; }
static inline void kvm_asi_vcpu_destroy(struct kvm_vcpu *vcpu) { }
static __always_inline void kvm_asi_enter(struct kvm_vcpu *vcpu) { }
static inline void kvm_asi_vcpu_run_end(void) { }
struct kvm_asi_sample { };
static __always_inline void kvm_asi_sample(struct kvm_asi_sample *s) { }
static __always_inline void kvm_asi_account(struct kvm_vcpu *vcpu,
					    const struct kvm_asi_sample *before) { }

#endif /* CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION */

#endif /* ARCH_X86_KVM_ASI_H */
