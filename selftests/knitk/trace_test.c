// SPDX-License-Identifier: GPL-2.0
/*
 * The module's tracepoints (kmod/knitk_trace.h, docs/tracing.md), enabled
 * in a tracefs instance of the test's own: a scripted workload on one
 * knot, then its events read back from the instance's trace file, each
 * checked field by field, and their counts held to the doorbell counters
 * of KNITK_IOC_STATS that the same workload moved.
 *
 * Without tracefs (a kernel without CONFIG_TRACING) every test skips; with
 * tracefs but no knitk events (a module built without them) they fail.
 */
#define _GNU_SOURCE
#include <pthread.h>

#include "knitk_harness.h"
#include "knitk_signal.h"
#include "knitk_spin.h"
#include "knitk_test.h"
#include "knitk_tracefs.h"
#include "knitk_trigger.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	"0x8000000000000000"

FIXTURE(tr) {
	char inst[256];		/* the tracefs instance, "" if none */
	struct knot k;		/* the host's endpoint, joined */
	int w[2];		/* worker endpoints, -1 if not joined here */
	unsigned long long id;	/* the knot's id in the events */
	struct trace t;
};

FIXTURE_SETUP(tr)
{
	self->inst[0] = '\0';
	self->k.fd = -1;
	self->w[0] = self->w[1] = -1;
	KNITK_REQUIRE_DEV();
	trace_instance_open(_metadata, self->inst, sizeof(self->inst),
			    "knitk_test", NULL);
}

FIXTURE_TEARDOWN(tr)
{
	trace_free(&self->t);
	if (self->w[0] >= 0)
		close(self->w[0]);
	if (self->w[1] >= 0)
		close(self->w[1]);
	knot_close(&self->k);
	trace_instance_close(self->inst);
}

/*
 * The small knot (2 workers) with its host joined through self->k.fd and
 * the workers of @workers joined here; its id from its create event.
 */
static void tr_open(struct __test_metadata *_metadata, FIXTURE_DATA(tr) *self,
		    unsigned int workers)
{
	const struct tev *e = NULL;
	struct knitk_geometry g;
	unsigned int i;
	size_t n;

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	for (i = 0; i < 2; i++) {
		if (!(workers & (1U << i)))
			continue;
		self->w[i] = knot_endpoint(&self->k, KNITK_ROLE_WORKER, i);
		ASSERT_LE(0, self->w[i]);
	}
	trace_collect(_metadata, self->inst, &self->t);
	for (n = 0; n < self->t.n; n++)
		if (!strcmp(self->t.ev[n].name, "knitk_knot_create") &&
		    self->t.ev[n].pid == getpid())
			e = &self->t.ev[n];
	ASSERT_NE(NULL, e) TH_LOG("no knitk_knot_create event of this process");
	self->id = (unsigned long long)tev_num(e, "knot", 0);
	ASSERT_NE(0, self->id);
}

static __u64 stat_of(struct __test_metadata *_metadata, int fd, __u32 d,
		     size_t off)
{
	struct knitk_doorbell_stats st;
	__u64 v;

	EXPECT_EQ(0, knitk_stats(fd, d, &st));
	memcpy(&v, (const char *)&st + off, sizeof(v));
	return v;
}

#define STAT(fd, d, f) \
	stat_of(_metadata, fd, d, offsetof(struct knitk_doorbell_stats, f))

/* A thread in one KNITK_IOC_WAIT on the seq it was given. */
struct sleeper {
	pthread_t thread;
	int fd;
	__u32 seq;
	__u32 flags;
	int ret;
};

static void *sleeper_run(void *arg)
{
	struct sleeper *s = arg;

	s->ret = knitk_wait_flags(s->fd, s->seq, s->flags,
				  knitk_now_ns() + KNITK_LONG_NS);
	return NULL;
}

/*
 * Doorbell @d flagged asleep, a sleeper on endpoint @fd started, and back
 * once the kernel counts its wait as the @n-th asleep there.
 */
static void sleeper_start(struct __test_metadata *_metadata,
			  FIXTURE_DATA(tr) *self, struct sleeper *s, int fd,
			  __u32 d, __u64 n)
{
	s->fd = fd;
	s->flags = 0;
	s->ret = 1;
	s->seq = flag_asleep(knot_doorbell(&self->k, d));
	ASSERT_EQ(0, pthread_create(&s->thread, NULL, sleeper_run, s));
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, d, n));
}

static int sleeper_join(FIXTURE_DATA(tr) *self, struct sleeper *s, __u32 d)
{
	pthread_join(s->thread, NULL);
	knitk_doorbell_sleeping(knot_doorbell(&self->k, d), 0);
	return s->ret;
}

