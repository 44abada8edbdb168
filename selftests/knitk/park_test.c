// SPDX-License-Identifier: GPL-2.0
/*
 * The parked path: KNITK_WAIT_SPIN (a wait that spins in the kernel while
 * its doorbell's ringer runs, docs/protocol.md S8) and KNITK_IOC_NOTIFY_WAIT
 * (ring, then wait, in one call, S9).
 *
 * The spin tests raise the module's spin_ns to an hour: a spin that failed
 * to stop for a descheduled or dead ringer, a signal or a deadline would
 * hang the test (caught by the runner's watchdog) instead of passing.  No
 * assertion depends on time; every step waits for a state it can see (a
 * counter, a thread's scheduler state, its system time growing).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>

#include "knitk_harness.h"
#include "knitk_signal.h"
#include "knitk_spin.h"
#include "knitk_stats.h"
#include "knitk_test.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	(1ULL << HOST)
#define W0_BIT		(1ULL << 0)

FIXTURE(pk) {
	struct knot k;		/* mapped through the host endpoint */
	int w0;			/* worker 0's endpoint */
	char spin_ns[32];	/* the parameter's value before the test */
};

FIXTURE_SETUP(pk)
{
	struct knitk_geometry g;

	KNITK_REQUIRE_DEV();
	self->spin_ns[0] = '\0';
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	self->w0 = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, self->w0);
}

FIXTURE_TEARDOWN(pk)
{
	knitk_pause_off(KNITK_SPIN_PAUSE);
	if (self->spin_ns[0])
		knitk_write_file(SPIN_PARAM, self->spin_ns);
	close(self->w0);
	knot_close(&self->k);
}

/* Spin for up to an hour; skips without a second CPU or the parameter. */
static void spin_long(struct __test_metadata *_metadata, FIXTURE_DATA(pk) *self)
{
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(_exit(255), "%s: a spin needs a second CPU",
		     _metadata->name);
	if (knitk_read_file(SPIN_PARAM, self->spin_ns, sizeof(self->spin_ns)) ||
	    knitk_write_file(SPIN_PARAM, SPIN_HOUR))
		SKIP(_exit(255), "%s: cannot set %s", _metadata->name,
		     SPIN_PARAM);
}

static struct knitk_sector *request_mb(FIXTURE_DATA(pk) *self)
{
	return knot_mailbox(&self->k, 0);	/* (submitter 0, worker 0) */
}

static struct knitk_sector *return_mb(FIXTURE_DATA(pk) *self)
{
	return knot_mailbox(&self->k, self->k.layout.nr_request);
}

TEST_F(pk, api_reports_features)
{
	struct knitk_api api = { .api = KNITK_API,
				 .features = KNITK_FEATURE_SPIN |
					     KNITK_FEATURE_NOTIFY_WAIT };

	ASSERT_EQ(0, knitk_ioctl(self->k.fd, KNITK_IOC_API, &api));
	EXPECT_TRUE(api.features & KNITK_FEATURE_SPIN);
	EXPECT_TRUE(api.features & KNITK_FEATURE_NOTIFY_WAIT);
	EXPECT_TRUE(api.ioctls & (1ULL << _IOC_NR(KNITK_IOC_NOTIFY_WAIT)));
}

