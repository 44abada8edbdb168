// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The claimant of a stealing request mailbox (docs/protocol.md T1-T9): the
 * consumer side of work stealing.
 *
 * Worker c owns one steal line per stealing mailbox: its ack word, its
 * want word and its arena free word, each with c as the only writer.  The
 * 64 lanes form R = 64 / g regions of g lanes.  A claim:
 *
 *   LIVE := the control page's live mask
 *   P := pending lanes (pub XOR every ack word) not reserved for a live
 *   peer (T13); RW := regions with work; SEN/PEER := OR of the want words
 *   of live seniors (lower id) / all live peers
 *   r := among the regions of RW holding a lane reserved for c, if any,
 *   the oldest published of those & ~PEER, else & ~SEN
 *   want[c] := 1 << r; StoreLoad fence                          (T4)
 *   a live senior wants r: withdraw                             (T5)
 *   a live junior wants r: wait until it does not, boundedly    (T5)
 *   T := P of r, loaded again                                   (T6)
 *   resv[c] &= ~T; copy the headers and inline bytes of T;
 *   ack[c] ^= T (release)                                  (T13, T6)
 *   want[c] := 0 (release), after the ack                       (T7)
 *
 * The lanes of T are then this worker's alone; their arena slots stay live
 * until knitk__steal_done frees them through the own free word (T8).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "internal.h"
#include "knot_hooks.h"
#include "../trace.h"

/* Pause rounds before a senior sleeps while a junior holds its region. */
#define STEAL_SPIN		64
/* The bounded sleep of a senior waiting for a junior, on its doorbell. */
#define STEAL_NAP_NS		50000ULL
/* Claim attempts of one scan before it reports nothing claimable. */
#define STEAL_TRIES		4

struct knitk_steal {
	struct knitk_endpoint *ep;
	struct knitk_sector *sector;
	const char *lanes;
	struct knitk_steal_line *line;	/* ours */
	unsigned int mailbox;
	unsigned int me;
	unsigned int nr_workers;
	unsigned int g;
	unsigned int nr_regions;
	uint32_t lane_stride;
	size_t copy_bytes;		/* header and inline bytes per lane */
	uint64_t ack;			/* private copy of our ack word */
	uint64_t held;			/* claimed, arena slot not freed yet */
	uint64_t queued;		/* claimed, not taken by steal_next */
	uint64_t claims;		/* private copy of our claims word */
	uint8_t order[KNITK_LANES];	/* claimed lanes in publish order */
	unsigned int nr_order;
	unsigned int pos;
	struct knitk_arena_freer freer;
	char *copy;			/* KNITK_LANES * copy_bytes */
};

KNITK_EXPORT int knitk_steal_region_lanes(unsigned int nr_workers,
					  unsigned int region_lanes)
{
	unsigned int g = region_lanes;

	/* T1: a spare region beyond one per worker, for a late claimant. */
	if (nr_workers < 1 || nr_workers >= KNITK_LANES)
		return -EINVAL;
	if (!g) {
		for (g = KNITK_LANES / 2; KNITK_LANES / g < nr_workers + 1; g /= 2)
			;
		return (int)g;
	}
	if (g > KNITK_LANES || (g & (g - 1)) || KNITK_LANES / g < nr_workers + 1)
		return -EINVAL;
	return (int)g;
}

int knitk__steal_region(const struct knitk_endpoint *k, unsigned int region_lanes)
{
	/* Claimants of one size see each other's want words (T1, T4). */
	if (region_lanes && region_lanes != k->geom.region_lanes)
		return -EINVAL;
	return (int)k->geom.region_lanes;
}

static uint64_t region_mask(const struct knitk_steal *st, unsigned int r)
{
	return (st->g == KNITK_LANES ? ~0ULL : (1ULL << st->g) - 1) << (r * st->g);
}

static const uint64_t *peer_word(const struct knitk_steal *st, unsigned int p,
				 size_t off)
{
	return (const uint64_t *)((const char *)knot_steal_line(st->ep,
					st->mailbox, p) + off);
}

/* T2: pub XOR every ack word, ours from the private copy. */
static uint64_t steal_pending(const struct knitk_steal *st)
{
	/* Acquire pairs with the release store in lane_publish_mask. */
	uint64_t p = atomic_load_explicit(A64(&st->sector->pub),
					  memory_order_acquire) ^ st->ack;
	unsigned int w;

	/* Acquire pairs with each claimant's release store of its ack (T6). */
	for (w = 0; w < st->nr_workers; w++)
		if (w != st->me)
			p ^= atomic_load_explicit(A64(peer_word(st, w,
					offsetof(struct knitk_steal_line, ack))),
					memory_order_acquire);
	return p;
}

