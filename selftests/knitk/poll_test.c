// SPDX-License-Identifier: GPL-2.0
/*
 * poll() on a knot endpoint: level-triggered readiness of the endpoint's
 * own doorbell (POLLIN: pending work, POLLPRI: a dead role, POLLHUP: the
 * host died), and a poller asleep in poll() woken by a delivered notify,
 * so event loops can wait on knots.
 *
 * epoll registers once: a registration made before CREATE, ATTACH or JOIN
 * must still be woken by the doorbell the endpoint watches later, and every
 * level state must wake its pollers when it becomes true.  epoll_wait's
 * timeout is only a hang guard: a wake is asserted from the event returned.
 */
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/wait.h>

#include "knitk_harness.h"
#include "knitk_test.h"

#define HOST		KNITK_DOORBELL_HOST
#define HOST_BIT	(1ULL << KNITK_DOORBELL_HOST)

/* Only a lost wake reaches this: epoll_wait's hang guard, in ms. */
#define HANG_GUARD_MS	20000

/* Readiness of fd right now (a zero timeout never sleeps). */
static short poll_now(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLPRI };

	return poll(&p, 1, 0) == 1 ? p.revents : 0;
}

FIXTURE(knot_poll) {
	struct knot k;
	int worker;		/* endpoint joined as worker 0 */
};

FIXTURE_SETUP(knot_poll)
{
	KNITK_REQUIRE_DEV();
	self->worker = -1;
	ASSERT_EQ(0, knot_make_host_worker(&self->k, &self->worker));
}

FIXTURE_TEARDOWN(knot_poll)
{
	if (self->worker >= 0)
		close(self->worker);
	knot_close(&self->k);
}

TEST(poll_unattached_is_error)
{
	int fd;

	KNITK_REQUIRE_DEV();
	fd = knitk_open();
	ASSERT_LE(0, fd);
	EXPECT_EQ(POLLERR, poll_now(fd) & POLLERR);
	close(fd);
}

TEST_F(knot_poll, idle_knot_is_not_ready)
{
	EXPECT_EQ(0, poll_now(self->k.fd));
	EXPECT_EQ(0, poll_now(self->worker));
}

/* The host's doorbell covers every return mailbox; the worker's does not. */
TEST_F(knot_poll, host_pollin_follows_return_mailboxes)
{
	struct knitk_sector *ret_mb;

	ret_mb = knot_mailbox(&self->k, self->k.layout.nr_request + 1);
	knot_lane_publish(ret_mb, 5);
	EXPECT_EQ(POLLIN, poll_now(self->k.fd) & (POLLIN | POLLPRI));
	EXPECT_EQ(0, poll_now(self->worker));
	knot_lane_ack(&ret_mb->ack, 5);
	EXPECT_EQ(0, poll_now(self->k.fd));
}

TEST_F(knot_poll, worker_pollin_follows_own_request_mailbox)
{
	struct knitk_sector *req_other, *req_own;

	/* small geometry: request mailbox s * W + w, W = 2. */
	req_other = knot_mailbox(&self->k, 1);
	req_own = knot_mailbox(&self->k, 0);
	knot_lane_publish(req_other, 0);
	EXPECT_EQ(0, poll_now(self->worker));
	knot_lane_publish(req_own, 63);
	EXPECT_EQ(POLLIN, poll_now(self->worker) & POLLIN);
	EXPECT_EQ(0, poll_now(self->k.fd));
	knot_lane_ack(&req_own->ack, 63);
	EXPECT_EQ(0, poll_now(self->worker));
}

TEST_F(knot_poll, dead_worker_raises_pollpri_until_rejoined)
{
	close(self->worker);
	self->worker = -1;
	EXPECT_EQ(POLLPRI, poll_now(self->k.fd) & POLLPRI);
	self->worker = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, self->worker);
	EXPECT_EQ(0, poll_now(self->k.fd) & POLLPRI);
}

TEST_F(knot_poll, host_death_hangs_up_workers)
{
	struct pollfd p = { .fd = self->worker, .events = POLLIN };

	knot_unmap(&self->k);
	close(self->k.fd);
	self->k.fd = -1;
	ASSERT_EQ(1, poll(&p, 1, 0));
	EXPECT_EQ(POLLHUP, p.revents & POLLHUP);
}

