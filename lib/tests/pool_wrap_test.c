// SPDX-License-Identifier: GPL-2.0
/*
 * The 32-bit counters of a knot and a pool across their wrap, on the futex
 * backend (the guest's wrap_test runs the same on the module), started
 * near it by the test hooks (knot_hooks.h, pool_hooks.h):
 *  - joins_wrap, joins_wrap_31: a role joined and left WRAP_STEPS times
 *    across 2^32 (and across 2^31): the generation and death_seq step by
 *    one, and knitk_endpoint_join returns a generation >= 1 each time,
 *    never the previous one's.
 *  - doorbell_wrap: waits on a doorbell whose seq crosses 2^32, each
 *    ended by a kick.
 *  - task_ids_wrap, task_ids_wrap_steal: calls whose task ids' generation
 *    crosses 2^32, one at a time and in batches, right by content.
 *  - storm_wrap: the kill storm with death_seq, generations, epochs and
 *    task ids starting near their wrap.
 */
#include <stdatomic.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "tap.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "../core/knot_hooks.h"
#include "wrap.h"

static void wrap_counter_base(uint32_t base)
{
	atomic_store(&knitk__test_counter_base, base);
}

static void joins(uint32_t base)
{
	struct wrap_joins r;
	unsigned int i;

	wrap_joins_run(base, KNITK_KNOT_FUTEX, &r);
	REQUIRE(r.created == 0);
	CHECK_EQ(r.seq0, base);
	for (i = 0; i < WRAP_STEPS; i++) {
		uint32_t want = base + 1 + i;

		CHECK_EQ(r.gen[i], want);
		CHECK_EQ(r.seq[i], want);
		CHECK_EQ(r.done[i], want);
		CHECK(r.ret[i] >= 1);
		if (want >= 1 && want <= INT_MAX)
			CHECK_EQ(r.ret[i], want);
		if (i)
			CHECK(r.ret[i] != r.ret[i - 1]);
	}
}

static void joins_wrap(void)
{
	joins(WRAP_BASE);
}

static void joins_wrap_31(void)
{
	joins(WRAP_BASE_31);
}

static void doorbell_wrap(void)
{
	struct wrap_bell r;
	unsigned int i;

	wrap_bell_run(WRAP_BASE, KNITK_KNOT_FUTEX, &r);
	REQUIRE(r.created == 0);
	for (i = 0; i < WRAP_STEPS; i++) {
		CHECK_EQ(r.kick[i], 0);
		CHECK_EQ(r.seq[i], (uint32_t)(WRAP_BASE + i));
		CHECK_EQ(r.wait[i], 0);
	}
	CHECK_EQ(r.last, (uint32_t)(WRAP_BASE + WRAP_STEPS));
}

static void task_ids(unsigned int dispatch)
{
	struct wrap_calls r;

	wrap_calls_run(WRAP_BASE, dispatch, KNITK_KNOT_FUTEX, &r);
	REQUIRE(r.created == 0);
	/* The counters started where the hooks put them ... */
	CHECK_EQ(r.first, (uint32_t)(WRAP_BASE + 1));
	CHECK_EQ(r.bell0[0], WRAP_BASE);
	CHECK_EQ(r.bell0[1], WRAP_BASE);
	/* ... and every call crossing their wrap was right. */
	CHECK_EQ(r.good, WRAP_CALLS);
	CHECK_EQ(r.batch_good, WRAP_BATCHES * WRAP_WINDOW);
	/* Entry 0 took more than WRAP_STEPS / 2 calls: its generation wrapped. */
	CHECK(r.gen0 < WRAP_BASE);
	CHECK(r.bells_wrapped >= 1);
}

static void task_ids_wrap(void)
{
	task_ids(KNITK_POOL_DISPATCH_PRIVATE);
}

static void task_ids_wrap_steal(void)
{
	task_ids(KNITK_POOL_DISPATCH_STEAL);
}

static void storm_wrap(void)
{
	struct storm_report r;

	wrap_storm_run(WRAP_BASE, KNITK_KNOT_FUTEX, &r);
	REQUIRE(r.created == 0);
	CHECK_EQ(r.kills, WRAP_STEPS);
	/* Every death counted, across death_seq's wrap. */
	CHECK_EQ(r.death_seq[0], WRAP_BASE);
	CHECK_EQ(r.death_seq[1], (uint32_t)(WRAP_BASE + WRAP_STEPS));
	CHECK_EQ(r.bad, 0);
	CHECK_EQ(r.epipe, 0);
	CHECK(r.ok > 0);
	CHECK_EQ(r.served, 100);
	CHECK_EQ(r.st.deaths, r.kills);
	CHECK_EQ(r.st.respawns, r.kills);
	CHECK_EQ(r.st.ownerdead, r.dead);
	CHECK_EQ(r.st.completed, r.st.submitted);
	CHECK_EQ(r.fds[1], r.fds[0]);
	CHECK_EQ(r.children[1], r.children[0]);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	TEST(joins_wrap);
	TEST(joins_wrap_31);
	TEST(doorbell_wrap);
	TEST(task_ids_wrap);
	TEST(task_ids_wrap_steal);
	TEST(storm_wrap);
	return tap_exit();
}
