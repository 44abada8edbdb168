// SPDX-License-Identifier: GPL-2.0
/*
 * The endpoint functions at their argument boundaries: endpoints and their
 * fds, parks with far deadlines, steal region sizes at every edge of the
 * rule, and attach of fds that are not knots.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

static void endpoint_boundaries(void)
{
	static const unsigned int bad_db[] = { 2, 62, 64, 65, UINT_MAX };
	struct knitk_geometry g = small_geom(2);
	struct knitk_wake_stats ws;
	struct knitk_doorbell_stats ds;
	struct knitk_endpoint *e, *host;
	struct knitk_producer *p;
	struct knitk_consumer *c;
	uint64_t pending;
	unsigned int i;
	uint32_t gen;

	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX | KNITK_KNOT_KMOD, &e), -EINVAL);
	CHECK_EQ(knitk_endpoint_create(&g, 1U << 4, &e), -EINVAL);
	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_KMOD | KNITK_KNOT_FALLBACK_FUTEX, &e),
		 -EINVAL);
	CHECK_EQ(knitk_endpoint_create(NULL, KNITK_KNOT_FUTEX, &e), -EINVAL);
	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, NULL), -EINVAL);
	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);

	/* Not joined yet. */
	CHECK_EQ(knitk_endpoint_doorbell(host), -ENOTCONN);
	CHECK_EQ(knitk_doorbell_park(host, 0), -ENOTCONN);
	CHECK_EQ(knitk_doorbell_prepare(host, &gen), -ENOTCONN);
	CHECK_EQ(knitk_doorbell_cancel(host), -ENOTCONN);
	CHECK_EQ(knitk_doorbell_kick_self(host), -ENOTCONN);

	/* Joins that are refused take no role. */
	CHECK_EQ(knitk_endpoint_join(host, KNITK_ROLE_HOST, 1), -EINVAL);
	CHECK_EQ(knitk_endpoint_join(host, KNITK_ROLE_WORKER, 2), -EINVAL);
	CHECK_EQ(knitk_endpoint_join(host, KNITK_ROLE_WORKER, UINT_MAX), -EINVAL);
	CHECK(knitk_endpoint_join(host, 0xdead, 0) < 0);
	CHECK(knitk_endpoint_join(NULL, KNITK_ROLE_HOST, 0) < 0);
	for (i = 0; i < 2; i++)
		CHECK_EQ(knitk_endpoint_role(host, i, NULL), 0);
	CHECK_EQ(knitk_endpoint_role(host, KNITK_DOORBELL_HOST, NULL), 0);
	CHECK_EQ(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0), 1);
	CHECK_EQ(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0), -EALREADY);
	CHECK_EQ(knitk_endpoint_join(host, KNITK_ROLE_WORKER, 0), -EALREADY);
	CHECK_EQ(knitk_endpoint_role(host, KNITK_DOORBELL_HOST, &gen), 1);
	CHECK_EQ(gen, 1);

	for (i = 0; i < sizeof(bad_db) / sizeof(bad_db[0]); i++) {
		CHECK_EQ(knitk_endpoint_role(host, bad_db[i], &gen), -EINVAL);
		CHECK_EQ(knitk_endpoint_mark_dead(host, bad_db[i]), -EINVAL);
		CHECK_EQ(knitk_endpoint_return_mailbox(host, bad_db[i]), -EINVAL);
		CHECK_EQ(knitk_endpoint_request_mailbox(host, 0, bad_db[i]), -EINVAL);
	}
	CHECK_EQ(knitk_endpoint_request_mailbox(host, 1, 0), -EINVAL);
	CHECK_EQ(knitk_endpoint_request_mailbox(host, UINT_MAX, 0), -EINVAL);
	CHECK_EQ(knitk_endpoint_mark_dead(host, 0), -ENOENT);
	CHECK_EQ(knitk_mailbox_pending(host, 4, &pending), -EINVAL);
	CHECK_EQ(knitk_mailbox_pending(host, UINT_MAX, &pending), -EINVAL);
	CHECK_EQ(knitk_producer_create(host, 4, &p), -EINVAL);
	CHECK_EQ(knitk_producer_create(host, UINT_MAX, &p), -EINVAL);
	CHECK_EQ(knitk_consumer_create(host, 4, &c), -EINVAL);
	CHECK_EQ(knitk_steal_consumer_create(host, 0, 16, &c), -EOPNOTSUPP);
	/* Bits naming no doorbell of the knot (workers 2..62). */
	CHECK_EQ(knitk_doorbell_ring(host, 1ULL << 2), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring(host, 1ULL << 62), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring_park(host, 1ULL << 2, 0), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring(host, 0), 0);
	CHECK_EQ(knitk_doorbell_ring(host, 3 | (1ULL << KNITK_DOORBELL_HOST)), 0);

	/* Sized output: refused sizes, and the futex backend's -EOPNOTSUPP. */
	ws.size = KNITK_WAKE_STATS_SIZE_VER0 - 1;
	CHECK_EQ(knitk_endpoint_wake_stats(host, &ws), -EINVAL);
	ws.size = 0;
	CHECK_EQ(knitk_endpoint_wake_stats(host, &ws), -EINVAL);
	ws.size = KNITK_SIZED_MAX + 1;
	CHECK_EQ(knitk_endpoint_wake_stats(host, &ws), -E2BIG);
	ws.size = UINT32_MAX;
	CHECK_EQ(knitk_endpoint_wake_stats(host, &ws), -E2BIG);
	CHECK_EQ(knitk_endpoint_doorbell_stats(host, 0, &ds, sizeof(ds)), -EOPNOTSUPP);
	CHECK_EQ(knitk_endpoint_doorbell_stats(host, 0, &ds, 0), -EINVAL);
	CHECK_EQ(knitk_endpoint_doorbell_stats(host, 64, &ds, sizeof(ds)), -EINVAL);
	CHECK_EQ(knitk_endpoint_set_event_fd(host, -2), -EINVAL);
	CHECK_EQ(knitk_endpoint_set_event_fd(host, INT_MIN), -EINVAL);

	/* A deadline of 0 (the past) and one far ahead that a kick ends. */
	CHECK_EQ(knitk_doorbell_park(host, 0), -ETIMEDOUT);
	CHECK_EQ(knitk_doorbell_park(host, 1), -ETIMEDOUT);
	REQUIRE(knitk_doorbell_prepare(host, &gen) == 0);
	CHECK_EQ(knitk_doorbell_kick_self(host), 0);
	CHECK_EQ(knitk_doorbell_wait(host, gen, KNITK_WAIT_FOREVER - 1), 0);
	REQUIRE(knitk_doorbell_prepare(host, &gen) == 0);
	CHECK_EQ(knitk_doorbell_kick_self(host), 0);
	CHECK_EQ(knitk_doorbell_wait(host, gen, (uint64_t)INT64_MAX + 1), 0);

	knitk_endpoint_destroy(host);
}

