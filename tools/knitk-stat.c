// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-stat: the live knots of the knitk module, their geometry, their
 * endpoints (role, pid, alive or dead) and the counters of every doorbell,
 * read from the module's debugfs (one file per knot,
 * /sys/kernel/debug/knitk/knot-<id>, see kmod/knitk_knot.c).
 *
 *   knitk-stat [-w SECONDS [-c COUNT]] [--json | --prometheus]
 *
 * With -w, the text listing shows the doorbell counters as rates per
 * second since the previous listing; --prometheus prints the Prometheus
 * text format (for node_exporter's textfile collector).
 *
 * debugfs is root-only: run by another user, or without the module, or
 * without debugfs mounted, knitk-stat says which and exits 1.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The host's doorbell in the module's listing (KNITK_DOORBELL_HOST). */
#define HOST_DOORBELL	63

#define DEBUGFS		"/sys/kernel/debug"
#define KNITK_DIR	DEBUGFS "/knitk"
#define MAX_FIELDS	16
#define MAX_ROWS	64

struct endpoint {
	char role[8], state[8];
	unsigned int slot, generation;
	int pid;
};

struct bell {
	unsigned int doorbell;
	unsigned long long v[MAX_FIELDS];
};

struct knot {
	char name[32];
	unsigned long long id, size, huge;
	unsigned int workers, submitters, steal, region_lanes;
	unsigned long long live, dead;
	unsigned int death_seq;
	int nr_roles;
	struct endpoint roles[MAX_ROWS];
	int nr_fields;
	char fields[MAX_FIELDS][24];
	int nr_bells;
	struct bell bells[MAX_ROWS];
};

/* Every knot of one listing, and when it was read (CLOCK_MONOTONIC, ns). */
struct listing {
	struct knot *k;
	int n;
	unsigned long long t;
};

enum { OUT_TEXT, OUT_JSON, OUT_PROM };

static void usage(FILE *f)
{
	fprintf(f,
		"usage: knitk-stat [-w SECONDS [-c COUNT]] [--json | --prometheus]\n"
		"\n"
		"Lists the live knots of the knitk module: geometry (size, workers,\n"
		"submitters, stealing and its region size), endpoints (role, slot,\n"
		"pid, generation, alive, dead or left) and the counters of every\n"
		"doorbell, from the module's debugfs (" KNITK_DIR "/knot-<id>).\n"
		"\n"
		"  -w, --watch SECONDS  list again every SECONDS (1..3600) until\n"
		"                       interrupted (default: once); the text\n"
		"                       listings after the first show the doorbell\n"
		"                       counters as rates per second\n"
		"  -c, --count COUNT    with -w: stop after COUNT listings\n"
		"  -j, --json           one JSON object per listing (totals)\n"
		"  -p, --prometheus     the Prometheus text format (totals): one\n"
		"                       metric family per counter, labelled by\n"
		"                       knot, role and doorbell\n"
		"  -h, --help           this text\n"
		"\n"
		"debugfs is readable by root only, so knitk-stat needs root.  Run by\n"
		"another user, without the module loaded or without debugfs mounted,\n"
		"it says which and exits with status 1; bad options exit 2.\n");
}

/* Why the knots cannot be listed, or NULL. */
static const char *unavailable(void)
{
	struct stat st;

	if (stat("/sys/module/knitk", &st))
		return "the knitk module is not loaded (modprobe knitk)";
	if (geteuid() != 0)
		return "the knot statistics are in debugfs, readable by root only:"
		       " run knitk-stat as root";
	if (stat(KNITK_DIR, &st))
		return "debugfs is not mounted at " DEBUGFS
		       " (mount -t debugfs none " DEBUGFS ")";
	return NULL;
}

static int parse_knot(const char *name, struct knot *k)
{
	char path[512], line[1024], *tok, *save;
	int section = 0, n;
	FILE *f;

	memset(k, 0, sizeof(*k));
	snprintf(k->name, sizeof(k->name), "%s", name);
	snprintf(path, sizeof(path), KNITK_DIR "/%s", name);
	f = fopen(path, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		/*
		 * "region" since the knot records its steal region size,
		 * "huge" since its memory may come in huge chunks.
		 */
		if (sscanf(line, "knot %llu size %llu workers %u submitters %u steal %u"
			   " region %u huge %llu", &k->id, &k->size, &k->workers,
			   &k->submitters, &k->steal, &k->region_lanes, &k->huge) >= 5)
			continue;
		if (sscanf(line, "live %llx dead %llx death_seq %u", &k->live,
			   &k->dead, &k->death_seq) == 3)
			continue;
		if (!strncmp(line, "role ", 5)) {
			section = 1;
			continue;
		}
		if (!strncmp(line, "doorbell ", 9)) {
			section = 2;
			strtok_r(line, " \n", &save);
			while ((tok = strtok_r(NULL, " \n", &save)) &&
			       k->nr_fields < MAX_FIELDS)
				snprintf(k->fields[k->nr_fields++], sizeof(k->fields[0]),
					 "%s", tok);
			continue;
		}
		if (section == 1 && k->nr_roles < MAX_ROWS) {
			struct endpoint *r = &k->roles[k->nr_roles];

			if (sscanf(line, "%7s %u %d %u %7s", r->role, &r->slot, &r->pid,
				   &r->generation, r->state) == 5)
				k->nr_roles++;
		} else if (section == 2 && k->nr_bells < MAX_ROWS) {
			struct bell *b = &k->bells[k->nr_bells];

			tok = strtok_r(line, " \n", &save);
			if (!tok)
				continue;
			b->doorbell = (unsigned int)strtoul(tok, NULL, 10);
			for (n = 0; n < k->nr_fields &&
			     (tok = strtok_r(NULL, " \n", &save)); n++)
				b->v[n] = strtoull(tok, NULL, 10);
			k->nr_bells++;
		}
	}
	fclose(f);
	return k->id ? 0 : -EPROTO;
}

static const struct bell *find_bell(const struct knot *k, unsigned int doorbell)
{
	int i;

	for (i = 0; k && i < k->nr_bells; i++)
		if (k->bells[i].doorbell == doorbell)
			return &k->bells[i];
	return NULL;
}

static const struct knot *find_knot(const struct listing *l, unsigned long long id)
{
	int i;

	for (i = 0; l && i < l->n; i++)
		if (l->k[i].id == id)
			return &l->k[i];
	return NULL;
}

/*
 * One knot as text; with @prev (the same knot @secs seconds before) the
 * doorbell counters are rates per second since then.
 */
static void print_text(const struct knot *k, const struct knot *prev, double secs)
{
	int i, j;

	printf("knot %llu: %llu bytes, %u workers, %u submitters", k->id, k->size,
	       k->workers, k->submitters);
	if (k->steal)
		printf(", stealing in regions of %u lanes", k->region_lanes);
	if (k->huge)
		printf(", %llu bytes in huge chunks", k->huge);
	printf("; death_seq %u\n", k->death_seq);
	printf("  %-7s %5s %8s %5s  %s\n", "role", "slot", "pid", "gen", "state");
	for (i = 0; i < k->nr_roles; i++)
		printf("  %-7s %5u %8d %5u  %s\n", k->roles[i].role, k->roles[i].slot,
		       k->roles[i].pid, k->roles[i].generation, k->roles[i].state);
	if (!prev || secs <= 0)
		prev = NULL;
	printf("  %-8s", prev ? "per sec" : "doorbell");
	for (j = 0; j < k->nr_fields; j++)
		printf(" %14s", k->fields[j]);
	putchar('\n');
	for (i = 0; i < k->nr_bells; i++) {
		const struct bell *b = &k->bells[i], *pb = find_bell(prev, b->doorbell);

		if (b->doorbell == HOST_DOORBELL)
			printf("  %-8s", "host");
		else
			printf("  %-8u", b->doorbell);
		for (j = 0; j < k->nr_fields; j++) {
			/* A doorbell new since then, or a counter reset: from 0. */
			unsigned long long was = pb && pb->v[j] <= b->v[j] ? pb->v[j] : 0;

			if (prev)
				printf(" %14.1f", (double)(b->v[j] - was) / secs);
			else
				printf(" %14llu", b->v[j]);
		}
		putchar('\n');
	}
}

static void print_json(const struct knot *k, int first)
{
	int i, j;

	printf("%s\n    {\"id\": %llu, \"size\": %llu, \"workers\": %u,"
	       " \"submitters\": %u, \"steal\": %s, \"region_lanes\": %u,"
	       " \"huge_bytes\": %llu, \"live\": %llu, \"dead\": %llu,"
	       " \"death_seq\": %u,\n     \"endpoints\": [", first ? "" : ",",
	       k->id, k->size, k->workers, k->submitters, k->steal ? "true" : "false",
	       k->region_lanes, k->huge, k->live, k->dead, k->death_seq);
	for (i = 0; i < k->nr_roles; i++)
		printf("%s{\"role\": \"%s\", \"slot\": %u, \"pid\": %d,"
		       " \"generation\": %u, \"state\": \"%s\"}", i ? ", " : "",
		       k->roles[i].role, k->roles[i].slot, k->roles[i].pid,
		       k->roles[i].generation, k->roles[i].state);
	printf("],\n     \"doorbells\": [");
	for (i = 0; i < k->nr_bells; i++) {
		printf("%s{\"doorbell\": %u", i ? ", " : "", k->bells[i].doorbell);
		for (j = 0; j < k->nr_fields; j++)
			printf(", \"%s\": %llu", k->fields[j], k->bells[i].v[j]);
		putchar('}');
	}
	printf("]}");
}

/* A metric family's header: name, type and help, once before its samples. */
static void prom_family(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* @field as a metric name's part: [a-z0-9_], anything else '_'. */
static void prom_part(char *out, size_t cap, const char *field)
{
	size_t i;

	for (i = 0; field[i] && i + 1 < cap; i++)
		out[i] = (field[i] >= 'a' && field[i] <= 'z') ||
			 (field[i] >= '0' && field[i] <= '9') ? field[i] : '_';
	out[i] = '\0';
}

/* Gauge @g of knot @k: its bytes, workers, submitters, region, death_seq. */
static unsigned long long knot_gauge(const struct knot *k, int g)
{
	switch (g) {
	case 0: return k->size;
	case 1: return k->workers;
	case 2: return k->submitters;
	case 3: return k->steal ? k->region_lanes : 0;
	case 4: return k->huge;
	default: return k->death_seq;
	}
}

/*
 * The Prometheus text format of a listing: the knots' geometry as gauges,
 * an info metric per endpoint, and one counter family per doorbell
 * counter (labels knot, role, doorbell), every family's samples together.
 */
static void print_prom(const struct listing *l)
{
	static const struct {
		const char *name, *help;
	} geo[] = {	/* in the order of knot_gauge() */
		{ "knitk_knot_bytes", "Bytes of the knot's shared memory." },
		{ "knitk_knot_workers", "Worker roles of the knot." },
		{ "knitk_knot_submitters", "Submitter slots of the knot." },
		{ "knitk_knot_region_lanes",
		  "Lanes per stealing region (0: the knot does not steal)." },
		{ "knitk_knot_huge_bytes",
		  "Bytes of the knot in physically contiguous huge chunks." },
		{ "knitk_knot_death_seq",
		  "The knot's death_seq: roles ended by a death, modulo 2^32." },
	};
	const char *fams[4 * MAX_FIELDS];
	char name[64], part[32], help[96];
	int g, i, j, f, nr = 0;

	prom_family("knitk_knots", "gauge", "Live knots of the knitk module.");
	printf("knitk_knots %d\n", l->n);
	for (g = 0; g < (int)(sizeof(geo) / sizeof(geo[0])); g++) {
		prom_family(geo[g].name, "gauge", geo[g].help);
		for (i = 0; i < l->n; i++)
			printf("%s{knot=\"%llu\"} %llu\n", geo[g].name, l->k[i].id,
			       knot_gauge(&l->k[i], g));
	}
	prom_family("knitk_endpoint_info", "gauge",
		    "An endpoint of a knot, by its labels; always 1.");
	for (i = 0; i < l->n; i++)
		for (j = 0; j < l->k[i].nr_roles; j++) {
			const struct endpoint *r = &l->k[i].roles[j];

			printf("knitk_endpoint_info{knot=\"%llu\",role=\"%s\",slot=\"%u\","
			       "pid=\"%d\",generation=\"%u\",state=\"%s\"} 1\n",
			       l->k[i].id, r->role, r->slot, r->pid, r->generation, r->state);
		}
	/* Every counter once, in the order the knots name them. */
	for (i = 0; i < l->n; i++)
		for (f = 0; f < l->k[i].nr_fields; f++) {
			for (j = 0; j < nr && strcmp(fams[j], l->k[i].fields[f]); j++)
				;
			if (j == nr && nr < (int)(sizeof(fams) / sizeof(fams[0])))
				fams[nr++] = l->k[i].fields[f];
		}
	for (f = 0; f < nr; f++) {
		prom_part(part, sizeof(part), fams[f]);
		snprintf(name, sizeof(name), "knitk_doorbell_%s_total", part);
		snprintf(help, sizeof(help), "The doorbell counter %s (KNITK_IOC_STATS).", part);
		prom_family(name, "counter", help);
		for (i = 0; i < l->n; i++) {
			const struct knot *k = &l->k[i];

			for (j = 0; j < k->nr_fields && strcmp(k->fields[j], fams[f]); j++)
				;
			for (g = 0; j < k->nr_fields && g < k->nr_bells; g++)
				printf("%s{knot=\"%llu\",role=\"%s\",doorbell=\"%u\"} %llu\n",
				       name, k->id,
				       k->bells[g].doorbell == HOST_DOORBELL ? "host" : "worker",
				       k->bells[g].doorbell, k->bells[g].v[j]);
		}
	}
}

static int cmp_name(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;
	size_t lx = strlen(x), ly = strlen(y);

	return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x, y);
}

/*
 * The knot-<id> names of @dir, as many as there are, in *@names; returns
 * how many, or -1 when memory runs out.
 */
static int knot_names(DIR *dir, char ***names)
{
	char **v = NULL, **grown;
	struct dirent *de;
	size_t n = 0, cap = 0;

	while ((de = readdir(dir))) {
		if (strncmp(de->d_name, "knot-", 5))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			grown = realloc(v, cap * sizeof(*v));
			if (!grown)
				break;
			v = grown;
		}
		v[n] = strdup(de->d_name);
		if (!v[n])
			break;
		n++;
	}
	*names = v;
	if (de) {
		while (n)
			free(v[--n]);
		free(v);
		return -1;
	}
	return (int)n;
}

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

