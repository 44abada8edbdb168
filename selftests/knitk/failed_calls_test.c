// SPDX-License-Identifier: GPL-2.0
/*
 * A refused CREATE, ATTACH or JOIN changes nothing: a geometry out of its
 * limits or past max_knot_bytes, an ATTACH to no fd, a non-knitk fd, an
 * unattached endpoint or the endpoint itself, a JOIN of a role out of
 * range (worker 63, the host's slot, and 64 of a knot of 63 workers) or
 * held, and a CREATE or ATTACH whose result cannot be written back leave
 * the endpoint as it was (it can CREATE, ATTACH or JOIN afterwards), no
 * knot live, no fd, no generation counted; an ATTACH returns the knot's
 * layout over whatever the caller passed in.
 */
#define _GNU_SOURCE
#include <sys/epoll.h>

#include "knitk_fixtures.h"
#include "../../lib/tests/proc_count.h"

/*
 * ATTACH naming the endpoint itself: -ENOTCONN while unattached (the
 * source is not attached), -EBUSY once attached; a non-knitk fd or an
 * O_PATH open of the device is refused; a layout filled with garbage on
 * input comes back as the knot's, reserved words zero.
 */
TEST_F(k7, attach_to_itself_and_odd_sources)
{
	struct knitk_attach a;
	int u, o, e, ret;
	unsigned int i;

	u = knitk_open();
	ASSERT_LE(0, u);
	EXPECT_EQ(-ENOTCONN, knitk_attach(u, u, NULL));
	o = open(KNITK_DEV, O_PATH | O_CLOEXEC);
	ASSERT_LE(0, o);
	ret = knitk_attach(u, o, NULL);
	EXPECT_TRUE(ret == -EBADF || ret == -EINVAL) TH_LOG("O_PATH: %d", ret);
	e = epoll_create1(EPOLL_CLOEXEC);
	ASSERT_LE(0, e);
	EXPECT_EQ(-EINVAL, knitk_attach(u, e, NULL));
	EXPECT_EQ(-EBADF, knitk_attach(u, -1, NULL));
	EXPECT_EQ(-EBADF, knitk_attach(u, 1 << 30, NULL));

	memset(&a, 0xa5, sizeof(a));
	a.fd = self->k.fd;
	a.flags = 0;
	ASSERT_EQ(0, knitk_ioctl(u, KNITK_IOC_ATTACH, &a));
	EXPECT_EQ(0, memcmp(&a.layout, &self->k.layout, sizeof(a.layout)));
	for (i = 0; i < 4; i++)
		EXPECT_EQ(0ULL, a.layout.reserved[i]);
	EXPECT_EQ(-EBUSY, knitk_attach(u, u, NULL));
	EXPECT_EQ(-EBUSY, knitk_attach(self->k.fd, self->k.fd, NULL));
	/* Still the one knot: u's poll and join work on it. */
	EXPECT_EQ(0, knitk_join(u, KNITK_ROLE_WORKER, 1, NULL));
	EXPECT_EQ((1ULL << 0) | (1ULL << 1) | HOST_BIT, self->k.ctl->live);
	close(e);
	close(o);
	close(u);
}

/*
 * A CREATE, ATTACH or JOIN that fails leaves the endpoint as it was (it
 * can CREATE, ATTACH or JOIN afterwards), no knot live, no fd, and no
 * generation counted for a refused join.
 */
