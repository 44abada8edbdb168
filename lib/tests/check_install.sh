#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make install into a scratch DESTDIR: exactly the expected files, links and
# modes, a ${prefix}-relative knitk.pc; programs built through pkg-config
# against the installed tree, shared and fully static; make uninstall
# removes every one of those files and nothing else.  Then an install onto
# "the live system" (DESTDIR empty, PREFIX in a scratch directory) must run
# ldconfig, with the multiarch LIBDIR.
# KNITK_VERSION and SONAME: lib/Makefile's (tests/run.sh passes them on).
set -u
shopt -s nullglob
: "${KNITK_VERSION:?}" "${SONAME:?}"
lib_dir=$1
top=$(cd "$lib_dir/.." && pwd)
so=libknitk.so.$KNITK_VERSION
ma=$(gcc -print-multiarch)
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
say() { echo "$1 - lib: install: $2"; }
rc=0
result() {	# result NAME: ok unless a check since the last result failed
	if [ "$bad" -eq 0 ]; then say ok "$1"; else say "not ok" "$1"; rc=1; fi
	bad=0
}
bad=0
fail() { echo "# $*"; bad=1; }

# A fake ldconfig on PATH records every run.
mkdir -p "$t/bin"
printf '#!/bin/sh\necho "ldconfig $*" >>%s/ldconfig.log\n' "$t" >"$t/bin/ldconfig"
chmod +x "$t/bin/ldconfig"
: >"$t/ldconfig.log"
export PATH="$t/bin:$PATH"

root=$t/root
# Someone else's files in the same tree must survive the uninstall.
mkdir -p "$root/usr/include/linux" "$root/usr/lib/$ma"
echo other >"$root/usr/include/linux/other.h"
echo other >"$root/usr/lib/$ma/libother.so"
if ! make -s -C "$top" install DESTDIR="$root" PREFIX=/usr >"$t/log" 2>&1; then
	sed 's/^/# /' "$t/log"
	say "not ok" "make install PREFIX=/usr DESTDIR=..."
	exit 1
fi
say ok "make install PREFIX=/usr DESTDIR=..."

# The expected tree, file by file: "MODE PATH" or "-> TARGET PATH".
L=usr/lib/$ma
{
	echo "755 $L/$so"
	echo "-> $so $L/$SONAME"
	echo "-> $SONAME $L/libknitk.so"
	echo "644 $L/libknitk.a"
	echo "644 $L/pkgconfig/knitk.pc"
	echo "644 $L/libknitk-uring.a"
	echo "644 $L/pkgconfig/knitk-uring.pc"
	for f in "$top"/lib/include/*.h; do echo "644 usr/include/${f##*/}"; done
	echo "644 usr/include/linux/knitk.h"
	echo "755 usr/bin/knitk-bench"
	for f in "$top"/man/*.[1-8]; do
		echo "644 usr/share/man/man${f##*.}/${f##*/}"
	done
	(cd "$top" && tools/man-names.sh) | while read -r page name; do
		[ "$name.3" = "$page" ] || echo "644 usr/share/man/man3/$name.3"
	done
	echo "644 usr/lib/udev/rules.d/60-knitk.rules"
	echo "644 usr/share/doc/knitk/examples/modules-load.d/knitk.conf"
	for f in "$top"/LICENSES/*; do echo "644 usr/share/doc/knitk/LICENSES/${f##*/}"; done
	echo "644 usr/include/linux/other.h"
	echo "644 $L/libother.so"
} | awk '{ print $NF "\t" $0 }' | sort | cut -f2- >"$t/want"
(cd "$root" && find . \( -type f -o -type l \) -printf '%P\n' | sort | while read -r f; do
	if [ -L "$f" ]; then echo "-> $(readlink "$f") $f"
	else echo "$(stat -c %a "$f") $f"; fi
done | awk '{ print $NF "\t" $0 }' | sort | cut -f2-) >"$t/got"
if ! diff "$t/want" "$t/got" >"$t/diff"; then
	fail "want vs installed:"; sed 's/^/#   /' "$t/diff"
fi
[ "$(wc -l <"$t/want")" -gt 15 ] || fail "suspiciously few files expected"
# A function of a grouped page: its own name sources the page.
while read -r page name; do
	[ "$name.3" = "$page" ] && continue
	got=$(cat "$root/usr/share/man/man3/$name.3" 2>/dev/null)
	[ "$got" = ".so man3/$page" ] || fail "man3/$name.3: '$got', not .so man3/$page"
