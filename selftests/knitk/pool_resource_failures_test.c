// SPDX-License-Identifier: GPL-2.0
/*
 * libknitk's pool on the module when resources fail, tested from the public
 * headers and man pages (the host's lib/tests/alloc_failure_test.c,
 * fds_run_out_test.c and fork_and_death_seen_test.c on the futex
 * backend): a create failing each of its allocations in turn
 * (-Wl,--wrap of the allocators, armed per thread) and under every
 * RLIMIT_NOFILE from the fds open up, each failure leaving no fd, child
 * or knot; a create whose process workers exit before joining, which
 * leaves none either; every fd a pool opens close-on-exec; the event fd,
 * which on the module is the host endpoint, when no fd is free; a call
 * submitted between a worker's exit and the pool seeing its death; and a
 * host killed while a helper it forked holds its fds.
 * Small counts: the guest runs under TCG.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "knitk_live.h"
#include "knitk_pool_guest.h"
#include "../../lib/tests/alloc_fail.h"
#include "../../lib/tests/proc_count.h"

static int kmod_pool(unsigned int kind, unsigned int workers, unsigned int flags,
		     struct knitk_pool **pool)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind,
				     .nr_workers = workers, .flags = flags,
				     .nr_submitters = 1,
				     .knot_flags = KNITK_KNOT_KMOD };

	return knitk_pool_create(&o, &test_tasks, pool);
}

/* ------------------------------------------- allocations that fail */

/*
 * Each allocation of a create failing in turn: a negative errno (-ENOMEM
 * for the library's own), no fd closed or left open, no child, and the
 * knot gone; some count lets the create through.
 */
static void create_fails_each_alloc(struct __test_metadata *_metadata,
				    unsigned int kind)
{
	int fds = count_fds(false);
	unsigned int n;

	for (n = 1; n < 400; n++) {
		struct knitk_pool *pool = NULL;
		uint64_t x = n, y = 0;
		size_t len = 0;
		bool hit;
		int ret;

		fail_arm(n);
		ret = kmod_pool(kind, 2, 0, &pool);
		hit = fail_disarm();
		if (!ret) {
			EXPECT_EQ(0, knitk_pool_call(pool, T_MIX, &x, 8, NULL, &y, 8, &len));
			EXPECT_EQ(mix64(x), y);
			knitk_pool_destroy(pool);
		} else {
			EXPECT_GT(0, ret);
		}
		ASSERT_EQ(fds, count_fds(false)) TH_LOG("allocation %u failed: %d", n, ret);
		EXPECT_EQ(-1, waitpid(-1, NULL, WNOHANG));
		if (!hit) {
			EXPECT_EQ(0, ret);
			break;
		}
	}
	EXPECT_GT(400, n);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST(create_fails_each_alloc_threads)
{
	REQUIRE_KNITK();
	create_fails_each_alloc(_metadata, KNITK_WORKER_THREADS);
}

TEST(create_fails_each_alloc_processes)
{
	REQUIRE_KNITK();
	create_fails_each_alloc(_metadata, KNITK_WORKER_PROCESSES);
}

/* ----------------------------------------------------- fds run out */

/*
 * knitk_pool_create under every RLIMIT_NOFILE from the fds open upwards:
 * -EMFILE, with nothing left behind, until one lets it through.
 */
static void create_at_each_fd_limit(struct __test_metadata *_metadata,
				    unsigned int kind)
{
	int fds = count_fds(false), k, ret = -1;
	struct rlimit old, r;

	ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &old));
	for (k = 0; k < 60 && ret; k++) {
		struct knitk_pool *pool;

		r = old;
		r.rlim_cur = (rlim_t)(fds + k);
		ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &r));
		ret = kmod_pool(kind, 2, 0, &pool);
		ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &old));
		if (!ret) {
			uint64_t x = 5, y = 0;
			size_t len = 0;

			EXPECT_EQ(0, knitk_pool_call(pool, T_MIX, &x, 8, NULL, &y, 8, &len));
			EXPECT_EQ(mix64(x), y);
			knitk_pool_destroy(pool);
		} else {
			EXPECT_EQ(-EMFILE, ret);
		}
		EXPECT_EQ(fds, count_fds(false));
		EXPECT_EQ(-1, waitpid(-1, NULL, WNOHANG));
	}
	EXPECT_EQ(0, ret);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST(create_at_each_fd_limit_threads)
{
	REQUIRE_KNITK();
	create_at_each_fd_limit(_metadata, KNITK_WORKER_THREADS);
}

