// SPDX-License-Identifier: GPL-2.0
/*
 * Replies in the argument's own bytes (knitk_reply_in_arg): a task answers
 * with its call's argument, as it is or transformed in place, and the
 * caller reads the result where the argument was written, nothing copied.
 * In every shape of pool (thread and process workers, private lanes and
 * stealing) where it fits, each result's bytes derived from its call's id
 * and checked:
 *  - echo: loans and copies from just over the inline bytes to the whole
 *    arena answer in place (a loan's result is its buffer, a copy's is in
 *    the knot); results held unreleased stay intact while calls of many
 *    arenas' worth run beside them; once released, nothing is lost: a call
 *    as large as the arena goes through, thousands of times in a row in a
 *    small arena, each bounded by a deadline (a leak is -ETIMEDOUT, never a
 *    hang);
 *  - a transform in place answers with a prefix of the argument;
 *  - the refusals (-EINVAL, -EMSGSIZE, -EOPNOTSUPP for an inline argument,
 *    which falls back to a copy), and the last of alloc, set and in-place
 *    reply wins;
 *  - knitk_pool_call copies the result into its buffer, never past @cap;
 *  - a result held past knitk_pool_destroy stays readable and intact;
 *  - process workers, respawned: a result held when its worker is
 *    SIGKILLed stays intact while its successor cycles the same arena; a
 *    worker killed inside its reply (before or after it publishes the
 *    result) ends the call -EOWNERDEAD or with its bytes, and loses
 *    nothing;
 *  - hostile workers (test hook POOL_HOOK_RESULT on the result lane): a
 *    length over the argument's, the in-place tag over an inline argument
 *    or over an argument its worker freed: that call alone fails -EBADMSG,
 *    the calls beside it keep their own bytes;
 *  - every request published twice (the fault injection of a lane
 *    delivered again): each call runs once and its result is its own;
 *  - a storm of submitter threads with in-place and copied results, loans,
 *    knitk_pool_call, aborts and deadlines racing completion: each call ran
 *    at most once (the run table), each result its own call's.
 * No time is asserted: every wait is bounded and a hang is a failure.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "tap.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "fixtures.h"
#include "storm_aborter.h"
#include "inherited_page.h"
#include "../pool/in_arg.h"
#include "../pool/pool_internal.h"
#include "../pool/slot.h"

/* The pools' inline bytes per lane; their arena is ARENA (fixtures.h). */
#define INLINE		192
/* The arena of in_arg_replayed, the largest of the cases. */
#define REPLAY_ARENA	(4 * ARENA)
/* The arena in which whole-arena calls follow each other. */
#define SMALL_ARENA	8192

enum {
	T_RUN_IN_ARG = T_NR,	/* struct run_arg + pad: see task_run_in_arg */
	T_FORGE_IN_ARG,		/* struct forge_arg + pad: see task_forge */
	T_INARG_NR,
};

/* ------------------------------------------------------------- the tasks */

/* Byte @i (from 16 on) of T_RUN_IN_ARG(@id)'s result. */
static uint8_t run_in_arg_byte(uint64_t id, size_t i)
{
	uint8_t b = run_pad(id, (uint32_t)i);

	return (uint8_t)(b ^ 0xff);
}

/*
 * T_RUN_IN_ARG: T_RUN (counted in the run table, its argument checked)
 * answering in place: the argument's first 16 bytes become the id and
 * mix64(id), every later byte i run_in_arg_byte(id, i), written once
 * before the task's sleep of @us and once more after it (a call aborted
 * or past its deadline meanwhile must not have lost those bytes to
 * another call).
 */
static void run_in_arg_write(unsigned char *b, uint64_t id, size_t len)
{
	uint64_t r[2] = { id, mix64(id) };
	size_t i;

	memcpy(b, r, sizeof(r));
	for (i = sizeof(r); i < len; i++)
		b[i] = run_in_arg_byte(id, i);
}

static int task_run_in_arg(const void *in, size_t len, struct knitk_reply *out,
			   void *ctx)
{
	struct timespec ts;
	struct run_arg a;
	void *b = NULL;
	int ret;

	(void)ctx;
	ret = run_arg_take(in, len, &a);
	if (ret)
		return ret;
	ret = knitk_reply_in_arg(out, len, &b);
	if (ret)
		return ret;
	run_in_arg_write(b, a.id, len);
	if (a.us) {
		ts.tv_sec = a.us / 1000000;
		ts.tv_nsec = (long)(a.us % 1000000) * 1000;
		nanosleep(&ts, NULL);
	}
	run_in_arg_write(b, a.id, len);
	return run_status(a.id);
}

/* @n bytes at @d are T_RUN_IN_ARG(@id)'s result of @len bytes. */
static bool run_in_arg_bytes(const unsigned char *d, size_t n, uint64_t id,
			     size_t len)
{
	uint64_t r[2];
	size_t i;

	if (n != len || len < sizeof(r))
		return false;
	memcpy(r, d, sizeof(r));
	if (r[0] != id || r[1] != mix64(id))
		return false;
	for (i = sizeof(r); i < len; i++)
		if (d[i] != run_in_arg_byte(id, i))
			return false;
	return true;
}

/*
 * T_FORGE_IN_ARG and the hostile worker.  The task answers with its whole
 * argument (in place, or copied when it is inline) and leaves in
 * forge_next what the hook that follows on its thread does to the header
 * of the result lane (process workers; the lane hook runs in every worker
 * of this program, but does nothing for calls of other tasks).
 */
enum forge {
	F_NONE,		/* nothing: the header as the worker wrote it */
	F_VALUE,	/* value = @value (the result's length) */
	F_TAG,		/* an inline result's lane made an in-place one of @value */
	F_FREED,	/* the same over an arena argument the worker freed */
	F_DIE,		/* the worker dies before it publishes the lane */
	F_DIE_PUBLISHED,	/* ... right after it published it */
};

struct forge_arg {
	uint64_t id;		/* the call's: its status and bytes derive from it */
	uint32_t how;		/* enum forge */
	uint32_t hold;		/* the hook waits for the page's release first */
	uint64_t value;
};

/*
 * A page the host and its process workers share (a memfd they inherit,
 * named by FORGE_ENV): what the hook saw of the last forged call's lane,
 * how often it ran for one, and the hold a hook may wait on.
 */
#define FORGE_ENV	"KNITK_TEST_INARG_FORGE"

struct forge_page {
	_Atomic uint64_t fired;		/* hooks run for a forged call */
	_Atomic uint64_t seen_id;
	_Atomic uint32_t seen_kind, seen_tag;
	_Atomic uint64_t seen_value;
	_Atomic int held;		/* a hook is waiting on @hold */
	_Atomic int hold;		/* set: a holding hook waits */
	_Atomic int32_t host;		/* the host's pid: no hook kills it */
	/* The in-place tag a forged lane gives (0: one naming no lane). */
	_Atomic uint32_t forge_tag;
};

static struct forge_page *page;

static int page_open(void)
{
	page = inherited_page_create(FORGE_ENV, "knitk-inarg-forge");
	if (!page)
		return -1;
	atomic_store(&page->host, (int32_t)getpid());
	return 0;
}

/* A process worker maps the page it inherited, at its first look. */
static struct forge_page *page_get(void)
{
	if (!page)
		page = inherited_page_map(FORGE_ENV);
	return page;
}

/* Call @id's status (positive) and argument bytes. */
static int id_status(uint64_t id)
{
	return (int)(id % 1000) + 1;
}

static uint8_t id_byte(uint64_t id, size_t i)
{
	return (uint8_t)(mix64(id) + i * 7 + (i >> 8));
}

static void id_fill(void *buf, uint64_t id, size_t len)
{
	unsigned char *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = id_byte(id, i);
}

/* @n bytes at @d are call @id's; if not, says where (@what). */
static bool id_bytes(const void *d, uint64_t id, size_t n, const char *what)
{
	const unsigned char *b = d;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i] != id_byte(id, i)) {
			printf("# %s: call %llu, byte %zu of %zu is 0x%02x, not 0x%02x\n",
			       what, (unsigned long long)id, i, n, b[i],
			       id_byte(id, i));
			return false;
		}
	return true;
}

/* T_FORGE_IN_ARG call @id's argument of @len bytes (at least the header). */
static void forge_fill(void *buf, uint64_t id, uint32_t how, uint32_t hold,
		       uint64_t value, size_t len)
{
	struct forge_arg a = { .id = id, .how = how, .hold = hold, .value = value };

	id_fill(buf, id, len);
	memcpy(buf, &a, sizeof(a));
}

static _Thread_local struct forge_arg forge_next;

