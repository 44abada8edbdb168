// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Lifelines: how the host learns, on the futex backend, that a process
 * worker died, long before its pidfd says so.
 *
 * Each process worker holds, for its whole life, a robust process-shared
 * mutex in a page of its own (a memfd the host makes, inherited like the
 * knot fd, one slot per worker), locked by the thread that runs the worker
 * loop before it joins.  When that thread exits, however it dies, the
 * kernel walks its robust list in exit_mm_release(): before the address
 * space is torn down and long before exit_notify() makes a pidfd readable.
 * It sets FUTEX_OWNER_DIED in the mutex's word and, if FUTEX_WAITERS is
 * set, wakes one waiter (a shared futex wake).  The host's lifeline thread
 * sets FUTEX_WAITERS in every armed worker's word and waits on all of
 * them at once (futex_waitv(2)), plus a private word of its own for
 * pokes.  An exec is a death too (the kernel walks the list then as well);
 * a worker that stops cleanly leaves its role first and then unlocks, and
 * the notice it causes finds the role left (-ENOENT) as the pidfd's would.
 *
 * The word is the one the kernel will touch: the worker finds it through
 * its own robust list (get_robust_list(2); glibc owns the list, we only
 * read it) and publishes its offset; the host checks it lies inside the
 * slot's mutex.  The pidfd monitor (spawn.c) stays: a worker that could
 * not publish a word, a kernel without futex_waitv, a robust list the
 * kernel gave up on.  Both go through knitk__death_notice(), which
 * reports each incarnation once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pool_internal.h"
#include "process.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449	/* the same on every architecture */
#endif

/* One slot per worker: its lifelines. */
#define LIFELINE_SLOT	128
/* Robust list entries looked at before giving up (the kernel's is 2048). */
#define LIFELINE_WALK	64

/*
 * Two lifelines per worker, since the kernel wakes one waiter of each
 * word: LIFELINE_WATCH for the lifeline thread, LIFELINE_PARK for the
 * thread parked on the host doorbell (knitk__lifeline_park_words), which
 * a death then wakes itself, from the CPU the dying thread leaves free
 * rather than behind it.  The worker locks LIFELINE_PARK last: its robust
 * list starts with it, so the kernel wakes the parked thread first.
 */
struct lifeline {
	pthread_mutex_t mutex;
	/* Offset of the mutex's futex word + 1; 0: none published. */
	_Atomic uint32_t word;
};
_Static_assert(LIFELINE_NR * sizeof(struct lifeline) <= LIFELINE_SLOT,
	       "lifeline slot");

static struct lifeline *lifeline_slot(void *base, unsigned int w, unsigned int i)
{
	return (struct lifeline *)((char *)base + (size_t)w * LIFELINE_SLOT) + i;
}

static size_t lifeline_bytes(unsigned int nr_workers)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return ((size_t)nr_workers * LIFELINE_SLOT + page - 1) / page * page;
}

/* -------------------------------------------------------- the worker */

/* The futex word of @m, as the kernel will find it from our robust list. */
static int lifeline_find_word(pthread_mutex_t *m, uint32_t *off)
{
	struct robust_list_head *head;
	struct robust_list *e;
	size_t len;
	unsigned int n;

	if (syscall(SYS_get_robust_list, 0, &head, &len) < 0 || !head ||
	    len != sizeof(*head))
		return -ENOENT;
	e = head->list.next;
	for (n = 0; n < LIFELINE_WALK && e && e != &head->list; n++) {
		/* Bit 0 marks a PI mutex; the address is the rest. */
		char *p = (char *)((uintptr_t)e & ~(uintptr_t)1);
		char *word = p + head->futex_offset;

		if (word >= (char *)m &&
		    word + sizeof(uint32_t) <= (char *)m + sizeof(*m) &&
		    !((uintptr_t)word % sizeof(uint32_t))) {
			*off = (uint32_t)(word - (char *)m);
			return 0;
		}
		e = ((struct robust_list *)p)->next;
	}
	return -ENOENT;
}

/* Make and lock lifeline @l, and publish its word; false if it failed. */
static bool lifeline_take(struct lifeline *l, const pthread_mutexattr_t *a)
{
	uint32_t off;

	/* Our predecessor in this slot is gone (reaped): a fresh mutex. */
	if (pthread_mutex_init(&l->mutex, a) || pthread_mutex_lock(&l->mutex))
		return false;
	/* Release: the host reads the mutex's word after it. */
	if (!lifeline_find_word(&l->mutex, &off))
		atomic_store_explicit(&l->word, off + 1, memory_order_release);
	return true;
}

/*
 * In a process worker, on the thread that will run the worker loop,
 * before it joins: take the lifelines of slot @w of the page in @fd
 * (inherited; closed here).  Any failure leaves a lifeline out: the
 * other one, or the pidfd, still sees the death.
 */
