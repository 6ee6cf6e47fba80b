# SPDX-License-Identifier: GPL-2.0
#
# KVM Address Space Isolation: build, boot and test the patched kernel.
# See README.md. Every target builds what is stale first.

SHELL := /bin/bash
S := scripts

# The scripts run their builds in parallel themselves (JOBS) and install
# what they need with apt-get, which cannot run twice at once: one target
# at a time, even under make -j.
.NOTPARALLEL:

.PHONY: all help tree refresh kernel kernel-modules kernel-debug kernel-noasi kernel-l2hv \
	selftests image image-default image-bpf image-modules image-debug \
	image-vmx image-bench tools-test entry-window entry-window-modules \
	check check-full check-modules check-vmx check-debug stress demo bench \
	bench-quick bench-l2-12 bench-faults-cpus series verify-series clean distclean

all: image

help:
	@echo "make all                  the default: make image"
	@echo "make help                 this list"
	@echo "make demo                 boot asi=on and run KVM guests; then asi=off vs asi=on on a QEMU guest's virtio I/O"
	@echo "make check                the test suite (short form: CI)"
	@echo "make check-full           every upstream KVM selftest, asi=off and asi=on"
	@echo "make check-modules        boot the KVM-as-modules kernel and load kvm_amd"
	@echo "make check-vmx            boot asi=off and asi=on on Bochs's Haswell (VMX, EPT, VPID, PCID)"
	@echo "make check-debug          the debug kernel (lockdep, KASAN, kmemleak, fault injection): asi=on"
	@echo "make stress               the long stress run (make check runs its short form)"
	@echo "make tree                 assemble out/linux: Debian's 6.12 source + our files + patches/series"
	@echo "make refresh              export commits made in out/linux back into the project"
	@echo "make kernel               build the test kernel (out/build/default)"
	@echo "make kernel-modules       build the configuration with KVM as modules (out/build/modules)"
	@echo "make kernel-debug         build the debug kernel (out/build/debug)"
	@echo "make kernel-noasi         build the kernel with ASI compiled out (out/build/noasi)"
	@echo "make kernel-l2hv          build the Hyper-V-aware L2 guest kernel (out/build/l2hv)"
	@echo "make selftests            build the KVM selftests, static"
	@echo "make image                build make check's initramfs images: image-default and image-bpf"
	@echo "make image-default        build the test initramfs (with page-table-tools' asi-pt)"
	@echo "make image-bpf            build the test initramfs with bpftrace and perf added"
	@echo "make image-modules        build the test initramfs of the KVM-as-modules kernel, with its modules"
	@echo "make image-debug          build the test initramfs of the debug kernel"
	@echo "make image-vmx            build the slim initramfs of the Bochs machine (make check-vmx)"
	@echo "make image-bench          build the benchmark initramfs (QEMU and an L2 guest added)"
	@echo "make tools-test           asi-pt's unit tests and the cost model on recorded input (in make check)"
	@echo "make entry-window         static check asi/entry_window on vmlinux.o, after its self-test"
	@echo "make entry-window-modules the same for kvm.ko, kvm-intel.ko, kvm-amd.ko"
	@echo "make bench                asi=off / asi=on / compiled out, side by side, 5 repetitions"
	@echo "make bench-quick          the same, one repetition"
	@echo "make bench-l2-12          twelve L2 guests at once, asi=off / asi=on / compiled out, 3 repetitions"
	@echo "make bench-faults-cpus    where an L2 guest falls back: on xAPIC, with two vCPUs, Hyper-V-aware (asi=on)"
	@echo "make series               write the upstream series with its cover letter to out/series/"
	@echo "make verify-series        check it: applies, checkpatch, sign-offs, every commit builds"
	@echo "make clean                remove the builds, images and logs (out/build, out/image, out/logs)"
	@echo "make distclean            remove out/, the assembled tree included"

tree:
	@$(S)/tree.sh

refresh:
	@$(S)/refresh.sh

kernel: tree
	@$(S)/kernel.sh default

kernel-modules: tree
	@$(S)/kernel.sh modules

kernel-debug: tree
	@$(S)/kernel.sh debug

kernel-noasi: tree
	@$(S)/kernel.sh noasi

