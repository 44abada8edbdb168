// SPDX-License-Identifier: GPL-2.0
/*
 * Event mode on the futex backend: the event fd under epoll, reap, and the
 * rule that the eventfd is written only while the host waits on it.
 * argv[1]: number of calls of the epoll case (at most 10^5).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"

#define WINDOW	256
/* In-flight calls per worker (the pool keeps one lane for its stop message). */
#define POOL_CAP_TEST	(KNITK_LANES - 1)

static unsigned long nr_calls = 100000;

static int pool_new(unsigned int workers, struct knitk_pool **pool)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = workers,
				     .knot_flags = KNITK_KNOT_FUTEX };

	return knitk_pool_create(&o, &test_tasks, pool);
}

static uint64_t event_writes(struct knitk_pool *pool)
{
	struct knitk_pool_stats st = { .size = sizeof(st) };

	if (knitk_pool_stats(pool, &st))
		return ~0ULL;
	return st.event_writes;
}

/* Wait (epoll, edge-triggered) for the next edge of @fd. */
static int epoll_for(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	int ep = epoll_create1(EPOLL_CLOEXEC), n;

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		return -1;
	n = epoll_wait(ep, &ev, 1, -1);
	close(ep);
	return n;
}

/* 10^5 echo calls through one epoll loop: each reaped once, none lost. */
static void epoll_loop(void)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	struct echo_loop r;
	int fd, ep, ret;

	REQUIRE(pool_new(2, &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	CHECK_EQ(knitk_pool_event_fd(pool), fd);
	ep = epoll_create1(EPOLL_CLOEXEC);
	REQUIRE(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	ret = echo_loop(pool, ep, nr_calls, WINDOW, &r);
	if (ret)
		printf("# %s: %d\n", r.failed, ret);
	REQUIRE(ret == 0);
	CHECK_EQ(r.reaped, nr_calls);
	CHECK_EQ(r.bad, 0);
	CHECK_EQ(r.dup, 0);
	CHECK_EQ(r.once, nr_calls);
	REQUIRE(knitk_pool_stats(pool, &st) == 0);
	CHECK_EQ(st.completed, nr_calls);
	printf("# %lu calls, %llu event fd writes, %lu submits at capacity\n",
	       nr_calls, (unsigned long long)st.event_writes, r.again);
	/* Not one write per result: the loop was busy for most of them. */
	CHECK(st.event_writes < nr_calls);
	close(ep);
	knitk_pool_destroy(pool);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L };

	nanosleep(&ts, NULL);
}

/*
 * No write while no host thread waits: not while results arrive unreaped,
 * not while the armed loop is idle; one for the one result that comes
 * while it waits.
 */
static void no_write_unless_waiting(void)
{
	struct knitk_call *calls[64];
	struct knitk_pool *pool;
	unsigned int i, got = 0, results = 0;
	int fd, n;

	REQUIRE(pool_new(2, &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	for (i = 0; i < 100; i++) {
		uint64_t x = i;
		struct knitk_call *c;

		REQUIRE(knitk_pool_submit(pool, T_ECHO, &x, sizeof(x), NULL, &c) == 0);
	}
	/* The results are published, the host does not wait: no write. */
	while (results_pending(pool, 2) < 100)
		sleep_ms(1);
	CHECK_EQ(event_writes(pool), 0);
	while ((n = knitk_pool_reap(pool, calls, 64)) > 0) {
		for (i = 0; i < (unsigned int)n; i++)
			knitk_call_release(calls[i]);
		got += (unsigned int)n;
	}
	CHECK_EQ(n, 0);
	CHECK_EQ(got, 100);
	/* Armed and idle: still none. */
	sleep_ms(20);
	CHECK_EQ(event_writes(pool), 0);
	/* One result while armed: one edge, one write. */
	{
		uint64_t x = 7;
		struct knitk_call *c;

		REQUIRE(knitk_pool_submit(pool, T_ECHO, &x, sizeof(x), NULL, &c) == 0);
	}
	CHECK_EQ(epoll_for(fd), 1);
	CHECK_EQ(event_writes(pool), 1);
	while ((n = knitk_pool_reap(pool, calls, 64)) > 0) {
		for (i = 0; i < (unsigned int)n; i++)
			knitk_call_release(calls[i]);
		results += (unsigned int)n;
	}
	CHECK_EQ(results, 1);
	knitk_pool_destroy(pool);
}

struct waiter {
	struct knitk_call *call;
	int status;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->status = knitk_call_wait(w->call, KNITK_WAIT_FOREVER);
	return NULL;
}

/*
 * The contract around reap: arguments, a released call is never reaped,
 * another thread's wait ends through the loop's reap, a submit at
 * capacity is -EAGAIN.
 */
static void reap_contract(void)
{
	struct knitk_call *calls[POOL_CAP_TEST + 1], *c, *out[4];
	struct waiter wt = { .status = 1 };
	struct knitk_pool *pool;
	pthread_t th;
	uint32_t ms = 10000;
	uint64_t x = 42;
	unsigned int i, total = 0;
	int n;

	REQUIRE(pool_new(1, &pool) == 0);
	CHECK_EQ(knitk_pool_reap(pool, out, 4), -EINVAL);	/* not in event mode */
	CHECK_EQ(knitk_pool_event_fd(NULL), -EINVAL);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	CHECK_EQ(knitk_pool_reap(NULL, out, 4), -EINVAL);
	CHECK_EQ(knitk_pool_reap(pool, NULL, 4), -EINVAL);
	CHECK_EQ(knitk_pool_reap(pool, out, 0), 0);
	CHECK_EQ(knitk_pool_reap(pool, out, 4), 0);

	/* Another thread waits; the loop's reap completes its call. */
	REQUIRE(knitk_pool_submit(pool, T_ECHO, &x, sizeof(x), NULL, &wt.call) == 0);
	REQUIRE(pthread_create(&th, NULL, waiter_main, &wt) == 0);
	while ((n = knitk_pool_reap(pool, out, 4)) == 0)
		epoll_for(knitk_pool_event_fd(pool));
	CHECK_EQ(n, 1);
	CHECK(out[0] == wt.call);
	pthread_join(th, NULL);
	CHECK_EQ(wt.status, 0);
	knitk_call_release(wt.call);

	/* Fill the worker: the next submit does not wait, it is -EAGAIN. */
	for (i = 0; i < POOL_CAP_TEST; i++)
		REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL,
					  &calls[i]) == 0);
	CHECK_EQ(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL, &c), -EAGAIN);
	/* Released (aborted) calls are never reaped. */
	for (i = 0; i < POOL_CAP_TEST; i += 2)
		knitk_call_release(calls[i]);
	for (i = 1; i < POOL_CAP_TEST; i += 2)
		CHECK_EQ(knitk_call_abort(calls[i]), 0);
	while ((n = knitk_pool_reap(pool, out, 4)) > 0) {
		int k;

		for (k = 0; k < n; k++) {
			for (i = 0; i < POOL_CAP_TEST; i += 2)
				CHECK(out[k] != calls[i]);
			CHECK_EQ(knitk_call_status(out[k]), -ECANCELED);
			knitk_call_release(out[k]);
		}
		total += (unsigned int)n;
	}
	CHECK_EQ(total, POOL_CAP_TEST / 2);
	knitk_pool_destroy(pool);
}

