// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The claimants of stealing mailboxes (lib/core/steal.c, docs/protocol.md
 * T1-T11): regions, exactly-once under contention for every legal g, age
 * order, dead claimants (LIVE mask), the producer's claim reports and
 * its hand-off (T14), a lane written in place published reserved (T13).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "knitk.h"
#include "tap.h"
#include "../core/knot_hooks.h"

/* Messages per submit mailbox and configuration (sanitizers: fewer). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STEAL_N_DEFAULT		4000
#else
#define STEAL_N_DEFAULT		100000
#endif
#define STEAL_SUBMITTERS	3
#define STEAL_INLINE		64
#define STEAL_ARENA		(64 * 1024)

static unsigned long steal_n = STEAL_N_DEFAULT;

static void regions(void)
{
	CHECK_EQ(knitk_steal_region_lanes(1, 0), 32);
	CHECK_EQ(knitk_steal_region_lanes(2, 0), 16);
	CHECK_EQ(knitk_steal_region_lanes(3, 0), 16);
	CHECK_EQ(knitk_steal_region_lanes(4, 0), 8);
	CHECK_EQ(knitk_steal_region_lanes(7, 0), 8);
	CHECK_EQ(knitk_steal_region_lanes(8, 0), 4);
	CHECK_EQ(knitk_steal_region_lanes(16, 0), 2);
	CHECK_EQ(knitk_steal_region_lanes(31, 0), 2);
	CHECK_EQ(knitk_steal_region_lanes(32, 0), 1);
	CHECK_EQ(knitk_steal_region_lanes(63, 0), 1);
	CHECK_EQ(knitk_steal_region_lanes(63, 1), 1);
	CHECK_EQ(knitk_steal_region_lanes(4, 2), 2);
	CHECK_EQ(knitk_steal_region_lanes(4, 16), -EINVAL);	/* 4 regions < 5 */
	CHECK_EQ(knitk_steal_region_lanes(4, 3), -EINVAL);	/* not a power of 2 */
	CHECK_EQ(knitk_steal_region_lanes(2, 64), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(64, 0), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(0, 0), -EINVAL);
}

struct rig {
	struct knitk_endpoint *host;
	struct knitk_endpoint *w[KNITK_MAX_WORKERS];
	struct knitk_producer *p[STEAL_SUBMITTERS];
	unsigned int nr_workers;
	unsigned int nr_submitters;
	unsigned int g;
};

static int rig_init(struct rig *r, unsigned int workers, unsigned int subs,
		    unsigned int g)
{
	struct knitk_geometry geom = {
		.flags = KNITK_GEOM_STEAL, .nr_workers = workers,
		.nr_submitters = subs, .lanes = KNITK_LANES,
		.inline_bytes = STEAL_INLINE, .arena_bytes = STEAL_ARENA,
		.region_lanes = g,
	};
	unsigned int i;
	int ret;

	memset(r, 0, sizeof(*r));
	r->nr_workers = workers;
	r->nr_submitters = subs;
	r->g = g;
	ret = knitk_endpoint_create(&geom, KNITK_KNOT_FUTEX, &r->host);
	if (ret)
		return ret;
	ret = knitk_endpoint_join(r->host, KNITK_ROLE_HOST, 0);
	if (ret < 0)
		return ret;
	for (i = 0; i < workers; i++) {
		ret = knitk_endpoint_attach(knitk_endpoint_fd(r->host), 0, &r->w[i]);
		if (ret)
			return ret;
		ret = knitk_endpoint_join(r->w[i], KNITK_ROLE_WORKER, i);
		if (ret < 0)
			return ret;
	}
	for (i = 0; i < subs; i++) {
		ret = knitk_producer_create(r->host, i, &r->p[i]);
		if (ret)
			return ret;
	}
	return 0;
}

static void rig_fini(struct rig *r)
{
	unsigned int i;

	for (i = 0; i < r->nr_submitters; i++)
		knitk_producer_destroy(r->p[i]);
	for (i = 0; i < r->nr_workers; i++)
		knitk_endpoint_destroy(r->w[i]);
	knitk_endpoint_destroy(r->host);
}

/* ------------------------------------------------------ exactly once */

/* The payload of message @id: a value, inline bytes or arena bytes. */
static size_t msg_len(uint64_t id)
{
	switch (id % 4) {
	case 0:
		return 0;
	case 1:
	case 2:
		return 1 + id % STEAL_INLINE;
	default:
		return STEAL_INLINE + 1 + id % 3000;
	}
}

static unsigned char msg_byte(uint64_t id, size_t i)
{
	return (unsigned char)(id * 131 + i * 7 + (id >> 32));
}

struct run {
	struct rig *rig;
	_Atomic unsigned char *seen;	/* per message: times consumed */
	_Atomic unsigned long consumed;
	_Atomic unsigned long bad;
	unsigned long total;
};

struct worker_arg {
	struct run *run;
	unsigned int w;
};

static bool check_msg(const struct knitk_msg *m)
{
	uint64_t id = m->header.task_id;
	size_t len = msg_len(id), i;

	if (!len)
		return m->header.kind == KNITK_PAYLOAD_VALUE &&
		       m->header.value == ~id;
	if (m->len != len || m->header.function_id != (uint32_t)id)
		return false;
	for (i = 0; i < len; i++)
		if (((const unsigned char *)m->data)[i] != msg_byte(id, i))
			return false;
	return true;
}

