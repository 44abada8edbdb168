#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Smoke test of knitk-bench: builds it, runs "all --quick --json" on the
# futex backend, then in the guest on the module (vm-bench.sh --check), and checks structure and sanity, never speed
# (check-json.py: every case there with its time and CPU time, the ratios
# object's keys, messages moved, interleaving, idle wakes), then the
# option parsing and --help.  Prints flat
# TAP lines "ok - bench: <property>"; anything else starts with "# ".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
bench=$top/build/tools/knitk-bench
# Hang protection only (like lib/tests/run.sh), not a speed limit.
watchdog=${KNITK_TEST_WATCHDOG:-300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

if ! make -s -C "$top/tools" knitk-bench >"$tmp/build.log" 2>&1; then
	sed 's/^/# /' "$tmp/build.log"
	echo "not ok - bench: build"
	exit 1
fi
echo "ok - bench: build"

"$bench" --list >"$tmp/list" 2>&1 || failed=1
KNITK_BACKEND=futex timeout -s KILL "$watchdog" "$bench" all --quick --progress \
	--json "$tmp/out.json" --plot "$tmp/out.svg" >"$tmp/out.txt" 2>&1
rc=$?
sed 's/^/# /' "$tmp/out.txt"
if [ "$rc" -eq 137 ]; then
	echo "not ok - bench: killed by the ${watchdog}s watchdog (hang)"
	exit 1
elif [ "$rc" -eq 0 ] && [ "$failed" -eq 0 ]; then
	echo "ok - bench: --quick run exits 0"
else
	echo "not ok - bench: --quick run exits 0 (status $rc)"
	failed=1
fi

python3 "$top/tools/bench/check-json.py" "" futex "$tmp/list" "$tmp/out.json" \
	"$tmp/out.txt" "$tmp/out.svg" || failed=1

# --runs: the ratios' spread over whole runs (two quick runs of the
# pool-park cases and their futex baseline).
KNITK_BACKEND=futex timeout -s KILL "$watchdog" "$bench" --quick --runs 2 \
	--only pool-park,rtt-process/futex --json "$tmp/runs.json" >"$tmp/runs.txt" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && python3 - "$tmp/runs.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["ratios_spread"]["pool_park_vs_raw_futex"]
assert d["runs"] == 2 and len(s) == 3 and s[0] <= s[1] <= s[2]
assert s[1] == d["ratios"]["pool_park_vs_raw_futex"]
PY
then
	echo "ok - bench: --runs 2 reports each ratio's minimum, median and maximum"
else
	sed 's/^/# /' "$tmp/runs.txt"
	echo "not ok - bench: --runs 2 reports each ratio's minimum, median and maximum"
	failed=1
fi

# Bad values are errors; --help documents every option and case.
for bad in "--reps abc" "--reps 0" "--runs 0" "--runs 21" "--workers 2x" "--backend nope" "--bogus"; do
	# shellcheck disable=SC2086 # split on purpose
	if "$bench" $bad --list >/dev/null 2>&1; then
		echo "not ok - bench: '$bad' rejected"
		failed=1
	else
		echo "ok - bench: '$bad' rejected"
	fi
done
"$bench" --help >"$tmp/help" 2>&1
why=""
for w in --quick --reps --runs --workers --only --backend --json --plot --progress \
	 --list --verbose --help default $(cat "$tmp/list"); do
	grep -q -e "$w" "$tmp/help" || why="$why $w"
done
if [ -z "$why" ]; then
	echo "ok - bench: --help describes every option, default and case"
else
	echo "not ok - bench: --help lacks:$why"
	failed=1
fi

# --only selects by substring and by glob.
for pat in "rtt-thread/knitk-busy" "tput-*/knitk"; do
	sel=$("$bench" --list --only "$pat" | tr '\n' ' ')
	case "$pat" in
	rtt-*) want="rtt-thread/knitk-busy " ;;
	*) want="tput-8B/knitk tput-8B-oversub/knitk tput-4K/knitk " ;;
	esac
	if [ "$sel" = "$want" ]; then
		echo "ok - bench: --only '$pat'"
	else
		echo "not ok - bench: --only '$pat' selected '$sel'"
		failed=1
	fi
done
# The same in the guest, on the module (BENCH_GUEST=0 skips it, and says so).
if [ "${BENCH_GUEST:-1}" = 1 ]; then
	"$top/tools/bench/vm-bench.sh" --check 2>&1 | sed '/^\(not \)\{0,1\}ok /!s/^/# /'
	[ "${PIPESTATUS[0]}" -eq 0 ] || failed=1
else
	echo "ok - bench guest: knitk-bench in the guest # SKIP BENCH_GUEST=0"
fi
exit $failed
