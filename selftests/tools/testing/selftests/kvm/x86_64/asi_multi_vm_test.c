// SPDX-License-Identifier: GPL-2.0
/*
 * asi_multi_vm_test: several VMs with several vCPUs each, at once, under
 * Address Space Isolation.
 *
 * Every vCPU loops over the common exits (CPUID, x2APIC MSR read and write,
 * PIO to the in-kernel PIC, MMIO to the in-kernel IOAPIC, PIO to user
 * space) while the main thread moves the vCPU threads between CPUs. With
 * asi=on it checks that each VM has a domain of its own (asi/domains), the
 * asi/ debugfs folder with what it maps (asi/mappings, asi/pagetable), and
 * that every VM's ASI counters moved; with ASI off, that every ASI counter
 * stayed 0 and no domain exists. Nothing may oops (the harness panics on an
 * oops).
 *
 * -x CMD runs CMD with sh while every VM is live and its vCPUs run (the
 * isolation audit, for one); the test fails if CMD does. CMD finds the
 * VMs' debugfs folders as /sys/kernel/debug/kvm/$ASI_TEST_PID-*.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apic.h"
#include "asi.h"
#include "kvm_util.h"
#include "processor.h"
#include "test_util.h"

#define MAX_VMS		16
#define MAX_VCPUS	8
#define IOAPIC_GPA	0xfec00000ULL
#define USER_PORT	0x80	/* no in-kernel device: KVM_EXIT_IO */
#define PIC_PORT	0x21	/* the in-kernel PIC */

static int nr_vms = 2, nr_vcpus = 2, seconds = 5;
static const char *cmd;
static bool stop;

struct vcpu_info {
	struct kvm_vcpu *vcpu;
	pthread_t thread;
	uint64_t syncs;
	uint64_t user_exits;
	/* The vCPU thread's core-scheduling cookie after its first KVM_RUN. */
	unsigned long cookie;
	int cookie_err;
};

static struct kvm_vm *vms[MAX_VMS];
static struct vcpu_info info[MAX_VMS][MAX_VCPUS];

static void guest_code(void)
{
	uint32_t eax, ebx, ecx, edx;
	uint8_t v;
	int i;

	x2apic_enable();
	for (;;) {
		for (i = 0; i < 100; i++) {
			cpuid(0, &eax, &ebx, &ecx, &edx);
			rdmsr(APIC_BASE_MSR + (APIC_ID >> 4));
			x2apic_write_reg(APIC_TASKPRI, 0);
			asm volatile("inb %1, %0" : "=a"(v) : "Nd"(PIC_PORT));
			(void)READ_ONCE(*(uint32_t *)IOAPIC_GPA);
		}
		asm volatile("outb %0, %1" : : "a"(v), "Nd"(USER_PORT));
		GUEST_SYNC(0);
	}
}

static void *vcpu_thread(void *arg)
{
	struct vcpu_info *vi = arg;
	struct kvm_vcpu *vcpu = vi->vcpu;
	struct ucall uc;

	while (!READ_ONCE(stop)) {
		vcpu_run(vcpu);
		if (!vi->syncs && !vi->user_exits &&
		    prctl(PR_SCHED_CORE, PR_SCHED_CORE_GET, 0, PR_SCHED_CORE_SCOPE_THREAD,
			  (unsigned long)&vi->cookie))
			vi->cookie_err = errno;
		switch (get_ucall(vcpu, &uc)) {
		case UCALL_SYNC:
			vi->syncs++;
			break;
		case UCALL_ABORT:
			REPORT_GUEST_ASSERT(uc);
			break;
		case UCALL_NONE:
			TEST_ASSERT(vcpu->run->exit_reason == KVM_EXIT_IO &&
				    vcpu->run->io.port == USER_PORT,
				    "unexpected exit %s",
				    exit_reason_str(vcpu->run->exit_reason));
			vi->user_exits++;
			break;
		default:
			TEST_FAIL("unexpected ucall");
		}
	}
	return NULL;
}

/* Whether every vCPU of every VM has synced at least once. */
static bool all_synced(void)
{
	int i, j;

	for (i = 0; i < nr_vms; i++)
		for (j = 0; j < nr_vcpus; j++)
			if (!READ_ONCE(info[i][j].syncs))
				return false;
	return true;
}

/* A "0"/"1" or "N"/"Y" file: its first character, or 0 if unreadable. */
static char read_flag(const char *path)
{
	char c = 0;
	FILE *f = fopen(path, "r");

	if (f) {
		if (fread(&c, 1, 1, f) != 1)
			c = 0;
		fclose(f);
	}
	return c;
}

/*
 * With ASI on and SMT active, KVM gives each VM's vCPU tasks a
 * core-scheduling cookie of the VM's own (kvm.asi_core_sched): non-zero,
 * the same for a VM's vCPUs, another for each VM. Otherwise none.
 */
