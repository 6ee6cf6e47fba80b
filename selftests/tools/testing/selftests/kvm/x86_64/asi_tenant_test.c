// SPDX-License-Identifier: GPL-2.0
/*
 * asi_tenant_test: what one tenant can do to, or see of, another under
 * Address Space Isolation.
 *
 * ldr_storm: VM B's vCPU spins in the guest on CPU 1, without exits, while
 * VM A's vCPU on CPU 0 writes its xAPIC's LDR back and forth (-n times,
 * default 2000). Each write makes KVM rebuild VM A's APIC map; with
 * asi=on the old map is unmapped from VM A's domain, and the flush that
 * follows must interrupt only the CPUs in that domain. The test counts
 * CPU 1's TLB shootdowns and function call interrupts (/proc/interrupts)
 * and VM B's asi_exits_interrupt across VM A's writes; each must stay
 * well below one per write.
 *
 * entry_stack_residue (asi=on, with asi/residue): a child process spins
 * in user mode on CPU 1 with a pattern in r12-r15; every tick pushes them
 * onto CPU 1's entry stack, which every domain maps. Reading through the
 * VM's domain's table (asi/residue), the pattern must not be found there.
 *
 * Both need CPUs 0 and 1, and skip without them.
 *
 * two_vms_one_process (asi=on, with asi/translate): one process, two VMs.
 * VM A's table must not translate VM B's guest memory, and this task's
 * stack, after it ran a vCPU of A and then one of B, must be mapped in
 * B's domain only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apic.h"
#include "asi.h"
#include "kvm_util.h"
#include "processor.h"
#include "test_util.h"

#define APIC_LDR		0xd0
#define RESIDUE_PATH		"/sys/kernel/debug/asi/residue"
#define RESIDUE_READS		40	/* every 50 ms: 2 s */
#define MAX_HIT_LINES		32
#define IOAPIC_GPA		0xfec00000ULL
#define IOAPIC_READS		500

static const char * const cea_parts[] = {
	"gdt", "entry_stack", "tss", "exception_stacks", "debug_store",
	"debug_buffers",
};

/* VM B's guest: set by the host to let it finish, set by it when it spins. */
static uint64_t release;
static uint64_t spinning;

static void guest_spinner(void)
{
	WRITE_ONCE(spinning, 1);
	while (!READ_ONCE(release))
		;
	GUEST_DONE();
}

static void guest_ldr_toggler(uint32_t toggles)
{
	uint32_t i;

	xapic_enable();
	GUEST_SYNC(0);
	for (i = 0; i < toggles; i++)
		xapic_write_reg(APIC_LDR, (i & 1) ? 0x01000000 : 0x02000000);
	GUEST_DONE();
}

static void guest_nop(void)
{
	GUEST_DONE();
}

/*
 * CPU @cpu's TLB shootdowns, function call and local timer interrupts.
 * Read with read()
 * into a static buffer: no allocation, so no heap trim (a TLB shootdown of
 * this mm, whose threads run on both CPUs) between the two readings.
 */
static void read_irqs(int cpu, uint64_t *tlb, uint64_t *cal, uint64_t *loc)
{
	static char buf[1 << 16];
	char *line, *next, *p, *end;
	int fd, col = -1, i;
	ssize_t n, len = 0;
	uint64_t *row, v;

	*tlb = *cal = *loc = UINT64_MAX;
	fd = open("/proc/interrupts", O_RDONLY);
	TEST_ASSERT(fd >= 0, "open /proc/interrupts: %s", strerror(errno));
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += n;
	close(fd);
	buf[len] = '\0';

	for (line = buf; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (col < 0) {
			/* The header: "CPUn" for each online CPU. */
			for (i = 0, p = strtok(line, " "); p; p = strtok(NULL, " "), i++)
				if (!strncmp(p, "CPU", 3) && atoi(p + 3) == cpu)
					col = i;
			TEST_ASSERT(col >= 0, "no CPU%d in /proc/interrupts", cpu);
			continue;
		}
		p = line + strspn(line, " ");
		if (!strncmp(p, "TLB:", 4))
			row = tlb;
		else if (!strncmp(p, "CAL:", 4))
			row = cal;
		else if (!strncmp(p, "LOC:", 4))
			row = loc;
		else
			continue;
		for (i = 0, end = p + 4; i <= col; i++) {
			p = end;
			v = strtoull(p, &end, 10);
			TEST_ASSERT(end != p, "short row in /proc/interrupts: '%s'", line);
		}
		*row = v;
	}
	TEST_ASSERT(*tlb != UINT64_MAX && *cal != UINT64_MAX && *loc != UINT64_MAX,
		    "no TLB, CAL or LOC row in /proc/interrupts");
}

