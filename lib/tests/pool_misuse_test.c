// SPDX-License-Identifier: GPL-2.0
/*
 * The pool as a careless or hostile user drives it, written from
 * knitk_pool.h alone:
 *  - tasks returning every errno, -EINPROGRESS included;
 *  - tasks that exit(), raise SIGSEGV, abort(), or fork a helper and crash;
 *  - submitting threads racing shutdown (DRAIN and CANCEL), aborts, waits;
 *  - every handle function after knitk_pool_destroy;
 *  - arguments and results as large as the arena, concurrently;
 *  - call deadlines and wait deadlines of 0, the past and the far future;
 *  - a SIGUSR1 storm (no SA_RESTART) on every thread during a kill storm;
 *  - the host SIGKILLed with its process workers busy or idle;
 *  - fds and children left after destroy.
 * argv[1]: calls of the storm cases (scaled down in the sanitizer builds);
 * argv[2], if given: run that case alone (like TAP_ONLY, for the guest).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk_pool.h"
#include "pool_parked.h"
#include "proc_count.h"
#include "tap.h"

enum { T_ECHO, T_BIG, T_ERRNO, T_FORK_CRASH, T_EXIT, T_SEGV, T_ABORT,
       T_SLEEP, T_PID, T_REPLY2, NR_T };

static unsigned long nr_calls = 20000;

/* Result: the argument bytes. */
static int t_echo(const void *in, size_t len, struct knitk_reply *out,
		  void *ctx)
{
	(void)ctx;
	return knitk_reply_set(out, in, len);
}

static uint8_t pattern(uint64_t seed, size_t i)
{
	return (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

/* Argument: result length and seed (u64 each), then filler; result: pattern. */
static int t_big(const void *in, size_t len, struct knitk_reply *out,
		 void *ctx)
{
	uint64_t hdr[2];
	uint8_t *buf;
	size_t i;
	int ret;

	(void)ctx;
	if (len < sizeof(hdr))
		return -EINVAL;
	memcpy(hdr, in, sizeof(hdr));
	for (i = sizeof(hdr); i < len; i++)
		if (((const uint8_t *)in)[i] != pattern(hdr[1] + 1, i))
			return -EBADMSG;
	ret = knitk_reply_alloc(out, hdr[0], (void **)&buf);
	if (ret)
		return ret;
	for (i = 0; i < hdr[0]; i++)
		buf[i] = pattern(hdr[1], i);
	return 0;
}

/* Returns the int it is given. */
static int t_errno(const void *in, size_t len, struct knitk_reply *out,
		   void *ctx)
{
	int v;

	(void)out;
	(void)ctx;
	if (len != sizeof(v))
		return -EINVAL;
	memcpy(&v, in, sizeof(v));
	return v;
}

static char helper_path[64];

/* Forks a helper that records its pid and outlives us; then crashes. */
static int t_fork_crash(const void *in, size_t len, struct knitk_reply *out,
			void *ctx)
{
	pid_t host, h;

	(void)out;
	(void)ctx;
	if (len != sizeof(host))
		return -EINVAL;
	memcpy(&host, in, sizeof(host));
	h = fork();
	if (h < 0)
		return -errno;
	if (h == 0) {
		char tmp[80], buf[16];
		int fd, n;

		snprintf(tmp, sizeof(tmp), "/tmp/knitk-adv-helper.%d", host);
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		n = snprintf(buf, sizeof(buf), "%d\n", getpid());
		if (fd < 0 || write(fd, buf, n) != n)
			_exit(1);
		close(fd);
		/* Lives until killed, or until the host is gone. */
		while (kill(host, 0) == 0)
			usleep(10000);
		_exit(0);
	}
	/* Wait until the helper is recorded, then die by SIGSEGV. */
	snprintf(helper_path, sizeof(helper_path), "/tmp/knitk-adv-helper.%d",
		 host);
	while (access(helper_path, F_OK))
		usleep(1000);
	signal(SIGSEGV, SIG_DFL);
	raise(SIGSEGV);
	return 0;
}

static int t_exit(const void *in, size_t len, struct knitk_reply *out,
		  void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	(void)ctx;
	exit(3);
}

static int t_segv(const void *in, size_t len, struct knitk_reply *out,
		  void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	(void)ctx;
	signal(SIGSEGV, SIG_DFL);
	raise(SIGSEGV);
	return 0;
}

static int t_abort(const void *in, size_t len, struct knitk_reply *out,
		   void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	(void)ctx;
	signal(SIGABRT, SIG_DFL);
	abort();
}

/* Sleeps the u32 milliseconds it is given unless aborted; returns 1. */
static int t_sleep(const void *in, size_t len, struct knitk_reply *out,
		   void *ctx)
{
	uint32_t ms, i;

	(void)out;
	if (len != sizeof(ms))
		return -EINVAL;
	memcpy(&ms, in, sizeof(ms));
	for (i = 0; i < ms && knitk_task_aborted(ctx) == 0; i++)
		usleep(1000);
	return 1;
}

static int t_pid(const void *in, size_t len, struct knitk_reply *out,
		 void *ctx)
{
	(void)in;
	(void)len;
	(void)out;
	(void)ctx;
	return getpid();
}

/* Two allocs of the u64 lengths it is given: the second one is the result. */
static int t_reply2(const void *in, size_t len, struct knitk_reply *out,
		    void *ctx)
{
	uint64_t l[2];
	void *buf;
	int ret;

	(void)ctx;
	if (len != sizeof(l))
		return -EINVAL;
	memcpy(l, in, sizeof(l));
	ret = knitk_reply_alloc(out, l[0], &buf);
	if (ret)
		return ret;
	memset(buf, 0xaa, l[0]);
	ret = knitk_reply_alloc(out, l[1], &buf);
	if (ret)
		return ret;
	memset(buf, 0x55, l[1]);
	return 0;
}

static const knitk_task_fn fns[NR_T] = {
	[T_ECHO] = t_echo, [T_BIG] = t_big, [T_ERRNO] = t_errno,
	[T_FORK_CRASH] = t_fork_crash, [T_EXIT] = t_exit, [T_SEGV] = t_segv,
	[T_ABORT] = t_abort, [T_SLEEP] = t_sleep, [T_PID] = t_pid,
	[T_REPLY2] = t_reply2,
};
static const struct knitk_task_table table = { .tasks = fns, .nr_tasks = NR_T };

static uint64_t after_ms(uint64_t ms)
{
	return tap_now_ns() + ms * 1000000ULL;
}

static struct knitk_pool *make_pool(unsigned int kind, unsigned int workers,
				    unsigned int flags)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = kind, .nr_workers = workers,
				     .flags = flags, .nr_submitters = 4 };
	struct knitk_pool *p = NULL;
	int ret = knitk_pool_create(&o, &table, &p);

	if (ret)
		printf("# pool_create(kind %u): %d\n", kind, ret);
	return ret ? NULL : p;
}

