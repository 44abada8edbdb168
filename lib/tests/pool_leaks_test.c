// SPDX-License-Identifier: GPL-2.0
/*
 * A pool leaves nothing behind: failed creates and a create/destroy loop
 * leak no fd, mapping, thread or child; its fds are close-on-exec; a
 * refused submit takes no room; a pool at the limits of its options works.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

/*
 * Mappings of knots (the futex backend's memfd "knitk"): thread stacks
 * and malloc arenas that glibc keeps for reuse are not the library's.
 */
static int mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "/memfd:knitk ") != NULL;
	fclose(f);
	return n;
}

/* Children of this process, zombies included (it is a subreaper). */
static int children(void)
{
	char path[64], buf[4096];
	ssize_t r;
	int fd, n = 0;
	char *p;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)gettid());
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = '\0';
	for (p = strtok(buf, " \n"); p; p = strtok(NULL, " \n"))
		n++;
	return n;
}

/* What a pool may leave behind in the process: fds, knot mappings, threads, children. */
struct held {
	int fds, maps, thr, kids;
};

static struct held held_now(void)
{
	return (struct held){ count_fds(false), mappings(), threads(), children() };
}

/* Nothing is held beyond @before. */
static void check_held(const struct held *before)
{
	CHECK_EQ(count_fds(false), before->fds);
	CHECK_EQ(mappings(), before->maps);
	CHECK_EQ(threads(), before->thr);
	CHECK_EQ(children(), before->kids);
}

/*
 * Options a pool refuses (-EINVAL, -E2BIG) and options it cannot carry
 * out (a worker binary that does not exist): each leaves no fd, mapping,
 * thread or child behind.
 */
static void pool_create_failures_leak_nothing(void)
{
	static char *const argv_none[] = { NULL };
	struct knitk_task_table tbl = test_tasks;
	struct knitk_pool_opts o;
	struct knitk_pool *pool = NULL;
	unsigned char big[KNITK_SIZED_MAX + 8];
	struct held before = held_now();
	unsigned int round;

	for (round = 0; round < 3; round++) {
		memset(&o, 0, sizeof(o));
		o.nr_workers = KNITK_MAX_WORKERS + 1;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.nr_workers = UINT_MAX;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.nr_submitters = KNITK_MAX_SUBMITTERS + 1;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.inline_bytes = 65;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.arena_bytes = 4097;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.kind = 3;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.flags = 1U << 5;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.dispatch = 2;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.dispatch = KNITK_POOL_DISPATCH_STEAL;
		o.nr_workers = 4;
		o.steal_region = 16;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.knot_flags = 1U << 4;
		o.size = sizeof(o);
		CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.nr_workers = 1;
		o.size = KNITK_POOL_OPTS_SIZE_VER0 - 1;
		CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
		memset(big, 0, sizeof(big));
		memcpy(big, &o, sizeof(o));
		((struct knitk_pool_opts *)(void *)big)->size = KNITK_SIZED_MAX + 1;
		CHECK_EQ(knitk_pool_create((void *)big, &test_tasks, &pool), -E2BIG);
		((struct knitk_pool_opts *)(void *)big)->size = KNITK_SIZED_MAX;
		big[sizeof(o)] = 1;
		CHECK_EQ(knitk_pool_create((void *)big, &test_tasks, &pool), -E2BIG);
		memset(&o, 0, sizeof(o));
		o.nr_workers = 1;
		o.size = sizeof(o);
		o.knot_flags = KNITK_KNOT_FUTEX;
		tbl.reserved = 1;
		CHECK_EQ(knitk_pool_create(&o, &tbl, &pool), -EINVAL);
		tbl.reserved = 0;
		tbl.nr_tasks = 0;
		CHECK_EQ(knitk_pool_create(&o, &tbl, &pool), -EINVAL);
		tbl.nr_tasks = T_NR;
		tbl.tasks = NULL;
		CHECK_EQ(knitk_pool_create(&o, &tbl, &pool), -EINVAL);
		tbl.tasks = test_tasks.tasks;
		CHECK_EQ(knitk_pool_create(&o, NULL, &pool), -EINVAL);
		CHECK_EQ(knitk_pool_create(&o, &test_tasks, NULL), -EINVAL);

		/* Process workers from a binary that is not there. */
		memset(&o, 0, sizeof(o));
		o.kind = KNITK_WORKER_PROCESSES;
		o.nr_workers = 2;
		o.worker_path = "/nonexistent/knitk-worker";
		o.worker_argv = argv_none;
		CHECK(opts_pool(&o, &pool) < 0);
		/* A binary that exits without joining. */
		o.worker_path = "/bin/true";
		CHECK_EQ(opts_pool(&o, &pool), -ECHILD);
	}
	CHECK(pool == NULL);
	check_held(&before);
}

