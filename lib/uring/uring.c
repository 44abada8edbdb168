// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * libknitk-uring: the KNITK_URING_CMD_WAIT SQE, on the public headers alone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>

#include "knitk_uring.h"

/* A 64-byte SQE has 16 command bytes, from sqe->cmd to its end. */
_Static_assert(sizeof(struct knitk_uring_wait) == 16 &&
	       offsetof(struct io_uring_sqe, cmd) + 16 == 64,
	       "the payload fills a 64-byte SQE's command area");

KNITK_EXPORT int knitk_uring_supported(const struct knitk_endpoint *knot)
{
	struct knitk_api api = { .api = KNITK_API };
	int fd = knitk_endpoint_fd(knot);

	if (fd < 0)
		return fd;
	if (knitk_endpoint_backend(knot) != KNITK_BACKEND_KMOD)
		return 0;
	if (ioctl(fd, KNITK_IOC_API, &api) < 0)
		return -errno;
	return !!(api.features & KNITK_FEATURE_URING_CMD);
}

KNITK_EXPORT int knitk_prep_doorbell_wait(struct io_uring_sqe *sqe,
					  const struct knitk_endpoint *knot,
					  uint32_t seq, uint64_t deadline_ns)
{
	struct knitk_uring_wait w = { .expected = seq, .deadline_ns = deadline_ns };
	int slot;

	if (!sqe || !knot)
		return -EINVAL;
	if (knitk_endpoint_backend(knot) != KNITK_BACKEND_KMOD)
		return -EOPNOTSUPP;
	slot = knitk_endpoint_doorbell(knot);
	if (slot < 0)
		return slot;
	w.doorbell = (uint8_t)slot;
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = knitk_endpoint_fd(knot);
	sqe->cmd_op = KNITK_URING_CMD_WAIT;
	memcpy(sqe->cmd, &w, sizeof(w));
	return 0;
}
