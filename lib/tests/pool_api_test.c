// SPDX-License-Identifier: GPL-2.0
/*
 * Every pool API function rejects bad arguments with the documented errno.
 */
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"

static void create_args(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o) };
	const knitk_task_fn holes[2] = { task_echo, NULL };
	struct knitk_task_table empty = { .tasks = test_task_fns, .nr_tasks = 0 };
	struct knitk_task_table holey = { .tasks = holes, .nr_tasks = 2 };
	struct knitk_pool *pool = NULL;

	CHECK_EQ(knitk_pool_create(NULL, &test_tasks, &pool), -EINVAL);
	CHECK_EQ(knitk_pool_create(&o, &test_tasks, NULL), -EINVAL);
	CHECK_EQ(knitk_pool_create(&o, NULL, &pool), -EINVAL);
	CHECK_EQ(knitk_pool_create(&o, &empty, &pool), -EINVAL);
	CHECK_EQ(knitk_pool_create(&o, &holey, &pool), -EINVAL);
	o.kind = 7;
	CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
	o = (struct knitk_pool_opts){ .size = sizeof(o), .nr_workers = KNITK_MAX_WORKERS + 1 };
	CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
	o = (struct knitk_pool_opts){ .size = sizeof(o),
				      .nr_submitters = KNITK_MAX_SUBMITTERS + 1 };
	CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
	o = (struct knitk_pool_opts){ .size = sizeof(o), .flags = 1U << 30 };
	CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
	/* Respawn is for processes only. */
	o = (struct knitk_pool_opts){ .size = sizeof(o), .flags = KNITK_POOL_RESPAWN };
	CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
	/* A geometry the knot refuses. */
	o = (struct knitk_pool_opts){ .size = sizeof(o), .inline_bytes = 100 };
	CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
	o = (struct knitk_pool_opts){ .size = sizeof(o), .arena_bytes = 1000 };
	CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
	CHECK(pool == NULL);
}

