/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * libknitk internals of the core layer: the endpoint object, the backend
 * ops table and the accessors of shared words.  Not installed; the pool
 * (lib/pool/) never includes it: it uses <knitk.h> alone.
 */
#ifndef KNITK_INTERNAL_H
#define KNITK_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "knitk.h"

_Static_assert(sizeof(struct knitk_lane_header) == KNITK_LANE_HEADER_BYTES,
	       "lane header is one cache line");
_Static_assert(sizeof(struct knitk_sector) == 4 * KNITK_CACHELINE,
	       "sector words each on their own cache line");
_Static_assert(sizeof(struct knitk_doorbell) == KNITK_CACHELINE,
	       "doorbell is one cache line");

/* A shared __u64/__u32 of the mapping, accessed atomically. */
#define A64(p) ((_Atomic uint64_t *)(void *)(p))
#define A32(p) ((_Atomic uint32_t *)(void *)(p))

/*
 * The endpoint's wake counters, in the field order of the struct that
 * reports them, struct knitk_wake_stats; knitk_endpoint_wake_stats() copies
 * each to its field through the table of doorbell.c.
 */
enum knitk_counter {
	KC_WAITS,
	KC_WAKES,
	KC_SPURIOUS,
	KC_MISMATCHES,
	KC_TIMEOUTS,
	KC_INTERRUPTS,
	KC_SENT,
	KC_SUPPRESSED_AWAKE,
	KC_SUPPRESSED_IDLE,
	KC_KICKS,
	KC_EVENT_WRITES,
	KC_NR,
};

struct knitk_endpoint;

/* The small table of what differs between /dev/knitk and memfd + futex. */
struct knitk_backend_ops {
	int kind;
	/*
	 * Make a knot of k->geom, whose layout is computed in k->layout; set
	 * k->fd, k->base.
	 */
	int (*create)(struct knitk_endpoint *k);
	/* Join the knot of @fd; set k->fd, k->layout, k->geom, k->base. */
	int (*attach)(struct knitk_endpoint *k, int fd);
	/* Take the role; 0 and the role's new (32-bit) generation, or -errno. */
	int (*join)(struct knitk_endpoint *k, unsigned int role, unsigned int worker,
		    uint32_t *generation);
	/* Sleep on the own doorbell while seq == @seq (docs/protocol.md S1). */
	int (*wait)(struct knitk_endpoint *k, uint32_t seq, uint64_t deadline_ns);
	/*
	 * Ring the doorbells of @mask, whose sleeping flags were seen set;
	 * *@woken gets the ones woken.
	 */
	int (*notify)(struct knitk_endpoint *k, uint64_t mask, uint64_t *woken);
	int (*stats)(struct knitk_endpoint *k, unsigned int doorbell,
		     struct knitk_doorbell_stats *st);
	int (*mark_dead)(struct knitk_endpoint *k, unsigned int doorbell);
	/*
	 * Advance the own doorbell's seq and wake its sleeper with no work
	 * pending (KNITK_NOTIFY_KICK on the module); only if k->can_kick.
	 */
	int (*kick)(struct knitk_endpoint *k);
	/*
	 * Ring @mask as notify does, then wait as wait does, in one call
	 * (KNITK_IOC_NOTIFY_WAIT, docs/protocol.md S9); *@woken is set
	 * whenever the ring happened.  Only if k->can_ring_wait.
	 */
	int (*ring_wait)(struct knitk_endpoint *k, uint64_t mask, uint32_t seq,
			 uint64_t deadline_ns, uint64_t *woken);
	/*
	 * wait, also ended by a change or a wake of one of @nr words
	 * (knitk_doorbell_ring_wait_words); NULL where the backend cannot.
	 */
	int (*wait_words)(struct knitk_endpoint *k, uint32_t seq,
			  uint64_t deadline_ns,
			  const struct knitk_wait_word *words, unsigned int nr);
	/*
	 * Sleep while *@word (in the knot's data region, checked) holds
	 * @expected, until a word_wake of it (knitk_word_wait).
	 */
	int (*word_wait)(struct knitk_endpoint *k, const uint32_t *word,
			 uint32_t expected, uint64_t deadline_ns);
	/* Wake at most @nr waiters of @word; the number woken, or -errno. */
	int (*word_wake)(struct knitk_endpoint *k, const uint32_t *word,
			 unsigned int nr);
	/* Leave the role, unmap, close. */
	void (*release)(struct knitk_endpoint *k);
};

