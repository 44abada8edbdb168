// SPDX-License-Identifier: GPL-2.0
/*
 * Adversarial tests written from the public headers, the man pages and
 * docs/guarantees.md alone (futex backend).  Core: the library-owned
 * fields of a lane header that a caller fills with garbage, batch
 * publishes and acks of partly wrong masks, the batch decode's stride and
 * sizes at the sized-struct limits, a staged lane beside a send batch and
 * a hand-off, sizes that overflow, NULL everywhere, hand-offs to absent
 * claimants, a claimant that rescans early, wake stats at odd sizes.
 * Pool: deadlines near 2^64 and in the past, duplicate handles in the
 * waits, long batches to one worker, bad sized options in a batch, the
 * fds (RLIMIT_NOFILE), the address space (RLIMIT_AS) and allocations
 * (-Wl,--wrap of the allocators) running out under create, submit,
 * batch, event mode, a result's copy and a respawn; a call queued to a
 * worker whose death the pool has not seen; forks and exit() beside a
 * busy pool; aborts racing results and destroys racing waits in event
 * mode.  argv[1] (the runner's call count) is ignored: the counts are
 * small.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "pool_tasks.h"
#include "tap.h"

/* ------------------------------------------------------------- helpers */

struct fx {
	struct knitk_endpoint *k;
	struct knitk_producer *p;
	struct knitk_consumer *c;
};

static int fx_init(struct fx *f, uint32_t inline_bytes, uint64_t arena)
{
	struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = inline_bytes, .arena_bytes = arena,
	};
	int mb;

	memset(f, 0, sizeof(*f));
	if (knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &f->k))
		return -1;
	mb = knitk_endpoint_request_mailbox(f->k, 0, 0);
	if (mb < 0 || knitk_producer_create(f->k, (unsigned int)mb, &f->p) ||
	    knitk_consumer_create(f->k, (unsigned int)mb, &f->c))
		return -1;
	return 0;
}

static void fx_fini(struct fx *f)
{
	knitk_consumer_destroy(f->c);
	knitk_producer_destroy(f->p);
	knitk_endpoint_destroy(f->k);
}

/* Lanes pending on @f's mailbox (-1 on error). */
static int64_t fx_pending(struct fx *f)
{
	uint64_t pend;

	return knitk_lane_scan(f->c, &pend) < 0 ? -1 : (int64_t)pend;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;
}

static int new_pool(unsigned int kind, unsigned int dispatch,
		    unsigned int workers, unsigned int flags,
		    struct knitk_pool **pool)
{
	struct knitk_pool_opts o = {
		.size = sizeof(o), .kind = kind, .nr_workers = workers,
		.flags = flags, .knot_flags = KNITK_KNOT_FUTEX,
		.dispatch = dispatch, .nr_submitters = 1,
	};

	return knitk_pool_create(&o, &test_tasks, pool);
}

/* -------------------------------------------------------- core: lanes */

static const struct knitk_lane_header zh;

/* A header whose library fields hold garbage, for the sends to ignore. */
static void garbage_header(struct knitk_lane_header *h, uint64_t task_id)
{
	memset(h, 0xa5, sizeof(*h));
	h->function_id = 7;
	h->flags = 0x10;
	h->task_id = task_id;
	h->tag = 3;
	h->deadline_ns = 0;
	h->abort_id = 0;
	h->user = 99;
	h->kind = KNITK_PAYLOAD_ARENA;
	h->arena_slot = 5;
	h->length = 1ULL << 40;
	h->stamp = ~0ULL;
}

static void check_caller_fields(const struct knitk_msg *m, uint64_t task_id)
{
	CHECK_EQ(m->header.function_id, 7);
	CHECK_EQ(m->header.flags, 0x10);
	CHECK_EQ(m->header.task_id, task_id);
	CHECK_EQ(m->header.tag, 3);
	CHECK_EQ(m->header.user, 99);
}

/*
 * knitk_producer_send, _stage and _send_batch fill only the caller
 * fields of the headers they are given: kind, length, arena slot and
 * stamp are the library's, whatever the caller left in them, so the
 * consumer decodes each payload as it was sent (inline, arena or value).
 */
static void library_fields_are_the_librarys(void)
{
	struct knitk_lane_header hs[4];
	unsigned char big[800], small[16];
	struct knitk_lane_header z = { 0 };
	struct knitk_msg m[8];
	uint64_t pend, all;
	struct fx f;
	int lane, i;

	REQUIRE(fx_init(&f, 64, 8192) == 0);
	memset(big, 0x3c, sizeof(big));
	memset(small, 0x42, sizeof(small));
	for (i = 0; i < 8; i++)
		m[i].size = sizeof(m[i]);

	garbage_header(&hs[0], 1);
	CHECK(knitk_producer_send(f.p, &hs[0], small, sizeof(small)) >= 0);
	garbage_header(&hs[0], 2);
	CHECK(knitk_producer_send(f.p, &hs[0], big, sizeof(big)) >= 0);
	garbage_header(&hs[0], 3);
	hs[0].value = 0x1234;
	CHECK(knitk_producer_send(f.p, &hs[0], NULL, 0) >= 0);
	garbage_header(&hs[0], 4);
	lane = knitk_producer_stage(f.p, &hs[0], big, 100);
	CHECK(lane >= 0);
	if (lane >= 0)
		CHECK_EQ(knitk_lane_publish(f.p, (unsigned int)lane), 0);
	for (i = 0; i < 4; i++)
		garbage_header(&hs[i], 5 + (uint64_t)i);
	CHECK_EQ(knitk_producer_send_batch(f.p, hs, big, 200, 4), 4);

	REQUIRE(knitk_lane_scan(f.c, &pend) == 8);
	all = pend;
	REQUIRE(knitk_lane_decode_batch(f.c, &pend, m, 8, sizeof(m[0])) == 8);
	for (i = 0; i < 8; i++)
		check_caller_fields(&m[i], 1 + (uint64_t)i);
	CHECK_EQ(m[0].header.kind, KNITK_PAYLOAD_INLINE);
	CHECK_EQ(m[0].len, sizeof(small));
	CHECK_EQ(m[0].header.arena_slot, KNITK_ARENA_NO_SLOT);
	CHECK(m[0].data && !memcmp(m[0].data, small, sizeof(small)));
	CHECK_EQ(m[1].header.kind, KNITK_PAYLOAD_ARENA);
	CHECK_EQ(m[1].len, sizeof(big));
	CHECK(m[1].data && !memcmp(m[1].data, big, sizeof(big)));
	CHECK_EQ(m[2].header.kind, KNITK_PAYLOAD_VALUE);
	CHECK_EQ(m[2].header.value, 0x1234);
	CHECK(m[2].data == NULL);
	CHECK_EQ(m[2].header.arena_slot, KNITK_ARENA_NO_SLOT);
	CHECK_EQ(m[3].header.kind, KNITK_PAYLOAD_ARENA);
	CHECK_EQ(m[3].len, 100);
	for (i = 4; i < 8; i++) {
		CHECK_EQ(m[i].header.kind, KNITK_PAYLOAD_ARENA);
		CHECK_EQ(m[i].len, 200);
		CHECK(m[i].data && !memcmp(m[i].data, big + (i - 4) * 200, 200));
	}
	/* Stamps are the publish counts, in publish order. */
	for (i = 1; i < 8; i++)
		CHECK(m[i].header.stamp > m[i - 1].header.stamp);
	CHECK_EQ(knitk_lane_ack(f.c, all), 0);
	/* Every arena byte is free again: one message as big as the arena. */
	{
		static unsigned char whole[8192];
		uint64_t p2;

		CHECK(knitk_producer_send(f.p, &z, whole, sizeof(whole)) >= 0);
		CHECK_EQ(knitk_lane_scan(f.c, &p2), 1);
		CHECK_EQ(knitk_lane_ack(f.c, p2), 0);
	}
	fx_fini(&f);
}

/*
 * knitk_lane_publish_batch of a mask with an unclaimed lane, or a lane
 * already published, is refused and publishes nothing: the claimed lanes
 * of the mask stay claimed, unpublished, and can be published after.
 */
static void publish_batch_partly_wrong_mask(void)
{
	int a, b, c;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	a = knitk_lane_claim(f.p);
	b = knitk_lane_claim(f.p);
	REQUIRE(a >= 0 && b >= 0);
	knitk_lane_set_value(f.p, (unsigned int)a, 1);
	knitk_lane_set_value(f.p, (unsigned int)b, 2);
	/* Lane 40 was never claimed. */
	CHECK(knitk_lane_publish_batch(f.p, (1ULL << a) | (1ULL << 40)) < 0);
	CHECK_EQ(fx_pending(&f), 0);
	CHECK_EQ(knitk_lane_publish_batch(f.p, 1ULL << a), 0);
	CHECK_EQ(fx_pending(&f), (int64_t)(1ULL << a));
	/* a again (published), with b (claimed). */
	CHECK(knitk_lane_publish_batch(f.p, (1ULL << a) | (1ULL << b)) < 0);
	CHECK(knitk_lane_publish(f.p, (unsigned int)a) < 0);
	CHECK_EQ(fx_pending(&f), (int64_t)(1ULL << a));
	CHECK_EQ(knitk_lane_publish_batch(f.p, 1ULL << b), 0);
	CHECK_EQ(fx_pending(&f), (int64_t)((1ULL << a) | (1ULL << b)));
	/* A lane claimed after the batch still comes after it. */
	c = knitk_lane_claim(f.p);
	REQUIRE(c >= 0);
	CHECK(knitk_lane_publish_batch(f.p, 0) < 0 ||
	      fx_pending(&f) == (int64_t)((1ULL << a) | (1ULL << b)));
	CHECK_EQ(knitk_lane_release(f.p, (unsigned int)c), 0);
	CHECK_EQ(knitk_lane_ack(f.c, (1ULL << a) | (1ULL << b)), 0);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, NULL, 0, 64), 64);
	fx_fini(&f);
}

/*
 * knitk_lane_ack of a mask with a lane that is not pending is refused
 * and acknowledges nothing: the pending lanes stay pending (and their
 * arena bytes taken).
 */
static void ack_partly_wrong_mask(void)
{
	static unsigned char whole[4096];
	uint64_t pend;
	struct fx f;
	int lane;

	REQUIRE(fx_init(&f, 64, 4096) == 0);
	lane = knitk_producer_send(f.p, &zh, whole, 2048);
	REQUIRE(lane >= 0);
	REQUIRE(knitk_lane_scan(f.c, &pend) == 1);
	CHECK(knitk_lane_ack(f.c, pend | (1ULL << ((lane + 7) % 64))) < 0);
	CHECK_EQ(fx_pending(&f), (int64_t)pend);
	/* Its 2048 bytes are still taken: the whole arena does not fit. */
	CHECK_EQ(knitk_producer_send(f.p, &zh, whole, sizeof(whole)), -ENOSPC);
	CHECK_EQ(knitk_lane_ack(f.c, pend), 0);
	CHECK(knitk_lane_ack(f.c, pend) < 0);
	CHECK(knitk_producer_send(f.p, &zh, whole, sizeof(whole)) >= 0);
	fx_fini(&f);
}

