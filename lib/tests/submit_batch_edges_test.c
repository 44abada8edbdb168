// SPDX-License-Identifier: GPL-2.0
/*
 * knitk_pool_submit_batch at its edges: runs past 64 with a bad entry in a
 * later run, calls pinned among free ones, event mode running out of room
 * part-way, shutdown and a worker killed while the batch waits; a pinned
 * call's late result, and sized outputs of odd sizes.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"
#include "fixtures.h"

static int new_pool3(unsigned int dispatch, unsigned int workers,
		     struct knitk_pool **pool)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = workers,
				     .knot_flags = KNITK_KNOT_FUTEX,
				     .dispatch = dispatch };

	return knitk_pool_create(&o, &test_tasks, pool);
}

/*
 * Runs of 64: 200 calls in one batch, a bad entry in the second run (the
 * calls before it submitted, the slots after it untouched), and a bad
 * first entry (its error, nothing submitted).
 */
static void batch_runs_and_bad_entry(void)
{
	struct knitk_submission subs[200];
	struct knitk_call *calls[200];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	uint64_t xs[200];
	int i, n, good = 0;

	REQUIRE(new_pool3(KNITK_POOL_DISPATCH_PRIVATE, 2, &pool) == 0);
	for (i = 0; i < 200; i++) {
		xs[i] = (uint64_t)i * 77 + 1;
		subs[i] = (struct knitk_submission){ .fn = T_MIX, .in = &xs[i], .len = 8 };
	}
	CHECK_EQ(knitk_pool_submit_batch(pool, subs, 200, calls), 200);
	CHECK_EQ(knitk_pool_wait_all(pool, calls, 200, KNITK_WAIT_FOREVER), 0);
	for (i = 0; i < 200; i++) {
		good += knitk_call_status(calls[i]) == 0 && mix_result_ok(calls[i], xs[i]);
		knitk_call_release(calls[i]);
	}
	CHECK_EQ(good, 200);

	subs[70].fn = T_NR;
	memset(calls, 0, sizeof(calls));
	n = knitk_pool_submit_batch(pool, subs, 100, calls);
	CHECK_EQ(n, 70);
	for (i = 70; i < 100; i++)
		CHECK(calls[i] == NULL);
	if (n > 0) {
		CHECK_EQ(knitk_pool_wait_all(pool, calls, (unsigned int)n,
					     KNITK_WAIT_FOREVER), 0);
		for (i = 0; i < n; i++) {
			CHECK(mix_result_ok(calls[i], xs[i]));
			knitk_call_release(calls[i]);
		}
	}
	subs[70].fn = T_MIX;
	subs[0].reserved = 1;
	CHECK_EQ(knitk_pool_submit_batch(pool, subs, 10, calls), -EINVAL);
	subs[0].reserved = 0;
	CHECK_EQ(knitk_pool_submit_batch(pool, subs, 0, calls), -EINVAL);
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, 270);
	CHECK_EQ(st.completed, 270);
	knitk_pool_destroy(pool);
}

/*
 * Calls pinned to worker 1 among unpinned ones: the pinned ones run on
 * worker 1, in array order (T_SEQ counts the runs of the process, so the
 * runs of one worker increase); a stealing pool refuses the pin at its
 * index, after submitting the calls before it.
 */
