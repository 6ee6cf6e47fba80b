/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _ASM_X86_ASI_H
#define _ASM_X86_ASI_H

/*
 * x86 Address Space Isolation: the contract.
 *
 * A domain (struct asi) is a restricted kernel page table: a PGD of its
 * own whose kernel half maps the always-mapped set (text, rodata, the entry
 * area, ASI's per-CPU and __asi_data sections), the allowlist and what the
 * domain's owner mapped with asi_map(), nothing else. Building or changing it never
 * changes the kernel's own page table. Its entries are never global.
 *
 * asi_create()		New domain, one reference; maps the allowlist.
 * asi_get()/asi_put()	References; the last put frees every page-table
 *			page and mapping record of the domain.
 * asi_map()		Map a kernel range (direct map, vmalloc, per-CPU,
 *			kernel image) at 4 KiB granularity; ranges of a
 *			domain never overlap. Sleeps.
 * asi_unmap()		Unmap exactly a range given to asi_map() and flush
 *			its translations before returning: the memory may be
 *			freed right after. Interrupts only the CPUs in the
 *			domain; the others flush at their next entry. Sleeps.
 * asi_map_task()	Map a task's kernel stack and task_struct, until
 *			asi_unmap_task(). Both must be mapped
 *			before the task enters a domain. Sleeps.
 * asi_allowlist_add()	Map a range into every domain, now and later, on
 *			behalf of a named owner. Sleeps.
 * asi_allowlist_remove() Undo it, flushing each domain. Sleeps.
 * asi_share_user()	Let the domain's user half be an mm's, kept in step
 *			with the mm's top-level entries until the domain
 *			goes or asi_unshare_user(). Sleeps.
 *
 * Every domain also maps the always-mapped set, built at creation: kernel
 * text and rodata (what PTI may map to user space too), the cpu_entry_area
 * (IDT, GDT, TSS, entry and exception stacks; shared with the kernel's own
 * table, as PTI does), the per-CPU variables defined with
 * DEFINE_PER_CPU_ASI() and the first per-CPU page (gs base, canary).
 *
 * The switch. Each CPU is in one of three states:
 *
 *   idle	no domain entered; CR3 holds the task's full table
 *   active	domain D entered; CR3 holds D's restricted table
 *   relaxed	domain D entered, but a fallback fault (or an interrupted
 *		context's CR3 restore) left CR3 on the full table
 *
 * The per-CPU state names D; whether the CPU is active or relaxed is read
 * from CR3 itself, so the two can never disagree, whatever interrupt or
 * NMI lands in the middle of a switch: the domain is named before CR3 is
 * loaded with its table and forgotten only after CR3 is back on the full
 * table.
 *
 * asi_enter(D)		idle or relaxed -> active. noinstr, IRQs off
 *			(checked with PROVE_LOCKING or DEBUG_ENTRY).
 * asi_exit()		-> idle (no-op when idle). noinstr, IRQs off
 *			(checked as for asi_enter()). Forced
 *			before a context switch and before the return to
 *			user space.
 * fallback fault	active -> relaxed, in the page-fault handler, for a
 *			kernel-mode fault on the restricted table: CR3 goes
 *			to the full table and the access is retried there.
 *			If the full table does not map the address either,
 *			the retry faults again and takes the normal path,
 *			oops included (invariant "Real faults still oops").
 *			A fault taken while relaxed is retried once too: an
 *			NMI may have fallen back between the fault and its
 *			handler.
 * asi_need_flush()	Whether this CPU left a restricted table (fallback or
 *			exit) since the last call: the owner flushes what
 *			its mitigations need only then, with
 *			asi_flush_caches().
 * asi_entry_window()	Brackets a guest's VM-entry, from before the flush
 *			decision: an NMI that uses the full table inside it
 *			flushes again on its way out (asi_nmi_exit()).
 *
 * Translations: with ASI on the kernel's own mappings are not global (as
 * with PTI), except kernel text and rodata, which every domain maps; a
 * kernel TLB flush reaches every PCID. Without PCIDs every switch flushes
 * the TLB. With PCIDs, a restricted table is loaded under a PCID of its
 * own, the ASI PCID of the mm's dynamic ASID slot (the slot's kernel PCID
 * with bit ASI_PCID_BIT set), and neither switch flushes, except when:
 *
 *   - the ASI PCID last held another domain's translations (each domain
 *     has a generation, never reused, recorded per CPU and slot);
 *   - the kernel flushed the slot's mm, or any kernel range, since: the
 *     TLB flush code marks the ASI PCIDs stale (asi_invalidate_pcid(),
 *     asi_invalidate_pcid_all()), as PTI marks its user PCIDs;
 *   - going back to the full table, a flush ran while the CPU was in a
 *     domain, and so may have missed the full table's PCID.
 *
 * So no translation of the full table, or of another domain, is used on a
 * restricted table, and none of a domain outlives a flush the kernel asked
 * for. See asi_enter() and Documentation/arch/x86/asi.rst.
 *
 * Boot: ASI is off unless the kernel is booted with "asi=on". The decision
 * is taken once, in early boot, and is visible as the static key
 * asi_enabled_key; with ASI off every hook is a not-taken static branch.
 * Any value other than "on" or "off" is reported in the boot log and the
 * default (off) is used.
 *
 * asi_enabled()	Whether ASI was enabled at boot. Safe in any context,
 *			including noinstr code and NMIs: it is a static branch.
 *
 * The restricted page tables, the switch and the fault-driven fallback are
 * built on this: see Documentation/arch/x86/asi.rst.
 */

