// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Event mode: the pool driven by an event loop (knitk_pool_event_fd,
 * knitk_pool_reap).  From the first knitk_pool_event_fd() on, every call
 * that completes is queued on the pool's done list, and reap is the pool's
 * drainer: it takes the drainer role only if it is free, consumes the
 * return mailboxes without spinning or parking, and, when that found
 * nothing, leaves the host doorbell's sleeping flag set ("armed") as a
 * parked drainer would (docs/protocol.md S1, H1): the next result or death
 * then wakes the host endpoint's pollers (module) or writes the pool's
 * eventfd (futex backend, through knitk_endpoint_set_event_fd on every
 * endpoint of the pool), once; rings while the loop is busy are
 * suppressed as for any awake owner.  Blocking waits do not drain in event
 * mode (wait.c), the completer drains only after shutdown (completer.c),
 * and a submit never waits for room (submit.c): the loop thread never
 * sleeps inside the library.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "pool_internal.h"
#include "box.h"

/* Move up to @max queued calls to @calls. */
static unsigned int events_pop_locked(struct knitk_pool *pool,
				      struct knitk_call **calls,
				      unsigned int max)
{
	unsigned int n = 0;

	while (n < max && pool->done_head) {
		struct knitk_call *call = pool->done_head;

		knitk__events_forget_locked(call);
		calls[n++] = call;
	}
	return n;
}

/* Futex backend: one eventfd, set on every endpoint that wakes the host. */
static int events_futex_fd_locked(struct knitk_pool *pool)
{
	unsigned int w;
	int efd, ret;

	/* A process worker's endpoint is out of reach (see knitk_pool.h). */
	if (pool->opts.kind == KNITK_WORKER_PROCESSES)
		return -EOPNOTSUPP;
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (efd < 0)
		return -errno;
	ret = knitk_endpoint_set_event_fd(pool->ep, efd);
	for (w = 0; !ret && w < pool->nr_workers; w++)
		if (pool->workers[w].ep)
			ret = knitk_endpoint_set_event_fd(pool->workers[w].ep, efd);
	if (ret) {
		knitk_endpoint_set_event_fd(pool->ep, -1);
		for (w = 0; w < pool->nr_workers; w++)
			if (pool->workers[w].ep)
				knitk_endpoint_set_event_fd(pool->workers[w].ep, -1);
		close(efd);
		return ret;
	}
	pool->event_fd_owned = true;
	return efd;
}

KNITK_EXPORT int knitk_pool_event_fd(struct knitk_pool *pool)
{
	unsigned int i;
	int fd;

	if (!pool)
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	if (pool->event_fd >= 0) {
		fd = pool->event_fd;
		goto out;
	}
	/* Reap hands its park over to the fd: the backend must kick. */
	if (!pool->leader) {
		fd = -EOPNOTSUPP;
		goto out;
	}
	if (knitk_endpoint_backend(pool->ep) == KNITK_BACKEND_FUTEX)
		fd = events_futex_fd_locked(pool);
	else
		fd = knitk_endpoint_fd(pool->ep);
	if (fd < 0)
		goto out;
	pool->event_fd = fd;
	atomic_store_explicit(&pool->evmode, true, memory_order_relaxed);
	/*
	 * Reap takes every result from now on: a thread waiting on its own
	 * call's word (R6) gives its flag back, so the call's answer travels
	 * in a return lane, whose ring fires the fd; one already in the box
	 * completes the call now, queued for the first reap.  No flag is
	 * taken in event mode (knitk__call_take_locked).
	 */
	for (i = 0; i < pool->nr_workers * KNITK_LANES; i++)
		if (pool->entries[i].call)
			knitk__call_take_back_locked(pool, pool->entries[i].call,
						     false, NULL);
	/*
	 * Whoever holds the role leaves it for good: the completer checks
	 * evmode after this kick, a waiting thread no longer may drain
	 * (pool_may_drain_locked).  Wait for it, so that the first reap
	 * finds the role free and arms the fd.
	 */
	knitk__pool_kick_drainer_locked(pool);
	while (pool->draining)
		pthread_cond_wait(&pool->cond, &pool->lock);
out:
	pthread_mutex_unlock(&pool->lock);
	return fd;
}

KNITK_EXPORT int knitk_pool_reap(struct knitk_pool *pool,
				 struct knitk_call **calls, unsigned int max)
{
	unsigned int n, got;

	if (!pool || (max && !calls))
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	if (!atomic_load_explicit(&pool->evmode, memory_order_relaxed)) {
		pthread_mutex_unlock(&pool->lock);
		return -EINVAL;
	}
	n = events_pop_locked(pool, calls, max);
	/* Another reaper, or the completer after shutdown, drains for us. */
	if (n == max || pool->draining || pool->completer_done) {
		pthread_mutex_unlock(&pool->lock);
		return (int)n;
	}
	pool->draining = true;
	for (;;) {
		pthread_mutex_unlock(&pool->lock);
		got = knitk__pool_drain_or_arm(pool);
		pthread_mutex_lock(&pool->lock);
		n += events_pop_locked(pool, calls + n, max - n);
		if (!got || n == max)
			break;
	}
	pool->draining = false;
	/* Hand-off: the completer may be waiting for the role (shutdown). */
	pthread_cond_broadcast(&pool->cond);
	pthread_cond_signal(&pool->ccond);
	pthread_mutex_unlock(&pool->lock);
	return (int)n;
}
