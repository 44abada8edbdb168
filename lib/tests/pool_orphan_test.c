// SPDX-License-Identifier: GPL-2.0
/*
 * Process workers do not outlive their host (futex backend).  A host - a
 * copy of this program started with --host - makes a process pool and
 * reports its workers' pids; then it is SIGKILLed with its workers idle,
 * SIGKILLed while one runs a task, SIGKILLed while one waits for room for
 * its result, or returns from main (or calls _exit) without destroying
 * the pool.  Every worker must exit: an idle one at once, a busy one after
 * its task.  The workers are not our children: we watch them with pidfds
 * (a hang is the watchdog's to catch).
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"

#define NR_WORKERS	2
#define ARENA		4096

/* The pipes between us, the host and its workers (inherited, no CLOEXEC). */
enum { REPORT_R, REPORT_W, CMD_R, CMD_W, READY_R, READY_W, GATE_R, GATE_W,
       NR_FDS };

/* The host's pool, reachable until the host's end (no leak reported). */
static struct knitk_pool *host_pool;

/* --host <mode> <fds...>: make the pool, report, then do as @mode says. */
static int run_host(char **argv)
{
	struct knitk_pool_opts o = { .kind = KNITK_WORKER_PROCESSES,
				     .nr_workers = NR_WORKERS,
				     .arena_bytes = ARENA,
				     .knot_flags = KNITK_KNOT_FUTEX };
	struct knitk_call_opts co = { .flags = KNITK_CALL_WORKER, .worker = 0 };
	const char *mode = argv[2];
	struct { int32_t ready, gate; uint32_t n; } gate;
	int fd[NR_FDS], i, nr_gates = 0;
	struct knitk_worker_info wi;
	struct knitk_call *c;
	int32_t pids[NR_WORKERS];
	char b;

	for (i = 0; i < NR_FDS; i++)
		fd[i] = atoi(argv[3 + i]);
	gate.ready = fd[READY_W];
	gate.gate = fd[GATE_R];
	gate.n = 0;
	if (!strcmp(mode, "busy")) {
		nr_gates = 1;
	} else if (!strcmp(mode, "full")) {
		/* Two results of a whole arena: the second waits for room. */
		nr_gates = 2;
		gate.n = ARENA;
	}
	if (knitk_pool_create(&o, &test_tasks, &host_pool))
		return 10;
	for (i = 0; i < NR_WORKERS; i++) {
		if (knitk_pool_worker_info(host_pool, (unsigned int)i, &wi))
			return 11;
		pids[i] = wi.pid;
	}
	for (i = 0; i < nr_gates; i++)
		if (knitk_pool_submit(host_pool, T_GATE, &gate, sizeof(gate), &co, &c))
			return 12;
	if (write(fd[REPORT_W], pids, sizeof(pids)) != sizeof(pids))
		return 13;
	if (read(fd[CMD_R], &b, 1) != 1)
		return 14;
	/* "return" and "_exit": leave with the pool and its calls as they are. */
	if (!strcmp(mode, "_exit"))
		_exit(0);
	return 0;
}

struct host {
	pid_t pid;
	int fd[NR_FDS];
	int pidfd[NR_WORKERS];	/* of its workers */
};

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Start a host in @mode; 0 once its workers' pidfds are open. */
static int host_start(struct host *h, const char *mode)
{
	char num[NR_FDS][16], *argv[4 + NR_FDS] = { "/proc/self/exe", "--host",
						    (char *)mode };
	extern char **environ;
	int32_t pids[NR_WORKERS];
	int i;

	for (i = 0; i < NR_FDS; i += 2)
		if (pipe(&h->fd[i]))
			return -1;
	for (i = 0; i < NR_FDS; i++) {
		snprintf(num[i], sizeof(num[i]), "%d", h->fd[i]);
		argv[3 + i] = num[i];
	}
	argv[3 + NR_FDS] = NULL;
	if (posix_spawn(&h->pid, argv[0], NULL, NULL, argv, environ))
		return -1;
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
	for (i = 0; i < NR_WORKERS; i++) {
		printf("# worker %d: pid %d\n", i, pids[i]);
		/* Live: the host has not reaped them, the pids are theirs. */
		h->pidfd[i] = pidfd_open_(pids[i]);
		if (h->pidfd[i] < 0)
			return -1;
	}
	return 0;
}