/*
 * knitk_lane_decode and _decode_batch with sizes at the edges of the
 * sized-struct rule: a stride of KNITK_SIZED_MAX is legal (every element
 * written as the library's own struct, the size stored, nothing past
 * it), an odd one is -EINVAL; a single decode of a struct claiming
 * KNITK_SIZED_MAX writes only the library's bytes.
 */
static void decode_sizes_at_the_edges(void)
{
	static unsigned char buf[3 * KNITK_SIZED_MAX];
	struct knitk_msg *m;
	uint64_t pend, all, v[3] = { 77, 78, 79 };
	unsigned int i, j;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, v, 8, 3), 3);
	REQUIRE(knitk_lane_scan(f.c, &pend) == 3);
	all = pend;
	memset(buf, 0x5a, sizeof(buf));
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, (void *)buf, 3,
					 KNITK_MSG_SIZE_VER0 + 1), -EINVAL);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, (void *)buf, 3,
					 sizeof(struct knitk_msg) + 4), -EINVAL);
	CHECK_EQ(pend, all);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, (void *)buf, 2,
					 KNITK_SIZED_MAX), 2);
	for (i = 0; i < 2; i++) {
		m = (void *)(buf + i * KNITK_SIZED_MAX);
		CHECK_EQ(m->size, sizeof(*m));
		CHECK_EQ(m->len, 8);
		for (j = sizeof(*m); j < KNITK_SIZED_MAX; j++)
			if (buf[i * KNITK_SIZED_MAX + j] != 0x5a)
				break;
		CHECK_EQ(j, KNITK_SIZED_MAX);
	}
	/* The third with a single decode, claiming the largest size. */
	memset(buf, 0x5a, sizeof(buf));
	m = (void *)buf;
	m->size = KNITK_SIZED_MAX;
	i = (unsigned int)knitk_lane_next(f.c, &pend);
	CHECK_EQ(knitk_lane_decode(f.c, i, m), 0);
	CHECK_EQ(m->size, sizeof(*m));
	CHECK_EQ(m->lane, i);
	for (j = sizeof(*m); j < KNITK_SIZED_MAX; j++)
		if (buf[j] != 0x5a)
			break;
	CHECK_EQ(j, KNITK_SIZED_MAX);
	m->size = KNITK_SIZED_MAX + 8;
	CHECK_EQ(knitk_lane_decode(f.c, i, m), -E2BIG);
	m->size = KNITK_MSG_SIZE_VER0 - 8;
	CHECK_EQ(knitk_lane_decode(f.c, i, m), -EINVAL);
	CHECK_EQ(knitk_lane_ack(f.c, all), 0);
	fx_fini(&f);
}

/*
 * A lane staged and not published is the producer's: a send batch takes
 * the other 63 lanes around it (and no more), knitk_producer_reset_consumer
 * is -EBUSY while it is claimed, and publishing it afterwards puts it
 * last in consume order.
 */
static void staged_lane_beside_send_batch(void)
{
	struct knitk_lane_header h = { .task_id = 1000 };
	struct knitk_lane_header hs[64];
	struct knitk_msg m[64];
	uint64_t pend, all;
	int staged, i;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	staged = knitk_producer_stage(f.p, &h, NULL, 0);
	REQUIRE(staged >= 0);
	memset(hs, 0, sizeof(hs));
	for (i = 0; i < 64; i++)
		hs[i].task_id = (uint64_t)i;
	CHECK_EQ(knitk_producer_send_batch(f.p, hs, NULL, 0, 64), 63);
	CHECK_EQ(knitk_producer_send_batch(f.p, hs, NULL, 0, 1), -EAGAIN);
	CHECK_EQ(knitk_producer_reset_consumer(f.p), -EBUSY);
	CHECK_EQ(fx_pending(&f), (int64_t)~(1ULL << staged));
	CHECK_EQ(knitk_lane_publish(f.p, (unsigned int)staged), 0);
	REQUIRE(knitk_lane_scan(f.c, &pend) == 64);
	all = pend;
	for (i = 0; i < 64; i++)
		m[i].size = sizeof(m[i]);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 64, sizeof(m[0])), 64);
	for (i = 0; i < 63; i++)
		CHECK_EQ(m[i].header.task_id, (uint64_t)i);
	CHECK_EQ(m[63].header.task_id, 1000);
	CHECK_EQ(m[63].lane, staged);
	CHECK_EQ(knitk_lane_ack(f.c, all), 0);
	fx_fini(&f);
}

/*
 * A send batch whose total size overflows size_t (@len * @n) is
 * -EMSGSIZE (each message can never fit), and reads nothing of @data.
 */
static void send_batch_sizes_that_overflow(void)
{
	unsigned char x[8] = { 0 };
	struct fx f;

	REQUIRE(fx_init(&f, 64, 4096) == 0);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, x, SIZE_MAX / 2 + 1, 2),
		 -EMSGSIZE);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, x, SIZE_MAX, 64), -EMSGSIZE);
	CHECK_EQ(knitk_producer_send(f.p, &zh, x, SIZE_MAX), -EMSGSIZE);
	CHECK_EQ(knitk_producer_stage(f.p, &zh, x, SIZE_MAX - 63), -EMSGSIZE);
	CHECK_EQ(fx_pending(&f), 0);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, NULL, 0, 64), 64);
	fx_fini(&f);
}



/*
 * A lane acknowledged since the scan that returned it is no longer
 * pending: knitk_lane_decode and knitk_lane_decode_batch refuse it
 * (-EPERM, nothing taken) rather than read the retired lane.
 */
static void decode_of_a_lane_acked_since(void)
{
	struct knitk_msg m[2] = { { .size = sizeof(m[0]) }, { .size = sizeof(m[0]) } };
	uint64_t v[2] = { 5, 6 }, pend, keep;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, v, 8, 2), 2);
	REQUIRE(knitk_lane_scan(f.c, &pend) == 2);
	CHECK_EQ(knitk_lane_ack(f.c, 1), 0);
	keep = pend;
	CHECK_EQ(knitk_lane_decode(f.c, 0, &m[0]), -EPERM);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 2, sizeof(m[0])), -EPERM);
	CHECK_EQ(pend, keep);
	pend = 2;
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 2, sizeof(m[0])), 1);
	CHECK_EQ(m[0].lane, 1);
	CHECK_EQ(knitk_lane_ack(f.c, 2), 0);
	fx_fini(&f);
}


/*
 * Lane headers another process wrote wrong (the consumer reads them from
 * shared memory): an arena slot past the 64 slots, an arena offset whose
 * sum with the length wraps past 2^64, an inline length of 2^64 - 1.
 * Each decodes as -EBADMSG, never a read out of the mapping, and the
 * lanes' acknowledgement frees no slot of the 64 (a slot number in range
 * is taken at its word: only the producer writes lane headers), so the
 * pending message's bytes survive the arena filling up again.
 */
static void wild_headers_touch_nothing(void)
{
	static unsigned char a[2048], b[2048];
	struct knitk_msg m = { .size = sizeof(m) };
	struct knitk_lane_header *hp;
	uint64_t pend, bad = 0;
	int keep, lane, i;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 4096) == 0);
	memset(a, 0x11, sizeof(a));
	memset(b, 0x22, sizeof(b));
	keep = knitk_producer_send(f.p, &zh, a, sizeof(a));
	REQUIRE(keep >= 0);
	for (i = 0; i < 5; i++) {
		lane = knitk_lane_claim(f.p);
		REQUIRE(lane >= 0);
		REQUIRE(knitk_lane_header(f.p, (unsigned int)lane, &hp) == 0);
		switch (i) {
		case 0:		/* a slot past the 64 */
			hp->kind = KNITK_PAYLOAD_ARENA;
			hp->arena_slot = KNITK_ARENA_SLOTS;
			hp->value = 0;
			hp->length = 64;
			break;
		case 1:
			hp->kind = KNITK_PAYLOAD_ARENA;
			hp->arena_slot = 0x7fffffff;
			hp->value = 0;
			hp->length = 64;
			break;
		case 2:		/* offset + length wraps */
			hp->kind = KNITK_PAYLOAD_ARENA;
			hp->arena_slot = KNITK_ARENA_NO_SLOT;
			hp->value = ~0ULL - 63;
			hp->length = 128;
			break;
		case 3:
			hp->kind = KNITK_PAYLOAD_INLINE;
			hp->arena_slot = KNITK_ARENA_NO_SLOT;
			hp->length = ~0ULL;
			break;
		default:	/* a length past the arena from offset 0 */
			hp->kind = KNITK_PAYLOAD_ARENA;
			hp->arena_slot = KNITK_ARENA_SLOTS + 5;
			hp->value = 0;
			hp->length = ~0ULL;
			break;
		}
		CHECK_EQ(knitk_lane_publish(f.p, (unsigned int)lane), 0);
		bad |= 1ULL << lane;
	}
	REQUIRE(knitk_lane_scan(f.c, &pend) == 6);
	for (i = 0; i < 64; i++)
		if (bad & (1ULL << i))
			CHECK_EQ(knitk_lane_decode(f.c, (unsigned int)i, &m), -EBADMSG);
	CHECK_EQ(knitk_lane_ack(f.c, bad), 0);
	/* The kept message's 2048 bytes are still taken, and still its own. */
	CHECK(knitk_producer_send(f.p, &zh, b, sizeof(b)) >= 0);
	CHECK_EQ(knitk_producer_send(f.p, &zh, b, sizeof(b)), -ENOSPC);
	CHECK_EQ(knitk_lane_decode(f.c, (unsigned int)keep, &m), 0);
	CHECK(m.len == sizeof(a) && !memcmp(m.data, a, sizeof(a)));
	fx_fini(&f);
}

/* ------------------------------------------------ core: NULL everywhere */

/*
 * Run @expr in a child: 0 when it returned a negative errno (or, for a
 * void call, returned at all), 1 when it returned something else, 2 when
 * the child died (a signal: the library dereferenced the NULL).
 */
#define IN_CHILD(expr) ({						\
	pid_t _pid = fork();						\
	int _st = 0;							\
	if (!_pid) {							\
		alarm(10);						\
		_exit((expr) < 0 ? 0 : 1);				\
	}								\
	waitpid(_pid, &_st, 0);						\
	WIFEXITED(_st) ? WEXITSTATUS(_st) : 2;				\
})

#define NULL_OK(expr) do {						\
	int _r = IN_CHILD(expr);					\
	if (_r)								\
		printf("# %s: %s\n", #expr,				\
		       _r == 2 ? "crashed" : "did not fail");		\
	CHECK_EQ(_r, 0);						\
} while (0)

#define VOID_OK(stmt) NULL_OK((stmt, -1))

/*
 * Every core call given NULL where it takes an object or an out-pointer
 * fails with a negative errno ("Every function returns ... a negative
 * errno value on failure"); the destroys take NULL as free() does.
 */
