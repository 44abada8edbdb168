/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SIGUSR1 caught and counted, for the tests that interrupt a wait: a
 * signaller waits for @handled to move before it sends the next one.
 */
#ifndef KNITK_SIGNAL_H
#define KNITK_SIGNAL_H

#include <signal.h>

static volatile int handled;

static inline void on_signal(int sig)
{
	(void)sig;
	__atomic_fetch_add(&handled, 1, __ATOMIC_SEQ_CST);
}

/* SIGUSR1 handled with @sa_flags (0 or SA_RESTART), the count reset. */
static inline void catch_signal(int sa_flags)
{
	struct sigaction sa = { .sa_handler = on_signal, .sa_flags = sa_flags };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	handled = 0;
}

#endif /* KNITK_SIGNAL_H */
