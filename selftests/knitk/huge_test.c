// SPDX-License-Identifier: GPL-2.0
/*
 * Huge chunks of knot memory on the module: a knot of 2 MiB or more takes
 * its pages in physically contiguous PMD-sized chunks while the
 * huge_chunks parameter is on (the control page's huge_bytes and
 * knitk_endpoint_pages() say how many it got), none with the parameter off
 * or KNITK_KNOT_NO_HUGE; either way every byte written through one
 * endpoint reads back through another and through a forked process that
 * attaches, also after MADV_DONTNEED dropped the mapping's pages (the
 * fault handler puts them back), and every knot is freed at the end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <knitk.h>

#include "knitk_harness.h"
#include "knitk_live.h"
#include "knitk_test.h"
#include "../../lib/tests/knot_bytes.h"

#define HUGE_CHUNKS	"/sys/module/knitk/parameters/huge_chunks"
#define MIB		(1ULL << 20)

/* 4 mailboxes of 2 MiB of arena: about 8 MiB. */
static const struct knitk_geometry big = {
	.nr_workers = 2, .nr_submitters = 1, .lanes = KNITK_LANES,
	.inline_bytes = 64, .arena_bytes = 2 * MIB,
};

/* The parameter as 'Y' or 'N', or 0 when it cannot be read. */
static char param_read(void)
{
	char c = 0;
	FILE *f = fopen(HUGE_CHUNKS, "re");

	if (f) {
		if (fscanf(f, " %c", &c) != 1)
			c = 0;
		fclose(f);
	}
	return c;
}

static int param_write(char c)
{
	FILE *f = fopen(HUGE_CHUNKS, "we");
	int ok;

	if (!f)
		return -errno;
	ok = fputc(c, f) != EOF;
	return fclose(f) == 0 && ok ? 0 : -EIO;
}

/*
 * A forked child attaches with the inherited fd, checks the parent's
 * bytes and the pages the knot reports, then writes its own: its exit
 * status is 0 when all was as expected.
 */
static int child_attach(int fd, size_t len, const struct knitk_pages *want)
{
	struct knitk_pages p = { .size = sizeof(p) };
	struct knitk_endpoint *c;
	unsigned char *d;
	size_t clen = 0;

	if (knitk_endpoint_attach(fd, 0, &c))
		return 10;
	if (knitk_endpoint_pages(c, &p) || p.flags != want->flags ||
	    p.huge_bytes != want->huge_bytes || p.map_bytes != want->map_bytes)
		return 11;
	d = knot_bytes_of(c, &clen);
	if (!d || clen != len || knot_bytes_wrong(d, clen, 1))
		return 12;
	knot_bytes_fill(d, clen, 2);
	knitk_endpoint_destroy(c);
	return 0;
}

/*
 * A kmod knot made with @flags, seen whole through a second endpoint, a
 * forked one and a refault; its pages in *@out.
 */
static void end_to_end(struct __test_metadata *_metadata, unsigned int flags,
		       struct knitk_pages *out)
{
	struct knitk_pages p = { .size = sizeof(p) }, pa = { .size = sizeof(pa) };
	struct knitk_endpoint *k, *a;
	const struct knitk_control *ctl;
	size_t len = 0, alen = 0;
	unsigned char *d, *ad;
	int status;
	pid_t pid;

	ASSERT_EQ(0, knitk_endpoint_create(&big, KNITK_KNOT_KMOD | flags, &k));
	ASSERT_EQ(0, knitk_endpoint_pages(k, &p));
	ASSERT_EQ(0, knitk_endpoint_control(k, &ctl));
	EXPECT_EQ(KNITK_PAGE_BYTES, p.page_bytes);
	EXPECT_EQ(ctl->layout.size, p.map_bytes);
	EXPECT_EQ(ctl->huge_bytes, p.huge_bytes);
	EXPECT_EQ(0, p.huge_bytes % (2 * MIB));
	EXPECT_GE(p.map_bytes, p.huge_bytes);
	EXPECT_EQ(!!p.huge_bytes, !!(p.flags & KNITK_PAGES_CHUNKS));
	*out = p;

	ASSERT_EQ(0, knitk_endpoint_attach(knitk_endpoint_fd(k), 0, &a));
	ASSERT_EQ(0, knitk_endpoint_pages(a, &pa));
	EXPECT_EQ(p.flags, pa.flags);
	EXPECT_EQ(p.huge_bytes, pa.huge_bytes);
	d = knot_bytes_of(k, &len);
	ad = knot_bytes_of(a, &alen);
	ASSERT_NE(NULL, d);
	ASSERT_NE(NULL, ad);
	ASSERT_EQ(len, alen);
	knot_bytes_fill(d, len, 1);
	EXPECT_EQ(0, knot_bytes_wrong(ad, alen, 1));

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(child_attach(knitk_endpoint_fd(k), len, &p));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(0, knot_bytes_wrong(d, len, 2));

	/* Dropped from one mapping, faulted back in: the same memory. */
	EXPECT_EQ(0, madvise(ad, alen, MADV_DONTNEED));
	EXPECT_EQ(0, knot_bytes_wrong(ad, alen, 2));
	knot_bytes_fill(ad, alen, 3);
	EXPECT_EQ(0, knot_bytes_wrong(d, len, 3));

	knitk_endpoint_destroy(a);
	knitk_endpoint_destroy(k);
}

FIXTURE(param) {
	char saved;
};

/* A skip ends the test process (see KNITK_REQUIRE_DEV in knitk_test.h). */
FIXTURE_SETUP(param)
{
	KNITK_REQUIRE_DEV();
	self->saved = param_read();
	if (!self->saved)
		SKIP(_exit(255), "%s: no %s: a module without huge chunks",
		     _metadata->name, HUGE_CHUNKS);
}

FIXTURE_TEARDOWN(param)
{
	if (self->saved)
		param_write(self->saved);
	/* Every knot of the test is freed (a leak hangs here). */
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST_F(param, chunks_end_to_end)
{
	struct knitk_pages p;

	ASSERT_EQ(0, param_write('Y'));
	end_to_end(_metadata, 0, &p);
	if (!p.huge_bytes)
		SKIP(return, "no 2 MiB block free in the guest: single pages only");
	TH_LOG("%llu of %llu bytes in chunks", (unsigned long long)p.huge_bytes,
	       (unsigned long long)p.map_bytes);
}

TEST_F(param, param_off_single_pages)
{
	struct knitk_pages p;

	ASSERT_EQ(0, param_write('N'));
	end_to_end(_metadata, 0, &p);
	EXPECT_EQ(0, p.flags);
	EXPECT_EQ(0, p.huge_bytes);
}

TEST_F(param, no_huge_flag_single_pages)
{
	struct knitk_geometry rec;
	struct knitk_endpoint *k;
	struct knitk_pages p;

	ASSERT_EQ(0, param_write('Y'));
	end_to_end(_metadata, KNITK_KNOT_NO_HUGE, &p);
	EXPECT_EQ(0, p.flags);
	EXPECT_EQ(0, p.huge_bytes);
	/* The knot records the opt-out for every endpoint. */
	ASSERT_EQ(0, knitk_endpoint_create(&big, KNITK_KNOT_KMOD | KNITK_KNOT_NO_HUGE,
					   &k));
	ASSERT_EQ(0, knitk_endpoint_layout(k, NULL, &rec));
	EXPECT_TRUE(rec.flags & KNITK_GEOM_NO_HUGE);
	knitk_endpoint_destroy(k);
}

TEST_HARNESS_MAIN