static void null_everywhere_core(void)
{
	struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64, .arena_bytes = 4096,
	};
	struct knitk_lane_header *hp, h = { 0 };
	struct knitk_wake_stats ws = { .size = sizeof(ws) };
	struct knitk_doorbell_stats ds;
	struct knitk_producer *p = NULL;
	struct knitk_consumer *c = NULL;
	struct knitk_endpoint *ep;
	struct knitk_layout layout;
	const struct knitk_control *ctl;
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pend, lanes[2];
	uint32_t seq;
	void *base, *buf;
	int lane;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &ep) == 0);
	REQUIRE(knitk_producer_create(ep, 0, &p) == 0);
	REQUIRE(knitk_consumer_create(ep, 0, &c) == 0);
	lane = knitk_lane_claim(p);
	REQUIRE(lane >= 0);

	NULL_OK(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, NULL));
	NULL_OK(knitk_endpoint_attach(knitk_endpoint_fd(ep), 0, NULL));
	NULL_OK(knitk_endpoint_fd(NULL));
	NULL_OK(knitk_endpoint_backend(NULL));
	NULL_OK(knitk_endpoint_layout(NULL, &layout, NULL));
	NULL_OK(knitk_endpoint_layout(ep, NULL, NULL));
	NULL_OK(knitk_endpoint_control(NULL, &ctl));
	NULL_OK(knitk_endpoint_control(ep, NULL));
	NULL_OK(knitk_endpoint_base(NULL, &base));
	NULL_OK(knitk_endpoint_base(ep, NULL));
	NULL_OK(knitk_endpoint_doorbell(NULL));
	NULL_OK(knitk_endpoint_mark_dead(NULL, 0));
	NULL_OK(knitk_endpoint_request_mailbox(NULL, 0, 0));
	NULL_OK(knitk_endpoint_return_mailbox(NULL, 0));
	NULL_OK(knitk_mailbox_pending(NULL, 0, &pend));
	NULL_OK(knitk_mailbox_pending(ep, 0, NULL));
	NULL_OK(knitk_endpoint_wake_stats(NULL, &ws));
	NULL_OK(knitk_endpoint_wake_stats(ep, NULL));
	NULL_OK(knitk_endpoint_doorbell_stats(NULL, 0, &ds, sizeof(ds)));
	NULL_OK(knitk_endpoint_doorbell_stats(ep, 0, NULL, sizeof(ds)));
	NULL_OK(knitk_producer_create(NULL, 0, &p));
	NULL_OK(knitk_producer_create(ep, 0, NULL));
	NULL_OK(knitk_consumer_create(NULL, 0, &c));
	NULL_OK(knitk_consumer_create(ep, 0, NULL));
	NULL_OK(knitk_steal_consumer_create(NULL, 0, 0, &c));
	NULL_OK(knitk_steal_consumer_create(ep, 0, 0, NULL));
	NULL_OK(knitk_lane_claim(NULL));
	NULL_OK(knitk_lane_header(NULL, (unsigned int)lane, &hp));
	NULL_OK(knitk_lane_header(p, (unsigned int)lane, NULL));
	NULL_OK(knitk_lane_reserve(NULL, (unsigned int)lane, 8, &buf));
	NULL_OK(knitk_lane_reserve(p, (unsigned int)lane, 8, NULL));
	NULL_OK(knitk_lane_set_value(NULL, (unsigned int)lane, 1));
	NULL_OK(knitk_lane_release(NULL, (unsigned int)lane));
	NULL_OK(knitk_lane_publish(NULL, (unsigned int)lane));
	NULL_OK(knitk_lane_publish_batch(NULL, 1ULL << lane));
	NULL_OK(knitk_producer_send(NULL, &h, NULL, 0));
	NULL_OK(knitk_producer_send(p, NULL, "x", 1));
	NULL_OK(knitk_producer_send(p, &h, NULL, 4));
	NULL_OK(knitk_producer_stage(p, &h, NULL, 4));
	NULL_OK(knitk_producer_track_claims(NULL));
	NULL_OK(knitk_producer_claims(NULL, lanes, 1));
	NULL_OK(knitk_producer_reset_claimant(NULL, 0));
	NULL_OK(knitk_producer_notify(NULL));
	NULL_OK(knitk_producer_notify_park(NULL, 0));
	NULL_OK(knitk_lane_scan(NULL, &pend));
	NULL_OK(knitk_lane_scan(c, NULL));
	NULL_OK(knitk_lane_next(NULL, &pend));
	NULL_OK(knitk_lane_next(c, NULL));
	NULL_OK(knitk_lane_decode(NULL, 0, &m));
	NULL_OK(knitk_lane_decode(c, 0, NULL));
	NULL_OK(knitk_lane_ack(NULL, 1));
	NULL_OK(knitk_doorbell_prepare(NULL, &seq));
	NULL_OK(knitk_doorbell_prepare(ep, NULL));
	NULL_OK(knitk_doorbell_wait(NULL, 0, 0));
	NULL_OK(knitk_doorbell_cancel(NULL));
	NULL_OK(knitk_doorbell_park(NULL, 0));
	NULL_OK(knitk_doorbell_ring_park(NULL, 1, 0));
	NULL_OK(knitk_steal_region_lanes(0, 0));
	VOID_OK(knitk_endpoint_destroy(NULL));
	VOID_OK(knitk_producer_destroy(NULL));
	VOID_OK(knitk_consumer_destroy(NULL));

	CHECK_EQ(knitk_lane_release(p, (unsigned int)lane), 0);
	knitk_consumer_destroy(c);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(ep);
}


/* ------------------------------------------------ core: hand-offs */

struct srig {
	struct knitk_endpoint *host, *w[2];
	struct knitk_producer *p;
	struct knitk_consumer *c[2];
};

/* A stealing knot of two workers, of which the first @joined have claimants. */
static int srig_init(struct srig *r, unsigned int joined)
{
	struct knitk_geometry g = {
		.flags = KNITK_GEOM_STEAL, .nr_workers = 2, .nr_submitters = 1,
		.lanes = KNITK_LANES, .inline_bytes = 64, .arena_bytes = 4096,
	};
	unsigned int i;
	int mb;

	memset(r, 0, sizeof(*r));
	if (knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &r->host) ||
	    knitk_endpoint_join(r->host, KNITK_ROLE_HOST, 0) < 1)
		return -1;
	mb = knitk_endpoint_request_mailbox(r->host, 0, 0);
	if (mb < 0 || knitk_producer_create(r->host, (unsigned int)mb, &r->p))
		return -1;
	for (i = 0; i < joined; i++)
		if (knitk_endpoint_attach(knitk_endpoint_fd(r->host), 0, &r->w[i]) ||
		    knitk_endpoint_join(r->w[i], KNITK_ROLE_WORKER, i) < 1 ||
		    knitk_steal_consumer_create(r->w[i], (unsigned int)mb, 0, &r->c[i]))
			return -1;
	return 0;
}

static void srig_fini(struct srig *r)
{
	unsigned int i;

	for (i = 0; i < 2; i++) {
		knitk_consumer_destroy(r->c[i]);
		knitk_endpoint_destroy(r->w[i]);
	}
	knitk_producer_destroy(r->p);
	knitk_endpoint_destroy(r->host);
}

/* Claim on @c, ack; the number of lanes it took. */
static int srig_take(struct knitk_consumer *c)
{
	uint64_t pend;
	int n = knitk_lane_scan(c, &pend);

	if (n > 0 && knitk_lane_ack(c, pend))
		return -1;
	return n;
}

/*
 * knitk_producer_hand_off for a claimant that is not live (never joined,
 * or its endpoint destroyed after the hand-off) strands nothing: the live
 * claimant takes every published lane.
 */
static void hand_off_to_absent_claimant(void)
{
	struct srig r;
	int n;

	REQUIRE(srig_init(&r, 1) == 0);
	CHECK_EQ(knitk_producer_send_batch(r.p, NULL, NULL, 0, 4), 4);
	n = knitk_producer_hand_off(r.p, 1, 0);
	CHECK(n >= 0);
	CHECK_EQ(srig_take(r.c[0]) + srig_take(r.c[0]), 4);
	srig_fini(&r);

	REQUIRE(srig_init(&r, 2) == 0);
	CHECK_EQ(knitk_producer_send_batch(r.p, NULL, NULL, 0, 4), 4);
	n = knitk_producer_hand_off(r.p, 1, 0);
	CHECK(n > 0);
	knitk_consumer_destroy(r.c[1]);
	knitk_endpoint_destroy(r.w[1]);
	r.c[1] = NULL;
	r.w[1] = NULL;
	CHECK_EQ(srig_take(r.c[0]) + srig_take(r.c[0]), 4);
	srig_fini(&r);
}


/*
 * A claimant that scans again before it has taken every lane of its
 * last claim loses none of them: lanes it neither decoded nor
 * acknowledged are still its own, and every message is decoded once.
 */
static void claimant_rescans_before_done(void)
{
	struct knitk_lane_header hs[8];
	struct knitk_msg m = { .size = sizeof(m) };
	unsigned int seen = 0, rounds = 0, i;
	uint64_t pend;
	struct srig r;
	int lane, n;

	REQUIRE(srig_init(&r, 1) == 0);
	memset(hs, 0, sizeof(hs));
	for (i = 0; i < 8; i++)
		hs[i].task_id = i;
	CHECK_EQ(knitk_producer_send_batch(r.p, hs, NULL, 0, 8), 8);
	while (seen != 0xff && rounds++ < 40) {
		n = knitk_lane_scan(r.c[0], &pend);
		REQUIRE(n >= 0);
		if (!n)
			continue;
		/* Take one lane of what the scan gave, then scan again. */
		lane = knitk_lane_next(r.c[0], &pend);
		REQUIRE(lane >= 0);
		CHECK_EQ(knitk_lane_decode(r.c[0], (unsigned int)lane, &m), 0);
		CHECK(m.header.task_id < 8);
		if (m.header.task_id < 8) {
			CHECK(!(seen & (1U << m.header.task_id)));
			seen |= 1U << m.header.task_id;
		}
		CHECK_EQ(knitk_lane_ack(r.c[0], 1ULL << lane), 0);
	}
	CHECK_EQ(seen, 0xff);
	CHECK_EQ(knitk_lane_scan(r.c[0], &pend), 0);
	srig_fini(&r);
}


/*
 * knitk_endpoint_wake_stats at sizes between and past its versions:
 * min(size, library's) bytes written and that count stored (the
 * library's own size at least ours), nothing past the count; below the first version -EINVAL,
 * above KNITK_SIZED_MAX -E2BIG, with nothing written.
 */
