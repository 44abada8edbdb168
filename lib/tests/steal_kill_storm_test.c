// SPDX-License-Identifier: GPL-2.0
/*
 * Exactly once in a stealing pool of process workers under SIGKILL: every
 * region size, one submitter and many sharing few slots, arguments as
 * large as the arena, batches, aborts and deadlines racing the kills, two
 * workers killed at once, a successor killed as soon as it joined, workers
 * stopped and continued; each result checked by its id, no call run
 * twice, every -EOWNERDEAD attributed to a worker killed since.  And fresh
 * stealing pools given a burst at once, with a thread hogging a CPU.
 * argv[1] scales the kill and pool counts (1000000 plain).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

enum {
	S_BATCH = 1 << 0,	/* submit windows with knitk_pool_submit_batch */
	S_ABORT = 1 << 1,	/* abort some calls while the kills go on */
	S_DEADLINE = 1 << 2,	/* some calls carry a short deadline */
	S_BIG = 1 << 3,		/* arguments up to the whole arena */
	S_DOUBLE = 1 << 4,	/* kill two workers at once */
	S_JOINED = 1 << 5,	/* kill a successor as soon as it joined */
	S_STOP = 1 << 6,	/* SIGSTOP/SIGCONT workers meanwhile */
};

#define S_WINDOW	8
#define S_MAX_KILLS	4096

struct s8_cfg {
	unsigned int workers, region, threads, slots, flags;
	uint64_t arena;
};

struct s8 {
	struct s8_cfg cfg;
	struct knitk_pool *pool;
	unsigned int kills;
	size_t maxlen;
	_Atomic unsigned long ok, dead, canceled, timedout, bad, wrong, epipe;
	uint64_t id0;
	_Atomic uint64_t next;
	/* Kill k (1-based) hit worker target[k]; kills up to handled are seen. */
	_Atomic unsigned int started, handled;
	_Atomic unsigned char target[S_MAX_KILLS + 1];
	uint8_t *outcome;	/* per id: 1 ok, 2 other */
	_Atomic int stop;
};

struct s8_call {
	struct knitk_call *c;
	uint64_t id;
	unsigned int handled0;
	int aborted;		/* knitk_call_abort's return, 1 if not tried */
	bool deadline;
	struct knitk_call_opts co;
	unsigned char *buf;
	uint32_t len;
};

static bool s8_death_ok(struct s8 *s, struct s8_call *sc)
{
	unsigned int k, end = atomic_load(&s->started);
	int w = knitk_call_worker(sc->c);

	for (k = sc->handled0 + 1; k <= end; k++)
		if (atomic_load(&s->target[k]) == w)
			return true;
	return false;
}

static uint32_t s8_len(struct s8 *s, uint64_t r)
{
	unsigned int p = (unsigned int)(r % 16);

	if ((s->cfg.flags & S_BIG) && p < 3)
		return p == 0 ? (uint32_t)s->maxlen :
		       (uint32_t)s->maxlen - (uint32_t)(r >> 20) % 4096;
	return sizeof(struct run_arg) + (uint32_t)(r >> 16) % (p % 2 ? 2984 : 48);
}

