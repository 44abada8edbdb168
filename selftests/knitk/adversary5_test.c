// SPDX-License-Identifier: GPL-2.0
/*
 * Adversarial tests of libknitk on the module, written from the public
 * headers and man pages alone: knitk_endpoint_doorbell_stats at sizes
 * past any header; knitk-stat's listing of the largest knot against what
 * the test made and what KNITK_IOC_STATS reports; the close-on-exec flag
 * of every fd a pool opens; a pool create that fails leaves no knot, fd
 * or child; a stopped process worker is not dead; SIGUSR1 (no
 * SA_RESTART) landing in a wait forever.
 * Small counts: the guest runs under TCG.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "knitk_live.h"
#include "knitk_pool_guest.h"
#include "knitk_stat_tool.h"
#include "../../lib/tests/proc_count.h"

#define HOST	KNITK_DOORBELL_HOST

static struct knitk_endpoint *host_of(struct __test_metadata *_metadata,
				      unsigned int workers)
{
	struct knitk_geometry g = {
		.nr_workers = workers, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64, .arena_bytes = 4096,
	};
	struct knitk_endpoint *ep = NULL;

	EXPECT_EQ(0, knitk_endpoint_create(&g, KNITK_KNOT_KMOD, &ep));
	if (ep)
		EXPECT_EQ(1, knitk_endpoint_join(ep, KNITK_ROLE_HOST, 0));
	return ep;
}

/*
 * The size is sizeof the caller's struct: a size no header can have
 * (past KNITK_SIZED_MAX, as for the sized structs) is refused, never
 * taken as a buffer that big; the largest legal one is filled and zeroed.
 */
TEST(doorbell_stats_sizes_past_any_header)
{
	static unsigned char buf[KNITK_SIZED_MAX + 64];
	struct knitk_endpoint *ep;
	size_t i;

	REQUIRE_KNITK();
	ep = host_of(_metadata, 2);
	ASSERT_NE(NULL, ep);
	memset(buf, 0xa5, sizeof(buf));
	EXPECT_EQ(-E2BIG, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf,
							KNITK_SIZED_MAX + 1));
	EXPECT_EQ(-E2BIG, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf, SIZE_MAX));
	EXPECT_EQ(-E2BIG, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf,
							(size_t)UINT32_MAX + 1));
	for (i = 0; i < sizeof(buf); i++)
		if (buf[i] != 0xa5)
			break;
	EXPECT_EQ(sizeof(buf), i);
	EXPECT_EQ(0, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf, KNITK_SIZED_MAX));
	for (i = sizeof(struct knitk_doorbell_stats); i < KNITK_SIZED_MAX; i++)
		if (buf[i])
			break;
	EXPECT_EQ(KNITK_SIZED_MAX, i);
	EXPECT_EQ(0xa5, buf[KNITK_SIZED_MAX]);
	/* Doorbells beyond the geometry, or no doorbell at all. */
	EXPECT_EQ(-EINVAL, knitk_endpoint_doorbell_stats(ep, 2, (void *)buf, 88));
	EXPECT_EQ(-EINVAL, knitk_endpoint_doorbell_stats(ep, 64, (void *)buf, 88));
	knitk_endpoint_destroy(ep);
}

static char out[1 << 17];

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

	REQUIRE_KNITK();
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
	ASSERT_EQ(-ETIMEDOUT, knitk_doorbell_park(host, after_ms(1)));
	ASSERT_EQ(0, knitk_endpoint_doorbell_stats(host, HOST, &ds, sizeof(ds)));
	ASSERT_LE(1, ds.timeouts);

	ASSERT_EQ(0, run_stat("--json", 0, out, sizeof(out))) TH_LOG("%s", out);
	knot = strstr(out, "{\"id\": ");
	ASSERT_NE(NULL, knot) TH_LOG("%s", out);
	EXPECT_EQ(NULL, strstr(knot + 1, "{\"id\": ")) TH_LOG("one knot only: %s", out);
	EXPECT_EQ(l.size, json_num(knot, "\"size\": "));
	EXPECT_EQ(KNITK_MAX_WORKERS, json_num(knot, "\"workers\": "));
	EXPECT_EQ(2, json_num(knot, "\"submitters\": "));
	EXPECT_EQ(0, json_num(knot, "\"death_seq\": "));
	EXPECT_EQ((1ULL << HOST) | (3ULL << 61), json_num(knot, "\"live\": "));
	snprintf(key, sizeof(key), "{\"role\": \"host\", \"slot\": %u, \"pid\": %d,"
		 " \"generation\": 1, \"state\": \"alive\"}", HOST, getpid());
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
	snprintf(key, sizeof(key), "{\"doorbell\": %u, ", HOST);
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
	EXPECT_EQ((1ULL << HOST) | (1ULL << 61), json_num(knot, "\"live\": "));
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