/* Bad input is rejected before anything is rung or waited for. */
TEST_F(pk, bad_input_rejected)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct knitk_doorbell *hdb = knot_doorbell(&self->k, HOST);
	struct knitk_notify_wait nw = { .doorbells = W0_BIT };
	struct knitk_doorbell_stats st;
	__u32 wseq, hseq;
	int unjoined;

	/* Worker 0 asleep with work: any ring that got through wakes it. */
	knot_lane_publish(request_mb(self), 0);
	wseq = flag_asleep(wdb);
	hseq = flag_asleep(hdb);
	nw.expected = hseq;
	nw.deadline_ns = 0;

	nw.flags = KNITK_WAIT_SPIN << 1;
	EXPECT_EQ(-EINVAL, knitk_ioctl(self->k.fd, KNITK_IOC_NOTIFY_WAIT, &nw));
	nw.flags = 0;
	nw.reserved[0] = 1;
	EXPECT_EQ(-EINVAL, knitk_ioctl(self->k.fd, KNITK_IOC_NOTIFY_WAIT, &nw));
	nw.reserved[0] = 0;
	nw.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, knitk_ioctl(self->k.fd, KNITK_IOC_NOTIFY_WAIT, &nw));
	/* A doorbell of no worker (the knot has two), beside a valid one. */
	EXPECT_EQ(-EINVAL, knitk_notify_wait(self->k.fd, W0_BIT | 1ULL << 5,
					     hseq, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, knitk_wait_flags(self->k.fd, hseq,
					    KNITK_WAIT_SPIN << 1, 0));

	unjoined = knitk_open();
	ASSERT_LE(0, unjoined);
	ASSERT_EQ(0, knitk_attach(unjoined, self->k.fd, NULL));
	EXPECT_EQ(-ENOTCONN, knitk_notify_wait(unjoined, W0_BIT, 0, 0, 0,
					       NULL));
	EXPECT_EQ(-ENOTCONN, knitk_wait_flags(unjoined, 0, KNITK_WAIT_SPIN, 0));
	close(unjoined);
	EXPECT_EQ(-ENOTTY, knitk_ioctl(self->k.fd,
				       _IOWR(KNITK_IOC_MAGIC, 0x07, __u64),
				       &nw));

	/* Nothing was rung and nothing waited. */
	EXPECT_EQ(wseq, knitk_doorbell_seq(wdb));
	stats_of(_metadata, self->k.fd, 0, &st);
	EXPECT_EQ(0ULL, st.wakes + st.suppressed_idle + st.suppressed_awake);
	stats_of(_metadata, self->k.fd, HOST, &st);
	EXPECT_EQ(0ULL, st.waits + st.mismatches + st.timeouts);
	EXPECT_EQ(0ULL, st.spin_wakes + st.spin_sleeps);
}

/* The peer asleep with work: woken by the ring, then the own wait runs. */
TEST_F(pk, ring_sleeping_peer_then_wait)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct knitk_doorbell_stats st;
	__u32 wseq, hseq;
	__u64 woken;

	wseq = flag_asleep(wdb);
	knot_lane_publish(request_mb(self), 0);
	hseq = flag_asleep(knot_doorbell(&self->k, HOST));
	EXPECT_EQ(-ETIMEDOUT, knitk_notify_wait(self->k.fd, W0_BIT, hseq, 0,
						knitk_now_ns(), &woken));
	EXPECT_EQ(W0_BIT, woken);
	EXPECT_EQ(wseq + 1, knitk_doorbell_seq(wdb));
	EXPECT_EQ(0U, __atomic_load_n(&wdb->sleeping, __ATOMIC_ACQUIRE));
	stats_of(_metadata, self->k.fd, 0, &st);
	EXPECT_EQ(1ULL, st.wakes);
	stats_of(_metadata, self->k.fd, HOST, &st);
	EXPECT_EQ(1ULL, st.waits);
	EXPECT_EQ(1ULL, st.timeouts);
}

/* The filter of S4 applies to the ring: peer awake, or peer idle. */
TEST_F(pk, ring_filtered_awake_and_idle)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct knitk_doorbell_stats st;
	__u32 hseq;
	__u64 woken;

	hseq = flag_asleep(knot_doorbell(&self->k, HOST));
	/* Asleep, nothing pending. */
	flag_asleep(wdb);
	EXPECT_EQ(-ETIMEDOUT, knitk_notify_wait(self->k.fd, W0_BIT, hseq, 0, 0,
						&woken));
	EXPECT_EQ(0ULL, woken);
	/* Pending, but awake. */
	knitk_doorbell_sleeping(wdb, 0);
	knot_lane_publish(request_mb(self), 0);
	EXPECT_EQ(-ETIMEDOUT, knitk_notify_wait(self->k.fd, W0_BIT, hseq,
						KNITK_WAIT_SPIN, 0, &woken));
	EXPECT_EQ(0ULL, woken);
	stats_of(_metadata, self->k.fd, 0, &st);
	EXPECT_EQ(1ULL, st.suppressed_idle);
	EXPECT_EQ(1ULL, st.suppressed_awake);
	EXPECT_EQ(0ULL, st.wakes);
}