static void *worker_main(void *arg)
{
	struct worker_arg *a = arg;
	struct run *run = a->run;
	struct rig *r = run->rig;
	struct knitk_consumer *c[STEAL_SUBMITTERS] = { 0 };
	unsigned int s;

	for (s = 0; s < r->nr_submitters; s++)
		if (knitk_steal_consumer_create(r->w[a->w], s, r->g, &c[s])) {
			atomic_fetch_add(&run->bad, 1);
			goto out;
		}
	while (atomic_load_explicit(&run->consumed, memory_order_acquire) < run->total) {
		bool any = false;

		for (s = 0; s < r->nr_submitters; s++) {
			struct knitk_msg m = { .size = sizeof(m) };
			uint64_t pend;
			int lane;

			if (knitk_lane_scan(c[s], &pend) <= 0)
				continue;
			any = true;
			while ((lane = knitk_lane_next(c[s], &pend)) >= 0) {
				uint64_t id;

				if (knitk_lane_decode(c[s], (unsigned int)lane, &m) ||
				    !check_msg(&m))
					atomic_fetch_add(&run->bad, 1);
				id = m.header.task_id;
				if ((id >> 32) < r->nr_submitters &&
				    (id & 0xffffffffU) < steal_n)
					atomic_fetch_add(&run->seen[(id >> 32) * steal_n +
								    (id & 0xffffffffU)], 1);
				else
					atomic_fetch_add(&run->bad, 1);
				if (knitk_lane_ack(c[s], 1ULL << lane))
					atomic_fetch_add(&run->bad, 1);
				atomic_fetch_add_explicit(&run->consumed, 1,
							  memory_order_release);
			}
		}
		if (!any)
			sched_yield();
	}
out:
	for (s = 0; s < r->nr_submitters; s++)
		knitk_consumer_destroy(c[s]);
	return NULL;
}

struct submit_arg {
	struct run *run;
	unsigned int s;
};

static void *submit_main(void *arg)
{
	struct submit_arg *a = arg;
	struct knitk_producer *p = a->run->rig->p[a->s];
	static __thread unsigned char buf[STEAL_INLINE + 3001];
	unsigned long i;

	for (i = 0; i < steal_n; i++) {
		uint64_t id = (uint64_t)a->s << 32 | i;
		struct knitk_lane_header h = {
			.function_id = (uint32_t)id, .task_id = id, .value = ~id,
		};
		size_t len = msg_len(id), k;
		int ret;

		for (k = 0; k < len; k++)
			buf[k] = msg_byte(id, k);
		while ((ret = knitk_producer_send(p, &h, len ? buf : NULL, len)) == -EAGAIN ||
		       ret == -ENOSPC)
			sched_yield();
		if (ret < 0)
			atomic_fetch_add(&a->run->bad, 1);
	}
	return NULL;
}

static void exactly_once_one(unsigned int workers, unsigned int g)
{
	struct worker_arg wa[KNITK_MAX_WORKERS];
	struct submit_arg sa[STEAL_SUBMITTERS];
	pthread_t wt[KNITK_MAX_WORKERS], st[STEAL_SUBMITTERS];
	struct run run = { 0 };
	struct rig r;
	unsigned long i, once = 0;
	unsigned int k;

	REQUIRE(rig_init(&r, workers, STEAL_SUBMITTERS, g) == 0);
	run.rig = &r;
	run.total = steal_n * STEAL_SUBMITTERS;
	run.seen = calloc(run.total, 1);
	REQUIRE(run.seen);
	for (k = 0; k < workers; k++) {
		wa[k] = (struct worker_arg){ &run, k };
		REQUIRE(pthread_create(&wt[k], NULL, worker_main, &wa[k]) == 0);
	}
	for (k = 0; k < STEAL_SUBMITTERS; k++) {
		sa[k] = (struct submit_arg){ &run, k };
		REQUIRE(pthread_create(&st[k], NULL, submit_main, &sa[k]) == 0);
	}
	for (k = 0; k < STEAL_SUBMITTERS; k++)
		pthread_join(st[k], NULL);
	for (k = 0; k < workers; k++)
		pthread_join(wt[k], NULL);
	for (i = 0; i < run.total; i++)
		once += atomic_load(&run.seen[i]) == 1;
	printf("# %u workers, g %u: %lu of %lu messages consumed exactly once\n",
	       workers, g, once, run.total);
	CHECK_EQ(once, run.total);
	CHECK_EQ(atomic_load(&run.consumed), run.total);
	CHECK_EQ(atomic_load(&run.bad), 0);
	free(run.seen);
	rig_fini(&r);
}

/* Every worker count of the brief, every legal g, several submitters. */
static void exactly_once_every_g(void)
{
	static const unsigned int counts[] = { 2, 3, 4, 8, 16, 63 };
	unsigned int i, g;

	for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		for (g = 1; g <= KNITK_LANES; g *= 2)
			if (knitk_steal_region_lanes(counts[i], g) == (int)g)
				exactly_once_one(counts[i], g);
}

