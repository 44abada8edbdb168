// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The drainer role's rounds: consuming every return mailbox (results.c),
 * looking at deaths (death.c), spinning and parking on the host doorbell.
 * The role is held by one thread at a time (pool->draining, under
 * pool->lock, which also orders the hand-over of the role's unlocked
 * state: the consumers, death_seq, the host knot's doorbell nonce).  Only
 * the holder parks on the host doorbell: one park covers every return
 * mailbox (docs/protocol.md H1), and a worker's death rings it too
 * (death_seq).
 *
 * Leader/follower (whenever the backend can kick: futex, or a module with
 * KNITK_FEATURE_KICK): a thread waiting for a result takes the role when
 * it is free and parks itself, so a result wakes its waiter directly;
 * other waiters sleep on pool->cond, broadcast after each batch
 * and each time the role is left, so one of them takes it over and drains
 * (and re-checks) before it parks: nothing published meanwhile is missed.
 * The completer thread (completer.c) holds the role only while nobody
 * waits.  The park of the role's holder is ended for a new waiter or an
 * abort by knitk_doorbell_kick_self (knitk__pool_kick_drainer_locked).
 * Without a kick (a module older than KNITK_FEATURE_KICK) a parked host
 * wakes only for work or a death: there the completer keeps the role and
 * waiters sleep on pool->cond.
 */
#define _GNU_SOURCE
#include <errno.h>

#include "pool_internal.h"
#include "process.h"

/*
 * Drain every return mailbox and handle deaths; returns the work done.
 * @defer: a waiting drainer's round, which may leave one worker's results
 * held for its next hold of pool->lock.
 */
unsigned int knitk__pool_drain_all(struct knitk_pool *pool, bool defer,
				   const struct pool_direct *direct)
{
	unsigned int n = knitk__results_drain_all(pool, defer, direct);

	if (knitk__pool_check_deaths(pool))
		n++;
	return n;
}

/*
 * One round of a waiting thread that holds the drainer role: take what
 * is there, else spin boundedly, else park on the host doorbell until a
 * result, a death, a kick or @deadline_ns.  @k0: pool->kicks read under
 * pool->lock when the caller last looked at its calls.  @deadline_ns 0:
 * one look, no spin, no park.  Results taken may be held: the caller
 * completes them with knitk__pool_held_apply_locked as soon as it holds
 * pool->lock again, before it leaves the role.  *@ring: doorbells our
 * caller published to and has not rung yet; the park rings them in the
 * same syscall (S9), and clears *@ring.  @direct: our knitk_pool_call's
 * buffer, or NULL.
 */
int knitk__pool_drain_once(struct knitk_pool *pool, unsigned int k0,
			   uint64_t deadline_ns, uint64_t *ring,
			   const struct pool_direct *direct)
{
	struct lifeline_park lp;
	unsigned int park;
	uint64_t i, spin;
	bool early = false;
	uint32_t seq;
	int ret;

	if (!deadline_ns) {
		knitk__pool_drain_all(pool, true, direct);
		return 0;
	}
	/*
	 * With a ring due, the worker has not been woken yet: no spin of
	 * ours, the ring-then-wait spins in the kernel while it runs (S8).
	 * The spin ends for what would end the park: a kick (an abort, a
	 * waiter for the role) and the deadline (pool_spin_past).
	 */
	spin = *ring ? 0 : pool->opts.spin;
	for (i = 0; i <= spin; i++) {
		if (knitk__pool_drain_all(pool, true, direct))
			return 0;
		early = atomic_load_explicit(&pool->kicks, memory_order_relaxed) != k0 ||
			pool_spin_past(i, deadline_ns);
		if (early)
			break;
		pool_spin_relax(&pool->spin, (unsigned int)i);
	}
	/*
	 * Our calls may wait for a stopped searcher: see to them (T14), also
	 * when the spin ended early (a waiter polling with short deadlines).
	 */
	if (pool->steal)
		knitk__steal_rescue(pool);
	if (early)
		return 0;
	if (knitk_doorbell_prepare(pool->ep, &seq))
		return -EPIPE;
	/*
	 * After the seq_cst flag store: a death or a kick before prepare is
	 * seen here; one after it moves seq and ends the wait.  A worker's
	 * death seen by its lifeline is reported now, and seen as pending.
	 */
	park = knitk__lifeline_park_words(pool, &lp);
	if (knitk__pool_deaths_pending(pool) ||
	    atomic_load_explicit(&pool->kicks, memory_order_seq_cst) != k0) {
		knitk_doorbell_cancel(pool->ep);
		return 0;
	}
	/*
	 * The ring is sent whether or not the wait sleeps.  With lifelines
	 * a worker's death ends the park from the start of its exit (P7).
	 */
	if (park) {
		ret = knitk_doorbell_ring_wait_words(pool->ep, *ring, seq,
						     deadline_ns, lp.words, park);
		knitk__lifeline_park_seen(pool, &lp);
	} else {
		ret = knitk_doorbell_ring_wait(pool->ep, *ring, seq, deadline_ns);
	}
	*ring = 0;
	/*
	 * What woke us, at once: a death's calls complete in this round,
	 * not after another hold of pool->lock and another look.
	 */
	if (!ret)
		knitk__pool_drain_all(pool, true, direct);
	return ret;
}

/*
 * The reaper's round (events.c): drain; if that found nothing, arm the
 * host doorbell (its sleeping flag stays set when we return, so the next
 * ring wakes the event fd) and look once more.  Returns the work done;
 * 0 leaves the doorbell armed.
 */
unsigned int knitk__pool_drain_or_arm(struct knitk_pool *pool)
{
	unsigned int n;
	uint32_t seq;

	/* Awake while we drain: rings meanwhile are suppressed, not sent. */
	knitk_doorbell_cancel(pool->ep);
	n = knitk__pool_drain_all(pool, false, NULL);
	if (n || knitk_doorbell_prepare(pool->ep, &seq))
		return n;
	/*
	 * Pairs with the fence in knitk_doorbell_ring: a result published
	 * before our flag store is found by this look, one after it finds
	 * the flag and wakes the fd.  Deaths: knitk__pool_check_deaths reads death_seq
	 * after the flag store.
	 */
	atomic_thread_fence(memory_order_seq_cst);
	n = knitk__pool_drain_all(pool, false, NULL);
	if (n)
		knitk_doorbell_cancel(pool->ep);
	return n;
}
