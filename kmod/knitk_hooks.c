// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: fault-injection points for the kselftests, built only with
 * KNITK_TEST_HOOKS=y (tools/vm-check.sh does), never in a module for use.
 *
 * Each debugfs knob parks the next pass of one doorbell through its point,
 * so a test can put a whole system call of its own into that window:
 *
 *   kick_pause  inside knitk_doorbell_kick(), after its event is counted
 *               and before its seq advance
 *   spin_pause  inside a KNITK_WAIT_SPIN wait's spin, once it has found
 *               the wait not done and its ringer running (S8)
 *
 *   write d (a doorbell index)   arm: the next pass for doorbell d parks
 *   write 64                     disarm, and let a parked pass go on
 *   read                         0 idle, 1 armed, 2 a pass is parked
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

static u32 knitk_hook_base;

struct knitk_hook {
	wait_queue_head_t wq;
	atomic_t state;
	unsigned int bell;
};

#define KNITK_HOOK_INIT(h) {					\
	.wq = __WAIT_QUEUE_HEAD_INITIALIZER((h).wq),		\
	.state = ATOMIC_INIT(KNITK_HOOK_IDLE),			\
}

static struct knitk_hook knitk_hook_kick_pause =
	KNITK_HOOK_INIT(knitk_hook_kick_pause);
static struct knitk_hook knitk_hook_spin_pause =
	KNITK_HOOK_INIT(knitk_hook_spin_pause);

static void knitk_hook_pause(struct knitk_hook *h, unsigned int d)
{
	if (atomic_read(&h->state) != KNITK_HOOK_ARMED ||
	    READ_ONCE(h->bell) != d)
		return;
	if (atomic_cmpxchg(&h->state, KNITK_HOOK_ARMED,
			   KNITK_HOOK_PARKED) != KNITK_HOOK_ARMED)
		return;
	/* Killable: a test that dies cannot leave the task stuck. */
	wait_event_killable(h->wq, atomic_read(&h->state) != KNITK_HOOK_PARKED);
}

void knitk_hook_kick(unsigned int d)
{
	knitk_hook_pause(&knitk_hook_kick_pause, d);
}

void knitk_hook_spin(unsigned int d)
{
	knitk_hook_pause(&knitk_hook_spin_pause, d);
}

static int knitk_hook_get(void *data, u64 *val)
{
	struct knitk_hook *h = data;

	*val = atomic_read(&h->state);
	return 0;
}

static int knitk_hook_set(void *data, u64 val)
{
	struct knitk_hook *h = data;

	if (val < KNITK_NR_DOORBELLS) {
		WRITE_ONCE(h->bell, val);
		/* The doorbell is set before a pass can see the state armed. */
		atomic_set_release(&h->state, KNITK_HOOK_ARMED);
		return 0;
	}
	if (val != KNITK_NR_DOORBELLS)
		return -EINVAL;
	atomic_set(&h->state, KNITK_HOOK_IDLE);
	wake_up_all(&h->wq);
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
	debugfs_create_file_unsafe("kick_pause", 0600, root,
				   &knitk_hook_kick_pause, &knitk_hook_fops);
	debugfs_create_file_unsafe("spin_pause", 0600, root,
				   &knitk_hook_spin_pause, &knitk_hook_fops);
	debugfs_create_u32("counter_base", 0600, root, &knitk_hook_base);
}
