// SPDX-License-Identifier: GPL-2.0
/* knitk_layout_compute: the formula of <linux/knitk.h> and its -EINVAL cases. */
#include <errno.h>
#include <string.h>
#include <knitk.h>

#include "tap.h"

#define P KNITK_PAGE_BYTES

static struct knitk_geometry geom(uint32_t w, uint32_t s, uint32_t inl,
				  uint32_t abort_bits, uint64_t arena)
{
	struct knitk_geometry g = {
		.nr_workers = w, .nr_submitters = s, .lanes = KNITK_LANES,
		.inline_bytes = inl, .abort_bits = abort_bits, .arena_bytes = arena,
	};
	return g;
}

static void formula_private_lanes(void)
{
	struct knitk_geometry g = geom(4, 2, 256, 1024, 1 << 20);
	struct knitk_layout l;

	REQUIRE(knitk_layout_compute(&g, &l) == 0);
	CHECK_EQ(l.control_size, P);
	CHECK_EQ(l.doorbell_off, P);
	CHECK_EQ(l.doorbell_stride, 64);
	CHECK_EQ(l.nr_doorbells, 64);
	CHECK_EQ(l.abort_off, 2 * P);
	CHECK_EQ(l.abort_size, P);		/* 1024 bits = 128 B -> one page */
	CHECK_EQ(l.steal_off, 0);
	CHECK_EQ(l.nr_steal, 0);
	CHECK_EQ(l.mailbox_off, 3 * P);
	CHECK_EQ(l.nr_request, 8);
	CHECK_EQ(l.nr_mailboxes, 12);
	CHECK_EQ(l.lane_off, 256);
	CHECK_EQ(l.lane_stride, 320);
	CHECK_EQ(l.arena_off, 6 * P);		/* 256 + 64 * 320 = 20736 -> 24576 */
	CHECK_EQ(l.arena_size, 1 << 20);
	CHECK_EQ(l.mailbox_stride, 6 * P + (1 << 20));
	CHECK_EQ(l.size, 3 * P + 12 * (6 * P + (1 << 20)));
}

static void formula_steal(void)
{
	struct knitk_geometry g = geom(3, 5, 0, 0, 0);
	struct knitk_layout l;

	g.flags = KNITK_GEOM_STEAL;
	REQUIRE(knitk_layout_compute(&g, &l) == 0);
	CHECK_EQ(l.abort_size, 0);
	CHECK_EQ(l.steal_off, 2 * P);
	CHECK_EQ(l.steal_stride, 64);
	CHECK_EQ(l.nr_steal, 15);
	CHECK_EQ(l.mailbox_off, 3 * P);	/* 15 * 64 -> one page */
	CHECK_EQ(l.nr_request, 5);
	CHECK_EQ(l.nr_mailboxes, 8);
	CHECK_EQ(l.lane_stride, 64);
	CHECK_EQ(l.arena_off, 2 * P);		/* 256 + 4096 */
	CHECK_EQ(l.mailbox_stride, 2 * P);
	CHECK_EQ(l.size, 3 * P + 8 * 2 * P);
}

static void invalid_geometries(void)
{
	struct knitk_geometry g;
	struct knitk_layout l;

#define BAD(stmt) do { g = geom(2, 1, 64, 64, P); stmt;			\
	CHECK_EQ(knitk_layout_compute(&g, &l), -EINVAL); } while (0)
	BAD(g.flags = 4);
	BAD(g.flags = 1U << 31);
	BAD(g.nr_workers = 0);
	BAD(g.nr_workers = KNITK_MAX_WORKERS + 1);
	BAD(g.nr_submitters = 0);
	BAD(g.nr_submitters = KNITK_MAX_SUBMITTERS + 1);
	BAD(g.lanes = 32);
	BAD(g.lanes = 0);
	BAD(g.inline_bytes = 100);
	BAD(g.inline_bytes = KNITK_MAX_INLINE_BYTES + 64);
	BAD(g.abort_bits = 65);
	BAD(g.abort_bits = KNITK_MAX_ABORT_BITS + 64);
	BAD(g.arena_bytes = 100);
	BAD(g.arena_bytes = KNITK_MAX_ARENA_BYTES + P);
	BAD(g.reserved0 = 1);
	BAD(g.reserved[0] = 1);
	BAD(g.reserved[2] = 1);
#undef BAD
	g = geom(2, 1, 64, 64, P);
	CHECK_EQ(knitk_layout_compute(NULL, &l), -EINVAL);
	CHECK_EQ(knitk_layout_compute(&g, NULL), -EINVAL);
}

/*
 * region_lanes: with KNITK_GEOM_STEAL 0 or a power of two g with
 * 64 / g >= workers + 1 (worked out here by hand), without it only 0.
 */
