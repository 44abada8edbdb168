// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Results: taking a worker's answers from its return mailbox and
 * completing their calls.  A result is matched to its call by task id
 * (entry, generation); one for a call that is gone is dropped (stale).
 * The header is the worker's to write: knitk_lane_decode checks its kind,
 * lengths, arena slot and offset on a private copy before a byte is read,
 * and a result that fails (or a stop reply nobody asked for) completes
 * the call it names -EBADMSG, with no bytes (docs/protocol.md C9).
 *
 * A thread waiting for its calls that holds the drainer role takes results
 * without pool->lock and completes them at its next hold of it, the one
 * in which it looks at its calls anyway (struct pool_held): one hold per
 * round.  A death is handled only after those held results completed
 * (knitk__pool_held_flush).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"
#include "box.h"
#include "in_arg.h"

/* Complete the decoded results of worker @w (pool->lock held). */
static void results_apply_locked(struct knitk_pool *pool, unsigned int w,
				 struct pool_result *res, unsigned int n)
{
	struct pool_worker *pw = &pool->workers[w];
	uint64_t now = 0;
	unsigned int i;

	for (i = 0; i < n; i++) {
		struct pool_result *r = &res[i];
		uint32_t idx = (uint32_t)r->task_id, gen = (uint32_t)(r->task_id >> 32);
		struct pool_entry *e;

		if (r->stop && !pool->stopping) {
			/*
			 * A stop reply nobody asked for: the stop message
			 * goes out only at shutdown, once no call is in
			 * flight.  A worker that answers a call with the stop
			 * function id has not stopped; the call its task id
			 * names fails as any malformed result does.
			 */
			r->stop = false;
			r->status = -EBADMSG;
			free(r->data);
			r->data = NULL;
			r->len = 0;
		}
		if (r->stop) {
			if (pw->state == WORKER_RUNNING)
				pw->state = WORKER_STOPPED;
			atomic_store_explicit(&pw->alive, 0, memory_order_seq_cst);
			continue;
		}
		/*
		 * Stealing: any worker may answer any entry (T10).  The
		 * index is the worker's to write: bounded before it is used.
		 */
		e = idx < pool->nr_workers * KNITK_LANES &&
		    (pool->steal || idx / KNITK_LANES == w) ?
		    &pool->entries[idx] : NULL;
		/*
		 * A waiter's flags come off first; a result also in the box
		 * (which a worker that sent this one never left) went back
		 * with its entry.
		 */
		if (e && e->call && e->gen == gen &&
		    knitk__call_take_back_locked(pool, e->call, false, NULL)) {
			knitk__in_arg_drop(e->call, r);
			free(r->data);
			continue;
		}
		if (!e || !e->call || e->gen != gen) {
			/* Not ours, or its entry is gone: drop it. */
			pool->stats.stale++;
			free(r->data);
			continue;
		}
		pw->calls++;
		if (!call_done_locked(e->call) && e->call->deadline_ns) {
			if (!now)
				now = pool_now_ns();
			/* Past its deadline the call has expired: drop the result. */
			if (now >= e->call->deadline_ns)
				knitk__call_complete_locked(pool, e->call, -ETIMEDOUT, NULL, 0);
		}
		if (r->in_arg)
			knitk__in_arg_take_locked(pool, e->call, r);
		if (!r->direct && !r->data && r->len && !call_done_locked(e->call)) {
			/* Small: into the handle, which nobody reads yet. */
			memcpy(e->call->small, r->small, r->len);
			r->data = e->call->small;
		}
		/* Set before the completion publishes the handle (C5). */
		if (!call_done_locked(e->call))
			e->call->ran = (int)w;
		if (r->direct)
			knitk__call_complete_direct_locked(pool, e->call, r->status,
							   r->len);
		else
			knitk__call_complete_locked(pool, e->call, r->status,
						    r->data, r->len);
		knitk__entry_answered_locked(pool, idx);
	}
	pool_progress_locked(pool);
}

static void results_apply(struct knitk_pool *pool, unsigned int w,
			  struct pool_result *res, unsigned int n)
{
	pthread_mutex_lock(&pool->lock);
	results_apply_locked(pool, w, res, n);
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
}

int knitk__pool_held_init(struct knitk_pool *pool)
{
	pool->held = calloc(1, sizeof(*pool->held));
	return pool->held ? 0 : -ENOMEM;
}

void knitk__pool_held_apply_locked(struct knitk_pool *pool)
{
	struct pool_held *h = pool->held;

	if (!h->n)
		return;
	results_apply_locked(pool, h->w, h->res, h->n);
	h->n = 0;
}

