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
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
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

#endif
