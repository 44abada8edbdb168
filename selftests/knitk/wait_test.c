// SPDX-License-Identifier: GPL-2.0
/*
 * Doorbells: KNITK_IOC_WAIT (value check, deadlines, signals, wakes),
 * KNITK_IOC_NOTIFY's idle-lane filter and KNITK_IOC_STATS, whose counters
 * are checked exactly after every step.
 *
 * Nothing here depends on timing except through deadlines: a notify or a
 * signal is sent only once the waiter's doorbell has counted the wait as
 * asleep (or its thread is seen sleeping), and a wake is expected long
 * before KNITK_LONG_NS.
 */
#include <pthread.h>

#include "knitk_harness.h"
#include "knitk_signal.h"
#include "knitk_stats.h"
#include "knitk_test.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	(1ULL << HOST)

FIXTURE(wk) {
	struct knot k;		/* mapped through the host endpoint */
	int w[KNITK_MAX_WORKERS];	/* worker endpoints, -1 if none */
	unsigned int nr_workers;
};

FIXTURE_SETUP(wk)
{
	unsigned int i;

	KNITK_REQUIRE_DEV();
	self->k.fd = -1;
	for (i = 0; i < KNITK_MAX_WORKERS; i++)
		self->w[i] = -1;
}

FIXTURE_TEARDOWN(wk)
{
	unsigned int i;

	for (i = 0; i < self->nr_workers; i++)
		if (self->w[i] >= 0)
			close(self->w[i]);
	knot_close(&self->k);
}

/* Create a knot of g, join the host on it and one endpoint per worker. */
static void wk_open(struct __test_metadata *_metadata, FIXTURE_DATA(wk) *self,
		    const struct knitk_geometry *g)
{
	unsigned int i;

	ASSERT_EQ(0, knot_make(&self->k, g));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	self->nr_workers = g->nr_workers;
	for (i = 0; i < g->nr_workers; i++) {
		self->w[i] = knot_endpoint(&self->k, KNITK_ROLE_WORKER, i);
		ASSERT_LE(0, self->w[i]);
	}
}

static void wk_open_small(struct __test_metadata *_metadata,
			  FIXTURE_DATA(wk) *self)
{
	struct knitk_geometry g;

	knitk_geom_small(&g);
	wk_open(_metadata, self, &g);
}

/* Request mailbox of (submitter 0, worker w) and return mailbox of w. */
static struct knitk_sector *request_mb(FIXTURE_DATA(wk) *self, unsigned int w)
{
	return knot_mailbox(&self->k, w);
}

static struct knitk_sector *return_mb(FIXTURE_DATA(wk) *self, unsigned int w)
{
	return knot_mailbox(&self->k, self->k.layout.nr_request + w);
}

TEST_F(wk, wait_seq_mismatch_eagain)
{
	struct knitk_doorbell *db;
	__u32 seq;

	wk_open_small(_metadata, self);
	db = knot_doorbell(&self->k, 0);
	seq = knitk_doorbell_seq(db);
	EXPECT_EQ(-EAGAIN, knitk_wait(self->w[0], seq + 1, KNITK_WAIT_FOREVER));
	EXPECT_EQ(-EAGAIN, knitk_wait(self->w[0], seq - 1, KNITK_WAIT_FOREVER));
	EXPECT_STATS(self->k.fd, 0, .mismatches = 2);
	EXPECT_EQ(seq, knitk_doorbell_seq(db));
}

TEST_F(wk, wait_past_deadline_etimedout)
{
	__u32 seq;

	wk_open_small(_metadata, self);
	seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(self->w[0], seq, 0));
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(self->w[0], seq, knitk_now_ns()));
	/* Whether a passed deadline counts as a sleep is not the point. */
	EXPECT_STATS(self->k.fd, 0, .waits = STAT_ANY, .timeouts = 2);
}

