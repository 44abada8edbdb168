// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Doorbells: sleep and wake without lost wakeups (docs/protocol.md S1-S6, H1).
 *
 * Waiter (the owner of doorbell d):
 *   seq := load(d.seq); d.sleeping := nonce (seq_cst);
 *   re-check every mailbox it consumes; if nothing: wait while d.seq == seq.
 * Waker (any producer into one of those mailboxes):
 *   publish (release); fence (seq_cst); if d.sleeping: wake.
 * Either the waiter's re-check sees the publish, or the waker sees the flag:
 * the two seq_cst fences order the store->load pairs on both sides.
 *
 * The sleeping flag carries a per-cycle nonce.  The futex backend advances
 * seq with a 64-bit compare-and-swap of (seq, sleeping): a wake meant for
 * one sleep cycle can never land in the next one, so a woken waiter always
 * finds the work it was woken for (no spurious wakes with one consumer).
 * A kick or a peer death advances seq with no work: the counters tell its
 * wake from a spurious one by the event's begun and done counts (see
 * knitk_doorbell_prepare).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "knot_hooks.h"
#include "../sized.h"
#include "../trace.h"

KNITK__SIZED_VER0(knitk_wake_stats, KNITK_WAKE_STATS_SIZE_VER1);

#ifdef KNITK_TEST_HOOKS
_Atomic(knot_hook_fn) knitk__endpoint_hook;

struct knitk_trace *knitk__trace;
uint32_t knitk__trace_pid;

static int trace_map(int fd)
{
	void *p = mmap(NULL, sizeof(struct knitk_trace), PROT_READ | PROT_WRITE,
		       MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	knitk__trace_pid = (uint32_t)getpid();
	knitk__trace = p;
	return 0;
}

int knitk__trace_open(void)
{
	char v[16];
	int fd, ret;

	if (knitk__trace)
		return 0;
	/* Not close-on-exec: process workers inherit it (trace.h). */
	fd = memfd_create("knitk-trace", 0);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, sizeof(struct knitk_trace)) < 0 || (ret = trace_map(fd))) {
		ret = -errno;
		close(fd);
		return ret;
	}
	snprintf(v, sizeof(v), "%d", fd);
	return setenv(KNITK_TRACE_ENV, v, 1) ? -errno : 0;
}

/* A process worker of a traced test: the ring its host made. */
__attribute__((constructor)) static void trace_attach(void)
{
	const char *v = getenv(KNITK_TRACE_ENV);

	if (v)
		trace_map(atoi(v));
}

static const char *const trace_names[KT_NR] = {
	"-", "pick", "unpick", "ring", "notify", "idle", "park", "awake",
	"claimed", "hand-off", "p-hand-off", "p-drop", "send", "nap",
};

void knitk__trace_dump(FILE *f, unsigned int n)
{
	struct knitk_trace *t = knitk__trace;
	uint64_t end, i;

	if (!t)
		return;
	end = atomic_load(&t->next);
	if (n > KNITK_TRACE_ENTRIES)
		n = KNITK_TRACE_ENTRIES;
	for (i = end > n ? end - n : 0; i < end; i++) {
		struct knitk_trace_entry *e = &t->e[i % KNITK_TRACE_ENTRIES];
		uint64_t w = atomic_load(&e->what);
		unsigned int ev = (unsigned int)(w & 0xff);

		if (atomic_load(&e->seq) != i + 1)
			continue;
		fprintf(f, "#   %8llu pid %-7u %-10s w%-3d a %#llx b %#llx\n",
			(unsigned long long)i, (unsigned int)(w >> 32),
			ev < KT_NR ? trace_names[ev] : "?", (int)(int8_t)(w >> 8),
			(unsigned long long)atomic_load(&e->a),
			(unsigned long long)atomic_load(&e->b));
	}
}
#endif

