// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: the one file that instantiates the tracepoints of knitk_trace.h.
 */
#define CREATE_TRACE_POINTS
#include "knitk_trace.h"
