/* SPDX-License-Identifier: GPL-2.0 */
/*
 * steal.pml - region claims on a shared submit mailbox
 * (docs/protocol.md T2-T3).
 *
 * One producer (the host) publishes MSGS messages into the LANES lanes of
 * the submit mailbox.  CLAIMANTS workers take them by regions of G lanes.
 * Each worker c has a steal line with its own ack word (ack[c]) and its own
 * WANT word (want[c]); every word has one writer.  The mailbox's effective
 * ack word is the XOR of every worker's ack.  A lower id is more senior.
 *
 * Claim by worker c (one attempt):
 *   P    = pub ^ ack[0] ^ ... (each word loaded separately)
 *   RW   = regions with pending lanes in P
 *   PEER = OR of the other workers' WANT, SEN = the same over seniors
 *   E    = RW & ~SEN (nothing left -> give up); C = RW & ~PEER, or E
 *   r    = any region of C (every choice explored: covers any cursor or
 *          oldest-first policy)
 *   want[c] = 1 << r; full fence (sequential consistency here)
 *   re-check every other WANT for r: a senior -> withdraw (want[c] = 0);
 *   a junior -> wait until that junior's WANT drops r
 *   T = (pub ^ every ack) & lanes of r; T == 0 -> withdraw
 *   decode every lane of T; ack[c] ^= T (one store); then want[c] = 0
 *
 * The producer caches the XOR of the ack words and reloads them only when
 * its view shows every lane busy, as on a private mailbox.  A worker with
 * nothing pending sleeps until some lane is pending (the doorbell protocol
 * itself is sleepwake.pml's business).
 *
 * Checked (safety):
 *  - at most one worker holds a region between its handshake and its WANT
 *    clear (mutual exclusion per region);
 *  - no message is decoded twice; the producer writes a lane only while it
 *    is free; after the producer drains the mailbox every message has been
 *    decoded exactly once, and a lost one blocks everyone (invalid end
 *    state).
 *
 * Broken variants:
 *  - BROKEN_NO_RECHECK: a worker does not re-check the others' WANT after
 *    raising its own (no Dekker handshake): two workers claim one region.
 *  - BROKEN_CLEAR_FIRST: a worker clears WANT before it stores its ack, so
 *    a waiting senior computes T from the stale ack and decodes again.
 */

#ifndef CLAIMANTS
#define CLAIMANTS	2
#endif
#ifndef LANES
#define LANES		3
#endif
#ifndef G
#define G		1	/* lanes per region */
#endif
#ifndef MSGS
#define MSGS		3
#endif

#define REGIONS		(LANES / G)
#define LMASK		((1 << LANES) - 1)
#define RMASK(r)	(((1 << G) - 1) << ((r) * G))
#define BIT(w, i)	(((w) >> (i)) & 1)

byte pub;			/* the producer's pub word */
byte ack[CLAIMANTS];		/* steal line of worker c: ack word */
byte want[CLAIMANTS];		/* steal line of worker c: WANT, a region mask */
byte lane_msg[LANES];		/* lane headers (a message id stands for them) */

/* Ghost state for the checks. */
byte decoded[MSGS];
byte ndecoded;
byte holders[REGIONS];

#if CLAIMANTS == 2
#define ACKS		(ack[0] ^ ack[1])
#elif CLAIMANTS == 3
#define ACKS		(ack[0] ^ ack[1] ^ ack[2])
#else
#error "CLAIMANTS must be 2 or 3"
#endif

/* Choose any set bit of mask (non-zero, below bit n); one private step. */
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

/* x = pub ^ my_ack ^ (every other worker's ack), one load per word. */
inline load_pending(x)
{
	x = pub ^ my_ack;
	p = 0;
	do
	:: p == CLAIMANTS -> break
	:: p < CLAIMANTS && p == c -> p++
	:: p < CLAIMANTS && p != c -> x = x ^ ack[p]; p++
	od
}

active proctype producer()
{
	byte my_pub = 0, shadow = 0, sent = 0, lane, x, p, i;

	do
	:: sent == MSGS -> break
	:: else ->
		/* Refresh the cached XOR of the acks only when it looks full. */
		do
		:: ((my_pub ^ shadow) & LMASK) != LMASK -> break
		:: else ->
			/* Wait for a free lane, then reload every ack word. */
			(((my_pub ^ ACKS) & LMASK) != LMASK);
			x = 0;
			p = 0;
			do
			:: p == CLAIMANTS -> break
			:: else -> x = x ^ ack[p]; p++
			od;
			shadow = x
		od;
		pick(lane, (~(my_pub ^ shadow)) & LMASK, LANES, i);
		assert(BIT(pub ^ ACKS, lane) == 0);	/* lane ownership */
		lane_msg[lane] = sent;
		my_pub = my_pub ^ (1 << lane);
		pub = my_pub;
		sent++
	od;

	(pub == ACKS);			/* drain */
	i = 0;
	do
	:: i < MSGS -> assert(decoded[i] == 1); i++
	:: else -> break
	od
}

