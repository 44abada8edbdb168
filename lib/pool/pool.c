// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The pool: creation, the balancer, submission, shutdown and destruction.
 *
 * Submission of one call:
 *  1. Under pool->lock the balancer picks the live worker with the fewest
 *     calls in flight (ties: the lowest id) and below POOL_CAP, and the
 *     call takes a free in-flight entry of that worker: task id =
 *     (generation, entry).
 *  2. Under its submitter's lock the thread re-checks that the worker
 *     is alive and publishes the request into mailbox (submitter, worker).
 *  3. It rings that worker's doorbell, which does nothing unless the worker
 *     is parked (the doorbell protocol); no other worker is touched.
 *
 * Submitters: a thread hashes to a submitter and takes its mutex (trying
 * the others first when it is busy).  Only the holder of the submitter's mutex
 * touches its producers, so each request mailbox's pub word and arena
 * table keep exactly one writer at a time, as the lane protocol requires;
 * the mutex is host-private and costs one uncontended lock per call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool_internal.h"
#include "../sized.h"

_Static_assert(offsetof(struct knitk_pool_opts, size) == 0 &&
	       sizeof(struct knitk_pool_opts) == KNITK_POOL_OPTS_SIZE_VER1,
	       "knitk_pool_opts layout");
KNITK__SIZED_VER0(knitk_call_opts, KNITK_CALL_OPTS_SIZE_VER0);
KNITK__SIZED_VER0(knitk_pool_stats, KNITK_POOL_STATS_SIZE_VER2);
KNITK__SIZED_VER0(knitk_worker_info, KNITK_WORKER_INFO_SIZE_VER2);

#ifdef KNITK_TEST_HOOKS
_Atomic(pool_hook_fn) knitk__test_hook;
_Atomic uint32_t knitk__test_gen_base;
#endif

void knitk__pool_free(struct knitk_pool *pool)
{
	knitk__call_cache_free(pool);
	pthread_mutex_destroy(&pool->lock);
	pthread_cond_destroy(&pool->cond);
	pthread_cond_destroy(&pool->ccond);
	free(pool);
}

static int opts_check(const struct knitk_pool_opts *o,
		      const struct knitk_task_table *t)
{
	unsigned int i;

	if (!t || !t->tasks || !t->nr_tasks || t->nr_tasks >= POOL_FN_STOP ||
	    t->reserved)
		return -EINVAL;
	for (i = 0; i < t->nr_tasks; i++)
		if (!t->tasks[i])
			return -EINVAL;
	if (o->kind != KNITK_WORKER_THREADS && o->kind != KNITK_WORKER_PROCESSES)
		return -EINVAL;
	if (o->flags & ~KNITK_POOL_RESPAWN)
		return -EINVAL;
	if (o->nr_workers < 1 || o->nr_workers > KNITK_MAX_WORKERS ||
	    o->nr_submitters < 1 || o->nr_submitters > KNITK_MAX_SUBMITTERS)
		return -EINVAL;
	if ((o->flags & KNITK_POOL_RESPAWN) && o->kind != KNITK_WORKER_PROCESSES)
		return -EINVAL;
	if (o->dispatch == KNITK_POOL_DISPATCH_STEAL)
		return knitk_steal_region_lanes(o->nr_workers, o->steal_region) < 0 ?
		       -EINVAL : 0;
	if (o->dispatch != KNITK_POOL_DISPATCH_PRIVATE || o->steal_region)
		return -EINVAL;
	return 0;
}

static void opts_default(struct knitk_pool_opts *o)
{
	long cpus;

	if (!o->kind)
		o->kind = KNITK_WORKER_THREADS;
	if (!o->nr_workers) {
		cpus = sysconf(_SC_NPROCESSORS_ONLN);
		o->nr_workers = cpus < 1 ? 1 : cpus > KNITK_MAX_WORKERS ?
				KNITK_MAX_WORKERS : (unsigned int)cpus;
	}
	if (!o->nr_submitters)
		o->nr_submitters = POOL_DEF_SUBMITTERS;
	if (!o->inline_bytes)
		o->inline_bytes = POOL_DEF_INLINE;
	if (!o->arena_bytes)
		o->arena_bytes = POOL_DEF_ARENA;
	if (!o->spin)
		o->spin = POOL_DEF_SPIN;
}

