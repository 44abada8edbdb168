// SPDX-License-Identifier: GPL-2.0
/*
 * Many calls from 4 submitting threads to 2 thread workers and to 2
 * process workers: every result is checked, every call completes exactly
 * once, and the throughput is printed.  argv[1]: number of calls.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"

#define SUBMITTERS	4
#define WINDOW		32

static unsigned long nr_calls = 1000000;

struct sub {
	struct knitk_pool *pool;
	unsigned int id;
	unsigned long n;
	unsigned long ok, bad;
};

/* One checked window of async calls; every 64th is a big echo. */
static void *submitter(void *arg)
{
	struct sub *s = arg;
	struct knitk_call *calls[WINDOW];
	uint64_t x[WINDOW], seed = s->id * 7919 + 1;
	unsigned char big[1000];
	unsigned long done = 0;
	unsigned int i, n;

	while (done < s->n) {
		n = s->n - done < WINDOW ? (unsigned int)(s->n - done) : WINDOW;
		for (i = 0; i < n; i++) {
			bool is_big = ((done + i) % 64) == 63;
			int ret;

			x[i] = tap_rand(&seed);
			if (is_big) {
				memset(big, (int)(x[i] & 0xff), sizeof(big));
				ret = knitk_pool_submit(s->pool, T_ECHO, big, sizeof(big),
							NULL, &calls[i]);
			} else {
				ret = knitk_pool_submit(s->pool, T_MIX, &x[i], sizeof(x[i]),
							NULL, &calls[i]);
			}
			if (ret) {
				printf("# submit: %d\n", ret);
				s->bad++;
				return NULL;
			}
		}
		if (knitk_pool_wait_all(s->pool, calls, n, KNITK_WAIT_FOREVER)) {
			s->bad++;
			return NULL;
		}
		for (i = 0; i < n; i++) {
			bool is_big = ((done + i) % 64) == 63;
			const void *data;
			size_t len;
			uint64_t y;
			bool good;

			good = knitk_call_status(calls[i]) == 0 &&
			       knitk_call_result(calls[i], &data, &len) == 0;
			if (good && is_big) {
				memset(big, (int)(x[i] & 0xff), sizeof(big));
				good = len == sizeof(big) && !memcmp(data, big, len);
			} else if (good) {
				good = len == 8;
				if (good) {
					memcpy(&y, data, 8);
					good = y == mix64(x[i]);
				}
			}
			if (good)
				s->ok++;
			else
				s->bad++;
			knitk_call_release(calls[i]);
		}
		done += n;
	}
	return NULL;
}

static void run_calls(unsigned int kind, const char *name)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind, .nr_workers = 2,
				     .nr_submitters = SUBMITTERS };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	pthread_t th[SUBMITTERS];
	struct sub s[SUBMITTERS];
	unsigned long ok = 0, bad = 0;
	uint64_t t0, t1;
	unsigned int i;
	int ret;

	ret = knitk_pool_create(&o, &test_tasks, &pool);
	CHECK_EQ(ret, 0);
	if (ret)
		return;
	t0 = tap_now_ns();
	for (i = 0; i < SUBMITTERS; i++) {
		s[i] = (struct sub){ pool, i, nr_calls / SUBMITTERS +
				     (i < nr_calls % SUBMITTERS), 0, 0 };
		pthread_create(&th[i], NULL, submitter, &s[i]);
	}
	for (i = 0; i < SUBMITTERS; i++) {
		pthread_join(th[i], NULL);
		ok += s[i].ok;
		bad += s[i].bad;
	}
	t1 = tap_now_ns();
	CHECK_EQ(ok, nr_calls);
	CHECK_EQ(bad, 0);
	CHECK_EQ(knitk_pool_stats(pool, &st), 0);
	CHECK_EQ(st.submitted, nr_calls);
	CHECK_EQ(st.completed, nr_calls);
	CHECK_EQ(st.stale, 0);
	CHECK_EQ(st.ownerdead + st.timedout + st.canceled, 0);
	printf("# %s: %lu calls from %d threads to 2 workers in %.3f s: %.0f calls/s\n",
	       name, nr_calls, SUBMITTERS, (t1 - t0) / 1e9,
	       nr_calls / ((t1 - t0) / 1e9));
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	knitk_pool_destroy(pool);
}

static void calls_threads(void)
{
	run_calls(KNITK_WORKER_THREADS, "thread workers");
}

