// SPDX-License-Identifier: GPL-2.0
/*
 * Adversarial cases of the batch calls (futex backend, one process):
 * knitk_producer_send_batch and knitk_lane_decode_batch at the ring's
 * wrap and at the inline/arena edge, and a knitk_lane_reserve that fails.
 */
#include <errno.h>
#include <knitk.h>

#include "tap.h"

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

int main(void)
{
	TEST(send_batch_across_the_wrap);
	TEST(steal_batch_across_the_wrap);
	return tap_exit();
}
