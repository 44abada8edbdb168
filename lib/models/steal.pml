/* SPDX-License-Identifier: GPL-2.0 */
/*
 * steal.pml - region claims on a shared submit mailbox
 * (docs/protocol.md T2-T7, T13, T14), with stalled and dead claimants,
 * reserved lanes and the producer's hand-off.
 *
 * One producer (the host) publishes MSGS messages into the LANES lanes of
 * the submit mailbox.  CLAIMANTS workers take them by regions of G lanes.
 * Each worker c has a steal line with its own ack word (ack[c]) and its own
 * WANT word (want[c], a region mask); every word has one writer.  The
 * mailbox's effective ack word is the XOR of every worker's ack.  A lower
 * id is more senior.  live is the LIVE mask: the kernel's peer death (or
 * the pool's pidfd monitor) clears a dead worker's bit, and from then on
 * its WANT stops counting.
 *
 * Claim by worker c (one attempt):
 *   P    = pub ^ ack[0] ^ ... (each word loaded separately)
 *   RW   = regions with pending lanes in P
 *   PEER = OR of the live peers' WANT, SEN = the same over live seniors
 *   E    = RW & ~SEN (nothing left -> give up); C = RW & ~PEER, or E  (T3)
 *   r    = any region of C (every choice explored: covers the code's
 *          oldest-first choice, T9)
 *   want[c] = 1 << r; StoreLoad fence                                (T4)
 *   re-check every live peer's WANT for r: a senior -> withdraw; a junior
 *     -> wait until no junior is both live and in r                  (T5)
 *   T = (pub ^ every ack) & lanes of r, loaded again; T == 0 -> withdraw
 *   copy the lanes of T; ack[c] ^= T (one store: the lanes are retired,
 *     and c's alone)                                                 (T6)
 *   want[c] = 0, after the ack                                       (T7)
 *
 * Reservations (T13): resv[c] holds the lanes reserved for worker c.  The
 * producer may reserve the lane it publishes for any worker (an atomic OR
 * before the pub store), and a claimant holding a region may hand its T
 * to a live peer instead of retiring it (an OR before its WANT clear).  P
 * and T leave out the lanes reserved for live peers (resv loaded after
 * the ack words); a claimant clears its own reserved lanes of T before
 * its ack store.
 *
 * The producer's hand-off (T14, HANDOFFS > 0): between two publishes or
 * after the last one, the producer (the pool's waiting thread, under the
 * submitter's lock) may hand a region to worker `to` (HANDOFF_TO) while
 * it is live:
 *   H = lanes pending, not reserved for a live worker, in a region r no
 *       live worker wants (one look: steers only)
 *   resv[to] |= H (its announce; StoreLoad)
 *   a live worker wants r -> resv[to] &= ~H, nothing handed over
 *   H &= pending and not reserved for another live worker, loaded
 *       again; resv[to] &= ~(what left H)
 * and then rings `to` for H.  hoff (ghost) is H while the hand-off is under
 * way: a reservation it may still withdraw.
 *
 * The senior's wait (64 pauses, then 50 us sleeps, the live mask reloaded
 * each round) is modelled as a wait for its condition: a poll that finds
 * nothing changed leads back to the same state.  So a senior that would
 * spin for ever on a junior that never leaves is a blocked process, and
 * with everyone else done, an invalid end state.
 *
 * Death of worker DEAD (if DEAD < CLAIMANTS): at any step, or never (a
 * killer process may fire once).  Its live bit is cleared at once.  Lanes
 * it retired with its ack store are its calls (the pool completes them
 * -EOWNERDEAD, T10-T11); lanes it copied but did not ack stay pending and
 * go to a survivor.  A stalled claimant is any claimant between two of its
 * steps: every interleaving is explored, so a claimant may stall while it
 * holds WANT or a claim.
 *
 * The producer caches the XOR of the ack words and reloads them only when
 * its view shows every lane busy, as on a private mailbox.  A worker with
 * nothing pending sleeps until some lane is pending (the doorbell protocol
 * itself is sleepwake.pml's business).
 *
 * Checked (safety):
 *  - at most one live worker holds a region between its handshake and its
 *    WANT clear (mutual exclusion per region);
 *  - a lane reserved for a live worker is retired by that worker only
 *    (so a worker woken for it finds it), once a producer's hand-off has
 *    settled;
 *  - every lane a hand-off gives a live `to` is still pending then, or
 *    `to` took it: the ring for it is never spurious; and it is reserved
 *    for no other live worker (else neither would take it);
 *  - with FILTER, in every state: each pending lane reserved for a live
 *    worker d is work for d in d's doorbell re-check and in the notify
 *    filter of a ring of d (topology.c: pending lanes reserved for d, or
 *    for no other live worker), also while a producer's hand-off holds
 *    the same lanes for its worker between its announce and its drop;
 *    else d sleeps past them, or its ring is filtered out, and nobody
 *    rings it again (an observer process; it is never blocked, so these
 *    entries do not look for deadlocks);
 *  - every message is retired exactly once (by one ack store, dead or
 *    alive); the producer writes a lane only while it is free; after the
 *    drain every message was retired, and a lost one or a senior waiting
 *    for ever blocks everyone (invalid end state: no deadlock).
 *
 * Broken variants:
 *  - BROKEN_NO_RECHECK: no re-check of the others' WANT after raising one's
 *    own (no Dekker handshake): two workers claim one region.
 *  - BROKEN_NO_FENCE: no StoreLoad fence after the WANT store: the store
 *    sits in the store buffer while the re-check loads run (as x86-TSO
 *    allows), so two workers each miss the other's WANT.
 *  - BROKEN_CLEAR_FIRST: WANT cleared before the ack is stored, so a
 *    waiting senior computes T from the stale ack and retires it again.
 *  - BROKEN_IGNORE_LIVE: the handshake counts a dead worker's WANT: a
 *    senior waits for ever on a dead junior.
 *  - BROKEN_RESV_LATE: the producer reserves a lane after publishing it:
 *    a claimant that loaded resv first takes a lane reserved for another.
 *  - BROKEN_HANDOFF_NO_RECHECK: the hand-off does not look at the WANT
 *    words after its reservation: a claimant that chose its lanes before
 *    retires one handed to `to`.
 *  - BROKEN_HANDOFF_NO_RELOAD: the hand-off keeps H without loading the
 *    ack words again: it rings `to` for a lane a claimant already took.
 *  - BROKEN_HANDOFF_NO_RESV_RELOAD: the hand-off loads the ack words
 *    again but not the other workers' reservations: a claimant that
 *    handed the region to another worker after the producer's choice
 *    leaves it pending, and the lane ends up reserved for two live
 *    workers, neither of which takes it (the lost call).
 *  - BROKEN_FILTER_OTHERS (with FILTER): the re-check and the filter
 *    leave out every lane reserved for another live worker, also one
 *    reserved for d: during a producer's hand-off that chose a region a
 *    claimant then handed to d, d's lanes are not d's work.
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
#ifndef DEAD
#define DEAD		CLAIMANTS	/* the worker that may die; none */
#endif
#ifndef HANDOFFS
#define HANDOFFS	0	/* the producer's hand-offs (T14) */
#endif
#ifndef HANDOFF_TO
#define HANDOFF_TO	(CLAIMANTS - 1)	/* the worker they go to */
#endif

