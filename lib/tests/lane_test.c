// SPDX-License-Identifier: GPL-2.0
/*
 * The lane protocol on one knot (futex backend, one process): claim,
 * reserve, publish (single and batched), scan, decode, ack; backpressure;
 * the cached ack word; arena payloads; stealing acks; a producer standing
 * in for a dead consumer.
 */
#include <errno.h>
#include <knitk.h>

#include "fixtures.h"

static void fill(void *buf, size_t len, uint64_t seed)
{
	unsigned char *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = (unsigned char)(seed * 31 + i * 7 + (i >> 8));
}

static int same(const void *buf, size_t len, uint64_t seed)
{
	const unsigned char *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != (unsigned char)(seed * 31 + i * 7 + (i >> 8)))
			return 0;
	return 1;
}

static void value_roundtrip(void)
{
	struct knitk_lane_header h = { .function_id = 7, .task_id = 99,
				       .value = 0x1122334455667788ULL,
				       .deadline_ns = 5, .abort_id = 3, .tag = 4 };
	struct knitk_msg m = { .size = sizeof(m) };
	struct fx f;
	uint64_t pend;
	int lane;

	REQUIRE(fx_init(&f, 128, 0) == 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 0);
	lane = knitk_producer_send(f.p, &h, NULL, 0);
	CHECK_EQ(lane, 0);
	CHECK_EQ(knitk_mailbox_pending(f.k, (unsigned int)f.mailbox, &pend), 1);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 1);
	CHECK_EQ(knitk_lane_next(f.c, &pend), 0);
	CHECK_EQ(knitk_lane_next(f.c, &pend), -ENOENT);
	REQUIRE(knitk_lane_decode(f.c, 0, &m) == 0);
	CHECK_EQ(m.header.kind, KNITK_PAYLOAD_VALUE);
	CHECK_EQ(m.header.value, h.value);
	CHECK_EQ(m.header.function_id, 7);
	CHECK_EQ(m.header.task_id, 99);
	CHECK_EQ(m.header.deadline_ns, 5);
	CHECK_EQ(m.header.abort_id, 3);
	CHECK_EQ(m.header.tag, 4);
	CHECK(m.data == NULL && m.len == 0);
	CHECK_EQ(knitk_lane_ack(f.c, 1), 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 0);
	CHECK_EQ(knitk_mailbox_pending(f.k, (unsigned int)f.mailbox, &pend), 0);
	fx_fini(&f);
}

/* knitk_msg is sized: a size below its first version is refused. */
static void msg_size_checked(void)
{
	struct knitk_lane_header h = { .function_id = 1 };
	struct {
		struct knitk_msg m;
		unsigned char guard[16];
	} big;
	struct knitk_msg m;
	struct fx f;
	uint64_t pend;
	unsigned int i;

	REQUIRE(fx_init(&f, 128, 0) == 0);
	REQUIRE(knitk_producer_send(f.p, &h, NULL, 0) == 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 1);
	memset(&m, 0, sizeof(m));
	CHECK_EQ(knitk_lane_decode(f.c, 0, &m), -EINVAL);
	m.size = KNITK_MSG_SIZE_VER0 - 1;
	CHECK_EQ(knitk_lane_decode(f.c, 0, &m), -EINVAL);
	CHECK_EQ(m.header.function_id, 0);
	memset(&big, 0x5a, sizeof(big));
	big.m.size = sizeof(big);
	CHECK_EQ(knitk_lane_decode(f.c, 0, &big.m), 0);
	CHECK_EQ(big.m.size, sizeof(big.m));
	CHECK_EQ(big.m.header.function_id, 1);
	for (i = 0; i < sizeof(big.guard); i++)
		CHECK_EQ(big.guard[i], 0x5a);
	CHECK_EQ(knitk_lane_ack(f.c, 1), 0);
	fx_fini(&f);
}

static void inline_and_arena_payloads(void)
{
	static unsigned char buf[70000];
	struct knitk_lane_header h = { 0 };
	struct knitk_msg m = { .size = sizeof(m) };
	size_t sizes[] = { 0, 1, 127, 128, 129, 4096, 70000 };
	uint64_t pend;
	struct fx f;
	unsigned int i;
	int lane;

	REQUIRE(fx_init(&f, 128, 1 << 20) == 0);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		fill(buf, sizes[i], i);
		h.task_id = i;
		REQUIRE(knitk_producer_send(f.p, &h, buf, sizes[i]) >= 0 || sizes[i] == 0);
	}
	/* size 0 with data NULL is a value; with data it is an empty payload */
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 7);
	for (i = 0; i < 7; i++) {
		lane = knitk_lane_next(f.c, &pend);
		CHECK_EQ(lane, (int)i);		/* publish order */
		REQUIRE(knitk_lane_decode(f.c, (unsigned int)lane, &m) == 0);
		CHECK_EQ(m.header.task_id, i);
		CHECK_EQ(m.len, sizes[i]);
		CHECK_EQ(m.header.kind, sizes[i] == 0 ? KNITK_PAYLOAD_NONE :
			 sizes[i] <= 128 ? KNITK_PAYLOAD_INLINE : KNITK_PAYLOAD_ARENA);
		CHECK(same(m.data, m.len, i));
	}
	CHECK_EQ(knitk_lane_ack(f.c, 0x7f), 0);
	fx_fini(&f);
}

