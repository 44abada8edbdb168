// SPDX-License-Identifier: GPL-2.0
/*
 * A role belongs to the process that joined it, its whole thread group,
 * through every file table that holds an fd of the endpoint: it stays
 * while one of them holds an fd and ends, once, when none does.  It does
 * not end with the thread that joined, with the thread group's leader
 * alone, in a thread's unshared table (unshare(CLONE_FILES),
 * close_range(CLOSE_RANGE_UNSHARE)) or in an execve() that keeps the fd;
 * an execve() that closes an O_CLOEXEC fd, a dup2() over the fd and the
 * exit of the thread whose table held it last end it, and a SIGKILL ends
 * it at once though a forked helper holds the knot's mappings
 * (MADV_DOFORK).  Written from uapi/linux/knitk.h alone.
 */
#define _GNU_SOURCE
#include <linux/close_range.h>

#include "knitk_fixtures.h"

/*
 * A re-executed copy of this program (KNITK_ADV_EXEC set) is a worker that
 * survived execve(): it reports on KNITK_ADV_READY, and in "keep" mode
 * closes the inherited endpoint KNITK_ADV_FD when KNITK_ADV_GO is readable.
 */
static int env_int(const char *name)
{
	const char *v = getenv(name);

	return v ? atoi(v) : -1;
}

__attribute__((constructor)) static void adv_exec_entry(void)
{
	const char *mode = getenv("KNITK_ADV_EXEC");
	int ready = env_int("KNITK_ADV_READY");
	char c = 'r';

	if (!mode)
		return;
	if (write(ready, &c, 1) != 1)
		_exit(1);
	if (!strcmp(mode, "keep")) {
		if (read(env_int("KNITK_ADV_GO"), &c, 1) != 1)
			_exit(1);
		close(env_int("KNITK_ADV_FD"));
		if (write(ready, &c, 1) != 1)
			_exit(1);
	}
	for (;;)
		pause();
}

static int alive(pid_t pid)
{
	return waitpid(pid, NULL, WNOHANG) == 0;
}

/*
 * A worker that maps the knot, asks for its mappings to be inherited
 * (MADV_DOFORK) and forks a helper holding its fd and mappings, is
 * SIGKILLed: its role dies at once, while the helper lives on.
 */
TEST_F(adv, sigkill_with_dofork_helper)
{
	const struct knitk_control *ctl = self->k.ctl;
	int pfd[2];
	pid_t w, helper = 0;

	ASSERT_EQ(0, pipe(pfd));
	w = fork();
	ASSERT_LE(0, w);
	if (w == 0) {
		struct knot me = { .layout = self->k.layout };

		me.fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
		if (me.fd < 0 || knot_map(&me))
			_exit(1);
		if (madvise((void *)me.ctl, me.layout.control_size,
			    MADV_DOFORK) ||
		    madvise(me.data, me.layout.size - me.layout.control_size,
			    MADV_DOFORK))
			_exit(2);
		helper = fork();
		if (helper < 0)
			_exit(3);
		if (helper == 0) {
			/* Touch the inherited mapping: it must be there. */
			if (knitk_load32(&me.ctl->magic) != KNITK_MAGIC)
				_exit(4);
			for (;;)
				pause();
		}
		if (write(pfd[1], &helper, sizeof(helper)) != sizeof(helper))
			_exit(5);
		for (;;)
			pause();
	}
	track(self, w);
	ASSERT_EQ((ssize_t)sizeof(helper), read(pfd[0], &helper, sizeof(helper)));
	track(self, helper);
	EXPECT_EQ(HOST_BIT | 1ULL, knitk_load64(&ctl->live));

	kill(w, SIGKILL);
	wait_dead(self->k.ctl, 0);
	expect_live(_metadata, ctl, HOST_BIT, 1U);
	/* Reaped, the worker has handed the helper to us (subreaper). */
	ASSERT_EQ(w, waitpid(w, NULL, 0));
	self->pids[0] = 0;
	EXPECT_TRUE(alive(helper));
	/* The helper's exit is no second death. */
	kill(helper, SIGKILL);
	waitpid(helper, NULL, 0);
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));
	close(pfd[0]);
	close(pfd[1]);
}

/* Clear O_CLOEXEC of @fd. */
static int keep_on_exec(int fd)
{
	int fl = fcntl(fd, F_GETFD);

	return fl < 0 ? -errno : fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
}

