// SPDX-License-Identifier: GPL-2.0
/*
 * Exactly once with loans (docs/protocol.md C8) under a storm: several
 * submitter threads take loans, write each argument in place from its
 * call id, and send them one by one or in batches (knitk_pool_submit_loans)
 * or release some unsent, while process workers are SIGKILLed at random
 * and respawned (KNITK_POOL_RESPAWN); private lanes and stealing, thread
 * and process workers.  Every call completes exactly once, with its own
 * result or -EOWNERDEAD (only where workers are killed); the run table
 * (shared memory, pool_tasks.h) shows none ran twice, every answered call
 * ran once and no released loan ran; after the drain every request arena
 * takes a loan of its whole size again.
 * argv[1] scales the kill and call counts (1000000 plain).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

/*
 * Loans a thread holds unsent at once, and their largest argument: few
 * enough that the unsent loans of every thread fit one mailbox's lanes,
 * a worker's capacity and its arena together, so no thread waits for
 * room that only another thread's unsent loans hold.
 */
#define LS_WINDOW	6
#define LS_MAXLEN	1500
#define LS_THREADS	4
#define LS_IDS		(1U << 20)

enum ls_outcome { LS_NONE, LS_OK, LS_DEAD, LS_RELEASED };

struct ls_cfg {
	unsigned int kind, dispatch, workers, slots;
	bool kills;
};

struct ls {
	struct ls_cfg cfg;
	struct knitk_pool *pool;
	_Atomic unsigned long ok, dead, released, batches, bad, wrong;
	uint64_t id0;
	_Atomic uint64_t next;
	_Atomic uint8_t *outcome;	/* per id - id0: enum ls_outcome */
	_Atomic int stop;
};

/* Completed call @c of @id: its own result, or -EOWNERDEAD of a kill. */
static void ls_judge(struct ls *s, struct knitk_call *c, uint64_t id)
{
	int st = knitk_call_status(c);
	uint64_t f;

	if (run_result_ok(c, id)) {
		atomic_fetch_add(&s->ok, 1);
		atomic_store(&s->outcome[id - s->id0], LS_OK);
		return;
	}
	if (st == -EOWNERDEAD && s->cfg.kills) {
		atomic_fetch_add(&s->dead, 1);
		atomic_store(&s->outcome[id - s->id0], LS_DEAD);
		return;
	}
	f = run_result_foreign(c, id);
	printf("# call %llu: status %d%s%llu\n", (unsigned long long)id, st,
	       f ? ", the result of call " : "", (unsigned long long)f);
	if (f)
		atomic_fetch_add(&s->wrong, 1);
	atomic_fetch_add(&s->bad, 1);
}

/*
 * Send @n loans @c: one by one, or in a batch.  A single submit that
 * does not send completes the call (its status is judged later); a
 * batch sends or completes each.  False when a submit broke its contract.
 */
static bool ls_send(struct ls *s, struct knitk_call **c, unsigned int n, bool batch)
{
	unsigned int i;
	int ret;

	if (batch) {
		atomic_fetch_add(&s->batches, 1);
		ret = knitk_pool_submit_loans(c, n);
		if (ret < 0 || ret > (int)n) {
			printf("# batch of %u: %d\n", n, ret);
			return false;
		}
		return true;
	}
	for (i = 0; i < n; i++) {
		ret = knitk_pool_submit_loan(c[i]);
		if (ret && (ret != -EOWNERDEAD || !s->cfg.kills) &&
		    ret != knitk_call_status(c[i])) {
			printf("# submit: %d, status %d\n", ret, knitk_call_status(c[i]));
			return false;
		}
	}
	return true;
}

