// SPDX-License-Identifier: GPL-2.0
/*
 * Deadlines and waits: far deadlines are not past, past deadlines end at
 * once, duplicate handles in the waits, a long batch to one worker, a
 * batch that stops at bad sized opts, and every kind of call deadline,
 * before and while the call runs.
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
 * Deadlines far in the future (2^63 and beyond, up to one below
 * KNITK_WAIT_FOREVER) are deadlines that have not passed: a call with one
 * runs and returns its result, a wait with one waits for the call.
 */
static void far_deadlines_are_not_past(void)
{
	static const uint64_t far[] = {
		1ULL << 63, (1ULL << 63) + 1, (1ULL << 63) - 1,
		KNITK_WAIT_FOREVER - 1, 1ULL << 62,
	};
	struct knitk_pool *pool;
	unsigned int i;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	for (i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
		struct knitk_call_opts co = { .size = sizeof(co),
					      .deadline_ns = far[i] };
		uint32_t ms = 30;
		struct knitk_call *c;
		uint64_t x = i, y = 0;
		size_t len = 0;

		CHECK_EQ(knitk_pool_call(pool, T_MIX, &x, 8, &co, &y, 8, &len), 0);
		CHECK_EQ(y, mix64(x));
		REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c) == 0);
		CHECK_EQ(knitk_call_wait(c, far[i]), 30);
		knitk_call_release(c);
		REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c) == 0);
		CHECK_EQ(knitk_pool_wait_any(pool, &c, 1, far[i]), 0);
		CHECK_EQ(knitk_call_status(c), 30);
		knitk_call_release(c);
		REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c) == 0);
		CHECK_EQ(knitk_pool_wait_all(pool, &c, 1, far[i]), 0);
		CHECK_EQ(knitk_call_status(c), 30);
		knitk_call_release(c);
	}
	knitk_pool_destroy(pool);
}

/*
 * A deadline already past at submit: the call completes -ETIMEDOUT
 * (never runs), a wait of deadline 1 (long past) returns -EINPROGRESS at
 * once for a running call, and none of it disturbs the next calls.
 */
static void past_deadlines(void)
{
	struct knitk_call_opts co = { .size = sizeof(co), .deadline_ns = 1 };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c, *d;
	uint32_t ms = 200;
	uint64_t x = 5;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, &co, &c) == 0);
	CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -ETIMEDOUT);
	knitk_call_release(c);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &d) == 0);
	CHECK_EQ(knitk_call_wait(d, 1), -EINPROGRESS);
	CHECK_EQ(knitk_pool_wait_any(pool, &d, 1, 1), -EINPROGRESS);
	CHECK_EQ(knitk_pool_wait_all(pool, &d, 1, 0), -EINPROGRESS);
	CHECK_EQ(knitk_call_abort(d), 0);
	CHECK_EQ(knitk_call_wait(d, 0), -ECANCELED);
	knitk_call_release(d);
	CHECK_EQ(mix_calls_good(pool, 20, NULL, 1, 1), 20);
	pool_stats(pool, &st);
	CHECK_EQ(st.timedout, 1);
	CHECK_EQ(st.canceled, 1);
	knitk_pool_destroy(pool);
}

/*
 * The same handle twice in one knitk_pool_wait_any / _wait_all is one
 * call waited for twice: the waits return when it completes.
 */
static void duplicate_handles_in_waits(void)
{
	struct knitk_call *c[4];
	struct knitk_pool *pool;
	uint32_t ms = 20;
	int r;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 2,
			 0, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c[0]) == 0);
	c[1] = c[0];
	c[2] = c[0];
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c[3]) == 0);
	CHECK_EQ(knitk_pool_wait_all(pool, c, 4, KNITK_WAIT_FOREVER), 0);
	CHECK_EQ(knitk_call_status(c[0]), 20);
	CHECK_EQ(knitk_call_status(c[3]), 20);
	r = knitk_pool_wait_any(pool, c, 3, KNITK_WAIT_FOREVER);
	CHECK(r >= 0 && r < 3);
	knitk_call_release(c[0]);
	knitk_call_release(c[3]);
	knitk_pool_destroy(pool);
}

/*
 * A batch of 300 calls to one worker (more than its 63 in flight, in
 * runs of 64) submits them all, and they run in array order; so do 300
 * pinned to one of two workers.
 */
static void long_batch_to_one_worker(void)
{
	static struct knitk_submission subs[300];
	static struct knitk_call *calls[300];
	struct knitk_call_opts co = { .size = sizeof(co),
				      .flags = KNITK_CALL_WORKER, .worker = 1 };
	struct knitk_pool *pool;
	unsigned int i, w;
	uint64_t prev = 0;

	for (w = 1; w <= 2; w++) {
		REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE,
				 w, 0, &pool) == 0);
		for (i = 0; i < 300; i++)
			subs[i] = (struct knitk_submission){
				.fn = T_SEQ, .opts = w == 2 ? &co : NULL };
		CHECK_EQ(knitk_pool_submit_batch(pool, subs, 300, calls), 300);
		CHECK_EQ(knitk_pool_wait_all(pool, calls, 300, KNITK_WAIT_FOREVER), 0);
		for (i = 0; i < 300; i++) {
			const void *d;
			uint64_t n = 0;
			size_t len;

			CHECK_EQ(knitk_call_status(calls[i]), 0);
			if (!knitk_call_result(calls[i], &d, &len) && len == 8)
				memcpy(&n, d, 8);
			if (i)
				CHECK(n > prev);
			prev = n;
			if (w == 2)
				CHECK_EQ(knitk_call_worker(calls[i]), 1);
			knitk_call_release(calls[i]);
		}
		knitk_pool_destroy(pool);
	}
}

