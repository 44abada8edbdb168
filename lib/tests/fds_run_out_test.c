// SPDX-License-Identifier: GPL-2.0
/*
 * When fds or address space run out: a create at each fd limit, respawns
 * without fds (pinned calls among them), knitk_pool_call without room, the
 * event fd without fds, and a create in a small address space all fail
 * cleanly or go on, and lose no call.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"
#define FIXTURES_ONE_SUBMITTER
#include "fixtures.h"

/*
 * knitk_pool_create under every RLIMIT_NOFILE from the fds open now
 * upwards: each failure is -EMFILE and leaves the fds and threads as they
 * were (no worker left running), and some limit lets it through.
 */
static void create_at_each_fd_limit(unsigned int kind)
{
	struct rlimit old, r;
	int fds = open_fds(), threads = nr_threads(), k, ret = -1;

	getrlimit(RLIMIT_NOFILE, &old);
	for (k = 0; k < 40 && ret; k++) {
		struct knitk_pool *pool;

		r = old;
		r.rlim_cur = (rlim_t)(fds + k);
		setrlimit(RLIMIT_NOFILE, &r);
		ret = new_pool(kind, KNITK_POOL_DISPATCH_PRIVATE, 2, 0, &pool);
		setrlimit(RLIMIT_NOFILE, &old);
		if (!ret) {
			CHECK_EQ(mix_calls_good(pool, 4, NULL, 1, 1), 4);
			knitk_pool_destroy(pool);
		} else {
			CHECK_EQ(ret, -EMFILE);
		}
		CHECK_EQ(open_fds(), fds);
		CHECK_EQ(nr_threads(), threads);
		CHECK_EQ(waitpid(-1, NULL, WNOHANG), -1);
	}
	printf("# through with %d fds free\n", k - 1);
	CHECK_EQ(ret, 0);
}

static void create_at_each_fd_limit_threads(void)
{
	create_at_each_fd_limit(KNITK_WORKER_THREADS);
}

static void create_at_each_fd_limit_processes(void)
{
	create_at_each_fd_limit(KNITK_WORKER_PROCESSES);
}

/*
 * A respawning pool of @workers processes whose worker 0 is killed once
 * this process may open no fd at all (RLIMIT_NOFILE at 3, below the fds
 * open); the limit it had is left in @old for the caller to put back.
 */
static int kill_worker_without_fds(unsigned int workers,
				   struct knitk_pool **pool, struct rlimit *old)
{
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct rlimit r;

	if (new_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE,
		     workers, KNITK_POOL_RESPAWN, pool))
		return -1;
	if (knitk_pool_worker_info(*pool, 0, &wi) || wi.pid <= 0)
		return -1;
	getrlimit(RLIMIT_NOFILE, old);
	r = *old;
	r.rlim_cur = 3;
	setrlimit(RLIMIT_NOFILE, &r);
	kill(wi.pid, SIGKILL);
	return 0;
}

/*
 * With KNITK_POOL_RESPAWN, a worker that dies while the process may open
 * no fd at all (RLIMIT_NOFILE below the fds open) cannot be replaced:
 * "-EPIPE only if the restart fails", so the submits return -EPIPE, never
 * wait for a successor that is not coming; the pool then destroys
 * cleanly.
 */
static void respawn_fails_without_fds(void)
{
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c;
	struct rlimit old;
	uint64_t x = 3;
	int ret;

	REQUIRE(kill_worker_without_fds(1, &pool, &old) == 0);
	ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c);
	if (!ret) {
		/* Dispatched before the pool saw the death. */
		CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -EOWNERDEAD);
		knitk_call_release(c);
		ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c);
	}
	setrlimit(RLIMIT_NOFILE, &old);
	CHECK_EQ(ret, -EPIPE);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 1);
	CHECK_EQ(st.respawns, 0);
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	knitk_pool_destroy(pool);
	CHECK_EQ(waitpid(-1, NULL, WNOHANG), -1);
}

/*
 * The same with two workers: a call pinned to the dead one while its
 * restart fails waits no longer than the failure, then -EPIPE; the other
 * worker serves every unpinned call.
 */
static void pinned_while_respawn_fails(void)
{
	struct knitk_call_opts pin = { .size = sizeof(pin),
				       .flags = KNITK_CALL_WORKER, .worker = 0 };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	struct knitk_call *c;
	struct rlimit old;
	uint64_t x = 8;
	int ret;

	REQUIRE(kill_worker_without_fds(2, &pool, &old) == 0);
	while (!knitk_pool_worker_info(pool, 0, &wi) && wi.alive)
		sched_yield();
	ret = knitk_pool_submit(pool, T_MIX, &x, 8, &pin, &c);
	setrlimit(RLIMIT_NOFILE, &old);
	CHECK_EQ(ret, -EPIPE);
	if (!ret) {
		printf("# pinned call: %d\n", knitk_call_wait(c, KNITK_WAIT_FOREVER));
		knitk_call_release(c);
	}
	CHECK_EQ(mix_calls_good(pool, 10, NULL, 1, 1), 10);
	knitk_pool_destroy(pool);
	CHECK_EQ(waitpid(-1, NULL, WNOHANG), -1);
}

/*
 * knitk_pool_call with no room for the result (@out NULL, @cap 0) still
 * returns the call's status and its full length.
 */
