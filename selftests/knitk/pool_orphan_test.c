// SPDX-License-Identifier: GPL-2.0
/*
 * Process workers do not outlive their host, on the module, which marks a
 * killed host dead itself: idle workers leave their park with -EPIPE, a
 * busy one after its task, one waiting for room for its result gives up,
 * busy ones under load after theirs (the scenarios: lib/tests/orphan.h);
 * then the module has freed the knot.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <unistd.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_pool.h"
#include "knitk_pool_guest.h"
#include "../../lib/tests/orphan.h"
#include "knitk_live.h"

TEST(kill_idle)
{
	REQUIRE_KNITK();
	ASSERT_EQ(NULL, orphan_kill_idle(KNITK_KNOT_KMOD));
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST(kill_busy)
{
	REQUIRE_KNITK();
	ASSERT_EQ(NULL, orphan_kill_busy(KNITK_KNOT_KMOD));
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST(kill_result_waiting)
{
	REQUIRE_KNITK();
	ASSERT_EQ(NULL, orphan_kill_result_waiting(KNITK_KNOT_KMOD));
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST(kill_loaded)
{
	REQUIRE_KNITK();
	ASSERT_EQ(NULL, orphan_kill_loaded(KNITK_KNOT_KMOD));
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST(return_from_main)
{
	REQUIRE_KNITK();
	ASSERT_EQ(NULL, orphan_host_leaves(KNITK_KNOT_KMOD, "return"));
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST(exit_without_destroy)
{
	REQUIRE_KNITK();
	ASSERT_EQ(NULL, orphan_host_leaves(KNITK_KNOT_KMOD, "_exit"));
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/* The host execs (from main or a thread) or a thread calls _exit. */
TEST(exec_without_destroy)
{
	REQUIRE_KNITK();
	ASSERT_EQ(NULL, orphan_host_replaced(KNITK_KNOT_KMOD, "exec"));
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST(exec_from_thread)
{
	REQUIRE_KNITK();
	ASSERT_EQ(NULL, orphan_host_replaced(KNITK_KNOT_KMOD, "thread_exec"));
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST(exit_from_thread)
{
	REQUIRE_KNITK();
	ASSERT_EQ(NULL, orphan_host_replaced(KNITK_KNOT_KMOD, "thread_exit"));
	EXPECT_EQ(0, knitk_live_wait_zero());
}

int main(int argc, char **argv)
{
	int ret;

	/* The hosts and their workers are this program, re-run. */
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	ret = orphan_host_main(argc, argv);
	if (ret >= 0)
		return ret;
	return test_harness_run(argc, argv);
}
