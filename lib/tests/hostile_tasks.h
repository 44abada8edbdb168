/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Tasks a careless or hostile user writes, past the table of pool_tasks.h:
 * tasks that end their worker (exit, SIGSEGV, abort, a forked helper left
 * behind and then SIGSEGV), one that checks an argument as large as the
 * arena and replies as much, one that replies twice.  With the pools,
 * calls and start of main() of the tests of the pool driven carelessly or
 * hostilely (pool_task_results_test, pool_crash_kinds_test,
 * pool_shutdown_race_test, pool_arena_size_calls_test,
 * pool_signal_storm_test).
 */
#ifndef KNITK_HOSTILE_TASKS_H
#define KNITK_HOSTILE_TASKS_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "knitk_pool.h"
#include "pool_tasks.h"
#include "fixtures.h"

enum {
	T_BIG = T_NR,	/* u64 result length, u64 seed, pattern: see task_big */
	T_EXIT,		/* exit(3) */
	T_SEGV,		/* SIGSEGV */
	T_ABORT,	/* abort() */
	T_FORK_CRASH,	/* i32 host pid: see task_fork_crash */
	T_REPLY2,	/* u64 len0, u64 len1: see task_reply2 */
	T_HOSTILE_NR,
};

/* The bytes of T_BIG's arguments (seed + 1) and results (seed). */
static inline uint8_t pattern(uint64_t seed, size_t i)
{
	return (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

/*
 * Argument: result length and seed (u64 each), then filler of
 * pattern(seed + 1), checked; result: that many bytes of pattern(seed).
 */
static int task_big(const void *in, size_t len, struct knitk_reply *out,
		    void *ctx)
{
	uint64_t hdr[2];
	uint8_t *buf;
	size_t i;
	int ret;

	(void)ctx;
	if (len < sizeof(hdr))
		return -EINVAL;
	memcpy(hdr, in, sizeof(hdr));
	for (i = sizeof(hdr); i < len; i++)
		if (((const uint8_t *)in)[i] != pattern(hdr[1] + 1, i))
			return -EBADMSG;
	ret = knitk_reply_alloc(out, hdr[0], (void **)&buf);
	if (ret)
		return ret;
	for (i = 0; i < hdr[0]; i++)
		buf[i] = pattern(hdr[1], i);
	return 0;
}

static int task_exit(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	(void)ctx;
	exit(3);
}

static int task_segv(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	(void)ctx;
	signal(SIGSEGV, SIG_DFL);
	raise(SIGSEGV);
	return 0;
}

static int task_abort(const void *in, size_t len, struct knitk_reply *out,
		      void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	(void)ctx;
	signal(SIGABRT, SIG_DFL);
	abort();
}

/* Where T_FORK_CRASH's helper writes its pid, for host @host. */
static inline void fork_crash_file(char *path, size_t size, pid_t host)
{
	snprintf(path, size, "/tmp/knitk-adv-helper.%d", (int)host);
}

/*
 * Forks a helper that writes its pid to fork_crash_file() and lives on
 * (holding the worker's fds) until killed or until the host is gone; then
 * dies by SIGSEGV.
 */
static int task_fork_crash(const void *in, size_t len, struct knitk_reply *out,
			   void *ctx)
{
	char path[80];
	pid_t host, h;

	(void)out;
	(void)ctx;
	if (len != sizeof(host))
		return -EINVAL;
	memcpy(&host, in, sizeof(host));
	fork_crash_file(path, sizeof(path), host);
	h = fork();
	if (h < 0)
		return -errno;
	if (h == 0) {
		char buf[16];
		int fd, n;

		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		n = snprintf(buf, sizeof(buf), "%d\n", getpid());
		if (fd < 0 || write(fd, buf, n) != n)
			_exit(1);
		close(fd);
		while (kill(host, 0) == 0)
			usleep(10000);
		_exit(0);
	}
	/* The helper is recorded before the worker dies. */
	while (access(path, F_OK))
		usleep(1000);
	signal(SIGSEGV, SIG_DFL);
	raise(SIGSEGV);
	return 0;
}

/* Two allocs of the u64 lengths it is given: the second one is the result. */
static int task_reply2(const void *in, size_t len, struct knitk_reply *out,
		       void *ctx)
{
	uint64_t l[2];
	void *buf;
	int ret;

	(void)ctx;
	if (len != sizeof(l))
		return -EINVAL;
	memcpy(l, in, sizeof(l));
	ret = knitk_reply_alloc(out, l[0], &buf);
	if (ret)
		return ret;
	memset(buf, 0xaa, l[0]);
	ret = knitk_reply_alloc(out, l[1], &buf);
	if (ret)
		return ret;
	memset(buf, 0x55, l[1]);
	return 0;
}

static const knitk_task_fn hostile_task_fns[T_HOSTILE_NR] = {
	TEST_TASK_FNS,
	[T_BIG] = task_big,
	[T_EXIT] = task_exit,
	[T_SEGV] = task_segv,
	[T_ABORT] = task_abort,
	[T_FORK_CRASH] = task_fork_crash,
	[T_REPLY2] = task_reply2,
};

static const struct knitk_task_table hostile_tasks = {
	.tasks = hostile_task_fns, .nr_tasks = T_HOSTILE_NR,
};

/* Calls of a storm: argv[1], at most 40000 (run.sh: one count per build). */
__attribute__((unused)) static unsigned long nr_calls = 20000;

/*
 * The start of main(): a process worker runs hostile_tasks and never
 * returns; the host takes argv[1] into nr_calls, runs the case argv[2]
 * alone if given, and is the subreaper of its workers' children (the
 * helper T_FORK_CRASH leaves behind).  0, or 1.
 */
static inline int hostile_start(int argc, char **argv)
{
	if (pool_test_start(argc, argv, &hostile_tasks, &nr_calls, 40000) ||
	    tests_init(argc, argv, true))
		return 1;
	return 0;
}

/* A pool of @workers workers of @kind for 4 submitting threads at once. */
static inline struct knitk_pool *make_pool(unsigned int kind,
					   unsigned int workers,
					   unsigned int flags)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind,
				     .nr_workers = workers, .flags = flags,
				     .nr_submitters = 4 };
	struct knitk_pool *p = NULL;
	int ret = knitk_pool_create(&o, &hostile_tasks, &p);

	if (ret)
		printf("# pool_create(kind %u): %d\n", kind, ret);
	return ret ? NULL : p;
}

/* A call of @fn with the int @v as its argument: its status. */
static inline int call_int(struct knitk_pool *p, uint32_t fn, int v)
{
	return knitk_pool_call(p, fn, &v, sizeof(v), NULL, NULL, 0, NULL);
}

/* The status of a call whose task returns @v (T_FAIL returns -argument). */
static inline int call_returning(struct knitk_pool *p, int v)
{
	return call_int(p, T_FAIL, -v);
}

/* The pid of the worker a call with @o ran on, or the call's error. */
static inline int call_pid(struct knitk_pool *p,
			   const struct knitk_call_opts *o)
{
	int32_t pid = 0;
	int v = 0, ret = knitk_pool_call(p, T_PID, &v, sizeof(v), o, &pid,
					 sizeof(pid), NULL);

	return ret ? ret : pid;
}

#endif /* KNITK_HOSTILE_TASKS_H */
