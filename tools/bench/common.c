// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-bench: clock, failure reporting and the pair runner shared by the
 * ping-pong and throughput families.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <knitk.h>
#include <knitk_pool.h>

#include "bench.h"

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void bench_fail(struct bench_result *r, const char *fmt, ...)
{
	va_list ap;

	if (r->failed)
		return;		/* keep the first reason */
	r->failed = 1;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
}

static double rusage_ns(int who)
{
	struct rusage ru;

	if (getrusage(who, &ru))
		return 0;
	return ((double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec) * 1e9 +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) * 1e3;
}

double bench_cpu_ns(struct knitk_pool *pool)
{
	double ns = rusage_ns(RUSAGE_SELF) + rusage_ns(RUSAGE_CHILDREN);
	struct knitk_worker_info wi;
	struct timespec ts;
	clockid_t clk;
	unsigned int w;

	/* Live process workers are not in RUSAGE_CHILDREN until reaped. */
	for (w = 0; pool; w++) {
		wi.size = sizeof(wi);
		if (knitk_pool_worker_info(pool, w, &wi))
			break;
		if (wi.pid > 0 && !clock_getcpuclockid(wi.pid, &clk) &&
		    !clock_gettime(clk, &ts))
			ns += (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
	}
	return ns;
}

uint64_t bench_ops(const struct bench_case *c, const struct bench_ctx *ctx)
{
	return ctx->quick ? c->n_quick : c->n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_quantile(double *v, size_t n, double q)
{
	size_t k;

	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	k = (size_t)(q * (double)n);
	if ((double)k < q * (double)n)
		k++;
	return v[k ? k - 1 : 0];
}

int bench_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t w;

	while (len) {
		w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int bench_read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	ssize_t got;

	while (len) {
		got = read(fd, p, len);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (got == 0)
			return -EPIPE;
		p += got;
		len -= (size_t)got;
	}
	return 0;
}

/* What the peer reports back, in its own shared mapping. */
struct pair_sync {
	_Atomic int ready;	/* 1 ready, -1 its init failed */
	int peer_ret;
	uint64_t peer_moved;
	uint64_t peer_end_ns;	/* CLOCK_MONOTONIC is system wide */
};

/*
 * Where the pairs of one repetition of bench_pairs_run meet, in a
 * MAP_SHARED page (each pair is a process): every pair reports ready and
 * waits for go before its clock starts, then adds its end and its
 * messages; a pair that fails before it is ready counts as failed.
 */
struct pair_gate {
	_Atomic unsigned int ready;
	_Atomic unsigned int failed;
	_Atomic int go;
	_Atomic uint64_t end_ns;	/* the latest end of any pair */
	_Atomic uint64_t moved;		/* messages moved by every pair */
};

/* Start together with the other pairs of @gate (if any). */
static void pair_gate_wait(struct pair_gate *gate)
{
	if (!gate)
		return;
	atomic_fetch_add(&gate->ready, 1);
	while (!atomic_load(&gate->go))
		sched_yield();
}

static void pair_gate_done(struct pair_gate *gate, uint64_t end_ns,
			   uint64_t moved)
{
	uint64_t cur;

	if (!gate)
		return;
	atomic_fetch_add(&gate->moved, moved);
	cur = atomic_load(&gate->end_ns);
	while (cur < end_ns &&
	       !atomic_compare_exchange_weak(&gate->end_ns, &cur, end_ns))
		;
}

struct pair_thread {
	const struct bench_pair_ops *ops;
	void *state;
	struct pair_sync *sync;
	uint64_t n;
	int process;
};

static void pair_peer(struct pair_thread *pt)
{
	struct pair_sync *s = pt->sync;
	uint64_t moved = 0;
	int ret;

	ret = pt->ops->peer_init ? pt->ops->peer_init(pt->state, pt->process) : 0;
	if (ret) {
		s->peer_ret = ret;
		atomic_store(&s->ready, -1);
		return;
	}
	atomic_store(&s->ready, 1);
	ret = pt->ops->peer(pt->state, pt->n, &moved);
	s->peer_end_ns = bench_now_ns();
	s->peer_moved = moved;
	s->peer_ret = ret;
	if (pt->ops->peer_fini)
		pt->ops->peer_fini(pt->state);
}

static void *pair_peer_thread(void *arg)
{
	pair_peer(arg);
	return NULL;
}

/*
 * One repetition; returns 0 and the elapsed ns, or a negative errno.
 * With @gate, the clock starts when every pair of the gate is ready.
 */
static int pair_once(const struct bench_pair_ops *ops, const struct bench_ctx *ctx,
		     int process, long arg, uint64_t n, uint64_t *elapsed,
		     double *cpu, uint64_t *moved, struct bench_result *r,
		     struct pair_gate *gate)
{
	double c0 = bench_cpu_ns(NULL);
	struct pair_thread pt = { .ops = ops, .n = n, .process = process };
	uint64_t t0 = 0, t1 = 0, host_moved = 0;
	pthread_t th;
	pid_t pid = -1;
	void *map;
	size_t size = 64 + ops->state_size;
	int ret, status, ready;

	/* One shared mapping: the sync block, then (a line on) the case state. */
	_Static_assert(sizeof(struct pair_sync) <= 64, "sync block fits a line");
	size = (size + 4095) & ~(size_t)4095;
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		   -1, 0);
	if (map == MAP_FAILED) {
		bench_fail(r, "mmap: %s", strerror(errno));
		return -errno;
	}
	pt.sync = map;
	pt.state = (char *)map + 64;
	ret = ops->setup(pt.state, ctx, arg);
	if (ret) {
		bench_fail(r, "setup: %s", strerror(-ret));
		goto out_unmap;
	}
	if (process) {
		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			ret = -errno;
			bench_fail(r, "fork: %s", strerror(errno));
			goto out;
		}
		if (pid == 0) {
			pair_peer(&pt);
			_exit(pt.sync->peer_ret ? 1 : 0);
		}
	} else {
		ret = pthread_create(&th, NULL, pair_peer_thread, &pt);
		if (ret) {
			bench_fail(r, "pthread_create: %s", strerror(ret));
			ret = -ret;
			goto out;
		}
	}
	while ((ready = atomic_load(&pt.sync->ready)) == 0)
		sched_yield();
	if (ready < 0) {
		ret = pt.sync->peer_ret;
		bench_fail(r, "peer init: %s", strerror(-ret));
		goto join;
	}
	pair_gate_wait(gate);
	t0 = bench_now_ns();
	ret = ops->host(pt.state, n, &host_moved);
	t1 = bench_now_ns();
	if (ret) {
		bench_fail(r, "host side: %s", strerror(-ret));
		if (process) {
			kill(pid, SIGKILL);
		} else {
			/* A thread peer blocked on a dead channel cannot be joined. */
			fprintf(stderr, "knitk-bench: host side failed: %s\n",
				strerror(-ret));
			exit(1);
		}
	}
join:
	if (process) {
		if (waitpid(pid, &status, 0) != pid) {
			bench_fail(r, "waitpid: %s", strerror(errno));
			ret = ret ? ret : -ECHILD;
		} else if (!ret && (!WIFEXITED(status) || WEXITSTATUS(status))) {
			ret = pt.sync->peer_ret ? pt.sync->peer_ret : -ECHILD;
			bench_fail(r, "peer: %s", strerror(-ret));
		}
	} else {
		pthread_join(th, NULL);
		if (!ret && pt.sync->peer_ret) {
			ret = pt.sync->peer_ret;
			bench_fail(r, "peer: %s", strerror(-ret));
		}
	}
	if (!ret) {
		if (pt.sync->peer_end_ns > t1)
			t1 = pt.sync->peer_end_ns;
		*elapsed = t1 - t0;
		*cpu = bench_cpu_ns(NULL) - c0;	/* both sides, child reaped */
		*moved = host_moved + pt.sync->peer_moved;
		pair_gate_done(gate, t1, *moved);
	}
out:
	if (ops->teardown)
		ops->teardown(pt.state);
out_unmap:
	munmap(map, size);
	return ret;
}

