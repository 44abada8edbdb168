// SPDX-License-Identifier: GPL-2.0
/*
 * knitk_pool_submit_batch: a batch is registered and published a run at a
 * time, and keeps every contract of a loop of knitk_pool_submit calls:
 * order, backpressure (in-flight cap and arena), per-call deadlines,
 * aborts and worker pins, the first bad entry, shutdown and event mode.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"

#define BIG		1000	/* argument bytes: in the arena, 4 fit at once */
#define NR_BIG		200	/* more than a run, more than a worker's cap */

static struct knitk_pool *make_pool(unsigned int workers, uint64_t arena)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .nr_workers = workers, .inline_bytes = 64,
		.arena_bytes = arena,
	};
	struct knitk_pool *pool;

	return knitk_pool_create(&o, &test_tasks, &pool) ? NULL : pool;
}

/*
 * One batch of 200 arena-sized echoes into one worker whose request arena
 * holds 4 and whose cap is 63: the batch blocks (never fails) through the
 * full arena and the full worker, and every result is its own argument.
 */
static void batch_backpressure(void)
{
	struct knitk_pool *pool = make_pool(1, 4096);
	struct knitk_pool_stats st = { .size = sizeof(st) };
	static unsigned char in[NR_BIG][BIG];
	struct knitk_submission subs[NR_BIG];
	struct knitk_call *c[NR_BIG];
	unsigned int i, good = 0;
	const void *d;
	size_t len;

	REQUIRE(pool);
	for (i = 0; i < NR_BIG; i++) {
		memset(in[i], (int)(i * 7 + 1), BIG);
		in[i][0] = (unsigned char)(i >> 8);
		in[i][1] = (unsigned char)i;
		subs[i] = (struct knitk_submission){ .fn = T_ECHO, .in = in[i], .len = BIG };
	}
	CHECK_EQ(knitk_pool_submit_batch(pool, subs, NR_BIG, c), NR_BIG);
	CHECK_EQ(knitk_pool_wait_all(pool, c, NR_BIG, KNITK_WAIT_FOREVER), 0);
	for (i = 0; i < NR_BIG; i++) {
		if (knitk_call_status(c[i]) == 0 &&
		    knitk_call_result(c[i], &d, &len) == 0 && len == BIG &&
		    !memcmp(d, in[i], BIG))
			good++;
		knitk_call_release(c[i]);
	}
	CHECK_EQ(good, NR_BIG);
	CHECK_EQ(knitk_pool_stats(pool, &st), 0);
	CHECK_EQ(st.submitted, NR_BIG);
	CHECK_EQ(st.completed, NR_BIG);
	knitk_pool_destroy(pool);
}

/* One worker runs a batch's calls in the order of the array. */
static void batch_order(void)
{
	struct knitk_pool *pool = make_pool(1, 0);
	struct knitk_submission subs[150];
	struct knitk_call *c[150];
	uint64_t first = 0, n;
	unsigned int i, in_order = 0;
	const void *d;
	size_t len;

	REQUIRE(pool);
	for (i = 0; i < 150; i++)
		subs[i] = (struct knitk_submission){ .fn = T_SEQ };
	CHECK_EQ(knitk_pool_submit_batch(pool, subs, 150, c), 150);
	CHECK_EQ(knitk_pool_wait_all(pool, c, 150, KNITK_WAIT_FOREVER), 0);
	for (i = 0; i < 150; i++) {
		if (knitk_call_result(c[i], &d, &len) == 0 && len == sizeof(n)) {
			memcpy(&n, d, sizeof(n));
			if (!i)
				first = n;
			in_order += n == first + i;
		}
		knitk_call_release(c[i]);
	}
	CHECK_EQ(in_order, 150);
	knitk_pool_destroy(pool);
}

/*
 * Per-call options in one batch: an expired deadline, an abort after the
 * submit, a pin to worker 1, a task error; the other calls are untouched.
 */
