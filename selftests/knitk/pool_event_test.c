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

static unsigned char seen[CALLS];

TEST(event_fd_is_host_endpoint_under_epoll)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 2,
				     .knot_flags = KNITK_KNOT_KMOD };
	struct epoll_event ev = { .events = EPOLLIN | EPOLLPRI | EPOLLET };
	unsigned long sent = 0, reaped = 0, bad = 0, dup = 0;
	struct knitk_call *calls[64];
	struct knitk_pool *pool;
	struct knitk_endpoint *knot;
	int fd, ep, n, i;

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
	while (reaped < CALLS) {
		while (sent < CALLS && sent - reaped < WINDOW) {
			uint64_t x = sent;
			struct knitk_call *c;
			int ret = knitk_pool_submit(pool, T_ECHO, &x, sizeof(x), NULL, &c);

			if (ret == -EAGAIN)
				break;
			ASSERT_EQ(0, ret);
			sent++;
		}
		while ((n = knitk_pool_reap(pool, calls, 64)) > 0) {
			for (i = 0; i < n; i++) {
				const void *data;
				uint64_t x;
				size_t len;

				if (knitk_call_status(calls[i]) ||
				    knitk_call_result(calls[i], &data, &len) ||
				    len != sizeof(x)) {
					bad++;
				} else {
					memcpy(&x, data, sizeof(x));
					if (x >= CALLS || seen[x]++)
						dup++;
				}
				knitk_call_release(calls[i]);
			}
			reaped += (unsigned long)n;
		}
		ASSERT_EQ(0, n);
		/* A lost wake would hang here (the runner's watchdog). */
		if (reaped < sent)
			ASSERT_EQ(1, epoll_wait(ep, &ev, 1, -1));
	}
	EXPECT_EQ(CALLS, reaped);
	EXPECT_EQ(0UL, bad);
	EXPECT_EQ(0UL, dup);
	for (i = 0; i < CALLS; i++)
		if (seen[i] != 1)
			break;
	EXPECT_EQ(CALLS, i);
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