/*
 * Pools made, used and destroyed in a loop, of every kind and dispatch:
 * the fds, mappings, threads and children of the process are as before.
 */
static void create_destroy_loop(void)
{
	static const unsigned int kinds[] = { KNITK_WORKER_THREADS, KNITK_WORKER_PROCESSES };
	static const unsigned int modes[] = { KNITK_POOL_DISPATCH_PRIVATE,
					      KNITK_POOL_DISPATCH_STEAL };
	struct held before = held_now();
	unsigned int k, d, round;

	for (k = 0; k < 2; k++)
		for (d = 0; d < 2; d++)
			for (round = 0; round < 8; round++) {
				struct knitk_pool_opts o = {
					.kind = kinds[k], .nr_workers = 2, .dispatch = modes[d],
					.arena_bytes = ARENA,
				};
				struct knitk_pool *pool;
				uint64_t x = round, y;
				size_t len;

				REQUIRE(opts_pool(&o, &pool) == 0);
				/* The count sees the pool's knot. */
				CHECK(mappings() > before.maps);
				CHECK_EQ(knitk_pool_call(pool, T_MIX, &x, 8, NULL, &y, 8, &len), 0);
				CHECK(len == 8 && y == mix64(x));
				if (round & 1)
					CHECK(knitk_pool_event_fd(pool) >= 0 ||
					      kinds[k] == KNITK_WORKER_PROCESSES);
				if (round & 2)
					CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
				knitk_pool_destroy(pool);
			}
	check_held(&before);
}

/*
 * Every fd a pool opens is close-on-exec: a helper the program forks and
 * execs while the pool runs inherits none of them (it would keep the knot
 * alive, or, holding a pidfd or the event fd, outlive what they name).
 */
static void pool_fds_are_cloexec(void)
{
	static const unsigned int kinds[] = { KNITK_WORKER_THREADS, KNITK_WORKER_PROCESSES };
	unsigned int k;

	for (k = 0; k < 2; k++) {
		struct knitk_pool_opts o = { .kind = kinds[k], .nr_workers = 2,
					     .arena_bytes = ARENA };
		struct knitk_pool *pool;
		char seen[1024] = { 0 };
		DIR *dir;
		struct dirent *e;
		unsigned int leaked = 0;
		int fd;

		dir = opendir("/proc/self/fd");
		REQUIRE(dir);
		while ((e = readdir(dir)))
			if (e->d_name[0] != '.' && atoi(e->d_name) < 1024)
				seen[atoi(e->d_name)] = 1;
		closedir(dir);
		REQUIRE(opts_pool(&o, &pool) == 0);
		if (kinds[k] == KNITK_WORKER_THREADS)
			REQUIRE(knitk_pool_event_fd(pool) >= 0);
		for (fd = 0; fd < 1024; fd++) {
			int fl = fcntl(fd, F_GETFD);

			if (fl < 0 || seen[fd])
				continue;
			if (!(fl & FD_CLOEXEC)) {
				printf("# fd %d of the pool is not close-on-exec\n", fd);
				leaked++;
			}
		}
		CHECK_EQ(leaked, 0);
		knitk_pool_destroy(pool);
	}
}

