/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Allocations that fail, for a program linked with -Wl,--wrap of malloc,
 * calloc and strdup (the library's allocations, and in a static link
 * libc's own): a thread that arms it with fail_arm(n) fails its n-th
 * allocation from then on, once, as a real allocator fails (NULL, errno
 * ENOMEM: glibc's callers check).  A program that fails more defines
 * ALLOC_FAILS_ALSO() before it includes this: every allocation for which
 * that is true fails too.  Shared by the host's alloc_failure_test and
 * the guest's pool_resource_failures_test.
 */
#ifndef KNITK_ALLOC_FAIL_H
#define KNITK_ALLOC_FAIL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#ifndef ALLOC_FAILS_ALSO
#define ALLOC_FAILS_ALSO()	false
#endif

/* The armed thread's count to fail at, what it allocated since, and whether one failed. */
static _Thread_local unsigned int fail_at, allocs;
static _Thread_local bool failed_one;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
char *__wrap_strdup(const char *s);

static bool alloc_fails(void)
{
	if (ALLOC_FAILS_ALSO()) {
		errno = ENOMEM;
		return true;
	}
	if (!fail_at || ++allocs != fail_at)
		return false;
	failed_one = true;
	errno = ENOMEM;
	return true;
}

void *__wrap_malloc(size_t n)
{
	return alloc_fails() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	return alloc_fails() ? NULL : __real_calloc(n, m);
}

char *__wrap_strdup(const char *s)
{
	return alloc_fails() ? NULL : __real_strdup(s);
}

static inline void fail_arm(unsigned int n)
{
	fail_at = n;
	allocs = 0;
	failed_one = false;
}

/* Disarm; whether an allocation failed since fail_arm(). */
static inline bool fail_disarm(void)
{
	fail_at = 0;
	return failed_one;
}

#endif /* KNITK_ALLOC_FAIL_H */
