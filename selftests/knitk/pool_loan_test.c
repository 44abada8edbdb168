// SPDX-License-Identifier: GPL-2.0
/*
 * Loans on the module (docs/protocol.md C8): process workers that get the
 * knot by fd inheritance run calls whose arguments the host wrote in
 * place, sent alone and in batches (knitk_pool_submit_loans), private
 * lanes and stealing; each call carries its id, the task counts its runs
 * in the run table (lib/tests/pool_tasks.h) and answers from the id it
 * read.  A released loan never runs; after the drain the request arenas
 * take a loan of their whole size.  A worker killed while loans to it are
 * unsent: its successor runs them on their bytes.  Loans answered in
 * their own bytes (knitk_reply_in_arg, docs/protocol.md C10): each result
 * is where its loan was written, transformed as its id says, and stays
 * whole while later calls cycle the arena and after its worker is
 * SIGKILLed and replaced; released, the arena takes a loan of its whole
 * size again.  Small counts: the guest runs under TCG.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_pool.h"
#include "knitk_pool_guest.h"

#define ROUNDS	20
#define WINDOW	12

static uint64_t next_id = 1;

static struct knitk_pool *loan_pool(struct __test_metadata *_metadata,
				    unsigned int dispatch, unsigned int flags)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES,
		.nr_workers = 2, .nr_submitters = 1, .flags = flags,
		.knot_flags = KNITK_KNOT_KMOD, .dispatch = dispatch,
	};
	struct knitk_endpoint *ep;
	struct knitk_pool *pool;

	ASSERT_EQ(0, runtab_open());
	ASSERT_EQ(0, knitk_pool_create(&o, &test_tasks, &pool));
	ASSERT_EQ(0, knitk_pool_endpoint(pool, &ep));
	ASSERT_EQ(KNITK_BACKEND_KMOD, knitk_endpoint_backend(ep));
	return pool;
}

/* A loan of T_RUN(@id), @len bytes written in place. */
static int loan_fill(struct knitk_pool *pool, uint64_t id, size_t len,
		     const struct knitk_call_opts *co, struct knitk_call **c)
{
	void *buf;
	int ret = knitk_pool_loan(pool, T_RUN, len, co, c, &buf);

	if (!ret)
		run_arg_fill(buf, id, 0, (uint32_t)len);
	return ret;
}

/* A loan of the whole arena fits worker @w's mailbox (stealing: the slot's). */
static int arena_empty(struct knitk_pool *pool, unsigned int w, bool steal)
{
	struct knitk_call_opts co = { .size = sizeof(co), .worker = w,
				      .flags = steal ? 0 : KNITK_CALL_WORKER };
	struct knitk_endpoint *ep;
	struct knitk_layout lay;
	struct knitk_call *c;
	void *buf;
	int ret;

	if (knitk_pool_endpoint(pool, &ep) || knitk_endpoint_layout(ep, &lay, NULL))
		return -EIO;
	co.deadline_ns = after_ms(60000);
	ret = knitk_pool_loan(pool, T_RUN, lay.arena_size, &co, &c, &buf);
	if (!ret)
		knitk_call_release(c);
	return ret;
}

/* SIGKILL worker @w of a KNITK_POOL_RESPAWN pool; return once it is replaced. */
static void kill_worker_respawned(struct __test_metadata *_metadata,
				  struct knitk_pool *pool, unsigned int w)
{
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	uint64_t respawns;

	ASSERT_EQ(0, knitk_pool_stats(pool, &st));
	respawns = st.respawns;
	ASSERT_EQ(0, knitk_pool_worker_info(pool, w, &wi));
	ASSERT_LT(0, wi.pid);
	ASSERT_EQ(0, kill(wi.pid, SIGKILL));
	do {
		sched_yield();
		ASSERT_EQ(0, knitk_pool_stats(pool, &st));
	} while (st.respawns == respawns);
}