done < <(cd "$top" && tools/man-names.sh)
soname=$(readelf -d "$root/$L/$so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "$SONAME" ] || fail "soname: $soname"
result "every file, link and mode of the installed tree, soname $SONAME"

pc=$root/$L/pkgconfig/knitk.pc
grep -qx 'prefix=/usr' "$pc" || fail "no prefix=/usr"
grep -qx "libdir=\${prefix}/lib/$ma" "$pc" || fail "libdir not \${prefix}-relative"
grep -qx 'includedir=${prefix}/include' "$pc" || fail "includedir not \${prefix}-relative"
grep -qx 'Libs.private: -pthread' "$pc" || fail "no Libs.private: -pthread"
[ "$bad" -eq 0 ] || sed 's/^/#   /' "$pc"
result "knitk.pc: \${prefix}-relative paths, Libs.private: -pthread"

cat >"$t/prog.c" <<'C'
#include <knitk.h>
#include <knitk_pool.h>
#include <stdio.h>
int main(void)
{
	struct knitk_geometry g = { .nr_workers = 1, .nr_submitters = 1,
				    .lanes = KNITK_LANES };
	struct knitk_layout l;

	if (knitk_layout_compute(&g, &l))
		return 1;
	printf("%s\n", knitk_version());
	return l.size == 6 * KNITK_PAGE_BYTES ? 0 : 1;
}
C
export PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$root/$L/pkgconfig
got=$(pkg-config --modversion knitk)
[ "$got" = "$KNITK_VERSION" ] || fail "knitk.pc: '$got', VERSION: '$KNITK_VERSION'"
result "knitk.pc has the version of VERSION"
# shellcheck disable=SC2046 # pkg-config's flags are words
if gcc -std=c11 -Wall -Werror "$t/prog.c" -o "$t/prog" $(pkg-config --cflags --libs knitk) \
	>"$t/cc.log" 2>&1; then
	got=$(LD_LIBRARY_PATH=$root/$L "$t/prog") || fail "the program failed"
	[ "$got" = "$KNITK_VERSION" ] || fail "knitk_version() '$got'"
	LD_LIBRARY_PATH=$root/$L ldd "$t/prog" | grep -q "$root/$L/$SONAME" || fail "not run against the installed library"
else
	sed 's/^/# /' "$t/cc.log"; fail "build failed"
fi
result "a program built with pkg-config runs against the installed shared library"
# shellcheck disable=SC2046 # pkg-config's flags are words
if gcc -std=c11 -Wall -Werror -static "$t/prog.c" -o "$t/prog-static" \
	$(pkg-config --static --cflags --libs knitk) >"$t/cc.log" 2>&1; then
	"$t/prog-static" >/dev/null || fail "the static program failed"
else
	sed 's/^/# /' "$t/cc.log"; fail "static build failed"
fi
result "a program links statically with pkg-config --static alone"
# libknitk-uring through knitk-uring.pc (liburing's .pc is the system's),
# its header first in a strict C11 program.
cat >"$t/uprog.c" <<'C'
#include <knitk_uring.h>
#include <errno.h>
int main(void)
{
	struct knitk_geometry g = { .nr_workers = 1, .nr_submitters = 1,
				    .lanes = KNITK_LANES };
	struct knitk_endpoint *ep;
	struct io_uring_sqe sqe;
	int ok;

	if (knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &ep))
		return 1;
	ok = knitk_uring_supported(ep) == 0 &&
	     knitk_prep_doorbell_wait(&sqe, ep, 0, KNITK_WAIT_FOREVER) == -EOPNOTSUPP;
	knitk_endpoint_destroy(ep);
	return ok ? 0 : 2;
}
C
sys_pc=$(PKG_CONFIG_LIBDIR= pkg-config --variable pc_path pkg-config)
# shellcheck disable=SC2046 # pkg-config's flags are words
if flags=$(PKG_CONFIG_LIBDIR="$root/$L/pkgconfig:$sys_pc" pkg-config --cflags --libs knitk-uring) &&
   gcc -std=c11 -Wall -Werror "$t/uprog.c" -o "$t/uprog" $flags >"$t/cc.log" 2>&1; then
	LD_LIBRARY_PATH=$root/$L "$t/uprog" || fail "the knitk-uring program failed"
else
	sed 's/^/# /' "$t/cc.log"; fail "knitk-uring build failed"
fi
result "a strict C11 program builds with knitk-uring.pc and runs"
[ ! -s "$t/ldconfig.log" ] || fail "ran: $(cat "$t/ldconfig.log")"
result "no ldconfig with DESTDIR"

if ! make -s -C "$top" uninstall DESTDIR="$root" PREFIX=/usr >"$t/log" 2>&1; then
	sed 's/^/# /' "$t/log"; fail "make uninstall failed"
fi
(cd "$root" && find . \( -type f -o -type l \) -printf '%P\n' | sort) >"$t/left"
printf '%s\n' "$L/libother.so" usr/include/linux/other.h | sort >"$t/want-left"
if ! diff "$t/want-left" "$t/left" >"$t/diff"; then
	fail "left after uninstall vs others' files:"; sed 's/^/#   /' "$t/diff"
fi
[ ! -e "$root/usr/share/doc/knitk" ] || fail "usr/share/doc/knitk left behind"
result "make uninstall removes every installed file and only those"

# The live system: DESTDIR empty, so ldconfig runs after both.
live=$t/live
: >"$t/ldconfig.log"
if make -s -C "$top" install PREFIX="$live" >"$t/log" 2>&1; then
	[ -f "$live/lib/$ma/$so" ] || fail "no $live/lib/$ma/$so (multiarch LIBDIR)"
	[ "$(wc -l <"$t/ldconfig.log")" -eq 1 ] || fail "ldconfig runs: $(cat "$t/ldconfig.log")"
else
	sed 's/^/# /' "$t/log"; fail "make install PREFIX=$live failed"
fi
result "make install without DESTDIR: multiarch LIBDIR, then ldconfig"
if make -s -C "$top" uninstall PREFIX="$live" >"$t/log" 2>&1; then
	[ "$(wc -l <"$t/ldconfig.log")" -eq 2 ] || fail "ldconfig runs: $(cat "$t/ldconfig.log")"
	left=$(find "$live" \( -type f -o -type l \) | head)
	[ -z "$left" ] || fail "left: $left"
else
	sed 's/^/# /' "$t/log"; fail "make uninstall PREFIX=$live failed"
fi
result "make uninstall without DESTDIR removes everything, then ldconfig"
exit $rc
