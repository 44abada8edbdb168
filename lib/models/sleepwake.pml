/* SPDX-License-Identifier: GPL-2.0 */
/*
 * sleepwake.pml - the doorbell sleep/wake protocol
 * (docs/protocol.md S1-S4, H1).
 *
 * One waiter consumes MBOXES mailboxes (the host over the return mailboxes
 * of its workers, H1; a worker has one).  Each mailbox has its own
 * producer, a waker, that publishes ITEMS messages.  A mailbox is reduced to
 * its pub and ack words (counters here: pending while they differ).  The
 * waiter's doorbell is a sequence word plus a sleeping flag.
 *
 *   waiter: loop { drain every mailbox; if nothing was pending:
 *                  s = seq; sleeping = 1 (seq_cst); re-check every mailbox;
 *                  if still empty, park until seq != s (no timeout);
 *                  sleeping = 0 }
 *   waker:  publish; if (sleeping, seq_cst load) notify
 *   notify: (the module's KNITK_IOC_NOTIFY, or the futex backend) delivers
 *           only if the flag is set and some mailbox of the waiter holds
 *           pending work: then seq++ and wake; otherwise it is suppressed.
 *
 * Promela interleaves whole statements, which is sequential consistency:
 * the seq_cst flag store and loads of the protocol.
 *
 * Checked:
 *  - default (safety): the waiter stops after it has consumed all
 *    MBOXES * ITEMS messages.  A lost wake-up leaves it parked forever with
 *    work pending: an invalid end state.  Consumption is checked to be
 *    exact at the end.
 *  - FOREVER (liveness): the waiter never stops and may park forever (its
 *    park is a valid end state); the LTL property "pending work is always
 *    eventually consumed" must hold with an infinite park.
 *
 *  - SPINPHASE: before it sleeps, the park spins (S8) on the same test as
 *    the sleep and may give up at any point (the ringer descheduled, the
 *    budget spent, a reschedule): the flag stays up throughout.
 *  - COMBINED: ring-then-wait (S9) in a ping-pong of ROUNDS calls between
 *    a host and a worker, each with its doorbell: each side flags itself,
 *    re-checks, publishes to the other, then rings the other (the filter
 *    and one CAS, S3 and S4) and parks in the same step sequence as
 *    KNITK_IOC_NOTIFY_WAIT; the worker's answer is rung by its next park.
 *    Both sides must finish (a lost wake-up parks one forever).
 *
 * Broken variants:
 *  - BROKEN_NO_RECHECK: the waiter parks right after setting its flag,
 *    without re-checking its mailboxes.
 *  - BROKEN_SPIN_UNFLAGGED (with SPINPHASE): the waiter spins with its flag
 *    down (to spare its wakers the notify) and raises it only to sleep.
 *  - BROKEN_LATE_FLAG (with COMBINED): the worker's call rings, then sets
 *    the flag itself, with no re-check after it.
 *  - BROKEN_FLAG_FIRST: the waker reads the flag before it publishes.
 *  - BROKEN_PARTIAL_RECHECK: the re-check looks only at mailbox 0, not at
 *    every mailbox the waiter consumes.
 */

#ifndef MBOXES
#define MBOXES		2
#endif
#ifndef ITEMS
#define ITEMS		2	/* messages per mailbox */
#endif

#define TOTAL		(MBOXES * ITEMS)

byte pub[MBOXES];		/* written by waker w only */
byte ack[MBOXES];		/* written by the waiter only */
byte seq;			/* doorbell sequence */
bool sleeping;			/* doorbell flag, written by the waiter only */

byte consumed;			/* ghost: messages the waiter has taken */
byte delivered, suppressed;	/* ghost: notify outcomes */

/* Park until seq moves from s, spinning first with SPINPHASE (S8). */
inline park(s)
{
#ifdef SPINPHASE
	do
	:: seq != s -> break	/* the spin saw the wake */
	:: true -> break	/* gave up: sleep */
	od;
#endif
	(seq != s)
}

#ifndef COMBINED
#if MBOXES == 1
#define PENDING		(pub[0] != ack[0])
#else
#define PENDING		(pub[0] != ack[0] || pub[1] != ack[1])
#endif

#ifdef FOREVER
ltl drained { [] (PENDING -> <> !PENDING) }
#endif

active proctype waiter()
{
	byte s, w, p;
	bool found;

	do
#ifdef FOREVER
	:: true ->
#else
	:: consumed == TOTAL -> break
	:: else ->
#endif
		/* Drain: one load of pub per mailbox, one ack store each. */
		found = false;
		w = 0;
		do
		:: w == MBOXES -> break
		:: w < MBOXES ->
			p = pub[w];
			if
			:: p != ack[w] ->
				consumed = consumed + (p - ack[w]);
				ack[w] = p;
				found = true
			:: else -> skip
			fi;
			w++
		od;
		if
		:: found -> skip
		:: else ->
			s = seq;
#ifdef BROKEN_SPIN_UNFLAGGED
			/* Spins unflagged, watching; then flags and sleeps. */
			do
			:: seq != s -> break
			:: PENDING -> found = true; break
			:: true -> break
			od;
#endif
			sleeping = 1;
#if !defined(BROKEN_NO_RECHECK) && !defined(BROKEN_SPIN_UNFLAGGED)
			/* Re-check every mailbox after the flag is visible. */
			w = 0;
			do
#ifdef BROKEN_PARTIAL_RECHECK
			:: w == 1 -> break
#else
			:: w == MBOXES -> break
#endif
			:: else ->
				if
				:: pub[w] != ack[w] -> found = true; break
				:: else -> w++
				fi
			od;
#endif
			if
			:: found -> skip
			:: else ->
#ifdef FOREVER
end_park:
#endif
				park(s)		/* no timeout */
			fi;
			sleeping = 0
		fi
	od;
	assert(consumed == TOTAL && !PENDING)
}

