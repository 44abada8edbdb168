// SPDX-License-Identifier: GPL-2.0
/*
 * The batch calls keep publish order and lose nothing at their edges
 * (futex backend, one process): knitk_producer_send_batch and
 * knitk_lane_decode_batch at the ring's wrap and at the inline/arena edge,
 * staged lanes and batches in publish order, a knitk_lane_reserve that
 * fails, the region size a knot records, and doorbell stats' sizes.
 */
#include <errno.h>
#include <knitk.h>

#include "tap.h"
#include "fixtures.h"

/* Send @n values task_id = @base + i in one batch; 0 when all went. */
static int send_ids(struct fx *f, uint64_t base, unsigned int n)
{
	struct knitk_lane_header hs[KNITK_LANES] = { { 0 } };
	unsigned int i;

	for (i = 0; i < n; i++)
		hs[i].task_id = base + i;
	return knitk_producer_send_batch(f->p, hs, NULL, 0, n) == (int)n ? 0 : -1;
}

/* Receive everything pending; the task ids must run @base, @base + 1, ... */
static unsigned int recv_ids(struct fx *f, uint64_t base)
{
	struct knitk_msg m[KNITK_LANES];
	uint64_t pend, all;
	int n, i;

	n = knitk_lane_scan(f->c, &pend);
	all = pend;
	if (n <= 0)
		return 0;
	CHECK_EQ(knitk_lane_decode_batch(f->c, &pend, m, KNITK_LANES, sizeof(m[0])), n);
	for (i = 0; i < n; i++)
		CHECK_EQ(m[i].header.task_id, base + (uint64_t)i);
	CHECK_EQ(knitk_lane_ack(f->c, all), 0);
	return (unsigned int)n;
}

/*
 * A batch whose lanes wrap past lane 63 (62, 63, 0, 1): the consumer gets
 * message i as the i-th, as it does for any other batch.
 */
static void send_batch_across_the_wrap(void)
{
	unsigned int start;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	for (start = 1; start < KNITK_LANES; start += 7) {
		REQUIRE(send_ids(&f, 0, start) == 0);
		CHECK_EQ(recv_ids(&f, 0), start);
		/* A full ring from wherever the cursor is now. */
		REQUIRE(send_ids(&f, 1000, KNITK_LANES) == 0);
		CHECK_EQ(recv_ids(&f, 1000), KNITK_LANES);
		REQUIRE(send_ids(&f, 2000, 5) == 0);
		CHECK_EQ(recv_ids(&f, 2000), 5);
	}
	fx_fini(&f);
}

/* The same wrap on a stealing mailbox, through its only claimant. */
static void steal_batch_across_the_wrap(void)
{
	struct knitk_geometry g = {
		.flags = KNITK_GEOM_STEAL, .nr_workers = 1, .nr_submitters = 1,
		.lanes = KNITK_LANES, .inline_bytes = 64,
	};
	struct knitk_endpoint *host, *w;
	struct fx f;
	unsigned int got;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w) == 0);
	REQUIRE(knitk_endpoint_join(w, KNITK_ROLE_WORKER, 0) >= 1);
	f.k = host;
	REQUIRE(knitk_producer_create(host, 0, &f.p) == 0);
	REQUIRE(knitk_steal_consumer_create(w, 0, 0, &f.c) == 0);
	REQUIRE(send_ids(&f, 0, 62) == 0);
	for (got = 0; got < 62;)
		REQUIRE((got += recv_ids(&f, got)) > 0);
	/* Lanes 62 and 63 (one region), then 0 and 1 (another). */
	REQUIRE(send_ids(&f, 100, 4) == 0);
	CHECK_EQ(recv_ids(&f, 100), 2);
	CHECK_EQ(recv_ids(&f, 102), 2);
	knitk_consumer_destroy(f.c);
	knitk_producer_destroy(f.p);
	knitk_endpoint_destroy(w);
	knitk_endpoint_destroy(host);
}

