// SPDX-License-Identifier: GPL-2.0
/*
 * A wait ended by a kick or a peer death is an event, never a spurious
 * wake, wherever the event lands relative to the wait's own seq check.
 *
 * The module's debugfs knob knitk/kick_pause (built with KNITK_TEST_HOOKS=y,
 * as tools/vm-check.sh builds it) parks a kick after it counted its event
 * and before it advanced seq: the whole wait then runs in that window,
 * deterministically.  The last test has a thread kick a host that waits in
 * a loop, the race itself, with the same expectation.
 */
#include <pthread.h>

#include "knitk_harness.h"
#include "knitk_test.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	(1ULL << HOST)

FIXTURE(spur) {
	struct knot k;
	int worker;
};

FIXTURE_SETUP(spur)
{
	KNITK_REQUIRE_DEV();
	self->worker = -1;
	ASSERT_EQ(0, knot_make_host_worker(&self->k, &self->worker));
}

FIXTURE_TEARDOWN(spur)
{
	/* Never leave a kick parked or the knob armed for the next test. */
	knitk_pause_off(KNITK_KICK_PAUSE);
	if (self->worker >= 0)
		close(self->worker);
	knot_close(&self->k);
}

struct actor {
	pthread_t thread;
	int fd;
	__u32 expected;		/* waiter: the seq to wait on */
	int ret;
};

static void *kicker_run(void *arg)
{
	struct actor *a = arg;

	a->ret = knitk_kick(a->fd, HOST_BIT, NULL);
	return NULL;
}

static void *closer_run(void *arg)
{
	struct actor *a = arg;

	a->ret = close(a->fd) ? -errno : 0;
	return NULL;
}

static void *waiter_run(void *arg)
{
	struct actor *a = arg;

	a->ret = knitk_wait(a->fd, a->expected, KNITK_WAIT_FOREVER);
	return NULL;
}

/*
 * With an event parked between its count and its seq advance: a host wait
 * on the unchanged seq goes to sleep, the event then wakes it, and the
 * wake is not spurious.
 */
static void wait_across_parked_event(struct __test_metadata *_metadata,
				     FIXTURE_DATA(spur) *self,
				     void *(*event)(void *), int event_fd)
{
	struct knitk_doorbell *db = knot_doorbell(&self->k, HOST);
	struct actor ev = { .fd = event_fd }, w = { .fd = self->k.fd };
	struct knitk_doorbell_stats st;

	ASSERT_EQ(0, knitk_pause_arm(KNITK_KICK_PAUSE, HOST));
	ASSERT_EQ(0, pthread_create(&ev.thread, NULL, event, &ev));
	ASSERT_EQ(0, knitk_pause_wait_parked(KNITK_KICK_PAUSE));

	w.expected = knitk_doorbell_seq(db);
	knitk_doorbell_sleeping(db, 1);
	ASSERT_EQ(0, pthread_create(&w.thread, NULL, waiter_run, &w));
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, HOST, 1));
	ASSERT_EQ(0, knitk_sysfs_write(KNITK_KICK_PAUSE, KNITK_PAUSE_OFF));
	ASSERT_EQ(0, pthread_join(ev.thread, NULL));
	ASSERT_EQ(0, pthread_join(w.thread, NULL));
	knitk_doorbell_sleeping(db, 0);

	EXPECT_EQ(0, ev.ret);
	EXPECT_EQ(0, w.ret);
	EXPECT_EQ(w.expected + 1, knitk_doorbell_seq(db));
	ASSERT_EQ(0, knitk_stats(self->k.fd, HOST, &st));
	EXPECT_EQ(1ULL, st.waits);
	EXPECT_EQ(0ULL, st.mismatches);
	EXPECT_EQ(0ULL, st.spurious);
}

TEST_F(spur, kick_counted_before_the_wait_is_not_spurious)
{
	struct knitk_doorbell_stats st;

	wait_across_parked_event(_metadata, self, kicker_run, self->k.fd);
	ASSERT_EQ(0, knitk_stats(self->k.fd, HOST, &st));
	EXPECT_EQ(1ULL, st.kicks);
}

TEST_F(spur, death_counted_before_the_wait_is_not_spurious)
{
	int fd = self->worker;

	/* The worker's release marks it dead, then parks in its kick. */
	self->worker = -1;
	wait_across_parked_event(_metadata, self, closer_run, fd);
	EXPECT_EQ(1ULL << 0, self->k.ctl->dead);
}

#define ROUNDS	2000

struct loop {
	struct knot *k;
	volatile int stop;
	unsigned int waits;
};

/* A host thread parked in a loop on an idle knot, as a pool's host is. */
static void *host_loop(void *arg)
{
	struct loop *l = arg;
	struct knitk_doorbell *db = knot_doorbell(l->k, HOST);

	for (;;) {
		/* seq first: a stop seen after it is followed by a kick. */
		__u32 seq = knitk_doorbell_seq(db);

		if (__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE))
			break;
		knitk_doorbell_sleeping(db, 1);
		if (knitk_wait(l->k->fd, seq, KNITK_WAIT_FOREVER) == 0)
			l->waits++;
		knitk_doorbell_sleeping(db, 0);
	}
	return NULL;
}

TEST_F(spur, kicks_racing_a_waiting_host_are_not_spurious)
{
	struct loop l = { .k = &self->k };
	struct knitk_doorbell_stats st;
	pthread_t t;
	int i;

	ASSERT_EQ(0, pthread_create(&t, NULL, host_loop, &l));
	for (i = 0; i < ROUNDS; i++)
		ASSERT_EQ(0, knitk_kick(self->worker, HOST_BIT, NULL));
	__atomic_store_n(&l.stop, 1, __ATOMIC_RELEASE);
	/* The loop's last wait, if any, ends with this kick. */
	ASSERT_EQ(0, knitk_kick(self->worker, HOST_BIT, NULL));
	ASSERT_EQ(0, pthread_join(t, NULL));

	ASSERT_EQ(0, knitk_stats(self->k.fd, HOST, &st));
	TH_LOG("waits %llu woken %u mismatches %llu kicks %llu",
	       (unsigned long long)st.waits, l.waits,
	       (unsigned long long)st.mismatches,
	       (unsigned long long)st.kicks);
	EXPECT_EQ(ROUNDS + 1ULL, st.kicks);
	EXPECT_EQ(0ULL, st.spurious);
}

TEST_HARNESS_MAIN
