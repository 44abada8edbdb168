// SPDX-License-Identifier: GPL-2.0
/*
 * Narrow windows of the pool, made deterministic by the test hooks of
 * pool_hooks.h (a -DKNITK_TEST_HOOKS build) and -Wl,--wrap=waitpid:
 *  - lost_wakeup: the only call in flight completes between a submit's
 *    failed publish (no arena space) and its wait for progress.
 *  - respawn_gap: a submit while a dead worker is being replaced, with
 *    KNITK_POOL_RESPAWN: it waits for the new worker, never -EPIPE.
 *  - reap_eintr: the pool's wait for a dead worker is interrupted by a
 *    signal (EINTR): the worker is still reaped.
 *  - event_fd_at_completer_park: knitk_pool_event_fd switches to event
 *    mode and kicks the parking completer after its last look at the mode
 *    and before it reads the kick count: it still leaves the role.
 *  - held_result_before_death: a waiting drainer (knitk_pool_wait_any:
 *    a thread alone in knitk_call_wait waits on its call's word instead)
 *    has taken a worker's result and not completed it yet when it sees
 *    that worker's death: the call completes with its result, not
 *    -EOWNERDEAD (C3).
 *  - shutdown_ends_room_wait: a submit waits for arena room that only
 *    an unsent loan holds when the pool is shut down: the submit gives
 *    -ESHUTDOWN and the shutdown returns (both waited for ever before).
 *  - stop_reply_then_exit: at shutdown a worker answers its stop and
 *    exits between the completer's drain of its return mailbox and the
 *    completer's look at the deaths: it stopped, it did not die (no death
 *    counted, the worker not killed mid-exit).  Also with the completer
 *    parked on the host doorbell before the worker is stopped.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "tap.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "../pool/pool_internal.h"

/* ---------------------------------------------------------- lost_wakeup */

static _Atomic int gate;

/* Thread workers: hold the call until the test opens the gate (a flag). */
static int task_until_open(const void *in, size_t len,
			   struct knitk_reply *out, void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	(void)ctx;
	while (!atomic_load(&gate))
		sched_yield();
	return 7;
}

static const knitk_task_fn gate_fns[] = { task_until_open };
static const struct knitk_task_table gate_tasks = { .tasks = gate_fns, .nr_tasks = 1 };

static struct knitk_call *held;
static _Atomic int full_seen;

/* In the submitter, between its failed send and its wait: complete @held. */
static void hook_complete_held(struct knitk_pool *pool, enum pool_hook point,
			       unsigned int arg)
{
	(void)pool;
	(void)arg;
	if (point != POOL_HOOK_PUBLISH_FULL || atomic_exchange(&full_seen, 1))
		return;
	atomic_store(&gate, 1);
	knitk_call_wait(held, KNITK_WAIT_FOREVER);
}

static void lost_wakeup(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 1, .nr_submitters = 1,
				     .arena_bytes = 4096 };
	struct knitk_layout lay;
	struct knitk_endpoint *knot;
	struct knitk_pool *pool;
	struct knitk_call *c;
	unsigned char *buf;

	REQUIRE(knitk_pool_create(&o, &gate_tasks, &pool) == 0);
	knitk_pool_endpoint(pool, &knot);
	knitk_endpoint_layout(knot, &lay, NULL);
	buf = calloc(1, lay.arena_size);
	REQUIRE(buf);
	atomic_store(&gate, 0);
	atomic_store(&full_seen, 0);
	/* The held call has the whole arena: the next one cannot be placed. */
	REQUIRE(knitk_pool_submit(pool, 0, buf, lay.arena_size, NULL, &held) == 0);
	knitk__test_hook = hook_complete_held;
	/* Hung here for good before the fix: its wakeup came too early. */
	CHECK_EQ(knitk_pool_submit(pool, 0, buf, lay.arena_size, NULL, &c), 0);
	CHECK_EQ(atomic_load(&full_seen), 1);
	CHECK_EQ(knitk_call_status(held), 7);
	CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), 7);
	knitk_call_release(c);
	knitk_call_release(held);
	knitk_pool_destroy(pool);
	knitk__test_hook = NULL;
	free(buf);
}

