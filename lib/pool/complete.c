// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The drainer role: consuming every return mailbox, completing handles and
 * handling worker deaths (crash attribution), held by one thread at a time
 * (pool->draining, under pool->lock, which also orders the hand-over of
 * the role's unlocked state: the consumers, death_seq, the host knot's
 * doorbell nonce).  Only the holder parks on the host doorbell: one park
 * covers every return mailbox (docs/protocol.md H1), and a worker's death
 * rings it too (death_seq).
 *
 * Leader/follower (whenever the backend can kick: futex, or a module with
 * KNITK_FEATURE_KICK): a thread waiting for a result takes the role when
 * it is free and parks itself, so a result wakes its waiter directly;
 * other waiters sleep on pool->cond, broadcast after each batch
 * and each time the role is left, so one of them takes it over and drains
 * (and re-checks) before it parks: nothing published meanwhile is missed.
 * The completer thread holds the role only while nobody waits (see
 * completer_main).  The park of the role's holder is ended for a new
 * waiter or an abort by knitk_doorbell_kick_self.  Without a kick (a module older
 * than KNITK_FEATURE_KICK) a parked host wakes only for work or a death:
 * there the completer keeps the role and waiters sleep on pool->cond.
 *
 * A thread waiting for its calls that holds the role takes results
 * without pool->lock and completes them at its next hold of it, the one
 * in which it looks at its calls anyway (struct pool_held): one hold per
 * round.  A death is handled only after those held results completed.
 *
 * A death of worker w (docs/protocol.md C3, C4): stop dispatching to w;
 * cycle every submitter lock so no submitter is between its liveness check and
 * its publish; take the results w published before it died; complete every
 * call still held by w with -EOWNERDEAD and free its entries (no task id
 * leaks); then reset w's request mailboxes by acknowledging every pending
 * lane as a stand-in consumer (their calls have completed; this frees their
 * arena slots), and, with KNITK_POOL_RESPAWN, start a new process as worker
 * w: those last two by the completer (aftercare_locked), so that a waiter
 * that handled the death returns as soon as its call completed.  The new worker builds its consumers from the shared ack and free words
 * we left, and its producer from a return mailbox we have fully drained:
 * half-consumed lanes of the dead worker are neither lost (their calls
 * completed) nor run twice.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pool_internal.h"

struct result {
	uint64_t task_id;
	int status;
	bool stop;
	void *data;		/* a malloc copy; NULL: @len bytes in @small */
	size_t len;
	unsigned char small[POOL_SMALL_RESULT];
};

/*
 * Results a waiting drainer took from worker @w's return mailbox (lanes
 * acknowledged) and completes at its next hold of pool->lock, the one it
 * takes anyway to look at its calls (knitk__pool_held_apply_locked): one
 * hold per round instead of two.  Owned by the drainer role.
 */
struct pool_held {
	unsigned int w, n;
	struct result res[KNITK_LANES];
};

/* Complete the decoded results of worker @w (pool->lock held). */
static void results_apply_locked(struct knitk_pool *pool, unsigned int w,
				 struct result *res, unsigned int n)
{
	struct pool_worker *pw = &pool->workers[w];
	uint64_t now = 0;
	unsigned int i;

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
		/* Stealing: any worker may answer any entry (T10). */
		e = pool->steal || idx / KNITK_LANES == w ?
		    &pool->entries[idx] : NULL;
		if (e && idx >= pool->nr_workers * KNITK_LANES)
			e = NULL;
		if (!e || !e->call || e->gen != gen) {
			/* Not ours, or its entry is gone: drop it. */
			pool->stats.stale++;
			free(r->data);
			continue;
		}
		pw->calls++;
		if (!call_done_locked(e->call) && e->call->deadline_ns) {
			if (!now)
				now = pool_now_ns();
			/* Past its deadline the call has expired: drop the result. */
			if (now >= e->call->deadline_ns)
				knitk__call_complete_locked(pool, e->call, -ETIMEDOUT, NULL, 0);
		}
		if (!r->data && r->len && !call_done_locked(e->call)) {
			/* Small: into the handle, which nobody reads yet. */
			memcpy(e->call->small, r->small, r->len);
			r->data = e->call->small;
		}
		/* Set before the completion publishes the handle (C5). */
		if (!call_done_locked(e->call))
			e->call->ran = (int)w;
		knitk__call_complete_locked(pool, e->call, r->status, r->data, r->len);
		knitk__entry_free_locked(pool, idx);
	}
	pool_progress_locked(pool);
}

