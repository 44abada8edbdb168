// SPDX-License-Identifier: GPL-2.0
/*
 * Adversarial tests of worker deaths, written from the public headers, the
 * man pages and docs/guarantees.md alone (futex backend).
 *
 * Exactly once in a stealing pool of process workers under SIGKILL: every
 * region size, one submitter and many sharing few slots, arguments as
 * large as the arena, batches, aborts and deadlines racing the kills, two
 * workers killed at once, a successor killed as soon as it joined, workers
 * stopped and continued; each call's result checked by its id (T_RUN), no
 * call run twice, every -EOWNERDEAD attributed to a worker killed since.
 *
 * The host SIGKILLed: with its workers blocked on full return mailboxes
 * (the host stopped first), with a worker stopped (continued after the
 * host's death), during its destroy with twelve workers, with three pools,
 * and with a forked child of the host still alive; every worker exits.
 *
 * A parked waiter learns of its worker's death while the respawn is held
 * by a wrapper (prefix_argv) and when the respawn fails; several waiters
 * on calls of one dead worker, knitk_pool_wait_any and wait_all among them.
 *
 * Fresh stealing pools given a burst at once, with a thread hogging a CPU.
 *
 * Every wait is bounded only as a hang detector (HANG_MS); nothing asserts
 * on time.  argv[1] scales the kill and pool counts (1000000 plain).
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

#define HANG_MS		20000

static unsigned long knob = 1000000;

/* @plain at the plain run's knob, scaled down with it, at least @min. */
static unsigned int scaled(unsigned int plain, unsigned int min)
{
	unsigned long v = (unsigned long)plain * knob / 1000000;

	return v < min ? min : (unsigned int)v;
}

static uint64_t rnd(uint64_t *s)
{
	*s = mix64(*s + 0x9e3779b97f4a7c15ULL);
	return *s;
}

