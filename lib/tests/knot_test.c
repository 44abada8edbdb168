// SPDX-License-Identifier: GPL-2.0
/*
 * Knots and endpoints: backend choice (automatic, flags, KNITK_BACKEND),
 * create/attach/join/destroy, the control page kept by the futex backend
 * and its ordered readers,
 * and a process worker that attaches with the inherited fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <knitk.h>

#include "tap.h"

static const struct knitk_geometry geom2 = {
	.nr_workers = 2, .nr_submitters = 1, .lanes = KNITK_LANES,
	.inline_bytes = 64, .arena_bytes = 8192,
};

static int have_device(void)
{
	return access("/dev/knitk", F_OK) == 0;
}

static void backend_choice(void)
{
	struct knitk_endpoint *k;

	unsetenv("KNITK_BACKEND");
	REQUIRE(knitk_endpoint_create(&geom2, 0, &k) == 0);
	CHECK_EQ(knitk_endpoint_backend(k), have_device() ? KNITK_BACKEND_KMOD :
							  KNITK_BACKEND_FUTEX);
	knitk_endpoint_destroy(k);
	REQUIRE(knitk_endpoint_create(&geom2, KNITK_KNOT_FUTEX, &k) == 0);
	CHECK_EQ(knitk_endpoint_backend(k), KNITK_BACKEND_FUTEX);
	knitk_endpoint_destroy(k);
	setenv("KNITK_BACKEND", "futex", 1);
	REQUIRE(knitk_endpoint_create(&geom2, 0, &k) == 0);
	CHECK_EQ(knitk_endpoint_backend(k), KNITK_BACKEND_FUTEX);
	knitk_endpoint_destroy(k);
	setenv("KNITK_BACKEND", "bogus", 1);
	CHECK_EQ(knitk_endpoint_create(&geom2, 0, &k), -EINVAL);
	CHECK_EQ(knitk_endpoint_create(&geom2, KNITK_KNOT_KMOD | KNITK_KNOT_FUTEX, &k),
		 -EINVAL);
	CHECK_EQ(knitk_endpoint_create(&geom2, 1U << 5, &k), -EINVAL);
	setenv("KNITK_BACKEND", "futex", 1);
	if (have_device())
		SKIP("/dev/knitk exists: forcing kmod cannot fail here");
	setenv("KNITK_BACKEND", "kmod", 1);
	CHECK_EQ(knitk_endpoint_create(&geom2, 0, &k), -ENODEV);
	CHECK_EQ(knitk_endpoint_create(&geom2, KNITK_KNOT_KMOD, &k), -ENODEV);
	setenv("KNITK_BACKEND", "futex", 1);
}

static void invalid_geometry(void)
{
	struct knitk_geometry g = geom2;
	struct knitk_endpoint *k;

	g.lanes = 32;
	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k), -EINVAL);
	g = geom2;
	g.reserved[1] = 1;
	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k), -EINVAL);
	CHECK_EQ(knitk_endpoint_create(NULL, KNITK_KNOT_FUTEX, &k), -EINVAL);
}

/*
 * A stealing knot records its region size resolved (0: the default for
 * its workers), and every endpoint that attaches reads that size; an
 * illegal size, or one without KNITK_GEOM_STEAL, is -EINVAL.
 */