proctype waker(byte w)
{
	byte i = 0, k;
	bool flag;

	do
	:: i == ITEMS -> break
	:: else ->
#ifdef BROKEN_FLAG_FIRST
		flag = sleeping;
		pub[w]++;
#else
		pub[w]++;		/* publish (release store of pub) */
		flag = sleeping;	/* seq_cst load */
#endif
		if
		:: flag ->
			/*
			 * notify, with the filter of S4: deliver only
			 * to a sleeper that has work in some mailbox.
			 */
			k = 0;
			if
			:: sleeping ->
				do
				:: k == MBOXES -> suppressed++; break
				:: k < MBOXES && pub[k] == ack[k] -> k++
				:: k < MBOXES && pub[k] != ack[k] ->
					seq++; delivered++; break
				od
			:: else -> suppressed++
			fi
		:: else -> skip		/* awake: no notify call at all */
		fi;
		i++
	od
}

init
{
	byte w = 0;

	atomic {
		do
		:: w < MBOXES -> run waker(w); w++
		:: else -> break
		od
	}
}
#else /* COMBINED */

#ifndef ROUNDS
#define ROUNDS		3
#endif
#define WORKER		0
#define HOST		1

/* Mailbox d is consumed by side d: 0 the request, 1 the return mailbox. */
byte cpub[2], cack[2];
byte cseq[2];			/* doorbell d's seq */
bool csleep[2];			/* doorbell d's flag, written by side d */
byte served;			/* ghost: requests the worker answered */

#define CPENDING(d)	(cpub[d] != cack[d])

/* The notify of S2-S4: the filter, then seq++ and flag down in one CAS. */
inline ring(d)
{
	atomic {
		if
		:: csleep[d] && CPENDING(d) -> cseq[d]++; csleep[d] = 0
		:: else -> skip
		fi
	}
}

inline cpark(d, s)
{
#ifdef SPINPHASE
	do
	:: cseq[d] != s -> break
	:: true -> break
	od;
#endif
	(cseq[d] != s)
}

active proctype worker()
{
	byte s;
	bool owed;

	do
	:: served == ROUNDS ->
		/* The last answer: rung on its own, nothing more to wait for. */
		if
		:: owed -> cpub[HOST]++; ring(HOST)
		:: else -> skip
		fi;
		break
	:: else ->
#ifdef BROKEN_LATE_FLAG
		s = cseq[WORKER];
		if
		:: CPENDING(WORKER) -> skip
		:: else ->
			if
			:: owed -> owed = 0; cpub[HOST]++; ring(HOST)
			:: else -> skip
			fi;
			csleep[WORKER] = 1;	/* set by the call, too late */
			cpark(WORKER, s)
		fi;
#else
		s = cseq[WORKER];
		csleep[WORKER] = 1;		/* S1: flag, then re-check */
		if
		:: CPENDING(WORKER) ->
			/* No wait: the answer is rung on its own. */
			if
			:: owed -> owed = 0; cpub[HOST]++; ring(HOST)
			:: else -> skip
			fi
		:: else ->
			/* S9: publish, ring, park: one call. */
			if
			:: owed -> owed = 0; cpub[HOST]++; ring(HOST)
			:: else -> skip
			fi;
			cpark(WORKER, s)
		fi;
#endif
		csleep[WORKER] = 0;
		if
		:: CPENDING(WORKER) ->
			cack[WORKER] = cpub[WORKER]; served++; owed = 1
		:: else -> skip
		fi
	od
}

active proctype host()
{
	byte s, i;

	do
	:: i == ROUNDS -> break
	:: else ->
		s = cseq[HOST];
		csleep[HOST] = 1;		/* S1, before the publish (S9) */
		cpub[WORKER]++;
		ring(WORKER);
		if
		:: CPENDING(HOST) -> skip
		:: else -> cpark(HOST, s)
		fi;
		csleep[HOST] = 0;
		/* Until the answer is there: flag, re-check, park. */
		do
		:: CPENDING(HOST) -> cack[HOST] = cpub[HOST]; break
		:: else ->
			s = cseq[HOST];
			csleep[HOST] = 1;
			if
			:: CPENDING(HOST) -> skip
			:: else -> cpark(HOST, s)
			fi;
			csleep[HOST] = 0
		od;
		i++
	od;
	assert(cack[HOST] == ROUNDS && served == ROUNDS)
}
#endif /* COMBINED */