#include <linux/cache.h>
#include <linux/compiler.h>
#include <linux/jump_label.h>
#include <linux/list.h>
#include <linux/maple_tree.h>
#include <linux/mutex.h>
#include <linux/refcount.h>
#include <linux/percpu-defs.h>
#include <linux/types.h>
#include <asm/cpufeature.h>
#include <asm/pgtable_types.h>

struct pt_regs;
struct task_struct;

DECLARE_STATIC_KEY_FALSE(asi_enabled_key);

static __always_inline bool asi_enabled(void)
{
	return static_branch_unlikely(&asi_enabled_key);
}

/**
 * enum asi_boot_mode - what the asi= boot parameter asked for
 * @ASI_BOOT_DEFAULT: no asi= parameter (ASI off)
 * @ASI_BOOT_OFF: asi=off
 * @ASI_BOOT_ON: asi=on
 * @ASI_BOOT_INVALID: asi= with another value; the default applies
 */
enum asi_boot_mode {
	ASI_BOOT_DEFAULT,
	ASI_BOOT_OFF,
	ASI_BOOT_ON,
	ASI_BOOT_INVALID,
};

enum asi_boot_mode asi_parse_boot_mode(const char *arg);

/**
 * enum asi_owner_class - why a range is mapped in a domain
 * @ASI_OWNER_ALWAYS: the always-mapped set of every domain
 * @ASI_OWNER_ALLOWLIST: on the allowlist, mapped in every domain
 * @ASI_OWNER_DOMAIN: mapped by the domain's owner with asi_map()
 */
enum asi_owner_class {
	ASI_OWNER_ALWAYS,
	ASI_OWNER_ALLOWLIST,
	ASI_OWNER_DOMAIN,
};

struct asi;

/*
 * Per-CPU variables the switch, entry and fault paths touch on a
 * restricted table: they live in page-aligned pages of their own, mapped
 * in every domain. A module's come in a per-CPU section of their own,
 * which the module loader allocates with asi_percpu_alloc() from the room
 * left in those pages.
 */
#define DECLARE_PER_CPU_ASI(type, name)	DECLARE_PER_CPU_SECTION(type, name, PER_CPU_ASI_SECTION)
#define DEFINE_PER_CPU_ASI(type, name)	DEFINE_PER_CPU_SECTION(type, name, PER_CPU_ASI_SECTION)
#define DEFINE_PER_CPU_ASI_ALIGNED(type, name)				\
	DEFINE_PER_CPU_SECTION(type, name, PER_CPU_ASI_SECTION) ____cacheline_aligned

extern char __per_cpu_asi_start[], __per_cpu_asi_end[];
extern char __per_cpu_asi_module_start[];

void __percpu *asi_percpu_alloc(size_t size, size_t align);
void asi_percpu_free(void __percpu *ptr, size_t size);

/*
 * The global twin: data that every domain maps, in page-aligned pages of
 * its own (with the tracepoint string table, which holds only pointers
 * to constant strings). Nothing secret may go there. A module's gets
 * pages of its own in the module too, which ASI maps while the module is
 * loaded.
 *
 * __asi_read_mostly is for data that would otherwise be __read_mostly: it
 * is grouped at the start of those pages, cache-line aligned apart from
 * the __asi_data that is written often (the timekeeping readout), and is
 * __read_mostly when ASI is compiled out.
 */
#define __asi_data		__section(".data..asi")
#define __asi_read_mostly	__section(".data..asi..read_mostly")

extern char __asi_data_start[], __asi_data_end[];

