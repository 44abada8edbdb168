#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs the knitk KUnit suites under UML with the kernel's own kunit.py.
#
# The module is overlaid on a private copy of Debian's linux-source-6.1 in
# the cache (hard links of the pristine tree, so the copy is cheap; a file
# the overlay changes is rewritten by rsync or sed -i, which replace it
# instead of writing through the link):
#   kmod/                 -> drivers/misc/knitk/
#   uapi/linux/knitk.h    -> include/uapi/linux/knitk.h
#   drivers/misc/Kconfig  += source "drivers/misc/knitk/Kconfig"
#   drivers/misc/Makefile += obj-$(CONFIG_KNITK) += knitk/
# Only changed files are copied, so a second run reuses the build.
#
# Two runs, each with a build directory of its own in the cache
# (KUNIT_RUNS selects them, default "plain debug"):
#   plain  kmod/.kunitconfig, "kunit: ..." lines
#   debug  kmod/.kunitconfig.debug: the same suites under KASAN (and
#          KASAN_VMALLOC), lockdep (PROVE_LOCKING) and kmemleak,
#          "kunit-debug: ..." lines, a clean kernel log, and a kmemleak
#          scan after a second boot of that kernel
# The cache is shared: run this under flock ~/.cache/knitk/.kunit.lock
# (make check does).
#
# Prints one "ok - kunit: <suite>.<case>" or "not ok - ..." line per case
# and exits non-zero if kunit.py fails.
set -u
cd "$(dirname "$0")/.."
cache=${KNITK_CACHE:-$HOME/.cache/knitk}
src=$cache/linux-source-6.1
tree=$cache/kunit-src

fail() {
	echo "not ok - kunit: $*"
	exit 1
}

mkdir -p "$cache" || fail "cannot create $cache"
if [ ! -f "$src/Makefile" ]; then
	echo "# unpacking /usr/src/linux-source-6.1.tar.xz into $cache"
	tar -C "$cache" -xf /usr/src/linux-source-6.1.tar.xz ||
		fail "unpack linux-source-6.1"
fi
if [ ! -f "$tree/Makefile" ]; then
	rm -rf "$tree" "$tree.tmp"
	{ cp -al "$src" "$tree.tmp" && mv "$tree.tmp" "$tree"; } ||
		fail "copy the source tree to $tree"
fi

# rsync -c replaces a file only when its content differs.
rsync -rc --delete --exclude='*.o' --exclude='*.ko' --exclude='*.mod' \
	--exclude='*.mod.c' --exclude='.*.cmd' --exclude='modules.order' \
	--exclude='*.a' kmod/ "$tree/drivers/misc/knitk/" ||
	fail "overlay kmod/"
rsync -c uapi/linux/knitk.h "$tree/include/uapi/linux/knitk.h" ||
	fail "overlay uapi/linux/knitk.h"
kconfig_line='source "drivers/misc/knitk/Kconfig"'
if ! grep -qxF "$kconfig_line" "$tree/drivers/misc/Kconfig"; then
	# The file ends with "endmenu"; the new source line goes before it.
	[ "$(tail -n 1 "$tree/drivers/misc/Kconfig")" = endmenu ] ||
		fail "drivers/misc/Kconfig does not end with endmenu"
	sed -i "\$i $kconfig_line" "$tree/drivers/misc/Kconfig" ||
		fail "edit drivers/misc/Kconfig"
fi
make_line='obj-$(CONFIG_KNITK)		+= knitk/'
if ! grep -qxF "$make_line" "$tree/drivers/misc/Makefile"; then
	sed -i "\$a $make_line" "$tree/drivers/misc/Makefile" ||
		fail "edit drivers/misc/Makefile"
fi

# run_kunit LABEL KUNITCONFIG BUILD_DIR: one kunit.py run, its TAP lines.
run_kunit() {
	local label=$1 kconf=$2 build=$3 log=$3.log json=$3.json rc prc

	rm -f "$json"
	(cd "$tree" && python3 tools/testing/kunit/kunit.py run \
		--kunitconfig="drivers/misc/knitk/$kconf" \
		--build_dir="$build" --jobs=2 --json="$json") >"$log" 2>&1
	rc=$?
	grep -E 'Testing complete|Elapsed time' "$log" | sed 's/^/# /'
	if [ "$rc" -ne 0 ]; then
		echo "# kunit.py exited with $rc; the end of $log:"
		tail -n 40 "$log" | sed 's/^/#   /'
	fi

	# kunit.py's JSON: suites are groups of the top group; a case with
	# parameters is a group of its own, its parameters the leaves.
	if [ ! -s "$json" ]; then
		echo "not ok - $label: kunit.py produced no results (exit $rc, see $log)"
		return 1
	fi
	python3 - "$json" "$label" <<'PY'
import json, sys
top = json.load(open(sys.argv[1]))
label = sys.argv[2]
count = 0
def leaves(group, prefix):
    global count
    for case in group.get("test_cases", []):
        name = prefix + case["name"]
        if case["status"] == "PASS":
            print(f"ok - {label}: {name}")
        elif case["status"] == "SKIP":
            print(f"ok - {label}: {name} # SKIP kunit skipped it")
        else:
            print(f"not ok - {label}: {name} ({case['status']})")
        count += 1
    for sub in group.get("sub_groups", []):
        leaves(sub, prefix + sub["name"] + ".")
for suite in top.get("sub_groups", []):
    leaves(suite, suite["name"] + ".")
if count == 0:
    print(f"not ok - {label}: no test cases in the results")
    sys.exit(1)
PY
	prc=$?
	[ "$rc" -eq 0 ] && [ "$prc" -eq 0 ]
}

