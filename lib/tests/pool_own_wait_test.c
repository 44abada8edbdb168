// SPDX-License-Identifier: GPL-2.0
/*
 * A thread that waits for its call alone waits on the call's own word and
 * takes the result from the call's box (docs/protocol.md R3, R6, R7), in
 * every shape of pool (thread and process workers, private lanes and
 * stealing):
 *  - results of every size around the box's: those that fit come from the
 *    box, larger ones from the return lane, each whole and the call's own
 *    (knitk_pool_call's buffer too, cut at its capacity, out_len whole);
 *  - a waiter asleep on its word (checked through /proc before the event)
 *    is woken by its call's result, by an abort from another thread, by
 *    its deadline and by its process worker's SIGKILL, and returns that;
 *  - a waiter whose own wait ends first leaves the call to the pool: it
 *    completes with its result all the same;
 *  - a box whose length a hostile worker wrote past the box completes its
 *    call -EBADMSG with no bytes, and the pool goes on;
 *  - a storm of waits racing aborts and deadlines: each call ran at most
 *    once (the run table), and each result is its own call's.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "tap.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "fixtures.h"
#include "storm_aborter.h"
#include "futex_asleep.h"
#include "../pool/pool_internal.h"
#include "../pool/slot.h"

enum { T_PIDGATE = T_NR, T_OWN_NR };

/* The seed of a T_FILL whose box the hostile hook rewrites. */
#define FORGE_SEED	0xee

/* T_PIDGATE's argument. */
struct pidgate {
	int32_t ready, gate;
	uint32_t n, seed;
};

/*
 * T_PIDGATE: writes its worker's pid to fd ready, reads a byte from fd
 * gate, then replies @n bytes of T_FILL's pattern from @seed.
 */
static int task_pidgate(const void *in, size_t len, struct knitk_reply *out,
			void *ctx)
{
	struct pidgate a;
	int32_t pid = (int32_t)getpid();
	unsigned char *b;
	void *p;
	uint32_t i;
	char c;
	int ret;

	(void)ctx;
	if (len != sizeof(a))
		return -EINVAL;
	memcpy(&a, in, sizeof(a));
	if (write(a.ready, &pid, sizeof(pid)) != sizeof(pid) ||
	    read(a.gate, &c, 1) != 1)
		return -EIO;
	ret = knitk_reply_alloc(out, a.n, &p);
	if (ret)
		return ret;
	for (b = p, i = 0; i < a.n; i++)
		b[i] = (unsigned char)(a.seed + i);
	return (int)a.n;
}

static const knitk_task_fn own_fns[T_OWN_NR] = {
	TEST_TASK_FNS,
	[T_PIDGATE] = task_pidgate,
};
static const struct knitk_task_table own_tasks = {
	.tasks = own_fns, .nr_tasks = T_OWN_NR,
};

static bool fill_ok(const unsigned char *b, size_t n, uint8_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i] != (unsigned char)(seed + i))
			return false;
	return true;
}

/* A hostile worker: a box whose bytes start with FORGE_SEED claims more. */
static void forge_box(unsigned int worker, void *box,
		      const _Atomic uint64_t *word)
{
	struct slot_box *b = box;

	(void)worker;
	(void)word;
	/* Only the hostile case's results: 1 or 8 bytes from FORGE_SEED on. */
	if ((b->len == 1 || b->len == 8) && fill_ok(b->bytes, b->len, FORGE_SEED))
		b->len = b->len == 1 ? 0xffffffffU : SLOT_BOX_BIG;
}

static int own_pool(const struct pool_shape *sh, unsigned int workers,
		    struct knitk_pool **pool)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = sh->kind,
				     .nr_workers = workers,
				     .knot_flags = KNITK_KNOT_FUTEX,
				     .arena_bytes = ARENA,
				     .dispatch = sh->dispatch };

	return knitk_pool_create(&o, &own_tasks, pool);
}

static const uint32_t sizes[] = {
	0, 1, 8, 55, 56, 57, 63, 64, 65, 119, 120, 121, 128, 192, 193, 4000, 20000,
};

