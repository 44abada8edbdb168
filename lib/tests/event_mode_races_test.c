// SPDX-License-Identifier: GPL-2.0
/*
 * Event mode under races: released handles are never reaped, the opts size
 * inside a field, aborts racing results, many threads waiting the same
 * calls, the event fd switched from many threads, a reap of zero, destroy
 * waking blocked event-mode waiters, a bad shutdown mode changing nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"
#define FIXTURES_ONE_SUBMITTER
#include "fixtures.h"

/*
 * In event mode a handle released before it is reaped is never returned
 * by knitk_pool_reap: neither one released running (aborted) nor one
 * released after it completed; the others are reaped once each.
 */
static void released_handles_never_reaped(void)
{
	struct knitk_call *c[4], *got[8];
	struct knitk_pool *pool;
	uint32_t ms = 50;
	uint64_t x = 9;
	int n, total = 0, i;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 2,
			 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c[0]) == 0);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[1]) == 0);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[2]) == 0);
	knitk_call_release(c[0]);
	/* c[1] completes, then goes unreaped: wait for it through another. */
	while (knitk_call_status(c[1]) == -EINPROGRESS ||
	       knitk_call_status(c[2]) == -EINPROGRESS) {
		n = knitk_pool_reap(pool, got, 8);
		REQUIRE(n >= 0);
		for (i = 0; i < n; i++) {
			CHECK(got[i] == c[1] || got[i] == c[2]);
			total++;
		}
		if (!n)
			sched_yield();
	}
	if (!total) {
		knitk_call_release(c[1]);
		c[1] = NULL;
	}
	usleep(100000);		/* the aborted sleep's late result */
	n = knitk_pool_reap(pool, got, 8);
	for (i = 0; i < n; i++) {
		CHECK(got[i] != c[0]);
		CHECK(c[1] || got[i] == c[2]);
	}
	total += n;
	CHECK_EQ(total, c[1] ? 2 : 1);
	if (c[1])
		knitk_call_release(c[1]);
	knitk_call_release(c[2]);
	knitk_pool_destroy(pool);
}

/*
 * An input struct whose size ends inside a field is read as
 * zero-extended: opts of 73 bytes keep only the low byte of @dispatch
 * (0x101 reads as 1, stealing), so the pool steals (pinning refused).
 */
static void opts_size_inside_a_field(void)
{
	static unsigned char raw[sizeof(struct knitk_pool_opts)];
	struct knitk_pool_opts *o = (void *)raw;
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER };
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint64_t x = 1;

	memset(raw, 0, sizeof(raw));
	o->nr_workers = 2;
	o->knot_flags = KNITK_KNOT_FUTEX;
	o->dispatch = 0x101;
	o->size = (uint32_t)offsetof(struct knitk_pool_opts, dispatch) + 1;
	REQUIRE(knitk_pool_create(o, &test_tasks, &pool) == 0);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &pin, &c), -EINVAL);
	CHECK_EQ(mix_calls_good(pool, 3, NULL, 1, 1), 3);
	knitk_pool_destroy(pool);
	o->size = sizeof(*o);
	CHECK_EQ(knitk_pool_create(o, &test_tasks, &pool), -EINVAL);
}

struct aborter {
	struct knitk_call **calls;
	unsigned int nr;
	int *ret;
	_Atomic int go;
};

static void *aborter_fn(void *arg)
{
	struct aborter *a = arg;
	unsigned int i;

	while (!atomic_load(&a->go))
		sched_yield();
	for (i = 0; i < a->nr; i += 2) {
		a->ret[i] = knitk_call_abort(a->calls[i]);
		if (i % 8 == 0)
			sched_yield();
	}
	return NULL;
}

/*
 * Aborts racing completions, in event mode: an abort that returned 0
 * left -ECANCELED, one that returned -EALREADY the call's result; every
 * call is reaped exactly once either way.
 */
