// SPDX-License-Identifier: GPL-2.0
/*
 * Attacks on the module's contract written from uapi/linux/knitk.h,
 * man/knitk.4 and docs/guarantees.md alone, aimed past the earlier
 * adversary programs: mappings split, moved and advised away under a
 * closed fd; every ioctl encoded with the wrong size, direction or type;
 * an endpoint attached to itself; calls that fail leaving the endpoint
 * usable and nothing behind; an fd whose only copy is in flight in a
 * socket (and a socket cycle the garbage collector frees); CREATE by a
 * process that opened the device as root and then dropped to nobody;
 * debugfs read while knots come and go and after the knot of an open file
 * was freed; a JOIN racing the death of the role's previous owner; closes
 * and huge deadlines under KNITK_IOC_NOTIFY_WAIT and KNITK_IOC_WAIT; a
 * NOTIFY_WAIT that rings its own doorbell; a thousand endpoints on one
 * knot.  No assertion depends on time: a missed wake hangs, and the
 * runner's watchdog reports it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <grp.h>
#include <pthread.h>
#include <linux/close_range.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "knitk_harness.h"
#include "knitk_test.h"
#include "knitk_live.h"
#include "knitk_ring.h"
#include "../../lib/tests/proc_count.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	(1ULL << HOST)
#define W0_BIT		(1ULL << 0)
#define NOBODY		65534
#define PAGE		KNITK_PAGE_BYTES
#define KNITK_DEBUGFS	"/sys/kernel/debug/knitk"

FIXTURE(k7) {
	struct knot k;		/* host endpoint, mapped */
	int w0;			/* worker 0's endpoint, or -1 */
};

FIXTURE_SETUP(k7)
{
	struct knitk_geometry g;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	/* Four arena pages per mailbox: a data region to cut into pieces. */
	knitk_geom(&g, 0, 2, 1, 64, 64, 4 * KNITK_ARENA_ALIGN);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	self->w0 = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, self->w0);
}