static void sizes_in(const struct pool_shape *sh)
{
	static unsigned char out[20000 + 64];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	unsigned int i;

	printf("# %s\n", sh->name);
	REQUIRE(own_pool(sh, 2, &pool) == 0);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i];
		unsigned char arg[5];
		struct knitk_call *c;
		const void *d;
		size_t len, cap;
		uint8_t seed = (uint8_t)(i * 13 + 1);

		memcpy(arg, &n, 4);
		arg[4] = seed;
		/* The whole result, then one cut at half its length. */
		for (cap = n; ; cap = n / 2) {
			memset(out, 0x5a, sizeof(out));
			len = 12345;
			CHECK_EQ(knitk_pool_call(pool, T_FILL, arg, sizeof(arg), NULL,
						 out, cap, &len), (int)n);
			CHECK_EQ(len, n);
			CHECK(fill_ok(out, cap, seed));
			CHECK_EQ(out[cap], 0x5a);
			if (cap != n || !n)
				break;
		}
		REQUIRE(knitk_pool_submit(pool, T_FILL, arg, sizeof(arg), NULL, &c) == 0);
		CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), (int)n);
		CHECK_EQ(knitk_call_result(c, &d, &len), 0);
		CHECK_EQ(len, n);
		CHECK(!n || fill_ok(d, n, seed));
		knitk_call_release(c);
	}
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.stale, 0);
	knitk_pool_destroy(pool);
}

EACH_POOL_SHAPE(sizes)

/*
 * A waiter in a thread of its own: knitk_call_wait of @call, or with
 * @call NULL a knitk_pool_call of T_PIDGATE @arg into @out.
 */
struct waiter {
	pthread_t thread;
	struct knitk_pool *pool;
	struct knitk_call *call;
	struct pidgate arg;
	struct knitk_call_opts co;
	unsigned char out[2048];
	size_t len;
	_Atomic pid_t tid;
	int ret;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	atomic_store(&w->tid, futex_asleep_tid());
	if (w->call)
		w->ret = knitk_call_wait(w->call, KNITK_WAIT_FOREVER);
	else
		w->ret = knitk_pool_call(w->pool, T_PIDGATE, &w->arg, sizeof(w->arg),
					 &w->co, w->out, sizeof(w->out), &w->len);
	return NULL;
}

/*
 * Until the waiter sleeps in FUTEX_WAIT on one of @pool's call words
 * (knitk_pool_call's handle is not ours to see).  No time limit: the
 * runner's watchdog reports a waiter that never sleeps there.
 */
static void wait_asleep_on_a_word(struct waiter *w, struct knitk_pool *pool)
{
	unsigned int i, n = pool->nr_workers * KNITK_LANES;
	pid_t t;

	while (!(t = atomic_load(&w->tid)))
		sched_yield();
	for (;;) {
		for (i = 0; i < n; i++)
			if (asleep_on_futex(t, slot_low(&pool->slots[i])))
				return;
		sched_yield();
	}
}

/*
 * Start waiter @w for a T_PIDGATE of @n bytes from @seed (@handle: by
 * knitk_call_wait of a submitted call, else knitk_pool_call); returns
 * the worker's pid once the task runs, and the waiter asleep on its word.
 */
static int32_t waiter_start(struct waiter *w, struct knitk_pool *pool,
			    struct gate *g, uint32_t n, uint32_t seed, bool handle)
{
	int32_t pid = 0;

	w->pool = pool;
	w->arg = (struct pidgate){ .ready = g->ready[1], .gate = g->gate[0], .n = n,
				   .seed = seed };
	if (!w->co.size)
		w->co.size = sizeof(w->co);
	if (handle && (pid = knitk_pool_submit(pool, T_PIDGATE, &w->arg,
					       sizeof(w->arg), &w->co, &w->call))) {
		printf("# submit: %d\n", pid);
		return -1;
	}
	if (pthread_create(&w->thread, NULL, waiter_main, w))
		return -1;
	if (read(g->ready[0], &pid, sizeof(pid)) != sizeof(pid)) {
		printf("# read: %d\n", errno);
		return -1;
	}
	wait_asleep_on_a_word(w, pool);
	return pid;
}

enum wake_by { BY_RESULT, BY_ABORT, BY_DEADLINE, BY_KILL };

static const char *const wake_names[] = { "result", "abort", "deadline", "kill" };

/*
 * A waiter asleep on its call's word, then @by: its result (T_PIDGATE of
 * @n bytes), an abort, the call's deadline or the SIGKILL of its worker.
 * @handle: knitk_call_wait of a submitted call, else knitk_pool_call
 * (which no other thread can abort).
 */
