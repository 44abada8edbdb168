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
#include "spin.h"

unsigned int knitk__spin_cpus(const struct knitk_endpoint *ep)
{
	unsigned int cpus = 1;

	knitk_endpoint_awake(ep, NULL, &cpus);
	return cpus;
}

void knitk__spin_init(struct pool_spin *s, const struct knitk_endpoint *ep,
		      unsigned int cpus)
{
	s->ep = ep;
	s->cpus = cpus;
	atomic_init(&s->crowded, false);
}

uint64_t knitk__spin_awake(const struct pool_spin *s)
{
	uint64_t awake = 0;

	/* A hint: a stale flag costs a yield too many or too few. */
	knitk_endpoint_awake(s->ep, &awake, NULL);
	return awake;
}

void knitk__spin_recount(struct pool_spin *s)
{
	int n = knitk_endpoint_awake(s->ep, NULL, NULL);

	atomic_store_explicit(&s->crowded, n > (int)s->cpus,
			      memory_order_relaxed);
}
