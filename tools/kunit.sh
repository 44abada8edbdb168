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
# Prints one "ok - kunit: <suite>.<case>" or "not ok - ..." line per case
# and exits non-zero if kunit.py fails.
set -u
cd "$(dirname "$0")/.."
cache=${KNITK_CACHE:-$HOME/.cache/knitk}
src=$cache/linux-source-6.1
tree=$cache/kunit-src
build=$cache/kunit-build
log=$cache/kunit.log
json=$cache/kunit.json

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

rm -f "$json"
(cd "$tree" && python3 tools/testing/kunit/kunit.py run \
	--kunitconfig=drivers/misc/knitk/.kunitconfig \
	--build_dir="$build" --jobs=2 --json="$json") >"$log" 2>&1
rc=$?
grep -E 'Testing complete|Elapsed time' "$log" | sed 's/^/# /'
if [ "$rc" -ne 0 ]; then
	echo "# kunit.py exited with $rc; the end of $log:"
	tail -n 40 "$log" | sed 's/^/#   /'
fi

# kunit.py's JSON: suites are groups of the top group; a case with
# parameters is a group of its own, its parameters the leaves.
[ -s "$json" ] || fail "kunit.py produced no results (exit $rc, see $log)"
python3 - "$json" <<'PY'
import json, sys
top = json.load(open(sys.argv[1]))
count = 0
def leaves(group, prefix):
    global count
    for case in group.get("test_cases", []):
        name = prefix + case["name"]
        if case["status"] == "PASS":
            print(f"ok - kunit: {name}")
        elif case["status"] == "SKIP":
            print(f"ok - kunit: {name} # SKIP kunit skipped it")
        else:
            print(f"not ok - kunit: {name} ({case['status']})")
        count += 1
    for sub in group.get("sub_groups", []):
        leaves(sub, prefix + sub["name"] + ".")
for suite in top.get("sub_groups", []):
    leaves(suite, suite["name"] + ".")
if count == 0:
    print("not ok - kunit: no test cases in the results")
    sys.exit(1)
PY
prc=$?
[ "$rc" -eq 0 ] && [ "$prc" -eq 0 ]