/* Set (nonce) or clear (0) the own sleeping flag, keeping seq. */
static uint64_t doorbell_set_sleeping(struct knitk_doorbell *db, uint32_t v)
{
	_Atomic uint64_t *w = doorbell_word(db);
	uint64_t old = atomic_load_explicit(w, memory_order_relaxed);

	if (!v && !dbw_sleeping(old))	/* a wake's CAS cleared it (S3) */
		return old;
	/*
	 * seq_cst: the flag store is ordered before the re-check loads
	 * (pairs with the fence and flag load in knitk_doorbell_ring).
	 */
	while (!atomic_compare_exchange_weak_explicit(w, &old,
			dbw_make(dbw_seq(old), v),
			memory_order_seq_cst, memory_order_relaxed))
		;
	return old;
}

KNITK_EXPORT int knitk_doorbell_can_kick(const struct knitk_endpoint *ep)
{
	if (!ep)
		return -EINVAL;
	return ep->can_kick && ep->ops->kick;
}

KNITK_EXPORT int knitk_doorbell_kick_self(struct knitk_endpoint *ep)
{
	int ret;

	if (!ep)
		return -EINVAL;
	if (ep->doorbell < 0)
		return -ENOTCONN;
	if (knitk_doorbell_can_kick(ep) != 1)
		return -EOPNOTSUPP;
	/*
	 * Begun before the kick advances seq: seq_cst, and the seq advance
	 * is a release (doorbell_kick's CAS, or the module's barrier before
	 * it); pairs with the acquire of seq that ends the wait (futex_wait,
	 * or the module's barrier after it) and the load in knot_kicked.
	 */
	atomic_fetch_add_explicit(&ep->kicks_begun, 1, memory_order_seq_cst);
	KNOT_HOOK(ep, KNOT_HOOK_KICK, 0);
	ret = ep->ops->kick(ep);
	/*
	 * Done after the seq advance, even if the kick failed (begun and
	 * done must balance): pairs with the acquire in
	 * knitk_doorbell_prepare, before its seq read.
	 */
	atomic_fetch_add_explicit(&ep->kicks_done, 1, memory_order_release);
	return ret;
}

/*
 * A kick of this endpoint may have ended the wait: one began after the
 * prepare, or was in flight at it (see knitk_doorbell_prepare).
 */
static bool knot_kicked(const struct knitk_endpoint *k)
{
	/* Pairs with the seq_cst increment in knitk_doorbell_kick_self. */
	return atomic_load_explicit(&k->kicks_begun, memory_order_seq_cst) !=
	       k->kicks_done_seen;
}

/* A death since prepare: the re-check's test, before the sleep. */
static bool knot_peer_event(const struct knitk_endpoint *k)
{
	/*
	 * Pairs with the release of death_seq in knitk_peer_leave()
	 * (kmod/knitk_peer.c) or the increment in futex_mark_dead().
	 */
	return atomic_load_explicit(A32(&knot_control(k)->death_seq),
				    memory_order_acquire) != k->death_seq;
}

/*
 * A death may have ended the wait: one began after the prepare, or was in
 * flight at it (its kicks not done; see knitk_doorbell_prepare).
 */
static bool knot_peer_woke(const struct knitk_endpoint *k)
{
	/*
	 * Read once seq moved: a death's increment of death_seq precedes
	 * its kicks.  Pairs as in knot_peer_event.
	 */
	return atomic_load_explicit(A32(&knot_control(k)->death_seq),
				    memory_order_acquire) != k->death_done;
}

