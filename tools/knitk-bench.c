// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-bench: knitk against the usual IPC primitives, on the same
 * machine, in one run.
 *
 *   knitk-bench [--quick] [--reps N] [--workers N] [--only PAT[,PAT...]]
 *               [--backend futex|kmod] [--no-huge] [--json FILE]
 *               [--plot FILE.svg] [--progress] [--list] [--verbose]
 *               [all | PAT...]
 *
 * Families (tools/bench/): round trips between two processes and two
 * threads (spin, futex, eventfd, pipe, Unix socket, knitk lanes parking
 * and polling first), one-way throughput with batching (knitk lanes, pipe,
 * eventfd; 8 bytes and 4 KiB), pool calls (knitk thread and process
 * workers vs GLib's GThreadPool, same worker count), the idle cost of
 * an 8-worker pool with one loaded worker, the payload echo through the
 * arena against memcpy, and the makespan of task bags (private lanes,
 * stealing, GThreadPool, the ideal).
 *
 * Round k runs repetition k of every selected case (A B A B), and every
 * case records its CPU time per operation next to its time.  --json adds
 * the 'ratios' object (write_ratios); --plot draws rates per group,
 * latency percentiles per method and makespan per load shape as SVG.
 *
 * Each row: median and best over the repetitions, and "speed", the
 * baseline's median time per operation divided by the row's (above 1: the
 * row is faster than its baseline).  Timings on a shared or emulated
 * machine are noisy: read ratios within one run, never absolute numbers
 * across runs.  --only matches case names by substring, or as a glob when
 * the pattern has * ? or [.  Without --backend the library picks (and
 * honours KNITK_BACKEND).
 */
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <knitk.h>
#include <knitk_pool.h>

#include "bench/bench.h"

struct row {
	const struct bench_case *c;
	struct bench_result r;
	double median_ns, min_ns, cpu_ns;	/* cpu_ns: median CPU per op */
	double p50_us, p99_us;			/* latency cases: over every op */
	const struct row *base;
};

static const struct bench_case *const families[] = {
	bench_pingpong_cases, bench_throughput_cases, bench_pool_cases,
	bench_payload_cases, bench_steal_cases, bench_death_cases,
	bench_notice_cases,
};

static int selected(const char *name, const char *only)
{
	char buf[256], *pat, *save = NULL;

	if (!only)
		return 1;
	snprintf(buf, sizeof(buf), "%s", only);
	for (pat = strtok_r(buf, ",", &save); pat; pat = strtok_r(NULL, ",", &save)) {
		if (strpbrk(pat, "*?[") ? fnmatch(pat, name, 0) == 0 :
					  strstr(name, pat) != NULL)
			return 1;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *x, int n)
{
	double v[BENCH_MAX_REPS];

	memcpy(v, x, sizeof(double) * (size_t)n);
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void summarize(struct row *row)
{
	int i, n = row->r.nreps;

	if (n == 0)
		return;
	row->median_ns = median(row->r.ns, n);
	row->cpu_ns = median(row->r.cpu, n);
	row->min_ns = row->r.ns[0];
	for (i = 1; i < n; i++)
		if (row->r.ns[i] < row->min_ns)
			row->min_ns = row->r.ns[i];
	if (row->r.has_lat) {
		row->p50_us = bench_quantile(row->r.lat_us, row->r.nlat, 0.5);
		row->p99_us = bench_quantile(row->r.lat_us, row->r.nlat, 0.99);
	}
}

static int rate(const struct row *row)
{
	return strcmp(row->c->unit, "ops/s") == 0 || strcmp(row->c->unit, "B/s") == 0;
}

/* The row's figure in its own unit (ns per op, ops or bytes per second). */
static double value(const struct row *row, double ns)
{
	if (!strcmp(row->c->unit, "B/s"))
		return (double)(row->c->arg & 0xffffff) * 1e9 / ns;
	return rate(row) ? 1e9 / ns : ns;
}

/* Above 1: @row is faster than @base. */
static double speed(const struct row *row, const struct row *base)
{
	return base->median_ns / row->median_ns;
}

static int ok_row(const struct row *row)
{
	return !row->r.failed && row->r.nreps > 0;
}

static const char *backend_name(unsigned int flags)
{
	struct knitk_geometry g = { .nr_workers = 1, .nr_submitters = 1,
				    .lanes = KNITK_LANES };
	struct knitk_endpoint *knot;
	int b;

	if (knitk_endpoint_create(&g, flags, &knot))
		return "unavailable";
	b = knitk_endpoint_backend(knot);
	knitk_endpoint_destroy(knot);
	return b == KNITK_BACKEND_KMOD ? "kmod" : b == KNITK_BACKEND_FUTEX ?
	       "futex" : "?";
}

static void print_table(const struct row *rows, int nr, const struct bench_ctx *ctx,
			const char *backend)
{
	int i, j;

	printf("knitk-bench: backend %s, %ld CPUs online, %d reps%s, %u pool workers%s\n",
	       backend, sysconf(_SC_NPROCESSORS_ONLN), ctx->reps,
	       ctx->quick ? " (quick)" : "", ctx->workers,
	       ctx->knot_flags & KNITK_KNOT_NO_HUGE ? ", no huge pages" : "");
	printf("best: lowest ns/op or highest ops/s of the reps; speed: baseline "
	       "median time per op / this row's (>1 = faster);\ncpu: median CPU "
	       "time per op, user + system of every side, in ns\n\n");
	printf("%-32s %-6s %14s %14s %12s  %-28s %9s  %s\n", "case", "unit", "median",
	       "best", "cpu ns/op", "baseline", "speed", "msgs");
	for (i = 0; i < nr; i++) {
		const struct row *row = &rows[i];
		char sp[32] = "-", msgs[32] = "-";

		if (!ok_row(row)) {
			printf("%-32s FAILED: %s\n", row->c->name, row->r.why);
			continue;
		}
		if (row->base && row->base != row)
			snprintf(sp, sizeof(sp), "%.3fx", speed(row, row->base));
		if (row->r.has_msgs)
			snprintf(msgs, sizeof(msgs), "%s",
				 row->r.msgs_moved == row->r.msgs_expected ? "ok" : "MISMATCH");
		printf("%-32s %-6s %14.1f %14.1f %12.1f  %-28s %9s  %s\n", row->c->name,
		       row->c->unit, value(row, row->median_ns),
		       value(row, row->min_ns), row->cpu_ns,
		       row->c->baseline ? row->c->baseline : "-", sp, msgs);
	}
	/* Every knitk row against every baseline of its group. */
	printf("\nknitk vs every baseline of its group (speed, median):\n");
	for (i = 0; i < nr; i++) {
		const struct row *row = &rows[i];
		int any = 0;

		if (!row->c->knitk || !ok_row(row) || !row->c->baseline)
			continue;
		printf("  %-26s", row->c->name);
		for (j = 0; j < nr; j++) {
			const struct row *b = &rows[j];

			if (b->c->knitk || !ok_row(b) || strcmp(b->c->group, row->c->group))
				continue;
			printf("  %s %.3fx", strchr(b->c->name, '/') + 1, speed(row, b));
			any = 1;
		}
		printf("%s\n", any ? "" : "  (no baseline selected)");
	}
	for (i = 0; i < nr; i++) {
		const struct bench_idle *id = &rows[i].r.idle;

		if (!rows[i].r.has_idle)
			continue;
		printf("\n%s: %u workers, calls to worker 0 only\n", rows[i].c->name,
		       id->workers);
		printf("  wakes delivered to the %u idle workers: %llu (sleeps %llu);"
		       " wakes of the loaded worker: %llu\n", id->idle_workers,
		       (unsigned long long)id->idle_wakes,
		       (unsigned long long)id->idle_waits,
		       (unsigned long long)id->loaded_wakes);
		printf("  process CPU time while idle, from %.2f ms after the last call:"
		       " %.3f ms over %.0f ms wall (%.4f%%)\n", id->settle_ns / 1e6,
		       id->cpu_ns / 1e6, id->wall_ns / 1e6, 100 * id->cpu_ns / id->wall_ns);
	}
	for (i = 0, j = 0; i < nr; i++) {
		const struct row *row = &rows[i];
		char p50[32] = "", p99[32] = "";

		if (!ok_row(row) || !row->r.has_lat)
			continue;
		if (!j++)
			printf("\nlatency over every operation of the run (us), and against"
			       " the baseline's\n");
		if (row->base && row->base != row && row->base->r.has_lat) {
			snprintf(p50, sizeof(p50), "%.3fx", row->p50_us / row->base->p50_us);
			snprintf(p99, sizeof(p99), "%.3fx", row->p99_us / row->base->p99_us);
		}
		printf("  %-32s %6zu ops  p50 %9.1f %-8s  p99 %9.1f %-8s  cpu %.0f ns/op\n",
		       row->c->name, row->r.nlat, row->p50_us, p50, row->p99_us, p99,
		       row->cpu_ns);
	}
	for (i = 0, j = 0; i < nr; i++) {
		const struct bench_pool_counts *pc = &rows[i].r.counts;
		char per_claim[32] = "-", wakes[32] = "-", spurious[32] = "-";

		if (!ok_row(&rows[i]) || !rows[i].r.has_counts)
			continue;
		if (!j++)
			printf("\npool counts (every repetition): calls per claim"
			       " (stealing), wakes per call, spurious wakes\n");
		if (pc->claims)
			snprintf(per_claim, sizeof(per_claim), "%.2f",
				 (double)pc->calls / (double)pc->claims);
		if (pc->wakes_valid && pc->calls) {
			snprintf(wakes, sizeof(wakes), "%.4f",
				 (double)pc->wakes / (double)pc->calls);
			snprintf(spurious, sizeof(spurious), "%llu",
				 (unsigned long long)pc->spurious);
		}
		printf("  %-32s %8s per claim  %8s wakes/call  %s spurious\n",
		       rows[i].c->name, per_claim, wakes, spurious);
	}
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static const struct row *find(const struct row *rows, int nr, const char *name)
{
	int i;

	for (i = 0; i < nr; i++)
		if (!strcmp(rows[i].c->name, name))
			return ok_row(&rows[i]) ? &rows[i] : NULL;
	return NULL;
}

/* median time (or CPU) per op of @a over that of @b; 0 if either is missing */
static double ratio(const struct row *rows, int nr, const char *a, const char *b,
		    int cpu)
{
	const struct row *x = find(rows, nr, a), *y = find(rows, nr, b);

	if (!x || !y)
		return 0;
	return cpu ? x->cpu_ns / y->cpu_ns : x->median_ns / y->median_ns;
}

/* @q (50 or 99) latency quantile of @a over that of @b; 0 if either is missing */
static double lat_ratio(const struct row *rows, int nr, const char *a, const char *b,
			int q)
{
	const struct row *x = find(rows, nr, a), *y = find(rows, nr, b);

	if (!x || !y || !x->r.has_lat || !y->r.has_lat)
		return 0;
	return q == 50 ? x->p50_us / y->p50_us : x->p99_us / y->p99_us;
}

static void json_num(FILE *f, int *first, const char *key, double v)
{
	fprintf(f, "%s\n    ", *first ? "" : ",");
	json_str(f, key);
	if (isnan(v))
		fprintf(f, ": null");
	else
		fprintf(f, ": %.6g", v);
	*first = 0;
}

/* The headline ratios of one run: a key and its value, NAN when not run. */
#define BENCH_MAX_RATIOS	32
/* Whole runs of --runs. */
#define BENCH_MAX_RUNS		20
_Static_assert(BENCH_MAX_RUNS <= BENCH_MAX_REPS, "median() sorts the runs in a BENCH_MAX_REPS array");

struct ratios {
	int n;
	const char *key[BENCH_MAX_RATIOS];
	double v[BENCH_MAX_RATIOS];
};

static void ratio_add(struct ratios *rs, const char *key, double v)
{
	if (rs->n < BENCH_MAX_RATIOS) {
		rs->key[rs->n] = key;
		rs->v[rs->n++] = v;
	}
}

/*
 * The headline ratios (issue-tracked targets), NAN when a case they need
 * was not run.  Time ratios: knitk over baseline, lower is better;
 * throughput and bandwidth ratios: knitk over baseline, higher is better.
 */
static void compute_ratios(struct ratios *rs, const struct row *rows, int nr,
			   const char *backend)
{
	static const struct {
		const char *key, *a, *b;
		int inv, cpu;		/* inv: rates (baseline time / ours) */
	} rt[] = {
		{ "pingpong_spin_vs_raw_spin", "rtt-process/knitk-busy", "rtt-process/spin", 0, 0 },
		{ "pingpong_park_vs_raw_futex", "rtt-process/knitk", "rtt-process/futex", 0, 0 },
		{ "batch_calls_vs_gthreadpool", "pool-batch/knitk-threads", "pool-batch/gthreadpool", 1, 0 },
		{ "steal_skewed_vs_ideal", "steal-skewed/steal-threads", "steal-skewed/ideal", 0, 0 },
		{ "steal_skewed_vs_private", "steal-skewed/steal-threads", "steal-skewed/private-threads", 0, 0 },
		{ "steal_skewed_vs_gthreadpool", "steal-skewed/steal-threads", "steal-skewed/gthreadpool-threads", 0, 0 },
		{ "payload_1mib_vs_memcpy", "payload-1M/knitk-threads", "payload-1M/memcpy", 1, 0 },
		{ "pool_call_vs_lane_rtt", "pool-call/knitk-threads", "rtt-thread/knitk-busy", 0, 0 },
		{ "park_cpu_vs_raw_futex", "rtt-process/knitk", "rtt-process/futex", 0, 1 },
		{ "pool_park_vs_raw_futex", "pool-park/knitk-processes", "rtt-process/futex", 0, 0 },
		{ "pool_park_cpu_vs_raw_futex", "pool-park/knitk-processes", "rtt-process/futex", 0, 1 },
		{ "payload_1mib_loan_vs_memcpy", "payload-1M/knitk-loan", "payload-1M/memcpy", 1, 0 },
		/* One-way streams: message rates, higher is better. */
		{ "stream_8b_vs_pipe", "tput-8B/knitk", "tput-8B/pipe", 1, 0 },
		{ "stream_8b_vs_eventfd", "tput-8B/knitk", "tput-8B/eventfd", 1, 0 },
		{ "stream_8b_oversub_vs_pipe", "tput-8B-oversub/knitk", "tput-8B-oversub/pipe", 1, 0 },
		{ "stream_4k_vs_pipe", "tput-4K/knitk", "tput-4K/pipe", 1, 0 },
	};
	static const struct {
		const char *key, *a;
		int q;
	} dw[] = {
		{ "death_wait_vs_pidfd_p50", "death-wait/knitk-respawn", 50 },
		{ "death_wait_vs_pidfd_p99", "death-wait/knitk-respawn", 99 },
		{ "death_wait_steal_vs_pidfd_p50", "death-wait/knitk-steal-respawn", 50 },
		{ "death_wait_steal_vs_pidfd_p99", "death-wait/knitk-steal-respawn", 99 },
	};
	const struct row *idle = NULL;
	int i;
	double v;

	rs->n = 0;
	for (i = 0; i < nr; i++)
		if (ok_row(&rows[i]) && rows[i].r.has_idle)
			idle = &rows[i];
	for (i = 0; i < (int)(sizeof(rt) / sizeof(rt[0])); i++) {
		v = ratio(rows, nr, rt[i].a, rt[i].b, rt[i].cpu);
		if (rt[i].inv && v > 0)
			v = 1 / v;
		ratio_add(rs, rt[i].key, v > 0 ? v : NAN);
		if (i == 2) {
			/* Wakes of the idle pool's workers per call made. */
			ratio_add(rs, "idle_wakes_per_call", idle && idle->r.idle.calls ?
				  (double)(idle->r.idle.loaded_wakes + idle->r.idle.idle_wakes) /
				  (double)idle->r.idle.calls : NAN);
			ratio_add(rs, "idle_spurious_wakes", idle ?
				  (double)idle->r.idle.spurious : NAN);
		}
	}
	/* A waiter's wake at its worker's death against a pidfd's (p50, p99). */
	for (i = 0; i < (int)(sizeof(dw) / sizeof(dw[0])); i++) {
		v = lat_ratio(rows, nr, dw[i].a, "death-wait/pidfd", dw[i].q);
		ratio_add(rs, dw[i].key, v > 0 ? v : NAN);
	}
	/*
	 * A survivor's wait at a peer's death: the worst p99 of the ways to
	 * wait (us, not a ratio: the target is absolute), and the kills none
	 * of them saw (must be 0).
	 */
	{
		static const char *const dn[] = {
			"death-notice/worker-wait", "death-notice/client-wait",
			"death-notice/client-epoll",
		};
		double p99 = 0, missed = 0;
		int have = 0;

		for (i = 0; i < (int)(sizeof(dn) / sizeof(dn[0])); i++) {
			const struct row *x = find(rows, nr, dn[i]);

			if (!x || !x->r.has_lat)
				continue;
			have++;
			p99 = x->p99_us > p99 ? x->p99_us : p99;
			missed += (double)(x->r.msgs_expected - x->r.msgs_moved);
		}
		ratio_add(rs, "death_notice_p99_us", have ? p99 : NAN);
		ratio_add(rs, "death_notice_missed", have ? missed : NAN);
	}
	/*
	 * Stealing: the worst makespan of the long-task placements against
	 * the ideal and GThreadPool, and the spurious wakes of every
	 * stealing row (a worker woken that found nothing to take).
	 */
	{
		static const char *const pl[] = { "front", "end", "spread", "random" };
		double vi = 0, vg = 0, spurious = 0, x;
		char a[64], b[64];
		int have = 0;

		for (i = 0; i < (int)(sizeof(pl) / sizeof(pl[0])); i++) {
			snprintf(a, sizeof(a), "steal-long-%s/steal-threads", pl[i]);
			snprintf(b, sizeof(b), "steal-long-%s/ideal", pl[i]);
			x = ratio(rows, nr, a, b, 0);
			vi = x > vi ? x : vi;
			snprintf(b, sizeof(b), "steal-long-%s/gthreadpool-threads", pl[i]);
			x = ratio(rows, nr, a, b, 0);
			vg = x > vg ? x : vg;
		}
		ratio_add(rs, "steal_long_vs_ideal", vi > 0 ? vi : NAN);
		ratio_add(rs, "steal_long_vs_gthreadpool", vg > 0 ? vg : NAN);
		for (i = 0; i < nr; i++) {
			const char *var = strrchr(rows[i].c->name, '/');

			if (!ok_row(&rows[i]) || strncmp(rows[i].c->group, "steal-", 6) ||
			    !rows[i].r.has_counts || !rows[i].r.counts.wakes_valid ||
			    !var || strncmp(var + 1, "steal-", 6))
				continue;
			have++;
			spurious += (double)rows[i].r.counts.spurious;
		}
		ratio_add(rs, "steal_spurious_wakes", have ? spurious : NAN);
	}
	if (!strcmp(backend, "kmod")) {
		/* The module's parked hop: ring and wait in one call (S9). */
		v = ratio(rows, nr, "rtt-process/knitk-ringwait", "rtt-process/futex", 0);
		ratio_add(rs, "kmod_park_vs_raw_futex", v > 0 ? v : NAN);
		v = ratio(rows, nr, "pool-park/knitk-processes", "rtt-process/futex", 0);
		ratio_add(rs, "kmod_pool_park_vs_raw_futex", v > 0 ? v : NAN);
	}
}

/*
 * Ratio @k over @runs runs: its minimum, median and maximum (*@lo, *@mid,
 * *@hi) over the runs that have it; NAN when none does.
 */
static void ratio_spread(const struct ratios *runs, int nruns, int k,
			 double *lo, double *mid, double *hi)
{
	double v[BENCH_MAX_RUNS];
	int i, n = 0;

	for (i = 0; i < nruns; i++)
		if (!isnan(runs[i].v[k]))
			v[n++] = runs[i].v[k];
	if (!n) {
		*lo = *mid = *hi = NAN;
		return;
	}
	*mid = median(v, n);
	qsort(v, (size_t)n, sizeof(v[0]), cmp_double);
	*lo = v[0];
	*hi = v[n - 1];
}

/*
 * The 'ratios' object: each key's median over the runs; with more than
 * one run, 'ratios_spread' too: [minimum, median, maximum] per key.
 */
static void write_ratios(FILE *f, const struct ratios *runs, int nruns)
{
	double lo, mid, hi;
	int k, first = 1;

	fprintf(f, "  \"ratios\": {");
	for (k = 0; k < runs[0].n; k++) {
		ratio_spread(runs, nruns, k, &lo, &mid, &hi);
		json_num(f, &first, runs[0].key[k], mid);
	}
	fprintf(f, "\n  }");
	if (nruns < 2)
		return;
	fprintf(f, ",\n  \"ratios_spread\": {");
	first = 1;
	for (k = 0; k < runs[0].n; k++) {
		ratio_spread(runs, nruns, k, &lo, &mid, &hi);
		fprintf(f, "%s\n    ", first ? "" : ",");
		json_str(f, runs[0].key[k]);
		if (isnan(mid))
			fprintf(f, ": null");
		else
			fprintf(f, ": [%.6g, %.6g, %.6g]", lo, mid, hi);
		first = 0;
	}
	fprintf(f, "\n  }");
}

/* The ratios' spread over the runs, as a table on stdout. */
static void print_spread(const struct ratios *runs, int nruns)
{
	double lo, mid, hi;
	int k;

	printf("\nratios over %d runs: minimum, median, maximum\n", nruns);
	for (k = 0; k < runs[0].n; k++) {
		ratio_spread(runs, nruns, k, &lo, &mid, &hi);
		if (!isnan(mid))
			printf("  %-34s %10.4g %10.4g %10.4g\n", runs[0].key[k], lo, mid, hi);
	}
}

static int write_json(const char *path, const struct row *rows, int nr,
		      const struct bench_ctx *ctx, const char *backend,
		      const struct ratios *runs, int nruns)
{
	FILE *f = fopen(path, "w");
	int i, j, first;

	if (!f)
		return -errno;
	fprintf(f, "{\n  \"tool\": \"knitk-bench\",\n  \"backend\": ");
	json_str(f, backend);
	fprintf(f, ",\n  \"cpus\": %ld,\n  \"quick\": %s,\n  \"reps\": %d,\n"
		"  \"workers\": %u,\n  \"cases\": [\n",
		sysconf(_SC_NPROCESSORS_ONLN), ctx->quick ? "true" : "false",
		ctx->reps, ctx->workers);
	for (i = 0; i < nr; i++) {
		const struct row *row = &rows[i];

		fprintf(f, "    {\"name\": ");
		json_str(f, row->c->name);
		fprintf(f, ", \"group\": ");
		json_str(f, row->c->group);
		fprintf(f, ", \"unit\": ");
		json_str(f, row->c->unit);
		fprintf(f, ", \"knitk\": %s, \"baseline\": ",
			row->c->knitk ? "true" : "false");
		if (row->c->baseline)
			json_str(f, row->c->baseline);
		else
			fprintf(f, "null");
		fprintf(f, ", \"ok\": %s", ok_row(row) ? "true" : "false");
		if (!ok_row(row)) {
			fprintf(f, ", \"error\": ");
			json_str(f, row->r.why);
			fprintf(f, "}%s\n", i + 1 < nr ? "," : "");
			continue;
		}
		fprintf(f, ",\n     \"ops_per_rep\": %llu, \"ns_per_op\": [",
			(unsigned long long)row->r.ops);
		for (j = 0; j < row->r.nreps; j++)
			fprintf(f, "%s%.3f", j ? ", " : "", row->r.ns[j]);
		fprintf(f, "],\n     \"cpu_ns_per_op\": [");
		for (j = 0; j < row->r.nreps; j++)
			fprintf(f, "%s%.3f", j ? ", " : "", row->r.cpu[j]);
		fprintf(f, "],\n     \"median_ns\": %.3f, \"min_ns\": %.3f,"
			" \"median\": %.3f, \"best\": %.3f, \"median_cpu_ns\": %.3f",
			row->median_ns, row->min_ns, value(row, row->median_ns),
			value(row, row->min_ns), row->cpu_ns);
		if (row->base && row->base != row)
			fprintf(f, ", \"speed\": %.6g", speed(row, row->base));
		fprintf(f, ",\n     \"speed_vs\": {");
		first = 1;
		for (j = 0; j < nr; j++) {
			const struct row *b = &rows[j];

			if (b == row || b->c->knitk || !ok_row(b) ||
			    strcmp(b->c->group, row->c->group))
				continue;
			fprintf(f, "%s", first ? "" : ", ");
			json_str(f, b->c->name);
			fprintf(f, ": %.6g", speed(row, b));
			first = 0;
		}
		fprintf(f, "}");
		if (row->r.has_msgs)
			fprintf(f, ",\n     \"messages_expected\": %llu,"
				" \"messages_moved\": %llu",
				(unsigned long long)row->r.msgs_expected,
				(unsigned long long)row->r.msgs_moved);
		if (row->r.has_idle) {
			const struct bench_idle *id = &row->r.idle;

			fprintf(f, ",\n     \"idle\": {\"workers\": %u, \"idle_workers\": %u,"
				" \"idle_wakes\": %llu, \"idle_waits\": %llu,"
				" \"loaded_wakes\": %llu, \"spurious\": %llu, \"calls\": %llu,"
				" \"settle_ns\": %.0f, \"cpu_ns\": %.0f, \"wall_ns\": %.0f}",
				id->workers, id->idle_workers,
				(unsigned long long)id->idle_wakes,
				(unsigned long long)id->idle_waits,
				(unsigned long long)id->loaded_wakes,
				(unsigned long long)id->spurious,
				(unsigned long long)id->calls, id->settle_ns, id->cpu_ns,
				id->wall_ns);
		}
		if (row->r.has_lat)
			fprintf(f, ",\n     \"latency_us\": {\"ops\": %zu, \"p50\": %.3f,"
				" \"p99\": %.3f}", row->r.nlat, row->p50_us, row->p99_us);
		if (row->r.has_counts) {
			const struct bench_pool_counts *pc = &row->r.counts;

			fprintf(f, ",\n     \"pool_counts\": {\"calls\": %llu, \"claims\": %llu",
				(unsigned long long)pc->calls,
				(unsigned long long)pc->claims);
			if (pc->claims)
				fprintf(f, ", \"calls_per_claim\": %.4g",
					(double)pc->calls / (double)pc->claims);
			else
				fprintf(f, ", \"calls_per_claim\": null");
			if (pc->wakes_valid && pc->calls)
				fprintf(f, ", \"wakes\": %llu, \"wakes_per_call\": %.6g,"
					" \"spurious\": %llu}",
					(unsigned long long)pc->wakes,
					(double)pc->wakes / (double)pc->calls,
					(unsigned long long)pc->spurious);
			else
				fprintf(f, ", \"wakes\": null, \"wakes_per_call\": null,"
					" \"spurious\": null}");
		}
		fprintf(f, "}%s\n", i + 1 < nr ? "," : "");
	}
	fprintf(f, "  ],\n  \"runs\": %d,\n", nruns);
	write_ratios(f, runs, nruns);
	fprintf(f, "\n}\n");
	if (fclose(f))
		return -errno;
	return 0;
}

/*
 * A bar chart, one panel per group: bar length is the rate (1 / median
 * time per op) relative to the fastest row of the panel; labels carry the
 * row's own figure and its speed against the baseline.
 */
/* The rows of a latency group (rtt-*) and of a load shape (steal-*). */
static int latency_row(const struct row *row)
{
	return ok_row(row) && !strncmp(row->c->group, "rtt-", 4);
}

static int makespan_row(const struct row *row)
{
	return ok_row(row) && !strncmp(row->c->group, "steal-", 6);
}

/*
 * Latency percentiles per method: over the repetitions' ns per round trip,
 * the 0th, 50th and 100th percentile on a log scale (a line from best to
 * worst, a dot at the median).
 */
static int svg_latency(FILE *f, const struct row *rows, int nr, int y)
{
	const int label_w = 230, span = 560;
	double lo = 1e300, hi = 0, x0, x1, xm, v[BENCH_MAX_REPS];
	int i, n;

	for (i = 0; i < nr; i++) {
		if (!latency_row(&rows[i]))
			continue;
		for (n = 0; n < rows[i].r.nreps; n++) {
			lo = rows[i].r.ns[n] < lo ? rows[i].r.ns[n] : lo;
			hi = rows[i].r.ns[n] > hi ? rows[i].r.ns[n] : hi;
		}
	}
	if (hi <= 0)
		return y;
	lo = log10(lo) - 0.1;
	hi = log10(hi) + 0.1;
	y += 30;
	fprintf(f, "<text x=\"10\" y=\"%d\" font-weight=\"bold\">round-trip latency"
		" per method: p0-p100 of the repetitions, dot at p50 (ns, log scale"
		" %.0f..%.0f)</text>\n", y, pow(10, lo), pow(10, hi));
	for (i = 0; i < nr; i++) {
		if (!latency_row(&rows[i]))
			continue;
		n = rows[i].r.nreps;
		memcpy(v, rows[i].r.ns, sizeof(double) * (size_t)n);
		qsort(v, (size_t)n, sizeof(double), cmp_double);
		x0 = label_w + span * (log10(v[0]) - lo) / (hi - lo);
		x1 = label_w + span * (log10(v[n - 1]) - lo) / (hi - lo);
		xm = label_w + span * (log10(rows[i].median_ns) - lo) / (hi - lo);
		y += 20;
		fprintf(f, "<text x=\"10\" y=\"%d\">%s</text>\n", y, rows[i].c->name);
		fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\""
			" stroke=\"%s\" stroke-width=\"3\"/>\n", x0, y - 4, x1, y - 4,
			rows[i].c->knitk ? "#c0392b" : "#7f8c8d");
		fprintf(f, "<circle cx=\"%.1f\" cy=\"%d\" r=\"4\"/>\n", xm, y - 4);
		fprintf(f, "<text x=\"%d\" y=\"%d\">%.0f</text>\n",
			label_w + span + 10, y, rows[i].median_ns);
	}
	return y;
}

/* Makespan per load shape: the median makespan of each method, in ms. */
static int svg_makespan(FILE *f, const struct row *rows, int nr, int y)
{
	const int label_w = 230, span = 420;
	double hi = 0, ms;
	int i;

	for (i = 0; i < nr; i++)
		if (makespan_row(&rows[i]) &&
		    rows[i].median_ns * (double)rows[i].r.ops > hi)
			hi = rows[i].median_ns * (double)rows[i].r.ops;
	if (hi <= 0)
		return y;
	y += 30;
	fprintf(f, "<text x=\"10\" y=\"%d\" font-weight=\"bold\">makespan per load"
		" shape (ms, median; shorter is better)</text>\n", y);
	for (i = 0; i < nr; i++) {
		if (!makespan_row(&rows[i]))
			continue;
		ms = rows[i].median_ns * (double)rows[i].r.ops / 1e6;
		y += 20;
		fprintf(f, "<text x=\"10\" y=\"%d\">%s</text>\n", y, rows[i].c->name);
		fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"14\""
			" fill=\"%s\"/>\n", label_w, y - 12, span * ms * 1e6 / hi + 1,
			rows[i].c->knitk ? "#c0392b" : "#7f8c8d");
		fprintf(f, "<text x=\"%.1f\" y=\"%d\">%.2f ms</text>\n",
			label_w + span * ms * 1e6 / hi + 8, y, ms);
	}
	return y;
}

static int write_svg(const char *path, const struct row *rows, int nr,
		     const char *backend)
{
	const int bar_h = 18, label_w = 230, bar_w = 420, width = 900;
	FILE *f = fopen(path, "w");
	int i, j, y = 40, height = 60;
	const char *group = "";

	if (!f)
		return -errno;
	for (i = 0; i < nr; i++) {
		if (strcmp(rows[i].c->group, group)) {
			height += 34;
			group = rows[i].c->group;
		}
		height += bar_h + 4 + 20 * (latency_row(&rows[i]) + makespan_row(&rows[i]));
	}
	height += 2 * 30;
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\""
		" font-family=\"monospace\" font-size=\"12\">\n", width, height);
	fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
	fprintf(f, "<text x=\"10\" y=\"22\" font-size=\"15\">knitk-bench (backend %s):"
		" rate relative to the fastest row of each group</text>\n", backend);
	for (i = 0; i < nr; i = j) {
		double best = 0;

		for (j = i; j < nr && !strcmp(rows[j].c->group, rows[i].c->group); j++)
			if (ok_row(&rows[j]) && 1 / rows[j].median_ns > best)
				best = 1 / rows[j].median_ns;
		y += 24;
		fprintf(f, "<text x=\"10\" y=\"%d\" font-weight=\"bold\">%s</text>\n",
			y, rows[i].c->group);
		y += 10;
		for (j = i; j < nr && !strcmp(rows[j].c->group, rows[i].c->group); j++) {
			const struct row *row = &rows[j];
			double len;
			char sp[32] = "";

			y += bar_h + 4;
			fprintf(f, "<text x=\"10\" y=\"%d\">%s</text>\n", y - 5,
				strchr(row->c->name, '/') + 1);
			if (!ok_row(row) || best <= 0) {
				fprintf(f, "<text x=\"%d\" y=\"%d\">failed</text>\n",
					label_w, y - 5);
				continue;
			}
			len = bar_w * (1 / row->median_ns) / best;
			if (len < 1)
				len = 1;
			if (row->base && row->base != row)
				snprintf(sp, sizeof(sp), "  %.2fx", speed(row, row->base));
			fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\""
				" fill=\"%s\"/>\n", label_w, y - bar_h, len, bar_h,
				row->c->knitk ? "#c0392b" : "#7f8c8d");
			fprintf(f, "<text x=\"%.1f\" y=\"%d\">%.1f %s%s</text>\n",
				label_w + len + 6, y - 5, value(row, row->median_ns),
				row->c->unit, sp);
		}
	}
	y = svg_latency(f, rows, nr, y);
	svg_makespan(f, rows, nr, y);
	fprintf(f, "</svg>\n");
	if (fclose(f))
		return -errno;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: knitk-bench [OPTION...] [all | PAT...]\n"
		"\n"
		"Measures knitk against the usual IPC primitives in one run.  Each\n"
		"case's repetitions are interleaved with the other cases' (A B A B),\n"
		"and every case reports its time and its CPU time per operation\n"
		"(user + system of every side, children and process workers included).\n"
		"\n"
		"  PAT, --only PAT[,PAT...]  run the cases whose name contains PAT (a glob\n"
		"                      when PAT has * ? or [); 'all' or nothing: every case\n"
		"  --quick             fewer operations per repetition, 3 repetitions\n"
		"  --reps N            repetitions, 1..%d (default 5, 3 with --quick)\n"
		"  --runs N            the whole run N times, 1..%d (default 1): each\n"
		"                      ratio's minimum, median and maximum over the runs\n"
		"                      (JSON: 'ratios' holds the medians, 'ratios_spread'\n"
		"                      [min, median, max]); the cases shown are the last run's\n"
		"  --workers N         pool and steal workers, 1..%d (default: online CPUs)\n"
		"  --backend B         futex or kmod (default: the library's choice,\n"
		"                      KNITK_BACKEND)\n"
		"  --no-huge           every knot in base pages (KNITK_KNOT_NO_HUGE);\n"
		"                      by default a knot of 2 MiB or more (the payload\n"
		"                      cases' pools) asks for huge pages\n"
		"  --json FILE         write every case and the 'ratios' object as JSON\n"
		"  --plot FILE.svg     draw the rates per group, the latency percentiles\n"
		"                      over the repetitions per method and the makespan\n"
		"                      per load shape (SVG)\n"
		"  --progress          a progress line (case n of m) on stderr even when\n"
		"                      stderr is not a terminal (it is shown on a terminal)\n"
		"  --list              list the selected cases and exit\n"
		"  --verbose           name each case on stderr as it starts\n"
		"  --help              this text\n"
		"\n"
		"Scenarios: rtt-* round trips (processes, threads); tput-* one-way\n"
		"messages between two threads (tput-8B-oversub: four writer/reader\n"
		"pairs of processes at once, messages/s over all four, whatever the\n"
		"CPUs); pool-* pool calls against GThreadPool (pool-park: one\n"
		"worker that parks between calls, against the futex round trip);\n"
		"idle/* the idle cost of a pool (wakes, CPU from 1 ms after the last\n"
		"call); payload-* echo\n"
		"bandwidth through the arena against memcpy; steal-* makespan of 2000\n"
		"tasks (400 with --quick) with flat, random and skewed costs against\n"
		"the ideal; death-wait/* how soon a thread parked in knitk_call_wait\n"
		"learns that its process worker was SIGKILLed (300 kills, 30 with\n"
		"--quick; p50 and p99) against a poll() on the pidfd of a killed child;\n"
		"death-notice/* the same floor against a pool's worker (worker-wait)\n"
		"and a bare knot's client process (client-wait: a parked doorbell\n"
		"wait; client-epoll: epoll readiness), with the deaths missed.\n"
		"Ratios within one run are what to read.\n"
		"\nCases:\n", BENCH_MAX_REPS, BENCH_MAX_RUNS, KNITK_MAX_WORKERS);
}

