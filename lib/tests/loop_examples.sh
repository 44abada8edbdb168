#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The pool in the event loops C programs use: lib/examples/glib_pool (GLib's
# main loop) and uv_pool (libuv), each built against Debian's
# libglib2.0-dev / libuv1-dev and run with thread workers on the futex
# backend, twice: the default window of calls in flight, and a window of
# one call, where every call waits for the loop to come back.  A run
# passes when the program says every call's result came back checked by
# its id, as many as were asked for, and exits 0.  A missing package fails
# the build step: it is never a pass.
#
# The same programs run with process workers in the VM step, on the module
# (tools/vm-check.sh): event mode with process workers needs /dev/knitk.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${EXAMPLES_OUT:-$here/../../build/examples}
calls=${KNITK_LOOP_CALLS:-20000}
rc=0
mkdir -p "$out"
log=$out/loop-build.log
if make -s -C "$here/../examples" OUT="$out" "$out/glib_pool" "$out/uv_pool" \
	>"$log" 2>&1; then
	echo "ok - loop examples: build (glib-2.0, libuv)"
else
	sed 's/^/# /' "$log"
	echo "not ok - loop examples: build (glib-2.0, libuv)"
	exit 1
fi
for prog in glib_pool uv_pool; do
	for window in 256 1; do
		n=$calls
		[ "$window" = 1 ] && n=$((calls / 10))
		name="loop examples: $prog: $n calls with thread workers, $window in flight, every result checked by its id"
		res=$(KNITK_BACKEND=futex "$out/$prog" -t -n "$n" -q "$window" 2>&1)
		st=$?
		printf '%s\n' "$res" | sed 's/^/# /'
		want="$prog: threads: $n calls on the futex backend, every result checked by its call's id"
		if [ "$st" -eq 0 ] && printf '%s\n' "$res" | grep -qxF "$want"; then
			echo "ok - $name"
		else
			echo "not ok - $name (exit status $st)"
			rc=1
		fi
	done
done
exit $rc
