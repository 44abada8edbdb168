// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-bench: one-way messages per second between two threads, with
 * batching on every path, the same on both sides of a comparison.
 *
 * Both senders fill one buffer of BATCH fixed-size records, each
 * starting with its sequence number, and hand it over in one call:
 * for 8 bytes knitk_producer_send_packed (the BATCH messages packed as
 * records into one lane's inline bytes), for 4 KiB
 * knitk_producer_send_batch (a lane and an arena slot per message), one
 * store of the pub word either way, then a ring; the pipe, one write.
 * Both readers copy every payload out; the knitk reader also checks each
 * record's sequence number (knitk_lane_decode_batch and
 * knitk_lane_unpack, then one ack store per BATCH lanes and a credit on
 * its return mailbox), the pipe reader reads up to 64 KiB per read.
 * Under backpressure the knitk host waits for a credit, as a pipe
 * writer sleeps on a full pipe, and an idle worker waits for messages,
 * both in knitk_consumer_wait, which polls only while the other side
 * runs and CPUs are free, for a budget that adapts, and otherwise parks
 * (sleeping allowed on both sides, as for the pipe).
 *
 * tput-8B-oversub runs four such pairs at once, each a writer process and
 * a reader process, whatever the CPUs: on a small machine more threads
 * want to run than there are CPUs, where a reader that polls takes the
 * CPU its writer needs.  Its rate is that of the four pairs together.
 *
 * BATCH is 16.  Sent one lane per message, a mailbox holds 64 messages
 * where a pipe buffers 8192 of 8 bytes, and with one CPU for a pair every
 * 64 messages cost a park, a wake and two context switches; packed, a
 * batch takes one lane (TP_PACK_INLINE bytes), so 64 batches, 1024
 * messages, are in flight.  A larger batch would favour either side's
 * per-call costs; both write BATCH messages per call.
 *
 * eventfd: a count of BATCH per write, no payload at all (so not a
 * like-for-like channel: it is the floor of a kernel counter).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <knitk.h>

#include "bench.h"

#define TP_BATCH	16
#define TP_OVERSUB	4		/* pairs at once in tput-8B-oversub */
#define TP_READ_BUF	(64 * 1024)
/* Inline bytes of a packed lane: one batch of 8-byte records. */
#define TP_PACK_INLINE	192
_Static_assert(TP_BATCH * KNITK_PACK_ROOM(8) <= TP_PACK_INLINE,
	       "a batch of 8-byte records fits one lane");

/* Messages of at most this many bytes go packed. */
#define TP_PACK_MAX	8

struct tp_state {
	int fd[2];
	size_t size;
	struct bench_kpair kp;
};

/* ------------------------------------------------------------ knitk */

static int tk_setup(void *st, const struct bench_ctx *ctx, long size)
{
	struct tp_state *s = st;

	s->size = (size_t)size;
	/* 8 bytes go packed; 4 KiB goes to a 2 MiB arena (room for 2 rings). */
	if (s->size <= TP_PACK_MAX)
		return bench_kpair_host_open(&s->kp, ctx->knot_flags,
					     TP_PACK_INLINE, 0);
	return bench_kpair_host_open(&s->kp, ctx->knot_flags, 64, 2U << 20);
}

static void tk_teardown(void *st)
{
	bench_kpair_host_close(&((struct tp_state *)st)->kp);
}

static int tk_peer_init(void *st, int process)
{
	return bench_kpair_peer_open(&((struct tp_state *)st)->kp, process);
}

static void tk_peer_fini(void *st)
{
	bench_kpair_peer_close(&((struct tp_state *)st)->kp);
}

/* Retire every credit on the return mailbox; returns how many. */
static int tk_drain(struct knitk_consumer *c)
{
	uint64_t pend;
	int got;

	got = knitk_lane_scan(c, &pend);
	if (got <= 0)
		return got;
	return knitk_lane_ack(c, pend) ? -EPROTO : got;
}

