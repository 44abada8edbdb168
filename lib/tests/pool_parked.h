/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Waiting for a pool's workers to sleep, and for a worker to be stopped,
 * shared by the pool tests on the host and in the guest
 * (selftests/knitk/pool_steal_test.c).
 */
#ifndef KNITK_POOL_PARKED_H
#define KNITK_POOL_PARKED_H

#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "knitk.h"

/* Worker @w of @knot has its doorbell's sleeping flag up: it is parked. */
static inline bool worker_parked(struct knitk_endpoint *knot, unsigned int w)
{
	struct knitk_layout l;
	const struct knitk_doorbell *db;
	void *base;

	knitk_endpoint_layout(knot, &l, NULL);
	knitk_endpoint_base(knot, &base);
	db = (const void *)((char *)base + l.doorbell_off +
			    (uint64_t)w * l.doorbell_stride);
	return __atomic_load_n(&db->sleeping, __ATOMIC_ACQUIRE) != 0;
}

/* Yield until the first @n workers of @knot sleep on their doorbells. */
static inline void wait_workers_parked(struct knitk_endpoint *knot, unsigned int n)
{
	unsigned int w, parked;

	do {
		sched_yield();
		parked = 0;
		for (w = 0; w < n; w++)
			parked += worker_parked(knot, w);
	} while (parked < n);
}

/* Thread @tid of process @pid is stopped: by a signal ('T') or a tracer ('t'). */
static inline bool task_stopped(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* The state follows the command name, which may hold anything. */
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

#endif /* KNITK_POOL_PARKED_H */