static void woken_in(const struct pool_shape *sh, enum wake_by by, uint32_t n,
		     bool handle)
{
	struct waiter w = { .co = { .size = sizeof(w.co) } };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct gate g;
	const void *d = NULL;
	size_t len = 0;
	int32_t pid;
	uint64_t x = 42, y = 0;
	int want;

	printf("# %s, %s, %u bytes, %s\n", sh->name, wake_names[by], (unsigned int)n,
	       handle ? "knitk_call_wait" : "knitk_pool_call");
	REQUIRE(gate_open(&g) == 0);
	REQUIRE(own_pool(sh, 2, &pool) == 0);
	if (by == BY_DEADLINE)
		w.co.deadline_ns = after_ms(300);
	pid = waiter_start(&w, pool, &g, n, 7, handle);
	REQUIRE(pid > 0);
	switch (by) {
	case BY_RESULT:
		CHECK_EQ(gate_release(&g), 0);
		want = (int)n;
		break;
	case BY_ABORT:
		CHECK_EQ(knitk_call_abort(w.call), 0);
		want = -ECANCELED;
		break;
	case BY_DEADLINE:
		want = -ETIMEDOUT;
		break;
	default:
		CHECK_EQ(kill(pid, SIGKILL), 0);
		want = -EOWNERDEAD;
		break;
	}
	pthread_join(w.thread, NULL);
	CHECK_EQ(w.ret, want);
	if (handle) {
		CHECK_EQ(knitk_call_status(w.call), want);
		if (by == BY_RESULT)
			CHECK_EQ(knitk_call_result(w.call, &d, &len), 0);
	} else {
		d = w.out;
		len = w.len;
	}
	if (by == BY_RESULT) {
		CHECK_EQ(len, n);
		CHECK(len != n || fill_ok(d, n, 7));
	}
	/* The task ends (a late answer is dropped); the pool goes on. */
	if (by != BY_RESULT && by != BY_KILL)
		CHECK_EQ(gate_release(&g), 0);
	if (handle)
		knitk_call_release(w.call);
	CHECK_EQ(knitk_pool_call(pool, T_MIX, &x, sizeof(x), NULL, &y, sizeof(y), NULL), 0);
	CHECK_EQ(y, mix64(42));
	REQUIRE(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN) == 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.deaths, by == BY_KILL);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

static void woken_all(void)
{
	static const uint32_t ns[] = { 16, 1000 };
	unsigned int i, b, k;

	for (i = 0; i < NR_POOL_SHAPES; i++)
		for (b = BY_RESULT; b <= BY_KILL; b++)
			for (k = 0; k < 4; k++)
				if ((b != BY_KILL ||
				     pool_shapes[i].kind == KNITK_WORKER_PROCESSES) &&
				    (b != BY_ABORT || k < 2))
					woken_in(&pool_shapes[i], (enum wake_by)b,
						 ns[k % 2], k < 2);
}

/*
 * The waiter's own deadline comes first: the call goes on without it and
 * completes with its result, seen by a poll of its status (nobody waits)
 * or by a second wait.
 */
