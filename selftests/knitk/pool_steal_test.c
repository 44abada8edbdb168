// SPDX-License-Identifier: GPL-2.0
/*
 * The stealing pool on the module (KNITK_POOL_DISPATCH_STEAL,
 * docs/protocol.md T1-T14): process workers claim regions of the shared
 * request mailboxes, every result is checked, and the module's steal
 * filter, read from its per-doorbell STATS, delivers a notify to a
 * stealing worker only while a stealing mailbox holds pending work and
 * suppresses the rest as idle.  A worker dying holding a claim fails only
 * the calls it had claimed, and its respawned successor serves.  A worker
 * stopped while it searches holds up no call (T14).  A short churn of
 * small stealing pools loses no call (T12-T14).  Small counts: the guest
 * runs under TCG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_pool.h"
#include "knitk_pool_guest.h"
#include "../../lib/tests/pool_parked.h"
#include "../../lib/tests/pool_churn.h"

#define WORKERS	3
#define CALLS	300

static struct knitk_pool *steal_pool(unsigned int workers, unsigned int flags)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES,
		.nr_workers = workers, .nr_submitters = 2, .spin = 1,
		.knot_flags = KNITK_KNOT_KMOD, .flags = flags,
		.dispatch = KNITK_POOL_DISPATCH_STEAL,
	};
	struct knitk_pool *pool = NULL;

	return knitk_pool_create(&o, &test_tasks, &pool) ? NULL : pool;
}

static void stats_all(struct knitk_pool *pool, unsigned int n,
		      struct knitk_worker_info *wi)
{
	unsigned int w;

	for (w = 0; w < n; w++) {
		memset(&wi[w], 0, sizeof(wi[w]));
		wi[w].size = sizeof(wi[w]);
		knitk_pool_worker_info(pool, w, &wi[w]);
	}
}

TEST(steal_calls_and_filter)
{
	struct knitk_worker_info a[WORKERS], b[WORKERS];
	struct knitk_pool_stats st = { .size = sizeof(st) };
	unsigned long good = 0, calls = 0;
	struct knitk_endpoint *knot;
	struct knitk_pool *pool;
	uint64_t idle0 = 0, idle1 = 0, wakes = 0, spurious = 0;
	unsigned int w, i;

	REQUIRE_KNITK();
	pool = steal_pool(WORKERS, 0);
	ASSERT_NE(NULL, pool);
	ASSERT_EQ(0, knitk_pool_endpoint(pool, &knot));
	ASSERT_EQ(KNITK_BACKEND_KMOD, knitk_endpoint_backend(knot));

	/* Every worker is a claimant of every request mailbox. */
	for (i = 0; i < CALLS; i++) {
		uint64_t x = 7 * i + 1, y = 0;
		size_t len = 0;

		if (knitk_pool_call(pool, T_MIX, &x, 8, NULL, &y, 8, &len) == 0 &&
		    len == 8 && y == mix64(x))
			good++;
	}
	EXPECT_EQ(CALLS, good);

	/*
	 * The filter: with the workers parked and nothing pending in any
	 * stealing mailbox, a notify of every worker is suppressed as idle
	 * and wakes nobody.
	 */
	wait_workers_parked(knot, WORKERS);
	stats_all(pool, WORKERS, a);
	EXPECT_EQ(0, knitk_doorbell_ring(knot, (1ULL << WORKERS) - 1));
	stats_all(pool, WORKERS, b);
	for (w = 0; w < WORKERS; w++) {
		ASSERT_EQ(1, b[w].db_valid);
		idle0 += a[w].db.suppressed_idle;
		idle1 += b[w].db.suppressed_idle;
		EXPECT_EQ(a[w].db.wakes, b[w].db.wakes);
	}
	EXPECT_EQ(idle0 + WORKERS, idle1);

	/* A publish wakes one parked worker: the filter sees the work. */
	for (i = 0; i < 20; i++) {
		uint64_t x = i, y = 0;
		size_t len = 0;

		wait_workers_parked(knot, WORKERS);
		if (knitk_pool_call(pool, T_MIX, &x, 8, NULL, &y, 8, &len) == 0 &&
		    len == 8 && y == mix64(x))
			good++;
	}
	EXPECT_EQ(CALLS + 20, good);
	stats_all(pool, WORKERS, a);
	for (w = 0; w < WORKERS; w++) {
		wakes += a[w].db.wakes - b[w].db.wakes;
		spurious += a[w].db.spurious;
		calls += a[w].calls;
	}
	printf("# %lu calls; 20 calls to parked workers: %llu wakes; spurious in all %llu\n",
	       calls, (unsigned long long)wakes, (unsigned long long)spurious);
	/* Each of those 20 publishes found every worker parked. */
	EXPECT_EQ(20, wakes);
	/* T12, T13: a worker is woken only for work reserved for it. */
	EXPECT_EQ(0, spurious);
	EXPECT_EQ(CALLS + 20, calls);
	EXPECT_EQ(0, knitk_pool_stats(pool, &st));
	EXPECT_EQ(0, st.stale);
	knitk_pool_destroy(pool);
}

