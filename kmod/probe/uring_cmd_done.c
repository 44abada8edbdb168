// SPDX-License-Identifier: GPL-2.0
/*
 * Kbuild probe: compiles only where io_uring_cmd_done() takes issue_flags
 * as its fourth argument (v6.3, and Debian's 6.1.y by a stable backport).
 */
#ifdef KNITK_HAVE_IO_URING_CMD_H
#include <linux/io_uring/cmd.h>
#else
#include <linux/io_uring.h>
#endif

void (*knitk_probe)(struct io_uring_cmd *, ssize_t, ssize_t, unsigned int) =
	io_uring_cmd_done;