struct poller {
	pthread_t thread;
	int fd;
	pid_t tid;
	short events;	/* POLLIN if zero */
	int ret;
	short revents;
};

static void *poller_run(void *arg)
{
	struct poller *p = arg;
	struct pollfd pfd = { .fd = p->fd,
			      .events = p->events ? p->events : POLLIN };

	__atomic_store_n(&p->tid, knitk_gettid(), __ATOMIC_RELEASE);
	/*
	 * No timeout: poll() reports the level once more when one expires, so
	 * only a wake can end this; a lost one is the runner's watchdog's.
	 */
	p->ret = poll(&pfd, 1, -1);
	p->revents = pfd.revents;
	return NULL;
}

/*
 * A host asleep in poll() with its sleeping flag set is woken by a worker's
 * publish and notify, and the notify counts as delivered.
 */
TEST_F(knot_poll, poller_woken_by_notify)
{
	struct knitk_doorbell *db = knot_doorbell(&self->k, HOST);
	struct knitk_doorbell_stats st;
	struct poller p = { .fd = self->k.fd };
	__u64 woken = 0;

	knitk_doorbell_sleeping(db, 1);
	ASSERT_EQ(0, pthread_create(&p.thread, NULL, poller_run, &p));
	/* Let the poller fall asleep in poll() first: the wake must reach it. */
	while (!__atomic_load_n(&p.tid, __ATOMIC_ACQUIRE))
		usleep(1000);
	while (knitk_thread_state(getpid(), p.tid) != 'S')
		usleep(1000);
	knot_lane_publish(knot_mailbox(&self->k, self->k.layout.nr_request),
			  9);
	ASSERT_EQ(0, knitk_notify(self->worker, HOST_BIT, &woken));
	EXPECT_EQ(HOST_BIT, woken);
	ASSERT_EQ(0, pthread_join(p.thread, NULL));
	knitk_doorbell_sleeping(db, 0);
	EXPECT_EQ(1, p.ret);
	EXPECT_EQ(POLLIN, p.revents & POLLIN);
	ASSERT_EQ(0, knitk_stats(self->k.fd, HOST, &st));
	EXPECT_EQ(1, st.wakes);
	EXPECT_EQ(0, st.spurious);
}

/* An epoll set watching fd for events; -errno on failure. */
static int epoll_on(int fd, __u32 events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		return -errno;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
		int err = -errno;

		close(ep);
		return err;
	}
	return ep;
}

/*
 * The events of one epoll_wait on ep (0: none).  A zero timeout drains
 * whatever a level-triggered set has ready; HANG_GUARD_MS waits for a wake.
 */
static __u32 epoll_events(int ep, int timeout_ms)
{
	struct epoll_event ev = { 0 };

	return epoll_wait(ep, &ev, 1, timeout_ms) == 1 ? ev.events : 0;
}

/* Publish a lane for worker 0 and notify its sleeping doorbell. */
static int wake_worker0(struct knot *k, int notifier, __u64 *woken)
{
	knitk_doorbell_sleeping(knot_doorbell(k, 0), 1);
	knot_lane_publish(knot_mailbox(k, 0), 3);
	return knitk_notify(notifier, 1ULL << 0, woken);
}

/* Publish a return lane of worker 1 and notify the sleeping host. */
static int wake_host(struct knot *k, int notifier, __u64 *woken)
{
	knitk_doorbell_sleeping(knot_doorbell(k, HOST), 1);
	knot_lane_publish(knot_mailbox(k, k->layout.nr_request + 1), 4);
	return knitk_notify(notifier, HOST_BIT, woken);
}

/* The fixture's worker 0 endpoint closed; a new, bare one in its place. */
static int reopen_worker0(FIXTURE_DATA(knot_poll) *self)
{
	close(self->worker);
	self->worker = -1;
	return knitk_open();
}

/*
 * Nothing ready in @ep, which watches worker 0 for EPOLLIN, until a notify
 * is delivered to worker 0's doorbell; then EPOLLIN.
 */
