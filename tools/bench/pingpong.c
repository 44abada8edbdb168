// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-bench: round trips between two threads or two processes.
 *
 * Baselines: a spin on shared cache lines (the floor: no sleeping at all),
 * futex wait/wake, eventfd, pipe and a Unix socket pair.  knitk: the host
 * publishes a value into the worker's request mailbox and rings; the
 * worker answers on its return mailbox.  "knitk" parks on the doorbell as
 * soon as a mailbox is empty; "knitk-busy" polls first, then parks;
 * "knitk-ringwait" rings the other side and parks in one call
 * (knitk_producer_notify_park(): KNITK_IOC_NOTIFY_WAIT on the module).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <knitk.h>

#include "bench.h"

/* Polls of an empty mailbox before knitk-busy parks. */
#define PP_BUSY_POLLS	2000
/* Spins before the spin baseline yields (only matters oversubscribed). */
#define PP_SPIN_YIELD	(1U << 16)

struct pp_state {
	_Atomic uint32_t ping __attribute__((aligned(64)));
	_Atomic uint32_t pong __attribute__((aligned(64)));
	int fd[4] __attribute__((aligned(64)));
	unsigned int polls;
	struct bench_kpair kp;
};

static void pp_close_fds(struct pp_state *s)
{
	int i;

	for (i = 0; i < 4; i++)
		if (s->fd[i] > 0)
			close(s->fd[i]);
}

/* ------------------------------------------------------------- spin */

static int spin_setup(void *st, const struct bench_ctx *ctx, long arg)
{
	(void)st; (void)ctx; (void)arg;
	return 0;
}

static int spin_until(_Atomic uint32_t *w, uint32_t v)
{
	unsigned int spins = 0;

	while (atomic_load_explicit(w, memory_order_acquire) != v) {
		bench_relax();
		if (++spins == PP_SPIN_YIELD) {
			spins = 0;
			sched_yield();
		}
	}
	return 0;
}

static int spin_host(void *st, uint64_t n, uint64_t *moved)
{
	struct pp_state *s = st;
	uint64_t i;

	for (i = 1; i <= n; i++) {
		atomic_store_explicit(&s->ping, (uint32_t)i, memory_order_release);
		spin_until(&s->pong, (uint32_t)i);
		(*moved)++;
	}
	return 0;
}

static int spin_peer(void *st, uint64_t n, uint64_t *moved)
{
	struct pp_state *s = st;
	uint64_t i;

	for (i = 1; i <= n; i++) {
		spin_until(&s->ping, (uint32_t)i);
		(*moved)++;
		atomic_store_explicit(&s->pong, (uint32_t)i, memory_order_release);
	}
	return 0;
}

/* ------------------------------------------------------------ futex */

/* Shared (not private) futexes: the words may be in two processes. */
static long futex(_Atomic uint32_t *w, int op, uint32_t val)
{
	return syscall(SYS_futex, w, op, val, NULL, NULL, 0);
}

static int futex_send(_Atomic uint32_t *w, uint32_t v)
{
	atomic_store(w, v);
	if (futex(w, FUTEX_WAKE, 1) < 0)
		return -errno;
	return 0;
}

static int futex_until(_Atomic uint32_t *w, uint32_t v)
{
	uint32_t cur;

	while ((cur = atomic_load(w)) != v)
		if (futex(w, FUTEX_WAIT, cur) < 0 && errno != EAGAIN &&
		    errno != EINTR)
			return -errno;
	return 0;
}

static int futex_host(void *st, uint64_t n, uint64_t *moved)
{
	struct pp_state *s = st;
	uint64_t i;
	int ret;

	for (i = 1; i <= n; i++) {
		ret = futex_send(&s->ping, (uint32_t)i);
		if (!ret)
			ret = futex_until(&s->pong, (uint32_t)i);
		if (ret)
			return ret;
		(*moved)++;
	}
	return 0;
}

static int futex_peer(void *st, uint64_t n, uint64_t *moved)
{
	struct pp_state *s = st;
	uint64_t i;
	int ret;

	for (i = 1; i <= n; i++) {
		ret = futex_until(&s->ping, (uint32_t)i);
		if (ret)
			return ret;
		(*moved)++;
		ret = futex_send(&s->pong, (uint32_t)i);
		if (ret)
			return ret;
	}
	return 0;
}

/* ------------------------------------------- eventfd, pipe, socketpair */