static void call_args(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 2, .arena_bytes = 4096 };
	struct knitk_call_opts co = { .size = sizeof(co) };
	struct knitk_call *c = NULL, *c2, *calls[1];
	struct knitk_submission sub = { .fn = T_ECHO };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_endpoint *knot;
	struct knitk_pool *pool;
	static char big[8192];
	const void *data;
	size_t len;
	void *buf;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	CHECK_EQ(knitk_pool_submit(NULL, T_ECHO, "x", 1, NULL, &c), -EINVAL);
	CHECK_EQ(knitk_pool_submit(pool, T_ECHO, "x", 1, NULL, NULL), -EINVAL);
	CHECK_EQ(knitk_pool_submit(pool, T_NR, "x", 1, NULL, &c), -EINVAL);
	CHECK_EQ(knitk_pool_submit(pool, T_ECHO, NULL, 1, NULL, &c), -EINVAL);
	CHECK_EQ(knitk_pool_submit(pool, T_ECHO, big, sizeof(big), NULL, &c), -EMSGSIZE);
	co.flags = 1U << 9;
	CHECK_EQ(knitk_pool_submit(pool, T_ECHO, "x", 1, &co, &c), -EINVAL);
	co.flags = KNITK_CALL_WORKER;
	co.worker = 2;
	CHECK_EQ(knitk_pool_submit(pool, T_ECHO, "x", 1, &co, &c), -EINVAL);

	CHECK_EQ(knitk_pool_submit_batch(NULL, &sub, 1, calls), -EINVAL);
	CHECK_EQ(knitk_pool_submit_batch(pool, NULL, 1, calls), -EINVAL);
	CHECK_EQ(knitk_pool_submit_batch(pool, &sub, 0, calls), -EINVAL);
	CHECK_EQ(knitk_pool_submit_batch(pool, &sub, 1, NULL), -EINVAL);
	sub.reserved = 1;
	CHECK_EQ(knitk_pool_submit_batch(pool, &sub, 1, calls), -EINVAL);

	CHECK_EQ(knitk_call_wait(NULL, 0), -EINVAL);
	CHECK_EQ(knitk_call_status(NULL), -EINVAL);
	CHECK_EQ(knitk_call_abort(NULL), -EINVAL);
	CHECK_EQ(knitk_pool_call(NULL, T_ECHO, "x", 1, NULL, NULL, 0, NULL), -EINVAL);
	CHECK_EQ(knitk_pool_call(pool, T_ECHO, "x", 1, NULL, NULL, 4, NULL), -EINVAL);
	CHECK_EQ(knitk_pool_stats(NULL, &st), -EINVAL);
	CHECK_EQ(knitk_pool_stats(pool, NULL), -EINVAL);
	CHECK_EQ(knitk_pool_worker_info(pool, 2, &wi), -EINVAL);
	CHECK_EQ(knitk_pool_worker_info(pool, 0, NULL), -EINVAL);
	CHECK_EQ(knitk_pool_worker_info(NULL, 0, &wi), -EINVAL);
	CHECK_EQ(knitk_pool_endpoint(NULL, &knot), -EINVAL);
	CHECK_EQ(knitk_pool_endpoint(pool, NULL), -EINVAL);
	CHECK_EQ(knitk_pool_shutdown(NULL, KNITK_SHUTDOWN_DRAIN), -EINVAL);
	CHECK_EQ(knitk_pool_shutdown(pool, 0), -EINVAL);
	CHECK_EQ(knitk_reply_alloc(NULL, 1, &buf), -EINVAL);
	CHECK_EQ(knitk_reply_set(NULL, "x", 1), -EINVAL);
	CHECK_EQ(knitk_task_aborted(NULL), -EINVAL);
	CHECK(knitk_task_data(NULL) == NULL);
	CHECK_EQ(knitk_worker_main(0, NULL, NULL, NULL), -EINVAL);
	/* In the host, not a worker. */
	CHECK_EQ(knitk_worker_main(0, NULL, &test_tasks, NULL), 0);

	/* A real call for the handle functions. */
	REQUIRE(knitk_pool_submit(pool, T_ECHO, "abc", 3, NULL, &c) == 0);
	CHECK_EQ(knitk_pool_wait_any(NULL, &c, 1, KNITK_WAIT_FOREVER), -EINVAL);
	CHECK_EQ(knitk_pool_wait_any(pool, NULL, 1, KNITK_WAIT_FOREVER), -EINVAL);
	CHECK_EQ(knitk_pool_wait_any(pool, &c, 0, KNITK_WAIT_FOREVER), -EINVAL);
	calls[0] = NULL;
	CHECK_EQ(knitk_pool_wait_all(pool, calls, 1, KNITK_WAIT_FOREVER), -EINVAL);
	CHECK_EQ(knitk_pool_wait_any(pool, &c, 1, KNITK_WAIT_FOREVER), 0);
	CHECK_EQ(knitk_call_result(c, NULL, &len), -EINVAL);
	CHECK_EQ(knitk_call_result(c, &data, NULL), -EINVAL);
	CHECK_EQ(knitk_call_result(c, &data, &len), 0);
	CHECK_EQ(len, 3);
	CHECK(!memcmp(data, "abc", 3));
	CHECK_EQ(knitk_call_abort(c), -EALREADY);
	/* A handle of another pool. */
	{
		struct knitk_pool *other;

		REQUIRE(knitk_pool_create(&o, &test_tasks, &other) == 0);
		CHECK_EQ(knitk_pool_wait_any(other, &c, 1, KNITK_WAIT_FOREVER), -EINVAL);
		knitk_pool_destroy(other);
	}
	knitk_call_release(c);
	knitk_call_release(NULL);

	/* After shutdown: -ESHUTDOWN, then -EALREADY. */
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	CHECK_EQ(knitk_pool_submit(pool, T_ECHO, "x", 1, NULL, &c2), -ESHUTDOWN);
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_CANCEL), -EALREADY);
	knitk_pool_destroy(pool);
	knitk_pool_destroy(NULL);
}

/* A handle outlives its pool; the pool's memory goes with the last one. */
static void handle_outlives_pool(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 1 };
	struct knitk_pool *pool;
	struct knitk_call *c;
	const void *data;
	size_t len;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_ECHO, "hello", 5, NULL, &c) == 0);
	CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), 0);
	knitk_pool_destroy(pool);
	CHECK_EQ(knitk_call_status(c), 0);
	CHECK_EQ(knitk_call_result(c, &data, &len), 0);
	CHECK_EQ(len, 5);
	knitk_call_release(c);
}

