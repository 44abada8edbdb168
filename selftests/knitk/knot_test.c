// SPDX-License-Identifier: GPL-2.0
/*
 * Knot resources: the max_knot_bytes memory cap, the per-user bound of
 * RLIMIT_MEMLOCK (knot pages are charged to the creating user's locked_vm
 * unless it has CAP_IPC_LOCK), and the knot's lifetime, which ends with its
 * last endpoint and last mapping (seen through the module's reference
 * count, which every live knot file holds).
 */
#define _GNU_SOURCE
#include <grp.h>
#include <sys/resource.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_pool.h"
#include "knitk_test.h"

#define MAX_KNOT_BYTES	KNITK_SYSMOD "/parameters/max_knot_bytes"
#define REFCNT		KNITK_SYSMOD "/refcnt"

static unsigned long long refcnt(struct __test_metadata *_metadata)
{
	unsigned long long v = ~0ULL;

	EXPECT_EQ(0, knitk_sysfs_read(REFCNT, &v));
	return v;
}

FIXTURE(cap) {
	unsigned long long saved;
	int have_saved;
	int fd[3];
};

FIXTURE_SETUP(cap)
{
	int i;

	KNITK_REQUIRE_DEV();
	for (i = 0; i < 3; i++)
		self->fd[i] = -1;
	ASSERT_EQ(0, knitk_sysfs_read(MAX_KNOT_BYTES, &self->saved));
	self->have_saved = 1;
	for (i = 0; i < 3; i++) {
		self->fd[i] = knitk_open();
		ASSERT_LE(0, self->fd[i]);
	}
}

FIXTURE_TEARDOWN(cap)
{
	int i;

	/* Runs after a failed ASSERT too: never leave the cap lowered. */
	if (self->have_saved)
		EXPECT_EQ(0, knitk_sysfs_write(MAX_KNOT_BYTES, self->saved));
	for (i = 0; i < 3; i++)
		if (self->fd[i] >= 0)
			close(self->fd[i]);
}

TEST_F(cap, max_knot_bytes_e2big)
{
	struct knitk_geometry fits, big;
	struct knitk_layout lf, lb;
	unsigned long long now = 0;

	knitk_geom(&fits, 0, 1, 1, 64, 64, 0);
	knitk_geom(&big, 0, 1, 1, 64, 64, KNITK_ARENA_ALIGN);
	ASSERT_EQ(0, knitk_layout_compute(&fits, &lf));
	ASSERT_EQ(0, knitk_layout_compute(&big, &lb));
	ASSERT_LT(lf.size, lb.size);
	/* The default cap must allow the bigger one, or the test proves nothing. */
	ASSERT_LE(lb.size, self->saved);

	/* The cap is inclusive: a knot of exactly max_knot_bytes is made. */
	ASSERT_EQ(0, knitk_sysfs_write(MAX_KNOT_BYTES, lf.size));
	ASSERT_EQ(0, knitk_sysfs_read(MAX_KNOT_BYTES, &now));
	EXPECT_EQ(lf.size, now);
	EXPECT_EQ(0, knitk_create(self->fd[0], &fits, NULL));
	EXPECT_EQ(-E2BIG, knitk_create(self->fd[1], &big, NULL));

	ASSERT_EQ(0, knitk_sysfs_write(MAX_KNOT_BYTES, self->saved));
	/* The refused endpoint is still free to create. */
	EXPECT_EQ(0, knitk_create(self->fd[1], &big, NULL));
	EXPECT_EQ(0, knitk_create(self->fd[2], &big, NULL));
}

/* Kernel log lines from the fd's position on that name a warning. */
static int kmsg_warnings(int fd)
{
	char rec[2048];
	int n = 0;
	ssize_t len;

	/* One record per read; -EAGAIN at the end, -EPIPE if overrun. */
	while ((len = read(fd, rec, sizeof(rec) - 1)) > 0 || errno == EPIPE) {
		if (len <= 0)
			continue;
		rec[len] = '\0';
		if (strstr(rec, "WARNING:") || strstr(rec, "Call Trace") ||
		    strstr(rec, "invoked oom-killer"))
			n++;
	}
	return n;
}

/*
 * With the cap raised, a geometry of many TiB (its page-pointer array alone
 * is larger than kvmalloc takes) fails with -ENOMEM, and quietly.
 */
