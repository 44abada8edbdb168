// SPDX-License-Identifier: GPL-2.0
/*
 * A park ended by a kick or a peer death is an event, never a spurious
 * wake, wherever the event lands relative to the park's prepare (futex
 * backend).  The test hooks of knot_hooks.h (a -DKNITK_TEST_HOOKS build)
 * park the event between its "begun" count and its doorbell's seq
 * advance; the whole prepare, re-check and futex sleep of a waiting
 * thread then run in that window, deterministically:
 *  - kick_in_flight_at_prepare: one thread of the host endpoint kicks it
 *    (knitk_doorbell_kick_self, as the pool hands the drainer role over) while
 *    another parks on it: counted as a kick.
 *  - death_in_flight_at_prepare: worker 1 is marked dead while the host
 *    parks: counted as a wake, and death_done catches up with death_seq
 *    only after the kick.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "tap.h"
#include "futex_asleep.h"
#include "../core/internal.h"
#include "../core/knot_hooks.h"

/* ------------------------------------------------------------ the hook */

static struct knitk_endpoint *hook_knot;	/* park its event at hook_point */
static enum knot_hook hook_point;
static _Atomic int hook_armed;
static pthread_mutex_t hook_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hook_cond = PTHREAD_COND_INITIALIZER;
static int hook_parked, hook_go;

/* In the event's thread, once: report it parked, wait for the go. */
static void hook_park(struct knitk_endpoint *k, enum knot_hook point,
		      unsigned int arg)
{
	(void)arg;
	if (k != hook_knot || point != hook_point ||
	    !atomic_exchange(&hook_armed, 0))
		return;
	pthread_mutex_lock(&hook_mu);
	hook_parked = 1;
	pthread_cond_broadcast(&hook_cond);
	while (!hook_go)
		pthread_cond_wait(&hook_cond, &hook_mu);
	pthread_mutex_unlock(&hook_mu);
}

static void hook_arm(struct knitk_endpoint *k, enum knot_hook point)
{
	hook_knot = k;
	hook_point = point;
	hook_parked = 0;
	hook_go = 0;
	atomic_store(&hook_armed, 1);
	atomic_store(&knitk__endpoint_hook, hook_park);
}

static void hook_wait_parked(void)
{
	pthread_mutex_lock(&hook_mu);
	while (!hook_parked)
		pthread_cond_wait(&hook_cond, &hook_mu);
	pthread_mutex_unlock(&hook_mu);
}

static void hook_release(void)
{
	pthread_mutex_lock(&hook_mu);
	hook_go = 1;
	pthread_cond_broadcast(&hook_cond);
	pthread_mutex_unlock(&hook_mu);
}

static void hook_disarm(void)
{
	atomic_store(&knitk__endpoint_hook, NULL);
	atomic_store(&hook_armed, 0);
}

/* ---------------------------------------------------------- the actors */

struct actor {
	pthread_t thread;
	struct knitk_endpoint *knot;
	unsigned int slot;	/* mark_dead: the slot */
	_Atomic pid_t tid;	/* parker: its thread id, once running */
	int ret;
	uint32_t begun, done;	/* death_seq, death_done while parked */
};

static void *kicker_run(void *arg)
{
	struct actor *a = arg;

	a->ret = knitk_doorbell_kick_self(a->knot);
	return NULL;
}

static void *marker_run(void *arg)
{
	struct actor *a = arg;

	a->ret = knitk_endpoint_mark_dead(a->knot, a->slot);
	return NULL;
}

static void *parker_run(void *arg)
{
	struct actor *a = arg;

	atomic_store(&a->tid, futex_asleep_tid());
	a->ret = knitk_doorbell_park(a->knot, KNITK_WAIT_FOREVER);
	return NULL;
}

/* ------------------------------------------------------------ fixture */

struct fx {
	struct knitk_endpoint *host, *worker[2];
};

