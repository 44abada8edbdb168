// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Loans (docs/protocol.md C8): calls whose argument the caller writes in
 * place, in the request lane that will carry it, instead of having it
 * copied there.
 *
 * knitk_pool_loan registers the call as a submit does (an in-flight entry;
 * private lanes: its worker), claims a lane of the mailbox it will go
 * through under its submitter's lock and reserves its bytes there (inline
 * or in the arena), waiting for room as a submit does.  Until
 * knitk_pool_submit_loan or knitk_call_release the loan is unsent
 * (LOAN_HELD): the lane and its bytes are the caller's, and so is the
 * entry: a worker's death leaves it alone (it is not the worker's call
 * yet) and the reset of the worker's mailboxes keeps the claimed lane
 * (L6).  An abort, its deadline or a shutdown may complete it meanwhile;
 * its bytes still wait for the caller.
 *
 * knitk_pool_submit_loan marks it LOAN_SENDING under pool->lock, from
 * which on it is a call like any other (a death completes it
 * -EOWNERDEAD, a cancel aborts it, shutdown waits for it), then publishes
 * the lane under the submitter's lock after the same alive/epoch re-check
 * as pool_publish, or gives it back.
 *
 * knitk_pool_submit_loans does the same for many loans of one pool: one
 * hold of pool->lock checks and marks them all, then, a run of 64 at a
 * time, one hold of each submitter lock re-checks and publishes that
 * mailbox's lanes with one store per worker (in the array's order), and
 * one ring covers every worker published to.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>

#include "pool_internal.h"
#include "in_arg.h"

/* The producer of the mailbox @call's lane is in (submitter @s). */
static struct knitk_producer *loan_producer(struct knitk_pool *pool,
					    const struct knitk_call *call,
					    unsigned int s)
{
	return pool->submitters[s].producers[pool->steal ? 0 : call->worker];
}

/* Give @lane of @call's mailbox (submitter @s, its lock held) back. */
static void loan_lane_release(struct knitk_pool *pool, const struct knitk_call *call,
			      unsigned int s, unsigned int lane)
{
	if (pool->steal)
		knitk__steal_lane_release(pool, s, lane);
	else
		knitk_lane_release(loan_producer(pool, call, s), lane);
}

/*
 * Claim a lane for @call in submitter @s's mailbox (its lock held), room
 * for @len bytes in it (*@buf) and its request header: the lane, or an
 * error with nothing claimed (-EAGAIN, -ENOSPC: no room now).
 */
static int loan_claim(struct knitk_pool *pool, struct knitk_call *call,
		      unsigned int s, uint32_t fn, size_t len, void **buf)
{
	struct knitk_producer *p = loan_producer(pool, call, s);
	struct knitk_lane_header *h;
	int lane, ret;

	lane = pool->steal ? knitk__steal_lane_claim(pool, s) : knitk_lane_claim(p);
	if (lane < 0)
		return lane;
	ret = knitk_lane_reserve(p, (unsigned int)lane, len, buf);
	if (!ret)
		ret = knitk_lane_header(p, (unsigned int)lane, &h);
	if (ret) {
		loan_lane_release(pool, call, s, (unsigned int)lane);
		return ret;
	}
	knitk__pool_request_fill(h, call, fn);
	knitk__in_arg_note(call, s, p, (unsigned int)lane, len);
	call->loan_no = pool->submitters[s].loans_claimed++;
	return lane;
}

/*
 * A lane for registered @call: waits for room as a publish does (while
 * its worker lives, not past its deadline, not in event mode).
 * -EOWNERDEAD when its worker died first: the caller registers it anew.
 */
static int loan_place(struct knitk_pool *pool, struct knitk_call *call,
		      uint32_t fn, size_t len, void **buf)
{
	struct pool_worker *pw = pool->steal ? NULL : &pool->workers[call->worker];
	uint64_t progress;
	unsigned int s;
	int ret;

	for (;;) {
		/* As in pool_publish: room freed after a failed claim bumps it. */
		progress = atomic_load_explicit(&pool->progress, memory_order_acquire);
		s = knitk__submitter_acquire(pool);
		if (pw && !pool_worker_current(pw, call->epoch))
			ret = -EOWNERDEAD;
		else
			ret = loan_claim(pool, call, s, fn, len, buf);
		pthread_mutex_unlock(&pool->submitters[s].lock);
		if (ret >= 0) {
			call->loan_sub = s;
			call->loan_lane = (unsigned int)ret;
			return 0;
		}
		if (ret != -ENOSPC && ret != -EAGAIN)
			return ret;
		POOL_HOOK(pool, POOL_HOOK_PUBLISH_FULL, pw ? pw->id : 0);
		ret = knitk__pool_wait_room(pool, pw, call, progress);
		if (ret)
			return ret;
	}
}

