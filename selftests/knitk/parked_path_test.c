// SPDX-License-Identifier: GPL-2.0
/*
 * The parked path, tested from the uAPI header and
 * the man pages alone: KNITK_IOC_NOTIFY_WAIT (and JOIN) with an argument
 * it cannot write back, from a process that is not the role's owner after the role
 * ended, and ringing doorbells that are dead or were never joined;
 * KNITK_WAIT_SPIN while the ringer is stopped (SIGSTOP), while the
 * waiter's own role ends under it, and after a kick by a running task; the library's ring-then-wait on the
 * module (knitk_doorbell_ring_wait, knitk_doorbell_ring_park).
 *
 * The spin tests raise spin_ns to an hour, as park_test does: a spin that
 * missed what should end it hangs (the runner's watchdog) instead of
 * passing.  No assertion depends on time.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/mman.h>

#include "knitk_harness.h"
#include "knitk_test.h"
#include "knitk_spin.h"
#include "knitk_stats.h"
#include "knitk.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	(1ULL << HOST)
#define W0_BIT		(1ULL << 0)

FIXTURE(a3) {
	struct knot k;		/* mapped through the host endpoint */
	int w0;			/* worker 0's endpoint */
	char spin_ns[32];	/* the parameter before the test, if changed */
};

FIXTURE_SETUP(a3)
{
	struct knitk_geometry g;

	KNITK_REQUIRE_DEV();
	self->spin_ns[0] = '\0';
	knitk_geom(&g, 0, 3, 1, 64, 64, KNITK_ARENA_ALIGN);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	self->w0 = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, self->w0);
}

FIXTURE_TEARDOWN(a3)
{
	if (self->spin_ns[0])
		knitk_write_file(SPIN_PARAM, self->spin_ns);
	if (self->w0 >= 0)
		close(self->w0);
	knot_close(&self->k);
}

/* Spins last up to an hour; skips without a second CPU or the parameter. */
static void spin_hour(struct __test_metadata *_metadata, FIXTURE_DATA(a3) *self)
{
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(_exit(255), "%s: a spin needs a second CPU", _metadata->name);
	if (knitk_read_file(SPIN_PARAM, self->spin_ns, sizeof(self->spin_ns)) ||
	    knitk_write_file(SPIN_PARAM, SPIN_HOUR))
		SKIP(_exit(255), "%s: cannot set %s", _metadata->name, SPIN_PARAM);
}

/* Request mailbox of worker @w (one submitter). */
static struct knitk_sector *request_of(FIXTURE_DATA(a3) *self, unsigned int w)
{
	return knot_mailbox(&self->k, w);
}

/* Worker @w asleep with a lane pending: any ring that gets through wakes it. */
static __u32 asleep_with_work(FIXTURE_DATA(a3) *self, unsigned int w)
{
	__u32 seq = flag_asleep(knot_doorbell(&self->k, w));

	knot_lane_publish(request_of(self, w), 0);
	return seq;
}

/*
 * "-EFAULT ... given before anything is rung": an argument the call can
 * read but not write back (a read-only page) must not ring the peer and
 * then fail, leaving the caller unable to tell whether it rang.
 */
TEST_F(a3, notify_wait_unwritable_arg_rings_nothing)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct knitk_notify_wait *nw;
	struct knitk_notify *n;
	struct knitk_doorbell_stats st;
	__u32 wseq, hseq;
	char *page;

	wseq = asleep_with_work(self, 0);
	hseq = flag_asleep(knot_doorbell(&self->k, HOST));
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, page);
	nw = (struct knitk_notify_wait *)page;
	nw->doorbells = W0_BIT;
	nw->expected = hseq;
	nw->deadline_ns = 0;
	n = (struct knitk_notify *)(page + 512);
	n->doorbells = W0_BIT;
	ASSERT_EQ(0, mprotect(page, 4096, PROT_READ));

	EXPECT_EQ(-EFAULT, knitk_ioctl(self->k.fd, KNITK_IOC_NOTIFY_WAIT, nw));
	EXPECT_EQ(-EFAULT, knitk_ioctl(self->k.fd, KNITK_IOC_NOTIFY, n));
	EXPECT_EQ(wseq, knitk_doorbell_seq(wdb));
	stats_of(_metadata, self->k.fd, 0, &st);
	EXPECT_EQ(0ULL, st.wakes);
	stats_of(_metadata, self->k.fd, HOST, &st);
	EXPECT_EQ(0ULL, st.waits + st.timeouts + st.spin_sleeps);
	/* The same calls from a writable copy ring as usual. */
	EXPECT_EQ(-ETIMEDOUT, knitk_notify_wait(self->k.fd, W0_BIT, hseq, 0, 0,
						NULL));
	EXPECT_EQ(wseq + 1, knitk_doorbell_seq(wdb));
	munmap(page, 4096);
}

