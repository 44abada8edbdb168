// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The wake policy of a stealing pool (docs/protocol.md T12, T13): pool
 * words in the (kernel-ignored) ack line of request mailbox 0, the idle,
 * searching and ringing masks (bit w per worker) and the publish window,
 * and per worker the ringer word that says who picked it.  A worker is
 * woken only for lanes reserved for it.  Shared by the host's publishes
 * (steal.c) and the workers' loops (worker.c): it knows the endpoint and
 * these words, nothing of the pool above them.
 */
#define _GNU_SOURCE
#include <sched.h>

#include "pool_internal.h"
#include "steal_wake.h"
#include "../trace.h"

/*
 * The pool words of the wake policy (T12), in the ack line of request
 * mailbox 0: idle, searching and ringing masks, and the publish window.
 */
_Atomic uint64_t *knitk__steal_words(struct knitk_endpoint *ep)
{
	struct knitk_layout l;
	void *base;

	knitk_endpoint_layout(ep, &l, NULL);
	knitk_endpoint_base(ep, &base);
	return (_Atomic uint64_t *)((char *)base + l.mailbox_off +
				    offsetof(struct knitk_sector, ack));
}

/* The word at @off of worker @w's steal line on request mailbox @m. */
_Atomic uint64_t *knitk__steal_line_word(struct knitk_endpoint *ep, unsigned int m,
					 unsigned int w, size_t off)
{
	struct knitk_geometry g;
	struct knitk_layout l;
	void *base;

	knitk_endpoint_layout(ep, &l, &g);
	knitk_endpoint_base(ep, &base);
	return (_Atomic uint64_t *)((char *)base + l.steal_off +
				    (uint64_t)(m * g.nr_workers + w) * l.steal_stride + off);
}

/*
 * Who is waking worker @w: the user word of w's steal line on mailbox 0,
 * 0 for nobody, the waking worker plus one, or STEAL_BY_HOST.
 */
_Atomic uint64_t *knitk__steal_ringer_word(struct knitk_endpoint *ep, unsigned int w)
{
	return knitk__steal_line_word(ep, 0, w, offsetof(struct knitk_steal_line, user));
}

/* Give up the ringing of worker @w: its bit, then who held it. */
static void steal_ring_release(struct knitk_endpoint *ep, _Atomic uint64_t *words,
			       unsigned int w)
{
	atomic_fetch_and_explicit(&words[STEAL_RINGING], ~(1ULL << w),
				  memory_order_seq_cst);
	atomic_store_explicit(knitk__steal_ringer_word(ep, w), 0, memory_order_seq_cst);
}

/*
 * Pick an idle worker to wake for @by (a worker plus one, or
 * STEAL_BY_HOST), or -1 (T12).  The pick owns the worker's ringing bit
 * (0 -> 1) and takes its idle bit (1 -> 0); only the owner of a ringing
 * bit rings that worker, and the worker starts no sleep while the bit is
 * set (knitk__steal_idle), so a ring can only land in a sleep begun before
 * the hand-off it carries.  The owner is named (the ringer word, by CAS)
 * before the bit is taken, so a worker that dies holding it, at whatever
 * step, is found by its death handler (knitk__steal_take_dead).
 */
int knitk__steal_pick_idle(struct knitk_endpoint *ep, _Atomic uint64_t *words,
			   uint64_t by)
{
	uint64_t idle, b, none;
	unsigned int w;

	idle = atomic_load_explicit(&words[STEAL_IDLE], memory_order_seq_cst) &
	       ~atomic_load_explicit(&words[STEAL_RINGING], memory_order_seq_cst);
	for (; idle; idle &= ~b) {
		b = idle & -idle;
		w = (unsigned int)__builtin_ctzll(b);
		none = 0;
		if (!atomic_compare_exchange_strong_explicit(knitk__steal_ringer_word(ep, w),
				&none, by, memory_order_seq_cst, memory_order_seq_cst))
			continue;
		atomic_fetch_or_explicit(&words[STEAL_RINGING], b, memory_order_seq_cst);
		if (atomic_fetch_and_explicit(&words[STEAL_IDLE], ~b,
					      memory_order_seq_cst) & b) {
			KNITK_TRACE(KT_PICK, w, idle, 0);
			return (int)w;
		}
		steal_ring_release(ep, words, w);
	}
	return -1;
}

/* A publish's pick for @by (T12): none if a worker searches. */
int knitk__steal_pick(struct knitk_endpoint *ep, _Atomic uint64_t *words,
		      uint64_t by)
{
	if (atomic_load_explicit(&words[STEAL_SEARCHING], memory_order_seq_cst))
		return -1;
	return knitk__steal_pick_idle(ep, words, by);
}

/* Nothing was handed to picked worker @w: it is idle again, not rung. */
void knitk__steal_unpick(struct knitk_endpoint *ep, _Atomic uint64_t *words, int w)
{
	if (w < 0)
		return;
	KNITK_TRACE(KT_UNPICK, w, 0, 0);
	atomic_fetch_or_explicit(&words[STEAL_IDLE], 1ULL << w, memory_order_seq_cst);
	steal_ring_release(ep, words, (unsigned int)w);
}

