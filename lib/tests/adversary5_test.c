// SPDX-License-Identifier: GPL-2.0
/*
 * Adversarial tests of the core and pool contracts on the futex backend,
 * written from the public headers and man pages alone: every argument
 * boundary of the lane, endpoint and steal functions, with the check that
 * a refused call changed nothing (a full-capacity run afterwards); a
 * failed reservation that must leave the lane as it was; a staged lane
 * published late; a consumer process killed between two calls and inside
 * its ack (ptrace); attach of fds that are not knots; parks with deadlines
 * of 0 and on both sides of 2^63; the fds a pool makes (close-on-exec for
 * a helper that execs); pool create failures and create/destroy loops
 * that must leak no fd, knot mapping, thread or child; refused submits
 * that must take no room; a pool at every maximum; a stopped process
 * worker; affinity changed under load; signals in blocking pool calls.
 * argv[1] (the runner's call count) is ignored: the counts are small.
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

#define ARENA	(64 * 1024)

/* ------------------------------------------------------------- helpers */

static void *noop_main(void *arg)
{
	return arg;
}

/*
 * Threads of the process, after one thread was made and joined (a
 * sanitizer's runtime starts a thread of its own at the first).
 */
static int threads(void)
{
	pthread_t t;

	if (!pthread_create(&t, NULL, noop_main, NULL))
		pthread_join(t, NULL);
	return count_threads();
}

/*
 * Mappings of knots (the futex backend's memfd "knitk"): thread stacks
 * and malloc arenas that glibc keeps for reuse are not the library's.
 */
static int mappings(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "/memfd:knitk ") != NULL;
	fclose(f);
	return n;
}

/* Children of this process, zombies included (it is a subreaper). */
static int children(void)
{
	char path[64], buf[4096];
	ssize_t r;
	int fd, n = 0;
	char *p;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)gettid());
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = '\0';
	for (p = strtok(buf, " \n"); p; p = strtok(NULL, " \n"))
		n++;
	return n;
}

/* What a pool may leave behind in the process: fds, knot mappings, threads, children. */
struct held {
	int fds, maps, thr, kids;
};

static struct held held_now(void)
{
	return (struct held){ count_fds(false), mappings(), threads(), children() };
}

/* Nothing is held beyond @before. */
static void check_held(const struct held *before)
{
	CHECK_EQ(count_fds(false), before->fds);
	CHECK_EQ(mappings(), before->maps);
	CHECK_EQ(threads(), before->thr);
	CHECK_EQ(children(), before->kids);
}

/* A knot of one submitter and @workers private workers, the host joined. */
static struct knitk_geometry small_geom(unsigned int workers)
{
	struct knitk_geometry g = {
		.nr_workers = workers, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64, .arena_bytes = 8192,
	};

	return g;
}

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

/* -------------------------------------------- core: refused calls */

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
 * (knitk_producer_reset_consumer; -EBUSY first while a lane is claimed,
 * changing nothing), and a new consumer of a new endpoint in the same
 * role runs the mailbox at full capacity, by content.
 */
static void consumer_killed_between_calls(void)
{
	struct pair r;
	uint64_t pending, half = 0;
	unsigned int i;
	int status, lane;
	pid_t pid;

	REQUIRE(pair_init(&r) == 0);
	/* Worker 0's role goes to the child: this process's consumer leaves. */
	knitk_consumer_destroy(r.c);
	knitk_endpoint_destroy(r.w0);
	r.c = NULL;
	r.w0 = NULL;
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
		struct knitk_endpoint *e;
		struct knitk_consumer *c;
		int mb = knitk_endpoint_request_mailbox(r.host, 0, 0);

		if (knitk_endpoint_attach(knitk_endpoint_fd(r.host), 0, &e) ||
		    knitk_endpoint_join(e, KNITK_ROLE_WORKER, 0) < 1 ||
		    knitk_consumer_create(e, (unsigned int)mb, &c) ||
		    knitk_lane_scan(c, &pending) != KNITK_LANES)
			_exit(1);
		while ((lane = knitk_lane_next(c, &pending)) >= 0) {
			if (knitk_lane_decode(c, (unsigned int)lane, &m))
				_exit(2);
			if (m.header.task_id < KNITK_LANES / 2)
				half |= 1ULL << lane;
		}
		if (knitk_lane_ack(c, half))
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

	/* Half the lanes came back; a claimed lane makes the reset wait. */
	REQUIRE(knitk_mailbox_pending(r.host, 0, &pending) >= 0);
	CHECK_EQ(__builtin_popcountll(pending), KNITK_LANES / 2);
	lane = knitk_lane_claim(r.p);
	REQUIRE(lane >= 0);
	CHECK_EQ(knitk_producer_reset_consumer(r.p), -EBUSY);
	REQUIRE(knitk_mailbox_pending(r.host, 0, &pending) >= 0);
	CHECK_EQ(__builtin_popcountll(pending), KNITK_LANES / 2);
	REQUIRE(knitk_lane_release(r.p, (unsigned int)lane) == 0);
	CHECK_EQ(knitk_producer_reset_consumer(r.p), 0);
	REQUIRE(knitk_mailbox_pending(r.host, 0, &pending) >= 0);
	CHECK_EQ(pending, 0);

	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(r.host), 0, &r.w0) == 0);
	REQUIRE(knitk_endpoint_join(r.w0, KNITK_ROLE_WORKER, 0) >= 1);
	REQUIRE(knitk_consumer_create(r.w0, 0, &r.c) == 0);
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

	REQUIRE(pair_init(&r) == 0);
	knitk_consumer_destroy(r.c);
	knitk_endpoint_destroy(r.w0);
	r.c = NULL;
	r.w0 = NULL;
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
		struct knitk_endpoint *e;
		struct knitk_consumer *c;
		uint64_t all;
		int lane;

		if (knitk_endpoint_attach(knitk_endpoint_fd(r.host), 0, &e) ||
		    knitk_endpoint_join(e, KNITK_ROLE_WORKER, 0) < 1 ||
		    knitk_consumer_create(e, 0, &c) || knitk_lane_scan(c, &pending) != 8)
			_exit(1);
		all = pending;
		while ((lane = knitk_lane_next(c, &pending)) >= 0)
			if (knitk_lane_decode(c, (unsigned int)lane, &m))
				_exit(2);
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(3);
		raise(SIGSTOP);
		knitk_lane_ack(c, all);
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
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(r.host), 0, &r.w0) == 0);
	REQUIRE(knitk_endpoint_join(r.w0, KNITK_ROLE_WORKER, 0) >= 1);
	REQUIRE(knitk_consumer_create(r.w0, 0, &r.c) == 0);
	CHECK_EQ(full_capacity_run(&r, 8), 0);
	pair_fini(&r);
}

