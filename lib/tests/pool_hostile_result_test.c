// SPDX-License-Identifier: GPL-2.0
/*
 * A worker's hostile result header never makes the host read outside its
 * return mailbox's inline bytes or arena: a process worker (the test
 * program re-executed, on the futex backend) rewrites the header of its
 * result lane on the real return mailbox just before it publishes it
 * (the test hook POOL_HOOK_RESULT, knitk__test_lane_hook): an unknown
 * kind, an inline length past the inline bytes, an arena slot of 64 or
 * more, an arena offset past the arena, an offset and length past its end
 * (sums that overflow 64 bits too), a huge length, the stop function id.
 * The host checks each before it reads a byte: exactly that call
 * completes -EBADMSG with no result bytes (and knitk_pool_call writes
 * nothing to its buffer), every other call in flight beside it completes
 * with its own result (derived from its id and checked), the pool keeps
 * serving and loses nothing (stats add up, every entry of a worker in
 * flight at once, calls as large as the arena).  A result lane the worker
 * adds naming another call's entry, in flight, with a wrong generation is
 * dropped and counted stale; that call completes with its own result.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "tap.h"
#include "fixtures.h"
#include "inherited_page.h"
#include "../pool/pool_internal.h"
#include "../pool/slot.h"

/* The pools' inline bytes per lane and arena per mailbox. */
#define INLINE		192
/* Every wait of the test ends by then: a hang is a failure, not a stall. */
#define HANG_MS		20000

enum { T_FORGE = T_NR, T_FORGE_NR };

/* What the worker does to the header of a T_FORGE call's result lane. */
enum forge {
	F_NONE,		/* nothing: a plain call */
	F_KIND,		/* kind = @a */
	F_INLINE,	/* kind INLINE, length = @a */
	F_SLOT,		/* kind ARENA, arena_slot = @a, offset 0, length 8 */
	F_ARENA,	/* kind ARENA (its real slot kept), offset @a, length @b */
	F_STOP,		/* function_id = the pool's stop message's */
	F_STALE,	/* a lane of its own before it: the task id in the page */
};

/* A T_FORGE call's argument. */
struct forge_arg {
	uint64_t id;		/* the call's: its status and result derive from it */
	uint32_t len;		/* result bytes */
	uint32_t how;		/* enum forge */
	uint64_t a, b;
};

/*
 * A page the host and its process workers share (a memfd the workers
 * inherit, named by FORGE_ENV): the task id F_STALE's extra lane names,
 * set by the host once it knows it.
 */
#define FORGE_ENV	"KNITK_TEST_FORGE"

struct forge_page {
	_Atomic uint64_t stale_task_id;
};

static struct forge_page *page;

static int page_open(void)
{
	page = inherited_page_create(FORGE_ENV, "knitk-forge");
	if (!page)
		return -1;
	return 0;
}

/* A process worker maps the page it inherited, at its first look. */
static struct forge_page *page_get(void)
{
	if (!page)
		page = inherited_page_map(FORGE_ENV);
	return page;
}

/* Call @id's status (positive) and result bytes. */
static int id_status(uint64_t id)
{
	return (int)(id % 1000) + 1;
}

static uint8_t id_byte(uint64_t id, size_t i)
{
	return (uint8_t)(mix64(id) + i * 7 + (i >> 8));
}

/*
 * What the task of the running call asks the hook to forge, read and
 * cleared by the hook that follows it on the same thread.
 */
static _Thread_local struct forge_arg forge_next;

static int task_forge(const void *in, size_t len, struct knitk_reply *out,
		      void *ctx)
{
	struct forge_arg a;
	uint8_t *buf;
	uint32_t i;
	int ret;

	(void)ctx;
	if (len < sizeof(a))
		return -EINVAL;
	memcpy(&a, in, sizeof(a));
	/*
	 * A result to forge travels in a return lane: a lane taken first
	 * (a reply larger than any call's box, docs/protocol.md R3) keeps the
	 * reply that follows in it.
	 */
	if (a.how != F_NONE) {
		ret = knitk_reply_alloc(out, SLOT_BOX_BIG, (void **)&buf);
		if (ret)
			return ret;
	}
	ret = knitk_reply_alloc(out, a.len, (void **)&buf);
	if (ret)
		return ret;
	for (i = 0; i < a.len; i++)
		buf[i] = id_byte(a.id, i);
	forge_next = a;
	return id_status(a.id);
}

static const knitk_task_fn forge_task_fns[T_FORGE_NR] = {
	TEST_TASK_FNS,
	[T_FORGE] = task_forge,
};