/* Reap until @n calls are back, each checked by content and released. */
static unsigned int reap_n(struct knitk_pool *pool, int efd, unsigned int n,
			   uint64_t *bad)
{
	struct knitk_call *out[16];
	unsigned int got = 0;
	int r, i;

	while (got < n) {
		struct pollfd p = { .fd = efd, .events = POLLIN };

		r = knitk_pool_reap(pool, out, 16);
		if (r < 0)
			return got;
		for (i = 0; i < r; i++) {
			int st = knitk_call_status(out[i]);

			if (st < 0)
				(*bad)++;
			knitk_call_release(out[i]);
		}
		got += (unsigned int)r;
		if (!r && poll(&p, 1, -1) < 0)
			return got;
	}
	return got;
}

/*
 * With the only worker held in a task (T_GATE), calls of @len bytes are
 * submitted in event mode until -EAGAIN: how many fit.  Then the gate is
 * released and everything reaped.
 */
static int room_for(struct knitk_pool *pool, int efd, struct gate *g, size_t len,
		    uint64_t *bad)
{
	static unsigned char buf[ARENA];
	struct knitk_call *c;
	int n = 0, ret;

	memset(buf, 7, len);
	if (knitk_pool_submit(pool, T_GATE, &g->arg, sizeof(g->arg), NULL, &c) ||
	    gate_wait(g, 'r'))
		return -1;
	/* The gated call's handle comes back through reap too. */
	while ((ret = knitk_pool_submit(pool, T_ECHO, buf, len, NULL, &c)) == 0)
		n++;
	if (ret != -EAGAIN || gate_release(g) || gate_wait(g, 'd'))
		return -1;
	if (reap_n(pool, efd, (unsigned int)n + 1, bad) != (unsigned int)n + 1)
		return -1;
	return n;
}

/*
 * Submits the pool refuses (too big, unknown function, bad options,
 * a worker it has not, a bad entry in a batch) take no lane, no arena
 * room and no handle: with the worker held, as many calls fit after them
 * as before, small and as large as a quarter of the arena.
 */
static void refused_submits_take_no_room(unsigned int dispatch)
{
	struct knitk_pool_opts o = { .nr_workers = 1, .arena_bytes = ARENA,
				     .dispatch = dispatch };
	struct knitk_call_opts bad_res = { .size = sizeof(bad_res), .reserved = 1 };
	struct knitk_call_opts bad_w = { .size = sizeof(bad_w), .flags = KNITK_CALL_WORKER,
					 .worker = 1 };
	struct knitk_call_opts big_size = { .size = KNITK_SIZED_MAX + 1 };
	static unsigned char buf[ARENA + 1];
	struct knitk_submission subs[3];
	struct knitk_call *c, *calls[3];
	struct knitk_pool *pool;
	uint64_t bad = 0, x = 1;
	int efd, small, quarter, round;
	struct gate g;
	size_t len;

	REQUIRE(gate_open(&g) == 0);
	REQUIRE(opts_pool(&o, &pool) == 0);
	efd = knitk_pool_event_fd(pool);
	REQUIRE(efd >= 0);
	small = room_for(pool, efd, &g, 8, &bad);
	quarter = room_for(pool, efd, &g, ARENA / 4, &bad);
	REQUIRE(small > 0 && quarter > 0);
	printf("# room with the worker held: %d calls of 8 bytes, %d of %d\n",
	       small, quarter, ARENA / 4);
	for (round = 0; round < 100; round++) {
		CHECK_EQ(knitk_pool_submit(pool, T_ECHO, buf, ARENA + 1, NULL, &c), -EMSGSIZE);
		CHECK_EQ(knitk_pool_submit(pool, T_ECHO, buf, SIZE_MAX, NULL, &c), -EMSGSIZE);
		CHECK_EQ(knitk_pool_submit(pool, T_NR, &x, 8, NULL, &c), -EINVAL);
		CHECK_EQ(knitk_pool_submit(pool, UINT32_MAX, &x, 8, NULL, &c), -EINVAL);
		CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &bad_res, &c), -EINVAL);
		CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &bad_w, &c), -EINVAL);
		CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &big_size, &c), -E2BIG);
		CHECK_EQ(knitk_pool_call(pool, T_NR, &x, 8, NULL, &x, 8, &len), -EINVAL);
		memset(subs, 0, sizeof(subs));
		subs[0].fn = T_MIX;
		subs[0].in = &x;
		subs[0].len = 8;
		subs[1] = subs[0];
		subs[1].len = ARENA + 1;
		subs[2] = subs[0];
		CHECK_EQ(knitk_pool_submit_batch(pool, subs + 1, 2, calls), -EMSGSIZE);
		subs[1].len = 8;
		subs[1].reserved = 1;
		CHECK_EQ(knitk_pool_submit_batch(pool, subs + 1, 2, calls), -EINVAL);
		subs[1].reserved = 0;
		subs[1].opts = &bad_w;
		CHECK_EQ(knitk_pool_submit_batch(pool, subs + 1, 2, calls), -EINVAL);
		/* One good call before the bad entry: submitted, then reaped. */
		CHECK_EQ(knitk_pool_submit_batch(pool, subs, 2, calls), 1);
		CHECK_EQ(reap_n(pool, efd, 1, &bad), 1);
	}
	CHECK_EQ(room_for(pool, efd, &g, 8, &bad), small);
	CHECK_EQ(room_for(pool, efd, &g, ARENA / 4, &bad), quarter);
	CHECK_EQ(bad, 0);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