/* ---------------------------------------- core: endpoints and fds */

static void endpoint_boundaries(void)
{
	static const unsigned int bad_db[] = { 2, 62, 64, 65, UINT_MAX };
	struct knitk_geometry g = small_geom(2);
	struct knitk_wake_stats ws;
	struct knitk_doorbell_stats ds;
	struct knitk_endpoint *e, *host;
	struct knitk_producer *p;
	struct knitk_consumer *c;
	uint64_t pending;
	unsigned int i;
	uint32_t gen;

	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX | KNITK_KNOT_KMOD, &e), -EINVAL);
	CHECK_EQ(knitk_endpoint_create(&g, 1U << 3, &e), -EINVAL);
	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_KMOD | KNITK_KNOT_FALLBACK_FUTEX, &e),
		 -EINVAL);
	CHECK_EQ(knitk_endpoint_create(NULL, KNITK_KNOT_FUTEX, &e), -EINVAL);
	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, NULL), -EINVAL);
	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);

	/* Not joined yet. */
	CHECK_EQ(knitk_endpoint_doorbell(host), -ENOTCONN);
	CHECK_EQ(knitk_doorbell_park(host, 0), -ENOTCONN);
	CHECK_EQ(knitk_doorbell_prepare(host, &gen), -ENOTCONN);
	CHECK_EQ(knitk_doorbell_cancel(host), -ENOTCONN);
	CHECK_EQ(knitk_doorbell_kick_self(host), -ENOTCONN);

	/* Joins that are refused take no role. */
	CHECK_EQ(knitk_endpoint_join(host, KNITK_ROLE_HOST, 1), -EINVAL);
	CHECK_EQ(knitk_endpoint_join(host, KNITK_ROLE_WORKER, 2), -EINVAL);
	CHECK_EQ(knitk_endpoint_join(host, KNITK_ROLE_WORKER, UINT_MAX), -EINVAL);
	CHECK(knitk_endpoint_join(host, 0xdead, 0) < 0);
	CHECK(knitk_endpoint_join(NULL, KNITK_ROLE_HOST, 0) < 0);
	for (i = 0; i < 2; i++)
		CHECK_EQ(knitk_endpoint_role(host, i, NULL), 0);
	CHECK_EQ(knitk_endpoint_role(host, KNITK_DOORBELL_HOST, NULL), 0);
	CHECK_EQ(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0), 1);
	CHECK_EQ(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0), -EALREADY);
	CHECK_EQ(knitk_endpoint_join(host, KNITK_ROLE_WORKER, 0), -EALREADY);
	CHECK_EQ(knitk_endpoint_role(host, KNITK_DOORBELL_HOST, &gen), 1);
	CHECK_EQ(gen, 1);

	for (i = 0; i < sizeof(bad_db) / sizeof(bad_db[0]); i++) {
		CHECK_EQ(knitk_endpoint_role(host, bad_db[i], &gen), -EINVAL);
		CHECK_EQ(knitk_endpoint_mark_dead(host, bad_db[i]), -EINVAL);
		CHECK_EQ(knitk_endpoint_return_mailbox(host, bad_db[i]), -EINVAL);
		CHECK_EQ(knitk_endpoint_request_mailbox(host, 0, bad_db[i]), -EINVAL);
	}
	CHECK_EQ(knitk_endpoint_request_mailbox(host, 1, 0), -EINVAL);
	CHECK_EQ(knitk_endpoint_request_mailbox(host, UINT_MAX, 0), -EINVAL);
	CHECK_EQ(knitk_endpoint_mark_dead(host, 0), -ENOENT);
	CHECK_EQ(knitk_mailbox_pending(host, 4, &pending), -EINVAL);
	CHECK_EQ(knitk_mailbox_pending(host, UINT_MAX, &pending), -EINVAL);
	CHECK_EQ(knitk_producer_create(host, 4, &p), -EINVAL);
	CHECK_EQ(knitk_producer_create(host, UINT_MAX, &p), -EINVAL);
	CHECK_EQ(knitk_consumer_create(host, 4, &c), -EINVAL);
	CHECK_EQ(knitk_steal_consumer_create(host, 0, 16, &c), -EOPNOTSUPP);
	/* Bits naming no doorbell of the knot (workers 2..62). */
	CHECK_EQ(knitk_doorbell_ring(host, 1ULL << 2), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring(host, 1ULL << 62), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring_park(host, 1ULL << 2, 0), -EINVAL);
	CHECK_EQ(knitk_doorbell_ring(host, 0), 0);
	CHECK_EQ(knitk_doorbell_ring(host, 3 | (1ULL << KNITK_DOORBELL_HOST)), 0);

	/* Sized output: refused sizes, and the futex backend's -EOPNOTSUPP. */
	ws.size = KNITK_WAKE_STATS_SIZE_VER0 - 1;
	CHECK_EQ(knitk_endpoint_wake_stats(host, &ws), -EINVAL);
	ws.size = 0;
	CHECK_EQ(knitk_endpoint_wake_stats(host, &ws), -EINVAL);
	ws.size = KNITK_SIZED_MAX + 1;
	CHECK_EQ(knitk_endpoint_wake_stats(host, &ws), -E2BIG);
	ws.size = UINT32_MAX;
	CHECK_EQ(knitk_endpoint_wake_stats(host, &ws), -E2BIG);
	CHECK_EQ(knitk_endpoint_doorbell_stats(host, 0, &ds, sizeof(ds)), -EOPNOTSUPP);
	CHECK_EQ(knitk_endpoint_doorbell_stats(host, 0, &ds, 0), -EINVAL);
	CHECK_EQ(knitk_endpoint_doorbell_stats(host, 64, &ds, sizeof(ds)), -EINVAL);
	CHECK_EQ(knitk_endpoint_set_event_fd(host, -2), -EINVAL);
	CHECK_EQ(knitk_endpoint_set_event_fd(host, INT_MIN), -EINVAL);

	/* A deadline of 0 (the past) and one far ahead that a kick ends. */
	CHECK_EQ(knitk_doorbell_park(host, 0), -ETIMEDOUT);
	CHECK_EQ(knitk_doorbell_park(host, 1), -ETIMEDOUT);
	REQUIRE(knitk_doorbell_prepare(host, &gen) == 0);
	CHECK_EQ(knitk_doorbell_kick_self(host), 0);
	CHECK_EQ(knitk_doorbell_wait(host, gen, KNITK_WAIT_FOREVER - 1), 0);
	REQUIRE(knitk_doorbell_prepare(host, &gen) == 0);
	CHECK_EQ(knitk_doorbell_kick_self(host), 0);
	CHECK_EQ(knitk_doorbell_wait(host, gen, (uint64_t)INT64_MAX + 1), 0);

	knitk_endpoint_destroy(host);
}