/*
 * The opposite: ro_after_init data of the kernel image that no domain may
 * map, although it lies among the rodata every domain maps (seeds and
 * keys chosen at boot). It gets pages of its own inside the rodata, which
 * the always-mapped set leaves out; still read-only after init. For
 * built-in code: in a module it would be ordinary data (and does not
 * build).
 */
#ifndef MODULE
#define __ro_after_init_secret	__section(".data..ro_after_init..secret")
#endif

extern char __start_ro_after_init_secret[], __end_ro_after_init_secret[];

/**
 * enum asi_exit_reason - why a CPU left its domain
 * @ASI_EXIT_OWNER: asi_exit() by the domain's owner
 * @ASI_EXIT_SCHED: a context switch
 * @ASI_EXIT_USER: the return to user space
 * @ASI_EXIT_INTERRUPT: a hardware interrupt or system vector, on entry
 * @ASI_EXIT_PLANNED: the owner leaves before work it knows needs the full
 *	table (e.g. KVM before it arms an hrtimer or signals an eventfd):
 *	instead of a fallback fault in the middle of that work
 * @ASI_EXIT_NR: number of reasons
 */
enum asi_exit_reason {
	ASI_EXIT_OWNER,
	ASI_EXIT_SCHED,
	ASI_EXIT_USER,
	ASI_EXIT_INTERRUPT,
	ASI_EXIT_PLANNED,
	ASI_EXIT_NR,
};

/**
 * struct asi_fault_record - the last fallback fault of a CPU
 * @address: the faulting address (CR2)
 * @ip: the faulting instruction
 * @error_code: the page-fault error code
 * @domain: the id of the domain the CPU was on
 */
struct asi_fault_record {
	unsigned long address;
	unsigned long ip;
	unsigned long error_code;
	unsigned int domain;
};

/*
 * ASI PCIDs: one per dynamic ASID slot of arch/x86/mm/tlb.c
 * (TLB_NR_DYN_ASIDS, checked at build time), at kernel PCID | BIT(10).
 */
#define ASI_NR_PCIDS	6
#define ASI_PCID_BIT	10

/**
 * struct asi_cpu_state - a CPU's ASI state (per-CPU, always mapped)
 * @curr: the domain entered, or NULL when idle
 * @curr_id: @curr's id, for fault records
 * @curr_cr3: CR3 value that loads @curr's table
 * @full_cr3: CR3 value to go back to the full table
 * @need_flush: left a restricted table since the last asi_need_flush()
 * @enters: switches to a restricted table
 * @exits: asi_exit() calls that switched CR3 off a restricted table, by
 *	   reason (leaving while relaxed changes no CR3 and is not counted)
 * @fallbacks: fallback faults
 * @fallbacks_irq: those of them taken in an interrupt or NMI handler
 * @relaxed_retries: faults retried once while relaxed (see the fault hook)
 * @retry_ip: ip of the last such retry
 * @retry_address: address of the last such retry
 * @last_fault: the last fallback fault
 * @trace_missed: tracepoint events not emitted, RCU not watching
 * @pcid_owner: per ASID slot, the generation of the domain whose
 *		translations the slot's ASI PCID may hold (0: none)
 * @pcid_stale: ASID slots whose ASI PCID must be flushed when next loaded
 * @full_stale: a TLB flush ran while this CPU was in a domain: the switch
 *		back to the full table flushes its PCID
 * @pcid_flushes: restricted-table loads that flushed the ASI PCID
 * @pcid_kept: restricted-table loads that kept its translations
 * @unmap_flushes: unmaps from a domain this CPU flushed
 * @unmap_ipis: flushes of unmaps from the domain this CPU was in
 * @entry_window: the owner is between its flush decision and the return of
 *		  its VM-entry code (asi_entry_window())
 * @nmi_flushes: NMIs that returned into that window after a use of the
 *		 full table and flushed on their way out (asi_nmi_exit())
 */
struct asi_cpu_state {
	struct asi *curr;
	unsigned int curr_id;
	unsigned long curr_cr3;
	unsigned long full_cr3;
	bool need_flush;
	unsigned long enters;
	unsigned long exits[ASI_EXIT_NR];
	unsigned long fallbacks;
	unsigned long fallbacks_irq;
	unsigned long relaxed_retries;
	unsigned long retry_ip;
	unsigned long retry_address;
	struct asi_fault_record last_fault;
	unsigned long trace_missed;
	u64 pcid_owner[ASI_NR_PCIDS];
	unsigned long pcid_stale;
	bool full_stale;
	unsigned long pcid_flushes;
	unsigned long pcid_kept;
	unsigned long unmap_flushes;
	unsigned long unmap_ipis;
	bool entry_window;
	unsigned long nmi_flushes;
};

DECLARE_PER_CPU_ASI(struct asi_cpu_state, asi_cpu);