TEST_F(cap, raised_cap_huge_knot_enomem_without_warning)
{
	struct knitk_geometry huge;
	struct knitk_layout l;
	int kmsg;

	knitk_geom(&huge, 0, KNITK_MAX_WORKERS, KNITK_MAX_SUBMITTERS, 64, 64,
		   KNITK_MAX_ARENA_BYTES);
	ASSERT_EQ(0, knitk_layout_compute(&huge, &l));
	ASSERT_LE(l.nr_mailboxes, KNITK_MAX_MAILBOXES);
	ASSERT_LT(1ULL << 40, l.size);
	kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	ASSERT_LE(0, kmsg);
	ASSERT_EQ(0, (int)lseek(kmsg, 0, SEEK_END));
	ASSERT_EQ(0, knitk_sysfs_write(MAX_KNOT_BYTES, 1ULL << 62));
	EXPECT_EQ(-ENOMEM, knitk_create(self->fd[0], &huge, NULL));
	EXPECT_EQ(0, kmsg_warnings(kmsg));
	close(kmsg);
	ASSERT_EQ(0, knitk_sysfs_write(MAX_KNOT_BYTES, self->saved));
	/* The refused endpoint is still free to create. */
	knitk_geom_small(&huge);
	EXPECT_EQ(0, knitk_create(self->fd[0], &huge, NULL));
}

#define NOBODY		65534
#define MAX_TRIES	16

/*
 * Run in a child: create knots of g on fresh endpoints until CREATE fails.
 * Returns how many were made; *err gets the failure, fds[] the endpoints.
 */
static int create_until_refused(const struct knitk_geometry *g, int *fds,
				int *err)
{
	int n;

	*err = 0;
	for (n = 0; n < MAX_TRIES; n++) {
		fds[n] = knitk_open();
		if (fds[n] < 0) {
			*err = fds[n];
			break;
		}
		*err = knitk_create(fds[n], g, NULL);
		if (*err) {
			close(fds[n]);
			break;
		}
	}
	return n;
}

static void close_all(int *fds, int n)
{
	while (n--)
		close(fds[n]);
}

/*
 * The child of memlock_bounds_unprivileged_user: drops to nobody with a
 * memlock limit of 3.5 small knots.  Exit status: 0, or the failed step.
 */
static int unprivileged_child(void)
{
	struct knitk_geometry g;
	struct knitk_layout l;
	struct rlimit rl;
	int fds[MAX_TRIES], n, err;

	knitk_geom_small(&g);
	if (knitk_layout_compute(&g, &l))
		return 9;
	rl.rlim_cur = rl.rlim_max = 3 * l.size + l.size / 2;
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return 10;
	if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
	    setresuid(NOBODY, NOBODY, NOBODY))
		return 11;
	/* A uid change from root clears every capability, CAP_IPC_LOCK too. */
	if (geteuid() != NOBODY)
		return 12;

	n = create_until_refused(&g, fds, &err);
	if (n != 3 || err != -ENOMEM)
		return printf("# nobody made %d knots, then %d\n", n, err), 13;
	/* Closing one returns its charge: one more fits, and no second. */
	close(fds[2]);
	n = create_until_refused(&g, fds + 2, &err);
	if (n != 1 || err != -ENOMEM)
		return printf("# after a close: %d knots, then %d\n", n, err), 14;
	close_all(fds, 3);
	/* And everything is returned once the knots are gone. */
	n = create_until_refused(&g, fds, &err);
	if (n != 3 || err != -ENOMEM)
		return printf("# after closing all: %d, then %d\n", n, err), 15;
	close_all(fds, n);
	return 0;
}

/* The child of memlock_ignored_with_cap_ipc_lock: root, tiny limit. */
static int privileged_child(void)
{
	struct knitk_geometry g;
	struct knitk_layout l;
	struct rlimit rl;
	int fds[MAX_TRIES], n, err, i;

	knitk_geom_small(&g);
	if (knitk_layout_compute(&g, &l))
		return 9;
	rl.rlim_cur = rl.rlim_max = l.size / 2;
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return 10;
	for (n = 0; n < 4; n++) {
		fds[n] = knitk_open();
		if (fds[n] < 0)
			return 11;
		err = knitk_create(fds[n], &g, NULL);
		if (err)
			return printf("# root knot %d: %d\n", n, err), 12;
	}
	for (i = 0; i < n; i++)
		close(fds[i]);
	return 0;
}

