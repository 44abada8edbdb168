// SPDX-License-Identifier: GPL-2.0
/*
 * The libknitk worker pool on the module: process workers that get the
 * knot by fd inheritance, crash attribution from the kernel's dead bit and
 * death_seq (with and without respawn), shutdown, the idle-lane cost
 * read from the kernel's per-doorbell STATS, and worker deaths with
 * respawn (pool_kill.h: the kill storm, a torn acknowledgement, pidfds,
 * reaping while signals interrupt the pool's threads); a stopped worker
 * is not dead, and a caller's wait under signals returns only with its
 * call's status.  Small counts: the guest runs under TCG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_pool.h"
#include "knitk_pool_guest.h"
#include "../../lib/tests/pool_kill.h"
#include "../../lib/tests/backpressure.h"
#include "knitk_live.h"

#define THREADS	4
#define WINDOW	16

struct load {
	struct knitk_pool *pool;
	_Atomic int stop;
	_Atomic int killed;
	_Atomic unsigned long ok, dead, bad, canceled;
	bool cancel_ok;
};

static void *load_thread(void *arg)
{
	struct load *l = arg;
	struct knitk_call *c[WINDOW];
	uint64_t x[WINDOW];
	uint32_t ms = 1;
	unsigned int i, n;

	while (!atomic_load(&l->stop)) {
		for (n = 0; n < WINDOW; n++) {
			x[n] = mix64((uintptr_t)&c + n + atomic_load(&l->ok));
			if (knitk_pool_submit(l->pool, n % 4 ? T_MIX : T_SLEEP,
					      n % 4 ? (void *)&x[n] : (void *)&ms,
					      n % 4 ? 8 : 4, NULL, &c[n]))
				break;
		}
		if (n)
			knitk_pool_wait_all(l->pool, c, n, KNITK_WAIT_FOREVER);
		for (i = 0; i < n; i++) {
			int st = knitk_call_status(c[i]);

			if (st == -EOWNERDEAD &&
			    knitk_call_worker(c[i]) == atomic_load(&l->killed))
				atomic_fetch_add(&l->dead, 1);
			else if (st == -ECANCELED && l->cancel_ok)
				atomic_fetch_add(&l->canceled, 1);
			else if (i % 4 == 0 && st == 1)
				atomic_fetch_add(&l->ok, 1);
			else if (i % 4 && st == 0 && mix_result_ok(c[i], x[i]))
				atomic_fetch_add(&l->ok, 1);
			else
				atomic_fetch_add(&l->bad, 1);
			knitk_call_release(c[i]);
		}
		if (n < WINDOW)
			break;
	}
	return NULL;
}

static unsigned long calls_checked(struct knitk_pool *pool, unsigned long n,
				   const struct knitk_call_opts *co)
{
	return mix_calls_good(pool, n, co, 7, 31);
}

static void run_load(struct load *l, pthread_t *th)
{
	unsigned int i;

	for (i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, load_thread, l);
}

static void join_load(struct load *l, pthread_t *th)
{
	unsigned int i;

	atomic_store(&l->stop, 1);
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
}

TEST(process_calls)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
				     .knot_flags = KNITK_KNOT_KMOD };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct load l = { 0 };
	struct knitk_endpoint *knot;
	pthread_t th[THREADS];

	REQUIRE_KNITK();
	atomic_store(&l.killed, -1);
	ASSERT_EQ(0, knitk_pool_create(&o, &test_tasks, &l.pool));
	ASSERT_EQ(0, knitk_pool_endpoint(l.pool, &knot));
	ASSERT_EQ(KNITK_BACKEND_KMOD, knitk_endpoint_backend(knot));
	run_load(&l, th);
	wait_ok_count(&l.ok, &l.bad, 2000);
	join_load(&l, th);
	EXPECT_EQ(0, atomic_load(&l.bad));
	EXPECT_EQ(0, knitk_pool_stats(l.pool, &st));
	EXPECT_EQ(st.submitted, st.completed);
	EXPECT_EQ(0, st.stale);
	EXPECT_EQ(0, knitk_pool_shutdown(l.pool, KNITK_SHUTDOWN_DRAIN));
	knitk_pool_destroy(l.pool);
}

static void crash(struct __test_metadata *_metadata, bool respawn)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 3,
				     .knot_flags = KNITK_KNOT_KMOD,
				     .flags = respawn ? KNITK_POOL_RESPAWN : 0 };
	struct knitk_call_opts pin = { .size = sizeof(pin),
				       .flags = KNITK_CALL_WORKER, .worker = 1 };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct load l = { 0 };
	pthread_t th[THREADS];
	struct knitk_call *c, *held;
	uint32_t long_ms = 600000;
	unsigned int i;
	pid_t victim;

	atomic_store(&l.killed, -1);
	ASSERT_EQ(0, knitk_pool_create(&o, &test_tasks, &l.pool));
	run_load(&l, th);
	wait_ok_count(&l.ok, &l.bad, 500);
	/* The load may leave worker 1 idle: make sure it holds a call. */
	ASSERT_EQ(0, knitk_pool_submit(l.pool, T_SLEEP, &long_ms, 4, &pin, &held));
	ASSERT_EQ(0, knitk_pool_worker_info(l.pool, 1, &wi));
	victim = wi.pid;
	atomic_store(&l.killed, 1);
	kill(victim, SIGKILL);
	for (;;) {
		knitk_pool_stats(l.pool, &st);
		if (st.deaths == 1 && (!respawn || st.respawns == 1))
			break;
		sched_yield();
	}
	wait_ok_count(&l.ok, &l.bad, atomic_load(&l.ok) + 500);
	join_load(&l, th);
	EXPECT_EQ(-EOWNERDEAD, knitk_call_wait(held, KNITK_WAIT_FOREVER));
	knitk_call_release(held);
	knitk_pool_stats(l.pool, &st);
	TH_LOG("%lu ok, %lu -EOWNERDEAD, %lu bad", atomic_load(&l.ok),
	       atomic_load(&l.dead), atomic_load(&l.bad));
	EXPECT_EQ(0, atomic_load(&l.bad));
	EXPECT_EQ(st.ownerdead, atomic_load(&l.dead) + 1);
	EXPECT_EQ(2000, calls_checked(l.pool, 2000, NULL));
	ASSERT_EQ(0, knitk_pool_worker_info(l.pool, 1, &wi));
	if (respawn) {
		EXPECT_EQ(1, wi.alive);
		EXPECT_NE(victim, wi.pid);
		EXPECT_EQ(200, calls_checked(l.pool, 200, &pin));
	} else {
		EXPECT_EQ(0, wi.alive);
		EXPECT_EQ(-EPIPE, knitk_pool_submit(l.pool, T_MIX, "12345678", 8,
						    &pin, &c));
	}
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, knitk_pool_worker_info(l.pool, i, &wi));
		EXPECT_EQ(0, wi.inflight);
	}
	knitk_pool_stats(l.pool, &st);
	EXPECT_EQ(st.submitted, st.completed);
	EXPECT_EQ(0, knitk_pool_shutdown(l.pool, KNITK_SHUTDOWN_DRAIN));
	knitk_pool_destroy(l.pool);
}

