// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: doorbells - the idle filter, wait/notify and their counters.
 *
 * A doorbell's seq and sleeping words live in the shared pages; its wait
 * queue and counters live here.  The kernel reads the shared words with
 * READ_ONCE after a full barrier, and writes them only with atomics: a
 * kick advances seq, a delivered notify advances seq and clears sleeping
 * in one compare-and-swap.  So whatever userspace stores there cannot harm
 * the kernel: at worst a wake is delivered or suppressed wrongly, or
 * counted wrongly, for that knot.
 *
 * A wait with KNITK_WAIT_SPIN first spins while the doorbell's ringer, the
 * task that last delivered a notify to it, is on a CPU that is not
 * preempted, the way mutex optimistic spinning watches a lock's owner
 * (docs/protocol.md S8); KNITK_IOC_NOTIFY_WAIT rings with a synchronous
 * wake and then waits (S9).
 */
#include <linux/bits.h>
#include <linux/errno.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/moduleparam.h>
#include <linux/nsproxy.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/time_namespace.h>

#include "knitk_internal.h"
#include "knitk_trace.h"

/*
 * 1 ms: a hop between two tasks that each have a CPU takes a few
 * microseconds on hardware and tens under emulation (TCG), where a
 * budget of 50 us or less missed most replies; the spin ends anyway as
 * soon as the ringer stops running (S8).
 */
static ulong spin_ns = 1000000;
module_param(spin_ns, ulong, 0644);
MODULE_PARM_DESC(spin_ns,
		 "longest spin of a KNITK_WAIT_SPIN wait, in ns (0: never spin)");

static u64 knitk_word(const void *base, u64 off)
{
	return READ_ONCE(*(const u64 *)(base + off));
}

/**
 * knitk_doorbell_shared() - the shared words of doorbell @d of @knot
 * @knot: the knot
 * @d: doorbell index, below KNITK_NR_DOORBELLS
 */
struct knitk_doorbell *knitk_doorbell_shared(const struct knitk_knot *knot,
					     unsigned int d)
{
	return knot->base + knot->layout.doorbell_off +
	       (u64)d * knot->layout.doorbell_stride;
}

/* Doorbell @d's seq as it is now, for the tracepoints. */
u32 knitk_bell_seq(const struct knitk_knot *knot, unsigned int d)
{
	return READ_ONCE(knitk_doorbell_shared(knot, d)->seq);
}

/*
 * A doorbell's seq and sleeping words as one 64-bit word: a notify
 * advances seq and clears sleeping in one compare-and-swap, so of several
 * notifies for one sleep only the first is delivered.
 */
union knitk_bell_word {
	u64 word;
	struct {
		u32 seq;
		u32 sleeping;
	};
};

static_assert(offsetof(struct knitk_doorbell, seq) == 0);
static_assert(offsetof(struct knitk_doorbell, sleeping) == sizeof(u32));

/**
 * knitk_doorbell_valid() - may doorbell @d be rung or waited on in a knot?
 * @g: the knot's geometry
 * @d: doorbell index
 */
bool knitk_doorbell_valid(const struct knitk_geometry *g, unsigned int d)
{
	return d < g->nr_workers || d == KNITK_DOORBELL_HOST;
}

/* Any lane of mailbox @m pending against the sector's own ack word? */
static bool knitk_mailbox_pending(const void *base,
				  const struct knitk_layout *l, u32 m)
{
	u64 sector = l->mailbox_off + (u64)m * l->mailbox_stride;

	return knitk_word(base, sector + offsetof(struct knitk_sector, pub)) !=
	       knitk_word(base, sector + offsetof(struct knitk_sector, ack));
}

/* Stealing request mailbox @m: its ack is the XOR of every steal line's. */
static bool knitk_steal_pending(const void *base,
				const struct knitk_geometry *g,
				const struct knitk_layout *l, u32 m)
{
	u64 sector = l->mailbox_off + (u64)m * l->mailbox_stride;
	u64 ack = 0;
	u32 w;

	for (w = 0; w < g->nr_workers; w++) {
		u64 line = l->steal_off +
			   (u64)(m * g->nr_workers + w) * l->steal_stride;

		ack ^= knitk_word(base, line +
				  offsetof(struct knitk_steal_line, ack));
	}
	return knitk_word(base, sector + offsetof(struct knitk_sector, pub)) !=
	       ack;
}

