// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Crash attribution: what the drainer does when a worker died, and what
 * the completer does after it (reset, reap, respawn).
 *
 * A death of worker w (docs/protocol.md C3, C4): stop dispatching to w;
 * cycle every submitter lock so no submitter is between its liveness check and
 * its publish; take the results w published before it died; complete every
 * call still held by w with -EOWNERDEAD and free its entries (no task id
 * leaks); then reset w's request mailboxes by acknowledging every pending
 * lane as a stand-in consumer (their calls have completed; this frees their
 * arena slots), and, with KNITK_POOL_RESPAWN, start a new process as worker
 * w: those last two by the completer (knitk__pool_aftercare_locked), so
 * that a waiter that handled the death returns as soon as its call
 * completed.  The new worker builds its consumers from the shared ack and
 * free words we left, and its producer from a return mailbox we have fully
 * drained: half-consumed lanes of the dead worker are neither lost (their
 * calls completed) nor run twice.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <unistd.h>

#include "pool_internal.h"
#include "box.h"
#include "process.h"
#include "slot.h"

static void worker_drain(struct knitk_pool *pool, unsigned int w)
{
	while (knitk__results_drain(pool, w, false))
		;
}

/*
 * Acknowledge every pending lane of worker @w's request mailboxes and free
 * their arena bytes (their calls have completed), from the submitter
 * side's record of what is outstanding: w may have died between the two
 * stores of an acknowledgement (knitk_producer_reset_consumer).  The lane
 * an unsent loan claimed stays, bytes and all, for its submit (C8).  The dead
 * worker was the only writer of those words and the next worker w is not
 * started yet, so for now we are; a submitter's lock keeps its producer still.
 */
static void reset_requests(struct knitk_pool *pool, unsigned int w)
{
	unsigned int s;

	for (s = 0; s < pool->nr_submitters; s++) {
		pthread_mutex_lock(&pool->submitters[s].lock);
		knitk_producer_reset_consumer(pool->submitters[s].producers[w]);
		pthread_mutex_unlock(&pool->submitters[s].lock);
	}
}

/*
 * The process serving as worker @w is live: a death notice of w
 * (pool->recheck) is of an earlier one, already handled (pool->lock).
 */
static bool worker_live_locked(struct knitk_pool *pool, unsigned int w)
{
	uint32_t g;

	return pool->opts.kind == KNITK_WORKER_PROCESSES &&
	       knitk_endpoint_role(pool->ep, w, &g) == 1 &&
	       g == pool->workers[w].join_gen;
}