static void sleep_us(uint64_t us)
{
	struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static uint64_t now_ms(void)
{
	return after_ms(0) / 1000000;
}

static void print_stats(struct knitk_pool *pool)
{
	struct knitk_pool_stats st;

	pool_stats(pool, &st);
	printf("# stats: submitted %llu completed %llu ownerdead %llu canceled %llu timedout %llu deaths %llu respawns %llu claims %llu\n",
	       (unsigned long long)st.submitted, (unsigned long long)st.completed,
	       (unsigned long long)st.ownerdead, (unsigned long long)st.canceled,
	       (unsigned long long)st.timedout, (unsigned long long)st.deaths,
	       (unsigned long long)st.respawns, (unsigned long long)st.claims);
}

/* Until the pool counts @deaths deaths and @respawns respawns, or a hang. */
static bool deaths_reach(struct knitk_pool *pool, uint64_t deaths,
			 uint64_t respawns)
{
	uint64_t end = now_ms() + HANG_MS;
	struct knitk_pool_stats st;

	for (;;) {
		pool_stats(pool, &st);
		if (st.deaths >= deaths && st.respawns >= respawns)
			return true;
		if (now_ms() > end) {
			printf("# hang: waiting for %llu deaths, %llu respawns\n",
			       (unsigned long long)deaths, (unsigned long long)respawns);
			print_stats(pool);
			return false;
		}
		sched_yield();
	}
}

static int worker_pid(struct knitk_pool *pool, unsigned int w, bool *alive)
{
	struct knitk_worker_info wi = { .size = sizeof(wi) };

	if (knitk_pool_worker_info(pool, w, &wi))
		return -1;
	if (alive)
		*alive = wi.alive;
	return wi.pid;
}

static int worker_of_pid(struct knitk_pool *pool, unsigned int workers, int pid)
{
	unsigned int w;

	for (w = 0; w < workers; w++)
		if (worker_pid(pool, w, NULL) == pid)
			return (int)w;
	return -1;
}

/*
 * The respawn wrapper (prefix_argv): holds the worker while the hold
 * file exists, exits before the worker runs while the fail file exists.
 */
static char hold_path[64], fail_path[64];
static char *const wrapper[] = {
	"/bin/sh", "-c",
	"while [ -e \"$ADV8_HOLD\" ]; do sleep 0.005; done; "
	"[ -e \"$ADV8_FAIL\" ] && exit 7; exec \"$0\" \"$@\"",
	NULL,
};

static void flag_set(const char *path, bool on)
{
	if (on)
		close(open(path, O_CREAT | O_WRONLY, 0600));
	else
		unlink(path);
}

/* ================================================= exactly once under kills */

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

/* The id a call's result names when it is not @id's, or 0. */
static uint64_t foreign(struct knitk_call *c, uint64_t id)
{
	const void *d;
	uint64_t r[2];
	size_t len;

	if (knitk_call_status(c) <= 0 || knitk_call_result(c, &d, &len) ||
	    len != sizeof(r))
		return 0;
	memcpy(r, d, sizeof(r));
	return r[0] != id ? r[0] : 0;
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
		uint64_t f = foreign(sc->c, sc->id);

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

/* ======================================================= the host killed */

enum host_at {
	H_FULL,		/* the host stopped, its workers' results piling up */
	H_STOP_ONE,	/* a worker stopped, continued after the host's death */
	H_STOP_ALL,	/* every worker stopped, continued after it */
	H_DESTROY,	/* twelve workers, killed in its destroy */
	H_THREE,	/* three pools in one host */
	H_FORK_PAUSE,	/* a forked child of the host lives on */
	H_FORK_EXEC,	/* a forked child of the host execs sleep */
	H_RESPAWN,	/* a worker killed, its respawn held in the wrapper */
	H_NR,
};

static const char *const host_at_name[H_NR] = {
	"host stopped, results piling up", "a worker stopped",
	"every worker stopped", "in destroy, 12 workers", "three pools",
	"a forked child pausing", "a forked child exec'd",
	"a respawn under way",
};



struct host_sh {
	_Atomic int npids;
	int pids[64];
	_Atomic int kid;
};

static struct host_sh *hsh;

struct host_flow {
	struct knitk_pool *pool;
	enum host_at at;
	_Atomic int stop;
	_Atomic unsigned long done;
	unsigned int seed;
};

static void *host_flow_fn(void *arg)
{
	struct host_flow *f = arg;
	uint64_t seed = f->seed, x = f->seed;
	struct { uint32_t n; uint8_t seed; } fill = { 60000, 3 };
	struct knitk_call *c;

	while (!atomic_load(&f->stop)) {
		uint64_t r = rnd(&seed);
		int ret;

		if (f->at == H_FULL) {
			/* Big results, never waited for nor released. */
			ret = knitk_pool_submit(f->pool, T_FILL, &fill, 5, NULL, &c);
			if (ret)
				_exit(20);
			atomic_fetch_add(&f->done, 1);
			continue;
		}
		if (f->at == H_DESTROY) {
			uint32_t ms = 1 + (uint32_t)(r % 3);

			/* Left running for the destroy to cancel. */
			if (knitk_pool_submit(f->pool, T_SLEEP, &ms, 4, NULL, &c))
				_exit(21);
			atomic_fetch_add(&f->done, 1);
			continue;
		}
		x++;
		ret = knitk_pool_submit(f->pool, r % 4 ? T_MIX : T_SLEEP,
					r % 4 ? (void *)&x : (void *)&(uint32_t){ 1 },
					r % 4 ? 8 : 4, NULL, &c);
		if (ret)
			_exit(22);
		knitk_call_wait(c, KNITK_WAIT_FOREVER);
		knitk_call_release(c);
		atomic_fetch_add(&f->done, 1);
	}
	return NULL;
}

static void host_say(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		_exit(9);
}

static void host_main(enum host_at at, int fd)
{
	struct knitk_pool_opts o[3] = {
		{ .size = sizeof(o[0]), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		  .dispatch = KNITK_POOL_DISPATCH_STEAL },
		{ .size = sizeof(o[0]), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		  .dispatch = KNITK_POOL_DISPATCH_PRIVATE },
		{ .size = sizeof(o[0]), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		  .dispatch = KNITK_POOL_DISPATCH_STEAL, .flags = KNITK_POOL_RESPAWN },
	};
	struct host_flow fl[3][2];
	pthread_t th[3][2];
	unsigned int np = at == H_THREE ? 3 : 1, p, t, w;
	pid_t kid;

	if (at == H_FULL)
		o[0].dispatch = (unsigned int)(getpid() % 2);
	if (at == H_DESTROY)
		o[0].nr_workers = 12;
	if (at == H_RESPAWN) {
		o[0].flags = KNITK_POOL_RESPAWN;
		o[0].prefix_argv = wrapper;
		o[0].dispatch = (unsigned int)(getpid() % 2);
	}
	for (p = 0; p < np; p++) {
		struct knitk_pool *pool;

		if (knitk_pool_create(&o[p], &test_tasks, &pool))
			_exit(3);
		for (w = 0; w < o[p].nr_workers; w++) {
			int pid = worker_pid(pool, w, NULL);

			if (pid <= 0)
				_exit(4);
			hsh->pids[atomic_fetch_add(&hsh->npids, 1)] = pid;
		}
		for (t = 0; t < 2; t++) {
			fl[p][t] = (struct host_flow){ .pool = pool, .at = at,
						       .seed = p * 2 + t + 1 };
			if (pthread_create(&th[p][t], NULL, host_flow_fn, &fl[p][t]))
				_exit(5);
		}
	}
	while (atomic_load(&fl[0][0].done) + atomic_load(&fl[0][1].done) < 8)
		usleep(100);
	if (at == H_FORK_PAUSE || at == H_FORK_EXEC) {
		kid = fork();
		if (kid < 0)
			_exit(6);
		if (kid == 0) {
			if (at == H_FORK_EXEC)
				execlp("sleep", "sleep", "1000", (char *)NULL);
			for (;;)
				pause();
		}
		atomic_store(&hsh->kid, kid);
	}
	if (at == H_DESTROY) {
		for (t = 0; t < 2; t++)
			atomic_store(&fl[0][t].stop, 1);
		for (t = 0; t < 2; t++)
			pthread_join(th[0][t], NULL);
		host_say(fd, 'D');
		knitk_pool_destroy(fl[0][0].pool);
		host_say(fd, 'E');
	} else {
		host_say(fd, 'R');
	}
	for (;;)
		pause();
}

static bool pid_gone(int pid)
{
	char path[64];
	int r = waitpid(pid, NULL, WNOHANG);

	if (r == pid)
		return true;
	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (r < 0 && errno == ECHILD && access(path, F_OK))
		return true;
	return false;
}

/* One host, killed at @at: 0, or how many workers outlived it. */
static unsigned int host_kill_one(enum host_at at, uint64_t *seed)
{
	unsigned int left = 0, i, n;
	int pfd[2], kid;
	uint64_t end;
	pid_t host;
	char c = 0;

	memset(hsh, 0, sizeof(*hsh));
	if (pipe(pfd))
		return 1000;
	host = fork();
	if (host < 0)
		return 1000;
	if (host == 0) {
		close(pfd[0]);
		host_main(at, pfd[1]);
	}
	close(pfd[1]);
	if (read(pfd[0], &c, 1) != 1) {
		printf("# %s: the host ended early\n", host_at_name[at]);
		left = 1000;
	}
	n = (unsigned int)atomic_load(&hsh->npids);
	switch (at) {
	case H_FULL:
		kill(host, SIGSTOP);
		sleep_us(20000 + rnd(seed) % 20000);
		break;
	case H_STOP_ONE:
		kill(hsh->pids[rnd(seed) % n], SIGSTOP);
		sleep_us(rnd(seed) % 2000);
		break;
	case H_STOP_ALL:
		for (i = 0; i < n; i++)
			kill(hsh->pids[i], SIGSTOP);
		sleep_us(rnd(seed) % 2000);
		break;
	case H_DESTROY:
		sleep_us(rnd(seed) % 3000);
		break;
	case H_RESPAWN:
		flag_set(hold_path, true);
		kill(hsh->pids[0], SIGKILL);
		sleep_us(rnd(seed) % 20000);
		break;
	default:
		sleep_us(rnd(seed) % 20000);
		break;
	}
	kill(host, SIGKILL);
	waitpid(host, NULL, 0);
	close(pfd[0]);
	if (at == H_RESPAWN)
		flag_set(hold_path, false);
	if (at == H_STOP_ONE || at == H_STOP_ALL) {
		sleep_us(10000);
		for (i = 0; i < n; i++)
			kill(hsh->pids[i], SIGCONT);
	}
	/* Every worker must exit; a forked child of the host lives on. */
	end = now_ms() + HANG_MS;
	for (i = 0; i < n && !left;) {
		if (pid_gone(hsh->pids[i])) {
			i++;
			continue;
		}
		if (now_ms() > end) {
			printf("# %s: worker %d of %u outlived its host\n",
			       host_at_name[at], hsh->pids[i], n);
			left += n - i;
			break;
		}
		usleep(1000);
	}
	kid = atomic_load(&hsh->kid);
	if (kid > 0) {
		if (pid_gone(kid)) {
			printf("# the forked child is gone too early\n");
			left++;
		}
		kill(kid, SIGKILL);
		waitpid(kid, NULL, 0);
	}
	/* Every other descendant ends by itself too. */
	end = now_ms() + HANG_MS;
	while (!left) {
		pid_t r = waitpid(-1, NULL, WNOHANG);

		if (r > 0)
			continue;
		if (r < 0 || now_ms() > end)
			break;
		usleep(1000);
	}
	/* Nothing else may be left. */
	left += kill_children(true);
	return left;
}

static void host_kills(enum host_at at, unsigned int iters)
{
	uint64_t seed = now_ms() ^ at;
	unsigned int i, left = 0;

	for (i = 0; i < iters && !left; i++)
		left += host_kill_one(at, &seed);
	printf("# %s: %u hosts killed, %u processes left\n", host_at_name[at], i, left);
	CHECK_EQ(left, 0);
}

static void host_killed_results_piling_up(void) { host_kills(H_FULL, scaled(30, 3)); }
static void host_killed_worker_stopped(void) { host_kills(H_STOP_ONE, scaled(30, 3)); }
static void host_killed_workers_all_stopped(void) { host_kills(H_STOP_ALL, scaled(30, 3)); }
static void host_killed_in_destroy_12_workers(void) { host_kills(H_DESTROY, scaled(20, 2)); }
static void host_killed_three_pools(void) { host_kills(H_THREE, scaled(20, 2)); }
static void host_killed_forked_child_pausing(void) { host_kills(H_FORK_PAUSE, scaled(20, 2)); }
static void host_killed_forked_child_execd(void) { host_kills(H_FORK_EXEC, scaled(20, 2)); }
static void host_killed_respawn_under_way(void) { host_kills(H_RESPAWN, scaled(20, 2)); }

/* ================================================ a parked waiter of a death */

/* A T_GATE whose ready end tells the pid of the task's process. */
struct pgate {
	int ready[2], gate[2];
	struct { int32_t ready, gate; uint32_t n; } arg;
};

static int pgate_open(struct pgate *g)
{
	int one = 1;

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, g->ready) || pipe(g->gate) ||
	    setsockopt(g->ready[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)))
		return -1;
	g->arg.ready = g->ready[1];
	g->arg.gate = g->gate[0];
	g->arg.n = 0;
	return 0;
}

