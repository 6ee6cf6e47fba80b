// SPDX-License-Identifier: GPL-2.0
/*
 * Helpers for the tests of Address Space Isolation (ASI); see asi.h.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "asi.h"
#include "test_util.h"

/* Whether the first line of file @path is @line; no file: false. */
bool debugfs_first_line_is(const char *path, const char *line)
{
	char buf[128] = "";
	FILE *f = fopen(path, "r");
	bool is;

	if (!f)
		return false;
	is = fgets(buf, sizeof(buf), f) && !strcmp(buf, line);
	fclose(f);
	return is;
}

/*
 * Whether the host runs with asi=on. No file: ASI compiled out, or no
 * debugfs, which the tests that need ASI's debugfs files then report.
 */
bool asi_is_on(void)
{
	return debugfs_first_line_is(ASI_DEBUGFS "/state", "enabled: on\n");
}

/*
 * Whether ASI's SMT sibling protocol is on: a thread that leaves its table
 * then makes the other thread's next VM-entry flush too.
 */
bool asi_smt_protocol_on(void)
{
	return debugfs_first_line_is(ASI_DEBUGFS "/smt", "protocol: on\n");
}

/* The path of @vm's debugfs file asi/@file (a VM of this process). */
void vm_asi_path(struct kvm_vm *vm, const char *file, char *path, size_t len)
{
	snprintf(path, len, "/sys/kernel/debug/kvm/%d-%d/asi/%s", getpid(), vm->fd, file);
}

/* @vm's debugfs file asi/@file, opened with @mode, or NULL. */
FILE *vm_asi_fopen(struct kvm_vm *vm, const char *file, const char *mode)
{
	char path[128];

	vm_asi_path(vm, file, path, sizeof(path));
	return fopen(path, mode);
}

/* Ranges the VM's domain maps for @owner now (asi/mappings). */
int vm_asi_mapped(struct kvm_vm *vm, const char *owner)
{
	FILE *f = vm_asi_fopen(vm, "mappings", "r");
	char line[256];
	int n = 0, at;

	TEST_ASSERT(f, "ASI on, but no asi/mappings for the VM");
	/* "start-end pages class owner" */
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		at = -1;
		if (sscanf(line, "%*s %*s %*s %n", &at) != EOF && at > 0 &&
		    !strcmp(line + at, owner))
			n++;
	}
	fclose(f);
	return n;
}

/* The VM's fault log (asi/faults) as it is now, or NULL; free() it. */
char *vm_asi_read_faults(struct kvm_vm *vm)
{
	char *log = NULL;
	size_t len = 0;
	FILE *f, *m;
	int c;

	f = vm_asi_fopen(vm, "faults", "r");
	if (!f)
		return NULL;
	m = open_memstream(&log, &len);
	TEST_ASSERT(m, "open_memstream");
	while ((c = fgetc(f)) != EOF)
		fputc(c, m);
	fclose(m);
	fclose(f);
	return log;
}

/* Open @vcpu's stats and find @names (each must exist) for vcpu_stats_read(). */
void vcpu_stats_open(struct vcpu_stats *s, struct kvm_vcpu *vcpu,
		     const char * const *names, int nr)
{
	int i, j;

	s->fd = vcpu_get_stats_fd(vcpu);
	read_stats_header(s->fd, &s->header);
	s->desc = read_stats_descriptors(s->fd, &s->header);
	s->nr = nr;
	s->found = calloc(nr, sizeof(*s->found));
	TEST_ASSERT(s->found, "calloc");
	for (i = 0; i < nr; i++) {
		for (j = 0; j < s->header.num_desc; j++) {
			struct kvm_stats_desc *d = get_stats_descriptor(s->desc, j, &s->header);

			if (!strcmp(d->name, names[i]))
				s->found[i] = d;
		}
		TEST_ASSERT(s->found[i], "vCPU stat %s missing", names[i]);
	}
}

/* The current values of the stats vcpu_stats_open() found, in its order. */
void vcpu_stats_read(struct vcpu_stats *s, uint64_t *values)
{
	int i;

	for (i = 0; i < s->nr; i++)
		read_stat_data(s->fd, &s->header, s->found[i], &values[i], 1);
}

/* Close the stats before the VM: the fd holds a reference to it. */
void vcpu_stats_close(struct vcpu_stats *s)
{
	close(s->fd);
	free(s->desc);
	free(s->found);
}

/* @vcpu's stat @name, once; false if KVM has no stat of that name. */
bool vcpu_get_stat_by_name(struct kvm_vcpu *vcpu, const char *name, uint64_t *value)
{
	struct kvm_stats_header header;
	struct kvm_stats_desc *desc, *d;
	bool found = false;
	int fd, i;

	fd = vcpu_get_stats_fd(vcpu);
	read_stats_header(fd, &header);
	desc = read_stats_descriptors(fd, &header);
	for (i = 0; i < header.num_desc && !found; i++) {
		d = get_stats_descriptor(desc, i, &header);
		if (!strcmp(d->name, name)) {
			read_stat_data(fd, &header, d, value, 1);
			found = true;
		}
	}
	free(desc);
	close(fd);
	return found;
}
