// SPDX-License-Identifier: GPL-2.0
/*
 * A refused core call changes nothing: every argument boundary of the lane
 * functions leaves the knot able to run at full capacity, a failed
 * reservation keeps the lane, a staged lane published late comes last,
 * and a consumer killed between calls or inside its ack loses no lane.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "proc_count.h"
#include "tap.h"
#include "fixtures.h"

struct pair {
	struct knitk_endpoint *host, *w0;
	struct knitk_producer *p;	/* the host's, request mailbox (0, 0) */
	struct knitk_consumer *c;	/* worker 0's */
};

static int pair_init(struct pair *r)
{
	struct knitk_geometry g = small_geom(2);
	int mb;

	memset(r, 0, sizeof(*r));
	if (knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &r->host) ||
	    knitk_endpoint_join(r->host, KNITK_ROLE_HOST, 0) < 1 ||
	    knitk_endpoint_attach(knitk_endpoint_fd(r->host), 0, &r->w0) ||
	    knitk_endpoint_join(r->w0, KNITK_ROLE_WORKER, 0) < 1)
		return -1;
	mb = knitk_endpoint_request_mailbox(r->host, 0, 0);
	if (mb < 0 || knitk_producer_create(r->host, (unsigned int)mb, &r->p) ||
	    knitk_consumer_create(r->w0, (unsigned int)mb, &r->c))
		return -1;
	return 0;
}

/*
 * A pair whose worker 0 is to be a child's: this process's consumer and
 * worker endpoint leave, the host and its producer stay.
 */
static int pair_init_host_only(struct pair *r)
{
	if (pair_init(r))
		return -1;
	knitk_consumer_destroy(r->c);
	knitk_endpoint_destroy(r->w0);
	r->c = NULL;
	r->w0 = NULL;
	return 0;
}

/* Worker 0 in the calling process: a new endpoint in the role, a new consumer. */
static int pair_worker_back(struct pair *r)
{
	if (knitk_endpoint_attach(knitk_endpoint_fd(r->host), 0, &r->w0) ||
	    knitk_endpoint_join(r->w0, KNITK_ROLE_WORKER, 0) < 1 ||
	    knitk_consumer_create(r->w0, 0, &r->c))
		return -1;
	return 0;
}

static void pair_fini(struct pair *r)
{
	knitk_consumer_destroy(r->c);
	knitk_producer_destroy(r->p);
	knitk_endpoint_destroy(r->w0);
	knitk_endpoint_destroy(r->host);
}

/*
 * Every lane and every arena byte in use at once: 63 lanes of 64 arena
 * bytes each (inline is 64, so 65 bytes go to the arena and take two
 * granules) and one lane of the last 128 bytes, all published and consumed by content.  A lane or a slot a
 * refused call had leaked makes a claim or a reserve fail.
 */
static int full_capacity_run(struct pair *r, unsigned int round)
{
	struct knitk_msg m = { .size = sizeof(m) };
	unsigned char buf[128];
	uint64_t pending, all = 0;
	unsigned int i, lanes = 0;
	int lane, ret;

	for (i = 0; i < KNITK_LANES; i++) {
		struct knitk_lane_header h = { .function_id = i, .task_id = round };
		size_t len = i < KNITK_LANES - 1 ? 65 : (size_t)128;

		memset(buf, (int)(i + round), len);
		lane = knitk_producer_stage(r->p, &h, buf, len);
		if (lane < 0)
			return lane;
		all |= 1ULL << lane;
	}
	if (knitk_lane_claim(r->p) != -EAGAIN)
		return -EBUSY;
	ret = knitk_lane_publish_batch(r->p, all);
	if (ret)
		return ret;
	if (knitk_lane_scan(r->c, &pending) != KNITK_LANES || pending != all)
		return -EBADMSG;
	while ((lane = knitk_lane_next(r->c, &pending)) >= 0) {
		ret = knitk_lane_decode(r->c, (unsigned int)lane, &m);
		if (ret)
			return ret;
		i = m.header.function_id;
		if (m.header.task_id != round || m.header.kind != KNITK_PAYLOAD_ARENA ||
		    m.len != (i < KNITK_LANES - 1 ? 65 : (size_t)128) ||
		    ((const unsigned char *)m.data)[m.len - 1] != (unsigned char)(i + round))
			return -EBADMSG;
		lanes++;
	}
	if (lanes != KNITK_LANES)
		return -EBADMSG;
	return knitk_lane_ack(r->c, all);
}

