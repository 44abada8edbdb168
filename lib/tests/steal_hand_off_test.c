// SPDX-License-Identifier: GPL-2.0
/*
 * The waiter's hand-off (docs/protocol.md T14): a stopped searcher
 * continued inside the host's hand-off, many waiters while it is stopped,
 * waiters that poll with short deadlines,
 * and the worker handed lanes killed there, with and without respawn (test
 * hooks of pool_hooks.h and knot_hooks.h hold the windows).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_parked.h"
#include "pool_tasks.h"
#include "tap.h"
#include "../core/knot_hooks.h"
#include "../pool/pool_hooks.h"
#include "../pool/pool_internal.h"
#include "../pool/steal_wake.h"
#include "fixtures.h"

/* Worker 0 (process @hook_pid0, thread @hook_tid0), worker 1's process. */
static pid_t hook_pid0, hook_tid0, hook_pid1;
/* Worker 0 of thread workers is stopped by this. */
static struct freezer hook_fz = { -1, -1, -1 };
static atomic_int hook_mode, hook_fired;
enum { HOOK_NONE, HOOK_CONT0, HOOK_KILL_TO };

/* Let the stopped worker 0 go on (once; later calls do nothing). */
static void searcher_continue(void)
{
	if (hook_pid0 != getpid())
		kill(hook_pid0, SIGCONT);
	else if (hook_fz.child > 0)
		freezer_thaw(&hook_fz);
	hook_fz.child = -1;
}

static void hand_off_hook(struct knitk_endpoint *k, enum knot_hook point,
			  unsigned int arg)
{
	char s;

	(void)k;
	if (point != KNOT_HOOK_HAND_OFF)
		return;
	switch (atomic_load(&hook_mode)) {
	case HOOK_CONT0:
		/* The stopped searcher goes on inside the hand-off. */
		if (atomic_exchange(&hook_fired, 1))
			return;
		searcher_continue();
		while (task_stopped(hook_pid0, hook_tid0))
			sched_yield();
		break;
	case HOOK_KILL_TO:
		/* The worker being handed lanes dies before it is rung. */
		if (arg != 1 || atomic_exchange(&hook_fired, 1))
			return;
		kill(hook_pid1, SIGKILL);
		do {
			sched_yield();
			s = task_state(hook_pid1, hook_pid1);
		} while (s && s != 'Z' && s != 'X');
		break;
	}
}

/*
 * @workers workers of @kind, all parked; one call wakes worker 0, which
 * then searches (a long spin): stop it there, as
 * steal_stopped_claimant_test does (a SIGSTOP for a process, a debugger's
 * stop of its thread).
 */
static struct knitk_pool *stopped_searcher(unsigned int kind, unsigned int flags,
					   unsigned int workers,
					   struct knitk_endpoint **ep)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind,
				     .nr_workers = workers, .flags = flags,
				     .knot_flags = KNITK_KNOT_FUTEX,
				     .arena_bytes = ARENA, .spin = 1U << 20,
				     .dispatch = KNITK_POOL_DISPATCH_STEAL };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	struct knitk_call *first;
	const void *d;
	size_t len;
	int32_t tid;
	uint64_t x = 4242;

	hook_fz.child = -1;
	if (knitk_pool_create(&o, &test_tasks, &pool))
		return NULL;
	if (knitk_pool_endpoint(pool, ep))
		goto fail;
	if (kind == KNITK_WORKER_PROCESSES) {
		if (knitk_pool_worker_info(pool, 0, &wi) || wi.pid <= 0)
			goto fail;
		hook_pid0 = hook_tid0 = wi.pid;
		memset(&wi, 0, sizeof(wi));
		wi.size = sizeof(wi);
		if (knitk_pool_worker_info(pool, 1, &wi) || wi.pid <= 0)
			goto fail;
		hook_pid1 = wi.pid;
	} else {
		/* Worker 0's thread: the one a call to the parked pool wakes. */
		wait_workers_parked(*ep, workers);
		if (knitk_pool_submit(pool, T_TID, NULL, 0, NULL, &first))
			goto fail;
		if (knitk_call_wait(first, KNITK_WAIT_FOREVER) ||
		    knitk_call_result(first, &d, &len) || len != sizeof(tid) ||
		    knitk_call_worker(first) != 0) {
			knitk_call_release(first);
			goto fail;
		}
		memcpy(&tid, d, sizeof(tid));
		knitk_call_release(first);
		hook_pid0 = getpid();
		hook_tid0 = tid;
		hook_pid1 = 0;
		if (freezer_start(&hook_fz, tid))
			goto fail;
	}
	wait_workers_parked(*ep, workers);
	if (knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &first))
		goto fail;
	if (knitk_call_wait(first, KNITK_WAIT_FOREVER) || !mix_result_ok(first, x) ||
	    knitk_call_worker(first) != 0) {
		knitk_call_release(first);
		goto fail;
	}
	knitk_call_release(first);
	if (kind == KNITK_WORKER_PROCESSES ? kill(hook_pid0, SIGSTOP) :
	    freezer_freeze(&hook_fz))
		goto fail;
	while (!task_stopped(hook_pid0, hook_tid0))
		sched_yield();
	/*
	 * A process stopped between a claim and its next empty scan is not
	 * searching, and the next publish then wakes an idle worker itself:
	 * stop it again until it is stopped searching.
	 */
	while (kind == KNITK_WORKER_PROCESSES &&
	       !(atomic_load(&knitk__steal_words(*ep)[STEAL_SEARCHING]) & 1)) {
		kill(hook_pid0, SIGCONT);
		while (task_stopped(hook_pid0, hook_tid0))
			sched_yield();
		kill(hook_pid0, SIGSTOP);
		while (!task_stopped(hook_pid0, hook_tid0))
			sched_yield();
	}
	for (x = 1; x < workers; x++)
		if (!worker_parked(*ep, (unsigned int)x))
			goto fail;
	return pool;
