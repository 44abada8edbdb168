/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Results in the argument's own bytes (knitk_reply_in_arg): the wire tag,
 * and the host's side (in_arg.c).
 */
#ifndef KNITK_POOL_IN_ARG_H
#define KNITK_POOL_IN_ARG_H

#include "pool_internal.h"

/*
 * The tag of a value lane that answers with the argument's own bytes
 * (C10), whose value is the result's length: POOL_TAG_IN_ARG, the
 * submitter whose mailbox held the request lane it ran, and that lane's
 * arena slot.
 */
#define POOL_TAG_IN_ARG		0xa000
#define POOL_TAG_IN_ARG_MASK	0xf000

static inline uint16_t pool_in_arg_tag(unsigned int s, unsigned int slot)
{
	return (uint16_t)(POOL_TAG_IN_ARG | (s & 63) << 6 | (slot & 63));
}

void knitk__in_arg_note_arena(struct knitk_call *call, unsigned int s,
			      struct knitk_producer *p, unsigned int lane);

/*
 * Staged @lane of @p, submitter @s's, carries @call's argument of @len
 * bytes: note where its arena bytes are.  One that fits the lane's inline
 * bytes has none, as a new handle says already (no args noted).
 */
static inline void knitk__in_arg_note(struct knitk_call *call, unsigned int s,
				      struct knitk_producer *p,
				      unsigned int lane, size_t len)
{
	if (call && len > call->pool->opts.inline_bytes)
		knitk__in_arg_note_arena(call, s, p, lane);
}
/* @call's result @r is in its argument (pool->lock). */
void knitk__in_arg_take_locked(struct knitk_pool *pool, struct knitk_call *call,
			       struct pool_result *r);
/* @r, if in @call's argument, is dropped unread. */
void knitk__in_arg_drop(struct knitk_call *call, struct pool_result *r);
/* @call's handle goes, with its kept slot (pool->lock). */
void knitk__in_arg_release_locked(struct knitk_pool *pool, struct knitk_call *call);
/* The mailboxes go: every kept result moves into a block (pool->lock). */
void knitk__in_arg_detach_all_locked(struct knitk_pool *pool);

#endif