static void pgate_close(struct pgate *g)
{
	close(g->ready[0]);
	close(g->ready[1]);
	close(g->gate[0]);
	close(g->gate[1]);
}

/* The pid of the next gated task to start, or -1 (a hang detector). */
static int pgate_started(struct pgate *g)
{
	union { char b[CMSG_SPACE(sizeof(struct ucred))]; struct cmsghdr h; } u;
	char c;
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.b, .msg_controllen = sizeof(u.b) };
	struct timeval tv = { HANG_MS / 1000, 0 };
	struct cmsghdr *cm;
	struct ucred cr;

	setsockopt(g->ready[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (recvmsg(g->ready[0], &m, 0) != 1 || c != 'r')
		return -1;
	cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_type != SCM_CREDENTIALS)
		return -1;
	memcpy(&cr, CMSG_DATA(cm), sizeof(cr));
	return cr.pid;
}

struct waiter {
	pthread_t th;
	struct knitk_pool *pool;
	struct knitk_call *calls[4];
	unsigned int nr;
	enum { W_ONE, W_ANY, W_ALL } how;
	_Atomic int ret;
	_Atomic int done;
	/* The pool's respawns when the wait returned. */
	_Atomic uint64_t respawns;
};

static void *waiter_fn(void *arg)
{
	struct waiter *w = arg;
	struct knitk_pool_stats st;
	int ret;

	if (w->how == W_ONE)
		ret = knitk_call_wait(w->calls[0], after_ms(HANG_MS));
	else if (w->how == W_ANY)
		ret = knitk_pool_wait_any(w->pool, w->calls, w->nr, after_ms(HANG_MS));
	else
		ret = knitk_pool_wait_all(w->pool, w->calls, w->nr, after_ms(HANG_MS));
	pool_stats(w->pool, &st);
	atomic_store(&w->respawns, st.respawns);
	atomic_store(&w->ret, ret);
	atomic_store(&w->done, 1);
	return NULL;
}