/*
 * Empty messages into every lane of @f's mailbox (64): how many sends took
 * the next lane in order before one did not.
 */
static int fill_mailbox(struct fx *f)
{
	struct knitk_lane_header h = { 0 };
	int i;

	for (i = 0; i < 64; i++)
		if (knitk_producer_send(f->p, &h, NULL, 0) != i)
			break;
	return i;
}

static void full_mailbox_is_backpressure(void)
{
	struct knitk_lane_header h = { 0 };
	uint64_t pend;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	CHECK_EQ(fill_mailbox(&f), 64);
	CHECK_EQ(knitk_producer_send(f.p, &h, NULL, 0), -EAGAIN);
	CHECK_EQ(knitk_lane_claim(f.p), -EAGAIN);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 64);
	CHECK_EQ(knitk_lane_ack(f.c, 0x3), 0);
	CHECK_EQ(knitk_producer_send(f.p, &h, NULL, 0), 0);
	CHECK_EQ(knitk_producer_send(f.p, &h, NULL, 0), 1);
	CHECK_EQ(knitk_producer_send(f.p, &h, NULL, 0), -EAGAIN);
	fx_fini(&f);
}

/*
 * docs/protocol.md L3: the producer works from its cached ack word until
 * its view is full.  With lanes 35 and 50 acked it refreshes (full) and
 * takes 35; then lane 40 is acked, but the cached view still offers 50,
 * which it takes before refreshing again and finding 40.
 */
static void cached_ack_refreshed_on_exhaustion(void)
{
	uint64_t pend;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	REQUIRE(fill_mailbox(&f) == 64);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 64);
	CHECK_EQ(knitk_lane_ack(f.c, 1ULL << 35 | 1ULL << 50), 0);
	CHECK_EQ(knitk_lane_claim(f.p), 35);
	CHECK_EQ(knitk_lane_ack(f.c, 1ULL << 40), 0);
	CHECK_EQ(knitk_lane_claim(f.p), 50);
	CHECK_EQ(knitk_lane_claim(f.p), 40);
	CHECK_EQ(knitk_lane_claim(f.p), -EAGAIN);
	fx_fini(&f);
}

static void batched_publish_one_store(void)
{
	struct knitk_lane_header *hp;
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pend, batch = 0;
	struct fx f;
	void *buf;
	int i, lane;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	for (i = 0; i < 5; i++) {
		lane = knitk_lane_claim(f.p);
		REQUIRE(lane == i);
		REQUIRE(knitk_lane_header(f.p, (unsigned int)lane, &hp) == 0);
		hp->task_id = 100 + (uint64_t)i;
		REQUIRE(knitk_lane_reserve(f.p, (unsigned int)lane, 8, &buf) == 0);
		memcpy(buf, &hp->task_id, 8);
		batch |= 1ULL << lane;
	}
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 0);	/* nothing before the store */
	CHECK_EQ(knitk_lane_publish_batch(f.p, batch), 0);
	CHECK_EQ(knitk_lane_publish_batch(f.p, batch), -EPERM);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 5);
	for (i = 0; i < 5; i++) {
		uint64_t v;

		lane = knitk_lane_next(f.c, &pend);
		REQUIRE(knitk_lane_decode(f.c, (unsigned int)lane, &m) == 0);
		memcpy(&v, m.data, 8);
		CHECK_EQ(v, 100 + (uint64_t)i);
		CHECK_EQ(m.header.task_id, v);
	}
	CHECK_EQ(knitk_lane_ack(f.c, batch), 0);
	fx_fini(&f);
}

/*
 * knitk_producer_stage fills lanes that only a publish shows; the scan
 * counts every pending lane, up to all 64, whatever the pattern.
 */
