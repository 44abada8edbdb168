// SPDX-License-Identifier: GPL-2.0
/*
 * Adversarial tests of the waiter's hand-off (docs/protocol.md T14), the
 * spin policy and the submit's lock-free drop of its call reference, from
 * the public headers, with the hooks of pool_hooks.h and knot_hooks.h for
 * the windows: a stopped searcher continued, or the worker handed lanes
 * killed, inside the host's hand-off; knitk_producer_hand_off's argument
 * checks; a process pinned to one CPU after the pool was made; a call
 * reaped and released by another thread before its submit let go of it.
 * argv[1] (the runner's call count) is ignored: the counts are small.
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

#define ARENA	(64 * 1024)

/* ------------------------------------------- knitk_producer_hand_off */

static void hand_off_einval(void)
{
	struct knitk_geometry g = {
		.nr_workers = 2, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64, .arena_bytes = 4096,
	};
	struct knitk_endpoint *host;
	struct knitk_producer *p;

	/* A mailbox that does not steal. */
	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_producer_create(host, 0, &p) == 0);
	CHECK_EQ(knitk_producer_hand_off(p, 0, 16), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(NULL, 0, 16), -EINVAL);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(host);

	g.flags = KNITK_GEOM_STEAL;
	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_producer_create(host, 0, &p) == 0);
	/* The knot's size (16 for 2 workers), or 0 for it: nothing handed. */
	CHECK_EQ(knitk_producer_hand_off(p, 0, 16), 0);
	CHECK_EQ(knitk_producer_hand_off(p, 1, 0), 0);
	/* Legal for 2 workers, but not the knot's size. */
	CHECK_EQ(knitk_producer_hand_off(p, 1, 1), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(p, 1, 8), -EINVAL);
	/* Claimants beyond the knot's workers. */
	CHECK_EQ(knitk_producer_hand_off(p, 2, 16), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(p, ~0U, 16), -EINVAL);
	/* Regions: not a power of two, 64 / g < workers + 1, too big. */
	CHECK_EQ(knitk_producer_hand_off(p, 0, 3), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(p, 0, 32), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(p, 0, 64), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(p, 0, 128), -EINVAL);
	/* A published lane is handed to a claimant that never joined. */
	{
		struct knitk_lane_header h = { 0 };
		uint64_t x = 1;

		REQUIRE(knitk_producer_send(p, &h, &x, sizeof(x)) >= 0);
		CHECK_EQ(knitk_producer_hand_off(p, 1, 16), 1);
		/* Already its: not handed again, nor to another. */
		CHECK_EQ(knitk_producer_hand_off(p, 1, 16), 0);
	}
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(host);
}

/* ---------------------------------------- the hand-off of a waiting host */

/* Worker 0 (process @hook_pid0, thread @hook_tid0), worker 1's process. */
static pid_t hook_pid0, hook_tid0, hook_pid1;
/* Worker 0 of thread workers is stopped by this. */
static struct freezer hook_fz = { -1, -1, -1 };
static atomic_int hook_mode, hook_fired;
enum { HOOK_NONE, HOOK_CONT0, HOOK_KILL_TO };

/* Let the stopped worker 0 go on (once; later calls do nothing). */
static void searcher_continue(void)
{
	if (hook_pid0 != getpid())
		kill(hook_pid0, SIGCONT);
	else if (hook_fz.child > 0)
		freezer_thaw(&hook_fz);
	hook_fz.child = -1;
}

static void hand_off_hook(struct knitk_endpoint *k, enum knot_hook point,
			  unsigned int arg)
{
	char s;

	(void)k;
	if (point != KNOT_HOOK_HAND_OFF)
		return;
	switch (atomic_load(&hook_mode)) {
	case HOOK_CONT0:
		/* The stopped searcher goes on inside the hand-off. */
		if (atomic_exchange(&hook_fired, 1))
			return;
		searcher_continue();
		while (task_stopped(hook_pid0, hook_tid0))
			sched_yield();
		break;
	case HOOK_KILL_TO:
		/* The worker being handed lanes dies before it is rung. */
		if (arg != 1 || atomic_exchange(&hook_fired, 1))
			return;
		kill(hook_pid1, SIGKILL);
		do {
			sched_yield();
			s = task_state(hook_pid1, hook_pid1);
		} while (s && s != 'Z' && s != 'X');
		break;
	}
}