static void *spinner_thread(void *arg)
{
	struct kvm_vcpu *vcpu = arg;
	struct ucall uc;

	kvm_pin_this_task_to_pcpu(1);
	vcpu_run(vcpu);
	if (get_ucall(vcpu, &uc) == UCALL_ABORT)
		REPORT_GUEST_ASSERT(uc);
	TEST_ASSERT(uc.cmd == UCALL_DONE, "VM B: unexpected exit %s",
		    exit_reason_str(vcpu->run->exit_reason));
	return NULL;
}

static void test_ldr_storm(uint32_t toggles, bool on)
{
	uint64_t tlb0, cal0, tlb1, cal1, loc0, loc1, bloc0, bloc1, btlb, bcal;
	uint64_t z0 = 0, z1 = 0, *flag;
	struct kvm_vcpu *vcpu_a, *vcpu_b;
	struct kvm_vm *vm_a, *vm_b;
	uint64_t x, y, z, ticks, limit = toggles / 10 + 20;
	struct ucall uc;
	pthread_t thread;
	bool have_z;
	int i;

	/* VM A only ever runs on CPU 0: CPU 1 is never in its domain. */
	kvm_pin_this_task_to_pcpu(0);
	vm_a = vm_create_with_one_vcpu(&vcpu_a, guest_ldr_toggler);
	virt_pg_map(vm_a, APIC_DEFAULT_GPA, APIC_DEFAULT_GPA);
	vcpu_args_set(vcpu_a, 1, toggles);
	vcpu_run(vcpu_a);
	if (get_ucall(vcpu_a, &uc) == UCALL_ABORT)
		REPORT_GUEST_ASSERT(uc);
	TEST_ASSERT(uc.cmd == UCALL_SYNC, "VM A: unexpected exit %s",
		    exit_reason_str(vcpu_a->run->exit_reason));

	vm_b = vm_create_with_one_vcpu(&vcpu_b, guest_spinner);
	have_z = vcpu_get_stat_by_name(vcpu_b, "asi_exits_interrupt", &z0);
	read_irqs(1, &btlb, &bcal, &bloc0);
	TEST_ASSERT(!pthread_create(&thread, NULL, spinner_thread, vcpu_b), "pthread_create");
	flag = addr_gva2hva(vm_b, (vm_vaddr_t)&spinning);
	for (i = 0; !READ_ONCE(*flag); i++) {
		TEST_ASSERT(i < 10000, "VM B's vCPU did not start spinning in 10 s");
		usleep(1000);
	}

	/* From here to the second reading: nothing that unmaps in this mm. */
	read_irqs(1, &tlb0, &cal0, &loc0);
	vcpu_run(vcpu_a);
	read_irqs(1, &tlb1, &cal1, &loc1);
	if (get_ucall(vcpu_a, &uc) == UCALL_ABORT)
		REPORT_GUEST_ASSERT(uc);
	TEST_ASSERT(uc.cmd == UCALL_DONE, "VM A: unexpected exit %s",
		    exit_reason_str(vcpu_a->run->exit_reason));

	flag = addr_gva2hva(vm_b, (vm_vaddr_t)&release);
	WRITE_ONCE(*flag, 1);
	pthread_join(thread, NULL);
	read_irqs(1, &btlb, &bcal, &bloc1);
	if (have_z)
		vcpu_get_stat_by_name(vcpu_b, "asi_exits_interrupt", &z1);
	else
		ksft_print_msg("ldr_storm: no vCPU stat asi_exits_interrupt: counted as 0\n");

	x = tlb1 - tlb0;
	y = cal1 - cal0;
	z = z1 - z0;
	/*
	 * VM B's vCPU stats are summed when its run ends: its interrupt
	 * exits cover the whole run, and CPU 1's timer ticks (every tenant
	 * has them, with ASI or without) are among them.
	 */
	ticks = bloc1 - bloc0;
	ksft_print_msg("ldr_storm: toggles=%u cpu1_tlb=%lu cpu1_cal=%lu cpu1_loc=%lu asi=%s\n",
		       toggles, x, y, loc1 - loc0, on ? "on" : "off");
	ksft_print_msg("ldr_storm: other_vm_asi_exits_interrupt=%lu cpu1_loc_during_other_vm=%lu\n",
		       z, ticks);
	kvm_vm_free(vm_b);
	kvm_vm_free(vm_a);

	if (x + y > limit || z > ticks + limit) {
		ksft_print_msg("ldr_storm: TLB + CAL on CPU 1 %lu, limit %lu\n", x + y, limit);
		ksft_print_msg("ldr_storm: VM B's interrupt exits beyond its %lu ticks %lu\n",
			       ticks, z > ticks ? z - ticks : 0);
		ksft_print_msg("ldr_storm: VM A's unmaps interrupted CPUs outside its domain\n");
		ksft_test_result_fail("ldr_storm\n");
	} else {
		ksft_test_result_pass("ldr_storm\n");
	}
}

