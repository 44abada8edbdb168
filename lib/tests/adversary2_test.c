// SPDX-License-Identifier: GPL-2.0
/*
 * Adversarial tests of the newest public contract on the futex backend:
 * event mode (knitk_pool_event_fd, knitk_pool_reap,
 * knitk_endpoint_set_event_fd) mixed with stealing, deadlines, aborts,
 * shutdown, destroy, several reaping threads, signals and fork; the
 * stealing pool's geometry checks and calls as large as the arena.
 * Written from the headers and man pages alone.
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

#define ARENA	(64 * 1024)

static int new_pool(unsigned int kind, unsigned int dispatch,
		    unsigned int workers, unsigned int flags,
		    struct knitk_pool **pool)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind,
				     .nr_workers = workers, .flags = flags,
				     .knot_flags = KNITK_KNOT_FUTEX,
				     .arena_bytes = ARENA,
				     .dispatch = dispatch };

	return knitk_pool_create(&o, &test_tasks, pool);
}

/* Reap until 0 (one pass), releasing or keeping into @keep. */
static int reap_all(struct knitk_pool *pool, struct knitk_call **keep,
		    unsigned int cap, unsigned int *kept)
{
	struct knitk_call *out[16];
	int n, i, total = 0;

	while ((n = knitk_pool_reap(pool, out, 16)) > 0) {
		for (i = 0; i < n; i++) {
			if (keep && *kept < cap)
				keep[(*kept)++] = out[i];
			else
				knitk_call_release(out[i]);
		}
		total += n;
	}
	return n < 0 ? n : total;
}

static int eventfd_value(int fd, uint64_t *v)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	*v = 0;
	if (poll(&p, 1, 0) != 1)
		return 0;
	return read(fd, v, sizeof(*v)) == sizeof(*v) ? 1 : -1;
}

/*
 * Event mode with process workers on the futex backend is -EOPNOTSUPP,
 * and the refusal loses nothing: the pool is not in event mode (reap
 * -EINVAL, submit still blocks for room) and serves calls.
 */
static void event_fd_processes_refused(void)
{
	struct knitk_pool *pool;
	struct knitk_call *out[2];

	REQUIRE(new_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE, 2, 0,
			 &pool) == 0);
	CHECK_EQ(knitk_pool_event_fd(pool), -EOPNOTSUPP);
	CHECK_EQ(knitk_pool_event_fd(pool), -EOPNOTSUPP);
	CHECK_EQ(knitk_pool_reap(pool, out, 2), -EINVAL);
	CHECK_EQ(mix_calls_good(pool, 200, NULL, 5, 3), 200);
	knitk_pool_destroy(pool);

	REQUIRE(new_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL, 2, 0,
			 &pool) == 0);
	CHECK_EQ(knitk_pool_event_fd(pool), -EOPNOTSUPP);
	CHECK_EQ(mix_calls_good(pool, 200, NULL, 7, 3), 200);
	knitk_pool_destroy(pool);
}

/* The event fd is the pool's: the same each time, closed by destroy. */
static void event_fd_owned_by_pool(void)
{
	struct knitk_pool *pool;
	int before = count_fds(false), fd;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 2, 0,
			 &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	CHECK_EQ(knitk_pool_event_fd(pool), fd);
	CHECK(fcntl(fd, F_GETFD) >= 0);
	CHECK_EQ(knitk_pool_reap(pool, NULL, 0), 0);
	knitk_pool_destroy(pool);
	CHECK_EQ(count_fds(false), before);
}

struct evfd_racer {
	struct knitk_pool *pool;
	pthread_barrier_t *go;
	int fd;
};

static void *evfd_racer_main(void *arg)
{
	struct evfd_racer *r = arg;

	pthread_barrier_wait(r->go);
	r->fd = knitk_pool_event_fd(r->pool);
	return NULL;
}

/*
 * The first knitk_pool_event_fd calls of a pool race from eight threads:
 * all get the same fd, the pool works through it, and destroy leaves no
 * fd behind (no second eventfd was made and lost).
 */
static void event_fd_first_call_race(void)
{
	struct evfd_racer r[8];
	pthread_t th[8];
	pthread_barrier_t go;
	unsigned int round, i, wrong = 0;
	int before = count_fds(false);

	for (round = 0; round < 30; round++) {
		struct knitk_pool *pool;
		struct knitk_call *c, *out[1];
		uint64_t x = round;
		int n;

		REQUIRE(new_pool(KNITK_WORKER_THREADS, round & 1, 1, 0, &pool) == 0);
		REQUIRE(pthread_barrier_init(&go, NULL, 8) == 0);
		for (i = 0; i < 8; i++) {
			r[i] = (struct evfd_racer){ pool, &go, -1 };
			REQUIRE(pthread_create(&th[i], NULL, evfd_racer_main, &r[i]) == 0);
		}
		for (i = 0; i < 8; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&go);
		for (i = 0; i < 8; i++)
			wrong += r[i].fd < 0 || r[i].fd != r[0].fd;
		wrong += knitk_pool_event_fd(pool) != r[0].fd;
		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c) == 0);
		while ((n = knitk_pool_reap(pool, out, 1)) == 0) {
			struct pollfd p = { .fd = r[0].fd, .events = POLLIN };

			poll(&p, 1, -1);
		}
		wrong += n != 1 || out[0] != c || !mix_result_ok(c, x);
		knitk_call_release(c);
		knitk_pool_destroy(pool);
	}
	CHECK_EQ(wrong, 0);
	CHECK_EQ(count_fds(false), before);
}

