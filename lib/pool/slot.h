/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * A call's word (docs/protocol.md R1, R2, R4, R5): one 64-bit word per
 * in-flight entry, in the knot's abort region, that host and workers
 * change only by compare-and-swap, so that whatever the lanes do (a
 * request delivered twice, a lane of a call that already ended) a call
 * runs at most once, and a call that ended without running never runs.
 *
 *   bits 63..32  the generation of the entry's call (task id >> 32)
 *   bit  18      SLOT_LATE: DONE past the call's deadline (R3)
 *   bit  17      SLOT_PARKED: that waiter sleeps on the word's low half
 *   bit  16      SLOT_TAKE: a waiting thread of the host takes the result
 *                from the slot's bytes (struct slot_box), R6
 *   bits 15..8   by: 0 none, worker w + 1, or SLOT_BY_NONE
 *   bits  7..0   the phase, enum slot_phase
 *
 * The host never writes the word to submit: a call of generation g is
 * QUEUED while the word still holds generation g - 1 (any phase: that
 * call ended before its entry was taken again), which spares the host a
 * store to a line the worker owns on every call.  Only a thread that
 * waits for a call not yet claimed stores it so, as {g - 1, SLOT_QUEUED}
 * with its flags: a word that still reads as g's predecessor.  The phase
 * and the flags sit in the low half, the half a waiter sleeps on.
 */
#ifndef KNITK_POOL_SLOT_H
#define KNITK_POOL_SLOT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "knitk.h"

enum slot_phase {
	SLOT_FREE = 0,		/* the entry's first word: no call yet */
	SLOT_RUNNING,		/* claimed by worker by - 1 */
	SLOT_DONE,		/* its worker finished it */
	SLOT_FAILED,		/* aborted, expired with the call, or sealed */
	SLOT_QUEUED,		/* in {gen - 1}: gen queued, a waiter's flags set */
};

#define SLOT_TAKE	(1ULL << 16)
#define SLOT_PARKED	(1ULL << 17)
#define SLOT_LATE	(1ULL << 18)
#define SLOT_FLAGS	(SLOT_TAKE | SLOT_PARKED)

/*
 * The result bytes of a slot (R3, R7), in the knot after the words, one
 * box of the geometry's box size per entry: written by the worker that
 * claimed the call, before its CAS to DONE; read by the host only in
 * DONE with SLOT_TAKE, after an acquire of the word.  The worker writes
 * them, so the host bounds @len by the box before it reads a byte.
 */
struct slot_box {
	uint32_t len;
	int32_t status;
	unsigned char bytes[];
};

/* Box sizes, per entry: the most that fits the abort region's limit. */
#define SLOT_BOX_BIG	128U
#define SLOT_BOX_SMALL	64U

/*
 * Bytes per box for @entries entries, 0 for none: the words come first,
 * then the boxes, all within KNITK_MAX_ABORT_BITS.
 */
static inline unsigned int slot_box_size(uint64_t entries)
{
	uint64_t room = KNITK_MAX_ABORT_BITS / 8;

	if (entries * (8 + SLOT_BOX_BIG) <= room)
		return SLOT_BOX_BIG;
	if (entries * (8 + SLOT_BOX_SMALL) <= room)
		return SLOT_BOX_SMALL;
	return 0;
}

/* The box size a knot's abort region of @abort_bits has for @entries. */
static inline unsigned int slot_box_size_of(uint64_t abort_bits, uint64_t entries)
{
	uint64_t b;

	if (!entries || abort_bits / 8 < entries * 8)
		return 0;
	b = (abort_bits / 8 - entries * 8) / entries;
	return b >= SLOT_BOX_SMALL ? (b >= SLOT_BOX_BIG ? SLOT_BOX_BIG : SLOT_BOX_SMALL) : 0;
}

/* The futex half of a word: the phase, by and the flags. */
static inline uint32_t *slot_low(_Atomic uint64_t *word)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	return (uint32_t *)word + 1;
#else
	return (uint32_t *)word;
#endif
}

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

/*
 * The word is still generation @gen's: queued (its predecessor's, or
 * {gen - 1, SLOT_QUEUED}) or @gen's own ({gen, SLOT_QUEUED} is the next
 * call's, queued).  A waiter woken after its call ended elsewhere and its
 * entry went to a new call sees it is not.
 */
static inline bool slot_of(uint64_t v, uint32_t gen)
{
	return (slot_gen(v) == gen && slot_phase(v) != SLOT_QUEUED) ||
	       slot_queued(v, gen);
}

