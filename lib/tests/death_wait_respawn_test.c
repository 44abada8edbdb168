// SPDX-License-Identifier: GPL-2.0
/*
 * A parked waiter learns of its worker's death while the respawn is held
 * by a wrapper (prefix_argv), when the respawn fails and when the wrapper
 * is killed; several waiters on calls of one dead worker, wait_any and
 * wait_all among them; the last worker of a stealing pool gone.
 * argv[1] scales the counts (1000000 plain).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

static int worker_of_pid(struct knitk_pool *pool, unsigned int workers, int pid)
{
	unsigned int w;

	for (w = 0; w < workers; w++)
		if (worker_pid(pool, w, NULL) == pid)
			return (int)w;
	return -1;
}

/* A T_GATE whose ready end tells the pid of the task's process. */
struct pgate {
	int ready[2], gate[2];
	struct { int32_t ready, gate; uint32_t n; } arg;
};

static int pgate_open(struct pgate *g)
{
	int one = 1;

	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, g->ready) || pipe(g->gate) ||
	    setsockopt(g->ready[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)))
		return -1;
	g->arg.ready = g->ready[1];
	g->arg.gate = g->gate[0];
	g->arg.n = 0;
	return 0;
}

static void pgate_close(struct pgate *g)
{
	close(g->ready[0]);
	close(g->ready[1]);
	close(g->gate[0]);
	close(g->gate[1]);
}

/* The pid of the next gated task to start, or -1 (a hang detector). */
static int pgate_started(struct pgate *g)
{
	union { char b[CMSG_SPACE(sizeof(struct ucred))]; struct cmsghdr h; } u;
	char c;
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = u.b, .msg_controllen = sizeof(u.b) };
	struct timeval tv = { HANG_MS / 1000, 0 };
	struct cmsghdr *cm;
	struct ucred cr;

	setsockopt(g->ready[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (recvmsg(g->ready[0], &m, 0) != 1 || c != 'r')
		return -1;
	cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_type != SCM_CREDENTIALS)
		return -1;
	memcpy(&cr, CMSG_DATA(cm), sizeof(cr));
	return cr.pid;
}

struct waiter {
	pthread_t th;
	struct knitk_pool *pool;
	struct knitk_call *calls[4];
	unsigned int nr;
	enum { W_ONE, W_ANY, W_ALL } how;
	_Atomic int ret;
	_Atomic int done;
	/* The pool's respawns when the wait returned. */
	_Atomic uint64_t respawns;
};

static void *waiter_fn(void *arg)
{
	struct waiter *w = arg;
	struct knitk_pool_stats st;
	int ret;

	if (w->how == W_ONE)
		ret = knitk_call_wait(w->calls[0], after_ms(HANG_MS));
	else if (w->how == W_ANY)
		ret = knitk_pool_wait_any(w->pool, w->calls, w->nr, after_ms(HANG_MS));
	else
		ret = knitk_pool_wait_all(w->pool, w->calls, w->nr, after_ms(HANG_MS));
	pool_stats(w->pool, &st);
	atomic_store(&w->respawns, st.respawns);
	atomic_store(&w->ret, ret);
	atomic_store(&w->done, 1);
	return NULL;
}

static void waiter_start(struct waiter *w, struct knitk_pool *pool, int how,
			 struct knitk_call *a, struct knitk_call *b)
{
	memset(w, 0, sizeof(*w));
	w->pool = pool;
	w->how = how;
	w->calls[w->nr++] = a;
	if (b)
		w->calls[w->nr++] = b;
	pthread_create(&w->th, NULL, waiter_fn, w);
}

/* Children of ours that are no pool worker: the respawn wrappers. */
static int wrapper_pid(struct knitk_pool *pool, unsigned int workers)
{
	DIR *d = opendir("/proc");
	char stat[512];
	int found = -1;
	pid_t p;

	if (!d)
		return -1;
	while (found < 0 && (p = proc_next_child(d, stat, sizeof(stat))))
		if (proc_stat_state(stat) != 'Z' && worker_of_pid(pool, workers, p) < 0)
			found = p;
	closedir(d);
	return found;
}

/* The children of process @parent now, at most @max, into @out. */
static unsigned int children_of(pid_t parent, pid_t *out, unsigned int max)
{
	DIR *d = opendir("/proc");
	unsigned int n = 0;
	char stat[512];
	pid_t p;

	if (!d)
		return 0;
	while (n < max && (p = proc_next_child_of(d, parent, stat, sizeof(stat))))
		out[n++] = p;
	closedir(d);
	return n;
}