FIXTURE_TEARDOWN(k7)
{
	if (self->w0 >= 0)
		close(self->w0);
	knot_close(&self->k);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

static long long live_knots(void)
{
	long long knots, bytes;

	return knitk_live_read(&knots, &bytes) ? -1 : knots;
}

/* A fresh endpoint of @k's knot, attached and unjoined. */
static int attached(const struct knot *k)
{
	int fd = knitk_open();

	if (fd >= 0 && knitk_attach(fd, k->fd, NULL)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Data region of @fd's knot of layout @l, mapped read-write. */
static unsigned char *map_data(int fd, const struct knitk_layout *l)
{
	void *p = mmap(NULL, l->size - l->control_size, PROT_READ | PROT_WRITE,
		       MAP_SHARED, fd, l->control_size);

	return p == MAP_FAILED ? NULL : p;
}

/* ---------------------------------------------------------------- mmap */

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
	int fd = attached(&self->k);

	ASSERT_LE(8 * PAGE, len);
	ASSERT_LE(0, fd);
	d = map_data(fd, &l);
	ASSERT_NE(NULL, d);
	close(fd);
	/* Only the new mapping is left once the fixture's knot goes. */
	close(self->w0);
	self->w0 = -1;
	knot_close(&self->k);
	EXPECT_EQ(1, live_knots());

	ASSERT_EQ(0, munmap(d + 2 * PAGE, PAGE));
	ASSERT_EQ(0, mprotect(d + 4 * PAGE, PAGE, PROT_READ));
	EXPECT_EQ(1, live_knots());
	/* The same knot behind every piece: a second mapping is not possible
	 * (no fd), so the pieces are checked against each other.
	 */
	d[0] = 0x5a;
	d[3 * PAGE] = 0x5b;
	d[len - 1] = 0x5c;
	EXPECT_EQ(0, munmap(d, 2 * PAGE));
	EXPECT_EQ(1, live_knots());
	EXPECT_EQ(0x5b, d[3 * PAGE]);
	EXPECT_EQ(0, munmap(d + 3 * PAGE, 2 * PAGE));
	EXPECT_EQ(1, live_knots());
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
	EXPECT_EQ(1, live_knots());
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
	int fd = attached(&self->k);

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
		EXPECT_EQ(1, live_knots());
		EXPECT_EQ(0x78, moved[2 * PAGE + 9]);
		len -= PAGE;
	}
	EXPECT_EQ(1, live_knots());
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
	int fd = attached(&self->k);

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

/* -------------------------------------------------------------- ioctls */

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
 * eight requests.
 */
TEST_F(k7, ioctl_misencoded_requests_enotty)
{
	static const struct cmd cmds[] = {
		{ "API", KNITK_IOC_API }, { "CREATE", KNITK_IOC_CREATE },
		{ "ATTACH", KNITK_IOC_ATTACH }, { "JOIN", KNITK_IOC_JOIN },
		{ "WAIT", KNITK_IOC_WAIT }, { "NOTIFY", KNITK_IOC_NOTIFY },
		{ "STATS", KNITK_IOC_STATS },
		{ "NOTIFY_WAIT", KNITK_IOC_NOTIFY_WAIT },
	};
	struct knitk_doorbell *db = knot_doorbell(&self->k, 0);
	struct knitk_api api = { .api = KNITK_API };
	unsigned long long buf[512];
	unsigned int i, dir, nr;
	int delta;

	ASSERT_EQ(0, knitk_ioctl(self->w0, KNITK_IOC_API, &api));
	EXPECT_EQ(0xffULL, api.ioctls);
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
	for (nr = 8; nr < 256; nr++) {
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

/* -------------------------------------------------------------- attach */

/*
 * ATTACH naming the endpoint itself: -ENOTCONN while unattached (the
 * source is not attached), -EBUSY once attached; a non-knitk fd or an
 * O_PATH open of the device is refused; a layout filled with garbage on
 * input comes back as the knot's, reserved words zero.
 */
TEST_F(k7, attach_to_itself_and_odd_sources)
{
	struct knitk_attach a;
	int u, o, e, ret;
	unsigned int i;

	u = knitk_open();
	ASSERT_LE(0, u);
	EXPECT_EQ(-ENOTCONN, knitk_attach(u, u, NULL));
	o = open(KNITK_DEV, O_PATH | O_CLOEXEC);
	ASSERT_LE(0, o);
	ret = knitk_attach(u, o, NULL);
	EXPECT_TRUE(ret == -EBADF || ret == -EINVAL) TH_LOG("O_PATH: %d", ret);
	e = epoll_create1(EPOLL_CLOEXEC);
	ASSERT_LE(0, e);
	EXPECT_EQ(-EINVAL, knitk_attach(u, e, NULL));
	EXPECT_EQ(-EBADF, knitk_attach(u, -1, NULL));
	EXPECT_EQ(-EBADF, knitk_attach(u, 1 << 30, NULL));

	memset(&a, 0xa5, sizeof(a));
	a.fd = self->k.fd;
	a.flags = 0;
	ASSERT_EQ(0, knitk_ioctl(u, KNITK_IOC_ATTACH, &a));
	EXPECT_EQ(0, memcmp(&a.layout, &self->k.layout, sizeof(a.layout)));
	for (i = 0; i < 4; i++)
		EXPECT_EQ(0ULL, a.layout.reserved[i]);
	EXPECT_EQ(-EBUSY, knitk_attach(u, u, NULL));
	EXPECT_EQ(-EBUSY, knitk_attach(self->k.fd, self->k.fd, NULL));
	/* Still the one knot: u's poll and join work on it. */
	EXPECT_EQ(0, knitk_join(u, KNITK_ROLE_WORKER, 1, NULL));
	EXPECT_EQ((1ULL << 0) | (1ULL << 1) | HOST_BIT, self->k.ctl->live);
	close(e);
	close(o);
	close(u);
}

/* ------------------------------------------------------ failed calls */

/*
 * A CREATE, ATTACH or JOIN that fails leaves the endpoint as it was (it
 * can CREATE, ATTACH or JOIN afterwards), no knot live, no fd, and no
 * generation counted for a refused join.
 */
TEST(failed_calls_leave_endpoint_usable)
{
	struct knitk_geometry g, good;
	struct knitk_control *ctl;
	struct knitk_layout l;
	int fds0, e, a, u, p[2];
	__u32 gen;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	fds0 = count_fds(false);
	knitk_geom_small(&good);

	e = knitk_open();
	ASSERT_LE(0, e);
	g = good;
	g.nr_workers = 0;
	EXPECT_EQ(-EINVAL, knitk_create(e, &g, NULL));
	g = good;
	g.arena_bytes = KNITK_MAX_ARENA_BYTES + KNITK_ARENA_ALIGN;
	EXPECT_EQ(-EINVAL, knitk_create(e, &g, NULL));
	/* Within every limit of the geometry, far past max_knot_bytes. */
	g = good;
	g.arena_bytes = KNITK_MAX_ARENA_BYTES;
	EXPECT_EQ(-E2BIG, knitk_create(e, &g, NULL));
	g = good;
	g.nr_workers = KNITK_MAX_WORKERS;
	g.nr_submitters = KNITK_MAX_SUBMITTERS;
	g.inline_bytes = KNITK_MAX_INLINE_BYTES;
	g.arena_bytes = KNITK_MAX_ARENA_BYTES;
	g.abort_bits = KNITK_MAX_ABORT_BITS;
	EXPECT_EQ(-E2BIG, knitk_create(e, &g, NULL));
	EXPECT_EQ(0, live_knots());
	EXPECT_EQ(-ENOTCONN, knitk_join(e, KNITK_ROLE_HOST, 0, NULL));
	ASSERT_EQ(0, knitk_create(e, &good, &l));
	EXPECT_EQ(1, live_knots());

	a = knitk_open();
	u = knitk_open();
	ASSERT_LE(0, a);
	ASSERT_LE(0, u);
	ASSERT_EQ(0, pipe2(p, O_CLOEXEC));
	EXPECT_EQ(-EBADF, knitk_attach(a, -1, NULL));
	EXPECT_EQ(-EINVAL, knitk_attach(a, p[0], NULL));
	EXPECT_EQ(-ENOTCONN, knitk_attach(a, u, NULL));
	ASSERT_EQ(0, knitk_attach(a, e, NULL));

	EXPECT_EQ(-EINVAL, knitk_join(a, KNITK_ROLE_WORKER, 2, NULL));
	EXPECT_EQ(-EINVAL, knitk_join(a, KNITK_ROLE_WORKER, ~0U, NULL));
	EXPECT_EQ(-EINVAL, knitk_join(a, KNITK_ROLE_HOST, 1, NULL));
	EXPECT_EQ(-EINVAL, knitk_join(a, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, knitk_join(a, 3, 0, NULL));
	ASSERT_EQ(0, knitk_join(e, KNITK_ROLE_WORKER, 0, NULL));
	EXPECT_EQ(-EBUSY, knitk_join(a, KNITK_ROLE_WORKER, 0, NULL));
	ASSERT_EQ(0, knitk_join(a, KNITK_ROLE_WORKER, 1, &gen));
	EXPECT_EQ(1U, gen);
	EXPECT_EQ(-EBUSY, knitk_join(a, KNITK_ROLE_HOST, 0, NULL));

	ctl = mmap(NULL, l.control_size, PROT_READ, MAP_SHARED, e, 0);
	ASSERT_NE(MAP_FAILED, ctl);
	EXPECT_EQ(1U, ctl->generation[0]);
	EXPECT_EQ(1U, ctl->generation[1]);
	EXPECT_EQ(0U, ctl->generation[HOST]);
	EXPECT_EQ(3ULL, ctl->live);
	EXPECT_EQ(0ULL, ctl->dead);
	munmap(ctl, l.control_size);

	close(p[0]);
	close(p[1]);
	close(u);
	close(a);
	close(e);
	EXPECT_EQ(0, knitk_live_wait_zero());
	EXPECT_EQ(fds0, count_fds(false));
}

/* A copy of @len bytes of @arg on a page of its own, made read-only. */
static void *read_only_copy(const void *arg, size_t len)
{
	void *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	memcpy(p, arg, len);
	if (mprotect(p, PAGE, PROT_READ)) {
		munmap(p, PAGE);
		return NULL;
	}
	return p;
}

/*
 * CREATE and ATTACH whose result cannot be written back fail with -EFAULT
 * and, like every refused call, leave the endpoint unattached: no knot is
 * left live, and the same call with a writable argument succeeds.
 */
TEST(create_attach_unwritable_arg_leave_nothing)
{
	struct knitk_create c = { 0 };
	struct knitk_attach a = { 0 };
	struct knitk_layout l;
	int e, f, src;
	void *ro;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	knitk_geom_small(&c.geometry);
	e = knitk_open();
	ASSERT_LE(0, e);
	ro = read_only_copy(&c, sizeof(c));
	ASSERT_NE(NULL, ro);
	EXPECT_EQ(-EFAULT, knitk_ioctl(e, KNITK_IOC_CREATE, ro));
	munmap(ro, PAGE);
	EXPECT_EQ(0, live_knots());
	EXPECT_EQ(-ENOTCONN, knitk_join(e, KNITK_ROLE_HOST, 0, NULL));
	EXPECT_EQ(0, knitk_create(e, &c.geometry, &l));

	src = knitk_open();
	ASSERT_LE(0, src);
	ASSERT_EQ(0, knitk_create(src, &c.geometry, NULL));
	f = knitk_open();
	ASSERT_LE(0, f);
	a.fd = src;
	ro = read_only_copy(&a, sizeof(a));
	ASSERT_NE(NULL, ro);
	EXPECT_EQ(-EFAULT, knitk_ioctl(f, KNITK_IOC_ATTACH, ro));
	munmap(ro, PAGE);
	EXPECT_EQ(-ENOTCONN, knitk_join(f, KNITK_ROLE_HOST, 0, NULL));
	/* Refused, f can still attach: to the other knot. */
	EXPECT_EQ(0, knitk_attach(f, e, NULL));
	close(src);
	EXPECT_EQ(0, knitk_join(f, KNITK_ROLE_HOST, 0, NULL));
	close(f);
	close(e);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/* --------------------------------------------------- fds in flight */

/* Until bit @bit of the control page's dead mask is set. */
static void wait_dead(const struct knitk_control *ctl, unsigned int bit)
{
	while (!(knitk_load64((const __u64 *)&ctl->dead) & (1ULL << bit)))
		usleep(1000);
}

/*
 * The owner's only fd of its endpoint sent over a socket and closed:
 * the copy in flight is in no file table, so the role ends; received
 * back, the endpoint's role stays ended and the role is free to join.
 */
TEST_F(k7, only_fd_in_flight_ends_role)
{
	__u32 seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	int sv[2], back, next;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	ASSERT_EQ(0, knitk_send_fd(sv[0], self->w0));
	close(self->w0);
	self->w0 = -1;
	wait_dead(self->k.ctl, 0);
	EXPECT_EQ(0ULL, self->k.ctl->live & W0_BIT);
	back = knitk_recv_fd(sv[1]);
	ASSERT_LE(0, back);
	EXPECT_EQ(-ENOTCONN, knitk_wait(back, seq, KNITK_WAIT_FOREVER));
	EXPECT_NE(0, knitk_join(back, KNITK_ROLE_WORKER, 0, NULL));
	next = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	EXPECT_LE(0, next);
	EXPECT_EQ(W0_BIT | HOST_BIT, self->k.ctl->live);
	close(next);
	close(back);
	close(sv[0]);
	close(sv[1]);
}

static void *block_on_pipe(void *arg)
{
	char c;

	return read(*(int *)arg, &c, 1) == 1 ? NULL : arg;
}

/*
 * close_range(CLOSE_RANGE_UNSHARE) gives the calling thread a table
 * without the fd while another thread keeps the old one: the role stays
 * while that table holds the fd, and ends when that thread exits with
 * it.  dup2() over the owner's only fd is a close of it: the role ends.
 */
TEST_F(k7, close_range_unshare_and_dup2_over_the_fd)
{
	const struct knitk_control *ctl = self->k.ctl;
	pthread_t t;
	int p[2], w;

	w = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
	ASSERT_LE(0, w);
	ASSERT_EQ(0, pipe(p));
	ASSERT_EQ(0, pthread_create(&t, NULL, block_on_pipe, &p[0]));
	ASSERT_EQ(0, syscall(SYS_close_range, w, w, CLOSE_RANGE_UNSHARE));
	/* Ours has no fd of it now; the thread's still has one. */
	EXPECT_EQ(-1, fcntl(w, F_GETFD));
	EXPECT_TRUE(knitk_load64(&ctl->live) & (1ULL << 1));
	EXPECT_FALSE(knitk_load64(&ctl->dead) & (1ULL << 1));
	ASSERT_EQ(1, write(p[1], "x", 1));
	ASSERT_EQ(0, pthread_join(t, NULL));
	wait_dead(ctl, 1);
	EXPECT_FALSE(knitk_load64(&ctl->live) & (1ULL << 1));

	/* dup2 of another file over worker 0's only fd. */
	ASSERT_EQ(self->w0, dup2(p[0], self->w0));
	wait_dead(ctl, 0);
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	close(p[0]);
	close(p[1]);
}

/*
 * A socket holding itself and the knot's last fd in flight, both closed:
 * the unix garbage collector's release of the endpoint frees the knot.
 */
TEST(socket_cycle_in_flight_frees_knot)
{
	struct knitk_geometry g;
	struct knot k;
	int sv[2];

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&k, &g));
	ASSERT_EQ(0, knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL));
	knot_unmap(&k);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv));
	ASSERT_EQ(0, knitk_send_fd(sv[0], k.fd));
	ASSERT_EQ(0, knitk_send_fd(sv[0], sv[1]));
	close(k.fd);
	close(sv[1]);
	EXPECT_EQ(1, live_knots());
	close(sv[0]);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/* ------------------------------------------------------------- memlock */

/* Exit status of @body run in a child process, 200 + signal if killed. */
static int in_child(int (*body)(void))
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (!pid)
		_exit(body());
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
}

/* Become nobody with a memlock limit of @cur, raisable up to @max. */
static int drop_to_nobody(rlim_t cur, rlim_t max)
{
	struct rlimit rl = { cur, max };

	if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
	    setresgid(NOBODY, NOBODY, NOBODY) ||
	    setresuid(NOBODY, NOBODY, NOBODY))
		return -1;
	return 0;
}

