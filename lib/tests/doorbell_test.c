// SPDX-License-Identifier: GPL-2.0
/*
 * Doorbells (futex backend): park re-checks, suppressed rings (owner awake,
 * nothing pending), wakes of a parked thread with no timeout, the host's
 * wait over all of its return mailboxes, deadlines, peer death, the
 * kick of one's own doorbell, and the waits of a role that has ended.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <knitk.h>

#include "tap.h"
#include "futex_asleep.h"

struct fx {
	struct knitk_endpoint *host, *worker[3];
	unsigned int nr;
};

static int fx_init(struct fx *f, unsigned int workers)
{
	struct knitk_geometry g = {
		.nr_workers = workers, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64,
	};
	unsigned int i;

	memset(f, 0, sizeof(*f));
	f->nr = workers;
	if (knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &f->host) ||
	    knitk_endpoint_join(f->host, KNITK_ROLE_HOST, 0) < 1)
		return -1;
	for (i = 0; i < workers; i++)
		if (knitk_endpoint_attach(knitk_endpoint_fd(f->host), 0, &f->worker[i]) ||
		    knitk_endpoint_join(f->worker[i], KNITK_ROLE_WORKER, i) < 1)
			return -1;
	return 0;
}

static void fx_fini(struct fx *f)
{
	unsigned int i;

	for (i = 0; i < f->nr; i++)
		knitk_endpoint_destroy(f->worker[i]);
	knitk_endpoint_destroy(f->host);
}

static const struct knitk_doorbell *doorbell_of(struct knitk_endpoint *k,
						unsigned int d)
{
	struct knitk_layout l;
	void *base;

	knitk_endpoint_layout(k, &l, NULL);
	knitk_endpoint_base(k, &base);
	return (const struct knitk_doorbell *)((char *)base + l.doorbell_off +
					       d * l.doorbell_stride);
}

static void wait_until_sleeping(struct knitk_endpoint *k, unsigned int d)
{
	const struct knitk_doorbell *db = doorbell_of(k, d);

	while (!atomic_load((_Atomic uint32_t *)&db->sleeping))
		sched_yield();
}

/* Publish @v into @mailbox; ring its consumer too when @ring. */
static int publish_value(struct knitk_endpoint *k, unsigned int mailbox,
			 uint64_t v, int ring)
{
	struct knitk_lane_header h = { .value = v };
	struct knitk_producer *p;
	int ret;

	ret = knitk_producer_create(k, mailbox, &p);
	if (ret)
		return ret;
	ret = knitk_producer_send(p, &h, NULL, 0);
	if (ret >= 0 && ring)
		ret = knitk_producer_notify(p);
	knitk_producer_destroy(p);
	return ret;
}

static int send_value(struct knitk_endpoint *k, unsigned int mailbox, uint64_t v)
{
	return publish_value(k, mailbox, v, 1);
}

static void park_returns_when_pending(void)
{
	struct knitk_wake_stats st = { .size = sizeof(st) };
	struct fx f;

	REQUIRE(fx_init(&f, 1) == 0);
	CHECK_EQ(send_value(f.host, 0, 1), 0);		/* worker awake */
	CHECK_EQ(knitk_doorbell_park(f.worker[0], KNITK_WAIT_FOREVER), 0);
	knitk_endpoint_wake_stats(f.worker[0], &st);
	CHECK_EQ(st.waits, 0);
	knitk_endpoint_wake_stats(f.host, &st);
	CHECK_EQ(st.suppressed_awake, 1);
	CHECK_EQ(st.sent, 0);
	CHECK_EQ(doorbell_of(f.host, 0)->sleeping, 0);
	fx_fini(&f);
}

static void ring_suppressed_when_idle(void)
{
	struct knitk_wake_stats st = { .size = sizeof(st) };
	uint32_t seq;
	struct fx f;

	REQUIRE(fx_init(&f, 1) == 0);
	REQUIRE(knitk_doorbell_prepare(f.worker[0], &seq) == 0);
	CHECK(doorbell_of(f.host, 0)->sleeping != 0);
	CHECK_EQ(knitk_doorbell_ring(f.host, 1), 0);	/* nothing pending */
	knitk_endpoint_wake_stats(f.host, &st);
	CHECK_EQ(st.suppressed_idle, 1);
	CHECK_EQ(doorbell_of(f.host, 0)->seq, seq);
	CHECK_EQ(knitk_doorbell_cancel(f.worker[0]), 0);
	CHECK_EQ(doorbell_of(f.host, 0)->sleeping, 0);
	fx_fini(&f);
}

