/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Waiting for a pool's workers to sleep, shared by the pool tests on the
 * host and in the guest (selftests/knitk/pool_steal_test.c).
 */
#ifndef KNITK_POOL_PARKED_H
#define KNITK_POOL_PARKED_H

#include <sched.h>
#include <stdint.h>

#include "knitk.h"

/* Yield until the first @n workers of @knot sleep on their doorbells. */
static inline void wait_workers_parked(struct knitk_endpoint *knot, unsigned int n)
{
	struct knitk_layout l;
	unsigned int w, parked;
	void *base;

	knitk_endpoint_layout(knot, &l, NULL);
	knitk_endpoint_base(knot, &base);
	do {
		sched_yield();
		parked = 0;
		for (w = 0; w < n; w++) {
			const struct knitk_doorbell *db = (const void *)((char *)base +
				l.doorbell_off + (uint64_t)w * l.doorbell_stride);

			parked += __atomic_load_n(&db->sleeping, __ATOMIC_ACQUIRE) != 0;
		}
	} while (parked < n);
}

#endif /* KNITK_POOL_PARKED_H */