/* T3: live peers: a dead claimant's want word stops counting. */
static uint64_t steal_live(const struct knitk_steal *st)
{
	uint64_t all = st->nr_workers == 64 ? ~0ULL : (1ULL << st->nr_workers) - 1;

	/* Acquire pairs with the release of live in a join (P2). */
	return atomic_load_explicit(A64(&knot_control(st->ep)->live),
				    memory_order_acquire) & all & ~(1ULL << st->me);
}

/*
 * T13: the lanes reserved for live peers in @live, and ours in *@mine.
 * Loaded after pub: the acquire of pub in steal_pending pairs with the
 * release store of pub after the producer's OR (knitk_producer_send_to),
 * so a lane seen pending is seen with its reservation.
 */
static uint64_t reserved_others(const struct knitk_steal *st, uint64_t live,
				uint64_t *mine)
{
	uint64_t r = 0;
	unsigned int p;

	for (p = 0; p < st->nr_workers; p++)
		if (live & (1ULL << p))
			r |= atomic_load_explicit(A64(peer_word(st, p,
					offsetof(struct knitk_steal_line, resv))),
					memory_order_relaxed);
	*mine = atomic_load_explicit(A64(&st->line->resv), memory_order_relaxed);
	return r;
}

static uint64_t peer_want(const struct knitk_steal *st, unsigned int p,
			  memory_order mo)
{
	/*
	 * Acquire (at least) pairs with the release clear of want after the
	 * ack (T7); seq_cst in the check after the announce (T4).
	 */
	return atomic_load_explicit(A64(peer_word(st, p,
				offsetof(struct knitk_steal_line, want))), mo);
}

/*
 * T4: the StoreLoad fence between the announce and the peers' want loads.
 * Partner: the same fence of every other claimant.  TSan does not model
 * fences; for it the seq_cst announce and loads carry the same order.
 */
static inline void steal_storeload_fence(void)
{
#ifndef __SANITIZE_THREAD__
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

static uint64_t regions_of(const struct knitk_steal *st, uint64_t lanes)
{
	uint64_t rw = 0;
	unsigned int r;

	for (r = 0; r < st->nr_regions; r++)
		if (lanes & region_mask(st, r))
			rw |= 1ULL << r;
	return rw;
}

static _Atomic uint64_t *lane_stamp(const struct knitk_steal *st,
				    unsigned int lane)
{
	return A64((char *)st->lanes + (uint64_t)lane * st->lane_stride +
		   offsetof(struct knitk_lane_header, stamp));
}

/*
 * T9: the region of @cand holding the oldest pending lane of @pending.  A
 * stamp read here is only a hint (another claimant may take the lane and
 * the producer reuse it), hence the atomic load.
 */
static unsigned int oldest_region(const struct knitk_steal *st,
				  uint64_t cand, uint64_t pending)
{
	uint64_t best = 0, m;
	unsigned int r, best_r = 0;
	bool any = false;

	for (r = 0; r < st->nr_regions; r++) {
		if (!(cand & (1ULL << r)))
			continue;
		for (m = pending & region_mask(st, r); m; m &= m - 1) {
			uint64_t s = atomic_load_explicit(lane_stamp(st,
					(unsigned int)__builtin_ctzll(m)),
					memory_order_relaxed);

			if (!any || (int64_t)(s - best) < 0) {
				best = s;
				best_r = r;
				any = true;
			}
		}
	}
	return best_r;
}

/* The bounded wait of a senior for a junior in its region (T5). */
static void steal_backoff(struct knitk_steal *st, unsigned int round)
{
	uint32_t seq;

	if (round < STEAL_SPIN) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		return;
	}
	/*
	 * Sleep on the own doorbell, with a deadline: the junior does not
	 * ring us when it is done, but a publish may.
	 */
	if (knitk_doorbell_prepare(st->ep, &seq))
		return;
	KNITK_TRACE(KT_NAP, st->me, 0, 0);
	st->ep->ops->wait(st->ep, seq, knitk__now_ns() + STEAL_NAP_NS);
	knitk_doorbell_cancel(st->ep);
	KNITK_TRACE(KT_NAP, st->me, 1, 0);
}

static void want_store(struct knitk_steal *st, uint64_t v)
{
	/*
	 * Release: a claimant that sees want cleared (acquire in peer_want)
	 * sees the ack stored before it (T7).
	 */
	atomic_store_explicit(A64(&st->line->want), v, memory_order_release);
}