void knitk__lifeline_hold(struct lifeline_hold *h, int fd, unsigned int w)
{
	pthread_mutexattr_t a;
	struct stat st;
	unsigned int i;
	void *p;

	memset(h, 0, sizeof(*h));
	if (fd < 0)
		return;
	p = MAP_FAILED;
	if (!fstat(fd, &st) && (uint64_t)st.st_size >= (uint64_t)(w + 1) * LIFELINE_SLOT)
		p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
			 MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return;
	h->base = p;
	h->bytes = (size_t)st.st_size;
	if (pthread_mutexattr_init(&a))
		return;
	if (!pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) &&
	    !pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST))
		for (i = 0; i < LIFELINE_NR; i++)
			if (lifeline_take(lifeline_slot(p, w, i), &a))
				h->held[i] = lifeline_slot(p, w, i);
	pthread_mutexattr_destroy(&a);
}

/* A clean stop, after the role was left: not a death. */
void knitk__lifeline_drop(struct lifeline_hold *h)
{
	unsigned int i;

	for (i = LIFELINE_NR; i-- > 0;)
		if (h->held[i])
			pthread_mutex_unlock(&h->held[i]->mutex);
	if (h->base)
		munmap(h->base, h->bytes);
	memset(h, 0, sizeof(*h));
}

/* ---------------------------------------------------------- the host */

static long futex_waitv_(struct futex_waitv *v, unsigned int n)
{
	return syscall(SYS_futex_waitv, v, n, 0, NULL, CLOCK_MONOTONIC);
}

/*
 * The word of worker @w's lifeline @i, if it published a valid one, else
 * NULL.
 */
static _Atomic uint32_t *lifeline_word(struct knitk_pool *pool, unsigned int w,
				       unsigned int i)
{
	struct lifeline *l = lifeline_slot(pool->lifelines, w, i);
	/* Pairs with the release in knitk__lifeline_hold. */
	uint32_t off = atomic_load_explicit(&l->word, memory_order_acquire);

	if (!off || off - 1 > sizeof(l->mutex) - sizeof(uint32_t) ||
	    (off - 1) % sizeof(uint32_t))
		return NULL;
	return (_Atomic uint32_t *)((char *)&l->mutex + off - 1);
}

/*
 * Set FUTEX_WAITERS in @word unless its owner is gone; the value to wait
 * for in *@v.  False: the owner is gone (died, exec'd, or unlocked it).
 */
static bool lifeline_arm(_Atomic uint32_t *word, uint32_t *v)
{
	uint32_t x = atomic_load_explicit(word, memory_order_acquire);

	for (;;) {
		if ((x & FUTEX_OWNER_DIED) || !(x & FUTEX_TID_MASK))
			return false;
		if (x & FUTEX_WAITERS)
			break;
		/*
		 * seq_cst: before our wait, as the kernel's robust-list walk
		 * reads the word; either it sees the bit and wakes us, or
		 * its OWNER_DIED store fails our CAS or our wait's compare.
		 */
		if (atomic_compare_exchange_weak_explicit(word, &x, x | FUTEX_WAITERS,
				memory_order_seq_cst, memory_order_acquire)) {
			x |= FUTEX_WAITERS;
			break;
		}
	}
	*v = x;
	return true;
}

/*
 * The workers watched now (their join armed) that published lifeline @i:
 * their words, ids and join generations into @lp.
 */
static void lifeline_watched(struct knitk_pool *pool, unsigned int i,
			     struct lifeline_park *lp)
{
	unsigned int w;

	lp->n = 0;
	for (w = 0; w < pool->nr_workers; w++) {
		/* Relaxed: the CAS in knitk__death_notice decides. */
		uint64_t watch = atomic_load_explicit(&pool->workers[w].watch,
						      memory_order_relaxed);

		if (!(watch & POOL_WATCH_ARMED) ||
		    !(lp->word[lp->n] = lifeline_word(pool, w, i)))
			continue;
		lp->who[lp->n] = w;
		lp->gen[lp->n++] = (uint32_t)watch;
	}
}

/*
 * Arm every word of @lp, with the values to wait for in lp->words, and
 * report the workers already gone (@hook: the lifeline thread's notice,
 * which the test hook may hold).  False when one was gone.
 */
static bool lifeline_arm_all(struct knitk_pool *pool, struct lifeline_park *lp,
			     bool hook)
{
	bool live = true;
	unsigned int i;

	for (i = 0; i < lp->n; i++) {
		lp->words[i].word = (const uint32_t *)lp->word[i];
		if (lifeline_arm(lp->word[i], &lp->words[i].value))
			continue;
		if (hook)
			POOL_HOOK(pool, POOL_HOOK_NOTICE, lp->who[i]);
		/* Once per incarnation: a stale generation does nothing. */
		knitk__death_notice(pool, lp->who[i], lp->gen[i]);
		live = false;
	}
	return live;
}