static void wake_stats_odd_sizes(void)
{
	static const uint32_t sizes[] = {
		KNITK_WAKE_STATS_SIZE_VER0, KNITK_WAKE_STATS_SIZE_VER0 + 1,
		KNITK_WAKE_STATS_SIZE_VER0 + 4, KNITK_WAKE_STATS_SIZE_VER1 - 1,
		KNITK_WAKE_STATS_SIZE_VER1, KNITK_WAKE_STATS_SIZE_VER1 + 3,
		KNITK_SIZED_MAX,
	};
	static unsigned char buf[KNITK_SIZED_MAX + 16] __attribute__((aligned(8)));
	struct knitk_endpoint *ep;
	struct fx f;
	unsigned int i, j;
	uint32_t sz, want;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	ep = f.k;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		memset(buf, 0xee, sizeof(buf));
		memcpy(buf, &sizes[i], 4);
		CHECK_EQ(knitk_endpoint_wake_stats(ep, (void *)buf), 0);
		memcpy(&sz, buf, 4);
		/* Past our struct, a later library (a test build) knows more. */
		want = sizes[i] < sizeof(struct knitk_wake_stats) ? sizes[i] : sz;
		CHECK(sz >= KNITK_WAKE_STATS_SIZE_VER1 || sz == sizes[i]);
		CHECK(sz <= sizes[i]);
		CHECK_EQ(sz, want);
		/* @reserved is written as zero. */
		CHECK(buf[4] == 0 && buf[5] == 0 && buf[6] == 0 && buf[7] == 0);
		for (j = want; j < sizeof(buf); j++)
			if (buf[j] != 0xee)
				break;
		CHECK_EQ(j, sizeof(buf));
	}
	for (i = 0; i < 3; i++) {
		static const uint32_t bad[] = {
			0, KNITK_WAKE_STATS_SIZE_VER0 - 1, KNITK_SIZED_MAX + 1,
		};

		memset(buf, 0xee, sizeof(buf));
		memcpy(buf, &bad[i], 4);
		CHECK_EQ(knitk_endpoint_wake_stats(ep, (void *)buf),
			 i < 2 ? -EINVAL : -E2BIG);
		memcpy(&sz, buf, 4);
		CHECK_EQ(sz, bad[i]);
		for (j = 4; j < sizeof(buf); j++)
			if (buf[j] != 0xee)
				break;
		CHECK_EQ(j, sizeof(buf));
	}
	fx_fini(&f);
}

/*
 * A lane staged on a stealing mailbox (claimed, not published) is not
 * work: knitk_producer_hand_off reserves nothing for it and no claimant
 * takes it; once published it is taken, after the lanes sent before it.
 */
static void staged_lane_is_not_handed_off(void)
{
	struct knitk_lane_header h = { .task_id = 77 };
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pend;
	struct srig r;
	int lane;

	REQUIRE(srig_init(&r, 2) == 0);
	lane = knitk_producer_stage(r.p, &h, NULL, 0);
	REQUIRE(lane >= 0);
	CHECK_EQ(knitk_producer_hand_off(r.p, 1, 0), 0);
	CHECK_EQ(knitk_lane_scan(r.c[0], &pend), 0);
	CHECK_EQ(knitk_lane_scan(r.c[1], &pend), 0);
	CHECK_EQ(knitk_lane_publish(r.p, (unsigned int)lane), 0);
	CHECK(knitk_producer_hand_off(r.p, 1, 0) >= 0);
	CHECK_EQ(knitk_lane_scan(r.c[1], &pend), 1);
	CHECK_EQ(knitk_lane_next(r.c[1], &pend), lane);
	CHECK_EQ(knitk_lane_decode(r.c[1], (unsigned int)lane, &m), 0);
	CHECK_EQ(m.header.task_id, 77);
	CHECK_EQ(knitk_lane_ack(r.c[1], 1ULL << lane), 0);
	srig_fini(&r);
}

/* ------------------------------------------------ pool: event mode */

/*
 * In event mode a handle released before it is reaped is never returned
 * by knitk_pool_reap: neither one released running (aborted) nor one
 * released after it completed; the others are reaped once each.
 */
static void released_handles_never_reaped(void)
{
	struct knitk_call *c[4], *got[8];
	struct knitk_pool *pool;
	uint32_t ms = 50;
	uint64_t x = 9;
	int n, total = 0, i;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 2,
			 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c[0]) == 0);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[1]) == 0);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[2]) == 0);
	knitk_call_release(c[0]);
	/* c[1] completes, then goes unreaped: wait for it through another. */
	while (knitk_call_status(c[1]) == -EINPROGRESS ||
	       knitk_call_status(c[2]) == -EINPROGRESS) {
		n = knitk_pool_reap(pool, got, 8);
		REQUIRE(n >= 0);
		for (i = 0; i < n; i++) {
			CHECK(got[i] == c[1] || got[i] == c[2]);
			total++;
		}
		if (!n)
			sched_yield();
	}
	if (!total) {
		knitk_call_release(c[1]);
		c[1] = NULL;
	}
	usleep(100000);		/* the aborted sleep's late result */
	n = knitk_pool_reap(pool, got, 8);
	for (i = 0; i < n; i++) {
		CHECK(got[i] != c[0]);
		CHECK(c[1] || got[i] == c[2]);
	}
	total += n;
	CHECK_EQ(total, c[1] ? 2 : 1);
	if (c[1])
		knitk_call_release(c[1]);
	knitk_call_release(c[2]);
	knitk_pool_destroy(pool);
}


/*
 * An input struct whose size ends inside a field is read as
 * zero-extended: opts of 73 bytes keep only the low byte of @dispatch
 * (0x101 reads as 1, stealing), so the pool steals (pinning refused).
 */
static void opts_size_inside_a_field(void)
{
	static unsigned char raw[sizeof(struct knitk_pool_opts)];
	struct knitk_pool_opts *o = (void *)raw;
	struct knitk_call_opts pin = { .size = sizeof(pin), .flags = KNITK_CALL_WORKER };
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint64_t x = 1;

	memset(raw, 0, sizeof(raw));
	o->nr_workers = 2;
	o->knot_flags = KNITK_KNOT_FUTEX;
	o->dispatch = 0x101;
	o->size = (uint32_t)offsetof(struct knitk_pool_opts, dispatch) + 1;
	REQUIRE(knitk_pool_create(o, &test_tasks, &pool) == 0);
	CHECK_EQ(knitk_pool_submit(pool, T_MIX, &x, 8, &pin, &c), -EINVAL);
	CHECK_EQ(mix_calls_good(pool, 3, NULL, 1, 1), 3);
	knitk_pool_destroy(pool);
	o->size = sizeof(*o);
	CHECK_EQ(knitk_pool_create(o, &test_tasks, &pool), -EINVAL);
}

struct aborter {
	struct knitk_call **calls;
	unsigned int nr;
	int *ret;
	_Atomic int go;
};

static void *aborter_fn(void *arg)
{
	struct aborter *a = arg;
	unsigned int i;

	while (!atomic_load(&a->go))
		sched_yield();
	for (i = 0; i < a->nr; i += 2) {
		a->ret[i] = knitk_call_abort(a->calls[i]);
		if (i % 8 == 0)
			sched_yield();
	}
	return NULL;
}

/*
 * Aborts racing completions, in event mode: an abort that returned 0
 * left -ECANCELED, one that returned -EALREADY the call's result; every
 * call is reaped exactly once either way.
 */
static void aborts_race_results_in_event_mode(unsigned int dispatch)
{
	enum { N = 60 };	/* below what one submitter has in flight */
	static struct knitk_call *calls[N], *got[64];
	static int ret[N];
	static unsigned char seen[N];
	struct aborter a = { .calls = calls, .nr = N, .ret = ret };
	struct knitk_pool *pool;
	unsigned int i, reaped = 0, sent = 0;
	static uint64_t x[N];
	pthread_t th;
	int n, k;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 2, 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < N; i++)
		ret[i] = 1;
	/* Submit all first, then let the aborts loose. */
	while (sent < N) {
		x[sent] = sent;
		k = knitk_pool_submit(pool, T_MIX, &x[sent], 8, NULL, &calls[sent]);
		REQUIRE(k == 0);
		sent++;
	}
	REQUIRE(pthread_create(&th, NULL, aborter_fn, &a) == 0);
	atomic_store(&a.go, 1);
	while (reaped < N) {
		n = knitk_pool_reap(pool, got, 64);
		REQUIRE(n >= 0);
		for (k = 0; k < n; k++) {
			for (i = 0; i < N && calls[i] != got[k]; i++)
				;
			REQUIRE(i < N);
			CHECK_EQ(seen[i], 0);
			seen[i]++;
		}
		reaped += (unsigned int)n;
		if (!n)
			sched_yield();
	}
	pthread_join(th, NULL);
	for (i = 0; i < N; i++) {
		if (ret[i] == 0)
			CHECK_EQ(knitk_call_status(calls[i]), -ECANCELED);
		else if (ret[i] == -EALREADY || ret[i] == 1)
			CHECK(knitk_call_status(calls[i]) == 0 &&
			      mix_result_ok(calls[i], x[i]));
		else
			CHECK_EQ(ret[i], 0);
		knitk_call_release(calls[i]);
	}
	CHECK_EQ(knitk_pool_reap(pool, got, 64), 0);
	knitk_pool_destroy(pool);
}

static void aborts_race_results_in_event_mode_private(void)
{
	aborts_race_results_in_event_mode(KNITK_POOL_DISPATCH_PRIVATE);
}

static void aborts_race_results_in_event_mode_steal(void)
{
	aborts_race_results_in_event_mode(KNITK_POOL_DISPATCH_STEAL);
}

struct multi {
	struct knitk_pool *pool;
	struct knitk_call **calls;
	unsigned int nr;
	int ret;
};

static void *multi_fn(void *arg)
{
	struct multi *m = arg;

	m->ret = knitk_pool_wait_all(m->pool, m->calls, m->nr, KNITK_WAIT_FOREVER);
	return NULL;
}

/* Four threads waiting for the same 64 calls all return, with them done. */
static void many_threads_wait_the_same_calls(void)
{
	struct knitk_call *calls[64];
	struct multi m[4];
	pthread_t th[4];
	struct knitk_pool *pool;
	uint64_t x[64];
	unsigned int i;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 2,
			 0, &pool) == 0);
	for (i = 0; i < 64; i++) {
		x[i] = i;
		REQUIRE(knitk_pool_submit(pool, T_MIX, &x[i], 8, NULL, &calls[i]) == 0);
	}
	for (i = 0; i < 4; i++) {
		m[i] = (struct multi){ .pool = pool, .calls = calls, .nr = 64 };
		REQUIRE(pthread_create(&th[i], NULL, multi_fn, &m[i]) == 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(m[i].ret, 0);
	}
	for (i = 0; i < 64; i++) {
		CHECK(mix_result_ok(calls[i], x[i]));
		knitk_call_release(calls[i]);
	}
	knitk_pool_destroy(pool);
}


/*
 * knitk_pool_reap with @max 0 collects nothing, whatever is queued, and
 * takes nothing from the queue: the call aborted (queued without firing
 * the fd) is still there for the next reap, once.
 */
static void reap_of_zero_takes_nothing(void)
{
	struct knitk_call *c, *got[2];
	struct knitk_pool *pool;
	uint32_t ms = 60000;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	CHECK_EQ(knitk_pool_reap(pool, NULL, 0), 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c) == 0);
	CHECK_EQ(knitk_call_abort(c), 0);
	CHECK_EQ(knitk_pool_reap(pool, NULL, 0), 0);
	CHECK_EQ(knitk_pool_reap(pool, got, 0), 0);
	CHECK_EQ(knitk_pool_reap(pool, got, 2), 1);
	CHECK(got[0] == c);
	CHECK_EQ(knitk_pool_reap(pool, got, 2), 0);
	knitk_call_release(c);
	knitk_pool_destroy(pool);
}

struct ev_racer {
	struct knitk_pool *pool;
	_Atomic int *go;
	int fd;
};

static void *ev_racer_fn(void *arg)
{
	struct ev_racer *r = arg;

	while (!atomic_load(r->go))
		;
	r->fd = knitk_pool_event_fd(r->pool);
	return NULL;
}