struct parker {
	struct knitk_endpoint *ep;
	uint64_t deadline;
	int ret;
};

static void *park_main(void *arg)
{
	struct parker *pk = arg;

	pk->ret = knitk_doorbell_park(pk->ep, pk->deadline);
	return NULL;
}

/*
 * Deadlines far ahead, on both sides of 2^63 (a signed comparison would
 * take them for the past): the park sleeps (its sleeping flag is seen
 * set) and ends with the kick, 0, never -ETIMEDOUT.
 */
static void park_far_deadlines(void)
{
	static const uint64_t far[] = { (uint64_t)INT64_MAX, (uint64_t)INT64_MAX + 1,
					(uint64_t)INT64_MAX + 1000000000ULL,
					KNITK_WAIT_FOREVER - 1, KNITK_WAIT_FOREVER };
	struct knitk_geometry g = small_geom(1);
	struct knitk_wake_stats ws = { .size = sizeof(ws) };
	struct knitk_doorbell *db;
	struct knitk_layout l;
	struct knitk_endpoint *host;
	unsigned int i;
	void *base;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) == 1);
	REQUIRE(knitk_endpoint_layout(host, &l, NULL) == 0);
	REQUIRE(knitk_endpoint_base(host, &base) == 0);
	db = (void *)((char *)base + l.doorbell_off +
				     (uint64_t)KNITK_DOORBELL_HOST * l.doorbell_stride);
	for (i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
		struct parker pk = { .ep = host, .deadline = far[i], .ret = 1 };
		pthread_t t;

		REQUIRE(pthread_create(&t, NULL, park_main, &pk) == 0);
		while (!__atomic_load_n(&db->sleeping, __ATOMIC_ACQUIRE))
			sched_yield();
		CHECK_EQ(knitk_doorbell_kick_self(host), 0);
		pthread_join(t, NULL);
		CHECK_EQ(pk.ret, 0);
	}
	REQUIRE(knitk_endpoint_wake_stats(host, &ws) == 0);
	CHECK_EQ(ws.timeouts, 0);
	knitk_endpoint_destroy(host);
}

/* Steal region sizes at every edge of "64 / g >= workers + 1". */
static void steal_region_edges(void)
{
	CHECK_EQ(knitk_steal_region_lanes(0, 0), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(64, 0), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(UINT_MAX, 0), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(1, 0), 32);
	CHECK_EQ(knitk_steal_region_lanes(1, 32), 32);
	CHECK_EQ(knitk_steal_region_lanes(1, 64), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(2, 0), 16);
	CHECK_EQ(knitk_steal_region_lanes(3, 0), 16);
	CHECK_EQ(knitk_steal_region_lanes(3, 16), 16);
	CHECK_EQ(knitk_steal_region_lanes(4, 16), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(4, 0), 8);
	CHECK_EQ(knitk_steal_region_lanes(31, 0), 2);
	CHECK_EQ(knitk_steal_region_lanes(32, 0), 1);
	CHECK_EQ(knitk_steal_region_lanes(63, 0), 1);
	CHECK_EQ(knitk_steal_region_lanes(63, 1), 1);
	CHECK_EQ(knitk_steal_region_lanes(63, 2), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(2, 3), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(2, UINT_MAX), -EINVAL);
	CHECK_EQ(knitk_steal_region_lanes(2, 1U << 31), -EINVAL);
}

/*
 * Attach refuses what is not a knot, and a refused attach with
 * KNITK_ATTACH_TAKE_FD leaves the caller's fd open.
 */
