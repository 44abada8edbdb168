// SPDX-License-Identifier: GPL-2.0
/*
 * The first calls on one endpoint racing each other and its close: JOIN,
 * close and poll() released together, and a JOIN held in copy_from_user()
 * (userfaultfd) across the close of the only fd, leave no role live
 * without an fd, mapped or not; endpoints racing for one slot, and one
 * endpoint racing two JOINs, have exactly one winner; a JOIN racing the
 * death of the role's previous owner takes the role once the death is
 * seen, and the late end of the old owner never ends the new one's;
 * CREATE racing CREATE or ATTACH has one winner and leaves no knot of the
 * race behind; and what races a CREATE (ATTACH, JOIN, mmap) sees no knot
 * or the whole knot, never one half made.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <linux/userfaultfd.h>

#include "knitk_fixtures.h"

#define CLOSE_RACE_ROUNDS	300

struct close_race {
	pthread_barrier_t bar;
	int fd;
	int join_ret;
	int poll_ret;
};

static void *race_join(void *arg)
{
	struct close_race *r = arg;

	pthread_barrier_wait(&r->bar);
	r->join_ret = knitk_join(r->fd, KNITK_ROLE_WORKER, 0, NULL);
	return NULL;
}

static void *race_poll(void *arg)
{
	struct close_race *r = arg;
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

	for (round = 0; round < CLOSE_RACE_ROUNDS; round++) {
		struct knot e = { .layout = self->k.layout };
		pthread_t tj, tp;
		struct close_race r;
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
	       CLOSE_RACE_ROUNDS, stuck);
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
		e = knot_attached(&self->k);
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
		int e = knot_attached(&k);
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
		EXPECT_EQ(round % 2 && r.ret[0] ? 1 : 2, knitk_live_knots());
		close(e);
		while (knitk_live_knots() != 1)
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

TEST_HARNESS_MAIN
