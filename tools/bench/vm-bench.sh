#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs knitk-bench in the QEMU guest on the module's backend: builds the
# module and a static knitk-bench, boots Debian's 6.1 kernel with
# tools/vm.sh (modprobe knitk), runs
#   knitk-bench-static --backend kmod [ARGS]   (ARGS default: --quick)
# and prints the guest's table and JSON.  Guest time is emulated (TCG):
# only ratios within the same run mean anything.
#
#   tools/bench/vm-bench.sh [knitk-bench args...]
#   tools/bench/vm-bench.sh --check
#
# --check (make check's bench step): runs "all --quick --progress" and
# checks the guest's JSON and output with check-json.py (shape, CPU times,
# ratios, messages moved, interleaving; never speed), as TAP lines
# "ok - bench guest: ...".
#
# Output: the console in build/vm-bench/console.log, the bench's own lines
# in build/vm-bench/bench.txt, its JSON in build/vm-bench/bench.json.
set -eu

root_dir=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root_dir"
out=build/vm-bench
mkdir -p "$out"
check=0
if [ "${1:-}" = --check ]; then
	check=1
	shift
	set -- all --quick --progress
fi
args=${*:---quick}

echo "vm-bench: building the module and knitk-bench-static"
if ! make module >"$out/build.log" 2>&1 ||
   ! make -C tools knitk-bench-static >>"$out/build.log" 2>&1; then
	tail -n 40 "$out/build.log" >&2
	echo "vm-bench: build failed, log in $out/build.log" >&2
	exit 1
fi

set +e
tools/vm.sh -q -o "$out" -t "${VM_TIMEOUT:-1800}" \
	"build/tools/knitk-bench-static --backend kmod --json /tmp/bench.json $args" \
	'cat /tmp/bench.json'
rc=$?
set -e

console=$out/console.log
sed -n '/^knitk-vm: begin knitk-bench-static/,/^knitk-vm: end knitk-bench-static/p' \
	"$console" | sed '1d;$d' >"$out/bench.txt"
sed -n '/^knitk-vm: begin cat/,/^knitk-vm: end cat/p' "$console" |
	sed '1d;$d' >"$out/bench.json"
cat "$out/bench.txt"
status=$(sed -n 's/^knitk-vm: end knitk-bench-static status=//p' "$console")
modprobe=$(sed -n 's/^knitk-vm: modprobe knitk status=//p' "$console")
if [ "$rc" -ne 0 ] || [ "$status" != 0 ] || [ "$modprobe" != 0 ]; then
	[ "$check" -eq 0 ] || echo "not ok - bench guest: knitk-bench runs on the module"
	echo "vm-bench: failed (vm.sh status $rc, modprobe ${modprobe:-none}," \
	     "knitk-bench status ${status:-none}); console in $console" >&2
	exit 1
fi
[ "$check" -eq 0 ] || echo "ok - bench guest: knitk-bench runs on the module"
if ! python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$out/bench.json"; then
	echo "vm-bench: the guest's JSON does not parse: $out/bench.json" >&2
	exit 1
fi
echo "vm-bench: ok (table in $out/bench.txt, JSON in $out/bench.json)"
if [ "$check" -eq 1 ]; then
	build/tools/knitk-bench-static --list >"$out/list"
	python3 tools/bench/check-json.py guest kmod "$out/list" "$out/bench.json" \
		"$out/bench.txt"
fi
