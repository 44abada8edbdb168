/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Test hooks of the knot: calls inside the window between an event's
 * "begun" count and its doorbell's seq advance (see knitk_doorbell_prepare),
 * so that a regression test can run a whole prepare and wait in it, and
 * counters that start near their wrap.  Like
 * pool_hooks.h, compiled only into test builds (-DKNITK_TEST_HOOKS), never
 * into the installed library.  Not installed.
 */
#ifndef KNITK_KNOT_HOOKS_H
#define KNITK_KNOT_HOOKS_H

#include <stdatomic.h>
#include <stdint.h>

struct knitk_endpoint;

enum knot_hook {
	/* knitk_doorbell_kick_self: the kick is begun, seq not advanced; @arg: 0. */
	KNOT_HOOK_KICK,
	/*
	 * futex_mark_dead: death_seq advanced, no doorbell kicked yet;
	 * @arg: the dead role's doorbell.
	 */
	KNOT_HOOK_DEATH,
	/*
	 * steal.c: the claimant announced its want word and fenced, before
	 * it looks at its peers; @arg: the worker.
	 */
	KNOT_HOOK_STEAL_WANT,
	/*
	 * steal.c: the claimed lanes are retired (ack stored), want not
	 * cleared yet; @arg: the worker.
	 */
	KNOT_HOOK_STEAL_CLAIM,
	/*
	 * steal.c: a producer's hand-off reserved its lanes and fenced,
	 * before it looks at the claimants (T14); @arg: the worker.
	 */
	KNOT_HOOK_HAND_OFF,
	/*
	 * steal.c: a producer's hand-off chose its region and lanes from the
	 * pending and reserved words, before it reserves them (T14); @arg:
	 * the worker.
	 */
	KNOT_HOOK_HAND_OFF_CHOSEN,
};

typedef void (*knot_hook_fn)(struct knitk_endpoint *k, enum knot_hook point,
			     unsigned int arg);

/* Set by a test (atomic: other threads may kick or wait meanwhile). */
extern _Atomic(knot_hook_fn) knitk__endpoint_hook;

/*
 * Where a futex knot made from now on starts its 32-bit counters instead
 * of 0: every doorbell's seq, death_seq, death_done and every role's
 * generation, so that a test runs them across their wrap (the module's
 * debugfs knitk/counter_base does the same for its knots).
 */
extern _Atomic uint32_t knitk__test_counter_base;

/*
 * Rounds polled by every knitk_consumer_wait of the process so far
 * (consumer_wait.c): a test tells a wait that polled from one that
 * parked at once.
 */
extern _Atomic uint64_t knitk__consumer_poll_rounds;

#ifdef KNITK_TEST_HOOKS
#define KNOT_HOOK(k, point, arg) do {					\
	knot_hook_fn hook_ = atomic_load(&knitk__endpoint_hook);		\
									\
	if (hook_)							\
		hook_(k, point, arg);					\
} while (0)
#define KNOT_COUNTER_BASE() atomic_load(&knitk__test_counter_base)
#else
#define KNOT_HOOK(k, point, arg) do { } while (0)
#define KNOT_COUNTER_BASE() 0U
#endif

#endif /* KNITK_KNOT_HOOKS_H */
