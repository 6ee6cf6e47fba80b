/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Address Space Isolation: switches onto and off restricted page tables,
 * and the faults that fall back to the full table. The domain is named by
 * its id, as listed in /sys/kernel/debug/asi/domains.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM asi

#if !defined(_TRACE_ASI_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_ASI_H

#include <linux/tracepoint.h>
#include <linux/asi.h>

/* The reasons' values, for tools that read the format from tracefs. */
TRACE_DEFINE_ENUM(ASI_EXIT_OWNER);
TRACE_DEFINE_ENUM(ASI_EXIT_SCHED);
TRACE_DEFINE_ENUM(ASI_EXIT_USER);
TRACE_DEFINE_ENUM(ASI_EXIT_INTERRUPT);
TRACE_DEFINE_ENUM(ASI_EXIT_PLANNED);

/**
 * asi_enter - a CPU switches onto a domain's restricted table
 * @domain: the domain's id
 *
 * Emitted right before the CR3 write, on the full table.
 */
TRACE_EVENT(asi_enter,
	TP_PROTO(unsigned int domain),
	TP_ARGS(domain),

	TP_STRUCT__entry(
		__field(unsigned int,	domain)
	),

	TP_fast_assign(
		__entry->domain = domain;
	),

	TP_printk("domain=%u", __entry->domain)
);

/**
 * asi_exit - a CPU switches off a restricted table
 * @domain: the domain's id
 * @reason: why (enum asi_exit_reason)
 *
 * Emitted right after the CR3 write. A fallback fault is an asi_fault
 * event instead.
 */
TRACE_EVENT(asi_exit,
	TP_PROTO(unsigned int domain, enum asi_exit_reason reason),
	TP_ARGS(domain, reason),

	TP_STRUCT__entry(
		__field(unsigned int,	domain)
		__field(unsigned int,	reason)
	),

	TP_fast_assign(
		__entry->domain = domain;
		__entry->reason = reason;
	),

	TP_printk("domain=%u reason=%s", __entry->domain,
		  __print_symbolic(__entry->reason,
				   { ASI_EXIT_OWNER, "owner" },
				   { ASI_EXIT_SCHED, "sched" },
				   { ASI_EXIT_USER, "user" },
				   { ASI_EXIT_INTERRUPT, "interrupt" },
				   { ASI_EXIT_PLANNED, "planned" }))
);

/**
 * asi_fault - a kernel access fell back to the full table
 * @domain: the domain's id
 * @address: the faulting address
 * @ip: the faulting instruction
 * @error_code: the page-fault error code
 * @irq: taken in an interrupt or NMI handler
 *
 * Emitted once the CPU is on the full table, before the access is
 * retried there.
 */
TRACE_EVENT(asi_fault,
	TP_PROTO(unsigned int domain, unsigned long address, unsigned long ip,
		 unsigned long error_code, bool irq),
	TP_ARGS(domain, address, ip, error_code, irq),

	TP_STRUCT__entry(
		__field(unsigned int,	domain)
		__field(unsigned long,	address)
		__field(unsigned long,	ip)
		__field(unsigned long,	error_code)
		/* Not bool: bpftrace 0.17 cannot parse bool fields. */
		__field(unsigned char,	irq)
	),

	TP_fast_assign(
		__entry->domain = domain;
		__entry->address = address;
		__entry->ip = ip;
		__entry->error_code = error_code;
		__entry->irq = irq;
	),

	TP_printk("domain=%u address=%#lx ip=%pS error_code=%#lx irq=%d",
		  __entry->domain, __entry->address, (void *)__entry->ip,
		  __entry->error_code, __entry->irq)
);

#endif /* _TRACE_ASI_H */

#include <trace/define_trace.h>
