// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: roles, join and peer-death bookkeeping.
 *
 * A role slot is a worker id (0..nr_workers-1) or KNITK_SLOT_HOST.  The
 * control page records which slots are held by a live endpoint (live), which
 * lost their endpoint (dead), how often each was joined (generation) and how
 * many joined endpoints were released (death_seq).  Only the kernel writes
 * the control page, always under knot->lock and with WRITE_ONCE so that a
 * reader in userspace sees whole words.
 */
#include <linux/bits.h>
#include <linux/errno.h>
#include <linux/kernel.h>

#include "knitk.h"

/**
 * knitk_peer_slot() - the role slot asked for by KNITK_IOC_JOIN
 * @g: the knot's geometry
 * @role: KNITK_ROLE_HOST or KNITK_ROLE_WORKER
 * @worker: worker id for a worker, zero for the host
 *
 * Return: the slot, or -EINVAL.
 */
int knitk_peer_slot(const struct knitk_geometry *g, u32 role, u32 worker)
{
	switch (role) {
	case KNITK_ROLE_HOST:
		return worker ? -EINVAL : KNITK_SLOT_HOST;
	case KNITK_ROLE_WORKER:
		return worker < g->nr_workers ? (int)worker : -EINVAL;
	default:
		return -EINVAL;
	}
}

/**
 * knitk_peer_join() - record that a live endpoint now holds @slot
 * @ctl: the control page (caller holds the knot lock)
 * @slot: a slot from knitk_peer_slot()
 * @generation: out: the slot's generation after this join
 *
 * Return: 0, or -EBUSY if a live endpoint holds the slot.
 */
int knitk_peer_join(struct knitk_control *ctl, unsigned int slot,
		    u32 *generation)
{
	u64 bit = BIT_ULL(slot);
	u32 gen;

	if (READ_ONCE(ctl->live) & bit)
		return -EBUSY;
	gen = READ_ONCE(ctl->generation[slot]) + 1;
	WRITE_ONCE(ctl->generation[slot], gen);
	WRITE_ONCE(ctl->dead, READ_ONCE(ctl->dead) & ~bit);
	WRITE_ONCE(ctl->live, READ_ONCE(ctl->live) | bit);
	*generation = gen;
	return 0;
}

/**
 * knitk_peer_leave() - record that the endpoint holding @slot is gone
 * @ctl: the control page (caller holds the knot lock)
 * @slot: the slot the endpoint joined
 *
 * The dead bit and death_seq are written before the caller advances any
 * doorbell, so a waiter woken by the death already sees them.
 */
void knitk_peer_leave(struct knitk_control *ctl, unsigned int slot)
{
	u64 bit = BIT_ULL(slot);

	WRITE_ONCE(ctl->live, READ_ONCE(ctl->live) & ~bit);
	WRITE_ONCE(ctl->dead, READ_ONCE(ctl->dead) | bit);
	WRITE_ONCE(ctl->death_seq, READ_ONCE(ctl->death_seq) + 1);
}

/**
 * knitk_peer_host_dead() - has the host joined and since been released?
 * @ctl: the control page
 *
 * The dead bit is cleared when a new host joins.
 */
bool knitk_peer_host_dead(const struct knitk_control *ctl)
{
	return READ_ONCE(ctl->dead) & BIT_ULL(KNITK_SLOT_HOST);
}

/**
 * knitk_peer_death_seq() - the current peer-death sequence
 * @ctl: the control page
 */
u32 knitk_peer_death_seq(const struct knitk_control *ctl)
{
	return READ_ONCE(ctl->death_seq);
}

/**
 * knitk_knot_join() - give an endpoint the role slot @slot of @knot
 * @knot: the knot
 * @slot: a slot from knitk_peer_slot()
 * @generation: out: the slot's generation after this join
 *
 * Return: 0 or -EBUSY.
 */
int knitk_knot_join(struct knitk_knot *knot, unsigned int slot,
		    u32 *generation)
{
	int ret;

	mutex_lock(&knot->lock);
	ret = knitk_peer_join(knot->control, slot, generation);
	mutex_unlock(&knot->lock);
	return ret;
}

/**
 * knitk_knot_leave() - a joined endpoint of @knot is being released
 * @knot: the knot
 * @slot: the slot the endpoint held
 *
 * A worker's death wakes the host; the host's death wakes every worker.
 */
void knitk_knot_leave(struct knitk_knot *knot, unsigned int slot)
{
	unsigned int w;

	mutex_lock(&knot->lock);
	knitk_peer_leave(knot->control, slot);
	mutex_unlock(&knot->lock);
	knitk_knot_wake_pollers(knot);

	if (slot != KNITK_SLOT_HOST) {
		knitk_doorbell_kick(knot, KNITK_DOORBELL_HOST);
		return;
	}
	for (w = 0; w < knot->geometry.nr_workers; w++)
		knitk_doorbell_kick(knot, w);
}
