// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The completer thread: the drainer while no thread waits (calls submitted
 * and not yet waited for, late results, deaths and respawns of an idle
 * pool, stop replies at shutdown), and the only one that runs a death's
 * aftercare (death.c).  It exits once every worker stopped or died for
 * good.
 */
#define _GNU_SOURCE
#include <time.h>

#include "pool_internal.h"
#include "process.h"

/* Nothing left to serve: every worker stopped or dead for good. */
static bool completer_should_exit_locked(struct knitk_pool *pool)
{
	unsigned int w;

	for (w = 0; w < pool->nr_workers; w++)
		if (pool->workers[w].state == WORKER_RUNNING)
			return false;
	return !pool->respawning &&
	       !atomic_load_explicit(&pool->aftercare, memory_order_relaxed);
}

/*
 * Some worker is alive (cleared by its stop reply or its death, set again
 * by a respawn): then completer_should_exit is false, read without a lock.
 */
static bool workers_alive(struct knitk_pool *pool)
{
	unsigned int w;

	for (w = 0; w < pool->nr_workers; w++)
		if (atomic_load_explicit(&pool->workers[w].alive, memory_order_relaxed))
			return true;
	return false;
}

static bool completer_should_exit(struct knitk_pool *pool)
{
	bool exit;

	pthread_mutex_lock(&pool->lock);
	exit = completer_should_exit_locked(pool);
	pthread_mutex_unlock(&pool->lock);
	return exit;
}

/* Event mode before shutdown: reap drains, not the completer. */
static bool completer_yields_locked(struct knitk_pool *pool)
{
	return atomic_load_explicit(&pool->evmode, memory_order_relaxed) &&
	       !pool->closed;
}

/*
 * The completer's rounds as drainer.  With @leader it leaves the role as
 * soon as a thread waits (that thread drains from then on); it returns
 * when every worker is gone.
 */
static void completer_drain(struct knitk_pool *pool, bool ev)
{
	unsigned int spins = 0;

	for (;;) {
		struct lifeline_park lp;
		unsigned int k0, park;
		uint32_t seq;

		/* seq_cst pairs with the increment in calls_wait. */
		if (pool->leader &&
		    atomic_load_explicit(&pool->waiters, memory_order_seq_cst))
			return;
		/* A death we handled: its respawn, outside the role. */
		if (atomic_load_explicit(&pool->aftercare, memory_order_relaxed))
			return;
		/*
		 * Entered before event mode: leave for reap (event_fd kicks
		 * us).  Entered in it, the pool is closed: keep the role.
		 */
		if (!ev && atomic_load_explicit(&pool->evmode, memory_order_relaxed))
			return;
		if (knitk__pool_drain_all(pool, false, NULL)) {
			/*
			 * It may have been the last stop reply or death: leave
			 * now, not after a spin that may last opts.spin rounds.
			 * While a worker is alive it was not: no pool->lock.
			 */
			if (!workers_alive(pool) && completer_should_exit(pool))
				return;
			spins = 0;
			continue;
		}
		if (spins < pool->opts.spin) {
			pool_spin_relax(&pool->spin, spins++);
			continue;
		}
		spins = 0;
		if (completer_should_exit(pool))
			return;
		POOL_HOOK(pool, POOL_HOOK_COMPLETER_PARK, 0);
		k0 = atomic_load_explicit(&pool->kicks, memory_order_seq_cst);
		if (knitk_doorbell_prepare(pool->ep, &seq))
			return;
		/*
		 * A death after knitk__pool_check_deaths and before prepare would be
		 * hidden from the wait's own death_seq check, and a waiter
		 * that came before prepare kicked a seq we did not read:
		 * look again now that the sleeping flag is set.  So for
		 * event mode: knitk_pool_event_fd stores evmode before its
		 * kick, whose seq_cst doorbell CAS this prepare reads from
		 * when it saw the kicked seq.  A worker's death its lifeline
		 * shows is reported now, and seen as pending.
		 */
		park = knitk__lifeline_park_words(pool, &lp);
		if (knitk__pool_deaths_pending(pool) ||
		    (!ev && atomic_load_explicit(&pool->evmode, memory_order_relaxed)) ||
		    (pool->leader &&
		     (atomic_load_explicit(&pool->waiters, memory_order_seq_cst) ||
		      atomic_load_explicit(&pool->kicks, memory_order_seq_cst) != k0))) {
			knitk_doorbell_cancel(pool->ep);
			continue;
		}
		/*
		 * With lifelines a worker's death ends the park from the
		 * start of its exit (P7): a thread waiting on its own call's
		 * word (R6) hears of it through us.
		 */
		if (park) {
			knitk_doorbell_ring_wait_words(pool->ep, 0, seq,
						       KNITK_WAIT_FOREVER,
						       lp.words, park);
			knitk__lifeline_park_seen(pool, &lp);
		} else {
			knitk_doorbell_wait(pool->ep, seq, KNITK_WAIT_FOREVER);
		}
	}
}

