// SPDX-License-Identifier: GPL-2.0
/*
 * Every call but a loan takes its result from its box (docs/protocol.md
 * R6, R7), whoever looks at it and however: not only a thread that waits
 * for it alone.  In every shape of pool (thread and process workers,
 * private lanes and stealing), each result checked by its call's id and
 * each call's runs counted in the run table:
 *  - a batch waited for with knitk_pool_wait_all: every result from its
 *    box (counted by the workers' box hook in thread pools);
 *  - a call only polled with knitk_call_status, one only read with
 *    knitk_call_result, and one waited for with knitk_pool_wait_any;
 *  - more calls submitted than the pool has entries, none waited for:
 *    the submit that waits for room frees the entries whose results sit
 *    in boxes, and hands the rest to the drainer;
 *  - a drain shutdown of calls nobody waited for;
 *  - a wait whose deadline comes first leaves the call to its box, and a
 *    later wait takes the result from there; two threads waiting for one
 *    call both see it end.
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

#define BATCH		32
#define ROUNDS		20
/* More than one worker's entries: the submits wait for room. */
#define MANY		(3 * KNITK_LANES)

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

static void batch_in(const struct pool_shape *sh)
{
	unsigned char bufs[BATCH][sizeof(struct run_arg) + 8];
	struct knitk_submission subs[BATCH];
	struct knitk_call *calls[BATCH];
	uint64_t ids[BATCH];
	unsigned long b0 = atomic_load(&boxed);
	struct knitk_pool *pool;
	unsigned int r, i;

	printf("# %s\n", sh->name);
	REQUIRE(new_pool(sh->kind, sh->dispatch, 2, 0, &pool) == 0);
	for (r = 0; r < ROUNDS; r++) {
		for (i = 0; i < BATCH; i++) {
			ids[i] = atomic_fetch_add(&next_id, 1);
			run_arg_fill(bufs[i], ids[i], 0, sizeof(bufs[i]));
			subs[i] = (struct knitk_submission){
				.fn = T_RUN, .in = bufs[i], .len = sizeof(bufs[i]),
			};
		}
		REQUIRE(knitk_pool_submit_batch(pool, subs, BATCH, calls) == BATCH);
		CHECK_EQ(knitk_pool_wait_all(pool, calls, BATCH, KNITK_WAIT_FOREVER), 0);
		for (i = 0; i < BATCH; i++)
			check_run(calls[i], ids[i]);
	}
	if (counts_boxes(sh))
		CHECK_EQ(atomic_load(&boxed) - b0, (unsigned long)ROUNDS * BATCH);
	check_stats(pool);
	knitk_pool_destroy(pool);
}

EACH_POOL_SHAPE(batch)

/* The worker of @c has ended it on its word: DONE, whoever takes it. */
static void until_done(struct knitk_pool *pool, const struct knitk_call *c)
{
	while (slot_phase(atomic_load(&pool->slots[c->entry])) != SLOT_DONE)
		sched_yield();
}

/*
 * A call polled, one read, one done before knitk_pool_wait_any looks:
 * from their boxes; then wait_any of two calls running, each result its
 * own, whichever way it came.
 */
static void looks_in(const struct pool_shape *sh)
{
	unsigned long b0 = atomic_load(&boxed);
	struct knitk_call *c, *two[2];
	struct knitk_pool *pool;
	uint64_t id, ids[2];
	const void *d;
	size_t len;
	int k, ret;

	printf("# %s\n", sh->name);
	REQUIRE(new_pool(sh->kind, sh->dispatch, 2, 0, &pool) == 0);
	for (k = 0; k < 3; k++) {
		id = atomic_fetch_add(&next_id, 1);
		REQUIRE(submit_run(pool, id, 200, &c) == 0);
		if (k == 0) {
			while ((ret = knitk_call_status(c)) == -EINPROGRESS)
				sched_yield();
			CHECK_EQ(ret, run_status(id));
		} else if (k == 1) {
			while (knitk_call_result(c, &d, &len) == -EINPROGRESS)
				sched_yield();
		} else {
			until_done(pool, c);
			CHECK_EQ(knitk_pool_wait_any(pool, &c, 1, KNITK_WAIT_FOREVER), 0);
		}
		check_run(c, id);
	}
	if (counts_boxes(sh))
		CHECK_EQ(atomic_load(&boxed) - b0, 3);
	for (k = 0; k < 2; k++) {
		ids[k] = atomic_fetch_add(&next_id, 1);
		REQUIRE(submit_run(pool, ids[k], k ? 300 : 100, &two[k]) == 0);
	}
	ret = knitk_pool_wait_any(pool, two, 2, KNITK_WAIT_FOREVER);
	CHECK(ret == 0 || ret == 1);
	CHECK_EQ(knitk_pool_wait_any(pool, two + 1, 1, KNITK_WAIT_FOREVER), 0);
	CHECK_EQ(knitk_pool_wait_all(pool, two, 2, KNITK_WAIT_FOREVER), 0);
	for (k = 0; k < 2; k++)
		check_run(two[k], ids[k]);
	check_stats(pool);
	knitk_pool_destroy(pool);
}

EACH_POOL_SHAPE(looks)

/*
 * MANY calls to one worker, none waited for until all are submitted: the
 * submits past the worker's entries wait for room, which only the
 * results in boxes can free.  Then shutdown drains a second round that
 * nobody waits for.
 */
static void room_in(const struct pool_shape *sh)
{
	static struct knitk_call *calls[MANY];
	static uint64_t ids[MANY];
	struct knitk_pool *pool;
	unsigned int i;

	printf("# %s\n", sh->name);
	REQUIRE(new_pool(sh->kind, sh->dispatch, 1, 0, &pool) == 0);
	for (i = 0; i < MANY; i++) {
		ids[i] = atomic_fetch_add(&next_id, 1);
		REQUIRE(submit_run(pool, ids[i], 0, &calls[i]) == 0);
	}
	/* Backwards: the last ones first, from their own words. */
	for (i = MANY; i-- > 0;)
		CHECK_EQ(knitk_call_wait(calls[i], KNITK_WAIT_FOREVER), run_status(ids[i]));
	for (i = 0; i < MANY; i++)
		check_run(calls[i], ids[i]);
	for (i = 0; i < POOL_CAP; i++) {
		ids[i] = atomic_fetch_add(&next_id, 1);
		REQUIRE(submit_run(pool, ids[i], 0, &calls[i]) == 0);
	}
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	for (i = 0; i < POOL_CAP; i++) {
		CHECK(call_done(calls[i]));
		check_run(calls[i], ids[i]);
	}
	check_stats(pool);
	knitk_pool_destroy(pool);
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
	g.arg.n = 24;
	REQUIRE(knitk_pool_submit(pool, T_GATE, &g.arg, sizeof(g.arg), NULL, &c) == 0);
	REQUIRE(gate_wait(&g, 'r') == 0);
	CHECK_EQ(knitk_call_wait(c, after_ms(2)), -EINPROGRESS);
	CHECK_EQ(knitk_call_status(c), -EINPROGRESS);
	/* Still the box's, for whoever waits next. */
	CHECK(c->take);
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

int main(int argc, char **argv)
{
	atomic_store(&knitk__test_box_hook, count_box);
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	if (tests_init(argc, argv, false) || runtab_open())
		return 1;
	tap_run("batch_from_boxes", batch_all);
	tap_run("looks_from_boxes", looks_all);
	tap_run("room_and_drain", room_all);
	tap_run("deadline_keeps_the_box", deadline_all);
	return tap_exit();
}
