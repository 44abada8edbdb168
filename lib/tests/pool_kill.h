/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Worker deaths under load, shared by the host's pool_kill_test (futex
 * backend) and the guest's pool_test (module): the kill storm, the torn
 * acknowledgement, and the counts of what a pool must not leak (fds,
 * pidfds, children).  Include after pool_tasks.h.  The functions print
 * "# " comments and return what they measured; the callers assert.
 */
#ifndef KNITK_POOL_KILL_H
#define KNITK_POOL_KILL_H

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "knitk_pool.h"
#include "proc_count.h"

/*
 * Our child processes, running or zombie (a /proc scan of PPid); with
 * @print, each as a "# child" comment (pid, name, state), to tell what a
 * test found left behind.
 */
static inline int scan_children(bool print)
{
	char path[300], line[256], name[256], state[256];
	struct dirent *d;
	DIR *dir = opendir("/proc");
	int n = 0;

	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		FILE *f;

		if (d->d_name[0] < '1' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/status", d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		name[0] = state[0] = '\0';
		while (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "Name:", 5))
				snprintf(name, sizeof(name), "%s", line + 5);
			else if (!strncmp(line, "State:", 6))
				snprintf(state, sizeof(state), "%s", line + 6);
			else if (!strncmp(line, "PPid:", 5)) {
				if (atoi(line + 5) != getpid())
					break;
				n++;
				if (print)
					printf("# child %s:%s%s", d->d_name,
					       strtok(name, "\n") ? name : "?",
					       state);
				break;
			}
		}
		fclose(f);
	}
	closedir(dir);
	return n;
}

static inline int count_children(void)
{
	return scan_children(false);
}

/* 1 if @pid is a child of ours not yet reaped (zombie or running). */
static inline int is_our_child(pid_t pid)
{
	siginfo_t si = { 0 };

	return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0;
}

/* Poll the stats (yielding) until @deaths deaths and @respawns respawns. */
static inline void wait_deaths(struct knitk_pool *pool, uint64_t deaths,
			       uint64_t respawns)
{
	struct knitk_pool_stats st = { .size = sizeof(st) };

	for (;;) {
		knitk_pool_stats(pool, &st);
		if (st.deaths >= deaths && st.respawns >= respawns)
			return;
		sched_yield();
	}
}

/* ------------------------------------------------------- kill storm */

static inline uint64_t storm_rand(uint64_t *seed)
{
	*seed = mix64(*seed + 0x9e3779b97f4a7c15ULL);
	return *seed;
}

#define STORM_WINDOW	8
#define STORM_MAX_KILLS	10000

struct storm {
	/* In: the pool (process workers), threads, kills. */
	struct knitk_pool *pool;
	unsigned int workers, threads, kills;
	/* Out: calls right, -EOWNERDEAD of a killed worker, anything else. */
	_Atomic unsigned long ok, dead, bad, epipe;
	/* Of the bad: answered with another call's result. */
	_Atomic unsigned long wrong;
	/* Call ids (T_RUN) of this storm: [id0, next). */
	uint64_t id0;
	_Atomic uint64_t next;
	/* The killer's record: kill k (1-based) hit worker target[k]. */
	_Atomic unsigned int started, handled;
	unsigned char target[STORM_MAX_KILLS + 1];
	_Atomic int stop;
};

/*
 * One call: T_RUN of a fresh id, 16 to 3000 bytes (inline and arena),
 * taking no time (85%), 50 us (10%) or 0.5 to 3 ms (5%).
 */
struct storm_call {
	struct knitk_call *c;
	uint64_t id;
	unsigned int handled0;	/* kills handled before it was submitted */
	unsigned char buf[3000];
};

/* -EOWNERDEAD is right only if a kill since its submission hit its worker. */
static inline bool storm_death_ok(struct storm *s, struct storm_call *sc)
{
	unsigned int k, end = atomic_load(&s->started);
	int w = knitk_call_worker(sc->c);

	for (k = sc->handled0 + 1; k <= end; k++)
		if (s->target[k] == w)
			return true;
	return false;
}

