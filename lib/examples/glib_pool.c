// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * glib_pool: a knitk pool driven from GLib's main loop.
 *
 * The pool's event fd (knitk_pool_event_fd) goes into the main context
 * as a GSource made by g_unix_fd_add(), through an epoll fd that turns its
 * edges into readiness a level-triggered loop can use (loop_calls.h says
 * why).  The callback reaps every completed call (knitk_pool_reap, never
 * blocking), checks each result against the id the call was submitted
 * with, and submits the next calls, keeping a window of them in flight;
 * the loop quits when every call has come back.
 *
 *   glib_pool [-t] [-p] [-n calls] [-w workers] [-q in-flight]
 *
 * -t thread workers, -p process workers (which need the module for event
 * mode); by default one run with threads, then one with processes when
 * the backend allows it.  Exit status 0 only when every call of every run
 * returned its own, correct result.
 */
#define _GNU_SOURCE
#include <glib.h>
#include <glib-unix.h>

#include "loop_calls.h"

struct run {
	struct loop_calls lc;
	GMainLoop *loop;
	int edge;
	int status;	/* loop_calls_step()'s last: 1 done, < 0 failed */
};

/* The pool's fd fired: take the edge, reap, check, submit more. */
static gboolean on_pool(gint fd, GIOCondition cond, gpointer data)
{
	struct run *r = data;

	(void)fd;
	(void)cond;
	loop_edge_take(r->edge);
	r->status = loop_calls_step(&r->lc);
	if (r->status == 0)
		return G_SOURCE_CONTINUE;
	g_main_loop_quit(r->loop);
	return G_SOURCE_REMOVE;
}

static int run_kind(const struct loop_opts *o, unsigned int kind)
{
	struct run r = { .edge = -1 };
	int ret;

	ret = loop_open("glib_pool", o, kind, &r.lc, &r.edge);
	if (ret)
		return ret < 0;
	r.loop = g_main_loop_new(NULL, FALSE);
	/* The first step arms the fd and submits the first window. */
	r.status = loop_calls_step(&r.lc);
	if (r.status == 0) {
		g_unix_fd_add(r.edge, G_IO_IN, on_pool, &r);
		g_main_loop_run(r.loop);
	}
	ret = loop_report("glib_pool", kind, &r.lc);
	g_main_loop_unref(r.loop);
	loop_close(&r.lc, r.edge);
	return ret;
}

int main(int argc, char **argv)
{
	struct loop_opts o;
	int failed = 0;

	/* A process worker of the pool runs the tasks here and never returns. */
	if (knitk_worker_main(argc, argv, &loop_tasks, NULL) ||
	    loop_parse(argc, argv, &o))
		return 2;
	if (o.kinds & 1U << KNITK_WORKER_THREADS)
		failed |= run_kind(&o, KNITK_WORKER_THREADS);
	if (o.kinds & 1U << KNITK_WORKER_PROCESSES)
		failed |= run_kind(&o, KNITK_WORKER_PROCESSES);
	return failed;
}