#define MAX_ORPHANS	16

/*
 * SIGKILL the respawn wrapper @wp; its children of the moment (its
 * "sleep", or a shell between its fork and its exec of it) go to us, the
 * subreaper: into @orphans, for reap_orphans() once the pool is gone.
 * Stopped first, the wrapper forks nothing while they are listed.  A look
 * for "(sleep)" children after the kill missed a child that had not
 * exec'd its sleep yet, which then stayed our child.
 */
static unsigned int kill_wrapper(pid_t wp, pid_t *orphans)
{
	siginfo_t si;
	unsigned int n;

	if (kill(wp, SIGSTOP))
		return 0;
	/*
	 * Not reaped: the pool reaps its wrappers (WNOWAIT).  It cannot have
	 * gone on (the hold is set); if it exited all the same, there is
	 * nothing to list.
	 */
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)wp, &si, WSTOPPED | WEXITED | WNOWAIT) ||
	    si.si_code != CLD_STOPPED)
		return 0;
	n = children_of(wp, orphans, MAX_ORPHANS);
	kill(wp, SIGKILL);
	return n;
}

/* Reap the children a killed wrapper left (kill_wrapper). */
static void reap_orphans(pid_t wp, const pid_t *orphans, unsigned int n)
{
	siginfo_t si;
	unsigned int i;

	/*
	 * Once the wrapper has exited its children are ours (its exit hands
	 * them over before it is a zombie); if the pool reaped it already
	 * (ECHILD), that was done too.
	 */
	memset(&si, 0, sizeof(si));
	waitid(P_PID, (id_t)wp, &si, WEXITED | WNOWAIT);
	for (i = 0; i < n; i++)
		CHECK_EQ(waitpid(orphans[i], NULL, 0), orphans[i]);
}

enum { R_HELD, R_FAILS, R_WRAPPER_KILLED };
static const char *const respawn_name[] = { "held", "fails", "killed while held" };

/*
 * Two process workers with KNITK_POOL_RESPAWN behind the wrapper; a gated
 * call (blocks until released) on each worker; with private lanes two
 * more calls pinned behind the victim's.  Waiters: the victim's call
 * alone, wait_any of (victim's, the other's), wait_all of (the victim's
 * queued call, the victim's call).  The victim is SIGKILLed with its
 * respawn @mode: every waiter of the victim's calls returns -EOWNERDEAD
 * attributed to it, before any respawn; the other worker keeps serving.
 */
