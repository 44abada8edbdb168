// SPDX-License-Identifier: GPL-2.0
/*
 * Shutdown and destroy raced and repeated: 8 threads submit, abort and
 * wait while the pool is shut down (drain and cancel, thread and process
 * workers): every accepted call completes once, with its result, or
 * -ECANCELED when aborted or cancelled, and none is accepted after the
 * shutdown returned; pools made, used and destroyed over and over, by 6
 * threads at once and with crashed workers, leave no fd or child behind.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "knitk_pool.h"
#include "proc_count.h"
#include "tap.h"
#include "hostile_tasks.h"

#define SUBMITTERS	8
#define WIN		8

struct sd {
	struct knitk_pool *pool;
	unsigned int mode;
	atomic_int stopped;		/* shutdown has returned */
	atomic_ulong submitted, bad, late, aborted;
};

/*
 * Windows of 8 calls (every fourth a 1 ms sleep), a fifth of them aborted,
 * each checked once complete, until a submit is refused -ESHUTDOWN.
 */
static void *sd_thread(void *arg)
{
	struct sd *s = arg;
	struct knitk_call *c[WIN];
	uint64_t x[WIN], seed = (uintptr_t)c;
	unsigned int i, n;

	for (;;) {
		int ret = 0;
		int abort_ok[WIN] = { 0 };

		for (n = 0; n < WIN; n++) {
			uint32_t ms = 1;
			int after = atomic_load(&s->stopped);

			x[n] = tap_rand(&seed);
			ret = n % 4 == 3 ?
			      knitk_pool_submit(s->pool, T_SLEEP, &ms, 4, NULL,
						&c[n]) :
			      knitk_pool_submit(s->pool, T_ECHO, &x[n], 8,
						NULL, &c[n]);
			if (ret)
				break;
			atomic_fetch_add(&s->submitted, 1);
			if (after)
				atomic_fetch_add(&s->late, 1);
		}
		for (i = 0; i < n; i++) {
			if (tap_rand(&seed) % 5 == 0) {
				int a = knitk_call_abort(c[i]);

				if (a == 0) {
					abort_ok[i] = 1;
					atomic_fetch_add(&s->aborted, 1);
				} else if (a != -EALREADY) {
					atomic_fetch_add(&s->bad, 1);
				}
			}
		}
		if (n && knitk_pool_wait_all(s->pool, c, n,
					     KNITK_WAIT_FOREVER))
			atomic_fetch_add(&s->bad, 1);
		for (i = 0; i < n; i++) {
			int st = knitk_call_status(c[i]);
			const void *d;
			size_t len;
			int okres;

			if (i % 4 == 3)
				okres = st == 1;
			else
				okres = st == 0 &&
					knitk_call_result(c[i], &d, &len) == 0 &&
					len == 8 && !memcmp(d, &x[i], 8);
			if (abort_ok[i] && st != -ECANCELED)
				atomic_fetch_add(&s->bad, 1);
			else if (!abort_ok[i] && !okres &&
				 !(s->mode == KNITK_SHUTDOWN_CANCEL &&
				   st == -ECANCELED)) {
				if (atomic_fetch_add(&s->bad, 1) < 5)
					printf("# call status %d\n", st);
			}
			knitk_call_release(c[i]);
		}
		if (ret == -ESHUTDOWN)
			return NULL;
		if (ret) {
			printf("# submit: %d\n", ret);
			atomic_fetch_add(&s->bad, 1);
			return NULL;
		}
	}
}

