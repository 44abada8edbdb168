#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make stress: the kselftests under a debug guest kernel.  Builds (or
# reuses) the KASAN + lockdep + kmemleak kernel of tools/debug-kernel.sh,
# builds the module against it and runs tools/vm-check.sh on it with a
# kmemleak scan after rmmod.  Too slow for make check: the build takes
# about 20 minutes once, and every program runs several times slower.
#
#   VM_TIMEOUT        seconds for the whole boot (default 7200)
#   VM_PROG_TIMEOUT   seconds per program inside the guest (default 3600)
#   KNITK_FUZZ_OPS    fuzz_test's operations (default 200000, make check's
#                     default is 12000)
#   KNITK_FUZZ_SEED   its seed (default: a new one each run, printed)
#   KNITK_STORM_KILLS pool_test's kill storm (default 1000, make check 200)
#
# The three reach the guest's programs through the kernel command line,
# which passes unknown NAME=value words to init's environment.
#
# TAP lines as tools/vm-check.sh's; console in build/vm-debug/console.log.
set -eu

root_dir=$(cd "$(dirname "$0")/.." && pwd)
cd "$root_dir"

kdir=$(tools/debug-kernel.sh) || { echo "not ok - vm-debug: build the debug kernel"; exit 1; }
echo "ok - vm-debug: debug kernel $(cat "$kdir/include/config/kernel.release") in $kdir"
seed=${KNITK_FUZZ_SEED:-0x$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')}
ops=${KNITK_FUZZ_OPS:-200000}
kills=${KNITK_STORM_KILLS:-1000}
echo "# vm-debug: fuzz seed $seed, $ops ops; $kills kills (replay: KNITK_FUZZ_SEED=$seed make stress)"
VM_APPEND="KNITK_FUZZ_SEED=$seed KNITK_FUZZ_OPS=$ops KNITK_STORM_KILLS=$kills ${VM_APPEND:-}" \
VM_KDIR=$kdir VM_KMEMLEAK=1 VM_WORK=$root_dir/build/vm-debug \
	VM_TIMEOUT=${VM_TIMEOUT:-7200} VM_PROG_TIMEOUT=${VM_PROG_TIMEOUT:-3600} \
	exec tools/vm-check.sh
