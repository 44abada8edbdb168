// SPDX-License-Identifier: GPL-2.0
/*
 * Peers in other processes: a worker process waking the host through the
 * host doorbell, and the release of a joined endpoint (exit, SIGKILL) seen
 * in the control page and by the surviving side's KNITK_IOC_WAIT.
 *
 * Every child gets the knot the documented way: it inherits an fd, opens
 * its own endpoint, ATTACHes with the inherited fd, then drops everything
 * inherited so that only its own endpoint ties it to the knot.
 */
#include <pthread.h>

#include "knitk_harness.h"
#include "knitk_test.h"
#include "knitk_trigger.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	(1ULL << KNITK_DOORBELL_HOST)

FIXTURE(peer) {
	struct knot k;
	pid_t child;
	int ready[2];	/* child -> parent: joined */
};

FIXTURE_SETUP(peer)
{
	struct knitk_geometry g;

	KNITK_REQUIRE_DEV();
	self->child = -1;
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, pipe(self->ready));
}

FIXTURE_TEARDOWN(peer)
{
	if (self->child > 0) {
		kill(self->child, SIGKILL);
		waitpid(self->child, NULL, 0);
	}
	close(self->ready[0]);
	close(self->ready[1]);
	knot_close(&self->k);
}

/*
 * In a child: become an endpoint of the parent's knot with a role, holding
 * nothing of the parent's.  Returns 0 or the failing step (an exit code).
 */
static int child_join(struct knot *parent, struct knot *c, __u32 role,
		      __u32 worker)
{
	memset(c, 0, sizeof(*c));
	knot_unmap(parent);
	c->fd = knitk_open();
	if (c->fd < 0)
		return 10;
	if (knitk_attach(c->fd, parent->fd, &c->layout))
		return 11;
	close(parent->fd);
	parent->fd = -1;
	if (knot_map(c))
		return 12;
	if (knitk_join(c->fd, role, worker, NULL))
		return 13;
	return 0;
}

static int wait_ready(int fd)
{
	char b;

	return read(fd, &b, 1) == 1 ? 0 : -1;
}

static void tell_ready(int fd)
{
	char b = 1;

	if (write(fd, &b, 1) != 1)
		_exit(20);
}

/*
 * Fork a child that takes @role (worker @worker) on the knot, says so and
 * pauses until it is killed; return once it has joined.
 */
static void fork_joined_child(struct __test_metadata *_metadata,
			      FIXTURE_DATA(peer) *self, __u32 role,
			      __u32 worker)
{
	self->child = fork();
	ASSERT_LE(0, self->child);
	if (self->child == 0) {
		struct knot c;
		int step = child_join(&self->k, &c, role, worker);

		if (step)
			_exit(step);
		tell_ready(self->ready[1]);
		for (;;)
			pause();
	}
	ASSERT_EQ(0, wait_ready(self->ready[0]));
}

/*
 * Sleep on @db through endpoint @fd while @kl SIGKILLs the child: the
 * wait must return @expect, and the child must be reaped dead of SIGKILL.
 */
static void wait_child_killed(struct __test_metadata *_metadata,
			      FIXTURE_DATA(peer) *self, struct trigger *kl,
			      struct knitk_doorbell *db, int fd, int expect)
{
	int status;

	kl->close_fd = -1;
	kl->kill_pid = self->child;
	EXPECT_EQ(expect, trigger_sleep(_metadata, kl, db, fd));
	EXPECT_EQ(0, kl->ret);

