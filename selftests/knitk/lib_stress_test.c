// SPDX-License-Identifier: GPL-2.0
/*
 * libknitk on the module: the lane/arena/doorbell stress of the library's
 * host tests (lib/tests/stress.h), forced onto the kmod backend, with the
 * worker as a thread and as a process that attaches with the inherited fd.
 * Every message is checked by content and sequence; both sides park with no
 * timeout; spurious wakes (library and module counters) must be zero.
 */
#include <stdlib.h>
#include <unistd.h>

#include "knitk_harness.h"
#include "../../lib/tests/stress.h"

#define STRESS_N	100000

static void stress_report(struct __test_metadata *_metadata, const char *mode,
			  const struct stress_result *r)
{
	ksft_print_msg("%s: %llu messages, %.1f MB in %.2f s: %.0f messages/s\n",
		       mode, (unsigned long long)r->n, (double)r->bytes / 1e6,
		       r->secs, (double)r->n / r->secs);
	ksft_print_msg("%s: host rings sent %llu suppressed awake %llu idle %llu; "
		       "worker waits %llu wakes %llu spurious %llu\n", mode,
		       (unsigned long long)r->host.sent,
		       (unsigned long long)r->host.suppressed_awake,
		       (unsigned long long)r->host.suppressed_idle,
		       (unsigned long long)r->worker.waits,
		       (unsigned long long)r->worker.wakes,
		       (unsigned long long)r->worker.spurious);
	ASSERT_EQ(1, r->have_kstats);
	ksft_print_msg("%s: module: worker doorbell waits %llu wakes %llu "
		       "suppressed idle %llu awake %llu spurious %llu; host "
		       "doorbell waits %llu wakes %llu spurious %llu\n", mode,
		       (unsigned long long)r->kworker.waits,
		       (unsigned long long)r->kworker.wakes,
		       (unsigned long long)r->kworker.suppressed_idle,
		       (unsigned long long)r->kworker.suppressed_awake,
		       (unsigned long long)r->kworker.spurious,
		       (unsigned long long)r->khost.waits,
		       (unsigned long long)r->khost.wakes,
		       (unsigned long long)r->khost.spurious);
	EXPECT_EQ(0, r->host.spurious);
	EXPECT_EQ(0, r->worker.spurious);
	EXPECT_EQ(r->worker.waits, r->worker.wakes);
	EXPECT_EQ(r->host.waits, r->host.wakes);
	EXPECT_EQ(0, r->kworker.spurious);
	EXPECT_EQ(0, r->khost.spurious);
}

FIXTURE(stress) {
	int unused;
};

FIXTURE_SETUP(stress)
{
	if (access("/dev/knitk", F_OK) != 0)
		SKIP(_exit(255), "%s: /dev/knitk absent: modprobe knitk first",
		     _metadata->name);
	/* Forced: a missing device must fail, not fall back to futex. */
	ASSERT_EQ(0, setenv("KNITK_BACKEND", "kmod", 1));
}

FIXTURE_TEARDOWN(stress)
{
}

/* STRESS_N messages with the worker as a thread or as a process. */
static void stress_case(struct __test_metadata *_metadata, const char *mode,
			int processes)
{
	struct stress_result r;
	int ret = stress_run(0, processes, STRESS_N, &r);

	if (ret)
		ksft_print_msg("%s: %d %s\n", mode, ret, r.why);
	ASSERT_EQ(0, ret);
	ASSERT_EQ(1, r.ok);
	stress_report(_metadata, mode, &r);
}

TEST_F_TIMEOUT(stress, threads, 280)
{
	stress_case(_metadata, "threads", 0);
}

TEST_F_TIMEOUT(stress, processes, 280)
{
	stress_case(_metadata, "processes", 1);
}

TEST_HARNESS_MAIN
