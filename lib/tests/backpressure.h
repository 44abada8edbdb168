/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A submit blocked on backpressure honours its call's deadline: the
 * scenarios shared by lib/tests/pool_deadline_test.c (futex backend, host)
 * and selftests/knitk/pool_test.c (module, guest).
 *
 * One worker is held in a T_GATE task until the scenario releases it, so
 * the room a submit waits for cannot come back before that: a request
 * arena filled by one queued call as large as the arena, or the worker's
 * whole capacity (POOL_CAP calls in flight).  A submit with a deadline
 * must then return -ETIMEDOUT at its deadline, with nothing published or
 * counted; once the gate opens every earlier call completes with its own
 * result and the room it would have taken is all there (a call as large
 * as the arena goes through again).
 *
 * Each scenario returns NULL when it passed, else the check that failed.
 */
#ifndef KNITK_BACKPRESSURE_H
#define KNITK_BACKPRESSURE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "knitk.h"
#include "knitk_pool.h"

/* How long a blocked submit is given, in ms: only a lower bound is checked. */
#define BP_DEADLINE_MS		20
/* Calls a worker holds at most (POOL_CAP in lib/pool/pool_internal.h). */
#define BP_CAP			(KNITK_LANES - 1)

enum bp_room { BP_ARENA, BP_CAPACITY };

struct bp {
	struct knitk_pool *pool;
	struct gate g;
	struct knitk_call *gated;
	unsigned char *big;		/* an argument as large as the arena */
	size_t big_len;
	const char *fail;
};

#define BP_STR_(x)	#x
#define BP_STR(x)	BP_STR_(x)
#define BP_CHECK(b, cond) do {						\
	if (!(cond) && !(b)->fail)					\
		(b)->fail = __FILE__ ":" BP_STR(__LINE__) ": " #cond;	\
} while (0)

/* Call @c completed as T_ECHO of @len bytes of @in. */
static inline bool bp_echo_ok(struct knitk_call *c, const void *in, size_t len)
{
	const void *d;
	size_t n;

	return knitk_call_wait(c, KNITK_WAIT_FOREVER) == 0 &&
	       !knitk_call_result(c, &d, &n) && n == len && !memcmp(d, in, len);
}

/*
 * A pool of one worker (@kind, @dispatch, on @knot_flags' backend) and
 * one submitter, its request arena one page, its worker in a T_GATE task.
 */
static inline int bp_start(struct bp *b, const struct knitk_task_table *table,
			   unsigned int kind, unsigned int dispatch,
			   unsigned int knot_flags)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind,
				     .nr_workers = 1, .nr_submitters = 1,
				     .inline_bytes = 64, .arena_bytes = 4096,
				     .knot_flags = knot_flags, .dispatch = dispatch };
	struct knitk_endpoint *ep;
	struct knitk_layout lay;
	size_t i;

	memset(b, 0, sizeof(*b));
	/* Before the pool: process workers inherit the pipes. */
	if (gate_open(&b->g))
		return -1;
	if (knitk_pool_create(&o, table, &b->pool))
		return -1;
	if (knitk_pool_endpoint(b->pool, &ep) || knitk_endpoint_layout(ep, &lay, NULL))
		return -1;
	b->big_len = lay.arena_size;
	b->big = malloc(b->big_len);
	if (!b->big)
		return -1;
	for (i = 0; i < b->big_len; i++)
		b->big[i] = (unsigned char)(i * 7 + 3);
	if (knitk_pool_submit(b->pool, T_GATE, &b->g.arg, sizeof(b->g.arg), NULL,
			      &b->gated))
		return -1;
	/* The worker runs it: nothing it holds is retired until the gate opens. */
	return gate_wait(&b->g, 'r');
}

static inline const char *bp_end(struct bp *b)
{
	knitk_pool_destroy(b->pool);
	gate_close(&b->g);
	free(b->big);
	return b->fail;
}

/*
 * A call that blocks for @room with a deadline: -ETIMEDOUT, not before the
 * deadline, nothing published, nothing counted, nothing lost.  With
 * @batch, the blocked call is the second of a knitk_pool_submit_batch
 * whose first fits: the batch returns 1.
 */
static inline const char *bp_submit_times_out(const struct knitk_task_table *table,
					      unsigned int kind, unsigned int dispatch,
					      unsigned int knot_flags,
					      enum bp_room room, bool batch)
{
	struct knitk_call_opts co = { .size = sizeof(co) };
	struct knitk_pool_stats st;
	struct knitk_call *held[BP_CAP], *c = NULL, *bc[2] = { NULL, NULL };
	struct knitk_submission subs[2];
	unsigned int i, nr_held = 0, nr_small;
	uint64_t small[BP_CAP];
	struct bp b;
	int ret;

