// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The stealing pool (KNITK_POOL_DISPATCH_STEAL, docs/protocol.md T1-T14):
 * options, exactly-once under contention for 2..63 thread and process
 * workers and every legal g with several submitting threads, age order,
 * a worker dying holding a claim (respawned on its steal line), deadlines,
 * aborts and both shutdowns, and the wakes it costs.  argv[1]: calls of
 * the throughput cases (a tenth per configuration).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_parked.h"
#include "tap.h"
#include "../core/knot_hooks.h"
#include "../pool/pool_hooks.h"

enum { S_MIX, S_ORDER, S_DIE, S_SLEEP, S_NR };

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ULL;
	return x ^ (x >> 29);
}

static int s_mix(const void *in, size_t len, struct knitk_reply *out, void *ctx)
{
	uint64_t x;

	(void)ctx;
	if (len != sizeof(x))
		return -EINVAL;
	memcpy(&x, in, sizeof(x));
	x = mix(x);
	return knitk_reply_set(out, &x, sizeof(x));
}

/* Thread workers: the order calls run in, behind a gate. */
struct order {
	_Atomic int open;
	_Atomic unsigned int next;
};

static int s_order(const void *in, size_t len, struct knitk_reply *out, void *ctx)
{
	struct order *o = knitk_task_data(ctx);

	(void)in;
	(void)len;
	(void)out;
	while (!atomic_load(&o->open))
		sched_yield();
	return (int)atomic_fetch_add(&o->next, 1);
}

static int s_die(const void *in, size_t len, struct knitk_reply *out, void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	(void)ctx;
	raise(SIGKILL);
	return 0;
}

/* S_SLEEP calls begun (thread workers). */
static _Atomic unsigned int sleeps_begun;

/* Runs until aborted or past its deadline. */
static int s_sleep(const void *in, size_t len, struct knitk_reply *out, void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	atomic_fetch_add(&sleeps_begun, 1);
	while (!knitk_task_aborted(ctx))
		sched_yield();
	return -EINTR;
}

/* @c completed with mix(@x), by a worker below @workers. */
static bool mix_ok(struct knitk_call *c, uint64_t x, unsigned int workers)
{
	const void *d;
	size_t len;
	uint64_t y;

	return knitk_call_status(c) == 0 && !knitk_call_result(c, &d, &len) &&
	       len == 8 && (memcpy(&y, d, 8), y == mix(x)) &&
	       knitk_call_worker(c) >= 0 && knitk_call_worker(c) < (int)workers;
}

/*
 * Tally and release @n calls of S_MIX on @xs: into *@dead the ones that
 * died with worker @dead_worker (-EOWNERDEAD, knitk_call_worker() naming
 * it), into *@ok the correct ones run by a worker below @workers.
 */
static void tally(struct knitk_call **calls, const uint64_t *xs, unsigned int n,
		  int dead_worker, unsigned int workers, unsigned int *ok,
		  unsigned int *dead)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (knitk_call_status(calls[i]) == -EOWNERDEAD)
			*dead += knitk_call_worker(calls[i]) == dead_worker;
		else
			*ok += mix_ok(calls[i], xs[i], workers);
		knitk_call_release(calls[i]);
	}
}

static const knitk_task_fn fns[S_NR] = { s_mix, s_order, s_die, s_sleep };
static const struct knitk_task_table table = { .tasks = fns, .nr_tasks = S_NR };

static unsigned long nr_calls = 1000000;

static struct knitk_pool *steal_pool(unsigned int kind, unsigned int workers,
				     unsigned int g, unsigned int flags, void *data)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = kind, .nr_workers = workers,
		.dispatch = KNITK_POOL_DISPATCH_STEAL, .steal_region = g,
		.flags = flags, .task_data = data,
	};
	struct knitk_pool *pool = NULL;
	int ret = knitk_pool_create(&o, &table, &pool);

	if (ret)
		printf("# knitk_pool_create: %d\n", ret);
	return ret ? NULL : pool;
}

static void opts_checked(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 4,
				     .dispatch = KNITK_POOL_DISPATCH_STEAL };
	struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER };
	struct knitk_pool *pool = NULL;
	struct knitk_call *call = NULL;
	uint64_t x = 1;

	o.steal_region = 16;		/* 4 regions for 4 workers */
	CHECK_EQ(knitk_pool_create(&o, &table, &pool), -EINVAL);
	o.steal_region = 3;
	CHECK_EQ(knitk_pool_create(&o, &table, &pool), -EINVAL);
	o.steal_region = 2;
	o.nr_workers = KNITK_MAX_WORKERS;	/* 63 workers need g = 1 */
	CHECK_EQ(knitk_pool_create(&o, &table, &pool), -EINVAL);
	o.nr_workers = 4;
	o.steal_region = 0;
	o.dispatch = 2;
	CHECK_EQ(knitk_pool_create(&o, &table, &pool), -EINVAL);
	o.dispatch = KNITK_POOL_DISPATCH_PRIVATE;
	o.steal_region = 8;		/* a region without stealing */
	CHECK_EQ(knitk_pool_create(&o, &table, &pool), -EINVAL);
	CHECK(!pool);
	pool = steal_pool(KNITK_WORKER_THREADS, 4, 8, 0, NULL);
	REQUIRE(pool);
	/* A call cannot be pinned to a worker when any worker may take it. */
	CHECK_EQ(knitk_pool_submit(pool, S_MIX, &x, 8, &co, &call), -EINVAL);
	knitk_pool_destroy(pool);
}

