/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Whether a thread of this process sleeps in FUTEX_WAIT on a given word,
 * read from /proc: a test waits for a parker to be queued on its
 * doorbell's seq, past every re-check, before it sends the event under
 * test (a kick, a death), so the event lands on a sleeper every run.
 * Futex backend only; needs _GNU_SOURCE (the build's -D_GNU_SOURCE).
 * Include after tap.h.
 */
#ifndef KNITK_FUTEX_ASLEEP_H
#define KNITK_FUTEX_ASLEEP_H

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
#include <knitk.h>

/* The calling thread's id, for the parker to publish. */
static inline pid_t futex_asleep_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static inline int futex_asleep_read(pid_t tid, const char *what, char *buf,
				    size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int)tid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	return 0;
}

/*
 * Thread @tid sleeps in FUTEX_WAIT on @addr: queued on the futex, past
 * the kernel's check of the value, so an advance of the word now wakes it.
 */
static inline bool asleep_on_futex(pid_t tid, const void *addr)
{
	char buf[512], want[64], *p;

	if (futex_asleep_read(tid, "stat", buf, sizeof(buf)))
		return false;
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] != 'S')
		return false;
	if (futex_asleep_read(tid, "syscall", buf, sizeof(buf)))
		return false;
	snprintf(want, sizeof(want), "%d %p ", (int)SYS_futex, addr);
	return !strncmp(buf, want, strlen(want));
}

/*
 * Wait until the thread whose id @tid publishes (0 until it runs) sleeps
 * on @addr.  No time limit: a parker that never sleeps there is the
 * runner's watchdog's to report.
 */
static inline void wait_asleep_on_futex(_Atomic pid_t *tid, const void *addr)
{
	pid_t t;

	while (!(t = atomic_load(tid)))
		sched_yield();
	while (!asleep_on_futex(t, addr))
		usleep(1000);
}

/*
 * Doorbell @d of @ep, whose @seq word @thread sleeps on once it published
 * its id in *@tid, ends by a mark of @marker: the end must advance @seq,
 * waking the sleeper.  One the end left asleep is kicked free after the
 * failed check (a failure, not a hang).  Joins @thread.
 */
static inline void end_role_wakes_sleeper(struct knitk_endpoint *ep, unsigned int d,
					  struct knitk_endpoint *marker,
					  pthread_t thread, _Atomic pid_t *tid,
					  const _Atomic uint32_t *seq)
{
	uint32_t before;
	bool woken;

	wait_asleep_on_futex(tid, seq);
	before = atomic_load(seq);
	CHECK_EQ(knitk_endpoint_mark_dead(marker, d), 0);
	woken = atomic_load(seq) != before;
	CHECK(woken);
	if (!woken)
		CHECK_EQ(knitk_doorbell_kick_self(ep), 0);
	pthread_join(thread, NULL);
}

#endif /* KNITK_FUTEX_ASLEEP_H */