/* Until the host doorbell of @pool's knot has its sleeping flag set. */
static void until_host_parked(struct knitk_pool *pool)
{
	struct knitk_endpoint *knot;
	struct knitk_layout l;
	void *base;
	const struct knitk_doorbell *db;

	if (knitk_pool_endpoint(pool, &knot) || knitk_endpoint_layout(knot, &l, NULL) ||
	    knitk_endpoint_base(knot, &base))
		return;
	db = (const void *)((char *)base + l.doorbell_off +
			    (uint64_t)KNITK_DOORBELL_HOST * l.doorbell_stride);
	while (!__atomic_load_n(&db->sleeping, __ATOMIC_ACQUIRE))
		sched_yield();
}

/*
 * knitk_pool_event_fd while the pool's own collector is parked on the
 * host doorbell: handing that park over to the loop is no result and no
 * death, so it writes nothing to the eventfd; the first result while
 * the loop waits is its only write.
 */
static void event_fd_handover_writes_nothing(void)
{
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c, *out[2];
	uint64_t v = 0, x = 5;
	unsigned int kept = 0;
	int fd;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1, 0,
			 &pool) == 0);
	until_host_parked(pool);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	CHECK_EQ(eventfd_value(fd, &v), 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.event_writes, 0);
	CHECK_EQ(reap_all(pool, NULL, 0, &kept), 0);
	CHECK_EQ(eventfd_value(fd, &v), 0);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c) == 0);
	{
		struct pollfd p = { .fd = fd, .events = POLLIN };

		CHECK_EQ(poll(&p, 1, -1), 1);
	}
	CHECK_EQ(eventfd_value(fd, &v), 1);
	CHECK_EQ(v, 1);
	pool_stats(pool, &st);
	CHECK_EQ(st.event_writes, 1);
	CHECK_EQ(knitk_pool_reap(pool, out, 2), 1);
	CHECK(out[0] == c && mix_result_ok(c, x));
	knitk_call_release(c);
	knitk_pool_destroy(pool);
}

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

/*
 * One sleep of the loop, one eventfd write: results of two workers that
 * finish while the loop is parked on a level-triggered poll of the
 * eventfd add up to a value of exactly 1, counted once in event_writes.
 */
static void one_write_per_sleep(void)
{
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct pollfd p;
	unsigned int kept = 0;
	uint64_t v = 0;
	int fd, i;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 2, 0,
			 &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	CHECK_EQ(reap_all(pool, NULL, 0, &kept), 0);
	for (i = 0; i < 20; i++) {
		uint64_t x = (uint64_t)i;
		struct knitk_call *c;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c) == 0);
	}
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	CHECK_EQ(poll(&p, 1, -1), 1);
	while (results_pending(pool, 2) < 20)
		sched_yield();
	/* Level-triggered: still ready until read. */
	CHECK_EQ(poll(&p, 1, 0), 1);
	CHECK_EQ(read(fd, &v, 8), 8);
	CHECK_EQ(v, 1);
	pool_stats(pool, &st);
	CHECK_EQ(st.event_writes, 1);
	CHECK_EQ(reap_all(pool, NULL, 0, &kept), 20);
	knitk_pool_destroy(pool);
}

/*
 * A forked child that closes every fd it inherited (the knot, the
 * eventfd) and exits is no death and takes nothing from the pool: the
 * calls in flight across the fork are reaped with their results.
 */
static void fork_child_closes_everything(void)
{
	struct knitk_call *c[50], *kept[64];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	unsigned int i, kept_n = 0, bad = 0;
	int fd, status, ret;
	pid_t pid;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 2, 0,
			 &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	for (i = 0; i < 25; i++) {
		uint64_t x = i;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i]) == 0);
	}
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		int f;

		for (f = 0; f < 1024; f++)
			close(f);
		_exit(0);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (i = 25; i < 50; i++) {
		uint64_t x = i;

		while ((ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i])) == -EAGAIN)
			sched_yield();
		REQUIRE(ret == 0);
	}
	while (kept_n < 50) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		ret = reap_all(pool, kept, 64, &kept_n);
		REQUIRE(ret >= 0);
		if (!ret && kept_n < 50)
			poll(&p, 1, -1);
		if (!ret && kept_n < 50) {
			uint64_t v;

			CHECK(eventfd_value(fd, &v) >= 0);
		}
	}
	for (i = 0; i < 50; i++)
		if (knitk_call_status(c[i]) || !mix_result_ok(c[i], i))
			bad++;
	CHECK_EQ(bad, 0);
	for (i = 0; i < kept_n; i++)
		knitk_call_release(kept[i]);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.completed, 50);
	knitk_pool_destroy(pool);
}

static _Atomic unsigned long sigs_seen;

static void on_sig(int sig)
{
	(void)sig;
	atomic_fetch_add(&sigs_seen, 1);
}

struct signaller {
	_Atomic int stop;
};