/* ------------------------------------------------------ exactly once */

#define SUBMITTERS	4
#define BATCH		48

struct submitter {
	struct knitk_pool *pool;
	unsigned int id;
	unsigned long n;
	unsigned long good;
};

static void *submit_main(void *arg)
{
	struct submitter *s = arg;
	struct knitk_call *calls[BATCH];
	uint64_t xs[BATCH];
	unsigned long i = 0;

	while (i < s->n) {
		unsigned int k, b = 0;

		for (; b < BATCH && i < s->n; b++, i++) {
			xs[b] = (uint64_t)s->id << 40 | i;
			if (knitk_pool_submit(s->pool, S_MIX, &xs[b], 8, NULL, &calls[b]))
				return NULL;
		}
		if (knitk_pool_wait_all(s->pool, calls, b, KNITK_WAIT_FOREVER))
			return NULL;
		for (k = 0; k < b; k++) {
			s->good += mix_ok(calls[k], xs[k], KNITK_MAX_WORKERS);
			knitk_call_release(calls[k]);
		}
	}
	return NULL;
}

struct wakes {
	uint64_t waits, wakes, spurious;
	unsigned int valid;		/* workers whose counters were read */
};

static void pool_wakes(struct knitk_pool *pool, unsigned int workers,
		       struct wakes *w)
{
	unsigned int i;

	memset(w, 0, sizeof(*w));
	for (i = 0; i < workers; i++) {
		struct knitk_worker_info wi = { .size = sizeof(wi) };

		if (knitk_pool_worker_info(pool, i, &wi) || !wi.db_valid)
			continue;
		w->valid++;
		w->waits += wi.db.waits;
		w->wakes += wi.db.wakes;
		w->spurious += wi.db.spurious;
	}
}

static void exactly_once_one(unsigned int kind, unsigned int workers,
			     unsigned int g, unsigned long n)
{
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct submitter sub[SUBMITTERS];
	pthread_t t[SUBMITTERS];
	struct knitk_pool *pool = steal_pool(kind, workers, g, 0, NULL);
	unsigned long good = 0;
	struct wakes wk;
	unsigned int i;

	REQUIRE(pool);
	for (i = 0; i < SUBMITTERS; i++) {
		sub[i] = (struct submitter){ pool, i, n / SUBMITTERS, 0 };
		REQUIRE(pthread_create(&t[i], NULL, submit_main, &sub[i]) == 0);
	}
	for (i = 0; i < SUBMITTERS; i++) {
		pthread_join(t[i], NULL);
		good += sub[i].good;
	}
	REQUIRE(knitk_pool_stats(pool, &st) == 0);
	pool_wakes(pool, workers, &wk);
	printf("# %s, %u workers, g %u: %lu of %lu calls exactly once (stale %llu),"
	       " %.2f per claim",
	       kind == KNITK_WORKER_THREADS ? "threads" : "processes", workers, g,
	       good, n / SUBMITTERS * SUBMITTERS, (unsigned long long)st.stale,
	       (double)st.completed / (double)(st.claims ? st.claims : 1));
	if (wk.valid)
		printf("; wakes %llu (%.5f per call), spurious %llu\n",
		       (unsigned long long)wk.wakes,
		       (double)wk.wakes / (double)(good ? good : 1),
		       (unsigned long long)wk.spurious);
	else
		printf("; no wake counters for these workers\n");
	CHECK_EQ(good, n / SUBMITTERS * SUBMITTERS);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.stale, 0);
	/* Every call came with a claim, and a claim takes at most g calls. */
	CHECK(st.claims >= 1 && st.claims <= st.completed);
	CHECK(st.claims * (uint64_t)knitk_steal_region_lanes(workers, g) >= st.completed);
	/* T12, T13: a worker is woken only for work reserved for it. */
	CHECK_EQ(wk.spurious, 0);
	knitk_pool_destroy(pool);
}

static void exactly_once_threads(void)
{
	static const unsigned int counts[] = { 2, 3, 4, 8, 16, 63 };
	unsigned int i, g;

	for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		for (g = 1; g <= KNITK_LANES; g *= 2)
			if (knitk_steal_region_lanes(counts[i], g) == (int)g)
				exactly_once_one(KNITK_WORKER_THREADS, counts[i], g,
						 nr_calls / 10);
}

static void exactly_once_processes(void)
{
	static const unsigned int counts[] = { 2, 3, 4, 8, 16, 63 };
	unsigned int i;

	for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		exactly_once_one(KNITK_WORKER_PROCESSES, counts[i], 0, nr_calls / 10);
}