static void staged_lanes_and_scan_counts(void)
{
	struct knitk_lane_header h = { .function_id = 3 };
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pend, all = 0, every3 = 0, x;
	struct fx f;
	int i, lane;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	for (i = 0; i < KNITK_LANES; i++) {
		x = 1000 + (uint64_t)i;
		h.task_id = x;
		lane = knitk_producer_stage(f.p, &h, &x, sizeof(x));
		REQUIRE(lane == i);
		all |= 1ULL << lane;
		if (i % 3 == 0 && i < 63)
			every3 |= 1ULL << lane;	/* 21 lanes */
	}
	CHECK_EQ(knitk_producer_stage(f.p, &h, &x, sizeof(x)), -EAGAIN);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 0);	/* staged: not published */
	CHECK_EQ(knitk_lane_release(f.p, 63), 0);
	CHECK_EQ(knitk_lane_publish_batch(f.p, all & ~every3 & ~(1ULL << 63)), 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 42);
	CHECK_EQ(knitk_lane_publish_batch(f.p, every3), 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 63);
	REQUIRE(knitk_lane_decode(f.c, 62, &m) == 0);
	CHECK_EQ(m.header.task_id, 1062);
	CHECK(m.len == 8 && !memcmp(m.data, &(uint64_t){ 1062 }, 8));
	CHECK_EQ(knitk_lane_ack(f.c, every3), 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 42);
	CHECK_EQ(pend, all & ~every3 & ~(1ULL << 63));
	CHECK_EQ(knitk_lane_ack(f.c, pend), 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 0);
	fx_fini(&f);
}

/* Giving back the last claim keeps lanes in publish order. */
static void release_keeps_publish_order(void)
{
	struct knitk_lane_header h = { 0 };
	uint64_t pend;
	struct fx f;
	int i, lane;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	for (i = 0; i < 100; i++) {
		lane = knitk_lane_claim(f.p);
		REQUIRE(lane >= 0);
		CHECK_EQ(knitk_lane_release(f.p, (unsigned int)lane), 0);
		h.task_id = (uint64_t)i;
		CHECK_EQ(knitk_producer_send(f.p, &h, NULL, 0), lane);
		if (i % 10 == 9) {
			uint64_t want = (uint64_t)i - 9;
			struct knitk_msg m = { .size = sizeof(m) };

			CHECK_EQ(knitk_lane_scan(f.c, &pend), 10);
			while ((lane = knitk_lane_next(f.c, &pend)) >= 0) {
				REQUIRE(knitk_lane_decode(f.c, (unsigned int)lane, &m) == 0);
				CHECK_EQ(m.header.task_id, want);
				want++;
				CHECK_EQ(knitk_lane_ack(f.c, 1ULL << lane), 0);
			}
		}
	}
	fx_fini(&f);
}

/* A failed or abandoned write rolls its arena space back privately. */
static void release_rolls_back_arena(void)
{
	struct knitk_lane_header h = { 0 };
	uint64_t pend;
	struct fx f;
	void *buf;
	int lane;

	REQUIRE(fx_init(&f, 0, 1 << 16) == 0);
	lane = knitk_lane_claim(f.p);
	REQUIRE(lane >= 0);
	CHECK_EQ(knitk_lane_reserve(f.p, (unsigned int)lane, 1 << 16, &buf), 0);
	CHECK_EQ(knitk_lane_release(f.p, (unsigned int)lane), 0);
	CHECK_EQ(knitk_lane_release(f.p, (unsigned int)lane), -EPERM);
	CHECK_EQ(knitk_lane_publish(f.p, (unsigned int)lane), -EPERM);
	lane = knitk_lane_claim(f.p);
	REQUIRE(lane >= 0);
	CHECK_EQ(knitk_lane_reserve(f.p, (unsigned int)lane, 1 << 16, &buf), 0);
	/* reserving again replaces the reservation */
	CHECK_EQ(knitk_lane_reserve(f.p, (unsigned int)lane, 1 << 16, &buf), 0);
	CHECK_EQ(knitk_lane_set_value(f.p, (unsigned int)lane, 5), 0);
	CHECK_EQ(knitk_lane_reserve(f.p, (unsigned int)lane, 1 << 16, &buf), 0);
	CHECK_EQ(knitk_lane_publish(f.p, (unsigned int)lane), 0);
	CHECK_EQ(knitk_producer_send(f.p, &h, &h, 64), -ENOSPC);
	CHECK_EQ(knitk_producer_send(f.p, &h, &h, (1 << 16) + 1), -EMSGSIZE);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 1);	/* nothing left claimed */
	CHECK_EQ(knitk_lane_ack(f.c, pend), 0);
	CHECK(knitk_producer_send(f.p, &h, &h, 64) >= 0);
	fx_fini(&f);
}

/*
 * A claimed lane's header is in the shared lanes: a consumer that writes
 * it (another lane's arena slot, or none) makes neither its release nor
 * its next reserve free another message's bytes, or leak its own.
 */