/*
 * @workers workers of @kind, all parked; one call wakes worker 0, which
 * then searches (a long spin): stop it there, as adversary2_test does (a
 * SIGSTOP for a process, a debugger's stop of its thread).
 */
static struct knitk_pool *stopped_searcher(unsigned int kind, unsigned int flags,
					   unsigned int workers,
					   struct knitk_endpoint **ep)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind,
				     .nr_workers = workers, .flags = flags,
				     .knot_flags = KNITK_KNOT_FUTEX,
				     .arena_bytes = ARENA, .spin = 1U << 20,
				     .dispatch = KNITK_POOL_DISPATCH_STEAL };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	struct knitk_call *first;
	const void *d;
	size_t len;
	int32_t tid;
	uint64_t x = 4242;

	hook_fz.child = -1;
	if (knitk_pool_create(&o, &test_tasks, &pool))
		return NULL;
	if (knitk_pool_endpoint(pool, ep))
		goto fail;
	if (kind == KNITK_WORKER_PROCESSES) {
		if (knitk_pool_worker_info(pool, 0, &wi) || wi.pid <= 0)
			goto fail;
		hook_pid0 = hook_tid0 = wi.pid;
		memset(&wi, 0, sizeof(wi));
		wi.size = sizeof(wi);
		if (knitk_pool_worker_info(pool, 1, &wi) || wi.pid <= 0)
			goto fail;
		hook_pid1 = wi.pid;
	} else {
		/* Worker 0's thread: the one a call to the parked pool wakes. */
		wait_workers_parked(*ep, workers);
		if (knitk_pool_submit(pool, T_TID, NULL, 0, NULL, &first))
			goto fail;
		if (knitk_call_wait(first, KNITK_WAIT_FOREVER) ||
		    knitk_call_result(first, &d, &len) || len != sizeof(tid) ||
		    knitk_call_worker(first) != 0) {
			knitk_call_release(first);
			goto fail;
		}
		memcpy(&tid, d, sizeof(tid));
		knitk_call_release(first);
		hook_pid0 = getpid();
		hook_tid0 = tid;
		hook_pid1 = 0;
		if (freezer_start(&hook_fz, tid))
			goto fail;
	}
	wait_workers_parked(*ep, workers);
	if (knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &first))
		goto fail;
	if (knitk_call_wait(first, KNITK_WAIT_FOREVER) || !mix_result_ok(first, x) ||
	    knitk_call_worker(first) != 0) {
		knitk_call_release(first);
		goto fail;
	}
	knitk_call_release(first);
	if (kind == KNITK_WORKER_PROCESSES ? kill(hook_pid0, SIGSTOP) :
	    freezer_freeze(&hook_fz))
		goto fail;
	while (!task_stopped(hook_pid0, hook_tid0))
		sched_yield();
	/*
	 * A process stopped between a claim and its next empty scan is not
	 * searching, and the next publish then wakes an idle worker itself:
	 * stop it again until it is stopped searching.
	 */
	while (kind == KNITK_WORKER_PROCESSES &&
	       !(atomic_load(&knitk__steal_words(*ep)[STEAL_SEARCHING]) & 1)) {
		kill(hook_pid0, SIGCONT);
		while (task_stopped(hook_pid0, hook_tid0))
			sched_yield();
		kill(hook_pid0, SIGSTOP);
		while (!task_stopped(hook_pid0, hook_tid0))
			sched_yield();
	}
	for (x = 1; x < workers; x++)
		if (!worker_parked(*ep, (unsigned int)x))
			goto fail;
	return pool;
fail:
	searcher_continue();
	knitk_pool_destroy(pool);
	return NULL;
}