static void region_lanes_recorded(void)
{
	static const uint32_t asked[] = { 0, 4, 16 }, want[] = { 16, 4, 16 };
	const struct knitk_control *ctl;
	struct knitk_geometry g = geom2, got;
	struct knitk_endpoint *k, *a;
	unsigned int i;
	uint32_t v;
	int fd;

	g.flags = KNITK_GEOM_STEAL;
	for (i = 0; i < 3; i++) {
		g.region_lanes = asked[i];
		REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k) == 0);
		REQUIRE(knitk_endpoint_layout(k, NULL, &got) == 0);
		CHECK_EQ(got.region_lanes, want[i]);
		REQUIRE(knitk_endpoint_control(k, &ctl) == 0);
		CHECK_EQ(ctl->geometry.region_lanes, want[i]);
		REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(k), 0, &a) == 0);
		REQUIRE(knitk_endpoint_layout(a, NULL, &got) == 0);
		CHECK_EQ(got.region_lanes, want[i]);
		knitk_endpoint_destroy(a);
		knitk_endpoint_destroy(k);
	}
	g.region_lanes = 32;		/* 2 regions for 2 workers */
	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k), -EINVAL);
	g.region_lanes = 3;
	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k), -EINVAL);
	g.region_lanes = 0;
	g.reserved0 = 1;
	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k), -EINVAL);
	g = geom2;
	g.region_lanes = 16;
	CHECK_EQ(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k), -EINVAL);

	/*
	 * The control page as another writer left it: an illegal size is
	 * not attached to; 0 (a knot of a library older than the field)
	 * reads as the default.
	 */
	g = geom2;
	g.flags = KNITK_GEOM_STEAL;
	g.region_lanes = 8;
	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &k) == 0);
	fd = knitk_endpoint_fd(k);
	v = 32;
	REQUIRE(pwrite(fd, &v, sizeof(v), offsetof(struct knitk_control,
			geometry.region_lanes)) == sizeof(v));
	CHECK_EQ(knitk_endpoint_attach(fd, 0, &a), -EINVAL);
	v = 0;
	REQUIRE(pwrite(fd, &v, sizeof(v), offsetof(struct knitk_control,
			geometry.region_lanes)) == sizeof(v));
	REQUIRE(knitk_endpoint_attach(fd, 0, &a) == 0);
	REQUIRE(knitk_endpoint_layout(a, NULL, &got) == 0);
	CHECK_EQ(got.region_lanes, 16);
	knitk_endpoint_destroy(a);
	knitk_endpoint_destroy(k);
}

static void control_page_and_layout(void)
{
	const struct knitk_control *ctl;
	struct knitk_layout l, expect;
	struct knitk_geometry g;
	struct knitk_endpoint *k;
	int fd;

	REQUIRE(knitk_endpoint_create(&geom2, KNITK_KNOT_FUTEX, &k) == 0);
	REQUIRE(knitk_endpoint_layout(k, &l, &g) == 0);
	REQUIRE(knitk_layout_compute(&geom2, &expect) == 0);
	CHECK(!memcmp(&l, &expect, sizeof(l)));
	CHECK(!memcmp(&g, &geom2, sizeof(g)));
	REQUIRE(knitk_endpoint_control(k, &ctl) == 0);
	CHECK_EQ(ctl->magic, KNITK_MAGIC);
	CHECK_EQ(ctl->api, KNITK_API);
	CHECK(!memcmp(&ctl->layout, &l, sizeof(l)));
	CHECK_EQ(ctl->live, 0);
	fd = knitk_endpoint_fd(k);
	CHECK(fd >= 0);
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	CHECK_EQ(lseek(fd, 0, SEEK_END), (long long)l.size);
	CHECK_EQ(knitk_endpoint_doorbell(k), -ENOTCONN);
	CHECK_EQ(knitk_endpoint_request_mailbox(k, 0, 1), 1);
	CHECK_EQ(knitk_endpoint_request_mailbox(k, 1, 0), -EINVAL);
	CHECK_EQ(knitk_endpoint_return_mailbox(k, 1), 3);
	CHECK_EQ(knitk_endpoint_return_mailbox(k, 2), -EINVAL);
	knitk_endpoint_destroy(k);
}

static void join_roles(void)
{
	const struct knitk_control *ctl;
	struct knitk_endpoint *h, *w0, *w0b;

	REQUIRE(knitk_endpoint_create(&geom2, KNITK_KNOT_FUTEX, &h) == 0);
	knitk_endpoint_control(h, &ctl);
	CHECK_EQ(knitk_endpoint_join(h, KNITK_ROLE_HOST, 1), -EINVAL);
	CHECK_EQ(knitk_endpoint_join(h, 7, 0), -EINVAL);
	CHECK_EQ(knitk_endpoint_join(h, KNITK_ROLE_HOST, 0), 1);
	CHECK_EQ(knitk_endpoint_join(h, KNITK_ROLE_HOST, 0), -EALREADY);
	CHECK_EQ(knitk_endpoint_doorbell(h), KNITK_DOORBELL_HOST);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(h), 0, &w0) == 0);
	CHECK_EQ(knitk_endpoint_join(w0, KNITK_ROLE_HOST, 0), -EBUSY);
	CHECK_EQ(knitk_endpoint_join(w0, KNITK_ROLE_WORKER, 2), -EINVAL);
	CHECK_EQ(knitk_endpoint_join(w0, KNITK_ROLE_WORKER, 0), 1);
	CHECK_EQ(ctl->live, 1ULL << 63 | 1);
	CHECK_EQ(ctl->generation[0], 1);
	knitk_endpoint_destroy(w0);			/* leaving = death of the role */
	CHECK_EQ(ctl->live, 1ULL << 63);
	CHECK_EQ(ctl->dead, 1);
	CHECK_EQ(ctl->death_seq, 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(h), 0, &w0b) == 0);
	CHECK_EQ(knitk_endpoint_join(w0b, KNITK_ROLE_WORKER, 0), 2);
	CHECK_EQ(ctl->dead, 0);
	CHECK_EQ(ctl->generation[0], 2);
	knitk_endpoint_destroy(w0b);
	knitk_endpoint_destroy(h);
}

