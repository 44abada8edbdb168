// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * echo: an echo service.  Client threads send messages of many sizes (from
 * empty to larger than a lane's inline bytes, so through the arena) and
 * check that each comes back unchanged; prints calls per second.
 *
 *   echo [-p] [-c clients] [calls per client]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"

static int task_echo(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	(void)ctx;
	return knitk_reply_set(out, in, len);
}

static const knitk_task_fn fns[] = { task_echo };
static const struct knitk_task_table tasks = { .tasks = fns, .nr_tasks = 1 };

struct client {
	struct knitk_pool *pool;
	unsigned int id;
	unsigned long calls, bad;
};

static void *client_main(void *arg)
{
	struct client *c = arg;
	static const size_t sizes[] = { 0, 1, 63, 192, 193, 1000, 4096, 20000 };
	unsigned char msg[20000], back[20000];
	unsigned long i;

	for (i = 0; i < c->calls; i++) {
		size_t len = sizes[i % 8], got = 0;

		memset(msg, (int)(c->id * 31 + i), len);
		if (knitk_pool_call(c->pool, 0, msg, len, NULL, back, sizeof(back),
				    &got) != 0 || got != len || memcmp(msg, back, len))
			c->bad++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 2 };
	unsigned int nr_clients = 4, i;
	unsigned long per = 20000, bad = 0;
	struct client cl[64];
	pthread_t th[64];
	struct knitk_pool *pool;
	struct timespec a, b;
	double s;
	int opt, ret;

	if (knitk_worker_main(argc, argv, &tasks, NULL))
		return 1;
	while ((opt = getopt(argc, argv, "pc:")) != -1) {
		if (opt == 'p')
			o.kind = KNITK_WORKER_PROCESSES;
		else if (opt == 'c')
			nr_clients = (unsigned int)atoi(optarg);
		else
			return 2;
	}
	if (optind < argc)
		per = strtoul(argv[optind], NULL, 0);
	if (!nr_clients || nr_clients > 64)
		return 2;
	o.nr_submitters = nr_clients;
	ret = knitk_pool_create(&o, &tasks, &pool);
	if (ret) {
		fprintf(stderr, "echo: knitk_pool_create: %s\n", strerror(-ret));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < nr_clients; i++) {
		cl[i] = (struct client){ pool, i, per, 0 };
		pthread_create(&th[i], NULL, client_main, &cl[i]);
	}
	for (i = 0; i < nr_clients; i++) {
		pthread_join(th[i], NULL);
		bad += cl[i].bad;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	s = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
	printf("echo: %lu calls from %u clients, %lu wrong, %.0f calls/s\n",
	       per * nr_clients, nr_clients, bad, per * nr_clients / s);
	knitk_pool_destroy(pool);
	return bad ? 1 : 0;
}
