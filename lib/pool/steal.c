// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The stealing dispatch of the pool (KNITK_POOL_DISPATCH_STEAL,
 * docs/protocol.md T10-T12): one request mailbox per submitter,
 * claimed from by every worker (the claim itself is the core's,
 * knitk_lane_scan on a claimant), results on each worker's own return
 * mailbox, matched by task id.
 *
 * Who holds which call (T10): the slot's producer keeps a lane a worker
 * retired busy until the slot reports it; the report maps the lane to the
 * task id published there.  A worker claims again only after it answered
 * everything it claimed before, so of worker w's reports only the latest
 * non-empty one per slot can hold calls w has not answered: that is the
 * set the death handler fails with -EOWNERDEAD, after taking w's last
 * results.
 *
 * The wake policy (T12): two pool words in the (kernel-ignored) ack line
 * of request mailbox 0, the idle mask and the searching mask, bit w per
 * worker.  See pool_steal_wake.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"

/* The idle (0) and searching (1) masks of the knot of @knot. */
_Atomic uint64_t *knitk__steal_words(struct knitk_endpoint *ep)
{
	struct knitk_layout l;
	void *base;

	knitk_endpoint_layout(ep, &l, NULL);
	knitk_endpoint_base(ep, &base);
	return (_Atomic uint64_t *)((char *)base + l.mailbox_off +
				    offsetof(struct knitk_sector, ack));
}

/*
 * Wake one idle worker if nobody searches (T12).  Called after a publish
 * (the caller's release store of pub) or by a worker whose claim ended its
 * search.  The fence pairs with the seq_cst RMWs of a worker going idle
 * (knitk__steal_idle) and its doorbell prepare: either we see its
 * searching bit, or its re-check after the prepare sees our publish.
 * Only a worker changes its own bits: until the one rung marks itself
 * awake, later publishes ring the same worker, whose delivered wake
 * suppresses them, so a burst wakes one worker, not a herd.
 */
void knitk__steal_wake(struct knitk_endpoint *ep, _Atomic uint64_t *words)
{
	uint64_t idle;

	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&words[1], memory_order_seq_cst))
		return;
	idle = atomic_load_explicit(&words[0], memory_order_seq_cst);
	if (idle)
		knitk_doorbell_ring(ep, idle & -idle);
}