TEST(crash_no_respawn)
{
	REQUIRE_KNITK();
	crash(_metadata, false);
}

TEST(crash_respawn)
{
	REQUIRE_KNITK();
	crash(_metadata, true);
}

TEST(shutdown_cancel_processes)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
				     .knot_flags = KNITK_KNOT_KMOD };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct load l = { .cancel_ok = true };
	pthread_t th[THREADS];
	unsigned int i;

	REQUIRE_KNITK();
	atomic_store(&l.killed, -1);
	ASSERT_EQ(0, knitk_pool_create(&o, &test_tasks, &l.pool));
	run_load(&l, th);
	wait_ok_count(&l.ok, &l.bad, 500);
	EXPECT_EQ(0, knitk_pool_shutdown(l.pool, KNITK_SHUTDOWN_CANCEL));
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	knitk_pool_stats(l.pool, &st);
	EXPECT_EQ(0, atomic_load(&l.bad));
	EXPECT_EQ(st.submitted, st.completed);
	EXPECT_EQ(st.submitted, atomic_load(&l.ok) + atomic_load(&l.canceled));
	knitk_pool_destroy(l.pool);
}

TEST(idle_lanes)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 8, .spin = 1,
				     .knot_flags = KNITK_KNOT_KMOD };
	struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER, .worker = 3 };
	struct knitk_worker_info before[8], after[8];
	struct knitk_pool *pool;
	unsigned int w;

	REQUIRE_KNITK();
	ASSERT_EQ(0, knitk_pool_create(&o, &test_tasks, &pool));
	for (w = 0; w < 8; w++) {
		before[w].size = sizeof(before[w]);
		ASSERT_EQ(0, knitk_pool_worker_info(pool, w, &before[w]));
		ASSERT_EQ(1, before[w].db_valid);
	}
	EXPECT_EQ(500, calls_checked(pool, 500, &co));
	for (w = 0; w < 8; w++) {
		after[w].size = sizeof(after[w]);
		ASSERT_EQ(0, knitk_pool_worker_info(pool, w, &after[w]));
		printf("# doorbell %u: calls %llu waits %llu wakes %llu spurious %llu suppressed idle %llu awake %llu\n",
		       w, (unsigned long long)after[w].calls,
		       (unsigned long long)after[w].db.waits,
		       (unsigned long long)after[w].db.wakes,
		       (unsigned long long)after[w].db.spurious,
		       (unsigned long long)after[w].db.suppressed_idle,
		       (unsigned long long)after[w].db.suppressed_awake);
		if (w == 3)
			continue;
		EXPECT_EQ(0, after[w].calls);
		EXPECT_EQ(before[w].db.wakes, after[w].db.wakes);
		EXPECT_EQ(before[w].db.spurious, after[w].db.spurious);
		EXPECT_GE(before[w].db.waits + 1, after[w].db.waits);
	}
	EXPECT_EQ(500, after[3].calls);
	EXPECT_EQ(0, after[3].db.spurious);
	knitk_pool_destroy(pool);
}