/* The result of a call that is not its own: whose id it carries, or 0. */
static inline uint64_t storm_foreign(struct storm_call *sc)
{
	const void *d;
	uint64_t r[2];
	size_t len;

	if (knitk_call_status(sc->c) <= 0 ||
	    knitk_call_result(sc->c, &d, &len) || len != sizeof(r))
		return 0;
	memcpy(r, d, sizeof(r));
	return r[0] != sc->id ? r[0] : 0;
}

static inline uint32_t storm_task_us(uint64_t r)
{
	unsigned int p = (unsigned int)(r % 100);

	if (p < 85)
		return 0;
	if (p < 95)
		return 50;
	return 500 + (uint32_t)(r >> 8) % 2500;
}

static inline void *storm_submitter(void *arg)
{
	struct storm *s = arg;
	struct storm_call *sc = calloc(STORM_WINDOW, sizeof(*sc));
	struct knitk_call *c[STORM_WINDOW];
	uint64_t seed = (uintptr_t)sc | 1, f;
	unsigned int i, n;
	int ret;

	if (!sc) {
		atomic_fetch_add(&s->bad, 1);
		return NULL;
	}
	while (!atomic_load(&s->stop)) {
		for (n = 0; n < STORM_WINDOW; n++) {
			struct storm_call *p = &sc[n];
			uint64_t r = storm_rand(&seed);
			uint32_t len = sizeof(struct run_arg) +
				       (uint32_t)(r >> 16) % (n % 2 ? 2984 : 48);

			p->id = atomic_fetch_add(&s->next, 1);
			if (p->id >= RUNTAB_IDS) {
				atomic_fetch_add(&s->bad, 1);
				break;
			}
			run_arg_fill(p->buf, p->id, storm_task_us(r), len);
			p->handled0 = atomic_load(&s->handled);
			ret = knitk_pool_submit(s->pool, T_RUN, p->buf, len,
						NULL, &p->c);
			if (ret) {
				printf("# submit: %d\n", ret);
				atomic_fetch_add(ret == -EPIPE ? &s->epipe : &s->bad, 1);
				break;
			}
			c[n] = p->c;
		}
		if (n)
			knitk_pool_wait_all(s->pool, c, n, KNITK_WAIT_FOREVER);
		for (i = 0; i < n; i++) {
			int st = knitk_call_status(sc[i].c);

			if (run_result_ok(sc[i].c, sc[i].id)) {
				atomic_fetch_add(&s->ok, 1);
			} else if (st == -EOWNERDEAD && storm_death_ok(s, &sc[i])) {
				atomic_fetch_add(&s->dead, 1);
			} else {
				f = storm_foreign(&sc[i]);
				printf("# call %llu on worker %d: status %d%s%llu\n",
				       (unsigned long long)sc[i].id,
				       knitk_call_worker(sc[i].c), st,
				       f ? ", the result of call " : "",
				       (unsigned long long)f);
				if (f)
					atomic_fetch_add(&s->wrong, 1);
				atomic_fetch_add(&s->bad, 1);
			}
			knitk_call_release(sc[i].c);
		}
		if (n < STORM_WINDOW)
			break;
	}
	free(sc);
	return NULL;
}

/*
 * Run @s->threads submitters while SIGKILLing a random live worker
 * @s->kills times, each after some calls succeeded and after the previous
 * death was handled (so every kill hits a worker the pool believes alive,
 * and is one death); half the kills wait for the worker to hold a call
 * first, then 0 to 400 us more.  Then stops and joins the submitters.
 */
