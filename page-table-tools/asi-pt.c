// SPDX-License-Identifier: GPL-2.0
/*
 * asi-pt: inspect, compare and audit the restricted page tables of KVM's
 * Address Space Isolation, from what the kernel shows in debugfs:
 *
 *   <debugfs>/asi/state                      on or off
 *   <debugfs>/asi/secrets                    what no domain may map, and what
 *                                            every domain maps by design
 *   <debugfs>/kvm/<pid>-<fd>/asi/mappings    each mapped range and its owner
 *   <debugfs>/kvm/<pid>-<fd>/asi/pagetable   the table, in ptdump's format,
 *                                            after a line on its user half
 *   <debugfs>/page_tables/kernel             the full kernel table (ptdump)
 *
 * Subcommands: summary, diff, audit, suggest (see usage()). --debugfs DIR
 * reads a recorded copy of that tree instead of /sys/kernel/debug.
 * exposure reads an ftrace text trace instead: how long a guest shared its
 * core with a hyperthread that was not in its VM.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#define DEBUGFS_MAGIC	0x64626720
#define PAGE_SIZE	4096ULL
#define KERNEL_HALF	0xffff800000000000ULL
#define MAX_VMS		256

enum owner_class { C_ALWAYS, C_ALLOWLIST, C_DOMAIN, C_USER, C_NONE, NR_CLASSES };

static const char * const class_names[NR_CLASSES] = {
	"always", "allowlist", "domain", "user", "(none)",
};

struct range {
	uint64_t start, end;
	enum owner_class class;
	const char *owner;
	const char *vm;		/* for audit: whose mapping this is */
};

struct ranges {
	struct range *r;
	size_t n, cap;
};

struct vm {
	char name[64];
	struct ranges mappings;	/* as recorded, with owners */
	struct ranges present;	/* what the table maps (kernel half), merged */
	int user_entries;	/* top-level entries of the user half; -1: not said */
	bool user_recorded;	/* a mappings line of class "user" */
};

/* asi/secrets: "0xSTART-0xEND PAGES RULE WHAT", rule "absent" or "residual". */
struct secrets {
	bool found;		/* the file exists (a kernel older than it has none) */
	struct ranges absent;	/* no domain may map any page of these */
	struct ranges residual;	/* every domain maps these by design */
};

static const char *debugfs = "/sys/kernel/debug";
static bool recorded;	/* --debugfs given: no root or mount checks */
static const char *prog = "asi-pt";

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p)
		die("out of memory");
	return p;
}

static char *xstrdup(const char *s)
{
	char *d = strdup(s);

	if (!d)
		die("out of memory");
	return d;
}

static void ranges_add(struct ranges *rs, uint64_t start, uint64_t end,
		       enum owner_class class, const char *owner, const char *vm)
{
	if (rs->n == rs->cap) {
		rs->cap = rs->cap ? 2 * rs->cap : 64;
		rs->r = xrealloc(rs->r, rs->cap * sizeof(*rs->r));
	}
	rs->r[rs->n++] = (struct range){ start, end, class, owner, vm };
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static void ranges_sort(struct ranges *rs)
{
	qsort(rs->r, rs->n, sizeof(*rs->r), cmp_range);
}

/* Sort and merge overlapping or adjacent ranges (owners are dropped). */
static void ranges_merge(struct ranges *rs)
{
	size_t i, j = 0;

	ranges_sort(rs);
	for (i = 0; i < rs->n; i++) {
		if (j && rs->r[i].start <= rs->r[j - 1].end) {
			if (rs->r[i].end > rs->r[j - 1].end)
				rs->r[j - 1].end = rs->r[i].end;
			continue;
		}
		rs->r[j++] = rs->r[i];
	}
	rs->n = j;
}

/* @a minus @b, both merged; the result is merged. */
static struct ranges ranges_sub(const struct ranges *a, const struct ranges *b)
{
	struct ranges out = { 0 };
	size_t i, j = 0;

	for (i = 0; i < a->n; i++) {
		uint64_t s = a->r[i].start, e = a->r[i].end;

		while (j < b->n && b->r[j].end <= s)
			j++;
		for (size_t k = j; k < b->n && b->r[k].start < e; k++) {
			if (b->r[k].start > s)
				ranges_add(&out, s, b->r[k].start, C_NONE, NULL, NULL);
			if (b->r[k].end > s)
				s = b->r[k].end;
			if (s >= e)
				break;
		}
		if (s < e)
			ranges_add(&out, s, e, C_NONE, NULL, NULL);
	}
	return out;
}

/* @a and @b, both merged. */
static struct ranges ranges_and(const struct ranges *a, const struct ranges *b)
{
	struct ranges outside = ranges_sub(a, b), in = ranges_sub(a, &outside);

	free(outside.r);
	return in;
}

static uint64_t ranges_bytes(const struct ranges *rs)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < rs->n; i++)
		sum += rs->r[i].end - rs->r[i].start;
	return sum;
}

/* The recorded range of @rs (sorted, not merged) that holds @addr, if any. */
static const struct range *ranges_find(const struct ranges *rs, uint64_t addr)
{
	for (size_t i = 0; i < rs->n; i++)
		if (addr >= rs->r[i].start && addr < rs->r[i].end)
			return &rs->r[i];
	return NULL;
}

static char *path_of(const char *fmt, ...)
{
	char *p;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&p, fmt, ap);
	va_end(ap);
	if (n < 0)
		die("out of memory");
	return p;
}

static FILE *open_or_die(const char *path)
{
	FILE *f = fopen(path, "r");

	if (!f)
		die("cannot read %s: %s", path, strerror(errno));
	return f;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

static enum owner_class parse_class(const char *s)
{
	for (int c = 0; c < C_NONE; c++)
		if (!strcmp(s, class_names[c]))
			return c;
	return C_NONE;
}

/* asi/mappings: "0xSTART-0xEND PAGES CLASS OWNER..." and # comments. */
static void read_mappings(const char *path, struct ranges *rs, const char *vm)
{
	char line[1024], class[32], pages[32];
	unsigned long long s, e;
	FILE *f = open_or_die(path);
	int off;

	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "%llx-%llx %31s %31s %n", &s, &e, pages, class, &off) != 4 ||
		    e <= s || parse_class(class) == C_NONE)
			die("%s: cannot parse '%s'", path, trim(line));
		ranges_add(rs, s, e, parse_class(class), xstrdup(trim(line + off)), vm);
	}
	fclose(f);
	ranges_sort(rs);
}

/* asi/secrets, if the kernel has it: a missing file leaves @sec->found false. */
static void read_secrets(struct secrets *sec)
{
	char *path = path_of("%s/asi/secrets", debugfs);
	char line[1024], rule[32], pages[32];
	unsigned long long s, e;
	FILE *f = fopen(path, "r");
	int off;

	if (!f) {
		if (errno != ENOENT)
			die("cannot read %s: %s", path, strerror(errno));
		free(path);
		return;
	}
	sec->found = true;
	while (fgets(line, sizeof(line), f)) {
		struct ranges *rs;

		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "%llx-%llx %31s %31s %n", &s, &e, pages, rule, &off) != 4 ||
		    e <= s)
			die("%s: cannot parse '%s'", path, trim(line));
		if (!strcmp(rule, "absent"))
			rs = &sec->absent;
		else if (!strcmp(rule, "residual"))
			rs = &sec->residual;
		else
			die("%s: unknown rule '%s' in '%s'", path, rule, trim(line));
		ranges_add(rs, s, e, C_NONE, xstrdup(trim(line + off)), NULL);
	}
	fclose(f);
	free(path);
	ranges_sort(&sec->absent);
	ranges_sort(&sec->residual);
}

/* Whether VMs @a and @b (PID-FD) belong to one VMM process. */
static bool same_process(const char *a, const char *b)
{
	const char *da = strchr(a, '-'), *db = strchr(b, '-');

	return da && db && da > a && da - a == db - b && !strncmp(a, b, da - a);
}

/*
 * A VM's asi/pagetable starts with a line on the user half, which it does
 * not dump: "# user half: N top-level entries, not shared" or "# user half:
 * N top-level entries, the owner's user address space (asi_share_user()),
 * not dumped". N, or -1 for any other line (a kernel older than the line,
 * whose first line said no N).
 */
static int parse_user_half(const char *line)
{
	unsigned int n;
	int off = -1;

	if (sscanf(line, "# user half: %u top-level entries, %n", &n, &off) != 1 || off < 0)
		return -1;
	line += off;
	if (strcmp(line, "not shared\n") &&
	    strcmp(line, "the owner's user address space (asi_share_user()), not dumped\n"))
		return -1;
	return n;
}

/*
 * ptdump: "0xSTART-0xEND SIZE [ATTRIBUTES] LEVEL"; a present entry has
 * "RW" or "ro" among its attributes. Only the kernel half is kept. With
 * @user_entries, the first line is a VM table's line on its user half.
 */