static int eventfd_setup(void *st, const struct bench_ctx *ctx, long arg)
{
	struct pp_state *s = st;

	(void)ctx; (void)arg;
	s->fd[0] = eventfd(0, EFD_CLOEXEC);
	if (s->fd[0] < 0)
		return -errno;
	s->fd[1] = eventfd(0, EFD_CLOEXEC);
	if (s->fd[1] < 0) {
		close(s->fd[0]);
		s->fd[0] = 0;
		return -errno;
	}
	return 0;
}

static int pipe_setup(void *st, const struct bench_ctx *ctx, long arg)
{
	struct pp_state *s = st;

	(void)ctx; (void)arg;
	/* fd[0],fd[1]: host -> peer; fd[2],fd[3]: peer -> host */
	if (pipe2(s->fd, O_CLOEXEC))
		return -errno;
	if (pipe2(s->fd + 2, O_CLOEXEC)) {
		close(s->fd[0]);
		close(s->fd[1]);
		s->fd[0] = s->fd[1] = 0;
		return -errno;
	}
	return 0;
}

static int unix_setup(void *st, const struct bench_ctx *ctx, long arg)
{
	struct pp_state *s = st;
	int sv[2];

	(void)ctx; (void)arg;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	/* Same shape as the pipes: host writes fd[1] reads fd[2]. */
	s->fd[0] = sv[1];	/* peer reads */
	s->fd[1] = sv[0];	/* host writes */
	s->fd[2] = sv[0];	/* host reads */
	s->fd[3] = sv[1];	/* peer writes */
	return 0;
}

static void fd_teardown(void *st)
{
	struct pp_state *s = st;

	if (s->fd[2] == s->fd[1]) {	/* socket pair: two fds, not four */
		close(s->fd[0]);
		close(s->fd[1]);
		return;
	}
	pp_close_fds(s);
}

/* A pipe or socket round trip carries a 4-byte sequence number. */
static int stream_host(void *st, uint64_t n, uint64_t *moved)
{
	struct pp_state *s = st;
	uint32_t v, back;
	uint64_t i;
	int ret;

	for (i = 1; i <= n; i++) {
		v = (uint32_t)i;
		ret = bench_write_all(s->fd[1], &v, sizeof(v));
		if (!ret)
			ret = bench_read_all(s->fd[2], &back, sizeof(back));
		if (ret)
			return ret;
		if (back != v)
			return -EPROTO;
		(*moved)++;
	}
	return 0;
}

static int stream_peer(void *st, uint64_t n, uint64_t *moved)
{
	struct pp_state *s = st;
	uint32_t v;
	uint64_t i;
	int ret;

	for (i = 1; i <= n; i++) {
		ret = bench_read_all(s->fd[0], &v, sizeof(v));
		if (ret)
			return ret;
		if (v != (uint32_t)i)
			return -EPROTO;
		(*moved)++;
		ret = bench_write_all(s->fd[3], &v, sizeof(v));
		if (ret)
			return ret;
	}
	return 0;
}

/* eventfd carries no payload: a count of 1 each way. */
static int eventfd_host(void *st, uint64_t n, uint64_t *moved)
{
	struct pp_state *s = st;
	uint64_t i, one = 1, back;
	int ret;

	for (i = 0; i < n; i++) {
		ret = bench_write_all(s->fd[0], &one, sizeof(one));
		if (!ret)
			ret = bench_read_all(s->fd[1], &back, sizeof(back));
		if (ret)
			return ret;
		if (back != 1)
			return -EPROTO;
		(*moved)++;
	}
	return 0;
}

static int eventfd_peer(void *st, uint64_t n, uint64_t *moved)
{
	struct pp_state *s = st;
	uint64_t i, v;
	int ret;

	for (i = 0; i < n; i++) {
		ret = bench_read_all(s->fd[0], &v, sizeof(v));
		if (ret)
			return ret;
		if (v != 1)
			return -EPROTO;
		(*moved)++;
		ret = bench_write_all(s->fd[1], &v, sizeof(v));
		if (ret)
			return ret;
	}
	return 0;
}

/* ------------------------------------------------------------ knitk */

/* Wait until @c has a pending lane: poll @polls times, then park. */
static int kn_wait(struct knitk_consumer *c, struct knitk_endpoint *knot,
		   unsigned int polls, uint64_t *pend)
{
	unsigned int i = 0;
	int got, ret;

	for (;;) {
		got = knitk_lane_scan(c, pend);
		if (got)
			return got;
		if (i < polls) {
			i++;
			bench_relax();
			continue;
		}
		ret = knitk_doorbell_park(knot, KNITK_WAIT_FOREVER);
		if (ret)
			return ret;
	}
}

