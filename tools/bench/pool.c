// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-bench: calls per second through a worker pool, and the idle cost
 * of a pool.
 *
 * A trivial task (u64 x -> x + 1) so that dispatch and completion are
 * all that is measured.  knitk: knitk_pool_call (submit, wait, copy,
 * release) one at a time, and batches of one knitk_pool_submit_batch +
 * one knitk_pool_wait_all, on thread and on process workers (and batches
 * on a stealing pool's thread workers).  GThreadPool:
 * g_thread_pool_push plus a completion signal (GMutex/GCond), one at a
 * time and in batches, with the same number of workers.
 *
 * Idle: 8 thread workers, every call pinned to worker 0; the other 7 must
 * get no wake at all, and the whole process must use next to no CPU time
 * in an interval that starts 1 ms after the last call returned (a pool's
 * spinning is bounded).
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <knitk.h>
#include <knitk_pool.h>

#include "bench.h"

#define POOL_BATCH		32
/* kp_run's arg: kind | batch << 4 | a parked worker (1 << 5) | KP_STEAL */
#define KP_STEAL		(1 << 6)
#define IDLE_WORKERS		8
#define IDLE_SETTLE_NS		1000000L	/* 1 ms */

static int task_inc(const void *in, size_t len, struct knitk_reply *out,
		    void *ctx)
{
	uint64_t x;

	(void)ctx;
	if (len != sizeof(x))
		return -EINVAL;
	memcpy(&x, in, sizeof(x));
	x++;
	return knitk_reply_set(out, &x, sizeof(x));
}

/* Echo the payload back (the payload scenario). */
static int task_echo(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	(void)ctx;
	return knitk_reply_set(out, in, len);
}

/*
 * Echo the payload back where it is (knitk_reply_in_arg): no copy when
 * it came in the arena, else as task_echo.
 */
static int task_echo_in_arg(const void *in, size_t len, struct knitk_reply *out,
			    void *ctx)
{
	void *buf;
	int ret = knitk_reply_in_arg(out, len, &buf);

	return ret == -EOPNOTSUPP ? task_echo(in, len, out, ctx) : ret;
}

/* Burn the CPU for the u64 nanoseconds given (the steal scenario). */
static int task_spin(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	uint64_t ns;

	(void)ctx;
	if (len != sizeof(ns))
		return -EINVAL;
	memcpy(&ns, in, sizeof(ns));
	bench_spin_ns(ns);
	return knitk_reply_set(out, &ns, sizeof(ns));
}

/*
 * Report the worker's pid on the i32 fd given (inherited), then block
 * until aborted: the death-wait scenario kills the worker meanwhile.
 */
static int task_park(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	struct timespec ts = { 0, 1000000 };
	int32_t fd, pid = (int32_t)getpid();

	(void)out;
	if (len != sizeof(fd))
		return -EINVAL;
	memcpy(&fd, in, sizeof(fd));
	if (bench_write_all(fd, &pid, sizeof(pid)))
		return -EIO;
	while (!knitk_task_aborted(ctx))
		nanosleep(&ts, NULL);
	return -EINTR;
}

static const knitk_task_fn bench_fns[] = {
	[BENCH_TASK_INC] = task_inc, [BENCH_TASK_ECHO] = task_echo,
	[BENCH_TASK_SPIN] = task_spin, [BENCH_TASK_PARK] = task_park,
	[BENCH_TASK_ECHO_IN_ARG] = task_echo_in_arg,
};
const struct knitk_task_table bench_tasks = {
	.tasks = bench_fns, .nr_tasks = sizeof(bench_fns) / sizeof(bench_fns[0]),
};

/* ------------------------------------------------------------ knitk */

static int kp_sync(struct knitk_pool *pool, uint64_t base, uint64_t n,
		   const struct knitk_call_opts *co, uint64_t *good)
{
	uint64_t i, x, y;
	size_t len;
	int ret;

	for (i = 0; i < n; i++) {
		x = base + i;
		ret = knitk_pool_call(pool, BENCH_TASK_INC, &x, sizeof(x), co, &y, sizeof(y), &len);
		if (ret)
			return ret < 0 ? ret : -EPROTO;
		if (len == sizeof(y) && y == x + 1)
			(*good)++;
	}
	return 0;
}

static int kp_batch(struct knitk_pool *pool, uint64_t base, uint64_t n,
		    uint64_t *good)
{
	struct knitk_submission subs[POOL_BATCH];
	struct knitk_call *calls[POOL_BATCH];
	uint64_t xs[POOL_BATCH], done = 0, y;
	const void *data;
	size_t len;
	unsigned int k, i;
	int ret = 0;

	while (done < n) {
		k = n - done < POOL_BATCH ? (unsigned int)(n - done) : POOL_BATCH;
		for (i = 0; i < k; i++) {
			xs[i] = base + done + i;
			subs[i] = (struct knitk_submission){
				.fn = BENCH_TASK_INC, .in = &xs[i], .len = sizeof(xs[i]),
			};
		}
		ret = knitk_pool_submit_batch(pool, subs, k, calls);
		if (ret < 0)
			return ret;
		/* A short count is a failed submit: wait for the others first. */
		if ((unsigned int)ret < k) {
			k = (unsigned int)ret;
			ret = -EIO;
		} else {
			ret = 0;
		}
		if (k) {
			int wret = knitk_pool_wait_all(pool, calls, k,
						       KNITK_WAIT_FOREVER);

			if (wret && !ret)
				ret = wret;
		}
		for (i = 0; i < k; i++) {
			if (knitk_call_status(calls[i]) == 0 &&
			    knitk_call_result(calls[i], &data, &len) == 0 &&
			    len == sizeof(y)) {
				memcpy(&y, data, sizeof(y));
				if (y == xs[i] + 1)
					(*good)++;
			}
			knitk_call_release(calls[i]);
		}
		if (ret)
			return ret;
		done += k;
	}
	return 0;
}

/*
 * arg: kind | (batch << 4) | (park << 5).  park: one worker and a spin of
 * one poll, so each call finds the worker parked and the host parks for
 * the result: the pool's hop over the futex round trip (pool-park).
 */
static int kp_run(const struct bench_case *c, const struct bench_ctx *ctx,
		  struct bench_result *r)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o),
		.kind = (unsigned int)(c->arg & 15),
		.nr_workers = ctx->workers,
		.knot_flags = ctx->knot_flags,
	};
	int batch = (int)((c->arg >> 4) & 1);
	uint64_t n = bench_ops(c, ctx), good = 0, t0, base = 0;
	struct knitk_pool *pool;
	double c0;
	int i, ret;

	if (c->arg & (1 << 5)) {
		o.nr_workers = 1;
		o.spin = 1;
	}
	if (c->arg & KP_STEAL)
		o.dispatch = KNITK_POOL_DISPATCH_STEAL;
	ret = knitk_pool_create(&o, &bench_tasks, &pool);
	if (ret) {
		bench_fail(r, "knitk_pool_create: %s", strerror(-ret));
		return ret;
	}
	r->ops = n;
	r->has_msgs = 1;
	for (i = -1; i < ctx->reps && !ret; i++) {
		uint64_t m = i < 0 ? n / 10 + 1 : n;	/* rep -1: warm-up */

		good = 0;
		c0 = bench_cpu_ns(pool);
		t0 = bench_now_ns();
		ret = batch ? kp_batch(pool, base, m, &good) :
			      kp_sync(pool, base, m, NULL, &good);
		if (ret) {
			bench_fail(r, "calls: %s", strerror(-ret));
			break;
		}
		if (i >= 0) {
			r->ns[r->nreps] = (double)(bench_now_ns() - t0) / (double)m;
			r->cpu[r->nreps++] = (bench_cpu_ns(pool) - c0) / (double)m;
			r->msgs_expected += m;
			r->msgs_moved += good;
		}
		base += m;
	}
	knitk_pool_destroy(pool);
	return ret;
}

