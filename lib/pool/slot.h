/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * A call's word (docs/protocol.md R1, R2, R4, R5): one 64-bit word per
 * in-flight entry, in the knot's abort region, that host and workers
 * change only by compare-and-swap, so that whatever the lanes do (a
 * request delivered twice, a lane of a call that already ended) a call
 * runs at most once, and a call that ended without running never runs.
 *
 *   bits 63..32  the generation of the entry's call (task id >> 32)
 *   bits 15..8   by: 0 none, worker w + 1, or SLOT_BY_NONE
 *   bits  7..0   the phase, enum slot_phase
 *
 * The host never writes the word to submit: a call of generation g is
 * QUEUED while the word still holds generation g - 1 (any phase: that
 * call ended before its entry was taken again), which spares the host a
 * store to a line the worker owns on every call.  The phase sits in the
 * low half, the half a waiter will sleep on.
 */
#ifndef KNITK_POOL_SLOT_H
#define KNITK_POOL_SLOT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum slot_phase {
	SLOT_FREE = 0,		/* the entry's first word: no call yet */
	SLOT_RUNNING,		/* claimed by worker by - 1 */
	SLOT_DONE,		/* its worker finished it */
	SLOT_FAILED,		/* aborted, expired with the call, or sealed */
};

/* by: the call ended without a worker that may still answer it. */
#define SLOT_BY_NONE	0xffU

static inline uint64_t slot_word(uint32_t gen, unsigned int by,
				 enum slot_phase phase)
{
	return (uint64_t)gen << 32 | (uint64_t)(by & 0xff) << 8 | phase;
}

static inline uint32_t slot_gen(uint64_t v)
{
	return (uint32_t)(v >> 32);
}

static inline unsigned int slot_by(uint64_t v)
{
	return (unsigned int)(v >> 8) & 0xff;
}

static inline enum slot_phase slot_phase(uint64_t v)
{
	return (enum slot_phase)(v & 0xff);
}

/* Generation @gen is not claimed yet: the word still holds its predecessor. */
static inline bool slot_queued(uint64_t v, uint32_t gen)
{
	return slot_gen(v) == gen - 1;
}

enum slot_claim {
	SLOT_RUN,		/* ours to run */
	SLOT_ANSWER,		/* aborted while queued: ours to answer, not run */
	SLOT_SKIP,		/* not ours: another generation, or taken */
};

/*
 * R2: worker @w takes generation @gen of @word before it runs the call.
 * acq_rel: acquire pairs with the host's release in slot_abort and
 * slot_seal (a call aborted or sealed is seen so); release orders the
 * claim before our answer, which the host reads with acquire.
 */
static inline enum slot_claim slot_claim(_Atomic uint64_t *word, uint32_t gen,
					 unsigned int w)
{
	uint64_t v = atomic_load_explicit(word, memory_order_acquire);

	for (;;) {
		uint64_t next;
		enum slot_claim how;

		if (slot_queued(v, gen)) {
			next = slot_word(gen, w + 1, SLOT_RUNNING);
			how = SLOT_RUN;
		} else if (v == slot_word(gen, 0, SLOT_FAILED)) {
			next = slot_word(gen, w + 1, SLOT_FAILED);
			how = SLOT_ANSWER;
		} else {
			return SLOT_SKIP;
		}
		if (atomic_compare_exchange_weak_explicit(word, &v, next,
							  memory_order_acq_rel,
							  memory_order_acquire))
			return how;
	}
}

/* R3 (its state change only): worker @w ran generation @gen to its end. */
static inline void slot_done(_Atomic uint64_t *word, uint32_t gen, unsigned int w)
{
	uint64_t v = slot_word(gen, w + 1, SLOT_RUNNING);

	/* An abort that won (R4) keeps FAILED: the CAS fails, and that is all. */
	atomic_compare_exchange_strong_explicit(word, &v,
						slot_word(gen, w + 1, SLOT_DONE),
						memory_order_release,
						memory_order_relaxed);
}

/*
 * R4: the host aborts generation @gen: queued or running, it turns
 * FAILED (keeping who runs it), so it never starts and the task's
 * knitk_task_aborted() says so.  Release pairs with the acquire in
 * slot_claim and slot_failed.
 */
static inline void slot_abort(_Atomic uint64_t *word, uint32_t gen)
{
	uint64_t v = atomic_load_explicit(word, memory_order_relaxed), next;

	do {
		if (slot_queued(v, gen))
			next = slot_word(gen, 0, SLOT_FAILED);
		else if (slot_gen(v) == gen && slot_phase(v) == SLOT_RUNNING)
			next = slot_word(gen, slot_by(v), SLOT_FAILED);
		else
			return;
	} while (!atomic_compare_exchange_weak_explicit(word, &v, next,
							memory_order_release,
							memory_order_relaxed));
}

/*
 * R5: generation @gen's entry goes back without an answer (its worker
 * died, it was never sent, or no worker is left): no lane of it may run
 * or be answered from now on.  A call its worker finished or answered is
 * left as it is.  Release pairs with the acquire in slot_claim.
 */
static inline void slot_seal(_Atomic uint64_t *word, uint32_t gen)
{
	uint64_t v = atomic_load_explicit(word, memory_order_relaxed);
	uint64_t next = slot_word(gen, SLOT_BY_NONE, SLOT_FAILED);

	do {
		if (!slot_queued(v, gen) &&
		    !(slot_gen(v) == gen &&
		      (slot_phase(v) == SLOT_RUNNING || v == slot_word(gen, 0, SLOT_FAILED))))
			return;
	} while (!atomic_compare_exchange_weak_explicit(word, &v, next,
							memory_order_release,
							memory_order_relaxed));
}

/*
 * Generation @gen was taken by a worker other than @w: a death of @w does
 * not end it (R5 walks only the dead worker's claims).
 */
static inline bool slot_other(const _Atomic uint64_t *word, uint32_t gen,
			      unsigned int w)
{
	uint64_t v = atomic_load_explicit(word, memory_order_acquire);
	unsigned int by = slot_by(v);

	return slot_gen(v) == gen && by && by != SLOT_BY_NONE && by != w + 1;
}

/* Generation @gen was aborted (knitk_task_aborted); acquire as in slot_claim. */
static inline bool slot_failed(const _Atomic uint64_t *word, uint32_t gen)
{
	uint64_t v = atomic_load_explicit(word, memory_order_acquire);

	return slot_gen(v) == gen && slot_phase(v) == SLOT_FAILED;
}

#endif /* KNITK_POOL_SLOT_H */
