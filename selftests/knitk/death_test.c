// SPDX-License-Identifier: GPL-2.0
/*
 * What ends a role: the process that joined it exiting (even by SIGKILL)
 * or closing its last fd of the endpoint, whatever forked children,
 * descriptors held elsewhere or mappings still hold the file; each role
 * is marked dead exactly once.  The host joins the fixture's knot and
 * sleeps in KNITK_IOC_WAIT while a helper thread ends a worker's role.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/prctl.h>

#include "knitk_harness.h"
#include "knitk_test.h"
#include "knitk_trigger.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	(1ULL << KNITK_DOORBELL_HOST)

FIXTURE(death) {
	struct knot k;
	pid_t child;		/* a worker process */
	pid_t grandchild;	/* its child, ours once the worker died */
	int ready[2];		/* children -> parent */
};

FIXTURE_SETUP(death)
{
	struct knitk_geometry g;

	KNITK_REQUIRE_DEV();
	self->child = -1;
	self->grandchild = -1;
	/* Orphaned grandchildren come to us, to be checked and reaped. */
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, pipe(self->ready));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
}

static void reap(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, NULL, 0);
	}
	*pid = -1;
}

FIXTURE_TEARDOWN(death)
{
	reap(&self->child);
	reap(&self->grandchild);
	close(self->ready[0]);
	close(self->ready[1]);
	knot_close(&self->k);
}

/*
 * The host sleeps on its doorbell while @t ends a worker's role: the death
 * must wake it, and count as a peer event, not a spurious wake.
 */
static void host_sleep_through(struct __test_metadata *_metadata,
			       FIXTURE_DATA(death) *self, struct trigger *t)
{
	struct knitk_doorbell_stats st;

	t->fd = self->k.fd;
	t->doorbell = HOST;
	EXPECT_EQ(0, trigger_sleep(_metadata, t, knot_doorbell(&self->k, HOST),
				   self->k.fd));
	EXPECT_EQ(0, t->ret);
	ASSERT_EQ(0, knitk_stats(self->k.fd, HOST, &st));
	EXPECT_EQ(1ULL, st.waits);
	EXPECT_EQ(0ULL, st.spurious);
	EXPECT_EQ(0ULL, st.timeouts);
}

/* A worker endpoint of the fixture's knot in this process, mapped. */
static int mapped_worker(FIXTURE_DATA(death) *self, struct knot *w,
			 __u32 worker)
{
	memset(w, 0, sizeof(*w));
	w->layout = self->k.layout;
	w->fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, worker);
	if (w->fd < 0)
		return w->fd;
	return knot_map(w);
}

/* Closing the fd is the death, although the worker still maps the knot. */
TEST_F(death, close_while_mapped)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct trigger t = { .kill_pid = -1 };
	struct knot w;

	ASSERT_EQ(0, mapped_worker(self, &w, 0));
	t.close_fd = w.fd;
	host_sleep_through(_metadata, self, &t);
	w.fd = -1;
	EXPECT_EQ(1ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));

	/* The mapping outlives the role; its end is no second death. */
	EXPECT_EQ(KNITK_MAGIC, w.ctl->magic);
	knot_unmap(&w);
	EXPECT_EQ(1ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));
}

/*
 * A role ended by close is free at once; the release of the old endpoint
 * (its last unmap) is not a death of the role's next holder.
 */
TEST_F(death, release_after_end_spares_next_joiner)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct knot old;
	__u32 gen = 0;
	int next;

	ASSERT_EQ(0, mapped_worker(self, &old, 0));
	close(old.fd);
	old.fd = -1;
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));

	next = knitk_open();
	ASSERT_LE(0, next);
	ASSERT_EQ(0, knitk_attach(next, self->k.fd, NULL));
	ASSERT_EQ(0, knitk_join(next, KNITK_ROLE_WORKER, 0, &gen));
	EXPECT_EQ(2U, gen);
	EXPECT_EQ(HOST_BIT | 1ULL, knitk_load64(&ctl->live));
	EXPECT_EQ(0ULL, knitk_load64(&ctl->dead));

	knot_unmap(&old);
	EXPECT_EQ(HOST_BIT | 1ULL, knitk_load64(&ctl->live));
	EXPECT_EQ(0ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));

	close(next);
	EXPECT_EQ(1ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(2U, knitk_load32(&ctl->death_seq));
}

/* A dup()ed fd keeps the role: the close of the process's last fd ends it. */
TEST_F(death, dup_keeps_role_until_last_fd)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct knitk_doorbell *db = knot_doorbell(&self->k, HOST);
	struct knot w;
	__u32 seq;
	int d;

	ASSERT_EQ(0, mapped_worker(self, &w, 1));
	d = dup(w.fd);
	ASSERT_LE(0, d);
	seq = knitk_doorbell_seq(db);
	close(w.fd);
	w.fd = -1;
	EXPECT_EQ(HOST_BIT | 2ULL, knitk_load64(&ctl->live));
	EXPECT_EQ(0U, knitk_load32(&ctl->death_seq));
	EXPECT_EQ(seq, knitk_doorbell_seq(db));

	close(d);
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));
	EXPECT_NE(seq, knitk_doorbell_seq(db));
	knot_unmap(&w);
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));
}

