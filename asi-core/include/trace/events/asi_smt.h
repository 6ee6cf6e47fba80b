/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Address Space Isolation on SMT hosts: the time a CPU ran a VM's guest,
 * for tools that check what its sibling thread did meanwhile (asi-pt
 * exposure). A system of its own, apart from asi:*: emitting it falls back
 * once per run of VM-entries (the tracepoint's probe array is not mapped),
 * which would change the switch counts that asi:* is used to trace.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM asi_smt

#if !defined(_TRACE_ASI_SMT_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_ASI_SMT_H

#include <linux/tracepoint.h>
#include <asm/msr.h>

u64 asi_tsc_to_ns(u64 cycles);
int asi_guest_trace_reg(void);
void asi_guest_trace_unreg(void);

/**
 * asi_guest - a CPU ran a VM's guest
 * @domain: the VM's domain
 * @start: TSC right before the first VM-entry instruction of the run
 * @end: TSC right after the last one returned
 * @immediate: VM-entries of the run made to exit before the guest's first
 *	instruction (the SMT protocol's self-kick: an interrupt pending in
 *	the IRR); not in the window
 *
 * Emitted by KVM after the VM-exit (and any exits handled in its fast
 * path, re-entering the guest), for tools that need guest time to the
 * instruction (kvm_entry and kvm_exit are traced some way before and
 * after). The window is given as ns before the event, both ends from one
 * TSC read as the event is filled in: on any trace clock it is placed
 * within the time from the event's timestamp to that read (no fault or
 * wait can come in between: the ring buffer is reached first). While the
 * event is enabled KVM reads the TSC twice per VM-entry, and emitting it
 * falls back once per run (see above).
 */
TRACE_EVENT_FN(asi_guest,
	TP_PROTO(unsigned int domain, u64 start, u64 end, unsigned int immediate),
	TP_ARGS(domain, start, end, immediate),

	TP_STRUCT__entry(
		__field(unsigned int,	domain)
		__field(u64,		entry_ago_ns)
		__field(u64,		exit_ago_ns)
		__field(unsigned int,	immediate)
	),

	TP_fast_assign(
		u64 now = rdtsc();

		__entry->domain = domain;
		__entry->entry_ago_ns = start ? asi_tsc_to_ns(now - start) : 0;
		__entry->exit_ago_ns = start && now > end ? asi_tsc_to_ns(now - end) : 0;
		__entry->immediate = immediate;
	),

	TP_printk("domain=%u entry_ago_ns=%llu exit_ago_ns=%llu immediate=%u",
		  __entry->domain, __entry->entry_ago_ns, __entry->exit_ago_ns,
		  __entry->immediate),

	asi_guest_trace_reg, asi_guest_trace_unreg
);

/**
 * asi_smt_kick - a CPU left its table while its sibling ran a guest
 * @sibling: the sibling CPU, kicked out of guest mode
 * @wait_ns: how long this CPU then waited for it, touching nothing
 *
 * Emitted once on the full table, after the wait; an idle CPU's wakeup
 * may come where RCU does not watch, where it is counted in asi/cpus's
 * trace_missed instead.
 */
TRACE_EVENT(asi_smt_kick,
	TP_PROTO(unsigned int sibling, u64 wait_ns),
	TP_ARGS(sibling, wait_ns),

	TP_STRUCT__entry(
		__field(unsigned int,	sibling)
		__field(u64,		wait_ns)
	),

	TP_fast_assign(
		__entry->sibling = sibling;
		__entry->wait_ns = wait_ns;
	),

	TP_printk("sibling=%u wait_ns=%llu", __entry->sibling, __entry->wait_ns)
);

/**
 * asi_smt_wait - the gate put a VM-entry off
 * @why: 1 the sibling ran on the full table, 2 in another domain
 *	(enum asi_smt_verdict)
 *
 * Emitted with interrupts on, before the vCPU tries again.
 */
TRACE_EVENT(asi_smt_wait,
	TP_PROTO(unsigned int why),
	TP_ARGS(why),

	TP_STRUCT__entry(
		__field(unsigned int,	why)
	),

	TP_fast_assign(
		__entry->why = why;
	),

	TP_printk("why=%s", __entry->why == 1 ? "full" : "domain")
);

#endif /* _TRACE_ASI_SMT_H */

#include <trace/define_trace.h>