TEST_F(wk, wait_short_deadline_etimedout)
{
	struct knitk_doorbell *db;
	__u64 deadline;
	__u32 seq;

	wk_open_small(_metadata, self);
	db = knot_doorbell(&self->k, 0);
	seq = knitk_doorbell_seq(db);
	knitk_doorbell_sleeping(db, 1);
	deadline = knitk_now_ns() + 50 * KNITK_MS;
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(self->w[0], seq, deadline));
	/* Never before the deadline: it is absolute CLOCK_MONOTONIC. */
	EXPECT_LE(deadline, knitk_now_ns());
	knitk_doorbell_sleeping(db, 0);
	EXPECT_STATS(self->k.fd, 0, .waits = 1, .timeouts = 1);
	EXPECT_EQ(seq, knitk_doorbell_seq(db));
}

TEST_F(wk, wait_flags_reserved_einval)
{
	struct knitk_wait w = { .deadline_ns = 0 };

	wk_open_small(_metadata, self);
	w.expected = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	w.flags = KNITK_WAIT_SPIN << 1;
	EXPECT_EQ(-EINVAL, knitk_ioctl(self->w[0], KNITK_IOC_WAIT, &w));
	w.flags = 0;
	w.reserved = 1;
	EXPECT_EQ(-EINVAL, knitk_ioctl(self->w[0], KNITK_IOC_WAIT, &w));
	EXPECT_STATS(self->k.fd, 0);
}

/* The other side of a wait: a thread that wakes or signals the waiter. */
struct poker {
	pthread_t thread;
	pthread_t waiter;
	pid_t waiter_tid;
	int fd;			/* endpoint used for STATS and NOTIFY */
	__u32 doorbell;		/* the waiter's doorbell */
	struct knitk_sector *mailbox;	/* one the waiter consumes */
	int signals;		/* signals to send before the wake */
	int wake;		/* publish and notify at the end */
	int kick;		/* or, with nothing published, kick */
	int ret;
	__u64 woken;
	volatile int done;	/* the waiter has returned */
};

static void *poker_run(void *arg)
{
	struct poker *p = arg;
	int i;

	p->ret = knitk_wait_asleep(p->fd, p->doorbell, 1);
	if (p->ret)
		return NULL;
	for (i = 1; i <= p->signals && !p->done; i++) {
		pthread_kill(p->waiter, SIGUSR1);
		while (__atomic_load_n(&handled, __ATOMIC_SEQ_CST) < i &&
		       !p->done)
			usleep(1000);
		/* Back in the (restarted) wait before the next poke. */
		while (knitk_thread_state(getpid(), p->waiter_tid) != 'S' &&
		       !p->done)
			usleep(1000);
	}
	if (p->kick && !p->done)
		p->ret = knitk_kick(p->fd, 1ULL << p->doorbell, &p->woken);
	if (p->wake && !p->done) {
		knot_lane_publish(p->mailbox, 5);
		p->ret = knitk_notify(p->fd, 1ULL << p->doorbell, &p->woken);
	}
	return NULL;
}

static int poker_start(struct poker *p)
{
	p->waiter = pthread_self();
	p->waiter_tid = knitk_gettid();
	return pthread_create(&p->thread, NULL, poker_run, p);
}

static void poker_stop(struct poker *p)
{
	p->done = 1;
	pthread_join(p->thread, NULL);
}

/*
 * Sleep on doorbell @d through endpoint @fd while @p pokes it: the
 * sleeping flag up, the poker started, one KNITK_IOC_WAIT on the seq read
 * first (in *@seq) until @deadline, the flag down, the poker joined.
 * Returns what the wait returned.
 */
static int poked_wait(struct __test_metadata *_metadata,
		      FIXTURE_DATA(wk) *self, struct poker *p, unsigned int d,
		      int fd, __u64 deadline, __u32 *seq)
{
	struct knitk_doorbell *db = knot_doorbell(&self->k, d);
	int ret;

	p->doorbell = d;
	*seq = knitk_doorbell_seq(db);
	knitk_doorbell_sleeping(db, 1);
	ASSERT_EQ(0, poker_start(p));
	ret = knitk_wait(fd, *seq, deadline);
	knitk_doorbell_sleeping(db, 0);
	poker_stop(p);
	return ret;
}

/* The poker of a wait on doorbell @d from @seq woke that doorbell, once. */
static void expect_poker_woke(struct __test_metadata *_metadata,
			      FIXTURE_DATA(wk) *self, const struct poker *p,
			      unsigned int d, __u32 seq)
{
	EXPECT_EQ(0, p->ret);
	EXPECT_EQ(1ULL << d, p->woken);
	EXPECT_EQ(seq + 1, knitk_doorbell_seq(knot_doorbell(&self->k, d)));
}