/* Worker @w has exited (waits for it). */
static bool worker_exits(struct host *h, unsigned int w)
{
	struct pollfd p = { .fd = h->pidfd[w], .events = POLLIN };
	int n;

	while ((n = poll(&p, 1, -1)) < 0 && errno == EINTR)
		;
	return n == 1 && (p.revents & POLLIN);
}

/* Worker @w is still running now. */
static bool worker_runs(struct host *h, unsigned int w)
{
	struct pollfd p = { .fd = h->pidfd[w], .events = POLLIN };

	return poll(&p, 1, 0) == 0;
}

/* The host, our child, ended by signal @sig (0: exited with status 0). */
static bool host_ended(struct host *h, int sig)
{
	int status;

	if (waitpid(h->pid, &status, 0) != h->pid)
		return false;
	return sig ? WIFSIGNALED(status) && WTERMSIG(status) == sig :
		     WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The next byte the workers' tasks wrote, or 0 at end-of-file. */
static char ready_byte(struct host *h)
{
	char b = 0;

	return read(h->fd[READY_R], &b, 1) == 1 ? b : 0;
}

static void host_close(struct host *h)
{
	int i;

	for (i = 0; i < NR_FDS; i++)
		if (h->fd[i] >= 0)
			close(h->fd[i]);
	for (i = 0; i < NR_WORKERS; i++)
		close(h->pidfd[i]);
}

static void kill_idle(void)
{
	struct host h;

	REQUIRE(host_start(&h, "idle") == 0);
	CHECK_EQ(kill(h.pid, SIGKILL), 0);
	CHECK(host_ended(&h, SIGKILL));
	CHECK(worker_exits(&h, 0));
	CHECK(worker_exits(&h, 1));
	host_close(&h);
}

/* Worker 0 is in a task: it finishes the task, then exits. */
static void kill_busy(void)
{
	struct host h;

	REQUIRE(host_start(&h, "busy") == 0);
	CHECK_EQ(ready_byte(&h), 'r');
	CHECK_EQ(kill(h.pid, SIGKILL), 0);
	CHECK(host_ended(&h, SIGKILL));
	/* The idle one goes at once; the busy one is held in its task. */
	CHECK(worker_exits(&h, 1));
	CHECK(worker_runs(&h, 0));
	CHECK_EQ(write(h.fd[GATE_W], "g", 1), 1);
	CHECK_EQ(ready_byte(&h), 'd');
	CHECK(worker_exits(&h, 0));
	host_close(&h);
}

/*
 * Worker 0's task waits for room for its result in an arena the host
 * never empties (it is stopped, then killed): it must give up, and exit.
 */
static void kill_result_waiting(void)
{
	struct host h;
	int status;

	REQUIRE(host_start(&h, "full") == 0);
	CHECK_EQ(ready_byte(&h), 'r');
	CHECK_EQ(kill(h.pid, SIGSTOP), 0);
	CHECK_EQ(waitpid(h.pid, &status, WUNTRACED), h.pid);
	CHECK(WIFSTOPPED(status));
	CHECK_EQ(write(h.fd[GATE_W], "gg", 2), 2);
	/* The first result fills the arena; the second task then replies. */
	CHECK_EQ(ready_byte(&h), 'd');
	CHECK_EQ(ready_byte(&h), 'r');
	CHECK_EQ(ready_byte(&h), 'd');
	CHECK_EQ(kill(h.pid, SIGKILL), 0);
	CHECK(host_ended(&h, SIGKILL));
	CHECK(worker_exits(&h, 0));
	CHECK(worker_exits(&h, 1));
	host_close(&h);
}

/* The host leaves without knitk_pool_destroy, by @mode. */
static void host_leaves(const char *mode)
{
	struct host h;

	REQUIRE(host_start(&h, mode) == 0);
	CHECK_EQ(write(h.fd[CMD_W], "x", 1), 1);
	CHECK(host_ended(&h, 0));
	CHECK(worker_exits(&h, 0));
	CHECK(worker_exits(&h, 1));
	host_close(&h);
}

static void return_from_main(void)
{
	host_leaves("return");
}

static void exit_without_destroy(void)
{
	host_leaves("_exit");
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 2;
	if (argc == 3 + NR_FDS && !strcmp(argv[1], "--host"))
		return run_host(argv);
	TEST(kill_idle);
	TEST(kill_busy);
	TEST(kill_result_waiting);
	TEST(return_from_main);
	TEST(exit_without_destroy);
	return tap_exit();
}
