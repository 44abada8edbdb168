// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Waiting for calls, and the handle's face to the program: wait, status,
 * result, abort, release, and knitk_pool_call (submit, wait, copy and
 * release in one).  A thread waiting for one call alone waits on the
 * call's own word, spinning, then asleep on it, and the result that fits
 * the call's box is taken from there (docs/protocol.md R6, R7), as is one
 * a later look finds there.  A result that did not fit, and a wait for
 * several calls, go the drainer's way: the waiting thread takes the
 * drainer role when it may (drain.c) and drains for everyone until its
 * calls are done; otherwise it sleeps on pool->cond, woken by each
 * completion batch and each hand-over of the role, and never past the
 * earliest deadline of the calls it waits for (a call past its deadline
 * completes -ETIMEDOUT when looked at).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <time.h>

#include "pool_internal.h"
#include "box.h"
#include "slot.h"

/* The time of one look at the calls, read only when a deadline needs it. */
static uint64_t lazy_now(uint64_t *now)
{
	if (!*now)
		*now = pool_now_ns();
	return *now;
}

/*
 * A look at @call: its result in the box completes it (R7), else
 * -ETIMEDOUT if its deadline passed at *@now.
 */
static void call_look_locked(struct knitk_call *call, uint64_t *now)
{
	knitk__call_look_locked(call->pool, call);
	if (!call_done_locked(call) && call->deadline_ns &&
	    lazy_now(now) >= call->deadline_ns &&
	    !knitk__call_take_back_locked(call->pool, call, false, NULL))
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
			       uint64_t until, uint64_t *ring,
			       const struct pool_direct *direct)
{
	pool->draining = true;
	pthread_mutex_unlock(&pool->lock);
	knitk__pool_drain_once(pool, k0, until, ring, direct);
	pthread_mutex_lock(&pool->lock);
	knitk__pool_held_apply_locked(pool);
	pool->draining = false;
	pthread_cond_broadcast(&pool->cond);
	/*
	 * A death we handled leaves the completer its aftercare; a thread on
	 * its own call's word needs it as the drainer.
	 */
	if (pool->passive || pool->orphans ||
	    atomic_load_explicit(&pool->aftercare, memory_order_relaxed))
		pthread_cond_signal(&pool->ccond);
}

/*
 * Wait, under pool->lock, until @want of @calls are done (1: any, nr: all);
 * returns the index of a done call (any) or 0 (all), -EINPROGRESS at
 * @deadline_ns.  @ring: doorbells the caller's submit left unrung
 * (knitk__pool_submit's @defer); rung by the first park, or before any
 * other sleep, or at the end.  @direct: knitk_pool_call's buffer for
 * the result of its call, when this thread drains it, or NULL.
 */