/* Four pools shut down in @mode while SUBMITTERS threads keep submitting. */
static void shutdown_race(unsigned int kind, unsigned int mode)
{
	struct sd s = { .mode = mode };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	pthread_t t[SUBMITTERS];
	unsigned int i;
	int round;

	for (round = 0; round < 4; round++) {
		s.pool = make_pool(kind, 3, 0);
		REQUIRE(s.pool);
		atomic_store(&s.stopped, 0);
		for (i = 0; i < SUBMITTERS; i++)
			REQUIRE(pthread_create(&t[i], NULL, sd_thread, &s) == 0);
		while (atomic_load(&s.submitted) < (round + 1) * 2000UL)
			usleep(1000);
		CHECK_EQ(knitk_pool_shutdown(s.pool, mode), 0);
		/* Every accepted call has completed. */
		CHECK_EQ(knitk_pool_stats(s.pool, &st), 0);
		CHECK_EQ(st.submitted, st.completed);
		atomic_store(&s.stopped, 1);
		CHECK_EQ(knitk_pool_shutdown(s.pool, mode), -EALREADY);
		for (i = 0; i < SUBMITTERS; i++)
			pthread_join(t[i], NULL);
		CHECK_EQ(knitk_pool_stats(s.pool, &st), 0);
		CHECK_EQ(st.submitted, st.completed);
		knitk_pool_destroy(s.pool);
	}
	printf("# %lu submitted, %lu aborted, %lu after shutdown returned\n",
	       atomic_load(&s.submitted), atomic_load(&s.aborted),
	       atomic_load(&s.late));
	CHECK_EQ(atomic_load(&s.bad), 0);
	CHECK_EQ(atomic_load(&s.late), 0);
}

static void shutdown_drain_race_threads(void)
{
	shutdown_race(KNITK_WORKER_THREADS, KNITK_SHUTDOWN_DRAIN);
}

static void shutdown_cancel_race_threads(void)
{
	shutdown_race(KNITK_WORKER_THREADS, KNITK_SHUTDOWN_CANCEL);
}

static void shutdown_drain_race_processes(void)
{
	shutdown_race(KNITK_WORKER_PROCESSES, KNITK_SHUTDOWN_DRAIN);
}

static void shutdown_cancel_race_processes(void)
{
	shutdown_race(KNITK_WORKER_PROCESSES, KNITK_SHUTDOWN_CANCEL);
}

/*
 * Pools of each kind made and destroyed five times, a process worker
 * crashed and respawned in each, a call left unreleased over the destroy.
 */
static void no_leaks_after_destroy(void)
{
	int before = count_fds(false), r;
	unsigned int kind;

	for (kind = KNITK_WORKER_THREADS; kind <= KNITK_WORKER_PROCESSES;
	     kind++) {
		for (r = 0; r < 5; r++) {
			struct knitk_pool *p = make_pool(kind, 3,
				kind == KNITK_WORKER_PROCESSES ?
				KNITK_POOL_RESPAWN : 0);
			struct knitk_call *c;
			int v = 0;

			REQUIRE(p);
			if (kind == KNITK_WORKER_PROCESSES)
				CHECK_EQ(call_int(p, T_ABORT, 0), -EOWNERDEAD);
			CHECK_EQ(call_returning(p, 7), 7);
			/* Left unreleased over destroy, released after. */
			REQUIRE(knitk_pool_submit(p, T_ECHO, &v, 4, NULL,
						  &c) == 0);
			knitk_pool_destroy(p);
			knitk_call_release(c);
		}
	}
	CHECK_EQ(count_fds(false), before);
	CHECK(no_children());
}

static void *pools_thread(void *arg)
{
	atomic_ulong *bad = arg;
	int r;

	for (r = 0; r < 10; r++) {
		struct knitk_pool *p = make_pool(KNITK_WORKER_THREADS, 2, 0);
		int i;

		if (!p) {
			atomic_fetch_add(bad, 1);
			continue;
		}
		for (i = 0; i < 50; i++)
			if (call_returning(p, i) != i)
				atomic_fetch_add(bad, 1);
		if (r % 2)
			knitk_pool_shutdown(p, KNITK_SHUTDOWN_DRAIN);
		knitk_pool_destroy(p);
	}
	return NULL;
}

/* Pools created, used and destroyed by 6 threads at once. */
static void many_pools_concurrently(void)
{
	atomic_ulong bad = 0;
	pthread_t t[6];
	unsigned int i;
	int fds = count_fds(false);

	for (i = 0; i < 6; i++)
		REQUIRE(pthread_create(&t[i], NULL, pools_thread, &bad) == 0);
	for (i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(atomic_load(&bad), 0);
	CHECK_EQ(count_fds(false), fds);
}

int main(int argc, char **argv)
{
	if (hostile_start(argc, argv))
		return 1;
	TEST(shutdown_drain_race_threads);
	TEST(shutdown_cancel_race_threads);
	TEST(shutdown_drain_race_processes);
	TEST(shutdown_cancel_race_processes);
	TEST(no_leaks_after_destroy);
	TEST(many_pools_concurrently);
	return tap_exit();
}