/* Read every knot into @l; 0, or 1 when the directory cannot be read. */
static int collect(struct listing *l)
{
	char **names;
	int n, i;
	DIR *dir;

	l->k = NULL;
	l->n = 0;
	l->t = now_ns();
	dir = opendir(KNITK_DIR);
	if (!dir) {
		fprintf(stderr, "knitk-stat: %s: %s\n", KNITK_DIR, strerror(errno));
		return 1;
	}
	n = knot_names(dir, &names);
	closedir(dir);
	l->k = n < 0 ? NULL : calloc(n ? (size_t)n : 1, sizeof(*l->k));
	if (!l->k) {
		perror("knitk-stat: malloc");
		while (n > 0)
			free(names[--n]);
		if (!n)
			free(names);
		return 1;
	}
	if (n > 1)
		qsort(names, (size_t)n, sizeof(names[0]), cmp_name);
	for (i = 0; i < n; i++) {
		/* A knot freed since readdir: gone, not an error. */
		if (names[i] && !parse_knot(names[i], &l->k[l->n]))
			l->n++;
		free(names[i]);
	}
	free(names);
	return 0;
}

/* Print @l in @mode; @prev: the listing before it (text rates), or NULL. */
static void output(int mode, const struct listing *l, const struct listing *prev)
{
	double secs = prev ? (double)(l->t - prev->t) / 1e9 : 0;
	int i;

	if (mode == OUT_PROM) {
		print_prom(l);
	} else if (mode == OUT_JSON) {
		printf("{\"time\": %lld, \"knots\": [", (long long)time(NULL));
		for (i = 0; i < l->n; i++)
			print_json(&l->k[i], !i);
		printf("%s]}\n", l->n ? "\n  " : "");
	} else {
		for (i = 0; i < l->n; i++)
			print_text(&l->k[i], find_knot(prev, l->k[i].id), secs);
		if (!l->n)
			printf("no knots\n");
	}
	fflush(stdout);
}

