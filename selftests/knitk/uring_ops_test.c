// SPDX-License-Identifier: GPL-2.0
/*
 * KNITK_URING_CMD_WAIT under io_uring's own operations: cancelled by
 * IORING_OP_ASYNC_CANCEL and by a linked timeout (never a kernel-internal
 * restart code), through a registered file (IOSQE_FIXED_FILE), from an
 * SQPOLL ring's thread, refused cleanly by an IOPOLL ring, eight waits on
 * one doorbell (one of them in io-wq) ended by one kick; a ring wait whose
 * role ended (-ENOTCONN) or ends under it (-ECANCELED), the owner's fd
 * closed by IORING_OP_CLOSE inline and from io-wq, and a registered file
 * table that is no file table of the process; and the SQE
 * knitk_prep_doorbell_wait builds, on 64- and 128-byte rings.  Written
 * from the uAPI header and the man pages alone.
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "knitk.h"
#include "knitk_uring.h"
#include "knitk_fixtures.h"
#include "knitk_ring.h"

/* A wait that an explicit or linked cancel ends: never a restart code. */
static bool cancel_res_ok(int res)
{
	return res == -ECANCELED || res == -EINTR;
}

FIXTURE(wait) {
	struct knot k;
	int worker;
	struct io_uring ring;
	bool ring_up;
};

FIXTURE_SETUP(wait)
{
	KNITK_REQUIRE_DEV();
	ring_knot_open(_metadata, &self->k, &self->worker, &self->ring,
		       &self->ring_up);
}

FIXTURE_TEARDOWN(wait)
{
	ring_knot_close(&self->k, self->worker, &self->ring, self->ring_up);
}

/* The next SQE of @ring; the test fails if the ring is full. */
static struct io_uring_sqe *sqe_of(struct __test_metadata *_metadata,
				   struct io_uring *ring)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	ASSERT_NE(NULL, sqe);
	return sqe;
}

/*
 * The CQEs of a wait (user_data 7) and of what ends it (user_data 8), in
 * @res in that order.  Neither may be the hang guard's -ETIME; with
 * @ender_etime the ender's may be its own.
 */
static void reap_wait_and_ender(struct __test_metadata *_metadata,
				struct io_uring *ring, int res[2],
				bool ender_etime)
{
	__u64 ud;
	int i, r;

	for (i = 0; i < 2; i++) {
		ud = 0;
		r = next_res(ring, &ud);
		ASSERT_NE(-ETIME, r == -ETIME && !(ender_etime && ud == 8) ? r : 0);
		res[ud == 7 ? 0 : 1] = r;
	}
}

/*
 * IORING_OP_ASYNC_CANCEL of a sleeping wait: the wait's CQE says it was
 * cancelled (never a kernel-internal restart code), the cancel's CQE is 0
 * or -EALREADY, and the endpoint waits again afterwards.
 */
TEST_F(wait, async_cancel_of_sleeping_wait)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	struct io_uring_sqe *sqe;
	int res[2] = { 1, 1 };

	prep_raw_wait(sqe_of(_metadata, &self->ring), self->worker, 0, seq,
		      KNITK_WAIT_FOREVER, 7);
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	until_uring_asleep(self->worker, 0, 1);
	sqe = sqe_of(_metadata, &self->ring);
	io_uring_prep_cancel64(sqe, 7, 0);
	sqe->user_data = 8;
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	reap_wait_and_ender(_metadata, &self->ring, res, false);
	TH_LOG("wait %d, cancel %d", res[0], res[1]);
	EXPECT_TRUE(cancel_res_ok(res[0]));
	EXPECT_TRUE(res[1] == 0 || res[1] == -EALREADY);
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(self->worker, seq, knitk_now_ns()));
}

/*
 * A wait linked to an IORING_OP_LINK_TIMEOUT: the timeout cancels it
 * (-ECANCELED or -EINTR, never a restart code); the timeout's CQE -ETIME.
 */