/* ------------------------------------------------------------ others */

static struct knitk_consumer *claimant(struct rig *r, unsigned int w)
{
	struct knitk_consumer *c = NULL;

	CHECK_EQ(knitk_steal_consumer_create(r->w[w], 0, r->g, &c), 0);
	return c;
}

/*
 * T9: with lanes published out of lane order, a claimant takes the oldest
 * region first and decodes in publish order.
 */
static void age_order(void)
{
	struct knitk_msg m = { .size = sizeof(m) };
	struct knitk_consumer *c;
	struct rig r;
	uint64_t pend, expect = 0;
	int lane, i;

	REQUIRE(rig_init(&r, 2, 1, 8) == 0);
	c = claimant(&r, 0);
	REQUIRE(c);
	for (i = 0; i < 64; i++)
		REQUIRE(knitk_lane_claim(r.p[0]) == i);
	/* Published 63, 62, ..., 0: lane 63 is the oldest. */
	for (i = 63; i >= 0; i--) {
		REQUIRE(knitk_lane_set_value(r.p[0], (unsigned int)i, 63 - (uint64_t)i) == 0);
		REQUIRE(knitk_lane_publish(r.p[0], (unsigned int)i) == 0);
	}
	while (knitk_lane_scan(c, &pend) > 0) {
		CHECK_EQ(__builtin_popcountll(pend), 8);
		while ((lane = knitk_lane_next(c, &pend)) >= 0) {
			REQUIRE(knitk_lane_decode(c, (unsigned int)lane, &m) == 0);
			CHECK_EQ(m.header.value, expect);
			expect++;
			CHECK_EQ(knitk_lane_ack(c, 1ULL << lane), 0);
		}
	}
	CHECK_EQ(expect, 64);
	CHECK_EQ(knitk_mailbox_pending(r.host, 0, &pend), 0);
	knitk_consumer_destroy(c);
	rig_fini(&r);
}

static struct knitk_steal_line *line_of(struct rig *r, unsigned int m,
					unsigned int w)
{
	struct knitk_layout l;
	void *base;

	knitk_endpoint_layout(r->host, &l, NULL);
	knitk_endpoint_base(r->host, &base);
	return (struct knitk_steal_line *)((char *)base + l.steal_off +
		(uint64_t)(m * r->nr_workers + w) * l.steal_stride);
}

static void send_values(struct rig *r, unsigned int n)
{
	struct knitk_lane_header h = { 0 };
	unsigned int i;

	for (i = 0; i < n; i++) {
		h.value = i;
		REQUIRE(knitk_producer_send(r->p[0], &h, NULL, 0) >= 0);
	}
}

/*
 * Ten calls on a two-worker rig, worker @me's claimant in *@c, and worker
 * @peer stopped holding an intent for every region.
 */
static int stale_intent(struct rig *r, unsigned int me, unsigned int peer,
			struct knitk_consumer **c)
{
	int ret = rig_init(r, 2, 1, 16);

	if (ret)
		return ret;
	*c = claimant(r, me);
	if (!*c)
		return -ENOMEM;
	send_values(r, 10);
	atomic_store((_Atomic uint64_t *)&line_of(r, 0, peer)->want, ~0ULL);
	return 0;
}

/* @peer dies: its intent stops counting, @c claims all ten calls. */
static void claim_past_dead(struct rig *r, struct knitk_consumer *c,
			    unsigned int peer)
{
	uint64_t pend;

	CHECK_EQ(knitk_endpoint_mark_dead(r->host, peer), 0);
	CHECK_EQ(knitk_lane_scan(c, &pend), 10);
	CHECK_EQ(knitk_lane_ack(c, pend), 0);
}

/*
 * T3, T5: a live senior's intent keeps a junior out of every region it
 * names; once the senior is dead (live bit cleared) it stops counting.
 */
static void dead_senior_stops_counting(void)
{
	struct knitk_consumer *c;
	struct rig r;
	uint64_t pend;

	REQUIRE(stale_intent(&r, 1, 0, &c) == 0);
	CHECK_EQ(knitk_lane_scan(c, &pend), 0);
	claim_past_dead(&r, c, 0);
	knitk_consumer_destroy(c);
	rig_fini(&r);
}

/*
 * T5: a dead junior that holds an intent for the senior's region does not
 * make the senior wait (the test would hang).  A respawned worker on the
 * same line clears the stale intent (T11).
 */
static void dead_junior_and_respawn(void)
{
	struct knitk_consumer *c, *c1;
	struct rig r;
	uint64_t pend;

	REQUIRE(stale_intent(&r, 0, 1, &c) == 0);
	claim_past_dead(&r, c, 1);
	/* A new worker 1 takes over the line. */
	knitk_endpoint_destroy(r.w[1]);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(r.host), 0, &r.w[1]) == 0);
	REQUIRE(knitk_endpoint_join(r.w[1], KNITK_ROLE_WORKER, 1) >= 1);
	c1 = claimant(&r, 1);
	REQUIRE(c1);
	CHECK_EQ(atomic_load((_Atomic uint64_t *)&line_of(&r, 0, 1)->want), 0);
	send_values(&r, 5);
	CHECK_EQ(knitk_lane_scan(c1, &pend), 5);
	CHECK_EQ(knitk_lane_ack(c1, pend), 0);
	knitk_consumer_destroy(c1);
	knitk_consumer_destroy(c);
	rig_fini(&r);
}

