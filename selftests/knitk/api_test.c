// SPDX-License-Identifier: GPL-2.0
/*
 * knitk API surface: the KNITK_IOC_API handshake, unknown commands, ioctls
 * on an endpoint without a knot, and KNITK_IOC_CREATE's validation of every
 * geometry field and the layout it returns.
 */
#include <stddef.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_test.h"

#define KNOWN_FEATURES	(KNITK_FEATURE_STEAL | KNITK_FEATURE_PEER_DEATH | \
			 KNITK_FEATURE_STATS | KNITK_FEATURE_POLL | \
			 KNITK_FEATURE_KICK | KNITK_FEATURE_SPIN | \
			 KNITK_FEATURE_NOTIFY_WAIT | KNITK_FEATURE_URING_CMD | \
			 KNITK_FEATURE_HUGE | KNITK_FEATURE_WORD_WAIT)

static __u64 ioctl_bit(unsigned long cmd)
{
	return 1ULL << _IOC_NR(cmd);
}

/* A new bare endpoint (the test skips without the device). */
static int open_raw(struct __test_metadata *_metadata)
{
	int fd;

	KNITK_REQUIRE_DEV();
	fd = knitk_open_raw();
	ASSERT_LE(0, fd);
	return fd;
}

/* Each handshake of @bad refused, one after another on one endpoint. */
static void expect_api_einval(struct __test_metadata *_metadata,
			      const struct knitk_api *bad, unsigned int n)
{
	int fd = open_raw(_metadata);
	unsigned int i;

	for (i = 0; i < n; i++) {
		struct knitk_api api = bad[i];

		EXPECT_EQ(-EINVAL, knitk_ioctl(fd, KNITK_IOC_API, &api))
			TH_LOG("api %#llx, features %#llx accepted",
			       (unsigned long long)bad[i].api,
			       (unsigned long long)bad[i].features);
	}
	close(fd);
}

/* A new endpoint that created a knot of the small geometry, not joined. */
static int open_created(struct __test_metadata *_metadata)
{
	struct knitk_geometry g;
	int fd = knitk_open();

	ASSERT_LE(0, fd);
	knitk_geom_small(&g);
	ASSERT_EQ(0, knitk_create(fd, &g, NULL));
	return fd;
}

TEST(api_handshake_reports_features_and_ioctls)
{
	struct knitk_api api = { .api = KNITK_API };
	__u64 ioctls = ioctl_bit(KNITK_IOC_API) | ioctl_bit(KNITK_IOC_CREATE) |
		       ioctl_bit(KNITK_IOC_ATTACH) | ioctl_bit(KNITK_IOC_JOIN) |
		       ioctl_bit(KNITK_IOC_WAIT) | ioctl_bit(KNITK_IOC_NOTIFY) |
		       ioctl_bit(KNITK_IOC_STATS) |
		       ioctl_bit(KNITK_IOC_NOTIFY_WAIT) |
		       ioctl_bit(KNITK_IOC_WORD_WAIT) | ioctl_bit(KNITK_IOC_WORD_WAKE);
	int fd = open_raw(_metadata);

	ASSERT_EQ(0, knitk_ioctl(fd, KNITK_IOC_API, &api));
	EXPECT_EQ(KNITK_API, api.api);
	EXPECT_EQ(KNOWN_FEATURES, api.features);
	EXPECT_EQ(ioctls, api.ioctls);
	close(fd);
}

TEST(api_known_features_requestable)
{
	struct knitk_api api = { .api = KNITK_API, .features = KNOWN_FEATURES };
	int fd = open_raw(_metadata);

	ASSERT_EQ(0, knitk_ioctl(fd, KNITK_IOC_API, &api));
	EXPECT_EQ(KNOWN_FEATURES, api.features);
	close(fd);
}

TEST(api_version_mismatch_einval)
{
	static const struct knitk_api bad[] = {
		{ .api = 0 }, { .api = KNITK_API + 1 }, { .api = 1ULL << 32 },
		{ .api = ~0ULL },
	};

	expect_api_einval(_metadata, bad, sizeof(bad) / sizeof(bad[0]));
}