static void attach_refuses_non_knots(void)
{
	struct knitk_geometry g = small_geom(1);
	struct knitk_endpoint *host, *e;
	char junk[8192];
	int fds[2], fd, before = count_fds(false);

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	CHECK_EQ(knitk_endpoint_attach(-1, 0, &e), -EINVAL);
	CHECK_EQ(knitk_endpoint_attach(INT_MAX, 0, &e), -EBADF);
	CHECK_EQ(knitk_endpoint_attach(knitk_endpoint_fd(host), 1U << 1, &e), -EINVAL);
	CHECK_EQ(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, NULL), -EINVAL);

	REQUIRE(pipe(fds) == 0);
	CHECK_EQ(knitk_endpoint_attach(fds[0], KNITK_ATTACH_TAKE_FD, &e), -EINVAL);
	CHECK(fcntl(fds[0], F_GETFD) >= 0);
	close(fds[0]);
	close(fds[1]);

	/* An empty, a short, a page of junk, a junk file of the knot's size. */
	fd = memfd_create("junk", MFD_CLOEXEC);
	REQUIRE(fd >= 0);
	CHECK_EQ(knitk_endpoint_attach(fd, KNITK_ATTACH_TAKE_FD, &e), -EINVAL);
	REQUIRE(write(fd, "knitk", 5) == 5);
	CHECK_EQ(knitk_endpoint_attach(fd, KNITK_ATTACH_TAKE_FD, &e), -EINVAL);
	memset(junk, 0xff, sizeof(junk));
	REQUIRE(pwrite(fd, junk, sizeof(junk), 0) == (ssize_t)sizeof(junk));
	CHECK_EQ(knitk_endpoint_attach(fd, KNITK_ATTACH_TAKE_FD, &e), -EINVAL);
	CHECK(fcntl(fd, F_GETFD) >= 0);
	close(fd);

	/* A copy of the knot's control page on a file of another size. */
	fd = memfd_create("copy", MFD_CLOEXEC);
	REQUIRE(fd >= 0);
	REQUIRE(pread(knitk_endpoint_fd(host), junk, 4096, 0) == 4096);
	REQUIRE(pwrite(fd, junk, 4096, 0) == 4096);
	CHECK_EQ(knitk_endpoint_attach(fd, 0, &e), -EINVAL);
	close(fd);

	/* The knot opened read-only cannot be mapped writable. */
	{
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", knitk_endpoint_fd(host));
		fd = open(path, O_RDONLY | O_CLOEXEC);
		REQUIRE(fd >= 0);
		CHECK(knitk_endpoint_attach(fd, KNITK_ATTACH_TAKE_FD, &e) < 0);
		CHECK(fcntl(fd, F_GETFD) >= 0);
		close(fd);
	}
	knitk_endpoint_destroy(host);
	CHECK_EQ(count_fds(false), before);
}

/* --------------------------------------------------- pool: leaks */

static int opts_pool(struct knitk_pool_opts *o, struct knitk_pool **pool)
{
	o->size = sizeof(*o);
	o->knot_flags = KNITK_KNOT_FUTEX;
	return knitk_pool_create(o, &test_tasks, pool);
}

/*
 * Options a pool refuses (-EINVAL, -E2BIG) and options it cannot carry
 * out (a worker binary that does not exist): each leaves no fd, mapping,
 * thread or child behind.
 */
