// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The lane protocol of a mailbox (docs/protocol.md L1-L7).
 *
 * Lane L is free when bit L of the pub word and of the effective ack word
 * agree, pending when they differ.  The producer is the only writer of the
 * pub word and the consumer of the ack word (on a stealing mailbox the
 * effective ack word is the XOR of the steal lines' ack words, each with
 * its own single writer).  Each writer keeps a private copy and publishes
 * it with a release store; the other side loads with acquire.
 *
 * The producer caches the effective ack word and refreshes it only when its
 * cached view shows every lane busy: a stale ack can only hide free lanes.
 * The consumer never caches the pub word.
 *
 * Both sides walk lanes in ring order from a cursor, so with one producer
 * and one consumer lanes are consumed in publish order.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "internal.h"
#include "packed.h"
#include "../sized.h"

KNITK__SIZED_VER0(knitk_msg, KNITK_MSG_SIZE_VER0);

/* Where a mailbox's words, lanes and arena are, for either side. */
struct lane_geom {
	struct knitk_endpoint *ep;
	struct knitk_sector *sector;
	char *lanes;
	char *arena_mem;
	uint64_t arena_size;
	uint32_t lane_stride;
	uint32_t inline_bytes;
	unsigned int mailbox;
};

struct knitk_producer {
	struct lane_geom g;
	unsigned int cursor;
	uint64_t pub;			/* private copy of the pub word */
	uint64_t ack_cache;		/* cached effective ack word */
	uint64_t claimed;		/* claimed, not yet published */
	uint64_t stamp;			/* publishes so far (lane stamps) */
	uint64_t nr_claims;		/* claims so far */
	uint64_t claim_no[KNITK_LANES];	/* a claimed lane's claim number */
	unsigned int nr_ack_words;
	const uint64_t *ack_words[KNITK_MAX_WORKERS];
	struct knitk_arena *arena;
	/* knitk_producer_track_claims: who retired which lane (T10). */
	bool track;
	uint64_t unreported;		/* retired, not reported: still busy */
	uint64_t seen_ack[KNITK_MAX_WORKERS];	/* ack words at the last load */
	uint64_t claims[KNITK_MAX_WORKERS];	/* retired by w, not reported */
	int8_t slot_owner[KNITK_ARENA_SLOTS];	/* claimant of a slot, or -1 */
	uint8_t slot_lane[KNITK_ARENA_SLOTS];	/* the lane a slot was last given to */
	/*
	 * A claimed lane's arena slot, or -1: the producer's own record, since
	 * the header's arena_slot is in the shared lanes, where a consumer can
	 * write it.
	 */
	int8_t lane_slot[KNITK_LANES];
	/*
	 * Slots a consumer kept (knitk_lane_ack_keep) that the producer's
	 * user holds now (knitk_producer_keep): any thread sets and clears
	 * them; a stand-in for a dead consumer never frees them.
	 */
	uint64_t kept;
	/* Their free word (knitk_producer_free_kept, any thread, XOR). */
	uint64_t kept_free;
};

struct knitk_consumer {
	struct lane_geom g;
	unsigned int cursor;
	uint64_t ack;			/* private copy of the ack word */
	uint64_t seen;			/* pending lanes found by scans */
	bool by_stamp;			/* the last scan's lanes are out of ring order */
	struct knitk_arena_freer freer;
	struct knitk_steal *steal;	/* a claimant of a stealing mailbox */
	struct knitk_consumer_poll poll;	/* knitk_consumer_wait's budget */
};

static inline uint64_t bit(unsigned int lane)
{
	return 1ULL << lane;
}

/* Next set bit of @mask at or after @cursor, wrapping; @mask non-zero. */
static inline unsigned int ring_next(uint64_t mask, unsigned int cursor)
{
	uint64_t ahead = mask & (~0ULL << cursor);

	return (unsigned int)__builtin_ctzll(ahead ? ahead : mask);
}

static void lane_geom_init(struct lane_geom *g, struct knitk_endpoint *ep,
			   unsigned int mailbox)
{
	g->ep = ep;
	g->mailbox = mailbox;
	g->sector = knot_sector(ep, mailbox);
	g->lanes = (char *)g->sector + ep->layout.lane_off;
	g->arena_mem = (char *)g->sector + ep->layout.arena_off;
	g->arena_size = ep->layout.arena_size;
	g->lane_stride = ep->layout.lane_stride;
	g->inline_bytes = ep->geom.inline_bytes;
}

/* ------------------------------------------------------------ producer */

static struct knitk_lane_header *lane_hdr(const struct knitk_producer *p,
					  unsigned int lane)
{
	return (struct knitk_lane_header *)(p->g.lanes +
					    (uint64_t)lane * p->g.lane_stride);
}

KNITK_EXPORT int knitk_producer_create(struct knitk_endpoint *ep,
				       unsigned int mailbox,
				       struct knitk_producer **producer)
{
	struct knitk_producer *p;
	unsigned int w;
	int ret;

	if (!ep || !producer || mailbox >= ep->layout.nr_mailboxes)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	lane_geom_init(&p->g, ep, mailbox);
	ret = knitk__arena_create(p->g.arena_size, &p->arena);
	if (ret)
		goto fail;
	if (knot_mailbox_steals(ep, mailbox)) {
		for (w = 0; w < ep->geom.nr_workers; w++) {
			struct knitk_steal_line *sl = knot_steal_line(ep, mailbox, w);

			p->ack_words[p->nr_ack_words++] = (const uint64_t *)&sl->ack;
			ret = knitk__arena_add_free_word(p->arena,
						(const uint64_t *)&sl->arena_free);
			if (ret)
				goto fail;
		}
	} else {
		p->ack_words[p->nr_ack_words++] = (const uint64_t *)&p->g.sector->ack;
		ret = knitk__arena_add_free_word(p->arena,
					(const uint64_t *)&p->g.sector->arena_free);
		if (ret)
			goto fail;
	}
	ret = knitk__arena_add_free_word(p->arena, &p->kept_free);
	if (ret)
		goto fail;
	/* We are the only writer of pub: continue from what it holds. */
	p->pub = atomic_load_explicit(A64(&p->g.sector->pub), memory_order_relaxed);
	/* And of the stamps: continue after the newest. */
	for (w = 0; w < KNITK_LANES; w++) {
		uint64_t s = atomic_load_explicit(A64(&lane_hdr(p, w)->stamp),
						  memory_order_relaxed);

		if ((int64_t)(s - p->stamp) > 0)
			p->stamp = s;
	}
	memset(p->slot_owner, -1, sizeof(p->slot_owner));
	memset(p->slot_lane, 0xff, sizeof(p->slot_lane));
	memset(p->lane_slot, -1, sizeof(p->lane_slot));
	p->ack_cache = knitk__endpoint_mailbox_ack(ep, mailbox);
	*producer = p;
	return 0;
fail:
	knitk__arena_destroy(p->arena);
	free(p);
	return ret;
}

