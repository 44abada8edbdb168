#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The "pkg" step of make check: what a user of a release meets before any
# test runs, as flat TAP lines:
#   ok - pkg: licence: ID          LICENSES/ holds the text of every SPDX id
#   ok - pkg: kver: ...            which kernel `make module` picks
#   ok - pkg: selftests: ...       standalone build from a clean copy of the
#                                  tracked files; without /dev/knitk every
#                                  program exits KSFT_SKIP, run_tests: # SKIP
#   ok - pkg: man: ...             mandoc -T lint, a page per public function,
#                                  references that resolve
#   ok - pkg: udev: ...            the udev rule parses and sets exactly the
#                                  group and mode documented (udev-check.sh)
# (make install/uninstall: lib/tests/check_install.sh; DKMS: tools/dkms-check.sh.)
set -u
cd "$(dirname "$0")/.." || exit 2
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
failed=0
ok() { echo "ok - pkg: $*"; }
not_ok() { echo "not ok - pkg: $*"; failed=1; }
check() {	# check NAME CMD...: ok when CMD succeeds
	local name=$1
	shift
	if "$@"; then ok "$name"; else not_ok "$name"; fi
}

# Licences: each identifier of the SPDX expression in a file's first lines
# ("A OR B", "A WITH E") needs its text; "-or-later" is the same text as the
# version it names.
ids=$(git ls-files -z | xargs -0 awk 'FNR <= 3 && /SPDX-License-Identifier:/ {
		sub(/.*SPDX-License-Identifier: */, ""); sub(/ *\*\/.*$/, ""); print }' |
	tr -d '()' | tr ' ' '\n' | grep -v -x -E 'OR|AND|WITH|' |
	sed 's/-or-later$//; s/-only$//; s/+$//' | sort -u)
[ -n "$ids" ] || not_ok "licence: no SPDX line found"
for id in $ids; do
	check "licence: LICENSES/$id" test -s "LICENSES/$id"
done

# Kernel selection, on fake /lib/modules and /boot trees.
running=$(uname -r)
mkdir -p "$t/mods/6.1.0-9-amd64/build" "$t/boot" "$t/none/mods" "$t/none/boot"
touch "$t/boot/vmlinuz-6.1.0-9-amd64"
kver() { KNITK_KVER='' KNITK_MODULES_DIR=$1 KNITK_BOOT_DIR=$2 tools/kver.sh "${@:3}" 2>/dev/null; }
check "kver: without the running kernel's headers make module takes Debian's 6.1" \
	test "$(kver "$t/mods" "$t/boot" --build)" = 6.1.0-9-amd64
mkdir -p "$t/mods/$running/build"
check "kver: make module takes the running kernel when its build directory exists" \
	test "$(kver "$t/mods" "$t/boot" --build)" = "$running"
check "kver: the VM's kernel stays Debian's 6.1 when the running one has headers" \
	test "$(kver "$t/mods" "$t/boot")" = 6.1.0-9-amd64
KNITK_KVER='' KNITK_MODULES_DIR=$t/none/mods KNITK_BOOT_DIR=$t/none/boot \
	make -s module >"$t/none.out" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q "install linux-headers-$running" "$t/none.out" &&
   grep -q 'linux-headers-amd64' "$t/none.out" && ! grep -q '/lib/modules//build' "$t/none.out"; then
	ok "kver: with no kernel headers make module stops naming the packages to install"
else
	sed 's/^/# /' "$t/none.out"
	not_ok "kver: with no kernel headers make module stops naming the packages to install (exit $rc)"
fi