static void pool_create_failures_leak_nothing(void)
{
	static char *const argv_none[] = { NULL };
	struct knitk_task_table tbl = test_tasks;
	struct knitk_pool_opts o;
	struct knitk_pool *pool = NULL;
	unsigned char big[KNITK_SIZED_MAX + 8];
	struct held before = held_now();
	unsigned int round;

	for (round = 0; round < 3; round++) {
		memset(&o, 0, sizeof(o));
		o.nr_workers = KNITK_MAX_WORKERS + 1;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.nr_workers = UINT_MAX;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.nr_submitters = KNITK_MAX_SUBMITTERS + 1;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.inline_bytes = 65;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.arena_bytes = 4097;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.kind = 3;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.flags = 1U << 5;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.dispatch = 2;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.dispatch = KNITK_POOL_DISPATCH_STEAL;
		o.nr_workers = 4;
		o.steal_region = 16;
		CHECK_EQ(opts_pool(&o, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.knot_flags = 1U << 3;
		o.size = sizeof(o);
		CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
		memset(&o, 0, sizeof(o));
		o.nr_workers = 1;
		o.size = KNITK_POOL_OPTS_SIZE_VER0 - 1;
		CHECK_EQ(knitk_pool_create(&o, &test_tasks, &pool), -EINVAL);
		memset(big, 0, sizeof(big));
		memcpy(big, &o, sizeof(o));
		((struct knitk_pool_opts *)(void *)big)->size = KNITK_SIZED_MAX + 1;
		CHECK_EQ(knitk_pool_create((void *)big, &test_tasks, &pool), -E2BIG);
		((struct knitk_pool_opts *)(void *)big)->size = KNITK_SIZED_MAX;
		big[sizeof(o)] = 1;
		CHECK_EQ(knitk_pool_create((void *)big, &test_tasks, &pool), -E2BIG);
		memset(&o, 0, sizeof(o));
		o.nr_workers = 1;
		o.size = sizeof(o);
		o.knot_flags = KNITK_KNOT_FUTEX;
		tbl.reserved = 1;
		CHECK_EQ(knitk_pool_create(&o, &tbl, &pool), -EINVAL);
		tbl.reserved = 0;
		tbl.nr_tasks = 0;
		CHECK_EQ(knitk_pool_create(&o, &tbl, &pool), -EINVAL);
		tbl.nr_tasks = T_NR;
		tbl.tasks = NULL;
		CHECK_EQ(knitk_pool_create(&o, &tbl, &pool), -EINVAL);
		tbl.tasks = test_tasks.tasks;
		CHECK_EQ(knitk_pool_create(&o, NULL, &pool), -EINVAL);
		CHECK_EQ(knitk_pool_create(&o, &test_tasks, NULL), -EINVAL);

		/* Process workers from a binary that is not there. */
		memset(&o, 0, sizeof(o));
		o.kind = KNITK_WORKER_PROCESSES;
		o.nr_workers = 2;
		o.worker_path = "/nonexistent/knitk-worker";
		o.worker_argv = argv_none;
		CHECK(opts_pool(&o, &pool) < 0);
		/* A binary that exits without joining. */
		o.worker_path = "/bin/true";
		CHECK_EQ(opts_pool(&o, &pool), -ECHILD);
	}
	CHECK(pool == NULL);
	check_held(&before);
}

/*
 * Pools made, used and destroyed in a loop, of every kind and dispatch:
 * the fds, mappings, threads and children of the process are as before.
 */
static void create_destroy_loop(void)
{
	static const unsigned int kinds[] = { KNITK_WORKER_THREADS, KNITK_WORKER_PROCESSES };
	static const unsigned int modes[] = { KNITK_POOL_DISPATCH_PRIVATE,
					      KNITK_POOL_DISPATCH_STEAL };
	struct held before = held_now();
	unsigned int k, d, round;

	for (k = 0; k < 2; k++)
		for (d = 0; d < 2; d++)
			for (round = 0; round < 8; round++) {
				struct knitk_pool_opts o = {
					.kind = kinds[k], .nr_workers = 2, .dispatch = modes[d],
					.arena_bytes = ARENA,
				};
				struct knitk_pool *pool;
				uint64_t x = round, y;
				size_t len;

				REQUIRE(opts_pool(&o, &pool) == 0);
				/* The count sees the pool's knot. */
				CHECK(mappings() > before.maps);
				CHECK_EQ(knitk_pool_call(pool, T_MIX, &x, 8, NULL, &y, 8, &len), 0);
				CHECK(len == 8 && y == mix64(x));
				if (round & 1)
					CHECK(knitk_pool_event_fd(pool) >= 0 ||
					      kinds[k] == KNITK_WORKER_PROCESSES);
				if (round & 2)
					CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
				knitk_pool_destroy(pool);
			}
	check_held(&before);
}

/*
 * Every fd a pool opens is close-on-exec: a helper the program forks and
 * execs while the pool runs inherits none of them (it would keep the knot
 * alive, or, holding a pidfd or the event fd, outlive what they name).
 */
static void pool_fds_are_cloexec(void)
{
	static const unsigned int kinds[] = { KNITK_WORKER_THREADS, KNITK_WORKER_PROCESSES };
	unsigned int k;

	for (k = 0; k < 2; k++) {
		struct knitk_pool_opts o = { .kind = kinds[k], .nr_workers = 2,
					     .arena_bytes = ARENA };
		struct knitk_pool *pool;
		char seen[1024] = { 0 };
		DIR *dir;
		struct dirent *e;
		unsigned int leaked = 0;
		int fd;

		dir = opendir("/proc/self/fd");
		REQUIRE(dir);
		while ((e = readdir(dir)))
			if (e->d_name[0] != '.' && atoi(e->d_name) < 1024)
				seen[atoi(e->d_name)] = 1;
		closedir(dir);
		REQUIRE(opts_pool(&o, &pool) == 0);
		if (kinds[k] == KNITK_WORKER_THREADS)
			REQUIRE(knitk_pool_event_fd(pool) >= 0);
		for (fd = 0; fd < 1024; fd++) {
			int fl = fcntl(fd, F_GETFD);

			if (fl < 0 || seen[fd])
				continue;
			if (!(fl & FD_CLOEXEC)) {
				printf("# fd %d of the pool is not close-on-exec\n", fd);
				leaked++;
			}
		}
		CHECK_EQ(leaked, 0);
		knitk_pool_destroy(pool);
	}
}

/* Reap until @n calls are back, each checked by content and released. */
static unsigned int reap_n(struct knitk_pool *pool, int efd, unsigned int n,
			   uint64_t *bad)
{
	struct knitk_call *out[16];
	unsigned int got = 0;
	int r, i;

	while (got < n) {
		struct pollfd p = { .fd = efd, .events = POLLIN };

		r = knitk_pool_reap(pool, out, 16);
		if (r < 0)
			return got;
		for (i = 0; i < r; i++) {
			int st = knitk_call_status(out[i]);

			if (st < 0)
				(*bad)++;
			knitk_call_release(out[i]);
		}
		got += (unsigned int)r;
		if (!r && poll(&p, 1, -1) < 0)
			return got;
	}
	return got;
}

/*
 * With the only worker held in a task (T_GATE), calls of @len bytes are
 * submitted in event mode until -EAGAIN: how many fit.  Then the gate is
 * released and everything reaped.
 */
static int room_for(struct knitk_pool *pool, int efd, struct gate *g, size_t len,
		    uint64_t *bad)
{
	static unsigned char buf[ARENA];
	struct knitk_call *c;
	int n = 0, ret;

	memset(buf, 7, len);
	if (knitk_pool_submit(pool, T_GATE, &g->arg, sizeof(g->arg), NULL, &c) ||
	    gate_wait(g, 'r'))
		return -1;
	/* The gated call's handle comes back through reap too. */
	while ((ret = knitk_pool_submit(pool, T_ECHO, buf, len, NULL, &c)) == 0)
		n++;
	if (ret != -EAGAIN || gate_release(g) || gate_wait(g, 'd'))
		return -1;
	if (reap_n(pool, efd, (unsigned int)n + 1, bad) != (unsigned int)n + 1)
		return -1;
	return n;
}

/*
 * Submits the pool refuses (too big, unknown function, bad options,
 * a worker it has not, a bad entry in a batch) take no lane, no arena
 * room and no handle: with the worker held, as many calls fit after them
 * as before, small and as large as a quarter of the arena.
 */
static void refused_submits_take_no_room(unsigned int dispatch)
{
	struct knitk_pool_opts o = { .nr_workers = 1, .arena_bytes = ARENA,
				     .dispatch = dispatch };
	struct knitk_call_opts bad_res = { .size = sizeof(bad_res), .reserved = 1 };
	struct knitk_call_opts bad_w = { .size = sizeof(bad_w), .flags = KNITK_CALL_WORKER,
					 .worker = 1 };
	struct knitk_call_opts big_size = { .size = KNITK_SIZED_MAX + 1 };
	static unsigned char buf[ARENA + 1];
	struct knitk_submission subs[3];
	struct knitk_call *c, *calls[3];
	struct knitk_pool *pool;
	uint64_t bad = 0, x = 1;
	int efd, small, quarter, round;
	struct gate g;
	size_t len;

	REQUIRE(gate_open(&g) == 0);
	REQUIRE(opts_pool(&o, &pool) == 0);
	efd = knitk_pool_event_fd(pool);
	REQUIRE(efd >= 0);
	small = room_for(pool, efd, &g, 8, &bad);
	quarter = room_for(pool, efd, &g, ARENA / 4, &bad);
	REQUIRE(small > 0 && quarter > 0);
	printf("# room with the worker held: %d calls of 8 bytes, %d of %d\n",
	       small, quarter, ARENA / 4);
	for (round = 0; round < 100; round++) {
		CHECK_EQ(knitk_pool_submit(pool, T_ECHO, buf, ARENA + 1, NULL, &c), -EMSGSIZE);
		CHECK_EQ(knitk_pool_submit(pool, T_ECHO, buf, SIZE_MAX, NULL, &c), -EMSGSIZE);
		CHECK_EQ(knitk_pool_submit(pool, T_NR, &x, 8, NULL, &c), -EINVAL);
		CHECK_EQ(knitk_pool_submit(pool, UINT32_MAX, &x, 8, NULL, &c), -EINVAL);
		CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &bad_res, &c), -EINVAL);
		CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &bad_w, &c), -EINVAL);
		CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &big_size, &c), -E2BIG);
		CHECK_EQ(knitk_pool_call(pool, T_NR, &x, 8, NULL, &x, 8, &len), -EINVAL);
		memset(subs, 0, sizeof(subs));
		subs[0].fn = T_MIX;
		subs[0].in = &x;
		subs[0].len = 8;
		subs[1] = subs[0];
		subs[1].len = ARENA + 1;
		subs[2] = subs[0];
		CHECK_EQ(knitk_pool_submit_batch(pool, subs + 1, 2, calls), -EMSGSIZE);
		subs[1].len = 8;
		subs[1].reserved = 1;
		CHECK_EQ(knitk_pool_submit_batch(pool, subs + 1, 2, calls), -EINVAL);
		subs[1].reserved = 0;
		subs[1].opts = &bad_w;
		CHECK_EQ(knitk_pool_submit_batch(pool, subs + 1, 2, calls), -EINVAL);
		/* One good call before the bad entry: submitted, then reaped. */
		CHECK_EQ(knitk_pool_submit_batch(pool, subs, 2, calls), 1);
		CHECK_EQ(reap_n(pool, efd, 1, &bad), 1);
	}
	CHECK_EQ(room_for(pool, efd, &g, 8, &bad), small);
	CHECK_EQ(room_for(pool, efd, &g, ARENA / 4, &bad), quarter);
	CHECK_EQ(bad, 0);
	knitk_pool_destroy(pool);
	gate_close(&g);
}

