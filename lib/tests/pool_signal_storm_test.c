// SPDX-License-Identifier: GPL-2.0
/*
 * A SIGUSR1 storm (a handler without SA_RESTART) on every thread of the
 * process while a kill storm SIGKILLs its process workers (respawned) and
 * 4 threads call: every call ends with its own result or -EOWNERDEAD,
 * never an EINTR or anything else; afterwards service is whole, the
 * deaths and -EOWNERDEADs are those counted, every accepted call
 * completed, and no fd or child is left after the destroy.
 * argv[1]: calls of the storm (scaled down in the sanitizer builds).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "knitk_pool.h"
#include "pool_parked.h"
#include "proc_count.h"
#include "tap.h"
#include "hostile_tasks.h"

static void on_usr1(int sig)
{
	(void)sig;
}

struct ks {
	struct knitk_pool *pool;
	atomic_int stop;
	atomic_ulong ok, dead, bad, kills, sigs, calls;
};

/* Echoes, one at a time: each its own result or -EOWNERDEAD. */
static void *ks_submitter(void *arg)
{
	struct ks *s = arg;
	uint64_t seed = (uintptr_t)&seed;

	while (!atomic_load(&s->stop)) {
		uint64_t x = tap_rand(&seed), y = 0;
		int ret = knitk_pool_call(s->pool, T_ECHO, &x, 8, NULL, &y, 8,
					  NULL);

		if (ret == 0 && y == x) {
			atomic_fetch_add(&s->ok, 1);
		} else if (ret == -EOWNERDEAD) {
			atomic_fetch_add(&s->dead, 1);
		} else {
			if (atomic_fetch_add(&s->bad, 1) < 5)
				printf("# call: %d\n", ret);
		}
		atomic_fetch_add(&s->calls, 1);
	}
	return NULL;
}

/* SIGUSR1 to every other thread of the process, every 200 us. */
static void *ks_signaller(void *arg)
{
	struct ks *s = arg;
	pid_t me = getpid(), self_tid = (pid_t)syscall(SYS_gettid);

	while (!atomic_load(&s->stop)) {
		DIR *d = opendir("/proc/self/task");
		struct dirent *e;

		if (!d)
			break;
		while ((e = readdir(d))) {
			pid_t tid = atoi(e->d_name);

			if (tid > 0 && tid != self_tid &&
			    syscall(SYS_tgkill, me, tid, SIGUSR1) == 0)
				atomic_fetch_add(&s->sigs, 1);
		}
		closedir(d);
		usleep(200);
	}
	return NULL;
}

/* SIGKILL to a live worker every 3 ms. */
static void *ks_killer(void *arg)
{
	struct ks *s = arg;
	uint64_t seed = 99;

	while (!atomic_load(&s->stop)) {
		struct knitk_worker_info wi = { .size = sizeof(wi) };
		unsigned int w = tap_rand(&seed) % 2;

		if (knitk_pool_worker_info(s->pool, w, &wi) == 0 &&
		    wi.pid > 0 && wi.alive && kill(wi.pid, SIGKILL) == 0)
			atomic_fetch_add(&s->kills, 1);
		usleep(3000);
	}
	return NULL;
}

static void signal_storm_during_kill_storm(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };	/* no SA_RESTART */
	struct sigaction old;
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct ks s = { 0 };
	pthread_t sub[4], sig, kil;
	unsigned int i;
	int fds = count_fds(false);

	sigemptyset(&sa.sa_mask);
	REQUIRE(sigaction(SIGUSR1, &sa, &old) == 0);
	s.pool = make_pool(KNITK_WORKER_PROCESSES, 2, KNITK_POOL_RESPAWN);
	REQUIRE(s.pool);
	for (i = 0; i < 4; i++)
		REQUIRE(pthread_create(&sub[i], NULL, ks_submitter, &s) == 0);
	REQUIRE(pthread_create(&sig, NULL, ks_signaller, &s) == 0);
	REQUIRE(pthread_create(&kil, NULL, ks_killer, &s) == 0);
	while (atomic_load(&s.calls) < nr_calls / 4 ||
	       atomic_load(&s.kills) < 60)
		usleep(2000);
	atomic_store(&s.stop, 1);
	pthread_join(kil, NULL);
	pthread_join(sig, NULL);
	for (i = 0; i < 4; i++)
		pthread_join(sub[i], NULL);
	printf("# %lu calls (%lu ok, %lu owner dead), %lu kills, %lu signals\n",
	       atomic_load(&s.calls), atomic_load(&s.ok),
	       atomic_load(&s.dead), atomic_load(&s.kills),
	       atomic_load(&s.sigs));
	CHECK_EQ(atomic_load(&s.bad), 0);
	/*
	 * The killer's last SIGKILL may not be handled yet: wait until both
	 * workers the pool names are running (neither gone nor a zombie).
	 */
	for (i = 0; i < 2;) {
		struct knitk_worker_info wi = { .size = sizeof(wi) };
		char state = 0;

		if (knitk_pool_worker_info(s.pool, i, &wi) == 0 && wi.alive &&
		    wi.pid > 0)
			state = task_state(wi.pid, wi.pid);
		if (state && state != 'Z' && state != 'X')
			i++;
		else
			usleep(1000);
	}
	/* Service is whole after the storm. */
	for (i = 0; i < 50; i++) {
		uint64_t x = i, y = ~0ULL;

		CHECK_EQ(knitk_pool_call(s.pool, T_ECHO, &x, 8, NULL, &y, 8,
					 NULL), 0);
		CHECK_EQ(y, x);
	}
	CHECK_EQ(knitk_pool_stats(s.pool, &st), 0);
	/* A SIGKILL may hit a worker already dying: kills >= deaths. */
	CHECK(st.deaths > 0 && st.deaths <= atomic_load(&s.kills));
	CHECK_EQ(st.ownerdead, atomic_load(&s.dead));
	CHECK_EQ(st.submitted, st.completed);
	CHECK_EQ(knitk_pool_shutdown(s.pool, KNITK_SHUTDOWN_DRAIN), 0);
	knitk_pool_destroy(s.pool);
	sigaction(SIGUSR1, &old, NULL);
	CHECK_EQ(count_fds(false), fds);
	CHECK(no_children());
}

int main(int argc, char **argv)
{
	if (hostile_start(argc, argv))
		return 1;
	TEST(signal_storm_during_kill_storm);
	return tap_exit();
}
