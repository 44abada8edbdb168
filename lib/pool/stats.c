// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The pool observed: its counters, one worker's state, its host endpoint. */
#define _GNU_SOURCE
#include <errno.h>

#include "pool_internal.h"
#include "../sized.h"

/* Event fd writes by the host's and the thread workers' endpoints. */
static uint64_t pool_event_writes(struct knitk_pool *pool)
{
	struct knitk_wake_stats ws = { .size = sizeof(ws) };
	uint64_t n = 0;
	unsigned int w;

	if (pool->ep && knitk_endpoint_wake_stats(pool->ep, &ws) == 0)
		n += ws.event_writes;
	for (w = 0; w < pool->nr_workers; w++)
		if (pool->workers[w].ep &&
		    knitk_endpoint_wake_stats(pool->workers[w].ep, &ws) == 0)
			n += ws.event_writes;
	return n;
}

KNITK_EXPORT int knitk_pool_stats(struct knitk_pool *pool,
				  struct knitk_pool_stats *stats)
{
	struct knitk_pool_stats st;

	if (!pool || !stats)
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	st = pool->stats;
	st.event_writes = pool_event_writes(pool);
	st.claims = pool->steal ? knitk__steal_claims(pool) : 0;
	pthread_mutex_unlock(&pool->lock);
	return knitk__sized_out(stats, &st, sizeof(st), KNITK_POOL_STATS_SIZE_VER0);
}

KNITK_EXPORT int knitk_pool_worker_info(struct knitk_pool *pool,
					unsigned int worker,
					struct knitk_worker_info *info)
{
	struct knitk_wake_stats ws = { .size = sizeof(ws) };
	struct knitk_worker_info wi = { 0 };
	struct pool_worker *pw;

	if (!pool || !info || worker >= pool->nr_workers)
		return -EINVAL;
	pw = &pool->workers[worker];
	pthread_mutex_lock(&pool->lock);
	wi.pid = pw->pid;
	wi.alive = (uint32_t)atomic_load(&pw->alive);
	wi.inflight = pw->inflight;
	wi.calls = pw->calls;
	pthread_mutex_unlock(&pool->lock);
	if (knitk_endpoint_doorbell_stats(pool->ep, worker, &wi.db, sizeof(wi.db)) == 0) {
		wi.db_valid = 1;
	} else if (pw->ep && knitk_endpoint_wake_stats(pw->ep, &ws) == 0) {
		wi.db.waits = ws.waits;
		wi.db.wakes = ws.wakes;
		wi.db.spurious = ws.spurious;
		wi.db.timeouts = ws.timeouts;
		wi.db.mismatches = ws.mismatches;
		wi.db.interrupts = ws.interrupts;
		wi.db.kicks = ws.kicks;
		wi.db_valid = 1;
	}
	return knitk__sized_out(info, &wi, sizeof(wi), KNITK_WORKER_INFO_SIZE_VER0);
}

KNITK_EXPORT int knitk_pool_endpoint(struct knitk_pool *pool,
				     struct knitk_endpoint **ep)
{
	if (!pool || !ep)
		return -EINVAL;
	*ep = pool->ep;
	return 0;
}
