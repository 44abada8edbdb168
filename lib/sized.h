/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * libknitk: copying the caller's sized structs in and out (the rule is
 * "Sized structs" in include/knitk.h).  Not installed.
 *
 * Test builds (KNITK_TEST_HOOKS) act as a later library that knows
 * KNITK__SIZED_GROWTH more bytes of every sized output struct, filled with
 * KNITK__SIZED_FILL: a caller built against the current header is then the
 * older binary, and a test sees whether anything is written past its size.
 */
#ifndef KNITK_SIZED_H
#define KNITK_SIZED_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "knitk.h"

#ifdef KNITK_TEST_HOOKS
#define KNITK__SIZED_GROWTH	16
#define KNITK__SIZED_FILL	0xa5
#else
#define KNITK__SIZED_GROWTH	0
#endif

/*
 * Every sized struct starts with its size; version 0 is the current one.
 * Asserted by the file that copies the struct in or out.
 */
#define KNITK__SIZED_VER0(type, ver0) \
	_Static_assert(offsetof(struct type, size) == 0 && \
		       sizeof(struct type) == (ver0), #type " layout")

/* The caller's size: the struct's leading uint32_t. */
static inline uint32_t knitk__sized_size(const void *user)
{
	uint32_t size;

	memcpy(&size, user, sizeof(size));
	return size;
}

static inline int knitk__sized_check(uint32_t size, size_t ver0)
{
	if (size < ver0)
		return -EINVAL;
	return size > KNITK_SIZED_MAX ? -E2BIG : 0;
}

/*
 * knitk__sized_in - copy the caller's struct at @user into the library's
 * @dst of @ksize bytes: zero-extended when smaller, -E2BIG when larger with
 * a non-zero byte past @ksize, -EINVAL below @ver0.
 */
static inline int knitk__sized_in(void *dst, size_t ksize, size_t ver0,
				  const void *user)
{
	const unsigned char *u = user;
	uint32_t size = knitk__sized_size(user);
	int ret = knitk__sized_check(size, ver0);
	size_t i;

	if (ret)
		return ret;
	for (i = ksize; i < size; i++)
		if (u[i])
			return -E2BIG;
	memset(dst, 0, ksize);
	memcpy(dst, user, size < ksize ? size : ksize);
	return 0;
}

/*
 * knitk__sized_out - copy the library's @src of @ksize bytes to the
 * caller's @user: at most its size, never a byte past it; the size field
 * gets the bytes written.  -EINVAL below @ver0.
 */
static inline int knitk__sized_out(void *user, const void *src, size_t ksize,
				   size_t ver0)
{
	unsigned char *u = user;
	uint32_t size = knitk__sized_size(user);
	size_t known = ksize + KNITK__SIZED_GROWTH;
	size_t n = size < known ? size : known;
	uint32_t filled = (uint32_t)n;
	int ret = knitk__sized_check(size, ver0);

	if (ret)
		return ret;
	memcpy(u + sizeof(filled), (const unsigned char *)src + sizeof(filled),
	       (n < ksize ? n : ksize) - sizeof(filled));
#ifdef KNITK_TEST_HOOKS
	if (n > ksize)
		memset(u + ksize, KNITK__SIZED_FILL, n - ksize);
#endif
	memcpy(u, &filled, sizeof(filled));
	return 0;
}

#endif /* KNITK_SIZED_H */