static void list_cases(FILE *f)
{
	int fam, i;

	for (fam = 0; fam < (int)(sizeof(families) / sizeof(families[0])); fam++)
		for (i = 0; families[fam][i].name; i++)
			fprintf(f, "  %s\n", families[fam][i].name);
}

/* A whole decimal number in [lo, hi], or -1. */
static long parse_num(const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	return v;
}

/* Option @name's value @arg, a number in 1..@hi, or -1 (said on stderr). */
static long option_num(const char *name, const char *arg, long hi)
{
	long v = parse_num(arg, 1, hi);

	if (v < 0)
		fprintf(stderr, "knitk-bench: %s: '%s' is not a number in 1..%ld\n",
			name, arg, hi);
	return v;
}

static void progress(int on, int tty, int k, int total, const char *name)
{
	if (!on)
		return;
	fprintf(stderr, tty ? "\r\033[Kknitk-bench: case %d of %d: %s" :
			      "knitk-bench: case %d of %d: %s\n", k, total, name);
	if (tty && k == total)
		fputc('\n', stderr);
	fflush(stderr);
}

/* Append one round's result @one to the row's. */
static void merge(struct row *row, const struct bench_result *one)
{
	struct bench_result *r = &row->r;
	int i;

	if (one->failed) {
		r->failed = 1;
		memcpy(r->why, one->why, sizeof(r->why));
	}
	for (i = 0; i < one->nreps && r->nreps < BENCH_MAX_REPS; i++) {
		r->ns[r->nreps] = one->ns[i];
		r->cpu[r->nreps++] = one->cpu[i];
	}
	r->ops = one->ops;
	r->has_msgs |= one->has_msgs;
	r->msgs_expected += one->msgs_expected;
	r->msgs_moved += one->msgs_moved;
	if (one->has_idle) {
		r->has_idle = 1;
		r->idle = one->idle;
	}
	if (one->has_lat) {
		double *v = realloc(r->lat_us, (r->nlat + one->nlat) * sizeof(*v));

		r->has_lat = 1;
		if (v) {
			memcpy(v + r->nlat, one->lat_us, one->nlat * sizeof(*v));
			r->lat_us = v;
			r->nlat += one->nlat;
		} else {
			r->failed = 1;
			snprintf(r->why, sizeof(r->why), "out of memory");
		}
		free(one->lat_us);
	}
	if (one->has_counts) {
		r->counts.wakes_valid = r->has_counts ? r->counts.wakes_valid &&
				one->counts.wakes_valid : one->counts.wakes_valid;
		r->has_counts = 1;
		r->counts.calls += one->counts.calls;
		r->counts.claims += one->counts.claims;
		r->counts.wakes += one->counts.wakes;
		r->counts.spurious += one->counts.spurious;
	}
}