/*
 * Ring picked worker @w, which has work reserved for it (T13), then give
 * up its ringing bit.  seq_cst: the bit is clear only after the ring's
 * load of the doorbell word; pairs with the load in knitk__steal_idle.
 */
void knitk__steal_ring(struct knitk_endpoint *ep, _Atomic uint64_t *words, int w)
{
	int r;

	if (w < 0)
		return;
	r = knitk_doorbell_ring(ep, 1ULL << w);
	KNITK_TRACE(KT_RING, w, r, 0);
	(void)r;
	steal_ring_release(ep, words, (unsigned int)w);
}

/*
 * A submitter's publish window, from before its pick to after its
 * publish: a worker that goes idle meanwhile does not park until it
 * closed, so its re-check sees the publish (T12).
 */
void knitk__steal_window(_Atomic uint64_t *words, bool open)
{
	if (open)
		atomic_fetch_add_explicit(&words[STEAL_WINDOW], 1, memory_order_seq_cst);
	else
		atomic_fetch_sub_explicit(&words[STEAL_WINDOW], 1, memory_order_seq_cst);
}

/* Worker @w found nothing to claim: it searches (spins). */
void knitk__steal_search(_Atomic uint64_t *words, unsigned int w)
{
	uint64_t bit = 1ULL << w;

	if (!(atomic_load_explicit(&words[STEAL_SEARCHING], memory_order_relaxed) & bit))
		atomic_fetch_or_explicit(&words[STEAL_SEARCHING], bit, memory_order_seq_cst);
}

/* Worker @w woke, or does not park: not idle; searching. */
void knitk__steal_awake(_Atomic uint64_t *words, unsigned int w)
{
	uint64_t bit = 1ULL << w;

	KNITK_TRACE(KT_AWAKE, w, 0, 0);
	atomic_fetch_or_explicit(&words[STEAL_SEARCHING], bit, memory_order_seq_cst);
	atomic_fetch_and_explicit(&words[STEAL_IDLE], ~bit, memory_order_seq_cst);
}

/*
 * Worker @w is about to park: idle first, then no longer searching, then
 * the guards, all seq_cst, before its doorbell prepare and re-check (T12).
 * False (and searching again): a ring of @w or a publish window is open,
 * so it must not start a sleep yet.
 */
bool knitk__steal_idle(_Atomic uint64_t *words, unsigned int w)
{
	uint64_t bit = 1ULL << w;

	atomic_fetch_or_explicit(&words[STEAL_IDLE], bit, memory_order_seq_cst);
	atomic_fetch_and_explicit(&words[STEAL_SEARCHING], ~bit, memory_order_seq_cst);
	if (!(atomic_load_explicit(&words[STEAL_RINGING], memory_order_seq_cst) & bit) &&
	    !atomic_load_explicit(&words[STEAL_WINDOW], memory_order_seq_cst)) {
		KNITK_TRACE(KT_IDLE, w, 1, 0);
		return true;
	}
	KNITK_TRACE(KT_IDLE, w, 0, 0);
	knitk__steal_awake(words, w);
	return false;
}

/*
 * Worker @w claimed work (@c: one of its claimants).  If it was the last
 * searcher and unreserved work is left, it hands a region of it to one
 * idle worker and wakes that one, so a burst spreads over the pool (T12).
 */
void knitk__steal_claimed(struct knitk_endpoint *ep, _Atomic uint64_t *words,
			  unsigned int w, struct knitk_consumer **c,
			  unsigned int nr_mailboxes)
{
	uint64_t bit = 1ULL << w, pending;
	unsigned int m;
	int to, n = 0;

	if (!(atomic_load_explicit(&words[STEAL_SEARCHING], memory_order_relaxed) & bit))
		return;
	if (atomic_fetch_and_explicit(&words[STEAL_SEARCHING], ~bit,
				      memory_order_seq_cst) != bit)
		return;
	for (m = 0; m < nr_mailboxes; m++)
		if (knitk_mailbox_pending(ep, m, &pending) > 0)
			break;
	if (m == nr_mailboxes)
		return;
	to = knitk__steal_pick(ep, words, (uint64_t)w + 1);
	if (to < 0)
		return;
	POOL_HOOK(NULL, POOL_HOOK_STEAL_PICKED, w);
	for (m = 0; m < nr_mailboxes && n <= 0; m++)
		n = knitk_steal_hand_off(c[m], (unsigned int)to);
	KNITK_TRACE(KT_HAND_OFF, to, n, m - 1);
	/*
	 * Given back, @to may have made a publish meanwhile pick nobody:
	 * we scan again after this claim, and take that lane then.
	 */
	if (n > 0)
		knitk__steal_ring(ep, words, to);
	else
		knitk__steal_unpick(ep, words, to);
}

/* Worker @w leaves (stopped, or its host is gone): neither idle nor searching. */
void knitk__steal_gone(_Atomic uint64_t *words, unsigned int w)
{
	uint64_t bit = 1ULL << w;

	atomic_fetch_and_explicit(&words[STEAL_IDLE], ~bit, memory_order_seq_cst);
	atomic_fetch_and_explicit(&words[STEAL_SEARCHING], ~bit, memory_order_seq_cst);
}
