// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The worker loop, shared by thread and process workers, and the task's
 * side of a call (reply, abort flag, task data).
 *
 * Worker w consumes its request mailboxes (s, w) for every submitter s
 * and produces into its return mailbox.  Per request lane: decode, claim
 * the call on its word (slot.h: a lane of a call that is not ours to run
 * is retired unanswered), run the task (or skip it when its deadline
 * passed or it was aborted), then
 * acknowledge the request lane *before* the call ends, so that by the
 * time the host sees its end the request's arena bytes are free again
 * (the submitter's backpressure wait in submit.c relies on it).  A result
 * that fits the call's box goes there, and when a thread of the host
 * waits for it (SLOT_TAKE, R6) the call ends on its word alone: no return
 * lane, and a wake only for a waiter asleep.  Any other result travels in
 * a return lane, claimed once it is needed, carrying the task id it
 * answers; the host matches it.
 *
 * With nothing pending the worker polls for opts.spin rounds, then parks
 * on its doorbell with no timeout: the doorbell protocol (doorbell.c) makes
 * an infinite park safe.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool_internal.h"
#include "steal_wake.h"
#include "process.h"
#include "slot.h"
#include "reply.h"
#include "in_arg.h"
#include "../trace.h"

struct worker_loop {
	const struct worker_args *a;
	struct knitk_endpoint *ep;
	/* Stealing: the idle and searching masks (docs/protocol.md T12). */
	_Atomic uint64_t *words;
	unsigned int nr_submitters;
	struct knitk_consumer **req;
	struct knitk_producer *ret;
	_Atomic uint64_t *slots;	/* the calls' words (slot.h) */
	uint32_t nr_slots;
	unsigned char *boxes;		/* their boxes, box_size bytes each */
	unsigned int box_size;
	uint64_t max;
	/*
	 * Ring-then-wait (S9): the host's ring after our last result is
	 * left to the park that follows it, one syscall for both.
	 */
	bool ring_wait;
	bool ring_due;
};

/* Ring the host for the results published since the last ring. */
static void worker_ring(struct worker_loop *l)
{
	if (!l->ring_due)
		return;
	l->ring_due = false;
	knitk_producer_notify(l->ret);
}

/* The word of the call @h asks for (its abort_id - 1), or NULL. */
static _Atomic uint64_t *worker_slot(const struct worker_loop *l,
				     const struct knitk_lane_header *h)
{
	if (!h->abort_id || h->abort_id > l->nr_slots)
		return NULL;
	return &l->slots[h->abort_id - 1];
}

/* Run (or skip) the call of one decoded request; fills @reply. */
static int worker_exec(struct worker_loop *l, const struct knitk_msg *msg,
		       int decode_err, struct knitk_reply *reply,
		       const _Atomic uint64_t *slot)
{
	const struct knitk_lane_header *h = &msg->header;
	struct task_ctx ctx = { .slot = slot, .gen = (uint32_t)(h->task_id >> 32) };

	if (decode_err)
		return decode_err;
	if (h->function_id >= l->a->table->nr_tasks)
		return -ENOSYS;
	ctx.deadline_ns = h->deadline_ns;
	ctx.data = l->a->task_data;
	/* Skip calls that expired or were aborted while queued. */
	if (h->deadline_ns && pool_now_ns() >= h->deadline_ns)
		return -ETIMEDOUT;
	if (slot && slot_failed(slot, ctx.gen))
		return -ECANCELED;
	return l->a->table->tasks[h->function_id](msg->data, msg->len, reply, &ctx);
}

/*
 * R3: the call we ran (@h) ends on its word, late past its deadline.  Its
 * result is in the box (or it has none) and a host thread takes it from
 * there (SLOT_TAKE): that is all, with a wake when it sleeps; true.
 * Otherwise false: the answer goes in a return lane, the box's bytes
 * copied there.
 */
static bool worker_finish(struct worker_loop *l, struct knitk_reply *reply,
			  _Atomic uint64_t *slot,
			  const struct knitk_lane_header *h, int status)
{
	bool box = reply->box && reply->lane < 0;
	bool late = box && h->deadline_ns && pool_now_ns() >= h->deadline_ns;
	uint64_t old;
	void *buf;

	if (box) {
		reply->box->len = reply->in_box ? (uint32_t)reply->len : 0;
		reply->box->status = status;
		POOL_BOX_HOOK(l->a->worker, reply->box, slot);
	}
	old = slot_finish(slot, (uint32_t)(h->task_id >> 32), l->a->worker, box, late);
	/* Every sleeper, as knitk__call_take_back_locked does. */
	if (old & SLOT_PARKED)
		knitk_word_wake(l->ep, slot_low(slot), UINT_MAX);
	if (box && (old & SLOT_TAKE) && slot_phase(old) == SLOT_RUNNING)
		return true;
	if (reply->in_box && reply->len) {
		const void *bytes = reply->box->bytes;

		reply->box = NULL;
		if (!knitk__reply_alloc(reply, reply->len, &buf))
			memcpy(buf, bytes, reply->len);
	}
	return false;
}

/*
 * Handle request lane @lane of submitter @s's mailbox; 1 when the loop ends
 * (stop message, host gone).
 */
static int worker_handle(struct worker_loop *l, unsigned int s,
			 unsigned int lane)
{
	struct knitk_consumer *c = l->req[s];
	struct knitk_lane_header *rh;
	struct knitk_msg msg;
	struct knitk_reply reply = { .ep = l->ep, .producer = l->ret,
				     .lane = -1, .max = l->max };
	enum slot_claim how = SLOT_RUN;
	_Atomic uint64_t *slot;
	int err, status, stop;
	uint32_t gen;

	/* The last call's result is not held back while this one runs. */
	worker_ring(l);
	msg.size = sizeof(msg);	/* the decode fills the rest, but if refused */
	err = knitk_lane_decode(c, lane, &msg);
	if (err && err != -EBADMSG)
		memset(&msg.header, 0, sizeof(msg.header));
	stop = !err && msg.header.function_id == POOL_FN_STOP;
	slot = stop ? NULL : worker_slot(l, &msg.header);
	gen = (uint32_t)(msg.header.task_id >> 32);
	if (slot)
		how = slot_claim(slot, gen, l->a->worker);
	if (how == SLOT_SKIP) {
		/* R2: not ours to run or answer (taken, ended, or stale). */
		knitk_lane_ack(c, 1ULL << lane);
		return 0;
	}
	if (slot && l->box_size) {
		reply.box = (struct slot_box *)(l->boxes +
			(size_t)(slot - l->slots) * l->box_size);
		reply.box_cap = l->box_size - sizeof(*reply.box);
	}
	if (!err && msg.header.kind == KNITK_PAYLOAD_ARENA) {
		/* The request's arena bytes: a reply may be written there. */
		reply.arg = (void *)(uintptr_t)msg.data;
		reply.arg_len = msg.len;
		reply.arg_slot = msg.header.arena_slot;
		reply.arg_arena = true;
	}
	if (stop)
		status = 0;
	else if (how == SLOT_ANSWER)
		status = -ECANCELED;
	else
		status = worker_exec(l, &msg, err, &reply, slot);
	/*
	 * The request's bytes are read: retire it before the call ends, its
	 * arena bytes with it unless they hold the result (C10), which then
	 * goes in a lane: the host learns the slot is kept only from there.
	 */
	if (reply.in_arg && knitk__reply_claim_lane(&reply))
		return 1;	/* the host is gone: nobody to answer */
	knitk_lane_ack_keep(c, 1ULL << lane, reply.in_arg ? 1ULL << lane : 0);
	if (slot && how == SLOT_RUN && worker_finish(l, &reply, slot, &msg.header, status))
		return 0;
	if (knitk__reply_claim_lane(&reply))
		return 1;	/* the host is gone: nobody to answer */
	knitk_lane_header(l->ret, (unsigned int)reply.lane, &rh);
	if (reply.in_arg) {
		knitk_lane_set_value(l->ret, (unsigned int)reply.lane, reply.len);
		rh->tag = pool_in_arg_tag(s, reply.arg_slot);
	}
	rh->function_id = msg.header.function_id;
	rh->task_id = msg.header.task_id;
	rh->user = (uint32_t)status;
	if (status < 0)
		rh->flags |= KNITK_LANE_F_ERROR;
	POOL_LANE_HOOK(POOL_HOOK_RESULT, l->a->worker, l->ret,
		       (unsigned int)reply.lane, rh);
	knitk_lane_publish(l->ret, (unsigned int)reply.lane);
	if (l->ring_wait && !stop)
		l->ring_due = true;
	else
		knitk_producer_notify(l->ret);
	return stop;
}

/*
 * Serve the lanes of @scan's submitters (added to *@seen), or if none had
 * any of @rest's; true if there were any.  *@done as for worker_handle.
 */
static inline bool worker_round(struct worker_loop *l, uint64_t scan,
				uint64_t rest, uint64_t *seen, int *done)
{
	bool any = false;

again:
	for (; scan && !*done; scan &= scan - 1) {
		unsigned int s = (unsigned int)__builtin_ctzll(scan);
		uint64_t pending;
		int lane;

		/* Stealing: a scan claims a region of s's mailbox. */
		if (knitk_lane_scan(l->req[s], &pending) <= 0)
			continue;
		any = true;
		*seen |= 1ULL << s;
		if (l->words) {
			KNITK_TRACE(KT_CLAIMED, l->a->worker, pending, s);
			knitk__steal_claimed(l->ep, l->words, l->a->worker,
					     l->req, l->nr_submitters);
		}
		while (!*done && pending &&
		       (lane = knitk_lane_next(l->req[s], &pending)) >= 0) {
			/* A host gone (its calls lost) ends the loop. */
			if (knitk_endpoint_host_dead(l->ep) > 0)
				*done = 1;
			else
				*done = worker_handle(l, s, (unsigned int)lane);
		}
	}
	if (!any && rest && !*done) {
		scan = rest;
		rest = 0;
		goto again;
	}
	return any;
}

/* The consumer of submitter @s's requests: private lanes or a claimant. */
static int worker_consumer(const struct worker_args *a, unsigned int s,
			   struct knitk_consumer **c)
{
	int m = knitk_endpoint_request_mailbox(a->ep, s, a->worker);

	if (m < 0)
		return m;
	if (a->steal_g)
		return knitk_steal_consumer_create(a->ep, (unsigned int)m,
						   a->steal_g, c);
	return knitk_consumer_create(a->ep, (unsigned int)m, c);
}

/*
 * A thread worker's setup is over (@err 0) or failed: knitk_pool_create
 * waits for it, so a worker that cannot serve fails the create instead of
 * taking calls it will never run.
 */
static void worker_thread_ready(struct pool_worker *pw, int err)
{
	struct knitk_pool *pool = pw->pool;

	pthread_mutex_lock(&pool->lock);
	pw->setup = err ? err : 1;
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
}

int knitk__worker_run(const struct worker_args *a)
{
	struct knitk_layout layout;
	struct knitk_geometry geom;
	struct worker_loop l = { .a = a, .ep = a->ep };
	struct pool_spin spin;
	_Atomic uint64_t *words = a->steal_g ? knitk__steal_words(a->ep) : NULL;
	unsigned int s, spins = 0, round = 0;
	uint64_t all, hot, seen = 0, scan, rest;
	void *base;
	int ret, done = 0;

	knitk_endpoint_layout(a->ep, &layout, &geom);
	knitk_endpoint_base(a->ep, &base);
	knitk__spin_init(&spin, a->ep, knitk__spin_cpus(a->ep));
	l.words = words;
	l.nr_submitters = geom.nr_submitters;
	l.slots = (_Atomic uint64_t *)((char *)base + layout.abort_off);
	/* A word per entry, then a box per entry (slot.h); older hosts: words. */
	l.nr_slots = geom.nr_workers * geom.lanes;
	l.box_size = slot_box_size_of(geom.abort_bits, l.nr_slots);
	if (!l.box_size)
		l.nr_slots = geom.abort_bits / 64;
	l.boxes = (unsigned char *)(l.slots + l.nr_slots);
	l.max = layout.arena_size > geom.inline_bytes ? layout.arena_size :
							 geom.inline_bytes;
	/*
	 * Not for a stealing worker: after an answer it stays a searcher for
	 * its spin, which the producers count on to skip a wake (T12), and a
	 * deferred ring would park it at once.
	 */
	l.ring_wait = !words && knitk_doorbell_can_ring_wait(a->ep) == 1;
	l.req = calloc(geom.nr_submitters, sizeof(*l.req));
	if (!l.req) {
		if (a->thread)
			worker_thread_ready(a->thread, -ENOMEM);
		return -ENOMEM;
	}
	ret = knitk_producer_create(a->ep,
		(unsigned int)knitk_endpoint_return_mailbox(a->ep, a->worker), &l.ret);
	for (s = 0; !ret && s < geom.nr_submitters; s++)
		ret = worker_consumer(a, s, &l.req[s]);
	if (a->thread)
		worker_thread_ready(a->thread, ret);
	if (words)
		knitk__steal_search(words, a->worker);
	all = hot = l.nr_submitters == 64 ? ~0ULL : (1ULL << l.nr_submitters) - 1;
	while (!ret && !done) {
		/*
		 * Private lanes: most rounds look only at the submitters with
		 * work in the last window of POOL_SCAN_ALL rounds (a caller
		 * keeps one), every POOL_SCAN_ALL-th at all; the first after a
		 * park at those first and at the rest only if they had none.
		 * A park re-checks every mailbox.  Stealing scans all (lanes
		 * may be reserved for us in any, T13).
		 */
		scan = all;
		rest = 0;
		if (!words && round++ % POOL_SCAN_ALL) {
			scan = hot;
		} else if (!words) {
			hot = seen ? seen : hot;
			seen = 0;
			/* After a park (at the start hot is all). */
			if (round == 1) {
				scan = hot;
				rest = all & ~hot;
			}
		}
		if (worker_round(&l, scan, rest, &seen, &done) || done) {
			spins = 0;
			continue;
		}
		/*
		 * Nothing to do and the host gone: stop now.  A dead host
		 * may have left its publish window or a ring open (T12), and
		 * then we would never park, where -EPIPE would tell us.
		 */
		if (knitk_endpoint_host_dead(l.ep) > 0)
			break;
		if (words)
			knitk__steal_search(words, a->worker);
		/*
		 * opts.spin empty polls (this the first), then the park; with
		 * a ring due, the ring-then-wait spins in the kernel (S8).
		 */
		if (++spins < a->spin && !l.ring_due) {
			pool_spin_relax(&spin, spins - 1);
			continue;
		}
		spins = 0;
		/* Stealing: not while a ring of ours or a publish is open. */
		if (words && !knitk__steal_idle(words, a->worker)) {
			worker_ring(&l);
			sched_yield();
			continue;
		}
		/* Lost-wakeup free; -EPIPE: the host is gone, stop. */
		if (words)
			KNITK_TRACE(KT_PARK, a->worker, 0, 0);
		if (l.ring_due)
			ret = knitk_producer_notify_park(l.ret, KNITK_WAIT_FOREVER);
		else
			ret = knitk_doorbell_park(a->ep, KNITK_WAIT_FOREVER);
		l.ring_due = false;
		if (words)
			KNITK_TRACE(KT_PARK, a->worker, 1, ret);
		round = 0;
		if (words)
			knitk__steal_awake(words, a->worker);
		if (ret == -EPIPE) {
			ret = 0;
			break;
		}
		ret = 0;
	}
	worker_ring(&l);
	if (words)
		knitk__steal_gone(words, a->worker);
	for (s = 0; s < geom.nr_submitters; s++)
		knitk_consumer_destroy(l.req[s]);
	knitk_producer_destroy(l.ret);
	free(l.req);
	return ret;
}

void *knitk__worker_thread_main(void *arg)
{
	struct pool_worker *pw = arg;
	struct knitk_pool *pool = pw->pool;
	struct worker_args a = {
		.ep = pw->ep,
		.table = &pool->table,
		.task_data = pool->opts.task_data,
		.worker = pw->id,
		.spin = pool->opts.spin,
		.steal_g = pool->steal_g,
		.thread = pw,
	};

	knitk__worker_run(&a);
	return NULL;
}

/*
 * A process worker: POOL_ENV is "fd,worker,spin,hostfd,g,pipefd,lifefd",
 * set by knitk__spawn_worker() (a host of an older library gives the first
 * five or six).  The knot fd came by inheritance; attaching with
 * KNITK_ATTACH_TAKE_FD closes it, so our own endpoint is the only one this
 * process holds and our exit is seen as our death.  hostfd (futex backend,
 * else -1) is the host's pidfd, pipefd (futex backend, else -1) the read
 * end of the host pipe: the watch of them marks the host dead when it
 * exits or execs (see spawn.c).  lifefd (futex backend, else -1) is the
 * page of lifelines: this thread holds ours while it serves (lifeline.c).
 */
KNITK_EXPORT int knitk_worker_main(int argc, char **argv,
				   const struct knitk_task_table *table,
				   void *task_data)
{
	struct worker_args a = { .table = table, .task_data = task_data };
	const char *env = getenv(POOL_ENV);
	struct host_watch hw = { 0 };
	struct lifeline_hold lh;
	int fd, ret;
	char *end;
	long v[7] = { [5] = -1, [6] = -1 };
	int i;

	(void)argc;
	(void)argv;
	if (!table || !table->tasks || !table->nr_tasks || table->reserved)
		return -EINVAL;
	if (!env)
		return 0;
	for (i = 0; i < 7; i++) {
		v[i] = strtol(env, &end, 10);
		/* The spin is an unsigned int, like opts.spin: all of it. */
		if (end == env || v[i] < (i == 3 || i >= 5 ? -1 : 0) ||
		    v[i] > (i == 2 ? (long)UINT_MAX : INT_MAX))
			exit(127);
		/* Five fields, six or seven. */
		if (!*end && i >= 4)
			break;
		if (*end != ',' || i == 6)
			exit(127);
		env = end + 1;
	}
	fd = (int)v[0];
	a.worker = (unsigned int)v[1];
	a.spin = (unsigned int)v[2];
	a.steal_g = (unsigned int)v[4];
	/* Our own children must not become workers. */
	unsetenv(POOL_ENV);
	ret = knitk_endpoint_attach(fd, KNITK_ATTACH_TAKE_FD, &a.ep);
	if (ret)
		exit(126);
	/* Before the join: a host gone meanwhile is seen at the first park. */
	if (v[3] >= 0 && knitk__host_watch_start(&hw, a.ep, (int)v[3], (int)v[5])) {
		knitk_endpoint_destroy(a.ep);
		exit(124);
	}
	/* Held from before the join: the host arms it once we joined. */
	knitk__lifeline_hold(&lh, (int)v[6], a.worker);
	ret = knitk_endpoint_join(a.ep, KNITK_ROLE_WORKER, a.worker);
	if (ret < 0) {
		knitk__host_watch_stop(&hw);
		knitk_endpoint_destroy(a.ep);
		exit(125);
	}
	ret = knitk__worker_run(&a);
	knitk__host_watch_stop(&hw);
	knitk_endpoint_destroy(a.ep);
	/* The role is left: the notice this causes finds it so. */
	knitk__lifeline_drop(&lh);
	exit(ret ? 1 : 0);
}
