// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: word waits - a futex for the 32-bit words of a knot.
 *
 * A shared futex is keyed by the file and offset of the page it lives in;
 * the knot's pages belong to no file mapping, so futex(2) refuses them
 * (-EFAULT).  KNITK_IOC_WORD_WAIT sleeps while a word of the knot's data
 * region holds a value, KNITK_IOC_WORD_WAKE wakes the waiters of a word,
 * in any process attached to the knot.  The waiters of a knot hash by
 * offset to a few wait queues; a wake passes its offset as the key and
 * each waiter's wake function takes only its own word's wakes.
 */
#include <linux/errno.h>
#include <linux/hash.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include <linux/knitk.h>

#include "knitk_internal.h"

/**
 * struct knitk_word_waiter - one sleeper of KNITK_IOC_WORD_WAIT
 * @wq: its entry on the knot's queue for @offset's hash.
 * @offset: the word it waits on.
 * @woken: a wake of @offset took it off the queue; written under the
 *	queue's lock, before the removal its waiter sees.
 */
struct knitk_word_waiter {
	struct wait_queue_entry wq;
	u64 offset;
	bool woken;
};

/* The key of a wake: its word, and how many it woke. */
struct knitk_word_key {
	u64 offset;
	u32 woken;
};

void knitk_words_init(struct knitk_knot *knot)
{
	unsigned int i;

	for (i = 0; i < KNITK_WORD_QUEUES; i++)
		init_waitqueue_head(&knot->words[i]);
}

static wait_queue_head_t *knitk_word_queue(struct knitk_knot *knot, u64 offset)
{
	return &knot->words[hash_64(offset, KNITK_WORD_QUEUE_BITS)];
}

/**
 * knitk_word_valid() - whether @offset names a word of @l's data region
 * @l: the knot's layout
 * @offset: a byte offset in the knot
 *
 * Return: true for a 4-byte aligned word past the control page and inside
 * the knot.
 */
bool knitk_word_valid(const struct knitk_layout *l, u64 offset)
{
	return !(offset % sizeof(u32)) && offset >= l->control_size &&
	       offset < l->size && l->size - offset >= sizeof(u32);
}

/*
 * Called under the queue's lock by __wake_up() with a struct
 * knitk_word_key.  The entry leaves the queue before its task is woken:
 * a sleeper that ran between a wake and a later removal would see itself
 * still queued and sleep again, with nobody left to wake it.  Once the
 * entry is off, the sleeper may return and its stack be gone, so the
 * task is held across the wake.
 */
static int knitk_word_wake_fn(struct wait_queue_entry *wq, unsigned int mode,
			      int sync, void *key)
{
	struct knitk_word_waiter *w = container_of(wq, struct knitk_word_waiter, wq);
	struct task_struct *p = wq->private;
	struct knitk_word_key *k = key;

	/* Another word of the same queue: not woken, not counted. */
	if (w->offset != k->offset)
		return 0;
	w->woken = true;
	k->woken++;
	get_task_struct(p);
	/*
	 * The release store of the removal, after @woken, pairs with
	 * list_empty_careful() in knitk_word_sleep().
	 */
	list_del_init_careful(&wq->entry);
	wake_up_process(p);
	put_task_struct(p);
	return 1;
}

/* Sleep on @w until woken, the deadline or a signal (state set by caller). */
static int knitk_word_sleep(struct knitk_word_waiter *w, u64 deadline_ns)
{
	struct hrtimer_sleeper timer;
	bool timed = knitk_deadline_timer(&timer, deadline_ns);
	int ret;

	for (;;) {
		/* The wake function removed us: pairs with its removal. */
		if (list_empty_careful(&w->wq.entry)) {
			ret = 0;
			break;
		}
		ret = knitk_sleep_ended(&timer, timed);
		if (ret)
			break;
		schedule();
		/* Before the checks above: a wake in between is not lost. */
		set_current_state(TASK_INTERRUPTIBLE);
	}
	__set_current_state(TASK_RUNNING);
	if (timed)
		knitk_deadline_timer_end(&timer);
	return ret;
}

/**
 * knitk_word_wait() - KNITK_IOC_WORD_WAIT on @knot
 * @knot: the caller's knot
 * @ww: the request, already copied in
 *
 * Return: as struct knitk_word_wait says.
 */
int knitk_word_wait(struct knitk_knot *knot, const struct knitk_word_wait *ww)
{
	struct knitk_word_waiter w = { .offset = ww->offset };
	wait_queue_head_t *q;
	u32 *word;
	int ret;

	if (ww->flags || ww->reserved || !knitk_word_valid(&knot->layout, ww->offset))
		return -EINVAL;
	q = knitk_word_queue(knot, ww->offset);
	word = knot->base + ww->offset;
	init_wait_entry(&w.wq, 0);
	w.wq.func = knitk_word_wake_fn;
	/*
	 * Queued and TASK_INTERRUPTIBLE (a full barrier) before the word is
	 * read: pairs with the waker's store of the word, then its wake,
	 * which takes the queue's lock.  Either we read the new value, or
	 * the wake finds us queued.
	 */
	prepare_to_wait_exclusive(q, &w.wq, TASK_INTERRUPTIBLE);
	if (READ_ONCE(*word) != ww->expected) {
		ret = -EAGAIN;
		__set_current_state(TASK_RUNNING);
	} else {
		ret = knitk_word_sleep(&w, knitk_caller_deadline(ww->deadline_ns));
	}
	finish_wait(q, &w.wq);
	/*
	 * A wake that took us off the queue is ours even when the deadline
	 * or a signal came too: woken was written before the removal, which
	 * finish_wait() either saw or waited for under the lock.
	 */
	if (READ_ONCE(w.woken))
		ret = 0;
	return ret;
}

/**
 * knitk_word_wake() - KNITK_IOC_WORD_WAKE on @knot
 * @knot: the caller's knot
 * @wk: the request, already copied in; @wk->woken is set on success
 *
 * Return: 0, or -EINVAL as struct knitk_word_wake says.
 */
int knitk_word_wake(struct knitk_knot *knot, struct knitk_word_wake *wk)
{
	struct knitk_word_key key = { .offset = wk->offset };

	if (wk->flags || wk->reserved || !wk->nr ||
	    !knitk_word_valid(&knot->layout, wk->offset))
		return -EINVAL;
	/*
	 * Exclusive waiters only: @nr counts those whose wake function took
	 * the wake (their own word), the others of the queue are skipped.
	 */
	__wake_up(knitk_word_queue(knot, wk->offset), TASK_INTERRUPTIBLE,
		  wk->nr > INT_MAX ? INT_MAX : (int)wk->nr, &key);
	wk->woken = key.woken;
	return 0;
}