static void s8_judge(struct s8 *s, struct s8_call *sc)
{
	int st = knitk_call_status(sc->c);
	bool good = false;

	if (run_result_ok(sc->c, sc->id)) {
		/* Aborted with 0 yet answered: the abort lied. */
		good = sc->aborted != 0;
		if (good) {
			atomic_fetch_add(&s->ok, 1);
			s->outcome[sc->id - s->id0] = 1;
		}
	} else if (st == -EOWNERDEAD && s8_death_ok(s, sc) && sc->aborted != 0) {
		good = true;
		atomic_fetch_add(&s->dead, 1);
	} else if (st == -ECANCELED && sc->aborted == 0) {
		good = knitk_call_worker(sc->c) == -ENOENT;
		atomic_fetch_add(&s->canceled, good);
	} else if (st == -ETIMEDOUT && sc->deadline) {
		good = knitk_call_worker(sc->c) == -ENOENT;
		atomic_fetch_add(&s->timedout, good);
	}
	if (!good) {
		uint64_t f = run_result_foreign(sc->c, sc->id);

		printf("# call %llu (%u bytes) worker %d: status %d, abort %d, deadline %d, handled0 %u started %u%s%llu\n",
		       (unsigned long long)sc->id, sc->len, knitk_call_worker(sc->c),
		       st, sc->aborted, sc->deadline, sc->handled0,
		       atomic_load(&s->started),
		       f ? ", the result of call " : "", (unsigned long long)f);
		if (f)
			atomic_fetch_add(&s->wrong, 1);
		atomic_fetch_add(&s->bad, 1);
	}
	if (!s->outcome[sc->id - s->id0])
		s->outcome[sc->id - s->id0] = 2;
}

static void *s8_submitter(void *arg)
{
	struct s8 *s = arg;
	struct s8_call sc[S_WINDOW];
	struct knitk_submission subs[S_WINDOW];
	struct knitk_call *c[S_WINDOW];
	uint64_t seed = (uintptr_t)sc ^ now_ms();
	unsigned int i, n;
	int ret;

	memset(sc, 0, sizeof(sc));
	for (i = 0; i < S_WINDOW; i++) {
		sc[i].buf = malloc(s->maxlen);
		if (!sc[i].buf) {
			atomic_fetch_add(&s->bad, 1);
			goto out;
		}
	}
	while (!atomic_load(&s->stop)) {
		unsigned int handled0 = atomic_load(&s->handled);

		for (n = 0; n < S_WINDOW; n++) {
			struct s8_call *p = &sc[n];
			uint64_t r = rnd(&seed);

			p->id = atomic_fetch_add(&s->next, 1);
			if (p->id - s->id0 >= RUNTAB_IDS / 8 || p->id >= RUNTAB_IDS)
				break;
			p->len = s8_len(s, r);
			run_arg_fill(p->buf, p->id, storm_task_us(r >> 7), p->len);
			p->handled0 = handled0;
			p->aborted = 1;
			p->deadline = (s->cfg.flags & S_DEADLINE) && r % 5 == 0;
			p->co = (struct knitk_call_opts){ .size = sizeof(p->co) };
			if (p->deadline)
				p->co.deadline_ns = after_ms(0) + (r >> 24) % 400000;
			subs[n] = (struct knitk_submission){
				.fn = T_RUN, .in = p->buf, .len = p->len,
				.opts = p->deadline ? &p->co : NULL,
			};
		}
		if (!n)
			break;
		if (s->cfg.flags & S_BATCH) {
			unsigned int done = 0;

			while (done < n) {
				ret = knitk_pool_submit_batch(s->pool, subs + done,
							      n - done, c + done);
				if (ret <= 0)
					break;
				done += (unsigned int)ret;
			}
			if (done < n) {
				printf("# batch: %d after %u\n", ret, done);
				atomic_fetch_add(ret == -EPIPE ? &s->epipe : &s->bad, 1);
				n = done;
			}
		} else {
			for (i = 0; i < n; i++) {
				ret = knitk_pool_submit(s->pool, T_RUN, subs[i].in,
							subs[i].len, subs[i].opts, &c[i]);
				if (ret) {
					printf("# submit: %d\n", ret);
					atomic_fetch_add(ret == -EPIPE ? &s->epipe : &s->bad, 1);
					break;
				}
			}
			n = i;
		}
		for (i = 0; i < n; i++)
			sc[i].c = c[i];
		if ((s->cfg.flags & S_ABORT) && n) {
			uint64_t r = rnd(&seed);

			if (r % 2)
				sleep_us(r % 300);
			for (i = 0; i < n; i++)
				if ((r >> (8 + i)) % 4 == 0)
					sc[i].aborted = knitk_call_abort(sc[i].c);
		}
		if (n && knitk_pool_wait_all(s->pool, c, n, after_ms(HANG_MS)) != 0) {
			printf("# hang: calls not complete after %d ms\n", HANG_MS);
			print_stats(s->pool);
			atomic_fetch_add(&s->bad, 1);
			atomic_store(&s->stop, 1);
			/* Leak the handles: releasing would only abort them. */
			break;
		}
		for (i = 0; i < n; i++) {
			s8_judge(s, &sc[i]);
			knitk_call_release(sc[i].c);
		}
		if (n < S_WINDOW)
			break;
	}
out:
	for (i = 0; i < S_WINDOW; i++)
		free(sc[i].buf);
	return NULL;
}