static int pool_start_workers(struct knitk_pool *pool)
{
	unsigned int w;
	int ret = 0;

	if (pool->opts.kind == KNITK_WORKER_PROCESSES) {
		if (knitk_endpoint_backend(pool->ep) == KNITK_BACKEND_FUTEX) {
			ret = knitk__monitor_start(pool);
			if (ret)
				return ret;
		}
		for (w = 0; w < pool->nr_workers; w++) {
			ret = knitk__spawn_worker(pool, w);
			if (ret)
				return ret;
			pool->workers[w].state = WORKER_RUNNING;
			atomic_store(&pool->workers[w].alive, 1);
		}
		return 0;
	}
	for (w = 0; w < pool->nr_workers; w++) {
		struct pool_worker *pw = &pool->workers[w];

		ret = knitk_endpoint_attach(knitk_endpoint_fd(pool->ep), 0, &pw->ep);
		if (ret)
			return ret;
		ret = knitk_endpoint_join(pw->ep, KNITK_ROLE_WORKER, w);
		if (ret < 0)
			return ret;
		ret = pthread_create(&pw->thread, NULL, knitk__worker_thread_main, pw);
		if (ret)
			return -ret;
		pw->thread_started = true;
		pw->state = WORKER_RUNNING;
		atomic_store(&pw->alive, 1);
	}
	return 0;
}

/*
 * The program process workers run.  Without a prefix, /proc/self/exe as
 * is: the spawned child execs the host's own binary even after it was
 * replaced on disk.  A prefix command would resolve that link to itself,
 * so it gets the binary's real path.
 */
static int pool_worker_exe(const struct knitk_pool_opts *opts, char **exe)
{
	if (opts->worker_path)
		*exe = strdup(opts->worker_path);
	else if (!opts->prefix_argv || !opts->prefix_argv[0])
		*exe = strdup("/proc/self/exe");
	else if (!(*exe = realpath("/proc/self/exe", NULL)))
		return -errno;
	return *exe ? 0 : -ENOMEM;
}

static int pool_setup(struct knitk_pool *pool)
{
	struct knitk_geometry geom = {
		.flags = pool->steal ? KNITK_GEOM_STEAL : 0,
		.nr_workers = pool->nr_workers,
		.nr_submitters = pool->nr_submitters,
		.lanes = KNITK_LANES,
		.inline_bytes = pool->opts.inline_bytes,
		.abort_bits = pool->nr_workers * KNITK_LANES,
		.arena_bytes = pool->opts.arena_bytes,
	};
	struct knitk_layout layout;
	unsigned int s, w;
	void *base;
	int ret;

	ret = knitk_endpoint_create(&geom, pool->opts.knot_flags, &pool->ep);
	if (ret)
		return ret;
	ret = knitk_endpoint_join(pool->ep, KNITK_ROLE_HOST, 0);
	if (ret < 0)
		return ret;
	knitk_endpoint_base(pool->ep, &base);
	knitk_endpoint_layout(pool->ep, &layout, NULL);
	pool->abort_words = (_Atomic uint64_t *)((char *)base + layout.abort_off);
	pool->max_len = layout.arena_size > geom.inline_bytes ?
			layout.arena_size : geom.inline_bytes;
	for (w = 0; w < pool->nr_workers; w++) {
		pool->workers[w].pool = pool;
		pool->workers[w].id = w;
		ret = knitk_consumer_create(pool->ep,
			(unsigned int)knitk_endpoint_return_mailbox(pool->ep, w),
			&pool->workers[w].ret);
		if (ret)
			return ret;
	}
	for (s = 0; s < pool->nr_submitters; s++) {
		pthread_mutex_init(&pool->submitters[s].lock, NULL);
		pool->submitters[s].producers = calloc(pool->nr_workers,
						       sizeof(struct knitk_producer *));
		if (!pool->submitters[s].producers)
			return -ENOMEM;
		/* Stealing: one request mailbox per slot, every worker's. */
		for (w = 0; w < (pool->steal ? 1 : pool->nr_workers); w++) {
			ret = knitk_producer_create(pool->ep,
				(unsigned int)knitk_endpoint_request_mailbox(pool->ep, s, w),
				&pool->submitters[s].producers[w]);
			if (ret)
				return ret;
		}
	}
	if (pool->steal) {
		ret = knitk__steal_setup(pool);
		if (ret)
			return ret;
	}
	return knitk_endpoint_deaths(pool->ep, &pool->death_seq, NULL);
}