kernel-l2hv: tree
	@$(S)/kernel.sh l2hv

selftests: kernel
	@$(S)/selftests.sh

image: image-default image-bpf

image-default: selftests
	@$(S)/image.sh default

# Built from image-default's root.
image-bpf: image-default
	@$(S)/image-bpf.sh

image-modules: kernel-modules selftests
	@$(S)/image.sh modules

# On recorded input (page-table-tools/tests/, benchmarks/results/): needs
# neither kernel nor image. The model on a recorded results file with its
# per-event costs fixed gives a known figure (checked by hand).
MODEL_CHECK := benchmarks/results/2026-12-07-d25d381-dirty.json --flush-cycles 57 --ghz 2.6
tools-test:
	@mkdir -p out/build/tools
	@$(MAKE) -s -C page-table-tools OUT=$(CURDIR)/out/build/tools test
	@python3 benchmarks/model.py $(MODEL_CHECK) >out/build/tools/model.txt
	@grep -qF '| disk-write | 12 | 21.7 | 17.3 | 17.3 | 0.000 | 5840 | 2.25 |' \
		out/build/tools/model.txt || \
		{ echo "benchmarks/model.py: FAIL: its twelve-guest disk write row on" \
			"$(MODEL_CHECK) is not 5840 cycles:"; cat out/build/tools/model.txt; exit 1; }
	@echo "benchmarks/model.py: ok (recorded results, fixed costs: 5840 cycles per twelve-guest disk write)"

# asi/entry_window (scripts/entry-window.py): the self-test on the planted
# fixture, then the kernel. Exit status 1 names each read outside the
# always-mapped set in the entry window.
entry-window: kernel
	@python3 $(S)/entry-window.py --self-test
	@python3 $(S)/entry-window.py --build out/build/default

KVM_KO := $(addprefix out/build/modules/arch/x86/kvm/,kvm.ko kvm-intel.ko kvm-amd.ko)
entry-window-modules: kernel-modules
	@python3 $(S)/entry-window.py --self-test
	@python3 $(S)/entry-window.py --build out/build/modules $(addprefix --module ,$(KVM_KO))

check: image tools-test
	@python3 selftests/harness/asitest.py check --plan short

check-full: image
	@python3 selftests/harness/asitest.py check --plan full

image-bench: image-default
	@$(S)/image-bench.sh

bench: image-bench kernel-noasi
	@$(S)/bench.sh

bench-quick: image-bench kernel-noasi
	@$(S)/bench.sh --quick

bench-l2-12: image-bench kernel-noasi
	@$(S)/bench.sh --clocks realtime --plan bench-l2-12 --reps 3

# On demand: one asi=on boot of plan bench-faults-cpus, the L2 guest on
# xAPIC and then Hyper-V-aware (the l2hv kernel, in the bench image when
# it was built first). Prints the fallback sites and the guest's choices.
# Multi-threaded TCG, as make bench's L2 workloads: with single-threaded
# TCG the L2 guest stalls (docs/performance.md, "The L2 stall").
bench-faults-cpus: kernel-l2hv image-bench
	@python3 selftests/harness/asitest.py boot --kernel out/build/default/arch/x86/boot/bzImage \
		--initrd out/image/initramfs-bench.cpio --name faults-cpus --timeout 2400 \
		--accel tcg,thread=multi \
		--append "asi=on asitest.plan=bench-faults-cpus" --show l2

stress: image-default
	@python3 selftests/harness/asitest.py check --plan stress

image-debug: kernel-debug selftests
	@$(S)/image.sh debug

check-debug: image-debug
	@python3 selftests/harness/asitest.py check --plan debug --config debug

# The Bochs machine: an Intel CPU with VMX and PCID (docs/test-machines.md).
image-vmx: image-default
	@$(S)/image-vmx.sh

check-vmx: image-vmx
	@python3 selftests/harness/asitest.py check --machine bochs --plan vmx

check-modules: image-modules
	@python3 selftests/harness/asitest.py check --plan modules --config modules

series: tree
	@$(S)/series.sh write

verify-series: tree
	@$(S)/series.sh verify

demo: image image-bench
	@python3 selftests/harness/asitest.py demo

clean:
	rm -rf out/build out/image out/logs

distclean:
	rm -rf out