# The kernel reports (KASAN, lockdep, WARN, BUG) in LOG from the suites'
# first KTAP line on.  UML's own boot warns once before any suite runs
# (virt-pci without a device id); that is not ours, and is only counted.
kernel_reports() {
	sed -n '/^K\{0,1\}TAP version/,$p' "$1" |
		grep -E 'BUG:|WARNING:|KASAN:|Call Trace|possible circular|possible recursive|inconsistent lock'
}

# kunit_debug BUILD_DIR: the debug run, its kernel log, then a second boot
# of the same UML kernel (the suites run again at boot) from a hostfs root
# whose init scans for leaks twice, as kmemleak wants.  A leak whose
# allocation trace names knitk fails; others are counted in a comment.
kunit_debug() {
	local build=$1 root=$1/kmemleak-root out=$1/kmemleak.log leaks st=0

	run_kunit kunit-debug .kunitconfig.debug "$build" || st=1
	if [ -f "$build/test.log" ] && kernel_reports "$build/test.log" >/dev/null; then
		echo "not ok - kunit-debug: kernel log clean"
		kernel_reports "$build/test.log" | head -n 20 | sed 's/^/#   /'
		st=1
	else
		echo "ok - kunit-debug: kernel log clean"
	fi
	sed -n '1,/^K\{0,1\}TAP version/p' "$build/test.log" 2>/dev/null | grep -c 'WARNING:' |
		sed 's/^/# kunit-debug: warnings of the UML boot before the suites: /'
	[ -x "$build/linux" ] || { echo "not ok - kunit-debug: no UML kernel in $build"; return 1; }
	[ -x /bin/busybox ] || { echo "not ok - kunit-debug: /bin/busybox missing (busybox-static)"; return 1; }
	rm -rf "$root"
	mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev" "$root/tmp"
	cp /bin/busybox "$root/bin/busybox"
	cat >"$root/init" <<'INIT'
#!/bin/busybox sh
b=/bin/busybox
$b mount -t proc proc /proc
$b mount -t sysfs sysfs /sys
$b mount -t debugfs debugfs /sys/kernel/debug
echo scan >/sys/kernel/debug/kmemleak
$b sleep 6
echo scan >/sys/kernel/debug/kmemleak
echo "knitk-kmemleak: begin"
$b cat /sys/kernel/debug/kmemleak
echo "knitk-kmemleak: end"
$b poweroff -f
INIT
	chmod 0755 "$root/init"
	timeout -k 10 900 "$build/linux" mem=1G console=tty rw \
		root=/dev/root rootfstype=hostfs rootflags="$root" init=/init \
		</dev/null >"$out" 2>&1
	# UML 6.1 copies a 2696-byte XSAVE area; a host with a larger one
	# (AMX) refuses to set it, and no UML process can run: the scan needs
	# one.  The vm-debug step of make stress scans the module in QEMU.
	if ! grep -q '^knitk-kmemleak: begin' "$out" &&
	   grep -q 'userspace - ptrace set fp regs failed' "$out"; then
		echo "ok - kunit-debug: kmemleak clean # SKIP UML runs no process on this host (its XSAVE area is not UML's: PTRACE_SETREGSET refused)"
		return "$st"
	fi
	if ! grep -q '^knitk-kmemleak: end' "$out"; then
		echo "not ok - kunit-debug: kmemleak scan did not finish (see $out)"
		tail -n 20 "$out" | sed 's/^/#   /'
		return 1
	fi
	leaks=$(awk '/^knitk-kmemleak: begin/ { on = 1; next }
		/^knitk-kmemleak: end/ { on = 0 }
		on' "$out")
	if printf '%s\n' "$leaks" | grep -q 'knitk'; then
		echo "not ok - kunit-debug: kmemleak clean"
		printf '%s\n' "$leaks" | head -n 60 | sed 's/^/#   /'
		return 1
	fi
	echo "ok - kunit-debug: kmemleak clean"
	printf '%s\n' "$leaks" | grep -c '^unreferenced object' |
		sed 's/^/# kmemleak: unreferenced objects not from knitk: /'
	return "$st"
}

status=0
for r in ${KUNIT_RUNS:-plain debug}; do
	case "$r" in
	plain)	run_kunit kunit .kunitconfig "$cache/kunit-build" || status=1 ;;
	debug)	kunit_debug "$cache/kunit-debug-build" || status=1 ;;
	*)	fail "unknown KUNIT_RUNS entry: $r" ;;
	esac
done
exit "$status"