static void *ls_submitter(void *arg)
{
	struct ls *s = arg;
	struct knitk_call *c[LS_WINDOW];
	uint64_t id[LS_WINDOW], seed = (uintptr_t)c ^ now_ms();
	unsigned int i, n, k;
	bool last;
	int ret;

	while (!atomic_load(&s->stop)) {
		uint64_t r = rnd(&seed);

		for (n = 0; n < LS_WINDOW; n++) {
			uint64_t q = rnd(&seed);
			size_t len = sizeof(struct run_arg) +
				     (size_t)(q % (q % 4 ? 150 : LS_MAXLEN - sizeof(struct run_arg)));
			void *buf;

			id[n] = atomic_fetch_add(&s->next, 1);
			if (id[n] - s->id0 >= LS_IDS)
				break;
			ret = knitk_pool_loan(s->pool, T_RUN, len, NULL, &c[n], &buf);
			if (ret) {
				printf("# loan: %d\n", ret);
				atomic_fetch_add(&s->bad, 1);
				break;
			}
			/* The argument, in place: its bytes derive from the id. */
			run_arg_fill(buf, id[n], storm_task_us(q >> 16), (uint32_t)len);
		}
		last = n < LS_WINDOW;
		if (n && r % 4 == 0) {
			/* One released unsent: it must never run. */
			k = (unsigned int)(r >> 8) % n;
			knitk_call_release(c[k]);
			atomic_store(&s->outcome[id[k] - s->id0], LS_RELEASED);
			atomic_fetch_add(&s->released, 1);
			c[k] = c[n - 1];
			id[k] = id[n - 1];
			n--;
		}
		if (n && !ls_send(s, c, n, (r >> 4) % 3 != 0))
			atomic_fetch_add(&s->bad, 1);
		if (n && knitk_pool_wait_all(s->pool, c, n, after_ms(HANG_MS)) != 0) {
			printf("# hang: calls not complete after %d ms\n", HANG_MS);
			print_stats(s->pool);
			atomic_fetch_add(&s->bad, 1);
			atomic_store(&s->stop, 1);
			break;	/* leaked: the destroy completes them */
		}
		for (i = 0; i < n; i++) {
			ls_judge(s, c[i], id[i]);
			knitk_call_release(c[i]);
		}
		if (last)
			break;
	}
	return NULL;
}

/* A live worker's pid, chosen at random; -1 after HANG_MS. */
static int ls_pick(struct ls *s, uint64_t *seed)
{
	uint64_t end = now_ms() + HANG_MS;
	unsigned int w;
	bool alive;
	int pid;

	do {
		w = (unsigned int)(rnd(seed) % s->cfg.workers);
		pid = worker_pid(s->pool, w, &alive);
		if (alive && pid > 0)
			return pid;
		sched_yield();
	} while (now_ms() < end);
	printf("# hang: no live worker to kill\n");
	return -1;
}

/*
 * The request arenas are empty: a loan of the whole arena fits each
 * worker's mailbox of this thread's slot (stealing: the slot's one).
 */
static bool ls_arenas_empty(struct ls *s, size_t arena)
{
	struct knitk_call_opts co = { .size = sizeof(co) };
	bool steal = s->cfg.dispatch == KNITK_POOL_DISPATCH_STEAL;
	struct knitk_call *c;
	unsigned int w;
	void *buf;
	int ret;

	for (w = 0; w < (steal ? 1 : s->cfg.workers); w++) {
		co.flags = steal ? 0 : KNITK_CALL_WORKER;
		co.worker = w;
		co.deadline_ns = after_ms(HANG_MS);
		ret = knitk_pool_loan(s->pool, T_RUN, arena, &co, &c, &buf);
		if (ret) {
			printf("# worker %u: a loan of the whole arena: %d\n", w, ret);
			return false;
		}
		knitk_call_release(c);
	}
	return true;
}