TEST(create_at_each_fd_limit_processes)
{
	REQUIRE_KNITK();
	create_at_each_fd_limit(_metadata, KNITK_WORKER_PROCESSES);
}

/*
 * On the module the event fd is the host endpoint: switching to event
 * mode opens nothing, so it works with no fd free, and the loop gets its
 * results through it.
 */
TEST(event_fd_needs_no_new_fd)
{
	struct knitk_endpoint *ep;
	struct knitk_pool *pool;
	struct knitk_call *c, *got[2];
	struct rlimit old, r;
	uint64_t x = 11;
	int fd, n = 0;

	REQUIRE_KNITK();
	ASSERT_EQ(0, kmod_pool(KNITK_WORKER_THREADS, 1, 0, &pool));
	ASSERT_EQ(0, knitk_pool_endpoint(pool, &ep));
	ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &old));
	r = old;
	r.rlim_cur = 3;
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &r));
	fd = knitk_pool_event_fd(pool);
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &old));
	ASSERT_EQ(knitk_endpoint_fd(ep), fd);
	ASSERT_EQ(0, knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c));
	while (!n) {
		n = knitk_pool_reap(pool, got, 2);
		ASSERT_LE(0, n);
		if (!n)
			sched_yield();
	}
	ASSERT_EQ(1, n);
	EXPECT_EQ(c, got[0]);
	EXPECT_TRUE(mix_result_ok(c, x));
	knitk_call_release(c);
	knitk_pool_destroy(pool);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/* --------------------------------------- workers and fds of a pool */

/* A pool whose process workers exit before joining: no knot, fd or child left. */
TEST(failed_pool_create_leaves_nothing)
{
	static char *const no_args[] = { NULL };
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = KNITK_WORKER_PROCESSES,
				     .nr_workers = 2, .knot_flags = KNITK_KNOT_KMOD,
				     .worker_path = "/bin/true", .worker_argv = no_args };
	struct knitk_pool *pool = NULL;
	int fds = count_fds(false), i;

	REQUIRE_KNITK();
	for (i = 0; i < 3; i++)
		EXPECT_EQ(-ECHILD, knitk_pool_create(&o, &test_tasks, &pool));
	o.worker_path = "/nonexistent/knitk-worker";
	EXPECT_GT(0, knitk_pool_create(&o, &test_tasks, &pool));
	o.worker_path = NULL;
	o.nr_workers = KNITK_MAX_WORKERS + 1;
	EXPECT_EQ(-EINVAL, knitk_pool_create(&o, &test_tasks, &pool));
	EXPECT_EQ(NULL, pool);
	EXPECT_EQ(fds, count_fds(false));
	EXPECT_EQ(-1, waitpid(-1, NULL, WNOHANG));
	EXPECT_EQ(ECHILD, errno);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/*
 * Every fd a pool opens (endpoints on /dev/knitk, pidfds, the event fd)
 * is close-on-exec: a helper forked and exec'd while the pool runs holds
 * no endpoint that would keep the knot or a role alive.
 */