/* ---------------------------------------------- shutdown_ends_room_wait */

static struct knitk_pool *room_pool;
static pthread_t room_shutter;
static _Atomic int room_full;

static void *room_shut(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)knitk_pool_shutdown(room_pool, KNITK_SHUTDOWN_DRAIN);
}

/* In the submitter, its send refused for room: shut the pool down. */
static void hook_shut_on_full(struct knitk_pool *pool, enum pool_hook point,
			      unsigned int arg)
{
	(void)arg;
	if (point != POOL_HOOK_PUBLISH_FULL || pool != room_pool ||
	    atomic_exchange(&room_full, 1))
		return;
	if (pthread_create(&room_shutter, NULL, room_shut, NULL))
		atomic_store(&room_full, 2);
}

static void shutdown_ends_room_wait(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 1, .nr_submitters = 1,
				     .arena_bytes = 4096 };
	struct knitk_layout lay;
	struct knitk_endpoint *knot;
	struct knitk_call *loan, *c = NULL;
	unsigned char *buf;
	void *lbuf, *shut = NULL;

	REQUIRE(knitk_pool_create(&o, &gate_tasks, &room_pool) == 0);
	knitk_pool_endpoint(room_pool, &knot);
	knitk_endpoint_layout(knot, &lay, NULL);
	buf = calloc(1, lay.arena_size);
	REQUIRE(buf);
	atomic_store(&room_full, 0);
	/* The unsent loan has the whole arena; shutdown does not wait for it. */
	REQUIRE(knitk_pool_loan(room_pool, 0, lay.arena_size, NULL, &loan, &lbuf) == 0);
	knitk__test_hook = hook_shut_on_full;
	/* Waited for ever before the fix, and so did the shutdown. */
	CHECK_EQ(knitk_pool_submit(room_pool, 0, buf, lay.arena_size, NULL, &c), -ESHUTDOWN);
	CHECK_EQ(atomic_load(&room_full), 1);
	if (atomic_load(&room_full) == 1)
		pthread_join(room_shutter, &shut);
	CHECK_EQ((intptr_t)shut, 0);
	knitk__test_hook = NULL;
	CHECK_EQ(knitk_call_status(loan), -ESHUTDOWN);
	knitk_call_release(loan);
	/* The refused submit is not counted; the loan that shutdown ended is. */
	{
		struct knitk_pool_stats st = { .size = sizeof(st) };

		CHECK_EQ(knitk_pool_stats(room_pool, &st), 0);
		CHECK_EQ(st.submitted, 1);
		CHECK_EQ(st.completed, 1);
	}
	knitk_pool_destroy(room_pool);
	free(buf);
}

/* ---------------------------------------------------------- respawn_gap */

static _Atomic int gap_go, gap_waiting, gap_done;
static int gap_ret;

/*
 * In the death handler, after worker 0 was marked dead: let the submitter
 * run, until it either returned or waits for a worker.
 */
static void hook_submit_in_gap(struct knitk_pool *pool, enum pool_hook point,
			       unsigned int arg)
{
	(void)pool;
	(void)arg;
	if (point == POOL_HOOK_SUBMIT_WAIT) {
		atomic_store(&gap_waiting, 1);
	} else if (point == POOL_HOOK_DEATH && !atomic_exchange(&gap_go, 1)) {
		while (!atomic_load(&gap_done) && !atomic_load(&gap_waiting))
			sched_yield();
	}
}

static void *gap_submitter(void *arg)
{
	struct knitk_pool *pool = arg;
	struct knitk_call *c;
	uint64_t x = 42;

	while (!atomic_load(&gap_go))
		sched_yield();
	gap_ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c);
	if (!gap_ret) {
		gap_ret = knitk_call_wait(c, KNITK_WAIT_FOREVER);
		if (!gap_ret && !mix_result_ok(c, x))
			gap_ret = -EBADMSG;
		knitk_call_release(c);
	}
	atomic_store(&gap_done, 1);
	return NULL;
}

