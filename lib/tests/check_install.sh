#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make install into a scratch DESTDIR, then build and run a program against
# the installed headers and libraries through pkg-config, shared and static.
# KNITK_VERSION and SONAME: lib/Makefile's (tests/run.sh passes them on).
set -u
: "${KNITK_VERSION:?}" "${SONAME:?}"
lib_dir=$1
so=libknitk.so.$KNITK_VERSION
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
say() { echo "$1 - lib: install: $2"; }

if ! make -s -C "$lib_dir" install DESTDIR="$t/root" PREFIX=/usr >"$t/log" 2>&1; then
	sed 's/^/# /' "$t/log"
	say "not ok" "make install PREFIX=/usr DESTDIR=..."
	exit 1
fi
say ok "make install PREFIX=/usr DESTDIR=..."
rc=0
root=$t/root
for f in usr/include/knitk.h usr/include/linux/knitk.h usr/lib/libknitk.a \
	 "usr/lib/$so" "usr/lib/$SONAME" usr/lib/libknitk.so \
	 usr/lib/pkgconfig/knitk.pc; do
	[ -e "$root/$f" ] || { echo "# missing $f"; rc=1; }
done
soname=$(readelf -d "$root/usr/lib/$so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "$SONAME" ] || { echo "# soname: $soname"; rc=1; }
if [ $rc -eq 0 ]; then say ok "files, symlinks and soname $SONAME"; else say "not ok" "files, symlinks and soname $SONAME"; fi

cat >"$t/prog.c" <<'C'
#include <knitk.h>
#include <stdio.h>
int main(void)
{
	struct knitk_geometry g = { .nr_workers = 1, .nr_submitters = 1,
				    .lanes = KNITK_LANES };
	struct knitk_layout l;

	if (knitk_layout_compute(&g, &l))
		return 1;
	printf("%llu\n", (unsigned long long)l.size);
	return l.size == 6 * KNITK_PAGE_BYTES ? 0 : 1;
}
C
export PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$root/usr/lib/pkgconfig
want=$(cat "$lib_dir/../VERSION")
got=$(pkg-config --modversion knitk)
if [ -n "$want" ] && [ "$got" = "$want" ]; then
	say ok "knitk.pc has the version of VERSION"
else
	echo "# knitk.pc: '$got', VERSION: '$want'"
	say "not ok" "knitk.pc has the version of VERSION"; rc=1
fi
flags=$(pkg-config --cflags --libs knitk) || flags=
if [ -n "$flags" ] && gcc -std=c11 -Wall -Werror "$t/prog.c" -o "$t/prog" $flags -pthread &&
   LD_LIBRARY_PATH=$root/usr/lib "$t/prog" >/dev/null; then
	say ok "a program built with pkg-config runs against the shared library"
else
	say "not ok" "a program built with pkg-config runs against the shared library"; rc=1
fi
if gcc -std=c11 -Wall -Werror "$t/prog.c" -o "$t/prog-static" \
	$(pkg-config --cflags knitk) "$root/usr/lib/libknitk.a" -pthread && "$t/prog-static" >/dev/null; then
	say ok "a program links the static library"
else
	say "not ok" "a program links the static library"; rc=1
fi
exit $rc
