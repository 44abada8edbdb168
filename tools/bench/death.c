// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-bench: how soon a thread waiting for a call learns that the
 * process worker running it was SIGKILLed.
 *
 * knitk: a pool of 2 process workers, a call whose task blocks (it
 * reports its worker's pid first), a thread parked in knitk_call_wait on
 * it; the worker is SIGKILLed and the time runs from the kill to the
 * wait's return (-EOWNERDEAD, attributed to the killed worker: a
 * "message" moved).  With KNITK_POOL_RESPAWN the next kill waits until
 * the pool has replaced the worker; without it, a fresh pool every two
 * kills.  Private lanes (the call pinned to a worker) and stealing.
 *
 * The floor, pidfd: a thread blocked in poll() on the pidfd of a paused
 * child, SIGKILLed; from the kill to the wake.  Both sides kill only
 * once the waiting thread sleeps (its /proc state), and the pool's other
 * worker too, so what is measured is a parked wait's wake.
 *
 * The time per operation is the mean over the repetition's kills; the
 * p50 and p99 over every kill of the run go into "latency_us" and the
 * death_wait_* ratios.  The CPU time per kill includes everything done
 * for it: the respawn (or the new pool), the fork of the pidfd's child.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <knitk.h>
#include <knitk_pool.h>

#include "bench.h"

#define DW_WORKERS	2
/* After the waiter is seen asleep, before the kill: it stays parked. */
#define DW_SETTLE_NS	100000L

enum { DW_PIDFD = BENCH_DEATH_PIDFD, DW_PRIVATE, DW_STEAL };
#define DW_RESPAWN	16
_Static_assert(BENCH_DEATH_WORKER == (DW_PRIVATE | DW_RESPAWN), "death arg");

static pid_t dw_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* The state letter of task @tid of process @pid (/proc), or 0. */
static char dw_state(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* Until task @tid of @pid sleeps, twice DW_SETTLE_NS apart, or is gone. */
static void dw_wait_task(pid_t pid, pid_t tid)
{
	struct timespec ts = { 0, DW_SETTLE_NS };
	char st;

	for (;;) {
		st = dw_state(pid, tid);
		if (!st)
			return;
		if (st == 'S') {
			nanosleep(&ts, NULL);
			if (dw_state(pid, tid) == 'S')
				return;
		}
		sched_yield();
	}
}

static void dw_wait_asleep(pid_t pid, _Atomic pid_t *tid)
{
	while (!atomic_load(tid))
		sched_yield();
	dw_wait_task(pid, atomic_load(tid));
}

struct dw_waiter {
	_Atomic pid_t tid;
	struct knitk_call *call;	/* knitk */
	int pidfd;			/* the floor */
	int ret;
	uint64_t t1;
};

static void *dw_call_waiter(void *arg)
{
	struct dw_waiter *w = arg;

	atomic_store(&w->tid, dw_gettid());
	w->ret = knitk_call_wait(w->call, KNITK_WAIT_FOREVER);
	w->t1 = bench_now_ns();
	return NULL;
}

static void *dw_pidfd_waiter(void *arg)
{
	struct dw_waiter *w = arg;
	struct pollfd pfd = { .fd = w->pidfd, .events = POLLIN };

	atomic_store(&w->tid, dw_gettid());
	do
		w->ret = poll(&pfd, 1, -1);
	while (w->ret < 0 && errno == EINTR);
	w->t1 = bench_now_ns();
	w->ret = w->ret == 1 && (pfd.revents & POLLIN) ? 0 : -EIO;
	return NULL;
}

/* One kill of the floor: ns from kill to wake in *@ns; 0 or -errno. */
static int dw_pidfd_once(uint64_t *ns)
{
	struct dw_waiter w = { .pidfd = -1 };
	pthread_t th;
	uint64_t t0;
	pid_t pid;
	int ret;

	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		for (;;)
			pause();
	}
	w.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (w.pidfd < 0) {
		ret = -errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return ret;
	}
	/* The child paused too (its only thread asleep). */
	{
		_Atomic pid_t ctid = pid;

		dw_wait_asleep(pid, &ctid);
	}
	ret = -pthread_create(&th, NULL, dw_pidfd_waiter, &w);
	if (!ret) {
		dw_wait_asleep(getpid(), &w.tid);
		t0 = bench_now_ns();
		kill(pid, SIGKILL);
		pthread_join(th, NULL);
		*ns = w.t1 - t0;
		ret = w.ret;
	} else {
		kill(pid, SIGKILL);
	}
	waitpid(pid, NULL, 0);
	close(w.pidfd);
	return ret;
}