struct parker {
	struct knitk_endpoint *ep;
	uint64_t deadline;
	int ret;
};

static void *park_main(void *arg)
{
	struct parker *pk = arg;

	pk->ret = knitk_doorbell_park(pk->ep, pk->deadline);
	return NULL;
}

/*
 * Deadlines far ahead, on both sides of 2^63 (a signed comparison would
 * take them for the past): the park sleeps (its sleeping flag is seen
 * set) and ends with the kick, 0, never -ETIMEDOUT.
 */
static void park_far_deadlines(void)
{
	static const uint64_t far[] = { (uint64_t)INT64_MAX, (uint64_t)INT64_MAX + 1,
					(uint64_t)INT64_MAX + 1000000000ULL,
					KNITK_WAIT_FOREVER - 1, KNITK_WAIT_FOREVER };
	struct knitk_geometry g = small_geom(1);
	struct knitk_wake_stats ws = { .size = sizeof(ws) };
	struct knitk_doorbell *db;
	struct knitk_layout l;
	struct knitk_endpoint *host;
	unsigned int i;
	void *base;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) == 1);
	REQUIRE(knitk_endpoint_layout(host, &l, NULL) == 0);
	REQUIRE(knitk_endpoint_base(host, &base) == 0);
	db = (void *)((char *)base + l.doorbell_off +
				     (uint64_t)KNITK_DOORBELL_HOST * l.doorbell_stride);
	for (i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
		struct parker pk = { .ep = host, .deadline = far[i], .ret = 1 };
		pthread_t t;

		REQUIRE(pthread_create(&t, NULL, park_main, &pk) == 0);
		while (!__atomic_load_n(&db->sleeping, __ATOMIC_ACQUIRE))
			sched_yield();
		CHECK_EQ(knitk_doorbell_kick_self(host), 0);
		pthread_join(t, NULL);
		CHECK_EQ(pk.ret, 0);
	}
	REQUIRE(knitk_endpoint_wake_stats(host, &ws) == 0);
	CHECK_EQ(ws.timeouts, 0);
	knitk_endpoint_destroy(host);
}

