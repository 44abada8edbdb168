#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Model-check knitk's protocol models with spin.
#
#   run-models.sh [BUILD_DIR]
#
# For every entry of the table below: spin -a, compile pan, run it, in
# BUILD_DIR/<id>.  A model entry passes when pan explores the whole state
# space and reports no error.  A broken-variant entry passes only when pan
# REPORTS an error whose message matches the expected pattern (a model that
# cannot fail proves nothing).  Prints one flat TAP line per entry
# ("ok - model: ..." / "not ok - model: ..."), everything else as "# "
# comments, and exits non-zero if any entry failed.
#
# Environment: SPIN, CC, MODELS_JOBS (parallel runs, default 2),
# MODELS_ONLY (run only the entries whose id matches this regex).
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build/models}
mkdir -p "$build" && build=$(cd "$build" && pwd)
SPIN=${SPIN:-spin}
CC=${CC:-gcc}
jobs=${MODELS_JOBS:-2}
only=${MODELS_ONLY:-.}
depth=200000

# id ; model ; defines ; mode ; expected error, an ERE (empty: must verify) ;
# name: what
table=(
"lane;lane.pml;;safety;;lane: exactly-once decode, lane ownership, no live arena slot handed out (3 lanes, 2 arena slots, 4 messages, 1 rollback)"
"lane-2x2;lane.pml;-DLANES=2 -DSLOTS=2 -DMSGS=5 -DROLLBACKS=2;safety;;lane: exactly-once decode, lane ownership, no live arena slot handed out (2 lanes, 2 arena slots, 5 messages, 2 rollbacks)"
"lane-blind-free;lane.pml;-DBROKEN_BLIND_FREE;safety;assertion violated  *!\(live\[slot\]\);lane: broken variant rejected (blind store of each freer's private copy of the arena free word: live slot reused)"
"lane-early-ack;lane.pml;-DBROKEN_EARLY_ACK;safety;assertion violated.*decoded\[;lane: broken variant rejected (ack stored before the lanes are read: message lost or decoded twice)"
"sleepwake;sleepwake.pml;;safety;;sleepwake: no lost wake-up, every message consumed (2 mailboxes, 2 messages each, infinite park)"
"sleepwake-ltl;sleepwake.pml;-DFOREVER;ltl;;sleepwake: pending work is always eventually consumed (LTL, waiter may park forever)"
"sleepwake-no-recheck;sleepwake.pml;-DBROKEN_NO_RECHECK;safety;invalid end state;sleepwake: broken variant rejected (no re-check after setting the sleeping flag: lost wake-up)"
"sleepwake-no-recheck-ltl;sleepwake.pml;-DFOREVER -DBROKEN_NO_RECHECK;ltl;acceptance cycle;sleepwake: broken variant rejected (no re-check after setting the sleeping flag: work never consumed, LTL)"
"sleepwake-flag-first;sleepwake.pml;-DBROKEN_FLAG_FIRST;safety;invalid end state;sleepwake: broken variant rejected (waker reads the flag before publishing: lost wake-up)"
"sleepwake-spin;sleepwake.pml;-DSPINPHASE;safety;;sleepwake: no lost wake-up with a spin before the sleep (S8), every message consumed"
"sleepwake-spin-ltl;sleepwake.pml;-DSPINPHASE -DFOREVER;ltl;;sleepwake: pending work is always eventually consumed with the spin phase (LTL)"
"sleepwake-spin-unflagged;sleepwake.pml;-DSPINPHASE -DBROKEN_SPIN_UNFLAGGED;safety;invalid end state;sleepwake: broken variant rejected (spin with the sleeping flag down, raised only to sleep: lost wake-up)"
"sleepwake-combined;sleepwake.pml;-DCOMBINED -DSPINPHASE;safety;;sleepwake: ring-then-wait ping-pong (S9), spin phase, every call answered, no side parked forever (3 rounds)"
"sleepwake-combined-late-flag;sleepwake.pml;-DCOMBINED -DSPINPHASE -DBROKEN_LATE_FLAG;safety;invalid end state;sleepwake: broken variant rejected (the combined call sets the flag after its ring, no re-check: lost wake-up)"
"sleepwake-partial;sleepwake.pml;-DBROKEN_PARTIAL_RECHECK;safety;invalid end state;sleepwake: broken variant rejected (re-check skips a consumed mailbox: lost wake-up)"
"steal;steal.pml;-DCLAIMANTS=2 -DLANES=3 -DG=1 -DMSGS=2;safety;;steal: one holder per region, exactly-once claim, no deadlock (2 workers, 3 regions of 1 lane, 2 messages)"
"steal-reuse;steal.pml;-DCLAIMANTS=2 -DLANES=2 -DG=1 -DMSGS=3;safety;;steal: one holder per region, exactly-once claim, lanes reused (2 workers, 2 regions of 1 lane, 3 messages)"
"steal-g2;steal.pml;-DCLAIMANTS=2 -DLANES=4 -DG=2 -DMSGS=2;safety;;steal: one holder per region, exactly-once claim (2 workers, 2 regions of 2 lanes, 2 messages)"
"steal-dead-junior;steal.pml;-DCLAIMANTS=2 -DLANES=3 -DG=1 -DMSGS=2 -DDEAD=1;safety;;steal: a junior dies at any step: every message retired once, no survivor waits on it (2 workers, 3 regions of 1 lane)"
"steal-dead-senior;steal.pml;-DCLAIMANTS=2 -DLANES=4 -DG=2 -DMSGS=2 -DDEAD=0;safety;;steal: a senior dies at any step: every message retired once, no survivor waits on it (2 workers, 2 regions of 2 lanes)"
"steal-3-dead;steal.pml;-DCLAIMANTS=3 -DLANES=2 -DG=1 -DMSGS=1 -DDEAD=2;safety;;steal: 3 workers, one dies, one stalls while the senior waits: exactly-once, no deadlock (2 regions of 1 lane, 1 message)"
"steal-no-recheck;steal.pml;-DCLAIMANTS=2 -DLANES=2 -DG=1 -DMSGS=2 -DBROKEN_NO_RECHECK;safety;assertion violated.*(holders\[r\]|taken\[m\]);steal: broken variant rejected (no re-check of the other WANT words: double claim)"
"steal-no-fence;steal.pml;-DCLAIMANTS=2 -DLANES=3 -DG=1 -DMSGS=3 -DBROKEN_NO_FENCE;safety;assertion violated.*(holders\[r\]|taken\[m\]);steal: broken variant rejected (no StoreLoad fence after the WANT store: double claim)"
"steal-clear-first;steal.pml;-DCLAIMANTS=2 -DLANES=2 -DG=1 -DMSGS=2 -DBROKEN_CLEAR_FIRST;safety;assertion violated.*taken\[m\];steal: broken variant rejected (WANT cleared before ACK stored: lane retired twice)"
"steal-ignore-live;steal.pml;-DCLAIMANTS=2 -DLANES=2 -DG=1 -DMSGS=2 -DDEAD=1 -DBROKEN_IGNORE_LIVE;safety;invalid end state;steal: broken variant rejected (LIVE mask ignored: a senior waits for ever on a dead junior)"
"steal-resv-late;steal.pml;-DCLAIMANTS=2 -DLANES=2 -DG=1 -DMSGS=2 -DBROKEN_RESV_LATE;safety;assertion violated.*resv;steal: broken variant rejected (a lane reserved after it was published: another worker takes it)"
"steal-handoff;steal.pml;-DCLAIMANTS=2 -DLANES=3 -DG=1 -DMSGS=1 -DHANDOFFS=1;safety;;steal: the producer's hand-off (T14) to the junior: every lane it hands over is the worker's, exactly-once, no deadlock (2 workers, 3 regions of 1 lane)"
"steal-handoff-senior-g2;steal.pml;-DCLAIMANTS=2 -DLANES=4 -DG=2 -DMSGS=1 -DHANDOFFS=1 -DHANDOFF_TO=0;safety;;steal: the producer's hand-off (T14) to the senior, regions of 2 lanes: every lane it hands over is the worker's, exactly-once, no deadlock"
"steal-handoff-dead-to;steal.pml;-DCLAIMANTS=2 -DLANES=3 -DG=1 -DMSGS=1 -DHANDOFFS=1 -DDEAD=1;safety;;steal: the worker handed to dies at any step: its lanes lapse to the survivor, exactly-once, no deadlock (T13, T14)"
"steal-handoff-dead-peer;steal.pml;-DCLAIMANTS=2 -DLANES=3 -DG=1 -DMSGS=1 -DHANDOFFS=1 -DDEAD=0;safety;;steal: the other worker dies at any step during a hand-off: exactly-once, no deadlock (T14)"
"steal-handoff-no-recheck;steal.pml;-DCLAIMANTS=2 -DLANES=2 -DG=1 -DMSGS=1 -DHANDOFFS=1 -DBROKEN_HANDOFF_NO_RECHECK;safety;assertion violated.*(hoff_took|resv);steal: broken variant rejected (hand-off without the WANT re-check: a claimant takes a lane handed to another, the ring is spurious)"
"steal-handoff-no-reload;steal.pml;-DCLAIMANTS=2 -DLANES=2 -DG=1 -DMSGS=1 -DHANDOFFS=1 -DBROKEN_HANDOFF_NO_RELOAD;safety;assertion violated.*hoff_took;steal: broken variant rejected (hand-off without reloading the acks: a lane already taken is handed over, the ring is spurious)"
"steal-handoff-no-resv-reload;steal.pml;-DCLAIMANTS=2 -DLANES=2 -DG=1 -DMSGS=1 -DHANDOFFS=1 -DBROKEN_HANDOFF_NO_RESV_RELOAD;safety;assertion violated.*resv;steal: broken variant rejected (hand-off without reloading the reservations: a lane a claimant handed to another worker meanwhile is reserved for two workers, and neither takes it)"
"steal-handoff-filter;steal.pml;-DCLAIMANTS=2 -DLANES=2 -DG=1 -DMSGS=1 -DHANDOFFS=1 -DFILTER;safety;;steal: a lane reserved for a live worker is its work in its doorbell re-check and notify filter in every state, also inside a producer's hand-off that finds it reserved (T13, T14)"
"steal-handoff-filter-others;steal.pml;-DCLAIMANTS=2 -DLANES=2 -DG=1 -DMSGS=1 -DHANDOFFS=1 -DFILTER -DBROKEN_FILTER_OTHERS;safety;assertion violated.*resv\\[d\\];steal: broken variant rejected (re-check and filter leave out lanes reserved for another worker too: during a producer's hand-off a worker's own lanes are not its work, it sleeps past them and its ring is filtered out)"
"complete;complete.pml;;safety;;complete: a call owns its completion (R1-R8): every call completes once, runs at most once, gets its own result, no waiter parked for ever (1 slot reused, 2 calls, 2 workers, a stale request, aborts)"
"complete-dead;complete.pml;-DDEAD=0 -DABORTER;safety;;complete: a worker dies at any step, another thread aborts while the owner waits: the dead worker's call fails once, the rest complete, a successor serves (2 workers)"
"complete-dead-only;complete.pml;-DWORKERS=1 -DDEAD=0 -DCALLS=3;safety;;complete: the only worker dies at any step and is respawned: every call completes once (3 calls on 1 slot)"
"complete-dead-no-respawn;complete.pml;-DWORKERS=1 -DDEAD=0 -DRESPAWN=0;safety;;complete: the only worker dies, no respawn: its call fails, later calls fail at once, nobody waits for ever"
"complete-abort-store;complete.pml;-DBROKEN_ABORT_STORE -DABORTER;safety;assertion violated.*completions;complete: broken variant rejected (abort by a look and a store, not a CAS: a call completed twice)"
"complete-done-first;complete.pml;-DBROKEN_DONE_FIRST;safety;assertion violated.*r *== *c;complete: broken variant rejected (DONE stored before the result bytes: the owner reads another call's result)"
"complete-death-unseen;complete.pml;-DBROKEN_DEATH_UNSEEN -DDEAD=0;safety;invalid end state;complete: broken variant rejected (death not seen: the owner of the dead worker's call waits for ever)"
"complete-park-store;complete.pml;-DBROKEN_PARK_STORE;safety;invalid end state;complete: broken variant rejected (waiter bit stored after a look, not by CAS: lost wake-up)"
"complete-no-gen;complete.pml;-DBROKEN_NO_GEN;safety;assertion violated.*r *== *c;complete: broken variant rejected (no generation in the CASes: a stale request claims the slot's new call)"
"complete-reuse-held;complete.pml;-DBROKEN_REUSE_HELD;safety;assertion violated.*r *== *c;complete: broken variant rejected (a slot reused while an aborted call's worker still holds it)"
"ownwait;ownwait.pml;;safety;;ownwait: a host thread waits on its own call's word (R3, R6-R8): nobody sleeps for ever, every call completes once, each owner gets its own status, a late waiter leaves once the entry's next call is claimed (A aborted by another thread, the entry reused by B, wakes of every sleeper, 1 spurious wake)"
"ownwait-reuse;ownwait.pml;-DCALLS_B=2;safety;;ownwait: the same with B's two calls after A's on the entry (3 generations)"
"ownwait-wake-one;ownwait.pml;-DBROKEN_WAKE_ONE;safety;invalid end state;ownwait: broken variant rejected (a wake wakes one sleeper: a late waiter on the reused entry takes the next call's wake, its owner sleeps for ever)"
"ownwait-no-gen;ownwait.pml;-DBROKEN_NO_GEN;safety;assertion violated.*late;ownwait: broken variant rejected (no generation check in the owner's loop: a waiter whose call ended keeps waiting on the next call's word)"
"ownwait-no-gen-wake-one;ownwait.pml;-DBROKEN_NO_GEN -DBROKEN_WAKE_ONE;safety;invalid end state;ownwait: broken variant rejected (no generation check and wakes of one sleeper, the defect as it was: the next call's owner sleeps for ever)"
"ownwait-park-store;ownwait.pml;-DBROKEN_PARK_STORE;safety;invalid end state;ownwait: broken variant rejected (PARKED by a plain store after a load, not a CAS: a finish undone, lost wake-up)"
)

