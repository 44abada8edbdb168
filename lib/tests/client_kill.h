/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The client killed, not its workers (the host's pool_client_kill_test
 * and the guest's kselftest of the same name): a child process, the
 * client, makes a pool of three workers and keeps calls flowing from two
 * submitter threads, each call's result checked by its id (T_RUN,
 * pool_tasks.h); we, its parent and a child subreaper, SIGKILL it
 *  - at a random time 1 to 50 ms after its start,
 *  - while a worker runs a call (0 to 400 us after the client saw it),
 *  - inside knitk_pool_create (0 to 10 ms after the client entered it),
 *  - during its shutdown and destroy (0 to 3 ms after it began),
 * in turn.  knitk_worker_main(3) promises that a worker whose host is
 * gone finishes the call it runs and exits: every descendant of the
 * client must have exited within CLIENT_GRACE_MS (a bound on a hang, not
 * a timing claim: they exit in milliseconds).  client_kills() counts what
 * was left behind, calls that ran twice (the run table) and calls that got
 * another call's result.  Include pool_tasks.h and proc_count.h first; call
 * client_kill_setup() once, before the first pool.
 */
#ifndef KNITK_CLIENT_KILL_H
#define KNITK_CLIENT_KILL_H

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLIENT_WORKERS		3
#define CLIENT_SUBMITTERS	2
#define CLIENT_GRACE_MS		5000
/* Call ids of one iteration: [iter * CLIENT_IDS, + CLIENT_IDS). */
#define CLIENT_IDS		65536

enum kill_at { AT_RANDOM, AT_CALL, AT_CREATE, AT_SHUTDOWN, NR_AT };

static const char *const at_name[NR_AT] = {
	"at random", "mid-call", "in create", "in shutdown",
};

struct client_config {
	const char *name;
	unsigned int kind, dispatch, flags;
};

/* Every pool kind: thread and process workers, private and stealing. */
static const struct client_config client_configs[] = {
	{ "threads private", KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 0 },
	{ "threads stealing", KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 0 },
	{ "processes private", KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE, 0 },
	{ "processes stealing", KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL, 0 },
	{ "processes private respawn", KNITK_WORKER_PROCESSES,
	  KNITK_POOL_DISPATCH_PRIVATE, KNITK_POOL_RESPAWN },
	{ "processes stealing respawn", KNITK_WORKER_PROCESSES,
	  KNITK_POOL_DISPATCH_STEAL, KNITK_POOL_RESPAWN },
};

/* What the clients report, in shared memory. */
struct client_shared {
	_Atomic uint64_t ok, bad, wrong;
};

static struct client_shared *client_sh;

/* ------------------------------------------------------------ client */

struct client {
	struct knitk_pool *pool;
	uint64_t id0;
	_Atomic uint64_t next;
	_Atomic unsigned long done;	/* calls answered right */
	_Atomic int stop;
};

static inline uint64_t client_rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static inline void client_say(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		_exit(9);
}

static inline void *client_submitter(void *arg)
{
	struct client *cl = arg;
	uint64_t seed = (uintptr_t)&seed | 1, r;
	unsigned char buf[1024];

	while (!atomic_load(&cl->stop)) {
		struct knitk_call *c;
		uint64_t id = atomic_fetch_add(&cl->next, 1);
		uint32_t len, us;
		const void *d;
		uint64_t res[2];
		size_t n;
		int ret;

		if (id >= cl->id0 + CLIENT_IDS)
			break;
		r = client_rnd(&seed);
		us = r % 100 < 90 ? 0 : r % 100 < 97 ? 50 : 500 + (uint32_t)(r >> 8) % 2500;
		len = sizeof(struct run_arg) + (uint32_t)(r >> 20) % (r & 1 ? 1000 : 48);
		run_arg_fill(buf, id, us, len);
		ret = knitk_pool_submit(cl->pool, T_RUN, buf, len, NULL, &c);
		if (ret == -ESHUTDOWN || ret == -EPIPE)
			break;
		if (ret) {
			atomic_fetch_add(&client_sh->bad, 1);
			break;
		}
		ret = knitk_call_wait(c, KNITK_WAIT_FOREVER);
		if (run_result_ok(c, id)) {
			atomic_fetch_add(&client_sh->ok, 1);
			atomic_fetch_add(&cl->done, 1);
		} else if (ret != -ECANCELED && ret != -ESHUTDOWN) {
			atomic_fetch_add(&client_sh->bad, 1);
			if (!knitk_call_result(c, &d, &n) && n == sizeof(res) &&
			    (memcpy(res, d, sizeof(res)), res[0] != id))
				atomic_fetch_add(&client_sh->wrong, 1);
		}
		knitk_call_release(c);
	}
	return NULL;
}

/* The client's life; it ends by our SIGKILL, or _exit(nonzero) on a failure. */
static inline void client_main(const struct client_config *cfg, unsigned int knot_flags,
			enum kill_at at, uint64_t id0, int fd)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = cfg->kind, .nr_workers = CLIENT_WORKERS,
		.dispatch = cfg->dispatch, .flags = cfg->flags,
		.knot_flags = knot_flags,
	};
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct client cl = { .id0 = id0, .next = id0 };
	pthread_t th[CLIENT_SUBMITTERS];
	unsigned int i, w;

	if (at == AT_CREATE)
		client_say(fd, 'C');
	if (knitk_pool_create(&o, &test_tasks, &cl.pool))
		_exit(3);
	for (i = 0; i < CLIENT_SUBMITTERS; i++)
		if (pthread_create(&th[i], NULL, client_submitter, &cl))
			_exit(4);
	if (at == AT_CALL) {
		for (w = 0;; w = (w + 1) % CLIENT_WORKERS) {
			if (knitk_pool_worker_info(cl.pool, w, &wi))
				_exit(5);
			if (wi.inflight) {
				client_say(fd, 'M');
				break;
			}
			usleep(100);
		}
	}
	if (at == AT_SHUTDOWN) {
		while (atomic_load(&cl.done) < 20)
			usleep(200);
		client_say(fd, 'S');
		knitk_pool_shutdown(cl.pool, KNITK_SHUTDOWN_DRAIN);
		atomic_store(&cl.stop, 1);
		for (i = 0; i < CLIENT_SUBMITTERS; i++)
			pthread_join(th[i], NULL);
		knitk_pool_destroy(cl.pool);
	}
	for (;;)
		pause();
}