static void storm_kmod(struct __test_metadata *_metadata,
		       unsigned int workers, unsigned int kills,
		       unsigned int dispatch)
{
	struct storm_report r;

	storm_pool(workers, 3, kills, KNITK_KNOT_KMOD, dispatch, &r);
	ASSERT_EQ(0, r.created);
	EXPECT_EQ(kills, r.kills);
	EXPECT_EQ(0, r.bad);
	EXPECT_EQ(0, r.wrong);
	EXPECT_EQ(0, r.twice);
	EXPECT_EQ(r.calls, r.ok + r.dead);
	EXPECT_EQ(0, r.epipe);
	EXPECT_LT(0, r.ok);
	EXPECT_EQ(50 * workers, r.served);
	EXPECT_EQ(r.kills, r.st.deaths);
	EXPECT_EQ(r.kills, (uint32_t)(r.death_seq[1] - r.death_seq[0]));
	EXPECT_EQ(r.kills, r.st.respawns);
	EXPECT_EQ(r.dead, r.st.ownerdead);
	EXPECT_EQ(r.st.submitted, r.st.completed);
	EXPECT_EQ(r.fds[0], r.fds[1]);
	EXPECT_EQ(r.children[0], r.children[1]);
	/* And the module freed every knot: the pool's, none left behind. */
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/* SIGKILLs of the three-worker storm: KNITK_STORM_KILLS (make stress). */
static unsigned int storm_kills(void)
{
	const char *v = getenv("KNITK_STORM_KILLS");
	unsigned long n = v ? strtoul(v, NULL, 0) : 200;

	return n > STORM_MAX_KILLS ? STORM_MAX_KILLS : n ? (unsigned int)n : 1;
}

/*
 * The storms take long on a slow guest (a debug kernel: make stress), so
 * the harness's hang guard is raised above its default 30 s for them.
 */
FIXTURE(storm) {
	int unused;
};

FIXTURE_SETUP(storm)
{
}

FIXTURE_TEARDOWN(storm)
{
}

TEST_F_TIMEOUT(storm, kill_storm, 3600)
{
	REQUIRE_KNITK();
	storm_kmod(_metadata, 3, storm_kills(), KNITK_POOL_DISPATCH_PRIVATE);
}

TEST_F_TIMEOUT(storm, kill_storm_one, 3600)
{
	REQUIRE_KNITK();
	storm_kmod(_metadata, 1, storm_kills() / 4 + 1, KNITK_POOL_DISPATCH_PRIVATE);
}

TEST_F_TIMEOUT(storm, steal_kill_storm, 3600)
{
	REQUIRE_KNITK();
	storm_kmod(_metadata, 3, storm_kills(), KNITK_POOL_DISPATCH_STEAL);
}

TEST_F_TIMEOUT(storm, steal_kill_storm_one, 3600)
{
	REQUIRE_KNITK();
	storm_kmod(_metadata, 1, storm_kills() / 4 + 1, KNITK_POOL_DISPATCH_STEAL);
}

TEST(torn_ack)
{
	REQUIRE_KNITK();
	EXPECT_EQ(0, torn_ack_run(KNITK_KNOT_KMOD));
}

TEST(respawn_pidfds)
{
	int n[4];

	REQUIRE_KNITK();
	ASSERT_EQ(0, pidfds_over_deaths(20, KNITK_KNOT_KMOD, n));
	EXPECT_EQ(n[1], n[2]);
	EXPECT_EQ(n[0], n[3]);
}

/*
 * A process worker stopped (SIGSTOP) with a call pinned to it: the call
 * stays in progress while the other worker serves calls, the stopped
 * worker is not dead, and after SIGCONT its call completes by content.
 */
TEST(stopped_worker_is_not_dead)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
				     .knot_flags = KNITK_KNOT_KMOD };
	struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint64_t x = 7, y;
	siginfo_t si;
	size_t len;
	unsigned int i;
	pid_t pid;

	REQUIRE_KNITK();
	ASSERT_EQ(0, knitk_pool_create(&o, &test_tasks, &pool));
	ASSERT_EQ(0, knitk_pool_worker_info(pool, 0, &wi));
	pid = wi.pid;
	ASSERT_LT(0, pid);
	ASSERT_EQ(0, kill(pid, SIGSTOP));
	memset(&si, 0, sizeof(si));
	ASSERT_EQ(0, waitid(P_PID, (id_t)pid, &si, WSTOPPED | WNOWAIT));
	ASSERT_EQ(CLD_STOPPED, si.si_code);
	ASSERT_EQ(0, knitk_pool_submit(pool, T_MIX, &x, 8, &co, &c));
	co.worker = 1;
	for (i = 0; i < 10; i++) {
		uint64_t v = i;

		EXPECT_EQ(0, knitk_pool_call(pool, T_MIX, &v, 8, &co, &y, 8, &len));
		EXPECT_EQ(mix64(v), y);
	}
	EXPECT_EQ(-EINPROGRESS, knitk_call_wait(c, 0));
	ASSERT_EQ(0, knitk_pool_worker_info(pool, 0, &wi));
	EXPECT_EQ(1, wi.alive);
	EXPECT_EQ(pid, wi.pid);
	ASSERT_EQ(0, kill(pid, SIGCONT));
	EXPECT_EQ(0, knitk_call_wait(c, KNITK_WAIT_FOREVER));
	EXPECT_TRUE(mix_result_ok(c, x));
	knitk_call_release(c);
	ASSERT_EQ(0, knitk_pool_stats(pool, &st));
	EXPECT_EQ(0, st.deaths);
	EXPECT_EQ(0, st.ownerdead);
	knitk_pool_destroy(pool);
}