int bench_pair_run(const struct bench_pair_ops *ops, const struct bench_case *c,
		   const struct bench_ctx *ctx, int process, long arg,
		   unsigned int msgs_per_op, struct bench_result *r)
{
	uint64_t n = bench_ops(c, ctx), warm = n / 10 ? n / 10 : 1;
	uint64_t elapsed, moved;
	double cpu;
	int i, ret;

	/* Warm-up: page faults, first wakes, CPU frequency; not recorded. */
	ret = pair_once(ops, ctx, process, arg, warm, &elapsed, &cpu, &moved, r,
			NULL);
	if (ret)
		return ret;
	r->ops = n;
	r->has_msgs = 1;
	for (i = 0; i < ctx->reps; i++) {
		ret = pair_once(ops, ctx, process, arg, n, &elapsed, &cpu, &moved,
				r, NULL);
		if (ret)
			return ret;
		r->cpu[r->nreps] = cpu / (double)n;
		r->ns[r->nreps++] = (double)elapsed / (double)n;
		r->msgs_expected += n * msgs_per_op;
		r->msgs_moved += moved;
	}
	return 0;
}

/*
 * One repetition of @npairs pairs at once, each a process whose peer is a
 * process, @each operations apiece: the time from go to the last pair's
 * end, and the CPU time of all of them (each reaps its peer, and is
 * reaped here).
 */
