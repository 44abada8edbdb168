// SPDX-License-Identifier: GPL-2.0
/*
 * The module's debugfs files against knots that come and go: knitk/live
 * counts every knot not yet freed and its bytes, each its layout's size
 * (a mapping alone keeps both, a refused CREATE adds none); a knot's file
 * goes from the directory with the knot, and a read of it held open
 * across the free gives an error or nothing, never the freed knot; two
 * readers of every file while knots are made and dropped see each file
 * whole or gone.  isolation_test has who may read them (root only).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>

#include "knitk_harness.h"
#include "knitk_test.h"
#include "knitk_live.h"

#define KNITK_DEBUGFS	"/sys/kernel/debug/knitk"

/* The names of the knot files in debugfs now; returns how many. */
static int knot_files(char names[][64], int max)
{
	DIR *dir = opendir(KNITK_DEBUGFS);
	struct dirent *d;
	int n = 0;

	if (!dir)
		return -errno;
	while ((d = readdir(dir))) {
		if (strncmp(d->d_name, "knot-", 5))
			continue;
		if (n < max)
			snprintf(names[n], 64, "%.60s", d->d_name);
		n++;
	}
	closedir(dir);
	return n;
}

/*
 * A knot's debugfs file held open across the knot's free: the file goes
 * from the directory, and a read of the open file gives an error or
 * nothing, never the freed knot.
 */
TEST(debugfs_file_open_across_knot_free)
{
	char names[4][64], path[128], buf[4096];
	struct knitk_geometry g;
	struct knot k;
	ssize_t n;
	int fd;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	ASSERT_EQ(0, knot_files(names, 4));
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&k, &g));
	ASSERT_EQ(0, knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL));
	ASSERT_EQ(1, knot_files(names, 4));
	snprintf(path, sizeof(path), KNITK_DEBUGFS "/%.60s", names[0]);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	n = read(fd, buf, sizeof(buf));
	EXPECT_LT(0, n);
	knot_close(&k);
	ASSERT_EQ(0, knitk_live_wait_zero());
	EXPECT_EQ(0, knot_files(names, 4));
	n = pread(fd, buf, sizeof(buf), 0);
	EXPECT_GE(0, n) TH_LOG("read %zd bytes of a freed knot", n);
	n = read(fd, buf, sizeof(buf));
	EXPECT_GE(0, n);
	close(fd);
}

struct churn {
	int stop;
	int rounds;		/* knots made and dropped */
	int reads;		/* files read whole */
	int bad;		/* reads failing otherwise than by a removed file */
};

static void *churn_knots(void *arg)
{
	struct churn *c = arg;
	struct knitk_geometry g;
	int i;

	knitk_geom(&g, KNITK_GEOM_STEAL, 3, 2, 128, 128, KNITK_ARENA_ALIGN);
	for (i = 0; i < 200; i++) {
		struct knot k;
		int w;

		if (knot_make(&k, &g))
			break;
		knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL);
		w = knot_endpoint(&k, KNITK_ROLE_WORKER, i % 3);
		if (i % 2)
			knot_close(&k);	/* the host dies first, or last */
		if (w >= 0)
			close(w);
		knot_close(&k);
		c->rounds++;
	}
	__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *read_debugfs(void *arg)
{
	struct churn *c = arg;
	char names[64][64], path[128], buf[8192];
	long long knots, bytes;
	int n, i, fd;
	ssize_t r;

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		if (knitk_live_read(&knots, &bytes))
			c->bad++;
		n = knot_files(names, 64);
		for (i = 0; i < n && i < 64; i++) {
			snprintf(path, sizeof(path), KNITK_DEBUGFS "/%.60s", names[i]);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0) {
				c->bad += errno != ENOENT;
				continue;
			}
			while ((r = read(fd, buf, sizeof(buf))) > 0)
				;
			if (r < 0)
				c->bad += errno != EIO && errno != ENOENT;
			else
				c->reads++;
			close(fd);
		}
	}
	return NULL;
}

/* Two readers of every debugfs file while knots are made and dropped. */
TEST(debugfs_read_while_knots_churn)
{
	struct churn c = { 0 };
	pthread_t t[3];
	int i;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	ASSERT_EQ(0, pthread_create(&t[0], NULL, churn_knots, &c));
	ASSERT_EQ(0, pthread_create(&t[1], NULL, read_debugfs, &c));
	ASSERT_EQ(0, pthread_create(&t[2], NULL, read_debugfs, &c));
	for (i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	EXPECT_EQ(200, c.rounds);
	EXPECT_EQ(0, c.bad);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/*
 * debugfs live counts every knot not yet freed and its bytes, each its
 * layout's size: a mapping alone keeps both, a failed CREATE adds none.
 */
TEST(debugfs_live_counts_knots_and_their_bytes)
{
	static const __u32 workers[] = { 1, 7, 63 };
	long long knots, bytes, sum = 0;
	struct knitk_geometry g;
	struct knot k[3];
	unsigned int i;
	int e;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	for (i = 0; i < 3; i++) {
		knitk_geom(&g, i == 1 ? KNITK_GEOM_STEAL : 0, workers[i], 2,
			   64 * i, 64 * i, (__u64)i * KNITK_ARENA_ALIGN);
		ASSERT_EQ(0, knot_make(&k[i], &g));
		sum += k[i].layout.size;
		ASSERT_EQ(0, knitk_live_read(&knots, &bytes));
		EXPECT_EQ((long long)i + 1, knots);
		EXPECT_EQ(sum, bytes);
	}
	e = knitk_open();
	ASSERT_LE(0, e);
	g.arena_bytes = KNITK_MAX_ARENA_BYTES;
	EXPECT_EQ(-E2BIG, knitk_create(e, &g, NULL));
	close(e);
	close(k[1].fd);		/* its mappings keep it */
	k[1].fd = -1;
	ASSERT_EQ(0, knitk_live_read(&knots, &bytes));
	EXPECT_EQ(3, knots);
	EXPECT_EQ(sum, bytes);
	knot_close(&k[0]);
	ASSERT_EQ(0, knitk_live_read(&knots, &bytes));
	EXPECT_EQ(2, knots);
	EXPECT_EQ(sum - (long long)k[0].layout.size, bytes);
	knot_close(&k[1]);
	knot_close(&k[2]);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST_HARNESS_MAIN