static void check_cookies(bool on)
{
	bool want = on && read_flag("/sys/devices/system/cpu/smt/active") == '1' &&
		    read_flag("/sys/module/kvm/parameters/asi_core_sched") == 'Y';
	int i, j, k;

	printf("core-scheduling cookies %s:", want ? "expected" : "not expected");
	for (i = 0; i < nr_vms; i++)
		for (j = 0; j < nr_vcpus; j++)
			printf(" %d.%d=%s", i, j, info[i][j].cookie ? "set" : "none");
	printf("\n");
	for (i = 0; i < nr_vms; i++) {
		for (j = 0; j < nr_vcpus; j++) {
			struct vcpu_info *vi = &info[i][j];

			/* EINVAL: no core scheduling built; ENODEV: no SMT. */
			TEST_ASSERT(!vi->cookie_err ||
				    (!want && (vi->cookie_err == EINVAL ||
					       vi->cookie_err == ENODEV)),
				    "PR_SCHED_CORE_GET: errno %d", vi->cookie_err);
			TEST_ASSERT(!want == !vi->cookie, "VM %d vCPU %d: cookie %s", i, j,
				    vi->cookie ? "set" : "none");
			if (!want)
				continue;
			TEST_ASSERT(vi->cookie == info[i][0].cookie,
				    "VM %d: vCPUs 0 and %d have different cookies", i, j);
			for (k = 0; k < i; k++)
				TEST_ASSERT(vi->cookie != info[k][0].cookie,
					    "VMs %d and %d share a cookie", k, i);
		}
	}
}

/* Lines of @path that contain @needle; -1 if @path cannot be read. */
static int count_lines(const char *path, const char *needle)
{
	char line[512];
	int n = 0;
	FILE *f;

	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += !!strstr(line, needle);
	fclose(f);
	return n;
}

/* The VM's asi/ folder: what the domain maps, and its table. */
static void check_vm_debugfs(struct kvm_vm *vm)
{
	char path[128];
	int n;

	snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%d-%d/asi/mappings",
		 getpid(), vm->fd);
	n = count_lines(path, " domain ");
	TEST_ASSERT(n > 0, "%s: %d lines of class domain", path, n);
	n = count_lines(path, "struct kvm");
	TEST_ASSERT(n == 1, "%s: %d lines for struct kvm", path, n);
	n = count_lines(path, " always ");
	TEST_ASSERT(n > 0, "%s: %d lines of class always", path, n);

	snprintf(path, sizeof(path), "/sys/kernel/debug/kvm/%d-%d/asi/pagetable",
		 getpid(), vm->fd);
	n = count_lines(path, "---[ ");
	TEST_ASSERT(n > 0, "%s: no ptdump address markers", path);
	n = count_lines(path, " pte");
	TEST_ASSERT(n > 0, "%s: no 4 KiB mappings", path);
}

/* Domains named for this process: one per live VM. */
static int own_domains(void)
{
	char name[32];

	snprintf(name, sizeof(name), "\tkvm-%d\t", getpid());
	return count_lines("/sys/kernel/debug/asi/domains", name);
}

static const char * const vm_stats[] = {
	"vm_asi_enters", "vm_asi_exits_owner", "vm_asi_exits_sched",
	"vm_asi_exits_fallback", "vm_asi_exits_interrupt", "vm_asi_exits_user",
	"vm_asi_fallbacks", "vm_asi_flushes", "vm_asi_flushes_skipped",
	"vm_asi_exits_planned_timer", "vm_asi_exits_planned_ioeventfd",
	"vm_asi_exits_planned_faultin",
};

static void help(const char *name)
{
	printf("usage: %s [-v VMS] [-c VCPUS] [-s SECONDS] [-x CMD]\n"
	       " -v: VMs at once, 1-%d (default 2)\n"
	       " -c: vCPUs per VM, 1-%d (default 2)\n"
	       " -s: seconds the vCPUs run at least, 1-600 (default 5); longer\n"
	       "     until every vCPU synced once (at most ten times as long)\n"
	       " -x: run CMD while every VM runs; fail if it fails\n",
	       name, MAX_VMS, MAX_VCPUS);
}

static int parse_int(const char *arg, int min, int max, const char *what)
{
	char *end;
	long v = strtol(arg, &end, 10);

	TEST_ASSERT(*arg && !*end && v >= min && v <= max,
		    "%s must be %d to %d, not '%s'", what, min, max, arg);
	return v;
}

