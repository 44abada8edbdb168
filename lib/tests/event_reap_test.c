// SPDX-License-Identifier: GPL-2.0
/*
 * Reaping in event mode (knitk_pool_reap) loses and doubles nothing: a full
 * stealing mailbox or arena is -EAGAIN, several threads reap at once,
 * destroy and shutdown with calls unreaped, deadlines and aborts seen by a
 * waiter, knitk_pool_call beside a reaper.
 * argv[1] (the runner's call count) is ignored: the counts are small.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_parked.h"
#include "pool_tasks.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

/*
 * In event mode on a stealing pool a submit never waits for room: with
 * the one worker held by a long call, submits fill the shared mailbox or
 * its arena and then get -EAGAIN.  Every submitted call is reaped once.
 */
static void steal_event_full_is_eagain(void)
{
	static struct knitk_call *calls[256], *kept[256];
	struct knitk_pool *pool;
	uint32_t ms = 60000;
	unsigned int n = 0, kept_n = 0, i, ok = 0, canceled = 0;
	int ret, fd;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 1, 0,
			 &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL, &calls[n]) == 0);
	n++;
	/* Lanes run out. */
	for (;;) {
		uint64_t x = n;

		REQUIRE(n < 256);
		ret = knitk_pool_submit(pool, T_ECHO, &x, sizeof(x), NULL, &calls[n]);
		if (ret)
			break;
		n++;
	}
	CHECK_EQ(ret, -EAGAIN);
	CHECK(n <= KNITK_LANES);
	/* Drain them (abort the sleeper), then the arena runs out. */
	CHECK_EQ(knitk_call_abort(calls[0]), 0);
	while (kept_n < n) {
		ret = reap_all(pool, kept, 256, &kept_n);
		REQUIRE(ret >= 0);
		if (!ret)
			sched_yield();
	}
	for (i = 0; i < kept_n; i++) {
		int st = knitk_call_status(kept[i]);

		if (kept[i] == calls[0])
			canceled += st == -ECANCELED;
		else
			ok += st == 0;
		knitk_call_release(kept[i]);
	}
	CHECK_EQ(canceled, 1);
	CHECK_EQ(ok, n - 1);
	knitk_pool_destroy(pool);
}

/*
 * The same with the request arena: with the one worker held by a long
 * call, calls of more than half the arena fill it, and the next submit
 * is -EAGAIN, not a wait; every call is reaped once with its bytes.
 */
static void event_arena_full_is_eagain(unsigned int dispatch)
{
	static struct knitk_call *calls[8], *kept[8];
	static unsigned char big[ARENA / 2 + 4096];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	uint32_t ms = 60000;
	unsigned int n = 0, kept_n = 0, i, ok = 0;
	int ret;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 1, 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL, &calls[n]) == 0);
	n++;
	memset(big, 0x5a, sizeof(big));
	for (;;) {
		REQUIRE(n < 8);
		ret = knitk_pool_submit(pool, T_ECHO, big, sizeof(big), NULL, &calls[n]);
		if (ret)
			break;
		n++;
	}
	CHECK_EQ(ret, -EAGAIN);
	CHECK(n >= 2);
	/* A refused submit is no call: not counted, never reaped. */
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, n);
	CHECK_EQ(st.completed, 0);
	CHECK_EQ(knitk_call_abort(calls[0]), 0);
	while (kept_n < n) {
		ret = reap_all(pool, kept, 8, &kept_n);
		REQUIRE(ret >= 0);
		if (!ret)
			sched_yield();
	}
	for (i = 0; i < kept_n; i++) {
		const void *d;
		size_t len;

		if (kept[i] != calls[0] && knitk_call_status(kept[i]) == 0 &&
		    !knitk_call_result(kept[i], &d, &len) && len == sizeof(big) &&
		    !memcmp(d, big, len))
			ok++;
		knitk_call_release(kept[i]);
	}
	CHECK_EQ(ok, n - 1);
	CHECK_EQ(knitk_pool_reap(pool, kept, 8), 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, n);
	CHECK_EQ(st.completed, n);
	knitk_pool_destroy(pool);
}

