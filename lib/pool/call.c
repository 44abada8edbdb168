// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Call handles: completion, waiting, deadlines, abort and release.
 *
 * A handle is completed exactly once, under pool->lock, by whoever gets
 * there first: the drainer with the worker's result, the death handler
 * with -EOWNERDEAD, an abort or a cancelling shutdown with -ECANCELED, or
 * any thread that looks at the handle after its deadline (-ETIMEDOUT; the
 * waiters' timed sleeps end at the earliest deadline they cover, so an
 * expired call is seen at its deadline by whoever waits for it).  A result
 * that arrives for a completed call, or after the call's deadline, is
 * dropped (the call completes -ETIMEDOUT).  The in-flight entry keeps
 * its own reference until the worker has answered (or died), so an entry
 * and its abort bit are never reused while a worker may still run the call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool_internal.h"

/*
 * A cached handle stays poisoned under AddressSanitizer, so a use after
 * knitk_call_release is still caught although its memory is not freed.
 */
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#define call_poison(c)		ASAN_POISON_MEMORY_REGION((c), sizeof(*(c)))
#define call_unpoison(c)	ASAN_UNPOISON_MEMORY_REGION((c), sizeof(*(c)))
#else
#define call_poison(c)		((void)(c))
#define call_unpoison(c)	((void)(c))
#endif

/*
 * A handle for a new call: a released one from the cache, else a new one
 * (NULL: out of memory).  Zeroed but for @pool.
 */
struct knitk_call *knitk__call_get_locked(struct knitk_pool *pool)
{
	struct knitk_call *call = pool->call_cache;

	if (!call) {
		call = malloc(sizeof(*call));
	} else {
		call_unpoison(call);
		pool->call_cache = call->next_free;
		pool->call_cached--;
	}
	if (call) {
		memset(call, 0, sizeof(*call));
		call->pool = pool;
	}
	return call;
}

/* With the pool: nobody holds a handle any more. */
void knitk__call_cache_free(struct knitk_pool *pool)
{
	struct knitk_call *call;

	while ((call = pool->call_cache)) {
		call_unpoison(call);
		pool->call_cache = call->next_free;
		free(call);
	}
	pool->call_cached = 0;
}

/* Count a completion with @status (@delta 1), or take one back (-1). */
static void call_count_locked(struct knitk_pool *pool, int status, int delta)
{
	uint64_t d = (uint64_t)(int64_t)delta;

	pool->stats.completed += d;
	if (status == -ETIMEDOUT)
		pool->stats.timedout += d;
	else if (status == -ECANCELED)
		pool->stats.canceled += d;
	else if (status == -EOWNERDEAD)
		pool->stats.ownerdead += d;
}

/*
 * Complete @call with @status and the result bytes @data: NULL, a malloc
 * block that the handle takes over, or the handle's own small[].
 */
void knitk__call_complete_locked(struct knitk_pool *pool,
				 struct knitk_call *call, int status,
				 void *data, size_t len)
{
	if (call_done_locked(call)) {
		pool->stats.stale++;
		if (data != call->small)
			free(data);
		return;
	}
	/*
	 * -EINPROGRESS means "not completed" (knitk_call_status, a wait that
	 * timed out): a task returning it completes its call with -EPROTO.
	 */
	if (status == -EINPROGRESS)
		status = -EPROTO;
	call->status = status;
	call->data = data;
	call->len = data ? len : 0;
	/* C5: pairs with the acquire in call_done. */
	atomic_store_explicit(&call->state, CALL_DONE, memory_order_release);
	call_count_locked(pool, status, 1);
	knitk__events_queue_locked(pool, call);
}

/*
 * @call was registered but never published: the submit failed, so it is
 * no call, in the counters either.  It completes with @status (unless a
 * worker's death completed it first), and the counts of that completion
 * and of its submit are taken back.
 */
