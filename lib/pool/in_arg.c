// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Results in the argument's own bytes (knitk_reply_in_arg): the worker
 * acknowledges the request lane keeping its arena slot live
 * (knitk_lane_ack_keep) and answers with a value lane tagged
 * POOL_TAG_IN_ARG, its mailbox and that slot, which carries the result's
 * length.  The host reads the result where the argument is, in the arena
 * of the submitter's own mailbox, whose allocator is the host's: the
 * slot is the call's until its release frees it (knitk_producer_free_kept),
 * and a worker's death or its successor never reuses it (docs/protocol.md
 * C10).  Where the argument's bytes are is the host's record, taken when
 * it staged them; the worker only says which of the call's stagings it ran (a copy of a
 * lane may run instead, R2) and how many of the bytes are the result.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "in_arg.h"

void knitk__in_arg_note_arena(struct knitk_call *call, unsigned int s,
			      struct knitk_producer *p, unsigned int lane)
{
	unsigned int n = atomic_load_explicit(&call->nr_args, memory_order_relaxed);
	struct pool_arg *a;
	int slot;

	if (n == POOL_ARG_LANES)
		return;
	a = &call->args[n];
	slot = knitk_lane_arena(p, lane, &a->buf, &a->len, &a->placement);
	if (slot < 0)
		return;
	a->prod = p;
	a->sub = s;
	a->slot = (unsigned int)slot;
	/*
	 * Release pairs with the acquire in in_arg_find: the drainer that
	 * reads the answer may not have taken a lock this publish held,
	 * only the worker's lanes lie between us.
	 */
	atomic_store_explicit(&call->nr_args, n + 1, memory_order_release);
}

/*
 * The staging of @call's argument that @r names (submitter, arena slot),
 * or NULL: not its.
 */
static struct pool_arg *in_arg_find(struct knitk_call *call,
				    const struct pool_result *r)
{
	unsigned int i, n = atomic_load_explicit(&call->nr_args, memory_order_acquire);

	for (i = 0; i < n; i++)
		if (call->args[i].sub == r->arg_sub && call->args[i].slot == r->arg_slot)
			return &call->args[i];
	return NULL;
}

/*
 * The slot the worker kept, held for the handle: 0, or -ESTALE when the
 * worker freed it after all (its bytes are not the call's any more).
 */
static int in_arg_keep(const struct pool_arg *a)
{
	return knitk_producer_keep(a->prod, a->slot, a->placement);
}

/* The slot the worker kept, back to its allocator (if it did keep it). */
static void in_arg_free(const struct pool_arg *a)
{
	if (!in_arg_keep(a))
		knitk_producer_free_kept(a->prod, a->slot);
}

/*
 * Result @r of @call's worker says its bytes are the first r->len of the
 * argument's lane in submitter r->arg_sub's mailbox, arena slot
 * r->arg_slot.  A call that completed meanwhile (aborted, expired) frees
 * the slot at once; otherwise @r
 * takes those bytes as its data and the handle holds the slot until its
 * release.  A slot this call's argument was not staged in, or one its
 * worker did not keep after all (knitk_producer_keep: freed, or placed
 * anew since), is not touched, and that, or fewer bytes than r->len,
 * fails the call -EBADMSG: the length is checked before a byte is read.
 * pool->lock.
 */
void knitk__in_arg_take_locked(struct knitk_pool *pool, struct knitk_call *call,
			       struct pool_result *r)
{
	struct pool_arg *a = in_arg_find(call, r);

	r->in_arg = false;
	if (!a || in_arg_keep(a)) {
		/* Not a staging of this call's, or not kept: not touched. */
		r->status = -EBADMSG;
		r->len = 0;
		return;
	}
	if (r->len > a->len || call_done_locked(call)) {
		knitk_producer_free_kept(a->prod, a->slot);
		if (r->len > a->len)
			r->status = -EBADMSG;
		r->len = 0;
		return;
	}
	call->kept = true;
	call->kept_arg = (unsigned int)(a - call->args);
	call->kept_next = pool->kept_head;
	call->kept_prev = NULL;
	if (pool->kept_head)
		pool->kept_head->kept_prev = call;
	pool->kept_head = call;
	r->data = a->buf;
}

/* A result @r of @call dropped unread (stale, or taken back): its slot. */
void knitk__in_arg_drop(struct knitk_call *call, struct pool_result *r)
{
	struct pool_arg *a = r->in_arg && call ? in_arg_find(call, r) : NULL;

	if (a)
		in_arg_free(a);
	r->in_arg = false;
}

static void in_arg_unlink_locked(struct knitk_pool *pool, struct knitk_call *call)
{
	if (call->kept_prev)
		call->kept_prev->kept_next = call->kept_next;
	else
		pool->kept_head = call->kept_next;
	if (call->kept_next)
		call->kept_next->kept_prev = call->kept_prev;
	call->kept = false;
}

/* The handle of @call goes: the argument's slot with it.  pool->lock. */
void knitk__in_arg_release_locked(struct knitk_pool *pool, struct knitk_call *call)
{
	const struct pool_arg *a = &call->args[call->kept_arg];

	in_arg_unlink_locked(pool, call);
	knitk_producer_free_kept(a->prod, a->slot);
	call->data = NULL;
}

/*
 * The pool's mailboxes are going while handles stay valid: each result
 * still in an argument's bytes moves into a block of its own (no bytes,
 * if there is no memory for one).  pool->lock.
 */
void knitk__in_arg_detach_all_locked(struct knitk_pool *pool)
{
	struct knitk_call *call;
	void *copy;

	while ((call = pool->kept_head)) {
		copy = call->len ? malloc(call->len) : NULL;
		if (copy)
			memcpy(copy, call->data, call->len);
		else
			call->len = 0;
		knitk__in_arg_release_locked(pool, call);
		call->data = copy;
	}
}