static inline void storm_run(struct storm *s)
{
	pthread_t th[16];
	uint64_t seed = 0x5eed;
	unsigned int i, t, spin;

	if (s->kills > STORM_MAX_KILLS)
		s->kills = STORM_MAX_KILLS;
	if (s->threads > 16)
		s->threads = 16;
	for (t = 0; t < s->threads; t++)
		pthread_create(&th[t], NULL, storm_submitter, s);
	for (i = 1; i <= s->kills && !atomic_load(&s->bad) && !atomic_load(&s->epipe); i++) {
		struct knitk_worker_info wi = { .size = sizeof(wi) };
		uint64_t r = storm_rand(&seed);
		struct timespec ts = { 0, (long)(r >> 32) % 400000 };
		unsigned int w;

		wait_ok_count(&s->ok, &s->bad, atomic_load(&s->ok) + 20);
		/* A live worker with its process: it may be respawning. */
		do {
			w = (unsigned int)(storm_rand(&seed) % s->workers);
			knitk_pool_worker_info(s->pool, w, &wi);
		} while ((!wi.alive || wi.pid <= 0) && (sched_yield(), 1));
		for (spin = 0; r % 2 && spin < 10000 && !wi.inflight; spin++) {
			sched_yield();
			knitk_pool_worker_info(s->pool, w, &wi);
		}
		if (r % 4 >= 2)
			nanosleep(&ts, NULL);
		if (wi.pid <= 0) {
			i--;
			continue;
		}
		s->target[i] = (unsigned char)w;
		atomic_store(&s->started, i);
		kill(wi.pid, SIGKILL);
		wait_deaths(s->pool, i, 0);
		atomic_store(&s->handled, i);
	}
	s->kills = i - 1;
	wait_ok_count(&s->ok, &s->bad, atomic_load(&s->ok) + 20);
	atomic_store(&s->stop, 1);
	for (t = 0; t < s->threads; t++)
		pthread_join(th[t], NULL);
	printf("# %u kills: %lu calls ok, %lu -EOWNERDEAD, %lu bad (%lu with another call's result), %lu -EPIPE\n",
	       s->kills, atomic_load(&s->ok), atomic_load(&s->dead),
	       atomic_load(&s->bad), atomic_load(&s->wrong),
	       atomic_load(&s->epipe));
}

/* What a kill storm left behind, for the caller to assert on. */
struct storm_report {
	int created;			/* 0: knitk_pool_create's result */
	unsigned int kills;		/* done (asked for, unless a call failed) */
	unsigned long ok, dead, bad, wrong, epipe;
	unsigned long calls;		/* ids handed out */
	unsigned long twice;		/* of them, run more than once */
	unsigned long served;		/* of 50 calls pinned to each worker, after */
	struct knitk_pool_stats st;	/* at the end, before destroy */
	uint32_t death_seq[2];		/* the knot's: at the start, at the end */
	int fds[2], children[2];	/* before the pool, after its destroy */
};

/* The next storm's first call id. */
static uint64_t storm_next_id = 1;

/*
 * A pool of @workers process workers with KNITK_POOL_RESPAWN and
 * @dispatch on backend @knot_flags, @threads submitting threads
 * and @kills SIGKILLs (storm_run); then calls pinned to every worker (a
 * private pool), destroy, the run table, and the fds and children left.
 */
