// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Churn of small stealing pools (docs/protocol.md T12-T14): many short
 * lived pools of 1 to 3 thread or process workers, every legal region
 * size, with and without KNITK_POOL_RESPAWN, each fed by 2 to 4
 * submitting threads in bursts and pauses, so the workers keep going
 * idle, parking, being picked, rung and handed regions, then destroyed.
 * Every call is T_RUN with an id of its own: its result must be its own
 * and the run table must show it ran once.
 *
 * Every wait has a deadline of CHURN_WAIT_MS, far beyond any call here:
 * it is the hang detector, not a timing check.  A call still in flight
 * at it is a lost claim or a lost wake; the case prints the pool's state
 * (stats, workers, the wake policy's words, each request mailbox's
 * pending, reserved and wanted lanes), rings every worker once to tell a
 * lost wake from a lost claim, and fails.
 *
 * argv[1] (tests/run.sh): calls of the throughput cases; below 100000
 * (the sanitizer builds) the churn is smaller.  KNITK_CHURN_POOLS sets
 * the pools per case (make stress).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"

#define CHURN_WAIT_MS		10000
#define CHURN_MAX_THREADS	4
#define CHURN_MAX_BURST		24

static unsigned long nr_calls = 1000000;
static unsigned int nr_pools;

/* Call ids of the run table, never reused within the run. */
static _Atomic uint64_t next_id = 1;
/* A hang was seen: every thread stops, the case dumps once. */
static _Atomic int hung;

struct churn_pool {
	struct knitk_pool *pool;
	unsigned int kind, workers, g, flags, threads;
	unsigned int calls;		/* per submitting thread */
	unsigned int max_us;		/* longest task */
	uint32_t max_len;		/* largest argument */
	bool pauses;			/* pauses long enough to park */
};

struct churn_thread {
	struct churn_pool *cp;
	uint64_t seed;
	unsigned long done, bad, twice, failed;
	/* The call found in flight at its deadline. */
	struct knitk_call *stuck;
	uint64_t stuck_id;
};

/* The state of @pool, for a hang report. */
static void churn_dump(struct churn_pool *cp, struct knitk_call *stuck,
		       uint64_t id)
{
	struct knitk_pool *pool = cp->pool;
	struct knitk_pool_stats st;
	struct knitk_endpoint *ep;
	struct knitk_geometry geo;
	struct knitk_layout l;
	unsigned int w, s;
	void *base;

	printf("# hang: call id %llu status %d; pool of %u %s workers, g %u,"
	       " %u threads, respawn %d\n", (unsigned long long)id,
	       knitk_call_status(stuck), cp->workers,
	       cp->kind == KNITK_WORKER_THREADS ? "thread" : "process", cp->g,
	       cp->threads, !!(cp->flags & KNITK_POOL_RESPAWN));
	pool_stats(pool, &st);
	printf("#  stats: submitted %llu completed %llu timedout %llu stale %llu"
	       " deaths %llu claims %llu\n", (unsigned long long)st.submitted,
	       (unsigned long long)st.completed, (unsigned long long)st.timedout,
	       (unsigned long long)st.stale, (unsigned long long)st.deaths,
	       (unsigned long long)st.claims);
	for (w = 0; w < cp->workers; w++) {
		struct knitk_worker_info wi = { .size = sizeof(wi) };

		if (knitk_pool_worker_info(pool, w, &wi))
			continue;
		printf("#  worker %u: pid %d alive %u inflight %u calls %llu",
		       w, wi.pid, wi.alive, wi.inflight,
		       (unsigned long long)wi.calls);
		if (wi.db_valid)
			printf(" waits %llu wakes %llu spurious %llu",
			       (unsigned long long)wi.db.waits,
			       (unsigned long long)wi.db.wakes,
			       (unsigned long long)wi.db.spurious);
		printf("\n");
	}
	if (knitk_pool_endpoint(pool, &ep) || knitk_endpoint_layout(ep, &l, &geo) ||
	    knitk_endpoint_base(ep, &base))
		return;
	{
		/* The wake policy's words (lib/pool/steal.c): mailbox 0's ack line. */
		const _Atomic uint64_t *pw = (const _Atomic uint64_t *)
			((char *)base + l.mailbox_off + offsetof(struct knitk_sector, ack));
		const struct knitk_control *ctl = base;

		printf("#  idle %#llx searching %#llx ringing %#llx window %llu live %#llx\n",
		       (unsigned long long)atomic_load(&pw[0]),
		       (unsigned long long)atomic_load(&pw[1]),
		       (unsigned long long)atomic_load(&pw[2]),
		       (unsigned long long)atomic_load(&pw[3]),
		       (unsigned long long)ctl->live);
	}
	for (s = 0; s < geo.nr_submitters; s++) {
		int m = knitk_endpoint_request_mailbox(ep, s, 0);
		uint64_t pending = 0;

		if (m < 0 || knitk_mailbox_pending(ep, (unsigned int)m, &pending) < 0)
			continue;
		printf("#  request mailbox %d: pending %#llx", m,
		       (unsigned long long)pending);
		for (w = 0; w < geo.nr_workers; w++) {
			const volatile struct knitk_steal_line *sl = (const void *)
				((char *)base + l.steal_off +
				 (uint64_t)(s * geo.nr_workers + w) * l.steal_stride);

			printf("; w%u want %#llx resv %#llx user %llu", w,
			       (unsigned long long)sl->want,
			       (unsigned long long)sl->resv,
			       (unsigned long long)sl->user);
		}
		printf("\n");
	}
	/* A ring of every worker: does the call complete then (a lost wake)? */
	knitk_doorbell_ring(ep, geo.nr_workers == 64 ? ~0ULL :
				(1ULL << geo.nr_workers) - 1);
	printf("#  after a ring of every worker: %d\n",
	       knitk_call_wait(stuck, after_ms(2000)));
	fflush(stdout);
}