static void release_ignores_a_written_header(void)
{
	struct knitk_lane_header h = { 0 }, *hp;
	struct knitk_msg msg = { .size = sizeof(msg) };
	static unsigned char big[1 << 16];
	uint64_t pend;
	uint32_t other;
	void *buf;
	int lane, sent;
	struct fx f;

	REQUIRE(fx_init(&f, 0, 1 << 16) == 0);
	sent = knitk_lane_claim(f.p);
	REQUIRE(sent >= 0);
	REQUIRE(knitk_lane_reserve(f.p, (unsigned int)sent, 20000, &buf) == 0);
	fill(buf, 20000, 5);
	REQUIRE(knitk_lane_header(f.p, (unsigned int)sent, &hp) == 0);
	other = hp->arena_slot;
	REQUIRE(knitk_lane_publish(f.p, (unsigned int)sent) == 0);
	lane = knitk_lane_claim(f.p);
	REQUIRE(lane >= 0);
	REQUIRE(knitk_lane_reserve(f.p, (unsigned int)lane, 30000, &buf) == 0);
	REQUIRE(knitk_lane_header(f.p, (unsigned int)lane, &hp) == 0);
	hp->arena_slot = other;			/* names the pending message's */
	CHECK_EQ(knitk_lane_release(f.p, (unsigned int)lane), 0);
	/* Our 30000 bytes are free again; the pending 20000 are not. */
	CHECK(knitk_producer_send(f.p, &h, big, (1 << 16) - 20000 - 64) >= 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 2);
	CHECK_EQ(knitk_lane_decode(f.c, (unsigned int)sent, &msg), 0);
	CHECK(msg.len == 20000 && same(msg.data, 20000, 5));
	CHECK_EQ(knitk_lane_ack(f.c, pend), 0);

	/* Scribbled to no payload at all: the reserve still replaces ours. */
	lane = knitk_lane_claim(f.p);
	REQUIRE(lane >= 0);
	REQUIRE(knitk_lane_reserve(f.p, (unsigned int)lane, 40000, &buf) == 0);
	REQUIRE(knitk_lane_header(f.p, (unsigned int)lane, &hp) == 0);
	hp->kind = KNITK_PAYLOAD_NONE;
	hp->arena_slot = KNITK_ARENA_NO_SLOT;
	CHECK_EQ(knitk_lane_release(f.p, (unsigned int)lane), 0);
	/* Not leaked: the whole arena fits again. */
	CHECK(knitk_producer_send(f.p, &h, big, sizeof(big)) >= 0);
	fx_fini(&f);
}

/*
 * knitting's aliasing bug, end to end: 64 equal-size arena payloads, a
 * partial ack, the same size again: every payload arrives intact.
 */
static void regression_equal_size_partial_free(void)
{
	static unsigned char buf[3000];
	struct knitk_lane_header h = { 0 };
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pend, part = 0, seen = 0;
	struct fx f;
	int i, lane, n = 0;

	REQUIRE(fx_init(&f, 0, 48 * 4096) == 0);	/* 64 x 3008 fit, 65 do not */
	for (i = 0; i < 64; i++) {
		fill(buf, sizeof(buf), (uint64_t)i);
		h.task_id = (uint64_t)i;
		REQUIRE(knitk_producer_send(f.p, &h, buf, sizeof(buf)) == i);
	}
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 64);
	for (i = 0; i < 8; i++) {		/* consume 8 of 64 */
		lane = knitk_lane_next(f.c, &pend);
		REQUIRE(knitk_lane_decode(f.c, (unsigned int)lane, &m) == 0);
		CHECK(same(m.data, m.len, m.header.task_id));
		seen |= 1ULL << m.header.task_id;
		part |= 1ULL << lane;
		n++;
	}
	CHECK_EQ(knitk_lane_ack(f.c, part), 0);
	for (i = 64; i < 72; i++) {		/* the same size again */
		fill(buf, sizeof(buf), (uint64_t)i);
		h.task_id = (uint64_t)i;
		CHECK(knitk_producer_send(f.p, &h, buf, sizeof(buf)) >= 0);
	}
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 64);
	while ((lane = knitk_lane_next(f.c, &pend)) >= 0) {
		REQUIRE(knitk_lane_decode(f.c, (unsigned int)lane, &m) == 0);
		CHECK_EQ(m.len, sizeof(buf));
		CHECK(same(m.data, m.len, m.header.task_id));
		if (m.header.task_id < 64)
			CHECK(!(seen & (1ULL << m.header.task_id)));
		n++;
	}
	CHECK_EQ(n, 72);
	fx_fini(&f);
}

