/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Process workers do not outlive their host: the scenarios shared by
 * lib/tests/pool_orphan_test.c (futex backend, host) and
 * selftests/knitk/pool_orphan_test.c (module, guest).
 *
 * A host - a copy of the test program started with --host - makes a
 * process pool and reports its workers' pids; then it is SIGKILLed with
 * its workers idle, SIGKILLed while one runs a task, SIGKILLed while one
 * waits for room for its result, SIGKILLed under load (submitting threads
 * keep both workers busy and their mailboxes full), or returns from main
 * (or calls _exit, also from a thread other than main) without destroying
 * the pool, or it replaces itself with another program (exec, from main or
 * from another thread: the pid lives on).  Every worker must exit:
 * an idle one at once, a busy one after its task.  The workers are not our children: we
 * watch them with pidfds, with no timeout (a hang is the watchdog's).
 *
 * Each scenario returns NULL when it passed, else the check that failed.
 * The test program's main() calls orphan_host_main() first.
 */
#ifndef KNITK_ORPHAN_H
#define KNITK_ORPHAN_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "proc_count.h"

#define ORPHAN_WORKERS	2
#define ORPHAN_ARENA	4096
/* "load": its submitting threads, calls in flight each, calls before the report. */
#define ORPHAN_LOAD_THREADS	3
#define ORPHAN_LOAD_WINDOW	24
#define ORPHAN_LOAD_WARM	300

/* The pipes between us, the host and its workers (inherited, no CLOEXEC). */
enum { REPORT_R, REPORT_W, CMD_R, CMD_W, READY_R, READY_W, GATE_R, GATE_W,
       NR_FDS };

/*
 * How long the workers of a host that exec'd or exited from a thread have
 * to exit, in ms: far above the watch's notice, which is immediate.
 */
#define ORPHAN_GRACE_MS	30000

/* The host's pool, reachable until the host's end (no leak reported). */
static struct knitk_pool *orphan_pool;
/* "load": calls its threads saw completed right. */
static _Atomic unsigned long orphan_load_ok;

/* "load": windows of T_MIX and 1 ms T_SLEEP calls, until the host dies. */
static void *orphan_load(void *arg)
{
	struct knitk_call *c[ORPHAN_LOAD_WINDOW];
	uint64_t x[ORPHAN_LOAD_WINDOW];
	uint32_t ms = 1;
	unsigned int i, n;

	for (;;) {
		for (n = 0; n < ORPHAN_LOAD_WINDOW; n++) {
			x[n] = mix64((uintptr_t)arg + n + atomic_load(&orphan_load_ok));
			if (knitk_pool_submit(orphan_pool, n % 4 ? T_MIX : T_SLEEP,
					      n % 4 ? (void *)&x[n] : (void *)&ms,
					      n % 4 ? 8 : 4, NULL, &c[n]))
				break;
		}
		knitk_pool_wait_all(orphan_pool, c, n, KNITK_WAIT_FOREVER);
		for (i = 0; i < n; i++) {
			int st = knitk_call_status(c[i]);

			if ((i % 4 == 0 && st == 1) ||
			    (i % 4 && st == 0 && mix_result_ok(c[i], x[i])))
				atomic_fetch_add(&orphan_load_ok, 1);
			knitk_call_release(c[i]);
		}
		if (n < ORPHAN_LOAD_WINDOW)
			return NULL;
	}
}

/* "thread_exit", "thread_exec": what a thread other than main does. */
static void *orphan_thread_leaves(void *arg)
{
	char *const parked[] = { "/proc/self/exe", "--parked", NULL };

	if (arg)
		execv(parked[0], parked);
	_exit(0);
}

/*
 * With argv "--host <mode> <knot flags> <fds...>": be the host - make the
 * pool, report, then do as @mode says - and return the exit status;
 * with "--parked" (what "exec" runs): sleep until killed; else -1.
 */
static int orphan_host_main(int argc, char **argv)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = KNITK_WORKER_PROCESSES,
				     .nr_workers = ORPHAN_WORKERS,
				     .arena_bytes = ORPHAN_ARENA };
	struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER, .worker = 0 };
	struct { int32_t ready, gate; uint32_t n; } gate;
	int32_t pids[ORPHAN_WORKERS];
	int fd[NR_FDS], i, nr_gates = 0;
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_call *c;
	const char *mode;
	char b;

	if (argc == 2 && !strcmp(argv[1], "--parked"))
		for (;;)
			pause();
	if (argc != 4 + NR_FDS || strcmp(argv[1], "--host"))
		return -1;
	mode = argv[2];
	o.knot_flags = (unsigned int)atoi(argv[3]);
	for (i = 0; i < NR_FDS; i++) {
		fd[i] = atoi(argv[4 + i]);
		/* The workers get only the ends their tasks use. */
		if (i != READY_W && i != GATE_R && fcntl(fd[i], F_SETFD, FD_CLOEXEC))
			return 9;
	}
	gate.ready = fd[READY_W];
	gate.gate = fd[GATE_R];
	gate.n = 0;
	if (!strcmp(mode, "busy")) {
		nr_gates = 1;
	} else if (!strcmp(mode, "full")) {
		/* Two results of a whole arena: the second waits for room. */
		nr_gates = 2;
		gate.n = ORPHAN_ARENA;
	}
	if (knitk_pool_create(&o, &test_tasks, &orphan_pool))
		return 10;
	for (i = 0; i < ORPHAN_WORKERS; i++) {
		if (knitk_pool_worker_info(orphan_pool, (unsigned int)i, &wi))
			return 11;
		pids[i] = wi.pid;
	}
	for (i = 0; i < nr_gates; i++)
		if (knitk_pool_submit(orphan_pool, T_GATE, &gate, sizeof(gate),
				      &co, &c))
			return 12;
	if (!strcmp(mode, "load")) {
		pthread_t th;

		for (i = 0; i < ORPHAN_LOAD_THREADS; i++)
			if (pthread_create(&th, NULL, orphan_load, (void *)(uintptr_t)i))
				return 15;
		/* Killed with the load running: calls done and in flight. */
		while (atomic_load(&orphan_load_ok) < ORPHAN_LOAD_WARM)
			sched_yield();
	}
	if (write(fd[REPORT_W], pids, sizeof(pids)) != sizeof(pids))
		return 13;
	/* The kill modes are killed while they wait here. */
	if (read(fd[CMD_R], &b, 1) != 1)
		return 14;
	/* "return" and "_exit": leave with the pool and its calls as they are. */
	if (!strcmp(mode, "_exit"))
		_exit(0);
	if (!strcmp(mode, "exec")) {
		char *const parked[] = { "/proc/self/exe", "--parked", NULL };

		execv(parked[0], parked);
		return 16;
	}
	if (!strcmp(mode, "thread_exit") || !strcmp(mode, "thread_exec")) {
		pthread_t th;

		if (pthread_create(&th, NULL, orphan_thread_leaves,
				   strcmp(mode, "thread_exec") ? NULL : (void *)mode))
			return 17;
		/* The thread ends the process (or its program) under us. */
		for (;;)
			pause();
	}
	return 0;
}