static int pairs_once(const struct bench_pair_ops *ops, const struct bench_ctx *ctx,
		      unsigned int npairs, long arg, uint64_t each,
		      struct pair_gate *gate, uint64_t *elapsed, double *cpu,
		      uint64_t *moved, struct bench_result *r)
{
	double c0 = bench_cpu_ns(NULL);
	pid_t pid[BENCH_MAX_PAIRS];
	unsigned int i, started = 0;
	uint64_t t0;
	int ret = 0, status;

	atomic_store(&gate->ready, 0);
	atomic_store(&gate->failed, 0);
	atomic_store(&gate->go, 0);
	atomic_store(&gate->end_ns, 0);
	atomic_store(&gate->moved, 0);
	fflush(NULL);
	for (i = 0; i < npairs; i++, started++) {
		pid[i] = fork();
		if (pid[i] < 0) {
			ret = -errno;
			bench_fail(r, "fork: %s", strerror(errno));
			break;
		}
		if (pid[i] == 0) {
			struct bench_result cr = { 0 };
			uint64_t el, mv;
			double c;

			if (pair_once(ops, ctx, BENCH_PROCESS, arg, each, &el, &c,
				      &mv, &cr, gate)) {
				atomic_fetch_add(&gate->failed, 1);
				_exit(1);
			}
			_exit(0);
		}
	}
	while (!ret && atomic_load(&gate->ready) + atomic_load(&gate->failed) < npairs)
		sched_yield();
	t0 = bench_now_ns();
	atomic_store(&gate->go, 1);
	for (i = 0; i < started; i++) {
		if (waitpid(pid[i], &status, 0) != pid[i]) {
			ret = ret ? ret : -ECHILD;
			bench_fail(r, "waitpid: %s", strerror(errno));
		} else if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			ret = ret ? ret : -EPROTO;
			bench_fail(r, "pair %u failed", i);
		}
	}
	if (ret)
		return ret;
	*elapsed = atomic_load(&gate->end_ns) - t0;
	*cpu = bench_cpu_ns(NULL) - c0;
	*moved = atomic_load(&gate->moved);
	return 0;
}