#define REGIONS		(LANES / G)
#define LMASK		((1 << LANES) - 1)
#define RMASK(r)	(((1 << G) - 1) << ((r) * G))
#define BIT(w, i)	(((w) >> (i)) & 1)

#ifdef BROKEN_IGNORE_LIVE
#define COUNTS(p)	1
#else
#define COUNTS(p)	BIT(live, p)	/* a dead worker's WANT stops counting */
#endif

byte pub;			/* the producer's pub word */
byte ack[CLAIMANTS];		/* steal line of worker c: ack word */
byte want[CLAIMANTS];		/* steal line of worker c: WANT, a region mask */
byte resv[CLAIMANTS];		/* steal line of worker c: reserved lanes */
byte lane_msg[LANES];		/* lane headers (a message id stands for them) */
byte live = (1 << CLAIMANTS) - 1;	/* the LIVE mask */
bool kill;			/* the killer fired */

/* Ghost state for the checks. */
byte hoff;			/* a hand-off's reservation, not settled yet */
byte hoff_took;			/* lanes of hoff its worker retired meanwhile */
byte taken[MSGS];		/* retired by an ack store */
byte ntaken;
byte holders[REGIONS];
byte held[CLAIMANTS];		/* region held + 1, 0 for none */

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

/* x = x & ~(lanes reserved for live peers), one load per word (T13). */
inline drop_reserved(x)
{
	p = 0;
	do
	:: p == CLAIMANTS -> break
	:: p < CLAIMANTS && (p == c || !BIT(live, p)) -> p++
	:: p < CLAIMANTS && p != c && BIT(live, p) -> x = x & ~resv[p]; p++
	od
}

