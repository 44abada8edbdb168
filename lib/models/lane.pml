/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lane.pml - the mailbox lane protocol and the arena free word.
 *
 * One mailbox, one producer, one consumer (docs/protocol.md L1-L4, A1-A2).
 *
 *  - The producer owns the pub word.  It keeps a private copy (my_pub) and a
 *    cached copy of the ack word (shadow_ack) that it refreshes only when its
 *    view shows every lane busy.  It writes a lane's header and payload, then
 *    publishes the lane by storing the whole new pub word.
 *  - The consumer owns the ack word.  It never caches pub: every poll loads
 *    it and computes pending = pub ^ ack.  It decodes (copies out) every
 *    pending lane, frees each lane's arena slot, then acknowledges the whole
 *    batch with one store of the ack word.
 *  - The arena free word: the producer allocates arena slots (toggling its
 *    private allocation word), a slot being live while its bit differs from
 *    the free word.  Two parties free slots: the consumer after decoding,
 *    and the producer itself when an encode fails and is rolled back.  Both
 *    free with an atomic XOR.
 *
 * Every message carries an arena payload, so every publication exercises the
 * allocator.  The ghost variables (live, decoded) exist only for the checks.
 *
 * Checked (safety, assertions and end states):
 *  - a lane is written by the producer only while it is free (ownership);
 *  - an arena slot is handed out only when it is not live, and the payload a
 *    consumer copies out is the one its producer wrote;
 *  - no message is decoded twice, and once the producer has drained the
 *    mailbox every published message has been decoded exactly once; a lost
 *    message leaves the producer blocked forever (invalid end state).
 *
 * Broken variants (compile-time switches):
 *  - BROKEN_BLIND_FREE: each freer keeps a private copy of the free word,
 *    toggles its own frees into it and publishes it with a blind store (the
 *    bug fixed in knitting 0.1.61).  One freer's store undoes the other's
 *    frees, a live slot looks free and is handed out again.
 *  - BROKEN_EARLY_ACK: the consumer stores the ack word before it has read
 *    the lanes, so the producer reuses a lane that is still being read.
 */

#ifndef LANES
#define LANES		3	/* lanes of the mailbox: bits 0..LANES-1 */
#endif
#ifndef SLOTS
#define SLOTS		2	/* arena slots: bits 0..SLOTS-1 */
#endif
#ifndef MSGS
#define MSGS		4	/* messages the producer publishes */
#endif
#ifndef ROLLBACKS
#define ROLLBACKS	1	/* failed encodes (rollback frees) allowed */
#endif

#define LMASK		((1 << LANES) - 1)
#define SMASK		((1 << SLOTS) - 1)
#define BIT(w, i)	(((w) >> (i)) & 1)

/* The shared words of the mailbox's sector. */
byte pub;			/* written by the producer only */
byte ack;			/* written by the consumer only */
byte arena_free;		/* toggled by every freer */

/* Lane headers and the arena's payload bytes (a message id stands for them). */
byte lane_msg[LANES];
byte lane_slot[LANES];
byte slot_data[SLOTS];

/* Ghost state for the checks. */
bool live[SLOTS];
byte decoded[MSGS];

/*
 * Free arena slot s.  copy is the freer's private copy of the free word,
 * used only by the broken variant.  The ghost live bit drops in the same
 * step as the store that makes the free visible.
 */
inline arena_release(s, copy)
{
#ifdef BROKEN_BLIND_FREE
	atomic {
		live[s] = 0;
		copy = copy ^ (1 << s);
		arena_free = copy
	}
#else
	atomic {
		live[s] = 0;
		arena_free = arena_free ^ (1 << s)
	}
#endif
}

/*
 * Choose any set bit of mask (non-zero, below bit n) into out; every choice
 * is explored.  A private computation, so one step.
 */
inline pick(out, mask, n, k)
{
	atomic {
		k = 0;
		do
		:: k == n -> break
		:: k < n && BIT(mask, k) == 0 -> k++
		:: k < n && BIT(mask, k) == 1 -> out = k; k++
		:: k < n && BIT(mask, k) == 1 -> out = k; break
		od
	}
}

active proctype producer()
{
	byte my_pub = 0, shadow_ack = 0, my_alloc = 0, my_free = 0;
	byte sent = 0, rollbacks = 0, lane, slot, f, i;

	do
	:: sent == MSGS -> break
	:: else ->
		/*
		 * Lanes: trust the cached ack word; reload it only when the
		 * cached view says every lane is busy.  If the fresh view is
		 * full too, wait (backpressure): one load of ack, taken when
		 * a lane is free.
		 */
		if
		:: ((my_pub ^ shadow_ack) & LMASK) == LMASK ->
			atomic {
				(((my_pub ^ ack) & LMASK) != LMASK) ->
				shadow_ack = ack
			}
		:: else -> skip
		fi;
		/* Any lane that the cached view shows free. */
		pick(lane, (~(my_pub ^ shadow_ack)) & LMASK, LANES, i);

		/*
		 * Arena: one load of the free word; the slots whose bits
		 * agree with my_alloc are free.  None free: wait.
		 */
		atomic {
			(((~(my_alloc ^ arena_free)) & SMASK) != 0) ->
			f = (~(my_alloc ^ arena_free)) & SMASK
		}
		pick(slot, f, SLOTS, i);
		assert(!live[slot]);		/* never hand out a live slot */
		live[slot] = 1;
		my_alloc = my_alloc ^ (1 << slot);
		slot_data[slot] = sent;		/* write the payload bytes */

		if
		:: rollbacks < ROLLBACKS ->
			/* The encode fails: give the slot back, publish nothing. */
			rollbacks++;
			arena_release(slot, my_free)
		:: true ->
			/* The lane must be free in the real words (ownership). */
			assert(BIT(pub ^ ack, lane) == 0);
			lane_msg[lane] = sent;
			lane_slot[lane] = slot;
			my_pub = my_pub ^ (1 << lane);
			pub = my_pub;		/* the publication point */
			sent++
		fi
	od;

	/* Drain: wait until every lane is acknowledged, then count. */
	(ack == pub);
	i = 0;
	do
	:: i < MSGS -> assert(decoded[i] == 1); i++
	:: else -> break
	od
}

active proctype consumer()
{
	byte my_ack = 0, my_free = 0, pending, consumed, lane, m, s;

end_idle:
	do
	:: atomic {
		/* Never cached: one fresh load of pub per poll. */
		((pub ^ my_ack) != 0) -> pending = pub ^ my_ack
	   }
#ifdef BROKEN_EARLY_ACK
		my_ack = my_ack ^ pending;
		ack = my_ack;
#endif
		consumed = 0;
		lane = 0;
		do
		:: lane == LANES -> break
		:: lane < LANES && BIT(pending, lane) == 0 -> lane++
		:: lane < LANES && BIT(pending, lane) == 1 ->
			/* Decode: copy the header and the payload out. */
			atomic {
				m = lane_msg[lane];
				s = lane_slot[lane];
				assert(live[s] && slot_data[s] == m);
				assert(decoded[m] == 0);	/* not twice */
				decoded[m]++
			}
			arena_release(s, my_free);
			consumed = consumed | (1 << lane);
			lane++
		od;
#ifndef BROKEN_EARLY_ACK
		/* One ack store for the whole batch. */
		my_ack = my_ack ^ consumed;
		ack = my_ack
#endif
	od
}
