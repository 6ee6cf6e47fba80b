// SPDX-License-Identifier: GPL-2.0
/*
 * asi_churn_test: VM lifecycles and memslot changes under Address Space
 * Isolation, for the stress runs.
 *
 * Phase 1 creates and destroys -n VMs one after another; each runs its
 * vCPU through CPUID, an in-kernel MMIO read and an exit to user space
 * before it is destroyed. Phase 2 runs one VM whose vCPU loops over the
 * common exits while the main thread adds, moves and deletes a memslot
 * for -m seconds (each memslot install maps the new memslot array into
 * the VM's domain and unmaps the old one before it is freed).
 *
 * Phase 3 (-f) injects allocation failures with the kernel's fault
 * injection (failslab and fail_page_alloc, through /proc/thread-self/
 * fail-nth): into KVM_CREATE_VM (the domain, its page tables, the VM's
 * mappings), KVM_CREATE_VCPU (the vCPU's mappings) and the first KVM_RUN
 * (the vCPU task's stack), at the 1st, 2nd, ... allocation until one runs
 * through without an injected failure. Each injected failure must come back
 * as a clean error from the ioctl, or be absorbed; it skips, saying so,
 * without CONFIG_FAULT_INJECTION_DEBUG_FS, FAILSLAB and FAIL_PAGE_ALLOC.
 *
 * With asi=on, every VM must have entered its domain, and at the end the
 * domains and their page-table pages (/sys/kernel/debug/asi/domains) must be
 * back to what they were before the first VM: nothing of a destroyed VM's
 * domain may survive it (invariant "Nothing outlives its VM"). With ASI off, no
 * domain may appear. Nothing may oops (the harness panics on an oops).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "asi.h"
#include "kvm_util.h"
#include "processor.h"
#include "test_util.h"

#define IOAPIC_GPA	0xfec00000ULL
#define USER_PORT	0x80
#define SLOT		10
#define SLOT_GPA	0xc0000000ULL
#define SLOT_PAGES	16

static bool stop;

static void guest_once(void)
{
	uint32_t eax, ebx, ecx, edx;

	cpuid(0, &eax, &ebx, &ecx, &edx);
	(void)READ_ONCE(*(uint32_t *)IOAPIC_GPA);
	GUEST_SYNC(0);
	GUEST_DONE();
}

static void guest_loop(void)
{
	uint32_t eax, ebx, ecx, edx;
	int i;

	for (;;) {
		for (i = 0; i < 50; i++) {
			cpuid(0, &eax, &ebx, &ecx, &edx);
			(void)READ_ONCE(*(uint32_t *)IOAPIC_GPA);
		}
		GUEST_SYNC(0);
	}
}

struct domains {
	int count;
	unsigned long pgtable_pages;
};

/* Domains and their page-table pages; count -1 without ASI's debugfs. */
static struct domains read_domains(void)
{
	struct domains d = { .count = -1 };
	unsigned long pages;
	char line[256];
	FILE *f;

	f = fopen("/sys/kernel/debug/asi/domains", "r");
	if (!f)
		return d;
	d.count = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "id\t", 3))
			continue;
		/* id name refs pgtable_pages */
		TEST_ASSERT(sscanf(line, "%*u %*s %*u %lu", &pages) == 1,
			    "asi/domains: bad line '%s'", line);
		d.count++;
		d.pgtable_pages += pages;
	}
	fclose(f);
	return d;
}

static void run_once(bool on)
{
	struct kvm_vcpu *vcpu;
	struct kvm_vm *vm;
	struct ucall uc;
	uint64_t enters;

	vm = vm_create_with_one_vcpu(&vcpu, guest_once);
	virt_map(vm, IOAPIC_GPA, IOAPIC_GPA, 1);
	vcpu_run(vcpu);
	TEST_ASSERT(get_ucall(vcpu, &uc) == UCALL_SYNC, "expected a sync, got %s",
		    exit_reason_str(vcpu->run->exit_reason));
	enters = vm_get_stat(vm, "vm_asi_enters");
	TEST_ASSERT(on ? enters > 0 : enters == 0, "ASI %s, but %lu entries",
		    on ? "on" : "off", enters);
	kvm_vm_free(vm);
}

static void *vcpu_thread(void *arg)
{
	struct kvm_vcpu *vcpu = arg;
	struct ucall uc;

	while (!READ_ONCE(stop)) {
		vcpu_run(vcpu);
		switch (get_ucall(vcpu, &uc)) {
		case UCALL_SYNC:
			break;
		case UCALL_ABORT:
			REPORT_GUEST_ASSERT(uc);
			break;
		default:
			TEST_FAIL("unexpected exit %s",
				  exit_reason_str(vcpu->run->exit_reason));
		}
	}
	return NULL;
}