extern const struct knitk_backend_ops knitk_backend_kmod;
extern const struct knitk_backend_ops knitk_backend_futex;

struct knitk_endpoint {
	const struct knitk_backend_ops *ops;
	int fd;
	void *base;
	struct knitk_layout layout;
	struct knitk_geometry geom;
	uint64_t map_bytes;		/* mapped at base: layout.size, page rounded */
	uint64_t page_bytes;		/* bytes per page of the mapping */
	uint32_t pages_flags;		/* KNITK_PAGES_HUGETLB, KNITK_PAGES_THP */
	int doorbell;			/* the joined role's doorbell, -1 before JOIN */
	uint32_t join_gen;		/* the generation our JOIN gave the role */
	pid_t join_pid;			/* futex: the process that joined */
	uint32_t nonce;			/* last sleeping-flag value written */
	uint32_t death_seq;		/* death_seq seen at prepare */
	uint32_t death_done;		/* death_done seen at prepare */
	bool can_kick;			/* the backend offers ops->kick */
	bool can_spin;			/* waits spin in the kernel (S8) */
	bool can_ring_wait;		/* the backend offers ops->ring_wait */
	bool can_word_wait;		/* kmod: KNITK_IOC_WORD_WAIT and _WAKE */
	/* knitk_doorbell_kick_self: begun before its ops->kick, done after it */
	_Atomic uint32_t kicks_begun;
	_Atomic uint32_t kicks_done;
	uint32_t kicks_done_seen;	/* kicks_done seen at prepare */
	/* futex: the eventfd signalled with each wake of the host doorbell, or -1 */
	_Atomic int event_fd;
	_Atomic uint64_t counters[KC_NR];
};

static inline void knot_count(struct knitk_endpoint *k, enum knitk_counter c,
			      uint64_t n)
{
	atomic_fetch_add_explicit(&k->counters[c], n, memory_order_relaxed);
}

/*
 * The bits set in @mask: the lanes of a scan, the doorbells of a ring.
 * Without -mpopcnt the builtin is a call into libgcc: count them in place
 * instead.
 */