/*
 * Opened by root, created by the same process after it dropped to nobody:
 * the caller is charged, not the opener, so the limit holds.
 */
static int open_then_drop_body(void)
{
	struct knitk_geometry g;
	struct knitk_layout l;
	struct rlimit rl;
	int probe = knitk_open(), fd = knitk_open();

	/* The knot's size, from a knot root makes (and is not charged for). */
	knitk_geom_small(&g);
	if (probe < 0 || fd < 0 || knitk_create(probe, &g, &l))
		return 1;
	close(probe);
	if (drop_to_nobody(l.size - PAGE, l.size))
		return 2;
	if (knitk_create(fd, &g, NULL) != -ENOMEM)
		return 3;
	rl.rlim_cur = rl.rlim_max = l.size;
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return 4;
	/* The refused CREATE left the endpoint unattached and nothing charged. */
	if (knitk_create(fd, &g, NULL))
		return 5;
	close(fd);
	return 0;
}

/*
 * nobody in a user namespace of its own holds every capability there,
 * CAP_IPC_LOCK too, but not over the host's memory: it is charged, and
 * held to its RLIMIT_MEMLOCK; nor does it read the root-only debugfs.
 */
static int userns_body(void)
{
	struct knitk_geometry g;
	struct knitk_layout l;
	int probe = knitk_open(), fd;

	knitk_geom_small(&g);
	if (probe < 0 || knitk_create(probe, &g, &l))
		return 1;
	close(probe);
	if (drop_to_nobody(l.size - PAGE, l.size - PAGE))
		return 2;
	if (unshare(CLONE_NEWUSER))
		return 99;
	fd = knitk_open();
	if (fd < 0)
		return 3;
	if (knitk_create(fd, &g, NULL) != -ENOMEM)
		return 4;
	if (open(KNITK_LIVE, O_RDONLY | O_CLOEXEC) >= 0 || errno != EACCES)
		return 5;
	close(fd);
	return 0;
}

