// SPDX-License-Identifier: GPL-2.0
/*
 * Attacks on the uAPI contract the way a careless or hostile user would
 * make them: roles held across fork with MADV_DOFORK, execve, thread and
 * thread-group-leader exits, closes racing joins and waits, endpoints
 * passed over SCM_RIGHTS after their owner died, epoll registrations that
 * outlive their knot, signal storms on KNITK_IOC_WAIT, and the locked
 * memory charge of an unprivileged user that changes uid between CREATE
 * and close.  Written from uapi/linux/knitk.h alone.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <linux/userfaultfd.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_test.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	(1ULL << KNITK_DOORBELL_HOST)

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

FIXTURE(adv) {
	struct knot k;		/* creator, joined as the host, mapped */
	pid_t pids[4];
	int nr_pids;
};

FIXTURE_SETUP(adv)
{
	struct knitk_geometry g;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->k, &g));
	ASSERT_EQ(0, knitk_join(self->k.fd, KNITK_ROLE_HOST, 0, NULL));
	self->nr_pids = 0;
}

FIXTURE_TEARDOWN(adv)
{
	int i;

	for (i = 0; i < self->nr_pids; i++) {
		if (self->pids[i] > 0) {
			kill(self->pids[i], SIGKILL);
			waitpid(self->pids[i], NULL, 0);
		}
	}
	knot_close(&self->k);
}

static void track(FIXTURE_DATA(adv) *self, pid_t pid)
{
	if (self->nr_pids < 4)
		self->pids[self->nr_pids++] = pid;
}

/* Level-triggered: block in poll() until role @bit is marked dead. */
static void wait_dead(const struct knot *k, __u64 bit)
{
	struct pollfd p = { .fd = k->fd, .events = POLLPRI };

	while (!(knitk_load64(&k->ctl->dead) & bit)) {
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return;
		if (!(knitk_load64(&k->ctl->dead) & bit))
			usleep(1000);
	}
}

static int alive(pid_t pid)
{
	return waitpid(pid, NULL, WNOHANG) == 0;
}

static char read_byte(int fd)
{
	char c = 0;

	return read(fd, &c, 1) == 1 ? c : 0;
}

/* The roles held (@live, a doorbell bit each) and the deaths counted. */
static void expect_live(struct __test_metadata *_metadata,
			const struct knitk_control *ctl, __u64 live,
			__u32 deaths)
{
	EXPECT_EQ(live, knitk_load64(&ctl->live));
	EXPECT_EQ(deaths, knitk_load32(&ctl->death_seq));
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
	wait_dead(&self->k, 1);
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

struct waiter {
	pthread_t thread;
	int fd;
	__u32 seq;
	__u64 deadline;		/* 0: KNITK_WAIT_FOREVER */
	int ret;
};

static void *waiter_run(void *arg)
{
	struct waiter *w = arg;

	w->ret = knitk_wait(w->fd, w->seq,
			    w->deadline ? w->deadline : KNITK_WAIT_FOREVER);
	return NULL;
}

/*
 * One thread sleeps in KNITK_IOC_WAIT on a worker endpoint, another closes
 * the process's only fd of it: the role ends (the host sees it) and the
 * sleeper's wait ends with -ENOTCONN, since its role has ended.
 */
TEST_F(adv, close_while_worker_waits)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct waiter wt = { 0 };
	struct knot w = { .layout = self->k.layout };
	struct knitk_doorbell *db;

	w.fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
	ASSERT_LE(0, w.fd);
	db = knot_doorbell(&self->k, 1);
	wt.fd = w.fd;
	wt.seq = knitk_doorbell_seq(db);
	ASSERT_EQ(0, pthread_create(&wt.thread, NULL, waiter_run, &wt));
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, 1, 1));
	ASSERT_EQ(0, close(w.fd));
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead) & 2ULL);
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	pthread_join(wt.thread, NULL);
	EXPECT_EQ(-ENOTCONN, wt.ret);
}