static void *lifeline_main(void *arg)
{
	struct knitk_pool *pool = arg;
	struct futex_waitv v[KNITK_MAX_WORKERS + 1];
	struct lifeline_park lp;

	for (;;) {
		/* Before the look: a poke after it fails the wait's compare. */
		uint32_t poke = atomic_load_explicit(&pool->lifeline_poke,
						     memory_order_seq_cst);
		unsigned int i;

		pthread_mutex_lock(&pool->lock);
		if (pool->monitor_stop) {
			pthread_mutex_unlock(&pool->lock);
			break;
		}
		lifeline_watched(pool, LIFELINE_WATCH, &lp);
		pthread_mutex_unlock(&pool->lock);
		if (!lifeline_arm_all(pool, &lp, true))
			continue;

		memset(v, 0, sizeof(v));
		v[0].uaddr = (uintptr_t)&pool->lifeline_poke;
		v[0].val = poke;
		v[0].flags = FUTEX_32 | FUTEX_PRIVATE_FLAG;
		for (i = 0; i < lp.n; i++) {
			v[i + 1].uaddr = (uintptr_t)lp.word[i];
			v[i + 1].val = lp.words[i].value;
			/* Shared: keyed on the page, as the kernel's wake is. */
			v[i + 1].flags = FUTEX_32;
		}
		/* Any return (a wake, a changed word, a signal): look again. */
		futex_waitv_(v, lp.n + 1);
	}
	return NULL;
}

/*
 * Before the drainer parks on the host doorbell: the LIFELINE_PARK words
 * of the workers watched, armed, into @lp, for its wait to watch too
 * (knitk_doorbell_ring_wait_words).  Returns how many; 0 without
 * lifelines, or when a worker is gone already: then reported, so the
 * caller looks at deaths instead of parking.
 */
unsigned int knitk__lifeline_park_words(struct knitk_pool *pool,
					struct lifeline_park *lp)
{
	lp->n = 0;
	if (!pool->lifeline_started)
		return 0;
	lifeline_watched(pool, LIFELINE_PARK, lp);
	return lifeline_arm_all(pool, lp, false) ? lp->n : 0;
}

/* After that park, whatever ended it: report the workers gone. */
void knitk__lifeline_park_seen(struct knitk_pool *pool, struct lifeline_park *lp)
{
	lifeline_arm_all(pool, lp, false);
}

void knitk__lifeline_poke(struct knitk_pool *pool)
{
	if (!pool->lifeline_started)
		return;
	/* seq_cst: pairs with the load before the thread's look. */
	atomic_fetch_add_explicit(&pool->lifeline_poke, 1, memory_order_seq_cst);
	syscall(SYS_futex, &pool->lifeline_poke, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/*
 * With the pidfd monitor, on the futex backend: the page of lifelines and
 * its thread.  No futex_waitv (before Linux 5.16) or no memfd: no
 * lifelines, which is not an error (the pidfds see every death).
 */
int knitk__lifeline_start(struct knitk_pool *pool)
{
	size_t bytes = lifeline_bytes(pool->nr_workers);
	void *p;
	int fd, ret;

	/* An empty vector is -EINVAL where the call exists. */
	if (futex_waitv_(NULL, 0) == 0 || errno != EINVAL)
		return 0;
	fd = memfd_create("knitk-lifelines", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (ftruncate(fd, (off_t)bytes) < 0) {
		close(fd);
		return 0;
	}
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return 0;
	}
	pool->lifeline_fd = fd;
	pool->lifelines = p;
	pool->lifeline_bytes = bytes;
	ret = pthread_create(&pool->lifeline_thread, NULL, lifeline_main, pool);
	if (ret)
		return -ret;
	pool->lifeline_started = true;
	return 0;
}

/* Destroy, after monitor_stop was set: no worker is started after this. */
void knitk__lifeline_stop(struct knitk_pool *pool)
{
	if (pool->lifeline_started) {
		knitk__lifeline_poke(pool);
		pthread_join(pool->lifeline_thread, NULL);
		pool->lifeline_started = false;
	}
	if (pool->lifelines)
		munmap(pool->lifelines, pool->lifeline_bytes);
	pool->lifelines = NULL;
	if (pool->lifeline_fd >= 0)
		close(pool->lifeline_fd);
	pool->lifeline_fd = -1;
}

/*
 * The process of join generation @gen serving as worker @w is gone: mark
 * it dead, unless this incarnation's death was reported already (by the
 * lifeline or the pidfd, whichever came second) or a successor replaced
 * it (the CAS fails for a stale @gen).
 */
void knitk__death_notice(struct knitk_pool *pool, unsigned int w, uint32_t gen)
{
	uint64_t want = POOL_WATCH_ARMED | gen;

	/* Relaxed: mark_dead's own seq_cst RMWs publish the death. */
	if (atomic_compare_exchange_strong_explicit(&pool->workers[w].watch, &want, 0,
			memory_order_relaxed, memory_order_relaxed))
		/* -ENOENT: it had left its role already (clean stop). */
		knitk_endpoint_mark_dead(pool->ep, w);
}
