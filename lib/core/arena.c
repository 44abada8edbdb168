// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The arena allocator of one mailbox.
 *
 * The producer owns a private table of up to KNITK_ARENA_SLOTS entries
 * (start, reserved size), kept sorted by start, and a private toggle word:
 * allocating slot s toggles bit s.  Freeing toggles bit s of a free word:
 * the consumer's single-writer word in the mailbox sector (or the steal
 * lines' words, or a word shared by atomic XOR), or the producer's private
 * rollback word.  The effective free word is the XOR of all of them, so no
 * party ever overwrites another's frees (the blind-store bug of knitting
 * before 0.1.61 cannot be expressed here).
 *
 * Slot s is live while its allocation and free toggles disagree.  Every
 * allocation first drops the freed entries from the table (compaction); a
 * slot index is therefore reused only after its entry left the table, and
 * an exact-size hole never needs a fresh index (knitting's aliasing bug,
 * where reuse failed when every index was tracked and the caller wrote at
 * a stale offset).  When everything tracked is free, placement restarts at
 * offset 0.  Failure is -ENOSPC and the caller writes nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "internal.h"

struct knitk_arena {
	uint64_t size;
	uint64_t alloc_toggles;		/* private: bit s toggled per alloc */
	uint64_t rollback;		/* private: the producer's own frees */
	uint64_t tracked;		/* slots present in the table */
	unsigned int nr;		/* table entries */
	uint8_t table[KNITK_ARENA_SLOTS];	/* slots, sorted by start */
	uint64_t start[KNITK_ARENA_SLOTS];	/* by slot */
	uint64_t len[KNITK_ARENA_SLOTS];	/* reserved bytes, by slot */
	unsigned int nr_free_words;
	const uint64_t *free_words[KNITK_ARENA_MAX_FREE_WORDS];
	/*
	 * Bit s: the XOR of the shared free words' bit s when slot s was
	 * last placed (knitk__arena_freed_since_placed).  Only the producer
	 * stores it; any thread loads it.
	 */
	uint64_t placed;
	/* Placements so far, and the number of each slot's last (any thread). */
	uint64_t placements;
	uint64_t placement[KNITK_ARENA_SLOTS];
};

int knitk__arena_create(uint64_t size, struct knitk_arena **arena)
{
	struct knitk_arena *a;

	if (!arena || size % KNITK_ARENA_GRANULE ||
	    size > KNITK_MAX_ARENA_BYTES)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->size = size;
	*arena = a;
	return 0;
}

void knitk__arena_destroy(struct knitk_arena *arena)
{
	free(arena);
}

int knitk__arena_add_free_word(struct knitk_arena *arena,
			       const uint64_t *word)
{
	uint64_t now;

	if (!arena || !word || (uintptr_t)word % sizeof(uint64_t))
		return -EINVAL;
	if (arena->nr_free_words == KNITK_ARENA_MAX_FREE_WORDS)
		return -ENOSPC;
	if (arena->tracked)
		return -EBUSY;
	/*
	 * Whatever the word holds now is history: fold it into our toggles
	 * so that every slot starts free.  Pairs with the release stores in
	 * knitk__arena_freer_free and knitk__arena_free_xor.
	 */
	now = atomic_load_explicit(A64(word), memory_order_acquire);
	arena->alloc_toggles ^= now;
	arena->free_words[arena->nr_free_words++] = word;
	return 0;
}

/* Slots freed (by anyone) among the tracked ones, loaded fresh. */
static uint64_t arena_freed(const struct knitk_arena *a)
{
	uint64_t f = a->rollback;
	unsigned int i;

	/*
	 * Acquire pairs with the release store of each freer: the freer's
	 * reads of the payload happen before we hand the bytes out again.
	 */
	for (i = 0; i < a->nr_free_words; i++)
		f ^= atomic_load_explicit(A64(a->free_words[i]),
					  memory_order_acquire);
	return ~(a->alloc_toggles ^ f) & a->tracked;
}

/* Drop freed entries from the table (stable); reset when all are free. */
static void arena_compact(struct knitk_arena *a)
{
	uint64_t freed = arena_freed(a);
	unsigned int i, n = 0;

	if (!freed)
		return;
	if (freed == a->tracked) {
		a->nr = 0;
		a->tracked = 0;
		return;
	}
	for (i = 0; i < a->nr; i++)
		if (!(freed & (1ULL << a->table[i])))
			a->table[n++] = a->table[i];
	a->nr = n;
	a->tracked &= ~freed;
}