	ASSERT_EQ(self->child, waitpid(self->child, &status, 0));
	self->child = -1;
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/*
 * The host sleeps on its one doorbell; a worker process publishes in its
 * return mailbox and rings the host.
 */
TEST_F(peer, host_woken_by_worker_process)
{
	struct knitk_doorbell *db = knot_doorbell(&self->k, HOST);
	struct knitk_doorbell_stats st;
	struct knitk_sector *ret_mb;
	int status;
	__u32 seq;

	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	ret_mb = knot_mailbox(&self->k, self->k.layout.nr_request + 1);
	seq = knitk_doorbell_seq(db);
	knitk_doorbell_sleeping(db, 1);

	self->child = fork();
	ASSERT_LE(0, self->child);
	if (self->child == 0) {
		struct knot c;
		__u64 woken = 0;
		int step = child_join(&self->k, &c, KNITK_ROLE_WORKER, 1);

		if (step)
			_exit(step);
		if (knitk_wait_asleep(c.fd, HOST, 1))
			_exit(14);
		knot_lane_publish(knot_mailbox(&c, c.layout.nr_request + 1),
				   17);
		if (knitk_notify(c.fd, HOST_BIT, &woken))
			_exit(15);
		_exit(woken == HOST_BIT ? 0 : 16);
	}

	EXPECT_EQ(0, knitk_wait(self->k.fd, seq, knitk_now_ns() + KNITK_LONG_NS));
	knitk_doorbell_sleeping(db, 0);
	/* The result is there to read. */
	EXPECT_EQ(1ULL << 17, knitk_load64(&ret_mb->pub) ^
			      knitk_load64(&ret_mb->ack));

	ASSERT_EQ(self->child, waitpid(self->child, &status, 0));
	self->child = -1;
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status))
		TH_LOG("worker process failed at step %d", WEXITSTATUS(status));
	EXPECT_LE(seq + 1, knitk_doorbell_seq(db));
	ASSERT_EQ(0, knitk_stats(self->k.fd, HOST, &st));
	EXPECT_EQ(1ULL, st.waits);
	EXPECT_EQ(1ULL, st.wakes);
	EXPECT_EQ(0ULL, st.spurious);
	EXPECT_EQ(0ULL, st.timeouts);
	/* Its exit, after the notify, is a release of a joined endpoint. */
	EXPECT_EQ(1ULL << 1, knitk_load64(&self->k.ctl->dead));
	EXPECT_EQ(1U, knitk_load32(&self->k.ctl->death_seq));
}

TEST_F(peer, worker_sigkill_seen_dead_and_host_woken)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct knitk_doorbell *db = knot_doorbell(&self->k, HOST);
	struct trigger kl = { .fd = self->k.fd, .doorbell = HOST };
	struct knitk_doorbell_stats st;

	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	fork_joined_child(_metadata, self, KNITK_ROLE_WORKER, 0);
	EXPECT_EQ(HOST_BIT | 1ULL, knitk_load64(&ctl->live));
	EXPECT_EQ(0ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(0U, knitk_load32(&ctl->death_seq));

	wait_child_killed(_metadata, self, &kl, db, self->k.fd, 0);
	EXPECT_EQ(1ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));
	EXPECT_EQ(1U, ctl->generation[0]);
	/* A death is a peer event: the wake was not spurious. */
	ASSERT_EQ(0, knitk_stats(self->k.fd, HOST, &st));
	EXPECT_EQ(1ULL, st.waits);
	EXPECT_EQ(0ULL, st.spurious);
	EXPECT_EQ(0ULL, st.timeouts);
}

TEST_F(peer, host_death_wakes_worker_epipe)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct knitk_doorbell *db = knot_doorbell(&self->k, 0);
	struct trigger kl = { .doorbell = 0 };
	struct knitk_doorbell_stats st;
	int w;

	fork_joined_child(_metadata, self, KNITK_ROLE_HOST, 0);
	w = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, w);
	EXPECT_EQ(HOST_BIT | 1ULL, knitk_load64(&ctl->live));

	kl.fd = w;
	wait_child_killed(_metadata, self, &kl, db, w, -EPIPE);
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->dead));
	EXPECT_EQ(1ULL, knitk_load64(&ctl->live));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));
	/* The host stays dead: every later wait fails at once. */
	EXPECT_EQ(-EPIPE, knitk_wait(w, knitk_doorbell_seq(db),
				     knitk_now_ns() + KNITK_LONG_NS));
	ASSERT_EQ(0, knitk_stats(w, 0, &st));
	EXPECT_EQ(0ULL, st.spurious);
	EXPECT_EQ(0ULL, st.timeouts);
	close(w);
}

/*
 * A death rings exactly the survivors that must hear of it: a worker's the
 * host, the host's every worker.
 */
