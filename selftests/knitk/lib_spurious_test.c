// SPDX-License-Identifier: GPL-2.0
/*
 * libknitk on the module: a park ended by a kick or a peer death is an
 * event in the library's counters too, never a spurious wake, however the
 * event straddles the park's prepare.  The module's debugfs knob
 * knitk/kick_pause (KNITK_TEST_HOOKS=y, as tools/vm-check.sh builds it)
 * parks the kernel's kick of the host doorbell after the event began and
 * before its seq advance; a whole knitk_doorbell_park of the host runs in
 * that window.  The death case also checks the control page's death_done:
 * not counted while the death's kick is parked, counted once it is done.
 */
#include <pthread.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_test.h"

#define HOST		KNITK_DOORBELL_HOST

FIXTURE(lspur) {
	struct knitk_endpoint *host, *worker;
	const struct knitk_control *ctl;
};

FIXTURE_SETUP(lspur)
{
	struct knitk_geometry g;

	KNITK_REQUIRE_DEV();
	knitk_geom_small(&g);
	ASSERT_EQ(0, knitk_endpoint_create(&g, KNITK_KNOT_KMOD, &self->host));
	ASSERT_EQ(1, knitk_endpoint_join(self->host, KNITK_ROLE_HOST, 0));
	/* The backend follows the fd; the host keeps its own. */
	ASSERT_EQ(0, knitk_endpoint_attach(knitk_endpoint_fd(self->host), 0,
					   &self->worker));
	ASSERT_EQ(1, knitk_endpoint_join(self->worker, KNITK_ROLE_WORKER, 0));
	ASSERT_EQ(0, knitk_endpoint_control(self->host, &self->ctl));
}

FIXTURE_TEARDOWN(lspur)
{
	/* Never leave a kick parked or the knob armed for the next test. */
	knitk_pause_off(KNITK_KICK_PAUSE);
	if (self->worker)
		knitk_endpoint_destroy(self->worker);
	if (self->host)
		knitk_endpoint_destroy(self->host);
}

struct actor {
	pthread_t thread;
	struct knitk_endpoint *knot;
	int ret;
};

static void *kicker_run(void *arg)
{
	struct actor *a = arg;

	a->ret = knitk_doorbell_kick_self(a->knot);
	return NULL;
}

/* A clean leave: the release ends the worker's role, then kicks the host. */
static void *leaver_run(void *arg)
{
	struct actor *a = arg;

	knitk_endpoint_destroy(a->knot);
	a->ret = 0;
	return NULL;
}

static void *parker_run(void *arg)
{
	struct actor *a = arg;

	a->ret = knitk_doorbell_park(a->knot, KNITK_WAIT_FOREVER);
	return NULL;
}

/*
 * Start @event on @ev; once its kick of the host doorbell is parked, run
 * @in_window, park the host until the kick, released once the host sleeps
 * in KNITK_IOC_WAIT, wakes it; the library's counters go to @st.
 */
static void park_across(struct __test_metadata *_metadata,
			FIXTURE_DATA(lspur) *self, struct actor *ev,
			void *(*event)(void *),
			void (*in_window)(struct __test_metadata *,
					  FIXTURE_DATA(lspur) *),
			struct knitk_wake_stats *st)
{
	struct actor p = { .knot = self->host };
	struct knitk_doorbell_stats ks;

	ASSERT_EQ(0, knitk_pause_arm(KNITK_KICK_PAUSE, HOST));
	ASSERT_EQ(0, pthread_create(&ev->thread, NULL, event, ev));
	ASSERT_EQ(0, knitk_pause_wait_parked(KNITK_KICK_PAUSE));
	if (in_window)
		in_window(_metadata, self);
	ASSERT_EQ(0, pthread_create(&p.thread, NULL, parker_run, &p));
	ASSERT_EQ(0, knitk_wait_asleep(knitk_endpoint_fd(self->host), HOST, 1));
	ASSERT_EQ(0, knitk_sysfs_write(KNITK_KICK_PAUSE, KNITK_PAUSE_OFF));
	ASSERT_EQ(0, pthread_join(ev->thread, NULL));
	ASSERT_EQ(0, pthread_join(p.thread, NULL));

	EXPECT_EQ(0, ev->ret);
	EXPECT_EQ(0, p.ret);
	ASSERT_EQ(0, knitk_endpoint_wake_stats(self->host, st));
	TH_LOG("library: waits %llu wakes %llu kicks %llu spurious %llu",
	       (unsigned long long)st->waits, (unsigned long long)st->wakes,
	       (unsigned long long)st->kicks,
	       (unsigned long long)st->spurious);
	EXPECT_EQ(1ULL, st->waits);
	EXPECT_EQ(0ULL, st->mismatches);
	EXPECT_EQ(0ULL, st->spurious);
	/* The module classifies the same wake (kmod/knitk_doorbell.c). */
	ASSERT_EQ(0, knitk_endpoint_doorbell_stats(self->host, HOST, &ks, sizeof(ks)));
	EXPECT_EQ(1ULL, ks.waits);
	EXPECT_EQ(0ULL, ks.spurious);
}

TEST_F(lspur, kick_in_flight_at_prepare_is_a_kick)
{
	struct actor ev = { .knot = self->host };
	struct knitk_wake_stats st = { .size = sizeof(st) };

	park_across(_metadata, self, &ev, kicker_run, NULL, &st);
	EXPECT_EQ(1ULL, st.kicks);
	EXPECT_EQ(0ULL, st.wakes);
}

/* The death counted, its kick not done: death_done must lag. */
static void death_not_done(struct __test_metadata *_metadata,
			   FIXTURE_DATA(lspur) *self)
{
	EXPECT_EQ(1U, knitk_load32(&self->ctl->death_seq));
	EXPECT_EQ(0U, knitk_load32(&self->ctl->death_done));
	EXPECT_EQ(1ULL, knitk_load64(&self->ctl->dead));
}

TEST_F(lspur, death_in_flight_at_prepare_is_a_wake)
{
	struct actor ev = { .knot = self->worker };
	struct knitk_wake_stats st = { .size = sizeof(st) };

	self->worker = NULL;	/* the leaver destroys it */
	park_across(_metadata, self, &ev, leaver_run, death_not_done, &st);
	EXPECT_EQ(1ULL, st.wakes);
	EXPECT_EQ(0ULL, st.kicks);
	/* The leave returned: its kick is done. */
	EXPECT_EQ(1U, knitk_load32(&self->ctl->death_seq));
	EXPECT_EQ(1U, knitk_load32(&self->ctl->death_done));
}

TEST_HARNESS_MAIN