static void event_arena_full_is_eagain_private(void)
{
	event_arena_full_is_eagain(KNITK_POOL_DISPATCH_PRIVATE);
}

static void event_arena_full_is_eagain_steal(void)
{
	event_arena_full_is_eagain(KNITK_POOL_DISPATCH_STEAL);
}

struct reaper {
	struct knitk_pool *pool;
	unsigned int total;
	_Atomic unsigned int *reaped;
	_Atomic unsigned int *bad;
	unsigned char *seen;
};

static void *reaper_main(void *arg)
{
	struct reaper *r = arg;
	struct knitk_call *out[8];
	int n, i;

	while (atomic_load(r->reaped) < r->total) {
		n = knitk_pool_reap(r->pool, out, 8);
		if (n < 0) {
			atomic_fetch_add(r->bad, 1);
			break;
		}
		for (i = 0; i < n; i++) {
			const void *d;
			uint64_t x;
			size_t len;

			if (knitk_call_status(out[i]) ||
			    knitk_call_result(out[i], &d, &len) || len != 8) {
				atomic_fetch_add(r->bad, 1);
			} else {
				memcpy(&x, d, 8);
				if (x >= r->total ||
				    __atomic_fetch_add(&r->seen[x], 1, __ATOMIC_RELAXED))
					atomic_fetch_add(r->bad, 1);
			}
			knitk_call_release(out[i]);
		}
		if (n)
			atomic_fetch_add(r->reaped, (unsigned int)n);
		else
			sched_yield();
	}
	return NULL;
}

#define REAPERS	4
#define REAP_CALLS 3000

/*
 * Several threads reap while one submits (retrying -EAGAIN): each call is
 * reaped once by exactly one of them, with its own result.
 */
static void reap_from_threads(unsigned int dispatch)
{
	static unsigned char seen[REAP_CALLS];
	_Atomic unsigned int reaped = 0, bad = 0;
	struct reaper r[REAPERS];
	pthread_t th[REAPERS];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	unsigned int i, sent = 0, dup = 0;

	memset(seen, 0, sizeof(seen));
	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 2, 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	for (i = 0; i < REAPERS; i++) {
		r[i] = (struct reaper){ pool, REAP_CALLS, &reaped, &bad, seen };
		REQUIRE(pthread_create(&th[i], NULL, reaper_main, &r[i]) == 0);
	}
	while (sent < REAP_CALLS && !atomic_load(&bad)) {
		uint64_t x = sent;
		struct knitk_call *c;
		int ret = knitk_pool_submit(pool, T_ECHO, &x, 8, NULL, &c);

		if (ret == -EAGAIN) {
			sched_yield();
			continue;
		}
		if (ret) {
			atomic_fetch_add(&bad, 1);
			break;
		}
		sent++;
	}
	if (atomic_load(&bad))
		atomic_store(&reaped, REAP_CALLS);	/* let them leave */
	for (i = 0; i < REAPERS; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(atomic_load(&bad), 0);
	CHECK_EQ(atomic_load(&reaped), REAP_CALLS);
	for (i = 0; i < REAP_CALLS; i++)
		dup += seen[i] != 1;
	CHECK_EQ(dup, 0);
	{
		struct knitk_call *extra;

		CHECK_EQ(knitk_pool_reap(pool, &extra, 1), 0);
	}
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, REAP_CALLS);
	CHECK_EQ(st.completed, REAP_CALLS);
	knitk_pool_destroy(pool);
}

static void reap_from_threads_private(void)
{
	reap_from_threads(KNITK_POOL_DISPATCH_PRIVATE);
}

static void reap_from_threads_steal(void)
{
	reap_from_threads(KNITK_POOL_DISPATCH_STEAL);
}

