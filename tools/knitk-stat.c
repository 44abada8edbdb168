// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-stat: the live knots of the knitk module, their geometry, their
 * endpoints (role, pid, alive or dead) and the counters of every doorbell,
 * read from the module's debugfs (one file per knot,
 * /sys/kernel/debug/knitk/knot-<id>, see kmod/knitk_knot.c).
 *
 *   knitk-stat [-w SECONDS] [--json]
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
	unsigned long long id, size;
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

static void usage(FILE *f)
{
	fprintf(f,
		"usage: knitk-stat [-w SECONDS] [--json]\n"
		"\n"
		"Lists the live knots of the knitk module: geometry (size, workers,\n"
		"submitters, stealing and its region size), endpoints (role, slot,\n"
		"pid, generation, alive, dead or left) and the counters of every\n"
		"doorbell, from the module's debugfs (" KNITK_DIR "/knot-<id>).\n"
		"\n"
		"  -w, --watch SECONDS  list again every SECONDS (1..3600) until\n"
		"                       interrupted (default: once)\n"
		"  -j, --json           one JSON object per listing\n"
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
		/* "region" since the knot records its steal region size. */
		if (sscanf(line, "knot %llu size %llu workers %u submitters %u steal %u region %u",
			   &k->id, &k->size, &k->workers, &k->submitters,
			   &k->steal, &k->region_lanes) >= 5)
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

static void print_text(const struct knot *k)
{
	int i, j;

	printf("knot %llu: %llu bytes, %u workers, %u submitters", k->id, k->size,
	       k->workers, k->submitters);
	if (k->steal)
		printf(", stealing in regions of %u lanes", k->region_lanes);
	printf("; death_seq %u\n", k->death_seq);
	printf("  %-7s %5s %8s %5s  %s\n", "role", "slot", "pid", "gen", "state");
	for (i = 0; i < k->nr_roles; i++)
		printf("  %-7s %5u %8d %5u  %s\n", k->roles[i].role, k->roles[i].slot,
		       k->roles[i].pid, k->roles[i].generation, k->roles[i].state);
	printf("  %-8s", "doorbell");
	for (j = 0; j < k->nr_fields; j++)
		printf(" %14s", k->fields[j]);
	putchar('\n');
	for (i = 0; i < k->nr_bells; i++) {
		if (k->bells[i].doorbell == 63)
			printf("  %-8s", "host");
		else
			printf("  %-8u", k->bells[i].doorbell);
		for (j = 0; j < k->nr_fields; j++)
			printf(" %14llu", k->bells[i].v[j]);
		putchar('\n');
	}
}

static void print_json(const struct knot *k, int first)
{
	int i, j;

	printf("%s\n    {\"id\": %llu, \"size\": %llu, \"workers\": %u,"
	       " \"submitters\": %u, \"steal\": %s, \"region_lanes\": %u,"
	       " \"live\": %llu, \"dead\": %llu,"
	       " \"death_seq\": %u,\n     \"endpoints\": [", first ? "" : ",",
	       k->id, k->size, k->workers, k->submitters, k->steal ? "true" : "false",
	       k->region_lanes, k->live, k->dead, k->death_seq);
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

/* One listing; 0, or 1 when the directory cannot be read. */
static int list(int json)
{
	char **names;
	struct knot *k;
	int n, i, shown = 0;
	DIR *dir;

	dir = opendir(KNITK_DIR);
	if (!dir) {
		fprintf(stderr, "knitk-stat: %s: %s\n", KNITK_DIR, strerror(errno));
		return 1;
	}
	n = knot_names(dir, &names);
	closedir(dir);
	k = n < 0 ? NULL : malloc(sizeof(*k));
	if (!k) {
		perror("knitk-stat: malloc");
		while (n > 0)
			free(names[--n]);
		if (!n)
			free(names);
		return 1;
	}
	if (n > 1)
		qsort(names, (size_t)n, sizeof(names[0]), cmp_name);
	if (json)
		printf("{\"time\": %lld, \"knots\": [", (long long)time(NULL));
	for (i = 0; i < n; i++) {
		/* A knot freed since readdir: gone, not an error. */
		if (names[i] && !parse_knot(names[i], k)) {
			if (json)
				print_json(k, !shown);
			else
				print_text(k);
			shown++;
		}
		free(names[i]);
	}
	free(names);
	if (json)
		printf("%s]}\n", shown ? "\n  " : "");
	else if (!shown)
		printf("no knots\n");
	free(k);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "watch", required_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long interval = 0;
	const char *why;
	char *end;
	int opt, json = 0, ret;

	while ((opt = getopt_long(argc, argv, "w:jh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'w':
			errno = 0;
			interval = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || interval < 1 ||
			    interval > 3600) {
				fprintf(stderr, "knitk-stat: -w: '%s' is not a number of"
					" seconds in 1..3600\n", optarg);
				return 2;
			}
			break;
		case 'j': json = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	why = unavailable();
	if (why) {
		fprintf(stderr, "knitk-stat: %s\n", why);
		return 1;
	}
	for (;;) {
		ret = list(json);
		if (ret || !interval)
			return ret;
		sleep((unsigned int)interval);
		if (!json)
			putchar('\n');
	}
}
