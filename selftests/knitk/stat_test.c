// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-stat (tools/knitk-stat.c, built next to this program) against the
 * module's debugfs: a knot's geometry and endpoints (role, pid, alive or
 * dead) and its doorbell counters are listed, every knot however many;
 * the largest knot (64 doorbells) as made, its joined roles with their
 * generations and its host doorbell's counters as KNITK_IOC_STATS gives
 * them; a caller that is not root, or without debugfs mounted, is told so and
 * gets exit status 1; --prometheus gives the same values in the
 * Prometheus text format, and -w shows rates per second.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_live.h"
#include "knitk_stat_tool.h"
#include "knitk_test.h"

/* The state knitk-stat --json gives the endpoint of @pid, or "". */
static const char *state_of(const char *json, pid_t pid, char *buf, size_t cap)
{
	char key[32], *end;
	const char *at, *st;

	snprintf(key, sizeof(key), "\"pid\": %d,", pid);
	at = strstr(json, key);
	buf[0] = '\0';
	if (!at)
		return buf;
	end = strchr(at, '}');
	st = strstr(at, "\"state\": \"");
	if (!end || !st || st > end)
		return buf;
	st += strlen("\"state\": \"");
	snprintf(buf, cap, "%.*s", (int)(strchr(st, '"') - st), st);
	return buf;
}

static char out[1 << 17];

TEST(lists_endpoints_alive_then_dead)
{
	struct knot k;
	char st[16], host_key[64], go;
	int sync[2], ready[2], fd;
	pid_t child;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knot_make_host(&k));
	ASSERT_EQ(0, pipe(sync));
	ASSERT_EQ(0, pipe(ready));
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		fd = knot_endpoint(&k, KNITK_ROLE_WORKER, 0);
		go = fd >= 0 ? 'y' : 'n';
		if (write(ready[1], &go, 1) != 1)
			_exit(1);
		/* Hold the role until killed. */
		while (read(sync[0], &go, 1) < 0)
			;
		_exit(0);
	}
	ASSERT_EQ(1, read(ready[0], &go, 1));
	ASSERT_EQ('y', go);

	ASSERT_EQ(0, run_stat("--json", 0, out, sizeof(out))) TH_LOG("%s", out);
	snprintf(host_key, sizeof(host_key), "\"role\": \"host\", \"slot\": %u, \"pid\": %d,",
		 KNITK_DOORBELL_HOST, getpid());
	EXPECT_NE(NULL, strstr(out, host_key)) TH_LOG("%s", out);
	EXPECT_STREQ("alive", state_of(out, getpid(), st, sizeof(st)));
	EXPECT_STREQ("alive", state_of(out, child, st, sizeof(st))) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "\"workers\": ")) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "\"steal\": false, \"region_lanes\": 0,"))
		TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "\"doorbells\": [{\"doorbell\": 0, \"waits\": "))
		TH_LOG("%s", out);

	ASSERT_EQ(0, run_stat("-h", 0, out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "root only"));

	/* The text listing names the roles and the counters too. */
	ASSERT_EQ(0, run_stat(NULL, 0, out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "doorbell")) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "worker")) TH_LOG("%s", out);

	/* The module ends the role at the owner's exit: listed as dead. */
	ASSERT_EQ(0, kill(child, SIGKILL));
	ASSERT_EQ(child, waitpid(child, NULL, 0));
	do {
		ASSERT_EQ(0, run_stat("--json", 0, out, sizeof(out)));
		state_of(out, child, st, sizeof(st));
		if (strcmp(st, "dead"))
			usleep(1000);
	} while (strcmp(st, "dead"));
	EXPECT_STREQ("alive", state_of(out, getpid(), st, sizeof(st)));
	close(sync[0]);
	close(sync[1]);
	close(ready[0]);
	close(ready[1]);
	knot_close(&k);
}

TEST(non_root_is_told_and_fails)
{
	KNITK_REQUIRE_DEV();
	if (geteuid() != 0)
		SKIP(return, "needs root to switch to another user");
	EXPECT_EQ(1, run_stat("--json", 65534, out, sizeof(out))) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "root only")) TH_LOG("%s", out);
}

