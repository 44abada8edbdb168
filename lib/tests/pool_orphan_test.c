// SPDX-License-Identifier: GPL-2.0
/*
 * Process workers do not outlive their host, on the futex backend, where
 * each worker watches a pidfd of its host and the hang-up of a pipe whose
 * write end only the host holds, which its exec closes (the scenarios:
 * orphan.h).
 */
#include <stdio.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "orphan.h"
#include "tap.h"

static void orphan_check(const char *fail)
{
	if (fail) {
		printf("# %s\n", fail);
		tap_case_failed = 1;
	}
}

static void kill_idle(void)
{
	orphan_check(orphan_kill_idle(KNITK_KNOT_FUTEX));
}

static void kill_busy(void)
{
	orphan_check(orphan_kill_busy(KNITK_KNOT_FUTEX));
}

static void kill_result_waiting(void)
{
	orphan_check(orphan_kill_result_waiting(KNITK_KNOT_FUTEX));
}

static void kill_loaded(void)
{
	orphan_check(orphan_kill_loaded(KNITK_KNOT_FUTEX));
}

static void return_from_main(void)
{
	orphan_check(orphan_host_leaves(KNITK_KNOT_FUTEX, "return"));
}

static void exit_without_destroy(void)
{
	orphan_check(orphan_host_leaves(KNITK_KNOT_FUTEX, "_exit"));
}

/* The host execs: its pid lives on, its workers must not. */
static void exec_without_destroy(void)
{
	orphan_check(orphan_host_replaced(KNITK_KNOT_FUTEX, "exec"));
}

static void exec_from_thread(void)
{
	orphan_check(orphan_host_replaced(KNITK_KNOT_FUTEX, "thread_exec"));
}

static void exit_from_thread(void)
{
	orphan_check(orphan_host_replaced(KNITK_KNOT_FUTEX, "thread_exit"));
}

int main(int argc, char **argv)
{
	int ret;

	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	ret = orphan_host_main(argc, argv);
	if (ret >= 0)
		return ret;
	TEST(kill_idle);
	TEST(kill_busy);
	TEST(kill_result_waiting);
	TEST(kill_loaded);
	TEST(return_from_main);
	TEST(exit_without_destroy);
	TEST(exec_without_destroy);
	TEST(exec_from_thread);
	TEST(exit_from_thread);
	return tap_exit();
}
