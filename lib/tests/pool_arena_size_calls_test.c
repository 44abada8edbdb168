// SPDX-License-Identifier: GPL-2.0
/*
 * Arguments and results as large as the arena, from 4 threads at once to
 * thread and process workers and from 8 threads sharing one submitter:
 * each one arrives whole, checked byte by byte; one byte more, either
 * way, is -EMSGSIZE.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "knitk_pool.h"
#include "tap.h"
#include "hostile_tasks.h"

/* ARENA (fixtures.h) is also the default arena of a pool's mailboxes. */
struct big {
	struct knitk_pool *pool;
	unsigned int id;
	atomic_ulong bad, ok;
};

/*
 * 40 T_BIG calls: arguments of ARENA bytes and short ones, results of
 * ARENA bytes and short ones, each checked against its own seed.
 */
static void *big_thread(void *arg)
{
	struct big *b = arg;
	static _Thread_local uint8_t in[ARENA];
	struct knitk_call *c;
	unsigned int r;

	for (r = 0; r < 40; r++) {
		uint64_t hdr[2] = { ARENA, b->id * 1000 + r };
		size_t inlen = r % 2 ? ARENA : 16 + r;
		const uint8_t *d;
		size_t len, i;
		int st;

		memcpy(in, hdr, sizeof(hdr));
		for (i = sizeof(hdr); i < inlen; i++)
			in[i] = pattern(hdr[1] + 1, i);
		if (r % 3 == 0)
			hdr[0] = 16 + r;
		memcpy(in, hdr, sizeof(hdr));
		if (knitk_pool_submit(b->pool, T_BIG, in, inlen, NULL, &c)) {
			atomic_fetch_add(&b->bad, 1);
			continue;
		}
		st = knitk_call_wait(c, KNITK_WAIT_FOREVER);
		if (st || knitk_call_result(c, (const void **)&d, &len) ||
		    len != hdr[0]) {
			printf("# big call %u: status %d\n", r, st);
			atomic_fetch_add(&b->bad, 1);
		} else {
			for (i = 0; i < len; i++)
				if (d[i] != pattern(hdr[1], i))
					break;
			if (i != len)
				atomic_fetch_add(&b->bad, 1);
			else
				atomic_fetch_add(&b->ok, 1);
		}
		knitk_call_release(c);
	}
	return NULL;
}

/* @n threads (at most 8) of big_thread on @pool at once, each checked. */
static void big_threads(struct knitk_pool *pool, unsigned int n)
{
	struct big b[8];
	pthread_t t[8];
	unsigned int i;

	for (i = 0; i < n; i++) {
		b[i] = (struct big){ .pool = pool, .id = i };
		if (pthread_create(&t[i], NULL, big_thread, &b[i]))
			break;
	}
	CHECK_EQ(i, n);
	for (n = i, i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(atomic_load(&b[i].bad), 0);
		CHECK_EQ(atomic_load(&b[i].ok), 40);
	}
}

static void arena_size_calls(unsigned int kind)
{
	struct knitk_pool *p = make_pool(kind, 2, 0);
	static uint8_t in[ARENA + 64];
	uint64_t hdr[2] = { ARENA + 1, 0 };
	struct knitk_call *c;
	size_t k;

	REQUIRE(p);
	big_threads(p, 4);
	/* One byte too many, either way. */
	CHECK_EQ(knitk_pool_submit(p, T_ECHO, in, ARENA + 1, NULL, &c),
		 -EMSGSIZE);
	memcpy(in, hdr, sizeof(hdr));
	for (k = sizeof(hdr); k < 64; k++)
		in[k] = pattern(1, k);
	CHECK_EQ(knitk_pool_call(p, T_BIG, in, 64, NULL, NULL, 0, NULL),
		 -EMSGSIZE);
	knitk_pool_destroy(p);
}

static void arena_size_calls_threads(void)
{
	arena_size_calls(KNITK_WORKER_THREADS);
}

static void arena_size_calls_processes(void)
{
	arena_size_calls(KNITK_WORKER_PROCESSES);
}

/* One submitter shared by 8 threads with arena-sized calls. */
static void one_submitter_many_threads(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = KNITK_WORKER_THREADS,
				     .nr_workers = 2, .nr_submitters = 1 };
	struct knitk_pool *p;

	REQUIRE(knitk_pool_create(&o, &hostile_tasks, &p) == 0);
	big_threads(p, 8);
	knitk_pool_destroy(p);
}

int main(int argc, char **argv)
{
	if (hostile_start(argc, argv))
		return 1;
	TEST(arena_size_calls_threads);
	TEST(arena_size_calls_processes);
	TEST(one_submitter_many_threads);
	return tap_exit();
}