/* One argument: mostly inline, sometimes in the arena; mostly quick. */
static uint32_t churn_arg(struct churn_thread *t, unsigned char *buf,
			  uint64_t id)
{
	uint64_t r = tap_rand(&t->seed);
	uint32_t len = sizeof(struct run_arg) + (uint32_t)(r % 24);
	uint32_t us = 0;

	if (t->cp->max_len > len && r % 8 == 0)
		len += (uint32_t)((r >> 8) % (t->cp->max_len - len));
	if (t->cp->max_us && (r >> 32) % 4 == 0)
		us = (uint32_t)((r >> 40) % t->cp->max_us);
	run_arg_fill(buf, id, us, len);
	return len;
}

/* Check finished call @c of @id, then release it. */
static void churn_check(struct churn_thread *t, struct knitk_call *c, uint64_t id)
{
	if (!run_result_ok(c, id)) {
		if (t->bad++ < 4)
			printf("# call %llu: status %d, not its own result\n",
			       (unsigned long long)id, knitk_call_status(c));
	} else if (atomic_load_explicit(&runtab[id], memory_order_relaxed) != 1) {
		if (t->twice++ < 4)
			printf("# call %llu ran %u times\n", (unsigned long long)id,
			       atomic_load(&runtab[id]));
	} else {
		t->done++;
	}
	knitk_call_release(c);
}

static void *churn_main(void *arg)
{
	struct churn_thread *t = arg;
	static _Thread_local unsigned char buf[4096];
	struct knitk_call *calls[CHURN_MAX_BURST];
	uint64_t ids[CHURN_MAX_BURST];
	unsigned int sent = 0;

	while (sent < t->cp->calls && !atomic_load(&hung)) {
		uint64_t r = tap_rand(&t->seed);
		unsigned int b = 1 + (unsigned int)(r % CHURN_MAX_BURST), i, n = 0;
		int ret = 0;

		if (b > t->cp->calls - sent)
			b = t->cp->calls - sent;
		for (i = 0; i < b; i++) {
			uint32_t len;

			ids[n] = atomic_fetch_add(&next_id, 1);
			if (ids[n] >= RUNTAB_IDS) {
				t->failed++;
				break;
			}
			len = churn_arg(t, buf, ids[n]);
			ret = knitk_pool_submit(t->cp->pool, T_RUN, buf, len, NULL,
						&calls[n]);
			if (ret) {
				if (t->failed++ < 4)
					printf("# knitk_pool_submit: %d\n", ret);
				break;
			}
			n++;
		}
		sent += b;
		/* Wait one by one, or for the whole burst at once. */
		if ((r >> 16) % 2 && n) {
			ret = knitk_pool_wait_all(t->cp->pool, calls, n,
						  after_ms(CHURN_WAIT_MS));
			for (i = 0; ret == -EINPROGRESS && i < n; i++)
				if (knitk_call_status(calls[i]) == -EINPROGRESS)
					break;
			if (ret == -EINPROGRESS && i == n)
				ret = 0;
		} else {
			for (i = 0; i < n; i++) {
				ret = knitk_call_wait(calls[i], after_ms(CHURN_WAIT_MS));
				if (ret == -EINPROGRESS)
					break;
			}
		}
		if (ret == -EINPROGRESS) {
			/* The first to see a hang reports it; the rest leak. */
			if (!atomic_exchange(&hung, 1)) {
				t->stuck = calls[i];
				t->stuck_id = ids[i];
			}
			return NULL;
		}
		for (i = 0; i < n; i++)
			churn_check(t, calls[i], ids[i]);
		/* Pauses: none, a yield, or long enough for the workers to park. */
		switch ((r >> 24) % 4) {
		case 0:
			break;
		case 1:
			sched_yield();
			break;
		default:
			if (t->cp->pauses)
				usleep((useconds_t)((r >> 32) % 1500));
			break;
		}
	}
	return NULL;
}

