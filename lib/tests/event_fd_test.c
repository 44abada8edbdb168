// SPDX-License-Identifier: GPL-2.0
/*
 * The pool's event fd (knitk_pool_event_fd, knitk_endpoint_set_event_fd)
 * is the pool's own: refused for process workers, the same fd each time,
 * closed by destroy, written once per sleep of the host and never by a
 * hand-over; its loop survives signals, a forked child closing every fd
 * takes nothing, a raw or dead-marked endpoint event fd behaves, and bad
 * arguments to every call of a stealing pool in event mode lose nothing.
 * argv[1] (the runner's call count) is ignored: the counts are small.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_parked.h"
#include "pool_tasks.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

/*
 * Event mode with process workers on the futex backend is -EOPNOTSUPP,
 * and the refusal loses nothing: the pool is not in event mode (reap
 * -EINVAL, submit still blocks for room) and serves calls.
 */
static void event_fd_processes_refused(void)
{
	struct knitk_pool *pool;
	struct knitk_call *out[2];

	REQUIRE(new_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE, 2, 0,
			 &pool) == 0);
	CHECK_EQ(knitk_pool_event_fd(pool), -EOPNOTSUPP);
	CHECK_EQ(knitk_pool_event_fd(pool), -EOPNOTSUPP);
	CHECK_EQ(knitk_pool_reap(pool, out, 2), -EINVAL);
	CHECK_EQ(mix_calls_good(pool, 200, NULL, 5, 3), 200);
	knitk_pool_destroy(pool);

	REQUIRE(new_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL, 2, 0,
			 &pool) == 0);
	CHECK_EQ(knitk_pool_event_fd(pool), -EOPNOTSUPP);
	CHECK_EQ(mix_calls_good(pool, 200, NULL, 7, 3), 200);
	knitk_pool_destroy(pool);
}

/* The event fd is the pool's: the same each time, closed by destroy. */
static void event_fd_owned_by_pool(void)
{
	struct knitk_pool *pool;
	int before = count_fds(false), fd;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 2, 0,
			 &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	CHECK_EQ(knitk_pool_event_fd(pool), fd);
	CHECK(fcntl(fd, F_GETFD) >= 0);
	CHECK_EQ(knitk_pool_reap(pool, NULL, 0), 0);
	knitk_pool_destroy(pool);
	CHECK_EQ(count_fds(false), before);
}

struct evfd_racer {
	struct knitk_pool *pool;
	pthread_barrier_t *go;
	int fd;
};

static void *evfd_racer_main(void *arg)
{
	struct evfd_racer *r = arg;

	pthread_barrier_wait(r->go);
	r->fd = knitk_pool_event_fd(r->pool);
	return NULL;
}

/*
 * The first knitk_pool_event_fd calls of a pool race from eight threads:
 * all get the same fd, the pool works through it, and destroy leaves no
 * fd behind (no second eventfd was made and lost).
 */
static void event_fd_first_call_race(void)
{
	struct evfd_racer r[8];
	pthread_t th[8];
	pthread_barrier_t go;
	unsigned int round, i, wrong = 0;
	int before = count_fds(false);

	for (round = 0; round < 30; round++) {
		struct knitk_pool *pool;
		struct knitk_call *c, *out[1];
		uint64_t x = round;
		int n;

		REQUIRE(new_pool(KNITK_WORKER_THREADS, round & 1, 1, 0, &pool) == 0);
		REQUIRE(pthread_barrier_init(&go, NULL, 8) == 0);
		for (i = 0; i < 8; i++) {
			r[i] = (struct evfd_racer){ pool, &go, -1 };
			REQUIRE(pthread_create(&th[i], NULL, evfd_racer_main, &r[i]) == 0);
		}
		for (i = 0; i < 8; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&go);
		for (i = 0; i < 8; i++)
			wrong += r[i].fd < 0 || r[i].fd != r[0].fd;
		wrong += knitk_pool_event_fd(pool) != r[0].fd;
		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c) == 0);
		while ((n = knitk_pool_reap(pool, out, 1)) == 0) {
			struct pollfd p = { .fd = r[0].fd, .events = POLLIN };

			poll(&p, 1, -1);
		}
		wrong += n != 1 || out[0] != c || !mix_result_ok(c, x);
		knitk_call_release(c);
		knitk_pool_destroy(pool);
	}
	CHECK_EQ(wrong, 0);
	CHECK_EQ(count_fds(false), before);
}