proctype claimant(byte c)
{
	/*
	 * Every temporary is zeroed before the next attempt, so that
	 * attempts which end the same way lead to the same state.
	 */
	byte my_ack = 0, P, C, T, r, p, k, m;
	bool senior, junior;

end_idle:
	do
	:: ndecoded == MSGS -> break
	:: atomic { ndecoded != MSGS && (pub ^ ACKS) != 0 } ->
		/* (slept until some lane was pending) */
		load_pending(P);
		/*
		 * Choose a region: one look at the other WANT words.  These
		 * loads only steer the choice; the handshake below is what
		 * makes the claim safe.
		 */
		atomic {
			C = 0;
			T = 0;		/* SEN */
			m = 0;		/* PEER */
			k = 0;
			do
			:: k == REGIONS -> break
			:: else ->
				if
				:: (P & RMASK(k)) != 0 -> C = C | (1 << k)
				:: else -> skip
				fi;
				k++
			od;
			p = 0;
			do
			:: p == CLAIMANTS -> break
			:: p < CLAIMANTS && p == c -> p++
			:: p < CLAIMANTS && p != c ->
				m = m | want[p];
				if
				:: p < c -> T = T | want[p]
				:: else -> skip
				fi;
				p++
			od;
			T = C & ~T;		/* E: not wanted by a senior */
			if
			:: (C & ~m) != 0 -> C = C & ~m	/* nobody wants */
			:: else -> C = T
			fi;
			P = 0; T = 0; m = 0; k = 0; p = 0
		}
		if
		:: C == 0 -> goto retry		/* nothing, or seniors want it */
		:: else -> skip
		fi;
		pick(r, C, REGIONS, k);
		atomic { C = 0; k = 0 }

		want[c] = 1 << r;		/* announce, then StoreLoad */

#ifndef BROKEN_NO_RECHECK
		/* Re-check every other WANT for r, one load each. */
		p = 0;
		do
		:: p == CLAIMANTS -> break
		:: p < CLAIMANTS && p == c -> p++
		:: p < CLAIMANTS && p != c ->
			if
			:: BIT(want[p], r) && p < c -> senior = true
			:: BIT(want[p], r) && p > c -> junior = true
			:: else -> skip
			fi;
			p++
		od;
		if
		:: senior ->
			/* A junior always yields to a senior. */
			atomic { senior = false; junior = false; p = 0 };
			want[c] = 0;
			goto retry
		:: else -> skip
		fi;
		if
		:: junior ->
			/* A senior waits for every junior to leave r. */
			p = c + 1;
			do
			:: p >= CLAIMANTS -> break
			:: p < CLAIMANTS -> (BIT(want[p], r) == 0); p++
			od
		:: else -> skip
		fi;
		atomic { senior = false; junior = false; p = 0 };
#endif

		atomic {
			holders[r]++;
			assert(holders[r] == 1);	/* one holder per region */
		}

		load_pending(T);
		atomic { T = T & RMASK(r); p = 0 }
		if
		:: T == 0 ->
			atomic { holders[r]--; want[c] = 0 }
			goto retry
		:: else -> skip
		fi;

		/*
		 * Decode every lane of T.  The lanes are the claimant's until
		 * its ack store, so reading them in one step loses nothing.
		 */
		atomic {
			k = 0;
			do
			:: k == LANES -> break
			:: k < LANES && BIT(T, k) == 0 -> k++
			:: k < LANES && BIT(T, k) == 1 ->
				m = lane_msg[k];
				assert(decoded[m] == 0);	/* not twice */
				decoded[m]++;
				ndecoded++;
				k++
			od;
			k = 0;
			m = 0;
			my_ack = my_ack ^ T;
			T = 0
		}
#ifdef BROKEN_CLEAR_FIRST
		atomic { holders[r]--; want[c] = 0 }
		ack[c] = my_ack;
#else
		ack[c] = my_ack;			/* ACK before ... */
		atomic { holders[r]--; want[c] = 0 }	/* ... WANT clear */
#endif
retry:
		r = 0
	od
}

init
{
	byte i = 0;

	atomic {
		do
		:: i < CLAIMANTS -> run claimant(i); i++
		:: else -> break
		od
	}
}
