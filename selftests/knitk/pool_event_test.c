// SPDX-License-Identifier: GPL-2.0
/*
 * The pool's event fd on the module: the host endpoint itself under epoll
 * (edge-triggered), fed by knitk_pool_reap(): calls through one loop, each
 * reaped once, none lost; the fd stays quiet while nothing is pending.
 * Small counts: the guest runs under TCG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_pool.h"

#define POOL_TASKS_SLEEP_STEP_US	500
#include "../../lib/tests/pool_tasks.h"

#define CALLS	10000
#define WINDOW	64

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

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	return test_harness_run(argc, argv);
}
