/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The servers' connections, indexed by fd: bytes read and not yet a whole
 * request, replies not yet written, and a generation so that a reply for
 * a closed connection whose fd was reused is dropped; the requests served
 * and the servers' closing report of them.
 */
#ifndef EV_CONN_H
#define EV_CONN_H

#include "evserver.h"

#define EV_MAX_FD	4096

struct ev_conn {
	uint32_t gen;
	int open;
	size_t in_len;
	unsigned char in[4096];
	size_t out_len, out_cap;
	unsigned char *out;
};

static struct ev_conn ev_conns[EV_MAX_FD];

/* Queue @len reply bytes for @fd. */
static inline int ev_queue(int fd, const void *p, size_t len)
{
	struct ev_conn *c = &ev_conns[fd];

	if (c->out_len + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap * 2 : 256;
		unsigned char *n;

		while (cap < c->out_len + len)
			cap *= 2;
		n = realloc(c->out, cap);
		if (!n)
			return -ENOMEM;
		c->out = n;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, p, len);
	c->out_len += len;
	return 0;
}

static inline void ev_conn_open(int fd)
{
	struct ev_conn *c = &ev_conns[fd];

	c->gen++;
	c->open = 1;
	c->in_len = 0;
	c->out_len = 0;
}

static inline void ev_conn_close(int fd)
{
	struct ev_conn *c = &ev_conns[fd];

	c->open = 0;
	c->gen++;
	free(c->out);
	c->out = NULL;
	c->out_cap = c->out_len = 0;
	close(fd);
}

static unsigned long ev_served;

/* A server's closing lines: requests served since @t0, and the pool's counts. */
static inline void ev_report(const char *name, struct knitk_pool *pool, double t0)
{
	struct knitk_pool_stats st = { .size = sizeof(st) };
	double s = ev_now() - t0;

	printf("%s (%s): %lu requests in %.3f s: %.0f requests/s\n",
	       name, pool ? "pool" : "inline", ev_served, s, ev_served / s);
	if (pool && knitk_pool_stats(pool, &st) == 0)
		printf("%s: pool calls %llu, event fd writes %llu\n", name,
		       (unsigned long long)st.completed,
		       (unsigned long long)st.event_writes);
}

/*
 * Submit to @pool (or, without one, do inline) every whole request in
 * @fd's buffer; a full pool (-EAGAIN) leaves the rest for after a reap.
 */
static inline int ev_handle_input(struct knitk_pool *pool, int fd)
{
	struct ev_conn *c = &ev_conns[fd];
	size_t off = 0;

	while (c->in_len - off >= EV_MSG) {
		struct ev_call call = { .fd = fd, .gen = c->gen };
		struct knitk_call *h;
		int ret;

		memcpy(&call.msg, c->in + off, EV_MSG);
		if (!pool) {
			call.msg.x = ev_work(call.msg.x);
			if (ev_queue(fd, &call.msg, EV_MSG))
				return -1;
			ev_served++;
		} else {
			ret = knitk_pool_submit(pool, 0, &call, sizeof(call), NULL, &h);
			if (ret == -EAGAIN)
				break;
			if (ret)
				return -1;
		}
		off += EV_MSG;
	}
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
	return 0;
}

/* Reap every finished call until none is left, queueing its reply. */
static inline void ev_reap(struct knitk_pool *pool)
{
	struct knitk_call *calls[64];
	int n, i;

	while ((n = knitk_pool_reap(pool, calls, 64)) > 0) {
		for (i = 0; i < n; i++) {
			const struct ev_call *r;
			const void *data;
			size_t len;

			if (knitk_call_status(calls[i]) == 0 &&
			    knitk_call_result(calls[i], &data, &len) == 0 &&
			    len == sizeof(*r)) {
				r = data;
				/* A reply for a connection gone (or its fd reused) is dropped. */
				if (r->fd >= 0 && r->fd < EV_MAX_FD &&
				    ev_conns[r->fd].open && ev_conns[r->fd].gen == r->gen &&
				    ev_queue(r->fd, &r->msg, EV_MSG) == 0)
					ev_served++;
			}
			knitk_call_release(calls[i]);
		}
	}
}

#endif /* EV_CONN_H */
