// SPDX-License-Identifier: GPL-2.0
/*
 * The end of a role, tried from userspace against every path that ends
 * it (docs/protocol.md P1, kmod/knitk_peer.c, kmod/knitk_mm.c): a worker
 * process joins a role of the test's knot and then dies in some awkward
 * way, and the test holds the control page (live, dead, death_seq) and
 * the knitk_role_end events of its own tracefs instance to "ended
 * exactly once, by this path, when it should, never before".
 *
 * The mm's release ends the role only when the owner's whole thread
 * group has exited (why=mm); an exec, a CLONE_VM child or vfork() child
 * that outlives the owner, or a task that holds the owner's mm a while
 * leaves the role to the later paths (why=exit: the close of the owner's
 * last fd by its exit), which must still end it once.
 *
 * The test process is a child subreaper, so that a grandchild orphaned
 * by the killed owner is still its to reap.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "knitk_harness.h"
#include "knitk_live.h"
#include "knitk_ring.h"
#include "knitk_test.h"
#include "knitk_tracefs.h"

#define HOST		KNITK_DOORBELL_HOST
#define SETTLE_US	200000
/* Only a lost death takes this long. */
#define DEATH_GUARD_NS	(60ULL * 1000 * 1000 * 1000)

/* A re-executed copy of this program: a worker whose fd survived execve(). */
__attribute__((constructor)) static void re_exec_entry(void)
{
	const char *ready = getenv("KNITK_RE_READY");
	char c = 'x';

	if (!ready)
		return;
	if (write(atoi(ready), &c, 1) != 1)
		_exit(1);
	for (;;)
		pause();
}

FIXTURE(re) {
	char inst[256];		/* the tracefs instance, "" if none */
	struct knot k;		/* the host's endpoint, joined here */
	unsigned long long id;	/* the knot's id in the events */
	struct trace t;
	int ready[2];		/* worker -> test: joined (and a pid) */
	int go[2];		/* test -> worker */
	pid_t kids[2];		/* killed at teardown if still there */
};

FIXTURE_SETUP(re)
{
	const struct tev *e = NULL;
	struct knitk_geometry g;
	size_t n;

	self->inst[0] = '\0';
	self->k.fd = -1;
	self->ready[0] = self->ready[1] = self->go[0] = self->go[1] = -1;
	self->kids[0] = self->kids[1] = 0;
	KNITK_REQUIRE_DEV();
	trace_instance_open(_metadata, self->inst, sizeof(self->inst),
			    "knitk_re", "4096");
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0));
	ASSERT_EQ(0, pipe(self->ready));
	ASSERT_EQ(0, pipe(self->go));

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	ASSERT_EQ(0, trace_read(self->inst, &self->t));
	for (n = 0; n < self->t.n; n++)
		if (!strcmp(self->t.ev[n].name, "knitk_knot_create") &&
		    self->t.ev[n].pid == getpid())
			e = &self->t.ev[n];
	ASSERT_NE(NULL, e) TH_LOG("no knitk_knot_create event of this process");
	self->id = (unsigned long long)tev_num(e, "knot", 0);
	ASSERT_NE(0, self->id);
}

FIXTURE_TEARDOWN(re)
{
	int i;

	trace_free(&self->t);
	for (i = 0; i < 2; i++) {
		/* A failed case's workers, so that their knots go too. */
		if (self->kids[i] > 0 &&
		    !waitpid(self->kids[i], NULL, WNOHANG | __WALL) &&
		    !kill(self->kids[i], SIGKILL))
			waitpid(self->kids[i], NULL, __WALL);
		if (self->ready[i] >= 0)
			close(self->ready[i]);
		if (self->go[i] >= 0)
			close(self->go[i]);
	}
	knot_close(&self->k);
	trace_instance_close(self->inst);
	/* Nothing of the test outlives it: every knot freed. */
	knitk_live_wait_zero();
}

/*
 * In a worker: its own mapping of the knot through its endpoint @fd (the
 * test's mappings are not inherited); _exit()s on failure.
 */
static void worker_map(FIXTURE_DATA(re) *self, int fd, struct knot *mine)
{
	memset(mine, 0, sizeof(*mine));
	mine->fd = fd;
	mine->layout = self->k.layout;
	if (fd < 0 || knot_map(mine))
		_exit(1);
}

/* In a worker: tell the test it is ready, with a pid (its own by default). */
static void say_ready(FIXTURE_DATA(re) *self, pid_t pid)
{
	if (write(self->ready[1], &pid, sizeof(pid)) != sizeof(pid))
		_exit(1);
}