/* A knot's life: create, two joins, two closes, destroy. */
TEST_F(tr, knot_and_roles)
{
	unsigned long long id;

	tr_open(_metadata, self, 1);
	id = self->id;
	EXPECT_EQ(1, trace_count(&self->t, "knitk_knot_create",
				 "knot=%llu workers=2 submitters=1 steal=0", id));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_role_join",
				 "knot=%llu role=host doorbell=63 generation=1 pid=%d",
				 id, getpid()));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_role_join",
				 "knot=%llu role=worker doorbell=0 generation=1 pid=%d",
				 id, getpid()));

	close(self->w[0]);
	self->w[0] = -1;
	knot_close(&self->k);
	trace_collect(_metadata, self->inst, &self->t);
	EXPECT_EQ(1, trace_count(&self->t, "knitk_role_end",
				 "knot=%llu role=worker doorbell=0 pid=%d why=close exit_code=0x0 death_seq=1 kicks=" HOST_BIT,
				 id, getpid()));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_role_end",
				 "knot=%llu role=host doorbell=63 pid=%d why=close death_seq=2 kicks=0x3",
				 id, getpid()));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_knot_destroy", "knot=%llu",
				 id));
	trace_dump_if_failed(_metadata, &self->t);
}

/*
 * The idle filter's verdicts, one knitk_notify per doorbell asked and one
 * knitk_ring per call, in the counters' numbers.
 */
TEST_F(tr, notify_verdicts_match_counters)
{
	struct knitk_doorbell *db0;
	unsigned long long id;
	unsigned int d;
	__u64 woken;

	tr_open(_metadata, self, 3);
	id = self->id;
	db0 = knot_doorbell(&self->k, 0);

	/* Nothing pending: idle. */
	ASSERT_EQ(0, knitk_notify(self->k.fd, 1ULL << 0, &woken));
	EXPECT_EQ(0, woken);
	/* Pending, owner awake: awake. */
	knot_lane_publish(knot_mailbox(&self->k, 0), 0);
	ASSERT_EQ(0, knitk_notify(self->k.fd, 1ULL << 0, &woken));
	EXPECT_EQ(0, woken);
	/* Pending, owner flagged asleep: woken, the flag cleared. */
	flag_asleep(db0);
	ASSERT_EQ(0, knitk_notify(self->k.fd, 1ULL << 0, &woken));
	EXPECT_EQ(1, woken);
	/* Both: worker 0 awake again, worker 1 idle. */
	ASSERT_EQ(0, knitk_notify(self->k.fd, 3, &woken));
	EXPECT_EQ(0, woken);
	/* Past the filter. */
	ASSERT_EQ(0, knitk_kick(self->k.fd, 1ULL << 1, &woken));
	EXPECT_EQ(2, woken);
	drain(knot_mailbox(&self->k, 0));

	trace_collect(_metadata, self->inst, &self->t);
	EXPECT_EQ(1, trace_count(&self->t, "knitk_notify",
				 "knot=%llu doorbell=0 result=woken sleeping=0x1", id));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_notify",
				 "knot=%llu doorbell=1 result=idle", id));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_kick",
				 "knot=%llu doorbell=1 seq=1", id));
	EXPECT_EQ(4, trace_count(&self->t, "knitk_ring",
				 "knot=%llu kick=0 sync=0", id));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_ring",
				 "knot=%llu asked=0x1 woken=0x1", id));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_ring",
				 "knot=%llu asked=0x3 woken=0x0", id));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_ring",
				 "knot=%llu asked=0x2 woken=0x2 kick=1", id));

	/* Every notify and kick counted is one event, per doorbell. */
	for (d = 0; d < 2; d++) {
		EXPECT_EQ(STAT(self->k.fd, d, wakes),
			  trace_count(&self->t, "knitk_notify",
				      "knot=%llu doorbell=%u result=woken", id, d));
		EXPECT_EQ(STAT(self->k.fd, d, suppressed_idle),
			  trace_count(&self->t, "knitk_notify",
				      "knot=%llu doorbell=%u result=idle", id, d));
		EXPECT_EQ(STAT(self->k.fd, d, suppressed_awake),
			  trace_count(&self->t, "knitk_notify",
				      "knot=%llu doorbell=%u result=awake", id, d) +
			  trace_count(&self->t, "knitk_notify",
				      "knot=%llu doorbell=%u result=raced", id, d));
		EXPECT_EQ(STAT(self->k.fd, d, kicks),
			  trace_count(&self->t, "knitk_kick",
				      "knot=%llu doorbell=%u", id, d));
	}
	EXPECT_EQ(2, STAT(self->k.fd, 0, suppressed_awake));
	EXPECT_EQ(1, STAT(self->k.fd, 1, suppressed_idle));
	trace_dump_if_failed(_metadata, &self->t);
}