static void batch_pinned_among_free(void)
{
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER,
				       .worker = 1 };
	struct knitk_submission subs[100];
	struct knitk_call *calls[100];
	struct knitk_pool *pool;
	uint64_t last = 0, seq;
	const void *d;
	size_t len;
	int i, n, first = 1;

	REQUIRE(new_pool3(KNITK_POOL_DISPATCH_PRIVATE, 2, &pool) == 0);
	for (i = 0; i < 100; i++)
		subs[i] = (struct knitk_submission){ .fn = T_SEQ,
						     .opts = i % 3 ? NULL : &pin };
	CHECK_EQ(knitk_pool_submit_batch(pool, subs, 100, calls), 100);
	CHECK_EQ(knitk_pool_wait_all(pool, calls, 100, KNITK_WAIT_FOREVER), 0);
	for (i = 0; i < 100; i++) {
		if (!(i % 3)) {
			CHECK_EQ(knitk_call_worker(calls[i]), 1);
			CHECK(!knitk_call_result(calls[i], &d, &len) && len == 8);
			if (len == 8) {
				memcpy(&seq, d, 8);
				CHECK(first || seq > last);
				last = seq;
				first = 0;
			}
		}
		knitk_call_release(calls[i]);
	}
	knitk_pool_destroy(pool);

	REQUIRE(new_pool3(KNITK_POOL_DISPATCH_STEAL, 2, &pool) == 0);
	pin.worker = 0;
	for (i = 0; i < 10; i++)
		subs[i] = (struct knitk_submission){ .fn = T_SEQ,
						     .opts = i == 5 ? &pin : NULL };
	n = knitk_pool_submit_batch(pool, subs, 10, calls);
	CHECK_EQ(n, 5);
	for (i = 0; i < n; i++) {
		CHECK_EQ(knitk_call_wait(calls[i], KNITK_WAIT_FOREVER), 0);
		knitk_call_release(calls[i]);
	}
	CHECK_EQ(knitk_pool_submit_batch(pool, subs + 5, 5, calls), -EINVAL);
	knitk_pool_destroy(pool);
}

/* Reap until @want calls are in @out (each checked once); returns them. */
static unsigned int reap_until(struct knitk_pool *pool, struct knitk_call **out,
			       unsigned int want)
{
	unsigned int got = 0;
	int n;

	while (got < want) {
		n = knitk_pool_reap(pool, out + got, want - got);
		if (n < 0)
			break;
		got += (unsigned int)n;
		if (!n)
			sched_yield();
	}
	return got;
}

/*
 * Event mode: a batch larger than the room of the (gated) worker stops
 * part-way; the count it returns is exactly the calls that complete and
 * are reaped, once each, with their results; a batch with no room at all
 * is -EAGAIN and adds nothing.
 */