KNITK_EXPORT void knitk_producer_destroy(struct knitk_producer *producer)
{
	if (!producer)
		return;
	knitk__arena_destroy(producer->arena);
	free(producer);
}

static uint64_t producer_load_ack(struct knitk_producer *p)
{
	uint64_t ack = 0, a;
	unsigned int i;

	/*
	 * Acquire pairs with the consumer's release store of its ack word:
	 * its reads of the lane happen before we reuse the lane.
	 */
	for (i = 0; i < p->nr_ack_words; i++) {
		a = atomic_load_explicit(A64(p->ack_words[i]),
					 memory_order_acquire);
		if (p->track) {
			/* T10: a lane retired by claimant i stays busy. */
			p->claims[i] |= a ^ p->seen_ack[i];
			p->unreported |= a ^ p->seen_ack[i];
			p->seen_ack[i] = a;
		}
		ack ^= a;
	}
	return ack;
}


/* The lanes free in the cached view: not pending, claimed or unreported. */
static inline uint64_t producer_free(const struct knitk_producer *p)
{
	return ~((p->pub ^ p->ack_cache) | p->claimed | p->unreported);
}

/* Take a free lane, its header left as it was; -EAGAIN when none is. */
static int producer_claim(struct knitk_producer *p)
{
	uint64_t free = producer_free(p);
	unsigned int lane;

	if (!free) {
		/* L3: refresh the cached ack only on apparent exhaustion. */
		p->ack_cache = producer_load_ack(p);
		free = producer_free(p);
		if (!free)
			return -EAGAIN;
	}
	lane = ring_next(free, p->cursor);
	p->cursor = (lane + 1) % KNITK_LANES;
	p->claimed |= bit(lane);
	p->claim_no[lane] = ++p->nr_claims;
	p->lane_slot[lane] = -1;
	return (int)lane;
}

KNITK_EXPORT int knitk_lane_claim(struct knitk_producer *producer)
{
	struct knitk_lane_header *h;
	int lane;

	if (!producer)
		return -EINVAL;
	lane = producer_claim(producer);
	if (lane < 0)
		return lane;
	h = lane_hdr(producer, (unsigned int)lane);
	/* Not the stamp: claimants may read it as an age hint (T9). */
	memset(h, 0, offsetof(struct knitk_lane_header, stamp));
	h->arena_slot = KNITK_ARENA_NO_SLOT;
	return lane;
}

static int producer_check_claimed(const struct knitk_producer *p,
				  unsigned int lane)
{
	if (!p || lane >= KNITK_LANES)
		return -EINVAL;
	if (!(p->claimed & bit(lane)))
		return -EPERM;
	return 0;
}

KNITK_EXPORT int knitk_lane_header(struct knitk_producer *producer,
				   unsigned int lane,
				   struct knitk_lane_header **header)
{
	int ret = producer_check_claimed(producer, lane);

	if (ret)
		return ret;
	if (!header)
		return -EINVAL;
	*header = lane_hdr(producer, lane);
	return 0;
}

KNITK_EXPORT int knitk_lane_arena(struct knitk_producer *producer,
				  unsigned int lane, void **buf, size_t *len,
				  uint64_t *placement)
{
	struct knitk_producer *p = producer;
	int ret = producer_check_claimed(p, lane);
	uint64_t off, room;
	int slot;

	if (ret)
		return ret;
	/* The producer's own record: the shared header is a consumer's to scribble on. */
	slot = p->lane_slot[lane];
	if (slot < 0)
		return -ENOENT;
	knitk__arena_slot_range(p->arena, (unsigned int)slot, &off, &room);
	if (buf)
		*buf = p->g.arena_mem + off;
	if (len)
		*len = lane_hdr(p, lane)->length <= room ?
		       (size_t)lane_hdr(p, lane)->length : (size_t)room;
	if (placement)
		*placement = knitk__arena_placement(p->arena, (unsigned int)slot);
	return slot;
}

KNITK_EXPORT int knitk_producer_keep(struct knitk_producer *producer,
				     unsigned int slot, uint64_t placement)
{
	if (!producer || slot >= KNITK_ARENA_SLOTS)
		return -EINVAL;
	/*
	 * Placed anew, or freed by the consumer after all: not that
	 * placement's bytes to hold, nor ours to free again.
	 */
	if (knitk__arena_placement(producer->arena, slot) != placement ||
	    knitk__arena_freed_since_placed(producer->arena, slot))
		return -ESTALE;
	/*
	 * Release pairs with the acquire in the stand-ins' loads of kept
	 * (knitk_producer_reset_consumer, knitk_producer_reset_claimant).
	 */
	atomic_fetch_or_explicit(A64(&producer->kept), 1ULL << slot,
				 memory_order_release);
	return 0;
}

KNITK_EXPORT int knitk_producer_free_kept(struct knitk_producer *producer,
					  unsigned int slot)
{
	uint64_t b = 1ULL << (slot & 63);

	if (!producer || slot >= KNITK_ARENA_SLOTS ||
	    !(atomic_load_explicit(A64(&producer->kept), memory_order_relaxed) & b))
		return -EINVAL;
	/*
	 * Freed before it leaves the kept set: a stand-in that sees it
	 * unkept sees it free too, and never frees it a second time.
	 */
	knitk__arena_free_xor(&producer->kept_free, slot);
	atomic_fetch_and_explicit(A64(&producer->kept), ~b, memory_order_release);
	return 0;
}

/* Undo an arena reservation of claimed @lane (a private free). */
static void lane_drop_payload(struct knitk_producer *p, unsigned int lane,
			      struct knitk_lane_header *h)
{
	int slot = p->lane_slot[lane];

