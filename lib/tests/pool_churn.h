/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Churn of small stealing pools (docs/protocol.md T12-T14), shared by
 * lib/tests/pool_steal_churn_test.c on the host and selftests/knitk/
 * pool_steal_test.c in the guest: one pool's life, 1 to 3 thread or
 * process workers, every legal region size, with and without
 * KNITK_POOL_RESPAWN, fed by 2 to 4 submitting threads in bursts and
 * pauses, so the workers keep going idle, parking, being picked, rung and
 * handed regions.  Every call is T_RUN with an id of its own: its result
 * must be its own and the run table must show it ran once.
 *
 * Every wait has a deadline of CHURN_WAIT_MS, far beyond any call here:
 * it is the hang detector, not a timing check.  A call still in flight at
 * it is a lost claim or a lost wake: churn_dump prints the pool's state
 * (stats, workers with their doorbell words and what the kernel says they
 * do, the wake policy's words, each request mailbox's pending lanes and
 * every steal line's want, resv and ack words, the host's wake counters,
 * and with KNITK_CHURN_TRACE the library's trace, lib/trace.h), then
 * rings every worker once to tell a lost wake from a lost claim, and the
 * pool is left as it is.
 *
 * Needs pool_tasks.h (T_RUN, the run table, opened by the caller).
 */
#ifndef KNITK_POOL_CHURN_H
#define KNITK_POOL_CHURN_H

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#ifdef KNITK_CHURN_TRACE
#include "../trace.h"
#endif

/* xorshift64*: the churn's choices, from a seed a failure prints. */
static inline uint64_t churn_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

#define CHURN_WAIT_MS		10000
#define CHURN_MAX_THREADS	4
#define CHURN_MAX_BURST		24

/* Call ids of the run table, never reused within the run. */
static _Atomic uint64_t next_id = 1;
/* A hang was seen: every thread stops, the case dumps once. */
static _Atomic int hung;

struct churn_pool {
	struct knitk_pool *pool;
	unsigned int kind, workers, g, flags, threads;
	unsigned int calls;		/* per submitting thread */
	unsigned int max_us;		/* longest task */
	uint32_t max_len;		/* largest argument */
	bool pauses;			/* pauses long enough to park */
};

struct churn_thread {
	struct churn_pool *cp;
	uint64_t seed;
	unsigned long done, bad, twice, failed;
	/* The call found in flight at its deadline. */
	struct knitk_call *stuck;
	uint64_t stuck_id;
};

/* One line of /proc/@pid[/task/@tid]/stat's state and its wchan. */
static void churn_proc(const char *dir)
{
	char path[96], buf[512], wchan[64] = "?", *p;
	FILE *f;

	snprintf(path, sizeof(path), "%s/stat", dir);
	f = fopen(path, "r");
	if (!f)
		return;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	snprintf(path, sizeof(path), "%s/wchan", dir);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(wchan, sizeof(wchan), f))
			wchan[0] = 0;
		fclose(f);
	}
	/* "pid (comm) S ...": up to the state. */
	p = strrchr(buf, ')');
	if (p && p[1] && p[2])
		p[3] = 0;
	printf("#    %s: %s wchan %s\n", dir, buf, wchan);
}