static void waiter_start(struct waiter *w, struct knitk_pool *pool, int how,
			 struct knitk_call *a, struct knitk_call *b)
{
	memset(w, 0, sizeof(*w));
	w->pool = pool;
	w->how = how;
	w->calls[w->nr++] = a;
	if (b)
		w->calls[w->nr++] = b;
	pthread_create(&w->th, NULL, waiter_fn, w);
}

/* Children of ours that are no pool worker: the respawn wrappers. */
static int wrapper_pid(struct knitk_pool *pool, unsigned int workers)
{
	DIR *d = opendir("/proc");
	char stat[512];
	int found = -1;
	pid_t p;

	if (!d)
		return -1;
	while (found < 0 && (p = proc_next_child(d, stat, sizeof(stat))))
		if (proc_stat_state(stat) != 'Z' && worker_of_pid(pool, workers, p) < 0)
			found = p;
	closedir(d);
	return found;
}

/*
 * Reap the wrapper's "sleep" children that a killed wrapper left to us,
 * the subreaper; any other child left is the pool's.
 */
static void reap_sleepers(void)
{
	DIR *d = opendir("/proc");
	char stat[512];
	pid_t p;

	if (!d)
		return;
	while ((p = proc_next_child(d, stat, sizeof(stat))))
		if (strstr(stat, "(sleep)"))
			waitpid(p, NULL, 0);
	closedir(d);
}