static uint64_t pool_spurious(struct knitk_pool *pool, unsigned int n)
{
	struct knitk_worker_info wi;
	uint64_t spurious = 0;
	unsigned int i;

	for (i = 0; i < n; i++) {
		memset(&wi, 0, sizeof(wi));
		wi.size = sizeof(wi);
		if (knitk_pool_worker_info(pool, i, &wi) == 0 && wi.db_valid)
			spurious += wi.db.spurious;
	}
	return spurious;
}

/*
 * The stopped searcher is continued inside the waiter's hand-off, after
 * its reservation and fence, before it looks at the claimants: whoever
 * takes the lanes, each call completes once with its result, and no
 * worker is woken for nothing.
 */
static void steal_continued_in_hand_off(unsigned int kind)
{
	struct knitk_endpoint *ep;
	struct knitk_pool_stats st;
	struct knitk_call *late[8];
	struct knitk_pool *pool;
	unsigned int i, bad = 0;

	atomic_store(&hook_fired, 0);
	atomic_store(&hook_mode, HOOK_CONT0);
	atomic_store(&knitk__endpoint_hook, hand_off_hook);
	pool = stopped_searcher(kind, 0, 2, &ep);
	REQUIRE(pool);
	for (i = 0; i < 8; i++) {
		uint64_t x = 100 + i;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &late[i]) == 0);
	}
	REQUIRE(knitk_pool_wait_all(pool, late, 8, KNITK_WAIT_FOREVER) == 0);
	for (i = 0; i < 8; i++) {
		bad += !mix_result_ok(late[i], 100 + i);
		knitk_call_release(late[i]);
	}
	atomic_store(&knitk__endpoint_hook, NULL);
	CHECK_EQ(atomic_load(&hook_fired), 1);
	CHECK_EQ(bad, 0);
	CHECK_EQ(pool_spurious(pool, 2), 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.completed, st.submitted);
	searcher_continue();
	knitk_pool_destroy(pool);
}

static void steal_continued_in_hand_off_processes(void)
{
	steal_continued_in_hand_off(KNITK_WORKER_PROCESSES);
}

static void steal_continued_in_hand_off_threads(void)
{
	steal_continued_in_hand_off(KNITK_WORKER_THREADS);
}

struct waiter {
	struct knitk_pool *pool;
	uint64_t x0;
	unsigned int good;
};

/* Submit eight calls and wait for them all, as its own waiter. */
static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	struct knitk_call *c[8];
	unsigned int i, n = 0;

	for (i = 0; i < 8; i++) {
		uint64_t x = w->x0 + i;

		if (knitk_pool_submit(w->pool, T_MIX, &x, 8, NULL, &c[n]) == 0)
			n++;
	}
	if (knitk_pool_wait_all(w->pool, c, n, KNITK_WAIT_FOREVER))
		n = 0;
	for (i = 0; i < n; i++) {
		w->good += mix_result_ok(c[i], w->x0 + i);
		knitk_call_release(c[i]);
	}
	return NULL;
}

/*
 * Three threads wait at once for calls published while the searcher is
 * stopped, each of them may hand lanes over: two idle workers, none woken
 * for nothing, every call completed once with its result.
 */
static void steal_stopped_many_waiters(void)
{
	struct knitk_endpoint *ep;
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct waiter w[3];
	pthread_t t[3];
	unsigned int i, round;

	atomic_store(&hook_mode, HOOK_NONE);
	pool = stopped_searcher(KNITK_WORKER_PROCESSES, 0, 3, &ep);
	REQUIRE(pool);
	for (round = 0; round < 4; round++) {
		for (i = 0; i < 3; i++) {
			w[i] = (struct waiter){ .pool = pool, .x0 = 1000 * (round * 3 + i) };
			REQUIRE(pthread_create(&t[i], NULL, waiter_main, &w[i]) == 0);
		}
		for (i = 0; i < 3; i++) {
			pthread_join(t[i], NULL);
			CHECK_EQ(w[i].good, 8);
		}
	}
	CHECK(task_stopped(hook_pid0, hook_tid0));
	CHECK_EQ(pool_spurious(pool, 3), 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.completed, st.submitted);
	searcher_continue();
	knitk_pool_destroy(pool);
}

