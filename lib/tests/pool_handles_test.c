// SPDX-License-Identifier: GPL-2.0
/*
 * Call handles kept past knitk_pool_destroy: every handle function works
 * on them, in any order, for calls completed before the destroy, for
 * calls the destroy cancelled and for a call never waited for; the last
 * release frees the pool (the ASan build checks nothing is touched after
 * that) and no worker is left.  And -EINPROGRESS is reserved for "not
 * completed": a task returning it completes its call with -EPROTO, so a
 * finished wait never looks like a timed-out one.
 */
#include <stdio.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "proc_count.h"
#include "tap.h"

#define NR_CALLS	4

enum op { OP_STATUS, OP_RESULT, OP_WAIT0, OP_WAIT_FOREVER, OP_WAIT_DEADLINE,
	  OP_ABORT, OP_WORKER, OP_NR };

/*
 * Every handle function on completed call @c, starting with op @first:
 * the call's status is @status, its result @len bytes and its worker @w.
 */
static void use_done_handle(struct knitk_call *c, unsigned int first,
			    int status, size_t len, int w)
{
	const void *data = NULL;
	size_t n = 0;
	unsigned int i;

	for (i = 0; i < OP_NR; i++) {
		switch ((first + i) % OP_NR) {
		case OP_STATUS:
			CHECK_EQ(knitk_call_status(c), status);
			break;
		case OP_RESULT:
			CHECK_EQ(knitk_call_result(c, &data, &n), 0);
			CHECK_EQ(n, len);
			if (len)
				CHECK(data && !memcmp(data, "hello", len));
			break;
		case OP_WAIT0:
			CHECK_EQ(knitk_call_wait(c, 0), status);
			break;
		case OP_WAIT_FOREVER:
			CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), status);
			break;
		case OP_WAIT_DEADLINE:
			CHECK_EQ(knitk_call_wait(c, after_ms(1000)), status);
			break;
		case OP_ABORT:
			CHECK_EQ(knitk_call_abort(c), -EALREADY);
			break;
		case OP_WORKER:
			CHECK_EQ(knitk_call_worker(c), w);
			break;
		}
	}
}

/*
 * NR_CALLS handles outlive the pool: with @inflight their calls are still
 * running at the destroy (which cancels them), else they completed before
 * it.  Handle i starts its round of functions at op i and the handles are
 * released in the order @order, the last of them freeing the pool.
 */
static void handles_after_destroy(unsigned int kind, bool inflight,
				  const unsigned int *order)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind, .nr_workers = 2 };
	struct knitk_call *c[NR_CALLS];
	struct knitk_pool *pool;
	uint32_t ms = 60000;
	int w[NR_CALLS];
	unsigned int i, k;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	for (i = 0; i < NR_CALLS; i++) {
		if (inflight)
			REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c[i]) == 0);
		else
			REQUIRE(knitk_pool_submit(pool, T_ECHO, "hello", 5, NULL, &c[i]) == 0);
		w[i] = knitk_call_worker(c[i]);
		CHECK(w[i] >= 0 && w[i] < 2);
	}
	if (!inflight)
		CHECK_EQ(knitk_pool_wait_all(pool, c, NR_CALLS, KNITK_WAIT_FOREVER), 0);
	else
		CHECK_EQ(knitk_call_status(c[0]), -EINPROGRESS);
	knitk_pool_destroy(pool);
	for (k = 0; k < NR_CALLS; k++) {
		i = order[k];
		use_done_handle(c[i], i, inflight ? -ECANCELED : 0,
				inflight ? 0 : 5, w[i]);
		/* A second round after other handles were released. */
		use_done_handle(c[i], i + 3, inflight ? -ECANCELED : 0,
				inflight ? 0 : 5, w[i]);
		knitk_call_release(c[i]);
	}
}

static const unsigned int forward[NR_CALLS] = { 0, 1, 2, 3 };
static const unsigned int mixed[NR_CALLS] = { 2, 0, 3, 1 };

static void done_threads(void)
{
	handles_after_destroy(KNITK_WORKER_THREADS, false, forward);
	handles_after_destroy(KNITK_WORKER_THREADS, false, mixed);
}

static void done_processes(void)
{
	handles_after_destroy(KNITK_WORKER_PROCESSES, false, mixed);
}

static void inflight_threads(void)
{
	handles_after_destroy(KNITK_WORKER_THREADS, true, forward);
	handles_after_destroy(KNITK_WORKER_THREADS, true, mixed);
}

static void inflight_processes(void)
{
	handles_after_destroy(KNITK_WORKER_PROCESSES, true, mixed);
}

/*
 * A task returning -EINPROGRESS: its call completes with -EPROTO, seen
 * alike by wait, status, wait_any/all and knitk_pool_call; a wait that
 * really times out still says -EINPROGRESS.
 */