static void __noreturn spin_with_pattern(uint64_t pattern)
{
	asm volatile("mov %0, %%r12\n\t"
		     "mov %0, %%r13\n\t"
		     "mov %0, %%r14\n\t"
		     "mov %0, %%r15\n\t"
		     "1: pause\n\t"
		     "jmp 1b"
		     : : "r"(pattern) : "r12", "r13", "r14", "r15");
	__builtin_unreachable();
}

/* The CPU @pid last ran on and its state, from /proc/PID/stat. */
static int task_cpu(pid_t pid, char *state)
{
	char path[64], buf[1024], *p;
	int fd, field;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* Field 3 (the state) follows the command name's ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return -1;
	*state = p[2];
	for (field = 2; field < 39 && p; field++)
		p = strchr(p + 1, ' ');
	return p ? atoi(p + 1) : -1;
}

struct residue {
	int reads;
	long pages;			/* least seen for cpu 1's entry stack */
	uint64_t hits;			/* cpu 1's entry stack, all reads */
	uint64_t part_hits[ARRAY_SIZE(cea_parts)];	/* cpu 1, all reads */
	int hit_lines;
};

/* One read of asi/residue: false if it cannot be read or parsed. */
static bool read_residue(struct residue *r, uint64_t pattern)
{
	char line[256], name[64], part[32], own[32];
	unsigned long pages, hits;
	unsigned int id, cpu, i;
	bool found = false, ok;
	FILE *f;
	int fd;

	fd = open(RESIDUE_PATH, O_WRONLY);
	ok = fd >= 0 && dprintf(fd, "%#lx\n", pattern) > 0;
	if (fd >= 0)
		close(fd);
	if (!ok) {
		ksft_perror("entry_stack_residue: writing the pattern");
		return false;
	}
	f = fopen(RESIDUE_PATH, "r");
	if (!f) {
		ksft_perror("entry_stack_residue: " RESIDUE_PATH);
		return false;
	}
	snprintf(own, sizeof(own), "kvm-%d", getpid());
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "domain\t", 7))
			continue;
		if (sscanf(line, "%u %63s %u %31s %lu %lu", &id, name, &cpu, part,
			   &pages, &hits) != 6) {
			ksft_print_msg("entry_stack_residue: bad line '%s'\n", line);
			fclose(f);
			return false;
		}
		if (hits && r->hit_lines++ < MAX_HIT_LINES)
			ksft_print_msg("entry_stack_residue: read %d: %s", r->reads + 1, line);
		if (strcmp(name, own) || cpu != 1)
			continue;
		for (i = 0; i < ARRAY_SIZE(cea_parts); i++)
			if (!strcmp(part, cea_parts[i]))
				r->part_hits[i] += hits;
		if (strcmp(part, "entry_stack"))
			continue;
		found = true;
		r->hits += hits;
		if (r->pages < 0 || (long)pages < r->pages)
			r->pages = pages;
	}
	fclose(f);
	if (!found) {
		ksft_print_msg("entry_stack_residue: no row for %s, cpu 1, entry_stack\n", own);
		r->pages = 0;
	}
	r->reads++;
	return found;
}