/*
 * The reply lands between the caller's flag and its call: the caller's seq
 * moved, so the call rings and returns -EAGAIN at once.
 */
TEST_F(pk, reply_before_wait_eagain)
{
	struct knitk_doorbell *hdb = knot_doorbell(&self->k, HOST);
	struct knitk_doorbell_stats st;
	__u32 hseq;
	__u64 woken;

	hseq = flag_asleep(hdb);
	flag_asleep(knot_doorbell(&self->k, 0));
	knot_lane_publish(request_mb(self), 0);
	/* Worker 0 answers at once, while the host is flagged. */
	knot_lane_publish(return_mb(self), 0);
	ASSERT_EQ(0, knitk_notify(self->w0, HOST_BIT, &woken));
	ASSERT_EQ(HOST_BIT, woken);
	EXPECT_EQ(-EAGAIN, knitk_notify_wait(self->k.fd, W0_BIT, hseq,
					     KNITK_WAIT_SPIN,
					     KNITK_WAIT_FOREVER, &woken));
	EXPECT_EQ(W0_BIT, woken);
	stats_of(_metadata, self->k.fd, HOST, &st);
	EXPECT_EQ(1ULL, st.mismatches);
	EXPECT_EQ(0ULL, st.waits + st.spin_wakes + st.spin_sleeps);
}

/* Worker 0 for the round-trip tests: answer @n requests, each once. */
struct echo {
	FIXTURE_DATA(pk) *self;
	unsigned int n;
	__u32 flags;		/* of its waits */
	int combined;		/* answer and wait in one NOTIFY_WAIT */
	int ret;
	unsigned int served;
};

static void *echo_run(void *arg)
{
	struct echo *e = arg;
	struct knitk_sector *req = request_mb(e->self);
	struct knitk_sector *ret = return_mb(e->self);
	struct knitk_doorbell *db = knot_doorbell(&e->self->k, 0);
	int answer = 0;
	__u32 seq;

	while (e->served < e->n) {
		/* S1: flag, re-check, then (ring and) wait. */
		seq = flag_asleep(db);
		if (knitk_load64(&req->pub) != knitk_load64(&req->ack)) {
			knitk_doorbell_sleeping(db, 0);
			drain(req);
			knot_lane_publish(ret, e->served % KNITK_LANES);
			e->served++;
			answer = 1;
			if (!e->combined) {
				e->ret = knitk_notify(e->self->w0, HOST_BIT,
						      NULL);
				answer = 0;
			}
			if (e->ret)
				break;
			continue;
		}
		if (answer)
			e->ret = knitk_notify_wait(e->self->w0, HOST_BIT, seq,
						   e->flags,
						   KNITK_WAIT_FOREVER, NULL);
		else
			e->ret = knitk_wait_flags(e->self->w0, seq, e->flags,
						  KNITK_WAIT_FOREVER);
		answer = 0;
		if (e->ret == -EAGAIN)
			e->ret = 0;
		if (e->ret)
			break;
	}
	knitk_doorbell_sleeping(db, 0);
	/* The last answer may still be unrung. */
	if (!e->ret && answer)
		e->ret = knitk_notify(e->self->w0, HOST_BIT, NULL);
	return NULL;
}

/*
 * Round trips where both sides ring and wait in one call: every request is
 * answered exactly once, no wake is lost (the test would hang) and none is
 * spurious, whichever side parks first in each hop.
 */
