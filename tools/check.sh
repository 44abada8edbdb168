#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs every test layer of knitk and prints one closing line,
# "N passed, M failed[, K skipped]".
#
# Each step is a command whose standard output carries flat TAP result
# lines at column 0 ("ok - name", "not ok - name", "ok - name # SKIP why").
# A step that exits non-zero without reporting a failure counts as one.
# CHECK_STEPS selects steps by name (default: all, in order).  Two more
# steps, not in the default list, make up make stress: stress-host (the
# futex backend's 1000-kill storms) and vm-debug (every kselftest under
# the debug guest kernel).
set -u
cd "$(dirname "$0")/.." || exit 2

steps_all="pkg host models kmod vm dkms kunit bench"
steps=${CHECK_STEPS:-$steps_all}
log_dir=${CHECK_LOG_DIR:-build/check}
mkdir -p "$log_dir"

step_cmd() {
	case "$1" in
	pkg)	echo "tools/pkg-check.sh" ;;
	host)	echo "make -s -C lib check" ;;
	models)	echo "make -s -C lib/models check" ;;
	kmod)	echo "tools/kmod-check.sh" ;;
	vm)	echo "tools/vm-check.sh" ;;
	dkms)	echo "tools/dkms-check.sh" ;;
	# The KUnit build trees in the cache are shared by every checkout.
	kunit)	mkdir -p "${KNITK_CACHE:-$HOME/.cache/knitk}" &&
		echo "flock ${KNITK_CACHE:-$HOME/.cache/knitk}/.kunit.lock tools/kunit.sh" ;;
	bench)	echo "tools/bench/smoke.sh" ;;
	stress-host)	echo "tools/stress-host.sh" ;;
	vm-debug)	echo "tools/vm-debug.sh" ;;
	*)	return 1 ;;
	esac
}

passed=0 failed=0 skipped=0
for step in $steps; do
	cmd=$(step_cmd "$step") || { echo "unknown step: $step" >&2; exit 2; }
	echo "# ---- $step: $cmd"
	out="$log_dir/$step.log"
	$cmd 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	p=$(grep -Ec '^ok ' "$out" || true)
	s=$(grep -Ec '^ok .*# ?SKIP' "$out" || true)
	f=$(grep -Ec '^not ok ' "$out" || true)
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "not ok - $step exited with status $rc"
		f=1
	fi
	passed=$((passed + p - s))
	skipped=$((skipped + s))
	failed=$((failed + f))
	echo "# ---- $step: $((p - s)) passed, $f failed, $s skipped"
done

if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