/* The same for the host's endpoint: a second host thread is left asleep. */
TEST_F(adv, close_while_host_waits)
{
	struct knitk_geometry g;
	struct waiter wt = { 0 };
	struct knot c;
	int host, wfd;

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&c, &g));
	host = knot_endpoint(&c, KNITK_ROLE_HOST, 0);
	ASSERT_LE(0, host);
	wfd = knot_endpoint(&c, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, wfd);
	wt.fd = host;
	wt.seq = knitk_doorbell_seq(knot_doorbell(&c, HOST));
	ASSERT_EQ(0, pthread_create(&wt.thread, NULL, waiter_run, &wt));
	ASSERT_EQ(0, knitk_wait_asleep(c.fd, HOST, 1));
	ASSERT_EQ(0, close(host));
	EXPECT_EQ(HOST_BIT, knitk_load64(&c.ctl->dead));
	/* The worker hears of it. */
	EXPECT_EQ(-EPIPE, knitk_wait(wfd, knitk_doorbell_seq(knot_doorbell(&c, 0)),
				     KNITK_WAIT_FOREVER));
	pthread_join(wt.thread, NULL);
	EXPECT_EQ(-ENOTCONN, wt.ret);
	close(wfd);
	knot_close(&c);
}

/* Clear O_CLOEXEC of @fd. */
static int keep_on_exec(int fd)
{
	int fl = fcntl(fd, F_GETFD);

	return fl < 0 ? -errno : fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
}