static void death_wait(unsigned int dispatch, int mode)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		.flags = KNITK_POOL_RESPAWN, .knot_flags = KNITK_KNOT_FUTEX,
		.dispatch = dispatch, .prefix_argv = wrapper,
	};
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER };
	struct knitk_call *g[2], *q[2] = { NULL, NULL }, *c;
	struct waiter wt[4];
	struct knitk_pool *pool;
	struct pgate gt;
	unsigned int nw = 0, i;
	int pid[2], victim, other, ret, wp = 0;
	pid_t orphans[MAX_ORPHANS];
	unsigned int nr_orphans = 0;
	uint64_t x = 11, y;
	size_t len;

	flag_set(hold_path, false);
	flag_set(fail_path, false);
	REQUIRE(pgate_open(&gt) == 0);
	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	for (i = 0; i < 2; i++) {
		pin.worker = i;
		REQUIRE(knitk_pool_submit(pool, T_GATE, &gt.arg, sizeof(gt.arg),
					  dispatch == KNITK_POOL_DISPATCH_PRIVATE ? &pin : NULL,
					  &g[i]) == 0);
		pid[i] = pgate_started(&gt);
		REQUIRE(pid[i] > 0);
	}
	/* g[v] runs on the victim: the first gated call's worker. */
	victim = worker_of_pid(pool, 2, pid[0]);
	other = worker_of_pid(pool, 2, pid[1]);
	REQUIRE(victim >= 0 && other >= 0 && victim != other);
	if (dispatch == KNITK_POOL_DISPATCH_PRIVATE) {
		pin.worker = (unsigned int)victim;
		for (i = 0; i < 2; i++)
			REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, &pin, &q[i]) == 0);
	}
	waiter_start(&wt[nw++], pool, W_ONE, g[0], NULL);
	waiter_start(&wt[nw++], pool, W_ANY, g[0], g[1]);
	if (q[0]) {
		waiter_start(&wt[nw++], pool, W_ALL, q[0], g[0]);
		waiter_start(&wt[nw++], pool, W_ONE, q[1], NULL);
	}
	/* Let them park. */
	sleep_us(20000);
	flag_set(hold_path, true);
	if (mode == R_FAILS)
		flag_set(fail_path, true);
	REQUIRE(kill(pid[0], SIGKILL) == 0);
	for (i = 0; i < nw; i++) {
		pthread_join(wt[i].th, NULL);
		if (i == 0 && mode == R_FAILS)
			flag_set(hold_path, false);
	}
	CHECK_EQ(atomic_load(&wt[0].ret), -EOWNERDEAD);
	CHECK_EQ(knitk_call_status(g[0]), -EOWNERDEAD);
	CHECK_EQ(knitk_call_worker(g[0]), victim);
	CHECK_EQ(atomic_load(&wt[1].ret), 0);
	if (mode != R_FAILS)
		for (i = 0; i < nw; i++)
			CHECK_EQ(atomic_load(&wt[i].respawns), 0);
	if (q[0]) {
		CHECK_EQ(atomic_load(&wt[2].ret), 0);
		CHECK_EQ(atomic_load(&wt[3].ret), -EOWNERDEAD);
		for (i = 0; i < 2; i++) {
			CHECK_EQ(knitk_call_status(q[i]), -EOWNERDEAD);
			CHECK_EQ(knitk_call_worker(q[i]), victim);
		}
	}
	CHECK_EQ(knitk_call_status(g[1]), -EINPROGRESS);
	if (mode == R_WRAPPER_KILLED) {
		uint64_t end = now_ms() + HANG_MS;

		while ((wp = wrapper_pid(pool, 2)) <= 0 && now_ms() < end)
			usleep(1000);
		CHECK(wp > 0);
		if (wp > 0)
			nr_orphans = kill_wrapper(wp, orphans);
		flag_set(hold_path, false);
	}
	/* The other worker is busy with its gated call: let it go. */
	CHECK_EQ(write(gt.gate[1], "g", 1), 1);
	ret = knitk_call_wait(g[1], after_ms(HANG_MS));
	CHECK_EQ(ret, 0);
	/* Unpinned calls run on the live worker, respawn or not. */
	for (i = 0; i < 20; i++) {
		y = 0;
		x = i;
		ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c);
		CHECK_EQ(ret, 0);
		if (ret)
			break;
		ret = knitk_call_wait(c, after_ms(HANG_MS));
		if (ret == -EINPROGRESS)
			printf("# hang: an unpinned call during the respawn (%s)\n",
			       respawn_name[mode]);
		CHECK_EQ(ret, 0);
		CHECK(mix_result_ok(c, x));
		knitk_call_release(c);
	}
	flag_set(hold_path, false);
	if (mode == R_HELD) {
		CHECK(deaths_reach(pool, 1, 1));
		if (dispatch == KNITK_POOL_DISPATCH_PRIVATE) {
			pin.worker = (unsigned int)victim;
			CHECK_EQ(mix_calls_good(pool, 10, &pin, 100, 1), 10);
		}
	} else {
		bool alive = true;
		uint64_t end = now_ms() + HANG_MS;

		CHECK(deaths_reach(pool, 1, 0));
		while (worker_pid(pool, (unsigned int)victim, &alive) <= 0 && alive &&
		       now_ms() < end)
			usleep(1000);
		printf("# respawn %s: victim alive %d\n", respawn_name[mode], alive);
		if (dispatch == KNITK_POOL_DISPATCH_PRIVATE) {
			pin.worker = (unsigned int)victim;
			x = 5;
			ret = knitk_pool_call(pool, T_MIX, &x, 8, &pin, &y, 8, &len);
			printf("# a call pinned to the victim: %d\n", ret);
			if (mode == R_FAILS)
				CHECK_EQ(ret, -EPIPE);
			else
				CHECK(ret == 0 || ret == -EPIPE);
		}
	}
	print_stats(pool);
	for (i = 0; i < 2; i++) {
		knitk_call_release(g[i]);
		if (q[i])
			knitk_call_release(q[i]);
	}
	knitk_pool_destroy(pool);
	pgate_close(&gt);
	flag_set(fail_path, false);
	if (wp > 0)
		reap_orphans(wp, orphans, nr_orphans);
	CHECK_EQ(count_children(), 0);
}