static int call_int(struct knitk_pool *p, uint32_t fn, int v)
{
	return knitk_pool_call(p, fn, &v, sizeof(v), NULL, NULL, 0, NULL);
}

/* ------------------------------------------------------------- errnos */

static void errno_values(unsigned int kind)
{
	struct knitk_pool *p = make_pool(kind, 2, 0);
	int e, bad = 0;

	REQUIRE(p);
	for (e = 1; e < 134; e++) {
		if (e == EINPROGRESS)
			continue;
		if (call_int(p, T_ERRNO, -e) != -e && bad++ < 5)
			printf("# task status %d came back as %d\n", -e,
			       call_int(p, T_ERRNO, -e));
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(call_int(p, T_ERRNO, 0), 0);
	CHECK_EQ(call_int(p, T_ERRNO, 1), 1);
	CHECK_EQ(call_int(p, T_ERRNO, 0x7fffffff), 0x7fffffff);
	knitk_pool_destroy(p);
}

static void errno_every_value_threads(void)
{
	errno_values(KNITK_WORKER_THREADS);
}

static void errno_every_value_processes(void)
{
	errno_values(KNITK_WORKER_PROCESSES);
}

/*
 * A task that returns -EINPROGRESS: a wait forever cannot time out, so it
 * must not answer with the "wait timed out" code, and the completed call
 * must not read as running (knitk_pool.h: -EINPROGRESS is "while running"
 * and "when the wait timed out").
 */
static void task_einprogress_not_a_timeout(void)
{
	struct knitk_pool *p = make_pool(KNITK_WORKER_THREADS, 1, 0);
	int v = -EINPROGRESS, ret, wret;
	struct knitk_call *c;

	REQUIRE(p);
	REQUIRE(knitk_pool_submit(p, T_ERRNO, &v, sizeof(v), NULL, &c) == 0);
	wret = knitk_call_wait(c, KNITK_WAIT_FOREVER);
	ret = knitk_pool_wait_all(p, &c, 1, KNITK_WAIT_FOREVER);
	printf("# wait forever: %d, wait_all forever: %d, status %d\n", wret,
	       ret, knitk_call_status(c));
	CHECK(wret != -EINPROGRESS);
	CHECK_EQ(ret, 0);
	CHECK(knitk_call_status(c) != -EINPROGRESS);
	knitk_call_release(c);
	ret = call_int(p, T_ERRNO, -EINPROGRESS);
	CHECK(ret != -EINPROGRESS);
	knitk_pool_destroy(p);
}

/* ------------------------------------------------------------ crashes */

static pid_t read_helper(pid_t host)
{
	char path[80], buf[16] = { 0 };
	int fd;

	snprintf(path, sizeof(path), "/tmp/knitk-adv-helper.%d", host);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (read(fd, buf, sizeof(buf) - 1) <= 0)
		buf[0] = 0;
	close(fd);
	unlink(path);
	return atoi(buf);
}

/* Each way a task can kill its worker: -EOWNERDEAD, then service resumes. */
static void crash_kinds_respawn(void)
{
	static const uint32_t kinds[] = { T_EXIT, T_SEGV, T_ABORT,
					  T_FORK_CRASH };
	struct knitk_pool *p = make_pool(KNITK_WORKER_PROCESSES, 2,
					 KNITK_POOL_RESPAWN);
	struct knitk_pool_stats st = { .size = sizeof(st) };
	pid_t host = getpid(), helper;
	unsigned int k, i;
	int fds;

	REQUIRE(p);
	fds = count_fds(false);
	for (k = 0; k < 4; k++) {
		int ret = knitk_pool_call(p, kinds[k], &host, sizeof(host),
					  NULL, NULL, 0, NULL);

		if (ret != -EOWNERDEAD)
			printf("# crash kind %u: status %d\n", kinds[k], ret);
		CHECK_EQ(ret, -EOWNERDEAD);
		for (i = 0; i < 20; i++) {
			uint64_t x = i * 77 + k, y = 0;

			CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, NULL, &y,
						 8, NULL), 0);
			CHECK_EQ(y, x);
		}
	}
	helper = read_helper(host);
	CHECK(helper > 0);
	if (helper > 0) {
		/* The helper holds the dead worker's fds: still alive. */
		CHECK_EQ(kill(helper, 0), 0);
		kill(helper, SIGKILL);
	}
	/* The successors start after the waiters learned of the deaths. */
	while (knitk_pool_stats(p, &st) == 0 && st.respawns < 4)
		sched_yield();
	CHECK_EQ(knitk_pool_stats(p, &st), 0);
	CHECK_EQ(st.deaths, 4);
	CHECK_EQ(st.ownerdead, 4);
	CHECK_EQ(count_fds(false), fds);
	knitk_pool_destroy(p);
	/* The helper was reparented to us (subreaper): reap it. */
	while (helper > 0 && waitpid(helper, NULL, 0) < 0 && errno == EINTR)
		;
	CHECK(no_children());
}