/*
 * T12, T13: a burst of @n calls published to a parked pool of @n process
 * workers is spread over it.  The workers are stopped while the burst is
 * published, so none can wake and take it all: each publish hands its
 * lane to the next idle worker and rings that one.  Returns how many
 * workers ran exactly one call, their own (knitk_call_worker() names the
 * worker that ran each call, -EINPROGRESS before).
 */
static unsigned int spread_burst(struct knitk_pool *pool, unsigned int n)
{
	struct knitk_worker_info wi[4];
	struct knitk_call *calls[4];
	struct knitk_endpoint *ep;
	unsigned int i, spread = 0;
	uint64_t xs[4], before[4];

	if (n > 4 || knitk_pool_endpoint(pool, &ep))
		return 0;
	wait_workers_parked(ep, n);
	for (i = 0; i < n; i++) {
		memset(&wi[i], 0, sizeof(wi[i]));
		wi[i].size = sizeof(wi[i]);
		if (knitk_pool_worker_info(pool, i, &wi[i]) || kill(wi[i].pid, SIGSTOP))
			return 0;
		before[i] = wi[i].calls;
	}
	for (i = 0; i < n; i++) {
		xs[i] = 300 + i;
		if (knitk_pool_submit(pool, S_MIX, &xs[i], 8, NULL, &calls[i]))
			return 0;
	}
	for (i = 0; i < n; i++)
		CHECK_EQ(knitk_call_worker(calls[i]), -EINPROGRESS);
	for (i = 0; i < n; i++)
		if (kill(wi[i].pid, SIGCONT))
			return 0;
	if (knitk_pool_wait_all(pool, calls, n, KNITK_WAIT_FOREVER))
		return 0;
	for (i = 0; i < n; i++) {
		/* Publish i was handed to the i-th idle worker, which ran it. */
		spread += !knitk_pool_worker_info(pool, i, &wi[i]) &&
			  mix_ok(calls[i], xs[i], n) &&
			  knitk_call_worker(calls[i]) == (int)i &&
			  wi[i].calls - before[i] == 1;
		knitk_call_release(calls[i]);
	}
	return spread;
}

/*
 * Every worker runs one call of a burst to the parked pool (once every
 * ring went to the lowest idle worker, which claimed the whole region).
 */
static void burst_spreads(void)
{
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	unsigned int spread;

	pool = steal_pool(KNITK_WORKER_PROCESSES, 4, 0, 0, NULL);
	REQUIRE(pool);
	spread = spread_burst(pool, 4);
	REQUIRE(knitk_pool_stats(pool, &st) == 0);
	printf("# a burst of 4 to 4 parked workers: %u of them ran one call each,"
	       " %llu claims\n", spread, (unsigned long long)st.claims);
	CHECK_EQ(spread, 4);
	/* Each took its own reserved lane alone: one claim per call. */
	CHECK_EQ(st.claims, 4);
	knitk_pool_destroy(pool);
}

/* --------------------------------------------------------- the rest */

/*
 * T9: with the mailbox wrapped (lane order is not publish order) and full,
 * the oldest region is claimed first and decoded in publish order.  After
 * 41 calls, calls 0..22 sit in lanes 41..63 and 55..59 in lanes 32..36 of
 * the same region (g = 32): calls 0..22 run first, in order (lowest lane
 * first would run 55..59 before them).
 */
static void age_order(void)
{
	struct knitk_call *calls[KNITK_LANES];
	struct order o = { 0 };
	struct knitk_pool_opts opts = {
		.size = sizeof(opts), .nr_workers = 1, .nr_submitters = 1,
		.dispatch = KNITK_POOL_DISPATCH_STEAL, .task_data = &o,
	};
	struct knitk_pool *pool = NULL;
	unsigned int i, n = 0, sum = 0;

	REQUIRE(knitk_pool_create(&opts, &table, &pool) == 0);
	atomic_store(&o.open, 1);
	for (i = 0; i < 41; i++)
		CHECK_EQ(knitk_pool_call(pool, S_ORDER, NULL, 0, NULL, NULL, 0, NULL),
			 (int)i);
	atomic_store(&o.open, 0);
	atomic_store(&o.next, 0);
	for (i = 0; i < 60; i++)
		REQUIRE(knitk_pool_submit(pool, S_ORDER, NULL, 0, NULL, &calls[i]) == 0);
	atomic_store(&o.open, 1);
	REQUIRE(knitk_pool_wait_all(pool, calls, 60, KNITK_WAIT_FOREVER) == 0);
	for (i = 0; i < 60; i++) {
		if (i < 23)
			n += knitk_call_status(calls[i]) == (int)i;
		sum += (unsigned int)knitk_call_status(calls[i]);
		knitk_call_release(calls[i]);
	}
	CHECK_EQ(n, 23);
	CHECK_EQ(sum, 59 * 60 / 2);
	knitk_pool_destroy(pool);
}