static void read_ptdump(const char *path, struct ranges *rs, int *user_entries)
{
	char line[1024], *tok, *save;
	unsigned long long s, e;
	FILE *f = open_or_die(path);
	bool present, first = true;

	if (user_entries)
		*user_entries = -1;
	while (fgets(line, sizeof(line), f)) {
		if (first && user_entries)
			*user_entries = parse_user_half(line);
		first = false;
		if (strncmp(line, "0x", 2))
			continue;	/* markers, comments */
		if (sscanf(line, "%llx-%llx", &s, &e) != 2)
			die("%s: cannot parse '%s'", path, trim(line));
		if (!e)
			e = ~0ULL;	/* the last range ends with the address space */
		if (e <= s)
			die("%s: cannot parse '%s'", path, trim(line));
		present = false;
		strtok_r(line, " \t\n", &save);	/* the range */
		while ((tok = strtok_r(NULL, " \t\n", &save)))
			present |= !strcmp(tok, "RW") || !strcmp(tok, "ro");
		if (present && s >= KERNEL_HALF)
			ranges_add(rs, s, e, C_NONE, NULL, NULL);
	}
	fclose(f);
	ranges_merge(rs);
}

static void check_environment(void)
{
	struct statfs sfs;
	char *state = path_of("%s/asi/state", debugfs), line[128];
	bool on = false;
	FILE *f;

	if (!recorded) {
		if (geteuid() != 0)
			die("must run as root: debugfs is readable by root only");
		if (statfs(debugfs, &sfs) || sfs.f_type != DEBUGFS_MAGIC)
			die("debugfs is not mounted at %s (mount -t debugfs none %s)",
			    debugfs, debugfs);
	}
	f = fopen(state, "r");
	if (!f)
		die("%s missing: kernel built without CONFIG_MITIGATION_ADDRESS_SPACE_ISOLATION",
		    state);
	while (fgets(line, sizeof(line), f))
		on |= !strcmp(line, "enabled: on\n");
	fclose(f);
	free(state);
	if (!on)
		die("ASI is off: boot with asi=on");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char * const *)a, *(char * const *)b);
}

/* The live VMs with an asi/ folder, sorted by name. */
static int list_vms(char **names, int max)
{
	char *dir = path_of("%s/kvm", debugfs);
	struct dirent *de;
	struct stat st;
	int n = 0;
	DIR *d;

	d = opendir(dir);
	if (!d)
		die("cannot list %s: %s (is KVM loaded?)", dir, strerror(errno));
	while ((de = readdir(d)) && n < max) {
		char *p = path_of("%s/%s/asi/mappings", dir, de->d_name);

		if (de->d_name[0] != '.' && !stat(p, &st))
			names[n++] = xstrdup(de->d_name);
		free(p);
	}
	closedir(d);
	free(dir);
	qsort(names, n, sizeof(*names), cmp_str);
	return n;
}

static void load_vm(struct vm *vm, const char *name)
{
	char *m = path_of("%s/kvm/%s/asi/mappings", debugfs, name);
	char *p = path_of("%s/kvm/%s/asi/pagetable", debugfs, name);
	struct stat st;

	snprintf(vm->name, sizeof(vm->name), "%s", name);
	if (stat(m, &st)) {
		char *all[MAX_VMS];
		int n = list_vms(all, MAX_VMS);

		fprintf(stderr, "%s: no VM '%s'; live VMs:", prog, name);
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %s", all[i]);
		fprintf(stderr, "%s\n", n ? "" : " none");
		exit(2);
	}
	read_mappings(m, &vm->mappings, vm->name);
	read_ptdump(p, &vm->present, &vm->user_entries);
	for (size_t k = 0; k < vm->mappings.n; k++)
		vm->user_recorded |= vm->mappings.r[k].class == C_USER;
	free(m);
	free(p);
}

/* The VMs named on the command line, or every live one. */
static int load_vms(struct vm *vms, int argc, char **argv)
{
	char *names[MAX_VMS];
	int n, i;

	if (argc > MAX_VMS)
		die("at most %d VMs", MAX_VMS);
	if (argc) {
		for (i = 0; i < argc; i++)
			load_vm(&vms[i], argv[i]);
		return argc;
	}
	n = list_vms(names, MAX_VMS);
	for (i = 0; i < n; i++)
		load_vm(&vms[i], names[i]);
	return n;
}

static void print_size(uint64_t bytes)
{
	if (bytes >= (1ULL << 30))
		printf("%8.1f GiB", bytes / (double)(1ULL << 30));
	else if (bytes >= (1ULL << 20))
		printf("%8.1f MiB", bytes / (double)(1ULL << 20));
	else
		printf("%8.1f KiB", bytes / 1024.0);
}

/* summary's part on asi/secrets: its ranges, by rule and what they hold. */
static void summary_secrets(void)
{
	struct secrets sec = { 0 };
	struct group {
		const char *rule, *what;
		size_t ranges;
		uint64_t bytes;
	} *g = NULL;
	size_t ng = 0;

	read_secrets(&sec);
	if (!sec.found) {
		printf("secrets: no asi/secrets\n");
		return;
	}
	printf("secrets (asi/secrets): what no domain may map (absent), what every domain maps by design (residual)\n");
	for (int rule = 0; rule < 2; rule++) {
		const struct ranges *rs = rule ? &sec.residual : &sec.absent;

		for (size_t k = 0; k < rs->n; k++) {
			size_t i;

			for (i = 0; i < ng; i++)
				if (!strcmp(g[i].rule, rule ? "residual" : "absent") &&
				    !strcmp(g[i].what, rs->r[k].owner))
					break;
			if (i == ng) {
				g = xrealloc(g, ++ng * sizeof(*g));
				g[i] = (struct group){ rule ? "residual" : "absent", rs->r[k].owner, 0, 0 };
			}
			g[i].ranges++;
			g[i].bytes += rs->r[k].end - rs->r[k].start;
		}
	}
	for (size_t i = 0; i < ng; i++)
		printf("  %-10s %5zu ranges %9llu pages  %s\n", g[i].rule, g[i].ranges,
		       (unsigned long long)(g[i].bytes / PAGE_SIZE), g[i].what);
	if (!ng)
		printf("  (no ranges)\n");
	free(g);
}

static int cmd_summary(int argc, char **argv)
{
	static struct vm vms[MAX_VMS];
	struct ranges kernel = { 0 };
	char *kpath;
	int n, i;

	check_environment();
	n = load_vms(vms, argc, argv);
	if (!n)
		die("no live VM with an asi/ folder");
	kpath = path_of("%s/page_tables/kernel", debugfs);
	if (!access(kpath, R_OK))
		read_ptdump(kpath, &kernel, NULL);
	for (i = 0; i < n; i++) {
		struct ranges class_ranges[NR_CLASSES] = { 0 };
		uint64_t bytes[NR_CLASSES] = { 0 };
		size_t ranges[NR_CLASSES] = { 0 };
		struct vm *vm = &vms[i];
		uint64_t mapped = ranges_bytes(&vm->present);

		/* What the table maps of each class's recorded ranges. */
		for (size_t k = 0; k < vm->mappings.n; k++) {
			const struct range *r = &vm->mappings.r[k];

			ranges[r->class]++;
			ranges_add(&class_ranges[r->class], r->start, r->end, C_NONE, NULL, NULL);
		}
		for (int c = 0; c < C_USER; c++) {
			struct ranges in;

			ranges_merge(&class_ranges[c]);
			in = ranges_and(&class_ranges[c], &vm->present);
			bytes[c] = ranges_bytes(&in);
			free(in.r);
			free(class_ranges[c].r);
		}
		printf("VM %s\n", vm->name);
		for (int c = 0; c < C_USER; c++) {
			printf("  %-10s %5zu ranges %9llu pages mapped ", class_names[c], ranges[c],
			       (unsigned long long)(bytes[c] / PAGE_SIZE));
			print_size(bytes[c]);
			putchar('\n');
		}
		printf("  %-10s %s", "user", vm->user_recorded ?
		       "shares the VMM's user address space" : "not shared");
		if (vm->user_entries >= 0)
			printf(" (%d top-level entries)", vm->user_entries);
		putchar('\n');
		printf("  %-10s %16llu pages mapped ", "table",
		       (unsigned long long)(mapped / PAGE_SIZE));
		print_size(mapped);
		printf(" present in the kernel half");
		if (kernel.n)
			printf(", %.3f%% of the full kernel map's %llu pages",
			       100.0 * mapped / ranges_bytes(&kernel),
			       (unsigned long long)(ranges_bytes(&kernel) / PAGE_SIZE));
		putchar('\n');
	}
	summary_secrets();
	free(kpath);
	return 0;
}

