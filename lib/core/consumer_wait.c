// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * A consumer's adaptive wait (docs/protocol.md S10): poll the mailbox
 * while polling pays, then park on the endpoint's doorbell.
 *
 * A poll pays while the lanes it waits for can come soon, and only while
 * it keeps no CPU from the thread that must write them.  So it stops at
 * once when the role that produces into the mailbox is parked (its
 * doorbell's sleeping flag is up: nothing comes before it is woken) or
 * when more of the knot's roles are awake than CPUs this thread may run
 * on (knitk_endpoint_awake, the rule of the pool's polls too), and it
 * lasts at most a budget that adapts, as the module's kernel spin does
 * (S8): kept after a poll that found lanes, halved after one that ran out
 * (0 below POLL_MIN_NS), 0 after one that lost its CPU to another thread
 * (its clock jumped between two looks: a crowding the knot's flags cannot
 * show, such as other processes), doubled (from POLL_START_NS, at most
 * POLL_MAX_NS) after a park that a publish ended within POLL_MAX_NS.  A
 * writer that runs long between publishes, or shares a CPU with this
 * thread, stops costing it a poll after a few waits; one that publishes
 * soon after a park brings the poll back.
 *
 * While it polls, the consumer's sleeping flag is down, so the producer's
 * ring is suppressed without a system call (S4, knitk_doorbell_ring); the
 * park is the doorbell's own prepare, re-check and wait (S1), so a
 * publish is found by the poll, by the re-check or wakes the park.
 *
 * On the module the same poll runs in userspace rather than the kernel's
 * spin (S8): a kernel spin waits with the sleeping flag up, so every
 * batch the writer publishes meanwhile costs it a ring, a system call,
 * which the userspace poll spares it; and the writer's doorbell flag
 * tells a parked writer as well on both backends.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>

#include "internal.h"
#include "knot_hooks.h"

#define POLL_MAX_NS	(32 * 1000ULL)		/* the budget's cap */
#define POLL_START_NS	(POLL_MAX_NS / 16)	/* the first, and a regrowth's start */
#define POLL_MIN_NS	(POLL_MAX_NS / 64)	/* below it the budget is 0 */
/* Parks between reads of the thread's CPUs (2^k). */
#define POLL_CPUS_EVERY	64
/* Rounds between looks at the clock and the writer's flag (2^k). */
#define POLL_LOOK	16
/*
 * Rounds between yields, against threads the flags cannot show (2^k): 16
 * cost less CPU per message than 64 in knitk-bench's tput-8B on 2 CPUs
 * shared with other work, at the same rate.
 */
#define POLL_YIELD	16

#ifdef KNITK_TEST_HOOKS
_Atomic uint64_t knitk__consumer_poll_rounds;
#define POLL_COUNT_ROUND() \
	atomic_fetch_add_explicit(&knitk__consumer_poll_rounds, 1, \
				  memory_order_relaxed)
#else
#define POLL_COUNT_ROUND() do { } while (0)
#endif

static inline void poll_relax(unsigned int round)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
	if ((round & (POLL_YIELD - 1)) == POLL_YIELD - 1)
		sched_yield();
}

/* Whether a poll may start now: its writer is awake and CPUs are free. */
static bool poll_pays(const struct knitk_endpoint *ep,
		      const struct knitk_consumer_poll *cp, unsigned int writer)
{
	if (knot_doorbell_asleep(ep, writer))
		return false;
	return (unsigned int)knitk_endpoint_awake(ep, NULL, NULL) <= cp->cpus;
}

/*
 * Poll for up to the budget; the lane count when lanes came, 0 when the
 * poll stopped or ran out, -ETIMEDOUT at @deadline_ns.
 */
static int consumer_poll(struct knitk_consumer *c,
			 struct knitk_consumer_poll *cp, unsigned int writer,
			 uint64_t *pending, uint64_t deadline_ns)
{
	struct knitk_endpoint *ep = knitk__consumer_endpoint(c);
	uint64_t last = knitk__now_ns(), end = last + cp->budget_ns, t;
	unsigned int round;
	int n;

	for (round = 0;; round++) {
		POLL_COUNT_ROUND();
		poll_relax(round);
		/* L4: a fresh acquire of pub (partner: lane_publish_mask). */
		n = knitk_lane_scan(c, pending);
		if (n)
			return n;	/* lanes, or an error: the budget stays */
		if ((round & (POLL_LOOK - 1)) != POLL_LOOK - 1)
			continue;
		if (!poll_pays(ep, cp, writer))
			return 0;	/* not the budget's fault: it stays */
		t = knitk__now_ns();
		if (t >= deadline_ns)
			return -ETIMEDOUT;
		if (t - last > POLL_MAX_NS) {
			/*
			 * POLL_LOOK rounds took longer than a whole poll may:
			 * the thread lost its CPU to another that wanted it
			 * (a yield that switched, or a preemption), which no
			 * flag of the knot shows.  Polling there only delays
			 * the others: none until a park shows it pays again.
			 */
			cp->budget_ns = 0;
			return 0;
		}
		last = t;
		if (t >= end)
			break;
	}
	cp->budget_ns /= 2;
	if (cp->budget_ns < POLL_MIN_NS)
		cp->budget_ns = 0;
	return 0;
}

/*
 * Park on the doorbell (S1: prepare, re-check, wait).  The lane count
 * when lanes came, 0 when the park ended for the role's other business,
 * or a negative errno.
 */
static int consumer_park(struct knitk_consumer *c,
			 struct knitk_consumer_poll *cp, unsigned int writer,
			 uint64_t *pending, uint64_t deadline_ns)
{
	struct knitk_endpoint *ep = knitk__consumer_endpoint(c);
	uint64_t t0;
	uint32_t seq;
	int ret, n;

	ret = knitk_doorbell_prepare(ep, &seq);
	if (ret)
		return ret;
	/*
	 * Our own role ended (the end kicks our doorbell, so one after the
	 * prepare ends the wait, and is seen below).
	 */
	if (knot_role_ended(ep)) {
		knitk_doorbell_cancel(ep);
		return -ENOTCONN;
	}
	/*
	 * The prepare read death_seq before its flag: a death of the writer
	 * after that read ends the wait as a peer event (P3, P4); one before
	 * it shows in the dead bit here (acquire, partner as in
	 * knot_host_dead).
	 */
	if (knot_role_dead(ep, writer)) {
		knitk_doorbell_cancel(ep);
		n = knitk_lane_scan(c, pending);
		return n ? n : -EPIPE;
	}
	t0 = knitk__now_ns();
	ret = knitk_doorbell_wait(ep, seq, deadline_ns);
	if (knot_role_ended(ep))
		return -ENOTCONN;
	if (ret && ret != -EPIPE)
		return ret;
	/* The re-check's and the wake's lanes, freshly loaded (L4). */
	n = knitk_lane_scan(c, pending);
	if (n > 0 && knitk__now_ns() - t0 < POLL_MAX_NS) {
		/* A publish came soon after the park: a poll would have caught it. */
		cp->budget_ns = cp->budget_ns ? cp->budget_ns * 2 : POLL_START_NS;
		if (cp->budget_ns > POLL_MAX_NS)
			cp->budget_ns = POLL_MAX_NS;
	}
	if (n)
		return n;
	if (ret || knot_role_dead(ep, writer))
		return -EPIPE;
	return 0;
}

KNITK_EXPORT int knitk_consumer_wait(struct knitk_consumer *consumer,
				     uint64_t *pending, uint64_t deadline_ns)
{
	struct knitk_consumer_poll *cp;
	struct knitk_endpoint *ep;
	unsigned int writer;
	int n;

	if (!consumer || !pending)
		return -EINVAL;
	ep = knitk__consumer_endpoint(consumer);
	if (ep->doorbell < 0 || knot_role_ended(ep))
		return -ENOTCONN;
	n = knitk_lane_scan(consumer, pending);
	if (n)
		return n;
	cp = knitk__consumer_poll(consumer);
	if (!cp->cpus) {
		/* The first wait: start with a short poll. */
		cp->budget_ns = POLL_START_NS;
		knitk_endpoint_awake(ep, NULL, &cp->cpus);
	}
	writer = knitk__endpoint_mailbox_producer(ep,
						  knitk__consumer_mailbox(consumer));
	if (cp->budget_ns && poll_pays(ep, cp, writer)) {
		n = consumer_poll(consumer, cp, writer, pending, deadline_ns);
		if (n)
			return n;
	}
	/*
	 * The thread's CPUs may change: read them again now and then, where
	 * a park costs a system call anyway.
	 */
	if ((++cp->parks & (POLL_CPUS_EVERY - 1)) == 0)
		knitk_endpoint_awake(ep, NULL, &cp->cpus);
	return consumer_park(consumer, cp, writer, pending, deadline_ns);
}
