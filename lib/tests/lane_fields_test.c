// SPDX-License-Identifier: GPL-2.0
/*
 * The lane header's library fields are the library's: a caller's garbage
 * there is ignored, batch publishes and acks of partly wrong masks, the
 * batch decode's sizes at the sized-struct limits, a staged lane beside a
 * send batch, sizes that overflow, wild headers that touch nothing.
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
#define FIXTURES_ONE_SUBMITTER
#include "fixtures.h"

/* Lanes pending on @f's mailbox (-1 on error). */
static int64_t fx_pending(struct fx *f)
{
	uint64_t pend;

	return knitk_lane_scan(f->c, &pend) < 0 ? -1 : (int64_t)pend;
}

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
 * the other 63 lanes around it (and no more), and publishing it
 * afterwards puts it last in consume order.
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

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &test_tasks, NULL) ||
	    tests_init(argc, argv, true))
		return 1;
	TEST(library_fields_are_the_librarys);
	TEST(publish_batch_partly_wrong_mask);
	TEST(ack_partly_wrong_mask);
	TEST(decode_sizes_at_the_edges);
	TEST(staged_lane_beside_send_batch);
	TEST(send_batch_sizes_that_overflow);
	TEST(decode_of_a_lane_acked_since);
	TEST(wild_headers_touch_nothing);
	return tap_exit();
}
