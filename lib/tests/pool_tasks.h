/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The task table shared by the pool tests on the host and in the guest
 * (selftests/knitk/pool_test.c), and by their process workers, which are
 * the test programs themselves, re-executed by the pool; with the checks of
 * T_MIX results, the event-fd echo loop and the start of main() those
 * tests share.
 */
#ifndef KNITK_POOL_TASKS_H
#define KNITK_POOL_TASKS_H

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"

enum {
	T_ECHO,		/* result = argument bytes */
	T_MIX,		/* u64 x -> u64 mix(x) */
	T_SLEEP,	/* u32 ms: sleeps, stops early when aborted */
	T_FILL,		/* u32 n, u8 seed -> n bytes seed + i */
	T_PID,		/* -> i32 getpid() */
	T_FAIL,		/* returns -(i32 argument) */
	T_ENV,		/* 1 if KNITK_PREFIX_TEST is set in the worker */
	T_HOLD,		/* u32 ms, then any bytes: T_SLEEP with a payload */
	/* Host death (pool_orphan_test). */
	T_GATE,		/* i32 ready, gate fds, u32 n: see task_gate */
	T_SEQ,		/* -> u64: T_SEQ calls this process ran before */
	T_TID,		/* -> i32: the thread that ran it (gettid) */
	T_RUN,		/* struct run_arg + pad: counted in the run table */
	/* Replies in the argument's own bytes (knitk_reply_in_arg). */
	T_ECHO_IN_ARG,	/* any bytes -> the same, in place: see task_echo_in_arg */
	T_XFORM_IN_ARG,	/* u32 keep_len, bytes: see task_xform_in_arg */
	T_IN_ARG_ERRS,	/* u8 IN_ARG_SMALL/_LARGE, bytes: see task_in_arg_errs */
	T_IN_ARG_THEN_SET, /* u8 order, bytes: see task_in_arg_then_set */
	T_NR,
};

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static int task_echo(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	(void)ctx;
	return knitk_reply_set(out, in, len);
}

static int task_mix(const void *in, size_t len, struct knitk_reply *out,
		    void *ctx)
{
	uint64_t x;

	(void)ctx;
	if (len != sizeof(x))
		return -EINVAL;
	memcpy(&x, in, sizeof(x));
	x = mix64(x);
	return knitk_reply_set(out, &x, sizeof(x));
}

/*
 * T_SLEEP's step between two looks at the abort flag, in microseconds (a
 * divisor of 1000).  The guest, under TCG, takes longer steps.
 */
#ifndef POOL_TASKS_SLEEP_STEP_US
#define POOL_TASKS_SLEEP_STEP_US	200
#endif

static int task_hold(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	struct timespec ts = { 0, POOL_TASKS_SLEEP_STEP_US * 1000 };
	uint32_t ms, i;

	(void)out;
	if (len < sizeof(ms))
		return -EINVAL;
	memcpy(&ms, in, sizeof(ms));
	for (i = 0; i < ms * (1000 / POOL_TASKS_SLEEP_STEP_US); i++) {
		if (knitk_task_aborted(ctx))
			return -EINTR;
		nanosleep(&ts, NULL);
	}
	return (int)ms;
}

static int task_sleep(const void *in, size_t len, struct knitk_reply *out,
		      void *ctx)
{
	return len == sizeof(uint32_t) ? task_hold(in, len, out, ctx) : -EINVAL;
}

static int task_fill(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	struct { uint32_t n; uint8_t seed; } a;
	unsigned char *buf;
	void *p;
	uint32_t i;
	int ret;

	(void)ctx;
	if (len < 5)
		return -EINVAL;
	memcpy(&a.n, in, 4);
	memcpy(&a.seed, (const char *)in + 4, 1);
	ret = knitk_reply_alloc(out, a.n, &p);
	if (ret)
		return ret;
	buf = p;
	for (i = 0; i < a.n; i++)
		buf[i] = (unsigned char)(a.seed + i);
	return (int)a.n;
}