KNITK_EXPORT int knitk_pool_create(const struct knitk_pool_opts *opts,
				   const struct knitk_task_table *table,
				   struct knitk_pool **poolp)
{
	struct knitk_pool *pool;
	pthread_condattr_t ca;
	uint32_t gen_base;
	unsigned int w;
	size_t i;
	int ret;

	if (!opts || !poolp)
		return -EINVAL;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	ret = knitk__sized_in(&pool->opts, sizeof(pool->opts),
			      KNITK_POOL_OPTS_SIZE_VER0, opts);
	if (!ret) {
		opts_default(&pool->opts);
		ret = opts_check(&pool->opts, table);
	}
	if (ret) {
		free(pool);
		return ret;
	}
	pool->table = *table;
	pool->steal = pool->opts.dispatch == KNITK_POOL_DISPATCH_STEAL;
	if (pool->steal)
		pool->steal_g = (unsigned int)knitk_steal_region_lanes(pool->opts.nr_workers,
								pool->opts.steal_region);
	pool->nr_workers = pool->opts.nr_workers;
	pool->nr_submitters = pool->opts.nr_submitters;
	pool->monitor_efd = -1;
	pool->host_pidfd = -1;
	pool->event_fd = -1;
	pthread_mutex_init(&pool->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pool->cond, &ca);
	pthread_cond_init(&pool->ccond, &ca);
	pthread_condattr_destroy(&ca);
	pool->workers = calloc(pool->nr_workers, sizeof(*pool->workers));
	pool->entries = calloc((size_t)pool->nr_workers * KNITK_LANES,
			       sizeof(*pool->entries));
	pool->submitters = calloc(pool->nr_submitters, sizeof(*pool->submitters));
	if (!pool->workers || !pool->entries || !pool->submitters) {
		ret = -ENOMEM;
		goto fail;
	}
	/* From 0, but near the wrap in a test of task ids (pool_hooks.h). */
	gen_base = POOL_GEN_BASE();
	for (i = 0; i < (size_t)pool->nr_workers * KNITK_LANES; i++)
		pool->entries[i].gen = gen_base;
	for (w = 0; w < pool->nr_workers; w++) {
		pool->workers[w].pidfd = -1;
		atomic_init(&pool->workers[w].epoch, gen_base);
	}
	if (pool->opts.kind == KNITK_WORKER_PROCESSES) {
		ret = pool_worker_exe(&pool->opts, &pool->exe);
		if (ret)
			goto fail;
	}
	ret = pool_setup(pool);
	if (!ret) {
		/* Leader/follower needs a way to end another thread's park. */
		pool->leader = knitk_doorbell_can_kick(pool->ep) == 1;
		ret = pool_start_workers(pool);
	}
	if (!ret)
		ret = knitk__completer_start(pool);
	if (ret)
		goto fail;
	*poolp = pool;
	return 0;
fail:
	knitk_pool_destroy(pool);
	return ret;
}