/*
 * Destroy with calls unreaped (finished, running and queued, on both
 * dispatches): every handle is completed and readable after the destroy,
 * a finished call with its own result, and releasing them leaks nothing.
 */
static void destroy_with_unreaped(unsigned int dispatch)
{
	struct knitk_call *c[40];
	struct knitk_pool *pool;
	uint32_t ms = 60000;
	unsigned int i, bad = 0;
	int before = count_fds(false);

	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 2, 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	for (i = 0; i < 20; i++) {
		uint64_t x = i;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i]) == 0);
	}
	while (results_pending(pool, 2) < 20)
		sched_yield();
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL, &c[20]) == 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL, &c[21]) == 0);
	for (i = 22; i < 40; i++) {
		uint64_t x = i;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i]) == 0);
	}
	knitk_pool_destroy(pool);
	for (i = 0; i < 40; i++) {
		int st = knitk_call_status(c[i]);

		if (st == -EINPROGRESS ||
		    knitk_call_wait(c[i], KNITK_WAIT_FOREVER) != st ||
		    knitk_call_abort(c[i]) != -EALREADY)
			bad++;
		else if (i < 20 && st != -ECANCELED &&
			 (st || !mix_result_ok(c[i], i)))
			bad++;
		else if (i >= 20 && st && st != -ECANCELED)
			bad++;
		else if (i >= 22 && !st && !mix_result_ok(c[i], i))
			bad++;
		knitk_call_release(c[i]);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(count_fds(false), before);
}

static void destroy_with_unreaped_private(void)
{
	destroy_with_unreaped(KNITK_POOL_DISPATCH_PRIVATE);
}

static void destroy_with_unreaped_steal(void)
{
	destroy_with_unreaped(KNITK_POOL_DISPATCH_STEAL);
}

/*
 * Shutdown in event mode queues what it completes without firing the fd:
 * reap after it returns gets every call once (a result, or -ECANCELED for
 * CANCEL), and later submits are -ESHUTDOWN.
 */
static void reap_after_shutdown(unsigned int dispatch, unsigned int mode)
{
	struct knitk_call *c[30], *kept[64], *x;
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	uint32_t ms = mode == KNITK_SHUTDOWN_DRAIN ? 20 : 60000;
	unsigned int i, kept_n = 0, bad = 0, hits;
	uint64_t v = 1;
	int fd;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 2, 0, &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL, &c[0]) == 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL, &c[1]) == 0);
	for (i = 2; i < 30; i++) {
		uint64_t y = i;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &y, 8, NULL, &c[i]) == 0);
	}
	CHECK_EQ(knitk_pool_shutdown(pool, mode), 0);
	CHECK_EQ(knitk_pool_shutdown(pool, mode), -EALREADY);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &v, 8, NULL, &x), -ESHUTDOWN);
	CHECK(reap_all(pool, kept, 64, &kept_n) >= 0);
	CHECK_EQ(kept_n, 30);
	CHECK_EQ(knitk_pool_reap(pool, kept, 1), 0);
	for (i = 0; i < kept_n; i++) {
		unsigned int j;
		int s = knitk_call_status(kept[i]);

		for (j = 0, hits = 0; j < 30; j++)
			hits += kept[i] == c[j];
		if (hits != 1)
			bad++;
		if (mode == KNITK_SHUTDOWN_DRAIN) {
			if (kept[i] == c[0] || kept[i] == c[1])
				bad += s != (int)ms;
			else
				bad += s != 0;
		} else if (s && s != -ECANCELED) {
			bad++;
		}
		knitk_call_release(kept[i]);
	}
	CHECK_EQ(bad, 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.submitted, 30);
	knitk_pool_destroy(pool);
}

static void reap_after_shutdown_drain_private(void)
{
	reap_after_shutdown(KNITK_POOL_DISPATCH_PRIVATE, KNITK_SHUTDOWN_DRAIN);
}

