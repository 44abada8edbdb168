/* SPDX-License-Identifier: GPL-2.0 */
/*
 * complete.pml - a call owns its completion: the call slot protocol
 * (docs/protocol.md R1-R8).
 *
 * A call lives in a slot of its submitter's call table, in the knot.  One
 * word, the slot's state, says everything about it, and every party but
 * the slot's owner changes it only by compare-and-swap:
 *
 *   gen    the call's generation: bumped by the owner per call (R1)
 *   phase  FREE, QUEUED, RUNNING, DONE or FAILED
 *   by     the worker that claimed it (RUNNING, and DONE or FAILED after)
 *   held   that worker may still write the slot's result bytes (R3)
 *   waiter a thread of the owner is parked on the word (R6)
 *
 *   R1 submit (owner):  slot FREE and not held: state := {gen + 1, QUEUED};
 *                       then publish a request naming (slot, gen)
 *   R2 claim (worker w, for a request (slot, g) it took):
 *                       CAS {g, QUEUED} -> {g, RUNNING, by w, held};
 *                       failed: the call is not its to run; skip it
 *   R3 complete (w):    write the result bytes, then
 *                       CAS {g, RUNNING, by w, held} -> {g, DONE};
 *                       failed (aborted meanwhile): clear held alone;
 *                       either way, wake the owner if waiter was set
 *   R4 abort, deadline (owner's threads):
 *                       CAS {g, QUEUED or RUNNING} -> {g, FAILED}
 *                       (held and by kept); wake if waiter was set
 *   R5 death of w (whoever learns of it, once):
 *                       every slot {RUNNING, by w} -> {FAILED}, not held;
 *                       {FAILED, by w, held} -> not held; by CAS, waking
 *   R6 wait (owner):    spin on the word; to park, CAS the waiter bit
 *                       into a word not DONE or FAILED, then sleep while
 *                       the word is that value (a futex wait on it)
 *   R7 result:          the owner reads the result bytes only in DONE,
 *                       after its acquire of the word
 *   R8 reuse:           the owner takes a slot again only once it is
 *                       DONE or FAILED and not held
 *
 * The model: one owner with SLOTS slots runs CALLS calls; WORKERS workers
 * take requests from a queue (private dispatch and stealing alike: which
 * worker takes a request is the lane protocol's business, lane.pml and
 * steal.pml; here any worker may take any request, and a request may be
 * delivered twice, as a stale lane of an earlier call or a replay after a
 * respawn would be).  The owner may abort any call at any time (a deadline
 * is the same step), and with ABORTER another of its threads aborts a
 * call once while the owner waits.  Worker DEAD may die at any step; the
 * death handler then runs R5 (with RESPAWN a successor starts; without it
 * and with a single worker, calls fail for want of a worker).  Each CAS
 * is one atomic step, as the hardware's is.
 *
 * Checked (safety, no invalid end state):
 *  - every call completes exactly once (ghost count at each winning CAS);
 *  - every call runs at most once;
 *  - a result the owner reads is its own call's;
 *  - the owner never waits for ever: a lost wake-up, or a dead worker's
 *    call nobody fails, leaves it blocked (invalid end state).
 *
 * Broken variants:
 *  - BROKEN_ABORT_STORE: abort looks at the phase, then stores FAILED
 *    (no CAS): a result and an abort both complete the call.
 *  - BROKEN_DONE_FIRST: the worker stores DONE before its result bytes:
 *    the owner reads bytes that are not the call's yet.
 *  - BROKEN_DEATH_UNSEEN: the death handler fails nothing: the owner of a
 *    call the dead worker held waits for ever.
 *  - BROKEN_PARK_STORE: the owner looks at the phase, then stores the
 *    waiter bit (no CAS): a completion between the two is a lost wake-up.
 *  - BROKEN_NO_GEN: the CASes compare the phase only, not the generation:
 *    a stale request of an earlier call claims the slot's new call, and
 *    the new call gets the earlier call's result.
 *  - BROKEN_REUSE_HELD: the owner reuses a slot still held by the worker
 *    of an aborted call: that worker's bytes land in the new call's slot.
 */

#ifndef SLOTS
#define SLOTS		1
#endif
#ifndef CALLS
#define CALLS		2
#endif
#ifndef WORKERS
#define WORKERS		2
#endif
#ifndef DEAD
#define DEAD		WORKERS		/* the worker that may die; none */
#endif
#ifndef DUPS
#define DUPS		1		/* requests delivered twice */
#endif
#ifndef RESPAWN
#define RESPAWN		1		/* a successor replaces the dead */
#endif
#define QLEN		(CALLS + DUPS)
#ifdef BROKEN_NO_GEN
#define GEN_OK(s, g)	1		/* the phase alone decides */
#else
#define GEN_OK(s, g)	(gen[s] == (g))
#endif
#define NOBODY		255