static void *signaller_main(void *arg)
{
	struct signaller *s = arg;
	struct timespec ts = { 0, 50 * 1000 };

	while (!atomic_load(&s->stop)) {
		kill(getpid(), SIGUSR1);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/*
 * Signals without SA_RESTART rain on every thread of the process (the
 * pool's included) during an epoll event loop over a stealing pool:
 * the loop sees EINTR from epoll_wait, the pool nothing: every call is
 * reaped once with its result.
 */
static void signals_during_event_loop(void)
{
	struct sigaction sa = { .sa_handler = on_sig }, old;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	struct signaller s = { 0 };
	struct knitk_pool *pool;
	pthread_t th;
	unsigned int sent = 0, got = 0, bad = 0, total = 2000;
	static unsigned char seen[2000];
	int fd, ep, n, i;

	memset(seen, 0, sizeof(seen));
	atomic_store(&sigs_seen, 0);
	REQUIRE(sigaction(SIGUSR1, &sa, &old) == 0);
	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 2, 0,
			 &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	ep = epoll_create1(EPOLL_CLOEXEC);
	REQUIRE(ep >= 0);
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	REQUIRE(pthread_create(&th, NULL, signaller_main, &s) == 0);
	/* The rain has begun before the loop does (and goes on through it). */
	while (!atomic_load(&sigs_seen))
		sched_yield();
	while (got < total && !bad) {
		struct knitk_call *out[16];

		while (sent < total) {
			uint64_t x = sent;
			struct knitk_call *c;
			int ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c);

			if (ret == -EAGAIN)
				break;
			if (ret) {
				bad++;
				break;
			}
			sent++;
		}
		while ((n = knitk_pool_reap(pool, out, 16)) > 0) {
			for (i = 0; i < n; i++) {
				const void *d;
				size_t len;
				uint64_t y = 0;
				unsigned int k;

				/* Find x from the result: mix64 is a bijection. */
				if (knitk_call_status(out[i]) ||
				    knitk_call_result(out[i], &d, &len) || len != 8) {
					bad++;
				} else {
					memcpy(&y, d, 8);
					for (k = 0; k < total; k++)
						if (mix64(k) == y)
							break;
					if (k == total || seen[k]++)
						bad++;
				}
				knitk_call_release(out[i]);
			}
			got += (unsigned int)n;
		}
		if (n < 0)
			bad++;
		if (got < total && sent - got > 0 && n == 0) {
			int r = epoll_wait(ep, &ev, 1, -1);

			if (r < 0 && errno != EINTR)
				bad++;
		}
	}
	atomic_store(&s.stop, 1);
	pthread_join(th, NULL);
	CHECK_EQ(bad, 0);
	CHECK_EQ(got, total);
	CHECK(atomic_load(&sigs_seen) > 0);
	close(ep);
	knitk_pool_destroy(pool);
	sigaction(SIGUSR1, &old, NULL);
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

struct shutter {
	struct knitk_pool *pool;
	unsigned int mode;
	int ret;
};

static void *shutter_main(void *arg)
{
	struct shutter *s = arg;

	s->ret = knitk_pool_shutdown(s->pool, s->mode);
	return NULL;
}

#define STEAL_RACE_CALLS 300

/*
 * A stealing pool of respawning process workers: a worker is killed
 * while a shutdown (drain or cancel) runs from another thread.  Every
 * call ends once: its result, -EOWNERDEAD, or (cancel) -ECANCELED;
 * completed equals submitted and nothing hangs.
 */
static void steal_kill_during_shutdown(unsigned int mode)
{
	static struct knitk_call *c[STEAL_RACE_CALLS];
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct shutter sh = { .mode = mode, .ret = 1 };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	pthread_t th;
	unsigned int i, bad = 0;

	REQUIRE(new_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL, 2,
			 KNITK_POOL_RESPAWN, &pool) == 0);
	for (i = 0; i < STEAL_RACE_CALLS; i++) {
		uint64_t x = i;

		if (i % 50 == 0) {
			uint32_t ms = 5;

			REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c[i]) == 0);
		} else {
			REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i]) == 0);
		}
	}
	REQUIRE(knitk_pool_worker_info(pool, 1, &wi) == 0);
	sh.pool = pool;
	REQUIRE(pthread_create(&th, NULL, shutter_main, &sh) == 0);
	if (wi.pid > 0)
		kill(wi.pid, SIGKILL);
	pthread_join(th, NULL);
	CHECK_EQ(sh.ret, 0);
	for (i = 0; i < STEAL_RACE_CALLS; i++) {
		int s = knitk_call_wait(c[i], KNITK_WAIT_FOREVER);

		if (s == -EOWNERDEAD || (mode == KNITK_SHUTDOWN_CANCEL && s == -ECANCELED))
			continue;
		if (i % 50 == 0 ? s != 5 : (s || !mix_result_ok(c[i], i)))
			bad++;
	}
	CHECK_EQ(bad, 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, STEAL_RACE_CALLS);
	CHECK_EQ(st.completed, STEAL_RACE_CALLS);
	for (i = 0; i < STEAL_RACE_CALLS; i++)
		knitk_call_release(c[i]);
	knitk_pool_destroy(pool);
}

static void steal_kill_during_drain(void)
{
	steal_kill_during_shutdown(KNITK_SHUTDOWN_DRAIN);
}

static void steal_kill_during_cancel(void)
{
	steal_kill_during_shutdown(KNITK_SHUTDOWN_CANCEL);
}

/*
 * The version-1 fields through the sized-struct rule: an opts that ends
 * inside version 1 (with @dispatch, without @steal_region) makes a
 * stealing pool; one past the library's size is -E2BIG unless its tail
 * is zero.  Version-0 stats and worker info get only their own bytes.
 */