/*
 * An fd passed over SCM_RIGHTS is the same endpoint, but the receiver is
 * not the process that joined: its close is no death, and it does not
 * keep the role alive once the joiner closed its own fd.  On the ended
 * role the receiver's KNITK_IOC_WAIT gives -ENOTCONN.
 */
TEST_F(death, fd_passed_to_another_process)
{
	const struct knitk_control *ctl = self->k.ctl;
	int sv[2], w, status;
	char b;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	self->child = fork();
	ASSERT_LE(0, self->child);
	if (self->child == 0) {
		int got;

		close(sv[0]);
		got = knitk_recv_fd(sv[1]);
		if (got < 0 || close(got) || write(sv[1], "c", 1) != 1)
			_exit(10);
		got = knitk_recv_fd(sv[1]);
		if (got < 0 || write(sv[1], "k", 1) != 1)
			_exit(11);
		/* Told when the joiner has closed its fd. */
		if (read(sv[1], &b, 1) != 1)
			_exit(12);
		b = (char)-knitk_wait(got, 0, 0);
		if (write(sv[1], &b, 1) != 1)
			_exit(13);
		for (;;)
			pause();
	}
	close(sv[1]);
	w = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, w);

	ASSERT_EQ(0, knitk_send_fd(sv[0], w));
	ASSERT_EQ(1, read(sv[0], &b, 1));
	EXPECT_EQ(HOST_BIT | 1ULL, knitk_load64(&ctl->live));
	EXPECT_EQ(0U, knitk_load32(&ctl->death_seq));

	ASSERT_EQ(0, knitk_send_fd(sv[0], w));
	ASSERT_EQ(1, read(sv[0], &b, 1));
	close(w);
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	EXPECT_EQ(1ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));

	ASSERT_EQ(1, write(sv[0], "g", 1));
	ASSERT_EQ(1, read(sv[0], &b, 1));
	EXPECT_EQ(ENOTCONN, b);

	/* The receiver's exit releases the endpoint: no second death. */
	kill(self->child, SIGKILL);
	ASSERT_EQ(self->child, waitpid(self->child, &status, 0));
	self->child = -1;
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));
	close(sv[0]);
}

/* What the worker's child tells the parent once it is set up. */
struct grandchild_msg {
	pid_t pid;
	int mapped;	/* the worker's mappings readable in the child */
};

/*
 * Fork a worker process that joins worker 0 and forks a child of its own,
 * then waits to be killed.  The child keeps the inherited fd, or with
 * @keep_only_maps closes every fd and keeps the worker's mappings
 * (inherited because the worker asked with MADV_DOFORK); then it sleeps.
 */
static void fork_worker_with_child(struct __test_metadata *_metadata,
				   FIXTURE_DATA(death) *self,
				   bool keep_only_maps)
{
	struct grandchild_msg m;

	self->child = fork();
	ASSERT_LE(0, self->child);
	if (self->child == 0) {
		int out = self->ready[1];
		struct knot c = { .layout = self->k.layout };
		pid_t g;

		knot_unmap(&self->k);
		c.fd = knitk_open();
		if (c.fd < 0 || knitk_attach(c.fd, self->k.fd, NULL))
			_exit(10);
		close(self->k.fd);
		if (knot_map(&c) || knitk_join(c.fd, KNITK_ROLE_WORKER, 0, NULL))
			_exit(11);
		if (keep_only_maps &&
		    (madvise((void *)c.ctl, c.layout.control_size, MADV_DOFORK) ||
		     madvise(c.data, c.layout.size - c.layout.control_size,
			     MADV_DOFORK)))
			_exit(12);
		g = fork();
		if (g < 0)
			_exit(13);
		if (g == 0) {
			if (keep_only_maps) {
				close_range(0, out - 1, 0);
				close_range(out + 1, ~0U, 0);
			}
			m.pid = getpid();
			m.mapped = !msync((void *)c.ctl, c.layout.control_size,
					  MS_ASYNC) &&
				   c.ctl->magic == KNITK_MAGIC &&
				   (c.ctl->live & 1ULL);
			if (write(out, &m, sizeof(m)) != sizeof(m))
				_exit(14);
			if (keep_only_maps)
				close(out);
			for (;;)
				pause();
		}
		for (;;)
			pause();
	}
	ASSERT_EQ((ssize_t)sizeof(m), read(self->ready[0], &m, sizeof(m)));
	self->grandchild = m.pid;
	EXPECT_EQ(keep_only_maps, m.mapped);
}

