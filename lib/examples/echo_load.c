// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * echo_load: the load generator of echo_epoll and echo_uring.  Opens
 * @connections connections to 127.0.0.1:@port, each sending @requests
 * requests one at a time from its own thread and checking every reply;
 * exits 1 on any wrong, missing or extra reply.
 *
 *   echo_load port connections requests
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "evserver.h"

static int port;
static unsigned long requests;

struct client {
	unsigned int id;
	unsigned long good, bad;
};

static int read_full(int fd, void *p, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = read(fd, (char *)p + got, len - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static void *client_main(void *arg)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)port) };
	struct client *c = arg;
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unsigned long i;

	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		c->bad = requests;
		return NULL;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (i = 0; i < requests; i++) {
		struct ev_msg m = { .id = (uint64_t)c->id << 32 | i,
				    .x = (uint64_t)c->id * 1000003 + i }, r;

		if (write(fd, &m, sizeof(m)) != (ssize_t)sizeof(m) ||
		    read_full(fd, &r, sizeof(r))) {
			c->bad += requests - i;
			break;
		}
		if (r.id == m.id && r.x == ev_work(m.x))
			c->good++;
		else
			c->bad++;
	}
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long good = 0, bad = 0;
	struct client *cs;
	pthread_t *th;
	unsigned int n, i;
	double t0;

	if (argc != 4) {
		fprintf(stderr, "usage: %s port connections requests\n", argv[0]);
		return 2;
	}
	port = atoi(argv[1]);
	n = (unsigned int)atoi(argv[2]);
	requests = strtoul(argv[3], NULL, 0);
	cs = calloc(n, sizeof(*cs));
	th = calloc(n, sizeof(*th));
	if (!cs || !th)
		return 1;
	t0 = ev_now();
	for (i = 0; i < n; i++) {
		cs[i].id = i;
		if (pthread_create(&th[i], NULL, client_main, &cs[i]))
			return 1;
	}
	for (i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		good += cs[i].good;
		bad += cs[i].bad;
	}
	printf("echo_load: %u connections, %lu replies checked, %lu bad, %.0f requests/s\n",
	       n, good, bad, good / (ev_now() - t0));
	return bad || good != n * requests;
}