/* Until the host doorbell of @pool's knot has its sleeping flag set. */
static void until_host_parked(struct knitk_pool *pool)
{
	struct knitk_endpoint *knot;
	struct knitk_layout l;
	void *base;
	const struct knitk_doorbell *db;

	if (knitk_pool_endpoint(pool, &knot) || knitk_endpoint_layout(knot, &l, NULL) ||
	    knitk_endpoint_base(knot, &base))
		return;
	db = (const void *)((char *)base + l.doorbell_off +
			    (uint64_t)KNITK_DOORBELL_HOST * l.doorbell_stride);
	while (!__atomic_load_n(&db->sleeping, __ATOMIC_ACQUIRE))
		sched_yield();
}

/*
 * knitk_pool_event_fd while the pool's own collector is parked on the
 * host doorbell: handing that park over to the loop is no result and no
 * death, so it writes nothing to the eventfd; the first result while
 * the loop waits is its only write.
 */
static void event_fd_handover_writes_nothing(void)
{
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c, *out[2];
	uint64_t v = 0, x = 5;
	unsigned int kept = 0;
	int fd;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1, 0,
			 &pool) == 0);
	until_host_parked(pool);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	CHECK_EQ(eventfd_value(fd, &v), 0);
	pool_stats(pool, &st);
	CHECK_EQ(st.event_writes, 0);
	CHECK_EQ(reap_all(pool, NULL, 0, &kept), 0);
	CHECK_EQ(eventfd_value(fd, &v), 0);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c) == 0);
	{
		struct pollfd p = { .fd = fd, .events = POLLIN };

		CHECK_EQ(poll(&p, 1, -1), 1);
	}
	CHECK_EQ(eventfd_value(fd, &v), 1);
	CHECK_EQ(v, 1);
	pool_stats(pool, &st);
	CHECK_EQ(st.event_writes, 1);
	CHECK_EQ(knitk_pool_reap(pool, out, 2), 1);
	CHECK(out[0] == c && mix_result_ok(c, x));
	knitk_call_release(c);
	knitk_pool_destroy(pool);
}

/*
 * One sleep of the loop, one eventfd write: results of two workers that
 * finish while the loop is parked on a level-triggered poll of the
 * eventfd add up to a value of exactly 1, counted once in event_writes.
 */
static void one_write_per_sleep(void)
{
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct pollfd p;
	unsigned int kept = 0;
	uint64_t v = 0;
	int fd, i;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 2, 0,
			 &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	CHECK_EQ(reap_all(pool, NULL, 0, &kept), 0);
	for (i = 0; i < 20; i++) {
		uint64_t x = (uint64_t)i;
		struct knitk_call *c;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c) == 0);
	}
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	CHECK_EQ(poll(&p, 1, -1), 1);
	while (results_pending(pool, 2) < 20)
		sched_yield();
	/* Level-triggered: still ready until read. */
	CHECK_EQ(poll(&p, 1, 0), 1);
	CHECK_EQ(read(fd, &v, 8), 8);
	CHECK_EQ(v, 1);
	pool_stats(pool, &st);
	CHECK_EQ(st.event_writes, 1);
	CHECK_EQ(reap_all(pool, NULL, 0, &kept), 20);
	knitk_pool_destroy(pool);
}

/*
 * A forked child that closes every fd it inherited (the knot, the
 * eventfd) and exits is no death and takes nothing from the pool: the
 * calls in flight across the fork are reaped with their results.
 */
