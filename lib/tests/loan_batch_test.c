// SPDX-License-Identifier: GPL-2.0
/*
 * A batch of loans (knitk_pool_submit_loans; docs/protocol.md C8) keeps
 * knitk_pool_submit_loan's promises for each of its calls: sent ones run
 * once on their own bytes, in array order per mailbox, and ones that
 * cannot go complete with the status a single submit would return; bad
 * input sends nothing and leaves every loan its caller's; nothing is
 * lost (after a drain every request arena takes a loan of its whole
 * size).  For thread and process workers, private lanes and stealing.
 * Every call carries its own id; the task counts each run in the run
 * table (shared memory, pool_tasks.h) and answers from the id it read.
 * argv[1] is the pool tests' count (unused), argv[2] runs one case.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

/* T_ORDER: T_RUN's checks and result, and the worker process's run count. */
enum { T_ORDER = T_NR, LB_NR };

#define LB_ARENA	(64 * 1024)
#define LB_INLINE	192
#define LB_LEN		100	/* an inline argument */

static int task_order(const void *in, size_t len, struct knitk_reply *out,
		      void *ctx)
{
	static _Atomic uint64_t seq;
	struct run_arg a;
	uint64_t r[3];
	int ret;

	(void)ctx;
	ret = run_arg_take(in, len, &a);
	if (ret)
		return ret;
	r[0] = a.id;
	r[1] = mix64(a.id);
	r[2] = atomic_fetch_add(&seq, 1);
	ret = knitk_reply_set(out, r, sizeof(r));
	return ret ? ret : run_status(a.id);
}

static const knitk_task_fn lb_fns[LB_NR] = {
	TEST_TASK_FNS,
	[T_ORDER] = task_order,
};
static const struct knitk_task_table lb_tasks = { .tasks = lb_fns, .nr_tasks = LB_NR };

static uint64_t next_id = 1000;

static unsigned int runs(uint64_t id)
{
	return atomic_load(&runtab[id]);
}

static int lb_pool(unsigned int kind, unsigned int dispatch, unsigned int workers,
		   unsigned int flags, struct knitk_pool **pool)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = kind, .nr_workers = workers,
		.flags = flags, .knot_flags = KNITK_KNOT_FUTEX,
		.arena_bytes = LB_ARENA, .inline_bytes = LB_INLINE,
		.dispatch = dispatch, .nr_submitters = 1,
	};

	return knitk_pool_create(&o, &lb_tasks, pool);
}

/* A loan of call @id (@fn, @len bytes), its argument written in place. */
static int lb_loan(struct knitk_pool *pool, uint32_t fn, uint64_t id, size_t len,
		   const struct knitk_call_opts *co, struct knitk_call **c)
{
	void *buf;
	int ret;

	*c = NULL;
	ret = knitk_pool_loan(pool, fn, len, co, c, &buf);
	if (!ret)
		run_arg_fill(buf, id, 0, (uint32_t)len);
	return ret;
}

/* Call @c, waited for, was answered by its own run (T_RUN or T_ORDER). */
static bool lb_ok(struct knitk_call *c, uint64_t id)
{
	const void *d;
	uint64_t r[3];
	size_t n;

	if (knitk_call_wait(c, KNITK_WAIT_FOREVER) != run_status(id) ||
	    knitk_call_result(c, &d, &n) || (n != 16 && n != 24))
		return false;
	memcpy(r, d, n);
	return r[0] == id && r[1] == mix64(id);
}

/* T_ORDER call @c's place among its worker's runs. */
static uint64_t lb_seq(struct knitk_call *c)
{
	const void *d;
	uint64_t r[3] = { 0, 0, UINT64_MAX };
	size_t n;

	if (!knitk_call_result(c, &d, &n) && n == sizeof(r))
		memcpy(r, d, sizeof(r));
	return r[2];
}

