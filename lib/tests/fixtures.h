/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Fixtures shared by the host tests of lib/tests that test one promise
 * each (lib/tests/README.md): pools and knots made to one recipe, the
 * counts of what a process holds, and the set-up of the worker-death
 * tests.  Functions are static inline and variables marked unused, so a
 * test includes it whole and uses what it needs.  The part for the death
 * tests builds on pool_kill.h and is there only where that came first.
 */
#ifndef KNITK_FIXTURES_H
#define KNITK_FIXTURES_H

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "proc_count.h"
#include "tap.h"

/* The arena of the pools the tests make. */
#define ARENA	(64 * 1024)

/*
 * The start of a pool test's main, after knitk_worker_main: argv[2] runs
 * that case alone (TAP_ONLY), and with @subreaper the test becomes the
 * subreaper of its workers' children.  0, or 1 when that failed.
 */
static inline int tests_init(int argc, char **argv, bool subreaper)
{
	if (argc > 2)
		setenv("TAP_ONLY", argv[2], 1);
	if (subreaper && prctl(PR_SET_CHILD_SUBREAPER, 1))
		return 1;
	return 0;
}

/*
 * Event-mode pools (event_fd_test, event_reap_test, steal_*_test).
 */

/*
 * A futex pool of @workers workers of @kind: with the test arena, or, in
 * a test that defines FIXTURES_ONE_SUBMITTER first, with one submitter's
 * lanes and the default arena.
 */
#ifdef FIXTURES_ONE_SUBMITTER
static inline int new_pool(unsigned int kind, unsigned int dispatch,
		           unsigned int workers, unsigned int flags,
		           struct knitk_pool **pool)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = kind, .nr_workers = workers,
		.flags = flags, .knot_flags = KNITK_KNOT_FUTEX,
		.dispatch = dispatch, .nr_submitters = 1,
	};

	return knitk_pool_create(&o, &test_tasks, pool);
}
#else
static inline int new_pool(unsigned int kind, unsigned int dispatch,
		           unsigned int workers, unsigned int flags,
		           struct knitk_pool **pool)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind,
				     .nr_workers = workers, .flags = flags,
				     .knot_flags = KNITK_KNOT_FUTEX,
				     .arena_bytes = ARENA,
				     .dispatch = dispatch };

	return knitk_pool_create(&o, &test_tasks, pool);
}
#endif

/* The four shapes of a pool a case may run in: worker kind by dispatch. */
struct pool_shape {
	unsigned int kind, dispatch;
	const char *name;
};

__attribute__((unused)) static const struct pool_shape pool_shapes[] = {
	{ KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, "threads, private" },
	{ KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, "threads, stealing" },
	{ KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE, "processes, private" },
	{ KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL, "processes, stealing" },
};
#define NR_POOL_SHAPES	(sizeof(pool_shapes) / sizeof(pool_shapes[0]))

/* A case @name_all that runs @name_in(shape) in every shape, in order. */
#define EACH_POOL_SHAPE(name)						\
static void name##_all(void)						\
{									\
	unsigned int i_;						\
									\
	for (i_ = 0; i_ < NR_POOL_SHAPES; i_++)				\
		name##_in(&pool_shapes[i_]);				\
}

/*
 * knitk_pool_shutdown(@pool, @mode) in a thread of its own, its return in
 * @ret: a test acts, or waits, while it runs.
 */
struct shutter {
	struct knitk_pool *pool;
	unsigned int mode;
	int ret;
};

static inline void *shutter_main(void *arg)
{
	struct shutter *s = arg;

	s->ret = knitk_pool_shutdown(s->pool, s->mode);
	return NULL;
}

/* Reap until 0 (one pass), releasing or keeping into @keep. */
static inline int reap_all(struct knitk_pool *pool, struct knitk_call **keep,
		           unsigned int cap, unsigned int *kept)
{
	struct knitk_call *out[16];
	int n, i, total = 0;

	while ((n = knitk_pool_reap(pool, out, 16)) > 0) {
		for (i = 0; i < n; i++) {
			if (keep && *kept < cap)
				keep[(*kept)++] = out[i];
			else
				knitk_call_release(out[i]);
		}
		total += n;
	}
	return n < 0 ? n : total;
}

static inline int eventfd_value(int fd, uint64_t *v)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	*v = 0;
	if (poll(&p, 1, 0) != 1)
		return 0;
	return read(fd, v, sizeof(*v)) == sizeof(*v) ? 1 : -1;
}

/*
 * What a pool or knot holds, and small knots (refused_calls_test,
 * endpoint_boundaries_test, pool_leaks_test, stops_and_signals_test).
 */

static inline void *noop_main(void *arg)
{
	return arg;
}

/*
 * Threads of the process, after one thread was made and joined (a
 * sanitizer's runtime starts a thread of its own at the first).
 */
static inline int threads(void)
{
	pthread_t t;

	if (!pthread_create(&t, NULL, noop_main, NULL))
		pthread_join(t, NULL);
	return count_threads();
}

/* A knot of one submitter and @workers private workers, the host joined. */
static inline struct knitk_geometry small_geom(unsigned int workers)
{
	struct knitk_geometry g = {
		.nr_workers = workers, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64, .arena_bytes = 8192,
	};

	return g;
}

static inline int opts_pool(struct knitk_pool_opts *o, struct knitk_pool **pool)
{
	o->size = sizeof(*o);
	o->knot_flags = KNITK_KNOT_FUTEX;
	return knitk_pool_create(o, &test_tasks, pool);
}