static unsigned long memslot_churn(int seconds, bool on)
{
	struct timespec t0, t;
	struct kvm_vcpu *vcpu;
	unsigned long ops = 0;
	struct kvm_vm *vm;
	pthread_t thread;

	vm = vm_create_with_one_vcpu(&vcpu, guest_loop);
	virt_map(vm, IOAPIC_GPA, IOAPIC_GPA, 1);
	pthread_create(&thread, NULL, vcpu_thread, vcpu);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		vm_userspace_mem_region_add(vm, VM_MEM_SRC_ANONYMOUS, SLOT_GPA,
					    SLOT, SLOT_PAGES, 0);
		vm_mem_region_move(vm, SLOT, SLOT_GPA + SLOT_PAGES * getpagesize());
		vm_mem_region_delete(vm, SLOT);
		ops += 3;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < seconds);
	WRITE_ONCE(stop, true);
	pthread_join(thread, NULL);
	printf("memslot churn: %lu memslot changes in %d s; VM enters %lu fallbacks %lu\n",
	       ops, seconds, vm_get_stat(vm, "vm_asi_enters"),
	       vm_get_stat(vm, "vm_asi_fallbacks"));
	if (on)
		TEST_ASSERT(vm_get_stat(vm, "vm_asi_enters") > 0,
			    "the VM never entered its domain");
	kvm_vm_free(vm);
	return ops;
}

static bool write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	bool ok;

	if (fd < 0)
		return false;
	ok = write(fd, val, strlen(val)) == (ssize_t)strlen(val);
	close(fd);
	return ok;
}

/*
 * /proc/thread-self/fail-nth, opened once: opening it allocates, and an
 * open while a failure is armed and not yet consumed would take it.
 * Reading and writing it allocate nothing.
 */
static int fail_nth_fd = -1;

/* Make the @n-th fault-injection point of this thread fail (0: none). */
static void fail_nth(int n)
{
	char buf[16];
	int len = snprintf(buf, sizeof(buf), "%d", n);

	TEST_ASSERT(pwrite(fail_nth_fd, buf, len, 0) == len,
		    "writing /proc/thread-self/fail-nth");
}

/* Whether the failure set up by fail_nth() was injected; clears it. */
static bool fail_injected(void)
{
	char buf[16] = "";
	bool injected;

	TEST_ASSERT(pread(fail_nth_fd, buf, sizeof(buf) - 1, 0) > 0,
		    "reading /proc/thread-self/fail-nth");
	injected = atoi(buf) == 0;
	fail_nth(0);
	return injected;
}

/* failslab and fail_page_alloc: every allocation may fail, quietly. */
static bool fault_injection_setup(void)
{
	static const char * const attrs[][2] = {
		{ "failslab/ignore-gfp-wait", "N" },
		{ "failslab/verbose", "0" },
		{ "fail_page_alloc/ignore-gfp-wait", "N" },
		{ "fail_page_alloc/ignore-gfp-highmem", "N" },
		{ "fail_page_alloc/min-order", "0" },
		{ "fail_page_alloc/verbose", "0" },
	};
	char path[128];
	int i;

	fail_nth_fd = open("/proc/thread-self/fail-nth", O_RDWR);
	if (fail_nth_fd < 0)
		return false;
	for (i = 0; i < ARRAY_SIZE(attrs); i++) {
		snprintf(path, sizeof(path), "/sys/kernel/debug/%s", attrs[i][0]);
		if (!write_file(path, attrs[i][1]))
			return false;
	}
	return true;
}

enum inject_step { INJECT_CREATE_VM, INJECT_CREATE_VCPU, INJECT_FIRST_RUN, INJECT_NR };

static const char * const inject_names[] = {
	"KVM_CREATE_VM", "KVM_CREATE_VCPU", "first KVM_RUN",
};

/*
 * One try of @step with the @n-th allocation failing. Return: whether a
 * failure was injected; *@err the ioctl's error (0 if it succeeded).
 */