/* In the test: the pid the worker sent, or -1. */
static pid_t hear_ready(FIXTURE_DATA(re) *self)
{
	pid_t pid;

	return read(self->ready[0], &pid, sizeof(pid)) == sizeof(pid) ? pid : -1;
}

static void kill_reap(struct __test_metadata *_metadata, pid_t pid)
{
	int status;

	ASSERT_EQ(0, kill(pid, SIGKILL));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
		TH_LOG("pid %d status %#x", pid, status);
}

/*
 * death_seq once it reached @n (or the guard ran out), after a settle in
 * which a second end of the same role would show.
 */
static __u32 deaths(FIXTURE_DATA(re) *self, __u32 n)
{
	__u64 end = knitk_now_ns() + DEATH_GUARD_NS;

	while (knitk_load32(&self->k.ctl->death_seq) < n &&
	       knitk_now_ns() < end)
		usleep(1000);
	usleep(SETTLE_US);
	return knitk_load32(&self->k.ctl->death_seq);
}

static __u64 live_bits(FIXTURE_DATA(re) *self)
{
	return knitk_load64(&self->k.ctl->live);
}

static __u64 dead_bits(FIXTURE_DATA(re) *self)
{
	return knitk_load64(&self->k.ctl->dead);
}

/* knitk_role_end events of worker slot @w (any pid, any why). */
static size_t ends_of(FIXTURE_DATA(re) *self, unsigned int w)
{
	return trace_count(&self->t, "knitk_role_end",
			   "knot=%llu role=worker doorbell=%u", self->id, w);
}

static size_t ends_why(FIXTURE_DATA(re) *self, pid_t pid, const char *why)
{
	return trace_count(&self->t, "knitk_role_end",
			   "knot=%llu role=worker pid=%d why=%s", self->id,
			   pid, why);
}

/* The role of worker 0, ended once by @why (NULL: mm or exit) of @pid. */
static void expect_one_end(struct __test_metadata *_metadata,
			   FIXTURE_DATA(re) *self, pid_t pid, const char *why,
			   __u32 seq)
{
	EXPECT_EQ(seq, deaths(self, seq));
	EXPECT_EQ(0, live_bits(self) & 1);
	EXPECT_EQ(1, dead_bits(self) & 1);
	trace_collect(_metadata, self->inst, &self->t);
	EXPECT_EQ(seq, ends_of(self, 0));
	if (why) {
		EXPECT_EQ(1, ends_why(self, pid, why));
	} else {
		EXPECT_EQ(1, ends_why(self, pid, "mm") +
			     ends_why(self, pid, "exit"));
	}
}

/* A host thread in KNITK_IOC_WAIT on its doorbell. */
struct host_waiter {
	pthread_t thread;
	int fd;
	__u32 seq;
	int ret;
};

static void *host_wait_run(void *arg)
{
	struct host_waiter *h = arg;

	h->ret = knitk_wait(h->fd, h->seq, knitk_now_ns() + KNITK_LONG_NS);
	return NULL;
}

static void host_wait_start(struct __test_metadata *_metadata,
			    FIXTURE_DATA(re) *self, struct host_waiter *h)
{
	struct knitk_doorbell_stats st;

	ASSERT_EQ(0, knitk_stats(self->k.fd, HOST, &st));
	h->fd = self->k.fd;
	h->seq = knitk_doorbell_seq(knot_doorbell(&self->k, HOST));
	h->ret = 1;
	ASSERT_EQ(0, pthread_create(&h->thread, NULL, host_wait_run, h));
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, HOST, st.waits + 1));
}

/* Worker threads: blocked in KNITK_IOC_WAIT, spinning, or parked. */
static struct knot *wait_knot;	/* the worker's own mapping */

static void *wait_forever(void *arg)
{
	int fd = *(int *)arg;

	for (;;)
		knitk_wait(fd, knitk_doorbell_seq(knot_doorbell(wait_knot, 0)),
			   knitk_now_ns() + KNITK_LONG_NS);
	return NULL;
}

static void *spin_forever(void *arg __attribute__((unused)))
{
	static atomic_ulong n;

	for (;;)
		atomic_fetch_add(&n, 1);
	return NULL;
}

static void *park_forever(void *arg __attribute__((unused)))
{
	for (;;)
		pause();
	return NULL;
}

/*
 * A multi-threaded worker (threads in KNITK_IOC_WAIT, one in a uring
 * wait, spinning, parked) SIGKILLed: its role ends once, as its mm goes,
 * and the host sleeping on its doorbell wakes for it.
 */
