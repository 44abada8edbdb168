/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What this process holds, counted from /proc: its open fds (or only its
 * pidfds) and its threads.  Tests take a count before and after a library
 * call; a difference is a leak.  Shared by the host's tests and the
 * guest's kselftests.
 */
#ifndef KNITK_PROC_COUNT_H
#define KNITK_PROC_COUNT_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* Open fds of this process, not the scan's own; with @pidfds only the pidfds. */
static inline int count_fds(bool pidfds)
{
	char link[64];
	struct dirent *d;
	DIR *dir = opendir("/proc/self/fd");
	int n = 0;
	ssize_t r;

	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.' || atoi(d->d_name) == dirfd(dir))
			continue;
		if (!pidfds) {
			n++;
			continue;
		}
		r = readlinkat(dirfd(dir), d->d_name, link, sizeof(link) - 1);
		if (r > 0) {
			link[r] = '\0';
			n += !strcmp(link, "anon_inode:[pidfd]");
		}
	}
	closedir(dir);
	return n;
}

/* Threads listed in /proc/self/task now. */
static inline int count_tasks_once(void)
{
	struct dirent *d;
	DIR *dir = opendir("/proc/self/task");
	int n = 0;

	if (!dir)
		return -1;
	while ((d = readdir(dir)))
		n += d->d_name[0] != '.';
	closedir(dir);
	return n;
}

/*
 * Threads of this process, settled: a thread that was just joined may
 * still be listed while it finishes exiting, so the count is read until
 * two reads 10 ms apart agree (at most 100 reads).
 */
static inline int count_threads(void)
{
	int n = count_tasks_once(), prev, i;

	for (i = 0; i < 100; i++) {
		prev = n;
		usleep(10000);
		n = count_tasks_once();
		if (n == prev)
			break;
	}
	return n;
}

/* No child left, not even a zombie. */
static inline bool no_children(void)
{
	return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

/*
 * The next child of process @parent in /proc (@dir, an opendir("/proc")),
 * or 0 at the end; its stat line in @stat ("pid (comm) state ppid ...").
 * A child subreaper sees its orphaned descendants here too.
 */
static inline pid_t proc_next_child_of(DIR *dir, pid_t parent, char *stat,
				       size_t size)
{
	struct dirent *d;

	while ((d = readdir(dir))) {
		char path[64], *q;
		pid_t p = (pid_t)atoi(d->d_name);
		FILE *f;

		if (p <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)p);
		f = fopen(path, "r");
		if (!f)
			continue;
		q = fgets(stat, (int)size, f) ? strrchr(stat, ')') : NULL;
		fclose(f);
		/* Field 4, after the state: the parent. */
		if (q && atoi(q + 4) == (int)parent)
			return p;
	}
	return 0;
}

/* The next child of this process: proc_next_child_of() of getpid(). */
static inline pid_t proc_next_child(DIR *dir, char *stat, size_t size)
{
	return proc_next_child_of(dir, getpid(), stat, size);
}

/* The state letter of a stat line of proc_next_child ('Z': a zombie). */
static inline char proc_stat_state(const char *stat)
{
	const char *q = strrchr(stat, ')');

	return q && q[1] ? q[2] : '?';
}

/* 1 when process @pid has exited (a zombie, or reaped already). */
static inline int proc_exited(pid_t pid)
{
	char path[64], buf[512], *q;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	q = strrchr(buf, ')');
	return q && q[1] == ' ' && (q[2] == 'Z' || q[2] == 'X');
}

/*
 * SIGKILL (and SIGCONT, for a stopped one) every child left and reap them
 * all, until none is left; each one on a "# left behind: <stat>" line with
 * @describe.  Returns how many there were.
 */
static inline unsigned int kill_children(bool describe)
{
	unsigned int left = 0;
	char stat[512];
	bool any;
	pid_t p;

	do {
		DIR *dir = opendir("/proc");

		if (!dir)
			break;
		any = false;
		while ((p = proc_next_child(dir, stat, sizeof(stat)))) {
			if (describe)
				printf("# left behind: %.200s%s", stat,
				       strchr(stat, '\n') ? "" : "\n");
			kill(p, SIGKILL);
			kill(p, SIGCONT);
			left++;
			any = true;
		}
		closedir(dir);
		while (waitpid(-1, NULL, 0) > 0)
			;
	} while (any);
	return left;
}

#endif
