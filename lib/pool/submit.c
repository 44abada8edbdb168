// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Submission: the balancer, registering calls in flight, and publishing
 * their requests.
 *
 * Submission of one call:
 *  1. Under pool->lock the balancer picks the live worker with the fewest
 *     calls in flight (ties: the lowest id) and below POOL_CAP, and the
 *     call takes a free in-flight entry of that worker: task id =
 *     (generation, entry).
 *  2. Under its submitter's lock (room.c) the thread re-checks that the
 *     worker is alive and publishes the request into mailbox (submitter,
 *     worker); a stealing pool publishes into its slot's mailbox instead
 *     (steal.c).
 *  3. It rings that worker's doorbell, which does nothing unless the worker
 *     is parked (the doorbell protocol); no other worker is touched.
 *
 * A batch (knitk_pool_submit_batch) takes these steps for a run of up to
 * 64 calls at once: one hold of pool->lock registers them all, one
 * submitter lock stages them lane by lane and publishes each worker's
 * lanes with one store, and one ring covers every worker published to.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "pool_internal.h"
#include "in_arg.h"
#include "box.h"
#include "../sized.h"

/*
 * The balancer: least-loaded live worker below the cap, or -1.  Ties go
 * to the lowest id: calls made one at a time keep landing on the worker
 * that served the previous one, still polling its mailboxes, while the
 * others stay parked (a rotating tie-break would wake each in turn and
 * keep every worker spinning for a lone caller).
 */
static int pool_pick_locked(struct knitk_pool *pool,
			    const struct knitk_call_opts *co)
{
	unsigned int w, best_load = UINT_MAX;
	int best = -1;

	if (co && (co->flags & KNITK_CALL_WORKER)) {
		struct pool_worker *pw = &pool->workers[co->worker];

		return atomic_load(&pw->alive) && pw->inflight < POOL_CAP ?
		       (int)co->worker : -1;
	}
	/* Stealing: buckets of any worker, while some worker serves. */
	if (pool->steal && !knitk__pool_has_workers_locked(pool, co))
		return -1;
	for (w = 0; w < pool->nr_workers; w++) {
		struct pool_worker *pw = &pool->workers[w];

		/* Stealing: w is only the entry's bucket, any worker runs it. */
		if ((!pool->steal && !atomic_load(&pw->alive)) ||
		    pw->inflight >= POOL_CAP)
			continue;
		if (pw->inflight < best_load) {
			best_load = pw->inflight;
			best = (int)w;
			if (!best_load)
				break;	/* an idle worker: take it */
		}
	}
	return best;
}

/*
 * A worker with room for a call of @co (pool->lock held): waits while
 * every eligible worker is at capacity, unless @may_wait is false
 * (-EBUSY then), and not past the call's deadline (-ETIMEDOUT then);
 * -ESHUTDOWN, -EPIPE, or -EAGAIN in event mode.
 */
static int pool_admit_locked(struct knitk_pool *pool,
			     const struct knitk_call_opts *co, bool may_wait)
{
	int w;

	for (;;) {
		if (pool->closed)
			return -ESHUTDOWN;
		w = pool_pick_locked(pool, co);
		if (w >= 0)
			return w;
		if (!knitk__pool_has_workers_locked(pool, co))
			return -EPIPE;
		/* An event loop never waits in the library: it reaps first. */
		if (atomic_load_explicit(&pool->evmode, memory_order_relaxed))
			return -EAGAIN;
		if (!may_wait)
			return -EBUSY;
		POOL_HOOK(pool, POOL_HOOK_SUBMIT_WAIT, 0);
		if (knitk__pool_wait_passive_until_locked(pool, co ? co->deadline_ns : 0))
			return -ETIMEDOUT;
	}
}

/*
 * Register a new call of @co in flight on worker @w, in a handle from the
 * cache (NULL: out of memory); with @loan an unsent loan (loan.c).
 */