/*
 * Every lane function at lane 64, UINT_MAX and an unclaimed or unpublished
 * lane; masks of 0 and with bits not claimed; NULL where a pointer is
 * needed.  Each is refused with a negative errno and changes nothing: two
 * full-capacity runs go through afterwards.
 */
static void lane_boundaries_change_nothing(void)
{
	static const unsigned int bad[] = { KNITK_LANES, KNITK_LANES + 1, UINT_MAX };
	struct knitk_msg m = { .size = sizeof(m) };
	struct knitk_lane_header *hp, h = { 0 };
	uint64_t pending = 0, x = 5;
	struct pair r;
	unsigned int i;
	void *buf;
	int lane;

	REQUIRE(pair_init(&r) == 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(knitk_lane_header(r.p, bad[i], &hp), -EINVAL);
		CHECK_EQ(knitk_lane_reserve(r.p, bad[i], 8, &buf), -EINVAL);
		CHECK_EQ(knitk_lane_set_value(r.p, bad[i], 1), -EINVAL);
		CHECK_EQ(knitk_lane_release(r.p, bad[i]), -EINVAL);
		CHECK_EQ(knitk_lane_publish(r.p, bad[i]), -EINVAL);
		CHECK_EQ(knitk_lane_decode(r.c, bad[i], &m), -EINVAL);
	}
	/* Lane 0 not claimed: refused, nothing published. */
	CHECK(knitk_lane_header(r.p, 0, &hp) < 0);
	CHECK(knitk_lane_reserve(r.p, 0, 8, &buf) < 0);
	CHECK(knitk_lane_set_value(r.p, 0, 1) < 0);
	CHECK(knitk_lane_release(r.p, 0) < 0);
	CHECK(knitk_lane_publish(r.p, 0) < 0);
	CHECK(knitk_lane_publish_batch(r.p, 0) < 0);
	CHECK(knitk_lane_publish_batch(r.p, ~0ULL) < 0);
	CHECK(knitk_lane_decode(r.c, 0, &m) < 0);
	CHECK(knitk_lane_ack(r.c, 0) < 0);
	CHECK(knitk_lane_ack(r.c, 1) < 0);
	CHECK(knitk_lane_ack(r.c, ~0ULL) < 0);
	CHECK_EQ(knitk_lane_next(r.c, &pending), -ENOENT);
	CHECK_EQ(knitk_lane_scan(r.c, &pending), 0);

	/* One claimed lane: a mask naming it and an unclaimed one is refused whole. */
	lane = knitk_lane_claim(r.p);
	REQUIRE(lane >= 0);
	CHECK(knitk_lane_publish_batch(r.p, (1ULL << lane) | (1ULL << ((lane + 1) % 64))) < 0);
	CHECK_EQ(knitk_lane_scan(r.c, &pending), 0);
	CHECK(knitk_lane_header(r.p, (unsigned int)lane, NULL) < 0);
	CHECK(knitk_lane_reserve(r.p, (unsigned int)lane, 8, NULL) < 0);
	CHECK_EQ(knitk_lane_release(r.p, (unsigned int)lane), 0);
	CHECK(knitk_lane_release(r.p, (unsigned int)lane) < 0);

	/* Sends the library refuses before claiming. */
	CHECK(knitk_producer_send(r.p, NULL, &x, 8) < 0);
	CHECK(knitk_producer_send(r.p, &h, NULL, 8) < 0);
	CHECK_EQ(knitk_producer_send(r.p, &h, &x, 8193), -EMSGSIZE);
	CHECK_EQ(knitk_producer_send(r.p, &h, &x, SIZE_MAX), -EMSGSIZE);
	CHECK_EQ(knitk_producer_stage(r.p, &h, &x, SIZE_MAX), -EMSGSIZE);
	CHECK_EQ(knitk_producer_send_to(r.p, 0, &h, &x, 8), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(r.p, 0, 16), -EINVAL);
	CHECK_EQ(knitk_producer_track_claims(r.p), -EOPNOTSUPP);
	CHECK_EQ(knitk_producer_claims(r.p, &x, 1), -EINVAL);
	CHECK_EQ(knitk_producer_reset_claimant(r.p, 0), -EINVAL);
	CHECK_EQ(knitk_steal_hand_off(r.c, 1), -EINVAL);
	CHECK_EQ(knitk_lane_scan(r.c, &pending), 0);

	/* A published lane: acked once, a second ack of it is refused. */
	lane = knitk_producer_send(r.p, &h, &x, 8);
	REQUIRE(lane >= 0);
	REQUIRE(knitk_lane_scan(r.c, &pending) == 1);
	CHECK(knitk_lane_ack(r.c, pending | (1ULL << ((lane + 1) % 64))) < 0);
	CHECK_EQ(knitk_lane_ack(r.c, pending), 0);
	CHECK(knitk_lane_ack(r.c, 1ULL << lane) < 0);
	CHECK(knitk_lane_decode(r.c, (unsigned int)lane, &m) < 0);
	CHECK_EQ(knitk_lane_scan(r.c, &pending), 0);

	CHECK_EQ(full_capacity_run(&r, 1), 0);
	CHECK_EQ(full_capacity_run(&r, 2), 0);
	pair_fini(&r);
}

