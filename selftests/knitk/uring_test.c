// SPDX-License-Identifier: GPL-2.0
/*
 * KNITK_URING_CMD_WAIT: the doorbell wait through IORING_OP_URING_CMD.
 * A wait completes on a delivered notify, a kick and a peer death; it is
 * cancelled (-ECANCELED) when its endpoint's role ends, and neither a ring
 * exit nor a task exit with waits pending hangs (the VM runner unloads the
 * module after the tests: nothing is left holding it).  Bad payloads are
 * rejected, and 10^4 results cross an io_uring loop, none lost or doubled.
 *
 * The SQE is built by hand: liburing 2.3 has no uring_cmd helper.  Waits
 * that must sleep are seen asleep through the uring_waits counter before
 * the test wakes them; CQE timeouts are only hang guards.
 */
#include <pthread.h>

#include "knitk_harness.h"
#include "knitk_ring.h"
#include "knitk_test.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	(1ULL << KNITK_DOORBELL_HOST)
#define LOOP_RESULTS	10000

/* Submit one wait of @fd on doorbell @d for seq @expected. */
static int submit_wait(struct io_uring *ring, int fd, unsigned int d,
		       __u32 expected, __u64 deadline_ns, __u64 user_data)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe)
		return -EBUSY;
	prep_raw_wait(sqe, fd, d, expected, deadline_ns, user_data);
	return io_uring_submit(ring) == 1 ? 0 : -EIO;
}

/* One raw command with a given payload; its CQE's res. */
static int raw_cmd(struct io_uring *ring, int fd, __u32 cmd_op,
		   const struct knitk_uring_wait *w)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe)
		return -EBUSY;
	prep_wait(sqe, fd, cmd_op, w, 1);
	if (io_uring_submit(ring) != 1)
		return -EIO;
	return next_res(ring, NULL);
}

static __u64 interrupts(int fd, unsigned int d)
{
	struct knitk_doorbell_stats st;

	return knitk_stats(fd, d, &st) ? ~0ULL : st.interrupts;
}

TEST(uring_feature_reported)
{
	struct knitk_api api = { .api = KNITK_API };
	int fd;

	KNITK_REQUIRE_DEV();
	fd = knitk_open_raw();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, knitk_ioctl(fd, KNITK_IOC_API, &api));
	EXPECT_EQ(KNITK_FEATURE_URING_CMD, api.features & KNITK_FEATURE_URING_CMD);
	close(fd);
}

FIXTURE(uring) {
	struct knot k;
	int worker;		/* endpoint joined as worker 0 */
	struct io_uring ring;
	bool ring_up;
};

FIXTURE_SETUP(uring)
{
	KNITK_REQUIRE_DEV();
	ring_knot_open(_metadata, &self->k, &self->worker, &self->ring,
		       &self->ring_up);
}

FIXTURE_TEARDOWN(uring)
{
	ring_knot_close(&self->k, self->worker, &self->ring, self->ring_up);
}

/* A lane for worker 0 and a notify: the worker's ring wait completes 0. */
TEST_F(uring, woken_by_notify)
{
	struct knitk_doorbell *db = knot_doorbell(&self->k, 0);
	__u32 seq = knitk_doorbell_seq(db);
	__u64 woken = 0;

	knitk_doorbell_sleeping(db, 1);
	ASSERT_EQ(0, submit_wait(&self->ring, self->worker, 0, seq,
				 KNITK_WAIT_FOREVER, 7));
	until_uring_asleep(self->worker, 0, 1);
	knot_lane_publish(knot_mailbox(&self->k, 0), 0);
	ASSERT_EQ(0, knitk_notify(self->k.fd, 1, &woken));
	EXPECT_EQ(1ULL, woken);
	EXPECT_EQ(0, next_res(&self->ring, NULL));
	EXPECT_NE(seq, knitk_doorbell_seq(db));
}

TEST_F(uring, woken_by_kick)
{
	struct knitk_doorbell *db = knot_doorbell(&self->k, HOST);
	__u32 seq = knitk_doorbell_seq(db);

	knitk_doorbell_sleeping(db, 1);
	ASSERT_EQ(0, submit_wait(&self->ring, self->k.fd, HOST, seq,
				 KNITK_WAIT_FOREVER, 7));
	until_uring_asleep(self->k.fd, HOST, 1);
	ASSERT_EQ(0, knitk_kick(self->worker, HOST_BIT, NULL));
	EXPECT_EQ(0, next_res(&self->ring, NULL));
}

/* The host waits; its worker dies (closes its endpoint): 0, a peer event. */
TEST_F(uring, woken_by_worker_death)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, HOST));

	ASSERT_EQ(0, submit_wait(&self->ring, self->k.fd, HOST, seq,
				 KNITK_WAIT_FOREVER, 7));
	until_uring_asleep(self->k.fd, HOST, 1);
	close(self->worker);
	self->worker = -1;
	EXPECT_EQ(0, next_res(&self->ring, NULL));
	EXPECT_NE(0ULL, self->k.ctl->dead & 1);
}