static void results_apply(struct knitk_pool *pool, unsigned int w,
			  struct result *res, unsigned int n)
{
	pthread_mutex_lock(&pool->lock);
	results_apply_locked(pool, w, res, n);
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
}

int knitk__pool_held_init(struct knitk_pool *pool)
{
	pool->held = calloc(1, sizeof(*pool->held));
	return pool->held ? 0 : -ENOMEM;
}

void knitk__pool_held_apply_locked(struct knitk_pool *pool)
{
	struct pool_held *h = pool->held;

	if (!h->n)
		return;
	results_apply_locked(pool, h->w, h->res, h->n);
	h->n = 0;
}

/* Before a death is handled: w's results taken before it died come first. */
static void held_flush(struct knitk_pool *pool)
{
	if (!pool->held->n)
		return;
	pthread_mutex_lock(&pool->lock);
	knitk__pool_held_apply_locked(pool);
	pthread_cond_broadcast(&pool->cond);
	pthread_mutex_unlock(&pool->lock);
}

/*
 * Take the @pending lanes of worker @w's return mailbox: into the held
 * results with @defer (when they are free), else completed at once.
 * Out of line: an empty poll of the mailboxes never sets up its frame.
 */
static __attribute__((noinline)) unsigned int
take_results(struct knitk_pool *pool, unsigned int w, uint64_t pending,
	     bool defer)
{
	struct pool_worker *pw = &pool->workers[w];
	struct result stack_res[KNITK_LANES], *res = stack_res;
	uint64_t lanes = 0;
	unsigned int n = 0;
	int lane;

	defer = defer && !pool->held->n;
	if (defer)
		res = pool->held->res;
	while ((lane = knitk_lane_next(pw->ret, &pending)) >= 0) {
		struct result *r = &res[n++];
		struct knitk_msg msg = { .size = sizeof(msg) };
		int err = knitk_lane_decode(pw->ret, (unsigned int)lane, &msg);

		lanes |= 1ULL << lane;
		r->task_id = msg.header.task_id;
		r->stop = false;
		r->data = NULL;
		r->len = 0;
		if (err) {
			r->status = err;
			continue;
		}
		r->stop = msg.header.function_id == POOL_FN_STOP;
		r->status = (int)(int32_t)msg.header.user;
		if (msg.len && msg.len <= sizeof(r->small)) {
			/* The copy of the result, before the lane is freed. */
			memcpy(r->small, msg.data, msg.len);
			r->len = msg.len;
		} else if (msg.len) {
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
	 * freed in results_apply_locked: a worker never holds more result lanes
	 * than it has entries in flight (POOL_CAP).
	 */
	knitk_lane_ack(pw->ret, lanes);
	if (defer) {
		pool->held->w = w;
		pool->held->n = n;
		POOL_HOOK(pool, POOL_HOOK_HELD, w);
	} else {
		results_apply(pool, w, res, n);
	}
	return n;
}

/* Consume worker @w's return mailbox; returns the results taken. */
static inline unsigned int drain_worker(struct knitk_pool *pool, unsigned int w,
					bool defer)
{
	struct pool_worker *pw = &pool->workers[w];
	uint64_t pending;

	if (!pw->ret || knitk_lane_scan(pw->ret, &pending) <= 0)
		return 0;
	return take_results(pool, w, pending, defer);
}

void knitk__completer_drain_worker(struct knitk_pool *pool, unsigned int w)
{
	while (drain_worker(pool, w, false))
		;
}

/*
 * Acknowledge every pending lane of worker @w's request mailboxes and free
 * their arena bytes (their calls have completed), from the submitter
 * side's record of what is outstanding: w may have died between the two
 * stores of an acknowledgement (knitk_producer_reset_consumer).  The dead
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
	knitk__completer_drain_worker(pool, w);
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
	knitk__completer_drain_worker(pool, w);

	if (pool->steal)
		nr_tids = knitk__steal_take_dead(pool, w, tids);
	pthread_mutex_lock(&pool->lock);
	for (busy = pool->steal ? 0 : pw->busy; busy; busy &= busy - 1) {
		unsigned int idx = w * KNITK_LANES + (unsigned int)__builtin_ctzll(busy);

		if (pool->entries[idx].call)
			knitk__call_complete_locked(pool, pool->entries[idx].call,
						    -EOWNERDEAD, NULL, 0);
		knitk__entry_free_locked(pool, idx);
	}
	/* Stealing: the calls w had claimed and not answered (T10). */
	for (i = 0; i < nr_tids; i++) {
		uint32_t idx = (uint32_t)tids[i], gen = (uint32_t)(tids[i] >> 32);
		struct pool_entry *e = &pool->entries[idx];

		if (idx >= pool->nr_workers * KNITK_LANES || !e->call || e->gen != gen)
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
	 * (aftercare_locked), in this order: the drainer may be a thread
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
		ret = knitk__spawn_worker(pool, w);
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
		return;
	}
	pw->state = WORKER_RUNNING;
	atomic_store_explicit(&pw->alive, 1, memory_order_seq_cst);
	pool->stats.respawns++;
	/*
	 * The new worker died before it was RUNNING: a drainer may have
	 * taken that death for the stale bit of its predecessor's and
	 * passed over it.  Have it looked at again: seq_cst pairs with the
	 * drainer's load in deaths_pending after its prepare, like the
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
static void aftercare_locked(struct knitk_pool *pool)
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
static bool deaths_pending(struct knitk_pool *pool)
{
	uint32_t seq;

	knitk_endpoint_deaths(pool->ep, &seq, NULL);
	/* seq_cst pairs with the store in respawn_locked. */
	return seq != pool->death_seq ||
	       atomic_load_explicit(&pool->recheck, memory_order_seq_cst);
}

/* Returns true when some death was handled. */
static bool check_deaths(struct knitk_pool *pool)
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
	held_flush(pool);
	pool->death_seq = seq;
	dead |= again;
	for (w = 0; w < pool->nr_workers; w++)
		if (dead & (1ULL << w))
			handle_death(pool, w);
	return true;
}

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

