// SPDX-License-Identifier: GPL-2.0
/*
 * knitk_pool_destroy while another thread waits on a call: the waiter
 * returns with its call completed, and the destroy frees nothing that
 * thread still uses, whether it waits on its call's own word
 * (knitk_call_wait, docs/protocol.md R6) or as the pool's drainer
 * (knitk_pool_wait_any).  The narrow case: the waiting thread holds the
 * drainer role and is handling a worker's death, after which no worker is
 * left and the completer exits, so the destroy goes on to its teardown.
 * The pool's hook (pool_hooks.h) holds the waiter there, in the death
 * handler before its mailbox reset, until the destroy tears down the host's consumers (the
 * defect: a --wrap of knitk_consumer_destroy sees it, and the test ends
 * before the waiter touches the freed pool) or, when the destroy waits
 * for the role as it must, for HOLD_NS, and goes on.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"
#include "futex_asleep.h"
#include "../pool/pool_internal.h"
#include "../pool/slot.h"

#define HOLD_NS		500000000ULL

static _Thread_local bool is_waiter;
static _Atomic int waiter_parked, armed, hooked, destroying, torn_down;

int __real_knitk_doorbell_prepare(struct knitk_endpoint *knot, uint32_t *seq);
void __real_knitk_consumer_destroy(struct knitk_consumer *consumer);

/* The waiter parks as the drainer (only the role's holder parks here). */
int __wrap_knitk_doorbell_prepare(struct knitk_endpoint *knot, uint32_t *seq)
{
	if (is_waiter)
		atomic_store(&waiter_parked, 1);
	return __real_knitk_doorbell_prepare(knot, seq);
}

/* In the death handler, on the thread that drains: hold it there. */
static void hook_hold_death(struct knitk_pool *pool, enum pool_hook point,
			    unsigned int arg)
{
	uint64_t until;

	(void)pool;
	(void)arg;
	if (point != POOL_HOOK_RESET || !is_waiter || !atomic_exchange(&armed, 0))
		return;
	atomic_store(&hooked, 1);
	while (!atomic_load(&destroying))
		sched_yield();
	until = tap_now_ns() + HOLD_NS;
	while (!atomic_load(&torn_down) && tap_now_ns() < until)
		sched_yield();
	atomic_store(&hooked, 0);
	if (atomic_load(&torn_down)) {
		/* Going on would use the freed pool. */
		printf("not ok - destroy_during_death: the pool was torn down under its drainer\n");
		fflush(stdout);
		_exit(1);
	}
}

/* The destroy's teardown while the waiter is still held in the drain. */
void __wrap_knitk_consumer_destroy(struct knitk_consumer *consumer)
{
	if (atomic_load(&hooked))
		atomic_store(&torn_down, 1);
	__real_knitk_consumer_destroy(consumer);
}

struct waiter {
	struct knitk_call *call;
	struct knitk_pool *pool;
	bool any;		/* knitk_pool_wait_any: the drainer's way */
	_Atomic pid_t tid;
	int status;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	is_waiter = true;
	atomic_store(&w->tid, futex_asleep_tid());
	if (!w->any) {
		w->status = knitk_call_wait(w->call, KNITK_WAIT_FOREVER);
	} else {
		w->status = knitk_pool_wait_any(w->pool, &w->call, 1, KNITK_WAIT_FOREVER);
		if (!w->status)
			w->status = knitk_call_status(w->call);
	}
	return NULL;
}

/* The waiter handles its worker's death when the destroy starts. */
static void destroy_during_death(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = KNITK_WORKER_PROCESSES,
				     .nr_workers = 1, .nr_submitters = 1 };
	struct knitk_pool *pool;
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct waiter w = { .any = true };
	uint32_t ms = 60000;
	pthread_t th;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	w.pool = pool;
	REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &w.call) == 0);
	REQUIRE(pthread_create(&th, NULL, waiter_main, &w) == 0);
	while (!atomic_load(&waiter_parked))
		sched_yield();
	atomic_store(&armed, 1);
	atomic_store(&knitk__test_hook, hook_hold_death);
	CHECK_EQ(kill(wi.pid, SIGKILL), 0);
	while (!atomic_load(&hooked))
		sched_yield();
	atomic_store(&destroying, 1);
	knitk_pool_destroy(pool);
	pthread_join(th, NULL);
	atomic_store(&knitk__test_hook, NULL);
	CHECK_EQ(atomic_load(&torn_down), 0);
	CHECK_EQ(w.status, -EOWNERDEAD);
	CHECK_EQ(knitk_call_status(w.call), -EOWNERDEAD);
	knitk_call_release(w.call);
}

/*
 * A thread waiting forever when the destroy starts: its call is cancelled.
 * @any: it waits as the drainer, parked on the host doorbell; else asleep
 * on its call's own word, which the destroy must not unmap under it.
 */
static void destroy_with_waiter(unsigned int kind, bool any)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind, .nr_workers = 2 };
	struct knitk_pool *pool;
	struct waiter w = { .any = any };
	uint32_t ms = 60000;
	pthread_t th;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	w.pool = pool;
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &w.call) == 0);
	atomic_store(&waiter_parked, 0);
	REQUIRE(pthread_create(&th, NULL, waiter_main, &w) == 0);
	if (any) {
		while (!atomic_load(&waiter_parked))
			sched_yield();
	} else {
		wait_asleep_on_futex(&w.tid, slot_low(&pool->slots[w.call->entry]));
	}
	knitk_pool_destroy(pool);
	pthread_join(th, NULL);
	CHECK_EQ(w.status, -ECANCELED);
	knitk_call_release(w.call);
}

static void destroy_with_waiter_threads(void)
{
	destroy_with_waiter(KNITK_WORKER_THREADS, false);
	destroy_with_waiter(KNITK_WORKER_THREADS, true);
}

static void destroy_with_waiter_processes(void)
{
	destroy_with_waiter(KNITK_WORKER_PROCESSES, false);
	destroy_with_waiter(KNITK_WORKER_PROCESSES, true);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	TEST(destroy_during_death);
	TEST(destroy_with_waiter_threads);
	TEST(destroy_with_waiter_processes);
	return tap_exit();
}