/* Without respawn, once both workers crashed, submit says -EPIPE. */
static void crash_all_then_epipe(void)
{
	struct knitk_pool *p = make_pool(KNITK_WORKER_PROCESSES, 2, 0);
	struct knitk_call_opts o = { .size = sizeof(o), .flags = KNITK_CALL_WORKER };
	struct knitk_call *c;
	int v = 0;

	REQUIRE(p);
	for (o.worker = 0; o.worker < 2; o.worker++)
		CHECK_EQ(knitk_pool_call(p, T_ABORT, &v, sizeof(v), &o, NULL,
					 0, NULL), -EOWNERDEAD);
	CHECK_EQ(knitk_pool_submit(p, T_ECHO, &v, sizeof(v), NULL, &c),
		 -EPIPE);
	CHECK_EQ(call_int(p, T_ECHO, 1), -EPIPE);
	knitk_pool_destroy(p);
	CHECK(no_children());
}

/* ----------------------------------------------------- shutdown races */

#define SUBMITTERS	8
#define WIN		8

struct sd {
	struct knitk_pool *pool;
	unsigned int mode;
	atomic_int stopped;		/* shutdown has returned */
	atomic_ulong submitted, bad, late, aborted;
};

static void *sd_thread(void *arg)
{
	struct sd *s = arg;
	struct knitk_call *c[WIN];
	uint64_t x[WIN], seed = (uintptr_t)c;
	unsigned int i, n;

	for (;;) {
		int ret = 0;
		int abort_ok[WIN] = { 0 };

		for (n = 0; n < WIN; n++) {
			uint32_t ms = 1;
			int after = atomic_load(&s->stopped);

			x[n] = tap_rand(&seed);
			ret = n % 4 == 3 ?
			      knitk_pool_submit(s->pool, T_SLEEP, &ms, 4, NULL,
						&c[n]) :
			      knitk_pool_submit(s->pool, T_ECHO, &x[n], 8,
						NULL, &c[n]);
			if (ret)
				break;
			atomic_fetch_add(&s->submitted, 1);
			if (after)
				atomic_fetch_add(&s->late, 1);
		}
		for (i = 0; i < n; i++) {
			if (tap_rand(&seed) % 5 == 0) {
				int a = knitk_call_abort(c[i]);

				if (a == 0) {
					abort_ok[i] = 1;
					atomic_fetch_add(&s->aborted, 1);
				} else if (a != -EALREADY) {
					atomic_fetch_add(&s->bad, 1);
				}
			}
		}
		if (n && knitk_pool_wait_all(s->pool, c, n,
					     KNITK_WAIT_FOREVER))
			atomic_fetch_add(&s->bad, 1);
		for (i = 0; i < n; i++) {
			int st = knitk_call_status(c[i]);
			const void *d;
			size_t len;
			int okres;

			if (i % 4 == 3)
				okres = st == 1;
			else
				okres = st == 0 &&
					knitk_call_result(c[i], &d, &len) == 0 &&
					len == 8 && !memcmp(d, &x[i], 8);
			if (abort_ok[i] && st != -ECANCELED)
				atomic_fetch_add(&s->bad, 1);
			else if (!abort_ok[i] && !okres &&
				 !(s->mode == KNITK_SHUTDOWN_CANCEL &&
				   st == -ECANCELED)) {
				if (atomic_fetch_add(&s->bad, 1) < 5)
					printf("# call status %d\n", st);
			}
			knitk_call_release(c[i]);
		}
		if (ret == -ESHUTDOWN)
			return NULL;
		if (ret) {
			printf("# submit: %d\n", ret);
			atomic_fetch_add(&s->bad, 1);
			return NULL;
		}
	}
}