static void test_entry_stack_residue(bool on)
{
	struct residue r = { .pages = -1 };
	uint64_t pattern = 0x5a17a5e5c0ffee42ull ^ ((uint64_t)getpid() << 16);
	struct kvm_vcpu *vcpu;
	struct kvm_vm *vm;
	bool ok = true;
	char state = '?';
	int cpu, status;
	pid_t child;
	unsigned int i;

	if (!on) {
		ksft_test_result_skip("entry_stack_residue: ASI is off\n");
		return;
	}
	if (access(RESIDUE_PATH, R_OK | W_OK)) {
		ksft_test_result_skip("entry_stack_residue: no %s (needs the test hooks)\n",
				      RESIDUE_PATH);
		return;
	}

	kvm_pin_this_task_to_pcpu(0);
	child = fork();
	TEST_ASSERT(child >= 0, "fork: %s", strerror(errno));
	if (!child) {
		/* Never outlive the test, whatever way it ends. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		kvm_pin_this_task_to_pcpu(1);
		spin_with_pattern(pattern);
	}

	/* The VM's domain is created with the VM: no need to run it. */
	vm = vm_create_with_one_vcpu(&vcpu, guest_nop);
	for (i = 0; i < RESIDUE_READS && ok; i++) {
		usleep(50 * 1000);
		ok = read_residue(&r, pattern);
	}
	cpu = task_cpu(child, &state);
	kill(child, SIGKILL);
	TEST_ASSERT(waitpid(child, &status, 0) == child, "waitpid: %s", strerror(errno));
	kvm_vm_free(vm);

	if (r.hit_lines > MAX_HIT_LINES)
		ksft_print_msg("entry_stack_residue: %d more rows with hits not shown\n",
			       r.hit_lines - MAX_HIT_LINES);
	ksft_print_msg("entry_stack_residue: reads=%d cpu1_entry_stack_pages=%ld hits=%lu\n",
		       r.reads, r.pages < 0 ? 0 : r.pages, r.hits);
	ksft_print_msg("entry_stack_residue: cpu 1 hits by part:");
	for (i = 0; i < ARRAY_SIZE(cea_parts); i++)
		printf(" %s=%lu", cea_parts[i], r.part_hits[i]);
	printf("\n");

	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL || cpu != 1 || state != 'R') {
		ksft_print_msg("entry_stack_residue: the child did not spin on CPU 1 to the end\n");
		ksft_print_msg("entry_stack_residue: (CPU %d, state %c, wait status %#x)\n",
			       cpu, state, status);
		ok = false;
	}
	if (r.pages <= 0) {
		ksft_print_msg("entry_stack_residue: no page of CPU 1's entry stack mapped\n");
		ok = false;
	}
	if (r.hits) {
		ksft_print_msg("entry_stack_residue: the VM's domain reads %lu words of another\n",
			       r.hits);
		ksft_print_msg("entry_stack_residue: task's registers on CPU 1's entry stack\n");
		ok = false;
	}
	ksft_test_result(ok, "entry_stack_residue\n");
}