static void *s8_stopper(void *arg)
{
	struct s8 *s = arg;
	uint64_t seed = 77;

	while (!atomic_load(&s->stop)) {
		uint64_t r = rnd(&seed);
		int pid = worker_pid(s->pool, (unsigned int)(r % s->cfg.workers), NULL);

		if (pid > 0 && !kill(pid, SIGSTOP)) {
			sleep_us((r >> 16) % 2000);
			kill(pid, SIGCONT);
		}
		sleep_us((r >> 32) % 3000);
	}
	return NULL;
}

/* A live worker's pid, chosen at random, other than @not. */
static int s8_pick(struct s8 *s, uint64_t *seed, int not, unsigned int *w)
{
	uint64_t end = now_ms() + HANG_MS;
	bool alive;
	int pid;

	do {
		*w = (unsigned int)(rnd(seed) % s->cfg.workers);
		pid = worker_pid(s->pool, *w, &alive);
		if (alive && pid > 0 && (int)*w != not)
			return pid;
		sched_yield();
	} while (now_ms() < end);
	printf("# hang: no live worker to kill\n");
	return -1;
}

static void s8_run(struct s8 *s)
{
	pthread_t th[32], stopper;
	uint64_t seed = 0x5eed8;
	unsigned int i, t, want = 0;

	for (t = 0; t < s->cfg.threads; t++)
		pthread_create(&th[t], NULL, s8_submitter, s);
	if (s->cfg.flags & S_STOP)
		pthread_create(&stopper, NULL, s8_stopper, s);
	for (i = 1; i <= s->kills && !atomic_load(&s->bad) &&
		    !atomic_load(&s->epipe) && !atomic_load(&s->stop); i++) {
		uint64_t r = rnd(&seed);
		unsigned int w, w2;
		int pid, pid2 = -1;

		if (!(s->cfg.flags & S_JOINED) || r % 2)
			wait_ok_count(&s->ok, &s->bad, atomic_load(&s->ok) + 10);
		pid = s8_pick(s, &seed, -1, &w);
		if (pid < 0)
			break;
		if (r % 4 >= 2)
			sleep_us((r >> 32) % 400);
		if ((s->cfg.flags & S_DOUBLE) && i < s->kills && r % 3) {
			pid2 = s8_pick(s, &seed, (int)w, &w2);
			if (pid2 < 0)
				break;
		}
		atomic_store(&s->target[i], (unsigned char)w);
		if (pid2 > 0) {
			atomic_store(&s->target[i + 1], (unsigned char)w2);
			atomic_store(&s->started, i + 1);
			kill(pid, SIGKILL);
			kill(pid2, SIGKILL);
			want += 2;
			i++;
		} else {
			atomic_store(&s->started, i);
			kill(pid, SIGKILL);
			want++;
		}
		if (!deaths_reach(s->pool, want, 0)) {
			atomic_fetch_add(&s->bad, 1);
			break;
		}
		atomic_store(&s->handled, i);
	}
	s->kills = want;
	wait_ok_count(&s->ok, &s->bad, atomic_load(&s->ok) + 10);
	atomic_store(&s->stop, 1);
	for (t = 0; t < s->cfg.threads; t++)
		pthread_join(th[t], NULL);
	if (s->cfg.flags & S_STOP) {
		pthread_join(stopper, NULL);
		for (unsigned int w2 = 0; w2 < s->cfg.workers; w2++) {
			int p = worker_pid(s->pool, w2, NULL);

			if (p > 0)
				kill(p, SIGCONT);
		}
	}
}