/* Before a death is handled: w's results taken before it died come first. */
void knitk__pool_held_flush(struct knitk_pool *pool)
{
	if (!pool->held->n)
		return;
	pthread_mutex_lock(&pool->lock);
	knitk__pool_held_apply_locked(pool);
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
}

/*
 * Take the @pending lanes of worker @w's return mailbox: into the held
 * results with @defer (when they are free), else completed at once.
 * Out of line: an empty poll of the mailboxes never sets up its frame.
 */
static __attribute__((noinline)) unsigned int
take_results(struct knitk_pool *pool, unsigned int w, uint64_t pending,
	     bool defer, const struct pool_direct *direct)
{
	struct pool_worker *pw = &pool->workers[w];
	struct pool_result stack_res[KNITK_LANES], *res = stack_res;
	uint64_t lanes = 0;
	unsigned int n = 0;
	int lane;

	defer = defer && !pool->held->n;
	if (defer)
		res = pool->held->res;
	while ((lane = knitk_lane_next(pw->ret, &pending)) >= 0) {
		struct pool_result *r = &res[n++];
		struct knitk_msg msg = { .size = sizeof(msg) };
		int err = knitk_lane_decode(pw->ret, (unsigned int)lane, &msg);

		lanes |= 1ULL << lane;
		r->task_id = msg.header.task_id;
		r->stop = false;
		r->direct = false;
		r->in_arg = false;
		r->data = NULL;
		r->len = 0;
		if (err) {
			r->status = err;
			continue;
		}
		r->stop = msg.header.function_id == POOL_FN_STOP;
		r->status = (int)(int32_t)msg.header.user;
		if (msg.header.kind == KNITK_PAYLOAD_VALUE && !r->stop &&
		    (msg.header.tag & POOL_TAG_IN_ARG_MASK) == POOL_TAG_IN_ARG) {
			/* In the call's argument: checked when matched (in_arg.c). */
			r->in_arg = true;
			r->arg_sub = (uint8_t)(msg.header.tag >> 6 & 63);
			r->arg_slot = (uint8_t)(msg.header.tag & 63);
			r->len = (size_t)msg.header.value;
		} else if (msg.len > sizeof(r->small) && direct && !r->stop &&
		    r->task_id == direct->task_id) {
			/*
			 * Our own call's, too big for the handle: into our
			 * buffer, the only copy, and no allocation.
			 */
			if (direct->cap)
				memcpy(direct->out, msg.data,
				       msg.len < direct->cap ? msg.len : direct->cap);
			r->direct = true;
			r->len = msg.len;
		} else if (msg.len && msg.len <= sizeof(r->small)) {
			/* The copy of the result, before the lane is freed. */
			memcpy(r->small, msg.data, msg.len);
			r->len = msg.len;
		} else if (msg.len) {
			r->data = malloc(msg.len);
			if (r->data) {
				memcpy(r->data, msg.data, msg.len);
				r->len = msg.len;
			} else {
				r->status = -ENOMEM;
			}
		}
	}
	/*
	 * Retire the lanes (and their arena bytes) before the entries are
	 * freed in results_apply_locked: a worker never holds more result lanes
	 * than it has entries in flight (POOL_CAP).
	 */
	knitk_lane_ack(pw->ret, lanes);
	if (defer) {
		pool->held->w = w;
		pool->held->n = n;
		POOL_HOOK(pool, POOL_HOOK_HELD, w);
	} else {
		results_apply(pool, w, res, n);
	}
	return n;
}

static inline unsigned int drain_worker(struct knitk_pool *pool, unsigned int w,
					bool defer, const struct pool_direct *direct)
{
	struct pool_worker *pw = &pool->workers[w];
	uint64_t pending;

	if (!pw->ret || knitk_lane_scan(pw->ret, &pending) <= 0)
		return 0;
	return take_results(pool, w, pending, defer, direct);
}

unsigned int knitk__results_drain(struct knitk_pool *pool, unsigned int w,
				  bool defer)
{
	return drain_worker(pool, w, defer, NULL);
}

/* Every worker's, in one call: a poll round of the drainer. */
unsigned int knitk__results_drain_all(struct knitk_pool *pool, bool defer,
				      const struct pool_direct *direct)
{
	unsigned int w, n = 0;

	for (w = 0; w < pool->nr_workers; w++)
		n += drain_worker(pool, w, defer, direct);
	return n;
}