mtype = { FREE, QUEUED, RUNNING, DONE, FAILED };

/* The slot words (one word each in the code). */
byte gen[SLOTS];
mtype phase[SLOTS];
byte by[SLOTS];
bool held[SLOTS];
bool waiter[SLOTS];
/* The slot's result bytes (a call id stands for them). */
byte result[SLOTS];

/*
 * The request lanes: (slot, gen) pairs.  A lane is pending, held by the
 * worker that took it (copied, not retired: the claim handshake gives it
 * to one worker at a time) or retired (acknowledged).
 */
byte q_slot[QLEN];
byte q_gen[QLEN];
byte q_call[QLEN];		/* ghost: the call the request was for */
byte q_holder[QLEN];		/* NOBODY: pending; or the worker */
bool q_retired[QLEN];
byte q_tail;
byte q_pending;			/* lanes pending and not held */

bool dead;			/* worker DEAD died */
bool death_done;		/* R5 ran */
byte wakes;			/* ghost: wakes issued */

/* Ghost state for the checks, by call id (1..CALLS). */
byte completions[CALLS + 1];
byte runs[CALLS + 1];
byte call_of[SLOTS];		/* the call in each slot now */
bool owner_done;

inline complete_ghost(s)
{
	completions[call_of[s]]++;
	assert(completions[call_of[s]] == 1)
}

/* ---------------------------------------------------------------- owner */

/*
 * R6: wait until slot s is DONE or FAILED (and, for reuse, not held).
 * The futex wait is modelled by its effect: asleep until a waker clears
 * the waiter bit (every waker does, and wakes); a word that changed since
 * the bit was set makes the CAS that sets it fail instead.
 */
inline wait_slot(s, want_unheld)
{
	do
	:: (phase[s] == DONE || phase[s] == FAILED) &&
	   (!want_unheld || !held[s]) -> break
	:: else ->
#ifdef BROKEN_PARK_STORE
		/* A look, then a plain store of the bit. */
		parked = !(phase[s] == DONE || phase[s] == FAILED) ||
			 (want_unheld && held[s]);
		if
		:: parked -> waiter[s] = 1
		:: else -> skip
		fi;
#else
		atomic {
			parked = !(phase[s] == DONE || phase[s] == FAILED) ||
				 (want_unheld && held[s]);
			if
			:: parked -> waiter[s] = 1
			:: else -> skip
			fi
		}
#endif
		if
		:: parked -> (!waiter[s])
		:: else -> skip
		fi
	od
}

/* R4: abort (or expire) the call in slot s, if it is not over. */
inline abort_slot(s)
{
#ifdef BROKEN_ABORT_STORE
	if
	:: phase[s] == QUEUED || phase[s] == RUNNING ->
		phase[s] = FAILED;
		complete_ghost(s)
	:: else -> skip
	fi
#else
	atomic {
		if
		:: phase[s] == QUEUED || phase[s] == RUNNING ->
			phase[s] = FAILED;
			complete_ghost(s);
			if
			:: waiter[s] -> waiter[s] = 0; wakes++
			:: else -> skip
			fi
		:: else -> skip
		fi
	}
#endif
}

active proctype owner()
{
	byte c = 1, s, i, r;
	bool parked;

	do
	:: c > CALLS -> break
	:: else ->
		s = (c - 1) % SLOTS;
		/* R8: the slot's previous call is over and unheld. */
		if
		:: c > SLOTS ->
#ifdef BROKEN_REUSE_HELD
			wait_slot(s, 0)
#else
			wait_slot(s, 1)
#endif
		:: else -> skip
		fi;
		/*
		 * R1, then the publish of the request, under the submitter's
		 * lock that the death handler cycles: with no worker left
		 * and none coming, the call fails at once (-EPIPE).
		 */
		atomic {
			gen[s]++;
			by[s] = NOBODY;
			waiter[s] = 0;
			call_of[s] = c;
			if
			:: death_done && !RESPAWN && WORKERS == 1 ->
				phase[s] = FAILED;
				complete_ghost(s)
			:: else ->
				phase[s] = QUEUED;
				q_slot[q_tail] = s; q_gen[q_tail] = gen[s];
				q_call[q_tail] = c; q_holder[q_tail] = NOBODY;
				q_tail++; q_pending++
			fi
		}
		/* A stale delivery of the slot's previous call, maybe. */
		if
		:: c > 1 && q_tail < QLEN ->
			atomic {
				q_slot[q_tail] = s; q_gen[q_tail] = gen[s] - 1;
				q_call[q_tail] = c - 1; q_holder[q_tail] = NOBODY;
				q_tail++; q_pending++
			}
		:: true -> skip
		fi;
		/* R4: abort at any time, or wait. */
		if
		:: true -> abort_slot(s)
		:: true -> skip
		fi;
		wait_slot(s, 0);
		/* R7: the result, in DONE only. */
		if
		:: phase[s] == DONE -> r = result[s]; assert(r == c)
		:: else -> skip
		fi;
		c++
	od;
	/* Every call completed once. */
	i = 1;
	do
	:: i > CALLS -> break
	:: else -> assert(completions[i] == 1); i++
	od;
	owner_done = 1
}

