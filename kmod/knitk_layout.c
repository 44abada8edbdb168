// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: geometry validation and layout math.
 *
 * This is the one place where the offsets of a knot are computed, from the
 * formula in <linux/knitk.h>.  Everything here is pure so the KUnit suite
 * can check it against hand-computed numbers.
 */
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/math.h>

#include "knitk_internal.h"

/**
 * knitk_geometry_check() - validate a geometry from userspace
 * @g: the geometry
 *
 * Return: 0 if every field is in range, else -EINVAL.
 */
int knitk_geometry_check(const struct knitk_geometry *g)
{
	u32 nr_request, lanes;
	int i;

	if ((g->flags & ~KNITK_GEOM_FLAGS) || g->reserved0)
		return -EINVAL;
	for (i = 0; i < ARRAY_SIZE(g->reserved); i++)
		if (g->reserved[i])
			return -EINVAL;
	if (g->nr_workers < 1 || g->nr_workers > KNITK_MAX_WORKERS)
		return -EINVAL;
	/* A region size belongs to the stealing handshake only (T1). */
	lanes = g->region_lanes;
	if (lanes && (!(g->flags & KNITK_GEOM_STEAL) || !is_power_of_2(lanes) ||
		      KNITK_LANES / lanes < g->nr_workers + 1))
		return -EINVAL;
	if (g->nr_submitters < 1 || g->nr_submitters > KNITK_MAX_SUBMITTERS)
		return -EINVAL;
	if (g->lanes != KNITK_LANES)
		return -EINVAL;
	if (g->inline_bytes % KNITK_CACHELINE ||
	    g->inline_bytes > KNITK_MAX_INLINE_BYTES)
		return -EINVAL;
	if (g->abort_bits % KNITK_ABORT_ALIGN ||
	    g->abort_bits > KNITK_MAX_ABORT_BITS)
		return -EINVAL;
	if (g->arena_bytes % KNITK_ARENA_ALIGN ||
	    g->arena_bytes > KNITK_MAX_ARENA_BYTES)
		return -EINVAL;

	/* Both factors are bounded above, so this cannot overflow. */
	if (g->flags & KNITK_GEOM_STEAL)
		nr_request = g->nr_submitters;
	else
		nr_request = g->nr_submitters * g->nr_workers;
	if (nr_request + g->nr_workers > KNITK_MAX_MAILBOXES)
		return -EINVAL;
	return 0;
}

/**
 * knitk_geometry_region_lanes() - the region size a knot records
 * @g: a geometry that passed knitk_geometry_check()
 *
 * The rule of struct knitk_geometry.region_lanes, which the library
 * applies too (knitk_steal_region_lanes): 0 asks for the largest power of
 * two g with KNITK_LANES / g >= nr_workers + 1, one region per worker and
 * a spare one.
 *
 * Return: g for a stealing geometry, 0 for one without KNITK_GEOM_STEAL.
 */
u32 knitk_geometry_region_lanes(const struct knitk_geometry *g)
{
	if (!(g->flags & KNITK_GEOM_STEAL))
		return 0;
	if (g->region_lanes)
		return g->region_lanes;
	return rounddown_pow_of_two(KNITK_LANES / (g->nr_workers + 1));
}

/**
 * knitk_layout_compute() - the layout of a valid geometry
 * @g: a geometry that passed knitk_geometry_check()
 * @l: filled with every offset and size; reserved fields zeroed
 *
 * With the limits of knitk_geometry_check() the largest knot is below
 * 2^45 bytes, so no sum here overflows.
 */
void knitk_layout_compute(const struct knitk_geometry *g,
			  struct knitk_layout *l)
{
	const u64 page = KNITK_PAGE_BYTES;
	bool steal = g->flags & KNITK_GEOM_STEAL;
	u64 lanes_end;

	memset(l, 0, sizeof(*l));
	l->control_size = page;
	l->doorbell_off = page;
	l->doorbell_stride = KNITK_CACHELINE;
	l->nr_doorbells = KNITK_NR_DOORBELLS;
	l->abort_off = 2 * page;
	l->abort_size = round_up((u64)g->abort_bits / 8, page);
	l->steal_off = steal ? l->abort_off + l->abort_size : 0;
	l->steal_stride = KNITK_CACHELINE;
	l->nr_steal = steal ? g->nr_submitters * g->nr_workers : 0;
	l->mailbox_off = l->abort_off + l->abort_size +
			 round_up((u64)l->nr_steal * KNITK_CACHELINE, page);
	l->nr_request = steal ? g->nr_submitters :
				g->nr_submitters * g->nr_workers;
	l->nr_mailboxes = l->nr_request + g->nr_workers;
	l->lane_off = sizeof(struct knitk_sector);
	l->lane_stride = KNITK_LANE_HEADER_BYTES + g->inline_bytes;
	lanes_end = l->lane_off + (u64)KNITK_LANES * l->lane_stride;
	l->arena_off = round_up(lanes_end, page);
	l->arena_size = g->arena_bytes;
	l->mailbox_stride = l->arena_off + l->arena_size;
	l->size = l->mailbox_off + (u64)l->nr_mailboxes * l->mailbox_stride;
}

/**
 * knitk_layout_check_size() - apply the max_knot_bytes limit
 * @l: a computed layout
 * @max_bytes: the limit (module parameter max_knot_bytes)
 *
 * Return: 0 if the knot fits, -E2BIG if it does not.
 */
int knitk_layout_check_size(const struct knitk_layout *l, u64 max_bytes)
{
	return l->size > max_bytes ? -E2BIG : 0;
}
