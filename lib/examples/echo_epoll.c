// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * echo_epoll: a TCP server on one epoll loop that offloads each request's
 * work to a knitk pool and writes the reply when the completion arrives.
 * The pool's knitk_pool_event_fd() sits in the same epoll set as the
 * sockets (edge-triggered); knitk_pool_reap() collects the results and
 * never blocks.  With -i the loop does the work itself (the baseline).
 *
 *   echo_epoll [-p port] [-i] [-n requests] [-w workers]
 *   echo_load port connections requests     (the load generator)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/epoll.h>

#include "conn.h"

static struct knitk_pool *pool;

static void flush(int fd)
{
	struct ev_conn *c = &ev_conns[fd];
	ssize_t n;

	while (c->out_len) {
		n = write(fd, c->out, c->out_len);
		if (n <= 0)
			return;	/* EAGAIN: EPOLLOUT (edge) comes back */
		memmove(c->out, c->out + n, c->out_len - (size_t)n);
		c->out_len -= (size_t)n;
	}
}

static void read_conn(int fd)
{
	struct ev_conn *c = &ev_conns[fd];
	ssize_t n;

	for (;;) {
		n = read(fd, c->in + c->in_len, sizeof(c->in) - c->in_len);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			ev_conn_close(fd);
			return;
		}
		if (n < 0)
			break;
		c->in_len += (size_t)n;
		if (ev_handle_input(pool, fd)) {
			ev_conn_close(fd);
			return;
		}
		if (c->in_len == sizeof(c->in))
			break;	/* stalled on a full pool */
	}
	flush(fd);
}

/* Reap until 0 (which arms the event fd), then write what came. */
static void reap_all(void)
{
	int fd;

	ev_reap(pool);
	for (fd = 0; fd < EV_MAX_FD; fd++) {
		if (!ev_conns[fd].open)
			continue;
		/* Connections stalled on a full pool go on. */
		if (ev_conns[fd].in_len >= EV_MSG && ev_handle_input(pool, fd))
			ev_conn_close(fd);
		else
			flush(fd);
	}
}

int main(int argc, char **argv)
{
	struct epoll_event ev = { .events = EPOLLIN }, evs[64];
	struct ev_opts o;
	int lfd, ep, efd, n, i, ret;
	double t0 = 0;

	ret = ev_start("echo_epoll", argc, argv, &o, &pool, &efd);
	if (ret)
		return ret;
	lfd = ev_listen(o.port, SOCK_NONBLOCK);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (lfd < 0 || ep < 0)
		return 1;
	ev.data.fd = lfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	if (pool) {
		ev.events = EPOLLIN | EPOLLPRI | EPOLLET;
		ev.data.fd = efd;
		epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
	}
	while (!o.requests || ev_served < o.requests) {
		if (pool)
			reap_all();	/* until 0: the fd is armed for epoll_wait */
		n = epoll_wait(ep, evs, 64, -1);
		for (i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == lfd) {
				int c;

				while ((c = accept4(lfd, NULL, NULL,
						    SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					int one = 1;

					if (c >= EV_MAX_FD) {
						close(c);
						continue;
					}
					if (!t0)
						t0 = ev_now();
					setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
					ev_conn_open(c);
					ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
					ev.data.fd = c;
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
				}
			} else if (fd != efd && ev_conns[fd].open) {
				if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
					read_conn(fd);
				if (ev_conns[fd].open && (evs[i].events & EPOLLOUT))
					flush(fd);
			}
		}
	}
	for (i = 0; i < EV_MAX_FD; i++)
		if (ev_conns[i].open) {
			flush(i);
			ev_conn_close(i);
		}
	ev_report("echo_epoll", pool, t0);
	if (pool)
		knitk_pool_destroy(pool);
	return 0;
}
