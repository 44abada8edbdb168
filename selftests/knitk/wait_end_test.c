// SPDX-License-Identifier: GPL-2.0
/*
 * What ends a sleeping KNITK_IOC_WAIT or KNITK_IOC_NOTIFY_WAIT, and what
 * does not.  The end of its role under it ends it with -ENOTCONN, however
 * the role ends: the close of the owner's only fd by another thread (for
 * the host's and a worker's endpoint), the close of the last dup, the exit
 * of the owner that a forked child's wait inherited the endpoint from;
 * and a kick for the role's next owner is no wake of the old one's wait.
 * One kick ends every wait of the doorbell; a NOTIFY_WAIT that rings its
 * own doorbell does not sleep.  A close of another fd of the endpoint, a
 * stop and continue of the waiter, and the munmap of every mapping of the
 * knot end nothing.  No assertion depends on time: a missed wake hangs,
 * and the runner's watchdog reports it.
 */
#define _GNU_SOURCE
#include "knitk_fixtures.h"

/*
 * One thread sleeps in KNITK_IOC_WAIT on a worker endpoint, another closes
 * the process's only fd of it: the role ends (the host sees it) and the
 * sleeper's wait ends with -ENOTCONN, since its role has ended.
 */
TEST_F(adv, close_while_worker_waits)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct waiter wt = { 0 };
	struct knot w = { .layout = self->k.layout };
	struct knitk_doorbell *db;

	w.fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
	ASSERT_LE(0, w.fd);
	db = knot_doorbell(&self->k, 1);
	wt.fd = w.fd;
	wt.seq = knitk_doorbell_seq(db);
	ASSERT_EQ(0, pthread_create(&wt.thread, NULL, waiter_run, &wt));
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, 1, 1));
	ASSERT_EQ(0, close(w.fd));
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead) & 2ULL);
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	pthread_join(wt.thread, NULL);
	EXPECT_EQ(-ENOTCONN, wt.ret);
}

/* The same for the host's endpoint: a second host thread is left asleep. */
TEST_F(adv, close_while_host_waits)
{
	struct knitk_geometry g;
	struct waiter wt = { 0 };
	struct knot c;
	int host, wfd;

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&c, &g));
	host = knot_endpoint(&c, KNITK_ROLE_HOST, 0);
	ASSERT_LE(0, host);
	wfd = knot_endpoint(&c, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, wfd);
	wt.fd = host;
	wt.seq = knitk_doorbell_seq(knot_doorbell(&c, HOST));
	ASSERT_EQ(0, pthread_create(&wt.thread, NULL, waiter_run, &wt));
	ASSERT_EQ(0, knitk_wait_asleep(c.fd, HOST, 1));
	ASSERT_EQ(0, close(host));
	EXPECT_EQ(HOST_BIT, knitk_load64(&c.ctl->dead));
	/* The worker hears of it. */
	EXPECT_EQ(-EPIPE, knitk_wait(wfd, knitk_doorbell_seq(knot_doorbell(&c, 0)),
				     KNITK_WAIT_FOREVER));
	pthread_join(wt.thread, NULL);
	EXPECT_EQ(-ENOTCONN, wt.ret);
	close(wfd);
	knot_close(&c);
}

/*
 * A thread left asleep on a worker endpoint whose role ended must not be
 * woken as if it held the role's next owner's doorbell: a kick for the
 * new owner ends the stale wait with -ENOTCONN, not 0.
 */
TEST_F(adv, stale_waiter_not_woken_for_next_owner)
{
	struct waiter wt = { 0 };
	int fd, next;

	fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
	ASSERT_LE(0, fd);
	wt.fd = fd;
	wt.seq = knitk_doorbell_seq(knot_doorbell(&self->k, 1));
	ASSERT_EQ(0, pthread_create(&wt.thread, NULL, waiter_run, &wt));
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, 1, 1));
	ASSERT_EQ(0, close(fd));
	next = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
	ASSERT_LE(0, next);
	ASSERT_EQ(0, knitk_kick(self->k.fd, 2ULL, NULL));
	pthread_join(wt.thread, NULL);
	EXPECT_EQ(-ENOTCONN, wt.ret);
	close(next);
}

/*
 * A NOTIFY_WAIT asleep while another thread closes the owner's only fd of
 * the endpoint: the role ends under it, -ENOTCONN, its ring written back.
 */
