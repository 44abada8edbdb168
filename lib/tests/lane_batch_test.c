// SPDX-License-Identifier: GPL-2.0
/*
 * The batch calls of the lane protocol (futex backend, one process; they
 * touch only the shared mapping, never the backend): knitk_producer_send_batch
 * publishes many messages with one store and stops at backpressure;
 * knitk_lane_decode_batch decodes many lanes per call, in consume order,
 * with the caller's stride, and reports a bad header after the good ones
 * before it, on a private mailbox and on a stealing one;
 * knitk_lane_publish_batch stamps its lanes in claim order.
 */
#include <errno.h>
#include <knitk.h>

#include "fixtures.h"

/*
 * Nothing is left claimed: once the producer stood in for its consumer
 * (nothing pending), every lane claims, and a new consumer continues
 * after it.
 */
static int fx_nothing_claimed(struct fx *f)
{
	int ret = knitk_producer_reset_consumer(f->p), lanes[KNITK_LANES], n = 0;

	if (ret)
		return ret;
	while (n < KNITK_LANES && (lanes[n] = knitk_lane_claim(f->p)) >= 0)
		n++;
	/* Last claimed first: the cursor goes back to where it was. */
	for (ret = n; ret > 0; ret--)
		knitk_lane_release(f->p, (unsigned int)lanes[ret - 1]);
	if (n != KNITK_LANES)
		return -EBUSY;
	knitk_consumer_destroy(f->c);
	return knitk_consumer_create(f->k, (unsigned int)f->mailbox, &f->c);
}

/* One call, one store: nothing is pending until all of them are. */
static void send_batch_inline(void)
{
	struct knitk_lane_header hs[5] = { { 0 } };
	struct knitk_msg m[8];
	uint64_t seq[5], pend, v;
	struct fx f;
	int i;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	for (i = 0; i < 5; i++) {
		seq[i] = 500 + (uint64_t)i;
		hs[i].task_id = 100 + (uint64_t)i;
		hs[i].function_id = 7;
		hs[i].kind = 99;		/* library fields are overwritten */
		hs[i].length = 12345;
	}
	CHECK_EQ(knitk_producer_send_batch(f.p, hs, seq, sizeof(seq[0]), 5), 5);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 5);
	CHECK_EQ(pend, 0x1fULL);
	m[0].size = 0;				/* the stride is msg_size */
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 8, sizeof(m[0])), 5);
	CHECK_EQ(pend, 0);
	for (i = 0; i < 5; i++) {
		CHECK_EQ(m[i].size, sizeof(m[i]));
		CHECK_EQ(m[i].lane, (unsigned int)i);
		CHECK_EQ(m[i].header.task_id, 100 + (uint64_t)i);
		CHECK_EQ(m[i].header.function_id, 7);
		CHECK_EQ(m[i].header.kind, KNITK_PAYLOAD_INLINE);
		CHECK_EQ(m[i].len, 8);
		memcpy(&v, m[i].data, sizeof(v));
		CHECK_EQ(v, 500 + (uint64_t)i);
	}
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 8, sizeof(m[0])), -ENOENT);
	CHECK_EQ(knitk_lane_ack(f.c, 0x1f), 0);
	/* NULL headers: every caller field zero; lanes continue in ring order. */
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, seq, sizeof(seq[0]), 2), 2);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 2);
	CHECK_EQ(pend, 0x60ULL);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 8, sizeof(m[0])), 2);
	CHECK_EQ(m[0].lane, 5);
	CHECK_EQ(m[0].header.task_id, 0);
	CHECK_EQ(m[0].header.function_id, 0);
	CHECK_EQ(m[1].lane, 6);
	memcpy(&v, m[1].data, sizeof(v));
	CHECK_EQ(v, 501);
	CHECK_EQ(knitk_lane_ack(f.c, 0x60), 0);
	fx_fini(&f);
}

/* @data NULL: each message carries its header's value, as a send does. */
static void send_batch_values(void)
{
	struct knitk_lane_header hs[3] = {
		{ .value = 11 }, { .value = 22 }, { .value = 33 },
	};
	struct knitk_msg m[3];
	uint64_t pend;
	struct fx f;
	int i;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	CHECK_EQ(knitk_producer_send_batch(f.p, hs, NULL, 0, 3), 3);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 3);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 3, sizeof(m[0])), 3);
	for (i = 0; i < 3; i++) {
		CHECK_EQ(m[i].header.kind, KNITK_PAYLOAD_VALUE);
		CHECK_EQ(m[i].header.value, 11 * (uint64_t)(i + 1));
		CHECK_EQ(m[i].header.arena_slot, KNITK_ARENA_NO_SLOT);
		CHECK(m[i].data == NULL && m[i].len == 0);
	}
	CHECK_EQ(knitk_lane_ack(f.c, 0x7), 0);
	fx_fini(&f);
}