enum { R_HELD, R_FAILS, R_WRAPPER_KILLED };
static const char *const respawn_name[] = { "held", "fails", "killed while held" };

/*
 * Two process workers with KNITK_POOL_RESPAWN behind the wrapper; a gated
 * call (blocks until released) on each worker; with private lanes two
 * more calls pinned behind the victim's.  Waiters: the victim's call
 * alone, wait_any of (victim's, the other's), wait_all of (the victim's
 * queued call, the victim's call).  The victim is SIGKILLed with its
 * respawn @mode: every waiter of the victim's calls returns -EOWNERDEAD
 * attributed to it, before any respawn; the other worker keeps serving.
 */
static void death_wait(unsigned int dispatch, int mode)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		.flags = KNITK_POOL_RESPAWN, .knot_flags = KNITK_KNOT_FUTEX,
		.dispatch = dispatch, .prefix_argv = wrapper,
	};
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER };
	struct knitk_call *g[2], *q[2] = { NULL, NULL }, *c;
	struct waiter wt[4];
	struct knitk_pool *pool;
	struct pgate gt;
	unsigned int nw = 0, i;
	int pid[2], victim, other, ret, wp;
	uint64_t x = 11, y;
	size_t len;

	flag_set(hold_path, false);
	flag_set(fail_path, false);
	REQUIRE(pgate_open(&gt) == 0);
	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	for (i = 0; i < 2; i++) {
		pin.worker = i;
		REQUIRE(knitk_pool_submit(pool, T_GATE, &gt.arg, sizeof(gt.arg),
					  dispatch == KNITK_POOL_DISPATCH_PRIVATE ? &pin : NULL,
					  &g[i]) == 0);
		pid[i] = pgate_started(&gt);
		REQUIRE(pid[i] > 0);
	}
	/* g[v] runs on the victim: the first gated call's worker. */
	victim = worker_of_pid(pool, 2, pid[0]);
	other = worker_of_pid(pool, 2, pid[1]);
	REQUIRE(victim >= 0 && other >= 0 && victim != other);
	if (dispatch == KNITK_POOL_DISPATCH_PRIVATE) {
		pin.worker = (unsigned int)victim;
		for (i = 0; i < 2; i++)
			REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, &pin, &q[i]) == 0);
	}
	waiter_start(&wt[nw++], pool, W_ONE, g[0], NULL);
	waiter_start(&wt[nw++], pool, W_ANY, g[0], g[1]);
	if (q[0]) {
		waiter_start(&wt[nw++], pool, W_ALL, q[0], g[0]);
		waiter_start(&wt[nw++], pool, W_ONE, q[1], NULL);
	}
	/* Let them park. */
	sleep_us(20000);
	flag_set(hold_path, true);
	if (mode == R_FAILS)
		flag_set(fail_path, true);
	REQUIRE(kill(pid[0], SIGKILL) == 0);
	for (i = 0; i < nw; i++) {
		pthread_join(wt[i].th, NULL);
		if (i == 0 && mode == R_FAILS)
			flag_set(hold_path, false);
	}
	CHECK_EQ(atomic_load(&wt[0].ret), -EOWNERDEAD);
	CHECK_EQ(knitk_call_status(g[0]), -EOWNERDEAD);
	CHECK_EQ(knitk_call_worker(g[0]), victim);
	CHECK_EQ(atomic_load(&wt[1].ret), 0);
	if (mode != R_FAILS)
		for (i = 0; i < nw; i++)
			CHECK_EQ(atomic_load(&wt[i].respawns), 0);
	if (q[0]) {
		CHECK_EQ(atomic_load(&wt[2].ret), 0);
		CHECK_EQ(atomic_load(&wt[3].ret), -EOWNERDEAD);
		for (i = 0; i < 2; i++) {
			CHECK_EQ(knitk_call_status(q[i]), -EOWNERDEAD);
			CHECK_EQ(knitk_call_worker(q[i]), victim);
		}
	}
	CHECK_EQ(knitk_call_status(g[1]), -EINPROGRESS);
	if (mode == R_WRAPPER_KILLED) {
		uint64_t end = now_ms() + HANG_MS;

		while ((wp = wrapper_pid(pool, 2)) <= 0 && now_ms() < end)
			usleep(1000);
		CHECK(wp > 0);
		if (wp > 0)
			kill(wp, SIGKILL);
		flag_set(hold_path, false);
	}
	/* The other worker is busy with its gated call: let it go. */
	CHECK_EQ(write(gt.gate[1], "g", 1), 1);
	ret = knitk_call_wait(g[1], after_ms(HANG_MS));
	CHECK_EQ(ret, 0);
	/* Unpinned calls run on the live worker, respawn or not. */
	for (i = 0; i < 20; i++) {
		y = 0;
		x = i;
		ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c);
		CHECK_EQ(ret, 0);
		if (ret)
			break;
		ret = knitk_call_wait(c, after_ms(HANG_MS));
		if (ret == -EINPROGRESS)
			printf("# hang: an unpinned call during the respawn (%s)\n",
			       respawn_name[mode]);
		CHECK_EQ(ret, 0);
		CHECK(mix_result_ok(c, x));
		knitk_call_release(c);
	}
	flag_set(hold_path, false);
	if (mode == R_HELD) {
		CHECK(deaths_reach(pool, 1, 1));
		if (dispatch == KNITK_POOL_DISPATCH_PRIVATE) {
			pin.worker = (unsigned int)victim;
			CHECK_EQ(mix_calls_good(pool, 10, &pin, 100, 1), 10);
		}
	} else {
		bool alive = true;
		uint64_t end = now_ms() + HANG_MS;

		CHECK(deaths_reach(pool, 1, 0));
		while (worker_pid(pool, (unsigned int)victim, &alive) <= 0 && alive &&
		       now_ms() < end)
			usleep(1000);
		printf("# respawn %s: victim alive %d\n", respawn_name[mode], alive);
		if (dispatch == KNITK_POOL_DISPATCH_PRIVATE) {
			pin.worker = (unsigned int)victim;
			x = 5;
			ret = knitk_pool_call(pool, T_MIX, &x, 8, &pin, &y, 8, &len);
			printf("# a call pinned to the victim: %d\n", ret);
			if (mode == R_FAILS)
				CHECK_EQ(ret, -EPIPE);
			else
				CHECK(ret == 0 || ret == -EPIPE);
		}
	}
	print_stats(pool);
	for (i = 0; i < 2; i++) {
		knitk_call_release(g[i]);
		if (q[i])
			knitk_call_release(q[i]);
	}
	knitk_pool_destroy(pool);
	pgate_close(&gt);
	flag_set(fail_path, false);
	reap_sleepers();
	CHECK_EQ(count_children(), 0);
}

