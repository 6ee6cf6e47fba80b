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
 * task is scheduled out.
 *
 * What the domain maps beyond the kernel's always-mapped set is this VM's
 * own data; see arch/x86/kvm/asi.c.
 */
#include <linux/asi.h>
#include <linux/kvm_host.h>
#include <linux/vmalloc.h>

struct kvm_mmu_page;

#ifdef CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION

int kvm_asi_init_vm(struct kvm *kvm);
void kvm_asi_destroy_vm(struct kvm *kvm);
void kvm_asi_create_vm_debugfs(struct kvm *kvm);
int kvm_asi_vcpu_create(struct kvm_vcpu *vcpu);
int kvm_asi_vcpu_map(struct kvm_vcpu *vcpu, const void *addr, size_t len,
		     const char *owner);
void kvm_asi_vcpu_unmap_all(struct kvm_vcpu *vcpu);
int kvm_asi_vcpu_set_cpuid(struct kvm_vcpu *vcpu, struct kvm_cpuid_entry2 **e2,
			   int nent);
int kvm_asi_map_memslot(struct kvm *kvm, struct kvm_memory_slot *slot);
void kvm_asi_unmap_memslot(struct kvm *kvm, struct kvm_memory_slot *slot);
int kvm_asi_vcpu_run(struct kvm_vcpu *vcpu);
void kvm_asi_leave(struct kvm_vcpu *vcpu, enum asi_exit_reason reason);
void kvm_asi_vcpu_run_end(struct kvm_vcpu *vcpu);
void kvm_asi_vcpu_load(struct kvm_vcpu *vcpu);
void kvm_asi_vcpu_put(struct kvm_vcpu *vcpu);
void kvm_asi_vcpu_destroy(struct kvm_vcpu *vcpu);
void kvm_asi_pt_topup(struct kvm *kvm, unsigned int min);
struct kvm_mmu_page *kvm_asi_alloc_sp(struct kvm *kvm, u64 init_value,
				      bool shadowed_info);
bool kvm_asi_free_sp(struct kvm_mmu_page *sp);
int kvm_asi_map(struct kvm *kvm, const void *addr, size_t len, const char *owner);
void kvm_asi_unmap(struct kvm *kvm, const void *addr, size_t len);
void *kvm_asi_vcalloc(struct kvm *kvm, size_t n, size_t size, const char *owner);
void kvm_asi_vfree(struct kvm *kvm, void *p, size_t n, size_t size);

/* Between the files of KVM's ASI code only. */
void kvm_asi_core_cookie_adopt(struct kvm *kvm);
void kvm_asi_pt_init(struct kvm_asi_pt_pool *pool);
void kvm_asi_pt_destroy(struct kvm *kvm, struct asi *asi);

/*
 * In the noinstr enter/exit region with IRQs off, before VM-entry: run
 * the guest on the VM's restricted table. The flush decision comes later,
 * in kvm_asi_flush_decide().
 */
static __always_inline void kvm_asi_enter(struct kvm_vcpu *vcpu)
{
	struct asi *asi = asi_enabled() ? vcpu->kvm->arch.asi : NULL;

	if (asi)
		asi_enter(asi);
}

/**
 * struct kvm_asi_window - the CPU's fallback counts at the flush decision
 * @fallbacks: all fallback faults
 * @irq: those taken in interrupt and NMI handlers
 */
struct kvm_asi_window {
	unsigned long fallbacks;
	unsigned long irq;
};

/*
 * The flush decision, as late as it can be: right before the VM-entry
 * code (__svm_vcpu_run(), __vmx_vcpu_run()), but for what must follow it
 * there and reads no data (SVM's RFLAGS.IF toggle; VMX's HOST_CR3,
 * FB_CLEAR and CR2 writes). Flush if this CPU
 * used the full table since it last entered a guest. From here until the
 * VM-entry code returns after VM-exit, nothing may fall back: what the
 * full table brought into the caches would meet the guest unflushed.
 * kvm_asi_window_end() counts what did; the entry-window check
 * (asi/entry_window) proves it of every datum the code names.
 *
 * The counts are read interrupts first here and last in
 * kvm_asi_window_end(): an NMI that falls back in between is counted as
 * one of the window's in both, or in neither, never only as a task's.
 */