/* Copy the lanes of @t out and sort them by stamp (publish order, T9). */
static void steal_take(struct knitk_steal *st, uint64_t t)
{
	uint64_t stamps[KNITK_LANES], m;
	unsigned int n = 0, i;

	for (m = t; m; m &= m - 1) {
		unsigned int lane = (unsigned int)__builtin_ctzll(m);
		const char *src = st->lanes + (uint64_t)lane * st->lane_stride;
		uint64_t s;

		memcpy(st->copy + lane * st->copy_bytes, src, st->copy_bytes);
		s = ((const struct knitk_lane_header *)(st->copy +
				lane * st->copy_bytes))->stamp;
		for (i = n; i > 0 && (int64_t)(stamps[i - 1] - s) > 0; i--) {
			stamps[i] = stamps[i - 1];
			st->order[i] = st->order[i - 1];
		}
		stamps[i] = s;
		st->order[i] = (uint8_t)lane;
		n++;
	}
	st->nr_order = n;
	st->pos = 0;
	st->queued = t;
	st->held |= t;
}

/*
 * One claim attempt: the lanes claimed, 0 if none; *@again: retry.  With
 * @to a peer (not -1), a hand-off: the lanes are reserved for @to instead
 * of taken (T13), and our own reservations are not handed on.
 */
static uint64_t steal_claim_once(struct knitk_steal *st, int to, bool *again)
{
	uint64_t pending, rw, live, want_all = 0, want_sen = 0, cand, rbit, t;
	uint64_t mine;
	unsigned int p, r, round;
	bool junior;

	*again = false;
	live = steal_live(st);
	pending = steal_pending(st);
	pending &= ~reserved_others(st, live, &mine);
	if (to >= 0)
		pending &= ~mine;
	if (!pending)
		return 0;
	rw = regions_of(st, pending);
	/* T13: a worker woken for its reserved lanes takes those first. */
	if (to < 0 && regions_of(st, pending & mine))
		rw = regions_of(st, pending & mine);
	for (p = 0; p < st->nr_workers; p++) {
		if (!(live & (1ULL << p)))
			continue;
		uint64_t w = peer_want(st, p, memory_order_acquire);

		want_all |= w;
		if (p < st->me)
			want_sen |= w;
	}
	cand = rw & ~want_all;
	if (!cand)
		cand = rw & ~want_sen;
	if (!cand)
		return 0;		/* every region with work is a senior's */
	r = oldest_region(st, cand, pending);
	rbit = 1ULL << r;

	/* T4: announce, then a full fence before the peers' want loads. */
	atomic_store_explicit(A64(&st->line->want), rbit, memory_order_seq_cst);
	steal_storeload_fence();
	KNOT_HOOK(st->ep, KNOT_HOOK_STEAL_WANT, st->me);
	junior = false;
	live = steal_live(st);
	for (p = 0; p < st->nr_workers; p++) {
		if (!(live & (1ULL << p)) ||
		    !(peer_want(st, p, memory_order_seq_cst) & rbit))
			continue;
		if (p < st->me) {
			/* T5: juniors withdraw. */
			want_store(st, 0);
			*again = true;
			return 0;
		}
		junior = true;
	}
	/*
	 * T5: a senior waits for a live junior to leave r, boundedly.  With
	 * the host gone nobody clears the live bit of a junior killed in
	 * its claim: withdraw, the worker is about to stop.
	 */
	for (round = 0; junior; round++) {
		if (knot_host_dead(st->ep)) {
			want_store(st, 0);
			return 0;
		}
		steal_backoff(st, round);
		junior = false;
		live = steal_live(st);
		for (p = st->me + 1; p < st->nr_workers && !junior; p++)
			junior = (live & (1ULL << p)) &&
				 (peer_want(st, p, memory_order_acquire) & rbit);
	}
	/* T6: the claimed lanes, computed after the handshake. */
	t = steal_pending(st) & region_mask(st, r);
	t &= ~reserved_others(st, steal_live(st), &mine);
	if (t && to >= 0) {
		t &= ~mine;
		/*
		 * T13: the region's lanes are @to's from now on.  Ordered
		 * before the release clear of want (T7), so a claimant that
		 * enters r after us sees the reservation.
		 */
		atomic_fetch_or_explicit(A64(&knot_steal_line(st->ep, st->mailbox,
				(unsigned int)to)->resv), t, memory_order_relaxed);
	} else if (t) {
		/* T13: ours now; before the ack, while the lanes are held. */
		if (mine & t)
			atomic_fetch_and_explicit(A64(&st->line->resv), ~t,
						  memory_order_relaxed);
		steal_take(st, t);
		st->ack ^= t;
		/*
		 * Release: the copies above are done before the producer
		 * may reuse the lanes; pairs with its acquire of the ack
		 * words (producer_load_ack) and the claimants' (T2).
		 */
		atomic_store_explicit(A64(&st->line->ack), st->ack,
				      memory_order_release);
		/* A counter for the pool's stats: no order needed. */
		atomic_store_explicit(A64(&st->line->claims), ++st->claims,
				      memory_order_relaxed);
		KNOT_HOOK(st->ep, KNOT_HOOK_STEAL_CLAIM, st->me);
	}
	/* T7: want cleared only after the ack. */
	want_store(st, 0);
	*again = !t;
	return t;
}

