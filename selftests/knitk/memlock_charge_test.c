// SPDX-License-Identifier: GPL-2.0
/*
 * The locked memory a knot costs is charged to the user whose process
 * creates it, under that user's RLIMIT_MEMLOCK, and given back when the
 * knot is freed: every round of filling the limit takes as many knots as
 * the first; a mapping keeps the knot, and its charge, until it is
 * unmapped; knots created as one uid and closed as another are credited
 * back to the first, and the second is neither credited nor debited;
 * ATTACH costs nothing, even at the limit.  The creator is charged, not
 * the opener: a process that opened the device as root and dropped to
 * nobody, and nobody that is root of a user namespace of its own
 * (CAP_IPC_LOCK there, not over the host's memory), are held to the
 * limit.
 */
#define _GNU_SOURCE
#include <grp.h>
#include <sys/resource.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_test.h"
#include "knitk_live.h"

#define NOBODY		65534
#define PAGE		KNITK_PAGE_BYTES

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
		    setresgid(NOBODY, NOBODY, NOBODY) || become(UID_A))
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

TEST_HARNESS_MAIN
