/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the tests of Address Space Isolation (ASI): the host's ASI
 * state (debugfs asi/), a VM's asi/ debugfs files, and vCPU statistics
 * read by name.
 */
#ifndef SELFTEST_KVM_ASI_H
#define SELFTEST_KVM_ASI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kvm_util.h"

#define ASI_DEBUGFS	"/sys/kernel/debug/asi"

bool debugfs_first_line_is(const char *path, const char *line);
bool asi_is_on(void);
bool asi_smt_protocol_on(void);

void vm_asi_path(struct kvm_vm *vm, const char *file, char *path, size_t len);
FILE *vm_asi_fopen(struct kvm_vm *vm, const char *file, const char *mode);
int vm_asi_mapped(struct kvm_vm *vm, const char *owner);
char *vm_asi_read_faults(struct kvm_vm *vm);

/**
 * struct vcpu_stats - a vCPU's binary stats, some of them read by name
 * @fd: the vCPU's stats file descriptor (it holds a reference to the VM)
 * @header: the stats header
 * @desc: every descriptor
 * @nr: how many stats @found has
 * @found: the descriptors of the stats asked for, in their order
 */
struct vcpu_stats {
	int fd;
	struct kvm_stats_header header;
	struct kvm_stats_desc *desc;
	int nr;
	struct kvm_stats_desc **found;
};

void vcpu_stats_open(struct vcpu_stats *s, struct kvm_vcpu *vcpu,
		     const char * const *names, int nr);
void vcpu_stats_read(struct vcpu_stats *s, uint64_t *values);
void vcpu_stats_close(struct vcpu_stats *s);
bool vcpu_get_stat_by_name(struct kvm_vcpu *vcpu, const char *name, uint64_t *value);

#endif /* SELFTEST_KVM_ASI_H */