static void fork_child_closes_everything(void)
{
	struct knitk_call *c[50], *kept[64];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	unsigned int i, kept_n = 0, bad = 0;
	int fd, status, ret;
	pid_t pid;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 2, 0,
			 &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	for (i = 0; i < 25; i++) {
		uint64_t x = i;

		REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i]) == 0);
	}
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		int f;

		for (f = 0; f < 1024; f++)
			close(f);
		_exit(0);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (i = 25; i < 50; i++) {
		uint64_t x = i;

		while ((ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[i])) == -EAGAIN)
			sched_yield();
		REQUIRE(ret == 0);
	}
	while (kept_n < 50) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		ret = reap_all(pool, kept, 64, &kept_n);
		REQUIRE(ret >= 0);
		if (!ret && kept_n < 50)
			poll(&p, 1, -1);
		if (!ret && kept_n < 50) {
			uint64_t v;

			CHECK(eventfd_value(fd, &v) >= 0);
		}
	}
	for (i = 0; i < 50; i++)
		if (knitk_call_status(c[i]) || !mix_result_ok(c[i], i))
			bad++;
	CHECK_EQ(bad, 0);
	for (i = 0; i < kept_n; i++)
		knitk_call_release(kept[i]);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.completed, 50);
	knitk_pool_destroy(pool);
}

static _Atomic unsigned long sigs_seen;

static void on_sig(int sig)
{
	(void)sig;
	atomic_fetch_add(&sigs_seen, 1);
}

struct signaller {
	_Atomic int stop;
};

static void *signaller_main(void *arg)
{
	struct signaller *s = arg;
	struct timespec ts = { 0, 50 * 1000 };

	while (!atomic_load(&s->stop)) {
		kill(getpid(), SIGUSR1);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/*
 * Signals without SA_RESTART rain on every thread of the process (the
 * pool's included) during an epoll event loop over a stealing pool:
 * the loop sees EINTR from epoll_wait, the pool nothing: every call is
 * reaped once with its result.
 */
static void signals_during_event_loop(void)
{
	struct sigaction sa = { .sa_handler = on_sig }, old;
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	struct signaller s = { 0 };
	struct knitk_pool *pool;
	pthread_t th;
	unsigned int sent = 0, got = 0, bad = 0, total = 2000;
	static unsigned char seen[2000];
	int fd, ep, n, i;

	memset(seen, 0, sizeof(seen));
	atomic_store(&sigs_seen, 0);
	REQUIRE(sigaction(SIGUSR1, &sa, &old) == 0);
	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 2, 0,
			 &pool) == 0);
	fd = knitk_pool_event_fd(pool);
	REQUIRE(fd >= 0);
	ep = epoll_create1(EPOLL_CLOEXEC);
	REQUIRE(ep >= 0);
	REQUIRE(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
	REQUIRE(pthread_create(&th, NULL, signaller_main, &s) == 0);
	/* The rain has begun before the loop does (and goes on through it). */
	while (!atomic_load(&sigs_seen))
		sched_yield();
	while (got < total && !bad) {
		struct knitk_call *out[16];

		while (sent < total) {
			uint64_t x = sent;
			struct knitk_call *c;
			int ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c);

			if (ret == -EAGAIN)
				break;
			if (ret) {
				bad++;
				break;
			}
			sent++;
		}
		while ((n = knitk_pool_reap(pool, out, 16)) > 0) {
			for (i = 0; i < n; i++) {
				const void *d;
				size_t len;
				uint64_t y = 0;
				unsigned int k;

				/* Find x from the result: mix64 is a bijection. */
				if (knitk_call_status(out[i]) ||
				    knitk_call_result(out[i], &d, &len) || len != 8) {
					bad++;
				} else {
					memcpy(&y, d, 8);
					for (k = 0; k < total; k++)
						if (mix64(k) == y)
							break;
					if (k == total || seen[k]++)
						bad++;
				}
				knitk_call_release(out[i]);
			}
			got += (unsigned int)n;
		}
		if (n < 0)
			bad++;
		if (got < total && sent - got > 0 && n == 0) {
			int r = epoll_wait(ep, &ev, 1, -1);

			if (r < 0 && errno != EINTR)
				bad++;
		}
	}
	atomic_store(&s.stop, 1);
	pthread_join(th, NULL);
	CHECK_EQ(bad, 0);
	CHECK_EQ(got, total);
	CHECK(atomic_load(&sigs_seen) > 0);
	close(ep);
	knitk_pool_destroy(pool);
	sigaction(SIGUSR1, &old, NULL);
}