TEST_F(wait, link_timeout_cancels_wait)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	struct __kernel_timespec ts = { .tv_nsec = 20 * 1000 * 1000 };
	struct io_uring_sqe *sqe;
	int res[2] = { 1, 1 };

	sqe = sqe_of(_metadata, &self->ring);
	prep_raw_wait(sqe, self->worker, 0, seq, KNITK_WAIT_FOREVER, 7);
	sqe->flags |= IOSQE_IO_LINK;
	sqe = sqe_of(_metadata, &self->ring);
	io_uring_prep_link_timeout(sqe, &ts, 0);
	sqe->user_data = 8;
	ASSERT_EQ(2, io_uring_submit(&self->ring));
	reap_wait_and_ender(_metadata, &self->ring, res, true);
	TH_LOG("wait %d, link timeout %d", res[0], res[1]);
	EXPECT_TRUE(cancel_res_ok(res[0]));
	/* The timeout's own CQE is io_uring's: fired, or found it going. */
	EXPECT_TRUE(res[1] == -ETIME || res[1] == -EALREADY || res[1] == -ENOENT);
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(self->worker, seq, knitk_now_ns()));
}

/* A wait on registered file 0, submitted. */
static void submit_fixed_wait(struct __test_metadata *_metadata,
			      struct io_uring *ring, __u32 seq,
			      __u64 deadline_ns, __u64 user_data)
{
	struct io_uring_sqe *sqe = sqe_of(_metadata, ring);

	prep_raw_wait(sqe, 0, 0, seq, deadline_ns, user_data);
	sqe->flags |= IOSQE_FIXED_FILE;
	ASSERT_EQ(1, io_uring_submit(ring));
}

/*
 * A registered file (IOSQE_FIXED_FILE) works like the fd: a moved seq is
 * -EAGAIN, a past deadline -ETIMEDOUT, a kick ends a sleeping wait with 0.
 */
TEST_F(wait, fixed_file_wait)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	__u64 woken, asleep;

	ASSERT_EQ(0, io_uring_register_files(&self->ring, &self->worker, 1));
	submit_fixed_wait(_metadata, &self->ring, seq + 1, KNITK_WAIT_FOREVER, 1);
	EXPECT_EQ(-EAGAIN, next_res(&self->ring, NULL));
	submit_fixed_wait(_metadata, &self->ring, seq, 1, 2);
	EXPECT_EQ(-ETIMEDOUT, next_res(&self->ring, NULL));
	asleep = uring_waits(self->worker, 0);
	submit_fixed_wait(_metadata, &self->ring, seq, KNITK_WAIT_FOREVER, 3);
	until_uring_asleep(self->worker, 0, asleep + 1);
	ASSERT_EQ(0, knitk_kick(self->k.fd, 1ULL << 0, &woken));
	EXPECT_EQ(0, next_res(&self->ring, NULL));
}

/*
 * A role joined by a forked child through the inherited endpoint ends
 * with the child: the parent's file is still open, but holds no role, so
 * both the ioctl wait and the ring wait on it are -ENOTCONN, and the role
 * is free for a new endpoint.
 */
TEST_F(wait, wait_of_ended_role)
{
	struct io_uring_sqe *sqe;
	int fd, status, again;
	__u32 seq;
	pid_t pid;

	fd = knitk_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, knitk_attach(fd, self->k.fd, NULL));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(knitk_join(fd, KNITK_ROLE_WORKER, 1, NULL) ? 1 : 0);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	seq = knitk_doorbell_seq(knot_doorbell(&self->k, 1));
	EXPECT_EQ(-ENOTCONN, knitk_wait(fd, seq, KNITK_WAIT_FOREVER));
	sqe = io_uring_get_sqe(&self->ring);
	prep_raw_wait(sqe, fd, 1, seq, KNITK_WAIT_FOREVER, 1);
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	EXPECT_EQ(-ENOTCONN, next_res(&self->ring, NULL));
	/* Its file cannot join again; a new endpoint can. */
	EXPECT_NE(0, knitk_join(fd, KNITK_ROLE_WORKER, 1, NULL));
	again = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
	EXPECT_LE(0, again);
	if (again >= 0)
		close(again);
	close(fd);
}