static void reap_after_shutdown_cancel_private(void)
{
	reap_after_shutdown(KNITK_POOL_DISPATCH_PRIVATE, KNITK_SHUTDOWN_CANCEL);
}

static void reap_after_shutdown_drain_steal(void)
{
	reap_after_shutdown(KNITK_POOL_DISPATCH_STEAL, KNITK_SHUTDOWN_DRAIN);
}

static void reap_after_shutdown_cancel_steal(void)
{
	reap_after_shutdown(KNITK_POOL_DISPATCH_STEAL, KNITK_SHUTDOWN_CANCEL);
}

/*
 * A deadline seen by another thread's wait, and an abort, complete their
 * calls without a result; they are reaped once, and an abort does not
 * write the eventfd.  Calls whose deadline passed before a stealing
 * worker took them are reaped -ETIMEDOUT.
 */
static void steal_event_deadline_abort(void)
{
	struct knitk_call *hold, *queued, *late[8], *kept[16], *out[2];
	struct knitk_call_opts past = { .size = sizeof(past), .deadline_ns = 1 };
	struct knitk_pool *pool;
	uint32_t ms = 60000;
	uint64_t v;
	unsigned int i, kept_n = 0, timedout = 0, canceled = 0;
	int fd, ret;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 1, 0,
			 &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL, &hold) == 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL, &queued) == 0);
	/* Armed, nothing pending, eventfd drained. */
	CHECK_EQ(knitk_pool_reap(pool, out, 2), 0);
	CHECK(eventfd_value(fd, &v) >= 0);
	CHECK_EQ(knitk_pool_reap(pool, out, 2), 0);
	CHECK_EQ(knitk_call_abort(queued), 0);
	CHECK_EQ(knitk_call_status(queued), -ECANCELED);
	CHECK_EQ(knitk_call_abort(queued), -EALREADY);
	CHECK_EQ(eventfd_value(fd, &v), 0);
	for (i = 0; i < 8; i++) {
		uint64_t y = i;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &y, 8, &past, &late[i]) == 0);
	}
	CHECK_EQ(knitk_call_abort(hold), 0);
	while (kept_n < 10) {
		ret = reap_all(pool, kept, 16, &kept_n);
		REQUIRE(ret >= 0);
		if (!ret)
			sched_yield();
	}
	CHECK_EQ(knitk_pool_reap(pool, out, 2), 0);
	for (i = 0; i < kept_n; i++) {
		int s = knitk_call_status(kept[i]);

		if (kept[i] == hold || kept[i] == queued)
			canceled += s == -ECANCELED;
		else
			timedout += s == -ETIMEDOUT;
		knitk_call_release(kept[i]);
	}
	CHECK_EQ(canceled, 2);
	CHECK_EQ(timedout, 8);
	knitk_pool_destroy(pool);
}

struct deadline_waiter {
	struct knitk_call *call;
	uint64_t deadline_ns;
	int status;
};

static void *deadline_waiter_main(void *arg)
{
	struct deadline_waiter *w = arg;

	w->status = knitk_call_wait(w->call, w->deadline_ns);
	return NULL;
}

/*
 * In event mode another thread's wait sees a call's own deadline pass
 * (the worker is busy): the call completes -ETIMEDOUT, the waiter gets
 * it, the loop reaps it once, and the worker's late skip is no second
 * completion.  Stealing and private alike.
 */
