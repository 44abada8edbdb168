#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
#   tools/install.sh install|uninstall     (make install, make uninstall)
#
# One list, manifest() below, says what goes where: install copies it,
# uninstall removes exactly those files and links (and the directories
# only knitk uses, once empty).  The top Makefile passes the directories,
# absolute, without DESTDIR:
#   PREFIX LIBDIR INCDIR BINDIR MANDIR DOCDIR UDEVRULESDIR, DESTDIR
# Installing onto the live system (DESTDIR empty) runs ldconfig, so a
# program finds libknitk.so.0 at once.
set -eu
shopt -s nullglob
cd "$(dirname "$0")/.."
: "${PREFIX:?}" "${LIBDIR:?}" "${INCDIR:?}" "${BINDIR:?}" "${MANDIR:?}" \
  "${DOCDIR:?}" "${UDEVRULESDIR:?}"
DESTDIR=${DESTDIR:-}
action=${1:-}
version=$(cat VERSION)
soname=libknitk.so.0
build=build

# manifest: "MODE SOURCE DEST" per file, "link TARGET DEST" per symlink,
# "so PAGE DEST" per man page that sources another (.so PAGE).
manifest() {
	local f sec page name
	echo "755 $build/lib/libknitk.so.$version $LIBDIR/libknitk.so.$version"
	echo "link libknitk.so.$version $LIBDIR/$soname"
	echo "link $soname $LIBDIR/libknitk.so"
	echo "644 $build/lib/libknitk.a $LIBDIR/libknitk.a"
	echo "644 $build/pkg/knitk.pc $LIBDIR/pkgconfig/knitk.pc"
	echo "644 $build/lib/libknitk-uring.a $LIBDIR/libknitk-uring.a"
	echo "644 $build/pkg/knitk-uring.pc $LIBDIR/pkgconfig/knitk-uring.pc"
	for f in lib/include/*.h; do
		echo "644 $f $INCDIR/${f##*/}"
	done
	echo "644 uapi/linux/knitk.h $INCDIR/linux/knitk.h"
	echo "755 $build/tools/knitk-bench $BINDIR/knitk-bench"
	for f in man/*.[1-8]; do
		sec=${f##*.}
		echo "644 $f $MANDIR/man$sec/${f##*/}"
	done
	# Each function of a grouped page gets its own name.
	tools/man-names.sh | while read -r page name; do
		[ "$name.3" = "$page" ] || echo "so man3/$page $MANDIR/man3/$name.3"
	done
	echo "644 packaging/60-knitk.rules $UDEVRULESDIR/60-knitk.rules"
	echo "644 packaging/modules-load.d/knitk.conf $DOCDIR/examples/modules-load.d/knitk.conf"
	for f in LICENSES/*; do
		echo "644 $f $DOCDIR/$f"
	done
}

# knitk.pc: paths under the prefix are written ${prefix}-relative, so the
# file still holds when the tree moves (or pkg-config --define-prefix).
rel() {
	case "$1" in
	"$PREFIX"/*) echo "\${prefix}${1#"$PREFIX"}" ;;
	*) echo "$1" ;;
	esac
}

write_pc() {
	local pc

	mkdir -p "$build/pkg"
	for pc in knitk knitk-uring; do
		sed -e "s|@PREFIX@|$PREFIX|" -e "s|@LIBDIR@|$(rel "$LIBDIR")|" \
		    -e "s|@INCDIR@|$(rel "$INCDIR")|" -e "s|@VERSION@|$version|" \
		    "lib/$pc.pc.in" >"$build/pkg/$pc.pc"
	done
}

run_ldconfig() {
	[ -z "$DESTDIR" ] || return 0
	echo "install.sh: ldconfig"
	ldconfig || echo "install.sh: ldconfig failed; run it as root" >&2
}

case "$action" in
install)
	write_pc
	manifest | while read -r mode src dst; do
		if [ "$mode" = link ]; then
			install -d "$DESTDIR${dst%/*}"
			ln -sfn "$src" "$DESTDIR$dst"
		elif [ "$mode" = so ]; then
			install -d "$DESTDIR${dst%/*}"
			echo ".so $src" >"$DESTDIR$dst"
			chmod 644 "$DESTDIR$dst"
		else
			install -D -m "$mode" "$src" "$DESTDIR$dst"
		fi
	done
	run_ldconfig
	;;
uninstall)
	manifest | while read -r _ _ dst; do
		rm -f "$DESTDIR$dst"
	done
	# Only knitk's own directories; shared ones (lib, include) stay.
	for d in "$DOCDIR/examples/modules-load.d" "$DOCDIR/examples" \
		 "$DOCDIR/LICENSES" "$DOCDIR"; do
		[ -d "$DESTDIR$d" ] && rmdir --ignore-fail-on-non-empty "$DESTDIR$d"
	done
	run_ldconfig
	;;
*)
	echo "usage: $0 install|uninstall" >&2
	exit 2
	;;
esac