/*
 * Leaving ends a role only for its holder (P1): an endpoint whose role
 * was marked dead and joined again by another, and a forked child that
 * releases the endpoints it inherited, leave the role where it is.
 */
static void release_leaves_others_roles(void)
{
	const struct knitk_control *ctl;
	struct knitk_endpoint *h, *w0, *w0b, *w0c;
	int status;
	pid_t pid;

	REQUIRE(knitk_endpoint_create(&geom2, KNITK_KNOT_FUTEX, &h) == 0);
	knitk_endpoint_control(h, &ctl);
	REQUIRE(knitk_endpoint_join(h, KNITK_ROLE_HOST, 0) == 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(h), 0, &w0) == 0);
	REQUIRE(knitk_endpoint_join(w0, KNITK_ROLE_WORKER, 0) == 1);
	/* w0's role ends; w0b takes it; then w0, stale, is released. */
	CHECK_EQ(knitk_endpoint_mark_dead(h, 0), 0);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(h), 0, &w0b) == 0);
	CHECK_EQ(knitk_endpoint_join(w0b, KNITK_ROLE_WORKER, 0), 2);
	knitk_endpoint_destroy(w0);
	CHECK_EQ(ctl->death_seq, 1);
	CHECK_EQ(ctl->live, 1ULL << 63 | 1);
	CHECK_EQ(knitk_endpoint_poll(w0b), 0);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(h), 0, &w0c) == 0);
	CHECK_EQ(knitk_endpoint_join(w0c, KNITK_ROLE_WORKER, 0), -EBUSY);
	knitk_endpoint_destroy(w0c);

	/* A child releases what it inherited, as cleanup code before exit. */
	pid = fork();
	REQUIRE(pid >= 0);
	if (!pid) {
		knitk_endpoint_destroy(w0b);
		knitk_endpoint_destroy(h);
		_exit(0);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(ctl->death_seq, 1);
	CHECK_EQ(ctl->live, 1ULL << 63 | 1);
	CHECK_EQ(knitk_endpoint_host_dead(w0b), 0);
	CHECK_EQ(knitk_endpoint_poll(w0b), 0);

	/* The holder's own release still ends its role. */
	knitk_endpoint_destroy(w0b);
	CHECK_EQ(ctl->death_seq, 2);
	CHECK_EQ(ctl->live, 1ULL << 63);
	knitk_endpoint_destroy(h);
}

/*
 * The ordered readers of the control page follow joins, deaths and
 * rejoins: knitk_endpoint_deaths, knitk_endpoint_role, knitk_endpoint_host_dead.
 */
