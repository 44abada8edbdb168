// SPDX-License-Identifier: GPL-2.0
/*
 * The pool's event fd on the module: the host endpoint itself under epoll
 * (edge-triggered), fed by knitk_pool_reap(): calls through one loop, each
 * reaped once, none lost; the fd stays quiet while nothing is pending.
 * With stealing process workers, a full request arena is -EAGAIN at
 * submit (never a wait) and a worker killed mid-call has that call and
 * each queued behind it reaped once, the respawned worker serving on; a
 * forked child that closes every inherited fd, and the close of a dup()
 * of the event fd, are no death of the host role.
 * Small counts: the guest runs under TCG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_pool.h"
#include "knitk_pool_guest.h"

#define CALLS	10000
#define WINDOW	64

/* Only a lost wake takes this long. */
#define HANG_GUARD_MS	(120 * 1000)

TEST(event_fd_is_host_endpoint_under_epoll)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 2,
				     .knot_flags = KNITK_KNOT_KMOD };
	struct epoll_event ev = { .events = EPOLLIN | EPOLLPRI | EPOLLET };
	struct knitk_call *calls[64];
	struct knitk_pool *pool;
	struct knitk_endpoint *knot;
	struct echo_loop r;
	int fd, ep;

	if (access("/dev/knitk", F_OK))
		SKIP(return, "/dev/knitk absent: modprobe knitk first");
	ASSERT_EQ(0, knitk_pool_create(&o, &test_tasks, &pool));
	ASSERT_EQ(0, knitk_pool_endpoint(pool, &knot));
	fd = knitk_pool_event_fd(pool);
	ASSERT_EQ(knitk_endpoint_fd(knot), fd);
	ep = epoll_create1(EPOLL_CLOEXEC);
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
	/* Armed and idle: no event. */
	EXPECT_EQ(0, knitk_pool_reap(pool, calls, 64));
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 0));
	ASSERT_EQ(0, echo_loop(pool, ep, CALLS, WINDOW, &r))
		TH_LOG("%s failed", r.failed);
	EXPECT_EQ(CALLS, r.reaped);
	EXPECT_EQ(0UL, r.bad);
	EXPECT_EQ(0UL, r.dup);
	EXPECT_EQ(CALLS, r.once);
	/* Everything reaped and the fd armed: quiet again. */
	EXPECT_EQ(0, knitk_pool_reap(pool, calls, 64));
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 0));
	close(ep);
	knitk_pool_destroy(pool);
}

/* A pool on the module with a request arena of 64 KiB, or NULL. */
static struct knitk_pool *event_pool(unsigned int kind, unsigned int dispatch,
				     unsigned int workers, unsigned int flags)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = kind, .nr_workers = workers,
		.flags = flags, .knot_flags = KNITK_KNOT_KMOD,
		.arena_bytes = 64 * 1024, .dispatch = dispatch,
	};
	struct knitk_pool *pool = NULL;

	return knitk_pool_create(&o, &test_tasks, &pool) ? NULL : pool;
}

/* Reap until @n calls are in @kept, waiting on @ep (epoll) when idle. */
static int reap_n(struct knitk_pool *pool, int ep, struct knitk_call **kept,
		  unsigned int n)
{
	unsigned int got = 0;

	while (got < n) {
		struct epoll_event ev;
		int r = knitk_pool_reap(pool, kept + got, n - got);

		if (r < 0)
			return r;
		got += (unsigned int)r;
		if (!r && epoll_wait(ep, &ev, 1, HANG_GUARD_MS) == 0)
			return -ETIME;
	}
	return (int)got;
}

static int epoll_on(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLPRI | EPOLLET };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev))
		return -1;
	return ep;
}

/*
 * Event mode on a stealing pool of process workers on the module: with
 * the worker held by a long call, big calls fill the request arena and
 * the next submit is -EAGAIN (never a wait), and the refused submit is
 * not counted; every call is reaped once.
 */
