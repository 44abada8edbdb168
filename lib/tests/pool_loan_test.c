// SPDX-License-Identifier: GPL-2.0
/*
 * Loans (knitk_pool_loan, knitk_pool_submit_loan; docs/protocol.md C8):
 * calls whose argument is written in place, for thread and process
 * workers, private lanes and stealing.  Every call carries its own id in
 * its bytes; the task counts each run of an id in the run table (shared
 * memory, pool_tasks.h) and answers with a status and result derived from
 * the id it read, so a call that ran twice, not at all or on another
 * call's bytes shows.  argv[1] is the pool tests' count (unused), argv[2]
 * runs one case.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"
#include "backpressure.h"

/*
 * Arguments shorter than struct run_arg go to T_SMALL: none (counted at
 * ZERO_ID) or one byte (counted at SMALL_BASE + the byte).
 */
enum { T_SMALL = T_NR, LOAN_NR };
#define ZERO_ID		1
#define SMALL_BASE	256
#define LOAN_ARENA	(64 * 1024)
#define LOAN_INLINE	192

static int task_small(const void *in, size_t len, struct knitk_reply *out,
		      void *ctx)
{
	_Atomic uint8_t *tab = runtab_get();
	uint64_t id = len ? SMALL_BASE + *(const uint8_t *)in : ZERO_ID;
	int ret;

	(void)ctx;
	if (!tab || len > 1)
		return -EINVAL;
	atomic_fetch_add(&tab[id], 1);
	ret = knitk_reply_set(out, in, len);
	return ret ? ret : run_status(id);
}

static const knitk_task_fn loan_fns[LOAN_NR] = {
	TEST_TASK_FNS,
	[T_SMALL] = task_small,
};
static const struct knitk_task_table loan_tasks = { .tasks = loan_fns, .nr_tasks = LOAN_NR };

/* T_RUN ids, one per call of the whole test; small ids per pool. */
static uint64_t next_id = 1000;
static unsigned int next_small;

/* The id of the next call of @len argument bytes. */
static uint64_t new_id(size_t len)
{
	if (!len)
		return ZERO_ID;
	if (len < sizeof(struct run_arg))
		return SMALL_BASE + next_small++ % 256;
	return next_id++;
}

/* Runs of @id so far (the run table). */
static unsigned int runs(uint64_t id)
{
	return atomic_load(&runtab[id]);
}

/* A pool for a case: small ids and their counts start afresh. */
static int loan_pool(unsigned int kind, unsigned int dispatch, unsigned int workers,
		     unsigned int flags, struct knitk_pool **pool)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = kind, .nr_workers = workers,
		.flags = flags, .knot_flags = KNITK_KNOT_FUTEX,
		.arena_bytes = LOAN_ARENA, .inline_bytes = LOAN_INLINE,
		.dispatch = dispatch,
		.nr_submitters = 1,
	};
	unsigned int i;

	for (i = 0; i < SMALL_BASE + 256; i++)
		atomic_store(&runtab[i], 0);
	next_small = 0;
	return knitk_pool_create(&o, &loan_tasks, pool);
}

/* The bytes of the last loan loan_fill took. */
static void *loan_buf;

/*
 * A loan for call @id of @len bytes, its argument written in place: T_RUN's
 * (T_SMALL's below its size).  0, or the loan's error; -EFAULT when *buf
 * was not NULL for @len 0.
 */
static int loan_fill(struct knitk_pool *pool, uint64_t id, size_t len,
		     const struct knitk_call_opts *co, struct knitk_call **c)
{
	void *buf = &buf;
	int ret;

	*c = NULL;
	ret = knitk_pool_loan(pool, len < sizeof(struct run_arg) ? T_SMALL : T_RUN,
			      len, co, c, &buf);
	if (ret)
		return ret;
	loan_buf = buf;
	if (!len)
		return buf ? -EFAULT : 0;
	if (len < sizeof(struct run_arg))
		*(uint8_t *)buf = (uint8_t)(id - SMALL_BASE);
	else
		run_arg_fill(buf, id, 0, (uint32_t)len);
	return 0;
}

/* Call @c of T_RUN(@id), waited for, was answered by its own run. */
static bool run_ok(struct knitk_call *c, uint64_t id)
{
	knitk_call_wait(c, KNITK_WAIT_FOREVER);
	return run_result_ok(c, id);
}

/* Call @c of @id and @len bytes, waited for, was answered by its own run. */
static bool loan_result_ok(struct knitk_call *c, uint64_t id, size_t len)
{
	const void *d;
	size_t n;

	if (len >= sizeof(struct run_arg))
		return run_ok(c, id);
	return knitk_call_wait(c, KNITK_WAIT_FOREVER) == run_status(id) &&
	       !knitk_call_result(c, &d, &n) && n == len &&
	       (!len || *(const uint8_t *)d == (uint8_t)(id - SMALL_BASE));
}