static void refused_submits_take_no_room_private(void)
{
	refused_submits_take_no_room(KNITK_POOL_DISPATCH_PRIVATE);
}

static void refused_submits_take_no_room_steal(void)
{
	refused_submits_take_no_room(KNITK_POOL_DISPATCH_STEAL);
}

/*
 * A pool at every maximum: KNITK_MAX_WORKERS thread workers and
 * KNITK_MAX_SUBMITTERS submitters (4095 mailboxes), private and stealing
 * (regions of one lane): a call pinned to each worker runs on that
 * worker's own thread, and a batch of calls completes by content.
 */
static void pool_at_the_limits(unsigned int dispatch)
{
	struct knitk_pool_opts o = { .nr_workers = KNITK_MAX_WORKERS,
				     .nr_submitters = KNITK_MAX_SUBMITTERS,
				     .inline_bytes = 64, .arena_bytes = 4096,
				     .dispatch = dispatch };
	static struct knitk_submission subs[200];
	static struct knitk_call *calls[200];
	static uint64_t xs[200];
	struct knitk_pool *pool;
	int32_t tids[KNITK_MAX_WORKERS];
	unsigned int w, i, bad = 0, same = 0;

	REQUIRE(opts_pool(&o, &pool) == 0);
	for (w = 0; w < KNITK_MAX_WORKERS && dispatch == KNITK_POOL_DISPATCH_PRIVATE; w++) {
		struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER,
					      .worker = w };
		size_t len = 0;

		tids[w] = 0;
		CHECK_EQ(knitk_pool_call(pool, T_TID, NULL, 0, &co, &tids[w],
					 sizeof(tids[w]), &len), 0);
		CHECK_EQ(len, sizeof(tids[w]));
		for (i = 0; i < w; i++)
			same += tids[i] == tids[w];
	}
	CHECK_EQ(same, 0);
	for (i = 0; i < 200; i++) {
		xs[i] = i * 31 + dispatch;
		subs[i] = (struct knitk_submission){ .fn = T_MIX, .in = &xs[i], .len = 8 };
	}
	REQUIRE(knitk_pool_submit_batch(pool, subs, 200, calls) == 200);
	REQUIRE(knitk_pool_wait_all(pool, calls, 200, KNITK_WAIT_FOREVER) == 0);
	for (i = 0; i < 200; i++) {
		bad += !mix_result_ok(calls[i], xs[i]);
		knitk_call_release(calls[i]);
	}
	CHECK_EQ(bad, 0);
	knitk_pool_destroy(pool);
}

