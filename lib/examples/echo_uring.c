// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * echo_uring: echo_epoll's server on one io_uring: accept, recv and send
 * are ring operations, and so is the wait for the pool: a read of the
 * event fd (futex backend: an eventfd) or a poll of it (the module's host
 * endpoint), armed after knitk_pool_reap() returned 0.  With -i the loop
 * does the work itself (the baseline).
 *
 *   echo_uring [-p port] [-i] [-n requests] [-w workers]
 */
#define _GNU_SOURCE
#include <poll.h>
#include <liburing.h>

#include "conn.h"

enum { OP_ACCEPT = 1, OP_RECV, OP_SEND, OP_POOL };

#define TAG(op, fd)	((uint64_t)(fd) << 8 | (op))

static struct io_uring ring;
static struct knitk_pool *pool;
static int efd = -1, efd_read;	/* futex: read the eventfd; else poll */
static uint64_t efd_buf;
static int pool_armed;
static unsigned char recving[EV_MAX_FD], sending[EV_MAX_FD];

static struct io_uring_sqe *sqe_get(void)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

	if (!sqe) {
		io_uring_submit(&ring);
		sqe = io_uring_get_sqe(&ring);
	}
	return sqe;
}

static void arm_accept(int lfd)
{
	struct io_uring_sqe *sqe = sqe_get();

	io_uring_prep_accept(sqe, lfd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, TAG(OP_ACCEPT, lfd));
}

static void arm_recv(int fd)
{
	struct ev_conn *c = &ev_conns[fd];
	struct io_uring_sqe *sqe;

	if (recving[fd] || !c->open || c->in_len == sizeof(c->in))
		return;
	sqe = sqe_get();
	io_uring_prep_recv(sqe, fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);
	io_uring_sqe_set_data64(sqe, TAG(OP_RECV, fd));
	recving[fd] = 1;
}

/* One send in flight per connection, from its reply buffer. */
static void arm_send(int fd)
{
	struct ev_conn *c = &ev_conns[fd];
	struct io_uring_sqe *sqe;

	if (sending[fd] || !c->open || !c->out_len)
		return;
	sqe = sqe_get();
	io_uring_prep_send(sqe, fd, c->out, c->out_len, 0);
	io_uring_sqe_set_data64(sqe, TAG(OP_SEND, fd));
	sending[fd] = 1;
}

static void arm_pool(void)
{
	struct io_uring_sqe *sqe;

	if (pool_armed)
		return;
	sqe = sqe_get();
	if (efd_read)
		io_uring_prep_read(sqe, efd, &efd_buf, sizeof(efd_buf), 0);
	else
		io_uring_prep_poll_add(sqe, efd, POLLIN);
	io_uring_sqe_set_data64(sqe, TAG(OP_POOL, 0));
	pool_armed = 1;
}

/* A connection is closed once no operation of it is in flight. */
static void conn_drop(int fd)
{
	ev_conns[fd].open = 0;
	if (!recving[fd] && !sending[fd])
		ev_conn_close(fd);
}

/* Replies queued or being sent. */
static int replies_pending(void)
{
	int fd;

	for (fd = 0; fd < EV_MAX_FD; fd++)
		if (ev_conns[fd].open && (ev_conns[fd].out_len || sending[fd]))
			return 1;
	return 0;
}

static void complete(struct io_uring_cqe *cqe, int lfd)
{
	int op = (int)(cqe->user_data & 0xff), fd = (int)(cqe->user_data >> 8);
	int res = cqe->res;
	struct ev_conn *c = &ev_conns[fd];

	switch (op) {
	case OP_ACCEPT:
		if (res >= 0 && res < EV_MAX_FD) {
			int one = 1;

			setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			ev_conn_open(res);
			arm_recv(res);
		} else if (res >= 0) {
			close(res);
		}
		arm_accept(lfd);
		break;
	case OP_RECV:
		recving[fd] = 0;
		if (res <= 0 || !c->open) {
			conn_drop(fd);
			break;
		}
		c->in_len += (size_t)res;
		if (ev_handle_input(pool, fd)) {
			conn_drop(fd);
			break;
		}
		arm_recv(fd);
		arm_send(fd);
		break;
	case OP_SEND:
		sending[fd] = 0;
		if (res < 0 || !c->open) {
			conn_drop(fd);
			break;
		}
		memmove(c->out, c->out + res, c->out_len - (size_t)res);
		c->out_len -= (size_t)res;
		arm_send(fd);
		break;
	case OP_POOL:
		pool_armed = 0;
		break;
	}
}

int main(int argc, char **argv)
{
	struct io_uring_cqe *cqe;
	struct ev_opts o;
	struct knitk_endpoint *knot;
	double t0;
	int lfd, fd, ret;

	ret = ev_start("echo_uring", argc, argv, &o, &pool, &efd);
	if (ret)
		return ret;
	if (pool) {
		if (knitk_pool_endpoint(pool, &knot)) {
			fprintf(stderr, "echo_uring: no pool\n");
			return 1;
		}
		efd_read = knitk_endpoint_backend(knot) == KNITK_BACKEND_FUTEX;
	}
	lfd = ev_listen(o.port, 0);
	if (lfd < 0 || io_uring_queue_init(256, &ring, 0))
		return 1;
	arm_accept(lfd);
	t0 = ev_now();
	while (!o.requests || ev_served < o.requests || replies_pending()) {
		unsigned int head, n = 0;

		if (pool) {
			/* Reap until 0, which arms the fd; then wait for it on the ring. */
			ev_reap(pool);
			for (fd = 0; fd < EV_MAX_FD; fd++) {
				if (!ev_conns[fd].open)
					continue;
				if (ev_conns[fd].in_len >= EV_MSG && ev_handle_input(pool, fd)) {
					conn_drop(fd);
					continue;
				}
				arm_recv(fd);
				arm_send(fd);
			}
			arm_pool();
		}
		io_uring_submit_and_wait(&ring, 1);
		io_uring_for_each_cqe(&ring, head, cqe) {
			complete(cqe, lfd);
			n++;
		}
		io_uring_cq_advance(&ring, n);
	}
	ev_report("echo_uring", pool, t0);
	io_uring_queue_exit(&ring);
	if (pool)
		knitk_pool_destroy(pool);
	return 0;
}
