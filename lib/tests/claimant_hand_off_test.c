// SPDX-License-Identifier: GPL-2.0
/*
 * Hand-offs between claimants of a stealing mailbox: to an absent
 * claimant, a claimant that rescans before it is done, wake stats at odd
 * sizes, and a staged lane that is never handed off.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"
#define FIXTURES_ONE_SUBMITTER
#include "fixtures.h"

struct srig {
	struct knitk_endpoint *host, *w[2];
	struct knitk_producer *p;
	struct knitk_consumer *c[2];
};

/* A stealing knot of two workers, of which the first @joined have claimants. */
static int srig_init(struct srig *r, unsigned int joined)
{
	struct knitk_geometry g = {
		.flags = KNITK_GEOM_STEAL, .nr_workers = 2, .nr_submitters = 1,
		.lanes = KNITK_LANES, .inline_bytes = 64, .arena_bytes = 4096,
	};
	unsigned int i;
	int mb;

	memset(r, 0, sizeof(*r));
	if (knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &r->host) ||
	    knitk_endpoint_join(r->host, KNITK_ROLE_HOST, 0) < 1)
		return -1;
	mb = knitk_endpoint_request_mailbox(r->host, 0, 0);
	if (mb < 0 || knitk_producer_create(r->host, (unsigned int)mb, &r->p))
		return -1;
	for (i = 0; i < joined; i++)
		if (knitk_endpoint_attach(knitk_endpoint_fd(r->host), 0, &r->w[i]) ||
		    knitk_endpoint_join(r->w[i], KNITK_ROLE_WORKER, i) < 1 ||
		    knitk_steal_consumer_create(r->w[i], (unsigned int)mb, 0, &r->c[i]))
			return -1;
	return 0;
}

static void srig_fini(struct srig *r)
{
	unsigned int i;

	for (i = 0; i < 2; i++) {
		knitk_consumer_destroy(r->c[i]);
		knitk_endpoint_destroy(r->w[i]);
	}
	knitk_producer_destroy(r->p);
	knitk_endpoint_destroy(r->host);
}

/* Claim on @c, ack; the number of lanes it took. */
static int srig_take(struct knitk_consumer *c)
{
	uint64_t pend;
	int n = knitk_lane_scan(c, &pend);

	if (n > 0 && knitk_lane_ack(c, pend))
		return -1;
	return n;
}

/*
 * knitk_producer_hand_off for a claimant that is not live (never joined,
 * or its endpoint destroyed after the hand-off) strands nothing: the live
 * claimant takes every published lane.
 */
static void hand_off_to_absent_claimant(void)
{
	struct srig r;
	int n;

	REQUIRE(srig_init(&r, 1) == 0);
	CHECK_EQ(knitk_producer_send_batch(r.p, NULL, NULL, 0, 4), 4);
	n = knitk_producer_hand_off(r.p, 1, 0);
	CHECK(n >= 0);
	CHECK_EQ(srig_take(r.c[0]) + srig_take(r.c[0]), 4);
	srig_fini(&r);

	REQUIRE(srig_init(&r, 2) == 0);
	CHECK_EQ(knitk_producer_send_batch(r.p, NULL, NULL, 0, 4), 4);
	n = knitk_producer_hand_off(r.p, 1, 0);
	CHECK(n > 0);
	knitk_consumer_destroy(r.c[1]);
	knitk_endpoint_destroy(r.w[1]);
	r.c[1] = NULL;
	r.w[1] = NULL;
	CHECK_EQ(srig_take(r.c[0]) + srig_take(r.c[0]), 4);
	srig_fini(&r);
}

/*
 * A claimant that scans again before it has taken every lane of its
 * last claim loses none of them: lanes it neither decoded nor
 * acknowledged are still its own, and every message is decoded once.
 */
static void claimant_rescans_before_done(void)
{
	struct knitk_lane_header hs[8];
	struct knitk_msg m = { .size = sizeof(m) };
	unsigned int seen = 0, rounds = 0, i;
	uint64_t pend;
	struct srig r;
	int lane, n;

	REQUIRE(srig_init(&r, 1) == 0);
	memset(hs, 0, sizeof(hs));
	for (i = 0; i < 8; i++)
		hs[i].task_id = i;
	CHECK_EQ(knitk_producer_send_batch(r.p, hs, NULL, 0, 8), 8);
	while (seen != 0xff && rounds++ < 40) {
		n = knitk_lane_scan(r.c[0], &pend);
		REQUIRE(n >= 0);
		if (!n)
			continue;
		/* Take one lane of what the scan gave, then scan again. */
		lane = knitk_lane_next(r.c[0], &pend);
		REQUIRE(lane >= 0);
		CHECK_EQ(knitk_lane_decode(r.c[0], (unsigned int)lane, &m), 0);
		CHECK(m.header.task_id < 8);
		if (m.header.task_id < 8) {
			CHECK(!(seen & (1U << m.header.task_id)));
			seen |= 1U << m.header.task_id;
		}
		CHECK_EQ(knitk_lane_ack(r.c[0], 1ULL << lane), 0);
	}
	CHECK_EQ(seen, 0xff);
	CHECK_EQ(knitk_lane_scan(r.c[0], &pend), 0);
	srig_fini(&r);
}