TEST_F(k7, notify_wait_role_closed_under_it)
{
	__u32 deaths = self->k.ctl->death_seq;
	struct sleeper s;

	ASSERT_EQ(0, sleeper_start(self, &s, self->w0, true, KNITK_WAIT_FOREVER));
	close(self->w0);
	self->w0 = -1;
	EXPECT_EQ(-ENOTCONN, sleeper_end(self, &s));
	EXPECT_EQ(0ULL, s.woken);
	wait_dead(self->k.ctl, 0);
	EXPECT_EQ(deaths + 1, knitk_load32(&self->k.ctl->death_seq));
}

/*
 * Closing the original under a wait on its dup keeps the role (a kick
 * ends the wait with 0); closing the dup, the last fd, ends it under the
 * next wait (-ENOTCONN), for KNITK_IOC_WAIT and KNITK_IOC_NOTIFY_WAIT.
 */
TEST_F(k7, dup_closed_under_waits)
{
	struct sleeper s;
	int nw, d;

	for (nw = 0; nw < 2; nw++) {
		int w = nw ? knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0) : self->w0;

		if (!nw)
			self->w0 = -1;
		ASSERT_LE(0, w);
		d = dup(w);
		ASSERT_LE(0, d);
		ASSERT_EQ(0, sleeper_start(self, &s, d, nw, KNITK_WAIT_FOREVER));
		close(w);
		EXPECT_EQ(0ULL, self->k.ctl->dead & W0_BIT);
		ASSERT_EQ(0, knitk_kick(self->k.fd, W0_BIT, NULL));
		EXPECT_EQ(0, sleeper_end(self, &s));
		EXPECT_EQ(W0_BIT | HOST_BIT, self->k.ctl->live);

		ASSERT_EQ(0, sleeper_start(self, &s, d, nw, KNITK_WAIT_FOREVER));
		close(d);
		EXPECT_EQ(-ENOTCONN, sleeper_end(self, &s));
		wait_dead(self->k.ctl, 0);
	}
}

/*
 * A stop and continue (SIGSTOP, SIGCONT: no handler runs) while a wait
 * sleeps is no signal to the caller: KNITK_IOC_WAIT goes on sleeping and
 * a kick ends it with 0.
 */
TEST_F(k7, stop_and_continue_under_wait)
{
	pid_t pid;
	int st, p[2];
	char c;

	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* Worker 1, asleep in its wait; it maps the knot itself. */
		struct knot ck = { .layout = self->k.layout };
		__u32 seq;

		ck.fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
		if (ck.fd < 0 || knot_map(&ck))
			_exit(1);
		seq = knitk_doorbell_seq(knot_doorbell(&ck, 1));
		if (write(p[1], "j", 1) != 1)
			_exit(2);
		_exit(knitk_wait(ck.fd, seq, KNITK_WAIT_FOREVER) ? 3 : 0);
	}
	ASSERT_EQ(1, read(p[0], &c, 1));
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, 1, 1));
	ASSERT_EQ(0, kill(pid, SIGSTOP));
	ASSERT_EQ(pid, waitpid(pid, &st, WUNTRACED));
	ASSERT_TRUE(WIFSTOPPED(st));
	ASSERT_EQ(0, kill(pid, SIGCONT));
	ASSERT_EQ(pid, waitpid(pid, &st, WCONTINUED));
	/* Asleep again, in the same call or its restart. */
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, 1, 2));
	ASSERT_EQ(0, knitk_kick(self->k.fd, 1ULL << 1, NULL));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(p[0]);
	close(p[1]);
}

/*
 * A NOTIFY_WAIT that rings the caller's own doorbell, asleep-flagged with
 * a pending lane: the ring advances its seq, so the wait that follows
 * returns -EAGAIN, with the caller's doorbell in @woken.
 */
TEST_F(k7, notify_wait_rings_own_doorbell)
{
	struct knitk_doorbell *db = knot_doorbell(&self->k, 0);
	struct knitk_sector *mb = knot_mailbox(&self->k, 0);
	__u32 seq = knitk_doorbell_seq(db);
	__u64 woken;

	knot_lane_publish(mb, 5);
	knitk_doorbell_sleeping(db, 1);
	EXPECT_EQ(-EAGAIN, knitk_notify_wait(self->w0, W0_BIT, seq, 0,
					     KNITK_WAIT_FOREVER, &woken));
	EXPECT_EQ(W0_BIT, woken);
	EXPECT_EQ(seq + 1, knitk_doorbell_seq(db));
	EXPECT_EQ(0U, __atomic_load_n(&db->sleeping, __ATOMIC_ACQUIRE));
	/* With the spin too: its own ring is no running ringer to wait for. */
	seq = knitk_doorbell_seq(db);
	knitk_doorbell_sleeping(db, 1);
	EXPECT_EQ(-EAGAIN, knitk_notify_wait(self->w0, W0_BIT, seq,
					     KNITK_WAIT_SPIN,
					     KNITK_WAIT_FOREVER, &woken));
	EXPECT_EQ(W0_BIT, woken);
	knitk_doorbell_sleeping(db, 0);
	knot_lane_ack(&mb->ack, 5);
}

