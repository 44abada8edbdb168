// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/* The test hook, generation base and fault injection of a KNITK_TEST_HOOKS build. */
#define _GNU_SOURCE
#include "pool_hooks.h"

#ifdef KNITK_TEST_HOOKS
_Atomic(pool_hook_fn) knitk__test_hook;
_Atomic(pool_lane_hook_fn) knitk__test_lane_hook;
_Atomic(pool_box_hook_fn) knitk__test_box_hook;
_Atomic uint32_t knitk__test_gen_base;
_Atomic int knitk__test_publish_twice;
#endif