/* Where @addr belongs, by @rs's records, for diff's listing. */
static const char *owner_of(const struct ranges *rs, uint64_t addr, char *buf, size_t len)
{
	const struct range *r = rs ? ranges_find(rs, addr) : NULL;

	if (!r)
		return "-";
	snprintf(buf, len, "%s: %s", class_names[r->class], r->owner);
	return buf;
}

static void print_only(const char *what, const struct ranges *d, const struct ranges *owners)
{
	char buf[256];

	printf("only in %s: %zu ranges, %llu pages\n", what, d->n,
	       (unsigned long long)(ranges_bytes(d) / PAGE_SIZE));
	for (size_t i = 0; i < d->n; i++)
		printf("  0x%016llx-0x%016llx %8llu  %s\n",
		       (unsigned long long)d->r[i].start, (unsigned long long)d->r[i].end,
		       (unsigned long long)((d->r[i].end - d->r[i].start) / PAGE_SIZE),
		       owner_of(owners, d->r[i].start, buf, sizeof(buf)));
}

/* A VM by name, or "kernel": the full kernel table. */
static void load_side(const char *name, struct vm *vm, bool *is_vm)
{
	*is_vm = strcmp(name, "kernel");
	if (*is_vm) {
		load_vm(vm, name);
		return;
	}
	snprintf(vm->name, sizeof(vm->name), "the full kernel map");
	read_ptdump(path_of("%s/page_tables/kernel", debugfs), &vm->present, NULL);
}

static int cmd_diff(int argc, char **argv)
{
	static struct vm a, b;
	struct ranges ab, ba;
	bool a_vm, b_vm;

	if (argc != 2)
		die("diff needs two VMs, or a VM and 'kernel'");
	check_environment();
	load_side(argv[0], &a, &a_vm);
	load_side(argv[1], &b, &b_vm);
	ab = ranges_sub(&a.present, &b.present);
	ba = ranges_sub(&b.present, &a.present);
	print_only(a.name, &ab, a_vm ? &a.mappings : NULL);
	print_only(b.name, &ba, b_vm ? &b.mappings : NULL);
	return ab.n || ba.n;
}

/*
 * (d): the user half of @vm's table. Entries there need an owner, which
 * only asi_share_user() records (a "user" mappings line); and a VM may
 * share its VMM's user half only while it is the process's only VM (the
 * live VMs @live, all of them, named or not), as another VM's guest memory
 * is in it. Returns the violations; *@unchecked counts a table whose
 * first line does not say how many top-level entries its user half has.
 */
static unsigned long audit_user_half(const struct vm *vm, char **live, int nlive,
				     int *unchecked)
{
	unsigned long violations = 0;

	if (vm->user_entries < 0) {
		printf("user half: VM %s not checked (its asi/pagetable has no '# user half: N top-level entries' line)\n",
		       vm->name);
		(*unchecked)++;
	} else if (vm->user_entries > 0 && !vm->user_recorded) {
		printf("VIOLATION: VM %s's table has %d user top-level entries, which no owner recorded\n",
		       vm->name, vm->user_entries);
		violations++;
	}
	if (!vm->user_recorded)
		return violations;
	for (int k = 0; k < nlive; k++) {
		if (!strcmp(live[k], vm->name) || !same_process(live[k], vm->name))
			continue;
		printf("VIOLATION: VM %s maps process %.*s's user half, which holds VM %s's guest memory\n",
		       vm->name, (int)(strchr(vm->name, '-') - vm->name), vm->name, live[k]);
		violations++;
	}
	return violations;
}

/*
 * Invariant "No foreign data", for every VM: (a) everything its table maps in
 * the kernel half is recorded, as always-mapped, allowlisted or the VM's own;
 * (b) nothing recorded as a VM's own is mapped by another VM's table; (c) no
 * page of what asi/secrets names "absent" is mapped; (d) its user half is empty
 * unless it shares its VMM's (recorded), and it shares it only as the process's
 * only VM. What cannot be checked (a kernel without asi/secrets or without the
 * table's line on its user half) makes the verdict INCOMPLETE, exit 2, unless
 * there are violations.
 */
static int cmd_audit(int argc, char **argv)
{
	static struct vm vms[MAX_VMS];
	struct ranges owned = { 0 };
	struct secrets sec = { 0 };
	unsigned long violations = 0, pages = 0;
	char *live[MAX_VMS];
	int n, nlive, i, shared = 0, user_unchecked = 0;

	check_environment();
	n = load_vms(vms, argc, argv);
	if (!n)
		die("no live VM with an asi/ folder");
	nlive = list_vms(live, MAX_VMS);
	read_secrets(&sec);
	if (!sec.found)
		printf("secrets: not checked (no asi/secrets)\n");

	/* Every VM's own ranges, each with its VM, sorted. */
	for (i = 0; i < n; i++)
		for (size_t k = 0; k < vms[i].mappings.n; k++)
			if (vms[i].mappings.r[k].class == C_DOMAIN)
				ranges_add(&owned, vms[i].mappings.r[k].start,
					   vms[i].mappings.r[k].end, C_DOMAIN,
					   vms[i].mappings.r[k].owner, vms[i].name);
	ranges_sort(&owned);

	for (i = 0; i < n; i++) {
		struct vm *vm = &vms[i];
		struct ranges recorded = { 0 }, unrecorded;

		for (size_t k = 0; k < vm->mappings.n; k++)
			if (vm->mappings.r[k].class != C_USER)
				ranges_add(&recorded, vm->mappings.r[k].start,
					   vm->mappings.r[k].end, C_NONE, NULL, NULL);
		ranges_merge(&recorded);
		unrecorded = ranges_sub(&vm->present, &recorded);
		for (size_t k = 0; k < unrecorded.n; k++) {
			printf("VIOLATION: VM %s maps 0x%016llx-0x%016llx, which no owner recorded\n",
			       vm->name, (unsigned long long)unrecorded.r[k].start,
			       (unsigned long long)unrecorded.r[k].end);
			violations++;
		}
		pages += ranges_bytes(&vm->present) / PAGE_SIZE;

		/* Another VM's own ranges that this VM's table maps. */
		for (size_t k = 0; k < owned.n; k++) {
			const struct range *o = &owned.r[k], *mine;
			struct ranges one = { 0 }, in;

			if (!strcmp(o->vm, vm->name))
				continue;
			ranges_add(&one, o->start, o->end, C_NONE, NULL, NULL);
			in = ranges_and(&one, &vm->present);
			for (size_t m = 0; m < in.n; m++) {
				mine = ranges_find(&vm->mappings, in.r[m].start);
				if (mine && mine->class == C_DOMAIN) {
					/* Both claim it: say so once, from the first by name. */
					if (strcmp(vm->name, o->vm) > 0)
						continue;
					printf("VIOLATION: 0x%016llx-0x%016llx is VM %s's own (%s) and VM %s's own (%s): mapped by both\n",
					       (unsigned long long)in.r[m].start,
					       (unsigned long long)in.r[m].end, vm->name, mine->owner,
					       o->vm, o->owner);
				} else {
					printf("VIOLATION: VM %s maps 0x%016llx-0x%016llx (%s), which is VM %s's own (%s)\n",
					       vm->name, (unsigned long long)in.r[m].start,
					       (unsigned long long)in.r[m].end,
					       mine ? mine->owner : "no owner recorded", o->vm, o->owner);
				}
				violations++;
			}
			free(one.r);
			free(in.r);
		}

		/* What no domain may map. */
		for (size_t k = 0; k < sec.absent.n; k++) {
			const struct range *a = &sec.absent.r[k];
			struct ranges one = { 0 }, in;

			ranges_add(&one, a->start, a->end, C_NONE, NULL, NULL);
			in = ranges_and(&one, &vm->present);
			for (size_t m = 0; m < in.n; m++) {
				printf("VIOLATION: VM %s maps 0x%016llx-0x%016llx, which holds %s (no domain may map it)\n",
				       vm->name, (unsigned long long)in.r[m].start,
				       (unsigned long long)in.r[m].end, a->owner);
				violations++;
			}
			free(one.r);
			free(in.r);
		}

		violations += audit_user_half(vm, live, nlive, &user_unchecked);
		shared += vm->user_recorded;
		free(recorded.r);
		free(unrecorded.r);
	}
	if (sec.found)
		printf("residual: %zu ranges every domain maps by design (asi/secrets)\n",
		       sec.residual.n);
	printf("audit: %d VMs, %lu pages mapped, ", n, pages);
	if (sec.found)
		printf("%zu absent ranges, ", sec.absent.n);
	else
		printf("secrets not checked, ");
	printf("%d user halves shared", shared);
	if (user_unchecked)
		printf(", %d not checked", user_unchecked);
	printf(", %lu violations: %s\n", violations, violations ? "FAILED" :
	       !sec.found || user_unchecked ? "INCOMPLETE" : "passed");
	for (i = 0; i < nlive; i++)
		free(live[i]);
	if (violations)
		return 1;
	return !sec.found || user_unchecked ? 2 : 0;
}