/*
 * The request arenas are empty: a loan of the whole arena fits, in every
 * mailbox (private lanes: to each worker).  The deadline only ends what
 * would otherwise wait for ever.
 */
static bool lb_arenas_empty(struct knitk_pool *pool, unsigned int first,
			    unsigned int workers, bool steal)
{
	struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER };
	struct knitk_call *c;
	unsigned int w;
	void *buf;
	int ret;

	for (w = first; w < (steal ? first + 1 : workers); w++) {
		co.worker = w;
		co.flags = steal ? 0 : KNITK_CALL_WORKER;
		co.deadline_ns = after_ms(HANG_MS);
		ret = knitk_pool_loan(pool, T_RUN, LB_ARENA, &co, &c, &buf);
		if (ret) {
			printf("# worker %u: a loan of the whole arena: %d\n", w, ret);
			return false;
		}
		knitk_call_release(c);
	}
	return true;
}

static bool is_steal(unsigned int ci)
{
	return pool_shapes[ci].dispatch == KNITK_POOL_DISPATCH_STEAL;
}

/*
 * One worker, one submitter: loans taken in one order and sent in a batch
 * in another run once each on their own bytes, some inline and some in
 * the arena; with private lanes in the batch's order (a stealing worker
 * claims by region and promises no order).
 */