/*
 * T10, T11: a process worker dies holding a claim.  Only calls it had
 * claimed end -EOWNERDEAD (at most one region), every other call
 * succeeds, and the respawned worker serves from the dead one's line.
 */
static void death_holding_claim(void)
{
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_call *calls[40], *die;
	struct knitk_pool *pool;
	unsigned int i, ok = 0, dead = 0, g = 8;
	uint64_t xs[40];

	pool = steal_pool(KNITK_WORKER_PROCESSES, 2, g, KNITK_POOL_RESPAWN, NULL);
	REQUIRE(pool);
	REQUIRE(knitk_pool_submit(pool, S_DIE, NULL, 0, NULL, &die) == 0);
	for (i = 0; i < 40; i++) {
		xs[i] = 1000 + i;
		REQUIRE(knitk_pool_submit(pool, S_MIX, &xs[i], 8, NULL, &calls[i]) == 0);
	}
	CHECK_EQ(knitk_call_wait(die, KNITK_WAIT_FOREVER), -EOWNERDEAD);
	REQUIRE(knitk_pool_wait_all(pool, calls, 40, KNITK_WAIT_FOREVER) == 0);
	/* The calls that fail are the dying worker's. */
	tally(calls, xs, 40, knitk_call_worker(die), 2, &ok, &dead);
	knitk_call_release(die);
	printf("# died holding a claim: %u calls -EOWNERDEAD, %u ok\n", dead + 1, ok);
	CHECK(dead + 1 <= g);
	CHECK_EQ(ok + dead, 40);
	/* The new worker and the survivor serve everything after. */
	for (i = 0; i < 2000; i++) {
		uint64_t x = i, y = 0;
		size_t len = 0;

		if (knitk_pool_call(pool, S_MIX, &x, 8, NULL, &y, 8, &len) == 0 &&
		    len == 8 && y == mix(x))
			ok++;
	}
	CHECK_EQ(ok, 40 - dead + 2000);
	do {
		REQUIRE(knitk_pool_stats(pool, &st) == 0);
		sched_yield();
	} while (st.respawns < 1);
	CHECK_EQ(st.deaths, 1);
	CHECK_EQ(st.respawns, 1);
	CHECK_EQ(st.ownerdead, dead + 1);
	CHECK_EQ(st.stale, 0);
	/* Both workers, the new one on the dead one's line, take a call each. */
	CHECK_EQ(spread_burst(pool, 2), 2);
	knitk_pool_destroy(pool);
}

/* Deadlines and aborts of queued and running calls, then both shutdowns. */
static void deadlines_aborts_shutdown(void)
{
	struct knitk_call_opts co = { .size = sizeof(co) };
	struct knitk_call *run[2], *late, *ab, *more[20];
	struct knitk_pool *pool;
	unsigned int i, ok = 0;
	uint64_t xs[20];

	pool = steal_pool(KNITK_WORKER_THREADS, 2, 0, 0, NULL);
	REQUIRE(pool);
	/* Both workers busy until aborted. */
	for (i = 0; i < 2; i++)
		REQUIRE(knitk_pool_submit(pool, S_SLEEP, NULL, 0, NULL, &run[i]) == 0);
	co.deadline_ns = tap_now_ns() + 1000000;
	REQUIRE(knitk_pool_submit(pool, S_SLEEP, NULL, 0, &co, &late) == 0);
	REQUIRE(knitk_pool_submit(pool, S_SLEEP, NULL, 0, NULL, &ab) == 0);
	CHECK_EQ(knitk_call_wait(late, KNITK_WAIT_FOREVER), -ETIMEDOUT);
	CHECK_EQ(knitk_call_abort(ab), 0);
	CHECK_EQ(knitk_call_status(ab), -ECANCELED);
	/* Completed with no worker's result: nobody to name. */
	CHECK_EQ(knitk_call_worker(late), -ENOENT);
	CHECK_EQ(knitk_call_worker(ab), -ENOENT);
	for (i = 0; i < 2; i++) {
		CHECK_EQ(knitk_call_abort(run[i]), 0);
		CHECK_EQ(knitk_call_wait(run[i], KNITK_WAIT_FOREVER), -ECANCELED);
	}
	for (i = 0; i < 20; i++) {
		xs[i] = i;
		REQUIRE(knitk_pool_submit(pool, S_MIX, &xs[i], 8, NULL, &more[i]) == 0);
	}
	/* Drain: every queued call still runs. */
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	for (i = 0; i < 20; i++) {
		ok += mix_ok(more[i], xs[i], 2);
		knitk_call_release(more[i]);
	}
	CHECK_EQ(ok, 20);
	knitk_call_release(late);
	knitk_call_release(ab);
	for (i = 0; i < 2; i++)
		knitk_call_release(run[i]);
	knitk_pool_destroy(pool);

	/* Cancel: running and queued calls end -ECANCELED. */
	pool = steal_pool(KNITK_WORKER_THREADS, 2, 0, 0, NULL);
	REQUIRE(pool);
	for (i = 0; i < 10; i++)
		REQUIRE(knitk_pool_submit(pool, S_SLEEP, NULL, 0, NULL, &more[i]) == 0);
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_CANCEL), 0);
	for (i = 0; i < 10; i++) {
		CHECK_EQ(knitk_call_status(more[i]), -ECANCELED);
		CHECK_EQ(knitk_call_worker(more[i]), -ENOENT);
		knitk_call_release(more[i]);
	}
	knitk_pool_destroy(pool);
}

