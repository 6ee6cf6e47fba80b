#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# l2bench.sh GUESTS DIVISOR: the seed's workloads in L2 guests (run in the
# emulated machine by plans/bench). GUESTS guests run each phase at once;
# each guest does 1/DIVISOR of the single-guest work, so that twelve guests
# fit the time budget (the figures are per operation either way).
#
#   warmup                        every page of L2's free memory written
#                                 once, so that the phases after it see
#                                 the steady state: guest memory already
#                                 in the host's nested page tables
#   disk-read, disk-write         sequential 64 KiB O_DIRECT, 16 MiB
#   disk-randread, disk-randwrite random 4 KiB O_DIRECT, 1024 requests
#   net-send                      UDP broadcast, 1400-byte payload, 4096
#                                 datagrams (l2mon's sink counts the frames)
#   compute                       a CPU loop in the guest, no exits (control)
#
# The guests boot with qboot (-bios qboot.rom): SeaBIOS's microvm image of
# QEMU 10 (seabios 1.16.3 from bookworm-backports) loops in real mode
# polling a port no microvm device answers, and never starts the kernel.
#
# Environment: L2_TIMEOUT (seconds l2mon waits for the guests' boot and for
# each phase; 600 by default), L2_CPU (QEMU -cpu of the guests; host,-svm
# by default), L2_SMP (vCPUs per guest; 1 by default), L2_KERNEL (the
# guests' kernel; /l2/bzImage by default), L2_PHASES (the phases to run
# after the warm-up, by name, space-separated; all by default).
set -eu
n=${1:?guests} d=${2:-1}
ip link set lo up
[ -c /dev/kvm ] || { echo "l2bench: no /dev/kvm"; exit 1; }
kernel=${L2_KERNEL:-/l2/bzImage}
[ -f "$kernel" ] || { echo "l2bench: FAIL: no guest kernel $kernel"; exit 1; }
faults=/sys/kernel/debug/asi/faults
[ -w $faults ] && echo 0 >$faults
rc=0
# The phases, warm-up first; L2_PHASES keeps only those it names.
set --
for p in "disk-read:read /dev/vda 65536 $((256 / d))" \
	 "disk-write:write /dev/vda 65536 $((256 / d))" \
	 "disk-randread:randread /dev/vda 4096 $((1024 / d))" \
	 "disk-randwrite:randwrite /dev/vda 4096 $((1024 / d))" \
	 "net-send:send 10.0.2.255 9 1400 $((4096 / d))" \
	 "compute:spin $((200 / d))"; do
	case " ${L2_PHASES:-${p%%:*}} " in
	*" ${p%%:*} "*) set -- "$@" -P "$p" ;;
	esac
done
l2mon -n "$n" -k "$kernel" -i /l2/initramfs.cpio -m 96 -t "${L2_TIMEOUT:-600}" \
	-P "warmup:touch" "$@" \
	-- qemu-system-x86_64 -M microvm,x-option-roms=off,pit=off,pic=off,rtc=off \
	-enable-kvm -cpu "${L2_CPU:-host,-svm}" -smp "${L2_SMP:-1}" -nodefaults -no-user-config \
	-display none -no-reboot -L /usr/share/qemu -bios qboot.rom || rc=$?
# Where the fallbacks of the whole run came from, most frequent first.
if [ -r $faults ]; then
	echo "l2bench: top ASI fault sites of the run:"
	grep -v '^count' $faults | sort -rn | head -12 | sed 's/^/l2bench: /'
fi
exit $rc
