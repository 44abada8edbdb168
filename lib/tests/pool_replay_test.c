// SPDX-License-Identifier: GPL-2.0
/*
 * A request lane delivered twice runs once (docs/protocol.md R2): with
 * the fault injection of pool_hooks.h (knitk__test_publish_twice) every
 * request a submit publishes goes out twice, the copy in a lane of its
 * own of the same mailbox, as a lane delivered again would.  The worker
 * that takes a copy after the call was claimed, answered or ended
 * retires it unanswered, on its call's word (lib/pool/slot.h).
 *  - twice_runs_once: every pool shape, two submitting threads; each
 *    call ran once (the run table) and got its own result, and the pool's
 *    counters see one call per submit.  Before the call words, each ran
 *    twice.
 *  - aborted_while_queued: a call aborted behind a long one, both copies
 *    queued: neither runs, the call ends -ECANCELED once, and the entry
 *    serves the next calls.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "fixtures.h"
#include "../pool/pool_internal.h"

#define REPLAY_THREADS	2
#define REPLAY_CALLS	300		/* per thread */
#define REPLAY_WAIT_NS	(20ULL * 1000000000ULL)

/* Call ids of each pool of the test: never one twice in the run table. */
static uint64_t next_base = 1;

struct replay_thread {
	struct knitk_pool *pool;
	uint64_t first;			/* its ids: first .. first + REPLAY_CALLS */
	unsigned int bad;		/* wrong or missing results */
	int err;
};

static void *replay_submitter(void *arg)
{
	struct replay_thread *t = arg;
	unsigned char buf[sizeof(struct run_arg) + 24];
	unsigned int i;

	for (i = 0; i < REPLAY_CALLS; i++) {
		uint64_t id = t->first + i;
		struct knitk_call *c;
		int ret;

		run_arg_fill(buf, id, 0, sizeof(buf));
		ret = knitk_pool_submit(t->pool, T_RUN, buf, sizeof(buf), NULL, &c);
		if (ret) {
			t->err = ret;
			return NULL;
		}
		ret = knitk_call_wait(c, tap_now_ns() + REPLAY_WAIT_NS);
		if (ret < 0 || !run_result_ok(c, id))
			t->bad++;
		knitk_call_release(c);
	}
	return NULL;
}

static void twice_runs_once_shape(const struct pool_shape *sh)
{
	struct replay_thread t[REPLAY_THREADS];
	pthread_t th[REPLAY_THREADS];
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	unsigned int i, twice = 0, never = 0;
	uint64_t id, first = next_base, n = REPLAY_THREADS * REPLAY_CALLS;

	printf("# %s\n", sh->name);
	REQUIRE(new_pool(sh->kind, sh->dispatch, 2, 0, &pool) == 0);
	next_base += n;
	atomic_store(&knitk__test_publish_twice, 1);
	for (i = 0; i < REPLAY_THREADS; i++) {
		t[i] = (struct replay_thread){ .pool = pool,
					       .first = first + i * REPLAY_CALLS };
		REQUIRE(pthread_create(&th[i], NULL, replay_submitter, &t[i]) == 0);
	}
	for (i = 0; i < REPLAY_THREADS; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(t[i].err, 0);
		CHECK_EQ(t[i].bad, 0);
	}
	atomic_store(&knitk__test_publish_twice, 0);
	/* The copies left in the mailboxes are retired before the stop. */
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	for (id = first; id < first + n; id++) {
		twice += atomic_load(&runtab[id]) > 1;
		never += atomic_load(&runtab[id]) == 0;
	}
	CHECK_EQ(twice, 0);
	CHECK_EQ(never, 0);
	CHECK_EQ(knitk_pool_stats(pool, &st), 0);
	CHECK_EQ(st.submitted, n);
	CHECK_EQ(st.completed, n);
	CHECK_EQ(st.stale, 0);
	knitk_pool_destroy(pool);
}

static void twice_runs_once(void)
{
	unsigned int i;

	REQUIRE(runtab_open() == 0);
	for (i = 0; i < NR_POOL_SHAPES; i++)
		twice_runs_once_shape(&pool_shapes[i]);
}

/*
 * Worker 0 of a private pool busy with a long call; a call queued behind
 * it, both its copies, aborted: neither copy runs, it ends -ECANCELED,
 * and the calls after it on the same worker run as usual.
 */
static void aborted_while_queued_shape(unsigned int kind)
{
	struct knitk_call_opts pin = {
		.size = sizeof(pin), .flags = KNITK_CALL_WORKER, .worker = 0,
	};
	unsigned char buf[sizeof(struct run_arg)];
	struct knitk_call *hold, *c, *after;
	uint32_t ms = 300;
	uint64_t id = next_base++, id2 = next_base++;
	struct knitk_pool *pool;

	REQUIRE(runtab_open() == 0);
	REQUIRE(new_pool(kind, KNITK_POOL_DISPATCH_PRIVATE, 1, 0, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, sizeof(ms), &pin, &hold) == 0);
	atomic_store(&knitk__test_publish_twice, 1);
	run_arg_fill(buf, id, 0, sizeof(buf));
	REQUIRE(knitk_pool_submit(pool, T_RUN, buf, sizeof(buf), &pin, &c) == 0);
	atomic_store(&knitk__test_publish_twice, 0);
	CHECK_EQ(knitk_call_abort(c), 0);
	CHECK_EQ(knitk_call_wait(hold, tap_now_ns() + REPLAY_WAIT_NS), (int)ms);
	CHECK_EQ(knitk_call_wait(c, tap_now_ns() + REPLAY_WAIT_NS), -ECANCELED);
	/* Behind both copies in the mailbox: once it ran, they were taken. */
	run_arg_fill(buf, id2, 0, sizeof(buf));
	REQUIRE(knitk_pool_submit(pool, T_RUN, buf, sizeof(buf), &pin, &after) == 0);
	CHECK_EQ(knitk_call_wait(after, tap_now_ns() + REPLAY_WAIT_NS), run_status(id2));
	CHECK(run_result_ok(after, id2));
	CHECK_EQ(atomic_load(&runtab[id]), 0);
	CHECK_EQ(atomic_load(&runtab[id2]), 1);
	knitk_call_release(hold);
	knitk_call_release(c);
	knitk_call_release(after);
	knitk_pool_destroy(pool);
}

static void aborted_while_queued(void)
{
	aborted_while_queued_shape(KNITK_WORKER_THREADS);
	aborted_while_queued_shape(KNITK_WORKER_PROCESSES);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	if (tests_init(argc, argv, false))
		return 1;
	TEST(twice_runs_once);
	TEST(aborted_while_queued);
	return tap_exit();
}