fail:
	searcher_continue();
	knitk_pool_destroy(pool);
	return NULL;
}

static uint64_t pool_spurious(struct knitk_pool *pool, unsigned int n)
{
	struct knitk_worker_info wi;
	uint64_t spurious = 0;
	unsigned int i;

	for (i = 0; i < n; i++) {
		memset(&wi, 0, sizeof(wi));
		wi.size = sizeof(wi);
		if (knitk_pool_worker_info(pool, i, &wi) == 0 && wi.db_valid)
			spurious += wi.db.spurious;
	}
	return spurious;
}

/*
 * The stopped searcher is continued inside the waiter's hand-off, after
 * its reservation and fence, before it looks at the claimants: whoever
 * takes the lanes, each call completes once with its result, and no
 * worker is woken for nothing.
 */
static void steal_continued_in_hand_off(unsigned int kind)
{
	struct knitk_endpoint *ep;
	struct knitk_pool_stats st;
	struct knitk_call *late[8];
	struct knitk_pool *pool;
	unsigned int i, bad = 0;

	atomic_store(&hook_fired, 0);
	atomic_store(&hook_mode, HOOK_CONT0);
	atomic_store(&knitk__endpoint_hook, hand_off_hook);
	pool = stopped_searcher(kind, 0, 2, &ep);
	REQUIRE(pool);
	for (i = 0; i < 8; i++) {
		uint64_t x = 100 + i;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &late[i]) == 0);
	}
	REQUIRE(knitk_pool_wait_all(pool, late, 8, KNITK_WAIT_FOREVER) == 0);
	for (i = 0; i < 8; i++) {
		bad += !mix_result_ok(late[i], 100 + i);
		knitk_call_release(late[i]);
	}
	atomic_store(&knitk__endpoint_hook, NULL);
	CHECK_EQ(atomic_load(&hook_fired), 1);
	CHECK_EQ(bad, 0);
	CHECK_EQ(pool_spurious(pool, 2), 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.completed, st.submitted);
	searcher_continue();
	knitk_pool_destroy(pool);
}

static void steal_continued_in_hand_off_processes(void)
{
	steal_continued_in_hand_off(KNITK_WORKER_PROCESSES);
}

static void steal_continued_in_hand_off_threads(void)
{
	steal_continued_in_hand_off(KNITK_WORKER_THREADS);
}

struct waiter {
	struct knitk_pool *pool;
	uint64_t x0;
	unsigned int good;
};

/* Submit eight calls and wait for them all, as its own waiter. */
static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	struct knitk_call *c[8];
	unsigned int i, n = 0;

	for (i = 0; i < 8; i++) {
		uint64_t x = w->x0 + i;

		if (knitk_pool_submit(w->pool, T_MIX, &x, 8, NULL, &c[n]) == 0)
			n++;
	}
	if (knitk_pool_wait_all(w->pool, c, n, KNITK_WAIT_FOREVER))
		n = 0;
	for (i = 0; i < n; i++) {
		w->good += mix_result_ok(c[i], w->x0 + i);
		knitk_call_release(c[i]);
	}
	return NULL;
}

/*
 * Three threads wait at once for calls published while the searcher is
 * stopped, each of them may hand lanes over: two idle workers, none woken
 * for nothing, every call completed once with its result.
 */
static void steal_stopped_many_waiters(void)
{
	struct knitk_endpoint *ep;
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct waiter w[3];
	pthread_t t[3];
	unsigned int i, round;

	atomic_store(&hook_mode, HOOK_NONE);
	pool = stopped_searcher(KNITK_WORKER_PROCESSES, 0, 3, &ep);
	REQUIRE(pool);
	for (round = 0; round < 4; round++) {
		for (i = 0; i < 3; i++) {
			w[i] = (struct waiter){ .pool = pool, .x0 = 1000 * (round * 3 + i) };
			REQUIRE(pthread_create(&t[i], NULL, waiter_main, &w[i]) == 0);
		}
		for (i = 0; i < 3; i++) {
			pthread_join(t[i], NULL);
			CHECK_EQ(w[i].good, 8);
		}
	}
	CHECK(task_stopped(hook_pid0, hook_tid0));
	CHECK_EQ(pool_spurious(pool, 3), 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.completed, st.submitted);
	searcher_continue();
	knitk_pool_destroy(pool);
}