int bench_pairs_run(const struct bench_pair_ops *ops, const struct bench_case *c,
		    const struct bench_ctx *ctx, unsigned int npairs, long arg,
		    unsigned int msgs_per_op, struct bench_result *r)
{
	uint64_t n = bench_ops(c, ctx) / npairs * npairs, elapsed, moved;
	uint64_t warm = n / 10 / npairs ? n / 10 / npairs : 1;
	struct pair_gate *gate;
	double cpu;
	int i, ret;

	if (!npairs || npairs > BENCH_MAX_PAIRS)
		return -EINVAL;
	gate = mmap(NULL, sizeof(*gate), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (gate == MAP_FAILED) {
		bench_fail(r, "mmap: %s", strerror(errno));
		return -errno;
	}
	/* Warm-up, not recorded. */
	ret = pairs_once(ops, ctx, npairs, arg, warm, gate, &elapsed, &cpu,
			 &moved, r);
	r->ops = n;
	r->has_msgs = 1;
	for (i = 0; !ret && i < ctx->reps; i++) {
		ret = pairs_once(ops, ctx, npairs, arg, n / npairs, gate,
				 &elapsed, &cpu, &moved, r);
		if (ret)
			break;
		r->cpu[r->nreps] = cpu / (double)n;
		r->ns[r->nreps++] = (double)elapsed / (double)n;
		r->msgs_expected += n * msgs_per_op;
		r->msgs_moved += moved;
	}
	munmap(gate, sizeof(*gate));
	return ret;
}

/* ------------------------------------------------ a knot of one worker */

void bench_kpair_host_close(struct bench_kpair *kp)
{
	knitk_producer_destroy(kp->hp);
	knitk_consumer_destroy(kp->hc);
	knitk_endpoint_destroy(kp->host);
	kp->hp = NULL;
	kp->hc = NULL;
	kp->host = NULL;
}

int bench_kpair_host_open(struct bench_kpair *kp, unsigned int knot_flags,
			  unsigned int inline_bytes, uint64_t arena_bytes)
{
	struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = inline_bytes, .arena_bytes = arena_bytes,
	};
	int ret, req, ret_mb;

	memset(kp, 0, sizeof(*kp));
	ret = knitk_endpoint_create(&g, knot_flags, &kp->host);
	if (ret)
		return ret;
	ret = knitk_endpoint_join(kp->host, KNITK_ROLE_HOST, 0);
	if (ret < 0)
		goto fail;
	req = knitk_endpoint_request_mailbox(kp->host, 0, 0);
	ret_mb = knitk_endpoint_return_mailbox(kp->host, 0);
	if (req < 0 || ret_mb < 0) {
		ret = req < 0 ? req : ret_mb;
		goto fail;
	}
	ret = knitk_producer_create(kp->host, (unsigned int)req, &kp->hp);
	if (!ret)
		ret = knitk_consumer_create(kp->host, (unsigned int)ret_mb, &kp->hc);
	if (!ret)
		return 0;
fail:
	bench_kpair_host_close(kp);
	return ret;
}

void bench_kpair_peer_close(struct bench_kpair *kp)
{
	knitk_producer_destroy(kp->pp);
	knitk_consumer_destroy(kp->pc);
	knitk_endpoint_destroy(kp->peer);
	kp->pp = NULL;
	kp->pc = NULL;
	kp->peer = NULL;
}

int bench_kpair_peer_open(struct bench_kpair *kp, int process)
{
	int ret, req, ret_mb;

	ret = knitk_endpoint_attach(knitk_endpoint_fd(kp->host),
				    process ? KNITK_ATTACH_TAKE_FD : 0, &kp->peer);
	if (ret)
		return ret;
	ret = knitk_endpoint_join(kp->peer, KNITK_ROLE_WORKER, 0);
	if (ret < 0)
		goto fail;
	req = knitk_endpoint_request_mailbox(kp->peer, 0, 0);
	ret_mb = knitk_endpoint_return_mailbox(kp->peer, 0);
	if (req < 0 || ret_mb < 0) {
		ret = req < 0 ? req : ret_mb;
		goto fail;
	}
	ret = knitk_consumer_create(kp->peer, (unsigned int)req, &kp->pc);
	if (!ret)
		ret = knitk_producer_create(kp->peer, (unsigned int)ret_mb, &kp->pp);
	if (!ret)
		return 0;
fail:
	bench_kpair_peer_close(kp);
	return ret;
}