# run_one INDEX: runs one entry, leaves its verdict in $build/<id>/result.
run_one() {
	local id model defs mode expect what dir ccflags panflags
	local errors verdict why t0 t1
	IFS=';' read -r id model defs mode expect what <<<"${table[$1]}"
	dir=$build/$id
	rm -rf "$dir" && mkdir -p "$dir" || return
	ccflags="-O1 -w -DMEMLIM=2048"
	panflags="-m$depth"
	if [ "$mode" = ltl ]; then
		panflags="$panflags -a"
	else
		ccflags="$ccflags -DSAFETY"
	fi
	t0=$(date +%s.%N)
	verdict=ok why=""
	# shellcheck disable=SC2086
	if ! (cd "$dir" && "$SPIN" $defs -a "$here/$model") >"$dir/spin.log" 2>&1; then
		verdict="not ok" why="spin -a failed: $(tail -n 1 "$dir/spin.log")"
	elif ! (cd "$dir" && "$CC" $ccflags -o pan pan.c) >"$dir/cc.log" 2>&1; then
		verdict="not ok" why="compiling pan failed: $(tail -n 1 "$dir/cc.log")"
	else
		(cd "$dir" && ./pan $panflags) >"$dir/pan.log" 2>&1
		errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$dir/pan.log" | tail -n 1)
		if [ -z "$errors" ]; then
			verdict="not ok" why="pan did not finish: $(tail -n 1 "$dir/pan.log")"
		elif [ -z "$expect" ]; then
			if [ "$errors" -ne 0 ]; then
				verdict="not ok" why="$(grep -m1 '^pan:[0-9]' "$dir/pan.log")"
			elif grep -q 'max search depth too small' "$dir/pan.log"; then
				verdict="not ok" why="search truncated at depth $depth"
			elif grep -q -e 'MEMLIM' -e 'out of memory' "$dir/pan.log"; then
				verdict="not ok" why="search ran out of memory"
			fi
		else
			if [ "$errors" -eq 0 ]; then
				verdict="not ok" why="spin found no error in a broken variant"
			elif ! grep -m1 '^pan:[0-9]' "$dir/pan.log" | grep -Eq "$expect"; then
				verdict="not ok" why="unexpected error: $(grep -m1 '^pan:[0-9]' "$dir/pan.log")"
			else
				why="$(grep -m1 '^pan:[0-9]' "$dir/pan.log" | sed 's/ *(at depth.*//')"
			fi
		fi
	fi
	t1=$(date +%s.%N)
	{
		echo "$verdict - model: $what"
		stats=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1 states/p' "$dir/pan.log" 2>/dev/null | head -n 1)
		printf '# %s: %s%s, %.1f s%s\n' "$id" "${defs:-defaults}" \
			"${stats:+, $stats}" "$(echo "$t1 - $t0" | bc)" \
			"${why:+; $why}"
		if [ -f "$dir/$model.trail" ]; then
			echo "# $id: counterexample: (cd $dir && $SPIN -t -k $model.trail -p $defs $here/$model)"
		fi
	} >"$dir/result"
}

if ! command -v "$SPIN" >/dev/null 2>&1 || ! command -v "$CC" >/dev/null 2>&1; then
	echo "not ok - model: spin and a C compiler are needed ($SPIN, $CC)"
	exit 1
fi

selected=()
for i in "${!table[@]}"; do
	id=${table[$i]%%;*}
	if [[ $id =~ $only ]]; then
		selected+=("$i")
	fi
done

for i in "${selected[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n
	done
	run_one "$i" &
done
wait

failed=0
for i in "${selected[@]}"; do
	id=${table[$i]%%;*}
	if [ -f "$build/$id/result" ]; then
		cat "$build/$id/result"
	else
		echo "not ok - model: $id: no result"
	fi
	if ! grep -q '^ok ' "$build/$id/result" 2>/dev/null; then
		failed=$((failed + 1))
	fi
done
[ "$failed" -eq 0 ]
