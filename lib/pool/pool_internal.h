/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * libknitk pool internals: the pool, its workers, in-flight entries and
 * call handles.  Not installed.  The pool is built on the public headers
 * alone (<knitk.h>, <knitk_pool.h>): it never sees the core's internals.
 *
 * Locks: pool->lock guards every call handle's state (a completed one is
 * read without it: docs/protocol.md C5), the in-flight entry table, the
 * workers' counters and the drainer role; pool->cond is
 * broadcast on every change of those.  A submitter's lock guards its producers.  No
 * thread ever holds pool->lock while taking a submitter lock, or the reverse.
 */
#ifndef KNITK_POOL_INTERNAL_H
#define KNITK_POOL_INTERNAL_H

#include <sched.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_hooks.h"
#include "spin.h"

/*
 * In-flight calls per worker.  Every in-flight call of worker w holds at
 * most one lane of a request mailbox (s, w) and, later, one lane of w's
 * return mailbox, and an entry is freed only after its result lane was
 * acknowledged: so a submitter and a worker always find a free lane, and
 * the one lane above the cap carries the stop message.
 */
#define POOL_CAP		(KNITK_LANES - 1)
/* function_id of the stop message and of its reply. */
#define POOL_FN_STOP		0xffffffffU
/* Default geometry and spin budget. */
#define POOL_DEF_SUBMITTERS	4
#define POOL_DEF_INLINE		192
#define POOL_DEF_ARENA		(64 * 1024)
#define POOL_DEF_SPIN		256
/*
 * The largest default region of a stealing pool: a claim takes a region's
 * calls at once, so adjacent long calls run one after another on one
 * worker (regions of 4 against 16 are measured in the README).
 */
#define POOL_STEAL_DEF_REGION	4
/* Without a waiting thread this long, the completer drains (completer.c). */
#define POOL_LINGER_NS		10000000ULL
/* The environment variable that makes a process a worker. */
#define POOL_ENV		"KNITK_WORKER"

/* Results up to this size live in the handle (knitk_call.small). */
#define POOL_SMALL_RESULT	64
/* worker.c: a private-lane worker looks at every submitter each Nth round. */
#define POOL_SCAN_ALL		8

enum call_state { CALL_INFLIGHT = 1, CALL_DONE };

/* A call made by knitk_pool_loan (loan.c, docs/protocol.md C8). */
enum loan_state {
	LOAN_NONE = 0,		/* a call like any other (sent, or no loan) */
	LOAN_HELD,		/* unsent: its lane claimed, its bytes the caller's */
	LOAN_SENDING,		/* in knitk_pool_submit_loan: a call as any other */
};

/* Where a call's argument was staged in a mailbox's arena (in_arg.c). */
struct pool_arg {
	struct knitk_producer *prod;
	void *buf;
	size_t len;
	uint64_t placement;
	unsigned int sub, slot;		/* the submitter's mailbox, its slot */
};
#define POOL_ARG_LANES		2	/* a lane and its copy (R2) */