static const struct knitk_task_table forge_tasks = {
	.tasks = forge_task_fns, .nr_tasks = T_FORGE_NR,
};

/* The hostile worker: rewrites the header of the result lane it publishes. */
static void forge_hook(enum pool_hook point, unsigned int worker,
		       struct knitk_producer *producer, unsigned int lane,
		       struct knitk_lane_header *h)
{
	struct forge_arg f = forge_next;
	struct knitk_lane_header *x;
	void *buf;
	int xl;

	(void)worker;
	(void)lane;
	forge_next.how = F_NONE;
	if (point != POOL_HOOK_RESULT)
		return;
	switch (f.how) {
	case F_KIND:
		h->kind = (uint16_t)f.a;
		break;
	case F_INLINE:
		h->kind = KNITK_PAYLOAD_INLINE;
		h->length = f.a;
		break;
	case F_SLOT:
		h->kind = KNITK_PAYLOAD_ARENA;
		h->arena_slot = (uint32_t)f.a;
		h->value = 0;
		h->length = 8;
		break;
	case F_ARENA:
		h->kind = KNITK_PAYLOAD_ARENA;
		h->value = f.a;
		h->length = f.b;
		break;
	case F_STOP:
		h->function_id = POOL_FN_STOP;
		break;
	case F_STALE:
		/* A well-formed lane of 8 bytes, published before the real one. */
		xl = knitk_lane_claim(producer);
		if (xl < 0 || knitk_lane_header(producer, (unsigned int)xl, &x))
			break;
		x->function_id = T_FORGE;
		x->task_id = atomic_load(&page_get()->stale_task_id);
		x->user = 777;
		if (knitk_lane_reserve(producer, (unsigned int)xl, 8, &buf)) {
			knitk_lane_release(producer, (unsigned int)xl);
			break;
		}
		memset(buf, 0x51, 8);
		knitk_lane_publish(producer, (unsigned int)xl);
		break;
	default:
		break;
	}
}

/* A T_FORGE call of @id, @len result bytes, forging @how (@a, @b). */
static struct forge_arg forge(uint64_t id, uint32_t len, uint32_t how,
			      uint64_t a, uint64_t b)
{
	struct forge_arg f = { .id = id, .len = len, .how = how, .a = a, .b = b };

	return f;
}

/* A pool of @workers process workers of @dispatch, futex, the test's sizes. */
static struct knitk_pool *forge_pool(unsigned int dispatch, unsigned int workers)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES,
		.nr_workers = workers, .knot_flags = KNITK_KNOT_FUTEX,
		.inline_bytes = INLINE, .arena_bytes = ARENA,
		.dispatch = dispatch,
	};
	struct knitk_pool *p = NULL;
	int ret = knitk_pool_create(&o, &forge_tasks, &p);

	if (ret)
		printf("# pool_create: %d\n", ret);
	return ret ? NULL : p;
}

/* Completed call @c is T_FORGE(@id) with @len result bytes of its own. */
static bool own_result(struct knitk_call *c, uint64_t id, uint32_t len)
{
	const uint8_t *d;
	size_t n, i;
	int st = knitk_call_status(c);

	if (st != id_status(id) || knitk_call_result(c, (const void **)&d, &n) ||
	    n != len) {
		printf("# call %llu: status %d (want %d), %zu bytes (want %u)\n",
		       (unsigned long long)id, st, id_status(id),
		       knitk_call_result(c, (const void **)&d, &n) ? 0 : n, len);
		return false;
	}
	for (i = 0; i < n; i++)
		if (d[i] != id_byte(id, i)) {
			printf("# call %llu: byte %zu foreign\n",
			       (unsigned long long)id, i);
			return false;
		}
	return true;
}

/* Completed call @c failed -EBADMSG and has no result bytes. */
static bool bad_message(struct knitk_call *c)
{
	const void *d;
	size_t n = 1;
	int st = knitk_call_status(c);

	if (st != -EBADMSG || knitk_call_result(c, &d, &n) || n) {
		printf("# hostile call: status %d, %zu result bytes\n", st, n);
		return false;
	}
	return true;
}

/* Wait for @c until the test's deadline: its status, or -EINPROGRESS. */
static int wait_bounded(struct knitk_call *c, uint64_t end)
{
	int st = knitk_call_wait(c, end);

	if (st == -EINPROGRESS)
		printf("# hang: a call not completed after %d ms\n", HANG_MS);
	return st;
}