static void round_trips(struct __test_metadata *_metadata,
			FIXTURE_DATA(pk) *self, __u32 flags, unsigned int n)
{
	struct echo e = { .self = self, .n = n, .flags = flags,
			  .combined = 1 };
	struct knitk_sector *req = request_mb(self);
	struct knitk_sector *ret = return_mb(self);
	struct knitk_doorbell *hdb = knot_doorbell(&self->k, HOST);
	struct knitk_doorbell_stats st;
	unsigned int i;
	pthread_t t;
	__u32 seq;
	int r;

	ASSERT_EQ(0, pthread_create(&t, NULL, echo_run, &e));
	for (i = 0; i < n; i++) {
		seq = flag_asleep(hdb);
		knot_lane_publish(req, i % KNITK_LANES);
		r = knitk_notify_wait(self->k.fd, W0_BIT, seq, flags,
				      KNITK_WAIT_FOREVER, NULL);
		/* Until the answer is there: re-flag, re-check, wait. */
		while ((r == 0 || r == -EAGAIN) &&
		       knitk_load64(&ret->pub) == knitk_load64(&ret->ack)) {
			seq = flag_asleep(hdb);
			if (knitk_load64(&ret->pub) != knitk_load64(&ret->ack))
				break;
			r = knitk_wait_flags(self->k.fd, seq, flags,
					     KNITK_WAIT_FOREVER);
		}
		knitk_doorbell_sleeping(hdb, 0);
		ASSERT_TRUE(r == 0 || r == -EAGAIN);
		drain(ret);
	}
	pthread_join(t, NULL);
	EXPECT_EQ(0, e.ret);
	EXPECT_EQ(n, e.served);
	stats_of(_metadata, self->k.fd, HOST, &st);
	EXPECT_EQ(0ULL, st.spurious);
	stats_of(_metadata, self->k.fd, 0, &st);
	EXPECT_EQ(0ULL, st.spurious);
}

TEST_F(pk, round_trips_notify_wait)
{
	round_trips(_metadata, self, 0, 2000);
}

TEST_F(pk, round_trips_notify_wait_spin)
{
	round_trips(_metadata, self, KNITK_WAIT_SPIN, 2000);
}

/* A ringer of worker 0's doorbell that runs (or blocks) on request. */
struct ringer {
	FIXTURE_DATA(pk) *self;
	pthread_t thread;
	pid_t tid;		/* the ringer's thread */
	int block;		/* block in read() instead of running */
	int pipe[2];		/* unblocks it */
	volatile int stop;
	volatile int rang;
	int ret;
};

/* Make the calling task worker 0's ringer: a notify that is delivered. */
static int become_ringer(FIXTURE_DATA(pk) *self)
{
	__u64 woken = 0;
	int ret;

	flag_asleep(knot_doorbell(&self->k, 0));
	knot_lane_publish(request_mb(self), 0);
	ret = knitk_notify(self->k.fd, W0_BIT, &woken);
	drain(request_mb(self));
	return ret ? ret : woken == W0_BIT ? 0 : -EPROTO;
}

static void *ringer_run(void *arg)
{
	struct ringer *g = arg;
	char c;

	g->tid = knitk_gettid();
	g->ret = pin_to(1);
	if (!g->ret)
		g->ret = become_ringer(g->self);
	__atomic_store_n(&g->rang, 1, __ATOMIC_SEQ_CST);
	if (g->ret)
		return NULL;
	if (g->block) {
		if (read(g->pipe[0], &c, 1) < 0)
			g->ret = -errno;
		return NULL;
	}
	while (!g->stop)
		;
	return NULL;
}

static void ringer_start(struct __test_metadata *_metadata,
			 struct ringer *g)
{
	ASSERT_EQ(0, pin_to(0));
	ASSERT_EQ(0, pipe(g->pipe));
	ASSERT_EQ(0, pthread_create(&g->thread, NULL, ringer_run, g));
	while (!__atomic_load_n(&g->rang, __ATOMIC_SEQ_CST))
		usleep(1000);
	ASSERT_EQ(0, g->ret);
}