/*
 * The same for JOIN, the one other call whose work cannot be undone by
 * its caller: an argument it can read but not write back takes no role
 * (-EFAULT), so the endpoint may still join from a writable copy.
 */
TEST_F(a3, join_unwritable_arg_takes_nothing)
{
	struct knitk_join *j;
	int e;

	e = knitk_open();
	ASSERT_LE(0, e);
	ASSERT_EQ(0, knitk_attach(e, self->k.fd, NULL));
	j = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	ASSERT_NE(MAP_FAILED, j);
	j->role = KNITK_ROLE_WORKER;
	j->worker = 1;
	ASSERT_EQ(0, mprotect(j, 4096, PROT_READ));
	EXPECT_EQ(-EFAULT, knitk_ioctl(e, KNITK_IOC_JOIN, j));
	EXPECT_EQ(0ULL, self->k.ctl->live & 2);
	EXPECT_EQ(0U, self->k.ctl->generation[1]);
	EXPECT_EQ(0, knitk_join(e, KNITK_ROLE_WORKER, 1, NULL));
	EXPECT_EQ(2ULL, self->k.ctl->live & 2);
	munmap(j, 4096);
	close(e);
}

/*
 * An endpoint of the knot whose worker @w role a child joined, then ended
 * by exiting: its fd, or -1.
 */
static int ended_role_endpoint(FIXTURE_DATA(a3) *self, unsigned int w)
{
	int e, status;
	pid_t pid;

	e = knitk_open();
	if (e < 0)
		return -1;
	if (knitk_attach(e, self->k.fd, NULL))
		goto fail;
	pid = fork();
	if (pid < 0)
		goto fail;
	if (pid == 0)
		_exit(knitk_join(e, KNITK_ROLE_WORKER, w, NULL) ? 1 : 0);
	if (waitpid(pid, &status, 0) != pid ||
	    !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		goto fail;
	return e;
fail:
	close(e);
	return -1;
}

/*
 * A role belongs to the process that joined it: once that process has
 * exited, another process still holding the endpoint's fd gets -ENOTCONN
 * from NOTIFY_WAIT before anything is rung, and from a spinning WAIT.
 */
TEST_F(a3, notify_wait_of_ended_role_rings_nothing)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct knitk_doorbell_stats st;
	__u32 wseq;
	int e;

	e = ended_role_endpoint(self, 1);
	ASSERT_LE(0, e);
	ASSERT_TRUE(self->k.ctl->dead & 2);

	wseq = asleep_with_work(self, 0);
	EXPECT_EQ(-ENOTCONN, knitk_notify_wait(e, W0_BIT,
					       knitk_doorbell_seq(knot_doorbell(&self->k, 1)),
					       KNITK_WAIT_SPIN, KNITK_WAIT_FOREVER,
					       NULL));
	EXPECT_EQ(-ENOTCONN, knitk_wait_flags(e, 0, KNITK_WAIT_SPIN,
					      KNITK_WAIT_FOREVER));
	EXPECT_EQ(wseq, knitk_doorbell_seq(wdb));
	stats_of(_metadata, self->k.fd, 0, &st);
	EXPECT_EQ(0ULL, st.wakes + st.suppressed_idle + st.suppressed_awake);
	/* Nor can the ended endpoint join again. */
	EXPECT_NE(0, knitk_join(e, KNITK_ROLE_WORKER, 1, NULL));
	close(e);
}

/*
 * Ringing doorbells nobody waits on: worker 1 never joined, worker 2's
 * owner died; both flagged asleep with work (a dead owner's flag stays as
 * it left it).  The ring goes through the filter like any other, and a
 * worker that later joins the dead one's role waits on its doorbell
 * normally, whatever its ringer left behind.
 */