static struct knitk_call *pool_enter_locked(struct knitk_pool *pool,
					    const struct knitk_call_opts *co,
					    bool reap, bool loan, unsigned int w)
{
	struct pool_worker *pw = &pool->workers[w];
	struct knitk_call *call;
	struct pool_entry *e;
	unsigned int k;

	call = knitk__call_get_locked(pool);
	if (!call)
		return NULL;
	/*
	 * The caller's, the entry's and the submit's own: once registered a
	 * call can complete (a death, a cancel) and, in event mode, be reaped
	 * and released by another thread before its submit returns.
	 */
	atomic_store_explicit(&call->refs, 3, memory_order_relaxed);
	call->no_reap = !reap;
	call->deadline_ns = co ? co->deadline_ns : 0;
	k = (unsigned int)__builtin_ctzll(~pw->busy);
	pw->busy |= 1ULL << k;
	pw->inflight++;
	call->worker = w;
	call->ran = -1;
	call->entry = w * KNITK_LANES + k;
	e = &pool->entries[call->entry];
	e->gen++;
	e->call = call;
	atomic_store_explicit(&call->state, CALL_INFLIGHT, memory_order_relaxed);
	call->epoch = atomic_load(&pw->epoch);
	call->task_id = pool_task_id(call->entry, e->gen);
	/*
	 * knitk_pool_call's own, never reaped: its thread waits for it
	 * alone, so it takes the result from the box from the start (R6),
	 * before a worker could end it, and waits on the word from here (no
	 * second hold of pool->lock), unless the ring is left to a
	 * ring-then-wait (S9), which waits the drainer's way.  Other calls
	 * travel in return lanes unless a thread waits for one alone: a
	 * batch's results are drained together cheaper than looked at one
	 * by one.
	 */
	if (!reap && !loan && !pool->ring_wait &&
	    knitk__call_take_locked(pool, call))
		knitk__call_own_enter_locked(pool, call);
	if (loan) {
		call->loan = LOAN_HELD;
		pool->loans++;
	}
	pool->handles++;
	pool->stats.submitted++;
	return call;
}

/*
 * Register up to @nr calls (@cos[i] their options) in one hold of
 * pool->lock; returns how many, or the error of the first.  Only the
 * first may wait for room: the caller publishes what was registered
 * before anything waits for room again, since the calls that free it may
 * be these very ones.  With @loan they are unsent loans.
 */
int knitk__pool_register(struct knitk_pool *pool,
			 const struct knitk_call_opts *const *cos, unsigned int nr,
			 bool reap, bool loan, struct knitk_call **calls)
{
	unsigned int i;
	int w = 0;

	pthread_mutex_lock(&pool->lock);
	for (i = 0; i < nr; i++) {
		w = pool_admit_locked(pool, cos[i], i == 0);
		if (w < 0)
			break;
		calls[i] = pool_enter_locked(pool, cos[i], reap, loan, (unsigned int)w);
		if (!calls[i]) {
			w = -ENOMEM;
			break;
		}
	}
	pthread_mutex_unlock(&pool->lock);
	return i ? (int)i : w;
}

/*
 * The caller's fields of registered @call's request header: set in @h,
 * the library's fields (payload, stamp) left as they are.
 */
void knitk__pool_request_fill(struct knitk_lane_header *h,
			      const struct knitk_call *call, uint32_t fn)
{
	h->function_id = fn;
	h->flags = 0;
	h->task_id = call->task_id;
	h->tag = 0;
	h->deadline_ns = call->deadline_ns;
	h->abort_id = call->entry + 1;
	h->user = 0;
}

/* The request header of registered @call. */
static struct knitk_lane_header pool_request(const struct knitk_call *call,
					     uint32_t fn)
{
	struct knitk_lane_header h = { 0 };

	knitk__pool_request_fill(&h, call, fn);
	return h;
}

/*
 * Publish the requests of registered @calls (@subs their functions and
 * argument bytes), in order: per round one submitter lock, the requests
 * staged lane by lane, one pub store per worker's mailbox (L2) and one
 * ring of every worker published to (S2).  With @defer, the last ring
 * is left to the caller's wait instead (*@defer: the doorbells to ring),
 * which rings and parks in one syscall (S9).  Returns how many are done:
 * all @nr, or the index of the first that was not published, with the
 * reason in *@err.  A call whose worker died first counts as done: the
 * death handler completes it (C3).
 */