/*
 * T10, T11: a tracking producer learns who claimed which lane before the
 * lane is reused, and frees a dead claimant's unfinished arena slots.
 */
static void claims_reported_and_reset(void)
{
	static unsigned char big[20000];
	struct knitk_lane_header h = { 0 };
	struct knitk_consumer *c0, *c1;
	struct rig r;
	uint64_t pend0, pend1, lanes[2];
	int i;

	REQUIRE(rig_init(&r, 2, 1, 16) == 0);
	CHECK_EQ(knitk_producer_track_claims(r.p[0]), 0);
	c0 = claimant(&r, 0);
	c1 = claimant(&r, 1);
	REQUIRE(c0 && c1);
	/* Three arena payloads fill most of the arena; then values. */
	for (i = 0; i < 3; i++)
		REQUIRE(knitk_producer_send(r.p[0], &h, big, sizeof(big)) == i);
	CHECK_EQ(knitk_producer_send(r.p[0], &h, big, sizeof(big)), -ENOSPC);
	for (i = 3; i < 64; i++)
		REQUIRE(knitk_producer_send(r.p[0], &h, NULL, 0) == i);
	CHECK_EQ(knitk_lane_scan(c0, &pend0), 16);	/* lanes 0..15 */
	CHECK_EQ(pend0, 0xffffULL);
	CHECK_EQ(knitk_lane_scan(c1, &pend1), 16);
	CHECK_EQ(pend0 & pend1, 0);
	/* Retired, but busy until reported. */
	CHECK_EQ(knitk_producer_send(r.p[0], &h, NULL, 0), -EAGAIN);
	CHECK_EQ(knitk_producer_reset_claimant(r.p[0], 1), -EBUSY);
	CHECK_EQ(knitk_producer_claims(r.p[0], lanes, 2), 32);
	CHECK_EQ(lanes[0], pend0);
	CHECK_EQ(lanes[1], pend1);
	CHECK_EQ(knitk_producer_claims(r.p[0], lanes, 2), 0);
	CHECK_EQ(knitk_producer_claims(r.p[0], lanes, 3), -EINVAL);
	CHECK_EQ(knitk_producer_reset_claimant(r.p[0], 0), -EBUSY);	/* live */
	/* Worker 0 dies holding the three arena slots. */
	CHECK_EQ(knitk_endpoint_mark_dead(r.host, 0), 0);
	CHECK_EQ(knitk_producer_reset_claimant(r.p[0], 0), 3);
	CHECK_EQ(knitk_lane_ack(c1, pend1), 0);
	/* Every lane worker 0 or 1 took is free, and the arena is too. */
	REQUIRE(knitk_producer_send(r.p[0], &h, big, sizeof(big)) >= 0);
	REQUIRE(knitk_producer_send(r.p[0], &h, big, sizeof(big)) >= 0);
	REQUIRE(knitk_producer_send(r.p[0], &h, big, sizeof(big)) >= 0);
	for (i = 3; i < 32; i++)
		REQUIRE(knitk_producer_send(r.p[0], &h, NULL, 0) >= 0);
	CHECK_EQ(knitk_producer_send(r.p[0], &h, NULL, 0), -EAGAIN);
	knitk_consumer_destroy(c1);
	knitk_consumer_destroy(c0);
	rig_fini(&r);
}

/*
 * T10, T11: a claimant takes an arena call, answers it (its slot freed)
 * and the producer gives the slot to a newer call before it learns of the
 * claim; then the claimant dies.  The slot's new life is not the dead
 * claimant's: its stand-in frees nothing, and the newer call's bytes stay
 * its own while the arena fills again.
 */
static void claim_reported_after_reuse(void)
{
	static unsigned char a[20000], b[20000], c[20000];
	struct knitk_lane_header h = { 0 };
	struct knitk_msg m = { .size = sizeof(m) };
	struct knitk_consumer *c0, *c1;
	struct rig r;
	uint64_t pend, lanes[2];
	int lane;

	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	memset(c, 'c', sizeof(c));
	REQUIRE(rig_init(&r, 2, 1, 16) == 0);
	CHECK_EQ(knitk_producer_track_claims(r.p[0]), 0);
	c0 = claimant(&r, 0);
	c1 = claimant(&r, 1);
	REQUIRE(c0 && c1);
	h.task_id = 1;
	REQUIRE(knitk_producer_send(r.p[0], &h, a, sizeof(a)) == 0);
	CHECK_EQ(knitk_lane_scan(c0, &pend), 1);
	CHECK_EQ(knitk_lane_ack(c0, pend), 0);		/* answered, slot freed */
	h.task_id = 2;
	REQUIRE(knitk_producer_send(r.p[0], &h, b, sizeof(b)) == 1);
	CHECK_EQ(knitk_producer_claims(r.p[0], lanes, 2), 1);
	CHECK_EQ(lanes[0], 1ULL);
	CHECK_EQ(knitk_endpoint_mark_dead(r.host, 0), 0);
	CHECK_EQ(knitk_producer_reset_claimant(r.p[0], 0), 0);
	/* The arena fills up around task 2's bytes, not over them. */
	h.task_id = 3;
	CHECK(knitk_producer_send(r.p[0], &h, c, sizeof(c)) >= 0);
	CHECK(knitk_producer_send(r.p[0], &h, c, sizeof(c)) >= 0);
	CHECK_EQ(knitk_producer_send(r.p[0], &h, c, sizeof(c)), -ENOSPC);
	CHECK_EQ(knitk_lane_scan(c1, &pend), 3);
	lane = knitk_lane_next(c1, &pend);
	CHECK_EQ(lane, 1);
	REQUIRE(lane >= 0 && knitk_lane_decode(c1, (unsigned int)lane, &m) == 0);
	CHECK_EQ(m.header.task_id, 2);
	CHECK_EQ(m.len, sizeof(b));
	CHECK(m.len == sizeof(b) && !memcmp(m.data, b, sizeof(b)));
	knitk_consumer_destroy(c1);
	knitk_consumer_destroy(c0);
	rig_fini(&r);
}