/* ------------------------------------------------------ GThreadPool */

struct gt_done {
	GMutex lock;
	GCond cond;
	unsigned int left;
};

struct gt_task {
	uint64_t x, y;
	struct gt_done *done;
};

static void gt_func(gpointer data, gpointer user)
{
	struct gt_task *t = data;

	(void)user;
	t->y = t->x + 1;
	g_mutex_lock(&t->done->lock);
	if (--t->done->left == 0)
		g_cond_signal(&t->done->cond);
	g_mutex_unlock(&t->done->lock);
}

static int gt_round(GThreadPool *gp, struct gt_task *t, unsigned int k,
		    struct gt_done *d, uint64_t base, uint64_t *good)
{
	GError *err = NULL;
	unsigned int i;

	d->left = k;
	for (i = 0; i < k; i++) {
		t[i].x = base + i;
		t[i].y = 0;
		t[i].done = d;
		if (!g_thread_pool_push(gp, &t[i], &err)) {
			g_error_free(err);
			/* Pushed ones still complete: wait for them. */
			g_mutex_lock(&d->lock);
			d->left -= k - i;
			while (d->left)
				g_cond_wait(&d->cond, &d->lock);
			g_mutex_unlock(&d->lock);
			return -EAGAIN;
		}
	}
	g_mutex_lock(&d->lock);
	while (d->left)
		g_cond_wait(&d->cond, &d->lock);
	g_mutex_unlock(&d->lock);
	for (i = 0; i < k; i++)
		if (t[i].y == t[i].x + 1)
			(*good)++;
	return 0;
}