TEST(user_namespace_root_is_charged)
{
	int ret;

	KNITK_REQUIRE_DEV();
	ret = in_child(userns_body);
	if (ret == 99)
		SKIP(return, "no unprivileged user namespaces");
	EXPECT_EQ(0, ret);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

TEST(create_after_dropping_root_is_charged)
{
	KNITK_REQUIRE_DEV();
	EXPECT_EQ(0, in_child(open_then_drop_body));
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/* ------------------------------------------------------------- debugfs */

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

/* --------------------------------------------------------- join races */

/*
 * A worker process SIGKILLed while a new endpoint JOINs its role in a
 * loop: the JOIN is -EBUSY until the death, then takes the role, and the
 * death, however late it completes, never ends the new owner's role;
 * every ended role counts once in death_seq and death_done.
 */
TEST_F(k7, join_racing_previous_owners_death)
{
	const struct knitk_control *ctl = self->k.ctl;
	__u32 base = knitk_load32(&ctl->death_seq);
	__u32 gen0 = ctl->generation[1];
	int round, rounds = 16;

	for (round = 0; round < rounds; round++) {
		int p[2], e, ret, st;
		pid_t pid;
		char c;

		ASSERT_EQ(0, pipe(p));
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid) {
			int fd = knitk_open();

			if (fd < 0 || knitk_attach(fd, self->k.fd, NULL) ||
			    knitk_join(fd, KNITK_ROLE_WORKER, 1, NULL))
				_exit(1);
			if (write(p[1], "j", 1) != 1)
				_exit(2);
			for (;;)
				pause();
		}
		close(p[1]);
		ASSERT_EQ(1, read(p[0], &c, 1));
		close(p[0]);
		e = attached(&self->k);
		ASSERT_LE(0, e);
		ASSERT_EQ(0, kill(pid, SIGKILL));
		while ((ret = knitk_join(e, KNITK_ROLE_WORKER, 1, NULL)) == -EBUSY)
			sched_yield();
		ASSERT_EQ(0, ret);
		ASSERT_EQ(pid, waitpid(pid, &st, 0));
		/* The child's death is done: it left the new role alone. */
		while (knitk_load32(&ctl->death_done) != base + 2 * round + 1)
			usleep(1000);
		EXPECT_EQ(base + 2 * round + 1, knitk_load32(&ctl->death_seq));
		EXPECT_TRUE(knitk_load64(&ctl->live) & (1ULL << 1));
		EXPECT_FALSE(knitk_load64(&ctl->dead) & (1ULL << 1));
		EXPECT_EQ(gen0 + 2 * round + 2, ctl->generation[1]);
		EXPECT_EQ(-ETIMEDOUT, knitk_wait(e, knitk_doorbell_seq(
			  knot_doorbell(&self->k, 1)), 0));
		close(e);
		while (knitk_load32(&ctl->death_done) != base + 2 * round + 2)
			usleep(1000);
		EXPECT_TRUE(knitk_load64(&ctl->dead) & (1ULL << 1));
	}
	EXPECT_EQ(base + 2 * rounds, knitk_load32(&ctl->death_seq));
	EXPECT_EQ(W0_BIT | HOST_BIT, knitk_load64(&ctl->live));
}

/*
 * Two threads of one process on one endpoint, released together: a race
 * of two first calls, where only one may win and the other gets -EBUSY.
 */
struct race {
	pthread_barrier_t go;
	int fd;
	unsigned long cmd[2];
	void *arg[2];
	int ret[2];
};

struct racer {
	struct race *r;
	int i;
};

static void *race_run(void *arg)
{
	struct racer *x = arg;
	struct race *r = x->r;

	pthread_barrier_wait(&r->go);
	r->ret[x->i] = knitk_ioctl(r->fd, r->cmd[x->i], r->arg[x->i]);
	return NULL;
}

static void race(struct race *r)
{
	struct racer x[2] = { { r, 0 }, { r, 1 } };
	pthread_t t;

	pthread_barrier_init(&r->go, NULL, 2);
	pthread_create(&t, NULL, race_run, &x[1]);
	race_run(&x[0]);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&r->go);
}

#define RACE_ROUNDS	200

/*
 * JOIN of two roles racing on one endpoint: it joins once, so one wins
 * and the control page shows that role and not the other; when the other
 * role is held, the refused JOIN does not stop the free one.
 */
TEST(join_two_roles_racing_on_one_endpoint)
{
	struct knitk_geometry g;
	struct knitk_join j[2];
	struct knot k;
	struct race r;
	int round;

	KNITK_REQUIRE_DEV();
	knitk_geom(&g, 0, 3, 1, 0, 0, 0);
	ASSERT_EQ(0, knot_make(&k, &g));
	ASSERT_EQ(0, knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL));
	for (round = 0; round < RACE_ROUNDS; round++) {
		int e = attached(&k);
		bool held = round % 2;
		__u64 live;

		ASSERT_LE(0, e);
		memset(j, 0, sizeof(j));
		j[0].role = KNITK_ROLE_WORKER;
		j[0].worker = 1;
		if (held) {
			j[1].role = KNITK_ROLE_HOST;
		} else {
			j[1].role = KNITK_ROLE_WORKER;
			j[1].worker = 2;
		}
		r.fd = e;
		r.cmd[0] = r.cmd[1] = KNITK_IOC_JOIN;
		r.arg[0] = &j[0];
		r.arg[1] = &j[1];
		race(&r);
		live = knitk_load64(&k.ctl->live);
		if (held) {
			EXPECT_EQ(0, r.ret[0]);
			EXPECT_EQ(-EBUSY, r.ret[1]);
			EXPECT_EQ((1ULL << 1) | HOST_BIT, live);
		} else {
			ASSERT_TRUE((!r.ret[0] && r.ret[1] == -EBUSY) ||
				    (!r.ret[1] && r.ret[0] == -EBUSY))
				TH_LOG("round %d: %d %d", round, r.ret[0], r.ret[1]);
			EXPECT_EQ(((r.ret[0] ? 1ULL : 0) << 2 |
				   (r.ret[0] ? 0 : 1ULL) << 1) | HOST_BIT, live);
		}
		close(e);
		while (knitk_load64(&k.ctl->live) != HOST_BIT ||
		       knitk_load32(&k.ctl->death_done) !=
		       knitk_load32(&k.ctl->death_seq))
			usleep(1000);
	}
	EXPECT_EQ((__u32)RACE_ROUNDS, knitk_load32(&k.ctl->death_seq));
	knot_close(&k);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/*
 * CREATE racing CREATE, and CREATE racing ATTACH, on one endpoint: one
 * wins, the other is -EBUSY, and once the endpoint is closed no knot of
 * the race is left.
 */