static void bad_headers_and_arguments(void)
{
	struct knitk_lane_header *hp, h = { 0 };
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pend;
	struct fx f;
	int lane;

	REQUIRE(fx_init(&f, 64, 4096) == 0);
	CHECK_EQ(knitk_lane_decode(f.c, 0, &m), -EPERM);	/* not pending */
	CHECK_EQ(knitk_lane_ack(f.c, 1), -EPERM);
	CHECK_EQ(knitk_lane_publish(f.p, 0), -EPERM);
	CHECK_EQ(knitk_lane_header(f.p, 64, &hp), -EINVAL);
	CHECK_EQ(knitk_lane_ack(f.c, 0), -EINVAL);
	CHECK_EQ(knitk_producer_create(f.k, 99, &f.p), -EINVAL);
	lane = knitk_lane_claim(f.p);
	REQUIRE(knitk_lane_header(f.p, (unsigned int)lane, &hp) == 0);
	hp->kind = 77;
	knitk_lane_publish(f.p, (unsigned int)lane);
	lane = knitk_lane_claim(f.p);
	REQUIRE(knitk_lane_header(f.p, (unsigned int)lane, &hp) == 0);
	hp->kind = KNITK_PAYLOAD_ARENA;
	hp->arena_slot = 0;
	hp->value = 4000;
	hp->length = 200;			/* past the arena */
	knitk_lane_publish(f.p, (unsigned int)lane);
	lane = knitk_lane_claim(f.p);
	REQUIRE(knitk_lane_header(f.p, (unsigned int)lane, &hp) == 0);
	hp->kind = KNITK_PAYLOAD_INLINE;
	hp->length = 65;			/* more than inline_bytes */
	knitk_lane_publish(f.p, (unsigned int)lane);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 3);
	CHECK_EQ(knitk_lane_decode(f.c, 0, &m), -EBADMSG);
	CHECK_EQ(knitk_lane_decode(f.c, 1, &m), -EBADMSG);
	CHECK_EQ(knitk_lane_decode(f.c, 2, &m), -EBADMSG);
	CHECK_EQ(knitk_lane_ack(f.c, 0x7), 0);	/* still retired */
	CHECK(knitk_producer_send(f.p, &h, NULL, 0) >= 0);
	fx_fini(&f);
}

/* A stealing request mailbox: effective ack = XOR of the steal lines. */
static void steal_effective_ack(void)
{
	struct knitk_geometry g = {
		.flags = KNITK_GEOM_STEAL, .nr_workers = 2, .nr_submitters = 1,
		.lanes = KNITK_LANES, .inline_bytes = 64,
	};
	struct knitk_lane_header h = { 0 };
	struct knitk_consumer *c;
	struct knitk_producer *p;
	struct knitk_endpoint *k;
	struct knitk_layout l;
	struct knitk_steal_line *sl;
	uint64_t pend;
	void *base;
	int i;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k) == 0);
	knitk_endpoint_layout(k, &l, NULL);
	knitk_endpoint_base(k, &base);
	sl = (struct knitk_steal_line *)((char *)base + l.steal_off);
	CHECK_EQ(knitk_endpoint_request_mailbox(k, 0, 1), 0);
	CHECK_EQ(knitk_consumer_create(k, 0, &c), -EOPNOTSUPP);
	REQUIRE(knitk_producer_create(k, 0, &p) == 0);
	for (i = 0; i < 64; i++)
		REQUIRE(knitk_producer_send(p, &h, NULL, 0) == i);
	CHECK_EQ(knitk_producer_send(p, &h, NULL, 0), -EAGAIN);
	sl[0].ack = 0xffULL;			/* worker 0 retired lanes 0..7 */
	sl[1].ack = 0xff00ULL;			/* worker 1 retired 8..15 */
	CHECK_EQ(knitk_mailbox_pending(k, 0, &pend), 48);
	CHECK_EQ(pend, ~0xffffULL);
	for (i = 0; i < 16; i++)
		CHECK_EQ(knitk_producer_send(p, &h, NULL, 0), i);
	CHECK_EQ(knitk_producer_send(p, &h, NULL, 0), -EAGAIN);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(k);
}

static struct knitk_sector *sector_of(struct fx *f)
{
	void *base;

	knitk_endpoint_base(f->k, &base);
	return (struct knitk_sector *)((char *)base + f->l.mailbox_off +
				       (uint64_t)f->mailbox * f->l.mailbox_stride);
}

/*
 * The producer stands in for a dead consumer: every lane acknowledged,
 * every arena slot free, also when the consumer died inside its ack
 * with the free word stored and the ack word not.
 */
