// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-bench: payload bandwidth, an echo of 64 B to 1 MiB through the
 * arena of a pool (one worker), against memcpy of the same sizes in the
 * same run.
 *
 * knitk: knitk_pool_call with the payload, the task replies with the same
 * bytes (knitk_reply_set) and the result is copied out to the caller's
 * buffer.  knitk-loan (thread workers) and knitk-loan-processes: zero
 * copies.  The argument is written in place, the whole of it at every
 * call, into the request's arena bytes of a loan (knitk_pool_loan,
 * knitk_pool_submit_loan) instead of being copied there from a buffer
 * prepared once; the task answers with those very bytes
 * (knitk_reply_in_arg) and the caller checks the result where it wrote
 * the argument.
 * memcpy: the payload copied to a second buffer and back, the same two
 * directions with no IPC at all (the ceiling).  All report payload bytes
 * per second of echo; every reply is checked by content (its first and
 * last words).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <knitk.h>
#include <knitk_pool.h>

#include "bench.h"

#define PL_MAX		(1U << 20)
/* In a case's arg: the argument written in place through a loan. */
#define PL_LOAN		(1L << 28)

/* Mark @buf with @seq at both ends (what the echo must bring back). */
static void pl_stamp(unsigned char *buf, size_t size, uint64_t seq)
{
	memcpy(buf, &seq, sizeof(seq));
	memcpy(buf + size - sizeof(seq), &seq, sizeof(seq));
}

static int pl_stamped(const unsigned char *buf, size_t size, uint64_t seq)
{
	return !memcmp(buf, &seq, sizeof(seq)) &&
	       !memcmp(buf + size - sizeof(seq), &seq, sizeof(seq));
}

/*
 * One echo of @size bytes stamped @seq through a loan: the argument
 * written whole in place, the result checked in the handle.  0, or the
 * error (@good counts a reply that came back whole).
 */
static int pl_loan_echo(struct knitk_pool *pool, size_t size, uint64_t seq,
			uint64_t *good)
{
	struct knitk_call *call;
	const void *out;
	size_t len;
	void *buf;
	int ret;

	ret = knitk_pool_loan(pool, BENCH_TASK_ECHO_IN_ARG, size, NULL, &call, &buf);
	if (ret)
		return ret;
	memset(buf, 0x5a, size);
	pl_stamp(buf, size, seq);
	ret = knitk_pool_submit_loan(call);
	if (!ret)
		ret = knitk_call_wait(call, KNITK_WAIT_FOREVER);
	if (!ret && !knitk_call_result(call, &out, &len))
		*good += len == size && pl_stamped(out, size, seq);
	knitk_call_release(call);
	return ret;
}

/*
 * arg: payload bytes | (worker kind << 24), | PL_LOAN for the loan; kind
 * 0 is memcpy.
 */
static int pl_run(const struct bench_case *c, const struct bench_ctx *ctx,
		  struct bench_result *r)
{
	size_t size = (size_t)(c->arg & 0xffffff), len;
	unsigned int kind = (unsigned int)((c->arg & ~PL_LOAN) >> 24);
	bool loan = c->arg & PL_LOAN;
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = kind, .nr_workers = 1,
		.nr_submitters = 1, .knot_flags = ctx->knot_flags,
		/* Room for the largest payload and then some, both ways. */
		.arena_bytes = 4 * PL_MAX,
	};
	uint64_t n = bench_ops(c, ctx), seq = 0, i, t0;
	struct knitk_pool *pool = NULL;
	unsigned char *in, *out;
	int rep, ret = 0;
	double c0;

	in = malloc(size);
	out = malloc(size);
	if (!in || !out) {
		ret = -ENOMEM;
		bench_fail(r, "malloc: %s", strerror(ENOMEM));
		goto out;
	}
	memset(in, 0x5a, size);
	if (kind) {
		ret = knitk_pool_create(&o, &bench_tasks, &pool);
		if (ret) {
			bench_fail(r, "knitk_pool_create: %s", strerror(-ret));
			goto out;
		}
	}
	r->ops = n;
	r->has_msgs = 1;
	for (rep = -1; rep < ctx->reps && !ret; rep++) {
		uint64_t m = rep < 0 ? n / 10 + 1 : n, good = 0;	/* -1: warm-up */

		c0 = bench_cpu_ns(pool);
		t0 = bench_now_ns();
		for (i = 0; i < m; i++, seq++) {
			pl_stamp(in, size, seq);
			if (!pool) {
				memcpy(out, in, size);
				__asm__ __volatile__("" ::: "memory");
				memcpy(in, out, size);
				__asm__ __volatile__("" ::: "memory");
				good += pl_stamped(in, size, seq);
				continue;
			}
			if (loan) {
				ret = pl_loan_echo(pool, size, seq, &good);
				if (ret) {
					bench_fail(r, "loan: %s", strerror(ret < 0 ? -ret : EPROTO));
					ret = ret < 0 ? ret : -EPROTO;
					break;
				}
				continue;
			}
			ret = knitk_pool_call(pool, BENCH_TASK_ECHO, in, size, NULL,
					      out, size, &len);
			if (ret) {
				bench_fail(r, "call: %s", strerror(ret < 0 ? -ret : EPROTO));
				ret = ret < 0 ? ret : -EPROTO;
				break;
			}
			good += len == size && pl_stamped(out, size, seq);
		}
		if (ret || rep < 0)
			continue;
		r->ns[r->nreps] = (double)(bench_now_ns() - t0) / (double)m;
		r->cpu[r->nreps++] = (bench_cpu_ns(pool) - c0) / (double)m;
		r->msgs_expected += m;
		r->msgs_moved += good;
	}
out:
	if (pool)
		knitk_pool_destroy(pool);
	free(in);
	free(out);
	return ret;
}

#define PL(grp, var, size, kind, n, nq) \
	{ grp "/" var, grp, "B/s", grp "/memcpy", (kind) != 0, pl_run, \
	  (long)(size) | ((long)(kind) << 24), n, nq }
/* Every size: memcpy, the copy path and the loan, thread and process workers. */
#define PL5(grp, size, n, nq) \
	PL(grp, "memcpy", size, 0, (n) * 10, (nq) * 10), \
	PL(grp, "knitk-threads", size, KNITK_WORKER_THREADS, n, nq), \
	PL(grp, "knitk-processes", size, KNITK_WORKER_PROCESSES, n, nq), \
	PL(grp, "knitk-loan", size, KNITK_WORKER_THREADS | (PL_LOAN >> 24), n, nq), \
	PL(grp, "knitk-loan-processes", size, KNITK_WORKER_PROCESSES | (PL_LOAN >> 24), n, nq)

const struct bench_case bench_payload_cases[] = {
	PL5("payload-64B", 64, 20000, 300),
	PL5("payload-4K", 4096, 20000, 300),
	PL5("payload-64K", 65536, 4000, 100),
	PL5("payload-1M", PL_MAX, 400, 20),
	{ NULL, NULL, NULL, NULL, 0, NULL, 0, 0, 0 },
};