static int calls_wait_locked(struct knitk_pool *pool,
			     struct knitk_call *const *calls, unsigned int nr,
			     bool all, uint64_t deadline_ns, uint64_t ring,
			     const struct pool_direct *direct)
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
			call_look_locked(calls[i], &now);
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
		/*
		 * Their ends come through the drainer, not into a box that
		 * no ring tells us of (R7), but for a call a thread waits for
		 * on its word: that thread's look wakes us.
		 */
		for (i = 0; i < nr; i++)
			if (!calls[i]->own)
				knitk__call_take_back_locked(pool, calls[i], false, NULL);
		if (pool_may_drain_locked(pool)) {
			/* Leader: drain for everyone until our calls are done. */
			drain_round_locked(pool, k0, until, &ring, direct);
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

/*
 * R6: wait for @call, whose SLOT_TAKE is set (knitk__call_take_locked) and
 * whose waiters count us (knitk__call_own_enter_locked), on its own word,
 * without pool->lock (not held on entry, held on return): spin while that
 * pays, then sleep on the word until its worker, an abort, a death or a
 * deadline changes it; then take the flags back, which completes the call
 * when its result is in the box (to @direct's buffer, when given).  A call
 * it does not complete (its result did not fit the box) is left to
 * calls_wait_locked; one the wait's @deadline_ns came first for keeps its
 * flag.  A loan or event mode wait as they always did; other threads
 * waiting for the same call may wait here too.
 */
static void call_wait_own(struct knitk_pool *pool, struct knitk_call *call,
			  uint64_t deadline_ns, const struct pool_direct *direct)
{
	_Atomic uint64_t *word = &pool->slots[call->entry];
	uint32_t gen = (uint32_t)(call->task_id >> 32);
	uint64_t until = deadline_ns;
	unsigned int spins = 0;

	if (call->deadline_ns && call->deadline_ns < until)
		until = call->deadline_ns;
	for (;;) {
		uint64_t v = atomic_load_explicit(word, memory_order_acquire);
		uint32_t low;
		int ret;

		/*
		 * Taken back (the call ended elsewhere; its entry may hold
		 * the next call already), or ended here.
		 */
		if (!slot_awaited(v, gen))
			break;
		if (spins < pool->opts.spin && !pool_spin_past(spins, until)) {
			pool_spin_relax(&pool->spin, spins++);
			continue;
		}
		/*
		 * Our call may wait for a stopped searcher: see to it before
		 * we sleep (T14), as a drainer does before its park, and when
		 * the spin ends at a deadline (a thread polling with short
		 * ones never sleeps).
		 */
		if (pool->steal)
			knitk__steal_rescue(pool);
		if (spins < pool->opts.spin)
			break;
		low = slot_park(word, v);
		if (!low)
			continue;
		/* Woken, or the word moved: look again; a deadline ends it. */
		ret = knitk_word_wait(pool->ep, slot_low(word), low, until);
		if (ret && ret != -EAGAIN && ret != -EINTR)
			break;
	}
	pthread_mutex_lock(&pool->lock);
	knitk__call_own_leave_locked(pool, call);
	/*
	 * Still awaited: the wait's deadline came first, the result still
	 * goes to the box (the look of a later wait takes it).  Else the
	 * call ended, here or elsewhere.
	 */
	if (!slot_awaited(atomic_load_explicit(word, memory_order_relaxed), gen))
		knitk__call_take_back_locked(pool, call, true, direct);
}

/* The same, from under pool->lock (held on entry and on return). */
static void call_wait_own_locked(struct knitk_pool *pool, struct knitk_call *call,
				 uint64_t deadline_ns)
{
	knitk__call_own_enter_locked(pool, call);
	pthread_mutex_unlock(&pool->lock);
	call_wait_own(pool, call, deadline_ns, NULL);
}

static int calls_wait(struct knitk_pool *pool, struct knitk_call *const *calls,
		      unsigned int nr, bool all, uint64_t deadline_ns)
{
	int ret;

	pthread_mutex_lock(&pool->lock);
	ret = calls_wait_locked(pool, calls, nr, all, deadline_ns, 0, NULL);
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
	call_look_locked(call, &now);
	if (!call_done_locked(call) && pool_may_drain_locked(pool)) {
		/*
		 * A poller makes progress as a waiter would, without parking:
		 * with nobody waiting the completer may be lingering.
		 */
		uint64_t none = 0;

		drain_round_locked(pool, 0, 0, &none, NULL);
		now = 0;
		call_look_locked(call, &now);
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
	if (call->take || knitk__call_take_locked(pool, call))
		call_wait_own_locked(pool, call, deadline_ns);
	ret = call_done_locked(call) ? 0 :
	      calls_wait_locked(pool, &call, 1, false, deadline_ns, 0, NULL);
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
	call_look_locked(call, &now);
	if (!call_done_locked(call)) {
		ret = -EINPROGRESS;
	} else {
		*data = call->data;
		*len = call->len;
	}
	pthread_mutex_unlock(&call->pool->lock);
	return ret;
}

KNITK_EXPORT int knitk_call_abort(struct knitk_call *call)
{
	uint64_t now = 0;
	int ret;

	if (!call)
		return -EINVAL;
	pthread_mutex_lock(&call->pool->lock);
	call_look_locked(call, &now);
	ret = knitk__call_abort_locked(call);
	pthread_mutex_unlock(&call->pool->lock);
	return ret;
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
		knitk__call_abort_locked(call);
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
	/* Its owner's to read: an unsent loan's bytes go back, it never runs. */
	if (call->loan == LOAN_HELD)
		knitk__loan_release(call);
	pthread_mutex_lock(&pool->lock);
	last = call_release_locked(call);
	pthread_mutex_unlock(&pool->lock);
	if (last)
		knitk__pool_free(pool);
}

/*
 * Submit, wait, copy and release: knitk_call_wait, knitk_call_result and
 * knitk_call_release in one hold of pool->lock.  When this thread drains
 * its own result, the result goes from the return lane to @out directly
 * (struct pool_direct); otherwise it is copied from the handle.
 */
KNITK_EXPORT int knitk_pool_call(struct knitk_pool *pool, uint32_t fn,
				 const void *in, size_t len,
				 const struct knitk_call_opts *opts,
				 void *out, size_t cap, size_t *out_len)
{
	struct pool_direct direct = { .out = out, .cap = cap };
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
	/* Set at its registration, before the publish. */
	direct.task_id = call->task_id;
	/*
	 * Its own word, taken and waited for from its registration on (no
	 * other thread sees its handle), unless the ring is left to a
	 * ring-then-wait (S9).
	 */
	if (call->own)
		call_wait_own(pool, call, KNITK_WAIT_FOREVER, &direct);
	else
		pthread_mutex_lock(&pool->lock);
	/* Without a deadline the wait ends only with the call done. */
	if (!call_done_locked(call))
		calls_wait_locked(pool, &call, 1, false, KNITK_WAIT_FOREVER, ring,
				  &direct);
	ret = call->status;
	if (out_len)
		*out_len = call->len;
	if (call->len && cap && !call->direct)
		memcpy(out, call->data, call->len < cap ? call->len : cap);
	last = call_release_locked(call);
	pthread_mutex_unlock(&pool->lock);
	if (last)
		knitk__pool_free(pool);
	return ret;
}