TEST_F(wk, wait_woken_by_notify_from_thread)
{
	struct poker p = { .wake = 1 };
	__u32 seq;

	wk_open_small(_metadata, self);
	p.fd = self->k.fd;
	p.mailbox = request_mb(self, 0);

	EXPECT_EQ(0, poked_wait(_metadata, self, &p, 0, self->w[0],
				knitk_now_ns() + KNITK_LONG_NS, &seq));

	expect_poker_woke(_metadata, self, &p, 0, seq);
	EXPECT_STATS(self->k.fd, 0, .waits = 1, .wakes = 1);
}

/* An untimed park is as safe as a timed one: the notify ends it. */
TEST_F(wk, wait_forever_woken_by_notify)
{
	struct poker p = { .wake = 1 };
	__u32 seq;

	wk_open_small(_metadata, self);
	p.fd = self->w[1];
	p.mailbox = return_mb(self, 1);

	EXPECT_EQ(0, poked_wait(_metadata, self, &p, HOST, self->k.fd,
				KNITK_WAIT_FOREVER, &seq));

	expect_poker_woke(_metadata, self, &p, HOST, seq);
	EXPECT_STATS(self->k.fd, HOST, .waits = 1, .wakes = 1);
}

/* A kick wakes a waiter that has nothing pending, and is no spurious wake. */
TEST_F(wk, kick_wakes_waiter_with_nothing_pending)
{
	struct poker p = { .kick = 1 };
	__u32 seq;

	wk_open_small(_metadata, self);
	/* The host kicks its own doorbell, as one host thread for another. */
	p.fd = self->k.fd;

	EXPECT_EQ(0, poked_wait(_metadata, self, &p, HOST, self->k.fd,
				KNITK_WAIT_FOREVER, &seq));

	expect_poker_woke(_metadata, self, &p, HOST, seq);
	EXPECT_STATS(self->k.fd, HOST, .waits = 1, .kicks = 1);
}

/* The idle filter does not apply to a kick: idle and awake, seq moves. */
TEST_F(wk, kick_idle_awake_advances_seq)
{
	__u64 woken = 0;
	__u32 seq;

	wk_open_small(_metadata, self);
	seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	EXPECT_EQ(0, knitk_kick(self->k.fd, 1ULL << 0, &woken));
	EXPECT_EQ(1ULL << 0, woken);
	EXPECT_EQ(seq + 1, knitk_doorbell_seq(knot_doorbell(&self->k, 0)));
	/* A waiter that read the old seq does not sleep through it. */
	EXPECT_EQ(-EAGAIN, knitk_wait(self->w[0], seq, KNITK_WAIT_FOREVER));
	EXPECT_STATS(self->k.fd, 0, .kicks = 1, .mismatches = 1);
	/* Bad doorbells still fail, with nothing rung. */
	EXPECT_EQ(-EINVAL, knitk_kick(self->k.fd, 1ULL << 0 | 1ULL << 40,
				      NULL));
	EXPECT_EQ(seq + 1, knitk_doorbell_seq(knot_doorbell(&self->k, 0)));
}

/*
 * Worker @w asleep with lane @lane pending in its request mailbox, rung by
 * the host: the notify is delivered.  Returns the seq read before it.
 */
static __u32 ring_sleeping_worker(struct __test_metadata *_metadata,
				  FIXTURE_DATA(wk) *self, unsigned int w,
				  unsigned int lane)
{
	struct knitk_doorbell *db = knot_doorbell(&self->k, w);
	__u32 seq = knitk_doorbell_seq(db);
	__u64 woken = 0;

	knitk_doorbell_sleeping(db, 1);
	knot_lane_publish(request_mb(self, w), lane);
	EXPECT_EQ(0, knitk_notify(self->k.fd, 1ULL << w, &woken));
	EXPECT_EQ(1ULL << w, woken);
	return seq;
}

/*
 * The lost-wakeup window: the notify lands after the waiter set its flag
 * and read seq but before it entered WAIT.  The wake is not lost: WAIT
 * with the old seq returns -EAGAIN at once, even with no deadline.
 */
