/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Waiting for a pool's workers to sleep, and for a worker to be stopped
 * (and stopping one thread the way a debugger does),
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
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/wait.h>
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

/*
 * The state letter of thread @tid of process @pid ('R', 'S', 'T', 'Z'...),
 * 0 once it is gone.
 */
static inline char task_state(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The state follows the command name, which may hold anything. */
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* Thread @tid of process @pid is stopped: by a signal ('T') or a tracer ('t'). */
static inline bool task_stopped(pid_t pid, pid_t tid)
{
	char s = task_state(pid, tid);

	return s == 'T' || s == 't';
}

/*
 * A debugger's stop of one thread (a SIGSTOP stops the whole process):
 * a child seizes and interrupts @tid on 'f' and lets it go on 'g'.
 */
struct freezer {
	pid_t child;
	int cmd, ack;
};

static inline int freezer_start(struct freezer *f, pid_t tid)
{
	int cmd[2], ack[2];
	char c;

	if (pipe(cmd))
		return -1;
	if (pipe(ack)) {
		close(cmd[0]);
		close(cmd[1]);
		return -1;
	}
	f->child = fork();
	if (f->child < 0)
		return -1;
	if (!f->child) {
		int st;

		close(cmd[1]);
		close(ack[0]);
		if (read(cmd[0], &c, 1) != 1)
			_exit(1);
		c = ptrace(PTRACE_SEIZE, tid, 0, 0) || ptrace(PTRACE_INTERRUPT, tid, 0, 0) ||
		    waitpid(tid, &st, __WALL) != tid ? 'x' : 'f';
		if (write(ack[1], &c, 1) != 1 || read(cmd[0], &c, 1) != 1)
			_exit(1);
		_exit(ptrace(PTRACE_DETACH, tid, 0, 0) ? 1 : 0);
	}
	close(cmd[0]);
	close(ack[1]);
	f->cmd = cmd[1];
	f->ack = ack[0];
	return 0;
}

static inline int freezer_freeze(struct freezer *f)
{
	char c = 'f';

	return write(f->cmd, &c, 1) == 1 && read(f->ack, &c, 1) == 1 && c == 'f' ? 0 : -1;
}

static inline int freezer_thaw(struct freezer *f)
{
	char c = 'g';
	int st = 0, ret;

	ret = write(f->cmd, &c, 1) == 1 ? 0 : -1;
	close(f->cmd);
	close(f->ack);
	if (waitpid(f->child, &st, 0) != f->child || !WIFEXITED(st) || WEXITSTATUS(st))
		ret = -1;
	return ret;
}

#endif /* KNITK_POOL_PARKED_H */