/* The state of @pool, for a hang report. */
static void churn_dump(struct churn_pool *cp, struct knitk_call *stuck,
		       uint64_t id)
{
	struct knitk_pool *pool = cp->pool;
	struct knitk_pool_stats st;
	struct knitk_endpoint *ep;
	struct knitk_geometry geo;
	struct knitk_layout l;
	unsigned int w, s;
	void *base;
	char dir[64];

	printf("# hang: call id %llu status %d; pool of %u %s workers, g %u,"
	       " %u threads, respawn %d\n", (unsigned long long)id,
	       knitk_call_status(stuck), cp->workers,
	       cp->kind == KNITK_WORKER_THREADS ? "thread" : "process", cp->g,
	       cp->threads, !!(cp->flags & KNITK_POOL_RESPAWN));
	pool_stats(pool, &st);
	printf("#  stats: submitted %llu completed %llu timedout %llu stale %llu"
	       " deaths %llu claims %llu\n", (unsigned long long)st.submitted,
	       (unsigned long long)st.completed, (unsigned long long)st.timedout,
	       (unsigned long long)st.stale, (unsigned long long)st.deaths,
	       (unsigned long long)st.claims);
	for (w = 0; w < cp->workers; w++) {
		struct knitk_worker_info wi = { .size = sizeof(wi) };

		if (knitk_pool_worker_info(pool, w, &wi))
			continue;
		printf("#  worker %u: pid %d alive %u inflight %u calls %llu",
		       w, wi.pid, wi.alive, wi.inflight,
		       (unsigned long long)wi.calls);
		if (wi.db_valid)
			printf(" waits %llu wakes %llu spurious %llu",
			       (unsigned long long)wi.db.waits,
			       (unsigned long long)wi.db.wakes,
			       (unsigned long long)wi.db.spurious);
		printf("\n");
		if (cp->kind == KNITK_WORKER_PROCESSES && wi.pid > 0) {
			snprintf(dir, sizeof(dir), "/proc/%d", wi.pid);
			churn_proc(dir);
		}
	}
	if (cp->kind == KNITK_WORKER_THREADS) {
		/* Thread workers: every thread of ours. */
		DIR *d = opendir("/proc/self/task");
		struct dirent *de;

		while (d && (de = readdir(d)))
			if (de->d_name[0] != '.') {
				snprintf(dir, sizeof(dir), "/proc/self/task/%.16s",
					 de->d_name);
				churn_proc(dir);
			}
		if (d)
			closedir(d);
	}
	if (knitk_pool_endpoint(pool, &ep) || knitk_endpoint_layout(ep, &l, &geo) ||
	    knitk_endpoint_base(ep, &base))
		return;
	{
		/* The wake policy's words (lib/pool/steal.c): mailbox 0's ack line. */
		const _Atomic uint64_t *pw = (const _Atomic uint64_t *)
			((char *)base + l.mailbox_off + offsetof(struct knitk_sector, ack));
		const struct knitk_control *ctl = base;

		struct knitk_wake_stats ws = { .size = sizeof(ws) };

		printf("#  idle %#llx searching %#llx ringing %#llx window %llu live %#llx\n",
		       (unsigned long long)atomic_load(&pw[0]),
		       (unsigned long long)atomic_load(&pw[1]),
		       (unsigned long long)atomic_load(&pw[2]),
		       (unsigned long long)atomic_load(&pw[3]),
		       (unsigned long long)ctl->live);
		/* Each worker's doorbell word: seq, and its sleep's nonce or 0. */
		printf("#  doorbells:");
		for (w = 0; w < geo.nr_workers; w++) {
			const volatile struct knitk_doorbell *db = (const void *)
				((char *)base + l.doorbell_off +
				 (uint64_t)w * l.doorbell_stride);

			printf(" w%u seq %u sleeping %u;", w, db->seq, db->sleeping);
		}
		printf("\n");
		/* The host's endpoint: the rings of the submitters and waiters. */
		if (!knitk_endpoint_wake_stats(ep, &ws))
			printf("#  host rings: sent %llu suppressed awake %llu idle %llu;"
			       " waits %llu wakes %llu spurious %llu kicks %llu\n",
			       (unsigned long long)ws.sent,
			       (unsigned long long)ws.suppressed_awake,
			       (unsigned long long)ws.suppressed_idle,
			       (unsigned long long)ws.waits,
			       (unsigned long long)ws.wakes,
			       (unsigned long long)ws.spurious,
			       (unsigned long long)ws.kicks);
	}
	for (s = 0; s < geo.nr_submitters; s++) {
		int m = knitk_endpoint_request_mailbox(ep, s, 0);
		uint64_t pending = 0;

		if (m < 0 || knitk_mailbox_pending(ep, (unsigned int)m, &pending) < 0)
			continue;
		printf("#  request mailbox %d: pending %#llx", m,
		       (unsigned long long)pending);
		for (w = 0; w < geo.nr_workers; w++) {
			const volatile struct knitk_steal_line *sl = (const void *)
				((char *)base + l.steal_off +
				 (uint64_t)(s * geo.nr_workers + w) * l.steal_stride);

			printf("; w%u want %#llx resv %#llx ack %#llx user %llu", w,
			       (unsigned long long)sl->want,
			       (unsigned long long)sl->resv,
			       (unsigned long long)sl->ack,
			       (unsigned long long)sl->user);
		}
		printf("\n");
	}
#ifdef KNITK_CHURN_TRACE
	printf("#  trace, the last events:\n");
	knitk__trace_dump(stdout, 600);
#endif
	fflush(stdout);
	/* A ring of every worker: does the call complete then (a lost wake)? */
	knitk_doorbell_ring(ep, geo.nr_workers == 64 ? ~0ULL :
				(1ULL << geo.nr_workers) - 1);
	printf("#  after a ring of every worker: %d\n",
	       knitk_call_wait(stuck, after_ms(2000)));
	fflush(stdout);
}