static void reset_consumer_frees_everything(void)
{
	struct knitk_geometry sg = {
		.flags = KNITK_GEOM_STEAL, .nr_workers = 2, .nr_submitters = 1,
		.lanes = KNITK_LANES,
	};
	struct knitk_lane_header h = { 0 };
	struct knitk_producer *sp;
	struct knitk_endpoint *sk;
	struct knitk_sector *sec;
	struct knitk_msg msg = { .size = sizeof(msg) };
	uint64_t pend, frees = 0;
	static unsigned char big[1 << 16];
	struct fx f;
	int i;

	REQUIRE(fx_init(&f, 64, 1 << 16) == 0);
	sec = sector_of(&f);
	for (i = 0; i < 3; i++)
		REQUIRE(knitk_producer_send(f.p, &h, big, 20000) == i);
	CHECK_EQ(knitk_producer_send(f.p, &h, big, 20000), -ENOSPC);
	for (i = 3; i < 64; i++)
		REQUIRE(knitk_producer_send(f.p, &h, NULL, 0) == i);
	CHECK_EQ(knitk_producer_send(f.p, &h, NULL, 0), -EAGAIN);
	/* The consumer dies in knitk_lane_ack: frees stored, ack not. */
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 64);
	for (i = 0; i < 3; i++) {
		REQUIRE(knitk_lane_decode(f.c, (unsigned int)i, &msg) == 0);
		frees ^= 1ULL << msg.header.arena_slot;
	}
	sec->arena_free ^= frees;
	knitk_consumer_destroy(f.c);
	f.c = NULL;

	CHECK_EQ(knitk_producer_reset_consumer(f.p), 0);
	CHECK_EQ(knitk_mailbox_pending(f.k, (unsigned int)f.mailbox, &pend), 0);
	/* The whole arena is free: none of the three slots came back live. */
	REQUIRE(knitk_producer_send(f.p, &h, big, sizeof(big)) >= 0);
	for (i = 1; i < 64; i++)
		REQUIRE(knitk_producer_send(f.p, &h, NULL, 0) >= 0);
	/* A consumer created now starts from the state left. */
	REQUIRE(knitk_consumer_create(f.k, (unsigned int)f.mailbox, &f.c) == 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 64);
	CHECK_EQ(knitk_lane_ack(f.c, pend), 0);
	CHECK(knitk_producer_send(f.p, &h, big, sizeof(big)) >= 0);
	fx_fini(&f);

	CHECK_EQ(knitk_producer_reset_consumer(NULL), -EINVAL);
	REQUIRE(knitk_endpoint_create(&sg, KNITK_KNOT_FUTEX, &sk) == 0);
	REQUIRE(knitk_producer_create(sk, 0, &sp) == 0);
	CHECK_EQ(knitk_producer_reset_consumer(sp), -EOPNOTSUPP);
	knitk_producer_destroy(sp);
	knitk_endpoint_destroy(sk);
}

/*
 * Lanes claimed and filled in place, not published, when the consumer
 * dies are the producer's: the reset acknowledges every pending lane and
 * frees every other arena slot, and leaves them claimed with their bytes
 * and their arena room; published afterwards, the next consumer reads
 * them whole.
 */