/*
 * A call released while queued for reap gives its handle back to the
 * pool, which hands it to the next submit: the reap queue never returns
 * the recycled handle before its new call is done, nor twice, and a
 * reaped call's small and large results are its own.
 */
static void reap_recycled(void)
{
	unsigned char big[200], small[8];
	struct knitk_call *c1, *c2, *c3, *c4, *out[4];
	const void *data;
	struct knitk_pool *pool;
	unsigned int i, got3 = 0, got4 = 0;
	size_t len;
	int n;

	memset(big, 0xa5, sizeof(big));
	memset(small, 0x3c, sizeof(small));
	REQUIRE(pool_new(1, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	REQUIRE(knitk_pool_submit(pool, T_ECHO, small, sizeof(small), NULL, &c1) == 0);
	REQUIRE(knitk_pool_submit(pool, T_ECHO, small, sizeof(small), NULL, &c2) == 0);
	while (results_pending(pool, 1) < 2)
		sleep_ms(1);
	/* One drain completes both; the reap takes one, the other stays queued. */
	CHECK_EQ(knitk_pool_reap(pool, out, 1), 1);
	CHECK(out[0] == c1 || out[0] == c2);
	/* The queued one last, so that the next submit gets its handle. */
	knitk_call_release(out[0]);
	knitk_call_release(out[0] == c1 ? c2 : c1);
	REQUIRE(knitk_pool_submit(pool, T_ECHO, small, sizeof(small), NULL, &c3) == 0);
	REQUIRE(knitk_pool_submit(pool, T_ECHO, big, sizeof(big), NULL, &c4) == 0);
	while (got3 + got4 < 2) {
		n = knitk_pool_reap(pool, out, 4);
		REQUIRE(n >= 0);
		if (!n)
			epoll_for(knitk_pool_event_fd(pool));
		for (i = 0; i < (unsigned int)n; i++) {
			REQUIRE(out[i] == c3 || out[i] == c4);
			CHECK_EQ(knitk_call_status(out[i]), 0);
			CHECK_EQ(knitk_call_result(out[i], &data, &len), 0);
			if (out[i] == c3) {
				got3++;
				CHECK_EQ(len, sizeof(small));
				CHECK(len == sizeof(small) && !memcmp(data, small, len));
			} else {
				got4++;
				CHECK_EQ(len, sizeof(big));
				CHECK(len == sizeof(big) && !memcmp(data, big, len));
			}
		}
	}
	CHECK_EQ(got3, 1);
	CHECK_EQ(got4, 1);
	CHECK_EQ(knitk_pool_reap(pool, out, 4), 0);
	knitk_call_release(c3);
	knitk_call_release(c4);
	knitk_pool_destroy(pool);
}

int main(int argc, char **argv)
{
	if (pool_test_start(argc, argv, &test_tasks, &nr_calls, 100000))
		return 2;
	TEST(epoll_loop);
	TEST(no_write_unless_waiting);
	TEST(reap_contract);
	TEST(reap_recycled);
	return tap_exit();
}