static int task_pid(const void *in, size_t len, struct knitk_reply *out,
		    void *ctx)
{
	int32_t pid = (int32_t)getpid();

	(void)in;
	(void)len;
	(void)ctx;
	return knitk_reply_set(out, &pid, sizeof(pid));
}

static int task_fail(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	int32_t e;

	(void)out;
	(void)ctx;
	if (len != sizeof(e))
		return -EINVAL;
	memcpy(&e, in, sizeof(e));
	return -e;
}

static int task_env(const void *in, size_t len, struct knitk_reply *out,
		    void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	(void)ctx;
	return getenv("KNITK_PREFIX_TEST") != NULL;
}

/*
 * T_GATE: writes 'r' to fd ready, reads one byte from fd gate, writes 'd'
 * to ready and replies @n bytes (pipes the test program made and the
 * workers inherited): the test sees the task start and end, and holds it
 * in between.
 */
static int task_gate(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	struct { int32_t ready, gate; uint32_t n; } a;
	char b;
	void *p;
	int ret;

	(void)ctx;
	if (len != sizeof(a))
		return -EINVAL;
	memcpy(&a, in, sizeof(a));
	if (write(a.ready, "r", 1) != 1 || read(a.gate, &b, 1) != 1 ||
	    write(a.ready, "d", 1) != 1)
		return -EIO;
	if (!a.n)
		return 0;
	ret = knitk_reply_alloc(out, a.n, &p);
	if (ret)
		return ret;
	memset(p, 'g', a.n);
	return (int)a.n;
}

/* A T_GATE call's argument and its pipes: the task starts, then waits. */
struct gate {
	int ready[2], gate[2];
	struct { int32_t ready, gate; uint32_t n; } arg;
};

static inline int gate_open(struct gate *g)
{
	if (pipe(g->ready) || pipe(g->gate))
		return -1;
	g->arg.ready = g->ready[1];
	g->arg.gate = g->gate[0];
	g->arg.n = 0;
	return 0;
}

/* Until the gated task has started ('r') or ended ('d'). */
static inline int gate_wait(struct gate *g, char want)
{
	char c;

	return read(g->ready[0], &c, 1) == 1 && c == want ? 0 : -1;
}

static inline int gate_release(struct gate *g)
{
	return write(g->gate[1], "g", 1) == 1 ? 0 : -1;
}

static inline void gate_close(struct gate *g)
{
	close(g->ready[0]);
	close(g->ready[1]);
	close(g->gate[0]);
	close(g->gate[1]);
}

/* T_SEQ: the order in which a worker ran the calls. */
static int task_seq(const void *in, size_t len, struct knitk_reply *out,
		    void *ctx)
{
	static _Atomic uint64_t runs;
	uint64_t n = atomic_fetch_add(&runs, 1);

	(void)in;
	(void)len;
	(void)ctx;
	return knitk_reply_set(out, &n, sizeof(n));
}

static int task_tid(const void *in, size_t len, struct knitk_reply *out,
		    void *ctx)
{
	int32_t tid = (int32_t)syscall(SYS_gettid);

	(void)in;
	(void)len;
	(void)ctx;
	return knitk_reply_set(out, &tid, sizeof(tid));
}

/*
 * T_RUN and the run table: exactly once, checked from outside the pool.
 * Every call carries its own id; the task counts each run of id in a
 * table of shared memory (a memfd the host creates before its pool and
 * its process workers inherit, named by RUNTAB_ENV) and answers with a
 * status and a result derived from the id it read.  A call that got
 * another call's bytes, or ran twice, shows in the result or the table.
 */
#define RUNTAB_IDS	(1U << 24)
#define RUNTAB_ENV	"KNITK_TEST_RUNTAB"