/* Arena room of 1000-byte messages is back in full: 4 of them in 4096. */
static void check_arena_whole(struct fx *f)
{
	static unsigned char d[4][1000];
	struct knitk_msg m[4];
	uint64_t pend;

	CHECK_EQ(knitk_producer_send_batch(f->p, NULL, d, sizeof(d[0]), 4), 4);
	CHECK_EQ(knitk_lane_scan(f->c, &pend), 4);
	CHECK_EQ(knitk_lane_decode_batch(f->c, &pend, m, 4, sizeof(m[0])), 4);
	CHECK_EQ(m[3].header.kind, KNITK_PAYLOAD_ARENA);
	CHECK_EQ(knitk_lane_ack(f->c, m[0].lane == 0 ? 0xfULL :
				(0xfULL << m[0].lane) | (0xfULL >> (64 - m[0].lane))), 0);
}

/*
 * A reserve that fails (-ENOSPC now, -EMSGSIZE ever) keeps the lane's
 * arena reservation, its inline payload or its value, bytes and all.
 */
static void failed_reserve_keeps_the_lane(void)
{
	struct knitk_lane_header *h, before;
	unsigned char other[2048];
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pend;
	void *buf, *buf2;
	int lane, sent;
	size_t i;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 4096) == 0);
	lane = knitk_lane_claim(f.p);
	REQUIRE(lane >= 0);
	REQUIRE(knitk_lane_header(f.p, (unsigned int)lane, &h) == 0);
	REQUIRE(knitk_lane_reserve(f.p, (unsigned int)lane, 2048, &buf) == 0);
	memset(buf, 'x', 2048);
	memset(other, 'o', sizeof(other));
	sent = knitk_producer_send(f.p, &(struct knitk_lane_header){ .task_id = 9 },
				   other, sizeof(other));
	REQUIRE(sent >= 0);
	before = *h;
	CHECK_EQ(knitk_lane_reserve(f.p, (unsigned int)lane, 3000, &buf2), -ENOSPC);
	CHECK(!memcmp(h, &before, sizeof(before)));
	CHECK_EQ(knitk_lane_reserve(f.p, (unsigned int)lane, 5000, &buf2), -EMSGSIZE);
	CHECK(!memcmp(h, &before, sizeof(before)));
	h->task_id = 8;
	REQUIRE(knitk_lane_publish(f.p, (unsigned int)lane) == 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 2);
	CHECK_EQ(pend, (1ULL << lane) | (1ULL << sent));
	CHECK_EQ(knitk_lane_decode(f.c, (unsigned int)lane, &m), 0);
	CHECK_EQ(m.len, 2048);
	for (i = 0; i < m.len; i++)
		if (((const unsigned char *)m.data)[i] != 'x')
			break;
	CHECK_EQ(i, 2048);
	CHECK_EQ(knitk_lane_ack(f.c, pend), 0);
	check_arena_whole(&f);

	/* A value and an inline payload survive a refused arena reserve. */
	lane = knitk_lane_claim(f.p);
	REQUIRE(lane >= 0);
	REQUIRE(knitk_lane_header(f.p, (unsigned int)lane, &h) == 0);
	REQUIRE(knitk_lane_set_value(f.p, (unsigned int)lane, 77) == 0);
	CHECK_EQ(knitk_lane_reserve(f.p, (unsigned int)lane, 4097, &buf2), -EMSGSIZE);
	CHECK_EQ(h->kind, KNITK_PAYLOAD_VALUE);
	CHECK_EQ(h->value, 77);
	REQUIRE(knitk_lane_reserve(f.p, (unsigned int)lane, 64, &buf) == 0);
	memset(buf, 'i', 64);
	CHECK_EQ(knitk_lane_reserve(f.p, (unsigned int)lane, 4097, &buf2), -EMSGSIZE);
	CHECK_EQ(h->kind, KNITK_PAYLOAD_INLINE);
	CHECK_EQ(h->length, 64);
	CHECK_EQ(((unsigned char *)buf)[63], 'i');
	CHECK_EQ(knitk_lane_release(f.p, (unsigned int)lane), 0);
	check_arena_whole(&f);
	fx_fini(&f);
}

/*
 * The inline/arena edge in one batch, and an arena that fills in the
 * middle of one: what went is what arrives, nothing stays claimed and
 * no arena slot leaks (a whole arena's batch fits afterwards).
 */
