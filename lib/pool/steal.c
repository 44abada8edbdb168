// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The host's side of the stealing dispatch (KNITK_POOL_DISPATCH_STEAL,
 * docs/protocol.md T10-T14): one request mailbox per submitter, claimed
 * from by every worker (the claim itself is the core's, knitk_lane_scan on
 * a claimant), results on each worker's own return mailbox, matched by
 * task id.  Who is woken is the wake policy's (steal_wake.c).
 *
 * Who holds which call (T10): the slot's producer keeps a lane a worker
 * retired busy until the slot reports it; the report maps the lane to the
 * task id published there.  A worker claims again only after it answered
 * everything it claimed before, so of worker w's reports only the latest
 * non-empty one per slot can hold calls w has not answered: that is the
 * set the death handler fails with -EOWNERDEAD, after taking w's last
 * results.  See knitk__steal_rescue for a searcher that does not run (T14).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"
#include "in_arg.h"
#include "box.h"
#include "steal_wake.h"
#include "../trace.h"

/* Attempts of one rescue: a hand-off fails only while a claimant works. */
#define STEAL_RESCUE_TRIES	4

/*
 * A pending lane of a stealing mailbox reserved for nobody: work no
 * worker is woken for (T13).  A dead worker's reservations count here;
 * its death handler sees to them (knitk__steal_take_dead).
 */
static bool steal_unreserved(struct knitk_pool *pool)
{
	uint64_t pending, resv;
	unsigned int s, w;

	for (s = 0; s < pool->nr_submitters; s++) {
		if (knitk_mailbox_pending(pool->ep, s, &pending) <= 0)
			continue;
		resv = 0;
		/*
		 * After pub (the acquire in knitk_mailbox_pending), which pairs
		 * with the release of pub after each reservation (T13).
		 */
		for (w = 0; w < pool->nr_workers; w++)
			resv |= atomic_load_explicit(knitk__steal_line_word(pool->ep, s, w,
					offsetof(struct knitk_steal_line, resv)),
					memory_order_relaxed);
		if (pending & ~resv)
			return true;
	}
	return false;
}

/*
 * Give picked worker @w back, nothing handed to it (T12), and say whether
 * to pick again.  While we held w, a publish's pick may have found w
 * taken and no other idle worker: it reserved nothing and rang nobody,
 * and w, parked, would not see the lane.  Such a pick came before our
 * unpick (seq_cst) and inside its publish window, so once the windows
 * are closed its lane is seen: the seq_cst load of the window reads the
 * publisher's close, an RMW after its pub store (release sequence).  A
 * worker still searching after the unpick goes idle only after it saw
 * that window too (knitk__steal_idle), so it covers the lane, if it runs
 * (@searchers); else, with a lane nobody reserved, pick again.
 *
 * After a producer's hand-off that handed nothing over we count on no
 * searcher (!@searchers): the hand-off announces with its reservation and
 * withdraws when it sees a claimant's want in the region, and that
 * claimant may have seen the reservation first and left the lanes (T13):
 * neither took them, the claimant may be idle by now, and the searcher
 * may not run (T14: the rescue is there because it may not).
 */
static bool steal_unpick_recheck(struct knitk_pool *pool, int w, bool searchers)
{
	_Atomic uint64_t *words = pool->steal_words;

	knitk__steal_unpick(pool->ep, words, w);
	while (atomic_load_explicit(&words[STEAL_WINDOW], memory_order_seq_cst))
		sched_yield();
	if (searchers &&
	    atomic_load_explicit(&words[STEAL_SEARCHING], memory_order_seq_cst))
		return false;
	return steal_unreserved(pool);
}

/*
 * Hand one region of the lanes nobody claimed or reserved to idle worker
 * @to (picked) and ring it; with nothing handed over, give it back and
 * try again while steal_unpick_recheck says so.
 */
