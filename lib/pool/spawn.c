// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Process workers: starting them, and seeing them die on the futex backend.
 *
 * A worker process is started with posix_spawn (never fork in a threaded
 * host): [prefix argv...] worker_path [worker argv...], with POOL_ENV set
 * to "fd,worker,spin,hostfd,g,pipefd,lifefd" (g: stealing region lanes,
 * 0 = private).  The knot fd crosses by inheritance: it is O_CLOEXEC in the
 * host, and a dup2 onto itself in the spawn's file actions clears the flag
 * in the child only, so no other child inherits it; so do hostfd, the
 * host's own pidfd, pipefd, the read end of the host pipe, and lifefd, the
 * page of lifelines (lifeline.c), on the futex backend (else -1).  The child
 * calls knitk_worker_main(), attaches with KNITK_ATTACH_TAKE_FD and joins.
 * knitk__spawn_worker() returns once the role shows the new join (a one-time
 * handshake: it polls the child's pidfd with a short timeout so a child
 * that exits before joining is an error, not a hang).
 *
 * Deaths: with the module, the kernel marks a worker's role dead when its
 * process exits or closes its endpoint (whatever children it forked hold)
 * and rings the host, or, when the host goes, every worker.  On the futex
 * backend the lifeline thread (lifeline.c) sees a worker's loop thread
 * exit, and the monitor thread polls every worker's pidfd (for a worker
 * without a lifeline, and as a backstop); the first of them calls
 * knitk_endpoint_mark_dead(), which does the same; and in each worker process
 * a watch thread polls the host's pidfd and the host pipe and marks the
 * host dead, so a worker whose host was killed, left without destroying its
 * pool or exec'd another program, sees the host gone (-EPIPE) when it
 * parks or between two calls, and exits.  The pidfd fires when the host
 * exits (however: a signal, exit, _exit from any thread); an exec keeps
 * the pid, so the pidfd never fires for it, but it closes the write end
 * of the host pipe, which only the host holds (O_CLOEXEC: the workers
 * get only the read end), and the watch sees the hang-up.  A child the
 * host forks without exec shares that end, and keeps the pipe open after
 * the host's exec until it execs or exits too.
 * A pidfd, not PR_SET_PDEATHSIG: that fires when the spawning *thread*
 * ends (the first workers start on the creating thread, respawns on the
 * completer) and not at all through a
 * prefix command, and a pidfd crosses pid namespaces.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool_internal.h"
#include "process.h"

extern char **environ;

static int pidfd_open_(pid_t pid)
{
	long fd = syscall(SYS_pidfd_open, pid, 0);

	return fd < 0 ? -errno : (int)fd;
}

static unsigned int argv_count(char *const *argv)
{
	unsigned int n = 0;

	while (argv && argv[n])
		n++;
	return n;
}