static int fx_init(struct fx *f)
{
	struct knitk_geometry g = {
		.nr_workers = 2, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64,
	};
	unsigned int i;

	memset(f, 0, sizeof(*f));
	if (knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &f->host) ||
	    knitk_endpoint_join(f->host, KNITK_ROLE_HOST, 0) < 1)
		return -1;
	for (i = 0; i < 2; i++)
		if (knitk_endpoint_attach(knitk_endpoint_fd(f->host), 0, &f->worker[i]) ||
		    knitk_endpoint_join(f->worker[i], KNITK_ROLE_WORKER, i) < 1)
			return -1;
	return 0;
}

static void fx_fini(struct fx *f)
{
	unsigned int i;

	hook_disarm();
	for (i = 0; i < 2; i++)
		if (f->worker[i])
			knitk_endpoint_destroy(f->worker[i]);
	if (f->host)
		knitk_endpoint_destroy(f->host);
}

static const void *host_seq(struct knitk_endpoint *k)
{
	return &knot_doorbell(k, KNITK_DOORBELL_HOST)->seq;
}

/*
 * With @ev parked in its window: the host parks, sleeps on the seq it
 * read, and the event's seq advance then wakes it.
 */
static void park_across(struct knitk_endpoint *host, struct actor *ev,
			void *(*event)(void *), struct knitk_wake_stats *st)
{
	struct actor p = { .knot = host };

	const struct knitk_control *ctl;

	knitk_endpoint_control(host, &ctl);
	REQUIRE(pthread_create(&ev->thread, NULL, event, ev) == 0);
	hook_wait_parked();
	ev->begun = atomic_load(A32(&ctl->death_seq));
	ev->done = atomic_load(A32(&ctl->death_done));
	REQUIRE(pthread_create(&p.thread, NULL, parker_run, &p) == 0);
	wait_asleep_on_futex(&p.tid, host_seq(host));
	hook_release();
	pthread_join(ev->thread, NULL);
	pthread_join(p.thread, NULL);
	CHECK_EQ(ev->ret, 0);
	CHECK_EQ(p.ret, 0);
	knitk_endpoint_wake_stats(host, st);
	printf("# waits %llu wakes %llu kicks %llu spurious %llu mismatches %llu\n",
	       (unsigned long long)st->waits, (unsigned long long)st->wakes,
	       (unsigned long long)st->kicks, (unsigned long long)st->spurious,
	       (unsigned long long)st->mismatches);
	CHECK_EQ(st->waits, 1);
	CHECK_EQ(st->mismatches, 0);
	CHECK_EQ(st->spurious, 0);
}

static void kick_in_flight_at_prepare(void)
{
	struct knitk_wake_stats st = { .size = sizeof(st) };
	struct fx f;
	struct actor ev;

	REQUIRE(fx_init(&f) == 0);
	ev = (struct actor){ .knot = f.host };
	hook_arm(f.host, KNOT_HOOK_KICK);
	park_across(f.host, &ev, kicker_run, &st);
	CHECK_EQ(st.kicks, 1);
	CHECK_EQ(st.wakes, 0);
	fx_fini(&f);
}

static void death_in_flight_at_prepare(void)
{
	const struct knitk_control *ctl;
	struct knitk_wake_stats st = { .size = sizeof(st) };
	struct fx f;
	struct actor ev;

	REQUIRE(fx_init(&f) == 0);
	knitk_endpoint_control(f.host, &ctl);
	/* The pool's monitor marks worker 1 dead from the host endpoint. */
	ev = (struct actor){ .knot = f.host, .slot = 1 };
	hook_arm(f.host, KNOT_HOOK_DEATH);
	park_across(f.host, &ev, marker_run, &st);
	CHECK_EQ(st.wakes, 1);
	CHECK_EQ(st.kicks, 0);
	/* Done only after its kicks: what the park's classification needs. */
	CHECK_EQ(ev.begun, 1);
	CHECK_EQ(ev.done, 0);
	CHECK_EQ(ctl->dead, 1ULL << 1);
	CHECK_EQ(ctl->death_seq, 1);
	CHECK_EQ(ctl->death_done, 1);
	fx_fini(&f);
}

int main(void)
{
	TEST(kick_in_flight_at_prepare);
	TEST(death_in_flight_at_prepare);
	return tap_exit();
}