static void aborts_race_results_in_event_mode(unsigned int dispatch)
{
	enum { N = 60 };	/* below what one submitter has in flight */
	static struct knitk_call *calls[N], *got[64];
	static int ret[N];
	static unsigned char seen[N];
	struct aborter a = { .calls = calls, .nr = N, .ret = ret };
	struct knitk_pool *pool;
	unsigned int i, reaped = 0, sent = 0;
	static uint64_t x[N];
	pthread_t th;
	int n, k;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 2, 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < N; i++)
		ret[i] = 1;
	/* Submit all first, then let the aborts loose. */
	while (sent < N) {
		x[sent] = sent;
		k = knitk_pool_submit(pool, T_MIX, &x[sent], 8, NULL, &calls[sent]);
		REQUIRE(k == 0);
		sent++;
	}
	REQUIRE(pthread_create(&th, NULL, aborter_fn, &a) == 0);
	atomic_store(&a.go, 1);
	while (reaped < N) {
		n = knitk_pool_reap(pool, got, 64);
		REQUIRE(n >= 0);
		for (k = 0; k < n; k++) {
			for (i = 0; i < N && calls[i] != got[k]; i++)
				;
			REQUIRE(i < N);
			CHECK_EQ(seen[i], 0);
			seen[i]++;
		}
		reaped += (unsigned int)n;
		if (!n)
			sched_yield();
	}
	pthread_join(th, NULL);
	for (i = 0; i < N; i++) {
		if (ret[i] == 0)
			CHECK_EQ(knitk_call_status(calls[i]), -ECANCELED);
		else if (ret[i] == -EALREADY || ret[i] == 1)
			CHECK(knitk_call_status(calls[i]) == 0 &&
			      mix_result_ok(calls[i], x[i]));
		else
			CHECK_EQ(ret[i], 0);
		knitk_call_release(calls[i]);
	}
	CHECK_EQ(knitk_pool_reap(pool, got, 64), 0);
	knitk_pool_destroy(pool);
}

static void aborts_race_results_in_event_mode_private(void)
{
	aborts_race_results_in_event_mode(KNITK_POOL_DISPATCH_PRIVATE);
}

static void aborts_race_results_in_event_mode_steal(void)
{
	aborts_race_results_in_event_mode(KNITK_POOL_DISPATCH_STEAL);
}

struct multi {
	struct knitk_pool *pool;
	struct knitk_call **calls;
	unsigned int nr;
	int ret;
};

static void *multi_fn(void *arg)
{
	struct multi *m = arg;

	m->ret = knitk_pool_wait_all(m->pool, m->calls, m->nr, KNITK_WAIT_FOREVER);
	return NULL;
}

/* Four threads waiting for the same 64 calls all return, with them done. */
static void many_threads_wait_the_same_calls(void)
{
	struct knitk_call *calls[64];
	struct multi m[4];
	pthread_t th[4];
	struct knitk_pool *pool;
	uint64_t x[64];
	unsigned int i;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 2,
			 0, &pool) == 0);
	for (i = 0; i < 64; i++) {
		x[i] = i;
		REQUIRE(knitk_pool_submit(pool, T_MIX, &x[i], 8, NULL, &calls[i]) == 0);
	}
	for (i = 0; i < 4; i++) {
		m[i] = (struct multi){ .pool = pool, .calls = calls, .nr = 64 };
		REQUIRE(pthread_create(&th[i], NULL, multi_fn, &m[i]) == 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(m[i].ret, 0);
	}
	for (i = 0; i < 64; i++) {
		CHECK(mix_result_ok(calls[i], x[i]));
		knitk_call_release(calls[i]);
	}
	knitk_pool_destroy(pool);
}

/*
 * knitk_pool_reap with @max 0 collects nothing, whatever is queued, and
 * takes nothing from the queue: the call aborted (queued without firing
 * the fd) is still there for the next reap, once.
 */
static void reap_of_zero_takes_nothing(void)
{
	struct knitk_call *c, *got[2];
	struct knitk_pool *pool;
	uint32_t ms = 60000;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	CHECK_EQ(knitk_pool_reap(pool, NULL, 0), 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c) == 0);
	CHECK_EQ(knitk_call_abort(c), 0);
	CHECK_EQ(knitk_pool_reap(pool, NULL, 0), 0);
	CHECK_EQ(knitk_pool_reap(pool, got, 0), 0);
	CHECK_EQ(knitk_pool_reap(pool, got, 2), 1);
	CHECK(got[0] == c);
	CHECK_EQ(knitk_pool_reap(pool, got, 2), 0);
	knitk_call_release(c);
	knitk_pool_destroy(pool);
}

struct ev_racer {
	struct knitk_pool *pool;
	_Atomic int *go;
	int fd;
};

static void *ev_racer_fn(void *arg)
{
	struct ev_racer *r = arg;

	while (!atomic_load(r->go))
		;
	r->fd = knitk_pool_event_fd(r->pool);
	return NULL;
}

/*
 * Eight threads switching a fresh pool to event mode at once all get
 * "the same fd on every call", and the pool opened one eventfd, not
 * one per thread.
 */