static unsigned int pool_publish(struct knitk_pool *pool,
				 struct knitk_call *const *calls,
				 const struct knitk_submission *subs,
				 unsigned int nr, uint64_t *defer, int *err)
{
	uint64_t lanes[KNITK_MAX_WORKERS], progress, rung, m;
	struct knitk_producer **producers;
	struct knitk_lane_header h;
	struct pool_worker *pw;
	unsigned int s, i = 0, w;
	int ret = 0;

	for (; pool->steal && i < nr; i++) {
		h = pool_request(calls[i], subs[i].fn);
		ret = knitk__steal_publish(pool, calls[i], &h, subs[i].in, subs[i].len);
		if (ret) {
			*err = ret;
			return i;
		}
	}
	while (i < nr) {
		/*
		 * Sampled before the attempt: a completion that frees room
		 * after our send failed has bumped it by the time we wait.
		 * Acquire pairs with the release in pool_progress_locked, so
		 * room freed before a bump we see is seen by the send.
		 */
		progress = atomic_load_explicit(&pool->progress, memory_order_acquire);
		s = knitk__submitter_acquire(pool);
		producers = pool->submitters[s].producers;
		rung = 0;
		for (; i < nr; i++) {
			pw = &pool->workers[calls[i]->worker];
			w = pw->id;
			/* Dead or reborn: the death handler completes it (C3). */
			if (!pool_worker_current(pw, calls[i]->epoch))
				continue;
			h = pool_request(calls[i], subs[i].fn);
			ret = knitk_producer_stage(producers[w], &h,
						   subs[i].len ? subs[i].in : NULL,
						   subs[i].len);
			if (ret < 0)
				break;
			knitk__in_arg_note(calls[i], s, producers[w], (unsigned int)ret,
					   subs[i].len);
			if (!(rung & (1ULL << w)))
				lanes[w] = 0;
			lanes[w] |= 1ULL << ret;
			rung |= 1ULL << w;
			if (POOL_PUBLISH_TWICE()) {
				int again = knitk_producer_stage(producers[w], &h,
								 subs[i].len ? subs[i].in : NULL,
								 subs[i].len);

				if (again >= 0) {
					lanes[w] |= 1ULL << again;
					knitk__in_arg_note(calls[i], s, producers[w],
							   (unsigned int)again,
							   subs[i].len);
				}
			}
		}
		/* L2: one release store of each pub word publishes its lanes. */
		for (m = rung; m; m &= m - 1) {
			w = (unsigned int)__builtin_ctzll(m);
			knitk_lane_publish_batch(producers[w], lanes[w]);
		}
		pthread_mutex_unlock(&pool->submitters[s].lock);
		/* S2, after every publish: a no-op for the workers awake. */
		if (rung && defer && i == nr)
			*defer |= rung;
		else if (rung)
			knitk_doorbell_ring(pool->ep, rung);
		if (i == nr)
			break;
		if (ret != -ENOSPC && ret != -EAGAIN) {
			*err = ret;
			return i;
		}
		pw = &pool->workers[calls[i]->worker];
		POOL_HOOK(pool, POOL_HOOK_PUBLISH_FULL, pw->id);
		/*
		 * Backpressure: the worker has not yet retired earlier
		 * requests' arena bytes (ours just published among them).  It
		 * does so before answering them; past the call's deadline it
		 * is not published at all.
		 */
		ret = knitk__pool_wait_room(pool, pw, calls[i], progress);
		if (ret) {
			*err = ret;
			return i;
		}
	}
	return nr;
}

/*
 * Registered calls that were never published: withdraw them with @err
 * (not counted as submitted) and give their entries back (the caller
 * never sees their handles).  A loan among them had no lane yet.
 */
void knitk__pool_unpublished(struct knitk_pool *pool,
			     struct knitk_call *const *calls, unsigned int nr,
			     int err)
{
	unsigned int i;

	pthread_mutex_lock(&pool->lock);
	for (i = 0; i < nr; i++) {
		if (calls[i]->own)
			knitk__call_own_leave_locked(pool, calls[i]);
		knitk__call_withdraw_locked(pool, calls[i], err);
		if (pool->entries[calls[i]->entry].call == calls[i])
			knitk__entry_free_locked(pool, calls[i]->entry);
		if (calls[i]->loan == LOAN_HELD)
			pool->loans--;
		calls[i]->loan = LOAN_NONE;
		knitk__call_unref_locked(calls[i]);	/* the caller's */
		knitk__call_unref_locked(calls[i]);	/* the submit's */
	}
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
}

/*
 * A submission's checks; its options copied to @o, *@co the copy (NULL:
 * none given).  A loan passes any non-NULL @in: the caller writes its
 * bytes later.
 */
int knitk__submission_check(struct knitk_pool *pool, uint32_t fn,
			    const void *in, size_t len,
			    const struct knitk_call_opts *opts,
			    struct knitk_call_opts *o,
			    const struct knitk_call_opts **co)
{
	int ret;

	*co = NULL;
	if (opts) {
		ret = knitk__sized_in(o, sizeof(*o), KNITK_CALL_OPTS_SIZE_VER0, opts);
		if (ret)
			return ret;
		*co = o;
	}
	if (!pool || fn >= pool->table.nr_tasks || (len && !in))
		return -EINVAL;
	if (*co && ((*co)->reserved || ((*co)->flags & ~KNITK_CALL_WORKER) ||
		    (((*co)->flags & KNITK_CALL_WORKER) &&
		     ((*co)->worker >= pool->nr_workers || pool->steal))))
		return -EINVAL;
	if (len > pool->max_len)
		return -EMSGSIZE;
	return 0;
}