/* The hand-off's hook (T14): what a claimant does after its fence. */
static struct rig *hook_rig;
static int hook_mode;		/* 1: worker 0 announces, 2: it took lanes 28..31 */

static void hand_off_hook(struct knitk_endpoint *k, enum knot_hook point,
			  unsigned int arg)
{
	struct knitk_steal_line *l0 = line_of(hook_rig, 0, 0);

	(void)k;
	if (point != KNOT_HOOK_HAND_OFF || arg != 1)
		return;
	if (hook_mode == 1)
		atomic_store((_Atomic uint64_t *)&l0->want, 1ULL << 1);
	else if (hook_mode == 2)
		/* Claimed before the reservation: retired, want already clear. */
		atomic_fetch_xor((_Atomic uint64_t *)&l0->ack, 0xfULL << 28);
}

/*
 * T14: a producer hands the oldest region nobody claimed or reserved to
 * a worker, withdraws from a region a live claimant announced after its
 * reservation, and keeps nothing reserved that a claimant took first.
 */
static void producer_hand_off(void)
{
	_Atomic uint64_t *resv1, *want0;
	struct knitk_producer *ret = NULL;
	struct knitk_consumer *c0, *c1;
	struct rig r;
	uint64_t pend;

	REQUIRE(rig_init(&r, 2, 1, 16) == 0);
	resv1 = (_Atomic uint64_t *)&line_of(&r, 0, 1)->resv;
	want0 = (_Atomic uint64_t *)&line_of(&r, 0, 0)->want;
	CHECK_EQ(knitk_producer_hand_off(NULL, 1, 16), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 2, 16), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 1, 3), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 1, 32), -EINVAL);
	REQUIRE(knitk_producer_create(r.w[0], (unsigned int)
			knitk_endpoint_return_mailbox(r.w[0], 0), &ret) == 0);
	CHECK_EQ(knitk_producer_hand_off(ret, 1, 16), -EINVAL);
	knitk_producer_destroy(ret);
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 1, 16), 0);	/* nothing pending */
	c0 = claimant(&r, 0);
	c1 = claimant(&r, 1);
	REQUIRE(c0 && c1);

	/* The oldest region goes to worker 1; worker 0 takes the rest. */
	send_values(&r, 20);
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 1, 16), 16);
	CHECK_EQ(atomic_load(resv1), 0xffffULL);
	CHECK_EQ(knitk_lane_scan(c0, &pend), 4);
	CHECK_EQ(pend, 0xfULL << 16);
	CHECK_EQ(knitk_lane_ack(c0, pend), 0);
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 0, 16), 0);
	CHECK_EQ(knitk_lane_scan(c1, &pend), 16);
	CHECK_EQ(pend, 0xffffULL);
	CHECK_EQ(atomic_load(resv1), 0);
	CHECK_EQ(knitk_lane_ack(c1, pend), 0);

	atomic_store(&knitk__endpoint_hook, hand_off_hook);
	hook_rig = &r;
	/* Lanes 20..27: worker 0 announces region 1 meanwhile: withdraw. */
	send_values(&r, 8);
	hook_mode = 1;
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 1, 16), 0);
	CHECK_EQ(atomic_load(resv1), 0);
	atomic_store(want0, 0);
	hook_mode = 0;
	CHECK_EQ(knitk_lane_scan(c0, &pend), 8);
	CHECK_EQ(knitk_lane_ack(c0, pend), 0);
	knitk_consumer_destroy(c0);
	/*
	 * Lanes 28..35: worker 0 retired 28..31 (region 1) before the
	 * reservation was seen; they are not handed over nor left reserved.
	 */
	send_values(&r, 8);
	hook_mode = 2;
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 1, 16), 0);
	CHECK_EQ(atomic_load(resv1), 0);
	atomic_store(&knitk__endpoint_hook, NULL);
	hook_mode = 0;
	/* Region 2 (32..35) is still there for a hand-off. */
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 1, 16), 4);
	CHECK_EQ(atomic_load(resv1), 0xfULL << 32);
	CHECK_EQ(knitk_lane_scan(c1, &pend), 4);
	CHECK_EQ(knitk_lane_ack(c1, pend), 0);
	knitk_consumer_destroy(c1);
	rig_fini(&r);
}