KNITK_EXPORT int knitk_pool_loan(struct knitk_pool *pool, uint32_t fn, size_t len,
				 const struct knitk_call_opts *opts,
				 struct knitk_call **callp, void **buf)
{
	const struct knitk_call_opts *co;
	struct knitk_call_opts o;
	struct knitk_call *call;
	int ret;

	if (!callp || !buf)
		return -EINVAL;
	ret = knitk__submission_check(pool, fn, buf, len, opts, &o, &co);
	if (ret)
		return ret;
	do {
		ret = knitk__pool_register(pool, &co, 1, true, true, &call);
		if (ret < 0)
			return ret;
		ret = loan_place(pool, call, fn, len, buf);
		if (ret)
			knitk__pool_unpublished(pool, &call, 1, ret);
	} while (ret == -EOWNERDEAD);
	if (ret)
		return ret;
	knitk__pool_published(pool, &call, 1);
	*callp = call;
	if (!len)
		*buf = NULL;
	return 0;
}

/*
 * Whether unsent @call may go now (pool->lock held): 0, else the status
 * it has completed with.  Private lanes: a successor of its worker that
 * has joined takes it over (its lane is in the mailbox the successor
 * consumes, kept by the reset).
 */
static int loan_check_locked(struct knitk_pool *pool, struct knitk_call *call)
{
	struct pool_worker *pw = &pool->workers[call->worker];
	uint32_t epoch;
	int err = 0;

	if (call_done_locked(call))
		return call->status;
	if (call->deadline_ns && pool_now_ns() >= call->deadline_ns) {
		err = -ETIMEDOUT;
	} else if (pool->steal) {
		if (!knitk__pool_has_workers_locked(pool, NULL))
			err = -EPIPE;
	} else if ((epoch = atomic_load(&pw->epoch)) != call->epoch) {
		if (atomic_load(&pw->alive))
			call->epoch = epoch;
		else
			err = -EOWNERDEAD;
	}
	if (err)
		knitk__call_complete_locked(pool, call, err, NULL, 0);
	return err;
}

/*
 * Unsent @call's lane and bytes go back to its mailbox (none after
 * knitk_pool_destroy, which took the mailboxes), then its entry; one not
 * completed yet is withdrawn (a release: it never was a call).
 */
static void loan_give_back(struct knitk_pool *pool, struct knitk_call *call)
{
	unsigned int s = call->loan_sub;
	bool gone;

	pthread_mutex_lock(&pool->lock);
	gone = pool->destroyed;
	pthread_mutex_unlock(&pool->lock);
	if (!gone) {
		pthread_mutex_lock(&pool->submitters[s].lock);
		loan_lane_release(pool, call, s, call->loan_lane);
		pthread_mutex_unlock(&pool->submitters[s].lock);
	}
	pthread_mutex_lock(&pool->lock);
	if (!call_done_locked(call))
		knitk__call_withdraw_locked(pool, call, -ECANCELED);
	call->loan = LOAN_NONE;
	if (!gone) {
		pool->loans--;
		if (pool->entries[call->entry].call == call)
			knitk__entry_free_locked(pool, call->entry);
		/* Room: a submit waiting for it since its sample looks again. */
		pool_progress_locked(pool);
		pthread_cond_broadcast(&pool->cond);
	}
	pthread_mutex_unlock(&pool->lock);
}

void knitk__loan_release(struct knitk_call *call)
{
	loan_give_back(call->pool, call);
}

/*
 * Publish sending @call's lane (private lanes: only to the incarnation of
 * its worker it was checked against, else the lane goes back) and ring;
 * whether it was published.
 */
