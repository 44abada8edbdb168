// SPDX-License-Identifier: GPL-2.0
/*
 * NULL for every pointer argument of every core call: a negative errno
 * or nothing, never a crash (each call tried in a child).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"
#define FIXTURES_ONE_SUBMITTER
#include "fixtures.h"

/*
 * Run @expr in a child: 0 when it returned a negative errno (or, for a
 * void call, returned at all), 1 when it returned something else, 2 when
 * the child died (a signal: the library dereferenced the NULL).
 */
#define IN_CHILD(expr) ({						\
	pid_t _pid = fork();						\
	int _st = 0;							\
	if (!_pid) {							\
		alarm(10);						\
		_exit((expr) < 0 ? 0 : 1);				\
	}								\
	waitpid(_pid, &_st, 0);						\
	WIFEXITED(_st) ? WEXITSTATUS(_st) : 2;				\
})

#define NULL_OK(expr) do {						\
	int _r = IN_CHILD(expr);					\
	if (_r)								\
		printf("# %s: %s\n", #expr,				\
		       _r == 2 ? "crashed" : "did not fail");		\
	CHECK_EQ(_r, 0);						\
} while (0)

#define VOID_OK(stmt) NULL_OK((stmt, -1))

/*
 * Every core call given NULL where it takes an object or an out-pointer
 * fails with a negative errno ("Every function returns ... a negative
 * errno value on failure"); the destroys take NULL as free() does.
 */
static void null_everywhere_core(void)
{
	struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64, .arena_bytes = 4096,
	};
	struct knitk_lane_header *hp, h = { 0 };
	struct knitk_wake_stats ws = { .size = sizeof(ws) };
	struct knitk_doorbell_stats ds;
	struct knitk_producer *p = NULL;
	struct knitk_consumer *c = NULL;
	struct knitk_endpoint *ep;
	struct knitk_layout layout;
	const struct knitk_control *ctl;
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pend, lanes[2];
	uint32_t seq;
	void *base, *buf;
	int lane;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &ep) == 0);
	REQUIRE(knitk_producer_create(ep, 0, &p) == 0);
	REQUIRE(knitk_consumer_create(ep, 0, &c) == 0);
	lane = knitk_lane_claim(p);
	REQUIRE(lane >= 0);

	NULL_OK(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, NULL));
	NULL_OK(knitk_endpoint_attach(knitk_endpoint_fd(ep), 0, NULL));
	NULL_OK(knitk_endpoint_fd(NULL));
	NULL_OK(knitk_endpoint_backend(NULL));
	NULL_OK(knitk_endpoint_layout(NULL, &layout, NULL));
	NULL_OK(knitk_endpoint_layout(ep, NULL, NULL));
	NULL_OK(knitk_endpoint_control(NULL, &ctl));
	NULL_OK(knitk_endpoint_control(ep, NULL));
	NULL_OK(knitk_endpoint_base(NULL, &base));
	NULL_OK(knitk_endpoint_base(ep, NULL));
	NULL_OK(knitk_endpoint_doorbell(NULL));
	NULL_OK(knitk_endpoint_mark_dead(NULL, 0));
	NULL_OK(knitk_endpoint_request_mailbox(NULL, 0, 0));
	NULL_OK(knitk_endpoint_return_mailbox(NULL, 0));
	NULL_OK(knitk_mailbox_pending(NULL, 0, &pend));
	NULL_OK(knitk_mailbox_pending(ep, 0, NULL));
	NULL_OK(knitk_endpoint_wake_stats(NULL, &ws));
	NULL_OK(knitk_endpoint_wake_stats(ep, NULL));
	NULL_OK(knitk_endpoint_doorbell_stats(NULL, 0, &ds, sizeof(ds)));
	NULL_OK(knitk_endpoint_doorbell_stats(ep, 0, NULL, sizeof(ds)));
	NULL_OK(knitk_producer_create(NULL, 0, &p));
	NULL_OK(knitk_producer_create(ep, 0, NULL));
	NULL_OK(knitk_consumer_create(NULL, 0, &c));
	NULL_OK(knitk_consumer_create(ep, 0, NULL));
	NULL_OK(knitk_steal_consumer_create(NULL, 0, 0, &c));
	NULL_OK(knitk_steal_consumer_create(ep, 0, 0, NULL));
	NULL_OK(knitk_lane_claim(NULL));
	NULL_OK(knitk_lane_header(NULL, (unsigned int)lane, &hp));
	NULL_OK(knitk_lane_header(p, (unsigned int)lane, NULL));
	NULL_OK(knitk_lane_reserve(NULL, (unsigned int)lane, 8, &buf));
	NULL_OK(knitk_lane_reserve(p, (unsigned int)lane, 8, NULL));
	NULL_OK(knitk_lane_set_value(NULL, (unsigned int)lane, 1));
	NULL_OK(knitk_lane_release(NULL, (unsigned int)lane));
	NULL_OK(knitk_lane_publish(NULL, (unsigned int)lane));
	NULL_OK(knitk_lane_publish_batch(NULL, 1ULL << lane));
	NULL_OK(knitk_producer_send(NULL, &h, NULL, 0));
	NULL_OK(knitk_producer_send(p, NULL, "x", 1));
	NULL_OK(knitk_producer_send(p, &h, NULL, 4));
	NULL_OK(knitk_producer_stage(p, &h, NULL, 4));
	NULL_OK(knitk_producer_track_claims(NULL));
	NULL_OK(knitk_producer_claims(NULL, lanes, 1));
	NULL_OK(knitk_producer_reset_claimant(NULL, 0));
	NULL_OK(knitk_producer_notify(NULL));
	NULL_OK(knitk_producer_notify_park(NULL, 0));
	NULL_OK(knitk_lane_scan(NULL, &pend));
	NULL_OK(knitk_lane_scan(c, NULL));
	NULL_OK(knitk_lane_next(NULL, &pend));
	NULL_OK(knitk_lane_next(c, NULL));
	NULL_OK(knitk_lane_decode(NULL, 0, &m));
	NULL_OK(knitk_lane_decode(c, 0, NULL));
	NULL_OK(knitk_lane_ack(NULL, 1));
	NULL_OK(knitk_consumer_wait(NULL, &pend, 0));
	NULL_OK(knitk_consumer_wait(c, NULL, 0));
	NULL_OK(knitk_endpoint_awake(NULL, &pend, NULL));
	VOID_OK(knitk_endpoint_awake(ep, NULL, NULL));	/* both outputs optional */
	NULL_OK(knitk_doorbell_prepare(NULL, &seq));
	NULL_OK(knitk_doorbell_prepare(ep, NULL));
	NULL_OK(knitk_doorbell_wait(NULL, 0, 0));
	NULL_OK(knitk_doorbell_cancel(NULL));
	NULL_OK(knitk_doorbell_park(NULL, 0));
	NULL_OK(knitk_doorbell_ring_park(NULL, 1, 0));
	NULL_OK(knitk_steal_region_lanes(0, 0));
	VOID_OK(knitk_endpoint_destroy(NULL));
	VOID_OK(knitk_producer_destroy(NULL));
	VOID_OK(knitk_consumer_destroy(NULL));

	CHECK_EQ(knitk_lane_release(p, (unsigned int)lane), 0);
	knitk_consumer_destroy(c);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(ep);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(null_everywhere_core);
	return tap_exit();
}