TEST_F(re, threaded_owner_killed_ends_once_by_mm)
{
	struct host_waiter h;
	pid_t w;

	w = fork();
	ASSERT_LE(0, w);
	self->kids[0] = w;
	if (w == 0) {
		static int fd;
		struct knot mine;
		struct io_uring ring;
		struct io_uring_sqe *sqe;
		pthread_t t;
		int i;

		fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
		worker_map(self, fd, &mine);
		if (io_uring_queue_init(8, &ring, 0))
			_exit(1);
		sqe = io_uring_get_sqe(&ring);
		prep_raw_wait(sqe, fd, 0,
			      knitk_doorbell_seq(knot_doorbell(&mine, 0)),
			      knitk_now_ns() + KNITK_LONG_NS, 1);
		if (io_uring_submit(&ring) != 1)
			_exit(1);
		until_uring_asleep(fd, 0, 1);
		wait_knot = &mine;
		for (i = 0; i < 3; i++)
			if (pthread_create(&t, NULL, wait_forever, &fd))
				_exit(1);
		if (pthread_create(&t, NULL, spin_forever, NULL) ||
		    pthread_create(&t, NULL, park_forever, NULL))
			_exit(1);
		if (knitk_wait_asleep(fd, 0, 3))
			_exit(1);
		say_ready(self, getpid());
		for (;;)
			pause();
	}
	ASSERT_EQ(w, hear_ready(self));
	EXPECT_EQ(1, live_bits(self) & 1);
	host_wait_start(_metadata, self, &h);
	kill_reap(_metadata, w);
	ASSERT_EQ(0, pthread_join(h.thread, NULL));
	EXPECT_EQ(0, h.ret);
	expect_one_end(_metadata, self, w, "mm", 1);
	trace_dump_if_failed(_metadata, &self->t);
}

/* The worker's last thread, blocked until the test writes go. */
static void *last_thread(void *arg)
{
	FIXTURE_DATA(re) *self = arg;
	char c;

	if (read(self->go[0], &c, 1) != 1)
		_exit(1);
	return NULL;	/* the last thread: the process exits 0 */
}

/*
 * The main thread leaves with pthread_exit() while another thread lives:
 * the role stays; the last thread's exit then ends it once.
 */
TEST_F(re, main_thread_exit_keeps_role_until_last_thread)
{
	int status, i;
	pid_t w;
	char c = 'g';

	w = fork();
	ASSERT_LE(0, w);
	self->kids[0] = w;
	if (w == 0) {
		pthread_t t;

		if (knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0) < 0 ||
		    pthread_create(&t, NULL, last_thread, self))
			_exit(1);
		say_ready(self, getpid());
		pthread_exit(NULL);
	}
	ASSERT_EQ(w, hear_ready(self));
	for (i = 0; i < 60000 && knitk_thread_state(w, w) != 'Z'; i++)
		usleep(1000);
	ASSERT_EQ('Z', knitk_thread_state(w, w));
	usleep(SETTLE_US);
	EXPECT_EQ(1, live_bits(self) & 1);
	EXPECT_EQ(0, dead_bits(self) & 1);
	EXPECT_EQ(0, knitk_load32(&self->k.ctl->death_seq));
	trace_collect(_metadata, self->inst, &self->t);
	EXPECT_EQ(0, ends_of(self, 0));

	ASSERT_EQ(1, write(self->go[1], &c, 1));
	ASSERT_EQ(w, waitpid(w, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	expect_one_end(_metadata, self, w, "mm", 1);
	trace_dump_if_failed(_metadata, &self->t);
}

/*
 * The owner @w killed, then its child @c that outlived it: the owner's
 * role ended once, by @why, and the child's exit ended nothing more.
 */
static void owner_then_child_killed(struct __test_metadata *_metadata,
				    FIXTURE_DATA(re) *self, pid_t w, pid_t c,
				    const char *why)
{
	kill_reap(_metadata, w);
	expect_one_end(_metadata, self, w, why, 1);
	kill_reap(_metadata, c);
	EXPECT_EQ(1, deaths(self, 2));
	trace_collect(_metadata, self->inst, &self->t);
	EXPECT_EQ(1, ends_of(self, 0));
	trace_dump_if_failed(_metadata, &self->t);
}

/*
 * The owner forks a child that keeps the fd (and, with MADV_DOFORK, the
 * mapping); the owner killed: the role ends, the child does not keep it;
 * the child's later exit ends nothing more.
 */
TEST_F(re, forked_child_does_not_keep_role)
{
	pid_t w, c;

	w = fork();
	ASSERT_LE(0, w);
	self->kids[0] = w;
	if (w == 0) {
		struct knot mine;
		pid_t cc;

		worker_map(self, knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0),
			   &mine);
		if (madvise((void *)mine.ctl, mine.layout.control_size,
			    MADV_DOFORK))
			_exit(1);
		cc = fork();
		if (cc < 0)
			_exit(1);
		if (cc == 0) {
			say_ready(self, getpid());
			for (;;)
				pause();
		}
		for (;;)
			pause();
	}
	c = hear_ready(self);
	ASSERT_LT(0, c);
	self->kids[1] = c;
	owner_then_child_killed(_metadata, self, w, c, "mm");
}

