/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * What the GLib and libuv examples (glib_pool.c, uv_pool.c) share: the
 * pool's one task, the calls a loop keeps in flight, the check of every
 * result against the call's id, and the edge-triggered view of the pool's
 * event fd that a level-triggered loop needs.
 *
 * A call's argument is { u64 id, u32 len, len bytes made from id }, 0 to
 * 999 bytes (the longer ones travel through the arena); its result is
 * { id, hash of the bytes }.  The loop keeps each handle at its id, so a
 * result counts only once, from the handle submitted with that id, with
 * the hash the loop works out itself.
 *
 * Why an epoll fd between the loop and the pool: GLib and libuv poll
 * level-triggered, and the pool's fd is meant to be watched edge-triggered
 * (knitk_pool_event_fd(3)): on the module it stays POLLPRI while a worker
 * is dead, and on the futex backend the eventfd stays readable until it is
 * read.  An epoll instance holding it with EPOLLET is readable once per
 * edge until epoll_wait() takes that edge, which loop_edge_take() does.
 */
#ifndef LOOP_CALLS_H
#define LOOP_CALLS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"

#define LOOP_MAX_BYTES	999

struct loop_arg {
	uint64_t id;
	uint32_t len;
	uint8_t bytes[LOOP_MAX_BYTES];
};

struct loop_result {
	uint64_t id;
	uint64_t hash;
};

/* The argument of call @id: its length and bytes follow from the id. */
static inline size_t loop_arg_make(uint64_t id, struct loop_arg *a)
{
	uint64_t x = id * 0x9e3779b97f4a7c15ULL + 1;
	uint32_t i;

	a->id = id;
	a->len = (uint32_t)(id * 7919 % (LOOP_MAX_BYTES + 1));
	for (i = 0; i < a->len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		a->bytes[i] = (uint8_t)x;
	}
	return offsetof(struct loop_arg, bytes) + a->len;
}

/* FNV-1a over the id and the bytes. */
static inline uint64_t loop_hash(uint64_t id, const uint8_t *b, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ id;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

/* The task, run by a worker: check the argument's shape, hash it. */
static int loop_task(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	const struct loop_arg *a = in;
	struct loop_result r;

	(void)ctx;
	if (len < offsetof(struct loop_arg, bytes) ||
	    len != offsetof(struct loop_arg, bytes) + a->len)
		return -EINVAL;
	r.id = a->id;
	r.hash = loop_hash(a->id, a->bytes, a->len);
	return knitk_reply_set(out, &r, sizeof(r));
}

static const knitk_task_fn loop_fns[] = { loop_task };
static const struct knitk_task_table loop_tasks = {
	.tasks = loop_fns, .nr_tasks = 1,
};

/* The calls of one run and what came back of them. */
struct loop_calls {
	struct knitk_pool *pool;
	unsigned int total;		/* calls to make, ids 0..total-1 */
	unsigned int window;		/* most in flight */
	unsigned int submitted;
	unsigned int completed;
	struct knitk_call **handle;	/* by id; NULL once its result came */
	const char *error;		/* the first thing that went wrong */
	uint64_t bad_id;
};

static inline int loop_calls_init(struct loop_calls *lc,
				  struct knitk_pool *pool, unsigned int total,
				  unsigned int window)
{
	memset(lc, 0, sizeof(*lc));
	lc->pool = pool;
	lc->total = total;
	lc->window = window;
	lc->handle = calloc(total ? total : 1, sizeof(*lc->handle));
	return lc->handle ? 0 : -ENOMEM;
}

static inline void loop_calls_free(struct loop_calls *lc)
{
	unsigned int i;

	for (i = 0; i < lc->submitted; i++)
		if (lc->handle[i])
			knitk_call_release(lc->handle[i]);
	free(lc->handle);
	lc->handle = NULL;
}

static inline int loop_fail(struct loop_calls *lc, const char *what,
			    uint64_t id)
{
	if (!lc->error) {
		lc->error = what;
		lc->bad_id = id;
	}
	return -EBADMSG;
}

/* Submit until the window is full, every call is out, or the pool is. */
static inline int loop_calls_submit(struct loop_calls *lc)
{
	struct loop_arg a;
	int ret;

	while (lc->submitted < lc->total &&
	       lc->submitted - lc->completed < lc->window) {
		uint64_t id = lc->submitted;
		size_t len = loop_arg_make(id, &a);

		ret = knitk_pool_submit(lc->pool, 0, &a, len, NULL,
					&lc->handle[id]);
		/* Every worker at capacity: the next reap makes room. */
		if (ret == -EAGAIN && lc->submitted > lc->completed)
			return 0;
		if (ret)
			return loop_fail(lc, "knitk_pool_submit failed", id);
		lc->submitted++;
	}
	return 0;
}

/* One reaped call: it must be the handle of its id, with the right hash. */
static inline int loop_check(struct loop_calls *lc, struct knitk_call *call)
{
	struct loop_result r;
	struct loop_arg a;
	const void *data;
	size_t len;
	int status = knitk_call_status(call);

	/* On a failure the handle stays in lc->handle for loop_calls_free. */
	if (status != 0 || knitk_call_result(call, &data, &len) ||
	    len != sizeof(r))
		return loop_fail(lc, "a call failed or returned a bad size", 0);
	memcpy(&r, data, sizeof(r));
	if (r.id >= lc->submitted || lc->handle[r.id] != call)
		return loop_fail(lc, "a result came from another call's handle",
				 r.id);
	loop_arg_make(r.id, &a);
	if (r.hash != loop_hash(r.id, a.bytes, a.len))
		return loop_fail(lc, "a result has the wrong hash", r.id);
	lc->handle[r.id] = NULL;
	knitk_call_release(call);
	lc->completed++;
	return 0;
}

/*
 * What the loop runs when the pool's fd fires (and once at the start):
 * reap until reap returns 0, which arms the fd again, checking every
 * call, then submit more.  1 when every call has come back, 0 to go on,
 * a negative errno when something failed (lc->error says what).
 */
static inline int loop_calls_step(struct loop_calls *lc)
{
	struct knitk_call *calls[64];
	int n, i, ret;

	do {
		n = knitk_pool_reap(lc->pool, calls, 64);
		if (n < 0)
			return loop_fail(lc, "knitk_pool_reap failed", 0);
		for (i = 0; i < n; i++) {
			ret = loop_check(lc, calls[i]);
			if (ret)
				return ret;
		}
	} while (n > 0);
	if (lc->completed == lc->total)
		return 1;
	return loop_calls_submit(lc);
}

/* An epoll fd that is readable once per edge of the pool's @fd. */
static inline int loop_edge_fd(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLPRI | EPOLLET };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return -errno;
	ev.data.fd = fd;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
		int err = -errno;

		close(ep);
		return err;
	}
	return ep;
}