/*
 * knitk_endpoint_set_event_fd on raw endpoints: bad arguments, no write
 * for a ring the host's sleeping flag suppresses, one for a wake of a
 * sleeping host, none after -1.
 */
static void set_event_fd_raw(void)
{
	struct knitk_geometry g = { .nr_workers = 1, .nr_submitters = 1,
				    .lanes = KNITK_LANES, .inline_bytes = 64 };
	struct knitk_endpoint *host, *wk;
	struct knitk_producer *prod;
	struct knitk_wake_stats ws = { .size = sizeof(ws) };
	struct knitk_lane_header h = { .function_id = 1 };
	uint32_t seq;
	uint64_t v;
	int efd, ret;

	CHECK_EQ(knitk_endpoint_set_event_fd(NULL, -1), -EINVAL);
	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &wk) == 0);
	REQUIRE(knitk_endpoint_join(wk, KNITK_ROLE_WORKER, 0) >= 1);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	REQUIRE(efd >= 0);
	CHECK_EQ(knitk_endpoint_set_event_fd(wk, -2), -EINVAL);
	CHECK_EQ(knitk_endpoint_set_event_fd(wk, INT_MIN), -EINVAL);
	CHECK_EQ(knitk_endpoint_set_event_fd(wk, efd), 0);
	REQUIRE(knitk_producer_create(wk, (unsigned int)knitk_endpoint_return_mailbox(wk, 0),
				      &prod) == 0);
	/* Host awake: the ring is suppressed, nothing written. */
	REQUIRE(knitk_producer_send(prod, &h, "a", 1) >= 0);
	CHECK_EQ(knitk_producer_notify(prod), 0);
	CHECK_EQ(eventfd_value(efd, &v), 0);
	/* Host declared its sleep: one write for the wake, none for a second ring. */
	REQUIRE(knitk_doorbell_prepare(host, &seq) == 0);
	CHECK_EQ(knitk_producer_notify(prod), 1);
	CHECK_EQ(knitk_producer_notify(prod), 0);
	CHECK_EQ(eventfd_value(efd, &v), 1);
	CHECK_EQ(v, 1);
	CHECK_EQ(knitk_doorbell_wait(host, seq, KNITK_WAIT_FOREVER), 0);
	CHECK_EQ(knitk_endpoint_wake_stats(wk, &ws), 0);
	CHECK_EQ(ws.event_writes, 1);
	/* Stopped: a wake writes nothing. */
	CHECK_EQ(knitk_endpoint_set_event_fd(wk, -1), 0);
	ret = knitk_doorbell_prepare(host, &seq);
	CHECK_EQ(ret, 0);
	CHECK_EQ(knitk_producer_notify(prod), 1);
	CHECK_EQ(eventfd_value(efd, &v), 0);
	knitk_doorbell_cancel(host);
	/* The module-only calls say so on the futex backend. */
	{
		struct knitk_doorbell_stats ds;

		CHECK_EQ(knitk_endpoint_doorbell_stats(host, KNITK_DOORBELL_HOST, &ds,
						       sizeof(ds)), -EOPNOTSUPP);
	}
	knitk_producer_destroy(prod);
	knitk_endpoint_destroy(wk);
	knitk_endpoint_destroy(host);
	close(efd);
}

/*
 * A death the host marks itself (knitk_endpoint_mark_dead, the pool's
 * pidfd path) while it has declared its sleep writes the host's own
 * event fd once; a second mark of the same role is -ENOENT and writes
 * nothing.
 */