static int run_child(int (*fn)(void))
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int rc = fn();

		fflush(stdout);
		_exit(rc);
	}
	if (waitpid(pid, &status, 0) != pid)
		return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int echo_task(const void *in, size_t len, struct knitk_reply *out,
		     void *ctx)
{
	(void)ctx;
	return knitk_reply_set(out, in, len);
}

/* The knobs a RLIMIT_MEMLOCK refusal names; NULL when all are there. */
static const char *memlock_message_lacks(const char *msg, unsigned long long limit)
{
	static const char *const want[] = {
		"RLIMIT_MEMLOCK", "ulimit -l", "LimitMEMLOCK=", "CAP_IPC_LOCK",
		"KNITK_POOL_FALLBACK_FUTEX",
	};
	static char num[32];
	unsigned int i;

	if (!msg)
		return "a message";
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(msg, want[i]))
			return want[i];
	snprintf(num, sizeof(num), "%llu bytes", limit);
	return strstr(msg, num) ? NULL : num;
}

#define MEMLOCK_POOL_LIMIT	(64 * 1024)

/*
 * The child of memlock_refusal_explained_and_fallback: nobody, with a
 * memlock limit below any pool's knot.  Exit status: 0, or the failed step.
 */
static int memlock_pool_child(void)
{
	static const knitk_task_fn fns[] = { echo_task };
	const struct knitk_task_table table = { .tasks = fns, .nr_tasks = 1 };
	struct knitk_pool_opts o = { .size = sizeof(o), .nr_workers = 2 };
	struct knitk_layout lay;
	struct knitk_endpoint *ep;
	struct knitk_pool *pool;
	const char *msg, *lacks;
	char needed[48], out[8];
	struct rlimit rl;
	size_t len;
	int ret;

	rl.rlim_cur = rl.rlim_max = MEMLOCK_POOL_LIMIT;
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		return 10;
	if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
	    setresuid(NOBODY, NOBODY, NOBODY) || geteuid() != NOBODY)
		return 11;
	/* Refused, and told why: the limit, the bytes and the knobs. */
	ret = knitk_pool_create(&o, &table, &pool);
	msg = knitk_last_error();
	printf("# %d: %s\n", ret, msg ? msg : "(no message)");
	if (ret != -ENOMEM)
		return 12;
	lacks = memlock_message_lacks(msg, MEMLOCK_POOL_LIMIT);
	if (lacks)
		return printf("# the message lacks \"%s\"\n", lacks), 13;
	/* No fallback unless asked: the module's backend forced, neither. */
	o.flags = KNITK_POOL_FALLBACK_FUTEX;
	o.knot_flags = KNITK_KNOT_KMOD;
	if (knitk_pool_create(&o, &table, &pool) != -EINVAL)
		return 14;
	/* Asked: the pool runs on the futex backend, and says so. */
	o.knot_flags = 0;
	ret = knitk_pool_create(&o, &table, &pool);
	if (ret)
		return printf("# fallback: %d\n", ret), 15;
	msg = knitk_last_error();
	if (memlock_message_lacks(msg, MEMLOCK_POOL_LIMIT))
		return 16;
	if (knitk_pool_endpoint(pool, &ep) ||
	    knitk_endpoint_backend(ep) != KNITK_BACKEND_FUTEX ||
	    knitk_endpoint_layout(ep, &lay, NULL))
		return 17;
	/* The bytes needed: the knot's size, which the futex backend got. */
	snprintf(needed, sizeof(needed), "knot of %llu bytes",
		 (unsigned long long)lay.size);
	if (!strstr(msg, needed))
		return printf("# the message lacks \"%s\"\n", needed), 18;
	printf("# the knot needs %llu bytes, %.1f KiB per worker\n",
	       (unsigned long long)lay.size, lay.size / 1024.0 / o.nr_workers);
	len = 0;
	if (knitk_pool_call(pool, 0, "memlock", 7, NULL, out, sizeof(out), &len) ||
	    len != 7 || memcmp(out, "memlock", 7))
		return 19;
	knitk_pool_destroy(pool);
	/* A knot made without a refusal clears the message. */
	o.flags = 0;
	o.knot_flags = KNITK_KNOT_FUTEX;
	if (knitk_pool_create(&o, &table, &pool) || knitk_last_error())
		return 20;
	knitk_pool_destroy(pool);
	return 0;
}