int main(int argc, char *argv[])
{
	struct kvm_vcpu *vcpus[MAX_VCPUS];
	uint64_t migrations = 0, syncs = 0;
	bool on = asi_is_on();
	struct timespec t0, t;
	int i, j, k, opt, ncpus;
	cpu_set_t all, one;

	while ((opt = getopt(argc, argv, "hv:c:s:x:")) != -1) {
		switch (opt) {
		case 'v':
			nr_vms = parse_int(optarg, 1, MAX_VMS, "-v");
			break;
		case 'c':
			nr_vcpus = parse_int(optarg, 1, MAX_VCPUS, "-c");
			break;
		case 's':
			seconds = parse_int(optarg, 1, 600, "-s");
			break;
		case 'x':
			cmd = optarg;
			break;
		case 'h':
		default:
			help(argv[0]);
			exit(opt == 'h' ? 0 : KSFT_FAIL);
		}
	}

	TEST_ASSERT(!sched_getaffinity(0, sizeof(all), &all), "sched_getaffinity");
	ncpus = CPU_COUNT(&all);
	printf("ASI is %s; %d VMs with %d vCPUs each for %d s on %d CPUs\n",
	       on ? "on" : "off", nr_vms, nr_vcpus, seconds, ncpus);

	for (i = 0; i < nr_vms; i++) {
		vms[i] = vm_create_with_vcpus(nr_vcpus, guest_code, vcpus);
		virt_map(vms[i], IOAPIC_GPA, IOAPIC_GPA, 1);
		for (j = 0; j < nr_vcpus; j++)
			info[i][j].vcpu = vcpus[j];
	}
	if (on) {
		TEST_ASSERT(own_domains() == nr_vms, "%d domains for %d VMs",
			    own_domains(), nr_vms);
		for (i = 0; i < nr_vms; i++)
			check_vm_debugfs(vms[i]);
	} else {
		TEST_ASSERT(own_domains() <= 0, "ASI off, but %d domains", own_domains());
	}

	for (i = 0; i < nr_vms; i++)
		for (j = 0; j < nr_vcpus; j++)
			pthread_create(&info[i][j].thread, NULL, vcpu_thread, &info[i][j]);

	/* Move every vCPU thread to another CPU every few milliseconds. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (k = 0;; k++) {
		int cpu = 0, n;

		for (i = 0; i < nr_vms; i++) {
			for (j = 0; j < nr_vcpus; j++) {
				/* The (k + i + j)-th CPU the test may use. */
				for (n = (k + i + j) % ncpus, cpu = 0;; cpu++)
					if (CPU_ISSET(cpu, &all) && !n--)
						break;
				CPU_ZERO(&one);
				CPU_SET(cpu, &one);
				TEST_ASSERT(!pthread_setaffinity_np(info[i][j].thread,
								    sizeof(one), &one),
					    "pthread_setaffinity_np");
				migrations++;
			}
		}
		if (cmd && k == 10) {
			char pid[16];
			int rc;

			snprintf(pid, sizeof(pid), "%d", getpid());
			setenv("ASI_TEST_PID", pid, 1);
			printf("running '%s' with %d VMs live\n", cmd, nr_vms);
			fflush(stdout);
			rc = system(cmd);
			TEST_ASSERT(rc == 0, "'%s' failed: status %d", cmd, rc);
		}
		usleep(5000);
		clock_gettime(CLOCK_MONOTONIC, &t);
		/*
		 * At least the time asked for; then until every vCPU synced
		 * once, which a loaded emulator (tracing on, a slow host) can
		 * delay for a few seconds, but not past ten times that.
		 */
		if (t.tv_sec - t0.tv_sec >= seconds && k >= 10 &&
		    (all_synced() || t.tv_sec - t0.tv_sec >= 10 * seconds))
			break;
	}
	WRITE_ONCE(stop, true);
	for (i = 0; i < nr_vms; i++)
		for (j = 0; j < nr_vcpus; j++)
			pthread_join(info[i][j].thread, NULL);

	for (i = 0; i < nr_vms; i++) {
		uint64_t v[ARRAY_SIZE(vm_stats)], leaves;

		for (k = 0; k < ARRAY_SIZE(vm_stats); k++)
			v[k] = vm_get_stat(vms[i], vm_stats[k]);
		printf("VM %2d: syncs", i);
		for (j = 0; j < nr_vcpus; j++) {
			printf(" %lu", info[i][j].syncs);
			TEST_ASSERT(info[i][j].syncs > 0, "VM %d vCPU %d never synced", i, j);
			syncs += info[i][j].syncs;
		}
		printf("; enters %lu exits owner %lu sched %lu fallback %lu", v[0], v[1],
		       v[2], v[3]);
		printf(" interrupt %lu user %lu fallbacks %lu", v[4], v[5], v[6]);
		printf(" planned timer %lu ioeventfd %lu faultin %lu\n", v[9], v[10], v[11]);
		leaves = v[1] + v[2] + v[3] + v[4] + v[5] + v[9] + v[10] + v[11];
		if (!on) {
			for (k = 0; k < ARRAY_SIZE(vm_stats); k++)
				TEST_ASSERT(!v[k], "ASI off, but VM %d's %s is %lu", i,
					    vm_stats[k], v[k]);
			continue;
		}
		TEST_ASSERT(v[0] > 0, "VM %d never entered its restricted table", i);
		/* Every vCPU is off the table now: each switch on, one off. */
		TEST_ASSERT(v[0] == leaves, "VM %d: %lu switches onto its table, %lu off it",
			    i, v[0], leaves);
	}
	printf("%lu vCPU migrations, %lu syncs in %ld s\n", migrations, syncs,
	       (long)(t.tv_sec - t0.tv_sec));
	check_cookies(on);

	for (i = 0; i < nr_vms; i++)
		kvm_vm_free(vms[i]);
	TEST_ASSERT(own_domains() <= 0, "%d domains outlived their VMs", own_domains());
	return 0;
}