/* Steal region sizes at every edge of "64 / g >= workers + 1". */
static void steal_region_edges(void)
{
	CHECK_EQ(knitk_steal_region_lanes(0, 0), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(64, 0), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(UINT_MAX, 0), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(1, 0), 32);
	CHECK_EQ(knitk_steal_region_lanes(1, 32), 32);
	CHECK_EQ(knitk_steal_region_lanes(1, 64), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(2, 0), 16);
	CHECK_EQ(knitk_steal_region_lanes(3, 0), 16);
	CHECK_EQ(knitk_steal_region_lanes(3, 16), 16);
	CHECK_EQ(knitk_steal_region_lanes(4, 16), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(4, 0), 8);
	CHECK_EQ(knitk_steal_region_lanes(31, 0), 2);
	CHECK_EQ(knitk_steal_region_lanes(32, 0), 1);
	CHECK_EQ(knitk_steal_region_lanes(63, 0), 1);
	CHECK_EQ(knitk_steal_region_lanes(63, 1), 1);
	CHECK_EQ(knitk_steal_region_lanes(63, 2), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(2, 3), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(2, UINT_MAX), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(2, 1U << 31), -EINVAL);
}

/*
 * Attach refuses what is not a knot, and a refused attach with
 * KNITK_ATTACH_TAKE_FD leaves the caller's fd open.
 */
static void attach_refuses_non_knots(void)
{
	struct knitk_geometry g = small_geom(1);
	struct knitk_endpoint *host, *e;
	char junk[8192];
	int fds[2], fd, before = count_fds(false);

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	CHECK_EQ(knitk_endpoint_attach(-1, 0, &e), -EINVAL);
	CHECK_EQ(knitk_endpoint_attach(INT_MAX, 0, &e), -EBADF);
	CHECK_EQ(knitk_endpoint_attach(knitk_endpoint_fd(host), 1U << 1, &e), -EINVAL);
	CHECK_EQ(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, NULL), -EINVAL);

	REQUIRE(pipe(fds) == 0);
	CHECK_EQ(knitk_endpoint_attach(fds[0], KNITK_ATTACH_TAKE_FD, &e), -EINVAL);
	CHECK(fcntl(fds[0], F_GETFD) >= 0);
	close(fds[0]);
	close(fds[1]);

	/* An empty, a short, a page of junk, a junk file of the knot's size. */
	fd = memfd_create("junk", MFD_CLOEXEC);
	REQUIRE(fd >= 0);
	CHECK_EQ(knitk_endpoint_attach(fd, KNITK_ATTACH_TAKE_FD, &e), -EINVAL);
	REQUIRE(write(fd, "knitk", 5) == 5);
	CHECK_EQ(knitk_endpoint_attach(fd, KNITK_ATTACH_TAKE_FD, &e), -EINVAL);
	memset(junk, 0xff, sizeof(junk));
	REQUIRE(pwrite(fd, junk, sizeof(junk), 0) == (ssize_t)sizeof(junk));
	CHECK_EQ(knitk_endpoint_attach(fd, KNITK_ATTACH_TAKE_FD, &e), -EINVAL);
	CHECK(fcntl(fd, F_GETFD) >= 0);
	close(fd);

	/* A copy of the knot's control page on a file of another size. */
	fd = memfd_create("copy", MFD_CLOEXEC);
	REQUIRE(fd >= 0);
	REQUIRE(pread(knitk_endpoint_fd(host), junk, 4096, 0) == 4096);
	REQUIRE(pwrite(fd, junk, 4096, 0) == 4096);
	CHECK_EQ(knitk_endpoint_attach(fd, 0, &e), -EINVAL);
	close(fd);

	/* The knot opened read-only cannot be mapped writable. */
	{
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", knitk_endpoint_fd(host));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		REQUIRE(fd >= 0);
		CHECK(knitk_endpoint_attach(fd, KNITK_ATTACH_TAKE_FD, &e) < 0);
		CHECK(fcntl(fd, F_GETFD) >= 0);
		close(fd);
	}
	knitk_endpoint_destroy(host);
	CHECK_EQ(count_fds(false), before);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(endpoint_boundaries);
	TEST(park_far_deadlines);
	TEST(steal_region_edges);
	TEST(attach_refuses_non_knots);
	return tap_exit();
}
