// SPDX-License-Identifier: GPL-2.0
/*
 * A call whose waiter left at its deadline keeps its box (docs/protocol.md
 * R6, R7): its worker leaves the result there, and whoever looks at the
 * call next takes it, however it looks.  In every shape of pool (thread
 * and process workers, private lanes and stealing), each result checked
 * by its call's id and each call's runs counted in the run table:
 *  - the look is knitk_call_status, knitk_call_result, knitk_pool_wait_any,
 *    knitk_pool_wait_all or knitk_call_release: the result from the box
 *    (counted by the workers' box hook in thread pools);
 *  - a worker's entries all held by such results: the submit that waits
 *    for room takes them and goes on; a drain shutdown completes them;
 *  - two threads waiting for one such call both see it end;
 *  - its result, finished before the call's deadline, stands however late
 *    the look; finished past it, the call completes -ETIMEDOUT.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "tap.h"
#include "pool_tasks.h"
#include "fixtures.h"
#include "../pool/pool_internal.h"
#include "../pool/slot.h"


/*
 * Results the thread workers of this process left in boxes for the host
 * to take: SLOT_TAKE on the call's word as the worker wrote the box (a
 * worker writes a result that fits to the box in any case, and copies it
 * to a return lane when nobody takes it there).
 */
static _Atomic unsigned long boxed;

static void count_box(unsigned int worker, void *box,
		      const _Atomic uint64_t *word)
{
	(void)worker;
	(void)box;
	if (atomic_load(word) & SLOT_TAKE)
		atomic_fetch_add(&boxed, 1);
}

/* Thread workers count their boxes here; process workers elsewhere. */
static bool counts_boxes(const struct pool_shape *sh)
{
	return sh->kind == KNITK_WORKER_THREADS;
}

static _Atomic uint64_t next_id = 1;

static int submit_run(struct knitk_pool *pool, uint64_t id, uint32_t us,
		      struct knitk_call **c)
{
	unsigned char buf[sizeof(struct run_arg) + 8];

	run_arg_fill(buf, id, us, sizeof(buf));
	return knitk_pool_submit(pool, T_RUN, buf, sizeof(buf), NULL, c);
}

/* @c ended as T_RUN(@id), ran once; released. */
static void check_run(struct knitk_call *c, uint64_t id)
{
	_Atomic uint8_t *tab = runtab_get();

	CHECK(run_result_ok(c, id));
	CHECK_EQ(atomic_load(&tab[id]), 1);
	knitk_call_release(c);
}

static void check_stats(struct knitk_pool *pool)
{
	struct knitk_pool_stats st;

	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.stale, 0);
}


/* The worker of @c has ended it on its word: DONE, whoever takes it. */
static void until_done(struct knitk_pool *pool, const struct knitk_call *c)
{
	while (slot_phase(atomic_load(&pool->slots[c->entry])) != SLOT_DONE)
		sched_yield();
}

/*
 * A gated call (@g, 24 bytes of 'g'; @co its options or NULL) whose wait
 * ends at its deadline while the task holds: it keeps its box.
 */
static struct knitk_call *left_in_box(struct knitk_pool *pool, struct gate *g,
				      const struct knitk_call_opts *co)
{
	struct knitk_call *c;

	g->arg.n = 24;
	if (knitk_pool_submit(pool, T_GATE, &g->arg, sizeof(g->arg), co, &c) ||
	    gate_wait(g, 'r'))
		return NULL;
	CHECK_EQ(knitk_call_wait(c, after_ms(1)), -EINPROGRESS);
	CHECK(c->take);
	return c;
}

static bool gate_result_ok(struct knitk_call *c)
{
	const void *d;
	size_t len;

	return knitk_call_status(c) == 24 && !knitk_call_result(c, &d, &len) &&
	       len == 24 && !memcmp(d, "gggggggggggggggggggggggg", 24);
}

