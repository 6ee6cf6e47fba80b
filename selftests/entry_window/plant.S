/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Fixture for scripts/entry-window.py --self-test (asi/entry_window).
 *
 * plant_root stands for svm_vcpu_enter_exit()/vmx_vcpu_enter_exit(): a
 * noinstr function whose every instruction may run on an ASI restricted
 * page table. It reads variables the restricted tables do not map (the
 * plants, marked "expect-violation: SYMBOL FUNCTION") and variables they
 * always map (marked "expect-clean: SYMBOL"). The self-test assembles
 * this file with gcc -c, runs the checker on the object (--object) with
 * --root plant_root, and passes only if it reports exactly the plants,
 * each at the function named, and resolves every clean read to the
 * symbol named, as mapped.
 *
 * The alternative below is written out by hand in the kernel's format
 * (struct alt_instr in arch/x86/include/asm/alternative.h: s32
 * instr_offset, s32 repl_offset, u32 ft_flags (cpuid:16, flags:16), u8
 * instrlen, u8 replacementlen), as ALTERNATIVE() emits it.
 */

#define PLANT_FEATURE	(7*32+16)	/* X86_FEATURE_MSR_SPEC_CTRL */
#define PLANT_FEATURE2	(11*32+19)	/* X86_FEATURE_CALL_DEPTH */

/*
 * One alternative: 16 bytes of NOPs at the site, replaced on CPUs with
 * FEATURE by the instructions between plant_alt_begin and plant_alt_end.
 */
.macro plant_alt_begin
661:	.skip 16, 0x90
662:
	.pushsection .altinstr_replacement, "ax"
6631:
.endm

.macro plant_alt_end feature:req
6641:
	.popsection
	.pushsection .altinstructions, "a"
	.long	661b - .			/* instr_offset */
	.long	6631b - .			/* repl_offset */
	.long	\feature			/* ft_flags */
	.byte	662b - 661b			/* instrlen */
	.byte	6641b - 6631b			/* replacementlen */
	.popsection
.endm

/* ---- data: what the restricted tables do not map ---- */

	.section .data..percpu, "aw", @progbits
	.balign 8
plant_pcpu_secret:	.quad 0		/* plain per-CPU data */
plant_pcpu_secret2:	.quad 0

	.data
	.balign 8
plant_data_secret:	.quad 0
plant_data_secret3:	.quad 0
plant_data_table:	.quad 0, 0, 0, 0
plant_data_helper:	.quad 0		/* read only by the .text helper */

	.bss
	.balign 8
plant_bss_secret:	.zero 8
plant_bss_secret2:	.zero 8
plant_bss_addr:		.zero 8

/* ---- data: what every restricted table maps ---- */

	.section .data..percpu..first, "aw", @progbits
plant_fixed_pcpu:	.zero 48	/* stands for fixed_percpu_data */

	.section .data..percpu..asi, "aw", @progbits
	.balign 8
plant_pcpu_asi:		.quad 0

	.section .data..asi..read_mostly, "aw", @progbits
	.balign 8
plant_asi_rm:		.quad 0

	.section .data..asi, "aw", @progbits
	.balign 8
plant_asi_data:		.long 0		/* last in its section: tests the */
					/* RIP-relative target adjustment */

	.section .rodata, "a"
	.balign 8
plant_rodata:		.quad 0
plant_rodata_table:	.quad 0, 0, 0, 0

	.section .data..ro_after_init, "aw", @progbits
	.balign 8
plant_ro_after_init:	.quad 0

/* ---- code ---- */

	.section .noinstr.text, "ax"

	.globl	plant_root
	.type	plant_root, @function
plant_root:
	/* (a) plain per-CPU data through %gs:, RIP-relative */
	movq	%gs:plant_pcpu_secret(%rip), %rax	/* expect-violation: plant_pcpu_secret plant_root */
	/* (b) a global in .data, RIP-relative */
	movq	plant_data_secret(%rip), %rcx		/* expect-violation: plant_data_secret plant_root */
	/* (c) a read only inside an alternative replacement */
	plant_alt_begin
	movq	plant_bss_secret(%rip), %rdx		/* expect-violation: plant_bss_secret plant_root */
	plant_alt_end PLANT_FEATURE
	/* symbol displacement with a base register */
	movq	plant_data_table(%rax), %rdx		/* expect-violation: plant_data_table plant_root */
	/* a symbol's address as an immediate */
	movq	$plant_bss_addr, %rdi			/* expect-violation: plant_bss_addr plant_root */

	/* (d) what every restricted table maps: not to be flagged */
	movq	%gs:plant_pcpu_asi(%rip), %rax		/* expect-clean: plant_pcpu_asi */
	addq	%gs:plant_pcpu_asi, %rax		/* expect-clean: plant_pcpu_asi */
	movq	%gs:plant_fixed_pcpu(%rip), %rax	/* expect-clean: plant_fixed_pcpu */
	movq	%gs:0x28, %rax				/* the stack canary, fixed_percpu_data */
	movq	plant_asi_rm(%rip), %rax		/* expect-clean: plant_asi_rm */
	movl	$1, plant_asi_data(%rip)		/* expect-clean: plant_asi_data */
	cmpq	$0, plant_rodata(%rip)			/* expect-clean: plant_rodata */
	movq	plant_rodata_table(,%rax,8), %rax	/* expect-clean: plant_rodata_table */
	movq	plant_ro_after_init(%rip), %rax		/* expect-clean: plant_ro_after_init */
	leaq	plant_text_helper(%rip), %rax		/* expect-clean: plant_text_helper */
	plant_alt_begin
	movq	%gs:plant_pcpu_asi(%rip), %rcx		/* expect-clean: plant_pcpu_asi */
	plant_alt_end PLANT_FEATURE2

	/* (e) a second noinstr function, walked transitively */
	call	plant_callee
	/* an alternative that calls a noinstr function */
	plant_alt_begin
	call	plant_alt_callee
	plant_alt_end PLANT_FEATURE
	/* the cold part, in .text.unlikely */
	testq	%rax, %rax
	jnz	plant_root.cold
.Lplant_back:
	/*
	 * Ordinary .text: by objtool's rules inside instrumentation_begin()/
	 * end(); counted as not followed, its read is not checked.
	 */
	call	plant_text_helper
	ret
	.size	plant_root, . - plant_root

	.type	plant_callee, @function
plant_callee:
	movq	%gs:plant_pcpu_secret2(%rip), %rax	/* expect-violation: plant_pcpu_secret2 plant_callee */
	ret
	.size	plant_callee, . - plant_callee

	.type	plant_alt_callee, @function
plant_alt_callee:
	movq	plant_data_secret3(%rip), %rax		/* expect-violation: plant_data_secret3 plant_alt_callee */
	ret
	.size	plant_alt_callee, . - plant_alt_callee

	.section .text.unlikely, "ax"
	.type	plant_root.cold, @function
plant_root.cold:
	incq	plant_bss_secret2(%rip)			/* expect-violation: plant_bss_secret2 plant_root.cold */
	jmp	.Lplant_back
	.size	plant_root.cold, . - plant_root.cold

	.text
	.type	plant_text_helper, @function
plant_text_helper:
	movq	plant_data_helper(%rip), %rax
	ret
	.size	plant_text_helper, . - plant_text_helper

	.section .note.GNU-stack, "", @progbits
