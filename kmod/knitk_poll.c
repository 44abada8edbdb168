// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: poll() of an endpoint - what it reports, what it registers on and
 * what wakes it.
 *
 * epoll registers once, at EPOLL_CTL_ADD, so poll() always registers on
 * the endpoint's own wait queue, whatever the endpoint's state then.  That
 * queue is woken by everything that can make a state poll() reports
 * become true: the doorbell the endpoint watches (the host's once attached, its
 * own once joined; entries chained on the doorbell's wait queue, moved on
 * JOIN), the knot's deaths (knitk_knot_wake_pollers()), the end of the
 * endpoint's own role among them, and CREATE, ATTACH and JOIN themselves,
 * which change what poll() reports.
 */
#include <linux/poll.h>
#include <linux/wait.h>

#include "knitk_internal.h"

/* A wake of a chained queue: pass it on to the endpoint's pollers. */
static int knitk_poller_chain(struct wait_queue_entry *wait, unsigned int mode,
			      int sync, void *key)
{
	struct knitk_poller *p = wait->private;

	__wake_up(&p->wq, mode, 1, key);
	return 0;
}

/**
 * knitk_poller_init() - set up an endpoint's poll state, watching nothing
 * @p: the poll state
 */
void knitk_poller_init(struct knitk_poller *p)
{
	init_waitqueue_head(&p->wq);
	init_waitqueue_func_entry(&p->bell, knitk_poller_chain);
	init_waitqueue_func_entry(&p->events, knitk_poller_chain);
	p->bell.private = p;
	p->events.private = p;
	p->bell_wq = NULL;
	p->events_wq = NULL;
}

/**
 * knitk_poller_watch() - chain the endpoint's pollers to doorbell @d of @knot
 * @p: the poll state
 * @knot: the endpoint's knot
 * @d: the doorbell poll() reports from now on
 *
 * Called before the endpoint is published as attached (with the host's
 * doorbell) and once more after JOIN (with its own), never concurrently;
 * the caller then wakes the pollers with knitk_poller_wake().
 */
void knitk_poller_watch(struct knitk_poller *p, struct knitk_knot *knot,
			unsigned int d)
{
	if (!p->events_wq) {
		p->events_wq = &knot->pollers;
		add_wait_queue(p->events_wq, &p->events);
	}
	/* A wake lost in between is made good by the caller's wake. */
	if (p->bell_wq)
		remove_wait_queue(p->bell_wq, &p->bell);
	p->bell_wq = &knot->bells[d].wq;
	add_wait_queue(p->bell_wq, &p->bell);
}

/**
 * knitk_poller_wake() - wake the endpoint's pollers: what poll() reports
 *	changed
 * @p: the poll state
 */
void knitk_poller_wake(struct knitk_poller *p)
{
	wake_up_interruptible_poll(&p->wq, EPOLLIN | EPOLLRDNORM | EPOLLPRI |
					   EPOLLHUP | EPOLLERR);
}

/**
 * knitk_poller_release() - unchain a released endpoint's poll state
 * @p: the poll state
 *
 * Before the endpoint's knot reference is dropped.  No poller is left on
 * @p->wq: epoll drops its entries before the file's release, and poll()
 * and select() hold the file while registered.  remove_wait_queue() takes
 * each queue's lock, so no wake is running in knitk_poller_chain() after.
 */
void knitk_poller_release(struct knitk_poller *p)
{
	if (p->bell_wq)
		remove_wait_queue(p->bell_wq, &p->bell);
	if (p->events_wq)
		remove_wait_queue(p->events_wq, &p->events);
	p->bell_wq = NULL;
	p->events_wq = NULL;
}

/**
 * knitk_knot_wake_pollers() - wake the pollers of every endpoint of @knot
 * @knot: the knot
 *
 * For a change of the knot's roles, after the control page shows it: a
 * death raises EPOLLPRI everywhere and, for the host's, EPOLLHUP on the
 * workers; the endpoint whose role ended reports EPOLLHUP | EPOLLERR.
 */
void knitk_knot_wake_pollers(struct knitk_knot *knot)
{
	wake_up_interruptible_poll(&knot->pollers,
				   EPOLLPRI | EPOLLHUP | EPOLLERR);
}

/**
 * knitk_poll_role_ended() - has the endpoint's joined role ended?
 * @r: the endpoint's role, joined
 *
 * Then poll() reports EPOLLHUP | EPOLLERR and nothing else: the doorbell
 * the role owned is no longer the endpoint's (a later joiner may own it),
 * and its waits return -ENOTCONN.  Read after the registration: @r->ended
 * is set under knot->lock before knitk_role_end() wakes the knot's
 * pollers, whose queue locks (the knot's, then the endpoint's, chained)
 * order that store before this load, or the wake after the registration.
 *
 * Return: true once the role has ended.
 */
bool knitk_poll_role_ended(const struct knitk_role *r)
{
	return READ_ONCE(r->ended);
}

/**
 * knitk_poller_register() - register a poll() call on the endpoint's pollers
 * @p: the poll state
 * @file: the polled file
 * @pt: the poll table
 *
 * Whatever the endpoint's state: the caller reads that state afterwards,
 * and CREATE, ATTACH and JOIN wake @p after changing it.
 */
void knitk_poller_register(struct knitk_poller *p, struct file *file,
			   struct poll_table_struct *pt)
{
	poll_wait(file, &p->wq, pt);
}

/**
 * knitk_poll_mask() - what poll() reports for doorbell @d
 * @knot: the knot
 * @d: the endpoint's doorbell, or the host's when it has not joined
 *
 * Level-triggered: EPOLLIN while a mailbox the doorbell consumes holds a
 * pending lane, EPOLLPRI while some role is dead and not joined again,
 * EPOLLHUP for a worker whose host died.  Not for an endpoint whose role
 * has ended (knitk_poll_role_ended()): that one reports EPOLLHUP |
 * EPOLLERR alone.  A poller is woken by delivered
 * notifies (so it sets its sleeping flag and re-checks first, as before
 * KNITK_IOC_WAIT), kicks and deaths.
 */
__poll_t knitk_poll_mask(struct knitk_knot *knot, unsigned int d)
{
	__poll_t mask = 0;

	/*
	 * After the registration; pairs with the notifier's smp_mb() and the
	 * kick's barrier.
	 */
	smp_mb();
	if (knitk_doorbell_pending(knot->base, &knot->geometry, &knot->layout,
				   d))
		mask |= EPOLLIN | EPOLLRDNORM;
	if (READ_ONCE(knot->control->dead))
		mask |= EPOLLPRI;
	if (d != KNITK_DOORBELL_HOST && knitk_peer_host_dead(knot->control))
		mask |= EPOLLHUP;
	return mask;
}
