// SPDX-License-Identifier: GPL-2.0
/*
 * A knot lives while any endpoint or any piece of a mapping holds it, is
 * the same memory in every piece, and is freed with the last of them: a
 * data mapping cut by munmap and mprotect, inherited with MADV_DOFORK and
 * cut in the child, moved and shrunk by mremap, given every madvise
 * advice, locked and populated; an epoll registration made before ATTACH
 * reports the knot's states and is gone with the knot; a thousand
 * endpoints on one knot, every role joined, end each role once and leave
 * no knot and no fd.  Written from uapi/linux/knitk.h alone.
 */
#define _GNU_SOURCE
#include <sys/epoll.h>
#include <sys/resource.h>

#include "knitk_fixtures.h"
#include "../../lib/tests/proc_count.h"

/* Data region of @fd's knot of layout @l, mapped read-write. */
static unsigned char *map_data(int fd, const struct knitk_layout *l)
{
	void *p = mmap(NULL, l->size - l->control_size, PROT_READ | PROT_WRITE,
		       MAP_SHARED, fd, l->control_size);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * A data mapping cut into pieces (munmap of a middle page, mprotect of
 * another) after its fd was closed: each piece keeps the knot, which is
 * freed only once the last piece is gone.
 */
TEST_F(k7, split_mapping_keeps_knot_until_last_piece)
{
	struct knitk_layout l = self->k.layout;
	__u64 len = l.size - l.control_size;
	unsigned char *d, *d2;
	int fd = knot_attached(&self->k);

	ASSERT_LE(8 * PAGE, len);
	ASSERT_LE(0, fd);
	d = map_data(fd, &l);
	ASSERT_NE(NULL, d);
	close(fd);
	/* Only the new mapping is left once the fixture's knot goes. */
	close(self->w0);
	self->w0 = -1;
	knot_close(&self->k);
	EXPECT_EQ(1, knitk_live_knots());

	ASSERT_EQ(0, munmap(d + 2 * PAGE, PAGE));
	ASSERT_EQ(0, mprotect(d + 4 * PAGE, PAGE, PROT_READ));
	EXPECT_EQ(1, knitk_live_knots());
	/* The same knot behind every piece: a second mapping is not possible
	 * (no fd), so the pieces are checked against each other.
	 */
	d[0] = 0x5a;
	d[3 * PAGE] = 0x5b;
	d[len - 1] = 0x5c;
	EXPECT_EQ(0, munmap(d, 2 * PAGE));
	EXPECT_EQ(1, knitk_live_knots());
	EXPECT_EQ(0x5b, d[3 * PAGE]);
	EXPECT_EQ(0, munmap(d + 3 * PAGE, 2 * PAGE));
	EXPECT_EQ(1, knitk_live_knots());
	EXPECT_EQ(0x5c, d[len - 1]);
	d2 = d + 5 * PAGE;
	EXPECT_EQ(0, munmap(d2, len - 5 * PAGE));
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/*
 * A mapping inherited with MADV_DOFORK and cut in the child: the child's
 * pieces and exit leave the parent's mapping and knot intact.
 */
TEST_F(k7, dofork_child_splits_inherited_mapping)
{
	struct knitk_layout l = self->k.layout;
	__u64 len = l.size - l.control_size;
	unsigned char *d = self->k.data;
	pid_t pid;
	int st;

	ASSERT_EQ(0, madvise(d, len, MADV_DOFORK));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (munmap(d + PAGE, PAGE) || mprotect(d + 3 * PAGE, PAGE, PROT_READ))
			_exit(1);
		d[0] = 0x11;
		d[2 * PAGE] = 0x22;
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_EQ(0, WEXITSTATUS(st));
	EXPECT_EQ(0x11, d[0]);
	EXPECT_EQ(0x22, d[2 * PAGE]);
	d[PAGE] = 0x33;		/* still mapped here */
	close(self->w0);
	self->w0 = -1;
	close(self->k.fd);
	self->k.fd = -1;
	EXPECT_EQ(1, knitk_live_knots());
	EXPECT_EQ(0x33, d[PAGE]);
}

/*
 * mremap moving the data region keeps it the knot's; shrinking it, when
 * allowed, leaves a smaller piece that still holds the knot.
 */
TEST_F(k7, mremap_moved_and_shrunk_data_region)
{
	struct knitk_layout l = self->k.layout;
	__u64 len = l.size - l.control_size, off;
	unsigned char *d, *to, *moved;
	int fd = knot_attached(&self->k);

	ASSERT_LE(0, fd);
	d = map_data(fd, &l);
	ASSERT_NE(NULL, d);
	for (off = 0; off < len; off += PAGE)
		d[off + 7] = (unsigned char)(off / PAGE + 1);
	to = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, to);
	moved = mremap(d, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	ASSERT_EQ(to, moved);
	for (off = 0; off < len; off += PAGE)
		EXPECT_EQ((unsigned char)(off / PAGE + 1), moved[off + 7]);
	/* The same memory as the fixture's mapping, both ways. */
	moved[PAGE + 9] = 0x77;
	EXPECT_EQ(0x77, self->k.data[PAGE + 9]);
	self->k.data[2 * PAGE + 9] = 0x78;
	EXPECT_EQ(0x78, moved[2 * PAGE + 9]);

	close(fd);
	close(self->w0);
	self->w0 = -1;
	knot_close(&self->k);
	if (mremap(moved, len, len - PAGE, 0) == moved) {
		EXPECT_EQ(1, knitk_live_knots());
		EXPECT_EQ(0x78, moved[2 * PAGE + 9]);
		len -= PAGE;
	}
	EXPECT_EQ(1, knitk_live_knots());
	EXPECT_EQ(0, munmap(moved, len));
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/*
 * madvise of any advice on the regions either fails or keeps them what
 * they are: the knot's memory, shared, with its contents (no SIGBUS, no
 * zero page in place of the knot's page).
 */
TEST_F(k7, madvise_keeps_the_knots_memory)
{
	static const int advice[] = {
		MADV_DONTNEED, MADV_COLD, MADV_PAGEOUT, MADV_WILLNEED,
		MADV_FREE, MADV_REMOVE, MADV_WIPEONFORK, MADV_KEEPONFORK,
		MADV_DONTDUMP, MADV_DODUMP, MADV_MERGEABLE, MADV_HUGEPAGE,
		MADV_NOHUGEPAGE, MADV_SEQUENTIAL, MADV_RANDOM,
		22 /* MADV_POPULATE_READ */, 23 /* MADV_POPULATE_WRITE */,
	};
	struct knitk_layout l = self->k.layout;
	__u64 len = l.size - l.control_size, off;
	unsigned char *d = self->k.data, *d2;
	unsigned int i;
	int fd = knot_attached(&self->k);

	ASSERT_LE(0, fd);
	d2 = map_data(fd, &l);
	ASSERT_NE(NULL, d2);
	for (i = 0; i < sizeof(advice) / sizeof(advice[0]); i++) {
		for (off = 0; off < len; off += PAGE)
			d[off + 3] = (unsigned char)(i * 16 + off / PAGE);
		madvise(d, len, advice[i]);
		madvise((void *)self->k.ctl, l.control_size, advice[i]);
		for (off = 0; off < len; off += PAGE) {
			ASSERT_EQ((unsigned char)(i * 16 + off / PAGE), d[off + 3])
				TH_LOG("advice %d offset %llu", advice[i],
				       (unsigned long long)off);
			EXPECT_EQ(d[off + 3], d2[off + 3]);
		}
		d[5] = (unsigned char)i;
		EXPECT_EQ((unsigned char)i, d2[5]);
		EXPECT_EQ(KNITK_MAGIC, self->k.ctl->magic);
		EXPECT_EQ(0, memcmp(&l, &self->k.ctl->layout, sizeof(l)));
	}
	munmap(d2, len);
	close(fd);
}

/*
 * mlock, MAP_POPULATE and MAP_LOCKED on the data region: the same memory,
 * and the knot freed once the locked mappings are gone.
 */
TEST_F(k7, locked_and_populated_mappings)
{
	struct knitk_layout l = self->k.layout;
	__u64 len = l.size - l.control_size;
	unsigned char *a, *b;

	a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		 self->k.fd, l.control_size);
	ASSERT_NE(MAP_FAILED, a);
	b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_LOCKED,
		 self->k.fd, l.control_size);
	ASSERT_NE(MAP_FAILED, b);
	EXPECT_EQ(0, mlock(self->k.data, len));
	self->k.data[PAGE + 1] = 0x41;
	EXPECT_EQ(0x41, a[PAGE + 1]);
	EXPECT_EQ(0x41, b[PAGE + 1]);
	b[len - 1] = 0x42;
	EXPECT_EQ(0x42, a[len - 1]);
	EXPECT_EQ(0, munlock(self->k.data, len));
	close(self->w0);
	self->w0 = -1;
	knot_close(&self->k);
	EXPECT_EQ(1, knitk_live_knots());
	EXPECT_EQ(0x42, b[len - 1]);
	munmap(a, len);
	munmap(b, len);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

#define MANY	1000

/*
 * A thousand endpoints on one knot, every role joined: all 64 live; the
 * closes end each role once, and the knot and every fd go.
 */
TEST(thousand_endpoints_one_knot)
{
	struct rlimit rl = { MANY + 64, MANY + 64 };
	static int fds[MANY];
	struct knitk_geometry g;
	struct knot k;
	int fds0, i;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	ASSERT_EQ(0, setrlimit(RLIMIT_NOFILE, &rl));
	fds0 = count_fds(false);
	knitk_geom(&g, 0, KNITK_MAX_WORKERS, 1, 0, 0, 0);
	ASSERT_EQ(0, knot_make(&k, &g));
	ASSERT_EQ(0, knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL));
	for (i = 0; i < MANY; i++) {
		fds[i] = knot_attached(&k);
		ASSERT_LE(0, fds[i]) TH_LOG("endpoint %d", i);
		if (i < KNITK_MAX_WORKERS)
			ASSERT_EQ(0, knitk_join(fds[i], KNITK_ROLE_WORKER, i, NULL));
	}
	EXPECT_EQ(~0ULL, k.ctl->live);
	EXPECT_EQ(0ULL, k.ctl->dead);
	EXPECT_EQ(1, knitk_live_knots());
	for (i = MANY - 1; i >= 0; i--)
		close(fds[i]);
	while (knitk_load32(&k.ctl->death_done) != KNITK_MAX_WORKERS)
		usleep(1000);
	EXPECT_EQ((__u32)KNITK_MAX_WORKERS, knitk_load32(&k.ctl->death_seq));
	EXPECT_EQ(HOST_BIT, k.ctl->live);
	EXPECT_EQ(~HOST_BIT, k.ctl->dead);
	knot_close(&k);
	EXPECT_EQ(0, knitk_live_wait_zero());
	EXPECT_EQ(fds0, count_fds(false));
}

/*
 * An endpoint in epoll from before ATTACH reports POLLERR, then its knot's
 * states; once every endpoint and mapping is gone (the knot is freed) the
 * registration is gone with it and epoll reports nothing.
 */
TEST(epoll_before_attach_outlives_knot)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLPRI };
	struct knitk_geometry g;
	struct epoll_event out[4];
	struct knot c;
	int ep, e, wfd, n;

	KNITK_REQUIRE_DEV();
	ep = epoll_create1(EPOLL_CLOEXEC);
	ASSERT_LE(0, ep);
	e = knitk_open();
	ASSERT_LE(0, e);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, e, &ev));
	n = epoll_wait(ep, out, 4, 0);
	ASSERT_EQ(1, n);
	EXPECT_TRUE(out[0].events & EPOLLERR);

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&c, &g));
	ASSERT_EQ(0, knitk_attach(e, c.fd, NULL));
	ASSERT_EQ(0, knitk_join(e, KNITK_ROLE_HOST, 0, NULL));
	wfd = knot_endpoint(&c, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, wfd);
	EXPECT_EQ(0, epoll_wait(ep, out, 4, 0));
	/* The worker dies: the host's registration sees POLLPRI. */
	close(wfd);
	n = epoll_wait(ep, out, 4, -1);
	ASSERT_EQ(1, n);
	EXPECT_TRUE(out[0].events & EPOLLPRI);
	/* The creator goes, then the host: the knot is freed. */
	knot_close(&c);
	close(e);
	EXPECT_EQ(0, epoll_wait(ep, out, 4, 0));
	close(ep);
}

TEST_HARNESS_MAIN