TEST_F(wk, notify_before_wait_is_not_lost)
{
	__u32 seq;

	wk_open_small(_metadata, self);
	seq = ring_sleeping_worker(_metadata, self, 0, 11);
	EXPECT_EQ(-EAGAIN, knitk_wait(self->w[0], seq, KNITK_WAIT_FOREVER));
	knitk_doorbell_sleeping(knot_doorbell(&self->k, 0), 0);
	EXPECT_STATS(self->k.fd, 0, .wakes = 1, .mismatches = 1);
}

/* Without SA_RESTART a signal ends the wait with -EINTR. */
TEST_F(wk, wait_signal_eintr)
{
	struct poker p = { .signals = 1000000 };
	__u32 seq;

	wk_open_small(_metadata, self);
	p.fd = self->k.fd;
	catch_signal(0);

	EXPECT_EQ(-EINTR, poked_wait(_metadata, self, &p, 0, self->w[0],
				     knitk_now_ns() + KNITK_LONG_NS, &seq));

	EXPECT_EQ(0, p.ret);
	EXPECT_LE(1, handled);
	EXPECT_EQ(seq, knitk_doorbell_seq(knot_doorbell(&self->k, 0)));
	EXPECT_STATS(self->k.fd, 0, .waits = 1, .interrupts = 1);
}

/* With SA_RESTART the wait goes on through signals until it is woken. */
TEST_F(wk, wait_signal_restart_until_woken)
{
	struct poker p = { .signals = 3, .wake = 1 };
	__u32 seq;

	wk_open_small(_metadata, self);
	p.fd = self->k.fd;
	p.mailbox = request_mb(self, 0);
	catch_signal(SA_RESTART);

	EXPECT_EQ(0, poked_wait(_metadata, self, &p, 0, self->w[0],
				knitk_now_ns() + KNITK_LONG_NS, &seq));

	EXPECT_EQ(3, handled);
	expect_poker_woke(_metadata, self, &p, 0, seq);
	/* Each restart is a wait of its own, ended by the next signal. */
	EXPECT_STATS(self->k.fd, 0, .waits = STAT_ANY, .interrupts = STAT_ANY,
		     .wakes = 1);
}

/* With SA_RESTART and no wake, the absolute deadline still ends the wait. */
TEST_F(wk, wait_signal_restart_until_deadline)
{
	struct poker p = { .signals = 1000000 };
	__u64 deadline;
	__u32 seq;

	wk_open_small(_metadata, self);
	p.fd = self->k.fd;
	catch_signal(SA_RESTART);

	/* Generous: the poker needs only to land one signal before it. */
	deadline = knitk_now_ns() + 5000 * KNITK_MS;
	EXPECT_EQ(-ETIMEDOUT, poked_wait(_metadata, self, &p, 0, self->w[0],
					 deadline, &seq));
	EXPECT_LE(deadline, knitk_now_ns());

	EXPECT_EQ(0, p.ret);
	EXPECT_LE(1, handled);
	EXPECT_STATS(self->k.fd, 0, .waits = STAT_ANY, .interrupts = STAT_ANY,
		     .timeouts = 1);
}

/*
 * Ring doorbell 0, whose state the caller set up so that the filter drops
 * the ring: nothing woken, the sequence still @seq, and the drop counted
 * once, as idle (@idle) or as awake.
 */
static void notify_expect_suppressed(struct __test_metadata *_metadata,
				     FIXTURE_DATA(wk) *self, __u32 seq,
				     bool idle)
{
	__u64 woken = ~0ULL;

	EXPECT_EQ(0, knitk_notify(self->k.fd, 1ULL << 0, &woken));
	EXPECT_EQ(0ULL, woken);
	EXPECT_EQ(seq, knitk_doorbell_seq(knot_doorbell(&self->k, 0)));
	EXPECT_STATS(self->k.fd, 0, .suppressed_idle = idle,
		     .suppressed_awake = !idle);
}

TEST_F(wk, notify_suppressed_idle)
{
	struct knitk_doorbell *db;
	__u32 seq;

	wk_open_small(_metadata, self);
	db = knot_doorbell(&self->k, 0);
	seq = knitk_doorbell_seq(db);
	knitk_doorbell_sleeping(db, 1);
	notify_expect_suppressed(_metadata, self, seq, true);
}

