/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * libknitk: a trace of the stealing pool's wake policy (docs/protocol.md
 * T12-T14), in test builds only (-DKNITK_TEST_HOOKS: the sanitizer
 * builds and libknitk-hooks.a); in the installed library KNITK_TRACE is
 * nothing.  Not installed.
 *
 * A ring of events in a memfd that a test makes with knitk__trace_open()
 * before it starts its pools: its fd is inherited by process workers
 * (KNITK_TRACE_ENV names it; the library maps it when it is loaded), so
 * threads and processes write one ring.  A test that finds a hang prints
 * it with knitk__trace_dump().  Header-only but for the ring's pointer
 * and the two functions (core/doorbell.c), so both layers use it.
 */
#ifndef KNITK_TRACE_H
#define KNITK_TRACE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define KNITK_TRACE_ENV		"KNITK_TEST_TRACE_FD"
#define KNITK_TRACE_ENTRIES	(1U << 16)

enum knitk_trace_event {
	KT_NONE,
	KT_PICK,	/* who: picked; a: the idle workers not rung it saw */
	KT_UNPICK,	/* who: given back idle */
	KT_RING,	/* who: rung; a: knitk_doorbell_ring's result */
	KT_NOTIFY,	/* who: doorbell; a: KT_SENT..; b: its word (futex) */
	KT_IDLE,	/* who: worker; a: 1 to park, 0 ringing or window */
	KT_PARK,	/* who: worker; a: 0 in, 1 out; b: result */
	KT_AWAKE,	/* who: worker */
	KT_CLAIMED,	/* who: worker; a: lanes; b: mailbox */
	KT_HAND_OFF,	/* who: to; a: lanes; b: mailbox (a worker's) */
	KT_P_HAND_OFF,	/* who: to; a: lanes; b: mailbox (a producer's) */
	KT_P_DROP,	/* who: to; a: lanes dropped; b: 1 withdrew, 2 reload */
	KT_SEND,	/* who: to (or -1); a: lane or error; b: mailbox */
	KT_NAP,		/* who: worker; a: the T5 backoff's sleep, 0 in, 1 out */
	KT_NR,
};

/* How a notify of one doorbell ended (KT_NOTIFY). */
enum { KT_SENT, KT_AWAKE_FLAG, KT_FILTERED, KT_CAS_FAILED };

struct knitk_trace_entry {
	_Atomic uint64_t seq;	/* index + 1 once written */
	_Atomic uint64_t what;	/* event | who << 8 | pid << 32 */
	_Atomic uint64_t a, b;
};

struct knitk_trace {
	_Atomic uint64_t next;
	struct knitk_trace_entry e[KNITK_TRACE_ENTRIES];
};

/* The ring, NULL when no test opened one. */
extern struct knitk_trace *knitk__trace;
/* Make the ring (before any pool or thread); 0 or a negative errno. */
int knitk__trace_open(void);
/* Print the last @n events to @f. */
void knitk__trace_dump(FILE *f, unsigned int n);

#ifdef KNITK_TEST_HOOKS
/* Set per process when the ring is mapped (core/doorbell.c). */
extern uint32_t knitk__trace_pid;

static inline void knitk__trace_add(unsigned int ev, int who, uint64_t a,
				    uint64_t b)
{
	struct knitk_trace *t = knitk__trace;
	struct knitk_trace_entry *e;
	uint64_t i;

	if (!t)
		return;
	/* Relaxed: a diagnostic, read after the writers stopped. */
	i = atomic_fetch_add_explicit(&t->next, 1, memory_order_relaxed);
	e = &t->e[i % KNITK_TRACE_ENTRIES];
	atomic_store_explicit(&e->what, ev | (uint64_t)(uint8_t)who << 8 |
			      (uint64_t)knitk__trace_pid << 32, memory_order_relaxed);
	atomic_store_explicit(&e->a, a, memory_order_relaxed);
	atomic_store_explicit(&e->b, b, memory_order_relaxed);
	atomic_store_explicit(&e->seq, i + 1, memory_order_relaxed);
}
#define KNITK_TRACE(ev, who, a, b) \
	knitk__trace_add(ev, (int)(who), (uint64_t)(a), (uint64_t)(b))
#else
#define KNITK_TRACE(ev, who, a, b) do { } while (0)
#endif

#endif /* KNITK_TRACE_H */