/*
 * A forked child of the owner asleep in WAIT or NOTIFY_WAIT on the
 * endpoint it inherited, when the owner (another process) exits: the
 * role ends, and the child's wait with it (-ENOTCONN).
 */
TEST_F(k7, owners_exit_ends_a_forked_childs_wait)
{
	int nw;

	/* The child outlives its parent, the owner: reaped here. */
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
	for (nw = 0; nw < 2; nw++) {
		struct knitk_doorbell_stats before;
		int ready[2], go[2], st;
		pid_t owner, child;
		char c;

		ASSERT_EQ(0, knitk_stats(self->k.fd, 1, &before));
		ASSERT_EQ(0, pipe(ready));
		ASSERT_EQ(0, pipe(go));
		owner = fork();
		ASSERT_LE(0, owner);
		if (!owner) {
			struct knot ok = { .layout = self->k.layout };
			__u32 seq;

			ok.fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
			if (ok.fd < 0 || knot_map(&ok))
				_exit(1);
			seq = knitk_doorbell_seq(knot_doorbell(&ok, 1));
			child = fork();
			if (child < 0)
				_exit(2);
			if (!child) {
				__u64 woken;
				int ret;

				if (nw)
					ret = knitk_notify_wait(ok.fd, 0, seq, 0,
								KNITK_WAIT_FOREVER,
								&woken);
				else
					ret = knitk_wait(ok.fd, seq, KNITK_WAIT_FOREVER);
				_exit(ret == -ENOTCONN ? 0 : 10);
			}
			if (write(ready[1], &child, sizeof(child)) != sizeof(child) ||
			    read(go[0], &c, 1) != 1)
				_exit(3);
			_exit(0);	/* the owner exits under the child's wait */
		}
		ASSERT_EQ(sizeof(child), read(ready[0], &child, sizeof(child)));
		ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, 1, before.waits + 1));
		ASSERT_EQ(1, write(go[1], "g", 1));
		ASSERT_EQ(owner, waitpid(owner, &st, 0));
		EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st));
		ASSERT_EQ(child, waitpid(child, &st, 0));
		ASSERT_TRUE(WIFEXITED(st));
		EXPECT_EQ(0, WEXITSTATUS(st)) TH_LOG("%s", nw ? "NOTIFY_WAIT" : "WAIT");
		wait_dead(self->k.ctl, 1);
		close(ready[0]);
		close(ready[1]);
		close(go[0]);
		close(go[1]);
	}
}

/*
 * Two threads of the owner asleep on its doorbell, one in WAIT and one in
 * NOTIFY_WAIT: one kick advances the seq both expect and ends both.
 */
TEST_F(k7, one_kick_ends_both_waits_of_the_owner)
{
	struct sleeper s[2];

	ASSERT_EQ(0, sleeper_start(self, &s[0], self->w0, false, KNITK_WAIT_FOREVER));
	ASSERT_EQ(0, sleeper_start(self, &s[1], self->w0, true, KNITK_WAIT_FOREVER));
	ASSERT_EQ(s[0].expected, s[1].expected);
	ASSERT_EQ(0, knitk_kick(self->k.fd, W0_BIT, NULL));
	EXPECT_EQ(0, sleeper_end(self, &s[0]));
	EXPECT_EQ(0, sleeper_end(self, &s[1]));
}

/*
 * munmap of every mapping of the knot, in another thread, while a wait
 * sleeps: the wait does not depend on them; a kick ends it with 0.
 */
TEST_F(k7, wait_survives_munmap_of_every_mapping)
{
	struct knitk_doorbell_stats st;
	struct sleeper s;

	ASSERT_EQ(0, sleeper_start(self, &s, self->w0, false, KNITK_WAIT_FOREVER));
	knot_unmap(&self->k);
	ASSERT_EQ(0, knitk_kick(self->k.fd, W0_BIT, NULL));
	pthread_join(s.thread, NULL);
	EXPECT_EQ(0, s.ret);
	ASSERT_EQ(0, knitk_stats(self->k.fd, 0, &st));
	EXPECT_EQ(1ULL, st.kicks);
	EXPECT_EQ(0ULL, st.spurious);
}

TEST_HARNESS_MAIN