TEST_F(wk, notify_suppressed_awake)
{
	__u32 seq;

	wk_open_small(_metadata, self);
	seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	knot_lane_publish(request_mb(self, 0), 7);
	notify_expect_suppressed(_metadata, self, seq, false);
}

/* Sleeping and pending rings; once the consumer acks, it is idle again. */
TEST_F(wk, notify_wakes_sleeping_with_pending)
{
	struct knitk_sector *mb;
	struct knitk_doorbell *db;
	__u64 woken = 0;
	__u32 seq;

	wk_open_small(_metadata, self);
	db = knot_doorbell(&self->k, 1);
	mb = request_mb(self, 1);
	seq = ring_sleeping_worker(_metadata, self, 1, 63);
	EXPECT_EQ(seq + 1, knitk_doorbell_seq(db));

	knot_lane_ack(&mb->ack, 63);
	EXPECT_EQ(0, knitk_notify(self->k.fd, 1ULL << 1, &woken));
	EXPECT_EQ(0ULL, woken);
	EXPECT_EQ(seq + 1, knitk_doorbell_seq(db));

	EXPECT_STATS(self->k.fd, 1, .wakes = 1, .suppressed_idle = 1);
	/* Doorbell 0 saw none of it. */
	EXPECT_STATS(self->k.fd, 0);
}

/*
 * A delivered notify clears the sleeping flag with the same compare-and-
 * swap that advances seq: a second notify for the same sleep finds the
 * owner awake, and seq moves once.
 */
TEST_F(wk, notify_once_per_sleep)
{
	struct knitk_doorbell *db;
	__u64 woken = 0;
	__u32 seq;

	wk_open_small(_metadata, self);
	db = knot_doorbell(&self->k, 1);
	seq = ring_sleeping_worker(_metadata, self, 1, 7);
	EXPECT_EQ(0U, knitk_load32(&db->sleeping));
	EXPECT_EQ(0, knitk_notify(self->k.fd, 1ULL << 1, &woken));
	EXPECT_EQ(0ULL, woken);
	EXPECT_EQ(seq + 1, knitk_doorbell_seq(db));
	EXPECT_STATS(self->k.fd, 1, .wakes = 1, .suppressed_awake = 1);
}

/* One notify, three doorbells, three verdicts; woken names only the rung. */
TEST_F(wk, notify_woken_mask_per_doorbell)
{
	__u64 woken = 0;

	wk_open_small(_metadata, self);
	/* Worker 0: sleeping with work.  Worker 1: sleeping, idle. */
	knitk_doorbell_sleeping(knot_doorbell(&self->k, 0), 1);
	knot_lane_publish(request_mb(self, 0), 0);
	knitk_doorbell_sleeping(knot_doorbell(&self->k, 1), 1);
	/* Host: work in a return mailbox, but awake. */
	knot_lane_publish(return_mb(self, 1), 0);

	EXPECT_EQ(0, knitk_notify(self->w[1], 1ULL << 0 | 1ULL << 1 | HOST_BIT,
				  &woken));
	EXPECT_EQ(1ULL << 0, woken);

	EXPECT_STATS(self->k.fd, 0, .wakes = 1);
	EXPECT_STATS(self->k.fd, 1, .suppressed_idle = 1);
	EXPECT_STATS(self->k.fd, HOST, .suppressed_awake = 1);
}

/*
 * A worker consumes only its request mailboxes: its own return mailbox and
 * another worker's request mailbox are not its work (they are the host's
 * and the other worker's).
 */
TEST_F(wk, notify_only_consumed_mailboxes_count)
{
	__u64 woken = ~0ULL;

	wk_open_small(_metadata, self);
	knitk_doorbell_sleeping(knot_doorbell(&self->k, 0), 1);
	knitk_doorbell_sleeping(knot_doorbell(&self->k, HOST), 1);
	knot_lane_publish(return_mb(self, 0), 1);
	knot_lane_publish(request_mb(self, 1), 2);

	EXPECT_EQ(0, knitk_notify(self->k.fd, 1ULL << 0, &woken));
	EXPECT_EQ(0ULL, woken);
	EXPECT_STATS(self->k.fd, 0, .suppressed_idle = 1);

	EXPECT_EQ(0, knitk_notify(self->w[0], HOST_BIT, &woken));
	EXPECT_EQ(HOST_BIT, woken);
}