static void ringer_stop(struct ringer *g)
{
	g->stop = 1;
	if (write(g->pipe[1], "x", 1) < 0)
		g->ret = -errno;
	pthread_join(g->thread, NULL);
	close(g->pipe[0]);
	close(g->pipe[1]);
}

/*
 * One round of spin_woken_by_running_ringer: the ringer, worker 0's, runs
 * on CPU 1 making only system calls (never sleeping) until the waiter's
 * spin is parked in the module's spin_pause point, or the waiter slept
 * instead (its ringer was off its CPU when the spin began); then it
 * publishes, rings and lets the spin go on.
 */
struct spin_round {
	FIXTURE_DATA(pk) *self;
	pthread_t thread;
	__u64 waits;		/* worker 0's waits before the round */
	volatile int ready;
	int parked;		/* the ring came while the spin was parked */
	int ret;
};

static void *spin_round_ringer(void *arg)
{
	struct spin_round *g = arg;
	struct knitk_doorbell_stats st;
	unsigned long long v;

	g->ret = pin_to(1);
	if (!g->ret)
		g->ret = become_ringer(g->self);
	__atomic_store_n(&g->ready, 1, __ATOMIC_SEQ_CST);
	while (!g->ret) {
		g->ret = knitk_sysfs_read(KNITK_SPIN_PAUSE, &v);
		if (!g->ret && v == KNITK_PAUSE_PARKED) {
			g->parked = 1;
			break;
		}
		if (!g->ret)
			g->ret = knitk_stats(g->self->k.fd, 0, &st);
		if (!g->ret && st.waits > g->waits)
			break;
	}
	if (g->ret)
		return NULL;
	knot_lane_publish(request_mb(g->self), 1);
	g->ret = knitk_notify(g->self->k.fd, W0_BIT, NULL);
	if (!g->ret)
		g->ret = knitk_sysfs_write(KNITK_SPIN_PAUSE, KNITK_PAUSE_OFF);
	return NULL;
}

/*
 * S8: a wait whose ringer runs spins, and a ring that lands during the
 * spin ends it without a sleep: counted in spin_wakes, not in waits.  The
 * spin_pause point holds the spin while the ring lands, so the outcome
 * does not depend on timing.  A round whose ringer was not on its CPU when
 * the spin began sleeps instead, which is S8 too, and is asserted as
 * such; rounds repeat until one spun (a hang is the watchdog's).
 */
TEST_F(pk, spin_woken_by_running_ringer)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct knitk_doorbell_stats st0, st;
	int parked = 0, ret;
	__u32 seq;

	spin_long(_metadata, self);
	ASSERT_EQ(0, pin_to(0));
	while (!parked) {
		struct spin_round g = { .self = self };

		stats_of(_metadata, self->k.fd, 0, &st0);
		g.waits = st0.waits;
		ASSERT_EQ(0, knitk_pause_arm(KNITK_SPIN_PAUSE, 0));
		ASSERT_EQ(0, pthread_create(&g.thread, NULL, spin_round_ringer,
					    &g));
		while (!__atomic_load_n(&g.ready, __ATOMIC_SEQ_CST))
			usleep(1000);
		seq = flag_asleep(wdb);
		ret = knitk_wait_flags(self->w0, seq, KNITK_WAIT_SPIN,
				       KNITK_WAIT_FOREVER);
		knitk_doorbell_sleeping(wdb, 0);
		pthread_join(g.thread, NULL);
		knitk_pause_off(KNITK_SPIN_PAUSE);
		ASSERT_EQ(0, g.ret);
		EXPECT_EQ(0, ret);
		drain(request_mb(self));
		stats_of(_metadata, self->k.fd, 0, &st);
		parked = g.parked;
		if (parked) {
			EXPECT_EQ(st0.spin_wakes + 1, st.spin_wakes);
			EXPECT_EQ(st0.spin_sleeps, st.spin_sleeps);
			EXPECT_EQ(st0.waits, st.waits);
		} else {
			EXPECT_EQ(st0.spin_wakes, st.spin_wakes);
			EXPECT_EQ(st0.spin_sleeps + 1, st.spin_sleeps);
			EXPECT_EQ(st0.waits + 1, st.waits);
		}
		EXPECT_EQ(0ULL, st.spurious);
	}
}