static void loan_storm(struct ls_cfg cfg, unsigned int kills, unsigned long calls)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = cfg.kind, .nr_workers = cfg.workers,
		.nr_submitters = cfg.slots,
		.flags = cfg.kind == KNITK_WORKER_PROCESSES ? KNITK_POOL_RESPAWN : 0,
		.knot_flags = KNITK_KNOT_FUTEX, .dispatch = cfg.dispatch,
	};
	static uint64_t next_id = 1;
	unsigned long twice = 0, not_once = 0, ran_released = 0;
	struct knitk_endpoint *ep;
	struct knitk_layout lay;
	struct knitk_pool_stats st;
	pthread_t th[LS_THREADS];
	uint64_t seed = 0x10a45, id, end;
	struct ls *s = calloc(1, sizeof(*s));
	unsigned int i, t;
	int children0;

	REQUIRE(s);
	s->outcome = calloc(LS_IDS, 1);
	REQUIRE(s->outcome);
	s->cfg = cfg;
	if (next_id + LS_IDS > RUNTAB_IDS)
		next_id = 1;
	s->id0 = s->next = next_id;
	children0 = count_children();
	REQUIRE(knitk_pool_create(&o, &test_tasks, &s->pool) == 0);
	REQUIRE(knitk_pool_endpoint(s->pool, &ep) == 0);
	REQUIRE(knitk_endpoint_layout(ep, &lay, NULL) == 0);
	for (t = 0; t < LS_THREADS; t++)
		REQUIRE(pthread_create(&th[t], NULL, ls_submitter, s) == 0);
	for (i = 1; cfg.kills && i <= kills && !atomic_load(&s->bad); i++) {
		uint64_t r = rnd(&seed);
		int pid;

		wait_ok_count(&s->ok, &s->bad, atomic_load(&s->ok) + 10);
		pid = ls_pick(s, &seed);
		if (pid < 0) {
			atomic_fetch_add(&s->bad, 1);
			break;
		}
		if (r % 2)
			sleep_us(r >> 40 & 511);
		kill(pid, SIGKILL);
		if (!deaths_reach(s->pool, i, 0)) {
			atomic_fetch_add(&s->bad, 1);
			break;
		}
	}
	kills = i - 1;
	end = now_ms() + HANG_MS;
	while (atomic_load(&s->ok) < calls && !atomic_load(&s->bad) &&
	       atomic_load(&s->next) - s->id0 < LS_IDS / 2 && now_ms() < end)
		sleep_us(1000);
	atomic_store(&s->stop, 1);
	for (t = 0; t < LS_THREADS; t++)
		pthread_join(th[t], NULL);
	if (cfg.kills && !atomic_load(&s->bad))
		CHECK(deaths_reach(s->pool, kills, kills));
	CHECK(ls_arenas_empty(s, lay.arena_size));
	pool_stats(s->pool, &st);
	knitk_pool_destroy(s->pool);
	/* Every worker is gone: the run table is final. */
	next_id = atomic_load(&s->next);
	for (id = s->id0; id < next_id && id - s->id0 < LS_IDS; id++) {
		unsigned int runs = atomic_load(&runtab[id]);
		uint8_t out = atomic_load(&s->outcome[id - s->id0]);

		if (runs > 1 && twice++ < 10)
			printf("# call %llu ran %u times\n", (unsigned long long)id, runs);
		if (out == LS_OK && runs != 1 && not_once++ < 10)
			printf("# call %llu answered but ran %u times\n",
			       (unsigned long long)id, runs);
		if (out == LS_RELEASED && runs && ran_released++ < 10)
			printf("# call %llu released unsent but ran\n",
			       (unsigned long long)id);
	}
	printf("# %u kills: %lu ok, %lu -EOWNERDEAD, %lu released, %lu batches, %lu bad (%lu foreign)\n",
	       kills, atomic_load(&s->ok), atomic_load(&s->dead),
	       atomic_load(&s->released), atomic_load(&s->batches),
	       atomic_load(&s->bad), atomic_load(&s->wrong));
	CHECK_EQ(atomic_load(&s->bad), 0);
	CHECK_EQ(twice, 0);
	CHECK_EQ(not_once, 0);
	CHECK_EQ(ran_released, 0);
	CHECK(atomic_load(&s->ok) > 0);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.deaths, kills);
	if (!cfg.kills)
		CHECK_EQ(atomic_load(&s->dead), 0);
	if (count_children() != children0)
		scan_children(true);
	CHECK_EQ(count_children(), children0);
	free((void *)s->outcome);
	free(s);
}

static void loan_storm_private_processes_killed(void)
{
	struct ls_cfg cfg = { KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE, 3, 2, true };

	loan_storm(cfg, scaled(80, 6), scaled(4000, 200));
}

static void loan_storm_steal_processes_killed(void)
{
	struct ls_cfg cfg = { KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL, 3, 2, true };

	loan_storm(cfg, scaled(80, 6), scaled(4000, 200));
}

static void loan_storm_private_threads(void)
{
	struct ls_cfg cfg = { KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 3, 2, false };

	loan_storm(cfg, 0, scaled(20000, 1000));
}

static void loan_storm_steal_threads(void)
{
	struct ls_cfg cfg = { KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 3, 2, false };

	loan_storm(cfg, 0, scaled(20000, 1000));
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    deaths_init(argc, argv))
		return 1;
	TEST(loan_storm_private_processes_killed);
	TEST(loan_storm_steal_processes_killed);
	TEST(loan_storm_private_threads);
	TEST(loan_storm_steal_threads);
	deaths_fini();
	return tap_exit();
}