	if (slot >= 0)
		knitk__arena_free(p->arena, (unsigned int)slot);
	p->lane_slot[lane] = -1;
	h->kind = KNITK_PAYLOAD_NONE;
	h->arena_slot = KNITK_ARENA_NO_SLOT;
	h->value = 0;
	h->length = 0;
}

/* Record in @h, of @lane, the payload of @len bytes at @off of arena @slot. */
static inline void lane_set_arena(struct knitk_producer *p, unsigned int lane,
				  struct knitk_lane_header *h, int slot,
				  uint64_t off, size_t len)
{
	/* A new life of the slot: no claimant holds it yet (T10). */
	p->slot_owner[slot] = -1;
	p->slot_lane[slot] = (uint8_t)lane;
	p->lane_slot[lane] = (int8_t)slot;
	h->kind = KNITK_PAYLOAD_ARENA;
	h->arena_slot = (uint32_t)slot;
	h->value = off;
	h->length = len;
}

KNITK_EXPORT int knitk_lane_reserve(struct knitk_producer *producer,
				    unsigned int lane, size_t len, void **buf)
{
	struct knitk_producer *p = producer;
	struct knitk_lane_header *h;
	uint64_t off;
	int ret = producer_check_claimed(p, lane);

	if (ret)
		return ret;
	if (!buf)
		return -EINVAL;
	h = lane_hdr(p, lane);
	if (len <= p->g.inline_bytes) {
		lane_drop_payload(p, lane, h);
		h->kind = len ? KNITK_PAYLOAD_INLINE : KNITK_PAYLOAD_NONE;
		h->length = len;
		*buf = (char *)h + KNITK_LANE_HEADER_BYTES;
		return 0;
	}
	/* A failure leaves the lane's payload as it was (knitk.h). */
	ret = p->lane_slot[lane];
	if (ret >= 0)
		ret = knitk__arena_realloc(p->arena, (unsigned int)ret, len, &off);
	else
		ret = knitk__arena_alloc(p->arena, len, &off);
	if (ret < 0)
		return ret;
	lane_set_arena(p, lane, h, ret, off, len);
	*buf = p->g.arena_mem + off;
	return 0;
}

KNITK_EXPORT int knitk_lane_set_value(struct knitk_producer *producer,
				      unsigned int lane, uint64_t value)
{
	struct knitk_lane_header *h;
	int ret = producer_check_claimed(producer, lane);

	if (ret)
		return ret;
	h = lane_hdr(producer, lane);
	lane_drop_payload(producer, lane, h);
	h->kind = KNITK_PAYLOAD_VALUE;
	h->value = value;
	return 0;
}

/* Give back claimed @lane, its payload already dropped or never reserved. */
static void producer_unclaim(struct knitk_producer *p, unsigned int lane)
{
	p->claimed &= ~bit(lane);
	/* Giving back the last claim: keep lanes in publish (ring) order. */
	if (p->cursor == (lane + 1) % KNITK_LANES)
		p->cursor = lane;
}

KNITK_EXPORT int knitk_lane_release(struct knitk_producer *producer,
				    unsigned int lane)
{
	int ret = producer_check_claimed(producer, lane);

	if (ret)
		return ret;
	lane_drop_payload(producer, lane, lane_hdr(producer, lane));
	producer_unclaim(producer, lane);
	return 0;
}

/*
 * T9: the publish order, read by claimants (atomic: a hint there) and by
 * a consumer that finds lanes out of ring order.
 */
static inline void lane_stamp(struct knitk_producer *p, unsigned int lane)
{
	atomic_store_explicit(A64(&lane_hdr(p, lane)->stamp), ++p->stamp,
			      memory_order_relaxed);
}

/* Publish @lanes, stamped already, with one store of the pub word. */
static void lane_publish_stamped(struct knitk_producer *p, uint64_t lanes)
{
	p->claimed &= ~lanes;
	p->pub ^= lanes;
	/*
	 * Release: the header and payload bytes are visible before the
	 * lanes turn pending.  Pairs with the acquire in knitk_lane_scan
	 * and mailbox_pending.
	 */
	atomic_store_explicit(A64(&p->g.sector->pub), p->pub, memory_order_release);
}

static inline bool claimed_before(const struct knitk_producer *p,
				  unsigned int a, unsigned int b)
{
	return (int64_t)(p->claim_no[a] - p->claim_no[b]) < 0;
}

/* Stamp @lanes in lane order. */
static void lane_stamp_mask(struct knitk_producer *p, uint64_t lanes)
{
	for (; lanes; lanes &= lanes - 1)
		lane_stamp(p, (unsigned int)__builtin_ctzll(lanes));
}

/*
 * Publish claimed @lanes, stamped in the order they were claimed.  Claims
 * run round the ring, so lanes claimed in a row are in lane order from
 * one of them on (one pass finds it); a lane staged long ago may sit
 * anywhere in the ring, which takes the slow way.
 */
static void lane_publish_mask(struct knitk_producer *p, uint64_t lanes)
{
	unsigned int lane, first, prev = 0, start = 0, descents = 0;
	uint64_t m, r, low;

	/* One lane, a call's: no order to find. */
	if (lanes && !(lanes & (lanes - 1))) {
		lane_stamp(p, (unsigned int)__builtin_ctzll(lanes));
		lane_publish_stamped(p, lanes);
		return;
	}
	for (m = lanes; m; m &= m - 1) {
		lane = (unsigned int)__builtin_ctzll(m);
		if (m != lanes && claimed_before(p, lane, prev)) {
			descents++;
			start = lane;
		}
		prev = lane;
	}
	first = (unsigned int)__builtin_ctzll(lanes);
	if (!descents) {
		lane_stamp_mask(p, lanes);
	} else if (descents == 1 && claimed_before(p, prev, first)) {
		/* In claim order from @start round the ring. */
		low = lanes & (bit(start) - 1);
		lane_stamp_mask(p, lanes & ~low);
		lane_stamp_mask(p, low);
	} else {
		for (m = lanes; m; m &= ~bit(first)) {
			first = (unsigned int)__builtin_ctzll(m);
			for (r = m & (m - 1); r; r &= r - 1) {
				lane = (unsigned int)__builtin_ctzll(r);
				if (claimed_before(p, lane, first))
					first = lane;
			}
			lane_stamp(p, first);
		}
	}
	lane_publish_stamped(p, lanes);
}