static const char *region_of(uint64_t a)
{
	if (a < KERNEL_HALF)
		return "user";
	if (a >= 0xffffffff80000000ULL && a < 0xffffffffa0000000ULL)
		return "kernel image";
	if (a >= 0xffffffffa0000000ULL && a < 0xffffffffff000000ULL)
		return "module";
	if (a >= 0xfffffe0000000000ULL && a < 0xfffffe8000000000ULL)
		return "cpu_entry_area";
	if (a >= 0xffffea0000000000ULL && a < 0xffffeb0000000000ULL)
		return "struct page (vmemmap)";
	if (a >= 0xffffc90000000000ULL && a < 0xffffe90000000000ULL)
		return "vmalloc or per-CPU";
	if (a >= 0xffff888000000000ULL && a < 0xffffc88000000000ULL)
		return "direct map";
	return "?";
}

struct site {
	char what[256];
	char ip[128];		/* its most frequent faulting ip */
	unsigned long ip_count;
	unsigned long count;
	uint64_t *pages;	/* distinct pages faulted on */
	size_t npages;
};

static void site_add_page(struct site *s, uint64_t addr)
{
	uint64_t page = addr & ~(PAGE_SIZE - 1);

	for (size_t i = 0; i < s->npages; i++)
		if (s->pages[i] == page)
			return;
	s->pages = xrealloc(s->pages, (s->npages + 1) * sizeof(*s->pages));
	s->pages[s->npages++] = page;
}

/*
 * One fault record: debugfs's "COUNT<tab>IP<tab>ADDRESS<tab>ERROR<tab>WHAT"
 * or bpftrace's map line "@NAME[IP, ADDRESS]: COUNT" (ADDRESS decimal or
 * hex). Returns false for any other line.
 */
static bool parse_fault(const char *line, unsigned long *count, char *ip, size_t iplen,
			unsigned long long *addr, char *what, size_t whatlen)
{
	const char *p, *q;
	char *end;

	if (sscanf(line, "%lu\t%127[^\t]\t%llx\t%*x\t%255[^\n]", count, ip, addr, what) == 4)
		return true;
	if (line[0] != '@' || !(p = strchr(line, '[')) || !(q = strchr(p, ',')))
		return false;
	snprintf(ip, iplen, "%.*s", (int)(q - p - 1), p + 1);
	*addr = strtoull(q + 1, &end, 0);
	if (end == q + 1 || strncmp(end, "]: ", 3))
		return false;
	*count = strtoul(end + 3, &end, 10);
	snprintf(what, whatlen, "%s", region_of(*addr));
	return true;
}

static const char *advice(const char *what)
{
	if (!strncmp(what, "per-CPU", 7))
		return "per-CPU variable: DEFINE_PER_CPU_ASI() if entry or KVM's run loop needs it (every domain maps it)";
	if (!strncmp(what, "kernel", 6))
		return "kernel image data: __asi_data (__asi_read_mostly if __read_mostly) if it holds nothing secret, else leave it";
	if (!strncmp(what, "direct map: slab", 16))
		return "slab object: if the VM owns it, allocate it page-owned (asi_owned_size()) and map it per VM";
	if (!strncmp(what, "direct map: page table", 22))
		return "page-table page: per VM if it is the VM's (MMU), else leave it";
	if (!strncmp(what, "direct map", 10))
		return "page: map it per VM if the VM owns it, else allowlist only if not secret";
	if (!strncmp(what, "vmalloc", 7))
		return "vmalloc area: map it per VM where it is allocated, if the VM owns it";
	if (!strncmp(what, "module", 6))
		return "module data: __asi_data (__asi_read_mostly if __read_mostly) or DEFINE_PER_CPU_ASI() if not secret (modules' text and rodata are mapped)";
	if (!strncmp(what, "user", 4))
		return "user memory: asi_share_user() the VMM's mm";
	if (!strncmp(what, "struct page", 11))
		return "struct pages are host-wide: leave it (falls back)";
	return "look up the address";
}

static int cmp_site(const void *a, const void *b)
{
	const struct site *x = a, *y = b;

	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return strcmp(x->what, y->what);
}

/*
 * suggest: rank what to map from a fault log, grouped by what the address
 * belongs to. Reads the debugfs format ("count ip address error_code what",
 * tab-separated) or asi_faults.bt's ("@sites[ip, address]: count").
 */
static int cmd_suggest(int argc, char **argv)
{
	struct site *sites = NULL;
	size_t n = 0, cap = 0, lines = 0;
	char line[1024];
	FILE *f;

	if (argc != 1)
		die("suggest needs a fault log file, or - for stdin");
	f = strcmp(argv[0], "-") ? fopen(argv[0], "r") : stdin;
	if (!f)
		die("cannot read %s: %s", argv[0], strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char ip[128] = "", what[256] = "";
		unsigned long count;
		unsigned long long addr;
		struct site *s = NULL;
		size_t i;

		if (!parse_fault(line, &count, ip, sizeof(ip), &addr, what, sizeof(what)))
			continue;
		lines++;
		for (i = 0; i < n; i++)
			if (!strcmp(sites[i].what, what))
				s = &sites[i];
		if (!s) {
			if (n == cap) {
				cap = cap ? 2 * cap : 32;
				sites = xrealloc(sites, cap * sizeof(*sites));
			}
			s = &sites[n++];
			memset(s, 0, sizeof(*s));
			snprintf(s->what, sizeof(s->what), "%s", what);
		}
		if (count > s->ip_count) {
			snprintf(s->ip, sizeof(s->ip), "%s", ip);
			s->ip_count = count;
		}
		s->count += count;
		site_add_page(s, addr);
	}
	if (f != stdin)
		fclose(f);
	if (!lines)
		die("%s: no fault records (expected asi/faults or asi_faults.bt output)", argv[0]);
	qsort(sites, n, sizeof(*sites), cmp_site);
	printf("%4s %8s %5s  %-44s %s\n", "rank", "faults", "pages", "target", "top site");
	for (size_t i = 0; i < n; i++) {
		printf("%4zu %8lu %5zu  %-44s %s\n       -> %s\n", i + 1, sites[i].count,
		       sites[i].npages, sites[i].what, sites[i].ip, advice(sites[i].what));
		free(sites[i].pages);
	}
	free(sites);
	return 0;
}

/*
 * exposure: how long a guest shared its core with something else, from an
 * ftrace text trace (tracefs "trace" or "trace_pipe") of asi_enter,
 * asi_exit, asi_fault, kvm_entry, kvm_exit and sched_switch.
 *
 * Each CPU's events, in its own time order, give its state: its table
 * (the full table, a domain's restricted table, or relaxed: still in the
 * domain but on the full table after a fallback fault), whether it is in
 * guest mode and of which VM (a VM is named by its domain's id), and
 * whether it runs the idle task (the last sched_switch's next_pid is 0;
 * not known before the first). Guest mode lasts from kvm_entry to the
 * next kvm_exit, of the VM whose domain the CPU is on then; where it is
 * not on the domain's table yet, the kernel enters it after the event,
 * right before VM-entry, and guest mode starts at that asi_enter instead
 * (with none before the kvm_exit: from kvm_entry, of the relaxed domain or
 * of VM "?"). A CPU's state is unknown before its first event, and again
 * from its last event before lost events until its next one. A core is
 * counted while every CPU of it is known.
 *
 * Exposure is the time a CPU is in guest mode of VM X while another CPU
 * of its core is in guest mode of another VM, on another VM's restricted
 * table, or on the full table (no domain, or relaxed) running a task
 * other than the idle task; the time beside one on the full table running
 * the idle task is counted apart (--count-idle adds it).
 */

enum ev_type {
	EV_OTHER, EV_LOST, EV_ASI_ENTER, EV_ASI_EXIT, EV_ASI_FAULT,
	EV_KVM_ENTRY, EV_KVM_EXIT, EV_SWITCH, EV_GUEST_START, EV_GUEST_END,
};

struct ev {
	uint64_t t;		/* ns */
	long long arg;		/* the domain, or sched_switch's next_pid */
	enum ev_type type;
	size_t seq;		/* the order read, for place_windows() */
};

enum table { T_FULL, T_RESTRICTED, T_RELAXED };
enum task { TASK_UNKNOWN, TASK_IDLE, TASK_BUSY };

#define VM_NONE		(-1LL)	/* guest mode with no domain entered: "?" */

struct cpu_state {
	bool known;
	bool guest;
	enum table table;
	enum task task;
	long long domain;	/* T_RESTRICTED, T_RELAXED */
	long long vm;		/* in guest mode */
};

struct seg {
	uint64_t t;		/* the state from t on */
	struct cpu_state s;
};

struct cpu_trace {
	struct ev *ev;
	size_t n, cap;
	struct seg *seg;
	size_t nseg;
	unsigned long lost;	/* LOST lines */
	unsigned long windows;	/* asi_guest events: guest mode from them alone */
	uint64_t last;		/* the last line's timestamp */
};