static int task_forge(const void *in, size_t len, struct knitk_reply *out,
		      void *ctx)
{
	struct forge_arg a;
	void *b;
	int ret;

	(void)ctx;
	if (len < sizeof(a))
		return -EINVAL;
	memcpy(&a, in, sizeof(a));
	if (a.how == F_TAG || a.how == F_FREED) {
		/*
		 * Its own result lane (a reply larger than any call's box,
		 * docs/protocol.md R3), then a copy of the argument's
		 * header: the request is acknowledged as any other, its arena
		 * bytes freed.
		 */
		ret = knitk_reply_alloc(out, SLOT_BOX_BIG, &b);
		if (!ret)
			ret = knitk_reply_set(out, in, sizeof(a));
	} else {
		ret = knitk_reply_in_arg(out, len, &b);
		if (ret == -EOPNOTSUPP)
			ret = knitk_reply_set(out, in, len);
	}
	if (ret)
		return ret;
	forge_next = a;
	return id_status(a.id);
}

/* Until @pg's hold is dropped, or HANG_MS (the host then fails anyway). */
static void forge_wait_hold(struct forge_page *pg)
{
	struct timespec ts = { 0, 100000 };
	uint64_t end = after_ms(HANG_MS);

	atomic_store(&pg->held, 1);
	while (atomic_load(&pg->hold) && after_ms(0) < end)
		nanosleep(&ts, NULL);
	atomic_store(&pg->held, 0);
}

static void forge_hook(enum pool_hook point, unsigned int worker,
		       struct knitk_producer *producer, unsigned int lane,
		       struct knitk_lane_header *h)
{
	struct forge_arg f = forge_next;
	struct forge_page *pg = page_get();

	(void)worker;
	memset(&forge_next, 0, sizeof(forge_next));
	if (point != POOL_HOOK_RESULT || !f.id || !pg)
		return;
	atomic_store(&pg->seen_kind, h->kind);
	atomic_store(&pg->seen_tag, h->tag);
	atomic_store(&pg->seen_value, h->value);
	atomic_store(&pg->seen_id, f.id);
	if (f.how != F_NONE)
		atomic_fetch_add(&pg->fired, 1);
	if (f.hold)
		forge_wait_hold(pg);
	switch (f.how) {
	case F_VALUE:
		h->value = f.value;
		break;
	case F_TAG:
	case F_FREED:
		h->kind = KNITK_PAYLOAD_VALUE;
		h->tag = POOL_TAG_IN_ARG;
		/* Read after the hold: the host names the request's lane. */
		if (f.how == F_FREED && atomic_load(&pg->forge_tag))
			h->tag = (uint16_t)atomic_load(&pg->forge_tag);
		h->value = f.value;
		break;
	case F_DIE_PUBLISHED:
		if (getpid() == atomic_load(&pg->host))
			break;
		knitk_lane_publish(producer, lane);
		kill(getpid(), SIGKILL);
		break;
	case F_DIE:
		if (getpid() != atomic_load(&pg->host))
			kill(getpid(), SIGKILL);
		break;
	default:
		break;
	}
}

static const knitk_task_fn inarg_task_fns[T_INARG_NR] = {
	TEST_TASK_FNS,
	[T_RUN_IN_ARG] = task_run_in_arg,
	[T_FORGE_IN_ARG] = task_forge,
};

static const struct knitk_task_table inarg_tasks = {
	.tasks = inarg_task_fns, .nr_tasks = T_INARG_NR,
};

/* ------------------------------------------------------- pools and calls */

/* A futex pool of one submitter, INLINE bytes per lane and @arena. */
static int inarg_pool(unsigned int kind, unsigned int dispatch,
		      unsigned int workers, unsigned int flags, uint64_t arena,
		      struct knitk_pool **pool)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = kind, .nr_workers = workers,
		.flags = flags, .knot_flags = KNITK_KNOT_FUTEX,
		.inline_bytes = INLINE, .arena_bytes = arena,
		.dispatch = dispatch, .nr_submitters = 1,
	};
	int ret;

	*pool = NULL;
	ret = knitk_pool_create(&o, &inarg_tasks, pool);
	if (ret)
		printf("# knitk_pool_create: %d\n", ret);
	return ret;
}

/*
 * A case goes on only while it has not failed: a call that cannot find
 * room (a lost arena byte) fails only at its deadline, HANG_MS later.
 */
#define GOING		(!tap_case_failed)

/* A call's options: bounded by HANG_MS, pinned to @worker when >= 0. */
static struct knitk_call_opts bounded(int worker)
{
	struct knitk_call_opts co = { .size = sizeof(co),
				      .deadline_ns = after_ms(HANG_MS) };

	if (worker >= 0) {
		co.flags = KNITK_CALL_WORKER;
		co.worker = (unsigned int)worker;
	}
	return co;
}

/* Pin to @w with private lanes; a stealing pool takes no pin. */
static int pin(unsigned int dispatch, unsigned int w)
{
	return dispatch == KNITK_POOL_DISPATCH_PRIVATE ? (int)w : -1;
}

/* Wait for @c, no longer than HANG_MS: its status, or -EINPROGRESS. */
static int wait_bounded(struct knitk_call *c)
{
	int st = knitk_call_wait(c, after_ms(HANG_MS));

	if (st == -EINPROGRESS)
		printf("# hang: a call not completed after %d ms\n", HANG_MS);
	return st;
}

/* @n bytes at @d lie in @pool's knot (its arenas among them). */
static bool in_knot(struct knitk_pool *pool, const void *d, size_t n)
{
	struct knitk_endpoint *ep;
	struct knitk_layout l;
	void *base;

	if (knitk_pool_endpoint(pool, &ep) || knitk_endpoint_base(ep, &base) ||
	    knitk_endpoint_layout(ep, &l, NULL))
		return false;
	return (const char *)d >= (const char *)base &&
	       (const char *)d + n <= (const char *)base + l.size;
}

/* knitk_pool_shutdown then destroy, the shutdown within HANG_MS. */
static bool pool_end(struct knitk_pool *pool)
{
	struct shutter sh = { pool, KNITK_SHUTDOWN_DRAIN, -EINPROGRESS };
	struct timespec ts;
	pthread_t t;

	if (pthread_create(&t, NULL, shutter_main, &sh))
		return false;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += HANG_MS / 1000;
	if (pthread_timedjoin_np(t, NULL, &ts)) {
		printf("# hang: knitk_pool_shutdown (the pool is left as it is)\n");
		return false;
	}
	knitk_pool_destroy(pool);
	return sh.ret == 0;
}

/* Every call submitted completed. */
static void check_stats(struct knitk_pool *pool)
{
	struct knitk_pool_stats st;

	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
}

/* The argument bytes of the main thread's copies. */
static unsigned char argbuf[REPLAY_ARENA];
static _Atomic uint64_t next_id = 1;

/*
 * One T_ECHO_IN_ARG (or T_ECHO) call: a loan (@loan its bytes) or a copy,
 * its argument @len bytes of call @id's; @data its result once checked.
 */
struct echo {
	struct knitk_call *c;
	uint32_t fn;
	uint64_t id;
	size_t len;
	void *loan;
	const void *data;
};

/* Start @e: call @id of @fn, @len bytes, a loan or a copy, pinned to @worker. */
static int echo_start(struct knitk_pool *pool, struct echo *e, uint32_t fn,
		      size_t len, bool loan, int worker)
{
	struct knitk_call_opts co = bounded(worker);
	void *buf = NULL;
	int ret;

	memset(e, 0, sizeof(*e));
	e->fn = fn;
	e->id = atomic_fetch_add(&next_id, 1);
	e->len = len;
	if (!loan) {
		id_fill(argbuf, e->id, len);
		ret = knitk_pool_submit(pool, fn, argbuf, len, &co, &e->c);
	} else {
		ret = knitk_pool_loan(pool, fn, len, &co, &e->c, &buf);
		if (!ret) {
			id_fill(buf, e->id, len);
			e->loan = buf;
			ret = knitk_pool_submit_loan(e->c);
			if (ret)
				knitk_call_release(e->c);
		}
	}
	if (ret) {
		printf("# %s of %zu bytes: %d\n", loan ? "loan" : "submit", len, ret);
		e->c = NULL;
	}
	return ret;
}

/* The status @e must end with. */
static int echo_status(const struct echo *e)
{
	if (e->fn == T_ECHO)
		return 0;
	return e->len > INLINE ? IN_ARG_IN_PLACE : IN_ARG_COPIED;
}

/*
 * @e completed with its own bytes: in place when its argument was in the
 * arena (a loan's result its buffer, a copy's in the knot).
 */