struct knitk_call {
	struct knitk_pool *pool;
	/*
	 * enum call_state; written under pool->lock, CALL_DONE with release
	 * once status, data and len are set (docs/protocol.md C5).
	 */
	_Atomic int state;
	int status;
	/*
	 * The user's, the in-flight entry's, the submit's.  Dropped under
	 * pool->lock, but for the submit's, which is dropped without it
	 * while another remains (knitk__call_unref_unless_last).
	 */
	_Atomic unsigned int refs;
	unsigned int worker;		/* stealing: the entry's bucket only */
	/* Stealing: the worker whose result or death completed it, or -1. */
	int ran;
	unsigned int entry;		/* index in pool->entries */
	uint32_t epoch;			/* the worker's incarnation */
	uint64_t task_id;
	uint64_t deadline_ns;
	size_t len;
	/* The result went straight to knitk_pool_call's buffer: no @data. */
	bool direct;
	/*
	 * SLOT_TAKE is set on the call's word (R6), at its registration or
	 * by a waiting thread, and not taken back: pool->lock.
	 */
	bool take;
	/* Threads waiting on the call's word (R6): pool->lock. */
	unsigned int own;
	/*
	 * enum loan_state; changed under pool->lock by the loan's owner
	 * only, who may read it without.  An unsent loan's lane is
	 * @loan_lane of submitter @loan_sub's mailbox to its worker
	 * (stealing: the slot's mailbox).
	 */
	uint8_t loan;
	unsigned int loan_sub, loan_lane;
	/* When its lane was claimed: pool_submitter.loans_claimed then. */
	uint64_t loan_no;
	/* Event mode: on pool->done_head's list, pool->lock (events.c). */
	bool queued;
	bool no_reap;			/* knitk_pool_call's own: never queued */
	struct knitk_call *done_prev, *done_next;
	void *data;			/* result bytes: small[], malloc or @arg */
	/*
	 * Where the argument was staged in the arena (in_arg.c), per lane
	 * that carries it (R2: a copy may go too), @nr_args stored last
	 * (release).  With @kept the result is in @args[@kept_arg] and the
	 * handle holds its slot (pool->lock, on pool->kept_head's list).
	 */
	struct pool_arg args[POOL_ARG_LANES];
	_Atomic unsigned int nr_args;
	unsigned int kept_arg;
	bool kept;
	struct knitk_call *kept_prev, *kept_next;
	struct knitk_call *next_free;	/* in pool->call_cache */
	unsigned char small[POOL_SMALL_RESULT];
};

/* One in-flight entry: index w * KNITK_LANES + k, abort bit of the same. */
struct pool_entry {
	struct knitk_call *call;	/* holds a reference */
	uint32_t gen;
};

enum worker_state {
	WORKER_NONE = 0,		/* not started, or gone */
	WORKER_RUNNING,			/* joined, serving */
	WORKER_STOPPED,			/* acknowledged the stop message */
	WORKER_DEAD,			/* died, not respawned */
};

struct pool_worker {
	struct knitk_pool *pool;
	unsigned int id;
	enum worker_state state;	/* pool->lock */
	/*
	 * Dispatchable: cleared (seq_cst) by the death handler before it
	 * cycles every submitter lock; a submitter re-reads it under its submitter
	 * lock before publishing (see pool_publish).
	 */
	_Atomic int alive;
	/* Incarnation: bumped with the same store discipline at each death. */
	_Atomic uint32_t epoch;
	unsigned int inflight;		/* pool->lock */
	uint64_t busy;			/* entries in use, pool->lock */
	uint64_t calls;			/* results returned, pool->lock */
	/* Thread workers. */
	pthread_t thread;
	bool thread_started;
	int setup;			/* pool->lock: 1 set up, < 0 failed, 0 not yet */
	struct knitk_endpoint *ep;	/* the worker's endpoint */
	/* Process workers. */
	pid_t pid;			/* pool->lock; 0 from its death on */
	/* The join generation of the process serving as w (pool->lock). */
	uint32_t join_gen;
	/*
	 * After a death, for the completer (pool->aftercare): the dead
	 * process to reap, and whether to start a new one (pool->lock).
	 */
	pid_t dead_pid;
	bool respawn;
	int pidfd;			/* futex: owned by the monitor once started */
	/*
	 * Futex backend: POOL_WATCH_ARMED | the join generation of the
	 * process serving as w while its death is not yet reported, else 0
	 * (knitk__death_notice).
	 */
	_Atomic uint64_t watch;
	/* The drainer's consumer of the worker's return mailbox. */
	struct knitk_consumer *ret;
};

struct pool_submitter {
	pthread_mutex_t lock;
	struct knitk_producer **producers;	/* per worker; stealing: one */
	/* Stealing (steal.c): the task id published in each lane ... */
	uint64_t lane_task[KNITK_LANES];
	/* ... and per worker the task ids of its latest reported claim. */
	uint64_t (*held)[KNITK_LANES];
	uint8_t *nr_held;
	/*
	 * Stealing: the lanes of the slot's mailbox its unsent loans hold, at
	 * most KNITK_LANES - 1, so that a stop message always finds one
	 * (private lanes: POOL_CAP sees to it).
	 */
	unsigned int loan_lanes;
	/*
	 * Lanes claimed for loans so far (its lock): a batch of loans sent
	 * together keeps the array's order in a mailbox (loan.c).
	 */
	uint64_t loans_claimed;
};