struct dw_pool {
	struct knitk_pool *pool;
	int fds[2];			/* the tasks report their pid here */
	unsigned int kills;		/* of this pool */
};

static int dw_pool_open(struct dw_pool *p, long arg, const struct bench_ctx *ctx)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o),
		.kind = KNITK_WORKER_PROCESSES,
		.nr_workers = DW_WORKERS,
		.knot_flags = ctx->knot_flags,
		.flags = arg & DW_RESPAWN ? KNITK_POOL_RESPAWN : 0,
		.dispatch = (arg & 15) == DW_STEAL ? KNITK_POOL_DISPATCH_STEAL :
			    KNITK_POOL_DISPATCH_PRIVATE,
	};

	p->kills = 0;
	return knitk_pool_create(&o, &bench_tasks, &p->pool);
}

/*
 * One kill of a pool worker: ns from the kill to the waiter's return in
 * *@ns, *@moved 1 if it returned -EOWNERDEAD attributed to the killed
 * worker; 0 or -errno.
 */
static int dw_pool_once(struct dw_pool *p, long arg, uint64_t *ns, int *moved)
{
	struct knitk_call_opts pin = {
		.size = sizeof(pin), .flags = KNITK_CALL_WORKER,
		.worker = p->kills % DW_WORKERS,
	};
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct dw_waiter w = { .pidfd = -1 };
	int32_t fd = p->fds[1], pid = 0;
	unsigned int k;
	pthread_t th;
	uint64_t t0;
	int ret, victim = -1;

	ret = knitk_pool_submit(p->pool, BENCH_TASK_PARK, &fd, sizeof(fd),
				(arg & 15) == DW_STEAL ? NULL : &pin, &w.call);
	if (ret)
		return ret;
	/* Running: on which worker. */
	ret = bench_read_all(p->fds[0], &pid, sizeof(pid));
	for (k = 0; !ret && k < DW_WORKERS; k++) {
		struct knitk_worker_info wi = { .size = sizeof(wi) };

		if (!knitk_pool_worker_info(p->pool, k, &wi) && wi.pid == pid)
			victim = (int)k;
	}
	if (!ret && victim < 0)
		ret = -ESRCH;
	if (!ret)
		ret = -pthread_create(&th, NULL, dw_call_waiter, &w);
	if (ret) {
		knitk_call_release(w.call);
		return ret;
	}
	dw_wait_asleep(getpid(), &w.tid);
	/*
	 * The other worker parked too (a new one may still be starting): the
	 * floor's machine is as quiet, a paused child and a sleeping waiter.
	 */
	for (k = 0; k < DW_WORKERS; k++) {
		struct knitk_worker_info wi = { .size = sizeof(wi) };

		if ((int)k != victim && !knitk_pool_worker_info(p->pool, k, &wi) &&
		    wi.pid > 0)
			dw_wait_task(wi.pid, wi.pid);
	}
	t0 = bench_now_ns();
	kill(pid, SIGKILL);
	pthread_join(th, NULL);
	*ns = w.t1 - t0;
	*moved = w.ret == -EOWNERDEAD && knitk_call_worker(w.call) == victim;
	knitk_call_release(w.call);
	p->kills++;
	/* The next kill starts from a pool that has replaced the worker. */
	if (arg & DW_RESPAWN) {
		for (;;) {
			knitk_pool_stats(p->pool, &st);
			if (st.deaths == p->kills && st.respawns == p->kills)
				break;
			if (st.deaths > p->kills || st.respawns < st.deaths - 1)
				return -EPROTO;
			sched_yield();
		}
	}
	return 0;
}