static void batch_event_mode_part_way(unsigned int dispatch)
{
	struct knitk_submission subs[200];
	struct knitk_call *calls[200], *out[201], *held;
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	uint64_t xs[200];
	unsigned int got, i, j, found;
	struct gate g;
	int n;

	REQUIRE(gate_open(&g) == 0);
	REQUIRE(new_pool3(dispatch, 1, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	REQUIRE(knitk_pool_submit(pool, T_GATE, &g.arg, sizeof(g.arg), NULL, &held) == 0);
	REQUIRE(gate_wait(&g, 'r') == 0);
	for (i = 0; i < 200; i++) {
		xs[i] = i + 5;
		subs[i] = (struct knitk_submission){ .fn = T_MIX, .in = &xs[i], .len = 8 };
	}
	n = knitk_pool_submit_batch(pool, subs, 200, calls);
	CHECK(n >= 1 && n < 200);
	CHECK_EQ(knitk_pool_submit_batch(pool, subs, 200, calls + (n > 0 ? n : 0)), -EAGAIN);
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, (uint64_t)n + 1);
	REQUIRE(gate_release(&g) == 0);
	REQUIRE(n > 0);
	got = reap_until(pool, out, (unsigned int)n + 1);
	CHECK_EQ(got, (unsigned int)n + 1);
	for (j = 0; j < (unsigned int)n; j++) {
		for (found = 0, i = 0; i < got; i++)
			found += out[i] == calls[j];
		CHECK_EQ(found, 1);
		CHECK(mix_result_ok(calls[j], xs[j]));
	}
	for (i = 0; i < got; i++)
		knitk_call_release(out[i]);
	CHECK_EQ(knitk_pool_reap(pool, out, 1), 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, (uint64_t)n + 1);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

static void batch_event_mode_part_way_private(void)
{
	batch_event_mode_part_way(KNITK_POOL_DISPATCH_PRIVATE);
}

static void batch_event_mode_part_way_steal(void)
{
	batch_event_mode_part_way(KNITK_POOL_DISPATCH_STEAL);
}

struct batcher {
	struct knitk_pool *pool;
	struct knitk_submission *subs;
	struct knitk_call **calls;
	unsigned int nr;
	int ret;
};

static void *batcher_main(void *arg)
{
	struct batcher *b = arg;

	b->ret = knitk_pool_submit_batch(b->pool, b->subs, b->nr, b->calls);
	return NULL;
}

/*
 * Start a thread submitting 200 T_MIX calls of x0, x0 + 1, ... (with
 * @opts) in one batch, and return once the pool has taken two of them:
 * the rest then wait for room.
 */
static void batcher_start(struct batcher *b, pthread_t *th,
			  struct knitk_pool *pool, uint64_t *xs,
			  struct knitk_submission *subs,
			  struct knitk_call **calls, uint64_t x0,
			  const struct knitk_call_opts *opts)
{
	struct knitk_pool_stats st;
	unsigned int i;

	for (i = 0; i < 200; i++) {
		xs[i] = x0 + i;
		subs[i] = (struct knitk_submission){ .fn = T_MIX, .in = &xs[i],
						     .len = 8, .opts = opts };
	}
	*b = (struct batcher){ .pool = pool, .subs = subs, .calls = calls, .nr = 200 };
	REQUIRE(pthread_create(th, NULL, batcher_main, b) == 0);
	do {
		sched_yield();
		pool_stats(pool, &st);
	} while (st.submitted < 2);
}

/*
 * A shutdown while a batch waits for room (its one worker gated): the
 * batch returns how many it submitted (or -ESHUTDOWN if none); every one
 * of those completes exactly once, with its result or -ECANCELED, and the
 * pool counts exactly them (and the gated call).
 */
static void batch_shutdown_while_waiting(void)
{
	struct knitk_submission subs[200];
	struct knitk_call *calls[200], *held;
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct shutter sh;
	struct batcher b;
	pthread_t th, ts;
	uint64_t xs[200];
	int i, ok = 0, canceled = 0, s;
	struct gate g;

	REQUIRE(gate_open(&g) == 0);
	REQUIRE(new_pool3(KNITK_POOL_DISPATCH_PRIVATE, 1, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_GATE, &g.arg, sizeof(g.arg), NULL, &held) == 0);
	REQUIRE(gate_wait(&g, 'r') == 0);
	/* The worker's room is taken: the batch waits for it. */
	batcher_start(&b, &th, pool, xs, subs, calls, 9, NULL);
	/* Cancel while the worker is still held: it frees no room first. */
	sh = (struct shutter){ .pool = pool, .mode = KNITK_SHUTDOWN_CANCEL };
	REQUIRE(pthread_create(&ts, NULL, shutter_main, &sh) == 0);
	CHECK_EQ(knitk_call_wait(held, KNITK_WAIT_FOREVER), -ECANCELED);
	pthread_join(th, NULL);
	REQUIRE(gate_release(&g) == 0);
	pthread_join(ts, NULL);
	CHECK_EQ(sh.ret, 0);
	CHECK(b.ret > 0 && b.ret < 200);
	for (i = 0; i < b.ret; i++) {
		s = knitk_call_wait(calls[i], KNITK_WAIT_FOREVER);
		ok += s == 0 && mix_result_ok(calls[i], xs[i]);
		canceled += s == -ECANCELED;
		knitk_call_release(calls[i]);
	}
	CHECK_EQ(ok + canceled, b.ret);
	knitk_call_release(held);
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, (uint64_t)(b.ret > 0 ? b.ret : 0) + 1);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

/*
 * The worker a batch is pinned to dies (SIGKILL) while the batch waits for
 * its room: the batch returns how many it submitted, each of them
 * completes once, with its result or -EOWNERDEAD, and the pool's counts
 * agree with what the handles say.
 */
static void batch_worker_killed_while_waiting(void)
{
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER };
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 2,
				     .kind = KNITK_WORKER_PROCESSES,
				     .knot_flags = KNITK_KNOT_FUTEX };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_submission subs[200];
	struct knitk_call *calls[200], *held;
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct batcher b;
	pthread_t th;
	uint64_t xs[200], dead = 0;
	int i, ok = 0, s;
	struct gate g;

	REQUIRE(gate_open(&g) == 0);
	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_GATE, &g.arg, sizeof(g.arg), &pin, &held) == 0);
	REQUIRE(gate_wait(&g, 'r') == 0);
	REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0 && wi.pid > 0);
	batcher_start(&b, &th, pool, xs, subs, calls, 21, &pin);
	CHECK_EQ(kill(wi.pid, SIGKILL), 0);
	pthread_join(th, NULL);
	CHECK(b.ret > 0 && b.ret < 200);
	CHECK_EQ(knitk_call_wait(held, KNITK_WAIT_FOREVER), -EOWNERDEAD);
	CHECK_EQ(knitk_call_worker(held), 0);
	knitk_call_release(held);
	for (i = 0; i < b.ret; i++) {
		s = knitk_call_wait(calls[i], KNITK_WAIT_FOREVER);
		ok += s == 0 && mix_result_ok(calls[i], xs[i]);
		dead += s == -EOWNERDEAD;
		CHECK_EQ(knitk_call_worker(calls[i]), 0);
		knitk_call_release(calls[i]);
	}
	CHECK_EQ(ok + (int)dead, b.ret);
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, (uint64_t)b.ret + 1);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.ownerdead, dead + 1);
	/* Worker 1 still serves; worker 0 is gone (-EPIPE when pinned). */
	CHECK_EQ(mix_calls_good(pool, 3, NULL, 5, 1), 3);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, xs, 8, &pin, &held), -EPIPE);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

