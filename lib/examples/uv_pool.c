// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * uv_pool: a knitk pool driven from a libuv loop.
 *
 * The pool's event fd (knitk_pool_event_fd) is watched by a uv_poll_t,
 * through an epoll fd that turns its edges into readiness a
 * level-triggered loop can use (loop_calls.h says why).  The poll callback
 * reaps every completed call (knitk_pool_reap, never blocking), checks
 * each result against the id the call was submitted with, and submits the
 * next calls, keeping a window of them in flight; once every call has
 * come back it stops and closes the handle, and uv_run() returns.
 *
 *   uv_pool [-t] [-p] [-n calls] [-w workers] [-q in-flight]
 *
 * -t thread workers, -p process workers (which need the module for event
 * mode); by default one run with threads, then one with processes when
 * the backend allows it.  Exit status 0 only when every call of every run
 * returned its own, correct result.
 */
#define _GNU_SOURCE
#include <uv.h>

#include "loop_calls.h"

struct run {
	struct loop_calls lc;
	uv_poll_t poll;
	int edge;
	int status;	/* loop_calls_step()'s last: 1 done, < 0 failed */
};

/* The pool's fd fired: take the edge, reap, check, submit more. */
static void on_pool(uv_poll_t *poll, int status, int events)
{
	struct run *r = poll->data;

	(void)events;
	if (status < 0) {
		r->status = loop_fail(&r->lc, "uv_poll reported an error", 0);
	} else {
		loop_edge_take(r->edge);
		r->status = loop_calls_step(&r->lc);
		if (r->status == 0)
			return;
	}
	uv_poll_stop(poll);
	uv_close((uv_handle_t *)poll, NULL);
}

static int run_kind(uv_loop_t *loop, const struct loop_opts *o,
		    unsigned int kind)
{
	struct run r = { .edge = -1 };
	int ret;

	ret = loop_open("uv_pool", o, kind, &r.lc, &r.edge);
	if (ret)
		return ret < 0;
	if (uv_poll_init(loop, &r.poll, r.edge)) {
		printf("uv_pool: FAILED: set-up\n");
		loop_close(&r.lc, r.edge);
		return 1;
	}
	r.poll.data = &r;
	/* The first step arms the fd and submits the first window. */
	r.status = loop_calls_step(&r.lc);
	if (r.status == 0)
		uv_poll_start(&r.poll, UV_READABLE, on_pool);
	else
		uv_close((uv_handle_t *)&r.poll, NULL);
	/* Until the callback has closed the handle. */
	uv_run(loop, UV_RUN_DEFAULT);
	ret = loop_report("uv_pool", kind, &r.lc);
	loop_close(&r.lc, r.edge);
	return ret;
}

int main(int argc, char **argv)
{
	struct loop_opts o;
	uv_loop_t loop;
	int failed = 0;

	/* A process worker of the pool runs the tasks here and never returns. */
	if (knitk_worker_main(argc, argv, &loop_tasks, NULL) ||
	    loop_parse(argc, argv, &o))
		return 2;
	if (uv_loop_init(&loop))
		return 1;
	if (o.kinds & 1U << KNITK_WORKER_THREADS)
		failed |= run_kind(&loop, &o, KNITK_WORKER_THREADS);
	if (o.kinds & 1U << KNITK_WORKER_PROCESSES)
		failed |= run_kind(&loop, &o, KNITK_WORKER_PROCESSES);
	uv_loop_close(&loop);
	return failed;
}