/*
 * A reservation that fails (-EMSGSIZE: it can never fit; -ENOSPC: not
 * now) writes nothing (knitk.h): the lane keeps the payload it had, an
 * arena reservation (and its bytes), an inline payload or a value, and is
 * published with it.
 */
static void failed_reserve_keeps_lane(void)
{
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pending, big = 0;
	struct pair r;
	unsigned int k;
	void *buf;
	int lane, lanes[3];

	REQUIRE(pair_init(&r) == 0);
	/* Lane 0: an arena payload; lane 1: a value; lane 2: inline bytes. */
	for (k = 0; k < 3; k++) {
		lanes[k] = knitk_lane_claim(r.p);
		REQUIRE(lanes[k] >= 0);
	}
	REQUIRE(knitk_lane_reserve(r.p, (unsigned int)lanes[0], 1000, &buf) == 0);
	memset(buf, 'a', 1000);
	REQUIRE(knitk_lane_set_value(r.p, (unsigned int)lanes[1], 42) == 0);
	REQUIRE(knitk_lane_reserve(r.p, (unsigned int)lanes[2], 10, &buf) == 0);
	memset(buf, 'i', 10);
	/* A third lane takes the rest of the arena: then nothing fits now. */
	lane = knitk_lane_claim(r.p);
	REQUIRE(lane >= 0);
	REQUIRE(knitk_lane_reserve(r.p, (unsigned int)lane, 8192 - 1024, &buf) == 0);

	for (k = 0; k < 3; k++) {
		CHECK_EQ(knitk_lane_reserve(r.p, (unsigned int)lanes[k], SIZE_MAX, &buf),
			 -EMSGSIZE);
		CHECK_EQ(knitk_lane_reserve(r.p, (unsigned int)lanes[k], 8193, &buf),
			 -EMSGSIZE);
	}
	/* Not now: lane 1 and 2 hold no arena bytes, lane 0 holds 1024. */
	CHECK_EQ(knitk_lane_reserve(r.p, (unsigned int)lanes[1], 100, &buf), -ENOSPC);
	CHECK_EQ(knitk_lane_reserve(r.p, (unsigned int)lanes[2], 100, &buf), -ENOSPC);
	CHECK_EQ(knitk_lane_reserve(r.p, (unsigned int)lanes[0], 2048, &buf), -ENOSPC);
	REQUIRE(knitk_lane_release(r.p, (unsigned int)lane) == 0);

	for (k = 0; k < 3; k++)
		REQUIRE(knitk_lane_publish(r.p, (unsigned int)lanes[k]) == 0);
	REQUIRE(knitk_lane_scan(r.c, &pending) == 3);
	while ((lane = knitk_lane_next(r.c, &pending)) >= 0) {
		REQUIRE(knitk_lane_decode(r.c, (unsigned int)lane, &m) == 0);
		if (lane == lanes[0]) {
			CHECK_EQ(m.header.kind, KNITK_PAYLOAD_ARENA);
			CHECK_EQ(m.len, 1000);
			CHECK(m.data && !memcmp(m.data, memset(&big, 'a', 8), 8) &&
			      ((const char *)m.data)[999] == 'a');
		} else if (lane == lanes[1]) {
			CHECK_EQ(m.header.kind, KNITK_PAYLOAD_VALUE);
			CHECK_EQ(m.header.value, 42);
		} else {
			CHECK_EQ(m.header.kind, KNITK_PAYLOAD_INLINE);
			CHECK_EQ(m.len, 10);
			CHECK(m.data && ((const char *)m.data)[9] == 'i');
		}
	}
	REQUIRE(knitk_lane_ack(r.c, (1ULL << lanes[0]) | (1ULL << lanes[1]) |
				    (1ULL << lanes[2])) == 0);
	CHECK_EQ(full_capacity_run(&r, 3), 0);
	pair_fini(&r);
}