/*
 * knitk_prep_doorbell_wait: NULL arguments -EINVAL, an unjoined endpoint
 * -ENOTCONN; the SQE it builds, on 64- and 128-byte rings, waits on the
 * endpoint's own doorbell (a moved seq -EAGAIN, a kick 0).
 */
TEST(prep_doorbell_wait_sqe)
{
	struct knitk_geometry g;
	struct knitk_endpoint *host, *wk;
	struct io_uring_sqe sqe_buf[2];
	struct io_uring ring;
	unsigned int flags[2] = { 0, IORING_SETUP_SQE128 };
	int i;

	KNITK_REQUIRE_DEV();
	knitk_geom_small(&g);
	ASSERT_EQ(0, knitk_endpoint_create(&g, KNITK_KNOT_KMOD, &host));
	ASSERT_EQ(0, knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &wk));
	EXPECT_EQ(1, knitk_uring_supported(host));
	EXPECT_EQ(-ENOTCONN, knitk_prep_doorbell_wait(sqe_buf, wk, 0, KNITK_WAIT_FOREVER));
	ASSERT_LE(1, knitk_endpoint_join(host, KNITK_ROLE_HOST, 0));
	ASSERT_LE(1, knitk_endpoint_join(wk, KNITK_ROLE_WORKER, 1));
	EXPECT_EQ(-EINVAL, knitk_prep_doorbell_wait(NULL, wk, 0, KNITK_WAIT_FOREVER));
	EXPECT_EQ(-EINVAL, knitk_prep_doorbell_wait(sqe_buf, NULL, 0, KNITK_WAIT_FOREVER));
	for (i = 0; i < 2; i++) {
		struct io_uring_sqe *sqe;
		uint32_t seq;
		__u64 woken;

		ASSERT_EQ(0, io_uring_queue_init(4, &ring, flags[i]));
		ASSERT_EQ(0, knitk_doorbell_prepare(wk, &seq));
		sqe = io_uring_get_sqe(&ring);
		memset(sqe, 0, i ? 128 : 64);
		ASSERT_EQ(0, knitk_prep_doorbell_wait(sqe, wk, seq + 1, KNITK_WAIT_FOREVER));
		sqe->user_data = 1;
		ASSERT_EQ(1, io_uring_submit(&ring));
		EXPECT_EQ(-EAGAIN, next_res(&ring, NULL));
		sqe = io_uring_get_sqe(&ring);
		memset(sqe, 0, i ? 128 : 64);
		ASSERT_EQ(0, knitk_prep_doorbell_wait(sqe, wk, seq, KNITK_WAIT_FOREVER));
		sqe->user_data = 2;
		ASSERT_EQ(1, io_uring_submit(&ring));
		while (1) {
			struct knitk_doorbell_stats st;

			ASSERT_EQ(0, knitk_endpoint_doorbell_stats(wk, 1, &st, sizeof(st)));
			if (st.uring_waits >= (__u64)i + 1)
				break;
			usleep(1000);
		}
		ASSERT_EQ(0, knitk_kick(knitk_endpoint_fd(host), 1ULL << 1, &woken));
		EXPECT_EQ(0, next_res(&ring, NULL));
		knitk_doorbell_cancel(wk);
		io_uring_queue_exit(&ring);
	}
	knitk_endpoint_destroy(wk);
	knitk_endpoint_destroy(host);
}

/*
 * Eight ring waits asleep on the one doorbell, one of them forced to
 * io-wq with IOSQE_ASYNC: one kick ends every one with 0.
 */