static void send_batch_edges_and_arena_fill(void)
{
	static unsigned char d[8][1024];
	struct knitk_msg m[8];
	uint64_t pend, all;
	unsigned int len, round;
	int n, i;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 4096) == 0);
	for (i = 0; i < 8; i++)
		memset(d[i], 'A' + i, sizeof(d[i]));
	for (len = 64; len <= 65; len++) {
		CHECK_EQ(knitk_producer_send_batch(f.p, NULL, d, len, 3), 3);
		CHECK_EQ(knitk_lane_scan(f.c, &pend), 3);
		all = pend;
		CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 8, sizeof(m[0])), 3);
		for (i = 0; i < 3; i++) {
			CHECK_EQ(m[i].header.kind, len == 64 ? KNITK_PAYLOAD_INLINE :
							     KNITK_PAYLOAD_ARENA);
			CHECK_EQ(m[i].len, len);
			CHECK(!memcmp(m[i].data, (const char *)d + (size_t)i * len, len));
		}
		CHECK_EQ(knitk_lane_ack(f.c, all), 0);
	}
	/* 1024-byte messages (1024 + nothing: 4 fit), sent 3 at a time. */
	for (round = 0; round < 5; round++) {
		n = knitk_producer_send_batch(f.p, NULL, d, 1024, 3);
		CHECK_EQ(n, 3);
		n = knitk_producer_send_batch(f.p, NULL, d[3], 1024, 3);
		CHECK_EQ(n, 1);				/* full in the middle */
		CHECK_EQ(knitk_producer_send_batch(f.p, NULL, d, 1024, 1), -ENOSPC);
		CHECK_EQ(knitk_lane_scan(f.c, &pend), 4);
		all = pend;
		CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 8, sizeof(m[0])), 4);
		for (i = 0; i < 4; i++)
			CHECK_EQ(((const unsigned char *)m[i].data)[1023], 'A' + i);
		CHECK_EQ(knitk_lane_ack(f.c, all), 0);
	}
	CHECK_EQ(knitk_producer_reset_consumer(f.p), 0);	/* nothing claimed */
	check_arena_whole(&f);
	fx_fini(&f);
}

/*
 * A stride that is not a multiple of struct knitk_msg's alignment would
 * put every other element at an address the struct may not live at: it
 * is refused (-EINVAL) with nothing taken, as a short size is.
 */
static void decode_batch_unaligned_stride(void)
{
	_Alignas(struct knitk_msg) unsigned char buf[4 * (sizeof(struct knitk_msg) + 8)];
	const size_t sz = sizeof(struct knitk_msg);
	struct knitk_msg *m = (struct knitk_msg *)buf;
	uint64_t pend;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	REQUIRE(send_ids(&f, 1, 3) == 0);
	CHECK_EQ(knitk_lane_scan(f.c, &pend), 3);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 3, sz + 1), -EINVAL);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 3, sz + 4), -EINVAL);
	CHECK_EQ(pend, 0x7ULL);
	CHECK_EQ(knitk_lane_decode_batch(f.c, &pend, m, 3, sz + 8), 3);
	CHECK_EQ(((struct knitk_msg *)(buf + 2 * (sz + 8)))->header.task_id, 3);
	CHECK_EQ(knitk_lane_ack(f.c, 0x7), 0);
	fx_fini(&f);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static unsigned int rnd(unsigned int n)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned int)(rng_state >> 33) % n;
}

#define ORDER_MAX 8192

/*
 * Staged lanes published late, alone or several in one store, between
 * send batches; the consumer mixes decode batches of any size with
 * knitk_lane_next and acks as it goes.  It gets the task ids in exactly
 * the publish order (a store of several staged lanes publishes them in
 * the order they were staged).
 */