static void shutdown_race(unsigned int kind, unsigned int mode)
{
	struct sd s = { .mode = mode };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	pthread_t t[SUBMITTERS];
	unsigned int i;
	int round;

	for (round = 0; round < 4; round++) {
		s.pool = make_pool(kind, 3, 0);
		REQUIRE(s.pool);
		atomic_store(&s.stopped, 0);
		for (i = 0; i < SUBMITTERS; i++)
			REQUIRE(pthread_create(&t[i], NULL, sd_thread, &s) == 0);
		while (atomic_load(&s.submitted) < (round + 1) * 2000UL)
			usleep(1000);
		CHECK_EQ(knitk_pool_shutdown(s.pool, mode), 0);
		/* Every accepted call has completed. */
		CHECK_EQ(knitk_pool_stats(s.pool, &st), 0);
		CHECK_EQ(st.submitted, st.completed);
		atomic_store(&s.stopped, 1);
		CHECK_EQ(knitk_pool_shutdown(s.pool, mode), -EALREADY);
		for (i = 0; i < SUBMITTERS; i++)
			pthread_join(t[i], NULL);
		CHECK_EQ(knitk_pool_stats(s.pool, &st), 0);
		CHECK_EQ(st.submitted, st.completed);
		knitk_pool_destroy(s.pool);
	}
	printf("# %lu submitted, %lu aborted, %lu after shutdown returned\n",
	       atomic_load(&s.submitted), atomic_load(&s.aborted),
	       atomic_load(&s.late));
	CHECK_EQ(atomic_load(&s.bad), 0);
	CHECK_EQ(atomic_load(&s.late), 0);
}

static void shutdown_drain_race_threads(void)
{
	shutdown_race(KNITK_WORKER_THREADS, KNITK_SHUTDOWN_DRAIN);
}

static void shutdown_cancel_race_threads(void)
{
	shutdown_race(KNITK_WORKER_THREADS, KNITK_SHUTDOWN_CANCEL);
}

static void shutdown_drain_race_processes(void)
{
	shutdown_race(KNITK_WORKER_PROCESSES, KNITK_SHUTDOWN_DRAIN);
}

static void shutdown_cancel_race_processes(void)
{
	shutdown_race(KNITK_WORKER_PROCESSES, KNITK_SHUTDOWN_CANCEL);
}

/* ------------------------------------------------- handles after destroy */