/* One hostile header: what the worker writes and why it is out of bounds. */
struct hostile {
	const char *what;
	uint32_t how;
	uint64_t a, b;
	uint32_t len;		/* the real result's bytes */
};

#define BIG	1000		/* a result in the arena (over INLINE) */

/*
 * The forged kinds and slots go over results of inline bytes: a worker
 * that rewrites the kind or slot of a result whose bytes are in its arena
 * loses that slot of its own arena (the host frees a slot only as an
 * arena lane names it, lane_fields_test wild_headers_touch_nothing), a
 * loss of the worker's, not the host's, and the full-size calls of
 * loses_nothing() would wait for it for ever.  The forged offsets and
 * lengths keep the real slot, which the host frees.
 */

static const struct hostile hostiles[] = {
	{ "kind 5 (unknown)", F_KIND, 5, 0, 8 },
	{ "kind PACKED over an inline result (no record counted)", F_KIND,
	  KNITK_PAYLOAD_PACKED, 0, 8 },
	{ "kind 0xffff", F_KIND, 0xffff, 0, 8 },
	{ "inline length INLINE + 1", F_INLINE, INLINE + 1, 0, 8 },
	{ "inline length 2^32 + 8", F_INLINE, (1ULL << 32) + 8, 0, 8 },
	{ "inline length UINT64_MAX", F_INLINE, UINT64_MAX, 0, 8 },
	{ "arena slot 64", F_SLOT, 64, 0, 8 },
	{ "arena slot 2^31", F_SLOT, 1U << 31, 0, 8 },
	{ "arena slot NO_SLOT", F_SLOT, KNITK_ARENA_NO_SLOT, 0, 8 },
	{ "arena offset ARENA + 64", F_ARENA, ARENA + 64, 0, BIG },
	{ "arena offset 2^40, length 1", F_ARENA, 1ULL << 40, 1, BIG },
	{ "arena offset UINT64_MAX", F_ARENA, UINT64_MAX, 0, BIG },
	{ "arena offset ARENA, length 1", F_ARENA, ARENA, 1, BIG },
	{ "arena offset ARENA - 8, length 16", F_ARENA, ARENA - 8, 16, BIG },
	{ "arena offset 64, length ARENA", F_ARENA, 64, ARENA, BIG },
	{ "arena offset 64, length 2^64 - 64 (sum wraps to 0)", F_ARENA, 64,
	  UINT64_MAX - 63, BIG },
	{ "arena offset 2^64 - 8, length 16 (sum wraps to 8)", F_ARENA,
	  UINT64_MAX - 7, 16, BIG },
	{ "arena offset 2^63, length 2^63 (sum wraps to 0)", F_ARENA,
	  1ULL << 63, 1ULL << 63, BIG },
	{ "arena offset 0, length ARENA + 1", F_ARENA, 0, ARENA + 1, BIG },
	{ "arena offset 0, length UINT64_MAX", F_ARENA, 0, UINT64_MAX, BIG },
	{ "arena offset 8, length 2^63", F_ARENA, 8, 1ULL << 63, BIG },
	{ "stop function id", F_STOP, 0, 0, 8 },
	{ "stop function id over an arena result", F_STOP, 0, 0, BIG },
};
#define NR_HOSTILES	(sizeof(hostiles) / sizeof(hostiles[0]))

/* The result sizes of the plain calls beside a hostile one. */
static const uint32_t plain_lens[] = { 0, 8, INLINE, INLINE + 1, BIG, 4096 };
#define NR_PLAIN	12

/*
 * The pool loses nothing: every call submitted completed, @stale results
 * dropped, no death; then each worker takes POOL_CAP calls at once, each
 * with its own result, and one as large as the arena each way.
 */