static void exec_self(const char *mode, int ready, int go, int fd)
{
	char *argv[] = { "adversary_test", NULL };
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
 * A child joined as worker 0 (the fd kept across execve() if @keep) runs
 * this program again in @mode, with pipes @rp (it says "r" once it runs)
 * and @gp (told to go on); returns once it runs.
 */
static pid_t fork_exec_worker(struct __test_metadata *_metadata,
			      FIXTURE_DATA(adv) *self, const char *mode,
			      bool keep, int rp[2], int gp[2])
{
	pid_t w;

	ASSERT_EQ(0, pipe(rp));
	ASSERT_EQ(0, pipe(gp));
	w = fork();
	ASSERT_LE(0, w);
	if (w == 0) {
		int fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);

		if (fd < 0 || (keep && keep_on_exec(fd)))
			_exit(1);
		exec_self(mode, rp[1], gp[0], fd);
	}
	track(self, w);
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
	pid_t w;

	ASSERT_EQ(0, pipe(rp));
	ASSERT_EQ(0, pipe(gp));
	w = fork();
	ASSERT_LE(0, w);
	if (w == 0) {
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
	track(self, w);
	ASSERT_EQ('z', read_byte(rp[0]));
	expect_live(_metadata, ctl, HOST_BIT | 1ULL, 0U);
	ASSERT_EQ(1, write(gp[1], "g", 1));
	ASSERT_EQ('c', read_byte(rp[0]));
	expect_live(_metadata, ctl, HOST_BIT, 1U);
	close_pair(rp);
	close_pair(gp);
}

#define RACE_ROUNDS	300

struct race {
	pthread_barrier_t bar;
	int fd;
	int join_ret;
	int poll_ret;
};

static void *race_join(void *arg)
{
	struct race *r = arg;

	pthread_barrier_wait(&r->bar);
	r->join_ret = knitk_join(r->fd, KNITK_ROLE_WORKER, 0, NULL);
	return NULL;
}

static void *race_poll(void *arg)
{
	struct race *r = arg;
	struct pollfd p = { .fd = r->fd, .events = POLLIN | POLLPRI };

	pthread_barrier_wait(&r->bar);
	r->poll_ret = poll(&p, 1, 0);
	return NULL;
}

/*
 * JOIN, close and poll race on one endpoint, unmapped or mapped (a mapping
 * holds the file but never a role).  Whoever wins, once all three are done
 * this process has no fd of the endpoint, so the role is not live, and a
 * new endpoint can take it.
 */
static void join_close_race(struct __test_metadata *_metadata,
			    FIXTURE_DATA(adv) *self, int mapped)
{
	const struct knitk_control *ctl = self->k.ctl;
	unsigned int round, stuck = 0, joined = 0;

	for (round = 0; round < RACE_ROUNDS; round++) {
		struct knot e = { .layout = self->k.layout };
		pthread_t tj, tp;
		struct race r;
		int fd;

		e.fd = knitk_open();
		ASSERT_LE(0, e.fd);
		ASSERT_EQ(0, knitk_attach(e.fd, self->k.fd, NULL));
		if (mapped)
			ASSERT_EQ(0, knot_map(&e));
		r.fd = e.fd;
		ASSERT_EQ(0, pthread_barrier_init(&r.bar, NULL, 3));
		ASSERT_EQ(0, pthread_create(&tj, NULL, race_join, &r));
		ASSERT_EQ(0, pthread_create(&tp, NULL, race_poll, &r));
		pthread_barrier_wait(&r.bar);
		close(e.fd);
		pthread_join(tj, NULL);
		pthread_join(tp, NULL);
		pthread_barrier_destroy(&r.bar);
		if (!r.join_ret)
			joined++;
		if (knitk_load64(&ctl->live) & 1ULL) {
			stuck++;
			if (stuck == 1)
				TH_LOG("round %u: role live with no fd (join %d)",
				       round, r.join_ret);
		}
		knot_unmap(&e);
		/* Nothing may keep the role now. */
		fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
		EXPECT_LE(0, fd);
		if (fd < 0)
			return;
		close(fd);
	}
	TH_LOG("%u of %u joins won; %u rounds left the role live", joined,
	       RACE_ROUNDS, stuck);
	EXPECT_EQ(0U, stuck);
}

TEST_F(adv, join_close_poll_race)
{
	join_close_race(_metadata, self, 0);
}

TEST_F(adv, join_close_poll_race_mapped)
{
	join_close_race(_metadata, self, 1);
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

/*
 * A child joins as worker @worker, sends its endpoint over a new socket
 * pair @sv and exits with the fd in flight; returns once it is reaped.
 */
static void worker_dies_sending(struct __test_metadata *_metadata,
				FIXTURE_DATA(adv) *self, __u32 worker,
				int sv[2])
{
	pid_t w;
	int st;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	w = fork();
	ASSERT_LE(0, w);
	if (w == 0) {
		int fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, worker);

		_exit(fd < 0 || knitk_send_fd(sv[1], fd) ? 1 : 0);
	}
	ASSERT_EQ(w, waitpid(w, &st, 0));
	ASSERT_EQ(0, st);
}

/*
 * A worker hands its endpoint over SCM_RIGHTS and dies with the fd in
 * flight: the role ends (an fd in a socket is in no table).  The receiver
 * cannot join the ended endpoint, and its WAIT says -ENOTCONN; it attaches
 * a new endpoint through the received one and takes the role, with a new
 * generation; its own death is counted once more.
 */
TEST_F(adv, scm_rights_after_owner_died)
{
	const struct knitk_control *ctl = self->k.ctl;
	int sv[2], got, fresh;
	__u32 gen = 0;

	worker_dies_sending(_metadata, self, 1, sv);
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead) & 2ULL);
	EXPECT_EQ(1U, knitk_load32(&ctl->death_seq));

	got = knitk_recv_fd(sv[0]);
	ASSERT_LE(0, got);
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead) & 2ULL);
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));
	EXPECT_EQ(-ENOTCONN, knitk_wait(got, knitk_doorbell_seq(knot_doorbell(&self->k, 1)),
					KNITK_WAIT_FOREVER));
	EXPECT_NE(0, knitk_join(got, KNITK_ROLE_WORKER, 1, NULL));
	EXPECT_NE(0, knitk_join(got, KNITK_ROLE_WORKER, 0, NULL));
	EXPECT_EQ(HOST_BIT, knitk_load64(&ctl->live));

	fresh = knitk_open();
	ASSERT_LE(0, fresh);
	ASSERT_EQ(0, knitk_attach(fresh, got, NULL));
	ASSERT_EQ(0, knitk_join(fresh, KNITK_ROLE_WORKER, 1, &gen));
	EXPECT_EQ(2U, gen);
	EXPECT_EQ(HOST_BIT | 2ULL, knitk_load64(&ctl->live));
	EXPECT_EQ(0ULL, knitk_load64(&ctl->dead));
	/* Closing the received, ended endpoint is no death of the new one. */
	close(got);
	expect_live(_metadata, ctl, HOST_BIT | 2ULL, 1U);
	close(fresh);
	EXPECT_EQ(2ULL, knitk_load64(&ctl->dead));
	EXPECT_EQ(2U, knitk_load32(&ctl->death_seq));
	close(sv[0]);
	close(sv[1]);
}

