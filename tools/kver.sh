#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Prints the version of Debian's newest installed 6.1 amd64 kernel image that
# has headers (e.g. 6.1.0-57-amd64): the module is built for it and the VM
# boots it.  KNITK_KVER overrides it.
if [ -n "${KNITK_KVER:-}" ]; then
	echo "$KNITK_KVER"
	exit 0
fi
v=$(for img in /boot/vmlinuz-6.1.*-amd64; do
	k=${img#/boot/vmlinuz-}
	[ -d "/lib/modules/$k/build" ] && echo "$k"
done | sort -V | tail -n 1)
[ -n "$v" ] || { echo "no linux-image-6.1 amd64 with headers installed" >&2; exit 1; }
echo "$v"