static void steal_storm(struct s8_cfg cfg, unsigned int kills)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES,
		.nr_workers = cfg.workers, .nr_submitters = cfg.slots,
		.flags = KNITK_POOL_RESPAWN, .knot_flags = KNITK_KNOT_FUTEX,
		.dispatch = KNITK_POOL_DISPATCH_STEAL, .steal_region = cfg.region,
		.arena_bytes = cfg.arena,
	};
	static uint64_t next_id = 1;
	struct knitk_pool_stats st;
	struct s8 *s = calloc(1, sizeof(*s));
	unsigned long twice = 0, ok_not_once = 0, calls;
	int children0, ret;
	uint64_t id;

	REQUIRE(s);
	REQUIRE(runtab_open() == 0);
	s->outcome = calloc(RUNTAB_IDS / 8, 1);
	REQUIRE(s->outcome);
	s->cfg = cfg;
	s->kills = kills > S_MAX_KILLS - 1 ? S_MAX_KILLS - 1 : kills;
	s->maxlen = cfg.arena ? cfg.arena : 65536;
	if (next_id + RUNTAB_IDS / 8 > RUNTAB_IDS)
		next_id = 1;
	s->id0 = next_id;
	s->next = next_id;
	children0 = count_children();
	ret = knitk_pool_create(&o, &test_tasks, &s->pool);
	CHECK_EQ(ret, 0);
	if (ret) {
		free(s->outcome);
		free(s);
		return;
	}
	/* A call as large as the arena goes through (guarantees.md). */
	if (cfg.flags & S_BIG) {
		struct knitk_call *c;
		void *big = calloc(1, s->maxlen + 1);

		REQUIRE(big);
		CHECK_EQ(knitk_pool_submit(s->pool, T_ECHO, big, s->maxlen + 1,
					   NULL, &c), -EMSGSIZE);
		free(big);
	}
	s8_run(s);
	if (!atomic_load(&s->bad))
		CHECK(deaths_reach(s->pool, s->kills, s->kills));
	CHECK_EQ(mix_calls_good(s->pool, 20, NULL, 5, 3), 20);
	pool_stats(s->pool, &st);
	knitk_pool_destroy(s->pool);
	calls = atomic_load(&s->next) - s->id0;
	next_id = atomic_load(&s->next);
	for (id = s->id0; id < s->id0 + calls; id++) {
		unsigned int runs = atomic_load(&runtab[id]);

		if (runs > 1 && twice++ < 10)
			printf("# call %llu ran %u times\n", (unsigned long long)id, runs);
		if (s->outcome[id - s->id0] == 1 && runs != 1 && ok_not_once++ < 10)
			printf("# call %llu answered ok but ran %u times\n",
			       (unsigned long long)id, runs);
	}
	printf("# %u kills: %lu ok, %lu -EOWNERDEAD, %lu -ECANCELED, %lu -ETIMEDOUT, %lu bad (%lu foreign), %lu -EPIPE; %lu ids\n",
	       s->kills, atomic_load(&s->ok), atomic_load(&s->dead),
	       atomic_load(&s->canceled), atomic_load(&s->timedout),
	       atomic_load(&s->bad), atomic_load(&s->wrong),
	       atomic_load(&s->epipe), calls);
	CHECK_EQ(atomic_load(&s->bad), 0);
	CHECK_EQ(atomic_load(&s->epipe), 0);
	CHECK_EQ(twice, 0);
	CHECK_EQ(ok_not_once, 0);
	CHECK_EQ(st.completed, st.submitted);
	CHECK_EQ(st.deaths, s->kills);
	CHECK(atomic_load(&s->ok) > 0);
	if (count_children() != children0)
		scan_children(true);
	CHECK_EQ(count_children(), children0);
	free(s->outcome);
	free(s);
}