static void control_page_readers(void)
{
	struct knitk_endpoint *h, *w0, *w1, *w1b;
	uint32_t seq, gen;
	uint64_t dead;

	REQUIRE(knitk_endpoint_create(&geom2, KNITK_KNOT_FUTEX, &h) == 0);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(h), 0, &w0) == 0);
	CHECK_EQ(knitk_endpoint_host_dead(w0), 0);		/* not joined yet */
	CHECK_EQ(knitk_endpoint_role(h, KNITK_DOORBELL_HOST, &gen), 0);
	CHECK_EQ(gen, 0);
	REQUIRE(knitk_endpoint_join(h, KNITK_ROLE_HOST, 0) == 1);
	REQUIRE(knitk_endpoint_join(w0, KNITK_ROLE_WORKER, 0) == 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(h), 0, &w1) == 0);
	REQUIRE(knitk_endpoint_join(w1, KNITK_ROLE_WORKER, 1) == 1);
	CHECK_EQ(knitk_endpoint_deaths(h, &seq, &dead), 0);
	CHECK_EQ(seq, 0);
	CHECK_EQ(dead, 0);
	CHECK_EQ(knitk_endpoint_role(h, KNITK_DOORBELL_HOST, NULL), 1);
	CHECK_EQ(knitk_endpoint_role(w0, 1, &gen), 1);
	CHECK_EQ(gen, 1);
	CHECK_EQ(knitk_endpoint_host_dead(w0), 0);

	/* Worker 1 dies (as the pool's monitor reports it), then rejoins. */
	CHECK_EQ(knitk_endpoint_mark_dead(h, 1), 0);
	CHECK_EQ(knitk_endpoint_deaths(w0, &seq, &dead), 0);
	CHECK_EQ(seq, 1);
	CHECK_EQ(dead, 1ULL << 1);
	CHECK_EQ(knitk_endpoint_role(h, 1, &gen), 0);
	CHECK_EQ(gen, 1);
	knitk_endpoint_destroy(w1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(h), 0, &w1b) == 0);
	CHECK_EQ(knitk_endpoint_join(w1b, KNITK_ROLE_WORKER, 1), 2);
	CHECK_EQ(knitk_endpoint_role(h, 1, &gen), 1);
	CHECK_EQ(gen, 2);
	CHECK_EQ(knitk_endpoint_deaths(h, NULL, &dead), 0);
	CHECK_EQ(dead, 0);
	CHECK_EQ(knitk_endpoint_deaths(h, &seq, NULL), 0);
	CHECK_EQ(seq, 1);

	/* The host leaves: the workers see it dead. */
	knitk_endpoint_destroy(h);
	CHECK_EQ(knitk_endpoint_host_dead(w0), 1);
	CHECK_EQ(knitk_endpoint_deaths(w0, &seq, &dead), 0);
	CHECK_EQ(seq, 2);
	CHECK_EQ(dead, 1ULL << KNITK_DOORBELL_HOST);
	CHECK_EQ(knitk_endpoint_role(w0, KNITK_DOORBELL_HOST, &gen), 0);
	CHECK_EQ(gen, 1);

	CHECK_EQ(knitk_endpoint_deaths(w0, NULL, NULL), -EINVAL);
	CHECK_EQ(knitk_endpoint_deaths(NULL, &seq, &dead), -EINVAL);
	CHECK_EQ(knitk_endpoint_role(w0, 2, NULL), -EINVAL);
	CHECK_EQ(knitk_endpoint_role(w0, 62, NULL), -EINVAL);
	CHECK_EQ(knitk_endpoint_role(NULL, 0, NULL), -EINVAL);
	CHECK_EQ(knitk_endpoint_host_dead(NULL), -EINVAL);
	knitk_endpoint_destroy(w1b);
	knitk_endpoint_destroy(w0);
}

static void attach_rejects_other_fds(void)
{
	struct knitk_endpoint *k;
	int p[2], fd;

	CHECK_EQ(knitk_endpoint_attach(-1, 0, &k), -EINVAL);
	REQUIRE(pipe(p) == 0);
	CHECK_EQ(knitk_endpoint_attach(p[0], 0, &k), -EINVAL);
	close(p[0]);
	close(p[1]);
	fd = memfd_create("not-a-knot", MFD_CLOEXEC);
	REQUIRE(fd >= 0);
	REQUIRE(ftruncate(fd, 1 << 16) == 0);
	CHECK_EQ(knitk_endpoint_attach(fd, 0, &k), -EINVAL);
	CHECK_EQ(knitk_endpoint_attach(fd, 1U << 4, &k), -EINVAL);
	close(fd);
}

/*
 * A process worker: the child attaches with the inherited fd (taking it),
 * joins, answers on its return mailbox and leaves; the host parks (no
 * timeout) until the answer, then until the death notice.
 */