TEST_F(a3, notify_wait_rings_dead_and_unjoined)
{
	__u64 both = 1ULL << 1 | 1ULL << 2, woken = 0;
	struct knitk_doorbell_stats st;
	__u32 s1, s2, hseq, seq;
	int e, w2;

	e = ended_role_endpoint(self, 2);
	ASSERT_LE(0, e);
	close(e);

	s1 = asleep_with_work(self, 1);
	s2 = asleep_with_work(self, 2);
	hseq = flag_asleep(knot_doorbell(&self->k, HOST));
	EXPECT_EQ(-ETIMEDOUT, knitk_notify_wait(self->k.fd, both, hseq,
						KNITK_WAIT_SPIN, 0, &woken));
	EXPECT_EQ(both, woken);
	EXPECT_EQ(s1 + 1, knitk_doorbell_seq(knot_doorbell(&self->k, 1)));
	EXPECT_EQ(s2 + 1, knitk_doorbell_seq(knot_doorbell(&self->k, 2)));
	/* Flags cleared by the delivery: a second ring is suppressed. */
	EXPECT_EQ(-ETIMEDOUT, knitk_notify_wait(self->k.fd, both, hseq, 0, 0,
						&woken));
	EXPECT_EQ(0ULL, woken);
	knitk_doorbell_sleeping(knot_doorbell(&self->k, HOST), 0);

	/* A new owner of worker 2: its wait works on the rung doorbell. */
	w2 = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 2);
	ASSERT_LE(0, w2);
	drain(request_of(self, 2));
	seq = flag_asleep(knot_doorbell(&self->k, 2));
	EXPECT_EQ(s2 + 1, seq);
	EXPECT_EQ(-EAGAIN, knitk_wait_flags(w2, seq - 1, KNITK_WAIT_SPIN, 0));
	EXPECT_EQ(-ETIMEDOUT, knitk_wait_flags(w2, seq, KNITK_WAIT_SPIN,
					       knitk_now_ns()));
	knitk_doorbell_sleeping(knot_doorbell(&self->k, 2), 0);
	stats_of(_metadata, w2, 2, &st);
	EXPECT_EQ(1ULL, st.wakes);
	EXPECT_EQ(1ULL, st.suppressed_awake);
	EXPECT_EQ(1ULL, st.timeouts);
	EXPECT_EQ(0ULL, st.spurious);
	close(w2);
}

/* A waker: once doorbell @d has slept @waits times, publish and ring it. */
struct waker {
	FIXTURE_DATA(a3) *self;
	pthread_t thread;
	unsigned int d;
	__u64 waits;
	int ret;
};

static void *waker_run(void *arg)
{
	struct waker *k = arg;

	k->ret = knitk_wait_asleep(k->self->k.fd, k->d, k->waits);
	if (!k->ret) {
		knot_lane_publish(request_of(k->self, k->d), 3);
		k->ret = knitk_notify(k->self->k.fd, 1ULL << k->d, NULL);
	}
	return NULL;
}

/*
 * S8: a spin lasts only while the ringer runs.  The ringer, a process
 * that never sleeps, is stopped with SIGSTOP while the waiter spins (or
 * before it starts: both must end the same way): the waiter must go to
 * sleep, where a notify wakes it.  A spin that kept going on a stopped
 * ringer would last spin_ns, an hour.
 */
