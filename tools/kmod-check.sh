#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Static checks of the knitk module, as flat TAP lines:
#   ok - kmod: build W=1     no warning or error with W=1
#   ok - kmod: sparse        no sparse warning (C=2 checks every file)
#   ok - kmod: KUnit suites build W=1 and sparse
#   ok - checkpatch: FILE    checkpatch --strict clean, one line per file
# Ends with a plain build, so kmod/knitk.ko is not a W=1/C=2 artefact.
set -u
cd "$(dirname "$0")/.."
repo=$PWD
cache=${KNITK_CACHE:-$HOME/.cache/knitk}
src=$cache/linux-source-6.1
kver=$(tools/kver.sh) || { echo "not ok - kmod: no 6.1 kernel headers"; exit 1; }
kdir=/lib/modules/$kver/build
tmp=$(mktemp -d /tmp/knitk-kmod-check.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0

indent() { sed 's/^/#   /'; }

# report NAME LOG RC: "ok - kmod: NAME" when make exited RC 0 and LOG holds
# no warning or error; otherwise "not ok" with the findings (or the tail).
report() {
	if [ "$3" -eq 0 ] && ! grep -qE 'warning:|error:' "$2"; then
		echo "ok - kmod: $1"
	else
		echo "not ok - kmod: $1 (make exit $3)"
		{ grep -E 'warning:|error:' "$2" || tail -n 20 "$2"; } | indent
		failed=1
	fi
}

# The W=1 flags differ from the plain build this script leaves behind, so
# kbuild recompiles every file and no warning hides in an old object.  The
# test hooks (KNITK_TEST_HOOKS=y) are built in, so they are checked too.
make -C "$kdir" M="$repo" W=1 KNITK_TEST_HOOKS=y modules >"$tmp/build.log" 2>&1
report "build W=1" "$tmp/build.log" $?

# C=2 runs sparse on every source file even when its object is up to
# date, so this pass reports sparse's findings only.
make -C "$kdir" M="$repo" W=1 C=2 KNITK_TEST_HOOKS=y modules >"$tmp/sparse.log" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q '^  CHECK ' "$tmp/sparse.log" &&
   ! grep -qE 'warning:|error:' "$tmp/sparse.log"; then
	echo "ok - kmod: sparse"
else
	echo "not ok - kmod: sparse (make exit $rc)"
	{ grep -E 'warning:|error:' "$tmp/sparse.log" ||
	  { echo "sparse did not run:"; tail -n 20 "$tmp/sparse.log"; }; } |
		indent
	failed=1
fi

# The KUnit suites are built into the module only in a kernel tree with
# KUnit (tools/kunit.sh); compile their object here too, warnings and
# sparse included, so they are held to the same standard.
rm -f kmod/knitk_kunit.o kmod/.knitk_kunit.o.cmd
make -C "$kdir" M="$repo" W=1 C=2 CONFIG_KNITK_KUNIT_TEST=y \
	kmod/knitk_kunit.o >"$tmp/kunit.log" 2>&1
rc=$?
rm -f kmod/knitk_kunit.o kmod/.knitk_kunit.o.cmd
report "KUnit suites build W=1 and sparse" "$tmp/kunit.log" "$rc"

if [ ! -x "$src/scripts/checkpatch.pl" ]; then
	echo "# unpacking /usr/src/linux-source-6.1.tar.xz into $cache"
	mkdir -p "$cache" && tar -C "$cache" -xf /usr/src/linux-source-6.1.tar.xz
fi
if [ -x "$src/scripts/checkpatch.pl" ]; then
	# The uapi header is checked under its in-tree path, where checkpatch
	# applies the uapi rules (__u32, no BIT()) instead of the kernel ones.
	mkdir -p "$tmp/cp/include/uapi/linux"
	cp uapi/linux/knitk.h "$tmp/cp/include/uapi/linux/knitk.h"
	files=$(ls kmod/*.[ch] kmod/Kbuild kmod/Kconfig 2>/dev/null |
		grep -v '\.mod\.c$')
	for f in $files uapi/linux/knitk.h; do
		case "$f" in
		uapi/*)	out=$(cd "$tmp/cp" && "$src/scripts/checkpatch.pl" --strict \
				--no-tree -f "include/$f" 2>&1) ;;
		*)	out=$("$src/scripts/checkpatch.pl" --strict --no-tree \
				-f "$f" 2>&1) ;;
		esac
		if printf '%s\n' "$out" | grep -qE '^(WARNING|ERROR|CHECK)'; then
			echo "not ok - checkpatch: $f"
			printf '%s\n' "$out" | indent
			failed=1
		else
			echo "ok - checkpatch: $f"
		fi
	done
else
	echo "not ok - checkpatch: $src/scripts/checkpatch.pl missing"
	failed=1
fi

# Leave a build without the test hooks behind, the one users get: it
# must be warning-free too.
make -C "$kdir" M="$repo" W=1 modules >"$tmp/plain.log" 2>&1
report "build W=1 without test hooks" "$tmp/plain.log" $?

# VERSION at the top is the one version.  DKMS reads dkms.conf without
# running make, so PACKAGE_VERSION is written out there and held to it
# here, as is the module's MODULE_VERSION.
want=$(cat VERSION)
for what in dkms modinfo; do
	case $what in
	dkms)	got=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' dkms.conf)
		name="dkms.conf PACKAGE_VERSION is VERSION" ;;
	modinfo) got=$(modinfo -F version kmod/knitk.ko 2>/dev/null)
		name="knitk.ko MODULE_VERSION is VERSION" ;;
	esac
	if [ -n "$want" ] && [ "$got" = "$want" ]; then
		echo "ok - kmod: $name"
	else
		echo "not ok - kmod: $name ('$got', VERSION '$want')"
		failed=1
	fi
done
exit "$failed"