TEST(steal_event_arena_full)
{
	static unsigned char big[40 * 1024];
	struct knitk_call *c[8], *kept[8];
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	uint32_t ms = 600000;
	unsigned int n = 0, i, ok = 0;
	int fd, ep, ret;

	REQUIRE_KNITK();
	pool = event_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL, 1, 0);
	ASSERT_NE(NULL, pool);
	fd = knitk_pool_event_fd(pool);
	ASSERT_LE(0, fd);
	ep = epoll_on(fd);
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), NULL, &c[n]));
	n++;
	memset(big, 0x3c, sizeof(big));
	for (;;) {
		ASSERT_GT(8U, n);
		ret = knitk_pool_submit(pool, T_ECHO, big, sizeof(big), NULL, &c[n]);
		if (ret)
			break;
		n++;
	}
	EXPECT_EQ(-EAGAIN, ret);
	EXPECT_LE(2U, n);
	ASSERT_EQ(0, knitk_pool_stats(pool, &st));
	EXPECT_EQ((uint64_t)n, st.submitted);
	EXPECT_EQ(0, knitk_call_abort(c[0]));
	ASSERT_EQ((int)n, reap_n(pool, ep, kept, n));
	for (i = 0; i < n; i++) {
		const void *d;
		size_t len;

		if (kept[i] != c[0] && !knitk_call_status(kept[i]) &&
		    !knitk_call_result(kept[i], &d, &len) && len == sizeof(big) &&
		    !memcmp(d, big, len))
			ok++;
		knitk_call_release(kept[i]);
	}
	EXPECT_EQ(n - 1, ok);
	close(ep);
	knitk_pool_destroy(pool);
}

/*
 * Event mode, a stealing process worker killed with -9 while it runs a
 * call (T_GATE: it said so through a pipe): the loop (edge-triggered,
 * EPOLLPRI for deaths) reaps that call -EOWNERDEAD and each call queued
 * behind it once, with its result or -EOWNERDEAD; the respawned worker
 * serves the next calls, all through reap.
 */
TEST(steal_event_worker_killed)
{
	struct knitk_call *gate, *c[20], *kept[20];
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	struct { int32_t ready, gate; uint32_t n; } ga;
	int rp[2], gp[2];
	unsigned int i, k, bad = 0;
	int fd, ep, ret;
	char b;

	REQUIRE_KNITK();
	ASSERT_EQ(0, pipe(rp));
	ASSERT_EQ(0, pipe(gp));
	pool = event_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL, 1,
			  KNITK_POOL_RESPAWN);
	ASSERT_NE(NULL, pool);
	fd = knitk_pool_event_fd(pool);
	ASSERT_LE(0, fd);
	ep = epoll_on(fd);
	ASSERT_LE(0, ep);
	ga.ready = rp[1];
	ga.gate = gp[0];
	ga.n = 0;
	ASSERT_EQ(0, knitk_pool_submit(pool, T_GATE, &ga, sizeof(ga), NULL, &gate));
	ASSERT_EQ(1, read(rp[0], &b, 1));
	for (i = 0; i < 5; i++) {
		uint64_t x = i;

		ASSERT_EQ(0, knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i]));
	}
	ASSERT_EQ(0, knitk_pool_worker_info(pool, 0, &wi));
	ASSERT_LT(0, wi.pid);
	ASSERT_EQ(0, kill(wi.pid, SIGKILL));
	ASSERT_EQ(6, reap_n(pool, ep, kept, 6));
	for (i = 0; i < 6; i++) {
		int s = knitk_call_status(kept[i]);

		if (kept[i] == gate) {
			bad += s != -EOWNERDEAD;
			continue;
		}
		for (k = 0; k < 5; k++)
			if (kept[i] == c[k])
				break;
		if (k == 5 || (s != -EOWNERDEAD && (s || !mix_result_ok(kept[i], k))))
			bad++;
	}
	EXPECT_EQ(0U, bad);
	for (i = 0; i < 6; i++)
		knitk_call_release(kept[i]);
	EXPECT_EQ(0, knitk_pool_reap(pool, kept, 1));
	/* The pool serves on, through reap. */
	for (i = 0; i < 20; i++) {
		uint64_t x = 100 + i;

		while ((ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i])) == -EAGAIN)
			usleep(1000);
		ASSERT_EQ(0, ret);
	}
	ASSERT_EQ(20, reap_n(pool, ep, kept, 20));
	for (i = 0; i < 20; i++) {
		for (k = 0; k < 20; k++)
			if (kept[i] == c[k])
				break;
		if (k == 20 || knitk_call_status(kept[i]) ||
		    !mix_result_ok(kept[i], 100 + k))
			bad++;
		knitk_call_release(kept[i]);
	}
	EXPECT_EQ(0U, bad);
	ASSERT_EQ(0, knitk_pool_stats(pool, &st));
	EXPECT_EQ(st.submitted, st.completed);
	EXPECT_LE(1ULL, st.ownerdead);
	EXPECT_EQ(1ULL, st.deaths);
	close(ep);
	knitk_pool_destroy(pool);
	close(rp[0]);
	close(rp[1]);
	close(gp[0]);
	close(gp[1]);
}

