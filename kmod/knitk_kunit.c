// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit suites for the pure logic of knitk: geometry validation, layout
 * math, the notify filter, the spurious-wake verdict and peer-death
 * bookkeeping, plus the wait path on a real knot with a sleeping kernel
 * thread, the poll state's wakes, what the tracepoints report and the
 * huge chunks of a knot's memory.  Linked into the
 * module under CONFIG_KNITK_KUNIT_TEST, so the tests call the module's
 * internal functions directly.  Expected layouts are worked out by hand
 * from the formula in <linux/knitk.h>, not with the code under test.
 */
#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/ktime.h>
#include <linux/poll.h>
#include <linux/sched/task.h>
#include <linux/slab.h>

#include "knitk_internal.h"

/* ---- geometry validation ------------------------------------------------ */

static struct knitk_geometry knitk_test_geom(u32 workers, u32 submitters)
{
	struct knitk_geometry g = {
		.nr_workers = workers,
		.nr_submitters = submitters,
		.lanes = KNITK_LANES,
	};

	return g;
}

static void knitk_geometry_accepts_minimal(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(1, 1);

	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), 0);
	g.flags = KNITK_GEOM_STEAL;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), 0);
}

static void knitk_geometry_accepts_limits(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(KNITK_MAX_WORKERS,
						  KNITK_MAX_SUBMITTERS);

	g.inline_bytes = KNITK_MAX_INLINE_BYTES;
	g.abort_bits = KNITK_MAX_ABORT_BITS;
	g.arena_bytes = KNITK_MAX_ARENA_BYTES;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), 0);
	g.flags = KNITK_GEOM_STEAL;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), 0);
}

static void knitk_geometry_rejects_flags_and_reserved(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(2, 1);
	int i;

	g.flags = 1U << 2;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.flags = 1U << 31 | KNITK_GEOM_STEAL;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.flags = 0;
	for (i = 0; i < ARRAY_SIZE(g.reserved); i++) {
		g.reserved[i] = 1;
		KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
		g.reserved[i] = 0;
	}
	g.reserved0 = 1;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.reserved0 = 0;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), 0);
}

/*
 * region_lanes: without KNITK_GEOM_STEAL only 0; with it 0 or a power of
 * two g with 64 / g >= workers + 1, and the knot records 0 as the largest.
 */
static void knitk_geometry_checks_region_lanes(struct kunit *test)
{
	static const u32 bad2[] = { 3, 12, 32, 64, 128, 1U << 31, U32_MAX };
	struct knitk_geometry g = knitk_test_geom(2, 1);
	int i;

	g.region_lanes = 16;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.region_lanes = 0;
	KUNIT_EXPECT_EQ(test, knitk_geometry_region_lanes(&g), 0U);

	g.flags = KNITK_GEOM_STEAL;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), 0);
	KUNIT_EXPECT_EQ(test, knitk_geometry_region_lanes(&g), 16U);
	for (i = 1; i <= 16; i *= 2) {
		g.region_lanes = i;
		KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), 0);
		KUNIT_EXPECT_EQ(test, knitk_geometry_region_lanes(&g), (u32)i);
	}
	for (i = 0; i < ARRAY_SIZE(bad2); i++) {
		g.region_lanes = bad2[i];
		KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	}

	/* The default at the edges: 1 worker 32, 3 workers 16, 63 workers 1. */
	g.region_lanes = 0;
	g.nr_workers = 1;
	KUNIT_EXPECT_EQ(test, knitk_geometry_region_lanes(&g), 32U);
	g.nr_workers = 3;
	KUNIT_EXPECT_EQ(test, knitk_geometry_region_lanes(&g), 16U);
	g.nr_workers = 4;
	KUNIT_EXPECT_EQ(test, knitk_geometry_region_lanes(&g), 8U);
	g.nr_workers = 31;
	KUNIT_EXPECT_EQ(test, knitk_geometry_region_lanes(&g), 2U);
	g.nr_workers = KNITK_MAX_WORKERS;
	KUNIT_EXPECT_EQ(test, knitk_geometry_region_lanes(&g), 1U);
	g.region_lanes = 1;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), 0);
	g.region_lanes = 2;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
}

static void knitk_geometry_rejects_counts(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(0, 1);

	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.nr_workers = KNITK_MAX_WORKERS + 1;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.nr_workers = 1;
	g.nr_submitters = 0;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.nr_submitters = KNITK_MAX_SUBMITTERS + 1;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.nr_submitters = 1;
	g.lanes = 32;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.lanes = 0;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
}

static void knitk_geometry_rejects_sizes(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(1, 1);

	g.inline_bytes = KNITK_CACHELINE + 1;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.inline_bytes = KNITK_MAX_INLINE_BYTES + KNITK_CACHELINE;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.inline_bytes = 0;
	g.abort_bits = KNITK_ABORT_ALIGN / 2;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.abort_bits = KNITK_MAX_ABORT_BITS + KNITK_ABORT_ALIGN;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.abort_bits = 0;
	g.arena_bytes = 100;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.arena_bytes = KNITK_MAX_ARENA_BYTES + KNITK_ARENA_ALIGN;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), -EINVAL);
	g.arena_bytes = KNITK_ARENA_ALIGN;
	KUNIT_EXPECT_EQ(test, knitk_geometry_check(&g), 0);
}

static struct kunit_case knitk_geometry_cases[] = {
	KUNIT_CASE(knitk_geometry_accepts_minimal),
	KUNIT_CASE(knitk_geometry_accepts_limits),
	KUNIT_CASE(knitk_geometry_rejects_flags_and_reserved),
	KUNIT_CASE(knitk_geometry_rejects_counts),
	KUNIT_CASE(knitk_geometry_rejects_sizes),
	KUNIT_CASE(knitk_geometry_checks_region_lanes),
	{}
};

static struct kunit_suite knitk_geometry_suite = {
	.name = "knitk_geometry",
	.test_cases = knitk_geometry_cases,
};

/* ---- layout math --------------------------------------------------------- */

static void knitk_layout_private_small(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(2, 1);
	struct knitk_layout l;

	knitk_layout_compute(&g, &l);
	KUNIT_EXPECT_EQ(test, l.control_size, 4096ULL);
	KUNIT_EXPECT_EQ(test, l.doorbell_off, 4096ULL);
	KUNIT_EXPECT_EQ(test, l.doorbell_stride, 64U);
	KUNIT_EXPECT_EQ(test, l.nr_doorbells, 64U);
	KUNIT_EXPECT_EQ(test, l.abort_off, 8192ULL);
	KUNIT_EXPECT_EQ(test, l.abort_size, 0ULL);
	KUNIT_EXPECT_EQ(test, l.steal_off, 0ULL);
	KUNIT_EXPECT_EQ(test, l.nr_steal, 0U);
	KUNIT_EXPECT_EQ(test, l.mailbox_off, 8192ULL);
	KUNIT_EXPECT_EQ(test, l.nr_request, 2U);
	KUNIT_EXPECT_EQ(test, l.nr_mailboxes, 4U);
	KUNIT_EXPECT_EQ(test, l.lane_off, 256U);
	KUNIT_EXPECT_EQ(test, l.lane_stride, 64U);
	/* 256 + 64 * 64 = 4352 rounds up to two pages. */
	KUNIT_EXPECT_EQ(test, l.arena_off, 8192ULL);
	KUNIT_EXPECT_EQ(test, l.arena_size, 0ULL);
	KUNIT_EXPECT_EQ(test, l.mailbox_stride, 8192ULL);
	KUNIT_EXPECT_EQ(test, l.size, 40960ULL);
	KUNIT_EXPECT_EQ(test, l.reserved[0] | l.reserved[1] | l.reserved[2] |
			      l.reserved[3], 0ULL);
}

static void knitk_layout_steal_with_arena(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(4, 2);
	struct knitk_layout l;

	g.flags = KNITK_GEOM_STEAL;
	g.inline_bytes = 192;
	g.abort_bits = 4096;
	g.arena_bytes = 65536;
	knitk_layout_compute(&g, &l);
	KUNIT_EXPECT_EQ(test, l.abort_off, 8192ULL);
	KUNIT_EXPECT_EQ(test, l.abort_size, 4096ULL);
	KUNIT_EXPECT_EQ(test, l.steal_off, 12288ULL);
	KUNIT_EXPECT_EQ(test, l.steal_stride, 64U);
	KUNIT_EXPECT_EQ(test, l.nr_steal, 8U);
	KUNIT_EXPECT_EQ(test, l.mailbox_off, 16384ULL);
	KUNIT_EXPECT_EQ(test, l.nr_request, 2U);
	KUNIT_EXPECT_EQ(test, l.nr_mailboxes, 6U);
	KUNIT_EXPECT_EQ(test, l.lane_stride, 256U);
	/* 256 + 64 * 256 = 16640 rounds up to five pages. */
	KUNIT_EXPECT_EQ(test, l.arena_off, 20480ULL);
	KUNIT_EXPECT_EQ(test, l.arena_size, 65536ULL);
	KUNIT_EXPECT_EQ(test, l.mailbox_stride, 86016ULL);
	KUNIT_EXPECT_EQ(test, l.size, 532480ULL);
}

