// SPDX-License-Identifier: GPL-2.0
/*
 * libknitk's knitk_layout_compute() against the module: for many
 * geometries, KNITK_IOC_CREATE must accept exactly the geometries the
 * library accepts and return exactly the layout the library computes;
 * and the region size a stealing knot records, read back through the
 * library by the creator and by an endpoint that attaches.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <knitk.h>

#include "knitk_harness.h"

#define MAX_KNOT_BYTES "/sys/module/knitk/parameters/max_knot_bytes"

static unsigned long long max_knot_bytes(void)
{
	unsigned long long v = 256ULL << 20;
	FILE *f = fopen(MAX_KNOT_BYTES, "r");

	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 256ULL << 20;
		fclose(f);
	}
	return v;
}

/* CREATE on a fresh endpoint: 0 or -errno, the layout in *@l. */
static int module_create(const struct knitk_geometry *g, struct knitk_layout *l)
{
	struct knitk_api api = { .api = KNITK_API };
	struct knitk_create c;
	int fd, ret = 0;

	fd = open("/dev/knitk", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, KNITK_IOC_API, &api) < 0) {
		ret = -errno;
		goto out;
	}
	memset(&c, 0, sizeof(c));
	c.geometry = *g;
	if (ioctl(fd, KNITK_IOC_CREATE, &c) < 0)
		ret = -errno;
	*l = c.layout;
out:
	close(fd);
	return ret;
}

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Compare one geometry; returns 1 when library and module agree. */
static int agree(struct __test_metadata *_metadata,
		 const struct knitk_geometry *g, unsigned long long cap)
{
	struct knitk_layout lib, mod;
	int lret, mret;

	memset(&lib, 0, sizeof(lib));
	lret = knitk_layout_compute(g, &lib);
	mret = module_create(g, &mod);
	if (lret == 0 && lib.size > cap) {
		EXPECT_EQ(-E2BIG, mret);
		return mret == -E2BIG;
	}
	EXPECT_EQ(lret, mret);
	if (lret != mret)
		goto bad;
	if (lret == 0) {
		EXPECT_EQ(0, memcmp(&lib, &mod, sizeof(lib)));
		if (memcmp(&lib, &mod, sizeof(lib)))
			goto bad;
	}
	return 1;
bad:
	ksft_print_msg("geometry flags %u workers %u submitters %u lanes %u "
		       "inline %u abort %u arena %llu region %u: library %d, "
		       "module %d\n",
		       g->flags, g->nr_workers, g->nr_submitters, g->lanes,
		       g->inline_bytes, g->abort_bits,
		       (unsigned long long)g->arena_bytes, g->region_lanes,
		       lret, mret);
	return 0;
}

static struct knitk_geometry base_geom(void)
{
	struct knitk_geometry g = {
		.nr_workers = 2, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = 64, .abort_bits = 64, .arena_bytes = 4096,
	};
	return g;
}

FIXTURE(layout) {
	unsigned long long cap;
};

FIXTURE_SETUP(layout)
{
	if (access("/dev/knitk", F_OK) != 0)
		SKIP(_exit(255), "%s: /dev/knitk absent: modprobe knitk first",
		     _metadata->name);
	self->cap = max_knot_bytes();
}

FIXTURE_TEARDOWN(layout)
{
}