/* knitk_doorbell_prepare of a joined endpoint: the seq read. */
static uint32_t doorbell_prepare(struct knitk_endpoint *ep)
{
	struct knitk_doorbell *db = knot_doorbell(ep, (unsigned int)ep->doorbell);

	if (++ep->nonce == 0)
		ep->nonce = 1;
	ep->death_seq = atomic_load_explicit(A32(&knot_control(ep)->death_seq),
					     memory_order_acquire);
	/*
	 * A kick or a death counts as begun before it advances seq and as
	 * done after.  Snapshot the done counts before seq is read: an
	 * event whose advance lands after that read was not done then, and
	 * has begun by the time the wait sees seq move, so doorbell_sleep
	 * can tell its wake from a spurious one.  Acquire pairs with the
	 * release of kicks_done in knitk_doorbell_kick_self and of death_done in
	 * knitk_role_end() (kmod/knitk_peer.c) or futex_mark_dead(): an
	 * event counted done here has advanced the seq read below.
	 */
	ep->kicks_done_seen = atomic_load_explicit(&ep->kicks_done,
						   memory_order_acquire);
	ep->death_done = atomic_load_explicit(A32(&knot_control(ep)->death_done),
					      memory_order_acquire);
	return dbw_seq(doorbell_set_sleeping(db, ep->nonce));
}

KNITK_EXPORT int knitk_doorbell_prepare(struct knitk_endpoint *ep, uint32_t *seq)
{
	if (!ep || !seq)
		return -EINVAL;
	if (ep->doorbell < 0)
		return -ENOTCONN;
	*seq = doorbell_prepare(ep);
	return 0;
}

KNITK_EXPORT int knitk_doorbell_cancel(struct knitk_endpoint *ep)
{
	if (!ep)
		return -EINVAL;
	if (ep->doorbell < 0)
		return -ENOTCONN;
	doorbell_set_sleeping(knot_doorbell(ep, (unsigned int)ep->doorbell), 0);
	return 0;
}

static uint64_t knot_doorbell_mask(const struct knitk_endpoint *k)
{
	uint64_t workers = (1ULL << k->geom.nr_workers) - 1;

	return workers | 1ULL << KNITK_DOORBELL_HOST;
}

/*
 * The doorbells of @doorbells whose owners are flagged asleep (S2); the
 * rest are suppressed and counted.
 */
static uint64_t doorbell_flagged(struct knitk_endpoint *ep, uint64_t doorbells)
{
	uint64_t flagged = 0, m;

	/*
	 * Pairs with the seq_cst flag store and fence in knitk_doorbell_wait:
	 * our publish is ordered before the flag loads below.
	 */
	atomic_thread_fence(memory_order_seq_cst);
	for (m = doorbells; m; m &= m - 1) {
		unsigned int d = (unsigned int)__builtin_ctzll(m);
		/* Pairs with the seq_cst flag CAS in doorbell_set_sleeping. */
		uint64_t w = atomic_load_explicit(doorbell_word(knot_doorbell(ep, d)),
						  memory_order_seq_cst);

		if (dbw_sleeping(w)) {
			flagged |= 1ULL << d;
		} else {
			knot_count(ep, KC_SUPPRESSED_AWAKE, 1);
			KNITK_TRACE(KT_NOTIFY, d, KT_AWAKE_FLAG, w);
		}
	}
	return flagged;
}

static void doorbell_count_sent(struct knitk_endpoint *ep, uint64_t woken)
{
	knot_count(ep, KC_SENT, (uint64_t)knot_bits(woken));
}

/*
 * Sleep on the backend and count how the sleep ended.  With @ring, ring
 * those doorbells first in the same call (S9): the module's
 * KNITK_IOC_NOTIFY_WAIT, else a notify then the wait.  On the module a
 * ring-then-wait is NOTIFY_WAIT even when none of @ring is flagged asleep,
 * so that its wait spins (S8) as knitk.h says: an awake peer is the one
 * most likely to answer while it spins.
 */
