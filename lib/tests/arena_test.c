// SPDX-License-Identifier: GPL-2.0
/*
 * The arena allocator: placement, holes, compaction, reset, offsets above
 * 2^31, exhaustion as backpressure, a random model check, and regressions
 * for knitting's two allocator bugs (blind-store frees, exact-size reuse
 * with every slot index tracked).  The arena is internal to the library:
 * this test links a test build of it statically.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "../core/arena.h"
#include "tap.h"

struct fixture {
	struct knitk_arena *a;
	uint64_t free_word;		/* the consumer's single-writer word */
	struct knitk_arena_freer consumer;
};

static int fixture_init(struct fixture *f, uint64_t size)
{
	f->free_word = 0;
	if (knitk__arena_create(size, &f->a))
		return -1;
	if (knitk__arena_add_free_word(f->a, &f->free_word))
		return -1;
	return knitk__arena_freer_init(&f->consumer, &f->free_word);
}

static int alloc_at(struct fixture *f, uint64_t len, uint64_t *off)
{
	return knitk__arena_alloc(f->a, len, off);
}

static void cold_start_and_granules(void)
{
	struct fixture f;
	uint64_t off, sz;
	int s;

	REQUIRE(fixture_init(&f, 1 << 16) == 0);
	s = alloc_at(&f, 100, &off);
	CHECK_EQ(s, 0);
	CHECK_EQ(off, 0);
	REQUIRE(knitk__arena_slot_range(f.a, 0, &off, &sz) == 0);
	CHECK_EQ(sz, 128);
	s = alloc_at(&f, 1, &off);
	CHECK_EQ(s, 1);
	CHECK_EQ(off, 128);
	s = alloc_at(&f, 64, &off);
	CHECK_EQ(s, 2);
	CHECK_EQ(off, 192);
	CHECK_EQ(knitk__arena_live(f.a, NULL), 3);
	knitk__arena_destroy(f.a);
}

static void bad_arguments(void)
{
	struct fixture f;
	uint64_t off;

	REQUIRE(fixture_init(&f, 4096) == 0);
	CHECK_EQ(knitk__arena_alloc(f.a, 0, &off), -EINVAL);
	CHECK_EQ(knitk__arena_alloc(f.a, 4097, &off), -EMSGSIZE);
	CHECK_EQ(knitk__arena_alloc(NULL, 64, &off), -EINVAL);
	CHECK_EQ(knitk__arena_alloc(f.a, 64, NULL), -EINVAL);
	CHECK_EQ(knitk__arena_free(f.a, 64), -EINVAL);
	CHECK_EQ(knitk__arena_free(f.a, 3), -ENOENT);
	CHECK_EQ(knitk__arena_create(100, &f.a), -EINVAL);
	CHECK_EQ(knitk__arena_freer_free(&f.consumer, 64), -EINVAL);
	CHECK_EQ(knitk__arena_free_xor(NULL, 1), -EINVAL);
	knitk__arena_destroy(f.a);
}

/* Deletes at the front, middle and back; holes are reused first-fit. */
static void holes_reused(void)
{
	struct fixture f;
	uint64_t off;
	int i;

	REQUIRE(fixture_init(&f, 1 << 16) == 0);
	for (i = 0; i < 5; i++)		/* slots 0..4 at 0,128,...,512 */
		REQUIRE(alloc_at(&f, 128, &off) == i && off == 128ULL * i);
	knitk__arena_freer_free(&f.consumer, 0);	/* front */
	knitk__arena_freer_free(&f.consumer, 2);	/* middle */
	knitk__arena_freer_free(&f.consumer, 4);	/* back */
	CHECK_EQ(knitk__arena_live(f.a, NULL), 2);
	CHECK_EQ(alloc_at(&f, 64, &off), 0);	/* front hole */
	CHECK_EQ(off, 0);
	CHECK_EQ(alloc_at(&f, 64, &off), 2);	/* rest of the front hole */
	CHECK_EQ(off, 64);
	CHECK_EQ(alloc_at(&f, 128, &off), 4);	/* middle hole */
	CHECK_EQ(off, 256);
	CHECK_EQ(alloc_at(&f, 128, &off), 5);	/* back: after slot 3 */
	CHECK_EQ(off, 512);
	knitk__arena_destroy(f.a);
}