TEST_F(a3, spin_ringer_stopped_sleeps)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct waker k = { .self = self, .d = 0, .waits = 1 };
	struct knitk_doorbell_stats st;
	pid_t ringer, stopper, waiter = knitk_gettid();
	unsigned long long t0;
	int status;
	__u32 seq;

	spin_hour(_metadata, self);
	asleep_with_work(self, 0);
	ringer = running_ringer(self->k.fd, W0_BIT);
	ASSERT_LT(0, ringer);
	drain(request_of(self, 0));
	seq = flag_asleep(wdb);
	t0 = thread_stime(getpid(), waiter);
	stopper = fork();
	ASSERT_LE(0, stopper);
	if (stopper == 0) {
		/* Once the waiter spins (system time) or sleeps. */
		until_spinning(getppid(), waiter, t0);
		_exit(kill(ringer, SIGSTOP) ? 1 : 0);
	}
	ASSERT_EQ(0, pthread_create(&k.thread, NULL, waker_run, &k));
	EXPECT_EQ(0, knitk_wait_flags(self->w0, seq, KNITK_WAIT_SPIN,
				      KNITK_WAIT_FOREVER));
	knitk_doorbell_sleeping(wdb, 0);
	pthread_join(k.thread, NULL);
	EXPECT_EQ(0, k.ret);
	EXPECT_EQ(stopper, waitpid(stopper, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	kill(ringer, SIGKILL);
	EXPECT_EQ(ringer, waitpid(ringer, &status, 0));
	stats_of(_metadata, self->k.fd, 0, &st);
	EXPECT_EQ(1ULL, st.waits);
	EXPECT_EQ(1ULL, st.spin_sleeps);
	EXPECT_EQ(0ULL, st.spin_wakes);
	EXPECT_EQ(0ULL, st.spurious);
}

/* A ringer of doorbell 0 that keeps running (a thread on CPU 1). */
/*
 * Worker 0 asleep with a lane pending, rung by KNITK_IOC_NOTIFY, its lane
 * taken: 0, or the notify's error, -EPROTO if it woke another.
 */
static int ring_w0(FIXTURE_DATA(a3) *self)
{
	__u64 woken = 0;
	int ret;

	asleep_with_work(self, 0);
	ret = knitk_notify(self->k.fd, W0_BIT, &woken);
	drain(request_of(self, 0));
	if (!ret && woken != W0_BIT)
		ret = -EPROTO;
	return ret;
}

struct runner {
	FIXTURE_DATA(a3) *self;
	pthread_t thread;
	volatile int stop;
	volatile int rang;
	int ret;
};

static void *runner_run(void *arg)
{
	struct runner *g = arg;

	g->ret = pin_to(1);
	if (!g->ret)
		g->ret = ring_w0(g->self);
	__atomic_store_n(&g->rang, 1, __ATOMIC_SEQ_CST);
	while (!g->ret && !g->stop)
		;
	return NULL;
}

/* Waiter thread: a spinning wait (or NOTIFY_WAIT) on worker 0's endpoint. */
struct spinner {
	FIXTURE_DATA(a3) *self;
	pthread_t thread;
	pid_t tid;
	int fd;
	int notify;
	__u32 seq;
	volatile int started;
	int ret;
};

static void *spinner_run(void *arg)
{
	struct spinner *s = arg;

	s->tid = knitk_gettid();
	if (pin_to(0)) {
		s->ret = -errno;
		return NULL;
	}
	__atomic_store_n(&s->started, 1, __ATOMIC_SEQ_CST);
	if (s->notify)
		s->ret = knitk_notify_wait(s->fd, 0, s->seq, KNITK_WAIT_SPIN,
					   KNITK_WAIT_FOREVER, NULL);
	else
		s->ret = knitk_wait_flags(s->fd, s->seq, KNITK_WAIT_SPIN,
					  KNITK_WAIT_FOREVER);
	return NULL;
}

/*
 * The waiter's own role ends while it spins, its ringer running all the
 * while: its last fd is closed by another thread.  "-ENOTCONN when ... the
 * endpoint's role has ended, before the wait or while it sleeps", and the
 * spin ends the wait as a sleep would: -ENOTCONN, not an hour's spin.
 * Once from KNITK_IOC_WAIT, once from KNITK_IOC_NOTIFY_WAIT.
 */
TEST_F(a3, spin_role_ends_under_it)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct runner g = { .self = self };
	int round;

	spin_hour(_metadata, self);
	ASSERT_EQ(0, pthread_create(&g.thread, NULL, runner_run, &g));
	while (!__atomic_load_n(&g.rang, __ATOMIC_SEQ_CST))
		usleep(1000);
	ASSERT_EQ(0, g.ret);
	for (round = 0; round < 2; round++) {
		struct spinner s = { .self = self, .notify = round };
		unsigned long long t0;

		if (round) {
			self->w0 = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
			ASSERT_LE(0, self->w0);
		}
		s.fd = self->w0;
		s.seq = flag_asleep(wdb);
		ASSERT_EQ(0, pthread_create(&s.thread, NULL, spinner_run, &s));
		while (!__atomic_load_n(&s.started, __ATOMIC_SEQ_CST))
			usleep(1000);
		t0 = thread_stime(getpid(), s.tid);
		/* Spinning (system time grows) or, if it slept, asleep. */
		until_spinning(getpid(), s.tid, t0);
		close(self->w0);
		self->w0 = -1;
		pthread_join(s.thread, NULL);
		EXPECT_EQ(-ENOTCONN, s.ret);
		knitk_doorbell_sleeping(wdb, 0);
		EXPECT_TRUE(self->k.ctl->dead & 1);
	}
	g.stop = 1;
	pthread_join(g.thread, NULL);
}