static void after_destroy(unsigned int kind)
{
	struct knitk_pool *p = make_pool(kind, 2, 0);
	struct knitk_call *done, *slow, *unwaited;
	uint64_t x = 0x1234567890abcdefULL;
	uint32_t ms = 600000;
	const void *d;
	size_t len;

	REQUIRE(p);
	REQUIRE(knitk_pool_submit(p, T_ECHO, &x, 8, NULL, &done) == 0);
	CHECK_EQ(knitk_call_wait(done, KNITK_WAIT_FOREVER), 0);
	REQUIRE(knitk_pool_submit(p, T_SLEEP, &ms, 4, NULL, &slow) == 0);
	REQUIRE(knitk_pool_submit(p, T_ECHO, &x, 8, NULL, &unwaited) == 0);
	knitk_pool_destroy(p);

	CHECK_EQ(knitk_call_status(done), 0);
	CHECK_EQ(knitk_call_wait(done, 0), 0);
	CHECK_EQ(knitk_call_wait(done, KNITK_WAIT_FOREVER), 0);
	CHECK_EQ(knitk_call_wait(done, 1), 0);
	CHECK_EQ(knitk_call_result(done, &d, &len), 0);
	CHECK(len == 8 && !memcmp(d, &x, 8));
	CHECK_EQ(knitk_call_abort(done), -EALREADY);
	CHECK(knitk_call_worker(done) >= 0 && knitk_call_worker(done) < 2);

	CHECK_EQ(knitk_call_status(slow), -ECANCELED);
	CHECK_EQ(knitk_call_wait(slow, KNITK_WAIT_FOREVER), -ECANCELED);
	CHECK_EQ(knitk_call_wait(slow, 0), -ECANCELED);
	CHECK_EQ(knitk_call_abort(slow), -EALREADY);
	CHECK(knitk_call_result(slow, &d, &len) != -EINPROGRESS);

	CHECK(knitk_call_status(unwaited) == 0 ||
	      knitk_call_status(unwaited) == -ECANCELED);
	CHECK_EQ(knitk_call_wait(unwaited, KNITK_WAIT_FOREVER),
		 knitk_call_status(unwaited));
	CHECK_EQ(knitk_call_abort(unwaited), -EALREADY);
	knitk_call_release(unwaited);
	knitk_call_release(slow);
	knitk_call_release(done);
	CHECK(no_children());
}

static void handles_after_destroy_threads(void)
{
	after_destroy(KNITK_WORKER_THREADS);
}

static void handles_after_destroy_processes(void)
{
	after_destroy(KNITK_WORKER_PROCESSES);
}

/* ------------------------------------------------------ arena-size calls */

#define ARENA		(64 * 1024)

struct big {
	struct knitk_pool *pool;
	unsigned int id;
	atomic_ulong bad, ok;
};

static void *big_thread(void *arg)
{
	struct big *b = arg;
	static _Thread_local uint8_t in[ARENA];
	struct knitk_call *c;
	unsigned int r;

	for (r = 0; r < 40; r++) {
		uint64_t hdr[2] = { ARENA, b->id * 1000 + r };
		size_t inlen = r % 2 ? ARENA : 16 + r;
		const uint8_t *d;
		size_t len, i;
		int st;

		memcpy(in, hdr, sizeof(hdr));
		for (i = sizeof(hdr); i < inlen; i++)
			in[i] = pattern(hdr[1] + 1, i);
		if (r % 3 == 0)
			hdr[0] = 16 + r;
		memcpy(in, hdr, sizeof(hdr));
		if (knitk_pool_submit(b->pool, T_BIG, in, inlen, NULL, &c)) {
			atomic_fetch_add(&b->bad, 1);
			continue;
		}
		st = knitk_call_wait(c, KNITK_WAIT_FOREVER);
		if (st || knitk_call_result(c, (const void **)&d, &len) ||
		    len != hdr[0]) {
			printf("# big call %u: status %d\n", r, st);
			atomic_fetch_add(&b->bad, 1);
		} else {
			for (i = 0; i < len; i++)
				if (d[i] != pattern(hdr[1], i))
					break;
			if (i != len)
				atomic_fetch_add(&b->bad, 1);
			else
				atomic_fetch_add(&b->ok, 1);
		}
		knitk_call_release(c);
	}
	return NULL;
}