/* A number in @lo..@hi from option @opt's argument, or -1. */
static long number(int opt, const char *arg, long lo, long hi, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < lo || v > hi) {
		fprintf(stderr, "knitk-stat: -%c: '%s' is not a number of %s in %ld..%ld\n",
			opt, arg, what, lo, hi);
		return -1;
	}
	return v;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "watch", required_argument, NULL, 'w' },
		{ "count", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "prometheus", no_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct listing cur, prev = { NULL, 0, 0 };
	long interval = 0, count = 0, i;
	int opt, mode = OUT_TEXT, modes = 0, ret = 0;
	const char *why;

	while ((opt = getopt_long(argc, argv, "w:c:jph", longopts, NULL)) != -1) {
		switch (opt) {
		case 'w':
			interval = number(opt, optarg, 1, 3600, "seconds");
			if (interval < 0)
				return 2;
			break;
		case 'c':
			count = number(opt, optarg, 1, 1000000, "listings");
			if (count < 0)
				return 2;
			break;
		case 'j': mode = OUT_JSON; modes++; break;
		case 'p': mode = OUT_PROM; modes++; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || modes > 1 || (count && !interval)) {
		if (modes > 1)
			fprintf(stderr, "knitk-stat: --json and --prometheus exclude each other\n");
		else if (count && !interval)
			fprintf(stderr, "knitk-stat: -c counts the listings of -w\n");
		usage(stderr);
		return 2;
	}
	why = unavailable();
	if (why) {
		fprintf(stderr, "knitk-stat: %s\n", why);
		return 1;
	}
	for (i = 0; !ret; i++) {
		ret = collect(&cur);
		if (ret)
			break;
		output(mode, &cur, i ? &prev : NULL);
		free(prev.k);
		prev = cur;
		if (!interval || (count && i + 1 >= count))
			break;
		sleep((unsigned int)interval);
		if (mode == OUT_TEXT)
			putchar('\n');
	}
	free(prev.k);
	return ret;
}