/* --------------------------------------------------------------- workers */

proctype worker(byte w)
{
	byte s, g, call, k;
	bool won;

	{
end_take:
	do
	:: atomic {
		/* Take a pending lane: copied, not retired yet. */
		q_pending > 0 ->
		k = 0;
		do
		:: q_retired[k] || q_holder[k] != NOBODY -> k++
		:: !q_retired[k] && q_holder[k] == NOBODY ->
			q_holder[k] = w; q_pending--; break
		od
	   } ->
		s = q_slot[k]; g = q_gen[k]; call = q_call[k];
		/* R2: claim, before the lane is retired. */
		atomic {
			if
			:: GEN_OK(s, g) && phase[s] == QUEUED ->
				phase[s] = RUNNING; by[s] = w; held[s] = 1;
				runs[call_of[s]]++;
				assert(runs[call_of[s]] == 1);
				won = 1
			:: else -> won = 0
			fi
		}
		/* Retire the lane: claimed, or not to be run. */
		q_retired[k] = 1;
		if
		:: !won -> goto next
		:: else -> skip
		fi;
		/* The task runs (for the call it read from the request). */
#ifdef BROKEN_DONE_FIRST
		atomic {
			if
			:: GEN_OK(s, g) && phase[s] == RUNNING && by[s] == w && held[s] ->
				phase[s] = DONE; held[s] = 0;
				complete_ghost(s)
			:: GEN_OK(s, g) && phase[s] == FAILED && by[s] == w && held[s] ->
				held[s] = 0
			:: else -> skip
			fi;
			if
			:: waiter[s] -> waiter[s] = 0; wakes++
			:: else -> skip
			fi
		}
		result[s] = call;
#else
		/* R3: the bytes, then the CAS (on the whole word, gen too). */
		result[s] = call;
		atomic {
			if
			:: GEN_OK(s, g) && phase[s] == RUNNING && by[s] == w && held[s] ->
				phase[s] = DONE; held[s] = 0;
				complete_ghost(s)
			:: GEN_OK(s, g) && phase[s] == FAILED && by[s] == w && held[s] ->
				held[s] = 0	/* aborted: leave */
			:: else -> skip
			fi;
			if
			:: waiter[s] -> waiter[s] = 0; wakes++
			:: else -> skip
			fi
		}
#endif
next:
		skip
	od
	} unless { dead && w == DEAD }
}

#ifdef ABORTER
/* Another thread of the owner aborts a call once, while the owner waits. */
active proctype aborter()
{
	byte s;

	s = 0;
	do
	:: s < SLOTS - 1 -> s++
	:: true -> break
	od;
	abort_slot(s)
}
#endif

/* Worker DEAD dies at any step: it takes no step after this. */
active proctype killer()
{
	if
	:: DEAD < WORKERS -> dead = 1
	:: true -> skip
	fi
}

/*
 * R5: whoever learns of the death fails the dead worker's calls, once;
 * the lanes it took and did not retire are pending again (a survivor or
 * the successor takes them: steal.pml).  With RESPAWN a successor starts
 * (a new id here: the killer targets the first incarnation only); without
 * it and with no worker left, the queued calls fail too (-EPIPE).
 */
active proctype death_handler()
{
	byte s, k;

end_wait:
	dead;
	atomic {
		k = 0;
		do
		:: k == q_tail -> break
		:: else ->
			if
			:: q_holder[k] == DEAD && !q_retired[k] ->
				q_holder[k] = NOBODY; q_pending++
			:: else -> skip
			fi;
			k++
		od
	}
	/* The walk, then death_done, under the submitter's lock. */
	atomic {
	s = 0;
	do
	:: s == SLOTS -> break
	:: else ->
		atomic {
#ifndef BROKEN_DEATH_UNSEEN
			if
			:: phase[s] == RUNNING && by[s] == DEAD ->
				phase[s] = FAILED; held[s] = 0;
				complete_ghost(s)
			:: phase[s] == FAILED && by[s] == DEAD && held[s] ->
				held[s] = 0
			:: phase[s] == QUEUED && !RESPAWN && WORKERS == 1 ->
				phase[s] = FAILED;
				complete_ghost(s)
			:: else -> skip
			fi;
#endif
			if
			:: waiter[s] -> waiter[s] = 0; wakes++
			:: else -> skip
			fi
		}
		s++
	od;
	death_done = 1
	}
	if
	:: RESPAWN -> run worker(WORKERS)
	:: else -> skip
	fi
}

init {
	byte w = 0;

	atomic {
		do
		:: w == WORKERS -> break
		:: else -> run worker(w); w++
		od
	}
}