static void expect_epoll_woken_worker0(struct __test_metadata *_metadata,
				       FIXTURE_DATA(knot_poll) *self, int ep)
{
	__u64 woken = 0;

	EXPECT_EQ(0, epoll_events(ep, 0));
	ASSERT_EQ(0, wake_worker0(&self->k, self->k.fd, &woken));
	EXPECT_EQ(1ULL, woken);
	EXPECT_EQ(EPOLLIN, epoll_events(ep, HANG_GUARD_MS));
}

/*
 * Registered while attached but not joined (watching the host's doorbell),
 * then joined as worker 0: a notify delivered to worker 0 wakes it.
 */
TEST_F(knot_poll, epoll_before_join_woken_by_own_doorbell)
{
	int fd, ep;

	fd = reopen_worker0(self);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, knitk_attach(fd, self->k.fd, NULL));
	ep = epoll_on(fd, EPOLLIN);
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, knitk_join(fd, KNITK_ROLE_WORKER, 0, NULL));
	/* The dead worker 0 of the fixture left POLLPRI; it is rejoined. */
	expect_epoll_woken_worker0(_metadata, self, ep);
	close(ep);
	close(fd);
}

/*
 * Registered on a bare endpoint (EPOLLERR), then attached and joined as
 * the host of a new knot: a notify delivered to the host wakes it.
 */
TEST_F(knot_poll, epoll_before_attach_woken_by_own_doorbell)
{
	struct knot k2 = { .fd = -1 };
	struct knitk_geometry g;
	__u64 woken = 0;
	int ep, w;

	k2.fd = knitk_open();
	ASSERT_LE(0, k2.fd);
	ep = epoll_on(k2.fd, EPOLLIN);
	ASSERT_LE(0, ep);
	EXPECT_EQ(EPOLLERR, epoll_events(ep, 0));

	knitk_geom_small(&g);
	ASSERT_EQ(0, knitk_create(k2.fd, &g, &k2.layout));
	ASSERT_EQ(0, knot_map(&k2));
	EXPECT_EQ(0, epoll_events(ep, 0));
	ASSERT_EQ(0, knitk_join(k2.fd, KNITK_ROLE_HOST, 0, NULL));
	w = knot_endpoint(&k2, KNITK_ROLE_WORKER, 1);
	ASSERT_LE(0, w);
	EXPECT_EQ(0, epoll_events(ep, 0));

	ASSERT_EQ(0, wake_host(&k2, w, &woken));
	EXPECT_EQ(HOST_BIT, woken);
	EXPECT_EQ(EPOLLIN, epoll_events(ep, HANG_GUARD_MS));
	close(w);
	close(ep);
	knot_close(&k2);
}

/* The same on an endpoint attached with ATTACH rather than CREATE. */
TEST_F(knot_poll, epoll_before_attach_then_join_woken)
{
	int fd, ep;

	fd = reopen_worker0(self);
	ASSERT_LE(0, fd);
	ep = epoll_on(fd, EPOLLIN);
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, knitk_attach(fd, self->k.fd, NULL));
	ASSERT_EQ(0, knitk_join(fd, KNITK_ROLE_WORKER, 0, NULL));
	expect_epoll_woken_worker0(_metadata, self, ep);
	close(ep);
	close(fd);
}

/* Registered after JOIN, as before: still woken by the own doorbell. */
TEST_F(knot_poll, epoll_after_join_woken_by_own_doorbell)
{
	int ep;

	ep = epoll_on(self->worker, EPOLLIN);
	ASSERT_LE(0, ep);
	expect_epoll_woken_worker0(_metadata, self, ep);
	close(ep);
}

/*
 * Edge-triggered, so only a wake can report it: ATTACH to a knot whose
 * host doorbell has work makes POLLIN true for the unjoined endpoint.
 */
TEST_F(knot_poll, attach_wakes_edge_triggered_poller)
{
	int fd, ep;

	knot_lane_publish(knot_mailbox(&self->k, self->k.layout.nr_request),
			  7);
	fd = knitk_open();
	ASSERT_LE(0, fd);
	ep = epoll_on(fd, EPOLLIN | EPOLLET);
	ASSERT_LE(0, ep);
	EXPECT_EQ(EPOLLERR, epoll_events(ep, 0));
	EXPECT_EQ(0, epoll_events(ep, 0));
	ASSERT_EQ(0, knitk_attach(fd, self->k.fd, NULL));
	EXPECT_EQ(EPOLLIN, epoll_events(ep, HANG_GUARD_MS));
	close(ep);
	close(fd);
}