/*
 * Eight threads switching a fresh pool to event mode at once all get
 * "the same fd on every call", and the pool opened one eventfd, not
 * one per thread.
 */
static void event_fd_switch_from_many_threads(void)
{
	struct ev_racer r[8];
	pthread_t th[8];
	struct knitk_pool *pool;
	_Atomic int go;
	unsigned int i, round;
	int fds;

	for (round = 0; round < 10; round++) {
		REQUIRE(new_pool(KNITK_WORKER_THREADS, round & 1 ? KNITK_POOL_DISPATCH_STEAL :
				 KNITK_POOL_DISPATCH_PRIVATE, 1, 0, &pool) == 0);
		fds = open_fds();
		atomic_store(&go, 0);
		for (i = 0; i < 8; i++) {
			r[i] = (struct ev_racer){ .pool = pool, .go = &go, .fd = -1 };
			REQUIRE(pthread_create(&th[i], NULL, ev_racer_fn, &r[i]) == 0);
		}
		atomic_store(&go, 1);
		for (i = 0; i < 8; i++)
			pthread_join(th[i], NULL);
		CHECK(r[0].fd >= 0);
		for (i = 1; i < 8; i++)
			CHECK_EQ(r[i].fd, r[0].fd);
		CHECK_EQ(open_fds(), fds + 1);
		knitk_pool_destroy(pool);
	}
}

/* ----------------------------------- pool: the fds of a create run out */

static int nr_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/*
 * knitk_pool_create under every RLIMIT_NOFILE from the fds open now
 * upwards: each failure is -EMFILE and leaves the fds and threads as they
 * were (no worker left running), and some limit lets it through.
 */
static void create_at_each_fd_limit(unsigned int kind)
{
	struct rlimit old, r;
	int fds = open_fds(), threads = nr_threads(), k, ret = -1;

	getrlimit(RLIMIT_NOFILE, &old);
	for (k = 0; k < 40 && ret; k++) {
		struct knitk_pool *pool;

		r = old;
		r.rlim_cur = (rlim_t)(fds + k);
		setrlimit(RLIMIT_NOFILE, &r);
		ret = new_pool(kind, KNITK_POOL_DISPATCH_PRIVATE, 2, 0, &pool);
		setrlimit(RLIMIT_NOFILE, &old);
		if (!ret) {
			CHECK_EQ(mix_calls_good(pool, 4, NULL, 1, 1), 4);
			knitk_pool_destroy(pool);
		} else {
			CHECK_EQ(ret, -EMFILE);
		}
		CHECK_EQ(open_fds(), fds);
		CHECK_EQ(nr_threads(), threads);
		CHECK_EQ(waitpid(-1, NULL, WNOHANG), -1);
	}
	printf("# through with %d fds free\n", k - 1);
	CHECK_EQ(ret, 0);
}

static void create_at_each_fd_limit_threads(void)
{
	create_at_each_fd_limit(KNITK_WORKER_THREADS);
}

static void create_at_each_fd_limit_processes(void)
{
	create_at_each_fd_limit(KNITK_WORKER_PROCESSES);
}

/*
 * With KNITK_POOL_RESPAWN, a worker that dies while the process may open
 * no fd at all (RLIMIT_NOFILE below the fds open) cannot be replaced:
 * "-EPIPE only if the restart fails", so the submits return -EPIPE, never
 * wait for a successor that is not coming; the pool then destroys
 * cleanly.
 */
static void respawn_fails_without_fds(void)
{
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c;
	struct rlimit old, r;
	uint64_t x = 3;
	int ret;

	REQUIRE(new_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 KNITK_POOL_RESPAWN, &pool) == 0);
	REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0 && wi.pid > 0);
	getrlimit(RLIMIT_NOFILE, &old);
	r = old;
	r.rlim_cur = 3;
	setrlimit(RLIMIT_NOFILE, &r);
	kill(wi.pid, SIGKILL);
	ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c);
	if (!ret) {
		/* Dispatched before the pool saw the death. */
		CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -EOWNERDEAD);
		knitk_call_release(c);
		ret = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c);
	}
	setrlimit(RLIMIT_NOFILE, &old);
	CHECK_EQ(ret, -EPIPE);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 1);
	CHECK_EQ(st.respawns, 0);
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	knitk_pool_destroy(pool);
	CHECK_EQ(waitpid(-1, NULL, WNOHANG), -1);
}

/*
 * The same with two workers: a call pinned to the dead one while its
 * restart fails waits no longer than the failure, then -EPIPE; the other
 * worker serves every unpinned call.
 */
static void pinned_while_respawn_fails(void)
{
	struct knitk_call_opts pin = { .size = sizeof(pin),
				       .flags = KNITK_CALL_WORKER, .worker = 0 };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	struct knitk_call *c;
	struct rlimit old, r;
	uint64_t x = 8;
	int ret;

	REQUIRE(new_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE, 2,
			 KNITK_POOL_RESPAWN, &pool) == 0);
	REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0 && wi.pid > 0);
	getrlimit(RLIMIT_NOFILE, &old);
	r = old;
	r.rlim_cur = 3;
	setrlimit(RLIMIT_NOFILE, &r);
	kill(wi.pid, SIGKILL);
	while (!knitk_pool_worker_info(pool, 0, &wi) && wi.alive)
		sched_yield();
	ret = knitk_pool_submit(pool, T_MIX, &x, 8, &pin, &c);
	setrlimit(RLIMIT_NOFILE, &old);
	CHECK_EQ(ret, -EPIPE);
	if (!ret) {
		printf("# pinned call: %d\n", knitk_call_wait(c, KNITK_WAIT_FOREVER));
		knitk_call_release(c);
	}
	CHECK_EQ(mix_calls_good(pool, 10, NULL, 1, 1), 10);
	knitk_pool_destroy(pool);
	CHECK_EQ(waitpid(-1, NULL, WNOHANG), -1);
}

/*
 * knitk_pool_call with no room for the result (@out NULL, @cap 0) still
 * returns the call's status and its full length.
 */
static void pool_call_without_room(void)
{
	struct knitk_pool *pool;
	size_t len = 0;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	CHECK_EQ(knitk_pool_call(pool, T_ECHO, "hello", 5, NULL, NULL, 0, &len), 0);
	CHECK_EQ(len, 5);
	knitk_pool_destroy(pool);
}

/* ----------------------------------------- pool: fork in a busy process */

struct busy {
	struct knitk_pool *pool;
	_Atomic int stop;
	unsigned long good, n;
};

static void *busy_fn(void *arg)
{
	struct busy *b = arg;

	while (!atomic_load(&b->stop)) {
		b->good += mix_calls_good(b->pool, 10, NULL, b->n, 1);
		b->n += 10;
	}
	return NULL;
}

/*
 * A thread forks while other threads drive a pool: the child makes a
 * pool of its own, runs calls on it and destroys it, and the parent's
 * pool goes on untouched (no global state of the library is left locked
 * in the child by a thread that does not exist there).
 */
static void fork_while_busy_child_makes_a_pool(void)
{
	struct busy b[2] = { { 0 }, { 0 } };
	struct knitk_pool *pool;
	pthread_t th[2];
	unsigned int i, k;
	int st;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/*
	 * TSan cannot start threads in the child of a threaded fork, and
	 * ASan's allocator lock can be inherited held (the child hangs in
	 * its malloc, whatever the library does).
	 */
	SKIP("allocations after a multi-threaded fork: not under ASan or TSan");
#endif
	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 2,
			 0, &pool) == 0);
	for (i = 0; i < 2; i++) {
		b[i].pool = pool;
		REQUIRE(pthread_create(&th[i], NULL, busy_fn, &b[i]) == 0);
	}
	for (k = 0; k < 10; k++) {
		pid_t pid = fork();

		REQUIRE(pid >= 0);
		if (!pid) {
			struct knitk_pool *mine;
			int ok;

			alarm(60);
			if (new_pool(KNITK_WORKER_THREADS,
				     k & 1 ? KNITK_POOL_DISPATCH_STEAL :
					     KNITK_POOL_DISPATCH_PRIVATE, 2, 0, &mine))
				_exit(2);
			ok = mix_calls_good(mine, 100, NULL, k, 1) == 100;
			knitk_pool_destroy(mine);
			_exit(ok ? 0 : 1);
		}
		CHECK_EQ(waitpid(pid, &st, 0), pid);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	for (i = 0; i < 2; i++) {
		atomic_store(&b[i].stop, 1);
		pthread_join(th[i], NULL);
		CHECK_EQ(b[i].good, b[i].n);
	}
	knitk_pool_destroy(pool);
}

/* ------------------------------------------------------ pool: deadlines */

/*
 * Deadlines far in the future (2^63 and beyond, up to one below
 * KNITK_WAIT_FOREVER) are deadlines that have not passed: a call with one
 * runs and returns its result, a wait with one waits for the call.
 */
static void far_deadlines_are_not_past(void)
{
	static const uint64_t far[] = {
		1ULL << 63, (1ULL << 63) + 1, (1ULL << 63) - 1,
		KNITK_WAIT_FOREVER - 1, 1ULL << 62,
	};
	struct knitk_pool *pool;
	unsigned int i;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	for (i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
		struct knitk_call_opts co = { .size = sizeof(co),
					      .deadline_ns = far[i] };
		uint32_t ms = 30;
		struct knitk_call *c;
		uint64_t x = i, y = 0;
		size_t len = 0;

		CHECK_EQ(knitk_pool_call(pool, T_MIX, &x, 8, &co, &y, 8, &len), 0);
		CHECK_EQ(y, mix64(x));
		REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c) == 0);
		CHECK_EQ(knitk_call_wait(c, far[i]), 30);
		knitk_call_release(c);
		REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c) == 0);
		CHECK_EQ(knitk_pool_wait_any(pool, &c, 1, far[i]), 0);
		CHECK_EQ(knitk_call_status(c), 30);
		knitk_call_release(c);
		REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c) == 0);
		CHECK_EQ(knitk_pool_wait_all(pool, &c, 1, far[i]), 0);
		CHECK_EQ(knitk_call_status(c), 30);
		knitk_call_release(c);
	}
	knitk_pool_destroy(pool);
}

/*
 * A deadline already past at submit: the call completes -ETIMEDOUT
 * (never runs), a wait of deadline 1 (long past) returns -EINPROGRESS at
 * once for a running call, and none of it disturbs the next calls.
 */
static void past_deadlines(void)
{
	struct knitk_call_opts co = { .size = sizeof(co), .deadline_ns = 1 };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct knitk_call *c, *d;
	uint32_t ms = 200;
	uint64_t x = 5;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, &co, &c) == 0);
	CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), -ETIMEDOUT);
	knitk_call_release(c);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &d) == 0);
	CHECK_EQ(knitk_call_wait(d, 1), -EINPROGRESS);
	CHECK_EQ(knitk_pool_wait_any(pool, &d, 1, 1), -EINPROGRESS);
	CHECK_EQ(knitk_pool_wait_all(pool, &d, 1, 0), -EINPROGRESS);
	CHECK_EQ(knitk_call_abort(d), 0);
	CHECK_EQ(knitk_call_wait(d, 0), -ECANCELED);
	knitk_call_release(d);
	CHECK_EQ(mix_calls_good(pool, 20, NULL, 1, 1), 20);
	pool_stats(pool, &st);
	CHECK_EQ(st.timedout, 1);
	CHECK_EQ(st.canceled, 1);
	knitk_pool_destroy(pool);
}