TEST(create_and_attach_racing_on_one_endpoint)
{
	struct knitk_create c[2];
	struct knitk_attach a;
	struct knitk_geometry g;
	struct race r;
	int round, src;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	knitk_geom_small(&g);
	src = knitk_open();
	ASSERT_LE(0, src);
	ASSERT_EQ(0, knitk_create(src, &g, NULL));
	for (round = 0; round < RACE_ROUNDS; round++) {
		int e = knitk_open();

		ASSERT_LE(0, e);
		memset(c, 0, sizeof(c));
		c[0].geometry = g;
		c[1].geometry = g;
		memset(&a, 0, sizeof(a));
		a.fd = src;
		r.fd = e;
		r.cmd[0] = KNITK_IOC_CREATE;
		r.arg[0] = &c[0];
		if (round % 2) {
			r.cmd[1] = KNITK_IOC_ATTACH;
			r.arg[1] = &a;
		} else {
			r.cmd[1] = KNITK_IOC_CREATE;
			r.arg[1] = &c[1];
		}
		race(&r);
		ASSERT_TRUE((!r.ret[0] && r.ret[1] == -EBUSY) ||
			    (!r.ret[1] && r.ret[0] == -EBUSY))
			TH_LOG("round %d: %d %d", round, r.ret[0], r.ret[1]);
		/* A knot more, unless the ATTACH won. */
		EXPECT_EQ(round % 2 && r.ret[0] ? 1 : 2, live_knots());
		close(e);
		while (live_knots() != 1)
			usleep(1000);
	}
	close(src);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/*
 * CREATE in one thread while another ATTACHes to that endpoint, JOINs,
 * or maps it: each sees the endpoint before the knot (-ENOTCONN) or the
 * whole knot after it, never a knot half made.
 */
struct early {
	pthread_barrier_t go;
	int src;
	int ret;
	struct knitk_layout layout;
	struct knitk_geometry g;
};

static void *create_run(void *arg)
{
	struct early *x = arg;

	pthread_barrier_wait(&x->go);
	x->ret = knitk_create(x->src, &x->g, &x->layout);
	return NULL;
}

TEST(calls_racing_create_see_all_or_nothing)
{
	struct knitk_layout l;
	struct early x;
	int round;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	knitk_geom(&x.g, KNITK_GEOM_STEAL, 3, 2, 64, 64, KNITK_ARENA_ALIGN);
	for (round = 0; round < 3 * RACE_ROUNDS; round++) {
		const struct knitk_control *ctl;
		pthread_t t;
		int e, ret;

		x.src = knitk_open();
		ASSERT_LE(0, x.src);
		e = knitk_open();
		ASSERT_LE(0, e);
		pthread_barrier_init(&x.go, NULL, 2);
		ASSERT_EQ(0, pthread_create(&t, NULL, create_run, &x));
		pthread_barrier_wait(&x.go);
		switch (round % 3) {
		case 0:
			ret = knitk_attach(e, x.src, &l);
			break;
		case 1:
			ret = knitk_join(x.src, KNITK_ROLE_WORKER, 2, NULL);
			break;
		default:
			ctl = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, x.src, 0);
			ret = ctl == MAP_FAILED ? -errno : 0;
			if (!ret) {
				EXPECT_EQ(KNITK_MAGIC, ctl->magic);
				EXPECT_EQ(16U, ctl->geometry.region_lanes);	/* 64 / 16 >= 3 + 1 */
				EXPECT_EQ(3U, ctl->geometry.nr_workers);
				munmap((void *)ctl, PAGE);
			}
			break;
		}
		pthread_join(t, NULL);
		pthread_barrier_destroy(&x.go);
		ASSERT_EQ(0, x.ret);
		EXPECT_TRUE(ret == 0 || ret == -ENOTCONN)
			TH_LOG("round %d: %d", round, ret);
		if (!ret && round % 3 == 0)
			EXPECT_EQ(0, memcmp(&l, &x.layout, sizeof(l)));
		ctl = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, x.src, 0);
		ASSERT_NE(MAP_FAILED, ctl);
		if (round % 3 == 1)
			EXPECT_EQ(ret ? 0ULL : 1ULL << 2, ctl->live);
		munmap((void *)ctl, PAGE);
		close(e);
		close(x.src);
	}
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/* --------------------------------------------------------------- waits */

struct sleeper {
	pthread_t thread;
	int fd;
	bool notify_wait;	/* KNITK_IOC_NOTIFY_WAIT, else KNITK_IOC_WAIT */
	__u64 doorbells;	/* rung by a NOTIFY_WAIT */
	__u32 expected;
	__u64 deadline;
	__u64 woken;
	int ret;
};

static void *sleeper_run(void *arg)
{
	struct sleeper *s = arg;

	if (s->notify_wait)
		s->ret = knitk_notify_wait(s->fd, s->doorbells, s->expected, 0,
					   s->deadline, &s->woken);
	else
		s->ret = knitk_wait(s->fd, s->expected, s->deadline);
	return NULL;
}

/* @s started on worker 0's doorbell; returns once it counts asleep. */
static int sleeper_start(FIXTURE_DATA(k7) *self, struct sleeper *s, int fd,
			 bool notify_wait, __u64 deadline)
{
	struct knitk_doorbell *db = knot_doorbell(&self->k, 0);
	struct knitk_doorbell_stats st;
	int ret;

	ret = knitk_stats(self->k.fd, 0, &st);
	if (ret)
		return ret;
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->notify_wait = notify_wait;
	s->doorbells = HOST_BIT;	/* nothing pending: filtered */
	s->deadline = deadline;
	s->expected = knitk_doorbell_seq(db);
	knitk_doorbell_sleeping(db, 1);
	ret = pthread_create(&s->thread, NULL, sleeper_run, s);
	if (ret)
		return -ret;
	return knitk_wait_asleep(self->k.fd, 0, st.waits + 1);
}

static int sleeper_end(FIXTURE_DATA(k7) *self, struct sleeper *s)
{
	pthread_join(s->thread, NULL);
	knitk_doorbell_sleeping(knot_doorbell(&self->k, 0), 0);
	return s->ret;
}

/*
 * A NOTIFY_WAIT asleep while another thread closes the owner's only fd of
 * the endpoint: the role ends under it, -ENOTCONN, its ring written back.
 */
TEST_F(k7, notify_wait_role_closed_under_it)
{
	__u32 deaths = self->k.ctl->death_seq;
	struct sleeper s;

	ASSERT_EQ(0, sleeper_start(self, &s, self->w0, true, KNITK_WAIT_FOREVER));
	close(self->w0);
	self->w0 = -1;
	EXPECT_EQ(-ENOTCONN, sleeper_end(self, &s));
	EXPECT_EQ(0ULL, s.woken);
	wait_dead(self->k.ctl, 0);
	EXPECT_EQ(deaths + 1, knitk_load32(&self->k.ctl->death_seq));
}

/*
 * Closing the original under a wait on its dup keeps the role (a kick
 * ends the wait with 0); closing the dup, the last fd, ends it under the
 * next wait (-ENOTCONN), for KNITK_IOC_WAIT and KNITK_IOC_NOTIFY_WAIT.
 */
