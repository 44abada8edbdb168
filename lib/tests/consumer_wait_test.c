// SPDX-License-Identifier: GPL-2.0
/*
 * knitk_consumer_wait (futex backend): the lanes published come back in
 * order, exactly once, from a writer thread and from a writer process; a
 * deadline loses nothing; the wait does not poll while its writer is
 * parked or the knot's awake roles outnumber the CPUs, and does poll
 * while the writer is awake and CPUs are free (the poll-round counter of
 * the test build); bad arguments; a SIGKILLed writer process ends the
 * wait with -EPIPE once its death is marked, after the lanes it published;
 * the end of the waiter's own role ends it with -ENOTCONN, also when the
 * waiter sleeps on its doorbell as the end comes.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <knitk.h>

#include "tap.h"
#include "futex_asleep.h"
#include "stream_fx.h"
#include "../core/internal.h"
#include "../core/knot_hooks.h"

#define NR_MSGS		200000

static int fx_init(struct fx *f)
{
	return fx_init_inline(f, 64);
}

/*
 * Send the values @first.. @first + @n - 1 in batches of 1 to 16, ringing
 * after each; under backpressure yield and retry.  0 or a negative errno.
 */
static int send_values(struct knitk_producer *p, uint64_t first, uint64_t n)
{
	uint64_t v = first, end = first + n;
	unsigned int k, i;
	int ret;

	while (v < end) {
		k = 1 + (unsigned int)(v % 16);
		for (i = 0; i < k && v < end; i++) {
			struct knitk_lane_header h = { .value = v };

			ret = knitk_producer_send(p, &h, NULL, 0);
			if (ret == -EAGAIN || ret == -ENOSPC)
				break;
			if (ret < 0)
				return ret;
			v++;
		}
		ret = knitk_producer_notify(p);
		if (ret < 0)
			return ret;
		if (i < k && v < end)
			sched_yield();
	}
	return 0;
}

/*
 * Take @n values through knitk_consumer_wait, checking that they come in
 * order from @first, each once; returns how many came.  Stops early at an
 * error of the wait (in *@err).
 */
static uint64_t take_values(struct knitk_consumer *c, uint64_t first, uint64_t n,
			    int *err)
{
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t got = 0, pend, batch;
	int ret, lane;

	*err = 0;
	while (got < n) {
		ret = knitk_consumer_wait(c, &pend, KNITK_WAIT_FOREVER);
		if (ret < 0) {
			*err = ret;
			break;
		}
		if (ret == 0)
			continue;
		CHECK_EQ(ret, __builtin_popcountll(pend));
		batch = pend;
		while ((lane = knitk_lane_next(c, &pend)) >= 0) {
			if (knitk_lane_decode(c, (unsigned int)lane, &m) ||
			    m.header.value != first + got) {
				printf("# lane %d: value %llu, expected %llu\n", lane,
				       (unsigned long long)m.header.value,
				       (unsigned long long)(first + got));
				*err = -EPROTO;
				knitk_lane_ack(c, batch);
				return got;
			}
			got++;
		}
		CHECK_EQ(knitk_lane_ack(c, batch), 0);
	}
	return got;
}

static void every_lane_once_threads(void)
{
	struct fx f;

	REQUIRE(fx_init(&f) == 0);
	stream_once_threads(&f, send_values, take_values, NR_MSGS);
}

static void every_lane_once_process(void)
{
	struct fx f;

	REQUIRE(fx_init(&f) == 0);
	stream_once_process(&f, send_values, take_values, NR_MSGS);
}

