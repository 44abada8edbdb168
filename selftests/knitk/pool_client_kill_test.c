// SPDX-License-Identifier: GPL-2.0
/*
 * The client killed, not its workers, on the module (the scenarios:
 * lib/tests/client_kill.h), for every pool kind: nothing outlives the
 * client, no call ran twice or got another's result, and the module has
 * freed every knot afterwards.  KNITK_CLIENT_KILLS: kills per pool kind
 * (default 40; the host's test runs 300).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_pool.h"
#include "knitk_pool_guest.h"
#include "../../lib/tests/proc_count.h"
#include "../../lib/tests/client_kill.h"
#include "knitk_live.h"

static unsigned int guest_kills(void)
{
	const char *env = getenv("KNITK_CLIENT_KILLS");

	return env ? (unsigned int)strtoul(env, NULL, 0) : 40;
}

static void guest_client_kills(struct __test_metadata *_metadata,
			       const struct client_config *cfg)
{
	struct client_tally t;
	unsigned int n = guest_kills();

	ASSERT_EQ(0, client_kill_setup());
	client_kills(cfg, KNITK_KNOT_KMOD, n, &t);
	EXPECT_EQ(n, t.iters);
	EXPECT_EQ(0, t.failed);
	EXPECT_EQ(0, t.left);
	EXPECT_EQ(0, t.twice);
	EXPECT_EQ(0, t.bad);
	EXPECT_EQ(0, t.wrong);
	EXPECT_LT(0, t.ok);
	EXPECT_TRUE(no_children());
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST(threads_private)
{
	REQUIRE_KNITK();
	guest_client_kills(_metadata, &client_configs[0]);
}

TEST(threads_stealing)
{
	REQUIRE_KNITK();
	guest_client_kills(_metadata, &client_configs[1]);
}

TEST(processes_private)
{
	REQUIRE_KNITK();
	guest_client_kills(_metadata, &client_configs[2]);
}

TEST(processes_stealing)
{
	REQUIRE_KNITK();
	guest_client_kills(_metadata, &client_configs[3]);
}

TEST(processes_private_respawn)
{
	REQUIRE_KNITK();
	guest_client_kills(_metadata, &client_configs[4]);
}

TEST(processes_stealing_respawn)
{
	REQUIRE_KNITK();
	guest_client_kills(_metadata, &client_configs[5]);
}

int main(int argc, char **argv)
{
	/* The clients' process workers are this program, re-run. */
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	return test_harness_run(argc, argv);
}
