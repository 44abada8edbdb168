// SPDX-License-Identifier: GPL-2.0
/*
 * A thread waiting for a call whose process worker is SIGKILLed learns of
 * the death as soon as the death is handled, not after the respawn that
 * follows it (KNITK_POOL_RESPAWN).  The respawn is held at the test hook
 * POOL_HOOK_RESPAWN (a -DKNITK_TEST_HOOKS build) until the waiter has
 * returned: the waiter must return -EOWNERDEAD, attributed to the killed
 * worker, while the new worker is not even started.  Before the fix the
 * waiter itself, as the pool's drainer, ran the respawn: the hook then
 * found itself on the waiter's thread, where it cannot wait for the
 * waiter, and the case fails on a check rather than hanging.  Then the
 * successor serves calls and the pool counts one death and one respawn.
 *  - private: a call pinned to its worker (KNITK_CALL_WORKER).
 *  - steal: KNITK_POOL_DISPATCH_STEAL, the worker found by its pid.
 * The same with or without KNITK_POOL_RESPAWN, holding the completer at
 * POOL_HOOK_AFTERCARE instead, before it resets the dead worker's request
 * mailboxes and reaps it: the waiter returns before either.
 *
 * The waiter sleeps on its own call's word (docs/protocol.md R6): checked
 * through /proc before the kill.  On the futex backend the pool's drainer
 * parked on the host doorbell (the completer, while the waiter sleeps on
 * its word) is woken by the dying worker's own lifeline (P7), and the
 * waiter by the death's completion of its call, not through the lifeline
 * thread or the pidfd monitor: both are held at POOL_HOOK_NOTICE until
 * the waiter returned.  Before, the waiter heard
 * of the death only from them: it stayed parked while they were held,
 * and the hook let go after NOTICE_HOLD_S without it.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "tap.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "futex_asleep.h"
#include "../pool/pool_internal.h"
#include "../pool/slot.h"

enum { D_MIX, D_PARK, D_NR };

static const knitk_task_fn death_fns[D_NR] = { task_mix, task_park };
static const struct knitk_task_table death_tasks = {
	.tasks = death_fns, .nr_tasks = D_NR,
};

static struct knitk_call *parked;
static _Atomic int waiter_ret, waiter_returned;
static _Atomic int hook_calls, hook_held, returned_first;
static _Atomic int hold_point, hook_done;
static _Thread_local bool in_waiter;
static _Atomic pid_t waiter_tid;

static void *waiter_main(void *arg)
{
	(void)arg;
	in_waiter = true;
	atomic_store(&waiter_tid, futex_asleep_tid());
	atomic_store(&waiter_ret, knitk_call_wait(parked, KNITK_WAIT_FOREVER));
	atomic_store(&waiter_returned, 1);
	return NULL;
}

/*
 * Before the respawn of the killed worker, nothing held: hold it until
 * the waiter has returned.  On the waiter's own thread it cannot be held
 * (that would deadlock): the waiter did not return first then.
 */
static void hook_hold_respawn(struct knitk_pool *pool, enum pool_hook point,
			      unsigned int arg)
{
	(void)pool;
	(void)arg;
	if ((int)point != atomic_load(&hold_point))
		return;
	atomic_fetch_add(&hook_calls, 1);
	if (!in_waiter) {
		atomic_store(&hook_held, 1);
		while (!atomic_load(&waiter_returned))
			sched_yield();
		atomic_store(&returned_first, 1);
	}
	atomic_store(&hook_done, 1);
}

/*
 * Submit the call @parked that blocks in its task, once it runs: the
 * worker it runs on (2 if none is found), its pid in *@pid.
 */
