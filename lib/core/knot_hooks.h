/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * Test hooks of the knot: calls inside the window between an event's
 * "begun" count and its doorbell's seq advance (see knitk_doorbell_prepare),
 * so that a regression test can run a whole prepare and wait in it.  Like
 * pool_hooks.h, compiled only into test builds (-DKNITK_TEST_HOOKS), never
 * into the installed library.  Not installed.
 */
#ifndef KNITK_KNOT_HOOKS_H
#define KNITK_KNOT_HOOKS_H

#include <stdatomic.h>

struct knitk_endpoint;

enum knot_hook {
	/* knitk_doorbell_kick_self: the kick is begun, seq not advanced; @arg: 0. */
	KNOT_HOOK_KICK,
	/*
	 * futex_mark_dead: death_seq advanced, no doorbell kicked yet;
	 * @arg: the dead role's doorbell.
	 */
	KNOT_HOOK_DEATH,
};

typedef void (*knot_hook_fn)(struct knitk_endpoint *k, enum knot_hook point,
			     unsigned int arg);

/* Set by a test (atomic: other threads may kick or wait meanwhile). */
extern _Atomic(knot_hook_fn) knitk__endpoint_hook;

#ifdef KNITK_TEST_HOOKS
#define KNOT_HOOK(k, point, arg) do {					\
	knot_hook_fn hook_ = atomic_load(&knitk__endpoint_hook);		\
									\
	if (hook_)							\
		hook_(k, point, arg);					\
} while (0)
#else
#define KNOT_HOOK(k, point, arg) do { } while (0)
#endif

#endif /* KNITK_KNOT_HOOKS_H */
