// SPDX-License-Identifier: GPL-2.0
/*
 * The spin policy of the pool's polls (pool/spin.c), through its internals
 * and -Wl,--wrap=sched_yield (which counts the yields):
 *  - awake_roles: a role whose doorbell is flagged asleep (a park's
 *    prepare) is not counted, an awake one is, and cancel counts it again.
 *  - crowded_yields: the decision follows the count at the recount round:
 *    more roles awake than CPUs yields every POOL_SPIN_CROWDED_YIELD
 *    rounds, as many or fewer every POOL_SPIN_FREE_YIELD.
 *  - pool_parked_workers: in a pool, a worker parked between calls is not
 *    counted and the worker running a call is.
 *  - spin_ends_at_deadline, spin_ends_at_abort: with opts.spin at its
 *    largest, a waiter spinning for a call still returns at its deadline
 *    and when another thread aborts the call (it spun on for ever).
 */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdatomic.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"
#include "../pool/pool_internal.h"

static _Atomic unsigned int yields;

int __real_sched_yield(void);
int __wrap_sched_yield(void);
int __wrap_sched_yield(void)
{
	atomic_fetch_add(&yields, 1);
	return __real_sched_yield();
}

#define HOST_BIT	(1ULL << KNITK_DOORBELL_HOST)

struct knot {
	struct knitk_endpoint *host, *worker[3];
};

static int knot_init(struct knot *k)
{
	struct knitk_geometry g = {
		.nr_workers = 3, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64,
	};
	unsigned int i;

	if (knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k->host) ||
	    knitk_endpoint_join(k->host, KNITK_ROLE_HOST, 0) < 1)
		return -1;
	for (i = 0; i < 3; i++)
		if (knitk_endpoint_attach(knitk_endpoint_fd(k->host), 0, &k->worker[i]) ||
		    knitk_endpoint_join(k->worker[i], KNITK_ROLE_WORKER, i) < 1)
			return -1;
	return 0;
}

static void knot_fini(struct knot *k)
{
	unsigned int i;

	for (i = 0; i < 3; i++)
		knitk_endpoint_destroy(k->worker[i]);
	knitk_endpoint_destroy(k->host);
}

static void awake_roles(void)
{
	struct knot k = { 0 };
	struct pool_spin s;
	uint32_t seq;

	REQUIRE(knot_init(&k) == 0);
	knitk__spin_init(&s, k.host, 2);
	CHECK_EQ(knitk__spin_awake(&s), 0x7 | HOST_BIT);
	REQUIRE(knitk_doorbell_prepare(k.worker[1], &seq) == 0);
	CHECK_EQ(knitk__spin_awake(&s), 0x5 | HOST_BIT);
	REQUIRE(knitk_doorbell_prepare(k.host, &seq) == 0);
	CHECK_EQ(knitk__spin_awake(&s), 0x5);
	REQUIRE(knitk_doorbell_prepare(k.worker[0], &seq) == 0);
	REQUIRE(knitk_doorbell_prepare(k.worker[2], &seq) == 0);
	CHECK_EQ(knitk__spin_awake(&s), 0);
	REQUIRE(knitk_doorbell_cancel(k.worker[1]) == 0);
	CHECK_EQ(knitk__spin_awake(&s), 0x2);
	REQUIRE(knitk_doorbell_cancel(k.host) == 0);
	CHECK_EQ(knitk__spin_awake(&s), 0x2 | HOST_BIT);
	knot_fini(&k);
}

/* The yields of rounds 0 .. 4 * POOL_SPIN_FREE_YIELD - 1. */
static unsigned int yields_of_rounds(struct pool_spin *s)
{
	unsigned int r, y0 = atomic_load(&yields);

	for (r = 0; r < 4 * POOL_SPIN_FREE_YIELD; r++)
		pool_spin_relax(s, r);
	return atomic_load(&yields) - y0;
}

static void crowded_yields(void)
{
	struct knot k = { 0 };
	struct pool_spin s;
	uint32_t seq;

	REQUIRE(knot_init(&k) == 0);
	/* Four roles awake on two CPUs: crowded from the first recount. */
	knitk__spin_init(&s, k.host, 2);
	CHECK_EQ(yields_of_rounds(&s),
		 4 * POOL_SPIN_FREE_YIELD / POOL_SPIN_CROWDED_YIELD -
		 (POOL_SPIN_RECOUNT - 1) / POOL_SPIN_CROWDED_YIELD);
	CHECK(atomic_load(&s.crowded));
	/* Two asleep: the other two fit, and the decision is kept. */
	REQUIRE(knitk_doorbell_prepare(k.worker[0], &seq) == 0);
	REQUIRE(knitk_doorbell_prepare(k.worker[2], &seq) == 0);
	CHECK_EQ(yields_of_rounds(&s),
		 4 + (POOL_SPIN_RECOUNT - 1) / POOL_SPIN_CROWDED_YIELD);
	CHECK(!atomic_load(&s.crowded));
	CHECK_EQ(yields_of_rounds(&s), 4);
	/* As many awake as CPUs still fit; one more does not. */
	knitk__spin_init(&s, k.host, 3);
	REQUIRE(knitk_doorbell_cancel(k.worker[0]) == 0);
	CHECK_EQ(yields_of_rounds(&s), 4);
	REQUIRE(knitk_doorbell_cancel(k.worker[2]) == 0);
	yields_of_rounds(&s);
	CHECK(atomic_load(&s.crowded));
	knot_fini(&k);
}

