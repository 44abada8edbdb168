// SPDX-License-Identifier: GPL-2.0
/*
 * Stops and signals are no deaths: a stopped worker is not dead, the CPU
 * affinity flipping under the callers loses nothing, and signals during
 * every blocking pool call leave it to finish with its result.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

/*
 * A process worker stopped (SIGSTOP) with a call pinned to it: the call
 * stays in progress while the other worker serves calls, the stopped one
 * is not taken for dead, and after SIGCONT its call completes with its
 * result.
 */
static void stopped_worker_is_not_dead(void)
{
	struct knitk_pool_opts o = { .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
				     .arena_bytes = ARENA };
	struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER,
				      .worker = 0 };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint64_t x = 99, y;
	siginfo_t si;
	size_t len;
	unsigned int i;
	pid_t pid;

	REQUIRE(opts_pool(&o, &pool) == 0);
	REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0);
	pid = wi.pid;
	REQUIRE(pid > 0);
	REQUIRE(kill(pid, SIGSTOP) == 0);
	/* Stopped for sure: the stop is reported to its parent, the pool. */
	memset(&si, 0, sizeof(si));
	REQUIRE(waitid(P_PID, (id_t)pid, &si, WSTOPPED | WNOWAIT) == 0);
	CHECK_EQ(si.si_code, CLD_STOPPED);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, &co, &c) == 0);
	co.worker = 1;
	for (i = 0; i < 50; i++) {
		uint64_t v = i;

		CHECK_EQ(knitk_pool_call(pool, T_MIX, &v, 8, &co, &y, 8, &len), 0);
		CHECK(y == mix64(v));
	}
	CHECK_EQ(knitk_call_wait(c, 0), -EINPROGRESS);
	REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0);
	CHECK_EQ(wi.alive, 1);
	CHECK_EQ(wi.pid, pid);
	REQUIRE(kill(pid, SIGCONT) == 0);
	CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), 0);
	CHECK(mix_result_ok(c, x));
	knitk_call_release(c);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.ownerdead, 0);
	knitk_pool_destroy(pool);
}

/* Sets the affinity of every thread of this process and of @pids. */
static void pin_all(const cpu_set_t *set, const pid_t *pids, unsigned int n)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned int i;

	if (d) {
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				sched_setaffinity(atoi(e->d_name), sizeof(*set), set);
		closedir(d);
	}
	for (i = 0; i < n; i++)
		sched_setaffinity(pids[i], sizeof(*set), set);
}

struct caller {
	struct knitk_pool *pool;
	_Atomic unsigned int *flips;
	_Atomic unsigned long done;
	unsigned long bad, n;
};

/* Calls per affinity flip: each caller waits for the next flip after them. */
#define CALLS_PER_FLIP	50

static void *caller_main(void *arg)
{
	struct caller *c = arg;
	unsigned long i;

	for (i = 0; i < c->n; i++) {
		uint64_t x = i * 7919, y = 0;
		size_t len = 0;

		while (atomic_load(c->flips) <= i / CALLS_PER_FLIP)
			sched_yield();
		if (knitk_pool_call(c->pool, T_MIX, &x, 8, NULL, &y, 8, &len) ||
		    len != 8 || y != mix64(x))
			c->bad++;
		atomic_store(&c->done, i + 1);
	}
	return NULL;
}

/*
 * The spin policy reads the CPUs the process may use at start; the whole
 * process (and its process workers) pinned to one CPU and let go again,
 * every 50 calls of each of two calling threads: every call completes by
 * content (a worker that spins for a peer that cannot run would hang).
 */
static void affinity_flips(unsigned int kind, unsigned int dispatch)
{
	struct knitk_pool_opts o = { .kind = kind, .nr_workers = 2, .arena_bytes = ARENA,
				     .dispatch = dispatch };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	_Atomic unsigned int flips = 0;
	struct knitk_pool *pool;
	struct caller c[2];
	cpu_set_t orig, one;
	pthread_t t[2];
	pid_t pids[2];
	unsigned int i, np = 0, f;

	REQUIRE(sched_getaffinity(0, sizeof(orig), &orig) == 0);
	if (CPU_COUNT(&orig) < 2)
		SKIP("one CPU only: nothing to take away");
	CPU_ZERO(&one);
	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &orig)) {
			CPU_SET(i, &one);
			break;
		}
	REQUIRE(opts_pool(&o, &pool) == 0);
	for (i = 0; i < 2 && kind == KNITK_WORKER_PROCESSES; i++)
		if (!knitk_pool_worker_info(pool, i, &wi) && wi.pid > 0)
			pids[np++] = wi.pid;
	for (i = 0; i < 2; i++) {
		c[i].pool = pool;
		c[i].flips = &flips;
		c[i].n = 1000;
		c[i].bad = 0;
		atomic_init(&c[i].done, 0);
		REQUIRE(pthread_create(&t[i], NULL, caller_main, &c[i]) == 0);
	}
	for (f = 0; f <= 1000 / CALLS_PER_FLIP; f++) {
		unsigned long want = (unsigned long)f * CALLS_PER_FLIP;

		/* Both callers are through the calls of the last flip. */
		for (i = 0; i < 2; i++)
			while (atomic_load(&c[i].done) < want)
				sched_yield();
		pin_all(f & 1 ? &orig : &one, pids, np);
		atomic_store(&flips, f + 1);
	}
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pin_all(&orig, pids, np);
	CHECK_EQ(c[0].bad + c[1].bad, 0);
	CHECK_EQ(atomic_load(&c[0].done) + atomic_load(&c[1].done), 2000);
	knitk_pool_destroy(pool);
}