struct pool_result {
	uint64_t task_id;
	int status;
	bool stop;
	bool direct;		/* @len bytes went to the drainer's pool_direct */
	bool in_arg;		/* @len bytes in the call's argument (in_arg.c) */
	uint8_t arg_sub, arg_slot;	/* ... of this submitter's lane, slot */
	void *data;		/* a malloc copy; NULL: @len bytes in @small */
	size_t len;
	unsigned char small[POOL_SMALL_RESULT];
};

/*
 * The buffer of a knitk_pool_call whose thread drains: the result of its
 * own call (@task_id) goes from the return lane straight to @out (at most
 * @cap bytes), one copy instead of two and no allocation (results.c).
 * Only that thread writes @out, and it reads it only once its call is
 * done.
 */
struct pool_direct {
	uint64_t task_id;
	void *out;
	size_t cap;
};

/*
 * Results a waiting drainer took from worker @w's return mailbox (lanes
 * acknowledged) and completes at its next hold of pool->lock, the one it
 * takes anyway to look at its calls (knitk__pool_held_apply_locked): one
 * hold per round instead of two.  Owned by the drainer role.
 */
struct pool_held {
	unsigned int w, n;
	struct pool_result res[KNITK_LANES];
};

struct knitk_pool {
	struct knitk_pool_opts opts;
	struct knitk_task_table table;
	struct knitk_endpoint *ep;	/* host endpoint */
	_Atomic uint64_t *slots;	/* the calls' words (slot.h), in the knot */
	unsigned char *boxes;		/* their result boxes, after the words */
	unsigned int box_size;		/* bytes per box; 0: no boxes */
	unsigned int nr_workers;
	unsigned int nr_submitters;
	uint64_t max_len;		/* largest argument/result */
	/* KNITK_POOL_DISPATCH_STEAL: regions of steal_g lanes (steal.c). */
	bool steal;
	unsigned int steal_g;
	_Atomic uint64_t *steal_words;	/* the wake policy's words (T12) */

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct pool_worker *workers;
	struct pool_entry *entries;
	struct pool_submitter *submitters;
	unsigned int respawning;	/* workers being restarted */
	/*
	 * Workers whose death was handled and whose dead process the
	 * completer still reaps and, with KNITK_POOL_RESPAWN, replaces
	 * (death.c): changed under pool->lock, read without it by the
	 * completer's drain rounds as a hint.
	 */
	_Atomic uint64_t aftercare;
	/*
	 * Workers whose death the drainer must look at again: a new worker
	 * that died before its respawn was committed, when a death of w
	 * was not yet handled as one (death.c).
	 */
	_Atomic uint64_t recheck;
	/*
	 * Bumped per completion batch and death, under pool->lock; a
	 * submitter samples it before a publish (see pool_publish).
	 */
	_Atomic uint64_t progress;
	bool closed;			/* no more submits */
	bool shut;			/* knitk_pool_shutdown ran */
	bool stopping;			/* the stop messages are sent (shutdown.c) */
	bool completer_done;
	bool destroyed;			/* freed by the last handle */
	unsigned long handles;		/* live call handles */
	unsigned int loans;		/* unsent loans (entries held), pool->lock */
	/*
	 * Released handles kept for the next submits (pool->lock, which
	 * both a submit and a release take anyway): a call allocates
	 * nothing once the pool has run as many at a time before.
	 */
	struct knitk_call *call_cache;
	/* Handles whose results are in their arguments' bytes (in_arg.c). */
	struct knitk_call *kept_head;
	unsigned int call_cached;
	struct knitk_pool_stats stats;
	struct pool_spin spin;		/* the drainer's polls */

	pthread_t completer;
	bool completer_started;
	uint32_t death_seq;		/* the drainer: last death_seq handled */