static void knitk_layout_largest(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(KNITK_MAX_WORKERS,
						  KNITK_MAX_SUBMITTERS);
	struct knitk_layout l;

	g.inline_bytes = KNITK_MAX_INLINE_BYTES;
	g.abort_bits = KNITK_MAX_ABORT_BITS;
	g.arena_bytes = KNITK_MAX_ARENA_BYTES;
	knitk_layout_compute(&g, &l);
	KUNIT_EXPECT_EQ(test, l.abort_size, 131072ULL);
	KUNIT_EXPECT_EQ(test, l.mailbox_off, 139264ULL);
	KUNIT_EXPECT_EQ(test, l.nr_request, 4032U);
	KUNIT_EXPECT_EQ(test, l.nr_mailboxes, 4095U);
	KUNIT_EXPECT_EQ(test, l.lane_stride, 16448U);
	KUNIT_EXPECT_EQ(test, l.arena_off, 1056768ULL);
	KUNIT_EXPECT_EQ(test, l.mailbox_stride, 4296024064ULL);
	KUNIT_EXPECT_EQ(test, l.size, 17592218681344ULL);
}

static void knitk_layout_steal_largest(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(KNITK_MAX_WORKERS,
						  KNITK_MAX_SUBMITTERS);
	struct knitk_layout l;

	g.flags = KNITK_GEOM_STEAL;
	knitk_layout_compute(&g, &l);
	KUNIT_EXPECT_EQ(test, l.steal_off, 8192ULL);
	KUNIT_EXPECT_EQ(test, l.nr_steal, 4032U);
	/* 4032 lines of 64 bytes are exactly 63 pages. */
	KUNIT_EXPECT_EQ(test, l.mailbox_off, 266240ULL);
	KUNIT_EXPECT_EQ(test, l.nr_request, 64U);
	KUNIT_EXPECT_EQ(test, l.nr_mailboxes, 127U);
	KUNIT_EXPECT_EQ(test, l.size, 1306624ULL);
}

static void knitk_layout_regions_page_aligned(struct kunit *test)
{
	static const u32 inl[] = { 0, 64, 4032, 16384 };
	struct knitk_geometry g = knitk_test_geom(3, 5);
	struct knitk_layout l;
	int i, steal;

	for (steal = 0; steal < 2; steal++) {
		for (i = 0; i < ARRAY_SIZE(inl); i++) {
			g.flags = steal ? KNITK_GEOM_STEAL : 0;
			g.inline_bytes = inl[i];
			g.abort_bits = 64 * (i + 1);
			g.arena_bytes = 4096 * i;
			knitk_layout_compute(&g, &l);
			KUNIT_EXPECT_EQ(test, l.size % KNITK_PAGE_BYTES, 0ULL);
			KUNIT_EXPECT_EQ(test, l.mailbox_off % KNITK_PAGE_BYTES,
					0ULL);
			KUNIT_EXPECT_EQ(test, l.arena_off % KNITK_PAGE_BYTES,
					0ULL);
			KUNIT_EXPECT_GE(test, l.arena_off, (u64)l.lane_off +
					KNITK_LANES * l.lane_stride);
			KUNIT_EXPECT_EQ(test, l.size, l.mailbox_off +
					(u64)l.nr_mailboxes * l.mailbox_stride);
		}
	}
}

static void knitk_layout_size_limit(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(2, 1);
	struct knitk_layout l;

	knitk_layout_compute(&g, &l);
	KUNIT_EXPECT_EQ(test, knitk_layout_check_size(&l, l.size), 0);
	KUNIT_EXPECT_EQ(test, knitk_layout_check_size(&l, l.size + 1), 0);
	KUNIT_EXPECT_EQ(test, knitk_layout_check_size(&l, l.size - 1), -E2BIG);
	KUNIT_EXPECT_EQ(test, knitk_layout_check_size(&l, 0), -E2BIG);

	g = knitk_test_geom(KNITK_MAX_WORKERS, KNITK_MAX_SUBMITTERS);
	g.arena_bytes = KNITK_MAX_ARENA_BYTES;
	knitk_layout_compute(&g, &l);
	KUNIT_EXPECT_EQ(test, knitk_layout_check_size(&l, 256ULL << 20),
			-E2BIG);
}

/*
 * A knot's pages, @knot->control->huge_bytes of them in chunks: each
 * chunk is KNITK_CHUNK_PAGES consecutive pfns from a chunk boundary of
 * the knot, and every page is a single page with one reference (what
 * the mapping and the free expect).  Returns the chunks found.
 */
static unsigned long knitk_test_chunks(struct kunit *test,
				       const struct knitk_knot *knot)
{
	unsigned long i, j, found = 0;

	for (i = 0; i < knot->nr_pages; i++) {
		KUNIT_EXPECT_FALSE(test, PageCompound(knot->pages[i]));
		KUNIT_EXPECT_EQ(test, page_count(knot->pages[i]), 1);
	}
	for (i = 0; i + KNITK_CHUNK_PAGES <= knot->nr_pages;
	     i += KNITK_CHUNK_PAGES) {
		unsigned long pfn = page_to_pfn(knot->pages[i]);

		for (j = 1; j < KNITK_CHUNK_PAGES; j++)
			if (page_to_pfn(knot->pages[i + j]) != pfn + j)
				break;
		found += j == KNITK_CHUNK_PAGES;
	}
	return found;
}

/*
 * A knot of 2 MiB or more takes its pages in chunks where the allocator
 * has them (never with KNITK_GEOM_NO_HUGE or huge_chunks off), and the
 * kernel's view through the vmap and the pages' own addresses agree.
 */
static void knitk_knot_huge_chunks(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(2, 1);
	bool saved = knitk_huge_chunks;
	struct knitk_knot *knot;
	struct knitk_layout l;
	unsigned long chunks, i;
	u8 *b;

	g.arena_bytes = 1 << 20;
	knitk_layout_compute(&g, &l);
	KUNIT_ASSERT_GE(test, l.size, KNITK_HUGE_MIN_BYTES);

	WRITE_ONCE(knitk_huge_chunks, true);
	knot = knitk_knot_create(&g, &l);
	KUNIT_ASSERT_FALSE(test, IS_ERR(knot));
	chunks = knitk_test_chunks(test, knot);
	KUNIT_EXPECT_EQ(test, knot->control->huge_bytes,
			(u64)chunks * KNITK_CHUNK_PAGES * PAGE_SIZE);
	if (!chunks)
		kunit_info(test, "no chunk at hand: single pages only");
	b = knot->base;
	for (i = 0; i < knot->nr_pages; i++)
		b[i * PAGE_SIZE + i % PAGE_SIZE] = (u8)i;
	for (i = 0; i < knot->nr_pages; i++)
		KUNIT_EXPECT_EQ(test, ((u8 *)page_address(knot->pages[i]))[i % PAGE_SIZE],
				(u8)i);
	knitk_knot_put(knot);

	g.flags = KNITK_GEOM_NO_HUGE;
	knot = knitk_knot_create(&g, &l);
	KUNIT_ASSERT_FALSE(test, IS_ERR(knot));
	KUNIT_EXPECT_EQ(test, knot->control->huge_bytes, 0ULL);
	knitk_test_chunks(test, knot);
	knitk_knot_put(knot);

	g.flags = 0;
	WRITE_ONCE(knitk_huge_chunks, false);
	knot = knitk_knot_create(&g, &l);
	WRITE_ONCE(knitk_huge_chunks, saved);
	KUNIT_ASSERT_FALSE(test, IS_ERR(knot));
	KUNIT_EXPECT_EQ(test, knot->control->huge_bytes, 0ULL);
	knitk_knot_put(knot);
}

static struct kunit_case knitk_layout_cases[] = {
	KUNIT_CASE(knitk_layout_private_small),
	KUNIT_CASE(knitk_layout_steal_with_arena),
	KUNIT_CASE(knitk_layout_largest),
	KUNIT_CASE(knitk_layout_steal_largest),
	KUNIT_CASE(knitk_layout_regions_page_aligned),
	KUNIT_CASE(knitk_layout_size_limit),
	KUNIT_CASE(knitk_knot_huge_chunks),
	{}
};

static struct kunit_suite knitk_layout_suite = {
	.name = "knitk_layout",
	.test_cases = knitk_layout_cases,
};

/* ---- notify filter ------------------------------------------------------- */

/* A zeroed buffer shaped like the memory of a knot of geometry g. */
struct knitk_test_knot {
	struct knitk_geometry g;
	struct knitk_layout l;
	void *base;
};

static void knitk_test_knot_init(struct kunit *test, struct knitk_test_knot *k,
				 u32 workers, u32 submitters, u32 flags)
{
	k->g = knitk_test_geom(workers, submitters);
	k->g.flags = flags;
	KUNIT_ASSERT_EQ(test, knitk_geometry_check(&k->g), 0);
	knitk_layout_compute(&k->g, &k->l);
	k->base = kunit_kzalloc(test, k->l.size, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, k->base);
}

static struct knitk_sector *knitk_test_sector(struct knitk_test_knot *k, u32 m)
{
	return k->base + k->l.mailbox_off + (u64)m * k->l.mailbox_stride;
}

static struct knitk_steal_line *knitk_test_line(struct knitk_test_knot *k,
						u32 m, u32 w)
{
	return k->base + k->l.steal_off +
	       (u64)(m * k->g.nr_workers + w) * k->l.steal_stride;
}

static bool knitk_test_pending(struct knitk_test_knot *k, unsigned int d)
{
	return knitk_doorbell_pending(k->base, &k->g, &k->l, d);
}

static void knitk_notify_private_idle(struct kunit *test)
{
	struct knitk_test_knot k;
	u32 m;

	knitk_test_knot_init(test, &k, 3, 2, 0);
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, 0));
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, 2));
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, KNITK_DOORBELL_HOST));
	/* Equal non-zero words are all free lanes. */
	for (m = 0; m < k.l.nr_mailboxes; m++) {
		knitk_test_sector(&k, m)->pub = 0xf0f0;
		knitk_test_sector(&k, m)->ack = 0xf0f0;
	}
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, 1));
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, KNITK_DOORBELL_HOST));
}