/*
 * Drain every return mailbox and handle deaths; returns the work done.
 * @defer: a waiting drainer's round, which may leave one worker's results
 * held for its next hold of pool->lock.
 */
static unsigned int drain_all(struct knitk_pool *pool, bool defer)
{
	unsigned int w, n = 0;

	for (w = 0; w < pool->nr_workers; w++)
		n += drain_worker(pool, w, defer);
	if (check_deaths(pool))
		n++;
	return n;
}

/*
 * End the park of the drainer: a new waiter wants the role from the
 * completer, or a call the drainer may wait for completed without a
 * result (abort, cancel).  The kicks bump pairs with the drainer's
 * seq_cst load after its prepare (knitk__pool_drain_once, completer_drain): it
 * either sees the bump and does not sleep, or the kick's seq increment
 * comes after its prepare read seq and ends the wait.
 */
void knitk__pool_kick_drainer_locked(struct knitk_pool *pool)
{
	if (!pool->leader || !pool->draining)
		return;
	atomic_fetch_add_explicit(&pool->kicks, 1, memory_order_seq_cst);
	knitk_doorbell_kick_self(pool->ep);
}

/*
 * A thread waiting for progress it does not drain for itself (a free
 * entry, arena space, shutdown): the completer takes the role at once.
 */
void knitk__pool_wait_passive_locked(struct knitk_pool *pool)
{
	knitk__pool_wait_passive_until_locked(pool, 0);
}

/*
 * The same, but not past @deadline_ns (absolute CLOCK_MONOTONIC, 0 or
 * KNITK_WAIT_FOREVER: none): -ETIMEDOUT, without waiting, once it has
 * passed; else 0 after one wait (progress, or the deadline reached: the
 * caller looks at its condition, then calls again).
 */
int knitk__pool_wait_passive_until_locked(struct knitk_pool *pool,
					  uint64_t deadline_ns)
{
	bool timed = deadline_ns && deadline_ns != KNITK_WAIT_FOREVER;
	struct timespec ts;

	if (timed) {
		if (pool_now_ns() >= deadline_ns)
			return -ETIMEDOUT;
		ts.tv_sec = (time_t)(deadline_ns / 1000000000ULL);
		ts.tv_nsec = (long)(deadline_ns % 1000000000ULL);
	}
	pool->passive++;
	pthread_cond_signal(&pool->ccond);
	/* pool->cond runs on CLOCK_MONOTONIC (knitk_pool_create). */
	if (timed)
		pthread_cond_timedwait(&pool->cond, &pool->lock, &ts);
	else
		pthread_cond_wait(&pool->cond, &pool->lock);
	pool->passive--;
	return 0;
}

/*
 * One round of a waiting thread that holds the drainer role: take what
 * is there, else spin boundedly, else park on the host doorbell until a
 * result, a death, a kick or @deadline_ns.  @k0: pool->kicks read under
 * pool->lock when the caller last looked at its calls.  @deadline_ns 0:
 * one look, no spin, no park.  Results taken may be held: the caller
 * completes them with knitk__pool_held_apply_locked as soon as it holds
 * pool->lock again, before it leaves the role.  *@ring: doorbells our
 * caller published to and has not rung yet; the park rings them in the
 * same syscall (S9), and clears *@ring.
 */