/*
 * One-submitter pools, one-mailbox knots (with the knot's layout and the
 * mailbox's index), fd and thread counts (lane_test, lane_batch_test,
 * lane_fields_test, claimant_hand_off_test and the pool tests beside
 * them).
 */

struct fx {
	struct knitk_endpoint *k;
	struct knitk_producer *p;
	struct knitk_consumer *c;
	struct knitk_layout l;
	int mailbox;
};

static inline int fx_init(struct fx *f, uint32_t inline_bytes, uint64_t arena)
{
	struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = inline_bytes, .arena_bytes = arena,
	};

	memset(f, 0, sizeof(*f));
	if (knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &f->k))
		return -1;
	knitk_endpoint_layout(f->k, &f->l, NULL);
	f->mailbox = knitk_endpoint_request_mailbox(f->k, 0, 0);
	if (f->mailbox < 0 ||
	    knitk_producer_create(f->k, (unsigned int)f->mailbox, &f->p) ||
	    knitk_consumer_create(f->k, (unsigned int)f->mailbox, &f->c))
		return -1;
	return 0;
}

static inline void fx_fini(struct fx *f)
{
	knitk_consumer_destroy(f->c);
	knitk_producer_destroy(f->p);
	knitk_endpoint_destroy(f->k);
}

/* Open fds of this process, the scan's own not counted (proc_count.h). */
static inline int open_fds(void)
{
	return count_fds(false);
}


/*
 * Threads listed in /proc/self/task now (proc_count.h).  The first count
 * of a test is threads()'s, after a thread was made and joined: a
 * sanitizer's runtime starts a thread of its own at the first one, which
 * would otherwise show up between two counts of the test's first case.
 */
static inline int nr_threads(void)
{
	static bool counted;

	if (!counted) {
		counted = true;
		return threads();
	}
	return count_tasks_once();
}

#ifdef KNITK_POOL_KILL_H
/*
 * The worker-death tests (steal_kill_storm_test, death_wait_respawn_test,
 * host_killed_test).
 */

#define HANG_MS		20000

__attribute__((unused)) static unsigned long knob = 1000000;

/* @plain at the plain run's knob, scaled down with it, at least @min. */
static inline unsigned int scaled(unsigned int plain, unsigned int min)
{
	unsigned long v = (unsigned long)plain * knob / 1000000;

	return v < min ? min : (unsigned int)v;
}

static inline uint64_t rnd(uint64_t *s)
{
	*s = mix64(*s + 0x9e3779b97f4a7c15ULL);
	return *s;
}

static inline void sleep_us(uint64_t us)
{
	struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static inline uint64_t now_ms(void)
{
	return after_ms(0) / 1000000;
}

static inline void print_stats(struct knitk_pool *pool)
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
static inline bool deaths_reach(struct knitk_pool *pool, uint64_t deaths,
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

static inline int worker_pid(struct knitk_pool *pool, unsigned int w, bool *alive)
{
	struct knitk_worker_info wi = { .size = sizeof(wi) };

	if (knitk_pool_worker_info(pool, w, &wi))
		return -1;
	if (alive)
		*alive = wi.alive;
	return wi.pid;
}

/*
 * The respawn wrapper (prefix_argv): holds the worker while the hold
 * file exists, exits before the worker runs while the fail file exists.
 */
__attribute__((unused)) static char hold_path[64], fail_path[64];

__attribute__((unused)) static char *const wrapper[] = {
	"/bin/sh", "-c",
	"while [ -e \"$KNITK_DEATHS_HOLD\" ]; do sleep 0.005; done; "
	"[ -e \"$KNITK_DEATHS_FAIL\" ] && exit 7; exec \"$0\" \"$@\"",
	NULL,
};

static inline void flag_set(const char *path, bool on)
{
	if (on)
		close(open(path, O_CREAT | O_WRONLY, 0600));
	else
		unlink(path);
}

struct host_sh {
	_Atomic int npids;
	int pids[64];
	_Atomic int kid;
};

__attribute__((unused)) static struct host_sh *hsh;

/*
 * The set-up of a death test, in main after knitk_worker_main: argv[1]
 * scales the counts (knob), argv[2] runs that case alone, the test is the
 * subreaper of its workers, the wrapper's flag files are named in its
 * environment, and the shared page of the host tests and the run table
 * are made.  0, or 1 when something could not be set up.
 */
static inline int deaths_init(int argc, char **argv)
{
	if (argc > 1)
		knob = strtoul(argv[1], NULL, 0);
	if (tests_init(argc, argv, true))
		return 1;
	snprintf(hold_path, sizeof(hold_path), "/tmp/knitk-deaths-%d-hold", (int)getpid());
	snprintf(fail_path, sizeof(fail_path), "/tmp/knitk-deaths-%d-fail", (int)getpid());
	setenv("KNITK_DEATHS_HOLD", hold_path, 1);
	setenv("KNITK_DEATHS_FAIL", fail_path, 1);
	hsh = mmap(NULL, sizeof(*hsh), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (hsh == MAP_FAILED || runtab_open())
		return 1;
	return 0;
}

/* The flag files of the wrapper, gone at the end of a death test. */
static inline void deaths_fini(void)
{
	unlink(hold_path);
	unlink(fail_path);
}
#endif /* KNITK_POOL_KILL_H */

#endif /* KNITK_FIXTURES_H */
