/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * libknitk: the worker pool.
 *
 * A pool owns one knot and N workers, threads of this process or separate
 * processes, each running the same table of C functions.  Any host thread
 * submits calls; a call is a function id plus argument bytes and comes back
 * as a status plus result bytes.  Every submitted call completes exactly
 * once: with the task's result, or with -ETIMEDOUT (its deadline passed),
 * -ECANCELED (aborted, or cancelled by shutdown), -EOWNERDEAD (the worker
 * process it was given to died before answering it) or -EBADMSG (its
 * worker answered with a malformed result header: a kind, length, arena
 * slot or offset out of bounds, or the stop message's function id; the
 * host checks the header before it reads a byte of the result).  The
 * pool learns of a death after the fact: with private lanes, a call
 * submitted between a worker's exit and the pool seeing it
 * (knitk_pool_worker_info still gives alive 1) is queued to the dead
 * worker and completes -EOWNERDEAD without having run; once the pool
 * reports the worker not alive, no call goes to it.
 *
 * Dispatch uses private lanes: one request mailbox per (submitter,
 * worker) and one return mailbox per worker.  A submitting thread holds one
 * submitter while it publishes; a balancer picks the least-loaded live
 * worker; only the chosen worker's doorbell is rung, and only through the
 * doorbell protocol (idle lanes are never touched).  Results are collected
 * by one pool thread parked on the host doorbell; waiting threads sleep
 * until their calls complete.
 *
 * Every function returns 0 (or a non-negative count) on success and a
 * negative errno value on failure; nothing prints.
 */
#ifndef KNITK_POOL_H
#define KNITK_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <linux/knitk.h>

