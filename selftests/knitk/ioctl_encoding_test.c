// SPDX-License-Identifier: GPL-2.0
/*
 * Each request as the uAPI encodes it, and only that: KNITK_IOC_STATS at
 * every size from 0 to the largest the command can encode (below
 * KNITK_STATS_SIZE_VER0 refused and nothing written, from it on the
 * counters it knows, zeros past them, nothing past the size), and
 * knitk_endpoint_doorbell_stats at every size a program may pass (below
 * the first version's counters -EINVAL, up to KNITK_SIZED_MAX exactly the
 * size, past it -E2BIG and nothing written, never a buffer taken as that
 * big); every other request with its number but another size, direction
 * or type, and every other number of the magic, is -ENOTTY and does
 * nothing.  Written from the uAPI header and the man pages alone.
 */
#define _GNU_SOURCE
#include "knitk.h"
#include "knitk_fixtures.h"

#define SENTINEL	0xa5

/* The first byte of @buf from @from on, below @to, that is not @byte, or @to. */
static size_t first_not(const unsigned char *buf, size_t from, size_t to,
			unsigned char byte)
{
	while (from < to && buf[from] == byte)
		from++;
	return from;
}

/*
 * KNITK_IOC_STATS with every size from 0 to past the counters, a few odd
 * large ones and the largest the command can encode: below
 * KNITK_STATS_SIZE_VER0 a clean error that writes nothing, from it on the
 * counters it knows up to the size, zeros past them, nothing past the
 * size.  Flags, a bad doorbell and a bad pointer are refused at any size.
 */
TEST(stats_ioctl_every_size)
{
	static const unsigned int big[] = { 89, 95, 96, 97, 127, 128, 255, 4095,
					    4096, 4097, 8191, 16383 };
	static unsigned char buf[16384 + 64];
	struct knot k;
	struct knitk_geometry g;
	unsigned int size, i, j;
	int worker, ret;

	KNITK_REQUIRE_DEV();
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&k, &g));
	ASSERT_EQ(0, knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL));
	worker = knot_endpoint(&k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, worker);
	/* Something to count: a mismatch on worker 0's doorbell. */
	EXPECT_EQ(-EAGAIN, knitk_wait(worker, knitk_doorbell_seq(knot_doorbell(&k, 0)) + 1,
				      KNITK_WAIT_FOREVER));

	for (size = 0; size < 200 + sizeof(big) / sizeof(big[0]); size++) {
		unsigned int sz = size < 200 ? size : big[size - 200];
		struct knitk_stats *s = (struct knitk_stats *)buf;

		memset(buf, SENTINEL, sizeof(buf));
		s->doorbell = 0;
		s->flags = 0;
		ret = knitk_ioctl(worker, _IOC(_IOC_READ | _IOC_WRITE, KNITK_IOC_MAGIC,
					       0x06, sz), buf);
		if (sz < KNITK_STATS_SIZE_VER0) {
			if (ret != -EINVAL && ret != -ENOTTY)
				TH_LOG("size %u: %d", sz, ret);
			EXPECT_TRUE(ret == -EINVAL || ret == -ENOTTY);
			j = first_not(buf, 8, sizeof(buf), SENTINEL);
			EXPECT_EQ(sizeof(buf), j);
			continue;
		}
		if (ret)
			TH_LOG("size %u: %d", sz, ret);
		ASSERT_EQ(0, ret);
		EXPECT_EQ(0U, s->doorbell);
		EXPECT_EQ(1ULL, s->stats.mismatches);
		/* Zeros past the counters up to the size, then untouched. */
		j = first_not(buf, KNITK_STATS_SIZE_VER1, sz, 0);
		if (j < sz)
			TH_LOG("size %u: byte %u is %#x", sz, j, buf[j]);
		EXPECT_EQ(sz > KNITK_STATS_SIZE_VER1 ? sz : KNITK_STATS_SIZE_VER1,
			  j > sz ? j : (j < KNITK_STATS_SIZE_VER1 ? KNITK_STATS_SIZE_VER1 : j));
		j = first_not(buf, sz, sizeof(buf), SENTINEL);
		if (j < sizeof(buf))
			TH_LOG("size %u: byte %u past the size written", sz, j);
		EXPECT_EQ(sizeof(buf), j);
	}

	/* Refused at every size: flags, a doorbell outside the geometry. */
	for (i = 0; i < 3; i++) {
		unsigned int sz = i == 0 ? KNITK_STATS_SIZE_VER0 :
				  i == 1 ? KNITK_STATS_SIZE_VER1 : 4096;
		struct knitk_stats *s = (struct knitk_stats *)buf;
		unsigned long cmd = _IOC(_IOC_READ | _IOC_WRITE, KNITK_IOC_MAGIC, 0x06, sz);

		memset(buf, 0, sizeof(buf));
		s->flags = 1;
		EXPECT_EQ(-EINVAL, knitk_ioctl(worker, cmd, buf));
		s->flags = 0;
		s->doorbell = 2;	/* two workers: 0 and 1 */
		EXPECT_EQ(-EINVAL, knitk_ioctl(worker, cmd, buf));
		s->doorbell = 64;
		EXPECT_EQ(-EINVAL, knitk_ioctl(worker, cmd, buf));
		EXPECT_EQ(-EFAULT, knitk_ioctl(worker, cmd, (void *)8));
	}
	/* The other directions of the same number are other commands. */
	EXPECT_EQ(-ENOTTY, knitk_ioctl(worker, _IOR(KNITK_IOC_MAGIC, 0x06,
						    struct knitk_stats), buf));
	EXPECT_EQ(-ENOTTY, knitk_ioctl(worker, _IOW(KNITK_IOC_MAGIC, 0x06,
						    struct knitk_stats), buf));
	EXPECT_EQ(-ENOTTY, knitk_ioctl(worker, _IO(KNITK_IOC_MAGIC, 0x06), buf));
	close(worker);
	knot_close(&k);
}

