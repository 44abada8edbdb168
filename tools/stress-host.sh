#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The host half of make stress: the futex backend's kill storms at
# make stress's size (pool_kill_test with KNITK_STORM_KILLS, default 10000
# SIGKILLs for the three-worker storm; make check runs 300), in the plain
# and the ASan+UBSan builds, and the client kills of every pool kind
# (pool_client_kill_test with KNITK_CLIENT_KILLS, default 10000 per kind;
# make check runs 300), the whole clients of a server killed and restarted
# (server_client_kill_test with KNITK_SERVER_KILLS, default 10000; make
# check runs 300 in each build) and the stealing pool churn (pool_steal_churn_test,
# KNITK_CHURN_POOLS pools plainly and a quarter of that in each other case,
# default 3000; make check runs 600) in the plain build.  Prints flat TAP lines,
# "ok - stress-host: <build> <program>: <case>", and the figures as
# comments.
#
#   KNITK_STORM_KILLS       kills of the storm (default 10000, at most 10000)
#   KNITK_CLIENT_KILLS      client kills per pool kind (default 10000)
#   KNITK_SERVER_KILLS      clients of the server killed (default 10000)
#   KNITK_TEST_WATCHDOG     seconds per program, a hang guard (default 3600)
set -u
cd "$(dirname "$0")/.." || exit 2

build=$PWD/build/lib
kills=${KNITK_STORM_KILLS:-10000}
client_kills=${KNITK_CLIENT_KILLS:-10000}
server_kills=${KNITK_SERVER_KILLS:-10000}
watchdog=${KNITK_TEST_WATCHDOG:-3600}
failed=0

log=$build/stress-host-build.log
mkdir -p "$build"
if ! make -s -C lib "$build/tests/pool_kill_test" "$build/tests-asan/pool_kill_test" \
	"$build/tests/pool_client_kill_test" "$build/tests/pool_steal_churn_test" \
	"$build/tests/server_client_kill_test" "$build/tests-asan/server_client_kill_test" >"$log" 2>&1; then
	sed 's/^/# /' "$log"
	echo "not ok - stress-host: build pool_kill_test, pool_client_kill_test, server_client_kill_test"
	exit 1
fi

run() {	# run <build> <program>, the environment set by the caller
	local v=$1 prog=$2 bin=$build/tests/$2 out rc
	[ "$v" = asan ] && bin=$build/tests-asan/$prog
	out=$(mktemp)
	KNITK_BACKEND=futex timeout -s KILL "$watchdog" "$bin" >"$out" 2>&1
	rc=$?
	sed -e "s/^ok - /ok - stress-host: $v $prog: /" \
	    -e "s/^not ok - /not ok - stress-host: $v $prog: /" \
	    -e '/^ok - \|^not ok - \|^# /!s/^/# /' "$out"
	if [ "$rc" -eq 137 ]; then
		echo "not ok - stress-host: $v $prog: killed by the ${watchdog}s watchdog (hang)"
		failed=1
	elif [ "$rc" -ne 0 ]; then
		grep -q '^not ok - ' "$out" ||
			echo "not ok - stress-host: $v $prog: exited with status $rc"
		failed=1
	fi
	rm -f "$out"
}

for v in plain asan; do
	KNITK_STORM_KILLS=$kills run "$v" pool_kill_test
done
KNITK_CLIENT_KILLS=$client_kills run plain pool_client_kill_test
for v in plain asan; do
	KNITK_SERVER_KILLS=$server_kills run "$v" server_client_kill_test
done
# The stealing pool churn, longer than make check's (600 pools, and 150
# per case under CPU pressure and with stopped workers).
KNITK_CHURN_POOLS=${KNITK_CHURN_POOLS:-3000} run plain pool_steal_churn_test
exit $failed
