// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Room for a call: the submitter slots a thread publishes through, whether
 * some worker can still serve, and the wait for progress (a completion
 * batch, a death, a respawn, shutdown) of a thread that has no room yet.
 *
 * Submitters: a thread hashes to a submitter and takes its mutex (trying
 * the others first when it is busy).  Only the holder of the submitter's
 * mutex touches its producers, so each request mailbox's pub word and
 * arena table keep exactly one writer at a time, as the lane protocol
 * requires; the mutex is host-private and costs one uncontended lock per
 * call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <time.h>

#include "pool_internal.h"
#include "box.h"

/* Take a submitter: the thread's own by hash, else any free one. */
unsigned int knitk__submitter_acquire(struct knitk_pool *pool)
{
	unsigned int S = pool->nr_submitters, i, s;
	uint32_t hash = (uint32_t)((uintptr_t)pthread_self() >> 6) * 2654435761U;
	/* The hash scaled to [0, S): a multiply, no division on every call. */
	unsigned int home = (unsigned int)(((uint64_t)hash * S) >> 32);

	for (i = 0, s = home; i < S; i++, s = s + 1 == S ? 0 : s + 1)
		if (!pthread_mutex_trylock(&pool->submitters[s].lock))
			return s;
	pthread_mutex_lock(&pool->submitters[home].lock);
	return home;
}

/* True while some worker may serve (now or after a respawn). */
bool knitk__pool_has_workers_locked(struct knitk_pool *pool,
				    const struct knitk_call_opts *co)
{
	unsigned int w;

	if (pool->respawning)
		return true;
	if (co && (co->flags & KNITK_CALL_WORKER))
		return atomic_load(&pool->workers[co->worker].alive);
	for (w = 0; w < pool->nr_workers; w++)
		if (atomic_load(&pool->workers[w].alive))
			return true;
	return false;
}

/*
 * A thread waiting for progress it does not drain for itself (a free
 * entry, arena space, shutdown): the completer takes the role at once.
 */
void knitk__pool_wait_passive_locked(struct knitk_pool *pool)
{
	knitk__pool_wait_passive_until_locked(pool, 0);
}

/*
 * The same, but not past @deadline_ns (absolute CLOCK_MONOTONIC, 0 or
 * KNITK_WAIT_FOREVER: none): -ETIMEDOUT, without waiting, once it has
 * passed; else 0 after one wait (progress, or the deadline reached: the
 * caller looks at its condition, then calls again).
 */
int knitk__pool_wait_passive_until_locked(struct knitk_pool *pool,
					  uint64_t deadline_ns)
{
	bool timed = deadline_ns && deadline_ns != KNITK_WAIT_FOREVER;
	struct timespec ts;

	if (timed) {
		if (pool_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		ts.tv_sec = (time_t)(deadline_ns / 1000000000ULL);
		ts.tv_nsec = (long)(deadline_ns % 1000000000ULL);
	}
	/*
	 * What we wait for comes through the drainer: no result in a box.
	 * One there is progress already: look again.
	 */
	if (knitk__pool_untake_idle_locked(pool))
		return 0;
	pool->passive++;
	pthread_cond_signal(&pool->ccond);
	/* pool->cond runs on CLOCK_MONOTONIC (knitk_pool_create). */
	if (timed)
		pthread_cond_timedwait(&pool->cond, &pool->lock, &ts);
	else
		pthread_cond_wait(&pool->cond, &pool->lock);
	pool->passive--;
	return 0;
}

/*
 * A publish of @call found its request mailbox or arena full
 * (backpressure): wait, without pool->lock, for a completion batch or a
 * death since @progress (sampled, with acquire, before the attempt), while
 * @pw lives (private lanes: the worker published to) or some worker
 * serves (stealing: NULL), and not past the call's deadline (-ETIMEDOUT).
 * An event loop never waits in the library (-EAGAIN: it reaps, then
 * submits again), and nobody once the pool is shut down (-ESHUTDOWN: the
 * call is never sent).  Room held by unsent loans, which shutdown does
 * not wait for (C8), would otherwise never come, and shutdown would wait
 * for this call for ever.  -EPIPE when a stealing pool has no worker left
 * nor coming.  0: look again.
 */
int knitk__pool_wait_room(struct knitk_pool *pool, struct pool_worker *pw,
			  const struct knitk_call *call, uint64_t progress)
{
	int ret = 0;

	if (atomic_load_explicit(&pool->evmode, memory_order_relaxed))
		return -EAGAIN;
	pthread_mutex_lock(&pool->lock);
	while (!ret &&
	       progress == atomic_load_explicit(&pool->progress, memory_order_relaxed) &&
	       (pw ? atomic_load(&pw->alive) : knitk__pool_has_workers_locked(pool, NULL))) {
		if (pool->closed)
			ret = -ESHUTDOWN;
		else
			ret = knitk__pool_wait_passive_until_locked(pool, call->deadline_ns);
	}
	/*
	 * Stealing, and no worker left nor coming (a death without respawn,
	 * or a respawn that failed): the room is never freed, nobody takes
	 * what fills it, and the call is not sent (-EPIPE).
	 */
	if (!ret && !pw && !knitk__pool_has_workers_locked(pool, NULL))
		ret = -EPIPE;
	pthread_mutex_unlock(&pool->lock);
	return ret;
}