/*
 * knitk_endpoint_doorbell_stats at a program's sizes: below the first
 * version's counters -EINVAL and nothing written; from it on up to
 * KNITK_SIZED_MAX exactly @size bytes, the unknown tail zero; past it
 * (past what one ioctl can carry, too) -E2BIG and nothing written.
 */
TEST(doorbell_stats_every_size)
{
	static const size_t sizes[] = { 72, 73, 79, 80, 81, 88, 200, 4095,
					KNITK_SIZED_MAX };
	/* Past any header's struct (as for the sized structs): refused. */
	static const size_t too_big[] = { KNITK_SIZED_MAX + 1, 16375, 16376,
					  16377, 20000, 65536 };
	static unsigned char buf[65536 + 64];
	struct knitk_geometry g;
	struct knitk_endpoint *ep;
	unsigned int i;
	size_t j;
	int ret;

	KNITK_REQUIRE_DEV();
	knitk_geom_small(&g);
	ASSERT_EQ(0, knitk_endpoint_create(&g, KNITK_KNOT_KMOD, &ep));
	ASSERT_LE(1, knitk_endpoint_join(ep, KNITK_ROLE_HOST, 0));
	for (i = 0; i < 72; i++) {
		memset(buf, SENTINEL, 128);
		EXPECT_EQ(-EINVAL, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf, i));
		j = first_not(buf, 0, 128, SENTINEL);
		EXPECT_EQ(128U, j);
	}
	EXPECT_GT(0, knitk_endpoint_doorbell_stats(ep, HOST, NULL, 80));
	EXPECT_EQ(-EINVAL, knitk_endpoint_doorbell_stats(ep, 2, (void *)buf, 80));
	for (i = 0; i < sizeof(too_big) / sizeof(too_big[0]); i++) {
		memset(buf, SENTINEL, sizeof(buf));
		EXPECT_EQ(-E2BIG, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf,
								too_big[i]));
		j = first_not(buf, 0, sizeof(buf), SENTINEL);
		EXPECT_EQ(sizeof(buf), j);
	}
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t sz = sizes[i];

		memset(buf, SENTINEL, sizeof(buf));
		ret = knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf, sz);
		if (ret)
			TH_LOG("size %zu: %d", sz, ret);
		EXPECT_EQ(0, ret);
		if (ret)
			continue;
		j = first_not(buf, 80, sz, 0);
		if (j < sz)
			TH_LOG("size %zu: byte %zu is %#x", sz, j, buf[j]);
		EXPECT_GE(j, sz);
		j = first_not(buf, sz, sizeof(buf), SENTINEL);
		if (j < sizeof(buf))
			TH_LOG("size %zu: byte %zu past the size written", sz, j);
		EXPECT_EQ(sizeof(buf), j);
	}
	knitk_endpoint_destroy(ep);
}