static void pool_at_the_limits_private(void)
{
	pool_at_the_limits(KNITK_POOL_DISPATCH_PRIVATE);
}

static void pool_at_the_limits_steal(void)
{
	pool_at_the_limits(KNITK_POOL_DISPATCH_STEAL);
}

/* ------------------------------------------- pool: stops, signals */

/*
 * A process worker stopped (SIGSTOP) with a call pinned to it: the call
 * stays in progress while the other worker serves calls, the stopped one
 * is not taken for dead, and after SIGCONT its call completes with its
 * result.
 */
static void stopped_worker_is_not_dead(void)
{
	struct knitk_pool_opts o = { .kind = KNITK_WORKER_PROCESSES, .nr_workers = 2,
				     .arena_bytes = ARENA };
	struct knitk_call_opts co = { .size = sizeof(co), .flags = KNITK_CALL_WORKER,
				      .worker = 0 };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint64_t x = 99, y;
	siginfo_t si;
	size_t len;
	unsigned int i;
	pid_t pid;

	REQUIRE(opts_pool(&o, &pool) == 0);
	REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0);
	pid = wi.pid;
	REQUIRE(pid > 0);
	REQUIRE(kill(pid, SIGSTOP) == 0);
	/* Stopped for sure: the stop is reported to its parent, the pool. */
	memset(&si, 0, sizeof(si));
	REQUIRE(waitid(P_PID, (id_t)pid, &si, WSTOPPED | WNOWAIT) == 0);
	CHECK_EQ(si.si_code, CLD_STOPPED);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, &co, &c) == 0);
	co.worker = 1;
	for (i = 0; i < 50; i++) {
		uint64_t v = i;

		CHECK_EQ(knitk_pool_call(pool, T_MIX, &v, 8, &co, &y, 8, &len), 0);
		CHECK(y == mix64(v));
	}
	CHECK_EQ(knitk_call_wait(c, 0), -EINPROGRESS);
	REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0);
	CHECK_EQ(wi.alive, 1);
	CHECK_EQ(wi.pid, pid);
	REQUIRE(kill(pid, SIGCONT) == 0);
	CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), 0);
	CHECK(mix_result_ok(c, x));
	knitk_call_release(c);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	CHECK_EQ(st.ownerdead, 0);
	knitk_pool_destroy(pool);
}

/* Sets the affinity of every thread of this process and of @pids. */
static void pin_all(const cpu_set_t *set, const pid_t *pids, unsigned int n)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned int i;

	if (d) {
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				sched_setaffinity(atoi(e->d_name), sizeof(*set), set);
		closedir(d);
	}
	for (i = 0; i < n; i++)
		sched_setaffinity(pids[i], sizeof(*set), set);
}

struct caller {
	struct knitk_pool *pool;
	_Atomic unsigned int *flips;
	_Atomic unsigned long done;
	unsigned long bad, n;
};

/* Calls per affinity flip: each caller waits for the next flip after them. */
#define CALLS_PER_FLIP	50

static void *caller_main(void *arg)
{
	struct caller *c = arg;
	unsigned long i;

	for (i = 0; i < c->n; i++) {
		uint64_t x = i * 7919, y = 0;
		size_t len = 0;

		while (atomic_load(c->flips) <= i / CALLS_PER_FLIP)
			sched_yield();
		if (knitk_pool_call(c->pool, T_MIX, &x, 8, NULL, &y, 8, &len) ||
		    len != 8 || y != mix64(x))
			c->bad++;
		atomic_store(&c->done, i + 1);
	}
	return NULL;
}

/*
 * The spin policy reads the CPUs the process may use at start; the whole
 * process (and its process workers) pinned to one CPU and let go again,
 * every 50 calls of each of two calling threads: every call completes by
 * content (a worker that spins for a peer that cannot run would hang).
 */
static void affinity_flips(unsigned int kind, unsigned int dispatch)
{
	struct knitk_pool_opts o = { .kind = kind, .nr_workers = 2, .arena_bytes = ARENA,
				     .dispatch = dispatch };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	_Atomic unsigned int flips = 0;
	struct knitk_pool *pool;
	struct caller c[2];
	cpu_set_t orig, one;
	pthread_t t[2];
	pid_t pids[2];
	unsigned int i, np = 0, f;

	REQUIRE(sched_getaffinity(0, sizeof(orig), &orig) == 0);
	if (CPU_COUNT(&orig) < 2)
		SKIP("one CPU only: nothing to take away");
	CPU_ZERO(&one);
	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &orig)) {
			CPU_SET(i, &one);
			break;
		}
	REQUIRE(opts_pool(&o, &pool) == 0);
	for (i = 0; i < 2 && kind == KNITK_WORKER_PROCESSES; i++)
		if (!knitk_pool_worker_info(pool, i, &wi) && wi.pid > 0)
			pids[np++] = wi.pid;
	for (i = 0; i < 2; i++) {
		c[i].pool = pool;
		c[i].flips = &flips;
		c[i].n = 1000;
		c[i].bad = 0;
		atomic_init(&c[i].done, 0);
		REQUIRE(pthread_create(&t[i], NULL, caller_main, &c[i]) == 0);
	}
	for (f = 0; f <= 1000 / CALLS_PER_FLIP; f++) {
		unsigned long want = (unsigned long)f * CALLS_PER_FLIP;

		/* Both callers are through the calls of the last flip. */
		for (i = 0; i < 2; i++)
			while (atomic_load(&c[i].done) < want)
				sched_yield();
		pin_all(f & 1 ? &orig : &one, pids, np);
		atomic_store(&flips, f + 1);
	}
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pin_all(&orig, pids, np);
	CHECK_EQ(c[0].bad + c[1].bad, 0);
	CHECK_EQ(atomic_load(&c[0].done) + atomic_load(&c[1].done), 2000);
	knitk_pool_destroy(pool);
}