struct orphan_host {
	pid_t pid;
	bool reaped;
	int fd[NR_FDS];
	int pidfd[ORPHAN_WORKERS];	/* of its workers */
};

/* Start a host in @mode; 0 once its workers' pidfds are open. */
static int orphan_start(struct orphan_host *h, const char *mode,
			unsigned int knot_flags)
{
	char num[NR_FDS + 1][16], *argv[5 + NR_FDS] = { "/proc/self/exe",
		"--host", (char *)mode, num[NR_FDS] };
	int32_t pids[ORPHAN_WORKERS];
	extern char **environ;
	int i;

	memset(h, 0, sizeof(*h));
	for (i = 0; i < NR_FDS; i++)
		h->fd[i] = -1;
	for (i = 0; i < ORPHAN_WORKERS; i++)
		h->pidfd[i] = -1;
	h->pid = -1;
	for (i = 0; i < NR_FDS; i += 2)
		if (pipe(&h->fd[i]))
			return -1;
	snprintf(num[NR_FDS], sizeof(num[NR_FDS]), "%u", knot_flags);
	for (i = 0; i < NR_FDS; i++) {
		snprintf(num[i], sizeof(num[i]), "%d", h->fd[i]);
		argv[4 + i] = num[i];
	}
	argv[4 + NR_FDS] = NULL;
	if (posix_spawn(&h->pid, argv[0], NULL, NULL, argv, environ)) {
		h->pid = -1;
		return -1;
	}
	/*
	 * Only the host's side holds these ends now: a host or worker that
	 * dies early gives us end-of-file, not a hang.
	 */
	for (i = 0; i < NR_FDS; i++) {
		if (i == REPORT_W || i == CMD_R || i == READY_W || i == GATE_R) {
			close(h->fd[i]);
			h->fd[i] = -1;
		}
	}
	if (read(h->fd[REPORT_R], pids, sizeof(pids)) != sizeof(pids))
		return -1;
	for (i = 0; i < ORPHAN_WORKERS; i++) {
		printf("# worker %d: pid %d\n", i, pids[i]);
		/* Live: the host has not reaped them, the pids are theirs. */
		h->pidfd[i] = (int)syscall(SYS_pidfd_open, pids[i], 0);
		if (h->pidfd[i] < 0)
			return -1;
	}
	return 0;
}

