// SPDX-License-Identifier: GPL-2.0
/*
 * A deadline is the caller's CLOCK_MONOTONIC, absolute: KNITK_IOC_WAIT,
 * KNITK_IOC_NOTIFY_WAIT (with and without the spin) and the io_uring wait
 * in a time namespace whose clock runs behind the host's never time out
 * before the caller's clock reaches the deadline; deadlines at the edges
 * of a signed 64-bit count of nanoseconds and past it (but not
 * KNITK_WAIT_FOREVER) sleep until woken, 0 and 1 have passed; a storm of
 * signals, restarted or retried after -EINTR, neither ends the wait early
 * nor moves its deadline.  The io_uring wait asleep when its owner's only
 * fd goes in flight is cancelled with the role.
 */
#define _GNU_SOURCE
#include <stdatomic.h>

#include "knitk_fixtures.h"
#include "knitk_ring.h"

/* A storm of SIGUSR1 on one thread: every 200 us until storm_end(). */
static atomic_int storm_stop;
static atomic_ulong storm_sent;

static void on_signal(int sig)
{
	(void)sig;
}

static void *storm_run(void *arg)
{
	pid_t tid = (pid_t)(intptr_t)arg;

	while (!atomic_load(&storm_stop)) {
		if (syscall(SYS_tgkill, getpid(), tid, SIGUSR1) == 0)
			atomic_fetch_add(&storm_sent, 1);
		usleep(200);
	}
	return NULL;
}

/*
 * A new endpoint joined as worker 0 of @self's knot (its fd returned), and
 * a storm on this thread in *@storm, SIGUSR1 handled with @sa_flags.
 */
static int storm_begin(struct __test_metadata *_metadata,
		       FIXTURE_DATA(adv) *self, int sa_flags, pthread_t *storm)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = sa_flags };
	int fd;

	fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	atomic_store(&storm_stop, 0);
	atomic_store(&storm_sent, 0);
	ASSERT_EQ(0, pthread_create(storm, NULL, storm_run,
				    (void *)(intptr_t)knitk_gettid()));
	return fd;
}

static void storm_end(pthread_t storm)
{
	atomic_store(&storm_stop, 1);
	pthread_join(storm, NULL);
}

/*
 * A storm of SIGUSR1 with SA_RESTART on a thread in KNITK_IOC_WAIT: the
 * wait restarts with its absolute deadline, so it ends at that deadline
 * with -ETIMEDOUT (a deadline re-armed on every restart would never end).
 */
TEST_F(adv, signal_storm_restart_keeps_deadline)
{
	struct knitk_doorbell_stats st;
	pthread_t storm;
	__u64 deadline;
	int fd, ret;

	fd = storm_begin(_metadata, self, SA_RESTART, &storm);
	deadline = knitk_now_ns() + 500 * KNITK_MS;
	ret = knitk_wait(fd, knitk_doorbell_seq(knot_doorbell(&self->k, 0)),
			 deadline);
	storm_end(storm);
	EXPECT_EQ(-ETIMEDOUT, ret);
	EXPECT_LE(deadline, knitk_now_ns());
	ASSERT_EQ(0, knitk_stats(fd, 0, &st));
	TH_LOG("%lu signals; waits %llu interrupts %llu timeouts %llu",
	       atomic_load(&storm_sent), st.waits, st.interrupts, st.timeouts);
	EXPECT_LT(0UL, atomic_load(&storm_sent));
	EXPECT_EQ(1ULL, st.timeouts);
	EXPECT_EQ(0ULL, st.spurious);
	signal(SIGUSR1, SIG_DFL);
	close(fd);
}

/*
 * Without SA_RESTART each signal ends the wait with -EINTR; a caller that
 * retries with the same absolute deadline reaches it.  No signal is a
 * spurious wake, and the interrupts are counted.
 */
TEST_F(adv, signal_storm_eintr_retry_reaches_deadline)
{
	struct knitk_doorbell_stats st;
	unsigned long eintr = 0;
	pthread_t storm;
	__u64 deadline;
	int fd, ret;

	fd = storm_begin(_metadata, self, 0, &storm);
	deadline = knitk_now_ns() + 500 * KNITK_MS;
	do {
		ret = knitk_wait(fd, knitk_doorbell_seq(knot_doorbell(&self->k, 0)),
				 deadline);
		if (ret == -EINTR)
			eintr++;
	} while (ret == -EINTR);
	storm_end(storm);
	EXPECT_EQ(-ETIMEDOUT, ret);
	EXPECT_LE(deadline, knitk_now_ns());
	ASSERT_EQ(0, knitk_stats(fd, 0, &st));
	TH_LOG("%lu signals, %lu EINTR; interrupts %llu", atomic_load(&storm_sent),
	       eintr, st.interrupts);
	EXPECT_EQ(0ULL, st.spurious);
	EXPECT_EQ(1ULL, st.timeouts);
	EXPECT_LE((__u64)eintr, st.interrupts);
	signal(SIGUSR1, SIG_DFL);
	close(fd);
}