/* ------------------------------------------------- pool: waits, batches */

/*
 * The same handle twice in one knitk_pool_wait_any / _wait_all is one
 * call waited for twice: the waits return when it completes.
 */
static void duplicate_handles_in_waits(void)
{
	struct knitk_call *c[4];
	struct knitk_pool *pool;
	uint32_t ms = 20;
	int r;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 2,
			 0, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c[0]) == 0);
	c[1] = c[0];
	c[2] = c[0];
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c[3]) == 0);
	CHECK_EQ(knitk_pool_wait_all(pool, c, 4, KNITK_WAIT_FOREVER), 0);
	CHECK_EQ(knitk_call_status(c[0]), 20);
	CHECK_EQ(knitk_call_status(c[3]), 20);
	r = knitk_pool_wait_any(pool, c, 3, KNITK_WAIT_FOREVER);
	CHECK(r >= 0 && r < 3);
	knitk_call_release(c[0]);
	knitk_call_release(c[3]);
	knitk_pool_destroy(pool);
}

/*
 * A batch of 300 calls to one worker (more than its 63 in flight, in
 * runs of 64) submits them all, and they run in array order; so do 300
 * pinned to one of two workers.
 */
static void long_batch_to_one_worker(void)
{
	static struct knitk_submission subs[300];
	static struct knitk_call *calls[300];
	struct knitk_call_opts co = { .size = sizeof(co),
				      .flags = KNITK_CALL_WORKER, .worker = 1 };
	struct knitk_pool *pool;
	unsigned int i, w;
	uint64_t prev = 0;

	for (w = 1; w <= 2; w++) {
		REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE,
				 w, 0, &pool) == 0);
		for (i = 0; i < 300; i++)
			subs[i] = (struct knitk_submission){
				.fn = T_SEQ, .opts = w == 2 ? &co : NULL };
		CHECK_EQ(knitk_pool_submit_batch(pool, subs, 300, calls), 300);
		CHECK_EQ(knitk_pool_wait_all(pool, calls, 300, KNITK_WAIT_FOREVER), 0);
		for (i = 0; i < 300; i++) {
			const void *d;
			uint64_t n = 0;
			size_t len;

			CHECK_EQ(knitk_call_status(calls[i]), 0);
			if (!knitk_call_result(calls[i], &d, &len) && len == 8)
				memcpy(&n, d, 8);
			if (i)
				CHECK(n > prev);
			prev = n;
			if (w == 2)
				CHECK_EQ(knitk_call_worker(calls[i]), 1);
			knitk_call_release(calls[i]);
		}
		knitk_pool_destroy(pool);
	}
}

/*
 * A batch whose entry 5 has call options the sized-struct rule refuses
 * (too small, too large, a non-zero tail) submits entries 0..4 and
 * returns 5, and those run; the refused entry takes no room.
 */
static void batch_stops_at_bad_sized_opts(void)
{
	unsigned char raw[KNITK_SIZED_MAX + 16] __attribute__((aligned(8)));
	struct knitk_call_opts *co = (void *)raw;
	struct knitk_submission subs[8];
	struct knitk_call *calls[8];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	uint64_t x[8];
	unsigned int i, k;
	int ret;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	for (k = 0; k < 4; k++) {
		memset(raw, 0, sizeof(raw));
		switch (k) {
		case 0: co->size = KNITK_CALL_OPTS_SIZE_VER0 - 1; ret = -EINVAL; break;
		case 1: co->size = KNITK_SIZED_MAX + 8; ret = -E2BIG; break;
		case 2: co->size = 64; raw[40] = 1; ret = -E2BIG; break;
		default: co->size = KNITK_SIZED_MAX; ret = 0; break;
		}
		for (i = 0; i < 8; i++) {
			x[i] = i + 100 * k;
			subs[i] = (struct knitk_submission){
				.fn = T_MIX, .in = &x[i], .len = 8,
				.opts = i == 5 ? co : NULL };
		}
		CHECK_EQ(knitk_pool_submit(pool, T_MIX, x, 8, co, &calls[0]), ret);
		if (!ret) {
			knitk_call_wait(calls[0], KNITK_WAIT_FOREVER);
			knitk_call_release(calls[0]);
		}
		CHECK_EQ(knitk_pool_submit_batch(pool, subs, 8, calls), ret ? 5 : 8);
		for (i = 0; i < (ret ? 5U : 8U); i++) {
			CHECK_EQ(knitk_call_wait(calls[i], KNITK_WAIT_FOREVER), 0);
			CHECK(mix_result_ok(calls[i], x[i]));
			knitk_call_release(calls[i]);
		}
		/* As the first entry: the error itself. */
		if (ret)
			CHECK_EQ(knitk_pool_submit_batch(pool, &subs[5], 1, calls), ret);
	}
	pool_stats(pool, &st);
	CHECK_EQ(st.submitted, 3 * 5 + 8 + 1);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(pool);
}


/* ------------------------------------------- allocations that fail */

/*
 * -Wl,--wrap of the library's allocators (this program is linked
 * statically against a test build): a thread that arms fail_at fails its
 * fail_at-th allocation from then on, once; allocs counts what it made.
 */
static _Thread_local unsigned int fail_at, allocs;
static _Thread_local bool failed_one;
/* Or, while fail_others is set, every allocation of the other threads. */
static _Atomic int fail_others;
static _Atomic unsigned int others_failed;
static _Thread_local bool fail_exempt;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
char *__wrap_strdup(const char *s);

/* As a real allocator fails: NULL, errno ENOMEM (glibc's callers check). */
static bool alloc_fails(void)
{
	if (atomic_load_explicit(&fail_others, memory_order_relaxed) && !fail_exempt) {
		atomic_fetch_add(&others_failed, 1);
		errno = ENOMEM;
		return true;
	}
	if (!fail_at || ++allocs != fail_at)
		return false;
	failed_one = true;
	errno = ENOMEM;
	return true;
}

void *__wrap_malloc(size_t n)
{
	return alloc_fails() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	return alloc_fails() ? NULL : __real_calloc(n, m);
}

char *__wrap_strdup(const char *s)
{
	return alloc_fails() ? NULL : __real_strdup(s);
}

static void fail_arm(unsigned int n)
{
	fail_at = n;
	allocs = 0;
	failed_one = false;
}

/* Disarm; whether an allocation failed since fail_arm(). */
static bool fail_disarm(void)
{
	fail_at = 0;
	return failed_one;
}

/*
 * knitk_pool_create failing each of its allocations in turn: every
 * failure is -ENOMEM, leaks no fd (nor memory: the ASan build's leak
 * check), and the next create works.
 */
static void create_fails_each_alloc(unsigned int kind, unsigned int dispatch)
{
	unsigned int n;
	int fds = open_fds();

	for (n = 1; n < 200; n++) {
		struct knitk_pool *pool = NULL;
		bool hit;
		int ret;

		fail_arm(n);
		ret = new_pool(kind, dispatch, 2, 0, &pool);
		hit = fail_disarm();
		if (!hit) {
			CHECK_EQ(ret, 0);
			if (!ret) {
				CHECK_EQ(mix_calls_good(pool, 4, NULL, n, 1), 4);
				knitk_pool_destroy(pool);
			}
			break;
		}
		if (ret == 0) {
			/* A failed allocation the pool could do without. */
			CHECK_EQ(mix_calls_good(pool, 4, NULL, n, 1), 4);
			knitk_pool_destroy(pool);
		} else {
			CHECK_EQ(ret, -ENOMEM);
		}
		if (open_fds() != fds) {
			printf("# allocation %u failed (create: %d): fds %d, were %d; "
			       "0-2 open: %d %d %d\n", n, ret, open_fds(), fds,
			       fcntl(0, F_GETFD) >= 0, fcntl(1, F_GETFD) >= 0,
			       fcntl(2, F_GETFD) >= 0);
			CHECK_EQ(open_fds(), fds);
			break;
		}
	}
	printf("# %u allocations\n", n - 1);
	CHECK(n < 200);
}

static void create_fails_each_alloc_threads(void)
{
	create_fails_each_alloc(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE);
}

static void create_fails_each_alloc_steal(void)
{
	create_fails_each_alloc(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_STEAL);
}

static void create_fails_each_alloc_processes(void)
{
	create_fails_each_alloc(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE);
}

/*
 * A thread worker that cannot set itself up (its allocations fail in
 * its own thread): the create fails with -ENOMEM and leaves no fd or
 * thread, rather than return a pool whose worker is gone and whose calls
 * would wait for it forever.
 */
static void worker_thread_setup_fails(unsigned int dispatch)
{
	int fds = open_fds(), threads = nr_threads(), ret;
	struct knitk_pool *pool = NULL;
	uint64_t x = 4, y = 0;
	size_t len;

	fail_exempt = true;
	atomic_store(&others_failed, 0);
	atomic_store(&fail_others, 1);
	ret = new_pool(KNITK_WORKER_THREADS, dispatch, 1, 0, &pool);
	/* A create that did not wait: until the worker's setup has failed. */
	while (!ret && !atomic_load(&others_failed))
		sched_yield();
	atomic_store(&fail_others, 0);
	fail_exempt = false;
	CHECK_EQ(ret, -ENOMEM);
	if (!ret) {
		/* The call goes to a worker that is not there (a hang). */
		CHECK_EQ(knitk_pool_call(pool, T_MIX, &x, 8, NULL, &y, 8, &len), 0);
		knitk_pool_destroy(pool);
	}
	CHECK_EQ(open_fds(), fds);
	CHECK_EQ(nr_threads(), threads);
	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 1, 0, &pool) == 0);
	CHECK_EQ(mix_calls_good(pool, 4, NULL, 1, 1), 4);
	knitk_pool_destroy(pool);
}

static void worker_thread_setup_fails_private(void)
{
	worker_thread_setup_fails(KNITK_POOL_DISPATCH_PRIVATE);
}

static void worker_thread_setup_fails_steal(void)
{
	worker_thread_setup_fails(KNITK_POOL_DISPATCH_STEAL);
}

/*
 * The calls of a live pool failing each allocation of the calling thread
 * in turn: a submit, a batch and a knitk_pool_call (whose waits may copy
 * results) either fail with -ENOMEM and take nothing, or go through; every
 * call submitted completes once, with its result.
 */
