// SPDX-License-Identifier: GPL-2.0
/*
 * A stealing pool with KNITK_POOL_RESPAWN whose respawned worker dies at
 * once: the successor joins, claims a queued call whose task ends its
 * process (SIGKILL of itself, or exit()), and is gone within the pool's
 * wait for its join.  Every call must still end, and a waiter parked with
 * no deadline must learn of it: -EOWNERDEAD for each call a dead worker
 * ran, the result for the plain call; the pool keeps its worker
 * (deaths == respawns, worker 0 alive and serving).
 *  - die_right_after_respawn, exit_right_after_respawn: one worker,
 *    regions of one lane, NR_DIE calls whose tasks end their process,
 *    then one plain call.
 *  - die_right_after_respawn_other_alive: two workers; the first call
 *    keeps one of them busy (HOLD_MS) while the other dies on the rest,
 *    so one worker stays alive throughout.
 * The waiter waits with KNITK_WAIT_FOREVER on its own thread; the test
 * gives it HANG_S seconds, then reports the calls still running and the
 * pool's state, and leaves the pool (its destroy would wait for them).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "tap.h"
#include "pool_tasks.h"
#include "inherited_page.h"

#define HANG_S		60
#define NR_DIE		6
#define HOLD_MS		1500
#define ROUNDS		10

enum { F_MIX, F_KILL, F_EXIT, F_HOLD, F_NR };

/* The holder's pid, in a memfd made before any pool (inherited). */
static _Atomic int32_t *holder;

/* A die task run by the holder answers -EAGAIN: the holder stays alive. */
static int task_kill(const void *in, size_t len, struct knitk_reply *out, void *ctx)
{
	(void)in; (void)len; (void)out; (void)ctx;
	if (holder && atomic_load(holder) == (int32_t)getpid())
		return -EAGAIN;
	kill(getpid(), SIGKILL);
	return -EIO;
}

static int task_exit(const void *in, size_t len, struct knitk_reply *out, void *ctx)
{
	(void)in; (void)len; (void)out; (void)ctx;
	if (holder && atomic_load(holder) == (int32_t)getpid())
		return -EAGAIN;
	exit(3);
}

static int task_holder(const void *in, size_t len, struct knitk_reply *out, void *ctx)
{
	if (holder)
		atomic_store(holder, (int32_t)getpid());
	usleep(HOLD_MS * 1000);
	return task_mix(in, len, out, ctx);
}

static const knitk_task_fn fns[F_NR] = { task_mix, task_kill, task_exit, task_holder };
static const struct knitk_task_table tasks = { .tasks = fns, .nr_tasks = F_NR };

struct waiter {
	struct knitk_call **calls;
	unsigned int nr;
	int ret[NR_DIE + 2];
	_Atomic unsigned int done;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	unsigned int i;

	for (i = 0; i < w->nr; i++) {
		w->ret[i] = knitk_call_wait(w->calls[i], KNITK_WAIT_FOREVER);
		atomic_store(&w->done, i + 1);
	}
	return NULL;
}

static void dump(struct knitk_pool *pool, unsigned int workers)
{
	struct knitk_pool_stats st = { .size = sizeof(st) };
	unsigned int w;

	knitk_pool_stats(pool, &st);
	printf("# submitted %" PRIu64 " completed %" PRIu64 " ownerdead %" PRIu64
	       " deaths %" PRIu64 " respawns %" PRIu64 "\n", st.submitted,
	       st.completed, st.ownerdead, st.deaths, st.respawns);
	for (w = 0; w < workers; w++) {
		struct knitk_worker_info wi = { .size = sizeof(wi) };

		knitk_pool_worker_info(pool, w, &wi);
		printf("# worker %u pid %d alive %u inflight %u\n", w, wi.pid,
		       wi.alive, wi.inflight);
	}
}