static void loses_nothing(struct knitk_pool *p, bool pin, uint64_t stale,
			  uint64_t *id)
{
	static uint8_t in[ARENA];
	struct knitk_call_opts o = { .size = sizeof(o),
				     .deadline_ns = after_ms(HANG_MS) };
	struct knitk_call *c[2 * POOL_CAP];
	struct knitk_pool_stats st;
	struct forge_arg f;
	unsigned int w, i, n;
	uint64_t first;

	pool_stats(p, &st);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.stale, stale);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.ownerdead, 0);
	CHECK_EQ(st.timedout, 0);
	CHECK_EQ(st.canceled, 0);
	/* Every entry of every worker in flight at once. */
	first = *id;
	n = 0;
	for (w = 0; w < 2; w++) {
		o.flags = pin ? KNITK_CALL_WORKER : 0;
		o.worker = w;
		for (i = 0; i < POOL_CAP; i++) {
			f = forge((*id)++, i % 3 ? 8 : 900, F_NONE, 0, 0);
			if (knitk_pool_submit(p, T_FORGE, &f, sizeof(f), &o, &c[n]))
				break;
			n++;
		}
	}
	CHECK_EQ(n, 2 * POOL_CAP);
	for (i = 0; i < n; i++) {
		CHECK(wait_bounded(c[i], o.deadline_ns) != -EINPROGRESS);
		CHECK(own_result(c[i], first + i, (i % POOL_CAP) % 3 ? 8 : 900));
		knitk_call_release(c[i]);
	}
	/* As large as the arena, argument and result, on each worker. */
	for (w = 0; w < 2; w++) {
		uint8_t *out = malloc(ARENA);
		size_t len = 0;
		int ret;

		REQUIRE(out);
		f = forge((*id)++, ARENA, F_NONE, 0, 0);
		memset(in, 0x33, sizeof(in));
		memcpy(in, &f, sizeof(f));
		o.flags = pin ? KNITK_CALL_WORKER : 0;
		o.worker = w;
		ret = knitk_pool_call(p, T_FORGE, in, ARENA, &o, out, ARENA, &len);
		CHECK_EQ(ret, id_status(f.id));
		CHECK_EQ(len, ARENA);
		for (i = 0; i < ARENA && out[i] == id_byte(f.id, i); i++)
			;
		CHECK_EQ(i, ARENA);
		free(out);
	}
	pool_stats(p, &st);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.stale, stale);
	CHECK_EQ(st.deaths, 0);
}

/*
 * Each hostile header once, as a submit with NR_PLAIN plain calls in
 * flight around it (results of every size, inline and arena), and once
 * through knitk_pool_call, whose buffer must stay as it was.
 */
static void hostile_headers(unsigned int dispatch)
{
	struct knitk_pool *p = forge_pool(dispatch, 2);
	struct knitk_call *c[NR_PLAIN + 1];
	uint8_t buf[2 * BIG];
	uint64_t id = 1, ids[NR_PLAIN + 1], end;
	uint32_t lens[NR_PLAIN + 1];
	unsigned int k, i, hostile_at;
	struct forge_arg f;
	size_t len;
	int ret;

	REQUIRE(p);
	for (k = 0; k < NR_HOSTILES; k++) {
		const struct hostile *h = &hostiles[k];
		struct knitk_call_opts o = { .size = sizeof(o),
					     .deadline_ns = after_ms(HANG_MS) };
		bool good = true;

		end = o.deadline_ns;
		hostile_at = k % (NR_PLAIN + 1);
		for (i = 0; i <= NR_PLAIN; i++) {
			ids[i] = id++;
			if (i == hostile_at) {
				lens[i] = h->len;
				f = forge(ids[i], h->len, h->how, h->a, h->b);
			} else {
				lens[i] = plain_lens[(i + k) % 6];
				f = forge(ids[i], lens[i], F_NONE, 0, 0);
			}
			ret = knitk_pool_submit(p, T_FORGE, &f, sizeof(f), &o, &c[i]);
			CHECK_EQ(ret, 0);
			if (ret)
				c[i] = NULL;
		}
		for (i = 0; i <= NR_PLAIN; i++) {
			if (!c[i])
				continue;
			CHECK(wait_bounded(c[i], end) != -EINPROGRESS);
			if (i == hostile_at)
				good = bad_message(c[i]) && good;
			else
				good = own_result(c[i], ids[i], lens[i]) && good;
			knitk_call_release(c[i]);
		}
		/* Through knitk_pool_call: its buffer is not written. */
		memset(buf, 0x5a, sizeof(buf));
		len = 1234;
		f = forge(id++, h->len, h->how, h->a, h->b);
		ret = knitk_pool_call(p, T_FORGE, &f, sizeof(f), &o, buf,
				      sizeof(buf), &len);
		if (ret != -EBADMSG || len) {
			printf("# knitk_pool_call: %d, %zu bytes\n", ret, len);
			good = false;
		}
		for (i = 0; i < sizeof(buf) && buf[i] == 0x5a; i++)
			;
		if (i != sizeof(buf)) {
			printf("# knitk_pool_call wrote its buffer at %u\n", i);
			good = false;
		}
		if (!good)
			printf("# ... with %s\n", h->what);
		CHECK(good);
		/* The worker serves on: a plain call right after. */
		f = forge(id, 16, F_NONE, 0, 0);
		len = 0;
		CHECK_EQ(knitk_pool_call(p, T_FORGE, &f, sizeof(f), &o, buf,
					 sizeof(buf), &len), id_status(id));
		CHECK_EQ(len, 16);
		CHECK_EQ(buf[15], id_byte(id, 15));
		id++;
	}
	loses_nothing(p, dispatch == KNITK_POOL_DISPATCH_PRIVATE, 0, &id);
	knitk_pool_destroy(p);
	CHECK(no_children());
}