/* Every documented -EINVAL case, and the edges that are valid. */
TEST_F(layout, edges)
{
	struct knitk_geometry g;
	int n = 0, good = 0;

#define ONE(stmt) do { g = base_geom(); stmt; n++;			\
	good += agree(_metadata, &g, self->cap); } while (0)
	ONE((void)0);
	ONE(g.flags = 4);
	ONE(g.flags = KNITK_GEOM_STEAL);
	ONE(g.nr_workers = 0);
	ONE(g.nr_workers = KNITK_MAX_WORKERS);
	ONE(g.nr_workers = KNITK_MAX_WORKERS + 1);
	ONE(g.nr_submitters = 0);
	ONE(g.nr_submitters = KNITK_MAX_SUBMITTERS);
	ONE(g.nr_submitters = KNITK_MAX_SUBMITTERS + 1);
	ONE(g.lanes = 32);
	ONE(g.inline_bytes = 0);
	ONE(g.inline_bytes = 100);
	ONE(g.inline_bytes = KNITK_MAX_INLINE_BYTES);
	ONE(g.inline_bytes = KNITK_MAX_INLINE_BYTES + 64);
	ONE(g.abort_bits = 0);
	ONE(g.abort_bits = 65);
	ONE(g.abort_bits = KNITK_MAX_ABORT_BITS);
	ONE(g.abort_bits = KNITK_MAX_ABORT_BITS + 64);
	ONE(g.arena_bytes = 0);
	ONE(g.arena_bytes = 100);
	ONE(g.arena_bytes = KNITK_MAX_ARENA_BYTES);	/* -E2BIG by the cap */
	ONE(g.arena_bytes = KNITK_MAX_ARENA_BYTES + 4096);
	ONE(g.reserved0 = 1);
	ONE(g.reserved[0] = 1);
	ONE(g.reserved[2] = 1);
	ONE(g.flags = KNITK_GEOM_STEAL; g.nr_workers = 63; g.nr_submitters = 64);
	ONE(g.region_lanes = 16);
	ONE(g.flags = KNITK_GEOM_STEAL; g.region_lanes = 16);
	ONE(g.flags = KNITK_GEOM_STEAL; g.region_lanes = 1);
	ONE(g.flags = KNITK_GEOM_STEAL; g.region_lanes = 3);
	ONE(g.flags = KNITK_GEOM_STEAL; g.region_lanes = 32);
	ONE(g.flags = KNITK_GEOM_STEAL; g.region_lanes = 64);
	ONE(g.flags = KNITK_GEOM_STEAL; g.nr_workers = 63; g.region_lanes = 1);
	ONE(g.flags = KNITK_GEOM_STEAL; g.nr_workers = 63; g.region_lanes = 2);
#undef ONE
	ksft_print_msg("%d of %d edge geometries agree\n", good, n);
	EXPECT_EQ(n, good);
}

/* Random valid geometries of modest size: identical layouts. */
TEST_F(layout, random)
{
	uint64_t seed = 0x2545f4914f6cdd1dULL;
	int i, n = 150, good = 0;

	for (i = 0; i < n; i++) {
		struct knitk_geometry g = base_geom();

		g.flags = next_rand(&seed) & 1 ? KNITK_GEOM_STEAL : 0;
		g.nr_workers = 1 + next_rand(&seed) % 8;
		g.nr_submitters = 1 + next_rand(&seed) % 8;
		g.inline_bytes = (uint32_t)(next_rand(&seed) % 17) * 64;
		g.abort_bits = (uint32_t)(next_rand(&seed) % 1025) * 64;
		g.arena_bytes = (next_rand(&seed) % 17) * 4096;
		good += agree(_metadata, &g, self->cap);
	}
	ksft_print_msg("%d of %d random geometries agree\n", good, n);
	EXPECT_EQ(n, good);
}

/*
 * The region size through the library on the module: the knot records
 * it resolved, the creator and an endpoint that attaches read that size,
 * and a claimant of another size is refused.
 */
TEST_F(layout, region_lanes_read_back)
{
	static const __u32 asked[] = { 0, 4 }, want[] = { 16, 4 };
	struct knitk_endpoint *h, *w;
	struct knitk_consumer *c = NULL;
	const struct knitk_control *ctl;
	struct knitk_geometry g, got;
	unsigned int i;

	for (i = 0; i < 2; i++) {
		g = base_geom();
		g.flags = KNITK_GEOM_STEAL;
		g.region_lanes = asked[i];
		ASSERT_EQ(0, knitk_endpoint_create(&g, KNITK_KNOT_KMOD, &h));
		ASSERT_EQ(0, knitk_endpoint_layout(h, NULL, &got));
		EXPECT_EQ(want[i], got.region_lanes);
		ASSERT_EQ(0, knitk_endpoint_control(h, &ctl));
		EXPECT_EQ(want[i], ctl->geometry.region_lanes);
		ASSERT_EQ(0, knitk_endpoint_attach(knitk_endpoint_fd(h), 0, &w));
		EXPECT_EQ(KNITK_BACKEND_KMOD, knitk_endpoint_backend(w));
		ASSERT_EQ(0, knitk_endpoint_layout(w, NULL, &got));
		EXPECT_EQ(want[i], got.region_lanes);
		ASSERT_LE(1, knitk_endpoint_join(w, KNITK_ROLE_WORKER, 0));
		EXPECT_EQ(-EINVAL, knitk_steal_consumer_create(w, 0, want[i] / 2, &c));
		EXPECT_EQ(0, knitk_steal_consumer_create(w, 0, 0, &c));
		knitk_consumer_destroy(c);
		c = NULL;
		knitk_endpoint_destroy(w);
		knitk_endpoint_destroy(h);
	}
}

TEST_HARNESS_MAIN
