/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A peer's end, timed by its sleeping waiter: a thread that, once a
 * doorbell counts a wait asleep, closes an endpoint or SIGKILLs a process.
 * The peer-death tests sleep through it and check what woke them.
 */
#ifndef KNITK_TRIGGER_H
#define KNITK_TRIGGER_H

#include <pthread.h>

#include "knitk_harness.h"
#include "knitk_test.h"

struct trigger {
	pthread_t thread;
	int fd;			/* endpoint its STATS are read through */
	__u32 doorbell;		/* the sleeper's */
	int close_fd;		/* closed once it sleeps, if >= 0 */
	pid_t kill_pid;		/* else SIGKILLed */
	int ret;		/* 0 or a negative errno */
};

static inline void *trigger_run(void *arg)
{
	struct trigger *t = arg;

	t->ret = knitk_wait_asleep(t->fd, t->doorbell, 1);
	if (t->ret)
		return NULL;
	if (t->close_fd >= 0)
		t->ret = close(t->close_fd) ? -errno : 0;
	else if (kill(t->kill_pid, SIGKILL))
		t->ret = -errno;
	return NULL;
}

/*
 * Sleep on @db through endpoint @fd while @t acts: the sleeping flag up,
 * @t started, one KNITK_IOC_WAIT on the seq read first, the flag down, @t
 * joined.  Returns what the wait returned.
 */
static inline int trigger_sleep(struct __test_metadata *_metadata,
				struct trigger *t, struct knitk_doorbell *db,
				int fd)
{
	__u32 seq = knitk_doorbell_seq(db);
	int ret;

	knitk_doorbell_sleeping(db, 1);
	ASSERT_EQ(0, pthread_create(&t->thread, NULL, trigger_run, t));
	ret = knitk_wait(fd, seq, knitk_now_ns() + KNITK_LONG_NS);
	knitk_doorbell_sleeping(db, 0);
	pthread_join(t->thread, NULL);
	return ret;
}

#endif /* KNITK_TRIGGER_H */
