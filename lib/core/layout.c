// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Geometry validation and the layout formula of <linux/knitk.h>.  This is
 * the only place in userspace that computes an offset of a knot; the futex
 * backend maps what it returns, and the layout the module returns (and the
 * one a futex knot's control page holds) is checked against it.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"

static uint64_t round_up_u64(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static int geometry_validate(const struct knitk_geometry *g)
{
	unsigned int i;

	if (g->flags & ~(uint32_t)KNITK_GEOM_FLAGS)
		return -EINVAL;
	if (g->nr_workers < 1 || g->nr_workers > KNITK_MAX_WORKERS)
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
	/* A region size belongs to the stealing handshake only (T1). */
	if (!(g->flags & KNITK_GEOM_STEAL) ? g->region_lanes != 0 :
	    knitk_steal_region_lanes(g->nr_workers, g->region_lanes) < 0)
		return -EINVAL;
	if (g->reserved0)
		return -EINVAL;
	for (i = 0; i < sizeof(g->reserved) / sizeof(g->reserved[0]); i++)
		if (g->reserved[i])
			return -EINVAL;
	return 0;
}

KNITK_EXPORT int knitk_layout_compute(const struct knitk_geometry *geom,
			 struct knitk_layout *layout)
{
	const uint64_t P = KNITK_PAGE_BYTES;
	struct knitk_layout l;
	uint64_t nr_mailboxes;
	int steal, ret;

	if (!geom || !layout)
		return -EINVAL;
	ret = geometry_validate(geom);
	if (ret)
		return ret;

	steal = !!(geom->flags & KNITK_GEOM_STEAL);
	memset(&l, 0, sizeof(l));
	l.control_size = P;
	l.doorbell_off = P;
	l.doorbell_stride = KNITK_CACHELINE;
	l.nr_doorbells = KNITK_NR_DOORBELLS;
	l.abort_off = 2 * P;
	l.abort_size = round_up_u64(geom->abort_bits / 8, P);
	l.steal_off = steal ? l.abort_off + l.abort_size : 0;
	l.steal_stride = KNITK_CACHELINE;
	l.nr_steal = steal ? geom->nr_submitters * geom->nr_workers : 0;
	l.mailbox_off = l.abort_off + l.abort_size +
			round_up_u64((uint64_t)l.nr_steal * KNITK_CACHELINE, P);
	l.nr_request = steal ? geom->nr_submitters :
			       geom->nr_submitters * geom->nr_workers;
	nr_mailboxes = (uint64_t)l.nr_request + geom->nr_workers;
	if (nr_mailboxes > KNITK_MAX_MAILBOXES)
		return -EINVAL;
	l.nr_mailboxes = (uint32_t)nr_mailboxes;
	l.lane_off = sizeof(struct knitk_sector);
	l.lane_stride = KNITK_LANE_HEADER_BYTES + geom->inline_bytes;
	l.arena_off = round_up_u64(l.lane_off +
				   (uint64_t)KNITK_LANES * l.lane_stride, P);
	l.arena_size = geom->arena_bytes;
	l.mailbox_stride = l.arena_off + l.arena_size;
	l.size = l.mailbox_off + nr_mailboxes * l.mailbox_stride;
	*layout = l;
	return 0;
}

bool knitk__layout_matches_geometry(const struct knitk_geometry *geom,
				    const struct knitk_layout *layout)
{
	struct knitk_layout expect;

	return !knitk_layout_compute(geom, &expect) &&
	       !memcmp(&expect, layout, sizeof(expect));
}

void knitk__geometry_resolve(struct knitk_geometry *geom)
{
	if ((geom->flags & KNITK_GEOM_STEAL) && !geom->region_lanes)
		geom->region_lanes = (uint32_t)knitk_steal_region_lanes(geom->nr_workers, 0);
}
