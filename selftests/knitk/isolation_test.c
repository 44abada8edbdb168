// SPDX-License-Identifier: GPL-2.0
/*
 * Who can reach a knot: only a holder of one of its endpoints' fds.
 *  - another user, with /dev/knitk (0666) open, reaches nothing: not the
 *    knot by ATTACH on any fd number, not the owner's fds through /proc or
 *    pidfd_getfd, not debugfs (root only: the knot files, knitk/live);
 *  - a reopen of the owner's fd through /proc/<pid>/fd, even by root, is a
 *    new endpoint, attached to nothing;
 *  - the control page stays read-only past a move (mremap, then
 *    mprotect), through /proc/self/mem (FOLL_FORCE) and ptrace
 *    PTRACE_POKEDATA, and keeps its content.
 * mmap_test has the rest of the mapping rules (MAP_PRIVATE, mprotect).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <grp.h>
#include <sys/ptrace.h>
#include <sys/stat.h>

#include "knitk_harness.h"
#include "knitk_test.h"
#include "knitk_live.h"

#define NOBODY		65534
#define KNITK_DEBUGFS	"/sys/kernel/debug/knitk"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open	434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd	438
#endif

FIXTURE(iso) {
	struct knot k;		/* root's knot, joined as the host, mapped */
};

FIXTURE_SETUP(iso)
{
	struct knitk_geometry g;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, getuid());
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
}

FIXTURE_TEARDOWN(iso)
{
	knot_close(&self->k);
}

/*
 * In a child as nobody, without the fds fork() gave it: @body's result
 * (0 when it reached nothing).
 */