static void knitk_notify_private_pending(struct kunit *test)
{
	struct knitk_test_knot k;

	knitk_test_knot_init(test, &k, 3, 2, 0);
	/* Submitter 1, worker 2: request mailbox 1 * 3 + 2 = 5. */
	knitk_test_sector(&k, 5)->pub = BIT_ULL(63);
	KUNIT_EXPECT_TRUE(test, knitk_test_pending(&k, 2));
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, 0));
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, 1));
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, KNITK_DOORBELL_HOST));
	/* The consumer acknowledges the lane. */
	knitk_test_sector(&k, 5)->ack = BIT_ULL(63);
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, 2));
	/* Submitter 0, worker 0: mailbox 0. */
	knitk_test_sector(&k, 0)->ack = 1;
	KUNIT_EXPECT_TRUE(test, knitk_test_pending(&k, 0));
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, 2));
}

static void knitk_notify_host_pending(struct kunit *test)
{
	struct knitk_test_knot k;

	knitk_test_knot_init(test, &k, 3, 2, 0);
	/* Return mailbox of worker 1 is nr_request (6) + 1. */
	knitk_test_sector(&k, 7)->pub = 4;
	KUNIT_EXPECT_TRUE(test, knitk_test_pending(&k, KNITK_DOORBELL_HOST));
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, 1));
	knitk_test_sector(&k, 7)->ack = 4;
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, KNITK_DOORBELL_HOST));
	/* The last return mailbox counts too. */
	knitk_test_sector(&k, 8)->pub = 1;
	KUNIT_EXPECT_TRUE(test, knitk_test_pending(&k, KNITK_DOORBELL_HOST));
}

static void knitk_notify_steal_pending(struct kunit *test)
{
	struct knitk_test_knot k;

	knitk_test_knot_init(test, &k, 3, 2, KNITK_GEOM_STEAL);
	KUNIT_EXPECT_EQ(test, k.l.nr_request, 2U);
	knitk_test_sector(&k, 1)->pub = 0x1;
	/* A shared request mailbox is work for every worker. */
	KUNIT_EXPECT_TRUE(test, knitk_test_pending(&k, 0));
	KUNIT_EXPECT_TRUE(test, knitk_test_pending(&k, 1));
	KUNIT_EXPECT_TRUE(test, knitk_test_pending(&k, 2));
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, KNITK_DOORBELL_HOST));
	/* The sector's own ack word is unused on a stealing mailbox. */
	knitk_test_sector(&k, 1)->ack = 0x1;
	KUNIT_EXPECT_TRUE(test, knitk_test_pending(&k, 0));
	/* Worker 2 claims it: the XOR of the steal acks now equals pub. */
	knitk_test_line(&k, 1, 2)->ack = 0x1;
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, 0));
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, 2));
	/* Acks toggled by several workers combine by XOR: 3 ^ 5 ^ 0 = 6. */
	knitk_test_sector(&k, 1)->pub = 0x7;
	knitk_test_line(&k, 1, 0)->ack = 0x3;
	knitk_test_line(&k, 1, 1)->ack = 0x5;
	knitk_test_line(&k, 1, 2)->ack = 0x0;
	KUNIT_EXPECT_TRUE(test, knitk_test_pending(&k, 1));
	/* 3 ^ 5 ^ 1 = 7: every lane acknowledged by someone. */
	knitk_test_line(&k, 1, 2)->ack = 0x1;
	KUNIT_EXPECT_FALSE(test, knitk_test_pending(&k, 1));
	/* An OR of the acks (7) would hide lane 1 pending here: 3 ^ 5 ^ 3. */
	knitk_test_line(&k, 1, 2)->ack = 0x3;
	KUNIT_EXPECT_TRUE(test, knitk_test_pending(&k, 1));
	knitk_test_line(&k, 1, 2)->ack = 0x1;
	/* Mailbox 0's steal lines are separate from mailbox 1's. */
	knitk_test_line(&k, 0, 1)->ack = 0x8;
	KUNIT_EXPECT_TRUE(test, knitk_test_pending(&k, 0));
}

static void knitk_notify_verdicts(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, knitk_notify_verdict(false, 0), KNITK_NOTIFY_IDLE);
	KUNIT_EXPECT_EQ(test, knitk_notify_verdict(false, 1), KNITK_NOTIFY_IDLE);
	KUNIT_EXPECT_EQ(test, knitk_notify_verdict(true, 0), KNITK_NOTIFY_AWAKE);
	KUNIT_EXPECT_EQ(test, knitk_notify_verdict(true, 1),
			KNITK_NOTIFY_DELIVER);
	/* Any non-zero sleeping word means asleep. */
	KUNIT_EXPECT_EQ(test, knitk_notify_verdict(true, 0x80000000),
			KNITK_NOTIFY_DELIVER);
}

/* A wait's deadline, read in the caller's time namespace. */
static void knitk_notify_deadline_on_host(struct kunit *test)
{
	const s64 sec = NSEC_PER_SEC;

	/* The host's own namespace: unchanged. */
	KUNIT_EXPECT_EQ(test, knitk_deadline_on_host(5 * sec, 0), 5 * sec);
	/* A clock 100 s behind the host's: its 5 s is the host's 105 s. */
	KUNIT_EXPECT_EQ(test, knitk_deadline_on_host(5 * sec, -100 * sec),
			105 * sec);
	/* A clock ahead: earlier on the host, and passed below the offset. */
	KUNIT_EXPECT_EQ(test, knitk_deadline_on_host(105 * sec, 100 * sec),
			5 * sec);
	KUNIT_EXPECT_EQ(test, knitk_deadline_on_host(5 * sec, 100 * sec), 0);
	KUNIT_EXPECT_EQ(test, knitk_deadline_on_host(0, -100 * sec), 100 * sec);
	/* Far deadlines stay far, none wraps into the past. */
	KUNIT_EXPECT_EQ(test, knitk_deadline_on_host(KTIME_MAX, -100 * sec),
			(u64)KTIME_MAX);
	KUNIT_EXPECT_EQ(test, knitk_deadline_on_host(KTIME_MAX - sec, -2 * sec),
			(u64)KTIME_MAX);
	KUNIT_EXPECT_EQ(test, knitk_deadline_on_host((u64)KTIME_MAX + 1,
						     100 * sec),
			(u64)KTIME_MAX + 1);
	KUNIT_EXPECT_EQ(test, knitk_deadline_on_host(KNITK_WAIT_FOREVER,
						     -100 * sec),
			KNITK_WAIT_FOREVER);
	KUNIT_EXPECT_EQ(test, knitk_deadline_on_host(KNITK_WAIT_FOREVER,
						     100 * sec),
			KNITK_WAIT_FOREVER);
}

static void knitk_notify_doorbell_valid(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(3, 1);

	KUNIT_EXPECT_TRUE(test, knitk_doorbell_valid(&g, 0));
	KUNIT_EXPECT_TRUE(test, knitk_doorbell_valid(&g, 2));
	KUNIT_EXPECT_FALSE(test, knitk_doorbell_valid(&g, 3));
	KUNIT_EXPECT_FALSE(test, knitk_doorbell_valid(&g, 62));
	KUNIT_EXPECT_TRUE(test, knitk_doorbell_valid(&g, KNITK_DOORBELL_HOST));
	KUNIT_EXPECT_FALSE(test, knitk_doorbell_valid(&g, 64));
}

static struct knitk_doorbell *knitk_test_bell(struct knitk_knot *knot,
					      unsigned int d)
{
	return knot->base + knot->layout.doorbell_off +
	       d * knot->layout.doorbell_stride;
}

/*
 * The counters are in the field order of the uapi stats: counter c lands
 * in the c-th field, which is where debugfs prints it.
 */
static void knitk_notify_stats_fields(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(1, 1);
	struct knitk_doorbell_stats st;
	struct knitk_knot *knot;
	struct knitk_layout l;
	const u64 *v = (const u64 *)&st;
	unsigned int c, n;

	knitk_layout_compute(&g, &l);
	knot = knitk_knot_create(&g, &l);
	KUNIT_ASSERT_FALSE(test, IS_ERR(knot));
	for (c = 0; c < KNITK_NR_BELL_COUNTERS; c++) {
		KUNIT_EXPECT_EQ(test, knitk_bell_fields[c].offset,
				c * sizeof(u64));
		for (n = 0; n <= c; n++)
			knitk_bell_count(&knot->bells[0], c);
	}
	knitk_doorbell_stats(knot, 0, &st);
	for (c = 0; c < KNITK_NR_BELL_COUNTERS; c++)
		KUNIT_EXPECT_EQ_MSG(test, v[c], (u64)c + 1, "field %s",
				    knitk_bell_fields[c].name);
	KUNIT_EXPECT_EQ(test, st.waits, 1ULL);
	KUNIT_EXPECT_EQ(test, st.kicks, (u64)KNITK_BELL_KICKS + 1);
	KUNIT_EXPECT_EQ(test, st.uring_waits, (u64)KNITK_BELL_URING_WAITS + 1);
	KUNIT_EXPECT_EQ(test, st.spin_sleeps, (u64)KNITK_NR_BELL_COUNTERS);
	knitk_knot_put(knot);
}