static _Atomic int gate, running;

static int task_until_gate(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	(void)ctx;
	atomic_store(&running, 1);
	while (!atomic_load(&gate))
		__real_sched_yield();
	return 0;
}

static const knitk_task_fn gate_fns[] = { task_until_gate };
static const struct knitk_task_table gate_tasks = { .tasks = gate_fns, .nr_tasks = 1 };

/* Until worker @w's doorbell is or is not in @pool's awake set. */
static void wait_awake(struct knitk_pool *pool, unsigned int w, bool awake)
{
	while (!!(knitk__spin_awake(&pool->spin) & 1ULL << w) != awake)
		__real_sched_yield();
}

static void pool_parked_workers(void)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_THREADS, .nr_workers = 2,
		.knot_flags = KNITK_KNOT_FUTEX,
	};
	struct knitk_pool *pool;
	struct knitk_call *call;

	REQUIRE(knitk_pool_create(&o, &gate_tasks, &pool) == 0);
	/* Idle workers park after their spin: neither is counted. */
	wait_awake(pool, 0, false);
	wait_awake(pool, 1, false);
	/* One call goes to worker 0 (ties: the lowest); it runs, awake. */
	REQUIRE(knitk_pool_submit(pool, 0, NULL, 0, NULL, &call) == 0);
	while (!atomic_load(&running))
		__real_sched_yield();
	CHECK(knitk__spin_awake(&pool->spin) & 1ULL << 0);
	CHECK(!(knitk__spin_awake(&pool->spin) & 1ULL << 1));
	atomic_store(&gate, 1);
	CHECK_EQ(knitk_call_wait(call, KNITK_WAIT_FOREVER), 0);
	knitk_call_release(call);
	knitk_pool_destroy(pool);
}

/* A pool that spins as long as opts.spin allows, its one call gated. */
static struct knitk_pool *spin_pool(unsigned int kind, struct gate *g,
				    struct knitk_call **call)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind,
				     .nr_workers = 1, .spin = UINT_MAX };
	struct knitk_pool *pool;

	if (gate_open(g) || knitk_pool_create(&o, &test_tasks, &pool))
		return NULL;
	if (knitk_pool_submit(pool, T_GATE, &g->arg, sizeof(g->arg), NULL, call) ||
	    gate_wait(g, 'r')) {
		knitk_pool_destroy(pool);
		return NULL;
	}
	return pool;
}

static void spin_pool_done(struct knitk_pool *pool, struct gate *g,
			   struct knitk_call *call)
{
	CHECK_EQ(gate_release(g), 0);
	knitk_call_release(call);
	knitk_pool_destroy(pool);
	gate_close(g);
}

static void spin_ends_at_deadline(void)
{
	static const unsigned int kinds[] = { KNITK_WORKER_THREADS,
					      KNITK_WORKER_PROCESSES };
	unsigned int k;

	for (k = 0; k < 2; k++) {
		struct knitk_call *call;
		struct knitk_pool *pool;
		struct gate g;

		pool = spin_pool(kinds[k], &g, &call);
		REQUIRE(pool);
		/* Spun past it for ever before: the spin never read the clock. */
		CHECK_EQ(knitk_call_wait(call, tap_now_ns() + 20000000ULL),
			 -EINPROGRESS);
		CHECK_EQ(knitk_call_status(call), -EINPROGRESS);
		spin_pool_done(pool, &g, call);
	}
}

struct aborter {
	struct knitk_pool *pool;
	struct knitk_call *call;
	int ret;
};

/*
 * Once the waiter spins on its call's own word (docs/protocol.md R6: it
 * set SLOT_TAKE, and its spin outlasts the test), abort its call.
 */
static void *abort_spinning(void *arg)
{
	struct aborter *a = arg;
	bool spinning = false;

	while (!spinning) {
		sched_yield();
		pthread_mutex_lock(&a->pool->lock);
		spinning = a->call->take;
		pthread_mutex_unlock(&a->pool->lock);
	}
	a->ret = knitk_call_abort(a->call);
	return NULL;
}

static void spin_ends_at_abort(void)
{
	struct aborter a = { .ret = 1 };
	struct gate g;
	pthread_t th;

	a.pool = spin_pool(KNITK_WORKER_THREADS, &g, &a.call);
	REQUIRE(a.pool);
	pthread_create(&th, NULL, abort_spinning, &a);
	/* Spun on for ever before: an abort did not end the spin. */
	CHECK_EQ(knitk_call_wait(a.call, KNITK_WAIT_FOREVER), -ECANCELED);
	pthread_join(th, NULL);
	CHECK_EQ(a.ret, 0);
	spin_pool_done(a.pool, &g, a.call);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	TEST(awake_roles);
	TEST(crowded_yields);
	TEST(pool_parked_workers);
	TEST(spin_ends_at_deadline);
	TEST(spin_ends_at_abort);
	return tap_exit();
}
