// SPDX-License-Identifier: GPL-2.0
/*
 * Adversarial tests of libknitk on the module, written from the public
 * headers and man pages alone: knitk_endpoint_doorbell_stats at sizes
 * past any header.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "knitk_live.h"
#include "knitk_pool_guest.h"
#include "knitk_stat_tool.h"
#include "../../lib/tests/proc_count.h"

#define HOST	KNITK_DOORBELL_HOST

static struct knitk_endpoint *host_of(struct __test_metadata *_metadata,
				      unsigned int workers)
{
	struct knitk_geometry g = {
		.nr_workers = workers, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64, .arena_bytes = 4096,
	};
	struct knitk_endpoint *ep = NULL;

	EXPECT_EQ(0, knitk_endpoint_create(&g, KNITK_KNOT_KMOD, &ep));
	if (ep)
		EXPECT_EQ(1, knitk_endpoint_join(ep, KNITK_ROLE_HOST, 0));
	return ep;
}

/*
 * The size is sizeof the caller's struct: a size no header can have
 * (past KNITK_SIZED_MAX, as for the sized structs) is refused, never
 * taken as a buffer that big; the largest legal one is filled and zeroed.
 */
TEST(doorbell_stats_sizes_past_any_header)
{
	static unsigned char buf[KNITK_SIZED_MAX + 64];
	struct knitk_endpoint *ep;
	size_t i;

	REQUIRE_KNITK();
	ep = host_of(_metadata, 2);
	ASSERT_NE(NULL, ep);
	memset(buf, 0xa5, sizeof(buf));
	EXPECT_EQ(-E2BIG, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf,
							KNITK_SIZED_MAX + 1));
	EXPECT_EQ(-E2BIG, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf, SIZE_MAX));
	EXPECT_EQ(-E2BIG, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf,
							(size_t)UINT32_MAX + 1));
	for (i = 0; i < sizeof(buf); i++)
		if (buf[i] != 0xa5)
			break;
	EXPECT_EQ(sizeof(buf), i);
	EXPECT_EQ(0, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf, KNITK_SIZED_MAX));
	for (i = sizeof(struct knitk_doorbell_stats); i < KNITK_SIZED_MAX; i++)
		if (buf[i])
			break;
	EXPECT_EQ(KNITK_SIZED_MAX, i);
	EXPECT_EQ(0xa5, buf[KNITK_SIZED_MAX]);
	/* Doorbells beyond the geometry, or no doorbell at all. */
	EXPECT_EQ(-EINVAL, knitk_endpoint_doorbell_stats(ep, 2, (void *)buf, 88));
	EXPECT_EQ(-EINVAL, knitk_endpoint_doorbell_stats(ep, 64, (void *)buf, 88));
	knitk_endpoint_destroy(ep);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	return test_harness_run(argc, argv);
}
