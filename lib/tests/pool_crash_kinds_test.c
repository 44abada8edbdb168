// SPDX-License-Identifier: GPL-2.0
/*
 * A task that kills its own process worker, in each way it can (exit,
 * SIGSEGV, abort, a forked helper left holding the worker's fds, then
 * SIGSEGV): its call ends -EOWNERDEAD and service resumes with respawn,
 * leaking no fd; without respawn, once every worker is gone or the worker
 * a call is pinned to is, the submit is -EPIPE, not a hang nor another
 * worker; with respawn, a call pinned to a crashed worker waits for its
 * successor.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk_pool.h"
#include "proc_count.h"
#include "tap.h"
#include "hostile_tasks.h"

/* The pid T_FORK_CRASH's helper wrote (its file removed), or -1. */
static pid_t read_helper(pid_t host)
{
	char path[80], buf[16] = { 0 };
	int fd;

	fork_crash_file(path, sizeof(path), host);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (read(fd, buf, sizeof(buf) - 1) <= 0)
		buf[0] = 0;
	close(fd);
	unlink(path);
	return atoi(buf);
}

/* Each way a task can kill its worker: -EOWNERDEAD, then service resumes. */
static void crash_kinds_respawn(void)
{
	static const uint32_t kinds[] = { T_EXIT, T_SEGV, T_ABORT,
					  T_FORK_CRASH };
	struct knitk_pool *p = make_pool(KNITK_WORKER_PROCESSES, 2,
					 KNITK_POOL_RESPAWN);
	struct knitk_pool_stats st = { .size = sizeof(st) };
	pid_t host = getpid(), helper;
	unsigned int k, i;
	int fds;

	REQUIRE(p);
	fds = count_fds(false);
	for (k = 0; k < 4; k++) {
		int ret = knitk_pool_call(p, kinds[k], &host, sizeof(host),
					  NULL, NULL, 0, NULL);

		if (ret != -EOWNERDEAD)
			printf("# crash kind %u: status %d\n", kinds[k], ret);
		CHECK_EQ(ret, -EOWNERDEAD);
		for (i = 0; i < 20; i++) {
			uint64_t x = i * 77 + k, y = 0;

			CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, NULL, &y,
						 8, NULL), 0);
			CHECK_EQ(y, x);
		}
	}
	helper = read_helper(host);
	CHECK(helper > 0);
	if (helper > 0) {
		/* The helper holds the dead worker's fds: still alive. */
		CHECK_EQ(kill(helper, 0), 0);
		kill(helper, SIGKILL);
	}
	/* The successors start after the waiters learned of the deaths. */
	while (knitk_pool_stats(p, &st) == 0 && st.respawns < 4)
		sched_yield();
	CHECK_EQ(knitk_pool_stats(p, &st), 0);
	CHECK_EQ(st.deaths, 4);
	CHECK_EQ(st.ownerdead, 4);
	CHECK_EQ(count_fds(false), fds);
	knitk_pool_destroy(p);
	/* The helper was reparented to us (subreaper): reap it. */
	while (helper > 0 && waitpid(helper, NULL, 0) < 0 && errno == EINTR)
		;
	CHECK(no_children());
}

/* Without respawn, once both workers crashed, submit says -EPIPE. */
static void crash_all_then_epipe(void)
{
	struct knitk_pool *p = make_pool(KNITK_WORKER_PROCESSES, 2, 0);
	struct knitk_call_opts o = { .size = sizeof(o), .flags = KNITK_CALL_WORKER };
	struct knitk_call *c;
	int v = 0;

	REQUIRE(p);
	for (o.worker = 0; o.worker < 2; o.worker++)
		CHECK_EQ(knitk_pool_call(p, T_ABORT, &v, sizeof(v), &o, NULL,
					 0, NULL), -EOWNERDEAD);
	CHECK_EQ(knitk_pool_submit(p, T_ECHO, &v, sizeof(v), NULL, &c),
		 -EPIPE);
	CHECK_EQ(call_int(p, T_ECHO, 1), -EPIPE);
	knitk_pool_destroy(p);
	CHECK(no_children());
}

/*
 * A call pinned to a worker that died (no respawn) while the other lives:
 * the pinned worker is gone, so -EPIPE, not a hang and not another worker.
 */
static void pinned_to_dead_worker(void)
{
	struct knitk_pool *p = make_pool(KNITK_WORKER_PROCESSES, 2, 0);
	struct knitk_call_opts o = { .size = sizeof(o), .flags = KNITK_CALL_WORKER, .worker = 1 };
	struct knitk_call *c;
	int v = 0, ret;

	REQUIRE(p);
	CHECK_EQ(knitk_pool_call(p, T_ABORT, &v, 4, &o, NULL, 0, NULL),
		 -EOWNERDEAD);
	ret = knitk_pool_submit(p, T_PID, &v, 4, &o, &c);
	printf("# submit pinned to the dead worker: %d\n", ret);
	CHECK_EQ(ret, -EPIPE);
	if (ret == 0) {
		printf("# ... and it completed with %d\n",
		       knitk_call_wait(c, KNITK_WAIT_FOREVER));
		knitk_call_release(c);
	}
	o.worker = 0;
	CHECK(call_pid(p, &o) > 0);
	knitk_pool_destroy(p);
	CHECK(no_children());
}

/* With respawn, a call pinned to a worker just crashed waits for its successor. */
static void pinned_waits_for_respawn(void)
{
	struct knitk_pool *p = make_pool(KNITK_WORKER_PROCESSES, 2,
					 KNITK_POOL_RESPAWN);
	struct knitk_call_opts o = { .size = sizeof(o), .flags = KNITK_CALL_WORKER, .worker = 0 };
	int v = 0, i, first, pid;

	REQUIRE(p);
	first = call_pid(p, &o);
	CHECK(first > 0);
	for (i = 0; i < 10; i++) {
		CHECK_EQ(knitk_pool_call(p, T_SEGV, &v, 4, &o, NULL, 0, NULL),
			 -EOWNERDEAD);
		pid = call_pid(p, &o);
		CHECK(pid > 0 && pid != first);
	}
	knitk_pool_destroy(p);
	CHECK(no_children());
}

int main(int argc, char **argv)
{
	if (hostile_start(argc, argv))
		return 1;
	TEST(crash_kinds_respawn);
	TEST(crash_all_then_epipe);
	TEST(pinned_to_dead_worker);
	TEST(pinned_waits_for_respawn);
	return tap_exit();
}
