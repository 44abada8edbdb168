// SPDX-License-Identifier: GPL-2.0
/*
 * Lanes reserved for one claimant of a stealing mailbox
 * (knitk_producer_send_to, knitk_steal_hand_off) go to that claimant
 * alone, live, dead or never joined, with the documented refusals; and a
 * staged send (knitk_producer_stage) is released or refused as documented.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"
#include "fixtures.h"

/* A stealing knot: the host, @workers claimants of request mailbox 0. */
struct rig3 {
	struct knitk_endpoint *host, *w[3];
	struct knitk_producer *p;
	struct knitk_consumer *c[3];
	unsigned int nr;
};

static int rig3_init(struct rig3 *r, unsigned int workers, unsigned int joined)
{
	struct knitk_geometry g = {
		.flags = KNITK_GEOM_STEAL, .nr_workers = workers,
		.nr_submitters = 1, .lanes = KNITK_LANES, .inline_bytes = 64,
		.arena_bytes = 4096,
	};
	unsigned int i;

	memset(r, 0, sizeof(*r));
	r->nr = joined;
	if (knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &r->host) ||
	    knitk_endpoint_join(r->host, KNITK_ROLE_HOST, 0) < 1 ||
	    knitk_producer_create(r->host, 0, &r->p))
		return -1;
	for (i = 0; i < joined; i++)
		if (knitk_endpoint_attach(knitk_endpoint_fd(r->host), 0, &r->w[i]) ||
		    knitk_endpoint_join(r->w[i], KNITK_ROLE_WORKER, i) < 1 ||
		    knitk_steal_consumer_create(r->w[i], 0, 16, &r->c[i]))
			return -1;
	return 0;
}

static void rig3_fini(struct rig3 *r)
{
	unsigned int i;

	for (i = 0; i < r->nr; i++) {
		knitk_consumer_destroy(r->c[i]);
		knitk_endpoint_destroy(r->w[i]);
	}
	knitk_producer_destroy(r->p);
	knitk_endpoint_destroy(r->host);
}

/* Claim on @c: the values of the lanes it took, acked; returns how many. */
static int take_values(struct knitk_consumer *c, uint64_t *vals, int cap)
{
	struct knitk_msg msg = { .size = sizeof(msg) };
	uint64_t pending, all;
	int lane, n = 0;

	if (knitk_lane_scan(c, &pending) < 0)
		return -1;
	all = pending;
	while ((lane = knitk_lane_next(c, &pending)) >= 0) {
		if (knitk_lane_decode(c, (unsigned int)lane, &msg))
			return -1;
		if (n < cap)
			vals[n] = msg.header.value;
		n++;
	}
	if (all && knitk_lane_ack(c, all))
		return -1;
	return n;
}

static int send_value_to(struct rig3 *r, int claimant, uint64_t v)
{
	struct knitk_lane_header h = { .value = v };

	return claimant < 0 ? knitk_producer_send(r->p, &h, NULL, 0) :
	       knitk_producer_send_to(r->p, (unsigned int)claimant, &h, NULL, 0);
}

/*
 * knitk_producer_send_to's refusals (a mailbox that does not steal, a
 * claimant beyond the knot's workers) leave nothing claimed or sent.
 */
static void send_to_refusals(void)
{
	struct knitk_geometry g = {
		.nr_workers = 2, .nr_submitters = 1, .lanes = KNITK_LANES,
	};
	struct knitk_lane_header h = { .value = 5 };
	struct knitk_endpoint *k;
	struct knitk_producer *p;
	uint64_t v[4], pending;
	struct rig3 r;
	int i;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k) == 0);
	REQUIRE(knitk_endpoint_join(k, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_producer_create(k, 0, &p) == 0);
	CHECK_EQ(knitk_producer_send_to(p, 0, &h, NULL, 0), -EINVAL);
	CHECK_EQ(knitk_mailbox_pending(k, 0, &pending), 0);
	CHECK_EQ(pending, 0);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(k);

	REQUIRE(rig3_init(&r, 2, 2) == 0);
	CHECK_EQ(knitk_producer_send_to(r.p, 2, &h, NULL, 0), -EINVAL);
	CHECK_EQ(knitk_producer_send_to(r.p, UINT32_MAX, &h, NULL, 0), -EINVAL);
	CHECK_EQ(knitk_producer_send_to(r.p, 63, &h, NULL, 0), -EINVAL);
	CHECK(knitk_producer_send_to(NULL, 0, &h, NULL, 0) < 0);
	CHECK(knitk_producer_send_to(r.p, 0, NULL, NULL, 0) < 0);
	CHECK_EQ(knitk_mailbox_pending(r.host, 0, &pending), 0);
	CHECK_EQ(pending, 0);
	/* All 64 lanes still free: nothing was left claimed. */
	for (i = 0; i < KNITK_LANES; i++)
		CHECK(send_value_to(&r, i % 2, (uint64_t)i) >= 0);
	CHECK_EQ(send_value_to(&r, 0, 99), -EAGAIN);
	CHECK_EQ(take_values(r.c[0], v, 4) + take_values(r.c[1], v, 4) > 0, 1);
	rig3_fini(&r);
}

