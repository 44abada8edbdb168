// SPDX-License-Identifier: GPL-2.0
/*
 * Windows of the submit: the process pinned to one CPU after the pool was
 * made (the spin policy must not starve anyone), and a call reaped and
 * released by another thread before its submit let go of it (test hooks).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_parked.h"
#include "pool_tasks.h"
#include "tap.h"
#include "../core/knot_hooks.h"
#include "../pool/pool_hooks.h"
#include "../pool/pool_internal.h"
#include "fixtures.h"

/* Every thread of this process, and @pids, on CPU @cpu only. */
static int pin_all(int cpu, const pid_t *pids, unsigned int n)
{
	cpu_set_t set;
	struct dirent *d;
	DIR *dir;
	int ret = 0;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	dir = opendir("/proc/self/task");
	if (!dir)
		return -1;
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.' &&
		    sched_setaffinity(atoi(d->d_name), sizeof(set), &set))
			ret = -1;
	closedir(dir);
	while (n--)
		if (sched_setaffinity(pids[n], sizeof(set), &set))
			ret = -1;
	return ret;
}

struct caller {
	struct knitk_pool *pool;
	uint64_t x0;
	unsigned long good;
};

static void *caller_main(void *arg)
{
	struct caller *c = arg;

	c->good = mix_calls_good(c->pool, 300, NULL, c->x0, 1);
	return NULL;
}

/*
 * The spin policy counts the CPUs at create: a process pinned to one CPU
 * afterwards, its four workers and three callers sharing it, still makes
 * progress (every call completes with its result); only the speed may
 * differ.  The callers start after the pin, and pin themselves too.
 */
static void one_cpu_after_create(unsigned int kind, unsigned int dispatch)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind,
				     .nr_workers = 4,
				     .knot_flags = KNITK_KNOT_FUTEX,
				     .arena_bytes = ARENA, .spin = 1U << 16,
				     .dispatch = dispatch };
	struct caller c[3];
	pthread_t t[3];
	pid_t pids[4];
	cpu_set_t saved;
	struct knitk_pool *pool;
	struct knitk_pool_stats st;
	unsigned int i, np = 0;

	REQUIRE(sched_getaffinity(0, sizeof(saved), &saved) == 0);
	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	if (kind == KNITK_WORKER_PROCESSES)
		for (i = 0; i < 4; i++) {
			struct knitk_worker_info wi = { .size = sizeof(wi) };

			REQUIRE(knitk_pool_worker_info(pool, i, &wi) == 0 && wi.pid > 0);
			pids[np++] = wi.pid;
		}
	REQUIRE(pin_all(0, pids, np) == 0);
	for (i = 0; i < 3; i++) {
		c[i] = (struct caller){ .pool = pool, .x0 = 1000 * i };
		REQUIRE(pthread_create(&t[i], NULL, caller_main, &c[i]) == 0);
	}
	for (i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(c[i].good, 300);
	}
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(pool);
	/* Back to every CPU this process had, for the next cases. */
	CHECK_EQ(sched_setaffinity(0, sizeof(saved), &saved), 0);
}

static void one_cpu_threads_private(void)
{
	one_cpu_after_create(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE);
}

static void one_cpu_threads_steal(void)
{
	one_cpu_after_create(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL);
}

static void one_cpu_processes_steal(void)
{
	one_cpu_after_create(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL);
}

struct reaper {
	struct knitk_pool *pool;
	int fd;
	atomic_int stop;
	atomic_ulong released, bad;
};

static struct reaper *the_reaper;
static atomic_int full_seen;

/* Reap, check and release everything, until told to stop. */
static void *reaper_main(void *arg)
{
	struct reaper *r = arg;
	struct knitk_call *out[16];
	int n, i;

	while (!atomic_load(&r->stop)) {
		struct pollfd p = { .fd = r->fd, .events = POLLIN };

		n = knitk_pool_reap(r->pool, out, 16);
		if (n < 0) {
			atomic_fetch_add(&r->bad, 1);
			break;
		}
		for (i = 0; i < n; i++) {
			const void *d;
			size_t len;

			if (knitk_call_status(out[i]) ||
			    knitk_call_result(out[i], &d, &len) || len != 4096)
				atomic_fetch_add(&r->bad, 1);
			knitk_call_release(out[i]);
			atomic_fetch_add(&r->released, 1);
		}
		if (!n)
			poll(&p, 1, 10);
	}
	return NULL;
}

/*
 * The batch ran out of arena room (event mode: it ends there): the calls
 * it published are done and released by the reaper before the submit
 * drops its own references, so the submit's drop is the last and frees.
 */
static void full_hook(struct knitk_pool *pool, enum pool_hook point, unsigned int arg)
{
	struct reaper *r = the_reaper;

	(void)pool;
	(void)arg;
	if (point != POOL_HOOK_PUBLISH_FULL || !r)
		return;
	atomic_fetch_add(&full_seen, 1);
	while (!atomic_load(&r->released) && !atomic_load(&r->bad))
		sched_yield();
}

static void release_before_submit_drops(unsigned int dispatch)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_THREADS,
				     .nr_workers = 1,
				     .knot_flags = KNITK_KNOT_FUTEX,
				     .arena_bytes = ARENA,
				     .dispatch = dispatch };
	static char payload[4096];
	struct knitk_submission subs[64];
	struct knitk_call *calls[64];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct reaper r = { 0 };
	unsigned long submitted = 0;
	unsigned int round, i;
	pthread_t t;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	r.pool = pool;
	r.fd = knitk_pool_event_fd(pool);
	REQUIRE(r.fd >= 0);
	for (i = 0; i < 64; i++)
		subs[i] = (struct knitk_submission){ .fn = T_ECHO, .in = payload,
						     .len = sizeof(payload) };
	atomic_store(&full_seen, 0);
	REQUIRE(pthread_create(&t, NULL, reaper_main, &r) == 0);
	the_reaper = &r;
	atomic_store(&knitk__test_hook, full_hook);
	for (round = 0; round < 16; round++) {
		unsigned long before = atomic_load(&r.released);
		int n;

		atomic_store(&r.released, 0);
		n = knitk_pool_submit_batch(pool, subs, 64, calls);
		/* The handles may be freed already: not touched here. */
		CHECK(n > 0);
		if (n > 0)
			submitted += (unsigned long)n;
		atomic_fetch_add(&r.released, before);
		while (atomic_load(&r.released) < submitted && !atomic_load(&r.bad))
			sched_yield();
	}
	atomic_store(&knitk__test_hook, NULL);
	atomic_store(&r.stop, 1);
	pthread_join(t, NULL);
	the_reaper = NULL;
	CHECK(atomic_load(&full_seen) > 0);
	CHECK_EQ(atomic_load(&r.bad), 0);
	CHECK_EQ(atomic_load(&r.released), submitted);
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.submitted, submitted);
	knitk_pool_destroy(pool);
}

static void release_before_submit_drops_private(void)
{
	release_before_submit_drops(KNITK_POOL_DISPATCH_PRIVATE);
}

static void release_before_submit_drops_steal(void)
{
	release_before_submit_drops(KNITK_POOL_DISPATCH_STEAL);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(one_cpu_threads_private);
	TEST(one_cpu_threads_steal);
	TEST(one_cpu_processes_steal);
	TEST(release_before_submit_drops_private);
	TEST(release_before_submit_drops_steal);
	return tap_exit();
}
