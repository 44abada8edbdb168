// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * loan: calls whose argument is written in place (knitk_pool_loan).
 * Each call checksums one record.  Instead of building the record in a
 * buffer of its own and having knitk_pool_submit copy it into the request
 * lane, the program takes a loan of the lane's bytes and builds the record
 * there.  The first call of a round goes alone (knitk_pool_submit_loan),
 * the rest together (knitk_pool_submit_loans: one publish per mailbox),
 * and one loan per round is given back unsent (knitk_call_release), as a
 * program does when it finds it has nothing to send after all.  Every
 * result is checked against the checksum computed here.  Every other
 * round masks its records instead, in place: the task answers with the
 * loan's own bytes (knitk_reply_in_arg), and a record large enough to
 * travel in the arena comes back where the program wrote it, no byte
 * copied either way.
 *
 *   loan [-t|-p] [-w workers] [-n rounds]   -t: thread workers,
 *                                           -p: process workers
 *                                           (default: one run of each)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"

#define ROUND	16		/* loans taken per round */

/* FNV-1a: the checksum the task computes and the program checks. */
static uint64_t fnv1a(const unsigned char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (len--)
		h = (h ^ *p++) * 0x100000001b3ULL;
	return h;
}

/* Task 0: the u64 checksum of the argument bytes. */
static int task_sum(const void *in, size_t len, struct knitk_reply *out,
		    void *ctx)
{
	uint64_t h = fnv1a(in, len);

	(void)ctx;
	return knitk_reply_set(out, &h, sizeof(h));
}

#define MASK	0x5c
/* Records up to this size travel inline in the lane (the pool's default). */
#define INLINE_BYTES	192

/* Task 1: the argument with every byte masked, answered in place. */
static int task_mask(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	unsigned char *p;
	size_t i;
	int ret;

	(void)ctx;
	ret = knitk_reply_in_arg(out, len, (void **)&p);
	if (ret == -EOPNOTSUPP) {
		/* A small record came inline in the lane: answer with a copy. */
		ret = knitk_reply_alloc(out, len, (void **)&p);
		if (!ret)
			memcpy(p, in, len);
	}
	if (ret)
		return ret;
	for (i = 0; i < len; i++)
		p[i] ^= MASK;
	return 0;
}

static const knitk_task_fn fns[] = { task_sum, task_mask };
static const struct knitk_task_table tasks = { .tasks = fns, .nr_tasks = 2 };

/*
 * Record @id: its length and bytes follow from the id alone, so the
 * program can check a result without keeping a copy.  Sizes run from a
 * few bytes (inline in the lane) to several KiB (in the mailbox's arena).
 */
static size_t record_len(uint64_t id)
{
	return 8 + (size_t)(id * 2654435761U % 6000);
}

static void record_fill(unsigned char *p, uint64_t id, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (unsigned char)(id * 31 + i * 7);
}

/* The result of call @id of task @fn, at @d (@hl bytes), is right. */
static bool result_right(uint32_t fn, uint64_t id, const void *d, size_t hl,
			 const void *loan)
{
	size_t i, len = record_len(id);
	unsigned char *want = malloc(len);
	bool right = false;
	uint64_t h;

	if (!want)
		return false;
	record_fill(want, id, len);
	if (fn == 0) {
		right = hl == sizeof(h) && (memcpy(&h, d, sizeof(h)), h == fnv1a(want, len));
	} else if (hl == len) {
		for (i = 0; i < len; i++)
			want[i] ^= MASK;
		/* In the arena, the answer is where the loan was written. */
		right = !memcmp(d, want, len) && (len <= INLINE_BYTES || d == loan);
	}
	free(want);
	return right;
}

/* One round: ROUND loans, one released, the rest sent and checked. */
static int round_run(struct knitk_pool *pool, uint32_t fn, uint64_t id0,
		     unsigned long *ok)
{
	void *bufs[ROUND];
	struct knitk_call *calls[ROUND];
	unsigned int i, n = 0;
	int ret = 0, sent;

	for (i = 0; i < ROUND; i++) {
		size_t len = record_len(id0 + i);
		void *buf;

		/* Waits while there is no room, as a submit does. */
		ret = knitk_pool_loan(pool, fn, len, NULL, &calls[n], &buf);
		if (ret)
			break;
		/* Built in place: these bytes are the request's. */
		record_fill(buf, id0 + i, len);
		bufs[n++] = buf;
	}
	if (!n)
		return ret;
	/* Changed our mind about the last one: its bytes go back unsent. */
	knitk_call_release(calls[--n]);
	if (n) {
		/* Alone; a call that cannot go has completed with the error. */
		knitk_pool_submit_loan(calls[0]);
		/* The rest at once.  Every one is sent or completed either way. */
		sent = n > 1 ? knitk_pool_submit_loans(calls + 1, n - 1) : 0;
		if (sent < 0)
			ret = sent;
	}
	for (i = 0; i < n; i++) {
		const void *d;
		size_t hl;
		int st = knitk_call_wait(calls[i], KNITK_WAIT_FOREVER);

		if (!st && !knitk_call_result(calls[i], &d, &hl) &&
		    result_right(fn, id0 + i, d, hl, bufs[i]))
			(*ok)++;
		else if (!ret)
			ret = st ? st : -EBADMSG;
		knitk_call_release(calls[i]);
	}
	return ret;
}

static int run(unsigned int kind, unsigned int workers, unsigned int rounds)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind, .nr_workers = workers };
	const char *name = kind == KNITK_WORKER_THREADS ? "threads" : "processes";
	unsigned long ok = 0, want = 0;
	struct knitk_pool *pool;
	unsigned int r;
	int ret;

	ret = knitk_pool_create(&o, &tasks, &pool);
	if (ret) {
		fprintf(stderr, "loan: knitk_pool_create: %s\n", strerror(-ret));
		return ret;
	}
	for (r = 0; r < rounds && !ret; r++) {
		ret = round_run(pool, r % 2, (uint64_t)r * ROUND, &ok);
		want += ROUND - 1;
	}
	knitk_pool_destroy(pool);
	if (ret) {
		fprintf(stderr, "loan: %s: round %u: %s\n", name, r, strerror(-ret));
		return ret;
	}
	printf("loan: %s: %lu of %lu calls sent by loan, every checksum and masked record right\n",
	       name, ok, want);
	return ok == want ? 0 : -EBADMSG;
}

int main(int argc, char **argv)
{
	unsigned int workers = 2, rounds = 200, kinds = 0;
	int opt, ret = 0;

	/* A process worker is this program, started again by the pool. */
	if (knitk_worker_main(argc, argv, &tasks, NULL))
		return 1;
	while ((opt = getopt(argc, argv, "tpw:n:")) != -1) {
		if (opt == 't')
			kinds |= 1U << KNITK_WORKER_THREADS;
		else if (opt == 'p')
			kinds |= 1U << KNITK_WORKER_PROCESSES;
		else if (opt == 'w')
			workers = (unsigned int)atoi(optarg);
		else if (opt == 'n')
			rounds = (unsigned int)atoi(optarg);
		else
			return 2;
	}
	if (!kinds)
		kinds = 1U << KNITK_WORKER_THREADS | 1U << KNITK_WORKER_PROCESSES;
	if (kinds & (1U << KNITK_WORKER_THREADS))
		ret = run(KNITK_WORKER_THREADS, workers, rounds);
	if (!ret && (kinds & (1U << KNITK_WORKER_PROCESSES)))
		ret = run(KNITK_WORKER_PROCESSES, workers, rounds);
	return ret ? 1 : 0;
}