TEST_F(wait, one_kick_ends_every_wait)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	struct io_uring ring;
	__u64 woken, base = uring_waits(self->worker, 0);
	unsigned int i, zero = 0;

	ASSERT_EQ(0, io_uring_queue_init(16, &ring, 0));
	for (i = 0; i < 8; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

		ASSERT_NE(NULL, sqe);
		prep_raw_wait(sqe, self->worker, 0, seq, KNITK_WAIT_FOREVER, i);
		if (!i)
			sqe->flags |= IOSQE_ASYNC;
	}
	ASSERT_EQ(8, io_uring_submit(&ring));
	until_uring_asleep(self->worker, 0, base + 8);
	ASSERT_EQ(0, knitk_kick(self->k.fd, 1ULL << 0, &woken));
	for (i = 0; i < 8; i++)
		zero += next_res(&ring, NULL) == 0;
	EXPECT_EQ(8U, zero);
	io_uring_queue_exit(&ring);
}

/*
 * An SQPOLL ring submits from its kernel thread, a thread of this
 * process: the wait is the endpoint's own (a moved seq -EAGAIN, a kick
 * 0).  An IOPOLL ring cannot poll the command: a clean error, no hang.
 */
TEST_F(wait, sqpoll_and_iopoll_rings)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	__u64 woken, base;
	int r;

	ASSERT_EQ(0, io_uring_queue_init(4, &ring, IORING_SETUP_SQPOLL));
	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	prep_raw_wait(sqe, self->worker, 0, seq + 1, KNITK_WAIT_FOREVER, 1);
	ASSERT_EQ(1, io_uring_submit(&ring));
	EXPECT_EQ(-EAGAIN, next_res(&ring, NULL));
	base = uring_waits(self->worker, 0);
	sqe = io_uring_get_sqe(&ring);
	prep_raw_wait(sqe, self->worker, 0, seq, KNITK_WAIT_FOREVER, 2);
	ASSERT_EQ(1, io_uring_submit(&ring));
	until_uring_asleep(self->worker, 0, base + 1);
	ASSERT_EQ(0, knitk_kick(self->k.fd, 1ULL << 0, &woken));
	EXPECT_EQ(0, next_res(&ring, NULL));
	io_uring_queue_exit(&ring);

	ASSERT_EQ(0, io_uring_queue_init(4, &ring, IORING_SETUP_IOPOLL));
	sqe = io_uring_get_sqe(&ring);
	prep_raw_wait(sqe, self->worker, 0, seq, KNITK_WAIT_FOREVER, 3);
	r = io_uring_submit(&ring);
	if (r == 1)
		r = next_res(&ring, NULL);
	TH_LOG("iopoll: %d", r);
	EXPECT_GT(0, r);
	EXPECT_NE(-ETIME, r);
	io_uring_queue_exit(&ring);
	/* The endpoint is unharmed. */
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(self->worker, knitk_doorbell_seq(
		knot_doorbell(&self->k, 0)), knitk_now_ns()));
}

/*
 * The role of an endpoint is a forked child's (it joined through the
 * inherited fd), while the parent, holding the same file, sleeps in a
 * ring wait and an ioctl wait on it.  When the child exits the role ends
 * and each wait ends: -ECANCELED in the ring (-ENOTCONN had it not slept
 * yet), -ENOTCONN for the ioctl; neither is left asleep.
 */
