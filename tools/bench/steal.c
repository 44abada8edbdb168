// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-bench: the steal scenario, the makespan of a bag of CPU-bound
 * tasks under three cost shapes.
 *
 * STEAL_TASKS tasks (fewer with --quick), each burning its cost in CPU
 * time: flat (every task one unit), random (0.2 to 2 units, uniform) and
 * skewed (heavy-tailed: 10% of the tasks at 20 units); and the long-*
 * placements: short tasks of LONG_SHORT units with LONG_NR long ones of
 * LONG_UNITS units submitted next to each other at the front, at the end,
 * spread evenly, or at random places.  Adjacent long tasks are where a
 * stealing worker that claims a region of lanes at once would run them
 * one after another.  The same seeded sequence for every method of a shape.  Methods: the ideal (total work /
 * workers, computed, the baseline), the private-lane pool with its
 * least-loaded balancer and the stealing pool (KNITK_POOL_DISPATCH_STEAL,
 * automatic region size), each on thread and process workers, and
 * GThreadPool with the same number of threads.  Every task is submitted up front (a
 * submit blocks while every worker is at capacity) and the clock stops
 * when the last one has completed.  The figure is the makespan per task:
 * a ratio of two rows is the ratio of their makespans.  The pool rows also
 * report the calls per claim (the library's claim count) and the wakes
 * per call of their workers.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>
#include <knitk.h>
#include <knitk_pool.h>

#include "bench.h"

#define STEAL_UNIT_NS		20000ULL	/* one cost unit: 20 us */
#define STEAL_UNIT_NS_QUICK	5000ULL

enum {
	SHAPE_FLAT, SHAPE_RANDOM, SHAPE_SKEWED,
	SHAPE_LONG_FRONT, SHAPE_LONG_END, SHAPE_LONG_SPREAD, SHAPE_LONG_RANDOM,
};

/* The long-* placements: 8 tasks of 20 ms among tasks of 100 us. */
#define LONG_NR		8
#define LONG_UNITS	1000
#define LONG_SHORT	5
enum { M_IDEAL, M_PRIVATE, M_STEAL, M_GTHREADPOOL };

/* Make LONG_NR tasks of @cost long, placed as @shape says (seed @x). */
static void st_place_long(int shape, uint64_t unit, uint64_t *cost, uint64_t n,
			  uint64_t x)
{
	uint64_t i, k, nr = n < LONG_NR ? n : LONG_NR;

	for (i = 0; i < nr; i++) {
		switch (shape) {
		case SHAPE_LONG_FRONT:
			k = i;
			break;
		case SHAPE_LONG_END:
			k = n - nr + i;
			break;
		case SHAPE_LONG_SPREAD:
			k = i * (n / nr);
			break;
		default:
			/* Distinct random places (a long one is never picked twice). */
			do {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				k = x % n;
			} while (cost[k] != LONG_SHORT * unit);
			break;
		}
		cost[k] = LONG_UNITS * unit;
	}
}

/* The cost of every task of @shape, same seed every time. */
static void st_costs(int shape, uint64_t unit, uint64_t *cost, uint64_t n)
{
	uint64_t i, x = 0x9e3779b97f4a7c15ULL;

	for (i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		switch (shape) {
		case SHAPE_FLAT:
			cost[i] = unit;
			break;
		case SHAPE_RANDOM:	/* 0.2x .. 2x */
			cost[i] = unit / 5 + (x % 1000) * (unit * 9 / 5) / 999;
			break;
		case SHAPE_SKEWED:	/* 10% at 20x */
			cost[i] = x % 10 == 0 ? 20 * unit : unit;
			break;
		default:
			cost[i] = LONG_SHORT * unit;
			break;
		}
	}
	if (shape >= SHAPE_LONG_FRONT)
		st_place_long(shape, unit, cost, n, x);
}

static int st_pool(struct knitk_pool *pool, const uint64_t *cost, uint64_t n,
		      struct knitk_call **calls, uint64_t *good)
{
	const void *data;
	uint64_t i, k = 0, y;
	size_t len;
	int ret = 0;

	for (k = 0; k < n; k++) {
		ret = knitk_pool_submit(pool, BENCH_TASK_SPIN, &cost[k], sizeof(cost[k]),
					NULL, &calls[k]);
		if (ret)
			break;
	}
	if (k) {
		int wret = knitk_pool_wait_all(pool, calls, (unsigned int)k,
					       KNITK_WAIT_FOREVER);

		if (wret && !ret)
			ret = wret;
	}
	for (i = 0; i < k; i++) {
		if (knitk_call_status(calls[i]) == 0 &&
		    knitk_call_result(calls[i], &data, &len) == 0 && len == sizeof(y)) {
			memcpy(&y, data, sizeof(y));
			*good += y == cost[i];
		}
		knitk_call_release(calls[i]);
	}
	return ret;
}

struct st_gt {
	GMutex lock;
	GCond cond;
	uint64_t left, good;
};

struct st_gt_task {
	uint64_t cost;
	struct st_gt *done;
};

static void st_gt_func(gpointer data, gpointer user)
{
	struct st_gt_task *t = data;

	(void)user;
	bench_spin_ns(t->cost);
	g_mutex_lock(&t->done->lock);
	t->done->good++;
	if (--t->done->left == 0)
		g_cond_signal(&t->done->cond);
	g_mutex_unlock(&t->done->lock);
}

static int st_gthreadpool(unsigned int workers, const uint64_t *cost, uint64_t n,
			  struct st_gt_task *tasks, uint64_t *good)
{
	struct st_gt d = { .left = n };
	GError *err = NULL;
	GThreadPool *gp;
	uint64_t i;
	int ret = 0;

	gp = g_thread_pool_new(st_gt_func, NULL, (gint)workers, TRUE, &err);
	if (!gp) {
		if (err)
			g_error_free(err);
		return -EAGAIN;
	}
	g_mutex_init(&d.lock);
	g_cond_init(&d.cond);
	for (i = 0; i < n; i++) {
		tasks[i].cost = cost[i];
		tasks[i].done = &d;
		if (!g_thread_pool_push(gp, &tasks[i], &err)) {
			g_error_free(err);
			g_mutex_lock(&d.lock);
			d.left -= n - i;
			g_mutex_unlock(&d.lock);
			ret = -EAGAIN;
			break;
		}
	}
	g_mutex_lock(&d.lock);
	while (d.left)
		g_cond_wait(&d.cond, &d.lock);
	*good += d.good;
	g_mutex_unlock(&d.lock);
	/* Workers were started with the pool: not part of the makespan. */
	g_thread_pool_free(gp, FALSE, TRUE);
	g_mutex_clear(&d.lock);
	g_cond_clear(&d.cond);
	return ret;
}

/* Add the pool's claims and its workers' wake counters to @c (@sign: -1, +1). */
static void st_counts(struct knitk_pool *pool, unsigned int workers, int sign,
		      struct bench_pool_counts *c)
{
	struct knitk_pool_stats st = { .size = sizeof(st) };
	unsigned int w;

	if (knitk_pool_stats(pool, &st) == 0) {
		c->calls += (uint64_t)sign * st.completed;
		c->claims += (uint64_t)sign * st.claims;
	}
	for (w = 0; w < workers; w++) {
		struct knitk_worker_info wi = { .size = sizeof(wi) };

		if (knitk_pool_worker_info(pool, w, &wi) || !wi.db_valid) {
			c->wakes_valid = 0;
			continue;
		}
		c->wakes += (uint64_t)sign * wi.db.wakes;
		c->spurious += (uint64_t)sign * wi.db.spurious;
	}
}

/* arg: shape | (method << 4) | (worker kind << 8) */
static int st_run(const struct bench_case *c, const struct bench_ctx *ctx,
		  struct bench_result *r)
{
	int shape = (int)(c->arg & 15), method = (int)((c->arg >> 4) & 15);
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = (unsigned int)(c->arg >> 8),
		.nr_workers = ctx->workers, .knot_flags = ctx->knot_flags,
		.dispatch = method == M_STEAL ? KNITK_POOL_DISPATCH_STEAL :
			    KNITK_POOL_DISPATCH_PRIVATE,
	};
	uint64_t n = bench_ops(c, ctx), unit, total = 0, good, i, t0, t1;
	struct knitk_pool *pool = NULL;
	struct knitk_call **calls = NULL;
	struct st_gt_task *tasks = NULL;
	uint64_t *cost;
	double c0 = 0;
	int rep, ret = 0;

	unit = ctx->quick ? STEAL_UNIT_NS_QUICK : STEAL_UNIT_NS;
	cost = calloc(n, sizeof(*cost));
	calls = calloc(n, sizeof(*calls));
	tasks = calloc(n, sizeof(*tasks));
	if (!cost || !calls || !tasks) {
		ret = -ENOMEM;
		bench_fail(r, "calloc: %s", strerror(ENOMEM));
		goto out;
	}
	st_costs(shape, unit, cost, n);
	for (i = 0; i < n; i++)
		total += cost[i];
	if (method == M_PRIVATE || method == M_STEAL) {
		ret = knitk_pool_create(&o, &bench_tasks, &pool);
		if (ret) {
			bench_fail(r, "knitk_pool_create: %s", strerror(-ret));
			goto out;
		}
	}
	r->ops = n;
	r->has_msgs = method != M_IDEAL;
	r->has_counts = pool != NULL;
	r->counts.wakes_valid = 1;
	for (rep = 0; rep < ctx->reps && !ret; rep++) {
		good = 0;
		c0 = bench_cpu_ns(pool);
		t0 = bench_now_ns();
		if (method == M_IDEAL)
			t1 = t0 + total / ctx->workers;	/* perfect balance, no overhead */
		else if (pool) {
			st_counts(pool, ctx->workers, -1, &r->counts);
			ret = st_pool(pool, cost, n, calls, &good);
			st_counts(pool, ctx->workers, 1, &r->counts);
		}
		else
			ret = st_gthreadpool(ctx->workers, cost, n, tasks, &good);
		if (method != M_IDEAL)
			t1 = bench_now_ns();
		if (ret) {
			bench_fail(r, "tasks: %s", strerror(-ret));
			break;
		}
		r->ns[r->nreps] = (double)(t1 - t0) / (double)n;
		r->cpu[r->nreps++] = method == M_IDEAL ? (double)total / (double)n :
				     (bench_cpu_ns(pool) - c0) / (double)n;
		if (method != M_IDEAL) {
			r->msgs_expected += n;
			r->msgs_moved += good;
		}
	}
out:
	if (pool)
		knitk_pool_destroy(pool);
	free(cost);
	free(calls);
	free(tasks);
	return ret;
}