TEST(pool_fds_are_cloexec)
{
	static const unsigned int kinds[] = { KNITK_WORKER_THREADS, KNITK_WORKER_PROCESSES };
	unsigned int k;

	REQUIRE_KNITK();
	for (k = 0; k < 2; k++) {
		struct knitk_pool_opts o = { .size = sizeof(o), .kind = kinds[k],
					     .nr_workers = 2, .knot_flags = KNITK_KNOT_KMOD };
		struct knitk_pool *pool;
		char seen[1024] = { 0 };
		unsigned int leaked = 0;
		struct dirent *e;
		DIR *dir;
		int fd;

		dir = opendir("/proc/self/fd");
		ASSERT_NE(NULL, dir);
		while ((e = readdir(dir)))
			if (e->d_name[0] != '.' && atoi(e->d_name) < 1024)
				seen[atoi(e->d_name)] = 1;
		closedir(dir);
		ASSERT_EQ(0, knitk_pool_create(&o, &test_tasks, &pool));
		if (kinds[k] == KNITK_WORKER_THREADS)
			ASSERT_LE(0, knitk_pool_event_fd(pool));
		for (fd = 0; fd < 1024; fd++) {
			int fl = fcntl(fd, F_GETFD);

			if (fl < 0 || seen[fd])
				continue;
			if (!(fl & FD_CLOEXEC)) {
				TH_LOG("fd %d of the pool is not close-on-exec", fd);
				leaked++;
			}
		}
		EXPECT_EQ(0, leaked);
		knitk_pool_destroy(pool);
	}
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/* ------------------------------------------ a death not seen yet */

/*
 * A call submitted after worker 0 exited, before the pool saw its death,
 * completes -EOWNERDEAD naming worker 0 or runs on worker 1; once the
 * pool reports worker 0 not alive, every call runs.
 */
TEST(submitted_before_death_seen)
{
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	struct knitk_call *c;
	unsigned int round, i;
	pid_t dead;

	REQUIRE_KNITK();
	for (round = 0; round < 3; round++) {
		uint64_t x = round;

		ASSERT_EQ(0, kmod_pool(KNITK_WORKER_PROCESSES, 2, 0, &pool));
		ASSERT_EQ(0, knitk_pool_worker_info(pool, 0, &wi));
		dead = wi.pid;
		ASSERT_LT(0, dead);
		ASSERT_EQ(0, kill(dead, SIGKILL));
		while (!proc_exited(dead))
			sched_yield();
		ASSERT_EQ(0, knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c));
		if (knitk_call_wait(c, KNITK_WAIT_FOREVER) == 0) {
			EXPECT_TRUE(mix_result_ok(c, x));
		} else {
			EXPECT_EQ(-EOWNERDEAD, knitk_call_status(c));
			EXPECT_EQ(0, knitk_call_worker(c));
		}
		knitk_call_release(c);
		while (!knitk_pool_worker_info(pool, 0, &wi) && wi.alive)
			sched_yield();
		for (i = 0; i < 3; i++) {
			ASSERT_EQ(0, knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c));
			EXPECT_EQ(0, knitk_call_wait(c, KNITK_WAIT_FOREVER));
			EXPECT_EQ(1, knitk_call_worker(c));
			EXPECT_TRUE(mix_result_ok(c, x));
			knitk_call_release(c);
		}
		knitk_pool_destroy(pool);
	}
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/*
 * The host of a process pool forks a helper that keeps every fd it had
 * (the host endpoint among them) and is then killed: "whatever forked
 * children ... still hold the endpoint", the kernel marks the host dead,
 * and both workers exit while the helper still runs.
 */
TEST(host_killed_while_forked_helper_holds_its_fds)
{
	pid_t host, helper, workers[2];
	int p[2], st;

	REQUIRE_KNITK();
	ASSERT_EQ(0, pipe(p));
	host = fork();
	ASSERT_LE(0, host);
	if (!host) {
		struct knitk_worker_info wi = { .size = sizeof(wi) };
		struct knitk_pool *pool;
		pid_t ids[3];
		unsigned int w;

		close(p[0]);
		if (kmod_pool(KNITK_WORKER_PROCESSES, 2, 0, &pool))
			_exit(1);
		for (w = 0; w < 2; w++) {
			if (knitk_pool_worker_info(pool, w, &wi))
				_exit(1);
			ids[w] = wi.pid;
		}
		ids[2] = fork();
		if (!ids[2]) {
			/* The helper: holds the fds, does nothing. */
			for (;;)
				pause();
		}
		if (write(p[1], ids, sizeof(ids)) != sizeof(ids))
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	{
		pid_t ids[3];

		ASSERT_EQ((ssize_t)sizeof(ids), read(p[0], ids, sizeof(ids)));
		workers[0] = ids[0];
		workers[1] = ids[1];
		helper = ids[2];
	}
	close(p[0]);
	ASSERT_EQ(0, kill(host, SIGKILL));
	ASSERT_EQ(host, waitpid(host, &st, 0));
	while (!proc_exited(workers[0]) || !proc_exited(workers[1]))
		usleep(10000);
	EXPECT_FALSE(proc_exited(helper));
	EXPECT_EQ(0, kill(helper, SIGKILL));
	while (!proc_exited(helper))
		usleep(10000);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	return test_harness_run(argc, argv);
}