static void *park_forever(void *arg)
{
	return (void *)(intptr_t)knitk_doorbell_park(arg, KNITK_WAIT_FOREVER);
}

static void ring_wakes_parked_worker(void)
{
	struct knitk_wake_stats st = { .size = sizeof(st) };
	pthread_t th;
	void *ret;
	struct fx f;
	int i;

	struct knitk_consumer *c;

	REQUIRE(fx_init(&f, 1) == 0);
	REQUIRE(knitk_consumer_create(f.worker[0], 0, &c) == 0);
	for (i = 0; i < 50; i++) {
		uint64_t pend;

		REQUIRE(pthread_create(&th, NULL, park_forever, f.worker[0]) == 0);
		wait_until_sleeping(f.host, 0);
		/* the flag is set, but the thread may still be re-checking */
		CHECK(send_value(f.host, 0, (uint64_t)i) >= 0);
		pthread_join(th, &ret);
		CHECK_EQ((intptr_t)ret, 0);
		CHECK_EQ(knitk_lane_scan(c, &pend), 1);
		CHECK_EQ(knitk_lane_ack(c, pend), 0);
	}
	knitk_consumer_destroy(c);
	knitk_endpoint_wake_stats(f.worker[0], &st);
	printf("# worker: waits %llu wakes %llu spurious %llu\n",
	       (unsigned long long)st.waits, (unsigned long long)st.wakes,
	       (unsigned long long)st.spurious);
	CHECK_EQ(st.spurious, 0);
	CHECK_EQ(st.waits, st.wakes);
	knitk_endpoint_wake_stats(f.host, &st);
	CHECK_EQ(st.sent + st.suppressed_awake + st.suppressed_idle, 50);
	CHECK_EQ(st.suppressed_idle, 0);
	fx_fini(&f);
}

/* docs/protocol.md H1: one host wait covers every return mailbox. */
static void host_waits_on_all_return_mailboxes(void)
{
	struct knitk_wake_stats st = { .size = sizeof(st) };
	pthread_t th;
	void *ret;
	struct fx f;
	unsigned int w;

	REQUIRE(fx_init(&f, 3) == 0);
	for (w = 0; w < 3; w++) {
		struct knitk_consumer *c;
		uint64_t pend;
		int m = knitk_endpoint_return_mailbox(f.worker[w], w);

		REQUIRE(m >= 0);
		REQUIRE(pthread_create(&th, NULL, park_forever, f.host) == 0);
		wait_until_sleeping(f.worker[w], KNITK_DOORBELL_HOST);
		CHECK(send_value(f.worker[w], (unsigned int)m, w) >= 0);
		pthread_join(th, &ret);
		CHECK_EQ((intptr_t)ret, 0);
		CHECK_EQ(knitk_mailbox_pending(f.host, (unsigned int)m, &pend), 1);
		/* the others stay empty */
		REQUIRE(knitk_consumer_create(f.host, (unsigned int)m, &c) == 0);
		CHECK_EQ(knitk_lane_scan(c, &pend), 1);
		CHECK_EQ(knitk_lane_ack(c, pend), 0);
		knitk_consumer_destroy(c);
	}
	knitk_endpoint_wake_stats(f.host, &st);
	CHECK_EQ(st.spurious, 0);
	fx_fini(&f);
}

static void deadline_times_out(void)
{
	struct knitk_wake_stats st = { .size = sizeof(st) };
	uint64_t t0 = tap_now_ns();
	struct fx f;

	REQUIRE(fx_init(&f, 1) == 0);
	CHECK_EQ(knitk_doorbell_park(f.worker[0], t0 + 20000000), -ETIMEDOUT);
	CHECK(tap_now_ns() >= t0 + 20000000);
	knitk_endpoint_wake_stats(f.worker[0], &st);
	CHECK_EQ(st.timeouts, 1);
	CHECK_EQ(knitk_doorbell_park(f.worker[0], 1), -ETIMEDOUT);	/* past */
	fx_fini(&f);
}

/* A worker that parks before the host joined waits for it. */
static void no_epipe_before_host_joins(void)
{
	struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
	};
	struct knitk_endpoint *k;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k) == 0);
	REQUIRE(knitk_endpoint_join(k, KNITK_ROLE_WORKER, 0) == 1);
	CHECK_EQ(knitk_doorbell_park(k, tap_now_ns() + 5000000), -ETIMEDOUT);
	knitk_endpoint_destroy(k);
}