static void steal_kills_every_region(void)
{
	static const unsigned int g[] = { 1, 2, 4, 8, 16 };
	unsigned int i;

	for (i = 0; i < 5; i++) {
		struct s8_cfg cfg = { .workers = g[i] == 16 ? 3 : 4, .region = g[i],
				      .threads = 3, .slots = 4 };

		printf("# g %u\n", g[i]);
		steal_storm(cfg, scaled(100, 6));
	}
}

static void steal_kills_many_submitters_few_slots(void)
{
	struct s8_cfg cfg = { .workers = 3, .region = 4, .threads = 12, .slots = 2 };

	steal_storm(cfg, scaled(120, 8));
}

static void steal_kills_one_submitter(void)
{
	struct s8_cfg cfg = { .workers = 5, .region = 1, .threads = 1, .slots = 1 };

	steal_storm(cfg, scaled(100, 6));
}

static void steal_kills_arena_sized_args(void)
{
	struct s8_cfg cfg = { .workers = 3, .region = 2, .threads = 3, .slots = 3,
			      .flags = S_BIG, .arena = 16384 };

	steal_storm(cfg, scaled(100, 6));
}

static void steal_kills_batches(void)
{
	struct s8_cfg cfg = { .workers = 3, .region = 8, .threads = 3, .slots = 2,
			      .flags = S_BATCH | S_BIG, .arena = 32768 };

	steal_storm(cfg, scaled(120, 8));
}

static void steal_kills_aborts_deadlines(void)
{
	struct s8_cfg cfg = { .workers = 3, .region = 2, .threads = 4, .slots = 4,
			      .flags = S_ABORT | S_DEADLINE | S_BATCH };

	steal_storm(cfg, scaled(120, 8));
}

static void steal_kills_two_at_once(void)
{
	struct s8_cfg cfg = { .workers = 4, .region = 4, .threads = 3, .slots = 4,
			      .flags = S_DOUBLE | S_ABORT };

	steal_storm(cfg, scaled(120, 8));
}

static void steal_kills_joined_successors(void)
{
	struct s8_cfg cfg = { .workers = 2, .region = 16, .threads = 3, .slots = 3,
			      .flags = S_JOINED | S_DOUBLE };

	steal_storm(cfg, scaled(120, 8));
}

static void steal_kills_stopped_workers(void)
{
	struct s8_cfg cfg = { .workers = 3, .region = 4, .threads = 3, .slots = 3,
			      .flags = S_STOP | S_DEADLINE };

	steal_storm(cfg, scaled(100, 6));
}

struct fresh {
	struct knitk_pool *pool;
	unsigned int n, batch;
	uint64_t x0;
	_Atomic unsigned long good, bad;
};

static void *fresh_fn(void *arg)
{
	struct fresh *f = arg;
	struct knitk_submission subs[64];
	struct knitk_call *c[64];
	uint64_t xs[64];
	unsigned int i, done = 0, k, m;
	int ret;

	while (done < f->n) {
		m = f->n - done < f->batch ? f->n - done : f->batch;
		for (i = 0; i < m; i++) {
			xs[i] = f->x0 + done + i;
			subs[i] = (struct knitk_submission){ .fn = T_MIX, .in = &xs[i], .len = 8 };
		}
		for (k = 0; k < m; k += (unsigned int)ret) {
			ret = knitk_pool_submit_batch(f->pool, subs + k, m - k, c + k);
			if (ret <= 0) {
				printf("# batch: %d\n", ret);
				atomic_fetch_add(&f->bad, 1);
				return NULL;
			}
		}
		for (i = 0; i < m; i++) {
			ret = knitk_call_wait(c[i], after_ms(HANG_MS));
			if (ret == 0 && mix_result_ok(c[i], xs[i])) {
				atomic_fetch_add(&f->good, 1);
			} else {
				printf("# %s: status %d\n",
				       ret == -EINPROGRESS ? "hang, a lost call" : "bad call",
				       ret);
				atomic_fetch_add(&f->bad, 1);
				if (ret == -EINPROGRESS) {
					print_stats(f->pool);
					return NULL;	/* leaked: the destroy cancels it */
				}
			}
			knitk_call_release(c[i]);
		}
		done += m;
		if (f->x0 % 3 == 0)
			sched_yield();
	}
	return NULL;
}

