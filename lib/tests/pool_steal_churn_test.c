// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Churn of small stealing pools (docs/protocol.md T12-T14, the pools of
 * pool_churn.h): many short lived pools, one after another, plainly,
 * pinned to one CPU with a spinning thread (CPU pressure widens every
 * window), and with a process worker stopped and continued now and then
 * (T14).  A hang prints the pool's state and fails the run at once.
 *
 * argv[1] (tests/run.sh): calls of the throughput cases; below 100000
 * (the sanitizer builds) the churn is smaller.  KNITK_CHURN_POOLS sets
 * the pools of the plain case, a quarter of it in the others (make stress).
 * KNITK_CHURN_WIDEN=1 yields inside every producer's hand-off, between
 * its choice and its reservation and between its reservation and its
 * look at the claimants (knot_hooks.h): windows of T14 made wider.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "pool_tasks.h"
/* A hang prints the library's trace (a test build, lib/trace.h). */
#define KNITK_CHURN_TRACE
#include "pool_churn.h"
#include "tap.h"
#include "../core/knot_hooks.h"

static unsigned long nr_calls = 1000000;

static void widen_hook(struct knitk_endpoint *k, enum knot_hook point,
		       unsigned int arg)
{
	(void)k;
	(void)arg;
	if (point == KNOT_HOOK_HAND_OFF_CHOSEN || point == KNOT_HOOK_HAND_OFF)
		sched_yield();
}
static unsigned int nr_pools;

/* Burn the CPU the pool runs on (the churn's CPU pressure). */
static _Atomic int hog_stop;

static void *hog_main(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&hog_stop, memory_order_relaxed))
		;
	return NULL;
}

static void churn(enum churn_mode mode, unsigned int pools, uint64_t seed0)
{
	uint64_t seed = seed0, t0 = tap_now_ns();
	pthread_t hog[2];
	unsigned int i, hogs = 0;
	struct churn_tally t = { 0 };
	cpu_set_t all, one;

	REQUIRE(runtab_open() == 0);
	if (mode == CHURN_HOG) {
		/* One CPU for us, our workers (they inherit it) and a hog. */
		REQUIRE(sched_getaffinity(0, sizeof(all), &all) == 0);
		CPU_ZERO(&one);
		for (i = 0; i < CPU_SETSIZE && !CPU_ISSET(i, &all); i++)
			;
		CPU_SET(i, &one);
		REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
		atomic_store(&hog_stop, 0);
		for (; hogs < 1; hogs++)
			if (pthread_create(&hog[hogs], NULL, hog_main, NULL))
				break;
	}
	for (i = 0; i < pools && !atomic_load(&hung); i++)
		if (!churn_one(&seed, mode, 0, &t))
			tap_case_failed = 1;
	if (mode == CHURN_HOG) {
		atomic_store(&hog_stop, 1);
		while (hogs)
			pthread_join(hog[--hogs], NULL);
		sched_setaffinity(0, sizeof(all), &all);
	}
	printf("# %u pools, %lu calls checked, seed %#llx, %.1f s\n", t.pools,
	       t.calls, (unsigned long long)seed0, (double)(tap_now_ns() - t0) / 1e9);
	CHECK_EQ(t.pools, pools);
	CHECK(!t.create_failed);
	CHECK_EQ(t.bad, 0);
	CHECK_EQ(t.twice, 0);
	CHECK_EQ(t.failed, 0);
	CHECK_EQ(t.lost, 0);
	if (atomic_load(&hung)) {
		/* A hung pool cannot be destroyed: report and leave. */
		printf("not ok - churn hang\n");
		fflush(stdout);
		_exit(1);
	}
}

static uint64_t churn_seed(unsigned int k)
{
	const char *v = getenv("KNITK_CHURN_SEED");

	return (v ? strtoull(v, NULL, 0) : (uint64_t)tap_now_ns()) * 0x9e3779b97f4a7c15ULL + k;
}

static void churn_plain(void)
{
	churn(CHURN_PLAIN, nr_pools, churn_seed(1));
}

static void churn_cpu_pressure(void)
{
	churn(CHURN_HOG, nr_pools / 4, churn_seed(2));
}

static void churn_stopped_workers(void)
{
	churn(CHURN_STOP, nr_pools / 4, churn_seed(3));
}

int main(int argc, char **argv)
{
	const char *v;

	if (pool_test_start(argc, argv, &test_tasks, &nr_calls, ~0UL))
		return 1;
	/* Before any pool: its process workers inherit the ring. */
	v = getenv("KNITK_CHURN_WIDEN");
	if (v && atoi(v))
		atomic_store(&knitk__endpoint_hook, widen_hook);
	if (knitk__trace_open()) {
		printf("not ok - knitk__trace_open\n");
		return 1;
	}
	nr_pools = nr_calls >= 100000 ? 600 : 24;
	v = getenv("KNITK_CHURN_POOLS");
	if (v)
		nr_pools = (unsigned int)strtoul(v, NULL, 0);
	TEST(churn_plain);
	TEST(churn_cpu_pressure);
	TEST(churn_stopped_workers);
	return tap_exit();
}
