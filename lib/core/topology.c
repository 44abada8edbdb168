// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The topology of a knot: which mailbox a (submitter, worker) pair or a
 * worker's results use, whose doorbell consumes each mailbox, and what is
 * pending there.  This is the one place of the relations "doorbell d
 * consumes mailbox m" and "doorbell d produces into mailbox m": the lane
 * layer (a producer rings its consumers), the doorbells (a sleeper
 * re-checks what it consumes) and a consumer's wait (it polls while its
 * producer is awake) all ask here.
 *
 *   request mailbox (s, w)  s * W + w, consumed by worker w; with
 *                           KNITK_GEOM_STEAL one per submitter (s),
 *                           consumed by every worker (one steal line each);
 *                           produced by the host
 *   return mailbox w        nr_request + w, consumed by the host, produced
 *                           by worker w
 */
#include <errno.h>

#include "internal.h"

KNITK_EXPORT int knitk_endpoint_request_mailbox(const struct knitk_endpoint *ep,
						unsigned int submitter,
						unsigned int worker)
{
	if (!ep || submitter >= ep->geom.nr_submitters ||
	    worker >= ep->geom.nr_workers)
		return -EINVAL;
	if (ep->geom.flags & KNITK_GEOM_STEAL)
		return (int)submitter;
	return (int)(submitter * ep->geom.nr_workers + worker);
}

KNITK_EXPORT int knitk_endpoint_return_mailbox(const struct knitk_endpoint *ep,
					       unsigned int worker)
{
	if (!ep || worker >= ep->geom.nr_workers)
		return -EINVAL;
	return (int)(ep->layout.nr_request + worker);
}

uint64_t knitk__endpoint_mailbox_doorbells(const struct knitk_endpoint *k,
					   unsigned int m)
{
	if (m >= k->layout.nr_request)
		return 1ULL << KNITK_DOORBELL_HOST;
	if (knot_mailbox_steals(k, m))
		return k->geom.nr_workers == 64 ? ~0ULL :
		       (1ULL << k->geom.nr_workers) - 1;
	return 1ULL << (m % k->geom.nr_workers);
}

unsigned int knitk__endpoint_mailbox_producer(const struct knitk_endpoint *k,
					      unsigned int m)
{
	if (m >= k->layout.nr_request)
		return m - k->layout.nr_request;
	return KNITK_DOORBELL_HOST;
}

/*
 * The mailboxes doorbell @d's owner consumes, the inverse of
 * knitk__endpoint_mailbox_doorbells: *@first + i * *@stride for i below the
 * count returned.
 */
static unsigned int doorbell_mailboxes(const struct knitk_endpoint *k,
				       unsigned int d, unsigned int *first,
				       unsigned int *stride)
{
	unsigned int W = k->geom.nr_workers, S = k->geom.nr_submitters;

	*stride = 1;
	if (d == KNITK_DOORBELL_HOST) {
		*first = k->layout.nr_request;
		return W;
	}
	if (d >= W)
		return 0;
	if (k->geom.flags & KNITK_GEOM_STEAL) {
		*first = 0;
		return S;
	}
	*first = d;
	*stride = W;
	return S;
}

uint64_t knitk__endpoint_mailbox_ack(const struct knitk_endpoint *k, unsigned int m)
{
	uint64_t ack = 0;
	unsigned int w;

	/* Acquire pairs with the release store in knitk_lane_ack. */
	if (!knot_mailbox_steals(k, m))
		return atomic_load_explicit(A64(&knot_sector(k, m)->ack),
					    memory_order_acquire);
	for (w = 0; w < k->geom.nr_workers; w++)
		ack ^= atomic_load_explicit(A64(&knot_steal_line(k, m, w)->ack),
					    memory_order_acquire);
	return ack;
}

static uint64_t mailbox_pending(const struct knitk_endpoint *k, unsigned int m)
{
	/* Acquire pairs with the release store in lane_publish_mask. */
	uint64_t pub = atomic_load_explicit(A64(&knot_sector(k, m)->pub),
					    memory_order_acquire);

	return pub ^ knitk__endpoint_mailbox_ack(k, m);
}

KNITK_EXPORT int knitk_mailbox_pending(const struct knitk_endpoint *ep,
				       unsigned int mailbox, uint64_t *pending)
{
	if (!ep || !pending || mailbox >= ep->layout.nr_mailboxes)
		return -EINVAL;
	*pending = mailbox_pending(ep, mailbox);
	return knot_bits(*pending);
}

/*
 * T13: the lanes of stealing mailbox @m reserved for live workers other
 * than @d and not for d: not work for d.  A lane reserved for d is d's
 * work even while another reservation of it stands: a producer's hand-off
 * announces with its reservation and drops the lanes it then finds
 * reserved for another worker (T14), and until it does, the worker they
 * were handed to must neither sleep past them nor have its ring filtered
 * out (nobody rings it again).  Loaded after pub (mailbox_pending): its
 * acquire pairs with the release of pub after each reservation.
 */
static uint64_t steal_reserved_others(const struct knitk_endpoint *k,
				      unsigned int m, unsigned int d)
{
	/* Acquire pairs with the release of live in a join (P2). */
	uint64_t live = atomic_load_explicit(A64(&knot_control(k)->live),
					     memory_order_acquire), r = 0;
	unsigned int w;

	for (w = 0; w < k->geom.nr_workers; w++)
		if (w != d && (live & (1ULL << w)))
			r |= atomic_load_explicit(A64(&knot_steal_line(k, m, w)->resv),
						  memory_order_relaxed);
	if (d < k->geom.nr_workers)
		r &= ~atomic_load_explicit(A64(&knot_steal_line(k, m, d)->resv),
					   memory_order_relaxed);
	return r;
}

/*
 * A doorbell of private mailboxes (every doorbell of a knot without
 * KNITK_GEOM_STEAL, and the host's): n sectors @step bytes apart from
 * @sector, each tested as mailbox_pending does, without the stealing
 * tests.  Stops at the first with a pending lane: the answer is yes.
 */
static bool private_pending(const char *sector, uint64_t step, unsigned int n)
{
	for (; n; n--, sector += step) {
		const struct knitk_sector *sec = (const void *)sector;
		/*
		 * Acquire pairs with the release store in lane_publish_mask,
		 * the second with the release of ack in knitk_lane_ack.
		 */
		uint64_t pub = atomic_load_explicit(A64(&sec->pub),
						    memory_order_acquire);

		if (pub != atomic_load_explicit(A64(&sec->ack),
						memory_order_acquire))
			return true;
	}
	return false;
}

bool knitk__endpoint_doorbell_pending(const struct knitk_endpoint *k,
				      unsigned int d)
{
	unsigned int first = 0, stride = 1, n, i;

	n = doorbell_mailboxes(k, d, &first, &stride);
	if (!n)
		return false;
	if (!knot_mailbox_steals(k, first))
		return private_pending((const char *)knot_sector(k, first),
				       (uint64_t)stride * k->layout.mailbox_stride, n);
	for (i = 0; i < n; i++) {
		uint64_t p = mailbox_pending(k, first + i);

		if (p && (p & ~steal_reserved_others(k, first + i, d)))
			return true;
	}
	return false;
}
