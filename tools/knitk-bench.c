// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-bench: knitk against the usual IPC primitives, on the same
 * machine, in one run.
 *
 *   knitk-bench [--quick] [--reps N] [--workers N] [--only PAT[,PAT...]]
 *               [--backend futex|kmod] [--json FILE] [--plot FILE.svg]
 *               [--list]
 *
 * Families (tools/bench/): round trips between two processes and two
 * threads (spin, futex, eventfd, pipe, Unix socket, knitk lanes parking
 * and polling first), one-way throughput with batching (knitk lanes, pipe,
 * eventfd; 8 bytes and 4 KiB), pool calls (knitk thread and process
 * workers vs GLib's GThreadPool, same worker count) and the idle cost of
 * an 8-worker pool with one loaded worker.
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
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <knitk.h>
#include <knitk_pool.h>

#include "bench/bench.h"

struct row {
	const struct bench_case *c;
	struct bench_result r;
	double median_ns, min_ns;
	const struct row *base;
};

static const struct bench_case *const families[] = {
	bench_pingpong_cases, bench_throughput_cases, bench_pool_cases,
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

static void summarize(struct row *row)
{
	double v[BENCH_MAX_REPS];
	int n = row->r.nreps;

	if (n == 0)
		return;
	memcpy(v, row->r.ns, sizeof(double) * (size_t)n);
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	row->median_ns = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	row->min_ns = v[0];
}

static int rate(const struct row *row)
{
	return strcmp(row->c->unit, "ops/s") == 0;
}

/* The row's figure in its own unit (ns per op, or ops per second). */
static double value(const struct row *row, double ns)
{
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

	printf("knitk-bench: backend %s, %ld CPUs online, %d reps%s, %u pool workers\n",
	       backend, sysconf(_SC_NPROCESSORS_ONLN), ctx->reps,
	       ctx->quick ? " (quick)" : "", ctx->workers);
	printf("best: lowest ns/op or highest ops/s of the reps; speed: baseline "
	       "median time per op / this row's (>1 = faster)\n\n");
	printf("%-28s %-6s %14s %14s  %-24s %9s  %s\n", "case", "unit", "median",
	       "best", "baseline", "speed", "msgs");
	for (i = 0; i < nr; i++) {
		const struct row *row = &rows[i];
		char sp[32] = "-", msgs[32] = "-";

		if (!ok_row(row)) {
			printf("%-28s FAILED: %s\n", row->c->name, row->r.why);
			continue;
		}
		if (row->base && row->base != row)
			snprintf(sp, sizeof(sp), "%.3fx", speed(row, row->base));
		if (row->r.has_msgs)
			snprintf(msgs, sizeof(msgs), "%s",
				 row->r.msgs_moved == row->r.msgs_expected ? "ok" : "MISMATCH");
		printf("%-28s %-6s %14.1f %14.1f  %-24s %9s  %s\n", row->c->name,
		       row->c->unit, value(row, row->median_ns),
		       value(row, row->min_ns),
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
		printf("  process CPU time while idle: %.3f ms over %.0f ms wall (%.4f%%)\n",
		       id->cpu_ns / 1e6, id->wall_ns / 1e6, 100 * id->cpu_ns / id->wall_ns);
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

static int write_json(const char *path, const struct row *rows, int nr,
		      const struct bench_ctx *ctx, const char *backend)
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
		fprintf(f, "],\n     \"median_ns\": %.3f, \"min_ns\": %.3f,"
			" \"median\": %.3f, \"best\": %.3f",
			row->median_ns, row->min_ns, value(row, row->median_ns),
			value(row, row->min_ns));
		if (row->base && row->base != row)
			fprintf(f, ", \"speed\": %.4f", speed(row, row->base));
		fprintf(f, ",\n     \"speed_vs\": {");
		first = 1;
		for (j = 0; j < nr; j++) {
			const struct row *b = &rows[j];

			if (b == row || b->c->knitk || !ok_row(b) ||
			    strcmp(b->c->group, row->c->group))
				continue;
			fprintf(f, "%s", first ? "" : ", ");
			json_str(f, b->c->name);
			fprintf(f, ": %.4f", speed(row, b));
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
				" \"loaded_wakes\": %llu, \"cpu_ns\": %.0f, \"wall_ns\": %.0f}",
				id->workers, id->idle_workers,
				(unsigned long long)id->idle_wakes,
				(unsigned long long)id->idle_waits,
				(unsigned long long)id->loaded_wakes, id->cpu_ns,
				id->wall_ns);
		}
		fprintf(f, "}%s\n", i + 1 < nr ? "," : "");
	}
	fprintf(f, "  ]\n}\n");
	if (fclose(f))
		return -errno;
	return 0;
}

/*
 * A bar chart, one panel per group: bar length is the rate (1 / median
 * time per op) relative to the fastest row of the panel; labels carry the
 * row's own figure and its speed against the baseline.
 */
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
		height += bar_h + 4;
	}
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
	fprintf(f, "</svg>\n");
	if (fclose(f))
		return -errno;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: knitk-bench [--quick] [--reps N] [--workers N] [--only PAT[,PAT...]]\n"
		"                   [--backend futex|kmod] [--json FILE] [--plot FILE.svg]\n"
		"                   [--list] [--verbose]\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "reps", required_argument, NULL, 'r' },
		{ "workers", required_argument, NULL, 'w' },
		{ "only", required_argument, NULL, 'o' },
		{ "backend", required_argument, NULL, 'b' },
		{ "json", required_argument, NULL, 'j' },
		{ "plot", required_argument, NULL, 'p' },
		{ "list", no_argument, NULL, 'l' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench_ctx ctx = { .reps = 0 };
	const char *only = NULL, *json = NULL, *plot = NULL, *backend;
	struct row *rows;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int opt, list = 0, nr = 0, i, j, f, ret, failed = 0;

	/* Process workers of the pool cases re-run this program: they stop here. */
	if (knitk_worker_main(argc, argv, &bench_tasks, NULL))
		return 1;
	ctx.workers = ncpu < 1 ? 1 : ncpu > KNITK_MAX_WORKERS ? KNITK_MAX_WORKERS :
		      (unsigned int)ncpu;
	while ((opt = getopt_long(argc, argv, "qr:w:o:b:j:p:lvh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'q': ctx.quick = 1; break;
		case 'r': ctx.reps = atoi(optarg); break;
		case 'w': ctx.workers = (unsigned int)atoi(optarg); break;
		case 'o': only = optarg; break;
		case 'j': json = optarg; break;
		case 'p': plot = optarg; break;
		case 'l': list = 1; break;
		case 'v': ctx.verbose = 1; break;
		case 'b':
			if (!strcmp(optarg, "futex")) {
				ctx.knot_flags = KNITK_KNOT_FUTEX;
			} else if (!strcmp(optarg, "kmod")) {
				ctx.knot_flags = KNITK_KNOT_KMOD;
			} else {
				usage(stderr);
				return 2;
			}
			/* Anything that creates a knot without flags follows too. */
			if (setenv("KNITK_BACKEND", optarg, 1)) {
				perror("setenv");
				return 1;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || ctx.workers < 1 || ctx.workers > KNITK_MAX_WORKERS ||
	    ctx.reps < 0 || ctx.reps > BENCH_MAX_REPS) {
		usage(stderr);
		return 2;
	}
	if (!ctx.reps)
		ctx.reps = ctx.quick ? 3 : 5;

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
	backend = backend_name(ctx.knot_flags);

	for (i = 0; i < nr; i++) {
		if (ctx.verbose) {
			fprintf(stderr, "knitk-bench: %s ...\n", rows[i].c->name);
			fflush(stderr);
		}
		ret = rows[i].c->run(rows[i].c, &ctx, &rows[i].r);
		if (ret && !rows[i].r.failed)
			bench_fail(&rows[i].r, "%s", strerror(-ret));
		if (!ret && rows[i].r.nreps == 0)
			bench_fail(&rows[i].r, "no repetition recorded");
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

	print_table(rows, nr, &ctx, backend);
	if (json) {
		ret = write_json(json, rows, nr, &ctx, backend);
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
	free(rows);
	return failed;
}