static void set_event_fd_mark_dead(void)
{
	struct knitk_geometry g = { .nr_workers = 2, .nr_submitters = 1,
				    .lanes = KNITK_LANES };
	struct knitk_endpoint *host, *wk;
	uint32_t seq, dseq0 = 0, dseq = 0;
	uint64_t v, dead = 0;
	int efd;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &wk) == 0);
	REQUIRE(knitk_endpoint_join(wk, KNITK_ROLE_WORKER, 1) >= 1);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	REQUIRE(efd >= 0);
	CHECK_EQ(knitk_endpoint_set_event_fd(host, efd), 0);
	CHECK_EQ(knitk_endpoint_deaths(host, &dseq0, NULL), 0);
	REQUIRE(knitk_doorbell_prepare(host, &seq) == 0);
	CHECK_EQ(knitk_endpoint_mark_dead(host, 1), 0);
	CHECK_EQ(eventfd_value(efd, &v), 1);
	CHECK_EQ(v, 1);
	CHECK_EQ(knitk_doorbell_wait(host, seq, KNITK_WAIT_FOREVER), 0);
	CHECK_EQ(knitk_endpoint_deaths(host, &dseq, &dead), 0);
	CHECK_EQ(dseq, dseq0 + 1);
	CHECK_EQ(dead, 1ULL << 1);
	CHECK_EQ(knitk_endpoint_role(host, 1, NULL), 0);
	REQUIRE(knitk_doorbell_prepare(host, &seq) == 0);
	CHECK_EQ(knitk_endpoint_mark_dead(host, 1), -ENOENT);
	CHECK_EQ(knitk_endpoint_mark_dead(host, 0), -ENOENT);	/* never joined */
	CHECK_EQ(eventfd_value(efd, &v), 0);
	knitk_doorbell_cancel(host);
	CHECK_EQ(knitk_endpoint_set_event_fd(host, -1), 0);
	knitk_endpoint_destroy(wk);
	knitk_endpoint_destroy(host);
	close(efd);
}

/*
 * Bad arguments to every pool call, on a live stealing pool in event
 * mode: each is a negative errno (or, for the void calls, nothing), and
 * the pool loses nothing: the call made before them is still reaped with
 * its result and a new one goes through.
 */