TEST_F(k7, dup_closed_under_waits)
{
	struct sleeper s;
	int nw, d;

	for (nw = 0; nw < 2; nw++) {
		int w = nw ? knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0) : self->w0;

		if (!nw)
			self->w0 = -1;
		ASSERT_LE(0, w);
		d = dup(w);
		ASSERT_LE(0, d);
		ASSERT_EQ(0, sleeper_start(self, &s, d, nw, KNITK_WAIT_FOREVER));
		close(w);
		EXPECT_EQ(0ULL, self->k.ctl->dead & W0_BIT);
		ASSERT_EQ(0, knitk_kick(self->k.fd, W0_BIT, NULL));
		EXPECT_EQ(0, sleeper_end(self, &s));
		EXPECT_EQ(W0_BIT | HOST_BIT, self->k.ctl->live);

		ASSERT_EQ(0, sleeper_start(self, &s, d, nw, KNITK_WAIT_FOREVER));
		close(d);
		EXPECT_EQ(-ENOTCONN, sleeper_end(self, &s));
		wait_dead(self->k.ctl, 0);
	}
}

/*
 * Deadlines at the edges of a signed 64-bit count of nanoseconds, and
 * past it, are far in the future: the waits sleep until kicked.  Deadlines
 * 0 and 1 are in the past: -ETIMEDOUT at once, the ring done first.
 */
TEST_F(k7, deadline_edges_wait_and_notify_wait)
{
	static const __u64 far[] = {
		(1ULL << 63) - 1, 1ULL << 63, (1ULL << 63) + 1,
		KNITK_WAIT_FOREVER - 1, 1ULL << 62,
	};
	struct knitk_doorbell *db = knot_doorbell(&self->k, 0);
	struct sleeper s;
	__u64 woken;
	unsigned int i;
	int nw;

	for (nw = 0; nw < 2; nw++) {
		for (i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
			ASSERT_EQ(0, sleeper_start(self, &s, self->w0, nw, far[i]));
			ASSERT_EQ(0, knitk_kick(self->k.fd, W0_BIT, NULL));
			EXPECT_EQ(0, sleeper_end(self, &s))
				TH_LOG("%s deadline %llx", nw ? "NOTIFY_WAIT" : "WAIT",
				       (unsigned long long)far[i]);
		}
	}
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(self->w0, knitk_doorbell_seq(db), 0));
	EXPECT_EQ(-ETIMEDOUT, knitk_wait(self->w0, knitk_doorbell_seq(db), 1));
	EXPECT_EQ(-ETIMEDOUT, knitk_notify_wait(self->w0, HOST_BIT,
		  knitk_doorbell_seq(db), 0, 0, &woken));
	EXPECT_EQ(0ULL, woken);
	EXPECT_EQ(-ETIMEDOUT, knitk_notify_wait(self->w0, HOST_BIT,
		  knitk_doorbell_seq(db), 0, 1, &woken));
	EXPECT_EQ(0ULL, woken);
}

/*
 * A stop and continue (SIGSTOP, SIGCONT: no handler runs) while a wait
 * sleeps is no signal to the caller: KNITK_IOC_WAIT goes on sleeping and
 * a kick ends it with 0.
 */
TEST_F(k7, stop_and_continue_under_wait)
{
	pid_t pid;
	int st, p[2];
	char c;

	ASSERT_EQ(0, pipe(p));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* Worker 1, asleep in its wait; it maps the knot itself. */
		struct knot ck = { .layout = self->k.layout };
		__u32 seq;

		ck.fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
		if (ck.fd < 0 || knot_map(&ck))
			_exit(1);
		seq = knitk_doorbell_seq(knot_doorbell(&ck, 1));
		if (write(p[1], "j", 1) != 1)
			_exit(2);
		_exit(knitk_wait(ck.fd, seq, KNITK_WAIT_FOREVER) ? 3 : 0);
	}
	ASSERT_EQ(1, read(p[0], &c, 1));
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, 1, 1));
	ASSERT_EQ(0, kill(pid, SIGSTOP));
	ASSERT_EQ(pid, waitpid(pid, &st, WUNTRACED));
	ASSERT_TRUE(WIFSTOPPED(st));
	ASSERT_EQ(0, kill(pid, SIGCONT));
	ASSERT_EQ(pid, waitpid(pid, &st, WCONTINUED));
	/* Asleep again, in the same call or its restart. */
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, 1, 2));
	ASSERT_EQ(0, knitk_kick(self->k.fd, 1ULL << 1, NULL));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(p[0]);
	close(p[1]);
}

/*
 * A NOTIFY_WAIT that rings the caller's own doorbell, asleep-flagged with
 * a pending lane: the ring advances its seq, so the wait that follows
 * returns -EAGAIN, with the caller's doorbell in @woken.
 */
TEST_F(k7, notify_wait_rings_own_doorbell)
{
	struct knitk_doorbell *db = knot_doorbell(&self->k, 0);
	struct knitk_sector *mb = knot_mailbox(&self->k, 0);
	__u32 seq = knitk_doorbell_seq(db);
	__u64 woken;

	knot_lane_publish(mb, 5);
	knitk_doorbell_sleeping(db, 1);
	EXPECT_EQ(-EAGAIN, knitk_notify_wait(self->w0, W0_BIT, seq, 0,
					     KNITK_WAIT_FOREVER, &woken));
	EXPECT_EQ(W0_BIT, woken);
	EXPECT_EQ(seq + 1, knitk_doorbell_seq(db));
	EXPECT_EQ(0U, __atomic_load_n(&db->sleeping, __ATOMIC_ACQUIRE));
	/* With the spin too: its own ring is no running ringer to wait for. */
	seq = knitk_doorbell_seq(db);
	knitk_doorbell_sleeping(db, 1);
	EXPECT_EQ(-EAGAIN, knitk_notify_wait(self->w0, W0_BIT, seq,
					     KNITK_WAIT_SPIN,
					     KNITK_WAIT_FOREVER, &woken));
	EXPECT_EQ(W0_BIT, woken);
	knitk_doorbell_sleeping(db, 0);
	knot_lane_ack(&mb->ack, 5);
}

/*
 * A forked child of the owner asleep in WAIT or NOTIFY_WAIT on the
 * endpoint it inherited, when the owner (another process) exits: the
 * role ends, and the child's wait with it (-ENOTCONN).
 */
TEST_F(k7, owners_exit_ends_a_forked_childs_wait)
{
	int nw;

	/* The child outlives its parent, the owner: reaped here. */
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
	for (nw = 0; nw < 2; nw++) {
		struct knitk_doorbell_stats before;
		int ready[2], go[2], st;
		pid_t owner, child;
		char c;

		ASSERT_EQ(0, knitk_stats(self->k.fd, 1, &before));
		ASSERT_EQ(0, pipe(ready));
		ASSERT_EQ(0, pipe(go));
		owner = fork();
		ASSERT_LE(0, owner);
		if (!owner) {
			struct knot ok = { .layout = self->k.layout };
			__u32 seq;

			ok.fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
			if (ok.fd < 0 || knot_map(&ok))
				_exit(1);
			seq = knitk_doorbell_seq(knot_doorbell(&ok, 1));
			child = fork();
			if (child < 0)
				_exit(2);
			if (!child) {
				__u64 woken;
				int ret;

				if (nw)
					ret = knitk_notify_wait(ok.fd, 0, seq, 0,
								KNITK_WAIT_FOREVER,
								&woken);
				else
					ret = knitk_wait(ok.fd, seq, KNITK_WAIT_FOREVER);
				_exit(ret == -ENOTCONN ? 0 : 10);
			}
			if (write(ready[1], &child, sizeof(child)) != sizeof(child) ||
			    read(go[0], &c, 1) != 1)
				_exit(3);
			_exit(0);	/* the owner exits under the child's wait */
		}
		ASSERT_EQ(sizeof(child), read(ready[0], &child, sizeof(child)));
		ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, 1, before.waits + 1));
		ASSERT_EQ(1, write(go[1], "g", 1));
		ASSERT_EQ(owner, waitpid(owner, &st, 0));
		EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st));
		ASSERT_EQ(child, waitpid(child, &st, 0));
		ASSERT_TRUE(WIFEXITED(st));
		EXPECT_EQ(0, WEXITSTATUS(st)) TH_LOG("%s", nw ? "NOTIFY_WAIT" : "WAIT");
		wait_dead(self->k.ctl, 1);
		close(ready[0]);
		close(ready[1]);
		close(go[0]);
		close(go[1]);
	}
}