/*
 * The hook of a producer's hand-off between its choice of lanes and its
 * reservation (T14): worker 0 hands the same region on to worker 2, as
 * a worker whose claim ends the search does (T12).
 */
static struct knitk_consumer *chosen_c0;
static int chosen_handed = -1;

static void hand_off_chosen_hook(struct knitk_endpoint *k, enum knot_hook point,
				 unsigned int arg)
{
	(void)k;
	if (point == KNOT_HOOK_HAND_OFF_CHOSEN && arg == 1)
		chosen_handed = knitk_steal_hand_off(chosen_c0, 2);
}

/*
 * T13, T14: a claimant hands a region to worker 2 after a producer chose
 * the same lanes for worker 1 and before the producer reserves them.  The
 * claimant's want is clear again when the producer looks, and the lanes
 * are still pending: only the reservations tell.  The producer hands over
 * nothing; a lane reserved for both workers would be taken by neither
 * (each leaves it to the other, T13), and a call in it would never run.
 */
static void hand_off_after_a_hand_off(void)
{
	_Atomic uint64_t *resv1, *resv2;
	struct knitk_consumer *c0, *c1, *c2;
	struct rig r;
	uint64_t pend;

	REQUIRE(rig_init(&r, 3, 1, 16) == 0);
	resv1 = (_Atomic uint64_t *)&line_of(&r, 0, 1)->resv;
	resv2 = (_Atomic uint64_t *)&line_of(&r, 0, 2)->resv;
	c0 = claimant(&r, 0);
	c1 = claimant(&r, 1);
	c2 = claimant(&r, 2);
	REQUIRE(c0 && c1 && c2);
	send_values(&r, 16);		/* region 0 */
	chosen_c0 = c0;
	atomic_store(&knitk__endpoint_hook, hand_off_chosen_hook);
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 1, 16), 0);
	atomic_store(&knitk__endpoint_hook, NULL);
	CHECK_EQ(chosen_handed, 16);
	CHECK_EQ(atomic_load(resv2), 0xffffULL);
	CHECK_EQ(atomic_load(resv1), 0);
	/* Worker 2's lanes: worker 1 finds nothing, worker 2 all of them. */
	CHECK_EQ(knitk_lane_scan(c1, &pend), 0);
	CHECK_EQ(knitk_lane_scan(c2, &pend), 16);
	CHECK_EQ(pend, 0xffffULL);
	CHECK_EQ(knitk_lane_ack(c2, pend), 0);
	CHECK_EQ(atomic_load(resv2), 0);
	knitk_consumer_destroy(c2);
	knitk_consumer_destroy(c1);
	knitk_consumer_destroy(c0);
	rig_fini(&r);
}

/*
 * The hooks of a producer's hand-off to worker 1 that loses its region:
 * worker 0 hands the region to worker 2 after the producer chose it, and
 * the producer's reservation, its announce, then stands beside worker
 * 2's until the producer drops it.  Meanwhile worker 2, parked, re-checks
 * its mailboxes and is rung for its lanes.
 */
static struct rig *overlap_rig;
static struct knitk_consumer *overlap_c0;
static int overlap_handed = -1, overlap_recheck = 1, overlap_rung = -1;
static uint64_t overlap_resv1;

static void overlap_hook(struct knitk_endpoint *k, enum knot_hook point,
			 unsigned int arg)
{
	struct rig *r = overlap_rig;
	uint32_t seq;

	(void)k;
	if (arg != 1)
		return;
	if (point == KNOT_HOOK_HAND_OFF_CHOSEN) {
		overlap_handed = knitk_steal_hand_off(overlap_c0, 2);
		return;
	}
	if (point != KNOT_HOOK_HAND_OFF)
		return;
	overlap_resv1 = atomic_load((_Atomic uint64_t *)&line_of(r, 0, 1)->resv);
	/*
	 * Worker 2's park: its re-check must find its lanes (a deadline
	 * that has passed: 0 when it found work, else -ETIMEDOUT).
	 */
	REQUIRE(knitk_doorbell_prepare(r->w[2], &seq) == 0);
	overlap_recheck = knitk_doorbell_wait(r->w[2], seq, 1);
	/* Asleep: worker 0's ring of it must get through (1 woken). */
	REQUIRE(knitk_doorbell_prepare(r->w[2], &seq) == 0);
	overlap_rung = knitk_doorbell_ring(r->w[0], 1ULL << 2);
	knitk_doorbell_cancel(r->w[2]);
}

/*
 * T13, T14: lanes reserved for worker 2 are worker 2's work, also while a
 * producer's hand-off that chose them before worker 2's reservation holds
 * its own reservation of them, between its announce and its drop.  The
 * doorbell re-check and the notify filter of worker 2 count them: a
 * filter that left out every lane reserved for another worker suppressed
 * the ring of worker 2 ("idle") and let it sleep, and nobody else rang it
 * (pool_steal_churn_test: a parked worker, its idle bit clear, its lanes
 * reserved, no ring under way).
 */