static __always_inline void kvm_asi_flush_decide(struct kvm_vcpu *vcpu,
						 struct kvm_asi_window *w)
{
	struct asi *asi = asi_enabled() ? vcpu->kvm->arch.asi : NULL;

	if (!asi)
		return;
	/*
	 * Back onto the table if anything since kvm_asi_enter() fell back
	 * (no CR3 write otherwise): the guest runs, and its exit is
	 * handled, on it. The fallback set the flush indication.
	 */
	asi_enter(asi);
	/*
	 * The window opens before the decision, and the counts are read
	 * before it: an NMI that falls back between them is flushed for and
	 * counted as late, never missed by both. One that falls back after
	 * it flushes again on its way out (asi_nmi_exit()).
	 */
	asi_entry_window(true);
	w->irq = asi_fallback_count(true);
	w->fallbacks = asi_fallback_count(false);
	if (asi_need_flush()) {
		asi_flush_caches();
		vcpu->stat.asi_flushes++;
	} else {
		vcpu->stat.asi_flushes_skipped++;
	}
	/* SMT: kicks this CPU if its sibling left after all (no data read). */
	if (asi_smt_active())
		asi_smt_guest_check(asi);
	asi_guest_window(false);
}

/*
 * Right after the VM-entry code returned (on VMX, once the guest's CR2 is
 * read): fallbacks since the flush decision are late and counted. One
 * that an NMI handler took (VMX takes host NMIs in the window) flushed on
 * the NMI's way out, before the guest ran. One that no NMI handler took
 * is a bug, a datum of the window that no domain maps: kvm_asi_vcpu_put()
 * warns, on the full table, not here, where the report could fall back
 * itself.
 */
static __always_inline void kvm_asi_window_end(struct kvm_vcpu *vcpu,
					       struct kvm_asi_window *w)
{
	unsigned long late, irq;

	if (!asi_enabled() || !vcpu->kvm->arch.asi)
		return;
	asi_entry_window(false);
	asi_guest_window(true);
	late = asi_fallback_count(false) - w->fallbacks;
	irq = asi_fallback_count(true) - w->irq;
	if (unlikely(late)) {
		vcpu->stat.asi_late_fallbacks += late;
		if (late > irq)
			vcpu->arch.asi.late_task += late - irq;
	}
}

/*
 * SMT (see asm/asi.h): the gate, IRQs off in vcpu_enter_guest(), where the
 * entry may still be cancelled. True: cancel it, and once interrupts are
 * on call kvm_asi_smt_backoff() with *@why.
 */
static __always_inline bool kvm_asi_smt_enter(struct kvm_vcpu *vcpu, int *why)
{
	struct asi *asi = asi_smt_active() ? vcpu->kvm->arch.asi : NULL;

	*why = asi ? asi_smt_guest_enter(asi) : ASI_SMT_GO;
	if (*why == ASI_SMT_GO)
		return false;
	vcpu->stat.asi_smt_waits++;
	return true;
}

static inline void kvm_asi_smt_backoff(struct kvm_vcpu *vcpu, int why)
{
	if (why)
		asi_smt_backoff(why);
}

/* Between fast-path re-entries: true to stop and go through the gate. */
static __always_inline bool kvm_asi_smt_recheck(struct kvm_vcpu *vcpu)
{
	struct asi *asi = asi_smt_active() ? vcpu->kvm->arch.asi : NULL;

	return asi && asi_smt_guest_recheck(asi);
}

/*
 * After the entry loop, its exits traced: give the core back (also if the
 * protocol was turned off meanwhile), and trace the guest's time.
 */
