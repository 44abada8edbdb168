/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Counters across their 32-bit wrap, shared by the host's pool_wrap_test
 * (futex backend) and the guest's wrap_test (module).  The includer
 * defines wrap_counter_base(): where the knots made from then on start
 * their doorbell seqs, death_seq, death_done and role generations
 * (knitk__test_counter_base on the futex backend, debugfs
 * knitk/counter_base on the module).  Pools start their task ids'
 * generations and workers' epochs at knitk__test_gen_base (pool_hooks.h)
 * on both.  Include after pool_tasks.h and pool_kill.h, in a program
 * linked with a test build of the library.  The functions return what
 * they measured; the callers assert.
 */
#ifndef KNITK_WRAP_H
#define KNITK_WRAP_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "../pool/pool_internal.h"

/* Steps each run takes a counter through, from WRAP_STEPS / 2 below 0. */
#define WRAP_STEPS	12
#define WRAP_BASE	((uint32_t)-(WRAP_STEPS / 2))
/* A base as far below INT_MAX, where a 31-bit view of a counter wraps. */
#define WRAP_BASE_31	((uint32_t)INT_MAX - WRAP_STEPS / 2)

static void wrap_counter_base(uint32_t base);

static inline void wrap_set_base(uint32_t base)
{
	wrap_counter_base(base);
	atomic_store(&knitk__test_gen_base, base);
}

static const struct knitk_geometry wrap_geom = {
	.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
	.inline_bytes = 64, .arena_bytes = 8192,
};

/*
 * A knot whose counters start at @base, joined by its host: 0, or the
 * first error (*@host NULL where the knot was not made).
 */
static inline int wrap_host_create(uint32_t base, unsigned int knot_flags,
				   struct knitk_endpoint **host)
{
	int ret;

	wrap_set_base(base);
	ret = knitk_endpoint_create(&wrap_geom, knot_flags, host);
	wrap_set_base(0);
	if (ret) {
		*host = NULL;
		return ret;
	}
	ret = knitk_endpoint_join(*host, KNITK_ROLE_HOST, 0);
	return ret < 0 ? ret : 0;
}

/* ------------------------------------------------ joins and leaves */

struct wrap_joins {
	int created;			/* 0, or the first error */
	uint32_t seq0;			/* death_seq of the new knot */
	int ret[WRAP_STEPS];		/* each worker join's return */
	uint32_t gen[WRAP_STEPS];	/* the generation knitk_endpoint_role read */
	uint32_t seq[WRAP_STEPS];	/* death_seq after each leave */
	uint32_t done[WRAP_STEPS];	/* death_done after each leave */
};

/*
 * A knot whose counters start at @base: the host joins, then a worker
 * joins and leaves WRAP_STEPS times.
 */
static inline void wrap_joins_run(uint32_t base, unsigned int knot_flags,
				  struct wrap_joins *r)
{
	const struct knitk_control *ctl;
	struct knitk_endpoint *host, *w;
	unsigned int i;

	memset(r, 0, sizeof(*r));
	r->created = wrap_host_create(base, knot_flags, &host);
	if (r->created)
		goto out;
	knitk_endpoint_control(host, &ctl);
	knitk_endpoint_deaths(host, &r->seq0, NULL);
	for (i = 0; i < WRAP_STEPS; i++) {
		r->created = knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w);
		if (r->created)
			break;
		r->ret[i] = knitk_endpoint_join(w, KNITK_ROLE_WORKER, 0);
		knitk_endpoint_role(host, 0, &r->gen[i]);
		knitk_endpoint_destroy(w);
		knitk_endpoint_deaths(host, &r->seq[i], NULL);
		r->done[i] = atomic_load_explicit((_Atomic uint32_t *)&ctl->death_done,
						  memory_order_acquire);
	}
out:
	knitk_endpoint_destroy(host);
}

/* --------------------------------------------- a doorbell's seq */

struct wrap_bell {
	int created;
	int kick[WRAP_STEPS];		/* knitk_doorbell_kick_self's */
	uint32_t seq[WRAP_STEPS];	/* what each prepare read */
	int wait[WRAP_STEPS];		/* knitk_doorbell_wait's */
	uint32_t last;			/* a prepare after the last kick */
};

struct wrap_waiter {
	struct knitk_endpoint *ep;
	uint32_t seq;
	int ret;
	_Atomic int prepared;
};

static inline void *wrap_waiter(void *arg)
{
	struct wrap_waiter *wt = arg;

	wt->ret = knitk_doorbell_prepare(wt->ep, &wt->seq);
	atomic_store(&wt->prepared, 1);
	if (!wt->ret)
		wt->ret = knitk_doorbell_wait(wt->ep, wt->seq, KNITK_WAIT_FOREVER);
	return NULL;
}

/*
 * A knot whose counters start at @base: a worker's thread prepares and
 * waits (forever) on its doorbell, and another thread of it kicks the
 * wait's end, WRAP_STEPS times.
 */
static inline void wrap_bell_run(uint32_t base, unsigned int knot_flags,
				 struct wrap_bell *r)
{
	struct knitk_endpoint *host, *w = NULL;
	unsigned int i;
	pthread_t th;

	memset(r, 0, sizeof(*r));
	r->created = wrap_host_create(base, knot_flags, &host);
	if (!r->created)
		r->created = knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w);
	if (!r->created)
		r->created = knitk_endpoint_join(w, KNITK_ROLE_WORKER, 0);
	if (r->created < 0)
		goto out;
	r->created = 0;
	for (i = 0; i < WRAP_STEPS; i++) {
		struct wrap_waiter wt = { .ep = w };

		pthread_create(&th, NULL, wrap_waiter, &wt);
		while (!atomic_load(&wt.prepared))
			sched_yield();
		r->kick[i] = knitk_doorbell_kick_self(w);
		pthread_join(th, NULL);
		r->seq[i] = wt.seq;
		r->wait[i] = wt.ret;
	}
	if (!knitk_doorbell_prepare(w, &r->last))
		knitk_doorbell_cancel(w);