static void deadline_loses_nothing(void)
{
	struct knitk_consumer *c;
	struct knitk_producer *p;
	uint64_t pend = 1;
	struct fx f;
	int err;

	REQUIRE(fx_init(&f) == 0 && fx_worker(&f) == 0);
	REQUIRE(knitk_consumer_create(f.worker, (unsigned int)f.req, &c) == 0);
	REQUIRE(knitk_producer_create(f.host, (unsigned int)f.req, &p) == 0);
	CHECK_EQ(knitk_consumer_wait(c, &pend, now_ns() + 2000000), -ETIMEDOUT);
	CHECK_EQ(knitk_consumer_wait(c, &pend, 0), -ETIMEDOUT);	/* long past */
	CHECK_EQ(send_values(p, 0, 3), 0);
	/* A past deadline still returns what is pending. */
	CHECK_EQ(knitk_consumer_wait(c, &pend, 0), 3);
	CHECK_EQ(take_values(c, 0, 3, &err), 3);
	CHECK_EQ(err, 0);
	CHECK_EQ(knitk_consumer_wait(c, &pend, now_ns() + 1000000), -ETIMEDOUT);
	CHECK_EQ(send_values(p, 3, 5), 0);
	CHECK_EQ(take_values(c, 3, 5, &err), 5);
	CHECK_EQ(err, 0);
	knitk_producer_destroy(p);
	knitk_consumer_destroy(c);
	fx_fini(&f);
}

/* Poll rounds of one wait that times out after @ns. */
static uint64_t rounds_of_wait(struct knitk_consumer *c, uint64_t ns)
{
	uint64_t r0 = atomic_load(&knitk__consumer_poll_rounds), pend;

	CHECK_EQ(knitk_consumer_wait(c, &pend, now_ns() + ns), -ETIMEDOUT);
	return atomic_load(&knitk__consumer_poll_rounds) - r0;
}

static void no_poll_while_writer_parked(void)
{
	struct knitk_consumer *c;
	unsigned int cpus = 0;
	uint32_t seq;
	struct fx f;

	REQUIRE(fx_init(&f) == 0 && fx_worker(&f) == 0);
	REQUIRE(knitk_consumer_create(f.worker, (unsigned int)f.req, &c) == 0);
	/* The writer (the host) flags itself asleep, as a park does. */
	REQUIRE(knitk_doorbell_prepare(f.host, &seq) == 0);
	CHECK_EQ(knitk_endpoint_awake(f.host, NULL, NULL), 1);
	CHECK_EQ(rounds_of_wait(c, 2000000), 0);
	CHECK_EQ(rounds_of_wait(c, 2000000), 0);
	CHECK_EQ(knitk_doorbell_cancel(f.host), 0);
	knitk_consumer_destroy(c);

	/* Awake writer, CPUs for both roles: a fresh consumer polls. */
	CHECK_EQ(knitk_endpoint_awake(f.host, NULL, &cpus), 2);
	if (cpus >= 2) {
		REQUIRE(knitk_consumer_create(f.worker, (unsigned int)f.req, &c) == 0);
		CHECK(rounds_of_wait(c, 2000000) > 0);
		knitk_consumer_destroy(c);
	} else {
		printf("# one CPU: the polling half is left out\n");
	}
	fx_fini(&f);
}

static void no_poll_when_crowded(void)
{
	struct knitk_consumer *c;
	cpu_set_t old, one;
	unsigned int cpus = 0;
	struct fx f;
	int cpu;

	REQUIRE(sched_getaffinity(0, sizeof(old), &old) == 0);
	for (cpu = 0; !CPU_ISSET(cpu, &old); cpu++)
		;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
	REQUIRE(fx_init(&f) == 0 && fx_worker(&f) == 0);
	/* Two roles awake, one CPU: a poll would only delay the writer. */
	CHECK_EQ(knitk_endpoint_awake(f.host, NULL, &cpus), 2);
	CHECK_EQ(cpus, 1);
	REQUIRE(knitk_consumer_create(f.worker, (unsigned int)f.req, &c) == 0);
	CHECK_EQ(rounds_of_wait(c, 2000000), 0);
	knitk_consumer_destroy(c);
	fx_fini(&f);
	CHECK_EQ(sched_setaffinity(0, sizeof(old), &old), 0);
}