static inline int knot_bits(uint64_t mask)
{
#ifdef __POPCNT__
	return __builtin_popcountll(mask);
#else
	/* Mostly no lane or one, one doorbell: skip the count for those. */
	if (!(mask & (mask - 1)))
		return mask != 0;
	mask -= (mask >> 1) & 0x5555555555555555ULL;
	mask = (mask & 0x3333333333333333ULL) + ((mask >> 2) & 0x3333333333333333ULL);
	mask = (mask + (mask >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
	return (int)((mask * 0x0101010101010101ULL) >> 56);
#endif
}

static inline struct knitk_doorbell *knot_doorbell(const struct knitk_endpoint *k,
						   unsigned int d)
{
	return (struct knitk_doorbell *)((char *)k->base + k->layout.doorbell_off +
					 (uint64_t)d * k->layout.doorbell_stride);
}

static inline struct knitk_sector *knot_sector(const struct knitk_endpoint *k,
					       unsigned int m)
{
	return (struct knitk_sector *)((char *)k->base + k->layout.mailbox_off +
				       (uint64_t)m * k->layout.mailbox_stride);
}

static inline struct knitk_steal_line *
knot_steal_line(const struct knitk_endpoint *k, unsigned int m, unsigned int w)
{
	return (struct knitk_steal_line *)((char *)k->base + k->layout.steal_off +
		(uint64_t)(m * k->geom.nr_workers + w) * k->layout.steal_stride);
}

static inline const struct knitk_control *knot_control(const struct knitk_endpoint *k)
{
	return (const struct knitk_control *)k->base;
}

static inline bool knot_mailbox_steals(const struct knitk_endpoint *k,
				       unsigned int m)
{
	return (k->geom.flags & KNITK_GEOM_STEAL) && m < k->layout.nr_request;
}

/* knot.c: the calling thread's knitk_last_error() message. */
void knitk__error_clear(void);
void knitk__error_set(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* @layout is valid and the one knitk_layout_compute gives for @geom. */
bool knitk__layout_matches_geometry(const struct knitk_geometry *geom,
				    const struct knitk_layout *layout);
/*
 * The region size a stealing knot records for region_lanes 0 (the module
 * stores it so; a knot of a module or library older than the field keeps
 * 0, which meant the same): @geom, valid, gets it.
 */
void knitk__geometry_resolve(struct knitk_geometry *geom);

/* topology.c: mask of doorbells whose owners consume mailbox @m. */
uint64_t knitk__endpoint_mailbox_doorbells(const struct knitk_endpoint *k,
					   unsigned int m);
/*
 * A lane is pending in a mailbox doorbell @d's owner consumes, not counting
 * those reserved for another live worker (T13).
 */
bool knitk__endpoint_doorbell_pending(const struct knitk_endpoint *k,
				      unsigned int d);
/*
 * topology.c: the doorbell of the role that produces into mailbox @m: the
 * host for a request mailbox, worker w for return mailbox w.
 */
unsigned int knitk__endpoint_mailbox_producer(const struct knitk_endpoint *k,
					      unsigned int m);
/* Effective ack word of mailbox @m (acquire loads). */
uint64_t knitk__endpoint_mailbox_ack(const struct knitk_endpoint *k, unsigned int m);

/*
 * consumer_wait.c: the adaptive poll of a consumer's wait
 * (docs/protocol.md S10), kept in each consumer (lane.c) and written only
 * by the thread that drives it.
 */
struct knitk_consumer_poll {
	uint64_t budget_ns;		/* the next poll's length; 0: park at once */
	unsigned int cpus;		/* the thread's CPUs, as last read; 0: unread */
	unsigned int parks;		/* parks so far (the CPUs are read every 64) */
};

/* lane.c: what a consumer's wait needs of it. */
struct knitk_consumer_poll *knitk__consumer_poll(struct knitk_consumer *c);
struct knitk_endpoint *knitk__consumer_endpoint(const struct knitk_consumer *c);
unsigned int knitk__consumer_mailbox(const struct knitk_consumer *c);

/* steal.c: the claimant of a stealing mailbox (docs/protocol.md T1-T9). */
struct knitk_steal;
int knitk__steal_create(struct knitk_endpoint *k, unsigned int mailbox,
			unsigned int g, struct knitk_steal **st);
void knitk__steal_destroy(struct knitk_steal *st);
/*
 * The knot's region size g for a claimant or a hand-off asking for
 * @region_lanes: 0 or g itself; -EINVAL for any other.
 */
int knitk__steal_region(const struct knitk_endpoint *k, unsigned int region_lanes);
/* Claim a region (or return the lanes of the last claim not taken yet). */
uint64_t knitk__steal_claim(struct knitk_steal *st);
/* Claim a region for peer @to: its lanes are reserved for @to (T13). */
uint64_t knitk__steal_hand_off(struct knitk_steal *st, unsigned int to);
uint64_t knitk__steal_producer_hand_off(struct knitk_endpoint *k,
					unsigned int mailbox, unsigned int g,
					unsigned int to);
/* The next claimed lane of *@pending in publish order, or -ENOENT. */
int knitk__steal_next(struct knitk_steal *st, uint64_t *pending);
/* Undo the knitk__steal_next() that returned @lane. */
void knitk__steal_unnext(struct knitk_steal *st, uint64_t *pending,
			 unsigned int lane);
bool knitk__steal_holds(const struct knitk_steal *st, unsigned int lane);
/* The private copy of claimed @lane: header, then the inline bytes. */
const char *knitk__steal_lane(const struct knitk_steal *st, unsigned int lane);
/*
 * Done with claimed @lanes: free their arena slots (own free word), but
 * for those of @keep, which the producer frees (knitk_producer_free_kept).
 */
int knitk__steal_done(struct knitk_steal *st, uint64_t lanes, uint64_t keep);

/* Role @d joined once and its endpoint has been released (or marked dead). */
static inline bool knot_role_dead(const struct knitk_endpoint *k, unsigned int d)
{
	const uint64_t role = 1ULL << d;
	/*
	 * Acquire of dead pairs with its release in knitk_peer_leave()
	 * (kmod/knitk_peer.c), after live was cleared, or with the RMWs of
	 * futex_mark_dead(): a new dead bit comes with its live bit clear.
	 */
	uint64_t dead = atomic_load_explicit(A64(&knot_control(k)->dead),
					     memory_order_acquire);
	uint64_t live = atomic_load_explicit(A64(&knot_control(k)->live),
					     memory_order_acquire);

	return (dead & role) && !(live & role);
}

/* The host joined once and its endpoint has been released (or marked dead). */
static inline bool knot_host_dead(const struct knitk_endpoint *k)
{
	return knot_role_dead(k, KNITK_DOORBELL_HOST);
}

/*
 * The role @k joined has ended: its live bit is clear (its death, or a
 * knitk_endpoint_mark_dead of it on the futex backend), or a later join
 * took the role (another generation).  Acquire loads as in
 * knitk_endpoint_role: a live bit seen comes with its join's generation.
 * Only for a joined endpoint.
 */
static inline bool knot_role_ended(const struct knitk_endpoint *k)
{
	const struct knitk_control *ctl = knot_control(k);
	unsigned int d = (unsigned int)k->doorbell;
	uint64_t live = atomic_load_explicit(A64(&ctl->live), memory_order_acquire);
	uint32_t gen = atomic_load_explicit(A32(&ctl->generation[d]),
					    memory_order_acquire);

	return !(live & (1ULL << d)) || gen != k->join_gen;
}

/* The doorbell's seq and sleeping flag as one 64-bit word. */
static inline _Atomic uint64_t *doorbell_word(struct knitk_doorbell *db)
{
	return A64(&db->seq);
}

static inline uint32_t dbw_seq(uint64_t w)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (uint32_t)w;
#else
	return (uint32_t)(w >> 32);
#endif
}

static inline uint32_t dbw_sleeping(uint64_t w)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (uint32_t)(w >> 32);
#else
	return (uint32_t)w;
#endif
}

/*
 * Doorbell @d's owner has its sleeping flag up: a hint (relaxed, no
 * ordering), for the polls that count who is awake; a stale flag costs a
 * poll too many or too few, never a wake.
 */
static inline bool knot_doorbell_asleep(const struct knitk_endpoint *k,
					unsigned int d)
{
	return dbw_sleeping(atomic_load_explicit(doorbell_word(knot_doorbell(k, d)),
						 memory_order_relaxed)) != 0;
}

static inline uint64_t dbw_make(uint32_t seq, uint32_t sleeping)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (uint64_t)sleeping << 32 | seq;
#else
	return (uint64_t)seq << 32 | sleeping;
#endif
}

/* CLOCK_MONOTONIC now, in ns: the clock of every deadline (doorbell.c). */
uint64_t knitk__now_ns(void);

#endif /* KNITK_INTERNAL_H */
