// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: the owner's address space, watched for the earliest sign of its
 * death.
 *
 * A killed process tears down its address space (exit_mm()) before it
 * closes its files (exit_files()) and long before a pidfd or a parent
 * hears of it (exit_notify()).  The mm's release, when its last user
 * has gone, is the first point a module can see, and when that last
 * user is a thread of the owner that is exiting with every other
 * thread of its group, no code of the owner runs any more: the role
 * ends there (knitk_peer.c lists the other, later, paths).  A release
 * for any other reason (an exec, a task that held the mm a while)
 * ends nothing.
 *
 * One notifier per mm (mmu_notifier_get()), shared by the roles that
 * process joined, each holding a reference.
 */
#include <linux/list.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "knitk_internal.h"

#ifdef CONFIG_MMU_NOTIFIER

struct knitk_mm_watch {
	struct mmu_notifier mn;
	struct mutex lock;		/* roles */
	struct list_head roles;		/* struct knitk_role.mm_node */
};

/* The whole thread group of the owner of @r has exited its mm. */
static bool knitk_mm_owner_gone(const struct knitk_role *r)
{
	return (current->flags & PF_EXITING) &&
	       task_tgid(current) == r->owner &&
	       !atomic_read(&current->signal->live);
}

static void knitk_mm_release(struct mmu_notifier *mn, struct mm_struct *mm)
{
	struct knitk_mm_watch *w = container_of(mn, struct knitk_mm_watch, mn);
	struct knitk_role *r;

	/* Lock order: w->lock, then the knot's (r->mm_gone). */
	mutex_lock(&w->lock);
	list_for_each_entry(r, &w->roles, mm_node)
		if (knitk_mm_owner_gone(r))
			r->mm_gone(r);
	mutex_unlock(&w->lock);
}

static struct mmu_notifier *knitk_mm_alloc(struct mm_struct *mm)
{
	struct knitk_mm_watch *w = kzalloc(sizeof(*w), GFP_KERNEL);

	if (!w)
		return ERR_PTR(-ENOMEM);
	mutex_init(&w->lock);
	INIT_LIST_HEAD(&w->roles);
	return &w->mn;
}

static void knitk_mm_free(struct mmu_notifier *mn)
{
	kfree(container_of(mn, struct knitk_mm_watch, mn));
}

static const struct mmu_notifier_ops knitk_mm_ops = {
	.release	= knitk_mm_release,
	.alloc_notifier	= knitk_mm_alloc,
	.free_notifier	= knitk_mm_free,
};

/**
 * knitk_mm_watch_add() - watch the caller's mm for the end of @r
 * @r: a role the caller's thread group has just joined
 * @gone: called with @r when the owner's thread group has left the mm
 *
 * Not under any knot lock: this takes the mm's mmap lock.  Without a
 * watch (no memory, a kernel thread) the role ends by the later paths.
 */
void knitk_mm_watch_add(struct knitk_role *r, void (*gone)(struct knitk_role *r))
{
	struct knitk_mm_watch *w;
	struct mmu_notifier *mn;

	if (!current->mm)
		return;
	mn = mmu_notifier_get(&knitk_mm_ops, current->mm);
	if (IS_ERR(mn))
		return;
	w = container_of(mn, struct knitk_mm_watch, mn);
	mutex_lock(&w->lock);
	r->mm_gone = gone;
	list_add(&r->mm_node, &w->roles);
	r->mm_watch = w;
	mutex_unlock(&w->lock);
}

/**
 * knitk_mm_watch_remove() - stop watching for the end of @r
 * @r: a role being released
 *
 * After this no release of the mm looks at @r; its reference on the
 * watch goes (the watch is freed after an SRCU grace period).
 */
void knitk_mm_watch_remove(struct knitk_role *r)
{
	struct knitk_mm_watch *w = r->mm_watch;

	if (!w)
		return;
	mutex_lock(&w->lock);
	list_del(&r->mm_node);
	mutex_unlock(&w->lock);
	r->mm_watch = NULL;
	mmu_notifier_put(&w->mn);
}

/**
 * knitk_mm_watch_exit() - at module exit, wait for watches being freed
 */
void knitk_mm_watch_exit(void)
{
	mmu_notifier_synchronize();
}

#else /* !CONFIG_MMU_NOTIFIER: the later paths end every role */

void knitk_mm_watch_add(struct knitk_role *r, void (*gone)(struct knitk_role *r))
{
}

void knitk_mm_watch_remove(struct knitk_role *r)
{
}

void knitk_mm_watch_exit(void)
{
}

#endif
