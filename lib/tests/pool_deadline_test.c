// SPDX-License-Identifier: GPL-2.0
/*
 * Deadlines and abort: expired and aborted calls complete exactly once with
 * the right code, the worker skips what already expired, and late results
 * are dropped without touching later calls.  argv[1]: calls of the mixed
 * abort case.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "backpressure.h"
#include "tap.h"

static unsigned long nr_calls = 20000;

/* Thread workers count the tasks they really ran (task_data). */
static int task_count(const void *in, size_t len, struct knitk_reply *out,
		      void *ctx)
{
	atomic_fetch_add((_Atomic unsigned long *)knitk_task_data(ctx), 1);
	return task_echo(in, len, out, ctx);
}

static const knitk_task_fn fns[] = { TEST_TASK_FNS, [T_NR] = task_count };
static const struct knitk_task_table tasks = { .tasks = fns, .nr_tasks = T_NR + 1 };
#define T_COUNT T_NR

static _Atomic unsigned long ran;

/* Wait (untimed: the watchdog catches a hang) for the stale drop count. */
static void wait_stale(struct knitk_pool *pool, uint64_t n)
{
	struct knitk_pool_stats st = { .size = sizeof(st) };

	for (;;) {
		knitk_pool_stats(pool, &st);
		if (st.stale >= n)
			return;
		sched_yield();
	}
}

/* Some correct calls after the disturbance. */
static void check_clean_calls(struct knitk_pool *pool, unsigned int n)
{
	CHECK_EQ(mix_calls_good(pool, n, NULL, 5, 977), n);
}

static void deadline_expires(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .nr_workers = 1, .task_data = (void *)&ran };
	struct knitk_call_opts co = { .size = sizeof(co) };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint32_t ms = 300;

	REQUIRE(knitk_pool_create(&o, &tasks, &pool) == 0);
	co.deadline_ns = after_ms(30);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, &co, &c) == 0);
	CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -ETIMEDOUT);
	CHECK_EQ(knitk_call_status(c), -ETIMEDOUT);
	CHECK_EQ(knitk_call_abort(c), -EALREADY);
	/* The task sees its deadline too and stops early; its result is dropped. */
	wait_stale(pool, 1);
	CHECK_EQ(knitk_call_status(c), -ETIMEDOUT);
	knitk_call_release(c);
	check_clean_calls(pool, 1000);
	knitk_pool_stats(pool, &st);
	CHECK_EQ(st.timedout, 1);
	CHECK_EQ(st.completed, 1001);
	CHECK_EQ(st.stale, 1);
	knitk_pool_destroy(pool);
}

/* Calls queued behind a long one expire in the queue and are never run. */
static void expired_are_skipped(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .nr_workers = 1, .task_data = (void *)&ran };
	struct knitk_call_opts co = { .size = sizeof(co) };
	struct knitk_call *slow, *c[8];
	struct knitk_pool *pool;
	uint32_t ms = 500;
	unsigned int i;

	atomic_store(&ran, 0);
	REQUIRE(knitk_pool_create(&o, &tasks, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &slow) == 0);
	co.deadline_ns = after_ms(10);
	for (i = 0; i < 8; i++)
		REQUIRE(knitk_pool_submit(pool, T_COUNT, "x", 1, &co, &c[i]) == 0);
	CHECK_EQ(knitk_pool_wait_all(pool, c, 8, KNITK_WAIT_FOREVER), 0);
	for (i = 0; i < 8; i++) {
		CHECK_EQ(knitk_call_status(c[i]), -ETIMEDOUT);
		knitk_call_release(c[i]);
	}
	CHECK_EQ(knitk_call_wait(slow, KNITK_WAIT_FOREVER), 500);
	knitk_call_release(slow);
	/* Drain: the skipped calls have come back, none ran. */
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	CHECK_EQ(atomic_load(&ran), 0);
	knitk_pool_destroy(pool);
}

/* No waiter: the status says -ETIMEDOUT once the deadline passed. */
static void deadline_without_waiter(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .nr_workers = 1, .task_data = (void *)&ran };
	struct knitk_call_opts co = { .size = sizeof(co) };
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint32_t ms = 200;

	REQUIRE(knitk_pool_create(&o, &tasks, &pool) == 0);
	co.deadline_ns = after_ms(20);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, &co, &c) == 0);
	while (tap_now_ns() < co.deadline_ns)
		sched_yield();
	CHECK_EQ(knitk_call_status(c), -ETIMEDOUT);
	CHECK_EQ(knitk_call_wait(c, 0), -ETIMEDOUT);
	knitk_call_release(c);
	knitk_pool_destroy(pool);
}

static void abort_running(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .nr_workers = 1, .task_data = (void *)&ran };
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint32_t ms = 60000;

	REQUIRE(knitk_pool_create(&o, &tasks, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c) == 0);
	CHECK_EQ(knitk_call_wait(c, after_ms(20)), -EINPROGRESS);
	CHECK_EQ(knitk_call_abort(c), 0);
	CHECK_EQ(knitk_call_abort(c), -EALREADY);
	CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -ECANCELED);
	/* The task saw the flag and returned: its late result is dropped. */
	wait_stale(pool, 1);
	CHECK_EQ(knitk_call_status(c), -ECANCELED);
	knitk_call_release(c);
	check_clean_calls(pool, 1000);
	knitk_pool_destroy(pool);
}

