/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the libknitk kselftests share in the guest: the test tasks of
 * lib/tests/pool_tasks.h with longer sleep steps (the guest runs under
 * TCG), and their skip without the module.
 */
#ifndef KNITK_POOL_GUEST_H
#define KNITK_POOL_GUEST_H

#include <unistd.h>

#include "knitk_harness.h"

#define POOL_TASKS_SLEEP_STEP_US	500
#include "../../lib/tests/pool_tasks.h"

#define REQUIRE_KNITK() do {						\
	if (access("/dev/knitk", F_OK))					\
		SKIP(return, "/dev/knitk absent: modprobe knitk first");	\
} while (0)

#endif /* KNITK_POOL_GUEST_H */