TEST(api_unknown_feature_bits_einval)
{
	static const struct knitk_api bad[] = {
		{ .api = KNITK_API, .features = 1ULL << 12 },
		{ .api = KNITK_API, .features = 1ULL << 31 },
		{ .api = KNITK_API, .features = 1ULL << 63 },
		{ .api = KNITK_API, .features = KNOWN_FEATURES | (1ULL << 13) },
	};

	expect_api_einval(_metadata, bad, sizeof(bad) / sizeof(bad[0]));
}

/* A command is its number, direction, size and type: change any, unknown. */
TEST(unknown_ioctl_enotty)
{
	static const unsigned long bad[] = {
		_IOWR(KNITK_IOC_MAGIC, 0x07, struct knitk_api),
		_IOWR(KNITK_IOC_MAGIC, 0x3f, __u64),
		_IO(KNITK_IOC_MAGIC, 0x00),
		_IOWR(KNITK_IOC_MAGIC, 0x00, __u32),
		_IOR(KNITK_IOC_MAGIC, 0x00, struct knitk_api),
		_IOWR(KNITK_IOC_MAGIC + 1, 0x00, struct knitk_api),
		_IOWR(KNITK_IOC_MAGIC, 0x01, struct knitk_geometry),
		TCGETS,
	};
	struct knitk_geometry g;
	unsigned char buf[512];
	unsigned int i, pass;
	int fd;

	KNITK_REQUIRE_DEV();
	fd = knitk_open();
	ASSERT_LE(0, fd);
	/* Same answer before and once the endpoint has a knot. */
	for (pass = 0; pass < 2; pass++) {
		if (pass) {
			knitk_geom_small(&g);
			ASSERT_EQ(0, knitk_create(fd, &g, NULL));
		}
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			memset(buf, 0, sizeof(buf));
			EXPECT_EQ(-ENOTTY, knitk_ioctl(fd, bad[i], buf))
				TH_LOG("cmd %#lx not -ENOTTY %s create", bad[i],
				       pass ? "after" : "before");
		}
	}
	close(fd);
}

TEST(join_before_create_enotconn)
{
	int fd;

	KNITK_REQUIRE_DEV();
	fd = knitk_open();
	ASSERT_LE(0, fd);
	EXPECT_EQ(-ENOTCONN, knitk_join(fd, KNITK_ROLE_HOST, 0, NULL));
	EXPECT_EQ(-ENOTCONN, knitk_join(fd, KNITK_ROLE_WORKER, 0, NULL));
	close(fd);
}

TEST(wait_before_create_enotconn)
{
	int fd;

	KNITK_REQUIRE_DEV();
	fd = knitk_open();
	ASSERT_LE(0, fd);
	EXPECT_EQ(-ENOTCONN, knitk_wait(fd, 0, 0));
	close(fd);
}

TEST(notify_before_create_enotconn)
{
	__u64 woken = 0;
	int fd;

	KNITK_REQUIRE_DEV();
	fd = knitk_open();
	ASSERT_LE(0, fd);
	EXPECT_EQ(-ENOTCONN, knitk_notify(fd, 1, &woken));
	close(fd);
}

TEST(stats_before_create_enotconn)
{
	struct knitk_doorbell_stats st;
	int fd;

	KNITK_REQUIRE_DEV();
	fd = knitk_open();
	ASSERT_LE(0, fd);
	EXPECT_EQ(-ENOTCONN, knitk_stats(fd, KNITK_DOORBELL_HOST, &st));
	close(fd);
}

/* Joined is not the same as attached: a created endpoint still waits -ENOTCONN. */
TEST(wait_before_join_enotconn)
{
	int fd;

	KNITK_REQUIRE_DEV();
	fd = open_created(_metadata);
	EXPECT_EQ(-ENOTCONN, knitk_wait(fd, 0, 0));
	close(fd);
}

TEST(create_twice_ebusy)
{
	struct knitk_geometry g;
	int fd;

	KNITK_REQUIRE_DEV();
	fd = open_created(_metadata);
	knitk_geom_small(&g);
	EXPECT_EQ(-EBUSY, knitk_create(fd, &g, NULL));
	close(fd);
}