/* A worker waits; its host dies: -EPIPE, as for KNITK_IOC_WAIT. */
TEST_F(uring, host_death_is_epipe)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));

	ASSERT_EQ(0, submit_wait(&self->ring, self->worker, 0, seq,
				 KNITK_WAIT_FOREVER, 7));
	until_uring_asleep(self->worker, 0, 1);
	knot_unmap(&self->k);
	close(self->k.fd);
	self->k.fd = -1;
	EXPECT_EQ(-EPIPE, next_res(&self->ring, NULL));
	/* And a new wait fails at once. */
	EXPECT_EQ(0, submit_wait(&self->ring, self->worker, 0, seq,
				 KNITK_WAIT_FOREVER, 8));
	EXPECT_EQ(-EPIPE, next_res(&self->ring, NULL));
}

TEST_F(uring, moved_seq_and_deadline)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));

	ASSERT_EQ(0, submit_wait(&self->ring, self->worker, 0, seq + 1,
				 KNITK_WAIT_FOREVER, 7));
	EXPECT_EQ(-EAGAIN, next_res(&self->ring, NULL));
	ASSERT_EQ(0, submit_wait(&self->ring, self->worker, 0, seq,
				 knitk_now_ns() + 20 * KNITK_MS, 7));
	EXPECT_EQ(-ETIMEDOUT, next_res(&self->ring, NULL));
}

/* The owner closes its endpoint with a wait pending: -ECANCELED. */
TEST_F(uring, endpoint_close_cancels)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));

	ASSERT_EQ(0, submit_wait(&self->ring, self->worker, 0, seq,
				 KNITK_WAIT_FOREVER, 7));
	until_uring_asleep(self->worker, 0, 1);
	close(self->worker);
	self->worker = -1;
	EXPECT_EQ(-ECANCELED, next_res(&self->ring, NULL));
}

/* The ring goes away with two waits asleep: both end (interrupted). */
TEST_F(uring, ring_exit_with_waits_pending)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	__u64 before = interrupts(self->worker, 0);
	__u64 hseq = knitk_doorbell_seq(knot_doorbell(&self->k, HOST));

	ASSERT_EQ(0, submit_wait(&self->ring, self->worker, 0, seq,
				 KNITK_WAIT_FOREVER, 7));
	ASSERT_EQ(0, submit_wait(&self->ring, self->k.fd, HOST, hseq,
				 KNITK_WAIT_FOREVER, 8));
	until_uring_asleep(self->worker, 0, 1);
	until_uring_asleep(self->k.fd, HOST, 1);
	io_uring_queue_exit(&self->ring);
	self->ring_up = false;
	/* The exit cancels the io-wq work: each sleep ends as interrupted. */
	while (interrupts(self->worker, 0) < before + 1 ||
	       interrupts(self->k.fd, HOST) < 1)
		usleep(1000);
	/* The endpoints are free again: a plain wait works. */
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(self->worker, seq, knitk_now_ns()));
}

/* A task exits with a wait asleep in its ring: the exit completes. */
TEST_F(uring, task_exit_with_wait_pending)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct io_uring ring;

		if (io_uring_queue_init(4, &ring, 0) ||
		    submit_wait(&ring, self->worker, 0, seq, KNITK_WAIT_FOREVER, 1))
			_exit(1);
		until_uring_asleep(self->worker, 0, 1);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	while (interrupts(self->worker, 0) < 1)
		usleep(1000);
}

TEST_F(uring, bad_payloads_rejected)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	struct knitk_uring_wait w = { .expected = seq, .doorbell = 0,
				      .deadline_ns = KNITK_WAIT_FOREVER };
	struct knitk_uring_wait bad;
	int fd;

	bad = w;
	bad.reserved = 1;
	EXPECT_EQ(-EINVAL, raw_cmd(&self->ring, self->worker,
				   KNITK_URING_CMD_WAIT, &bad));
	bad = w;
	/* The spin is the ioctl's alone (uapi: struct knitk_uring_wait). */
	bad.flags = KNITK_WAIT_SPIN;
	EXPECT_EQ(-EINVAL, raw_cmd(&self->ring, self->worker,
				   KNITK_URING_CMD_WAIT, &bad));
	/* Worker 0 asking for the host's doorbell, or worker 1's. */
	bad = w;
	bad.doorbell = HOST;
	EXPECT_EQ(-EINVAL, raw_cmd(&self->ring, self->worker,
				   KNITK_URING_CMD_WAIT, &bad));
	bad.doorbell = 1;
	EXPECT_EQ(-EINVAL, raw_cmd(&self->ring, self->worker,
				   KNITK_URING_CMD_WAIT, &bad));
	/* The command of another payload size. */
	EXPECT_EQ(-EINVAL, raw_cmd(&self->ring, self->worker,
				   _IOW(KNITK_IOC_MAGIC, 0x20, __u64), &w));
	EXPECT_EQ(-ENOTTY, raw_cmd(&self->ring, self->worker,
				   _IOW(KNITK_IOC_MAGIC, 0x21,
					struct knitk_uring_wait), &w));
	/* An endpoint without a role. */
	fd = knitk_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, knitk_attach(fd, self->k.fd, NULL));
	EXPECT_EQ(-ENOTCONN, raw_cmd(&self->ring, fd, KNITK_URING_CMD_WAIT, &w));
	close(fd);
	/* None of them slept. */
	EXPECT_EQ(0ULL, uring_waits(self->worker, 0));
}

