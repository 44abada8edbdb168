/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * libknitk pool internals: process workers' lifelines (lifeline.c), their
 * spawn, pidfd watch and the host watch they run (spawn.c).  Not
 * installed.
 */
#ifndef KNITK_POOL_PROCESS_H
#define KNITK_POOL_PROCESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "knitk.h"

struct knitk_pool;

/* lifeline.c */
int knitk__lifeline_start(struct knitk_pool *pool);
void knitk__lifeline_poke(struct knitk_pool *pool);
void knitk__lifeline_stop(struct knitk_pool *pool);
#define POOL_WATCH_ARMED	(1ULL << 32)
void knitk__death_notice(struct knitk_pool *pool, unsigned int w, uint32_t gen);
/* A worker's lifelines: the lifeline thread's, the parked drainer's. */
enum { LIFELINE_WATCH, LIFELINE_PARK, LIFELINE_NR };
/* A process worker's own lifelines. */
struct lifeline_hold {
	void *base;
	size_t bytes;
	struct lifeline *held[LIFELINE_NR];	/* locked by us, NULL: none */
};
/*
 * The lifeline words watched at once: by the lifeline thread, or by a
 * drainer's park on the host doorbell; @words their armed values.
 */
struct lifeline_park {
	_Atomic uint32_t *word[KNITK_MAX_WORKERS];
	unsigned int who[KNITK_MAX_WORKERS];
	uint32_t gen[KNITK_MAX_WORKERS];
	struct knitk_wait_word words[KNITK_MAX_WORKERS];
	unsigned int n;
};
unsigned int knitk__lifeline_park_words(struct knitk_pool *pool,
					struct lifeline_park *lp);
void knitk__lifeline_park_seen(struct knitk_pool *pool, struct lifeline_park *lp);
void knitk__lifeline_hold(struct lifeline_hold *h, int fd, unsigned int w);
void knitk__lifeline_drop(struct lifeline_hold *h);

/* spawn.c */
/* @respawn: a successor, which may take a queued call at once. */
int knitk__spawn_worker(struct knitk_pool *pool, unsigned int w, bool respawn);
void knitk__spawn_reap(pid_t pid);
int knitk__monitor_start(struct knitk_pool *pool);
void knitk__monitor_poke(struct knitk_pool *pool);
void knitk__monitor_stop(struct knitk_pool *pool);
void knitk__spawn_reap_dead(pid_t pid);
int knitk__spawn_take_pidfd(struct knitk_pool *pool, unsigned int w);
/* A process worker on the futex backend watching its host's pidfd. */
struct host_watch {
	struct knitk_endpoint *ep;
	int pidfd;
	int pipefd;			/* the host pipe's read end, or -1 */
	int efd;			/* ends the watch */
	pthread_t thread;
	bool started;
};
int knitk__host_watch_start(struct host_watch *hw, struct knitk_endpoint *ep,
			    int host_pidfd, int host_pipe);
void knitk__host_watch_stop(struct host_watch *hw);

#endif /* KNITK_POOL_PROCESS_H */