/* Re-check every other WANT for r (the StoreLoad side of the handshake). */
inline recheck()
{
	p = 0;
	do
	:: p == CLAIMANTS -> break
	:: p < CLAIMANTS && p == c -> p++
	:: p < CLAIMANTS && p != c ->
		if
		:: BIT(want[p], r) && COUNTS(p) && p < c -> senior = true
		:: BIT(want[p], r) && COUNTS(p) && p > c -> junior = true
		:: else -> skip
		fi;
		p++
	od
}

active proctype producer()
{
	byte my_pub = 0, shadow = 0, sent = 0, lane, x, p, i;
#if HANDOFFS > 0
	byte ho = 0, t, r, m;
#endif

	do
	:: sent == MSGS -> break
#if HANDOFFS > 0
	:: ho < HANDOFFS ->
		/* T14: the choice, one look (it only steers). */
		atomic {
			ho++;
			x = (pub ^ ACKS) & LMASK;
			m = 0;
			p = 0;
			do
			:: p == CLAIMANTS -> break
			:: p < CLAIMANTS && BIT(live, p) ->
				x = x & ~resv[p]; m = m | want[p]; p++
			:: p < CLAIMANTS && !BIT(live, p) -> p++
			od;
			t = 0;
			r = 0;
			do
			:: r == REGIONS -> break
			:: r < REGIONS -> r++
			:: r < REGIONS && (x & RMASK(r)) != 0 && !BIT(m, r) ->
				t = x & RMASK(r); break
			od;
			if
			:: !BIT(live, HANDOFF_TO) -> t = 0	/* picks take live ones */
			:: else -> skip
			fi;
			x = 0; m = 0; p = 0;
			if
			:: t == 0 -> r = 0
			:: else -> skip
			fi
		}
		if
		:: t != 0 ->
			/* The announce: reserved, then StoreLoad. */
			atomic { resv[HANDOFF_TO] = resv[HANDOFF_TO] | t; hoff = t };
#ifndef BROKEN_HANDOFF_NO_RECHECK
			/* Every live worker's WANT, one load each. */
			do
			:: p == CLAIMANTS -> p = 0; break
			:: p < CLAIMANTS && BIT(live, p) && BIT(want[p], r) ->
				atomic {
					resv[HANDOFF_TO] = resv[HANDOFF_TO] & ~t;
					hoff = 0; hoff_took = 0; t = 0; p = 0
				};
				break
			:: p < CLAIMANTS && !(BIT(live, p) && BIT(want[p], r)) -> p++
			od;
#endif
			if
			:: t == 0 -> skip		/* withdrawn */
			:: else ->
#ifdef BROKEN_HANDOFF_NO_RELOAD
				x = t;
#else
				/* Pending again, one load per word. */
				x = pub;
				do
				:: p == CLAIMANTS -> p = 0; break
				:: p < CLAIMANTS -> x = x ^ ack[p]; p++
				od;
#ifndef BROKEN_HANDOFF_NO_RESV_RELOAD
				/*
				 * And the other live workers' reservations: a
				 * claimant's hand-off leaves its lanes pending.
				 */
				do
				:: p == CLAIMANTS -> p = 0; break
				:: p < CLAIMANTS && p != HANDOFF_TO && BIT(live, p) ->
					x = x & ~resv[p]; p++
				:: p < CLAIMANTS && !(p != HANDOFF_TO && BIT(live, p)) -> p++
				od;
#endif
#endif
				atomic {
					resv[HANDOFF_TO] = resv[HANDOFF_TO] & ~(t & ~x);
					t = t & x;
					/*
					 * Each lane handed over is there for
					 * its worker, unless it died (T13).
					 */
					i = 0;
					do
					:: i == LANES -> break
					:: i < LANES && BIT(t, i) == 0 -> i++
					:: i < LANES && BIT(t, i) == 1 ->
						assert(!BIT(live, HANDOFF_TO) ||
						       BIT(pub ^ ACKS, i) == 1 ||
						       BIT(hoff_took, i) == 1);
						/* ... and reserved for it alone. */
						m = 0;
						do
						:: m == CLAIMANTS -> break
						:: m < CLAIMANTS ->
							assert(m == HANDOFF_TO ||
							       !BIT(live, m) ||
							       !BIT(live, HANDOFF_TO) ||
							       BIT(resv[m], i) == 0);
							m++
						od;
						m = 0;
						i++
					od;
					i = 0; hoff = 0; hoff_took = 0; t = 0; x = 0
				}
			fi;
			r = 0
		:: else -> skip
		fi
#endif
	:: sent < MSGS ->
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
		/* Reserved for nobody or for any worker (T13). */
		if
		:: x = CLAIMANTS
		:: p = 0;
		   do
		   :: p < CLAIMANTS - 1 -> p++
		   :: break
		   od;
		   x = p
		fi;
#ifdef BROKEN_RESV_LATE
		pub = my_pub;
		if
		:: x < CLAIMANTS -> resv[x] = resv[x] | (1 << lane)
		:: else -> skip
		fi;
#else
		if
		:: x < CLAIMANTS -> resv[x] = resv[x] | (1 << lane)
		:: else -> skip
		fi;
		pub = my_pub;
#endif
		atomic { x = 0; p = 0 };
		sent++
	od;

	(pub == ACKS);			/* drain */
	i = 0;
	do
	:: i < MSGS -> assert(taken[i] == 1); i++
	:: else -> break
	od
}