static void loans_once(struct __test_metadata *_metadata, unsigned int dispatch)
{
	struct knitk_pool *pool = loan_pool(_metadata, dispatch, 0);
	struct knitk_pool_stats st = { .size = sizeof(st) };
	unsigned int r, i, n, bad = 0;

	for (r = 0; r < ROUNDS; r++) {
		struct knitk_call *c[WINDOW];
		uint64_t id[WINDOW], gone;

		for (n = 0; n < WINDOW; n++) {
			id[n] = next_id++;
			ASSERT_EQ(0, loan_fill(pool, id[n],
					       n % 3 ? 100 : 2000 + 97 * n, NULL, &c[n]));
		}
		/* The last released unsent; then one alone, the rest at once. */
		gone = id[--n];
		knitk_call_release(c[n]);
		EXPECT_EQ(0, knitk_pool_submit_loan(c[0]));
		EXPECT_EQ((int)n - 1, knitk_pool_submit_loans(c + 1, n - 1));
		EXPECT_EQ(0, knitk_pool_wait_all(pool, c, n, KNITK_WAIT_FOREVER));
		for (i = 0; i < n; i++) {
			bad += !run_result_ok(c[i], id[i]) || atomic_load(&runtab[id[i]]) != 1;
			knitk_call_release(c[i]);
		}
		EXPECT_EQ(0, atomic_load(&runtab[gone]));
	}
	EXPECT_EQ(0, bad);
	EXPECT_EQ(0, arena_empty(pool, 0, dispatch == KNITK_POOL_DISPATCH_STEAL));
	if (dispatch == KNITK_POOL_DISPATCH_PRIVATE)
		EXPECT_EQ(0, arena_empty(pool, 1, false));
	EXPECT_EQ(0, knitk_pool_stats(pool, &st));
	EXPECT_EQ(st.submitted, st.completed);
	EXPECT_EQ(0, knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN));
	knitk_pool_destroy(pool);
}

TEST(loans_exactly_once_private)
{
	REQUIRE_KNITK();
	loans_once(_metadata, KNITK_POOL_DISPATCH_PRIVATE);
}

TEST(loans_exactly_once_steal)
{
	REQUIRE_KNITK();
	loans_once(_metadata, KNITK_POOL_DISPATCH_STEAL);
}

/*
 * Private lanes with KNITK_POOL_RESPAWN: worker 0 SIGKILLed while loans
 * to it are unsent.  Once its successor joined, a batch sends them and
 * it runs each once on the bytes written before the death.
 */
TEST(loans_outlive_worker_killed)
{
	struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER };
	struct knitk_pool *pool;
	struct knitk_call *c[6];
	uint64_t id[6];
	unsigned int i;

	REQUIRE_KNITK();
	pool = loan_pool(_metadata, KNITK_POOL_DISPATCH_PRIVATE, KNITK_POOL_RESPAWN);
	for (i = 0; i < 6; i++) {
		id[i] = next_id++;
		co.worker = i % 2;
		ASSERT_EQ(0, loan_fill(pool, id[i], i < 2 ? 3000 : 100, &co, &c[i]));
	}
	kill_worker_respawned(_metadata, pool, 0);
	EXPECT_EQ(6, knitk_pool_submit_loans(c, 6));
	EXPECT_EQ(0, knitk_pool_wait_all(pool, c, 6, KNITK_WAIT_FOREVER));
	for (i = 0; i < 6; i++) {
		EXPECT_TRUE(run_result_ok(c[i], id[i]));
		EXPECT_EQ(1, atomic_load(&runtab[id[i]]));
		knitk_call_release(c[i]);
	}
	EXPECT_EQ(0, arena_empty(pool, 0, false));
	knitk_pool_destroy(pool);
}

/* Byte @i of in-place loan @id's argument. */
static unsigned char xform_byte(uint64_t id, size_t i)
{
	return (unsigned char)(id * 131 + i * 7);
}

/*
 * A loan of T_XFORM_IN_ARG(@id), @len bytes, answered with its first
 * @len - 8 bytes each one more, in place; *@buf: the loan's bytes.
 */