/*
 * Every way a wait ends, each a knitk_wait_begin and a knitk_wait_end
 * with its outcome, in the counters' numbers.
 */
TEST_F(tr, wait_outcomes_match_counters)
{
	struct knitk_doorbell *db0;
	struct sleeper s;
	unsigned long long id;
	const struct tev *e;
	__u32 seq;

	tr_open(_metadata, self, 1);
	id = self->id;
	db0 = knot_doorbell(&self->k, 0);
	catch_signal(0);

	/* Mismatch. */
	seq = knitk_doorbell_seq(db0);
	EXPECT_EQ(-EAGAIN, knitk_wait(self->w[0], seq + 1, KNITK_WAIT_FOREVER));
	/* Timeout. */
	seq = flag_asleep(db0);
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(self->w[0], seq,
					 knitk_now_ns() + 20 * KNITK_MS));
	knitk_doorbell_sleeping(db0, 0);
	/* Woken with work. */
	sleeper_start(_metadata, self, &s, self->w[0], 0, 2);
	knot_lane_publish(knot_mailbox(&self->k, 0), 0);
	ASSERT_EQ(0, knitk_notify(self->k.fd, 1ULL << 0, NULL));
	EXPECT_EQ(0, sleeper_join(self, &s, 0));
	drain(knot_mailbox(&self->k, 0));
	/* Woken by a kick. */
	sleeper_start(_metadata, self, &s, self->w[0], 0, 3);
	ASSERT_EQ(0, knitk_kick(self->k.fd, 1ULL << 0, NULL));
	EXPECT_EQ(0, sleeper_join(self, &s, 0));
	/* Interrupted. */
	sleeper_start(_metadata, self, &s, self->w[0], 0, 4);
	ASSERT_EQ(0, pthread_kill(s.thread, SIGUSR1));
	EXPECT_EQ(-EINTR, sleeper_join(self, &s, 0));
	/*
	 * Spurious: seq moved by a store no notify made, and found moved
	 * when a signal wakes the sleep, with nothing pending and no event.
	 */
	sleeper_start(_metadata, self, &s, self->w[0], 0, 5);
	__atomic_fetch_add(&db0->seq, 1, __ATOMIC_SEQ_CST);
	ASSERT_EQ(0, pthread_kill(s.thread, SIGUSR1));
	EXPECT_EQ(0, sleeper_join(self, &s, 0));

	trace_collect(_metadata, self->inst, &self->t);
	EXPECT_EQ(6, trace_count(&self->t, "knitk_wait_begin",
				 "knot=%llu doorbell=0 spin=0 uring=0", id));
	EXPECT_EQ(6, trace_count(&self->t, "knitk_wait_end",
				 "knot=%llu doorbell=0", id));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_wait_begin",
				 "knot=%llu doorbell=0 expected=%u seq=%u deadline_ns=%llu",
				 id, 1U, 0U, (unsigned long long)KNITK_WAIT_FOREVER));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_wait_end",
				 "knot=%llu outcome=mismatch ret=%d", id, -EAGAIN));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_wait_end",
				 "knot=%llu outcome=timeout ret=%d", id, -ETIMEDOUT));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_wait_end",
				 "knot=%llu outcome=kick ret=0", id));
	/* -ERESTARTSYS inside the kernel, -EINTR for the caller. */
	EXPECT_EQ(1, trace_count(&self->t, "knitk_wait_end",
				 "knot=%llu outcome=signal ret=-512", id));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_wait_end",
				 "knot=%llu outcome=spurious ret=0", id));
	e = trace_find(&self->t, "knitk_wait_end",
		       "knot=%llu outcome=work ret=0 seq=1", id);
	ASSERT_NE(NULL, e);
	/* The events were on when it began, so it has a length. */
	EXPECT_LT(0, tev_num(e, "ns", 0));

	EXPECT_EQ(STAT(self->k.fd, 0, mismatches),
		  trace_count(&self->t, "knitk_wait_end",
			      "knot=%llu outcome=mismatch", id));
	EXPECT_EQ(STAT(self->k.fd, 0, timeouts),
		  trace_count(&self->t, "knitk_wait_end",
			      "knot=%llu outcome=timeout", id));
	EXPECT_EQ(STAT(self->k.fd, 0, interrupts),
		  trace_count(&self->t, "knitk_wait_end",
			      "knot=%llu outcome=signal", id));
	EXPECT_EQ(STAT(self->k.fd, 0, spurious),
		  trace_count(&self->t, "knitk_wait_end",
			      "knot=%llu outcome=spurious", id));
	/* Every wait but the mismatch went to sleep. */
	EXPECT_EQ(STAT(self->k.fd, 0, waits),
		  trace_count(&self->t, "knitk_wait_begin", "knot=%llu", id) -
		  trace_count(&self->t, "knitk_wait_end",
			      "knot=%llu outcome=mismatch", id));
	trace_dump_if_failed(_metadata, &self->t);
}