/*
 * The rescue's hook (T14): the picked worker got nothing, and before it
 * is given back the searcher the rescue saw stops searching and a call
 * is published.
 */
static struct knitk_pool *rescue_pool;
static _Atomic uint64_t *rescue_words;	/* the wake policy's (steal.c) */
static unsigned int rescue_busy;
static struct knitk_call *rescue_call;
static uint64_t rescue_x = 7;
static _Atomic int rescue_fired;

static void rescue_hook(struct knitk_pool *pool, enum pool_hook point,
			unsigned int arg)
{
	(void)arg;
	if (point != POOL_HOOK_RESCUE_EMPTY || pool != rescue_pool ||
	    atomic_exchange(&rescue_fired, 1))
		return;
	/* Its searching bit (word 1) goes. */
	atomic_fetch_and(&rescue_words[1], ~(1ULL << rescue_busy));
	if (knitk_pool_submit(pool, S_MIX, &rescue_x, 8, NULL, &rescue_call))
		rescue_call = NULL;
}

/*
 * A stealing pool of two parked thread workers, one of them woken for a
 * sleeping call *@run and running it (past its claim, T12): rescue_busy
 * says which, rescue_words point at the steal words.
 */
static struct knitk_pool *rescue_pool_busy(struct knitk_endpoint **ep,
					   struct knitk_call **run)
{
	struct knitk_pool *pool;
	struct knitk_layout l;
	unsigned int i;
	void *base;

	pool = steal_pool(KNITK_WORKER_THREADS, 2, 0, 0, NULL);
	if (!pool || knitk_pool_endpoint(pool, ep)) {
		if (pool)
			knitk_pool_destroy(pool);
		return NULL;
	}
	knitk_endpoint_layout(*ep, &l, NULL);
	knitk_endpoint_base(*ep, &base);
	rescue_words = (_Atomic uint64_t *)((char *)base + l.mailbox_off +
					    offsetof(struct knitk_sector, ack));
	wait_workers_parked(*ep, 2);
	i = atomic_load(&sleeps_begun);
	if (knitk_pool_submit(pool, S_SLEEP, NULL, 0, NULL, run)) {
		knitk_pool_destroy(pool);
		return NULL;
	}
	while (atomic_load(&sleeps_begun) == i)
		sched_yield();
	rescue_busy = worker_parked(*ep, 0) ? 1 : 0;
	return pool;
}

/*
 * T12, T14: a waiter's rescue picks the idle worker and finds nothing to
 * hand it; meanwhile a publish finds that worker taken, the other busy
 * and nobody searching, so it reserves nothing and rings nobody.  Given
 * back, the idle worker must still be woken for that call, which would
 * otherwise wait for the busy worker (here: for ever, its call runs
 * until aborted; with every worker idle, the lost call of a churn of
 * stealing pools).
 */
static void rescue_gives_back(void)
{
	struct knitk_endpoint *ep;
	struct knitk_call *run;
	struct knitk_pool *pool;
	unsigned int i;

	pool = rescue_pool_busy(&ep, &run);
	REQUIRE(pool);
	/* The busy worker searched when the waiter looked (T14). */
	atomic_fetch_or(&rescue_words[1], 1ULL << rescue_busy);
	rescue_pool = pool;
	atomic_store(&knitk__test_hook, rescue_hook);
	for (i = 0; i < 500 && !atomic_load(&rescue_fired); i++)
		CHECK_EQ(knitk_call_wait(run, tap_now_ns() + 20000000ULL), -EINPROGRESS);
	atomic_store(&knitk__test_hook, NULL);
	CHECK(atomic_load(&rescue_fired));
	if (rescue_call) {
		/* Bounded: the hang detector, the call runs in microseconds. */
		CHECK_EQ(knitk_call_wait(rescue_call, tap_now_ns() + 10000000000ULL), 0);
		CHECK(mix_ok(rescue_call, rescue_x, 2));
		CHECK_EQ(knitk_call_worker(rescue_call), 1 - (int)rescue_busy);
		knitk_call_release(rescue_call);
	}
	CHECK(rescue_call);
	CHECK_EQ(knitk_call_status(run), -EINPROGRESS);
	CHECK_EQ(knitk_call_abort(run), 0);
	knitk_call_release(run);
	knitk_pool_destroy(pool);
}

/*
 * The hooks of a rescue's hand-off that withdraws (T14): a claimant (the
 * busy worker's steal line) announces the region after the hand-off's
 * reservation, and leaves it again without the lanes, which it saw
 * reserved for the worker handed to.
 */