static unsigned int submit_parked(struct knitk_pool *pool,
				  const struct knitk_call_opts *co, int pfd[2],
				  int32_t *pid)
{
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	int32_t fd = pfd[1];
	unsigned int w;

	*pid = 0;
	if (knitk_pool_submit(pool, D_PARK, &fd, sizeof(fd), co, &parked) ||
	    read(pfd[0], pid, sizeof(*pid)) != sizeof(*pid))
		return 2;
	for (w = 0; w < 2; w++)
		if (!knitk_pool_worker_info(pool, w, &wi) && wi.pid == *pid)
			return w;
	return 2;
}

static void death_wait(bool steal, bool respawn, enum pool_hook point)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		.flags = respawn ? KNITK_POOL_RESPAWN : 0,
		.dispatch = steal ? KNITK_POOL_DISPATCH_STEAL : KNITK_POOL_DISPATCH_PRIVATE,
	};
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER,
				       .worker = 1 };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	unsigned int victim;
	int32_t pid;
	unsigned long i, good = 0;
	int pfd[2];
	pthread_t th;

	atomic_store(&waiter_returned, 0);
	atomic_store(&waiter_tid, 0);
	atomic_store(&hook_calls, 0);
	atomic_store(&hook_held, 0);
	atomic_store(&returned_first, 0);
	atomic_store(&hold_point, (int)point);
	atomic_store(&hook_done, 0);
	REQUIRE(pipe(pfd) == 0);
	REQUIRE(knitk_pool_create(&o, &death_tasks, &pool) == 0);
	victim = submit_parked(pool, steal ? NULL : &pin, pfd, &pid);
	REQUIRE(victim < 2);
	if (!steal)
		CHECK_EQ(victim, 1);
	atomic_store(&knitk__test_hook, hook_hold_respawn);
	REQUIRE(pthread_create(&th, NULL, waiter_main, NULL) == 0);
	/* Parked: asleep on its own call's word (docs/protocol.md R6). */
	wait_asleep_on_futex(&waiter_tid, slot_low(&pool->slots[parked->entry]));
	CHECK_EQ(atomic_load(&waiter_returned), 0);
	kill(pid, SIGKILL);
	pthread_join(th, NULL);
	CHECK_EQ(atomic_load(&waiter_ret), -EOWNERDEAD);
	CHECK_EQ(knitk_call_worker(parked), victim);
	/* The successor: the hook ran once, held the respawn, and let go. */
	wait_deaths(pool, 1, respawn);
	/* Without a respawn, nothing after the hook to wait for. */
	while (!atomic_load(&hook_done))
		sched_yield();
	atomic_store(&knitk__test_hook, NULL);
	CHECK_EQ(atomic_load(&hook_calls), 1);
	/* Failed here before the fix: the respawn ran on the waiter's thread. */
	CHECK_EQ(atomic_load(&hook_held), 1);
	CHECK_EQ(atomic_load(&returned_first), 1);
	pin.worker = respawn ? victim : 1 - victim;
	for (i = 0; i < 64; i++) {
		uint64_t x = i * 977 + 3, y = 0;
		size_t len = 0;

		if (knitk_pool_call(pool, D_MIX, &x, 8, steal ? NULL : &pin, &y, 8,
				    &len) == 0 && len == 8 && y == mix64(x))
			good++;
	}
	CHECK_EQ(good, 64);
	knitk_pool_worker_info(pool, victim, &wi);
	if (respawn) {
		CHECK(wi.pid > 0 && wi.pid != pid);
		CHECK_EQ(wi.alive, 1);
	} else {
		CHECK_EQ(wi.alive, 0);
	}
	knitk_pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 1);
	CHECK_EQ(st.respawns, respawn ? 1 : 0);
	CHECK_EQ(st.ownerdead, 1);
	knitk_call_release(parked);
	knitk_pool_destroy(pool);
	close(pfd[0]);
	close(pfd[1]);
}

/* How long the notices are held at most: far past any kill's delivery. */
#define NOTICE_HOLD_S	30

static time_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