/*
 * knitk_endpoint_wake_stats at sizes between and past its versions:
 * min(size, library's) bytes written and that count stored (the
 * library's own size at least ours), nothing past the count; below the first version -EINVAL,
 * above KNITK_SIZED_MAX -E2BIG, with nothing written.
 */
static void wake_stats_odd_sizes(void)
{
	static const uint32_t sizes[] = {
		KNITK_WAKE_STATS_SIZE_VER0, KNITK_WAKE_STATS_SIZE_VER0 + 1,
		KNITK_WAKE_STATS_SIZE_VER0 + 4, KNITK_WAKE_STATS_SIZE_VER1 - 1,
		KNITK_WAKE_STATS_SIZE_VER1, KNITK_WAKE_STATS_SIZE_VER1 + 3,
		KNITK_SIZED_MAX,
	};
	static unsigned char buf[KNITK_SIZED_MAX + 16] __attribute__((aligned(8)));
	struct knitk_endpoint *ep;
	struct fx f;
	unsigned int i, j;
	uint32_t sz, want;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	ep = f.k;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		memset(buf, 0xee, sizeof(buf));
		memcpy(buf, &sizes[i], 4);
		CHECK_EQ(knitk_endpoint_wake_stats(ep, (void *)buf), 0);
		memcpy(&sz, buf, 4);
		/* Past our struct, a later library (a test build) knows more. */
		want = sizes[i] < sizeof(struct knitk_wake_stats) ? sizes[i] : sz;
		CHECK(sz >= KNITK_WAKE_STATS_SIZE_VER1 || sz == sizes[i]);
		CHECK(sz <= sizes[i]);
		CHECK_EQ(sz, want);
		/* @reserved is written as zero. */
		CHECK(buf[4] == 0 && buf[5] == 0 && buf[6] == 0 && buf[7] == 0);
		for (j = want; j < sizeof(buf); j++)
			if (buf[j] != 0xee)
				break;
		CHECK_EQ(j, sizeof(buf));
	}
	for (i = 0; i < 3; i++) {
		static const uint32_t bad[] = {
			0, KNITK_WAKE_STATS_SIZE_VER0 - 1, KNITK_SIZED_MAX + 1,
		};

		memset(buf, 0xee, sizeof(buf));
		memcpy(buf, &bad[i], 4);
		CHECK_EQ(knitk_endpoint_wake_stats(ep, (void *)buf),
			 i < 2 ? -EINVAL : -E2BIG);
		memcpy(&sz, buf, 4);
		CHECK_EQ(sz, bad[i]);
		for (j = 4; j < sizeof(buf); j++)
			if (buf[j] != 0xee)
				break;
		CHECK_EQ(j, sizeof(buf));
	}
	fx_fini(&f);
}

/*
 * A lane staged on a stealing mailbox (claimed, not published) is not
 * work: knitk_producer_hand_off reserves nothing for it and no claimant
 * takes it; once published it is taken, after the lanes sent before it.
 */
static void staged_lane_is_not_handed_off(void)
{
	struct knitk_lane_header h = { .task_id = 77 };
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pend;
	struct srig r;
	int lane;

	REQUIRE(srig_init(&r, 2) == 0);
	lane = knitk_producer_stage(r.p, &h, NULL, 0);
	REQUIRE(lane >= 0);
	CHECK_EQ(knitk_producer_hand_off(r.p, 1, 0), 0);
	CHECK_EQ(knitk_lane_scan(r.c[0], &pend), 0);
	CHECK_EQ(knitk_lane_scan(r.c[1], &pend), 0);
	CHECK_EQ(knitk_lane_publish(r.p, (unsigned int)lane), 0);
	CHECK(knitk_producer_hand_off(r.p, 1, 0) >= 0);
	CHECK_EQ(knitk_lane_scan(r.c[1], &pend), 1);
	CHECK_EQ(knitk_lane_next(r.c[1], &pend), lane);
	CHECK_EQ(knitk_lane_decode(r.c[1], (unsigned int)lane, &m), 0);
	CHECK_EQ(m.header.task_id, 77);
	CHECK_EQ(knitk_lane_ack(r.c[1], 1ULL << lane), 0);
	srig_fini(&r);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(hand_off_to_absent_claimant);
	TEST(claimant_rescans_before_done);
	TEST(wake_stats_odd_sizes);
	TEST(staged_lane_is_not_handed_off);
	return tap_exit();
}
