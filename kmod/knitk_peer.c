// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: roles, join and peer-death bookkeeping.
 *
 * A role slot is a worker id (0..nr_workers-1) or KNITK_SLOT_HOST.  The
 * control page records which slots are held by a live endpoint (live), which
 * lost their endpoint (dead), how often each was joined (generation), how
 * many joined roles ended (death_seq) and how many of those deaths have
 * kicked every doorbell they wake (death_done).  Only the kernel writes the
 * control page, always under knot->lock, with WRITE_ONCE so that a reader in
 * userspace sees whole words and with release stores where a reader
 * acquires one word and then reads the others.
 *
 * A role belongs to the process (thread group) that joined it, not to the
 * file: a forked child or another process may hold the same endpoint and
 * its mappings may outlive every fd.  The role ends, exactly once, at the
 * first of:
 *  - flush: a task of the joining process closes an fd of the endpoint and
 *    the file table it closed from holds no other fd of it (a dup()ed fd
 *    keeps the role; fds of other processes, inherited or received over
 *    SCM_RIGHTS, neither keep nor end it);
 *  - exit: the joining process has exited, seen from its struct pid the
 *    way a pidfd sees it, for the case where its file table outlives it
 *    (shared with another process through CLONE_FILES);
 *  - release: the last reference to the file goes;
 *  - mm: the joining process's exit tears down its address space, the
 *    earliest of the signs of its death (knitk_mm.c).
 */
#include <linux/bits.h>
#include <linux/errno.h>
#include <linux/fdtable.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/pid.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "knitk_internal.h"
#include "knitk_trace.h"

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
	/*
	 * The new generation and the cleared dead bit before the live bit:
	 * pairs with the acquire of live, then generation, in
	 * knitk_knot_role() (lib/core/knot.c).
	 */
	smp_store_release(&ctl->live, READ_ONCE(ctl->live) | bit);
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
	/*
	 * The cleared live bit before the dead bit: pairs with the acquire of
	 * dead, then live, in knot_host_dead() (lib/core/internal.h).
	 */
	smp_store_release(&ctl->dead, READ_ONCE(ctl->dead) | bit);
	/*
	 * Both before the new death_seq: pairs with the acquire of death_seq,
	 * then dead, in knitk_knot_deaths() (lib/core/knot.c) and with the
	 * ones in knot_peer_event() and knot_peer_woke() (lib/core/doorbell.c).
	 */
	smp_store_release(&ctl->death_seq, READ_ONCE(ctl->death_seq) + 1);
}

/**
 * knitk_peer_take() - let the endpoint of @r join @slot
 * @ctl: the control page (caller holds the knot lock)
 * @r: the endpoint's role
 * @slot: a slot from knitk_peer_slot()
 * @generation: out: the slot's generation after this join
 *
 * Return: 0, or -EBUSY if the endpoint joined before (even if its role
 * has ended since) or a live endpoint holds the slot.
 */
int knitk_peer_take(struct knitk_control *ctl, struct knitk_role *r,
		    unsigned int slot, u32 *generation)
{
	int ret;

	if (r->slot != KNITK_NO_SLOT)
		return -EBUSY;
	ret = knitk_peer_join(ctl, slot, generation);
	if (!ret)
		WRITE_ONCE(r->slot, slot);
	return ret;
}

/**
 * knitk_peer_end() - end the role @r once
 * @ctl: the control page (caller holds the knot lock)
 * @r: the endpoint's role
 *
 * Only the first call for a joined role marks its slot dead: the slot may
 * belong to a later joiner by the time another path gets here.
 *
 * Return: true if this call ended the role.
 */
bool knitk_peer_end(struct knitk_control *ctl, struct knitk_role *r)
{
	if (r->slot == KNITK_NO_SLOT || r->ended)
		return false;
	WRITE_ONCE(r->ended, true);
	knitk_peer_leave(ctl, r->slot);
	return true;
}

/**
 * knitk_role_kicks() - the doorbells the end of role @slot kicks
 * @g: the knot's geometry
 * @slot: the role's slot
 *
 * A worker's death wakes the host; the host's death wakes every worker.
 */
u64 knitk_role_kicks(const struct knitk_geometry *g, unsigned int slot)
{
	if (slot != KNITK_SLOT_HOST)
		return BIT_ULL(KNITK_DOORBELL_HOST);
	return g->nr_workers ? GENMASK_ULL(g->nr_workers - 1, 0) : 0;
}