int knitk__arena_alloc(struct knitk_arena *arena, uint64_t len,
		       uint64_t *offset)
{
	struct knitk_arena *a = arena;
	uint64_t need, at = 0;
	unsigned int i, pos, slot;

	if (!a || !offset || !len)
		return -EINVAL;
	if (len > a->size)
		return -EMSGSIZE;
	need = (len + KNITK_ARENA_GRANULE - 1) & ~(uint64_t)(KNITK_ARENA_GRANULE - 1);

	arena_compact(a);
	if (a->tracked == ~0ULL)
		return -ENOSPC;

	/* First fit over the gaps between sorted entries. */
	for (pos = 0; pos < a->nr; pos++) {
		unsigned int s = a->table[pos];

		if (a->start[s] - at >= need)
			break;
		at = a->start[s] + a->len[s];
	}
	if (pos == a->nr && a->size - at < need)
		return -ENOSPC;

	slot = (unsigned int)__builtin_ctzll(~a->tracked);
	for (i = a->nr; i > pos; i--)
		a->table[i] = a->table[i - 1];
	a->table[pos] = (uint8_t)slot;
	a->nr++;
	a->start[slot] = at;
	a->len[slot] = need;
	a->tracked |= 1ULL << slot;
	/*
	 * A slot out of the table is free: its toggles agree, so the shared
	 * words' part of its frees is the allocation toggle minus our own
	 * rollbacks.  Release pairs with the acquire in
	 * knitk__arena_freed_since_placed (the consumer saw the slot only
	 * after our publish anyway).
	 */
	atomic_store_explicit(A64(&a->placed), (a->placed & ~(1ULL << slot)) |
			      ((a->alloc_toggles ^ a->rollback) & (1ULL << slot)),
			      memory_order_release);
	atomic_store_explicit(A64(&a->placement[slot]), ++a->placements,
			      memory_order_release);
	a->alloc_toggles ^= 1ULL << slot;
	*offset = at;
	return (int)slot;
}

uint64_t knitk__arena_placement(const struct knitk_arena *arena,
				unsigned int slot)
{
	/* Acquire pairs with the release store of the placement. */
	return atomic_load_explicit(A64(&arena->placement[slot]),
				    memory_order_acquire);
}

bool knitk__arena_freed_since_placed(const struct knitk_arena *arena,
				     unsigned int slot)
{
	const struct knitk_arena *a = arena;
	uint64_t f = atomic_load_explicit(A64(&a->placed), memory_order_acquire);
	unsigned int i;

	/* Acquire pairs with each freer's release store, as in arena_freed. */
	for (i = 0; i < a->nr_free_words; i++)
		f ^= atomic_load_explicit(A64(a->free_words[i]),
					  memory_order_acquire);
	return f & (1ULL << slot);
}

static bool arena_slot_live(struct knitk_arena *a, unsigned int slot)
{
	return (a->tracked & ~arena_freed(a)) & (1ULL << slot);
}

int knitk__arena_free(struct knitk_arena *arena, unsigned int slot)
{
	if (!arena || slot >= KNITK_ARENA_SLOTS)
		return -EINVAL;
	if (!arena_slot_live(arena, slot))
		return -ENOENT;
	arena->rollback ^= 1ULL << slot;
	return 0;
}

int knitk__arena_realloc(struct knitk_arena *arena, unsigned int slot,
			 uint64_t len, uint64_t *offset)
{
	struct knitk_arena *a = arena;
	unsigned int pos, i;
	int ret;

	if (!a || slot >= KNITK_ARENA_SLOTS || !offset || !len)
		return -EINVAL;
	if (!arena_slot_live(a, slot))
		return knitk__arena_alloc(a, len, offset);
	if (len > a->size)
		return -EMSGSIZE;
	a->rollback ^= 1ULL << slot;
	ret = knitk__arena_alloc(a, len, offset);
	if (ret >= 0)
		return ret;
	/*
	 * Live again; the failed alloc's compaction dropped its entry (the
	 * bytes were not handed out): back into the table by its start.
	 */
	a->rollback ^= 1ULL << slot;
	if (!(a->tracked & (1ULL << slot))) {
		for (pos = 0; pos < a->nr && a->start[a->table[pos]] < a->start[slot]; pos++)
			;
		for (i = a->nr; i > pos; i--)
			a->table[i] = a->table[i - 1];
		a->table[pos] = (uint8_t)slot;
		a->nr++;
		a->tracked |= 1ULL << slot;
	}
	return ret;
}

int knitk__arena_live(struct knitk_arena *arena, uint64_t *slots)
{
	uint64_t live;

	if (!arena)
		return -EINVAL;
	live = arena->tracked & ~arena_freed(arena);
	if (slots)
		*slots = live;
	return __builtin_popcountll(live);
}

int knitk__arena_slot_range(const struct knitk_arena *arena,
			    unsigned int slot, uint64_t *offset,
			    uint64_t *size)
{
	if (!arena || slot >= KNITK_ARENA_SLOTS)
		return -EINVAL;
	if (!(arena->tracked & (1ULL << slot)))
		return -ENOENT;
	if (offset)
		*offset = arena->start[slot];
	if (size)
		*size = arena->len[slot];
	return 0;
}

int knitk__arena_freer_init(struct knitk_arena_freer *freer, uint64_t *word)
{
	if (!freer || !word || (uintptr_t)word % sizeof(uint64_t))
		return -EINVAL;
	freer->word = word;
	/* Only we write it; relaxed is enough to read our own history. */
	freer->toggles = atomic_load_explicit(A64(word), memory_order_relaxed);
	return 0;
}

int knitk__arena_freer_free(struct knitk_arena_freer *freer,
			    unsigned int slot)
{
	if (!freer || !freer->word || slot >= KNITK_ARENA_SLOTS)
		return -EINVAL;
	freer->toggles ^= 1ULL << slot;
	/* Release pairs with the acquire in arena_freed. */
	atomic_store_explicit(A64(freer->word), freer->toggles,
			      memory_order_release);
	return 0;
}

int knitk__arena_free_xor(uint64_t *word, unsigned int slot)
{
	if (!word || (uintptr_t)word % sizeof(uint64_t) ||
	    slot >= KNITK_ARENA_SLOTS)
		return -EINVAL;
	/* Release pairs with the acquire in arena_freed. */
	atomic_fetch_xor_explicit(A64(word), 1ULL << slot, memory_order_release);
	return 0;
}