static bool echo_check(struct knitk_pool *pool, struct echo *e)
{
	int st, want = echo_status(e);
	const void *d = NULL;
	size_t n = 0;

	if (!e->c)
		return false;
	st = wait_bounded(e->c);
	if (st != want || knitk_call_result(e->c, &d, &n) || n != e->len) {
		printf("# call %llu (%s, %zu bytes): status %d (want %d), %zu bytes\n",
		       (unsigned long long)e->id, e->loan ? "loan" : "copy",
		       e->len, st, want, n);
		return false;
	}
	if (want == IN_ARG_IN_PLACE && e->loan && d != e->loan) {
		printf("# call %llu: result at %p, not the loan's bytes %p\n",
		       (unsigned long long)e->id, d, e->loan);
		return false;
	}
	if (want == IN_ARG_IN_PLACE && !in_knot(pool, d, n)) {
		printf("# call %llu: result at %p not in the knot\n",
		       (unsigned long long)e->id, d);
		return false;
	}
	if (!id_bytes(d, e->id, n, "result"))
		return false;
	e->data = d;
	return true;
}

/* Held @e still has its result where it was, byte for byte. */
static bool echo_intact(struct echo *e)
{
	const void *d = NULL;
	size_t n = 0;

	if (knitk_call_status(e->c) != echo_status(e) ||
	    knitk_call_result(e->c, &d, &n) || n != e->len || d != e->data) {
		printf("# held call %llu: status %d, %zu bytes at %p (were %zu at %p)\n",
		       (unsigned long long)e->id, knitk_call_status(e->c), n, d,
		       e->len, e->data);
		return false;
	}
	return id_bytes(d, e->id, n, "held result");
}

/* One call of @fn, checked and released. */
static bool echo_once(struct knitk_pool *pool, uint32_t fn, size_t len,
		      bool loan, int worker)
{
	struct echo e;
	bool ok;

	if (echo_start(pool, &e, fn, len, loan, worker))
		return false;
	ok = echo_check(pool, &e);
	knitk_call_release(e.c);
	return ok;
}

/*
 * T_XFORM_IN_ARG of @len bytes keeping @keep: the first @keep bytes of
 * the argument, one more each, where the argument was; an error status
 * (-EMSGSIZE over @len, -EOPNOTSUPP inline) with no bytes.
 */
static bool xform_once(struct knitk_pool *pool, size_t len, uint32_t keep,
		       bool loan, int worker)
{
	struct knitk_call_opts co = bounded(worker);
	uint64_t id = atomic_fetch_add(&next_id, 1);
	unsigned char *orig = malloc(len);
	const unsigned char *d = NULL;
	struct knitk_call *c = NULL;
	int want, st, ret;
	void *buf = NULL;
	size_t n = 0, i;
	bool ok = false;

	if (!orig)
		return false;
	id_fill(orig, id, len);
	memcpy(orig, &keep, sizeof(keep));
	if (loan) {
		ret = knitk_pool_loan(pool, T_XFORM_IN_ARG, len, &co, &c, &buf);
		if (!ret) {
			memcpy(buf, orig, len);
			ret = knitk_pool_submit_loan(c);
		}
	} else {
		ret = knitk_pool_submit(pool, T_XFORM_IN_ARG, orig, len, &co, &c);
	}
	if (ret) {
		printf("# xform of %zu bytes: submit %d\n", len, ret);
		goto out;
	}
	want = len <= INLINE ? -EOPNOTSUPP : keep > len ? -EMSGSIZE : (int)keep;
	st = wait_bounded(c);
	if (st != want || knitk_call_result(c, (const void **)&d, &n) ||
	    n != (want < 0 ? 0 : keep)) {
		printf("# xform %zu keep %u (%s): status %d (want %d), %zu bytes\n",
		       len, keep, loan ? "loan" : "copy", st, want, n);
		goto out;
	}
	if (n && loan && (const void *)d != buf) {
		printf("# xform: result at %p, not the loan's %p\n", (const void *)d, buf);
		goto out;
	}
	if (n && !loan && !in_knot(pool, d, n)) {
		printf("# xform: result not in the knot\n");
		goto out;
	}
	for (i = 0; i < n; i++)
		if (d[i] != (unsigned char)(orig[i] + 1)) {
			printf("# xform %zu keep %u: byte %zu is 0x%02x, not 0x%02x\n",
			       len, keep, i, d[i], (unsigned char)(orig[i] + 1));
			goto out;
		}
	ok = true;
out:
	if (c)
		knitk_call_release(c);
	free(orig);
	return ok;
}

/*
 * The pool lost no arena byte: on each of its @workers (each worker's own
 * mailbox with private lanes), an argument as large as the arena answered
 * in place, by a loan and by a copy, and a result as large as the arena
 * (the return arena whole too).  Each bounded: a leak is -ETIMEDOUT.
 */
static bool arena_whole(struct knitk_pool *pool, unsigned int dispatch,
			unsigned int workers, uint64_t arena)
{
	struct { uint32_t n; uint8_t seed; } __attribute__((packed)) fill;
	unsigned char *out = malloc(arena);
	unsigned int w;
	bool ok = out != NULL;
	size_t i;

	for (w = 0; ok && w < workers; w++) {
		struct knitk_call_opts co = bounded(pin(dispatch, w));
		size_t len = 0;
		int st;

		ok = echo_once(pool, T_ECHO_IN_ARG, arena, false, pin(dispatch, w)) &&
		     echo_once(pool, T_ECHO_IN_ARG, arena, true, pin(dispatch, w));
		if (!ok)
			break;
		fill.n = (uint32_t)arena;
		fill.seed = (uint8_t)(w + 3);
		st = knitk_pool_call(pool, T_FILL, &fill, sizeof(fill), &co, out,
				     arena, &len);
		if (st != (int)arena || len != arena) {
			printf("# a result as large as the arena: %d, %zu bytes\n", st, len);
			ok = false;
			break;
		}
		for (i = 0; i < arena; i++)
			if (out[i] != (unsigned char)(fill.seed + i))
				break;
		ok = i == arena;
	}
	if (!ok)
		printf("# the arena is not whole again\n");
	free(out);
	return ok;
}

/* --------------------------------------------------------------- cases */

/* The argument sizes of single calls: just over the inline bytes to all. */
static const size_t echo_sizes[] = {
	INLINE + 1, INLINE + 64, 1000, 4096, 8193, ARENA / 4, ARENA / 2,
	3 * ARENA / 4, ARENA - 64, ARENA,
};
#define NR_ECHO_SIZES	(sizeof(echo_sizes) / sizeof(echo_sizes[0]))

/* Results held while the others run (about a third of the arena). */
static const size_t held_sizes[] = {
	INLINE + 1, 512, 1000, 2048, 3000, 4096, 5000, 6000,
};
#define NR_HELD		(sizeof(held_sizes) / sizeof(held_sizes[0]))

static void echo_in(const struct pool_shape *sh)
{
	struct echo held[NR_HELD], f[3];
	unsigned int i, k, n, nheld = 0;
	unsigned int calls = scaled(3000, 300), whole = scaled(5000, 300);
	struct knitk_pool *pool;
	uint64_t seed = 7, moved = 0;
	bool ok;

	if (!GOING)
		return;

	printf("# %s\n", sh->name);
	REQUIRE(inarg_pool(sh->kind, sh->dispatch, 2, 0, ARENA, &pool) == 0);
	/* Every size alone, loaned and copied, on each worker. */
	for (i = 0; i < NR_ECHO_SIZES && GOING; i++) {
		CHECK(echo_once(pool, T_ECHO_IN_ARG, echo_sizes[i], true,
				pin(sh->dispatch, i % 2)));
		CHECK(echo_once(pool, T_ECHO_IN_ARG, echo_sizes[i], false,
				pin(sh->dispatch, (i + 1) % 2)));
	}
	/* Results held, loans and copies, ... */
	for (i = 0; i < NR_HELD && GOING; i++) {
		if (echo_start(pool, &held[i], T_ECHO_IN_ARG, held_sizes[i], i % 2, -1)) {
			CHECK(0);
			break;
		}
		nheld++;
		CHECK(echo_check(pool, &held[i]));
	}
	/*
	 * ... while calls of many arenas' worth run beside them, three in
	 * flight at a time: in place, copied results, transforms.
	 */
	for (i = 0; i < calls && GOING; i += 3) {
		for (n = 0, k = 0; k < 3; k++) {
			uint64_t r = rnd(&seed);
			size_t len = INLINE + 1 + r % (8192 - INLINE);

			moved += len;
			if ((r >> 32) % 4 == 3) {
				CHECK(xform_once(pool, len, (uint32_t)((r >> 40) % len),
						 (r >> 50) & 1, -1));
				continue;
			}
			if (echo_start(pool, &f[n], (r >> 32) % 4 == 2 ? T_ECHO :
					T_ECHO_IN_ARG, len, (r >> 32) % 4 == 1, -1)) {
				CHECK(0);
				continue;
			}
			n++;
		}
		for (k = 0; k < n; k++) {
			CHECK(echo_check(pool, &f[k]));
			knitk_call_release(f[k].c);
		}
		if (i % 96 == 0)
			for (k = 0; k < nheld; k++)
				CHECK(echo_intact(&held[k]));
	}
	printf("# %llu bytes in calls beside %u held results\n",
	       (unsigned long long)moved, nheld);
	for (k = 0; k < nheld; k++) {
		CHECK(echo_intact(&held[k]));
		knitk_call_release(held[k].c);
	}
	if (GOING) {
		CHECK(moved > 8 * ARENA);
		/* Nothing lost: the whole arena again, on each worker. */
		CHECK(!GOING || arena_whole(pool, sh->dispatch, 2, ARENA));
		check_stats(pool);
	}
	CHECK(pool_end(pool));
	if (!GOING)
		return;

	/* Whole-arena calls in place, one after another, in a small arena. */
	REQUIRE(inarg_pool(sh->kind, sh->dispatch, 2, 0, SMALL_ARENA, &pool) == 0);
	for (i = 0, ok = true; ok && i < whole; i++)
		ok = echo_once(pool, T_ECHO_IN_ARG, SMALL_ARENA, i % 2, -1);
	if (!ok)
		printf("# whole-arena call %u of %u failed\n", i, whole);
	CHECK(ok);
	if (ok) {
		CHECK(!GOING || arena_whole(pool, sh->dispatch, 2, SMALL_ARENA));
		check_stats(pool);
	}
	CHECK(pool_end(pool));
}