static struct knitk_endpoint *host_of(struct __test_metadata *_metadata,
				      unsigned int workers)
{
	struct knitk_geometry g = {
		.nr_workers = workers, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64, .arena_bytes = 4096,
	};
	struct knitk_endpoint *ep = NULL;

	EXPECT_EQ(0, knitk_endpoint_create(&g, KNITK_KNOT_KMOD, &ep));
	if (ep)
		EXPECT_EQ(1, knitk_endpoint_join(ep, KNITK_ROLE_HOST, 0));
	return ep;
}

/*
 * The size is sizeof the caller's struct: a size no header can have
 * (past KNITK_SIZED_MAX, as for the sized structs) is refused, never
 * taken as a buffer that big; the largest legal one is filled and zeroed.
 */
TEST(doorbell_stats_sizes_past_any_header)
{
	static unsigned char buf[KNITK_SIZED_MAX + 64];
	struct knitk_endpoint *ep;
	size_t i;

	KNITK_REQUIRE_DEV();
	ep = host_of(_metadata, 2);
	ASSERT_NE(NULL, ep);
	memset(buf, SENTINEL, sizeof(buf));
	EXPECT_EQ(-E2BIG, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf,
							KNITK_SIZED_MAX + 1));
	EXPECT_EQ(-E2BIG, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf, SIZE_MAX));
	EXPECT_EQ(-E2BIG, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf,
							(size_t)UINT32_MAX + 1));
	i = first_not(buf, 0, sizeof(buf), SENTINEL);
	EXPECT_EQ(sizeof(buf), i);
	EXPECT_EQ(0, knitk_endpoint_doorbell_stats(ep, HOST, (void *)buf, KNITK_SIZED_MAX));
	i = first_not(buf, sizeof(struct knitk_doorbell_stats), KNITK_SIZED_MAX, 0);
	EXPECT_EQ(KNITK_SIZED_MAX, i);
	EXPECT_EQ(SENTINEL, buf[KNITK_SIZED_MAX]);
	/* Doorbells beyond the geometry, or no doorbell at all. */
	EXPECT_EQ(-EINVAL, knitk_endpoint_doorbell_stats(ep, 2, (void *)buf, 88));
	EXPECT_EQ(-EINVAL, knitk_endpoint_doorbell_stats(ep, 64, (void *)buf, 88));
	knitk_endpoint_destroy(ep);
}

struct cmd {
	const char *name;
	unsigned long cmd;
};

/*
 * The arguments a lenient dispatcher would act on at once, without
 * sleeping: a mismatched seq, no doorbell, a joined endpoint's JOIN.
 */
static void lenient_args(void *buf, size_t len, __u32 seq)
{
	struct knitk_wait *w = buf;

	memset(buf, 0, len);
	/* A wait's expected seq, or the high half of a notify's mask. */
	w->expected = seq + 1;
	w->deadline_ns = 1;
}

