// SPDX-License-Identifier: GPL-2.0
/*
 * mmap of a knot: the kernel-written control page (read-only, exact size,
 * MAP_SHARED) and the data region shared by every mapping and process.
 */
#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_test.h"

FIXTURE(knot) {
	struct knot k;
	struct knitk_geometry g;
	size_t data_len;
};

FIXTURE_SETUP(knot)
{
	KNITK_REQUIRE_DEV();
	knitk_geom_small(&self->g);
	ASSERT_EQ(0, knot_make(&self->k, &self->g));
	self->data_len = self->k.layout.size - self->k.layout.control_size;
}

FIXTURE_TEARDOWN(knot)
{
	knot_close(&self->k);
}

/* mmap's errno for one attempt, unmapping whatever it wrongly mapped. */
static int map_errno(int fd, size_t len, int prot, int flags, off_t off)
{
	void *p = mmap(NULL, len, prot, flags, fd, off);

	if (p == MAP_FAILED)
		return errno;
	munmap(p, len);
	return 0;
}

/* Nothing to map before the endpoint has a knot. */
TEST(mmap_before_create_enotconn)
{
	int fd;

	KNITK_REQUIRE_DEV();
	fd = knitk_open();
	ASSERT_LE(0, fd);
	EXPECT_EQ(ENOTCONN, map_errno(fd, KNITK_PAGE_BYTES, PROT_READ,
				      MAP_SHARED, 0));
	close(fd);
}

TEST_F(knot, control_page_contents)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct knitk_layout want;
	unsigned int r;

	ASSERT_EQ(0, knitk_layout_compute(&self->g, &want));
	EXPECT_EQ(KNITK_MAGIC, ctl->magic);
	EXPECT_EQ(KNITK_API, ctl->api);
	EXPECT_EQ(0ULL, ctl->live);
	EXPECT_EQ(0ULL, ctl->dead);
	EXPECT_EQ(0U, ctl->death_seq);
	EXPECT_EQ(0U, ctl->death_done);
	for (r = 0; r < KNITK_ROLE_SLOTS; r++)
		EXPECT_EQ(0U, ctl->generation[r]) TH_LOG("role %u", r);
	EXPECT_EQ(0, memcmp(&self->g, &ctl->geometry, sizeof(self->g)));
	EXPECT_EQ(0, memcmp(&self->k.layout, &ctl->layout,
			    sizeof(self->k.layout)));
	EXPECT_EQ(0, memcmp(&want, &ctl->layout, sizeof(want)));
}

/* A new knot never shows another knot's (or anyone's) old memory. */
TEST_F(knot, data_region_zeroed)
{
	size_t i, nonzero = 0;

	for (i = 0; i < self->data_len; i++)
		nonzero += self->k.data[i] != 0;
	EXPECT_EQ(0UL, nonzero);
}

TEST_F(knot, mmap_wrong_size_einval)
{
	const struct knitk_layout *l = &self->k.layout;
	int fd = self->k.fd;

	EXPECT_EQ(EINVAL, map_errno(fd, 2 * l->control_size, PROT_READ,
				    MAP_SHARED, 0));
	EXPECT_EQ(EINVAL, map_errno(fd, l->size, PROT_READ, MAP_SHARED, 0));
	EXPECT_EQ(EINVAL, map_errno(fd, self->data_len - KNITK_PAGE_BYTES,
				    PROT_READ | PROT_WRITE, MAP_SHARED,
				    l->control_size));
	EXPECT_EQ(EINVAL, map_errno(fd, self->data_len + KNITK_PAGE_BYTES,
				    PROT_READ | PROT_WRITE, MAP_SHARED,
				    l->control_size));
}

TEST_F(knot, mmap_wrong_offset_einval)
{
	const struct knitk_layout *l = &self->k.layout;
	int fd = self->k.fd;

	/* Inside the data region, but not at its start. */
	EXPECT_EQ(EINVAL, map_errno(fd, self->data_len - KNITK_PAGE_BYTES,
				    PROT_READ | PROT_WRITE, MAP_SHARED,
				    l->control_size + KNITK_PAGE_BYTES));
	EXPECT_EQ(EINVAL, map_errno(fd, KNITK_PAGE_BYTES,
				    PROT_READ | PROT_WRITE, MAP_SHARED,
				    l->control_size + KNITK_PAGE_BYTES));
	/* At and past the end of the knot. */
	EXPECT_EQ(EINVAL, map_errno(fd, KNITK_PAGE_BYTES, PROT_READ,
				    MAP_SHARED, l->size));
	EXPECT_EQ(EINVAL, map_errno(fd, KNITK_PAGE_BYTES, PROT_READ,
				    MAP_SHARED, l->size + 16 * KNITK_PAGE_BYTES));
}