/**
 * knitk_doorbell_pending() - does a mailbox consumed by doorbell @d hold work?
 * @base: start of the knot's memory
 * @g: the knot's geometry
 * @l: the knot's layout
 * @d: a doorbell accepted by knitk_doorbell_valid()
 *
 * Worker d consumes request mailboxes s * W + d, or with KNITK_GEOM_STEAL
 * every request mailbox through its steal line; the host consumes every
 * return mailbox.  The caller issues the barrier that orders these loads.
 */
bool knitk_doorbell_pending(const void *base, const struct knitk_geometry *g,
			    const struct knitk_layout *l, unsigned int d)
{
	u32 m;

	if (d == KNITK_DOORBELL_HOST) {
		for (m = 0; m < g->nr_workers; m++)
			if (knitk_mailbox_pending(base, l, l->nr_request + m))
				return true;
		return false;
	}
	if (g->flags & KNITK_GEOM_STEAL) {
		for (m = 0; m < l->nr_request; m++)
			if (knitk_steal_pending(base, g, l, m))
				return true;
		return false;
	}
	for (m = 0; m < g->nr_submitters; m++)
		if (knitk_mailbox_pending(base, l, m * g->nr_workers + d))
			return true;
	return false;
}

/**
 * knitk_notify_verdict() - the idle-lane filter for one doorbell
 * @pending: a consumed mailbox holds a pending lane
 * @sleeping: the doorbell's sleeping word
 */
enum knitk_verdict knitk_notify_verdict(bool pending, u32 sleeping)
{
	if (!pending)
		return KNITK_NOTIFY_IDLE;
	if (!sleeping)
		return KNITK_NOTIFY_AWAKE;
	return KNITK_NOTIFY_DELIVER;
}

/**
 * knitk_notify_rang() - what a notify did to a doorbell, for its tracepoint
 * @v: the idle filter's verdict
 * @advanced: the notify advanced the doorbell's seq
 */
enum knitk_rang knitk_notify_rang(enum knitk_verdict v, bool advanced)
{
	switch (v) {
	case KNITK_NOTIFY_IDLE:
		return KNITK_RANG_IDLE;
	case KNITK_NOTIFY_AWAKE:
		return KNITK_RANG_AWAKE;
	default:
		return advanced ? KNITK_RANG_WOKEN : KNITK_RANG_RACED;
	}
}

/**
 * knitk_wait_outcome() - how a wait ended, for its tracepoint
 * @ret: what knitk_doorbell_wait() returns
 * @s: what the wait saw
 * @death_seq: the knot's death_seq now
 *
 * A wake without work is an event's when one began since the seq check
 * (the one the spurious count leaves out), and a death's when death_seq
 * moved meanwhile; unknown (a kick) when the wait began untraced.
 */
enum knitk_waited knitk_wait_outcome(int ret, const struct knitk_wait_seen *s,
				     u32 death_seq)
{
	switch (ret) {
	case 0:
		if (s->pending)
			return KNITK_WAITED_WORK;
		if (!s->event)
			return KNITK_WAITED_SPURIOUS;
		if (s->start_ns && death_seq != s->death_seq)
			return KNITK_WAITED_DEATH;
		return KNITK_WAITED_KICK;
	case -EAGAIN:
		return KNITK_WAITED_MISMATCH;
	case -ETIMEDOUT:
		return KNITK_WAITED_TIMEOUT;
	case -ERESTARTSYS:
		return KNITK_WAITED_SIGNAL;
	case -EPIPE:
		return KNITK_WAITED_HOST_DEAD;
	case -ENOTCONN:
		return KNITK_WAITED_ENDED;
	default:
		return KNITK_WAITED_ERROR;
	}
}

/**
 * knitk_wait_spurious() - was a wait's wake spurious?
 * @pending: a consumed mailbox holds a pending lane after the wake
 * @events_begun: the bell's events_begun, read after the wait saw seq move
 * @events_done: the bell's events_done, read before the wait's seq check
 *
 * Spurious when there is no work and no kick or death began since the
 * wait's check: an event whose seq advance woke the wait was not done at
 * the check (it had not advanced seq yet), and has begun by the wake.
 */
bool knitk_wait_spurious(bool pending, u32 events_begun, u32 events_done)
{
	return !pending && events_begun == events_done;
}

