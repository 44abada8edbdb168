// SPDX-License-Identifier: GPL-2.0
/*
 * Allocations that fail (-Wl,--wrap of malloc, calloc and strdup): a
 * create failing at each allocation, a worker thread's setup failing,
 * calls, event mode and a result's copy failing each allocation all fail
 * with -ENOMEM or go on, leaking and losing nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"
#define FIXTURES_ONE_SUBMITTER
#include "fixtures.h"

/*
 * -Wl,--wrap of the library's allocators (this program is linked
 * statically against a test build, alloc_fail.h): a thread that arms
 * fail_arm(n) fails its n-th allocation from then on, once.  Or, while
 * fail_others is set, every allocation of the other threads.
 */
static _Atomic int fail_others;
static _Atomic unsigned int others_failed;
static _Thread_local bool fail_exempt;

static bool other_thread_fails(void)
{
	if (!atomic_load_explicit(&fail_others, memory_order_relaxed) || fail_exempt)
		return false;
	atomic_fetch_add(&others_failed, 1);
	return true;
}

#define ALLOC_FAILS_ALSO()	other_thread_fails()
#include "alloc_fail.h"

/*
 * knitk_pool_create failing each of its allocations in turn: every
 * failure is -ENOMEM, leaks no fd (nor memory: the ASan build's leak
 * check), and the next create works.
 */
static void create_fails_each_alloc(unsigned int kind, unsigned int dispatch)
{
	unsigned int n;
	int fds = open_fds();

	for (n = 1; n < 200; n++) {
		struct knitk_pool *pool = NULL;
		bool hit;
		int ret;

		fail_arm(n);
		ret = new_pool(kind, dispatch, 2, 0, &pool);
		hit = fail_disarm();
		if (!hit) {
			CHECK_EQ(ret, 0);
			if (!ret) {
				CHECK_EQ(mix_calls_good(pool, 4, NULL, n, 1), 4);
				knitk_pool_destroy(pool);
			}
			break;
		}
		if (ret == 0) {
			/* A failed allocation the pool could do without. */
			CHECK_EQ(mix_calls_good(pool, 4, NULL, n, 1), 4);
			knitk_pool_destroy(pool);
		} else {
			CHECK_EQ(ret, -ENOMEM);
		}
		if (open_fds() != fds) {
			printf("# allocation %u failed (create: %d): fds %d, were %d; "
			       "0-2 open: %d %d %d\n", n, ret, open_fds(), fds,
			       fcntl(0, F_GETFD) >= 0, fcntl(1, F_GETFD) >= 0,
			       fcntl(2, F_GETFD) >= 0);
			CHECK_EQ(open_fds(), fds);
			break;
		}
	}
	printf("# %u allocations\n", n - 1);
	CHECK(n < 200);
}

static void create_fails_each_alloc_threads(void)
{
	create_fails_each_alloc(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE);
}

static void create_fails_each_alloc_steal(void)
{
	create_fails_each_alloc(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL);
}

static void create_fails_each_alloc_processes(void)
{
	create_fails_each_alloc(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE);
}

/*
 * A thread worker that cannot set itself up (its allocations fail in
 * its own thread): the create fails with -ENOMEM and leaves no fd or
 * thread, rather than return a pool whose worker is gone and whose calls
 * would wait for it forever.
 */
static void worker_thread_setup_fails(unsigned int dispatch)
{
	int fds = open_fds(), threads = nr_threads(), ret;
	struct knitk_pool *pool = NULL;
	uint64_t x = 4, y = 0;
	size_t len;

	fail_exempt = true;
	atomic_store(&others_failed, 0);
	atomic_store(&fail_others, 1);
	ret = new_pool(KNITK_WORKER_THREADS, dispatch, 1, 0, &pool);
	/* A create that did not wait: until the worker's setup has failed. */
	while (!ret && !atomic_load(&others_failed))
		sched_yield();
	atomic_store(&fail_others, 0);
	fail_exempt = false;
	CHECK_EQ(ret, -ENOMEM);
	if (!ret) {
		/* The call goes to a worker that is not there (a hang). */
		CHECK_EQ(knitk_pool_call(pool, T_MIX, &x, 8, NULL, &y, 8, &len), 0);
		knitk_pool_destroy(pool);
	}
	CHECK_EQ(open_fds(), fds);
	CHECK_EQ(nr_threads(), threads);
	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 1, 0, &pool) == 0);
	CHECK_EQ(mix_calls_good(pool, 4, NULL, 1, 1), 4);
	knitk_pool_destroy(pool);
}