/* The whole filter on a real knot: counters, woken mask and seq. */
static void knitk_notify_on_knot(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(2, 1);
	struct knitk_doorbell_stats st;
	struct knitk_role ended = { };
	struct knitk_knot *knot;
	struct knitk_layout l;
	struct knitk_sector *mb;
	u64 woken = ~0ULL;

	knitk_layout_compute(&g, &l);
	knot = knitk_knot_create(&g, &l);
	KUNIT_ASSERT_FALSE(test, IS_ERR(knot));
	KUNIT_EXPECT_EQ(test, knot->control->magic, (u32)KNITK_MAGIC);
	KUNIT_EXPECT_EQ(test, knot->control->layout.size, l.size);

	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(2), 0, false, &woken),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, woken, ~0ULL);

	/* Idle: nothing pending for worker 1. */
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(1), 0, false, &woken),
			0);
	KUNIT_EXPECT_EQ(test, woken, 0ULL);

	/* Pending but awake. */
	mb = knot->base + l.mailbox_off + 1 * l.mailbox_stride;
	mb->pub = 1;
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(1), 0, false, &woken),
			0);
	KUNIT_EXPECT_EQ(test, woken, 0ULL);

	/* Pending and asleep: delivered, seq advanced. */
	knitk_test_bell(knot, 1)->sleeping = 1;
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(1) |
						    BIT_ULL(0), 0, false, &woken), 0);
	KUNIT_EXPECT_EQ(test, woken, BIT_ULL(1));
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 1)->seq, 1U);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 0)->seq, 0U);
	/* The delivery cleared sleeping: a second notify finds it awake. */
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 1)->sleeping, 0U);
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(1), 0, false, &woken),
			0);
	KUNIT_EXPECT_EQ(test, woken, 0ULL);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 1)->seq, 1U);

	knitk_doorbell_stats(knot, 1, &st);
	KUNIT_EXPECT_EQ(test, st.suppressed_idle, 1ULL);
	KUNIT_EXPECT_EQ(test, st.suppressed_awake, 2ULL);
	KUNIT_EXPECT_EQ(test, st.wakes, 1ULL);
	knitk_doorbell_stats(knot, 0, &st);
	KUNIT_EXPECT_EQ(test, st.suppressed_idle, 1ULL);
	KUNIT_EXPECT_EQ(test, st.wakes, 0ULL);

	/* A wait whose seq already moved does not sleep. */
	KUNIT_EXPECT_EQ(test, knitk_doorbell_wait(knot, 1, NULL, 0, 0,
						  KNITK_WAIT_FOREVER, false),
			-EAGAIN);
	/* A deadline in the past times out. */
	KUNIT_EXPECT_EQ(test, knitk_doorbell_wait(knot, 1, NULL, 1, 0, 0,
						  false),
			-ETIMEDOUT);
	knitk_doorbell_stats(knot, 1, &st);
	KUNIT_EXPECT_EQ(test, st.mismatches, 1ULL);
	KUNIT_EXPECT_EQ(test, st.waits, 1ULL);
	KUNIT_EXPECT_EQ(test, st.timeouts, 1ULL);
	/* A wait of an ended role returns at once: not woken, not timed out. */
	ended.slot = 1;
	ended.ended = true;
	KUNIT_EXPECT_EQ(test, knitk_doorbell_wait(knot, 1, &ended, 1, 0,
						  KNITK_WAIT_FOREVER, false),
			-ENOTCONN);
	knitk_doorbell_stats(knot, 1, &st);
	KUNIT_EXPECT_EQ(test, st.wakes + st.timeouts + st.spurious, 2ULL);
	knitk_knot_put(knot);
}

/* A kick rings past the filter: idle, awake, or both. */
static void knitk_notify_kick(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(2, 1);
	struct knitk_doorbell_stats st;
	struct knitk_knot *knot;
	struct knitk_layout l;
	u64 woken = 0;

	knitk_layout_compute(&g, &l);
	knot = knitk_knot_create(&g, &l);
	KUNIT_ASSERT_FALSE(test, IS_ERR(knot));

	/* Bad doorbells still fail first, with nothing rung. */
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(0) |
						    BIT_ULL(2),
						    KNITK_NOTIFY_KICK, false, &woken),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 0)->seq, 0U);

	/* Idle and awake (sleeping clear): delivered all the same. */
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(0) |
						    BIT_ULL(KNITK_DOORBELL_HOST),
						    KNITK_NOTIFY_KICK, false, &woken),
			0);
	KUNIT_EXPECT_EQ(test, woken, BIT_ULL(0) | BIT_ULL(KNITK_DOORBELL_HOST));
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 0)->seq, 1U);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, KNITK_DOORBELL_HOST)->seq,
			1U);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 1)->seq, 0U);

	/* Idle with the sleeping flag set: delivered, the flag left alone. */
	knitk_test_bell(knot, 0)->sleeping = 7;
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(0),
						    KNITK_NOTIFY_KICK, false, &woken),
			0);
	KUNIT_EXPECT_EQ(test, woken, BIT_ULL(0));
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 0)->seq, 2U);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 0)->sleeping, 7U);

	knitk_doorbell_stats(knot, 0, &st);
	KUNIT_EXPECT_EQ(test, st.kicks, 2ULL);
	KUNIT_EXPECT_EQ(test, st.wakes, 0ULL);
	KUNIT_EXPECT_EQ(test, st.suppressed_idle, 0ULL);
	KUNIT_EXPECT_EQ(test, st.suppressed_awake, 0ULL);
	knitk_doorbell_stats(knot, 1, &st);
	KUNIT_EXPECT_EQ(test, st.kicks, 0ULL);
	knitk_knot_put(knot);
}

static struct kunit_case knitk_notify_cases[] = {
	KUNIT_CASE(knitk_notify_private_idle),
	KUNIT_CASE(knitk_notify_private_pending),
	KUNIT_CASE(knitk_notify_host_pending),
	KUNIT_CASE(knitk_notify_steal_pending),
	KUNIT_CASE(knitk_notify_verdicts),
	KUNIT_CASE(knitk_notify_deadline_on_host),
	KUNIT_CASE(knitk_notify_doorbell_valid),
	KUNIT_CASE(knitk_notify_on_knot),
	KUNIT_CASE(knitk_notify_stats_fields),
	KUNIT_CASE(knitk_notify_kick),
	{}
};

static struct kunit_suite knitk_notify_suite = {
	.name = "knitk_notify",
	.test_cases = knitk_notify_cases,
};

/* ---- peer-death bookkeeping ---------------------------------------------- */

static struct knitk_control *knitk_test_control(struct kunit *test)
{
	struct knitk_control *ctl = kunit_kzalloc(test, sizeof(*ctl),
						  GFP_KERNEL);

	KUNIT_ASSERT_NOT_NULL(test, ctl);
	return ctl;
}

