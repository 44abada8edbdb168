/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The knots that several programs end roles of, race calls on and wait
 * on, as kselftest fixtures, and what their tests share:
 *  - adv: a small knot whose creator's fd is joined as the host and
 *    mapped; the test is a child subreaper, and the children it tracks
 *    are killed and reaped after it;
 *  - k7: a knot of four arena pages per mailbox (a data region to cut
 *    into pieces), the host and worker 0 (w0) joined, and no knot live
 *    before or after the test;
 * a thread in one KNITK_IOC_WAIT (struct waiter), a thread asleep in
 * KNITK_IOC_WAIT or KNITK_IOC_NOTIFY_WAIT on k7's worker 0 (struct
 * sleeper), the control page's roles and deaths, and the wait for a
 * role to be marked dead.  Written from uapi/linux/knitk.h alone.
 */
#ifndef KNITK_FIXTURES_H
#define KNITK_FIXTURES_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/prctl.h>

#include "knitk_harness.h"
#include "knitk_test.h"
#include "knitk_live.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	(1ULL << HOST)
#define W0_BIT		(1ULL << 0)
#define PAGE		KNITK_PAGE_BYTES

FIXTURE(adv) {
	struct knot k;		/* creator, joined as the host, mapped */
	pid_t pids[4];
	int nr_pids;
};

FIXTURE_SETUP(adv)
{
	struct knitk_geometry g;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	self->nr_pids = 0;
}

FIXTURE_TEARDOWN(adv)
{
	int i;

	for (i = 0; i < self->nr_pids; i++) {
		if (self->pids[i] > 0) {
			kill(self->pids[i], SIGKILL);
			waitpid(self->pids[i], NULL, 0);
		}
	}
	knot_close(&self->k);
}

/* @pid is killed and reaped after the test. */
static inline void track(FIXTURE_DATA(adv) *self, pid_t pid)
{
	if (self->nr_pids < 4)
		self->pids[self->nr_pids++] = pid;
}

FIXTURE(k7) {
	struct knot k;		/* host endpoint, mapped */
	int w0;			/* worker 0's endpoint, or -1 */
};

FIXTURE_SETUP(k7)
{
	struct knitk_geometry g;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	/* Four arena pages per mailbox: a data region to cut into pieces. */
	knitk_geom(&g, 0, 2, 1, 64, 64, 4 * KNITK_ARENA_ALIGN);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	self->w0 = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, self->w0);
}

FIXTURE_TEARDOWN(k7)
{
	if (self->w0 >= 0)
		close(self->w0);
	knot_close(&self->k);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/* One byte read from @fd, 0 if there was none. */
static inline char read_byte(int fd)
{
	char c = 0;

	return read(fd, &c, 1) == 1 ? c : 0;
}

/* The roles held (@live, a doorbell bit each) and the deaths counted. */
static inline void expect_live(struct __test_metadata *_metadata,
			       const struct knitk_control *ctl, __u64 live,
			       __u32 deaths)
{
	EXPECT_EQ(live, knitk_load64(&ctl->live));
	EXPECT_EQ(deaths, knitk_load32(&ctl->death_seq));
}

/* Until bit @bit of the control page's dead mask is set. */
static inline void wait_dead(const struct knitk_control *ctl, unsigned int bit)
{
	while (!(knitk_load64((const __u64 *)&ctl->dead) & (1ULL << bit)))
		usleep(1000);
}

/* A thread in one KNITK_IOC_WAIT on @fd for @seq. */
struct waiter {
	pthread_t thread;
	int fd;
	__u32 seq;
	__u64 deadline;		/* 0: KNITK_WAIT_FOREVER */
	int ret;
};

static inline void *waiter_run(void *arg)
{
	struct waiter *w = arg;

	w->ret = knitk_wait(w->fd, w->seq,
			    w->deadline ? w->deadline : KNITK_WAIT_FOREVER);
	return NULL;
}

/* A thread asleep in KNITK_IOC_WAIT or KNITK_IOC_NOTIFY_WAIT. */
struct sleeper {
	pthread_t thread;
	int fd;
	bool notify_wait;	/* KNITK_IOC_NOTIFY_WAIT, else KNITK_IOC_WAIT */
	__u64 doorbells;	/* rung by a NOTIFY_WAIT */
	__u32 expected;
	__u64 deadline;
	__u64 woken;
	int ret;
};

static inline void *sleeper_run(void *arg)
{
	struct sleeper *s = arg;

	if (s->notify_wait)
		s->ret = knitk_notify_wait(s->fd, s->doorbells, s->expected, 0,
					   s->deadline, &s->woken);
	else
		s->ret = knitk_wait(s->fd, s->expected, s->deadline);
	return NULL;
}

/* @s started on worker 0's doorbell; returns once it counts asleep. */
static inline int sleeper_start(FIXTURE_DATA(k7) *self, struct sleeper *s,
				int fd, bool notify_wait, __u64 deadline)
{
	struct knitk_doorbell *db = knot_doorbell(&self->k, 0);
	struct knitk_doorbell_stats st;
	int ret;

	ret = knitk_stats(self->k.fd, 0, &st);
	if (ret)
		return ret;
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->notify_wait = notify_wait;
	s->doorbells = HOST_BIT;	/* nothing pending: filtered */
	s->deadline = deadline;
	s->expected = knitk_doorbell_seq(db);
	knitk_doorbell_sleeping(db, 1);
	ret = pthread_create(&s->thread, NULL, sleeper_run, s);
	if (ret)
		return -ret;
	return knitk_wait_asleep(self->k.fd, 0, st.waits + 1);
}

static inline int sleeper_end(FIXTURE_DATA(k7) *self, struct sleeper *s)
{
	pthread_join(s->thread, NULL);
	knitk_doorbell_sleeping(knot_doorbell(&self->k, 0), 0);
	return s->ret;
}

#endif /* KNITK_FIXTURES_H */
