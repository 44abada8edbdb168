/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The module's live counters (debugfs knitk/live, root only): knots not yet
 * freed and their bytes.  A test that made and dropped knots waits for
 * both to reach zero: a knot leaked by the kernel keeps it waiting, and
 * the runner's watchdog reports the hang.  Plain C, so both the uapi tests
 * and the libknitk tests in the guest include it.
 */
#ifndef KNITK_LIVE_H
#define KNITK_LIVE_H

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#define KNITK_LIVE	"/sys/kernel/debug/knitk/live"

/* Reads both counters; negative errno when the file cannot be read. */
static inline int knitk_live_read(long long *knots, long long *bytes)
{
	FILE *f = fopen(KNITK_LIVE, "re");
	int n;

	if (!f)
		return -errno;
	n = fscanf(f, "knots %lld bytes %lld", knots, bytes);
	fclose(f);
	return n == 2 ? 0 : -EIO;
}

/* The knots not yet freed, or -1 when the file cannot be read. */
static inline long long knitk_live_knots(void)
{
	long long knots, bytes;

	return knitk_live_read(&knots, &bytes) ? -1 : knots;
}

/*
 * Until no knot is live, printing the counters once if it has to wait;
 * returns 0, or the read error.  Freeing may lag the last close a little
 * (an exiting owner's role ends from a workqueue).
 */
static inline int knitk_live_wait_zero(void)
{
	long long knots, bytes;
	int ret, said = 0;

	for (;;) {
		ret = knitk_live_read(&knots, &bytes);
		if (ret || (!knots && !bytes))
			return ret;
		if (!said++)
			printf("# waiting for %lld live knots (%lld bytes) to be freed\n",
			       knots, bytes);
		usleep(10000);
	}
}

#endif /* KNITK_LIVE_H */
