#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The pool example of README.md compiles as written (-Wall -Wextra
# -Werror) against the installed-style header and the shared library, and
# runs to exit status 0.
set -u
: "${BUILD:?}" "${TOP:?}"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
awk '/^```c$/ { on = 1; next } /^```$/ { if (on) exit } on' \
	"$TOP/README.md" >"$t/example.c"
if [ ! -s "$t/example.c" ]; then
	echo "not ok - lib: pool_doc: no C example found in README.md"
	exit 1
fi
if ! ${CC:-gcc} -std=gnu11 -Wall -Wextra -Werror -I"$TOP/lib/include" -I"$TOP/uapi" \
	"$t/example.c" -o "$t/example" -L"$BUILD" -lknitk -Wl,-rpath,"$BUILD" \
	-pthread >"$t/cc.log" 2>&1; then
	sed 's/^/# /' "$t/cc.log"
	echo "not ok - lib: pool_doc: the README example compiles"
	exit 1
fi
echo "ok - lib: pool_doc: the README example compiles"
if KNITK_BACKEND=futex timeout -s KILL 60 "$t/example" >"$t/out" 2>&1; then
	sed 's/^/# /' "$t/out"
	echo "ok - lib: pool_doc: the README example runs"
else
	sed 's/^/# /' "$t/out"
	echo "not ok - lib: pool_doc: the README example runs"
	exit 1
fi