/* Write the sequence numbers @first.. into @k records of @size at @buf. */
static void tp_number(unsigned char *buf, size_t size, uint64_t first,
		      unsigned int k)
{
	unsigned int i;

	for (i = 0; i < k; i++)
		memcpy(buf + i * size, &(uint64_t){ first + i }, sizeof(uint64_t));
}

static int tk_host(void *st, uint64_t n, uint64_t *moved)
{
	struct tp_state *s = st;
	struct knitk_producer *p = s->kp.hp;
	struct iovec iov[TP_BATCH];
	uint64_t sent = 0, pend;
	unsigned int k, i;
	unsigned char *buf;
	int ret = 0;

	(void)moved;	/* the consumer counts */
	buf = malloc(TP_BATCH * s->size);
	if (!buf)
		return -ENOMEM;
	memset(buf, 0xa5, TP_BATCH * s->size);
	for (i = 0; i < TP_BATCH; i++)
		iov[i] = (struct iovec){ buf + i * s->size, s->size };
	while (sent < n) {
		k = n - sent < TP_BATCH ? (unsigned int)(n - sent) : TP_BATCH;
		tp_number(buf, s->size, sent, k);
		if (s->size <= TP_PACK_MAX)
			ret = knitk_producer_send_packed(p, NULL, iov, k);
		else
			ret = knitk_producer_send_batch(p, NULL, buf, s->size, k);
		if (ret > 0) {
			sent += (unsigned int)ret;
			ret = knitk_producer_notify(p);
			if (ret < 0)
				goto out;
			ret = tk_drain(s->kp.hc);
			if (ret < 0)
				goto out;
			continue;
		}
		if (ret != -EAGAIN && ret != -ENOSPC)
			goto out;
		/*
		 * Backpressure: wait until the worker returns a credit, in
		 * knitk_consumer_wait as the worker waits for messages.  A
		 * fixed poll here made the case slower on a loaded machine
		 * (the worker that must run is the one a polling host keeps
		 * off the CPU), so the host used to park at once; the
		 * adaptive wait, which polls only while the worker is awake
		 * and its poll keeps its CPU, gave 0.66x-0.68x a pipe against
		 * 0.40x-0.41x for parking at once, at 65 ns of CPU per message
		 * against 77-87 (interleaved runs, 2 CPUs shared with other
		 * work); in tput-8B-oversub it gave 0.33x-0.36x against
		 * 0.38x-0.58x, within the wide spread of either.
		 */
		ret = knitk_consumer_wait(s->kp.hc, &pend, KNITK_WAIT_FOREVER);
		if (ret > 0)
			ret = knitk_lane_ack(s->kp.hc, pend) ? -EPROTO : 0;
		if (ret < 0)
			goto out;
	}
	ret = 0;
out:
	free(buf);
	return ret;
}

/* Read one message, as a pipe reader gets it, and check its number. */
static inline int tk_read(const struct tp_state *s, const void *data,
			  size_t len, unsigned char *dst, uint64_t *got)
{
	uint64_t seq;

	if (len != s->size)
		return -EPROTO;
	memcpy(dst, data, s->size);
	memcpy(&seq, dst, sizeof(seq));
	if (seq != *got)
		return -EPROTO;
	++*got;
	return 0;
}

/* Read every record of packed lane @m. */
static int tk_read_packed(const struct tp_state *s, const struct knitk_msg *m,
			  unsigned char *dst, uint64_t *got)
{
	struct knitk_record r[TP_BATCH];
	size_t pos = 0;
	int k, i, ret;

	while ((k = knitk_lane_unpack(m, &pos, r, TP_BATCH)) > 0)
		for (i = 0; i < k; i++) {
			ret = tk_read(s, r[i].data, r[i].len, dst, got);
			if (ret)
				return ret;
		}
	return k;
}

/*
 * Return a credit on the return mailbox: it wakes a host parked under
 * backpressure.  A full return mailbox means the host has credits to
 * drain and is not asleep, so this one may be skipped.
 */