/* The worker is SIGKILLed: the host hears of it while its child lives. */
static void kill_worker_with_child(struct __test_metadata *_metadata,
				   FIXTURE_DATA(death) *self,
				   bool keep_only_maps)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct trigger t = { .close_fd = -1 };
	int status;
	char st;

	fork_worker_with_child(_metadata, self, keep_only_maps);
	EXPECT_EQ(HOST_BIT | 1ULL, knitk_load64(&ctl->live));
	t.kill_pid = self->child;
	host_sleep_through(_metadata, self, &t);
	EXPECT_EQ(1ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));

	/* Its child is still there, asleep, holding what it inherited. */
	st = knitk_thread_state(self->grandchild, self->grandchild);
	EXPECT_TRUE(st == 'S' || st == 'R') TH_LOG("child state %c", st);

	ASSERT_EQ(self->child, waitpid(self->child, &status, 0));
	self->child = -1;
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	/* Its child's exit, the endpoint's release, is no second death. */
	reap(&self->grandchild);
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));
}

TEST_F(death, sigkill_with_forked_child_holding_fd)
{
	kill_worker_with_child(_metadata, self, false);
}

TEST_F(death, sigkill_with_forked_child_holding_mappings)
{
	kill_worker_with_child(_metadata, self, true);
}

/* A forked child does not inherit the knot's mappings (VM_DONTCOPY). */
TEST_F(death, fork_does_not_inherit_mappings)
{
	size_t data_len = self->k.layout.size - self->k.layout.control_size;
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* msync fails with ENOMEM where nothing is mapped. */
		if (!msync((void *)self->k.ctl, self->k.layout.control_size,
			   MS_ASYNC) || errno != ENOMEM)
			_exit(10);
		if (!msync(self->k.data, data_len, MS_ASYNC) || errno != ENOMEM)
			_exit(11);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status))
		TH_LOG("child failed at step %d", WEXITSTATUS(status));
	/* The parent's own mappings are untouched. */
	EXPECT_EQ(KNITK_MAGIC, self->k.ctl->magic);
}

/*
 * Start a joiner of worker 1 that shares our file table (CLONE_FILES, no
 * CLONE_VM); return the fd of its endpoint, which is in our table too.
 */
static int clone_files_joiner(struct __test_metadata *_metadata,
			      FIXTURE_DATA(death) *self)
{
	int fd = -1;

	self->child = (pid_t)syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, 0, 0,
				     0);
	EXPECT_LE(0, self->child);
	if (self->child == 0) {
		fd = knitk_open();
		if (fd < 0 || knitk_attach(fd, self->k.fd, NULL) ||
		    knitk_join(fd, KNITK_ROLE_WORKER, 1, NULL))
			_exit(10);
		if (write(self->ready[1], &fd, sizeof(fd)) != sizeof(fd))
			_exit(11);
		for (;;)
			pause();
	}
	if (self->child > 0)
		EXPECT_EQ((ssize_t)sizeof(fd),
			  read(self->ready[0], &fd, sizeof(fd)));
	return fd;
}

/*
 * A joiner whose file table outlives it (shared with its parent through
 * CLONE_FILES): no close happens at its exit, and the exit alone must end
 * the role.  The fd stays in the shared table; its later close (by the
 * parent, not the joiner) and the release are no second death.
 */
TEST_F(death, sigkill_of_joiner_sharing_its_file_table)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct trigger t = { .close_fd = -1 };
	int status, fd;

	fd = clone_files_joiner(_metadata, self);
	ASSERT_LE(0, fd);
	EXPECT_EQ(HOST_BIT | 2ULL, knitk_load64(&ctl->live));

	t.kill_pid = self->child;
	host_sleep_through(_metadata, self, &t);
	ASSERT_EQ(self->child, waitpid(self->child, &status, 0));
	self->child = -1;
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));

	EXPECT_LE(0, fcntl(fd, F_GETFD));
	EXPECT_EQ(-ENOTCONN, knitk_wait(fd, 0, 0));
	close(fd);
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));
}

/*
 * The owner's exit and the endpoint's release race (the release by the
 * parent closing the shared table's fd as the joiner dies): whichever
 * ends the role, it dies once, and nothing of the exit watch outlives the
 * endpoint (the guest's kernel log is checked after the run).
 */
TEST_F(death, exit_and_release_race_die_once)
{
	const struct knitk_control *ctl = self->k.ctl;
	unsigned int i;
	int status, fd;

	for (i = 0; i < 20; i++) {
		fd = clone_files_joiner(_metadata, self);
		ASSERT_LE(0, fd);
		ASSERT_EQ(0, kill(self->child, SIGKILL));
		close(fd);
		ASSERT_EQ(self->child, waitpid(self->child, &status, 0));
		self->child = -1;
		/* The close ran the release: the role is dead, once. */
		EXPECT_EQ(i + 1, knitk_load32(&ctl->death_seq));
		EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	}
}

TEST_HARNESS_MAIN