KNITK_EXPORT int knitk_lane_publish(struct knitk_producer *producer,
				    unsigned int lane)
{
	int ret = producer_check_claimed(producer, lane);

	if (ret)
		return ret;
	lane_publish_mask(producer, bit(lane));
	return 0;
}

KNITK_EXPORT int knitk_lane_publish_batch(struct knitk_producer *producer,
					  uint64_t lanes)
{
	if (!producer || !lanes)
		return -EINVAL;
	if (lanes & ~producer->claimed)
		return -EPERM;
	lane_publish_mask(producer, lanes);
	return 0;
}

/*
 * memcpy of a small inline payload without the call: two overlapping
 * copies of a power-of-two size cover every length up to 16.
 */
static inline void copy_small(char *dst, const char *src, size_t len)
{
	uint64_t a, b;
	uint32_t c, d;

	if (len >= 8) {
		memcpy(&a, src, 8);
		memcpy(&b, src + len - 8, 8);
		memcpy(dst, &a, 8);
		memcpy(dst + len - 8, &b, 8);
	} else if (len >= 4) {
		memcpy(&c, src, 4);
		memcpy(&d, src + len - 4, 4);
		memcpy(dst, &c, 4);
		memcpy(dst + len - 4, &d, 4);
	} else {
		while (len--)
			*dst++ = *src++;
	}
}

/*
 * Fill claimed @lane as knitk_producer_stage describes: the caller's fields
 * of @header, then the library's (never the stamp, which claimants read
 * as a hint, T9), then the payload.  On -ENOSPC (or -EMSGSIZE) from the
 * arena nothing was reserved.
 */
static inline int lane_fill(struct knitk_producer *p, unsigned int lane,
			    const struct knitk_lane_header *header,
			    const void *data, size_t len)
{
	struct knitk_lane_header *h = lane_hdr(p, lane);
	char *buf = (char *)h + KNITK_LANE_HEADER_BYTES;
	uint64_t off;
	int slot;

	memcpy(h, header, offsetof(struct knitk_lane_header, stamp));
	h->arena_slot = KNITK_ARENA_NO_SLOT;
	h->length = len;
	if (!data) {
		h->kind = KNITK_PAYLOAD_VALUE;	/* @len is 0 */
		return 0;
	}
	if (len <= p->g.inline_bytes) {
		h->kind = len ? KNITK_PAYLOAD_INLINE : KNITK_PAYLOAD_NONE;
		h->value = 0;
		if (len <= 16)
			copy_small(buf, data, len);
		else
			memcpy(buf, data, len);
		return 0;
	}
	slot = knitk__arena_alloc(p->arena, len, &off);
	if (slot < 0)
		return slot;
	lane_set_arena(p, lane, h, slot, off, len);
	memcpy(p->g.arena_mem + off, data, len);
	return 0;
}

/* The checks knitk_producer_stage and knitk_producer_send_batch share. */
static int producer_check_send(const struct knitk_producer *p,
			       const void *data, size_t len)
{
	if (!p || (len && !data))
		return -EINVAL;
	if (len > p->g.inline_bytes && len > p->g.arena_size)
		return -EMSGSIZE;
	return 0;
}

KNITK_EXPORT int knitk_producer_stage(struct knitk_producer *producer,
				      const struct knitk_lane_header *header,
				      const void *data, size_t len)
{
	int lane, ret;

	if (!header)
		return -EINVAL;
	ret = producer_check_send(producer, data, len);
	if (ret)
		return ret;
	lane = producer_claim(producer);
	if (lane < 0)
		return lane;
	ret = lane_fill(producer, (unsigned int)lane, header, data, len);
	if (ret) {
		producer_unclaim(producer, (unsigned int)lane);
		return ret;
	}
	return lane;
}

KNITK_EXPORT int knitk_producer_send(struct knitk_producer *producer,
				     const struct knitk_lane_header *header,
				     const void *data, size_t len)
{
	int lane = knitk_producer_stage(producer, header, data, len);

	if (lane >= 0)
		lane_publish_mask(producer, bit((unsigned int)lane));
	return lane;
}

KNITK_EXPORT int knitk_producer_send_batch(struct knitk_producer *producer,
					   const struct knitk_lane_header *headers,
					   const void *data, size_t len,
					   unsigned int n)
{
	static const struct knitk_lane_header none;
	struct knitk_producer *p = producer;
	const char *src = data;
	uint64_t free, lanes = 0;
	unsigned int i, lane, cursor;
	int ret = producer_check_send(p, data, len);

	if (ret)
		return ret;
	if (!n || n > KNITK_LANES)
		return -EINVAL;
	/*
	 * producer_claim per message, on a private copy of what it updates:
	 * no other call comes between, so the lanes need no claimed bits.
	 */
	free = producer_free(p);
	cursor = p->cursor;
	for (i = 0; i < n; i++) {
		if (!free) {
			p->ack_cache = producer_load_ack(p);
			free = producer_free(p) & ~lanes;
			if (!free) {
				ret = -EAGAIN;
				break;
			}
		}
		lane = ring_next(free, cursor);
		ret = lane_fill(p, lane, headers ? &headers[i] : &none,
				src ? src + (size_t)i * len : NULL, len);
		if (ret) {
			/* As knitk_lane_release of the last claim leaves it. */
			cursor = lane;
			break;
		}
		/* Stamped in message order, wherever the lane is. */
		lane_stamp(p, lane);
		free &= ~bit(lane);
		lanes |= bit(lane);
		cursor = (lane + 1) % KNITK_LANES;
	}
	p->cursor = cursor;
	if (!lanes)
		return ret;
	lane_publish_stamped(p, lanes);
	return (int)i;
}

/* Whether message @m can be a record of a lane of @p: 0 or -errno. */
static inline int packed_check(const struct knitk_producer *p,
			       const struct iovec *m)
{
	if (!m->iov_len || !m->iov_base)
		return -EINVAL;
	if (m->iov_len > p->g.inline_bytes ||
	    KNITK_PACK_ROOM(m->iov_len) > p->g.inline_bytes)
		return -EMSGSIZE;
	return 0;
}