void knitk_bell_init(struct knitk_bell *bell)
{
	unsigned int c;

	init_waitqueue_head(&bell->wq);
	for (c = 0; c < KNITK_NR_BELL_COUNTERS; c++)
		atomic64_set(&bell->counters[c], 0);
	atomic_set(&bell->events_begun, 0);
	atomic_set(&bell->events_done, 0);
	spin_lock_init(&bell->ringer_lock);
	bell->ringer = NULL;
	/* The first spin may take the whole of spin_ns. */
	bell->spin_budget = U64_MAX;
}

/* The bell is unused by now: drop the ringer's reference. */
void knitk_bell_destroy(struct knitk_bell *bell)
{
	if (bell->ringer)
		put_task_struct(bell->ringer);
	bell->ringer = NULL;
}

/*
 * Remember current as the task that rings @bell (S8).  The common case, the
 * same ringer as last time, takes no lock: only current ever stores
 * current, so a stale read can only make it take the lock needlessly.
 */
static void knitk_bell_set_ringer(struct knitk_bell *bell)
{
	struct task_struct *old;

	if (READ_ONCE(bell->ringer) == current)
		return;
	get_task_struct(current);
	spin_lock(&bell->ringer_lock);
	old = bell->ringer;
	WRITE_ONCE(bell->ringer, current);
	spin_unlock(&bell->ringer_lock);
	if (old)
		put_task_struct(old);
}

/* The ringer of @bell with a reference of the caller's own, or NULL. */
static struct task_struct *knitk_bell_get_ringer(struct knitk_bell *bell)
{
	struct task_struct *p;

	spin_lock(&bell->ringer_lock);
	p = bell->ringer;
	if (p)
		get_task_struct(p);
	spin_unlock(&bell->ringer_lock);
	return p;
}

/**
 * knitk_spin_peer_running() - may a wait spin on @peer ringing it soon?
 * @peer: the doorbell's ringer (a reference held by the caller), or NULL
 *
 * Only while @peer, another task, is on a CPU whose vCPU is not preempted
 * (owner_on_cpu(), as mutex optimistic spinning checks a lock's owner) and
 * is not exiting: a dead or dying peer rings nothing.  Never on a
 * uniprocessor, where the peer cannot run while the caller spins.
 */
bool knitk_spin_peer_running(struct task_struct *peer)
{
#ifdef CONFIG_SMP
	if (!peer || peer == current || (READ_ONCE(peer->flags) & PF_EXITING))
		return false;
	return owner_on_cpu(peer);
#else
	return false;
#endif
}

/**
 * knitk_spin_adapt() - the next spin budget of a doorbell (S8)
 * @budget: the budget of the wait that just ended, in ns
 * @cap: spin_ns, the longest spin
 * @spun: the spin ended the wait
 * @woken: the wait ended with a wake (not a timeout, a signal or an error)
 * @waited_ns: how long the wait took, spin and sleep
 *
 * A spin pays only when the ring comes within it, so the budget follows
 * the waits, as KVM's halt polling does: a wait that slept and was woken
 * within @cap could have been caught, so the budget doubles (from @cap /
 * 16); one that lasted longer, or timed out, would have spun in vain, so
 * it halves, and below @cap / 64 it is 0: no spin until a short wait
 * comes again.  A wait the spin caught keeps it.  A task that runs long
 * between rings stops costing its peer a spin after a few waits.
 *
 * Return: the budget for the next wait, at most @cap.
 */
u64 knitk_spin_adapt(u64 budget, u64 cap, bool spun, bool woken, u64 waited_ns)
{
	budget = min(budget, cap);
	if (spun)
		return budget;
	if (woken && waited_ns <= cap)
		return !budget ? max(cap / 16, 1ULL) :
		       budget > cap / 2 ? cap : budget * 2;
	budget /= 2;
	return budget < cap / 64 ? 0 : budget;
}

/**
 * knitk_doorbell_kick() - advance doorbell @d's seq and wake its waiters
 * @knot: the knot
 * @d: a valid doorbell
 *
 * For an event, a kick or a death, that the woken wait does not count as
 * spurious (see knitk_wait_spurious()).
 */
void knitk_doorbell_kick(struct knitk_knot *knot, unsigned int d)
{
	struct knitk_doorbell *db = knitk_doorbell_shared(knot, d);
	struct knitk_bell *bell = &knot->bells[d];

	atomic_inc(&bell->events_begun);
	knitk_hook_kick(d);
	/*
	 * Order the caller's earlier stores (a death in the control page) and
	 * events_begun before the new seq; pairs with the smp_mb() in
	 * knitk_doorbell_wait() after the waiter sees seq move.
	 */
	smp_mb__before_atomic();
	atomic_inc((atomic_t *)&db->seq);
	/*
	 * The new seq before events_done; pairs with the smp_mb() between the
	 * waiter's load of events_done and its seq check.
	 */
	smp_mb__after_atomic();
	atomic_inc(&bell->events_done);
	wake_up_interruptible_all(&bell->wq);
}