TEST(bad_interval_is_an_error)
{
	KNITK_REQUIRE_DEV();
	EXPECT_EQ(2, run_stat("-wx", 0, out, sizeof(out))) TH_LOG("%s", out);
}

/*
 * A stealing knot's region size, as the knot records it (0 asked: the
 * default for its workers), in both listings.
 */
TEST(lists_region_size)
{
	struct knitk_geometry g;
	struct knot k4, k0;
	char key[128];

	KNITK_REQUIRE_DEV();
	if (geteuid() != 0)
		SKIP(return, "knitk-stat needs root");
	knitk_geom(&g, KNITK_GEOM_STEAL, 3, 1, 64, 0, 0);
	g.region_lanes = 4;
	ASSERT_EQ(0, knot_make(&k4, &g));
	knitk_geom(&g, KNITK_GEOM_STEAL, 7, 1, 64, 0, 0);
	ASSERT_EQ(0, knot_make(&k0, &g));
	ASSERT_EQ(0, run_stat("--json", 0, out, sizeof(out))) TH_LOG("%s", out);
	snprintf(key, sizeof(key), "\"workers\": 3, \"submitters\": 1,"
		 " \"steal\": true, \"region_lanes\": 4,");
	EXPECT_NE(NULL, strstr(out, key)) TH_LOG("%s", out);
	snprintf(key, sizeof(key), "\"workers\": 7, \"submitters\": 1,"
		 " \"steal\": true, \"region_lanes\": 8,");
	EXPECT_NE(NULL, strstr(out, key)) TH_LOG("%s", out);
	ASSERT_EQ(0, run_stat(NULL, 0, out, sizeof(out)));
	EXPECT_NE(NULL, strstr(out, "3 workers, 1 submitters, stealing in regions of 4 lanes"))
		TH_LOG("%s", out);
	knot_close(&k4);
	knot_close(&k0);
}

/* "lists the module's live knots": all of them, past a thousand too. */
TEST(lists_every_knot)
{
	enum { NR = 1100 };
	struct rlimit rl = { NR + 64, NR + 64 };
	size_t cap = 64 << 20;
	struct knitk_geometry g;
	int fds[NR], i, n = 0;
	char *big, *at;

	KNITK_REQUIRE_DEV();
	if (geteuid() != 0)
		SKIP(return, "knitk-stat needs root");
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl));
	knitk_geom(&g, 0, 1, 1, 0, 0, 0);
	for (i = 0; i < NR; i++) {
		fds[i] = knitk_open();
		ASSERT_LE(0, fds[i]);
		ASSERT_EQ(0, knitk_create(fds[i], &g, NULL));
	}
	big = malloc(cap);
	ASSERT_NE(NULL, big);
	EXPECT_EQ(0, run_stat("--json", 0, big, cap));
	for (at = big; (at = strstr(at, "{\"id\": ")); at++)
		n++;
	EXPECT_LE(NR, n);
	free(big);
	for (i = 0; i < NR; i++)
		close(fds[i]);
}

/* The unsigned number after @key in @from, or ULLONG_MAX. */
static unsigned long long json_num(const char *from, const char *key)
{
	const char *at = strstr(from, key);

	return at ? strtoull(at + strlen(key), NULL, 10) : ULLONG_MAX;
}

/*
 * A knot of KNITK_MAX_WORKERS workers (64 doorbells, every row of the
 * listing), two of them joined: knitk-stat --json lists its size and
 * geometry as made, each joined role with this pid and the generation
 * its join returned, every doorbell, and the host doorbell's counters as
 * KNITK_IOC_STATS gives them; after worker 1 leaves, its state and the
 * death count follow.
 */