/* A freed gap too small for the request: append past it. */
static void append_past_freed_gap(void)
{
	struct fixture f;
	uint64_t off;

	REQUIRE(fixture_init(&f, 1 << 16) == 0);
	REQUIRE(alloc_at(&f, 64, &off) == 0);
	REQUIRE(alloc_at(&f, 64, &off) == 1);
	REQUIRE(alloc_at(&f, 64, &off) == 2);
	knitk__arena_freer_free(&f.consumer, 1);
	CHECK_EQ(alloc_at(&f, 256, &off), 1);	/* index 1 compacted, reused */
	CHECK_EQ(off, 192);
	CHECK_EQ(alloc_at(&f, 64, &off), 3);	/* the gap at 64 still there */
	CHECK_EQ(off, 64);
	knitk__arena_destroy(f.a);
}

/* Everything tracked free: placement restarts at 0. */
static void reset_when_all_free(void)
{
	struct fixture f;
	uint64_t off;
	int i;

	REQUIRE(fixture_init(&f, 1 << 16) == 0);
	for (i = 0; i < 10; i++)
		REQUIRE(alloc_at(&f, 1000, &off) == i);
	for (i = 0; i < 10; i++)
		knitk__arena_freer_free(&f.consumer, (unsigned int)i);
	CHECK_EQ(knitk__arena_live(f.a, NULL), 0);
	CHECK_EQ(alloc_at(&f, 4096, &off), 0);
	CHECK_EQ(off, 0);
	knitk__arena_destroy(f.a);
}

/* A 4 GiB nominal arena: offsets above 2^31 (no memory is touched). */
static void offsets_above_2g(void)
{
	struct fixture f;
	const uint64_t G = 1ULL << 30;
	uint64_t off;
	int i;

	REQUIRE(fixture_init(&f, KNITK_MAX_ARENA_BYTES) == 0);
	for (i = 0; i < 4; i++) {
		CHECK_EQ(alloc_at(&f, G, &off), i);
		CHECK_EQ(off, (uint64_t)i * G);
	}
	CHECK_EQ(alloc_at(&f, 64, &off), -ENOSPC);
	knitk__arena_freer_free(&f.consumer, 2);
	CHECK_EQ(alloc_at(&f, 100, &off), 2);
	CHECK_EQ(off, 2 * G);
	CHECK_EQ(alloc_at(&f, G - 128, &off), 4);
	CHECK_EQ(off, 2 * G + 128);
	CHECK_EQ(alloc_at(&f, 64, &off), -ENOSPC);
	knitk__arena_freer_free(&f.consumer, 3);
	CHECK_EQ(alloc_at(&f, G, &off), 3);
	CHECK_EQ(off, 3 * G);
	CHECK(off > (1ULL << 31));
	knitk__arena_destroy(f.a);
}

/* 64 live slots: backpressure, then a free makes room. */
static void slots_exhausted_is_backpressure(void)
{
	struct fixture f;
	uint64_t off, live;
	int i;

	REQUIRE(fixture_init(&f, 1 << 20) == 0);
	for (i = 0; i < 64; i++)
		REQUIRE(alloc_at(&f, 64, &off) == i);
	CHECK_EQ(alloc_at(&f, 64, &off), -ENOSPC);
	CHECK_EQ(knitk__arena_live(f.a, &live), 64);
	CHECK_EQ(live, ~0ULL);
	knitk__arena_freer_free(&f.consumer, 17);
	CHECK_EQ(alloc_at(&f, 64, &off), 17);
	CHECK_EQ(off, 17 * 64);
	knitk__arena_destroy(f.a);
}

/*
 * knitting's aliasing bug (docs/protocol.md A3): every slot index tracked, a
 * partial free, then the same size again.  The allocation must succeed and
 * not overlap anything live.
 */
static void regression_exact_size_reuse_all_tracked(void)
{
	struct fixture f;
	uint64_t off, o2, sz, live;
	int i, s;

	REQUIRE(fixture_init(&f, 1 << 20) == 0);
	for (i = 0; i < 64; i++)
		REQUIRE(alloc_at(&f, 3000, &off) == i);
	for (i = 8; i < 16; i++)	/* a partial release of 8 */
		knitk__arena_freer_free(&f.consumer, (unsigned int)i);
	for (i = 0; i < 8; i++) {
		s = alloc_at(&f, 3000, &off);
		REQUIRE(s >= 8 && s < 16);
		knitk__arena_live(f.a, &live);
		for (unsigned int t = 0; t < 64; t++) {
			if (!(live & (1ULL << t)) || t == (unsigned int)s)
				continue;
			knitk__arena_slot_range(f.a, t, &o2, &sz);
			CHECK(off + 3008 <= o2 || o2 + sz <= off);
		}
	}
	CHECK_EQ(alloc_at(&f, 3000, &off), -ENOSPC);
	knitk__arena_destroy(f.a);
}