/*
 * The completer keeps what no waiting thread provides: it drains while
 * nobody waits (calls submitted and not yet waited for, late results,
 * deaths and respawns of an idle pool, stop replies at shutdown).  It
 * takes the role at once for a passive waiter, a closed pool or calls the
 * last waiter left in flight, else only after POOL_LINGER_NS without any
 * wait: a program calling in a loop keeps the role among its own threads
 * and never wakes the completer for it, and an idle pool still gets a
 * parked drainer (deaths, respawns) within that time.
 */
static void *completer_main(void *arg)
{
	struct knitk_pool *pool = arg;
	uint64_t seen;
	bool ev;

	pthread_mutex_lock(&pool->lock);
	seen = pool->activity;
	for (;;) {
		if (completer_should_exit_locked(pool))
			break;
		if (atomic_load_explicit(&pool->aftercare, memory_order_relaxed)) {
			knitk__pool_aftercare_locked(pool);
			continue;
		}
		if (atomic_load_explicit(&pool->recheck, memory_order_relaxed) &&
		    !pool->draining) {
			/*
			 * A death to look at again and no drainer (an event
			 * loop between two reaps, say): one round ourselves.
			 */
			bool ev = atomic_load_explicit(&pool->evmode,
						       memory_order_relaxed);

			pool->draining = true;
			pthread_mutex_unlock(&pool->lock);
			/* An event loop's reap may have left it to us: arm its fd. */
			if (ev)
				while (knitk__pool_drain_or_arm(pool))
					;
			else
				knitk__pool_drain_all(pool, false, NULL);
			pthread_mutex_lock(&pool->lock);
			pool->draining = false;
			pthread_cond_broadcast(&pool->cond);
			continue;
		}
		if (completer_yields_locked(pool)) {
			/* Shutdown (a passive wait) signals ccond. */
			pthread_cond_wait(&pool->ccond, &pool->lock);
			continue;
		}
		if (pool->leader &&
		    (pool->draining || atomic_load(&pool->waiters) ||
		     (!pool->passive && !pool->closed && !pool->orphans &&
		      seen != pool->activity))) {
			uint64_t until = pool_now_ns() + POOL_LINGER_NS;
			struct timespec ts = {
				.tv_sec = (time_t)(until / 1000000000ULL),
				.tv_nsec = (long)(until % 1000000000ULL),
			};

			seen = pool->activity;
			pthread_cond_timedwait(&pool->ccond, &pool->lock, &ts);
			continue;
		}
		pool->draining = true;
		pool->completer_draining = true;
		pool->orphans = false;
		ev = atomic_load_explicit(&pool->evmode, memory_order_relaxed);
		pthread_mutex_unlock(&pool->lock);
		completer_drain(pool, ev);
		pthread_mutex_lock(&pool->lock);
		pool->draining = false;
		pool->completer_draining = false;
		/* Hand-off: a waiter takes the role. */
		pthread_cond_broadcast(&pool->cond);
		seen = pool->activity;
	}
	pool->completer_done = true;
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
	return NULL;
}

int knitk__completer_start(struct knitk_pool *pool)
{
	int ret;

	ret = pthread_create(&pool->completer, NULL, completer_main, pool);
	if (ret)
		return -ret;
	pool->completer_started = true;
	return 0;
}