static void event_deadline_seen_by_waiter(unsigned int dispatch)
{
	struct knitk_call_opts co = { .size = sizeof(co) };
	struct knitk_call *hold, *kept[4];
	struct deadline_waiter w = { .status = 1 };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	pthread_t th;
	uint32_t ms = 60000;
	uint64_t x = 9;
	unsigned int kept_n = 0, i;
	int ret;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 1, 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL, &hold) == 0);
	co.deadline_ns = after_ms(30);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, &co, &w.call) == 0);
	w.deadline_ns = KNITK_WAIT_FOREVER;
	REQUIRE(pthread_create(&th, NULL, deadline_waiter_main, &w) == 0);
	pthread_join(th, NULL);
	CHECK_EQ(w.status, -ETIMEDOUT);
	CHECK_EQ(knitk_call_status(w.call), -ETIMEDOUT);
	CHECK_EQ(knitk_call_abort(hold), 0);
	while (kept_n < 2) {
		ret = reap_all(pool, kept, 4, &kept_n);
		REQUIRE(ret >= 0);
		if (!ret)
			sched_yield();
	}
	CHECK_EQ(kept_n, 2);
	for (i = 0; i < kept_n; i++)
		CHECK(kept[i] == hold || kept[i] == w.call);
	CHECK(kept[0] != kept[1]);
	for (i = 0; i < kept_n; i++)
		knitk_call_release(kept[i]);
	/* The worker runs on: a later call is reaped with its result. */
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &hold) == 0);
	while ((ret = knitk_pool_reap(pool, kept, 4)) == 0)
		sched_yield();
	CHECK_EQ(ret, 1);
	CHECK(kept[0] == hold && mix_result_ok(hold, x));
	CHECK_EQ(knitk_pool_reap(pool, kept, 4), 0);
	knitk_call_release(hold);
	pool_stats(pool, &st);
	CHECK_EQ(st.timedout, 1);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(pool);
}

static void event_deadline_seen_by_waiter_private(void)
{
	event_deadline_seen_by_waiter(KNITK_POOL_DISPATCH_PRIVATE);
}

static void event_deadline_seen_by_waiter_steal(void)
{
	event_deadline_seen_by_waiter(KNITK_POOL_DISPATCH_STEAL);
}

struct loop_reaper {
	struct knitk_pool *pool;
	struct knitk_call *skip;	/* another thread's: not released here */
	_Atomic int stop;
	unsigned int skipped, bad;
	unsigned char seen[400];
};

/* Reap, check and release echo calls of their index, until told to stop. */
static void loop_reap_once(struct loop_reaper *r)
{
	struct knitk_call *out[8];
	int n, i;

	while ((n = knitk_pool_reap(r->pool, out, 8)) > 0) {
		for (i = 0; i < n; i++) {
			const void *d;
			uint64_t x;
			size_t len;

			if (out[i] == r->skip) {
				r->skipped++;
				continue;
			}
			if (knitk_call_status(out[i]) ||
			    knitk_call_result(out[i], &d, &len) || len != 8) {
				r->bad++;
			} else {
				memcpy(&x, d, 8);
				if (x >= 400 || r->seen[x]++)
					r->bad++;
			}
			knitk_call_release(out[i]);
		}
	}
	if (n < 0)
		r->bad++;
}

static void *loop_reaper_main(void *arg)
{
	struct loop_reaper *r = arg;

	while (!atomic_load(&r->stop)) {
		loop_reap_once(r);
		sched_yield();
	}
	return NULL;
}

/*
 * Event mode: a drain shutdown runs while one thread reaps in a loop and
 * another waits on a call.  The shutdown takes the results itself, so
 * the waiter wakes with its call's status, and every call is reaped once
 * (by the loop while it runs, or after the shutdown returned).
 */
static void shutdown_while_reaping(unsigned int dispatch)
{
	static struct loop_reaper r;
	struct deadline_waiter dw = { .status = 1, .deadline_ns = KNITK_WAIT_FOREVER };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	pthread_t rt, wt;
	unsigned int i, missing = 0;
	uint32_t ms = 30;
	int ret;

	memset(&r, 0, sizeof(r));
	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 2, 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	r.pool = pool;
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL, &dw.call) == 0);
	r.skip = dw.call;
	REQUIRE(pthread_create(&wt, NULL, deadline_waiter_main, &dw) == 0);
	REQUIRE(pthread_create(&rt, NULL, loop_reaper_main, &r) == 0);
	for (i = 1; i < 400; i++) {
		uint64_t x = i;
		struct knitk_call *c;

		while ((ret = knitk_pool_submit(pool, T_ECHO, &x, 8, NULL, &c)) == -EAGAIN)
			sched_yield();
		REQUIRE(ret == 0);
	}
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	pthread_join(wt, NULL);
	CHECK_EQ(dw.status, (int)ms);
	atomic_store(&r.stop, 1);
	pthread_join(rt, NULL);
	loop_reap_once(&r);
	CHECK_EQ(r.bad, 0);
	CHECK_EQ(r.skipped, 1);
	for (i = 1; i < 400; i++)
		missing += r.seen[i] != 1;
	CHECK_EQ(missing, 0);
	knitk_call_release(dw.call);
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, 400);
	CHECK_EQ(st.completed, 400);
	knitk_pool_destroy(pool);
}