/* True while some worker may serve (now or after a respawn). */
bool knitk__pool_has_workers_locked(struct knitk_pool *pool,
				    const struct knitk_call_opts *co)
{
	unsigned int w;

	if (pool->respawning)
		return true;
	if (co && (co->flags & KNITK_CALL_WORKER))
		return atomic_load(&pool->workers[co->worker].alive);
	for (w = 0; w < pool->nr_workers; w++)
		if (atomic_load(&pool->workers[w].alive))
			return true;
	return false;
}

/*
 * The balancer: least-loaded live worker below the cap, or -1.  Ties go
 * to the lowest id: calls made one at a time keep landing on the worker
 * that served the previous one, still polling its mailboxes, while the
 * others stay parked (a rotating tie-break would wake each in turn and
 * keep every worker spinning for a lone caller).
 */
static int pool_pick_locked(struct knitk_pool *pool,
			    const struct knitk_call_opts *co)
{
	unsigned int w, best_load = UINT_MAX;
	int best = -1;

	if (co && (co->flags & KNITK_CALL_WORKER)) {
		struct pool_worker *pw = &pool->workers[co->worker];

		return atomic_load(&pw->alive) && pw->inflight < POOL_CAP ?
		       (int)co->worker : -1;
	}
	/* Stealing: buckets of any worker, while some worker serves. */
	if (pool->steal && !knitk__pool_has_workers_locked(pool, co))
		return -1;
	for (w = 0; w < pool->nr_workers; w++) {
		struct pool_worker *pw = &pool->workers[w];

		/* Stealing: w is only the entry's bucket, any worker runs it. */
		if ((!pool->steal && !atomic_load(&pw->alive)) ||
		    pw->inflight >= POOL_CAP)
			continue;
		if (pw->inflight < best_load) {
			best_load = pw->inflight;
			best = (int)w;
			if (!best_load)
				break;	/* an idle worker: take it */
		}
	}
	return best;
}

/*
 * Register a new call in flight on a worker, in a handle from the cache
 * (*callp); returns the worker.
 */
static int pool_register(struct knitk_pool *pool, const struct knitk_call_opts *co,
			 bool reap, struct knitk_call **callp)
{
	struct knitk_call *call;
	struct pool_worker *pw;
	struct pool_entry *e;
	unsigned int k;
	int w;

	pthread_mutex_lock(&pool->lock);
	for (;;) {
		if (pool->closed) {
			pthread_mutex_unlock(&pool->lock);
			return -ESHUTDOWN;
		}
		w = pool_pick_locked(pool, co);
		if (w >= 0)
			break;
		if (!knitk__pool_has_workers_locked(pool, co)) {
			pthread_mutex_unlock(&pool->lock);
			return -EPIPE;
		}
		/* An event loop never waits in the library: it reaps first. */
		if (atomic_load_explicit(&pool->evmode, memory_order_relaxed)) {
			pthread_mutex_unlock(&pool->lock);
			return -EAGAIN;
		}
		POOL_HOOK(pool, POOL_HOOK_SUBMIT_WAIT, 0);
		knitk__pool_wait_passive_locked(pool);
	}
	call = knitk__call_get_locked(pool);
	if (!call) {
		pthread_mutex_unlock(&pool->lock);
		return -ENOMEM;
	}
	call->refs = 2;		/* the caller's and the entry's */
	call->no_reap = !reap;
	call->deadline_ns = co ? co->deadline_ns : 0;
	pw = &pool->workers[w];
	k = (unsigned int)__builtin_ctzll(~pw->busy);
	pw->busy |= 1ULL << k;
	pw->inflight++;
	call->worker = (unsigned int)w;
	call->ran = -1;
	call->entry = (unsigned int)w * KNITK_LANES + k;
	e = &pool->entries[call->entry];
	e->gen++;
	e->call = call;
	atomic_store_explicit(&call->state, CALL_INFLIGHT, memory_order_relaxed);
	call->epoch = atomic_load(&pw->epoch);
	call->task_id = pool_task_id(call->entry, e->gen);
	pool->handles++;
	pool->stats.submitted++;
	pthread_mutex_unlock(&pool->lock);
	*callp = call;
	return w;
}

