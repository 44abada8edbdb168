/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The kselftest harness with knitk's per-test timeout.
 *
 * The harness kills a test after TEST_TIMEOUT_DEFAULT seconds (30 in 6.1).
 * That is a hang guard, not a speed limit: a guest under TCG on a loaded
 * machine can take minutes over a test that takes a second on hardware, so
 * the guard is set where only a lost wake or a deadlock reaches it.
 * A program whose every test skipped exits KSFT_SKIP (ksft_skip.h).
 */
#ifndef KNITK_HARNESS_H
#define KNITK_HARNESS_H

#include "kselftest_harness.h"
#include "ksft_skip.h"

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT	600

#endif /* KNITK_HARNESS_H */