/* Hold every notice of the lifeline thread and the monitor. */
static void hook_hold_notice(struct knitk_pool *pool, enum pool_hook point,
			     unsigned int arg)
{
	time_t until = now_s() + NOTICE_HOLD_S;

	(void)pool;
	(void)arg;
	if (point != POOL_HOOK_NOTICE)
		return;
	atomic_fetch_add(&hook_calls, 1);
	while (!atomic_load(&waiter_returned) && now_s() < until)
		sched_yield();
	if (!atomic_load(&waiter_returned))
		atomic_store(&hook_held, 1);	/* gave up: the waiter slept on */
	atomic_fetch_add(&hook_done, 1);
}

static void notice_wait(bool steal)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		.dispatch = steal ? KNITK_POOL_DISPATCH_STEAL : KNITK_POOL_DISPATCH_PRIVATE,
	};
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER,
				       .worker = 1 };
	struct knitk_endpoint *ep;
	struct knitk_pool *pool;
	unsigned int victim;
	int32_t pid;
	int pfd[2];
	pthread_t th;

	atomic_store(&waiter_returned, 0);
	atomic_store(&waiter_tid, 0);
	atomic_store(&hook_calls, 0);
	atomic_store(&hook_held, 0);
	atomic_store(&hook_done, 0);
	REQUIRE(pipe(pfd) == 0);
	REQUIRE(knitk_pool_create(&o, &death_tasks, &pool) == 0);
	REQUIRE(knitk_pool_endpoint(pool, &ep) == 0);
	if (knitk_endpoint_backend(ep) != KNITK_BACKEND_FUTEX) {
		knitk_pool_destroy(pool);
		close(pfd[0]);
		close(pfd[1]);
		SKIP("the module sees deaths itself: no lifelines");
	}
	victim = submit_parked(pool, steal ? NULL : &pin, pfd, &pid);
	REQUIRE(victim < 2);
	atomic_store(&knitk__test_hook, hook_hold_notice);
	REQUIRE(pthread_create(&th, NULL, waiter_main, NULL) == 0);
	wait_asleep_on_futex(&waiter_tid, slot_low(&pool->slots[parked->entry]));
	kill(pid, SIGKILL);
	pthread_join(th, NULL);
	CHECK_EQ(atomic_load(&waiter_ret), -EOWNERDEAD);
	CHECK_EQ(knitk_call_worker(parked), victim);
	/*
	 * A notice the waiter's own report went ahead of never reaches the
	 * hook; one that did let go once the waiter returned.  The destroy
	 * joins both threads: no hook runs after it.
	 */
	knitk_call_release(parked);
	knitk_pool_destroy(pool);
	atomic_store(&knitk__test_hook, NULL);
	CHECK_EQ(atomic_load(&hook_done), atomic_load(&hook_calls));
	CHECK_EQ(atomic_load(&hook_held), 0);
	close(pfd[0]);
	close(pfd[1]);
}

/* Lifelines: the futex backend on a kernel with futex_waitv (5.16). */
static void lifeline_wakes_waiter(void)
{
	if (syscall(449 /* futex_waitv */, NULL, 0, 0, NULL, 0) == 0 || errno == ENOSYS)
		SKIP("no futex_waitv: no lifelines");
	notice_wait(false);
	notice_wait(true);
}

static void private_wait(void)
{
	death_wait(false, true, POOL_HOOK_RESPAWN);
}

static void steal_wait(void)
{
	death_wait(true, true, POOL_HOOK_RESPAWN);
}

static void private_wait_before_reset(void)
{
	death_wait(false, false, POOL_HOOK_AFTERCARE);
	death_wait(false, true, POOL_HOOK_AFTERCARE);
}

static void steal_wait_before_reap(void)
{
	death_wait(true, false, POOL_HOOK_AFTERCARE);
	death_wait(true, true, POOL_HOOK_AFTERCARE);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &death_tasks, NULL))
		return 2;
	TEST(private_wait);
	TEST(steal_wait);
	TEST(private_wait_before_reset);
	TEST(steal_wait_before_reap);
	TEST(lifeline_wakes_waiter);
	return tap_exit();
}