# Man pages: mandoc's lint (style included) on each; every public function
# of the installed headers named by a page; every page named is one.
command -v mandoc >/dev/null || not_ok "man: mandoc not installed (tools/deps.sh)"
for page in man/*.[1-8]; do
	if out=$(mandoc -T lint "$page" 2>&1) && [ -z "$out" ]; then
		ok "man: mandoc -T lint $page"
	else
		printf '%s\n' "$out" | sed 's/^/# /'
		not_ok "man: mandoc -T lint $page"
	fi
done
sed -n 's/^[a-z].*[ *]\(knitk_[a-z0-9_]*\)(.*/\1/p' lib/include/*.h | sort -u >"$t/functions"
tools/man-names.sh | awk '{ print $2 }' | sort >"$t/named"
missing=$(comm -23 "$t/functions" "$t/named")
if [ -s "$t/functions" ] && [ -z "$missing" ]; then
	ok "man: each of the $(wc -l <"$t/functions") functions of lib/include/*.h has a page"
else
	printf '# no page: %s\n' $missing
	not_ok "man: each function of lib/include/*.h has a page"
fi
stale=$(comm -13 "$t/functions" <(sort -u "$t/named"))
if [ -z "$stale" ]; then
	ok "man: every name of a section 3 page is a public function"
else
	printf '# not a function: %s\n' $stale
	not_ok "man: every name of a section 3 page is a public function"
fi
# Cross references to knitk's own pages resolve to a page or a name.
{ ls man | sed 's/\.\([1-8]\)$/ \1/'; tools/man-names.sh | awk '{ print $2, 3 }'; } |
	sort -u >"$t/pages"
grep -ho '^\.BR knitk[a-z_-]* ([1-8])' man/* | sed 's/^\.BR //; s/ (\(.\))/ \1/' |
	sort -u >"$t/refs"
dangling=$(comm -23 "$t/refs" "$t/pages")
if [ -z "$dangling" ]; then
	ok "man: every reference to a knitk page resolves"
else
	printf '# dangling: %s\n' "$dangling"
	not_ok "man: every reference to a knitk page resolves"
fi

# The udev rule: it parses, and sets the group and mode the docs state.
tools/udev-check.sh || failed=1

# The kselftests from a fresh clone: the files git sees (tracked or
# not, nothing ignored, so nothing built).
mkdir -p "$t/clone"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$t/clone"
if make -s -C "$t/clone/selftests/knitk" >"$t/ksft-build.log" 2>&1; then
	ok "selftests: make -C selftests/knitk builds in a fresh clone (libknitk.a included)"
	if [ -e /dev/knitk ]; then
		ok "selftests: without /dev/knitk each program exits KSFT_SKIP # SKIP /dev/knitk present here"
	else
		make -s -C "$t/clone/selftests/knitk" run_tests >"$t/ksft-run.log" 2>&1
		n=$(make -s -C "$t/clone/selftests/knitk" list | wc -l)
		skips=$(grep -c '^ok [0-9]* selftests: knitk: [a-z0-9_]* # SKIP$' "$t/ksft-run.log")
		if [ "$n" -gt 0 ] && [ "$skips" -eq "$n" ]; then
			ok "selftests: without /dev/knitk each of the $n programs exits KSFT_SKIP and run_tests reports it skipped"
		else
			grep -E '^(not )?ok ' "$t/ksft-run.log" | sed 's/^/# /'
			not_ok "selftests: without /dev/knitk each program exits KSFT_SKIP ($skips of $n skipped)"
		fi
		make -s -C "$t/clone/selftests/knitk" install INSTALL_PATH="$t/ksft-inst" >/dev/null 2>&1
		missing=$(for p in $(make -s -C "$t/clone/selftests/knitk" list) config settings; do
			[ -e "$t/ksft-inst/$p" ] || echo "$p"; done)
		if [ -z "$missing" ]; then
			ok "selftests: make install INSTALL_PATH= installs every program, config and settings"
		else
			not_ok "selftests: make install INSTALL_PATH= misses" $missing
		fi
	fi
else
	tail -n 30 "$t/ksft-build.log" | sed 's/^/# /'
	not_ok "selftests: make -C selftests/knitk builds in a fresh clone (libknitk.a included)"
fi

exit "$failed"