static void region_lanes_rule(void)
{
	struct knitk_geometry g;
	struct knitk_layout l;
	unsigned int w, i, bad = 0;
	static const uint32_t sizes[] = {
		0, 1, 2, 3, 4, 5, 8, 12, 16, 32, 64, 128, 1U << 31, ~0U,
	};

	for (w = 1; w <= KNITK_MAX_WORKERS; w++) {
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			uint32_t r = sizes[i];
			int legal = !r || (!(r & (r - 1)) && r <= 64 && 64 / r >= w + 1);

			g = geom(w, 1, 64, 64, P);
			g.flags = KNITK_GEOM_STEAL;
			g.region_lanes = r;
			bad += knitk_layout_compute(&g, &l) != (legal ? 0 : -EINVAL);
			/* The layout does not depend on it. */
			if (legal) {
				struct knitk_layout l0;

				g.region_lanes = 0;
				REQUIRE(knitk_layout_compute(&g, &l0) == 0);
				bad += !!memcmp(&l, &l0, sizeof(l));
			}
			g.flags = 0;
			g.region_lanes = r;
			bad += knitk_layout_compute(&g, &l) != (r ? -EINVAL : 0);
		}
	}
	CHECK_EQ(bad, 0);
	g = geom(2, 1, 64, 64, P);
	g.flags = KNITK_GEOM_STEAL;
	g.region_lanes = 16;
	CHECK_EQ(knitk_layout_compute(&g, &l), 0);
	g.region_lanes = 32;		/* 2 regions for 2 workers */
	CHECK_EQ(knitk_layout_compute(&g, &l), -EINVAL);
	g = geom(KNITK_MAX_WORKERS, 1, 0, 0, 0);
	g.flags = KNITK_GEOM_STEAL;
	g.region_lanes = 1;
	CHECK_EQ(knitk_layout_compute(&g, &l), 0);
	g.region_lanes = 2;
	CHECK_EQ(knitk_layout_compute(&g, &l), -EINVAL);
}

static void limits_accepted(void)
{
	struct knitk_geometry g = geom(KNITK_MAX_WORKERS, KNITK_MAX_SUBMITTERS,
				       KNITK_MAX_INLINE_BYTES, KNITK_MAX_ABORT_BITS,
				       KNITK_MAX_ARENA_BYTES);
	struct knitk_layout l;

	REQUIRE(knitk_layout_compute(&g, &l) == 0);
	CHECK_EQ(l.nr_mailboxes, 64 * 63 + 63);
	CHECK(l.nr_mailboxes <= KNITK_MAX_MAILBOXES);
	CHECK_EQ(l.abort_size, KNITK_MAX_ABORT_BITS / 8);
	g = geom(1, 1, 0, 0, 0);
	REQUIRE(knitk_layout_compute(&g, &l) == 0);
	CHECK_EQ(l.size, 2 * P + 2 * 2 * P);	/* no abort page */
}

/* Every region page aligned, in order, inside the knot, non-overlapping. */
static void random_geometries_consistent(void)
{
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	int i;

	for (i = 0; i < 20000; i++) {
		struct knitk_geometry g = geom(
			1 + tap_rand(&seed) % KNITK_MAX_WORKERS,
			1 + tap_rand(&seed) % KNITK_MAX_SUBMITTERS,
			(tap_rand(&seed) % 257) * 64,
			(tap_rand(&seed) % (KNITK_MAX_ABORT_BITS / 64 + 1)) * 64,
			(tap_rand(&seed) % 1025) * (uint64_t)P);
		struct knitk_layout l;
		uint64_t steal_end, lanes_end;

		if (tap_rand(&seed) & 1)
			g.flags = KNITK_GEOM_STEAL;
		REQUIRE(knitk_layout_compute(&g, &l) == 0);
		steal_end = l.abort_off + l.abort_size + (uint64_t)l.nr_steal * 64;
		lanes_end = l.lane_off + 64ULL * l.lane_stride;
		CHECK(l.size % P == 0 && l.mailbox_off % P == 0);
		CHECK(l.abort_size * 8 >= g.abort_bits);
		CHECK(steal_end <= l.mailbox_off);
		CHECK(lanes_end <= l.arena_off && l.arena_off % P == 0);
		CHECK(l.mailbox_stride % P == 0);
		CHECK_EQ(l.nr_mailboxes, l.nr_request + g.nr_workers);
		CHECK_EQ(l.mailbox_off + (uint64_t)l.nr_mailboxes * l.mailbox_stride, l.size);
		if (tap_case_failed) {
			printf("# geometry %d failed\n", i);
			return;
		}
	}
}

int main(void)
{
	TEST(formula_private_lanes);
	TEST(formula_steal);
	TEST(invalid_geometries);
	TEST(region_lanes_rule);
	TEST(limits_accepted);
	TEST(random_geometries_consistent);
	return tap_exit();
}