TEST_F(wk, notify_invalid_doorbell_einval)
{
	static const __u64 bad[] = { 1ULL << 2, 1ULL << 62, 1ULL << 0 | 1ULL << 5,
				     ~0ULL };
	struct knitk_doorbell *db;
	unsigned int i;
	__u32 seq;

	wk_open_small(_metadata, self);
	/* Doorbell 0 would ring: a rejected notify must not ring it. */
	db = knot_doorbell(&self->k, 0);
	seq = knitk_doorbell_seq(db);
	knitk_doorbell_sleeping(db, 1);
	knot_lane_publish(request_mb(self, 0), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		EXPECT_EQ(-EINVAL, knitk_notify(self->k.fd, bad[i], NULL))
			TH_LOG("doorbells %#llx accepted with 2 workers",
			       (unsigned long long)bad[i]);
	EXPECT_EQ(seq, knitk_doorbell_seq(db));
	EXPECT_STATS(self->k.fd, 0);
}

TEST_F(wk, notify_flags_reserved_einval)
{
	static const __u32 bad[] = { 1U << 1, 1U << 31, ~0U,
				     KNITK_NOTIFY_KICK | 1U << 2 };
	struct knitk_notify n = { .doorbells = 1 };
	unsigned int i;

	wk_open_small(_metadata, self);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		n.flags = bad[i];
		EXPECT_EQ(-EINVAL, knitk_ioctl(self->k.fd, KNITK_IOC_NOTIFY, &n))
			TH_LOG("notify flags %#x accepted", bad[i]);
	}
	EXPECT_EQ(0U, knitk_doorbell_seq(knot_doorbell(&self->k, 0)));
	n.flags = 0;
	n.reserved = 1;
	EXPECT_EQ(-EINVAL, knitk_ioctl(self->k.fd, KNITK_IOC_NOTIFY, &n));
	n.reserved = 0;
	EXPECT_EQ(0, knitk_ioctl(self->k.fd, KNITK_IOC_NOTIFY, &n));
	/* Ringing nothing is valid and wakes nothing. */
	n.doorbells = 0;
	n.woken = ~0ULL;
	EXPECT_EQ(0, knitk_ioctl(self->k.fd, KNITK_IOC_NOTIFY, &n));
	EXPECT_EQ(0ULL, n.woken);
}

TEST_F(wk, stats_invalid_doorbell_or_flags_einval)
{
	struct knitk_stats s = { .doorbell = HOST, .flags = 1 };

	wk_open_small(_metadata, self);
	EXPECT_EQ(-EINVAL, knitk_ioctl(self->k.fd, KNITK_IOC_STATS, &s));
	EXPECT_EQ(-EINVAL, knitk_stats(self->k.fd, 2, NULL));
	EXPECT_EQ(-EINVAL, knitk_stats(self->k.fd, KNITK_NR_DOORBELLS, NULL));
	EXPECT_EQ(-EINVAL, knitk_stats(self->k.fd, ~0U, NULL));
	EXPECT_EQ(0, knitk_stats(self->k.fd, HOST, NULL));
	EXPECT_EQ(0, knitk_stats(self->k.fd, 1, NULL));
}

/*
 * KNITK_IOC_STATS grows at its end: a caller with the first version's
 * struct, or a bigger one than the module's, gets what it can hold.
 */
