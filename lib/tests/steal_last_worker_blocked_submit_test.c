// SPDX-License-Identifier: GPL-2.0
/*
 * A submit waiting for room in a stealing pool when its last worker dies
 * for good (no KNITK_POOL_RESPAWN): knitk_pool_submit, knitk_pool_call
 * and knitk_pool_loan promise -EPIPE when no worker is left to run the
 * call, and a submit with a deadline waits no longer than that.  Here
 * the only worker is busy with a long call, a second call's argument
 * fills the request arena, and a third submit waits for room; then the
 * worker is SIGKILLed.  The calls queued complete (-EOWNERDEAD for the
 * one the worker held, -EPIPE for the one nobody took), and the waiting
 * submit must return too: -EPIPE, or a handle whose call ended -EPIPE.
 * The same with KNITK_POOL_RESPAWN and a successor that fails to start,
 * and with private lanes, where the waiting submit's call ends
 * -EOWNERDEAD, for contrast.  Each case runs in a child of its own, so
 * a submit that never returns fails its case (after a bounded wait) and
 * takes nothing else with it.  Public headers only.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "knitk.h"
#include "knitk_pool.h"
#include "tap.h"
#include "futex_asleep.h"

/*
 * u32 ms, then any bytes: sleeps, returns early when aborted.  Exactly
 * two u32s: the second is a pipe's write end, told 's' when it starts.
 */
static int task_sleep(const void *in, size_t len, struct knitk_reply *out,
		      void *ctx)
{
	uint32_t ms = 0, fd;
	uint64_t end;

	(void)out;
	if (len >= sizeof(ms))
		memcpy(&ms, in, sizeof(ms));
	if (len == 2 * sizeof(fd)) {
		memcpy(&fd, (const char *)in + sizeof(ms), sizeof(fd));
		if (write((int)fd, "s", 1) != 1)
			return -EIO;
	}
	end = tap_now_ns() + (uint64_t)ms * 1000000;
	while (tap_now_ns() < end && knitk_task_aborted(ctx) != 1)
		usleep(500);
	return 1;
}

static const knitk_task_fn fns[] = { task_sleep };
static const struct knitk_task_table table = { .tasks = fns, .nr_tasks = 1 };

#define ARENA		4096
#define BIG		3000		/* two never fit the arena at once */
#define LONG_MS		60000U
#define SEC		1000000000ULL
/* A submit still waiting this long after the death never returns. */
#define HANG_NS		(20 * SEC)

enum way { SUBMIT, SUBMIT_DEADLINE, POOL_CALL, LOAN, SUBMIT_RESPAWN_FAILS };

/*
 * SUBMIT_RESPAWN_FAILS: KNITK_POOL_RESPAWN, and the successor exits
 * before it joins (the pool's own prefix command, once the file named
 * by NOSPAWN_ENV exists): the last worker is gone for good all the same.
 */
#define NOSPAWN_ENV	"KNITK_TEST_NOSPAWN"
static char *const prefix[] = {
	"/bin/sh", "-c", "[ -e \"$" NOSPAWN_ENV "\" ] && exit 1; exec \"$@\"", "sh", NULL,
};
static char nospawn[64];

struct blocked {
	struct knitk_pool *pool;
	enum way way;
	uint64_t deadline_ns;
	struct knitk_call *c;
	_Atomic pid_t tid;
	_Atomic int ret;
	_Atomic int done;
};

static unsigned char big[BIG];

/*
 * Thread @tid sleeps in a futex wait (the pool's condition variable of a
 * submit waiting for room), read from /proc.
 */
static bool asleep_in_futex(pid_t tid)
{
	char buf[256], *p;

	if (futex_asleep_read(tid, "stat", buf, sizeof(buf)))
		return false;
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || p[2] != 'S')
		return false;
	return !futex_asleep_read(tid, "syscall", buf, sizeof(buf)) &&
	       atoi(buf) == SYS_futex;
}

