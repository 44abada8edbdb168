/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ownwait.pml - a host thread waits for its own call on the call's word
 * (docs/protocol.md R3, R6, R7, R8; lib/pool/slot.h, wait.c
 * call_wait_own_locked, call.c knitk__call_take_back_locked, worker.c
 * worker_finish).
 *
 * One in-flight entry, one 64-bit word:
 *
 *   bits 63..32  gen     the generation of the entry's call
 *   low half     phase   FREE, RUNNING, DONE, FAILED or QUEUED
 *                by      the worker that claimed it (0: none)
 *                TAKE    a host thread waits for the call and takes its
 *                        result from the entry's box
 *                PARKED  that thread sleeps on the word
 *
 * Generation g is queued while the word still holds g - 1 (any phase);
 * a waiter of a queued call stores {g - 1, QUEUED} with its flags.  Only
 * the LOW half is the futex: a futex wait compares the low half alone, so
 * a sleeper does not compare the generation.
 *
 *   own wait (owner of gen g), under the pool lock: CAS TAKE into the
 *           word, queued ({g - 1, any} -> {g - 1, QUEUED, TAKE}) or
 *           {g, RUNNING} (slot_take); then without the lock:
 *           loop { v = load; leave if !TAKE, or gen(v) is neither g nor
 *           g - 1 (slot_of), or DONE, or FAILED; CAS v -> v | PARKED (a
 *           failed CAS looks again; none if PARKED is there); futex wait
 *           on the low half of v | PARKED: sleep only if the low half
 *           still holds it, until a wake (or spuriously) };
 *           then under the lock "take back": CAS the flags off a word
 *           with TAKE of gen g (slot_untake); wake the word if the old
 *           word had PARKED; a DONE one is settled: the owner completes
 *           the call with the box's result.  A call not complete then is
 *           waited for on the pool's condition variable (under the lock:
 *           no lost wake-up there).
 *   worker: claim ({g - 1, any} -> {g, RUNNING, by}, the flags kept only
 *           from {g - 1, QUEUED}; {g, FAILED, by 0}: aborted while
 *           queued, answered without running), run, write the box, CAS
 *           RUNNING -> DONE keeping TAKE and dropping PARKED
 *           (slot_finish), then wake the word if the old word had PARKED.
 *           With TAKE kept the box is the answer; otherwise the answer
 *           goes in a return lane, which a drainer completes (taking the
 *           flags back first) under the lock.
 *   abort (another host thread, under the lock): take back (a word that
 *           had PARKED, or no TAKE of g left, is woken); a DONE word with
 *           TAKE completes the call with its result; otherwise CAS
 *           {g, queued or RUNNING} -> {g, FAILED} (slot_abort) and the
 *           call completes -ECANCELED.
 *   reuse (R8): the entry goes to generation g + 1 once call g is
 *           complete and its worker answered (its DONE with TAKE, or its
 *           return lane).
 *
 * Parties: owner A waits for generation 1; owner B, another thread, then
 * submits CALLS_B calls (generations 2, ...) on the same entry, each once
 * the entry is free, and waits for each; one worker runs them in order;
 * an aborter may abort A's call at any step.  The futex is a flag per
 * owner: asleep until a wake clears it; a wake wakes every sleeper (the
 * code's UINT_MAX), or one; up to SPURIOUS sleeps end spuriously.  Each
 * section under the pool lock is one atomic step; each load, CAS and
 * futex call of the lock-free parts is one step.  The worker's wake comes
 * after its CAS, so the entry may be reused before that wake lands.  The
 * drainer of a return lane is a later step of the worker (its next claim
 * waits for the entry to be freed, which waits for that step).
 *
 * Checked (safety):
 *  - nobody sleeps for ever: a waiter asleep on a word nobody will wake,
 *    or an entry never freed, is an invalid end state;
 *  - every call completes exactly once and its worker answers once;
 *  - each owner returns its own call's status (its result, read from the
 *    box only in DONE with TAKE, or -ECANCELED for A's aborted call);
 *  - a waiter whose call has ended does not keep waiting once the entry's
 *    next call is claimed: a look at the word after that claim leaves the
 *    loop.  (A late waiter may still sleep for a moment on the next
 *    call's word, queued or claimed, whose low half matches the one it
 *    saw last: the futex compares no generation.  The next wake of the
 *    word, for every sleeper, ends that.)
 *
 * Not modelled: deaths and sealing (complete.pml), a result that does not
 * fit the box, flags dropped by a worker that does not know them, the
 * spin before the sleep, deadlines (an owner's timeout is a wait that
 * ends early, like a spurious wake; another thread's deadline is the
 * aborter).
 *
 * Broken variants:
 *  - BROKEN_WAKE_ONE: every wake wakes one sleeper.  A, its call taken
 *    back and its entry given to B, sleeps on B's queued word, whose low
 *    half is the one A expected (and whose generation, g, passes A's
 *    check); the wake for B goes to A, and B sleeps for ever (invalid end
 *    state).
 *  - BROKEN_NO_GEN: the owner's loop does not check the generation: A,
 *    its call over, sees B's claimed word with TAKE and waits on it until
 *    B's call ends (and, with more calls of B, on through them): the
 *    assertion above.  With wakes of every sleeper nobody sleeps for ever
 *    then; with BROKEN_WAKE_ONE too it is the defect as it was: A waits
 *    on B's word and takes B's wake (invalid end state).
 *  - BROKEN_PARK_STORE: the owner sets PARKED by a plain store of the
 *    word it loaded (v | PARKED), not a CAS: a claim and a finish between
 *    the load and the store are undone, and the owner sleeps on a word
 *    nobody will change again (lost wake-up: invalid end state).
 */

#ifndef CALLS_B
#define CALLS_B		1	/* B's calls after A's on the same entry */
#endif
#ifndef SPURIOUS
#define SPURIOUS	1	/* futex sleeps that may end spuriously */
#endif
#define NGEN		(1 + CALLS_B)

/* Phases (enum slot_phase). */
#define FREE		0
#define RUNNING		1
#define DONE		2
#define FAILED		3
#define QUEUED		4

#define W		1	/* the worker's by (worker 0 + 1) */
#define CANCELED	200	/* -ECANCELED; a result is its generation */

/* The word. */
byte wgen;
byte wph;
byte wby;
bool wtake;
bool wpark;
/* Its futex half: phase, by and the flags, no generation. */
#define LOW		(wph + 8 * wby + 32 * wtake + 64 * wpark)

byte box;			/* the entry's result box */
byte req = 1;			/* the newest generation requested */

/* The futex: the owners asleep on the word. */
bool sleeping[2];
byte spurious = SPURIOUS;

/* The call handles, by generation (index 0 unused). */
bool take[NGEN + 1];		/* the handle's take (call->take) */
bool done[NGEN + 1];
byte status[NGEN + 1];
bool answered[NGEN + 1];	/* ghost: its worker answered */
byte completions[NGEN + 1];	/* ghost */

bool claimed[NGEN + 2];		/* ghost: the worker claimed it to run */
byte over;			/* ghost: owners and worker that ended */

#ifdef BROKEN_NO_GEN
#define SLOT_OF(vg, vp, g)	1
#else
/* g's own word, or g queued: {g - 1, any}; {g, QUEUED} is g + 1's. */
#define SLOT_OF(vg, vp, g)	(((vg) == (g) && (vp) != QUEUED) || (vg) == (g) - 1)
#endif

/* knitk_word_wake of the word's low half. */
inline wake_word()
{
#ifdef BROKEN_WAKE_ONE
	if
	:: sleeping[0] -> sleeping[0] = 0
	:: sleeping[1] -> sleeping[1] = 0
	:: else -> skip
	fi
#else
	sleeping[0] = 0;
	sleeping[1] = 0
#endif
}

inline complete(cg, cst)
{
	completions[cg]++;
	assert(completions[cg] == 1);
	done[cg] = 1;
	status[cg] = cst
}

/*
 * knitk__call_take_back_locked, under the lock: the flags off gen tg's
 * word (slot_untake), the wake, a DONE word settled from the box.
 * Uses the caller's vok, vph, vpark.  twaiter: the owner itself.
 */
inline take_back(tg, twaiter, tsettled)
{
	tsettled = 0;
	if
	:: take[tg] ->
		take[tg] = 0;
		if
		:: wtake && (wgen == tg || (wgen == tg - 1 && wph == QUEUED)) ->
			vok = 1; vph = wph; vpark = wpark;
			wtake = 0; wpark = 0
		:: else -> vok = 0
		fi;
		if
		:: (!vok && !twaiter) || (vok && vpark) -> wake_word()
		:: else -> skip
		fi;
		if
		:: vok && vph == DONE ->
			assert(box == tg);	/* R7: its own result */
			complete(tg, box);
			tsettled = 1
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* A return lane's answer of gen dg: the drainer, under the lock. */
inline drain(dg, dst)
{
	atomic {
		if
		:: !done[dg] ->
			take_back(dg, 0, settled);
			if
			:: !settled -> complete(dg, dst)
			:: else -> skip
			fi
		:: else -> skip
		fi;
		assert(!answered[dg]);
		answered[dg] = 1
	}
}

proctype owner(byte p; byte first; byte last)
{
	byte g = first, vgen, vph, vby, exp;
	bool vtake, vpark, vok, settled, mine, moved;
	bool late;	/* ghost: at the load, call ended, next claimed */

	do
	:: g > last -> break
	:: else ->
		/* R8, then the submit (A's request is there at the start). */
		if
		:: g > 1 -> atomic { done[g - 1] && answered[g - 1] -> req = g }
		:: else -> skip
		fi;
		/* R6: TAKE, under the lock (slot_take). */
		atomic {
			mine = 0;
			if
			:: done[g] -> skip
			:: else ->
				if
				:: wgen == g - 1 ->
					wby = 0; wph = QUEUED;
					wtake = 1; wpark = 0;
					mine = 1
				:: wgen == g && wph == RUNNING ->
					wtake = 1;
					mine = 1
				:: else -> skip
				fi;
				take[g] = mine
			fi
		}
		if
		:: mine ->
			do
			:: d_step {
				vgen = wgen; vph = wph; vby = wby;
				vtake = wtake; vpark = wpark;
				late = done[g] && claimed[g + 1]
			   }
				if
				:: !vtake || !SLOT_OF(vgen, vph, g) ||
				   vph == DONE || vph == FAILED -> break
				:: else -> skip
				fi;
				/* Its call ended: no later call is waited on. */
				assert(!late);
				/* slot_park */
				moved = 0;
				if
				:: vpark -> skip
				:: else ->
#ifdef BROKEN_PARK_STORE
					d_step {
						wgen = vgen; wph = vph;
						wby = vby; wtake = vtake;
						wpark = 1
					}
#else
					atomic {
						if
						:: wgen == vgen && wph == vph &&
						   wby == vby && wtake == vtake &&
						   !wpark -> wpark = 1
						:: else -> moved = 1
						fi
					}
#endif
				fi;
				if
				:: moved -> skip	/* look again */
				:: else ->
					/* futex wait on low(v | PARKED) */
					exp = vph + 8 * vby + 32 * vtake + 64;
					atomic {
						if
						:: LOW == exp -> sleeping[p] = 1
						:: else -> skip	/* -EAGAIN */
						fi
					}
					if
					:: !sleeping[p] -> skip
					:: atomic {
						sleeping[p] && spurious > 0 ->
						spurious--;
						sleeping[p] = 0
					   }
					fi
				fi
			od;
			atomic { take_back(g, 1, settled) }
		:: else -> skip
		fi;
		/* Not complete yet: the condition variable, under the lock. */
		done[g];
		assert(status[g] == g || (g == 1 && status[g] == CANCELED));
		g++
	od;
	over++
}

active proctype worker()
{
	byte g = 1, how, ovph, vph;
	bool ovtake, ovpark, vok, vpark, settled;

	do
	:: g > NGEN -> break
	:: else ->
		req >= g;	/* gen g's request lane */
		/* R2: the claim (slot_claim). */
		atomic {
			if
			:: wgen == g - 1 ->
				if
				:: wph != QUEUED -> wtake = 0; wpark = 0
				:: else -> skip
				fi;
				wgen = g; wby = W; wph = RUNNING;
				claimed[g] = 1;
				how = 1		/* SLOT_RUN */
			:: wgen == g && wph == FAILED && wby == 0 ->
				wby = W;
				how = 2		/* SLOT_ANSWER */
			:: else ->
				how = 0		/* SLOT_SKIP */
			fi
		}
		if
		:: how == 1 ->
			box = g;	/* the result, then the word (R3) */
			atomic {
				ovph = wph; ovtake = wtake; ovpark = wpark;
				if
				:: wgen == g && wby == W && wph == RUNNING ->
					wph = DONE; wpark = 0;
					if
					:: wtake -> answered[g] = 1	/* the box */
					:: else -> skip
					fi
				:: else -> skip		/* aborted */
				fi
			}
			if
			:: ovpark -> wake_word()
			:: else -> skip
			fi;
			if
			:: ovtake && ovph == RUNNING -> skip
			:: else -> drain(g, g)		/* a return lane */
			fi
		:: how == 2 -> drain(g, CANCELED)	/* not run */
		:: else -> skip
		fi;
		g++
	od;
	over++
}

/* Another host thread aborts A's call, at any step, or never. */
active proctype aborter()
{
	byte vph;
	bool vok, vpark, settled;

	if
	:: atomic {
		if
		:: done[1] -> skip		/* -EALREADY */
		:: else -> take_back(1, 0, settled)
		fi;
		if
		:: done[1] -> skip		/* done, or settled: -EALREADY */
		:: else ->
			/* slot_abort: queued or RUNNING -> FAILED */
			if
			:: wgen == 0 ->
				wgen = 1; wby = 0; wph = FAILED;
				wtake = 0; wpark = 0
			:: wgen == 1 && wph == RUNNING ->
				wph = FAILED; wtake = 0; wpark = 0
			:: else -> skip
			fi;
			complete(1, CANCELED)
		fi
	   }
	:: true -> skip
	fi
}

init
{
	byte g;

	atomic {
		run owner(0, 1, 1);
		run owner(1, 2, NGEN)
	}
	over == 3;
	g = 1;
	do
	:: g > NGEN -> break
	:: else ->
		assert(completions[g] == 1 && answered[g]);
		g++
	od;
	assert(!sleeping[0] && !sleeping[1])
}