uint64_t knitk__steal_claim(struct knitk_steal *st)
{
	unsigned int i;
	bool again = true;
	uint64_t t = 0;

	/* Lanes not taken yet come first: one claim at a time. */
	if (st->queued)
		return st->queued;
	for (i = 0; i < STEAL_TRIES && again && !t; i++)
		t = steal_claim_once(st, -1, &again);
	return t;
}

uint64_t knitk__steal_hand_off(struct knitk_steal *st, unsigned int to)
{
	unsigned int i;
	bool again = true;
	uint64_t t = 0;

	for (i = 0; i < STEAL_TRIES && again && !t; i++)
		t = steal_claim_once(st, (int)to, &again);
	return t;
}

/*
 * T14: the producer's hand-off of lanes nobody claimed to worker @to.
 * The producer has no steal line and never waits: its reservation is its
 * announce, and it withdraws from any live claimant in the region.
 *
 *   P := pending lanes not reserved for a live worker (T13)
 *   r := the oldest region of P that no live worker wants; T := P of r
 *   resv[to] |= T; StoreLoad fence
 *   a live worker wants r: resv[to] &= ~T, nothing handed over
 *   T &= pending not reserved for another live worker, loaded again;
 *   resv[to] &= ~(what left T)
 *
 * Either a claimant's announce comes after our fence, and its T6 load of
 * resv sees T reserved, or our load of its want sees that announce (we
 * withdraw) or a later store, which is after its ack or its hand-off's
 * reservation (T7) and so shows us the lanes it took or handed on: what
 * we return is @to's alone.
 */
uint64_t knitk__steal_producer_hand_off(struct knitk_endpoint *k,
					unsigned int mailbox, unsigned int g,
					unsigned int to)
{
	/* A view with no line of its own: every worker is a peer. */
	struct knitk_steal st = {
		.ep = k, .mailbox = mailbox, .me = k->geom.nr_workers,
		.nr_workers = k->geom.nr_workers, .g = g,
		.nr_regions = KNITK_LANES / g,
		.sector = knot_sector(k, mailbox),
		.line = knot_steal_line(k, mailbox, to),
		.lane_stride = k->layout.lane_stride,
	};
	_Atomic uint64_t *resv = A64(&st.line->resv);
	uint64_t live, pending, mine, want_all = 0, rbit, t;
	unsigned int p, r;

	st.lanes = (const char *)st.sector + k->layout.lane_off;
	live = steal_live(&st);
	pending = steal_pending(&st);
	pending &= ~reserved_others(&st, live, &mine);
	pending &= ~mine;		/* already @to's */
	if (!pending)
		return 0;
	for (p = 0; p < st.nr_workers; p++)
		if (live & (1ULL << p))
			want_all |= peer_want(&st, p, memory_order_acquire);
	if (!(regions_of(&st, pending) & ~want_all))
		return 0;
	r = oldest_region(&st, regions_of(&st, pending) & ~want_all, pending);
	rbit = 1ULL << r;
	t = pending & region_mask(&st, r);

	KNOT_HOOK(k, KNOT_HOOK_HAND_OFF_CHOSEN, to);
	/* The announce, then the fence of T4 before the want loads. */
	atomic_fetch_or_explicit(resv, t, memory_order_seq_cst);
	steal_storeload_fence();
	KNOT_HOOK(k, KNOT_HOOK_HAND_OFF, to);
	live = steal_live(&st);
	for (p = 0; p < st.nr_workers; p++) {
		if ((live & (1ULL << p)) &&
		    (peer_want(&st, p, memory_order_seq_cst) & rbit)) {
			atomic_fetch_and_explicit(resv, ~t, memory_order_relaxed);
			KNITK_TRACE(KT_P_DROP, to, t, 1);
			return 0;
		}
	}
	/*
	 * Taken before our announce: the acquire of the acks shows it.
	 * Handed to another worker before it: a claimant's hand-off leaves
	 * the lanes pending and reserves them instead (T13), so the
	 * reservations are loaded again too, after the want loads whose
	 * acquire pairs with its release clear of want (T7).  Kept, such a
	 * lane would be reserved for two workers, and neither takes it.
	 */
	live = steal_live(&st) & ~(1ULL << to);
	pending = steal_pending(&st) & ~reserved_others(&st, live, &mine);
	if (t & ~pending) {
		atomic_fetch_and_explicit(resv, ~(t & ~pending), memory_order_relaxed);
		KNITK_TRACE(KT_P_DROP, to, t & ~pending, 2);
	}
	return t & pending;
}