#define ST(grp, var, shape, method, kind) \
	{ grp "/" var, grp, "ns/op", grp "/ideal", \
	  (method) == M_PRIVATE || (method) == M_STEAL, st_run, \
	  (shape) | ((method) << 4) | ((kind) << 8), 2000, 400 }
#define ST_SHAPE(grp, shape) \
	ST(grp, "ideal", shape, M_IDEAL, 0), \
	ST(grp, "private-threads", shape, M_PRIVATE, KNITK_WORKER_THREADS), \
	ST(grp, "private-processes", shape, M_PRIVATE, KNITK_WORKER_PROCESSES), \
	ST(grp, "steal-threads", shape, M_STEAL, KNITK_WORKER_THREADS), \
	ST(grp, "steal-processes", shape, M_STEAL, KNITK_WORKER_PROCESSES), \
	ST(grp, "gthreadpool-threads", shape, M_GTHREADPOOL, 0)

const struct bench_case bench_steal_cases[] = {
	ST_SHAPE("steal-flat", SHAPE_FLAT),
	ST_SHAPE("steal-random", SHAPE_RANDOM),
	ST_SHAPE("steal-skewed", SHAPE_SKEWED),
	ST_SHAPE("steal-long-front", SHAPE_LONG_FRONT),
	ST_SHAPE("steal-long-end", SHAPE_LONG_END),
	ST_SHAPE("steal-long-spread", SHAPE_LONG_SPREAD),
	ST_SHAPE("steal-long-random", SHAPE_LONG_RANDOM),
	{ NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0 },
};