static void hostile_headers_private(void)
{
	hostile_headers(KNITK_POOL_DISPATCH_PRIVATE);
}

static void hostile_headers_steal(void)
{
	hostile_headers(KNITK_POOL_DISPATCH_STEAL);
}

/* Until a byte is readable on @fd or @end: 0, or -1. */
static int read_byte_until(int fd, char want, uint64_t end)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	uint64_t now;
	char c;

	for (;;) {
		now = after_ms(0);
		if (now >= end)
			return -1;
		if (poll(&pf, 1, (int)((end - now) / 1000000) + 1) == 1)
			break;
	}
	return read(fd, &c, 1) == 1 && c == want ? 0 : -1;
}

/*
 * F_STALE: worker 0, held in a T_GATE call, has A and then B queued; A's
 * worker publishes, before A's result, a well-formed lane naming B's entry
 * with the generation @delta from B's.  B is in flight until its worker
 * answers it after A: the lane is dropped and counted stale, and A and B
 * complete with their own results.
 */
static void stale_generation(void)
{
	static const int32_t deltas[] = { -1, 1, 0x40000000, -0x7fffffff };
	struct knitk_pool *p;
	struct knitk_call_opts o = { .size = sizeof(o), .flags = KNITK_CALL_WORKER,
				     .worker = 0 };
	struct knitk_call *g, *a, *b;
	struct knitk_pool_stats st;
	struct gate gt;
	struct forge_arg f;
	uint64_t id = 1, end, tid;
	unsigned int k;
	uint32_t blen;

	REQUIRE(gate_open(&gt) == 0);
	p = forge_pool(KNITK_POOL_DISPATCH_PRIVATE, 2);
	REQUIRE(p);
	for (k = 0; k < 8; k++) {
		end = after_ms(HANG_MS);
		o.deadline_ns = end;
		blen = k % 2 ? BIG : 8;
		REQUIRE(knitk_pool_submit(p, T_GATE, &gt.arg, sizeof(gt.arg), &o, &g) == 0);
		CHECK_EQ(read_byte_until(gt.ready[0], 'r', end), 0);
		f = forge(id, 8, F_STALE, 0, 0);
		REQUIRE(knitk_pool_submit(p, T_FORGE, &f, sizeof(f), &o, &a) == 0);
		f = forge(id + 1, blen, F_NONE, 0, 0);
		REQUIRE(knitk_pool_submit(p, T_FORGE, &f, sizeof(f), &o, &b) == 0);
		/* B's entry is in flight, on the worker A runs on. */
		CHECK_EQ(b->entry / KNITK_LANES, 0);
		CHECK(b->entry != a->entry);
		tid = pool_task_id(b->entry, (uint32_t)(b->task_id >> 32) +
					     (uint32_t)deltas[k % 4]);
		CHECK(tid != b->task_id);
		atomic_store(&page->stale_task_id, tid);
		pool_stats(p, &st);
		CHECK_EQ(st.stale, k);
		CHECK_EQ(gate_release(&gt), 0);
		CHECK_EQ(read_byte_until(gt.ready[0], 'd', end), 0);
		CHECK_EQ(wait_bounded(g, end), 0);
		CHECK(wait_bounded(a, end) != -EINPROGRESS);
		CHECK(wait_bounded(b, end) != -EINPROGRESS);
		CHECK(own_result(a, id, 8));
		CHECK(own_result(b, id + 1, blen));
		pool_stats(p, &st);
		CHECK_EQ(st.stale, k + 1);
		knitk_call_release(g);
		knitk_call_release(a);
		knitk_call_release(b);
		id += 2;
	}
	loses_nothing(p, true, 8, &id);
	knitk_pool_destroy(p);
	gate_close(&gt);
	CHECK(no_children());
}

int main(int argc, char **argv)
{
	/* The workers are this program: the hook is set before they serve. */
	atomic_store(&knitk__test_lane_hook, forge_hook);
	if (knitk_worker_main(argc, argv, &forge_tasks, NULL) ||
	    tests_init(argc, argv, false) || page_open())
		return 1;
	TEST(hostile_headers_private);
	TEST(hostile_headers_steal);
	TEST(stale_generation);
	return tap_exit();
}