/* Burn the CPU the pool runs on (the churn's CPU pressure). */
static _Atomic int hog_stop;

static void *hog_main(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&hog_stop, memory_order_relaxed))
		;
	return NULL;
}

/* Briefly stop and continue a process worker now and then (T14). */
struct stopper {
	struct churn_pool *cp;
	_Atomic int stop;
	uint64_t seed;
};

static void *stopper_main(void *arg)
{
	struct stopper *sp = arg;

	while (!atomic_load(&sp->stop)) {
		uint64_t r = tap_rand(&sp->seed);
		struct knitk_worker_info wi = { .size = sizeof(wi) };

		usleep((useconds_t)(200 + r % 2000));
		if (knitk_pool_worker_info(sp->cp->pool,
					   (unsigned int)(r >> 32) % sp->cp->workers,
					   &wi) || wi.pid <= 0)
			continue;
		/* The pid is the pool's child until the pool reaps it. */
		if (kill(wi.pid, SIGSTOP))
			continue;
		usleep((useconds_t)(50 + (r >> 16) % 500));
		kill(wi.pid, SIGCONT);
	}
	return NULL;
}

enum churn_mode { CHURN_PLAIN, CHURN_HOG, CHURN_STOP };

/* One pool's life; false when it hung (reported) or failed to start. */
static bool churn_one(uint64_t *seed, enum churn_mode mode, unsigned long *calls)
{
	static const unsigned int gs[] = { 0, 1, 2, 4, 8, 16, 32 };
	struct churn_thread th[CHURN_MAX_THREADS] = { 0 };
	pthread_t tid[CHURN_MAX_THREADS], stid;
	struct stopper sp = { 0 };
	struct churn_pool cp = { 0 };
	struct knitk_pool_opts o = { .size = sizeof(o) };
	uint64_t r = tap_rand(seed);
	unsigned int i, started = 0;
	bool ok = true;
	int ret;

	cp.workers = 1 + (unsigned int)(r % 3);
	cp.kind = mode == CHURN_STOP || (r >> 8) % 4 ? KNITK_WORKER_PROCESSES :
						       KNITK_WORKER_THREADS;
	do {
		cp.g = gs[tap_rand(seed) % (sizeof(gs) / sizeof(gs[0]))];
	} while (knitk_steal_region_lanes(cp.workers, cp.g) < 0);
	if (cp.kind == KNITK_WORKER_PROCESSES && (r >> 12) % 2)
		cp.flags = KNITK_POOL_RESPAWN;
	cp.threads = 2 + (unsigned int)((r >> 16) % 3);
	cp.calls = 40 + (unsigned int)((r >> 20) % 120);
	cp.max_us = (r >> 28) % 3 ? 0 : 300;
	/* A small arena: publishes meet backpressure (-ENOSPC). */
	cp.max_len = (r >> 32) % 3 ? 64 : 1500;
	cp.pauses = (r >> 36) % 4 != 0;
	o.kind = cp.kind;
	o.nr_workers = cp.workers;
	o.dispatch = KNITK_POOL_DISPATCH_STEAL;
	o.steal_region = cp.g;
	o.flags = cp.flags;
	o.nr_submitters = 1 + (unsigned int)((r >> 40) % 4);
	/* Spin 1: park at once, the policy's busiest path. */
	o.spin = (r >> 44) % 2 ? 1 : 0;
	o.arena_bytes = (r >> 48) % 2 ? 4096 : 0;
	ret = knitk_pool_create(&o, &test_tasks, &cp.pool);
	if (ret) {
		printf("# knitk_pool_create: %d\n", ret);
		return false;
	}
	if (mode == CHURN_STOP) {
		sp.cp = &cp;
		sp.seed = tap_rand(seed) | 1;
		if (pthread_create(&stid, NULL, stopper_main, &sp))
			sp.cp = NULL;
	}
	for (i = 0; i < cp.threads; i++) {
		th[i].cp = &cp;
		th[i].seed = tap_rand(seed) | 1;
		if (pthread_create(&tid[i], NULL, churn_main, &th[i]))
			break;
		started++;
	}
	for (i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	if (sp.cp) {
		atomic_store(&sp.stop, 1);
		pthread_join(stid, NULL);
	}
	for (i = 0; i < started; i++) {
		if (th[i].stuck)
			churn_dump(&cp, th[i].stuck, th[i].stuck_id);
		*calls += th[i].done;
		if (th[i].bad || th[i].twice || th[i].failed)
			ok = false;
	}
	CHECK_EQ(started, cp.threads);
	if (atomic_load(&hung))
		return false;	/* the pool is left as it is: it may not stop */
	for (i = 0; i < started; i++) {
		CHECK_EQ(th[i].done, cp.calls);
		CHECK_EQ(th[i].bad, 0);
		CHECK_EQ(th[i].twice, 0);
		CHECK_EQ(th[i].failed, 0);
	}
	knitk_pool_destroy(cp.pool);
	return ok;
}

static void churn(enum churn_mode mode, unsigned int pools, uint64_t seed0)
{
	uint64_t seed = seed0, t0 = tap_now_ns();
	pthread_t hog[2];
	unsigned int i, hogs = 0;
	unsigned long calls = 0;
	cpu_set_t all, one;

	REQUIRE(runtab_open() == 0);
	if (mode == CHURN_HOG) {
		/* One CPU for us, our workers (they inherit it) and a hog. */
		REQUIRE(sched_getaffinity(0, sizeof(all), &all) == 0);
		CPU_ZERO(&one);
		for (i = 0; i < CPU_SETSIZE && !CPU_ISSET(i, &all); i++)
			;
		CPU_SET(i, &one);
		REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
		atomic_store(&hog_stop, 0);
		for (; hogs < 1; hogs++)
			if (pthread_create(&hog[hogs], NULL, hog_main, NULL))
				break;
	}
	for (i = 0; i < pools && !atomic_load(&hung); i++)
		if (!churn_one(&seed, mode, &calls))
			tap_case_failed = 1;
	if (mode == CHURN_HOG) {
		atomic_store(&hog_stop, 1);
		while (hogs)
			pthread_join(hog[--hogs], NULL);
		sched_setaffinity(0, sizeof(all), &all);
	}
	printf("# %u pools, %lu calls checked, seed %#llx, %.1f s\n", i, calls,
	       (unsigned long long)seed0, (double)(tap_now_ns() - t0) / 1e9);
	if (atomic_load(&hung)) {
		/* A hung pool cannot be destroyed: report and leave. */
		printf("not ok - churn hang\n");
		fflush(stdout);
		_exit(1);
	}
}

static uint64_t churn_seed(unsigned int k)
{
	const char *v = getenv("KNITK_CHURN_SEED");

	return (v ? strtoull(v, NULL, 0) : (uint64_t)tap_now_ns()) * 0x9e3779b97f4a7c15ULL + k;
}

static void churn_plain(void)
{
	churn(CHURN_PLAIN, nr_pools, churn_seed(1));
}

static void churn_cpu_pressure(void)
{
	churn(CHURN_HOG, nr_pools / 4, churn_seed(2));
}

static void churn_stopped_workers(void)
{
	churn(CHURN_STOP, nr_pools / 4, churn_seed(3));
}

int main(int argc, char **argv)
{
	const char *v;

	if (pool_test_start(argc, argv, &test_tasks, &nr_calls, ~0UL))
		return 1;
	nr_pools = nr_calls >= 100000 ? 600 : 24;
	v = getenv("KNITK_CHURN_POOLS");
	if (v)
		nr_pools = (unsigned int)strtoul(v, NULL, 0);
	TEST(churn_plain);
	TEST(churn_cpu_pressure);
	TEST(churn_stopped_workers);
	return tap_exit();
}