static void knitk_peer_slots(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(3, 1);

	KUNIT_EXPECT_EQ(test, knitk_peer_slot(&g, KNITK_ROLE_HOST, 0),
			KNITK_DOORBELL_HOST);
	KUNIT_EXPECT_EQ(test, knitk_peer_slot(&g, KNITK_ROLE_HOST, 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, knitk_peer_slot(&g, KNITK_ROLE_WORKER, 0), 0);
	KUNIT_EXPECT_EQ(test, knitk_peer_slot(&g, KNITK_ROLE_WORKER, 2), 2);
	KUNIT_EXPECT_EQ(test, knitk_peer_slot(&g, KNITK_ROLE_WORKER, 3),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, knitk_peer_slot(&g, KNITK_ROLE_WORKER, 63),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, knitk_peer_slot(&g, 0, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, knitk_peer_slot(&g, 3, 0), -EINVAL);
}

static void knitk_peer_join_marks_live(struct kunit *test)
{
	struct knitk_control *ctl = knitk_test_control(test);
	u32 gen = 0;

	KUNIT_EXPECT_EQ(test, knitk_peer_join(ctl, 2, &gen), 0);
	KUNIT_EXPECT_EQ(test, gen, 1U);
	KUNIT_EXPECT_EQ(test, ctl->live, BIT_ULL(2));
	KUNIT_EXPECT_EQ(test, ctl->dead, 0ULL);
	KUNIT_EXPECT_EQ(test, ctl->generation[2], 1U);
	KUNIT_EXPECT_EQ(test, ctl->death_seq, 0U);
	/* A held role cannot be joined again. */
	KUNIT_EXPECT_EQ(test, knitk_peer_join(ctl, 2, &gen), -EBUSY);
	KUNIT_EXPECT_EQ(test, ctl->generation[2], 1U);
	/* Other roles are independent. */
	KUNIT_EXPECT_EQ(test, knitk_peer_join(ctl, KNITK_SLOT_HOST, &gen), 0);
	KUNIT_EXPECT_EQ(test, gen, 1U);
	KUNIT_EXPECT_EQ(test, ctl->live, BIT_ULL(2) | BIT_ULL(63));
}

static void knitk_peer_leave_marks_dead(struct kunit *test)
{
	struct knitk_control *ctl = knitk_test_control(test);
	u32 gen;

	KUNIT_ASSERT_EQ(test, knitk_peer_join(ctl, 0, &gen), 0);
	KUNIT_ASSERT_EQ(test, knitk_peer_join(ctl, 1, &gen), 0);
	knitk_peer_leave(ctl, 1);
	KUNIT_EXPECT_EQ(test, ctl->live, BIT_ULL(0));
	KUNIT_EXPECT_EQ(test, ctl->dead, BIT_ULL(1));
	KUNIT_EXPECT_EQ(test, ctl->death_seq, 1U);
	KUNIT_EXPECT_EQ(test, knitk_peer_death_seq(ctl), 1U);
	knitk_peer_leave(ctl, 0);
	KUNIT_EXPECT_EQ(test, ctl->live, 0ULL);
	KUNIT_EXPECT_EQ(test, ctl->dead, BIT_ULL(0) | BIT_ULL(1));
	KUNIT_EXPECT_EQ(test, ctl->death_seq, 2U);
	/* A worker's death is not the host's. */
	KUNIT_EXPECT_FALSE(test, knitk_peer_host_dead(ctl));
}

static void knitk_peer_rejoin_after_death(struct kunit *test)
{
	struct knitk_control *ctl = knitk_test_control(test);
	u32 gen;

	KUNIT_ASSERT_EQ(test, knitk_peer_join(ctl, 5, &gen), 0);
	knitk_peer_leave(ctl, 5);
	KUNIT_EXPECT_EQ(test, knitk_peer_join(ctl, 5, &gen), 0);
	KUNIT_EXPECT_EQ(test, gen, 2U);
	KUNIT_EXPECT_EQ(test, ctl->generation[5], 2U);
	KUNIT_EXPECT_EQ(test, ctl->live, BIT_ULL(5));
	KUNIT_EXPECT_EQ(test, ctl->dead, 0ULL);
	/* A rejoin does not undo the record of the death. */
	KUNIT_EXPECT_EQ(test, ctl->death_seq, 1U);
}

static void knitk_peer_host_death(struct kunit *test)
{
	struct knitk_control *ctl = knitk_test_control(test);
	u32 gen;

	KUNIT_EXPECT_FALSE(test, knitk_peer_host_dead(ctl));
	KUNIT_ASSERT_EQ(test, knitk_peer_join(ctl, KNITK_SLOT_HOST, &gen), 0);
	KUNIT_EXPECT_FALSE(test, knitk_peer_host_dead(ctl));
	knitk_peer_leave(ctl, KNITK_SLOT_HOST);
	KUNIT_EXPECT_TRUE(test, knitk_peer_host_dead(ctl));
	KUNIT_EXPECT_EQ(test, ctl->dead, BIT_ULL(63));
	/* A new host revives the knot for its workers. */
	KUNIT_ASSERT_EQ(test, knitk_peer_join(ctl, KNITK_SLOT_HOST, &gen), 0);
	KUNIT_EXPECT_EQ(test, gen, 2U);
	KUNIT_EXPECT_FALSE(test, knitk_peer_host_dead(ctl));
}

/* Join @slot of @knot with a fresh role, owned by the test's thread. */
static void knitk_test_join(struct kunit *test, struct knitk_role *r,
			    struct knitk_knot *knot, unsigned int slot)
{
	u32 gen;

	knitk_role_init(r);
	KUNIT_ASSERT_EQ(test, knitk_role_join(r, knot, NULL, slot, &gen), 0);
}

/* Ending a role on a real knot advances the right doorbells. */
static void knitk_peer_death_rings_doorbells(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(3, 1);
	struct knitk_role w1, again, host;
	struct knitk_knot *knot;
	struct knitk_layout l;
	u32 gen;

	knitk_layout_compute(&g, &l);
	knot = knitk_knot_create(&g, &l);
	KUNIT_ASSERT_FALSE(test, IS_ERR(knot));
	knitk_test_join(test, &w1, knot, 1);
	knitk_test_join(test, &host, knot, KNITK_SLOT_HOST);
	knitk_role_init(&again);
	KUNIT_EXPECT_EQ(test, knitk_role_join(&again, knot, NULL, 1, &gen), -EBUSY);

	knitk_role_end(&w1, KNITK_LEFT_RELEASE);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, KNITK_DOORBELL_HOST)->seq,
			1U);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 1)->seq, 0U);
	KUNIT_EXPECT_EQ(test, knot->control->death_seq, 1U);
	/* Done once its kick moved the host's seq. */
	KUNIT_EXPECT_EQ(test, knot->control->death_done, 1U);

	knitk_role_end(&host, KNITK_LEFT_RELEASE);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 0)->seq, 1U);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 1)->seq, 1U);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, 2)->seq, 1U);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, KNITK_DOORBELL_HOST)->seq,
			1U);
	KUNIT_EXPECT_EQ(test, knot->control->death_seq, 2U);
	KUNIT_EXPECT_EQ(test, knot->control->death_done, 2U);
	/* A worker of a dead host gets -EPIPE instead of sleeping. */
	KUNIT_EXPECT_EQ(test, knitk_doorbell_wait(knot, 0, NULL, 1, 0,
						  KNITK_WAIT_FOREVER, false),
			-EPIPE);
	knitk_role_release(&again);
	knitk_role_release(&host);
	knitk_role_release(&w1);
	knitk_knot_put(knot);
}

/* Each path that ends a role (flush, exit, release) may come: one death. */
static void knitk_peer_end_once(struct kunit *test)
{
	struct knitk_control *ctl = knitk_test_control(test);
	struct knitk_role r = { .slot = KNITK_NO_SLOT };
	struct knitk_role next = { .slot = KNITK_NO_SLOT };
	u32 gen;

	/* An endpoint that never joined has no role to end. */
	KUNIT_EXPECT_FALSE(test, knitk_peer_end(ctl, &r));
	KUNIT_EXPECT_EQ(test, ctl->death_seq, 0U);

	KUNIT_ASSERT_EQ(test, knitk_peer_take(ctl, &r, 1, &gen), 0);
	KUNIT_EXPECT_EQ(test, knitk_peer_take(ctl, &r, 2, &gen), -EBUSY);
	KUNIT_EXPECT_TRUE(test, knitk_peer_end(ctl, &r));
	KUNIT_EXPECT_FALSE(test, knitk_peer_end(ctl, &r));
	KUNIT_EXPECT_EQ(test, ctl->death_seq, 1U);
	KUNIT_EXPECT_EQ(test, ctl->dead, BIT_ULL(1));

	/* The slot is free for another endpoint; r is not its holder. */
	KUNIT_ASSERT_EQ(test, knitk_peer_take(ctl, &next, 1, &gen), 0);
	KUNIT_EXPECT_EQ(test, gen, 2U);
	KUNIT_EXPECT_FALSE(test, knitk_peer_end(ctl, &r));
	KUNIT_EXPECT_EQ(test, ctl->live, BIT_ULL(1));
	KUNIT_EXPECT_EQ(test, ctl->dead, 0ULL);
	KUNIT_EXPECT_EQ(test, ctl->death_seq, 1U);
	/* An endpoint joins once, even after its role ended. */
	KUNIT_EXPECT_EQ(test, knitk_peer_take(ctl, &r, 0, &gen), -EBUSY);

	KUNIT_EXPECT_TRUE(test, knitk_peer_end(ctl, &next));
	KUNIT_EXPECT_EQ(test, ctl->death_seq, 2U);
	/* Only knitk_role_end(), after the kicks, counts a death done. */
	KUNIT_EXPECT_EQ(test, ctl->death_done, 0U);
}

/* The release of an endpoint whose role ended is no second death. */
static void knitk_role_release_after_end(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(2, 1);
	struct knitk_role w0, w1;
	struct knitk_knot *knot;
	struct knitk_layout l;

	knitk_layout_compute(&g, &l);
	knot = knitk_knot_create(&g, &l);
	KUNIT_ASSERT_FALSE(test, IS_ERR(knot));
	knitk_test_join(test, &w0, knot, 0);
	knitk_test_join(test, &w1, knot, 1);
	knitk_role_end(&w0, KNITK_LEFT_RELEASE);
	knitk_role_release(&w0);
	KUNIT_EXPECT_EQ(test, knot->control->death_seq, 1U);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, KNITK_DOORBELL_HOST)->seq,
			1U);
	/* A role nothing ended yet ends at its release. */
	knitk_role_release(&w1);
	KUNIT_EXPECT_EQ(test, knot->control->death_seq, 2U);
	KUNIT_EXPECT_EQ(test, knot->control->dead, BIT_ULL(0) | BIT_ULL(1));
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, KNITK_DOORBELL_HOST)->seq,
			2U);
	knitk_knot_put(knot);
}

struct knitk_test_joiner {
	struct knitk_role *role;
	struct knitk_knot *knot;
	int ret;
};

static int knitk_test_joiner_fn(void *data)
{
	struct knitk_test_joiner *j = data;
	u32 gen;

	j->ret = knitk_role_join(j->role, j->knot, NULL, 0, &gen);
	return 0;
}

/* A thread that joins and exits: its exit alone ends the role. */
static void knitk_role_ends_at_owner_exit(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(1, 1);
	struct knitk_test_joiner j = { .ret = 1 };
	struct task_struct *task;
	struct knitk_role r;
	struct knitk_layout l;
	struct knitk_knot *knot;

	knitk_layout_compute(&g, &l);
	knot = knitk_knot_create(&g, &l);
	KUNIT_ASSERT_FALSE(test, IS_ERR(knot));
	knitk_role_init(&r);
	j.role = &r;
	j.knot = knot;
	task = kthread_run(knitk_test_joiner_fn, &j, "knitk-kunit-join");
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	/*
	 * Until the death is done, its kick too.  A hang here is caught by
	 * KUnit's own test timeout.
	 */
	while (!smp_load_acquire(&knot->control->death_done))
		usleep_range(1000, 2000);
	KUNIT_EXPECT_EQ(test, j.ret, 0);
	KUNIT_EXPECT_EQ(test, knot->control->dead, BIT_ULL(0));
	KUNIT_EXPECT_EQ(test, knot->control->live, 0ULL);
	KUNIT_EXPECT_EQ(test, knitk_test_bell(knot, KNITK_DOORBELL_HOST)->seq,
			1U);
	knitk_role_release(&r);
	KUNIT_EXPECT_EQ(test, knot->control->death_seq, 1U);
	KUNIT_EXPECT_EQ(test, knot->control->death_done, 1U);
	knitk_knot_put(knot);
}

