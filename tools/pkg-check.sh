#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The "pkg" step of make check: what a user of a release meets before any
# test runs, as flat TAP lines:
#   ok - pkg: licence: ID          LICENSES/ holds the text of every SPDX id
#   ok - pkg: kver: ...            which kernel `make module` picks
#   ok - pkg: man: ...             mandoc -T lint, a page per public function
# (make install/uninstall: lib/tests/check_install.sh; DKMS: tools/dkms-check.sh.)
set -u
cd "$(dirname "$0")/.." || exit 2
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
failed=0
ok() { echo "ok - pkg: $*"; }
not_ok() { echo "not ok - pkg: $*"; failed=1; }
check() {	# check NAME CMD...: ok when CMD succeeds
	local name=$1
	shift
	if "$@"; then ok "$name"; else not_ok "$name"; fi
}

# Licences: each identifier of an SPDX expression ("A OR B", "A WITH E")
# needs its text; "-or-later" is the same text as the version it names.
ids=$(git ls-files -z | xargs -0 grep -h -o 'SPDX-License-Identifier: .*' 2>/dev/null |
	sed 's/^SPDX-License-Identifier: *//; s/ *\*\/.*$//; s/[()]//g' |
	tr ' ' '\n' | grep -v -x -E 'OR|AND|WITH|' |
	sed 's/-or-later$//; s/-only$//; s/+$//' | sort -u)
[ -n "$ids" ] || not_ok "licence: no SPDX line found"
for id in $ids; do
	check "licence: LICENSES/$id" test -s "LICENSES/$id"
done

# Kernel selection, on fake /lib/modules and /boot trees.
running=$(uname -r)
mkdir -p "$t/mods/6.1.0-9-amd64/build" "$t/boot" "$t/none/mods" "$t/none/boot"
touch "$t/boot/vmlinuz-6.1.0-9-amd64"
kver() { KNITK_KVER= KNITK_MODULES_DIR=$1 KNITK_BOOT_DIR=$2 tools/kver.sh "${@:3}" 2>/dev/null; }
check "kver: without the running kernel's headers make module takes Debian's 6.1" \
	test "$(kver "$t/mods" "$t/boot" --build)" = 6.1.0-9-amd64
mkdir -p "$t/mods/$running/build"
check "kver: make module takes the running kernel when its build directory exists" \
	test "$(kver "$t/mods" "$t/boot" --build)" = "$running"
check "kver: the VM's kernel stays Debian's 6.1 when the running one has headers" \
	test "$(kver "$t/mods" "$t/boot")" = 6.1.0-9-amd64
KNITK_KVER= KNITK_MODULES_DIR=$t/none/mods KNITK_BOOT_DIR=$t/none/boot \
	make -s module >"$t/none.out" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "install linux-headers-$running" "$t/none.out" &&
   grep -q 'linux-headers-amd64' "$t/none.out" && ! grep -q '/lib/modules//build' "$t/none.out"; then
	ok "kver: with no kernel headers make module stops naming the packages to install"
else
	sed 's/^/# /' "$t/none.out"
	not_ok "kver: with no kernel headers make module stops naming the packages to install (exit $rc)"
fi

exit "$failed"