/*
 * T13: a lane reserved for live claimant 1 is not taken by claimant 0,
 * nor counted as its work by the futex backend's ring filter; claimant 1
 * takes it.  Reservations of a claimant that is not live (never joined,
 * or dead) "stop counting at once": claimant 0 takes those.
 */
static void send_to_live_dead_unjoined(void)
{
	struct knitk_wake_stats st = { .size = sizeof(st) };
	uint64_t v[8];
	uint32_t seq;
	struct rig3 r;

	/* Live claimant 1. */
	REQUIRE(rig3_init(&r, 2, 2) == 0);
	REQUIRE(knitk_doorbell_prepare(r.w[0], &seq) == 0);
	CHECK(send_value_to(&r, 1, 11) >= 0);
	CHECK_EQ(knitk_doorbell_ring(r.host, 1ULL << 0), 0);
	CHECK_EQ(knitk_doorbell_cancel(r.w[0]), 0);
	CHECK_EQ(knitk_endpoint_wake_stats(r.host, &st), 0);
	CHECK_EQ(st.sent, 0);
	CHECK_EQ(st.suppressed_idle, 1);
	CHECK_EQ(take_values(r.c[0], v, 8), 0);
	CHECK_EQ(take_values(r.c[1], v, 8), 1);
	CHECK_EQ(v[0], 11);
	rig3_fini(&r);

	/* Claimant 1 never joined: worker 0 takes the lane. */
	REQUIRE(rig3_init(&r, 2, 1) == 0);
	CHECK(send_value_to(&r, 1, 12) >= 0);
	CHECK_EQ(take_values(r.c[0], v, 8), 1);
	CHECK_EQ(v[0], 12);
	rig3_fini(&r);

	/* Claimant 1 dead (its endpoint destroyed): the same. */
	REQUIRE(rig3_init(&r, 2, 2) == 0);
	knitk_consumer_destroy(r.c[1]);
	knitk_endpoint_destroy(r.w[1]);
	r.nr = 1;
	CHECK_EQ(knitk_endpoint_role(r.host, 1, NULL), 0);
	CHECK(send_value_to(&r, 1, 13) >= 0);
	CHECK_EQ(take_values(r.c[0], v, 8), 1);
	CHECK_EQ(v[0], 13);
	rig3_fini(&r);
}

/*
 * knitk_steal_hand_off: refusals; with two regions of unreserved work,
 * one is reserved for the peer (returned count = its lanes), which takes
 * exactly those while the hander keeps the other; with nothing left to
 * hand, 0.
 */
static void hand_off_reserves_for_peer(void)
{
	struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
	};
	struct knitk_endpoint *k, *w;
	struct knitk_consumer *pc;
	uint64_t v0[32], v1[32];
	int i, n, n0, n1, seen[32] = { 0 };
	struct rig3 r;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k) == 0);
	REQUIRE(knitk_endpoint_join(k, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(k), 0, &w) == 0);
	REQUIRE(knitk_endpoint_join(w, KNITK_ROLE_WORKER, 0) >= 1);
	REQUIRE(knitk_consumer_create(w, 0, &pc) == 0);
	CHECK_EQ(knitk_steal_hand_off(pc, 1), -EINVAL);
	knitk_consumer_destroy(pc);
	knitk_endpoint_destroy(w);
	knitk_endpoint_destroy(k);

	REQUIRE(rig3_init(&r, 3, 3) == 0);
	CHECK_EQ(knitk_steal_hand_off(r.c[0], 0), -EINVAL);
	CHECK_EQ(knitk_steal_hand_off(r.c[0], 3), -EINVAL);
	CHECK_EQ(knitk_steal_hand_off(r.c[0], 63), -EINVAL);
	CHECK(knitk_steal_hand_off(NULL, 1) < 0);
	CHECK_EQ(knitk_steal_hand_off(r.c[0], 1), 0);
	for (i = 0; i < 32; i++)
		REQUIRE(send_value_to(&r, -1, (uint64_t)i) >= 0);
	n = knitk_steal_hand_off(r.c[0], 1);
	CHECK(n > 0 && n <= 16);
	/* Worker 2 takes none of worker 1's lanes. */
	n0 = take_values(r.c[0], v0, 32);
	n1 = take_values(r.c[1], v1, 32);
	CHECK_EQ(n1, n);
	CHECK(n0 > 0);
	for (i = 0; i < n0 && i < 32; i++)
		seen[v0[i] % 32]++;
	for (i = 0; i < n1 && i < 32; i++)
		seen[v1[i] % 32]++;
	/* What is left goes to whoever claims it; nothing twice. */
	while ((n = take_values(r.c[2], v0, 32)) > 0)
		for (i = 0; i < n; i++)
			seen[v0[i] % 32]++;
	while ((n = take_values(r.c[0], v0, 32)) > 0)
		for (i = 0; i < n; i++)
			seen[v0[i] % 32]++;
	for (i = 0; i < 32; i++)
		CHECK_EQ(seen[i], 1);
	CHECK_EQ(knitk_steal_hand_off(r.c[0], 2), 0);
	rig3_fini(&r);
}