/* Waker thread: once worker 0 sleeps (waits counted), publish and ring. */
struct waker {
	FIXTURE_DATA(pk) *self;
	pthread_t thread;
	__u64 waits;		/* wake after this many waits */
	int ret;
};

static void *waker_run(void *arg)
{
	struct waker *k = arg;

	k->ret = knitk_wait_asleep(k->self->k.fd, 0, k->waits);
	if (!k->ret) {
		knot_lane_publish(request_mb(k->self), 2);
		k->ret = knitk_notify(k->self->k.fd, W0_BIT, NULL);
	}
	return NULL;
}

/* The ringer is blocked (descheduled): the spinning wait sleeps at once. */
TEST_F(pk, spin_sleeps_when_ringer_blocked)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct ringer g = { .self = self, .block = 1 };
	struct waker k = { .self = self, .waits = 1 };
	struct knitk_doorbell_stats st;
	__u32 seq;

	spin_long(_metadata, self);
	ringer_start(_metadata, &g);
	/* The blocked ringer is asleep in read() before the wait begins. */
	while (knitk_thread_state(getpid(), g.tid) != 'S')
		usleep(1000);
	seq = flag_asleep(wdb);
	ASSERT_EQ(0, pthread_create(&k.thread, NULL, waker_run, &k));
	EXPECT_EQ(0, knitk_wait_flags(self->w0, seq, KNITK_WAIT_SPIN,
				      KNITK_WAIT_FOREVER));
	knitk_doorbell_sleeping(wdb, 0);
	pthread_join(k.thread, NULL);
	ringer_stop(&g);
	EXPECT_EQ(0, k.ret);
	stats_of(_metadata, self->k.fd, 0, &st);
	EXPECT_EQ(1ULL, st.waits);
	EXPECT_EQ(1ULL, st.spin_sleeps);
	EXPECT_EQ(0ULL, st.spin_wakes);
	EXPECT_EQ(0ULL, st.spurious);
}

/*
 * The ringer is a process that runs until it is killed: the spinning wait
 * stops spinning on the dead ringer and sleeps until a notify.
 */
TEST_F(pk, spin_sleeps_when_ringer_dies)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct waker k = { .self = self, .waits = 1 };
	struct knitk_doorbell_stats st;
	pid_t child, waiter = knitk_gettid();
	unsigned long long t0;
	int status;
	__u32 seq;

	spin_long(_metadata, self);
	/* The child has no mapping (not inherited): the test sets it up. */
	flag_asleep(wdb);
	knot_lane_publish(request_mb(self), 0);
	child = running_ringer(self->k.fd, W0_BIT);
	ASSERT_LT(0, child);
	drain(request_mb(self));
	seq = flag_asleep(wdb);
	t0 = thread_stime(getpid(), waiter);
	if (fork() == 0) {
		/* Kill the ringer once the waiter spins or sleeps. */
		until_spinning(getppid(), waiter, t0);
		kill(child, SIGKILL);
		_exit(0);
	}
	ASSERT_EQ(0, pthread_create(&k.thread, NULL, waker_run, &k));
	EXPECT_EQ(0, knitk_wait_flags(self->w0, seq, KNITK_WAIT_SPIN,
				      KNITK_WAIT_FOREVER));
	knitk_doorbell_sleeping(wdb, 0);
	pthread_join(k.thread, NULL);
	EXPECT_EQ(child, waitpid(child, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));
	while (wait(NULL) > 0)
		;
	EXPECT_EQ(0, k.ret);
	stats_of(_metadata, self->k.fd, 0, &st);
	EXPECT_EQ(1ULL, st.waits);
	EXPECT_EQ(1ULL, st.spin_sleeps);
	EXPECT_EQ(0ULL, st.spurious);
}