/* No lane for the whole batch: the front of it goes, the rest does not. */
static void send_batch_stops_at_full_mailbox(void)
{
	uint64_t data[64] = { 0 }, pend;
	struct knitk_msg m[64];
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, data, 8, 60), 60);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, data, 8, 10), 4);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, data, 8, 10), -EAGAIN);
	CHECK_EQ(fx_nothing_claimed(&f), 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 0);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, data, 8, 3), 3);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 3);
	CHECK_EQ(pend, 0x7ULL);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 64, sizeof(m[0])), 3);
	CHECK_EQ(knitk_lane_ack(f.c, 0x7), 0);
	fx_fini(&f);
}

/* Arena payloads: a batch stops where the arena is full. */
static void send_batch_arena(void)
{
	static unsigned char data[4][1000];
	struct knitk_msg m[4];
	uint64_t pend;
	struct fx f;
	int i;

	REQUIRE(fx_init(&f, 64, 4096) == 0);
	for (i = 0; i < 4; i++)
		memset(data[i], 'a' + i, sizeof(data[i]));
	/* 1000 bytes take 1024 of the 4096: four fit, the fifth does not. */
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, data, sizeof(data[0]), 3), 3);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, data, sizeof(data[0]), 2), 1);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, data, sizeof(data[0]), 1), -ENOSPC);
	CHECK_EQ(fx_nothing_claimed(&f), 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 0);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, data, sizeof(data[0]), 4), 4);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 4);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 4, sizeof(m[0])), 4);
	for (i = 0; i < 4; i++) {
		CHECK_EQ(m[i].header.kind, KNITK_PAYLOAD_ARENA);
		CHECK_EQ(m[i].len, sizeof(data[i]));
		CHECK(!memcmp(m[i].data, data[i], sizeof(data[i])));
	}
	CHECK_EQ(knitk_lane_ack(f.c, 0xf0), 0);
	/* The acks freed the arena: a whole batch fits again. */
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, data, sizeof(data[0]), 4), 4);
	fx_fini(&f);
}

static void send_batch_bad_arguments(void)
{
	uint64_t x[64] = { 0 };
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	CHECK_EQ(knitk_producer_send_batch(NULL, NULL, x, 8, 1), -EINVAL);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, x, 8, 0), -EINVAL);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, x, 8, 65), -EINVAL);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, NULL, 8, 1), -EINVAL);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, x, 65, 1), -EMSGSIZE);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, x, 8, 64), 64);
	fx_fini(&f);
}

/*
 * At most @n lanes per call, in consume order; the caller's stride, and
 * nothing written past the library's own struct in each element.
 */
static void decode_batch_limit_and_stride(void)
{
	struct big {
		struct knitk_msg m;
		unsigned char guard[24];
	} b[4];
	uint64_t data[10], pend, v;
	struct fx f;
	unsigned int i, j;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	for (i = 0; i < 10; i++)
		data[i] = 70 + i;
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, data, 8, 10), 10);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 10);
	memset(b, 0x5a, sizeof(b));
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, &b[0].m, 4,
					 KNITK_MSG_SIZE_VER0 - 1), -EINVAL);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, &b[0].m, 4,
					 KNITK_SIZED_MAX + 1), -E2BIG);
	CHECK_EQ(pend, 0x3ffULL);			/* refused: nothing taken */
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, &b[0].m, 4, sizeof(b[0])), 4);
	CHECK_EQ(pend, 0x3f0ULL);
	for (i = 0; i < 4; i++) {
		CHECK_EQ(b[i].m.size, sizeof(b[i].m));
		CHECK_EQ(b[i].m.lane, i);
		memcpy(&v, b[i].m.data, sizeof(v));
		CHECK_EQ(v, 70 + i);
		for (j = 0; j < sizeof(b[i].guard); j++)
			CHECK_EQ(b[i].guard[j], 0x5a);
	}
	/* The rest, mixed with the single-lane calls, in order. */
	CHECK_EQ(knitk_lane_next(f.c, &pend), 4);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, &b[0].m, 4, sizeof(b[0])), 4);
	CHECK_EQ(b[0].m.lane, 5);
	CHECK_EQ(b[3].m.lane, 8);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, &b[0].m, 4, sizeof(b[0])), 1);
	CHECK_EQ(b[0].m.lane, 9);
	CHECK_EQ(pend, 0);
	CHECK_EQ(knitk_lane_ack(f.c, 0x3ff), 0);
	fx_fini(&f);
}