EACH_POOL_SHAPE(echo)

/* A transform in place: the result a prefix of the argument, changed. */
static void xform_in(const struct pool_shape *sh)
{
	static const size_t lens[] = { INLINE + 1, 1000, ARENA / 2, ARENA };
	struct knitk_pool *pool;
	unsigned int i, k;

	if (!GOING)
		return;

	printf("# %s\n", sh->name);
	REQUIRE(inarg_pool(sh->kind, sh->dispatch, 2, 0, ARENA, &pool) == 0);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]) && GOING; i++) {
		size_t len = lens[i];
		const uint32_t keeps[] = { 0, 1, 4, 5, (uint32_t)len / 2,
					   (uint32_t)len - 1, (uint32_t)len };

		for (k = 0; k < sizeof(keeps) / sizeof(keeps[0]) && GOING; k++) {
			CHECK(xform_once(pool, len, keeps[k], false, -1));
			CHECK(xform_once(pool, len, keeps[k], true, -1));
		}
		/* One more than the argument: -EMSGSIZE, nothing written. */
		CHECK(xform_once(pool, len, (uint32_t)len + 1, i % 2, -1));
	}
	CHECK(!GOING || arena_whole(pool, sh->dispatch, 2, ARENA));
	check_stats(pool);
	CHECK(pool_end(pool));
}

EACH_POOL_SHAPE(xform)

/* T_IN_ARG_ERRS on @len bytes (@kind first), a loan or a copy: status 0, no bytes. */
static bool errs_once(struct knitk_pool *pool, size_t len, bool loan)
{
	struct knitk_call_opts co = bounded(-1);
	struct knitk_call *c = NULL;
	const void *d;
	size_t n = 1;
	void *buf;
	int ret, st;

	memset(argbuf, 0, len);
	if (len)
		argbuf[0] = len > INLINE ? IN_ARG_LARGE : IN_ARG_SMALL;
	if (loan) {
		ret = knitk_pool_loan(pool, T_IN_ARG_ERRS, len, &co, &c, &buf);
		if (!ret) {
			if (len)
				memcpy(buf, argbuf, len);
			ret = knitk_pool_submit_loan(c);
		}
	} else {
		ret = knitk_pool_submit(pool, T_IN_ARG_ERRS, argbuf, len, &co, &c);
	}
	if (ret) {
		printf("# errors: submit %d\n", ret);
		if (c)
			knitk_call_release(c);
		return false;
	}
	st = wait_bounded(c);
	ret = knitk_call_result(c, &d, &n);
	knitk_call_release(c);
	if (st || ret || n) {
		printf("# errors, %zu bytes (%s): status %d, %zu result bytes\n",
		       len, loan ? "loan" : "copy", st, n);
		return false;
	}
	return true;
}

/*
 * The refusals, checked in the worker; an argument of the inline bytes
 * or fewer falls back to a copy, one byte more is answered in place.
 */
static void errors_in(const struct pool_shape *sh)
{
	static const size_t lens[] = { 0, 1, 64, INLINE, INLINE + 1, 4096, ARENA };
	struct knitk_pool *pool;
	unsigned int i;

	if (!GOING)
		return;

	printf("# %s\n", sh->name);
	REQUIRE(inarg_pool(sh->kind, sh->dispatch, 2, 0, ARENA, &pool) == 0);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]) && GOING; i++) {
		CHECK(errs_once(pool, lens[i], false));
		CHECK(errs_once(pool, lens[i], true));
		/* echo_status: IN_ARG_COPIED up to INLINE, in place above. */
		CHECK(echo_once(pool, T_ECHO_IN_ARG, lens[i], false, -1));
		CHECK(echo_once(pool, T_ECHO_IN_ARG, lens[i], true, -1));
		/* A transform of an inline argument: -EOPNOTSUPP. */
		if (lens[i] >= 4)
			CHECK(xform_once(pool, lens[i], 2, i % 2, -1));
	}
	CHECK(!GOING || arena_whole(pool, sh->dispatch, 2, ARENA));
	check_stats(pool);
	CHECK(pool_end(pool));
}

EACH_POOL_SHAPE(errors)

/* T_IN_ARG_THEN_SET in @order over @len bytes: the last reply's bytes. */
static bool last_once(struct knitk_pool *pool, uint8_t order, size_t len,
		      bool loan)
{
	struct knitk_call_opts co = bounded(-1);
	struct knitk_call *c = NULL;
	const unsigned char *d = NULL;
	uint64_t id = atomic_fetch_add(&next_id, 1);
	size_t n = 0, i, want_len;
	int ret, st, want;
	void *buf = NULL;
	bool ok = true;

	id_fill(argbuf, id, len);
	argbuf[0] = order;
	if (loan) {
		ret = knitk_pool_loan(pool, T_IN_ARG_THEN_SET, len, &co, &c, &buf);
		if (!ret) {
			memcpy(buf, argbuf, len);
			ret = knitk_pool_submit_loan(c);
		}
	} else {
		ret = knitk_pool_submit(pool, T_IN_ARG_THEN_SET, argbuf, len, &co, &c);
	}
	if (ret) {
		printf("# last wins: submit %d\n", ret);
		if (c)
			knitk_call_release(c);
		return false;
	}
	want = len > INLINE ? 0 : -EOPNOTSUPP;
	want_len = want ? 0 : order == IN_ARG_THEN_SET ? 4 :
		   order == IN_ARG_THEN_ALLOC ? len / 2 : len;
	st = wait_bounded(c);
	if (want < 0) {
		/* Refused in place: a reply made before may stand; the status. */
		ok = st == want;
		if (!ok)
			printf("# last wins, order %u, %zu bytes: status %d (want %d)\n",
			       order, len, st, want);
		knitk_call_release(c);
		return ok;
	}
	if (st != want || knitk_call_result(c, (const void **)&d, &n) || n != want_len) {
		printf("# last wins, order %u, %zu bytes (%s): status %d (want %d), %zu bytes (want %zu)\n",
		       order, len, loan ? "loan" : "copy", st, want, n, want_len);
		ok = false;
	} else if (order == IN_ARG_THEN_SET) {
		ok = !memcmp(d, "last", 4);
	} else if (order == IN_ARG_THEN_ALLOC) {
		for (i = 0; i < n && d[i] == 0x3c; i++)
			;
		ok = i == n;
	} else {
		/* In place: the argument as it was. */
		ok = d[0] == order && (!loan || (const void *)d == buf) &&
		     in_knot(pool, d, n);
		for (i = 1; ok && i < n; i++)
			ok = d[i] == id_byte(id, i);
	}
	if (!ok)
		printf("# last wins, order %u, %zu bytes (%s): not the last reply's bytes\n",
		       order, len, loan ? "loan" : "copy");
	knitk_call_release(c);
	return ok;
}

/* The last of alloc, set and the in-place reply wins, in every order. */
static void last_in(const struct pool_shape *sh)
{
	static const size_t lens[] = { 100, INLINE + 1, 1000, ARENA / 2, ARENA };
	struct knitk_pool *pool;
	unsigned int i;
	uint8_t order;

	if (!GOING)
		return;

	printf("# %s\n", sh->name);
	REQUIRE(inarg_pool(sh->kind, sh->dispatch, 2, 0, ARENA, &pool) == 0);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]) && GOING; i++)
		for (order = IN_ARG_THEN_SET; order <= IN_ARG_THEN_ALLOC && GOING; order++) {
			CHECK(last_once(pool, order, lens[i], false));
			CHECK(last_once(pool, order, lens[i], true));
		}
	/* Neither the dropped argument nor a dropped return lane is lost. */
	CHECK(!GOING || arena_whole(pool, sh->dispatch, 2, ARENA));
	check_stats(pool);
	CHECK(pool_end(pool));
}