struct run_arg {
	uint64_t id;
	uint32_t us;		/* how long the task takes */
	uint32_t len;		/* the whole argument's length */
};

static _Atomic uint8_t *runtab;

/* The host, once, before its first pool: 0 or a negative errno. */
static inline int runtab_open(void)
{
	char v[16];
	void *p;
	int fd;

	if (runtab)
		return 0;
	/* No MFD_CLOEXEC: process workers inherit it. */
	fd = (int)syscall(SYS_memfd_create, "knitk-runtab", 0);
	if (fd < 0 || ftruncate(fd, RUNTAB_IDS))
		return -errno;
	p = mmap(NULL, RUNTAB_IDS, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	snprintf(v, sizeof(v), "%d", fd);
	setenv(RUNTAB_ENV, v, 1);
	runtab = p;
	return 0;
}

/* A process worker maps the table it inherited, at its first T_RUN. */
static inline _Atomic uint8_t *runtab_get(void)
{
	const char *v = getenv(RUNTAB_ENV);
	void *p;

	if (runtab || !v)
		return runtab;
	p = mmap(NULL, RUNTAB_IDS, PROT_READ | PROT_WRITE, MAP_SHARED, atoi(v), 0);
	if (p != MAP_FAILED)
		runtab = p;
	return runtab;
}

static inline uint8_t run_pad(uint64_t id, uint32_t i)
{
	return (uint8_t)(id * 131 + i);
}

/* The status of T_RUN(id): positive, derived from the id. */
static inline int run_status(uint64_t id)
{
	return (int)(id % 100000) + 1;
}

/* Fill @buf (@len >= sizeof(struct run_arg)) as call @id's argument. */
static inline void run_arg_fill(void *buf, uint64_t id, uint32_t us, uint32_t len)
{
	struct run_arg a = { .id = id, .us = us, .len = len };
	unsigned char *b = buf;
	uint32_t i;

	memcpy(b, &a, sizeof(a));
	for (i = sizeof(a); i < len; i++)
		b[i] = run_pad(id, i);
}

/*
 * A run of the call whose argument is @in (@len bytes): counted in the run
 * table, its header read into @a; 0, or the error the task answers with.
 */
static inline int run_arg_take(const void *in, size_t len, struct run_arg *a)
{
	_Atomic uint8_t *tab = runtab_get();
	const unsigned char *b = in;
	uint32_t i;

	if (!tab || len < sizeof(*a))
		return -EINVAL;
	memcpy(a, in, sizeof(*a));
	if (a->id >= RUNTAB_IDS)
		return -ERANGE;
	atomic_fetch_add(&tab[a->id], 1);
	/* A torn argument (another call's bytes) answers for no call. */
	if (a->len != len)
		return -EBADMSG;
	for (i = sizeof(*a); i < len; i++)
		if (b[i] != run_pad(a->id, i))
			return -EBADMSG;
	return 0;
}

static int task_run(const void *in, size_t len, struct knitk_reply *out,
		    void *ctx)
{
	struct timespec ts;
	struct run_arg a;
	uint64_t r[2];
	int ret;

	(void)ctx;
	ret = run_arg_take(in, len, &a);
	if (ret)
		return ret;
	if (a.us) {
		ts.tv_sec = a.us / 1000000;
		ts.tv_nsec = (long)(a.us % 1000000) * 1000;
		nanosleep(&ts, NULL);
	}
	r[0] = a.id;
	r[1] = mix64(a.id);
	ret = knitk_reply_set(out, r, sizeof(r));
	return ret ? ret : run_status(a.id);
}

/* Finished call @c was T_RUN(@id), answered by its own run. */
static inline bool run_result_ok(struct knitk_call *c, uint64_t id)
{
	const void *d;
	uint64_t r[2];
	size_t len;

	if (knitk_call_status(c) != run_status(id) ||
	    knitk_call_result(c, &d, &len) || len != sizeof(r))
		return false;
	memcpy(r, d, sizeof(r));
	return r[0] == id && r[1] == mix64(id);
}

/* The id finished call @c's T_RUN result names when it is not @id's, or 0. */
static inline uint64_t run_result_foreign(struct knitk_call *c, uint64_t id)
{
	const void *d;
	uint64_t r[2];
	size_t len;

	if (knitk_call_status(c) <= 0 || knitk_call_result(c, &d, &len) ||
	    len != sizeof(r))
		return 0;
	memcpy(r, d, sizeof(r));
	return r[0] != id ? r[0] : 0;
}

/*
 * Replies in the argument's own bytes (knitk_reply_in_arg): only an
 * argument that travels in the arena (over the lane's inline bytes) can
 * be answered so; a smaller one gets -EOPNOTSUPP.
 *
 * T_ECHO_IN_ARG answers with its whole argument: in place (status
 * IN_ARG_IN_PLACE), or, for an argument that is not in the arena, copied
 * by knitk_reply_set (status IN_ARG_COPIED, or that call's error); any
 * other error of knitk_reply_in_arg is the status, and so is -EFAULT for
 * a pointer that is not the task's argument.
 */
#define IN_ARG_COPIED		0
#define IN_ARG_IN_PLACE		1

static int task_echo_in_arg(const void *in, size_t len, struct knitk_reply *out,
			    void *ctx)
{
	void *b = NULL;
	int ret;

	(void)ctx;
	ret = knitk_reply_in_arg(out, len, &b);
	if (ret == -EOPNOTSUPP) {
		ret = knitk_reply_set(out, in, len);
		return ret ? ret : IN_ARG_COPIED;
	}
	if (ret)
		return ret;
	return b == in ? IN_ARG_IN_PLACE : -EFAULT;
}

/*
 * T_XFORM_IN_ARG: the argument is a u32 keep_len and bytes; the task
 * answers with the first keep_len bytes of its argument (the u32 among
 * them), each one more than it was, transformed where they lie.  Status:
 * knitk_reply_in_arg's error (then nothing is written), else keep_len.
 */
static int task_xform_in_arg(const void *in, size_t len, struct knitk_reply *out,
			     void *ctx)
{
	unsigned char *b = NULL;
	uint32_t keep, i;
	int ret;

	(void)ctx;
	if (len < sizeof(keep))
		return -EINVAL;
	memcpy(&keep, in, sizeof(keep));
	ret = knitk_reply_in_arg(out, keep, (void **)&b);
	if (ret)
		return ret;
	if ((const void *)b != in)
		return -EFAULT;
	for (i = 0; i < keep; i++)
		b[i]++;
	return (int)keep;
}

/*
 * T_IN_ARG_ERRS: the refusals of knitk_reply_in_arg, checked in the
 * worker.  The first byte says what the argument is: IN_ARG_LARGE (in
 * the arena) or IN_ARG_SMALL (inline; an empty argument is small).  Every
 * argument: NULL @out or @buf is -EINVAL.  Large: a length over the
 * argument's (by one, and SIZE_MAX) is -EMSGSIZE.  Small: a length the
 * argument has is -EOPNOTSUPP.  No refusal leaves a reply: the call
 * answers with no bytes.  0 when all hold, else the first that did not
 * (IN_ARG_ERR_*, distinct negative codes).
 */
#define IN_ARG_SMALL		's'
#define IN_ARG_LARGE		'L'
#define IN_ARG_ERR_NULL_OUT	(-1001)
#define IN_ARG_ERR_NULL_BUF	(-1002)
#define IN_ARG_ERR_OVER		(-1003)
#define IN_ARG_ERR_OVER_MAX	(-1004)
#define IN_ARG_ERR_SMALL	(-1005)
#define IN_ARG_ERR_BUF_SET	(-1006)
#define IN_ARG_ERR_KIND		(-1007)

static int task_in_arg_errs(const void *in, size_t len, struct knitk_reply *out,
			    void *ctx)
{
	char kind = len ? *(const char *)in : IN_ARG_SMALL;
	void *b = NULL;

	(void)ctx;
	if (kind != IN_ARG_SMALL && kind != IN_ARG_LARGE)
		return IN_ARG_ERR_KIND;
	if (knitk_reply_in_arg(NULL, len, &b) != -EINVAL)
		return IN_ARG_ERR_NULL_OUT;
	if (knitk_reply_in_arg(out, len, NULL) != -EINVAL ||
	    knitk_reply_in_arg(out, 1, NULL) != -EINVAL)
		return IN_ARG_ERR_NULL_BUF;
	if (kind == IN_ARG_LARGE) {
		if (knitk_reply_in_arg(out, len + 1, &b) != -EMSGSIZE)
			return IN_ARG_ERR_OVER;
		if (knitk_reply_in_arg(out, SIZE_MAX, &b) != -EMSGSIZE)
			return IN_ARG_ERR_OVER_MAX;
	} else if (knitk_reply_in_arg(out, len, &b) != -EOPNOTSUPP) {
		return IN_ARG_ERR_SMALL;
	}
	return b ? IN_ARG_ERR_BUF_SET : 0;
}

/*
 * T_IN_ARG_THEN_SET: the last of knitk_reply_alloc, knitk_reply_set and
 * knitk_reply_in_arg wins.  The first byte is the order:
 *  IN_ARG_THEN_SET: in place, then knitk_reply_set "last" -> "last";
 *  SET_THEN_IN_ARG: "last", then in place -> the whole argument;
 *  ALLOC_THEN_IN_ARG: a reply of the argument's length filled with 0xa5
 *	(a return lane's arena bytes when it is large), then in place ->
 *	the whole argument;
 *  IN_ARG_THEN_ALLOC: in place (its bytes then overwritten with 0x5a),
 *	then a reply of half the argument's length filled with 0x3c -> those.
 * Status: the first error, else 0.
 */
#define IN_ARG_THEN_SET		0
#define SET_THEN_IN_ARG		1
#define ALLOC_THEN_IN_ARG	2
#define IN_ARG_THEN_ALLOC	3

static int task_in_arg_then_set(const void *in, size_t len,
				struct knitk_reply *out, void *ctx)
{
	void *b = NULL, *r;
	int ret;

	(void)ctx;
	if (len < 1)
		return -EINVAL;
	switch (*(const uint8_t *)in) {
	case IN_ARG_THEN_SET:
		ret = knitk_reply_in_arg(out, len, &b);
		return ret ? ret : knitk_reply_set(out, "last", 4);
	case SET_THEN_IN_ARG:
		ret = knitk_reply_set(out, "last", 4);
		return ret ? ret : knitk_reply_in_arg(out, len, &b);
	case ALLOC_THEN_IN_ARG:
		ret = knitk_reply_alloc(out, len, &r);
		if (ret)
			return ret;
		memset(r, 0xa5, len);
		return knitk_reply_in_arg(out, len, &b);
	case IN_ARG_THEN_ALLOC:
		ret = knitk_reply_in_arg(out, len, &b);
		if (ret)
			return ret;
		memset(b, 0x5a, len);
		ret = knitk_reply_alloc(out, len / 2, &r);
		if (ret)
			return ret;
		memset(r, 0x3c, len / 2);
		return 0;
	default:
		return -EINVAL;
	}
}

/*
 * The entries of test_task_fns, for a table that goes on past T_NR with
 * tasks of its own (hostile_tasks.h).
 */
#define TEST_TASK_FNS							\
	[T_ECHO] = task_echo,						\
	[T_MIX] = task_mix,						\
	[T_SLEEP] = task_sleep,						\
	[T_FILL] = task_fill,						\
	[T_PID] = task_pid,						\
	[T_FAIL] = task_fail,						\
	[T_ENV] = task_env,						\
	[T_HOLD] = task_hold,						\
	[T_GATE] = task_gate,						\
	[T_SEQ] = task_seq,						\
	[T_TID] = task_tid,						\
	[T_RUN] = task_run,						\
	[T_ECHO_IN_ARG] = task_echo_in_arg,				\
	[T_XFORM_IN_ARG] = task_xform_in_arg,				\
	[T_IN_ARG_ERRS] = task_in_arg_errs,				\
	[T_IN_ARG_THEN_SET] = task_in_arg_then_set

static const knitk_task_fn test_task_fns[T_NR] = { TEST_TASK_FNS };

static const struct knitk_task_table test_tasks = { .tasks = test_task_fns, .nr_tasks = T_NR };

/* Absolute CLOCK_MONOTONIC time @ms from now. */
/* The pool's statistics, all ones when the call fails (no check passes). */
static inline void pool_stats(struct knitk_pool *pool,
			      struct knitk_pool_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->size = sizeof(*st);
	if (knitk_pool_stats(pool, st))
		memset(st, 0xff, sizeof(*st));
}

static inline uint64_t after_ms(uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec +
	       ms * 1000000ULL;
}

/* The result of finished call @c of T_MIX(@x) is the 8 bytes mix64(@x). */
static inline bool mix_result_ok(struct knitk_call *c, uint64_t x)
{
	const void *d;
	size_t len;
	uint64_t y = 0;

	return !knitk_call_result(c, &d, &len) && len == 8 &&
	       (memcpy(&y, d, 8), y == mix64(x));
}

/*
 * @n synchronous T_MIX calls with @co, of arguments @x0, @x0 + @step,
 * @x0 + 2 * @step, ...: how many returned the right result.
 */
static inline unsigned long mix_calls_good(struct knitk_pool *pool,
					   unsigned long n,
					   const struct knitk_call_opts *co,
					   uint64_t x0, uint64_t step)
{
	unsigned long i, good = 0;

	for (i = 0; i < n; i++) {
		uint64_t x = i * step + x0, y = 0;
		size_t len = 0;

		if (knitk_pool_call(pool, T_MIX, &x, 8, co, &y, 8, &len) == 0 &&
		    len == 8 && y == mix64(x))
			good++;
	}
	return good;
}

/* Yield until *@ok reaches @n, or *@bad counts anything. */
static inline void wait_ok_count(_Atomic unsigned long *ok,
				 _Atomic unsigned long *bad, unsigned long n)
{
	while (atomic_load(ok) < n && !atomic_load(bad))
		sched_yield();
}

/* What echo_loop() counted. */
struct echo_loop {
	unsigned long sent, reaped, again;	/* again: submits at capacity */
	unsigned long bad;	/* failed, or a result not 8 bytes */
	unsigned long dup;	/* a result out of range, or one seen before */
	unsigned long once;	/* arguments whose result came exactly once */
	const char *failed;	/* the step that stopped the loop, or NULL */
};

/*
 * @n T_ECHO calls of 0, 1, ..., @n - 1 through one event loop on @pool,
 * at most @window in flight: submit until the window or the pool is full
 * (-EAGAIN), reap until 0 (which arms the event fd), and while calls are
 * outstanding wait on @ep, an epoll set holding the event fd
 * (edge-triggered); a lost wake hangs in that wait, for the runner's
 * watchdog.  0 once every call is reaped; else the error of the step named
 * in @r->failed: a submit, a reap, or -EIO for an epoll_wait not 1.
 */
static inline int echo_loop(struct knitk_pool *pool, int ep, unsigned long n,
			    unsigned long window, struct echo_loop *r)
{
	unsigned char *seen = calloc(n ? n : 1, 1);
	struct knitk_call *calls[64];
	struct epoll_event ev;
	unsigned long x;
	int ret = 0, got, i;

	memset(r, 0, sizeof(*r));
	if (!seen) {
		r->failed = "calloc";
		return -ENOMEM;
	}
	while (r->reaped < n) {
		while (r->sent < n && r->sent - r->reaped < window) {
			uint64_t arg = r->sent;
			struct knitk_call *c;

			ret = knitk_pool_submit(pool, T_ECHO, &arg, sizeof(arg), NULL, &c);
			if (ret == -EAGAIN) {
				r->again++;
				break;
			}
			if (ret) {
				r->failed = "knitk_pool_submit";
				goto out;
			}
			r->sent++;
		}
		while ((got = knitk_pool_reap(pool, calls, 64)) > 0) {
			for (i = 0; i < got; i++) {
				const void *data;
				uint64_t y;
				size_t len;

				if (knitk_call_status(calls[i]) ||
				    knitk_call_result(calls[i], &data, &len) ||
				    len != sizeof(y)) {
					r->bad++;
				} else {
					memcpy(&y, data, sizeof(y));
					if (y >= n || seen[y]++)
						r->dup++;
				}
				knitk_call_release(calls[i]);
			}
			r->reaped += (unsigned long)got;
		}
		if (got) {
			ret = got;
			r->failed = "knitk_pool_reap";
			goto out;
		}
		if (r->reaped < r->sent && epoll_wait(ep, &ev, 1, -1) != 1) {
			ret = -EIO;
			r->failed = "epoll_wait";
			goto out;
		}
	}
	ret = 0;
out:
	for (x = 0; x < n; x++)
		r->once += seen[x] == 1;
	free(seen);
	return ret;
}

/*
 * Results published in the workers' return mailboxes and not taken yet
 * (in event mode only reap takes them).
 */
static inline unsigned int results_pending(struct knitk_pool *pool,
					   unsigned int workers)
{
	struct knitk_endpoint *ep;
	unsigned int w, n = 0;
	uint64_t pending;

	if (knitk_pool_endpoint(pool, &ep))
		return 0;
	for (w = 0; w < workers; w++) {
		int m = knitk_endpoint_return_mailbox(ep, w);

		if (m >= 0 && knitk_mailbox_pending(ep, (unsigned int)m, &pending) >= 0)
			n += (unsigned int)__builtin_popcountll(pending);
	}
	return n;
}

/*
 * The start of a pool test's main(): a process worker runs @table and
 * never returns (nonzero: @table is bad); the host takes argv[1], the
 * calls of the throughput cases (tests/run.sh: one count per build), into
 * *@nr_calls, at most @max; without it *@nr_calls keeps its default.
 */
static inline int pool_test_start(int argc, char **argv,
				  const struct knitk_task_table *table,
				  unsigned long *nr_calls, unsigned long max)
{
	if (knitk_worker_main(argc, argv, table, NULL))
		return -1;
	if (argc > 1)
		*nr_calls = strtoul(argv[1], NULL, 0);
	if (*nr_calls > max)
		*nr_calls = max;
	return 0;
}

/*
 * A task that writes its worker's pid to the fd given as its i32
 * argument, then runs until the test kills its worker (or an abort at
 * teardown ends it, -EINTR): the call held by the worker a test kills
 * (pool_death_wait_test's D_PARK, pool_lifeline_test's L_PARK).
 */
static inline int task_park(const void *in, size_t len, struct knitk_reply *out,
			    void *ctx)
{
	struct timespec ts = { 0, 1000000 };
	int32_t fd, pid = (int32_t)getpid();

	(void)out;
	if (len != sizeof(fd))
		return -EINVAL;
	memcpy(&fd, in, sizeof(fd));
	if (write(fd, &pid, sizeof(pid)) != sizeof(pid))
		return -EIO;
	while (!knitk_task_aborted(ctx))
		nanosleep(&ts, NULL);
	return -EINTR;
}

#endif /* KNITK_POOL_TASKS_H */