/*
 * knitk_call_worker on a stealing pool: -EINPROGRESS while running;
 * -ENOENT once the call completed without a worker's result (aborted, or
 * expired while running), and still -ENOENT after the worker's late
 * result has arrived and been dropped (stale).
 */
static void call_worker_late_result(void)
{
	struct knitk_call_opts soon = { .size = sizeof(soon) };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c, *d;
	uint64_t x = 3;
	struct gate g;
	int round;

	REQUIRE(gate_open(&g) == 0);
	REQUIRE(new_pool3(KNITK_POOL_DISPATCH_STEAL, 2, &pool) == 0);
	for (round = 0; round < 2; round++) {
		soon.deadline_ns = round ? after_ms(20) : 0;
		REQUIRE(knitk_pool_submit(pool, T_GATE, &g.arg, sizeof(g.arg),
					  &soon, &c) == 0);
		REQUIRE(gate_wait(&g, 'r') == 0);
		CHECK_EQ(knitk_call_worker(c), -EINPROGRESS);
		if (round)
			CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -ETIMEDOUT);
		else
			CHECK_EQ(knitk_call_abort(c), 0);
		CHECK_EQ(knitk_call_worker(c), -ENOENT);
		REQUIRE(gate_release(&g) == 0);
		REQUIRE(gate_wait(&g, 'd') == 0);
		/* Until the late result has been taken and dropped. */
		do {
			REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &d) == 0);
			CHECK_EQ(knitk_call_wait(d, KNITK_WAIT_FOREVER), 0);
			CHECK(knitk_call_worker(d) == 0 || knitk_call_worker(d) == 1);
			knitk_call_release(d);
			pool_stats(pool, &st);
		} while (st.stale < (uint64_t)round + 1);
		CHECK_EQ(knitk_call_worker(c), -ENOENT);
		CHECK_EQ(knitk_call_status(c), round ? -ETIMEDOUT : -ECANCELED);
		knitk_call_release(c);
	}
	knitk_pool_destroy(pool);
	gate_close(&g);
}

/*
 * The bytes a sized output struct of @size got: all of them up to the
 * newest version this header knows (@ver), and past it at least that
 * version and at most @size (a later library knows more).
 */
static bool filled_ok(uint32_t size, uint32_t got, uint32_t ver)
{
	return size <= ver ? got == size : got >= ver && got <= size;
}

/*
 * Sized output structs at sizes between versions and past the library's:
 * filled up to the caller's size (never a byte past it), that count in
 * @size; the library's own size when the caller's is larger; -E2BIG past
 * KNITK_SIZED_MAX, -EINVAL below the first version.
 */
