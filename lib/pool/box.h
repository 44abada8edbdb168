/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * A call's end on its word (box.c; docs/protocol.md R4, R6, R7), all
 * under pool->lock.
 */
#ifndef KNITK_POOL_BOX_H
#define KNITK_POOL_BOX_H

#include "pool_internal.h"

int knitk__call_abort_locked(struct knitk_call *call);
/*
 * R6: the host takes @call's result from the box: SLOT_TAKE on its word,
 * queued or running.  False when the pool has no boxes, or the call is
 * past that or not one for it.
 */
bool knitk__call_take_locked(struct knitk_pool *pool, struct knitk_call *call);
/*
 * @call's SLOT_TAKE comes off its word (R6): before any other completion
 * of it, when its waiter (@waiter: the caller) leaves, and before a thread
 * waits for it the drainer's way.  A result its worker left in the box
 * completes the call (its bytes to @direct's buffer, when given) and its
 * entry goes back: then true, and the caller neither completes the call
 * nor frees its entry.
 */
bool knitk__call_take_back_locked(struct knitk_pool *pool,
				  struct knitk_call *call, bool waiter,
				  const struct pool_direct *direct);
/*
 * R6: a thread is going to wait on @call's word, and is done with it:
 * counted in the call and the pool (a destroy waits for none to be left),
 * and a drainer made sure of for the deaths it cannot see there.
 */
void knitk__call_own_enter_locked(struct knitk_pool *pool,
				  struct knitk_call *call);
void knitk__call_own_leave_locked(struct knitk_pool *pool,
				  struct knitk_call *call);
/*
 * A look at @call: a result its worker left in the box completes it now
 * (R7); a call still running keeps its SLOT_TAKE.
 */
void knitk__call_look_locked(struct knitk_pool *pool, struct knitk_call *call);
/*
 * Before a thread waits for progress (room, shutdown): every call that no
 * thread waits for on its word gives its SLOT_TAKE back, so that its end
 * comes through a drainer, which that progress waits for (R7).  True
 * when one had its result in the box: that was progress.
 */
bool knitk__pool_untake_idle_locked(struct knitk_pool *pool);
void knitk__pool_cancel_all_locked(struct knitk_pool *pool);

#endif /* KNITK_POOL_BOX_H */
