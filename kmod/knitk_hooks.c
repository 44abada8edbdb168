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

void knitk_hooks_init(struct dentry *root)
{
	debugfs_create_file_unsafe("kick_pause", 0600, root, NULL,
				   &knitk_hook_fops);
}