static struct knitk_endpoint *withdraw_ep;
static _Atomic uint64_t *withdraw_want;	/* the claimant's want word */
static _Atomic int withdraw_fired, withdraw_empty;

static void withdraw_knot_hook(struct knitk_endpoint *k, enum knot_hook point,
			       unsigned int to)
{
	struct knitk_geometry g;
	struct knitk_layout l;
	unsigned int m, g_lanes;
	uint64_t resv;
	void *base;
	char *line;

	(void)k;
	if (point != KNOT_HOOK_HAND_OFF || atomic_load(&withdraw_fired))
		return;
	knitk_endpoint_layout(withdraw_ep, &l, &g);
	knitk_endpoint_base(withdraw_ep, &base);
	g_lanes = g.region_lanes;
	for (m = 0; m < g.nr_submitters; m++) {
		line = (char *)base + l.steal_off +
		       (uint64_t)(m * g.nr_workers + to) * l.steal_stride;
		resv = atomic_load((_Atomic uint64_t *)(line +
				offsetof(struct knitk_steal_line, resv)));
		if (!resv)
			continue;
		line = (char *)base + l.steal_off +
		       (uint64_t)(m * g.nr_workers + rescue_busy) * l.steal_stride;
		withdraw_want = (_Atomic uint64_t *)(line +
				offsetof(struct knitk_steal_line, want));
		/* Its announce of the region of the reserved lane. */
		atomic_store(withdraw_want,
			     1ULL << ((unsigned int)__builtin_ctzll(resv) / g_lanes));
		atomic_store(&withdraw_fired, 1);
		return;
	}
}

static void withdraw_pool_hook(struct knitk_pool *pool, enum pool_hook point,
			       unsigned int arg)
{
	(void)arg;
	if (point != POOL_HOOK_RESCUE_EMPTY || pool != rescue_pool ||
	    !atomic_load(&withdraw_fired) || atomic_exchange(&withdraw_empty, 1))
		return;
	/* Its T6 found the lanes reserved: nothing claimed, want cleared. */
	atomic_store(withdraw_want, 0);
}

/*
 * T14: a rescue's hand-off and a claimant meet in the region of the call
 * it rescues: the claimant sees the hand-off's reservation (its announce)
 * and leaves the lanes, the hand-off sees the claimant's want and
 * withdraws.  Nobody took the call, and the worker that searches does
 * not run (here: it runs a call until aborted; its searching bit is set
 * as if it were stopped while it searched).  The rescue must try again
 * rather than count on that searcher: it is there because the searcher
 * may never run.  Without that the call waits for the searcher (for ever
 * under a debugger's stop).
 */
static void rescue_after_a_withdrawal(void)
{
	struct knitk_call *run, *call = NULL;
	struct knitk_endpoint *ep;
	struct knitk_pool *pool;
	uint64_t x = 11;

	pool = rescue_pool_busy(&ep, &run);
	REQUIRE(pool);
	/* Its searching bit (word 1), as if stopped while it searched. */
	atomic_fetch_or(&rescue_words[1], 1ULL << rescue_busy);
	/* A searcher: the publish picks nobody, the lane is nobody's. */
	REQUIRE(knitk_pool_submit(pool, S_MIX, &x, 8, NULL, &call) == 0);
	withdraw_ep = ep;
	rescue_pool = pool;
	atomic_store(&knitk__endpoint_hook, withdraw_knot_hook);
	atomic_store(&knitk__test_hook, withdraw_pool_hook);
	/* Bounded: the hang detector, the call runs in microseconds. */
	CHECK_EQ(knitk_call_wait(call, tap_now_ns() + 10000000000ULL), 0);
	atomic_store(&knitk__test_hook, NULL);
	atomic_store(&knitk__endpoint_hook, NULL);
	CHECK(atomic_load(&withdraw_fired));
	CHECK(atomic_load(&withdraw_empty));
	CHECK(mix_ok(call, x, 2));
	CHECK_EQ(knitk_call_worker(call), 1 - (int)rescue_busy);
	knitk_call_release(call);
	atomic_fetch_and(&rescue_words[1], ~(1ULL << rescue_busy));
	CHECK_EQ(knitk_call_status(run), -EINPROGRESS);
	CHECK_EQ(knitk_call_abort(run), 0);
	knitk_call_release(run);
	knitk_pool_destroy(pool);
}

/*
 * A process worker of die_at(): KNITK_STEAL_DIE is "point,worker,path";
 * worker @worker kills itself at knot hook @point (or, for DIE_AT_PICK,
 * at the pool's POOL_HOOK_STEAL_PICKED), once (the first to create
 * @path), so its respawned successor lives.
 */
static int die_point = -1;
static unsigned int die_worker;
static const char *die_path;

/* @point of die_point for the pool's POOL_HOOK_STEAL_PICKED (not a knot hook). */
#define DIE_AT_PICK	(-2)