/* Only lanes a scan returned; the same checks as the single decode. */
static void decode_batch_bad_arguments(void)
{
	struct knitk_msg m[2];
	uint64_t x = 1, pend;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	CHECK_EQ(knitk_producer_send_batch(f.p, NULL, &x, 8, 1), 1);
	pend = 1;
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 2, sizeof(m[0])), -EPERM);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 1);
	pend |= 1ULL << 9;				/* never published */
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 2, sizeof(m[0])), -EPERM);
	pend = 1;
	CHECK_EQ(knitk_lane_decode_batch(NULL, &pend, m, 2, sizeof(m[0])), -EINVAL);
	CHECK_EQ(knitk_lane_decode_batch(f.c, NULL, m, 2, sizeof(m[0])), -EINVAL);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, NULL, 2, sizeof(m[0])), -EINVAL);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 0, sizeof(m[0])), -EINVAL);
	CHECK_EQ(pend, 1);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 2, sizeof(m[0])), 1);
	CHECK_EQ(knitk_lane_ack(f.c, 1), 0);
	fx_fini(&f);
}

/* Publish three lanes, the middle one with a header that does not decode. */
static void publish_good_bad_good(struct knitk_producer *p)
{
	struct knitk_lane_header hs[3] = {
		{ .task_id = 1, .value = 1 }, { .task_id = 2 }, { .task_id = 3, .value = 3 },
	};
	struct knitk_lane_header *hp;
	uint64_t lanes = 0;
	int lane, i;

	for (i = 0; i < 3; i++) {
		lane = knitk_producer_stage(p, &hs[i], NULL, 0);
		REQUIRE(lane >= 0);
		if (i == 1) {
			REQUIRE(knitk_lane_header(p, (unsigned int)lane, &hp) == 0);
			hp->kind = 77;
		}
		lanes |= 1ULL << lane;
	}
	REQUIRE(knitk_lane_publish_batch(p, lanes) == 0);
}

/* Decode three lanes of @c (good, bad, good) two per call; ack them. */
static void check_good_bad_good(struct knitk_consumer *c)
{
	struct knitk_msg m[2] = { { .size = 0 } };
	uint64_t pend, batch;

	CHECK_EQ(knitk_lane_scan(c, &pend), 3);
	batch = pend;
	/* The good lane before the bad one first; the bad one stays. */
	CHECK_EQ(knitk_lane_decode_batch(c, &pend, m, 2, sizeof(m[0])), 1);
	CHECK_EQ(m[0].header.task_id, 1);
	CHECK_EQ(__builtin_popcountll(pend), 2);
	/* Then the bad one alone, taken. */
	CHECK_EQ(knitk_lane_decode_batch(c, &pend, m, 2, sizeof(m[0])), -EBADMSG);
	CHECK_EQ(m[0].header.task_id, 2);
	CHECK_EQ(m[0].header.kind, 77);
	CHECK_EQ(__builtin_popcountll(pend), 1);
	CHECK_EQ(knitk_lane_decode_batch(c, &pend, m, 2, sizeof(m[0])), 1);
	CHECK_EQ(m[0].header.task_id, 3);
	CHECK_EQ(m[0].header.value, 3);
	CHECK_EQ(pend, 0);
	CHECK_EQ(knitk_lane_ack(c, batch), 0);	/* all three retired */
	CHECK_EQ(knitk_lane_scan(c, &pend), 0);
}

static void decode_batch_bad_header(void)
{
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	publish_good_bad_good(f.p);
	check_good_bad_good(f.c);
	/* The cursor was kept: the next lanes still come in ring order. */
	publish_good_bad_good(f.p);
	check_good_bad_good(f.c);
	fx_fini(&f);
}

/* A claimant of a stealing mailbox decodes its copy the same way. */
static void decode_batch_steal_claimant(void)
{
	struct knitk_geometry g = {
		.flags = KNITK_GEOM_STEAL, .nr_workers = 1, .nr_submitters = 1,
		.lanes = KNITK_LANES, .inline_bytes = 64,
	};
	struct knitk_endpoint *host, *w;
	struct knitk_producer *p;
	struct knitk_consumer *c;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w) == 0);
	REQUIRE(knitk_endpoint_join(w, KNITK_ROLE_WORKER, 0) >= 1);
	REQUIRE(knitk_producer_create(host, 0, &p) == 0);
	REQUIRE(knitk_steal_consumer_create(w, 0,
		(unsigned int)knitk_steal_region_lanes(1, 0), &c) == 0);
	publish_good_bad_good(p);
	check_good_bad_good(c);
	knitk_consumer_destroy(c);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(w);
	knitk_endpoint_destroy(host);
}

