/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The allocator of one mailbox's arena, used by the lane layer only: a
 * table private to the producer, KNITK_ARENA_SLOTS slots, 64-byte granules.
 * Slot s is live while the producer's private allocation toggle and the
 * effective free word (the XOR of every free source, plus the producer's
 * private rollback frees) disagree.  Placement restarts at offset 0 when
 * everything tracked is free.  It never touches the arena memory, so it
 * can model arenas larger than any mapping.  Not installed.
 */
#ifndef KNITK_ARENA_H
#define KNITK_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#include "knitk.h"

struct knitk_arena;

int knitk__arena_create(uint64_t size, struct knitk_arena **arena);
void knitk__arena_destroy(struct knitk_arena *arena);

/*
 * knitk__arena_add_free_word - add a shared free word to the sources whose
 * XOR is the effective free word (up to KNITK_ARENA_MAX_FREE_WORDS).
 */
/* Every claimant's, the consumer's or ours, and the kept slots' (lane.c). */
#define KNITK_ARENA_MAX_FREE_WORDS	(KNITK_MAX_WORKERS + 2)
int knitk__arena_add_free_word(struct knitk_arena *arena,
			       const uint64_t *word);

/*
 * knitk__arena_alloc - reserve @len bytes (rounded up to 64); returns the
 * slot and the offset.  -ENOSPC when no slot or no gap is free now
 * (backpressure), -EMSGSIZE when @len exceeds the arena.
 */
int knitk__arena_alloc(struct knitk_arena *arena, uint64_t len,
		       uint64_t *offset);

/*
 * knitk__arena_realloc - knitk__arena_alloc as if live @slot were free:
 * on success @slot is freed (the new slot may be @slot again); on failure
 * nothing changed and @slot is still live.
 */
int knitk__arena_realloc(struct knitk_arena *arena, unsigned int slot,
			 uint64_t len, uint64_t *offset);

/*
 * knitk__arena_freed_since_placed - whether a free of @slot was stored in
 * the shared free words since the producer last placed it (an odd number
 * of them): then the bytes are not the placement's any more.  Any thread.
 */
bool knitk__arena_freed_since_placed(const struct knitk_arena *arena,
				     unsigned int slot);

/*
 * knitk__arena_placement - the number of @slot's last placement (they
 * count from 1, over the arena's life): a new placement of the slot has a
 * new number.  Any thread.
 */
uint64_t knitk__arena_placement(const struct knitk_arena *arena,
				unsigned int slot);

/* knitk__arena_free - the producer's own rollback free of a live slot. */
int knitk__arena_free(struct knitk_arena *arena, unsigned int slot);

/* knitk__arena_live - live slots as the producer sees them now. */
int knitk__arena_live(struct knitk_arena *arena, uint64_t *slots);

/* knitk__arena_slot_range - offset and reserved bytes of a live slot. */
int knitk__arena_slot_range(const struct knitk_arena *arena,
			    unsigned int slot, uint64_t *offset,
			    uint64_t *size);

/**
 * struct knitk_arena_freer - one party's single-writer free word
 * @word: the shared free word; this freer is its only writer.
 * @toggles: private copy of @word.
 */
struct knitk_arena_freer {
	uint64_t *word;
	uint64_t toggles;
};

/* knitk__arena_freer_init - take over @word (loads its current value). */
int knitk__arena_freer_init(struct knitk_arena_freer *freer, uint64_t *word);

/* knitk__arena_freer_free - free @slot: toggle the private copy, store it. */
int knitk__arena_freer_free(struct knitk_arena_freer *freer,
			    unsigned int slot);

/* knitk__arena_free_xor - free @slot into a word shared by many freers. */
int knitk__arena_free_xor(uint64_t *word, unsigned int slot);

#endif /* KNITK_ARENA_H */