/* environ without POOL_ENV, plus @var; NULL on ENOMEM. */
static char **worker_env(char *var)
{
	size_t n = 0, i, j = 0, plen = strlen(POOL_ENV);
	char **env;

	while (environ && environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		return NULL;
	for (i = 0; i < n; i++)
		if (strncmp(environ[i], POOL_ENV "=", plen + 1))
			env[j++] = environ[i];
	env[j++] = var;
	env[j] = NULL;
	return env;
}

/* Wait for child @pid to exit and reap it, through signals (EINTR). */
void knitk__spawn_reap(pid_t pid)
{
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/*
 * Wait for the child to join role @w (generation past @gen); *@joined:
 * the generation seen live, or with @respawn the one it joined with
 * before it was gone.
 */
static int spawn_wait_join(struct knitk_pool *pool, unsigned int w,
			   uint32_t gen, int pidfd, bool respawn, uint32_t *joined)
{
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

	for (;;) {
		uint32_t g;

		/* Live, with a generation at least that of its join. */
		if (knitk_endpoint_role(pool->ep, w, &g) == 1 && g != gen) {
			*joined = g;
			return 0;
		}
		if (poll(&pfd, 1, 2) > 0)
			break;
	}
	/*
	 * Gone.  A successor that joined first (a queued call it took may
	 * have ended it) was a worker, whose death the pool handles as any
	 * other's, with the calls it held; one that never joined held none.
	 * A first worker that dies at once fails the pool's create instead.
	 */
	if (respawn && knitk_endpoint_role(pool->ep, w, joined) >= 0 && *joined != gen)
		return 0;
	return -ECHILD;
}

int knitk__spawn_worker(struct knitk_pool *pool, unsigned int w, bool respawn)
{
	struct pool_worker *pw = &pool->workers[w];
	unsigned int np = argv_count(pool->opts.prefix_argv);
	unsigned int na = argv_count(pool->opts.worker_argv);
	posix_spawn_file_actions_t fa;
	int fd = knitk_endpoint_fd(pool->ep);
	char var[64], **argv, **env;
	unsigned int i, n = 0;
	uint32_t gen, joined = 0;
	pid_t pid;
	int ret, pidfd;

	snprintf(var, sizeof(var), POOL_ENV "=%d,%u,%u,%d,%u,%d,%d", fd, w,
		 pool->opts.spin, pool->host_pidfd, pool->steal_g,
		 pool->host_pipe[0], pool->lifeline_fd);
	argv = calloc(np + na + 2, sizeof(*argv));
	env = worker_env(var);
	if (!argv || !env) {
		free(argv);
		free(env);
		return -ENOMEM;
	}
	for (i = 0; i < np; i++)
		argv[n++] = pool->opts.prefix_argv[i];
	argv[n++] = pool->exe;
	for (i = 0; i < na; i++)
		argv[n++] = pool->opts.worker_argv[i];
	argv[n] = NULL;

	knitk_endpoint_role(pool->ep, w, &gen);
	ret = posix_spawn_file_actions_init(&fa);
	if (!ret) {
		/* dup2 onto itself clears FD_CLOEXEC, in the child only. */
		ret = posix_spawn_file_actions_adddup2(&fa, fd, fd);
		if (!ret && pool->host_pidfd >= 0)
			ret = posix_spawn_file_actions_adddup2(&fa, pool->host_pidfd,
							       pool->host_pidfd);
		/* The read end only: the write end stays the host's alone. */
		if (!ret && pool->host_pipe[0] >= 0)
			ret = posix_spawn_file_actions_adddup2(&fa, pool->host_pipe[0],
							       pool->host_pipe[0]);
		if (!ret && pool->lifeline_fd >= 0)
			ret = posix_spawn_file_actions_adddup2(&fa, pool->lifeline_fd,
							       pool->lifeline_fd);
		if (!ret)
			ret = posix_spawnp(&pid, argv[0], &fa, NULL, argv, env);
		posix_spawn_file_actions_destroy(&fa);
	}
	free(argv);
	free(env);
	if (ret)
		return -ret;
	pidfd = pidfd_open_(pid);
	if (pidfd < 0) {
		kill(pid, SIGKILL);
		knitk__spawn_reap(pid);
		return pidfd;
	}
	ret = spawn_wait_join(pool, w, gen, pidfd, respawn, &joined);
	if (ret) {
		kill(pid, SIGKILL);
		knitk__spawn_reap(pid);
		close(pidfd);
		return ret;
	}
	/* Only the futex backend's monitor needs it from now on. */
	if (!pool->monitor_started) {
		close(pidfd);
		pidfd = -1;
	}
	pthread_mutex_lock(&pool->lock);
	pw->pid = pid;
	pw->pidfd = pidfd;
	pw->join_gen = joined;
	/* Its death is reported once, by the first to see it. */
	atomic_store_explicit(&pw->watch, POOL_WATCH_ARMED | joined,
			      memory_order_relaxed);
	pthread_mutex_unlock(&pool->lock);
	knitk__monitor_poke(pool);
	return 0;
}

/*
 * A worker the pool saw die: its process may outlive the thread that
 * served (an exec, a task that ended that thread), so end it, then reap.
 * Not reaped yet, so the pid is still our child's.
 */
void knitk__spawn_reap_dead(pid_t pid)
{
	kill(pid, SIGKILL);
	knitk__spawn_reap(pid);
}

/*
 * The completer, after reaping dead worker @w's process, pool->lock held:
 * its pidfd, if the monitor has not closed it yet (the lifeline saw the
 * death first), is ours to close, before a successor's takes its place.
 */
int knitk__spawn_take_pidfd(struct knitk_pool *pool, unsigned int w)
{
	int fd = pool->workers[w].pidfd;

	pool->workers[w].pidfd = -1;
	return fd;
}

/* ------------------------------------------------ futex: death monitor */

void knitk__monitor_poke(struct knitk_pool *pool)
{
	uint64_t one = 1;

	if (pool->monitor_efd >= 0 && write(pool->monitor_efd, &one, sizeof(one)) < 0) {
		/* The counter cannot overflow in practice; nothing to do. */
	}
	knitk__lifeline_poke(pool);
}

static void *monitor_main(void *arg)
{
	struct knitk_pool *pool = arg;
	struct pollfd pfd[KNITK_MAX_WORKERS + 1];
	unsigned int who[KNITK_MAX_WORKERS + 1];
	uint32_t gen[KNITK_MAX_WORKERS + 1];

	for (;;) {
		unsigned int n = 1, i, w;
		bool mine;
		uint64_t v;

		pfd[0].fd = pool->monitor_efd;
		pfd[0].events = POLLIN;
		pthread_mutex_lock(&pool->lock);
		if (pool->monitor_stop) {
			pthread_mutex_unlock(&pool->lock);
			break;
		}
		for (w = 0; w < pool->nr_workers; w++) {
			if (pool->workers[w].pidfd < 0)
				continue;
			pfd[n].fd = pool->workers[w].pidfd;
			pfd[n].events = POLLIN;
			gen[n] = pool->workers[w].join_gen;
			who[n++] = w;
		}
		pthread_mutex_unlock(&pool->lock);
		if (poll(pfd, n, -1) < 0)
			continue;
		if (pfd[0].revents & POLLIN) {
			if (read(pool->monitor_efd, &v, sizeof(v)) < 0) {
				/* EAGAIN: someone else drained it. */
			}
		}
		for (i = 1; i < n; i++) {
			if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			w = who[i];
			/*
			 * Whoever takes a pidfd out of its worker, under
			 * pool->lock, closes it: we, or the completer after a
			 * death the lifeline saw first (knitk__spawn_take_pidfd),
			 * in which case the number may already be a successor's.
			 */
			pthread_mutex_lock(&pool->lock);
			mine = pool->workers[w].pidfd == pfd[i].fd &&
			       pool->workers[w].join_gen == gen[i];
			if (mine)
				pool->workers[w].pidfd = -1;
			pthread_mutex_unlock(&pool->lock);
			if (mine)
				close(pfd[i].fd);
			POOL_HOOK(pool, POOL_HOOK_NOTICE, w);
			knitk__death_notice(pool, w, gen[i]);
		}
	}
	return NULL;
}

int knitk__monitor_start(struct knitk_pool *pool)
{
	int ret;

	/* For the workers' watch of us (O_CLOEXEC, like every pidfd). */
	pool->host_pidfd = pidfd_open_(getpid());
	if (pool->host_pidfd < 0)
		return pool->host_pidfd;
	/* Both ends O_CLOEXEC: an exec of the host closes the write end. */
	if (pipe2(pool->host_pipe, O_CLOEXEC) < 0) {
		pool->host_pipe[0] = -1;
		pool->host_pipe[1] = -1;
		return -errno;
	}
	pool->monitor_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (pool->monitor_efd < 0)
		return -errno;
	ret = pthread_create(&pool->monitor, NULL, monitor_main, pool);
	if (ret)
		return -ret;
	pool->monitor_started = true;
	return knitk__lifeline_start(pool);
}

void knitk__monitor_stop(struct knitk_pool *pool)
{
	/* Destroy: no worker is started after this. */
	if (pool->host_pidfd >= 0)
		close(pool->host_pidfd);
	pool->host_pidfd = -1;
	if (pool->host_pipe[0] >= 0)
		close(pool->host_pipe[0]);
	if (pool->host_pipe[1] >= 0)
		close(pool->host_pipe[1]);
	pool->host_pipe[0] = -1;
	pool->host_pipe[1] = -1;
	if (!pool->monitor_started)
		return;
	pthread_mutex_lock(&pool->lock);
	pool->monitor_stop = true;
	pthread_mutex_unlock(&pool->lock);
	knitk__monitor_poke(pool);
	pthread_join(pool->monitor, NULL);
	pool->monitor_started = false;
	knitk__lifeline_stop(pool);
}

/* ------------------------------------ futex: the worker's watch of its host */

static void *host_watch_main(void *arg)
{
	struct host_watch *hw = arg;
	/* A negative fd is skipped by poll(): a host without the pipe. */
	struct pollfd pfd[3] = {
		{ .fd = hw->pidfd, .events = POLLIN },
		{ .fd = hw->efd, .events = POLLIN },
		{ .fd = hw->pipefd, .events = POLLIN },
	};

	for (;;) {
		if (poll(pfd, 3, -1) < 0)
			continue;
		if (pfd[1].revents)
			return NULL;
		/*
		 * The host exited (pidfd), or exec'd or exited (the pipe:
		 * POLLHUP once its only write end is closed; nobody writes
		 * to it, so any event is that).  As the host's own release
		 * would, this kicks every worker doorbell, and the worker
		 * loop sees the host dead.
		 */
		if (pfd[0].revents || pfd[2].revents) {
			knitk_endpoint_mark_dead(hw->ep, KNITK_DOORBELL_HOST);
			return NULL;
		}
	}
}

/*
 * In the worker, before it joins: watch the host of pidfd @host_pidfd and
 * of the host pipe's read end @host_pipe (-1: a host without it).
 */
int knitk__host_watch_start(struct host_watch *hw, struct knitk_endpoint *ep,
			    int host_pidfd, int host_pipe)
{
	int ret;

	memset(hw, 0, sizeof(*hw));
	hw->ep = ep;
	hw->pidfd = host_pidfd;
	hw->pipefd = host_pipe;
	/* The inherited fds lost O_CLOEXEC: our own children must not get them. */
	if (fcntl(host_pidfd, F_SETFD, FD_CLOEXEC) < 0 ||
	    (host_pipe >= 0 && fcntl(host_pipe, F_SETFD, FD_CLOEXEC) < 0))
		return -errno;
	hw->efd = eventfd(0, EFD_CLOEXEC);
	if (hw->efd < 0)
		return -errno;
	ret = pthread_create(&hw->thread, NULL, host_watch_main, hw);
	if (ret) {
		close(hw->efd);
		return -ret;
	}
	hw->started = true;
	return 0;
}

/* Before the worker's knot goes: the watch may be marking the host dead. */
void knitk__host_watch_stop(struct host_watch *hw)
{
	uint64_t one = 1;

	if (!hw->started)
		return;
	if (write(hw->efd, &one, sizeof(one)) < 0) {
		/* A fresh eventfd cannot overflow. */
	}
	pthread_join(hw->thread, NULL);
	close(hw->efd);
	close(hw->pidfd);
	if (hw->pipefd >= 0)
		close(hw->pipefd);
	hw->started = false;
}