static void sized_steal_opts_and_stats(void)
{
	static unsigned char big[sizeof(struct knitk_pool_opts) + 16];
	struct knitk_pool_opts *o = (struct knitk_pool_opts *)big;
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER };
	unsigned char st[KNITK_POOL_STATS_SIZE_VER1 + 16];
	unsigned char wi[KNITK_WORKER_INFO_SIZE_VER1 + 16];
	struct knitk_pool *pool = NULL;
	struct knitk_call *c;
	uint64_t x = 1;
	uint32_t sz;
	unsigned int i;

	memset(big, 0, sizeof(big));
	o->nr_workers = 2;
	o->knot_flags = KNITK_KNOT_FUTEX;
	o->arena_bytes = 4096;
	o->dispatch = KNITK_POOL_DISPATCH_STEAL;
	o->size = (uint32_t)offsetof(struct knitk_pool_opts, steal_region);
	REQUIRE(knitk_pool_create(o, &test_tasks, &pool) == 0);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &pin, &c), -EINVAL);
	CHECK_EQ(mix_calls_good(pool, 3, NULL, 1, 1), 3);

	memset(st, 0xee, sizeof(st));
	sz = KNITK_POOL_STATS_SIZE_VER0;
	memcpy(st, &sz, 4);
	CHECK_EQ(knitk_pool_stats(pool, (struct knitk_pool_stats *)st), 0);
	memcpy(&sz, st, 4);
	CHECK_EQ(sz, KNITK_POOL_STATS_SIZE_VER0);
	for (i = KNITK_POOL_STATS_SIZE_VER0; i < sizeof(st); i++)
		if (st[i] != 0xee)
			break;
	CHECK_EQ(i, sizeof(st));

	memset(wi, 0xee, sizeof(wi));
	sz = KNITK_WORKER_INFO_SIZE_VER0;
	memcpy(wi, &sz, 4);
	CHECK_EQ(knitk_pool_worker_info(pool, 0, (struct knitk_worker_info *)wi), 0);
	memcpy(&sz, wi, 4);
	CHECK_EQ(sz, KNITK_WORKER_INFO_SIZE_VER0);
	for (i = KNITK_WORKER_INFO_SIZE_VER0; i < sizeof(wi); i++)
		if (wi[i] != 0xee)
			break;
	CHECK_EQ(i, sizeof(wi));
	CHECK_EQ(knitk_pool_worker_info(pool, 2, (struct knitk_worker_info *)wi), -EINVAL);
	knitk_pool_destroy(pool);

	o->size = sizeof(big);
	o->steal_region = 16;
	REQUIRE(knitk_pool_create(o, &test_tasks, &pool) == 0);
	knitk_pool_destroy(pool);
	big[sizeof(big) - 1] = 1;
	CHECK_EQ(knitk_pool_create(o, &test_tasks, &pool), -E2BIG);
	o->size = KNITK_POOL_OPTS_SIZE_VER0 - 1;
	CHECK_EQ(knitk_pool_create(o, &test_tasks, &pool), -EINVAL);
	o->size = KNITK_SIZED_MAX + 1;
	CHECK_EQ(knitk_pool_create(o, &test_tasks, &pool), -E2BIG);
}

/* The i32 result of @c. */
static int call_i32(struct knitk_call *c, pid_t *v)
{
	const void *d;
	size_t len;
	int32_t x;

	if (knitk_call_result(c, &d, &len) || len != sizeof(x))
		return -1;
	memcpy(&x, d, sizeof(x));
	*v = x;
	return 0;
}

/*
 * A stopped searcher (docs/protocol.md T12, T14): in a stealing pool of
 * two, both parked, one call wakes worker 0 (the lowest idle), which runs
 * it and then searches (polls, a long spin) while worker 1 stays parked.
 * Worker 0 is stopped there - SIGSTOP for a process, a debugger's stop of
 * its thread - keeping its searching bit, so no publish wakes worker 1:
 * the calls submitted now completed only after worker 0 continued.  Now
 * the thread waiting for them hands them to worker 1 before it parks, and
 * that wake is never spurious.
 */
