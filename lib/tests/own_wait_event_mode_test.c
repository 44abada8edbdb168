// SPDX-License-Identifier: GPL-2.0
/*
 * A thread already waiting in knitk_call_wait when the pool switches to
 * event mode (knitk_pool_event_fd): its call's result must still reach
 * the event loop the way knitk_pool.h promises for event mode: the armed
 * fd fires for the result, and knitk_pool_reap returns the call, whose
 * result is its own.  Thread workers (the only kind with an event fd on
 * the futex backend), private lanes and stealing, results that fit a
 * call's result box and one that does not.  Every wait is bounded.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "tap.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "fixtures.h"
#include "futex_asleep.h"
#include "../pool/pool_internal.h"
#include "../pool/slot.h"

struct waiter {
	pthread_t thread;
	struct knitk_call *call;
	_Atomic pid_t tid;
	_Atomic int done;
	int ret;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	atomic_store(&w->tid, futex_asleep_tid());
	w->ret = knitk_call_wait(w->call, after_ms(10000));
	atomic_store(&w->done, 1);
	return NULL;
}

/*
 * A T_GATE call of @n bytes waited for by a thread of its own, the task
 * started and the thread asleep on its call's word (docs/protocol.md R6);
 * then event mode, a reap that arms the fd, the task let go: the fd fires
 * and a reap returns the call with its @n bytes.
 */
static void switched_in(const struct pool_shape *sh, uint32_t n)
{
	struct waiter w = { 0 };
	struct knitk_pool *pool;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	struct knitk_call *got[4];
	struct gate g;
	const void *d;
	size_t len;
	int fd, ep, fired, reaped = 0, i;
	uint64_t end;

	printf("# %s, %u bytes\n", sh->name, (unsigned int)n);
	REQUIRE(gate_open(&g) == 0);
	REQUIRE(new_pool(sh->kind, sh->dispatch, 2, 0, &pool) == 0);
	g.arg.n = n;
	REQUIRE(knitk_pool_submit(pool, T_GATE, &g.arg, sizeof(g.arg), NULL, &w.call) == 0);
	REQUIRE(gate_wait(&g, 'r') == 0);
	REQUIRE(pthread_create(&w.thread, NULL, waiter_main, &w) == 0);
	/* Asleep on its call's word, past any spin. */
	wait_asleep_on_futex(&w.tid, slot_low(&pool->slots[w.call->entry]));
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	ep = epoll_create1(0);
	REQUIRE(ep >= 0);
	ev.data.fd = fd;
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	/* Arm the fd: nothing to reap yet. */
	CHECK_EQ(reap_all(pool, NULL, 0, NULL), 0);
	CHECK_EQ(gate_release(&g), 0);
	REQUIRE(gate_wait(&g, 'd') == 0);
	/* Bounded: the hang detector, the fd fires at once. */
	fired = epoll_wait(ep, &ev, 1, HANG_MS);
	CHECK_EQ(fired, 1);
	/* Reap it (bounded), whatever the fd did. */
	end = now_ms() + HANG_MS;
	while (!reaped && now_ms() < end) {
		int k = knitk_pool_reap(pool, got, 4);

		for (i = 0; i < k; i++) {
			if (got[i] == w.call)
				reaped++;
			else
				printf("# reaped a foreign handle\n");
		}
		if (!reaped)
			sleep_us(1000);
	}
	CHECK_EQ(reaped, 1);
	end = now_ms() + 12000;
	while (!atomic_load(&w.done) && now_ms() < end)
		sleep_us(1000);
	REQUIRE(atomic_load(&w.done));
	pthread_join(w.thread, NULL);
	CHECK_EQ(w.ret, (int)n);
	CHECK_EQ(knitk_call_result(w.call, &d, &len), 0);
	CHECK_EQ(len, n);
	for (i = 0; i < (int)len; i++)
		if (((const char *)d)[i] != 'g')
			break;
	CHECK_EQ(i, (int)n);
	knitk_call_release(w.call);
	close(ep);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

static void switched_all(void)
{
	static const uint32_t ns[] = { 16, 120, 121, 3000 };
	unsigned int i, k;

	for (i = 0; i < 2; i++)
		for (k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
			switched_in(&pool_shapes[i], ns[k]);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	if (tests_init(argc, argv, false))
		return 1;
	alarm(300);
	tap_run("event_fd_fires_for_a_waited_result", switched_all);
	return tap_exit();
}
