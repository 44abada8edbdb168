// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The spin policy of the pool's bounded polls: the host's drainer
 * (drain.c) and every worker's idle loop (worker.c, thread and process
 * workers alike) poll before they park.
 *
 * A poll that shares a CPU with the thread it waits for only delays it,
 * so it must yield then; when every thread that matters has a CPU of its
 * own, a yield is a system call, and often a trip through the scheduler,
 * on the critical path of a call for nothing.  What matters are the
 * knot's awake roles: the doorbells whose sleeping flag (struct
 * knitk_doorbell, set from a park's prepare until its wake) is clear, one
 * per worker and one for the host, whose one polling thread is its drainer
 * (every other waiting thread sleeps on pool->cond).  While they fit the
 * CPUs this process may run on, a poll only pauses, with a yield every
 * POOL_SPIN_FREE_YIELD rounds against the threads the count cannot see
 * (other processes, roles that died with their flag clear); when they do
 * not, it yields every POOL_SPIN_CROWDED_YIELD rounds.  The count reads a
 * cache line per role, so it is taken every POOL_SPIN_RECOUNT rounds and
 * kept between polls.
 */
#define _GNU_SOURCE
#include <sched.h>

#include "spin.h"

unsigned int knitk__spin_cpus(void)
{
	cpu_set_t set;
	int n;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 1;
	n = CPU_COUNT(&set);
	return n < 1 ? 1 : (unsigned int)n;
}

void knitk__spin_init(struct pool_spin *s, struct knitk_endpoint *ep,
		      unsigned int cpus)
{
	struct knitk_geometry g;
	struct knitk_layout l;
	void *base;

	knitk_endpoint_layout(ep, &l, &g);
	knitk_endpoint_base(ep, &base);
	s->doorbells = (const char *)base + l.doorbell_off;
	s->stride = l.doorbell_stride;
	s->roles = ((1ULL << g.nr_workers) - 1) | 1ULL << KNITK_DOORBELL_HOST;
	s->cpus = cpus;
	atomic_init(&s->crowded, false);
}

uint64_t knitk__spin_awake(const struct pool_spin *s)
{
	uint64_t m, awake = 0;

	for (m = s->roles; m; m &= m - 1) {
		unsigned int d = (unsigned int)__builtin_ctzll(m);
		const struct knitk_doorbell *db = (const void *)(s->doorbells +
							       (size_t)d * s->stride);

		/* A hint: a stale flag costs a yield too many or too few. */
		if (!atomic_load_explicit((const _Atomic uint32_t *)&db->sleeping,
					  memory_order_relaxed))
			awake |= 1ULL << d;
	}
	return awake;
}

void knitk__spin_recount(struct pool_spin *s)
{
	unsigned int n = (unsigned int)__builtin_popcountll(knitk__spin_awake(s));

	atomic_store_explicit(&s->crowded, n > s->cpus,
			      memory_order_relaxed);
}