/* One argument: mostly inline, sometimes in the arena; mostly quick. */
static uint32_t churn_arg(struct churn_thread *t, unsigned char *buf,
			  uint64_t id)
{
	uint64_t r = churn_rand(&t->seed);
	uint32_t len = sizeof(struct run_arg) + (uint32_t)(r % 24);
	uint32_t us = 0;

	if (t->cp->max_len > len && r % 8 == 0)
		len += (uint32_t)((r >> 8) % (t->cp->max_len - len));
	if (t->cp->max_us && (r >> 32) % 4 == 0)
		us = (uint32_t)((r >> 40) % t->cp->max_us);
	run_arg_fill(buf, id, us, len);
	return len;
}

/* Check finished call @c of @id, then release it. */
static void churn_check(struct churn_thread *t, struct knitk_call *c, uint64_t id)
{
	if (!run_result_ok(c, id)) {
		if (t->bad++ < 4)
			printf("# call %llu: status %d, not its own result\n",
			       (unsigned long long)id, knitk_call_status(c));
	} else if (atomic_load_explicit(&runtab[id], memory_order_relaxed) != 1) {
		if (t->twice++ < 4)
			printf("# call %llu ran %u times\n", (unsigned long long)id,
			       atomic_load(&runtab[id]));
	} else {
		t->done++;
	}
	knitk_call_release(c);
}

static void *churn_main(void *arg)
{
	struct churn_thread *t = arg;
	static _Thread_local unsigned char buf[4096];
	struct knitk_call *calls[CHURN_MAX_BURST];
	uint64_t ids[CHURN_MAX_BURST];
	unsigned int sent = 0;

	while (sent < t->cp->calls && !atomic_load(&hung)) {
		uint64_t r = churn_rand(&t->seed);
		unsigned int b = 1 + (unsigned int)(r % CHURN_MAX_BURST), i, n = 0;
		int ret = 0;

		if (b > t->cp->calls - sent)
			b = t->cp->calls - sent;
		for (i = 0; i < b; i++) {
			uint32_t len;

			ids[n] = atomic_fetch_add(&next_id, 1);
			if (ids[n] >= RUNTAB_IDS) {
				t->failed++;
				break;
			}
			len = churn_arg(t, buf, ids[n]);
			ret = knitk_pool_submit(t->cp->pool, T_RUN, buf, len, NULL,
						&calls[n]);
			if (ret) {
				if (t->failed++ < 4)
					printf("# knitk_pool_submit: %d\n", ret);
				break;
			}
			n++;
		}
		sent += b;
		/* Wait one by one, or for the whole burst at once. */
		if ((r >> 16) % 2 && n) {
			ret = knitk_pool_wait_all(t->cp->pool, calls, n,
						  after_ms(CHURN_WAIT_MS));
			for (i = 0; ret == -EINPROGRESS && i < n; i++)
				if (knitk_call_status(calls[i]) == -EINPROGRESS)
					break;
			if (ret == -EINPROGRESS && i == n)
				ret = 0;
		} else {
			for (i = 0; i < n; i++) {
				ret = knitk_call_wait(calls[i], after_ms(CHURN_WAIT_MS));
				if (ret == -EINPROGRESS)
					break;
			}
		}
		if (ret == -EINPROGRESS) {
			/* The first to see a hang reports it; the rest leak. */
			if (!atomic_exchange(&hung, 1)) {
				t->stuck = calls[i];
				t->stuck_id = ids[i];
			}
			return NULL;
		}
		for (i = 0; i < n; i++)
			churn_check(t, calls[i], ids[i]);
		/* Pauses: none, a yield, or long enough for the workers to park. */
		switch ((r >> 24) % 4) {
		case 0:
			break;
		case 1:
			sched_yield();
			break;
		default:
			if (t->cp->pauses)
				usleep((useconds_t)((r >> 32) % 1500));
			break;
		}
	}
	return NULL;
}

/* Briefly stop and continue a process worker now and then (T14). */
struct stopper {
	struct churn_pool *cp;
	_Atomic int stop;
	uint64_t seed;
};

static void *stopper_main(void *arg)
{
	struct stopper *sp = arg;

	while (!atomic_load(&sp->stop)) {
		uint64_t r = churn_rand(&sp->seed);
		struct knitk_worker_info wi = { .size = sizeof(wi) };

		usleep((useconds_t)(200 + r % 2000));
		if (knitk_pool_worker_info(sp->cp->pool,
					   (unsigned int)(r >> 32) % sp->cp->workers,
					   &wi) || wi.pid <= 0)
			continue;
		/* The pid is the pool's child until the pool reaps it. */
		if (kill(wi.pid, SIGSTOP))
			continue;
		usleep((useconds_t)(50 + (r >> 16) % 500));
		kill(wi.pid, SIGCONT);
	}
	return NULL;
}