static struct kunit_case knitk_peer_cases[] = {
	KUNIT_CASE(knitk_peer_slots),
	KUNIT_CASE(knitk_peer_join_marks_live),
	KUNIT_CASE(knitk_peer_leave_marks_dead),
	KUNIT_CASE(knitk_peer_rejoin_after_death),
	KUNIT_CASE(knitk_peer_host_death),
	KUNIT_CASE(knitk_peer_death_rings_doorbells),
	KUNIT_CASE(knitk_peer_end_once),
	KUNIT_CASE(knitk_role_release_after_end),
	KUNIT_CASE(knitk_role_ends_at_owner_exit),
	{}
};

static struct kunit_suite knitk_peer_suite = {
	.name = "knitk_peer",
	.test_cases = knitk_peer_cases,
};

/* ---- wait and wake on a real knot ---------------------------------------- */

struct knitk_test_sleeper {
	struct knitk_knot *knot;
	unsigned int doorbell;
	u32 expected;
	u32 flags;
	int ret;
	struct completion done;
};

static int knitk_test_sleeper_fn(void *data)
{
	struct knitk_test_sleeper *s = data;

	s->ret = knitk_doorbell_wait(s->knot, s->doorbell, NULL, s->expected,
				     s->flags, KNITK_WAIT_FOREVER, false);
	complete(&s->done);
	return 0;
}

/*
 * Starts a thread sleeping on @d with wait @flags and returns once it has
 * counted its wait; a hang here is caught by KUnit's own test timeout.
 */
static void knitk_test_sleep_flags(struct kunit *test,
				   struct knitk_test_sleeper *s,
				   struct knitk_knot *knot, unsigned int d,
				   u32 flags)
{
	struct knitk_doorbell_stats st;
	struct task_struct *task;
	u64 waits;

	knitk_doorbell_stats(knot, d, &st);
	waits = st.waits;
	s->knot = knot;
	s->doorbell = d;
	s->flags = flags;
	s->expected = READ_ONCE(knitk_test_bell(knot, d)->seq);
	s->ret = 1;
	init_completion(&s->done);
	task = kthread_run(knitk_test_sleeper_fn, s, "knitk-kunit-%u", d);
	KUNIT_ASSERT_FALSE(test, IS_ERR(task));
	do {
		usleep_range(1000, 2000);
		knitk_doorbell_stats(knot, d, &st);
	} while (st.waits == waits);
}

static void knitk_test_sleep_on(struct kunit *test,
				struct knitk_test_sleeper *s,
				struct knitk_knot *knot, unsigned int d)
{
	knitk_test_sleep_flags(test, s, knot, d, 0);
}

static struct knitk_knot *knitk_test_real_knot(struct kunit *test,
					       u32 workers)
{
	struct knitk_geometry g = knitk_test_geom(workers, 1);
	struct knitk_layout l;
	struct knitk_knot *knot;

	knitk_layout_compute(&g, &l);
	knot = knitk_knot_create(&g, &l);
	KUNIT_ASSERT_FALSE(test, IS_ERR(knot));
	return knot;
}

static void knitk_wait_woken_by_notify(struct kunit *test)
{
	struct knitk_knot *knot = knitk_test_real_knot(test, 2);
	struct knitk_test_sleeper s;
	struct knitk_doorbell_stats st;
	struct knitk_sector *mb;
	u64 woken;

	knitk_test_sleep_on(test, &s, knot, 1);
	/* Published work for worker 1 while it is flagged asleep. */
	mb = knot->base + knot->layout.mailbox_off + knot->layout.mailbox_stride;
	WRITE_ONCE(mb->pub, 1);
	WRITE_ONCE(knitk_test_bell(knot, 1)->sleeping, 1);
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(1), 0, false, &woken),
			0);
	KUNIT_EXPECT_EQ(test, woken, BIT_ULL(1));
	wait_for_completion(&s.done);
	KUNIT_EXPECT_EQ(test, s.ret, 0);
	knitk_doorbell_stats(knot, 1, &st);
	KUNIT_EXPECT_EQ(test, st.waits, 1ULL);
	KUNIT_EXPECT_EQ(test, st.wakes, 1ULL);
	KUNIT_EXPECT_EQ(test, st.spurious, 0ULL);
	knitk_knot_put(knot);
}

static void knitk_wait_counts_spurious(struct kunit *test)
{
	struct knitk_knot *knot = knitk_test_real_knot(test, 1);
	struct knitk_test_sleeper s;
	struct knitk_doorbell_stats st;

	/*
	 * A seq advance that is no notify, kick or death (here: one forged
	 * as userspace could), with nothing pending, is spurious.
	 */
	knitk_test_sleep_on(test, &s, knot, KNITK_DOORBELL_HOST);
	WRITE_ONCE(knitk_test_bell(knot, KNITK_DOORBELL_HOST)->seq,
		   s.expected + 1);
	wake_up_interruptible_all(&knot->bells[KNITK_DOORBELL_HOST].wq);
	wait_for_completion(&s.done);
	KUNIT_EXPECT_EQ(test, s.ret, 0);
	knitk_doorbell_stats(knot, KNITK_DOORBELL_HOST, &st);
	KUNIT_EXPECT_EQ(test, st.spurious, 1ULL);
	knitk_knot_put(knot);
}

static void knitk_wait_woken_by_kick(struct kunit *test)
{
	struct knitk_knot *knot = knitk_test_real_knot(test, 1);
	struct knitk_test_sleeper s;
	struct knitk_doorbell_stats st;
	u64 woken;

	/* Nothing pending, sleeping flag clear: the kick still wakes. */
	knitk_test_sleep_on(test, &s, knot, KNITK_DOORBELL_HOST);
	KUNIT_EXPECT_EQ(test,
			knitk_doorbell_notify(knot,
					      BIT_ULL(KNITK_DOORBELL_HOST),
					      KNITK_NOTIFY_KICK, false, &woken), 0);
	KUNIT_EXPECT_EQ(test, woken, BIT_ULL(KNITK_DOORBELL_HOST));
	wait_for_completion(&s.done);
	KUNIT_EXPECT_EQ(test, s.ret, 0);
	knitk_doorbell_stats(knot, KNITK_DOORBELL_HOST, &st);
	KUNIT_EXPECT_EQ(test, st.waits, 1ULL);
	KUNIT_EXPECT_EQ(test, st.kicks, 1ULL);
	/* A kick is an event, not a spurious wake. */
	KUNIT_EXPECT_EQ(test, st.spurious, 0ULL);
	knitk_knot_put(knot);
}

static void knitk_wait_worker_death_wakes_host(struct kunit *test)
{
	struct knitk_knot *knot = knitk_test_real_knot(test, 2);
	struct knitk_test_sleeper s;
	struct knitk_doorbell_stats st;
	struct knitk_role host, w0;

	knitk_test_join(test, &host, knot, KNITK_SLOT_HOST);
	knitk_test_join(test, &w0, knot, 0);
	knitk_test_sleep_on(test, &s, knot, KNITK_DOORBELL_HOST);
	knitk_role_end(&w0, KNITK_LEFT_RELEASE);
	wait_for_completion(&s.done);
	KUNIT_EXPECT_EQ(test, s.ret, 0);
	/* A peer event is not a spurious wake. */
	knitk_doorbell_stats(knot, KNITK_DOORBELL_HOST, &st);
	KUNIT_EXPECT_EQ(test, st.spurious, 0ULL);
	KUNIT_EXPECT_EQ(test, knot->control->dead, BIT_ULL(0));
	knitk_role_release(&w0);
	knitk_role_release(&host);
	knitk_knot_put(knot);
}

static void knitk_wait_host_death_is_epipe(struct kunit *test)
{
	struct knitk_knot *knot = knitk_test_real_knot(test, 2);
	struct knitk_role host, w1, next;
	struct knitk_test_sleeper s;
	u32 seq;

	knitk_test_join(test, &host, knot, KNITK_SLOT_HOST);
	knitk_test_join(test, &w1, knot, 1);
	knitk_test_sleep_on(test, &s, knot, 1);
	knitk_role_end(&host, KNITK_LEFT_RELEASE);
	wait_for_completion(&s.done);
	KUNIT_EXPECT_EQ(test, s.ret, -EPIPE);
	/* A new host lets the worker sleep again. */
	knitk_test_join(test, &next, knot, KNITK_SLOT_HOST);
	seq = READ_ONCE(knitk_test_bell(knot, 1)->seq);
	KUNIT_EXPECT_EQ(test, knitk_doorbell_wait(knot, 1, NULL, seq, 0, 0,
						  false),
			-ETIMEDOUT);
	knitk_role_release(&next);
	knitk_role_release(&w1);
	knitk_role_release(&host);
	knitk_knot_put(knot);
}

/*
 * A wait whose deadline has passed times out, spinning or not: a spin
 * never outlives the wait's deadline (S8), and each wait is counted once.
 */
static void knitk_wait_past_deadline_times_out(struct kunit *test)
{
	struct knitk_knot *knot = knitk_test_real_knot(test, 1);
	struct knitk_doorbell_stats st;
	unsigned int i, rounds = 12;
	u32 seq = READ_ONCE(knitk_test_bell(knot, 0)->seq);
	u64 deadline;

	for (i = 0; i < rounds; i++) {
		deadline = i % 2 ? ktime_get_ns() : i % 4;
		KUNIT_ASSERT_EQ(test, knitk_doorbell_wait(knot, 0, NULL, seq,
							  i % 3 ? 0 :
							  KNITK_WAIT_SPIN,
							  deadline, false),
				-ETIMEDOUT);
	}
	knitk_doorbell_stats(knot, 0, &st);
	KUNIT_EXPECT_EQ(test, st.timeouts, (u64)rounds);
	KUNIT_EXPECT_EQ(test, st.waits, (u64)rounds);
	KUNIT_EXPECT_EQ(test, st.spin_wakes, 0ULL);
	KUNIT_EXPECT_EQ(test, st.spin_sleeps, (u64)rounds / 3);
	knitk_knot_put(knot);
}