/* Receive exactly one message carrying @expect. */
static int kn_recv(struct knitk_consumer *c, struct knitk_endpoint *knot,
		   unsigned int polls, uint64_t expect)
{
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pend, batch;
	int lane, ret;

	ret = kn_wait(c, knot, polls, &pend);
	if (ret < 0)
		return ret;
	batch = pend;
	lane = knitk_lane_next(c, &pend);
	if (lane < 0)
		return lane;
	ret = knitk_lane_decode(c, (unsigned int)lane, &m);
	if (ret)
		return ret;
	/* One message in flight each way: anything else is a protocol bug. */
	if (pend || m.header.kind != KNITK_PAYLOAD_VALUE ||
	    m.header.value != expect)
		return -EPROTO;
	return knitk_lane_ack(c, batch);
}

static int kn_send(struct knitk_producer *p, uint64_t value)
{
	struct knitk_lane_header h = { .value = value };
	int ret;

	ret = knitk_producer_send(p, &h, NULL, 0);
	if (ret < 0)
		return ret;
	ret = knitk_producer_notify(p);
	return ret < 0 ? ret : 0;
}

static void kn_teardown(void *st)
{
	bench_kpair_host_close(&((struct pp_state *)st)->kp);
}

static int kn_setup(void *st, const struct bench_ctx *ctx, long polls)
{
	struct pp_state *s = st;

	s->polls = (unsigned int)polls;
	return bench_kpair_host_open(&s->kp, ctx->knot_flags, 64, 0);
}

static void kn_peer_fini(void *st)
{
	bench_kpair_peer_close(&((struct pp_state *)st)->kp);
}

static int kn_peer_init(void *st, int process)
{
	return bench_kpair_peer_open(&((struct pp_state *)st)->kp, process);
}

static int kn_host(void *st, uint64_t n, uint64_t *moved)
{
	struct pp_state *s = st;
	uint64_t i;
	int ret;

	for (i = 0; i < n; i++) {
		ret = kn_send(s->kp.hp, i);
		if (!ret)
			ret = kn_recv(s->kp.hc, s->kp.host, s->polls, i);
		if (ret)
			return ret;
		(*moved)++;
	}
	return 0;
}

static int kn_peer(void *st, uint64_t n, uint64_t *moved)
{
	struct pp_state *s = st;
	uint64_t i;
	int ret;

	for (i = 0; i < n; i++) {
		ret = kn_recv(s->kp.pc, s->kp.peer, s->polls, i);
		if (ret)
			return ret;
		(*moved)++;
		ret = kn_send(s->kp.pp, i);
		if (ret)
			return ret;
	}
	return 0;
}

/* Publish @value without ringing: the ring comes with the next park. */
static int kn_publish(struct knitk_producer *p, uint64_t value)
{
	struct knitk_lane_header h = { .value = value };
	int ret = knitk_producer_send(p, &h, NULL, 0);

	return ret < 0 ? ret : 0;
}

/* Each hop: publish, then ring and park in one call, then take the answer. */
static int kn_rw_host(void *st, uint64_t n, uint64_t *moved)
{
	struct pp_state *s = st;
	uint64_t i;
	int ret;

	for (i = 0; i < n; i++) {
		ret = kn_publish(s->kp.hp, i);
		if (!ret)
			ret = knitk_producer_notify_park(s->kp.hp,
							 KNITK_WAIT_FOREVER);
		if (!ret)
			ret = kn_recv(s->kp.hc, s->kp.host, 0, i);
		if (ret)
			return ret;
		(*moved)++;
	}
	return 0;
}

static int kn_rw_peer(void *st, uint64_t n, uint64_t *moved)
{
	struct pp_state *s = st;
	uint64_t i;
	int ret;

	ret = kn_recv(s->kp.pc, s->kp.peer, 0, 0);
	for (i = 0; !ret && i < n; i++) {
		(*moved)++;
		if (i + 1 == n)
			return kn_send(s->kp.pp, i);
		/* The answer, rung by the park that waits for the next call. */
		ret = kn_publish(s->kp.pp, i);
		if (!ret)
			ret = knitk_producer_notify_park(s->kp.pp,
							 KNITK_WAIT_FOREVER);
		if (!ret)
			ret = kn_recv(s->kp.pc, s->kp.peer, 0, i + 1);
	}
	return ret;
}

/* ------------------------------------------------------------ cases */