/*
 * The receiver of an fd whose role ended (its owner died with it in
 * flight) asks poll(): a hang-up and an error, nothing of the doorbell
 * the role owned (docs/guarantees.md, "an ended role hangs up").
 */
TEST_F(adv, poll_on_ended_endpoint)
{
	int sv[2], got;
	struct pollfd p;

	worker_dies_sending(_metadata, self, 0, sv);
	got = knitk_recv_fd(sv[0]);
	ASSERT_LE(0, got);
	p = (struct pollfd){ .fd = got, .events = POLLIN | POLLPRI };
	ASSERT_EQ(1, poll(&p, 1, 0));
	/* The role ended: a hang-up, not the state of its doorbell. */
	EXPECT_EQ(POLLHUP | POLLERR, p.revents);
	close(got);
	close(sv[0]);
	close(sv[1]);
}

static void on_signal(int sig)
{
	(void)sig;
}

struct storm {
	pthread_t thread;
	pid_t tid;
	atomic_int stop;
	atomic_ulong sent;
};

static void *storm_run(void *arg)
{
	struct storm *s = arg;

	while (!atomic_load(&s->stop)) {
		if (syscall(SYS_tgkill, getpid(), s->tid, SIGUSR1) == 0)
			atomic_fetch_add(&s->sent, 1);
		usleep(200);
	}
	return NULL;
}

/*
 * A storm of SIGUSR1 with SA_RESTART on a thread in KNITK_IOC_WAIT: the
 * wait restarts with its absolute deadline, so it ends at that deadline
 * with -ETIMEDOUT (a deadline re-armed on every restart would never end).
 */
TEST_F(adv, signal_storm_restart_keeps_deadline)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = SA_RESTART };
	struct knitk_doorbell_stats st;
	struct storm s = { 0 };
	__u64 deadline;
	int fd, ret;

	fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	s.tid = knitk_gettid();
	ASSERT_EQ(0, pthread_create(&s.thread, NULL, storm_run, &s));
	deadline = knitk_now_ns() + 500 * KNITK_MS;
	ret = knitk_wait(fd, knitk_doorbell_seq(knot_doorbell(&self->k, 0)),
			 deadline);
	atomic_store(&s.stop, 1);
	pthread_join(s.thread, NULL);
	EXPECT_EQ(-ETIMEDOUT, ret);
	EXPECT_LE(deadline, knitk_now_ns());
	ASSERT_EQ(0, knitk_stats(fd, 0, &st));
	TH_LOG("%lu signals; waits %llu interrupts %llu timeouts %llu",
	       atomic_load(&s.sent), st.waits, st.interrupts, st.timeouts);
	EXPECT_LT(0UL, atomic_load(&s.sent));
	EXPECT_EQ(1ULL, st.timeouts);
	EXPECT_EQ(0ULL, st.spurious);
	signal(SIGUSR1, SIG_DFL);
	close(fd);
}

/*
 * Without SA_RESTART each signal ends the wait with -EINTR; a caller that
 * retries with the same absolute deadline reaches it.  No signal is a
 * spurious wake, and the interrupts are counted.
 */
