#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds the debug x86_64 guest kernel of make stress (KASAN, lockdep,
# kmemleak) from Debian's linux-source-6.1: tinyconfig plus
# tools/debug-kernel.config, out of tree, in the shared cache.  The source
# is hard-linked from the unpacked tree, never written.
#
# Reused when its stamp matches: the SHA-256 of the fragment, the recipe
# below (the functions' text as bash prints them, so comments and file
# dates do not count) and the source tree's top Makefile (its version),
# stored in the build directory after a successful build.  A fresh
# checkout, whatever its file dates, reuses the cache; a changed fragment
# or recipe rebuilds.  The cache is shared: the check and the build hold
# an exclusive lock on the build directory's .lock.
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
stamp_file=$out/knitk-recipe.sha256

die() { echo "debug-kernel.sh: $*" >&2; exit 1; }

kmake() { nice -n 10 make -C "$src" O="$out" ARCH=x86_64 -j"$(nproc)" "$@"; }

configure() {
	kmake tinyconfig
	"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$fragment"
	kmake olddefconfig
}

# Prints the options of the fragment that did not survive olddefconfig.
missing_options() {
	grep -E '^CONFIG_[A-Z0-9_]+=' "$fragment" | while IFS= read -r line; do
		opt=${line%%=*}
		val=${line#*=}
		if [ "$val" = n ]; then
			grep -qE "^$opt=" "$out/.config" && echo "$line"
		else
			grep -qxF "$line" "$out/.config" || echo "$line"
		fi
	done || true
}

stamp() {
	{
		cat "$fragment"
		declare -f kmake configure missing_options
		cat "$src/Makefile"
	} | sha256sum | cut -d' ' -f1
}

mkdir -p "$out"
exec 9>"$out/.lock"
flock 9

if [ ! -f "$src/Makefile" ]; then
	if [ ! -f "$pristine/Makefile" ]; then
		tar -C "$cache" -xf /usr/src/linux-source-6.1.tar.xz ||
			die "cannot unpack linux-source-6.1 (tools/deps.sh)"
	fi
	rm -rf "$src.tmp"
	cp -al "$pristine" "$src.tmp"
	mv "$src.tmp" "$src"
fi

want=$(stamp)
if [ -f "$image" ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$want" ]; then
	echo "$out"
	exit 0
fi

# Whatever happens below, the old stamp no longer describes the tree.
rm -f "$stamp_file"
log=$out/build.log
configure >"$log" 2>&1 ||
	{ tail -n 40 "$log" >&2; die "configuring failed, log in $log"; }
missing=$(missing_options)
[ -z "$missing" ] || die "options not in the resulting .config: $(printf '%s' "$missing" | tr '\n' ' ')"

kmake all >>"$log" 2>&1 || { tail -n 40 "$log" >&2; die "build failed, log in $log"; }
echo "$want" >"$stamp_file"
echo "$out"