static void *blocked_main(void *arg)
{
	struct blocked *b = arg;
	struct knitk_call_opts o = { .size = sizeof(o), .deadline_ns = b->deadline_ns };
	const struct knitk_call_opts *op = b->deadline_ns ? &o : NULL;
	void *buf;
	size_t len;
	int ret;

	atomic_store(&b->tid, (pid_t)syscall(SYS_gettid));
	switch (b->way) {
	case POOL_CALL:
		ret = knitk_pool_call(b->pool, 0, big, sizeof(big), op, NULL, 0, &len);
		break;
	case LOAN:
		ret = knitk_pool_loan(b->pool, 0, sizeof(big), op, &b->c, &buf);
		if (!ret) {
			memcpy(buf, big, sizeof(big));
			ret = knitk_pool_submit_loan(b->c);
		}
		break;
	default:
		ret = knitk_pool_submit(b->pool, 0, big, sizeof(big), op, &b->c);
		break;
	}
	atomic_store(&b->ret, ret);
	atomic_store(&b->done, 1);
	return NULL;
}

/* The child: 0 when every promise held. */
static int last_worker_dies(unsigned int dispatch, enum way way)
{
	struct knitk_pool_opts po = {
		.size = sizeof(po), .kind = KNITK_WORKER_PROCESSES, .nr_workers = 1,
		.nr_submitters = 1, .dispatch = dispatch, .arena_bytes = ARENA,
	};
	struct knitk_worker_info wi = { .size = sizeof(wi) };
	struct knitk_pool_stats st = { .size = sizeof(st) };
	struct blocked b = { .way = way };
	struct knitk_call *held, *queued;
	bool respawn = way == SUBMIT_RESPAWN_FAILS;
	uint32_t ms = LONG_MS, started[2];
	int run[2];
	char c;
	bool steal = dispatch == KNITK_POOL_DISPATCH_STEAL;
	int failed = 0, ret, st_held, st_queued;
	pthread_t t;
	uint64_t t0;

	tap_case_failed = 0;
	if (respawn) {
		po.flags = KNITK_POOL_RESPAWN;
		po.prefix_argv = prefix;
	}
	memcpy(big, &ms, sizeof(ms));
	/* Before the pool: its workers inherit the pipe. */
	if (pipe(run))
		return 1;
	ret = knitk_pool_create(&po, &table, &b.pool);
	if (ret) {
		printf("# create: %d\n", ret);
		return 1;
	}
	/* The worker busy with a long call, a big one queued behind it. */
	started[0] = ms;
	started[1] = (uint32_t)run[1];
	if (knitk_pool_submit(b.pool, 0, started, sizeof(started), NULL, &held) ||
	    read(run[0], &c, 1) != 1)
		return 1;
	if (knitk_pool_submit(b.pool, 0, big, sizeof(big), NULL, &queued))
		return 1;
	if (way == SUBMIT_DEADLINE)
		b.deadline_ns = tap_now_ns() + 1 * SEC;
	pthread_create(&t, NULL, blocked_main, &b);
	/* Asleep waiting for room, or (a defect) done already. */
	while (!atomic_load(&b.done) &&
	       !(atomic_load(&b.tid) && asleep_in_futex(atomic_load(&b.tid))))
		sched_yield();
	if (atomic_load(&b.done)) {
		printf("# the third submit did not wait for room (%d)\n", atomic_load(&b.ret));
		return 1;
	}
	if (knitk_pool_worker_info(b.pool, 0, &wi) || !wi.alive || wi.pid <= 0)
		return 1;
	if (respawn) {
		FILE *f = fopen(nospawn, "w");

		if (!f)
			return 1;
		fclose(f);
	}
	t0 = tap_now_ns();
	kill(wi.pid, SIGKILL);
	while (!atomic_load(&b.done) && tap_now_ns() - t0 < HANG_NS)
		usleep(1000);
	st_held = knitk_call_wait(held, tap_now_ns() + 5 * SEC);
	st_queued = knitk_call_wait(queued, tap_now_ns() + 5 * SEC);
	knitk_pool_stats(b.pool, &st);
	printf("# calls queued before the death: %d, %d; deaths %llu respawns %llu "
	       "submitted %llu completed %llu\n", st_held, st_queued,
	       (unsigned long long)st.deaths, (unsigned long long)st.respawns,
	       (unsigned long long)st.submitted, (unsigned long long)st.completed);
	CHECK_EQ(st_held, -EOWNERDEAD);
	CHECK_EQ(st_queued, steal ? -EPIPE : -EOWNERDEAD);
	if (!atomic_load(&b.done)) {
		printf("# the submit waiting for room has not returned %.1f s after "
		       "the last worker's death\n", (double)(tap_now_ns() - t0) / 1e9);
		/* It never will: leave without it (its thread spins). */
		fflush(stdout);
		_exit(1);
	}
	pthread_join(t, NULL);
	ret = atomic_load(&b.ret);
	printf("# the waiting submit returned %d after %.1f ms\n", ret,
	       (double)(tap_now_ns() - t0) / 1e6);
	if (steal) {
		/* No worker left: -EPIPE from the submit or as its call's end. */
		if (way == POOL_CALL || ret)
			CHECK_EQ(ret, -EPIPE);
		else
			CHECK_EQ(knitk_call_wait(b.c, tap_now_ns() + 5 * SEC), -EPIPE);
	} else if (way == POOL_CALL) {
		/* Given to the worker that died: -EOWNERDEAD, never run. */
		CHECK_EQ(ret, -EOWNERDEAD);
	} else {
		CHECK_EQ(ret, 0);
		if (!ret)
			CHECK_EQ(knitk_call_wait(b.c, tap_now_ns() + 5 * SEC), -EOWNERDEAD);
	}
	if (b.c && (ret == 0 || way == LOAN))
		knitk_call_release(b.c);
	knitk_call_release(held);
	knitk_call_release(queued);
	knitk_pool_stats(b.pool, &st);
	CHECK_EQ(st.submitted, st.completed);
	knitk_pool_destroy(b.pool);
	failed = tap_case_failed;
	return failed;
}