static int xform_loan(struct knitk_pool *pool, uint64_t id, size_t len,
		      const struct knitk_call_opts *co, struct knitk_call **c,
		      unsigned char **buf)
{
	uint32_t keep = (uint32_t)(len - 8);
	size_t i;
	int ret = knitk_pool_loan(pool, T_XFORM_IN_ARG, len, co, c, (void **)buf);

	if (ret)
		return ret;
	memcpy(*buf, &keep, sizeof(keep));
	for (i = sizeof(keep); i < len; i++)
		(*buf)[i] = xform_byte(id, i);
	return knitk_pool_submit_loan(*c);
}

/* Its result is in its loan's bytes, each of the first @len - 8 one more. */
static bool xform_ok(struct knitk_call *c, uint64_t id, size_t len,
		     const unsigned char *buf)
{
	uint32_t keep = (uint32_t)(len - 8);
	unsigned char k[sizeof(keep)];
	const unsigned char *d;
	size_t n, i;

	if (knitk_call_wait(c, KNITK_WAIT_FOREVER) != (int)keep ||
	    knitk_call_result(c, (const void **)&d, &n) || n != keep || d != buf)
		return false;
	memcpy(k, &keep, sizeof(k));
	for (i = 0; i < keep; i++)
		if (d[i] != (unsigned char)((i < sizeof(k) ? k[i] : xform_byte(id, i)) + 1))
			return false;
	return true;
}

static void in_place(struct __test_metadata *_metadata, unsigned int dispatch)
{
	struct knitk_call_opts co = { .size = sizeof(co),
		.flags = dispatch == KNITK_POOL_DISPATCH_STEAL ? 0 : KNITK_CALL_WORKER };
	struct knitk_pool *pool = loan_pool(_metadata, dispatch, KNITK_POOL_RESPAWN);
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_call *held[4], *c;
	unsigned char *hbuf[4], *buf;
	uint64_t hid[4], id;
	unsigned int i, r, bad = 0;
	size_t len;

	/* Held: four results in place, two per worker. */
	for (i = 0; i < 4; i++) {
		hid[i] = next_id++;
		co.worker = i % 2;
		ASSERT_EQ(0, xform_loan(pool, hid[i], 1000 + 300 * i, &co, &held[i], &hbuf[i]));
		EXPECT_TRUE(xform_ok(held[i], hid[i], 1000 + 300 * i, hbuf[i]));
	}
	/* Worker 0 dies; its held results stay while its successor serves. */
	kill_worker_respawned(_metadata, pool, 0);
	for (r = 0; r < ROUNDS * 4; r++) {
		id = next_id++;
		len = 300 + (r * 977) % 6000;
		co.worker = r % 2;
		ASSERT_EQ(0, xform_loan(pool, id, len, &co, &c, &buf));
		bad += !xform_ok(c, id, len, buf);
		knitk_call_release(c);
	}
	EXPECT_EQ(0, bad);
	for (i = 0; i < 4; i++) {
		EXPECT_TRUE(xform_ok(held[i], hid[i], 1000 + 300 * i, hbuf[i]));
		knitk_call_release(held[i]);
	}
	EXPECT_EQ(0, arena_empty(pool, 0, dispatch == KNITK_POOL_DISPATCH_STEAL));
	if (dispatch == KNITK_POOL_DISPATCH_PRIVATE)
		EXPECT_EQ(0, arena_empty(pool, 1, false));
	EXPECT_EQ(0, knitk_pool_stats(pool, &st));
	EXPECT_EQ(st.submitted, st.completed);
	knitk_pool_destroy(pool);
}

TEST(loans_answered_in_place_private)
{
	REQUIRE_KNITK();
	in_place(_metadata, KNITK_POOL_DISPATCH_PRIVATE);
}

TEST(loans_answered_in_place_steal)
{
	REQUIRE_KNITK();
	in_place(_metadata, KNITK_POOL_DISPATCH_STEAL);
}

int main(int argc, char **argv)
{
	/* Process workers of the pools above are this program, re-run. */
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	return test_harness_run(argc, argv);
}