/* A worker process SIGKILLed: its role's end, and the host's wake by it. */
TEST_F(tr, worker_death_seen_by_host)
{
	struct trigger kl = { .doorbell = HOST, .close_fd = -1 };
	int ready[2], status;
	unsigned long long id;
	pid_t child;
	char b = 0;

	tr_open(_metadata, self, 0);
	id = self->id;
	ASSERT_EQ(0, pipe(ready));
	child = fork();
	ASSERT_LE(0, child);
	if (child == 0) {
		/* Its own endpoint; the inherited host fd is not its role. */
		int fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);

		if (fd < 0 || write(ready[1], &b, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(ready[1]);
	ASSERT_EQ(1, read(ready[0], &b, 1));
	close(ready[0]);

	kl.fd = self->k.fd;
	kl.kill_pid = child;
	EXPECT_EQ(0, trigger_sleep(_metadata, &kl, knot_doorbell(&self->k, HOST),
				   self->k.fd));
	EXPECT_EQ(0, kl.ret);
	ASSERT_EQ(child, waitpid(child, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	trace_collect(_metadata, self->inst, &self->t);
	EXPECT_EQ(1, trace_count(&self->t, "knitk_role_join",
				 "knot=%llu role=worker doorbell=0 pid=%d", id,
				 child));
	/*
	 * Ended as its exit tore down its address space, before its files
	 * closed; the signal in the exit code.
	 */
	EXPECT_EQ(1, trace_count(&self->t, "knitk_role_end",
				 "knot=%llu role=worker doorbell=0 generation=1 pid=%d why=mm exit_code=0x9 death_seq=1 kicks=" HOST_BIT,
				 id, child));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_wait_end",
				 "knot=%llu doorbell=63 outcome=death ret=0", id));
	trace_dump_if_failed(_metadata, &self->t);
}

/* The host closes its endpoint: a sleeping worker's wait ends host_dead. */
TEST_F(tr, host_close_seen_by_worker)
{
	struct trigger cl = { .doorbell = 0, .kill_pid = -1 };
	unsigned long long id;

	tr_open(_metadata, self, 1);
	id = self->id;
	cl.fd = self->w[0];
	cl.close_fd = self->k.fd;
	EXPECT_EQ(-EPIPE, trigger_sleep(_metadata, &cl,
					knot_doorbell(&self->k, 0), self->w[0]));
	EXPECT_EQ(0, cl.ret);
	self->k.fd = -1;

	trace_collect(_metadata, self->inst, &self->t);
	EXPECT_EQ(1, trace_count(&self->t, "knitk_role_end",
				 "knot=%llu role=host doorbell=63 pid=%d why=close kicks=0x3",
				 id, getpid()));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_wait_end",
				 "knot=%llu doorbell=0 outcome=host_dead ret=%d",
				 id, -EPIPE));
	trace_dump_if_failed(_metadata, &self->t);
}

/* A KNITK_WAIT_SPIN wait on a doorbell nobody rang: no spin, then sleep. */
TEST_F(tr, spin_without_ringer)
{
	struct knitk_doorbell *db0;
	unsigned long long id;
	__u32 seq;

	tr_open(_metadata, self, 1);
	id = self->id;
	db0 = knot_doorbell(&self->k, 0);
	seq = flag_asleep(db0);
	EXPECT_EQ(-ETIMEDOUT, knitk_wait_flags(self->w[0], seq, KNITK_WAIT_SPIN,
					       knitk_now_ns() + 20 * KNITK_MS));
	knitk_doorbell_sleeping(db0, 0);

	trace_collect(_metadata, self->inst, &self->t);
	EXPECT_EQ(1, trace_count(&self->t, "knitk_wait_begin",
				 "knot=%llu doorbell=0 spin=1", id));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_spin",
				 "knot=%llu doorbell=0 end=no_ringer", id));
	EXPECT_EQ(1, trace_count(&self->t, "knitk_wait_end",
				 "knot=%llu doorbell=0 outcome=timeout", id));
	EXPECT_EQ(STAT(self->k.fd, 0, spin_sleeps),
		  trace_count(&self->t, "knitk_spin", "knot=%llu doorbell=0",
			      id) -
		  trace_count(&self->t, "knitk_spin",
			      "knot=%llu doorbell=0 end=woken", id));
	trace_dump_if_failed(_metadata, &self->t);
}

TEST_HARNESS_MAIN
