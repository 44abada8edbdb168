#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs the library tests (plain, ASan+UBSan, TSan builds) and prints flat
# TAP lines "ok - lib: <variant> <prog>: <case>".  Each program runs under a
# watchdog: a hang is killed and reported as a failure, never a pass.
# The test lists and the library's version and soname come from
# lib/Makefile ("make check" runs this).
set -u
: "${BUILD:?}" "${TOP:?}" "${CORE_TESTS:?}" "${POOL_TESTS:?}" "${KNITK_VERSION:?}" "${SONAME:?}"
export KNITK_VERSION SONAME
here=$(cd "$(dirname "$0")" && pwd)
watchdog=${KNITK_TEST_WATCHDOG:-300}
# Message counts of the stress test per build.
n_plain=${KNITK_STRESS_N:-1000000}
n_asan=${KNITK_STRESS_N_ASAN:-100000}
n_tsan=${KNITK_STRESS_N_TSAN:-100000}
# The pool tests' argument: calls of their throughput cases per build.
pool_n_plain=${KNITK_POOL_N:-1000000}
pool_n_san=${KNITK_POOL_N_SAN:-20000}
failed=0

run() {	# run <label> <binary> [args...]
	local label=$1 bin=$2 out rc
	shift 2
	out=$(mktemp)
	KNITK_BACKEND=futex timeout -s KILL "$watchdog" "$bin" "$@" >"$out" 2>&1
	rc=$?
	sed -e "s/^ok - /ok - lib: $label: /" \
	    -e "s/^not ok - /not ok - lib: $label: /" \
	    -e '/^ok - \|^not ok - \|^# /!s/^/# /' "$out"
	if [ "$rc" -eq 137 ]; then
		echo "not ok - lib: $label: killed by the ${watchdog}s watchdog (hang)"
		failed=1
	elif [ "$rc" -ne 0 ] && ! grep -q '^not ok - ' "$out"; then
		echo "not ok - lib: $label: exited with status $rc"
		failed=1
	elif [ "$rc" -ne 0 ]; then
		failed=1
	fi
	rm -f "$out"
}

for t in $CORE_TESTS; do
	run "$t" "$BUILD/tests/$t"
done
run "stress_test" "$BUILD/tests/stress_test" "$n_plain"
for t in $POOL_TESTS; do
	run "$t" "$BUILD/tests/$t" "$pool_n_plain"
done
"$here/pool_doc_test.sh" || failed=1
"$here/tutorial_test.sh" || failed=1
"$here/check_exports.sh" "$BUILD/libknitk.so.$KNITK_VERSION" \
	<(cat "$here/../include/knitk.h" "$here/../include/knitk_pool.h") "$here/../libknitk.map" \
	"$BUILD/libknitk.a" || failed=1
"$here/check_layers.sh" || failed=1
# Every test and case docs/guarantees.md names exists; every test file is
# named there or in its folder's README.md.
"$here/check_guarantees.sh" || failed=1
"$here/check_install.sh" "$here/.." || failed=1
# The event-loop examples against their load generator.
"$here/examples.sh" || failed=1
# The pool in GLib's main loop and in libuv's.
"$here/loop_examples.sh" || failed=1
# knitk-bench --quick: structure and sanity of its output, not speed.
"$TOP/tools/bench/smoke.sh" || failed=1

for v in asan tsan; do
	for t in $CORE_TESTS; do
		run "$v $t" "$BUILD/tests-$v/$t"
	done
	n=n_$v
	run "$v stress_test" "$BUILD/tests-$v/stress_test" "${!n}"
	for t in $POOL_TESTS; do
		run "$v $t" "$BUILD/tests-$v/$t" "$pool_n_san"
	done
done
exit $failed