/*
 * knitk_producer_stage: refusals claim nothing; a staged lane is not
 * pending until published; knitk_lane_release gives it and its arena
 * bytes back; backpressure leaves nothing claimed; reset_consumer leaves
 * a staged lane and its arena bytes as they are.
 */
static void stage_release_and_refusals(void)
{
	struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64, .arena_bytes = 4096,
	};
	struct knitk_lane_header h = { .function_id = 7, .value = 3 };
	static unsigned char big[4096];
	struct knitk_msg msg = { .size = sizeof(msg) };
	struct knitk_endpoint *k, *w;
	struct knitk_producer *p;
	struct knitk_consumer *c;
	uint64_t pending, all = 0;
	int lane, a, b, i;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k) == 0);
	REQUIRE(knitk_endpoint_join(k, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(k), 0, &w) == 0);
	REQUIRE(knitk_endpoint_join(w, KNITK_ROLE_WORKER, 0) >= 1);
	REQUIRE(knitk_producer_create(k, 0, &p) == 0);
	REQUIRE(knitk_consumer_create(w, 0, &c) == 0);

	CHECK(knitk_producer_stage(NULL, &h, NULL, 0) < 0);
	CHECK(knitk_producer_stage(p, NULL, NULL, 0) < 0);
	CHECK(knitk_producer_stage(p, &h, NULL, 8) < 0);
	CHECK_EQ(knitk_producer_stage(p, &h, big, sizeof(big) + 1), -EMSGSIZE);

	/* The whole arena, staged, released, staged again. */
	a = knitk_producer_stage(p, &h, big, sizeof(big));
	REQUIRE(a >= 0);
	CHECK_EQ(knitk_lane_scan(c, &pending), 0);
	CHECK_EQ(knitk_producer_stage(p, &h, big, sizeof(big)), -ENOSPC);
	CHECK_EQ(knitk_producer_reset_consumer(p), 0);
	CHECK_EQ(knitk_producer_stage(p, &h, big, sizeof(big)), -ENOSPC);
	CHECK_EQ(knitk_lane_release(p, (unsigned int)a), 0);
	CHECK_EQ(knitk_lane_release(p, (unsigned int)a), -EPERM);
	b = knitk_producer_stage(p, &h, big, sizeof(big));
	CHECK(b >= 0);
	if (b >= 0)
		CHECK_EQ(knitk_lane_publish(p, (unsigned int)b), 0);
	CHECK_EQ(knitk_lane_scan(c, &pending), 1);
	lane = knitk_lane_next(c, &pending);
	CHECK(lane == b);
	CHECK_EQ(knitk_lane_decode(c, (unsigned int)lane, &msg), 0);
	CHECK_EQ(msg.len, sizeof(big));
	CHECK_EQ(msg.header.function_id, 7);
	CHECK_EQ(knitk_lane_ack(c, 1ULL << lane), 0);

	/* Every lane staged: the next is -EAGAIN and claims nothing. */
	for (i = 0; i < KNITK_LANES; i++) {
		lane = knitk_producer_stage(p, &h, NULL, 0);
		REQUIRE(lane >= 0);
		all |= 1ULL << lane;
	}
	CHECK_EQ(knitk_producer_stage(p, &h, NULL, 0), -EAGAIN);
	CHECK_EQ(knitk_lane_release(p, 5), 0);
	all &= ~(1ULL << 5);
	CHECK_EQ(knitk_producer_stage(p, &h, NULL, 0), 5);
	all |= 1ULL << 5;
	CHECK_EQ(knitk_lane_publish_batch(p, all), 0);
	CHECK_EQ(knitk_lane_scan(c, &pending), KNITK_LANES);
	CHECK_EQ(knitk_lane_ack(c, pending), 0);
	CHECK_EQ(knitk_producer_reset_consumer(p), 0);

	knitk_consumer_destroy(c);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(w);
	knitk_endpoint_destroy(k);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, false))
		return 1;
	TEST(send_to_refusals);
	TEST(send_to_live_dead_unjoined);
	TEST(hand_off_reserves_for_peer);
	TEST(stage_release_and_refusals);
	return tap_exit();
}
