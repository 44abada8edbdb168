// SPDX-License-Identifier: GPL-2.0
/*
 * Worker deaths with KNITK_POOL_RESPAWN on the futex backend (the guest's
 * pool_test runs the same on the module):
 *  - kill_storm: submitting threads under continuous load while random
 *    workers are SIGKILLed many times: every call ends once, right by
 *    content or -EOWNERDEAD from a kill of its worker, never -EPIPE; every
 *    worker serves at the end; no fd or child is left after destroy.
 *    With one worker too (kill_storm_one).
 *  - torn_ack: a worker dies between the two stores of its request
 *    acknowledgement; a call as large as the arena still goes through.
 *  - respawn_pidfds: pidfds do not accumulate over deaths.
 *  - worker_info_race: worker_info read in a loop during deaths (TSan).
 * argv[1]: calls of a throughput case; the kill counts scale with it.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>

#include "knitk.h"
#include "tap.h"
#include "pool_tasks.h"
#include "pool_kill.h"

static unsigned int nr_kills = 300;

static void storm(unsigned int workers, unsigned int kills)
{
	struct knitk_pool_opts o = { .kind = KNITK_WORKER_PROCESSES,
				     .nr_workers = workers,
				     .flags = KNITK_POOL_RESPAWN };
	struct knitk_pool_stats st;
	struct storm *s = calloc(1, sizeof(*s));
	int fds, children;

	REQUIRE(s);
	fds = count_fds(false);
	children = count_children();
	REQUIRE(knitk_pool_create(&o, &test_tasks, &s->pool) == 0);
	s->workers = o.nr_workers;
	s->threads = 3;
	s->kills = kills;
	storm_run(s);
	CHECK_EQ(s->kills, kills);
	CHECK_EQ(atomic_load(&s->bad), 0);
	CHECK_EQ(atomic_load(&s->epipe), 0);
	CHECK(atomic_load(&s->ok) > 0);
	CHECK_EQ(storm_serves_all(s->pool, s->workers, 50), 50 * s->workers);
	knitk_pool_stats(s->pool, &st);
	CHECK_EQ(st.deaths, s->kills);
	CHECK_EQ(st.respawns, s->kills);
	CHECK_EQ(st.ownerdead, atomic_load(&s->dead));
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(s->pool);
	CHECK_EQ(count_fds(false), fds);
	CHECK_EQ(count_children(), children);
	free(s);
}

static void kill_storm(void)
{
	storm(3, nr_kills);
}

/* One worker: every death leaves the pool without a live worker a while. */
static void kill_storm_one(void)
{
	storm(1, nr_kills / 3);
}

static void torn_ack(void)
{
	CHECK_EQ(torn_ack_run(0), 0);
}

static void respawn_pidfds(void)
{
	struct knitk_pool_opts o = { .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
				     .flags = KNITK_POOL_RESPAWN };
	struct knitk_worker_info wi;
	struct knitk_pool *pool;
	int before = count_fds(true), with_pool;
	unsigned int i, n = nr_kills / 10 + 5;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	with_pool = count_fds(true);
	for (i = 1; i <= n; i++) {
		knitk_pool_worker_info(pool, i % 2, &wi);
		kill(wi.pid, SIGKILL);
		wait_deaths(pool, i, i);
	}
	CHECK_EQ(mix_calls_good(pool, 100, NULL, 1, 1), 100);
	printf("# pidfds: %d before the pool, %d with it, %d after %u deaths\n",
	       before, with_pool, count_fds(true), n);
	CHECK_EQ(count_fds(true), with_pool);
	knitk_pool_destroy(pool);
	CHECK_EQ(count_fds(true), before);
}

struct info_reader {
	struct knitk_pool *pool;
	_Atomic int stop;
	unsigned long reads;
};

static void *info_reader(void *arg)
{
	struct info_reader *r = arg;
	struct knitk_worker_info wi;

	while (!atomic_load(&r->stop)) {
		knitk_pool_worker_info(r->pool, r->reads++ % 2, &wi);
		sched_yield();
	}
	return NULL;
}

static void worker_info_race(void)
{
	struct knitk_pool_opts o = { .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
				     .flags = KNITK_POOL_RESPAWN };
	struct info_reader r = { 0 };
	struct knitk_worker_info wi;
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
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	if (argc > 1) {
		unsigned long n = strtoul(argv[1], NULL, 0) / 400;

		nr_kills = n < 10 ? 10 : n > 300 ? 300 : (unsigned int)n;
	}
	TEST(kill_storm);
	TEST(kill_storm_one);
	TEST(torn_ack);
	TEST(respawn_pidfds);
	TEST(worker_info_race);
	return tap_exit();
}