static void death_wait_respawn_held_private(void) { death_wait(KNITK_POOL_DISPATCH_PRIVATE, R_HELD); }
static void death_wait_respawn_held_steal(void) { death_wait(KNITK_POOL_DISPATCH_STEAL, R_HELD); }
static void death_wait_respawn_fails_private(void) { death_wait(KNITK_POOL_DISPATCH_PRIVATE, R_FAILS); }
static void death_wait_respawn_fails_steal(void) { death_wait(KNITK_POOL_DISPATCH_STEAL, R_FAILS); }
static void death_wait_wrapper_killed_private(void) { death_wait(KNITK_POOL_DISPATCH_PRIVATE, R_WRAPPER_KILLED); }
static void death_wait_wrapper_killed_steal(void) { death_wait(KNITK_POOL_DISPATCH_STEAL, R_WRAPPER_KILLED); }

/*
 * A stealing pool's only worker dies and cannot be replaced: the calls it
 * held end -EOWNERDEAD, the calls no worker took -EPIPE, every parked
 * waiter returns, later submits are -EPIPE.
 */
static void last_worker_gone(unsigned int flags)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 1,
		.flags = flags, .knot_flags = KNITK_KNOT_FUTEX,
		.dispatch = KNITK_POOL_DISPATCH_STEAL, .prefix_argv = wrapper,
	};
	struct knitk_call *c[9], *d;
	struct waiter wt[9];
	struct knitk_pool *pool;
	struct pgate gt;
	unsigned int i, dead = 0, epipe = 0;
	int pid, st;
	uint64_t x = 1;

	flag_set(hold_path, false);
	flag_set(fail_path, false);
	REQUIRE(pgate_open(&gt) == 0);
	REQUIRE(knitk_pool_create(&o, &test_tasks, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_GATE, &gt.arg, sizeof(gt.arg), NULL, &c[0]) == 0);
	pid = pgate_started(&gt);
	REQUIRE(pid > 0);
	for (i = 1; i < 9; i++)
		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i]) == 0);
	for (i = 0; i < 9; i++)
		waiter_start(&wt[i], pool, W_ONE, c[i], NULL);
	sleep_us(20000);
	flag_set(fail_path, true);
	REQUIRE(kill(pid, SIGKILL) == 0);
	for (i = 0; i < 9; i++) {
		pthread_join(wt[i].th, NULL);
		st = knitk_call_status(c[i]);
		if (st == -EOWNERDEAD && knitk_call_worker(c[i]) == 0)
			dead++;
		else if (st == -EPIPE && knitk_call_worker(c[i]) == -ENOENT)
			epipe++;
		else
			printf("# call %u: status %d worker %d\n", i, st,
			       knitk_call_worker(c[i]));
		CHECK_EQ(atomic_load(&wt[i].ret), st);
	}
	printf("# %u -EOWNERDEAD, %u -EPIPE\n", dead, epipe);
	print_stats(pool);
	{
		bool alive = true;
		int p = worker_pid(pool, 0, &alive);

		printf("# worker 0: pid %d alive %d\n", p, alive);
	}
	CHECK_EQ(dead + epipe, 9);
	CHECK_EQ(knitk_call_status(c[0]), -EOWNERDEAD);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &d), -EPIPE);
	for (i = 0; i < 9; i++)
		knitk_call_release(c[i]);
	knitk_pool_destroy(pool);
	pgate_close(&gt);
	flag_set(fail_path, false);
	CHECK_EQ(count_children(), 0);
}

static void last_worker_gone_respawn_fails_steal(void) { last_worker_gone(KNITK_POOL_RESPAWN); }
static void last_worker_gone_no_respawn_steal(void) { last_worker_gone(0); }

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    deaths_init(argc, argv))
		return 1;
	TEST(death_wait_respawn_held_private);
	TEST(death_wait_respawn_held_steal);
	TEST(death_wait_respawn_fails_private);
	TEST(death_wait_respawn_fails_steal);
	TEST(death_wait_wrapper_killed_private);
	TEST(death_wait_wrapper_killed_steal);
	TEST(last_worker_gone_no_respawn_steal);
	TEST(last_worker_gone_respawn_fails_steal);
	deaths_fini();
	return tap_exit();
}
