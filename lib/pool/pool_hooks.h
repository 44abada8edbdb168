/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Test hooks of the pool: calls at points inside narrow windows, so that
 * a regression test can act deterministically in the window (complete a
 * call, submit, look at the state), and task ids that start near their
 * wrap.  Compiled only into test builds of the
 * library (-DKNITK_TEST_HOOKS: the sanitizer builds and libknitk-hooks.a),
 * never into the installed one.  Not installed.
 */
#ifndef KNITK_POOL_HOOKS_H
#define KNITK_POOL_HOOKS_H

#include <stdatomic.h>
#include <stdint.h>

struct knitk_pool;

enum pool_hook {
	/* pool_publish: a send found no room; no lock held; @arg: worker. */
	POOL_HOOK_PUBLISH_FULL,
	/* pool_register: about to wait for a worker; pool->lock held. */
	POOL_HOOK_SUBMIT_WAIT,
	/* handle_death: worker @arg marked dead; no lock held. */
	POOL_HOOK_DEATH,
	/*
	 * handle_death: worker @arg's calls completed, its request
	 * mailboxes not reset yet (the completer's aftercare does it);
	 * no lock held.
	 */
	POOL_HOOK_RESET,
	/*
	 * completer_drain: it found nothing and is about to read pool->kicks
	 * and park; no lock held.
	 */
	POOL_HOOK_COMPLETER_PARK,
	/*
	 * take_results: a waiting drainer holds worker @arg's results, taken
	 * from its return mailbox and not completed yet; no lock held.
	 */
	POOL_HOOK_HELD,
	/*
	 * knitk__steal_rescue: worker @arg is picked and nothing was handed
	 * to it; it is not given back yet; no lock held.
	 */
	POOL_HOOK_RESCUE_EMPTY,
	/*
	 * The respawn of dead worker @arg is about to start (after its calls
	 * completed and its waiters were released); no lock held.
	 */
	POOL_HOOK_RESPAWN,
	/*
	 * The completer is about to reset dead worker @arg's request
	 * mailboxes and reap it (its calls completed); no lock held.
	 */
	POOL_HOOK_AFTERCARE,
	/*
	 * check_deaths: every return mailbox drained in this round, the
	 * deaths about to be looked at; no lock held.
	 */
	POOL_HOOK_DEATHS_LOOK,
	/*
	 * The lifeline thread or the pidfd monitor is about to report the
	 * death of worker @arg (knitk__death_notice); no lock held.
	 */
	POOL_HOOK_NOTICE,
	/*
	 * knitk__steal_claimed, in a stealing worker (no pool: NULL): worker
	 * @arg picked an idle peer to wake (its ringing bit taken), before
	 * it hands it anything.
	 */
	POOL_HOOK_STEAL_PICKED,
	/*
	 * worker_handle, in a worker (no pool): worker @arg filled the
	 * header of its result lane and is about to publish it.  Only the
	 * lane hook (knitk__test_lane_hook) is called here.
	 */
	POOL_HOOK_RESULT,
};

typedef void (*pool_hook_fn)(struct knitk_pool *pool, enum pool_hook point,
			     unsigned int arg);

/* Set by a test (atomic: the pool's threads may be running). */
extern _Atomic(pool_hook_fn) knitk__test_hook;

struct knitk_producer;
struct knitk_lane_header;

/*
 * The hook of a point where a worker holds a lane it is about to publish
 * (POOL_HOOK_RESULT): worker @worker, its producer @producer, the lane
 * @lane and its header @h.  A test may rewrite the header (a hostile
 * worker) and may claim and publish lanes of its own through @producer.
 * Set by a test, in the process of the workers it means.
 */
typedef void (*pool_lane_hook_fn)(enum pool_hook point, unsigned int worker,
				  struct knitk_producer *producer,
				  unsigned int lane, struct knitk_lane_header *h);

extern _Atomic(pool_lane_hook_fn) knitk__test_lane_hook;

/*
 * The hook of the point where a worker wrote the box of the call it ran
 * (struct slot_box: length, status, bytes) and is about to end the call
 * on its word @word (R3): worker @worker, the box @box.  A test may
 * rewrite the box (a hostile worker), or see whether a host thread takes
 * it (SLOT_TAKE).  Set by a test, in the process of the workers it means.
 */
typedef void (*pool_box_hook_fn)(unsigned int worker, void *box,
				 const _Atomic uint64_t *word);

extern _Atomic(pool_box_hook_fn) knitk__test_box_hook;

/*
 * Where a pool made from now on starts its entries' generations (the high
 * half of every task id) and its workers' epochs instead of 0, so that a
 * test runs task ids across their wrap.
 */
extern _Atomic uint32_t knitk__test_gen_base;

/*
 * Fault injection: while set, every request a submit publishes goes out
 * twice, the copy in a lane of its own of the same mailbox, as a lane
 * delivered again would (docs/protocol.md R2: it must not run twice).
 * No copy when the mailbox has no room for it.
 */
extern _Atomic int knitk__test_publish_twice;

#ifdef KNITK_TEST_HOOKS
#define POOL_HOOK(pool, point, arg) do {				\
	pool_hook_fn hook_ = atomic_load(&knitk__test_hook);		\
									\
	if (hook_)							\
		hook_(pool, point, arg);				\
} while (0)
#define POOL_LANE_HOOK(point, worker, producer, lane, h) do {	\
	pool_lane_hook_fn lhook_ = atomic_load(&knitk__test_lane_hook);	\
									\
	if (lhook_)							\
		lhook_(point, worker, producer, lane, h);		\
} while (0)
#define POOL_BOX_HOOK(worker, box, word) do {			\
	pool_box_hook_fn bhook_ = atomic_load(&knitk__test_box_hook);	\
									\
	if (bhook_)							\
		bhook_(worker, box, word);				\
} while (0)
#define POOL_GEN_BASE() atomic_load(&knitk__test_gen_base)
#define POOL_PUBLISH_TWICE() atomic_load(&knitk__test_publish_twice)
#else
#define POOL_HOOK(pool, point, arg) do { } while (0)
#define POOL_LANE_HOOK(point, worker, producer, lane, h) do { } while (0)
#define POOL_BOX_HOOK(worker, box, word) do { } while (0)
#define POOL_GEN_BASE() 0U
#define POOL_PUBLISH_TWICE() 0
#endif

#endif /* KNITK_POOL_HOOKS_H */