/*
 * Worker 1 is killed inside the waiter's hand-off of lanes to it, before
 * it is rung, while the searcher stays stopped.  Its lanes are never lost
 * nor run twice: every call completes with its result or -EOWNERDEAD.
 * Of two workers, without a respawn, they wait for the searcher (continued
 * once the death is handled); with KNITK_POOL_RESPAWN the successor takes
 * them while the searcher is still stopped.  (Not with a third worker:
 * it may be searching when the calls are published and claim them, so
 * no hand-off is sure to happen.)
 */
static void steal_kill_handed_to(unsigned int flags, unsigned int workers)
{
	struct knitk_endpoint *ep;
	struct knitk_pool_stats st;
	struct knitk_call *late[8];
	struct knitk_pool *pool;
	unsigned int i, bad = 0, dead = 0;

	atomic_store(&hook_fired, 0);
	atomic_store(&hook_mode, HOOK_KILL_TO);
	atomic_store(&knitk__endpoint_hook, hand_off_hook);
	pool = stopped_searcher(KNITK_WORKER_PROCESSES, flags, workers, &ep);
	REQUIRE(pool);
	for (i = 0; i < 8; i++) {
		uint64_t x = 200 + i;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &late[i]) == 0);
	}
	if (!(flags & KNITK_POOL_RESPAWN) && workers == 2) {
		do {
			/* One look at the calls runs the hand-off and the death. */
			knitk_pool_wait_any(pool, late, 8, after_ms(1));
			pool_stats(pool, &st);
		} while (!atomic_load(&hook_fired) || st.deaths < 1);
		searcher_continue();
	}
	REQUIRE(knitk_pool_wait_all(pool, late, 8, KNITK_WAIT_FOREVER) == 0);
	for (i = 0; i < 8; i++) {
		int s = knitk_call_status(late[i]);

		if (s == -EOWNERDEAD)
			dead++;
		else
			bad += s != 0 || !mix_result_ok(late[i], 200 + i);
		knitk_call_release(late[i]);
	}
	atomic_store(&knitk__endpoint_hook, NULL);
	CHECK_EQ(atomic_load(&hook_fired), 1);
	CHECK_EQ(bad, 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 1);
	CHECK_EQ(st.completed, st.submitted);
	if (flags & KNITK_POOL_RESPAWN) {
		uint64_t x = 300;

		/* The waits end at the death; the respawn follows it. */
		while (st.respawns < 1) {
			sched_yield();
			pool_stats(pool, &st);
		}
		CHECK_EQ(st.respawns, 1);
		/* The successor serves: the searcher is still stopped. */
		CHECK_EQ(mix_calls_good(pool, 4, NULL, x, 1), 4);
	}
	printf("# %u of 8 completed -EOWNERDEAD\n", dead);
	searcher_continue();
	knitk_pool_destroy(pool);
}

static void steal_kill_handed_to_plain(void)
{
	steal_kill_handed_to(0, 2);
}

static void steal_kill_handed_to_respawn(void)
{
	steal_kill_handed_to(KNITK_POOL_RESPAWN, 2);
}

/* ------------------------------------------------ one CPU after create */

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

/* ------------------------------- released before the submit let go of it */

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

/* ------------------------------------- claimants of two region sizes */

#define MIXED_N		400000

struct mixed {
	struct knitk_consumer *c;
	atomic_uchar *seen;
	atomic_ulong *taken;
	atomic_int *stop;
	int err;
};

static void *mixed_claimant(void *arg)
{
	struct mixed *m = arg;
	struct knitk_msg msg = { .size = sizeof(msg) };
	uint64_t pending, all;
	int lane;

	while (!atomic_load(m->stop)) {
		if (knitk_lane_scan(m->c, &pending) < 0) {
			m->err = 1;
			break;
		}
		all = pending;
		while ((lane = knitk_lane_next(m->c, &pending)) >= 0) {
			if (knitk_lane_decode(m->c, (unsigned int)lane, &msg) ||
			    msg.header.value >= MIXED_N) {
				m->err = 1;
				continue;
			}
			atomic_fetch_add(&m->seen[msg.header.value], 1);
			atomic_fetch_add(m->taken, 1);
		}
		if (all && knitk_lane_ack(m->c, all))
			m->err = 1;
		if (!all)
			sched_yield();
	}
	return NULL;
}