/* Each way of looking takes the result its worker left in the box. */
static void looks_in(const struct pool_shape *sh)
{
	unsigned long b0 = atomic_load(&boxed);
	struct knitk_pool *pool;
	struct knitk_call *c;
	struct gate g;
	const void *d;
	size_t len;
	int k;

	printf("# %s\n", sh->name);
	REQUIRE(gate_open(&g) == 0);
	REQUIRE(new_pool(sh->kind, sh->dispatch, 2, 0, &pool) == 0);
	for (k = 0; k < 5; k++) {
		c = left_in_box(pool, &g, NULL);
		REQUIRE(c);
		CHECK_EQ(gate_release(&g), 0);
		CHECK_EQ(gate_wait(&g, 'd'), 0);
		until_done(pool, c);
		if (k == 0) {
			CHECK_EQ(knitk_call_status(c), 24);
		} else if (k == 1) {
			CHECK_EQ(knitk_call_result(c, &d, &len), 0);
		} else if (k == 2) {
			CHECK_EQ(knitk_pool_wait_any(pool, &c, 1, KNITK_WAIT_FOREVER), 0);
		} else if (k == 3) {
			CHECK_EQ(knitk_pool_wait_all(pool, &c, 1, 0), 0);
		} else {
			/* Released unlooked at: complete with its result, counted. */
			knitk_call_release(c);
			continue;
		}
		CHECK(gate_result_ok(c));
		knitk_call_release(c);
	}
	if (counts_boxes(sh))
		CHECK_EQ(atomic_load(&boxed) - b0, 5);
	check_stats(pool);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

EACH_POOL_SHAPE(looks)

/*
 * One worker, held by a gated call, and every other entry of it taken by
 * a call whose wait ended at its deadline: once they are all done, in
 * their boxes, the next submit waits for room, which only those boxes
 * can give.  Then a drain shutdown of such calls.
 */
static void room_in(const struct pool_shape *sh)
{
	static struct knitk_call *calls[POOL_CAP];
	static uint64_t ids[POOL_CAP];
	struct knitk_pool *pool;
	struct knitk_call *gc, *more;
	unsigned int i, n;
	struct gate g;
	uint64_t id;

	printf("# %s\n", sh->name);
	REQUIRE(gate_open(&g) == 0);
	REQUIRE(new_pool(sh->kind, sh->dispatch, 1, 0, &pool) == 0);
	for (n = POOL_CAP - 1; ; n = 10) {
		gc = left_in_box(pool, &g, NULL);
		REQUIRE(gc);
		for (i = 0; i < n; i++) {
			ids[i] = atomic_fetch_add(&next_id, 1);
			REQUIRE(submit_run(pool, ids[i], 0, &calls[i]) == 0);
			CHECK_EQ(knitk_call_wait(calls[i], after_ms(0)), -EINPROGRESS);
		}
		CHECK_EQ(gate_release(&g), 0);
		CHECK_EQ(gate_wait(&g, 'd'), 0);
		for (i = 0; i < n; i++)
			until_done(pool, calls[i]);
		if (n != POOL_CAP - 1)
			break;
		/* Every entry held: this submit waits for room. */
		id = atomic_fetch_add(&next_id, 1);
		REQUIRE(submit_run(pool, id, 0, &more) == 0);
		CHECK_EQ(knitk_call_wait(more, KNITK_WAIT_FOREVER), run_status(id));
		check_run(more, id);
		CHECK(gate_result_ok(gc));
		knitk_call_release(gc);
		for (i = 0; i < n; i++)
			check_run(calls[i], ids[i]);
	}
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	CHECK(call_done(gc) && gate_result_ok(gc));
	knitk_call_release(gc);
	for (i = 0; i < n; i++) {
		CHECK(call_done(calls[i]));
		check_run(calls[i], ids[i]);
	}
	check_stats(pool);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

EACH_POOL_SHAPE(room)

struct second {
	pthread_t thread;
	struct knitk_call *call;
	int ret;
};

static void *second_main(void *arg)
{
	struct second *s = arg;

	s->ret = knitk_call_wait(s->call, KNITK_WAIT_FOREVER);
	return NULL;
}

/*
 * A gated call: a wait that ends at its deadline leaves it in flight
 * with its box; two threads then wait for it and both see its result.
 */
static void deadline_in(const struct pool_shape *sh)
{
	unsigned long b0;
	struct knitk_pool *pool;
	struct second s = { 0 };
	struct knitk_call *c;
	struct gate g;
	const void *d;
	size_t len;
	int ret;

	printf("# %s\n", sh->name);
	REQUIRE(gate_open(&g) == 0);
	REQUIRE(new_pool(sh->kind, sh->dispatch, 2, 0, &pool) == 0);
	c = left_in_box(pool, &g, NULL);
	REQUIRE(c);
	/* Still the box's, for whoever waits next. */
	CHECK_EQ(knitk_call_status(c), -EINPROGRESS);
	s.call = c;
	REQUIRE(pthread_create(&s.thread, NULL, second_main, &s) == 0);
	b0 = atomic_load(&boxed);
	CHECK_EQ(gate_release(&g), 0);
	ret = knitk_call_wait(c, KNITK_WAIT_FOREVER);
	pthread_join(s.thread, NULL);
	CHECK_EQ(ret, 24);
	CHECK_EQ(s.ret, 24);
	CHECK_EQ(knitk_call_result(c, &d, &len), 0);
	CHECK_EQ(len, 24);
	CHECK(len == 24 && ((const char *)d)[0] == 'g' && ((const char *)d)[23] == 'g');
	if (counts_boxes(sh))
		CHECK_EQ(atomic_load(&boxed) - b0, 1);
	knitk_call_release(c);
	check_stats(pool);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

EACH_POOL_SHAPE(deadline)

/* Until CLOCK_MONOTONIC has passed @t. */
static void until_past(uint64_t t)
{
	while (after_ms(0) <= t)
		sched_yield();
}

/*
 * A gated call with a deadline whose wait left it in its box: finished
 * in time, its result stands when it is looked at only after the
 * deadline; finished past the deadline, it completes -ETIMEDOUT and, on
 * a stealing pool, names no worker.
 */
static void in_time_in(const struct pool_shape *sh)
{
	struct knitk_call_opts co = { .size = sizeof(co) };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint64_t ms = 100;
	struct gate g;
	bool late;

	printf("# %s\n", sh->name);
	REQUIRE(gate_open(&g) == 0);
	REQUIRE(new_pool(sh->kind, sh->dispatch, 2, 0, &pool) == 0);
	for (late = false; ; ) {
		co.deadline_ns = after_ms(ms);
		c = left_in_box(pool, &g, &co);
		REQUIRE(c);
		if (late)
			until_past(co.deadline_ns);
		CHECK_EQ(gate_release(&g), 0);
		CHECK_EQ(gate_wait(&g, 'd'), 0);
		until_done(pool, c);
		if (!late && after_ms(0) >= co.deadline_ns) {
			/* Not seen done in time (a slow machine): again, longer. */
			knitk_call_release(c);
			ms *= 2;
			continue;
		}
		until_past(co.deadline_ns);
		if (late) {
			CHECK_EQ(knitk_call_status(c), -ETIMEDOUT);
			if (sh->dispatch == KNITK_POOL_DISPATCH_STEAL)
				CHECK_EQ(knitk_call_worker(c), -ENOENT);
			knitk_call_release(c);
			break;
		}
		CHECK(gate_result_ok(c));
		knitk_call_release(c);
		late = true;
	}
	/* The late result, dropped. */
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.stale, 1);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

EACH_POOL_SHAPE(in_time)

int main(int argc, char **argv)
{
	atomic_store(&knitk__test_box_hook, count_box);
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	if (tests_init(argc, argv, false) || runtab_open())
		return 1;
	tap_run("looks_from_boxes", looks_all);
	tap_run("room_and_drain", room_all);
	tap_run("deadline_keeps_the_box", deadline_all);
	tap_run("result_in_time_stands", in_time_all);
	return tap_exit();
}
