// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The pool's end: shutdown (drain or cancel the calls in flight, then stop
 * every worker) and destroy (join, reap and free).  The pool's memory goes
 * with its last handle (knitk__pool_free).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "pool_internal.h"
#include "in_arg.h"
#include "box.h"
#include "process.h"

/* Send the stop message to every running worker, wait until they stop. */
static void pool_stop_workers(struct knitk_pool *pool)
{
	struct knitk_lane_header h = { .function_id = POOL_FN_STOP };
	unsigned int w;

	/* From now on a stop reply is an answer (results.c). */
	pthread_mutex_lock(&pool->lock);
	pool->stopping = true;
	pthread_mutex_unlock(&pool->lock);
	if (pool->steal)
		knitk__steal_stop_workers(pool);
	for (w = 0; !pool->steal && w < pool->nr_workers; w++) {
		if (!atomic_load(&pool->workers[w].alive))
			continue;
		pthread_mutex_lock(&pool->submitters[0].lock);
		/* POOL_CAP leaves this lane free. */
		knitk_producer_send(pool->submitters[0].producers[w], &h, NULL, 0);
		pthread_mutex_unlock(&pool->submitters[0].lock);
		knitk_doorbell_ring(pool->ep, 1ULL << w);
	}
	pthread_mutex_lock(&pool->lock);
	while (!pool->completer_done)
		knitk__pool_wait_passive_locked(pool);
	pthread_mutex_unlock(&pool->lock);
}

/* Every call sent has completed: unsent loans are not waited for (C8). */
static bool pool_idle_locked(struct knitk_pool *pool)
{
	unsigned int w, n = 0;

	for (w = 0; w < pool->nr_workers; w++)
		n += pool->workers[w].inflight;
	return n == pool->loans && !pool->respawning;
}

KNITK_EXPORT int knitk_pool_shutdown(struct knitk_pool *pool, unsigned int mode)
{
	if (!pool || (mode != KNITK_SHUTDOWN_DRAIN && mode != KNITK_SHUTDOWN_CANCEL))
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	if (pool->shut) {
		pthread_mutex_unlock(&pool->lock);
		return -EALREADY;
	}
	pool->shut = true;
	pool->closed = true;
	pthread_cond_broadcast(&pool->cond);	/* blocked submitters: -ESHUTDOWN */
	if (mode == KNITK_SHUTDOWN_CANCEL)
		knitk__pool_cancel_all_locked(pool);
	else
		knitk__loans_end_locked(pool);
	/* Drain: every call completes; cancel: every worker answers. */
	while (!pool_idle_locked(pool) && !pool->completer_done)
		knitk__pool_wait_passive_locked(pool);
	pthread_mutex_unlock(&pool->lock);
	if (pool->completer_started)
		pool_stop_workers(pool);
	return 0;
}

KNITK_EXPORT void knitk_pool_destroy(struct knitk_pool *pool)
{
	unsigned int s, w, i;
	bool last;

	if (!pool)
		return;
	if (pool->completer_started) {
		knitk_pool_shutdown(pool, KNITK_SHUTDOWN_CANCEL);
		pthread_join(pool->completer, NULL);
	}
	pthread_mutex_lock(&pool->lock);
	pool->closed = true;
	pool->completer_done = true;
	/*
	 * A waiting thread may still hold the drainer role (the completer
	 * can exit under it once the worker deaths it handles leave none),
	 * or be on its way off its call's word (the cancel woke it): let it
	 * finish before its consumers and knot go.  Nobody takes the role or
	 * a word after completer_done; each release broadcasts pool->cond.
	 */
	while (pool->draining || pool->own_waiters)
		pthread_cond_wait(&pool->cond, &pool->lock);
	/* Handles outlive the mailboxes: results in them move out. */
	knitk__in_arg_detach_all_locked(pool);
	pthread_mutex_unlock(&pool->lock);
	/*
	 * Leaving the host role wakes every worker still parked (-EPIPE):
	 * the ones not stopped because the pool failed to start.  Stopped
	 * workers have left their loops already.
	 */
	for (w = 0; pool->workers && w < pool->nr_workers; w++)
		knitk_consumer_destroy(pool->workers[w].ret);
	for (s = 0; pool->submitters && s < pool->nr_submitters; s++)
		for (w = 0; pool->submitters[s].producers && w < pool->nr_workers; w++)
			knitk_producer_destroy(pool->submitters[s].producers[w]);
	/* The monitor uses the host endpoint: stop it first. */
	knitk__monitor_stop(pool);
	knitk_endpoint_destroy(pool->ep);
	pool->ep = NULL;
	for (w = 0; pool->workers && w < pool->nr_workers; w++) {
		struct pool_worker *pw = &pool->workers[w];

		if (pw->thread_started)
			pthread_join(pw->thread, NULL);
		knitk_endpoint_destroy(pw->ep);
	}
	for (w = 0; pool->workers && w < pool->nr_workers; w++) {
		if (pool->workers[w].pid > 0)
			knitk__spawn_reap(pool->workers[w].pid);
		/* A death handled after the completer was gone. */
		if (pool->workers[w].dead_pid > 0)
			knitk__spawn_reap_dead(pool->workers[w].dead_pid);
	}
	for (w = 0; pool->workers && w < pool->nr_workers; w++)
		if (pool->workers[w].pidfd >= 0)
			close(pool->workers[w].pidfd);
	if (pool->monitor_efd >= 0)
		close(pool->monitor_efd);
	/* After every endpoint that signalled it is gone. */
	if (pool->event_fd_owned)
		close(pool->event_fd);
	for (s = 0; pool->submitters && s < pool->nr_submitters; s++) {
		knitk__steal_free_slot(&pool->submitters[s]);
		free(pool->submitters[s].producers);
		pthread_mutex_destroy(&pool->submitters[s].lock);
	}
	free(pool->submitters);
	free(pool->exe);
	pthread_mutex_lock(&pool->lock);
	for (i = 0; pool->entries && i < pool->nr_workers * KNITK_LANES; i++)
		if (pool->entries[i].call) {
			knitk__call_complete_locked(pool, pool->entries[i].call,
						    -ECANCELED, NULL, 0);
			knitk__call_unref_locked(pool->entries[i].call);
			pool->entries[i].call = NULL;
		}
	free(pool->entries);
	free(pool->workers);
	pool->entries = NULL;
	pool->workers = NULL;
	pool->destroyed = true;
	last = !pool->handles;
	pthread_mutex_unlock(&pool->lock);
	if (last)
		knitk__pool_free(pool);
}