TEST_F(adv, signal_storm_eintr_retry_reaches_deadline)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct knitk_doorbell_stats st;
	struct storm s = { 0 };
	unsigned long eintr = 0;
	__u64 deadline;
	int fd, ret;

	fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	s.tid = knitk_gettid();
	ASSERT_EQ(0, pthread_create(&s.thread, NULL, storm_run, &s));
	deadline = knitk_now_ns() + 500 * KNITK_MS;
	do {
		ret = knitk_wait(fd, knitk_doorbell_seq(knot_doorbell(&self->k, 0)),
				 deadline);
		if (ret == -EINTR)
			eintr++;
	} while (ret == -EINTR);
	atomic_store(&s.stop, 1);
	pthread_join(s.thread, NULL);
	EXPECT_EQ(-ETIMEDOUT, ret);
	EXPECT_LE(deadline, knitk_now_ns());
	ASSERT_EQ(0, knitk_stats(fd, 0, &st));
	TH_LOG("%lu signals, %lu EINTR; interrupts %llu", atomic_load(&s.sent),
	       eintr, st.interrupts);
	EXPECT_EQ(0ULL, st.spurious);
	EXPECT_EQ(1ULL, st.timeouts);
	EXPECT_LE((__u64)eintr, st.interrupts);
	signal(SIGUSR1, SIG_DFL);
	close(fd);
}

/* -------------------------------------------------------------- memlock */

#define UID_A		42001
#define UID_B		42002
#define LIMIT_BYTES	(256 * 1024)
#define MAX_KNOTS	256

/*
 * How many knots of the small geometry LIMIT_BYTES holds, from libknitk's
 * layout formula (-1 if the library refused it: then no count matches).
 */
static int limit_knots(void)
{
	struct knitk_geometry g;
	struct knitk_layout l;

	knitk_geom_small(&g);
	if (knitk_layout_compute(&g, &l))
		return -1;
	return LIMIT_BYTES / l.size;
}

/* The knots a memlock test body holds (each body runs in its own child). */
static int held[MAX_KNOTS];

/* Become @uid (real and effective; saved stays 0 to switch again). */
static int become(uid_t uid)
{
	if (seteuid(0))
		return -errno;
	if (uid && setresuid(uid, uid, 0))
		return -errno;
	if (!uid && setresuid(0, 0, 0))
		return -errno;
	return 0;
}

/* Create small knots until -ENOMEM; their fds in @fds; returns how many. */
static int fill(int *fds, int *err)
{
	struct knitk_geometry g;
	int n = 0, ret;

	knitk_geom_small(&g);
	*err = 0;
	while (n < MAX_KNOTS) {
		int fd = knitk_open();

		if (fd < 0) {
			*err = fd;
			break;
		}
		ret = knitk_create(fd, &g, NULL);
		if (ret) {
			close(fd);
			*err = ret;
			break;
		}
		fds[n++] = fd;
	}
	return n;
}

static void drain(int *fds, int n)
{
	while (n--)
		close(fds[n]);
}

/*
 * Fill to the limit and give the knots back: it must take exactly @expect
 * knots and end on -ENOMEM, else it says so, as seen by @who.
 */
static int fill_expect(int *fds, int expect, const char *who)
{
	int n, err;

	n = fill(fds, &err);
	drain(fds, n);
	if (n == expect && err == -ENOMEM)
		return 0;
	printf("# %s: %d knots, expected %d (err %d)\n", who, n, expect, err);
	return -1;
}

/*
 * In a child: RLIMIT_MEMLOCK of LIMIT_BYTES for everyone, then the test
 * body as uid A (saved uid 0, no effective capabilities).
 */
static int memlock_child(int (*body)(void))
{
	struct rlimit rl = { LIMIT_BYTES, LIMIT_BYTES };
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgroups(0, NULL) ||
		    setresgid(65534, 65534, 65534) || become(UID_A))
			_exit(100);
		_exit(body());
	}
	if (waitpid(pid, &st, 0) != pid)
		return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
}

/* A test of @body, run by memlock_child(). */
#define MEMLOCK_TEST(name, body)					\
	TEST(name)							\
	{								\
		KNITK_REQUIRE_DEV();					\
		EXPECT_EQ(0, memlock_child(body));			\
	}

/* Each round takes as many knots as the limit allows, and gives them back. */
static int rounds_body(void)
{
	int expect = limit_knots();
	char who[16];
	int round;

	for (round = 0; round < 8; round++) {
		snprintf(who, sizeof(who), "round %d", round);
		if (fill_expect(held, expect, who))
			return 1;
	}
	return 0;
}