/*
 * The spurious verdict: no work and no event begun since the wait's check.
 * An event in flight at the check (begun, not done) that woke the wait
 * leaves begun ahead of the done count the wait took.
 */
static void knitk_wait_spurious_verdicts(struct kunit *test)
{
	KUNIT_EXPECT_TRUE(test, knitk_wait_spurious(false, 5, 5));
	KUNIT_EXPECT_FALSE(test, knitk_wait_spurious(true, 5, 5));
	/* In flight at the check: begun 5, done 4; its seq advance woke us. */
	KUNIT_EXPECT_FALSE(test, knitk_wait_spurious(false, 5, 4));
	/* Begun after the check. */
	KUNIT_EXPECT_FALSE(test, knitk_wait_spurious(false, 6, 5));
	KUNIT_EXPECT_FALSE(test, knitk_wait_spurious(false, 0, U32_MAX));
	KUNIT_EXPECT_TRUE(test, knitk_wait_spurious(false, U32_MAX, U32_MAX));
}

/* A kick counts its event begun before its seq advance, done after. */
static void knitk_wait_kick_counts_event(struct kunit *test)
{
	struct knitk_knot *knot = knitk_test_real_knot(test, 1);
	struct knitk_bell *bell = &knot->bells[KNITK_DOORBELL_HOST];
	u32 seq = READ_ONCE(knitk_test_bell(knot, KNITK_DOORBELL_HOST)->seq);

	knitk_doorbell_kick(knot, KNITK_DOORBELL_HOST);
	KUNIT_EXPECT_EQ(test, atomic_read(&bell->events_begun), 1);
	KUNIT_EXPECT_EQ(test, atomic_read(&bell->events_done), 1);
	KUNIT_EXPECT_EQ(test,
			READ_ONCE(knitk_test_bell(knot,
						  KNITK_DOORBELL_HOST)->seq),
			seq + 1);
	knitk_knot_put(knot);
}

/* Work pending for doorbell @d's owner, which is flagged asleep. */
static void knitk_test_publish_for(struct knitk_knot *knot, unsigned int d)
{
	u32 m = d == KNITK_DOORBELL_HOST ? knot->layout.nr_request : d;
	struct knitk_sector *mb = knot->base + knot->layout.mailbox_off +
				  (u64)m * knot->layout.mailbox_stride;

	WRITE_ONCE(mb->pub, READ_ONCE(mb->ack) ^ 1);
	WRITE_ONCE(knitk_test_bell(knot, d)->sleeping, 1);
}

/*
 * Sleeps until kthread_stop(), woken by nothing else.  Not a timed sleep:
 * on one CPU a poll of its state with the same usleep_range() as its own
 * wakes with it, finds it runnable each time and never ends.
 */
static int knitk_test_idle_fn(void *data)
{
	for (;;) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (kthread_should_stop())
			break;
		schedule();
	}
	__set_current_state(TASK_RUNNING);
	return 0;
}

/*
 * S8: a spin watches only another task that runs and is not exiting;
 * not the caller, not a sleeping task, not one that has exited.
 */
static void knitk_spin_peer_checks(struct kunit *test)
{
	struct task_struct *t;

	KUNIT_EXPECT_FALSE(test, knitk_spin_peer_running(NULL));
	KUNIT_EXPECT_FALSE(test, knitk_spin_peer_running(current));
	t = kthread_run(knitk_test_idle_fn, NULL, "knitk-kunit-idle");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	get_task_struct(t);
	while (READ_ONCE(t->__state) == TASK_RUNNING)
		usleep_range(1000, 2000);
	KUNIT_EXPECT_FALSE(test, knitk_spin_peer_running(t));
	kthread_stop(t);
	KUNIT_EXPECT_FALSE(test, knitk_spin_peer_running(t));
	put_task_struct(t);
}

/*
 * S8: the spin budget follows the waits: kept when the spin caught the
 * ring, doubled after a short sleep, halved to nothing after long waits
 * and timeouts, never above the cap and never overflowing.
 */
static void knitk_spin_budget_adapts(struct kunit *test)
{
	const u64 cap = 1000000;
	u64 b = cap;
	int i;

	KUNIT_EXPECT_EQ(test, knitk_spin_adapt(U64_MAX, cap, true, true, 10), cap);
	KUNIT_EXPECT_EQ(test, knitk_spin_adapt(4000, cap, true, true, 3000), 4000ULL);
	/* A task that runs 10 ms between rings: a few waits, then no spin. */
	for (i = 0; i < 7 && b; i++)
		b = knitk_spin_adapt(b, cap, false, true, 10 * cap);
	KUNIT_EXPECT_EQ(test, b, 0ULL);
	KUNIT_EXPECT_EQ(test, knitk_spin_adapt(cap / 64, cap, false, false, 5), 0ULL);
	/* Short waits again: back from cap / 16, doubling up to the cap. */
	b = knitk_spin_adapt(0, cap, false, true, 50000);
	KUNIT_EXPECT_EQ(test, b, cap / 16);
	for (i = 0; i < 10; i++)
		b = knitk_spin_adapt(b, cap, false, true, 50000);
	KUNIT_EXPECT_EQ(test, b, cap);
	/* A wait just past the cap halves it; spin_ns 0 never spins. */
	KUNIT_EXPECT_EQ(test, knitk_spin_adapt(cap, cap, false, true, cap + 1), cap / 2);
	KUNIT_EXPECT_EQ(test, knitk_spin_adapt(cap, 0, false, true, 1), 0ULL);
	KUNIT_EXPECT_EQ(test, knitk_spin_adapt(U64_MAX, U64_MAX, false, true, 1),
			U64_MAX);
}

/* S8: only a delivered notify makes its caller the doorbell's ringer. */
static void knitk_spin_ringer_recorded(struct kunit *test)
{
	struct knitk_knot *knot = knitk_test_real_knot(test, 1);
	struct knitk_bell *bell = &knot->bells[0];
	u64 woken;

	/* Suppressed (idle, then awake): no ringer. */
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(0), 0, false,
						    &woken), 0);
	knitk_test_publish_for(knot, 0);
	WRITE_ONCE(knitk_test_bell(knot, 0)->sleeping, 0);
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(0), 0, false,
						    &woken), 0);
	KUNIT_EXPECT_PTR_EQ(test, bell->ringer, (struct task_struct *)NULL);
	/* Delivered: the caller, with a reference the knot drops. */
	WRITE_ONCE(knitk_test_bell(knot, 0)->sleeping, 1);
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(0), 0, false,
						    &woken), 0);
	KUNIT_EXPECT_EQ(test, woken, BIT_ULL(0));
	KUNIT_EXPECT_PTR_EQ(test, bell->ringer, current);
	knitk_knot_put(knot);
}

/*
 * S8: a spinning wait whose ringer is not on a CPU (here: the test thread,
 * asleep in usleep_range) sleeps at once, and a notify wakes it.
 */
static void knitk_spin_sleeps_without_running_ringer(struct kunit *test)
{
	struct knitk_knot *knot = knitk_test_real_knot(test, 1);
	struct knitk_doorbell_stats st;
	struct knitk_test_sleeper s;
	u64 woken;

	knitk_test_publish_for(knot, 0);
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(0), 0, false,
						    &woken), 0);
	KUNIT_EXPECT_PTR_EQ(test, knot->bells[0].ringer, current);
	knitk_test_sleep_flags(test, &s, knot, 0, KNITK_WAIT_SPIN);
	knitk_test_publish_for(knot, 0);
	KUNIT_EXPECT_EQ(test, knitk_doorbell_notify(knot, BIT_ULL(0), 0, false,
						    &woken), 0);
	KUNIT_EXPECT_EQ(test, woken, BIT_ULL(0));
	wait_for_completion(&s.done);
	KUNIT_EXPECT_EQ(test, s.ret, 0);
	knitk_doorbell_stats(knot, 0, &st);
	KUNIT_EXPECT_EQ(test, st.waits, 1ULL);
	KUNIT_EXPECT_EQ(test, st.spin_sleeps, 1ULL);
	KUNIT_EXPECT_EQ(test, st.spin_wakes, 0ULL);
	KUNIT_EXPECT_EQ(test, st.spurious, 0ULL);
	knitk_knot_put(knot);
}

/*
 * S9: ring-then-wait rings the peer through the filter before the caller's
 * own wait, whatever that wait returns; a bad doorbell rings nothing and
 * waits for nothing.
 */
static void knitk_notify_wait_rings_then_waits(struct kunit *test)
{
	struct knitk_knot *knot = knitk_test_real_knot(test, 1);
	struct knitk_doorbell_stats st;
	struct knitk_test_sleeper s;
	u32 seq;
	u64 woken;

	knitk_test_sleep_on(test, &s, knot, KNITK_DOORBELL_HOST);
	knitk_test_publish_for(knot, KNITK_DOORBELL_HOST);
	seq = READ_ONCE(knitk_test_bell(knot, 0)->seq);
	KUNIT_EXPECT_EQ(test,
			knitk_doorbell_notify_wait(knot, 0, NULL,
						   BIT_ULL(KNITK_DOORBELL_HOST),
						   seq, 0, 0, &woken),
			-ETIMEDOUT);
	KUNIT_EXPECT_EQ(test, woken, BIT_ULL(KNITK_DOORBELL_HOST));
	wait_for_completion(&s.done);
	KUNIT_EXPECT_EQ(test, s.ret, 0);
	KUNIT_EXPECT_PTR_EQ(test, knot->bells[KNITK_DOORBELL_HOST].ringer,
			    current);

	/* A stale seq: the ring (suppressed now: host awake) still runs. */
	KUNIT_EXPECT_EQ(test,
			knitk_doorbell_notify_wait(knot, 0, NULL,
						   BIT_ULL(KNITK_DOORBELL_HOST),
						   seq + 1, KNITK_WAIT_SPIN,
						   KNITK_WAIT_FOREVER, &woken),
			-EAGAIN);
	KUNIT_EXPECT_EQ(test, woken, 0ULL);
	knitk_doorbell_stats(knot, KNITK_DOORBELL_HOST, &st);
	KUNIT_EXPECT_EQ(test, st.suppressed_awake, 1ULL);

	KUNIT_EXPECT_EQ(test,
			knitk_doorbell_notify_wait(knot, 0, NULL, BIT_ULL(5),
						   seq, 0, 0, &woken),
			-EINVAL);
	knitk_doorbell_stats(knot, 0, &st);
	KUNIT_EXPECT_EQ(test, st.mismatches, 1ULL);
	KUNIT_EXPECT_EQ(test, st.timeouts, 1ULL);
	knitk_knot_put(knot);
}