static void loans_batch_in_array_order(void)
{
	enum { N = 40 };
	unsigned int ci, i;

	for (ci = 0; ci < NR_POOL_SHAPES; ci++) {
		struct knitk_call *c[N], *sent[N];
		struct knitk_pool *pool;
		uint64_t id[N], prev = 0;
		unsigned int bad = 0, order = 0;

		REQUIRE(lb_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, 1, 0, &pool) == 0);
		for (i = 0; i < N; i++) {
			id[i] = next_id++;
			REQUIRE(lb_loan(pool, T_ORDER, id[i], i % 5 ? LB_LEN : 1000 + i,
					NULL, &c[i]) == 0);
		}
		/* 7 is prime to N: every loan once, none next to its neighbour. */
		for (i = 0; i < N; i++)
			sent[i] = c[(i * 7) % N];
		CHECK_EQ(knitk_pool_submit_loans(sent, N), N);
		CHECK_EQ(knitk_pool_wait_all(pool, sent, N, KNITK_WAIT_FOREVER), 0);
		for (i = 0; i < N; i++) {
			uint64_t s = lb_seq(sent[i]);

			bad += !lb_ok(sent[i], id[(i * 7) % N]);
			bad += runs(id[(i * 7) % N]) != 1;
			order += i && s <= prev && !is_steal(ci);
			prev = s;
		}
		CHECK_EQ(bad, 0);
		CHECK_EQ(order, 0);
		for (i = 0; i < N; i++)
			knitk_call_release(c[i]);
		CHECK(lb_arenas_empty(pool, 0, 1, is_steal(ci)));
		knitk_pool_destroy(pool);
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

/*
 * A batch larger than one run (64 calls): two workers, each of its
 * loans sent once; arenas empty after the drain.
 */
static void loans_batch_over_runs(void)
{
	enum { N = 120 };
	unsigned int ci, i;

	for (ci = 0; ci < NR_POOL_SHAPES; ci++) {
		struct knitk_call *c[N];
		struct knitk_pool *pool;
		uint64_t id[N];
		unsigned int bad = 0, n;

		/* A stealing slot lends at most 63 lanes. */
		n = is_steal(ci) ? 60 : N;
		REQUIRE(lb_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, 2, 0, &pool) == 0);
		for (i = 0; i < n; i++) {
			id[i] = next_id++;
			REQUIRE(lb_loan(pool, T_RUN, id[i], LB_LEN + i % 3 * 100, NULL,
					&c[i]) == 0);
		}
		CHECK_EQ(knitk_pool_submit_loans(c, n), (int)n);
		CHECK_EQ(knitk_pool_wait_all(pool, c, n, KNITK_WAIT_FOREVER), 0);
		for (i = 0; i < n; i++) {
			bad += !lb_ok(c[i], id[i]) || runs(id[i]) != 1;
			knitk_call_release(c[i]);
		}
		CHECK_EQ(bad, 0);
		CHECK(lb_arenas_empty(pool, 0, 2, is_steal(ci)));
		knitk_pool_destroy(pool);
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

/*
 * Bad input sends nothing: no array, no calls, a NULL among them, a loan
 * of another pool, a loan sent already, a call that never was a loan,
 * one loan twice.  Each is -EINVAL; every loan is still unsent (not
 * run, not complete) and goes out once in a good batch afterwards.  A
 * loan of another pool is refused where the pool matters (waits).
 */
static void loans_batch_bad_input(void)
{
	enum { N = 6 };
	unsigned int ci, i, bad;

	for (ci = 0; ci < NR_POOL_SHAPES; ci++) {
		struct knitk_call *c[N], *b[N + 1], *other, *sentl, *plain;
		struct knitk_pool *pool, *pool2;
		uint64_t id[N], ido = next_id++, ids = next_id++, idp = next_id++;
		unsigned char arg[LB_LEN];

		REQUIRE(lb_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, 2, 0, &pool) == 0);
		REQUIRE(lb_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, 1, 0, &pool2) == 0);
		for (i = 0; i < N; i++) {
			id[i] = next_id++;
			REQUIRE(lb_loan(pool, T_RUN, id[i], LB_LEN, NULL, &c[i]) == 0);
		}
		REQUIRE(lb_loan(pool2, T_RUN, ido, LB_LEN, NULL, &other) == 0);
		REQUIRE(lb_loan(pool, T_RUN, ids, LB_LEN, NULL, &sentl) == 0);
		REQUIRE(knitk_pool_submit_loan(sentl) == 0);
		run_arg_fill(arg, idp, 0, LB_LEN);
		REQUIRE(knitk_pool_submit(pool, T_RUN, arg, LB_LEN, NULL, &plain) == 0);

		CHECK_EQ(knitk_pool_submit_loans(NULL, N), -EINVAL);
		CHECK_EQ(knitk_pool_submit_loans(c, 0), -EINVAL);
		/* In the middle of the batch: c[0..2], the bad one, c[3..5]. */
		memcpy(b, c, 3 * sizeof(*b));
		memcpy(b + 4, c + 3, 3 * sizeof(*b));
		b[3] = NULL;
		CHECK_EQ(knitk_pool_submit_loans(b, N + 1), -EINVAL);
		b[3] = other;
		CHECK_EQ(knitk_pool_submit_loans(b, N + 1), -EINVAL);
		b[3] = sentl;
		CHECK_EQ(knitk_pool_submit_loans(b, N + 1), -EINVAL);
		b[3] = plain;
		CHECK_EQ(knitk_pool_submit_loans(b, N + 1), -EINVAL);
		b[3] = c[1];
		CHECK_EQ(knitk_pool_submit_loans(b, N + 1), -EINVAL);
		/* The first of the batch of another pool: every other is foreign. */
		b[3] = other;
		CHECK_EQ(knitk_pool_submit_loans(b + 3, 4), -EINVAL);
		/* Waits name their pool: a loan of another is refused. */
		CHECK_EQ(knitk_pool_wait_all(pool, b, N + 1, 0), -EINVAL);
		CHECK_EQ(knitk_pool_wait_any(pool, b, N + 1, 0), -EINVAL);

		bad = 0;
		for (i = 0; i < N; i++)
			bad += knitk_call_status(c[i]) != -EINPROGRESS || runs(id[i]);
		CHECK_EQ(bad, 0);
		CHECK_EQ(knitk_call_status(other), -EINPROGRESS);
		CHECK_EQ(runs(ido), 0);
		/* Nothing lost: each goes out now, once. */
		CHECK_EQ(knitk_pool_submit_loans(c, N), N);
		CHECK_EQ(knitk_pool_submit_loans(&other, 1), 1);
		CHECK_EQ(knitk_pool_submit_loans(c, N), -EINVAL);
		for (i = 0; i < N; i++)
			bad += !lb_ok(c[i], id[i]) || runs(id[i]) != 1;
		CHECK_EQ(bad, 0);
		CHECK(lb_ok(other, ido) && runs(ido) == 1);
		CHECK(lb_ok(sentl, ids) && runs(ids) == 1);
		CHECK(lb_ok(plain, idp) && runs(idp) == 1);
		for (i = 0; i < N; i++)
			knitk_call_release(c[i]);
		knitk_call_release(other);
		knitk_call_release(sentl);
		knitk_call_release(plain);
		CHECK(lb_arenas_empty(pool, 0, 2, is_steal(ci)));
		CHECK(lb_arenas_empty(pool2, 0, 1, is_steal(ci)));
		knitk_pool_destroy(pool2);
		knitk_pool_destroy(pool);
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

/*
 * Loans that cannot go, in the middle of a batch: one aborted, one past
 * its deadline, one as large as the arena aborted.  The batch sends the
 * others and counts them; those complete with the status a single submit
 * returns, never run, and give their bytes back (the arenas are empty
 * after the drain).
 */
static void loans_batch_some_cannot_go(void)
{
	unsigned int ci;

	for (ci = 0; ci < NR_POOL_SHAPES; ci++) {
		struct knitk_call_opts co = { .size = sizeof(co) };
		struct knitk_call *c[5];
		struct knitk_pool_stats st;
		struct knitk_pool *pool;
		uint64_t id[5];
		unsigned int i;

		REQUIRE(lb_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, 2, 0, &pool) == 0);
		for (i = 0; i < 5; i++)
			id[i] = next_id++;
		REQUIRE(lb_loan(pool, T_RUN, id[0], LB_LEN, NULL, &c[0]) == 0);
		REQUIRE(lb_loan(pool, T_RUN, id[1], 5000, NULL, &c[1]) == 0);
		co.deadline_ns = after_ms(1);
		REQUIRE(lb_loan(pool, T_RUN, id[2], LB_LEN, &co, &c[2]) == 0);
		REQUIRE(lb_loan(pool, T_RUN, id[3], 1000, NULL, &c[3]) == 0);
		REQUIRE(lb_loan(pool, T_RUN, id[4], LB_LEN, NULL, &c[4]) == 0);
		CHECK_EQ(knitk_call_abort(c[1]), 0);
		while (after_ms(0) <= co.deadline_ns)
			sleep_us(1000);
		CHECK_EQ(knitk_call_abort(c[3]), 0);
		CHECK_EQ(knitk_pool_submit_loans(c, 5), 2);
		CHECK_EQ(knitk_pool_wait_all(pool, c, 5, KNITK_WAIT_FOREVER), 0);
		CHECK(lb_ok(c[0], id[0]) && runs(id[0]) == 1);
		CHECK(lb_ok(c[4], id[4]) && runs(id[4]) == 1);
		CHECK_EQ(knitk_call_status(c[1]), -ECANCELED);
		CHECK_EQ(knitk_call_status(c[2]), -ETIMEDOUT);
		CHECK_EQ(knitk_call_status(c[3]), -ECANCELED);
		CHECK_EQ(runs(id[1]) + runs(id[2]) + runs(id[3]), 0);
		/* Sent or completed: none of them is a loan any more. */
		CHECK_EQ(knitk_pool_submit_loans(c + 1, 1), -EINVAL);
		CHECK_EQ(knitk_pool_submit_loan(c[2]), -EINVAL);
		for (i = 0; i < 5; i++)
			knitk_call_release(c[i]);
		CHECK(lb_arenas_empty(pool, 0, 2, is_steal(ci)));
		pool_stats(pool, &st);
		CHECK_EQ(st.completed, st.submitted);
		knitk_pool_destroy(pool);
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

/*
 * Private lanes, process workers: worker 0 is killed while loans to it
 * and to worker 1 are unsent.  Without a respawn the batch sends worker
 * 1's and completes worker 0's -EOWNERDEAD (never run); with
 * KNITK_POOL_RESPAWN the successor that joined runs them on their bytes.
 */
static void loans_batch_worker_killed(bool respawn)
{
	struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER };
	struct knitk_call *c[6];
	struct knitk_pool *pool;
	uint64_t id[6];
	unsigned int i;
	int pid;

	REQUIRE(lb_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE, 2,
			respawn ? KNITK_POOL_RESPAWN : 0, &pool) == 0);
	for (i = 0; i < 6; i++) {
		id[i] = next_id++;
		co.worker = i % 2;
		REQUIRE(lb_loan(pool, T_RUN, id[i], i < 2 ? 3000 : LB_LEN, &co, &c[i]) == 0);
	}
	pid = worker_pid(pool, 0, NULL);
	REQUIRE(pid > 0);
	kill(pid, SIGKILL);
	REQUIRE(deaths_reach(pool, 1, respawn));
	CHECK_EQ(knitk_pool_submit_loans(c, 6), respawn ? 6 : 3);
	CHECK_EQ(knitk_pool_wait_all(pool, c, 6, KNITK_WAIT_FOREVER), 0);
	for (i = 0; i < 6; i++) {
		if (respawn || i % 2) {
			CHECK(lb_ok(c[i], id[i]));
			CHECK_EQ(runs(id[i]), 1);
		} else {
			CHECK_EQ(knitk_call_status(c[i]), -EOWNERDEAD);
			CHECK_EQ(runs(id[i]), 0);
		}
		knitk_call_release(c[i]);
	}
	/* Without a respawn only worker 1 takes calls. */
	CHECK(lb_arenas_empty(pool, respawn ? 0 : 1, 2, false));
	knitk_pool_destroy(pool);
}

static void loans_batch_worker_killed_private(void)
{
	loans_batch_worker_killed(false);
}

static void loans_batch_worker_killed_respawn_private(void)
{
	loans_batch_worker_killed(true);
}

/*
 * Unsent loans at a drain shutdown and after the destroy: a batch sends
 * none, each has completed (-ESHUTDOWN, -ECANCELED), and each handle is
 * released once, with no lane touched after the destroy.
 */
static void loans_batch_after_shutdown_and_destroy(void)
{
	unsigned int ci, i;

	for (ci = 0; ci < NR_POOL_SHAPES; ci++) {
		struct knitk_call *c[4];
		struct knitk_pool *pool;
		uint64_t id[4];

		REQUIRE(lb_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, 2, 0, &pool) == 0);
		for (i = 0; i < 4; i++) {
			id[i] = next_id++;
			REQUIRE(lb_loan(pool, T_RUN, id[i], i % 2 ? 2000 : LB_LEN, NULL,
					&c[i]) == 0);
		}
		CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
		CHECK_EQ(knitk_pool_submit_loans(c, 2), 0);
		knitk_pool_destroy(pool);
		CHECK_EQ(knitk_pool_submit_loans(c + 2, 2), 0);
		for (i = 0; i < 4; i++) {
			CHECK_EQ(knitk_call_status(c[i]), -ESHUTDOWN);
			CHECK_EQ(runs(id[i]), 0);
			knitk_call_release(c[i]);
		}
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &lb_tasks, NULL) ||
	    deaths_init(argc, argv))
		return 1;
	TEST(loans_batch_in_array_order);
	TEST(loans_batch_over_runs);
	TEST(loans_batch_bad_input);
	TEST(loans_batch_some_cannot_go);
	TEST(loans_batch_worker_killed_private);
	TEST(loans_batch_worker_killed_respawn_private);
	TEST(loans_batch_after_shutdown_and_destroy);
	deaths_fini();
	return tap_exit();
}