int knitk__steal_next(struct knitk_steal *st, uint64_t *pending)
{
	while (st->pos < st->nr_order) {
		unsigned int lane = st->order[st->pos++];

		if (*pending & (1ULL << lane)) {
			*pending &= ~(1ULL << lane);
			st->queued &= ~(1ULL << lane);
			return (int)lane;
		}
	}
	return -ENOENT;
}

void knitk__steal_unnext(struct knitk_steal *st, uint64_t *pending,
			 unsigned int lane)
{
	st->pos--;
	st->queued |= 1ULL << lane;
	*pending |= 1ULL << lane;
}

bool knitk__steal_holds(const struct knitk_steal *st, unsigned int lane)
{
	return st->held & (1ULL << lane);
}

const char *knitk__steal_lane(const struct knitk_steal *st, unsigned int lane)
{
	return st->copy + lane * st->copy_bytes;
}

int knitk__steal_done(struct knitk_steal *st, uint64_t lanes, uint64_t keep)
{
	uint64_t frees = 0, m;

	if (lanes & ~st->held)
		return -EPERM;
	for (m = lanes & ~keep; m; m &= m - 1) {
		const struct knitk_lane_header *h = (const void *)
			knitk__steal_lane(st, (unsigned int)__builtin_ctzll(m));

		if (h->kind == KNITK_PAYLOAD_ARENA &&
		    h->arena_slot < KNITK_ARENA_SLOTS)
			frees ^= 1ULL << h->arena_slot;
	}
	st->held &= ~lanes;
	st->queued &= ~lanes;
	if (frees) {
		st->freer.toggles ^= frees;
		/* T8: release pairs with the acquire in arena_freed. */
		atomic_store_explicit(A64(st->freer.word), st->freer.toggles,
				      memory_order_release);
	}
	return 0;
}

int knitk__steal_create(struct knitk_endpoint *k, unsigned int mailbox,
			unsigned int g, struct knitk_steal **out)
{
	struct knitk_steal *st;
	int ret;

	ret = knitk__steal_region(k, g);
	if (ret < 0 || k->doorbell < 0 ||
	    (unsigned int)k->doorbell >= k->geom.nr_workers)
		return -EINVAL;
	g = (unsigned int)ret;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->ep = k;
	st->mailbox = mailbox;
	st->me = (unsigned int)k->doorbell;
	st->nr_workers = k->geom.nr_workers;
	st->g = g;
	st->nr_regions = KNITK_LANES / g;
	st->sector = knot_sector(k, mailbox);
	st->lanes = (const char *)st->sector + k->layout.lane_off;
	st->line = knot_steal_line(k, mailbox, st->me);
	st->lane_stride = k->layout.lane_stride;
	st->copy_bytes = KNITK_LANE_HEADER_BYTES + k->geom.inline_bytes;
	st->copy = malloc(KNITK_LANES * st->copy_bytes);
	if (!st->copy) {
		free(st);
		return -ENOMEM;
	}
	/* We are the only writer of our steal line: continue from it. */
	st->ack = atomic_load_explicit(A64(&st->line->ack), memory_order_relaxed);
	st->claims = atomic_load_explicit(A64(&st->line->claims), memory_order_relaxed);
	ret = knitk__arena_freer_init(&st->freer, (uint64_t *)&st->line->arena_free);
	if (ret) {
		knitk__steal_destroy(st);
		return ret;
	}
	/* A dead predecessor's intent (T3, respawn). */
	want_store(st, 0);
	/*
	 * And its reservations (T13): nobody reserves for us before we are
	 * idle, which is after this.
	 */
	atomic_store_explicit(A64(&st->line->resv), 0, memory_order_relaxed);
	*out = st;
	return 0;
}

void knitk__steal_destroy(struct knitk_steal *st)
{
	if (!st)
		return;
	free(st->copy);
	free(st);
}