/* Take a submitter: the thread's own by hash, else any free one. */
unsigned int knitk__submitter_acquire(struct knitk_pool *pool)
{
	unsigned int S = pool->nr_submitters, i;
	unsigned int home = (unsigned int)(((uintptr_t)pthread_self() >> 6) * 2654435761U) % S;

	for (i = 0; i < S; i++) {
		unsigned int s = (home + i) % S;

		if (!pthread_mutex_trylock(&pool->submitters[s].lock))
			return s;
	}
	pthread_mutex_lock(&pool->submitters[home].lock);
	return home;
}

/*
 * Publish the request of registered @call.  0 when published (or when the
 * worker died first: the death handler completes the call), else a
 * negative errno (the call was not published).
 */
static int pool_publish(struct knitk_pool *pool, struct knitk_call *call,
			uint32_t fn, const void *in, size_t len)
{
	struct pool_worker *pw = &pool->workers[call->worker];
	struct knitk_lane_header h = {
		.function_id = fn,
		.task_id = call->task_id,
		.deadline_ns = call->deadline_ns,
		.abort_id = call->entry + 1,
	};
	uint64_t progress;
	unsigned int s;
	int ret;

	if (pool->steal)
		return knitk__steal_publish(pool, call, &h, in, len);
	for (;;) {
		/*
		 * Sampled before the attempt: a completion that frees room
		 * after our send failed has bumped it by the time we wait.
		 * Acquire pairs with the release in pool_progress_locked, so
		 * room freed before a bump we see is seen by the send.
		 */
		progress = atomic_load_explicit(&pool->progress, memory_order_acquire);
		s = knitk__submitter_acquire(pool);
		/*
		 * seq_cst pairs with the stores in handle_death, which then
		 * cycles every submitter lock: either we see the worker dead (or
		 * reborn: another epoch) here, or our publish is done before
		 * the death handler resets the worker's request mailboxes.
		 * In both cases the death handler completes the call.
		 */
		if (!atomic_load_explicit(&pw->alive, memory_order_seq_cst) ||
		    atomic_load_explicit(&pw->epoch, memory_order_seq_cst) != call->epoch) {
			pthread_mutex_unlock(&pool->submitters[s].lock);
			return 0;
		}
		ret = knitk_producer_send(pool->submitters[s].producers[call->worker],
					  &h, len ? in : NULL, len);
		pthread_mutex_unlock(&pool->submitters[s].lock);
		if (ret >= 0)
			break;
		if (ret != -ENOSPC && ret != -EAGAIN)
			return ret;
		POOL_HOOK(pool, POOL_HOOK_PUBLISH_FULL, call->worker);
		if (atomic_load_explicit(&pool->evmode, memory_order_relaxed))
			return -EAGAIN;
		/*
		 * Backpressure: the worker has not yet retired earlier
		 * requests' arena bytes.  It does so before answering them,
		 * so wait for a completion batch since our sample (or its death).
		 */
		pthread_mutex_lock(&pool->lock);
		while (progress == atomic_load_explicit(&pool->progress, memory_order_relaxed) &&
		       atomic_load(&pw->alive))
			knitk__pool_wait_passive_locked(pool);
		pthread_mutex_unlock(&pool->lock);
	}
	/* Ring only the worker we published to; a no-op while it is awake. */
	knitk_doorbell_ring(pool->ep, 1ULL << call->worker);
	return 0;
}

static int submit_check(struct knitk_pool *pool, uint32_t fn, const void *in,
			size_t len, const struct knitk_call_opts *co)
{
	if (!pool || fn >= pool->table.nr_tasks || (len && !in))
		return -EINVAL;
	if (co && (co->reserved || (co->flags & ~KNITK_CALL_WORKER) ||
		   ((co->flags & KNITK_CALL_WORKER) &&
		    (co->worker >= pool->nr_workers || pool->steal))))
		return -EINVAL;
	if (len > pool->max_len)
		return -EMSGSIZE;
	return 0;
}