static void handle_death(struct knitk_pool *pool, unsigned int w)
{
	struct pool_worker *pw = &pool->workers[w];
	uint64_t tids[KNITK_LANES * KNITK_MAX_SUBMITTERS];
	unsigned int s, i, nr_tids = 0;
	bool respawn;
	uint64_t busy;
	pid_t pid;

	/*
	 * A worker that answered its stop and then exited has stopped, not
	 * died: take the answer first, so the state below says which.
	 */
	worker_drain(pool, w);
	pthread_mutex_lock(&pool->lock);
	if (pw->state != WORKER_RUNNING || worker_live_locked(pool, w)) {
		/* A stopped worker exiting: expected. */
		if (pw->state == WORKER_STOPPED)
			pw->state = WORKER_NONE;
		pthread_mutex_unlock(&pool->lock);
		return;
	}
	/* seq_cst pairs with the re-check in pool_publish under a submitter lock. */
	atomic_fetch_add_explicit(&pw->epoch, 1, memory_order_seq_cst);
	atomic_store_explicit(&pw->alive, 0, memory_order_seq_cst);
	/* Reaped by the completer: never handed out (knitk_pool_worker_info) again. */
	pid = pw->pid;
	pw->pid = 0;
	/*
	 * Counted with the death: a submit must never see w gone and no
	 * respawn under way (it waits for the new worker, not -EPIPE).
	 */
	respawn = (pool->opts.flags & KNITK_POOL_RESPAWN) && !pool->closed;
	if (respawn)
		pool->respawning++;
	pool->stats.deaths++;
	pthread_mutex_unlock(&pool->lock);
	POOL_HOOK(pool, POOL_HOOK_DEATH, w);

	/* After this no submitter publishes to w (see pool_publish). */
	for (s = 0; s < pool->nr_submitters; s++) {
		pthread_mutex_lock(&pool->submitters[s].lock);
		pthread_mutex_unlock(&pool->submitters[s].lock);
	}
	/* Results w published before it died complete normally. */
	worker_drain(pool, w);

	if (pool->steal)
		nr_tids = knitk__steal_take_dead(pool, w, tids);
	pthread_mutex_lock(&pool->lock);
	for (busy = pool->steal ? 0 : pw->busy; busy; busy &= busy - 1) {
		unsigned int idx = w * KNITK_LANES + (unsigned int)__builtin_ctzll(busy);
		struct knitk_call *call = pool->entries[idx].call;

		/* An unsent loan is not w's call yet: it keeps its entry (C8). */
		if (call && call->loan == LOAN_HELD)
			continue;
		/* Finished before it died, the result in the box: it stands. */
		if (call && knitk__call_take_back_locked(pool, call, false, NULL))
			continue;
		if (call)
			knitk__call_complete_locked(pool, call, -EOWNERDEAD, NULL, 0);
		knitk__entry_free_locked(pool, idx);
	}
	/* Stealing: the calls w had claimed and not answered (T10). */
	for (i = 0; i < nr_tids; i++) {
		uint32_t idx = (uint32_t)tids[i], gen = (uint32_t)(tids[i] >> 32);
		struct pool_entry *e = &pool->entries[idx];

		if (idx >= pool->nr_workers * KNITK_LANES || !e->call || e->gen != gen)
			continue;
		/* Taken by another worker after all (R2): its answer ends it. */
		if (slot_other(&pool->slots[idx], gen, w) ||
		    knitk__call_take_back_locked(pool, e->call, false, NULL))
			continue;
		if (!call_done_locked(e->call))
			e->call->ran = (int)w;
		knitk__call_complete_locked(pool, e->call, -EOWNERDEAD, NULL, 0);
		knitk__entry_free_locked(pool, idx);
	}
	if (respawn && pool->closed) {
		/* Shut down meanwhile: no new worker after all. */
		respawn = false;
		pool->respawning--;
	}
	pw->state = respawn ? WORKER_NONE : WORKER_DEAD;
	if (pool->steal)
		knitk__steal_orphans_locked(pool);
	pool_progress_locked(pool);
	/*
	 * The rest, resetting w's request mailboxes, reaping the dead
	 * process and starting the next one, is the completer's
	 * (knitk__pool_aftercare_locked), in this order: the drainer may be a thread
	 * waiting for one of the calls just completed, and returns to it
	 * now.  Nobody publishes to w meanwhile (alive is clear).  The
	 * completer is told when the drainer leaves its role (or finds it
	 * when it is the drainer), so that it does not take pool->lock and
	 * a CPU from that thread on its way back.
	 */
	pw->dead_pid = pid;
	pw->respawn = respawn;
	atomic_fetch_or_explicit(&pool->aftercare, 1ULL << w, memory_order_relaxed);
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
	POOL_HOOK(pool, POOL_HOOK_RESET, w);
}

/*
 * The completer, pool->lock held: start a new process as worker @w,
 * whose respawn handle_death counted.  Without the drainer role, so
 * every wait goes on meanwhile; submits to w wait for it (respawning).
 */