/*
 * One bad field per variant, on top of a geometry that is shown valid in the
 * same test, so the rejection can only come from that field.
 */
FIXTURE(create_invalid) {
	int good_fd, bad_fd;
};

FIXTURE_VARIANT(create_invalid) {
	size_t off;	/* offset of the bad field in struct knitk_geometry */
	size_t size;	/* its size, 4 or 8 */
	__u64 value;
};

#define BAD(name, field, val)						\
	FIXTURE_VARIANT_ADD(create_invalid, name) {			\
		.off = offsetof(struct knitk_geometry, field),		\
		.size = sizeof(((struct knitk_geometry *)0)->field),	\
		.value = (val),						\
	}

BAD(flags_bit2, flags, 1U << 2);
BAD(flags_bit31, flags, 1U << 31);
BAD(workers_zero, nr_workers, 0);
BAD(workers_over_max, nr_workers, KNITK_MAX_WORKERS + 1);
BAD(submitters_zero, nr_submitters, 0);
BAD(submitters_over_max, nr_submitters, KNITK_MAX_SUBMITTERS + 1);
BAD(lanes_zero, lanes, 0);
BAD(lanes_32, lanes, 32);
BAD(lanes_128, lanes, 128);
BAD(inline_not_cacheline_multiple, inline_bytes, KNITK_CACHELINE / 2);
BAD(inline_over_max, inline_bytes, KNITK_MAX_INLINE_BYTES + KNITK_CACHELINE);
BAD(abort_not_aligned, abort_bits, KNITK_ABORT_ALIGN + 1);
BAD(abort_over_max, abort_bits, KNITK_MAX_ABORT_BITS + KNITK_ABORT_ALIGN);
BAD(arena_not_aligned, arena_bytes, KNITK_ARENA_ALIGN / 2);
BAD(arena_over_max, arena_bytes, KNITK_MAX_ARENA_BYTES + KNITK_ARENA_ALIGN);
BAD(region_lanes_without_steal, region_lanes, 16);
BAD(region_lanes_1_without_steal, region_lanes, 1);
BAD(reserved0, reserved0, 1);
BAD(reserved1, reserved[0], 1);
BAD(reserved2, reserved[1], 1ULL << 40);
BAD(reserved3, reserved[2], 1ULL << 63);

FIXTURE_SETUP(create_invalid)
{
	KNITK_REQUIRE_DEV();
	self->good_fd = knitk_open();
	ASSERT_LE(0, self->good_fd);
	self->bad_fd = knitk_open();
	ASSERT_LE(0, self->bad_fd);
}

FIXTURE_TEARDOWN(create_invalid)
{
	close(self->good_fd);
	close(self->bad_fd);
}

TEST_F(create_invalid, rejected_einval)
{
	struct knitk_geometry g;
	__u32 v32 = (__u32)variant->value;
	struct knitk_layout l;

	knitk_geom_small(&g);
	ASSERT_EQ(0, knitk_create(self->good_fd, &g, NULL));
	if (variant->size == sizeof(v32))
		memcpy((char *)&g + variant->off, &v32, sizeof(v32));
	else
		memcpy((char *)&g + variant->off, &variant->value,
		       sizeof(variant->value));
	memset(&l, 0xa5, sizeof(l));
	EXPECT_EQ(-EINVAL, knitk_create(self->bad_fd, &g, &l))
		TH_LOG("geometry field at offset %zu = %#llx accepted",
		       variant->off, (unsigned long long)variant->value);
	/* A rejected create leaves the endpoint free to create. */
	knitk_geom_small(&g);
	EXPECT_EQ(0, knitk_create(self->bad_fd, &g, NULL));
}

/*
 * A stealing knot's region size: 0 or a power of two g with 64 / g >=
 * workers + 1, anything else -EINVAL.  The knot records it resolved (0:
 * the largest such g), and that is what CREATE returns in its geometry
 * and what the control page shows to the creator and to an endpoint
 * that attaches later.
 */
