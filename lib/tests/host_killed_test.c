// SPDX-License-Identifier: GPL-2.0
/*
 * The host SIGKILLed: with its workers blocked on full return mailboxes,
 * with workers stopped, during its destroy with twelve workers, with
 * three pools, with a forked child of the host alive or exec'd, with a
 * respawn under way, holding unsent loans, and with its workers busy in a
 * task or idle; every worker exits.
 * argv[1] scales the counts (1000000 plain).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "pool_kill.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

enum host_at {
	H_FULL,		/* the host stopped, its workers' results piling up */
	H_STOP_ONE,	/* a worker stopped, continued after the host's death */
	H_STOP_ALL,	/* every worker stopped, continued after it */
	H_DESTROY,	/* twelve workers, killed in its destroy */
	H_THREE,	/* three pools in one host */
	H_FORK_PAUSE,	/* a forked child of the host lives on */
	H_FORK_EXEC,	/* a forked child of the host execs sleep */
	H_RESPAWN,	/* a worker killed, its respawn held in the wrapper */
	H_LOANS,	/* loans taken, some sent, the rest held unsent */
	H_NR,
};

static const char *const host_at_name[H_NR] = {
	"host stopped, results piling up", "a worker stopped",
	"every worker stopped", "in destroy, 12 workers", "three pools",
	"a forked child pausing", "a forked child exec'd",
	"a respawn under way", "unsent loans held",
};

struct host_flow {
	struct knitk_pool *pool;
	enum host_at at;
	_Atomic int stop;
	_Atomic unsigned long done;
	unsigned int seed;
	unsigned int held;	/* H_LOANS: loans held unsent */
};

/*
 * H_LOANS: two loans of T_MIX(@x) written in place, the first sent (in a
 * batch of one) and waited for, the second kept unsent until the flow
 * holds HOST_LOANS of them, then sent too.  Those held are never sent nor
 * released: the host dies with them.
 */
#define HOST_LOANS	8

static void host_flow_loans(struct host_flow *f, uint64_t x)
{
	struct knitk_call *c[2];
	unsigned int i;
	void *buf;

	for (i = 0; i < 2; i++) {
		if (knitk_pool_loan(f->pool, T_MIX, 8, NULL, &c[i], &buf))
			_exit(23);
		memcpy(buf, &x, 8);
	}
	if (f->held < HOST_LOANS)
		f->held++;
	else if (knitk_pool_submit_loan(c[1]))
		_exit(24);
	if (knitk_pool_submit_loans(c, 1) != 1)
		_exit(25);
	if (knitk_call_wait(c[0], KNITK_WAIT_FOREVER) || !mix_result_ok(c[0], x))
		_exit(26);
	knitk_call_release(c[0]);
	atomic_fetch_add(&f->done, 1);
}

static void *host_flow_fn(void *arg)
{
	struct host_flow *f = arg;
	uint64_t seed = f->seed, x = f->seed;
	struct { uint32_t n; uint8_t seed; } fill = { 60000, 3 };
	struct knitk_call *c;

	while (!atomic_load(&f->stop)) {
		uint64_t r = rnd(&seed);
		int ret;

		if (f->at == H_FULL) {
			/* Big results, never waited for nor released. */
			ret = knitk_pool_submit(f->pool, T_FILL, &fill, 5, NULL, &c);
			if (ret)
				_exit(20);
			atomic_fetch_add(&f->done, 1);
			continue;
		}
		if (f->at == H_DESTROY) {
			uint32_t ms = 1 + (uint32_t)(r % 3);

			/* Left running for the destroy to cancel. */
			if (knitk_pool_submit(f->pool, T_SLEEP, &ms, 4, NULL, &c))
				_exit(21);
			atomic_fetch_add(&f->done, 1);
			continue;
		}
		x++;
		if (f->at == H_LOANS) {
			host_flow_loans(f, x);
			continue;
		}
		ret = knitk_pool_submit(f->pool, r % 4 ? T_MIX : T_SLEEP,
					r % 4 ? (void *)&x : (void *)&(uint32_t){ 1 },
					r % 4 ? 8 : 4, NULL, &c);
		if (ret)
			_exit(22);
		knitk_call_wait(c, KNITK_WAIT_FOREVER);
		knitk_call_release(c);
		atomic_fetch_add(&f->done, 1);
	}
	return NULL;
}

