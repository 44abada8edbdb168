#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
#   tools/kver.sh          the VM's kernel: Debian's newest installed 6.1
#                          amd64 image that has headers (e.g. 6.1.0-57-amd64);
#                          tools/vm.sh boots it, so the tests build for it
#   tools/kver.sh --build  the kernel `make module` builds for: the running
#                          one when its build directory exists, else the
#                          VM's kernel
#
# KNITK_KVER overrides both.  On failure the message on standard error names
# the package to install.  KNITK_MODULES_DIR (/lib/modules) and
# KNITK_BOOT_DIR (/boot) exist for tools/pkg-check.sh.
mods=${KNITK_MODULES_DIR:-/lib/modules}
boot=${KNITK_BOOT_DIR:-/boot}
if [ -n "${KNITK_KVER:-}" ]; then
	echo "$KNITK_KVER"
	exit 0
fi
running=$(uname -r)
if [ "${1:-}" = "--build" ] && [ -d "$mods/$running/build" ]; then
	echo "$running"
	exit 0
fi
v=$(for img in "$boot"/vmlinuz-6.1.*-amd64; do
	k=${img#"$boot"/vmlinuz-}
	[ -d "$mods/$k/build" ] && echo "$k"
done | sort -V | tail -n 1)
if [ -z "$v" ]; then
	if [ "${1:-}" = "--build" ]; then
		echo "kver.sh: no kernel build directory: $mods/$running/build is missing" \
		     "(install linux-headers-$running, or your distribution's headers" \
		     "package for the running kernel), and so is Debian's 6.1 amd64 image" \
		     "with headers (apt-get install linux-image-amd64 linux-headers-amd64" \
		     "on bookworm); or pass KVER=<release> or KDIR=<build dir>" >&2
	else
		echo "kver.sh: no Debian 6.1 amd64 kernel image with headers in $boot and" \
		     "$mods (apt-get install linux-image-amd64 linux-headers-amd64 on" \
		     "bookworm, or tools/deps.sh)" >&2
	fi
	exit 1
fi
echo "$v"