static int clone_vm_child(void *arg __attribute__((unused)))
{
	for (;;)
		syscall(SYS_pause);
	return 0;
}

/*
 * The owner's CLONE_VM child (its own fd table) outlives the owner: the
 * owner's exit does not release the mm, so the role ends by the close of
 * the owner's fds at its exit, once; the child's exit, whose release of
 * the mm is the last, ends nothing more.
 */
TEST_F(re, clone_vm_child_outlives_owner)
{
	pid_t w, c;

	w = fork();
	ASSERT_LE(0, w);
	self->kids[0] = w;
	if (w == 0) {
		size_t sz = 256 * 1024;
		char *stack = malloc(sz);
		pid_t cc;

		if (!stack || knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0) < 0)
			_exit(1);
		cc = clone(clone_vm_child, stack + sz, CLONE_VM | SIGCHLD, NULL);
		if (cc < 0)
			_exit(1);
		say_ready(self, cc);
		for (;;)
			pause();
	}
	c = hear_ready(self);
	ASSERT_LT(0, c);
	self->kids[1] = c;
	usleep(SETTLE_US);
	EXPECT_EQ(0, knitk_load32(&self->k.ctl->death_seq));
	owner_then_child_killed(_metadata, self, w, c, "exit");
}

/*
 * The same with vfork(): the owner, killed while it waits for its vfork()
 * child, ends its role once; the child's exit ends nothing more.
 */
TEST_F(re, vfork_child_outlives_owner)
{
	pid_t w, c;

	w = fork();
	ASSERT_LE(0, w);
	self->kids[0] = w;
	if (w == 0) {
		int fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
		int out = self->ready[1];
		pid_t cc;

		if (fd < 0)
			_exit(1);
		cc = vfork();
		if (cc == 0) {
			pid_t me = (pid_t)syscall(SYS_getpid);

			if (syscall(SYS_write, out, &me, sizeof(me)) != sizeof(me))
				syscall(SYS_exit, 1);
			for (;;)
				syscall(SYS_pause);
		}
		_exit(0);	/* not reached: killed in vfork() */
	}
	c = hear_ready(self);
	ASSERT_LT(0, c);
	self->kids[1] = c;
	/* The owner asleep in vfork(), the child paused. */
	usleep(SETTLE_US);
	EXPECT_EQ(1, live_bits(self) & 1);
	owner_then_child_killed(_metadata, self, w, c, "exit");
}

/* Readers of the owner's /proc files, each read taking its mm a while. */
struct mm_reader {
	pthread_t thread;
	pid_t pid;
	const char *file;
	atomic_int *stop;
};

static void *mm_read_run(void *arg)
{
	struct mm_reader *r = arg;
	char path[64], buf[4096];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", r->pid, r->file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	/* Errors too (an unmapped address, a dead mm): the mm was taken. */
	while (!atomic_load(r->stop))
		(void)!pread(fd, buf, sizeof(buf),
			     strcmp(r->file, "mem") ? 0 : 0x10000);
	close(fd);
	return NULL;
}

/*
 * The owner killed while other tasks read its memory through /proc (each
 * read holds its mm, so the last mmput may be theirs): the role ends
 * exactly once each round, by the mm or by the exit.
 */