static int tk_credit(struct tp_state *s, uint64_t got)
{
	struct knitk_lane_header h = { .value = got };
	int ret = knitk_producer_send(s->kp.pp, &h, NULL, 0);

	if (ret >= 0)
		ret = knitk_producer_notify(s->kp.pp);
	return ret < 0 && ret != -EAGAIN ? ret : 0;
}

static int tk_peer(void *st, uint64_t n, uint64_t *moved)
{
	struct tp_state *s = st;
	struct knitk_consumer *c = s->kp.pc;
	struct knitk_msg m[TP_BATCH];
	uint64_t got = 0, pend, done;
	unsigned char *dst;
	int i, k, ret = 0;

	dst = malloc(s->size);
	if (!dst)
		return -ENOMEM;
	while (got < n) {
		ret = knitk_consumer_wait(c, &pend, KNITK_WAIT_FOREVER);
		if (ret < 0)
			goto out;
		/*
		 * Up to BATCH lanes at a time, each lot acknowledged and
		 * credited once read, as a pipe's read frees its buffer:
		 * the host refills them while the rest are read.
		 */
		while (pend) {
			k = knitk_lane_decode_batch(c, &pend, m, TP_BATCH,
						    sizeof(m[0]));
			if (k < 0) {
				ret = k;
				goto out;
			}
			done = 0;
			for (i = 0; i < k; i++) {
				done |= 1ULL << m[i].lane;
				if (m[i].header.kind == KNITK_PAYLOAD_PACKED)
					ret = tk_read_packed(s, &m[i], dst, &got);
				else
					ret = tk_read(s, m[i].data, m[i].len, dst, &got);
				if (ret)
					goto out;
			}
			ret = knitk_lane_ack(c, done);
			if (!ret)
				ret = tk_credit(s, got);
			if (ret)
				goto out;
		}
	}
	ret = 0;
out:
	*moved = got;
	free(dst);
	return ret;
}

/* ------------------------------------------------------ pipe, eventfd */

static int pipe_setup(void *st, const struct bench_ctx *ctx, long size)
{
	struct tp_state *s = st;

	(void)ctx;
	s->size = (size_t)size;
	return pipe2(s->fd, O_CLOEXEC) ? -errno : 0;
}

static int efd_setup(void *st, const struct bench_ctx *ctx, long size)
{
	struct tp_state *s = st;

	(void)ctx;
	s->size = (size_t)size;
	s->fd[0] = eventfd(0, EFD_CLOEXEC);
	if (s->fd[0] < 0)
		return -errno;
	s->fd[1] = s->fd[0];
	return 0;
}

static void fd_teardown(void *st)
{
	struct tp_state *s = st;

	close(s->fd[0]);
	if (s->fd[1] != s->fd[0])
		close(s->fd[1]);
}

static int pipe_host(void *st, uint64_t n, uint64_t *moved)
{
	struct tp_state *s = st;
	uint64_t sent = 0;
	unsigned int k;
	unsigned char *buf;
	int ret = 0;

	(void)moved;
	buf = malloc(TP_BATCH * s->size);
	if (!buf)
		return -ENOMEM;
	memset(buf, 0xa5, TP_BATCH * s->size);
	while (sent < n && !ret) {
		k = n - sent < TP_BATCH ? (unsigned int)(n - sent) : TP_BATCH;
		tp_number(buf, s->size, sent, k);
		ret = bench_write_all(s->fd[1], buf, k * s->size);
		sent += k;
	}
	free(buf);
	return ret;
}

static int pipe_peer(void *st, uint64_t n, uint64_t *moved)
{
	struct tp_state *s = st;
	uint64_t bytes = 0, want = n * s->size;
	unsigned char *buf;
	ssize_t got;
	int ret = 0;

	buf = malloc(TP_READ_BUF);
	if (!buf)
		return -ENOMEM;
	while (bytes < want) {
		size_t len = want - bytes < TP_READ_BUF ? want - bytes : TP_READ_BUF;

		got = read(s->fd[0], buf, len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			ret = got ? -errno : -EPIPE;
			break;
		}
		bytes += (uint64_t)got;
	}
	*moved = bytes / s->size;
	free(buf);
	return ret;
}

