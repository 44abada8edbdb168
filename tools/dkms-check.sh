#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The "dkms" step of make check: the module as a user's DKMS builds it.
# dkms add, build -k <the VM's 6.1 kernel> and install run on a copy of the
# tracked files into a scratch tree (--dkmstree, --sourcetree,
# --installtree, a scratch signing key, --no-depmod), so the machine's own
# DKMS state, /usr/src and /lib/modules stay untouched (checked).  The
# guest then boots with the module DKMS installed and runs a subset of the
# kselftests on it (tools/vm-check.sh, VM_MODULE): the full suite already
# runs in the vm step against a module built from the same sources, so a
# second full boot would only double the step's time.  DKMS's module has
# no test hooks, hence programs that do not need them.  TAP lines:
#   ok - dkms: add | build | install | ...
#   ok - dkms: vm: <prog>: <test>
#
#   DKMS_VM_PROGS   the kselftest programs to run on it (default below)
set -u
cd "$(dirname "$0")/.." || exit 2
root_dir=$PWD
work=$root_dir/build/dkms
progs=${DKMS_VM_PROGS:-api_test mmap_test join_test wait_test poll_test peer_test \
	death_test lib_layout_test pool_death_test}
failed=0
ok() { echo "ok - dkms: $*"; }
not_ok() { echo "not ok - dkms: $*"; failed=1; }

command -v dkms >/dev/null || { not_ok "dkms not installed (tools/deps.sh)"; exit 1; }
kver=$(tools/kver.sh) || { not_ok "no Debian 6.1 kernel with headers (tools/deps.sh)"; exit 1; }
version=$(cat VERSION)
# man dkms: every DEST_MODULE_LOCATION must start with /kernel.
bad=$(grep '^DEST_MODULE_LOCATION' dkms.conf | grep -v '="/kernel')
if [ -z "$bad" ] && grep -q '^DEST_MODULE_LOCATION' dkms.conf; then
	ok "dkms.conf: DEST_MODULE_LOCATION starts with /kernel"
else
	not_ok "dkms.conf: DEST_MODULE_LOCATION starts with /kernel: ${bad:-none}"
fi
rm -rf "$work"
mkdir -p "$work/stage/knitk" "$work/dkms" "$work/src" "$work/root/lib/modules/$kver"
# What a fresh clone holds, with this worktree's edits.
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/stage/knitk"

# The machine's DKMS state, before and after.
state() {
	{
		find /var/lib/dkms /usr/src -maxdepth 3 2>/dev/null
		find "/lib/modules/$kver" -path "/lib/modules/$kver/build" -prune -o \
			-printf '%p %s %T@\n' 2>/dev/null
	} | sort
}
state >"$work/state.before"

# A signing key of the scratch tree: DKMS makes one when it is missing,
# as it does with /var/lib/dkms/mok.key on a real machine.
export mok_signing_key=$work/mok.key mok_certificate=$work/mok.pub
trees=(--dkmstree "$work/dkms" --sourcetree "$work/src" --installtree "$work/root/lib/modules")
mvk=(-m knitk -v "$version" -k "$kver")

run() {	# run NAME dkms-args...: the command's output as comments
	local name=$1
	shift
	echo "# \$ dkms $*"
	if dkms "$@" >"$work/$name.log" 2>&1; then
		sed 's/^/#   /' "$work/$name.log"
		ok "$name"
	else
		sed 's/^/#   /' "$work/$name.log"
		not_ok "$name"
		return 1
	fi
}

run add add "${trees[@]}" "$work/stage/knitk" &&
run build build "${trees[@]}" "${mvk[@]}" ||
	sed 's/^/#   /' "$work/dkms/knitk/$version/build/make.log" 2>/dev/null
[ "$failed" -eq 0 ] && run install install "${trees[@]}" "${mvk[@]}" --no-depmod

ko=$work/root/lib/modules/$kver/updates/dkms/knitk.ko
if [ -f "$ko" ]; then
	ok "install: knitk.ko in <installtree>/$kver/updates/dkms/"
	got=$(modinfo -F version "$ko")
	if [ "$got" = "$version" ]; then ok "modinfo version is VERSION ($got)"
	else not_ok "modinfo version is VERSION ('$got', VERSION '$version')"; fi
	signer=$(modinfo -F signer "$ko")
	if [ -n "$signer" ]; then ok "the module is signed with DKMS's key ($signer)"
	else not_ok "the module is signed with DKMS's key"; fi
	cp "$ko" "$work/knitk.ko"
else
	[ "$failed" -ne 0 ] || not_ok "install: no $ko"
fi
st=$(dkms status "${trees[@]}" knitk 2>&1)
echo "# \$ dkms status: $st"
case "$st" in
*"$kver"*installed*) ok "status: installed for $kver" ;;
*) not_ok "status: installed for $kver" ;;
esac
run remove remove "${trees[@]}" -m knitk -v "$version" --all --no-depmod
if [ -z "$(find "$work/root/lib/modules" -name 'knitk.ko*')" ]; then
	ok "remove: no knitk.ko left in the install tree"
else
	not_ok "remove: no knitk.ko left in the install tree"
fi

state >"$work/state.after"
if cmp -s "$work/state.before" "$work/state.after"; then
	ok "the machine's /var/lib/dkms, /usr/src and /lib/modules/$kver untouched"
else
	diff "$work/state.before" "$work/state.after" | sed 's/^/#   /'
	not_ok "the machine's /var/lib/dkms, /usr/src and /lib/modules/$kver untouched"
fi

# The kselftests on DKMS's module, in the guest.
if [ -f "$work/knitk.ko" ]; then
	VM_MODULE=$work/knitk.ko VM_PROGS=$progs VM_WORK=$work/vm tools/vm-check.sh |
		sed -E 's/^(not )?ok - vm: /\1ok - dkms: vm: /'
	[ "${PIPESTATUS[0]}" -eq 0 ] || failed=1
else
	not_ok "vm: no module to boot"
fi
exit "$failed"