void knitk__call_withdraw_locked(struct knitk_pool *pool,
				 struct knitk_call *call, int status)
{
	if (!call_done_locked(call))
		knitk__call_complete_locked(pool, call, status, NULL, 0);
	call_count_locked(pool, call->status, -1);
	pool->stats.submitted--;
}

void knitk__call_unref_locked(struct knitk_call *call)
{
	struct knitk_pool *pool = call->pool;

	/*
	 * Acquire pairs with the release of knitk__call_unref_unless_last:
	 * what its thread did with the handle comes before the free.
	 */
	if (atomic_fetch_sub_explicit(&call->refs, 1, memory_order_acq_rel) != 1)
		return;
	knitk__events_forget_locked(call);
	if (call->data != call->small)
		free(call->data);
	pool->handles--;
	/*
	 * Keep as many as can be in flight at once; more are handles the
	 * program held on to, not a working set.
	 */
	if (pool->call_cached < pool->nr_workers * POOL_CAP) {
		call->next_free = pool->call_cache;
		pool->call_cache = call;
		pool->call_cached++;
		call_poison(call);
	} else {
		free(call);
	}
}

/*
 * Drop a reference without pool->lock unless it is the last one (false:
 * nothing done, drop it with knitk__call_unref_locked).  Only the last
 * one frees, and only under the lock, so a count that stays above zero
 * needs nothing else.
 */
bool knitk__call_unref_unless_last(struct knitk_call *call)
{
	unsigned int r = atomic_load_explicit(&call->refs, memory_order_relaxed);

	while (r > 1)
		/* Release pairs with the last drop in knitk__call_unref_locked. */
		if (atomic_compare_exchange_weak_explicit(&call->refs, &r, r - 1,
							  memory_order_release,
							  memory_order_relaxed))
			return true;
	return false;
}

void knitk__entry_free_locked(struct knitk_pool *pool, unsigned int idx)
{
	struct pool_entry *e = &pool->entries[idx];
	struct pool_worker *pw = &pool->workers[idx / KNITK_LANES];
	_Atomic uint64_t *aw = &pool->abort_words[idx / 64];
	uint64_t bit = 1ULL << (idx % 64);

	/*
	 * Clear the abort bit before the entry can be reused; the next call
	 * of this entry is published later with a release store of the pub
	 * word, which orders this clear before the worker's acquire load.
	 * Only an abort sets it, under pool->lock as we are: when it is
	 * clear, leave the word alone, so that the cache line the workers
	 * read at every call is not taken away from them at every call.
	 */
	if (atomic_load_explicit(aw, memory_order_relaxed) & bit)
		atomic_fetch_and_explicit(aw, ~bit, memory_order_relaxed);
	pw->busy &= ~(1ULL << (idx % KNITK_LANES));
	pw->inflight--;
	if (e->call) {
		knitk__call_unref_locked(e->call);
		e->call = NULL;
	}
}

/* The time of one look at the calls, read only when a deadline needs it. */
static uint64_t lazy_now(uint64_t *now)
{
	if (!*now)
		*now = pool_now_ns();
	return *now;
}

/* Complete @call with -ETIMEDOUT if its deadline passed at *@now. */
static void call_expire_locked(struct knitk_call *call, uint64_t *now)
{
	if (!call_done_locked(call) && call->deadline_ns &&
	    lazy_now(now) >= call->deadline_ns)
		knitk__call_complete_locked(call->pool, call, -ETIMEDOUT, NULL, 0);
}

/* Sleep on pool->cond until @until (absolute CLOCK_MONOTONIC). */
static void pool_sleep_locked(struct knitk_pool *pool, uint64_t until)
{
	struct timespec ts;

	if (until == KNITK_WAIT_FOREVER) {
		pthread_cond_wait(&pool->cond, &pool->lock);
		return;
	}
	ts.tv_sec = (time_t)(until / 1000000000ULL);
	ts.tv_nsec = (long)(until % 1000000000ULL);
	pthread_cond_timedwait(&pool->cond, &pool->lock, &ts);
}

