// SPDX-License-Identifier: GPL-2.0
/*
 * A process worker's death is seen when the thread that serves ends, not
 * only when its process is gone (lib/pool/lifeline.c: a robust mutex held
 * for the worker's life, which the kernel marks at the thread's exit or at
 * an exec).
 *  - exec_is_a_death: a task execs a program that never exits.  The
 *    process lives on, so its pidfd never becomes readable: only the
 *    lifeline reports the death.  The waiter returns -EOWNERDEAD for the
 *    worker; with KNITK_POOL_RESPAWN the pool ends the exec'd process,
 *    reaps it and starts a successor that serves; nothing is left after
 *    destroy.
 *  - clean_stop_is_not_a_death: a shutdown unlocks every lifeline after
 *    its worker left its role; no death is counted.
 *  - kill_counted_once: a SIGKILL seen by the lifeline and then by the
 *    pidfd is one death.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "tap.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "proc_count.h"

#define PAUSE_ARG	"--lifeline-pause"

enum { L_MIX, L_EXEC, L_PARK, L_NR };

/* L_EXEC: writes its worker's pid to fd (an i32 argument), then execs. */
static int task_exec(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	char *argv[] = { "pool_lifeline_test", PAUSE_ARG, NULL };
	int32_t fd, pid = (int32_t)getpid();

	(void)out;
	(void)ctx;
	if (len != sizeof(fd))
		return -EINVAL;
	memcpy(&fd, in, sizeof(fd));
	if (write(fd, &pid, sizeof(pid)) != sizeof(pid))
		return -EIO;
	execv("/proc/self/exe", argv);
	return -errno;
}

static const knitk_task_fn lifeline_fns[L_NR] = { task_mix, task_exec, task_park };
static const struct knitk_task_table lifeline_tasks = {
	.tasks = lifeline_fns, .nr_tasks = L_NR,
};

/* Made before any pool: its workers inherit it. */
static int pid_pipe[2];

/* The calls pinned to @w all answer, checked by content. */
static unsigned long serve_check(struct knitk_pool *pool, unsigned int w)
{
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER,
				       .worker = w };
	unsigned long i, good = 0;

	for (i = 0; i < 32; i++) {
		uint64_t x = i * 7919 + 11, y = 0;
		size_t len = 0;

		if (knitk_pool_call(pool, L_MIX, &x, 8, &pin, &y, 8, &len) == 0 &&
		    len == 8 && y == mix64(x))
			good++;
	}
	return good;
}

/*
 * Run task @fn pinned to worker 1 and wait for it; *@pid: the worker's
 * pid the task reported.  Returns the wait's status, or a setup error.
 */
static int run_pinned(struct knitk_pool *pool, uint32_t fn, bool kill_it,
		      int32_t *pid, int *worker)
{
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER,
				       .worker = 1 };
	struct knitk_call *call;
	int32_t fd = pid_pipe[1];
	int ret;

	ret = knitk_pool_submit(pool, fn, &fd, sizeof(fd), &pin, &call);
	if (ret)
		return ret;
	if (read(pid_pipe[0], pid, sizeof(*pid)) != sizeof(*pid)) {
		knitk_call_release(call);
		return -EIO;
	}
	if (kill_it)
		kill(*pid, SIGKILL);
	ret = knitk_call_wait(call, KNITK_WAIT_FOREVER);
	*worker = knitk_call_worker(call);
	knitk_call_release(call);
	return ret;
}

static void exec_death(bool respawn)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		.flags = respawn ? KNITK_POOL_RESPAWN : 0,
	};
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	int32_t pid = 0;
	int worker = -1;

	REQUIRE(knitk_pool_create(&o, &lifeline_tasks, &pool) == 0);
	/* Without the lifeline this wait never ends: the process lives on. */
	CHECK_EQ(run_pinned(pool, L_EXEC, false, &pid, &worker), -EOWNERDEAD);
	CHECK_EQ(worker, 1);
	/* The respawn comes after the exec'd process was ended and reaped. */
	wait_deaths(pool, 1, respawn);
	knitk_pool_worker_info(pool, 1, &wi);
	if (respawn) {
		CHECK(wi.pid > 0 && wi.pid != pid);
		CHECK_EQ(serve_check(pool, 1), 32);
	}
	CHECK_EQ(serve_check(pool, 0), 32);
	knitk_pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 1);
	CHECK_EQ(st.respawns, respawn ? 1 : 0);
	CHECK_EQ(st.ownerdead, 1);
	knitk_pool_destroy(pool);
	/* The exec'd process too: ended and reaped by the pool. */
	CHECK(no_children());
}

static void exec_is_a_death(void)
{
	exec_death(false);
	exec_death(true);
}

static void clean_stop_is_not_a_death(void)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		.flags = KNITK_POOL_RESPAWN,
	};
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	int round;

	for (round = 0; round < 20; round++) {
		REQUIRE(knitk_pool_create(&o, &lifeline_tasks, &pool) == 0);
		CHECK_EQ(serve_check(pool, 0), 32);
		CHECK_EQ(serve_check(pool, 1), 32);
		CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
		knitk_pool_stats(pool, &st);
		CHECK_EQ(st.deaths, 0);
		CHECK_EQ(st.respawns, 0);
		knitk_pool_destroy(pool);
	}
	CHECK(no_children());
}

static void kill_counted_once(void)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		.flags = KNITK_POOL_RESPAWN,
	};
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	int32_t pid = 0;
	int k, worker = -1;

	REQUIRE(knitk_pool_create(&o, &lifeline_tasks, &pool) == 0);
	for (k = 1; k <= 10; k++) {
		CHECK_EQ(run_pinned(pool, L_PARK, true, &pid, &worker), -EOWNERDEAD);
		CHECK_EQ(worker, 1);
		wait_deaths(pool, (uint64_t)k, (uint64_t)k);
		CHECK_EQ(serve_check(pool, 1), 32);
		knitk_pool_stats(pool, &st);
		CHECK_EQ(st.deaths, (uint64_t)k);
		CHECK_EQ(st.respawns, (uint64_t)k);
	}
	CHECK_EQ(serve_check(pool, 0), 32);
	knitk_pool_destroy(pool);
	CHECK(no_children());
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &lifeline_tasks, NULL))
		return 2;
	/* What task_exec runs: a process that never exits by itself. */
	if (argc > 1 && !strcmp(argv[1], PAUSE_ARG)) {
		for (;;)
			pause();
	}
	if (pipe(pid_pipe))
		return 2;
	TEST(exec_is_a_death);
	TEST(clean_stop_is_not_a_death);
	TEST(kill_counted_once);
	return tap_exit();
}
