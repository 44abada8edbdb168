/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A page of shared memory that a host test and its process workers (the
 * test program, re-executed by the pool) both map: a memfd without
 * close-on-exec, its descriptor named by an environment variable that
 * the workers inherit.
 */
#ifndef KNITK_INHERITED_PAGE_H
#define KNITK_INHERITED_PAGE_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define INHERITED_PAGE	4096

/* The host: a new zeroed page, named in @env for the workers; NULL on failure. */
static inline void *inherited_page_create(const char *env, const char *name)
{
	char v[16];
	void *p;
	int fd = memfd_create(name, 0);

	if (fd < 0 || ftruncate(fd, INHERITED_PAGE))
		return NULL;
	p = mmap(NULL, INHERITED_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return NULL;
	snprintf(v, sizeof(v), "%d", fd);
	setenv(env, v, 1);
	return p;
}

/* A worker: the page @env names, or NULL (not a worker of such a host). */
static inline void *inherited_page_map(const char *env)
{
	const char *v = getenv(env);
	void *p;

	if (!v)
		return NULL;
	p = mmap(NULL, INHERITED_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, atoi(v), 0);
	return p == MAP_FAILED ? NULL : p;
}

#endif