static uint64_t wake_time(uint64_t until, const struct knitk_call *call)
{
	if (!call_done_locked(call) && call->deadline_ns &&
	    call->deadline_ns < until)
		return call->deadline_ns;
	return until;
}

/* Some call is in flight (none after destroy, which freed the workers). */
static bool pool_busy_locked(struct knitk_pool *pool)
{
	unsigned int w;

	if (pool->destroyed)
		return false;
	for (w = 0; w < pool->nr_workers; w++)
		if (pool->workers[w].inflight)
			return true;
	return false;
}

/*
 * One round as drainer, the role free (pool_may_drain_locked): drain
 * without pool->lock (knitk__pool_drain_once with @k0 and @until),
 * complete what was held, then hand the role on: another waiter, or the
 * completer for a passive one, may take it now.
 */
static void drain_round_locked(struct knitk_pool *pool, unsigned int k0,
			       uint64_t until, uint64_t *ring)
{
	pool->draining = true;
	pthread_mutex_unlock(&pool->lock);
	knitk__pool_drain_once(pool, k0, until, ring);
	pthread_mutex_lock(&pool->lock);
	knitk__pool_held_apply_locked(pool);
	pool->draining = false;
	pthread_cond_broadcast(&pool->cond);
	/* A death we handled leaves the completer its aftercare. */
	if (pool->passive || atomic_load_explicit(&pool->aftercare, memory_order_relaxed))
		pthread_cond_signal(&pool->ccond);
}

/*
 * Wait, under pool->lock, until @want of @calls are done (1: any, nr: all);
 * returns the index of a done call (any) or 0 (all), -EINPROGRESS at
 * @deadline_ns.  @ring: doorbells the caller's submit left unrung
 * (knitk__pool_submit's @defer); rung by the first park, or before any
 * other sleep, or at the end.
 */
static int calls_wait_locked(struct knitk_pool *pool,
			     struct knitk_call *const *calls, unsigned int nr,
			     bool all, uint64_t deadline_ns, uint64_t ring)
{
	unsigned int i, done, k0;
	int first;

	pool->activity++;
	/*
	 * seq_cst pairs with the completer's load after its prepare: it sees
	 * us and leaves the role, or our kick ends its park.
	 */
	atomic_fetch_add_explicit(&pool->waiters, 1, memory_order_seq_cst);
	if (pool->completer_draining)
		knitk__pool_kick_drainer_locked(pool);
	for (;;) {
		uint64_t now = 0, until = deadline_ns;

		/* Before the look at the calls: a later abort changes it. */
		k0 = atomic_load_explicit(&pool->kicks, memory_order_seq_cst);
		done = 0;
		first = -1;
		for (i = 0; i < nr; i++) {
			call_expire_locked(calls[i], &now);
			if (call_done_locked(calls[i])) {
				done++;
				if (first < 0)
					first = (int)i;
			} else {
				until = wake_time(until, calls[i]);
			}
		}
		if (all ? done == nr : done > 0)
			break;
		if (deadline_ns != KNITK_WAIT_FOREVER && lazy_now(&now) >= deadline_ns) {
			first = -EINPROGRESS;
			break;
		}
		if (pool_may_drain_locked(pool)) {
			/* Leader: drain for everyone until our calls are done. */
			drain_round_locked(pool, k0, until, &ring);
			continue;
		}
		if (ring)
			knitk_doorbell_ring(pool->ep, ring);
		ring = 0;
		pool_sleep_locked(pool, until);
	}
	/* Done without a park (an abort, a death): no request left unrung. */
	if (ring)
		knitk_doorbell_ring(pool->ep, ring);
	if (atomic_fetch_sub_explicit(&pool->waiters, 1, memory_order_seq_cst) == 1 &&
	    pool->leader && pool_busy_locked(pool)) {
		/*
		 * The last waiter leaves calls in flight: their results must
		 * be taken now (a worker's arena waits for it), so wake the
		 * completer instead of letting it linger.
		 */
		pool->orphans = true;
		pthread_cond_signal(&pool->ccond);
	}
	if (first == -EINPROGRESS)
		return first;
	return all ? 0 : first;
}