static void bad_args_lose_nothing(void)
{
	struct knitk_call_opts bad_co = { .size = sizeof(bad_co), .reserved = 1 };
	struct knitk_call_opts bad_fl = { .size = sizeof(bad_fl), .flags = 1U << 7 };
	struct knitk_call_opts tiny = { .size = 4 };
	struct knitk_submission subs[2] = { { .fn = T_MIX, .len = 8 },
					    { .fn = T_MIX, .reserved = 1 } };
	struct knitk_pool_stats st;
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_endpoint *ep;
	struct knitk_call *c, *before, *out[4], *calls[2], *nulls[2] = { NULL, NULL };
	struct knitk_pool *pool;
	const void *d;
	size_t len;
	uint64_t x = 77;
	unsigned int kept = 0;
	int ret;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL, 2, 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &before) == 0);
	subs[0].in = &x;

	CHECK(knitk_pool_submit(NULL, T_MIX, &x, 8, NULL, &c) < 0);
	CHECK(knitk_pool_submit(pool, T_NR, &x, 8, NULL, &c) < 0);
	CHECK(knitk_pool_submit(pool, UINT32_MAX, &x, 8, NULL, &c) < 0);
	CHECK(knitk_pool_submit(pool, T_MIX, NULL, 8, NULL, &c) < 0);
	CHECK(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, NULL) < 0);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &bad_co, &c), -EINVAL);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &bad_fl, &c), -EINVAL);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &tiny, &c), -EINVAL);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, SIZE_MAX, NULL, &c), -EMSGSIZE);
	CHECK(knitk_pool_submit_batch(NULL, subs, 1, calls) < 0);
	CHECK(knitk_pool_submit_batch(pool, NULL, 1, calls) < 0);
	CHECK(knitk_pool_submit_batch(pool, subs, 1, NULL) < 0);
	ret = knitk_pool_submit_batch(pool, subs, 0, calls);
	CHECK(ret == 0 || ret == -EINVAL);
	/* One good, then a bad entry: one submitted, reaped below. */
	CHECK_EQ(knitk_pool_submit_batch(pool, subs, 2, calls), 1);
	CHECK_EQ(knitk_pool_submit_batch(pool, subs + 1, 1, calls + 1), -EINVAL);

	CHECK(knitk_call_wait(NULL, 0) < 0);
	CHECK(knitk_call_status(NULL) < 0);
	CHECK(knitk_call_result(NULL, &d, &len) < 0);
	CHECK(knitk_call_result(before, NULL, &len) < 0 ||
	      knitk_call_result(before, NULL, &len) == -EINPROGRESS);
	CHECK(knitk_call_abort(NULL) < 0);
	CHECK(knitk_call_worker(NULL) < 0);
	knitk_call_release(NULL);
	CHECK(knitk_pool_wait_any(NULL, &before, 1, 0) < 0);
	CHECK(knitk_pool_wait_any(pool, NULL, 1, 0) < 0);
	CHECK(knitk_pool_wait_any(pool, nulls, 2, 0) < 0);
	CHECK(knitk_pool_wait_all(pool, NULL, 1, 0) < 0);
	CHECK(knitk_pool_wait_all(pool, nulls, 2, 0) < 0);
	CHECK(knitk_pool_stats(NULL, &st) < 0);
	CHECK(knitk_pool_stats(pool, NULL) < 0);
	CHECK(knitk_pool_worker_info(pool, 2, &wi) < 0);
	CHECK(knitk_pool_worker_info(pool, UINT_MAX, &wi) < 0);
	CHECK(knitk_pool_worker_info(pool, 0, NULL) < 0);
	CHECK(knitk_pool_worker_info(NULL, 0, &wi) < 0);
	CHECK(knitk_pool_endpoint(NULL, &ep) < 0);
	CHECK(knitk_pool_endpoint(pool, NULL) < 0);
	CHECK(knitk_pool_event_fd(NULL) < 0);
	CHECK(knitk_pool_reap(NULL, out, 1) < 0);
	CHECK(knitk_pool_shutdown(NULL, KNITK_SHUTDOWN_DRAIN) < 0);
	CHECK_EQ(knitk_pool_shutdown(pool, 0), -EINVAL);
	CHECK_EQ(knitk_pool_shutdown(pool, 3), -EINVAL);
	CHECK(knitk_pool_call(NULL, T_MIX, &x, 8, NULL, out, 8, &len) < 0);
	CHECK(knitk_task_aborted(NULL) == -EINVAL);
	CHECK(knitk_reply_alloc(NULL, 8, (void **)&d) < 0);
	CHECK(knitk_reply_set(NULL, &x, 8) < 0);
	knitk_pool_destroy(NULL);

	/* Nothing lost: the two good calls come back, then a new one. */
	while (kept < 2) {
		ret = knitk_pool_reap(pool, out + kept, 4 - kept);
		REQUIRE(ret >= 0);
		kept += (unsigned int)ret;
		if (!ret)
			sched_yield();
	}
	CHECK_EQ(kept, 2);
	CHECK((out[0] == before && out[1] == calls[0]) ||
	      (out[1] == before && out[0] == calls[0]));
	CHECK(mix_result_ok(before, x) && mix_result_ok(calls[0], x));
	knitk_call_release(out[0]);
	knitk_call_release(out[1]);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c) == 0);
	while ((ret = knitk_pool_reap(pool, out, 4)) == 0)
		sched_yield();
	CHECK_EQ(ret, 1);
	CHECK(out[0] == c && mix_result_ok(c, x));
	knitk_call_release(c);
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, 3);
	CHECK_EQ(st.completed, 3);
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	knitk_pool_destroy(pool);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(event_fd_processes_refused);
	TEST(event_fd_owned_by_pool);
	TEST(event_fd_first_call_race);
	TEST(event_fd_handover_writes_nothing);
	TEST(one_write_per_sleep);
	TEST(fork_child_closes_everything);
	TEST(signals_during_event_loop);
	TEST(bad_args_lose_nothing);
	TEST(set_event_fd_raw);
	TEST(set_event_fd_mark_dead);
	return tap_exit();
}
