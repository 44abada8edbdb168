// SPDX-License-Identifier: GPL-2.0
/*
 * The client killed, not its workers (client_kill.h), for every pool kind
 * on the futex backend: thread and process workers, private lanes and
 * stealing, process workers with and without KNITK_POOL_RESPAWN.  Nothing
 * outlives the client, no call ran twice or got another's result, and
 * none of our fds and no file in /dev/shm is left.
 * argv[1]: calls of a throughput case (tests/run.sh), 3,333 per kill,
 * from 4 to 300 kills per pool kind; KNITK_CLIENT_KILLS sets the kills
 * instead (make stress: 10,000).
 */
#include <stdlib.h>

#include "knitk_pool.h"
#include "pool_tasks.h"
#include "proc_count.h"
#include "client_kill.h"
#include "tap.h"

static unsigned int nr_kills = 300;

static void kills(const struct client_config *cfg)
{
	int fds = count_fds(false), shm = client_count_shm();
	struct client_tally t;

	client_kills(cfg, 0, nr_kills, &t);
	CHECK_EQ(t.iters, nr_kills);
	CHECK_EQ(t.failed, 0);
	CHECK_EQ(t.left, 0);
	CHECK_EQ(t.twice, 0);
	CHECK_EQ(t.bad, 0);
	CHECK_EQ(t.wrong, 0);
	CHECK(t.ok > 0);
	CHECK_EQ(count_fds(false), fds);
	CHECK_EQ(client_count_shm(), shm);
	CHECK(no_children());
}

static void threads_private(void) { kills(&client_configs[0]); }
static void threads_stealing(void) { kills(&client_configs[1]); }
static void processes_private(void) { kills(&client_configs[2]); }
static void processes_stealing(void) { kills(&client_configs[3]); }
static void processes_private_respawn(void) { kills(&client_configs[4]); }
static void processes_stealing_respawn(void) { kills(&client_configs[5]); }

int main(int argc, char **argv)
{
	const char *env = getenv("KNITK_CLIENT_KILLS");
	unsigned long n;
	int ret;

	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	if (argc > 1) {
		n = strtoul(argv[1], NULL, 0) / 3333;
		nr_kills = n < 4 ? 4 : n > 300 ? 300 : (unsigned int)n;
	}
	if (env)
		nr_kills = (unsigned int)strtoul(env, NULL, 0);
	ret = client_kill_setup();
	if (ret) {
		printf("not ok - setup: %s\n", strerror(-ret));
		return 1;
	}
	TEST(threads_private);
	TEST(threads_stealing);
	TEST(processes_private);
	TEST(processes_stealing);
	TEST(processes_private_respawn);
	TEST(processes_stealing_respawn);
	return tap_exit();
}