static void bad_arguments(void)
{
	struct knitk_endpoint *unjoined;
	struct knitk_consumer *c;
	uint64_t pend;
	struct fx f;

	CHECK_EQ(knitk_consumer_wait(NULL, &pend, 0), -EINVAL);
	CHECK_EQ(knitk_endpoint_awake(NULL, &pend, NULL), -EINVAL);
	REQUIRE(fx_init(&f) == 0 && fx_worker(&f) == 0);
	REQUIRE(knitk_consumer_create(f.worker, (unsigned int)f.req, &c) == 0);
	CHECK_EQ(knitk_consumer_wait(c, NULL, 0), -EINVAL);
	knitk_consumer_destroy(c);
	/* A consumer on an endpoint with no role cannot park. */
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(f.host), 0, &unjoined) == 0);
	if (knitk_consumer_create(unjoined, (unsigned int)f.ret_mb, &c) == 0) {
		CHECK_EQ(knitk_consumer_wait(c, &pend, KNITK_WAIT_FOREVER), -ENOTCONN);
		knitk_consumer_destroy(c);
	}
	knitk_endpoint_destroy(unjoined);
	fx_fini(&f);
}

struct parked {
	struct knitk_consumer *c;
	_Atomic pid_t tid;	/* its thread id, once running */
	int ret;
};

static void *parked_wait(void *arg)
{
	struct parked *p = arg;
	uint64_t pend;

	atomic_store(&p->tid, futex_asleep_tid());
	p->ret = knitk_consumer_wait(p->c, &pend, KNITK_WAIT_FOREVER);
	return NULL;
}

/*
 * @c, a consumer of @ep whose role is doorbell @d, waits in a thread of
 * its own; once that thread sleeps on the doorbell's seq, @marker ends
 * role @d.  The end must advance the seq, waking the sleeper, and the
 * wait return -ENOTCONN.  A sleeper the end left asleep is kicked free
 * after the failed check (a failure, not a hang).
 */
static void end_role_under_sleeper(struct knitk_endpoint *ep,
				   struct knitk_consumer *c,
				   struct knitk_endpoint *marker, unsigned int d)
{
	_Atomic uint32_t *seq = A32(&knot_doorbell(ep, d)->seq);
	struct knitk_wake_stats st = { .size = sizeof(st) };
	struct parked p = { .c = c, .ret = 1 };
	pthread_t t;

	REQUIRE(pthread_create(&t, NULL, parked_wait, &p) == 0);
	end_role_wakes_sleeper(ep, d, marker, t, &p.tid, seq);
	CHECK_EQ(p.ret, -ENOTCONN);
	/* A death's kick: a wake, never a spurious one. */
	CHECK_EQ(knitk_endpoint_wake_stats(ep, &st), 0);
	CHECK_EQ(st.spurious, 0);
	CHECK_EQ(st.wakes, 1);
}

/*
 * The waiter's own role ends (a mark_dead of it, by itself or by a peer):
 * the wait returns -ENOTCONN, at once when the end came first, or from
 * its park when it came while the waiter slept.  Each parked for ever
 * once: the first while the wait looked only at whether it had joined,
 * the second while the end (futex_mark_dead) woke only the peers'
 * doorbells, not the ended role's own.
 */
static void ended_role_ends_wait(void)
{
	struct knitk_consumer *c;
	uint64_t pend;
	struct fx f;

	/* The host ends its own role, then waits for its return mailbox. */
	REQUIRE(fx_init(&f) == 0 && fx_worker(&f) == 0);
	REQUIRE(knitk_consumer_create(f.host, (unsigned int)f.ret_mb, &c) == 0);
	REQUIRE(knitk_endpoint_mark_dead(f.host, KNITK_DOORBELL_HOST) == 0);
	CHECK_EQ(knitk_consumer_wait(c, &pend, KNITK_WAIT_FOREVER), -ENOTCONN);
	knitk_consumer_destroy(c);
	fx_fini(&f);

	/* The host ends worker 0's role while it sleeps waiting for requests. */
	REQUIRE(fx_init(&f) == 0 && fx_worker(&f) == 0);
	REQUIRE(knitk_consumer_create(f.worker, (unsigned int)f.req, &c) == 0);
	end_role_under_sleeper(f.worker, c, f.host, 0);
	knitk_consumer_destroy(c);
	fx_fini(&f);

	/*
	 * Worker 0 ends the host's role (a worker's watch of its host,
	 * lib/pool/spawn.c) while the host sleeps waiting for results.
	 */
	REQUIRE(fx_init(&f) == 0 && fx_worker(&f) == 0);
	REQUIRE(knitk_consumer_create(f.host, (unsigned int)f.ret_mb, &c) == 0);
	end_role_under_sleeper(f.host, c, f.worker, KNITK_DOORBELL_HOST);
	knitk_consumer_destroy(c);
	fx_fini(&f);
}

