// SPDX-License-Identifier: GPL-2.0
/*
 * Endpoints of one knot: KNITK_IOC_ATTACH by fd, KNITK_IOC_JOIN with a role,
 * and the control page's live mask and per-role generations.
 */
#include "knitk_harness.h"
#include "knitk_test.h"

#define HOST_BIT	(1ULL << KNITK_DOORBELL_HOST)

FIXTURE(knot) {
	struct knot k;
	int ep;		/* a second, unattached endpoint */
};

FIXTURE_SETUP(knot)
{
	struct knitk_geometry g;

	KNITK_REQUIRE_DEV();
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	self->ep = knitk_open();
	ASSERT_LE(0, self->ep);
}

FIXTURE_TEARDOWN(knot)
{
	if (self->ep >= 0)
		close(self->ep);
	knot_close(&self->k);
}

TEST_F(knot, attach_bad_fd_ebadf)
{
	int closed = dup(self->k.fd);

	ASSERT_LE(0, closed);
	ASSERT_EQ(0, close(closed));
	EXPECT_EQ(-EBADF, knitk_attach(self->ep, -1, NULL));
	EXPECT_EQ(-EBADF, knitk_attach(self->ep, closed, NULL));
	EXPECT_EQ(-EBADF, knitk_attach(self->ep, 1 << 20, NULL));
}

TEST_F(knot, attach_non_knitk_fd_einval)
{
	int p[2], null;

	ASSERT_EQ(0, pipe(p));
	null = open("/dev/null", O_RDWR);
	ASSERT_LE(0, null);
	EXPECT_EQ(-EINVAL, knitk_attach(self->ep, p[0], NULL));
	EXPECT_EQ(-EINVAL, knitk_attach(self->ep, null, NULL));
	close(p[0]);
	close(p[1]);
	close(null);
}

TEST_F(knot, attach_unattached_source_enotconn)
{
	int bare = knitk_open();

	ASSERT_LE(0, bare);
	EXPECT_EQ(-ENOTCONN, knitk_attach(self->ep, bare, NULL));
	close(bare);
}

TEST_F(knot, attach_flags_einval)
{
	struct knitk_attach a = { .fd = self->k.fd, .flags = 1 };

	EXPECT_EQ(-EINVAL, knitk_ioctl(self->ep, KNITK_IOC_ATTACH, &a));
	a.flags = 1U << 31;
	EXPECT_EQ(-EINVAL, knitk_ioctl(self->ep, KNITK_IOC_ATTACH, &a));
	a.flags = 0;
	EXPECT_EQ(0, knitk_ioctl(self->ep, KNITK_IOC_ATTACH, &a));
}

TEST_F(knot, attach_returns_layout_and_maps_same_knot)
{
	struct knot b = { .fd = self->ep };

	ASSERT_EQ(0, knitk_attach(b.fd, self->k.fd, &b.layout));
	EXPECT_EQ(0, memcmp(&self->k.layout, &b.layout, sizeof(b.layout)));
	ASSERT_EQ(0, knot_map(&b));
	EXPECT_EQ(KNITK_MAGIC, b.ctl->magic);
	self->k.data[100] = 0x77;
	b.data[200] = 0x88;
	EXPECT_EQ(0x77, b.data[100]);
	EXPECT_EQ(0x88, self->k.data[200]);
	knot_unmap(&b);
}

/* An attached endpoint is as good a source as the creator. */
TEST_F(knot, attach_through_attached_endpoint)
{
	struct knot c = { 0 };

	ASSERT_EQ(0, knitk_attach(self->ep, self->k.fd, NULL));
	c.fd = knitk_open();
	ASSERT_LE(0, c.fd);
	ASSERT_EQ(0, knitk_attach(c.fd, self->ep, &c.layout));
	ASSERT_EQ(0, knot_map(&c));
	self->k.data[300] = 0x99;
	EXPECT_EQ(0x99, c.data[300]);
	knot_close(&c);
}

/* An endpoint belongs to one knot: a second CREATE or ATTACH is refused. */
TEST_F(knot, attach_twice_ebusy)
{
	ASSERT_EQ(0, knitk_attach(self->ep, self->k.fd, NULL));
	EXPECT_EQ(-EBUSY, knitk_attach(self->ep, self->k.fd, NULL));
}