static void host_death_gives_epipe(void)
{
	struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
	};
	struct knitk_endpoint *host, *worker;
	pthread_t th;
	void *ret;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) == 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &worker) == 0);
	REQUIRE(knitk_endpoint_join(worker, KNITK_ROLE_WORKER, 0) == 1);
	REQUIRE(pthread_create(&th, NULL, park_forever, worker) == 0);
	wait_until_sleeping(worker, 0);
	knitk_endpoint_destroy(host);		/* leaving marks the host dead */
	pthread_join(th, &ret);
	CHECK_EQ((intptr_t)ret, -EPIPE);
	CHECK_EQ(knitk_doorbell_park(worker, KNITK_WAIT_FOREVER), -EPIPE);
	knitk_endpoint_destroy(worker);
}

static void worker_death_wakes_host(void)
{
	const struct knitk_control *ctl;
	struct knitk_wake_stats st = { .size = sizeof(st) };
	pthread_t th;
	void *ret;
	struct fx f;

	REQUIRE(fx_init(&f, 2) == 0);
	knitk_endpoint_control(f.host, &ctl);
	REQUIRE(pthread_create(&th, NULL, park_forever, f.host) == 0);
	wait_until_sleeping(f.host, KNITK_DOORBELL_HOST);
	CHECK_EQ(knitk_endpoint_mark_dead(f.host, 1), 0);	/* the pool's hook */
	pthread_join(th, &ret);
	CHECK_EQ((intptr_t)ret, 0);
	CHECK_EQ(ctl->dead, 2);
	CHECK_EQ(ctl->live, 1ULL << 63 | 1);
	CHECK_EQ(ctl->death_seq, 1);
	CHECK_EQ(knitk_endpoint_mark_dead(f.host, 1), -ENOENT);
	knitk_endpoint_wake_stats(f.host, &st);
	CHECK_EQ(st.spurious, 0);
	/* it slept and was woken, or its re-check saw the death first */
	CHECK_EQ(st.waits, st.wakes);
	fx_fini(&f);
}

/*
 * knitk_doorbell_kick_self ends a wait prepared before it, with nothing
 * pending; a wait prepared after it sleeps on (it is not remembered).
 */
static void kick_self_ends_prepared_wait(void)
{
	struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
	};
	struct knitk_wake_stats st = { .size = sizeof(st) };
	struct knitk_endpoint *k;
	pthread_t th;
	uint32_t seq;
	void *ret;
	struct fx f;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k) == 0);
	CHECK_EQ(knitk_doorbell_can_kick(k), 1);	/* futex: always */
	CHECK_EQ(knitk_doorbell_kick_self(k), -ENOTCONN);
	CHECK_EQ(knitk_doorbell_kick_self(NULL), -EINVAL);
	CHECK_EQ(knitk_doorbell_can_kick(NULL), -EINVAL);
	knitk_endpoint_destroy(k);

	REQUIRE(fx_init(&f, 1) == 0);
	/* Prepared, then kicked before the wait: seq moved, no sleep. */
	REQUIRE(knitk_doorbell_prepare(f.host, &seq) == 0);
	CHECK_EQ(knitk_doorbell_kick_self(f.host), 0);
	CHECK_EQ(knitk_doorbell_wait(f.host, seq, KNITK_WAIT_FOREVER), 0);
	knitk_endpoint_wake_stats(f.host, &st);
	CHECK_EQ(st.mismatches, 1);
	/* Kicked while asleep: woken, counted a kick (or a mismatch). */
	REQUIRE(pthread_create(&th, NULL, park_forever, f.host) == 0);
	wait_until_sleeping(f.host, KNITK_DOORBELL_HOST);
	CHECK_EQ(knitk_doorbell_kick_self(f.host), 0);
	pthread_join(th, &ret);
	CHECK_EQ((intptr_t)ret, 0);
	knitk_endpoint_wake_stats(f.host, &st);
	CHECK_EQ(st.kicks + st.mismatches, 2);
	CHECK_EQ(st.spurious, 0);
	CHECK_EQ(st.wakes, 0);
	/* A kick before the prepare does not end the wait. */
	CHECK_EQ(knitk_doorbell_kick_self(f.host), 0);
	CHECK_EQ(knitk_doorbell_park(f.host, tap_now_ns() + 5000000), -ETIMEDOUT);
	fx_fini(&f);
}