static int as_nobody(int (*body)(pid_t owner, int fd), int fd)
{
	pid_t owner = getpid(), pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (!pid) {
		int n;

		/* A process of another user, holding none of our fds. */
		for (n = 3; n < 1024; n++)
			close(n);
		if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
		    setresuid(NOBODY, NOBODY, NOBODY))
			_exit(100);
		_exit(body(owner, fd));
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/*
 * Every fd number of its own names no endpoint of the knot; the owner's
 * fds cannot be taken; every uapi call of an unattached endpoint says so.
 */
static int reach_body(pid_t owner, int fd)
{
	char path[64];
	int ep, n, pidfd, got;
	void *p;

	ep = knitk_open();
	if (ep < 0)
		return 1;
	for (n = 0; n < 1024; n++) {
		int ret = knitk_attach(ep, n, NULL);

		if (ret != -EBADF && ret != -EINVAL && ret != -ENOTCONN)
			return 2;
	}
	if (knitk_join(ep, KNITK_ROLE_HOST, 0, NULL) != -ENOTCONN ||
	    knitk_notify(ep, 1ULL << KNITK_DOORBELL_HOST, NULL) != -ENOTCONN ||
	    knitk_wait(ep, 0, 0) != -ENOTCONN ||
	    knitk_stats(ep, KNITK_DOORBELL_HOST, NULL) != -ENOTCONN)
		return 3;
	p = mmap(NULL, KNITK_PAGE_BYTES, PROT_READ, MAP_SHARED, ep, 0);
	if (p != MAP_FAILED || errno != ENOTCONN)
		return 4;
	/* The owner's fd through /proc: another user may not open it. */
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", owner, fd);
	got = open(path, O_RDWR);
	if (got >= 0 || (errno != EACCES && errno != EPERM))
		return 5;
	/* Nor take it with pidfd_getfd (ptrace access is needed). */
	pidfd = syscall(SYS_pidfd_open, owner, 0);
	if (pidfd >= 0) {
		got = syscall(SYS_pidfd_getfd, pidfd, fd, 0);
		if (got >= 0 || errno != EPERM)
			return 6;
	}
	return 0;
}

TEST_F(iso, other_user_cannot_reach_knot)
{
	EXPECT_EQ(0, as_nobody(reach_body, self->k.fd));
}

/* debugfs is root's: a second user reads neither the totals nor a knot. */
static int debugfs_body(pid_t owner, int fd)
{
	(void)owner;
	(void)fd;
	if (open(KNITK_LIVE, O_RDONLY) >= 0 || errno != EACCES)
		return 1;
	if (opendir(KNITK_DEBUGFS))
		return 2;
	return 0;
}

TEST_F(iso, debugfs_root_only)
{
	struct dirent *d;
	struct stat st;
	char path[300];
	int knots = 0;
	DIR *dir;

	EXPECT_EQ(0, as_nobody(debugfs_body, -1));
	/*
	 * Every file is 0400, should debugfs be mounted with a wider mode;
	 * the test hooks' knobs (KNITK_TEST_HOOKS=y) are 0600, root's too.
	 */
	dir = opendir(KNITK_DEBUGFS);
	ASSERT_NE(NULL, dir);
	while ((d = readdir(dir))) {
		/* The test-hook knobs (knitk_test.h) are 0600, root's too. */
		if (d->d_name[0] == '.' || !strcmp(d->d_name, "kick_pause") ||
		    !strcmp(d->d_name, "spin_pause") ||
		    !strcmp(d->d_name, "counter_base"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", KNITK_DEBUGFS, d->d_name);
		ASSERT_EQ(0, stat(path, &st));
		EXPECT_EQ(0400, st.st_mode & 07777);
		EXPECT_EQ(0, st.st_uid);
		knots += !strncmp(d->d_name, "knot-", 5);
	}
	closedir(dir);
	EXPECT_LE(1, knots);
}

/* Root reopening the owner's fd through /proc gets a fresh endpoint. */
TEST_F(iso, proc_fd_reopen_is_a_new_endpoint)
{
	char path[64];
	int fd, src;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", self->k.fd);
	fd = open(path, O_RDWR | O_CLOEXEC);
	ASSERT_LE(0, fd);
	EXPECT_EQ(-ENOTCONN, knitk_join(fd, KNITK_ROLE_WORKER, 0, NULL));
	EXPECT_EQ(-ENOTCONN, knitk_notify(fd, 1, NULL));
	/* As a source for ATTACH it is not attached either. */
	src = knitk_open();
	ASSERT_LE(0, src);
	EXPECT_EQ(-ENOTCONN, knitk_attach(src, fd, NULL));
	close(src);
	close(fd);
}

static void expect_ctl_intact(struct __test_metadata *_metadata,
			      const struct knitk_control *c,
			      const struct knitk_layout *l)
{
	EXPECT_EQ(KNITK_MAGIC, c->magic);
	EXPECT_EQ(KNITK_API, c->api);
	EXPECT_EQ(0, memcmp(&c->layout, l, sizeof(*l)));
}

TEST_F(iso, control_page_moved_stays_read_only)
{
	size_t len = self->k.layout.control_size;
	void *dst, *moved;

	/* A free spot to move it to. */
	dst = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, dst);
	moved = mremap((void *)self->k.ctl, len, len,
		       MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	ASSERT_EQ(dst, moved);
	self->k.ctl = moved;
	EXPECT_EQ(-1, mprotect(moved, len, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	expect_ctl_intact(_metadata, self->k.ctl, &self->k.layout);
}

TEST_F(iso, control_page_proc_mem_write_refused)
{
	__u32 forged = ~KNITK_MAGIC;
	int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);

	ASSERT_LE(0, fd);
	EXPECT_GT(0, pwrite(fd, &forged, sizeof(forged),
			    (off_t)(uintptr_t)&self->k.ctl->magic));
	EXPECT_GT(0, pwrite(fd, &forged, sizeof(forged),
			    (off_t)(uintptr_t)&self->k.ctl->live));
	close(fd);
	expect_ctl_intact(_metadata, self->k.ctl, &self->k.layout);
	EXPECT_NE(0, knitk_load64(&self->k.ctl->live) & (1ULL << KNITK_DOORBELL_HOST));
}

/* A child with its own mapping of the knot, stopped for the tracer. */
TEST_F(iso, control_page_ptrace_poke_refused)
{
	const struct knitk_control *c;
	int sync[2], st;
	pid_t pid;
	long ret;

	ASSERT_EQ(0, pipe(sync));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct knot k = { .fd = knitk_open() };

		close(sync[0]);
		if (k.fd < 0 || knitk_attach(k.fd, self->k.fd, &k.layout) ||
		    knot_map(&k))
			_exit(1);
		if (write(sync[1], &k.ctl, sizeof(k.ctl)) != sizeof(k.ctl))
			_exit(2);
		raise(SIGSTOP);
		/* The tracer's pokes must not have changed a byte. */
		_exit(k.ctl->magic == KNITK_MAGIC && k.ctl->api == KNITK_API ? 0 : 3);
	}
	close(sync[1]);
	ASSERT_EQ(sizeof(c), read(sync[0], &c, sizeof(c)));
	close(sync[0]);
	ASSERT_EQ(pid, waitpid(pid, &st, WUNTRACED));
	ASSERT_TRUE(WIFSTOPPED(st));
	ASSERT_EQ(0, ptrace(PTRACE_SEIZE, pid, 0, 0));
	ASSERT_EQ(0, ptrace(PTRACE_INTERRUPT, pid, 0, 0));
	ASSERT_EQ(pid, waitpid(pid, &st, __WALL));
	errno = 0;
	ret = ptrace(PTRACE_POKEDATA, pid, (void *)&c->magic, (void *)0x4141414141414141UL);
	EXPECT_EQ(-1, ret);
	EXPECT_TRUE(errno == EIO || errno == EFAULT);
	errno = 0;
	/* It can read it, though: the page is there, read-only. */
	ret = ptrace(PTRACE_PEEKDATA, pid, (void *)&c->magic, 0);
	EXPECT_EQ(0, errno);
	EXPECT_EQ(KNITK_MAGIC, (__u32)ret);
	ASSERT_EQ(0, ptrace(PTRACE_DETACH, pid, 0, 0));
	kill(pid, SIGCONT);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
}

TEST_HARNESS_MAIN
