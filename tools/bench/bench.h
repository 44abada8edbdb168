/* SPDX-License-Identifier: GPL-2.0 */
/*
 * knitk-bench: shared declarations of the case families (ping-pong,
 * throughput, pool, idle) and of the driver in tools/knitk-bench.c.
 *
 * Every case measures one operation (a round trip, a message, a call)
 * over several repetitions and records ns per operation for each; the
 * driver turns those into median/best and ratios against a baseline
 * measured in the same run.  Absolute numbers mean little on a shared or
 * emulated machine; ratios within one run are what to read.
 */
#ifndef KNITK_BENCH_H
#define KNITK_BENCH_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_MAX_REPS		32

struct bench_ctx {
	int quick;
	int reps;			/* repetitions per call of a case's run */
	int round, rounds;		/* this call's round of the interleaving */
	unsigned int workers;		/* pool cases: worker count */
	unsigned int knot_flags;	/* KNITK_KNOT_FUTEX/KMOD or 0 */
	int verbose;
};

/* Idle-cost figures of a pool with one loaded worker. */
struct bench_idle {
	unsigned int workers;
	unsigned int idle_workers;
	uint64_t idle_wakes;		/* wakes+spurious of the idle workers */
	uint64_t loaded_wakes;		/* wakes of the loaded worker */
	uint64_t idle_waits;		/* sleeps of the idle workers */
	uint64_t spurious;		/* spurious wakes of every worker */
	uint64_t calls;			/* calls made before the idle interval */
	double settle_ns;		/* from the last call to the interval */
	double cpu_ns;			/* process CPU time while idle */
	double wall_ns;			/* the idle interval */
};

/* The pool's own counts over every repetition (tools/bench/steal.c). */
struct bench_pool_counts {
	uint64_t calls;			/* calls completed */
	uint64_t claims;		/* region claims (stealing pools) */
	int wakes_valid;		/* every worker's wake counters read */
	uint64_t wakes;			/* wakes delivered to the workers */
	uint64_t spurious;		/* spurious wakes of the workers */
};

struct bench_result {
	int nreps;
	double ns[BENCH_MAX_REPS];	/* ns per operation, per repetition */
	double cpu[BENCH_MAX_REPS];	/* CPU ns (user + system, every side) per op */
	uint64_t ops;			/* operations per repetition */
	int has_msgs;
	uint64_t msgs_expected;		/* over all repetitions */
	uint64_t msgs_moved;
	int has_idle;
	struct bench_idle idle;
	int has_counts;
	struct bench_pool_counts counts;
	/* Latency cases: every operation's time over the run (malloc). */
	int has_lat;
	double *lat_us;
	size_t nlat;
	int failed;
	char why[160];
};

struct bench_case;
typedef int (*bench_fn)(const struct bench_case *c,
			const struct bench_ctx *ctx, struct bench_result *r);

/**
 * struct bench_case - one measured configuration
 * @name: "<group>/<variant>", what --only matches
 * @group: rows that share @baseline
 * @unit: "ns/op" (latency: lower is better), "ops/s" (rate) or "B/s"
 *	(bandwidth: @arg bytes per operation)
 * @baseline: name of the row ratios are taken against (NULL: none)
 * @knitk: 1 for rows that run knitk (their message count is checked)
 * @run: the measurement
 * @arg: case-specific parameter (mode, payload size...)
 * @n, @n_quick: operations per repetition
 */
struct bench_case {
	const char *name;
	const char *group;
	const char *unit;
	const char *baseline;
	int knitk;
	bench_fn run;
	long arg;
	uint64_t n, n_quick;
};

/* Case families (one file each under tools/bench/). */
extern const struct bench_case bench_pingpong_cases[];
extern const struct bench_case bench_throughput_cases[];
extern const struct bench_case bench_pool_cases[];
extern const struct bench_case bench_payload_cases[];
extern const struct bench_case bench_steal_cases[];
extern const struct bench_case bench_death_cases[];
extern const struct bench_case bench_notice_cases[];

/*
 * death.c, also for notice.c: the pidfd floor (arg BENCH_DEATH_PIDFD) or
 * a pool's process worker killed under a waiting thread, with respawn
 * (BENCH_DEATH_WORKER); every kill's latency kept in @r for p50 and p99.
 */
#define BENCH_DEATH_PIDFD	0
#define BENCH_DEATH_WORKER	17
int bench_death_run(const struct bench_case *c, const struct bench_ctx *ctx,
		    struct bench_result *r);
/*
 * The kill loop of the death cases: a warm-up of two kills, then
 * ctx->reps reps of bench_ops() kills, each made by @once, which gives the
 * time until the survivor heard of the death (ns) and whether it did; CPU
 * per kill counts *@pool's workers too (when @pool is given).
 */
struct knitk_pool;
typedef int (*bench_kill_fn)(void *arg, uint64_t *ns, int *seen);
int bench_kill_reps(const struct bench_case *c, const struct bench_ctx *ctx,
		    struct bench_result *r, bench_kill_fn once, void *arg,
		    struct knitk_pool *const *pool);

