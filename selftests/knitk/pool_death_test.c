// SPDX-License-Identifier: GPL-2.0
/*
 * A process worker of a libknitk pool on the module crashes after its task
 * forked a helper child that is still alive (and holds the worker's
 * endpoint fd, inherited): the call must complete with -EOWNERDEAD from
 * the kernel's notice alone, while the helper lives, and the pool goes on
 * serving with a respawned worker.  The workers are this program, re-run
 * by the pool, with the task table below.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_pool.h"
#include "knitk_test.h"

/* How long the helper sleeps unless killed: far past any notice. */
#define HELPER_SLEEP_S	30

enum {
	T_ECHO,		/* result = argument bytes */
	T_FORK_CRASH,	/* char path[]: fork a helper, write its pid, crash */
	T_NR,
};

static int task_echo(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	(void)ctx;
	return knitk_reply_set(out, in, len);
}

static int task_fork_crash(const void *in, size_t len,
			   struct knitk_reply *out, void *ctx)
{
	char buf[32];
	pid_t helper;
	int fd, n;

	(void)out;
	(void)ctx;
	if (!len || ((const char *)in)[len - 1])
		return -EINVAL;
	helper = fork();
	if (helper < 0)
		return -errno;
	if (helper == 0) {
		sleep(HELPER_SLEEP_S);
		_exit(0);
	}
	fd = open(in, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%d\n", (int)helper);
	if (write(fd, buf, n) != n)
		return -EIO;
	close(fd);
	raise(SIGKILL);
	return 0;
}

static const knitk_task_fn task_fns[T_NR] = {
	[T_ECHO] = task_echo,
	[T_FORK_CRASH] = task_fork_crash,
};

static const struct knitk_task_table tasks = { .tasks = task_fns, .nr_tasks = T_NR };

/* The pid the crashing task wrote to @path, or -1. */
static pid_t read_pid(const char *path)
{
	char buf[32] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? (pid_t)atoi(buf) : -1;
}

TEST(crash_with_live_forked_helper)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = KNITK_WORKER_PROCESSES,
				     .nr_workers = 2,
				     .knot_flags = KNITK_KNOT_KMOD,
				     .flags = KNITK_POOL_RESPAWN };
	struct knitk_call_opts pin = { .size = sizeof(pin),
				       .flags = KNITK_CALL_WORKER, .worker = 0 };
	char path[] = "/tmp/knitk-helper-XXXXXX";
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	pid_t victim, helper;
	unsigned int i;
	char state;
	int fd;

	KNITK_REQUIRE_DEV();
	/* The helper, orphaned by the crash, comes to us to be reaped. */
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
	fd = mkstemp(path);
	ASSERT_LE(0, fd);
	close(fd);
	ASSERT_EQ(0, knitk_pool_create(&o, &tasks, &pool));
	ASSERT_EQ(0, knitk_pool_worker_info(pool, 0, &wi));
	victim = wi.pid;

	EXPECT_EQ(-EOWNERDEAD, knitk_pool_call(pool, T_FORK_CRASH, path,
					       sizeof(path), &pin, NULL, 0,
					       NULL));
	helper = read_pid(path);
	ASSERT_LT(0, helper);
	/* The notice came while the helper still held the worker's fd. */
	state = knitk_thread_state(helper, helper);
	EXPECT_TRUE(state == 'S' || state == 'R')
		TH_LOG("helper %d in state %c", (int)helper, state);
	kill(helper, SIGKILL);
	/*
	 * The module heard of the death as the worker's address space went,
	 * before its exit hands its orphans to us: ECHILD until then.
	 */
	while (waitpid(helper, NULL, 0) < 0 && errno == ECHILD)
		usleep(1000);
	EXPECT_EQ(-1, kill(helper, 0));
	unlink(path);

	/* The pool replaces the worker and keeps serving, on it too. */
	for (;;) {
		ASSERT_EQ(0, knitk_pool_stats(pool, &st));
		if (st.respawns == 1)
			break;
		usleep(1000);
	}
	EXPECT_EQ(1, st.deaths);
	EXPECT_EQ(1, st.ownerdead);
	ASSERT_EQ(0, knitk_pool_worker_info(pool, 0, &wi));
	EXPECT_EQ(1, wi.alive);
	EXPECT_NE(victim, wi.pid);
	for (i = 0; i < 100; i++) {
		unsigned int back = 0;
		size_t len = 0;

		ASSERT_EQ(0, knitk_pool_call(pool, T_ECHO, &i, sizeof(i),
					     i % 2 ? &pin : NULL, &back,
					     sizeof(back), &len));
		EXPECT_EQ(sizeof(i), len);
		EXPECT_EQ(i, back);
	}
	EXPECT_EQ(0, knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN));
	knitk_pool_destroy(pool);
}

int main(int argc, char **argv)
{
	/* Process workers of the pool above are this program, re-run. */
	if (knitk_worker_main(argc, argv, &tasks, NULL))
		return 1;
	return test_harness_run(argc, argv);
}