/* Random aborts under load: each call ends once, result or -ECANCELED. */
static void abort_mixed(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .nr_workers = 2, .task_data = (void *)&ran };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	struct knitk_call *c[32];
	unsigned long done = 0, ok = 0, canceled = 0, bad = 0, aborted = 0;
	uint64_t seed = 99, x[32];
	unsigned int i, n;

	REQUIRE(knitk_pool_create(&o, &tasks, &pool) == 0);
	while (done < nr_calls) {
		n = nr_calls - done < 32 ? (unsigned int)(nr_calls - done) : 32;
		for (i = 0; i < n; i++) {
			x[i] = tap_rand(&seed);
			REQUIRE(knitk_pool_submit(pool, T_MIX, &x[i], 8, NULL, &c[i]) == 0);
		}
		for (i = 0; i < n; i++)
			if (x[i] % 3 == 0 && knitk_call_abort(c[i]) == 0)
				aborted++;
		CHECK_EQ(knitk_pool_wait_all(pool, c, n, KNITK_WAIT_FOREVER), 0);
		for (i = 0; i < n; i++) {
			int st = knitk_call_status(c[i]);
			const void *d;
			size_t len;
			uint64_t y;

			if (st == -ECANCELED && x[i] % 3 == 0) {
				canceled++;
			} else if (st == 0 && knitk_call_result(c[i], &d, &len) == 0 &&
				   len == 8) {
				memcpy(&y, d, 8);
				if (y == mix64(x[i]))
					ok++;
				else
					bad++;
			} else {
				bad++;
			}
			knitk_call_release(c[i]);
		}
		done += n;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(ok + canceled, nr_calls);
	CHECK_EQ(canceled, aborted);
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	knitk_pool_stats(pool, &st);
	CHECK_EQ(st.completed, nr_calls);
	CHECK_EQ(st.canceled, canceled);
	printf("# %lu calls, %lu aborted, %llu late results dropped\n",
	       nr_calls, canceled, (unsigned long long)st.stale);
	knitk_pool_destroy(pool);
}

static void bp_check(const char *fail)
{
	if (fail) {
		printf("# %s\n", fail);
		tap_case_failed = 1;
	}
}

/* A submit waiting for arena space gives up at its deadline. */
static void submit_arena_full_times_out(void)
{
	bp_check(bp_submit_times_out(&tasks, KNITK_WORKER_THREADS,
				     KNITK_POOL_DISPATCH_PRIVATE, KNITK_KNOT_FUTEX,
				     BP_ARENA, false));
}

static void submit_arena_full_times_out_steal(void)
{
	bp_check(bp_submit_times_out(&tasks, KNITK_WORKER_THREADS,
				     KNITK_POOL_DISPATCH_STEAL, KNITK_KNOT_FUTEX,
				     BP_ARENA, false));
}

static void submit_arena_full_times_out_processes(void)
{
	bp_check(bp_submit_times_out(&tasks, KNITK_WORKER_PROCESSES,
				     KNITK_POOL_DISPATCH_PRIVATE, KNITK_KNOT_FUTEX,
				     BP_ARENA, false));
}

static void batch_arena_full_times_out(void)
{
	bp_check(bp_submit_times_out(&tasks, KNITK_WORKER_THREADS,
				     KNITK_POOL_DISPATCH_PRIVATE, KNITK_KNOT_FUTEX,
				     BP_ARENA, true));
}

/* A submit waiting for a worker below capacity gives up at its deadline. */
static void submit_at_capacity_times_out(void)
{
	bp_check(bp_submit_times_out(&tasks, KNITK_WORKER_THREADS,
				     KNITK_POOL_DISPATCH_PRIVATE, KNITK_KNOT_FUTEX,
				     BP_CAPACITY, false));
}

static void submit_at_capacity_times_out_steal(void)
{
	bp_check(bp_submit_times_out(&tasks, KNITK_WORKER_THREADS,
				     KNITK_POOL_DISPATCH_STEAL, KNITK_KNOT_FUTEX,
				     BP_CAPACITY, false));
}

static void batch_at_capacity_times_out(void)
{
	bp_check(bp_submit_times_out(&tasks, KNITK_WORKER_THREADS,
				     KNITK_POOL_DISPATCH_STEAL, KNITK_KNOT_FUTEX,
				     BP_CAPACITY, true));
}

int main(int argc, char **argv)
{
	if (pool_test_start(argc, argv, &tasks, &nr_calls, 100000))
		return 2;
	TEST(deadline_expires);
	TEST(expired_are_skipped);
	TEST(deadline_without_waiter);
	TEST(abort_running);
	TEST(abort_mixed);
	TEST(submit_arena_full_times_out);
	TEST(submit_arena_full_times_out_steal);
	TEST(submit_arena_full_times_out_processes);
	TEST(batch_arena_full_times_out);
	TEST(submit_at_capacity_times_out);
	TEST(submit_at_capacity_times_out_steal);
	TEST(batch_at_capacity_times_out);
	return tap_exit();
}
