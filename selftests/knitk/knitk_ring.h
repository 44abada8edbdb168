/* SPDX-License-Identifier: GPL-2.0 */
/*
 * KNITK_URING_CMD_WAIT driven raw through liburing, for the kselftests of
 * the io_uring wait: an SQE built from a payload, the next completion
 * under a hang guard, the doorbell's count of ring waits asleep, and a
 * fixture's knot whose worker 0 waits on a ring.
 */
#ifndef KNITK_RING_H
#define KNITK_RING_H

#include <liburing.h>
#include <stdbool.h>

#include "knitk_harness.h"
#include "knitk_test.h"

/* Only a lost completion takes this long (io_uring's -ETIME). */
#define HANG_GUARD_S	120

static inline void prep_wait(struct io_uring_sqe *sqe, int fd, __u32 cmd_op,
			     const struct knitk_uring_wait *w, __u64 user_data)
{
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = cmd_op;
	memcpy(sqe->cmd, w, sizeof(*w));
	sqe->user_data = user_data;
}

/* A wait of @fd on doorbell @d for seq @expected. */
static inline void prep_raw_wait(struct io_uring_sqe *sqe, int fd,
				 unsigned int d, __u32 expected,
				 __u64 deadline_ns, __u64 user_data)
{
	struct knitk_uring_wait w = { .expected = expected, .doorbell = (__u8)d,
				      .deadline_ns = deadline_ns };

	prep_wait(sqe, fd, KNITK_URING_CMD_WAIT, &w, user_data);
}

/* The next completion's res and user_data (the hang guard gives -ETIME). */
static inline int next_res(struct io_uring *ring, __u64 *user_data)
{
	struct __kernel_timespec ts = { .tv_sec = HANG_GUARD_S };
	struct io_uring_cqe *cqe;
	int ret = io_uring_wait_cqe_timeout(ring, &cqe, &ts);

	if (ret)
		return ret;
	ret = cqe->res;
	if (user_data)
		*user_data = cqe->user_data;
	io_uring_cqe_seen(ring, cqe);
	return ret;
}

static inline __u64 uring_waits(int fd, unsigned int d)
{
	struct knitk_doorbell_stats st;

	return knitk_stats(fd, d, &st) ? ~0ULL : st.uring_waits;
}

/* Until doorbell @d counted @n uring waits asleep. */
static inline void until_uring_asleep(int fd, unsigned int d, __u64 n)
{
	while (uring_waits(fd, d) < n)
		usleep(1000);
}

/*
 * A fixture's set-up: a knot on @k with its host, worker 0 joined on
 * *@worker, and a ring of 8 entries (*@ring_up once it is).
 */
static inline void ring_knot_open(struct __test_metadata *_metadata,
				  struct knot *k, int *worker,
				  struct io_uring *ring, bool *ring_up)
{
	*worker = -1;
	*ring_up = false;
	ASSERT_EQ(0, knot_make_host_worker(k, worker));
	ASSERT_EQ(0, io_uring_queue_init(8, ring, 0));
	*ring_up = true;
}

/* And its teardown, of what the set-up got as far as. */
static inline void ring_knot_close(struct knot *k, int worker,
				   struct io_uring *ring, bool ring_up)
{
	if (ring_up)
		io_uring_queue_exit(ring);
	if (worker >= 0)
		close(worker);
	knot_close(k);
}

#endif /* KNITK_RING_H */