static void in_child(unsigned int dispatch, enum way way)
{
	pid_t pid;
	int status = 0;

	unlink(nospawn);
	fflush(stdout);
	pid = fork();
	REQUIRE(pid >= 0);
	if (!pid) {
		int r = last_worker_dies(dispatch, way);

		fflush(stdout);
		_exit(r ? 1 : 0);
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unlink(nospawn);
}

static void steal_submit(void) { in_child(KNITK_POOL_DISPATCH_STEAL, SUBMIT); }
static void steal_submit_deadline(void) { in_child(KNITK_POOL_DISPATCH_STEAL, SUBMIT_DEADLINE); }
static void steal_pool_call(void) { in_child(KNITK_POOL_DISPATCH_STEAL, POOL_CALL); }
static void steal_loan(void) { in_child(KNITK_POOL_DISPATCH_STEAL, LOAN); }
static void steal_submit_respawn_fails(void)
{
	in_child(KNITK_POOL_DISPATCH_STEAL, SUBMIT_RESPAWN_FAILS);
}
static void private_submit(void) { in_child(KNITK_POOL_DISPATCH_PRIVATE, SUBMIT); }
static void private_pool_call(void) { in_child(KNITK_POOL_DISPATCH_PRIVATE, POOL_CALL); }

int main(int argc, char **argv)
{
	if (knitk_worker_main(argc, argv, &table, NULL))
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(nospawn, sizeof(nospawn), "/dev/shm/knitk-nospawn-%d", (int)getpid());
	setenv(NOSPAWN_ENV, nospawn, 1);
	TEST(steal_submit);
	TEST(steal_submit_deadline);
	TEST(steal_pool_call);
	TEST(steal_loan);
	TEST(steal_submit_respawn_fails);
	TEST(private_submit);
	TEST(private_pool_call);
	return tap_exit();
}
