// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The completer: the one pool thread that consumes every return mailbox,
 * completes handles, and handles worker deaths (crash attribution).
 *
 * It is the host role's only consumer and the only thread that parks on the
 * host doorbell: one park covers every return mailbox (rule 5), and a
 * worker's death rings it too (death_seq).  Waiting user threads sleep on
 * pool->cond, which the completer broadcasts after each batch.
 *
 * A death of worker w (rule 7): stop dispatching to w; cycle every slot lock
 * so no submitter is between its liveness check and its publish; take the
 * results w published before it died; complete every call still held by w
 * with -EOWNERDEAD and free its entries (no task id leaks); then reset w's
 * request mailboxes by acknowledging every pending lane as a stand-in
 * consumer (their calls have completed; this frees their arena slots), and,
 * with KNITK_POOL_RESPAWN, start a new process as worker w.  The new worker
 * builds its consumers from the shared ack and free words we left, and its
 * producer from a return mailbox we have fully drained: half-consumed lanes
 * of the dead worker are neither lost (their calls completed) nor run twice.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "pool_internal.h"

struct result {
	uint64_t task_id;
	int status;
	bool stop;
	void *data;
	size_t len;
};

/* Complete the decoded results of worker @w. */
static void results_apply(struct knitk_pool *pool, unsigned int w,
			  struct result *res, unsigned int n)
{
	struct pool_worker *pw = &pool->workers[w];
	uint64_t now = 0;
	unsigned int i;

	pthread_mutex_lock(&pool->lock);
	for (i = 0; i < n; i++) {
		struct result *r = &res[i];
		uint32_t idx = (uint32_t)r->task_id, gen = (uint32_t)(r->task_id >> 32);
		struct pool_entry *e;

		if (r->stop) {
			if (pw->state == WORKER_RUNNING)
				pw->state = WORKER_STOPPED;
			atomic_store_explicit(&pw->alive, 0, memory_order_seq_cst);
			continue;
		}
		e = idx / KNITK_LANES == w ? &pool->entries[idx] : NULL;
		if (!e || !e->call || e->gen != gen) {
			/* Not ours, or its entry is gone: drop it. */
			pool->stats.stale++;
			free(r->data);
			continue;
		}
		pw->calls++;
		if (e->call->state != CALL_DONE && e->call->deadline_ns) {
			if (!now)
				now = pool_now_ns();
			/* Past its deadline the call has expired: drop the result. */
			if (now >= e->call->deadline_ns)
				call_complete_locked(pool, e->call, -ETIMEDOUT, NULL, 0);
		}
		call_complete_locked(pool, e->call, r->status, r->data, r->len);
		entry_free_locked(pool, idx);
	}
	pool->progress++;
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
}

/* Consume worker @w's return mailbox; returns the results taken. */
static unsigned int drain_worker(struct knitk_pool *pool, unsigned int w)
{
	struct pool_worker *pw = &pool->workers[w];
	struct result res[KNITK_LANES];
	uint64_t pending, lanes = 0;
	unsigned int n = 0;
	int lane;

	if (!pw->ret || knitk_lane_scan(pw->ret, &pending) <= 0)
		return 0;
	while ((lane = knitk_lane_next(pw->ret, &pending)) >= 0) {
		struct result *r = &res[n++];
		struct knitk_msg msg;
		int err = knitk_lane_decode(pw->ret, (unsigned int)lane, &msg);

		lanes |= 1ULL << lane;
		memset(r, 0, sizeof(*r));
		r->task_id = msg.header.task_id;
		if (err) {
			r->status = err;
			continue;
		}
		r->stop = msg.header.function_id == POOL_FN_STOP;
		r->status = (int)(int32_t)msg.header.user;
		if (msg.len) {
			/* The one copy of the result, before the lane is freed. */
			r->data = malloc(msg.len);
			if (r->data) {
				memcpy(r->data, msg.data, msg.len);
				r->len = msg.len;
			} else {
				r->status = -ENOMEM;
			}
		}
	}
	/*
	 * Retire the lanes (and their arena bytes) before the entries are
	 * freed in results_apply: a worker never holds more result lanes
	 * than it has entries in flight (POOL_CAP).
	 */
	knitk_lane_ack(pw->ret, lanes);
	results_apply(pool, w, res, n);
	return n;
}

void completer_drain_worker(struct knitk_pool *pool, unsigned int w)
{
	while (drain_worker(pool, w))
		;
}

/* Acknowledge every pending lane of worker @w's request mailboxes. */
static void reset_requests(struct knitk_pool *pool, unsigned int w)
{
	unsigned int s;

	/*
	 * The dead worker was the only writer of these ack and arena free
	 * words; the next worker w is not started yet, so for now we are.
	 */
	for (s = 0; s < pool->nr_submitters; s++) {
		struct knitk_consumer *c;
		uint64_t pending;

		if (knitk_consumer_create(pool->knot,
				(unsigned int)knitk_knot_request_mailbox(pool->knot, s, w),
				&c))
			continue;
		if (knitk_lane_scan(c, &pending) > 0)
			knitk_lane_ack(c, pending);
		knitk_consumer_destroy(c);
	}
}

