#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make stress: the kselftests under a debug guest kernel.  Builds (or
# reuses) the KASAN + lockdep + kmemleak kernel of tools/debug-kernel.sh,
# builds the module against it and runs tools/vm-check.sh on it with a
# kmemleak scan after rmmod.  Too slow for make check: the build takes
# about 20 minutes once, and every program runs several times slower.
#
#   VM_TIMEOUT        seconds for the whole boot (default 5400)
#   VM_PROG_TIMEOUT   seconds per program inside the guest (default 1800)
#
# TAP lines as tools/vm-check.sh's; console in build/vm-debug/console.log.
set -eu

root_dir=$(cd "$(dirname "$0")/.." && pwd)
cd "$root_dir"

kdir=$(tools/debug-kernel.sh) || { echo "not ok - vm-debug: build the debug kernel"; exit 1; }
echo "ok - vm-debug: debug kernel $(cat "$kdir/include/config/kernel.release") in $kdir"
VM_KDIR=$kdir VM_KMEMLEAK=1 VM_WORK=$root_dir/build/vm-debug \
	VM_TIMEOUT=${VM_TIMEOUT:-5400} VM_PROG_TIMEOUT=${VM_PROG_TIMEOUT:-1800} \
	exec tools/vm-check.sh
