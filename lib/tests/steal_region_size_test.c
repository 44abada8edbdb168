// SPDX-License-Identifier: GPL-2.0
/*
 * One region size per stealing knot: knitk_producer_hand_off's argument
 * checks, and a claimant of 1-lane regions beside claimants of the knot's
 * own region size (test build: pool_hooks.h, knot_hooks.h); and the
 * region size a stealing pool picks by default.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_parked.h"
#include "pool_tasks.h"
#include "tap.h"
#include "fixtures.h"
#include "../core/knot_hooks.h"
#include "../pool/pool_hooks.h"
#include "../pool/pool_internal.h"

static void hand_off_einval(void)
{
	struct knitk_geometry g = {
		.nr_workers = 2, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64, .arena_bytes = 4096,
	};
	struct knitk_endpoint *host;
	struct knitk_producer *p;

	/* A mailbox that does not steal. */
	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_producer_create(host, 0, &p) == 0);
	CHECK_EQ(knitk_producer_hand_off(p, 0, 16), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(NULL, 0, 16), -EINVAL);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(host);

	g.flags = KNITK_GEOM_STEAL;
	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_producer_create(host, 0, &p) == 0);
	/* The knot's size (16 for 2 workers), or 0 for it: nothing handed. */
	CHECK_EQ(knitk_producer_hand_off(p, 0, 16), 0);
	CHECK_EQ(knitk_producer_hand_off(p, 1, 0), 0);
	/* Legal for 2 workers, but not the knot's size. */
	CHECK_EQ(knitk_producer_hand_off(p, 1, 1), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(p, 1, 8), -EINVAL);
	/* Claimants beyond the knot's workers. */
	CHECK_EQ(knitk_producer_hand_off(p, 2, 16), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(p, ~0U, 16), -EINVAL);
	/* Regions: not a power of two, 64 / g < workers + 1, too big. */
	CHECK_EQ(knitk_producer_hand_off(p, 0, 3), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(p, 0, 32), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(p, 0, 64), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(p, 0, 128), -EINVAL);
	/* A published lane is handed to a claimant that never joined. */
	{
		struct knitk_lane_header h = { 0 };
		uint64_t x = 1;

		REQUIRE(knitk_producer_send(p, &h, &x, sizeof(x)) >= 0);
		CHECK_EQ(knitk_producer_hand_off(p, 1, 16), 1);
		/* Already its: not handed again, nor to another. */
		CHECK_EQ(knitk_producer_hand_off(p, 1, 16), 0);
	}
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(host);
}

#define MIXED_N		400000

struct mixed {
	struct knitk_consumer *c;
	atomic_uchar *seen;
	atomic_ulong *taken;
	atomic_int *stop;
	int err;
};

static void *mixed_claimant(void *arg)
{
	struct mixed *m = arg;
	struct knitk_msg msg = { .size = sizeof(msg) };
	uint64_t pending, all;
	int lane;

	while (!atomic_load(m->stop)) {
		if (knitk_lane_scan(m->c, &pending) < 0) {
			m->err = 1;
			break;
		}
		all = pending;
		while ((lane = knitk_lane_next(m->c, &pending)) >= 0) {
			if (knitk_lane_decode(m->c, (unsigned int)lane, &msg) ||
			    msg.header.value >= MIXED_N) {
				m->err = 1;
				continue;
			}
			atomic_fetch_add(&m->seen[msg.header.value], 1);
			atomic_fetch_add(m->taken, 1);
		}
		if (all && knitk_lane_ack(m->c, all))
			m->err = 1;
		if (!all)
			sched_yield();
	}
	return NULL;
}

/*
 * A claimant of 1-lane regions on a mailbox of 16-lane regions: want
 * words name regions, so claimants of two sizes would not see each
 * other's claims in the handshake (T4-T5) and could both take a lane.
 * The knot records its size: the second claimant's create, and a
 * hand-off of the other size, are -EINVAL, and the first claimant takes
 * every value exactly once.  (Before the knot recorded it, both were
 * created, and a few hundred of 400000 values were taken twice.)
 */