#ifdef __cplusplus
extern "C" {
#endif

struct knitk_endpoint;		/* <knitk.h> */
struct knitk_pool;
struct knitk_call;
struct knitk_reply;

/*
 * A task: @in/@in_len are the argument bytes (valid during the call),
 * @out receives the result bytes (knitk_reply_alloc/knitk_reply_set), @ctx
 * is the call's context (knitk_task_aborted, knitk_task_data).  The return
 * value is the call's status: >= 0 for success, a negative errno for an
 * error (both reach the caller unchanged), except -EINPROGRESS, which is
 * reserved for calls not completed yet: a task returning it completes its
 * call with -EPROTO.
 */
typedef int (*knitk_task_fn)(const void *in, size_t in_len,
			     struct knitk_reply *out, void *ctx);

/*
 * Function id i of a pool runs tasks[i].  @reserved must be zero (see
 * "Sized structs" in knitk.h).
 */
struct knitk_task_table {
	const knitk_task_fn *tasks;
	unsigned int nr_tasks;
	uint32_t reserved;
};

#define KNITK_WORKER_THREADS		1
#define KNITK_WORKER_PROCESSES		2

/* struct knitk_pool_opts.flags */
/* Restart dead workers; process workers only (-EINVAL with threads). */
#define KNITK_POOL_RESPAWN		(1U << 0)
/*
 * Opt-in: when the module refuses the pool's knot for RLIMIT_MEMLOCK
 * (about 0.4 MiB per worker with the default geometry), run the pool on
 * the futex backend instead of failing with -ENOMEM (KNITK_KNOT_FALLBACK_FUTEX
 * for the knot).  Never silent: knitk_last_error() keeps the refusal's
 * message after the create returns 0, and knitk_endpoint_backend() of
 * knitk_pool_endpoint() gives KNITK_BACKEND_FUTEX.  -EINVAL with
 * KNITK_KNOT_KMOD in @knot_flags.
 */
#define KNITK_POOL_FALLBACK_FUTEX	(1U << 1)

/**
 * struct knitk_pool_opts - how to build a pool (zero means default)
 * @size: sizeof(struct knitk_pool_opts) of the caller (sized struct, see
 *	knitk.h).
 * @kind: KNITK_WORKER_THREADS (default) or KNITK_WORKER_PROCESSES.
 * @flags: KNITK_POOL_* flags.
 * @nr_workers: workers, 1..KNITK_MAX_WORKERS (default: online CPUs).
 * @nr_submitters: submitters, 1..KNITK_MAX_SUBMITTERS (default 4);
 *	more concurrent submitting threads share slots.
 * @inline_bytes: inline bytes per lane (default 192; multiple of 64).
 * @spin: polls of an empty mailbox before a worker parks (default 256;
 *	the host's wait for results polls as long, and stops at its
 *	deadline or an abort; any value works).  A poll pauses; it yields
 *	the CPU every 64 polls while the knot's awake workers and host fit the
 *	CPUs the process may run on (sched_getaffinity(), read at start),
 *	every 4 polls when they do not.
 * @knot_flags: KNITK_KNOT_* flags forcing a backend (default: automatic),
 *	and KNITK_KNOT_NO_HUGE to keep a large knot out of huge pages.
 * @arena_bytes: arena per mailbox (default 64 KiB; multiple of 4096).
 * @worker_path: process workers: the binary to run (default: this
 *	program, /proc/self/exe); it calls knitk_worker_main() early in main.
 * @worker_argv: process workers: NULL-terminated argv passed to the
 *	worker binary after argv[0] (default none).
 * @prefix_argv: process workers: NULL-terminated command prepended to the
 *	worker command, e.g. a sandbox ("bwrap", ..., NULL); the knot fd
 *	still reaches the worker by inheritance, so the prefix must keep fds.
 * @task_data: thread workers: the pointer knitk_task_data() returns.
 * @dispatch: KNITK_POOL_DISPATCH_PRIVATE (0, the default) or
 *	KNITK_POOL_DISPATCH_STEAL (added in version 1).
 * @steal_region: stealing: lanes per region g, a power of two with
 *	64 / g >= nr_workers + 1; 0 = the largest such g up to 4 (a claim
 *	takes a region's calls at once: smaller regions spread adjacent long
 *	calls over the workers, larger ones claim less often) (added in
 *	version 1).  The pool's knot records g (struct
 *	knitk_geometry.region_lanes).
 */
struct knitk_pool_opts {
	uint32_t size;
	unsigned int kind;
	unsigned int flags;
	unsigned int nr_workers;
	unsigned int nr_submitters;
	unsigned int inline_bytes;
	unsigned int spin;
	unsigned int knot_flags;
	uint64_t arena_bytes;
	const char *worker_path;
	char *const *worker_argv;
	char *const *prefix_argv;
	void *task_data;
	unsigned int dispatch;
	unsigned int steal_region;
};

/* The first version: 72 bytes with 8-byte pointers. */
#define KNITK_POOL_OPTS_SIZE_VER0	(40 + 4 * sizeof(void *))
/* Version 1 adds @dispatch and @steal_region. */
#define KNITK_POOL_OPTS_SIZE_VER1	(KNITK_POOL_OPTS_SIZE_VER0 + 8)

/*
 * struct knitk_pool_opts.dispatch.
 *
 * PRIVATE: one request mailbox per (submitter, worker); the balancer
 * sends each call to the least-loaded worker.
 *
 * STEAL: one request mailbox per submitter, shared by every worker
 * (1..63 workers).  Its 64 lanes form 64 / g regions of g lanes; an idle
 * worker claims the oldest published region that no more senior worker
 * wants and runs its calls in publish order (docs/protocol.md T1-T9).  A
 * publish wakes one idle worker only when no worker is awake and
 * searching, and a woken worker always finds the work it was woken for
 * (T12, T13).  knitk_call_worker() names the worker that ran the call
 * once it has completed.  A worker's death fails only the
 * calls it had claimed (-EOWNERDEAD); when the last worker is gone for
 * good, the calls no worker took complete with -EPIPE.  An illegal g or
 * worker count is -EINVAL, never a fallback, and so is KNITK_CALL_WORKER
 * on a stealing pool.  Private stays the default
 * until the skewed benchmark shows stealing ahead.
 */
#define KNITK_POOL_DISPATCH_PRIVATE	0
#define KNITK_POOL_DISPATCH_STEAL	1

/*
 * knitk_pool_create - start a pool running @table.  Process workers are
 * running and joined when this returns.  -EINVAL for bad options or an
 * empty table, -ECHILD when a process worker exits before joining, or the
 * errors of knitk_endpoint_create, posix_spawn and pthread_create; for @opts
 * the sized-struct errors (knitk.h).  -ENOMEM when the module refuses the
 * knot for RLIMIT_MEMLOCK (without KNITK_POOL_FALLBACK_FUTEX): then
 * knitk_last_error() names the limit, the bytes the knot needs and the
 * knobs to raise it (ulimit -l, LimitMEMLOCK=, CAP_IPC_LOCK).
 */
int knitk_pool_create(const struct knitk_pool_opts *opts,
		      const struct knitk_task_table *table,
		      struct knitk_pool **pool);

/* Shutdown modes of knitk_pool_shutdown(). */
#define KNITK_SHUTDOWN_DRAIN		1	/* finish every call, then stop */
#define KNITK_SHUTDOWN_CANCEL		2	/* complete the rest -ECANCELED */

/*
 * knitk_pool_shutdown - stop accepting calls (later submits: -ESHUTDOWN),
 * complete every outstanding call per @mode, and stop the workers.  Returns
 * when every call has completed and every worker has stopped; -EALREADY
 * after a first shutdown.  An unsent loan (knitk_pool_loan) is not waited
 * for: it completes at once, its bytes still its caller's.
 */
int knitk_pool_shutdown(struct knitk_pool *pool, unsigned int mode);

/*
 * knitk_pool_destroy - shut down (cancel, if not done yet), join threads,
 * reap processes, free everything.  Handles not released yet stay valid
 * until knitk_call_release(), all completed (a call still running at the
 * destroy completes -ECANCELED): knitk_call_status, knitk_call_result,
 * knitk_call_wait (returns the status at once, whatever the deadline),
 * knitk_call_abort (-EALREADY), knitk_call_worker and knitk_call_release
 * work on them in any order.  The pool pointer itself is invalid once
 * this returns: no function may be given it, not even
 * knitk_pool_wait_any/all on such handles.  Threads blocked in a wait
 * (knitk_call_wait, knitk_pool_wait_any/all) when the destroy starts
 * return once it has completed their calls; no other call on the pool may
 * run concurrently with its destroy.
 */
void knitk_pool_destroy(struct knitk_pool *pool);

/* struct knitk_call_opts.flags */
#define KNITK_CALL_WORKER		(1U << 0)	/* run on @worker only */

/**
 * struct knitk_call_opts - per-call options (NULL means defaults)
 * @size: sizeof(struct knitk_call_opts) of the caller (sized struct, see
 *	knitk.h).
 * @flags: KNITK_CALL_* flags.
 * @deadline_ns: absolute CLOCK_MONOTONIC deadline, 0 = none.  An expired
 *	call completes with -ETIMEDOUT; the worker skips it if it has not
 *	started it, and its late result is dropped.  A result its worker
 *	finished in time and left in the call's own slot (a thread was
 *	waiting for the call alone) stands, however late the call is looked
 *	at.
 * @worker: with KNITK_CALL_WORKER, the worker to run on.
 * @reserved: zero (-EINVAL otherwise).
 */
struct knitk_call_opts {
	uint32_t size;
	unsigned int flags;
	uint64_t deadline_ns;
	unsigned int worker;
	uint32_t reserved;
};

#define KNITK_CALL_OPTS_SIZE_VER0	24	/* first version */

/*
 * knitk_pool_submit - start function @fn on @len bytes at @in (copied
 * once, before this returns) and return its handle in *@call.  Blocks
 * while there is no room for the call: every eligible worker at capacity,
 * or its request mailbox or arena full (backpressure: it waits for
 * completions).  A call with @opts->deadline_ns waits no longer than that:
 * at the deadline the submit returns -ETIMEDOUT and the call was never
 * submitted (*@call is not set, nothing was published or counted in
 * knitk_pool_stats, its in-flight entry and arena space are free again,
 * and no other call is affected); without a deadline it waits as long as
 * it takes.  A deadline already past when the call finds room does not
 * stop it: it is submitted and completes -ETIMEDOUT.  -EINVAL for bad arguments or
 * an unknown @fn or @opts->worker, -EMSGSIZE when @len fits no lane or
 * arena, -ESHUTDOWN after shutdown (also for a submit still waiting for
 * room when the shutdown begins: it was never submitted), -EPIPE when no
 * worker is left to run
 * it: none at all, or, for a call pinned with KNITK_CALL_WORKER, the
 * worker it names (whether others live or not).  With
 * KNITK_POOL_RESPAWN a dead worker being replaced is not gone: the submit
 * waits for its successor (-EPIPE only if the restart fails).  A thread
 * waiting for a call of a worker that died learns of the death
 * (-EOWNERDEAD) as soon as the pool has handled it, not after the
 * respawn: the successor is started afterwards, so @respawns in
 * knitk_pool_stats may still lag @deaths when the wait returns.
 */
int knitk_pool_submit(struct knitk_pool *pool, uint32_t fn, const void *in,
		      size_t len, const struct knitk_call_opts *opts,
		      struct knitk_call **call);

/*
 * struct knitk_submission - one call of knitk_pool_submit_batch(); an array
 * element, so fixed: @reserved must be zero (-EINVAL), and what a call may
 * need later goes into its @opts.
 */
struct knitk_submission {
	uint32_t fn;
	uint32_t reserved;
	const void *in;
	size_t len;
	const struct knitk_call_opts *opts;
};

/*
 * knitk_pool_submit_batch - submit @nr calls as that many knitk_pool_submit
 * calls in array order would (the same checks, waits and errors), in runs
 * of up to 64: one pool lock round trip, one publish per worker's mailbox
 * and one doorbell ring per run.  Calls of a batch that go to the same
 * worker start in array order.  A run that finds no room (every eligible
 * worker at capacity, an arena full) publishes what it has before it waits
 * for room, as long as the deadline of the call that waits allows
 * (-ETIMEDOUT, that call and the rest not submitted); in event mode it
 * does not wait and the batch ends there.
 * Returns how many were submitted (their handles in @calls[0..n-1]; no
 * later entry of @calls is a handle); stops at the first error, which is
 * returned if nothing was submitted.
 */
int knitk_pool_submit_batch(struct knitk_pool *pool,
			    const struct knitk_submission *subs,
			    unsigned int nr, struct knitk_call **calls);

/*
 * knitk_pool_loan - prepare a call of function @fn whose @len argument
 * bytes the caller writes in place, in the request lane or arena that
 * will carry them, instead of having them copied (docs/protocol.md C8).
 * The call is registered as knitk_pool_submit registers one (an in-flight
 * entry, counted against the worker's capacity; with private lanes its
 * worker is chosen now, or @opts' KNITK_CALL_WORKER), a lane of the
 * mailbox it will go through is claimed and @len bytes reserved there;
 * *@call gets its handle and *@buf the bytes (NULL for @len 0).  Waits
 * for room exactly as knitk_pool_submit does, with its errors: -EINVAL,
 * -EMSGSIZE, -ESHUTDOWN, -EPIPE, -ETIMEDOUT at the call's deadline while
 * waiting for room, -EAGAIN in event mode instead of waiting.
 *
 * The caller may write *@buf until it calls knitk_pool_submit_loan or
 * knitk_call_release on the handle, never after knitk_pool_destroy.
 * Until it is sent the loan is the caller's: a death of its worker does
 * not complete it, and it is never reaped (event mode).
 * knitk_call_release of an unsent loan gives its bytes back and the call
 * never runs (nor is it counted in knitk_pool_stats).  knitk_call_abort
 * completes it -ECANCELED at once, its deadline -ETIMEDOUT when a wait or
 * status call looks at it, knitk_pool_shutdown at once (-ESHUTDOWN in
 * drain mode, -ECANCELED in cancel mode; shutdown does not wait for
 * it): its bytes stay the caller's until knitk_pool_submit_loan or
 * knitk_call_release all the same.
 */
int knitk_pool_loan(struct knitk_pool *pool, uint32_t fn, size_t len,
		    const struct knitk_call_opts *opts,
		    struct knitk_call **call, void **buf);

/*
 * knitk_pool_submit_loan - send the unsent loan @call: its lane is
 * published as it is (no copy) and its worker rung, as a submit does.
 * Returns 0 when the call was sent: from then on it is a call like any
 * other (waited for, reaped in event mode, released).  Otherwise a
 * negative errno, and the call has completed with that same status (the
 * caller still releases the handle): -ECANCELED (aborted, or cancelled by
 * shutdown), -ETIMEDOUT (its deadline passed before it was sent),
 * -ESHUTDOWN (the pool was shut down in drain mode), -EOWNERDEAD
 * (private lanes: the worker it was given to died and no successor has
 * joined; with KNITK_POOL_RESPAWN a successor that has joined gets the
 * call), -EPIPE (stealing: no worker is left).  In every case the loan's
 * bytes go back to the pool exactly once.  -EINVAL for NULL or a handle
 * that is not an unsent loan (a call submitted otherwise, or a loan sent
 * already).
 */
int knitk_pool_submit_loan(struct knitk_call *call);

/**
 * knitk_pool_submit_loans - send the unsent loans @calls[0..@nr-1], all
 * of one pool, as knitk_pool_submit_loan would one by one, with one
 * publish per mailbox and one doorbell ring per run of 64 where it can
 * (with private lanes; a stealing pool publishes and wakes for each lane
 * as a single submit does).
 * @calls: the loans' handles, each made by knitk_pool_loan and neither
 *	sent nor released yet, none twice.
 * @nr: how many, at least 1.
 *
 * The batch never stops part-way.  Its arguments are checked before
 * anything is sent: a NULL @calls or @nr of 0, a NULL entry, a handle of
 * another pool than @calls[0]'s, one that is not an unsent loan (a call
 * submitted otherwise, a loan sent already) or one given twice is
 * -EINVAL, and then nothing was sent: every loan is still unsent, its
 * bytes still the caller's, to send or release exactly once as before.
 * Otherwise each call is dealt with: it is sent, or it could not be sent
 * and has completed with the error knitk_pool_submit_loan would have
 * returned for it (knitk_call_status reads it: -ECANCELED, -ETIMEDOUT,
 * -ESHUTDOWN, -EOWNERDEAD, -EPIPE), its bytes given back.  Either way no
 * call of @calls is a loan any more; the caller still waits for and
 * releases each handle.  With private lanes, loans of one worker made
 * through one mailbox (one submitter slot) start in array order.
 *
 * Return: how many were sent (0 to @nr), or -EINVAL.
 */
int knitk_pool_submit_loans(struct knitk_call *const *calls, unsigned int nr);

/*
 * knitk_call_wait - wait until @call completes or @deadline_ns (absolute
 * CLOCK_MONOTONIC, 0 = no wait, KNITK_WAIT_FOREVER); returns the call's
 * status (knitk_call_status) or -EINPROGRESS when the wait timed out (a
 * completed call's status is never -EINPROGRESS, see knitk_task_fn).
 */
int knitk_call_wait(struct knitk_call *call, uint64_t deadline_ns);

/*
 * knitk_pool_wait_any - wait until one of @calls completes; returns its
 * index, or -EINPROGRESS at @deadline_ns.  knitk_pool_wait_all - wait for
 * every one; 0, or -EINPROGRESS at @deadline_ns.  Calls must belong to
 * @pool.
 */
int knitk_pool_wait_any(struct knitk_pool *pool, struct knitk_call *const *calls,
			unsigned int nr, uint64_t deadline_ns);
int knitk_pool_wait_all(struct knitk_pool *pool, struct knitk_call *const *calls,
			unsigned int nr, uint64_t deadline_ns);

/*
 * knitk_call_status - the status of a completed call (the task's return
 * value, -EPROTO for a task that returned -EINPROGRESS, or -ETIMEDOUT,
 * -ECANCELED, -EOWNERDEAD, -EMSGSIZE for a result too big, -ENOMEM for a
 * task that ran but whose result, over 64 bytes, the host found no memory
 * to copy out of the return lane, -EBADMSG for a result whose header its
 * worker wrote out of bounds, with no result bytes); -EINPROGRESS while
 * running, and only then.
 */
int knitk_call_status(struct knitk_call *call);

/*
 * knitk_call_result - the result bytes of a completed call (valid until
 * release); -EINPROGRESS while running.
 */
int knitk_call_result(struct knitk_call *call, const void **data, size_t *len);

/*
 * knitk_call_abort - ask the call to stop: it completes now with
 * -ECANCELED, unless it completed already (-EALREADY); the worker skips
 * it, or the task sees knitk_task_aborted() and may return early.
 */
int knitk_call_abort(struct knitk_call *call);

/*
 * knitk_call_worker - the worker the call was dispatched to (the one whose
 * death completes it with -EOWNERDEAD).  On a stealing pool, where any
 * worker may take it: the worker whose result (or death, -EOWNERDEAD)
 * completed the call; -EINPROGRESS until the call has completed, -ENOENT
 * when it completed without one (aborted, expired or cancelled first, or
 * -EPIPE).
 */
int knitk_call_worker(struct knitk_call *call);

/*
 * knitk_call_release - free the handle (a running call is aborted first;
 * an unsent loan gives its bytes back and never runs, knitk_pool_loan).
 */
void knitk_call_release(struct knitk_call *call);

/*
 * knitk_pool_call - submit, wait forever, copy up to @cap result bytes to
 * @out (*@out_len gets the full result length) and release; returns the
 * call's status (or a submit error).  Nothing is written past @cap bytes;
 * when the call does not complete with its result (an error status and
 * *@out_len 0), the contents of @out are unspecified.
 */
int knitk_pool_call(struct knitk_pool *pool, uint32_t fn, const void *in,
		    size_t len, const struct knitk_call_opts *opts,
		    void *out, size_t cap, size_t *out_len);

/* ------------------------------------------------------------ the task */

/*
 * knitk_reply_alloc - room for @len result bytes, written in place into the
 * return lane or arena (the only copy is the host's).  Returns 0;
 * -EMSGSIZE when @len can never fit.  A later alloc replaces an earlier.
 * knitk_reply_set - the same, copying @len bytes from @data.
 */
int knitk_reply_alloc(struct knitk_reply *out, size_t len, void **buf);
int knitk_reply_set(struct knitk_reply *out, const void *data, size_t len);

/**
 * knitk_reply_in_arg - answer with the call's own argument bytes, in place
 * @out: the task's reply
 * @len: result bytes, at most the argument's @in_len
 * @buf: receives @in as a writable pointer; the result is its first @len
 *	bytes as the task leaves them (the task may overwrite its argument)
 *
 * Nothing is copied: the caller reads the result where the argument was
 * written (a loan's buffer, or the arena bytes the submit copied into) and
 * those bytes stay the caller's, untouched by later calls, until it
 * releases the call (knitk_call_result's pointer is into the arena;
 * knitk_pool_call copies them into its @out).  Only for an argument that
 * travels in the arena: one larger than the lane's inline room; a task
 * given a smaller one gets -EOPNOTSUPP and answers otherwise
 * (knitk_reply_set).  -EMSGSIZE when @len is over @in_len, -EINVAL for a
 * NULL @out or @buf.  The last of knitk_reply_alloc, knitk_reply_set and
 * knitk_reply_in_arg wins.  The caller checks @len against its argument's
 * size before it reads: a worker that claims more completes the call
 * -EBADMSG.  If the worker dies after the call completed, the result is
 * still the caller's until its release; if it dies before, the call fails
 * -EOWNERDEAD as any other.  Until released, the result holds its arena
 * bytes and one of the submitter mailbox's KNITK_ARENA_SLOTS slots: a
 * program that keeps many such results leaves its later submits less
 * room, and they wait for it as for any backpressure (up to their
 * deadline).  knitk_pool_destroy moves a result not yet released into
 * memory of the handle's own: a pointer knitk_call_result gave before
 * is then stale.
 */
int knitk_reply_in_arg(struct knitk_reply *out, size_t len, void **buf);

/*
 * knitk_task_aborted - 1 when the running call was aborted or is past its
 * deadline (the task should return early), 0 if not, -EINVAL for NULL.
 */
int knitk_task_aborted(void *ctx);

/* knitk_task_data - the pool's task_data (threads) or the worker's. */
void *knitk_task_data(void *ctx);

/*
 * knitk_worker_main - call first thing in main() of a program that a pool
 * starts as a process worker (the host itself, by default).  In the host
 * (no KNITK_WORKER in the environment) it returns 0 at once.  In a worker
 * it attaches to the inherited knot, joins, runs @table until the pool
 * stops it and then exits the process; it never returns.  If the host
 * process ends without destroying its pool (killed, leaving main, _exit
 * from any thread) or execs another program (from any thread; the pid
 * lives on), the worker finishes the call it is running (a task waiting
 * for room for its result gets -EPIPE) and exits; calls still queued to it
 * are lost with the host.  On the futex backend the workers see an exec
 * as the hang-up of a pipe whose write end only the host holds
 * (O_CLOEXEC); a child the host forked without exec shares that end, and
 * the workers of a host that exec'd then stop only once that child has
 * exec'd or exited too.  Whatever else it is doing, it notices within one round of
 * that loop: parked (the death rings it), spinning or yielding for work,
 * a return lane or a stealing region; it starts no call once it knows.
 * -EINVAL for a bad @table.
 */
int knitk_worker_main(int argc, char **argv,
		      const struct knitk_task_table *table, void *task_data);

/* --------------------------------------------------------- statistics */

/**
 * struct knitk_pool_stats - counters of a pool
 * @size: sizeof(struct knitk_pool_stats) of the caller (sized struct, see
 *	knitk.h); the library stores the bytes it filled.
 * @reserved: written as zero.
 * @submitted: calls submitted; an unsent loan counts from knitk_pool_loan
 *	on, and a loan released unsent (never a call) leaves the count again,
 *	so @submitted may go down by the loans released.  Once every handle
 *	is done and no loan is unsent, @submitted equals @completed.
 * @completed: calls completed (every code).  A call whose worker left its
 *	result in the call's own slot counts once a thread looks at it (a
 *	wait, knitk_call_status, knitk_call_result, knitk_call_release), or
 *	once the pool needs its room (a submit waiting for room, shutdown).
 * @timedout: completed with -ETIMEDOUT.
 * @canceled: completed with -ECANCELED.
 * @ownerdead: completed with -EOWNERDEAD.
 * @stale: results that arrived for calls already completed, or naming no
 *	call in flight (another entry, or a wrong generation), dropped.
 * @deaths: worker deaths seen.
 * @respawns: workers restarted.
 * @event_writes: futex backend: writes to the event fd
 *	(knitk_pool_event_fd) by the host's and the thread workers'
 *	endpoints; 0 while no thread waits on it.
 * @claims: stealing pools: the region claims the workers made, each
 *	taking one or more calls (calls per claim: @completed / @claims,
 *	counting the stop messages of a shutdown); 0 with private lanes.
 */
struct knitk_pool_stats {
	uint32_t size;
	uint32_t reserved;
	uint64_t submitted;
	uint64_t completed;
	uint64_t timedout;
	uint64_t canceled;
	uint64_t ownerdead;
	uint64_t stale;
	uint64_t deaths;
	uint64_t respawns;
	uint64_t event_writes;
	uint64_t claims;
};

#define KNITK_POOL_STATS_SIZE_VER0	72	/* first version */
#define KNITK_POOL_STATS_SIZE_VER1	80	/* + event_writes */
#define KNITK_POOL_STATS_SIZE_VER2	88	/* + claims */

int knitk_pool_stats(struct knitk_pool *pool, struct knitk_pool_stats *stats);

/**
 * struct knitk_worker_info - one worker of a pool
 * @size: sizeof(struct knitk_worker_info) of the caller (sized struct, see
 *	knitk.h); the library stores the bytes it filled.
 * @pid: process id (process workers), else 0; 0 too from the worker's
 *	death on (its process is then reaped by the pool, so the number may
 *	be reused), until a respawned worker has joined.
 * @alive: 1 while the worker serves calls.
 * @inflight: calls it holds now, with those whose results wait in their
 *	slots for a look (see @completed in struct knitk_pool_stats).
 * @calls: results it has returned, counted as their calls complete.
 * @db: its doorbell counters: the module's (kmod), or for thread workers
 *	on the futex backend the library's wake counters of its endpoint
 *	(waits, wakes, spurious; suppressed counts are the wakers').
 * @db_valid: 1 when @db was filled.
 * @reserved: written as zero.
 */
struct knitk_worker_info {
	uint32_t size;
	int32_t pid;
	uint32_t alive;
	uint32_t inflight;
	uint32_t db_valid;
	uint32_t reserved;
	uint64_t calls;
	struct knitk_doorbell_stats db;
};

#define KNITK_WORKER_INFO_SIZE_VER0	104	/* first version */
#define KNITK_WORKER_INFO_SIZE_VER1	112	/* + db.uring_waits */
#define KNITK_WORKER_INFO_SIZE_VER2	128	/* + db.spin_wakes, db.spin_sleeps */

int knitk_pool_worker_info(struct knitk_pool *pool, unsigned int worker,
			   struct knitk_worker_info *info);

/* -------------------------------------------------------- event loops */

/*
 * knitk_pool_event_fd - an fd for an event loop (epoll, poll, io_uring
 * poll or read), and the switch of @pool into event mode; the same fd on
 * every call.  The pool owns it: never close it.  On the module it is the
 * host endpoint (its poll(), EPOLLIN); on the futex backend an eventfd
 * that the pool's endpoints write only when they wake a host that waits:
 * about one write per sleep of the loop (a result that lands while
 * knitk_pool_reap() arms the fd may write it once more, and the next wait
 * then finds nothing to reap), not one per result, none while the loop is
 * busy (knitk_pool_stats' @event_writes counts them).
 *
 * The fd fires after knitk_pool_reap() returned 0, which "arms" it, for
 * the next result or worker death; add it with EPOLLIN | EPOLLET
 * (edge-triggered; with the module's endpoint, also EPOLLPRI for deaths).
 * Readiness is a hint to reap, not a count: the loop calls reap until it
 * returns 0 before each wait, and need not read(2) the eventfd (reading
 * it, e.g. with an io_uring read, is harmless; a level-triggered poll of
 * the eventfd stays ready until it is read).
 *
 * In event mode, from this call on: every call that completes is queued
 * for knitk_pool_reap (whoever also waits for it); results are taken only
 * by reap (and by shutdown and destroy); knitk_call_wait,
 * knitk_pool_wait_any/all and knitk_pool_call still work from other
 * threads, sleeping until a reap completes their calls, so the loop's
 * thread must not call them (a knitk_pool_call's call is its own and is
 * never reaped; a handle another thread waits for is reaped as well, and
 * only one of the two may release it); knitk_pool_submit never waits for
 * room: -EAGAIN when every eligible worker is at capacity or its request arena
 * is full (reap, then submit again).  A call completed without a result
 * by another thread (knitk_call_abort, a deadline seen by a wait) is
 * reaped but does not fire the fd; a deadline alone never fires it (the
 * loop runs its own timer and then calls knitk_call_status or abort).
 * Event mode lasts until destroy; the calls knitk_pool_shutdown completes
 * are queued without firing the fd (reap after it returns).  -EOPNOTSUPP for a pool whose backend
 * cannot kick (a module without KNITK_FEATURE_KICK) and for process
 * workers on the futex backend (their endpoints cannot reach the eventfd).
 */
int knitk_pool_event_fd(struct knitk_pool *pool);

/*
 * knitk_pool_reap - collect up to @max completed calls into @calls, oldest
 * first, without blocking; returns how many (0: none, and the fd armed;
 * but @max 0 returns 0 at once, collecting and arming nothing).
 * Each is returned once, is still the caller's handle (read it, then
 * knitk_call_release it), and is never returned once released.  Any
 * number of threads may reap concurrently with each other, with submits
 * and with waits of other threads: one of them takes the results, the
 * others get what is queued.  -EINVAL for a NULL @pool, NULL @calls with
 * @max > 0, or a pool not in event mode (knitk_pool_event_fd first).
 */
int knitk_pool_reap(struct knitk_pool *pool, struct knitk_call **calls,
		    unsigned int max);

/* knitk_pool_endpoint - the pool's knot (host endpoint), e.g. for stats. */
int knitk_pool_endpoint(struct knitk_pool *pool, struct knitk_endpoint **ep);

#ifdef __cplusplus
}
#endif

#endif /* KNITK_POOL_H */