/*
 * What a guest had beside it, in priority order: an instant of a core
 * counts once, under the highest cause among its CPUs (two causes at once
 * need a core of more than two CPUs, or two guests beside each other,
 * both X_GUEST).
 */
enum cause { X_NONE, X_IDLE, X_DOMAIN, X_GUEST, X_FULL, NR_CAUSES };

struct tally {
	uint64_t cause[NR_CAUSES];
	uint64_t unknown;	/* of X_FULL: beside a task not known yet */
	uint64_t guest;		/* guest time, summed over CPUs */
};

struct core {
	int *cpu;
	int n;
	char name[64];
	bool counted;
	uint64_t from, span;	/* counted from, and for how long */
	struct tally t;
};

struct vm_tally {
	long long vm;
	struct tally t;
};

struct pair_tally {
	long long vm, other;
	uint64_t guest, domain;	/* other in guest mode, in its domain */
};

static struct cpu_trace *cpus;
static int ncpus;
static struct vm_tally *vms_x;
static size_t nvms_x;
static struct pair_tally *pairs_x;
static size_t npairs_x;
static bool count_idle;
static unsigned long immediate_entries;
static unsigned long warn_no_domain, warn_exit_only, warn_entry_twice;

static struct cpu_trace *cpu_trace(int cpu)
{
	if (cpu >= ncpus) {
		cpus = xrealloc(cpus, (cpu + 1) * sizeof(*cpus));
		memset(cpus + ncpus, 0, (cpu + 1 - ncpus) * sizeof(*cpus));
		ncpus = cpu + 1;
	}
	return &cpus[cpu];
}

static void ev_add(struct cpu_trace *c, uint64_t t, enum ev_type type, long long arg)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 256;
		c->ev = xrealloc(c->ev, c->cap * sizeof(*c->ev));
	}
	c->ev[c->n] = (struct ev){ .t = t, .arg = arg, .type = type, .seq = c->n };
	c->n++;
}

/* "SECONDS.FRACTION:", 1 to 9 decimals, in ns; *@decimals: how many. */
static bool parse_timestamp(const char *s, uint64_t *ns, int *decimals)
{
	unsigned long long sec = 0, frac = 0;
	int d = 0;

	if (!isdigit((unsigned char)*s))
		return false;
	while (isdigit((unsigned char)*s)) {
		if (sec > 1000000000000ULL)
			return false;
		sec = sec * 10 + *s++ - '0';
	}
	if (*s++ != '.')
		return false;
	while (isdigit((unsigned char)*s) && d < 9) {
		frac = frac * 10 + *s++ - '0';
		d++;
	}
	if (!d || strcmp(s, ":"))
		return false;
	*decimals = d;
	while (d++ < 9)
		frac *= 10;
	*ns = sec * 1000000000ULL + frac;
	return true;
}

/* "[NNN]": the CPU. */
static bool parse_cpu_field(const char *s, int *cpu)
{
	char *end;
	long v;

	if (*s != '[' || !isdigit((unsigned char)s[1]))
		return false;
	v = strtol(s + 1, &end, 10);
	if (strcmp(end, "]") || v > 65535)
		return false;
	*cpu = v;
	return true;
}

/*
 * An event line: "TASK-PID [CPU] FLAGS TIMESTAMP: EVENT: PAYLOAD", the
 * flags optional (trace-cmd report has none), TASK possibly with spaces,
 * "(TGID)" possibly after it. Splits @line in place.
 */
static bool parse_event_line(char *line, int *cpu, uint64_t *t, int *decimals,
			     char **event, char **payload)
{
	char *tok[64], *save, *p;
	int n = 0, i, k;

	for (p = strtok_r(line, " \t\n", &save); p && n < 64; p = strtok_r(NULL, " \t\n", &save))
		tok[n++] = p;
	for (i = 1; i < n; i++) {
		if (!parse_cpu_field(tok[i], cpu))
			continue;
		for (k = i + 1; k <= i + 2 && k + 1 < n; k++) {
			size_t len = strlen(tok[k + 1]);

			if (!parse_timestamp(tok[k], t, decimals) || len < 2 ||
			    tok[k + 1][len - 1] != ':')
				continue;
			tok[k + 1][len - 1] = 0;
			*event = tok[k + 1];
			/* The payload: the rest of the line, as strtok_r left it. */
			*payload = k + 2 < n ? tok[k + 2] : "";
			for (int m = k + 2; m + 1 < n; m++)
				tok[m][strlen(tok[m])] = ' ';
			return true;
		}
	}
	return false;
}

static const char *vm_name(long long vm, char *buf, size_t len)
{
	if (vm == VM_NONE)
		return "?";
	snprintf(buf, len, "%lld", vm);
	return buf;
}

/*
 * Read the trace into per-CPU event lists. Returns the number of events;
 * *@first, *@last: the trace's first and last timestamps.
 */
static size_t read_trace(const char *path, uint64_t *first, uint64_t *last, int *decimals)
{
	char *line = NULL, *copy = NULL;
	size_t cap = 0, events = 0;
	unsigned long lineno = 0;
	FILE *f;

	f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	if (!f)
		die("cannot read %s: %s", path, strerror(errno));
	*decimals = 0;
	while (getline(&line, &cap, f) > 0) {
		char *s = trim(line), *event, *payload, *p, *q;
		unsigned long lost;
		unsigned int dom;
		struct cpu_trace *c;
		enum ev_type type;
		long long arg = 0;
		int cpu, d;
		uint64_t t;

		lineno++;
		if (!*s || *s == '#')
			continue;
		free(copy);
		copy = xstrdup(s);
		if (sscanf(s, "CPU:%d [LOST %lu EVENTS]", &cpu, &lost) == 2 && cpu >= 0 &&
		    cpu <= 65535) {
			c = cpu_trace(cpu);
			c->lost++;
			ev_add(c, c->n ? c->ev[c->n - 1].t : 0, EV_LOST, 0);
			continue;
		}
		if (!parse_event_line(s, &cpu, &t, &d, &event, &payload))
			die("%s:%lu: cannot parse '%s'", path, lineno, copy);
		if (!strcmp(event, "asi_enter") || !strcmp(event, "asi_exit") ||
		    !strcmp(event, "asi_fault")) {
			if (sscanf(payload, "domain=%u", &dom) != 1)
				die("%s:%lu: %s without domain=: '%s'", path, lineno, event, copy);
			type = !strcmp(event, "asi_enter") ? EV_ASI_ENTER :
			       !strcmp(event, "asi_exit") ? EV_ASI_EXIT : EV_ASI_FAULT;
			arg = dom;
		} else if (!strcmp(event, "asi_guest")) {
			unsigned long long entry_ago, exit_ago;
			unsigned int imm = 0;
			int n;

			n = sscanf(payload, "domain=%u entry_ago_ns=%llu exit_ago_ns=%llu immediate=%u",
				   &dom, &entry_ago, &exit_ago, &imm);
			if (n < 3 || exit_ago > entry_ago)
				die("%s:%lu: asi_guest without domain=, entry_ago_ns=, exit_ago_ns=: '%s'",
				    path, lineno, copy);
			/*
			 * The window lies before the event: its two ends are
			 * placed where they belong once every event is read.
			 * VM-entries made to exit before the guest's first
			 * instruction are only counted; a run of nothing
			 * else has no window (both 0).
			 */
			c = cpu_trace(cpu);
			c->windows++;
			immediate_entries += imm;
			if (entry_ago || exit_ago) {
				ev_add(c, t > entry_ago ? t - entry_ago : 0, EV_GUEST_START, dom);
				ev_add(c, t > exit_ago ? t - exit_ago : 0, EV_GUEST_END, dom);
			}
			continue;
		} else if (!strcmp(event, "kvm_entry")) {
			type = EV_KVM_ENTRY;
		} else if (!strcmp(event, "kvm_exit")) {
			type = EV_KVM_EXIT;
		} else if (!strcmp(event, "sched_switch")) {
			/* The last one: next_comm, before it, may hold anything. */
			q = NULL;
			for (p = strstr(payload, "next_pid="); p; p = strstr(p + 1, "next_pid="))
				q = p;
			p = q;
			if (!p || !strstr(payload, "==>") ||
			    sscanf(p, "next_pid=%lld", &arg) != 1)
				die("%s:%lu: sched_switch without next_pid=: '%s'", path, lineno,
				    copy);
			type = EV_SWITCH;
		} else {
			type = EV_OTHER;
		}
		c = cpu_trace(cpu);
		if (c->n && t < c->last)
			die("%s:%lu: CPU %d's time goes backwards (%llu.%09llu after %llu.%09llu): '%s'",
			    path, lineno, cpu, (unsigned long long)(t / 1000000000),
			    (unsigned long long)(t % 1000000000),
			    (unsigned long long)(c->last / 1000000000),
			    (unsigned long long)(c->last % 1000000000), copy);
		c->last = t;
		ev_add(c, t, type, arg);
		if (!events || t < *first)
			*first = t;
		if (!events || t > *last)
			*last = t;
		if (d > *decimals)
			*decimals = d;
		events++;
	}
	if (ferror(f))
		die("cannot read %s: %s", path, strerror(errno));
	if (f != stdin)
		fclose(f);
	free(line);
	free(copy);
	if (!events)
		die("%s: no events (is tracing on, with the asi, kvm_entry, kvm_exit and sched_switch events?)",
		    path);
	return events;
}

