#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds the debug x86_64 guest kernel of make stress (KASAN, lockdep,
# kmemleak) from Debian's linux-source-6.1: tinyconfig plus
# tools/debug-kernel.config, out of tree, in the shared cache.  The source
# is hard-linked from the unpacked tree, never written.  Skipped when the
# bzImage is newer than the fragment and this script.
#
#   tools/debug-kernel.sh        prints the build directory
#
#   KNITK_CACHE   cache directory (default ~/.cache/knitk)
set -eu

root_dir=$(cd "$(dirname "$0")/.." && pwd)
cache=${KNITK_CACHE:-$HOME/.cache/knitk}
pristine=$cache/linux-source-6.1
src=$cache/debug-src
out=$cache/debug-build
fragment=$root_dir/tools/debug-kernel.config
image=$out/arch/x86/boot/bzImage

die() { echo "debug-kernel.sh: $*" >&2; exit 1; }

if [ -f "$image" ] && [ "$image" -nt "$fragment" ] && [ "$image" -nt "$0" ]; then
	echo "$out"
	exit 0
fi

if [ ! -f "$src/Makefile" ]; then
	if [ ! -f "$pristine/Makefile" ]; then
		mkdir -p "$cache"
		tar -C "$cache" -xf /usr/src/linux-source-6.1.tar.xz ||
			die "cannot unpack linux-source-6.1 (tools/deps.sh)"
	fi
	rm -rf "$src.tmp"
	cp -al "$pristine" "$src.tmp"
	mv "$src.tmp" "$src"
fi

mkdir -p "$out"
kmake() { nice -n 10 make -C "$src" O="$out" ARCH=x86_64 -j"$(nproc)" "$@"; }
log=$out/build.log
{
	kmake tinyconfig
	"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$fragment"
	kmake olddefconfig
} >"$log" 2>&1 || { tail -n 40 "$log" >&2; die "configuring failed, log in $log"; }

# Every option of the fragment must have survived olddefconfig.
missing=$(grep -E '^CONFIG_[A-Z0-9_]+=' "$fragment" | while IFS= read -r line; do
	opt=${line%%=*}
	val=${line#*=}
	if [ "$val" = n ]; then
		grep -qE "^$opt=" "$out/.config" && echo "$line"
	else
		grep -qxF "$line" "$out/.config" || echo "$line"
	fi
done || true)
[ -z "$missing" ] || die "options not in the resulting .config: $(printf '%s' "$missing" | tr '\n' ' ')"

kmake all >>"$log" 2>&1 || { tail -n 40 "$log" >&2; die "build failed, log in $log"; }
touch "$image"
echo "$out"
