// SPDX-License-Identifier: GPL-2.0
/*
 * poll() on a knot endpoint: level-triggered readiness of the endpoint's
 * own doorbell (POLLIN: pending work, POLLPRI: a dead role, POLLHUP: the
 * host died), and a poller asleep in poll() woken by a delivered notify,
 * so event loops can wait on knots.
 */
#include <poll.h>
#include <pthread.h>

#include "kselftest_harness.h"
#include "knitk_test.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	(1ULL << KNITK_DOORBELL_HOST)

/* Readiness of fd right now (a zero timeout never sleeps). */
static short poll_now(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLPRI };

	return poll(&p, 1, 0) == 1 ? p.revents : 0;
}

FIXTURE(knot_poll) {
	struct knot k;
	int worker;		/* endpoint joined as worker 0 */
};

FIXTURE_SETUP(knot_poll)
{
	struct knitk_geometry g;

	KNITK_REQUIRE_DEV();
	self->worker = -1;
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	self->worker = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, self->worker);
}

FIXTURE_TEARDOWN(knot_poll)
{
	if (self->worker >= 0)
		close(self->worker);
	knot_close(&self->k);
}

TEST(poll_unattached_is_error)
{
	int fd;

	KNITK_REQUIRE_DEV();
	fd = knitk_open();
	ASSERT_LE(0, fd);
	EXPECT_EQ(POLLERR, poll_now(fd) & POLLERR);
	close(fd);
}

TEST_F(knot_poll, idle_knot_is_not_ready)
{
	EXPECT_EQ(0, poll_now(self->k.fd));
	EXPECT_EQ(0, poll_now(self->worker));
}

/* The host's doorbell covers every return mailbox; the worker's does not. */
TEST_F(knot_poll, host_pollin_follows_return_mailboxes)
{
	struct knitk_sector *ret_mb;

	ret_mb = knot_mailbox(&self->k, self->k.layout.nr_request + 1);
	knot_lane_publish(ret_mb, 5);
	EXPECT_EQ(POLLIN, poll_now(self->k.fd) & (POLLIN | POLLPRI));
	EXPECT_EQ(0, poll_now(self->worker));
	knot_lane_ack(&ret_mb->ack, 5);
	EXPECT_EQ(0, poll_now(self->k.fd));
}

TEST_F(knot_poll, worker_pollin_follows_own_request_mailbox)
{
	struct knitk_sector *req_other, *req_own;

	/* small geometry: request mailbox s * W + w, W = 2. */
	req_other = knot_mailbox(&self->k, 1);
	req_own = knot_mailbox(&self->k, 0);
	knot_lane_publish(req_other, 0);
	EXPECT_EQ(0, poll_now(self->worker));
	knot_lane_publish(req_own, 63);
	EXPECT_EQ(POLLIN, poll_now(self->worker) & POLLIN);
	EXPECT_EQ(0, poll_now(self->k.fd));
	knot_lane_ack(&req_own->ack, 63);
	EXPECT_EQ(0, poll_now(self->worker));
}

TEST_F(knot_poll, dead_worker_raises_pollpri_until_rejoined)
{
	close(self->worker);
	self->worker = -1;
	EXPECT_EQ(POLLPRI, poll_now(self->k.fd) & POLLPRI);
	self->worker = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, self->worker);
	EXPECT_EQ(0, poll_now(self->k.fd) & POLLPRI);
}

TEST_F(knot_poll, host_death_hangs_up_workers)
{
	struct pollfd p = { .fd = self->worker, .events = POLLIN };

	knot_unmap(&self->k);
	close(self->k.fd);
	self->k.fd = -1;
	ASSERT_EQ(1, poll(&p, 1, 0));
	EXPECT_EQ(POLLHUP, p.revents & POLLHUP);
}

struct poller {
	pthread_t thread;
	int fd;
	pid_t tid;
	int ret;
	short revents;
};

static void *poller_run(void *arg)
{
	struct poller *p = arg;
	struct pollfd pfd = { .fd = p->fd, .events = POLLIN };

	__atomic_store_n(&p->tid, knitk_gettid(), __ATOMIC_RELEASE);
	p->ret = poll(&pfd, 1, -1);
	p->revents = pfd.revents;
	return NULL;
}

/*
 * A host asleep in poll() with its sleeping flag set is woken by a worker's
 * publish and notify, and the notify counts as delivered.
 */
TEST_F(knot_poll, poller_woken_by_notify)
{
	struct knitk_doorbell *db = knot_doorbell(&self->k, HOST);
	struct knitk_doorbell_stats st;
	struct poller p = { .fd = self->k.fd };
	__u64 woken = 0;

	knitk_doorbell_sleeping(db, 1);
	ASSERT_EQ(0, pthread_create(&p.thread, NULL, poller_run, &p));
	/* Let the poller fall asleep in poll() first: the wake must reach it. */
	while (!__atomic_load_n(&p.tid, __ATOMIC_ACQUIRE))
		usleep(1000);
	while (knitk_thread_state(getpid(), p.tid) != 'S')
		usleep(1000);
	knot_lane_publish(knot_mailbox(&self->k, self->k.layout.nr_request),
			  9);
	ASSERT_EQ(0, knitk_notify(self->worker, HOST_BIT, &woken));
	EXPECT_EQ(HOST_BIT, woken);
	ASSERT_EQ(0, pthread_join(p.thread, NULL));
	knitk_doorbell_sleeping(db, 0);
	EXPECT_EQ(1, p.ret);
	EXPECT_EQ(POLLIN, p.revents & POLLIN);
	ASSERT_EQ(0, knitk_stats(self->k.fd, HOST, &st));
	EXPECT_EQ(1, st.wakes);
	EXPECT_EQ(0, st.spurious);
}

TEST_HARNESS_MAIN
