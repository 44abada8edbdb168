/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * What the event-loop echo servers (echo_epoll.c, echo_uring.c) and their
 * load generator (echo_load.c) share: the wire format, the work a request
 * costs, the pool's task, the listening socket and the servers' options
 * and start.
 *
 * A request is 16 bytes, { u64 id, u64 x }; its reply { id, work(x) }.
 */
#ifndef EVSERVER_H
#define EVSERVER_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"

#define EV_MSG		16
#define EV_ROUNDS	2000	/* the work of one request */

struct ev_msg {
	uint64_t id;
	uint64_t x;
};

/* The work: a few microseconds of mixing. */
static inline uint64_t ev_work(uint64_t x)
{
	unsigned int i;

	for (i = 0; i < EV_ROUNDS; i++) {
		x ^= x >> 33;
		x *= 0xff51afd7ed558ccdULL;
		x ^= x >> 29;
	}
	return x;
}

/*
 * The pool's task: the argument is the request plus the connection it
 * came from ({ fd, generation }), echoed back so the reply finds it.
 */
struct ev_call {
	int32_t fd;
	uint32_t gen;
	struct ev_msg msg;
};

static int ev_task(const void *in, size_t len, struct knitk_reply *out,
		   void *ctx)
{
	struct ev_call c;

	(void)ctx;
	if (len != sizeof(c))
		return -EINVAL;
	memcpy(&c, in, sizeof(c));
	c.msg.x = ev_work(c.msg.x);
	return knitk_reply_set(out, &c, sizeof(c));
}

static const knitk_task_fn ev_fns[] = { ev_task };
static const struct knitk_task_table ev_tasks = { .tasks = ev_fns, .nr_tasks = 1 };

/* A listening socket on 127.0.0.1:@port (0: any); prints the port. */
static inline int ev_listen(int port, int flags)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)port) };
	socklen_t al = sizeof(a);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 512) ||
	    getsockname(fd, (struct sockaddr *)&a, &al)) {
		close(fd);
		return -errno;
	}
	printf("listening on port %u\n", ntohs(a.sin_port));
	fflush(stdout);
	return fd;
}

static inline double ev_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Options of both servers: -p port, -i (work inline), -n requests to serve. */
struct ev_opts {
	int port;
	int inline_work;
	unsigned long requests;	/* 0: forever */
	unsigned int workers;
};

static inline int ev_parse(int argc, char **argv, struct ev_opts *o)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->workers = 2;
	while ((c = getopt(argc, argv, "p:in:w:")) != -1) {
		switch (c) {
		case 'p': o->port = atoi(optarg); break;
		case 'i': o->inline_work = 1; break;
		case 'n': o->requests = strtoul(optarg, NULL, 0); break;
		case 'w': o->workers = (unsigned int)atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-p port] [-i] [-n requests] [-w workers]\n",
				argv[0]);
			return -1;
		}
	}
	return 0;
}

/*
 * A server's start: in a process worker of its pool, run the tasks (never
 * returns); in the server, parse @o and, unless -i, create the pool and
 * take its event fd (*@pool NULL and *@efd -1 without one).  0, or the
 * status for main() to exit with.
 */
static inline int ev_start(const char *name, int argc, char **argv,
			   struct ev_opts *o, struct knitk_pool **pool, int *efd)
{
	struct knitk_pool_opts po = { .size = sizeof(po) };

	*pool = NULL;
	*efd = -1;
	if (knitk_worker_main(argc, argv, &ev_tasks, NULL) || ev_parse(argc, argv, o))
		return 2;
	if (o->inline_work)
		return 0;
	po.nr_workers = o->workers;
	if (knitk_pool_create(&po, &ev_tasks, pool) ||
	    (*efd = knitk_pool_event_fd(*pool)) < 0) {
		fprintf(stderr, "%s: no pool\n", name);
		return 1;
	}
	return 0;
}

#endif /* EVSERVER_H */
