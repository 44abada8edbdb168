#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make stress: the kselftests under a debug guest kernel.  Builds (or
# reuses) the KASAN + lockdep + kmemleak kernel of tools/debug-kernel.sh,
# builds the module against it and runs tools/vm-check.sh on it with a
# kmemleak scan after rmmod.  Too slow for make check: the build takes
# about 20 minutes once, and every program runs several times slower.
#
#   VM_TIMEOUT        seconds for the whole boot (default 14400)
#   VM_PROG_TIMEOUT   seconds per program inside the guest (default 7200)
#   KNITK_FUZZ_OPS    fuzz_test's operations per seed (default 50000; make
#                     check's default is 12000 with one seed); its uring
#                     and notify_wait cases scale with it too
#   KNITK_FUZZ_SEED   its seeds, comma-separated (default: four new ones
#                     each run, printed); each case runs once per seed
#   KNITK_STORM_KILLS pool_test's kill storm (default 1000, make check 200)
#   KNITK_SERVER_KILLS server_client_kill_test's clients (default 10000,
#                     make check 300)
#
# The four reach the guest's programs through the kernel command line,
# which passes unknown NAME=value words to init's environment.
#
# TAP lines as tools/vm-check.sh's; console in build/vm-debug/console.log.
set -eu

root_dir=$(cd "$(dirname "$0")/.." && pwd)
cd "$root_dir"

kdir=$(tools/debug-kernel.sh) || { echo "not ok - vm-debug: build the debug kernel"; exit 1; }
echo "ok - vm-debug: debug kernel $(cat "$kdir/include/config/kernel.release") in $kdir"
new_seed() { printf '0x%s' "$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"; }
seeds=${KNITK_FUZZ_SEED:-$(new_seed),$(new_seed),$(new_seed),$(new_seed)}
ops=${KNITK_FUZZ_OPS:-50000}
kills=${KNITK_STORM_KILLS:-1000}
server_kills=${KNITK_SERVER_KILLS:-10000}
nr_seeds=$(printf '%s\n' "$seeds" | tr ',' '\n' | grep -c .)
echo "# vm-debug: fuzz seeds $seeds, $ops ops each ($((ops * 2 * nr_seeds)) in all); $kills kills;"\
	"$server_kills clients of server_client_kill_test"
echo "# vm-debug: replay a seed with KNITK_FUZZ_SEED=<seed> make stress"
VM_APPEND="KNITK_FUZZ_SEED=$seeds KNITK_FUZZ_OPS=$ops KNITK_STORM_KILLS=$kills KNITK_SERVER_KILLS=$server_kills ${VM_APPEND:-}" \
VM_KDIR=$kdir VM_KMEMLEAK=1 VM_WORK=$root_dir/build/vm-debug \
	VM_TIMEOUT=${VM_TIMEOUT:-14400} VM_PROG_TIMEOUT=${VM_PROG_TIMEOUT:-7200} \
	exec tools/vm-check.sh