int knitk__pool_submit(struct knitk_pool *pool, uint32_t fn, const void *in,
		       size_t len, const struct knitk_call_opts *co, bool reap,
		       struct knitk_call **callp)
{
	struct knitk_call_opts o;
	struct knitk_call *call;
	int ret;

	if (!callp)
		return -EINVAL;
	if (co) {
		ret = knitk__sized_in(&o, sizeof(o), KNITK_CALL_OPTS_SIZE_VER0, co);
		if (ret)
			return ret;
		co = &o;
	}
	ret = submit_check(pool, fn, in, len, co);
	if (ret)
		return ret;
	ret = pool_register(pool, co, reap, &call);
	if (ret < 0)
		return ret;
	ret = pool_publish(pool, call, fn, in, len);
	if (ret) {
		/* Never published: withdraw it and give the entry back. */
		pthread_mutex_lock(&pool->lock);
		knitk__call_withdraw_locked(pool, call, ret);
		if (pool->entries[call->entry].call == call)
			knitk__entry_free_locked(pool, call->entry);
		knitk__call_unref_locked(call);
		pthread_cond_broadcast(&pool->cond);
		pthread_mutex_unlock(&pool->lock);
		return ret;
	}
	*callp = call;
	return 0;
}

KNITK_EXPORT int knitk_pool_submit(struct knitk_pool *pool, uint32_t fn,
				   const void *in, size_t len,
				   const struct knitk_call_opts *co,
				   struct knitk_call **callp)
{
	return knitk__pool_submit(pool, fn, in, len, co, true, callp);
}

KNITK_EXPORT int knitk_pool_submit_batch(struct knitk_pool *pool,
					 const struct knitk_submission *subs,
					 unsigned int nr,
					 struct knitk_call **calls)
{
	unsigned int i;
	int ret;

	if (!pool || !subs || !calls || !nr || nr > INT_MAX)
		return -EINVAL;
	for (i = 0; i < nr; i++) {
		if (subs[i].reserved)
			ret = -EINVAL;
		else
			ret = knitk_pool_submit(pool, subs[i].fn, subs[i].in,
						subs[i].len, subs[i].opts, &calls[i]);
		if (ret)
			return i ? (int)i : ret;
	}
	return (int)nr;
}

/* Send the stop message to every running worker, wait until they stop. */
static void pool_stop_workers(struct knitk_pool *pool)
{
	struct knitk_lane_header h = { .function_id = POOL_FN_STOP };
	unsigned int w;

	if (pool->steal)
		knitk__steal_stop_workers(pool);
	for (w = 0; !pool->steal && w < pool->nr_workers; w++) {
		if (!atomic_load(&pool->workers[w].alive))
			continue;
		pthread_mutex_lock(&pool->submitters[0].lock);
		/* POOL_CAP leaves this lane free. */
		knitk_producer_send(pool->submitters[0].producers[w], &h, NULL, 0);
		pthread_mutex_unlock(&pool->submitters[0].lock);
		knitk_doorbell_ring(pool->ep, 1ULL << w);
	}
	pthread_mutex_lock(&pool->lock);
	while (!pool->completer_done)
		knitk__pool_wait_passive_locked(pool);
	pthread_mutex_unlock(&pool->lock);
}

static bool pool_idle_locked(struct knitk_pool *pool)
{
	unsigned int w;

	for (w = 0; w < pool->nr_workers; w++)
		if (pool->workers[w].inflight)
			return false;
	return !pool->respawning;
}