/*
 * SMT siblings. The two hyperthreads of a core share its L1D and fill
 * buffers: what one brings in, a guest on the other may sample. While a
 * CPU runs a guest of domain D, its sibling may run only on D's table or
 * be halted in idle; see "SMT" in Documentation/arch/x86/asi.rst.
 *
 * asi_smt_guest_enter(D)	The guest gate, IRQs off, before a VM-entry
 *				that may still be cancelled: enters D, then
 *				claims the core for D's guests. Not 0: the
 *				sibling is elsewhere, cancel the entry and
 *				try again (asi_smt_backoff() says how).
 * asi_smt_guest_check()	After the flush decision, noinstr:
 *				if the sibling left after all, kick this CPU
 *				so that the VM-entry exits at once.
 * asi_smt_guest_exit()	After the VM-exit (and its tracing), IRQs
 *				off: gives the core back. Returns whether
 *				the sibling kicked this CPU out of its guest.
 * asi_smt_guest_recheck()	Between fast-path re-entries: whether to
 *				stop and go back through the gate.
 *
 * A CPU leaving its table (fallback, exit, interrupt entry, waking from
 * idle) while its sibling runs a guest kicks the sibling out of guest mode
 * and waits until it is out before it touches anything. All of it is a
 * not-taken static branch unless ASI is on and a core has two CPUs online.
 */
DECLARE_STATIC_KEY_FALSE(asi_smt_key);
DECLARE_STATIC_KEY_FALSE(asi_guest_trace_key);

/**
 * enum asi_smt_verdict - what the guest gate decided
 * @ASI_SMT_GO: enter the guest
 * @ASI_SMT_WAIT_FULL: the sibling runs on the full table: retry soon
 * @ASI_SMT_WAIT_DOMAIN: the sibling is in another domain (another VM's
 *	vCPU beside this one: core scheduling did not keep them apart)
 */
enum asi_smt_verdict {
	ASI_SMT_GO,
	ASI_SMT_WAIT_FULL,
	ASI_SMT_WAIT_DOMAIN,
};

static __always_inline bool asi_smt_active(void)
{
	return asi_enabled() && static_branch_unlikely(&asi_smt_key);
}

enum asi_smt_verdict asi_smt_guest_enter(struct asi *asi);
void asi_smt_guest_check(struct asi *asi);
bool asi_smt_guest_exit(void);
bool asi_smt_guest_recheck(struct asi *asi);
void asi_smt_backoff(enum asi_smt_verdict why);
void __asi_idle_enter(void);
void __asi_smt_wake(void);

/*
 * cpuidle's hooks, right before and after the idle instruction (in
 * ct_cpuidle_enter()/ct_cpuidle_exit()), and the NMI entry's: a CPU
 * halted in idle touches nothing, so its sibling may run a guest beside
 * it; an interrupt, an NMI or the wakeup ends that, kicking the guest out
 * first.
 */
static __always_inline void asi_idle_enter(void)
{
	if (asi_smt_active())
		__asi_idle_enter();
}

static __always_inline void asi_idle_exit(void)
{
	if (asi_smt_active())
		__asi_smt_wake();
}

static __always_inline void asi_nmi_enter(void)
{
	if (asi_smt_active())
		__asi_smt_wake();
}

/**
 * asi_entry_window() - open or close this CPU's VM-entry window
 * @open: true right before the owner's flush decision (asi_need_flush()),
 *	  false once its VM-entry code returned after the guest ran
 *
 * VMX takes host NMIs in the window; one whose handler falls back brings
 * what the full table maps into this CPU's caches after the flush, and
 * the guest would run on them. asi_nmi_exit(), last in exc_nmi(), after the
 * handlers, flushes again when an NMI returns into an open window after
 * a use of the full table. Opened before the decision: an NMI between
 * the two is flushed for by either. Writes one flag of ASI's per-CPU
 * section; noinstr, IRQs off.
 */
static __always_inline void asi_entry_window(bool open)
{
	this_cpu_write(asi_cpu.entry_window, open);
}

void __asi_nmi_exit(void);

/* exc_nmi()'s hook: a not-taken static branch with ASI off. */
static __always_inline void asi_nmi_exit(void)
{
	if (asi_enabled() && this_cpu_read(asi_cpu.entry_window))
		__asi_nmi_exit();
}

void asi_flush_caches(void);

/*
 * The guest's time in guest mode, for tracing (asi_smt:asi_guest): the TSC
 * right before the VM-entry instruction and right after it returned.
 */
void __asi_guest_window(bool end);
void asi_trace_guest_window(struct asi *asi);

