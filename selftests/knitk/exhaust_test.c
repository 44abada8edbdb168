// SPDX-License-Identifier: GPL-2.0
/*
 * Running out, on the module: every limit gives a clear error, never a
 * hang, a warning or a knot that is not what was asked for.
 *  - memcg: a process in a cgroup v2 whose memory.max is below a knot's
 *    size gets -ENOMEM from CREATE (no OOM kill: it lives on), a knot
 *    that fits still comes zeroed, and nothing stays charged or live;
 *  - many knots in one process: made until the fd limit, each with its
 *    own content, all freed after.
 * knot_test has max_knot_bytes and RLIMIT_MEMLOCK (many knots per user).
 */
#define _GNU_SOURCE
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "knitk_harness.h"
#include "knitk_test.h"
#include "knitk_live.h"

#define CGROOT		"/sys/fs/cgroup"
#define CG		CGROOT "/knitk-exhaust"
#define CGROUP2_MAGIC	0x63677270

/* cgroup v2 with the memory controller for children of the root. */
static int cgroup_ready(void)
{
	struct statfs sf;

	if (statfs(CGROOT, &sf) || sf.f_type != CGROUP2_MAGIC) {
		mkdir(CGROOT, 0755);
		if (mount("cgroup2", CGROOT, "cgroup2", 0, NULL))
			return -errno;
	}
	knitk_write_file(CGROOT "/cgroup.subtree_control", "+memory");
	if (mkdir(CG, 0755) && errno != EEXIST)
		return -errno;
	return access(CG "/memory.max", W_OK) ? -errno : 0;
}

/* A data region reads as zeros and keeps what is written. */
static int content_ok(struct knot *k)
{
	size_t len = k->layout.size - k->layout.control_size, i;

	for (i = 0; i < len; i += 512)
		if (k->data[i])
			return 0;
	for (i = 0; i < len; i += 512)
		k->data[i] = (unsigned char)(i / 512 + 1);
	for (i = 0; i < len; i += 512)
		if (k->data[i] != (unsigned char)(i / 512 + 1))
			return 0;
	return 1;
}

/* In the cgroup: a knot over memory.max fails, a small one works. */
static int memcg_child(void)
{
	struct knitk_geometry big, small;
	struct knitk_layout l = { 0 };
	struct knot k;
	char pid[32];
	int fd, ret;

	snprintf(pid, sizeof(pid), "%d", getpid());
	if (knitk_write_file(CG "/cgroup.procs", pid))
		return 10;
	/* Two workers, 4 MiB arenas: 6 mailboxes, about 24 MiB. */
	knitk_geom(&big, 0, 2, 1, 64, 64, 4ULL << 20);
	fd = knitk_open();
	if (fd < 0)
		return 11;
	ret = knitk_create(fd, &big, &l);
	close(fd);
	if (ret != -ENOMEM) {
		printf("# CREATE of %llu bytes in a 8 MiB memcg: %d\n",
		       (unsigned long long)l.size, ret);
		return 12;
	}
	knitk_geom_small(&small);
	if (knot_make(&k, &small))
		return 13;
	ret = content_ok(&k) ? 0 : 14;
	knot_close(&k);
	return ret;
}

TEST(memcg_limit_enomem)
{
	unsigned long long charged;
	int st, ret;
	pid_t pid;

	KNITK_REQUIRE_DEV();
	ret = cgroup_ready();
	if (ret)
		SKIP(return, "no cgroup v2 memory controller: %s", strerror(-ret));
	ASSERT_EQ(0, knitk_write_file(CG "/memory.max", "8M"));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(memcg_child());
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	/* Not OOM-killed: the child returned its verdict. */
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	EXPECT_EQ(0, knitk_live_wait_zero());
	/* What the failed and the freed knot charged came back. */
	EXPECT_EQ(0, knitk_sysfs_read(CG "/memory.current", &charged));
	TH_LOG("memory.current after the knots: %llu", charged);
	EXPECT_GT(1ULL << 20, charged);
	EXPECT_EQ(0, rmdir(CG));
}

TEST(many_knots_per_process)
{
	struct rlimit rl = { 256, 256 }, old;
	struct knitk_geometry g;
	struct knot *k;
	int n = 0, i, ret = 0;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &old));
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl));
	k = calloc(256, sizeof(*k));
	ASSERT_NE(NULL, k);
	knitk_geom_small(&g);
	while (n < 256) {
		ret = knot_make(&k[n], &g);
		if (ret)
			break;
		k[n].data[0] = (unsigned char)n;
		n++;
	}
	TH_LOG("%d knots, then %d", n, ret);
	/* The fd limit ends it, with its own error. */
	EXPECT_EQ(-EMFILE, ret);
	EXPECT_LE(200, n);
	for (i = 0; i < n; i++) {
		EXPECT_EQ((unsigned char)i, k[i].data[0]);
		EXPECT_EQ(KNITK_MAGIC, k[i].ctl->magic);
		EXPECT_EQ(0, memcmp(&k[i].ctl->layout, &k[i].layout,
				    sizeof(k[i].layout)));
		knot_close(&k[i]);
	}
	free(k);
	setrlimit(RLIMIT_NOFILE, &old);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST_HARNESS_MAIN