static _Atomic unsigned long signals_caught;

static void on_sigusr1(int sig)
{
	(void)sig;
	atomic_fetch_add_explicit(&signals_caught, 1, memory_order_relaxed);
}

/* SIGUSR1 to every other thread of this process, until *@arg is set. */
static void *signaller(void *arg)
{
	_Atomic int *stop = arg;
	pid_t self = gettid();

	while (!atomic_load(stop)) {
		DIR *dir = opendir("/proc/self/task");
		struct dirent *d;

		if (!dir)
			break;
		while ((d = readdir(dir)))
			if (atoi(d->d_name) > 0 && atoi(d->d_name) != self)
				tgkill(getpid(), atoi(d->d_name), SIGUSR1);
		closedir(dir);
		sched_yield();
	}
	return NULL;
}

/*
 * Workers killed while every thread of the host gets signals whose
 * handler has no SA_RESTART: the pool's wait for each dead worker may
 * fail with EINTR, and must be retried (no zombie left after destroy).
 */
TEST(reap_signals)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
				     .flags = KNITK_POOL_RESPAWN,
				     .knot_flags = KNITK_KNOT_KMOD };
	struct sigaction sa = { .sa_handler = on_sigusr1 }, old;
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	int children = count_children();
	pid_t victims[40];
	_Atomic int stop = 0;
	unsigned int i, n = 40;
	pthread_t th;

	REQUIRE_KNITK();
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, &old));
	ASSERT_EQ(0, knitk_pool_create(&o, &test_tasks, &pool));
	pthread_create(&th, NULL, signaller, &stop);
	for (i = 0; i < n; i++) {
		knitk_pool_worker_info(pool, i % 2, &wi);
		victims[i] = wi.pid;
		kill(wi.pid, SIGKILL);
		wait_deaths(pool, i + 1, i + 1);
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	EXPECT_EQ(100, mix_calls_good(pool, 100, NULL, 1, 1));
	knitk_pool_destroy(pool);
	TH_LOG("%lu signals caught", atomic_load(&signals_caught));
	EXPECT_LT(0, atomic_load(&signals_caught));
	for (i = 0; i < n; i++) {
		EXPECT_EQ(0, is_our_child(victims[i]));
		if (is_our_child(victims[i]))
			waitpid(victims[i], NULL, 0);
	}
	EXPECT_EQ(children, count_children());
	sigaction(SIGUSR1, &old, NULL);
}