/* Rings doorbell 0 (a delivered notify), then blocks until told. */
struct blocked_ringer {
	FIXTURE_DATA(a3) *self;
	pthread_t thread;
	pid_t tid;
	int pipe[2];
	volatile int rang;
	int ret;
};

static void *blocked_ringer_run(void *arg)
{
	struct blocked_ringer *b = arg;
	char c;

	b->tid = knitk_gettid();
	b->ret = ring_w0(b->self);
	__atomic_store_n(&b->rang, 1, __ATOMIC_SEQ_CST);
	if (!b->ret && read(b->pipe[0], &c, 1) < 0)
		b->ret = -errno;
	return NULL;
}

/* Kicks doorbell 0 from CPU 1, then keeps running there until told. */
static void *kicker_run(void *arg)
{
	struct runner *g = arg;

	g->ret = pin_to(1);
	if (!g->ret)
		g->ret = knitk_kick(g->self->k.fd, W0_BIT, NULL);
	__atomic_store_n(&g->rang, 1, __ATOMIC_SEQ_CST);
	while (!g->ret && !g->stop)
		;
	return NULL;
}

/*
 * The ringer a spin watches is the task whose notify last delivered a
 * wake through the idle filter, "normally the peer that will ring it
 * next": a kick (an event of the doorbell's own side) does not make its
 * caller the ringer.  The ringer is blocked and the kicker runs: the
 * spinning wait sleeps at once, and a notify wakes it.  Were the running
 * kicker the ringer, the wait would spin for spin_ns, an hour.
 */
TEST_F(a3, spin_kicker_is_not_the_ringer)
{
	struct knitk_doorbell *wdb = knot_doorbell(&self->k, 0);
	struct blocked_ringer b = { .self = self };
	struct runner g = { .self = self };
	struct waker k = { .self = self, .d = 0, .waits = 1 };
	struct knitk_doorbell_stats st;
	__u32 seq;

	spin_hour(_metadata, self);
	ASSERT_EQ(0, pin_to(0));
	ASSERT_EQ(0, pipe(b.pipe));
	ASSERT_EQ(0, pthread_create(&b.thread, NULL, blocked_ringer_run, &b));
	while (!__atomic_load_n(&b.rang, __ATOMIC_SEQ_CST))
		usleep(1000);
	ASSERT_EQ(0, b.ret);
	while (knitk_thread_state(getpid(), b.tid) != 'S')
		usleep(1000);
	ASSERT_EQ(0, pthread_create(&g.thread, NULL, kicker_run, &g));
	while (!__atomic_load_n(&g.rang, __ATOMIC_SEQ_CST))
		usleep(1000);
	ASSERT_EQ(0, g.ret);

	seq = flag_asleep(wdb);
	ASSERT_EQ(0, pthread_create(&k.thread, NULL, waker_run, &k));
	EXPECT_EQ(0, knitk_wait_flags(self->w0, seq, KNITK_WAIT_SPIN,
				      KNITK_WAIT_FOREVER));
	knitk_doorbell_sleeping(wdb, 0);
	pthread_join(k.thread, NULL);
	EXPECT_EQ(0, k.ret);
	g.stop = 1;
	pthread_join(g.thread, NULL);
	EXPECT_EQ(1, write(b.pipe[1], "x", 1));
	pthread_join(b.thread, NULL);
	close(b.pipe[0]);
	close(b.pipe[1]);
	stats_of(_metadata, self->k.fd, 0, &st);
	EXPECT_EQ(1ULL, st.kicks);
	EXPECT_EQ(1ULL, st.waits);
	EXPECT_EQ(1ULL, st.spin_sleeps);
	EXPECT_EQ(0ULL, st.spin_wakes);
	EXPECT_EQ(0ULL, st.spurious);
}