/*
 * A lane whose arena reservation is replaced by a larger one that only
 * fits in the space it gives back: the replacement goes through (a
 * reserve replaces the lane's payload, and the arena is no fuller for it).
 */
static void reserve_regrows_in_own_space(void)
{
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pending;
	struct pair r;
	void *buf;
	int lane;

	REQUIRE(pair_init(&r) == 0);
	lane = knitk_lane_claim(r.p);
	REQUIRE(lane >= 0);
	REQUIRE(knitk_lane_reserve(r.p, (unsigned int)lane, 8192, &buf) == 0);
	CHECK_EQ(knitk_lane_reserve(r.p, (unsigned int)lane, 8192, &buf), 0);
	CHECK_EQ(knitk_lane_reserve(r.p, (unsigned int)lane, 2000, &buf), 0);
	CHECK_EQ(knitk_lane_reserve(r.p, (unsigned int)lane, 8000, &buf), 0);
	memset(buf, 'z', 8000);
	REQUIRE(knitk_lane_publish(r.p, (unsigned int)lane) == 0);
	REQUIRE(knitk_lane_scan(r.c, &pending) == 1);
	REQUIRE(knitk_lane_decode(r.c, (unsigned int)lane, &m) == 0);
	CHECK_EQ(m.len, 8000);
	CHECK(m.data && ((const char *)m.data)[7999] == 'z');
	REQUIRE(knitk_lane_ack(r.c, pending) == 0);
	CHECK_EQ(full_capacity_run(&r, 4), 0);
	pair_fini(&r);
}

/*
 * knitk_lane_next gives a single producer's lanes in publish order
 * (knitk.h), also when a staged lane (knitk_producer_stage) is published
 * after lanes claimed later were sent: the consumer sees the sends first.
 */