static void steal_stopped_claimant(unsigned int kind)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind,
				     .nr_workers = 2, .knot_flags = KNITK_KNOT_FUTEX,
				     .arena_bytes = ARENA, .spin = 1U << 20,
				     .dispatch = KNITK_POOL_DISPATCH_STEAL };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_call *first, *late[8];
	struct knitk_pool_stats st;
	struct knitk_endpoint *ep;
	struct knitk_pool *pool;
	unsigned int round, i, bad = 0, on1 = 0;
	pid_t pid = 0, tid = 0;
	uint64_t spurious = 0;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	REQUIRE(knitk_pool_endpoint(pool, &ep) == 0);
	if (kind == KNITK_WORKER_THREADS) {
		/* Worker 0's thread: the one a call to the parked pool wakes. */
		wait_workers_parked(ep, 2);
		REQUIRE(knitk_pool_submit(pool, T_TID, NULL, 0, NULL, &first) == 0);
		REQUIRE(knitk_call_wait(first, KNITK_WAIT_FOREVER) == 0);
		REQUIRE(call_i32(first, &tid) == 0);
		REQUIRE(knitk_call_worker(first) == 0);
		knitk_call_release(first);
		pid = getpid();
	} else {
		REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0 && wi.pid > 0);
		pid = tid = wi.pid;
	}
	for (round = 0; round < 4; round++) {
		struct freezer fz = { -1, -1, -1 };
		uint64_t x = 7000 + round;

		if (kind == KNITK_WORKER_THREADS)
			REQUIRE(freezer_start(&fz, tid) == 0);
		wait_workers_parked(ep, 2);
		/* A call to a parked pool goes to worker 0 (T12). */
		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &first) == 0);
		REQUIRE(knitk_call_wait(first, KNITK_WAIT_FOREVER) == 0);
		CHECK(mix_result_ok(first, x));
		CHECK_EQ(knitk_call_worker(first), 0);
		knitk_call_release(first);
		/* Worker 0 searches now: stop it there. */
		if (kind == KNITK_WORKER_THREADS)
			REQUIRE(freezer_freeze(&fz) == 0);
		else
			REQUIRE(kill(pid, SIGSTOP) == 0);
		while (!task_stopped(pid, tid))
			sched_yield();
		CHECK(worker_parked(ep, 1));
		for (i = 0; i < 8; i++) {
			x = round * 1000 + i;
			REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &late[i]) == 0);
		}
		/* Hung here before T14: worker 1 was never woken. */
		REQUIRE(knitk_pool_wait_all(pool, late, 8, KNITK_WAIT_FOREVER) == 0);
		for (i = 0; i < 8; i++) {
			bad += !mix_result_ok(late[i], round * 1000 + i);
			on1 += knitk_call_worker(late[i]) == 1;
			knitk_call_release(late[i]);
		}
		if (kind == KNITK_WORKER_THREADS)
			CHECK_EQ(freezer_thaw(&fz), 0);
		else
			CHECK_EQ(kill(pid, SIGCONT), 0);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(on1, 4 * 8);
	for (i = 0; i < 2; i++) {
		memset(&wi, 0, sizeof(wi));
		wi.size = sizeof(wi);
		REQUIRE(knitk_pool_worker_info(pool, i, &wi) == 0);
		if (wi.db_valid)
			spurious += wi.db.spurious;
	}
	/* Worker 1 was woken only with the calls handed to it. */
	CHECK_EQ(spurious, 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(pool);
}

static void steal_stopped_claimant_processes(void)
{
	steal_stopped_claimant(KNITK_WORKER_PROCESSES);
}

static void steal_stopped_claimant_threads(void)
{
	steal_stopped_claimant(KNITK_WORKER_THREADS);
}

/* Legal stealing geometries, from the header's words alone. */
static int legal_g(unsigned int workers, unsigned int g)
{
	unsigned int best = 0, x;

	if (workers < 1 || workers > 63)
		return -EINVAL;
	for (x = 1; x <= 64; x <<= 1)
		if (64 / x >= workers + 1)
			best = x;
	if (!g)
		return (int)best;
	if (g & (g - 1) || g > 64 || 64 / g < workers + 1)
		return -EINVAL;
	return (int)g;
}

/*
 * knitk_steal_region_lanes over every worker count and region size, and
 * knitk_pool_create of a stealing pool for a selection: legal exactly
 * when the formula says, -EINVAL otherwise, and a refused create leaves
 * no fd behind.  The default worker count counts too.
 */
static void steal_geometry_matrix(void)
{
	static const unsigned int ws[] = { 1, 2, 3, 7, 31, 32, 63, 64 };
	static const unsigned int gs[] = { 0, 1, 2, 3, 4, 8, 16, 24, 32, 64, 128,
					   UINT_MAX, 1U << 31 };
	unsigned int w, g, i, j, wrong = 0;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int before = count_fds(false);

	for (w = 0; w <= 70; w++)
		for (g = 0; g <= 130; g++)
			wrong += knitk_steal_region_lanes(w, g) != legal_g(w, g);
	for (i = 0; i < sizeof(gs) / sizeof(gs[0]); i++)
		wrong += knitk_steal_region_lanes(5, gs[i]) != legal_g(5, gs[i]);
	CHECK_EQ(wrong, 0);

	for (i = 0; i < sizeof(ws) / sizeof(ws[0]); i++) {
		for (j = 0; j < sizeof(gs) / sizeof(gs[0]); j++) {
			struct knitk_pool_opts o = { .size = sizeof(o),
				.nr_workers = ws[i], .knot_flags = KNITK_KNOT_FUTEX,
				.arena_bytes = 4096,
				.dispatch = KNITK_POOL_DISPATCH_STEAL,
				.steal_region = gs[j] };
			struct knitk_pool *pool = NULL;
			int want = legal_g(ws[i], gs[j]) > 0 ? 0 : -EINVAL;
			int ret;

			/* Only the cheap ones run: the rest must fail. */
			if (!want && ws[i] > 7 && gs[j])
				continue;
			ret = knitk_pool_create(&o, &test_tasks, &pool);
			if (ret != want) {
				printf("# workers %u g %u: %d, expected %d\n",
				       ws[i], gs[j], ret, want);
				wrong++;
			}
			if (!ret) {
				uint64_t x = ws[i];
				struct knitk_call_opts pin = { .size = sizeof(pin),
					.flags = KNITK_CALL_WORKER };
				struct knitk_call *c = NULL;

				wrong += mix_calls_good(pool, 3, NULL, x, 1) != 3;
				wrong += knitk_pool_submit(pool, T_MIX, &x, 8, &pin, &c) != -EINVAL;
				knitk_pool_destroy(pool);
			}
		}
	}
	/* The default worker count (online CPUs) decides too. */
	for (g = 1; g <= 64; g <<= 1) {
		struct knitk_pool_opts o = { .size = sizeof(o),
			.knot_flags = KNITK_KNOT_FUTEX, .arena_bytes = 4096,
			.dispatch = KNITK_POOL_DISPATCH_STEAL, .steal_region = g };
		struct knitk_pool *pool = NULL;
		unsigned int def = cpus > 63 ? 63 : (unsigned int)cpus;
		int want = legal_g(def, g) > 0 ? 0 : -EINVAL;
		int ret = knitk_pool_create(&o, &test_tasks, &pool);

		if (ret != want) {
			printf("# default workers (%u) g %u: %d, expected %d\n",
			       def, g, ret, want);
			wrong++;
		}
		if (!ret)
			knitk_pool_destroy(pool);
	}
	/* An unknown dispatch, and stealing from a version-0 opts (none). */
	{
		struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 1,
			.knot_flags = KNITK_KNOT_FUTEX, .dispatch = 2 };
		struct knitk_pool *pool = NULL;

		wrong += knitk_pool_create(&o, &test_tasks, &pool) != -EINVAL;
		o.dispatch = UINT_MAX;
		wrong += knitk_pool_create(&o, &test_tasks, &pool) != -EINVAL;
	}
	CHECK_EQ(wrong, 0);
	CHECK_EQ(count_fds(false), before);
}

