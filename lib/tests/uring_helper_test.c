// SPDX-License-Identifier: GPL-2.0
/*
 * libknitk-uring on the host: the futex backend has no uring wait
 * (-EOPNOTSUPP, reported unsupported), arguments are checked, and the SQE
 * a module endpoint would get is exercised in the guest (uring_test).
 */
#include <errno.h>
#include <stdio.h>

#include "knitk.h"
#include "knitk_uring.h"
#include "tap.h"

static void futex_backend_unsupported(void)
{
	struct knitk_geometry g = { .nr_workers = 1, .nr_submitters = 1,
				    .lanes = KNITK_LANES, .inline_bytes = 64,
				    .abort_bits = 64,
				    .arena_bytes = KNITK_ARENA_ALIGN };
	struct io_uring_sqe sqe;
	struct knitk_endpoint *knot;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &knot) == 0);
	CHECK_EQ(knitk_uring_supported(knot), 0);
	CHECK_EQ(knitk_prep_doorbell_wait(&sqe, knot, 0, KNITK_WAIT_FOREVER),
		 -EOPNOTSUPP);
	CHECK_EQ(knitk_prep_doorbell_wait(NULL, knot, 0, 0), -EINVAL);
	CHECK_EQ(knitk_prep_doorbell_wait(&sqe, NULL, 0, 0), -EINVAL);
	CHECK(knitk_uring_supported(NULL) < 0);
	knitk_endpoint_destroy(knot);
}

int main(void)
{
	TEST(futex_backend_unsupported);
	return tap_exit();
}