static _Atomic int hog_stop;

static void *hog_fn(void *arg)
{
	volatile unsigned long n = 0;

	(void)arg;
	while (!atomic_load_explicit(&hog_stop, memory_order_relaxed))
		n++;
	return NULL;
}

static void fresh_steal_pools_burst(void)
{
	static const unsigned int g[] = { 1, 2, 4, 8, 16 };
	unsigned int pools = scaled(60, 20), i, t, bad = 0;
	uint64_t seed = now_ms();
	pthread_t hog[2];

	atomic_store(&hog_stop, 0);
	for (t = 0; t < 2; t++)
		pthread_create(&hog[t], NULL, hog_fn, NULL);
	for (i = 0; i < pools && !bad; i++) {
		uint64_t r = rnd(&seed);
		unsigned int rg = g[r % 5], workers = 1 + (unsigned int)(r >> 8) % 3;
		unsigned int threads = 1 + (unsigned int)(r >> 16) % 4;
		struct knitk_pool_opts o = {
			.size = sizeof(o), .knot_flags = KNITK_KNOT_FUTEX,
			.kind = (r >> 24) % 5 ? KNITK_WORKER_THREADS : KNITK_WORKER_PROCESSES,
			.nr_workers = workers, .nr_submitters = 1 + (unsigned int)(r >> 28) % 3,
			.dispatch = KNITK_POOL_DISPATCH_STEAL, .steal_region = rg,
			.spin = (r >> 32) % 2 ? 1 : 0,
		};
		struct fresh f[4];
		pthread_t th[4];

		if (rg == 16 && workers > 3)
			o.nr_workers = 3;
		if (knitk_pool_create(&o, &test_tasks, &f[0].pool)) {
			printf("# create failed, pool %u\n", i);
			bad++;
			break;
		}
		for (t = 0; t < threads; t++) {
			f[t].pool = f[0].pool;
			f[t].n = 1 + (unsigned int)(rnd(&seed) % 200);
			f[t].batch = 1 + (unsigned int)(rnd(&seed) % 64);
			f[t].x0 = (uint64_t)i * 1000 + t * 250;
			atomic_store(&f[t].good, 0);
			atomic_store(&f[t].bad, 0);
			pthread_create(&th[t], NULL, fresh_fn, &f[t]);
		}
		for (t = 0; t < threads; t++) {
			pthread_join(th[t], NULL);
			if (atomic_load(&f[t].bad) ||
			    atomic_load(&f[t].good) != f[t].n) {
				printf("# pool %u (%s, %u workers, g %u, spin %u, %u threads): thread %u %lu of %u good\n",
				       i, o.kind == KNITK_WORKER_THREADS ? "threads" : "processes",
				       o.nr_workers, rg, o.spin, threads, t,
				       atomic_load(&f[t].good), f[t].n);
				bad++;
			}
		}
		knitk_pool_destroy(f[0].pool);
	}
	atomic_store(&hog_stop, 1);
	for (t = 0; t < 2; t++)
		pthread_join(hog[t], NULL);
	printf("# %u fresh stealing pools, %u bad\n", i, bad);
	CHECK_EQ(bad, 0);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    deaths_init(argc, argv))
		return 1;
	TEST(steal_kills_every_region);
	TEST(steal_kills_many_submitters_few_slots);
	TEST(steal_kills_one_submitter);
	TEST(steal_kills_arena_sized_args);
	TEST(steal_kills_batches);
	TEST(steal_kills_aborts_deadlines);
	TEST(steal_kills_two_at_once);
	TEST(steal_kills_joined_successors);
	TEST(steal_kills_stopped_workers);
	TEST(fresh_steal_pools_burst);
	deaths_fini();
	return tap_exit();
}