static int gt_run(const struct bench_case *c, const struct bench_ctx *ctx,
		  struct bench_result *r)
{
	unsigned int batch = c->arg ? POOL_BATCH : 1, k;
	struct gt_task tasks[POOL_BATCH];
	uint64_t n = bench_ops(c, ctx), good, done, t0, base = 0;
	struct gt_done d;
	GThreadPool *gp;
	GError *err = NULL;
	double c0;
	int i, ret = 0;

	/* Exclusive: the workers start now and stay, like a knitk pool. */
	gp = g_thread_pool_new(gt_func, NULL, (gint)ctx->workers, TRUE, &err);
	if (!gp) {
		bench_fail(r, "g_thread_pool_new: %s", err ? err->message : "?");
		if (err)
			g_error_free(err);
		return -EAGAIN;
	}
	g_mutex_init(&d.lock);
	g_cond_init(&d.cond);
	r->ops = n;
	r->has_msgs = 1;
	for (i = -1; i < ctx->reps && !ret; i++) {
		uint64_t m = i < 0 ? n / 10 + 1 : n;

		good = 0;
		c0 = bench_cpu_ns(NULL);
		t0 = bench_now_ns();
		for (done = 0; done < m && !ret; done += k) {
			k = m - done < batch ? (unsigned int)(m - done) : batch;
			ret = gt_round(gp, tasks, k, &d, base + done, &good);
		}
		if (ret) {
			bench_fail(r, "g_thread_pool_push failed");
			break;
		}
		if (i >= 0) {
			r->ns[r->nreps] = (double)(bench_now_ns() - t0) / (double)m;
			r->cpu[r->nreps++] = (bench_cpu_ns(NULL) - c0) / (double)m;
			r->msgs_expected += m;
			r->msgs_moved += good;
		}
		base += m;
	}
	g_thread_pool_free(gp, FALSE, TRUE);
	g_mutex_clear(&d.lock);
	g_cond_clear(&d.cond);
	return ret;
}

/* ------------------------------------------------------------- idle */

