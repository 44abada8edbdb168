// SPDX-License-Identifier: GPL-2.0
/*
 * The 32-bit counters of a knot and a pool across their wrap, on the
 * module (the host's pool_wrap_test runs the same on the futex backend).
 * The module's debugfs knob knitk/counter_base (KNITK_TEST_HOOKS=y, as
 * tools/vm-check.sh builds it) starts a new knot's doorbell seqs and
 * event counts, death_seq, death_done and role generations near 2^32 (or
 * 2^31); a test build of libknitk (libknitk-hooks.a) starts a pool's task
 * ids and epochs there.  The cases of lib/tests/wrap.h:
 *  - joins_wrap, joins_wrap_31: JOIN's generation and death_seq and
 *    death_done step by one per join and leave; knitk_endpoint_join
 *    returns a generation >= 1, never the previous one's
 *  - doorbell_wrap: WAITs on a doorbell whose seq crosses 2^32, each
 *    ended by a KNITK_NOTIFY_KICK
 *  - task_ids_wrap, task_ids_wrap_steal: calls across the task ids' and
 *    the doorbells' wrap, right by content
 *  - storm_wrap: a kill storm across death_seq's, the generations' and
 *    the epochs' wrap
 * and after each, every knot freed.
 */
#include <pthread.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_pool.h"
#include "knitk_test.h"
#include "knitk_live.h"

#include "../../lib/tests/pool_tasks.h"
#include "../../lib/tests/pool_kill.h"
#include "../../lib/tests/wrap.h"

#define COUNTER_BASE	"/sys/kernel/debug/knitk/counter_base"

/* Every write of the knob so far worked (a module without it fails). */
static int base_written = 1;

static void wrap_counter_base(uint32_t base)
{
	if (knitk_sysfs_write(COUNTER_BASE, base))
		base_written = 0;
}

FIXTURE(wrap) {
	int unused;
};

FIXTURE_SETUP(wrap)
{
	KNITK_REQUIRE_DEV();
	if (access(COUNTER_BASE, F_OK))
		TH_LOG("%s absent: build the module with KNITK_TEST_HOOKS=y",
		       COUNTER_BASE);
	ASSERT_EQ(0, knitk_sysfs_write(COUNTER_BASE, 0));
}

FIXTURE_TEARDOWN(wrap)
{
	knitk_sysfs_write(COUNTER_BASE, 0);
	EXPECT_EQ(1, base_written);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

static void joins(struct __test_metadata *_metadata, uint32_t base)
{
	struct wrap_joins r;
	unsigned int i;

	wrap_joins_run(base, KNITK_KNOT_KMOD, &r);
	ASSERT_EQ(0, r.created);
	EXPECT_EQ(base, r.seq0);
	for (i = 0; i < WRAP_STEPS; i++) {
		uint32_t want = base + 1 + i;

		EXPECT_EQ(want, r.gen[i]);
		EXPECT_EQ(want, r.seq[i]);
		EXPECT_EQ(want, r.done[i]);
		EXPECT_LE(1, r.ret[i]);
		if (want >= 1 && want <= INT_MAX)
			EXPECT_EQ((int)want, r.ret[i]);
		if (i)
			EXPECT_NE(r.ret[i - 1], r.ret[i]);
	}
}

TEST_F(wrap, joins_wrap)
{
	joins(_metadata, WRAP_BASE);
}

TEST_F(wrap, joins_wrap_31)
{
	joins(_metadata, WRAP_BASE_31);
}

TEST_F(wrap, doorbell_wrap)
{
	struct wrap_bell r;
	unsigned int i;

	wrap_bell_run(WRAP_BASE, KNITK_KNOT_KMOD, &r);
	ASSERT_EQ(0, r.created);
	for (i = 0; i < WRAP_STEPS; i++) {
		EXPECT_EQ(0, r.kick[i]);
		EXPECT_EQ((uint32_t)(WRAP_BASE + i), r.seq[i]);
		EXPECT_EQ(0, r.wait[i]);
	}
	EXPECT_EQ((uint32_t)(WRAP_BASE + WRAP_STEPS), r.last);
}

static void task_ids(struct __test_metadata *_metadata, unsigned int dispatch)
{
	struct wrap_calls r;

	wrap_calls_run(WRAP_BASE, dispatch, KNITK_KNOT_KMOD, &r);
	ASSERT_EQ(0, r.created);
	/* The counters started where the hooks put them ... */
	EXPECT_EQ((uint32_t)(WRAP_BASE + 1), r.first);
	EXPECT_EQ(WRAP_BASE, r.bell0[0]);
	EXPECT_EQ(WRAP_BASE, r.bell0[1]);
	/* ... and every call crossing their wrap was right. */
	EXPECT_EQ(WRAP_CALLS, r.good);
	EXPECT_EQ(WRAP_BATCHES * WRAP_WINDOW, r.batch_good);
	EXPECT_GT(WRAP_BASE, r.gen0);
	EXPECT_LE(1, r.bells_wrapped);
}

TEST_F(wrap, task_ids_wrap)
{
	task_ids(_metadata, KNITK_POOL_DISPATCH_PRIVATE);
}

TEST_F(wrap, task_ids_wrap_steal)
{
	task_ids(_metadata, KNITK_POOL_DISPATCH_STEAL);
}

/* Slow on a debug kernel: the hang guard is raised as pool_test's storms'. */
TEST_F_TIMEOUT(wrap, storm_wrap, 3600)
{
	struct storm_report r;

	wrap_storm_run(WRAP_BASE, KNITK_KNOT_KMOD, &r);
	ASSERT_EQ(0, r.created);
	EXPECT_EQ(WRAP_STEPS, r.kills);
	EXPECT_EQ(WRAP_BASE, r.death_seq[0]);
	EXPECT_EQ((uint32_t)(WRAP_BASE + WRAP_STEPS), r.death_seq[1]);
	EXPECT_EQ(0, r.bad);
	EXPECT_EQ(0, r.epipe);
	EXPECT_LT(0, r.ok);
	EXPECT_EQ(100, r.served);
	EXPECT_EQ(r.kills, r.st.deaths);
	EXPECT_EQ(r.kills, r.st.respawns);
	EXPECT_EQ(r.dead, r.st.ownerdead);
	EXPECT_EQ(r.st.submitted, r.st.completed);
	EXPECT_EQ(r.fds[0], r.fds[1]);
	EXPECT_EQ(r.children[0], r.children[1]);
}

int main(int argc, char **argv)
{
	/* The storm's process workers are this program, re-run. */
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	return test_harness_run(argc, argv);
}