static void refused_submits_take_no_room_private(void)
{
	refused_submits_take_no_room(KNITK_POOL_DISPATCH_PRIVATE);
}

static void refused_submits_take_no_room_steal(void)
{
	refused_submits_take_no_room(KNITK_POOL_DISPATCH_STEAL);
}

/*
 * A pool at every maximum: KNITK_MAX_WORKERS thread workers and
 * KNITK_MAX_SUBMITTERS submitters (4095 mailboxes), private and stealing
 * (regions of one lane): a call pinned to each worker runs on that
 * worker's own thread, and a batch of calls completes by content.
 */
static void pool_at_the_limits(unsigned int dispatch)
{
	struct knitk_pool_opts o = { .nr_workers = KNITK_MAX_WORKERS,
				     .nr_submitters = KNITK_MAX_SUBMITTERS,
				     .inline_bytes = 64, .arena_bytes = 4096,
				     .dispatch = dispatch };
	static struct knitk_submission subs[200];
	static struct knitk_call *calls[200];
	static uint64_t xs[200];
	struct knitk_pool *pool;
	int32_t tids[KNITK_MAX_WORKERS];
	unsigned int w, i, bad = 0, same = 0;

	REQUIRE(opts_pool(&o, &pool) == 0);
	for (w = 0; w < KNITK_MAX_WORKERS && dispatch == KNITK_POOL_DISPATCH_PRIVATE; w++) {
		struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER,
					      .worker = w };
		size_t len = 0;

		tids[w] = 0;
		CHECK_EQ(knitk_pool_call(pool, T_TID, NULL, 0, &co, &tids[w],
					 sizeof(tids[w]), &len), 0);
		CHECK_EQ(len, sizeof(tids[w]));
		for (i = 0; i < w; i++)
			same += tids[i] == tids[w];
	}
	CHECK_EQ(same, 0);
	for (i = 0; i < 200; i++) {
		xs[i] = i * 31 + dispatch;
		subs[i] = (struct knitk_submission){ .fn = T_MIX, .in = &xs[i], .len = 8 };
	}
	REQUIRE(knitk_pool_submit_batch(pool, subs, 200, calls) == 200);
	REQUIRE(knitk_pool_wait_all(pool, calls, 200, KNITK_WAIT_FOREVER) == 0);
	for (i = 0; i < 200; i++) {
		bad += !mix_result_ok(calls[i], xs[i]);
		knitk_call_release(calls[i]);
	}
	CHECK_EQ(bad, 0);
	knitk_pool_destroy(pool);
}

static void pool_at_the_limits_private(void)
{
	pool_at_the_limits(KNITK_POOL_DISPATCH_PRIVATE);
}

static void pool_at_the_limits_steal(void)
{
	pool_at_the_limits(KNITK_POOL_DISPATCH_STEAL);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(pool_create_failures_leak_nothing);
	TEST(create_destroy_loop);
	TEST(pool_fds_are_cloexec);
	TEST(refused_submits_take_no_room_private);
	TEST(refused_submits_take_no_room_steal);
	TEST(pool_at_the_limits_private);
	TEST(pool_at_the_limits_steal);
	return tap_exit();
}