struct killer_arg {
	struct knitk_endpoint *host;
	pid_t pid;
	int ret;
};

/* The pool's part on the futex backend: see the death, mark it. */
static void *killer_thread(void *arg)
{
	struct killer_arg *a = arg;

	/* Let the reader park first, if it will (not needed for the result). */
	usleep(20000);
	kill(a->pid, SIGKILL);
	if (waitpid(a->pid, NULL, 0) != a->pid)
		a->ret = -ECHILD;
	else
		a->ret = knitk_endpoint_mark_dead(a->host, 0);
	return NULL;
}

static void killed_writer_ends_wait(void)
{
	struct killer_arg ka;
	struct knitk_consumer *c;
	uint64_t pend;
	int err, pipefd[2];
	pthread_t th;
	char x;
	struct fx f;

	REQUIRE(pipe(pipefd) == 0);
	REQUIRE(fx_init(&f) == 0);
	REQUIRE(knitk_consumer_create(f.host, (unsigned int)f.ret_mb, &c) == 0);

	/* Killed while the reader waits: the wait ends -EPIPE. */
	ka = (struct killer_arg){ .host = f.host, .pid = fork_writer(&f, send_values, 5, pipefd[1], 1) };
	REQUIRE(ka.pid > 0);
	REQUIRE(read(pipefd[0], &x, 1) == 1);
	CHECK_EQ(take_values(c, 0, 5, &err), 5);
	CHECK_EQ(err, 0);
	REQUIRE(pthread_create(&th, NULL, killer_thread, &ka) == 0);
	CHECK_EQ(knitk_consumer_wait(c, &pend, KNITK_WAIT_FOREVER), -EPIPE);
	pthread_join(th, NULL);
	CHECK_EQ(ka.ret, 0);
	knitk_consumer_destroy(c);
	fx_fini(&f);

	/* Killed before the wait, with lanes pending: those first. */
	REQUIRE(fx_init(&f) == 0);
	REQUIRE(knitk_consumer_create(f.host, (unsigned int)f.ret_mb, &c) == 0);
	ka = (struct killer_arg){ .host = f.host, .pid = fork_writer(&f, send_values, 7, pipefd[1], 1) };
	REQUIRE(ka.pid > 0);
	REQUIRE(read(pipefd[0], &x, 1) == 1);
	killer_thread(&ka);
	CHECK_EQ(ka.ret, 0);
	CHECK_EQ(take_values(c, 0, 7, &err), 7);
	CHECK_EQ(err, 0);
	CHECK_EQ(knitk_consumer_wait(c, &pend, KNITK_WAIT_FOREVER), -EPIPE);
	knitk_consumer_destroy(c);
	fx_fini(&f);
	close(pipefd[0]);
	close(pipefd[1]);
}

int main(void)
{
	/* Processes first: fork before any thread exists. */
	TEST(every_lane_once_process);
	TEST(killed_writer_ends_wait);
	TEST(every_lane_once_threads);
	TEST(deadline_loses_nothing);
	TEST(no_poll_while_writer_parked);
	TEST(no_poll_when_crowded);
	TEST(bad_arguments);
	TEST(ended_role_ends_wait);
	return tap_exit();
}
