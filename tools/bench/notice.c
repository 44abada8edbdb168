// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-bench: how soon a survivor learns that a peer process died, on
 * either backend, against the pidfd floor (death-wait's: a thread in
 * poll() on the pidfd of a paused child, SIGKILLed).
 *
 *  - worker-wait: a pool's process worker (KNITK_POOL_RESPAWN), killed
 *    while running a call that a thread waits for in knitk_call_wait
 *    (death-wait/knitk-respawn's measurement, in this group).
 *  - client-wait: a knot of one worker role, held by a client process
 *    that attached through the inherited fd (KNITK_ATTACH_TAKE_FD) and
 *    joined; the host's thread parks on its doorbell (knitk_doorbell_park)
 *    until knitk_endpoint_deaths shows the client's death.
 *  - client-epoll: the same, the host's thread in epoll_wait: on the
 *    module the endpoint fd (EPOLLPRI at a death), on the futex backend
 *    the host's event fd (knitk_endpoint_set_event_fd) with its doorbell
 *    armed (knitk_doorbell_prepare).
 *
 * Who notices a client's death: the module, at the client's exit.  The
 * futex backend has no kernel to tell it, so this program does what a
 * user of a bare knot does there: a thread polls the client's pidfd and
 * calls knitk_endpoint_mark_dead (the pool's own workers have lifelines,
 * which bare knots do not).
 *
 * A client wait gives up after DN_MISS_NS: that kill counts as a missed
 * death ("messages" moved = deaths seen; the 'death_notice_missed' ratio).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <knitk.h>

#include "bench.h"

#define DN_MISS_NS	5000000000ULL
/* After the waiter is seen asleep, before the kill: it stays parked. */
#define DN_SETTLE_NS	100000L

enum { DN_WAIT, DN_EPOLL };

struct dn_client {
	struct bench_kpair kp;
	pid_t pid;
	int pidfd;			/* futex: the watch's */
	int efd;			/* futex + epoll: the host's event fd */
	_Atomic pid_t tid;		/* the waiting thread, once it runs */
	_Atomic int stop_watch;
	uint32_t seq0;
	int mode, seen;
	uint64_t t1;
};

static pid_t dn_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Sleeping (/proc state 'S'), twice DN_SETTLE_NS apart. */
static void dn_wait_asleep(_Atomic pid_t *tid)
{
	struct timespec ts = { 0, DN_SETTLE_NS };
	char path[64], buf[512], *p;
	int i, asleep = 0;

	while (!atomic_load(tid))
		sched_yield();
	if (atomic_load(tid) < 0)
		return;		/* the waiter failed to start its wait */
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)atomic_load(tid));
	for (i = 0; asleep < 2; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = '\0';
		p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'S') {
			asleep++;
			nanosleep(&ts, NULL);
		} else {
			asleep = 0;
			sched_yield();
		}
	}
}

/* The client's death is recorded: death_seq moved and worker 0 dead. */
static bool dn_dead(struct dn_client *c)
{
	uint32_t seq;
	uint64_t dead;

	knitk_endpoint_deaths(c->kp.host, &seq, &dead);
	return seq != c->seq0 && (dead & 1);
}

static void *dn_waiter(void *arg)
{
	struct dn_client *c = arg;
	uint64_t until = bench_now_ns() + DN_MISS_NS;
	int ep = -1;

	if (c->mode == DN_EPOLL) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLPRI };
		int fd = c->efd >= 0 ? c->efd : knitk_endpoint_fd(c->kp.host);

		ep = epoll_create1(EPOLL_CLOEXEC);
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
			goto out;
	}
	atomic_store(&c->tid, dn_gettid());
	while (!dn_dead(c) && bench_now_ns() < until) {
		struct epoll_event ev;
		uint32_t seq;
		uint64_t left;

		if (c->mode == DN_WAIT) {
			knitk_doorbell_park(c->kp.host, until);
			continue;
		}
		/* The futex backend writes the event fd for an armed doorbell. */
		if (c->efd >= 0 && knitk_doorbell_prepare(c->kp.host, &seq))
			break;
		left = until - bench_now_ns();
		if (!dn_dead(c) && (int64_t)left > 0)
			epoll_wait(ep, &ev, 1, (int)(left / 1000000) + 1);
		if (c->efd >= 0) {
			uint64_t v;

			knitk_doorbell_cancel(c->kp.host);
			if (read(c->efd, &v, sizeof(v)) < 0) {
				/* EAGAIN: nothing written; look anyway. */
			}
		}
	}
	c->t1 = bench_now_ns();
	c->seen = dn_dead(c);