MEMLOCK_TEST(memlock_charge_returns_every_round, rounds_body)

/* A mapping keeps the knot, and its charge, until it is unmapped. */
static int mapped_body(void)
{
	static void *maps[MAX_KNOTS];
	int expect = limit_knots();
	struct knitk_layout l;
	struct knitk_geometry g;
	int n, err, i;

	knitk_geom_small(&g);
	if (knitk_layout_compute(&g, &l))
		return 1;
	n = fill(held, &err);
	if (n != expect || err != -ENOMEM)
		return 1;
	for (i = 0; i < n; i++) {
		maps[i] = mmap(NULL, l.size - l.control_size,
			       PROT_READ | PROT_WRITE, MAP_SHARED, held[i],
			       l.control_size);
		if (maps[i] == MAP_FAILED)
			return 2;
	}
	drain(held, n);
	/* Every knot is still alive in its mapping: nothing more fits. */
	if (fill_expect(held, 0, "mapped"))
		return 3;
	for (i = 0; i < n; i++)
		munmap(maps[i], l.size - l.control_size);
	if (fill_expect(held, expect, "unmapped"))
		return 4;
	return 0;
}

MEMLOCK_TEST(memlock_charge_held_by_mapping, mapped_body)

/*
 * Knots created as uid A are closed as uid B: the charge goes back to A
 * (who can fill the limit again), and B is neither credited nor debited
 * (B fills exactly the limit).
 */
static int setuid_body(void)
{
	int expect = limit_knots();
	int n, err;

	n = fill(held, &err);
	if (n != expect || err != -ENOMEM)
		return 1;
	if (become(UID_B))
		return 2;
	drain(held, n);
	if (fill_expect(held, expect, "uid B"))
		return 3;
	if (become(UID_A))
		return 4;
	if (fill_expect(held, expect, "uid A again"))
		return 5;
	return 0;
}

MEMLOCK_TEST(memlock_setuid_between_create_and_close, setuid_body)

/* Attaching endpoints costs nothing, even at the limit. */
static int attach_body(void)
{
	int n, err, i, a[32];

	n = fill(held, &err);
	if (n < 1 || err != -ENOMEM)
		return 1;
	for (i = 0; i < 32; i++) {
		a[i] = knitk_open();
		if (a[i] < 0 || knitk_attach(a[i], held[0], NULL))
			return 2;
	}
	drain(held, n);
	/* The attached endpoints keep knot 0 alive, charged: one fewer. */
	if (fill_expect(held, n - 1, "attached"))
		return 3;
	drain(a, 32);
	if (fill_expect(held, n, "detached"))
		return 4;
	return 0;
}

MEMLOCK_TEST(memlock_attach_not_charged, attach_body)

/*
 * A thread left asleep on a worker endpoint whose role ended must not be
 * woken as if it held the role's next owner's doorbell: a kick for the
 * new owner ends the stale wait with -ENOTCONN, not 0.
 */
TEST_F(adv, stale_waiter_not_woken_for_next_owner)
{
	struct waiter wt = { 0 };
	int fd, next;

	fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
	ASSERT_LE(0, fd);
	wt.fd = fd;
	wt.seq = knitk_doorbell_seq(knot_doorbell(&self->k, 1));
	ASSERT_EQ(0, pthread_create(&wt.thread, NULL, waiter_run, &wt));
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, 1, 1));
	ASSERT_EQ(0, close(fd));
	next = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 1);
	ASSERT_LE(0, next);
	ASSERT_EQ(0, knitk_kick(self->k.fd, 2ULL, NULL));
	pthread_join(wt.thread, NULL);
	EXPECT_EQ(-ENOTCONN, wt.ret);
	close(next);
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

/*
 * An unjoined endpoint passed over SCM_RIGHTS is joined by the receiver:
 * the receiver owns the role, so the sender's close neither keeps nor ends
 * it, and the receiver's exit ends it.
 */