/*
 * Advance seq and clear sleeping if the doorbell still holds @w.  The
 * cmpxchg is fully ordered: the new seq follows the caller's loads of the
 * mailbox words, and pairs with the waiter's load of seq.
 */
static bool knitk_doorbell_advance(u64 *word, union knitk_bell_word w)
{
	union knitk_bell_word next = w;

	next.seq++;
	next.sleeping = 0;
	return cmpxchg64(word, w.word, next.word) == w.word;
}

/* KNITK_NOTIFY_KICK: ring every doorbell of @doorbells, past the filter. */
static void knitk_doorbell_kick_all(struct knitk_knot *knot, u64 doorbells)
{
	unsigned int d;

	for (d = 0; d < KNITK_NR_DOORBELLS; d++) {
		struct knitk_bell *bell = &knot->bells[d];

		if (!(doorbells & BIT_ULL(d)))
			continue;
		knitk_doorbell_kick(knot, d);
		knitk_bell_count(bell, KNITK_BELL_KICKS);
		trace_knitk_kick(knot, d);
	}
}

/**
 * knitk_doorbell_notify() - KNITK_IOC_NOTIFY on a knot
 * @knot: the knot
 * @doorbells: bit d rings doorbell d
 * @flags: 0 or KNITK_NOTIFY_KICK (checked by the caller)
 * @sync: the caller sleeps next (KNITK_IOC_NOTIFY_WAIT): wake with WF_SYNC
 * @woken: out: the doorbells whose seq was advanced
 *
 * A delivered notify makes the caller the doorbell's ringer (S8).
 *
 * Return: 0, or -EINVAL (before anything is rung) for a bit that names no
 * doorbell of the knot.
 */
int knitk_doorbell_notify(struct knitk_knot *knot, u64 doorbells, u32 flags,
			  bool sync, u64 *woken)
{
	const struct knitk_geometry *g = &knot->geometry;
	unsigned int d;

	for (d = 0; d < KNITK_NR_DOORBELLS; d++)
		if ((doorbells & BIT_ULL(d)) && !knitk_doorbell_valid(g, d))
			return -EINVAL;

	if (flags & KNITK_NOTIFY_KICK) {
		knitk_doorbell_kick_all(knot, doorbells);
		*woken = doorbells;
		trace_knitk_ring(knot, doorbells, *woken, flags, sync);
		return 0;
	}
	*woken = 0;
	/*
	 * The caller published its pub words before this call; order those
	 * stores before the loads of sleeping and of the mailbox words.  Pairs
	 * with the waiter's seq_cst store of sleeping before its re-check.
	 */
	smp_mb();
	for (d = 0; d < KNITK_NR_DOORBELLS; d++) {
		struct knitk_bell *bell = &knot->bells[d];
		enum knitk_verdict verdict;
		union knitk_bell_word w;
		u64 *word;
		bool pending;

		if (!(doorbells & BIT_ULL(d)))
			continue;
		pending = knitk_doorbell_pending(knot->base, g, &knot->layout,
						 d);
		word = (u64 *)knitk_doorbell_shared(knot, d);
		w.word = READ_ONCE(*word);
		verdict = knitk_notify_verdict(pending, w.sleeping);
		switch (verdict) {
		case KNITK_NOTIFY_IDLE:
			knitk_bell_count(bell, KNITK_BELL_SUPPRESSED_IDLE);
			break;
		case KNITK_NOTIFY_AWAKE:
			knitk_bell_count(bell, KNITK_BELL_SUPPRESSED_AWAKE);
			break;
		case KNITK_NOTIFY_DELIVER:
			if (!knitk_doorbell_advance(word, w)) {
				/* The owner woke, or another notify won. */
				knitk_bell_count(bell, KNITK_BELL_SUPPRESSED_AWAKE);
				break;
			}
			knitk_bell_set_ringer(bell);
			if (sync)
				wake_up_interruptible_sync(&bell->wq);
			else
				wake_up_interruptible_all(&bell->wq);
			knitk_bell_count(bell, KNITK_BELL_WAKES);
			*woken |= BIT_ULL(d);
			break;
		}
		trace_knitk_notify(knot, d, verdict, w.seq, w.sleeping,
				   *woken & BIT_ULL(d));
	}
	trace_knitk_ring(knot, doorbells, *woken, flags, sync);
	return 0;
}