/*
 * A batch whose entry 5 has call options the sized-struct rule refuses
 * (too small, too large, a non-zero tail) submits entries 0..4 and
 * returns 5, and those run; the refused entry takes no room.
 */
static void batch_stops_at_bad_sized_opts(void)
{
	unsigned char raw[KNITK_SIZED_MAX + 16] __attribute__((aligned(8)));
	struct knitk_call_opts *co = (void *)raw;
	struct knitk_submission subs[8];
	struct knitk_call *calls[8];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	uint64_t x[8];
	unsigned int i, k;
	int ret;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	for (k = 0; k < 4; k++) {
		memset(raw, 0, sizeof(raw));
		switch (k) {
		case 0: co->size = KNITK_CALL_OPTS_SIZE_VER0 - 1; ret = -EINVAL; break;
		case 1: co->size = KNITK_SIZED_MAX + 8; ret = -E2BIG; break;
		case 2: co->size = 64; raw[40] = 1; ret = -E2BIG; break;
		default: co->size = KNITK_SIZED_MAX; ret = 0; break;
		}
		for (i = 0; i < 8; i++) {
			x[i] = i + 100 * k;
			subs[i] = (struct knitk_submission){
				.fn = T_MIX, .in = &x[i], .len = 8,
				.opts = i == 5 ? co : NULL };
		}
		CHECK_EQ(knitk_pool_submit(pool, T_MIX, x, 8, co, &calls[0]), ret);
		if (!ret) {
			knitk_call_wait(calls[0], KNITK_WAIT_FOREVER);
			knitk_call_release(calls[0]);
		}
		CHECK_EQ(knitk_pool_submit_batch(pool, subs, 8, calls), ret ? 5 : 8);
		for (i = 0; i < (ret ? 5U : 8U); i++) {
			CHECK_EQ(knitk_call_wait(calls[i], KNITK_WAIT_FOREVER), 0);
			CHECK(mix_result_ok(calls[i], x[i]));
			knitk_call_release(calls[i]);
		}
		/* As the first entry: the error itself. */
		if (ret)
			CHECK_EQ(knitk_pool_submit_batch(pool, &subs[5], 1, calls), ret);
	}
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, 3 * 5 + 8 + 1);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(pool);
}

/*
 * Every kind of call deadline: none (0), long past (1), now, far and
 * KNITK_WAIT_FOREVER; a running call passing its deadline completes
 * -ETIMEDOUT while short waits on it still say -EINPROGRESS, and the
 * worker gives the task up for the next call.
 */
static void deadlines(void)
{
	struct knitk_call_opts o = { .size = sizeof(o) };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_call *c;
	uint32_t ms = 5000;
	struct knitk_pool *p;
	uint64_t x = 42, y = 0;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &p) == 0);
	o.deadline_ns = 0;		/* none */
	CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, &o, &y, 8, NULL), 0);
	CHECK_EQ(y, 42);
	o.deadline_ns = 1;		/* long past */
	CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, &o, &y, 8, NULL),
		 -ETIMEDOUT);
	o.deadline_ns = tap_now_ns();	/* now: past by the time it runs */
	CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, &o, &y, 8, NULL),
		 -ETIMEDOUT);
	o.deadline_ns = UINT64_MAX - 1;	/* far */
	y = 0;
	CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, &o, &y, 8, NULL), 0);
	CHECK_EQ(y, 42);
	o.deadline_ns = KNITK_WAIT_FOREVER;
	y = 0;
	CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, &o, &y, 8, NULL), 0);
	CHECK_EQ(y, 42);

	/* A running call passes its deadline: -ETIMEDOUT, task told. */
	o.deadline_ns = after_ms(100);
	REQUIRE(knitk_pool_submit(p, T_SLEEP, &ms, 4, &o, &c) == 0);
	CHECK_EQ(knitk_call_wait(c, 0), -EINPROGRESS);
	CHECK_EQ(knitk_call_wait(c, 1), -EINPROGRESS);
	CHECK_EQ(knitk_pool_wait_any(p, &c, 1, 1), -EINPROGRESS);
	CHECK_EQ(knitk_pool_wait_all(p, &c, 1, 0), -EINPROGRESS);
	CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -ETIMEDOUT);
	CHECK_EQ(knitk_pool_wait_any(p, &c, 1, 0), 0);
	CHECK_EQ(knitk_pool_wait_all(p, &c, 1, 1), 0);
	knitk_call_release(c);
	/* The worker gave up the task: the next call runs. */
	CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, NULL, &y, 8, NULL), 0);
	CHECK_EQ(knitk_pool_stats(p, &st), 0);
	CHECK_EQ(st.timedout, 3);
	knitk_pool_destroy(p);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(far_deadlines_are_not_past);
	TEST(past_deadlines);
	TEST(duplicate_handles_in_waits);
	TEST(long_batch_to_one_worker);
	TEST(batch_stops_at_bad_sized_opts);
	TEST(deadlines);
	return tap_exit();
}
