// SPDX-License-Identifier: GPL-2.0
/*
 * Shutdown under load from 4 threads, drain and cancel, thread and process
 * workers: every handle a submit returned completes exactly once (drain:
 * with its result; cancel: with its result or -ECANCELED), later submits
 * get -ESHUTDOWN, and destroy reaps everything.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"

#define THREADS	4
#define WINDOW	24

struct load {
	struct knitk_pool *pool;
	unsigned int mode;
	_Atomic unsigned long submitted, ok, canceled, bad, refused;
};

static void *load_thread(void *arg)
{
	struct load *l = arg;
	struct knitk_call *c[WINDOW];
	uint64_t x[WINDOW], seed = (uintptr_t)&c;
	uint32_t ms = 1;
	unsigned int i, n;

	for (;;) {
		for (n = 0; n < WINDOW; n++) {
			int ret;

			x[n] = tap_rand(&seed);
			ret = knitk_pool_submit(l->pool, n % 8 ? T_MIX : T_SLEEP,
						n % 8 ? (void *)&x[n] : (void *)&ms,
						n % 8 ? 8 : 4, NULL, &c[n]);
			if (ret == -ESHUTDOWN) {
				atomic_fetch_add(&l->refused, 1);
				break;
			}
			if (ret) {
				atomic_fetch_add(&l->bad, 1);
				break;
			}
			atomic_fetch_add(&l->submitted, 1);
		}
		if (n)
			knitk_pool_wait_all(l->pool, c, n, KNITK_WAIT_FOREVER);
		for (i = 0; i < n; i++) {
			int st = knitk_call_status(c[i]);

			if (st == -ECANCELED && l->mode == KNITK_SHUTDOWN_CANCEL)
				atomic_fetch_add(&l->canceled, 1);
			else if (i % 8 == 0 && st == 1)
				atomic_fetch_add(&l->ok, 1);
			else if (i % 8 && st == 0 && mix_result_ok(c[i], x[i]))
				atomic_fetch_add(&l->ok, 1);
			else
				atomic_fetch_add(&l->bad, 1);
			knitk_call_release(c[i]);
		}
		if (n < WINDOW)
			return NULL;
	}
}

static void shutdown_under_load(unsigned int kind, unsigned int mode)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind, .nr_workers = 2 };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct load l = { .mode = mode };
	pthread_t th[THREADS];
	unsigned int i;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &l.pool) == 0);
	for (i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, load_thread, &l);
	wait_ok_count(&l.ok, &l.bad, 3000);
	CHECK_EQ(knitk_pool_shutdown(l.pool, mode), 0);
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	knitk_pool_stats(l.pool, &st);
	printf("# %lu submitted: %lu ok, %lu canceled, %lu refused after shutdown\n",
	       atomic_load(&l.submitted), atomic_load(&l.ok),
	       atomic_load(&l.canceled), atomic_load(&l.refused));
	CHECK_EQ(atomic_load(&l.bad), 0);
	CHECK_EQ(atomic_load(&l.refused), THREADS);
	CHECK_EQ(atomic_load(&l.ok) + atomic_load(&l.canceled),
		 atomic_load(&l.submitted));
	CHECK_EQ(st.submitted, atomic_load(&l.submitted));
	CHECK_EQ(st.completed, st.submitted);
	if (mode == KNITK_SHUTDOWN_DRAIN)
		CHECK_EQ(atomic_load(&l.canceled), 0);
	knitk_pool_destroy(l.pool);
}

static void drain_threads(void)
{
	shutdown_under_load(KNITK_WORKER_THREADS, KNITK_SHUTDOWN_DRAIN);
}

static void cancel_threads(void)
{
	shutdown_under_load(KNITK_WORKER_THREADS, KNITK_SHUTDOWN_CANCEL);
}

static void drain_processes(void)
{
	shutdown_under_load(KNITK_WORKER_PROCESSES, KNITK_SHUTDOWN_DRAIN);
}

static void cancel_processes(void)
{
	shutdown_under_load(KNITK_WORKER_PROCESSES, KNITK_SHUTDOWN_CANCEL);
}

/* Ten calls of a minute each on a new pool of @o. */
static int queue_ten_sleeps(struct knitk_pool_opts *o, struct knitk_pool **pool,
			    struct knitk_call *c[10])
{
	uint32_t ms = 60000;
	unsigned int i;

	if (knitk_pool_create(o, &test_tasks, pool))
		return -1;
	for (i = 0; i < 10; i++)
		if (knitk_pool_submit(*pool, T_SLEEP, &ms, 4, NULL, &c[i]))
			return -1;
	return 0;
}

/* Cancel with calls queued behind a long one: they end -ECANCELED now. */
static void cancel_queued(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 1 };
	struct knitk_pool *pool;
	struct knitk_call *c[10];
	unsigned int i;

	REQUIRE(queue_ten_sleeps(&o, &pool, c) == 0);
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_CANCEL), 0);
	for (i = 0; i < 10; i++) {
		CHECK_EQ(knitk_call_status(c[i]), -ECANCELED);
		knitk_call_release(c[i]);
	}
	knitk_pool_destroy(pool);
}

/* Destroy without shutdown, handles outstanding: all complete. */
static void destroy_outstanding(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2 };
	struct knitk_pool *pool;
	struct knitk_call *c[10];
	unsigned int i;

	REQUIRE(queue_ten_sleeps(&o, &pool, c) == 0);
	knitk_pool_destroy(pool);
	for (i = 0; i < 10; i++) {
		CHECK_EQ(knitk_call_status(c[i]), -ECANCELED);
		knitk_call_release(c[i]);
	}
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	TEST(drain_threads);
	TEST(cancel_threads);
	TEST(drain_processes);
	TEST(cancel_processes);
	TEST(cancel_queued);
	TEST(destroy_outstanding);
	return tap_exit();
}