static void process_worker_by_fd(void)
{
	const struct knitk_control *ctl;
	struct knitk_consumer *c;
	struct knitk_endpoint *h;
	struct knitk_msg m = { .size = sizeof(m) };
	uint64_t pend;
	int fd, status, ret;
	pid_t pid;

	REQUIRE(knitk_endpoint_create(&geom2, KNITK_KNOT_FUTEX, &h) == 0);
	REQUIRE(knitk_endpoint_join(h, KNITK_ROLE_HOST, 0) == 1);
	REQUIRE(knitk_consumer_create(h, 3, &c) == 0);
	knitk_endpoint_control(h, &ctl);
	fd = fcntl(knitk_endpoint_fd(h), F_DUPFD, 0);	/* no CLOEXEC: inherit */
	REQUIRE(fd >= 0);
	fflush(stdout);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct knitk_lane_header hd = { .value = 4242 };
		struct knitk_producer *p;
		struct knitk_endpoint *w;

		if (knitk_endpoint_attach(fd, KNITK_ATTACH_TAKE_FD, &w) ||
		    fcntl(fd, F_GETFD) != -1 ||
		    knitk_endpoint_join(w, KNITK_ROLE_WORKER, 1) != 1 ||
		    knitk_producer_create(w, 3, &p) ||
		    knitk_producer_send(p, &hd, NULL, 0) < 0 ||
		    knitk_producer_notify(p) < 0)
			_exit(1);
		knitk_producer_destroy(p);
		knitk_endpoint_destroy(w);
		_exit(0);
	}
	close(fd);
	while ((ret = knitk_lane_scan(c, &pend)) == 0)
		REQUIRE(knitk_doorbell_park(h, KNITK_WAIT_FOREVER) == 0);
	CHECK_EQ(ret, 1);
	REQUIRE(knitk_lane_decode(c, (unsigned int)__builtin_ctzll(pend), &m) == 0);
	CHECK_EQ(m.header.value, 4242);
	CHECK_EQ(knitk_lane_ack(c, pend), 0);
	while (!(ctl->dead & 2))
		REQUIRE(knitk_doorbell_park(h, KNITK_WAIT_FOREVER) == 0);
	CHECK_EQ(ctl->live, 1ULL << 63);
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	knitk_consumer_destroy(c);
	knitk_endpoint_destroy(h);
}

/* Publish one request for worker 0 (mailbox (0, 0)) from @host. */
static int request_worker0(struct knitk_endpoint *host, struct knitk_producer **p)
{
	struct knitk_lane_header h = { .function_id = 1, .task_id = 1 };
	int ret = knitk_producer_create(host,
			(unsigned int)knitk_endpoint_request_mailbox(host, 0, 0), p);

	return ret ? ret : knitk_producer_send(*p, &h, "x", 1) < 0;
}

/*
 * knitk_endpoint_poll on the futex backend, as poll() on the module: the
 * own doorbell's level, and POLLHUP | POLLERR alone once the role ended,
 * never the doorbell it owned (pending work, a new owner's state).
 */
static void ended_role_polls_hangup(void)
{
	struct knitk_endpoint *host, *w0, *w0b, *un;
	struct knitk_producer *p = NULL;

	REQUIRE(knitk_endpoint_create(&geom2, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w0) == 0);
	REQUIRE(knitk_endpoint_join(w0, KNITK_ROLE_WORKER, 0) >= 1);
	CHECK_EQ(knitk_endpoint_poll(NULL), -EINVAL);
	CHECK_EQ(knitk_endpoint_poll(w0), 0);
	CHECK_EQ(knitk_endpoint_poll(host), 0);
	REQUIRE(request_worker0(host, &p) == 0);
	CHECK_EQ(knitk_endpoint_poll(w0), POLLIN);
	CHECK_EQ(knitk_endpoint_poll(host), 0);
	/* The pool's monitor saw w0's process die: its role ended. */
	CHECK_EQ(knitk_endpoint_mark_dead(host, 0), 0);
	CHECK_EQ(knitk_endpoint_poll(w0), POLLHUP | POLLERR);
	CHECK_EQ(knitk_endpoint_poll(host), POLLPRI);
	/* A new owner of worker 0: its state is its own, not the old one's. */
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w0b) == 0);
	REQUIRE(knitk_endpoint_join(w0b, KNITK_ROLE_WORKER, 0) >= 1);
	CHECK_EQ(knitk_endpoint_poll(w0b), POLLIN);
	CHECK_EQ(knitk_endpoint_poll(w0), POLLHUP | POLLERR);
	CHECK_EQ(knitk_endpoint_poll(host), 0);
	/* Unjoined: the host's doorbell; the host's end hangs up the workers. */
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &un) == 0);
	CHECK_EQ(knitk_endpoint_poll(un), 0);
	CHECK_EQ(knitk_endpoint_mark_dead(w0b, KNITK_DOORBELL_HOST), 0);
	CHECK_EQ(knitk_endpoint_poll(host), POLLHUP | POLLERR);
	CHECK_EQ(knitk_endpoint_poll(w0b), POLLIN | POLLPRI | POLLHUP);
	CHECK_EQ(knitk_endpoint_poll(un), POLLPRI);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(un);
	knitk_endpoint_destroy(w0b);
	knitk_endpoint_destroy(w0);
	knitk_endpoint_destroy(host);
}