/* Events by time; at the same instant, in the order they were added. */
static int cmp_ev(const void *a, const void *b)
{
	const struct ev *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * A CPU with asi_guest events: guest mode is their windows (the guest's
 * time to the instruction), kvm_entry and kvm_exit only mark the entry
 * code around it. The windows' ends join the other events in time order.
 */
static void place_windows(struct cpu_trace *c)
{
	if (!c->windows)
		return;
	for (size_t i = 0; i < c->n; i++) {
		if (c->ev[i].type == EV_KVM_ENTRY || c->ev[i].type == EV_KVM_EXIT)
			c->ev[i].type = EV_OTHER;
	}
	qsort(c->ev, c->n, sizeof(*c->ev), cmp_ev);
}

/*
 * Whether the kernel enters the domain after this kvm_entry: it does so
 * right before VM-entry (kvm_asi_enter() in vmx_vcpu_enter_exit()), after
 * the event, when the CPU is not on the domain's table already.
 */
static bool asi_enter_follows(const struct cpu_trace *c, size_t i)
{
	for (i++; i < c->n; i++) {
		if (c->ev[i].type == EV_ASI_ENTER)
			return true;
		if (c->ev[i].type == EV_KVM_EXIT || c->ev[i].type == EV_KVM_ENTRY ||
		    c->ev[i].type == EV_LOST)
			return false;
	}
	return false;
}

/* A CPU's events, as the states it went through. */
static void build_segments(struct cpu_trace *c)
{
	struct cpu_state s = { 0 };
	bool pending = false;	/* kvm_entry seen, the asi_enter before VM-entry not yet */

	c->seg = xrealloc(NULL, (c->n + 1) * sizeof(*c->seg));
	for (size_t i = 0; i < c->n; i++) {
		const struct ev *e = &c->ev[i];

		if (e->type == EV_LOST) {
			s.known = false;
			c->seg[c->nseg++] = (struct seg){ e->t, s };
			continue;
		}
		if (!s.known) {
			s = (struct cpu_state){ .known = true, .table = T_FULL,
						.task = TASK_UNKNOWN, .domain = VM_NONE,
						.vm = VM_NONE };
			pending = false;
		}
		switch (e->type) {
		case EV_ASI_ENTER:
			s.table = T_RESTRICTED;
			s.domain = e->arg;
			if (pending) {
				s.guest = true;
				s.vm = e->arg;
				pending = false;
			}
			break;
		case EV_ASI_EXIT:
			s.table = T_FULL;
			s.domain = VM_NONE;
			break;
		case EV_ASI_FAULT:
			s.table = T_RELAXED;
			s.domain = e->arg;
			break;
		case EV_KVM_ENTRY:
			if (s.guest || pending)
				warn_entry_twice++;
			s.guest = false;
			pending = false;
			if (s.table == T_RESTRICTED) {
				s.guest = true;
				s.vm = s.domain;
			} else if (asi_enter_follows(c, i)) {
				pending = true;
			} else {
				s.guest = true;
				s.vm = s.table == T_RELAXED ? s.domain : VM_NONE;
				if (s.vm == VM_NONE)
					warn_no_domain++;
			}
			break;
		case EV_KVM_EXIT:
			if (!s.guest && !pending)
				warn_exit_only++;
			s.guest = false;
			pending = false;
			break;
		case EV_SWITCH:
			s.task = e->arg ? TASK_BUSY : TASK_IDLE;
			break;
		case EV_GUEST_START:
			if (s.guest)
				warn_entry_twice++;
			s.guest = true;
			s.vm = e->arg;
			break;
		case EV_GUEST_END:
			s.guest = false;
			break;
		default:
			break;
		}
		c->seg[c->nseg++] = (struct seg){ e->t, s };
	}
}

static struct tally *vm_tally(long long vm)
{
	for (size_t i = 0; i < nvms_x; i++)
		if (vms_x[i].vm == vm)
			return &vms_x[i].t;
	vms_x = xrealloc(vms_x, (nvms_x + 1) * sizeof(*vms_x));
	vms_x[nvms_x] = (struct vm_tally){ .vm = vm };
	return &vms_x[nvms_x++].t;
}

static struct pair_tally *pair_tally(long long vm, long long other)
{
	for (size_t i = 0; i < npairs_x; i++)
		if (pairs_x[i].vm == vm && pairs_x[i].other == other)
			return &pairs_x[i];
	pairs_x = xrealloc(pairs_x, (npairs_x + 1) * sizeof(*pairs_x));
	pairs_x[npairs_x] = (struct pair_tally){ .vm = vm, .other = other };
	return &pairs_x[npairs_x++];
}

/* What CPU @b's state @s is to a guest of VM @x beside it. */
static enum cause cause_of(const struct cpu_state *s, long long x)
{
	if (s->guest)
		return s->vm == x ? X_NONE : X_GUEST;
	if (s->table == T_RESTRICTED)
		return s->domain == x ? X_NONE : X_DOMAIN;
	return s->task == TASK_IDLE ? X_IDLE : X_FULL;
}

/*
 * What the CPUs of @core in states @s are beside a guest of VM @x: the
 * highest cause among them (a CPU in guest mode of @x itself is none).
 * *@unknown: X_FULL only from tasks not known yet.
 */
static enum cause beside(const struct core *core, struct cpu_state **s, long long x,
			 bool *unknown)
{
	enum cause worst = X_NONE, c;
	bool busy = false, unk = false;

	for (int b = 0; b < core->n; b++) {
		c = cause_of(s[b], x);
		if (c > worst)
			worst = c;
		if (c == X_FULL) {
			busy |= s[b]->task == TASK_BUSY;
			unk |= s[b]->task == TASK_UNKNOWN;
		}
	}
	*unknown = worst == X_FULL && unk && !busy;
	return worst;
}

/* The other VMs beside a guest of VM @x, in guest mode or in their domain. */
static void tally_pairs(const struct core *core, struct cpu_state **s, long long x,
			uint64_t dt)
{
	for (int b = 0; b < core->n; b++) {
		enum cause c = cause_of(s[b], x);
		long long other = c == X_GUEST ? s[b]->vm : s[b]->domain;
		struct pair_tally *p;
		bool dup = false;

		if (c != X_GUEST && c != X_DOMAIN)
			continue;
		for (int k = 0; k < b; k++)
			dup |= cause_of(s[k], x) == c &&
			       (c == X_GUEST ? s[k]->vm : s[k]->domain) == other;
		if (dup)
			continue;
		p = pair_tally(x, other);
		if (c == X_GUEST)
			p->guest += dt;
		else
			p->domain += dt;
	}
}

/* Add @dt ns of the core's CPUs in states @s to the tallies; the cause. */
static enum cause tally_interval(struct core *core, struct cpu_state **s, uint64_t dt)
{
	enum cause worst = X_NONE, w;
	bool unknown = false, known_full = false, unk, seen;

	for (int a = 0; a < core->n; a++) {
		struct tally *vt;

		if (!s[a]->guest)
			continue;
		vt = vm_tally(s[a]->vm);
		vt->guest += dt;
		core->t.guest += dt;
		/* Each VM once per instant, at its first CPU in guest mode. */
		seen = false;
		for (int k = 0; k < a; k++)
			seen |= s[k]->guest && s[k]->vm == s[a]->vm;
		if (seen)
			continue;
		w = beside(core, s, s[a]->vm, &unk);
		vt->cause[w] += dt;
		if (unk)
			vt->unknown += dt;
		tally_pairs(core, s, s[a]->vm, dt);
		if (w > worst)
			worst = w;
		if (w == X_FULL) {
			unknown |= unk;
			known_full |= !unk;
		}
	}
	core->t.cause[worst] += dt;
	if (worst == X_FULL && unknown && !known_full)
		core->t.unknown += dt;
	return worst;
}

static const char *const cause_names[NR_CAUSES] = {
	[X_NONE] = "none", [X_IDLE] = "idle", [X_DOMAIN] = "other domain",
	[X_GUEST] = "other guest", [X_FULL] = "full table",
};

static unsigned long list_max, listed;

static const char *fmt_time(uint64_t t, int decimals, char *buf, size_t len);

/* --list: one line per exposed interval, each CPU's state in it. */
static void list_interval(const struct core *core, struct cpu_state **s, uint64_t from,
			  uint64_t dt, enum cause cause, int decimals)
{
	static const char *const tables[] = { "full", "restricted", "relaxed" };
	static const char *const tasks[] = { "?", "idle", "task" };
	char b[32];

	if (listed++ >= list_max)
		return;
	printf("  exposed at %s for %llu ns (%s):", fmt_time(from, decimals, b, sizeof(b)),
	       (unsigned long long)dt, cause_names[cause]);
	for (int k = 0; k < core->n; k++) {
		printf(" CPU %d %s", core->cpu[k], tables[s[k]->table]);
		if (s[k]->table != T_FULL)
			printf(" %lld", s[k]->domain);
		printf(" %s", tasks[s[k]->task]);
		if (s[k]->guest)
			printf(" guest %lld", s[k]->vm);
		printf(k + 1 < core->n ? ";" : "\n");
	}
}

/* Items "N" or "N-M" separated by @sep, into @core's CPUs. */
static bool parse_cpus(const char *s, char sep, struct core *core)
{
	char *end;
	long a, b;

	for (;;) {
		if (!isdigit((unsigned char)*s))
			return false;
		a = strtol(s, &end, 10);
		b = a;
		if (*end == '-') {
			if (!isdigit((unsigned char)end[1]))
				return false;
			b = strtol(end + 1, &end, 10);
		}
		if (b < a || b > 65535)
			return false;
		core->cpu = xrealloc(core->cpu, (core->n + b - a + 1) * sizeof(*core->cpu));
		while (a <= b)
			core->cpu[core->n++] = a++;
		if (!*end)
			return true;
		if (*end != sep)
			return false;
		s = end + 1;
	}
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/*
 * Add @core to @cores (sorted, named as a CPU list), unless one with the
 * same CPUs is there (each sibling's thread_siblings_list names its core).
 */
static void add_core(struct core **cores, int *n, struct core *core, const char *what)
{
	size_t len = 0;

	qsort(core->cpu, core->n, sizeof(*core->cpu), cmp_int);
	for (int i = 1; i < core->n; i++)
		if (core->cpu[i] == core->cpu[i - 1])
			die("%s: CPU %d twice", what, core->cpu[i]);
	for (int i = 0; i < *n; i++) {
		struct core *o = &(*cores)[i];
		bool same = o->n == core->n;

		for (int k = 0; same && k < o->n; k++)
			same = o->cpu[k] == core->cpu[k];
		if (same) {
			free(core->cpu);
			return;
		}
		for (int k = 0; k < o->n; k++)
			for (int m = 0; m < core->n; m++)
				if (o->cpu[k] == core->cpu[m])
					die("%s: CPU %d in two cores (%s and another)", what,
					    core->cpu[m], o->name);
	}
	for (int i = 0; i < core->n && len < sizeof(core->name) - 16; i++) {
		int j = i;

		while (j + 1 < core->n && core->cpu[j + 1] == core->cpu[j] + 1)
			j++;
		len += snprintf(core->name + len, sizeof(core->name) - len, "%s%d", i ? "," : "",
				core->cpu[i]);
		if (j > i)
			len += snprintf(core->name + len, sizeof(core->name) - len, "-%d",
					core->cpu[j]);
		i = j;
	}
	*cores = xrealloc(*cores, (*n + 1) * sizeof(**cores));
	(*cores)[(*n)++] = *core;
}

/* --siblings: cores separated by ',', each "A-B" or "A+B[+C...]". */
static int siblings_from_arg(const char *arg, struct core **cores)
{
	char *copy = xstrdup(arg), *tok, *save;
	int n = 0;

	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct core core = { 0 };

		if (!parse_cpus(tok, '+', &core))
			die("--siblings: cannot parse '%s' in '%s' (cores separated by ',', each A-B or A+B)",
			    tok, arg);
		add_core(cores, &n, &core, "--siblings");
	}
	free(copy);
	if (!n)
		die("--siblings: no cores in '%s'", arg);
	return n;
}

/* The cores, from each CPU's topology/thread_siblings_list under @sysfs. */
static int siblings_from_sysfs(const char *sysfs, struct core **cores)
{
	char *dir = path_of("%s/devices/system/cpu", sysfs), line[256];
	struct dirent *de;
	int n = 0, files = 0;
	DIR *d;

	d = opendir(dir);
	if (!d)
		die("cannot list %s: %s: name the siblings with --siblings (e.g. 0-1,2-3)", dir,
		    strerror(errno));
	while ((de = readdir(d))) {
		char *p;
		FILE *f;

		if (strncmp(de->d_name, "cpu", 3) || !isdigit((unsigned char)de->d_name[3]))
			continue;
		p = path_of("%s/%s/topology/thread_siblings_list", dir, de->d_name);
		f = fopen(p, "r");
		if (f) {
			struct core core = { 0 };

			if (!fgets(line, sizeof(line), f) || !parse_cpus(trim(line), ',', &core))
				die("%s: cannot parse '%s'", p, trim(line));
			fclose(f);
			add_core(cores, &n, &core, p);
			files++;
		}
		free(p);
	}
	closedir(d);
	if (!files)
		die("no %s/cpu*/topology/thread_siblings_list: name the siblings with --siblings (e.g. 0-1,2-3)",
		    dir);
	free(dir);
	return n;
}

/* @cpu's events, or NULL where the trace has none. */
static const struct cpu_trace *traced_cpu(int cpu)
{
	return cpu < ncpus ? &cpus[cpu] : NULL;
}

/* Walk the states of @core's CPUs together, to @end, the trace's last event. */
static void sweep_core(struct core *core, uint64_t end, int decimals)
{
	static struct cpu_state unknown;
	struct cpu_state **s = xrealloc(NULL, core->n * sizeof(*s));
	size_t *pos = xrealloc(NULL, core->n * sizeof(*pos));
	uint64_t prev = 0, t;
	bool all;

	for (int k = 0; k < core->n; k++) {
		s[k] = &unknown;
		pos[k] = 0;
	}
	for (;;) {
		t = UINT64_MAX;
		for (int k = 0; k < core->n; k++) {
			const struct cpu_trace *c = traced_cpu(core->cpu[k]);

			if (c && pos[k] < c->nseg && c->seg[pos[k]].t < t)
				t = c->seg[pos[k]].t;
		}
		all = true;
		for (int k = 0; k < core->n; k++)
			all &= s[k]->known;
		if (all && core->counted && (t == UINT64_MAX ? end : t) > prev) {
			uint64_t dt = (t == UINT64_MAX ? end : t) - prev;

			enum cause w;

			core->span += dt;
			w = tally_interval(core, s, dt);
			if (w == X_FULL || w == X_GUEST || w == X_DOMAIN || (w == X_IDLE && count_idle))
				list_interval(core, s, prev, dt, w, decimals);
		}
		if (t == UINT64_MAX)
			break;
		for (int k = 0; k < core->n; k++) {
			const struct cpu_trace *c = traced_cpu(core->cpu[k]);

			while (c && pos[k] < c->nseg && c->seg[pos[k]].t == t)
				s[k] = &c->seg[pos[k]++].s;
		}
		all = true;
		for (int k = 0; k < core->n; k++)
			all &= s[k]->known;
		if (all && !core->counted) {
			core->counted = true;
			core->from = t;
		}
		prev = t;
	}
	free(s);
	free(pos);
}

static uint64_t exposed(const struct tally *t)
{
	return t->cause[X_FULL] + t->cause[X_GUEST] + t->cause[X_DOMAIN] +
	       (count_idle ? t->cause[X_IDLE] : 0);
}

static void print_causes(const struct tally *t, const char *idle_what)
{
	printf("%llu ns: full table %llu, other guest %llu, other domain %llu; %s %llu ns (%s)",
	       (unsigned long long)exposed(t), (unsigned long long)t->cause[X_FULL],
	       (unsigned long long)t->cause[X_GUEST], (unsigned long long)t->cause[X_DOMAIN],
	       idle_what, (unsigned long long)t->cause[X_IDLE],
	       count_idle ? "counted" : "not counted");
}

static const char *fmt_time(uint64_t t, int decimals, char *buf, size_t len)
{
	if (decimals <= 6)
		snprintf(buf, len, "%llu.%06llu", (unsigned long long)(t / 1000000000),
			 (unsigned long long)(t % 1000000000 / 1000));
	else
		snprintf(buf, len, "%llu.%09llu", (unsigned long long)(t / 1000000000),
			 (unsigned long long)(t % 1000000000));
	return buf;
}

static int cmp_vm_id(long long a, long long b)
{
	/* VM ? last. */
	if (a == b)
		return 0;
	if (a == VM_NONE || b == VM_NONE)
		return a == VM_NONE ? 1 : -1;
	return a < b ? -1 : 1;
}

static int cmp_vm_tally(const void *a, const void *b)
{
	return cmp_vm_id(((const struct vm_tally *)a)->vm, ((const struct vm_tally *)b)->vm);
}

static int cmp_pair_tally(const void *a, const void *b)
{
	const struct pair_tally *x = a, *y = b;

	return cmp_vm_id(x->vm, y->vm) ?: cmp_vm_id(x->other, y->other);
}

/* An option's decimal value, or die naming @what it counts. */
static unsigned long long option_number(const char *opt, const char *what, const char *arg)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-')
		die("%s: not a number of %s: '%s'", opt, what, arg);
	return v;
}