/* Lines of @vm's asi/mappings that contain @what. */
static int count_mappings(struct kvm_vm *vm, const char *what)
{
	char path[128], line[512];
	int n = 0;
	FILE *f;

	vm_asi_path(vm, "mappings", path, sizeof(path));
	f = fopen(path, "r");
	TEST_ASSERT(f, "open %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f))
		n += !!strstr(line, what);
	fclose(f);
	return n;
}

/* Whether @vm's table translates @addr (asi/translate). */
static bool vm_translates(struct kvm_vm *vm, void *addr)
{
	char path[128], buf[128] = "";
	FILE *f;

	vm_asi_path(vm, "translate", path, sizeof(path));
	f = fopen(path, "w");
	TEST_ASSERT(f, "open %s: %s", path, strerror(errno));
	fprintf(f, "%#lx\n", (unsigned long)addr);
	TEST_ASSERT(!fclose(f), "write %s", path);
	f = fopen(path, "r");
	TEST_ASSERT(f && fgets(buf, sizeof(buf), f), "read %s", path);
	fclose(f);
	TEST_ASSERT(strstr(buf, "mapped"), "%s: '%s'", path, buf);
	return !strstr(buf, "unmapped");
}

static void run_to(struct kvm_vcpu *vcpu, uint64_t cmd)
{
	struct ucall uc;

	vcpu_run(vcpu);
	if (get_ucall(vcpu, &uc) == UCALL_ABORT)
		REPORT_GUEST_ASSERT(uc);
	TEST_ASSERT(uc.cmd == cmd, "unexpected exit %s, ucall %lu",
		    exit_reason_str(vcpu->run->exit_reason), uc.cmd);
}

static void guest_sync_done(void)
{
	GUEST_SYNC(0);
	GUEST_DONE();
}

/* VM A's guest: two rounds of in-kernel MMIO reads (the IOAPIC's). */
static void guest_ioapic_reader(void)
{
	int i, round;

	for (round = 0; round < 2; round++) {
		GUEST_SYNC(round);
		for (i = 0; i < IOAPIC_READS; i++)
			(void)READ_ONCE(*(uint32_t *)IOAPIC_GPA);
	}
	GUEST_DONE();
}

/* Run @vcpu to the ucall @cmd; its exits and fallbacks on the way. */
static void run_counted(struct kvm_vcpu *vcpu, uint64_t cmd, uint64_t *exits,
			uint64_t *fallbacks)
{
	uint64_t e0, e1, f0, f1;

	TEST_ASSERT(vcpu_get_stat_by_name(vcpu, "exits", &e0) &&
		    vcpu_get_stat_by_name(vcpu, "asi_fallbacks", &f0),
		    "no vCPU stats exits, asi_fallbacks");
	run_to(vcpu, cmd);
	vcpu_get_stat_by_name(vcpu, "exits", &e1);
	vcpu_get_stat_by_name(vcpu, "asi_fallbacks", &f1);
	*exits = e1 - e0;
	*fallbacks = f1 - f0;
}

/*
 * Two VMs in one process: VM A's domain must not translate VM B's guest
 * memory (the process's user half holds both: with two VMs, neither
 * domain shares it), and a task that ran a vCPU of VM A and then one of
 * VM B must have its stack, which holds the residue of B's exits, mapped
 * in B's domain only. As a control, VM A alone translates its own guest
 * memory (it shares the user half then). The cost, for information: VM
 * A's fallbacks on in-kernel MMIO exits (which the emulator decodes from
 * guest memory), alone and beside VM B.
 */
static void test_two_vms_one_process(bool on)
{
	struct kvm_vcpu *vcpu_a, *vcpu_b;
	struct kvm_vm *vm_a, *vm_b;
	uint64_t exits_alone, fb_alone, exits_two, fb_two;
	bool alone, own, other, own_after;
	int stacks_a, stacks_b, user_a, user_b;
	char path[128];
	void *mem_a, *mem_b;

	if (!on) {
		ksft_test_result_skip("two_vms_one_process: ASI is off\n");
		return;
	}
	vm_a = vm_create_with_one_vcpu(&vcpu_a, guest_ioapic_reader);
	virt_map(vm_a, IOAPIC_GPA, IOAPIC_GPA, 1);
	vm_asi_path(vm_a, "translate", path, sizeof(path));
	if (access(path, F_OK)) {
		kvm_vm_free(vm_a);
		ksft_test_result_skip("two_vms_one_process: needs asi/translate (test hooks)\n");
		return;
	}
	mem_a = addr_gva2hva(vm_a, (vm_vaddr_t)&release);
	alone = vm_translates(vm_a, mem_a);
	run_to(vcpu_a, UCALL_SYNC);				/* the warm-up */
	run_counted(vcpu_a, UCALL_SYNC, &exits_alone, &fb_alone);

	vm_b = vm_create_with_one_vcpu(&vcpu_b, guest_sync_done);
	mem_b = addr_gva2hva(vm_b, (vm_vaddr_t)&release);
	own = vm_translates(vm_a, mem_a);
	other = vm_translates(vm_a, mem_b);
	own_after = vm_translates(vm_b, mem_b);
	user_a = count_mappings(vm_a, " user ");
	user_b = count_mappings(vm_b, " user ");

	/* This task runs a vCPU of A, then one of B. */
	run_counted(vcpu_a, UCALL_DONE, &exits_two, &fb_two);
	run_to(vcpu_b, UCALL_SYNC);
	stacks_a = count_mappings(vm_a, "vCPU task");
	stacks_b = count_mappings(vm_b, "vCPU task");
	run_to(vcpu_b, UCALL_DONE);

	ksft_print_msg("two_vms_one_process: cost: A's MMIO fallbacks/exits alone %lu/%lu\n",
		       fb_alone, exits_alone);
	ksft_print_msg("two_vms_one_process: cost: A's MMIO fallbacks/exits beside B %lu/%lu\n",
		       fb_two, exits_two);

	ksft_print_msg("two_vms_one_process: A alone translates its memory: %s\n",
		       alone ? "yes" : "no");
	ksft_print_msg("two_vms_one_process: with B: A's %s, B's %s, B its own %s\n",
		       own ? "yes" : "no", other ? "yes" : "no", own_after ? "yes" : "no");
	ksft_print_msg("two_vms_one_process: user lines A %d B %d; vCPU task ranges A %d B %d\n",
		       user_a, user_b, stacks_a, stacks_b);
	kvm_vm_free(vm_b);
	kvm_vm_free(vm_a);

	if (!alone || other || own || own_after || user_a || user_b || stacks_a || stacks_b != 2) {
		ksft_print_msg("two_vms_one_process: expected: yes; no, no, no; 0 0; A 0 B 2\n");
		ksft_test_result_fail("two_vms_one_process\n");
	} else {
		ksft_test_result_pass("two_vms_one_process\n");
	}
}

static void help(const char *name)
{
	printf("usage: %s [-n TOGGLES]\n"
	       " -n: LDR writes in VM A for ldr_storm, 1-1000000 (default 2000)\n",
	       name);
}

int main(int argc, char *argv[])
{
	uint32_t toggles = 2000;
	bool on = asi_is_on();
	cpu_set_t cpus;
	char *end;
	int opt;

	while ((opt = getopt(argc, argv, "hn:")) != -1) {
		switch (opt) {
		case 'n':
			toggles = strtoul(optarg, &end, 10);
			TEST_ASSERT(*optarg && !*end && toggles >= 1 && toggles <= 1000000,
				    "-n must be 1 to 1000000, not '%s'", optarg);
			break;
		case 'h':
		default:
			help(argv[0]);
			exit(opt == 'h' ? 0 : KSFT_FAIL);
		}
	}

	ksft_print_header();
	ksft_set_plan(3);
	TEST_ASSERT(!sched_getaffinity(0, sizeof(cpus), &cpus), "sched_getaffinity");
	if (!CPU_ISSET(0, &cpus) || !CPU_ISSET(1, &cpus)) {
		ksft_test_result_skip("ldr_storm: needs CPUs 0 and 1\n");
		ksft_test_result_skip("entry_stack_residue: needs CPUs 0 and 1\n");
		test_two_vms_one_process(on);
		ksft_finished();
	}

	test_ldr_storm(toggles, on);
	test_entry_stack_residue(on);
	test_two_vms_one_process(on);
	ksft_finished();
}