static void respawn_gap(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 1,
				     .flags = KNITK_POOL_RESPAWN };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	pthread_t th;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	knitk__test_hook = hook_submit_in_gap;
	pthread_create(&th, NULL, gap_submitter, pool);
	knitk_pool_worker_info(pool, 0, &wi);
	kill(wi.pid, SIGKILL);
	pthread_join(th, NULL);
	CHECK_EQ(atomic_load(&gap_go), 1);
	/* -EPIPE before the fix: the respawn was not counted yet. */
	CHECK_EQ(gap_ret, 0);
	CHECK_EQ(atomic_load(&gap_waiting), 1);
	wait_deaths(pool, 1, 1);
	knitk_pool_destroy(pool);
	knitk__test_hook = NULL;
}

/* ----------------------------------------------------------- reap_eintr */

pid_t __real_waitpid(pid_t pid, int *status, int options);

static _Atomic int eintr_armed;

/* The library's waitpid: interrupted once when armed, as by a signal. */
pid_t __wrap_waitpid(pid_t pid, int *status, int options)
{
	if (!(options & WNOHANG) && atomic_exchange(&eintr_armed, 0)) {
		errno = EINTR;
		return -1;
	}
	return __real_waitpid(pid, status, options);
}

static void reap_eintr(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
				     .flags = KNITK_POOL_RESPAWN };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	int children = count_children();

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	knitk_pool_worker_info(pool, 1, &wi);
	atomic_store(&eintr_armed, 1);
	kill(wi.pid, SIGKILL);
	wait_deaths(pool, 1, 1);
	CHECK_EQ(atomic_load(&eintr_armed), 0);
	CHECK_EQ(mix_calls_good(pool, 100, NULL, 1, 1), 100);
	knitk_pool_destroy(pool);
	/* Left a zombie before the fix: the interrupted wait was not retried. */
	CHECK_EQ(is_our_child(wi.pid), 0);
	CHECK_EQ(count_children(), children);
	if (is_our_child(wi.pid))
		__real_waitpid(wi.pid, NULL, 0);
}

/* ------------------------------------------- event_fd_at_completer_park */

static _Atomic int park_armed, park_in_window;

/*
 * In the completer, between its look at evmode and its read of kicks:
 * wait until knitk_pool_event_fd has kicked (kicks moved) and let go of
 * pool->lock (it waits for the role then, its kick done), so the
 * completer reads the new kick count and a doorbell seq past the kick.
 */
static void hook_event_fd_in_window(struct knitk_pool *pool, enum pool_hook point,
				    unsigned int arg)
{
	unsigned int k;

	(void)arg;
	if (point != POOL_HOOK_COMPLETER_PARK || !atomic_exchange(&park_armed, 0))
		return;
	k = atomic_load(&pool->kicks);
	atomic_store(&park_in_window, 1);
	while (atomic_load(&pool->kicks) == k)
		sched_yield();
	pthread_mutex_lock(&pool->lock);
	pthread_mutex_unlock(&pool->lock);
}

static void event_fd_at_completer_park(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 1,
				     .kind = KNITK_WORKER_THREADS };
	struct knitk_call *calls[1], *call;
	struct knitk_pool *pool;
	uint64_t x = 41;
	int fd, n = 0;

	atomic_store(&park_armed, 1);
	atomic_store(&park_in_window, 0);
	atomic_store(&knitk__test_hook, hook_event_fd_in_window);
	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	/* An idle pool: the completer takes the role and parks. */
	while (!atomic_load(&park_in_window))
		sched_yield();
	/* Hung here when the completer slept through the kick. */
	fd = knitk_pool_event_fd(pool);
	CHECK(fd >= 0);
	atomic_store(&knitk__test_hook, NULL);
	/* Event mode works: a call is reaped. */
	REQUIRE(knitk_pool_submit(pool, T_ECHO, &x, sizeof(x), NULL, &call) == 0);
	while (n == 0) {
		n = knitk_pool_reap(pool, calls, 1);
		REQUIRE(n >= 0);
	}
	CHECK(calls[0] == call);
	CHECK_EQ(knitk_call_wait(call, KNITK_WAIT_FOREVER), 0);
	knitk_call_release(call);
	knitk_pool_destroy(pool);
}