/*
 * The deadline is the caller's CLOCK_MONOTONIC: in a time namespace whose
 * monotonic clock runs behind the host's by more than a second, a
 * deadline a second ahead is in the future, though the host's clock has
 * passed it.  A wait that ends with -ETIMEDOUT must find the caller's
 * clock at or past its deadline.  For WAIT, NOTIFY_WAIT, NOTIFY_WAIT with
 * the spin and the io_uring wait; each runs to its deadline.
 */
enum { TNS_WAIT, TNS_NOTIFY_WAIT, TNS_SPIN, TNS_URING, TNS_KINDS };

#define TNS_AHEAD_NS	1000000000ULL

static int timens_wait(const struct knot *k, int kind)
{
	struct knot ck = { .layout = k->layout };
	__u64 deadline, after;
	__u32 seq;
	int ret;

	ck.fd = knot_endpoint(k, KNITK_ROLE_WORKER, 1);
	if (ck.fd < 0 || knot_map(&ck))
		return 1;
	seq = knitk_doorbell_seq(knot_doorbell(&ck, 1));
	deadline = knitk_now_ns() + TNS_AHEAD_NS;
	if (kind == TNS_URING) {
		struct io_uring ring;
		struct io_uring_sqe *sqe;

		if (io_uring_queue_init(2, &ring, 0))
			return 2;
		sqe = io_uring_get_sqe(&ring);
		prep_raw_wait(sqe, ck.fd, 1, seq, deadline, 1);
		if (io_uring_submit(&ring) != 1)
			return 3;
		ret = next_res(&ring, NULL);
	} else if (kind == TNS_WAIT) {
		ret = knitk_wait(ck.fd, seq, deadline);
	} else {
		ret = knitk_notify_wait(ck.fd, 0, seq,
					kind == TNS_SPIN ? KNITK_WAIT_SPIN : 0,
					deadline, NULL);
	}
	after = knitk_now_ns();
	if (ret != -ETIMEDOUT)
		return 20;
	if (after < deadline) {
		printf("# kind %d: -ETIMEDOUT %llu ns before its deadline\n",
		       kind, (unsigned long long)(deadline - after));
		return 10;
	}
	return 0;
}

TEST_F(k7, deadline_is_the_callers_clock_in_a_time_namespace)
{
	long long behind;
	char off[64];
	int kind, fd;

	/* Behind by all but a second of the host's uptime (never below 0). */
	behind = (long long)(knitk_now_ns() / 1000000000ULL) - 1;
	ASSERT_LE(2, behind);
	ASSERT_EQ(0, unshare(CLONE_NEWTIME));
	fd = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
	ASSERT_LE(0, fd);
	snprintf(off, sizeof(off), "monotonic %lld 0", -behind);
	ASSERT_EQ((ssize_t)strlen(off), write(fd, off, strlen(off)));
	close(fd);
	for (kind = 0; kind < TNS_KINDS; kind++) {
		pid_t pid = fork();
		int status;

		ASSERT_LE(0, pid);
		if (!pid)
			_exit(timens_wait(&self->k, kind));
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFEXITED(status));
		EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("kind %d", kind);
		wait_dead(self->k.ctl, 1);
	}
}

/*
 * Two threads of the owner asleep on its doorbell, one in WAIT and one in
 * NOTIFY_WAIT: one kick advances the seq both expect and ends both.
 */
TEST_F(k7, one_kick_ends_both_waits_of_the_owner)
{
	struct sleeper s[2];

	ASSERT_EQ(0, sleeper_start(self, &s[0], self->w0, false, KNITK_WAIT_FOREVER));
	ASSERT_EQ(0, sleeper_start(self, &s[1], self->w0, true, KNITK_WAIT_FOREVER));
	ASSERT_EQ(s[0].expected, s[1].expected);
	ASSERT_EQ(0, knitk_kick(self->k.fd, W0_BIT, NULL));
	EXPECT_EQ(0, sleeper_end(self, &s[0]));
	EXPECT_EQ(0, sleeper_end(self, &s[1]));
}

/*
 * munmap of every mapping of the knot, in another thread, while a wait
 * sleeps: the wait does not depend on them; a kick ends it with 0.
 */
TEST_F(k7, wait_survives_munmap_of_every_mapping)
{
	struct knitk_doorbell_stats st;
	struct sleeper s;

	ASSERT_EQ(0, sleeper_start(self, &s, self->w0, false, KNITK_WAIT_FOREVER));
	knot_unmap(&self->k);
	ASSERT_EQ(0, knitk_kick(self->k.fd, W0_BIT, NULL));
	pthread_join(s.thread, NULL);
	EXPECT_EQ(0, s.ret);
	ASSERT_EQ(0, knitk_stats(self->k.fd, 0, &st));
	EXPECT_EQ(1ULL, st.kicks);
	EXPECT_EQ(0ULL, st.spurious);
}

/*
 * The io_uring wait at the same deadline edges: far ones sleep until a
 * kick (0), past ones end at once (-ETIMEDOUT); and a ring wait asleep
 * when its owner's only fd goes in flight in a socket is cancelled, as
 * the role ends (-ECANCELED).
 */