static __always_inline void asi_guest_window(bool end)
{
	if (static_branch_unlikely(&asi_guest_trace_key))
		__asi_guest_window(end);
}

void asi_enter(struct asi *asi);
void __asi_exit(enum asi_exit_reason reason);
bool __asi_handle_fault(struct pt_regs *regs, unsigned long error_code,
			unsigned long address);
bool asi_need_flush(void);
void __asi_invalidate_pcid(u16 asid);
void __asi_invalidate_pcid_all(void);

#ifdef CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION_TEST_HOOKS
/* For KVM's asi/translate test hook. */
bool asi_test_translates(struct asi *asi, unsigned long va);
#endif

/* Leave the domain, if any; a not-taken static branch with ASI off. */
static __always_inline void asi_exit(enum asi_exit_reason reason)
{
	if (asi_enabled())
		__asi_exit(reason);
}

/**
 * asi_scrub_words() - clear memory that every domain maps, from noinstr code
 * @p: the memory, 8-byte aligned
 * @size: its size in bytes, a multiple of 8
 *
 * With REP STOSQ, not memset(), which noinstr code may not call: for what
 * entry code leaves behind in the always-mapped set (see sync_regs()).
 */
static __always_inline void asi_scrub_words(void *p, size_t size)
{
	unsigned long n = size / 8;

	asm volatile("rep stosq" : "+D" (p), "+c" (n) : "a" (0UL) : "memory");
}

/* The page-fault hook: true if the fault was a fallback (retry it). */
static __always_inline bool asi_handle_fault(struct pt_regs *regs,
					     unsigned long error_code,
					     unsigned long address)
{
	return asi_enabled() && __asi_handle_fault(regs, error_code, address);
}

/*
 * The TLB flush code's hooks: the mm in dynamic ASID slot @asid was flushed
 * on this CPU (all or part of it), or a kernel range was. ASI PCIDs are
 * flushed lazily, at their next load. Without PCIDs the marks are made all
 * the same and never read (every switch flushes): a per-CPU write per
 * flush, and the hooks stay testable on any CPU.
 */
static __always_inline void asi_invalidate_pcid(u16 asid)
{
	if (asi_enabled())
		__asi_invalidate_pcid(asid);
}

static __always_inline void asi_invalidate_pcid_all(void)
{
	if (asi_enabled())
		__asi_invalidate_pcid_all();
}

/**
 * asi_fallback_count() - fallback faults this CPU took so far
 * @irq: count only those taken in interrupt and NMI handlers
 *
 * For a domain's owner that must know whether its window (from its flush
 * decision on, say) ran on the restricted table throughout: the
 * difference of two readings. One per-CPU read, noinstr-safe.
 *
 * Return: the count, which wraps.
 */
static __always_inline unsigned long asi_fallback_count(bool irq)
{
	return irq ? this_cpu_read(asi_cpu.fallbacks_irq) :
		     this_cpu_read(asi_cpu.fallbacks);
}

/* The domain this CPU entered, or NULL. */
static __always_inline struct asi *asi_current(void)
{
	return asi_enabled() ? this_cpu_read(asi_cpu.curr) : NULL;
}

struct asi *asi_create(const char *name);
struct asi *asi_get(struct asi *asi);
void asi_put(struct asi *asi);
int asi_map(struct asi *asi, const void *addr, size_t len, const char *owner);
void asi_unmap(struct asi *asi, const void *addr, size_t len);
int asi_map_task(struct asi *asi, struct task_struct *task, const char *owner);
void asi_unmap_task(struct asi *asi, struct task_struct *task);
int asi_share_user(struct asi *asi, struct mm_struct *mm);
void asi_unshare_user(struct asi *asi);
int asi_allowlist_add(const char *owner, const void *addr, size_t len);
void asi_allowlist_remove(const void *addr, size_t len);
pte_t asi_lookup(struct asi *asi, unsigned long addr);
unsigned long asi_pgtable_pages(struct asi *asi);
typedef void (*asi_range_fn_t)(void *data, unsigned long start, unsigned long end,
			     const char *owner, enum asi_owner_class class);
void asi_walk_ranges(struct asi *asi, asi_range_fn_t fn, void *data);
const char *asi_owner_class_name(enum asi_owner_class class);
struct seq_file;
void asi_fault_log_show(struct seq_file *m, struct asi *asi);
void asi_mappings_show(struct seq_file *m, struct asi *asi);
int asi_pagetable_show(struct seq_file *m, struct asi *asi);
ssize_t asi_fault_log_write(struct asi *asi, const char __user *buf, size_t count);

#endif /* _ASM_X86_ASI_H */
