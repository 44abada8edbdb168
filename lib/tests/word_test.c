// SPDX-License-Identifier: GPL-2.0
/*
 * knitk_word_wait() and knitk_word_wake() on the futex backend: the cases
 * of word_cases.h (the guest runs them on the module).
 */
#include "tap.h"
#include "word_cases.h"

static struct word_knot wk;

#define WORD_CASE(name)							\
static void name(void)							\
{									\
	char why[256];							\
									\
	if (word_case_##name(&wk, why, sizeof(why))) {			\
		printf("# %s\n", why);					\
		tap_case_failed = 1;					\
	}								\
}

WORD_CASE(bad_arguments)
WORD_CASE(mismatch_and_deadline)
WORD_CASE(wakes_only_its_word)
WORD_CASE(wake_counts)
WORD_CASE(ping_pong)
WORD_CASE(across_processes)

int main(void)
{
	if (word_knot_create(&wk, KNITK_KNOT_FUTEX)) {
		printf("not ok - word: knot\n");
		return 1;
	}
	TEST(bad_arguments);
	TEST(mismatch_and_deadline);
	TEST(wakes_only_its_word);
	TEST(wake_counts);
	TEST(ping_pong);
	TEST(across_processes);
	knitk_endpoint_destroy(wk.ep);
	return tap_exit();
}