/* The waiter's role ended (knitk_role_end() wakes the queue for it). */
static bool knitk_wait_role_ended(const struct knitk_role *r)
{
	return r && READ_ONCE(r->ended);
}

static bool knitk_wait_done(struct knitk_knot *knot, struct knitk_doorbell *db,
			    const struct knitk_role *r, u32 expected,
			    bool worker)
{
	return READ_ONCE(db->seq) != expected || knitk_wait_role_ended(r) ||
	       (worker && knitk_peer_host_dead(knot->control));
}

/* Must a spin on @peer stop, and why?  In the order the spin tests them. */
static enum knitk_spin_end knitk_spin_stop(struct task_struct *peer,
					   u64 until)
{
	if (!knitk_spin_peer_running(peer))
		return KNITK_SPIN_RINGER_OFF;
	if (need_resched())
		return KNITK_SPIN_RESCHED;
	if (signal_pending(current))
		return KNITK_SPIN_SIGNAL;
	if (ktime_get_ns() >= until)
		return KNITK_SPIN_BUDGET;
	return KNITK_SPIN_GO;
}

/*
 * Spin while the wait is not done and the bell's ringer runs (S8), for at
 * most the bell's budget (knitk_spin_adapt(), at most spin_ns) and never
 * past the wait's deadline.  Return: true when the wait is done.
 */
static bool knitk_doorbell_spin(struct knitk_knot *knot, unsigned int d,
				const struct knitk_role *r, u32 expected,
				u64 deadline_ns)
{
	struct knitk_doorbell *db = knitk_doorbell_shared(knot, d);
	bool worker = d != KNITK_DOORBELL_HOST;
	u64 budget = min_t(u64, READ_ONCE(spin_ns),
			   READ_ONCE(knot->bells[d].spin_budget));
	enum knitk_spin_end end;
	struct task_struct *peer;
	u64 now, until;

	now = ktime_get_ns();
	if (!budget || deadline_ns <= now) {
		end = KNITK_SPIN_OFF;
		goto out;
	}
	until = deadline_ns - now > budget ? now + budget : deadline_ns;
	peer = knitk_bell_get_ringer(&knot->bells[d]);
	if (!peer) {
		end = KNITK_SPIN_NO_RINGER;
		goto out;
	}
	for (;;) {
		/*
		 * The same test as the sleep's, first: a ring that landed
		 * ends the spin whatever the ringer does next.  The seq load
		 * pairs with the fully ordered cmpxchg of
		 * knitk_doorbell_advance().
		 */
		if (knitk_wait_done(knot, db, r, expected, worker)) {
			end = KNITK_SPIN_WOKEN;
			break;
		}
		end = knitk_spin_stop(peer, until);
		if (end != KNITK_SPIN_GO)
			break;
		knitk_hook_spin(d);
		cpu_relax();
	}
	put_task_struct(peer);
out:
	trace_knitk_spin(knot, d, now, end);
	return end == KNITK_SPIN_WOKEN;
}

/**
 * knitk_deadline_timer() - arm @timer to wake the caller at @deadline_ns
 * @timer: an hrtimer sleeper on the caller's stack
 * @deadline_ns: absolute CLOCK_MONOTONIC on the host's clock, or
 *	KNITK_WAIT_FOREVER
 *
 * A sleep loop ends with -ETIMEDOUT once @timer.task is NULL, and calls
 * knitk_deadline_timer_end() after it.
 *
 * Return: true when @timer was armed (not for KNITK_WAIT_FOREVER).
 */
bool knitk_deadline_timer(struct hrtimer_sleeper *timer, u64 deadline_ns)
{
	ktime_t at;

	if (deadline_ns == KNITK_WAIT_FOREVER)
		return false;
	at = deadline_ns > KTIME_MAX ? KTIME_MAX : ns_to_ktime(deadline_ns);
	hrtimer_init_sleeper_on_stack(timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS);
	hrtimer_set_expires_range_ns(&timer->timer, at, current->timer_slack_ns);
	hrtimer_sleeper_start_expires(timer, HRTIMER_MODE_ABS);
	return true;
}

