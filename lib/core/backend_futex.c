// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The futex backend: a knot without the module.  The knot is a memfd of
 * the same layout, mapped MAP_SHARED (so the futexes are keyed on the
 * backing pages, not on the address space: no FUTEX_PRIVATE_FLAG).  The
 * library writes the control page here: magic, geometry and layout at
 * create, live/dead bits and generations at join and leave.  Peer death
 * other than a clean leave is reported by the pool through
 * knitk_endpoint_mark_dead().
 *
 * Huge pages: a knot of KNITK_HUGE_MIN_BYTES or more (without
 * KNITK_GEOM_NO_HUGE) is first made a hugetlbfs memfd, its size rounded up
 * to the huge page; its mmap reserves every page at once and the creator
 * touches them all, so with too few pages reserved in
 * /proc/sys/vm/nr_hugepages (or a hugetlb cgroup's limit reached) it fails
 * there, not at a later touch, and the knot is made again as a plain memfd.  That one is mapped at a huge-page
 * aligned address with MADV_HUGEPAGE, by every endpoint, so shmem gives it
 * transparent huge pages where /sys/kernel/mm/transparent_hugepage/
 * shmem_enabled allows (advise, within_size, always), and 4 KiB pages
 * otherwise; neither case is an error.  An attaching endpoint finds which
 * it is from the fd (fstatfs) and maps the same length.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "knot_hooks.h"
#include "../trace.h"

static long sys_futex(void *addr, int op, uint32_t val,
		      const struct timespec *ts, uint32_t val3)
{
	return syscall(SYS_futex, addr, op, val, ts, NULL, val3);
}

#ifndef MFD_HUGETLB
#define MFD_HUGETLB	0x0004U
#endif
#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC	0x958458f6
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE	23
#endif

/* The knot asks for huge pages: large enough, and not opted out. */
static bool futex_wants_huge(const struct knitk_endpoint *k)
{
	return k->layout.size >= KNITK_HUGE_MIN_BYTES &&
	       !(k->geom.flags & KNITK_GEOM_NO_HUGE);
}

/* The length to map: the knot rounded up to whole pages of its file. */
static uint64_t futex_map_bytes(const struct knitk_endpoint *k)
{
	return (k->layout.size + k->page_bytes - 1) & ~(k->page_bytes - 1);
}

/*
 * Record how @fd is backed: its page (the huge page of a hugetlbfs file,
 * whose mappings must be multiples of it).  -EINVAL for a page size that
 * is not a power of two.
 */
static int futex_pages_of(struct knitk_endpoint *k, int fd)
{
	struct statfs sf;

	k->page_bytes = KNITK_PAGE_BYTES;
	k->pages_flags = 0;
	if (fstatfs(fd, &sf) < 0)
		return -errno;
	if ((uint32_t)sf.f_type == HUGETLBFS_MAGIC) {
		if (sf.f_bsize < KNITK_PAGE_BYTES || (sf.f_bsize & (sf.f_bsize - 1)))
			return -EINVAL;
		k->page_bytes = (uint64_t)sf.f_bsize;
		k->pages_flags = KNITK_PAGES_HUGETLB;
	}
	return 0;
}

/*
 * Map a plain memfd at an address aligned to KNITK_HUGE_MIN_BYTES, with
 * MADV_HUGEPAGE: a huge page of shmem is mapped whole only where the
 * address and the file offset agree modulo its size.
 */
static void *futex_map_thp(struct knitk_endpoint *k)
{
	const uint64_t align = KNITK_HUGE_MIN_BYTES;
	char *r, *a, *p;

	r = mmap(NULL, k->map_bytes + align, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return MAP_FAILED;
	a = (char *)(((uintptr_t)r + align - 1) & ~(uintptr_t)(align - 1));
	p = mmap(a, k->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
		 k->fd, 0);
	if (p == MAP_FAILED) {
		int e = errno;

		munmap(r, k->map_bytes + align);
		errno = e;
		return MAP_FAILED;
	}
	if (a > r)
		munmap(r, (size_t)(a - r));
	munmap(a + k->map_bytes, (size_t)(r + align - a));
	/* Advice only: a kernel without THP refuses it, 4 KiB pages serve. */
	if (!madvise(p, k->map_bytes, MADV_HUGEPAGE))
		k->pages_flags |= KNITK_PAGES_THP;
	return p;
}

static int futex_map(struct knitk_endpoint *k)
{
	void *p;

	if (!(k->pages_flags & KNITK_PAGES_HUGETLB) && futex_wants_huge(k))
		p = futex_map_thp(k);
	else
		p = mmap(NULL, k->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
			 k->fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	k->base = p;
	return 0;
}

/*
 * A new memfd for the knot, mapped.  @hugetlb: on hugetlbfs, whose mmap
 * fails (-ENOMEM) when the huge pages cannot all be reserved.
 */
static int futex_memfd_map(struct knitk_endpoint *k, bool hugetlb)
{
	int ret;

	k->fd = memfd_create("knitk", MFD_CLOEXEC | (hugetlb ? MFD_HUGETLB : 0));
	if (k->fd < 0)
		return -errno;
	ret = futex_pages_of(k, k->fd);
	k->map_bytes = futex_map_bytes(k);
	if (!ret && ftruncate(k->fd, (off_t)k->map_bytes) < 0)
		ret = -errno;
	if (!ret)
		ret = futex_map(k);
	/*
	 * A hugetlb cgroup's limit is met at the first touch of a page, with
	 * SIGBUS: touch every page now, where running out is an error that
	 * makes the knot of 4 KiB pages instead (Linux 5.14; an older kernel
	 * refuses the advice, and gets 4 KiB pages too).
	 */
	if (!ret && hugetlb && madvise(k->base, k->map_bytes, MADV_POPULATE_WRITE)) {
		ret = -errno;
		munmap(k->base, k->map_bytes);
		k->base = NULL;
	}
	if (ret) {
		close(k->fd);
		k->fd = -1;
	}
	return ret;
}

#ifdef KNITK_TEST_HOOKS
_Atomic uint32_t knitk__test_counter_base;
#endif

static int futex_create(struct knitk_endpoint *k)
{
	struct knitk_control *ctl;
	uint32_t base;
	unsigned int d;
	int ret;

	/* Any failure of hugetlbfs (none configured, none reserved): a plain one. */
	ret = -ENOENT;
	if (futex_wants_huge(k))
		ret = futex_memfd_map(k, true);
	if (ret)
		ret = futex_memfd_map(k, false);
	if (ret)
		return ret;
	ctl = (struct knitk_control *)k->base;
	if (k->pages_flags & KNITK_PAGES_HUGETLB)
		ctl->huge_bytes = k->map_bytes;
	ctl->api = KNITK_API;
	/* Recorded with its region size resolved, as the module does. */
	knitk__geometry_resolve(&k->geom);
	ctl->geometry = k->geom;
	ctl->layout = k->layout;
	/* From 0, but near the wrap in a test of the counters (knot_hooks.h). */
	base = KNOT_COUNTER_BASE();
	ctl->death_seq = base;
	ctl->death_done = base;
	for (d = 0; d < KNITK_NR_DOORBELLS; d++) {
		ctl->generation[d] = base;
		knot_doorbell(k, d)->seq = base;
	}
	/* Release pairs with the acquire of magic in futex_attach. */
	atomic_store_explicit(A32(&ctl->magic), KNITK_MAGIC, memory_order_release);
	k->can_kick = true;
	return 0;
}

static int futex_attach(struct knitk_endpoint *k, int fd)
{
	const struct knitk_control *ctl;
	struct stat st;
	void *p;
	int ret;

	if (fstat(fd, &st) < 0)
		return -errno;
	ret = futex_pages_of(k, fd);
	if (ret)
		return ret;
	/* A hugetlbfs file maps in whole huge pages only. */
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < k->page_bytes)
		return -EINVAL;
	p = mmap(NULL, k->page_bytes, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	ctl = p;
	ret = -EINVAL;
	if (atomic_load_explicit(A32(&ctl->magic), memory_order_acquire) != KNITK_MAGIC ||
	    ctl->api != KNITK_API)
		goto out;
	k->geom = ctl->geometry;
	k->layout = ctl->layout;
	k->map_bytes = futex_map_bytes(k);
	if (!knitk__layout_matches_geometry(&k->geom, &k->layout) ||
	    (uint64_t)st.st_size != k->map_bytes)
		goto out;
	k->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (k->fd < 0) {
		ret = -errno;
		goto out;
	}
	ret = futex_map(k);
	if (ret) {
		close(k->fd);
		k->fd = -1;
	} else {
		k->can_kick = true;
	}
out:
	munmap(p, k->page_bytes);
	return ret;
}

static struct knitk_control *futex_control(struct knitk_endpoint *k)
{
	return (struct knitk_control *)k->base;
}

static int futex_join(struct knitk_endpoint *k, unsigned int role,
		      unsigned int worker, uint32_t *generation)
{
	struct knitk_control *ctl = futex_control(k);
	unsigned int doorbell = role == KNITK_ROLE_HOST ? KNITK_DOORBELL_HOST : worker;
	uint64_t b = 1ULL << doorbell;
	uint64_t live = atomic_load_explicit(A64(&ctl->live), memory_order_relaxed);

	/*
	 * seq_cst RMWs on the control words: they pair with the acquire
	 * loads of live/dead in knot_host_dead (internal.h) and with the
	 * RMWs of futex_mark_dead on other endpoints.
	 */
	do {
		if (live & b)
			return -EBUSY;
	} while (!atomic_compare_exchange_weak_explicit(A64(&ctl->live), &live,
			live | b, memory_order_seq_cst, memory_order_relaxed));
	atomic_fetch_and_explicit(A64(&ctl->dead), ~b, memory_order_seq_cst);
	*generation = atomic_fetch_add_explicit(A32(&ctl->generation[doorbell]), 1,
						memory_order_seq_cst) + 1;
	k->join_pid = getpid();
	return 0;
}

/* An absolute CLOCK_MONOTONIC @deadline_ns as a wait's timeout, or NULL. */
static struct timespec *futex_deadline(uint64_t deadline_ns, struct timespec *ts)
{
	if (deadline_ns == KNITK_WAIT_FOREVER)
		return NULL;
	ts->tv_sec = (time_t)(deadline_ns / 1000000000ULL);
	ts->tv_nsec = (long)(deadline_ns % 1000000000ULL);
	return ts;
}

static int futex_wait(struct knitk_endpoint *k, uint32_t seq, uint64_t deadline_ns)
{
	struct knitk_doorbell *db = knot_doorbell(k, (unsigned int)k->doorbell);
	struct timespec ts, *tsp = futex_deadline(deadline_ns, &ts);
	long r;

	for (;;) {
		/* Absolute CLOCK_MONOTONIC deadline; shared (not private). */
		r = sys_futex(&db->seq, FUTEX_WAIT_BITSET, seq, tsp,
			      FUTEX_BITSET_MATCH_ANY);
		if (r < 0) {
			if (errno == EAGAIN)
				return -EAGAIN;
			if (errno == ETIMEDOUT)
				return -ETIMEDOUT;
			if (errno == EINTR)
				return -EINTR;
			return -errno;
		}
		/* A wake with seq unchanged is not ours: keep sleeping. */
		if (atomic_load_explicit(A32(&db->seq), memory_order_acquire) != seq)
			return 0;
	}
}

/* A word of the knot: the futex it is, shared (the memfd names it). */
static int futex_word_wait(struct knitk_endpoint *k, const uint32_t *word,
			   uint32_t expected, uint64_t deadline_ns)
{
	struct timespec ts, *tsp = futex_deadline(deadline_ns, &ts);

	(void)k;
	if (sys_futex((void *)word, FUTEX_WAIT_BITSET, expected, tsp,
		      FUTEX_BITSET_MATCH_ANY) < 0)
		return -errno;
	return 0;
}

static int futex_word_wake(struct knitk_endpoint *k, const uint32_t *word,
			   unsigned int nr)
{
	long r;

	(void)k;
	r = sys_futex((void *)word, FUTEX_WAKE, nr > INT_MAX ? INT_MAX : nr,
		      NULL, 0);
	return r < 0 ? -errno : (int)r;
}

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449	/* the same on every architecture */
#endif

/*
 * futex_wait, also ended by @words (futex_waitv(2), every word shared):
 * 1 when a word was woken, -EAGAIN (no sleep) when a word or seq no
 * longer held its value; otherwise as futex_wait.
 */
static int futex_wait_words(struct knitk_endpoint *k, uint32_t seq,
			    uint64_t deadline_ns,
			    const struct knitk_wait_word *words, unsigned int nr)
{
	struct knitk_doorbell *db = knot_doorbell(k, (unsigned int)k->doorbell);
	struct futex_waitv v[KNITK_WAIT_WORDS_MAX + 1];
	struct timespec ts, *tsp = futex_deadline(deadline_ns, &ts);
	unsigned int i;
	long r;

	memset(v, 0, sizeof(v));
	v[0].uaddr = (uintptr_t)&db->seq;
	v[0].val = seq;
	v[0].flags = FUTEX_32;
	for (i = 0; i < nr; i++) {
		v[i + 1].uaddr = (uintptr_t)words[i].word;
		v[i + 1].val = words[i].value;
		v[i + 1].flags = FUTEX_32;
	}
	for (;;) {
		r = syscall(SYS_futex_waitv, v, nr + 1, 0, tsp, CLOCK_MONOTONIC);
		if (r > 0)
			return 1;
		/* Our seq moved (a wake, a kick), or a word did: which one. */
		if (atomic_load_explicit(A32(&db->seq), memory_order_acquire) != seq)
			return r == 0 ? 0 : -EAGAIN;
		if (r == 0)
			continue;	/* a wake with seq unchanged: not ours */
		if (errno == EAGAIN)
			return -EAGAIN;	/* a word had changed: no sleep */
		if (errno == ETIMEDOUT)
			return -ETIMEDOUT;
		if (errno == EINTR)
			return -EINTR;
		return -errno;
	}
}

/*
 * A wake of the host doorbell while its owner sleeps also goes to the
 * host's event fd, if set (knitk_endpoint_set_event_fd): an event loop waits
 * there, not on the futex.  The fd is non-blocking; a full counter
 * (never reached in practice) still leaves it readable.
 */
static void host_event_signal(struct knitk_endpoint *k)
{
	/* Pairs with the release in knitk_endpoint_set_event_fd: the fd is made. */
	int efd = atomic_load_explicit(&k->event_fd, memory_order_acquire);
	uint64_t one = 1;

	if (efd < 0)
		return;
	/* Counted first: a reader woken by the write sees the count. */
	knot_count(k, KC_EVENT_WRITES, 1);
	if (write(efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, so the fd is readable anyway. */
	}
}

/*
 * Advance seq of @db and clear its sleeping flag if its owner still sleeps
 * in cycle @w, as the module does: later rings for the same sleep then
 * find the owner awake.
 */
static bool doorbell_advance(struct knitk_doorbell *db, uint64_t w)
{
	/*
	 * The CAS fails if the owner started another sleep cycle or woke
	 * up (sleeping changed) or someone else advanced seq first: in each
	 * case this wake is not needed.  seq_cst: pairs with the flag CAS in
	 * doorbell_set_sleeping.
	 */
	return atomic_compare_exchange_strong_explicit(doorbell_word(db), &w,
			dbw_make(dbw_seq(w) + 1, 0),
			memory_order_seq_cst, memory_order_relaxed);
}

static int futex_notify(struct knitk_endpoint *k, uint64_t mask, uint64_t *woken)
{
	uint64_t m, out = 0;

	for (m = mask; m; m &= m - 1) {
		unsigned int d = (unsigned int)__builtin_ctzll(m);
		struct knitk_doorbell *db = knot_doorbell(k, d);
		uint64_t w = atomic_load_explicit(doorbell_word(db),
						  memory_order_seq_cst);

		if (!dbw_sleeping(w)) {
			knot_count(k, KC_SUPPRESSED_AWAKE, 1);
			KNITK_TRACE(KT_NOTIFY, d, KT_AWAKE_FLAG, w);
			continue;
		}
		/* The module's idle filter: nothing pending, nothing to do. */
		if (!knitk__endpoint_doorbell_pending(k, d)) {
			knot_count(k, KC_SUPPRESSED_IDLE, 1);
			KNITK_TRACE(KT_NOTIFY, d, KT_FILTERED, w);
			continue;
		}
		if (!doorbell_advance(db, w)) {
			knot_count(k, KC_SUPPRESSED_AWAKE, 1);
			KNITK_TRACE(KT_NOTIFY, d, KT_CAS_FAILED, w);
			continue;
		}
		KNITK_TRACE(KT_NOTIFY, d, KT_SENT, w);
		sys_futex(&db->seq, FUTEX_WAKE, INT_MAX, NULL, 0);
		if (d == KNITK_DOORBELL_HOST)
			host_event_signal(k);
		out |= 1ULL << d;
	}
	*woken = out;
	return 0;
}

/*
 * Wake doorbell @d unconditionally (a peer event or a kick, not work);
 * true if its owner was asleep.
 */
static bool doorbell_kick(struct knitk_endpoint *k, unsigned int d)
{
	struct knitk_doorbell *db = knot_doorbell(k, d);
	uint64_t w = atomic_load_explicit(doorbell_word(db), memory_order_relaxed);

	/* seq_cst: ordered after the death stores; pairs with futex_wait. */
	while (!atomic_compare_exchange_weak_explicit(doorbell_word(db), &w,
			dbw_make(dbw_seq(w) + 1, dbw_sleeping(w)),
			memory_order_seq_cst, memory_order_relaxed))
		;
	sys_futex(&db->seq, FUTEX_WAKE, INT_MAX, NULL, 0);
	return dbw_sleeping(w);
}

/*
 * Wake the own doorbell past the idle filter (see knitk_doorbell_kick_self):
 * a side's own event, neither a result nor a death, so never the event fd.
 */
static int futex_kick(struct knitk_endpoint *k)
{
	doorbell_kick(k, (unsigned int)k->doorbell);
	return 0;
}

static int futex_mark_dead(struct knitk_endpoint *k, unsigned int doorbell)
{
	struct knitk_control *ctl = futex_control(k);
	uint64_t b = 1ULL << doorbell, live;
	unsigned int w;

	/*
	 * live, dead and death_seq change before the doorbells are kicked:
	 * a woken waiter's acquire loads (knot_host_dead, knot_peer_event)
	 * see the death.
	 */
	live = atomic_fetch_and_explicit(A64(&ctl->live), ~b, memory_order_seq_cst);
	if (!(live & b))
		return -ENOENT;
	atomic_fetch_or_explicit(A64(&ctl->dead), b, memory_order_seq_cst);
	/*
	 * Pairs with the acquire of death_seq in knot_peer_event, and, its
	 * kicks' CAS after it, in knot_peer_woke.
	 */
	atomic_fetch_add_explicit(A32(&ctl->death_seq), 1, memory_order_seq_cst);
	KNOT_HOOK(k, KNOT_HOOK_DEATH, doorbell);
	/*
	 * The ended role's own doorbell, as the module wakes the slot's
	 * waiters (P4): a thread of that role asleep on it wakes and finds
	 * its role ended (knot_role_ended: -ENOTCONN).  The kick's seq_cst
	 * CAS comes after the clear of live above; a prepare whose seq_cst
	 * CAS (doorbell_set_sleeping) reads the advanced seq then sees live
	 * clear in knot_role_ended's acquire load, and one that read the
	 * old seq is woken from it.  Without this kick such a waiter slept
	 * until its deadline, for ever without one.
	 */
	doorbell_kick(k, doorbell);
	if (doorbell == KNITK_DOORBELL_HOST) {
		for (w = 0; w < k->geom.nr_workers; w++)
			doorbell_kick(k, w);
		/*
		 * The host's role ended: an event loop of the host waiting
		 * on its event fd wakes and finds knitk_endpoint_poll()
		 * reporting the end (POLLHUP | POLLERR), whatever it awaited.
		 */
		host_event_signal(k);
	} else if (doorbell_kick(k, KNITK_DOORBELL_HOST)) {
		/* A death delivered to a host that sleeps: its event fd too. */
		host_event_signal(k);
	}
	/*
	 * After the kicks (seq_cst CASes): pairs with the acquire of
	 * death_done in knitk_doorbell_prepare, before its seq read.  A
	 * process killed before this line leaves death_done behind for
	 * good: its sleepers' later wakes then count as peer events, never
	 * as spurious (the counters only, not what a wait returns).
	 */
	atomic_fetch_add_explicit(A32(&ctl->death_done), 1, memory_order_release);
	return 0;
}

static void futex_release(struct knitk_endpoint *k)
{
	/*
	 * Leaving ends the role only for the process that joined it (P1)
	 * and only while it is still this endpoint's: a forked child
	 * releasing the endpoint it inherited, or an endpoint whose role was
	 * marked dead and joined again by another, leaves the role to its
	 * holder.  A mark_dead of the role and a new join that both land
	 * between this look and the clear in futex_mark_dead are not told
	 * apart (the module's release keeps each endpoint's own record).
	 */
	if (k->base && k->doorbell >= 0 && k->join_pid == getpid() &&
	    !knot_role_ended(k))
		futex_mark_dead(k, (unsigned int)k->doorbell);
	if (k->base)
		munmap(k->base, k->map_bytes);
	if (k->fd >= 0)
		close(k->fd);
}

const struct knitk_backend_ops knitk_backend_futex = {
	.kind		= KNITK_BACKEND_FUTEX,
	.create		= futex_create,
	.attach		= futex_attach,
	.join		= futex_join,
	.wait		= futex_wait,
	.wait_words	= futex_wait_words,
	.word_wait	= futex_word_wait,
	.word_wake	= futex_word_wake,
	.notify		= futex_notify,
	.stats		= NULL,
	.mark_dead	= futex_mark_dead,
	.kick		= futex_kick,
	.release	= futex_release,
};