static int idle_run(const struct bench_case *c, const struct bench_ctx *ctx,
		    struct bench_result *r)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o),
		.kind = KNITK_WORKER_THREADS, .nr_workers = IDLE_WORKERS,
		.knot_flags = ctx->knot_flags,
	};
	struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER, .worker = 0 };
	struct knitk_worker_info before[IDLE_WORKERS], after[IDLE_WORKERS];
	uint64_t n = bench_ops(c, ctx), good = 0, t0, base = 0;
	uint64_t wall = ctx->quick ? 300000000ULL : 2000000000ULL;
	struct timespec ts = { (time_t)(wall / 1000000000ULL),
			       (long)(wall % 1000000000ULL) };
	/* The interval starts this long after the last call returned. */
	struct timespec settle = { 0, IDLE_SETTLE_NS };
	struct knitk_pool *pool;
	double c0, c1, cc;
	uint64_t t_last;
	unsigned int w;
	int i, ret;

	ret = knitk_pool_create(&o, &bench_tasks, &pool);
	if (ret) {
		bench_fail(r, "knitk_pool_create: %s", strerror(-ret));
		return ret;
	}
	for (w = 0; w < IDLE_WORKERS && !ret; w++) {
		before[w].size = sizeof(before[w]);
		ret = knitk_pool_worker_info(pool, w, &before[w]);
		if (!ret && !before[w].db_valid)
			ret = -EOPNOTSUPP;
	}
	if (ret) {
		bench_fail(r, "worker counters: %s", strerror(-ret));
		goto out;
	}
	r->ops = n;
	r->has_msgs = 1;
	/* Load: calls to worker 0 only, timed like rows of the pool group. */
	for (i = 0; i < ctx->reps && !ret; i++) {
		good = 0;
		cc = bench_cpu_ns(NULL);
		t0 = bench_now_ns();
		ret = kp_sync(pool, base, n, &co, &good);
		if (ret) {
			bench_fail(r, "calls: %s", strerror(-ret));
			goto out;
		}
		r->ns[r->nreps] = (double)(bench_now_ns() - t0) / (double)n;
		r->cpu[r->nreps++] = (bench_cpu_ns(NULL) - cc) / (double)n;
		r->msgs_expected += n;
		r->msgs_moved += good;
		base += n;
	}
	/* Interleaved runs: the idle interval only in the last round. */
	if (ctx->round + 1 < ctx->rounds)
		goto out;
	/*
	 * Then nothing: every worker parked, the collector too, within
	 * IDLE_SETTLE_NS of the last call (bounded spinning).
	 */
	t_last = bench_now_ns();
	while (nanosleep(&settle, &settle) && errno == EINTR)
		;
	c0 = bench_cpu_ns(NULL);
	t0 = bench_now_ns();
	r->idle.settle_ns = (double)(t0 - t_last);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	c1 = bench_cpu_ns(NULL);
	r->idle.wall_ns = (double)(bench_now_ns() - t0);
	r->idle.calls = base;
	r->has_idle = 1;
	r->idle.cpu_ns = c1 - c0;
	r->idle.workers = IDLE_WORKERS;
	r->idle.idle_workers = IDLE_WORKERS - 1;
	for (w = 0; w < IDLE_WORKERS; w++) {
		after[w].size = sizeof(after[w]);
		ret = knitk_pool_worker_info(pool, w, &after[w]);
		if (ret) {
			bench_fail(r, "worker counters: %s", strerror(-ret));
			goto out;
		}
		r->idle.spurious += after[w].db.spurious - before[w].db.spurious;
		if (w == 0) {
			r->idle.loaded_wakes = after[w].db.wakes - before[w].db.wakes;
			continue;
		}
		r->idle.idle_wakes += after[w].db.wakes - before[w].db.wakes +
				      after[w].db.spurious - before[w].db.spurious;
		r->idle.idle_waits += after[w].db.waits - before[w].db.waits;
	}
out:
	knitk_pool_destroy(pool);
	return ret;
}

/* ------------------------------------------------------------ cases */

#define KP(grp, var, kind, batch, n, nq) \
	{ grp "/" var, grp, "ops/s", grp "/gthreadpool", 1, kp_run, \
	  (kind) | ((batch) << 4), n, nq }
#define GT(grp, batch, n, nq) \
	{ grp "/gthreadpool", grp, "ops/s", grp "/gthreadpool", 0, gt_run, \
	  batch, n, nq }

const struct bench_case bench_pool_cases[] = {
	GT("pool-call", 0, 50000, 1000),
	KP("pool-call", "knitk-threads", KNITK_WORKER_THREADS, 0, 50000, 1000),
	KP("pool-call", "knitk-processes", KNITK_WORKER_PROCESSES, 0, 50000, 1000),
	GT("pool-batch", 1, 200000, 4000),
	KP("pool-batch", "knitk-threads", KNITK_WORKER_THREADS, 1, 200000, 4000),
	KP("pool-batch", "knitk-processes", KNITK_WORKER_PROCESSES, 1, 200000, 4000),
	/* Stealing: the cost of its claims on calls that do next to nothing. */
	KP("pool-batch", "knitk-steal-threads", KNITK_WORKER_THREADS | KP_STEAL, 1,
	   200000, 4000),
	/* A call to a parked worker against the futex round trip. */
	{ "pool-park/knitk-processes", "pool-park", "ns/op", "rtt-process/futex", 1,
	  kp_run, KNITK_WORKER_PROCESSES | (1 << 5), 20000, 500 },
	{ "pool-park/knitk-threads", "pool-park", "ns/op", "rtt-process/futex", 1,
	  kp_run, KNITK_WORKER_THREADS | (1 << 5), 20000, 500 },
	{ "idle/knitk-8-threads", "idle", "ns/op", NULL, 1, idle_run, 0,
	  20000, 300 },
	{ NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0 },
};