static const struct bench_pair_ops pp_spin = {
	sizeof(struct pp_state), spin_setup, NULL, spin_host, spin_peer, NULL, NULL,
};
static const struct bench_pair_ops pp_futex = {
	sizeof(struct pp_state), spin_setup, NULL, futex_host, futex_peer, NULL, NULL,
};
static const struct bench_pair_ops pp_eventfd = {
	sizeof(struct pp_state), eventfd_setup, NULL, eventfd_host, eventfd_peer,
	NULL, fd_teardown,
};
static const struct bench_pair_ops pp_pipe = {
	sizeof(struct pp_state), pipe_setup, NULL, stream_host, stream_peer,
	NULL, fd_teardown,
};
static const struct bench_pair_ops pp_unix = {
	sizeof(struct pp_state), unix_setup, NULL, stream_host, stream_peer,
	NULL, fd_teardown,
};
static const struct bench_pair_ops pp_knitk = {
	sizeof(struct pp_state), kn_setup, kn_peer_init, kn_host, kn_peer,
	kn_peer_fini, kn_teardown,
};
static const struct bench_pair_ops pp_knitk_rw = {
	sizeof(struct pp_state), kn_setup, kn_peer_init, kn_rw_host, kn_rw_peer,
	kn_peer_fini, kn_teardown,
};

/* arg: mode | (mechanism << 4) */
enum { M_SPIN, M_FUTEX, M_EVENTFD, M_PIPE, M_UNIX, M_KNITK, M_KNITK_BUSY,
       M_KNITK_RW };

static int pp_run(const struct bench_case *c, const struct bench_ctx *ctx,
		  struct bench_result *r)
{
	static const struct bench_pair_ops *const ops[] = {
		[M_SPIN] = &pp_spin, [M_FUTEX] = &pp_futex,
		[M_EVENTFD] = &pp_eventfd, [M_PIPE] = &pp_pipe,
		[M_UNIX] = &pp_unix, [M_KNITK] = &pp_knitk,
		[M_KNITK_BUSY] = &pp_knitk, [M_KNITK_RW] = &pp_knitk_rw,
	};
	int mode = (int)(c->arg & 15), mech = (int)(c->arg >> 4);
	long polls = mech == M_KNITK_BUSY ? PP_BUSY_POLLS : 0;

	return bench_pair_run(ops[mech], c, ctx, mode, polls, 2, r);
}

#define PP(grp, var, mode, mech, kn, n, nq) \
	{ grp "/" var, grp, "ns/op", grp "/futex", kn, pp_run, \
	  (mode) | ((mech) << 4), n, nq }

/* Processes first: they fork, and nothing has started a thread yet. */
const struct bench_case bench_pingpong_cases[] = {
	PP("rtt-process", "spin", BENCH_PROCESS, M_SPIN, 0, 200000, 2000),
	PP("rtt-process", "futex", BENCH_PROCESS, M_FUTEX, 0, 20000, 300),
	PP("rtt-process", "eventfd", BENCH_PROCESS, M_EVENTFD, 0, 20000, 300),
	PP("rtt-process", "pipe", BENCH_PROCESS, M_PIPE, 0, 20000, 300),
	PP("rtt-process", "unix", BENCH_PROCESS, M_UNIX, 0, 20000, 300),
	PP("rtt-process", "knitk", BENCH_PROCESS, M_KNITK, 1, 20000, 300),
	PP("rtt-process", "knitk-busy", BENCH_PROCESS, M_KNITK_BUSY, 1, 200000, 2000),
	PP("rtt-process", "knitk-ringwait", BENCH_PROCESS, M_KNITK_RW, 1, 20000, 300),
	PP("rtt-thread", "spin", BENCH_THREAD, M_SPIN, 0, 200000, 2000),
	PP("rtt-thread", "futex", BENCH_THREAD, M_FUTEX, 0, 20000, 300),
	PP("rtt-thread", "eventfd", BENCH_THREAD, M_EVENTFD, 0, 20000, 300),
	PP("rtt-thread", "pipe", BENCH_THREAD, M_PIPE, 0, 20000, 300),
	PP("rtt-thread", "unix", BENCH_THREAD, M_UNIX, 0, 20000, 300),
	PP("rtt-thread", "knitk", BENCH_THREAD, M_KNITK, 1, 20000, 300),
	PP("rtt-thread", "knitk-busy", BENCH_THREAD, M_KNITK_BUSY, 1, 200000, 2000),
	{ NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0 },
};