static void death_wait_respawn_held_private(void) { death_wait(KNITK_POOL_DISPATCH_PRIVATE, R_HELD); }
static void death_wait_respawn_held_steal(void) { death_wait(KNITK_POOL_DISPATCH_STEAL, R_HELD); }
static void death_wait_respawn_fails_private(void) { death_wait(KNITK_POOL_DISPATCH_PRIVATE, R_FAILS); }
static void death_wait_respawn_fails_steal(void) { death_wait(KNITK_POOL_DISPATCH_STEAL, R_FAILS); }
static void death_wait_wrapper_killed_private(void) { death_wait(KNITK_POOL_DISPATCH_PRIVATE, R_WRAPPER_KILLED); }
static void death_wait_wrapper_killed_steal(void) { death_wait(KNITK_POOL_DISPATCH_STEAL, R_WRAPPER_KILLED); }

/*
 * A stealing pool's only worker dies and cannot be replaced: the calls it
 * held end -EOWNERDEAD, the calls no worker took -EPIPE, every parked
 * waiter returns, later submits are -EPIPE.
 */
static void last_worker_gone(unsigned int flags)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 1,
		.flags = flags, .knot_flags = KNITK_KNOT_FUTEX,
		.dispatch = KNITK_POOL_DISPATCH_STEAL, .prefix_argv = wrapper,
	};
	struct knitk_call *c[9], *d;
	struct waiter wt[9];
	struct knitk_pool *pool;
	struct pgate gt;
	unsigned int i, dead = 0, epipe = 0;
	int pid, st;
	uint64_t x = 1;

	flag_set(hold_path, false);
	flag_set(fail_path, false);
	REQUIRE(pgate_open(&gt) == 0);
	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_GATE, &gt.arg, sizeof(gt.arg), NULL, &c[0]) == 0);
	pid = pgate_started(&gt);
	REQUIRE(pid > 0);
	for (i = 1; i < 9; i++)
		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i]) == 0);
	for (i = 0; i < 9; i++)
		waiter_start(&wt[i], pool, W_ONE, c[i], NULL);
	sleep_us(20000);
	flag_set(fail_path, true);
	REQUIRE(kill(pid, SIGKILL) == 0);
	for (i = 0; i < 9; i++) {
		pthread_join(wt[i].th, NULL);
		st = knitk_call_status(c[i]);
		if (st == -EOWNERDEAD && knitk_call_worker(c[i]) == 0)
			dead++;
		else if (st == -EPIPE && knitk_call_worker(c[i]) == -ENOENT)
			epipe++;
		else
			printf("# call %u: status %d worker %d\n", i, st,
			       knitk_call_worker(c[i]));
		CHECK_EQ(atomic_load(&wt[i].ret), st);
	}
	printf("# %u -EOWNERDEAD, %u -EPIPE\n", dead, epipe);
	print_stats(pool);
	{
		bool alive = true;
		int p = worker_pid(pool, 0, &alive);

		printf("# worker 0: pid %d alive %d\n", p, alive);
	}
	CHECK_EQ(dead + epipe, 9);
	CHECK_EQ(knitk_call_status(c[0]), -EOWNERDEAD);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &d), -EPIPE);
	for (i = 0; i < 9; i++)
		knitk_call_release(c[i]);
	knitk_pool_destroy(pool);
	pgate_close(&gt);
	flag_set(fail_path, false);
	CHECK_EQ(count_children(), 0);
}