/* Deadlines past KTIME_MAX (but not KNITK_WAIT_FOREVER) still sleep. */
TEST_F(adv, wait_huge_deadline_woken_by_kick)
{
	struct waiter wt = { 0 };
	struct knitk_wait w;
	int fd;

	fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, fd);
	wt.fd = fd;
	wt.seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	wt.deadline = KNITK_WAIT_FOREVER - 1;
	w = (struct knitk_wait){ .expected = wt.seq,
				 .deadline_ns = wt.deadline };
	ASSERT_EQ(0, pthread_create(&wt.thread, NULL, waiter_run, &wt));
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, 0, 1));
	ASSERT_EQ(0, knitk_kick(self->k.fd, 1ULL, NULL));
	pthread_join(wt.thread, NULL);
	EXPECT_EQ(0, wt.ret);
	/* The same deadline, with the seq moved: -EAGAIN at once. */
	EXPECT_EQ(-EAGAIN, knitk_ioctl(fd, KNITK_IOC_WAIT, &w));
	w.expected = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	w.deadline_ns = 0;
	EXPECT_EQ(-ETIMEDOUT, knitk_ioctl(fd, KNITK_IOC_WAIT, &w));
	close(fd);
}

/*
 * Deadlines at the edges of a signed 64-bit count of nanoseconds, and
 * past it, are far in the future: the waits sleep until kicked.  Deadlines
 * 0 and 1 are in the past: -ETIMEDOUT at once, the ring done first.
 */
TEST_F(k7, deadline_edges_wait_and_notify_wait)
{
	static const __u64 far[] = {
		(1ULL << 63) - 1, 1ULL << 63, (1ULL << 63) + 1,
		KNITK_WAIT_FOREVER - 1, 1ULL << 62,
	};
	struct knitk_doorbell *db = knot_doorbell(&self->k, 0);
	struct sleeper s;
	__u64 woken;
	unsigned int i;
	int nw;

	for (nw = 0; nw < 2; nw++) {
		for (i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
			ASSERT_EQ(0, sleeper_start(self, &s, self->w0, nw, far[i]));
			ASSERT_EQ(0, knitk_kick(self->k.fd, W0_BIT, NULL));
			EXPECT_EQ(0, sleeper_end(self, &s))
				TH_LOG("%s deadline %llx", nw ? "NOTIFY_WAIT" : "WAIT",
				       (unsigned long long)far[i]);
		}
	}
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(self->w0, knitk_doorbell_seq(db), 0));
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(self->w0, knitk_doorbell_seq(db), 1));
	EXPECT_EQ(-ETIMEDOUT, knitk_notify_wait(self->w0, HOST_BIT,
		  knitk_doorbell_seq(db), 0, 0, &woken));
	EXPECT_EQ(0ULL, woken);
	EXPECT_EQ(-ETIMEDOUT, knitk_notify_wait(self->w0, HOST_BIT,
		  knitk_doorbell_seq(db), 0, 1, &woken));
	EXPECT_EQ(0ULL, woken);
}

/*
 * The deadline is the caller's CLOCK_MONOTONIC: in a time namespace whose
 * monotonic clock runs behind the host's by more than a second, a
 * deadline a second ahead is in the future, though the host's clock has
 * passed it.  A wait that ends with -ETIMEDOUT must find the caller's
 * clock at or past its deadline.  For WAIT, NOTIFY_WAIT, NOTIFY_WAIT with
 * the spin and the io_uring wait; each runs to its deadline.
 */
enum { TNS_WAIT, TNS_NOTIFY_WAIT, TNS_SPIN, TNS_URING, TNS_KINDS };

#define TNS_AHEAD_NS	1000000000ULL