static void ring_during_a_dropped_hand_off(void)
{
	_Atomic uint64_t *resv1, *resv2;
	struct knitk_consumer *c0, *c2;
	struct rig r;
	uint64_t pend;

	REQUIRE(rig_init(&r, 3, 1, 16) == 0);
	resv1 = (_Atomic uint64_t *)&line_of(&r, 0, 1)->resv;
	resv2 = (_Atomic uint64_t *)&line_of(&r, 0, 2)->resv;
	c0 = claimant(&r, 0);
	c2 = claimant(&r, 2);
	REQUIRE(c0 && c2);
	send_values(&r, 16);		/* region 0 */
	overlap_rig = &r;
	overlap_c0 = c0;
	atomic_store(&knitk__endpoint_hook, overlap_hook);
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 1, 16), 0);
	atomic_store(&knitk__endpoint_hook, NULL);
	CHECK_EQ(overlap_handed, 16);
	/* The window was there: both reservations at once. */
	CHECK_EQ(overlap_resv1, 0xffffULL);
	CHECK_EQ(overlap_recheck, 0);
	CHECK_EQ(overlap_rung, 1);
	CHECK_EQ(atomic_load(resv1), 0);
	CHECK_EQ(atomic_load(resv2), 0xffffULL);
	CHECK_EQ(knitk_lane_scan(c2, &pend), 16);
	CHECK_EQ(knitk_lane_ack(c2, pend), 0);
	CHECK_EQ(atomic_load(resv2), 0);
	knitk_consumer_destroy(c2);
	knitk_consumer_destroy(c0);
	rig_fini(&r);
}

/*
 * T1: a claimant and a hand-off take the knot's region size, asked for by
 * 0 or by itself; any other size, legal for the workers or not, is
 * -EINVAL and changes nothing of the worker's steal line.
 */
static void region_size_of_the_knot(void)
{
	struct knitk_lane_header h = { 0 };
	struct knitk_consumer *c0, *c1 = NULL;
	_Atomic uint64_t *resv1;
	struct rig r;
	uint64_t pend;

	REQUIRE(rig_init(&r, 2, 1, 8) == 0);	/* 16 would be the default */
	resv1 = (_Atomic uint64_t *)&line_of(&r, 0, 1)->resv;
	REQUIRE(knitk_producer_send_to(r.p[0], 1, &h, NULL, 0) == 0);
	CHECK_EQ(atomic_load(resv1), 1);
	CHECK_EQ(knitk_steal_consumer_create(r.w[1], 0, 16, &c1), -EINVAL);
	CHECK_EQ(knitk_steal_consumer_create(r.w[1], 0, 4, &c1), -EINVAL);
	CHECK(!c1);
	CHECK_EQ(atomic_load(resv1), 1);	/* not taken over */
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 0, 16), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 0, 4), -EINVAL);
	CHECK_EQ(atomic_load(resv1), 1);

	/* Lanes 0..19; worker 1's claimant takes over its line (resv). */
	CHECK_EQ(knitk_steal_consumer_create(r.w[1], 0, 0, &c1), 0);
	CHECK_EQ(atomic_load(resv1), 0);
	send_values(&r, 19);
	REQUIRE((c0 = claimant(&r, 0)) != NULL);
	CHECK_EQ(knitk_lane_scan(c0, &pend), 8);	/* one region of 8 */
	CHECK_EQ(pend, 0xffULL);
	CHECK_EQ(knitk_lane_ack(c0, pend), 0);
	CHECK_EQ(knitk_producer_hand_off(r.p[0], 1, 0), 8);
	CHECK_EQ(atomic_load(resv1), 0xffULL << 8);
	CHECK_EQ(knitk_lane_scan(c1, &pend), 8);
	CHECK_EQ(knitk_lane_ack(c1, pend), 0);
	knitk_consumer_destroy(c0);
	knitk_consumer_destroy(c1);
	rig_fini(&r);
}

/*
 * T13 for a lane filled in place: knitk_lane_publish_to reserves claimed
 * @lane for its claimant before the publish, as knitk_producer_send_to
 * does, so the other claimant leaves it; the bytes written in place
 * arrive; a refused publish reserves and publishes nothing.
 */