static void affinity_flips_threads_private(void)
{
	affinity_flips(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE);
}

static void affinity_flips_threads_steal(void)
{
	affinity_flips(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL);
}

static void affinity_flips_processes_steal(void)
{
	affinity_flips(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_STEAL);
}

static _Atomic unsigned long usr1_seen;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&usr1_seen, 1);
}

/* What a blocked thread does while it is signalled. */
enum { OP_WAIT, OP_WAIT_ALL, OP_WAIT_ANY, OP_DRAIN };

struct blocked {
	struct knitk_pool *pool;
	struct knitk_call *gated;
	int op;
	_Atomic int stage;	/* 1: about to block, 2: returned */
	_Atomic pid_t tid;
	int ret;
};

static void *blocked_main(void *arg)
{
	struct blocked *b = arg;

	atomic_store(&b->tid, gettid());
	atomic_store(&b->stage, 1);
	switch (b->op) {
	case OP_WAIT:
		b->ret = knitk_call_wait(b->gated, KNITK_WAIT_FOREVER);
		break;
	case OP_WAIT_ALL:
		b->ret = knitk_pool_wait_all(b->pool, &b->gated, 1, KNITK_WAIT_FOREVER);
		break;
	case OP_WAIT_ANY:
		b->ret = knitk_pool_wait_any(b->pool, &b->gated, 1, KNITK_WAIT_FOREVER);
		break;
	default:
		b->ret = knitk_pool_shutdown(b->pool, KNITK_SHUTDOWN_DRAIN);
		break;
	}
	atomic_store(&b->stage, 2);
	return NULL;
}

/*
 * A thread blocked in a pool call that waits for a call held in its task
 * (T_GATE), signalled again and again (SIGUSR1 without SA_RESTART): the
 * call returns only once the held call has completed, with what it
 * promises (no -EINTR, no -EINPROGRESS before a deadline that never
 * comes); the held call completes with its result, not cancelled.
 */
static void signals_in_blocking_call(int op, int want)
{
	struct knitk_pool_opts o = { .nr_workers = 1, .arena_bytes = ARENA };
	struct sigaction sa = { .sa_handler = on_usr1 }, old;
	struct blocked b = { .op = op };
	unsigned long before, sends;
	struct gate g;
	pthread_t t;

	REQUIRE(gate_open(&g) == 0);
	g.arg.n = 3;
	sigemptyset(&sa.sa_mask);
	REQUIRE(sigaction(SIGUSR1, &sa, &old) == 0);
	REQUIRE(opts_pool(&o, &b.pool) == 0);
	REQUIRE(knitk_pool_submit(b.pool, T_GATE, &g.arg, sizeof(g.arg), NULL, &b.gated) == 0);
	REQUIRE(gate_wait(&g, 'r') == 0);
	REQUIRE(pthread_create(&t, NULL, blocked_main, &b) == 0);
	while (atomic_load(&b.stage) < 1)
		sched_yield();
	/*
	 * At least 20 handlers run in the thread while it is blocked.  TSan
	 * runs a handler only when the thread enters an intercepted call,
	 * which a thread parked in the library's futex wait does not: there
	 * the sends are bounded and the count is not asserted.
	 */
	before = atomic_load(&usr1_seen);
	for (sends = 0; sends < 1000000 && atomic_load(&usr1_seen) < before + 20 &&
	     atomic_load(&b.stage) < 2; sends++)
		if (syscall(SYS_tgkill, getpid(), atomic_load(&b.tid), SIGUSR1))
			break;
#ifndef __SANITIZE_THREAD__
	CHECK(atomic_load(&usr1_seen) >= before + 20);
#endif
	CHECK(atomic_load(&b.stage) < 2);
	CHECK_EQ(knitk_call_status(b.gated), -EINPROGRESS);
	REQUIRE(gate_release(&g) == 0);
	pthread_join(t, NULL);
	CHECK_EQ(b.ret, want);
	CHECK_EQ(knitk_call_wait(b.gated, 0), 3);
	knitk_call_release(b.gated);
	knitk_pool_destroy(b.pool);
	sigaction(SIGUSR1, &old, NULL);
	gate_close(&g);
}

static void signals_in_call_wait(void)
{
	signals_in_blocking_call(OP_WAIT, 3);
}

static void signals_in_wait_all(void)
{
	signals_in_blocking_call(OP_WAIT_ALL, 0);
}

static void signals_in_wait_any(void)
{
	signals_in_blocking_call(OP_WAIT_ANY, 0);
}

static void signals_in_drain(void)
{
	signals_in_blocking_call(OP_DRAIN, 0);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	if (argc > 2)
		setenv("TAP_ONLY", argv[2], 1);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		return 1;
	TEST(lane_boundaries_change_nothing);
	TEST(failed_reserve_keeps_lane);
	TEST(reserve_regrows_in_own_space);
	TEST(staged_lane_published_late_comes_last);
	TEST(consumer_killed_between_calls);
	TEST(consumer_killed_inside_ack);
	TEST(endpoint_boundaries);
	TEST(park_far_deadlines);
	TEST(steal_region_edges);
	TEST(attach_refuses_non_knots);
	TEST(pool_create_failures_leak_nothing);
	TEST(create_destroy_loop);
	TEST(pool_fds_are_cloexec);
	TEST(refused_submits_take_no_room_private);
	TEST(refused_submits_take_no_room_steal);
	TEST(pool_at_the_limits_private);
	TEST(pool_at_the_limits_steal);
	TEST(stopped_worker_is_not_dead);
	TEST(affinity_flips_threads_private);
	TEST(affinity_flips_threads_steal);
	TEST(affinity_flips_processes_steal);
	TEST(signals_in_call_wait);
	TEST(signals_in_wait_all);
	TEST(signals_in_wait_any);
	TEST(signals_in_drain);
	return tap_exit();
}