/*
 * Calls published while the searcher is stopped, each waited for by a
 * thread that polls with short deadlines (knitk_call_wait, then
 * knitk_pool_wait_any): its spin ends at each deadline, never in a park,
 * and it still hands the lanes over (T14).  Every call completes with its
 * result, the searcher stopped throughout.
 */
static void steal_stopped_polled(void)
{
	struct knitk_endpoint *ep;
	struct knitk_pool_stats st;
	struct knitk_call *c[4];
	struct knitk_pool *pool;
	unsigned int i, k, good = 0;
	int ret;

	atomic_store(&hook_mode, HOOK_NONE);
	pool = stopped_searcher(KNITK_WORKER_PROCESSES, 0, 3, &ep);
	REQUIRE(pool);
	/* A round for each way: one hand-off serves a whole round. */
	for (i = 0; i < 8; i++) {
		uint64_t x = 5000 + i;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i % 4]) == 0);
		if (i % 4 != 3)
			continue;
		for (k = 0; k < 4; k++) {
			do {
				ret = i < 4 ? knitk_call_wait(c[k], after_ms(1)) :
				      knitk_pool_wait_any(pool, &c[k], 1, after_ms(1));
			} while (ret == -EINPROGRESS);
			good += mix_result_ok(c[k], 5000 + i - 3 + k);
			knitk_call_release(c[k]);
		}
	}
	CHECK_EQ(good, 8);
	CHECK(task_stopped(hook_pid0, hook_tid0));
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.completed, st.submitted);
	searcher_continue();
	knitk_pool_destroy(pool);
}

/*
 * Worker 1 is killed inside the waiter's hand-off of lanes to it, before
 * it is rung, while the searcher stays stopped.  Its lanes are never lost
 * nor run twice: every call completes with its result or -EOWNERDEAD.
 * Of two workers, without a respawn, they wait for the searcher (continued
 * once the death is handled); with KNITK_POOL_RESPAWN the successor takes
 * them while the searcher is still stopped.  (Not with a third worker:
 * it may be searching when the calls are published and claim them, so
 * no hand-off is sure to happen.)
 */
static void steal_kill_handed_to(unsigned int flags, unsigned int workers)
{
	struct knitk_endpoint *ep;
	struct knitk_pool_stats st;
	struct knitk_call *late[8];
	struct knitk_pool *pool;
	unsigned int i, bad = 0, dead = 0;

	atomic_store(&hook_fired, 0);
	atomic_store(&hook_mode, HOOK_KILL_TO);
	atomic_store(&knitk__endpoint_hook, hand_off_hook);
	pool = stopped_searcher(KNITK_WORKER_PROCESSES, flags, workers, &ep);
	REQUIRE(pool);
	for (i = 0; i < 8; i++) {
		uint64_t x = 200 + i;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &late[i]) == 0);
	}
	if (!(flags & KNITK_POOL_RESPAWN) && workers == 2) {
		do {
			/* One look at the calls runs the hand-off and the death. */
			knitk_pool_wait_any(pool, late, 8, after_ms(1));
			pool_stats(pool, &st);
		} while (!atomic_load(&hook_fired) || st.deaths < 1);
		searcher_continue();
	}
	REQUIRE(knitk_pool_wait_all(pool, late, 8, KNITK_WAIT_FOREVER) == 0);
	for (i = 0; i < 8; i++) {
		int s = knitk_call_status(late[i]);

		if (s == -EOWNERDEAD)
			dead++;
		else
			bad += s != 0 || !mix_result_ok(late[i], 200 + i);
		knitk_call_release(late[i]);
	}
	atomic_store(&knitk__endpoint_hook, NULL);
	CHECK_EQ(atomic_load(&hook_fired), 1);
	CHECK_EQ(bad, 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 1);
	CHECK_EQ(st.completed, st.submitted);
	if (flags & KNITK_POOL_RESPAWN) {
		uint64_t x = 300;

		/* The waits end at the death; the respawn follows it. */
		while (st.respawns < 1) {
			sched_yield();
			pool_stats(pool, &st);
		}
		CHECK_EQ(st.respawns, 1);
		/* The successor serves: the searcher is still stopped. */
		CHECK_EQ(mix_calls_good(pool, 4, NULL, x, 1), 4);
	}
	printf("# %u of 8 completed -EOWNERDEAD\n", dead);
	searcher_continue();
	knitk_pool_destroy(pool);
}

static void steal_kill_handed_to_plain(void)
{
	steal_kill_handed_to(0, 2);
}

static void steal_kill_handed_to_respawn(void)
{
	steal_kill_handed_to(KNITK_POOL_RESPAWN, 2);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(steal_continued_in_hand_off_processes);
	TEST(steal_continued_in_hand_off_threads);
	TEST(steal_stopped_many_waiters);
	TEST(steal_stopped_polled);
	TEST(steal_kill_handed_to_plain);
	TEST(steal_kill_handed_to_respawn);
	return tap_exit();
}