/*
 * Event mode on the module: a forked child that closes every inherited
 * fd (the host endpoint among them) and exits, and the close of a dup()
 * of the event fd, are no death of the host role; the pool keeps its
 * role and serves, through reap.
 */
TEST(event_fd_fork_child_is_no_death)
{
	struct knitk_call *c[10], *kept[10];
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_endpoint *knot;
	struct knitk_pool *pool;
	unsigned int i, k, bad = 0;
	int fd, ep, status, dupfd;
	pid_t pid;

	REQUIRE_KNITK();
	pool = event_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 2, 0);
	ASSERT_NE(NULL, pool);
	fd = knitk_pool_event_fd(pool);
	ASSERT_LE(0, fd);
	ep = epoll_on(fd);
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, knitk_pool_endpoint(pool, &knot));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int f;

		for (f = 0; f < 1024; f++)
			close(f);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	/* An event loop library that closes its dup() of the fd: no end either. */
	dupfd = dup(fd);
	ASSERT_LE(0, dupfd);
	ASSERT_EQ(0, close(dupfd));
	EXPECT_EQ(1, knitk_endpoint_role(knot, KNITK_DOORBELL_HOST, NULL));
	EXPECT_EQ(0, knitk_endpoint_host_dead(knot));
	for (i = 0; i < 10; i++) {
		uint64_t x = i;

		ASSERT_EQ(0, knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i]));
	}
	ASSERT_EQ(10, reap_n(pool, ep, kept, 10));
	for (i = 0; i < 10; i++) {
		for (k = 0; k < 10; k++)
			if (kept[i] == c[k])
				break;
		if (k == 10 || knitk_call_status(kept[i]) || !mix_result_ok(kept[i], k))
			bad++;
		knitk_call_release(kept[i]);
	}
	EXPECT_EQ(0U, bad);
	ASSERT_EQ(0, knitk_pool_stats(pool, &st));
	EXPECT_EQ(0ULL, st.deaths);
	/* A version-0 worker info: the module's counters, none past its size. */
	{
		unsigned char wi[KNITK_WORKER_INFO_SIZE_VER1 + 16];
		struct knitk_worker_info *w = (struct knitk_worker_info *)wi;
		uint32_t sz = KNITK_WORKER_INFO_SIZE_VER0;

		memset(wi, 0xee, sizeof(wi));
		memcpy(wi, &sz, 4);
		ASSERT_EQ(0, knitk_pool_worker_info(pool, 0, w));
		EXPECT_EQ(KNITK_WORKER_INFO_SIZE_VER0, w->size);
		EXPECT_EQ(1U, w->db_valid);
		for (i = KNITK_WORKER_INFO_SIZE_VER0; i < sizeof(wi); i++)
			if (wi[i] != 0xee)
				break;
		EXPECT_EQ(sizeof(wi), i);
	}
	close(ep);
	knitk_pool_destroy(pool);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	return test_harness_run(argc, argv);
}
