// SPDX-License-Identifier: GPL-2.0
/*
 * A stealing pool's worker stopped while it holds claimed lanes (SIGSTOP
 * or a ptrace stop) delays nothing: its lanes are handed on and every call
 * completes; and kills of a stealing pool's workers during a drain or a
 * cancel shutdown lose nothing.
 * argv[1] (the runner's call count) is ignored: the counts are small.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_parked.h"
#include "pool_tasks.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

#define STEAL_RACE_CALLS 300

/*
 * A stealing pool of respawning process workers: a worker is killed
 * while a shutdown (drain or cancel) runs from another thread.  Every
 * call ends once: its result, -EOWNERDEAD, or (cancel) -ECANCELED;
 * completed equals submitted and nothing hangs.
 */
static void steal_kill_during_shutdown(unsigned int mode)
{
	static struct knitk_call *c[STEAL_RACE_CALLS];
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct shutter sh = { .mode = mode, .ret = 1 };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	pthread_t th;
	unsigned int i, bad = 0;

	REQUIRE(new_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL, 2,
			 KNITK_POOL_RESPAWN, &pool) == 0);
	for (i = 0; i < STEAL_RACE_CALLS; i++) {
		uint64_t x = i;

		if (i % 50 == 0) {
			uint32_t ms = 5;

			REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c[i]) == 0);
		} else {
			REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i]) == 0);
		}
	}
	REQUIRE(knitk_pool_worker_info(pool, 1, &wi) == 0);
	sh.pool = pool;
	REQUIRE(pthread_create(&th, NULL, shutter_main, &sh) == 0);
	if (wi.pid > 0)
		kill(wi.pid, SIGKILL);
	pthread_join(th, NULL);
	CHECK_EQ(sh.ret, 0);
	for (i = 0; i < STEAL_RACE_CALLS; i++) {
		int s = knitk_call_wait(c[i], KNITK_WAIT_FOREVER);

		if (s == -EOWNERDEAD || (mode == KNITK_SHUTDOWN_CANCEL && s == -ECANCELED))
			continue;
		if (i % 50 == 0 ? s != 5 : (s || !mix_result_ok(c[i], i)))
			bad++;
	}
	CHECK_EQ(bad, 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, STEAL_RACE_CALLS);
	CHECK_EQ(st.completed, STEAL_RACE_CALLS);
	for (i = 0; i < STEAL_RACE_CALLS; i++)
		knitk_call_release(c[i]);
	knitk_pool_destroy(pool);
}

static void steal_kill_during_drain(void)
{
	steal_kill_during_shutdown(KNITK_SHUTDOWN_DRAIN);
}

static void steal_kill_during_cancel(void)
{
	steal_kill_during_shutdown(KNITK_SHUTDOWN_CANCEL);
}

/* The i32 result of @c. */
static int call_i32(struct knitk_call *c, pid_t *v)
{
	const void *d;
	size_t len;
	int32_t x;

	if (knitk_call_result(c, &d, &len) || len != sizeof(x))
		return -1;
	memcpy(&x, d, sizeof(x));
	*v = x;
	return 0;
}

/*
 * A stopped searcher (docs/protocol.md T12, T14): in a stealing pool of
 * two, both parked, one call wakes worker 0 (the lowest idle), which runs
 * it and then searches (polls, a long spin) while worker 1 stays parked.
 * Worker 0 is stopped there - SIGSTOP for a process, a debugger's stop of
 * its thread - keeping its searching bit, so no publish wakes worker 1:
 * the calls submitted now completed only after worker 0 continued.  Now
 * the thread waiting for them hands them to worker 1 before it parks, and
 * that wake is never spurious.
 */
static void steal_stopped_claimant(unsigned int kind)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind,
				     .nr_workers = 2, .knot_flags = KNITK_KNOT_FUTEX,
				     .arena_bytes = ARENA, .spin = 1U << 20,
				     .dispatch = KNITK_POOL_DISPATCH_STEAL };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_call *first, *late[8];
	struct knitk_pool_stats st;
	struct knitk_endpoint *ep;
	struct knitk_pool *pool;
	unsigned int round, i, bad = 0, on1 = 0;
	pid_t pid = 0, tid = 0;
	uint64_t spurious = 0;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	REQUIRE(knitk_pool_endpoint(pool, &ep) == 0);
	if (kind == KNITK_WORKER_THREADS) {
		/* Worker 0's thread: the one a call to the parked pool wakes. */
		wait_workers_parked(ep, 2);
		REQUIRE(knitk_pool_submit(pool, T_TID, NULL, 0, NULL, &first) == 0);
		REQUIRE(knitk_call_wait(first, KNITK_WAIT_FOREVER) == 0);
		REQUIRE(call_i32(first, &tid) == 0);
		REQUIRE(knitk_call_worker(first) == 0);
		knitk_call_release(first);
		pid = getpid();
	} else {
		REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0 && wi.pid > 0);
		pid = tid = wi.pid;
	}
	for (round = 0; round < 4; round++) {
		struct freezer fz = { -1, -1, -1 };
		uint64_t x = 7000 + round;

		if (kind == KNITK_WORKER_THREADS)
			REQUIRE(freezer_start(&fz, tid) == 0);
		wait_workers_parked(ep, 2);
		/* A call to a parked pool goes to worker 0 (T12). */
		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &first) == 0);
		REQUIRE(knitk_call_wait(first, KNITK_WAIT_FOREVER) == 0);
		CHECK(mix_result_ok(first, x));
		CHECK_EQ(knitk_call_worker(first), 0);
		knitk_call_release(first);
		/* Worker 0 searches now: stop it there. */
		if (kind == KNITK_WORKER_THREADS)
			REQUIRE(freezer_freeze(&fz) == 0);
		else
			REQUIRE(kill(pid, SIGSTOP) == 0);
		while (!task_stopped(pid, tid))
			sched_yield();
		CHECK(worker_parked(ep, 1));
		for (i = 0; i < 8; i++) {
			x = round * 1000 + i;
			REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &late[i]) == 0);
		}
		/* Hung here before T14: worker 1 was never woken. */
		REQUIRE(knitk_pool_wait_all(pool, late, 8, KNITK_WAIT_FOREVER) == 0);
		for (i = 0; i < 8; i++) {
			bad += !mix_result_ok(late[i], round * 1000 + i);
			on1 += knitk_call_worker(late[i]) == 1;
			knitk_call_release(late[i]);
		}
		if (kind == KNITK_WORKER_THREADS)
			CHECK_EQ(freezer_thaw(&fz), 0);
		else
			CHECK_EQ(kill(pid, SIGCONT), 0);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(on1, 4 * 8);
	for (i = 0; i < 2; i++) {
		memset(&wi, 0, sizeof(wi));
		wi.size = sizeof(wi);
		REQUIRE(knitk_pool_worker_info(pool, i, &wi) == 0);
		if (wi.db_valid)
			spurious += wi.db.spurious;
	}
	/* Worker 1 was woken only with the calls handed to it. */
	CHECK_EQ(spurious, 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(pool);
}

static void steal_stopped_claimant_processes(void)
{
	steal_stopped_claimant(KNITK_WORKER_PROCESSES);
}

static void steal_stopped_claimant_threads(void)
{
	steal_stopped_claimant(KNITK_WORKER_THREADS);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(steal_kill_during_drain);
	TEST(steal_kill_during_cancel);
	TEST(steal_stopped_claimant_processes);
	TEST(steal_stopped_claimant_threads);
	return tap_exit();
}