static void event_fd_switch_from_many_threads(void)
{
	struct ev_racer r[8];
	pthread_t th[8];
	struct knitk_pool *pool;
	_Atomic int go;
	unsigned int i, round;
	int fds;

	for (round = 0; round < 10; round++) {
		REQUIRE(new_pool(KNITK_WORKER_THREADS, round & 1 ? KNITK_POOL_DISPATCH_STEAL :
				 KNITK_POOL_DISPATCH_PRIVATE, 1, 0, &pool) == 0);
		fds = open_fds();
		atomic_store(&go, 0);
		for (i = 0; i < 8; i++) {
			r[i] = (struct ev_racer){ .pool = pool, .go = &go, .fd = -1 };
			REQUIRE(pthread_create(&th[i], NULL, ev_racer_fn, &r[i]) == 0);
		}
		atomic_store(&go, 1);
		for (i = 0; i < 8; i++)
			pthread_join(th[i], NULL);
		CHECK(r[0].fd >= 0);
		for (i = 1; i < 8; i++)
			CHECK_EQ(r[i].fd, r[0].fd);
		CHECK_EQ(open_fds(), fds + 1);
		knitk_pool_destroy(pool);
	}
}

struct waiter {
	struct knitk_pool *pool;
	struct knitk_call **calls;
	unsigned int nr;
	int any;
	_Atomic int started;
	int ret;
};

static void *waiter_fn(void *arg)
{
	struct waiter *w = arg;

	atomic_store(&w->started, 1);
	if (w->any < 0)
		w->ret = knitk_call_wait(w->calls[0], KNITK_WAIT_FOREVER);
	else if (w->any)
		w->ret = knitk_pool_wait_any(w->pool, w->calls, w->nr,
					     KNITK_WAIT_FOREVER);
	else
		w->ret = knitk_pool_wait_all(w->pool, w->calls, w->nr,
					     KNITK_WAIT_FOREVER);
	return NULL;
}

/*
 * In event mode with no reaper, threads blocked in knitk_call_wait,
 * knitk_pool_wait_any and _wait_all when the destroy starts return once it
 * has completed their calls (-ECANCELED for the ones still running).
 */
static void destroy_wakes_event_mode_waiters(unsigned int dispatch)
{
	struct knitk_call *c[4];
	struct waiter w[3];
	pthread_t th[3];
	struct knitk_pool *pool;
	uint32_t ms = 60000;
	unsigned int i;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 2, 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	for (i = 0; i < 4; i++)
		REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c[i]) == 0);
	w[0] = (struct waiter){ .pool = pool, .calls = &c[0], .nr = 1, .any = -1 };
	w[1] = (struct waiter){ .pool = pool, .calls = &c[1], .nr = 2, .any = 1 };
	w[2] = (struct waiter){ .pool = pool, .calls = &c[0], .nr = 4, .any = 0 };
	for (i = 0; i < 3; i++)
		REQUIRE(pthread_create(&th[i], NULL, waiter_fn, &w[i]) == 0);
	for (i = 0; i < 3; i++)
		while (!atomic_load(&w[i].started))
			sched_yield();
	usleep(20000);
	knitk_pool_destroy(pool);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(w[0].ret, -ECANCELED);
	CHECK(w[1].ret == 0 || w[1].ret == 1);
	CHECK_EQ(w[2].ret, 0);
	for (i = 0; i < 4; i++) {
		CHECK_EQ(knitk_call_status(c[i]), -ECANCELED);
		knitk_call_release(c[i]);
	}
}

static void destroy_wakes_event_mode_waiters_private(void)
{
	destroy_wakes_event_mode_waiters(KNITK_POOL_DISPATCH_PRIVATE);
}

static void destroy_wakes_event_mode_waiters_steal(void)
{
	destroy_wakes_event_mode_waiters(KNITK_POOL_DISPATCH_STEAL);
}

/*
 * A refused shutdown (a mode that is neither) changes nothing: calls
 * still run, and the real shutdown after it drains them.
 */
static void bad_shutdown_mode_changes_nothing(void)
{
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint32_t ms = 30;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c) == 0);
	CHECK_EQ(knitk_pool_shutdown(pool, 3), -EINVAL);
	CHECK_EQ(knitk_pool_shutdown(pool, ~0U), -EINVAL);
	CHECK_EQ(mix_calls_good(pool, 5, NULL, 1, 1), 5);
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	CHECK_EQ(knitk_call_status(c), 30);
	knitk_call_release(c);
	knitk_pool_destroy(pool);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(released_handles_never_reaped);
	TEST(opts_size_inside_a_field);
	TEST(aborts_race_results_in_event_mode_private);
	TEST(aborts_race_results_in_event_mode_steal);
	TEST(many_threads_wait_the_same_calls);
	TEST(event_fd_switch_from_many_threads);
	TEST(reap_of_zero_takes_nothing);
	TEST(destroy_wakes_event_mode_waiters_private);
	TEST(destroy_wakes_event_mode_waiters_steal);
	TEST(bad_shutdown_mode_changes_nothing);
	return tap_exit();
}
