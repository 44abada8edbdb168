// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The call record: a handle's life from its submit to its release, and
 * the in-flight entry that ties it to a worker's lane.  The lowest layer of
 * the call path: every file above completes and drops calls through these
 * functions (the end on the call's word is box.c's), and nothing here
 * calls up.
 *
 * A handle is completed exactly once, under pool->lock, by whoever gets
 * there first: a look at its word with the result its worker left in the
 * call's box (R7, box.c), the drainer with the
 * worker's result from a return lane (results.c), the
 * death handler with -EOWNERDEAD (death.c), an abort or a cancelling
 * shutdown with -ECANCELED, or any thread that looks at the handle after
 * its deadline (-ETIMEDOUT, wait.c).  A result that arrives for a
 * completed call, or after the call's deadline, is dropped (the call
 * completes -ETIMEDOUT).  The in-flight entry keeps its own reference
 * until the worker has answered (or died), so an entry and its abort bit
 * are never reused while a worker may still run the call.  In event mode a
 * completed call is queued on the pool's done list for knitk_pool_reap
 * (events.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"
#include "in_arg.h"
#include "slot.h"

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

void knitk__pool_free(struct knitk_pool *pool)
{
	knitk__call_cache_free(pool);
	free(pool->held);
	pthread_mutex_destroy(&pool->lock);
	pthread_cond_destroy(&pool->cond);
	pthread_cond_destroy(&pool->ccond);
	free(pool);
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
 * block that the handle takes over, or the handle's own small[]; or, with
 * @direct, @len bytes already in its knitk_pool_call's buffer.
 */
static void call_finish_locked(struct knitk_pool *pool, struct knitk_call *call,
			       int status, void *data, size_t len, bool direct)
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
	call->len = data || direct ? len : 0;
	call->direct = direct;
	/* C5: pairs with the acquire in call_done. */
	atomic_store_explicit(&call->state, CALL_DONE, memory_order_release);
	call_count_locked(pool, status, 1);
	knitk__events_queue_locked(pool, call);
}

void knitk__call_complete_locked(struct knitk_pool *pool,
				 struct knitk_call *call, int status,
				 void *data, size_t len)
{
	call_finish_locked(pool, call, status, data, len, false);
}

void knitk__call_complete_direct_locked(struct knitk_pool *pool,
					struct knitk_call *call, int status,
					size_t len)
{
	call_finish_locked(pool, call, status, NULL, len, true);
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
	if (call->kept)
		knitk__in_arg_release_locked(pool, call);
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

void knitk__entry_answered_locked(struct knitk_pool *pool, unsigned int idx)
{
	struct pool_entry *e = &pool->entries[idx];
	struct pool_worker *pw = &pool->workers[idx / KNITK_LANES];

	/*
	 * The word is left alone: the answer's worker claimed the call and
	 * ended it there (slot.h), and the next call of this entry is queued
	 * by that word as it is, so the line the workers use at every call
	 * is not taken from them.
	 */
	pw->busy &= ~(1ULL << (idx % KNITK_LANES));
	pw->inflight--;
	if (e->call) {
		knitk__call_unref_locked(e->call);
		e->call = NULL;
	}
}

void knitk__entry_free_locked(struct knitk_pool *pool, unsigned int idx)
{
	/* No answer came: no lane of this generation may run from now on (R5). */
	slot_seal(&pool->slots[idx], pool->entries[idx].gen);
	knitk__entry_answered_locked(pool, idx);
}

void knitk__events_queue_locked(struct knitk_pool *pool, struct knitk_call *call)
{
	/* A loan is queued once sent (loan.c): until then it is its caller's. */
	if (!atomic_load_explicit(&pool->evmode, memory_order_relaxed) ||
	    call->queued || call->no_reap || call->loan != LOAN_NONE)
		return;
	call->queued = true;
	call->done_next = NULL;
	call->done_prev = pool->done_tail;
	if (pool->done_tail)
		pool->done_tail->done_next = call;
	else
		pool->done_head = call;
	pool->done_tail = call;
}

void knitk__events_forget_locked(struct knitk_call *call)
{
	struct knitk_pool *pool = call->pool;

	if (!call->queued)
		return;
	if (call->done_prev)
		call->done_prev->done_next = call->done_next;
	else
		pool->done_head = call->done_next;
	if (call->done_next)
		call->done_next->done_prev = call->done_prev;
	else
		pool->done_tail = call->done_prev;
	call->queued = false;
	call->done_prev = call->done_next = NULL;
}

/*
 * End the park of the drainer: a new waiter wants the role from the
 * completer, or a call the drainer may wait for completed without a
 * result (abort, cancel).  The kicks bump pairs with the drainer's
 * seq_cst load after its prepare (knitk__pool_drain_once, completer_drain): it
 * either sees the bump and does not sleep, or the kick's seq increment
 * comes after its prepare read seq and ends the wait.
 */
void knitk__pool_kick_drainer_locked(struct knitk_pool *pool)
{
	if (!pool->leader || !pool->draining)
		return;
	atomic_fetch_add_explicit(&pool->kicks, 1, memory_order_seq_cst);
	knitk_doorbell_kick_self(pool->ep);
}