TEST_F(re, mm_held_by_proc_readers)
{
	static const char *const files[] = { "mem", "environ", "cmdline",
					     "mem" };
	struct mm_reader rd[4];
	unsigned int round, i, by_mm = 0;
	atomic_int stop;

	for (round = 1; round <= 12; round++) {
		pid_t w = fork();

		ASSERT_LE(0, w);
		self->kids[0] = w;
		if (w == 0) {
			if (knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0) < 0)
				_exit(1);
			say_ready(self, getpid());
			for (;;)
				pause();
		}
		ASSERT_EQ(w, hear_ready(self));
		atomic_store(&stop, 0);
		for (i = 0; i < 4; i++) {
			rd[i].pid = w;
			rd[i].file = files[i];
			rd[i].stop = &stop;
			ASSERT_EQ(0, pthread_create(&rd[i].thread, NULL,
						    mm_read_run, &rd[i]));
		}
		usleep(round * 1000);
		kill_reap(_metadata, w);
		atomic_store(&stop, 1);
		for (i = 0; i < 4; i++)
			pthread_join(rd[i].thread, NULL);
		expect_one_end(_metadata, self, w, NULL, round);
		by_mm += ends_why(self, w, "mm");
	}
	TH_LOG("%u of 12 ended by the mm", by_mm);
	trace_dump_if_failed(_metadata, &self->t);
}

/*
 * A ptrace-attached owner (threads and all) killed: one end, by the mm or
 * the exit, never twice, and the exit watch's wake for the leader changes
 * nothing.
 */
/* Read every byte left in the go pipe, once no child reads it. */
static void drain_go(FIXTURE_DATA(re) *self)
{
	struct pollfd p = { .fd = self->go[0], .events = POLLIN };
	char c;

	while (poll(&p, 1, 0) == 1 && read(self->go[0], &c, 1) == 1)
		;
}

TEST_F(re, ptraced_owner_killed)
{
	unsigned int round;

	for (round = 1; round <= 6; round++) {
		pid_t w = fork();
		int status, i;
		char c = 'g';

		ASSERT_LE(0, w);
		self->kids[0] = w;
		if (w == 0) {
			pthread_t t;

			if (knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0) < 0 ||
			    pthread_create(&t, NULL, park_forever, NULL) ||
			    pthread_create(&t, NULL, park_forever, NULL))
				_exit(1);
			say_ready(self, getpid());
			if (read(self->go[0], &c, 1) != 1)
				_exit(1);
			if (round & 1)
				pthread_exit(NULL);	/* a zombie leader */
			for (;;)
				pause();
		}
		ASSERT_EQ(w, hear_ready(self));
		ASSERT_EQ(0, ptrace(PTRACE_SEIZE, w, NULL, NULL));
		ASSERT_EQ(1, write(self->go[1], &c, 1));
		if (round & 1) {
			for (i = 0; i < 60000 && knitk_thread_state(w, w) != 'Z';
			     i++)
				usleep(1000);
			EXPECT_EQ('Z', knitk_thread_state(w, w));
			usleep(SETTLE_US);
			/* The exit watch woke for the leader: no end. */
			EXPECT_EQ(round - 1,
				  knitk_load32(&self->k.ctl->death_seq));
			EXPECT_EQ(1, live_bits(self) & 1);
		}
		ASSERT_EQ(0, kill(w, SIGKILL));
		/* Any stop continued, until the group's end is reaped. */
		for (;;) {
			pid_t p = waitpid(w, &status, __WALL);

			ASSERT_EQ(w, p);
			if (WIFSTOPPED(status)) {
				ptrace(PTRACE_CONT, w, NULL, NULL);
				continue;
			}
			if (WIFEXITED(status) || WIFSIGNALED(status))
				break;
		}
		/*
		 * A round's child may die before it reads its go byte: left in
		 * the pipe, it would let the next child end its leader before
		 * the PTRACE_SEIZE (EPERM on a zombie).
		 */
		drain_go(self);
		expect_one_end(_metadata, self, w, NULL, round);
	}
	trace_dump_if_failed(_metadata, &self->t);
}

static void exec_self(FIXTURE_DATA(re) *self)
{
	char *argv[] = { "role_end_exec", NULL };
	char env[32];

	snprintf(env, sizeof(env), "%d", self->ready[1]);
	setenv("KNITK_RE_READY", env, 1);
	execv("/proc/self/exe", argv);
	_exit(1);
}

static void *exec_thread(void *arg)
{
	exec_self(arg);
	return NULL;
}

/*
 * JOIN on an fd kept across execve(), from the main thread (@thread
 * false) or another thread: the exec's release of the old mm ends
 * nothing; the exec'd program killed ends the role once, by its exit
 * (the new mm is not watched).
 */