static void calls_processes(void)
{
	run_calls(KNITK_WORKER_PROCESSES, "process workers");
}

/* Synchronous calls, inline and arena sized results, errors. */
static void sync_calls(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 2 };
	struct knitk_pool *pool;
	unsigned char out[8192];
	unsigned char arg[5] = { 0 };
	uint32_t n = 5000;
	int32_t e = EDOM;
	size_t len = 0;
	uint64_t x = 42, y;
	unsigned int i;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	CHECK_EQ(knitk_pool_call(pool, T_MIX, &x, sizeof(x), NULL, &y, sizeof(y), &len), 0);
	CHECK_EQ(len, 8);
	CHECK(y == mix64(42));
	memcpy(arg, &n, 4);
	arg[4] = 7;
	CHECK_EQ(knitk_pool_call(pool, T_FILL, arg, sizeof(arg), NULL, out, sizeof(out), &len), 5000);
	CHECK_EQ(len, 5000);
	for (i = 0; i < 5000; i++)
		if (out[i] != (unsigned char)(7 + i))
			break;
	CHECK_EQ(i, 5000);
	CHECK_EQ(knitk_pool_call(pool, T_FAIL, &e, sizeof(e), NULL, NULL, 0, NULL), -EDOM);
	/* Zero-length argument and result. */
	CHECK_EQ(knitk_pool_call(pool, T_ECHO, NULL, 0, NULL, NULL, 0, &len), 0);
	CHECK_EQ(len, 0);
	knitk_pool_destroy(pool);
}

/*
 * knitk_pool_call's result lands in the caller's buffer: at most @cap
 * bytes, the full length in *out_len, nothing past the buffer (a canary
 * after it), for results inline and in the arena, with every cap around
 * the result's size; threads and processes, private lanes and stealing.
 */
static void result_into_buffer_edges(void)
{
	static const uint32_t sizes[] = { 0, 1, 63, 64, 65, 1000, 16000 };
	static unsigned char out[16000 + 1 + 16];
	unsigned int kind, steal, i, c;

	for (kind = 0; kind < 2; kind++)
	for (steal = 0; steal < 2; steal++) {
		struct knitk_pool_opts o = {
			.size = sizeof(o), .nr_workers = 2,
			.kind = kind ? KNITK_WORKER_PROCESSES : KNITK_WORKER_THREADS,
			.dispatch = steal ? KNITK_POOL_DISPATCH_STEAL :
					    KNITK_POOL_DISPATCH_PRIVATE,
		};
		struct knitk_pool *pool;
		unsigned int bad = 0;

		REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (c = 0; c < 4; c++) {
			uint32_t n = sizes[i];
			size_t cap = c == 0 ? 0 : n + c - 2, len = 12345, j;
			unsigned char arg[5], seed = (unsigned char)(n + c);
			int ret;

			if (c && n + c < 2)
				continue;
			memcpy(arg, &n, 4);
			arg[4] = seed;
			memset(out, 0xa5, sizeof(out));
			ret = knitk_pool_call(pool, T_FILL, arg, sizeof(arg), NULL,
					      cap ? out : NULL, cap, &len);
			if (ret != (int)n || len != n)
				bad++;
			for (j = 0; j < cap && j < n; j++)
				if (out[j] != (unsigned char)(seed + j))
					break;
			if (j != (cap < n ? cap : n))
				bad++;
			for (j = cap < n ? cap : n; j < sizeof(out); j++)
				if (out[j] != 0xa5)
					break;
			if (j != sizeof(out))
				bad++;
		}
		CHECK_EQ(bad, 0);
		knitk_pool_destroy(pool);
	}
}

struct own_caller {
	struct knitk_pool *pool;
	unsigned int id, n, bad;
};

static void *own_caller_run(void *arg)
{
	struct own_caller *oc = arg;
	unsigned char out[300];
	unsigned int i;

	for (i = 0; i < oc->n; i++) {
		/* The result's size and bytes say which call it is. */
		uint32_t n = 1 + (oc->id * 131 + i * 7) % 290;
		unsigned char arg[5], seed = (unsigned char)(oc->id * 64 + i);
		size_t len = 0, j;

		memcpy(arg, &n, 4);
		arg[4] = seed;
		if (knitk_pool_call(oc->pool, T_FILL, arg, sizeof(arg), NULL,
				    out, sizeof(out), &len) != (int)n || len != n) {
			oc->bad++;
			continue;
		}
		for (j = 0; j < n; j++)
			if (out[j] != (unsigned char)(seed + j))
				break;
		oc->bad += j != n;
	}
	return NULL;
}