static void worker_thread_setup_fails_private(void)
{
	worker_thread_setup_fails(KNITK_POOL_DISPATCH_PRIVATE);
}

static void worker_thread_setup_fails_steal(void)
{
	worker_thread_setup_fails(KNITK_POOL_DISPATCH_STEAL);
}

/*
 * The calls of a live pool failing each allocation of the calling thread
 * in turn: a submit, a batch and a knitk_pool_call (whose waits may copy
 * results) either fail with -ENOMEM and take nothing, or go through; every
 * call submitted completes once, with its result.
 */
static void calls_fail_each_alloc(unsigned int dispatch)
{
	struct knitk_submission subs[4];
	struct knitk_call *calls[4];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	unsigned int n, i, op;
	uint64_t x[4], before;
	unsigned long ok = 0;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 2, 0, &pool) == 0);
	for (op = 0; op < 4; op++) {
		for (n = 1; n < 50; n++) {
			static unsigned char big[4000];
			unsigned char out[4000];
			size_t len = 0;
			bool hit;
			int ret, got = 0;

			for (i = 0; i < 4; i++) {
				x[i] = n * 8 + i;
				subs[i] = (struct knitk_submission){
					.fn = T_MIX, .in = &x[i], .len = 8 };
			}
			memset(big, (int)n, sizeof(big));
			pool_stats(pool, &st);
			before = st.submitted;
			fail_arm(n);
			switch (op) {
			case 0:
				ret = knitk_pool_submit(pool, T_MIX, &x[0], 8, NULL, &calls[0]);
				got = ret ? ret : 1;
				break;
			case 1:
				ret = got = knitk_pool_submit_batch(pool, subs, 4, calls);
				break;
			case 2:
				ret = knitk_pool_call(pool, T_MIX, &x[0], 8, NULL,
						      out, 8, &len);
				if (!ret)
					CHECK(len == 8 && !memcmp(&(uint64_t){ mix64(x[0]) }, out, 8));
				break;
			default:
				ret = knitk_pool_call(pool, T_ECHO, big, sizeof(big), NULL,
						      out, sizeof(out), &len);
				if (!ret)
					CHECK(len == sizeof(big) && !memcmp(big, out, len));
				break;
			}
			/* The waits, armed too: they may copy results. */
			for (i = 0; op < 2 && got > 0 && i < (unsigned int)got; i++)
				CHECK_EQ(knitk_call_wait(calls[i], KNITK_WAIT_FOREVER), 0);
			hit = fail_disarm();
			if (ret < 0) {
				/* Refused: nothing was submitted. */
				CHECK_EQ(ret, -ENOMEM);
				pool_stats(pool, &st);
				CHECK(op >= 2 || st.submitted == before);
			}
			for (i = 0; op < 2 && got > 0 && i < (unsigned int)got; i++) {
				CHECK(mix_result_ok(calls[i], x[i]));
				knitk_call_release(calls[i]);
			}
			if (ret >= 0)
				ok++;
			if (!hit)
				break;
		}
		CHECK(n < 50);
	}
	CHECK_EQ(mix_calls_good(pool, 10, NULL, 1, 1), 10);
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	printf("# %lu ops went through\n", ok);
	knitk_pool_destroy(pool);
}

static void calls_fail_each_alloc_private(void)
{
	calls_fail_each_alloc(KNITK_POOL_DISPATCH_PRIVATE);
}

static void calls_fail_each_alloc_steal(void)
{
	calls_fail_each_alloc(KNITK_POOL_DISPATCH_STEAL);
}

/*
 * knitk_pool_event_fd and knitk_pool_reap failing an allocation: the
 * switch fails with -ENOMEM and leaves the pool out of event mode, or
 * succeeds; reaped calls are returned once each.
 */