struct call_waiter {
	struct knitk_call *call;
	_Atomic int stage;	/* 1: about to wait, 2: returned */
	_Atomic pid_t tid;
	int ret;
};

static void *call_wait_main(void *arg)
{
	struct call_waiter *w = arg;

	atomic_store(&w->tid, gettid());
	atomic_store(&w->stage, 1);
	w->ret = knitk_call_wait(w->call, KNITK_WAIT_FOREVER);
	atomic_store(&w->stage, 2);
	return NULL;
}

/*
 * knitk_call_wait(KNITK_WAIT_FOREVER) on a call held in its task, under
 * SIGUSR1 without SA_RESTART: it returns only with the call's status.
 */
TEST(signals_in_call_wait)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_THREADS, .nr_workers = 1,
				     .knot_flags = KNITK_KNOT_KMOD };
	struct sigaction sa = { .sa_handler = on_sigusr1 }, old;
	struct call_waiter w = { 0 };
	struct knitk_pool *pool;
	unsigned long before;
	struct gate g;
	pthread_t t;

	REQUIRE_KNITK();
	ASSERT_EQ(0, gate_open(&g));
	g.arg.n = 3;
	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, &old));
	ASSERT_EQ(0, knitk_pool_create(&o, &test_tasks, &pool));
	ASSERT_EQ(0, knitk_pool_submit(pool, T_GATE, &g.arg, sizeof(g.arg), NULL, &w.call));
	ASSERT_EQ(0, gate_wait(&g, 'r'));
	ASSERT_EQ(0, pthread_create(&t, NULL, call_wait_main, &w));
	while (atomic_load(&w.stage) < 1)
		sched_yield();
	before = atomic_load(&signals_caught);
	while (atomic_load(&signals_caught) < before + 20 && atomic_load(&w.stage) < 2)
		ASSERT_EQ(0, syscall(SYS_tgkill, getpid(), atomic_load(&w.tid), SIGUSR1));
	EXPECT_GT(2, atomic_load(&w.stage));
	EXPECT_EQ(-EINPROGRESS, knitk_call_status(w.call));
	ASSERT_EQ(0, gate_release(&g));
	pthread_join(t, NULL);
	EXPECT_EQ(3, w.ret);
	knitk_call_release(w.call);
	knitk_pool_destroy(pool);
	sigaction(SIGUSR1, &old, NULL);
	gate_close(&g);
}

/*
 * A submit blocked on backpressure (a full request arena, a worker at
 * capacity) returns -ETIMEDOUT at its call's deadline, having taken
 * nothing (lib/tests/backpressure.h).
 */
TEST(submit_backpressure_deadline)
{
	static const struct {
		unsigned int kind, dispatch;
		enum bp_room room;
		bool batch;
	} c[] = {
		{ KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, BP_ARENA, false },
		{ KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, BP_ARENA, false },
		{ KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE, BP_ARENA, false },
		{ KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL, BP_ARENA, true },
		{ KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, BP_CAPACITY, false },
		{ KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL, BP_CAPACITY, true },
	};
	unsigned int i;

	REQUIRE_KNITK();
	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		const char *fail = bp_submit_times_out(&test_tasks, c[i].kind,
						       c[i].dispatch, KNITK_KNOT_KMOD,
						       c[i].room, c[i].batch);

		if (fail)
			TH_LOG("case %u: %s", i, fail);
		EXPECT_EQ(NULL, fail);
	}
}

int main(int argc, char **argv)
{
	/* Process workers of the pools above are this program, re-run. */
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	return test_harness_run(argc, argv);
}