/* A thread that parks (ringing @ring first, if any) and says it runs. */
struct parker {
	struct knitk_endpoint *ep;
	uint64_t ring;
	_Atomic pid_t tid;
	int ret;
};

static void *park_told(void *arg)
{
	struct parker *p = arg;

	atomic_store(&p->tid, futex_asleep_tid());
	p->ret = knitk_doorbell_ring_park(p->ep, p->ring, KNITK_WAIT_FOREVER);
	return NULL;
}

/*
 * @ep's role (doorbell @d) ends by a mark of @marker while a thread of it
 * sleeps on its doorbell: the end wakes it and its wait returns
 * -ENOTCONN.  A sleeper the end left asleep is kicked free after the
 * failed check (a failure, not a hang).
 */
static void end_under_parker(struct knitk_endpoint *ep, unsigned int d,
			     struct knitk_endpoint *marker)
{
	const _Atomic uint32_t *seq =
		(const _Atomic uint32_t *)&doorbell_of(ep, d)->seq;
	struct parker p = { .ep = ep };
	pthread_t th;

	REQUIRE(pthread_create(&th, NULL, park_told, &p) == 0);
	end_role_wakes_sleeper(ep, d, marker, th, &p.tid, seq);
	CHECK_EQ(p.ret, -ENOTCONN);
}

/*
 * P4 on the futex backend as on the module: a wait of a role that has
 * ended returns -ENOTCONN, whether the end came while it slept (the end
 * wakes it) or before it (at once, and a ring-then-wait rings nothing, as
 * the module refuses it).
 */
static void ended_role_waits_refused(void)
{
	struct knitk_wake_stats st = { .size = sizeof(st) };
	struct knitk_lane_header h = { .value = 7 };
	struct knitk_producer *p;
	uint32_t seq, hseq;
	struct fx f;

	REQUIRE(fx_init(&f, 1) == 0);
	/* A lane for the host, unrung: a ring of it would get through. */
	REQUIRE(knitk_producer_create(f.worker[0],
				      (unsigned int)knitk_endpoint_return_mailbox(f.worker[0], 0),
				      &p) == 0);
	REQUIRE(knitk_producer_send(p, &h, NULL, 0) >= 0);
	end_under_parker(f.worker[0], 0, f.host);
	/*
	 * Ended before the wait: refused at once, before its deadline (long
	 * past here, so that a wait that is not refused ends too).
	 */
	CHECK_EQ(knitk_doorbell_park(f.worker[0], 0), -ENOTCONN);
	REQUIRE(knitk_doorbell_prepare(f.worker[0], &seq) == 0);
	CHECK_EQ(knitk_doorbell_wait(f.worker[0], seq, 0), -ENOTCONN);
	/* The host flagged asleep with the lane pending: nothing rings it. */
	REQUIRE(knitk_doorbell_prepare(f.host, &hseq) == 0);
	CHECK_EQ(knitk_doorbell_ring_park(f.worker[0], 1ULL << KNITK_DOORBELL_HOST, 0),
		 -ENOTCONN);
	CHECK_EQ(doorbell_of(f.host, KNITK_DOORBELL_HOST)->seq, hseq);
	CHECK_EQ(knitk_endpoint_wake_stats(f.worker[0], &st), 0);
	CHECK_EQ(st.sent, 0);
	CHECK_EQ(knitk_doorbell_cancel(f.host), 0);
	knitk_producer_destroy(p);
	fx_fini(&f);

	/* The host's role, ended by a worker's watch while the host sleeps. */
	REQUIRE(fx_init(&f, 1) == 0);
	end_under_parker(f.host, KNITK_DOORBELL_HOST, f.worker[0]);
	CHECK_EQ(knitk_doorbell_park(f.host, 0), -ENOTCONN);
	fx_fini(&f);
}

/* A thread that parks on the own doorbell and a word of the test's. */
struct words_wait {
	struct knitk_endpoint *ep;
	struct knitk_wait_word w;
	int ret;
};

static void *park_words(void *arg)
{
	struct words_wait *ww = arg;
	uint32_t seq;

	ww->ret = knitk_doorbell_prepare(ww->ep, &seq);
	if (!ww->ret)
		ww->ret = knitk_doorbell_ring_wait_words(ww->ep, 0, seq,
							 KNITK_WAIT_FOREVER, &ww->w, 1);
	return NULL;
}