static void staged_lane_published_late_comes_last(void)
{
	struct knitk_msg m = { .size = sizeof(m) };
	struct knitk_lane_header h = { 0 };
	uint64_t pending, all = 0;
	unsigned int order[4], n = 0, i;
	struct pair r;
	int staged, lane;

	REQUIRE(pair_init(&r) == 0);
	/* Publish order: task 0, 1, 2 (sent), then 3 (staged first). */
	h.task_id = 3;
	staged = knitk_producer_stage(r.p, &h, NULL, 0);
	REQUIRE(staged >= 0);
	for (i = 0; i < 3; i++) {
		h.task_id = i;
		lane = knitk_producer_send(r.p, &h, NULL, 0);
		REQUIRE(lane >= 0);
		all |= 1ULL << lane;
	}
	REQUIRE(knitk_lane_publish(r.p, (unsigned int)staged) == 0);
	all |= 1ULL << staged;
	REQUIRE(knitk_lane_scan(r.c, &pending) == 4);
	REQUIRE(pending == all);
	while ((lane = knitk_lane_next(r.c, &pending)) >= 0 && n < 4) {
		REQUIRE(knitk_lane_decode(r.c, (unsigned int)lane, &m) == 0);
		order[n++] = (unsigned int)m.header.task_id;
	}
	REQUIRE(n == 4);
	for (i = 0; i < 4; i++)
		CHECK_EQ(order[i], i);
	REQUIRE(knitk_lane_ack(r.c, all) == 0);
	CHECK_EQ(full_capacity_run(&r, 5), 0);
	pair_fini(&r);
}

/*
 * A consumer process stopped between two library calls (it scanned and
 * decoded a full mailbox, acknowledged half of it and raised SIGSTOP),
 * then SIGKILLed: the producer marks it dead and stands in for it
 * (knitk_producer_reset_consumer, which leaves a claimed lane claimed),
 * and a new consumer of a new endpoint in the same
 * role runs the mailbox at full capacity, by content.
 */
static void consumer_killed_between_calls(void)
{
	struct pair r;
	uint64_t pending, half = 0;
	unsigned int i;
	int status, lane;
	pid_t pid;

	/* Worker 0's role goes to the child: this process's consumer leaves. */
	REQUIRE(pair_init_host_only(&r) == 0);
	for (i = 0; i < KNITK_LANES; i++) {
		struct knitk_lane_header h = { .task_id = i };
		unsigned char b[100];

		memset(b, (int)i, sizeof(b));
		REQUIRE(knitk_producer_send(r.p, &h, b, i & 1 ? sizeof(b) : 8) >= 0);
	}
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct knitk_msg m = { .size = sizeof(m) };

		if (pair_worker_back(&r) ||
		    knitk_lane_scan(r.c, &pending) != KNITK_LANES)
			_exit(1);
		while ((lane = knitk_lane_next(r.c, &pending)) >= 0) {
			if (knitk_lane_decode(r.c, (unsigned int)lane, &m))
				_exit(2);
			if (m.header.task_id < KNITK_LANES / 2)
				half |= 1ULL << lane;
		}
		if (knitk_lane_ack(r.c, half))
			_exit(3);
		raise(SIGSTOP);
		_exit(4);
	}
	REQUIRE(waitpid(pid, &status, WUNTRACED) == pid);
	REQUIRE(WIFSTOPPED(status));
	REQUIRE(kill(pid, SIGKILL) == 0);
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status));
	CHECK_EQ(knitk_endpoint_mark_dead(r.host, 0), 0);
	CHECK_EQ(knitk_endpoint_role(r.host, 0, NULL), 0);

	/* Half the lanes came back; a claimed lane stays claimed. */
	REQUIRE(knitk_mailbox_pending(r.host, 0, &pending) >= 0);
	CHECK_EQ(__builtin_popcountll(pending), KNITK_LANES / 2);
	lane = knitk_lane_claim(r.p);
	REQUIRE(lane >= 0);
	CHECK_EQ(knitk_producer_reset_consumer(r.p), 0);
	REQUIRE(knitk_mailbox_pending(r.host, 0, &pending) >= 0);
	CHECK_EQ(pending, 0);
	CHECK_EQ(knitk_lane_release(r.p, (unsigned int)lane), 0);

	REQUIRE(pair_worker_back(&r) == 0);
	CHECK_EQ(full_capacity_run(&r, 6), 0);
	CHECK_EQ(full_capacity_run(&r, 7), 0);
	pair_fini(&r);
}

