// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: fault-injection points for the kselftests, built only with
 * KNITK_TEST_HOOKS=y (tools/vm-check.sh does), never in a module for use.
 *
 * debugfs knitk/kick_pause parks the next kick of one doorbell inside
 * knitk_doorbell_kick(), after its event is counted and before its seq
 * advance, so a test can put a whole KNITK_IOC_WAIT into that window:
 *
 *   write d (a doorbell index)   arm: the next kick of doorbell d parks
 *   write 64                     disarm, and let a parked kick go on
 *   read                         0 idle, 1 armed, 2 a kick is parked
 *
 * debugfs knitk/counter_base is where the 32-bit counters of every knot
 * created from then on start, instead of 0: each doorbell's seq and its
 * kernel-side event counts, death_seq, death_done and every role's
 * generation, so a test runs them across their wrap (default 0).
 */
#include <linux/atomic.h>
#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/wait.h>

#include "knitk_internal.h"

enum { KNITK_HOOK_IDLE, KNITK_HOOK_ARMED, KNITK_HOOK_PARKED };

static DECLARE_WAIT_QUEUE_HEAD(knitk_hook_wq);
static atomic_t knitk_hook_state = ATOMIC_INIT(KNITK_HOOK_IDLE);
static unsigned int knitk_hook_bell;
static u32 knitk_hook_base;

void knitk_hook_kick(unsigned int d)
{
	if (atomic_read(&knitk_hook_state) != KNITK_HOOK_ARMED ||
	    READ_ONCE(knitk_hook_bell) != d)
		return;
	if (atomic_cmpxchg(&knitk_hook_state, KNITK_HOOK_ARMED,
			   KNITK_HOOK_PARKED) != KNITK_HOOK_ARMED)
		return;
	/* Killable: a test that dies cannot leave the kicker stuck. */
	wait_event_killable(knitk_hook_wq, atomic_read(&knitk_hook_state) !=
					   KNITK_HOOK_PARKED);
}

static int knitk_hook_get(void *data, u64 *val)
{
	*val = atomic_read(&knitk_hook_state);
	return 0;
}

static int knitk_hook_set(void *data, u64 val)
{
	if (val < KNITK_NR_DOORBELLS) {
		WRITE_ONCE(knitk_hook_bell, val);
		/* The doorbell is set before a kick can see the state armed. */
		atomic_set_release(&knitk_hook_state, KNITK_HOOK_ARMED);
		return 0;
	}
	if (val != KNITK_NR_DOORBELLS)
		return -EINVAL;
	atomic_set(&knitk_hook_state, KNITK_HOOK_IDLE);
	wake_up_all(&knitk_hook_wq);
	return 0;
}
DEFINE_DEBUGFS_ATTRIBUTE(knitk_hook_fops, knitk_hook_get, knitk_hook_set,
			 "%llu\n");

/* Before the knot is published: nobody else sees these words yet. */
void knitk_hook_counters(struct knitk_knot *knot)
{
	u32 base = READ_ONCE(knitk_hook_base);
	unsigned int d;

	knot->control->death_seq = base;
	knot->control->death_done = base;
	for (d = 0; d < KNITK_NR_DOORBELLS; d++) {
		knot->control->generation[d] = base;
		knitk_doorbell_shared(knot, d)->seq = base;
		atomic_set(&knot->bells[d].events_begun, base);
		atomic_set(&knot->bells[d].events_done, base);
	}
}

void knitk_hooks_init(struct dentry *root)
{
	debugfs_create_file_unsafe("kick_pause", 0600, root, NULL,
				   &knitk_hook_fops);
	debugfs_create_u32("counter_base", 0600, root, &knitk_hook_base);
}