TEST_F(wk, stats_any_size_from_ver0)
{
	struct {
		struct knitk_stats s;
		__u64 later[4];
	} big;
	struct knitk_stats full = { .doorbell = 0 };
	struct knitk_stats v0 = { .doorbell = 0 };
	__u64 woken, i;

	wk_open_small(_metadata, self);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, knitk_notify(self->k.fd, 1ULL << 0, &woken));
	ASSERT_EQ(0, knitk_ioctl(self->k.fd, KNITK_IOC_STATS, &full));
	ASSERT_EQ(3ULL, full.stats.suppressed_idle);

	memset(&v0.stats, 0xff, sizeof(v0.stats));
	ASSERT_EQ(0, knitk_ioctl(self->k.fd, _IOWR(KNITK_IOC_MAGIC, 0x06,
				 char[KNITK_STATS_SIZE_VER0]), &v0));
	EXPECT_EQ(0, memcmp(&v0, &full, KNITK_STATS_SIZE_VER0));
	/* Nothing written past the caller's size. */
	EXPECT_EQ(~0ULL, v0.stats.uring_waits);

	memset(&big, 0xff, sizeof(big));
	big.s.doorbell = 0;
	big.s.flags = 0;
	ASSERT_EQ(0, knitk_ioctl(self->k.fd, _IOWR(KNITK_IOC_MAGIC, 0x06,
				 char[sizeof(big)]), &big));
	EXPECT_EQ(0, memcmp(&big.s, &full, sizeof(full)));
	for (i = 0; i < 4; i++)
		EXPECT_EQ(0ULL, big.later[i]);

	EXPECT_EQ(-ENOTTY, knitk_ioctl(self->k.fd, _IOWR(KNITK_IOC_MAGIC, 0x06,
				       char[KNITK_STATS_SIZE_VER0 - 8]), &v0));
}

/* The host doorbell covers every return mailbox, one at a time. */
TEST_F(wk, host_doorbell_covers_every_return_mailbox)
{
	struct knitk_geometry g;
	struct knitk_doorbell *db;
	__u64 woken;
	unsigned int w;
	__u32 seq;

	knitk_geom(&g, 0, 4, 2, 64, 64, 0);
	wk_open(_metadata, self, &g);
	db = knot_doorbell(&self->k, HOST);
	seq = knitk_doorbell_seq(db);
	for (w = 0; w < 4; w++) {
		struct knitk_sector *mb = return_mb(self, w);

		/* The host sleeps again: a delivery clears the flag. */
		knitk_doorbell_sleeping(db, 1);
		woken = 0;
		knot_lane_publish(mb, w);
		EXPECT_EQ(0, knitk_notify(self->w[w], HOST_BIT, &woken));
		EXPECT_EQ(HOST_BIT, woken) TH_LOG("return mailbox of %u", w);
		EXPECT_EQ(seq + w + 1, knitk_doorbell_seq(db));
		EXPECT_EQ(0U, knitk_load32(&db->sleeping));
		/* The host consumes it: idle again. */
		knot_lane_ack(&mb->ack, w);
	}
	/* Request mailboxes are not the host's work. */
	knitk_doorbell_sleeping(db, 1);
	knot_lane_publish(knot_mailbox(&self->k, 0), 9);
	EXPECT_EQ(0, knitk_notify(self->w[0], HOST_BIT, &woken));
	EXPECT_EQ(0ULL, woken);
	EXPECT_STATS(self->k.fd, HOST, .wakes = 4, .suppressed_idle = 1);
}

/*
 * Work stealing: the shared request mailbox's effective ack word is the XOR
 * of every worker's steal-line ack, and every worker consumes it.  The
 * sector's own ack word is unused there.
 */