	/*
	 * The drainer role (drain.c): one thread at a time consumes the
	 * return mailboxes, handles deaths and parks on the host doorbell.
	 * Waiting threads take it when @leader (the backend can kick, so
	 * another thread can end the park); otherwise only the completer does.
	 */
	bool leader;
	/*
	 * Threads waiting on their own call's word (wait.c, R6), pool->lock:
	 * the destroy lets them leave before the knot goes.
	 */
	unsigned int own_waiters;
	/*
	 * knitk_pool_call rings the worker in its park (S9): private lanes,
	 * a leader, and a backend with KNITK_IOC_NOTIFY_WAIT.
	 */
	bool ring_wait;
	bool draining;			/* the role is held, pool->lock */
	bool completer_draining;	/* ... by the completer, pool->lock */
	_Atomic unsigned int waiters;	/* threads in calls_wait, changed under pool->lock */
	_Atomic unsigned int kicks;	/* bumped before each kick of the drainer */
	struct pool_held *held;		/* the role's results not yet completed */
	unsigned int passive;		/* threads waiting for progress, not draining */
	bool orphans;			/* calls in flight and nobody waits, pool->lock */
	uint64_t activity;		/* bumped by every wait, pool->lock */
	pthread_cond_t ccond;		/* the completer's sleep */

	/*
	 * Event mode (events.c): set once, under pool->lock, by the first
	 * knitk_pool_event_fd; read unlocked by the completer's rounds.
	 */
	_Atomic bool evmode;
	int event_fd;			/* -1 until then */
	bool event_fd_owned;		/* the futex backend's eventfd */
	struct knitk_call *done_head, *done_tail;	/* completed, not reaped */

	/* Process workers. */
	char *exe;
	pthread_t monitor;
	bool monitor_started;
	int monitor_efd;
	bool monitor_stop;		/* pool->lock */
	int host_pidfd;			/* futex: ours, inherited by workers */
	/*
	 * futex: a pipe whose write end only we hold (O_CLOEXEC, so an exec
	 * closes it as an exit does) and whose read end the workers watch
	 * for the hang-up (spawn.c); -1 without.
	 */
	int host_pipe[2];
	/* Futex backend: the workers' lifelines (lifeline.c). */
	int lifeline_fd;		/* inherited by workers, -1: none */
	void *lifelines;
	size_t lifeline_bytes;
	pthread_t lifeline_thread;
	bool lifeline_started;
	_Atomic uint32_t lifeline_poke;	/* a private futex word */
};

static inline uint64_t pool_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * A bounded poll's look at its deadline in round @round: only every
 * POOL_SPIN_CLOCK rounds (a clock read costs more than a poll), and never
 * for KNITK_WAIT_FOREVER.
 */
static inline bool pool_spin_past(uint64_t round, uint64_t deadline_ns)
{
	return (round & (POOL_SPIN_CLOCK - 1)) == POOL_SPIN_CLOCK - 1 &&
	       deadline_ns != KNITK_WAIT_FOREVER && pool_now_ns() >= deadline_ns;
}

/* Under pool->lock, which every writer of call->state holds. */
static inline bool call_done_locked(const struct knitk_call *call)
{
	return atomic_load_explicit(&call->state, memory_order_relaxed) == CALL_DONE;
}

/*
 * Without pool->lock (docs/protocol.md C5): acquire pairs with the release
 * store in knitk__call_complete_locked, so a done call's status, data and
 * len are seen as completed; none of them changes until the release.
 */
static inline bool call_done(const struct knitk_call *call)
{
	return atomic_load_explicit(&call->state, memory_order_acquire) == CALL_DONE;
}

static inline uint64_t pool_task_id(unsigned int entry, uint32_t gen)
{
	return (uint64_t)gen << 32 | entry;
}

/*
 * The files of lib/pool, each depending only on those listed before it:
 *
 *   spin.c, pool_hooks.c   the spin policy; the test hook
 *   lifeline.c, spawn.c    process workers: lifelines, spawn, pidfd watch
 *                          (process.h)
 *   steal_wake.c           the stealing wake policy's words (T12, T13)
 *   worker.c               a worker's loop, thread or process
 *   call.c                 the call record and its entry
 *   box.c, room.c          a call's end on its word (box.h); submitter
 *                          slots and room
 *   steal.c                the host's side of stealing (T10-T14)
 *   results.c              return mailboxes: results to their calls
 *   death.c                crash attribution, reset, respawn
 *   drain.c                the drainer role's rounds
 *   completer.c            the completer thread
 *   submit.c               the balancer, registering and publishing calls
 *   loan.c                 calls whose argument is written in place
 *   wait.c                 waiting for calls; the handle's face
 *   events.c               the event fd and reap
 *   shutdown.c, stats.c    shutdown and destroy; counters
 *   create.c               knitk_pool_create
 */