TEST(stat_lists_the_largest_knot_as_made)
{
	struct knitk_geometry g = {
		.nr_workers = KNITK_MAX_WORKERS, .nr_submitters = 2, .lanes = KNITK_LANES,
		.inline_bytes = 64, .arena_bytes = 4096,
	};
	struct knitk_doorbell_stats ds;
	struct knitk_endpoint *host, *w[2];
	struct knitk_layout l;
	char key[128];
	const char *knot, *bells;
	uint32_t seq;
	int gen[2], i, n;

	KNITK_REQUIRE_DEV();
	if (geteuid() != 0)
		SKIP(return, "knitk-stat needs root");
	ASSERT_EQ(0, knitk_live_wait_zero());
	ASSERT_EQ(0, knitk_endpoint_create(&g, KNITK_KNOT_KMOD, &host));
	ASSERT_EQ(1, knitk_endpoint_join(host, KNITK_ROLE_HOST, 0));
	ASSERT_EQ(0, knitk_endpoint_layout(host, &l, NULL));
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w[i]));
		gen[i] = knitk_endpoint_join(w[i], KNITK_ROLE_WORKER, 61U + (unsigned int)i);
		ASSERT_LE(1, gen[i]);
	}
	/* Counters that moved: a timed-out wait of the host. */
	ASSERT_EQ(-ETIMEDOUT, knitk_doorbell_park(host, knitk_now_ns() + KNITK_MS));
	ASSERT_EQ(0, knitk_endpoint_doorbell_stats(host, KNITK_DOORBELL_HOST, &ds, sizeof(ds)));
	ASSERT_LE(1, ds.timeouts);

	ASSERT_EQ(0, run_stat("--json", 0, out, sizeof(out))) TH_LOG("%s", out);
	knot = strstr(out, "{\"id\": ");
	ASSERT_NE(NULL, knot) TH_LOG("%s", out);
	EXPECT_EQ(NULL, strstr(knot + 1, "{\"id\": ")) TH_LOG("one knot only: %s", out);
	EXPECT_EQ(l.size, json_num(knot, "\"size\": "));
	EXPECT_EQ(KNITK_MAX_WORKERS, json_num(knot, "\"workers\": "));
	EXPECT_EQ(2, json_num(knot, "\"submitters\": "));
	EXPECT_EQ(0, json_num(knot, "\"death_seq\": "));
	EXPECT_EQ((1ULL << KNITK_DOORBELL_HOST) | (3ULL << 61), json_num(knot, "\"live\": "));
	snprintf(key, sizeof(key), "{\"role\": \"host\", \"slot\": %u, \"pid\": %d,"
		 " \"generation\": 1, \"state\": \"alive\"}", KNITK_DOORBELL_HOST, getpid());
	EXPECT_NE(NULL, strstr(knot, key)) TH_LOG("%s not in %s", key, knot);
	for (i = 0; i < 2; i++) {
		snprintf(key, sizeof(key), "{\"role\": \"worker\", \"slot\": %d, \"pid\": %d,"
			 " \"generation\": %d, \"state\": \"alive\"}", 61 + i, getpid(), gen[i]);
		EXPECT_NE(NULL, strstr(knot, key)) TH_LOG("%s not in %s", key, knot);
	}
	bells = strstr(knot, "\"doorbells\": [");
	ASSERT_NE(NULL, bells);
	for (i = 0, n = 0; i < KNITK_NR_DOORBELLS; i++) {
		snprintf(key, sizeof(key), "{\"doorbell\": %d, ", i);
		n += strstr(bells, key) != NULL;
	}
	EXPECT_EQ(KNITK_NR_DOORBELLS, n);
	snprintf(key, sizeof(key), "{\"doorbell\": %u, ", KNITK_DOORBELL_HOST);
	bells = strstr(bells, key);
	ASSERT_NE(NULL, bells);
	EXPECT_EQ(ds.waits, json_num(bells, "\"waits\": "));
	EXPECT_EQ(ds.timeouts, json_num(bells, "\"timeouts\": "));
	EXPECT_EQ(ds.wakes, json_num(bells, "\"wakes\": "));
	EXPECT_EQ(ds.spurious, json_num(bells, "\"spurious\": "));

	/* Worker 62 leaves: not alive, counted once, worker 61 unchanged. */
	knitk_endpoint_destroy(w[1]);
	ASSERT_EQ(0, knitk_endpoint_deaths(host, &seq, NULL));
	EXPECT_EQ(1, seq);
	ASSERT_EQ(0, run_stat("--json", 0, out, sizeof(out)));
	knot = strstr(out, "{\"id\": ");
	ASSERT_NE(NULL, knot);
	EXPECT_EQ(1, json_num(knot, "\"death_seq\": "));
	EXPECT_EQ((1ULL << KNITK_DOORBELL_HOST) | (1ULL << 61), json_num(knot, "\"live\": "));
	snprintf(key, sizeof(key), "{\"role\": \"worker\", \"slot\": 62, \"pid\": %d,"
		 " \"generation\": %d, \"state\": \"alive\"}", getpid(), gen[1]);
	EXPECT_EQ(NULL, strstr(knot, key)) TH_LOG("%s", knot);
	snprintf(key, sizeof(key), "{\"role\": \"worker\", \"slot\": 61, \"pid\": %d,"
		 " \"generation\": %d, \"state\": \"alive\"}", getpid(), gen[0]);
	EXPECT_NE(NULL, strstr(knot, key)) TH_LOG("%s", knot);
	knitk_endpoint_destroy(w[0]);
	knitk_endpoint_destroy(host);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/* Without debugfs mounted (a mount namespace of its own): told, exit 1. */
