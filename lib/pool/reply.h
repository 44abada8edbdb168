/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The task's side of a call (reply.c): where its result goes, and its
 * context; the worker loop (worker.c) sets them up and sends the result.
 */
#ifndef KNITK_POOL_REPLY_H
#define KNITK_POOL_REPLY_H

#include <errno.h>

#include "pool_internal.h"
#include "slot.h"

struct knitk_reply {
	struct knitk_endpoint *ep;
	struct knitk_producer *producer;
	int lane;			/* the return lane, once claimed; else -1 */
	uint64_t max;
	struct slot_box *box;		/* the call's box, or NULL */
	size_t box_cap;
	size_t len;			/* bytes in the box, or in the argument */
	bool in_box;			/* the result is there, not in the lane */
	/*
	 * The argument, writable when it is in the request's arena
	 * (@arg_arena); with @in_arg the result is its first @len bytes
	 * (knitk_reply_in_arg).
	 */
	void *arg;
	size_t arg_len;
	unsigned int arg_slot;		/* its arena slot, below 64 */
	bool arg_arena;
	bool in_arg;
};

struct task_ctx {
	const _Atomic uint64_t *slot;	/* the call's word (slot.h), or NULL */
	uint32_t gen;
	uint64_t deadline_ns;
	void *data;
};

/*
 * A free return lane, claimed once (out->lane): there always is one
 * (POOL_CAP), but be safe; -EPIPE when the host, which frees them, is gone.
 */
int knitk__reply_claim_lane(struct knitk_reply *out);
/* A return lane for the result and @len bytes in it (knitk__reply_alloc). */
int knitk__reply_alloc_lane(struct knitk_reply *out, size_t len, void **buf);

/* knitk_reply_alloc without its argument checks: the box, else a lane. */
static inline int knitk__reply_alloc(struct knitk_reply *out, size_t len,
				     void **buf)
{
	if (len > out->max)
		return -EMSGSIZE;
	out->in_arg = false;
	/* Into the box while it fits and no lane was taken for the result. */
	if (out->box && out->lane < 0 && len <= out->box_cap) {
		out->in_box = true;
		out->len = len;
		*buf = out->box->bytes;
		return 0;
	}
	return knitk__reply_alloc_lane(out, len, buf);
}

#endif