static inline void storm_pool(unsigned int workers, unsigned int threads,
			      unsigned int kills, unsigned int knot_flags,
			      unsigned int dispatch, struct storm_report *r)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o),
		.kind = KNITK_WORKER_PROCESSES, .nr_workers = workers,
		.flags = KNITK_POOL_RESPAWN, .knot_flags = knot_flags,
		.dispatch = dispatch,
	};
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER };
	struct storm *s = calloc(1, sizeof(*s));
	struct knitk_endpoint *ep;
	uint64_t id;

	memset(r, 0, sizeof(*r));
	r->created = -ENOMEM;
	if (!s)
		return;
	r->created = runtab_open();
	if (r->created) {
		free(s);
		return;
	}
	r->fds[0] = count_fds(false);
	r->children[0] = count_children();
	r->created = knitk_pool_create(&o, &test_tasks, &s->pool);
	if (r->created) {
		free(s);
		return;
	}
	s->workers = workers;
	s->threads = threads;
	s->kills = kills;
	s->id0 = storm_next_id;
	s->next = storm_next_id;
	knitk_pool_endpoint(s->pool, &ep);
	knitk_endpoint_deaths(ep, &r->death_seq[0], NULL);
	storm_run(s);
	r->kills = s->kills;
	r->ok = atomic_load(&s->ok);
	r->dead = atomic_load(&s->dead);
	r->bad = atomic_load(&s->bad);
	r->wrong = atomic_load(&s->wrong);
	r->epipe = atomic_load(&s->epipe);
	/*
	 * A waiter learns of a death before the respawn that follows it:
	 * the last respawn may still be under way.
	 */
	wait_deaths(s->pool, s->kills, s->kills);
	if (dispatch == KNITK_POOL_DISPATCH_PRIVATE) {
		for (pin.worker = 0; pin.worker < workers; pin.worker++)
			r->served += mix_calls_good(s->pool, 50, &pin,
						    pin.worker * 1000, 1);
	} else {
		r->served = mix_calls_good(s->pool, 50 * workers, NULL, 1, 1);
	}
	r->st.size = sizeof(r->st);
	knitk_pool_stats(s->pool, &r->st);
	knitk_endpoint_deaths(ep, &r->death_seq[1], NULL);
	knitk_pool_destroy(s->pool);
	/* Every worker is gone: the run table is final. */
	storm_next_id = atomic_load(&s->next);
	if (storm_next_id > RUNTAB_IDS)
		storm_next_id = RUNTAB_IDS;
	r->calls = storm_next_id - s->id0;
	for (id = s->id0; id < storm_next_id; id++)
		if (atomic_load_explicit(&runtab[id], memory_order_relaxed) > 1) {
			if (r->twice++ < 10)
				printf("# call %llu ran %u times\n",
				       (unsigned long long)id,
				       atomic_load(&runtab[id]));
		}
	printf("# %lu calls, %lu ran more than once\n", r->calls, r->twice);
	r->fds[1] = count_fds(false);
	r->children[1] = count_children();
	free(s);
}

/*
 * Pidfds of this process before a pool of two process workers with
 * respawn (@knot_flags), with it, after @n deaths, after its destroy.
 */
static inline int pidfds_over_deaths(unsigned int n, unsigned int knot_flags,
				     int counts[4])
{
	struct knitk_pool_opts o = {
		.size = sizeof(o),
		.kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		.flags = KNITK_POOL_RESPAWN, .knot_flags = knot_flags,
	};
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	unsigned int i;
	int ret;

	for (i = 0; i < 4; i++)
		counts[i] = -1;
	counts[0] = count_fds(true);
	ret = knitk_pool_create(&o, &test_tasks, &pool);
	if (ret)
		return ret;
	counts[1] = count_fds(true);
	for (i = 1; i <= n; i++) {
		knitk_pool_worker_info(pool, i % 2, &wi);
		kill(wi.pid, SIGKILL);
		wait_deaths(pool, i, i);
	}
	counts[2] = count_fds(true);
	ret = mix_calls_good(pool, 100, NULL, 1, 1) == 100 ? 0 : -EIO;
	knitk_pool_destroy(pool);
	counts[3] = count_fds(true);
	printf("# pidfds: %d before the pool, %d with it, %d after %u deaths, %d after destroy\n",
	       counts[0], counts[1], counts[2], n, counts[3]);
	return ret;
}

/* ----------------------------------------------------------- torn ack */

/*
 * The single pending request lane of @pool's mailbox (0, 0) carries an
 * arena payload: do the first of the consumer's two stores of
 * knitk_lane_ack (free the payload's arena slot), not the second (the ack
 * word), as a worker killed between them would.  Returns the arena slot,
 * or a negative errno if there is no such lane.
 */