/*
 * A stealing pool carries a call and a result as large as the arena, in
 * event mode and not, thread and process workers; one byte more is
 * -EMSGSIZE (submit) and loses nothing.
 */
static void steal_arena_sized(unsigned int kind, int events)
{
	static unsigned char buf[ARENA + 1];
	static const size_t lens[] = { 0, 1, 191, 192, 193, 4096, ARENA - 1, ARENA };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c, *out[1];
	unsigned int i, bad = 0;

	REQUIRE(new_pool(kind, KNITK_POOL_DISPATCH_STEAL, 2, 0, &pool) == 0);
	if (events)
		REQUIRE(knitk_pool_event_fd(pool) >= 0);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		const void *d;
		size_t len;
		int s, n;

		REQUIRE(knitk_pool_submit(pool, T_ECHO, buf, lens[i], NULL, &c) == 0);
		if (events) {
			while ((n = knitk_pool_reap(pool, out, 1)) == 0)
				sched_yield();
			REQUIRE(n == 1 && out[0] == c);
		}
		s = knitk_call_wait(c, KNITK_WAIT_FOREVER);
		if (s != (int)0 || knitk_call_result(c, &d, &len) || len != lens[i] ||
		    (len && memcmp(d, buf, len))) {
			printf("# len %zu: status %d\n", lens[i], s);
			bad++;
		}
		knitk_call_release(c);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(knitk_pool_submit(pool, T_ECHO, buf, ARENA + 1, NULL, &c), -EMSGSIZE);
	{
		uint32_t fill[2] = { ARENA + 1, 0 };

		/* A result one byte too big: the call, not the pool, fails. */
		REQUIRE(knitk_pool_submit(pool, T_FILL, fill, 5, NULL, &c) == 0);
		if (events)
			while (knitk_pool_reap(pool, out, 1) == 0)
				sched_yield();
		CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -EMSGSIZE);
		knitk_call_release(c);
	}
	if (!events)
		CHECK_EQ(mix_calls_good(pool, 50, NULL, 1, 1), 50);
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(pool);
}

static void steal_arena_sized_threads(void)
{
	steal_arena_sized(KNITK_WORKER_THREADS, 0);
}

static void steal_arena_sized_threads_events(void)
{
	steal_arena_sized(KNITK_WORKER_THREADS, 1);
}

static void steal_arena_sized_processes(void)
{
	steal_arena_sized(KNITK_WORKER_PROCESSES, 0);
}

/*
 * knitk_endpoint_set_event_fd on raw endpoints: bad arguments, no write
 * for a ring the host's sleeping flag suppresses, one for a wake of a
 * sleeping host, none after -1.
 */
static void set_event_fd_raw(void)
{
	struct knitk_geometry g = { .nr_workers = 1, .nr_submitters = 1,
				    .lanes = KNITK_LANES, .inline_bytes = 64 };
	struct knitk_endpoint *host, *wk;
	struct knitk_producer *prod;
	struct knitk_wake_stats ws = { .size = sizeof(ws) };
	struct knitk_lane_header h = { .function_id = 1 };
	uint32_t seq;
	uint64_t v;
	int efd, ret;

	CHECK_EQ(knitk_endpoint_set_event_fd(NULL, -1), -EINVAL);
	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &wk) == 0);
	REQUIRE(knitk_endpoint_join(wk, KNITK_ROLE_WORKER, 0) >= 1);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	REQUIRE(efd >= 0);
	CHECK_EQ(knitk_endpoint_set_event_fd(wk, -2), -EINVAL);
	CHECK_EQ(knitk_endpoint_set_event_fd(wk, INT_MIN), -EINVAL);
	CHECK_EQ(knitk_endpoint_set_event_fd(wk, efd), 0);
	REQUIRE(knitk_producer_create(wk, (unsigned int)knitk_endpoint_return_mailbox(wk, 0),
				      &prod) == 0);
	/* Host awake: the ring is suppressed, nothing written. */
	REQUIRE(knitk_producer_send(prod, &h, "a", 1) >= 0);
	CHECK_EQ(knitk_producer_notify(prod), 0);
	CHECK_EQ(eventfd_value(efd, &v), 0);
	/* Host declared its sleep: one write for the wake, none for a second ring. */
	REQUIRE(knitk_doorbell_prepare(host, &seq) == 0);
	CHECK_EQ(knitk_producer_notify(prod), 1);
	CHECK_EQ(knitk_producer_notify(prod), 0);
	CHECK_EQ(eventfd_value(efd, &v), 1);
	CHECK_EQ(v, 1);
	CHECK_EQ(knitk_doorbell_wait(host, seq, KNITK_WAIT_FOREVER), 0);
	CHECK_EQ(knitk_endpoint_wake_stats(wk, &ws), 0);
	CHECK_EQ(ws.event_writes, 1);
	/* Stopped: a wake writes nothing. */
	CHECK_EQ(knitk_endpoint_set_event_fd(wk, -1), 0);
	ret = knitk_doorbell_prepare(host, &seq);
	CHECK_EQ(ret, 0);
	CHECK_EQ(knitk_producer_notify(prod), 1);
	CHECK_EQ(eventfd_value(efd, &v), 0);
	knitk_doorbell_cancel(host);
	/* The module-only calls say so on the futex backend. */
	{
		struct knitk_doorbell_stats ds;

		CHECK_EQ(knitk_endpoint_doorbell_stats(host, KNITK_DOORBELL_HOST, &ds,
						       sizeof(ds)), -EOPNOTSUPP);
	}
	knitk_producer_destroy(prod);
	knitk_endpoint_destroy(wk);
	knitk_endpoint_destroy(host);
	close(efd);
}

