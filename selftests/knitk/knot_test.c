// SPDX-License-Identifier: GPL-2.0
/*
 * Knot resources: the max_knot_bytes memory cap, and the knot's lifetime,
 * which ends with its last endpoint and last mapping (seen through the
 * module's reference count, which every live knot file holds).
 */
#include "kselftest_harness.h"
#include "knitk_test.h"

#define MAX_KNOT_BYTES	KNITK_SYSMOD "/parameters/max_knot_bytes"
#define REFCNT		KNITK_SYSMOD "/refcnt"

static unsigned long long refcnt(struct __test_metadata *_metadata)
{
	unsigned long long v = ~0ULL;

	EXPECT_EQ(0, knitk_sysfs_read(REFCNT, &v));
	return v;
}

FIXTURE(cap) {
	unsigned long long saved;
	int have_saved;
	int fd[3];
};

FIXTURE_SETUP(cap)
{
	int i;

	KNITK_REQUIRE_DEV();
	for (i = 0; i < 3; i++)
		self->fd[i] = -1;
	ASSERT_EQ(0, knitk_sysfs_read(MAX_KNOT_BYTES, &self->saved));
	self->have_saved = 1;
	for (i = 0; i < 3; i++) {
		self->fd[i] = knitk_open();
		ASSERT_LE(0, self->fd[i]);
	}
}

FIXTURE_TEARDOWN(cap)
{
	int i;

	/* Runs after a failed ASSERT too: never leave the cap lowered. */
	if (self->have_saved)
		EXPECT_EQ(0, knitk_sysfs_write(MAX_KNOT_BYTES, self->saved));
	for (i = 0; i < 3; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
}

TEST_F(cap, max_knot_bytes_e2big)
{
	struct knitk_geometry fits, big;
	struct knitk_layout lf, lb;
	unsigned long long now = 0;

	knitk_geom(&fits, 0, 1, 1, 64, 64, 0);
	knitk_geom(&big, 0, 1, 1, 64, 64, KNITK_ARENA_ALIGN);
	knitk_layout_expect(&fits, &lf);
	knitk_layout_expect(&big, &lb);
	ASSERT_LT(lf.size, lb.size);
	/* The default cap must allow the bigger one, or the test proves nothing. */
	ASSERT_LE(lb.size, self->saved);

	/* The cap is inclusive: a knot of exactly max_knot_bytes is made. */
	ASSERT_EQ(0, knitk_sysfs_write(MAX_KNOT_BYTES, lf.size));
	ASSERT_EQ(0, knitk_sysfs_read(MAX_KNOT_BYTES, &now));
	EXPECT_EQ(lf.size, now);
	EXPECT_EQ(0, knitk_create(self->fd[0], &fits, NULL));
	EXPECT_EQ(-E2BIG, knitk_create(self->fd[1], &big, NULL));

	ASSERT_EQ(0, knitk_sysfs_write(MAX_KNOT_BYTES, self->saved));
	/* The refused endpoint is still free to create. */
	EXPECT_EQ(0, knitk_create(self->fd[1], &big, NULL));
	EXPECT_EQ(0, knitk_create(self->fd[2], &big, NULL));
}

FIXTURE(life) {
	struct knot a, b;
	unsigned long long before;
};

FIXTURE_SETUP(life)
{
	KNITK_REQUIRE_DEV();
	self->a.fd = self->b.fd = -1;
	/* Nothing of ours is open yet. */
	self->before = refcnt(_metadata);
	ASSERT_NE(~0ULL, self->before);
}

FIXTURE_TEARDOWN(life)
{
	knot_close(&self->a);
	knot_close(&self->b);
}

/* The fd alone, then the mapping alone, each keeps the knot alive. */
TEST_F(life, refcnt_returns_after_close_and_unmap)
{
	struct knitk_geometry g;

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->a, &g));
	EXPECT_LT(self->before, refcnt(_metadata));

	ASSERT_EQ(0, close(self->a.fd));
	self->a.fd = -1;
	EXPECT_LT(self->before, refcnt(_metadata));
	/* The mappings still reach the knot. */
	EXPECT_EQ(KNITK_MAGIC, self->a.ctl->magic);
	self->a.data[0] = 0x42;
	EXPECT_EQ(0x42, self->a.data[0]);

	knot_unmap(&self->a);
	EXPECT_EQ(self->before, refcnt(_metadata));
}

/* An attached endpoint keeps the knot, and its memory, after the creator. */
TEST_F(life, knot_outlives_creator)
{
	struct knitk_geometry g;
	struct knot c = { .fd = -1 };

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->a, &g));
	self->b.fd = knitk_open();
	ASSERT_LE(0, self->b.fd);
	ASSERT_EQ(0, knitk_attach(self->b.fd, self->a.fd, &self->b.layout));
	self->a.data[7] = 0x17;

	knot_close(&self->a);
	ASSERT_EQ(0, knot_map(&self->b));
	EXPECT_EQ(KNITK_MAGIC, self->b.ctl->magic);
	EXPECT_EQ(0x17, self->b.data[7]);

	/* And it is still a source for new endpoints. */
	c.fd = knitk_open();
	ASSERT_LE(0, c.fd);
	ASSERT_EQ(0, knitk_attach(c.fd, self->b.fd, &c.layout));
	ASSERT_EQ(0, knot_map(&c));
	EXPECT_EQ(0x17, c.data[7]);
	knot_close(&c);

	EXPECT_LT(self->before, refcnt(_metadata));
	knot_close(&self->b);
	EXPECT_EQ(self->before, refcnt(_metadata));
}

/* A knot made after another was freed starts from zeroed memory. */
TEST_F(life, new_knot_after_free_is_zeroed)
{
	struct knitk_geometry g;
	size_t i, len, nonzero = 0;

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->a, &g));
	len = self->a.layout.size - self->a.layout.control_size;
	memset(self->a.data, 0xee, len);
	knot_close(&self->a);
	EXPECT_EQ(self->before, refcnt(_metadata));

	ASSERT_EQ(0, knot_make(&self->b, &g));
	for (i = 0; i < len; i++)
		nonzero += self->b.data[i] != 0;
	EXPECT_EQ(0UL, nonzero);
	EXPECT_EQ(0U, self->b.ctl->death_seq);
}

TEST_HARNESS_MAIN