TEST_F(adv, receiver_that_joins_owns_the_role)
{
	const struct knitk_control *ctl = self->k.ctl;
	int sv[2], e, st;
	pid_t c;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	e = knitk_open();
	ASSERT_LE(0, e);
	ASSERT_EQ(0, knitk_attach(e, self->k.fd, NULL));
	c = fork();
	ASSERT_LE(0, c);
	if (c == 0) {
		int got;
		char b = 'j';

		close(e);
		got = knitk_recv_fd(sv[1]);
		if (got < 0 || knitk_join(got, KNITK_ROLE_WORKER, 0, NULL))
			_exit(1);
		if (write(sv[1], &b, 1) != 1 || read(sv[1], &b, 1) != 1)
			_exit(2);
		_exit(0);
	}
	track(self, c);
	ASSERT_EQ(0, knitk_send_fd(sv[0], e));
	ASSERT_EQ('j', read_byte(sv[0]));
	EXPECT_EQ(HOST_BIT | 1ULL, knitk_load64(&ctl->live));
	close(e);
	expect_live(_metadata, ctl, HOST_BIT | 1ULL, 0U);
	ASSERT_EQ(1, write(sv[0], "x", 1));
	ASSERT_EQ(c, waitpid(c, &st, 0));
	EXPECT_EQ(0, st);
	wait_dead(&self->k, 1);
	expect_live(_metadata, ctl, HOST_BIT, 1U);
	close(sv[0]);
	close(sv[1]);
}

#define JOINERS		6
#define JOIN_ROUNDS	60

struct slot_race {
	pthread_barrier_t bar;
	int fds[JOINERS];
	int rets[JOINERS];
	int i;
};

static void *slot_race_run(void *arg)
{
	struct slot_race *r = arg;
	int i = __atomic_fetch_add(&r->i, 1, __ATOMIC_RELAXED);

	pthread_barrier_wait(&r->bar);
	r->rets[i] = knitk_join(r->fds[i], KNITK_ROLE_WORKER, 1, NULL);
	return NULL;
}

/* Endpoints racing for one slot: exactly one wins, every round. */
TEST_F(adv, join_same_slot_race_one_winner)
{
	const struct knitk_control *ctl = self->k.ctl;
	unsigned int round;

	for (round = 0; round < JOIN_ROUNDS; round++) {
		pthread_t t[JOINERS];
		struct slot_race r = { .i = 0 };
		int i, wins = 0;

		for (i = 0; i < JOINERS; i++) {
			r.fds[i] = knitk_open();
			ASSERT_LE(0, r.fds[i]);
			ASSERT_EQ(0, knitk_attach(r.fds[i], self->k.fd, NULL));
		}
		ASSERT_EQ(0, pthread_barrier_init(&r.bar, NULL, JOINERS));
		for (i = 0; i < JOINERS; i++)
			ASSERT_EQ(0, pthread_create(&t[i], NULL, slot_race_run, &r));
		for (i = 0; i < JOINERS; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&r.bar);
		for (i = 0; i < JOINERS; i++) {
			if (r.rets[i] == 0)
				wins++;
			else
				EXPECT_EQ(-EBUSY, r.rets[i]);
		}
		EXPECT_EQ(1, wins);
		EXPECT_EQ(round + 1, knitk_load32(&ctl->generation[1]));
		for (i = 0; i < JOINERS; i++)
			close(r.fds[i]);
		EXPECT_EQ(round + 1, knitk_load32(&ctl->death_seq));
	}
}

/* Deadlines past KTIME_MAX (but not KNITK_WAIT_FOREVER) still sleep. */
TEST_F(adv, wait_huge_deadline_woken_by_kick)
{
	struct waiter wt = { 0 };
	struct knitk_wait w;
	int fd;

	fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, fd);
	wt.fd = fd;
	wt.seq = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	wt.deadline = KNITK_WAIT_FOREVER - 1;
	w = (struct knitk_wait){ .expected = wt.seq,
				 .deadline_ns = wt.deadline };
	ASSERT_EQ(0, pthread_create(&wt.thread, NULL, waiter_run, &wt));
	ASSERT_EQ(0, knitk_wait_asleep(self->k.fd, 0, 1));
	ASSERT_EQ(0, knitk_kick(self->k.fd, 1ULL, NULL));
	pthread_join(wt.thread, NULL);
	EXPECT_EQ(0, wt.ret);
	/* The same deadline, with the seq moved: -EAGAIN at once. */
	EXPECT_EQ(-EAGAIN, knitk_ioctl(fd, KNITK_IOC_WAIT, &w));
	w.expected = knitk_doorbell_seq(knot_doorbell(&self->k, 0));
	w.deadline_ns = 0;
	EXPECT_EQ(-ETIMEDOUT, knitk_ioctl(fd, KNITK_IOC_WAIT, &w));
	close(fd);
}