static bool loan_publish(struct knitk_pool *pool, struct knitk_call *call)
{
	struct pool_submitter *sl = &pool->submitters[call->loan_sub];
	struct knitk_producer *p = loan_producer(pool, call, call->loan_sub);
	bool sent;

	if (pool->steal) {
		knitk__steal_publish_lane(pool, call->loan_sub, call->loan_lane,
					  call->task_id);
		return true;
	}
	pthread_mutex_lock(&sl->lock);
	sent = pool_worker_current(&pool->workers[call->worker], call->epoch);
	if (sent)
		knitk_lane_publish(p, call->loan_lane);
	else
		knitk_lane_release(p, call->loan_lane);
	pthread_mutex_unlock(&sl->lock);
	/* S2, after the publish. */
	if (sent)
		knitk_doorbell_ring(pool->ep, 1ULL << call->worker);
	return sent;
}

/*
 * Unsent @call (pool->lock held) turns sending when it may go now
 * (loan_check_locked): 0, else the status it has completed with.  After
 * knitk_pool_destroy it has completed (-ECANCELED).
 */
static int loan_take_locked(struct knitk_pool *pool, struct knitk_call *call)
{
	int ret = pool->destroyed ? call->status : loan_check_locked(pool, call);

	if (!ret) {
		call->loan = LOAN_SENDING;
		pool->loans--;
	}
	return ret;
}

/*
 * Sending @call was published (@sent), or its lane went back since its
 * worker died after the check (pool->lock held): a call like any other
 * from now on.
 */
static void loan_sent_locked(struct knitk_pool *pool, struct knitk_call *call,
			     bool sent)
{
	call->loan = LOAN_NONE;
	if (!sent) {
		/* As a publish to a dead worker would. */
		if (!call_done_locked(call))
			knitk__call_complete_locked(pool, call, -EOWNERDEAD, NULL, 0);
		if (pool->entries[call->entry].call == call)
			knitk__entry_free_locked(pool, call->entry);
		pool_progress_locked(pool);
		pthread_cond_broadcast(&pool->cond);
	} else if (call_done_locked(call)) {
		/* Completed while being sent: reaped now (event mode). */
		knitk__events_queue_locked(pool, call);
	}
}

KNITK_EXPORT int knitk_pool_submit_loan(struct knitk_call *call)
{
	struct knitk_pool *pool;
	bool sent;
	int ret;

	if (!call)
		return -EINVAL;
	pool = call->pool;
	pthread_mutex_lock(&pool->lock);
	if (call->loan != LOAN_HELD) {
		pthread_mutex_unlock(&pool->lock);
		return -EINVAL;
	}
	ret = loan_take_locked(pool, call);
	pthread_mutex_unlock(&pool->lock);
	if (ret) {
		loan_give_back(pool, call);
		return ret;
	}
	sent = loan_publish(pool, call);
	pthread_mutex_lock(&pool->lock);
	loan_sent_locked(pool, call, sent);
	ret = sent ? 0 : call->status;
	pthread_mutex_unlock(&pool->lock);
	return ret;
}

/*
 * Take @nr loans of @pool for a batch (pool->lock held): each one an
 * unsent loan, and none twice, else -EINVAL with every one left as it
 * was.  Then each turns sending, or (*@back) has completed and goes back.
 */
static int loans_take_locked(struct knitk_pool *pool,
			     struct knitk_call *const *calls, unsigned int nr,
			     bool *back)
{
	unsigned int i, j;

	for (i = 0; i < nr; i++) {
		/* A second entry for one call finds it marked by the first. */
		if (calls[i]->loan != LOAN_HELD) {
			for (j = 0; j < i; j++)
				calls[j]->loan = LOAN_HELD;
			return -EINVAL;
		}
		calls[i]->loan = LOAN_SENDING;
	}
	for (i = 0; i < nr; i++) {
		calls[i]->loan = LOAN_HELD;
		*back = loan_take_locked(pool, calls[i]) != 0 || *back;
	}
	return 0;
}

/*
 * Publish sending loans @calls[i], i in @todo (a run of up to 64, private
 * lanes): per submitter lock, the alive/epoch re-check of each (as in
 * loan_publish), one pub store per worker's mailbox, then one ring of the
 * workers published to.  A worker's lanes go out in the array's order: a
 * lane claimed before the ones gathered for its mailbox is published
 * after them, by a store of its own.  Returns the calls published.
 */