/**
 * knitk_sleep_ended() - whether a sleep armed by knitk_deadline_timer() ends
 * @timer: the sleeper
 * @timed: what knitk_deadline_timer() returned
 *
 * Return: -ETIMEDOUT once the deadline passed, -ERESTARTSYS with a signal
 * pending, else 0 (sleep on).
 */
int knitk_sleep_ended(const struct hrtimer_sleeper *timer, bool timed)
{
	if (timed && !READ_ONCE(timer->task))
		return -ETIMEDOUT;
	if (signal_pending(current))
		return -ERESTARTSYS;
	return 0;
}

/**
 * knitk_deadline_timer_end() - disarm a timer knitk_deadline_timer() armed
 * @timer: the sleeper
 */
void knitk_deadline_timer_end(struct hrtimer_sleeper *timer)
{
	hrtimer_cancel(&timer->timer);
	destroy_hrtimer_on_stack(&timer->timer);
}

/* Sleep until the wait is done, the deadline passes or a signal arrives. */
static int knitk_doorbell_sleep(struct knitk_knot *knot, unsigned int d,
				const struct knitk_role *r, u32 expected,
				u64 deadline_ns)
{
	struct knitk_doorbell *db = knitk_doorbell_shared(knot, d);
	struct knitk_bell *bell = &knot->bells[d];
	bool worker = d != KNITK_DOORBELL_HOST;
	struct hrtimer_sleeper timer;
	bool timed = knitk_deadline_timer(&timer, deadline_ns);
	DEFINE_WAIT(wait);
	int ret;

	for (;;) {
		/* Sets the task state before the re-check: no lost wake. */
		prepare_to_wait(&bell->wq, &wait, TASK_INTERRUPTIBLE);
		if (knitk_wait_done(knot, db, r, expected, worker)) {
			ret = 0;
			break;
		}
		ret = knitk_sleep_ended(&timer, timed);
		if (ret)
			break;
		schedule();
	}
	finish_wait(&bell->wq, &wait);
	if (timed)
		knitk_deadline_timer_end(&timer);
	return ret;
}

/**
 * knitk_deadline_on_host() - a time namespace's deadline on the host's clock
 * @deadline_ns: an absolute CLOCK_MONOTONIC deadline of the namespace, or
 *	KNITK_WAIT_FOREVER
 * @offset_ns: the namespace's monotonic offset (its clock minus the host's)
 *
 * As timens_ktime_to_host() does for clock_nanosleep(), which a module
 * cannot call: a deadline before the offset has passed (0), one that the
 * conversion would take past KTIME_MAX is KTIME_MAX, and one already past
 * KTIME_MAX (KNITK_WAIT_FOREVER included) is left as it is, far.
 *
 * Return: the deadline on the host's CLOCK_MONOTONIC.
 */
u64 knitk_deadline_on_host(u64 deadline_ns, s64 offset_ns)
{
	s64 t = deadline_ns;

	if (deadline_ns > KTIME_MAX)
		return deadline_ns;
	if (t < offset_ns)
		return 0;
	if (offset_ns < 0 && t > KTIME_MAX + offset_ns)
		return KTIME_MAX;
	return t - offset_ns;
}

/* The monotonic offset of the caller's time namespace (0 for the host's). */
static s64 knitk_caller_monotonic_offset(void)
{
#ifdef CONFIG_TIME_NS
	return timespec64_to_ns(&current->nsproxy->time_ns->offsets.monotonic);
#else
	return 0;
#endif
}

/**
 * knitk_caller_deadline() - the calling task's deadline on the host's clock
 * @deadline_ns: an absolute CLOCK_MONOTONIC deadline of the caller's time
 *	namespace, or KNITK_WAIT_FOREVER
 *
 * Return: knitk_deadline_on_host() of it, with the caller's offset.
 */
u64 knitk_caller_deadline(u64 deadline_ns)
{
	return knitk_deadline_on_host(deadline_ns,
				      knitk_caller_monotonic_offset());
}

/*
 * The wait of knitk_doorbell_wait(), which traces it; @seen: out, what a
 * woken wait found (knitk_wait_outcome()).
 */
static int knitk_doorbell_wait_seen(struct knitk_knot *knot, unsigned int d,
				    const struct knitk_role *r, u32 expected,
				    u32 flags, u64 deadline_ns, bool uring,
				    struct knitk_wait_seen *seen)
{
	struct knitk_doorbell *db = knitk_doorbell_shared(knot, d);
	struct knitk_bell *bell = &knot->bells[d];
	bool spun = false;
	u32 events_done, events_begun;
	u64 t0 = 0;
	int ret;