static void publish_to_reserves_claimed_lane(void)
{
	struct knitk_msg m = { .size = sizeof(m) };
	struct knitk_consumer *c0, *c1;
	struct knitk_lane_header *hp;
	_Atomic uint64_t *resv1;
	unsigned char *b;
	struct rig r;
	uint64_t pend, id = 7;
	size_t i;
	void *buf;
	int lane;

	REQUIRE(rig_init(&r, 2, 1, 16) == 0);
	c0 = claimant(&r, 0);
	c1 = claimant(&r, 1);
	REQUIRE(c0 && c1);
	resv1 = (_Atomic uint64_t *)&line_of(&r, 0, 1)->resv;
	lane = knitk_lane_claim(r.p[0]);
	REQUIRE(lane >= 0 && lane < 63);
	/* Arena bytes (msg_len(7) is past the inline size), written in place. */
	REQUIRE(knitk_lane_reserve(r.p[0], (unsigned int)lane, msg_len(id), &buf) == 0);
	for (b = buf, i = 0; i < msg_len(id); i++)
		b[i] = msg_byte(id, i);
	REQUIRE(knitk_lane_header(r.p[0], (unsigned int)lane, &hp) == 0);
	hp->task_id = id;
	hp->function_id = (uint32_t)id;

	CHECK_EQ(knitk_lane_publish_to(NULL, (unsigned int)lane, 1), -EINVAL);
	CHECK_EQ(knitk_lane_publish_to(r.p[0], (unsigned int)lane, 2), -EINVAL);
	CHECK_EQ(knitk_lane_publish_to(r.p[0], KNITK_LANES, 1), -EINVAL);
	CHECK_EQ(knitk_lane_publish_to(r.p[0], (unsigned int)lane + 1, 1), -EPERM);
	CHECK_EQ(atomic_load(resv1), 0);
	CHECK_EQ(knitk_mailbox_pending(r.host, 0, &pend), 0);

	CHECK_EQ(knitk_lane_publish_to(r.p[0], (unsigned int)lane, 1), 0);
	CHECK_EQ(atomic_load(resv1), 1ULL << lane);
	CHECK_EQ(knitk_lane_publish_to(r.p[0], (unsigned int)lane, 1), -EPERM);
	/* Worker 0 leaves it to worker 1, which finds its bytes. */
	CHECK_EQ(knitk_lane_scan(c0, &pend), 0);
	CHECK_EQ(knitk_lane_scan(c1, &pend), 1);
	CHECK_EQ(pend, 1ULL << lane);
	CHECK_EQ(knitk_lane_decode(c1, (unsigned int)lane, &m), 0);
	CHECK(check_msg(&m));
	CHECK_EQ(m.header.kind, KNITK_PAYLOAD_ARENA);
	CHECK_EQ(knitk_lane_ack(c1, pend), 0);
	CHECK_EQ(atomic_load(resv1), 0);
	CHECK_EQ(knitk_mailbox_pending(r.host, 0, &pend), 0);
	knitk_consumer_destroy(c0);
	knitk_consumer_destroy(c1);
	rig_fini(&r);
}

static void bad_arguments(void)
{
	struct knitk_geometry geom = {
		.nr_workers = 2, .nr_submitters = 1, .lanes = KNITK_LANES,
	};
	struct knitk_lane_header h = { 0 };
	struct knitk_consumer *c = NULL;
	struct knitk_producer *p;
	struct knitk_endpoint *k;
	struct rig r;
	uint64_t pend;

	REQUIRE(rig_init(&r, 4, 1, 8) == 0);
	CHECK_EQ(knitk_steal_consumer_create(r.w[0], 0, 16, &c), -EINVAL);
	CHECK_EQ(knitk_steal_consumer_create(r.w[0], 0, 3, &c), -EINVAL);
	CHECK_EQ(knitk_steal_consumer_create(r.host, 0, 8, &c), -EINVAL);
	CHECK_EQ(knitk_steal_consumer_create(r.w[0], 1, 8, &c), -EOPNOTSUPP);
	CHECK(!c);
	CHECK_EQ(knitk_consumer_create(r.w[0], 0, &c), -EOPNOTSUPP);
	REQUIRE(knitk_consumer_create(r.w[0], 1, &c) == 0);
	CHECK_EQ(knitk_steal_hand_off(c, 1), -EINVAL);
	knitk_consumer_destroy(c);
	rig_fini(&r);
	REQUIRE(knitk_endpoint_create(&geom, KNITK_KNOT_FUTEX, &k) == 0);
	CHECK_EQ(knitk_steal_consumer_create(k, 0, 8, &c), -EOPNOTSUPP);
	/* knitk_steal(3): the lane calls of a mailbox that does not steal. */
	REQUIRE(knitk_endpoint_join(k, KNITK_ROLE_HOST, 0) >= 0);
	REQUIRE(knitk_producer_create(k, 0, &p) == 0);
	CHECK_EQ(knitk_producer_track_claims(p), -EOPNOTSUPP);
	CHECK_EQ(knitk_producer_send_to(p, 1, &h, NULL, 0), -EINVAL);
	REQUIRE(knitk_lane_claim(p) == 0);
	CHECK_EQ(knitk_lane_publish_to(p, 0, 1), -EINVAL);
	CHECK_EQ(knitk_mailbox_pending(k, 0, &pend), 0);
	CHECK_EQ(knitk_producer_hand_off(p, 1, 0), -EINVAL);
	CHECK_EQ(knitk_producer_reset_claimant(p, 1), -EINVAL);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(k);
}

int main(int argc, char **argv)
{
	const char *env = getenv("KNITK_STEAL_N");

	if (argc > 1)
		steal_n = strtoul(argv[1], NULL, 10);
	else if (env)
		steal_n = strtoul(env, NULL, 10);
	TEST(regions);
	TEST(bad_arguments);
	TEST(age_order);
	TEST(dead_senior_stops_counting);
	TEST(dead_junior_and_respawn);
	TEST(claims_reported_and_reset);
	TEST(claim_reported_after_reuse);
	TEST(producer_hand_off);
	TEST(hand_off_after_a_hand_off);
	TEST(ring_during_a_dropped_hand_off);
	TEST(region_size_of_the_knot);
	TEST(publish_to_reserves_claimed_lane);
	TEST(exactly_once_every_g);
	return tap_exit();
}