/*
 * exposure TRACE: the time a guest of one VM shared its core with a
 * sibling on the full table running a task, in guest mode of another VM,
 * or in another VM's domain. See usage() and README.md.
 */
static int cmd_exposure(int argc, char **argv)
{
	const char *trace = NULL, *siblings = NULL, *sysfs = "/sys";
	unsigned long long max_ns = 0;
	bool have_max = false;
	struct core *cores = NULL;
	uint64_t first = 0, last = 0, total = 0, guest = 0;
	int ncores, smt = 0, counted = 0, decimals;
	unsigned long windows = 0;
	char b1[32], b2[32];

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--siblings") && i + 1 < argc) {
			siblings = argv[++i];
		} else if (!strcmp(argv[i], "--sysfs") && i + 1 < argc) {
			sysfs = argv[++i];
		} else if (!strcmp(argv[i], "--count-idle")) {
			count_idle = true;
		} else if (!strcmp(argv[i], "--list") && i + 1 < argc) {
			list_max = option_number("--list", "intervals", argv[++i]);
		} else if (!strcmp(argv[i], "--max-ns") && i + 1 < argc) {
			max_ns = option_number("--max-ns", "ns", argv[++i]);
			have_max = true;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			die("exposure: unknown option, or one without its value: '%s'", argv[i]);
		} else if (trace) {
			die("exposure takes one trace file, not '%s' too", argv[i]);
		} else {
			trace = argv[i];
		}
	}
	if (!trace)
		die("exposure needs a trace file (tracefs trace or trace_pipe text), or - for stdin");
	ncores = siblings ? siblings_from_arg(siblings, &cores) :
		 siblings_from_sysfs(sysfs, &cores);
	read_trace(trace, &first, &last, &decimals);
	for (int i = 0; i < ncores; i++)
		smt += cores[i].n > 1;
	if (!smt) {
		printf("exposure: no SMT siblings (%d cores of one CPU each): nothing to measure\n",
		       ncores);
		return 4;
	}

	for (int c = 0; c < ncpus; c++) {
		place_windows(&cpus[c]);
		build_segments(&cpus[c]);
		windows += cpus[c].windows;
	}
	for (int i = 0; i < ncores; i++) {
		if (cores[i].n < 2)
			continue;
		sweep_core(&cores[i], last, decimals);
		if (!cores[i].counted)
			continue;
		counted++;
		total += exposed(&cores[i].t);
		guest += cores[i].t.guest;
	}

	printf("exposure: %llu ns over %.6f s traced, %d cores (guest time %.6f s)\n",
	       (unsigned long long)total, (last - first) / 1e9, counted, guest / 1e9);
	printf("  guest mode from %s\n", windows ?
	       "asi_guest windows (VM-entry to VM-exit), where a CPU has them" :
	       "kvm_entry to kvm_exit");
	if (immediate_entries)
		printf("  %lu VM-entries exited before the guest's first instruction (an interrupt pending): not guest time\n",
		       immediate_entries);
	for (int i = 0; i < ncores; i++) {
		struct core *core = &cores[i];

		if (core->n < 2)
			continue;
		if (!core->counted) {
			int missing = -1;

			for (int k = 0; k < core->n && missing < 0; k++)
				if (core->cpu[k] >= ncpus || !cpus[core->cpu[k]].n)
					missing = core->cpu[k];
			printf("  core %s: not counted: ", core->name);
			if (missing >= 0)
				printf("CPU %d has no events in the trace\n", missing);
			else
				printf("never all its CPUs' states known at once\n");
			continue;
		}
		printf("  core %s: ", core->name);
		print_causes(&core->t, "sibling idle beside a guest");
		printf("; from %s for %.6f s, guest time %.6f s\n",
		       fmt_time(core->from, decimals, b1, sizeof(b1)), core->span / 1e9,
		       core->t.guest / 1e9);
		if (core->t.unknown)
			printf("  core %s: of the full table, %llu ns beside a task not known yet (before its CPU's first sched_switch)\n",
			       core->name, (unsigned long long)core->t.unknown);
	}
	if (nvms_x)
		qsort(vms_x, nvms_x, sizeof(*vms_x), cmp_vm_tally);
	for (size_t i = 0; i < nvms_x; i++) {
		printf("  VM %s: ", vm_name(vms_x[i].vm, b1, sizeof(b1)));
		print_causes(&vms_x[i].t, "sibling idle beside it");
		printf("; guest time %.6f s\n", vms_x[i].t.guest / 1e9);
	}
	if (npairs_x)
		qsort(pairs_x, npairs_x, sizeof(*pairs_x), cmp_pair_tally);
	for (size_t i = 0; i < npairs_x; i++)
		printf("  VM %s beside VM %s: %llu ns: in guest mode %llu, in its domain %llu\n",
		       vm_name(pairs_x[i].vm, b1, sizeof(b1)),
		       vm_name(pairs_x[i].other, b2, sizeof(b2)),
		       (unsigned long long)(pairs_x[i].guest + pairs_x[i].domain),
		       (unsigned long long)pairs_x[i].guest, (unsigned long long)pairs_x[i].domain);
	for (int c = 0; c < ncpus; c++)
		if (cpus[c].lost)
			printf("warning: CPU %d lost events (%lu LOST lines): its state is not known from its last event before each loss to its next event\n",
			       c, cpus[c].lost);
	if (warn_no_domain)
		printf("warning: %lu guest entries with no domain entered (VM ?): is ASI on?\n",
		       warn_no_domain);
	if (warn_entry_twice)
		printf("warning: %lu kvm_entry with no kvm_exit since the one before on that CPU\n",
		       warn_entry_twice);
	if (warn_exit_only)
		printf("note: %lu kvm_exit with no kvm_entry before it on that CPU (the trace began in guest mode): that guest time is not counted\n",
		       warn_exit_only);
	if (!counted) {
		printf("exposure: no core counted (no SMT core has events on all its CPUs): nothing measured\n");
		return 4;
	}
	if (have_max && total > max_ns) {
		printf("exposure: %llu ns is over --max-ns %llu\n", (unsigned long long)total,
		       max_ns);
		return 1;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [--debugfs DIR] COMMAND [ARGS]\n"
		"  summary [VM...]    pages mapped per owner class, against the full kernel map\n"
		"  diff A B           what one table maps and the other does not; A, B: a VM or 'kernel'\n"
		"  audit [VM...]      check every (or each named) VM's table for foreign data, and\n"
		"                     asi/secrets and the user half; exit 1 on a violation,\n"
		"                     2 if a check could not be done (INCOMPLETE)\n"
		"  suggest FILE|-     rank what to map from a fault log (asi/faults or asi_faults.bt)\n"
		"  exposure [--siblings LIST] [--count-idle] [--max-ns N] [--list N] TRACE|-\n"
		"                     from an ftrace text trace of the asi, kvm_entry, kvm_exit\n"
		"                     and sched_switch events: the time a guest of one VM ran\n"
		"                     beside a hyperthread on the full table (not idle), in\n"
		"                     another VM's guest or in another VM's domain. LIST: cores\n"
		"                     separated by ',', each A-B or A+B (default: sysfs's\n"
		"                     thread_siblings_list). Exit 1 over --max-ns, 4 no SMT\n"
		"                     siblings or no core traced (skip)\n"
		"A VM is named as its folder in <debugfs>/kvm (PID-FD). --debugfs DIR reads a\n"
		"recorded copy of debugfs. Exit: 0 ok, 1 a difference or violation (or an\n"
		"exposure over --max-ns), 2 an error (or an incomplete audit), 4 nothing to\n"
		"measure (exposure).\n",
		prog);
}

int main(int argc, char **argv)
{
	int i = 1;

	if (argc > 2 && !strcmp(argv[1], "--debugfs")) {
		debugfs = argv[2];
		recorded = true;
		i = 3;
	}
	if (i >= argc) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[i], "summary"))
		return cmd_summary(argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "diff"))
		return cmd_diff(argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "audit"))
		return cmd_audit(argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "suggest"))
		return cmd_suggest(argc - i - 1, argv + i + 1);
	if (!strcmp(argv[i], "exposure"))
		return cmd_exposure(argc - i - 1, argv + i + 1);
	fprintf(stderr, "%s: unknown command '%s'\n", prog, argv[i]);
	usage(stderr);
	return 2;
}