TEST_F(knot, attach_after_create_ebusy)
{
	struct knot other;
	struct knitk_geometry g;

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&other, &g));
	EXPECT_EQ(-EBUSY, knitk_attach(self->k.fd, other.fd, NULL));
	knot_close(&other);
}

TEST_F(knot, create_after_attach_ebusy)
{
	struct knitk_geometry g;

	knitk_geom_small(&g);
	ASSERT_EQ(0, knitk_attach(self->ep, self->k.fd, NULL));
	EXPECT_EQ(-EBUSY, knitk_create(self->ep, &g, NULL));
}

TEST_F(knot, join_host_live_and_generation)
{
	const struct knitk_control *ctl = self->k.ctl;
	__u32 gen = 0;

	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, &gen));
	EXPECT_EQ(1U, gen);
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	EXPECT_EQ(0ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(1U, ctl->generation[KNITK_DOORBELL_HOST]);
	EXPECT_EQ(0U, ctl->generation[0]);
}

TEST_F(knot, join_worker_live_and_generation)
{
	const struct knitk_control *ctl = self->k.ctl;
	__u32 gen = 0;

	ASSERT_EQ(0, knitk_attach(self->ep, self->k.fd, NULL));
	ASSERT_EQ(0, knitk_join(self->ep, KNITK_ROLE_WORKER, 1, &gen));
	EXPECT_EQ(1U, gen);
	EXPECT_EQ(1ULL << 1, knitk_load64(&ctl->live));
	EXPECT_EQ(1U, ctl->generation[1]);
	EXPECT_EQ(0U, ctl->generation[0]);
	EXPECT_EQ(0U, ctl->generation[KNITK_DOORBELL_HOST]);

	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_WORKER, 0, &gen));
	EXPECT_EQ(1U, gen);
	EXPECT_EQ(3ULL, knitk_load64(&ctl->live));
}

TEST_F(knot, join_host_taken_ebusy)
{
	ASSERT_EQ(0, knitk_attach(self->ep, self->k.fd, NULL));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	EXPECT_EQ(-EBUSY, knitk_join(self->ep, KNITK_ROLE_HOST, 0, NULL));
	EXPECT_EQ(HOST_BIT, knitk_load64(&self->k.ctl->live));
	EXPECT_EQ(1U, self->k.ctl->generation[KNITK_DOORBELL_HOST]);
	/* The refused endpoint has not joined: it may still take a free role. */
	EXPECT_EQ(0, knitk_join(self->ep, KNITK_ROLE_WORKER, 0, NULL));
}

TEST_F(knot, join_worker_taken_ebusy)
{
	ASSERT_EQ(0, knitk_attach(self->ep, self->k.fd, NULL));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_WORKER, 1, NULL));
	EXPECT_EQ(-EBUSY, knitk_join(self->ep, KNITK_ROLE_WORKER, 1, NULL));
	EXPECT_EQ(1ULL << 1, knitk_load64(&self->k.ctl->live));
	EXPECT_EQ(1U, self->k.ctl->generation[1]);
}

TEST_F(knot, join_worker_out_of_range_einval)
{
	static const __u32 bad[] = { 2, 3, KNITK_MAX_WORKERS - 1,
				     KNITK_DOORBELL_HOST, KNITK_ROLE_SLOTS,
				     ~0U };
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_EQ(-EINVAL, knitk_join(self->k.fd, KNITK_ROLE_WORKER,
					      bad[i], NULL))
			TH_LOG("worker %u of 2 accepted", bad[i]);
	EXPECT_EQ(0ULL, knitk_load64(&self->k.ctl->live));
}

TEST_F(knot, join_bad_role_or_flags_einval)
{
	struct knitk_join j = { .role = KNITK_ROLE_WORKER, .flags = 1 };

	EXPECT_EQ(-EINVAL, knitk_join(self->k.fd, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, knitk_join(self->k.fd, 3, 0, NULL));
	EXPECT_EQ(-EINVAL, knitk_join(self->k.fd, ~0U, 0, NULL));
	/* The host has no worker id. */
	EXPECT_EQ(-EINVAL, knitk_join(self->k.fd, KNITK_ROLE_HOST, 1, NULL));
	EXPECT_EQ(-EINVAL, knitk_ioctl(self->k.fd, KNITK_IOC_JOIN, &j));
	EXPECT_EQ(0ULL, knitk_load64(&self->k.ctl->live));
	EXPECT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_WORKER, 0, NULL));
}