/* Signals the waiter every millisecond until it is done. */
struct signaller {
	pthread_t thread;
	pthread_t waiter;
	volatile int done;
};

static void *signaller_run(void *arg)
{
	struct signaller *s = arg;

	while (!s->done) {
		pthread_kill(s->waiter, SIGUSR1);
		usleep(1000);
	}
	return NULL;
}

/*
 * A signal ends a spinning wait whose ringer keeps running: -EINTR from
 * KNITK_IOC_WAIT without SA_RESTART, and -EINTR from NOTIFY_WAIT even with
 * SA_RESTART (it is never restarted once it rang), with @woken written.
 */
TEST_F(pk, spin_signal_eintr)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct ringer g = { .self = self };
	struct signaller s = { .waiter = pthread_self() };
	struct knitk_doorbell_stats st;
	__u64 woken;
	__u32 seq;

	spin_long(_metadata, self);
	ringer_start(_metadata, &g);
	catch_signal(0);
	ASSERT_EQ(0, pthread_create(&s.thread, NULL, signaller_run, &s));
	seq = flag_asleep(wdb);
	EXPECT_EQ(-EINTR, knitk_wait_flags(self->w0, seq, KNITK_WAIT_SPIN,
					   KNITK_WAIT_FOREVER));
	catch_signal(SA_RESTART);
	seq = flag_asleep(wdb);
	EXPECT_EQ(-EINTR, knitk_notify_wait(self->w0, HOST_BIT, seq,
					    KNITK_WAIT_SPIN,
					    KNITK_WAIT_FOREVER, &woken));
	EXPECT_EQ(0ULL, woken);
	/* Without the spin too: the sleep phase is not restarted either. */
	seq = flag_asleep(wdb);
	EXPECT_EQ(-EINTR, knitk_notify_wait(self->w0, HOST_BIT, seq, 0,
					    KNITK_WAIT_FOREVER, &woken));
	knitk_doorbell_sleeping(wdb, 0);
	s.done = 1;
	pthread_join(s.thread, NULL);
	ringer_stop(&g);
	EXPECT_LE(1, handled);
	stats_of(_metadata, self->k.fd, 0, &st);
	EXPECT_EQ(3ULL, st.interrupts);
	EXPECT_EQ(0ULL, st.spin_wakes);
	EXPECT_EQ(0ULL, st.spurious);
}

/* A deadline ends a spin whose ringer keeps running: -ETIMEDOUT. */
TEST_F(pk, spin_deadline_etimedout)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct ringer g = { .self = self };
	struct knitk_doorbell_stats st;
	__u64 deadline, woken;
	__u32 seq;

	spin_long(_metadata, self);
	ringer_start(_metadata, &g);
	seq = flag_asleep(wdb);
	deadline = knitk_now_ns() + 100 * KNITK_MS;
	EXPECT_EQ(-ETIMEDOUT, knitk_wait_flags(self->w0, seq, KNITK_WAIT_SPIN,
					       deadline));
	EXPECT_LE(deadline, knitk_now_ns());
	deadline = knitk_now_ns() + 100 * KNITK_MS;
	EXPECT_EQ(-ETIMEDOUT, knitk_notify_wait(self->w0, HOST_BIT, seq,
						KNITK_WAIT_SPIN, deadline,
						&woken));
	EXPECT_EQ(0ULL, woken);
	knitk_doorbell_sleeping(wdb, 0);
	ringer_stop(&g);
	stats_of(_metadata, self->k.fd, 0, &st);
	EXPECT_EQ(2ULL, st.timeouts);
	EXPECT_EQ(0ULL, st.spin_wakes);
}

TEST_HARNESS_MAIN
