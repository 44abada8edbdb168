/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The spin policy of the pool's bounded polls (spin.c): how long a poll
 * pauses before it yields, from how many of the knot's roles are awake.
 * Not installed.
 */
#ifndef KNITK_POOL_SPIN_H
#define KNITK_POOL_SPIN_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "knitk.h"

#define POOL_SPIN_RECOUNT	16	/* rounds between counts, a power of 2 */
/*
 * Yield every 4 rounds when crowded: with a batch keeping the host and as
 * many workers as CPUs busy, yielding every 16 rounds instead cost
 * knitk-bench's pool-batch a quarter of its rate and 20% more CPU per call
 * in interleaved runs on 2 CPUs.
 */
#define POOL_SPIN_CROWDED_YIELD	4
#define POOL_SPIN_FREE_YIELD	64
/* A waiter's spin reads the clock for its deadline every N rounds (2^k). */
#define POOL_SPIN_CLOCK		64
struct pool_spin {
	const struct knitk_endpoint *ep;	/* whose roles are counted */
	unsigned int cpus;		/* that this process may run on */
	/* More roles awake than cpus at the last count; relaxed, a hint. */
	_Atomic bool crowded;
};

/* The CPUs this thread may run on (knitk_endpoint_awake). */
unsigned int knitk__spin_cpus(const struct knitk_endpoint *ep);
void knitk__spin_init(struct pool_spin *s, const struct knitk_endpoint *ep,
		      unsigned int cpus);
/* The roles awake: bit d for doorbell d whose sleeping flag is clear. */
uint64_t knitk__spin_awake(const struct pool_spin *s);
void knitk__spin_recount(struct pool_spin *s);

/* One round of a bounded poll (see spin.c). */
static inline void pool_spin_relax(struct pool_spin *s, unsigned int round)
{
	unsigned int every;

#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
	if ((round & (POOL_SPIN_RECOUNT - 1)) == POOL_SPIN_RECOUNT - 1)
		knitk__spin_recount(s);
	every = atomic_load_explicit(&s->crowded, memory_order_relaxed) ?
		POOL_SPIN_CROWDED_YIELD : POOL_SPIN_FREE_YIELD;
	if ((round & (every - 1)) == every - 1)
		sched_yield();
}

#endif /* KNITK_POOL_SPIN_H */