static void calls_fail_each_alloc(unsigned int dispatch)
{
	struct knitk_submission subs[4];
	struct knitk_call *calls[4];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	unsigned int n, i, op;
	uint64_t x[4], before;
	unsigned long ok = 0;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 2, 0, &pool) == 0);
	for (op = 0; op < 4; op++) {
		for (n = 1; n < 50; n++) {
			static unsigned char big[4000];
			unsigned char out[4000];
			size_t len = 0;
			bool hit;
			int ret, got = 0;

			for (i = 0; i < 4; i++) {
				x[i] = n * 8 + i;
				subs[i] = (struct knitk_submission){
					.fn = T_MIX, .in = &x[i], .len = 8 };
			}
			memset(big, (int)n, sizeof(big));
			pool_stats(pool, &st);
			before = st.submitted;
			fail_arm(n);
			switch (op) {
			case 0:
				ret = knitk_pool_submit(pool, T_MIX, &x[0], 8, NULL, &calls[0]);
				got = ret ? ret : 1;
				break;
			case 1:
				ret = got = knitk_pool_submit_batch(pool, subs, 4, calls);
				break;
			case 2:
				ret = knitk_pool_call(pool, T_MIX, &x[0], 8, NULL,
						      out, 8, &len);
				if (!ret)
					CHECK(len == 8 && !memcmp(&(uint64_t){ mix64(x[0]) }, out, 8));
				break;
			default:
				ret = knitk_pool_call(pool, T_ECHO, big, sizeof(big), NULL,
						      out, sizeof(out), &len);
				if (!ret)
					CHECK(len == sizeof(big) && !memcmp(big, out, len));
				break;
			}
			/* The waits, armed too: they may copy results. */
			for (i = 0; op < 2 && got > 0 && i < (unsigned int)got; i++)
				CHECK_EQ(knitk_call_wait(calls[i], KNITK_WAIT_FOREVER), 0);
			hit = fail_disarm();
			if (ret < 0) {
				/* Refused: nothing was submitted. */
				CHECK_EQ(ret, -ENOMEM);
				pool_stats(pool, &st);
				CHECK(op >= 2 || st.submitted == before);
			}
			for (i = 0; op < 2 && got > 0 && i < (unsigned int)got; i++) {
				CHECK(mix_result_ok(calls[i], x[i]));
				knitk_call_release(calls[i]);
			}
			if (ret >= 0)
				ok++;
			if (!hit)
				break;
		}
		CHECK(n < 50);
	}
	CHECK_EQ(mix_calls_good(pool, 10, NULL, 1, 1), 10);
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	printf("# %lu ops went through\n", ok);
	knitk_pool_destroy(pool);
}

static void calls_fail_each_alloc_private(void)
{
	calls_fail_each_alloc(KNITK_POOL_DISPATCH_PRIVATE);
}

static void calls_fail_each_alloc_steal(void)
{
	calls_fail_each_alloc(KNITK_POOL_DISPATCH_STEAL);
}

/*
 * knitk_pool_event_fd and knitk_pool_reap failing an allocation: the
 * switch fails with -ENOMEM and leaves the pool out of event mode, or
 * succeeds; reaped calls are returned once each.
 */
static void event_mode_fails_each_alloc(void)
{
	struct knitk_call *c[8];
	struct knitk_pool *pool;
	unsigned int n;
	int fd = -1, i, got;

	for (n = 1; n < 50; n++) {
		bool hit;

		REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE,
				 1, 0, &pool) == 0);
		fail_arm(n);
		fd = knitk_pool_event_fd(pool);
		hit = fail_disarm();
		if (fd < 0) {
			CHECK_EQ(fd, -ENOMEM);
			CHECK_EQ(knitk_pool_reap(pool, c, 8), -EINVAL);
			CHECK_EQ(mix_calls_good(pool, 3, NULL, 1, 1), 3);
		} else {
			uint64_t x = n;
			int reaped = 0;

			REQUIRE(knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c[0]) == 0);
			while (!reaped) {
				got = knitk_pool_reap(pool, c, 8);
				CHECK(got >= 0);
				if (got < 0)
					break;
				for (i = 0; i < got; i++) {
					CHECK(mix_result_ok(c[i], x));
					knitk_call_release(c[i]);
				}
				reaped += got;
				if (!got)
					sched_yield();
			}
		}
		knitk_pool_destroy(pool);
		if (!hit)
			break;
	}
	CHECK(n < 50);
}


/*
 * The copy of a large result failing (the waiting thread drains the
 * return mailbox and its allocation fails): the call completes, once,
 * with -ENOMEM (knitk_call_status), and the pool goes on.  Some rounds
 * may see the result taken by another thread; one must hit the copy.
 */
struct gate_opener {
	struct gate *g;
};

static void *gate_opener_fn(void *arg)
{
	struct gate_opener *o = arg;

	usleep(20000);
	gate_release(o->g);
	return NULL;
}

static void result_copy_fails(void)
{
	enum { ROUNDS = 20 };
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	struct gate gs[ROUNDS];
	unsigned int round, hits = 0;

	/* Before the workers start (so TSan sees the pipes made first). */
	for (round = 0; round < ROUNDS; round++)
		REQUIRE(gate_open(&gs[round]) == 0);
	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	for (round = 0; round < ROUNDS && !hits; round++) {
		struct gate *g = &gs[round];
		struct gate_opener o = { .g = g };
		struct knitk_call *c;
		pthread_t th;
		bool hit;
		int ret;

		g->arg.n = 1000;
		REQUIRE(knitk_pool_submit(pool, T_GATE, &g->arg, sizeof(g->arg), NULL, &c) == 0);
		REQUIRE(gate_wait(g, 'r') == 0);
		REQUIRE(pthread_create(&th, NULL, gate_opener_fn, &o) == 0);
		fail_arm(1);
		ret = knitk_call_wait(c, KNITK_WAIT_FOREVER);
		hit = fail_disarm();
		pthread_join(th, NULL);
		if (hit) {
			hits++;
			CHECK_EQ(ret, -ENOMEM);
			CHECK_EQ(knitk_call_status(c), -ENOMEM);
		} else {
			const void *d;
			size_t len = 0;

			CHECK_EQ(ret, 1000);
			CHECK(!knitk_call_result(c, &d, &len) && len == 1000 &&
			      ((const char *)d)[999] == 'g');
		}
		knitk_call_release(c);
	}
	printf("# the copy failed in round %u\n", round);
	CHECK(hits > 0);
	CHECK_EQ(mix_calls_good(pool, 10, NULL, 1, 1), 10);
	pool_stats(pool, &st);
	CHECK_EQ(st.completed, st.submitted);
	knitk_pool_destroy(pool);
	for (round = 0; round < ROUNDS; round++)
		gate_close(&gs[round]);
}

/* ---------------------------------------------- pool: fds run out */

struct no_fds {
	struct rlimit old;
	int fill[64];
	int nr;
};

/* Take every fd the process may open: the limit at the count open now. */
static void fds_exhaust(struct no_fds *s)
{
	struct rlimit r;
	int fd;

	getrlimit(RLIMIT_NOFILE, &s->old);
	r = s->old;
	r.rlim_cur = (rlim_t)open_fds();
	setrlimit(RLIMIT_NOFILE, &r);
	/* Fill any hole below the limit. */
	for (s->nr = 0; s->nr < 64 && (fd = dup(1)) >= 0; s->nr++)
		s->fill[s->nr] = fd;
}

static void fds_restore(struct no_fds *s)
{
	setrlimit(RLIMIT_NOFILE, &s->old);
	while (s->nr)
		close(s->fill[--s->nr]);
}

/*
 * knitk_pool_event_fd when the process has no fd left fails with a
 * negative errno and changes nothing: the pool is not in event mode
 * (reap -EINVAL, calls complete through waits), and once an fd is free
 * the switch works.
 */
static void event_fd_without_fds(void)
{
	struct knitk_call *c[2];
	struct knitk_pool *pool;
	struct no_fds nf;
	int fd;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	fds_exhaust(&nf);
	fd = knitk_pool_event_fd(pool);
	CHECK_EQ(fd, -EMFILE);
	CHECK_EQ(knitk_pool_reap(pool, c, 2), -EINVAL);
	CHECK_EQ(mix_calls_good(pool, 10, NULL, 7, 1), 10);
	fds_restore(&nf);
	fd = knitk_pool_event_fd(pool);
	CHECK(fd >= 0);
	CHECK_EQ(knitk_pool_event_fd(pool), fd);
	CHECK_EQ(knitk_pool_reap(pool, c, 2), 0);
	knitk_pool_destroy(pool);
}

/*
 * With KNITK_POOL_RESPAWN, a worker that dies while the process has no fd
 * left for its successor: "the submit waits for its successor (-EPIPE
 * only if the restart fails)" - a submit returns (-EPIPE, or a call that
 * runs once the limit is raised), it never waits for a restart that is not
 * coming.  The calls of the dead worker complete -EOWNERDEAD.
 */
static void respawn_without_fds(void)
{
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_call *c;
	struct knitk_pool *pool;
	struct no_fds nf;
	uint64_t x = 3;
	int r;

	REQUIRE(new_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 KNITK_POOL_RESPAWN, &pool) == 0);
	REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0 && wi.pid > 0);
	fds_exhaust(&nf);
	kill(wi.pid, SIGKILL);
	/* Until the pool has seen the death (its own record, or the reap). */
	while (!knitk_pool_worker_info(pool, 0, &wi) && wi.alive)
		sched_yield();
	r = knitk_pool_submit(pool, T_MIX, &x, 8, NULL, &c);
	fds_restore(&nf);
	printf("# submit with no fd for the successor: %d\n", r);
	CHECK(r == 0 || r == -EPIPE);
	if (!r) {
		CHECK_EQ(knitk_call_wait(c, KNITK_WAIT_FOREVER), 0);
		CHECK(mix_result_ok(c, x));
		knitk_call_release(c);
	}
	knitk_pool_destroy(pool);
}


/* ----------------------------------------- pool: a death not seen yet */

/* 1 when process @pid has exited (a zombie, or reaped already). */
static int exited(pid_t pid)
{
	char path[64], buf[512], *q;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	q = strrchr(buf, ')');
	return q && q[1] == ' ' && (q[2] == 'Z' || q[2] == 'X');
}

/*
 * Private lanes: a call submitted after a worker process has exited but
 * before the pool has seen its death (knitk_pool_worker_info still says
 * alive) is queued to it and completes -EOWNERDEAD, with
 * knitk_call_worker naming the dead worker, or (the death seen first) runs
 * on the other worker; never anything else.  From the moment the pool
 * reports the worker not alive, no call is given to it: all run, and with
 * KNITK_POOL_RESPAWN a call pinned to it waits for its successor.
 */