	if (d != KNITK_DOORBELL_HOST && knitk_peer_host_dead(knot->control))
		return -EPIPE;
	deadline_ns = knitk_caller_deadline(deadline_ns);
	/* Before the seq check: an event not done here has not moved seq. */
	events_done = atomic_read(&bell->events_done);
	/*
	 * Pairs with the barriers in knitk_doorbell_kick() (around its seq
	 * advance) and the notifier's.
	 */
	smp_mb();
	if (READ_ONCE(db->seq) != expected) {
		knitk_bell_count(bell, KNITK_BELL_MISMATCHES);
		return -EAGAIN;
	}
	if (flags & KNITK_WAIT_SPIN) {
		t0 = ktime_get_ns();
		spun = knitk_doorbell_spin(knot, d, r, expected, deadline_ns);
		knitk_bell_count(bell, spun ? KNITK_BELL_SPIN_WAKES :
					      KNITK_BELL_SPIN_SLEEPS);
	}
	if (spun) {
		ret = 0;
	} else {
		knitk_bell_count(bell, KNITK_BELL_WAITS);
		if (uring)
			knitk_bell_count(bell, KNITK_BELL_URING_WAITS);
		ret = knitk_doorbell_sleep(knot, d, r, expected, deadline_ns);
	}
	/* The doorbell's owner alone waits on it: plain accesses suffice. */
	if (flags & KNITK_WAIT_SPIN)
		WRITE_ONCE(bell->spin_budget,
			   knitk_spin_adapt(READ_ONCE(bell->spin_budget),
					    READ_ONCE(spin_ns), spun, ret == 0,
					    ktime_get_ns() - t0));
	/* Pairs with the write of ended under knot->lock before the wake. */
	if (ret == 0 && knitk_wait_role_ended(r))
		return -ENOTCONN;
	switch (ret) {
	case -ETIMEDOUT:
		knitk_bell_count(bell, KNITK_BELL_TIMEOUTS);
		break;
	case -ERESTARTSYS:
		knitk_bell_count(bell, KNITK_BELL_INTERRUPTS);
		break;
	default:
		/* Seq moved: pairs with smp_mb__before_atomic() in the kick. */
		smp_mb();
		/* A worker must tell its host's death from a delivered wake. */
		if (d != KNITK_DOORBELL_HOST &&
		    knitk_peer_host_dead(knot->control)) {
			ret = -EPIPE;
			break;
		}
		/* A death or a kick is an event, not a spurious wake. */
		seen->pending = knitk_doorbell_pending(knot->base,
						       &knot->geometry,
						       &knot->layout, d);
		events_begun = atomic_read(&bell->events_begun);
		seen->event = events_begun != events_done;
		if (knitk_wait_spurious(seen->pending, events_begun,
					events_done))
			knitk_bell_count(bell, KNITK_BELL_SPURIOUS);
		break;
	}
	return ret;
}

/**
 * knitk_doorbell_wait() - KNITK_IOC_WAIT on doorbell @d
 * @knot: the knot
 * @d: the caller's own doorbell
 * @r: the caller's role, holding @d (NULL: no role to watch)
 * @expected: the seq the caller saw before it set its sleeping flag
 * @flags: 0 or KNITK_WAIT_SPIN (checked by the caller; a uring wait
 *	passes 0)
 * @deadline_ns: absolute CLOCK_MONOTONIC deadline of the caller's time
 *	namespace, or KNITK_WAIT_FOREVER
 * @uring: a KNITK_URING_CMD_WAIT (counted in uring_waits too)
 *
 * With KNITK_WAIT_SPIN the wait spins first while the doorbell's ringer
 * runs (S8); a spin that ends the wait is counted in spin_wakes instead of
 * waits, and its wake is classified (spurious or not) like a sleep's.
 *
 * The doorbell belongs to the slot, which a later joiner may hold once @r
 * has ended: a wait whose role ends, before or while it sleeps, returns
 * -ENOTCONN, and never takes the next owner's wake for its own.
 *
 * Called in the waiting task (an io-wq worker shares its submitter's
 * namespaces), whose time namespace the deadline is read in.
 *
 * Return: 0 when woken, -EAGAIN if seq already moved, -ETIMEDOUT,
 * -ERESTARTSYS on a signal, -EPIPE for a worker whose host died (before
 * or during the wait), -ENOTCONN when @r ended.
 */