/*
 * Fill free @lane with the records of @msgs from *@i on that fit its
 * inline bytes, and its header as a packed lane (L7); *@i moves past
 * them.  Each message is checked before it is copied: 0, or the error of
 * the first that cannot be sent (the lane is then not the consumer's to
 * see: the caller publishes nothing).
 */
static int lane_fill_packed(struct knitk_producer *p, unsigned int lane,
			    const struct knitk_lane_header *header,
			    const struct iovec *msgs, unsigned int n,
			    unsigned int *i)
{
	struct knitk_lane_header *h = lane_hdr(p, lane);
	char *buf = (char *)h + KNITK_LANE_HEADER_BYTES;
	size_t room = p->g.inline_bytes, used = 0, len;
	unsigned int k = *i;
	int ret;

	do {
		ret = packed_check(p, &msgs[k]);
		if (ret)
			return ret;
		len = msgs[k].iov_len;
		if (KNITK_PACK_ROOM(len) > room - used)
			break;
		knitk__pack_put(buf + used, msgs[k].iov_base, len);
		used += KNITK_PACK_ROOM(len);
	} while (++k < n);
	memcpy(h, header, offsetof(struct knitk_lane_header, stamp));
	h->kind = KNITK_PAYLOAD_PACKED;
	h->arena_slot = KNITK_ARENA_NO_SLOT;
	h->value = k - *i;
	h->length = used;
	p->lane_slot[lane] = -1;
	*i = k;
	return 0;
}

KNITK_EXPORT int knitk_producer_send_packed(struct knitk_producer *producer,
					    const struct knitk_lane_header *header,
					    const struct iovec *msgs,
					    unsigned int n)
{
	static const struct knitk_lane_header none;
	struct knitk_producer *p = producer;
	unsigned char order[KNITK_LANES];
	uint64_t free, lanes = 0;
	unsigned int i = 0, nr = 0, lane, cursor;
	int ret;

	if (!p || !msgs || !n || n > INT_MAX)
		return -EINVAL;
	/* The first message alone decides between an error and -EAGAIN. */
	ret = packed_check(p, &msgs[0]);
	if (ret)
		return ret;
	/* As knitk_producer_send_batch takes lanes: no claimed bits needed. */
	free = producer_free(p);
	cursor = p->cursor;
	while (i < n) {
		if (!free) {
			p->ack_cache = producer_load_ack(p);
			free = producer_free(p) & ~lanes;
			if (!free)
				break;
		}
		lane = ring_next(free, cursor);
		ret = lane_fill_packed(p, lane, header ? header : &none, msgs, n, &i);
		if (ret)
			return ret;	/* nothing published, the cursor kept */
		order[nr++] = (unsigned char)lane;
		free &= ~bit(lane);
		lanes |= bit(lane);
		cursor = (lane + 1) % KNITK_LANES;
	}
	if (!lanes)
		return -EAGAIN;
	/* Stamped in fill order, wherever the lanes are. */
	for (lane = 0; lane < nr; lane++)
		lane_stamp(p, order[lane]);
	p->cursor = cursor;
	lane_publish_stamped(p, lanes);
	return (int)i;
}

/* A stealing mailbox's producer, and @claimant one of its knot's workers. */
static bool producer_steals_to(const struct knitk_producer *p, unsigned int claimant)
{
	return p && knot_mailbox_steals(p->g.ep, p->g.mailbox) &&
	       claimant < p->g.ep->geom.nr_workers;
}

/* Publish claimed @lane of a stealing mailbox reserved for @claimant. */
static void lane_publish_reserved(struct knitk_producer *p, unsigned int lane,
				  unsigned int claimant)
{
	/*
	 * T13: reserved before it turns pending; the release store of pub
	 * in lane_publish_mask orders it for every claimant that acquires
	 * the lane (steal_pending).
	 */
	atomic_fetch_or_explicit(A64(&knot_steal_line(p->g.ep, p->g.mailbox,
						      claimant)->resv),
				 bit(lane), memory_order_relaxed);
	lane_publish_mask(p, bit(lane));
}

KNITK_EXPORT int knitk_producer_send_to(struct knitk_producer *producer,
					unsigned int claimant,
					const struct knitk_lane_header *header,
					const void *data, size_t len)
{
	int lane;

	if (!producer_steals_to(producer, claimant))
		return -EINVAL;
	lane = knitk_producer_stage(producer, header, data, len);
	if (lane < 0)
		return lane;
	lane_publish_reserved(producer, (unsigned int)lane, claimant);
	return lane;
}

KNITK_EXPORT int knitk_lane_publish_to(struct knitk_producer *producer,
				       unsigned int lane, unsigned int claimant)
{
	int ret;

	if (!producer_steals_to(producer, claimant))
		return -EINVAL;
	ret = producer_check_claimed(producer, lane);
	if (ret)
		return ret;
	lane_publish_reserved(producer, lane, claimant);
	return 0;
}

KNITK_EXPORT int knitk_producer_hand_off(struct knitk_producer *producer,
					 unsigned int claimant,
					 unsigned int region_lanes)
{
	struct knitk_producer *p = producer;
	int g;

	if (!p || !knot_mailbox_steals(p->g.ep, p->g.mailbox) ||
	    claimant >= p->g.ep->geom.nr_workers)
		return -EINVAL;
	g = knitk__steal_region(p->g.ep, region_lanes);
	if (g < 0)
		return g;
	/* T14: reserved under the handshake of the claimants (T4). */
	return knot_bits(knitk__steal_producer_hand_off(p->g.ep,
			p->g.mailbox, (unsigned int)g, claimant));
}

/*
 * The live arena slots a stand-in for a dead consumer or claimant may
 * free: not those the producer's user holds (knitk_producer_keep).  Kept
 * is loaded first: a slot that left it was freed before
 * (knitk_producer_free_kept), and the live set loaded after it sees that
 * free.
 */
static uint64_t producer_live_unkept(struct knitk_producer *p)
{
	uint64_t kept = atomic_load_explicit(A64(&p->kept), memory_order_acquire);
	uint64_t live;

	knitk__arena_live(p->arena, &live);
	return live & ~kept;
}