static void staged_and_batches_in_publish_order(void)
{
	static uint64_t order[ORDER_MAX];
	struct knitk_lane_header hs[KNITK_LANES] = { { 0 } };
	unsigned int published = 0, got = 0, nheld = 0, i, j, n, round;
	uint64_t next_id = 1, pend = 0, taken, lanes, held_id[8];
	unsigned int held_lane[8];
	struct knitk_msg m[KNITK_LANES];
	int lane, k;
	struct fx f;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	for (round = 0; round < 3000 && published < ORDER_MAX - 2 * KNITK_LANES; round++) {
		switch (rnd(5)) {
		case 0:				/* stage one, publish later */
			if (nheld == 8)
				break;
			hs[0].task_id = next_id;
			lane = knitk_producer_stage(f.p, &hs[0], NULL, 0);
			if (lane < 0)
				break;
			held_lane[nheld] = (unsigned int)lane;
			held_id[nheld++] = next_id++;
			break;
		case 1:				/* a send batch */
			n = 1 + rnd(KNITK_LANES);
			for (i = 0; i < n; i++)
				hs[i].task_id = next_id + i;
			k = knitk_producer_send_batch(f.p, hs, NULL, 0, n);
			for (i = 0; k > 0 && i < (unsigned int)k; i++)
				order[published++] = next_id + i;
			next_id += n;		/* unsent ids are never reused */
			break;
		case 2:				/* publish one held lane */
			if (!nheld)
				break;
			i = rnd(nheld);
			CHECK_EQ(knitk_lane_publish(f.p, held_lane[i]), 0);
			order[published++] = held_id[i];
			for (j = i; j + 1 < nheld; j++) {
				held_lane[j] = held_lane[j + 1];
				held_id[j] = held_id[j + 1];
			}
			nheld--;
			break;
		case 3:				/* publish all held in one store */
			if (!nheld)
				break;
			for (lanes = 0, i = 0; i < nheld; i++) {
				lanes |= 1ULL << held_lane[i];
				order[published++] = held_id[i];
			}
			CHECK_EQ(knitk_lane_publish_batch(f.p, lanes), 0);
			nheld = 0;
			break;
		default:			/* consume some, ack them */
			if (!pend && knitk_lane_scan(f.c, &pend) <= 0)
				break;
			taken = pend;
			if (rnd(3)) {
				k = knitk_lane_decode_batch(f.c, &pend, m, 1 + rnd(KNITK_LANES),
							    sizeof(m[0]));
				REQUIRE(k > 0);
			} else {
				m[0].size = sizeof(m[0]);
				lane = knitk_lane_next(f.c, &pend);
				REQUIRE(lane >= 0);
				REQUIRE(knitk_lane_decode(f.c, (unsigned int)lane, &m[0]) == 0);
				k = 1;
			}
			for (i = 0; i < (unsigned int)k; i++) {
				REQUIRE(got < published);
				CHECK_EQ(m[i].header.task_id, order[got]);
				got++;
			}
			CHECK_EQ(knitk_lane_ack(f.c, taken & ~pend), 0);
			break;
		}
	}
	CHECK(published > 1000);
	CHECK(got > 1000);
	fx_fini(&f);
}

/* Create a futex knot from @g; its layout's geometry into @out. */
static int region_of(const struct knitk_geometry *g, struct knitk_geometry *out,
		     struct knitk_endpoint **ep)
{
	struct knitk_layout l;
	int ret = knitk_endpoint_create(g, KNITK_KNOT_FUTEX, ep);

	if (ret)
		return ret;
	return knitk_endpoint_layout(*ep, &l, out);
}

/*
 * region_lanes on the futex backend: 0 is resolved to the default and
 * recorded, an explicit size is kept, an attached endpoint reads the
 * same; illegal sizes (not a power of two, too large for the workers,
 * any without KNITK_GEOM_STEAL) are -EINVAL; claimants and hand-offs
 * take 0 and the knot's size, and nothing else.
 */