/*
 * Published @calls: the submit lets go of its own references, without
 * pool->lock while the caller's or the entry's remains (the lock is taken
 * only for a call already completed and released meanwhile, event mode).
 */
void knitk__pool_published(struct knitk_pool *pool,
			   struct knitk_call *const *calls, unsigned int nr)
{
	unsigned int i;
	bool locked = false;

	for (i = 0; i < nr; i++) {
		if (knitk__call_unref_unless_last(calls[i]))
			continue;
		if (!locked)
			pthread_mutex_lock(&pool->lock);
		locked = true;
		knitk__call_unref_locked(calls[i]);
	}
	if (locked)
		pthread_mutex_unlock(&pool->lock);
}

/*
 * Submit @nr checked calls in order: registered a run at a time, each run
 * published before the next may wait for room.  Returns how many were
 * submitted (their handles in @calls), or the first one's error.
 */
static int pool_submit_calls(struct knitk_pool *pool,
			     const struct knitk_submission *subs,
			     const struct knitk_call_opts *const *cos,
			     unsigned int nr, bool reap, uint64_t *defer,
			     struct knitk_call **calls)
{
	unsigned int done = 0, n, k;
	int ret = 0, err = 0;

	while (done < nr) {
		ret = knitk__pool_register(pool, cos + done, nr - done, reap, false,
					   calls + done);
		if (ret < 0)
			break;
		n = (unsigned int)ret;
		k = pool_publish(pool, calls + done, subs + done, n, defer, &err);
		knitk__pool_published(pool, calls + done, k);
		done += k;
		if (k < n) {
			knitk__pool_unpublished(pool, calls + done, n - k, err);
			/* Gone: the caller is never left a freed handle. */
			memset(calls + done, 0, (n - k) * sizeof(*calls));
			ret = err;
			break;
		}
	}
	return done ? (int)done : ret;
}

int knitk__pool_submit(struct knitk_pool *pool, uint32_t fn, const void *in,
		       size_t len, const struct knitk_call_opts *opts, bool reap,
		       uint64_t *defer, struct knitk_call **callp)
{
	struct knitk_submission sub = { .fn = fn, .in = in, .len = len };
	const struct knitk_call_opts *co;
	struct knitk_call_opts o;
	int ret;

	if (!callp)
		return -EINVAL;
	ret = knitk__submission_check(pool, fn, in, len, opts, &o, &co);
	if (ret)
		return ret;
	ret = pool_submit_calls(pool, &sub, &co, 1, reap, defer, callp);
	return ret < 0 ? ret : 0;
}

KNITK_EXPORT int knitk_pool_submit(struct knitk_pool *pool, uint32_t fn,
				   const void *in, size_t len,
				   const struct knitk_call_opts *opts,
				   struct knitk_call **callp)
{
	return knitk__pool_submit(pool, fn, in, len, opts, true, NULL, callp);
}

/*
 * Calls a batch takes at a time: the room of the copies of their options,
 * and how long one submitter lock is held.
 */
#define POOL_SUBMIT_RUN		KNITK_LANES

KNITK_EXPORT int knitk_pool_submit_batch(struct knitk_pool *pool,
					 const struct knitk_submission *subs,
					 unsigned int nr,
					 struct knitk_call **calls)
{
	struct knitk_call_opts o[POOL_SUBMIT_RUN];
	const struct knitk_call_opts *cos[POOL_SUBMIT_RUN];
	unsigned int done = 0, n, i;
	int ret = 0, k;

	if (!pool || !subs || !calls || !nr || nr > INT_MAX)
		return -EINVAL;
	while (done < nr && !ret) {
		n = nr - done < POOL_SUBMIT_RUN ? nr - done : POOL_SUBMIT_RUN;
		/* Checked first: the batch stops at its first bad entry. */
		for (i = 0; i < n; i++) {
			const struct knitk_submission *sub = &subs[done + i];

			ret = sub->reserved ? -EINVAL :
			      knitk__submission_check(pool, sub->fn, sub->in, sub->len,
					       sub->opts, &o[i], &cos[i]);
			if (ret)
				break;
		}
		if (!i)
			break;
		k = pool_submit_calls(pool, subs + done, cos, i, true, NULL, calls + done);
		if (k < 0)
			return done ? (int)done : k;
		done += (unsigned int)k;
		if ((unsigned int)k < i)
			break;
	}
	return done ? (int)done : ret;
}