static struct kunit_case knitk_wait_cases[] = {
	KUNIT_CASE(knitk_wait_spurious_verdicts),
	KUNIT_CASE(knitk_wait_kick_counts_event),
	KUNIT_CASE(knitk_wait_woken_by_notify),
	KUNIT_CASE(knitk_wait_counts_spurious),
	KUNIT_CASE(knitk_wait_woken_by_kick),
	KUNIT_CASE(knitk_wait_worker_death_wakes_host),
	KUNIT_CASE(knitk_wait_host_death_is_epipe),
	KUNIT_CASE(knitk_wait_past_deadline_times_out),
	KUNIT_CASE(knitk_spin_peer_checks),
	KUNIT_CASE(knitk_spin_budget_adapts),
	KUNIT_CASE(knitk_spin_ringer_recorded),
	KUNIT_CASE(knitk_spin_sleeps_without_running_ringer),
	KUNIT_CASE(knitk_notify_wait_rings_then_waits),
	{}
};

static struct kunit_suite knitk_wait_suite = {
	.name = "knitk_wait",
	.test_cases = knitk_wait_cases,
};

/* ---- poll state chained to a knot ---------------------------------------- */

/* Stands for a poller registered on an endpoint: counts its wakes. */
struct knitk_test_pollee {
	struct wait_queue_entry wait;
	int wakes;
};

static int knitk_test_pollee_fn(struct wait_queue_entry *wait,
				unsigned int mode, int sync, void *key)
{
	container_of(wait, struct knitk_test_pollee, wait)->wakes++;
	return 0;
}

static void knitk_test_pollee_add(struct knitk_test_pollee *pe,
				  struct knitk_poller *p)
{
	pe->wakes = 0;
	init_waitqueue_func_entry(&pe->wait, knitk_test_pollee_fn);
	add_wait_queue(&p->wq, &pe->wait);
}

/*
 * Registered before the endpoint watches anything: woken by the host's
 * doorbell while unjoined, by its own after JOIN, by deaths throughout,
 * and by nothing of the knot once released.
 */
static void knitk_poll_follows_watched_doorbell(struct kunit *test)
{
	struct knitk_knot *knot = knitk_test_real_knot(test, 2);
	struct knitk_test_pollee pe;
	struct knitk_poller p;
	struct knitk_role w1;

	knitk_poller_init(&p);
	knitk_test_pollee_add(&pe, &p);
	knitk_doorbell_kick(knot, KNITK_DOORBELL_HOST);
	KUNIT_EXPECT_EQ(test, pe.wakes, 0);

	knitk_poller_watch(&p, knot, KNITK_DOORBELL_HOST);
	knitk_doorbell_kick(knot, KNITK_DOORBELL_HOST);
	KUNIT_EXPECT_EQ(test, pe.wakes, 1);
	knitk_doorbell_kick(knot, 0);
	KUNIT_EXPECT_EQ(test, pe.wakes, 1);

	knitk_poller_watch(&p, knot, 0);
	knitk_doorbell_kick(knot, KNITK_DOORBELL_HOST);
	KUNIT_EXPECT_EQ(test, pe.wakes, 1);
	knitk_doorbell_kick(knot, 0);
	KUNIT_EXPECT_EQ(test, pe.wakes, 2);

	/* Worker 1's death rings only the host's doorbell, and the pollers. */
	knitk_test_join(test, &w1, knot, 1);
	knitk_role_end(&w1, KNITK_LEFT_RELEASE);
	knitk_role_release(&w1);
	KUNIT_EXPECT_EQ(test, pe.wakes, 3);
	KUNIT_EXPECT_TRUE(test, knitk_poll_mask(knot, 0) == EPOLLPRI);

	knitk_poller_release(&p);
	knitk_doorbell_kick(knot, 0);
	knitk_knot_wake_pollers(knot);
	KUNIT_EXPECT_EQ(test, pe.wakes, 3);
	KUNIT_EXPECT_TRUE(test, list_empty(&knot->pollers.head));
	KUNIT_EXPECT_TRUE(test, list_empty(&knot->bells[0].wq.head));
	remove_wait_queue(&p.wq, &pe.wait);
	knitk_knot_put(knot);
}

static struct kunit_case knitk_poll_cases[] = {
	KUNIT_CASE(knitk_poll_follows_watched_doorbell),
	{}
};

static struct kunit_suite knitk_poll_suite = {
	.name = "knitk_poll",
	.test_cases = knitk_poll_cases,
};

/* ---- what the tracepoints report ------------------------------------- */

static void knitk_trace_notify_results(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, knitk_notify_rang(KNITK_NOTIFY_IDLE, false),
			KNITK_RANG_IDLE);
	KUNIT_EXPECT_EQ(test, knitk_notify_rang(KNITK_NOTIFY_AWAKE, false),
			KNITK_RANG_AWAKE);
	KUNIT_EXPECT_EQ(test, knitk_notify_rang(KNITK_NOTIFY_DELIVER, true),
			KNITK_RANG_WOKEN);
	/* Delivered by the filter, but the seq's CAS failed. */
	KUNIT_EXPECT_EQ(test, knitk_notify_rang(KNITK_NOTIFY_DELIVER, false),
			KNITK_RANG_RACED);
}

static void knitk_trace_wait_outcomes(struct kunit *test)
{
	struct knitk_wait_seen s = { .start_ns = 1, .death_seq = 4 };

	KUNIT_EXPECT_EQ(test, knitk_wait_outcome(-EAGAIN, &s, 4),
			KNITK_WAITED_MISMATCH);
	KUNIT_EXPECT_EQ(test, knitk_wait_outcome(-ETIMEDOUT, &s, 4),
			KNITK_WAITED_TIMEOUT);
	KUNIT_EXPECT_EQ(test, knitk_wait_outcome(-ERESTARTSYS, &s, 4),
			KNITK_WAITED_SIGNAL);
	KUNIT_EXPECT_EQ(test, knitk_wait_outcome(-EPIPE, &s, 5),
			KNITK_WAITED_HOST_DEAD);
	KUNIT_EXPECT_EQ(test, knitk_wait_outcome(-ENOTCONN, &s, 5),
			KNITK_WAITED_ENDED);
	KUNIT_EXPECT_EQ(test, knitk_wait_outcome(-EFAULT, &s, 4),
			KNITK_WAITED_ERROR);
	/* Woken with nothing pending and no event: spurious. */
	KUNIT_EXPECT_EQ(test, knitk_wait_outcome(0, &s, 4),
			KNITK_WAITED_SPURIOUS);
	s.event = true;
	KUNIT_EXPECT_EQ(test, knitk_wait_outcome(0, &s, 4), KNITK_WAITED_KICK);
	KUNIT_EXPECT_EQ(test, knitk_wait_outcome(0, &s, 5), KNITK_WAITED_DEATH);
	/* Begun untraced: the death_seq it began with is unknown. */
	s.start_ns = 0;
	KUNIT_EXPECT_EQ(test, knitk_wait_outcome(0, &s, 5), KNITK_WAITED_KICK);
	/* Work pending wins over an event. */
	s.pending = true;
	KUNIT_EXPECT_EQ(test, knitk_wait_outcome(0, &s, 5), KNITK_WAITED_WORK);
}

static void knitk_trace_role_kicks(struct kunit *test)
{
	struct knitk_geometry g = knitk_test_geom(3, 1);

	KUNIT_EXPECT_EQ(test, knitk_role_kicks(&g, 0),
			BIT_ULL(KNITK_DOORBELL_HOST));
	KUNIT_EXPECT_EQ(test, knitk_role_kicks(&g, 2),
			BIT_ULL(KNITK_DOORBELL_HOST));
	KUNIT_EXPECT_EQ(test, knitk_role_kicks(&g, KNITK_SLOT_HOST), 0x7ULL);
	g.nr_workers = KNITK_MAX_WORKERS;
	KUNIT_EXPECT_EQ(test, knitk_role_kicks(&g, KNITK_SLOT_HOST),
			GENMASK_ULL(KNITK_MAX_WORKERS - 1, 0));
}

static struct kunit_case knitk_trace_cases[] = {
	KUNIT_CASE(knitk_trace_notify_results),
	KUNIT_CASE(knitk_trace_wait_outcomes),
	KUNIT_CASE(knitk_trace_role_kicks),
	{}
};

static struct kunit_suite knitk_trace_suite = {
	.name = "knitk_trace",
	.test_cases = knitk_trace_cases,
};

kunit_test_suites(&knitk_geometry_suite, &knitk_layout_suite,
		  &knitk_notify_suite, &knitk_peer_suite, &knitk_wait_suite,
		  &knitk_poll_suite, &knitk_trace_suite);
