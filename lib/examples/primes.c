// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * primes: a CPU-bound task pool.  Counts the primes below N by splitting
 * the range into chunks, one call per chunk, spread over the workers; checks
 * the total against a serial count and prints the lane statistics: per
 * worker calls, doorbell waits and wakes (the module's STATS with
 * /dev/knitk, else the library's counters), and the host's rings sent and
 * suppressed.  Then it shows the idle-lane rule: calls pinned to one worker
 * leave every other doorbell untouched.  It fails if a count is off, an
 * idle worker was woken, or any doorbell saw a spurious wake: each has one
 * consumer, so a wake always finds its work or is a kick or a death.
 *
 *   primes [-t|-p] [-w workers] [N]   -t: thread workers, -p: process
 *                                     workers (default: one run of each)
 *
 * This is also the program `make demo` runs in the VM (as knitk-demo).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"

struct range {
	uint64_t lo, hi;
};

static int is_prime(uint64_t n)
{
	uint64_t d;

	if (n < 2)
		return 0;
	for (d = 2; d * d <= n; d++)
		if (n % d == 0)
			return 0;
	return 1;
}

static uint64_t count_range(uint64_t lo, uint64_t hi)
{
	uint64_t n, c = 0;

	for (n = lo; n < hi; n++)
		c += (uint64_t)is_prime(n);
	return c;
}

/* Task 0: count the primes of a struct range; the result is a u64. */
static int task_count(const void *in, size_t len, struct knitk_reply *out,
		      void *ctx)
{
	struct range r;
	uint64_t c;

	(void)ctx;
	if (len != sizeof(r))
		return -EINVAL;
	memcpy(&r, in, sizeof(r));
	c = count_range(r.lo, r.hi);
	return knitk_reply_set(out, &c, sizeof(c));
}

/* Task 1: nothing; for the idle-lane part. */
static int task_nop(const void *in, size_t len, struct knitk_reply *out,
		    void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	(void)ctx;
	return 0;
}

static const knitk_task_fn fns[] = { task_count, task_nop };
static const struct knitk_task_table tasks = { .tasks = fns, .nr_tasks = 2 };

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Prints the lanes' counters; returns the spurious wakes among them. */
static uint64_t print_lanes(struct knitk_pool *pool, unsigned int workers)
{
	uint64_t spurious = 0;
	struct knitk_doorbell_stats hdb;
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_wake_stats hs = { .size = sizeof(hs) };
	struct knitk_endpoint *knot;
	unsigned int w;

	knitk_pool_endpoint(pool, &knot);
	printf("  %-8s %8s %8s %8s %10s %10s %9s\n", "doorbell", "calls", "waits",
	       "wakes", "supp-idle", "supp-awake", "spurious");
	for (w = 0; w < workers; w++) {
		if (knitk_pool_worker_info(pool, w, &wi))
			continue;
		if (!wi.db_valid) {
			printf("  worker %-3u %6llu   (counters live in the worker process)\n",
			       w, (unsigned long long)wi.calls);
			continue;
		}
		printf("  worker %-3u %6llu %8llu %8llu %10llu %10llu %9llu\n", w,
		       (unsigned long long)wi.calls,
		       (unsigned long long)wi.db.waits,
		       (unsigned long long)wi.db.wakes,
		       (unsigned long long)wi.db.suppressed_idle,
		       (unsigned long long)wi.db.suppressed_awake,
		       (unsigned long long)wi.db.spurious);
		spurious += wi.db.spurious;
	}
	if (knitk_endpoint_doorbell_stats(knot, KNITK_DOORBELL_HOST, &hdb) == 0) {
		printf("  host       %6s %8llu %8llu %10llu %10llu %9llu\n", "-",
		       (unsigned long long)hdb.waits, (unsigned long long)hdb.wakes,
		       (unsigned long long)hdb.suppressed_idle,
		       (unsigned long long)hdb.suppressed_awake,
		       (unsigned long long)hdb.spurious);
		spurious += hdb.spurious;
	}
	knitk_endpoint_wake_stats(knot, &hs);
	printf("  host rings: %llu sent, %llu suppressed (owner awake)\n",
	       (unsigned long long)hs.sent, (unsigned long long)hs.suppressed_awake);
	return spurious;
}

static int run(unsigned int kind, unsigned int workers, uint64_t n)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind, .nr_workers = workers };
	struct knitk_call_opts pin = { .size = sizeof(pin),
				       .flags = KNITK_CALL_WORKER, .worker = 0 };
	struct knitk_worker_info before[KNITK_MAX_WORKERS], wi = { .size = sizeof(wi) };
	uint64_t chunk, total = 0, serial, c;
	struct knitk_call **calls;
	struct knitk_pool *pool;
	struct knitk_endpoint *knot;
	unsigned int i, nr, w, idle_wakes = 0;
	uint64_t spurious;
	double t0, t1, t2;
	int ret;

	ret = knitk_pool_create(&o, &tasks, &pool);
	if (ret) {
		fprintf(stderr, "primes: knitk_pool_create: %s\n", strerror(-ret));
		return 1;
	}
	knitk_pool_endpoint(pool, &knot);
	printf("\nprimes below %llu: %u %s workers, backend %s\n",
	       (unsigned long long)n, workers,
	       kind == KNITK_WORKER_PROCESSES ? "process" : "thread",
	       knitk_endpoint_backend(knot) == KNITK_BACKEND_KMOD ? "kmod (/dev/knitk)" :
							      "futex");
	chunk = n / 64 + 1;
	nr = (unsigned int)((n + chunk - 1) / chunk);
	calls = calloc(nr, sizeof(*calls));
	if (!calls)
		return 1;
	t0 = now_s();
	for (i = 0; i < nr; i++) {
		struct range r = { i * chunk, (i + 1) * chunk < n ? (i + 1) * chunk : n };

		ret = knitk_pool_submit(pool, 0, &r, sizeof(r), NULL, &calls[i]);
		if (ret) {
			fprintf(stderr, "primes: submit: %s\n", strerror(-ret));
			return 1;
		}
	}
	knitk_pool_wait_all(pool, calls, nr, KNITK_WAIT_FOREVER);
	for (i = 0; i < nr; i++) {
		const void *d;
		size_t len;

		if (knitk_call_status(calls[i]) != 0 ||
		    knitk_call_result(calls[i], &d, &len) || len != 8) {
			fprintf(stderr, "primes: call %u failed: %d\n", i,
				knitk_call_status(calls[i]));
			return 1;
		}
		memcpy(&c, d, 8);
		total += c;
		knitk_call_release(calls[i]);
	}
	free(calls);
	t1 = now_s();
	serial = count_range(0, n);
	t2 = now_s();
	printf("pool:   %llu primes in %u calls, %.3f s\n",
	       (unsigned long long)total, nr, t1 - t0);
	printf("serial: %llu primes, %.3f s  -> %s\n", (unsigned long long)serial,
	       t2 - t1, total == serial ? "match" : "MISMATCH");
	spurious = print_lanes(pool, workers);

	/* Idle lanes: 200 calls pinned to worker 0, nothing for the others. */
	for (w = 0; w < workers; w++) {
		before[w].size = sizeof(before[w]);
		knitk_pool_worker_info(pool, w, &before[w]);
	}
	for (i = 0; i < 200; i++)
		if (knitk_pool_call(pool, 1, NULL, 0, &pin, NULL, 0, NULL)) {
			fprintf(stderr, "primes: pinned call failed\n");
			return 1;
		}
	printf("idle lanes: 200 more calls, all to worker 0\n");
	spurious = print_lanes(pool, workers);
	for (w = 1; w < workers; w++) {
		knitk_pool_worker_info(pool, w, &wi);
		if (wi.db_valid)
			idle_wakes += (unsigned int)(wi.db.wakes - before[w].db.wakes);
	}
	printf("wakes delivered to the %u idle workers: %u\n", workers - 1,
	       idle_wakes);
	printf("spurious wakes: %llu%s\n", (unsigned long long)spurious,
	       spurious ? " (must be 0)" : "");
	knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN);
	knitk_pool_destroy(pool);
	return total == serial && idle_wakes == 0 && spurious == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	unsigned int workers = 2, kinds = 0;
	uint64_t n = 200000;
	int opt, ret = 0;

	/* A process worker is this program, started again by the pool. */
	if (knitk_worker_main(argc, argv, &tasks, NULL))
		return 1;
	while ((opt = getopt(argc, argv, "tpw:")) != -1) {
		if (opt == 't')
			kinds |= 1U << KNITK_WORKER_THREADS;
		else if (opt == 'p')
			kinds |= 1U << KNITK_WORKER_PROCESSES;
		else if (opt == 'w')
			workers = (unsigned int)atoi(optarg);
		else
			return 2;
	}
	if (optind < argc)
		n = strtoull(argv[optind], NULL, 0);
	if (!kinds)
		kinds = 1U << KNITK_WORKER_THREADS | 1U << KNITK_WORKER_PROCESSES;
	if (!workers || workers > KNITK_MAX_WORKERS)
		return 2;
	if (kinds & (1U << KNITK_WORKER_THREADS))
		ret |= run(KNITK_WORKER_THREADS, workers, n);
	if (kinds & (1U << KNITK_WORKER_PROCESSES))
		ret |= run(KNITK_WORKER_PROCESSES, workers, n);
	return ret;
}