static void exec_self(const char *mode, int ready, int go, int fd)
{
	char *argv[] = { "role_owner_test", NULL };
	char buf[64];

	setenv("KNITK_ADV_EXEC", mode, 1);
	snprintf(buf, sizeof(buf), "%d", ready);
	setenv("KNITK_ADV_READY", buf, 1);
	snprintf(buf, sizeof(buf), "%d", go);
	setenv("KNITK_ADV_GO", buf, 1);
	snprintf(buf, sizeof(buf), "%d", fd);
	setenv("KNITK_ADV_FD", buf, 1);
	keep_on_exec(ready);
	keep_on_exec(go);
	execv("/proc/self/exe", argv);
	_exit(127);
}

/*
 * Pipes @rp (child to test) and @gp (test to child) made and a child
 * forked: its pid, tracked, or 0 in the child.
 */
static pid_t fork_piped(struct __test_metadata *_metadata,
			FIXTURE_DATA(adv) *self, int rp[2], int gp[2])
{
	pid_t w;

	ASSERT_EQ(0, pipe(rp));
	ASSERT_EQ(0, pipe(gp));
	w = fork();
	ASSERT_LE(0, w);
	if (w)
		track(self, w);
	return w;
}

/*
 * A child joined as worker 0 (the fd kept across execve() if @keep) runs
 * this program again in @mode, with pipes @rp (it says "r" once it runs)
 * and @gp (told to go on); returns once it runs.
 */
static pid_t fork_exec_worker(struct __test_metadata *_metadata,
			      FIXTURE_DATA(adv) *self, const char *mode,
			      bool keep, int rp[2], int gp[2])
{
	pid_t w = fork_piped(_metadata, self, rp, gp);

	if (w == 0) {
		int fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);

		if (fd < 0 || (keep && keep_on_exec(fd)))
			_exit(1);
		exec_self(mode, rp[1], gp[0], fd);
	}
	ASSERT_EQ('r', read_byte(rp[0]));
	return w;
}

/* Worker 0's role ended, once, while its process @w lives on. */
static void expect_ended_alive(struct __test_metadata *_metadata,
			       FIXTURE_DATA(adv) *self, pid_t w)
{
	const struct knitk_control *ctl = self->k.ctl;

	EXPECT_EQ(1ULL, knitk_load64(&ctl->dead) & 1ULL);
	expect_live(_metadata, ctl, HOST_BIT, 1U);
	EXPECT_TRUE(alive(w));
}

static void close_pair(int p[2])
{
	close(p[0]);
	close(p[1]);
}

/*
 * JOIN on an O_CLOEXEC fd, then execve(): the exec closes the fd, which
 * ends the role although the process lives on.
 */
TEST_F(adv, execve_closing_cloexec_fd_ends_role)
{
	int rp[2], gp[2];
	pid_t w;

	w = fork_exec_worker(_metadata, self, "sleep", false, rp, gp);
	/* The exec'd program runs: the role ended in execve() itself. */
	expect_ended_alive(_metadata, self, w);
	close_pair(rp);
	close_pair(gp);
}

/*
 * JOIN on an fd kept across execve(): the role survives the exec (same
 * process, same fd) and ends when the new program closes the fd.
 */
TEST_F(adv, execve_keeping_fd_keeps_role)
{
	const struct knitk_control *ctl = self->k.ctl;
	int rp[2], gp[2];
	pid_t w;

	w = fork_exec_worker(_metadata, self, "keep", true, rp, gp);
	expect_live(_metadata, ctl, HOST_BIT | 1ULL, 0U);
	ASSERT_EQ(1, write(gp[1], "g", 1));
	ASSERT_EQ('g', read_byte(rp[0]));
	expect_ended_alive(_metadata, self, w);
	close_pair(rp);
	close_pair(gp);
}

/* Whether thread @tid of this process is gone from /proc. */
static int thread_gone(pid_t tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d", tid);
	return access(path, F_OK) != 0;
}

struct joiner {
	const struct knot *k;
	int fd;
	pid_t tid;
};

static void *joiner_run(void *arg)
{
	struct joiner *j = arg;

	j->tid = knitk_gettid();
	j->fd = knot_endpoint(j->k, KNITK_ROLE_WORKER, 0);
	return NULL;
}

/*
 * A thread joins and exits: the role belongs to the thread group, so it
 * stays live until the process closes the fd.
 */
TEST_F(adv, joining_thread_exit_keeps_role)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct joiner j = { .k = &self->k, .fd = -1 };
	pthread_t t;

	ASSERT_EQ(0, pthread_create(&t, NULL, joiner_run, &j));
	pthread_join(t, NULL);
	ASSERT_LE(0, j.fd);
	while (!thread_gone(j.tid))
		usleep(1000);
	expect_live(_metadata, ctl, HOST_BIT | 1ULL, 0U);
	close(j.fd);
	expect_live(_metadata, ctl, HOST_BIT, 1U);
}