/*
 * Generation @gen's waiter still waits on @v: its SLOT_TAKE is there, the
 * word is its call's, and the call has not ended (R6).
 */
static inline bool slot_awaited(uint64_t v, uint32_t gen)
{
	return (v & SLOT_TAKE) && slot_of(v, gen) &&
	       slot_phase(v) != SLOT_DONE && slot_phase(v) != SLOT_FAILED;
}

/* A waiter's flags on a queued word count for the claim (only SLOT_QUEUED). */
static inline uint64_t slot_queued_flags(uint64_t v)
{
	return slot_phase(v) == SLOT_QUEUED ? v & SLOT_FLAGS : 0;
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
			next = slot_word(gen, w + 1, SLOT_RUNNING) | slot_queued_flags(v);
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

/*
 * R3: worker @w ran generation @gen to its end, past the call's deadline
 * when @late (SLOT_LATE: whenever the host looks, the call expired; before
 * it, its result stands).  With @box (its result is in the slot's box) a
 * waiter's SLOT_TAKE stays: that waiter takes the result; otherwise the
 * flags go and the answer travels in a return lane.
 * Release pairs with the host's acquire of the word (slot_take_back): the
 * box is written before.  Returns the word it replaced; one not RUNNING
 * by @w (an abort won, R4) is left as it is and returned.
 */
static inline uint64_t slot_finish(_Atomic uint64_t *word, uint32_t gen,
				   unsigned int w, bool box, bool late)
{
	uint64_t v = atomic_load_explicit(word, memory_order_relaxed), next;

	do {
		if (slot_gen(v) != gen || slot_by(v) != w + 1 ||
		    slot_phase(v) != SLOT_RUNNING)
			return v;
		next = slot_word(gen, w + 1, SLOT_DONE) | (box ? v & SLOT_TAKE : 0) |
		       (late ? SLOT_LATE : 0);
	} while (!atomic_compare_exchange_weak_explicit(word, &v, next,
							memory_order_release,
							memory_order_relaxed));
	return v;
}

/*
 * R6: a waiting thread of the host sets SLOT_TAKE on generation @gen,
 * queued or running: from now on the worker leaves the result in the
 * box for it (unless the result does not fit).  False when the call is
 * past that (DONE, FAILED: the old ways complete it).  acq_rel: acquire
 * pairs with the claim's release, release orders it before our wait.
 */
static inline bool slot_take(_Atomic uint64_t *word, uint32_t gen)
{
	uint64_t v = atomic_load_explicit(word, memory_order_acquire), next;

	do {
		if (slot_queued(v, gen))
			next = slot_word(gen - 1, 0, SLOT_QUEUED) | SLOT_TAKE;
		else if (slot_gen(v) == gen && slot_phase(v) == SLOT_RUNNING)
			next = v | SLOT_TAKE;
		else
			return false;
	} while (!atomic_compare_exchange_weak_explicit(word, &v, next,
							memory_order_acq_rel,
							memory_order_acquire));
	return true;
}

/*
 * R6: the waiter is going to sleep on the word: SLOT_PARKED on a word
 * still @v, which it awaits (slot_awaited).  Returns the value to sleep
 * on, or 0 when the word moved (look again).
 */
static inline uint32_t slot_park(_Atomic uint64_t *word, uint64_t v)
{
	uint64_t next = v | SLOT_PARKED;

	if (v != next &&
	    !atomic_compare_exchange_strong_explicit(word, &v, next,
						     memory_order_relaxed,
						     memory_order_relaxed))
		return 0;
	return (uint32_t)(next & 0xffffffffU);
}

/*
 * The waiter's flags come off generation @gen's word (R6, R7): the waiter
 * leaves, or another thread completes the call.  Returns the word it
 * replaced (acquire: a DONE one's box is read after it), or 0 when the
 * word had no SLOT_TAKE of @gen: then the flags were lost (a claim by a
 * worker that does not know them) and a sleeper must be woken anyway.
 */
static inline uint64_t slot_untake(_Atomic uint64_t *word, uint32_t gen)
{
	uint64_t v = atomic_load_explicit(word, memory_order_acquire);

	do {
		if (!(v & SLOT_TAKE) || !slot_of(v, gen))
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(word, &v, v & ~SLOT_FLAGS,
							memory_order_acq_rel,
							memory_order_acquire));
	return v;
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