TEST_F(wk, steal_pending_is_pub_xor_steal_acks)
{
	struct knitk_steal_line *l0, *l1;
	struct knitk_geometry g;
	struct knitk_sector *mb;
	__u64 woken;

	knitk_geom(&g, KNITK_GEOM_STEAL, 2, 1, 64, 64, 4096);
	wk_open(_metadata, self, &g);
	ASSERT_EQ(1U, self->k.layout.nr_request);
	ASSERT_EQ(2U, self->k.layout.nr_steal);
	mb = knot_mailbox(&self->k, 0);
	l0 = knot_steal_line(&self->k, 0 * 2 + 0);
	l1 = knot_steal_line(&self->k, 0 * 2 + 1);
	knitk_doorbell_sleeping(knot_doorbell(&self->k, 0), 1);
	knitk_doorbell_sleeping(knot_doorbell(&self->k, 1), 1);

	/* Lanes 0 and 1 published, taken one by each worker: nothing pending. */
	knot_lane_publish(mb, 0);
	knot_lane_publish(mb, 1);
	knot_lane_ack(&l0->ack, 0);
	knot_lane_ack(&l1->ack, 1);
	woken = ~0ULL;
	EXPECT_EQ(0, knitk_notify(self->k.fd, 3, &woken));
	EXPECT_EQ(0ULL, woken);

	/* Lane 2 published; the sector's ack word claiming it changes nothing. */
	knot_lane_publish(mb, 2);
	knot_lane_ack(&mb->ack, 2);
	EXPECT_EQ(0, knitk_notify(self->k.fd, 1ULL << 0, &woken));
	EXPECT_EQ(1ULL << 0, woken);
	/* Any worker may take it: worker 1 is rung for the same lane. */
	EXPECT_EQ(0, knitk_notify(self->k.fd, 1ULL << 1, &woken));
	EXPECT_EQ(1ULL << 1, woken);

	/* Worker 1 takes lane 2: idle again for both. */
	knot_lane_ack(&l1->ack, 2);
	EXPECT_EQ(0, knitk_notify(self->k.fd, 3, &woken));
	EXPECT_EQ(0ULL, woken);

	EXPECT_STATS(self->k.fd, 0, .wakes = 1, .suppressed_idle = 2);
	EXPECT_STATS(self->k.fd, 1, .wakes = 1, .suppressed_idle = 2);
}

/*
 * Private lanes with several submitters: worker w consumes request mailbox
 * s * nr_workers + w of every submitter s, and no other.
 */
TEST_F(wk, worker_doorbell_covers_every_submitter_mailbox)
{
	struct knitk_geometry g;
	unsigned int s;
	__u64 woken;

	knitk_geom(&g, 0, 2, 3, 64, 64, 0);
	wk_open(_metadata, self, &g);
	ASSERT_EQ(6U, self->k.layout.nr_request);
	for (s = 0; s < 3; s++) {
		struct knitk_sector *mb = knot_mailbox(&self->k, s * 2 + 1);

		/* Both workers asleep again (a delivery clears the flag). */
		knitk_doorbell_sleeping(knot_doorbell(&self->k, 0), 1);
		knitk_doorbell_sleeping(knot_doorbell(&self->k, 1), 1);
		woken = ~0ULL;
		knot_lane_publish(mb, s);
		EXPECT_EQ(0, knitk_notify(self->k.fd, 3, &woken));
		EXPECT_EQ(1ULL << 1, woken) TH_LOG("submitter %u", s);
		knot_lane_ack(&mb->ack, s);
	}
	EXPECT_STATS(self->k.fd, 1, .wakes = 3);
	EXPECT_STATS(self->k.fd, 0, .suppressed_idle = 3);
}

/*
 * Stealing with several submit mailboxes: steal line m * nr_workers + w
 * holds worker w's ack of mailbox m; any worker's ack retires a lane for all.
 */
TEST_F(wk, steal_covers_every_submit_mailbox)
{
	struct knitk_geometry g;
	unsigned int m;
	__u64 woken;

	knitk_geom(&g, KNITK_GEOM_STEAL, 3, 2, 64, 64, 0);
	wk_open(_metadata, self, &g);
	ASSERT_EQ(2U, self->k.layout.nr_request);
	ASSERT_EQ(6U, self->k.layout.nr_steal);
	for (m = 0; m < 2; m++) {
		struct knitk_sector *mb = knot_mailbox(&self->k, m);

		knitk_doorbell_sleeping(knot_doorbell(&self->k, 2), 1);
		woken = 0;
		knot_lane_publish(mb, 4 + m);
		EXPECT_EQ(0, knitk_notify(self->k.fd, 1ULL << 2, &woken));
		EXPECT_EQ(1ULL << 2, woken) TH_LOG("submit mailbox %u", m);
		/* Worker 0 takes it, through its own line of mailbox m. */
		knot_lane_ack(&knot_steal_line(&self->k, m * 3 + 0)->ack, 4 + m);
		/* Worker 2 asleep again, but nothing is left: idle. */
		knitk_doorbell_sleeping(knot_doorbell(&self->k, 2), 1);
		woken = ~0ULL;
		EXPECT_EQ(0, knitk_notify(self->k.fd, 1ULL << 2, &woken));
		EXPECT_EQ(0ULL, woken) TH_LOG("submit mailbox %u", m);
	}
}

TEST_HARNESS_MAIN