static int doorbell_sleep(struct knitk_endpoint *ep, unsigned int d,
			  uint32_t seq, uint64_t deadline_ns, uint64_t ring,
			  const struct knitk_wait_word *words, unsigned int nr)
{
	uint64_t flagged = 0, woken = 0;
	int ret;

	if (ring)
		flagged = doorbell_flagged(ep, ring);

	if (nr) {
		/* The futex backend: no ring-then-wait to fold the ring into. */
		ret = flagged ? ep->ops->notify(ep, flagged, &woken) : 0;
		if (ret < 0)
			return ret;
		doorbell_count_sent(ep, woken);
		ret = ep->ops->wait_words(ep, seq, deadline_ns, words, nr);
		if (ret == 1) {
			/* A word of the caller's: its news, not a spurious wake. */
			knot_count(ep, KC_WAITS, 1);
			knot_count(ep, KC_WAKES, 1);
			return 0;
		}
	} else if (ring && ep->can_ring_wait && ep->ops->ring_wait) {
		ret = ep->ops->ring_wait(ep, flagged, seq, deadline_ns,
					 &woken);
		doorbell_count_sent(ep, woken);
	} else if (!flagged) {
		ret = ep->ops->wait(ep, seq, deadline_ns);
	} else {
		ret = ep->ops->notify(ep, flagged, &woken);
		if (ret < 0)
			return ret;
		doorbell_count_sent(ep, woken);
		ret = ep->ops->wait(ep, seq, deadline_ns);
	}

	switch (ret) {
	case 0:
		knot_count(ep, KC_WAITS, 1);
		if (knitk__endpoint_doorbell_pending(ep, d) || knot_peer_woke(ep))
			knot_count(ep, KC_WAKES, 1);
		else if (knot_kicked(ep))
			knot_count(ep, KC_KICKS, 1);
		else
			knot_count(ep, KC_SPURIOUS, 1);
		break;
	case -EAGAIN:
		knot_count(ep, KC_MISMATCHES, 1);
		ret = 0;
		break;
	case -ETIMEDOUT:
		knot_count(ep, KC_WAITS, 1);
		knot_count(ep, KC_TIMEOUTS, 1);
		break;
	case -EINTR:
		knot_count(ep, KC_WAITS, 1);
		knot_count(ep, KC_INTERRUPTS, 1);
		break;
	default:
		break;
	}
	return ret;
}

/*
 * knitk_doorbell_wait of a joined endpoint, ringing @ring (valid, if any)
 * before it sleeps, and also ended by @nr @words (checked by the caller).
 */
static int doorbell_wait(struct knitk_endpoint *ep, uint32_t seq,
			 uint64_t deadline_ns, uint64_t ring,
			 const struct knitk_wait_word *words, unsigned int nr)
{
	unsigned int d = (unsigned int)ep->doorbell;
	struct knitk_doorbell *db = knot_doorbell(ep, d);
	int ret;

	/* Pairs with the fence in knitk_doorbell_ring (the CAS is one too). */
	atomic_thread_fence(memory_order_seq_cst);
	/*
	 * The role ended (P4): refused before anything is rung or slept, as
	 * the module refuses its wait and ring-then-wait.  An end this look
	 * misses still ends the sleep below: on the futex backend its kick
	 * of our doorbell comes after its clear of live, so either the
	 * prepare's seq_cst CAS read the kicked seq (and this acquire load
	 * of live, partner the seq_cst clear in futex_mark_dead, sees the
	 * end) or the wait finds seq moved; the module's wait returns
	 * -ENOTCONN itself (knitk_role_end()).  The look after the sleep
	 * then sees the end.
	 */
	if (knot_role_ended(ep)) {
		doorbell_set_sleeping(db, 0);
		return -ENOTCONN;
	}
	if (d != KNITK_DOORBELL_HOST && knot_host_dead(ep)) {
		ret = -EPIPE;
		goto out;
	}
	/*
	 * Work or a peer event found by the re-check ends the wait at once;
	 * the host-death test below still applies, since a death seen here
	 * through death_seq may have escaped the test above.
	 */
	if (knitk__endpoint_doorbell_pending(ep, d) || knot_peer_event(ep)) {
		ret = 0;
	} else {
		ret = doorbell_sleep(ep, d, seq, deadline_ns, ring, words, nr);
		ring = 0;	/* rung by the sleep */
	}
	/* Ended while we slept or re-checked: woken by the end's kick. */
	if (ret == 0 && knot_role_ended(ep))
		ret = -ENOTCONN;
	if (ret == 0 && d != KNITK_DOORBELL_HOST && knot_host_dead(ep) &&
	    !knitk__endpoint_doorbell_pending(ep, d))
		ret = -EPIPE;
out:
	doorbell_set_sleeping(db, 0);
	/* No sleep: ring on its own, the caller's publish must be seen. */
	if (ring) {
		int r = knitk_doorbell_ring(ep, ring);

		if (r < 0 && ret >= 0)
			ret = r;
	}
	return ret;
}