static bool inject_once(enum inject_step step, int n, int *err)
{
	int kvm_fd, vm_fd, vcpu_fd, r;
	struct kvm_vcpu *vcpu;
	struct kvm_vm *vm;
	bool injected;

	if (step == INJECT_FIRST_RUN) {
		vm = vm_create_with_one_vcpu(&vcpu, guest_once);
		virt_map(vm, IOAPIC_GPA, IOAPIC_GPA, 1);
		fail_nth(n);
		r = __vcpu_run(vcpu);
		*err = r ? errno : 0;
		injected = fail_injected();
		if (r && !injected)
			TEST_FAIL("KVM_RUN failed without an injected failure: %s",
				  strerror(*err));
		kvm_vm_free(vm);
		return injected;
	}

	kvm_fd = open_kvm_dev_path_or_exit();
	if (step == INJECT_CREATE_VM)
		fail_nth(n);
	vm_fd = ioctl(kvm_fd, KVM_CREATE_VM, 0);
	*err = vm_fd < 0 ? errno : 0;
	if (step == INJECT_CREATE_VCPU) {
		TEST_ASSERT(vm_fd >= 0, "KVM_CREATE_VM: %s", strerror(errno));
		fail_nth(n);
		vcpu_fd = ioctl(vm_fd, KVM_CREATE_VCPU, 0);
		*err = vcpu_fd < 0 ? errno : 0;
		injected = fail_injected();
		if (vcpu_fd >= 0)
			close(vcpu_fd);
	} else {
		injected = fail_injected();
	}
	if (vm_fd >= 0)
		close(vm_fd);
	close(kvm_fd);
	return injected;
}

/* Return: how many failures were injected. */
static int fault_inject(void)
{
	int step, n, err, injected = 0, errors;

	if (!fault_injection_setup()) {
		printf("fault injection: not available (no fail-nth or fail* in debugfs)\n");
		return -1;
	}
	for (step = 0; step < INJECT_NR; step++) {
		errors = 0;
		for (n = 1; n < 100000 && inject_once(step, n, &err); n++) {
			if (err) {
				TEST_ASSERT(err == ENOMEM || err == EFAULT || err == EINTR ||
					    err == ENOSPC || err == EAGAIN,
					    "%s, allocation %d failing: unexpected error %s",
					    inject_names[step], n, strerror(err));
				errors++;
			}
		}
		printf("fault injection: %s: %d allocations failed one at a time,",
		       inject_names[step], n - 1);
		printf(" %d returned an error, the rest were absorbed\n", errors);
		injected += n - 1;
	}
	return injected;
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
	int lifecycles = 1000, seconds = 5, i, opt, injected = 0;
	bool inject = false;
	struct domains before, after;
	struct timespec t0, t;
	bool on = asi_is_on();

	while ((opt = getopt(argc, argv, "hn:m:f")) != -1) {
		switch (opt) {
		case 'n':
			lifecycles = parse_int(optarg, 0, 1000000, "-n");
			break;
		case 'm':
			seconds = parse_int(optarg, 0, 3600, "-m");
			break;
		case 'f':
			inject = true;
			break;
		case 'h':
		default:
			printf("usage: %s [-n LIFECYCLES] [-m SECONDS] [-f]\n"
			       " -n: VMs created and destroyed one after another (default 1000)\n"
			       " -m: seconds of memslot changes while a vCPU runs (default 5)\n"
			       " -f: inject allocation failures into VM and vCPU creation and KVM_RUN\n",
			       argv[0]);
			exit(opt == 'h' ? 0 : KSFT_FAIL);
		}
	}

	before = read_domains();
	printf("ASI is %s; %d domains with %lu page-table pages before\n",
	       on ? "on" : "off", before.count, before.pgtable_pages);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < lifecycles; i++) {
		run_once(on);
		if ((i + 1) % 100 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			printf("  %d lifecycles, %ld s\n", i + 1, (long)(t.tv_sec - t0.tv_sec));
			fflush(stdout);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t);
	printf("lifecycles: %d VMs created, run and destroyed in %ld s\n",
	       lifecycles, (long)(t.tv_sec - t0.tv_sec));

	if (seconds)
		memslot_churn(seconds, on);
	if (inject)
		injected = fault_inject();

	after = read_domains();
	printf("after: %d domains with %lu page-table pages\n", after.count,
	       after.pgtable_pages);
	if (inject && injected < 0) {
		/* The other phases passed; the one asked for did not run. */
		ksft_exit_skip("fault injection needs CONFIG_FAULT_INJECTION_DEBUG_FS,\n"
			       "CONFIG_FAILSLAB and CONFIG_FAIL_PAGE_ALLOC\n");
	}
	if (inject)
		printf("faults injected: %d\n", injected);
	if (on) {
		TEST_ASSERT(after.count == before.count &&
			    after.pgtable_pages == before.pgtable_pages,
			    "ASI's page tables not back to their baseline: %d domains, %lu pages before; %d, %lu after",
			    before.count, before.pgtable_pages, after.count,
			    after.pgtable_pages);
	} else {
		TEST_ASSERT(after.count <= 0, "ASI off, but %d domains", after.count);
	}
	return 0;
}