static __always_inline void kvm_asi_smt_exit(struct kvm_vcpu *vcpu)
{
	struct asi *asi = asi_enabled() ? vcpu->kvm->arch.asi : NULL;

	if (!asi)
		return;
	if (asi_smt_guest_exit())
		vcpu->stat.asi_smt_kicks++;
	if (static_branch_unlikely(&asi_guest_trace_key))
		asi_trace_guest_window(asi);
}

#else

static inline int kvm_asi_init_vm(struct kvm *kvm) { return 0; }
static inline void kvm_asi_destroy_vm(struct kvm *kvm) { }
static inline void kvm_asi_create_vm_debugfs(struct kvm *kvm) { }
static inline int kvm_asi_vcpu_create(struct kvm_vcpu *vcpu) { return 0; }
static inline int kvm_asi_vcpu_map(struct kvm_vcpu *vcpu, const void *addr,
				   size_t len, const char *owner)
{
	return 0;
}

static inline void kvm_asi_vcpu_unmap_all(struct kvm_vcpu *vcpu) { }
static inline int kvm_asi_vcpu_set_cpuid(struct kvm_vcpu *vcpu,
					 struct kvm_cpuid_entry2 **e2, int nent)
{
	return 0;
}

static inline int kvm_asi_map_memslot(struct kvm *kvm, struct kvm_memory_slot *slot)
{
	return 0;
}

static inline void kvm_asi_unmap_memslot(struct kvm *kvm, struct kvm_memory_slot *slot) { }
static inline int kvm_asi_vcpu_run(struct kvm_vcpu *vcpu) { return 0; }
static inline void kvm_asi_leave(struct kvm_vcpu *vcpu, enum asi_exit_reason reason) { }
static inline void kvm_asi_vcpu_run_end(struct kvm_vcpu *vcpu) { }
static inline void kvm_asi_vcpu_load(struct kvm_vcpu *vcpu) { }
static inline void kvm_asi_vcpu_put(struct kvm_vcpu *vcpu) { }
static inline void kvm_asi_vcpu_destroy(struct kvm_vcpu *vcpu) { }
static inline void kvm_asi_pt_topup(struct kvm *kvm, unsigned int min) { }
static inline struct kvm_mmu_page *kvm_asi_alloc_sp(struct kvm *kvm, u64 init_value,
						    bool shadowed_info)
{
	return NULL;
}

static inline bool kvm_asi_free_sp(struct kvm_mmu_page *sp) { return false; }

static inline int kvm_asi_map(struct kvm *kvm, const void *addr, size_t len,
			      const char *owner)
{
	return 0;
}

static inline void kvm_asi_unmap(struct kvm *kvm, const void *addr, size_t len) { }
static inline void *kvm_asi_vcalloc(struct kvm *kvm, size_t n, size_t size,
				    const char *owner)
{
	return __vcalloc(n, size, GFP_KERNEL_ACCOUNT);
}

static inline void kvm_asi_vfree(struct kvm *kvm, void *p, size_t n, size_t size)
{
	vfree(p);
}

static __always_inline void kvm_asi_enter(struct kvm_vcpu *vcpu) { }

struct kvm_asi_window { };

static __always_inline void kvm_asi_flush_decide(struct kvm_vcpu *vcpu,
						 struct kvm_asi_window *w) { }
static __always_inline void kvm_asi_window_end(struct kvm_vcpu *vcpu,
					       struct kvm_asi_window *w) { }
static __always_inline bool kvm_asi_smt_enter(struct kvm_vcpu *vcpu, int *why)
{
	return false;
}

static inline void kvm_asi_smt_backoff(struct kvm_vcpu *vcpu, int why) { }
static __always_inline bool kvm_asi_smt_recheck(struct kvm_vcpu *vcpu) { return false; }
static __always_inline void kvm_asi_smt_exit(struct kvm_vcpu *vcpu) { }

#endif /* CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION */

#endif /* ARCH_X86_KVM_ASI_H */