enum churn_mode { CHURN_PLAIN, CHURN_HOG, CHURN_STOP };

/* What the pools of a churn did. */
struct churn_tally {
	unsigned int pools;
	unsigned long calls;		/* checked: its own result, ran once */
	unsigned long bad, twice, failed, lost;
	bool create_failed;
};

/*
 * One pool's life, with @knot_flags (0: the default backend), counted in
 * @t; false when it hung (reported: the pool is left as it is, it may not
 * stop) or failed.
 */
static bool churn_one(uint64_t *seed, enum churn_mode mode,
		      unsigned int knot_flags, struct churn_tally *t)
{
	static const unsigned int gs[] = { 0, 1, 2, 4, 8, 16, 32 };
	struct churn_thread th[CHURN_MAX_THREADS] = { 0 };
	pthread_t tid[CHURN_MAX_THREADS], stid;
	struct stopper sp = { 0 };
	struct churn_pool cp = { 0 };
	struct knitk_pool_opts o = { .size = sizeof(o) };
	uint64_t r = churn_rand(seed);
	unsigned int i, started = 0;
	bool ok = true;
	int ret;

	/* Mostly 3: the more idle workers, the more picks and hand-offs. */
	cp.workers = r % 10 < 2 ? 1 : r % 10 < 5 ? 2 : 3;
	cp.kind = mode == CHURN_STOP || (r >> 8) % 4 ? KNITK_WORKER_PROCESSES :
						       KNITK_WORKER_THREADS;
	do {
		cp.g = gs[churn_rand(seed) % (sizeof(gs) / sizeof(gs[0]))];
	} while (knitk_steal_region_lanes(cp.workers, cp.g) < 0);
	if (cp.kind == KNITK_WORKER_PROCESSES && (r >> 12) % 2)
		cp.flags = KNITK_POOL_RESPAWN;
	cp.threads = 2 + (unsigned int)((r >> 16) % 3);
	cp.calls = 40 + (unsigned int)((r >> 20) % 120);
	cp.max_us = (r >> 28) % 3 ? 0 : 300;
	/* A small arena: publishes meet backpressure (-ENOSPC). */
	cp.max_len = (r >> 32) % 3 ? 64 : 1500;
	cp.pauses = (r >> 36) % 4 != 0;
	o.kind = cp.kind;
	o.nr_workers = cp.workers;
	o.dispatch = KNITK_POOL_DISPATCH_STEAL;
	o.steal_region = cp.g;
	o.flags = cp.flags;
	o.nr_submitters = 1 + (unsigned int)((r >> 40) % 4);
	/* Spin 1: park at once, the policy's busiest path. */
	o.spin = (r >> 44) % 2 ? 1 : 0;
	o.arena_bytes = (r >> 48) % 2 ? 4096 : 0;
	o.knot_flags = knot_flags;
	ret = knitk_pool_create(&o, &test_tasks, &cp.pool);
	if (ret) {
		printf("# knitk_pool_create: %d\n", ret);
		t->create_failed = true;
		return false;
	}
	t->pools++;
	if (mode == CHURN_STOP) {
		sp.cp = &cp;
		sp.seed = churn_rand(seed) | 1;
		if (pthread_create(&stid, NULL, stopper_main, &sp))
			sp.cp = NULL;
	}
	for (i = 0; i < cp.threads; i++) {
		th[i].cp = &cp;
		th[i].seed = churn_rand(seed) | 1;
		if (pthread_create(&tid[i], NULL, churn_main, &th[i]))
			break;
		started++;
	}
	for (i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	if (sp.cp) {
		atomic_store(&sp.stop, 1);
		pthread_join(stid, NULL);
	}
	for (i = 0; i < started; i++) {
		if (th[i].stuck)
			churn_dump(&cp, th[i].stuck, th[i].stuck_id);
		t->calls += th[i].done;
		t->bad += th[i].bad;
		t->twice += th[i].twice;
		t->failed += th[i].failed;
		if (th[i].bad || th[i].twice || th[i].failed)
			ok = false;
	}
	if (started < cp.threads) {
		t->failed++;
		ok = false;
	}
	if (atomic_load(&hung))
		return false;
	for (i = 0; i < started; i++)
		t->lost += cp.calls - th[i].done - th[i].bad - th[i].twice;
	knitk_pool_destroy(cp.pool);
	return ok;
}

#endif /* KNITK_POOL_CHURN_H */