static void reset_consumer_keeps_claimed_lane(void)
{
	struct knitk_lane_header h = { 0 }, *hp, saved[2];
	struct knitk_msg msg = { .size = sizeof(msg) };
	static unsigned char big[1 << 16];
	size_t left = (1 << 16) - 20032;	/* the arena past our 20000 bytes */
	void *abuf, *ibuf;
	uint64_t pend;
	int alane, ilane;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 1 << 16) == 0);
	alane = knitk_lane_claim(f.p);
	ilane = knitk_lane_claim(f.p);
	REQUIRE(alane >= 0 && ilane >= 0);
	REQUIRE(knitk_lane_reserve(f.p, (unsigned int)alane, 20000, &abuf) == 0);
	REQUIRE(knitk_lane_reserve(f.p, (unsigned int)ilane, 40, &ibuf) == 0);
	fill(abuf, 20000, 77);
	fill(ibuf, 40, 78);
	/* The dead consumer leaves pending lanes and their arena bytes. */
	REQUIRE(knitk_producer_send(f.p, &h, big, 20000) >= 0);
	REQUIRE(knitk_producer_send(f.p, &h, big, 20000) >= 0);
	CHECK_EQ(knitk_producer_send(f.p, &h, big, 20000), -ENOSPC);
	while (knitk_producer_send(f.p, &h, NULL, 0) >= 0)
		;
	CHECK_EQ(knitk_mailbox_pending(f.k, (unsigned int)f.mailbox, &pend), 62);
	knitk_consumer_destroy(f.c);
	f.c = NULL;

	/*
	 * Headers in the shared lanes are no record: a consumer could write
	 * the claimed lanes' (here, each naming another slot) and the reset
	 * goes by the producer's own.
	 */
	REQUIRE(knitk_lane_header(f.p, (unsigned int)alane, &hp) == 0);
	saved[0] = *hp;
	hp->arena_slot = (hp->arena_slot + 1) % KNITK_ARENA_SLOTS;
	REQUIRE(knitk_lane_header(f.p, (unsigned int)ilane, &hp) == 0);
	saved[1] = *hp;
	hp->kind = KNITK_PAYLOAD_ARENA;
	hp->arena_slot = saved[0].arena_slot;
	CHECK_EQ(knitk_producer_reset_consumer(f.p), 0);
	REQUIRE(knitk_lane_header(f.p, (unsigned int)alane, &hp) == 0);
	*hp = saved[0];
	REQUIRE(knitk_lane_header(f.p, (unsigned int)ilane, &hp) == 0);
	*hp = saved[1];
	CHECK_EQ(knitk_mailbox_pending(f.k, (unsigned int)f.mailbox, &pend), 0);
	/* Still claimed, bytes and room kept: every other byte is free. */
	REQUIRE(knitk_lane_header(f.p, (unsigned int)alane, &hp) == 0);
	CHECK_EQ(hp->kind, KNITK_PAYLOAD_ARENA);
	CHECK_EQ(hp->length, 20000);
	hp->task_id = 1;
	REQUIRE(knitk_lane_header(f.p, (unsigned int)ilane, &hp) == 0);
	hp->task_id = 2;
	CHECK(same(abuf, 20000, 77));
	CHECK(same(ibuf, 40, 78));
	CHECK_EQ(knitk_producer_send(f.p, &h, big, left + 1), -ENOSPC);
	CHECK(knitk_producer_send(f.p, &h, big, left) >= 0);

	/* Published, the next consumer reads them whole. */
	REQUIRE(knitk_consumer_create(f.k, (unsigned int)f.mailbox, &f.c) == 0);
	CHECK_EQ(knitk_lane_publish(f.p, (unsigned int)alane), 0);
	CHECK_EQ(knitk_lane_publish(f.p, (unsigned int)ilane), 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 3);
	CHECK_EQ(knitk_lane_decode(f.c, (unsigned int)alane, &msg), 0);
	CHECK_EQ(msg.header.task_id, 1);
	CHECK(msg.len == 20000 && same(msg.data, 20000, 77));
	CHECK_EQ(knitk_lane_decode(f.c, (unsigned int)ilane, &msg), 0);
	CHECK_EQ(msg.header.task_id, 2);
	CHECK(msg.len == 40 && same(msg.data, 40, 78));
	CHECK_EQ(knitk_lane_ack(f.c, pend), 0);
	/* And their arena room is free again: the whole arena fits. */
	CHECK(knitk_producer_send(f.p, &h, big, sizeof(big)) >= 0);
	fx_fini(&f);
}

/*
 * A consumer that acknowledges a lane keeping its arena bytes
 * (knitk_lane_ack_keep) leaves them live: the producer places nothing
 * over them, a stand-in for a dead consumer does not free them while the
 * producer's side holds them (knitk_producer_keep), and
 * knitk_producer_free_kept gives them back, once.  A slot the consumer
 * freed after all, or placed anew since, is not kept (-ESTALE).
 * knitk_lane_arena tells where a staged lane's bytes are, and which
 * placement of the slot, from the producer's own record.
 */