/*
 * knitk_doorbell_ring_wait_words: a word that changed ends the wait at
 * once; a futex wake of the word ends a sleep (a wake, not spurious);
 * the doorbell still works; the deadline holds; bad arguments first.
 */
static void ring_wait_words_ends_on_word(void)
{
	struct knitk_wake_stats st = { .size = sizeof(st) };
	static _Atomic uint32_t word;
	struct knitk_wait_word bad[KNITK_WAIT_WORDS_MAX + 1];
	struct words_wait ww;
	pthread_t th;
	uint32_t seq;
	struct fx f;

	REQUIRE(fx_init(&f, 1) == 0);
	ww = (struct words_wait){ .ep = f.host, .w = { (const uint32_t *)&word, 7 } };
	for (seq = 0; seq <= KNITK_WAIT_WORDS_MAX; seq++)
		bad[seq] = ww.w;
	CHECK_EQ(knitk_doorbell_ring_wait_words(NULL, 0, 0, 1, &ww.w, 1), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring_wait_words(f.host, 0, 0, 1, NULL, 1), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring_wait_words(f.host, 0, 0, 1, &ww.w, 0), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring_wait_words(f.host, 0, 0, 1, bad,
						KNITK_WAIT_WORDS_MAX + 1), -EINVAL);
	bad[3].word = NULL;
	CHECK_EQ(knitk_doorbell_ring_wait_words(f.host, 0, 0, 1, bad, 4), -EINVAL);
	bad[3].word = (const uint32_t *)((const char *)&word + 1);
	CHECK_EQ(knitk_doorbell_ring_wait_words(f.host, 0, 0, 1, bad, 4), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring_wait_words(f.host, 1ULL << 9, 0, 1, &ww.w, 1),
		 -EINVAL);

	/* The word no longer holds the value: no sleep, a mismatch. */
	atomic_store(&word, 8);
	knitk_endpoint_wake_stats(f.host, &st);
	REQUIRE(knitk_doorbell_prepare(f.host, &seq) == 0);
	CHECK_EQ(knitk_doorbell_ring_wait_words(f.host, 0, seq, KNITK_WAIT_FOREVER,
						&ww.w, 1), 0);
	seq = (uint32_t)st.mismatches;
	knitk_endpoint_wake_stats(f.host, &st);
	CHECK_EQ(st.mismatches, (uint64_t)seq + 1);
	CHECK_EQ(st.wakes, 0);
	/* The deadline. */
	ww.w.value = 8;
	REQUIRE(knitk_doorbell_prepare(f.host, &seq) == 0);
	CHECK_EQ(knitk_doorbell_ring_wait_words(f.host, 0, seq, tap_now_ns() + 5000000,
						&ww.w, 1), -ETIMEDOUT);

	/*
	 * Asleep, the word changed and woken (shared, as the kernel's is): a
	 * wake, or a mismatch if it changed before the sleep.
	 */
	knitk_endpoint_wake_stats(f.host, &st);
	seq = (uint32_t)(st.wakes + st.mismatches);
	REQUIRE(pthread_create(&th, NULL, park_words, &ww) == 0);
	wait_until_sleeping(f.host, KNITK_DOORBELL_HOST);
	atomic_store(&word, 9);
	syscall(SYS_futex, &word, FUTEX_WAKE, 1, NULL, NULL, 0);
	pthread_join(th, NULL);
	CHECK_EQ(ww.ret, 0);
	knitk_endpoint_wake_stats(f.host, &st);
	CHECK_EQ(st.wakes + st.mismatches, (uint64_t)seq + 1);
	CHECK_EQ(st.spurious, 0);

	/* Asleep, a result from the worker: the doorbell's own wake. */
	ww.w.value = 9;
	REQUIRE(pthread_create(&th, NULL, park_words, &ww) == 0);
	wait_until_sleeping(f.host, KNITK_DOORBELL_HOST);
	REQUIRE(send_value(f.worker[0],
			   (unsigned int)knitk_endpoint_return_mailbox(f.worker[0], 0),
			   42) >= 0);
	pthread_join(th, NULL);
	CHECK_EQ(ww.ret, 0);
	CHECK_EQ(atomic_load(&word), 9);
	fx_fini(&f);
}

