/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers of the kselftests of the parked path (KNITK_WAIT_SPIN and
 * KNITK_IOC_NOTIFY_WAIT, docs/protocol.md S8 and S9): the module's spin_ns
 * parameter, a waiter's sleeping flag, a test-side consumer, a ringer
 * that keeps running, and the scheduler facts a spin test waits for (a
 * thread's CPU and system time).
 */
#ifndef KNITK_SPIN_H
#define KNITK_SPIN_H

#include <sched.h>

#include "knitk_test.h"

#define SPIN_PARAM	KNITK_SYSMOD "/parameters/spin_ns"
#define SPIN_HOUR	"3600000000000"

/* Sleeping flag up, as a waiter does first; returns the seq read before. */
static inline __u32 flag_asleep(struct knitk_doorbell *db)
{
	__u32 seq = knitk_doorbell_seq(db);

	knitk_doorbell_sleeping(db, 1);
	return seq;
}

/* Consume every pending lane of @s (the test is its one consumer). */
static inline void drain(struct knitk_sector *s)
{
	__atomic_store_n(&s->ack, knitk_load64(&s->pub), __ATOMIC_RELEASE);
}

/* System time of thread @tid of process @pid, in clock ticks. */
static inline unsigned long long thread_stime(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *p;
	unsigned long long v = 0;
	int i;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	if (knitk_read_file(path, buf, sizeof(buf)))
		return 0;
	p = strrchr(buf, ')');
	/* After the comm: state is field 3, stime field 15. */
	for (i = 3; p && i <= 15; i++) {
		p = strchr(p + 1, ' ');
		if (p && i == 15)
			v = strtoull(p + 1, NULL, 10);
	}
	return v;
}

/*
 * Until thread @tid of process @pid spins (its system time past @t0 by
 * two ticks) or sleeps.
 */
static inline void until_spinning(pid_t pid, pid_t tid, unsigned long long t0)
{
	while (thread_stime(pid, tid) < t0 + 2 &&
	       knitk_thread_state(pid, tid) != 'S')
		usleep(1000);
}

/*
 * A running ringer: a child that rings @bit through endpoint @fd (its
 * owner asleep with work, so the ring is delivered) and then runs on, never
 * leaving the CPU by itself.  Returns its pid once the ring was delivered,
 * else a negative errno (the child killed and reaped).
 */
static inline pid_t running_ringer(int fd, __u64 bit)
{
	int ready[2];
	char c = 'n';
	pid_t pid;

	if (pipe(ready))
		return -errno;
	pid = fork();
	if (pid < 0) {
		pid = -errno;
		close(ready[0]);
		close(ready[1]);
		return pid;
	}
	if (pid == 0) {
		__u64 woken = 0;

		c = knitk_notify(fd, bit, &woken) || woken != bit ? 'n' : 'y';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			;
	}
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1 || c != 'y') {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		pid = -EIO;
	}
	close(ready[0]);
	return pid;
}

/* Run the calling thread on CPU @cpu only, so two spinners never share one. */
static inline int pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

#endif /* KNITK_SPIN_H */
