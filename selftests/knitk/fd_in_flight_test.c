// SPDX-License-Identifier: GPL-2.0
/*
 * An endpoint's fd in flight in a unix socket (SCM_RIGHTS) is in no
 * process's file table: the owner that dies or closes its last fd with
 * the copy in flight ends its role, and the receiver gets an ended
 * endpoint (poll() says hang-up, WAIT -ENOTCONN, it cannot JOIN again)
 * through which it may ATTACH a new one and take the role; an unjoined
 * endpoint received and joined is the receiver's role, not the sender's;
 * and a socket cycle holding the knot's last fd frees the knot when the
 * garbage collector releases it.  Written from uapi/linux/knitk.h alone.
 */
#define _GNU_SOURCE
#include <poll.h>

#include "knitk_fixtures.h"

/*
 * A child joins as worker @worker, sends its endpoint over a new socket
 * pair @sv and exits with the fd in flight; returns once it is reaped.
 */
static void worker_dies_sending(struct __test_metadata *_metadata,
				FIXTURE_DATA(adv) *self, __u32 worker,
				int sv[2])
{
	pid_t w;
	int st;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	w = fork();
	ASSERT_LE(0, w);
	if (w == 0) {
		int fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, worker);

		_exit(fd < 0 || knitk_send_fd(sv[1], fd) ? 1 : 0);
	}
	ASSERT_EQ(w, waitpid(w, &st, 0));
	ASSERT_EQ(0, st);
}

/*
 * A worker hands its endpoint over SCM_RIGHTS and dies with the fd in
 * flight: the role ends (an fd in a socket is in no table).  The receiver
 * cannot join the ended endpoint, and its WAIT says -ENOTCONN; it attaches
 * a new endpoint through the received one and takes the role, with a new
 * generation; its own death is counted once more.
 */
TEST_F(adv, scm_rights_after_owner_died)
{
	const struct knitk_control *ctl = self->k.ctl;
	int sv[2], got, fresh;
	__u32 gen = 0;

	worker_dies_sending(_metadata, self, 1, sv);
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead) & 2ULL);
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));

	got = knitk_recv_fd(sv[0]);
	ASSERT_LE(0, got);
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead) & 2ULL);
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	EXPECT_EQ(-ENOTCONN, knitk_wait(got, knitk_doorbell_seq(knot_doorbell(&self->k, 1)),
					KNITK_WAIT_FOREVER));
	EXPECT_NE(0, knitk_join(got, KNITK_ROLE_WORKER, 1, NULL));
	EXPECT_NE(0, knitk_join(got, KNITK_ROLE_WORKER, 0, NULL));
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));

	fresh = knitk_open();
	ASSERT_LE(0, fresh);
	ASSERT_EQ(0, knitk_attach(fresh, got, NULL));
	ASSERT_EQ(0, knitk_join(fresh, KNITK_ROLE_WORKER, 1, &gen));
	EXPECT_EQ(2U, gen);
	EXPECT_EQ(HOST_BIT | 2ULL, knitk_load64(&ctl->live));
	EXPECT_EQ(0ULL, knitk_load64(&ctl->dead));
	/* Closing the received, ended endpoint is no death of the new one. */
	close(got);
	expect_live(_metadata, ctl, HOST_BIT | 2ULL, 1U);
	close(fresh);
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(2U, knitk_load32(&ctl->death_seq));
	close(sv[0]);
	close(sv[1]);
}

/*
 * The receiver of an fd whose role ended (its owner died with it in
 * flight) asks poll(): a hang-up and an error, nothing of the doorbell
 * the role owned (docs/guarantees.md, "an ended role hangs up").
 */