/* Every kill's latency over the run: p50 and p99 come from all of them. */
static int keep_lat(struct bench_result *r, const uint64_t *lat, uint64_t n)
{
	double *v = realloc(r->lat_us, (r->nlat + n) * sizeof(*v));
	uint64_t i;

	if (!v)
		return -ENOMEM;
	r->lat_us = v;
	for (i = 0; i < n; i++)
		v[r->nlat++] = (double)lat[i] / 1e3;
	return 0;
}

int bench_kill_reps(const struct bench_case *c, const struct bench_ctx *ctx,
		    struct bench_result *r, bench_kill_fn once, void *arg,
		    struct knitk_pool *const *pool)
{
	uint64_t n = bench_ops(c, ctx), *lat, sum, k, seen_n;
	int i, ret = 0, seen;
	double c0;

	lat = calloc(n, sizeof(*lat));
	if (!lat)
		return -ENOMEM;
	r->ops = n;
	r->has_msgs = 1;
	r->has_lat = 1;
	for (i = -1; i < ctx->reps && !ret; i++) {
		uint64_t m = i < 0 ? 2 : n;	/* rep -1: warm-up */

		sum = 0;
		seen_n = 0;
		c0 = bench_cpu_ns(pool ? *pool : NULL);
		for (k = 0; k < m && !ret; k++) {
			seen = 0;
			ret = once(arg, &lat[k], &seen);
			sum += lat[k];
			seen_n += (uint64_t)seen;
		}
		if (ret) {
			bench_fail(r, "kill %llu: %s", (unsigned long long)k,
				   strerror(-ret));
			break;
		}
		if (i < 0)
			continue;
		r->ns[r->nreps] = (double)sum / (double)m;
		r->cpu[r->nreps++] = (bench_cpu_ns(pool ? *pool : NULL) - c0) /
				     (double)m;
		r->msgs_expected += m;
		r->msgs_moved += seen_n;
		ret = keep_lat(r, lat, m);
	}
	free(lat);
	return ret;
}

struct dw_run {
	struct dw_pool p;
	long arg;
	const struct bench_ctx *ctx;
};

static int dw_once(void *v, uint64_t *ns, int *moved)
{
	struct dw_run *d = v;
	struct dw_pool *p = &d->p;
	int ret;

	if (d->arg == DW_PIDFD) {
		ret = dw_pidfd_once(ns);
		*moved = !ret;
		return ret;
	}
	/* Without respawn, a new pool once each worker was killed. */
	if (p->pool && !(d->arg & DW_RESPAWN) && p->kills == DW_WORKERS) {
		knitk_pool_destroy(p->pool);
		p->pool = NULL;
	}
	ret = p->pool ? 0 : dw_pool_open(p, d->arg, d->ctx);
	return ret ? ret : dw_pool_once(p, d->arg, ns, moved);
}

/* arg: DW_PIDFD, or DW_PRIVATE / DW_STEAL | DW_RESPAWN */
int bench_death_run(const struct bench_case *c, const struct bench_ctx *ctx,
		    struct bench_result *r)
{
	struct dw_run d = { .p.pool = NULL, .arg = c->arg, .ctx = ctx };
	int ret;

	/* Inherited by the workers (no O_CLOEXEC), respawned ones too. */
	if (c->arg != DW_PIDFD && pipe(d.p.fds))
		return -errno;
	ret = bench_kill_reps(c, ctx, r, dw_once, &d, &d.p.pool);
	knitk_pool_destroy(d.p.pool);
	if (c->arg != DW_PIDFD) {
		close(d.p.fds[0]);
		close(d.p.fds[1]);
	}
	return ret;
}

#define DW(name, arg, base)						\
	{ "death-wait/" name, "death-wait", "ns/op", base, 1, bench_death_run, arg, 60, 10 }

const struct bench_case bench_death_cases[] = {
	{ "death-wait/pidfd", "death-wait", "ns/op", NULL, 0, bench_death_run, DW_PIDFD,
	  60, 10 },
	DW("knitk-respawn", DW_PRIVATE | DW_RESPAWN, "death-wait/pidfd"),
	DW("knitk", DW_PRIVATE, "death-wait/pidfd"),
	DW("knitk-steal-respawn", DW_STEAL | DW_RESPAWN, "death-wait/pidfd"),
	DW("knitk-steal", DW_STEAL, "death-wait/pidfd"),
	{ NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0 },
};