static void host_say(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		_exit(9);
}

static void host_main(enum host_at at, int fd)
{
	struct knitk_pool_opts o[3] = {
		{ .size = sizeof(o[0]), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		  .dispatch = KNITK_POOL_DISPATCH_STEAL },
		{ .size = sizeof(o[0]), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		  .dispatch = KNITK_POOL_DISPATCH_PRIVATE },
		{ .size = sizeof(o[0]), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
		  .dispatch = KNITK_POOL_DISPATCH_STEAL, .flags = KNITK_POOL_RESPAWN },
	};
	struct host_flow fl[3][2];
	pthread_t th[3][2];
	unsigned int np = at == H_THREE ? 3 : 1, p, t, w;
	pid_t kid;

	if (at == H_FULL)
		o[0].dispatch = (unsigned int)(getpid() % 2);
	if (at == H_DESTROY)
		o[0].nr_workers = 12;
	if (at == H_LOANS)
		o[0].dispatch = (unsigned int)(getpid() % 2);
	if (at == H_RESPAWN) {
		o[0].flags = KNITK_POOL_RESPAWN;
		o[0].prefix_argv = wrapper;
		o[0].dispatch = (unsigned int)(getpid() % 2);
	}
	for (p = 0; p < np; p++) {
		struct knitk_pool *pool;

		if (knitk_pool_create(&o[p], &test_tasks, &pool))
			_exit(3);
		for (w = 0; w < o[p].nr_workers; w++) {
			int pid = worker_pid(pool, w, NULL);

			if (pid <= 0)
				_exit(4);
			hsh->pids[atomic_fetch_add(&hsh->npids, 1)] = pid;
		}
		for (t = 0; t < 2; t++) {
			fl[p][t] = (struct host_flow){ .pool = pool, .at = at,
						       .seed = p * 2 + t + 1 };
			if (pthread_create(&th[p][t], NULL, host_flow_fn, &fl[p][t]))
				_exit(5);
		}
	}
	while (atomic_load(&fl[0][0].done) + atomic_load(&fl[0][1].done) < 8)
		usleep(100);
	if (at == H_FORK_PAUSE || at == H_FORK_EXEC) {
		kid = fork();
		if (kid < 0)
			_exit(6);
		if (kid == 0) {
			if (at == H_FORK_EXEC)
				execlp("sleep", "sleep", "1000", (char *)NULL);
			for (;;)
				pause();
		}
		atomic_store(&hsh->kid, kid);
	}
	if (at == H_DESTROY) {
		for (t = 0; t < 2; t++)
			atomic_store(&fl[0][t].stop, 1);
		for (t = 0; t < 2; t++)
			pthread_join(th[0][t], NULL);
		host_say(fd, 'D');
		knitk_pool_destroy(fl[0][0].pool);
		host_say(fd, 'E');
	} else {
		host_say(fd, 'R');
	}
	for (;;)
		pause();
}

static bool pid_gone(int pid)
{
	char path[64];
	int r = waitpid(pid, NULL, WNOHANG);

	if (r == pid)
		return true;
	snprintf(path, sizeof(path), "/proc/%d", pid);
	if (r < 0 && errno == ECHILD && access(path, F_OK))
		return true;
	return false;
}

