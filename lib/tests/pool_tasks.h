/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The task table shared by the pool tests (and by their process workers,
 * which are the test programs themselves, re-executed by the pool).
 */
#ifndef KNITK_POOL_TASKS_H
#define KNITK_POOL_TASKS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "knitk.h"

enum {
	T_ECHO,		/* result = argument bytes */
	T_MIX,		/* u64 x -> u64 mix(x) */
	T_SLEEP,	/* u32 ms: sleeps, stops early when aborted */
	T_FILL,		/* u32 n, u8 seed -> n bytes seed + i */
	T_PID,		/* -> i32 getpid() */
	T_FAIL,		/* returns -(i32 argument) */
	T_ENV,		/* 1 if KNITK_PREFIX_TEST is set in the worker */
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

static int task_sleep(const void *in, size_t len, struct knitk_reply *out,
		      void *ctx)
{
	struct timespec ts = { 0, 200 * 1000 };
	uint32_t ms, i;

	(void)out;
	if (len != sizeof(ms))
		return -EINVAL;
	memcpy(&ms, in, sizeof(ms));
	for (i = 0; i < ms * 5; i++) {
		if (knitk_task_aborted(ctx))
			return -EINTR;
		nanosleep(&ts, NULL);
	}
	return (int)ms;
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

static const knitk_task_fn test_task_fns[T_NR] = {
	[T_ECHO] = task_echo,
	[T_MIX] = task_mix,
	[T_SLEEP] = task_sleep,
	[T_FILL] = task_fill,
	[T_PID] = task_pid,
	[T_FAIL] = task_fail,
	[T_ENV] = task_env,
};

static const struct knitk_task_table test_tasks = { test_task_fns, T_NR };

/* Absolute CLOCK_MONOTONIC time @ms from now. */
static inline uint64_t after_ms(uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec +
	       ms * 1000000ULL;
}

#endif /* KNITK_POOL_TASKS_H */