/*
 * The narrow window of join_close_poll_race_mapped, made deterministic:
 * the JOIN's struct sits in a page that userfaultfd holds back, so the
 * ioctl has its file and is stalled in copy_from_user() while the only fd
 * is closed; then the page is supplied and the JOIN completes.  The
 * process has no fd of the endpoint left (only a mapping, which never
 * holds a role), so the role must not be live.
 */
struct uffd_join {
	int fd;
	void *arg;
	int ret;
};

static void *uffd_join_run(void *arg)
{
	struct uffd_join *j = arg;

	j->ret = knitk_ioctl(j->fd, KNITK_IOC_JOIN, j->arg);
	return NULL;
}

static void join_stalled_across_close(struct __test_metadata *_metadata,
				      FIXTURE_DATA(adv) *self, int mapped)
{
	const struct knitk_control *ctl = self->k.ctl;
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { 0 };
	struct uffdio_copy cp = { 0 };
	struct knot e = { .layout = self->k.layout };
	struct knitk_join *src;
	struct uffd_msg msg;
	struct uffd_join j;
	pthread_t t;
	void *page;
	int uffd, fd;

	uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
	if (uffd < 0)
		SKIP(return, "userfaultfd: %s", strerror(errno));
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_API, &api));
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, page);
	src = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, src);
	reg.range.start = (unsigned long)page;
	reg.range.len = 4096;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_REGISTER, &reg));

	e.fd = knitk_open();
	ASSERT_LE(0, e.fd);
	ASSERT_EQ(0, knitk_attach(e.fd, self->k.fd, NULL));
	if (mapped)
		ASSERT_EQ(0, knot_map(&e));
	j = (struct uffd_join){ .fd = e.fd, .arg = page, .ret = 1 };
	ASSERT_EQ(0, pthread_create(&t, NULL, uffd_join_run, &j));
	/* The JOIN holds its file and waits for the page. */
	ASSERT_EQ((ssize_t)sizeof(msg), read(uffd, &msg, sizeof(msg)));
	ASSERT_EQ(UFFD_EVENT_PAGEFAULT, msg.event);
	ASSERT_EQ(0, close(e.fd));
	e.fd = -1;
	*src = (struct knitk_join){ .role = KNITK_ROLE_WORKER, .worker = 0 };
	cp.dst = (unsigned long)page;
	cp.src = (unsigned long)src;
	cp.len = 4096;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_COPY, &cp));
	pthread_join(t, NULL);
	TH_LOG("JOIN after the close returned %d; live %#llx dead %#llx",
	       j.ret, (unsigned long long)knitk_load64(&ctl->live),
	       (unsigned long long)knitk_load64(&ctl->dead));
	EXPECT_EQ(0ULL, knitk_load64(&ctl->live) & 1ULL);
	/* Nothing of this process may keep worker 0 from a new joiner. */
	fd = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	EXPECT_LE(0, fd);
	if (fd >= 0)
		close(fd);
	knot_unmap(&e);
	EXPECT_EQ(0ULL, knitk_load64(&ctl->live) & 1ULL);
	munmap(page, 4096);
	munmap(src, 4096);
	close(uffd);
}

TEST_F(adv, join_stalled_across_close)
{
	join_stalled_across_close(_metadata, self, 0);
}

TEST_F(adv, join_stalled_across_close_mapped)
{
	join_stalled_across_close(_metadata, self, 1);
}

TEST_HARNESS_MAIN