/* One host, killed at @at: 0, or how many workers outlived it. */
static unsigned int host_kill_one(enum host_at at, uint64_t *seed)
{
	unsigned int left = 0, i, n;
	int pfd[2], kid;
	uint64_t end;
	pid_t host;
	char c = 0;

	memset(hsh, 0, sizeof(*hsh));
	if (pipe(pfd))
		return 1000;
	host = fork();
	if (host < 0)
		return 1000;
	if (host == 0) {
		close(pfd[0]);
		host_main(at, pfd[1]);
	}
	close(pfd[1]);
	if (read(pfd[0], &c, 1) != 1) {
		printf("# %s: the host ended early\n", host_at_name[at]);
		left = 1000;
	}
	n = (unsigned int)atomic_load(&hsh->npids);
	switch (at) {
	case H_FULL:
		kill(host, SIGSTOP);
		sleep_us(20000 + rnd(seed) % 20000);
		break;
	case H_STOP_ONE:
		kill(hsh->pids[rnd(seed) % n], SIGSTOP);
		sleep_us(rnd(seed) % 2000);
		break;
	case H_STOP_ALL:
		for (i = 0; i < n; i++)
			kill(hsh->pids[i], SIGSTOP);
		sleep_us(rnd(seed) % 2000);
		break;
	case H_DESTROY:
		sleep_us(rnd(seed) % 3000);
		break;
	case H_RESPAWN:
		flag_set(hold_path, true);
		kill(hsh->pids[0], SIGKILL);
		sleep_us(rnd(seed) % 20000);
		break;
	default:
		sleep_us(rnd(seed) % 20000);
		break;
	}
	kill(host, SIGKILL);
	waitpid(host, NULL, 0);
	close(pfd[0]);
	if (at == H_RESPAWN)
		flag_set(hold_path, false);
	if (at == H_STOP_ONE || at == H_STOP_ALL) {
		sleep_us(10000);
		for (i = 0; i < n; i++)
			kill(hsh->pids[i], SIGCONT);
	}
	/* Every worker must exit; a forked child of the host lives on. */
	end = now_ms() + HANG_MS;
	for (i = 0; i < n && !left;) {
		if (pid_gone(hsh->pids[i])) {
			i++;
			continue;
		}
		if (now_ms() > end) {
			printf("# %s: worker %d of %u outlived its host\n",
			       host_at_name[at], hsh->pids[i], n);
			left += n - i;
			break;
		}
		usleep(1000);
	}
	kid = atomic_load(&hsh->kid);
	if (kid > 0) {
		if (pid_gone(kid)) {
			printf("# the forked child is gone too early\n");
			left++;
		}
		kill(kid, SIGKILL);
		waitpid(kid, NULL, 0);
	}
	/* Every other descendant ends by itself too. */
	end = now_ms() + HANG_MS;
	while (!left) {
		pid_t r = waitpid(-1, NULL, WNOHANG);

		if (r > 0)
			continue;
		if (r < 0 || now_ms() > end)
			break;
		usleep(1000);
	}
	/* Nothing else may be left. */
	left += kill_children(true);
	return left;
}

static void host_kills(enum host_at at, unsigned int iters)
{
	uint64_t seed = now_ms() ^ at;
	unsigned int i, left = 0;

	for (i = 0; i < iters && !left; i++)
		left += host_kill_one(at, &seed);
	printf("# %s: %u hosts killed, %u processes left\n", host_at_name[at], i, left);
	CHECK_EQ(left, 0);
}

static void host_killed_results_piling_up(void) { host_kills(H_FULL, scaled(30, 3)); }
static void host_killed_worker_stopped(void) { host_kills(H_STOP_ONE, scaled(30, 3)); }
static void host_killed_workers_all_stopped(void) { host_kills(H_STOP_ALL, scaled(30, 3)); }
static void host_killed_in_destroy_12_workers(void) { host_kills(H_DESTROY, scaled(20, 2)); }
static void host_killed_three_pools(void) { host_kills(H_THREE, scaled(20, 2)); }
static void host_killed_forked_child_pausing(void) { host_kills(H_FORK_PAUSE, scaled(20, 2)); }
static void host_killed_forked_child_execd(void) { host_kills(H_FORK_EXEC, scaled(20, 2)); }
static void host_killed_respawn_under_way(void) { host_kills(H_RESPAWN, scaled(20, 2)); }
static void host_killed_holding_loans(void) { host_kills(H_LOANS, scaled(20, 2)); }