static void steal_give(struct knitk_pool *pool, int to)
{
	_Atomic uint64_t *words = pool->steal_words;
	unsigned int s, tries;
	int n;

	for (tries = 0; to >= 0 && tries < STEAL_RESCUE_TRIES; tries++) {
		for (s = 0, n = 0; s < pool->nr_submitters && n <= 0; s++) {
			struct pool_submitter *sl = &pool->submitters[s];

			pthread_mutex_lock(&sl->lock);
			n = knitk_producer_hand_off(sl->producers[0], (unsigned int)to,
						    pool->steal_g);
			pthread_mutex_unlock(&sl->lock);
			KNITK_TRACE(KT_P_HAND_OFF, to, n, s);
		}
		if (n > 0) {
			knitk__steal_ring(pool->ep, words, to);
			return;
		}
		POOL_HOOK(pool, POOL_HOOK_RESCUE_EMPTY, (unsigned int)to);
		if (!steal_unpick_recheck(pool, to, false))
			return;
		to = knitk__steal_pick_idle(pool->ep, words, STEAL_BY_HOST);
	}
	/* Out of tries: a claimant holds that work and scans again after. */
	knitk__steal_unpick(pool->ep, words, to);
}

/*
 * T14: a thread waiting for calls is about to park, and a worker searches:
 * so no publish since has woken an idle worker (T12), and the searcher may
 * be stopped (SIGSTOP, a debugger) and never take what they published.
 * Hand one region of the lanes nobody claimed or reserved to an idle
 * worker and ring it.  The hand-off decides against a searcher that is
 * only slow: a lane is reserved only if no claimant takes it, so the ring
 * is never spurious, and a lane the searcher takes is not handed over.
 */
void knitk__steal_rescue(struct knitk_pool *pool)
{
	_Atomic uint64_t *words = pool->steal_words;

	if (!atomic_load_explicit(&words[STEAL_SEARCHING], memory_order_seq_cst))
		return;
	steal_give(pool, knitk__steal_pick_idle(pool->ep, words, STEAL_BY_HOST));
}

