/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A program whose every test skipped exits KSFT_SKIP (4), so run_tests
 * prints "# SKIP" for it: the 6.1 harness counts a skip as a pass and
 * exits 0, and a machine without /dev/knitk would "pass" the suite.
 *
 * The harness ends with exit(KSFT_PASS) once its totals are printed; this
 * handler, registered before main, runs inside that exit in the main
 * process only (test children leave with _exit, helpers and re-executed
 * process workers have their own pid or no results) and turns an
 * all-skipped run into KSFT_SKIP.  A failure or a pass keeps its status.
 * Include after kselftest_harness.h (knitk_harness.h does).
 */
#ifndef KNITK_KSFT_SKIP_H
#define KNITK_KSFT_SKIP_H

#ifndef __KSELFTEST_H
#error "include kselftest_harness.h before ksft_skip.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pid_t knitk__ksft_main_pid;

static void knitk__ksft_all_skipped(void)
{
	if (getpid() != knitk__ksft_main_pid || ksft_cnt.ksft_xskip == 0 ||
	    ksft_test_num() != ksft_cnt.ksft_xskip)
		return;
	/* _exit skips the flush that exit does after its handlers. */
	fflush(stdout);
	fflush(stderr);
	_exit(KSFT_SKIP);
}

static void __attribute__((constructor)) knitk__ksft_skip_init(void)
{
	knitk__ksft_main_pid = getpid();
	atexit(knitk__ksft_all_skipped);
}

#endif /* KNITK_KSFT_SKIP_H */