static uint64_t loans_publish_private(struct knitk_pool *pool,
				      struct knitk_call *const *calls,
				      uint64_t todo)
{
	uint64_t lanes[KNITK_MAX_WORKERS], last[KNITK_MAX_WORKERS];
	uint64_t sent = 0, rung, m, bit;
	struct knitk_producer **producers;
	struct knitk_call *call;
	unsigned int s, i, w;

	while (todo) {
		s = calls[__builtin_ctzll(todo)]->loan_sub;
		producers = pool->submitters[s].producers;
		rung = 0;
		pthread_mutex_lock(&pool->submitters[s].lock);
		for (m = todo; m; m &= m - 1) {
			i = (unsigned int)__builtin_ctzll(m);
			call = calls[i];
			if (call->loan_sub != s)
				continue;
			todo &= ~(1ULL << i);
			w = call->worker;
			bit = 1ULL << call->loan_lane;
			/*
			 * Under s's lock, seq_cst: pairs with the stores of
			 * handle_death and its cycle of every submitter lock
			 * (C3), as the re-check in pool_publish does.
			 */
			if (!pool_worker_current(&pool->workers[w], call->epoch)) {
				knitk_lane_release(producers[w], call->loan_lane);
				continue;
			}
			if (!(rung & (1ULL << w)))
				lanes[w] = 0;
			else if (lanes[w] && call->loan_no < last[w]) {
				knitk_lane_publish_batch(producers[w], lanes[w]);
				lanes[w] = 0;
			}
			lanes[w] |= bit;
			last[w] = call->loan_no;
			rung |= 1ULL << w;
			sent |= 1ULL << i;
		}
		/* L2: one release store of each pub word publishes its lanes. */
		for (m = rung; m; m &= m - 1) {
			w = (unsigned int)__builtin_ctzll(m);
			if (lanes[w])
				knitk_lane_publish_batch(producers[w], lanes[w]);
		}
		pthread_mutex_unlock(&pool->submitters[s].lock);
		/* S2, after every publish. */
		if (rung)
			knitk_doorbell_ring(pool->ep, rung);
	}
	return sent;
}

/* Calls a batch of loans publishes at a time: bits of a mask. */
#define LOANS_RUN	64

KNITK_EXPORT int knitk_pool_submit_loans(struct knitk_call *const *calls,
					 unsigned int nr)
{
	struct knitk_pool *pool;
	unsigned int i, b, n;
	uint64_t todo, sent;
	bool back = false;
	int done = 0, ret;

	if (!calls || !nr || nr > INT_MAX || !calls[0])
		return -EINVAL;
	pool = calls[0]->pool;
	for (i = 1; i < nr; i++)
		if (!calls[i] || calls[i]->pool != pool)
			return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	ret = loans_take_locked(pool, calls, nr, &back);
	pthread_mutex_unlock(&pool->lock);
	if (ret)
		return ret;
	/* Those that may not go have completed: their lanes go back first. */
	for (i = 0; back && i < nr; i++)
		if (calls[i]->loan == LOAN_HELD)
			loan_give_back(pool, calls[i]);
	for (b = 0; b < nr; b += n) {
		n = nr - b < LOANS_RUN ? nr - b : LOANS_RUN;
		todo = 0;
		for (i = 0; i < n; i++)
			if (calls[b + i]->loan == LOAN_SENDING)
				todo |= 1ULL << i;
		if (!pool->steal) {
			sent = loans_publish_private(pool, calls + b, todo);
		} else {
			/* Each as T12 publishes one: window, pick, reserve, ring. */
			for (sent = todo; todo; todo &= todo - 1) {
				struct knitk_call *call = calls[b + __builtin_ctzll(todo)];

				knitk__steal_publish_lane(pool, call->loan_sub,
							  call->loan_lane, call->task_id);
			}
		}
		pthread_mutex_lock(&pool->lock);
		for (i = 0; i < n; i++)
			if (calls[b + i]->loan == LOAN_SENDING)
				loan_sent_locked(pool, calls[b + i], sent & (1ULL << i));
		pthread_mutex_unlock(&pool->lock);
		done += __builtin_popcountll(sent);
	}
	return done;
}

void knitk__loans_end_locked(struct knitk_pool *pool)
{
	unsigned int i;

	for (i = 0; i < pool->nr_workers * KNITK_LANES; i++) {
		struct knitk_call *call = pool->entries[i].call;

		if (call && call->loan == LOAN_HELD && !call_done_locked(call))
			knitk__call_complete_locked(pool, call, -ESHUTDOWN, NULL, 0);
	}
}
