#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Boots Debian's 6.1 kernel (or a kernel built out of tree, -b) in QEMU (TCG) with a busybox initramfs, loads the
# knitk module with modprobe, runs programs in order, unloads the module,
# dumps the kernel log and powers off.
#
#   tools/vm.sh [options] 'PROG [ARGS...]' ...
#
# Each PROG is a host path to an executable (static, or dynamic with its
# libraries copied in) installed as /bin/<basename>, or a busybox command.
# ARGS are passed through the guest shell, so they may be quoted.
#
#   -k KO      module to install as knitk (default: kmod/knitk.ko)
#   -b DIR     boot the kernel of the kbuild output directory DIR (its
#              bzImage and release) instead of Debian's; KO must be built
#              against it, and its dependencies built in
#   -L         scan for kernel memory leaks (kmemleak) after rmmod
#   -K         boot without the module
#   -a FILE    also install FILE under /bin (helpers a program executes)
#   -t SECS    host-side timeout for the whole boot (default 900)
#   -p SECS    guest-side timeout per program (default 0: none)
#   -o DIR     work directory (default build/vm); console in DIR/console.log,
#              the guest kernel log as it is written in DIR/kmsg.log
#   -q         do not copy the console to standard output
#
# Console markers, each at column 0 (tools/vm-check.sh parses them):
#   knitk-vm: init
#   knitk-vm: modprobe knitk status=N
#   knitk-vm: begin NAME          ... program output ...
#   knitk-vm: end NAME status=N   (N=timeout when -p expired)
#   knitk-vm: rmmod knitk status=N
#   knitk-vm: kmemleak begin      ... leak reports (-L) ...
#   knitk-vm: kmemleak end
#   knitk-vm: dmesg begin         ... guest kernel log ...
#   knitk-vm: dmesg end
#   knitk-vm: poweroff
#
# Exit status: 0 when the guest reached its poweroff marker, 124 when the
# host-side timeout killed QEMU, 1 otherwise (panic, QEMU failure).
set -eu

root_dir=$(cd "$(dirname "$0")/.." && pwd)
module=$root_dir/kmod/knitk.ko
use_module=1
timeout_s=900
prog_timeout=0
work=$root_dir/build/vm
quiet=0
kbuild=
kmemleak=0
extras=()

usage() {
	sed -n '/^#   tools\/vm.sh/,/^#   -q/s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

while getopts "k:b:LKa:t:p:o:qh" opt; do
	case "$opt" in
	k) module=$OPTARG ;;
	b) kbuild=$OPTARG ;;
	L) kmemleak=1 ;;
	K) use_module=0 ;;
	a) extras+=("$OPTARG") ;;
	t) timeout_s=$OPTARG ;;
	p) prog_timeout=$OPTARG ;;
	o) work=$OPTARG ;;
	q) quiet=1 ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))

die() { echo "vm.sh: $*" >&2; exit 1; }

if [ -n "$kbuild" ]; then
	kernel=$kbuild/arch/x86/boot/bzImage
	kver=$(cat "$kbuild/include/config/kernel.release") || die "$kbuild: not a built kernel tree"
	# The lists modprobe reads (modules.builtin...) sit at the tree's top.
	modlists=$kbuild
else
	kver=$("$root_dir/tools/kver.sh") || die "no Debian 6.1 kernel with headers installed (tools/deps.sh)"
	kernel=/boot/vmlinuz-$kver
	modlists=/lib/modules/$kver
fi
qemu=$(command -v qemu-system-x86_64) || die "qemu-system-x86_64 not installed (tools/deps.sh)"
busybox=/bin/busybox
[ -r "$kernel" ] || die "$kernel missing or unreadable (tools/deps.sh)"
[ -x "$busybox" ] || die "$busybox missing (busybox-static)"
if [ "$use_module" = 1 ]; then
	[ -f "$module" ] || die "$module missing (make module)"
fi

mkdir -p "$work"
work=$(cd "$work" && pwd)
initrd_root=$work/root
rm -rf "$initrd_root"
mkdir -p "$initrd_root"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,run,etc,lib/modules/"$kver"}

cp "$busybox" "$initrd_root/bin/busybox"
for applet in $("$busybox" --list-full); do
	[ -e "$initrd_root/$applet" ] || ln -s /bin/busybox "$initrd_root/$applet"
done

# Copies a dynamic executable's interpreter and libraries, keeping paths.
copy_libs() {
	local bin=$1 lib
	readelf -l "$bin" 2>/dev/null | grep -q 'Requesting program interpreter' || return 0
	for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
		[ -e "$initrd_root$lib" ] && continue
		mkdir -p "$initrd_root$(dirname "$lib")"
		cp -L "$lib" "$initrd_root$lib"
	done
}

install_bin() {
	local src=$1 dst
	dst=$initrd_root/bin/$(basename "$src")
	[ -f "$src" ] || die "program $src not found"
	rm -f "$dst"
	cp "$src" "$dst"
	chmod 0755 "$dst"
	copy_libs "$src"
}

# busybox-static needs nothing, a dynamic busybox its libraries.
copy_libs "$busybox"

for f in ${extras[@]+"${extras[@]}"}; do
	install_bin "$f"
done