TEST_F(k7, uring_wait_deadline_edges_and_fd_in_flight)
{
	static const __u64 far[] = {
		(1ULL << 63) - 1, 1ULL << 63, (1ULL << 63) + 1,
		KNITK_WAIT_FOREVER - 1,
	};
	struct knitk_doorbell *db = knot_doorbell(&self->k, 0);
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	__u64 asleep = 0;
	unsigned int i;
	int sv[2], back;

	ASSERT_EQ(0, io_uring_queue_init(4, &ring, 0));
	for (i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
		sqe = io_uring_get_sqe(&ring);
		ASSERT_NE(NULL, sqe);
		prep_raw_wait(sqe, self->w0, 0, knitk_doorbell_seq(db), far[i], i);
		ASSERT_EQ(1, io_uring_submit(&ring));
		until_uring_asleep(self->k.fd, 0, ++asleep);
		ASSERT_EQ(0, knitk_kick(self->k.fd, W0_BIT, NULL));
		EXPECT_EQ(0, next_res(&ring, NULL))
			TH_LOG("deadline %llx", (unsigned long long)far[i]);
	}
	for (i = 0; i < 2; i++) {
		sqe = io_uring_get_sqe(&ring);
		ASSERT_NE(NULL, sqe);
		prep_raw_wait(sqe, self->w0, 0, knitk_doorbell_seq(db), i, i);
		ASSERT_EQ(1, io_uring_submit(&ring));
		EXPECT_EQ(-ETIMEDOUT, next_res(&ring, NULL));
	}

	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	prep_raw_wait(sqe, self->w0, 0, knitk_doorbell_seq(db),
		      KNITK_WAIT_FOREVER, 9);
	/* The past deadlines' waits counted too. */
	asleep = uring_waits(self->k.fd, 0);
	ASSERT_EQ(1, io_uring_submit(&ring));
	until_uring_asleep(self->k.fd, 0, ++asleep);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	ASSERT_EQ(0, knitk_send_fd(sv[0], self->w0));
	close(self->w0);
	self->w0 = -1;
	EXPECT_EQ(-ECANCELED, next_res(&ring, NULL));
	wait_dead(self->k.ctl, 0);
	back = knitk_recv_fd(sv[1]);
	ASSERT_LE(0, back);
	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	prep_raw_wait(sqe, back, 0, knitk_doorbell_seq(db), KNITK_WAIT_FOREVER, 10);
	ASSERT_EQ(1, io_uring_submit(&ring));
	EXPECT_EQ(-ENOTCONN, next_res(&ring, NULL));
	io_uring_queue_exit(&ring);
	close(back);
	close(sv[0]);
	close(sv[1]);
}

/*
 * IORING_OP_CLOSE of the owner's only fd, issued inline and from an io-wq
 * worker (IOSQE_ASYNC), a thread of the owner too: the role ends either
 * way.
 */
TEST_F(k7, io_uring_close_of_the_owners_fd_ends_role)
{
	struct io_uring ring;
	int async;

	ASSERT_EQ(0, io_uring_queue_init(2, &ring, 0));
	for (async = 0; async < 2; async++) {
		struct io_uring_sqe *sqe;
		int w = async ? knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0) :
				self->w0;

		self->w0 = -1;
		ASSERT_LE(0, w);
		sqe = io_uring_get_sqe(&ring);
		ASSERT_NE(NULL, sqe);
		io_uring_prep_close(sqe, w);
		if (async)
			sqe->flags |= IOSQE_ASYNC;
		ASSERT_EQ(1, io_uring_submit(&ring));
		EXPECT_EQ(0, next_res(&ring, NULL));
		wait_dead(self->k.ctl, 0);
		EXPECT_EQ(HOST_BIT, knitk_load64(&self->k.ctl->live));
	}
	io_uring_queue_exit(&ring);
}

/*
 * A ring's registered file table is no file table of the process: with
 * the endpoint registered, closing the owner's only fd ends the role, a
 * ring wait through the registered file is -ENOTCONN, and unregistering
 * drops the last reference, freeing the knot.
 */
TEST(registered_file_is_no_file_table)
{
	struct knitk_geometry g;
	struct io_uring_sqe *sqe;
	struct io_uring ring;
	struct knot k;
	int w;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, knitk_live_wait_zero());
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&k, &g));
	ASSERT_EQ(0, knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL));
	w = knot_endpoint(&k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, w);
	ASSERT_EQ(0, io_uring_queue_init(2, &ring, 0));
	ASSERT_EQ(0, io_uring_register_files(&ring, &w, 1));
	close(w);
	wait_dead(k.ctl, 0);
	sqe = io_uring_get_sqe(&ring);
	ASSERT_NE(NULL, sqe);
	prep_raw_wait(sqe, 0, 0, knitk_doorbell_seq(knot_doorbell(&k, 0)),
		      KNITK_WAIT_FOREVER, 1);
	sqe->flags |= IOSQE_FIXED_FILE;
	ASSERT_EQ(1, io_uring_submit(&ring));
	EXPECT_EQ(-ENOTCONN, next_res(&ring, NULL));
	EXPECT_EQ(HOST_BIT, knitk_load64(&k.ctl->live));
	knot_close(&k);
	EXPECT_EQ(1, live_knots());
	ASSERT_EQ(0, io_uring_unregister_files(&ring));
	io_uring_queue_exit(&ring);
	EXPECT_EQ(0, knitk_live_wait_zero());
}

/* ------------------------------------------------------------- limits */

/*
 * 63 workers: worker 62 is the last, 63 (the host's slot) and 64 are no
 * worker; doorbell 62 and the host's are valid everywhere.
 */
TEST(worker_ids_at_the_edge_of_63)
{
	struct knitk_doorbell_stats st;
	struct knitk_geometry g;
	struct knot k;
	__u64 woken;
	int e;

	KNITK_REQUIRE_DEV();
	knitk_geom(&g, 0, KNITK_MAX_WORKERS, 1, 0, 0, 0);
	ASSERT_EQ(0, knot_make(&k, &g));
	e = attached(&k);
	ASSERT_LE(0, e);
	EXPECT_EQ(-EINVAL, knitk_join(e, KNITK_ROLE_WORKER, 63, NULL));
	EXPECT_EQ(-EINVAL, knitk_join(e, KNITK_ROLE_WORKER, 64, NULL));
	EXPECT_EQ(0ULL, k.ctl->live);
	ASSERT_EQ(0, knitk_join(e, KNITK_ROLE_WORKER, 62, NULL));
	ASSERT_EQ(0, knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL));
	EXPECT_EQ((1ULL << 62) | HOST_BIT, k.ctl->live);
	EXPECT_EQ(0, knitk_kick(k.fd, (1ULL << 62) | HOST_BIT, &woken));
	EXPECT_EQ((1ULL << 62) | HOST_BIT, woken);
	EXPECT_EQ(0, knitk_stats(k.fd, 62, &st));
	EXPECT_EQ(1ULL, st.kicks);
	EXPECT_EQ(0, knitk_stats(k.fd, HOST, &st));
	EXPECT_EQ(1ULL, st.kicks);
	close(e);
	knot_close(&k);
	EXPECT_EQ(0, knitk_live_wait_zero());
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
	EXPECT_EQ(1, live_knots());
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
		fds[i] = attached(&k);
		ASSERT_LE(0, fds[i]) TH_LOG("endpoint %d", i);
		if (i < KNITK_MAX_WORKERS)
			ASSERT_EQ(0, knitk_join(fds[i], KNITK_ROLE_WORKER, i, NULL));
	}
	EXPECT_EQ(~0ULL, k.ctl->live);
	EXPECT_EQ(0ULL, k.ctl->dead);
	EXPECT_EQ(1, live_knots());
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

TEST_HARNESS_MAIN
