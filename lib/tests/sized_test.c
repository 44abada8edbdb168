// SPDX-License-Identifier: GPL-2.0
/*
 * The sized structs of the library ABI ("Sized structs" in knitk.h).
 *
 * Built against the test library, which acts as its next version: it knows
 * KNITK__SIZED_GROWTH more bytes of every output struct (sized.h).  This
 * program, compiled against the current header, is then the older binary:
 * it must get its structs filled up to its size and not one byte further
 * (guard bytes), while a newer caller gets the extra bytes.  Inputs: larger
 * structs are accepted only with a zero tail, sizes out of range refused.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "knitk.h"
#include "../sized.h"
#include "tap.h"
#include "pool_tasks.h"

#define GUARD		0x5a
#define GUARD_BYTES	64

/* A caller's output struct followed by guard bytes. */
union out_buf {
	struct knitk_pool_stats stats;
	struct knitk_worker_info info;
	struct knitk_wake_stats wake;
	struct knitk_pages pages;
	unsigned char b[256];
};

static void out_init(union out_buf *u, uint32_t size)
{
	memset(u, GUARD, sizeof(*u));
	memcpy(u->b, &size, sizeof(size));
}

/* Bytes [from, to) are all @v. */
static int bytes_are(const union out_buf *u, size_t from, size_t to, int v)
{
	size_t i;

	for (i = from; i < to; i++)
		if (u->b[i] != (unsigned char)v)
			return 0;
	return 1;
}

static struct knitk_pool *pool_up(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 2 };
	struct knitk_pool *pool = NULL;
	uint64_t x = 7;
	int i;

	if (knitk_pool_create(&o, &test_tasks, &pool))
		return NULL;
	for (i = 0; i < 3; i++)
		if (knitk_pool_call(pool, T_ECHO, &x, sizeof(x), NULL, NULL, 0,
				    NULL) != 0) {
			knitk_pool_destroy(pool);
			return NULL;
		}
	return pool;
}

_Static_assert(sizeof(union out_buf) >= sizeof(struct knitk_worker_info) +
	       KNITK__SIZED_GROWTH + GUARD_BYTES, "room for the guard");

/* The older binary: filled up to its size, nothing written past it. */
static void stats_older_caller_filled_to_its_size(void)
{
	const size_t n = sizeof(struct knitk_pool_stats);
	struct knitk_pool *pool = pool_up();
	union out_buf u;

	REQUIRE(pool);
	out_init(&u, n);
	CHECK_EQ(knitk_pool_stats(pool, &u.stats), 0);
	CHECK_EQ(u.stats.size, n);
	CHECK_EQ(u.stats.submitted, 3);
	CHECK_EQ(u.stats.completed, 3);
	CHECK_EQ(u.stats.deaths, 0);
	CHECK(bytes_are(&u, n, sizeof(u), GUARD));
	knitk_pool_destroy(pool);
}

/* A newer caller gets every byte the library knows, and no more. */
static void stats_newer_caller_gets_known_bytes(void)
{
	const size_t n = sizeof(struct knitk_pool_stats);
	const size_t known = n + KNITK__SIZED_GROWTH;
	struct knitk_pool *pool = pool_up();
	union out_buf u;

	REQUIRE(pool);
	out_init(&u, known + GUARD_BYTES);
	CHECK_EQ(knitk_pool_stats(pool, &u.stats), 0);
	CHECK_EQ(u.stats.size, known);
	CHECK_EQ(u.stats.completed, 3);
	CHECK(bytes_are(&u, n, known, KNITK__SIZED_FILL));
	CHECK(bytes_are(&u, known, sizeof(u), GUARD));
	knitk_pool_destroy(pool);
}

/* Too small or absurdly large: refused, nothing written. */
static void stats_bad_sizes_refused(void)
{
	static const uint32_t bad[] = { 0, 4, KNITK_POOL_STATS_SIZE_VER0 - 1 };
	struct knitk_pool *pool = pool_up();
	union out_buf u;
	unsigned int i;

	REQUIRE(pool);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		out_init(&u, bad[i]);
		CHECK_EQ(knitk_pool_stats(pool, &u.stats), -EINVAL);
		CHECK(bytes_are(&u, sizeof(uint32_t), sizeof(u), GUARD));
	}
	out_init(&u, KNITK_SIZED_MAX + 1);
	CHECK_EQ(knitk_pool_stats(pool, &u.stats), -E2BIG);
	CHECK(bytes_are(&u, sizeof(uint32_t), sizeof(u), GUARD));
	knitk_pool_destroy(pool);
}

