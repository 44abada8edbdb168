// SPDX-License-Identifier: GPL-2.0
/*
 * The stealing pool's geometry: every legal and illegal (workers, g)
 * pair of the header's rule, the sized opts and stats of a stealing pool,
 * and calls as large as the arena on thread and process workers.
 * argv[1] (the runner's call count) is ignored: the counts are small.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_parked.h"
#include "pool_tasks.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

/*
 * The version-1 fields through the sized-struct rule: an opts that ends
 * inside version 1 (with @dispatch, without @steal_region) makes a
 * stealing pool; one past the library's size is -E2BIG unless its tail
 * is zero.  Version-0 stats and worker info get only their own bytes.
 */
static void sized_steal_opts_and_stats(void)
{
	static unsigned char big[sizeof(struct knitk_pool_opts) + 16];
	struct knitk_pool_opts *o = (struct knitk_pool_opts *)big;
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER };
	unsigned char st[KNITK_POOL_STATS_SIZE_VER1 + 16];
	unsigned char wi[KNITK_WORKER_INFO_SIZE_VER1 + 16];
	struct knitk_pool *pool = NULL;
	struct knitk_call *c;
	uint64_t x = 1;
	uint32_t sz;
	unsigned int i;

	memset(big, 0, sizeof(big));
	o->nr_workers = 2;
	o->knot_flags = KNITK_KNOT_FUTEX;
	o->arena_bytes = 4096;
	o->dispatch = KNITK_POOL_DISPATCH_STEAL;
	o->size = (uint32_t)offsetof(struct knitk_pool_opts, steal_region);
	REQUIRE(knitk_pool_create(o, &test_tasks, &pool) == 0);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &pin, &c), -EINVAL);
	CHECK_EQ(mix_calls_good(pool, 3, NULL, 1, 1), 3);

	memset(st, 0xee, sizeof(st));
	sz = KNITK_POOL_STATS_SIZE_VER0;
	memcpy(st, &sz, 4);
	CHECK_EQ(knitk_pool_stats(pool, (struct knitk_pool_stats *)st), 0);
	memcpy(&sz, st, 4);
	CHECK_EQ(sz, KNITK_POOL_STATS_SIZE_VER0);
	for (i = KNITK_POOL_STATS_SIZE_VER0; i < sizeof(st); i++)
		if (st[i] != 0xee)
			break;
	CHECK_EQ(i, sizeof(st));

	memset(wi, 0xee, sizeof(wi));
	sz = KNITK_WORKER_INFO_SIZE_VER0;
	memcpy(wi, &sz, 4);
	CHECK_EQ(knitk_pool_worker_info(pool, 0, (struct knitk_worker_info *)wi), 0);
	memcpy(&sz, wi, 4);
	CHECK_EQ(sz, KNITK_WORKER_INFO_SIZE_VER0);
	for (i = KNITK_WORKER_INFO_SIZE_VER0; i < sizeof(wi); i++)
		if (wi[i] != 0xee)
			break;
	CHECK_EQ(i, sizeof(wi));
	CHECK_EQ(knitk_pool_worker_info(pool, 2, (struct knitk_worker_info *)wi), -EINVAL);
	knitk_pool_destroy(pool);

	o->size = sizeof(big);
	o->steal_region = 16;
	REQUIRE(knitk_pool_create(o, &test_tasks, &pool) == 0);
	knitk_pool_destroy(pool);
	big[sizeof(big) - 1] = 1;
	CHECK_EQ(knitk_pool_create(o, &test_tasks, &pool), -E2BIG);
	o->size = KNITK_POOL_OPTS_SIZE_VER0 - 1;
	CHECK_EQ(knitk_pool_create(o, &test_tasks, &pool), -EINVAL);
	o->size = KNITK_SIZED_MAX + 1;
	CHECK_EQ(knitk_pool_create(o, &test_tasks, &pool), -E2BIG);
}

/* Legal stealing geometries, from the header's words alone. */
static int legal_g(unsigned int workers, unsigned int g)
{
	unsigned int best = 0, x;

	if (workers < 1 || workers > 63)
		return -EINVAL;
	for (x = 1; x <= 64; x <<= 1)
		if (64 / x >= workers + 1)
			best = x;
	if (!g)
		return (int)best;
	if (g & (g - 1) || g > 64 || 64 / g < workers + 1)
		return -EINVAL;
	return (int)g;
}

/*
 * knitk_steal_region_lanes over every worker count and region size, and
 * knitk_pool_create of a stealing pool for a selection: legal exactly
 * when the formula says, -EINVAL otherwise, and a refused create leaves
 * no fd behind.  The default worker count counts too.
 */