static int timens_wait(const struct knot *k, int kind)
{
	struct knot ck = { .layout = k->layout };
	__u64 deadline, after;
	__u32 seq;
	int ret;

	ck.fd = knot_endpoint(k, KNITK_ROLE_WORKER, 1);
	if (ck.fd < 0 || knot_map(&ck))
		return 1;
	seq = knitk_doorbell_seq(knot_doorbell(&ck, 1));
	deadline = knitk_now_ns() + TNS_AHEAD_NS;
	if (kind == TNS_URING) {
		struct io_uring ring;
		struct io_uring_sqe *sqe;

		if (io_uring_queue_init(2, &ring, 0))
			return 2;
		sqe = io_uring_get_sqe(&ring);
		prep_raw_wait(sqe, ck.fd, 1, seq, deadline, 1);
		if (io_uring_submit(&ring) != 1)
			return 3;
		ret = next_res(&ring, NULL);
	} else if (kind == TNS_WAIT) {
		ret = knitk_wait(ck.fd, seq, deadline);
	} else {
		ret = knitk_notify_wait(ck.fd, 0, seq,
					kind == TNS_SPIN ? KNITK_WAIT_SPIN : 0,
					deadline, NULL);
	}
	after = knitk_now_ns();
	if (ret != -ETIMEDOUT)
		return 20;
	if (after < deadline) {
		printf("# kind %d: -ETIMEDOUT %llu ns before its deadline\n",
		       kind, (unsigned long long)(deadline - after));
		return 10;
	}
	return 0;
}

TEST_F(k7, deadline_is_the_callers_clock_in_a_time_namespace)
{
	long long behind;
	char off[64];
	int kind, fd;

	/* Behind by all but a second of the host's uptime (never below 0). */
	behind = (long long)(knitk_now_ns() / 1000000000ULL) - 1;
	ASSERT_LE(2, behind);
	ASSERT_EQ(0, unshare(CLONE_NEWTIME));
	fd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	snprintf(off, sizeof(off), "monotonic %lld 0", -behind);
	ASSERT_EQ((ssize_t)strlen(off), write(fd, off, strlen(off)));
	close(fd);
	for (kind = 0; kind < TNS_KINDS; kind++) {
		pid_t pid = fork();
		int status;

		ASSERT_LE(0, pid);
		if (!pid)
			_exit(timens_wait(&self->k, kind));
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFEXITED(status));
		EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("kind %d", kind);
		wait_dead(self->k.ctl, 1);
	}
}

/*
 * The io_uring wait at the same deadline edges: far ones sleep until a
 * kick (0), past ones end at once (-ETIMEDOUT); and a ring wait asleep
 * when its owner's only fd goes in flight in a socket is cancelled, as
 * the role ends (-ECANCELED).
 */
TEST_F(k7, uring_wait_deadline_edges_and_fd_in_flight)
{
	static const __u64 far[] = {
		(1ULL << 63) - 1, 1ULL << 63, (1ULL << 63) + 1,
		KNITK_WAIT_FOREVER - 1,
	};
	struct knitk_doorbell *db = knot_doorbell(&self->k, 0);
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	__u64 asleep = 0;
	unsigned int i;
	int sv[2], back;

	ASSERT_EQ(0, io_uring_queue_init(4, &ring, 0));
	for (i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
		sqe = io_uring_get_sqe(&ring);
		ASSERT_NE(NULL, sqe);
		prep_raw_wait(sqe, self->w0, 0, knitk_doorbell_seq(db), far[i], i);
		ASSERT_EQ(1, io_uring_submit(&ring));
		until_uring_asleep(self->k.fd, 0, ++asleep);
		ASSERT_EQ(0, knitk_kick(self->k.fd, W0_BIT, NULL));
		EXPECT_EQ(0, next_res(&ring, NULL))
			TH_LOG("deadline %llx", (unsigned long long)far[i]);
	}
	for (i = 0; i < 2; i++) {
		sqe = io_uring_get_sqe(&ring);
		ASSERT_NE(NULL, sqe);
		prep_raw_wait(sqe, self->w0, 0, knitk_doorbell_seq(db), i, i);
		ASSERT_EQ(1, io_uring_submit(&ring));
		EXPECT_EQ(-ETIMEDOUT, next_res(&ring, NULL));
	}

	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	prep_raw_wait(sqe, self->w0, 0, knitk_doorbell_seq(db),
		      KNITK_WAIT_FOREVER, 9);
	/* The past deadlines' waits counted too. */
	asleep = uring_waits(self->k.fd, 0);
	ASSERT_EQ(1, io_uring_submit(&ring));
	until_uring_asleep(self->k.fd, 0, ++asleep);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	ASSERT_EQ(0, knitk_send_fd(sv[0], self->w0));
	close(self->w0);
	self->w0 = -1;
	EXPECT_EQ(-ECANCELED, next_res(&ring, NULL));
	wait_dead(self->k.ctl, 0);
	back = knitk_recv_fd(sv[1]);
	ASSERT_LE(0, back);
	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	prep_raw_wait(sqe, back, 0, knitk_doorbell_seq(db), KNITK_WAIT_FOREVER, 10);
	ASSERT_EQ(1, io_uring_submit(&ring));
	EXPECT_EQ(-ENOTCONN, next_res(&ring, NULL));
	io_uring_queue_exit(&ring);
	close(back);
	close(sv[0]);
	close(sv[1]);
}

TEST_HARNESS_MAIN