/*
 * Every request with its number but another size, direction or type is
 * an unknown request (-ENOTTY), and so is every other number of the
 * magic, the io_uring command's included; the handshake names exactly the
 * ten requests.
 */
TEST_F(k7, ioctl_misencoded_requests_enotty)
{
	static const struct cmd cmds[] = {
		{ "API", KNITK_IOC_API }, { "CREATE", KNITK_IOC_CREATE },
		{ "ATTACH", KNITK_IOC_ATTACH }, { "JOIN", KNITK_IOC_JOIN },
		{ "WAIT", KNITK_IOC_WAIT }, { "NOTIFY", KNITK_IOC_NOTIFY },
		{ "STATS", KNITK_IOC_STATS },
		{ "NOTIFY_WAIT", KNITK_IOC_NOTIFY_WAIT },
		{ "WORD_WAIT", KNITK_IOC_WORD_WAIT },
		{ "WORD_WAKE", KNITK_IOC_WORD_WAKE },
	};
	struct knitk_doorbell *db = knot_doorbell(&self->k, 0);
	struct knitk_api api = { .api = KNITK_API };
	unsigned long long buf[512];
	unsigned int i, dir, nr;
	int delta;

	ASSERT_EQ(0, knitk_ioctl(self->w0, KNITK_IOC_API, &api));
	EXPECT_EQ(0x3ffULL, api.ioctls);
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		unsigned long c = cmds[i].cmd;
		unsigned int size = _IOC_SIZE(c);

		for (dir = 0; dir < 4; dir++) {
			if (dir == _IOC_DIR(c))
				continue;
			lenient_args(buf, sizeof(buf), knitk_doorbell_seq(db));
			EXPECT_EQ(-ENOTTY, knitk_ioctl(self->w0,
				  _IOC(dir, KNITK_IOC_MAGIC, _IOC_NR(c), size), buf))
				TH_LOG("%s with direction %u", cmds[i].name, dir);
		}
		lenient_args(buf, sizeof(buf), knitk_doorbell_seq(db));
		EXPECT_EQ(-ENOTTY, knitk_ioctl(self->w0,
			  _IOC(_IOC_DIR(c), KNITK_IOC_MAGIC + 1, _IOC_NR(c), size), buf))
			TH_LOG("%s with another type", cmds[i].name);
		/* STATS takes every size from VER0 on: its own test. */
		if (c == KNITK_IOC_STATS)
			continue;
		for (delta = -8; delta <= 8; delta += 4) {
			if (!delta || (int)size + delta <= 0)
				continue;
			lenient_args(buf, sizeof(buf), knitk_doorbell_seq(db));
			EXPECT_EQ(-ENOTTY, knitk_ioctl(self->w0,
				  _IOC(_IOC_DIR(c), KNITK_IOC_MAGIC, _IOC_NR(c),
				       size + delta), buf))
				TH_LOG("%s with size %u", cmds[i].name, size + delta);
		}
	}
	for (nr = 10; nr < 256; nr++) {
		lenient_args(buf, sizeof(buf), knitk_doorbell_seq(db));
		EXPECT_EQ(-ENOTTY, knitk_ioctl(self->w0,
			  _IOWR(KNITK_IOC_MAGIC, nr, struct knitk_notify_wait), buf))
			TH_LOG("request number %u", nr);
	}
	lenient_args(buf, sizeof(buf), knitk_doorbell_seq(db));
	EXPECT_EQ(-ENOTTY, knitk_ioctl(self->w0, KNITK_URING_CMD_WAIT, buf));
	/* Nothing above took a role or rang a doorbell. */
	EXPECT_EQ(1U, self->k.ctl->generation[0]);
	EXPECT_EQ(0U, self->k.ctl->generation[1]);
	EXPECT_EQ((1ULL << 0) | HOST_BIT, self->k.ctl->live);
}

TEST_HARNESS_MAIN