static int efd_host(void *st, uint64_t n, uint64_t *moved)
{
	struct tp_state *s = st;
	uint64_t sent = 0, k;
	int ret;

	(void)moved;
	while (sent < n) {
		k = n - sent < TP_BATCH ? n - sent : TP_BATCH;
		ret = bench_write_all(s->fd[0], &k, sizeof(k));
		if (ret)
			return ret;
		sent += k;
	}
	return 0;
}

static int efd_peer(void *st, uint64_t n, uint64_t *moved)
{
	struct tp_state *s = st;
	uint64_t got = 0, v;
	int ret;

	while (got < n) {
		ret = bench_read_all(s->fd[0], &v, sizeof(v));
		if (ret)
			return ret;
		got += v;
	}
	*moved = got;
	return 0;
}

/* ------------------------------------------------------------ cases */

static const struct bench_pair_ops tp_knitk = {
	sizeof(struct tp_state), tk_setup, tk_peer_init, tk_host, tk_peer,
	tk_peer_fini, tk_teardown,
};
static const struct bench_pair_ops tp_pipe = {
	sizeof(struct tp_state), pipe_setup, NULL, pipe_host, pipe_peer, NULL,
	fd_teardown,
};
static const struct bench_pair_ops tp_efd = {
	sizeof(struct tp_state), efd_setup, NULL, efd_host, efd_peer, NULL,
	fd_teardown,
};

enum { T_KNITK, T_PIPE, T_EVENTFD };

/* arg: payload bytes | (mechanism << 16) */
static int tp_run(const struct bench_case *c, const struct bench_ctx *ctx,
		  struct bench_result *r)
{
	static const struct bench_pair_ops *const ops[] = {
		[T_KNITK] = &tp_knitk, [T_PIPE] = &tp_pipe, [T_EVENTFD] = &tp_efd,
	};

	return bench_pair_run(ops[c->arg >> 16], c, ctx, BENCH_THREAD,
			      c->arg & 0xffff, 1, r);
}

/* tput-8B-oversub: TP_OVERSUB pairs of processes at once. */
static int tp_run_oversub(const struct bench_case *c, const struct bench_ctx *ctx,
			  struct bench_result *r)
{
	return bench_pairs_run(c->arg >> 16 == T_KNITK ? &tp_knitk : &tp_pipe,
			       c, ctx, TP_OVERSUB, c->arg & 0xffff, 1, r);
}

#define TP_CASE(grp, var, size, mech, kn, run, n, nq) \
	{ grp "/" var, grp, "ops/s", grp "/pipe", kn, run, \
	  (size) | ((long)(mech) << 16), n, nq }
#define TP(grp, var, size, mech, kn, n, nq) \
	TP_CASE(grp, var, size, mech, kn, tp_run, n, nq)

const struct bench_case bench_throughput_cases[] = {
	TP("tput-8B", "pipe", 8, T_PIPE, 0, 2000000, 20000),
	TP("tput-8B", "eventfd", 8, T_EVENTFD, 0, 2000000, 20000),
	TP("tput-8B", "knitk", 8, T_KNITK, 1, 2000000, 20000),
	TP_CASE("tput-8B-oversub", "pipe", 8, T_PIPE, 0, tp_run_oversub, 2000000, 20000),
	TP_CASE("tput-8B-oversub", "knitk", 8, T_KNITK, 1, tp_run_oversub, 2000000, 20000),
	TP("tput-4K", "pipe", 4096, T_PIPE, 0, 200000, 4000),
	TP("tput-4K", "knitk", 4096, T_KNITK, 1, 200000, 4000),
	{ NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0 },
};