/*
 * A death the host marks itself (knitk_endpoint_mark_dead, the pool's
 * pidfd path) while it has declared its sleep writes the host's own
 * event fd once; a second mark of the same role is -ENOENT and writes
 * nothing.
 */
static void set_event_fd_mark_dead(void)
{
	struct knitk_geometry g = { .nr_workers = 2, .nr_submitters = 1,
				    .lanes = KNITK_LANES };
	struct knitk_endpoint *host, *wk;
	uint32_t seq, dseq0 = 0, dseq = 0;
	uint64_t v, dead = 0;
	int efd;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &wk) == 0);
	REQUIRE(knitk_endpoint_join(wk, KNITK_ROLE_WORKER, 1) >= 1);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	REQUIRE(efd >= 0);
	CHECK_EQ(knitk_endpoint_set_event_fd(host, efd), 0);
	CHECK_EQ(knitk_endpoint_deaths(host, &dseq0, NULL), 0);
	REQUIRE(knitk_doorbell_prepare(host, &seq) == 0);
	CHECK_EQ(knitk_endpoint_mark_dead(host, 1), 0);
	CHECK_EQ(eventfd_value(efd, &v), 1);
	CHECK_EQ(v, 1);
	CHECK_EQ(knitk_doorbell_wait(host, seq, KNITK_WAIT_FOREVER), 0);
	CHECK_EQ(knitk_endpoint_deaths(host, &dseq, &dead), 0);
	CHECK_EQ(dseq, dseq0 + 1);
	CHECK_EQ(dead, 1ULL << 1);
	CHECK_EQ(knitk_endpoint_role(host, 1, NULL), 0);
	REQUIRE(knitk_doorbell_prepare(host, &seq) == 0);
	CHECK_EQ(knitk_endpoint_mark_dead(host, 1), -ENOENT);
	CHECK_EQ(knitk_endpoint_mark_dead(host, 0), -ENOENT);	/* never joined */
	CHECK_EQ(eventfd_value(efd, &v), 0);
	knitk_doorbell_cancel(host);
	CHECK_EQ(knitk_endpoint_set_event_fd(host, -1), 0);
	knitk_endpoint_destroy(wk);
	knitk_endpoint_destroy(host);
	close(efd);
}

/*
 * Bad arguments to every pool call, on a live stealing pool in event
 * mode: each is a negative errno (or, for the void calls, nothing), and
 * the pool loses nothing: the call made before them is still reaped with
 * its result and a new one goes through.
 */