#if DEAD < CLAIMANTS
/* Fires at most once, at any time, or never. */
active proctype killer()
{
end:
	kill = true
}

#endif

proctype claimant(byte c)
{
	/*
	 * Every temporary is zeroed before the next attempt, so that
	 * attempts which end the same way lead to the same state.
	 */
	byte my_ack = 0, P, C, T, r, p, k, m;
	bool senior, junior;

	{
end_idle:
	do
	:: ntaken == MSGS -> break
	:: atomic { ntaken != MSGS && (pub ^ ACKS) != 0 } ->
		/* (slept until some lane was pending) */
		load_pending(P);
		drop_reserved(P);
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
			:: p < CLAIMANTS && (p == c || !COUNTS(p)) -> p++
			:: p < CLAIMANTS && p != c && COUNTS(p) ->
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

#if defined(BROKEN_NO_RECHECK)
		want[c] = 1 << r;
#elif defined(BROKEN_NO_FENCE)
		/* The WANT store drains from the store buffer after the loads. */
		recheck();
		want[c] = 1 << r;
#else
		want[c] = 1 << r;		/* announce, then StoreLoad */
		recheck();
#endif
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
			/* A senior waits until no junior is live and in r. */
			p = c + 1;
			do
			:: p >= CLAIMANTS -> break
			:: p < CLAIMANTS ->
				(BIT(want[p], r) == 0 || !COUNTS(p));
				p++
			od
		:: else -> skip
		fi;
		atomic { senior = false; junior = false; p = 0 };

		atomic {
			holders[r]++;
			held[c] = r + 1;
			assert(holders[r] == 1);	/* one holder per region */
		}

		/* The lanes of r, loaded again after the handshake (T6). */
		load_pending(T);
		drop_reserved(T);
		atomic { T = T & RMASK(r); p = 0 }
		if
		:: T == 0 ->
			atomic { holders[r]--; held[c] = 0 };
			want[c] = 0;
			goto retry
		:: else -> skip
		fi;

		/*
		 * Copy the lanes of T (private memory), then retire them with
		 * one ack store.  They are the claimant's until that store, so
		 * the copy reads what the retire step records.
		 */
		/* Or hand them to a live peer with none of ours (T13). */
		if
		:: atomic { (T & resv[c]) == 0 } ->
			p = 0;
			do
			:: p < CLAIMANTS && p != c && BIT(live, p) ->
				resv[p] = resv[p] | T;
				atomic { holders[r]--; held[c] = 0; T = 0; p = 0 };
				want[c] = 0;
				goto retry
			:: p < CLAIMANTS - 1 -> p++
			:: true -> break
			od;
			p = 0
		:: true -> skip
		fi;
		/* Ours from now on: cleared before the ack (T13). */
		resv[c] = resv[c] & ~T;
#ifdef BROKEN_CLEAR_FIRST
		atomic { holders[r]--; held[c] = 0; want[c] = 0 }
#endif
		atomic {
			my_ack = my_ack ^ T;
			ack[c] = my_ack;			/* ACK before ... */
			k = 0;
			do
			:: k == LANES -> break
			:: k < LANES && BIT(T, k) == 0 -> k++
			:: k < LANES && BIT(T, k) == 1 ->
				m = lane_msg[k];
				assert(taken[m] == 0);		/* not twice */
				/* Not a lane reserved for another live worker. */
				p = 0;
				do
				:: p == CLAIMANTS -> break
				:: p < CLAIMANTS ->
					assert(p == c || !BIT(live, p) ||
					       !BIT(resv[p] & ~hoff, k));
					p++
				od;
				p = 0;
				taken[m] = 1;
				if
				:: c == HANDOFF_TO && BIT(hoff, k) ->
					hoff_took = hoff_took | (1 << k)
				:: else -> skip
				fi;
				ntaken++;
				k++
			od;
			k = 0;
			m = 0;
			T = 0
		}
#ifndef BROKEN_CLEAR_FIRST
		atomic { holders[r]--; held[c] = 0; want[c] = 0 }	/* ... WANT */
#endif
retry:
		r = 0
	od
	} unless {
		atomic {
			c == DEAD && kill;
			/* Peer death: the LIVE bit cleared at once. */
			live = live & ~(1 << c);
			if
			:: held[c] != 0 -> holders[held[c] - 1]--; held[c] = 0
			:: else -> skip
			fi;
		}
	}
}

#ifdef FILTER
/*
 * The doorbell re-check and the notify filter of each live worker d, at
 * any moment (one atomic look; the code loads word by word, and every
 * word it needs is d's own reservation or keeps its lanes out).
 */
active proctype filter()
{
	byte d, x, o, p;

end:
	do
	:: d_step {
		d = 0;
		do
		:: d == CLAIMANTS -> break
		:: d < CLAIMANTS && !BIT(live, d) -> d++
		:: d < CLAIMANTS && BIT(live, d) ->
			x = (pub ^ ACKS) & LMASK;
			o = 0;
			p = 0;
			do
			:: p == CLAIMANTS -> break
			:: p < CLAIMANTS && p != d && BIT(live, p) ->
				o = o | resv[p]; p++
			:: else -> p++
			od;
#ifndef BROKEN_FILTER_OTHERS
			o = o & ~resv[d];
#endif
			assert((x & resv[d] & ~(x & ~o)) == 0);
			d++
		od;
		d = 0; x = 0; o = 0; p = 0
	   }
	od
}
#endif

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