EACH_POOL_SHAPE(last)

/*
 * knitk_pool_call of T_ECHO_IN_ARG (@len bytes) into a buffer of @cap:
 * the status, *out_len the whole length, the first @cap bytes copied and
 * not a byte past them.
 */
static bool pool_call_once(struct knitk_pool *pool, size_t len, size_t cap)
{
	struct knitk_call_opts co = bounded(-1);
	uint64_t id = atomic_fetch_add(&next_id, 1);
	unsigned char *out = malloc(cap + 64);
	size_t n = 12345, i;
	int st, want = len > INLINE ? IN_ARG_IN_PLACE : IN_ARG_COPIED;
	bool ok = true;

	if (!out)
		return false;
	memset(out, 0xee, cap + 64);
	id_fill(argbuf, id, len);
	st = knitk_pool_call(pool, T_ECHO_IN_ARG, argbuf, len, &co, cap ? out : NULL,
			     cap, &n);
	if (st != want || n != len) {
		printf("# knitk_pool_call %zu bytes, cap %zu: %d (want %d), %zu bytes\n",
		       len, cap, st, want, n);
		ok = false;
	}
	if (ok && !id_bytes(out, id, len < cap ? len : cap, "knitk_pool_call's buffer"))
		ok = false;
	for (i = len < cap ? len : cap; ok && i < cap + 64; i++)
		if (out[i] != 0xee) {
			printf("# knitk_pool_call wrote byte %zu (len %zu, cap %zu)\n",
			       i, len, cap);
			ok = false;
		}
	free(out);
	return ok;
}

/* knitk_pool_call copies an in-place result into its buffer. */
static void pool_call_in(const struct pool_shape *sh)
{
	static const size_t lens[] = { INLINE, INLINE + 1, 4096, ARENA / 2, ARENA };
	unsigned int i, n = scaled(500, 50);
	struct knitk_pool *pool;
	bool ok = true;

	if (!GOING)
		return;

	printf("# %s\n", sh->name);
	REQUIRE(inarg_pool(sh->kind, sh->dispatch, 2, 0, ARENA, &pool) == 0);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]) && GOING; i++) {
		CHECK(pool_call_once(pool, lens[i], lens[i]));
		CHECK(pool_call_once(pool, lens[i], lens[i] + 100));
		CHECK(pool_call_once(pool, lens[i], lens[i] / 2));
		CHECK(pool_call_once(pool, lens[i], 0));
	}
	/* Whole-arena calls one after another: each frees its argument. */
	for (i = 0; ok && i < n; i++)
		ok = pool_call_once(pool, ARENA, ARENA);
	CHECK(ok);
	CHECK(!GOING || arena_whole(pool, sh->dispatch, 2, ARENA));
	check_stats(pool);
	CHECK(pool_end(pool));
}

EACH_POOL_SHAPE(pool_call)

/*
 * Results in place held past knitk_pool_destroy (a loan's, a copy's, a
 * transform's) are still theirs, readable and whole, until released.
 */
static void destroy_in(const struct pool_shape *sh)
{
	struct knitk_pool *pool;
	struct echo e[4];
	const void *d;
	unsigned int i;
	size_t n;

	if (!GOING)
		return;

	printf("# %s\n", sh->name);
	REQUIRE(inarg_pool(sh->kind, sh->dispatch, 2, 0, ARENA, &pool) == 0);
	for (i = 0; i < 4; i++) {
		REQUIRE(echo_start(pool, &e[i], T_ECHO_IN_ARG,
				   i == 3 ? ARENA / 2 : INLINE + 1 + 1000 * i, i % 2,
				   -1) == 0);
		CHECK(echo_check(pool, &e[i]));
	}
	CHECK(pool_end(pool));
	for (i = 0; i < 4; i++) {
		d = NULL;
		n = 0;
		CHECK_EQ(knitk_call_status(e[i].c), IN_ARG_IN_PLACE);
		CHECK_EQ(knitk_call_result(e[i].c, &d, &n), 0);
		CHECK_EQ(n, e[i].len);
		CHECK(d && id_bytes(d, e[i].id, n, "result past the destroy"));
		knitk_call_release(e[i].c);
	}
}

EACH_POOL_SHAPE(destroy)

/*
 * Process workers, respawned: a result held (a copy's and a loan's, a
 * quarter of the arena each) when the worker that answered it is
 * SIGKILLed stays intact while calls of the same size cycle the same
 * arena several times through its successor; released, nothing is lost.
 */
static void dies_after_in(unsigned int dispatch)
{
	const size_t len = ARENA / 4;
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct echo held[2], e;
	uint64_t moved = 0, killed = 0;
	unsigned int i, w;
	int pid, target = -1;

	if (!GOING)
		return;

	REQUIRE(inarg_pool(KNITK_WORKER_PROCESSES, dispatch, 2, KNITK_POOL_RESPAWN,
			   ARENA, &pool) == 0);
	for (i = 0; i < 2; i++) {
		REQUIRE(echo_start(pool, &held[i], T_ECHO_IN_ARG, len, i, pin(dispatch, 0)) == 0);
		CHECK(echo_check(pool, &held[i]));
	}
	/* The workers that answered them die. */
	for (w = 0; w < 2; w++) {
		if (knitk_call_worker(held[0].c) != (int)w &&
		    knitk_call_worker(held[1].c) != (int)w)
			continue;
		pid = worker_pid(pool, w, NULL);
		REQUIRE(pid > 0);
		REQUIRE(kill(pid, SIGKILL) == 0);
		killed++;
		target = (int)w;
	}
	REQUIRE(killed > 0);
	REQUIRE(deaths_reach(pool, killed, killed));
	CHECK(echo_intact(&held[0]));
	CHECK(echo_intact(&held[1]));
	/*
	 * The arena of the held results' mailbox cycled several times
	 * (private lanes: the successor's own): in place and copied.
	 */
	for (i = 0; moved < 6 * ARENA && GOING; i++) {
		uint32_t fn = i % 3 == 2 ? T_ECHO : T_ECHO_IN_ARG;

		if (echo_start(pool, &e, fn, len, i % 3 == 1, pin(dispatch, (unsigned int)target))) {
			CHECK(0);
			break;
		}
		CHECK(echo_check(pool, &e));
		knitk_call_release(e.c);
		moved += len;
		CHECK(echo_intact(&held[0]));
		CHECK(echo_intact(&held[1]));
	}
	for (i = 0; i < 2; i++)
		knitk_call_release(held[i].c);
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.ownerdead, 0);
	CHECK_EQ(st.deaths, killed);
	CHECK(!GOING || arena_whole(pool, dispatch, 2, ARENA));
	CHECK(pool_end(pool));
	CHECK(no_children());
}

static void dies_after(void)
{
	printf("# processes, private\n");
	dies_after_in(KNITK_POOL_DISPATCH_PRIVATE);
	printf("# processes, stealing\n");
	dies_after_in(KNITK_POOL_DISPATCH_STEAL);
}

/* A T_FORGE_IN_ARG call (@len bytes, a loan or a copy), pinned to @worker. */
static int forge_start(struct knitk_pool *pool, uint64_t id, uint32_t how,
		       uint32_t hold, uint64_t value, size_t len, bool loan,
		       int worker, struct knitk_call **c)
{
	struct knitk_call_opts co = bounded(worker);
	void *buf;
	int ret;

	*c = NULL;
	if (!loan) {
		forge_fill(argbuf, id, how, hold, value, len);
		return knitk_pool_submit(pool, T_FORGE_IN_ARG, argbuf, len, &co, c);
	}
	ret = knitk_pool_loan(pool, T_FORGE_IN_ARG, len, &co, c, &buf);
	if (ret)
		return ret;
	forge_fill(buf, id, how, hold, value, len);
	ret = knitk_pool_submit_loan(*c);
	if (ret) {
		knitk_call_release(*c);
		*c = NULL;
	}
	return ret;
}

/* Completed T_FORGE_IN_ARG @c of @id has the first @n bytes of its argument. */
static bool forge_own(struct knitk_call *c, uint64_t id, uint32_t how,
		      uint64_t value, size_t n, size_t len)
{
	unsigned char *want = malloc(len);
	const void *d = NULL;
	size_t got = 0;
	int st = knitk_call_status(c);
	bool ok;

	if (!want)
		return false;
	forge_fill(want, id, how, 0, value, len);
	ok = st == id_status(id) && !knitk_call_result(c, &d, &got) && got == n &&
	     (!n || !memcmp(d, want, n));
	if (!ok)
		printf("# call %llu: status %d (want %d), %zu bytes (want %zu)%s\n",
		       (unsigned long long)id, st, id_status(id), got, n,
		       st == id_status(id) && got == n ? ", foreign bytes" : "");
	free(want);
	return ok;
}