TEST(failed_calls_leave_endpoint_usable)
{
	struct knitk_geometry g, good;
	struct knitk_control *ctl;
	struct knitk_layout l;
	int fds0, e, a, u, p[2];
	__u32 gen;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	fds0 = count_fds(false);
	knitk_geom_small(&good);

	e = knitk_open();
	ASSERT_LE(0, e);
	g = good;
	g.nr_workers = 0;
	EXPECT_EQ(-EINVAL, knitk_create(e, &g, NULL));
	g = good;
	g.arena_bytes = KNITK_MAX_ARENA_BYTES + KNITK_ARENA_ALIGN;
	EXPECT_EQ(-EINVAL, knitk_create(e, &g, NULL));
	/* Within every limit of the geometry, far past max_knot_bytes. */
	g = good;
	g.arena_bytes = KNITK_MAX_ARENA_BYTES;
	EXPECT_EQ(-E2BIG, knitk_create(e, &g, NULL));
	g = good;
	g.nr_workers = KNITK_MAX_WORKERS;
	g.nr_submitters = KNITK_MAX_SUBMITTERS;
	g.inline_bytes = KNITK_MAX_INLINE_BYTES;
	g.arena_bytes = KNITK_MAX_ARENA_BYTES;
	g.abort_bits = KNITK_MAX_ABORT_BITS;
	EXPECT_EQ(-E2BIG, knitk_create(e, &g, NULL));
	EXPECT_EQ(0, knitk_live_knots());
	EXPECT_EQ(-ENOTCONN, knitk_join(e, KNITK_ROLE_HOST, 0, NULL));
	ASSERT_EQ(0, knitk_create(e, &good, &l));
	EXPECT_EQ(1, knitk_live_knots());

	a = knitk_open();
	u = knitk_open();
	ASSERT_LE(0, a);
	ASSERT_LE(0, u);
	ASSERT_EQ(0, pipe2(p, O_CLOEXEC));
	EXPECT_EQ(-EBADF, knitk_attach(a, -1, NULL));
	EXPECT_EQ(-EINVAL, knitk_attach(a, p[0], NULL));
	EXPECT_EQ(-ENOTCONN, knitk_attach(a, u, NULL));
	ASSERT_EQ(0, knitk_attach(a, e, NULL));

	EXPECT_EQ(-EINVAL, knitk_join(a, KNITK_ROLE_WORKER, 2, NULL));
	EXPECT_EQ(-EINVAL, knitk_join(a, KNITK_ROLE_WORKER, ~0U, NULL));
	EXPECT_EQ(-EINVAL, knitk_join(a, KNITK_ROLE_HOST, 1, NULL));
	EXPECT_EQ(-EINVAL, knitk_join(a, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, knitk_join(a, 3, 0, NULL));
	ASSERT_EQ(0, knitk_join(e, KNITK_ROLE_WORKER, 0, NULL));
	EXPECT_EQ(-EBUSY, knitk_join(a, KNITK_ROLE_WORKER, 0, NULL));
	ASSERT_EQ(0, knitk_join(a, KNITK_ROLE_WORKER, 1, &gen));
	EXPECT_EQ(1U, gen);
	EXPECT_EQ(-EBUSY, knitk_join(a, KNITK_ROLE_HOST, 0, NULL));

	ctl = mmap(NULL, l.control_size, PROT_READ, MAP_SHARED, e, 0);
	ASSERT_NE(MAP_FAILED, ctl);
	EXPECT_EQ(1U, ctl->generation[0]);
	EXPECT_EQ(1U, ctl->generation[1]);
	EXPECT_EQ(0U, ctl->generation[HOST]);
	EXPECT_EQ(3ULL, ctl->live);
	EXPECT_EQ(0ULL, ctl->dead);
	munmap(ctl, l.control_size);

	close(p[0]);
	close(p[1]);
	close(u);
	close(a);
	close(e);
	EXPECT_EQ(0, knitk_live_wait_zero());
	EXPECT_EQ(fds0, count_fds(false));
}

/* A copy of @len bytes of @arg on a page of its own, made read-only. */
static void *read_only_copy(const void *arg, size_t len)
{
	void *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memcpy(p, arg, len);
	if (mprotect(p, PAGE, PROT_READ)) {
		munmap(p, PAGE);
		return NULL;
	}
	return p;
}

/*
 * CREATE and ATTACH whose result cannot be written back fail with -EFAULT
 * and, like every refused call, leave the endpoint unattached: no knot is
 * left live, and the same call with a writable argument succeeds.
 */
TEST(create_attach_unwritable_arg_leave_nothing)
{
	struct knitk_create c = { 0 };
	struct knitk_attach a = { 0 };
	struct knitk_layout l;
	int e, f, src;
	void *ro;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	knitk_geom_small(&c.geometry);
	e = knitk_open();
	ASSERT_LE(0, e);
	ro = read_only_copy(&c, sizeof(c));
	ASSERT_NE(NULL, ro);
	EXPECT_EQ(-EFAULT, knitk_ioctl(e, KNITK_IOC_CREATE, ro));
	munmap(ro, PAGE);
	EXPECT_EQ(0, knitk_live_knots());
	EXPECT_EQ(-ENOTCONN, knitk_join(e, KNITK_ROLE_HOST, 0, NULL));
	EXPECT_EQ(0, knitk_create(e, &c.geometry, &l));

	src = knitk_open();
	ASSERT_LE(0, src);
	ASSERT_EQ(0, knitk_create(src, &c.geometry, NULL));
	f = knitk_open();
	ASSERT_LE(0, f);
	a.fd = src;
	ro = read_only_copy(&a, sizeof(a));
	ASSERT_NE(NULL, ro);
	EXPECT_EQ(-EFAULT, knitk_ioctl(f, KNITK_IOC_ATTACH, ro));
	munmap(ro, PAGE);
	EXPECT_EQ(-ENOTCONN, knitk_join(f, KNITK_ROLE_HOST, 0, NULL));
	/* Refused, f can still attach: to the other knot. */
	EXPECT_EQ(0, knitk_attach(f, e, NULL));
	close(src);
	EXPECT_EQ(0, knitk_join(f, KNITK_ROLE_HOST, 0, NULL));
	close(f);
	close(e);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/*
 * 63 workers: worker 62 is the last, 63 (the host's slot) and 64 are no
 * worker; doorbell 62 and the host's are valid everywhere.
 */
TEST(worker_ids_at_the_edge_of_63)
{
	struct knitk_doorbell_stats st;
	struct knitk_geometry g;
	struct knot k;
	__u64 woken;
	int e;

	KNITK_REQUIRE_DEV();
	knitk_geom(&g, 0, KNITK_MAX_WORKERS, 1, 0, 0, 0);
	ASSERT_EQ(0, knot_make(&k, &g));
	e = knot_attached(&k);
	ASSERT_LE(0, e);
	EXPECT_EQ(-EINVAL, knitk_join(e, KNITK_ROLE_WORKER, 63, NULL));
	EXPECT_EQ(-EINVAL, knitk_join(e, KNITK_ROLE_WORKER, 64, NULL));
	EXPECT_EQ(0ULL, k.ctl->live);
	ASSERT_EQ(0, knitk_join(e, KNITK_ROLE_WORKER, 62, NULL));
	ASSERT_EQ(0, knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL));
	EXPECT_EQ((1ULL << 62) | HOST_BIT, k.ctl->live);
	EXPECT_EQ(0, knitk_kick(k.fd, (1ULL << 62) | HOST_BIT, &woken));
	EXPECT_EQ((1ULL << 62) | HOST_BIT, woken);
	EXPECT_EQ(0, knitk_stats(k.fd, 62, &st));
	EXPECT_EQ(1ULL, st.kicks);
	EXPECT_EQ(0, knitk_stats(k.fd, HOST, &st));
	EXPECT_EQ(1ULL, st.kicks);
	close(e);
	knot_close(&k);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST_HARNESS_MAIN