KNITK_EXPORT int knitk_pool_shutdown(struct knitk_pool *pool, unsigned int mode)
{
	if (!pool || (mode != KNITK_SHUTDOWN_DRAIN && mode != KNITK_SHUTDOWN_CANCEL))
		return -EINVAL;
	pthread_mutex_lock(&pool->lock);
	if (pool->shut) {
		pthread_mutex_unlock(&pool->lock);
		return -EALREADY;
	}
	pool->shut = true;
	pool->closed = true;
	pthread_cond_broadcast(&pool->cond);	/* blocked submitters: -ESHUTDOWN */
	if (mode == KNITK_SHUTDOWN_CANCEL)
		knitk__pool_cancel_all_locked(pool);
	/* Drain: every call completes; cancel: every worker answers. */
	while (!pool_idle_locked(pool) && !pool->completer_done)
		knitk__pool_wait_passive_locked(pool);
	pthread_mutex_unlock(&pool->lock);
	if (pool->completer_started)
		pool_stop_workers(pool);
	return 0;
}

KNITK_EXPORT void knitk_pool_destroy(struct knitk_pool *pool)
{
	unsigned int s, w, i;
	bool last;

	if (!pool)
		return;
	if (pool->completer_started) {
		knitk_pool_shutdown(pool, KNITK_SHUTDOWN_CANCEL);
		pthread_join(pool->completer, NULL);
	}
	pthread_mutex_lock(&pool->lock);
	pool->closed = true;
	pool->completer_done = true;
	/*
	 * A waiting thread may still hold the drainer role (the completer
	 * can exit under it once the worker deaths it handles leave none):
	 * let it finish before its consumers and knot go.  Nobody takes the
	 * role after completer_done; each release broadcasts pool->cond.
	 */
	while (pool->draining)
		pthread_cond_wait(&pool->cond, &pool->lock);
	pthread_mutex_unlock(&pool->lock);
	/*
	 * Leaving the host role wakes every worker still parked (-EPIPE):
	 * the ones not stopped because the pool failed to start.  Stopped
	 * workers have left their loops already.
	 */
	for (w = 0; pool->workers && w < pool->nr_workers; w++)
		knitk_consumer_destroy(pool->workers[w].ret);
	for (s = 0; pool->submitters && s < pool->nr_submitters; s++)
		for (w = 0; pool->submitters[s].producers && w < pool->nr_workers; w++)
			knitk_producer_destroy(pool->submitters[s].producers[w]);
	/* The monitor uses the host endpoint: stop it first. */
	knitk__monitor_stop(pool);
	knitk_endpoint_destroy(pool->ep);
	pool->ep = NULL;
	for (w = 0; pool->workers && w < pool->nr_workers; w++) {
		struct pool_worker *pw = &pool->workers[w];

		if (pw->thread_started)
			pthread_join(pw->thread, NULL);
		knitk_endpoint_destroy(pw->ep);
	}
	for (w = 0; pool->workers && w < pool->nr_workers; w++)
		if (pool->workers[w].pid > 0)
			knitk__spawn_reap(pool->workers[w].pid);
	for (w = 0; pool->workers && w < pool->nr_workers; w++)
		if (pool->workers[w].pidfd >= 0)
			close(pool->workers[w].pidfd);
	if (pool->monitor_efd >= 0)
		close(pool->monitor_efd);
	/* After every endpoint that signalled it is gone. */
	if (pool->event_fd_owned)
		close(pool->event_fd);
	for (s = 0; pool->submitters && s < pool->nr_submitters; s++) {
		knitk__steal_free_slot(&pool->submitters[s]);
		free(pool->submitters[s].producers);
		pthread_mutex_destroy(&pool->submitters[s].lock);
	}
	free(pool->submitters);
	free(pool->exe);
	pthread_mutex_lock(&pool->lock);
	for (i = 0; pool->entries && i < pool->nr_workers * KNITK_LANES; i++)
		if (pool->entries[i].call) {
			knitk__call_complete_locked(pool, pool->entries[i].call,
						    -ECANCELED, NULL, 0);
			knitk__call_unref_locked(pool->entries[i].call);
			pool->entries[i].call = NULL;
		}
	free(pool->entries);
	free(pool->workers);
	pool->entries = NULL;
	pool->workers = NULL;
	pool->destroyed = true;
	last = !pool->handles;
	pthread_mutex_unlock(&pool->lock);
	if (last)
		knitk__pool_free(pool);
}

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