int knitk__pool_drain_once(struct knitk_pool *pool, unsigned int k0,
			   uint64_t deadline_ns, uint64_t *ring)
{
	uint64_t i, spin;
	bool early = false;
	uint32_t seq;
	int ret;

	if (!deadline_ns) {
		drain_all(pool, true);
		return 0;
	}
	/*
	 * With a ring due, the worker has not been woken yet: no spin of
	 * ours, the ring-then-wait spins in the kernel while it runs (S8).
	 * The spin ends for what would end the park: a kick (an abort, a
	 * waiter for the role) and the deadline, read every
	 * POOL_SPIN_CLOCK rounds (a clock read costs more than a poll).
	 */
	spin = *ring ? 0 : pool->opts.spin;
	for (i = 0; i <= spin; i++) {
		if (drain_all(pool, true))
			return 0;
		early = atomic_load_explicit(&pool->kicks, memory_order_relaxed) != k0 ||
			((i & (POOL_SPIN_CLOCK - 1)) == POOL_SPIN_CLOCK - 1 &&
			 deadline_ns != KNITK_WAIT_FOREVER && pool_now_ns() >= deadline_ns);
		if (early)
			break;
		pool_spin_relax(&pool->spin, (unsigned int)i);
	}
	/*
	 * Our calls may wait for a stopped searcher: see to them (T14), also
	 * when the spin ended early (a waiter polling with short deadlines).
	 */
	if (pool->steal)
		knitk__steal_rescue(pool);
	if (early)
		return 0;
	if (knitk_doorbell_prepare(pool->ep, &seq))
		return -EPIPE;
	/*
	 * After the seq_cst flag store: a death or a kick before prepare is
	 * seen here; one after it moves seq and ends the wait.
	 */
	if (deaths_pending(pool) ||
	    atomic_load_explicit(&pool->kicks, memory_order_seq_cst) != k0) {
		knitk_doorbell_cancel(pool->ep);
		return 0;
	}
	/* The ring is sent whether or not the wait sleeps. */
	ret = knitk_doorbell_ring_wait(pool->ep, *ring, seq, deadline_ns);
	*ring = 0;
	/*
	 * What woke us, at once: a death's calls complete in this round,
	 * not after another hold of pool->lock and another look.
	 */
	if (!ret)
		drain_all(pool, true);
	return ret;
}

/*
 * The reaper's round (events.c): drain; if that found nothing, arm the
 * host doorbell (its sleeping flag stays set when we return, so the next
 * ring wakes the event fd) and look once more.  Returns the work done;
 * 0 leaves the doorbell armed.
 */
unsigned int knitk__pool_drain_or_arm(struct knitk_pool *pool)
{
	unsigned int n;
	uint32_t seq;

	/* Awake while we drain: rings meanwhile are suppressed, not sent. */
	knitk_doorbell_cancel(pool->ep);
	n = drain_all(pool, false);
	if (n || knitk_doorbell_prepare(pool->ep, &seq))
		return n;
	/*
	 * Pairs with the fence in knitk_doorbell_ring: a result published
	 * before our flag store is found by this look, one after it finds
	 * the flag and wakes the fd.  Deaths: check_deaths reads death_seq
	 * after the flag store.
	 */
	atomic_thread_fence(memory_order_seq_cst);
	n = drain_all(pool, false);
	if (n)
		knitk_doorbell_cancel(pool->ep);
	return n;
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
		unsigned int k0;
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
		if (drain_all(pool, false)) {
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
		 * A death after check_deaths and before prepare would be
		 * hidden from the wait's own death_seq check, and a waiter
		 * that came before prepare kicked a seq we did not read:
		 * look again now that the sleeping flag is set.  So for
		 * event mode: knitk_pool_event_fd stores evmode before its
		 * kick, whose seq_cst doorbell CAS this prepare reads from
		 * when it saw the kicked seq.
		 */
		if (deaths_pending(pool) ||
		    (!ev && atomic_load_explicit(&pool->evmode, memory_order_relaxed)) ||
		    (pool->leader &&
		     (atomic_load_explicit(&pool->waiters, memory_order_seq_cst) ||
		      atomic_load_explicit(&pool->kicks, memory_order_seq_cst) != k0))) {
			knitk_doorbell_cancel(pool->ep);
			continue;
		}
		knitk_doorbell_wait(pool->ep, seq, KNITK_WAIT_FOREVER);
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
			aftercare_locked(pool);
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
				drain_all(pool, false);
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