static void steal_mixed_region_sizes(void)
{
	struct knitk_geometry g = {
		.flags = KNITK_GEOM_STEAL, .nr_workers = 2,
		.nr_submitters = 1, .lanes = KNITK_LANES, .inline_bytes = 64,
		.arena_bytes = 4096, .region_lanes = 16,
	};
	static atomic_uchar seen[MIXED_N];
	struct knitk_endpoint *host, *w[2];
	struct knitk_producer *p;
	struct mixed m[2];
	pthread_t t[2];
	atomic_ulong taken = 0;
	atomic_int stop = 0;
	unsigned int i, nr = 0, once = 0, twice = 0;
	uint64_t v;
	int ret;

	for (i = 0; i < MIXED_N; i++)
		atomic_store(&seen[i], 0);
	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_producer_create(host, 0, &p) == 0);
	CHECK_EQ(knitk_producer_hand_off(p, 1, 1), -EINVAL);
	for (i = 0; i < 2; i++) {
		REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w[i]) == 0);
		REQUIRE(knitk_endpoint_join(w[i], KNITK_ROLE_WORKER, i) >= 1);
		m[nr] = (struct mixed){ .seen = seen, .taken = &taken, .stop = &stop };
		ret = knitk_steal_consumer_create(w[i], 0, i ? 1 : 16, &m[nr].c);
		CHECK_EQ(ret, i ? -EINVAL : 0);
		/* A claimant made anyway competes, as it would in a program. */
		if (!ret) {
			REQUIRE(pthread_create(&t[nr], NULL, mixed_claimant, &m[nr]) == 0);
			nr++;
		}
	}
	REQUIRE(nr >= 1);
	for (v = 0; v < MIXED_N; v++) {
		struct knitk_lane_header h = { .value = v };

		while ((ret = knitk_producer_send(p, &h, NULL, 0)) == -ENOSPC ||
		       ret == -EAGAIN)
			sched_yield();
		if (ret < 0)
			break;
	}
	CHECK_EQ(v, MIXED_N);
	while (atomic_load(&taken) < v)
		sched_yield();
	atomic_store(&stop, 1);
	for (i = 0; i < nr; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(m[i].err, 0);
	}
	for (i = 0; i < MIXED_N; i++) {
		once += atomic_load(&seen[i]) == 1;
		twice += atomic_load(&seen[i]) > 1;
	}
	printf("# %u of %u taken more than once\n", twice, MIXED_N);
	CHECK_EQ(once, MIXED_N);
	for (i = 0; i < nr; i++)
		knitk_consumer_destroy(m[i].c);
	for (i = 0; i < 2; i++)
		knitk_endpoint_destroy(w[i]);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(host);
}

/*
 * A stealing pool asked for no region size records the largest legal one
 * up to 4 in its knot (the largest: 8 lanes of 4 workers, 16 of 2, which
 * ran adjacent long calls on one worker); one asked for a size gets it.
 */
static void pool_default_region(void)
{
	static const struct { unsigned int workers, asked, want; } c[] = {
		{ 1, 0, 4 }, { 2, 0, 4 }, { 3, 0, 4 }, { 15, 0, 4 }, { 16, 0, 2 },
		{ 31, 0, 2 }, { 32, 0, 1 }, { 2, 16, 16 }, { 2, 8, 8 }, { 2, 1, 1 },
	};
	unsigned int i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct knitk_pool_opts o = { .size = sizeof(o),
					     .nr_workers = c[i].workers,
					     .dispatch = KNITK_POOL_DISPATCH_STEAL,
					     .steal_region = c[i].asked };
		struct knitk_geometry g;
		struct knitk_layout l;
		struct knitk_endpoint *ep;
		struct knitk_pool *pool;
		uint64_t x = 40 + i, y = 0;
		size_t len = 0;

		REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
		REQUIRE(knitk_pool_endpoint(pool, &ep) == 0);
		REQUIRE(knitk_endpoint_layout(ep, &l, &g) == 0);
		CHECK_EQ(g.region_lanes, c[i].want);
		CHECK_EQ(knitk_pool_call(pool, T_MIX, &x, 8, NULL, &y, 8, &len), 0);
		CHECK_EQ(y, mix64(x));
		knitk_pool_destroy(pool);
	}
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(hand_off_einval);
	TEST(steal_mixed_region_sizes);
	TEST(pool_default_region);
	return tap_exit();
}
