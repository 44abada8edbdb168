// SPDX-License-Identifier: GPL-2.0
/*
 * Crash attribution: under load from 4 threads, SIGKILL one process
 * worker.  Only calls held by that worker complete with -EOWNERDEAD, every
 * other call succeeds, and afterwards argv[1] more calls succeed (no task
 * id leaks) - with and without respawn.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"

#define THREADS	4
#define WINDOW	16

static unsigned long nr_after = 100000;

struct load {
	struct knitk_pool *pool;
	_Atomic int stop;
	_Atomic int killed;		/* worker id, -1 before the kill */
	_Atomic unsigned long ok, dead, bad;
};

static void *load_thread(void *arg)
{
	struct load *l = arg;
	struct knitk_call *c[WINDOW];
	uint64_t x[WINDOW], seed = (uintptr_t)&c;
	uint32_t ms = 1;
	unsigned int i;

	while (!atomic_load(&l->stop)) {
		for (i = 0; i < WINDOW; i++) {
			x[i] = tap_rand(&seed);
			if (knitk_pool_submit(l->pool, i % 4 ? T_MIX : T_SLEEP,
					      i % 4 ? (void *)&x[i] : (void *)&ms,
					      i % 4 ? 8 : 4, NULL, &c[i])) {
				atomic_fetch_add(&l->bad, 1);
				return NULL;
			}
		}
		knitk_pool_wait_all(l->pool, c, WINDOW, KNITK_WAIT_FOREVER);
		for (i = 0; i < WINDOW; i++) {
			int st = knitk_call_status(c[i]);

			if (st == -EOWNERDEAD &&
			    knitk_call_worker(c[i]) == atomic_load(&l->killed)) {
				atomic_fetch_add(&l->dead, 1);
			} else if (i % 4 == 0 && st == 1) {
				atomic_fetch_add(&l->ok, 1);
			} else if (i % 4 && st == 0 && mix_result_ok(c[i], x[i])) {
				atomic_fetch_add(&l->ok, 1);
			} else {
				printf("# call %u on worker %d: status %d\n", i,
				       knitk_call_worker(c[i]), st);
				atomic_fetch_add(&l->bad, 1);
			}
			knitk_call_release(c[i]);
		}
	}
	return NULL;
}

static unsigned long calls_after(struct knitk_pool *pool, unsigned long n,
				 const struct knitk_call_opts *co)
{
	struct knitk_call *c[WINDOW];
	unsigned long done = 0, good = 0;
	uint64_t x[WINDOW];
	unsigned int i, k;

	while (done < n) {
		k = n - done < WINDOW ? (unsigned int)(n - done) : WINDOW;
		for (i = 0; i < k; i++) {
			x[i] = done + i;
			if (knitk_pool_submit(pool, T_MIX, &x[i], 8, co, &c[i]))
				return good;
		}
		knitk_pool_wait_all(pool, c, k, KNITK_WAIT_FOREVER);
		for (i = 0; i < k; i++) {
			good += knitk_call_status(c[i]) == 0 &&
				mix_result_ok(c[i], x[i]);
			knitk_call_release(c[i]);
		}
		done += k;
	}
	return good;
}

static void crash(bool respawn)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 3,
				     .flags = respawn ? KNITK_POOL_RESPAWN : 0 };
	struct knitk_call_opts pin = { .size = sizeof(pin),
				       .flags = KNITK_CALL_WORKER, .worker = 1 };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct load l = { 0 };
	pthread_t th[THREADS];
	struct knitk_call *c, *held;
	uint32_t long_ms = 600000;
	unsigned int i;
	pid_t victim;

	atomic_store(&l.killed, -1);
	REQUIRE(knitk_pool_create(&o, &test_tasks, &l.pool) == 0);
	for (i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, load_thread, &l);
	wait_ok_count(&l.ok, &l.bad, 2000);
	/* The load may leave worker 1 idle: make sure it holds a call. */
	REQUIRE(knitk_pool_submit(l.pool, T_SLEEP, &long_ms, 4, &pin, &held) == 0);
	REQUIRE(knitk_pool_worker_info(l.pool, 1, &wi) == 0);
	victim = wi.pid;
	printf("# killing worker 1 (pid %d) holding %u calls\n", victim, wi.inflight);
	atomic_store(&l.killed, 1);
	kill(victim, SIGKILL);
	for (;;) {
		knitk_pool_stats(l.pool, &st);
		if (st.deaths == 1 && (!respawn || st.respawns == 1))
			break;
		sched_yield();
	}
	wait_ok_count(&l.ok, &l.bad, atomic_load(&l.ok) + 2000);
	atomic_store(&l.stop, 1);
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(knitk_call_wait(held, KNITK_WAIT_FOREVER), -EOWNERDEAD);
	knitk_call_release(held);
	knitk_pool_stats(l.pool, &st);
	printf("# %lu calls ok, %lu -EOWNERDEAD, %lu bad\n", atomic_load(&l.ok),
	       atomic_load(&l.dead), atomic_load(&l.bad));
	CHECK_EQ(atomic_load(&l.bad), 0);
	CHECK_EQ(st.ownerdead, atomic_load(&l.dead) + 1);
	CHECK_EQ(st.deaths, 1);

	CHECK_EQ(calls_after(l.pool, nr_after, NULL), nr_after);
	CHECK_EQ(knitk_pool_worker_info(l.pool, 1, &wi), 0);
	if (respawn) {
		CHECK_EQ(wi.alive, 1);
		CHECK(wi.pid > 0 && wi.pid != victim);
		CHECK_EQ(calls_after(l.pool, 1000, &pin), 1000);
	} else {
		CHECK_EQ(wi.alive, 0);
		/* knitk_call(3): -EPIPE names the pinned worker gone ... */
		CHECK_EQ(knitk_pool_submit(l.pool, T_MIX, "12345678", 8, &pin, &c), -EPIPE);
		/* ... while the others still serve. */
		CHECK_EQ(calls_after(l.pool, 100, NULL), 100);
	}
	/* Nothing leaked: every entry free, every call completed once. */
	for (i = 0; i < 3; i++) {
		CHECK_EQ(knitk_pool_worker_info(l.pool, i, &wi), 0);
		CHECK_EQ(wi.inflight, 0);
	}
	knitk_pool_stats(l.pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(knitk_pool_shutdown(l.pool, KNITK_SHUTDOWN_DRAIN), 0);
	knitk_pool_destroy(l.pool);
}

static void crash_no_respawn(void)
{
	crash(false);
}

static void crash_respawn(void)
{
	crash(true);
}

/* Every worker killed, no respawn: calls fail cleanly, nothing hangs. */
static void all_dead(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 1 };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint32_t ms = 60000;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c) == 0);
	REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0);
	kill(wi.pid, SIGKILL);
	CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -EOWNERDEAD);
	knitk_call_release(c);
	do {
		knitk_pool_stats(pool, &st);
	} while (!st.deaths && (sched_yield(), 1));
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, "12345678", 8, NULL, &c), -EPIPE);
	knitk_pool_destroy(pool);
}

int main(int argc, char **argv)
{
	if (pool_test_start(argc, argv, &test_tasks, &nr_after, 100000))
		return 2;
	TEST(crash_no_respawn);
	TEST(crash_respawn);
	TEST(all_dead);
	return tap_exit();
}