static void ack_keep_hands_slot_to_producer(void)
{
	struct knitk_lane_header h = { 0 };
	struct knitk_msg msg = { .size = sizeof(msg) };
	static unsigned char big[1 << 16];
	unsigned char *kept;
	uint64_t pend;
	int lane, other, slot, i;
	uint64_t placed, again;
	size_t len;
	void *buf;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 1 << 16) == 0);
	memset(big, 0xa5, 30000);
	lane = knitk_producer_stage(f.p, &h, big, 30000);
	REQUIRE(lane >= 0);
	slot = knitk_lane_arena(f.p, (unsigned int)lane, &buf, &len, &placed);
	CHECK(slot >= 0 && slot < KNITK_ARENA_SLOTS);
	CHECK_EQ(len, (size_t)30000);
	kept = buf;
	CHECK(kept[0] == 0xa5 && kept[29999] == 0xa5);
	CHECK_EQ(knitk_lane_arena(f.p, (unsigned int)lane, NULL, NULL, &again), slot);
	CHECK_EQ(again, placed);
	REQUIRE(knitk_lane_publish(f.p, (unsigned int)lane) == 0);
	/* Published: no longer the producer's claimed lane. */
	CHECK_EQ(knitk_lane_arena(f.p, (unsigned int)lane, &buf, &len, NULL), -EPERM);
	other = knitk_producer_stage(f.p, &h, big, 8);
	REQUIRE(other >= 0);
	CHECK_EQ(knitk_lane_arena(f.p, (unsigned int)other, &buf, &len, NULL), -ENOENT);
	REQUIRE(knitk_lane_publish(f.p, (unsigned int)other) == 0);

	CHECK_EQ(knitk_lane_scan(f.c, &pend), 2);
	REQUIRE(knitk_lane_decode(f.c, (unsigned int)lane, &msg) == 0);
	CHECK(msg.data == (const void *)kept);
	CHECK_EQ(knitk_lane_ack_keep(f.c, pend, ~0ULL), -EINVAL);
	CHECK_EQ(knitk_lane_ack_keep(NULL, pend, 0), -EINVAL);
	CHECK_EQ(knitk_lane_ack_keep(f.c, pend, 1ULL << lane), 0);
	/* Live: room for what is left of the arena only, placed elsewhere. */
	CHECK_EQ(knitk_producer_send(f.p, &h, big, 40000), -ENOSPC);
	memset(big, 0x11, 30000);
	for (i = 0; i < 20; i++) {
		REQUIRE(knitk_producer_send(f.p, &h, big, 30000) >= 0);
		CHECK_EQ(knitk_lane_scan(f.c, &pend), 1);
		CHECK_EQ(knitk_lane_ack(f.c, pend), 0);
	}
	CHECK(kept[0] == 0xa5 && kept[15000] == 0xa5 && kept[29999] == 0xa5);

	/* Held by the producer's side: a stand-in leaves it. */
	CHECK_EQ(knitk_producer_keep(f.p, KNITK_ARENA_SLOTS, placed), -EINVAL);
	CHECK_EQ(knitk_producer_free_kept(f.p, (unsigned int)(slot + 1) % 64), -EINVAL);
	CHECK_EQ(knitk_producer_keep(f.p, (unsigned int)slot, placed + 1), -ESTALE);
	CHECK_EQ(knitk_producer_keep(f.p, (unsigned int)slot, placed), 0);
	knitk_consumer_destroy(f.c);
	f.c = NULL;
	CHECK_EQ(knitk_producer_reset_consumer(f.p), 0);
	CHECK_EQ(knitk_producer_send(f.p, &h, big, 40000), -ENOSPC);
	CHECK(kept[0] == 0xa5 && kept[29999] == 0xa5);
	CHECK_EQ(knitk_producer_free_kept(f.p, (unsigned int)slot), 0);
	CHECK_EQ(knitk_producer_free_kept(f.p, (unsigned int)slot), -EINVAL);
	/* Everything free again: the whole arena in one payload. */
	REQUIRE(knitk_consumer_create(f.k, (unsigned int)f.mailbox, &f.c) == 0);
	CHECK(knitk_producer_send(f.p, &h, big, sizeof(big)) >= 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 1);
	CHECK_EQ(knitk_lane_ack(f.c, pend), 0);

	/* A slot its consumer freed, or placed anew since, is not kept. */
	lane = knitk_producer_stage(f.p, &h, big, 30000);
	REQUIRE(lane >= 0);
	slot = knitk_lane_arena(f.p, (unsigned int)lane, NULL, NULL, &placed);
	REQUIRE(slot >= 0 && knitk_lane_publish(f.p, (unsigned int)lane) == 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 1);
	CHECK_EQ(knitk_lane_ack(f.c, pend), 0);
	CHECK_EQ(knitk_producer_keep(f.p, (unsigned int)slot, placed), -ESTALE);
	CHECK_EQ(knitk_producer_free_kept(f.p, (unsigned int)slot), -EINVAL);
	for (i = 0; i < 4; i++) {
		REQUIRE(knitk_producer_send(f.p, &h, big, 30000) >= 0);
		CHECK_EQ(knitk_lane_scan(f.c, &pend), 1);
		CHECK_EQ(knitk_lane_ack(f.c, pend), 0);
		CHECK_EQ(knitk_producer_keep(f.p, (unsigned int)slot, placed), -ESTALE);
	}
	fx_fini(&f);
}

int main(void)
{
	TEST(value_roundtrip);
	TEST(msg_size_checked);
	TEST(inline_and_arena_payloads);
	TEST(full_mailbox_is_backpressure);
	TEST(cached_ack_refreshed_on_exhaustion);
	TEST(batched_publish_one_store);
	TEST(staged_lanes_and_scan_counts);
	TEST(release_keeps_publish_order);
	TEST(release_rolls_back_arena);
	TEST(regression_equal_size_partial_free);
	TEST(bad_headers_and_arguments);
	TEST(steal_effective_ack);
	TEST(reset_consumer_frees_everything);
	TEST(reset_consumer_keeps_claimed_lane);
	TEST(release_ignores_a_written_header);
	TEST(ack_keep_hands_slot_to_producer);
	return tap_exit();
}