/* JOIN moves to a doorbell whose work is pending: POLLIN, by a wake. */
TEST_F(knot_poll, join_wakes_edge_triggered_poller)
{
	int fd, ep;

	fd = reopen_worker0(self);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, knitk_attach(fd, self->k.fd, NULL));
	ep = epoll_on(fd, EPOLLIN | EPOLLET);
	ASSERT_LE(0, ep);
	EXPECT_EQ(0, epoll_events(ep, 0));
	knot_lane_publish(knot_mailbox(&self->k, 0), 8);
	EXPECT_EQ(0, epoll_events(ep, 0));
	ASSERT_EQ(0, knitk_join(fd, KNITK_ROLE_WORKER, 0, NULL));
	EXPECT_EQ(EPOLLIN, epoll_events(ep, HANG_GUARD_MS));
	close(ep);
	close(fd);
}

/* A second worker of the knot, joined as worker 1. */
static int worker1_of(struct knot *k)
{
	return knot_endpoint(k, KNITK_ROLE_WORKER, 1);
}

/* Worker 1 in epoll for POLLPRI is woken when worker 0 dies. */
TEST_F(knot_poll, worker_death_wakes_other_worker_pollpri)
{
	int w1, ep;

	w1 = worker1_of(&self->k);
	ASSERT_LE(0, w1);
	ep = epoll_on(w1, EPOLLPRI);
	ASSERT_LE(0, ep);
	EXPECT_EQ(0, epoll_events(ep, 0));
	close(self->worker);
	self->worker = -1;
	EXPECT_EQ(EPOLLPRI, epoll_events(ep, HANG_GUARD_MS));
	close(ep);
	close(w1);
}

/* Is thread tid of this process asleep in system call nr? */
static int asleep_in_syscall(pid_t tid, long nr)
{
	char path[64], buf[64];

	if (knitk_thread_state(getpid(), tid) != 'S')
		return 0;
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	if (knitk_read_file(path, buf, sizeof(buf)))
		return 0;
	return strtol(buf, NULL, 10) == nr;
}

/* The same for a thread asleep in poll(POLLPRI). */
TEST_F(knot_poll, worker_death_wakes_other_worker_in_poll)
{
	struct poller p = { .events = POLLPRI };

	p.fd = worker1_of(&self->k);
	ASSERT_LE(0, p.fd);
	ASSERT_EQ(0, pthread_create(&p.thread, NULL, poller_run, &p));
	while (!__atomic_load_n(&p.tid, __ATOMIC_ACQUIRE))
		usleep(1000);
	/* Inside poll(), registered: the death must come as a wake. */
	while (!asleep_in_syscall(p.tid, SYS_poll))
		usleep(1000);
	close(self->worker);
	self->worker = -1;
	ASSERT_EQ(0, pthread_join(p.thread, NULL));
	EXPECT_EQ(1, p.ret);
	EXPECT_EQ(POLLPRI, p.revents & POLLPRI);
	close(p.fd);
}

/* An attached endpoint that never joined is woken by the host's death. */
TEST_F(knot_poll, host_death_wakes_unjoined_pollpri)
{
	int fd, ep;

	fd = knitk_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, knitk_attach(fd, self->k.fd, NULL));
	ep = epoll_on(fd, EPOLLPRI);
	ASSERT_LE(0, ep);
	EXPECT_EQ(0, epoll_events(ep, 0));
	knot_unmap(&self->k);
	close(self->k.fd);
	self->k.fd = -1;
	EXPECT_EQ(EPOLLPRI, epoll_events(ep, HANG_GUARD_MS));
	close(ep);
	close(fd);
}

/* A worker registered before JOIN sees the host's death as POLLHUP. */
TEST_F(knot_poll, host_death_wakes_worker_registered_before_join)
{
	__u32 ev;
	int fd, ep;

	close(self->worker);
	self->worker = -1;
	fd = knitk_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, knitk_attach(fd, self->k.fd, NULL));
	ep = epoll_on(fd, EPOLLIN);
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, knitk_join(fd, KNITK_ROLE_WORKER, 0, NULL));
	EXPECT_EQ(0, epoll_events(ep, 0));
	knot_unmap(&self->k);
	close(self->k.fd);
	self->k.fd = -1;
	ev = epoll_events(ep, HANG_GUARD_MS);
	EXPECT_EQ(EPOLLHUP, ev & EPOLLHUP);
	close(ep);
	close(fd);
}