/* With 128-byte SQEs the 64 bytes past the payload are reserved. */
TEST_F(uring, sqe128_tail_reserved)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	struct knitk_uring_wait w = { .expected = seq + 1, .doorbell = 0,
				      .deadline_ns = KNITK_WAIT_FOREVER };
	struct io_uring ring;
	struct io_uring_sqe *sqe;

	ASSERT_EQ(0, io_uring_queue_init(4, &ring, IORING_SETUP_SQE128));
	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	memset(sqe, 0, 128);
	prep_wait(sqe, self->worker, KNITK_URING_CMD_WAIT, &w, 1);
	memset(sqe->cmd + sizeof(w), 0, 64);
	ASSERT_EQ(1, io_uring_submit(&ring));
	EXPECT_EQ(-EAGAIN, next_res(&ring, NULL));	/* valid: seq moved */
	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	memset(sqe, 0, 128);
	prep_wait(sqe, self->worker, KNITK_URING_CMD_WAIT, &w, 2);
	sqe->cmd[sizeof(w) + 63] = 1;
	ASSERT_EQ(1, io_uring_submit(&ring));
	EXPECT_EQ(-EINVAL, next_res(&ring, NULL));
	io_uring_queue_exit(&ring);
}

struct producer {
	struct knot *k;
	int fd;
	unsigned int sent;
};

/* Worker 0 returns LOOP_RESULTS results through lane 0 of its mailbox. */
static void *produce(void *arg)
{
	struct producer *p = arg;
	struct knitk_sector *s = knot_mailbox(p->k, p->k->layout.nr_request);
	__u64 woken;

	while (p->sent < LOOP_RESULTS) {
		/* The lane is free again once the host acknowledged it. */
		while ((knitk_load64(&s->pub) ^ knitk_load64(&s->ack)) & 1)
			sched_yield();
		knot_lane_publish(s, 0);
		p->sent++;
		if (knitk_notify(p->fd, HOST_BIT, &woken))
			break;
	}
	return NULL;
}

/*
 * The host consumes every result through ring waits alone.  Each wait
 * crosses an io-wq worker: under TCG that is far past the harness's
 * default 30 s hang guard, and on a debug kernel (make stress) several
 * times more, so this one gets the guard of pool_test's storms.
 */
TEST_F_TIMEOUT(uring, loop_of_10k_results, 3600)
{
	struct knitk_sector *s = knot_mailbox(&self->k, self->k.layout.nr_request);
	struct knitk_doorbell *db = knot_doorbell(&self->k, HOST);
	struct producer p = { .k = &self->k, .fd = self->worker };
	unsigned int got = 0, waits = 0, woke = 0;
	pthread_t th;

	ASSERT_EQ(0, pthread_create(&th, NULL, produce, &p));
	while (got < LOOP_RESULTS) {
		__u32 seq = knitk_doorbell_seq(db);
		int res;

		knitk_doorbell_sleeping(db, 1);
		/* The re-check after the flag store (seq_cst). */
		if ((knitk_load64(&s->pub) ^ knitk_load64(&s->ack)) & 1) {
			knitk_doorbell_sleeping(db, 0);
			knot_lane_ack(&s->ack, 0);
			got++;
			continue;
		}
		ASSERT_EQ(0, submit_wait(&self->ring, self->k.fd, HOST, seq,
					 KNITK_WAIT_FOREVER, got));
		res = next_res(&self->ring, NULL);
		ASSERT_TRUE(res == 0 || res == -EAGAIN) {
			TH_LOG("wait: %d", res);
		}
		waits++;
		woke += res == 0;
		knitk_doorbell_sleeping(db, 0);
	}
	pthread_join(th, NULL);
	EXPECT_EQ(LOOP_RESULTS, p.sent);
	EXPECT_EQ(LOOP_RESULTS, got);
	/* Nothing pending left: none doubled. */
	EXPECT_EQ(0ULL, (knitk_load64(&s->pub) ^ knitk_load64(&s->ack)) & 1);
	TH_LOG("%u results, %u ring waits, %u woken", got, waits, woke);
}

TEST_HARNESS_MAIN