/* The kernel's peer death clears the LIVE bit; only claimed calls fail. */
TEST(steal_death_and_respawn)
{
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_call *c[16];
	struct knitk_pool *pool;
	unsigned int i, ok = 0, dead = 0;
	uint64_t x[16];
	int32_t pid = 0;
	size_t len = 0;

	REQUIRE_KNITK();
	pool = steal_pool(2, KNITK_POOL_RESPAWN);
	ASSERT_NE(NULL, pool);
	/* A worker's pid; the kernel sees it die and clears its live bit. */
	ASSERT_EQ(0, knitk_pool_call(pool, T_PID, NULL, 0, NULL, &pid, 4, &len));
	ASSERT_LT(0, pid);
	ASSERT_EQ(0, kill(pid, SIGKILL));
	for (i = 0; i < 16; i++) {
		x[i] = 100 + i;
		ASSERT_EQ(0, knitk_pool_submit(pool, T_MIX, &x[i], 8, NULL, &c[i]));
	}
	ASSERT_EQ(0, knitk_pool_wait_all(pool, c, 16, KNITK_WAIT_FOREVER));
	for (i = 0; i < 16; i++) {
		int s = knitk_call_status(c[i]);

		if (s == -EOWNERDEAD)
			dead++;
		else if (s == 0 && mix_result_ok(c[i], x[i]))
			ok++;
		knitk_call_release(c[i]);
	}
	EXPECT_EQ(16, ok + dead);
	EXPECT_EQ(300, mix_calls_good(pool, 300, NULL, 5, 3));
	/* The waits end at the death; the respawn follows it. */
	do {
		ASSERT_EQ(0, knitk_pool_stats(pool, &st));
	} while (st.respawns < 1 && (sched_yield(), 1));
	EXPECT_EQ(1, st.deaths);
	EXPECT_EQ(1, st.respawns);
	EXPECT_EQ(dead, st.ownerdead);
	EXPECT_EQ(0, st.stale);
	knitk_pool_destroy(pool);
}

/*
 * T14 on the module: a worker stopped (SIGSTOP) while it searches keeps
 * every publish from waking the parked one (T12); the thread waiting for
 * the calls hands them to it before it parks, and that wake is not
 * spurious.  Hung here before T14.
 */
TEST(steal_stopped_searcher)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES,
		.nr_workers = 2, .spin = 1U << 18, .knot_flags = KNITK_KNOT_KMOD,
		.dispatch = KNITK_POOL_DISPATCH_STEAL,
	};
	struct knitk_worker_info wi[2];
	struct knitk_call *first, *late[4];
	struct knitk_endpoint *knot;
	struct knitk_pool *pool = NULL;
	unsigned int round, i, good = 0, on1 = 0;
	uint64_t x;

	REQUIRE_KNITK();
	ASSERT_EQ(0, knitk_pool_create(&o, &test_tasks, &pool));
	ASSERT_EQ(0, knitk_pool_endpoint(pool, &knot));
	stats_all(pool, 2, wi);
	ASSERT_LT(0, wi[0].pid);
	for (round = 0; round < 2; round++) {
		/* A call to the parked pool goes to worker 0, which then searches. */
		wait_workers_parked(knot, 2);
		x = 9000 + round;
		ASSERT_EQ(0, knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &first));
		ASSERT_EQ(0, knitk_call_wait(first, KNITK_WAIT_FOREVER));
		EXPECT_EQ(0, knitk_call_worker(first));
		knitk_call_release(first);
		ASSERT_EQ(0, kill(wi[0].pid, SIGSTOP));
		while (!task_stopped(wi[0].pid, wi[0].pid))
			sched_yield();
		EXPECT_TRUE(worker_parked(knot, 1));
		for (i = 0; i < 4; i++) {
			x = round * 100 + i;
			ASSERT_EQ(0, knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &late[i]));
		}
		ASSERT_EQ(0, knitk_pool_wait_all(pool, late, 4, KNITK_WAIT_FOREVER));
		for (i = 0; i < 4; i++) {
			good += mix_result_ok(late[i], round * 100 + i);
			on1 += knitk_call_worker(late[i]) == 1;
			knitk_call_release(late[i]);
		}
		ASSERT_EQ(0, kill(wi[0].pid, SIGCONT));
	}
	EXPECT_EQ(8, good);
	EXPECT_EQ(8, on1);
	stats_all(pool, 2, wi);
	ASSERT_EQ(1, wi[1].db_valid);
	EXPECT_EQ(0, wi[0].db.spurious + wi[1].db.spurious);
	knitk_pool_destroy(pool);
}

/*
 * T12-T14 on the module: a short churn of small stealing pools
 * (lib/tests/pool_churn.h; the host's pool_steal_churn_test runs a long
 * one on the futex backend).  Every call runs once with its own result;
 * a call still in flight at its deadline prints the pool's state and
 * fails the case.  Lost here before the producer's hand-off reloaded the
 * reservations (lanes reserved for two workers).
 */
TEST(steal_churn)
{
	struct churn_tally t = { 0 };
	uint64_t seed = 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
	unsigned int i;

	REQUIRE_KNITK();
	ASSERT_EQ(0, runtab_open());
	printf("# seed %#llx\n", (unsigned long long)seed);
	for (i = 0; i < 12 && !atomic_load(&hung); i++)
		churn_one(&seed, i % 3 == 2 ? CHURN_STOP : CHURN_PLAIN,
			  KNITK_KNOT_KMOD, &t);
	/* A hung pool is left as it is: its workers go with us (P6). */
	ASSERT_EQ(0, atomic_load(&hung));
	EXPECT_EQ(12, t.pools);
	EXPECT_EQ(0, t.bad);
	EXPECT_EQ(0, t.twice);
	EXPECT_EQ(0, t.failed);
	EXPECT_EQ(0, t.lost);
	EXPECT_LT(0, t.calls);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	return test_harness_run(argc, argv);
}