static void bad_args_lose_nothing(void)
{
	struct knitk_call_opts bad_co = { .size = sizeof(bad_co), .reserved = 1 };
	struct knitk_call_opts bad_fl = { .size = sizeof(bad_fl), .flags = 1U << 7 };
	struct knitk_call_opts tiny = { .size = 4 };
	struct knitk_submission subs[2] = { { .fn = T_MIX, .len = 8 },
					    { .fn = T_MIX, .reserved = 1 } };
	struct knitk_pool_stats st;
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_endpoint *ep;
	struct knitk_call *c, *before, *out[4], *calls[2], *nulls[2] = { NULL, NULL };
	struct knitk_pool *pool;
	const void *d;
	size_t len;
	uint64_t x = 77;
	unsigned int kept = 0;
	int ret;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 2, 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &before) == 0);
	subs[0].in = &x;

	CHECK(knitk_pool_submit(NULL, T_MIX, &x, 8, NULL, &c) < 0);
	CHECK(knitk_pool_submit(pool, T_NR, &x, 8, NULL, &c) < 0);
	CHECK(knitk_pool_submit(pool, UINT32_MAX, &x, 8, NULL, &c) < 0);
	CHECK(knitk_pool_submit(pool, T_MIX, NULL, 8, NULL, &c) < 0);
	CHECK(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, NULL) < 0);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &bad_co, &c), -EINVAL);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &bad_fl, &c), -EINVAL);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &tiny, &c), -EINVAL);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, SIZE_MAX, NULL, &c), -EMSGSIZE);
	CHECK(knitk_pool_submit_batch(NULL, subs, 1, calls) < 0);
	CHECK(knitk_pool_submit_batch(pool, NULL, 1, calls) < 0);
	CHECK(knitk_pool_submit_batch(pool, subs, 1, NULL) < 0);
	ret = knitk_pool_submit_batch(pool, subs, 0, calls);
	CHECK(ret == 0 || ret == -EINVAL);
	/* One good, then a bad entry: one submitted, reaped below. */
	CHECK_EQ(knitk_pool_submit_batch(pool, subs, 2, calls), 1);
	CHECK_EQ(knitk_pool_submit_batch(pool, subs + 1, 1, calls + 1), -EINVAL);

	CHECK(knitk_call_wait(NULL, 0) < 0);
	CHECK(knitk_call_status(NULL) < 0);
	CHECK(knitk_call_result(NULL, &d, &len) < 0);
	CHECK(knitk_call_result(before, NULL, &len) < 0 ||
	      knitk_call_result(before, NULL, &len) == -EINPROGRESS);
	CHECK(knitk_call_abort(NULL) < 0);
	CHECK(knitk_call_worker(NULL) < 0);
	knitk_call_release(NULL);
	CHECK(knitk_pool_wait_any(NULL, &before, 1, 0) < 0);
	CHECK(knitk_pool_wait_any(pool, NULL, 1, 0) < 0);
	CHECK(knitk_pool_wait_any(pool, nulls, 2, 0) < 0);
	CHECK(knitk_pool_wait_all(pool, NULL, 1, 0) < 0);
	CHECK(knitk_pool_wait_all(pool, nulls, 2, 0) < 0);
	CHECK(knitk_pool_stats(NULL, &st) < 0);
	CHECK(knitk_pool_stats(pool, NULL) < 0);
	CHECK(knitk_pool_worker_info(pool, 2, &wi) < 0);
	CHECK(knitk_pool_worker_info(pool, UINT_MAX, &wi) < 0);
	CHECK(knitk_pool_worker_info(pool, 0, NULL) < 0);
	CHECK(knitk_pool_worker_info(NULL, 0, &wi) < 0);
	CHECK(knitk_pool_endpoint(NULL, &ep) < 0);
	CHECK(knitk_pool_endpoint(pool, NULL) < 0);
	CHECK(knitk_pool_event_fd(NULL) < 0);
	CHECK(knitk_pool_reap(NULL, out, 1) < 0);
	CHECK(knitk_pool_shutdown(NULL, KNITK_SHUTDOWN_DRAIN) < 0);
	CHECK_EQ(knitk_pool_shutdown(pool, 0), -EINVAL);
	CHECK_EQ(knitk_pool_shutdown(pool, 3), -EINVAL);
	CHECK(knitk_pool_call(NULL, T_MIX, &x, 8, NULL, out, 8, &len) < 0);
	CHECK(knitk_task_aborted(NULL) == -EINVAL);
	CHECK(knitk_reply_alloc(NULL, 8, (void **)&d) < 0);
	CHECK(knitk_reply_set(NULL, &x, 8) < 0);
	knitk_pool_destroy(NULL);

	/* Nothing lost: the two good calls come back, then a new one. */
	while (kept < 2) {
		ret = knitk_pool_reap(pool, out + kept, 4 - kept);
		REQUIRE(ret >= 0);
		kept += (unsigned int)ret;
		if (!ret)
			sched_yield();
	}
	CHECK_EQ(kept, 2);
	CHECK((out[0] == before && out[1] == calls[0]) ||
	      (out[1] == before && out[0] == calls[0]));
	CHECK(mix_result_ok(before, x) && mix_result_ok(calls[0], x));
	knitk_call_release(out[0]);
	knitk_call_release(out[1]);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c) == 0);
	while ((ret = knitk_pool_reap(pool, out, 4)) == 0)
		sched_yield();
	CHECK_EQ(ret, 1);
	CHECK(out[0] == c && mix_result_ok(c, x));
	knitk_call_release(c);
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, 3);
	CHECK_EQ(st.completed, 3);
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	knitk_pool_destroy(pool);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	if (argc > 2)
		setenv("TAP_ONLY", argv[2], 1);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		return 1;
	TEST(event_fd_processes_refused);
	TEST(event_fd_owned_by_pool);
	TEST(event_fd_first_call_race);
	TEST(event_fd_handover_writes_nothing);
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
	TEST(one_write_per_sleep);
	TEST(fork_child_closes_everything);
	TEST(signals_during_event_loop);
	TEST(event_deadline_seen_by_waiter_private);
	TEST(event_deadline_seen_by_waiter_steal);
	TEST(shutdown_while_reaping_private);
	TEST(shutdown_while_reaping_steal);
	TEST(pool_call_beside_reaper);
	TEST(steal_kill_during_drain);
	TEST(steal_kill_during_cancel);
	TEST(steal_stopped_claimant_processes);
	TEST(steal_stopped_claimant_threads);
	TEST(steal_geometry_matrix);
	TEST(sized_steal_opts_and_stats);
	TEST(steal_arena_sized_threads);
	TEST(steal_arena_sized_threads_events);
	TEST(steal_arena_sized_processes);
	TEST(bad_args_lose_nothing);
	TEST(set_event_fd_raw);
	TEST(set_event_fd_mark_dead);
	return tap_exit();
}