/**
 * knitk_role_end() - end the role @r once and wake who must hear of it
 * @r: a joined role
 * @why: the path that ends it, for the knitk_role_end tracepoint
 *
 * A worker's death wakes the host; the host's death wakes every worker
 * (knitk_role_kicks()).  death_seq counts the death before the kicks,
 * death_done after them.
 */
void knitk_role_end(struct knitk_role *r, enum knitk_left why)
{
	struct knitk_knot *knot = r->knot;
	unsigned int w;
	bool ended;

	mutex_lock(&knot->lock);
	ended = knitk_peer_end(knot->control, r);
	mutex_unlock(&knot->lock);
	if (!ended)
		return;
	trace_knitk_role_end(knot, r, why);
	knitk_knot_wake_pollers(knot);
	/*
	 * A wait of this role, on the slot's doorbell, returns -ENOTCONN:
	 * ended was set under knot->lock, which the wake's queue lock
	 * orders before the waiter's re-check (knitk_wait_done()).
	 */
	wake_up_interruptible_all(&knot->bells[r->slot].wq);

	if (r->slot != KNITK_SLOT_HOST) {
		knitk_doorbell_kick(knot, KNITK_DOORBELL_HOST);
	} else {
		for (w = 0; w < knot->geometry.nr_workers; w++)
			knitk_doorbell_kick(knot, w);
	}
	/* Every seq this death advances has moved: count it done. */
	mutex_lock(&knot->lock);
	/*
	 * The kicks' seq increments (fully ordered in knitk_doorbell_kick())
	 * before the new value: pairs with the acquire of death_done, before
	 * the seq read, in knitk_doorbell_prepare() (lib/core/doorbell.c).
	 */
	smp_store_release(&knot->control->death_done,
			  READ_ONCE(knot->control->death_done) + 1);
	mutex_unlock(&knot->lock);
}

/* The owner's thread group left its mm (knitk_mm.c): the earliest path. */
static void knitk_role_mm_gone(struct knitk_role *r)
{
	knitk_role_end(r, KNITK_LEFT_MM);
}

/* In process context, after a wake of the owner's wait_pidfd. */
static void knitk_role_exit_work(struct work_struct *work)
{
	struct knitk_role *r = container_of(work, struct knitk_role, exit_work);

	/* Also woken when a ptraced leader exits before its threads. */
	if (thread_group_exited(r->owner))
		knitk_role_end(r, KNITK_LEFT_EXIT_WATCH);
}

/*
 * Called under the wait_pidfd lock (and tasklist_lock) when the owner's
 * thread group has exited: no sleeping here, the work does the rest.
 */
static int knitk_role_exit_wake(struct wait_queue_entry *wait,
				unsigned int mode, int sync, void *key)
{
	struct knitk_role *r = container_of(wait, struct knitk_role,
					    exit_wait);

	/* The start of the notice's delay, only while it is traced. */
	if (trace_knitk_role_end_enabled())
		r->exit_ns = ktime_get_ns();
	schedule_work(&r->exit_work);
	return 0;
}

/**
 * knitk_role_init() - an endpoint's role before JOIN
 * @r: the role
 */
void knitk_role_init(struct knitk_role *r)
{
	r->knot = NULL;
	r->slot = KNITK_NO_SLOT;
	r->ended = false;
	r->owner = NULL;
	r->exit_ns = 0;
	r->mm_watch = NULL;
	init_waitqueue_func_entry(&r->exit_wait, knitk_role_exit_wake);
	INIT_WORK(&r->exit_work, knitk_role_exit_work);
}

static int knitk_role_fd_is(const void *file, struct file *f, unsigned int fd)
{
	return f == file;
}

/*
 * Does a thread of the owner still have an fd of @file in its file table?
 * A thread that exits has dropped its table (exit_files() clears ->files
 * before it closes the table's fds), so a table private to an exiting
 * thread that unshared it keeps nothing, and the group's shared table
 * keeps the role.
 */