static void bad_arguments(void)
{
	struct knitk_geometry g = {
		.nr_workers = 2, .nr_submitters = 1, .lanes = KNITK_LANES,
	};
	struct knitk_doorbell_stats ds;
	struct knitk_endpoint *k;
	uint32_t seq;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k) == 0);
	CHECK_EQ(knitk_doorbell_park(k, KNITK_WAIT_FOREVER), -ENOTCONN);
	CHECK_EQ(knitk_doorbell_prepare(k, &seq), -ENOTCONN);
	CHECK_EQ(knitk_doorbell_ring(k, 1ULL << 2), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring(k, 1ULL << 62), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring(k, 3ULL | 1ULL << 63), 0);
	CHECK_EQ(knitk_endpoint_doorbell_stats(k, 0, &ds, sizeof(ds)), -EOPNOTSUPP);
	/* Smaller than the first version of the counters: refused. */
	CHECK_EQ(knitk_endpoint_doorbell_stats(k, 0, &ds, 8), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring(NULL, 1), -EINVAL);
	knitk_endpoint_destroy(k);
}

/*
 * docs/protocol.md S9 on the futex backend: ring-then-wait rings the peer,
 * then waits (here to its deadline); when the re-check finds work it
 * returns at once and still rings; a bad mask rings nothing.
 */
static void ring_park_rings_then_waits(void)
{
	struct knitk_wake_stats st = { .size = sizeof(st) };
	struct parker p;
	pthread_t th;
	uint32_t seq;
	struct fx f;

	REQUIRE(fx_init(&f, 1) == 0);
	CHECK_EQ(knitk_doorbell_can_ring_wait(f.host), 0);
	CHECK_EQ(knitk_doorbell_can_ring_wait(NULL), -EINVAL);

	/*
	 * The worker asleep on its futex, past its re-check: flagged only, it
	 * could still find the request in its re-check and clear its flag
	 * before the ring, which would then be suppressed.
	 */
	p = (struct parker){ .ep = f.worker[0] };
	REQUIRE(pthread_create(&th, NULL, park_told, &p) == 0);
	wait_asleep_on_futex(&p.tid, &doorbell_of(f.worker[0], 0)->seq);
	CHECK(publish_value(f.host, 0, 1, 0) >= 0);
	CHECK_EQ(knitk_doorbell_ring_park(f.host, 1, 0), -ETIMEDOUT);
	pthread_join(th, NULL);
	CHECK_EQ(p.ret, 0);
	knitk_endpoint_wake_stats(f.host, &st);
	CHECK_EQ(st.sent, 1);
	CHECK_EQ(st.timeouts, 1);
	CHECK_EQ(doorbell_of(f.host, KNITK_DOORBELL_HOST)->sleeping, 0);

	/*
	 * A result is there already: no sleep, and the worker, flagged with
	 * the first request still pending, is still rung.
	 */
	REQUIRE(knitk_doorbell_prepare(f.worker[0], &seq) == 0);
	CHECK(publish_value(f.worker[0], 1, 2, 0) >= 0);
	CHECK_EQ(knitk_doorbell_ring_park(f.host, 1, KNITK_WAIT_FOREVER), 0);
	CHECK_EQ(doorbell_of(f.host, 0)->seq, seq + 1);
	CHECK_EQ(knitk_doorbell_cancel(f.worker[0]), 0);
	knitk_endpoint_wake_stats(f.host, &st);
	CHECK_EQ(st.sent, 2);
	CHECK_EQ(st.waits, 1);

	CHECK_EQ(knitk_doorbell_ring_park(f.host, 1ULL << 5, 0), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring_wait(NULL, 1, 0, 0), -EINVAL);
	knitk_endpoint_wake_stats(f.host, &st);
	CHECK_EQ(st.sent + st.suppressed_awake + st.suppressed_idle, 2);
	CHECK_EQ(st.mismatches + st.timeouts, 1);
	fx_fini(&f);
}

int main(void)
{
	TEST(park_returns_when_pending);
	TEST(ring_suppressed_when_idle);
	TEST(ring_wakes_parked_worker);
	TEST(host_waits_on_all_return_mailboxes);
	TEST(deadline_times_out);
	TEST(no_epipe_before_host_joins);
	TEST(host_death_gives_epipe);
	TEST(worker_death_wakes_host);
	TEST(kick_self_ends_prepared_wait);
	TEST(ended_role_waits_refused);
	TEST(bad_arguments);
	TEST(ring_park_rings_then_waits);
	TEST(ring_wait_words_ends_on_word);
	return tap_exit();
}