static void arena_size_calls(unsigned int kind)
{
	struct knitk_pool *p = make_pool(kind, 2, 0);
	struct big b[4];
	pthread_t t[4];
	static uint8_t in[ARENA + 64];
	uint64_t hdr[2] = { ARENA + 1, 0 };
	struct knitk_call *c;
	unsigned int i;
	size_t k;

	REQUIRE(p);
	for (i = 0; i < 4; i++) {
		b[i] = (struct big){ .pool = p, .id = i };
		REQUIRE(pthread_create(&t[i], NULL, big_thread, &b[i]) == 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(atomic_load(&b[i].bad), 0);
		CHECK_EQ(atomic_load(&b[i].ok), 40);
	}
	/* One byte too many, either way. */
	CHECK_EQ(knitk_pool_submit(p, T_ECHO, in, ARENA + 1, NULL, &c),
		 -EMSGSIZE);
	memcpy(in, hdr, sizeof(hdr));
	for (k = sizeof(hdr); k < 64; k++)
		in[k] = pattern(1, k);
	CHECK_EQ(knitk_pool_call(p, T_BIG, in, 64, NULL, NULL, 0, NULL),
		 -EMSGSIZE);
	knitk_pool_destroy(p);
}

static void arena_size_calls_threads(void)
{
	arena_size_calls(KNITK_WORKER_THREADS);
}

static void arena_size_calls_processes(void)
{
	arena_size_calls(KNITK_WORKER_PROCESSES);
}

/* ---------------------------------------------------------- deadlines */

static void deadlines(void)
{
	struct knitk_pool *p = make_pool(KNITK_WORKER_THREADS, 1, 0);
	struct knitk_call_opts o = { .size = sizeof(o) };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct knitk_call *c;
	uint32_t ms = 5000;
	uint64_t x = 42, y = 0;

	REQUIRE(p);
	o.deadline_ns = 0;		/* none */
	CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, &o, &y, 8, NULL), 0);
	CHECK_EQ(y, 42);
	o.deadline_ns = 1;		/* long past */
	CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, &o, &y, 8, NULL),
		 -ETIMEDOUT);
	o.deadline_ns = tap_now_ns();	/* now: past by the time it runs */
	CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, &o, &y, 8, NULL),
		 -ETIMEDOUT);
	o.deadline_ns = UINT64_MAX - 1;	/* far */
	y = 0;
	CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, &o, &y, 8, NULL), 0);
	CHECK_EQ(y, 42);
	o.deadline_ns = KNITK_WAIT_FOREVER;
	y = 0;
	CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, &o, &y, 8, NULL), 0);
	CHECK_EQ(y, 42);

	/* A running call passes its deadline: -ETIMEDOUT, task told. */
	o.deadline_ns = after_ms(100);
	REQUIRE(knitk_pool_submit(p, T_SLEEP, &ms, 4, &o, &c) == 0);
	CHECK_EQ(knitk_call_wait(c, 0), -EINPROGRESS);
	CHECK_EQ(knitk_call_wait(c, 1), -EINPROGRESS);
	CHECK_EQ(knitk_pool_wait_any(p, &c, 1, 1), -EINPROGRESS);
	CHECK_EQ(knitk_pool_wait_all(p, &c, 1, 0), -EINPROGRESS);
	CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -ETIMEDOUT);
	CHECK_EQ(knitk_pool_wait_any(p, &c, 1, 0), 0);
	CHECK_EQ(knitk_pool_wait_all(p, &c, 1, 1), 0);
	knitk_call_release(c);
	/* The worker gave up the task: the next call runs. */
	CHECK_EQ(knitk_pool_call(p, T_ECHO, &x, 8, NULL, &y, 8, NULL), 0);
	CHECK_EQ(knitk_pool_stats(p, &st), 0);
	CHECK_EQ(st.timedout, 3);
	knitk_pool_destroy(p);
}

/* ------------------------------------------ signal storm with kill storm */

static void on_usr1(int sig)
{
	(void)sig;
}

struct ks {
	struct knitk_pool *pool;
	atomic_int stop;
	atomic_ulong ok, dead, bad, kills, sigs, calls;
};

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

/* ---------------------------------------------------- host killed */

/*
 * A host (child of ours) with two process workers, busy in a task of
 * 300 ms (the header promises no abort on host death, so it may finish)
 * or idle, is SIGKILLed: both workers exit (we hold pidfds of them and
 * wait, with no timeout, for each to become readable).
 */