/* The claims of every worker on every stealing mailbox (the stats). */
uint64_t knitk__steal_claims(struct knitk_pool *pool)
{
	unsigned int s, w;
	uint64_t n = 0;

	for (s = 0; s < pool->nr_submitters; s++)
		for (w = 0; w < pool->nr_workers; w++)
			n += atomic_load_explicit(knitk__steal_line_word(pool->ep, s, w,
					offsetof(struct knitk_steal_line, claims)),
					memory_order_relaxed);
	return n;
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
 * many task ids.  Its reservations lapse (T13), and a wake it was giving
 * is given for it (T12).
 */
unsigned int knitk__steal_take_dead(struct knitk_pool *pool, unsigned int w,
				    uint64_t *tids)
{
	_Atomic uint64_t *words = pool->steal_words;
	uint64_t pending;
	unsigned int s, n = 0, i, b;
	bool lapsed = false;

	/*
	 * No pick takes w any more.  One that did may still reserve a lane
	 * for it: ignored while w is dead, dropped by its successor (T13).
	 */
	knitk__steal_gone(words, w);
	for (s = 0; s < pool->nr_submitters; s++) {
		struct pool_submitter *sl = &pool->submitters[s];

		pthread_mutex_lock(&sl->lock);
		knitk__steal_collect(pool, s);
		for (i = 0; i < sl->nr_held[w]; i++)
			tids[n++] = sl->held[w][i];
		sl->nr_held[w] = 0;
		knitk_mailbox_pending(pool->ep, s, &pending);
		lapsed |= (atomic_load_explicit(knitk__steal_line_word(pool->ep, s, w,
				offsetof(struct knitk_steal_line, resv)),
				memory_order_relaxed) & pending) != 0;
		knitk_producer_reset_claimant(sl->producers[0], w);
		pthread_mutex_unlock(&sl->lock);
	}
	/*
	 * w died picking or waking worker b (it is b's ringer): wake b in
	 * w's place, so that it scans again for what it was handed and for
	 * a publish that found it taken meanwhile (a death may cost one
	 * spurious wake).  Once w had taken b's ringing bit it may have
	 * taken b's idle bit too: b is idle again, as w would have left it.
	 */
	for (b = 0; b < pool->nr_workers; b++) {
		if (atomic_load_explicit(knitk__steal_ringer_word(pool->ep, b),
					 memory_order_seq_cst) != (uint64_t)w + 1)
			continue;
		if (atomic_fetch_or_explicit(&words[STEAL_RINGING], 1ULL << b,
					     memory_order_seq_cst) & (1ULL << b))
			atomic_fetch_or_explicit(&words[STEAL_IDLE], 1ULL << b,
						 memory_order_seq_cst);
		knitk__steal_ring(pool->ep, words, (int)b);
	}
	/* Work reserved for it is left: wake somebody for it. */
	if (lapsed)
		knitk__steal_ring(pool->ep, words, knitk__steal_pick(pool->ep, words, STEAL_BY_HOST));
	return n;
}

/*
 * A lane of slot @s's mailbox (its lock held) was not free: whether to
 * try again, after taking the claims reported (T10: lanes retired stay
 * busy until then).
 */
static bool steal_collect_for_lane(struct knitk_pool *pool, unsigned int s,
				   int ret)
{
	if (ret != -EAGAIN)
		return false;
	knitk__steal_collect(pool, s);
	return true;
}

/*
 * Send @h into slot @s's mailbox (its lock held), reserved for worker @to
 * unless it is -1; the lane, or an error.  The argument's arena bytes,
 * if any, are noted for @call (in_arg.c).  With @lane >= 0, publish that
 * lane, claimed and filled already (a loan), instead.
 */
static int steal_send(struct knitk_pool *pool, unsigned int s, int to,
		      struct knitk_call *call, const struct knitk_lane_header *h,
		      const void *in, size_t len, int lane)
{
	struct pool_submitter *sl = &pool->submitters[s];
	struct knitk_producer *p = sl->producers[0];
	int ret, i;

	if (lane >= 0) {
		ret = to < 0 ? knitk_lane_publish(p, (unsigned int)lane) :
			       knitk_lane_publish_to(p, (unsigned int)lane, (unsigned int)to);
		ret = ret ? ret : lane;
		sl->loan_lanes -= ret >= 0;
	} else {
		for (i = 0; i < 2; i++) {
			ret = knitk_producer_stage(p, h, len ? in : NULL, len);
			if (i || !steal_collect_for_lane(pool, s, ret))
				break;
		}
		if (ret < 0)
			return ret;
		lane = ret;
		knitk__in_arg_note(call, s, p, (unsigned int)lane, len);
		ret = to < 0 ? knitk_lane_publish(p, (unsigned int)lane) :
			       knitk_lane_publish_to(p, (unsigned int)lane, (unsigned int)to);
		if (ret)
			knitk_lane_release(p, (unsigned int)lane);
		ret = ret ? ret : lane;
	}
	if (ret >= 0)
		sl->lane_task[ret] = h->task_id;
	KNITK_TRACE(KT_SEND, to, ret, s);
	return ret;
}

/*
 * Claim a lane of slot @s's mailbox (its lock held) for a loan (C8): the
 * lane, or -EAGAIN when none is free or the slot's loans hold all they
 * may (pool_submitter.loan_lanes).
 */
int knitk__steal_lane_claim(struct knitk_pool *pool, unsigned int s)
{
	struct pool_submitter *sl = &pool->submitters[s];
	struct knitk_producer *p = sl->producers[0];
	int ret;

	if (sl->loan_lanes >= KNITK_LANES - 1)
		return -EAGAIN;
	ret = knitk_lane_claim(p);
	if (steal_collect_for_lane(pool, s, ret))
		ret = knitk_lane_claim(p);
	sl->loan_lanes += ret >= 0;
	return ret;
}

/* Give loan @lane of slot @s's mailbox (its lock held) back unpublished. */
void knitk__steal_lane_release(struct knitk_pool *pool, unsigned int s,
			       unsigned int lane)
{
	struct pool_submitter *sl = &pool->submitters[s];

	knitk_lane_release(sl->producers[0], lane);
	sl->loan_lanes--;
}

/*
 * Publish into slot @s (-1: any) and wake as T12 says: the pick, the
 * send of a lane reserved for the worker picked, inside a publish window,
 * then its ring.  @lane: as for steal_send.  0, or an error (nothing
 * published).
 */
static int steal_publish_once(struct knitk_pool *pool, int s,
			      struct knitk_call *call,
			      const struct knitk_lane_header *h, const void *in,
			      size_t len, int lane)
{
	_Atomic uint64_t *words = pool->steal_words;
	unsigned int slot;
	int to, ret;

	if (s < 0) {
		slot = knitk__submitter_acquire(pool);
	} else {
		slot = (unsigned int)s;
		pthread_mutex_lock(&pool->submitters[slot].lock);
	}
	knitk__steal_window(words, true);
	to = knitk__steal_pick(pool->ep, words, STEAL_BY_HOST);
	ret = steal_send(pool, slot, to, call, h, in, len, lane);
	pthread_mutex_unlock(&pool->submitters[slot].lock);
	knitk__steal_window(words, false);
	if (ret < 0) {
		/* A publish that found @to ours meanwhile woke nobody. */
		if (to >= 0 && steal_unpick_recheck(pool, to, true))
			steal_give(pool, knitk__steal_pick_idle(pool->ep, words, STEAL_BY_HOST));
		return ret;
	}
	knitk__steal_ring(pool->ep, words, to);
	return 0;
}

/*
 * Publish registered @call into a slot's stealing mailbox; 0, or a
 * negative errno when it was not published.  Backpressure as in
 * pool_publish: wait for a completion batch since the sample, but not
 * past the call's deadline (-ETIMEDOUT), or -EAGAIN in event mode.
 */
int knitk__steal_publish(struct knitk_pool *pool, struct knitk_call *call,
			 const struct knitk_lane_header *h, const void *in,
			 size_t len)
{
	uint64_t progress;
	int ret;

	for (;;) {
		/* Acquire pairs with the release in pool_progress_locked. */
		progress = atomic_load_explicit(&pool->progress, memory_order_acquire);
		ret = steal_publish_once(pool, -1, call, h, in, len, -1);
		if (ret >= 0 && POOL_PUBLISH_TWICE())
			steal_publish_once(pool, -1, call, h, in, len, -1);
		if (ret >= 0)
			return 0;
		if (ret != -ENOSPC && ret != -EAGAIN)
			return ret;
		POOL_HOOK(pool, POOL_HOOK_PUBLISH_FULL, 0);
		ret = knitk__pool_wait_room(pool, NULL, call, progress);
		if (ret)
			return ret;
	}
}

/*
 * Publish loan @lane, claimed and filled in slot @s's mailbox, for the
 * call of @task_id: woken for as any publish (T12); it cannot fail.
 */
void knitk__steal_publish_lane(struct knitk_pool *pool, unsigned int s,
			       unsigned int lane, uint64_t task_id)
{
	struct knitk_lane_header h = { .task_id = task_id };

	steal_publish_once(pool, (int)s, NULL, &h, NULL, 0, (int)lane);
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
		steal_publish_once(pool, 0, NULL, &h, NULL, 0, -1);
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
		/* An unsent loan is nobody's to claim yet (C8): it stays. */
		if (pool->entries[i].call && pool->entries[i].call->loan != LOAN_HELD &&
		    !knitk__call_take_back_locked(pool, pool->entries[i].call,
						  false, NULL)) {
			knitk__call_complete_locked(pool, pool->entries[i].call,
						    -EPIPE, NULL, 0);
			knitk__entry_free_locked(pool, i);
		}
}
