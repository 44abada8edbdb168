/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The aborter of the storm tests: owner threads publish the call they
 * wait for in a slot (under its lock, cleared before they release it),
 * and this thread aborts the call of a slot picked at random, every 100
 * us at most, until *@stop.
 */
#ifndef KNITK_STORM_ABORTER_H
#define KNITK_STORM_ABORTER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "knitk_pool.h"
#include "fixtures.h"

struct storm_slot {
	pthread_mutex_t lock;
	struct knitk_call *call;	/* in flight, abortable */
};

struct storm_aborter {
	struct storm_slot *slots;
	unsigned int nr;
	_Atomic bool *stop;
};

static inline void *storm_aborter(void *arg)
{
	struct storm_aborter *a = arg;
	uint64_t seed = 99;

	while (!atomic_load(a->stop)) {
		struct storm_slot *sl = &a->slots[rnd(&seed) % a->nr];

		pthread_mutex_lock(&sl->lock);
		if (sl->call)
			knitk_call_abort(sl->call);
		pthread_mutex_unlock(&sl->lock);
		sleep_us(rnd(&seed) % 100);
	}
	return NULL;
}

#endif