static void region_lanes_recorded(void)
{
	struct knitk_geometry g = {
		.flags = KNITK_GEOM_STEAL, .nr_workers = 3, .nr_submitters = 1,
		.lanes = KNITK_LANES, .inline_bytes = 64,
	}, out, out2;
	struct knitk_endpoint *host, *w0, *w1;
	struct knitk_consumer *c = NULL;
	struct knitk_producer *p;
	struct knitk_layout l;
	static const uint32_t bad[] = { 3, 32, 64, 128, 0x80000000U };
	unsigned int i;

	REQUIRE(region_of(&g, &out, &host) == 0);
	CHECK_EQ(out.region_lanes, knitk_steal_region_lanes(3, 0));
	CHECK_EQ(out.region_lanes, 16);		/* 64 / 16 >= 3 + 1 */
	CHECK_EQ(g.region_lanes, 0);		/* the caller's copy is const */
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w0) == 0);
	REQUIRE(knitk_endpoint_layout(w0, &l, &out2) == 0);
	CHECK(!memcmp(&out, &out2, sizeof(out)));
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_endpoint_join(w0, KNITK_ROLE_WORKER, 0) >= 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w1) == 0);
	REQUIRE(knitk_endpoint_join(w1, KNITK_ROLE_WORKER, 1) >= 1);
	REQUIRE(knitk_producer_create(host, 0, &p) == 0);
	for (i = 0; i < 4; i++) {
		CHECK_EQ(knitk_steal_consumer_create(w0, 0, 1U << i, &c), -EINVAL);
		CHECK_EQ(knitk_producer_hand_off(p, 1, 1U << i), -EINVAL);
	}
	CHECK_EQ(knitk_steal_consumer_create(w0, 0, 32, &c), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(p, 1, 32), -EINVAL);
	CHECK_EQ(knitk_producer_hand_off(p, 1, 17), -EINVAL);
	CHECK(!c);
	CHECK_EQ(knitk_producer_hand_off(p, 1, 0), 0);	/* nothing published */
	CHECK_EQ(knitk_producer_hand_off(p, 1, 16), 0);
	CHECK_EQ(knitk_steal_consumer_create(w0, 0, 16, &c), 0);
	knitk_consumer_destroy(c);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(w1);
	knitk_endpoint_destroy(w0);
	knitk_endpoint_destroy(host);

	/* An explicit legal size is what the knot records. */
	g.region_lanes = 8;
	REQUIRE(region_of(&g, &out, &host) == 0);
	CHECK_EQ(out.region_lanes, 8);
	knitk_endpoint_destroy(host);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		g.region_lanes = bad[i];
		host = NULL;
		CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host), -EINVAL);
		CHECK(!host);
	}
	/* Without stealing, any non-zero size is refused and 0 is kept. */
	g.flags = 0;
	g.region_lanes = 16;
	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host), -EINVAL);
	g.region_lanes = 0;
	REQUIRE(region_of(&g, &out, &host) == 0);
	CHECK_EQ(out.region_lanes, 0);
	knitk_endpoint_destroy(host);
}

/*
 * The doorbell stats size: KNITK_SIZED_MAX + 1 and beyond are -E2BIG
 * with the buffer untouched; KNITK_SIZED_MAX itself is not refused for
 * its size (on the futex backend, which keeps no counters, -EOPNOTSUPP).
 */
static void doorbell_stats_sizes(void)
{
	static unsigned char buf[KNITK_SIZED_MAX + 64];
	struct knitk_doorbell_stats *st = (void *)buf;
	struct fx f;
	size_t i;

	REQUIRE(fx_init(&f, 64, 0) == 0);
	memset(buf, 0xa5, sizeof(buf));
	CHECK_EQ(knitk_endpoint_doorbell_stats(f.k, 0, st, KNITK_SIZED_MAX + 1), -E2BIG);
	CHECK_EQ(knitk_endpoint_doorbell_stats(f.k, 0, st, (size_t)-1), -E2BIG);
	CHECK_EQ(knitk_endpoint_doorbell_stats(f.k, 0, st, KNITK_SIZED_MAX), -EOPNOTSUPP);
	CHECK_EQ(knitk_endpoint_doorbell_stats(f.k, 0, st, sizeof(*st)), -EOPNOTSUPP);
	CHECK_EQ(knitk_endpoint_doorbell_stats(f.k, KNITK_NR_DOORBELLS, st, sizeof(*st)),
		 -EINVAL);
	for (i = 0; i < sizeof(buf) && buf[i] == 0xa5; i++)
		;
	CHECK_EQ(i, sizeof(buf));
	fx_fini(&f);
}

int main(void)
{
	TEST(send_batch_across_the_wrap);
	TEST(steal_batch_across_the_wrap);
	TEST(failed_reserve_keeps_the_lane);
	TEST(send_batch_edges_and_arena_fill);
	TEST(decode_batch_unaligned_stride);
	TEST(staged_and_batches_in_publish_order);
	TEST(region_lanes_recorded);
	TEST(doorbell_stats_sizes);
	return tap_exit();
}
