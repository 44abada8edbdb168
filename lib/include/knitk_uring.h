/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * libknitk-uring: knitk doorbell waits on the caller's own io_uring.
 *
 * A separate small library (pkg-config knitk-uring), so that plain users
 * of libknitk do not depend on liburing; it uses liburing's headers only
 * (struct io_uring_sqe), and bookworm's liburing 2.3 has no uring_cmd
 * helper, so the SQE is built here by hand.
 *
 * The protocol is KNITK_IOC_WAIT's (struct knitk_uring_wait in
 * <linux/knitk.h>): knitk_doorbell_prepare(knot, &seq) sets the sleeping
 * flag and gives seq; re-check every mailbox the endpoint consumes; if
 * nothing is pending, prep the wait, submit, and on its CQE (res 0,
 * -EAGAIN, -ETIMEDOUT, -EPIPE, -ECANCELED) call knitk_doorbell_cancel and
 * look again.  A pool's completions are better waited for with an
 * IORING_OP_POLL_ADD (or read) of knitk_pool_event_fd(), which works on
 * both backends.
 */
#ifndef KNITK_URING_H
#define KNITK_URING_H

/*
 * <liburing.h> first: it sets the feature macros its own declarations
 * need (sigset_t, AT_FDCWD), which take effect only before any libc
 * header, so a strict C11 program that includes this header first builds.
 */
#include <liburing.h>
#include <stdint.h>

#include "knitk.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * knitk_uring_supported - 1 when @ep's endpoint offers the wait (the
 * module, with KNITK_FEATURE_URING_CMD), 0 when not (the futex backend, an
 * older module), or a negative errno.
 */
int knitk_uring_supported(const struct knitk_endpoint *ep);

/*
 * knitk_prep_doorbell_wait - fill @sqe with a wait of @ep's own doorbell
 * while its seq is @seq, until @deadline_ns (absolute CLOCK_MONOTONIC, or
 * KNITK_WAIT_FOREVER); sqe->user_data is left to the caller.  Works on
 * 64- and 128-byte SQEs (the caller zeroes a 128-byte one's tail, as
 * io_uring_get_sqe does not).  -EOPNOTSUPP on the futex backend (a module
 * without the feature completes the CQE with -EOPNOTSUPP or -ENOTTY:
 * check knitk_uring_supported once), -ENOTCONN before knitk_endpoint_join,
 * -EINVAL for NULL arguments.
 */
int knitk_prep_doorbell_wait(struct io_uring_sqe *sqe,
			     const struct knitk_endpoint *ep, uint32_t seq,
			     uint64_t deadline_ns);

#ifdef __cplusplus
}
#endif

#endif /* KNITK_URING_H */
