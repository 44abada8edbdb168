#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make demo: boots Debian's 6.1 kernel in QEMU, loads knitk with modprobe
# and runs knitk-demo (the pool example lib/examples/primes.c: a prime count
# on thread and on process workers, checked against a serial count, with
# each doorbell's waits and wakes sent, suppressed and spurious from the
# module's STATS; it fails on a wrong count, a wake of an idle worker or any
# spurious wake), showing the guest console (the kernel log is cut down to
# knitk's own lines).
#
# Without a VM (no qemu-system-x86_64 or no /boot/vmlinuz-6.1.*) it runs
# knitk-demo on this host instead, on the library's futex backend: the host
# kernel cannot load the module.
set -eu

root_dir=$(cd "$(dirname "$0")/.." && pwd)
cd "$root_dir"

# Installs what is missing; quick when everything is there.  Without root
# it cannot install, so go on and let the checks below explain.
if [ "$(id -u)" -eq 0 ]; then
	tools/deps.sh
fi

have_vm=1
command -v qemu-system-x86_64 >/dev/null || have_vm=0
compgen -G '/boot/vmlinuz-6.1.*' >/dev/null || have_vm=0
tools/kver.sh >/dev/null 2>&1 || have_vm=0
if [ "$have_vm" = 0 ]; then
	echo "demo: no VM (needs qemu-system-x86_64 and Debian's 6.1 kernel image and"
	echo "demo: headers; tools/deps.sh installs them as root): running on this host,"
	echo "demo: futex backend"
	make -s -C tools demo
	KNITK_BACKEND=futex build/tools/knitk-demo
	exit
fi

log=build/demo
mkdir -p "$log"
echo "demo: building the module and knitk-demo"
if ! make module KVER="$(tools/kver.sh)" >"$log/build.log" 2>&1 || ! make -C tools demo >>"$log/build.log" 2>&1; then
	tail -n 40 "$log/build.log" >&2
	echo "demo: build failed, log in $log/build.log" >&2
	exit 1
fi

set +e
tools/vm.sh -o build/vm-demo -t "${VM_TIMEOUT:-300}" build/tools/knitk-demo |
	awk '
		/^knitk-vm: dmesg begin/ { print; indmesg = 1; next }
		/^knitk-vm: dmesg end/ { indmesg = 0 }
		!indmesg || /knitk/ { print }
	'
rc=${PIPESTATUS[0]}
set -e

status=$(sed -n 's/^knitk-vm: end knitk-demo status=//p' build/vm-demo/console.log)
if [ "$rc" -ne 0 ] || [ "$status" != 0 ]; then
	echo "demo: failed (vm.sh status $rc, knitk-demo status ${status:-none})" >&2
	exit 1
fi
echo "demo: ok (console in build/vm-demo/console.log)"