/* Worker @w found nothing to claim: it searches (spins). */
void knitk__steal_search(_Atomic uint64_t *words, unsigned int w)
{
	uint64_t bit = 1ULL << w;

	if (!(atomic_load_explicit(&words[1], memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(&words[1], bit, memory_order_seq_cst);
}

/*
 * Worker @w is about to park: idle first, then no longer searching, both
 * seq_cst, before its doorbell prepare and re-check (T12).
 */
void knitk__steal_idle(_Atomic uint64_t *words, unsigned int w)
{
	uint64_t bit = 1ULL << w;

	atomic_fetch_or_explicit(&words[0], bit, memory_order_seq_cst);
	atomic_fetch_and_explicit(&words[1], ~bit, memory_order_seq_cst);
}

/* Worker @w woke: not idle; searching until its next claim. */
void knitk__steal_awake(_Atomic uint64_t *words, unsigned int w)
{
	uint64_t bit = 1ULL << w;

	atomic_fetch_or_explicit(&words[1], bit, memory_order_seq_cst);
	atomic_fetch_and_explicit(&words[0], ~bit, memory_order_seq_cst);
}

/*
 * Worker @w claimed work.  If it was the last searcher and work is left,
 * one more idle worker is woken, so a burst spreads over the pool.
 */
void knitk__steal_claimed(struct knitk_endpoint *ep, _Atomic uint64_t *words,
			  unsigned int w, unsigned int nr_mailboxes)
{
	uint64_t bit = 1ULL << w, pending;
	unsigned int m;

	if (!(atomic_load_explicit(&words[1], memory_order_relaxed) & bit))
		return;
	if (atomic_fetch_and_explicit(&words[1], ~bit, memory_order_seq_cst) != bit)
		return;
	for (m = 0; m < nr_mailboxes; m++)
		if (knitk_mailbox_pending(ep, m, &pending) > 0) {
			knitk__steal_wake(ep, words);
			return;
		}
}

/* Worker @w leaves (stopped, or its host is gone): neither idle nor searching. */
void knitk__steal_gone(_Atomic uint64_t *words, unsigned int w)
{
	uint64_t bit = 1ULL << w;

	atomic_fetch_and_explicit(&words[0], ~bit, memory_order_seq_cst);
	atomic_fetch_and_explicit(&words[1], ~bit, memory_order_seq_cst);
}

int knitk__steal_setup(struct knitk_pool *pool)
{
	unsigned int s;
	int ret;

	pool->steal_words = knitk__steal_words(pool->ep);
	for (s = 0; s < pool->nr_submitters; s++) {
		struct pool_submitter *sl = &pool->submitters[s];

		sl->held = calloc(pool->nr_workers, sizeof(*sl->held));
		sl->nr_held = calloc(pool->nr_workers, sizeof(*sl->nr_held));
		if (!sl->held || !sl->nr_held)
			return -ENOMEM;
		ret = knitk_producer_track_claims(sl->producers[0]);
		if (ret)
			return ret;
	}
	return 0;
}

void knitk__steal_free_slot(struct pool_submitter *sl)
{
	free(sl->held);
	free(sl->nr_held);
}

/*
 * T10: take the reports of slot @s's producer (its lock held): each
 * worker's latest non-empty claim replaces its record.
 */
void knitk__steal_collect(struct knitk_pool *pool, unsigned int s)
{
	struct pool_submitter *sl = &pool->submitters[s];
	uint64_t lanes[KNITK_MAX_WORKERS], m;
	unsigned int w, n;

	if (knitk_producer_claims(sl->producers[0], lanes, pool->nr_workers) <= 0)
		return;
	for (w = 0; w < pool->nr_workers; w++) {
		if (!lanes[w])
			continue;
		n = 0;
		for (m = lanes[w]; m; m &= m - 1)
			sl->held[w][n++] = sl->lane_task[__builtin_ctzll(m)];
		sl->nr_held[w] = (uint8_t)n;
	}
}

/*
 * Death of worker @w (its role is no longer live): collect, take w's
 * records into @tids and free the arena slots it held (T11).  Returns how
 * many task ids.
 */
unsigned int knitk__steal_take_dead(struct knitk_pool *pool, unsigned int w,
				    uint64_t *tids)
{
	unsigned int s, n = 0, i;

	for (s = 0; s < pool->nr_submitters; s++) {
		struct pool_submitter *sl = &pool->submitters[s];

		pthread_mutex_lock(&sl->lock);
		knitk__steal_collect(pool, s);
		for (i = 0; i < sl->nr_held[w]; i++)
			tids[n++] = sl->held[w][i];
		sl->nr_held[w] = 0;
		knitk_producer_reset_claimant(sl->producers[0], w);
		pthread_mutex_unlock(&sl->lock);
	}
	knitk__steal_gone(pool->steal_words, w);
	return n;
}

/* Send @h into slot @s's mailbox (its lock held); the lane, or an error. */
static int steal_send(struct knitk_pool *pool, unsigned int s,
		      const struct knitk_lane_header *h, const void *in,
		      size_t len)
{
	struct pool_submitter *sl = &pool->submitters[s];
	int ret;

	ret = knitk_producer_send(sl->producers[0], h, len ? in : NULL, len);
	if (ret == -EAGAIN) {
		/* T10: retired lanes stay busy until reported. */
		knitk__steal_collect(pool, s);
		ret = knitk_producer_send(sl->producers[0], h, len ? in : NULL, len);
	}
	if (ret >= 0)
		sl->lane_task[ret] = h->task_id;
	return ret;
}

/*
 * Publish registered @call into a slot's stealing mailbox; 0, or a
 * negative errno when it was not published.  Backpressure as in
 * pool_publish: wait for a completion batch since the sample, or -EAGAIN
 * in event mode.
 */
int knitk__steal_publish(struct knitk_pool *pool, struct knitk_call *call,
			 const struct knitk_lane_header *h, const void *in,
			 size_t len)
{
	uint64_t progress;
	unsigned int s;
	int ret;

	(void)call;
	for (;;) {
		/* Acquire pairs with the release in pool_progress_locked. */
		progress = atomic_load_explicit(&pool->progress, memory_order_acquire);
		s = knitk__submitter_acquire(pool);
		ret = steal_send(pool, s, h, in, len);
		pthread_mutex_unlock(&pool->submitters[s].lock);
		if (ret >= 0)
			break;
		if (ret != -ENOSPC && ret != -EAGAIN)
			return ret;
		POOL_HOOK(pool, POOL_HOOK_PUBLISH_FULL, 0);
		/* As in pool_publish: an event loop reaps, then submits again. */
		if (atomic_load_explicit(&pool->evmode, memory_order_relaxed))
			return -EAGAIN;
		pthread_mutex_lock(&pool->lock);
		while (progress == atomic_load_explicit(&pool->progress, memory_order_relaxed) &&
		       knitk__pool_has_workers_locked(pool, NULL))
			knitk__pool_wait_passive_locked(pool);
		pthread_mutex_unlock(&pool->lock);
	}
	knitk__steal_wake(pool->ep, pool->steal_words);
	return 0;
}

static unsigned int steal_running_locked(struct knitk_pool *pool)
{
	unsigned int w, n = 0;

	for (w = 0; w < pool->nr_workers; w++)
		n += pool->workers[w].state == WORKER_RUNNING;
	return n + pool->respawning;
}

/*
 * Stop the workers of an idle pool one at a time: a claim may take several
 * lanes, so only one stop message is in the mailboxes at once, and the
 * worker that answers it leaves.
 */
void knitk__steal_stop_workers(struct knitk_pool *pool)
{
	struct knitk_lane_header h = { .function_id = POOL_FN_STOP };
	unsigned int running;
	int ret;

	for (;;) {
		pthread_mutex_lock(&pool->lock);
		running = steal_running_locked(pool);
		pthread_mutex_unlock(&pool->lock);
		if (!running)
			return;
		pthread_mutex_lock(&pool->submitters[0].lock);
		ret = steal_send(pool, 0, &h, NULL, 0);
		pthread_mutex_unlock(&pool->submitters[0].lock);
		if (ret >= 0)
			knitk__steal_wake(pool->ep, pool->steal_words);
		pthread_mutex_lock(&pool->lock);
		while (steal_running_locked(pool) == running && !pool->completer_done)
			knitk__pool_wait_passive_locked(pool);
		ret = pool->completer_done;
		pthread_mutex_unlock(&pool->lock);
		if (ret)
			return;
	}
}

/*
 * After a death (pool->lock held): with no worker left and none coming
 * back, nobody will claim the calls still in the mailboxes; they complete
 * with -EPIPE, as a submit would.
 */
void knitk__steal_orphans_locked(struct knitk_pool *pool)
{
	unsigned int i;

	if (knitk__pool_has_workers_locked(pool, NULL))
		return;
	for (i = 0; i < pool->nr_workers * KNITK_LANES; i++)
		if (pool->entries[i].call) {
			knitk__call_complete_locked(pool, pool->entries[i].call,
						    -EPIPE, NULL, 0);
			knitk__entry_free_locked(pool, i);
		}
}