static void reserved_status(unsigned int kind)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind, .nr_workers = 1 };
	struct knitk_call *c, *s;
	struct knitk_pool *pool;
	int32_t e = EINPROGRESS;
	uint32_t ms = 60000;
	const void *data;
	size_t len;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_FAIL, &e, 4, NULL, &c) == 0);
	CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -EPROTO);
	CHECK_EQ(knitk_call_wait(c, 0), -EPROTO);
	CHECK_EQ(knitk_call_status(c), -EPROTO);
	CHECK_EQ(knitk_call_result(c, &data, &len), 0);
	CHECK_EQ(knitk_call_abort(c), -EALREADY);
	CHECK_EQ(knitk_pool_wait_any(pool, &c, 1, 0), 0);
	CHECK_EQ(knitk_pool_wait_all(pool, &c, 1, 0), 0);
	knitk_call_release(c);
	CHECK_EQ(knitk_pool_call(pool, T_FAIL, &e, 4, NULL, NULL, 0, NULL), -EPROTO);
	/* Other errors still reach the caller unchanged. */
	e = EAGAIN;
	CHECK_EQ(knitk_pool_call(pool, T_FAIL, &e, 4, NULL, NULL, 0, NULL), -EAGAIN);
	/* A running call: -EINPROGRESS from status and from a timed-out wait. */
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &s) == 0);
	CHECK_EQ(knitk_call_status(s), -EINPROGRESS);
	CHECK_EQ(knitk_call_wait(s, 0), -EINPROGRESS);
	CHECK_EQ(knitk_call_wait(s, after_ms(20)), -EINPROGRESS);
	CHECK_EQ(knitk_pool_wait_any(pool, &s, 1, after_ms(20)), -EINPROGRESS);
	CHECK_EQ(knitk_call_abort(s), 0);
	CHECK_EQ(knitk_call_wait(s, KNITK_WAIT_FOREVER), -ECANCELED);
	knitk_call_release(s);
	knitk_pool_destroy(pool);
}

static void reserved_status_threads(void)
{
	reserved_status(KNITK_WORKER_THREADS);
}

static void reserved_status_processes(void)
{
	reserved_status(KNITK_WORKER_PROCESSES);
}

/*
 * Three handles over the destroy: a call waited for, one running (the
 * destroy cancels it) and one never waited for (completed or cancelled);
 * every handle function answers for each, and no worker is left.
 */
static void three_handles_after_destroy(unsigned int kind)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind, .nr_workers = 2 };
	struct knitk_call *done, *slow, *unwaited;
	uint64_t x = 0x1234567890abcdefULL;
	struct knitk_pool *p;
	uint32_t ms = 600000;
	const void *d;
	size_t len;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &p) == 0);
	REQUIRE(knitk_pool_submit(p, T_ECHO, &x, 8, NULL, &done) == 0);
	CHECK_EQ(knitk_call_wait(done, KNITK_WAIT_FOREVER), 0);
	REQUIRE(knitk_pool_submit(p, T_SLEEP, &ms, 4, NULL, &slow) == 0);
	REQUIRE(knitk_pool_submit(p, T_ECHO, &x, 8, NULL, &unwaited) == 0);
	knitk_pool_destroy(p);

	CHECK_EQ(knitk_call_status(done), 0);
	CHECK_EQ(knitk_call_wait(done, 0), 0);
	CHECK_EQ(knitk_call_wait(done, KNITK_WAIT_FOREVER), 0);
	CHECK_EQ(knitk_call_wait(done, 1), 0);
	CHECK_EQ(knitk_call_result(done, &d, &len), 0);
	CHECK(len == 8 && !memcmp(d, &x, 8));
	CHECK_EQ(knitk_call_abort(done), -EALREADY);
	CHECK(knitk_call_worker(done) >= 0 && knitk_call_worker(done) < 2);

	CHECK_EQ(knitk_call_status(slow), -ECANCELED);
	CHECK_EQ(knitk_call_wait(slow, KNITK_WAIT_FOREVER), -ECANCELED);
	CHECK_EQ(knitk_call_wait(slow, 0), -ECANCELED);
	CHECK_EQ(knitk_call_abort(slow), -EALREADY);
	CHECK(knitk_call_result(slow, &d, &len) != -EINPROGRESS);

	CHECK(knitk_call_status(unwaited) == 0 ||
	      knitk_call_status(unwaited) == -ECANCELED);
	CHECK_EQ(knitk_call_wait(unwaited, KNITK_WAIT_FOREVER),
		 knitk_call_status(unwaited));
	CHECK_EQ(knitk_call_abort(unwaited), -EALREADY);
	knitk_call_release(unwaited);
	knitk_call_release(slow);
	knitk_call_release(done);
	CHECK(no_children());
}

static void handles_after_destroy_threads(void)
{
	three_handles_after_destroy(KNITK_WORKER_THREADS);
}

static void handles_after_destroy_processes(void)
{
	three_handles_after_destroy(KNITK_WORKER_PROCESSES);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	TEST(reserved_status_threads);
	TEST(reserved_status_processes);
	TEST(done_threads);
	TEST(done_processes);
	TEST(inflight_threads);
	TEST(inflight_processes);
	TEST(handles_after_destroy_threads);
	TEST(handles_after_destroy_processes);
	return tap_exit();
}
