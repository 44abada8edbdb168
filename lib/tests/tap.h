/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A tiny test harness: each case prints one flat TAP line,
 * "ok - <case>", "not ok - <case>" or "ok - <case> # SKIP <why>";
 * everything else is a "# " comment.  The runner prefixes the names.
 */
#ifndef KNITK_TAP_H
#define KNITK_TAP_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int tap_case_failed;
static int tap_failures;
static const char *tap_skip_why;

#define CHECK(cond) do {						\
	if (!(cond)) {							\
		printf("# %s:%d: check failed: %s\n", __FILE__,		\
		       __LINE__, #cond);				\
		tap_case_failed = 1;					\
	}								\
} while (0)

#define CHECK_EQ(a, b) do {						\
	long long _a = (long long)(a), _b = (long long)(b);		\
	if (_a != _b) {							\
		printf("# %s:%d: %s == %lld, expected %s == %lld\n",	\
		       __FILE__, __LINE__, #a, _a, #b, _b);		\
		tap_case_failed = 1;					\
	}								\
} while (0)

/* Fail the case and leave the test function. */
#define REQUIRE(cond) do {						\
	if (!(cond)) {							\
		printf("# %s:%d: requirement failed: %s\n", __FILE__,	\
		       __LINE__, #cond);				\
		tap_case_failed = 1;					\
		return;							\
	}								\
} while (0)

#define SKIP(why) do { tap_skip_why = (why); return; } while (0)

/* TAP_ONLY=<case> in the environment runs that case alone (debugging). */
static inline void tap_run(const char *name, void (*fn)(void))
{
	const char *only = getenv("TAP_ONLY");

	if (only && strcmp(only, name))
		return;
	tap_case_failed = 0;
	tap_skip_why = NULL;
	fflush(stdout);
	fn();
	if (tap_case_failed) {
		printf("not ok - %s\n", name);
		tap_failures++;
	} else if (tap_skip_why) {
		printf("ok - %s # SKIP %s\n", name, tap_skip_why);
	} else {
		printf("ok - %s\n", name);
	}
	fflush(stdout);
}

#define TEST(fn) tap_run(#fn, fn)

static inline int tap_exit(void)
{
	return tap_failures ? 1 : 0;
}

static inline uint64_t tap_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: deterministic test data. */
static inline uint64_t tap_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

#endif /* KNITK_TAP_H */