/* The pool task table: process workers re-run this program. */
#define BENCH_TASK_INC		0	/* u64 x -> x + 1 */
#define BENCH_TASK_ECHO		1	/* the payload, back */
#define BENCH_TASK_SPIN		2	/* burn u64 ns of CPU */
#define BENCH_TASK_PARK		3	/* i32 fd: write the pid there, block */
#define BENCH_TASK_ECHO_IN_ARG	4	/* the payload, back in its own bytes */
struct knitk_task_table;
extern const struct knitk_task_table bench_tasks;

/* Helpers (tools/bench/common.c). */
uint64_t bench_now_ns(void);
void bench_fail(struct bench_result *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* write/read all of @len bytes (EINTR retried); -EPIPE at end of file */
int bench_write_all(int fd, const void *buf, size_t len);
int bench_read_all(int fd, void *buf, size_t len);
uint64_t bench_ops(const struct bench_case *c, const struct bench_ctx *ctx);
/* The @q quantile (0..1) of @n values (sorted in place): nearest rank. */
double bench_quantile(double *v, size_t n, double q);
/*
 * CPU time (user + system) of this process and of its children that were
 * waited for, in ns; with @pool, plus that of its live process workers.
 */
struct knitk_pool;
double bench_cpu_ns(struct knitk_pool *pool);

static inline void bench_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/*
 * One round of a bounded poll: a pause, and every 16 rounds a yield, so a
 * poller that shares its CPU with the side it waits for (two busy threads
 * on a loaded machine) lets that side run; the pool's workers poll so too.
 */
static inline void bench_poll(unsigned int round)
{
	bench_relax();
	if ((round & 15) == 15)
		sched_yield();
}

/* Busy-wait @ns nanoseconds of wall time (a CPU-bound task's cost). */
static inline void bench_spin_ns(uint64_t ns)
{
	uint64_t end = bench_now_ns() + ns;

	while (bench_now_ns() < end)
		bench_relax();
}

/*
 * The pair runner: a host side and a peer side (a thread, or a process
 * forked before any thread exists) over state in a MAP_SHARED mapping.
 * The clock starts once the peer is ready and stops when both sides are
 * done (the later of the two ends).
 */
struct bench_pair_ops {
	size_t state_size;
	/* In the parent, before the peer starts; @state is zeroed. */
	int (*setup)(void *state, const struct bench_ctx *ctx, long arg);
	/* In the peer, before it reports ready. */
	int (*peer_init)(void *state, int process);
	int (*host)(void *state, uint64_t n, uint64_t *moved);
	int (*peer)(void *state, uint64_t n, uint64_t *moved);
	/* In the peer, after its run. */
	void (*peer_fini)(void *state);
	/* In the parent, after the peer is gone. */
	void (*teardown)(void *state);
};

/* Mode of a pair case (bench_case.arg low bits). */
#define BENCH_THREAD	0
#define BENCH_PROCESS	1

/*
 * Run warm-up plus ctx->reps repetitions of @ops with @n operations each;
 * messages moved by both sides are summed into @r.  @msgs_per_op: messages
 * each operation should move (2 for a round trip, 1 one-way).
 */
int bench_pair_run(const struct bench_pair_ops *ops, const struct bench_case *c,
		   const struct bench_ctx *ctx, int process, long arg,
		   unsigned int msgs_per_op, struct bench_result *r);

/*
 * @npairs (up to BENCH_MAX_PAIRS) pairs at once, each a process with a
 * process peer, bench_ops() / @npairs operations apiece: the clock runs
 * from their common start to the last one's end, the CPU time is theirs
 * together, and the rate is that of all of them.
 */
#define BENCH_MAX_PAIRS	16
int bench_pairs_run(const struct bench_pair_ops *ops, const struct bench_case *c,
		    const struct bench_ctx *ctx, unsigned int npairs, long arg,
		    unsigned int msgs_per_op, struct bench_result *r);

/*
 * A knot of one worker for the pair cases: the host endpoint (producer of
 * request mailbox 0, consumer of the return mailbox) opened in the parent,
 * the worker endpoint (the opposite pair) opened by the peer with its own
 * attach; a process peer closes its inherited fd so that its endpoint is
 * its own.
 */
struct knitk_endpoint;
struct knitk_producer;
struct knitk_consumer;

struct bench_kpair {
	struct knitk_endpoint *host, *peer;
	struct knitk_producer *hp, *pp;
	struct knitk_consumer *hc, *pc;
};

int bench_kpair_host_open(struct bench_kpair *kp, unsigned int knot_flags,
			  unsigned int inline_bytes, uint64_t arena_bytes);
void bench_kpair_host_close(struct bench_kpair *kp);
int bench_kpair_peer_open(struct bench_kpair *kp, int process);
void bench_kpair_peer_close(struct bench_kpair *kp);

#endif /* KNITK_BENCH_H */