/* Completed @c failed -EBADMSG with no result bytes. */
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

/*
 * Process workers killed inside their reply, after the request was
 * acknowledged keeping the argument's bytes: before the result lane is
 * published the call ends -EOWNERDEAD; right after, -EOWNERDEAD or its
 * own bytes.  The argument's bytes are not lost either way.
 */
static void dies_in_reply_in(unsigned int dispatch)
{
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c;
	unsigned int k, deaths = 0;
	uint64_t id;
	int ret;

	if (!GOING)
		return;

	REQUIRE(inarg_pool(KNITK_WORKER_PROCESSES, dispatch, 2, KNITK_POOL_RESPAWN,
			   ARENA, &pool) == 0);
	for (k = 0; k < 8 && GOING; k++) {
		uint32_t how = k % 2 ? F_DIE_PUBLISHED : F_DIE;
		size_t len = k % 4 < 2 ? 1000 : ARENA / 2;

		id = atomic_fetch_add(&next_id, 1);
		REQUIRE(forge_start(pool, id, how, 0, 0, len, k % 3 == 0,
				    pin(dispatch, k % 2), &c) == 0);
		ret = wait_bounded(c);
		if (how == F_DIE)
			CHECK_EQ(ret, -EOWNERDEAD);
		else if (ret != -EOWNERDEAD)
			CHECK(forge_own(c, id, how, 0, len, len));
		knitk_call_release(c);
		deaths++;
		REQUIRE(deaths_reach(pool, deaths, deaths));
		/* The successor serves, in place. */
		CHECK(echo_once(pool, T_ECHO_IN_ARG, 2000, k % 2, pin(dispatch, k % 2)));
	}
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.deaths, deaths);
	CHECK(!GOING || arena_whole(pool, dispatch, 2, ARENA));
	CHECK(pool_end(pool));
	CHECK(no_children());
}

static void dies_in_reply(void)
{
	printf("# processes, private\n");
	dies_in_reply_in(KNITK_POOL_DISPATCH_PRIVATE);
	printf("# processes, stealing\n");
	dies_in_reply_in(KNITK_POOL_DISPATCH_STEAL);
}

/* One hostile result lane: what the hook writes over which argument. */
struct hostile {
	const char *what;
	uint32_t how;
	size_t len;		/* the argument's bytes */
	bool rel;		/* value = @len + @delta, else @delta */
	int64_t delta;
	bool bad;		/* -EBADMSG; else the value's bytes */
	bool loan;
};

static const struct hostile hostiles[] = {
	{ "value: the argument's length + 1", F_VALUE, 1000, true, 1, true, false },
	{ "value: the argument's length + 1, a loan", F_VALUE, 1000, true, 1, true, true },
	{ "value: the argument's length + 64", F_VALUE, 8192, true, 64, true, false },
	{ "value: ARENA", F_VALUE, 1000, false, ARENA, true, false },
	{ "value: ARENA + 1", F_VALUE, 8192, false, ARENA + 1, true, true },
	{ "value: 2^32 + 16", F_VALUE, 1000, false, (1LL << 32) + 16, true, false },
	{ "value: 2^63", F_VALUE, 1000, false, INT64_MIN, true, false },
	{ "value: UINT64_MAX", F_VALUE, 8192, false, -1, true, true },
	{ "value: the argument's length - 1 (a shorter result)", F_VALUE, 1000, true, -1, false, false },
	{ "value: 0 (no bytes)", F_VALUE, 8192, false, 0, false, true },
	{ "in-place tag over an inline argument, value 0", F_TAG, 24, false, 0, true, false },
	{ "in-place tag over an inline argument, value its length", F_TAG, 24, true, 0, true, false },
	{ "in-place tag over an inline argument, value 8", F_TAG, 100, false, 8, true, true },
	{ "in-place tag over an argument of the inline bytes", F_TAG, INLINE, true, 0, true, false },
	{ "in-place tag over an inline loan, value its length", F_TAG, 64, true, 0, true, true },
};
#define NR_HOSTILES	(sizeof(hostiles) / sizeof(hostiles[0]))

/* The argument sizes of the plain calls beside a hostile one. */
static const size_t plain_lens[] = { 24, INLINE, INLINE + 1, 1000, 4096 };
#define NR_PLAIN	8

static uint64_t hostile_value(const struct hostile *h)
{
	return h->rel ? (uint64_t)((int64_t)h->len + h->delta) : (uint64_t)h->delta;
}

/*
 * Each hostile lane with NR_PLAIN plain calls in flight around it (in
 * place and copied), then alone through knitk_pool_call, whose buffer a
 * failed call leaves as it was; then the pool has lost nothing.
 */
static void hostile_in(unsigned int dispatch)
{
	struct knitk_call *c[NR_PLAIN + 1];
	static unsigned char buf[2 * 8192];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	uint64_t ids[NR_PLAIN + 1], fired;
	size_t lens[NR_PLAIN + 1], n, i;
	unsigned int k, j, at;
	int ret;

	if (!GOING)
		return;

	REQUIRE(inarg_pool(KNITK_WORKER_PROCESSES, dispatch, 2, 0, ARENA, &pool) == 0);
	for (k = 0; k < NR_HOSTILES && GOING; k++) {
		const struct hostile *h = &hostiles[k];
		struct knitk_call_opts co = bounded(-1);
		uint64_t value = hostile_value(h);
		size_t good_len = h->bad ? 0 : (size_t)value;
		bool good = true;

		at = k % (NR_PLAIN + 1);
		fired = atomic_load(&page->fired);
		for (j = 0; j <= NR_PLAIN; j++) {
			ids[j] = atomic_fetch_add(&next_id, 1);
			lens[j] = j == at ? h->len : plain_lens[(j + k) % 5];
			ret = forge_start(pool, ids[j], j == at ? h->how : F_NONE, 0,
					  j == at ? value : 0, lens[j],
					  j == at ? h->loan : j % 3 == 0, -1, &c[j]);
			CHECK_EQ(ret, 0);
		}
		for (j = 0; j <= NR_PLAIN; j++) {
			if (!c[j])
				continue;
			CHECK(wait_bounded(c[j]) != -EINPROGRESS);
			if (j != at)
				good = forge_own(c[j], ids[j], F_NONE, 0, lens[j], lens[j]) && good;
			else if (h->bad)
				good = bad_message(c[j]) && good;
			else
				good = forge_own(c[j], ids[j], h->how, value, good_len,
						 h->len) && good;
			knitk_call_release(c[j]);
		}
		/* The hook rewrote exactly that call's result lane. */
		CHECK_EQ(atomic_load(&page->fired) - fired, 1);
		/* Through knitk_pool_call, after an honest lane of the same size. */
		ids[0] = atomic_fetch_add(&next_id, 1);
		forge_fill(argbuf, ids[0], F_NONE, 0, 0, h->len);
		n = 0;
		ret = knitk_pool_call(pool, T_FORGE_IN_ARG, argbuf, h->len, &co, buf,
				      sizeof(buf), &n);
		CHECK_EQ(ret, id_status(ids[0]));
		CHECK_EQ(n, h->len);
		if (h->len > INLINE) {
			/* The wire format of an honest in-place answer. */
			CHECK_EQ(atomic_load(&page->seen_id), ids[0]);
			CHECK_EQ(atomic_load(&page->seen_kind), KNITK_PAYLOAD_VALUE);
			CHECK_EQ(atomic_load(&page->seen_tag) & POOL_TAG_IN_ARG_MASK,
				 POOL_TAG_IN_ARG);
			CHECK_EQ(atomic_load(&page->seen_value), h->len);
		}
		ids[0] = atomic_fetch_add(&next_id, 1);
		forge_fill(argbuf, ids[0], h->how, 0, value, h->len);
		memset(buf, 0x5a, sizeof(buf));
		n = 1234;
		ret = knitk_pool_call(pool, T_FORGE_IN_ARG, argbuf, h->len, &co, buf,
				      sizeof(buf), &n);
		if (h->bad) {
			if (ret != -EBADMSG || n) {
				printf("# knitk_pool_call: %d, %zu bytes\n", ret, n);
				good = false;
			}
			for (i = 0; i < sizeof(buf) && buf[i] == 0x5a; i++)
				;
			if (i != sizeof(buf)) {
				printf("# knitk_pool_call wrote its buffer at %zu\n", i);
				good = false;
			}
		} else if (ret != id_status(ids[0]) || n != good_len) {
			printf("# knitk_pool_call: %d, %zu bytes (want %zu)\n", ret, n, good_len);
			good = false;
		} else {
			forge_fill(argbuf, ids[0], h->how, 0, value, h->len);
			if (memcmp(buf, argbuf, n)) {
				printf("# knitk_pool_call: foreign bytes\n");
				good = false;
			}
		}
		if (!good)
			printf("# ... with %s\n", h->what);
		CHECK(good);
	}
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.ownerdead, 0);
	CHECK(!GOING || arena_whole(pool, dispatch, 2, ARENA));
	CHECK(pool_end(pool));
	CHECK(no_children());
}