static void worker_info_older_caller_filled_to_its_size(void)
{
	const size_t n = sizeof(struct knitk_worker_info);
	struct knitk_pool *pool = pool_up();
	unsigned int w, calls = 0;
	union out_buf u;

	REQUIRE(pool);
	for (w = 0; w < 2; w++) {
		out_init(&u, n);
		CHECK_EQ(knitk_pool_worker_info(pool, w, &u.info), 0);
		CHECK_EQ(u.info.size, n);
		CHECK_EQ(u.info.alive, 1);
		CHECK_EQ(u.info.reserved, 0);
		CHECK_EQ(u.info.db_valid, 1);
		calls += u.info.calls;
		CHECK(bytes_are(&u, n, sizeof(u), GUARD));
	}
	CHECK_EQ(calls, 3);
	out_init(&u, KNITK_WORKER_INFO_SIZE_VER0 - 8);
	CHECK_EQ(knitk_pool_worker_info(pool, 0, &u.info), -EINVAL);
	CHECK(bytes_are(&u, sizeof(uint32_t), sizeof(u), GUARD));
	knitk_pool_destroy(pool);
}

static void wake_stats_older_caller_filled_to_its_size(void)
{
	const size_t n = sizeof(struct knitk_wake_stats);
	struct knitk_pool *pool = pool_up();
	struct knitk_endpoint *knot;
	union out_buf u;

	REQUIRE(pool);
	REQUIRE(knitk_pool_endpoint(pool, &knot) == 0);
	out_init(&u, n);
	CHECK_EQ(knitk_endpoint_wake_stats(knot, &u.wake), 0);
	CHECK_EQ(u.wake.size, n);
	CHECK_EQ(u.wake.reserved, 0);
	/* Three calls rang their workers: each ring is counted. */
	CHECK(u.wake.sent + u.wake.suppressed_awake + u.wake.suppressed_idle >= 1);
	CHECK(bytes_are(&u, n, sizeof(u), GUARD));
	out_init(&u, KNITK_WAKE_STATS_SIZE_VER0 - 1);
	CHECK_EQ(knitk_endpoint_wake_stats(knot, &u.wake), -EINVAL);
	CHECK(bytes_are(&u, sizeof(uint32_t), sizeof(u), GUARD));
	knitk_pool_destroy(pool);
}

static void pages_older_caller_filled_to_its_size(void)
{
	static const struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
	};
	const size_t n = sizeof(struct knitk_pages);
	struct knitk_endpoint *knot;
	union out_buf u;

	REQUIRE(knitk_endpoint_create(&g, 0, &knot) == 0);
	out_init(&u, n);
	CHECK_EQ(knitk_endpoint_pages(knot, &u.pages), 0);
	CHECK_EQ(u.pages.size, n);
	CHECK(u.pages.map_bytes > 0 && u.pages.page_bytes > 0);
	CHECK(bytes_are(&u, n, sizeof(u), GUARD));
	/* A newer caller gets the bytes this test library knows beyond it. */
	out_init(&u, n + KNITK__SIZED_GROWTH);
	CHECK_EQ(knitk_endpoint_pages(knot, &u.pages), 0);
	CHECK_EQ(u.pages.size, n + KNITK__SIZED_GROWTH);
	CHECK(bytes_are(&u, n, n + KNITK__SIZED_GROWTH, KNITK__SIZED_FILL));
	CHECK(bytes_are(&u, n + KNITK__SIZED_GROWTH, sizeof(u), GUARD));
	out_init(&u, KNITK_PAGES_SIZE_VER0 - 1);
	CHECK_EQ(knitk_endpoint_pages(knot, &u.pages), -EINVAL);
	CHECK(bytes_are(&u, sizeof(uint32_t), sizeof(u), GUARD));
	out_init(&u, KNITK_SIZED_MAX + 1);
	CHECK_EQ(knitk_endpoint_pages(knot, &u.pages), -E2BIG);
	CHECK(bytes_are(&u, sizeof(uint32_t), sizeof(u), GUARD));
	knitk_endpoint_destroy(knot);
}

/* A newer caller's options, with a tail this library does not know. */
struct opts_newer {
	struct knitk_pool_opts o;
	uint64_t tail[4];
};

static int create_newer(struct opts_newer *n, struct knitk_pool **pool)
{
	n->o.size = sizeof(*n);
	n->o.nr_workers = 1;
	return knitk_pool_create(&n->o, &test_tasks, pool);
}