static void host_killed(int busy)
{
	int pfd[2], pidfds[2], i;
	pid_t host, pids[2];

	REQUIRE(pipe(pfd) == 0);
	host = fork();
	REQUIRE(host >= 0);
	if (host == 0) {
		struct knitk_pool *p = make_pool(KNITK_WORKER_PROCESSES, 2, 0);
		struct knitk_call_opts o = { .size = sizeof(o), .flags = KNITK_CALL_WORKER };
		struct knitk_worker_info wi = { .size = sizeof(wi) };
		struct knitk_call *c[2];
		uint32_t ms = 300;
		int j;

		if (!p)
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

static void host_killed_workers_busy(void)
{
	host_killed(1);
}

static void host_killed_workers_idle(void)
{
	host_killed(0);
}

/* --------------------------------------------------------------- leaks */

static void no_leaks_after_destroy(void)
{
	int before = count_fds(false), r;
	unsigned int kind;

	for (kind = KNITK_WORKER_THREADS; kind <= KNITK_WORKER_PROCESSES;
	     kind++) {
		for (r = 0; r < 5; r++) {
			struct knitk_pool *p = make_pool(kind, 3,
				kind == KNITK_WORKER_PROCESSES ?
				KNITK_POOL_RESPAWN : 0);
			struct knitk_call *c;
			int v = 0;

			REQUIRE(p);
			if (kind == KNITK_WORKER_PROCESSES)
				CHECK_EQ(call_int(p, T_ABORT, 0), -EOWNERDEAD);
			CHECK_EQ(call_int(p, T_ERRNO, 7), 7);
			/* Left unreleased over destroy, released after. */
			REQUIRE(knitk_pool_submit(p, T_ECHO, &v, 4, NULL,
						  &c) == 0);
			knitk_pool_destroy(p);
			knitk_call_release(c);
		}
	}
	CHECK_EQ(count_fds(false), before);
	CHECK(no_children());
}

/* ------------------------------------------------------ odd requests */

/*
 * A call pinned to a worker that died (no respawn) while the other lives:
 * the pinned worker is gone, so -EPIPE, not a hang and not another worker.
 */
static void pinned_to_dead_worker(void)
{
	struct knitk_pool *p = make_pool(KNITK_WORKER_PROCESSES, 2, 0);
	struct knitk_call_opts o = { .size = sizeof(o), .flags = KNITK_CALL_WORKER, .worker = 1 };
	struct knitk_call *c;
	int v = 0, ret;

	REQUIRE(p);
	CHECK_EQ(knitk_pool_call(p, T_ABORT, &v, 4, &o, NULL, 0, NULL),
		 -EOWNERDEAD);
	ret = knitk_pool_submit(p, T_PID, &v, 4, &o, &c);
	printf("# submit pinned to the dead worker: %d\n", ret);
	CHECK_EQ(ret, -EPIPE);
	if (ret == 0) {
		printf("# ... and it completed with %d\n",
		       knitk_call_wait(c, KNITK_WAIT_FOREVER));
		knitk_call_release(c);
	}
	o.worker = 0;
	CHECK(knitk_pool_call(p, T_PID, &v, 4, &o, NULL, 0, NULL) > 0);
	knitk_pool_destroy(p);
	CHECK(no_children());
}

/* With respawn, a call pinned to a worker just crashed waits for its successor. */
static void pinned_waits_for_respawn(void)
{
	struct knitk_pool *p = make_pool(KNITK_WORKER_PROCESSES, 2,
					 KNITK_POOL_RESPAWN);
	struct knitk_call_opts o = { .size = sizeof(o), .flags = KNITK_CALL_WORKER, .worker = 0 };
	int v = 0, i, first, pid;

	REQUIRE(p);
	first = knitk_pool_call(p, T_PID, &v, 4, &o, NULL, 0, NULL);
	CHECK(first > 0);
	for (i = 0; i < 10; i++) {
		CHECK_EQ(knitk_pool_call(p, T_SEGV, &v, 4, &o, NULL, 0, NULL),
			 -EOWNERDEAD);
		pid = knitk_pool_call(p, T_PID, &v, 4, &o, NULL, 0, NULL);
		CHECK(pid > 0 && pid != first);
	}
	knitk_pool_destroy(p);
	CHECK(no_children());
}

/* A batch stops at its first bad entry; the calls before it are live. */
static void batch_with_bad_entry(void)
{
	struct knitk_pool *p = make_pool(KNITK_WORKER_THREADS, 2, 0);
	uint64_t x = 5;
	struct knitk_submission subs[3] = {
		{ .fn = T_ECHO, .in = &x, .len = 8 },
		{ .fn = NR_T + 7, .in = &x, .len = 8 },
		{ .fn = T_ECHO, .in = &x, .len = 8 },
	};
	struct knitk_call *c[3] = { NULL, NULL, NULL };
	const void *d;
	size_t len;

	REQUIRE(p);
	CHECK_EQ(knitk_pool_submit_batch(p, subs, 3, c), 1);
	REQUIRE(c[0]);
	CHECK_EQ(knitk_call_wait(c[0], KNITK_WAIT_FOREVER), 0);
	CHECK(knitk_call_result(c[0], &d, &len) == 0 && len == 8 &&
	      !memcmp(d, &x, 8));
	knitk_call_release(c[0]);
	CHECK_EQ(knitk_pool_submit_batch(p, subs + 1, 2, c), -EINVAL);
	knitk_pool_destroy(p);
}

/* A later knitk_reply_alloc replaces an earlier, across inline and arena. */
static void reply_alloc_replaces(void)
{
	static const uint64_t cases[][2] = {
		{ ARENA, 8 }, { 8, ARENA }, { 192, 193 }, { 193, 192 },
		{ 0, 0 }, { ARENA, 0 }, { 100, ARENA },
	};
	struct knitk_pool *p = make_pool(KNITK_WORKER_PROCESSES, 1, 0);
	static uint8_t out[ARENA];
	unsigned int i;
	size_t k;

	REQUIRE(p);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = ~(size_t)0;
		int st = knitk_pool_call(p, T_REPLY2, cases[i], 16, NULL, out,
					 sizeof(out), &len);

		CHECK_EQ(st, 0);
		CHECK_EQ(len, cases[i][1]);
		for (k = 0; st == 0 && k < cases[i][1]; k++)
			if (out[k] != 0x55)
				break;
		CHECK_EQ(k, cases[i][1]);
	}
	/* Truncated copy: the full length is still reported. */
	{
		uint64_t l[2] = { 0, 1000 };
		size_t len = 0;

		memset(out, 0, 64);
		CHECK_EQ(knitk_pool_call(p, T_REPLY2, l, 16, NULL, out, 10,
					 &len), 0);
		CHECK_EQ(len, 1000);
		CHECK_EQ(out[9], 0x55);
		CHECK_EQ(out[10], 0);
		CHECK_EQ(knitk_pool_call(p, T_REPLY2, l, 16, NULL, NULL, 0,
					 NULL), 0);
	}
	knitk_pool_destroy(p);
}

/* One submitter shared by 8 threads with arena-sized calls. */
static void one_submitter_many_threads(void)
{
	struct knitk_pool_opts o = { .size = sizeof(o), .kind = KNITK_WORKER_THREADS,
				     .nr_workers = 2, .nr_submitters = 1 };
	struct big b[8];
	pthread_t t[8];
	unsigned int i;

	REQUIRE(knitk_pool_create(&o, &table, &b[0].pool) == 0);
	for (i = 0; i < 8; i++) {
		struct knitk_pool *pool = b[0].pool;

		b[i] = (struct big){ .pool = pool, .id = i };
		REQUIRE(pthread_create(&t[i], NULL, big_thread, &b[i]) == 0);
	}
	for (i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(atomic_load(&b[i].bad), 0);
		CHECK_EQ(atomic_load(&b[i].ok), 40);
	}
	knitk_pool_destroy(b[0].pool);
}

static void *pools_thread(void *arg)
{
	atomic_ulong *bad = arg;
	int r;

	for (r = 0; r < 10; r++) {
		struct knitk_pool *p = make_pool(KNITK_WORKER_THREADS, 2, 0);
		int i;

		if (!p) {
			atomic_fetch_add(bad, 1);
			continue;
		}
		for (i = 0; i < 50; i++)
			if (call_int(p, T_ERRNO, i) != i)
				atomic_fetch_add(bad, 1);
		if (r % 2)
			knitk_pool_shutdown(p, KNITK_SHUTDOWN_DRAIN);
		knitk_pool_destroy(p);
	}
	return NULL;
}

/* Pools created, used and destroyed by 6 threads at once. */
static void many_pools_concurrently(void)
{
	atomic_ulong bad = 0;
	pthread_t t[6];
	unsigned int i;
	int fds = count_fds(false);

	for (i = 0; i < 6; i++)
		REQUIRE(pthread_create(&t[i], NULL, pools_thread, &bad) == 0);
	for (i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(atomic_load(&bad), 0);
	CHECK_EQ(count_fds(false), fds);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &table, NULL))
		return 1;
	if (argc > 1)
		nr_calls = strtoul(argv[1], NULL, 0);
	if (argc > 2)
		setenv("TAP_ONLY", argv[2], 1);
	if (nr_calls > 40000)
		nr_calls = 40000;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		return 1;
	TEST(errno_every_value_threads);
	TEST(errno_every_value_processes);
	TEST(crash_kinds_respawn);
	TEST(crash_all_then_epipe);
	TEST(shutdown_drain_race_threads);
	TEST(shutdown_cancel_race_threads);
	TEST(shutdown_drain_race_processes);
	TEST(shutdown_cancel_race_processes);
	TEST(arena_size_calls_threads);
	TEST(arena_size_calls_processes);
	TEST(deadlines);
	TEST(signal_storm_during_kill_storm);
	TEST(no_leaks_after_destroy);
	TEST(pinned_to_dead_worker);
	TEST(pinned_waits_for_respawn);
	TEST(batch_with_bad_entry);
	TEST(reply_alloc_replaces);
	TEST(one_submitter_many_threads);
	TEST(many_pools_concurrently);
	TEST(task_einprogress_not_a_timeout);
	/* A use after free here would end the program: after the rest. */
	TEST(handles_after_destroy_threads);
	TEST(handles_after_destroy_processes);
	/*
	 * Last: a worker that outlives its host hangs these cases until the
	 * watchdog.  Every earlier case has joined its threads, so the fork
	 * happens in a process of one thread.
	 */
	TEST(host_killed_workers_busy);
	TEST(host_killed_workers_idle);
	return tap_exit();
}