static int calls_wait(struct knitk_pool *pool, struct knitk_call *const *calls,
		      unsigned int nr, bool all, uint64_t deadline_ns)
{
	int ret;

	pthread_mutex_lock(&pool->lock);
	ret = calls_wait_locked(pool, calls, nr, all, deadline_ns, 0);
	pthread_mutex_unlock(&pool->lock);
	return ret;
}

static int calls_check(struct knitk_pool *pool, struct knitk_call *const *calls,
		       unsigned int nr)
{
	unsigned int i;

	if (!pool || !calls || !nr)
		return -EINVAL;
	for (i = 0; i < nr; i++)
		if (!calls[i] || calls[i]->pool != pool)
			return -EINVAL;
	return 0;
}

KNITK_EXPORT int knitk_pool_wait_any(struct knitk_pool *pool,
				     struct knitk_call *const *calls,
				     unsigned int nr, uint64_t deadline_ns)
{
	int ret = calls_check(pool, calls, nr);

	return ret ? ret : calls_wait(pool, calls, nr, false, deadline_ns);
}

KNITK_EXPORT int knitk_pool_wait_all(struct knitk_pool *pool,
				     struct knitk_call *const *calls,
				     unsigned int nr, uint64_t deadline_ns)
{
	int ret = calls_check(pool, calls, nr);

	return ret ? ret : calls_wait(pool, calls, nr, true, deadline_ns);
}

KNITK_EXPORT int knitk_call_status(struct knitk_call *call)
{
	struct knitk_pool *pool;
	uint64_t now = 0;
	int ret;

	if (!call)
		return -EINVAL;
	if (call_done(call))
		return call->status;
	pool = call->pool;
	pthread_mutex_lock(&pool->lock);
	call_expire_locked(call, &now);
	if (!call_done_locked(call) && pool_may_drain_locked(pool)) {
		/*
		 * A poller makes progress as a waiter would, without parking:
		 * with nobody waiting the completer may be lingering.
		 */
		uint64_t none = 0;

		drain_round_locked(pool, 0, 0, &none);
		now = 0;
		call_expire_locked(call, &now);
	}
	ret = call_done_locked(call) ? call->status : -EINPROGRESS;
	pthread_mutex_unlock(&pool->lock);
	return ret;
}

KNITK_EXPORT int knitk_call_wait(struct knitk_call *call, uint64_t deadline_ns)
{
	struct knitk_pool *pool;
	int ret;

	if (!call)
		return -EINVAL;
	if (call_done(call))
		return call->status;
	pool = call->pool;
	pthread_mutex_lock(&pool->lock);
	ret = calls_wait_locked(pool, &call, 1, false, deadline_ns, 0);
	/* Done (not -EINPROGRESS): its status, under the same lock. */
	if (ret >= 0)
		ret = call->status;
	pthread_mutex_unlock(&pool->lock);
	return ret;
}

KNITK_EXPORT int knitk_call_result(struct knitk_call *call, const void **data,
				   size_t *len)
{
	uint64_t now = 0;
	int ret = 0;

	if (!call || !data || !len)
		return -EINVAL;
	if (call_done(call)) {
		*data = call->data;
		*len = call->len;
		return 0;
	}
	pthread_mutex_lock(&call->pool->lock);
	call_expire_locked(call, &now);
	if (!call_done_locked(call)) {
		ret = -EINPROGRESS;
	} else {
		*data = call->data;
		*len = call->len;
	}
	pthread_mutex_unlock(&call->pool->lock);
	return ret;
}