/*
 * The library's ring-then-wait on the module: "On that backend the wait
 * of a ring-then-wait also spins in the kernel first" (knitk.h), and
 * knitk_doorbell_wait/park do not.  Every KNITK_WAIT_SPIN wait that
 * passed its seq check counts one of spin_wakes or spin_sleeps, so the
 * counters tell which waits were spinning ones: a ring_park whose peer is
 * awake (its ring suppressed) is still a ring-then-wait.  A bad bit is
 * refused before anything is rung.
 */
TEST_F(a3, lib_ring_park_spins)
{
	struct knitk_geometry g;
	struct knitk_endpoint *host, *w;
	struct knitk_doorbell_stats st;
	struct knitk_doorbell *wdb;
	const struct knitk_control *ctl;
	void *base;
	struct knitk_layout l;
	uint32_t seq;
	__u32 wseq;

	knitk_geom_small(&g);
	ASSERT_EQ(0, knitk_endpoint_create(&g, KNITK_KNOT_KMOD, &host));
	ASSERT_LT(0, knitk_endpoint_join(host, KNITK_ROLE_HOST, 0));
	ASSERT_EQ(0, knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w));
	ASSERT_LT(0, knitk_endpoint_join(w, KNITK_ROLE_WORKER, 0));
	EXPECT_EQ(1, knitk_doorbell_can_ring_wait(host));
	ASSERT_EQ(0, knitk_endpoint_control(host, &ctl));
	ASSERT_EQ(0, knitk_endpoint_base(host, &base));
	l = ctl->layout;
	wdb = (struct knitk_doorbell *)((char *)base + l.doorbell_off);

	/* Worker 0 asleep with work; a bad bit beside it rings nothing. */
	ASSERT_EQ(0, knitk_doorbell_prepare(w, &seq));
	wseq = seq;
	knot_lane_publish((struct knitk_sector *)((char *)base + l.mailbox_off), 0);
	ASSERT_EQ(0, knitk_doorbell_prepare(host, &seq));
	EXPECT_EQ(-EINVAL, knitk_doorbell_ring_wait(host, W0_BIT | 1ULL << 5, seq, 0));
	EXPECT_EQ(-EINVAL, knitk_doorbell_ring_park(host, 1ULL << 2, 0));
	EXPECT_EQ(wseq, knitk_doorbell_seq(wdb));
	ASSERT_EQ(0, knitk_doorbell_cancel(host));

	/* A plain park does not spin. */
	EXPECT_EQ(-ETIMEDOUT, knitk_doorbell_park(host, knitk_now_ns()));
	ASSERT_EQ(0, knitk_endpoint_doorbell_stats(host, HOST, &st, sizeof(st)));
	EXPECT_EQ(1ULL, st.waits);
	EXPECT_EQ(0ULL, st.spin_wakes + st.spin_sleeps);

	/* Peer asleep with work: rung, and the wait spun (or slept at once). */
	EXPECT_EQ(-ETIMEDOUT, knitk_doorbell_ring_park(host, W0_BIT, knitk_now_ns()));
	EXPECT_EQ(wseq + 1, knitk_doorbell_seq(wdb));
	ASSERT_EQ(0, knitk_endpoint_doorbell_stats(host, HOST, &st, sizeof(st)));
	EXPECT_EQ(1ULL, st.spin_wakes + st.spin_sleeps);

	/* Peer awake now (the ring cleared its flag): still a spinning wait. */
	EXPECT_EQ(-ETIMEDOUT, knitk_doorbell_ring_park(host, W0_BIT, knitk_now_ns()));
	EXPECT_EQ(wseq + 1, knitk_doorbell_seq(wdb));
	ASSERT_EQ(0, knitk_endpoint_doorbell_stats(host, HOST, &st, sizeof(st)));
	EXPECT_EQ(2ULL, st.spin_wakes + st.spin_sleeps);
	EXPECT_EQ(3ULL, st.waits);
	EXPECT_EQ(0ULL, st.spurious);

	knitk_endpoint_destroy(w);
	knitk_endpoint_destroy(host);
}

TEST_HARNESS_MAIN