if [ "$use_module" = 1 ]; then
	extra_dir=$initrd_root/lib/modules/$kver/extra
	mkdir -p "$extra_dir"
	cp "$module" "$extra_dir/knitk.ko"
	# Built-in module lists let modprobe tell built-ins from missing ones.
	for f in modules.builtin modules.builtin.modinfo modules.order; do
		[ -f "$modlists/$f" ] && cp "$modlists/$f" "$initrd_root/lib/modules/$kver/"
	done
	# Modules knitk depends on come from the installed image, recursively.
	pending=$(modinfo -F depends "$module" | tr ',' ' ')
	if [ -n "$kbuild" ]; then
		# Such a tree installs no modules: knitk's dependencies are built in.
		for dep in $pending; do
			grep -q "/$dep\.ko\$" "$kbuild/modules.builtin" ||
				die "dependency $dep of knitk is not built into $kbuild"
		done
		pending=""
	fi
	while [ -n "${pending// /}" ]; do
		next=""
		for dep in $pending; do
			path=$(modinfo -k "$kver" -n "$dep" 2>/dev/null) || die "dependency $dep of knitk not found"
			case "$path" in /*) ;; *) continue ;; esac	# built in
			dst=$initrd_root$path
			[ -e "$dst" ] && continue
			mkdir -p "$(dirname "$dst")"
			cp "$path" "$dst"
			next="$next $(modinfo -F depends "$path" | tr ',' ' ')"
		done
		pending=$next
	done
	depmod -b "$initrd_root" "$kver"
fi

# The guest init: markers at column 0, program output in between.
init=$initrd_root/init
{
	cat <<'EOF'
#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t debugfs debugfs /sys/kernel/debug
# Keep kernel messages off the console while tests print; dumped at the end.
# The second serial port carries them live, so a guest that hangs still
# leaves its kernel log on the host.
dmesg -n 1
cat /dev/kmsg >/dev/ttyS1 2>/dev/null &
# The firmware leaves its last line unterminated.
echo
echo "knitk-vm: init"
EOF
	printf 'prog_timeout=%s\n' "$prog_timeout"
	cat <<'EOF'
run() {
	name=$1
	shift
	echo "knitk-vm: begin $name"
	if [ "$prog_timeout" -gt 0 ]; then
		timeout -s KILL "$prog_timeout" "$@" </dev/null 2>&1
		st=$?
		# busybox timeout reports a kill as 128 + SIGKILL.
		[ "$st" -eq 137 ] && st=timeout
	else
		"$@" </dev/null 2>&1
		st=$?
	fi
	echo ""
	echo "knitk-vm: end $name status=$st"
}
EOF
	if [ "$kmemleak" = 1 ]; then
		echo 'echo clear >/sys/kernel/debug/kmemleak'
	fi
	if [ "$use_module" = 1 ]; then
		echo 'modprobe knitk; echo "knitk-vm: modprobe knitk status=$?"'
	fi
	for spec in "$@"; do
		read -r prog args <<<"$spec"
		[ -n "$prog" ] || die "empty program"
		if [[ "$prog" == */* ]]; then
			install_bin "$prog"
			name=$(basename "$prog")
			printf 'cd /tmp; run %s /bin/%s %s\n' "$name" "$name" "$args"
		else
			printf 'cd /tmp; run %s %s %s\n' "$prog" "$prog" "$args"
		fi
	done
	if [ "$use_module" = 1 ]; then
		echo 'rmmod knitk; echo "knitk-vm: rmmod knitk status=$?"'
	fi
	if [ "$kmemleak" = 1 ]; then
		# kmemleak reports an object once it is 5 s old and a scan found
		# no reference to it; the boot's own objects were cleared.
		cat <<'EOF'
echo "knitk-vm: kmemleak begin"
echo scan >/sys/kernel/debug/kmemleak
sleep 6
echo scan >/sys/kernel/debug/kmemleak
cat /sys/kernel/debug/kmemleak
echo "knitk-vm: kmemleak end"
EOF
	fi
	cat <<'EOF'
echo "knitk-vm: dmesg begin"
dmesg
echo "knitk-vm: dmesg end"
echo "knitk-vm: poweroff"
poweroff -f
sleep 3600
EOF
} >"$init"
chmod 0755 "$init"

initrd=$work/initramfs.cpio
(cd "$initrd_root" && find . -print0 | LC_ALL=C sort -z |
	cpio --quiet --null -o -H newc -R 0:0 >"$initrd")

console=$work/console.log
kmsg=$work/kmsg.log
: >"$console"
rm -f "$kmsg"
append="console=ttyS0 panic=-1 quiet ${VM_APPEND:-}"
echo "vm.sh: booting $kernel (TCG, timeout ${timeout_s}s), console in $console" >&2

# TCG only: the host kernel's KVM cannot boot this guest.  No NIC: nothing
# needs one and the option ROM would be another dependency.
set +e
timeout -k 10 "$timeout_s" "$qemu" \
	-accel tcg -machine q35 -cpu max -m 2048 -smp 2 \
	-kernel "$kernel" -initrd "$initrd" -append "$append" \
	-nographic -serial mon:stdio -serial "file:$kmsg" \
	-nic none -no-reboot </dev/null 2>&1 |
	# Drop carriage returns and the firmware's terminal control sequences.
	sed -u 's/\r$//; s/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g; s/\x1b[()][0-9A-Za-z]//g' |
	if [ "$quiet" = 1 ]; then cat >"$console"; else tee "$console"; fi
rc=${PIPESTATUS[0]}
set -e

if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
	echo "vm.sh: guest did not finish within ${timeout_s}s; QEMU killed" >&2
	exit 124
fi
if [ "$rc" -ne 0 ]; then
	echo "vm.sh: QEMU exited with status $rc" >&2
	exit 1
fi
grep -q '^knitk-vm: poweroff$' "$console" || { echo "vm.sh: guest stopped before its poweroff marker" >&2; exit 1; }
exit 0