/* --------------------------------------------- held_result_before_death */

static _Atomic int held_armed, held_fired;

/*
 * In the waiting drainer, with worker @arg's result taken and not
 * completed: kill the worker and wait until its death is counted, so the
 * same round of the drainer finds it.
 */
static void hook_kill_holder(struct knitk_pool *pool, enum pool_hook point,
			     unsigned int arg)
{
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_endpoint *ep;
	uint32_t seq0, seq;

	if (point != POOL_HOOK_HELD || !atomic_exchange(&held_armed, 0))
		return;
	knitk_pool_endpoint(pool, &ep);
	knitk_endpoint_deaths(ep, &seq0, NULL);
	knitk_pool_worker_info(pool, arg, &wi);
	kill(wi.pid, SIGKILL);
	do {
		sched_yield();
		knitk_endpoint_deaths(ep, &seq, NULL);
	} while (seq == seq0);
	atomic_store(&held_fired, 1);
}

static void held_result_before_death(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 1 };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint64_t x = 5, y = 0;
	const void *d;
	size_t len = 0;
	int ret = 0;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	knitk__test_hook = hook_kill_holder;
	/*
	 * The completer may drain a call's result before its caller does
	 * (it holds no results back): call again until the caller held one.
	 */
	while (!atomic_load(&held_fired) && !ret) {
		x++;
		atomic_store(&held_armed, 1);
		ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c);
		if (ret)
			break;
		ret = knitk_pool_wait_any(pool, &c, 1, KNITK_WAIT_FOREVER);
		if (!ret)
			ret = knitk_call_status(c);
		if (!ret && !knitk_call_result(c, &d, &len) && len == 8)
			memcpy(&y, d, 8);
		knitk_call_release(c);
	}
	knitk__test_hook = NULL;
	CHECK_EQ(atomic_load(&held_fired), 1);
	/* -EOWNERDEAD before the fix: the death was handled first. */
	CHECK_EQ(ret, 0);
	CHECK_EQ(len, 8);
	CHECK_EQ(y, mix64(x));
	knitk_pool_stats(pool, &st);
	CHECK_EQ(st.ownerdead, 0);
	wait_deaths(pool, 1, 0);
	knitk_pool_destroy(pool);
}

/* ----------------------------------------------- stop_reply_then_exit */

static _Atomic int look_armed, idle_watch, idle_parked;
static _Atomic pid_t look_pid;

/*
 * In the completer, between its drain of every return mailbox and its
 * look at the deaths: let the worker (held stopped by SIGSTOP, so the
 * drain found no answer) go on, and wait until it has answered its stop,
 * exited, and its death is counted.  The round may be the one the test's
 * kick makes before the shutdown sent the stop: the test's thread sends
 * it without us.  Also tells when the completer is about to park on the
 * host doorbell (idle_watch).
 */
static void hook_exit_before_look(struct knitk_pool *pool, enum pool_hook point,
				  unsigned int arg)
{
	struct knitk_endpoint *ep;
	siginfo_t si = { 0 };
	uint32_t seq;

	(void)arg;
	if (point == POOL_HOOK_COMPLETER_PARK && atomic_load(&idle_watch))
		atomic_store(&idle_parked, 1);
	if (point != POOL_HOOK_DEATHS_LOOK || !atomic_exchange(&look_armed, 0))
		return;
	kill(atomic_load(&look_pid), SIGCONT);
	while (waitid(P_PID, (id_t)atomic_load(&look_pid), &si,
		      WEXITED | WNOWAIT) < 0 && errno == EINTR)
		;
	knitk_pool_endpoint(pool, &ep);
	do {
		sched_yield();
		knitk_endpoint_deaths(ep, &seq, NULL);
	} while (seq == 0);
}