/*
 * Stand in for the dead consumer: both words are stored with the values
 * that say "all done", derived from the producer's own record of what is
 * outstanding (its pub word and its live arena slots), never toggled from
 * lane headers: so a consumer that died between the two stores of
 * knitk_lane_ack (its free word stored, its ack word not) is repaired
 * instead of having its frees undone.  Claimed lanes are the producer's,
 * never the consumer's: their arena slots stay live, and their pub bits
 * equal their ack bits already (free when claimed, L3), so the store of
 * pub as the ack word keeps them unpublished.
 */
KNITK_EXPORT int knitk_producer_reset_consumer(struct knitk_producer *producer)
{
	struct knitk_producer *p = producer;
	uint64_t live, m;

	if (!p)
		return -EINVAL;
	if (knot_mailbox_steals(p->g.ep, p->g.mailbox))
		return -EOPNOTSUPP;
	live = producer_live_unkept(p);
	/* Claimed lanes' room, by the producer's own record. */
	for (m = p->claimed; m; m &= m - 1) {
		int slot = p->lane_slot[__builtin_ctzll(m)];

		if (slot >= 0)
			live &= ~(1ULL << slot);
	}
	if (live)
		/* Pairs with the acquire in arena_freed, like knitk_lane_ack. */
		atomic_store_explicit(A64(&p->g.sector->arena_free),
				      atomic_load_explicit(A64(&p->g.sector->arena_free),
							   memory_order_relaxed) ^ live,
				      memory_order_release);
	/* Pairs with the acquire in producer_load_ack and knitk__endpoint_mailbox_ack. */
	atomic_store_explicit(A64(&p->g.sector->ack), p->pub, memory_order_release);
	return 0;
}

KNITK_EXPORT int knitk_producer_track_claims(struct knitk_producer *producer)
{
	struct knitk_producer *p = producer;
	unsigned int i;

	if (!p)
		return -EINVAL;
	if (!knot_mailbox_steals(p->g.ep, p->g.mailbox))
		return -EOPNOTSUPP;
	if (p->track)
		return 0;
	/* Whatever the ack words hold now is history (reported as nobody's). */
	for (i = 0; i < p->nr_ack_words; i++)
		p->seen_ack[i] = atomic_load_explicit(A64(p->ack_words[i]),
						      memory_order_acquire);
	p->track = true;
	return 0;
}

KNITK_EXPORT int knitk_producer_claims(struct knitk_producer *producer,
				       uint64_t *lanes, unsigned int nr)
{
	struct knitk_producer *p = producer;
	unsigned int w;
	uint64_t m;
	int n = 0;

	if (!p || !lanes || !p->track || nr > p->nr_ack_words)
		return -EINVAL;
	p->ack_cache = producer_load_ack(p);
	for (w = 0; w < nr; w++) {
		lanes[w] = p->claims[w];
		/*
		 * T10: record whose arena slots these are, before the lanes
		 * go.  A slot the claimant freed may already carry a newer
		 * call in another lane: that life is not w's.
		 */
		for (m = lanes[w]; m; m &= m - 1) {
			unsigned int lane = (unsigned int)__builtin_ctzll(m);
			const struct knitk_lane_header *h = lane_hdr(p, lane);

			if (h->kind == KNITK_PAYLOAD_ARENA &&
			    h->arena_slot < KNITK_ARENA_SLOTS &&
			    p->slot_lane[h->arena_slot] == lane)
				p->slot_owner[h->arena_slot] = (int8_t)w;
		}
		p->claims[w] = 0;
		p->unreported &= ~lanes[w];
		n += __builtin_popcountll(lanes[w]);
	}
	return n;
}

KNITK_EXPORT int knitk_producer_reset_claimant(struct knitk_producer *producer,
					       unsigned int worker)
{
	struct knitk_producer *p = producer;
	struct knitk_steal_line *sl;
	uint64_t live, frees = 0;
	unsigned int s;

	if (!p || !p->track || worker >= p->nr_ack_words)
		return -EINVAL;
	/* Every claim of w is reported, so slot_owner names its slots. */
	p->ack_cache = producer_load_ack(p);
	if (p->claims[worker])
		return -EBUSY;
	/* Acquire pairs with the release of live in a join (P2). */
	if (atomic_load_explicit(A64(&knot_control(p->g.ep)->live),
				 memory_order_acquire) & bit(worker))
		return -EBUSY;
	live = producer_live_unkept(p);
	for (s = 0; s < KNITK_ARENA_SLOTS; s++)
		if ((live & (1ULL << s)) && p->slot_owner[s] == (int8_t)worker) {
			frees |= 1ULL << s;
			p->slot_owner[s] = -1;
		}
	sl = knot_steal_line(p->g.ep, p->g.mailbox, worker);
	/* T13: w's reservations lapse with it; pending lanes go to anyone. */
	atomic_store_explicit(A64(&sl->resv), 0, memory_order_relaxed);
	if (frees) {
		/*
		 * The dead claimant was the only writer of its free word and
		 * its successor is not running yet: we stand in (T11).
		 * Release pairs with the acquire in arena_freed.
		 */
		atomic_store_explicit(A64(&sl->arena_free),
				      atomic_load_explicit(A64(&sl->arena_free),
							   memory_order_relaxed) ^ frees,
				      memory_order_release);
	}
	return __builtin_popcountll(frees);
}

KNITK_EXPORT int knitk_producer_notify(struct knitk_producer *producer)
{
	if (!producer)
		return -EINVAL;
	return knitk_doorbell_ring(producer->g.ep,
				   knitk__endpoint_mailbox_doorbells(producer->g.ep,
								     producer->g.mailbox));
}

KNITK_EXPORT int knitk_producer_notify_park(struct knitk_producer *producer,
					    uint64_t deadline_ns)
{
	if (!producer)
		return -EINVAL;
	return knitk_doorbell_ring_park(producer->g.ep,
					knitk__endpoint_mailbox_doorbells(producer->g.ep,
									  producer->g.mailbox),
					deadline_ns);
}

/* ------------------------------------------------------------ consumer */

/* A consumer of @mailbox: its private lanes, or a claimant when @steals. */
static int consumer_create(struct knitk_endpoint *ep, unsigned int mailbox,
			   bool steals, unsigned int region_lanes,
			   struct knitk_consumer **consumer)
{
	struct knitk_consumer *c;
	int ret;

