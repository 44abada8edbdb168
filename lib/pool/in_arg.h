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
 * (C10): its value is the result's length.
 */
#define POOL_TAG_IN_ARG		0x1a5

/* Staged @lane of @p carries @call's argument: note its arena bytes. */
void knitk__in_arg_note(struct knitk_call *call, struct knitk_producer *p,
			unsigned int lane);
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
