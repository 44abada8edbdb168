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
 * Broken variants:
 *  - BROKEN_NO_RECHECK: the waiter parks right after setting its flag,
 *    without re-checking its mailboxes.
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
			sleeping = 1;
#ifndef BROKEN_NO_RECHECK
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
				(seq != s)	/* park, no timeout */
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