static bool knitk_role_owner_holds(struct knitk_role *r, struct file *file)
{
	struct task_struct *leader, *t;
	bool held = false;

	rcu_read_lock();
	leader = pid_task(r->owner, PIDTYPE_TGID);
	if (leader) {
		for_each_thread(leader, t) {
			task_lock(t);
			held = t->files &&
			       iterate_fd(t->files, 0, knitk_role_fd_is, file);
			task_unlock(t);
			if (held)
				break;
		}
	}
	rcu_read_unlock();
	return held;
}

/**
 * knitk_role_join() - KNITK_IOC_JOIN: take @slot of @knot for the caller
 * @r: the endpoint's role
 * @knot: the endpoint's knot
 * @file: the endpoint's file (NULL: no fd to look for, for KUnit)
 * @slot: a slot from knitk_peer_slot()
 * @generation: out: the slot's generation after this join
 *
 * The calling thread group becomes the owner and its exit is watched.
 * The caller is alive here, so the wake at its exit comes after the wait
 * entry is queued.  A close of the caller's last fd of @file that raced
 * the JOIN (its flush saw no role yet) is found by the look at the
 * owner's file tables after the role is published, and ends it.
 *
 * Return: 0, -EBUSY, or -EBADF when the owner held no fd of @file by the
 * time the role was taken (the role is taken and ended at once).
 */
int knitk_role_join(struct knitk_role *r, struct knitk_knot *knot,
		    struct file *file, unsigned int slot, u32 *generation)
{
	int ret;

	/* knot->lock makes "joins once" and "role free" one decision. */
	mutex_lock(&knot->lock);
	ret = knitk_peer_take(knot->control, r, slot, generation);
	if (!ret) {
		r->owner = get_pid(task_tgid(current));
		/* For debugfs: who holds (or last held) the slot. */
		knot->pids[slot] = pid_nr(r->owner);
		add_wait_queue(&r->owner->wait_pidfd, &r->exit_wait);
		/* Pairs with the smp_load_acquire() in knitk_role_flush(). */
		smp_store_release(&r->knot, knot);
	}
	mutex_unlock(&knot->lock);
	if (ret)
		return ret;
	trace_knitk_role_join(knot, slot, *generation);
	/*
	 * The fd tables' file_lock orders this look after the store above
	 * for a close that removes the fd later, whose flush then sees the
	 * role; a close that removed it earlier is seen here.
	 */
	if (file && !knitk_role_owner_holds(r, file)) {
		knitk_role_end(r, KNITK_LEFT_NO_FD);
		return -EBADF;
	}
	if (file)
		knitk_mm_watch_add(r, knitk_role_mm_gone);
	return 0;
}

/**
 * knitk_role_flush() - an fd of the endpoint of @r is being closed
 * @r: the endpoint's role
 * @file: the endpoint's file
 * @id: the file table the fd was closed from (NULL for a close by the
 *	kernel outside any table)
 *
 * Ends the role if the closing task belongs to the owner and no file
 * table of the owner's threads holds another fd of @file.  Called for
 * every close, so a task of a forked child or of a process that received
 * the fd is told apart by its thread group; a thread that unshared its
 * table and closes or exits ends nothing while the group's table keeps an
 * fd; at the owner's exit its table is closed fd by fd, and the last of
 * them ends the role here.
 */
void knitk_role_flush(struct knitk_role *r, struct file *file, fl_owner_t id)
{
	/* Pairs with the smp_store_release() in knitk_role_join(). */
	struct knitk_knot *knot = smp_load_acquire(&r->knot);

	if (!knot || !id || task_tgid(current) != r->owner)
		return;
	/* The fd being closed has left its table already. */
	if (knitk_role_owner_holds(r, file))
		return;
	knitk_role_end(r, KNITK_LEFT_CLOSE);
}

/**
 * knitk_role_release() - the endpoint of @r is being released
 * @r: the endpoint's role
 *
 * Stops watching the owner, then ends the role if nothing ended it yet.
 */
void knitk_role_release(struct knitk_role *r)
{
	if (!r->knot)
		return;
	knitk_mm_watch_remove(r);
	/* No wake queues the work after this; then none runs or is queued. */
	remove_wait_queue(&r->owner->wait_pidfd, &r->exit_wait);
	cancel_work_sync(&r->exit_work);
	/* The owner's pid, for the tracepoint, until the role has ended. */
	knitk_role_end(r, KNITK_LEFT_RELEASE);
	put_pid(r->owner);
}