static void opts_larger_with_zero_tail_accepted(void)
{
	struct opts_newer n = { 0 };
	struct knitk_pool *pool = NULL;
	uint64_t x = 42, r = 0;
	size_t len = 0;

	REQUIRE(create_newer(&n, &pool) == 0);
	CHECK_EQ(knitk_pool_call(pool, T_ECHO, &x, sizeof(x), NULL, &r,
				 sizeof(r), &len), 0);
	CHECK_EQ(len, sizeof(r));
	CHECK_EQ(r, 42);
	knitk_pool_destroy(pool);
}

static void opts_larger_with_nonzero_tail_refused(void)
{
	struct knitk_pool *pool = NULL;
	unsigned int i;

	for (i = 0; i < 4; i++) {
		struct opts_newer n = { 0 };

		n.tail[i] = 1ULL << (8 * i);
		CHECK_EQ(create_newer(&n, &pool), -E2BIG);
		CHECK(!pool);
		if (pool)
			knitk_pool_destroy(pool);
		pool = NULL;
	}
}

static void opts_bad_sizes_refused(void)
{
	static const uint32_t bad[] = { 0, 4, KNITK_POOL_OPTS_SIZE_VER0 - 1 };
	struct knitk_pool_opts o = { .nr_workers = 1 };
	struct knitk_pool *pool = NULL;
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o.size = bad[i];
		CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
	}
	o.size = KNITK_SIZED_MAX + 1;
	CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -E2BIG);
	CHECK(!pool);
}

static void task_table_reserved_checked(void)
{
	struct knitk_task_table t = test_tasks;
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 1 };
	struct knitk_pool *pool = NULL;

	t.reserved = 1;
	CHECK_EQ(knitk_pool_create(&o, &t, &pool), -EINVAL);
	CHECK(!pool);
	CHECK_EQ(knitk_worker_main(0, NULL, &t, NULL), -EINVAL);
}

struct call_opts_newer {
	struct knitk_call_opts o;
	uint64_t tail[2];
};

static void call_opts_sizes(void)
{
	struct knitk_pool *pool = pool_up();
	struct call_opts_newer n = { 0 };
	struct knitk_call_opts co = { .size = sizeof(co) };
	struct knitk_submission sub = { .fn = T_ECHO, .opts = &co };
	struct knitk_call *call = NULL;
	uint64_t x = 9;

	REQUIRE(pool);
	n.o.size = sizeof(n);
	n.o.flags = KNITK_CALL_WORKER;
	n.o.worker = 1;
	CHECK_EQ(knitk_pool_submit(pool, T_ECHO, &x, sizeof(x), &n.o, &call), 0);
	if (call) {
		CHECK_EQ(knitk_call_wait(call, KNITK_WAIT_FOREVER), 0);
		CHECK_EQ(knitk_call_worker(call), 1);
		knitk_call_release(call);
	}
	n.tail[1] = 1;
	CHECK_EQ(knitk_pool_call(pool, T_ECHO, &x, sizeof(x), &n.o, NULL, 0,
				 NULL), -E2BIG);
	co.size = KNITK_CALL_OPTS_SIZE_VER0 - 1;
	CHECK_EQ(knitk_pool_call(pool, T_ECHO, &x, sizeof(x), &co, NULL, 0,
				 NULL), -EINVAL);
	CHECK_EQ(knitk_pool_submit_batch(pool, &sub, 1, &call), -EINVAL);
	co.size = sizeof(co);
	co.reserved = 1;
	CHECK_EQ(knitk_pool_call(pool, T_ECHO, &x, sizeof(x), &co, NULL, 0,
				 NULL), -EINVAL);
	co.reserved = 0;
	CHECK_EQ(knitk_pool_submit_batch(pool, &sub, 1, &call), 1);
	CHECK_EQ(knitk_call_wait(call, KNITK_WAIT_FOREVER), 0);
	knitk_call_release(call);
	knitk_pool_destroy(pool);
}

int main(void)
{
	TEST(stats_older_caller_filled_to_its_size);
	TEST(stats_newer_caller_gets_known_bytes);
	TEST(stats_bad_sizes_refused);
	TEST(worker_info_older_caller_filled_to_its_size);
	TEST(wake_stats_older_caller_filled_to_its_size);
	TEST(pages_older_caller_filled_to_its_size);
	TEST(opts_larger_with_zero_tail_accepted);
	TEST(opts_larger_with_nonzero_tail_refused);
	TEST(opts_bad_sizes_refused);
	TEST(task_table_reserved_checked);
	TEST(call_opts_sizes);
	return tap_exit();
}