TEST_F(knot, mmap_private_einval)
{
	const struct knitk_layout *l = &self->k.layout;

	EXPECT_EQ(EINVAL, map_errno(self->k.fd, l->control_size, PROT_READ,
				    MAP_PRIVATE, 0));
	EXPECT_EQ(EINVAL, map_errno(self->k.fd, self->data_len,
				    PROT_READ | PROT_WRITE, MAP_PRIVATE,
				    l->control_size));
	EXPECT_EQ(EINVAL, map_errno(self->k.fd, self->data_len, PROT_READ,
				    MAP_PRIVATE, l->control_size));
}

TEST_F(knot, control_page_writable_eperm)
{
	size_t len = self->k.layout.control_size;

	EXPECT_EQ(EPERM, map_errno(self->k.fd, len, PROT_READ | PROT_WRITE,
				   MAP_SHARED, 0));
	EXPECT_EQ(EPERM, map_errno(self->k.fd, len, PROT_WRITE, MAP_SHARED, 0));
}

TEST_F(knot, control_page_mprotect_writable_refused)
{
	/* The fixture's control mapping is read-only; it must stay so. */
	EXPECT_EQ(-1, mprotect((void *)self->k.ctl,
			       self->k.layout.control_size,
			       PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	EXPECT_EQ(KNITK_MAGIC, self->k.ctl->magic);
}

/* The data region may not be grown past the knot with mremap either. */
TEST_F(knot, data_region_mremap_grow_refused)
{
	void *p = mremap(self->k.data, self->data_len,
			 self->data_len + KNITK_PAGE_BYTES, MREMAP_MAYMOVE);

	EXPECT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EFAULT, errno);
	if (p != MAP_FAILED)
		self->k.data = p;
}

TEST_F(knot, data_region_shared_between_mappings)
{
	unsigned char *other;
	size_t last = self->data_len - 1;

	other = mmap(NULL, self->data_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		     self->k.fd, self->k.layout.control_size);
	ASSERT_NE(MAP_FAILED, other);
	ASSERT_NE(self->k.data, other);

	self->k.data[0] = 0x5a;
	self->k.data[last] = 0xa5;
	other[KNITK_PAGE_BYTES] = 0x3c;
	EXPECT_EQ(0x5a, other[0]);
	EXPECT_EQ(0xa5, other[last]);
	EXPECT_EQ(0x3c, self->k.data[KNITK_PAGE_BYTES]);
	munmap(other, self->data_len);
}

/*
 * Another process attaches its own endpoint (by the inherited fd), maps the
 * knot through it, reads what the parent wrote and answers.
 */
TEST_F(knot, data_region_shared_across_processes)
{
	size_t last = self->data_len - 1;
	int status;
	pid_t pid;

	self->k.data[0] = 0x11;
	self->k.data[last] = 0x22;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct knot c = { 0 };

		/* Drop everything inherited; use only the child's endpoint. */
		knot_unmap(&self->k);
		c.fd = knitk_open();
		if (c.fd < 0)
			_exit(10);
		if (knitk_attach(c.fd, self->k.fd, &c.layout))
			_exit(11);
		close(self->k.fd);
		if (knot_map(&c))
			_exit(12);
		if (c.ctl->magic != KNITK_MAGIC)
			_exit(13);
		if (c.data[0] != 0x11 || c.data[last] != 0x22)
			_exit(14);
		c.data[1] = 0x33;
		c.data[last - 1] = 0x44;
		knot_close(&c);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status))
		TH_LOG("child failed at step %d", WEXITSTATUS(status));
	EXPECT_EQ(0x33, self->k.data[1]);
	EXPECT_EQ(0x44, self->k.data[last - 1]);
}

TEST_HARNESS_MAIN