TEST(no_debugfs_is_told_and_fails)
{
	int status;
	pid_t pid;

	KNITK_REQUIRE_DEV();
	if (geteuid() != 0)
		SKIP(return, "needs root for a mount namespace");
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (unshare(CLONE_NEWNS) ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    umount2("/sys/kernel/debug", MNT_DETACH))
			_exit(100);
		_exit(run_stat("--json", 0, out, sizeof(out)) == 1 &&
		      strstr(out, "debugfs is not mounted") ? 0 : 101);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

/*
 * The Prometheus text format: every line a "# HELP", a "# TYPE" (gauge or
 * counter) right after it, or a sample "name{labels} value" of the family
 * last announced; no family announced twice.  Returns the bad line, or
 * NULL.
 */
static const char *prom_bad_line(char *text)
{
	static char names[256][64];
	char *line, *save, fam[64] = "", name[64], type[16];
	int n = 0, i, typed = 1;

	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "# HELP %63s", name) == 1) {
			for (i = 0; i < n; i++)
				if (!strcmp(names[i], name))
					return line;
			if (!typed || n == 256)
				return line;
			snprintf(names[n++], sizeof(names[0]), "%s", name);
			snprintf(fam, sizeof(fam), "%s", name);
			typed = 0;
		} else if (sscanf(line, "# TYPE %63s %15s", name, type) == 2) {
			if (typed || strcmp(name, fam) ||
			    (strcmp(type, "gauge") && strcmp(type, "counter")))
				return line;
			typed = 1;
		} else {
			size_t len = strcspn(line, "{ ");
			const char *v = strrchr(line, ' ');

			if (!typed || len != strlen(fam) || strncmp(line, fam, len) ||
			    !v || !v[1] || strspn(v + 1, "0123456789") != strlen(v + 1))
				return line;
		}
	}
	return typed ? NULL : "(a family without its # TYPE)";
}

/* The text of the JSON object of knot @id in @json (from "{\"id\": @id,"). */
static const char *knot_json(const char *json, unsigned long long id)
{
	char key[48];

	snprintf(key, sizeof(key), "{\"id\": %llu,", id);
	return strstr(json, key);
}

static char prom[1 << 16];

/*
 * --prometheus against --json on a knot whose host waited (its counters
 * moved): the format holds, and the knot's size, its host endpoint and
 * every counter of its host doorbell carry the same values.
 */