static void respawn_locked(struct knitk_pool *pool, unsigned int w)
{
	struct pool_worker *pw = &pool->workers[w];
	int ret = -ESHUTDOWN;

	/* Shut down meanwhile: no new worker after all. */
	if (!pool->closed) {
		pthread_mutex_unlock(&pool->lock);
		POOL_HOOK(pool, POOL_HOOK_RESPAWN, w);
		ret = knitk__spawn_worker(pool, w, true);
		pthread_mutex_lock(&pool->lock);
	}
	pool->respawning--;
	if (ret) {
		pw->state = WORKER_DEAD;
		/*
		 * Gone for good: with no worker left, the calls nobody took
		 * complete (-EPIPE), as after a death without respawn, and
		 * submits waiting for this worker look again.
		 */
		if (pool->steal)
			knitk__steal_orphans_locked(pool);
		pool_progress_locked(pool);
		/* Their waiters: a parked drainer and those asleep on cond. */
		knitk__pool_kick_drainer_locked(pool);
		pthread_cond_broadcast(&pool->cond);
		return;
	}
	pw->state = WORKER_RUNNING;
	atomic_store_explicit(&pw->alive, 1, memory_order_seq_cst);
	pool->stats.respawns++;
	/*
	 * The new worker died before it was RUNNING: a drainer may have
	 * taken that death for the stale bit of its predecessor's and
	 * passed over it.  Have it looked at again: seq_cst pairs with the
	 * drainer's load in knitk__pool_deaths_pending after its prepare, like the
	 * kick (a parked drainer's wait ends, or it sees the bit).
	 */
	if (!worker_live_locked(pool, w)) {
		atomic_fetch_or_explicit(&pool->recheck, 1ULL << w, memory_order_seq_cst);
		knitk__pool_kick_drainer_locked(pool);
	}
}

/*
 * The completer, pool->lock held (dropped meanwhile): what handle_death
 * left for after the waiters were released, for each dead worker.
 */
void knitk__pool_aftercare_locked(struct knitk_pool *pool)
{
	uint64_t m;

	while ((m = atomic_load_explicit(&pool->aftercare, memory_order_relaxed))) {
		unsigned int w = (unsigned int)__builtin_ctzll(m);
		struct pool_worker *pw = &pool->workers[w];
		pid_t pid = pw->dead_pid;
		int pidfd;

		pw->dead_pid = 0;
		pthread_mutex_unlock(&pool->lock);
		POOL_HOOK(pool, POOL_HOOK_AFTERCARE, w);
		/* Before a new worker w starts from what it leaves. */
		if (!pool->steal)
			reset_requests(pool, w);
		if (pid > 0)
			knitk__spawn_reap_dead(pid);
		pthread_mutex_lock(&pool->lock);
		pidfd = knitk__spawn_take_pidfd(pool, w);
		if (pidfd >= 0) {
			pthread_mutex_unlock(&pool->lock);
			close(pidfd);
			pthread_mutex_lock(&pool->lock);
		}
		if (pw->respawn) {
			pw->respawn = false;
			respawn_locked(pool, w);
		}
		atomic_fetch_and_explicit(&pool->aftercare, ~(1ULL << w),
					  memory_order_relaxed);
		pthread_cond_broadcast(&pool->cond);
	}
}

/* A death the drainer has not handled yet (see knitk_endpoint_deaths). */
bool knitk__pool_deaths_pending(struct knitk_pool *pool)
{
	uint32_t seq;

	knitk_endpoint_deaths(pool->ep, &seq, NULL);
	/* seq_cst pairs with the store in respawn_locked. */
	return seq != pool->death_seq ||
	       atomic_load_explicit(&pool->recheck, memory_order_seq_cst);
}

/* Returns true when some death was handled. */
bool knitk__pool_check_deaths(struct knitk_pool *pool)
{
	uint64_t dead, again;
	uint32_t seq;
	unsigned int w;

	POOL_HOOK(pool, POOL_HOOK_DEATHS_LOOK, 0);
	/* seq_cst pairs with the store in respawn_locked. */
	again = atomic_load_explicit(&pool->recheck, memory_order_seq_cst);
	if (again)
		again = atomic_exchange_explicit(&pool->recheck, 0, memory_order_seq_cst);
	/* The dead bit of every death that seq counts is in dead. */
	knitk_endpoint_deaths(pool->ep, &seq, &dead);
	if (seq == pool->death_seq && !again)
		return false;
	knitk__pool_held_flush(pool);
	pool->death_seq = seq;
	dead |= again;
	for (w = 0; w < pool->nr_workers; w++)
		if (dead & (1ULL << w))
			handle_death(pool, w);
	return true;
}
