#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The pool is built on the public headers alone: each of its sources
# compiles from a copy of lib/pool/, next to copies of lib/include, the
# uAPI and lib/sized.h (header-only helpers of the sized-struct rule, which
# include nothing but the public header) only, so that no core header can
# be reached (not even by a relative path); with the test hooks too.  And
# each public header compiles on its own.
set -u
lib=$(cd "$(dirname "$0")/.." && pwd)
top=$(cd "$lib/.." && pwd)
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
cc=${CC:-cc}
# Copies of the public headers and the pool: a relative include from any
# of them finds nothing of the core.  lib/trace.h, the test builds' trace,
# is header-only too.
mkdir -p "$t/lib/include" "$t/lib/pool" "$t/uapi/linux"
cp "$lib"/include/*.h "$t/lib/include/"
cp "$top/uapi/linux/knitk.h" "$t/uapi/linux/"
cp "$lib"/pool/*.c "$lib"/pool/*.h "$t/lib/pool/"
cp "$lib/sized.h" "$lib/trace.h" "$t/lib/"
flags=(-std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$t/lib/include" -I"$t/uapi"
       '-DKNITK_EXPORT=__attribute__((visibility("default")))')
rc=0
for hooks in "" -DKNITK_TEST_HOOKS; do
	bad=
	: >"$t/log"
	for c in "$t"/lib/pool/*.c; do
		"$cc" "${flags[@]}" $hooks "$c" >>"$t/log" 2>&1 || bad="$bad $(basename "$c")"
	done
	if [ -z "$bad" ]; then
		echo "ok - lib: layers: the pool compiles with the public headers alone${hooks:+ ($hooks)}"
	else
		sed 's/^/# /' "$t/log"
		echo "not ok - lib: layers: the pool compiles with the public headers alone${hooks:+ ($hooks)}:$bad"
		rc=1
	fi
done
for h in knitk.h knitk_pool.h; do
	printf '#include <%s>\n' "$h" >"$t/h.c"
	if "$cc" "${flags[@]}" -Wmissing-declarations "$t/h.c" >"$t/hlog" 2>&1; then
		echo "ok - lib: layers: <$h> compiles on its own"
	else
		sed 's/^/# /' "$t/hlog"
		echo "not ok - lib: layers: <$h> compiles on its own"
		rc=1
	fi
done
exit $rc
