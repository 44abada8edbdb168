// SPDX-License-Identifier: GPL-2.0
/*
 * Idle cost: 8 workers, calls to one of them; the other 7 get no wake at
 * all.  Counters: the module's per-doorbell STATS with /dev/knitk, else
 * the library's wake counters of each thread worker's endpoint.
 * argv[1]: number of calls.
 */
#include <sched.h>
#include <stdio.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"

#define WORKERS	8
#define TARGET	3

static unsigned long nr_calls = 20000;

static void idle_lanes(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = WORKERS, .spin = 1 };
	struct knitk_call_opts co = { .size = sizeof(co),
				      .flags = KNITK_CALL_WORKER, .worker = TARGET };
	struct knitk_worker_info before[WORKERS], after[WORKERS];
	struct knitk_wake_stats hs = { .size = sizeof(hs) };
	struct knitk_endpoint *knot;
	struct knitk_pool *pool;
	unsigned long i, good = 0;
	unsigned int w;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	for (w = 0; w < WORKERS; w++) {
		before[w].size = sizeof(before[w]);
		REQUIRE(knitk_pool_worker_info(pool, w, &before[w]) == 0 &&
			before[w].db_valid);
	}
	for (i = 0; i < nr_calls; i++) {
		uint64_t x = i, y = 0;
		size_t len;

		/* Sync calls with pauses: the target parks between them. */
		if (knitk_pool_call(pool, T_MIX, &x, 8, &co, &y, 8, &len) == 0 &&
		    y == mix64(x))
			good++;
		if (i % 16 == 0)
			sched_yield();
	}
	CHECK_EQ(good, nr_calls);
	for (w = 0; w < WORKERS; w++) {
		after[w].size = sizeof(after[w]);
		REQUIRE(knitk_pool_worker_info(pool, w, &after[w]) == 0);
	}
	knitk_pool_endpoint(pool, &knot);
	knitk_endpoint_wake_stats(knot, &hs);
	for (w = 0; w < WORKERS; w++) {
		printf("# worker %u: calls %llu waits %llu wakes %llu spurious %llu"
		       " suppressed idle %llu awake %llu\n", w,
		       (unsigned long long)after[w].calls,
		       (unsigned long long)after[w].db.waits,
		       (unsigned long long)after[w].db.wakes,
		       (unsigned long long)after[w].db.spurious,
		       (unsigned long long)after[w].db.suppressed_idle,
		       (unsigned long long)after[w].db.suppressed_awake);
		if (w == TARGET) {
			CHECK_EQ(after[w].calls, nr_calls);
			continue;
		}
		CHECK_EQ(after[w].calls, 0);
		CHECK_EQ(after[w].db.wakes - before[w].db.wakes, 0);
		CHECK_EQ(after[w].db.spurious - before[w].db.spurious, 0);
		/* Parked once (at most) at start, and never again. */
		CHECK(after[w].db.waits - before[w].db.waits <= 1);
	}
	printf("# host rings: sent %llu, suppressed (awake) %llu\n",
	       (unsigned long long)hs.sent, (unsigned long long)hs.suppressed_awake);
	CHECK(after[TARGET].db.wakes >= 1);
	knitk_pool_destroy(pool);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	if (argc > 1)
		nr_calls = strtoul(argv[1], NULL, 0);
	if (nr_calls > 20000)
		nr_calls = 20000;
	TEST(idle_lanes);
	return tap_exit();
}
