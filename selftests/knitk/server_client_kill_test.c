// SPDX-License-Identifier: GPL-2.0
/*
 * Whole clients of a long-lived server SIGKILLed at every step of a call
 * and restarted on the same role, on the module (the scenario:
 * lib/tests/server_kill.h).  The kernel ends each dead client's role
 * before its pidfd is readable; the server cleans the role's mailboxes
 * and hands it on.  Besides the run table's invariants and the server's
 * fds, pidfds, threads and children, the module is held to its baseline
 * with the server up and no client: the live knots and their bytes
 * (debugfs knitk/live: the pinned pages), the endpoints open in the
 * guest (/dev/knitk files in every /proc/<pid>/fd), and knitk-stat
 * --json's knots and live roles.  KNITK_SERVER_KILLS: clients (default
 * 300, as on the host; make stress's debug guest: 10,000).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_pool_guest.h"
#include "../../lib/tests/proc_count.h"
#include "../../lib/tests/server_kill.h"
#include "knitk_live.h"
#include "knitk_stat_tool.h"

/*
 * 10,000 clients on the debug kernel under TCG outlast knitk_harness.h's
 * guard; every wait of the test is bounded (SK_WAIT_S) and reports a
 * hang itself, so this guard only backs it, below vm-debug's 7200 s.
 */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT	7000

/* Open files of /dev/knitk in every process: the module's endpoints. */
static long long open_endpoints(void)
{
	DIR *proc = opendir("/proc"), *fds;
	struct dirent *p, *f;
	char path[300], link[64];
	long long n = 0;
	ssize_t r;

	if (!proc)
		return -1;
	while ((p = readdir(proc))) {
		if (p->d_name[0] < '0' || p->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/fd", p->d_name);
		fds = opendir(path);
		if (!fds)
			continue;
		while ((f = readdir(fds))) {
			r = readlinkat(dirfd(fds), f->d_name, link, sizeof(link) - 1);
			if (r > 0) {
				link[r] = '\0';
				n += !strcmp(link, "/dev/knitk");
			}
		}
		closedir(fds);
	}
	closedir(proc);
	return n;
}

static long long count_of(const char *s, const char *what)
{
	long long n = 0;

	while ((s = strstr(s, what))) {
		n++;
		s += strlen(what);
	}
	return n;
}

static int module_probe(struct sk_probe *out)
{
	static char buf[1 << 16];

	if (knitk_live_read(&out->knots, &out->bytes))
		return -1;
	out->endpoints = open_endpoints();
	if (run_stat("--json", 0, buf, sizeof(buf)))
		return -1;
	out->stat_knots = count_of(buf, "\"id\":");
	out->alive_roles = count_of(buf, "\"state\": \"alive\"");
	printf("# module: %lld knots, %lld bytes, %lld endpoints open; knitk-stat: %lld knots,"
	       " %lld roles alive\n", out->knots, out->bytes, out->endpoints, out->stat_knots,
	       out->alive_roles);
	return 0;
}

static unsigned int guest_clients(void)
{
	const char *env = getenv("KNITK_SERVER_KILLS");

	return env ? (unsigned int)strtoul(env, NULL, 0) : 300;
}

TEST(server_client_kills)
{
	struct sk_config cfg = { .knot_flags = KNITK_KNOT_KMOD, .iters = guest_clients(),
				 .probe = module_probe };
	struct sk_tally t;
	unsigned int s;

	REQUIRE_KNITK();
	ASSERT_EQ(0, sk_run(&cfg, &t));
	sk_print(&t);
	EXPECT_EQ(cfg.iters + SK_WORKERS, t.iters);
	EXPECT_EQ(0, t.failed);
	EXPECT_EQ(t.iters, t.killed + t.left);
	for (s = 0; s < NR_STEPS && cfg.iters >= NR_STEPS; s++)
		EXPECT_LT(0, t.at[s]) TH_LOG("no client stopped at %s", sk_step_name[s]);
	EXPECT_TRUE(t.settled);
	EXPECT_TRUE(t.fresh_ok);
	EXPECT_EQ(0, t.server_errors);
	EXPECT_EQ(0, t.twice);
	EXPECT_EQ(0, t.wrong);
	EXPECT_EQ(0, t.bad);
	EXPECT_EQ(0, t.mismatched);
	EXPECT_EQ(0, t.classes[SC_INVALID]);
	EXPECT_LT(0, t.classes[SC_COMPLETED]);
	EXPECT_EQ(t.joined, t.deaths_seen);
	EXPECT_EQ(t.iters, t.grants + t.waiters_gone);
	EXPECT_EQ(t.grants, t.cleanups);
	EXPECT_EQ(t.fds1, t.fds_end);
	EXPECT_EQ(0, t.pidfds_end);
	EXPECT_EQ(t.threads1, t.threads_end);
	EXPECT_FALSE(t.children_left);
	EXPECT_EQ(t.fds0, t.fds_after);
	EXPECT_EQ(t.threads0, t.threads_after);
	/* The module as it was with the server up and no client. */
	ASSERT_TRUE(t.probe_ok);
	EXPECT_EQ(t.probe1.knots, t.probe_end.knots);
	EXPECT_EQ(t.probe1.bytes, t.probe_end.bytes);
	EXPECT_EQ(t.probe1.endpoints, t.probe_end.endpoints);
	EXPECT_EQ(t.probe1.stat_knots, t.probe_end.stat_knots);
	EXPECT_EQ(t.probe1.alive_roles, t.probe_end.alive_roles);
	EXPECT_EQ(1, t.probe_end.alive_roles);
	/* And nothing once the server is gone. */
	EXPECT_EQ(0, knitk_live_wait_zero());
}

int main(int argc, char **argv)
{
	/* A client is this program, re-executed; it never returns. */
	sk_client_main(argc, argv);
	return test_harness_run(argc, argv);
}