static void shutdown_while_reaping_private(void)
{
	shutdown_while_reaping(KNITK_POOL_DISPATCH_PRIVATE);
}

static void shutdown_while_reaping_steal(void)
{
	shutdown_while_reaping(KNITK_POOL_DISPATCH_STEAL);
}

struct sync_caller {
	struct knitk_pool *pool;
	unsigned int n, good;
	int first_bad;
	_Atomic int done;
};

static void *sync_caller_main(void *arg)
{
	struct sync_caller *sc = arg;
	unsigned int i;

	for (i = 0; i < sc->n; i++) {
		uint64_t x = 7000 + i, y = 0;
		size_t len = 0;

		int ret = knitk_pool_call(sc->pool, T_MIX, &x, 8, NULL, &y, 8, &len);

		if (ret == 0 && len == 8 && y == mix64(x))
			sc->good++;
		else if (!sc->first_bad)
			sc->first_bad = ret ? ret : 1;
	}
	atomic_store(&sc->done, 1);
	return NULL;
}

/*
 * In event mode another thread runs knitk_pool_call (submit, wait,
 * release) while the loop reaps and releases what it reaps: each
 * knitk_pool_call gets its result, and whatever the loop is handed is a
 * live handle it may read and release (the sanitizer builds would see a
 * use after free or a double release).
 */
static void pool_call_beside_reaper(void)
{
	struct sync_caller sc = { .n = 300 };
	struct knitk_pool *pool;
	pthread_t th;
	unsigned int bad = 0;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 2, 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	sc.pool = pool;
	REQUIRE(pthread_create(&th, NULL, sync_caller_main, &sc) == 0);
	while (!atomic_load(&sc.done)) {
		struct knitk_call *out[8];
		int n = knitk_pool_reap(pool, out, 8), i;

		if (n < 0) {
			bad++;
			break;
		}
		for (i = 0; i < n; i++) {
			int s = knitk_call_status(out[i]);

			if (s && s != -EINPROGRESS)
				bad++;
			knitk_call_release(out[i]);
		}
		if (!n)
			sched_yield();
	}
	pthread_join(th, NULL);
	CHECK_EQ(bad, 0);
	CHECK_EQ(sc.good, sc.n);
	CHECK_EQ(sc.first_bad, 0);
	knitk_pool_destroy(pool);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(steal_event_full_is_eagain);
	TEST(event_arena_full_is_eagain_private);
	TEST(event_arena_full_is_eagain_steal);
	TEST(reap_from_threads_private);
	TEST(reap_from_threads_steal);
	TEST(destroy_with_unreaped_private);
	TEST(destroy_with_unreaped_steal);
	TEST(reap_after_shutdown_drain_private);
	TEST(reap_after_shutdown_cancel_private);
	TEST(reap_after_shutdown_drain_steal);
	TEST(reap_after_shutdown_cancel_steal);
	TEST(steal_event_deadline_abort);
	TEST(event_deadline_seen_by_waiter_private);
	TEST(event_deadline_seen_by_waiter_steal);
	TEST(shutdown_while_reaping_private);
	TEST(shutdown_while_reaping_steal);
	TEST(pool_call_beside_reaper);
	return tap_exit();
}