static void sized_outputs_odd_sizes(void)
{
	static const uint32_t stat_sizes[] = {
		KNITK_POOL_STATS_SIZE_VER0, KNITK_POOL_STATS_SIZE_VER0 + 1,
		KNITK_POOL_STATS_SIZE_VER1 + 3, KNITK_POOL_STATS_SIZE_VER2 - 1,
		KNITK_POOL_STATS_SIZE_VER2, KNITK_POOL_STATS_SIZE_VER2 + 5,
		KNITK_SIZED_MAX,
	};
	static const uint32_t info_sizes[] = {
		KNITK_WORKER_INFO_SIZE_VER0, KNITK_WORKER_INFO_SIZE_VER0 + 7,
		KNITK_WORKER_INFO_SIZE_VER1, KNITK_WORKER_INFO_SIZE_VER1 + 9,
		KNITK_WORKER_INFO_SIZE_VER2, KNITK_SIZED_MAX,
	};
	static unsigned char buf[KNITK_SIZED_MAX + 64];
	struct knitk_pool *pool;
	uint64_t x = 1, submitted;
	uint32_t size, got;
	unsigned int i, j;

	REQUIRE(new_pool3(KNITK_POOL_DISPATCH_PRIVATE, 1, &pool) == 0);
	CHECK_EQ(mix_calls_good(pool, 3, NULL, x, 1), 3);
	for (i = 0; i < sizeof(stat_sizes) / sizeof(stat_sizes[0]); i++) {
		size = stat_sizes[i];
		memset(buf, 0x5a, sizeof(buf));
		memcpy(buf, &size, 4);
		CHECK_EQ(knitk_pool_stats(pool, (struct knitk_pool_stats *)buf), 0);
		memcpy(&got, buf, 4);
		CHECK(filled_ok(size, got, KNITK_POOL_STATS_SIZE_VER2));
		memcpy(&submitted, buf + offsetof(struct knitk_pool_stats, submitted), 8);
		CHECK_EQ(submitted, 3);
		for (j = got; j < sizeof(buf); j++)
			if (buf[j] != 0x5a)
				break;
		CHECK_EQ(j, sizeof(buf));
	}
	for (i = 0; i < sizeof(info_sizes) / sizeof(info_sizes[0]); i++) {
		size = info_sizes[i];
		memset(buf, 0x5a, sizeof(buf));
		memcpy(buf, &size, 4);
		CHECK_EQ(knitk_pool_worker_info(pool, 0, (struct knitk_worker_info *)buf), 0);
		memcpy(&got, buf, 4);
		CHECK(filled_ok(size, got, KNITK_WORKER_INFO_SIZE_VER2));
		for (j = got; j < sizeof(buf); j++)
			if (buf[j] != 0x5a)
				break;
		CHECK_EQ(j, sizeof(buf));
	}
	size = KNITK_SIZED_MAX + 1;
	memcpy(buf, &size, 4);
	CHECK_EQ(knitk_pool_stats(pool, (struct knitk_pool_stats *)buf), -E2BIG);
	CHECK_EQ(knitk_pool_worker_info(pool, 0, (struct knitk_worker_info *)buf), -E2BIG);
	size = UINT32_MAX;
	memcpy(buf, &size, 4);
	CHECK_EQ(knitk_pool_stats(pool, (struct knitk_pool_stats *)buf), -E2BIG);
	size = KNITK_POOL_STATS_SIZE_VER0 - 1;
	memcpy(buf, &size, 4);
	CHECK_EQ(knitk_pool_stats(pool, (struct knitk_pool_stats *)buf), -EINVAL);
	size = KNITK_WORKER_INFO_SIZE_VER0 - 1;
	memcpy(buf, &size, 4);
	CHECK_EQ(knitk_pool_worker_info(pool, 0, (struct knitk_worker_info *)buf), -EINVAL);
	size = 0;
	memcpy(buf, &size, 4);
	CHECK_EQ(knitk_pool_stats(pool, (struct knitk_pool_stats *)buf), -EINVAL);
	knitk_pool_destroy(pool);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, false))
		return 1;
	TEST(batch_runs_and_bad_entry);
	TEST(batch_pinned_among_free);
	TEST(batch_event_mode_part_way_private);
	TEST(batch_event_mode_part_way_steal);
	TEST(batch_shutdown_while_waiting);
	TEST(batch_worker_killed_while_waiting);
	TEST(call_worker_late_result);
	TEST(sized_outputs_odd_sizes);
	return tap_exit();
}
