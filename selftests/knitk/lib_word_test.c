// SPDX-License-Identifier: GPL-2.0
/*
 * Word waits on the module: KNITK_IOC_WORD_WAIT and KNITK_IOC_WORD_WAKE
 * through libknitk (the cases of lib/tests/word_cases.h, which the host
 * runs on the futex backend), and the ioctls' own refusals: offsets,
 * flags, reserved fields, nr 0, an endpoint with no knot, a wake whose
 * argument cannot be written back (refused before it wakes anyone), a
 * signal.  api_test checks the handshake's report of the feature.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_test.h"
#include "../../lib/tests/word_cases.h"

FIXTURE(lword) {
	struct word_knot wk;
	char why[256];
};

FIXTURE_SETUP(lword)
{
	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, word_knot_create(&self->wk, KNITK_KNOT_KMOD));
}

FIXTURE_TEARDOWN(lword)
{
	if (self->wk.ep)
		knitk_endpoint_destroy(self->wk.ep);
}

#define LWORD_CASE(name)						\
TEST_F(lword, name)							\
{									\
	int ret = word_case_##name(&self->wk, self->why,		\
				   sizeof(self->why));			\
									\
	if (ret)							\
		TH_LOG("%s", self->why);				\
	ASSERT_EQ(0, ret);						\
}

LWORD_CASE(bad_arguments)
LWORD_CASE(mismatch_and_deadline)
LWORD_CASE(wakes_only_its_word)
LWORD_CASE(wake_counts)
LWORD_CASE(ping_pong)
LWORD_CASE(across_processes)

/* Every field checked, and an endpoint with no knot refused. */
TEST(word_ioctl_refusals)
{
	struct knitk_geometry g;
	struct knitk_word_wait w;
	struct knitk_word_wake k;
	struct knot kn;
	__u64 data;
	int fd;

	KNITK_REQUIRE_DEV();
	fd = knitk_open();
	ASSERT_LE(0, fd);
	w = (struct knitk_word_wait){ .offset = 4096, .deadline_ns = 0 };
	EXPECT_EQ(-ENOTCONN, knitk_ioctl(fd, KNITK_IOC_WORD_WAIT, &w));
	k = (struct knitk_word_wake){ .offset = 4096, .nr = 1 };
	EXPECT_EQ(-ENOTCONN, knitk_ioctl(fd, KNITK_IOC_WORD_WAKE, &k));
	close(fd);

	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&kn, &g));
	data = kn.layout.control_size;
	/* A good wait, with a past deadline, times out. */
	w = (struct knitk_word_wait){ .offset = data, .deadline_ns = 0 };
	EXPECT_EQ(-ETIMEDOUT, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAIT, &w));
	w.offset = data + 2;
	EXPECT_EQ(-EINVAL, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAIT, &w));
	w.offset = data - 4;
	EXPECT_EQ(-EINVAL, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAIT, &w));
	w.offset = kn.layout.size;
	EXPECT_EQ(-EINVAL, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAIT, &w));
	w.offset = ~0ULL & ~3ULL;
	EXPECT_EQ(-EINVAL, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAIT, &w));
	w = (struct knitk_word_wait){ .offset = data, .flags = 1 };
	EXPECT_EQ(-EINVAL, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAIT, &w));
	w = (struct knitk_word_wait){ .offset = data, .reserved = 1 };
	EXPECT_EQ(-EINVAL, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAIT, &w));
	/* The last word is the knot's. */
	w = (struct knitk_word_wait){ .offset = kn.layout.size - 4, .expected = 1 };
	EXPECT_EQ(-EAGAIN, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAIT, &w));
	EXPECT_EQ(-EFAULT, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAIT, NULL));

	k = (struct knitk_word_wake){ .offset = data, .nr = 0 };
	EXPECT_EQ(-EINVAL, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAKE, &k));
	k = (struct knitk_word_wake){ .offset = data, .nr = 1, .flags = 1 };
	EXPECT_EQ(-EINVAL, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAKE, &k));
	k = (struct knitk_word_wake){ .offset = data, .nr = 1, .reserved = 1 };
	EXPECT_EQ(-EINVAL, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAKE, &k));
	k = (struct knitk_word_wake){ .offset = 0, .nr = 1 };
	EXPECT_EQ(-EINVAL, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAKE, &k));
	k = (struct knitk_word_wake){ .offset = data, .nr = 1, .woken = 99 };
	EXPECT_EQ(0, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAKE, &k));
	EXPECT_EQ(0, k.woken);
	EXPECT_EQ(-EFAULT, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAKE, NULL));
	knot_close(&kn);
}

struct lword_sleeper {
	int fd;
	__u64 offset;
	int ret;
};

static void *lword_sleep(void *arg)
{
	struct lword_sleeper *s = arg;
	struct knitk_word_wait w = {
		.offset = s->offset, .deadline_ns = KNITK_WAIT_FOREVER,
	};

	s->ret = knitk_ioctl(s->fd, KNITK_IOC_WORD_WAIT, &w);
	return NULL;
}

/*
 * A wake whose argument is read-only memory is refused (-EFAULT) before
 * it wakes anyone: the sleeper is still there for the next, good wake.
 */
TEST(word_wake_fault_wakes_nobody)
{
	struct knitk_geometry g;
	struct lword_sleeper s;
	struct knitk_word_wake *ro, k;
	pthread_t t;
	struct knot kn;

	KNITK_REQUIRE_DEV();
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&kn, &g));
	s = (struct lword_sleeper){ .fd = kn.fd, .offset = kn.layout.control_size };
	ASSERT_EQ(0, pthread_create(&t, NULL, lword_sleep, &s));
	ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);
	*ro = (struct knitk_word_wake){ .offset = s.offset, .nr = 1 };
	ASSERT_EQ(0, mprotect(ro, 4096, PROT_READ));
	/* However often: each is refused before the wake. */
	for (int i = 0; i < 1000; i++)
		ASSERT_EQ(-EFAULT, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAKE, ro));
	/* Then a good wake finds the sleeper, once it sleeps. */
	do {
		k = (struct knitk_word_wake){ .offset = s.offset, .nr = 1 };
		ASSERT_EQ(0, knitk_ioctl(kn.fd, KNITK_IOC_WORD_WAKE, &k));
	} while (!k.woken);
	EXPECT_EQ(1, k.woken);
	pthread_join(t, NULL);
	EXPECT_EQ(0, s.ret);
	munmap(ro, 4096);
	knot_close(&kn);
}

static void lword_on_signal(int sig)
{
	(void)sig;
}

/* A signal without SA_RESTART ends a word wait with -EINTR. */
TEST(word_wait_signal)
{
	struct sigaction sa = { .sa_handler = lword_on_signal };
	struct knitk_geometry g;
	struct lword_sleeper s;
	pthread_t t;
	struct knot kn;

	KNITK_REQUIRE_DEV();
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	knitk_geom_small(&g);
	ASSERT_EQ(0, knot_make(&kn, &g));
	s = (struct lword_sleeper){ .fd = kn.fd, .offset = kn.layout.control_size, .ret = 1 };
	ASSERT_EQ(0, pthread_create(&t, NULL, lword_sleep, &s));
	/* Signal until the sleeper has returned: it never returns otherwise. */
	while (__atomic_load_n(&s.ret, __ATOMIC_ACQUIRE) == 1) {
		pthread_kill(t, SIGUSR1);
		sched_yield();
	}
	pthread_join(t, NULL);
	EXPECT_EQ(-EINTR, s.ret);
	knot_close(&kn);
}

TEST_HARNESS_MAIN