static void handle_death(struct knitk_pool *pool, unsigned int w)
{
	struct pool_worker *pw = &pool->workers[w];
	bool respawn;
	uint64_t busy;
	unsigned int s;
	int ret;

	pthread_mutex_lock(&pool->lock);
	if (pw->state != WORKER_RUNNING) {
		/* A stopped worker exiting: expected. */
		if (pw->state == WORKER_STOPPED)
			pw->state = WORKER_NONE;
		pthread_mutex_unlock(&pool->lock);
		return;
	}
	/* seq_cst pairs with the re-check in pool_publish under a slot lock. */
	atomic_fetch_add_explicit(&pw->epoch, 1, memory_order_seq_cst);
	atomic_store_explicit(&pw->alive, 0, memory_order_seq_cst);
	pool->stats.deaths++;
	pthread_mutex_unlock(&pool->lock);

	/* After this no submitter publishes to w (see pool_publish). */
	for (s = 0; s < pool->nr_submitters; s++) {
		pthread_mutex_lock(&pool->slots[s].lock);
		pthread_mutex_unlock(&pool->slots[s].lock);
	}
	/* Results w published before it died complete normally. */
	completer_drain_worker(pool, w);
	if (pw->pid > 0) {
		waitpid(pw->pid, NULL, 0);
		pw->pid = 0;
	}

	pthread_mutex_lock(&pool->lock);
	for (busy = pw->busy; busy; busy &= busy - 1) {
		unsigned int idx = w * KNITK_LANES + (unsigned int)__builtin_ctzll(busy);

		if (pool->entries[idx].call)
			call_complete_locked(pool, pool->entries[idx].call,
					     -EOWNERDEAD, NULL, 0);
		entry_free_locked(pool, idx);
	}
	respawn = (pool->opts.flags & KNITK_POOL_RESPAWN) && !pool->closed;
	pw->state = respawn ? WORKER_NONE : WORKER_DEAD;
	if (respawn)
		pool->respawning++;
	pool->progress++;
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);

	reset_requests(pool, w);
	if (!respawn)
		return;
	ret = spawn_worker(pool, w);
	pthread_mutex_lock(&pool->lock);
	pool->respawning--;
	if (ret == 0) {
		pw->state = WORKER_RUNNING;
		atomic_store_explicit(&pw->alive, 1, memory_order_seq_cst);
		pool->stats.respawns++;
	} else {
		pw->state = WORKER_DEAD;
	}
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
}

/* Returns true when some death was handled. */
static bool check_deaths(struct knitk_pool *pool)
{
	/* Acquire pairs with the kernel's (or mark_dead's) update. */
	uint32_t seq = atomic_load_explicit(A32(&pool->ctl->death_seq),
					    memory_order_acquire);
	uint64_t dead;
	unsigned int w;

	if (seq == pool->death_seq)
		return false;
	pool->death_seq = seq;
	dead = atomic_load_explicit(A64(&pool->ctl->dead), memory_order_acquire);
	for (w = 0; w < pool->nr_workers; w++)
		if (dead & (1ULL << w))
			handle_death(pool, w);
	return true;
}

/* Nothing left to serve: every worker stopped or dead for good. */
static bool completer_should_exit(struct knitk_pool *pool)
{
	unsigned int w;
	bool exit = true;

	pthread_mutex_lock(&pool->lock);
	for (w = 0; w < pool->nr_workers; w++)
		if (pool->workers[w].state == WORKER_RUNNING)
			exit = false;
	if (pool->respawning)
		exit = false;
	pthread_mutex_unlock(&pool->lock);
	return exit;
}

static void *completer_main(void *arg)
{
	struct knitk_pool *pool = arg;
	unsigned int w, spins = 0;

	for (;;) {
		unsigned int n = 0;
		uint32_t seq;

		for (w = 0; w < pool->nr_workers; w++)
			n += drain_worker(pool, w);
		if (check_deaths(pool))
			n++;
		if (n) {
			spins = 0;
			continue;
		}
		if (spins++ < pool->opts.spin)
			continue;
		spins = 0;
		/*
		 * Only a stop reply or a death (both of which wake us) can
		 * make this true, so checking before each park is enough.
		 */
		if (completer_should_exit(pool))
			break;
		if (knitk_doorbell_prepare(pool->knot, &seq))
			break;
		/*
		 * A death after check_deaths and before prepare would be
		 * hidden from the wait's own death_seq check: look again
		 * now that the sleeping flag is set.
		 */
		if (atomic_load_explicit(A32(&pool->ctl->death_seq),
					 memory_order_acquire) != pool->death_seq) {
			knitk_doorbell_cancel(pool->knot);
			continue;
		}
		knitk_doorbell_wait(pool->knot, seq, KNITK_WAIT_FOREVER);
	}
	pthread_mutex_lock(&pool->lock);
	pool->completer_done = true;
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
	return NULL;
}

int completer_start(struct knitk_pool *pool)
{
	int ret;

	ret = pthread_create(&pool->completer, NULL, completer_main, pool);
	if (ret)
		return -ret;
	pool->completer_started = true;
	return 0;
}