static void submitted_before_death_seen(unsigned int flags)
{
	struct knitk_call_opts pin = { .size = sizeof(pin),
				       .flags = KNITK_CALL_WORKER, .worker = 0 };
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool *pool;
	struct knitk_call *c[4];
	unsigned int round, i, lost = 0;
	uint64_t x[4] = { 1, 2, 3, 4 };
	pid_t dead;

	for (round = 0; round < 5; round++) {
		REQUIRE(new_pool(KNITK_WORKER_PROCESSES, KNITK_POOL_DISPATCH_PRIVATE,
				 2, flags, &pool) == 0);
		REQUIRE(knitk_pool_worker_info(pool, 0, &wi) == 0 && wi.pid > 0);
		dead = wi.pid;
		kill(dead, SIGKILL);
		while (!exited(dead))
			sched_yield();
		REQUIRE(knitk_pool_submit(pool, T_MIX, &x[0], 8, NULL, &c[0]) == 0);
		CHECK_EQ(knitk_call_wait(c[0], KNITK_WAIT_FOREVER) == 0 ?
			 mix_result_ok(c[0], x[0]) :
			 knitk_call_status(c[0]) == -EOWNERDEAD &&
			 knitk_call_worker(c[0]) == 0, 1);
		lost += knitk_call_status(c[0]) == -EOWNERDEAD;
		knitk_call_release(c[0]);
		/* Until the death is seen: not alive, or a successor's pid. */
		while (!knitk_pool_worker_info(pool, 0, &wi) && wi.alive &&
		       wi.pid == dead)
			sched_yield();
		for (i = 0; i < 3; i++)
			REQUIRE(knitk_pool_submit(pool, T_MIX, &x[i + 1], 8,
						  flags && i == 2 ? &pin : NULL,
						  &c[i + 1]) == 0);
		for (i = 1; i < 4; i++) {
			CHECK_EQ(knitk_call_wait(c[i], KNITK_WAIT_FOREVER), 0);
			CHECK(mix_result_ok(c[i], x[i]));
			knitk_call_release(c[i]);
		}
		knitk_pool_destroy(pool);
	}
	printf("# %u of 5 calls in the window lost with the worker\n", lost);
}

static void submitted_before_death_seen_plain(void)
{
	submitted_before_death_seen(0);
}

static void submitted_before_death_seen_respawn(void)
{
	submitted_before_death_seen(KNITK_POOL_RESPAWN);
}


/* ----------------------------------- pool: the address space runs out */

static long vm_size_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/*
 * knitk_pool_create under an RLIMIT_AS that leaves 0, 1, 2, ... MiB of
 * address space: the knot's mapping or a worker's stack (pthread_create)
 * fails part-way; each failure is a negative errno and leaves the fds
 * and threads as they were (started workers joined), until one fits.
 */
static void create_in_little_address_space(void)
{
	struct rlimit old, r;
	int fds, threads, ret = -1;
	long base, mib;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* Their shadow memory takes terabytes of address space. */
	SKIP("RLIMIT_AS: not under ASan or TSan");
#endif
	fds = open_fds();
	threads = nr_threads();
	getrlimit(RLIMIT_AS, &old);
	for (mib = 0; mib < 200 && ret; mib++) {
		struct knitk_pool *pool;

		base = vm_size_kb();
		REQUIRE(base > 0);
		r = old;
		r.rlim_cur = (rlim_t)(base + mib * 1024) * 1024;
		setrlimit(RLIMIT_AS, &r);
		ret = new_pool(KNITK_WORKER_THREADS, mib & 1 ? KNITK_POOL_DISPATCH_STEAL :
			       KNITK_POOL_DISPATCH_PRIVATE, 4, 0, &pool);
		setrlimit(RLIMIT_AS, &old);
		if (!ret) {
			CHECK_EQ(mix_calls_good(pool, 4, NULL, 1, 1), 4);
			knitk_pool_destroy(pool);
		} else {
			CHECK(ret == -ENOMEM || ret == -EAGAIN);
		}
		CHECK_EQ(open_fds(), fds);
		CHECK_EQ(nr_threads(), threads);
	}
	printf("# through with %ld MiB to spare\n", mib - 1);
	CHECK_EQ(ret, 0);
}

/* ------------------------------------------------ pool: fork and exit */

/*
 * A child forked while a thread pool runs calls, which leaves through
 * exit() (atexit handlers, library destructors), is no death of any role
 * and takes nothing: the parent's calls across the fork complete with
 * their results, and so do later ones.
 */
static void child_exit_takes_nothing(void)
{
	struct knitk_call *c[16];
	struct knitk_pool_stats st;
	struct knitk_pool *pool;
	uint64_t x[16];
	unsigned int i;
	int status;
	pid_t pid;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 2,
			 0, &pool) == 0);
	for (i = 0; i < 16; i++) {
		x[i] = i;
		REQUIRE(knitk_pool_submit(pool, T_MIX, &x[i], 8, NULL, &c[i]) == 0);
	}
	pid = fork();
	REQUIRE(pid >= 0);
	if (!pid) {
#ifdef __SANITIZE_ADDRESS__
		/*
		 * LeakSanitizer's check at exit() in the child of a threaded
		 * fork can hang on an allocator lock held by a thread the
		 * child does not have; the library has no exit handlers.
		 */
		_exit(0);
#endif
		exit(0);
	}
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(knitk_pool_wait_all(pool, c, 16, KNITK_WAIT_FOREVER), 0);
	for (i = 0; i < 16; i++) {
		CHECK_EQ(knitk_call_status(c[i]), 0);
		CHECK(mix_result_ok(c[i], x[i]));
		knitk_call_release(c[i]);
	}
	CHECK_EQ(mix_calls_good(pool, 50, NULL, 1, 1), 50);
	pool_stats(pool, &st);
	CHECK_EQ(st.deaths, 0);
	knitk_pool_destroy(pool);
}

/* ---------------------------------- pool: destroy against blocked waits */

struct waiter {
	struct knitk_pool *pool;
	struct knitk_call **calls;
	unsigned int nr;
	int any;
	_Atomic int started;
	int ret;
};

static void *waiter_fn(void *arg)
{
	struct waiter *w = arg;

	atomic_store(&w->started, 1);
	if (w->any < 0)
		w->ret = knitk_call_wait(w->calls[0], KNITK_WAIT_FOREVER);
	else if (w->any)
		w->ret = knitk_pool_wait_any(w->pool, w->calls, w->nr,
					     KNITK_WAIT_FOREVER);
	else
		w->ret = knitk_pool_wait_all(w->pool, w->calls, w->nr,
					     KNITK_WAIT_FOREVER);
	return NULL;
}

/*
 * In event mode with no reaper, threads blocked in knitk_call_wait,
 * knitk_pool_wait_any and _wait_all when the destroy starts return once it
 * has completed their calls (-ECANCELED for the ones still running).
 */
static void destroy_wakes_event_mode_waiters(unsigned int dispatch)
{
	struct knitk_call *c[4];
	struct waiter w[3];
	pthread_t th[3];
	struct knitk_pool *pool;
	uint32_t ms = 60000;
	unsigned int i;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, dispatch, 2, 0, &pool) == 0);
	REQUIRE(knitk_pool_event_fd(pool) >= 0);
	for (i = 0; i < 4; i++)
		REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c[i]) == 0);
	w[0] = (struct waiter){ .pool = pool, .calls = &c[0], .nr = 1, .any = -1 };
	w[1] = (struct waiter){ .pool = pool, .calls = &c[1], .nr = 2, .any = 1 };
	w[2] = (struct waiter){ .pool = pool, .calls = &c[0], .nr = 4, .any = 0 };
	for (i = 0; i < 3; i++)
		REQUIRE(pthread_create(&th[i], NULL, waiter_fn, &w[i]) == 0);
	for (i = 0; i < 3; i++)
		while (!atomic_load(&w[i].started))
			sched_yield();
	usleep(20000);
	knitk_pool_destroy(pool);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(w[0].ret, -ECANCELED);
	CHECK(w[1].ret == 0 || w[1].ret == 1);
	CHECK_EQ(w[2].ret, 0);
	for (i = 0; i < 4; i++) {
		CHECK_EQ(knitk_call_status(c[i]), -ECANCELED);
		knitk_call_release(c[i]);
	}
}

static void destroy_wakes_event_mode_waiters_private(void)
{
	destroy_wakes_event_mode_waiters(KNITK_POOL_DISPATCH_PRIVATE);
}

static void destroy_wakes_event_mode_waiters_steal(void)
{
	destroy_wakes_event_mode_waiters(KNITK_POOL_DISPATCH_STEAL);
}

/*
 * A refused shutdown (a mode that is neither) changes nothing: calls
 * still run, and the real shutdown after it drains them.
 */
static void bad_shutdown_mode_changes_nothing(void)
{
	struct knitk_pool *pool;
	struct knitk_call *c;
	uint32_t ms = 30;

	REQUIRE(new_pool(KNITK_WORKER_THREADS, KNITK_POOL_DISPATCH_PRIVATE, 1,
			 0, &pool) == 0);
	REQUIRE(knitk_pool_submit(pool, T_SLEEP, &ms, 4, NULL, &c) == 0);
	CHECK_EQ(knitk_pool_shutdown(pool, 3), -EINVAL);
	CHECK_EQ(knitk_pool_shutdown(pool, ~0U), -EINVAL);
	CHECK_EQ(mix_calls_good(pool, 5, NULL, 1, 1), 5);
	CHECK_EQ(knitk_pool_shutdown(pool, KNITK_SHUTDOWN_DRAIN), 0);
	CHECK_EQ(knitk_call_status(c), 30);
	knitk_call_release(c);
	knitk_pool_destroy(pool);
}

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL))
		return 1;
	if (argc > 2)
		setenv("TAP_ONLY", argv[2], 1);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		return 1;
	TEST(library_fields_are_the_librarys);
	TEST(publish_batch_partly_wrong_mask);
	TEST(ack_partly_wrong_mask);
	TEST(decode_sizes_at_the_edges);
	TEST(staged_lane_beside_send_batch);
	TEST(send_batch_sizes_that_overflow);
	TEST(decode_of_a_lane_acked_since);
	TEST(wild_headers_touch_nothing);
	TEST(null_everywhere_core);
	TEST(hand_off_to_absent_claimant);
	TEST(claimant_rescans_before_done);
	TEST(wake_stats_odd_sizes);
	TEST(staged_lane_is_not_handed_off);
	TEST(released_handles_never_reaped);
	TEST(opts_size_inside_a_field);
	TEST(aborts_race_results_in_event_mode_private);
	TEST(aborts_race_results_in_event_mode_steal);
	TEST(many_threads_wait_the_same_calls);
	TEST(event_fd_switch_from_many_threads);
	TEST(reap_of_zero_takes_nothing);
	TEST(create_at_each_fd_limit_threads);
	TEST(create_at_each_fd_limit_processes);
	TEST(respawn_fails_without_fds);
	TEST(pinned_while_respawn_fails);
	TEST(create_in_little_address_space);
	TEST(pool_call_without_room);
	TEST(fork_while_busy_child_makes_a_pool);
	TEST(far_deadlines_are_not_past);
	TEST(past_deadlines);
	TEST(duplicate_handles_in_waits);
	TEST(long_batch_to_one_worker);
	TEST(batch_stops_at_bad_sized_opts);
	TEST(event_fd_without_fds);
	TEST(respawn_without_fds);
	TEST(submitted_before_death_seen_plain);
	TEST(submitted_before_death_seen_respawn);
	TEST(child_exit_takes_nothing);
	TEST(destroy_wakes_event_mode_waiters_private);
	TEST(destroy_wakes_event_mode_waiters_steal);
	TEST(bad_shutdown_mode_changes_nothing);
	TEST(create_fails_each_alloc_threads);
	TEST(create_fails_each_alloc_steal);
	TEST(create_fails_each_alloc_processes);
	TEST(worker_thread_setup_fails_private);
	TEST(worker_thread_setup_fails_steal);
	TEST(calls_fail_each_alloc_private);
	TEST(calls_fail_each_alloc_steal);
	TEST(event_mode_fails_each_alloc);
	TEST(result_copy_fails);
	return tap_exit();
}
