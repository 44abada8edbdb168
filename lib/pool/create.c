// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The pool's start: options checked and defaulted, the knot and its
 * endpoints, the submitters' producers, the workers (threads, or processes
 * through spawn.c), the death watchers and the completer.  The top of
 * lib/pool: it depends on every file below, nothing depends on it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool_internal.h"
#include "process.h"
#include "slot.h"
#include "../sized.h"

_Static_assert(offsetof(struct knitk_pool_opts, size) == 0 &&
	       sizeof(struct knitk_pool_opts) == KNITK_POOL_OPTS_SIZE_VER1,
	       "knitk_pool_opts layout");
KNITK__SIZED_VER0(knitk_call_opts, KNITK_CALL_OPTS_SIZE_VER0);
KNITK__SIZED_VER0(knitk_pool_stats, KNITK_POOL_STATS_SIZE_VER2);
KNITK__SIZED_VER0(knitk_worker_info, KNITK_WORKER_INFO_SIZE_VER2);

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
			ret = knitk__spawn_worker(pool, w, false);
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
		/*
		 * A word per entry (slot.h), in the region of abort bits,
		 * then a box per entry for its result (struct slot_box).
		 */
		.abort_bits = pool->nr_workers * KNITK_LANES *
			      (64 + 8 * slot_box_size(pool->nr_workers * KNITK_LANES)),
		.arena_bytes = pool->opts.arena_bytes,
		/* The claimants' size, recorded: they are checked against it. */
		.region_lanes = pool->steal_g,
	};
	struct knitk_layout layout;
	unsigned int s, w;
	void *base;
	size_t i;
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
	pool->slots = (_Atomic uint64_t *)((char *)base + layout.abort_off);
	pool->box_size = slot_box_size_of(geom.abort_bits,
					  (uint64_t)pool->nr_workers * KNITK_LANES);
	pool->boxes = (unsigned char *)(pool->slots + pool->nr_workers * KNITK_LANES);
	/* Each entry's first call, of generation gen + 1, is queued. */
	for (i = 0; i < (size_t)pool->nr_workers * KNITK_LANES; i++)
		atomic_init(&pool->slots[i], slot_word(pool->entries[i].gen, 0, SLOT_FREE));
	knitk__spin_init(&pool->spin, pool->ep, knitk__spin_cpus(pool->ep));
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