/*
 * A claimant of 1-lane regions on a mailbox of 16-lane regions: want
 * words name regions, so claimants of two sizes would not see each
 * other's claims in the handshake (T4-T5) and could both take a lane.
 * The knot records its size: the second claimant's create, and a
 * hand-off of the other size, are -EINVAL, and the first claimant takes
 * every value exactly once.  (Before the knot recorded it, both were
 * created, and a few hundred of 400000 values were taken twice.)
 */
static void steal_mixed_region_sizes(void)
{
	struct knitk_geometry g = {
		.flags = KNITK_GEOM_STEAL, .nr_workers = 2,
		.nr_submitters = 1, .lanes = KNITK_LANES, .inline_bytes = 64,
		.arena_bytes = 4096, .region_lanes = 16,
	};
	static atomic_uchar seen[MIXED_N];
	struct knitk_endpoint *host, *w[2];
	struct knitk_producer *p;
	struct mixed m[2];
	pthread_t t[2];
	atomic_ulong taken = 0;
	atomic_int stop = 0;
	unsigned int i, nr = 0, once = 0, twice = 0;
	uint64_t v;
	int ret;

	for (i = 0; i < MIXED_N; i++)
		atomic_store(&seen[i], 0);
	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_producer_create(host, 0, &p) == 0);
	CHECK_EQ(knitk_producer_hand_off(p, 1, 1), -EINVAL);
	for (i = 0; i < 2; i++) {
		REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w[i]) == 0);
		REQUIRE(knitk_endpoint_join(w[i], KNITK_ROLE_WORKER, i) >= 1);
		m[nr] = (struct mixed){ .seen = seen, .taken = &taken, .stop = &stop };
		ret = knitk_steal_consumer_create(w[i], 0, i ? 1 : 16, &m[nr].c);
		CHECK_EQ(ret, i ? -EINVAL : 0);
		/* A claimant made anyway competes, as it would in a program. */
		if (!ret) {
			REQUIRE(pthread_create(&t[nr], NULL, mixed_claimant, &m[nr]) == 0);
			nr++;
		}
	}
	REQUIRE(nr >= 1);
	for (v = 0; v < MIXED_N; v++) {
		struct knitk_lane_header h = { .value = v };

		while ((ret = knitk_producer_send(p, &h, NULL, 0)) == -ENOSPC ||
		       ret == -EAGAIN)
			sched_yield();
		if (ret < 0)
			break;
	}
	CHECK_EQ(v, MIXED_N);
	while (atomic_load(&taken) < v)
		sched_yield();
	atomic_store(&stop, 1);
	for (i = 0; i < nr; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(m[i].err, 0);
	}
	for (i = 0; i < MIXED_N; i++) {
		once += atomic_load(&seen[i]) == 1;
		twice += atomic_load(&seen[i]) > 1;
	}
	printf("# %u of %u taken more than once\n", twice, MIXED_N);
	CHECK_EQ(once, MIXED_N);
	for (i = 0; i < nr; i++)
		knitk_consumer_destroy(m[i].c);
	for (i = 0; i < 2; i++)
		knitk_endpoint_destroy(w[i]);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(host);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	if (argc > 2)
		setenv("TAP_ONLY", argv[2], 1);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		return 1;
	TEST(hand_off_einval);
	TEST(steal_continued_in_hand_off_processes);
	TEST(steal_continued_in_hand_off_threads);
	TEST(steal_stopped_many_waiters);
	TEST(steal_kill_handed_to_plain);
	TEST(steal_kill_handed_to_respawn);
	TEST(one_cpu_threads_private);
	TEST(one_cpu_threads_steal);
	TEST(one_cpu_processes_steal);
	TEST(release_before_submit_drops_private);
	TEST(release_before_submit_drops_steal);
	TEST(steal_mixed_region_sizes);
	return tap_exit();
}
