/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The stealing wake policy's words (steal_wake.c, docs/protocol.md T12,
 * T13): who is idle, who searches, who rings whom.  Not installed.
 */
#ifndef KNITK_POOL_STEAL_WAKE_H
#define KNITK_POOL_STEAL_WAKE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "knitk.h"

/* The pool words of the wake policy (docs/protocol.md T12). */
enum { STEAL_IDLE, STEAL_SEARCHING, STEAL_RINGING, STEAL_WINDOW };
_Atomic uint64_t *knitk__steal_words(struct knitk_endpoint *ep);
_Atomic uint64_t *knitk__steal_line_word(struct knitk_endpoint *ep, unsigned int m,
					 unsigned int w, size_t off);
_Atomic uint64_t *knitk__steal_ringer_word(struct knitk_endpoint *ep, unsigned int w);
/* Who picks a worker to wake: a worker plus one, or a thread of the host. */
#define STEAL_BY_HOST	((uint64_t)KNITK_MAX_WORKERS + 1)
int knitk__steal_pick_idle(struct knitk_endpoint *ep, _Atomic uint64_t *words,
			   uint64_t by);
int knitk__steal_pick(struct knitk_endpoint *ep, _Atomic uint64_t *words,
		      uint64_t by);
void knitk__steal_unpick(struct knitk_endpoint *ep, _Atomic uint64_t *words, int w);
void knitk__steal_ring(struct knitk_endpoint *ep, _Atomic uint64_t *words, int w);
void knitk__steal_window(_Atomic uint64_t *words, bool open);
void knitk__steal_search(_Atomic uint64_t *words, unsigned int w);
bool knitk__steal_idle(_Atomic uint64_t *words, unsigned int w);
void knitk__steal_awake(_Atomic uint64_t *words, unsigned int w);
void knitk__steal_claimed(struct knitk_endpoint *ep, _Atomic uint64_t *words,
			  unsigned int w, struct knitk_consumer **c,
			  unsigned int nr_mailboxes);
void knitk__steal_gone(_Atomic uint64_t *words, unsigned int w);

#endif /* KNITK_POOL_STEAL_WAKE_H */