static void hostile_len(void)
{
	printf("# processes, private\n");
	hostile_in(KNITK_POOL_DISPATCH_PRIVATE);
	printf("# processes, stealing\n");
	hostile_in(KNITK_POOL_DISPATCH_STEAL);
}

/* Until the page says a hook holds, or HANG_MS: true if it does. */
static bool hook_holds(void)
{
	uint64_t end = after_ms(HANG_MS);

	while (!atomic_load(&page->held)) {
		if (after_ms(0) > end) {
			printf("# hang: the hook never held\n");
			return false;
		}
		sched_yield();
	}
	return true;
}

/*
 * The in-place tag over an arena argument whose request its worker
 * acknowledged as any other (freeing the argument's bytes), with another
 * call's argument placed in those bytes meanwhile: the hostile call fails
 * -EBADMSG or answers with bytes of its own argument's place, but the
 * calls beside it keep their own arguments and results.  Worker 0 holds
 * in its hook (after the acknowledgement, before its result lane) while
 * call V is submitted behind a gated call; once the hostile call has
 * completed and the gated call runs, call W is submitted: V and W must
 * each run on and answer with their own bytes.
 */
static void hostile_freed_in(unsigned int dispatch)
{
	struct knitk_pool *pool;
	struct knitk_call *h, *g, *v, *x;
	struct gate gt;
	uint64_t hid, vid, xid;
	const size_t len = 4096;
	unsigned int k;
	int st;

	if (!GOING)
		return;

	REQUIRE(gate_open(&gt) == 0);
	REQUIRE(inarg_pool(KNITK_WORKER_PROCESSES, dispatch, 1, 0, ARENA, &pool) == 0);
	for (k = 0; k < 4 && GOING; k++) {
		struct knitk_call_opts co = bounded(-1);
		uint64_t value = k % 2 ? len : len + 1;

		hid = atomic_fetch_add(&next_id, 1);
		vid = atomic_fetch_add(&next_id, 1);
		xid = atomic_fetch_add(&next_id, 1);
		atomic_store(&page->hold, 1);
		REQUIRE(forge_start(pool, hid, F_FREED, 1, value, len, k >= 2, -1, &h) == 0);
		REQUIRE(hook_holds());
		/* The forged answer names H's own lane, the one its worker freed. */
		REQUIRE(atomic_load(&h->nr_args) == 1);
		atomic_store(&page->forge_tag, pool_in_arg_tag(h->args[0].sub, h->args[0].slot));
		/* Behind it: a gated call, then V in the freed bytes' place. */
		gt.arg.n = 0;
		REQUIRE(knitk_pool_submit(pool, T_GATE, &gt.arg, sizeof(gt.arg), &co, &g) == 0);
		REQUIRE(forge_start(pool, vid, F_NONE, 0, 0, len, k % 2, -1, &v) == 0);
		atomic_store(&page->hold, 0);
		st = wait_bounded(h);
		printf("# hostile call: status %d\n", st);
		CHECK(st == -EBADMSG || st == id_status(hid));
		CHECK_EQ(gate_wait(&gt, 'r'), 0);
		/* W, while V waits behind the gate. */
		REQUIRE(forge_start(pool, xid, F_NONE, 0, 0, len, false, -1, &x) == 0);
		CHECK_EQ(gate_release(&gt), 0);
		CHECK_EQ(gate_wait(&gt, 'd'), 0);
		CHECK_EQ(wait_bounded(g), 0);
		CHECK(wait_bounded(v) != -EINPROGRESS);
		CHECK(wait_bounded(x) != -EINPROGRESS);
		CHECK(forge_own(v, vid, F_NONE, 0, len, len));
		CHECK(forge_own(x, xid, F_NONE, 0, len, len));
		knitk_call_release(h);
		knitk_call_release(g);
		knitk_call_release(v);
		knitk_call_release(x);
	}
	atomic_store(&page->forge_tag, 0);
	check_stats(pool);
	CHECK(pool_end(pool));
	gate_close(&gt);
	CHECK(no_children());
}

static void hostile_freed(void)
{
	printf("# processes, private\n");
	hostile_freed_in(KNITK_POOL_DISPATCH_PRIVATE);
	printf("# processes, stealing\n");
	hostile_freed_in(KNITK_POOL_DISPATCH_STEAL);
}

/*
 * Every request published twice (the fault injection of pool_hooks.h, a
 * lane delivered again, docs/protocol.md R2): a call answered in place
 * runs once, on whichever of its two lanes its worker claimed it by,
 * and its result is its own transform; then the arena is whole.
 */
#define REPLAY_FLIGHT	8

static void replayed_in(const struct pool_shape *sh, uint64_t first_id)
{
	_Atomic uint8_t *tab = runtab_get();
	struct knitk_call *c[REPLAY_FLIGHT];
	struct knitk_pool *pool;
	uint64_t id = first_id, ids[REPLAY_FLIGHT];
	size_t lens[REPLAY_FLIGHT];
	unsigned int i, k, calls = scaled(6000, 600);
	const void *d;
	size_t n;
	int st;

	if (!GOING)
		return;
	printf("# %s\n", sh->name);
	/*
	 * Room for every result of a flight held in place at once and the
	 * copies beside them, in holes of any shape: results wait for their
	 * release, and a submit would otherwise wait on the room they hold
	 * (stealing: one mailbox for both workers).
	 */
	REQUIRE(inarg_pool(sh->kind, sh->dispatch, 2, 0, REPLAY_ARENA, &pool) == 0);
	atomic_store(&knitk__test_publish_twice, 1);
	for (i = 0; i < calls && GOING; i += REPLAY_FLIGHT) {
		for (k = 0; k < REPLAY_FLIGHT; k++) {
			struct knitk_call_opts co = bounded(-1);

			ids[k] = id++;
			lens[k] = INLINE + 1 + (size_t)(mix64(ids[k]) % 6000);
			run_arg_fill(argbuf, ids[k], 0, (uint32_t)lens[k]);
			c[k] = NULL;
			CHECK_EQ(knitk_pool_submit(pool, T_RUN_IN_ARG, argbuf, lens[k],
						   &co, &c[k]), 0);
		}
		for (k = 0; k < REPLAY_FLIGHT; k++) {
			if (!c[k])
				continue;
			st = wait_bounded(c[k]);
			d = NULL;
			n = 0;
			if (st != run_status(ids[k]) || knitk_call_result(c[k], &d, &n) ||
			    !run_in_arg_bytes(d, n, ids[k], lens[k]) ||
			    atomic_load(&tab[ids[k]]) != 1) {
				printf("# call %llu (%zu bytes): status %d, %zu bytes, ran %u times%s\n",
				       (unsigned long long)ids[k], lens[k], st, n,
				       atomic_load(&tab[ids[k]]),
				       st == run_status(ids[k]) && n == lens[k] ?
				       ", not its own bytes" : "");
				CHECK(0);
			}
			knitk_call_release(c[k]);
		}
	}
	atomic_store(&knitk__test_publish_twice, 0);
	CHECK(!GOING || arena_whole(pool, sh->dispatch, 2, REPLAY_ARENA));
	check_stats(pool);
	CHECK(pool_end(pool));
}

static void replayed_all(void)
{
	unsigned int i;

	for (i = 0; i < NR_POOL_SHAPES; i++)
		replayed_in(&pool_shapes[i], 8000000 + (uint64_t)i * 1000000);
}

/* ---------------------------------------------------------------- storm */

#define STORM_OWNERS	3
#define STORM_HELD	3		/* results an owner holds at a time */
#define STORM_MAX	4096		/* argument bytes at most */

struct storm_held {
	struct knitk_call *c;
	uint64_t id;
	size_t len;
	const void *data;
};

struct storm_ctx {
	struct knitk_pool *pool;
	struct storm_slot slots[STORM_OWNERS];
	_Atomic bool stop;
	_Atomic uint64_t next_id;
	_Atomic unsigned int nth;
	_Atomic unsigned long bad, ok, canceled, timedout, held;
	unsigned int per_owner;
};

/* Held result @h is still its own, where it was. */
static bool storm_intact(struct storm_held *h)
{
	const void *d = NULL;
	size_t n = 0;

	return knitk_call_status(h->c) == run_status(h->id) &&
	       !knitk_call_result(h->c, &d, &n) && d == h->data &&
	       run_in_arg_bytes(d, n, h->id, h->len);
}

static void storm_bad(struct storm_ctx *s, const char *what, uint64_t id, int st)
{
	printf("# storm call %llu: %s (status %d)\n", (unsigned long long)id, what, st);
	atomic_fetch_add(&s->bad, 1);
}