	if (!ep || !consumer || mailbox >= ep->layout.nr_mailboxes)
		return -EINVAL;
	if (knot_mailbox_steals(ep, mailbox) != steals)
		return -EOPNOTSUPP;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	lane_geom_init(&c->g, ep, mailbox);
	if (steals) {
		ret = knitk__steal_create(ep, mailbox, region_lanes, &c->steal);
	} else {
		/* We are the only writer of ack and arena_free. */
		c->ack = atomic_load_explicit(A64(&c->g.sector->ack),
					      memory_order_relaxed);
		ret = knitk__arena_freer_init(&c->freer,
					      (uint64_t *)&c->g.sector->arena_free);
	}
	if (ret) {
		free(c);
		return ret;
	}
	*consumer = c;
	return 0;
}

KNITK_EXPORT int knitk_consumer_create(struct knitk_endpoint *ep,
				       unsigned int mailbox,
				       struct knitk_consumer **consumer)
{
	return consumer_create(ep, mailbox, false, 0, consumer);
}

KNITK_EXPORT int knitk_steal_consumer_create(struct knitk_endpoint *ep,
					     unsigned int mailbox,
					     unsigned int region_lanes,
					     struct knitk_consumer **consumer)
{
	return consumer_create(ep, mailbox, true, region_lanes, consumer);
}

KNITK_EXPORT void knitk_consumer_destroy(struct knitk_consumer *consumer)
{
	if (consumer)
		knitk__steal_destroy(consumer->steal);
	free(consumer);
}

struct knitk_consumer_poll *knitk__consumer_poll(struct knitk_consumer *c)
{
	return &c->poll;
}

struct knitk_endpoint *knitk__consumer_endpoint(const struct knitk_consumer *c)
{
	return c->g.ep;
}

unsigned int knitk__consumer_mailbox(const struct knitk_consumer *c)
{
	return c->g.mailbox;
}

/* The shared lane @lane of the consumer's mailbox. */
static const char *consumer_lane(const struct knitk_consumer *c, unsigned int lane)
{
	return c->g.lanes + (uint64_t)lane * c->g.lane_stride;
}

static uint64_t consumer_stamp(const struct knitk_consumer *c, unsigned int lane)
{
	const struct knitk_lane_header *h = (const void *)consumer_lane(c, lane);

	return atomic_load_explicit(A64(&h->stamp), memory_order_relaxed);
}

/*
 * Whether @pending, taken in ring order from the cursor, is not in
 * publish order: a staged lane published after lanes claimed later
 * (knitk_producer_stage).  The stamps were stored before the release of
 * pub that the scan acquired.
 */
static bool consumer_out_of_order(const struct knitk_consumer *c, uint64_t pending)
{
	uint64_t m = pending, prev = 0;
	bool first = true;

	while (m) {
		unsigned int lane = ring_next(m, c->cursor);
		uint64_t s = consumer_stamp(c, lane);

		if (!first && (int64_t)(s - prev) <= 0)
			return true;
		first = false;
		prev = s;
		m &= ~bit(lane);
	}
	return false;
}

/* The lane of @pending published first. */
static unsigned int consumer_oldest(const struct knitk_consumer *c, uint64_t pending)
{
	unsigned int best = (unsigned int)__builtin_ctzll(pending), lane;
	uint64_t m, bs = consumer_stamp(c, best);

	for (m = pending & (pending - 1); m; m &= m - 1) {
		uint64_t s;

		lane = (unsigned int)__builtin_ctzll(m);
		s = consumer_stamp(c, lane);
		if ((int64_t)(s - bs) < 0) {
			best = lane;
			bs = s;
		}
	}
	return best;
}

/*
 * T3-T7: claim a region; its lanes are ours from now on.  This and
 * consumer_found stay out of line: an empty scan, a poll's common case,
 * then needs no frame.
 */
static __attribute__((noinline)) int consumer_claim(struct knitk_consumer *c, uint64_t *pending)
{
	*pending = knitk__steal_claim(c->steal);
	return knot_bits(*pending);
}

/* The scan found @pending: note them, and whether they are out of order. */
static __attribute__((noinline)) int consumer_found(struct knitk_consumer *c,
						    uint64_t pending)
{
	c->seen |= pending;
	/* One lane, a call's: no order to check. */
	if (!(pending & (pending - 1))) {
		c->by_stamp = false;
		return 1;
	}
	c->by_stamp = consumer_out_of_order(c, pending);
	return knot_bits(pending);
}

KNITK_EXPORT int knitk_lane_scan(struct knitk_consumer *consumer,
				 uint64_t *pending)
{
	uint64_t pub;

	if (!consumer || !pending)
		return -EINVAL;
	if (consumer->steal)
		return consumer_claim(consumer, pending);
	/*
	 * L4: never cache pub.  Acquire pairs with the release store
	 * in lane_publish_mask: header and payload are visible.
	 */
	pub = atomic_load_explicit(A64(&consumer->g.sector->pub),
				   memory_order_acquire);
	*pending = pub ^ consumer->ack;
	if (!*pending) {
		/*
		 * A caller that polls: start fetching the header of the lane
		 * a single producer publishes next (ring order), so that it
		 * travels while the pub word does, not after it.  Only a
		 * hint: the header is read after a scan shows the lane.
		 */
		__builtin_prefetch(consumer_lane(consumer, consumer->cursor));
		return 0;
	}
	return consumer_found(consumer, *pending);
}

KNITK_EXPORT int knitk_steal_hand_off(struct knitk_consumer *consumer,
				     unsigned int worker)
{
	if (!consumer || !consumer->steal ||
	    worker >= consumer->g.ep->geom.nr_workers ||
	    (int)worker == consumer->g.ep->doorbell)
		return -EINVAL;
	return knot_bits(knitk__steal_hand_off(consumer->steal, worker));
}

/* Take the next lane of non-empty *@pending in consume order. */
static inline int consumer_next(struct knitk_consumer *c, uint64_t *pending)
{
	unsigned int lane;

	if (c->steal)
		return knitk__steal_next(c->steal, pending);
	lane = c->by_stamp ? consumer_oldest(c, *pending) :
			     ring_next(*pending, c->cursor);
	c->cursor = (lane + 1) % KNITK_LANES;
	*pending &= ~bit(lane);
	return (int)lane;
}

