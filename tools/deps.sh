#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Installs the Debian packages knitk needs to build and test everything, then
# unpacks Debian's linux-source-6.1 (checkpatch, kunit.py, kselftest_harness.h)
# into ${KNITK_CACHE:-$HOME/.cache/knitk}/linux-source-6.1.
#
# Idempotent and quick when everything is there: dpkg-query decides, and apt
# runs only when something is missing.
set -eu

packages="
	gcc make libc6-dev pkg-config perl python3 rsync
	linux-headers-amd64 linux-image-amd64 linux-source-6.1
	flex bison bc libelf-dev libssl-dev xz-utils
	sparse shellcheck spin dkms mandoc
	qemu-system-x86 busybox-static cpio kmod
	liburing-dev libglib2.0-dev libuv1-dev
"

missing=""
for p in $packages; do
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	case "$status" in
	ii*) ;;
	*) missing="$missing $p" ;;
	esac
done

if [ -n "$missing" ]; then
	echo "deps: installing:$missing"
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: need root to install packages" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	# shellcheck disable=SC2086 # word splitting of the package list is wanted
	apt-get install -y -q --no-install-recommends $missing
fi

# Unpack the kernel source outside the repository.  A stamp records the
# package version so an upgraded linux-source-6.1 is unpacked again.
cache=${KNITK_CACHE:-$HOME/.cache/knitk}
src=$cache/linux-source-6.1
tarball=/usr/src/linux-source-6.1.tar.xz
version=$(dpkg-query -W -f='${Version}' linux-source-6.1)
stamp=$src/.knitk-source-version

if [ -f "$src/Makefile" ] && [ -f "$src/scripts/checkpatch.pl" ]; then
	# A tree unpacked before stamps existed is taken as current.
	[ -f "$stamp" ] || echo "$version" >"$stamp"
	[ "$(cat "$stamp")" != "$version" ] || exit 0
fi

[ -f "$tarball" ] || { echo "deps: $tarball missing" >&2; exit 1; }
echo "deps: unpacking $tarball into $cache"
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.unpack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -C "$tmp" -xJf "$tarball"
rm -rf "$src"
mv "$tmp/linux-source-6.1" "$src"
echo "$version" >"$src/.knitk-source-version"