static void affinity_flips_threads_private(void)
{
	affinity_flips(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE);
}

static void affinity_flips_threads_steal(void)
{
	affinity_flips(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL);
}

static void affinity_flips_processes_steal(void)
{
	affinity_flips(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL);
}

static _Atomic unsigned long usr1_seen;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&usr1_seen, 1);
}

/* What a blocked thread does while it is signalled. */
enum { OP_WAIT, OP_WAIT_ALL, OP_WAIT_ANY, OP_DRAIN };

struct blocked {
	struct knitk_pool *pool;
	struct knitk_call *gated;
	int op;
	_Atomic int stage;	/* 1: about to block, 2: returned */
	_Atomic pid_t tid;
	int ret;
};

static void *blocked_main(void *arg)
{
	struct blocked *b = arg;

	atomic_store(&b->tid, gettid());
	atomic_store(&b->stage, 1);
	switch (b->op) {
	case OP_WAIT:
		b->ret = knitk_call_wait(b->gated, KNITK_WAIT_FOREVER);
		break;
	case OP_WAIT_ALL:
		b->ret = knitk_pool_wait_all(b->pool, &b->gated, 1, KNITK_WAIT_FOREVER);
		break;
	case OP_WAIT_ANY:
		b->ret = knitk_pool_wait_any(b->pool, &b->gated, 1, KNITK_WAIT_FOREVER);
		break;
	default:
		b->ret = knitk_pool_shutdown(b->pool, KNITK_SHUTDOWN_DRAIN);
		break;
	}
	atomic_store(&b->stage, 2);
	return NULL;
}

/*
 * A thread blocked in a pool call that waits for a call held in its task
 * (T_GATE), signalled again and again (SIGUSR1 without SA_RESTART): the
 * call returns only once the held call has completed, with what it
 * promises (no -EINTR, no -EINPROGRESS before a deadline that never
 * comes); the held call completes with its result, not cancelled.
 */
static void signals_in_blocking_call(int op, int want)
{
	struct knitk_pool_opts o = { .nr_workers = 1, .arena_bytes = ARENA };
	struct sigaction sa = { .sa_handler = on_usr1 }, old;
	struct blocked b = { .op = op };
	unsigned long before, sends;
	struct gate g;
	pthread_t t;

	REQUIRE(gate_open(&g) == 0);
	g.arg.n = 3;
	sigemptyset(&sa.sa_mask);
	REQUIRE(sigaction(SIGUSR1, &sa, &old) == 0);
	REQUIRE(opts_pool(&o, &b.pool) == 0);
	REQUIRE(knitk_pool_submit(b.pool, T_GATE, &g.arg, sizeof(g.arg), NULL, &b.gated) == 0);
	REQUIRE(gate_wait(&g, 'r') == 0);
	REQUIRE(pthread_create(&t, NULL, blocked_main, &b) == 0);
	while (atomic_load(&b.stage) < 1)
		sched_yield();
	/*
	 * At least 20 handlers run in the thread while it is blocked.  TSan
	 * runs a handler only when the thread enters an intercepted call,
	 * which a thread parked in the library's futex wait does not: there
	 * the sends are bounded and the count is not asserted.
	 */
	before = atomic_load(&usr1_seen);
	for (sends = 0; sends < 1000000 && atomic_load(&usr1_seen) < before + 20 &&
	     atomic_load(&b.stage) < 2; sends++)
		if (syscall(SYS_tgkill, getpid(), atomic_load(&b.tid), SIGUSR1))
			break;
#ifndef __SANITIZE_THREAD__
	CHECK(atomic_load(&usr1_seen) >= before + 20);
#endif
	CHECK(atomic_load(&b.stage) < 2);
	CHECK_EQ(knitk_call_status(b.gated), -EINPROGRESS);
	REQUIRE(gate_release(&g) == 0);
	pthread_join(t, NULL);
	CHECK_EQ(b.ret, want);
	CHECK_EQ(knitk_call_wait(b.gated, 0), 3);
	knitk_call_release(b.gated);
	knitk_pool_destroy(b.pool);
	sigaction(SIGUSR1, &old, NULL);
	gate_close(&g);
}

static void signals_in_call_wait(void)
{
	signals_in_blocking_call(OP_WAIT, 3);
}

static void signals_in_wait_all(void)
{
	signals_in_blocking_call(OP_WAIT_ALL, 0);
}

static void signals_in_wait_any(void)
{
	signals_in_blocking_call(OP_WAIT_ANY, 0);
}

static void signals_in_drain(void)
{
	signals_in_blocking_call(OP_DRAIN, 0);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(stopped_worker_is_not_dead);
	TEST(affinity_flips_threads_private);
	TEST(affinity_flips_threads_steal);
	TEST(affinity_flips_processes_steal);
	TEST(signals_in_call_wait);
	TEST(signals_in_wait_all);
	TEST(signals_in_wait_any);
	TEST(signals_in_drain);
	return tap_exit();
}
