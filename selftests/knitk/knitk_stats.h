/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A doorbell's counters (KNITK_IOC_STATS) checked whole: a test names the
 * counters it expects to have moved and every other one is held to zero,
 * so a count in the wrong place fails it too.  STAT_ANY marks a counter
 * the test cannot pin down (it depends on how often the scheduler let a
 * signal or a restart in).
 */
#ifndef KNITK_STATS_H
#define KNITK_STATS_H

#include <stddef.h>

#include "knitk_harness.h"
#include "knitk_test.h"

#define STAT_ANY	(~0ULL)

/* Doorbell @d's counters through @fd; a field left unwritten reads 0xa5.. */
static inline void stats_of(struct __test_metadata *_metadata, int fd, __u32 d,
			    struct knitk_doorbell_stats *st)
{
	memset(st, 0xa5, sizeof(*st));
	ASSERT_EQ(0, knitk_stats(fd, d, st));
}

#define STAT_FIELD(f)	{ #f, offsetof(struct knitk_doorbell_stats, f) }

/* Every counter of doorbell @d equals @want's, except those at STAT_ANY. */
static inline void stats_expect(struct __test_metadata *_metadata, int fd,
				__u32 d, const struct knitk_doorbell_stats *want)
{
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
		STAT_FIELD(waits), STAT_FIELD(wakes),
		STAT_FIELD(suppressed_idle), STAT_FIELD(suppressed_awake),
		STAT_FIELD(spurious), STAT_FIELD(timeouts),
		STAT_FIELD(mismatches), STAT_FIELD(interrupts),
		STAT_FIELD(kicks), STAT_FIELD(uring_waits),
		STAT_FIELD(spin_wakes), STAT_FIELD(spin_sleeps),
	};
	_Static_assert(sizeof(fields) / sizeof(fields[0]) * sizeof(__u64) ==
		       sizeof(struct knitk_doorbell_stats),
		       "a counter of struct knitk_doorbell_stats is not checked");
	struct knitk_doorbell_stats st;
	__u64 w, v;
	size_t i;

	stats_of(_metadata, fd, d, &st);
	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		memcpy(&w, (const char *)want + fields[i].off, sizeof(w));
		memcpy(&v, (const char *)&st + fields[i].off, sizeof(v));
		if (w != STAT_ANY)
			EXPECT_EQ(w, v) TH_LOG("doorbell %u: %s", d, fields[i].name);
	}
}

/* EXPECT_STATS(fd, d, .waits = 1, .wakes = 1): the rest must be zero. */
#define EXPECT_STATS(fd, d, ...)					\
	stats_expect(_metadata, (fd), (d),				\
		     &(const struct knitk_doorbell_stats){ __VA_ARGS__ })

#endif /* KNITK_STATS_H */