static void last_worker_gone_respawn_fails_steal(void) { last_worker_gone(KNITK_POOL_RESPAWN); }
static void last_worker_gone_no_respawn_steal(void) { last_worker_gone(0); }

/* ====================================================== fresh stealing pools */

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
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	if (argc > 1)
		knob = strtoul(argv[1], NULL, 0);
	if (argc > 2)
		setenv("TAP_ONLY", argv[2], 1);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		return 1;
	snprintf(hold_path, sizeof(hold_path), "/tmp/adv8-%d-hold", (int)getpid());
	snprintf(fail_path, sizeof(fail_path), "/tmp/adv8-%d-fail", (int)getpid());
	setenv("ADV8_HOLD", hold_path, 1);
	setenv("ADV8_FAIL", fail_path, 1);
	hsh = mmap(NULL, sizeof(*hsh), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (hsh == MAP_FAILED || runtab_open())
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
	TEST(death_wait_respawn_held_private);
	TEST(death_wait_respawn_held_steal);
	TEST(death_wait_respawn_fails_private);
	TEST(death_wait_respawn_fails_steal);
	TEST(death_wait_wrapper_killed_private);
	TEST(death_wait_wrapper_killed_steal);
	TEST(last_worker_gone_no_respawn_steal);
	TEST(last_worker_gone_respawn_fails_steal);
	TEST(host_killed_results_piling_up);
	TEST(host_killed_worker_stopped);
	TEST(host_killed_workers_all_stopped);
	TEST(host_killed_in_destroy_12_workers);
	TEST(host_killed_three_pools);
	TEST(host_killed_forked_child_pausing);
	TEST(host_killed_forked_child_execd);
	TEST(host_killed_respawn_under_way);
	TEST(fresh_steal_pools_burst);
	unlink(hold_path);
	unlink(fail_path);
	return tap_exit();
}