out:
	knitk_endpoint_destroy(w);
	knitk_endpoint_destroy(host);
}

/* ----------------------------------------------- a pool's task ids */

struct wrap_calls {
	int created;
	unsigned long good;		/* of WRAP_CALLS synchronous calls */
	unsigned long batch_good;	/* of WRAP_BATCHES * WRAP_WINDOW */
	uint32_t first;			/* the first call's task id's generation */
	uint32_t gen0;			/* entry 0's generation at the end */
	uint32_t bell0[2];		/* the workers' doorbell seqs at the start */
	unsigned int bells_wrapped;	/* worker doorbells whose seq wrapped */
};

/* @pool's doorbell @d, in its knot. */
static inline const struct knitk_doorbell *wrap_bell(struct knitk_pool *pool,
						     unsigned int d)
{
	struct knitk_layout layout;
	void *base;

	knitk_endpoint_base(pool->ep, &base);
	knitk_endpoint_layout(pool->ep, &layout, NULL);
	return (const void *)((char *)base + layout.doorbell_off +
			      (uint64_t)d * layout.doorbell_stride);
}

/* The seq of @pool's doorbell @d. */
static inline uint32_t wrap_bell_seq(struct knitk_pool *pool, unsigned int d)
{
	return atomic_load((_Atomic uint32_t *)&wrap_bell(pool, d)->seq);
}

#define WRAP_CALLS	200
#define WRAP_BATCHES	10
#define WRAP_WINDOW	16
/*
 * Calls made to parked workers first: each rings one, and 2 workers rung
 * WRAP_STEPS + 1 times move one's seq past its wrap (WRAP_STEPS / 2).
 */
#define WRAP_PARKED	(WRAP_STEPS + 1)

/* Until both workers of @pool are parked (their sleeping flags up). */
static inline void wrap_workers_parked(struct knitk_pool *pool)
{
	unsigned int d;

	for (d = 0; d < 2; d++)
		while (!atomic_load((_Atomic uint32_t *)&wrap_bell(pool, d)->sleeping))
			sched_yield();
}

/*
 * A pool of two thread workers (@dispatch), its knot's counters and its
 * task ids starting at @base, runs WRAP_CALLS calls one at a time and
 * WRAP_BATCHES batches of WRAP_WINDOW in flight, all checked by content.
 */
static inline void wrap_calls_run(uint32_t base, unsigned int dispatch,
				  unsigned int knot_flags, struct wrap_calls *r)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_THREADS, .nr_workers = 2,
		.knot_flags = knot_flags, .dispatch = dispatch,
		/* Workers park at once: each call wakes one, its seq moves. */
		.spin = 1,
	};
	struct knitk_call *c[WRAP_WINDOW];
	struct knitk_pool *pool;
	uint64_t x[WRAP_WINDOW];
	unsigned int b, i;

	memset(r, 0, sizeof(*r));
	wrap_set_base(base);
	r->created = knitk_pool_create(&o, &test_tasks, &pool);
	wrap_set_base(0);
	if (r->created)
		return;
	for (i = 0; i < 2; i++)
		r->bell0[i] = wrap_bell_seq(pool, i);
	x[0] = base;
	if (!knitk_pool_submit(pool, T_MIX, &x[0], 8, NULL, &c[0])) {
		r->first = (uint32_t)(c[0]->task_id >> 32);
		knitk_pool_wait_all(pool, c, 1, KNITK_WAIT_FOREVER);
		knitk_call_release(c[0]);
	}
	/*
	 * A worker that finds the next call while it searches is not rung,
	 * so only calls to parked workers make the seqs move for sure.
	 */
	for (i = 0; i < WRAP_PARKED; i++) {
		wrap_workers_parked(pool);
		r->good += mix_calls_good(pool, 1, NULL, base + i, 3);
	}
	r->good += mix_calls_good(pool, WRAP_CALLS - WRAP_PARKED, NULL,
				  base + WRAP_PARKED, 3);
	for (b = 0; b < WRAP_BATCHES; b++) {
		unsigned int n;

		for (n = 0; n < WRAP_WINDOW; n++) {
			x[n] = mix64(b * WRAP_WINDOW + n);
			if (knitk_pool_submit(pool, T_MIX, &x[n], 8, NULL, &c[n]))
				break;
		}
		knitk_pool_wait_all(pool, c, n, KNITK_WAIT_FOREVER);
		for (i = 0; i < n; i++) {
			r->batch_good += knitk_call_status(c[i]) == 0 &&
					 mix_result_ok(c[i], x[i]);
			knitk_call_release(c[i]);
		}
	}
	pthread_mutex_lock(&pool->lock);
	r->gen0 = pool->entries[0].gen;
	pthread_mutex_unlock(&pool->lock);
	for (i = 0; i < 2; i++)
		r->bells_wrapped += wrap_bell_seq(pool, i) < base;
	knitk_pool_destroy(pool);
}

/* ---------------------------------------- deaths and respawns */

/*
 * The kill storm of pool_kill.h on a pool whose knot counters (deaths,
 * generations) and task ids and epochs start at @base.
 */
static inline void wrap_storm_run(uint32_t base, unsigned int knot_flags,
				  struct storm_report *r)
{
	wrap_set_base(base);
	storm_pool(2, 2, WRAP_STEPS, knot_flags, KNITK_POOL_DISPATCH_PRIVATE, r);
	wrap_set_base(0);
}

#endif /* KNITK_WRAP_H */
