// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * A call's end on its word (docs/protocol.md R4, R6, R7): the host's
 * SLOT_TAKE on it, the look that takes a result from the call's box, the
 * take-back before any other end, the threads that wait on the word, and
 * the abort that races the worker's completion.  Above the call record
 * (call.c): a settled box completes the handle and gives its entry back
 * there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"
#include "box.h"
#include "slot.h"

/*
 * R7: the result @call's worker left in the box, its word read DONE with
 * SLOT_TAKE (@v): completed as a result from a return lane is
 * (results.c), then its entry goes back.
 */
static void call_settle_locked(struct knitk_pool *pool, struct knitk_call *call,
			       uint64_t v, const struct pool_direct *direct)
{
	const struct slot_box *box = (const struct slot_box *)
		(pool->boxes + (size_t)call->entry * pool->box_size);
	size_t cap = pool->box_size - sizeof(*box), len = box->len;
	unsigned int by = slot_by(v);
	/* The worker that ended it, if the word names one of ours. */
	int w = by && by <= pool->nr_workers ? (int)by - 1 : -1;
	int status = box->status;
	void *data = NULL;

	/* The worker wrote the box: a length past it is a malformed result. */
	if (len > cap) {
		status = -EBADMSG;
		len = 0;
	}
	if (w >= 0)
		pool->workers[w].calls++;
	/*
	 * Its worker finished it past its deadline: the call has expired,
	 * the result is dropped.  One finished in time stands, however late
	 * the look.
	 */
	if (!call_done_locked(call) && (v & SLOT_LATE))
		knitk__call_complete_locked(pool, call, -ETIMEDOUT, NULL, 0);
	/* Set before the completion publishes the handle (C5). */
	if (!call_done_locked(call) && w >= 0)
		call->ran = w;
	if (call_done_locked(call)) {
		knitk__call_complete_locked(pool, call, status, NULL, 0);
	} else if (direct) {
		if (len && direct->cap)
			memcpy(direct->out, box->bytes, len < direct->cap ? len : direct->cap);
		knitk__call_complete_direct_locked(pool, call, status, len);
	} else {
		if (len <= sizeof(call->small)) {
			data = call->small;
		} else if (!(data = malloc(len))) {
			status = -ENOMEM;
			len = 0;
		}
		if (len)
			memcpy(data, box->bytes, len);
		knitk__call_complete_locked(pool, call, status, len ? data : NULL, len);
	}
	knitk__entry_answered_locked(pool, call->entry);
	pool_progress_locked(pool);
	pthread_cond_broadcast(&pool->cond);
	/* A thread that drains for this call too has no lane to wake it. */
	if (atomic_load_explicit(&pool->waiters, memory_order_relaxed))
		knitk__pool_kick_drainer_locked(pool);
}

bool knitk__call_take_locked(struct knitk_pool *pool, struct knitk_call *call)
{
	/*
	 * Not for a loan (its owner's until sent), nor in event mode, where
	 * the reaper is the drainer that would hear of a death.
	 */
	if (!pool->box_size || call->take || call->loan != LOAN_NONE ||
	    call_done_locked(call) || pool->completer_done ||
	    atomic_load_explicit(&pool->evmode, memory_order_relaxed) ||
	    !slot_take(&pool->slots[call->entry], (uint32_t)(call->task_id >> 32)))
		return false;
	call->take = true;
	return true;
}

bool knitk__call_take_back_locked(struct knitk_pool *pool,
				  struct knitk_call *call, bool waiter,
				  const struct pool_direct *direct)
{
	uint32_t gen = (uint32_t)(call->task_id >> 32);
	_Atomic uint64_t *word;
	uint64_t v;

	if (!call->take)
		return false;
	call->take = false;
	word = &pool->slots[call->entry];
	v = slot_untake(word, gen);
	/*
	 * The word changed before the wake (S11): a waiter about to sleep
	 * finds another value.  A waiter taking back its own flags is awake:
	 * only the flags it had set to sleep call for a wake then.  Every
	 * sleeper: the low half holds no generation, so a waiter of the
	 * entry's last call, late, may sleep there too for a moment (it
	 * leaves at once, R6).
	 */
	if ((!v && !waiter) || (v & SLOT_PARKED))
		knitk_word_wake(pool->ep, slot_low(word), UINT_MAX);
	if (!v || slot_phase(v) != SLOT_DONE)
		return false;
	call_settle_locked(pool, call, v, direct);
	return true;
}

void knitk__call_own_enter_locked(struct knitk_pool *pool,
				  struct knitk_call *call)
{
	call->own++;
	pool->own_waiters++;
	/*
	 * Deaths are seen by a drainer: the completer, at once (another
	 * thread may hold the role only for a round, as a status poll does).
	 */
	if (!pool->completer_draining && !pool->orphans) {
		pool->orphans = true;
		pthread_cond_signal(&pool->ccond);
	}
}

void knitk__call_own_leave_locked(struct knitk_pool *pool,
				  struct knitk_call *call)
{
	call->own--;
	/* Off the knot: a destroy waiting for us may unmap it now. */
	if (!--pool->own_waiters && pool->completer_done)
		pthread_cond_broadcast(&pool->cond);
}

void knitk__call_look_locked(struct knitk_pool *pool, struct knitk_call *call)
{
	uint64_t v;

	if (!call->take)
		return;
	/* Acquire pairs with slot_finish's release, as slot_untake's does. */
	v = atomic_load_explicit(&pool->slots[call->entry], memory_order_acquire);
	if (slot_gen(v) == (uint32_t)(call->task_id >> 32) &&
	    slot_phase(v) == SLOT_DONE)
		knitk__call_take_back_locked(pool, call, false, NULL);
}

bool knitk__pool_untake_idle_locked(struct knitk_pool *pool)
{
	unsigned int i, n = pool->nr_workers * KNITK_LANES;
	struct knitk_call *call;
	bool done = false;

	for (i = 0; pool->entries && i < n; i++) {
		call = pool->entries[i].call;
		if (call && call->take && !call->own)
			done |= knitk__call_take_back_locked(pool, call, false, NULL);
	}
	return done;
}

int knitk__call_abort_locked(struct knitk_call *call)
{
	struct knitk_pool *pool = call->pool;
	unsigned int idx = call->entry;

	if (call_done_locked(call))
		return -EALREADY;
	/* Its result was in the box: the call is complete with it. */
	if (knitk__call_take_back_locked(pool, call, false, NULL))
		return -EALREADY;
	/* R4: the worker sees it at its claim or in knitk_task_aborted. */
	slot_abort(&pool->slots[idx], (uint32_t)(call->task_id >> 32));
	knitk__call_complete_locked(pool, call, -ECANCELED, NULL, 0);
	pthread_cond_broadcast(&pool->cond);
	/* A drainer parked for this call has no result to wake it. */
	knitk__pool_kick_drainer_locked(pool);
	return 0;
}

/* Shutdown (cancel): abort every call still in flight. */
void knitk__pool_cancel_all_locked(struct knitk_pool *pool)
{
	unsigned int i, n = pool->nr_workers * KNITK_LANES;

	for (i = 0; i < n; i++)
		if (pool->entries[i].call)
			knitk__call_abort_locked(pool->entries[i].call);
}