static void exec_case(struct __test_metadata *_metadata,
		      FIXTURE_DATA(re) *self, bool thread)
{
	pid_t w;
	char c;

	w = fork();
	ASSERT_LE(0, w);
	self->kids[0] = w;
	if (w == 0) {
		int fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
		pthread_t t;

		if (fd < 0 || fcntl(fd, F_SETFD, 0) ||
		    fcntl(self->ready[1], F_SETFD, 0))
			_exit(1);
		if (!thread)
			exec_self(self);
		if (pthread_create(&t, NULL, park_forever, NULL) ||
		    pthread_create(&t, NULL, exec_thread, self))
			_exit(1);
		for (;;)
			pause();
	}
	ASSERT_EQ(1, read(self->ready[0], &c, 1));
	ASSERT_EQ('x', c);
	usleep(SETTLE_US);
	EXPECT_EQ(1, live_bits(self) & 1);
	EXPECT_EQ(0, dead_bits(self) & 1);
	EXPECT_EQ(0, knitk_load32(&self->k.ctl->death_seq));
	trace_collect(_metadata, self->inst, &self->t);
	EXPECT_EQ(0, ends_of(self, 0));
	kill_reap(_metadata, w);
	expect_one_end(_metadata, self, w, "exit", 1);
	trace_dump_if_failed(_metadata, &self->t);
}

TEST_F(re, exec_keeps_role_then_kill_ends_once)
{
	exec_case(_metadata, self, false);
}

TEST_F(re, exec_from_thread_keeps_role_then_kill_ends_once)
{
	exec_case(_metadata, self, true);
}

/*
 * One process joins and closes roles over and over (each watch of its mm
 * taken and put), then holds both worker roles and a host role of a knot
 * of its own, and is killed: every role ends once, the churned ones by
 * their close, the held ones by the mm.
 */
TEST_F(re, churn_then_many_roles_killed)
{
	const unsigned int churn = 100;
	pid_t w;

	w = fork();
	ASSERT_LE(0, w);
	self->kids[0] = w;
	if (w == 0) {
		struct knitk_geometry g;
		struct knot own;
		unsigned int i;
		int fd;

		for (i = 0; i < churn; i++) {
			fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, i & 1);
			if (fd < 0)
				_exit(1);
			close(fd);
		}
		knitk_geom_small(&g);
		if (knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0) < 0 ||
		    knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1) < 0 ||
		    knot_make(&own, &g) ||
		    knitk_join(own.fd, KNITK_ROLE_HOST, 0, NULL))
			_exit(1);
		say_ready(self, getpid());
		for (;;)
			pause();
	}
	ASSERT_EQ(w, hear_ready(self));
	EXPECT_EQ(3, live_bits(self) & 3);
	EXPECT_EQ(churn, knitk_load32(&self->k.ctl->death_seq));
	kill_reap(_metadata, w);
	EXPECT_EQ(churn + 2, deaths(self, churn + 2));
	EXPECT_EQ(0, live_bits(self) & 3);
	EXPECT_EQ(3, dead_bits(self) & 3);
	trace_collect(_metadata, self->inst, &self->t);
	EXPECT_EQ(churn, ends_why(self, w, "close"));
	EXPECT_EQ(2, ends_why(self, w, "mm"));
	EXPECT_EQ(churn + 2, ends_of(self, 0) + ends_of(self, 1));
	/* The host of its own knot, ended by the mm too. */
	EXPECT_EQ(1, trace_count(&self->t, "knitk_role_end",
				 "role=host pid=%d why=mm", w));
	trace_dump_if_failed(_metadata, &self->t);
}

/*
 * 1000 knots made, joined (host and a worker) and closed in one process:
 * every knot is freed, and nothing else of the module is left live.
 */
TEST(join_close_loop_leaves_nothing)
{
	struct knitk_geometry g;
	long long knots, bytes;
	unsigned int i;
	struct knot k;
	int w;

	KNITK_REQUIRE_DEV();
	if (knitk_live_read(&knots, &bytes))
		SKIP(return, "no %s (debugfs, root)", KNITK_LIVE);
	knitk_geom_small(&g);
	for (i = 0; i < 1000; i++) {
		ASSERT_EQ(0, knot_make(&k, &g));
		ASSERT_EQ(0, knitk_join(k.fd, KNITK_ROLE_HOST, 0, NULL));
		w = knot_endpoint(&k, KNITK_ROLE_WORKER, i & 1);
		ASSERT_LE(0, w);
		close(w);
		EXPECT_EQ(1, knitk_load32(&k.ctl->death_seq));
		knot_close(&k);
	}
	ASSERT_EQ(0, knitk_live_wait_zero());
}

TEST_HARNESS_MAIN
