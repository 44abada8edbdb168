// SPDX-License-Identifier: GPL-2.0
/*
 * Worker deaths with KNITK_POOL_RESPAWN on the futex backend (the guest's
 * pool_test runs the same on the module):
 *  - kill_storm: submitting threads under continuous load while random
 *    workers are SIGKILLed many times, some while they hold a call: every
 *    call ends once, with its own result (derived from its id) or
 *    -EOWNERDEAD from a kill of its worker, never -EPIPE; no call runs
 *    twice (the run table); every worker serves at the end; no fd or
 *    child is left after destroy.  With one worker too (kill_storm_one),
 *    and on stealing pools (steal_kill_storm, steal_kill_storm_one).
 *  - torn_ack: a worker dies between the two stores of its request
 *    acknowledgement; a call as large as the arena still goes through.
 *  - respawn_pidfds: pidfds do not accumulate over deaths.
 *  - worker_info_race: worker_info read in a loop during deaths (TSan).
 * argv[1]: calls of a throughput case; the kill counts scale with it (at
 * most 300, make check's).  KNITK_STORM_KILLS sets them instead, up to
 * STORM_MAX_KILLS (make stress: 10000).
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "tap.h"
#include "pool_tasks.h"
#include "pool_kill.h"

static unsigned int nr_kills = 300;

static void storm(unsigned int workers, unsigned int kills, unsigned int dispatch)
{
	struct storm_report r;

	storm_pool(workers, 4, kills, 0, dispatch, &r);
	REQUIRE(r.created == 0);
	CHECK_EQ(r.kills, kills);
	CHECK_EQ(r.bad, 0);
	CHECK_EQ(r.wrong, 0);
	CHECK_EQ(r.twice, 0);
	CHECK_EQ(r.ok + r.dead, r.calls);
	CHECK_EQ(r.epipe, 0);
	CHECK(r.ok > 0);
	CHECK_EQ(r.served, 50 * workers);
	CHECK_EQ(r.st.deaths, r.kills);
	CHECK_EQ((uint32_t)(r.death_seq[1] - r.death_seq[0]), r.kills);
	CHECK_EQ(r.st.respawns, r.kills);
	CHECK_EQ(r.st.ownerdead, r.dead);
	CHECK_EQ(r.st.completed, r.st.submitted);
	CHECK_EQ(r.fds[1], r.fds[0]);
	CHECK_EQ(r.children[1], r.children[0]);
}

static void kill_storm(void)
{
	storm(3, nr_kills, KNITK_POOL_DISPATCH_PRIVATE);
}

/* One worker: every death leaves the pool without a live worker a while. */
static void kill_storm_one(void)
{
	storm(1, nr_kills / 3, KNITK_POOL_DISPATCH_PRIVATE);
}

/* Any worker may hold any call: claims, hand-offs and rescues of the dead. */
static void steal_kill_storm(void)
{
	storm(4, nr_kills, KNITK_POOL_DISPATCH_STEAL);
}

static void steal_kill_storm_one(void)
{
	storm(1, nr_kills / 3, KNITK_POOL_DISPATCH_STEAL);
}

static void torn_ack(void)
{
	CHECK_EQ(torn_ack_run(0), 0);
}

static void respawn_pidfds(void)
{
	int n[4];

	CHECK_EQ(pidfds_over_deaths(nr_kills / 10 + 5, 0, n), 0);
	CHECK_EQ(n[2], n[1]);
	CHECK_EQ(n[3], n[0]);
}

struct info_reader {
	struct knitk_pool *pool;
	_Atomic int stop;
	unsigned long reads;
};

static void *info_reader(void *arg)
{
	struct info_reader *r = arg;
	struct knitk_worker_info wi = { .size = sizeof(wi) };

	while (!atomic_load(&r->stop)) {
		knitk_pool_worker_info(r->pool, r->reads++ % 2, &wi);
		sched_yield();
	}
	return NULL;
}

static void worker_info_race(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
				     .flags = KNITK_POOL_RESPAWN };
	struct info_reader r = { 0 };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	unsigned int i, n = nr_kills / 10 + 5;
	pthread_t th;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &r.pool) == 0);
	pthread_create(&th, NULL, info_reader, &r);
	for (i = 1; i <= n; i++) {
		knitk_pool_worker_info(r.pool, i % 2, &wi);
		kill(wi.pid, SIGKILL);
		wait_deaths(r.pool, i, i);
	}
	atomic_store(&r.stop, 1);
	pthread_join(th, NULL);
	CHECK(r.reads > 0);
	CHECK_EQ(mix_calls_good(r.pool, 100, NULL, 1, 1), 100);
	knitk_pool_destroy(r.pool);
}

int main(int argc, char **argv)
{
	const char *kills = getenv("KNITK_STORM_KILLS");

	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	if (argc > 1) {
		unsigned long n = strtoul(argv[1], NULL, 0) / 400;

		nr_kills = n < 10 ? 10 : n > 300 ? 300 : (unsigned int)n;
	}
	if (kills) {
		unsigned long n = strtoul(kills, NULL, 0);

		nr_kills = n < 10 ? 10 : n > STORM_MAX_KILLS ? STORM_MAX_KILLS : (unsigned int)n;
	}
	TEST(kill_storm);
	TEST(kill_storm_one);
	TEST(steal_kill_storm);
	TEST(steal_kill_storm_one);
	TEST(torn_ack);
	TEST(respawn_pidfds);
	TEST(worker_info_race);
	return tap_exit();
}