static void *storm_owner(void *arg)
{
	struct storm_ctx *s = arg;
	unsigned int me = atomic_fetch_add(&s->nth, 1) % STORM_OWNERS, i, nh = 0;
	struct storm_slot *sl = &s->slots[me];
	struct storm_held held[STORM_HELD];
	_Atomic uint8_t *tab = runtab_get();
	unsigned char *buf = malloc(STORM_MAX), *out = malloc(STORM_MAX);
	uint64_t seed = me + 11;

	if (!buf || !out) {
		atomic_fetch_add(&s->bad, 1);
		goto out;
	}
	for (i = 0; i < s->per_owner && !atomic_load(&s->bad); i++) {
		struct knitk_call_opts co = { .size = sizeof(co),
					      .deadline_ns = after_ms(HANG_MS) };
		uint64_t id = atomic_fetch_add(&s->next_id, 1), r = rnd(&seed);
		unsigned int kind = r % 4;
		uint32_t us = (uint32_t)((r >> 8) % 3) * 50;
		uint32_t fn = kind ? T_RUN_IN_ARG : T_RUN;
		size_t len = kind ? INLINE + 1 + (r >> 24) % (STORM_MAX - INLINE) :
			     sizeof(struct run_arg) + (r >> 24) % 3000;
		struct knitk_call *c = NULL;
		const void *d = NULL;
		void *lb = NULL;
		size_t n = 0;
		int ret;

		bool racing = (r >> 16) % 4 == 0;

		/* A deadline racing the call, or HANG_MS: a hang, if reached. */
		if (racing)
			co.deadline_ns = after_ms(0) + (r >> 40) % 200000;
		if (kind == 3) {
			/* knitk_pool_call: its own handle, nobody aborts it. */
			run_arg_fill(buf, id, us, (uint32_t)len);
			ret = knitk_pool_call(s->pool, fn, buf, len, &co, out,
					      STORM_MAX, &n);
			if (ret == run_status(id)) {
				if (!run_in_arg_bytes(out, n, id, len))
					storm_bad(s, "knitk_pool_call: foreign bytes", id, ret);
				else if (atomic_load(&tab[id]) != 1)
					storm_bad(s, "ran other than once", id, ret);
				else
					atomic_fetch_add(&s->ok, 1);
			} else if (ret == -ETIMEDOUT && racing) {
				atomic_fetch_add(&s->timedout, 1);
			} else {
				storm_bad(s, "knitk_pool_call", id, ret);
			}
			continue;
		}
		if (kind == 2) {
			ret = knitk_pool_loan(s->pool, fn, len, &co, &c, &lb);
			if (!ret) {
				run_arg_fill(lb, id, us, (uint32_t)len);
				ret = knitk_pool_submit_loan(c);
				if (ret) {
					knitk_call_release(c);
					c = NULL;
				}
			}
		} else {
			run_arg_fill(buf, id, us, (uint32_t)len);
			ret = knitk_pool_submit(s->pool, fn, buf, len, &co, &c);
		}
		if ((ret == -ETIMEDOUT && racing) || ret == -ECANCELED) {
			atomic_fetch_add(ret == -ETIMEDOUT ? &s->timedout : &s->canceled, 1);
			continue;
		}
		if (ret) {
			storm_bad(s, "submit", id, ret);
			continue;
		}
		pthread_mutex_lock(&sl->lock);
		sl->call = c;
		pthread_mutex_unlock(&sl->lock);
		ret = knitk_call_wait(c, after_ms(HANG_MS));
		pthread_mutex_lock(&sl->lock);
		sl->call = NULL;
		pthread_mutex_unlock(&sl->lock);
		if (ret == run_status(id)) {
			bool own = kind ? !knitk_call_result(c, &d, &n) &&
					  run_in_arg_bytes(d, n, id, len) &&
					  (!lb || d == lb) :
					  run_result_ok(c, id);

			if (!own) {
				storm_bad(s, "foreign result", id, ret);
			} else if (atomic_load(&tab[id]) != 1) {
				storm_bad(s, "ran other than once", id, ret);
			} else {
				atomic_fetch_add(&s->ok, 1);
				if (kind && (r >> 56) % 2) {
					/* Held a while: its bytes stay its own. */
					if (nh == STORM_HELD) {
						if (!storm_intact(&held[0]))
							storm_bad(s, "held result lost",
								  held[0].id, 0);
						knitk_call_release(held[0].c);
						memmove(held, held + 1, sizeof(held[0]) * --nh);
					}
					held[nh].c = c;
					held[nh].id = id;
					held[nh].len = len;
					held[nh++].data = d;
					atomic_fetch_add(&s->held, 1);
					continue;
				}
			}
		} else if (ret == -ECANCELED) {
			atomic_fetch_add(&s->canceled, 1);
		} else if (ret == -ETIMEDOUT && racing) {
			atomic_fetch_add(&s->timedout, 1);
		} else {
			storm_bad(s, ret == -EINPROGRESS || ret == -ETIMEDOUT ? "hang" :
				  "status", id, ret);
		}
		knitk_call_release(c);
	}
	for (i = 0; i < nh; i++) {
		if (!storm_intact(&held[i]))
			storm_bad(s, "held result lost", held[i].id, 0);
		knitk_call_release(held[i].c);
	}
out:
	free(buf);
	free(out);
	return NULL;
}

static void storm_in(const struct pool_shape *sh, uint64_t first_id)
{
	struct storm_ctx s = { .per_owner = scaled(3000, 100) };
	pthread_t owners[STORM_OWNERS], aborter;
	struct storm_aborter ab = { s.slots, STORM_OWNERS, &s.stop };
	_Atomic uint8_t *tab = runtab_get();
	uint64_t id, over = 0;
	unsigned int i;

	printf("# %s\n", sh->name);
	REQUIRE(inarg_pool(sh->kind, sh->dispatch, 2, 0, ARENA, &s.pool) == 0);
	atomic_store(&s.next_id, first_id);
	for (i = 0; i < STORM_OWNERS; i++)
		pthread_mutex_init(&s.slots[i].lock, NULL);
	REQUIRE(pthread_create(&aborter, NULL, storm_aborter, &ab) == 0);
	for (i = 0; i < STORM_OWNERS; i++)
		REQUIRE(pthread_create(&owners[i], NULL, storm_owner, &s) == 0);
	for (i = 0; i < STORM_OWNERS; i++)
		pthread_join(owners[i], NULL);
	atomic_store(&s.stop, true);
	pthread_join(aborter, NULL);
	for (id = first_id; id < atomic_load(&s.next_id); id++)
		if (atomic_load(&tab[id]) > 1)
			over++;
	printf("# ok %lu (held %lu) canceled %lu timedout %lu bad %lu, ran twice %llu\n",
	       atomic_load(&s.ok), atomic_load(&s.held), atomic_load(&s.canceled),
	       atomic_load(&s.timedout), atomic_load(&s.bad), (unsigned long long)over);
	CHECK_EQ(atomic_load(&s.bad), 0);
	CHECK_EQ(over, 0);
	CHECK(atomic_load(&s.ok) > 0);
	/* Every argument's bytes back: aborted, expired, held and released. */
	CHECK(!GOING || arena_whole(s.pool, sh->dispatch, 2, ARENA));
	check_stats(s.pool);
	CHECK(pool_end(s.pool));
	for (i = 0; i < STORM_OWNERS; i++)
		pthread_mutex_destroy(&s.slots[i].lock);
}

static void storm_all(void)
{
	unsigned int i;

	for (i = 0; i < NR_POOL_SHAPES && GOING; i++)
		storm_in(&pool_shapes[i], 1 + (uint64_t)i * 1000000);
}

int main(int argc, char **argv)
{
	/* The workers are this program: the hook is set before they serve. */
	atomic_store(&knitk__test_lane_hook, forge_hook);
	if (knitk_worker_main(argc, argv, &inarg_tasks, NULL))
		return 1;
	if (deaths_init(argc, argv) || page_open())
		return 1;
	tap_run("in_arg_echo", echo_all);
	tap_run("in_arg_xform", xform_all);
	tap_run("in_arg_errors", errors_all);
	tap_run("in_arg_last_wins", last_all);
	tap_run("in_arg_pool_call", pool_call_all);
	tap_run("in_arg_kept_past_destroy", destroy_all);
	tap_run("in_arg_worker_dies_after", dies_after);
	tap_run("in_arg_worker_dies_in_reply", dies_in_reply);
	tap_run("in_arg_hostile_len", hostile_len);
	tap_run("in_arg_hostile_freed_arg", hostile_freed);
	tap_run("in_arg_replayed", replayed_all);
	tap_run("in_arg_storm", storm_all);
	deaths_fini();
	return tap_exit();
}