/* A T_RUN call of @len bytes copied in by a plain submit. */
static int plain_call(struct knitk_pool *pool, uint64_t id, size_t len,
		      const struct knitk_call_opts *co, struct knitk_call **c)
{
	static unsigned char arg[LOAN_ARENA];

	run_arg_fill(arg, id, 0, (uint32_t)len);
	return knitk_pool_submit(pool, T_RUN, arg, len, co, c);
}

/*
 * Join @t within HANG_MS: -ETIME when it hangs in @what (the case then
 * leaves its pool as it is: a destroy would hang too).
 */
static int join_guarded(pthread_t t, const char *what)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += HANG_MS / 1000;
	if (pthread_timedjoin_np(t, NULL, &ts)) {
		printf("# hang: %s\n", what);
		return -ETIME;
	}
	return 0;
}

/* knitk_pool_shutdown, within HANG_MS (join_guarded). */
static int shutdown_guarded(struct knitk_pool *pool, unsigned int mode)
{
	struct shutter sh = { pool, mode, -EINPROGRESS };
	pthread_t t;

	if (pthread_create(&t, NULL, shutter_main, &sh))
		return -EAGAIN;
	if (join_guarded(t, "knitk_pool_shutdown waits for unsent loans"))
		return -ETIME;
	return sh.ret;
}

/*
 * Loans of 0 and 1 byte, the inline size, one byte more and the whole
 * arena, each written with its own call's bytes, four of them unsent at
 * once and sent in reverse order: each result is its own call's, and each
 * call ran exactly once.
 */