/* A completion batch or a death: a submitter waiting for room looks again. */
static inline void pool_progress_locked(struct knitk_pool *pool)
{
	/*
	 * Every writer holds pool->lock: a store, no read-modify-write.
	 * Release pairs with the acquire in pool_publish.
	 */
	atomic_store_explicit(&pool->progress,
			      atomic_load_explicit(&pool->progress, memory_order_relaxed) + 1,
			      memory_order_release);
}

/*
 * Worker @pw is alive and the incarnation @epoch a call was given to:
 * read under a submitter's lock before a publish to it.  seq_cst pairs
 * with the stores in handle_death, which then cycles every submitter
 * lock: either we see the worker dead (or reborn: another epoch) here,
 * or our publish is done before the death handler resets the worker's
 * request mailboxes.
 */
static inline bool pool_worker_current(struct pool_worker *pw, uint32_t epoch)
{
	return atomic_load_explicit(&pw->alive, memory_order_seq_cst) &&
	       atomic_load_explicit(&pw->epoch, memory_order_seq_cst) == epoch;
}

/* worker.c */
struct worker_args {
	struct knitk_endpoint *ep;
	const struct knitk_task_table *table;
	void *task_data;
	unsigned int worker;
	unsigned int spin;
	unsigned int steal_g;		/* 0: private lanes */
	struct pool_worker *thread;	/* a thread worker: told its setup's end */
};
int knitk__worker_run(const struct worker_args *args);
void *knitk__worker_thread_main(void *arg);

/* call.c */
struct knitk_call *knitk__call_get_locked(struct knitk_pool *pool);
void knitk__call_cache_free(struct knitk_pool *pool);
/* The pool's memory, once destroyed and without handles. */
void knitk__pool_free(struct knitk_pool *pool);
void knitk__call_complete_locked(struct knitk_pool *pool,
				 struct knitk_call *call, int status,
				 void *data, size_t len);
/* Completed with @len result bytes already in its caller's buffer. */
void knitk__call_complete_direct_locked(struct knitk_pool *pool,
					struct knitk_call *call, int status,
					size_t len);
void knitk__call_withdraw_locked(struct knitk_pool *pool,
				 struct knitk_call *call, int status);
void knitk__call_unref_locked(struct knitk_call *call);
bool knitk__call_unref_unless_last(struct knitk_call *call);
/* An entry goes back: after its worker's answer, or without one (sealed). */
void knitk__entry_answered_locked(struct knitk_pool *pool, unsigned int idx);
void knitk__entry_free_locked(struct knitk_pool *pool, unsigned int idx);
void knitk__events_queue_locked(struct knitk_pool *pool, struct knitk_call *call);
void knitk__events_forget_locked(struct knitk_call *call);
void knitk__pool_kick_drainer_locked(struct knitk_pool *pool);

/* room.c */
unsigned int knitk__submitter_acquire(struct knitk_pool *pool);
/* Some worker serves, or will after a respawn (pool->lock held). */
bool knitk__pool_has_workers_locked(struct knitk_pool *pool,
				    const struct knitk_call_opts *co);
void knitk__pool_wait_passive_locked(struct knitk_pool *pool);
/* A submit waiting for room: no longer than its call's deadline. */
int knitk__pool_wait_passive_until_locked(struct knitk_pool *pool,
					  uint64_t deadline_ns);
int knitk__pool_wait_room(struct knitk_pool *pool, struct pool_worker *pw,
			  const struct knitk_call *call, uint64_t progress);

/* steal.c */
void knitk__steal_rescue(struct knitk_pool *pool);
int knitk__steal_setup(struct knitk_pool *pool);
uint64_t knitk__steal_claims(struct knitk_pool *pool);
void knitk__steal_free_slot(struct pool_submitter *sl);
void knitk__steal_collect(struct knitk_pool *pool, unsigned int s);
unsigned int knitk__steal_take_dead(struct knitk_pool *pool, unsigned int w,
				    uint64_t *tids);