TEST_F(peer, death_rings_the_right_doorbells)
{
	const struct knitk_control *ctl = self->k.ctl;
	__u32 host0, w0, w1;
	int h, a, b;

	h = knot_endpoint(&self->k, KNITK_ROLE_HOST, 0);
	ASSERT_LE(0, h);
	a = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, a);
	b = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
	ASSERT_LE(0, b);

	host0 = knitk_doorbell_seq(knot_doorbell(&self->k, HOST));
	w1 = knitk_doorbell_seq(knot_doorbell(&self->k, 1));
	close(a);
	EXPECT_NE(host0, knitk_doorbell_seq(knot_doorbell(&self->k, HOST)));
	EXPECT_EQ(w1, knitk_doorbell_seq(knot_doorbell(&self->k, 1)));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));

	host0 = knitk_doorbell_seq(knot_doorbell(&self->k, HOST));
	w0 = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	close(h);
	EXPECT_NE(w1, knitk_doorbell_seq(knot_doorbell(&self->k, 1)));
	EXPECT_NE(w0, knitk_doorbell_seq(knot_doorbell(&self->k, 0)));
	EXPECT_EQ(host0, knitk_doorbell_seq(knot_doorbell(&self->k, HOST)));
	EXPECT_EQ(2U, knitk_load32(&ctl->death_seq));
	close(b);
}

/* -EPIPE lasts only while the host is dead: a new host ends it. */
TEST_F(peer, host_rejoin_ends_epipe)
{
	const struct knitk_control *ctl = self->k.ctl;
	__u32 gen = 0;
	int h, w;

	h = knot_endpoint(&self->k, KNITK_ROLE_HOST, 0);
	ASSERT_LE(0, h);
	w = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, w);
	close(h);
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->dead));
	EXPECT_EQ(-EPIPE, knitk_wait(w, knitk_doorbell_seq(
					 knot_doorbell(&self->k, 0)), 0));

	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, &gen));
	EXPECT_EQ(2U, gen);
	EXPECT_EQ(0ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(w, knitk_doorbell_seq(
					     knot_doorbell(&self->k, 0)), 0));
	close(w);
}

/* Only the release of a joined endpoint is a death. */
TEST_F(peer, unjoined_release_is_not_death)
{
	const struct knitk_control *ctl = self->k.ctl;
	int e, w, h;

	e = knitk_open();
	ASSERT_LE(0, e);
	ASSERT_EQ(0, knitk_attach(e, self->k.fd, NULL));
	close(e);
	EXPECT_EQ(0U, knitk_load32(&ctl->death_seq));
	EXPECT_EQ(0ULL, knitk_load64(&ctl->dead));

	w = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
	ASSERT_LE(0, w);
	h = knot_endpoint(&self->k, KNITK_ROLE_HOST, 0);
	ASSERT_LE(0, h);
	EXPECT_EQ(HOST_BIT | 2ULL, knitk_load64(&ctl->live));
	close(w);
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead));
	close(h);
	EXPECT_EQ(2U, knitk_load32(&ctl->death_seq));
	EXPECT_EQ(HOST_BIT | 2ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(0ULL, knitk_load64(&ctl->live));
}

/* A worker process exits; a new endpoint takes its role over. */
TEST_F(peer, rejoin_after_death_bumps_generation)
{
	const struct knitk_control *ctl = self->k.ctl;
	__u32 gen = 0;
	int status, w;

	self->child = fork();
	ASSERT_LE(0, self->child);
	if (self->child == 0) {
		struct knot c;

		/* Exit holding the role: the release is the exit's. */
		_exit(child_join(&self->k, &c, KNITK_ROLE_WORKER, 1));
	}
	ASSERT_EQ(self->child, waitpid(self->child, &status, 0));
	self->child = -1;
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status))
		TH_LOG("worker process failed at step %d", WEXITSTATUS(status));
	EXPECT_EQ(1U, ctl->generation[1]);
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(0ULL, knitk_load64(&ctl->live));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));

	w = knitk_open();
	ASSERT_LE(0, w);
	ASSERT_EQ(0, knitk_attach(w, self->k.fd, NULL));
	ASSERT_EQ(0, knitk_join(w, KNITK_ROLE_WORKER, 1, &gen));
	EXPECT_EQ(2U, gen);
	EXPECT_EQ(2U, ctl->generation[1]);
	EXPECT_EQ(0ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(2ULL, knitk_load64(&ctl->live));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));
	close(w);
}

TEST_HARNESS_MAIN