static int call_abort_locked(struct knitk_call *call)
{
	struct knitk_pool *pool = call->pool;
	unsigned int idx = call->entry;

	if (call_done_locked(call))
		return -EALREADY;
	/*
	 * Release pairs with the acquire load in the worker (worker_exec,
	 * knitk_task_aborted).  Many host threads may set bits: atomic OR.
	 */
	atomic_fetch_or_explicit(&pool->abort_words[idx / 64],
				 1ULL << (idx % 64), memory_order_release);
	knitk__call_complete_locked(pool, call, -ECANCELED, NULL, 0);
	pthread_cond_broadcast(&pool->cond);
	/* A drainer parked for this call has no result to wake it. */
	knitk__pool_kick_drainer_locked(pool);
	return 0;
}

KNITK_EXPORT int knitk_call_abort(struct knitk_call *call)
{
	uint64_t now = 0;
	int ret;

	if (!call)
		return -EINVAL;
	pthread_mutex_lock(&call->pool->lock);
	call_expire_locked(call, &now);
	ret = call_abort_locked(call);
	pthread_mutex_unlock(&call->pool->lock);
	return ret;
}

/* Shutdown (cancel): abort every call still in flight. */
void knitk__pool_cancel_all_locked(struct knitk_pool *pool)
{
	unsigned int i, n = pool->nr_workers * KNITK_LANES;

	for (i = 0; i < n; i++)
		if (pool->entries[i].call)
			call_abort_locked(pool->entries[i].call);
}

KNITK_EXPORT int knitk_call_worker(struct knitk_call *call)
{
	if (!call)
		return -EINVAL;
	if (!call->pool->steal)
		return (int)call->worker;
	/* Stealing: known once a worker's result or death completed it. */
	if (!call_done(call))
		return -EINPROGRESS;
	return call->ran >= 0 ? call->ran : -ENOENT;
}

/*
 * Drop the user's reference; true when this was the last handle of a
 * destroyed pool, which the caller then frees (after pool->lock).
 */
static bool call_release_locked(struct knitk_call *call)
{
	struct knitk_pool *pool = call->pool;

	if (!call_done_locked(call))
		call_abort_locked(call);
	/* Never reaped once released (the entry may hold it longer). */
	knitk__events_forget_locked(call);
	knitk__call_unref_locked(call);
	/* The last handle of a destroyed pool frees what is left of it. */
	return pool->destroyed && !pool->handles;
}

KNITK_EXPORT void knitk_call_release(struct knitk_call *call)
{
	struct knitk_pool *pool;
	bool last;

	if (!call)
		return;
	pool = call->pool;
	pthread_mutex_lock(&pool->lock);
	last = call_release_locked(call);
	pthread_mutex_unlock(&pool->lock);
	if (last)
		knitk__pool_free(pool);
}

/*
 * Submit, wait, copy and release: knitk_call_wait, knitk_call_result and
 * knitk_call_release in one hold of pool->lock.
 */
KNITK_EXPORT int knitk_pool_call(struct knitk_pool *pool, uint32_t fn,
				 const void *in, size_t len,
				 const struct knitk_call_opts *opts,
				 void *out, size_t cap, size_t *out_len)
{
	struct knitk_call *call;
	uint64_t ring = 0;
	bool last;
	int ret;

	if (!pool || (cap && !out))
		return -EINVAL;
	/*
	 * Its handle is its own: an event loop's reap never sees it.  On a
	 * backend that rings and waits in one syscall (S9), the worker's
	 * ring waits for our park.
	 */
	ret = knitk__pool_submit(pool, fn, in, len, opts, false,
				 pool->ring_wait ? &ring : NULL, &call);
	if (ret)
		return ret;
	pthread_mutex_lock(&pool->lock);
	/* Without a deadline the wait ends only with the call done. */
	calls_wait_locked(pool, &call, 1, false, KNITK_WAIT_FOREVER, ring);
	ret = call->status;
	if (out_len)
		*out_len = call->len;
	if (call->len && cap)
		memcpy(out, call->data, call->len < cap ? call->len : cap);
	last = call_release_locked(call);
	pthread_mutex_unlock(&pool->lock);
	if (last)
		knitk__pool_free(pool);
	return ret;
}
