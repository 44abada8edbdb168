// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Results in the argument's own bytes (knitk_reply_in_arg): the worker
 * acknowledges the request lane keeping its arena slot live
 * (knitk_lane_ack_keep) and answers with a value lane tagged
 * POOL_TAG_IN_ARG that carries the result's length.  The host reads the
 * result where the argument is, in the arena of the submitter's own
 * mailbox, whose allocator is the host's: the slot is the call's until
 * its release frees it (knitk_producer_free_kept), and a worker's death
 * or its successor never reuses it (docs/protocol.md C10).  What the
 * argument's bytes are is the host's record, taken when it staged them;
 * the worker only says how many of them are the result.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "in_arg.h"

void knitk__in_arg_note_arena(struct knitk_call *call, struct knitk_producer *p,
			      unsigned int lane)
{
	void *buf;
	size_t len;
	int slot = knitk_lane_arena(p, lane, &buf, &len);

	if (slot >= 0) {
		call->arg = buf;
		call->arg_len = len;
		call->arg_slot = (unsigned int)slot;
	}
	/*
	 * Release pairs with the acquire in knitk__in_arg_take_locked: the
	 * drainer that reads the answer may not have taken a lock this
	 * publish held, only the worker's lanes lie between us.
	 */
	atomic_store_explicit(&call->arg_prod, slot >= 0 ? p : NULL,
			      memory_order_release);
}

static struct knitk_producer *in_arg_prod(const struct knitk_call *call)
{
	return atomic_load_explicit(&call->arg_prod, memory_order_acquire);
}

/* The slot the worker kept, back to its allocator. */
static void in_arg_free(struct knitk_call *call)
{
	knitk_producer_keep(in_arg_prod(call), call->arg_slot);
	knitk_producer_free_kept(in_arg_prod(call), call->arg_slot);
}

/*
 * Result @r of @call's worker says its bytes are the first r->len of the
 * argument's.  A call that completed meanwhile (aborted, expired) frees
 * the slot at once; otherwise @r takes the argument's bytes as its data
 * and the handle holds the slot until its release.  A call whose
 * argument has no arena bytes, or fewer than that, fails -EBADMSG: the
 * length is checked before a byte is read.  pool->lock.
 */
void knitk__in_arg_take_locked(struct knitk_pool *pool, struct knitk_call *call,
			       struct pool_result *r)
{
	struct knitk_producer *p = in_arg_prod(call);

	r->in_arg = false;
	if (!p || r->len > call->arg_len) {
		if (p)
			in_arg_free(call);
		r->status = -EBADMSG;
		r->len = 0;
		return;
	}
	if (call_done_locked(call)) {
		in_arg_free(call);
		r->len = 0;
		return;
	}
	knitk_producer_keep(p, call->arg_slot);
	call->kept = true;
	call->kept_next = pool->kept_head;
	call->kept_prev = NULL;
	if (pool->kept_head)
		pool->kept_head->kept_prev = call;
	pool->kept_head = call;
	r->data = call->arg;
}

/* A result @r of @call dropped unread (stale, or taken back): its slot. */
void knitk__in_arg_drop(struct knitk_call *call, struct pool_result *r)
{
	if (r->in_arg && call && in_arg_prod(call))
		in_arg_free(call);
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
	in_arg_unlink_locked(pool, call);
	knitk_producer_free_kept(in_arg_prod(call), call->arg_slot);
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