/* Worker @w has exited (waits for it). */
static bool orphan_worker_exits(struct orphan_host *h, unsigned int w)
{
	struct pollfd p = { .fd = h->pidfd[w], .events = POLLIN };
	int n;

	while ((n = poll(&p, 1, -1)) < 0 && errno == EINTR)
		;
	return n == 1 && (p.revents & POLLIN);
}

/* Worker @w has exited within @ms (a bounded grace). */
static bool orphan_worker_exits_within(struct orphan_host *h, unsigned int w,
				       int ms)
{
	struct pollfd p = { .fd = h->pidfd[w], .events = POLLIN };
	int n;

	while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	return n == 1 && (p.revents & POLLIN);
}

/* Worker @w is still running now. */
static bool orphan_worker_runs(struct orphan_host *h, unsigned int w)
{
	struct pollfd p = { .fd = h->pidfd[w], .events = POLLIN };

	return poll(&p, 1, 0) == 0;
}

/* The host, our child, ended by signal @sig (0: exited with status 0). */
static bool orphan_host_ended(struct orphan_host *h, int sig)
{
	int status;

	if (waitpid(h->pid, &status, 0) != h->pid)
		return false;
	h->reaped = true;
	return sig ? WIFSIGNALED(status) && WTERMSIG(status) == sig :
		     WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The next byte the workers' tasks wrote, or 0 at end-of-file. */
static char orphan_ready_byte(struct orphan_host *h)
{
	char b = 0;

	return read(h->fd[READY_R], &b, 1) == 1 ? b : 0;
}

/* The end of a scenario: a host left over from a failure is killed. */
static const char *orphan_end(struct orphan_host *h, const char *fail)
{
	int i;

	if (!h->reaped && h->pid > 0) {
		kill(h->pid, SIGKILL);
		waitpid(h->pid, NULL, 0);
	}
	for (i = 0; i < NR_FDS; i++)
		if (h->fd[i] >= 0)
			close(h->fd[i]);
	for (i = 0; i < ORPHAN_WORKERS; i++)
		if (h->pidfd[i] >= 0)
			close(h->pidfd[i]);
	return fail;
}

#define ORPHAN_STR_(x)	#x
#define ORPHAN_STR(x)	ORPHAN_STR_(x)
#define ORPHAN_CHECK(cond) do {						\
	if (!(cond))							\
		return orphan_end(&h, __FILE__ ":" ORPHAN_STR(__LINE__)	\
				  ": " #cond);				\
} while (0)

static const char *orphan_kill_idle(unsigned int knot_flags)
{
	struct orphan_host h;

	ORPHAN_CHECK(orphan_start(&h, "idle", knot_flags) == 0);
	ORPHAN_CHECK(kill(h.pid, SIGKILL) == 0);
	ORPHAN_CHECK(orphan_host_ended(&h, SIGKILL));
	ORPHAN_CHECK(orphan_worker_exits(&h, 0));
	ORPHAN_CHECK(orphan_worker_exits(&h, 1));
	return orphan_end(&h, NULL);
}

/* Worker 0 is in a task: it finishes the task, then exits. */
static const char *orphan_kill_busy(unsigned int knot_flags)
{
	struct orphan_host h;

	ORPHAN_CHECK(orphan_start(&h, "busy", knot_flags) == 0);
	ORPHAN_CHECK(orphan_ready_byte(&h) == 'r');
	ORPHAN_CHECK(kill(h.pid, SIGKILL) == 0);
	ORPHAN_CHECK(orphan_host_ended(&h, SIGKILL));
	/* The idle one goes at once; the busy one is held in its task. */
	ORPHAN_CHECK(orphan_worker_exits(&h, 1));
	ORPHAN_CHECK(orphan_worker_runs(&h, 0));
	ORPHAN_CHECK(write(h.fd[GATE_W], "g", 1) == 1);
	ORPHAN_CHECK(orphan_ready_byte(&h) == 'd');
	ORPHAN_CHECK(orphan_worker_exits(&h, 0));
	return orphan_end(&h, NULL);
}

/*
 * Worker 0's task waits for room for its result in an arena the host
 * never empties (it is stopped, then killed): it must give up, and exit.
 */
static const char *orphan_kill_result_waiting(unsigned int knot_flags)
{
	struct orphan_host h;
	int status;

	ORPHAN_CHECK(orphan_start(&h, "full", knot_flags) == 0);
	ORPHAN_CHECK(orphan_ready_byte(&h) == 'r');
	ORPHAN_CHECK(kill(h.pid, SIGSTOP) == 0);
	ORPHAN_CHECK(waitpid(h.pid, &status, WUNTRACED) == h.pid);
	ORPHAN_CHECK(WIFSTOPPED(status));
	ORPHAN_CHECK(write(h.fd[GATE_W], "gg", 2) == 2);
	/* The first result fills the arena; the second task then replies. */
	ORPHAN_CHECK(orphan_ready_byte(&h) == 'd');
	ORPHAN_CHECK(orphan_ready_byte(&h) == 'r');
	ORPHAN_CHECK(orphan_ready_byte(&h) == 'd');
	ORPHAN_CHECK(kill(h.pid, SIGKILL) == 0);
	ORPHAN_CHECK(orphan_host_ended(&h, SIGKILL));
	ORPHAN_CHECK(orphan_worker_exits(&h, 0));
	ORPHAN_CHECK(orphan_worker_exits(&h, 1));
	return orphan_end(&h, NULL);
}

/* Both workers busy, their mailboxes full, and more calls coming. */
static const char *orphan_kill_loaded(unsigned int knot_flags)
{
	struct orphan_host h;

	ORPHAN_CHECK(orphan_start(&h, "load", knot_flags) == 0);
	ORPHAN_CHECK(orphan_worker_runs(&h, 0));
	ORPHAN_CHECK(orphan_worker_runs(&h, 1));
	ORPHAN_CHECK(kill(h.pid, SIGKILL) == 0);
	ORPHAN_CHECK(orphan_host_ended(&h, SIGKILL));
	ORPHAN_CHECK(orphan_worker_exits(&h, 0));
	ORPHAN_CHECK(orphan_worker_exits(&h, 1));
	return orphan_end(&h, NULL);
}

/* The host leaves without knitk_pool_destroy: "return" or "_exit". */
static const char *orphan_host_leaves(unsigned int knot_flags,
				      const char *mode)
{
	struct orphan_host h;

	ORPHAN_CHECK(orphan_start(&h, mode, knot_flags) == 0);
	ORPHAN_CHECK(write(h.fd[CMD_W], "x", 1) == 1);
	ORPHAN_CHECK(orphan_host_ended(&h, 0));
	ORPHAN_CHECK(orphan_worker_exits(&h, 0));
	ORPHAN_CHECK(orphan_worker_exits(&h, 1));
	return orphan_end(&h, NULL);
}

/*
 * The host leaves without destroying its pool in a way its pid outlives
 * ("exec", "thread_exec": it runs another program) or from a thread other
 * than main ("thread_exit").  Every worker exits within the grace; then
 * nothing is left: we are the subreaper of the host's workers, and once
 * the host is gone we reap every one of them, none still running.
 */
static const char *orphan_host_replaced(unsigned int knot_flags, const char *mode)
{
	bool execs = strstr(mode, "exec") != NULL;
	struct orphan_host h;
	const char *fail = NULL;
	char stat[512];
	unsigned int w, running = 0;
	int status;
	DIR *dir;
	pid_t p;

	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		return "prctl(PR_SET_CHILD_SUBREAPER)";
	if (orphan_start(&h, mode, knot_flags)) {
		fail = "orphan_start";
		goto out;
	}
	if (write(h.fd[CMD_W], "x", 1) != 1) {
		fail = "write(CMD_W)";
		goto out;
	}
	if (!execs && !orphan_host_ended(&h, 0)) {
		fail = "the host exited with status 0";
		goto out;
	}
	for (w = 0; w < ORPHAN_WORKERS; w++) {
		if (!orphan_worker_exits_within(&h, w, ORPHAN_GRACE_MS)) {
			printf("# worker %u still runs %d ms after the host's %s\n",
			       w, ORPHAN_GRACE_MS, mode);
			fail = "every worker exits within the grace";
		}
	}
	/* The pid lived on: the host runs its new program. */
	if (execs && waitpid(h.pid, &status, WNOHANG) != 0)
		fail = fail ? fail : "the exec'd host still runs";
out:
	/* A worker left running by a failure is killed, not left behind. */
	for (w = 0; w < ORPHAN_WORKERS; w++)
		if (h.pidfd[w] >= 0)
			syscall(SYS_pidfd_send_signal, h.pidfd[w], SIGKILL, NULL, 0);
	orphan_end(&h, NULL);
	/* The host's children are ours now: none may still run. */
	dir = opendir("/proc");
	while (dir && (p = proc_next_child(dir, stat, sizeof(stat))))
		running += proc_stat_state(stat) != 'Z';
	if (dir)
		closedir(dir);
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	prctl(PR_SET_CHILD_SUBREAPER, 0);
	if (!fail && running)
		fail = "a child of the host still runs after it";
	return fail;
}

#endif /* KNITK_ORPHAN_H */