/* Take the edge that made @ep readable, so it stops being readable. */
static inline void loop_edge_take(int ep)
{
	struct epoll_event ev;

	while (epoll_wait(ep, &ev, 1, 0) > 0)
		;
}

/* Options of both examples. */
struct loop_opts {
	unsigned int kinds;	/* bit KNITK_WORKER_THREADS, _PROCESSES */
	unsigned int explicit_kinds;
	unsigned int calls;
	unsigned int workers;
	unsigned int window;
};

static inline int loop_parse(int argc, char **argv, struct loop_opts *o)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->calls = 4000;
	o->workers = 4;
	o->window = 256;
	while ((c = getopt(argc, argv, "tpn:w:q:")) != -1) {
		switch (c) {
		case 't': o->kinds |= 1U << KNITK_WORKER_THREADS; break;
		case 'p': o->kinds |= 1U << KNITK_WORKER_PROCESSES; break;
		case 'n': o->calls = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'w': o->workers = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'q': o->window = (unsigned int)strtoul(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: %s [-t] [-p] [-n calls] [-w workers] [-q in-flight]\n",
				argv[0]);
			return -1;
		}
	}
	o->explicit_kinds = o->kinds != 0;
	if (!o->kinds)
		o->kinds = 1U << KNITK_WORKER_THREADS |
			   1U << KNITK_WORKER_PROCESSES;
	return o->window ? 0 : -1;
}

static inline const char *loop_kind_name(unsigned int kind)
{
	return kind == KNITK_WORKER_THREADS ? "threads" : "processes";
}

/*
 * A pool of @kind in event mode: the pool and its fd.  0; 1 when process
 * workers cannot use event mode here (the futex backend: they need the
 * module) and they were not asked for by name; else a negative errno.
 */
static inline const char *loop_backend(struct knitk_pool *pool)
{
	struct knitk_endpoint *ep;

	if (knitk_pool_endpoint(pool, &ep))
		return "?";
	return knitk_endpoint_backend(ep) == KNITK_BACKEND_KMOD ? "kmod" :
									 "futex";
}

/*
 * A pool of @kind in event mode, its fd's edge view and the calls of one
 * run in @lc: 0 when ready, 1 when not run (process workers in event mode
 * need the module), -1 when it failed; both said on stdout as @name.
 */
static inline int loop_open(const char *name, const struct loop_opts *o,
			    unsigned int kind, struct loop_calls *lc,
			    int *edge)
{
	struct knitk_pool_opts po = { .size = sizeof(po) };
	struct knitk_pool *pool;
	int fd, ret;

	po.kind = kind;
	po.nr_workers = o->workers;
	ret = knitk_pool_create(&po, &loop_tasks, &pool);
	if (ret)
		goto failed;
	fd = knitk_pool_event_fd(pool);
	if (fd < 0) {
		knitk_pool_destroy(pool);
		ret = fd;
		if (ret == -EOPNOTSUPP && kind == KNITK_WORKER_PROCESSES &&
		    !o->explicit_kinds) {
			printf("%s: processes: not run, event mode with process workers needs /dev/knitk\n",
			       name);
			return 1;
		}
		goto failed;
	}
	*edge = loop_edge_fd(fd);
	if (*edge < 0 || loop_calls_init(lc, pool, o->calls, o->window)) {
		printf("%s: FAILED: set-up\n", name);
		if (*edge >= 0)
			close(*edge);
		knitk_pool_destroy(pool);
		return -1;
	}
	return 0;
failed:
	printf("%s: %s: FAILED: no pool in event mode: %s\n", name,
	       loop_kind_name(kind), strerror(-ret));
	return -1;
}

/* What loop_open() made, undone. */
static inline void loop_close(struct loop_calls *lc, int edge)
{
	struct knitk_pool *pool = lc->pool;

	loop_calls_free(lc);
	knitk_pool_destroy(pool);
	close(edge);
}

/* The verdict of one run, on stdout; 0 when every call came back right. */
static inline int loop_report(const char *name, unsigned int kind,
			      const struct loop_calls *lc)
{
	if (lc->error || lc->completed != lc->total) {
		printf("%s: %s: FAILED: %s (call %llu); %u of %u calls checked\n",
		       name, loop_kind_name(kind),
		       lc->error ? lc->error : "the loop ended early",
		       (unsigned long long)lc->bad_id, lc->completed, lc->total);
		return 1;
	}
	printf("%s: %s: %u calls on the %s backend, every result checked by its call's id\n",
	       name, loop_kind_name(kind), lc->completed,
	       loop_backend(lc->pool));
	return 0;
}

#endif /* LOOP_CALLS_H */
