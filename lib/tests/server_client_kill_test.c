// SPDX-License-Identifier: GPL-2.0
/*
 * Whole clients of a long-lived server SIGKILLed at every step of a call
 * and restarted on the same role (server_kill.h), on the futex backend:
 * the server marks each death itself from a pidfd, cleans the role's
 * mailboxes and hands the role to the next client; every call ends once,
 * in the class its client's step implies; the server still serves and
 * holds no more fds, pidfds, threads or children than before.
 * argv[1]: calls of a throughput case (tests/run.sh), one client per 60,
 * from 4 to 300 clients (300 in every build: a client takes about a
 * millisecond, ten in the sanitizer builds);
 * KNITK_SERVER_KILLS sets the clients instead (make stress: 10,000).
 */
#include <stdlib.h>

#include "knitk.h"
#include "proc_count.h"
#include "server_kill.h"
#include "tap.h"

static unsigned int nr_clients = 300;

static void server_client_kills(void)
{
	struct sk_config cfg = { .knot_flags = KNITK_KNOT_FUTEX, .iters = nr_clients };
	struct sk_tally t;
	unsigned int s;
	int ret;

	ret = sk_run(&cfg, &t);
	if (ret)
		printf("# the server did not start: %s\n", strerror(-ret));
	REQUIRE(ret == 0);
	sk_print(&t);
	CHECK_EQ(t.iters, nr_clients + SK_WORKERS);
	CHECK_EQ(t.failed, 0);
	CHECK_EQ(t.killed + t.left, t.iters);
	for (s = 0; s < NR_STEPS && nr_clients >= NR_STEPS; s++)
		CHECK(t.at[s] > 0);
	CHECK(t.settled);
	CHECK(t.fresh_ok);
	CHECK_EQ(t.server_errors, 0);
	CHECK_EQ(t.twice, 0);
	CHECK_EQ(t.wrong, 0);
	CHECK_EQ(t.bad, 0);
	CHECK_EQ(t.mismatched, 0);
	CHECK_EQ(t.classes[SC_INVALID], 0);
	CHECK(t.classes[SC_COMPLETED] > 0);
	/* One death on the knot per client that joined, each cleaned once. */
	CHECK_EQ(t.deaths_seen, t.joined);
	CHECK_EQ(t.grants + t.waiters_gone, t.iters);
	CHECK_EQ(t.cleanups, t.grants);
	CHECK_EQ(t.fds_end, t.fds1);
	CHECK_EQ(t.pidfds_end, t.pidfds1);
	CHECK_EQ(t.pidfds_end, 0);
	CHECK_EQ(t.threads_end, t.threads1);
	CHECK(!t.children_left);
	CHECK_EQ(t.fds_after, t.fds0);
#ifndef __SANITIZE_THREAD__
	/* TSan's runtime starts a thread of its own with our first one. */
	CHECK_EQ(t.threads_after, t.threads0);
#endif
}

int main(int argc, char **argv)
{
	const char *env = getenv("KNITK_SERVER_KILLS");
	unsigned long n;

	/* A client is this program, re-executed; it never returns. */
	sk_client_main(argc, argv);
	if (argc > 1) {
		n = strtoul(argv[1], NULL, 0) / 60;
		nr_clients = n < 4 ? 4 : n > 300 ? 300 : (unsigned int)n;
	}
	if (env)
		nr_clients = (unsigned int)strtoul(env, NULL, 0);
	TEST(server_client_kills);
	return tap_exit();
}