int knitk__steal_publish(struct knitk_pool *pool, struct knitk_call *call,
			 const struct knitk_lane_header *h, const void *in,
			 size_t len);
int knitk__steal_lane_claim(struct knitk_pool *pool, unsigned int s);
void knitk__steal_lane_release(struct knitk_pool *pool, unsigned int s,
			       unsigned int lane);
void knitk__steal_publish_lane(struct knitk_pool *pool, unsigned int s,
			       unsigned int lane, uint64_t task_id);
void knitk__steal_stop_workers(struct knitk_pool *pool);
void knitk__steal_orphans_locked(struct knitk_pool *pool);

/* results.c */
int knitk__pool_held_init(struct knitk_pool *pool);
/* Complete the results knitk__pool_drain_once held (the drainer, pool->lock). */
void knitk__pool_held_apply_locked(struct knitk_pool *pool);
void knitk__pool_held_flush(struct knitk_pool *pool);
/*
 * Consume worker @w's return mailbox; returns the results taken.
 * @defer: a waiting drainer's round, which may leave them held.
 */
unsigned int knitk__results_drain(struct knitk_pool *pool, unsigned int w,
				  bool defer);
/* @direct: the draining thread's own buffer, or NULL. */
unsigned int knitk__results_drain_all(struct knitk_pool *pool, bool defer,
				      const struct pool_direct *direct);

/* death.c */
void knitk__pool_aftercare_locked(struct knitk_pool *pool);
bool knitk__pool_deaths_pending(struct knitk_pool *pool);
bool knitk__pool_check_deaths(struct knitk_pool *pool);

/* drain.c */
unsigned int knitk__pool_drain_all(struct knitk_pool *pool, bool defer,
				   const struct pool_direct *direct);
int knitk__pool_drain_once(struct knitk_pool *pool, unsigned int k0,
			   uint64_t deadline_ns, uint64_t *ring,
			   const struct pool_direct *direct);
unsigned int knitk__pool_drain_or_arm(struct knitk_pool *pool);

/*
 * The calling thread may take the drainer role now: a leader pool, the
 * role free, and not in event mode (where reap is the drainer).
 */
static inline bool pool_may_drain_locked(const struct knitk_pool *pool)
{
	return pool->leader && !pool->draining && !pool->completer_done &&
	       !atomic_load_explicit(&pool->evmode, memory_order_relaxed);
}

/* completer.c */
int knitk__completer_start(struct knitk_pool *pool);

/* submit.c */
/*
 * knitk_pool_submit; with @reap false the call never reaches
 * knitk_pool_reap.  With @defer, the ring of the workers published to
 * may be left to the caller: *@defer, rung by its wait (S9).
 */
int knitk__pool_submit(struct knitk_pool *pool, uint32_t fn, const void *in,
		       size_t len, const struct knitk_call_opts *co, bool reap,
		       uint64_t *defer, struct knitk_call **callp);
int knitk__submission_check(struct knitk_pool *pool, uint32_t fn,
			    const void *in, size_t len,
			    const struct knitk_call_opts *opts,
			    struct knitk_call_opts *o,
			    const struct knitk_call_opts **co);
int knitk__pool_register(struct knitk_pool *pool,
			 const struct knitk_call_opts *const *cos, unsigned int nr,
			 bool reap, bool loan, struct knitk_call **calls);
void knitk__pool_request_fill(struct knitk_lane_header *h,
			      const struct knitk_call *call, uint32_t fn);
void knitk__pool_published(struct knitk_pool *pool,
			   struct knitk_call *const *calls, unsigned int nr);
void knitk__pool_unpublished(struct knitk_pool *pool,
			     struct knitk_call *const *calls, unsigned int nr,
			     int err);

/* loan.c */
/* knitk_call_release of an unsent loan: its lane and entry go back first. */
void knitk__loan_release(struct knitk_call *call);
/* Shutdown (drain, pool->lock held): unsent loans complete -ESHUTDOWN. */
void knitk__loans_end_locked(struct knitk_pool *pool);

#endif /* KNITK_POOL_INTERNAL_H */