/*
 * The 0.1.61 bug (docs/protocol.md A1): the producer rolls back slot s and
 * reallocates it, then the consumer frees t.  With blind stores of private
 * copies the consumer's store reverted s; here s must stay live.
 */
static void regression_rollback_then_consumer_free(void)
{
	struct fixture f;
	uint64_t off_s, off_t, off, live;
	int s, t;

	REQUIRE(fixture_init(&f, 1 << 16) == 0);
	s = alloc_at(&f, 256, &off_s);
	t = alloc_at(&f, 256, &off_t);
	REQUIRE(s == 0 && t == 1);
	CHECK_EQ(knitk__arena_free(f.a, (unsigned int)s), 0);	/* rollback */
	CHECK_EQ(knitk__arena_free(f.a, (unsigned int)s), -ENOENT);
	s = alloc_at(&f, 256, &off_s);			/* s again */
	CHECK_EQ(s, 0);
	knitk__arena_freer_free(&f.consumer, (unsigned int)t);
	knitk__arena_live(f.a, &live);
	CHECK_EQ(live, 1ULL << s);
	REQUIRE(alloc_at(&f, 256, &off) >= 0);
	CHECK(off >= off_s + 256 || off + 256 <= off_s);
	knitk__arena_destroy(f.a);
}

/* Random allocate/free against a model of the live ranges. */
static void random_model_check(void)
{
	struct fixture f;
	uint64_t seed = 42, start[64], len[64], live_model = 0, live, off;
	const uint64_t size = 1 << 18;
	int i;

	REQUIRE(fixture_init(&f, size) == 0);
	for (i = 0; i < 200000; i++) {
		uint64_t r = tap_rand(&seed);

		if ((r & 3) != 0 || !live_model) {
			uint64_t want = 1 + tap_rand(&seed) % 16384;
			uint64_t need = (want + 63) & ~63ULL;
			int s = alloc_at(&f, want, &off);
			int fits;

			/* Model: does a gap between live ranges fit? */
			{
				uint64_t at = 0, m;
				int placed = 0;

				fits = 0;
				while (!placed) {
					uint64_t next = size, nend = size;
					int found = 0;

					for (m = live_model; m; m &= m - 1) {
						int k = __builtin_ctzll(m);

						if (start[k] >= at && start[k] < next) {
							next = start[k];
							nend = start[k] + len[k];
							found = 1;
						}
					}
					if (next - at >= need)
						fits = 1;
					if (fits || !found)
						placed = 1;
					at = nend;
				}
			}
			if (live_model == ~0ULL)
				fits = 0;
			if (s < 0) {
				CHECK_EQ(s, -ENOSPC);
				CHECK(!fits);
			} else {
				CHECK(fits);
				CHECK(!(live_model & (1ULL << s)));
				for (uint64_t m = live_model; m; m &= m - 1) {
					int k = __builtin_ctzll(m);

					CHECK(off + need <= start[k] ||
					      start[k] + len[k] <= off);
				}
				CHECK(off + need <= size);
				start[s] = off;
				len[s] = need;
				live_model |= 1ULL << s;
			}
		} else {
			int n = __builtin_popcountll(live_model);
			uint64_t m = live_model;
			int k;

			for (k = (int)(tap_rand(&seed) % (uint64_t)n); k; k--)
				m &= m - 1;
			k = __builtin_ctzll(m);
			if (r & 4)
				knitk__arena_freer_free(&f.consumer, (unsigned int)k);
			else
				knitk__arena_free(f.a, (unsigned int)k);
			live_model &= ~(1ULL << k);
		}
		/* popcount(allocated xor freed) over tracked == live count */
		CHECK_EQ(knitk__arena_live(f.a, &live), __builtin_popcountll(live_model));
		CHECK_EQ(live, live_model);
		if (tap_case_failed) {
			printf("# step %d\n", i);
			break;
		}
	}
	knitk__arena_destroy(f.a);
}