static int doorbell_wait_ring(struct knitk_endpoint *ep, uint32_t seq,
			      uint64_t deadline_ns, uint64_t ring,
			      const struct knitk_wait_word *words, unsigned int nr)
{
	if (!ep || (ring & ~knot_doorbell_mask(ep)))
		return -EINVAL;
	if (ep->doorbell < 0)
		return -ENOTCONN;
	return doorbell_wait(ep, seq, deadline_ns, ring, words, nr);
}

KNITK_EXPORT int knitk_doorbell_wait(struct knitk_endpoint *ep, uint32_t seq,
				     uint64_t deadline_ns)
{
	return doorbell_wait_ring(ep, seq, deadline_ns, 0, NULL, 0);
}

KNITK_EXPORT int knitk_doorbell_ring_wait(struct knitk_endpoint *ep,
					  uint64_t doorbells, uint32_t seq,
					  uint64_t deadline_ns)
{
	return doorbell_wait_ring(ep, seq, deadline_ns, doorbells, NULL, 0);
}

KNITK_EXPORT int knitk_doorbell_ring_wait_words(struct knitk_endpoint *ep,
						uint64_t doorbells, uint32_t seq,
						uint64_t deadline_ns,
						const struct knitk_wait_word *words,
						unsigned int nr)
{
	unsigned int i;

	if (!ep || !words || !nr || nr > KNITK_WAIT_WORDS_MAX)
		return -EINVAL;
	for (i = 0; i < nr; i++)
		if (!words[i].word || (uintptr_t)words[i].word % sizeof(uint32_t))
			return -EINVAL;
	if (!ep->ops->wait_words)
		return -EOPNOTSUPP;
	return doorbell_wait_ring(ep, seq, deadline_ns, doorbells, words, nr);
}

KNITK_EXPORT int knitk_doorbell_can_ring_wait(const struct knitk_endpoint *ep)
{
	if (!ep)
		return -EINVAL;
	return ep->can_ring_wait && ep->ops->ring_wait;
}

KNITK_EXPORT int knitk_doorbell_ring_park(struct knitk_endpoint *ep,
					  uint64_t doorbells,
					  uint64_t deadline_ns)
{
	if (!ep || (doorbells & ~knot_doorbell_mask(ep)))
		return -EINVAL;
	if (ep->doorbell < 0)
		return -ENOTCONN;
	return doorbell_wait(ep, doorbell_prepare(ep), deadline_ns, doorbells,
			     NULL, 0);
}

KNITK_EXPORT int knitk_doorbell_park(struct knitk_endpoint *ep,
				     uint64_t deadline_ns)
{
	return knitk_doorbell_ring_park(ep, 0, deadline_ns);
}

KNITK_EXPORT int knitk_doorbell_ring(struct knitk_endpoint *ep,
				     uint64_t doorbells)
{
	uint64_t flagged, woken = 0;
	int ret;

	if (!ep || (doorbells & ~knot_doorbell_mask(ep)))
		return -EINVAL;
	flagged = doorbell_flagged(ep, doorbells);
	if (!flagged)
		return 0;
	ret = ep->ops->notify(ep, flagged, &woken);
	if (ret < 0)
		return ret;
	doorbell_count_sent(ep, woken);
	return knot_bits(woken);
}