/* Send and consume @n empty messages: the ring's cursor moves on by @n. */
static void fx_pass(struct fx *f, unsigned int n)
{
	struct knitk_lane_header hs[KNITK_LANES] = { { 0 } };
	uint64_t pend;

	REQUIRE(knitk_producer_send_batch(f->p, hs, NULL, 0, n) == (int)n);
	REQUIRE(knitk_lane_scan(f->c, &pend) == (int)n);
	REQUIRE(knitk_lane_ack(f->c, pend) == 0);
}

/* Stage a message with task id @id; returns its lane (0 on failure). */
static unsigned int fx_stage(struct fx *f, uint64_t id)
{
	struct knitk_lane_header h = { .task_id = id };
	int lane = knitk_producer_stage(f->p, &h, NULL, 0);

	CHECK(lane >= 0);
	return lane < 0 ? 0 : (unsigned int)lane;
}

/* Everything pending comes out with the task ids 1, 2, ... @n. */
static void fx_expect_ids(struct fx *f, unsigned int n)
{
	struct knitk_msg m[KNITK_LANES];
	uint64_t pend, all;
	unsigned int i;

	REQUIRE(knitk_lane_scan(f->c, &pend) == (int)n);
	all = pend;
	REQUIRE(knitk_lane_decode_batch(f->c, &pend, m, KNITK_LANES, sizeof(m[0])) == (int)n);
	for (i = 0; i < n; i++)
		CHECK_EQ(m[i].header.task_id, i + 1);
	CHECK_EQ(knitk_lane_ack(f->c, all), 0);
}

/*
 * knitk_lane_publish_batch: the lanes come out in the order they were
 * claimed, whether that is lane order, lane order from some lane round
 * the ring, or neither (a lane held while the ring went round).
 */
static void publish_batch_in_claim_order(void)
{
	unsigned int a, b, c;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	/* Lane order: 5, 6, 7. */
	fx_pass(&f, 5);
	a = fx_stage(&f, 1);
	b = fx_stage(&f, 2);
	c = fx_stage(&f, 3);
	CHECK(a < b && b < c);
	CHECK_EQ(knitk_lane_publish_batch(f.p, 1ULL << a | 1ULL << b | 1ULL << c), 0);
	fx_expect_ids(&f, 3);
	/* Round the ring: 62, 63, 0, 1. */
	fx_pass(&f, KNITK_LANES - 2 - 8);
	a = fx_stage(&f, 1);
	b = fx_stage(&f, 2);
	c = fx_stage(&f, 3);
	CHECK_EQ(a, KNITK_LANES - 2);
	CHECK_EQ(c, 0);
	CHECK_EQ(knitk_lane_publish_batch(f.p, 1ULL << a | 1ULL << b | 1ULL << c |
					  1ULL << fx_stage(&f, 4)), 0);
	fx_expect_ids(&f, 4);
	/*
	 * Neither: lane 10 held while the ring goes round, then lane 0 and
	 * lane 21 (lane order 0, 10, 21; claim order 10, 0, 21).
	 */
	fx_pass(&f, 8);
	a = fx_stage(&f, 1);
	CHECK_EQ(a, 10);
	fx_pass(&f, KNITK_LANES - 11);
	b = fx_stage(&f, 2);
	CHECK_EQ(b, 0);
	fx_pass(&f, 19);
	c = fx_stage(&f, 3);
	CHECK_EQ(c, 21);
	CHECK_EQ(knitk_lane_publish_batch(f.p, 1ULL << a | 1ULL << b | 1ULL << c), 0);
	fx_expect_ids(&f, 3);
	fx_fini(&f);
}

int main(void)
{
	TEST(send_batch_inline);
	TEST(send_batch_values);
	TEST(send_batch_stops_at_full_mailbox);
	TEST(send_batch_arena);
	TEST(send_batch_bad_arguments);
	TEST(decode_batch_limit_and_stride);
	TEST(decode_batch_bad_arguments);
	TEST(decode_batch_bad_header);
	TEST(decode_batch_steal_claimant);
	TEST(publish_batch_in_claim_order);
	return tap_exit();
}