/*
 * One whole run of the @nr selected cases, @reps rounds of them: round k
 * runs repetition k of every case (A B A B, not A A B B).  Nonzero when a
 * case failed.
 */
static int measure(struct row *rows, int nr, struct bench_ctx *ctx, int reps,
		   int show, int tty)
{
	int i, j, ret, failed = 0;

	ctx->reps = 1;
	ctx->rounds = reps;
	for (ctx->round = 0; ctx->round < reps; ctx->round++) {
		for (i = 0; i < nr; i++) {
			struct bench_result one = { 0 };

			progress(show, tty, ctx->round * nr + i + 1, reps * nr, rows[i].c->name);
			if (rows[i].r.failed)
				continue;
			if (ctx->verbose && !show) {
				fprintf(stderr, "knitk-bench: %s ...\n", rows[i].c->name);
				fflush(stderr);
			}
			ret = rows[i].c->run(rows[i].c, ctx, &one);
			if (ret && !one.failed)
				bench_fail(&one, "%s", strerror(-ret));
			if (!ret && one.nreps == 0)
				bench_fail(&one, "no repetition recorded");
			merge(&rows[i], &one);
			one.lat_us = NULL;
		}
	}
	ctx->reps = reps;
	for (i = 0; i < nr; i++) {
		summarize(&rows[i]);
		if (rows[i].r.failed) {
			fprintf(stderr, "knitk-bench: %s: %s\n", rows[i].c->name,
				rows[i].r.why);
			failed = 1;
		} else if (rows[i].r.has_msgs &&
			   rows[i].r.msgs_moved != rows[i].r.msgs_expected) {
			fprintf(stderr, "knitk-bench: %s: moved %llu messages of %llu\n",
				rows[i].c->name,
				(unsigned long long)rows[i].r.msgs_moved,
				(unsigned long long)rows[i].r.msgs_expected);
			failed = 1;
		}
	}
	for (i = 0; i < nr; i++)
		for (j = 0; j < nr && rows[i].c->baseline; j++)
			if (!strcmp(rows[j].c->name, rows[i].c->baseline) && ok_row(&rows[j]))
				rows[i].base = &rows[j];
	return failed;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "reps", required_argument, NULL, 'r' },
		{ "runs", required_argument, NULL, 'R' },
		{ "workers", required_argument, NULL, 'w' },
		{ "only", required_argument, NULL, 'o' },
		{ "backend", required_argument, NULL, 'b' },
		{ "no-huge", no_argument, NULL, 'H' },
		{ "json", required_argument, NULL, 'j' },
		{ "plot", required_argument, NULL, 'p' },
		{ "progress", no_argument, NULL, 'P' },
		{ "list", no_argument, NULL, 'l' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench_ctx ctx = { .reps = 0 };
	const char *json = NULL, *plot = NULL, *backend;
	char only_buf[1024] = "", *only = NULL;
	struct row *rows;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN), v;
	int opt, list = 0, nr = 0, i, f, ret, failed = 0, reps, show = 0, tty;
	int nruns = 1, run, no_huge = 0;
	static struct ratios runs[BENCH_MAX_RUNS];

	/* Process workers of the pool cases re-run this program: they stop here. */
	if (knitk_worker_main(argc, argv, &bench_tasks, NULL))
		return 1;
	ctx.workers = ncpu < 1 ? 1 : ncpu > KNITK_MAX_WORKERS ? KNITK_MAX_WORKERS :
		      (unsigned int)ncpu;
	while ((opt = getopt_long(argc, argv, "qr:R:w:o:b:Hj:p:Plvh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'q': ctx.quick = 1; break;
		case 'H': no_huge = 1; break;
		case 'r':
			v = option_num("--reps", optarg, BENCH_MAX_REPS);
			if (v < 0)
				return 2;
			ctx.reps = (int)v;
			break;
		case 'R':
			v = option_num("--runs", optarg, BENCH_MAX_RUNS);
			if (v < 0)
				return 2;
			nruns = (int)v;
			break;
		case 'w':
			v = option_num("--workers", optarg, KNITK_MAX_WORKERS);
			if (v < 0)
				return 2;
			ctx.workers = (unsigned int)v;
			break;
		case 'o':
			snprintf(only_buf + strlen(only_buf), sizeof(only_buf) - strlen(only_buf),
				 "%s%s", only_buf[0] ? "," : "", optarg);
			break;
		case 'j': json = optarg; break;
		case 'p': plot = optarg; break;
		case 'P': show = 1; break;
		case 'l': list = 1; break;
		case 'v': ctx.verbose = 1; break;
		case 'b':
			if (!strcmp(optarg, "futex")) {
				ctx.knot_flags = KNITK_KNOT_FUTEX;
			} else if (!strcmp(optarg, "kmod")) {
				ctx.knot_flags = KNITK_KNOT_KMOD;
			} else {
				fprintf(stderr, "knitk-bench: --backend: '%s' is neither"
					" futex nor kmod\n", optarg);
				return 2;
			}
			/* Anything that creates a knot without flags follows too. */
			if (setenv("KNITK_BACKEND", optarg, 1)) {
				perror("setenv");
				return 1;
			}
			break;
		case 'h': usage(stdout); list_cases(stdout); return 0;
		default:
			fprintf(stderr, "knitk-bench: see --help\n");
			return 2;
		}
	}
	for (; optind < argc; optind++) {
		if (!strcmp(argv[optind], "all")) {
			only_buf[0] = '\0';
			break;
		}
		snprintf(only_buf + strlen(only_buf), sizeof(only_buf) - strlen(only_buf),
			 "%s%s", only_buf[0] ? "," : "", argv[optind]);
	}
	if (only_buf[0])
		only = only_buf;
	reps = ctx.reps ? ctx.reps : ctx.quick ? 3 : 5;
	tty = isatty(STDERR_FILENO);
	show |= tty;

	for (f = 0; f < (int)(sizeof(families) / sizeof(families[0])); f++)
		for (i = 0; families[f][i].name; i++)
			nr++;
	rows = calloc((size_t)nr, sizeof(*rows));
	if (!rows) {
		perror("calloc");
		return 1;
	}
	nr = 0;
	for (f = 0; f < (int)(sizeof(families) / sizeof(families[0])); f++)
		for (i = 0; families[f][i].name; i++)
			if (selected(families[f][i].name, only))
				rows[nr++].c = &families[f][i];
	if (list) {
		for (i = 0; i < nr; i++)
			printf("%s\n", rows[i].c->name);
		free(rows);
		return 0;
	}
	if (!nr) {
		fprintf(stderr, "knitk-bench: no case matches '%s'\n", only);
		free(rows);
		return 2;
	}
	if (no_huge)
		ctx.knot_flags |= KNITK_KNOT_NO_HUGE;
	backend = backend_name(ctx.knot_flags);

	/*
	 * --runs: the whole measurement again, from fresh rows; the ratios
	 * of each run are kept, the cases of the last one are reported.
	 */
	for (run = 0; run < nruns; run++) {
		if (run) {
			for (i = 0; i < nr; i++) {
				free(rows[i].r.lat_us);
				memset(&rows[i].r, 0, sizeof(rows[i].r));
				rows[i].base = NULL;
			}
			if (show)
				fprintf(stderr, "knitk-bench: run %d of %d\n", run + 1, nruns);
		}
		failed |= measure(rows, nr, &ctx, reps, show, tty);
		compute_ratios(&runs[run], rows, nr, backend);
	}
	ctx.reps = reps;
	print_table(rows, nr, &ctx, backend);
	if (nruns > 1)
		print_spread(runs, nruns);
	if (json) {
		ret = write_json(json, rows, nr, &ctx, backend, runs, nruns);
		if (ret) {
			fprintf(stderr, "knitk-bench: %s: %s\n", json, strerror(-ret));
			failed = 1;
		}
	}
	if (plot) {
		ret = write_svg(plot, rows, nr, backend);
		if (ret) {
			fprintf(stderr, "knitk-bench: %s: %s\n", plot, strerror(-ret));
			failed = 1;
		}
	}
	for (i = 0; i < nr; i++)
		free(rows[i].r.lat_us);
	free(rows);
	return failed;
}