static void loan_sizes_end_to_end(void)
{
	const size_t sizes[] = { 0, 1, LOAN_INLINE, LOAN_INLINE + 1, LOAN_ARENA };
	enum { NS = sizeof(sizes) / sizeof(sizes[0]), ROUNDS = 20 };
	unsigned int ci, r, i;

	for (ci = 0; ci < NR_POOL_SHAPES; ci++) {
		struct knitk_call *c[NS];
		struct knitk_pool_stats st;
		struct knitk_pool *pool;
		uint64_t id[NS], first = next_id;
		unsigned int bad = 0, zeros = 0, calls = 0;

		REQUIRE(loan_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, 2, 0, &pool) == 0);
		for (r = 0; r < ROUNDS; r++) {
			for (i = 0; i < NS - 1; i++) {
				id[i] = new_id(sizes[i]);
				REQUIRE(loan_fill(pool, id[i], sizes[i], NULL, &c[i]) == 0);
			}
			for (i = NS - 1; i-- > 0;)
				CHECK_EQ(knitk_pool_submit_loan(c[i]), 0);
			/* The whole arena: sent before the next round's loans. */
			id[NS - 1] = new_id(sizes[NS - 1]);
			REQUIRE(loan_fill(pool, id[NS - 1], sizes[NS - 1], NULL, &c[NS - 1]) == 0);
			CHECK_EQ(knitk_pool_submit_loan(c[NS - 1]), 0);
			CHECK_EQ(knitk_pool_wait_all(pool, c, NS, KNITK_WAIT_FOREVER), 0);
			for (i = 0; i < NS; i++) {
				bad += !loan_result_ok(c[i], id[i], sizes[i]);
				/* One byte: its own id once, so far. */
				if (sizes[i] == 1)
					bad += runs(id[i]) != 1;
				knitk_call_release(c[i]);
			}
			zeros++;
			calls += NS;
		}
		CHECK_EQ(bad, 0);
		CHECK_EQ(runs(ZERO_ID), zeros);
		for (; first < next_id; first++)
			if (runs(first) != 1)
				bad++;
		CHECK_EQ(bad, 0);
		pool_stats(pool, &st);
		CHECK_EQ(st.submitted, calls);
		CHECK_EQ(st.completed, calls);
		CHECK_EQ(st.stale + st.canceled + st.timedout + st.ownerdead, 0);
		knitk_pool_destroy(pool);
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

/*
 * Loans released without a submit, again and again: the whole arena, and
 * more loans in a row than a mailbox has lanes and a worker entries.
 * Nothing leaks: later loans and calls still find room (a deadline ends
 * what would wait for ever), none of them ran, the stats count none of
 * them, a worker's whole capacity of loans fits, and a drain is clean.
 */
static void loan_release_without_submit(void)
{
	unsigned int ci, i;

	for (ci = 0; ci < NR_POOL_SHAPES; ci++) {
		struct knitk_call_opts co = { .size = sizeof(co) };
		struct knitk_call *c, *cap[KNITK_LANES - 1];
		struct knitk_worker_info wi = { .size = sizeof(wi) };
		struct knitk_pool_stats st;
		struct knitk_pool *pool;
		uint64_t id[KNITK_LANES - 1], gone[200];
		unsigned int bad = 0;

		REQUIRE(loan_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, 1, 0, &pool) == 0);
		co.deadline_ns = after_ms(HANG_MS);
		for (i = 0; i < 200; i++) {
			gone[i] = new_id(LOAN_ARENA);
			REQUIRE(loan_fill(pool, gone[i], LOAN_ARENA, &co, &c) == 0);
			knitk_call_release(c);
			REQUIRE(loan_fill(pool, ZERO_ID, 0, &co, &c) == 0);
			knitk_call_release(c);
			if (i % 50 == 0) {
				uint64_t x = new_id(LOAN_ARENA);

				REQUIRE(plain_call(pool, x, LOAN_ARENA, &co, &c) == 0);
				bad += !run_ok(c, x);
				knitk_call_release(c);
			}
		}
		/* A worker's whole capacity of loans at once. */
		for (i = 0; i < KNITK_LANES - 1; i++) {
			id[i] = new_id(100);
			REQUIRE(loan_fill(pool, id[i], 100, &co, &cap[i]) == 0);
		}
		for (i = 0; i < KNITK_LANES - 1; i++)
			CHECK_EQ(knitk_pool_submit_loan(cap[i]), 0);
		for (i = 0; i < KNITK_LANES - 1; i++) {
			bad += !run_ok(cap[i], id[i]);
			knitk_call_release(cap[i]);
		}
		CHECK_EQ(bad, 0);
		CHECK_EQ(knitk_pool_worker_info(pool, 0, &wi), 0);
		CHECK_EQ(wi.inflight, 0);
		pool_stats(pool, &st);
		CHECK_EQ(st.submitted, 4 + KNITK_LANES - 1);
		CHECK_EQ(st.completed, st.submitted);
		CHECK_EQ(st.canceled + st.timedout + st.ownerdead + st.stale, 0);
		REQUIRE(shutdown_guarded(pool, KNITK_SHUTDOWN_DRAIN) == 0);
		pool_stats(pool, &st);
		CHECK_EQ(st.completed, st.submitted);
		knitk_pool_destroy(pool);
		/* Only the calls sent ran: the released ones never did. */
		CHECK_EQ(runs(ZERO_ID), 0);
		for (i = 0; i < 200; i++)
			bad += runs(gone[i]) != 0;
		CHECK_EQ(bad, 0);
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

/*
 * An unsent loan aborted: it completes -ECANCELED at once, its submit
 * returns that and it never runs; one whose deadline passed before its
 * submit: -ETIMEDOUT; one whose deadline is still ahead runs.
 */
static void loan_abort_and_deadline_before_submit(void)
{
	unsigned int ci;

	for (ci = 0; ci < NR_POOL_SHAPES; ci++) {
		struct knitk_call_opts past = { .size = sizeof(past), .deadline_ns = 1 };
		struct knitk_call_opts ahead = { .size = sizeof(ahead) };
		struct knitk_pool_stats st;
		struct knitk_call *a, *b, *c;
		struct knitk_pool *pool;
		uint64_t ida = new_id(1000), idb = new_id(LOAN_ARENA), idc = new_id(300);

		REQUIRE(loan_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, 2, 0, &pool) == 0);
		REQUIRE(loan_fill(pool, ida, 1000, NULL, &a) == 0);
		CHECK_EQ(knitk_call_status(a), -EINPROGRESS);
		CHECK_EQ(knitk_call_abort(a), 0);
		CHECK_EQ(knitk_call_status(a), -ECANCELED);
		CHECK_EQ(knitk_call_abort(a), -EALREADY);
		CHECK_EQ(knitk_pool_submit_loan(a), -ECANCELED);
		CHECK_EQ(knitk_call_wait(a, KNITK_WAIT_FOREVER), -ECANCELED);
		CHECK_EQ(knitk_pool_submit_loan(a), -EINVAL);
		knitk_call_release(a);

		REQUIRE(loan_fill(pool, idb, LOAN_ARENA, &past, &b) == 0);
		CHECK_EQ(knitk_pool_submit_loan(b), -ETIMEDOUT);
		CHECK_EQ(knitk_call_status(b), -ETIMEDOUT);
		knitk_call_release(b);

		ahead.deadline_ns = after_ms(HANG_MS);
		REQUIRE(loan_fill(pool, idc, 300, &ahead, &c) == 0);
		CHECK_EQ(knitk_pool_submit_loan(c), 0);
		CHECK(run_ok(c, idc));
		knitk_call_release(c);

		REQUIRE(shutdown_guarded(pool, KNITK_SHUTDOWN_DRAIN) == 0);
		pool_stats(pool, &st);
		CHECK_EQ(st.canceled, 1);
		CHECK_EQ(st.timedout, 1);
		CHECK_EQ(st.completed, st.submitted);
		knitk_pool_destroy(pool);
		CHECK_EQ(runs(ida), 0);
		CHECK_EQ(runs(idb), 0);
		CHECK_EQ(runs(idc), 1);
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

/*
 * knitk_pool_shutdown with unsent loans and a call in flight: it waits for
 * the call only and completes the loans at once (@mode's status); their
 * bytes stay the caller's, their submit returns that status and a
 * release works; a new loan is -ESHUTDOWN; destroy is clean.
 */
static void loan_shutdown_unsent(unsigned int mode, int status)
{
	unsigned int ci;

	for (ci = 0; ci < NR_POOL_SHAPES; ci++) {
		const size_t sizes[] = { 100, 20000, 0 };
		struct knitk_call *l[3], *sent, *c;
		struct knitk_pool *pool;
		uint64_t id[3], ids = new_id(500);
		struct run_arg slow;
		unsigned int i;
		void *buf, *big = NULL;
		int ret;

		REQUIRE(loan_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, 2, 0, &pool) == 0);
		for (i = 0; i < 3; i++) {
			id[i] = new_id(sizes[i]);
			REQUIRE(loan_fill(pool, id[i], sizes[i], NULL, &l[i]) == 0);
			if (i == 1)
				big = loan_buf;
		}
		/* Sent: a drain waits for it, a cancel may beat it. */
		run_arg_fill(&slow, ids, 20000, sizeof(slow));
		REQUIRE(knitk_pool_submit(pool, T_RUN, &slow, sizeof(slow), NULL, &sent) == 0);

		REQUIRE(shutdown_guarded(pool, mode) == 0);
		ret = knitk_call_status(sent);
		if (mode == KNITK_SHUTDOWN_DRAIN)
			CHECK_EQ(ret, run_status(ids));
		else
			CHECK(ret == run_status(ids) || ret == -ECANCELED);
		knitk_call_release(sent);
		for (i = 0; i < 3; i++)
			CHECK_EQ(knitk_call_status(l[i]), status);
		/* The bytes are still the caller's to write. */
		run_arg_fill(big, id[1], 0, (uint32_t)sizes[1]);
		CHECK_EQ(knitk_pool_loan(pool, T_RUN, 100, NULL, &c, &buf), -ESHUTDOWN);
		CHECK_EQ(knitk_pool_submit_loan(l[0]), status);
		CHECK_EQ(knitk_call_wait(l[0], KNITK_WAIT_FOREVER), status);
		CHECK_EQ(knitk_pool_submit_loan(l[2]), status);
		for (i = 0; i < 3; i++)
			knitk_call_release(l[i]);
		knitk_pool_destroy(pool);
		for (i = 0; i < 3; i++)
			CHECK_EQ(runs(id[i]), 0);
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

static void loan_shutdown_drain_unsent(void)
{
	loan_shutdown_unsent(KNITK_SHUTDOWN_DRAIN, -ESHUTDOWN);
}

static void loan_shutdown_cancel_unsent(void)
{
	loan_shutdown_unsent(KNITK_SHUTDOWN_CANCEL, -ECANCELED);
}

/*
 * As many unsent loans as may be, in one submitter's lanes: a worker's
 * whole capacity (private lanes), or every lane of the mailbox but one
 * (stealing, two workers: more entries than lanes); the next loan waits
 * for room until its deadline.  Shutdown still stops every worker: its
 * stop message finds the lane left.
 */
static void loan_shutdown_every_lane_loaned(void)
{
	unsigned int ci, i;

	for (ci = 0; ci < NR_POOL_SHAPES; ci++) {
		struct knitk_call_opts co = { .size = sizeof(co) };
		struct knitk_call *l[KNITK_LANES - 1], *c;
		struct knitk_pool *pool;
		bool steal = pool_shapes[ci].dispatch == KNITK_POOL_DISPATCH_STEAL;

		REQUIRE(loan_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, steal ? 2 : 1,
				  0, &pool) == 0);
		for (i = 0; i < KNITK_LANES - 1; i++)
			REQUIRE(loan_fill(pool, ZERO_ID, 0, NULL, &l[i]) == 0);
		co.deadline_ns = after_ms(BP_DEADLINE_MS);
		CHECK_EQ(loan_fill(pool, ZERO_ID, 0, &co, &c), -ETIMEDOUT);
		REQUIRE(shutdown_guarded(pool, KNITK_SHUTDOWN_DRAIN) == 0);
		for (i = 0; i < KNITK_LANES - 1; i++) {
			CHECK_EQ(knitk_pool_submit_loan(l[i]), -ESHUTDOWN);
			knitk_call_release(l[i]);
		}
		knitk_pool_destroy(pool);
		CHECK_EQ(runs(ZERO_ID), 0);
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

/*
 * Process workers, private lanes: worker 0 is SIGKILLed holding a gated
 * call with calls queued behind it, while an unsent loan pinned to it
 * waits.  The death leaves the loan alone (not completed, its entry
 * kept); the queued calls complete -EOWNERDEAD and never run, not even
 * on a successor.  Without KNITK_POOL_RESPAWN the loan's submit is
 * -EOWNERDEAD; with it, once the successor has joined, the successor runs
 * the loan with its bytes (the reset of the dead worker's mailboxes kept
 * its lane).  The other worker, and the successor, keep serving.
 */
static void loan_worker_killed(bool respawn)
{
	struct knitk_call_opts on0 = { .size = sizeof(on0), .flags = KNITK_CALL_WORKER };
	struct knitk_call_opts on1 = { .size = sizeof(on1), .flags = KNITK_CALL_WORKER,
				       .worker = 1 };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_call *gated, *queued[3], *loan, *inl;
	uint64_t qid[3], lid = new_id(20000), iid = new_id(100);
	struct knitk_pool *pool;
	struct gate g;
	unsigned int i;
	int pid;

	REQUIRE(gate_open(&g) == 0);
	REQUIRE(loan_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE, 2,
			  respawn ? KNITK_POOL_RESPAWN : 0, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_GATE, &g.arg, sizeof(g.arg), &on0, &gated) == 0);
	REQUIRE(gate_wait(&g, 'r') == 0);
	for (i = 0; i < 3; i++) {
		qid[i] = new_id(2000);
		REQUIRE(plain_call(pool, qid[i], 2000, &on0, &queued[i]) == 0);
	}
	REQUIRE(loan_fill(pool, lid, 20000, &on0, &loan) == 0);
	REQUIRE(loan_fill(pool, iid, 100, &on0, &inl) == 0);
	CHECK_EQ(knitk_call_worker(loan), 0);
	pid = worker_pid(pool, 0, NULL);
	REQUIRE(pid > 0);
	REQUIRE(kill(pid, SIGKILL) == 0);
	REQUIRE(deaths_reach(pool, 1, respawn ? 1 : 0));

	CHECK_EQ(knitk_call_wait(gated, KNITK_WAIT_FOREVER), -EOWNERDEAD);
	for (i = 0; i < 3; i++)
		CHECK_EQ(knitk_call_wait(queued[i], KNITK_WAIT_FOREVER), -EOWNERDEAD);
	/* Not the dead worker's call: still the caller's, entries kept. */
	CHECK_EQ(knitk_call_status(loan), -EINPROGRESS);
	CHECK_EQ(knitk_call_status(inl), -EINPROGRESS);
	CHECK_EQ(knitk_pool_worker_info(pool, 0, &wi), 0);
	CHECK_EQ(wi.inflight, 2);
	/* A successor re-running the gated call would pass the gate. */
	CHECK_EQ(gate_release(&g), 0);
	CHECK_EQ(mix_calls_good(pool, 20, &on1, 1, 3), 20);
	if (respawn) {
		CHECK_EQ(knitk_pool_submit_loan(inl), 0);
		CHECK_EQ(knitk_pool_submit_loan(loan), 0);
		CHECK(run_ok(loan, lid));
		CHECK(run_ok(inl, iid));
		CHECK_EQ(mix_calls_good(pool, 20, &on0, 2, 3), 20);
	} else {
		CHECK_EQ(knitk_pool_submit_loan(loan), -EOWNERDEAD);
		CHECK_EQ(knitk_call_status(loan), -EOWNERDEAD);
		CHECK_EQ(knitk_pool_submit_loan(inl), -EOWNERDEAD);
		CHECK_EQ(knitk_pool_worker_info(pool, 0, &wi), 0);
		CHECK_EQ(wi.inflight, 0);
		CHECK_EQ(mix_calls_good(pool, 20, NULL, 2, 3), 20);
	}
	knitk_call_release(loan);
	knitk_call_release(inl);
	knitk_call_release(gated);
	for (i = 0; i < 3; i++)
		knitk_call_release(queued[i]);
	REQUIRE(shutdown_guarded(pool, KNITK_SHUTDOWN_DRAIN) == 0);
	knitk_pool_destroy(pool);
	gate_close(&g);
	CHECK_EQ(runs(lid), respawn ? 1 : 0);
	CHECK_EQ(runs(iid), respawn ? 1 : 0);
	for (i = 0; i < 3; i++)
		CHECK_EQ(runs(qid[i]), 0);
}

static void loan_worker_killed_private(void)
{
	loan_worker_killed(false);
}

static void loan_worker_killed_respawn_private(void)
{
	loan_worker_killed(true);
}

/*
 * Process workers, stealing: a killed worker does not touch an unsent
 * loan, which the survivor runs once sent; with the last worker gone a
 * loan's submit is -EPIPE.
 */
static void loan_worker_killed_steal(void)
{
	struct knitk_call *a, *b;
	struct knitk_pool *pool;
	uint64_t ida = new_id(20000), idb = new_id(100);
	int pid;

	REQUIRE(loan_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL, 2, 0, &pool) == 0);
	REQUIRE(loan_fill(pool, ida, 20000, NULL, &a) == 0);
	REQUIRE(loan_fill(pool, idb, 100, NULL, &b) == 0);
	pid = worker_pid(pool, 0, NULL);
	REQUIRE(pid > 0 && kill(pid, SIGKILL) == 0);
	REQUIRE(deaths_reach(pool, 1, 0));
	CHECK_EQ(knitk_call_status(a), -EINPROGRESS);
	CHECK_EQ(knitk_pool_submit_loan(a), 0);
	CHECK(run_ok(a, ida));
	CHECK_EQ(knitk_call_worker(a), 1);
	CHECK_EQ(mix_calls_good(pool, 20, NULL, 1, 3), 20);

	pid = worker_pid(pool, 1, NULL);
	REQUIRE(pid > 0 && kill(pid, SIGKILL) == 0);
	REQUIRE(deaths_reach(pool, 2, 0));
	CHECK_EQ(knitk_pool_submit_loan(b), -EPIPE);
	CHECK_EQ(knitk_call_status(b), -EPIPE);
	knitk_call_release(a);
	knitk_call_release(b);
	knitk_pool_destroy(pool);
	CHECK_EQ(runs(ida), 1);
	CHECK_EQ(runs(idb), 0);
}

/*
 * Until @c completed: in event mode only a reap takes results, and the
 * reaping thread must not wait in the library.
 */
static int loan_wait(struct knitk_pool *pool, struct knitk_call *c, bool ev)
{
	struct knitk_call *got[4];

	while (ev && knitk_call_status(c) == -EINPROGRESS)
		if (knitk_pool_reap(pool, got, 4) <= 0)
			sleep_us(100);
	return knitk_call_wait(c, KNITK_WAIT_FOREVER);
}

struct waiter {
	struct knitk_pool *pool;
	uint64_t id;
	size_t len;
	struct knitk_call *c;
	int ret;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->ret = loan_fill(w->pool, w->id, w->len, NULL, &w->c);
	if (!w->ret)
		w->ret = knitk_pool_submit_loan(w->c);
	return NULL;
}

/*
 * Backpressure, one worker held in a gated task, a one-page arena: a
 * loan that finds no room waits until room frees (the release of the loan
 * holding the whole arena), and with a deadline returns -ETIMEDOUT with
 * nothing counted; loans count against the worker's capacity as calls
 * do; in event mode a loan without room is -EAGAIN.
 */
static void loan_waits_for_room(void)
{
	unsigned int ci, i;

	for (ci = 0; ci < NR_POOL_SHAPES; ci++) {
		struct knitk_call_opts co = { .size = sizeof(co) };
		struct knitk_call *a, *c, *l[KNITK_LANES];
		struct knitk_pool_stats st;
		struct waiter w;
		pthread_t t;
		struct bp b;
		uint64_t ida;

		if (bp_start(&b, &loan_tasks, pool_shapes[ci].kind, pool_shapes[ci].dispatch,
			     KNITK_KNOT_FUTEX)) {
			CHECK(!"bp_start");
			if (b.pool)
				bp_end(&b);
			return;
		}
		ida = new_id(b.big_len);
		REQUIRE(loan_fill(b.pool, ida, b.big_len, NULL, &a) == 0);
		co.deadline_ns = after_ms(BP_DEADLINE_MS);
		CHECK_EQ(loan_fill(b.pool, new_id(b.big_len), b.big_len, &co, &c), -ETIMEDOUT);
		CHECK(c == NULL);
		pool_stats(b.pool, &st);
		CHECK_EQ(st.submitted, 2);	/* the gated call and the loan */

		/* Room comes back only with the release of the first loan. */
		w = (struct waiter){ .pool = b.pool, .id = new_id(b.big_len),
				     .len = b.big_len, .ret = -EINPROGRESS };
		REQUIRE(pthread_create(&t, NULL, waiter_main, &w) == 0);
		sleep_us(20000);
		knitk_call_release(a);
		REQUIRE(join_guarded(t, "a loan waiting for room sees none freed") == 0);
		CHECK_EQ(w.ret, 0);
		CHECK_EQ(gate_release(&b.g), 0);
		CHECK_EQ(knitk_call_wait(b.gated, KNITK_WAIT_FOREVER), 0);
		CHECK_EQ(gate_wait(&b.g, 'd'), 0);
		knitk_call_release(b.gated);
		b.gated = NULL;
		if (w.c) {
			CHECK(run_ok(w.c, w.id));
			knitk_call_release(w.c);
		}
		CHECK_EQ(runs(ida), 0);

		/* The gated call and 62 loans: the worker's whole capacity. */
		REQUIRE(knitk_pool_submit(b.pool, T_GATE, &b.g.arg, sizeof(b.g.arg),
					  NULL, &b.gated) == 0);
		REQUIRE(gate_wait(&b.g, 'r') == 0);
		for (i = 0; i < BP_CAP - 1; i++)
			REQUIRE(loan_fill(b.pool, ZERO_ID, 0, NULL, &l[i]) == 0);
		co.deadline_ns = after_ms(BP_DEADLINE_MS);
		CHECK_EQ(loan_fill(b.pool, ZERO_ID, 0, &co, &c), -ETIMEDOUT);
		CHECK_EQ(plain_call(b.pool, new_id(16), 16, &co, &c), -ETIMEDOUT);
		knitk_call_release(l[0]);
		REQUIRE(loan_fill(b.pool, ZERO_ID, 0, NULL, &l[0]) == 0);
		if (pool_shapes[ci].kind == KNITK_WORKER_THREADS) {
			/* Event mode: no waiting in the library. */
			CHECK(knitk_pool_event_fd(b.pool) >= 0);
			CHECK_EQ(loan_fill(b.pool, ZERO_ID, 0, NULL, &c), -EAGAIN);
			knitk_call_release(l[1]);
			REQUIRE(loan_fill(b.pool, new_id(b.big_len), b.big_len, NULL, &l[1]) == 0);
			knitk_call_release(l[2]);
			CHECK_EQ(loan_fill(b.pool, new_id(b.big_len), b.big_len, NULL, &c), -EAGAIN);
			CHECK_EQ(loan_fill(b.pool, ZERO_ID, 0, NULL, &l[2]), 0);
		}
		for (i = 0; i < BP_CAP - 1; i++)
			knitk_call_release(l[i]);
		CHECK_EQ(gate_release(&b.g), 0);
		CHECK_EQ(loan_wait(b.pool, b.gated,
				   pool_shapes[ci].kind == KNITK_WORKER_THREADS), 0);
		knitk_call_release(b.gated);
		CHECK_EQ(runs(ZERO_ID), 0);
		pool_stats(b.pool, &st);
		CHECK_EQ(st.completed, st.submitted);
		CHECK(!bp_end(&b));
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

/*
 * Bad arguments: the documented errors, nothing registered or lost; a
 * loan sent twice, or a call that is no loan: -EINVAL, and the call runs
 * once as it would.
 */
static void loan_bad_arguments(void)
{
	unsigned int ci;

	for (ci = 0; ci < NR_POOL_SHAPES; ci++) {
		struct knitk_call_opts co = { .size = sizeof(co) };
		struct knitk_endpoint *ep;
		struct knitk_layout lay;
		struct knitk_pool_stats st;
		struct knitk_call *c = NULL, *n;
		struct knitk_pool *pool;
		uint64_t idl = new_id(100), idn = new_id(100);
		void *buf = NULL;

		REQUIRE(loan_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, 2, 0, &pool) == 0);
		REQUIRE(knitk_pool_endpoint(pool, &ep) == 0);
		REQUIRE(knitk_endpoint_layout(ep, &lay, NULL) == 0);
		CHECK_EQ(knitk_pool_loan(NULL, T_RUN, 16, NULL, &c, &buf), -EINVAL);
		CHECK_EQ(knitk_pool_loan(pool, T_RUN, 16, NULL, NULL, &buf), -EINVAL);
		CHECK_EQ(knitk_pool_loan(pool, T_RUN, 16, NULL, &c, NULL), -EINVAL);
		CHECK_EQ(knitk_pool_loan(pool, LOAN_NR, 16, NULL, &c, &buf), -EINVAL);
		CHECK_EQ(knitk_pool_loan(pool, T_RUN, lay.arena_size + 1, NULL, &c, &buf),
			 -EMSGSIZE);
		co.reserved = 1;
		CHECK_EQ(knitk_pool_loan(pool, T_RUN, 16, &co, &c, &buf), -EINVAL);
		co.reserved = 0;
		co.flags = KNITK_CALL_WORKER;
		co.worker = pool_shapes[ci].dispatch == KNITK_POOL_DISPATCH_STEAL ? 0 : 2;
		CHECK_EQ(knitk_pool_loan(pool, T_RUN, 16, &co, &c, &buf), -EINVAL);
		co.size = 4;
		CHECK_EQ(knitk_pool_loan(pool, T_RUN, 16, &co, &c, &buf), -EINVAL);
		CHECK(c == NULL && buf == NULL);
		CHECK_EQ(knitk_pool_submit_loan(NULL), -EINVAL);

		REQUIRE(plain_call(pool, idn, 100, NULL, &n) == 0);
		CHECK_EQ(knitk_pool_submit_loan(n), -EINVAL);
		CHECK(run_ok(n, idn));
		CHECK_EQ(knitk_pool_submit_loan(n), -EINVAL);
		knitk_call_release(n);

		REQUIRE(loan_fill(pool, idl, 100, NULL, &c) == 0);
		CHECK_EQ(knitk_pool_submit_loan(c), 0);
		CHECK_EQ(knitk_pool_submit_loan(c), -EINVAL);
		CHECK(run_ok(c, idl));
		CHECK_EQ(knitk_pool_submit_loan(c), -EINVAL);
		knitk_call_release(c);

		/* Nothing lost: the whole arena, by loan and by copy. */
		idl = new_id(lay.arena_size);
		REQUIRE(loan_fill(pool, idl, lay.arena_size, NULL, &c) == 0);
		CHECK_EQ(knitk_pool_submit_loan(c), 0);
		CHECK(run_ok(c, idl));
		knitk_call_release(c);
		idn = new_id(lay.arena_size);
		REQUIRE(plain_call(pool, idn, lay.arena_size, NULL, &c) == 0);
		CHECK(run_ok(c, idn));
		knitk_call_release(c);
		pool_stats(pool, &st);
		CHECK_EQ(st.submitted, 4);
		CHECK_EQ(st.completed, 4);
		knitk_pool_destroy(pool);
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

/*
 * Event mode (thread workers): a loan is reaped like any call once sent;
 * an unsent one is not, even once aborted: it stays its caller's until
 * its submit (which returns its status) or its release.
 */
static void loan_reaped_in_event_mode(void)
{
	unsigned int ci;

	for (ci = 0; ci < 2; ci++) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
		struct knitk_call *a, *b, *got[4];
		struct knitk_pool *pool;
		uint64_t ida = new_id(100), idb = new_id(5000);
		int efd, ep, n = 0;

		REQUIRE(loan_pool(pool_shapes[ci].kind, pool_shapes[ci].dispatch, 2, 0, &pool) == 0);
		efd = knitk_pool_event_fd(pool);
		REQUIRE(efd >= 0);
		ep = epoll_create1(EPOLL_CLOEXEC);
		REQUIRE(ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) == 0);
		REQUIRE(loan_fill(pool, ida, 100, NULL, &a) == 0);
		CHECK_EQ(knitk_call_abort(a), 0);
		CHECK_EQ(knitk_pool_reap(pool, got, 4), 0);
		CHECK_EQ(knitk_pool_submit_loan(a), -ECANCELED);
		CHECK_EQ(knitk_pool_reap(pool, got, 4), 0);
		knitk_call_release(a);

		REQUIRE(loan_fill(pool, idb, 5000, NULL, &b) == 0);
		CHECK_EQ(knitk_pool_reap(pool, got, 4), 0);
		CHECK_EQ(knitk_pool_submit_loan(b), 0);
		while (!n) {
			n = knitk_pool_reap(pool, got, 4);
			if (!n && epoll_wait(ep, &ev, 1, HANG_MS) != 1)
				break;
		}
		CHECK_EQ(n, 1);
		if (n == 1) {
			CHECK(got[0] == b);
			CHECK(run_result_ok(b, idb));
		}
		knitk_call_release(b);
		close(ep);
		knitk_pool_destroy(pool);
		CHECK_EQ(runs(ida), 0);
		CHECK_EQ(runs(idb), 1);
		if (tap_case_failed)
			printf("# %s\n", pool_shapes[ci].name);
	}
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &loan_tasks, NULL) ||
	    deaths_init(argc, argv))
		return 1;
	TEST(loan_sizes_end_to_end);
	TEST(loan_release_without_submit);
	TEST(loan_abort_and_deadline_before_submit);
	TEST(loan_shutdown_drain_unsent);
	TEST(loan_shutdown_cancel_unsent);
	TEST(loan_shutdown_every_lane_loaned);
	TEST(loan_worker_killed_private);
	TEST(loan_worker_killed_respawn_private);
	TEST(loan_worker_killed_steal);
	TEST(loan_waits_for_room);
	TEST(loan_bad_arguments);
	TEST(loan_reaped_in_event_mode);
	deaths_fini();
	return tap_exit();
}
