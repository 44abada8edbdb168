// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Word waits: a futex for the 32-bit words of a knot's data region, on
 * either backend (docs/protocol.md S11).  The futex backend's knot is a
 * memfd, whose words a shared futex names; the module's pages belong to
 * no file, so it keeps the waiters itself (KNITK_IOC_WORD_WAIT).  Here
 * only the checks both share: the word is the endpoint's, in the data
 * region, aligned.
 */
#include <errno.h>
#include <stdint.h>

#include "internal.h"

/* 0 when @word is a word of @ep's data region, else -EINVAL. */
static int word_check(const struct knitk_endpoint *ep, const uint32_t *word)
{
	const char *base, *w = (const char *)word;

	if (!ep || !word || (uintptr_t)word % sizeof(uint32_t))
		return -EINVAL;
	if (!ep->base)
		return -ENOTCONN;
	base = ep->base;
	if (w < base + ep->layout.control_size || w >= base + ep->layout.size ||
	    (size_t)(base + ep->layout.size - w) < sizeof(uint32_t))
		return -EINVAL;
	return 0;
}

KNITK_EXPORT int knitk_word_wait(struct knitk_endpoint *ep, const uint32_t *word,
				 uint32_t expected, uint64_t deadline_ns)
{
	int ret = word_check(ep, word);

	return ret ? ret : ep->ops->word_wait(ep, word, expected, deadline_ns);
}

KNITK_EXPORT int knitk_word_wake(struct knitk_endpoint *ep, const uint32_t *word,
				 unsigned int nr)
{
	int ret = word_check(ep, word);

	if (!ret && !nr)
		ret = -EINVAL;
	return ret ? ret : ep->ops->word_wake(ep, word, nr);
}