TEST_F(knot, join_twice_ebusy)
{
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_WORKER, 0, NULL));
	EXPECT_EQ(-EBUSY, knitk_join(self->k.fd, KNITK_ROLE_WORKER, 0, NULL));
	EXPECT_EQ(-EBUSY, knitk_join(self->k.fd, KNITK_ROLE_WORKER, 1, NULL));
	EXPECT_EQ(-EBUSY, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	EXPECT_EQ(1ULL, knitk_load64(&self->k.ctl->live));
	EXPECT_EQ(1U, self->k.ctl->generation[0]);
}

/* Each join of a role counts; other roles' generations do not move. */
TEST_F(knot, generation_counts_joins_per_role)
{
	const struct knitk_control *ctl = self->k.ctl;
	__u32 gen = 0;
	int i, fd;

	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	for (i = 1; i <= 3; i++) {
		fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
		ASSERT_LE(0, fd);
		EXPECT_EQ((__u32)i, ctl->generation[1]);
		EXPECT_EQ(HOST_BIT | 2ULL, knitk_load64(&ctl->live));
		close(fd);
		EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
		EXPECT_EQ(2ULL, knitk_load64(&ctl->dead));
		EXPECT_EQ((__u32)i, knitk_load32(&ctl->death_seq));
	}
	ASSERT_EQ(0, knitk_attach(self->ep, self->k.fd, NULL));
	ASSERT_EQ(0, knitk_join(self->ep, KNITK_ROLE_WORKER, 1, &gen));
	EXPECT_EQ(4U, gen);
	EXPECT_EQ(0ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(0U, ctl->generation[0]);
	EXPECT_EQ(1U, ctl->generation[KNITK_DOORBELL_HOST]);
}

/*
 * A process that never inherited the knot (forked before it existed) gets
 * an fd of it over a Unix socket, attaches and joins through it.
 */
TEST(attach_by_fd_passed_over_unix_socket)
{
	struct knitk_geometry g;
	struct knot k;
	int sv[2], status;
	char done;
	pid_t pid;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct knot c = { 0 };
		int got;

		close(sv[0]);
		got = knitk_recv_fd(sv[1]);
		if (got < 0)
			_exit(10);
		c.fd = knitk_open();
		if (c.fd < 0)
			_exit(11);
		if (knitk_attach(c.fd, got, &c.layout))
			_exit(12);
		close(got);
		if (knot_map(&c))
			_exit(13);
		if (c.data[42] != 0x42)
			_exit(14);
		if (knitk_join(c.fd, KNITK_ROLE_WORKER, 1, NULL))
			_exit(15);
		c.data[43] = 0x43;
		if (write(sv[1], "j", 1) != 1)
			_exit(16);
		/* Hold the role until the parent has looked. */
		if (read(sv[1], &done, 1) != 1)
			_exit(17);
		knot_close(&c);
		_exit(0);
	}
	close(sv[1]);
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&k, &g));
	k.data[42] = 0x42;
	ASSERT_EQ(0, knitk_send_fd(sv[0], k.fd));
	if (read(sv[0], &done, 1) != 1) {
		/* The receiver died early: its exit status names the step. */
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_EQ(0, WEXITSTATUS(status))
			TH_LOG("receiving process failed at step %d",
			       WEXITSTATUS(status));
		ASSERT_TRUE(0) TH_LOG("receiving process exited silently");
	}
	EXPECT_EQ(0x43, k.data[43]);
	EXPECT_EQ(1ULL << 1, knitk_load64(&k.ctl->live));
	EXPECT_EQ(1U, k.ctl->generation[1]);
	ASSERT_EQ(1, write(sv[0], "d", 1));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status))
		TH_LOG("receiving process failed at step %d",
		       WEXITSTATUS(status));
	EXPECT_EQ(1ULL << 1, knitk_load64(&k.ctl->dead));
	close(sv[0]);
	knot_close(&k);
}

TEST_HARNESS_MAIN