TEST_F(wait, owner_exit_ends_others_waits)
{
	struct waiter iw = { .ret = 1 };
	struct io_uring_sqe *sqe;
	int fd, status, go[2], joined[2], r;
	__u64 base;
	char b = 0;
	pid_t pid;

	fd = knitk_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, knitk_attach(fd, self->k.fd, NULL));
	ASSERT_EQ(0, pipe(go));
	ASSERT_EQ(0, pipe(joined));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (knitk_join(fd, KNITK_ROLE_WORKER, 1, NULL) ||
		    write(joined[1], "j", 1) != 1 || read(go[0], &b, 1) != 1)
			_exit(1);
		_exit(0);
	}
	ASSERT_EQ(1, read(joined[0], &b, 1));
	iw.fd = fd;
	iw.seq = knitk_doorbell_seq(knot_doorbell(&self->k, 1));
	base = uring_waits(self->k.fd, 1);
	sqe = io_uring_get_sqe(&self->ring);
	ASSERT_NE(NULL, sqe);
	prep_raw_wait(sqe, fd, 1, iw.seq, KNITK_WAIT_FOREVER, 1);
	ASSERT_EQ(1, io_uring_submit(&self->ring));
	ASSERT_EQ(0, pthread_create(&iw.thread, NULL, waiter_run, &iw));
	/* Asleep (or already refused): then the owner goes. */
	while (uring_waits(self->k.fd, 1) < base + 1) {
		struct io_uring_cqe *cqe;

		if (!io_uring_peek_cqe(&self->ring, &cqe))
			break;
		usleep(1000);
	}
	ASSERT_EQ(1, write(go[1], "x", 1));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	r = next_res(&self->ring, NULL);
	TH_LOG("ring wait %d", r);
	EXPECT_NE(-ETIME, r);
	EXPECT_TRUE(r == -ECANCELED || r == -ENOTCONN);
	pthread_join(iw.thread, NULL);
	TH_LOG("ioctl wait %d", iw.ret);
	EXPECT_EQ(-ENOTCONN, iw.ret);
	close(go[0]);
	close(go[1]);
	close(joined[0]);
	close(joined[1]);
	close(fd);
}

/*
 * IORING_OP_CLOSE of the owner's only fd, issued inline and from an io-wq
 * worker (IOSQE_ASYNC), a thread of the owner too: the role ends either
 * way.
 */
TEST_F(k7, io_uring_close_of_the_owners_fd_ends_role)
{
	struct io_uring ring;
	int async;

	ASSERT_EQ(0, io_uring_queue_init(2, &ring, 0));
	for (async = 0; async < 2; async++) {
		struct io_uring_sqe *sqe;
		int w = async ? knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0) :
				self->w0;

		self->w0 = -1;
		ASSERT_LE(0, w);
		sqe = io_uring_get_sqe(&ring);
		ASSERT_NE(NULL, sqe);
		io_uring_prep_close(sqe, w);
		if (async)
			sqe->flags |= IOSQE_ASYNC;
		ASSERT_EQ(1, io_uring_submit(&ring));
		EXPECT_EQ(0, next_res(&ring, NULL));
		wait_dead(self->k.ctl, 0);
		EXPECT_EQ(HOST_BIT, knitk_load64(&self->k.ctl->live));
	}
	io_uring_queue_exit(&ring);
}

/*
 * A ring's registered file table is no file table of the process: with
 * the endpoint registered, closing the owner's only fd ends the role, a
 * ring wait through the registered file is -ENOTCONN, and unregistering
 * drops the last reference, freeing the knot.
 */
TEST(registered_file_is_no_file_table)
{
	struct knitk_geometry g;
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	struct knot k;
	int w;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&k, &g));
	ASSERT_EQ(0, knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL));
	w = knot_endpoint(&k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, w);
	ASSERT_EQ(0, io_uring_queue_init(2, &ring, 0));
	ASSERT_EQ(0, io_uring_register_files(&ring, &w, 1));
	close(w);
	wait_dead(k.ctl, 0);
	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	prep_raw_wait(sqe, 0, 0, knitk_doorbell_seq(knot_doorbell(&k, 0)),
		      KNITK_WAIT_FOREVER, 1);
	sqe->flags |= IOSQE_FIXED_FILE;
	ASSERT_EQ(1, io_uring_submit(&ring));
	EXPECT_EQ(-ENOTCONN, next_res(&ring, NULL));
	EXPECT_EQ(HOST_BIT, knitk_load64(&k.ctl->live));
	knot_close(&k);
	EXPECT_EQ(1, knitk_live_knots());
	ASSERT_EQ(0, io_uring_unregister_files(&ring));
	io_uring_queue_exit(&ring);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST_HARNESS_MAIN