TEST_F(adv, poll_on_ended_endpoint)
{
	int sv[2], got;
	struct pollfd p;

	worker_dies_sending(_metadata, self, 0, sv);
	got = knitk_recv_fd(sv[0]);
	ASSERT_LE(0, got);
	p = (struct pollfd){ .fd = got, .events = POLLIN | POLLPRI };
	ASSERT_EQ(1, poll(&p, 1, 0));
	/* The role ended: a hang-up, not the state of its doorbell. */
	EXPECT_EQ(POLLHUP | POLLERR, p.revents);
	close(got);
	close(sv[0]);
	close(sv[1]);
}

/*
 * An unjoined endpoint passed over SCM_RIGHTS is joined by the receiver:
 * the receiver owns the role, so the sender's close neither keeps nor ends
 * it, and the receiver's exit ends it.
 */
TEST_F(adv, receiver_that_joins_owns_the_role)
{
	const struct knitk_control *ctl = self->k.ctl;
	int sv[2], e, st;
	pid_t c;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	e = knitk_open();
	ASSERT_LE(0, e);
	ASSERT_EQ(0, knitk_attach(e, self->k.fd, NULL));
	c = fork();
	ASSERT_LE(0, c);
	if (c == 0) {
		int got;
		char b = 'j';

		close(e);
		got = knitk_recv_fd(sv[1]);
		if (got < 0 || knitk_join(got, KNITK_ROLE_WORKER, 0, NULL))
			_exit(1);
		if (write(sv[1], &b, 1) != 1 || read(sv[1], &b, 1) != 1)
			_exit(2);
		_exit(0);
	}
	track(self, c);
	ASSERT_EQ(0, knitk_send_fd(sv[0], e));
	ASSERT_EQ('j', read_byte(sv[0]));
	EXPECT_EQ(HOST_BIT | 1ULL, knitk_load64(&ctl->live));
	close(e);
	expect_live(_metadata, ctl, HOST_BIT | 1ULL, 0U);
	ASSERT_EQ(1, write(sv[0], "x", 1));
	ASSERT_EQ(c, waitpid(c, &st, 0));
	EXPECT_EQ(0, st);
	wait_dead(self->k.ctl, 0);
	expect_live(_metadata, ctl, HOST_BIT, 1U);
	close(sv[0]);
	close(sv[1]);
}

/*
 * The owner's only fd of its endpoint sent over a socket and closed:
 * the copy in flight is in no file table, so the role ends; received
 * back, the endpoint's role stays ended and the role is free to join.
 */
TEST_F(k7, only_fd_in_flight_ends_role)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	int sv[2], back, next;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	ASSERT_EQ(0, knitk_send_fd(sv[0], self->w0));
	close(self->w0);
	self->w0 = -1;
	wait_dead(self->k.ctl, 0);
	EXPECT_EQ(0ULL, self->k.ctl->live & W0_BIT);
	back = knitk_recv_fd(sv[1]);
	ASSERT_LE(0, back);
	EXPECT_EQ(-ENOTCONN, knitk_wait(back, seq, KNITK_WAIT_FOREVER));
	EXPECT_NE(0, knitk_join(back, KNITK_ROLE_WORKER, 0, NULL));
	next = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	EXPECT_LE(0, next);
	EXPECT_EQ(W0_BIT | HOST_BIT, self->k.ctl->live);
	close(next);
	close(back);
	close(sv[0]);
	close(sv[1]);
}

/*
 * A socket holding itself and the knot's last fd in flight, both closed:
 * the unix garbage collector's release of the endpoint frees the knot.
 */
TEST(socket_cycle_in_flight_frees_knot)
{
	struct knitk_geometry g;
	struct knot k;
	int sv[2];

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&k, &g));
	ASSERT_EQ(0, knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL));
	knot_unmap(&k);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv));
	ASSERT_EQ(0, knitk_send_fd(sv[0], k.fd));
	ASSERT_EQ(0, knitk_send_fd(sv[0], sv[1]));
	close(k.fd);
	close(sv[1]);
	EXPECT_EQ(1, knitk_live_knots());
	close(sv[0]);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST_HARNESS_MAIN