	if (bp_start(&b, table, kind, dispatch, knot_flags)) {
		b.fail = "bp_start";
		return b.pool ? bp_end(&b) : b.fail;
	}
	/* Fill the room: calls queued behind the gated one. */
	if (room == BP_ARENA) {
		ret = knitk_pool_submit(b.pool, T_ECHO, b.big, b.big_len, NULL,
					&held[nr_held]);
		BP_CHECK(&b, ret == 0);
		nr_held += !ret;
		nr_small = 0;
	} else {
		/* The gated call and these: the worker's whole capacity. */
		nr_small = BP_CAP - 1 - (batch ? 1 : 0);
	}
	for (i = 0; i < nr_small; i++) {
		small[i] = mix64(i + 1);
		ret = knitk_pool_submit(b.pool, T_ECHO, &small[i], 8, NULL, &held[nr_held]);
		BP_CHECK(&b, ret == 0);
		nr_held += !ret;
	}
	co.deadline_ns = after_ms(BP_DEADLINE_MS);
	if (!batch) {
		if (room == BP_ARENA)
			ret = knitk_pool_submit(b.pool, T_ECHO, b.big, b.big_len, &co, &c);
		else
			ret = knitk_pool_submit(b.pool, T_ECHO, &small[0], 8, &co, &c);
		BP_CHECK(&b, ret == -ETIMEDOUT);
		BP_CHECK(&b, c == NULL);
	} else {
		/* The first fits (inline; the last free entry), the second waits. */
		memset(subs, 0, sizeof(subs));
		subs[0].fn = T_ECHO;
		subs[0].in = "first";
		subs[0].len = 5;
		subs[1].fn = T_ECHO;
		subs[1].in = room == BP_ARENA ? (const void *)b.big : (const void *)&small[0];
		subs[1].len = room == BP_ARENA ? b.big_len : 8;
		subs[1].opts = &co;
		ret = knitk_pool_submit_batch(b.pool, subs, 2, bc);
		BP_CHECK(&b, ret == 1);
		BP_CHECK(&b, bc[0] != NULL && bc[1] == NULL);
	}
	/* Not before its deadline: the wait was for room, not a refusal. */
	BP_CHECK(&b, after_ms(0) >= co.deadline_ns);
	pool_stats(b.pool, &st);
	/* The gated call and those that fit: the one that timed out is no call. */
	BP_CHECK(&b, st.submitted == 1 + nr_held + (batch ? 1 : 0));
	BP_CHECK(&b, st.completed == 0 && st.timedout == 0);

	/* Open the gate: everything before completes, each with its result. */
	BP_CHECK(&b, gate_release(&b.g) == 0);
	BP_CHECK(&b, knitk_call_wait(b.gated, KNITK_WAIT_FOREVER) == 0);
	knitk_call_release(b.gated);
	for (i = 0; i < nr_held; i++) {
		if (room == BP_ARENA && i == 0)
			BP_CHECK(&b, bp_echo_ok(held[i], b.big, b.big_len));
		else
			BP_CHECK(&b, bp_echo_ok(held[i], &small[i - (room == BP_ARENA)], 8));
		knitk_call_release(held[i]);
	}
	if (bc[0]) {
		BP_CHECK(&b, bp_echo_ok(bc[0], "first", 5));
		knitk_call_release(bc[0]);
	}
	/* Nothing leaked: the whole arena, twice, and the whole capacity. */
	for (i = 0; i < 2; i++) {
		BP_CHECK(&b, knitk_pool_submit(b.pool, T_ECHO, b.big, b.big_len, NULL, &c) == 0);
		BP_CHECK(&b, c && bp_echo_ok(c, b.big, b.big_len));
		knitk_call_release(c);
		c = NULL;
	}
	for (i = 0; i < BP_CAP; i++) {
		small[0] = i;
		ret = knitk_pool_submit(b.pool, T_ECHO, &small[0], 8, NULL, &held[i]);
		BP_CHECK(&b, ret == 0);
		if (ret)
			break;
	}
	nr_held = i;
	for (i = 0; i < nr_held; i++) {
		small[0] = i;
		BP_CHECK(&b, bp_echo_ok(held[i], &small[0], 8));
		knitk_call_release(held[i]);
	}
	BP_CHECK(&b, knitk_pool_shutdown(b.pool, KNITK_SHUTDOWN_DRAIN) == 0);
	pool_stats(b.pool, &st);
	BP_CHECK(&b, st.completed == st.submitted);
	BP_CHECK(&b, st.timedout == 0 && st.canceled == 0 && st.ownerdead == 0);
	return bp_end(&b);
}

#endif /* KNITK_BACKPRESSURE_H */