static void leaves_in(const struct pool_shape *sh, bool poll_status, uint32_t n)
{
	struct gate g;
	struct pidgate a;
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint64_t end;
	const void *d;
	size_t len;
	int32_t pid;
	int ret;

	printf("# %s, %s, %u bytes\n", sh->name, poll_status ? "polled" : "waited again",
	       (unsigned int)n);
	REQUIRE(gate_open(&g) == 0);
	REQUIRE(own_pool(sh, 2, &pool) == 0);
	a = (struct pidgate){ .ready = g.ready[1], .gate = g.gate[0], .n = n, .seed = 7 };
	REQUIRE(knitk_pool_submit(pool, T_PIDGATE, &a, sizeof(a), NULL, &c) == 0);
	REQUIRE(read(g.ready[0], &pid, sizeof(pid)) == sizeof(pid));
	CHECK_EQ(knitk_call_wait(c, after_ms(50)), -EINPROGRESS);
	CHECK_EQ(knitk_call_status(c), -EINPROGRESS);
	CHECK_EQ(gate_release(&g), 0);
	if (poll_status) {
		end = now_ms() + HANG_MS;
		while ((ret = knitk_call_status(c)) == -EINPROGRESS && now_ms() < (uint64_t)end)
			sched_yield();
	} else {
		ret = knitk_call_wait(c, after_ms(HANG_MS));
	}
	CHECK_EQ(ret, (int)n);
	CHECK_EQ(knitk_call_result(c, &d, &len), 0);
	CHECK_EQ(len, n);
	CHECK(len != n || fill_ok(d, n, 7));
	knitk_call_release(c);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

static void leaves_all(void)
{
	unsigned int i;

	for (i = 0; i < NR_POOL_SHAPES; i++) {
		leaves_in(&pool_shapes[i], true, 16);
		leaves_in(&pool_shapes[i], false, 16);
		leaves_in(&pool_shapes[i], true, 3000);
	}
}

/*
 * A hostile box: -EBADMSG and no bytes for that call, the pool goes on.
 * The waiter sleeps on its word before the task ends, so the result is
 * the box's to carry.
 */
static void hostile_in(const struct pool_shape *sh)
{
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct gate g;
	uint64_t x = 7, y = 0;
	size_t len;
	int k;

	printf("# %s\n", sh->name);
	REQUIRE(gate_open(&g) == 0);
	REQUIRE(own_pool(sh, 2, &pool) == 0);
	for (k = 0; k < 4; k++) {
		struct waiter w = { .co = { 0 } };

		/* 1 byte: a length of all ones; 8: past the box's bytes. */
		REQUIRE(waiter_start(&w, pool, &g, k % 2 ? 8 : 1,
				     FORGE_SEED, k < 2) > 0);
		CHECK_EQ(gate_release(&g), 0);
		pthread_join(w.thread, NULL);
		CHECK_EQ(w.ret, -EBADMSG);
		if (w.call) {
			const void *d;

			CHECK_EQ(knitk_call_result(w.call, &d, &len), 0);
			CHECK_EQ(len, 0);
			knitk_call_release(w.call);
		} else {
			CHECK_EQ(w.len, 0);
			CHECK_EQ(w.out[0], 0);
		}
		CHECK_EQ(knitk_pool_call(pool, T_MIX, &x, sizeof(x), NULL, &y,
					 sizeof(y), &len), 0);
		CHECK_EQ(y, mix64(7));
	}
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

EACH_POOL_SHAPE(hostile)

/* The storm: owners wait for calls that an aborter and deadlines race. */
#define STORM_OWNERS	3
#define STORM_SLOTS	STORM_OWNERS

struct storm_ctx {
	struct knitk_pool *pool;
	struct storm_slot slots[STORM_SLOTS];
	_Atomic bool stop;
	_Atomic uint64_t next_id;
	_Atomic unsigned long bad, ok, canceled, timedout;
	unsigned int per_owner;
	bool steal;
};

static void *storm_owner(void *arg)
{
	struct storm_ctx *s = arg;
	static _Atomic unsigned int nth;
	unsigned int me = atomic_fetch_add(&nth, 1) % STORM_SLOTS, i;
	struct storm_slot *sl = &s->slots[me];
	uint64_t seed = me + 1;

	for (i = 0; i < s->per_owner; i++) {
		struct knitk_call_opts co = { .size = sizeof(co) };
		uint64_t id = atomic_fetch_add(&s->next_id, 1), r = rnd(&seed);
		unsigned char buf[64];
		struct knitk_call *c;
		int ret;

		run_arg_fill(buf, id, (uint32_t)(r % 3) * 50, 16 + (uint32_t)(r >> 8) % 40);
		if ((r >> 16) % 4 == 0)
			co.deadline_ns = after_ms(0) + (r >> 20) % 200000;
		if ((r >> 24) % 3 == 0) {
			uint64_t res[2] = { 0, 0 };
			size_t len = 0;

			/* knitk_pool_call: its own handle, nobody aborts it. */
			ret = knitk_pool_call(s->pool, T_RUN, buf, 16 + (uint32_t)(r >> 8) % 40,
					      &co, res, sizeof(res), &len);
			if (ret == run_status(id)) {
				if (len != sizeof(res) || res[0] != id || res[1] != mix64(id))
					atomic_fetch_add(&s->bad, 1);
				else
					atomic_fetch_add(&s->ok, 1);
			} else if (ret == -ETIMEDOUT) {
				atomic_fetch_add(&s->timedout, 1);
			} else {
				printf("# pool_call %llu: %d\n", (unsigned long long)id, ret);
				atomic_fetch_add(&s->bad, 1);
			}
			continue;
		}
		if (knitk_pool_submit(s->pool, T_RUN, buf, 16 + (uint32_t)(r >> 8) % 40,
				      &co, &c)) {
			atomic_fetch_add(&s->bad, 1);
			continue;
		}
		pthread_mutex_lock(&sl->lock);
		sl->call = c;
		pthread_mutex_unlock(&sl->lock);
		ret = knitk_call_wait(c, KNITK_WAIT_FOREVER);
		pthread_mutex_lock(&sl->lock);
		sl->call = NULL;
		pthread_mutex_unlock(&sl->lock);
		if (ret == run_status(id) && run_result_ok(c, id)) {
			atomic_fetch_add(&s->ok, 1);
		} else if (ret == -ECANCELED) {
			atomic_fetch_add(&s->canceled, 1);
		} else if (ret == -ETIMEDOUT) {
			atomic_fetch_add(&s->timedout, 1);
			/* Stealing: no worker's result ended it, none is named. */
			if (s->steal && knitk_call_worker(c) != -ENOENT) {
				printf("# call %llu timed out, named worker %d\n",
				       (unsigned long long)id, knitk_call_worker(c));
				atomic_fetch_add(&s->bad, 1);
			}
		} else {
			printf("# call %llu: %d (foreign %llu)\n", (unsigned long long)id, ret,
			       (unsigned long long)run_result_foreign(c, id));
			atomic_fetch_add(&s->bad, 1);
		}
		knitk_call_release(c);
	}
	return NULL;
}

static void storm_in(const struct pool_shape *sh, uint64_t first_id)
{
	struct storm_ctx s = { .per_owner = scaled(3000, 100),
			       .steal = sh->dispatch == KNITK_POOL_DISPATCH_STEAL };
	pthread_t owners[STORM_OWNERS], aborter;
	struct storm_aborter ab = { s.slots, STORM_SLOTS, &s.stop };
	struct knitk_pool_stats st;
	_Atomic uint8_t *tab = runtab_get();
	uint64_t id, over = 0;
	unsigned int i;

	printf("# %s\n", sh->name);
	REQUIRE(own_pool(sh, 2, &s.pool) == 0);
	atomic_store(&s.next_id, first_id);
	for (i = 0; i < STORM_SLOTS; i++)
		pthread_mutex_init(&s.slots[i].lock, NULL);
	REQUIRE(pthread_create(&aborter, NULL, storm_aborter, &ab) == 0);
	for (i = 0; i < STORM_OWNERS; i++)
		REQUIRE(pthread_create(&owners[i], NULL, storm_owner, &s) == 0);
	for (i = 0; i < STORM_OWNERS; i++)
		pthread_join(owners[i], NULL);
	atomic_store(&s.stop, true);
	pthread_join(aborter, NULL);
	REQUIRE(knitk_pool_shutdown(s.pool, KNITK_SHUTDOWN_DRAIN) == 0);
	for (id = first_id; id < atomic_load(&s.next_id); id++)
		if (atomic_load(&tab[id]) > 1)
			over++;
	printf("# ok %lu canceled %lu timedout %lu bad %lu, ran twice %llu\n",
	       atomic_load(&s.ok), atomic_load(&s.canceled), atomic_load(&s.timedout),
	       atomic_load(&s.bad), (unsigned long long)over);
	CHECK_EQ(atomic_load(&s.bad), 0);
	CHECK_EQ(over, 0);
	CHECK(atomic_load(&s.ok) > 0);
	pool_stats(s.pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(s.pool);
}

static void storm_all(void)
{
	unsigned int i;

	for (i = 0; i < NR_POOL_SHAPES; i++)
		storm_in(&pool_shapes[i], 1 + (uint64_t)i * 1000000);
}

int main(int argc, char **argv)
{
	/* In the workers too: the hostile case's box, rewritten. */
	atomic_store(&knitk__test_box_hook, forge_box);
	if (knitk_worker_main(argc, argv, &own_tasks, NULL))
		return 1;
	if (argc > 1)
		knob = strtoul(argv[1], NULL, 0);
	if (tests_init(argc, argv, false) || runtab_open())
		return 1;
	tap_run("box_sizes", sizes_all);
	tap_run("asleep_woken", woken_all);
	tap_run("waiter_leaves", leaves_all);
	tap_run("hostile_box", hostile_all);
	tap_run("storm_exactly_once", storm_all);
	return tap_exit();
}