/*
 * An endpoint whose role has ended (its owner, a child, exited; we still
 * hold the fd) reports POLLHUP | POLLERR and nothing else: not the pending
 * lane of the doorbell it owned, nor, once another endpoint joined that
 * role, the new owner's state.  A poller registered before is woken.
 */
TEST_F(knot_poll, ended_role_hangs_up)
{
	struct knitk_sector *req_own = knot_mailbox(&self->k, 0);
	int fd, ep, status;
	pid_t pid;
	__u32 ev;

	close(self->worker);
	self->worker = -1;
	fd = knitk_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, knitk_attach(fd, self->k.fd, NULL));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid)
		_exit(knitk_join(fd, KNITK_ROLE_WORKER, 0, NULL) ? 1 : 0);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Work for doorbell 0, whose owner is gone. */
	knot_lane_publish(req_own, 63);
	EXPECT_EQ(POLLHUP | POLLERR, poll_now(fd));
	ep = epoll_on(fd, EPOLLIN | EPOLLPRI);
	ASSERT_LE(0, ep);
	ev = epoll_events(ep, 0);
	EXPECT_EQ(EPOLLHUP | EPOLLERR, ev);
	close(ep);
	/* A new owner of worker 0 has its own state; the old fd keeps its end. */
	self->worker = knot_endpoint(&self->k, KNITK_ROLE_WORKER, 0);
	ASSERT_LE(0, self->worker);
	EXPECT_EQ(POLLIN, poll_now(self->worker) & (POLLIN | POLLHUP | POLLERR));
	EXPECT_EQ(POLLHUP | POLLERR, poll_now(fd));
	knot_lane_ack(&req_own->ack, 63);
	EXPECT_EQ(POLLHUP | POLLERR, poll_now(fd));
	close(fd);
}

/* A poller asleep on a joined endpoint is woken when its role ends. */
TEST_F(knot_poll, role_end_wakes_its_poller)
{
	int fd, ep, status, up[2], go[2];
	pid_t pid;
	char b;

	close(self->worker);
	self->worker = -1;
	fd = knitk_open();
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, knitk_attach(fd, self->k.fd, NULL));
	ASSERT_EQ(0, pipe(up));
	ASSERT_EQ(0, pipe(go));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* Joined, then ended by our exit once the parent watches. */
		if (knitk_join(fd, KNITK_ROLE_WORKER, 0, NULL) ||
		    write(up[1], "j", 1) != 1 || read(go[0], &b, 1) != 1)
			_exit(1);
		_exit(0);
	}
	ASSERT_EQ(1, read(up[0], &b, 1));
	ep = epoll_on(fd, EPOLLIN);
	ASSERT_LE(0, ep);
	EXPECT_EQ(0, epoll_events(ep, 0));
	ASSERT_EQ(1, write(go[1], "x", 1));
	EXPECT_EQ(EPOLLHUP | EPOLLERR, epoll_events(ep, HANG_GUARD_MS));
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(ep);
	close(up[0]);
	close(up[1]);
	close(go[0]);
	close(go[1]);
	close(fd);
}

/* Closing a polled endpoint leaves nothing behind on the knot's queues. */
TEST_F(knot_poll, release_while_registered_then_wake)
{
	__u64 woken = 0;
	int fd, ep;

	fd = knitk_open();
	ASSERT_LE(0, fd);
	ep = epoll_on(fd, EPOLLIN | EPOLLPRI);
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, knitk_attach(fd, self->k.fd, NULL));
	close(fd);
	/* Every wake source of the freed endpoint fires once more. */
	ASSERT_EQ(0, wake_host(&self->k, self->worker, &woken));
	EXPECT_EQ(HOST_BIT, woken);
	ASSERT_EQ(0, knitk_kick(self->k.fd, HOST_BIT | 1, NULL));
	close(self->worker);
	self->worker = -1;
	EXPECT_EQ(0, epoll_events(ep, 0));
	close(ep);
}

TEST_HARNESS_MAIN