/*
 * Who is awake, for a poll that must not keep the thread it waits for off
 * a CPU (knitk_consumer_wait, the pool's polls in lib/pool/spin.c).
 */
uint64_t knitk__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

KNITK_EXPORT int knitk_endpoint_awake(const struct knitk_endpoint *ep,
				      uint64_t *awake, unsigned int *cpus)
{
	uint64_t m, mask = 0;
	cpu_set_t set;

	if (!ep)
		return -EINVAL;
	for (m = knot_doorbell_mask(ep); m; m &= m - 1) {
		unsigned int d = (unsigned int)__builtin_ctzll(m);

		if (!knot_doorbell_asleep(ep, d))
			mask |= 1ULL << d;
	}
	if (awake)
		*awake = mask;
	if (cpus) {
		*cpus = sched_getaffinity(0, sizeof(set), &set) ? 1 :
			(unsigned int)CPU_COUNT(&set);
		if (!*cpus)
			*cpus = 1;
	}
	return __builtin_popcountll(mask);
}

/* Where each counter goes in struct knitk_wake_stats. */
#define WAKE_FIELD(c, f) [c] = offsetof(struct knitk_wake_stats, f)
static const size_t wake_fields[KC_NR] = {
	WAKE_FIELD(KC_WAITS, waits),
	WAKE_FIELD(KC_WAKES, wakes),
	WAKE_FIELD(KC_SPURIOUS, spurious),
	WAKE_FIELD(KC_MISMATCHES, mismatches),
	WAKE_FIELD(KC_TIMEOUTS, timeouts),
	WAKE_FIELD(KC_INTERRUPTS, interrupts),
	WAKE_FIELD(KC_SENT, sent),
	WAKE_FIELD(KC_SUPPRESSED_AWAKE, suppressed_awake),
	WAKE_FIELD(KC_SUPPRESSED_IDLE, suppressed_idle),
	WAKE_FIELD(KC_KICKS, kicks),
	WAKE_FIELD(KC_EVENT_WRITES, event_writes),
};
_Static_assert(sizeof(struct knitk_wake_stats) ==
	       offsetof(struct knitk_wake_stats, waits) + KC_NR * sizeof(uint64_t),
	       "every field of knitk_wake_stats after its size is a counter");

KNITK_EXPORT int knitk_endpoint_wake_stats(const struct knitk_endpoint *ep,
					   struct knitk_wake_stats *out)
{
	struct knitk_wake_stats ws = { 0 }, *stats = &ws;
	unsigned int c;

	if (!ep || !out)
		return -EINVAL;
	for (c = 0; c < KC_NR; c++) {
		uint64_t v = atomic_load_explicit(&ep->counters[c],
						  memory_order_relaxed);

		memcpy((char *)stats + wake_fields[c], &v, sizeof(v));
	}
	return knitk__sized_out(out, &ws, sizeof(ws), KNITK_WAKE_STATS_SIZE_VER0);
}

KNITK_EXPORT int knitk_endpoint_doorbell_stats(struct knitk_endpoint *ep,
					       unsigned int doorbell,
					       struct knitk_doorbell_stats *stats,
					       size_t size)
{
	size_t ver0 = KNITK_STATS_SIZE_VER0 - offsetof(struct knitk_stats, stats);
	struct knitk_doorbell_stats st;
	int ret;

	if (!ep || !stats || doorbell >= KNITK_NR_DOORBELLS || size < ver0)
		return -EINVAL;
	/* As for the sized structs: no header has a struct that big. */
	if (size > KNITK_SIZED_MAX)
		return -E2BIG;
	if (!ep->ops->stats)
		return -EOPNOTSUPP;
	ret = ep->ops->stats(ep, doorbell, &st);
	if (ret)
		return ret;
	/* The caller's headers may be older or newer than ours. */
	memcpy(stats, &st, size < sizeof(st) ? size : sizeof(st));
	if (size > sizeof(st))
		memset((char *)stats + sizeof(st), 0, size - sizeof(st));
	return 0;
}