/*
 * A consumer process killed inside knitk_lane_ack: traced and single-
 * stepped until its arena free word has changed while its ack word has
 * not (the torn state knitk_producer_reset_consumer repairs, knitk.h),
 * then SIGKILLed.  The reset neither undoes the frees nor leaves a slot
 * or a lane behind: a new consumer runs the mailbox at full capacity.
 */
static void consumer_killed_inside_ack(void)
{
	struct knitk_sector *sec;
	struct knitk_layout l;
	struct pair r;
	uint64_t free0, ack0, pending;
	unsigned long steps = 0;
	unsigned int i;
	int status;
	void *base;
	pid_t pid;

	REQUIRE(pair_init_host_only(&r) == 0);
	REQUIRE(knitk_endpoint_request_mailbox(r.host, 0, 0) == 0);
	REQUIRE(knitk_endpoint_layout(r.host, &l, NULL) == 0);
	REQUIRE(knitk_endpoint_base(r.host, &base) == 0);
	sec = (void *)((char *)base + l.mailbox_off);
	for (i = 0; i < 8; i++) {
		struct knitk_lane_header h = { .task_id = i };
		unsigned char b[200];

		memset(b, (int)i, sizeof(b));
		REQUIRE(knitk_producer_send(r.p, &h, b, sizeof(b)) >= 0);
	}
	free0 = __atomic_load_n(&sec->arena_free, __ATOMIC_ACQUIRE);
	ack0 = __atomic_load_n(&sec->ack, __ATOMIC_ACQUIRE);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct knitk_msg m = { .size = sizeof(m) };
		uint64_t all;
		int lane;

		if (pair_worker_back(&r) || knitk_lane_scan(r.c, &pending) != 8)
			_exit(1);
		all = pending;
		while ((lane = knitk_lane_next(r.c, &pending)) >= 0)
			if (knitk_lane_decode(r.c, (unsigned int)lane, &m))
				_exit(2);
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(3);
		raise(SIGSTOP);
		knitk_lane_ack(r.c, all);
		_exit(0);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid && WIFSTOPPED(status));
	/* Step until the free word moved; the ack word must not have yet. */
	while (__atomic_load_n(&sec->arena_free, __ATOMIC_ACQUIRE) == free0) {
		if (ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL) ||
		    waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
			break;
		steps++;
	}
	CHECK(__atomic_load_n(&sec->arena_free, __ATOMIC_ACQUIRE) != free0);
	CHECK_EQ(__atomic_load_n(&sec->ack, __ATOMIC_ACQUIRE), ack0);
	printf("# killed %lu steps after its stop, frees stored, ack not\n", steps);
	kill(pid, SIGKILL);
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFSIGNALED(status));
	CHECK_EQ(knitk_endpoint_mark_dead(r.host, 0), 0);
	CHECK_EQ(knitk_producer_reset_consumer(r.p), 0);
	REQUIRE(knitk_mailbox_pending(r.host, 0, &pending) >= 0);
	CHECK_EQ(pending, 0);
	REQUIRE(pair_worker_back(&r) == 0);
	CHECK_EQ(full_capacity_run(&r, 8), 0);
	pair_fini(&r);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(lane_boundaries_change_nothing);
	TEST(failed_reserve_keeps_lane);
	TEST(reserve_regrows_in_own_space);
	TEST(staged_lane_published_late_comes_last);
	TEST(consumer_killed_between_calls);
	TEST(consumer_killed_inside_ack);
	return tap_exit();
}