static int kmod_pool(unsigned int kind, unsigned int workers, struct knitk_pool **pool)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind,
				     .nr_workers = workers, .knot_flags = KNITK_KNOT_KMOD };

	return knitk_pool_create(&o, &test_tasks, pool);
}

/*
 * Every fd a pool opens (endpoints on /dev/knitk, pidfds, the event fd)
 * is close-on-exec: a helper forked and exec'd while the pool runs holds
 * no endpoint that would keep the knot or a role alive.
 */
TEST(pool_fds_are_cloexec)
{
	static const unsigned int kinds[] = { KNITK_WORKER_THREADS, KNITK_WORKER_PROCESSES };
	unsigned int k;

	REQUIRE_KNITK();
	for (k = 0; k < 2; k++) {
		struct knitk_pool *pool;
		char seen[1024] = { 0 };
		unsigned int leaked = 0;
		struct dirent *e;
		DIR *dir;
		int fd;

		dir = opendir("/proc/self/fd");
		ASSERT_NE(NULL, dir);
		while ((e = readdir(dir)))
			if (e->d_name[0] != '.' && atoi(e->d_name) < 1024)
				seen[atoi(e->d_name)] = 1;
		closedir(dir);
		ASSERT_EQ(0, kmod_pool(kinds[k], 2, &pool));
		if (kinds[k] == KNITK_WORKER_THREADS)
			ASSERT_LE(0, knitk_pool_event_fd(pool));
		for (fd = 0; fd < 1024; fd++) {
			int fl = fcntl(fd, F_GETFD);

			if (fl < 0 || seen[fd])
				continue;
			if (!(fl & FD_CLOEXEC)) {
				TH_LOG("fd %d of the pool is not close-on-exec", fd);
				leaked++;
			}
		}
		EXPECT_EQ(0, leaked);
		knitk_pool_destroy(pool);
	}
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/* A pool whose process workers exit before joining: no knot, fd or child left. */
TEST(failed_pool_create_leaves_nothing)
{
	static char *const no_args[] = { NULL };
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = KNITK_WORKER_PROCESSES,
				     .nr_workers = 2, .knot_flags = KNITK_KNOT_KMOD,
				     .worker_path = "/bin/true", .worker_argv = no_args };
	struct knitk_pool *pool = NULL;
	int fds = count_fds(false), i;

	REQUIRE_KNITK();
	for (i = 0; i < 3; i++)
		EXPECT_EQ(-ECHILD, knitk_pool_create(&o, &test_tasks, &pool));
	o.worker_path = "/nonexistent/knitk-worker";
	EXPECT_GT(0, knitk_pool_create(&o, &test_tasks, &pool));
	o.worker_path = NULL;
	o.nr_workers = KNITK_MAX_WORKERS + 1;
	EXPECT_EQ(-EINVAL, knitk_pool_create(&o, &test_tasks, &pool));
	EXPECT_EQ(NULL, pool);
	EXPECT_EQ(fds, count_fds(false));
	EXPECT_EQ(-1, waitpid(-1, NULL, WNOHANG));
	EXPECT_EQ(ECHILD, errno);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/*
 * A process worker stopped (SIGSTOP) with a call pinned to it: the call
 * stays in progress while the other worker serves calls, the stopped
 * worker is not dead, and after SIGCONT its call completes by content.
 */
TEST(stopped_worker_is_not_dead)
{
	struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint64_t x = 7, y;
	siginfo_t si;
	size_t len;
	unsigned int i;
	pid_t pid;

	REQUIRE_KNITK();
	ASSERT_EQ(0, kmod_pool(KNITK_WORKER_PROCESSES, 2, &pool));
	ASSERT_EQ(0, knitk_pool_worker_info(pool, 0, &wi));
	pid = wi.pid;
	ASSERT_LT(0, pid);
	ASSERT_EQ(0, kill(pid, SIGSTOP));
	memset(&si, 0, sizeof(si));
	ASSERT_EQ(0, waitid(P_PID, (id_t)pid, &si, WSTOPPED | WNOWAIT));
	ASSERT_EQ(CLD_STOPPED, si.si_code);
	ASSERT_EQ(0, knitk_pool_submit(pool, T_MIX, &x, 8, &co, &c));
	co.worker = 1;
	for (i = 0; i < 10; i++) {
		uint64_t v = i;

		EXPECT_EQ(0, knitk_pool_call(pool, T_MIX, &v, 8, &co, &y, 8, &len));
		EXPECT_EQ(mix64(v), y);
	}
	EXPECT_EQ(-EINPROGRESS, knitk_call_wait(c, 0));
	ASSERT_EQ(0, knitk_pool_worker_info(pool, 0, &wi));
	EXPECT_EQ(1, wi.alive);
	EXPECT_EQ(pid, wi.pid);
	ASSERT_EQ(0, kill(pid, SIGCONT));
	EXPECT_EQ(0, knitk_call_wait(c, KNITK_WAIT_FOREVER));
	EXPECT_TRUE(mix_result_ok(c, x));
	knitk_call_release(c);
	ASSERT_EQ(0, knitk_pool_stats(pool, &st));
	EXPECT_EQ(0, st.deaths);
	EXPECT_EQ(0, st.ownerdead);
	knitk_pool_destroy(pool);
}

static _Atomic unsigned long usr1_seen;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&usr1_seen, 1);
}