static void batch_deadlines_aborts(void)
{
	struct knitk_pool *pool = make_pool(2, 0);
	struct knitk_call_opts late = { .size = sizeof(late), .deadline_ns = 1 };
	struct knitk_call_opts pin = {
		.size = sizeof(pin), .flags = KNITK_CALL_WORKER, .worker = 1,
	};
	uint64_t x[3] = { 11, 22, 33 }, y;
	uint32_t ms = 60000;
	int32_t err = 5;
	struct knitk_submission subs[6] = {
		{ .fn = T_MIX, .in = &x[0], .len = 8 },
		{ .fn = T_MIX, .in = &x[1], .len = 8, .opts = &late },
		{ .fn = T_SLEEP, .in = &ms, .len = 4 },
		{ .fn = T_MIX, .in = &x[2], .len = 8, .opts = &pin },
		{ .fn = T_FAIL, .in = &err, .len = 4 },
		{ .fn = T_MIX, .in = &x[0], .len = 8 },
	};
	struct knitk_call *c[6];
	const void *d;
	size_t len;
	unsigned int i;

	REQUIRE(pool);
	REQUIRE(knitk_pool_submit_batch(pool, subs, 6, c) == 6);
	CHECK_EQ(knitk_call_abort(c[2]), 0);
	CHECK_EQ(knitk_pool_wait_all(pool, c, 6, KNITK_WAIT_FOREVER), 0);
	CHECK_EQ(knitk_call_status(c[1]), -ETIMEDOUT);
	CHECK_EQ(knitk_call_status(c[2]), -ECANCELED);
	CHECK_EQ(knitk_call_worker(c[3]), 1);
	CHECK_EQ(knitk_call_status(c[4]), -5);
	/* The others: their own results. */
	for (i = 0; i < 3; i++) {
		static const unsigned int idx[3] = { 0, 3, 5 }, arg[3] = { 0, 2, 0 };

		CHECK_EQ(knitk_call_status(c[idx[i]]), 0);
		REQUIRE(knitk_call_result(c[idx[i]], &d, &len) == 0 && len == 8);
		memcpy(&y, d, 8);
		CHECK(y == mix64(x[arg[i]]));
	}
	for (i = 0; i < 6; i++)
		knitk_call_release(c[i]);
	knitk_pool_destroy(pool);
}

/*
 * Event mode never waits: a batch larger than the worker's cap submits
 * exactly the cap (63) and says so; those calls are all reaped with their
 * results, and a batch after shutdown is -ESHUTDOWN.
 */
static void batch_event_mode(void)
{
	struct knitk_pool *pool = make_pool(1, 0);
	struct knitk_submission subs[100];
	struct knitk_call *c[100], *got[64];
	uint64_t x[100], y;
	unsigned int i, reaped = 0, good = 0;
	struct pollfd pfd;
	const void *d;
	size_t len;
	int n;

	REQUIRE(pool);
	pfd.fd = knitk_pool_event_fd(pool);
	pfd.events = POLLIN;
	REQUIRE(pfd.fd >= 0);
	for (i = 0; i < 100; i++) {
		x[i] = 1000 + i;
		subs[i] = (struct knitk_submission){ .fn = T_MIX, .in = &x[i], .len = 8 };
	}
	CHECK_EQ(knitk_pool_submit_batch(pool, subs, 100, c), 63);
	while (reaped < 63) {
		n = knitk_pool_reap(pool, got, 64);
		REQUIRE(n >= 0);
		if (!n) {
			poll(&pfd, 1, -1);
			continue;
		}
		while (n--) {
			for (i = 0; i < 63 && c[i] != got[n]; i++)
				;
			if (i < 63 && knitk_call_result(got[n], &d, &len) == 0 &&
			    len == 8) {
				memcpy(&y, d, 8);
				good += y == mix64(x[i]);
			}
			knitk_call_release(got[n]);
			reaped++;
		}
	}
	CHECK_EQ(good, 63);
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	CHECK_EQ(knitk_pool_submit_batch(pool, subs, 2, c), -ESHUTDOWN);
	knitk_pool_destroy(pool);
}

/* A batch stops at its first bad entry; the calls before it are live. */
static void batch_with_bad_entry(void)
{
	struct knitk_pool *p = make_pool(2, 0);
	uint64_t x = 5;
	struct knitk_submission subs[3] = {
		{ .fn = T_ECHO, .in = &x, .len = 8 },
		{ .fn = T_NR + 7, .in = &x, .len = 8 },
		{ .fn = T_ECHO, .in = &x, .len = 8 },
	};
	struct knitk_call *c[3] = { NULL, NULL, NULL };
	const void *d;
	size_t len;

	REQUIRE(p);
	CHECK_EQ(knitk_pool_submit_batch(p, subs, 3, c), 1);
	REQUIRE(c[0]);
	CHECK_EQ(knitk_call_wait(c[0], KNITK_WAIT_FOREVER), 0);
	CHECK(knitk_call_result(c[0], &d, &len) == 0 && len == 8 &&
	      !memcmp(d, &x, 8));
	knitk_call_release(c[0]);
	CHECK_EQ(knitk_pool_submit_batch(p, subs + 1, 2, c), -EINVAL);
	knitk_pool_destroy(p);
}

int main(void)
{
	TEST(batch_backpressure);
	TEST(batch_order);
	TEST(batch_deadlines_aborts);
	TEST(batch_event_mode);
	TEST(batch_with_bad_entry);
	return tap_exit();
}