static inline int torn_ack_free(struct knitk_pool *pool)
{
	const struct knitk_lane_header *h;
	struct knitk_sector *sec;
	struct knitk_layout lay;
	struct knitk_endpoint *knot;
	uint64_t pending;
	void *base;
	int m;

	if (knitk_pool_endpoint(pool, &knot) || knitk_endpoint_base(knot, &base) ||
	    knitk_endpoint_layout(knot, &lay, NULL))
		return -EINVAL;
	m = knitk_endpoint_request_mailbox(knot, 0, 0);
	if (m < 0 || knitk_mailbox_pending(knot, (unsigned int)m, &pending) != 1)
		return -ENOENT;
	sec = (struct knitk_sector *)((char *)base + lay.mailbox_off +
				      (uint64_t)m * lay.mailbox_stride);
	h = (const void *)((char *)sec + lay.lane_off +
			   (uint64_t)__builtin_ctzll(pending) * lay.lane_stride);
	if (h->kind != KNITK_PAYLOAD_ARENA || h->arena_slot >= KNITK_ARENA_SLOTS)
		return -EBADMSG;
	/* The consumer's release store of its free word, as knitk_lane_ack does. */
	atomic_fetch_xor_explicit((_Atomic uint64_t *)(void *)&sec->arena_free,
				  1ULL << h->arena_slot, memory_order_release);
	return (int)h->arena_slot;
}

/*
 * One worker, one submitter, a 4 KiB arena, respawn: a call holding
 * the whole arena is pending when its worker "dies between the two
 * stores" of its acknowledgement (torn_ack_free, then SIGKILL).  After the
 * respawn a call as large as the arena must be placed and answered (before
 * the fix the reset freed the slot a second time, so it looked allocated
 * forever and that submit blocked for good).  Returns 0 or the number of
 * the failed step.
 */
static inline int torn_ack_run(unsigned int knot_flags)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o),
		.kind = KNITK_WORKER_PROCESSES, .nr_workers = 1,
		.nr_submitters = 1, .arena_bytes = 4096,
		.flags = KNITK_POOL_RESPAWN, .knot_flags = knot_flags,
	};
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_layout lay;
	struct knitk_endpoint *knot;
	struct knitk_pool *pool;
	struct knitk_call *c;
	unsigned char *buf;
	const void *d;
	uint32_t ms = 600000;
	size_t len, i;
	int ret, step = 0;

	if (knitk_pool_create(&o, &test_tasks, &pool))
		return 1;
	knitk_pool_endpoint(pool, &knot);
	knitk_endpoint_layout(knot, &lay, NULL);
	buf = malloc(lay.arena_size);
	if (!buf) {
		step = 2;
		goto out;
	}
	memset(buf, 0, lay.arena_size);
	memcpy(buf, &ms, sizeof(ms));
	if (knitk_pool_submit(pool, T_HOLD, buf, lay.arena_size, NULL, &c)) {
		step = 3;
		goto out;
	}
	ret = torn_ack_free(pool);
	printf("# torn ack of arena slot %d\n", ret);
	knitk_pool_worker_info(pool, 0, &wi);
	if (ret < 0 || wi.pid <= 0) {
		step = 4;
		knitk_call_release(c);
		goto out;
	}
	kill(wi.pid, SIGKILL);
	ret = knitk_call_wait(c, KNITK_WAIT_FOREVER);
	knitk_call_release(c);
	if (ret != -EOWNERDEAD) {
		step = 5;
		goto out;
	}
	wait_deaths(pool, 1, 1);
	for (i = 0; i < lay.arena_size; i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	/* Blocked here for good before the fix (no arena space, ever). */
	ret = knitk_pool_submit(pool, T_ECHO, buf, lay.arena_size, NULL, &c);
	if (ret) {
		step = 6;
		goto out;
	}
	ret = knitk_call_wait(c, KNITK_WAIT_FOREVER);
	if (ret || knitk_call_result(c, &d, &len) || len != lay.arena_size ||
	    memcmp(d, buf, len))
		step = 7;
	knitk_call_release(c);
out:
	free(buf);
	knitk_pool_destroy(pool);
	return step;
}

#endif /* KNITK_POOL_KILL_H */