/* Returns 0, or -1 when a call never ended (the pool is left). */
static int die_after_respawn(uint32_t die_fn, unsigned int workers, unsigned int round)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES,
		.nr_workers = workers, .flags = KNITK_POOL_RESPAWN,
		.dispatch = KNITK_POOL_DISPATCH_STEAL, .steal_region = 1,
	};
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_call *c[NR_DIE + 2];
	struct waiter wt = { .calls = c };
	unsigned int i, n = 0, first_die;
	struct knitk_pool *pool;
	uint64_t v = 42 + round, r, t0;
	const void *data;
	pthread_t th;
	size_t len;
	int ret;

	if (holder)
		atomic_store(holder, 0);
	if (knitk_pool_create(&o, &tasks, &pool)) {
		CHECK(!"pool create");
		return 0;
	}
	if (workers > 1 && !knitk_pool_submit(pool, F_HOLD, &v, sizeof(v), NULL, &c[n]))
		n++;
	/* Let the holder take its call before the deaths begin. */
	if (workers > 1)
		usleep(100000);
	first_die = n;
	for (i = 0; i < NR_DIE; i++)
		if (!knitk_pool_submit(pool, die_fn, &v, sizeof(v), NULL, &c[n]))
			n++;
	if (!knitk_pool_submit(pool, F_MIX, &v, sizeof(v), NULL, &c[n]))
		n++;
	CHECK_EQ(n, first_die + NR_DIE + 1);
	wt.nr = n;
	if (pthread_create(&th, NULL, waiter_main, &wt)) {
		CHECK(!"thread");
		return -1;
	}
	t0 = tap_now_ns();
	while (atomic_load(&wt.done) < n && tap_now_ns() - t0 < HANG_S * 1000000000ULL)
		usleep(1000);
	if (atomic_load(&wt.done) < n) {
		printf("# round %u: the waiter is still parked after %d s, on call %u of %u:\n",
		       round, HANG_S, atomic_load(&wt.done), n);
		for (i = 0; i < n; i++)
			printf("#   call %u (%s): status %d\n", i,
			       i < first_die ? "hold" : i < first_die + NR_DIE ? "die" : "mix",
			       knitk_call_status(c[i]));
		dump(pool, workers);
		sleep(1);
		printf("# a second later the waiter has %s\n",
		       atomic_load(&wt.done) < n ? "still not returned" : "returned");
		tap_case_failed = 1;
		return -1;
	}
	pthread_join(th, NULL);
	for (i = 0; i < n; i++) {
		ret = wt.ret[i];
		if (i >= first_die && i < first_die + NR_DIE) {
			if (ret != -EOWNERDEAD && !(workers > 1 && ret == -EAGAIN)) {
				printf("# round %u: die call %u: %d, not -EOWNERDEAD\n",
				       round, i - first_die, ret);
				tap_case_failed = 1;
			}
			continue;
		}
		if (ret || knitk_call_result(c[i], &data, &len) || len != sizeof(r)) {
			printf("# round %u: plain call %u: %d\n", round, i, ret);
			tap_case_failed = 1;
			continue;
		}
		memcpy(&r, data, sizeof(r));
		CHECK(r == mix64(v));
	}
	/* The worker is still there: every worker serves. */
	ret = knitk_pool_call(pool, F_MIX, &v, sizeof(v), NULL, &r, sizeof(r), &len);
	if (ret || r != mix64(v)) {
		printf("# round %u: a call after the deaths: %d\n", round, ret);
		tap_case_failed = 1;
	}
	/* The last respawn is counted once its worker joined: wait for it. */
	t0 = tap_now_ns();
	do {
		CHECK(knitk_pool_stats(pool, &st) == 0);
		if (st.deaths == st.respawns)
			break;
		usleep(1000);
	} while (tap_now_ns() - t0 < HANG_S * 1000000000ULL);
	if (st.deaths != st.respawns || !st.deaths) {
		printf("# round %u: deaths %" PRIu64 " respawns %" PRIu64 "\n",
		       round, st.deaths, st.respawns);
		tap_case_failed = 1;
	}
	if (tap_case_failed)
		dump(pool, workers);
	for (i = 0; i < n; i++)
		knitk_call_release(c[i]);
	knitk_pool_destroy(pool);
	return 0;
}

static void rounds(uint32_t die_fn, unsigned int workers)
{
	/* With a holder, each round lasts HOLD_MS. */
	unsigned int n, nr = workers > 1 ? 3 : ROUNDS;

	for (n = 0; n < nr && !tap_case_failed; n++)
		if (die_after_respawn(die_fn, workers, n))
			return;
}

static void die_right_after_respawn(void)
{
	rounds(F_KILL, 1);
}

static void exit_right_after_respawn(void)
{
	rounds(F_EXIT, 1);
}

static void die_right_after_respawn_other_alive(void)
{
	rounds(F_KILL, 2);
}

#define HOLDER_ENV	"RESPAWN_CLAIM_HOLDER_FD"

int main(int argc, char **argv)
{
	holder = inherited_page_map(HOLDER_ENV);
	if (knitk_worker_main(argc, argv, &tasks, NULL))
		return 2;
	holder = inherited_page_create(HOLDER_ENV, "holder");
	setenv("KNITK_BACKEND", "futex", 0);
	TEST(die_right_after_respawn);
	TEST(exit_right_after_respawn);
	TEST(die_right_after_respawn_other_alive);
	return tap_exit();
}