static void pool_call_without_room(void)
{
	struct knitk_pool *pool;
	size_t len = 0;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	CHECK_EQ(knitk_pool_call(pool, T_ECHO, "hello", 5, NULL, NULL, 0, &len), 0);
	CHECK_EQ(len, 5);
	knitk_pool_destroy(pool);
}

struct no_fds {
	struct rlimit old;
	int fill[64];
	int nr;
};

/* Take every fd the process may open: the limit at the count open now. */
static void fds_exhaust(struct no_fds *s)
{
	struct rlimit r;
	int fd;

	getrlimit(RLIMIT_NOFILE, &s->old);
	r = s->old;
	r.rlim_cur = (rlim_t)open_fds();
	setrlimit(RLIMIT_NOFILE, &r);
	/* Fill any hole below the limit. */
	for (s->nr = 0; s->nr < 64 && (fd = dup(1)) >= 0; s->nr++)
		s->fill[s->nr] = fd;
}

static void fds_restore(struct no_fds *s)
{
	setrlimit(RLIMIT_NOFILE, &s->old);
	while (s->nr)
		close(s->fill[--s->nr]);
}

/*
 * knitk_pool_event_fd when the process has no fd left fails with a
 * negative errno and changes nothing: the pool is not in event mode
 * (reap -EINVAL, calls complete through waits), and once an fd is free
 * the switch works.
 */
static void event_fd_without_fds(void)
{
	struct knitk_call *c[2];
	struct knitk_pool *pool;
	struct no_fds nf;
	int fd;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	fds_exhaust(&nf);
	fd = knitk_pool_event_fd(pool);
	CHECK_EQ(fd, -EMFILE);
	CHECK_EQ(knitk_pool_reap(pool, c, 2), -EINVAL);
	CHECK_EQ(mix_calls_good(pool, 10, NULL, 7, 1), 10);
	fds_restore(&nf);
	fd = knitk_pool_event_fd(pool);
	CHECK(fd >= 0);
	CHECK_EQ(knitk_pool_event_fd(pool), fd);
	CHECK_EQ(knitk_pool_reap(pool, c, 2), 0);
	knitk_pool_destroy(pool);
}

/*
 * With KNITK_POOL_RESPAWN, a worker that dies while the process has no fd
 * left for its successor: "the submit waits for its successor (-EPIPE
 * only if the restart fails)" - a submit returns (-EPIPE, or a call that
 * runs once the limit is raised), it never waits for a restart that is not
 * coming.  The calls of the dead worker complete -EOWNERDEAD.
 */
static void respawn_without_fds(void)
{
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_call *c;
	struct knitk_pool *pool;
	struct no_fds nf;
	uint64_t x = 3;
	int r;

	REQUIRE(new_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 KNITK_POOL_RESPAWN, &pool) == 0);
	REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0 && wi.pid > 0);
	fds_exhaust(&nf);
	kill(wi.pid, SIGKILL);
	/* Until the pool has seen the death (its own record, or the reap). */
	while (!knitk_pool_worker_info(pool, 0, &wi) && wi.alive)
		sched_yield();
	r = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c);
	fds_restore(&nf);
	printf("# submit with no fd for the successor: %d\n", r);
	CHECK(r == 0 || r == -EPIPE);
	if (!r) {
		CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), 0);
		CHECK(mix_result_ok(c, x));
		knitk_call_release(c);
	}
	knitk_pool_destroy(pool);
}

static long vm_size_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/*
 * knitk_pool_create under an RLIMIT_AS that leaves 0, 1, 2, ... MiB of
 * address space: the knot's mapping or a worker's stack (pthread_create)
 * fails part-way; each failure is a negative errno and leaves the fds
 * and threads as they were (started workers joined), until one fits.
 */
static void create_in_little_address_space(void)
{
	struct rlimit old, r;
	int fds, threads, ret = -1;
	long base, mib;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* Their shadow memory takes terabytes of address space. */
	SKIP("RLIMIT_AS: not under ASan or TSan");
#endif
	fds = open_fds();
	threads = nr_threads();
	getrlimit(RLIMIT_AS, &old);
	for (mib = 0; mib < 200 && ret; mib++) {
		struct knitk_pool *pool;

		base = vm_size_kb();
		REQUIRE(base > 0);
		r = old;
		r.rlim_cur = (rlim_t)(base + mib * 1024) * 1024;
		setrlimit(RLIMIT_AS, &r);
		ret = new_pool(KNITK_WORKER_THREADS, mib & 1 ? KNITK_POOL_DISPATCH_STEAL :
			       KNITK_POOL_DISPATCH_PRIVATE, 4, 0, &pool);
		setrlimit(RLIMIT_AS, &old);
		if (!ret) {
			CHECK_EQ(mix_calls_good(pool, 4, NULL, 1, 1), 4);
			knitk_pool_destroy(pool);
		} else {
			CHECK(ret == -ENOMEM || ret == -EAGAIN);
		}
		CHECK_EQ(open_fds(), fds);
		CHECK_EQ(nr_threads(), threads);
	}
	printf("# through with %ld MiB to spare\n", mib - 1);
	CHECK_EQ(ret, 0);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(create_at_each_fd_limit_threads);
	TEST(create_at_each_fd_limit_processes);
	TEST(respawn_fails_without_fds);
	TEST(pinned_while_respawn_fails);
	TEST(create_in_little_address_space);
	TEST(pool_call_without_room);
	TEST(event_fd_without_fds);
	TEST(respawn_without_fds);
	return tap_exit();
}