/*
 * Threads calling at once share the drainer role: whoever drains hands
 * every other caller its own result, and keeps its own, never another's.
 */
static void pool_call_results_own_threads(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 2 };
	struct own_caller oc[4];
	pthread_t t[4];
	unsigned int i, bad = 0, per = nr_calls / 40 > 2000 ? 2000 : nr_calls / 40 + 1;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &oc[0].pool) == 0);
	for (i = 0; i < 4; i++) {
		oc[i] = (struct own_caller){ .pool = oc[0].pool, .id = i, .n = per };
		REQUIRE(pthread_create(&t[i], NULL, own_caller_run, &oc[i]) == 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		bad += oc[i].bad;
	}
	CHECK_EQ(bad, 0);
	knitk_pool_destroy(oc[0].pool);
}

/* Batch submit, wait for any, and the wait timeout. */
static void batch_and_any(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 2 };
	struct knitk_submission subs[8];
	struct knitk_call *c[8], *slow;
	struct knitk_pool *pool;
	uint64_t x[8];
	uint32_t ms = 60000;
	unsigned int i, left = 8;
	int idx;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	for (i = 0; i < 8; i++) {
		x[i] = i + 100;
		subs[i] = (struct knitk_submission){ .fn = T_MIX, .in = &x[i], .len = 8 };
	}
	CHECK_EQ(knitk_pool_submit_batch(pool, subs, 8, c), 8);
	/* wait_any hands back done calls one by one. */
	while (left) {
		const void *d;
		size_t len;
		uint64_t y;

		idx = knitk_pool_wait_any(pool, c, left, KNITK_WAIT_FOREVER);
		REQUIRE(idx >= 0 && (unsigned int)idx < left);
		CHECK_EQ(knitk_call_status(c[idx]), 0);
		CHECK_EQ(knitk_call_result(c[idx], &d, &len), 0);
		memcpy(&y, d, 8);
		for (i = 0; i < 8; i++)
			if (y == mix64(x[i]))
				break;
		CHECK(i < 8);
		knitk_call_release(c[idx]);
		c[idx] = c[--left];
	}
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &slow) == 0);
	CHECK_EQ(knitk_call_wait(slow, 0), -EINPROGRESS);
	CHECK_EQ(knitk_pool_wait_any(pool, &slow, 1, after_ms(10)), -EINPROGRESS);
	CHECK_EQ(knitk_call_status(slow), -EINPROGRESS);
	/* Runs for a minute unless aborted. */
	CHECK_EQ(knitk_call_abort(slow), 0);
	CHECK_EQ(knitk_call_wait(slow, KNITK_WAIT_FOREVER), -ECANCELED);
	knitk_call_release(slow);
	knitk_pool_destroy(pool);
}

/* Process workers behind a command prefix (a sandbox would go there). */
static void prefix_command(void)
{
	static char *const prefix[] = { "env", "KNITK_PREFIX_TEST=1", NULL };
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
				     .prefix_argv = prefix };
	struct knitk_pool *pool;
	unsigned int i;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	for (i = 0; i < 10; i++)
		CHECK_EQ(knitk_pool_call(pool, T_ENV, NULL, 0, NULL, NULL, 0, NULL), 1);
	knitk_pool_destroy(pool);
	/* In the host the variable is not set: the prefix ran in the child. */
	CHECK(getenv("KNITK_PREFIX_TEST") == NULL);
}

/* A worker binary that never joins: -ECHILD, nothing left behind. */
static void worker_never_joins(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 1,
				     .worker_path = "/bin/true" };
	struct knitk_pool *pool = NULL;

	CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -ECHILD);
	CHECK(pool == NULL);
}

int main(int argc, char **argv)
{
	int ret = knitk_worker_main(argc, argv, &test_tasks, NULL);

	if (ret)
		return 2;
	if (argc > 1)
		nr_calls = strtoul(argv[1], NULL, 0);
	TEST(sync_calls);
	TEST(result_into_buffer_edges);
	TEST(pool_call_results_own_threads);
	TEST(batch_and_any);
	TEST(prefix_command);
	TEST(worker_never_joins);
	TEST(calls_threads);
	TEST(calls_processes);
	return tap_exit();
}
