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
 * A batch (knitk_pool_submit_batch) takes these steps for a run of up to
 * 64 calls at once: one hold of pool->lock registers them all, one
 * submitter lock stages them lane by lane and publishes each worker's
 * lanes with one store, and one ring covers every worker published to.
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
	free(pool->held);
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
	if (o->flags & ~(KNITK_POOL_RESPAWN | KNITK_POOL_FALLBACK_FUTEX))
		return -EINVAL;
	/* A fallback the caller forbids by forcing the module. */
	if ((o->flags & KNITK_POOL_FALLBACK_FUTEX) && (o->knot_flags & KNITK_KNOT_KMOD))
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
		/* Serving only once set up; else its error fails the create. */
		pthread_mutex_lock(&pool->lock);
		while (!pw->setup)
			pthread_cond_wait(&pool->cond, &pool->lock);
		ret = pw->setup < 0 ? pw->setup : 0;
		if (!ret) {
			pw->state = WORKER_RUNNING;
			atomic_store(&pw->alive, 1);
		}
		pthread_mutex_unlock(&pool->lock);
		if (ret)
			return ret;
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
		/* The claimants' size, recorded: they are checked against it. */
		.region_lanes = pool->steal_g,
	};
	struct knitk_layout layout;
	unsigned int s, w;
	void *base;
	int ret;

	ret = knitk_endpoint_create(&geom, pool->opts.knot_flags |
				    (pool->opts.flags & KNITK_POOL_FALLBACK_FUTEX ?
				     KNITK_KNOT_FALLBACK_FUTEX : 0), &pool->ep);
	if (ret)
		return ret;
	ret = knitk_endpoint_join(pool->ep, KNITK_ROLE_HOST, 0);
	if (ret < 0)
		return ret;
	knitk_endpoint_base(pool->ep, &base);
	knitk_endpoint_layout(pool->ep, &layout, NULL);
	pool->abort_words = (_Atomic uint64_t *)((char *)base + layout.abort_off);
	knitk__spin_init(&pool->spin, pool->ep, knitk__spin_cpus());
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
	/* Any smaller power of two than the largest legal g is legal too. */
	if (pool->steal && !pool->opts.steal_region && pool->steal_g > POOL_STEAL_DEF_REGION)
		pool->steal_g = POOL_STEAL_DEF_REGION;
	pool->nr_workers = pool->opts.nr_workers;
	pool->nr_submitters = pool->opts.nr_submitters;
	pool->monitor_efd = -1;
	pool->host_pidfd = -1;
	pool->host_pipe[0] = -1;
	pool->host_pipe[1] = -1;
	pool->lifeline_fd = -1;
	pool->event_fd = -1;
	pthread_mutex_init(&pool->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pool->cond, &ca);
	pthread_cond_init(&pool->ccond, &ca);
	pthread_condattr_destroy(&ca);
	pool->workers = calloc(pool->nr_workers, sizeof(*pool->workers));
	/* Before any failure: the destroy below closes every pidfd >= 0. */
	for (w = 0; pool->workers && w < pool->nr_workers; w++)
		pool->workers[w].pidfd = -1;
	pool->entries = calloc((size_t)pool->nr_workers * KNITK_LANES,
			       sizeof(*pool->entries));
	pool->submitters = calloc(pool->nr_submitters, sizeof(*pool->submitters));
	if (!pool->workers || !pool->entries || !pool->submitters ||
	    knitk__pool_held_init(pool)) {
		ret = -ENOMEM;
		goto fail;
	}
	/* From 0, but near the wrap in a test of task ids (pool_hooks.h). */
	gen_base = POOL_GEN_BASE();
	for (i = 0; i < (size_t)pool->nr_workers * KNITK_LANES; i++)
		pool->entries[i].gen = gen_base;
	for (w = 0; w < pool->nr_workers; w++)
		atomic_init(&pool->workers[w].epoch, gen_base);
	if (pool->opts.kind == KNITK_WORKER_PROCESSES) {
		ret = pool_worker_exe(&pool->opts, &pool->exe);
		if (ret)
			goto fail;
	}
	ret = pool_setup(pool);
	if (!ret) {
		/* Leader/follower needs a way to end another thread's park. */
		pool->leader = knitk_doorbell_can_kick(pool->ep) == 1;
		pool->ring_wait = pool->leader && !pool->steal &&
				  knitk_doorbell_can_ring_wait(pool->ep) == 1;
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
 * A worker with room for a call of @co (pool->lock held): waits while
 * every eligible worker is at capacity, unless @may_wait is false
 * (-EBUSY then), and not past the call's deadline (-ETIMEDOUT then);
 * -ESHUTDOWN, -EPIPE, or -EAGAIN in event mode.
 */
static int pool_admit_locked(struct knitk_pool *pool,
			     const struct knitk_call_opts *co, bool may_wait)
{
	int w;

	for (;;) {
		if (pool->closed)
			return -ESHUTDOWN;
		w = pool_pick_locked(pool, co);
		if (w >= 0)
			return w;
		if (!knitk__pool_has_workers_locked(pool, co))
			return -EPIPE;
		/* An event loop never waits in the library: it reaps first. */
		if (atomic_load_explicit(&pool->evmode, memory_order_relaxed))
			return -EAGAIN;
		if (!may_wait)
			return -EBUSY;
		POOL_HOOK(pool, POOL_HOOK_SUBMIT_WAIT, 0);
		if (knitk__pool_wait_passive_until_locked(pool, co ? co->deadline_ns : 0))
			return -ETIMEDOUT;
	}
}

/*
 * Register a new call of @co in flight on worker @w, in a handle from the
 * cache (NULL: out of memory).
 */
static struct knitk_call *pool_enter_locked(struct knitk_pool *pool,
					    const struct knitk_call_opts *co,
					    bool reap, unsigned int w)
{
	struct pool_worker *pw = &pool->workers[w];
	struct knitk_call *call;
	struct pool_entry *e;
	unsigned int k;

	call = knitk__call_get_locked(pool);
	if (!call)
		return NULL;
	/*
	 * The caller's, the entry's and the submit's own: once registered a
	 * call can complete (a death, a cancel) and, in event mode, be reaped
	 * and released by another thread before its submit returns.
	 */
	atomic_store_explicit(&call->refs, 3, memory_order_relaxed);
	call->no_reap = !reap;
	call->deadline_ns = co ? co->deadline_ns : 0;
	k = (unsigned int)__builtin_ctzll(~pw->busy);
	pw->busy |= 1ULL << k;
	pw->inflight++;
	call->worker = w;
	call->ran = -1;
	call->entry = w * KNITK_LANES + k;
	e = &pool->entries[call->entry];
	e->gen++;
	e->call = call;
	atomic_store_explicit(&call->state, CALL_INFLIGHT, memory_order_relaxed);
	call->epoch = atomic_load(&pw->epoch);
	call->task_id = pool_task_id(call->entry, e->gen);
	pool->handles++;
	pool->stats.submitted++;
	return call;
}

/*
 * Register up to @nr calls (@cos[i] their options) in one hold of
 * pool->lock; returns how many, or the error of the first.  Only the
 * first may wait for room: the caller publishes what was registered
 * before anything waits for room again, since the calls that free it may
 * be these very ones.
 */
static int pool_register(struct knitk_pool *pool,
			 const struct knitk_call_opts *const *cos, unsigned int nr,
			 bool reap, struct knitk_call **calls)
{
	unsigned int i;
	int w = 0;

	pthread_mutex_lock(&pool->lock);
	for (i = 0; i < nr; i++) {
		w = pool_admit_locked(pool, cos[i], i == 0);
		if (w < 0)
			break;
		calls[i] = pool_enter_locked(pool, cos[i], reap, (unsigned int)w);
		if (!calls[i]) {
			w = -ENOMEM;
			break;
		}
	}
	pthread_mutex_unlock(&pool->lock);
	return i ? (int)i : w;
}

/* Take a submitter: the thread's own by hash, else any free one. */
unsigned int knitk__submitter_acquire(struct knitk_pool *pool)
{
	unsigned int S = pool->nr_submitters, i, s;
	uint32_t hash = (uint32_t)((uintptr_t)pthread_self() >> 6) * 2654435761U;
	/* The hash scaled to [0, S): a multiply, no division on every call. */
	unsigned int home = (unsigned int)(((uint64_t)hash * S) >> 32);

	for (i = 0, s = home; i < S; i++, s = s + 1 == S ? 0 : s + 1)
		if (!pthread_mutex_trylock(&pool->submitters[s].lock))
			return s;
	pthread_mutex_lock(&pool->submitters[home].lock);
	return home;
}

/* The request header of registered @call. */
static struct knitk_lane_header pool_request(const struct knitk_call *call,
					     uint32_t fn)
{
	return (struct knitk_lane_header){
		.function_id = fn,
		.task_id = call->task_id,
		.deadline_ns = call->deadline_ns,
		.abort_id = call->entry + 1,
	};
}

/*
 * Publish the requests of registered @calls (@subs their functions and
 * argument bytes), in order: per round one submitter lock, the requests
 * staged lane by lane, one pub store per worker's mailbox (L2) and one
 * ring of every worker published to (S2).  With @defer, the last ring
 * is left to the caller's wait instead (*@defer: the doorbells to ring),
 * which rings and parks in one syscall (S9).  Returns how many are done:
 * all @nr, or the index of the first that was not published, with the
 * reason in *@err.  A call whose worker died first counts as done: the
 * death handler completes it (C3).
 */
static unsigned int pool_publish(struct knitk_pool *pool,
				 struct knitk_call *const *calls,
				 const struct knitk_submission *subs,
				 unsigned int nr, uint64_t *defer, int *err)
{
	uint64_t lanes[KNITK_MAX_WORKERS], progress, rung, m;
	struct knitk_producer **producers;
	struct knitk_lane_header h;
	struct pool_worker *pw;
	unsigned int s, i = 0, w;
	int ret = 0;

	for (; pool->steal && i < nr; i++) {
		h = pool_request(calls[i], subs[i].fn);
		ret = knitk__steal_publish(pool, calls[i], &h, subs[i].in, subs[i].len);
		if (ret) {
			*err = ret;
			return i;
		}
	}
	while (i < nr) {
		/*
		 * Sampled before the attempt: a completion that frees room
		 * after our send failed has bumped it by the time we wait.
		 * Acquire pairs with the release in pool_progress_locked, so
		 * room freed before a bump we see is seen by the send.
		 */
		progress = atomic_load_explicit(&pool->progress, memory_order_acquire);
		s = knitk__submitter_acquire(pool);
		producers = pool->submitters[s].producers;
		rung = 0;
		for (; i < nr; i++) {
			pw = &pool->workers[calls[i]->worker];
			w = pw->id;
			/*
			 * seq_cst pairs with the stores in handle_death, which
			 * then cycles every submitter lock: either we see the
			 * worker dead (or reborn: another epoch) here, or our
			 * publish is done before the death handler resets the
			 * worker's request mailboxes.  In both cases the death
			 * handler completes the call (C3).
			 */
			if (!atomic_load_explicit(&pw->alive, memory_order_seq_cst) ||
			    atomic_load_explicit(&pw->epoch, memory_order_seq_cst) !=
			    calls[i]->epoch)
				continue;
			h = pool_request(calls[i], subs[i].fn);
			ret = knitk_producer_stage(producers[w], &h,
						   subs[i].len ? subs[i].in : NULL,
						   subs[i].len);
			if (ret < 0)
				break;
			if (!(rung & (1ULL << w)))
				lanes[w] = 0;
			lanes[w] |= 1ULL << ret;
			rung |= 1ULL << w;
		}
		/* L2: one release store of each pub word publishes its lanes. */
		for (m = rung; m; m &= m - 1) {
			w = (unsigned int)__builtin_ctzll(m);
			knitk_lane_publish_batch(producers[w], lanes[w]);
		}
		pthread_mutex_unlock(&pool->submitters[s].lock);
		/* S2, after every publish: a no-op for the workers awake. */
		if (rung && defer && i == nr)
			*defer |= rung;
		else if (rung)
			knitk_doorbell_ring(pool->ep, rung);
		if (i == nr)
			break;
		if (ret != -ENOSPC && ret != -EAGAIN) {
			*err = ret;
			return i;
		}
		pw = &pool->workers[calls[i]->worker];
		POOL_HOOK(pool, POOL_HOOK_PUBLISH_FULL, pw->id);
		if (atomic_load_explicit(&pool->evmode, memory_order_relaxed)) {
			*err = -EAGAIN;
			return i;
		}
		/*
		 * Backpressure: the worker has not yet retired earlier
		 * requests' arena bytes (ours just published among them).  It
		 * does so before answering them, so wait for a completion
		 * batch since our sample (or its death), but not past the
		 * call's deadline: then it is not published at all.
		 */
		ret = 0;
		pthread_mutex_lock(&pool->lock);
		while (!ret &&
		       progress == atomic_load_explicit(&pool->progress, memory_order_relaxed) &&
		       atomic_load(&pw->alive))
			ret = knitk__pool_wait_passive_until_locked(pool,
								    calls[i]->deadline_ns);
		pthread_mutex_unlock(&pool->lock);
		if (ret) {
			*err = ret;
			return i;
		}
	}
	return nr;
}

/*
 * Registered calls that were never published: withdraw them with @err
 * (not counted as submitted) and give their entries back (the caller
 * never sees their handles).
 */
static void pool_unpublished(struct knitk_pool *pool,
			     struct knitk_call *const *calls, unsigned int nr,
			     int err)
{
	unsigned int i;

	pthread_mutex_lock(&pool->lock);
	for (i = 0; i < nr; i++) {
		knitk__call_withdraw_locked(pool, calls[i], err);
		if (pool->entries[calls[i]->entry].call == calls[i])
			knitk__entry_free_locked(pool, calls[i]->entry);
		knitk__call_unref_locked(calls[i]);	/* the caller's */
		knitk__call_unref_locked(calls[i]);	/* the submit's */
	}
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
}

/*
 * A submission's checks; its options copied to @o, *@co the copy (NULL:
 * none given).
 */
static int submission_check(struct knitk_pool *pool, uint32_t fn,
			    const void *in, size_t len,
			    const struct knitk_call_opts *opts,
			    struct knitk_call_opts *o,
			    const struct knitk_call_opts **co)
{
	int ret;

	*co = NULL;
	if (opts) {
		ret = knitk__sized_in(o, sizeof(*o), KNITK_CALL_OPTS_SIZE_VER0, opts);
		if (ret)
			return ret;
		*co = o;
	}
	if (!pool || fn >= pool->table.nr_tasks || (len && !in))
		return -EINVAL;
	if (*co && ((*co)->reserved || ((*co)->flags & ~KNITK_CALL_WORKER) ||
		    (((*co)->flags & KNITK_CALL_WORKER) &&
		     ((*co)->worker >= pool->nr_workers || pool->steal))))
		return -EINVAL;
	if (len > pool->max_len)
		return -EMSGSIZE;
	return 0;
}

/*
 * Published @calls: the submit lets go of its own references, without
 * pool->lock while the caller's or the entry's remains (the lock is taken
 * only for a call already completed and released meanwhile, event mode).
 */
static void pool_published(struct knitk_pool *pool,
			   struct knitk_call *const *calls, unsigned int nr)
{
	unsigned int i;
	bool locked = false;

	for (i = 0; i < nr; i++) {
		if (knitk__call_unref_unless_last(calls[i]))
			continue;
		if (!locked)
			pthread_mutex_lock(&pool->lock);
		locked = true;
		knitk__call_unref_locked(calls[i]);
	}
	if (locked)
		pthread_mutex_unlock(&pool->lock);
}

/*
 * Submit @nr checked calls in order: registered a run at a time, each run
 * published before the next may wait for room.  Returns how many were
 * submitted (their handles in @calls), or the first one's error.
 */
static int pool_submit_calls(struct knitk_pool *pool,
			     const struct knitk_submission *subs,
			     const struct knitk_call_opts *const *cos,
			     unsigned int nr, bool reap, uint64_t *defer,
			     struct knitk_call **calls)
{
	unsigned int done = 0, n, k;
	int ret = 0, err = 0;

	while (done < nr) {
		ret = pool_register(pool, cos + done, nr - done, reap, calls + done);
		if (ret < 0)
			break;
		n = (unsigned int)ret;
		k = pool_publish(pool, calls + done, subs + done, n, defer, &err);
		pool_published(pool, calls + done, k);
		done += k;
		if (k < n) {
			pool_unpublished(pool, calls + done, n - k, err);
			/* Gone: the caller is never left a freed handle. */
			memset(calls + done, 0, (n - k) * sizeof(*calls));
			ret = err;
			break;
		}
	}
	return done ? (int)done : ret;
}

int knitk__pool_submit(struct knitk_pool *pool, uint32_t fn, const void *in,
		       size_t len, const struct knitk_call_opts *opts, bool reap,
		       uint64_t *defer, struct knitk_call **callp)
{
	struct knitk_submission sub = { .fn = fn, .in = in, .len = len };
	const struct knitk_call_opts *co;
	struct knitk_call_opts o;
	int ret;

	if (!callp)
		return -EINVAL;
	ret = submission_check(pool, fn, in, len, opts, &o, &co);
	if (ret)
		return ret;
	ret = pool_submit_calls(pool, &sub, &co, 1, reap, defer, callp);
	return ret < 0 ? ret : 0;
}

KNITK_EXPORT int knitk_pool_submit(struct knitk_pool *pool, uint32_t fn,
				   const void *in, size_t len,
				   const struct knitk_call_opts *opts,
				   struct knitk_call **callp)
{
	return knitk__pool_submit(pool, fn, in, len, opts, true, NULL, callp);
}

/*
 * Calls a batch takes at a time: the room of the copies of their options,
 * and how long one submitter lock is held.
 */
#define POOL_SUBMIT_RUN		KNITK_LANES

KNITK_EXPORT int knitk_pool_submit_batch(struct knitk_pool *pool,
					 const struct knitk_submission *subs,
					 unsigned int nr,
					 struct knitk_call **calls)
{
	struct knitk_call_opts o[POOL_SUBMIT_RUN];
	const struct knitk_call_opts *cos[POOL_SUBMIT_RUN];
	unsigned int done = 0, n, i;
	int ret = 0, k;

	if (!pool || !subs || !calls || !nr || nr > INT_MAX)
		return -EINVAL;
	while (done < nr && !ret) {
		n = nr - done < POOL_SUBMIT_RUN ? nr - done : POOL_SUBMIT_RUN;
		/* Checked first: the batch stops at its first bad entry. */
		for (i = 0; i < n; i++) {
			const struct knitk_submission *sub = &subs[done + i];

			ret = sub->reserved ? -EINVAL :
			      submission_check(pool, sub->fn, sub->in, sub->len,
					       sub->opts, &o[i], &cos[i]);
			if (ret)
				break;
		}
		if (!i)
			break;
		k = pool_submit_calls(pool, subs + done, cos, i, true, NULL, calls + done);
		if (k < 0)
			return done ? (int)done : k;
		done += (unsigned int)k;
		if ((unsigned int)k < i)
			break;
	}
	return done ? (int)done : ret;
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
	for (w = 0; pool->workers && w < pool->nr_workers; w++) {
		if (pool->workers[w].pid > 0)
			knitk__spawn_reap(pool->workers[w].pid);
		/* A death handled after the completer was gone. */
		if (pool->workers[w].dead_pid > 0)
			knitk__spawn_reap_dead(pool->workers[w].dead_pid);
	}
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
