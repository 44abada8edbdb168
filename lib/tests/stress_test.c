// SPDX-License-Identifier: GPL-2.0
/*
 * Stress on the host (futex backend): a producer and a consumer as two
 * threads, then as two processes (the child gets the knot by fd), n
 * messages each (argv[1], default 10^6), every one checked by content and
 * sequence, both sides parking with no timeout.  Prints messages/s and the
 * wake counters; spurious wakes must be zero.
 */
#include <knitk.h>

#include "stress.h"
#include "tap.h"

static uint64_t n = 1000000;

/* One side's counters: the rings it sent and the sleeps it took. */
static void report_side(const char *mode, const char *side,
			const struct knitk_wake_stats *w)
{
	printf("# %s: %s rings: sent %llu, suppressed awake %llu, idle %llu;"
	       " %s waits %llu wakes %llu spurious %llu\n", mode, side,
	       (unsigned long long)w->sent,
	       (unsigned long long)w->suppressed_awake,
	       (unsigned long long)w->suppressed_idle, side,
	       (unsigned long long)w->waits,
	       (unsigned long long)w->wakes,
	       (unsigned long long)w->spurious);
}

static void report(const char *mode, const struct stress_result *r)
{
	printf("# %s: %llu messages, %.1f MB in %.2f s: %.0f messages/s\n",
	       mode, (unsigned long long)r->n, (double)r->bytes / 1e6, r->secs,
	       (double)r->n / r->secs);
	report_side(mode, "host", &r->host);
	report_side(mode, "worker", &r->worker);
}

static void check_result(const char *mode, int ret, const struct stress_result *r)
{
	if (ret)
		printf("# %s failed: %d %s\n", mode, ret, r->why);
	CHECK_EQ(ret, 0);
	CHECK(r->ok);
	report(mode, r);
	CHECK_EQ(r->host.spurious, 0);
	CHECK_EQ(r->worker.spurious, 0);
	/* every sleep was ended by a wake with work (or nothing slept) */
	CHECK_EQ(r->worker.waits, r->worker.wakes);
	CHECK_EQ(r->host.waits, r->host.wakes);
}

/* n messages with the worker as a thread or as a process. */
static void stress_case(const char *mode, int processes)
{
	struct stress_result r;
	int ret = stress_run(KNITK_KNOT_FUTEX, processes, n, &r);

	check_result(mode, ret, &r);
}

static void stress_processes(void)
{
	stress_case("processes", 1);
}

static void stress_threads(void)
{
	stress_case("threads", 0);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		n = strtoull(argv[1], NULL, 0);
	/* processes first: fork before any thread exists */
	TEST(stress_processes);
	TEST(stress_threads);
	return tap_exit();
}