/*
 * The futex backend's pollable fd is the host's event fd: the end of the
 * host's role signals it, so a loop waiting there does not sleep on.
 */
static void host_end_signals_event_fd(void)
{
	struct pollfd pfd = { .events = POLLIN };
	struct knitk_endpoint *host, *w0;
	uint64_t v;

	REQUIRE(knitk_endpoint_create(&geom2, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w0) == 0);
	REQUIRE(knitk_endpoint_join(w0, KNITK_ROLE_WORKER, 0) >= 1);
	pfd.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	REQUIRE(pfd.fd >= 0);
	CHECK_EQ(knitk_endpoint_set_event_fd(host, pfd.fd), 0);
	CHECK_EQ(knitk_endpoint_set_event_fd(w0, pfd.fd), 0);
	CHECK_EQ(poll(&pfd, 1, 0), 0);
	/* A worker's watch saw the host's process go (spawn.c). */
	CHECK_EQ(knitk_endpoint_mark_dead(w0, KNITK_DOORBELL_HOST), 0);
	CHECK_EQ(poll(&pfd, 1, 0), 1);
	CHECK_EQ(read(pfd.fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	knitk_endpoint_destroy(w0);
	knitk_endpoint_destroy(host);
	close(pfd.fd);
}

/*
 * The RLIMIT_MEMLOCK fallback is opt-in and never forced past
 * KNITK_KNOT_KMOD; knitk_last_error() says nothing when nothing was
 * refused.  (The refusal itself needs the module: the guest's knot_test
 * memlock_refusal_explained_and_fallback.)
 */
static void memlock_fallback_flags(void)
{
	struct knitk_endpoint *k;

	CHECK(knitk_last_error() == NULL);
	CHECK_EQ(knitk_endpoint_create(&geom2, KNITK_KNOT_KMOD | KNITK_KNOT_FALLBACK_FUTEX,
				       &k), -EINVAL);
	CHECK_EQ(knitk_endpoint_create(&geom2, 1U << 4, &k), -EINVAL);
	REQUIRE(knitk_endpoint_create(&geom2, KNITK_KNOT_FUTEX | KNITK_KNOT_FALLBACK_FUTEX,
				      &k) == 0);
	CHECK_EQ(knitk_endpoint_backend(k), KNITK_BACKEND_FUTEX);
	CHECK(knitk_last_error() == NULL);
	knitk_endpoint_destroy(k);
}

static void kmod_not_supported_calls(void)
{
	struct knitk_endpoint *k;

	REQUIRE(knitk_endpoint_create(&geom2, KNITK_KNOT_FUTEX, &k) == 0);
	CHECK_EQ(knitk_endpoint_mark_dead(k, 5), -EINVAL);
	CHECK_EQ(knitk_endpoint_mark_dead(k, 0), -ENOENT);	/* not live */
	knitk_endpoint_destroy(k);
	if (!have_device())
		SKIP("no /dev/knitk");
	REQUIRE(knitk_endpoint_create(&geom2, KNITK_KNOT_KMOD, &k) == 0);
	CHECK_EQ(knitk_endpoint_mark_dead(k, 0), -EOPNOTSUPP);
	knitk_endpoint_destroy(k);
}

int main(void)
{
	TEST(backend_choice);
	TEST(invalid_geometry);
	TEST(region_lanes_recorded);
	TEST(control_page_and_layout);
	TEST(join_roles);
	TEST(release_leaves_others_roles);
	TEST(control_page_readers);
	TEST(attach_rejects_other_fds);
	TEST(process_worker_by_fd);
	TEST(kmod_not_supported_calls);
	TEST(ended_role_polls_hangup);
	TEST(host_end_signals_event_fd);
	TEST(memlock_fallback_flags);
	return tap_exit();
}