struct leader_exit {
	pid_t leader;
	int fd;
	int ready;
	int go;
};

static void *survivor_run(void *arg)
{
	struct leader_exit *le = arg;
	char c = 'z';

	/* The leader is a zombie while the group lives on. */
	while (knitk_thread_state(le->leader, le->leader) != 'Z')
		usleep(1000);
	if (write(le->ready, &c, 1) != 1)
		_exit(1);
	if (read(le->go, &c, 1) != 1)
		_exit(1);
	close(le->fd);
	c = 'c';
	if (write(le->ready, &c, 1) != 1)
		_exit(1);
	for (;;)
		pause();
	return NULL;
}

/*
 * The main thread of the joining process joins, then exits alone
 * (SYS_exit): the process lives on in another thread, so the role stays
 * live; it ends when that thread closes the fd.
 */
TEST_F(adv, leader_thread_exit_keeps_role)
{
	const struct knitk_control *ctl = self->k.ctl;
	int rp[2], gp[2];

	if (fork_piped(_metadata, self, rp, gp) == 0) {
		static struct leader_exit le;
		pthread_t t;

		le.leader = getpid();
		le.fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
		le.ready = rp[1];
		le.go = gp[0];
		if (le.fd < 0 || pthread_create(&t, NULL, survivor_run, &le))
			_exit(1);
		syscall(SYS_exit, 0);
	}
	ASSERT_EQ('z', read_byte(rp[0]));
	expect_live(_metadata, ctl, HOST_BIT | 1ULL, 0U);
	ASSERT_EQ(1, write(gp[1], "g", 1));
	ASSERT_EQ('c', read_byte(rp[0]));
	expect_live(_metadata, ctl, HOST_BIT, 1U);
	close_pair(rp);
	close_pair(gp);
}

struct unsharer {
	int fd;		/* closed in the unshared table, or -1 */
	int ret;
	int done[2];	/* thread -> test: unshared (and closed) */
	int stay;	/* stay alive after that */
	pid_t tid;
};

static void *unsharer_run(void *arg)
{
	struct unsharer *u = arg;
	char c = 'u';

	u->tid = knitk_gettid();
	u->ret = unshare(CLONE_FILES) ? -errno : 0;
	if (!u->ret && u->fd >= 0)
		u->ret = close(u->fd) ? -errno : 0;
	if (write(u->done[1], &c, 1) != 1)
		u->ret = -EIO;
	while (u->stay)
		pause();
	return NULL;
}

/*
 * A thread of the owner unshares its file table and closes the endpoint
 * there: the main table still holds an fd of it, so the role stays (the
 * JOIN doc: no table of the process's threads holds another fd); the
 * close of that last fd ends it, once.  The thread stays alive, so its
 * table's other fds stay open.
 */
TEST_F(adv, unshared_thread_close_keeps_role)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct unsharer u = { .stay = 1 };
	pthread_t t;
	int fd;

	fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, fd);
	u.fd = fd;
	ASSERT_EQ(0, pipe(u.done));
	ASSERT_EQ(0, pthread_create(&t, NULL, unsharer_run, &u));
	ASSERT_EQ('u', read_byte(u.done[0]));
	ASSERT_EQ(0, u.ret);
	expect_live(_metadata, ctl, HOST_BIT | 1ULL, 0U);
	close(fd);
	expect_live(_metadata, ctl, HOST_BIT, 1U);
	pthread_detach(t);
}

/*
 * A thread of the owner unshares its file table (e.g. a helper thread
 * about to drop fds) and exits without closing anything by hand.  The
 * process still holds every fd in its main table, so by "the role ends
 * when that process exits ... or closes its last fd" no role may end.
 */
TEST_F(adv, unshared_thread_exit_keeps_roles)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct unsharer u = { .fd = -1, .stay = 0 };
	pthread_t t;
	int fd;

	fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, pipe(u.done));
	ASSERT_EQ(0, pthread_create(&t, NULL, unsharer_run, &u));
	ASSERT_EQ('u', read_byte(u.done[0]));
	ASSERT_EQ(0, u.ret);
	pthread_join(t, NULL);
	/* Its table is gone once the thread is gone from /proc. */
	while (!thread_gone(u.tid))
		usleep(1000);
	expect_live(_metadata, ctl, HOST_BIT | 1ULL, 0U);
	close(fd);
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));
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

TEST_HARNESS_MAIN