/* In a copy of this program that has deleted itself: a process pool. */
static int run_deleted_self(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = KNITK_WORKER_PROCESSES,
				     .nr_workers = 2 };
	struct knitk_pool *pool;
	char path[4096], out[8];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	size_t len = 0;
	int ret;

	if (n <= 0)
		return 10;
	path[n] = '\0';
	if (unlink(path))
		return 11;
	ret = knitk_pool_create(&o, &test_tasks, &pool);
	if (ret)
		return 12;
	ret = knitk_pool_call(pool, T_ECHO, "gone", 4, NULL, out, sizeof(out),
			      &len);
	knitk_pool_destroy(pool);
	return ret == 0 && len == 4 && !memcmp(out, "gone", 4) ? 0 : 13;
}

/*
 * Process workers still start when the host's binary was replaced or
 * deleted on disk while it runs (a rebuild under a long-running host).
 */
static void process_workers_after_binary_deleted(void)
{
	char copy[] = "/tmp/knitk-pool-api-XXXXXX", buf[65536];
	char *argv[] = { copy, "--deleted-self", NULL };
	extern char **environ;
	int in, outfd, status;
	ssize_t n;
	pid_t pid;

	in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	REQUIRE(in >= 0);
	outfd = mkstemp(copy);
	REQUIRE(outfd >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		REQUIRE(write(outfd, buf, (size_t)n) == n);
	close(in);
	REQUIRE(fchmod(outfd, 0700) == 0);
	close(outfd);
	REQUIRE(posix_spawn(&pid, copy, NULL, NULL, argv, environ) == 0);
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
	CHECK(access(copy, F_OK) != 0);
	unlink(copy);
}

/*
 * KNITK_POOL_FALLBACK_FUTEX is opt-in and refused with KNITK_KNOT_KMOD;
 * without a refusal knitk_last_error() stays NULL.  (The RLIMIT_MEMLOCK
 * refusal itself needs the module: the guest's knot_test
 * memlock_refusal_explained_and_fallback.)
 */
static void fallback_futex_flag(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 1,
				     .flags = KNITK_POOL_FALLBACK_FUTEX };
	struct knitk_endpoint *ep;
	struct knitk_pool *pool;

	o.knot_flags = KNITK_KNOT_KMOD;
	CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
	o.knot_flags = KNITK_KNOT_FUTEX;
	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	CHECK(knitk_last_error() == NULL);
	CHECK_EQ(knitk_pool_endpoint(pool, &ep), 0);
	CHECK_EQ(knitk_endpoint_backend(ep), KNITK_BACKEND_FUTEX);
	CHECK_EQ(mix_calls_good(pool, 10, NULL, 1, 1), 10);
	knitk_pool_destroy(pool);
	o.flags = 1U << 2;
	CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
}

/*
 * opts.spin is an unsigned int: every value works, for thread and process
 * workers alike (a process worker once refused a spin above INT_MAX and
 * the pool failed to start, -ECHILD).
 */
static void spin_full_range(void)
{
	static const unsigned int spins[] = { 1, 1U << 31, UINT_MAX };
	static const unsigned int kinds[] = { KNITK_WORKER_THREADS,
					      KNITK_WORKER_PROCESSES };
	unsigned int k, i;

	for (k = 0; k < 2; k++)
		for (i = 0; i < 3; i++) {
			struct knitk_pool_opts o = { .size = sizeof(o),
						     .kind = kinds[k],
						     .nr_workers = 1,
						     .spin = spins[i] };
			struct knitk_pool *pool;
			uint64_t x = 0x5eed + i, y = 0;
			size_t len = 0;
			int ret;

			ret = knitk_pool_create(&o, &test_tasks, &pool);
			CHECK_EQ(ret, 0);
			if (ret)
				continue;
			CHECK_EQ(knitk_pool_call(pool, T_MIX, &x, 8, NULL,
						 &y, 8, &len), 0);
			CHECK_EQ(len, 8);
			CHECK_EQ(y, mix64(x));
			knitk_pool_destroy(pool);
		}
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	if (argc == 2 && !strcmp(argv[1], "--deleted-self"))
		return run_deleted_self();
	TEST(create_args);
	TEST(call_args);
	TEST(handle_outlives_pool);
	TEST(process_workers_after_binary_deleted);
	TEST(fallback_futex_flag);
	TEST(spin_full_range);
	return tap_exit();
}