/* ------------------------------------------------------------ driver */

static inline void client_sleep_us(uint64_t us)
{
	struct timespec ts = { .tv_sec = (time_t)(us / 1000000),
			       .tv_nsec = (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static inline uint64_t client_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline int client_count_shm(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/*
 * Reap every descendant (they are ours as the subreaper) until none is
 * left or the grace ran out; then SIGKILL and count the ones still there.
 */
static inline unsigned int client_reap(void)
{
	uint64_t end = client_now_ms() + CLIENT_GRACE_MS;
	pid_t pid;

	for (;;) {
		pid = waitpid(-1, NULL, WNOHANG);
		if (pid > 0)
			continue;
		if (pid < 0 && errno == ECHILD)
			return 0;
		if (client_now_ms() >= end)
			break;
		usleep(1000);
	}
	/* Still running: describe, kill and reap them. */
	return kill_children(true);
}

struct client_tally {
	unsigned int iters, left, failed, twice;
	unsigned int at[NR_AT];
	uint64_t ok, bad, wrong;
};

static inline unsigned int client_run_twice(uint64_t id0)
{
	_Atomic uint8_t *tab = runtab_get();
	unsigned int n = 0, i;

	for (i = 0; i < CLIENT_IDS; i++) {
		n += atomic_load(&tab[id0 + i]) > 1;
		atomic_store(&tab[id0 + i], 0);
	}
	return n;
}

static inline void client_kill_one(const struct client_config *cfg, unsigned int knot_flags,
			    enum kill_at at, uint64_t id0, uint64_t *seed,
			    struct client_tally *t)
{
	int pfd[2], status;
	pid_t client;
	char c;

	if (pipe(pfd)) {
		t->failed++;
		return;
	}
	client = fork();
	if (client < 0) {
		t->failed++;
		return;
	}
	if (client == 0) {
		close(pfd[0]);
		client_main(cfg, knot_flags, at, id0, pfd[1]);
	}
	close(pfd[1]);
	switch (at) {
	case AT_RANDOM:
		client_sleep_us(1000 + client_rnd(seed) % 49000);
		break;
	case AT_CALL:
		if (read(pfd[0], &c, 1) == 1)
			client_sleep_us(client_rnd(seed) % 400);
		break;
	case AT_CREATE:
		if (read(pfd[0], &c, 1) == 1)
			client_sleep_us(client_rnd(seed) % 10000);
		break;
	case AT_SHUTDOWN:
		if (read(pfd[0], &c, 1) == 1)
			client_sleep_us(client_rnd(seed) % 3000);
		break;
	default:
		break;
	}
	kill(client, SIGKILL);
	if (waitpid(client, &status, 0) == client &&
	    !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
		printf("# %s, %s: the client exited by itself, status %d\n",
		       cfg->name, at_name[at], WEXITSTATUS(status));
		t->failed++;
	}
	close(pfd[0]);
	t->left += client_reap();
	t->twice += client_run_twice(id0);
	t->iters++;
	t->at[at]++;
}


/* Once, before the first pool: the run table and the shared counters. */
static inline int client_kill_setup(void)
{
	int ret;

	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		return -errno;
	ret = runtab_open();
	if (ret)
		return ret;
	client_sh = mmap(NULL, sizeof(*client_sh), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return client_sh == MAP_FAILED ? -errno : 0;
}

/* @iters kills of clients of pool kind @cfg on knots of @knot_flags. */
static inline void client_kills(const struct client_config *cfg,
				unsigned int knot_flags, unsigned int iters,
				struct client_tally *t)
{
	uint64_t seed = 0x9e3779b97f4a7c15ULL ^ client_now_ms(), ok0;
	unsigned int i;

	memset(t, 0, sizeof(*t));
	ok0 = atomic_load(&client_sh->ok);
	atomic_store(&client_sh->bad, 0);
	atomic_store(&client_sh->wrong, 0);
	for (i = 0; i < iters; i++)
		client_kill_one(cfg, knot_flags, (enum kill_at)(i % NR_AT),
				(uint64_t)(i % (RUNTAB_IDS / CLIENT_IDS)) * CLIENT_IDS,
				&seed, t);
	t->ok = atomic_load(&client_sh->ok) - ok0;
	t->bad = atomic_load(&client_sh->bad);
	t->wrong = atomic_load(&client_sh->wrong);
	printf("# %s: %u kills (%u at random, %u mid-call, %u in create, %u in shutdown), "
	       "%llu calls checked, %llu bad, %u ran twice, %u descendants left behind\n",
	       cfg->name, t->iters, t->at[AT_RANDOM], t->at[AT_CALL],
	       t->at[AT_CREATE], t->at[AT_SHUTDOWN], (unsigned long long)t->ok,
	       (unsigned long long)t->bad, t->twice, t->left);
}

#endif /* KNITK_CLIENT_KILL_H */