/* End the drainer's park: it makes another round (a look at the deaths). */
static void kick_drainer(struct knitk_pool *pool)
{
	pthread_mutex_lock(&pool->lock);
	knitk__pool_kick_drainer_locked(pool);
	pthread_mutex_unlock(&pool->lock);
}

/*
 * The hook runs in a drainer's round that starts after it is armed.  The
 * completer takes the drainer role and parks on the host doorbell
 * POOL_LINGER_NS after the last wait, which on a loaded machine passes
 * before the shutdown.  Parked before the arm, it made its last look at
 * the deaths unarmed, and the stopped worker never rings it: nothing
 * ends that park, the hook never lets the worker go on, and the shutdown
 * waits for its answer for ever.  The kick after the arm ends such a park
 * (or is seen before it: pool->kicks), so a round runs the hook whoever
 * holds the role.  @parked: the completer is parked before the worker is
 * stopped, every time (without the kick the shutdown hung every time).
 */
static void stop_reply_then_exit_one(unsigned int dispatch, bool parked)
{
	struct knitk_pool_opts o = { .size = sizeof(o),
				     .kind = KNITK_WORKER_PROCESSES, .nr_workers = 1,
				     .dispatch = dispatch };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;

	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	/* Without a kick (a module without KNITK_FEATURE_KICK) it would hang. */
	if (!pool->leader) {
		CHECK(pool->leader);
		knitk_pool_destroy(pool);
		return;
	}
	CHECK_EQ(mix_calls_good(pool, 10, NULL, 1, 1), 10);
	atomic_store(&look_armed, 0);
	atomic_store(&knitk__test_hook, hook_exit_before_look);
	if (parked) {
		atomic_store(&idle_parked, 0);
		atomic_store(&idle_watch, 1);
		/* Parked already (before idle_watch): once more, seen. */
		kick_drainer(pool);
		while (!atomic_load(&idle_parked))
			sched_yield();
		atomic_store(&idle_watch, 0);
	}
	REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0);
	atomic_store(&look_pid, wi.pid);
	/* It answers the stop only once the hook lets it. */
	REQUIRE(kill(wi.pid, SIGSTOP) == 0);
	while (waitid(P_PID, (id_t)wi.pid, &(siginfo_t){ 0 },
		      WSTOPPED | WNOWAIT) < 0 && errno == EINTR)
		;
	atomic_store(&look_armed, 1);
	/*
	 * A drainer whose last look came before the arm gets no ring from
	 * the stopped worker: a round after it, whoever holds the role then.
	 */
	kick_drainer(pool);
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	atomic_store(&knitk__test_hook, NULL);
	CHECK_EQ(atomic_load(&look_armed), 0);
	knitk_pool_stats(pool, &st);
	/* 1 before the fix: the stop's answer was taken after the death. */
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.ownerdead, 0);
	knitk_pool_destroy(pool);
	CHECK_EQ(is_our_child(wi.pid), 0);
}

static void stop_reply_then_exit(void)
{
	stop_reply_then_exit_one(KNITK_POOL_DISPATCH_PRIVATE, false);
	stop_reply_then_exit_one(KNITK_POOL_DISPATCH_STEAL, false);
	stop_reply_then_exit_one(KNITK_POOL_DISPATCH_PRIVATE, true);
	stop_reply_then_exit_one(KNITK_POOL_DISPATCH_STEAL, true);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	TEST(lost_wakeup);
	TEST(shutdown_ends_room_wait);
	TEST(respawn_gap);
	TEST(reap_eintr);
	TEST(event_fd_at_completer_park);
	TEST(held_result_before_death);
	TEST(stop_reply_then_exit);
	return tap_exit();
}