static void steal_geometry_matrix(void)
{
	static const unsigned int ws[] = { 1, 2, 3, 7, 31, 32, 63, 64 };
	static const unsigned int gs[] = { 0, 1, 2, 3, 4, 8, 16, 24, 32, 64, 128,
					   UINT_MAX, 1U << 31 };
	unsigned int w, g, i, j, wrong = 0;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int before = count_fds(false);

	for (w = 0; w <= 70; w++)
		for (g = 0; g <= 130; g++)
			wrong += knitk_steal_region_lanes(w, g) != legal_g(w, g);
	for (i = 0; i < sizeof(gs) / sizeof(gs[0]); i++)
		wrong += knitk_steal_region_lanes(5, gs[i]) != legal_g(5, gs[i]);
	CHECK_EQ(wrong, 0);

	for (i = 0; i < sizeof(ws) / sizeof(ws[0]); i++) {
		for (j = 0; j < sizeof(gs) / sizeof(gs[0]); j++) {
			struct knitk_pool_opts o = { .size = sizeof(o),
				.nr_workers = ws[i], .knot_flags = KNITK_KNOT_FUTEX,
				.arena_bytes = 4096,
				.dispatch = KNITK_POOL_DISPATCH_STEAL,
				.steal_region = gs[j] };
			struct knitk_pool *pool = NULL;
			int want = legal_g(ws[i], gs[j]) > 0 ? 0 : -EINVAL;
			int ret;

			/* Only the cheap ones run: the rest must fail. */
			if (!want && ws[i] > 7 && gs[j])
				continue;
			ret = knitk_pool_create(&o, &test_tasks, &pool);
			if (ret != want) {
				printf("# workers %u g %u: %d, expected %d\n",
				       ws[i], gs[j], ret, want);
				wrong++;
			}
			if (!ret) {
				uint64_t x = ws[i];
				struct knitk_call_opts pin = { .size = sizeof(pin),
					.flags = KNITK_CALL_WORKER };
				struct knitk_call *c = NULL;

				wrong += mix_calls_good(pool, 3, NULL, x, 1) != 3;
				wrong += knitk_pool_submit(pool, T_MIX, &x, 8, &pin, &c) != -EINVAL;
				knitk_pool_destroy(pool);
			}
		}
	}
	/* The default worker count (online CPUs) decides too. */
	for (g = 1; g <= 64; g <<= 1) {
		struct knitk_pool_opts o = { .size = sizeof(o),
			.knot_flags = KNITK_KNOT_FUTEX, .arena_bytes = 4096,
			.dispatch = KNITK_POOL_DISPATCH_STEAL, .steal_region = g };
		struct knitk_pool *pool = NULL;
		unsigned int def = cpus > 63 ? 63 : (unsigned int)cpus;
		int want = legal_g(def, g) > 0 ? 0 : -EINVAL;
		int ret = knitk_pool_create(&o, &test_tasks, &pool);

		if (ret != want) {
			printf("# default workers (%u) g %u: %d, expected %d\n",
			       def, g, ret, want);
			wrong++;
		}
		if (!ret)
			knitk_pool_destroy(pool);
	}
	/* An unknown dispatch, and stealing from a version-0 opts (none). */
	{
		struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 1,
			.knot_flags = KNITK_KNOT_FUTEX, .dispatch = 2 };
		struct knitk_pool *pool = NULL;

		wrong += knitk_pool_create(&o, &test_tasks, &pool) != -EINVAL;
		o.dispatch = UINT_MAX;
		wrong += knitk_pool_create(&o, &test_tasks, &pool) != -EINVAL;
	}
	CHECK_EQ(wrong, 0);
	CHECK_EQ(count_fds(false), before);
}

/*
 * A stealing pool carries a call and a result as large as the arena, in
 * event mode and not, thread and process workers; one byte more is
 * -EMSGSIZE (submit) and loses nothing.
 */
static void steal_arena_sized(unsigned int kind, int events)
{
	static unsigned char buf[ARENA + 1];
	static const size_t lens[] = { 0, 1, 191, 192, 193, 4096, ARENA - 1, ARENA };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c, *out[1];
	unsigned int i, bad = 0;

	REQUIRE(new_pool(kind, KNITK_POOL_DISPATCH_STEAL, 2, 0, &pool) == 0);
	if (events)
		REQUIRE(knitk_pool_event_fd(pool) >= 0);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		const void *d;
		size_t len;
		int s, n;

		REQUIRE(knitk_pool_submit(pool, T_ECHO, buf, lens[i], NULL, &c) == 0);
		if (events) {
			while ((n = knitk_pool_reap(pool, out, 1)) == 0)
				sched_yield();
			REQUIRE(n == 1 && out[0] == c);
		}
		s = knitk_call_wait(c, KNITK_WAIT_FOREVER);
		if (s != (int)0 || knitk_call_result(c, &d, &len) || len != lens[i] ||
		    (len && memcmp(d, buf, len))) {
			printf("# len %zu: status %d\n", lens[i], s);
			bad++;
		}
		knitk_call_release(c);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(knitk_pool_submit(pool, T_ECHO, buf, ARENA + 1, NULL, &c), -EMSGSIZE);
	{
		uint32_t fill[2] = { ARENA + 1, 0 };

		/* A result one byte too big: the call, not the pool, fails. */
		REQUIRE(knitk_pool_submit(pool, T_FILL, fill, 5, NULL, &c) == 0);
		if (events)
			while (knitk_pool_reap(pool, out, 1) == 0)
				sched_yield();
		CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -EMSGSIZE);
		knitk_call_release(c);
	}
	if (!events)
		CHECK_EQ(mix_calls_good(pool, 50, NULL, 1, 1), 50);
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(pool);
}

static void steal_arena_sized_threads(void)
{
	steal_arena_sized(KNITK_WORKER_THREADS, 0);
}

static void steal_arena_sized_threads_events(void)
{
	steal_arena_sized(KNITK_WORKER_THREADS, 1);
}

static void steal_arena_sized_processes(void)
{
	steal_arena_sized(KNITK_WORKER_PROCESSES, 0);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(steal_geometry_matrix);
	TEST(sized_steal_opts_and_stats);
	TEST(steal_arena_sized_threads);
	TEST(steal_arena_sized_threads_events);
	TEST(steal_arena_sized_processes);
	return tap_exit();
}