static int create_steal(int fd, __u32 workers, __u32 region_lanes,
			struct knitk_create *c)
{
	memset(c, 0, sizeof(*c));
	knitk_geom(&c->geometry, KNITK_GEOM_STEAL, workers, 1, 64, 0, 0);
	c->geometry.region_lanes = region_lanes;
	return knitk_ioctl(fd, KNITK_IOC_CREATE, c);
}

TEST(create_steal_region_lanes)
{
	static const struct { __u32 workers, asked, got; } ok[] = {
		{ 2, 0, 16 }, { 2, 1, 1 }, { 2, 8, 8 }, { 2, 16, 16 },
		{ 1, 0, 32 }, { 1, 32, 32 }, { 3, 0, 16 }, { 4, 0, 8 },
		{ KNITK_MAX_WORKERS, 0, 1 }, { KNITK_MAX_WORKERS, 1, 1 },
	};
	static const struct { __u32 workers, asked; } bad[] = {
		{ 2, 3 }, { 2, 32 }, { 2, 64 }, { 2, 128 }, { 1, 64 },
		{ 4, 16 }, { KNITK_MAX_WORKERS, 2 }, { 2, 1U << 31 },
		{ 2, ~0U },
	};
	struct knitk_create c;
	unsigned int i;
	struct knot k;
	int fd, src;

	KNITK_REQUIRE_DEV();
	for (i = 0; i < ARRAY_SIZE(ok); i++) {
		fd = knitk_open();
		ASSERT_LE(0, fd);
		ASSERT_EQ(0, create_steal(fd, ok[i].workers, ok[i].asked, &c))
			TH_LOG("workers %u region_lanes %u", ok[i].workers, ok[i].asked);
		EXPECT_EQ(ok[i].got, c.geometry.region_lanes);
		EXPECT_EQ(ok[i].workers, c.geometry.nr_workers);
		k.fd = fd;
		k.layout = c.layout;
		ASSERT_EQ(0, knot_map(&k));
		EXPECT_EQ(ok[i].got, k.ctl->geometry.region_lanes);
		EXPECT_EQ(0, memcmp(&k.ctl->geometry, &c.geometry, sizeof(c.geometry)));
		knot_unmap(&k);

		/* An endpoint attached later reads the same size. */
		src = fd;
		fd = knitk_open();
		ASSERT_LE(0, fd);
		ASSERT_EQ(0, knitk_attach(fd, src, &k.layout));
		close(src);
		k.fd = fd;
		ASSERT_EQ(0, knot_map(&k));
		EXPECT_EQ(ok[i].got, k.ctl->geometry.region_lanes);
		knot_close(&k);
	}
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		fd = knitk_open();
		ASSERT_LE(0, fd);
		EXPECT_EQ(-EINVAL, create_steal(fd, bad[i].workers, bad[i].asked, &c))
			TH_LOG("workers %u region_lanes %u accepted",
			       bad[i].workers, bad[i].asked);
		/* A rejected create leaves the endpoint free to create. */
		EXPECT_EQ(0, create_steal(fd, bad[i].workers, 0, &c));
		close(fd);
	}
}

/* Geometries at the edges of every limit and region rounding. */
FIXTURE(layout) {
	int fd;
};

FIXTURE_VARIANT(layout) {
	__u32 flags, workers, submitters, inline_bytes, abort_bits;
	__u64 arena_bytes;
};

FIXTURE_VARIANT_ADD(layout, small) {
	.flags = 0, .workers = 2, .submitters = 1, .inline_bytes = 64,
	.abort_bits = 64, .arena_bytes = 4096,
};

FIXTURE_VARIANT_ADD(layout, all_zero_sizes) {
	.flags = 0, .workers = 1, .submitters = 1, .inline_bytes = 0,
	.abort_bits = 0, .arena_bytes = 0,
};

FIXTURE_VARIANT_ADD(layout, private_multi_submitter) {
	.flags = 0, .workers = 4, .submitters = 3, .inline_bytes = 256,
	.abort_bits = 65536, .arena_bytes = 16384,
};

