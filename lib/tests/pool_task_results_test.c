// SPDX-License-Identifier: GPL-2.0
/*
 * A task's return value and reply reach its caller as the task left them:
 * every errno and positive values, for thread and process workers; a task
 * returning -EINPROGRESS never reads as a timed-out wait nor a running
 * call; a later knitk_reply_alloc replaces an earlier one, across inline
 * and arena, and a truncated copy still reports the full length.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "knitk_pool.h"
#include "tap.h"
#include "hostile_tasks.h"

static void errno_values(unsigned int kind)
{
	struct knitk_pool *p = make_pool(kind, 2, 0);
	int e, bad = 0;

	REQUIRE(p);
	for (e = 1; e < 134; e++) {
		if (e == EINPROGRESS)
			continue;
		if (call_returning(p, -e) != -e && bad++ < 5)
			printf("# task status %d came back as %d\n", -e,
			       call_returning(p, -e));
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(call_returning(p, 0), 0);
	CHECK_EQ(call_returning(p, 1), 1);
	CHECK_EQ(call_returning(p, 0x7fffffff), 0x7fffffff);
	knitk_pool_destroy(p);
}

static void errno_every_value_threads(void)
{
	errno_values(KNITK_WORKER_THREADS);
}

static void errno_every_value_processes(void)
{
	errno_values(KNITK_WORKER_PROCESSES);
}

/*
 * A task that returns -EINPROGRESS: a wait forever cannot time out, so it
 * must not answer with the "wait timed out" code, and the completed call
 * must not read as running (knitk_pool.h: -EINPROGRESS is "while running"
 * and "when the wait timed out").
 */
static void task_einprogress_not_a_timeout(void)
{
	struct knitk_pool *p = make_pool(KNITK_WORKER_THREADS, 1, 0);
	int v = EINPROGRESS, ret, wret;
	struct knitk_call *c;

	REQUIRE(p);
	REQUIRE(knitk_pool_submit(p, T_FAIL, &v, sizeof(v), NULL, &c) == 0);
	wret = knitk_call_wait(c, KNITK_WAIT_FOREVER);
	ret = knitk_pool_wait_all(p, &c, 1, KNITK_WAIT_FOREVER);
	printf("# wait forever: %d, wait_all forever: %d, status %d\n", wret,
	       ret, knitk_call_status(c));
	CHECK(wret != -EINPROGRESS);
	CHECK_EQ(ret, 0);
	CHECK(knitk_call_status(c) != -EINPROGRESS);
	knitk_call_release(c);
	ret = call_returning(p, -EINPROGRESS);
	CHECK(ret != -EINPROGRESS);
	knitk_pool_destroy(p);
}

/* A later knitk_reply_alloc replaces an earlier, across inline and arena. */
static void reply_alloc_replaces(void)
{
	static const uint64_t cases[][2] = {
		{ ARENA, 8 }, { 8, ARENA }, { 192, 193 }, { 193, 192 },
		{ 0, 0 }, { ARENA, 0 }, { 100, ARENA },
	};
	struct knitk_pool *p = make_pool(KNITK_WORKER_PROCESSES, 1, 0);
	static uint8_t out[ARENA];
	unsigned int i;
	size_t k;

	REQUIRE(p);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = ~(size_t)0;
		int st = knitk_pool_call(p, T_REPLY2, cases[i], 16, NULL, out,
					 sizeof(out), &len);

		CHECK_EQ(st, 0);
		CHECK_EQ(len, cases[i][1]);
		for (k = 0; st == 0 && k < cases[i][1]; k++)
			if (out[k] != 0x55)
				break;
		CHECK_EQ(k, cases[i][1]);
	}
	/* Truncated copy: the full length is still reported. */
	{
		uint64_t l[2] = { 0, 1000 };
		size_t len = 0;

		memset(out, 0, 64);
		CHECK_EQ(knitk_pool_call(p, T_REPLY2, l, 16, NULL, out, 10,
					 &len), 0);
		CHECK_EQ(len, 1000);
		CHECK_EQ(out[9], 0x55);
		CHECK_EQ(out[10], 0);
		CHECK_EQ(knitk_pool_call(p, T_REPLY2, l, 16, NULL, NULL, 0,
					 NULL), 0);
	}
	knitk_pool_destroy(p);
}

int main(int argc, char **argv)
{
	if (hostile_start(argc, argv))
		return 1;
	TEST(errno_every_value_threads);
	TEST(errno_every_value_processes);
	TEST(reply_alloc_replaces);
	TEST(task_einprogress_not_a_timeout);
	return tap_exit();
}