/*
 * Four parties free into one arena concurrently while the producer keeps
 * allocating: two through their own single-writer words, two through one
 * word shared by atomic XOR.  Each range carries a pattern checked by its
 * freer: an aliased allocation would overwrite a live one.
 */
#define NFREERS 4
#define RING 128
#define ROUNDS 200000

struct ring {
	_Atomic uint64_t head, tail;
	uint64_t item[RING];		/* slot | seq << 8 */
};

static struct {
	struct knitk_arena *a;
	uint64_t words[3];
	unsigned char mem[1 << 16];
	struct ring ring[NFREERS];
	uint64_t start[64], len[64];	/* written by the producer before push */
	_Atomic int errors;
} cf;

static void *freer_main(void *arg)
{
	int id = (int)(intptr_t)arg;
	struct ring *r = &cf.ring[id];
	struct knitk_arena_freer fr;
	uint64_t done = 0, total = ROUNDS / NFREERS;

	if (id < 2)
		knitk__arena_freer_init(&fr, &cf.words[id]);
	while (done < total) {
		uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
		uint64_t item, k;
		unsigned int slot;
		unsigned char want;

		if (atomic_load_explicit(&r->head, memory_order_acquire) == t) {
			sched_yield();
			continue;
		}
		item = r->item[t % RING];
		slot = (unsigned int)(item & 0xff);
		want = (unsigned char)(item >> 8);
		for (k = 0; k < cf.len[slot]; k++)
			if (cf.mem[cf.start[slot] + k] != want) {
				atomic_fetch_add(&cf.errors, 1);
				break;
			}
		atomic_store_explicit(&r->tail, t + 1, memory_order_release);
		if (id < 2)
			knitk__arena_freer_free(&fr, slot);
		else
			knitk__arena_free_xor(&cf.words[2], slot);
		done++;
	}
	return NULL;
}

static void regression_concurrent_freers(void)
{
	pthread_t th[NFREERS];
	uint64_t seq, off, failures = 0;
	int i;

	memset(&cf, 0, sizeof(cf));
	REQUIRE(knitk__arena_create(sizeof(cf.mem), &cf.a) == 0);
	for (i = 0; i < 3; i++)
		REQUIRE(knitk__arena_add_free_word(cf.a, &cf.words[i]) == 0);
	for (i = 0; i < NFREERS; i++)
		REQUIRE(pthread_create(&th[i], NULL, freer_main, (void *)(intptr_t)i) == 0);
	for (seq = 0; seq < ROUNDS; seq++) {
		struct ring *r = &cf.ring[seq % NFREERS];
		uint64_t want = 64 + (seq * 7919) % 2000, h;
		int s;

		while ((s = knitk__arena_alloc(cf.a, want, &off)) == -ENOSPC) {
			failures++;
			sched_yield();
		}
		if (s < 0) {
			CHECK_EQ(s, 0);
			break;
		}
		cf.start[s] = off;
		cf.len[s] = want;
		memset(cf.mem + off, (int)(seq & 0xff), want);
		h = atomic_load_explicit(&r->head, memory_order_relaxed);
		while (h - atomic_load_explicit(&r->tail, memory_order_acquire) >= RING)
			sched_yield();
		r->item[h % RING] = (uint64_t)s | (seq & 0xff) << 8;
		atomic_store_explicit(&r->head, h + 1, memory_order_release);
	}
	for (i = 0; i < NFREERS; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(atomic_load(&cf.errors), 0);
	CHECK_EQ(knitk__arena_live(cf.a, NULL), 0);
	REQUIRE(knitk__arena_alloc(cf.a, 64, &off) >= 0);
	CHECK_EQ(off, 0);			/* everything free: reset */
	printf("# %d allocations, %llu backpressure retries\n", ROUNDS,
	       (unsigned long long)failures);
	knitk__arena_destroy(cf.a);
}

int main(void)
{
	TEST(cold_start_and_granules);
	TEST(bad_arguments);
	TEST(holes_reused);
	TEST(append_past_freed_gap);
	TEST(reset_when_all_free);
	TEST(offsets_above_2g);
	TEST(slots_exhausted_is_backpressure);
	TEST(regression_exact_size_reuse_all_tracked);
	TEST(regression_rollback_then_consumer_free);
	TEST(random_model_check);
	TEST(regression_concurrent_freers);
	return tap_exit();
}