FIXTURE_VARIANT_ADD(layout, max_inline) {
	.flags = 0, .workers = 1, .submitters = 1,
	.inline_bytes = KNITK_MAX_INLINE_BYTES, .abort_bits = 0,
	.arena_bytes = 0,
};

FIXTURE_VARIANT_ADD(layout, steal) {
	.flags = KNITK_GEOM_STEAL, .workers = 3, .submitters = 2,
	.inline_bytes = 128, .abort_bits = 128, .arena_bytes = 8192,
};

FIXTURE_VARIANT_ADD(layout, steal_max_workers) {
	.flags = KNITK_GEOM_STEAL, .workers = KNITK_MAX_WORKERS,
	.submitters = 1, .inline_bytes = 0, .abort_bits = 64,
	.arena_bytes = 0,
};

/* Every request and return mailbox the limits allow: 64 * 63 + 63. */
FIXTURE_VARIANT_ADD(layout, private_max_mailboxes) {
	.flags = 0, .workers = KNITK_MAX_WORKERS,
	.submitters = KNITK_MAX_SUBMITTERS, .inline_bytes = 0,
	.abort_bits = 64, .arena_bytes = 0,
};

FIXTURE_VARIANT_ADD(layout, max_abort_bits) {
	.flags = 0, .workers = 1, .submitters = 1, .inline_bytes = 64,
	.abort_bits = KNITK_MAX_ABORT_BITS, .arena_bytes = 4096,
};

/* 80 steal lines: the steal region spills into a second page. */
FIXTURE_VARIANT_ADD(layout, steal_two_pages) {
	.flags = KNITK_GEOM_STEAL, .workers = 40, .submitters = 2,
	.inline_bytes = 64, .abort_bits = 0, .arena_bytes = 4096,
};

FIXTURE_SETUP(layout)
{
	KNITK_REQUIRE_DEV();
	self->fd = knitk_open();
	ASSERT_LE(0, self->fd);
}

FIXTURE_TEARDOWN(layout)
{
	close(self->fd);
}

TEST_F(layout, matches_formula)
{
	struct knitk_geometry g;
	struct knitk_layout l, want;
	unsigned int i;

	knitk_geom(&g, variant->flags, variant->workers, variant->submitters,
		   variant->inline_bytes, variant->abort_bits,
		   variant->arena_bytes);
	ASSERT_EQ(0, knitk_layout_compute(&g, &want));
	memset(&l, 0xa5, sizeof(l));
	ASSERT_EQ(0, knitk_create(self->fd, &g, &l));

	EXPECT_EQ(want.size, l.size);
	EXPECT_EQ(want.control_size, l.control_size);
	EXPECT_EQ(want.doorbell_off, l.doorbell_off);
	EXPECT_EQ(want.doorbell_stride, l.doorbell_stride);
	EXPECT_EQ(want.nr_doorbells, l.nr_doorbells);
	EXPECT_EQ(want.abort_off, l.abort_off);
	EXPECT_EQ(want.abort_size, l.abort_size);
	EXPECT_EQ(want.steal_off, l.steal_off);
	EXPECT_EQ(want.steal_stride, l.steal_stride);
	EXPECT_EQ(want.nr_steal, l.nr_steal);
	EXPECT_EQ(want.mailbox_off, l.mailbox_off);
	EXPECT_EQ(want.mailbox_stride, l.mailbox_stride);
	EXPECT_EQ(want.nr_mailboxes, l.nr_mailboxes);
	EXPECT_EQ(want.nr_request, l.nr_request);
	EXPECT_EQ(want.lane_off, l.lane_off);
	EXPECT_EQ(want.lane_stride, l.lane_stride);
	EXPECT_EQ(want.arena_off, l.arena_off);
	EXPECT_EQ(want.arena_size, l.arena_size);
	for (i = 0; i < 4; i++)
		EXPECT_EQ(0ULL, l.reserved[i]);
	/* The size is whole pages: mmap can cover it exactly. */
	EXPECT_EQ(0ULL, l.size % KNITK_PAGE_BYTES);
	EXPECT_EQ(0ULL, l.mailbox_stride % KNITK_PAGE_BYTES);
}

TEST_HARNESS_MAIN