static void die_once(unsigned int arg)
{
	int fd;

	if (arg != die_worker)
		return;
	fd = open(die_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	if (fd < 0)
		return;
	close(fd);
	raise(SIGKILL);
}

static void die_hook(struct knitk_endpoint *k, enum knot_hook point, unsigned int arg)
{
	(void)k;
	if ((int)point == die_point)
		die_once(arg);
}

static void die_pool_hook(struct knitk_pool *pool, enum pool_hook point,
			  unsigned int arg)
{
	(void)pool;
	if (point == POOL_HOOK_STEAL_PICKED && die_point == DIE_AT_PICK)
		die_once(arg);
}

static void die_setup(void)
{
	const char *env = getenv("KNITK_STEAL_DIE");
	static char path[256];
	int point;

	if (!env || !getenv("KNITK_WORKER") ||
	    sscanf(env, "%d,%u,%255s", &point, &die_worker, path) != 3)
		return;
	die_point = point;
	die_path = path;
	atomic_store(&knitk__endpoint_hook, die_hook);
	atomic_store(&knitk__test_hook, die_pool_hook);
}

/*
 * T5, T10, T11 at the exact points: process worker 0 (the senior) dies
 * right after announcing its want (holding no claim: nothing fails) or
 * right after retiring its claim (holding the claim and its want: only
 * the claimed calls fail).  Survivors do not wait on the dead intent once
 * the pool's pidfd monitor cleared its live bit, and the respawned worker
 * takes the steal line over.  knitk_call_worker() names worker 0 for the
 * failed calls and a worker for each served one.
 */
static void die_at(enum knot_hook point, unsigned int g)
{
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_call *calls[60];
	char env[300], path[] = "/tmp/knitk-steal-die.XXXXXX";
	struct knitk_pool *pool;
	unsigned int i, ok = 0, dead = 0, total = 60;
	uint64_t xs[60];
	int fd = mkstemp(path);

	REQUIRE(fd >= 0);
	close(fd);
	unlink(path);
	snprintf(env, sizeof(env), "%d,0,%s", (int)point, path);
	setenv("KNITK_STEAL_DIE", env, 1);
	pool = steal_pool(KNITK_WORKER_PROCESSES, 2, g, KNITK_POOL_RESPAWN, NULL);
	unsetenv("KNITK_STEAL_DIE");
	REQUIRE(pool);
	for (i = 0; i < 60; i++) {
		xs[i] = 77 + i;
		REQUIRE(knitk_pool_submit(pool, S_MIX, &xs[i], 8, NULL, &calls[i]) == 0);
	}
	REQUIRE(knitk_pool_wait_all(pool, calls, 60, KNITK_WAIT_FOREVER) == 0);
	tally(calls, xs, 60, 0, 2, &ok, &dead);
	/*
	 * Worker 1 may have taken all of those: call on until worker 0 has
	 * claimed (and died), then serve more with the survivor and the new
	 * worker 0.
	 */
	for (i = 0; access(path, F_OK) || i < 500; i++) {
		uint64_t x = i, y = 0;
		size_t len = 0;
		int s = knitk_pool_call(pool, S_MIX, &x, 8, NULL, &y, 8, &len);

		if (s == -EOWNERDEAD)
			dead++;
		else if (s == 0 && len == 8 && y == mix(x))
			ok++;
		total++;
	}
	do {
		REQUIRE(knitk_pool_stats(pool, &st) == 0);
		sched_yield();
	} while (st.respawns < 1);
	REQUIRE(knitk_pool_stats(pool, &st) == 0);
	printf("# worker 0 died at %s: %u -EOWNERDEAD, %u ok\n",
	       point == KNOT_HOOK_STEAL_WANT ? "its want" : "its claim", dead, ok);
	CHECK_EQ(ok + dead, total);
	if (point == KNOT_HOOK_STEAL_WANT)
		CHECK_EQ(dead, 0);
	else
		CHECK(dead >= 1 && dead <= g);
	CHECK_EQ(st.deaths, 1);
	CHECK_EQ(st.respawns, 1);
	CHECK_EQ(st.ownerdead, dead);
	CHECK_EQ(st.stale, 0);
	/* The new worker 0 claims on the dead one's steal line, woken too. */
	CHECK_EQ(spread_burst(pool, 2), 2);
	knitk_pool_destroy(pool);
	unlink(path);
}

/*
 * The only worker dies at its first want, with calls queued and no
 * respawn: nobody is left to claim them, so they end -EPIPE (not a hang).
 */
static void last_worker_dies(void)
{
	struct knitk_call *calls[10];
	char env[300], path[] = "/tmp/knitk-steal-last.XXXXXX";
	struct knitk_pool *pool;
	unsigned int i, n, epipe = 0;
	uint64_t x = 5;
	int fd = mkstemp(path), ret;

	REQUIRE(fd >= 0);
	close(fd);
	unlink(path);
	snprintf(env, sizeof(env), "%d,0,%s", (int)KNOT_HOOK_STEAL_WANT, path);
	setenv("KNITK_STEAL_DIE", env, 1);
	pool = steal_pool(KNITK_WORKER_PROCESSES, 1, 0, 0, NULL);
	unsetenv("KNITK_STEAL_DIE");
	REQUIRE(pool);
	/*
	 * The first call wakes the worker to its death; once that is seen,
	 * a submit fails -EPIPE at once instead of queueing.
	 */
	for (n = 0; n < 10; n++) {
		ret = knitk_pool_submit(pool, S_MIX, &x, 8, NULL, &calls[n]);
		if (ret) {
			CHECK_EQ(ret, -EPIPE);
			break;
		}
	}
	REQUIRE(n > 0);
	REQUIRE(knitk_pool_wait_all(pool, calls, n, KNITK_WAIT_FOREVER) == 0);
	for (i = 0; i < n; i++) {
		epipe += knitk_call_status(calls[i]) == -EPIPE;
		knitk_call_release(calls[i]);
	}
	CHECK_EQ(epipe, n);
	CHECK_EQ(knitk_pool_submit(pool, S_MIX, &x, 8, NULL, &calls[0]), -EPIPE);
	knitk_pool_destroy(pool);
	unlink(path);
}

/*
 * T12 at a worker's death: process worker 0 claimed with work left and
 * picked idle worker 1 to wake (its ringing bit taken), and dies there
 * (POOL_HOOK_STEAL_PICKED), before it hands it anything.  Worker 1 must not stay picked for ever:
 * never rung, never picked again by a publish, never parking.  Without
 * respawn it is the only worker left: the calls still queued are its, and
 * once they are done it parks.
 */
static void death_picking_a_worker(void)
{
	struct knitk_pool_stats st = { .size = sizeof(st) };
	char env[300], path[] = "/tmp/knitk-steal-pick.XXXXXX";
	unsigned int i, ok = 0, dead = 0, total = 0;
	struct knitk_call *calls[40];
	struct knitk_endpoint *knot;
	struct knitk_pool *pool;
	uint64_t xs[40];
	int fd = mkstemp(path);

	REQUIRE(fd >= 0);
	close(fd);
	unlink(path);
	snprintf(env, sizeof(env), "%d,0,%s", DIE_AT_PICK, path);
	setenv("KNITK_STEAL_DIE", env, 1);
	pool = steal_pool(KNITK_WORKER_PROCESSES, 2, 8, 0, NULL);
	unsetenv("KNITK_STEAL_DIE");
	REQUIRE(pool);
	/* Bursts until worker 0 has picked (and died); hung there before. */
	while (access(path, F_OK)) {
		for (i = 0; i < 40; i++) {
			xs[i] = total + i;
			REQUIRE(knitk_pool_submit(pool, S_MIX, &xs[i], 8, NULL,
						  &calls[i]) == 0);
		}
		REQUIRE(knitk_pool_wait_all(pool, calls, 40, KNITK_WAIT_FOREVER) == 0);
		tally(calls, xs, 40, 0, 2, &ok, &dead);
		total += 40;
	}
	/* Worker 1 alone serves on. */
	for (i = 0; i < 100; i++, total++) {
		uint64_t x = i, y = 0;
		size_t len = 0;

		ok += knitk_pool_call(pool, S_MIX, &x, 8, NULL, &y, 8, &len) == 0 &&
		      len == 8 && y == mix(x);
	}
	REQUIRE(knitk_pool_stats(pool, &st) == 0);
	printf("# worker 0 died picking worker 1: %u calls, %u -EOWNERDEAD, %u ok\n",
	       total, dead, ok);
	CHECK_EQ(ok + dead, total);
	CHECK(dead <= 8);
	CHECK_EQ(st.deaths, 1);
	CHECK_EQ(st.ownerdead, dead);
	/* And parks (it spun for ever where it stayed picked). */
	REQUIRE(knitk_pool_endpoint(pool, &knot) == 0);
	while (!worker_parked(knot, 1))
		sched_yield();
	knitk_pool_destroy(pool);
	unlink(path);
}

static void death_holding_want(void)
{
	die_at(KNOT_HOOK_STEAL_WANT, 8);
}

static void death_holding_claim_and_want(void)
{
	die_at(KNOT_HOOK_STEAL_CLAIM, 8);
}

int main(int argc, char **argv)
{
	int ret;

	die_setup();
	ret = knitk_worker_main(argc, argv, &table, NULL);

	if (ret)
		return 1;
	if (argc > 1)
		nr_calls = strtoul(argv[1], NULL, 0);
	TEST(opts_checked);
	TEST(age_order);
	TEST(deadlines_aborts_shutdown);
	TEST(death_holding_claim);
	TEST(death_holding_want);
	TEST(death_holding_claim_and_want);
	TEST(last_worker_dies);
	TEST(death_picking_a_worker);
	TEST(burst_spreads);
	TEST(rescue_gives_back);
	TEST(rescue_after_a_withdrawal);
	TEST(exactly_once_threads);
	TEST(exactly_once_processes);
	return tap_exit();
}