/*
 * A host (child of ours) with two process workers, busy in a task of
 * 300 ms (the header promises no abort on host death, so it may finish)
 * or idle, is SIGKILLed: both workers exit (we hold pidfds of them and
 * wait, with no timeout, for each to become readable).
 */
static void host_killed_with_workers(bool busy)
{
	int pfd[2], pidfds[2], i;
	pid_t host, pids[2];

	REQUIRE(pipe(pfd) == 0);
	host = fork();
	REQUIRE(host >= 0);
	if (host == 0) {
		struct knitk_pool_opts po = { .size = sizeof(po), .kind = KNITK_WORKER_PROCESSES,
					      .nr_workers = 2, .nr_submitters = 4 };
		struct knitk_call_opts o = { .size = sizeof(o), .flags = KNITK_CALL_WORKER };
		struct knitk_worker_info wi = { .size = sizeof(wi) };
		struct knitk_call *c[2];
		struct knitk_pool *p;
		uint32_t ms = 300;
		int j;

		if (knitk_pool_create(&po, &test_tasks, &p))
			_exit(1);
		for (j = 0; j < 2 && busy; j++) {
			o.worker = j;
			if (knitk_pool_submit(p, T_SLEEP, &ms, 4, &o, &c[j]))
				_exit(2);
		}
		/* Busy: wait until both tasks run (no result: they sleep). */
		for (j = 0; j < 2; j++) {
			do {
				usleep(1000);
				if (knitk_pool_worker_info(p, j, &wi))
					_exit(3);
			} while (busy && wi.inflight == 0);
			pids[j] = wi.pid;
		}
		if (write(pfd[1], pids, sizeof(pids)) != sizeof(pids))
			_exit(4);
		for (;;)
			pause();
	}
	close(pfd[1]);
	REQUIRE(read(pfd[0], pids, sizeof(pids)) == sizeof(pids));
	close(pfd[0]);
	for (i = 0; i < 2; i++) {
		pidfds[i] = (int)syscall(SYS_pidfd_open, pids[i], 0);
		CHECK(pidfds[i] >= 0);
	}
	kill(host, SIGKILL);
	waitpid(host, NULL, 0);
	for (i = 0; i < 2; i++) {
		struct pollfd pp = { .fd = pidfds[i], .events = POLLIN };

		if (pidfds[i] < 0)
			continue;
		while (poll(&pp, 1, -1) < 0 && errno == EINTR)
			;
		CHECK(pp.revents & POLLIN);
		close(pidfds[i]);
		/* Orphans come to us as the subreaper. */
		waitpid(pids[i], NULL, 0);
	}
	CHECK(no_children());
}

static void host_killed_workers_busy(void) { host_killed_with_workers(true); }
static void host_killed_workers_idle(void) { host_killed_with_workers(false); }

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    deaths_init(argc, argv))
		return 1;
	TEST(host_killed_results_piling_up);
	TEST(host_killed_worker_stopped);
	TEST(host_killed_workers_all_stopped);
	TEST(host_killed_in_destroy_12_workers);
	TEST(host_killed_three_pools);
	TEST(host_killed_forked_child_pausing);
	TEST(host_killed_forked_child_execd);
	TEST(host_killed_respawn_under_way);
	TEST(host_killed_holding_loans);
	/* Last: a worker that outlives its host hangs these until the watchdog. */
	TEST(host_killed_workers_busy);
	TEST(host_killed_workers_idle);
	deaths_fini();
	return tap_exit();
}