out:
	if (ep >= 0)
		close(ep);
	atomic_store(&c->tid, -1);
	return NULL;
}

/* Futex backend: what a bare knot's user does, the pidfd seen, mark_dead. */
static void *dn_watch(void *arg)
{
	struct dn_client *c = arg;
	struct pollfd pfd = { .fd = c->pidfd, .events = POLLIN };

	while (!atomic_load(&c->stop_watch)) {
		if (poll(&pfd, 1, 100) == 1) {
			knitk_endpoint_mark_dead(c->kp.host, 0);
			break;
		}
	}
	return NULL;
}

/* One kill: ns from the kill to the wait's return in *@ns; 0 or -errno. */
static int dn_client_once(int mode, const struct bench_ctx *ctx, uint64_t *ns,
			  int *seen)
{
	struct dn_client c = { .pidfd = -1, .efd = -1, .mode = mode };
	pthread_t waiter, watch;
	bool watching = false;
	int p[2], ret;
	char ok;
	uint64_t t0;

	ret = bench_kpair_host_open(&c.kp, ctx->knot_flags, 64, 0);
	if (ret)
		return ret;
	if (pipe(p) < 0) {
		ret = -errno;
		goto out_kp;
	}
	c.pid = fork();
	if (c.pid < 0) {
		ret = -errno;
		goto out_pipe;
	}
	if (c.pid == 0) {
		/* The client: its own endpoint, joined, then nothing. */
		ok = bench_kpair_peer_open(&c.kp, 1) ? 0 : 1;
		if (write(p[1], &ok, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	if (read(p[0], &ok, 1) != 1 || !ok) {
		ret = -EPROTO;
		goto out_child;
	}
	knitk_endpoint_deaths(c.kp.host, &c.seq0, NULL);
	if (knitk_endpoint_backend(c.kp.host) == KNITK_BACKEND_FUTEX) {
		c.pidfd = (int)syscall(SYS_pidfd_open, c.pid, 0);
		if (c.pidfd < 0) {
			ret = -errno;
			goto out_child;
		}
		ret = -pthread_create(&watch, NULL, dn_watch, &c);
		if (ret)
			goto out_child;
		watching = true;
		if (mode == DN_EPOLL) {
			c.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			if (c.efd < 0 || knitk_endpoint_set_event_fd(c.kp.host, c.efd)) {
				ret = -EIO;
				goto out_child;
			}
		}
	}
	ret = -pthread_create(&waiter, NULL, dn_waiter, &c);
	if (ret)
		goto out_child;
	dn_wait_asleep(&c.tid);
	t0 = bench_now_ns();
	kill(c.pid, SIGKILL);
	pthread_join(waiter, NULL);
	*ns = c.t1 - t0;
	*seen = c.seen;
out_child:
	kill(c.pid, SIGKILL);
	waitpid(c.pid, NULL, 0);
	if (watching) {
		atomic_store(&c.stop_watch, 1);
		pthread_join(watch, NULL);
	}
	if (c.pidfd >= 0)
		close(c.pidfd);
out_pipe:
	close(p[0]);
	close(p[1]);
out_kp:
	bench_kpair_host_close(&c.kp);
	if (c.efd >= 0)
		close(c.efd);
	return ret;
}

struct dn_run {
	int mode;
	const struct bench_ctx *ctx;
};

static int dn_once(void *v, uint64_t *ns, int *seen)
{
	struct dn_run *d = v;

	return dn_client_once(d->mode, d->ctx, ns, seen);
}

static int dn_run(const struct bench_case *c, const struct bench_ctx *ctx,
		  struct bench_result *r)
{
	struct dn_run d = { .mode = (int)c->arg, .ctx = ctx };

	return bench_kill_reps(c, ctx, r, dn_once, &d, NULL);
}

const struct bench_case bench_notice_cases[] = {
	{ "death-notice/pidfd", "death-notice", "ns/op", NULL, 0,
	  bench_death_run, BENCH_DEATH_PIDFD, 60, 10 },
	{ "death-notice/worker-wait", "death-notice", "ns/op",
	  "death-notice/pidfd", 1, bench_death_run, BENCH_DEATH_WORKER, 60, 10 },
	{ "death-notice/client-wait", "death-notice", "ns/op",
	  "death-notice/pidfd", 1, dn_run, DN_WAIT, 60, 10 },
	{ "death-notice/client-epoll", "death-notice", "ns/op",
	  "death-notice/pidfd", 1, dn_run, DN_EPOLL, 60, 10 },
	{ NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0 },
};