TEST(prometheus_matches_json)
{
	char key[256], name[48], *at, *end;
	unsigned long long id = 0, v, total = 0;
	const char *bad, *kj;
	struct knot k;
	int i, fields = 0;

	KNITK_REQUIRE_DEV();
	if (geteuid() != 0)
		SKIP(return, "knitk-stat needs root");
	ASSERT_EQ(0, knot_make_host(&k));
	/* A seq that is not the doorbell's: each wait is counted, then fails. */
	for (i = 0; i < 3; i++)
		EXPECT_GT(0, knitk_wait(k.fd, 0x5eed0000U + i, 1));
	ASSERT_EQ(0, run_stat("--json", 0, out, sizeof(out))) TH_LOG("%s", out);
	ASSERT_EQ(0, run_stat("--prometheus", 0, prom, sizeof(prom))) TH_LOG("%s", prom);
	/* Our knot: the object that lists us as its host. */
	snprintf(key, sizeof(key), "\"role\": \"host\", \"slot\": %u, \"pid\": %d,",
		 KNITK_DOORBELL_HOST, getpid());
	at = strstr(out, key);
	ASSERT_NE(NULL, at) TH_LOG("%s", out);
	for (end = out; (end = strstr(end, "{\"id\": ")) && end < at; end++)
		id = strtoull(end + strlen("{\"id\": "), NULL, 10);
	kj = knot_json(out, id);
	ASSERT_NE(NULL, kj);
	at = strstr(kj, "\"size\": ");
	ASSERT_NE(NULL, at);
	snprintf(key, sizeof(key), "\nknitk_knot_bytes{knot=\"%llu\"} %llu\n", id,
		 strtoull(at + strlen("\"size\": "), NULL, 10));
	EXPECT_NE(NULL, strstr(prom, key)) TH_LOG("%s not in %s", key, prom);
	snprintf(key, sizeof(key), "\nknitk_endpoint_info{knot=\"%llu\",role=\"host\","
		 "slot=\"%u\",pid=\"%d\",", id, KNITK_DOORBELL_HOST, getpid());
	EXPECT_NE(NULL, strstr(prom, key)) TH_LOG("%s not in %s", key, prom);
	/* Each counter of the host doorbell: {"doorbell": 63, "name": v, ...}. */
	snprintf(key, sizeof(key), "{\"doorbell\": %u", KNITK_DOORBELL_HOST);
	at = strstr(kj, key);
	ASSERT_NE(NULL, at);
	end = strchr(at, '}');
	ASSERT_NE(NULL, end);
	for (at = strchr(at, ','); at && at < end; at = strchr(at + 1, ',')) {
		if (sscanf(at, ", \"%47[a-z_0-9]\": %llu", name, &v) != 2)
			break;
		snprintf(key, sizeof(key), "\nknitk_doorbell_%s_total{knot=\"%llu\","
			 "role=\"host\",doorbell=\"%u\"} %llu\n", name, id,
			 KNITK_DOORBELL_HOST, v);
		EXPECT_NE(NULL, strstr(prom, key)) TH_LOG("%s not in %s", key, prom);
		total += v;
		fields++;
	}
	EXPECT_LE(4, fields);
	/* Our waits moved them: the values compared are not all 0. */
	EXPECT_LE(3, total);
	bad = prom_bad_line(prom);
	EXPECT_EQ(NULL, bad) TH_LOG("bad line: %s", bad);
	knot_close(&k);
}

/*
 * -w with -c: the listings after the first give rates per second; an idle
 * knot's are all 0.
 */
TEST(watch_shows_rates)
{
	static const char *const argv[] = { "-w", "1", "-c", "2", NULL };
	char *at, *line;
	struct knot k;

	KNITK_REQUIRE_DEV();
	if (geteuid() != 0)
		SKIP(return, "knitk-stat needs root");
	ASSERT_EQ(0, knot_make_host(&k));
	ASSERT_EQ(0, run_statv(argv, 0, out, sizeof(out))) TH_LOG("%s", out);
	/* Totals first, then rates: one "per sec" header per knot after. */
	at = strstr(out, "per sec");
	ASSERT_NE(NULL, at) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "  doorbell ")) TH_LOG("%s", out);
	EXPECT_LT(strstr(out, "  doorbell "), at);
	/* Our idle knot's host row, in the rates: "host" then only 0.0s. */
	line = strstr(at, "\n  host ");
	ASSERT_NE(NULL, line) TH_LOG("%s", out);
	line += strlen("\n  host ");
	while (*line == ' ' || *line == '0' || *line == '.')
		line++;
	EXPECT_EQ('\n', *line) TH_LOG("%s", out);
	knot_close(&k);
}

TEST_HARNESS_MAIN
