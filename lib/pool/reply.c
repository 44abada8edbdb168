// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The task's side of a call: its reply (into the call's box, a return
 * lane, or its own argument's bytes), its abort flag and its data.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "reply.h"

int knitk__reply_claim_lane(struct knitk_reply *out)
{
	if (out->lane >= 0)
		return 0;
	while ((out->lane = knitk_lane_claim(out->producer)) < 0) {
		if (knitk_endpoint_host_dead(out->ep) > 0)
			return -EPIPE;
		sched_yield();
	}
	return 0;
}

int knitk__reply_alloc_lane(struct knitk_reply *out, size_t len, void **buf)
{
	int ret;

	out->in_box = false;
	ret = knitk__reply_claim_lane(out);
	if (ret)
		return ret;
	/*
	 * -ENOSPC: the host has not yet taken earlier results out of our
	 * arena.  Its drainer is awake (we rang it when we published
	 * them) and frees them shortly; yield until it has, or until the
	 * host is gone (-EPIPE: nobody will).  Only results bigger than the
	 * inline bytes ever wait here.
	 */
	while ((ret = knitk_lane_reserve(out->producer, (unsigned int)out->lane,
					 len, buf)) == -ENOSPC) {
		if (knitk_endpoint_host_dead(out->ep) > 0)
			return -EPIPE;
		sched_yield();
	}
	return ret;
}

KNITK_EXPORT int knitk_reply_alloc(struct knitk_reply *out, size_t len,
				   void **buf)
{
	if (!out || !buf)
		return -EINVAL;
	return knitk__reply_alloc(out, len, buf);
}

KNITK_EXPORT int knitk_reply_set(struct knitk_reply *out, const void *data,
				 size_t len)
{
	void *buf;
	int ret;

	if (!out || (len && !data))
		return -EINVAL;
	ret = knitk__reply_alloc(out, len, &buf);
	if (ret)
		return ret;
	if (len)
		memcpy(buf, data, len);
	return 0;
}

KNITK_EXPORT int knitk_reply_in_arg(struct knitk_reply *out, size_t len,
				    void **buf)
{
	if (!out || !buf)
		return -EINVAL;
	if (!out->arg_arena)
		return -EOPNOTSUPP;
	if (len > out->arg_len)
		return -EMSGSIZE;
	/* Whatever was allocated before is dropped when the lane is sent. */
	out->in_box = false;
	out->in_arg = true;
	out->len = len;
	*buf = out->arg;
	return 0;
}

KNITK_EXPORT int knitk_task_aborted(void *ctx)
{
	const struct task_ctx *t = ctx;

	if (!t)
		return -EINVAL;
	/* Advisory: the host completes an aborted call on its own. */
	if (t->slot && slot_failed(t->slot, t->gen))
		return 1;
	if (t->deadline_ns && pool_now_ns() >= t->deadline_ns)
		return 1;
	return 0;
}

KNITK_EXPORT void *knitk_task_data(void *ctx)
{
	return ctx ? ((struct task_ctx *)ctx)->data : NULL;
}