int knitk_doorbell_wait(struct knitk_knot *knot, unsigned int d,
			const struct knitk_role *r, u32 expected,
			u32 flags, u64 deadline_ns, bool uring)
{
	struct knitk_wait_seen seen = { };
	int ret;

	/* Only for the traced wait's length and death: a static key. */
	if (trace_knitk_wait_end_enabled()) {
		seen.start_ns = ktime_get_ns();
		seen.death_seq = knitk_peer_death_seq(knot->control);
	}
	trace_knitk_wait_begin(knot, d, expected, flags, deadline_ns, uring);
	ret = knitk_doorbell_wait_seen(knot, d, r, expected, flags,
				       deadline_ns, uring, &seen);
	trace_knitk_wait_end(knot, d, ret, &seen);
	return ret;
}

/**
 * knitk_doorbell_notify_wait() - KNITK_IOC_NOTIFY_WAIT: ring, then wait
 * @knot: the knot
 * @d: the caller's own doorbell
 * @r: the caller's role, holding @d (NULL: no role to watch)
 * @doorbells: the doorbells to ring through the idle filter
 * @expected: as for knitk_doorbell_wait()
 * @flags: as for knitk_doorbell_wait()
 * @deadline_ns: as for knitk_doorbell_wait()
 * @woken: out: the doorbells woken by the ring
 *
 * The ring wakes synchronously: the caller sleeps next, so the woken peer
 * may take its CPU (S9).  A signal gives -EINTR, never a restart, which
 * would ring again.
 *
 * Return: -EINVAL for a bad @doorbells (nothing rung), else as
 * knitk_doorbell_wait() with -EINTR for -ERESTARTSYS.
 */
int knitk_doorbell_notify_wait(struct knitk_knot *knot, unsigned int d,
			       const struct knitk_role *r, u64 doorbells,
			       u32 expected, u32 flags, u64 deadline_ns,
			       u64 *woken)
{
	int ret = knitk_doorbell_notify(knot, doorbells, 0, true, woken);

	if (ret)
		return ret;
	ret = knitk_doorbell_wait(knot, d, r, expected, flags, deadline_ns,
				  false);
	return ret == -ERESTARTSYS ? -EINTR : ret;
}

#define KNITK_BELL_FIELD(c, f)	\
	[c] = { #f, offsetof(struct knitk_doorbell_stats, f) }

const struct knitk_bell_field knitk_bell_fields[KNITK_NR_BELL_COUNTERS] = {
	KNITK_BELL_FIELD(KNITK_BELL_WAITS, waits),
	KNITK_BELL_FIELD(KNITK_BELL_WAKES, wakes),
	KNITK_BELL_FIELD(KNITK_BELL_SUPPRESSED_IDLE, suppressed_idle),
	KNITK_BELL_FIELD(KNITK_BELL_SUPPRESSED_AWAKE, suppressed_awake),
	KNITK_BELL_FIELD(KNITK_BELL_SPURIOUS, spurious),
	KNITK_BELL_FIELD(KNITK_BELL_TIMEOUTS, timeouts),
	KNITK_BELL_FIELD(KNITK_BELL_MISMATCHES, mismatches),
	KNITK_BELL_FIELD(KNITK_BELL_INTERRUPTS, interrupts),
	KNITK_BELL_FIELD(KNITK_BELL_KICKS, kicks),
	KNITK_BELL_FIELD(KNITK_BELL_URING_WAITS, uring_waits),
	KNITK_BELL_FIELD(KNITK_BELL_SPIN_WAKES, spin_wakes),
	KNITK_BELL_FIELD(KNITK_BELL_SPIN_SLEEPS, spin_sleeps),
};

/* Every field of the uapi struct is a counter of the table. */
static_assert(sizeof(struct knitk_doorbell_stats) ==
	      KNITK_NR_BELL_COUNTERS * sizeof(u64));

/**
 * knitk_doorbell_stats() - read doorbell @d's counters
 * @knot: the knot
 * @d: a valid doorbell
 * @st: out: the counters
 */
void knitk_doorbell_stats(struct knitk_knot *knot, unsigned int d,
			  struct knitk_doorbell_stats *st)
{
	struct knitk_bell *bell = &knot->bells[d];
	unsigned int c;

	for (c = 0; c < KNITK_NR_BELL_COUNTERS; c++)
		*(u64 *)((char *)st + knitk_bell_fields[c].offset) =
			atomic64_read(&bell->counters[c]);
}