static void event_mode_fails_each_alloc(void)
{
	struct knitk_call *c[8];
	struct knitk_pool *pool;
	unsigned int n;
	int fd = -1, i, got;

	for (n = 1; n < 50; n++) {
		bool hit;

		REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE,
				 1, 0, &pool) == 0);
		fail_arm(n);
		fd = knitk_pool_event_fd(pool);
		hit = fail_disarm();
		if (fd < 0) {
			CHECK_EQ(fd, -ENOMEM);
			CHECK_EQ(knitk_pool_reap(pool, c, 8), -EINVAL);
			CHECK_EQ(mix_calls_good(pool, 3, NULL, 1, 1), 3);
		} else {
			uint64_t x = n;
			int reaped = 0;

			REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[0]) == 0);
			while (!reaped) {
				got = knitk_pool_reap(pool, c, 8);
				CHECK(got >= 0);
				if (got < 0)
					break;
				for (i = 0; i < got; i++) {
					CHECK(mix_result_ok(c[i], x));
					knitk_call_release(c[i]);
				}
				reaped += got;
				if (!got)
					sched_yield();
			}
		}
		knitk_pool_destroy(pool);
		if (!hit)
			break;
	}
	CHECK(n < 50);
}

/*
 * The copy of a large result failing (the waiting thread drains the
 * return mailbox and its allocation fails): the call completes, once,
 * with -ENOMEM (knitk_call_status), and the pool goes on.  Some rounds
 * may see the result taken by another thread; one must hit the copy.
 */
struct gate_opener {
	struct gate *g;
};

static void *gate_opener_fn(void *arg)
{
	struct gate_opener *o = arg;

	usleep(20000);
	gate_release(o->g);
	return NULL;
}

/*
 * The copy of a result out of the knot fails: its call completes -ENOMEM.
 * @n bytes, taken by the waiting thread: a result that fits the call's box
 * (knitk_call_wait settles it, docs/protocol.md R7), or a larger one from
 * its return lane (knitk_pool_wait_any: the waiter drains).
 */
static void result_copy_fails_n(uint32_t n, bool any)
{
	enum { ROUNDS = 20 };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct gate gs[ROUNDS];
	unsigned int round, hits = 0;

	printf("# %u bytes, %s\n", (unsigned int)n,
	       any ? "knitk_pool_wait_any" : "knitk_call_wait");
	/* Before the workers start (so TSan sees the pipes made first). */
	for (round = 0; round < ROUNDS; round++)
		REQUIRE(gate_open(&gs[round]) == 0);
	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	for (round = 0; round < ROUNDS && !hits; round++) {
		struct gate *g = &gs[round];
		struct gate_opener o = { .g = g };
		struct knitk_call *c;
		pthread_t th;
		bool hit;
		int ret;

		g->arg.n = n;
		REQUIRE(knitk_pool_submit(pool, T_GATE, &g->arg, sizeof(g->arg), NULL, &c) == 0);
		REQUIRE(gate_wait(g, 'r') == 0);
		REQUIRE(pthread_create(&th, NULL, gate_opener_fn, &o) == 0);
		fail_arm(1);
		if (any) {
			ret = knitk_pool_wait_any(pool, &c, 1, KNITK_WAIT_FOREVER);
			if (!ret)
				ret = knitk_call_status(c);
		} else {
			ret = knitk_call_wait(c, KNITK_WAIT_FOREVER);
		}
		hit = fail_disarm();
		pthread_join(th, NULL);
		if (hit) {
			hits++;
			CHECK_EQ(ret, -ENOMEM);
			CHECK_EQ(knitk_call_status(c), -ENOMEM);
		} else {
			const void *d;
			size_t len = 0;

			CHECK_EQ(ret, (int)n);
			CHECK(!knitk_call_result(c, &d, &len) && len == n &&
			      ((const char *)d)[n - 1] == 'g');
		}
		knitk_call_release(c);
	}
	printf("# the copy failed in round %u\n", round);
	CHECK(hits > 0);
	CHECK_EQ(mix_calls_good(pool, 10, NULL, 1, 1), 10);
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(pool);
	for (round = 0; round < ROUNDS; round++)
		gate_close(&gs[round]);
}

static void result_copy_fails(void)
{
	result_copy_fails_n(1000, true);
	result_copy_fails_n(100, false);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(create_fails_each_alloc_threads);
	TEST(create_fails_each_alloc_steal);
	TEST(create_fails_each_alloc_processes);
	TEST(worker_thread_setup_fails_private);
	TEST(worker_thread_setup_fails_steal);
	TEST(calls_fail_each_alloc_private);
	TEST(calls_fail_each_alloc_steal);
	TEST(event_mode_fails_each_alloc);
	TEST(result_copy_fails);
	return tap_exit();
}