/* Undo consumer_next() of @lane, which found the cursor at @cursor. */
static void consumer_unnext(struct knitk_consumer *c, uint64_t *pending,
			    unsigned int lane, unsigned int cursor)
{
	if (c->steal) {
		knitk__steal_unnext(c->steal, pending, lane);
		return;
	}
	c->cursor = cursor;
	*pending |= bit(lane);
}

KNITK_EXPORT int knitk_lane_next(struct knitk_consumer *consumer,
				 uint64_t *pending)
{
	if (!consumer || !pending)
		return -EINVAL;
	if (!*pending)
		return -ENOENT;
	return consumer_next(consumer, pending);
}

/* Decode held @lane into @msg, every field but its size. */
static inline int lane_decode(const struct knitk_consumer *c, unsigned int lane,
		       struct knitk_msg *msg)
{
	const struct knitk_lane_header *h = &msg->header;
	const char *l;

	/* A claimant reads its private copy of the lane (T6). */
	l = c->steal ? knitk__steal_lane(c->steal, lane) : consumer_lane(c, lane);
	memcpy(&msg->header, l, sizeof(msg->header));
	msg->lane = lane;
	msg->data = NULL;
	msg->len = 0;
	switch (h->kind) {
	case KNITK_PAYLOAD_NONE:
	case KNITK_PAYLOAD_VALUE:
		return 0;
	case KNITK_PAYLOAD_INLINE:
		if (h->length > c->g.inline_bytes)
			return -EBADMSG;
		msg->data = l + KNITK_LANE_HEADER_BYTES;
		msg->len = h->length;
		return 0;
	case KNITK_PAYLOAD_PACKED:
		/* L7: the whole lane frames, or none of it is read. */
		if (h->length > c->g.inline_bytes ||
		    !knitk__packed_frames(l + KNITK_LANE_HEADER_BYTES,
					  h->length, h->value))
			return -EBADMSG;
		msg->data = l + KNITK_LANE_HEADER_BYTES;
		msg->len = h->length;
		return 0;
	case KNITK_PAYLOAD_ARENA:
		if (h->arena_slot >= KNITK_ARENA_SLOTS ||
		    h->value > c->g.arena_size ||
		    h->length > c->g.arena_size - h->value)
			return -EBADMSG;
		msg->data = c->g.arena_mem + h->value;
		msg->len = h->length;
		return 0;
	default:
		return -EBADMSG;
	}
}

KNITK_EXPORT int knitk_lane_decode(struct knitk_consumer *consumer,
				   unsigned int lane, struct knitk_msg *msg)
{
	struct knitk_consumer *c = consumer;
	int ret;

	if (!c || !msg || lane >= KNITK_LANES)
		return -EINVAL;
	/* Every field is in the first version: fill in place, per lane. */
	ret = knitk__sized_check(msg->size, KNITK_MSG_SIZE_VER0);
	if (ret)
		return ret;
	if (c->steal ? !knitk__steal_holds(c->steal, lane) : !(c->seen & bit(lane)))
		return -EPERM;
	msg->size = sizeof(*msg);
	return lane_decode(c, lane, msg);
}

KNITK_EXPORT int knitk_lane_decode_batch(struct knitk_consumer *consumer,
					 uint64_t *pending, struct knitk_msg *msgs,
					 unsigned int n, size_t msg_size)
{
	struct knitk_consumer *c = consumer;
	struct knitk_msg *m;
	unsigned int i, cursor;
	int lane, ret;

	if (!c || !pending || !msgs || !n || msg_size > UINT32_MAX)
		return -EINVAL;
	ret = knitk__sized_check((uint32_t)msg_size, KNITK_MSG_SIZE_VER0);
	if (ret)
		return ret;
	/* Every element must be where a struct knitk_msg may live. */
	if (msg_size % _Alignof(struct knitk_msg))
		return -EINVAL;
	if (!*pending)
		return -ENOENT;
	/* Checked once for the batch: consumer_next only takes these. */
	if (!c->steal && (*pending & ~c->seen))
		return -EPERM;
	for (i = 0; i < n && *pending; i++) {
		cursor = c->cursor;
		lane = consumer_next(c, pending);
		if (lane < 0) {
			if (!i)
				return lane;
			break;
		}
		m = (struct knitk_msg *)((char *)msgs + (size_t)i * msg_size);
		m->size = sizeof(*m);
		ret = lane_decode(c, (unsigned int)lane, m);
		if (ret) {
			if (!i)
				return ret;
			/* Reported by the next call, after the good ones. */
			consumer_unnext(c, pending, (unsigned int)lane, cursor);
			break;
		}
	}
	return (int)i;
}

KNITK_EXPORT int knitk_lane_ack_keep(struct knitk_consumer *consumer,
				     uint64_t lanes, uint64_t keep)
{
	struct knitk_consumer *c = consumer;
	uint64_t frees = 0, m;

	if (!c || !lanes || (keep & ~lanes))
		return -EINVAL;
	if (c->steal)
		return knitk__steal_done(c->steal, lanes, keep);
	if (lanes & ~c->seen)
		return -EPERM;
	for (m = lanes & ~keep; m; m &= m - 1) {
		const struct knitk_lane_header *h =
			(const void *)consumer_lane(c, (unsigned int)__builtin_ctzll(m));

		if (h->kind == KNITK_PAYLOAD_ARENA &&
		    h->arena_slot < KNITK_ARENA_SLOTS)
			frees ^= 1ULL << h->arena_slot;
	}
	if (frees) {
		c->freer.toggles ^= frees;
		/*
		 * Release pairs with the acquire in arena_freed: our payload
		 * reads are done before the producer places new bytes there.
		 * Stored before the ack, so a lane the producer sees free
		 * never holds a live arena slot.
		 */
		atomic_store_explicit(A64(c->freer.word), c->freer.toggles,
				      memory_order_release);
	}
	c->ack ^= lanes;
	c->seen &= ~lanes;
	/*
	 * Release pairs with the acquire in producer_load_ack and
	 * knitk__endpoint_mailbox_ack: the lanes are read before they are reused.
	 */
	atomic_store_explicit(A64(&c->g.sector->ack), c->ack, memory_order_release);
	return 0;
}

KNITK_EXPORT int knitk_lane_ack(struct knitk_consumer *consumer,
				uint64_t lanes)
{
	return knitk_lane_ack_keep(consumer, lanes, 0);
}