/*
 * A pool the module refuses for RLIMIT_MEMLOCK fails with -ENOMEM and a
 * message naming the limit, the bytes needed and the knobs; with
 * KNITK_POOL_FALLBACK_FUTEX, and only then, it runs on the futex backend.
 */
TEST(memlock_refusal_explained_and_fallback)
{
	KNITK_REQUIRE_DEV();
	if (geteuid() != 0)
		SKIP(return, "needs root to drop to uid %d", NOBODY);
	EXPECT_EQ(0, run_child(memlock_pool_child));
}

/*
 * An unprivileged user is held to RLIMIT_MEMLOCK: its knots are refused
 * with -ENOMEM once they would pass it, and closing them gives it back.
 */
TEST(memlock_bounds_unprivileged_user)
{
	KNITK_REQUIRE_DEV();
	if (geteuid() != 0)
		SKIP(return, "needs root to drop to uid %d", NOBODY);
	EXPECT_EQ(0, run_child(unprivileged_child));
}

/* CAP_IPC_LOCK is not held to it. */
TEST(memlock_ignored_with_cap_ipc_lock)
{
	KNITK_REQUIRE_DEV();
	if (geteuid() != 0)
		SKIP(return, "needs root for CAP_IPC_LOCK");
	EXPECT_EQ(0, run_child(privileged_child));
}

FIXTURE(life) {
	struct knot a, b;
	unsigned long long before;
};

FIXTURE_SETUP(life)
{
	KNITK_REQUIRE_DEV();
	self->a.fd = self->b.fd = -1;
	/* Nothing of ours is open yet. */
	self->before = refcnt(_metadata);
	ASSERT_NE(~0ULL, self->before);
}

FIXTURE_TEARDOWN(life)
{
	knot_close(&self->a);
	knot_close(&self->b);
}

/* The fd alone, then the mapping alone, each keeps the knot alive. */
TEST_F(life, refcnt_returns_after_close_and_unmap)
{
	struct knitk_geometry g;

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->a, &g));
	EXPECT_LT(self->before, refcnt(_metadata));

	ASSERT_EQ(0, close(self->a.fd));
	self->a.fd = -1;
	EXPECT_LT(self->before, refcnt(_metadata));
	/* The mappings still reach the knot. */
	EXPECT_EQ(KNITK_MAGIC, self->a.ctl->magic);
	self->a.data[0] = 0x42;
	EXPECT_EQ(0x42, self->a.data[0]);

	knot_unmap(&self->a);
	EXPECT_EQ(self->before, refcnt(_metadata));
}

/* An attached endpoint keeps the knot, and its memory, after the creator. */
TEST_F(life, knot_outlives_creator)
{
	struct knitk_geometry g;
	struct knot c = { .fd = -1 };

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->a, &g));
	self->b.fd = knitk_open();
	ASSERT_LE(0, self->b.fd);
	ASSERT_EQ(0, knitk_attach(self->b.fd, self->a.fd, &self->b.layout));
	self->a.data[7] = 0x17;

	knot_close(&self->a);
	ASSERT_EQ(0, knot_map(&self->b));
	EXPECT_EQ(KNITK_MAGIC, self->b.ctl->magic);
	EXPECT_EQ(0x17, self->b.data[7]);

	/* And it is still a source for new endpoints. */
	c.fd = knitk_open();
	ASSERT_LE(0, c.fd);
	ASSERT_EQ(0, knitk_attach(c.fd, self->b.fd, &c.layout));
	ASSERT_EQ(0, knot_map(&c));
	EXPECT_EQ(0x17, c.data[7]);
	knot_close(&c);

	EXPECT_LT(self->before, refcnt(_metadata));
	knot_close(&self->b);
	EXPECT_EQ(self->before, refcnt(_metadata));
}

/* A knot made after another was freed starts from zeroed memory. */
TEST_F(life, new_knot_after_free_is_zeroed)
{
	struct knitk_geometry g;
	size_t i, len, nonzero = 0;

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&self->a, &g));
	len = self->a.layout.size - self->a.layout.control_size;
	memset(self->a.data, 0xee, len);
	knot_close(&self->a);
	EXPECT_EQ(self->before, refcnt(_metadata));

	ASSERT_EQ(0, knot_make(&self->b, &g));
	for (i = 0; i < len; i++)
		nonzero += self->b.data[i] != 0;
	EXPECT_EQ(0UL, nonzero);
	EXPECT_EQ(0U, self->b.ctl->death_seq);
}

TEST_HARNESS_MAIN