struct waiter {
	struct knitk_call *call;
	_Atomic int stage;	/* 1: about to wait, 2: returned */
	_Atomic pid_t tid;
	int ret;
};

static void *wait_main(void *arg)
{
	struct waiter *w = arg;

	atomic_store(&w->tid, gettid());
	atomic_store(&w->stage, 1);
	w->ret = knitk_call_wait(w->call, KNITK_WAIT_FOREVER);
	atomic_store(&w->stage, 2);
	return NULL;
}

/*
 * knitk_call_wait(KNITK_WAIT_FOREVER) on a call held in its task, under
 * SIGUSR1 without SA_RESTART: it returns only with the call's status.
 */
TEST(signals_in_call_wait)
{
	struct sigaction sa = { .sa_handler = on_usr1 }, old;
	struct waiter w = { 0 };
	struct knitk_pool *pool;
	unsigned long before;
	struct gate g;
	pthread_t t;

	REQUIRE_KNITK();
	ASSERT_EQ(0, gate_open(&g));
	g.arg.n = 3;
	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, &old));
	ASSERT_EQ(0, kmod_pool(KNITK_WORKER_THREADS, 1, &pool));
	ASSERT_EQ(0, knitk_pool_submit(pool, T_GATE, &g.arg, sizeof(g.arg), NULL, &w.call));
	ASSERT_EQ(0, gate_wait(&g, 'r'));
	ASSERT_EQ(0, pthread_create(&t, NULL, wait_main, &w));
	while (atomic_load(&w.stage) < 1)
		sched_yield();
	before = atomic_load(&usr1_seen);
	while (atomic_load(&usr1_seen) < before + 20 && atomic_load(&w.stage) < 2)
		ASSERT_EQ(0, syscall(SYS_tgkill, getpid(), atomic_load(&w.tid), SIGUSR1));
	EXPECT_GT(2, atomic_load(&w.stage));
	EXPECT_EQ(-EINPROGRESS, knitk_call_status(w.call));
	ASSERT_EQ(0, gate_release(&g));
	pthread_join(t, NULL);
	EXPECT_EQ(3, w.ret);
	knitk_call_release(w.call);
	knitk_pool_destroy(pool);
	sigaction(SIGUSR1, &old, NULL);
	gate_close(&g);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	return test_harness_run(argc, argv);
}
