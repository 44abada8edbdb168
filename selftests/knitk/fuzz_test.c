// SPDX-License-Identifier: GPL-2.0
/*
 * A structure-aware fuzzer of the knitk uapi.  Every operation is drawn
 * from a seeded generator, so a seed replays the same sequence of calls
 * (the interleavings of processes and threads still vary):
 *
 *   KNITK_FUZZ_SEED=<n>[,<n>...]   seeds (default 0x6b6e69746b; printed
 *                         either way): each case runs once per seed
 *   KNITK_FUZZ_OPS=<n>    operations of the ioctls case per seed; the
 *                         procs and threads cases run half as many each
 *                         (default 12000: 24000 in all), the uring case a
 *                         tenth, the notify_wait case n / 1000 rounds
 *                         (at least 12)
 *
 *  - ioctls: one process, a table of endpoints, mutated ioctls (geometries
 *    near every limit of uapi/linux/knitk.h, bad pointers, reserved
 *    fields, unknown commands) and mmap/mprotect/mremap/munmap/madvise,
 *    writes of random words into the shared region, pokes at the control
 *    page through /proc/self/mem, poll and fork; KNITK_IOC_WORD_WAIT and
 *    KNITK_IOC_WORD_WAKE on words in and around the data region; KNITK_IOC_NOTIFY_WAIT
 *    (unknown flag bits must give -EINVAL, and a refusal before the ring
 *    leaves woken unwritten) and KNITK_URING_CMD_WAIT through liburing
 *    (each SQE with at most one fault: a payload field, cmd_op, the fd,
 *    or an SQE field io_uring refuses), both with bounded deadlines.
 *    Each result must be one the uapi documents for that call in that
 *    state, and the control page must keep its magic and layout.
 *  - procs: processes sharing knots by inheritance and SCM_RIGHTS, running
 *    those operations while the parent SIGKILLs and respawns them.
 *  - threads: JOIN, WAIT, NOTIFY, poll and close racing on one endpoint,
 *    signals landing in the waits, the host closed under the workers.
 *  - uring: rounds of KNITK_URING_CMD_WAIT commands in flight (plain,
 *    SQE128 and SQPOLL rings; registered files, IOSQE_ASYNC,
 *    IOSQE_CQE_SKIP_SUCCESS, linked timeouts, async cancels; deadlines
 *    past, near, past 2^63 and none) while a thread kicks, the roles end
 *    and the host dies under them, the mapping goes, the ring exits with
 *    waits asleep and children exit or are SIGKILLed with waits of their
 *    own asleep.  Each CQE must be the error of the first layer its
 *    fault reaches in io_uring's order, or a wait's result (-EAGAIN for
 *    a stale seq), and the round's last close must complete every
 *    command left: none lost.
 *  - notify_wait: the host and worker 0 in NOTIFY_WAIT (and WAIT) loops
 *    with random flags, seqs, doorbells and deadlines (past, near, past
 *    2^63, none), a kicker, SIGUSR1 with SA_RESTART or without (WAIT is
 *    restarted, never -EINTR; NOTIFY_WAIT gives -EINTR), worker 1 in a
 *    process of its own that is SIGKILLed, and the host or worker 0
 *    closed under the waits.
 *
 * Each case runs in a child and then waits for the module's live knot and
 * byte counters to come back to zero (knitk_live.h): nothing leaked.
 * max_knot_bytes is lowered for the run so geometries around the cap are
 * cheap; the guest's kernel log is checked by tools/vm-check.sh.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/prctl.h>

#include "knitk_harness.h"
#include "knitk.h"
#include "knitk_test.h"
#include "knitk_live.h"
#include "knitk_ring.h"

#define MAX_KNOT_BYTES	KNITK_SYSMOD "/parameters/max_knot_bytes"
#define FUZZ_CAP	(4ULL << 20)
#define NR_SLOTS	6
#define NR_MAPS		8
#define NR_PROCS	4
#define MAX_SEEDS	16

/* The seed of the run in progress, one of seeds[]. */
static uint64_t fuzz_seed = 0x6b6e69746bULL;
static uint64_t seeds[MAX_SEEDS] = { 0x6b6e69746bULL };
static unsigned int nr_seeds = 1;
static unsigned long fuzz_ops = 12000;

/* splitmix64: small, seedable, good enough to pick operations. */
static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n)
{
	return n ? rnd(s) % n : 0;
}

static int chance(uint64_t *s, unsigned int pct)
{
	return below(s, 100) < pct;
}

/* A value near a limit: 0, 1, the limit and its neighbours, or anything. */
static uint64_t near(uint64_t *s, uint64_t limit, uint64_t align)
{
	switch (below(s, 9)) {
	case 0: return 0;
	case 1: return 1;
	case 2: return limit;
	case 3: return limit + 1;
	case 4: return limit - 1;
	case 5: return limit + align;
	case 6: return align;
	case 7: return below(s, limit / (align ? align : 1) + 2) * align;
	default: return rnd(s);
	}
}

/* What we know of an endpoint: fds of one endpoint share it (dup). */
struct ep {
	int refs;
	int known;		/* state below tracked since open */
	int attached;
	struct knitk_layout layout;
};

struct map {
	unsigned char *addr;
	size_t len;
	int ctl;		/* the control page (read-only forever) */
	struct knitk_layout layout;
};

/* What succeeded, printed at the end: the run reached the deep paths. */
enum { OK_CREATE, OK_ATTACH, OK_JOIN, OK_MMAP, OK_WOKEN, OK_TIMEDOUT,
       OK_NOTIFIED, OK_FORK, OK_PASSED, OK_NW_RUNG, OK_URING_WAITED, NR_OKS };
static const char *const ok_names[NR_OKS] = {
	"creates", "attaches", "joins", "mmaps", "waits woken", "waits timed out",
	"doorbells woken", "forks", "fds passed", "notify-waits past the ring",
	"ring waits run",
};

struct fz {
	uint64_t seed;		/* the generator's state */
	uint64_t stream;	/* its first state: which process this is */
	unsigned long op;
	int procs;		/* may fork, and may take part in SCM_RIGHTS */
	int sock_out, sock_in;	/* -1 without a ring */
	int fd[NR_SLOTS];
	struct ep *ep[NR_SLOTS];
	struct map map[NR_MAPS];
	void *ro_page;		/* readable, not writable: copy_to_user fails */
	void *hole;		/* unmapped: copy_from_user fails */
	struct io_uring *ring;	/* op_uring's, made on first use; not inherited */
	unsigned long ok[NR_OKS];	/* calls that did what they asked */
};

#define FAIL(z, fmt, ...) do {						\
	printf("# KNITK_FUZZ_SEED=%#llx, stream %#llx, op %lu: " fmt "\n",	\
	       (unsigned long long)fuzz_seed,				\
	       (unsigned long long)(z)->stream, (z)->op, ##__VA_ARGS__);	\
	return -1;							\
} while (0)

/* ret must be 0 or one of the listed negative errnos. */
static int allowed(int ret, const int *ok, int n)
{
	int i;

	if (ret == 0)
		return 1;
	for (i = 0; i < n; i++)
		if (ret == -ok[i])
			return 1;
	return 0;
}

#define EXPECT_IN(z, what, ret, ...) do {				\
	static const int ok_[] = { __VA_ARGS__ };			\
	if (!allowed(ret, ok_, sizeof(ok_) / sizeof(ok_[0])))		\
		FAIL(z, "%s: unexpected %d (%s)", what, ret,		\
		     strerror(-(ret)));					\
} while (0)

static struct ep *ep_new(int known)
{
	struct ep *e = calloc(1, sizeof(*e));

	if (e) {
		e->refs = 1;
		e->known = known;
	}
	return e;
}

/* Another process holds the endpoint too: its state is no longer ours. */
static void ep_forget(struct ep *e)
{
	if (e)
		e->known = 0;
}

static void slot_close(struct fz *z, int i)
{
	if (z->fd[i] < 0)
		return;
	close(z->fd[i]);
	z->fd[i] = -1;
	if (z->ep[i] && !--z->ep[i]->refs)
		free(z->ep[i]);
	z->ep[i] = NULL;
}

static int slot_pick(struct fz *z)
{
	return (int)below(&z->seed, NR_SLOTS);
}

/* An fd for an ATTACH or a bad-fd ioctl: a slot's, or anything else. */
static int any_fd(struct fz *z)
{
	switch (below(&z->seed, 6)) {
	case 0: return -1;
	case 1: return (int)rnd(&z->seed);
	case 2: return 0;		/* stdin: not a knitk fd */
	default: return z->fd[slot_pick(z)];
	}
}

/*
 * A pointer for an ioctl argument: usually @good, sometimes NULL, a hole
 * or a wild address (the copy in fails), or a read-only copy of @good
 * (the copy in works, the copy out fails).
 */
static void *arg_ptr(struct fz *z, void *good, size_t size, int *bad)
{
	*bad = 1;
	switch (below(&z->seed, 40)) {
	case 0: return NULL;
	case 1: return z->hole;
	case 2: case 3:
		if (mprotect(z->ro_page, KNITK_PAGE_BYTES, PROT_READ | PROT_WRITE))
			return NULL;
		memcpy(z->ro_page, good, size);
		mprotect(z->ro_page, KNITK_PAGE_BYTES, PROT_READ);
		return z->ro_page;
	case 4: return (void *)(uintptr_t)rnd(&z->seed);
	default: *bad = 0; return good;
	}
}

static void gen_geometry(struct fz *z, struct knitk_geometry *g)
{
	uint64_t *s = &z->seed;

	memset(g, 0, sizeof(*g));
	/* Mostly small valid knots, so later operations have one. */
	if (chance(s, 50)) {
		knitk_geom(g, chance(s, 30) ? KNITK_GEOM_STEAL : 0,
			   1 + below(s, 4), 1 + below(s, 3),
			   below(s, 3) * 64, below(s, 3) * 64,
			   below(s, 3) * KNITK_ARENA_ALIGN);
	} else {
		g->flags = chance(s, 80) ? (chance(s, 50) ? KNITK_GEOM_STEAL : 0)
					 : (uint32_t)rnd(s);
		g->nr_workers = near(s, KNITK_MAX_WORKERS, 1);
		g->nr_submitters = near(s, KNITK_MAX_SUBMITTERS, 1);
		g->lanes = chance(s, 85) ? KNITK_LANES : near(s, KNITK_LANES, 1);
		g->inline_bytes = near(s, KNITK_MAX_INLINE_BYTES, KNITK_CACHELINE);
		g->abort_bits = near(s, KNITK_MAX_ABORT_BITS, KNITK_ABORT_ALIGN);
		g->arena_bytes = chance(s, 50) ? near(s, FUZZ_CAP / 4, KNITK_ARENA_ALIGN)
					       : near(s, KNITK_MAX_ARENA_BYTES,
						      KNITK_ARENA_ALIGN);
	}
	/* A region size: legal or not, with or without stealing. */
	if (chance(s, 20))
		g->region_lanes = chance(s, 70) ? 1U << below(s, 8) : (uint32_t)rnd(s);
	if (chance(s, 5)) {
		if (chance(s, 25))
			g->reserved0 = (uint32_t)rnd(s) | 1;
		else
			g->reserved[below(s, 3)] = rnd(s) | 1;
	}
}

/* The control page must still be what the module wrote. */
static int check_ctl(struct fz *z, const struct map *m)
{
	const struct knitk_control *c = (const void *)m->addr;

	if (c->magic != KNITK_MAGIC || c->api != KNITK_API)
		FAIL(z, "control page magic %#x api %u", c->magic, c->api);
	if (memcmp(&c->layout, &m->layout, sizeof(m->layout)))
		FAIL(z, "control page layout changed");
	return 0;
}

static int op_open(struct fz *z)
{
	int i = slot_pick(z), fd;

	slot_close(z, i);
	fd = chance(&z->seed, 20) ? knitk_open_raw() : knitk_open();
	EXPECT_IN(z, "open", fd < 0 ? fd : 0, EMFILE, ENFILE, ENOMEM);
	if (fd < 0)
		return 0;
	z->fd[i] = fd;
	z->ep[i] = ep_new(1);
	return 0;
}

static int op_dup(struct fz *z)
{
	int a = slot_pick(z), b = slot_pick(z), fd;

	if (a == b || z->fd[a] < 0)
		return 0;
	slot_close(z, b);
	fd = dup(z->fd[a]);
	if (fd < 0)
		return 0;
	z->fd[b] = fd;
	z->ep[b] = z->ep[a];
	if (z->ep[b])
		z->ep[b]->refs++;
	return 0;
}

static int op_api(struct fz *z)
{
	struct knitk_api a = { .api = KNITK_API };
	int i = slot_pick(z), bad, ret;
	void *p;

	if (chance(&z->seed, 30))
		a.api = near(&z->seed, KNITK_API, 1);
	if (chance(&z->seed, 30))
		a.features = chance(&z->seed, 50) ? rnd(&z->seed) : below(&z->seed, 32);
	p = arg_ptr(z, &a, sizeof(a), &bad);
	ret = knitk_ioctl(z->fd[i], KNITK_IOC_API, p);
	EXPECT_IN(z, "API", ret, EINVAL, EFAULT, EBADF);
	if (!ret && (a.api != KNITK_API || !(a.features & KNITK_FEATURE_POLL)))
		FAIL(z, "API answered api %llu features %#llx",
		     (unsigned long long)a.api, (unsigned long long)a.features);
	return 0;
}

static int op_create(struct fz *z)
{
	struct knitk_create c;
	struct knitk_layout want;
	int i = slot_pick(z), bad, ret, valid;
	struct ep *e = z->ep[i];
	void *p;

	gen_geometry(z, &c.geometry);
	memset(&c.layout, 0xa5, sizeof(c.layout));
	valid = !knitk_layout_compute(&c.geometry, &want);
	p = arg_ptr(z, &c, sizeof(c), &bad);
	ret = knitk_ioctl(z->fd[i], KNITK_IOC_CREATE, p);
	if (z->fd[i] < 0) {
		EXPECT_IN(z, "CREATE on no fd", ret, EBADF);
		return 0;
	}
	if (bad) {
		EXPECT_IN(z, "CREATE with a bad pointer", ret, EFAULT, EBUSY,
			  EINVAL, E2BIG, ENOMEM);
		if (!ret)
			FAIL(z, "CREATE succeeded with a bad pointer");
		return 0;
	}
	if (e && e->attached) {
		EXPECT_IN(z, "second CREATE", ret, EBUSY);
		if (!ret)
			FAIL(z, "second CREATE succeeded");
		return 0;
	}
	if (!valid) {
		EXPECT_IN(z, "CREATE of an invalid geometry", ret, EINVAL, EBUSY);
		if (!ret)
			FAIL(z, "invalid geometry accepted");
		return 0;
	}
	if (want.size > FUZZ_CAP) {
		EXPECT_IN(z, "CREATE over the cap", ret, E2BIG, EBUSY);
		if (!ret)
			FAIL(z, "knot of %llu bytes over a cap of %llu",
			     (unsigned long long)want.size, FUZZ_CAP);
		return 0;
	}
	EXPECT_IN(z, "CREATE", ret, EBUSY, ENOMEM);
	if (ret)
		return 0;
	if (memcmp(&c.layout, &want, sizeof(want)))
		FAIL(z, "CREATE layout differs from knitk_layout_compute");
	z->ok[OK_CREATE]++;
	if (e) {
		e->attached = 1;
		e->layout = want;
	}
	return 0;
}

static int op_attach(struct fz *z)
{
	struct knitk_attach a = { 0 };
	int i = slot_pick(z), bad, ret;
	struct ep *e = z->ep[i];
	void *p;

	a.fd = any_fd(z);
	if (chance(&z->seed, 5))
		a.flags = rnd(&z->seed) | 1;
	p = arg_ptr(z, &a, sizeof(a), &bad);
	ret = knitk_ioctl(z->fd[i], KNITK_IOC_ATTACH, p);
	EXPECT_IN(z, "ATTACH", ret, EBADF, EINVAL, ENOTCONN, EBUSY, EFAULT);
	if (!ret && (bad || a.flags))
		FAIL(z, "ATTACH succeeded with a bad pointer or flags");
	if (!ret && e && e->attached)
		FAIL(z, "second ATTACH succeeded");
	if (!ret && e) {
		e->attached = 1;
		e->layout = a.layout;
	}
	z->ok[OK_ATTACH] += !ret;
	return 0;
}

static int op_join(struct fz *z)
{
	struct knitk_join j = { 0 };
	int i = slot_pick(z), bad, ret;
	void *p;

	j.role = chance(&z->seed, 85) ? 1 + below(&z->seed, 2) : (uint32_t)rnd(&z->seed);
	if (j.role != KNITK_ROLE_HOST || chance(&z->seed, 10))
		j.worker = near(&z->seed, chance(&z->seed, 50) ? 2 : KNITK_MAX_WORKERS, 1);
	if (chance(&z->seed, 5))
		j.flags = rnd(&z->seed) | 1;
	p = arg_ptr(z, &j, sizeof(j), &bad);
	ret = knitk_ioctl(z->fd[i], KNITK_IOC_JOIN, p);
	/* A bad pointer takes no role (documented): -EFAULT. */
	EXPECT_IN(z, "JOIN", ret, EBADF, EINVAL, ENOTCONN, EBUSY, EFAULT);
	if (!ret && (bad || j.flags))
		FAIL(z, "JOIN succeeded with a bad pointer or flags");
	z->ok[OK_JOIN] += !ret;
	return 0;
}

/* The seq of doorbell @d if a data mapping of @layout is at hand. */
static uint32_t seq_guess(struct fz *z, int slot)
{
	int m;

	for (m = 0; m < NR_MAPS; m++) {
		struct map *mp = &z->map[m];

		if (mp->addr && !mp->ctl && z->ep[slot] &&
		    !memcmp(&mp->layout, &z->ep[slot]->layout, sizeof(mp->layout)) &&
		    mp->len >= KNITK_PAGE_BYTES)
			/* Doorbells are the data mapping's first page. */
			return ((struct knitk_doorbell *)mp->addr)[below(&z->seed, 64)].seq;
	}
	return (uint32_t)rnd(&z->seed);
}

static int op_wait(struct fz *z)
{
	struct knitk_wait w = { 0 };
	int i = slot_pick(z), bad, ret;
	void *p;

	w.expected = chance(&z->seed, 70) ? seq_guess(z, i) : (uint32_t)rnd(&z->seed);
	switch (below(&z->seed, 4)) {
	case 0: w.deadline_ns = below(&z->seed, 2); break;
	case 1: w.deadline_ns = rnd(&z->seed) >> 40; break;
	default: w.deadline_ns = knitk_now_ns() + below(&z->seed, 2 * KNITK_MS);
	}
	if (chance(&z->seed, 5))
		w.flags = rnd(&z->seed) | 1;
	if (chance(&z->seed, 5))
		w.reserved = rnd(&z->seed) | 1;
	p = arg_ptr(z, &w, sizeof(w), &bad);
	ret = knitk_ioctl(z->fd[i], KNITK_IOC_WAIT, p);
	EXPECT_IN(z, "WAIT", ret, EBADF, EINVAL, ENOTCONN, EFAULT, EAGAIN,
		  ETIMEDOUT, EINTR, EPIPE);
	if (!ret && (bad || w.flags || w.reserved))
		FAIL(z, "WAIT returned 0 with a bad pointer or flags");
	z->ok[OK_WOKEN] += !ret;
	z->ok[OK_TIMEDOUT] += ret == -ETIMEDOUT;
	return 0;
}

static int op_notify(struct fz *z)
{
	struct knitk_notify n = { 0 };
	int i = slot_pick(z), bad, ret;
	void *p;

	n.doorbells = chance(&z->seed, 70) ? (1ULL << below(&z->seed, 4)) |
					     (chance(&z->seed, 30) ? 1ULL << 63 : 0)
					   : rnd(&z->seed);
	n.flags = chance(&z->seed, 40) ? KNITK_NOTIFY_KICK :
		  chance(&z->seed, 10) ? (uint32_t)rnd(&z->seed) : 0;
	if (chance(&z->seed, 5))
		n.reserved = rnd(&z->seed) | 1;
	p = arg_ptr(z, &n, sizeof(n), &bad);
	ret = knitk_ioctl(z->fd[i], KNITK_IOC_NOTIFY, p);
	EXPECT_IN(z, "NOTIFY", ret, EBADF, EINVAL, ENOTCONN, EFAULT);
	if (!ret && (bad || n.reserved || (n.flags & ~KNITK_NOTIFY_FLAGS)))
		FAIL(z, "NOTIFY succeeded with a bad pointer or flags");
	if (!ret && (n.woken & ~n.doorbells))
		FAIL(z, "NOTIFY woke %#llx, not asked for",
		     (unsigned long long)(n.woken & ~n.doorbells));
	if (!ret)
		z->ok[OK_NOTIFIED] += __builtin_popcountll(n.woken);
	return 0;
}

static int op_stats(struct fz *z)
{
	struct knitk_stats s = { 0 };
	int i = slot_pick(z), bad, ret;
	void *p;

	s.doorbell = chance(&z->seed, 80) ? near(&z->seed, 63, 1) : (uint32_t)rnd(&z->seed);
	if (chance(&z->seed, 5))
		s.flags = rnd(&z->seed) | 1;
	p = arg_ptr(z, &s, sizeof(s), &bad);
	ret = knitk_ioctl(z->fd[i], KNITK_IOC_STATS, p);
	EXPECT_IN(z, "STATS", ret, EBADF, EINVAL, ENOTCONN, EFAULT);
	if (!ret && (bad || s.flags || s.doorbell > 63))
		FAIL(z, "STATS succeeded with a bad pointer, flags or doorbell");
	return 0;
}

/* A word offset: in the data region mostly, else near its edges, or any. */
static uint64_t word_offset(struct fz *z)
{
	switch (below(&z->seed, 4)) {
	case 0: case 1: return KNITK_PAGE_BYTES + 4 * below(&z->seed, 4096);
	case 2: return near(&z->seed, 1ULL << 24, 4);
	default: return rnd(&z->seed);
	}
}

/*
 * KNITK_IOC_WORD_WAIT with a deadline of at most 2 ms (the words are
 * mostly 0, so a wait for 0 sleeps), and KNITK_IOC_WORD_WAKE of any
 * number; either may meet the other's word in another child.
 */
static int op_word(struct fz *z)
{
	int i = slot_pick(z), bad, ret;
	void *p;

	if (chance(&z->seed, 50)) {
		struct knitk_word_wait w = { .offset = word_offset(z) };

		w.expected = chance(&z->seed, 70) ? 0 : (uint32_t)rnd(&z->seed);
		w.deadline_ns = chance(&z->seed, 20) ? below(&z->seed, 2) :
				knitk_now_ns() + below(&z->seed, 2 * KNITK_MS);
		if (chance(&z->seed, 5))
			w.flags = rnd(&z->seed) | 1;
		if (chance(&z->seed, 5))
			w.reserved = rnd(&z->seed) | 1;
		p = arg_ptr(z, &w, sizeof(w), &bad);
		ret = knitk_ioctl(z->fd[i], KNITK_IOC_WORD_WAIT, p);
		EXPECT_IN(z, "WORD_WAIT", ret, EBADF, EINVAL, ENOTCONN, EFAULT,
			  EAGAIN, ETIMEDOUT, EINTR);
		if (!ret && (bad || w.flags || w.reserved))
			FAIL(z, "WORD_WAIT returned 0 with a bad pointer or flags");
		z->ok[OK_WOKEN] += !ret;
		z->ok[OK_TIMEDOUT] += ret == -ETIMEDOUT;
	} else {
		struct knitk_word_wake k = { .offset = word_offset(z) };

		k.nr = chance(&z->seed, 80) ? 1 + below(&z->seed, 3) :
					      (uint32_t)rnd(&z->seed);
		if (chance(&z->seed, 5))
			k.flags = rnd(&z->seed) | 1;
		if (chance(&z->seed, 5))
			k.reserved = rnd(&z->seed) | 1;
		p = arg_ptr(z, &k, sizeof(k), &bad);
		ret = knitk_ioctl(z->fd[i], KNITK_IOC_WORD_WAKE, p);
		EXPECT_IN(z, "WORD_WAKE", ret, EBADF, EINVAL, ENOTCONN, EFAULT);
		if (!ret && (bad || k.flags || k.reserved || !k.nr))
			FAIL(z, "WORD_WAKE succeeded with a bad pointer, flags or nr");
		if (!ret && k.woken > k.nr)
			FAIL(z, "WORD_WAKE woke %u of at most %u", k.woken, k.nr);
	}
	return 0;
}

/* Commands next to the real ones: other sizes, directions, numbers. */
static int op_badioctl(struct fz *z)
{
	static const unsigned long real[] = {
		KNITK_IOC_API, KNITK_IOC_CREATE, KNITK_IOC_ATTACH, KNITK_IOC_JOIN,
		KNITK_IOC_WAIT, KNITK_IOC_NOTIFY, KNITK_IOC_STATS,
		KNITK_IOC_NOTIFY_WAIT, KNITK_IOC_WORD_WAIT, KNITK_IOC_WORD_WAKE,
	};
	unsigned long cmd;
	unsigned int k;
	char buf[512] = { 0 };
	int ret, i = slot_pick(z);

	cmd = _IOC(below(&z->seed, 4), chance(&z->seed, 80) ? KNITK_IOC_MAGIC :
		   (unsigned int)below(&z->seed, 256), below(&z->seed, 16),
		   below(&z->seed, sizeof(buf)));
	for (k = 0; k < sizeof(real) / sizeof(real[0]); k++)
		if (cmd == real[k])
			return 0;
	/* KNITK_IOC_STATS is real at any size from its first version. */
	if (_IOC_TYPE(cmd) == KNITK_IOC_MAGIC &&
	    _IOC_NR(cmd) == _IOC_NR(KNITK_IOC_STATS) &&
	    _IOC_DIR(cmd) == (_IOC_READ | _IOC_WRITE) &&
	    _IOC_SIZE(cmd) >= KNITK_STATS_SIZE_VER0)
		return 0;
	ret = knitk_ioctl(z->fd[i], cmd, buf);
	if (z->fd[i] >= 0 && ret != -ENOTTY)
		FAIL(z, "ioctl %#lx: %d, not -ENOTTY", cmd, ret);
	return 0;
}

static struct map *map_free(struct fz *z)
{
	int m;

	for (m = 0; m < NR_MAPS; m++)
		if (!z->map[m].addr)
			return &z->map[m];
	return NULL;
}

static struct map *map_pick(struct fz *z)
{
	struct map *m = &z->map[below(&z->seed, NR_MAPS)];

	return m->addr ? m : NULL;
}

static int op_mmap(struct fz *z)
{
	int i = slot_pick(z), prot, flags, kind = (int)below(&z->seed, 8);
	struct ep *e = z->ep[i];
	struct map *m = map_free(z);
	size_t len;
	off_t off;
	void *a;

	if (!m || z->fd[i] < 0 || !e)
		return 0;
	/* Without a known layout, a page: the control page's size. */
	len = e->attached ? e->layout.control_size : KNITK_PAGE_BYTES;
	off = 0;
	prot = PROT_READ;
	flags = MAP_SHARED;
	switch (kind) {
	case 0: case 1:		/* the control page, read-only */
		break;
	case 2: case 3:		/* the data region */
		if (!e->attached)
			return 0;
		off = e->layout.control_size;
		len = e->layout.size - off;
		prot |= PROT_WRITE;
		break;
	case 4:			/* the control page writable */
		prot |= PROT_WRITE;
		break;
	case 5:			/* private */
		flags = MAP_PRIVATE;
		prot |= chance(&z->seed, 50) ? PROT_WRITE : 0;
		break;
	default:		/* wrong sizes and offsets */
		len = near(&z->seed, len, KNITK_PAGE_BYTES) & ((1ULL << 30) - 1);
		off = (off_t)(near(&z->seed, e->attached ? e->layout.size : 0,
				   KNITK_PAGE_BYTES) & ((1ULL << 40) - 1) & ~4095ULL);
		prot |= chance(&z->seed, 50) ? PROT_WRITE : 0;
	}
	if (!len)
		return 0;
	/* The kernel maps whole pages. */
	len = (len + KNITK_PAGE_BYTES - 1) & ~(size_t)(KNITK_PAGE_BYTES - 1);
	a = mmap(NULL, len, prot, flags, z->fd[i], off);
	if (a == MAP_FAILED) {
		EXPECT_IN(z, "mmap", -errno, EINVAL, EPERM, ENOTCONN, ENOMEM,
			  EACCES, EOVERFLOW);
		if (e->attached && kind <= 3)
			FAIL(z, "exact mmap kind %d failed: %d", kind, -errno);
		return 0;
	}
	m->addr = a;
	m->len = len;
	m->ctl = off == 0;
	if (kind == 4 || kind == 5 ||
	    (e->attached && !(off == 0 && len == e->layout.control_size &&
			      !(prot & PROT_WRITE)) &&
	     !(off == (off_t)e->layout.control_size &&
	       len == e->layout.size - off)))
		FAIL(z, "mmap kind %d off %lld len %zu prot %d flags %d succeeded",
		     kind, (long long)off, len, prot, flags);
	if (e->known && !e->attached)
		FAIL(z, "mmap of an unattached endpoint succeeded");
	if (m->ctl && !e->attached) {
		/* An endpoint we got from elsewhere: its page tells its layout. */
		e->attached = 1;
		e->layout = ((const struct knitk_control *)a)->layout;
	}
	m->layout = e->layout;
	z->ok[OK_MMAP]++;
	if (m->ctl)
		return check_ctl(z, m);
	return 0;
}

static void map_drop(struct map *m)
{
	munmap(m->addr, m->len);
	m->addr = NULL;
}

static int op_mprotect(struct fz *z)
{
	struct map *m = map_pick(z);
	int prot = (int)below(&z->seed, 8), ret;

	if (!m)
		return 0;
	ret = mprotect(m->addr, m->len, prot) ? -errno : 0;
	if (m->ctl && (prot & PROT_WRITE)) {
		if (!ret)
			FAIL(z, "control page made writable by mprotect");
		EXPECT_IN(z, "mprotect control page", ret, EACCES);
	} else {
		EXPECT_IN(z, "mprotect", ret, EACCES, ENOMEM);
	}
	if (!ret && !(prot & PROT_READ))
		mprotect(m->addr, m->len, m->ctl ? PROT_READ : PROT_READ | PROT_WRITE);
	else if (!ret && !m->ctl && !(prot & PROT_WRITE))
		mprotect(m->addr, m->len, PROT_READ | PROT_WRITE);
	if (m->ctl)
		return check_ctl(z, m);
	return 0;
}

static int op_mremap(struct fz *z)
{
	struct map *m = map_pick(z);
	size_t nlen;
	void *a;

	if (!m)
		return 0;
	switch (below(&z->seed, 3)) {
	case 0:			/* grow: VM_DONTEXPAND refuses */
		nlen = m->len + KNITK_PAGE_BYTES * (1 + below(&z->seed, 4));
		a = mremap(m->addr, m->len, nlen, MREMAP_MAYMOVE);
		if (a != MAP_FAILED)
			FAIL(z, "mremap grew a knot mapping");
		return 0;
	case 1:			/* shrink */
		if (m->len <= KNITK_PAGE_BYTES)
			return 0;
		nlen = m->len - KNITK_PAGE_BYTES * (1 + below(&z->seed, m->len / 4096 - 1));
		a = mremap(m->addr, m->len, nlen, 0);
		break;
	default:		/* move */
		nlen = m->len;
		a = mremap(m->addr, m->len, nlen, MREMAP_MAYMOVE);
		if (a == m->addr)
			return 0;
	}
	if (a == MAP_FAILED) {
		EXPECT_IN(z, "mremap", -errno, EINVAL, ENOMEM, EFAULT);
		return 0;
	}
	m->addr = a;
	m->len = nlen;
	if (m->ctl) {
		if (!mprotect(a, nlen, PROT_READ | PROT_WRITE))
			FAIL(z, "moved control page made writable");
		return check_ctl(z, m);
	}
	return 0;
}

static int op_munmap(struct fz *z)
{
	struct map *m = map_pick(z);

	if (!m)
		return 0;
	if (m->len > KNITK_PAGE_BYTES && chance(&z->seed, 30)) {
		/* The first page: the rest stays mapped and usable. */
		munmap(m->addr, KNITK_PAGE_BYTES);
		m->addr += KNITK_PAGE_BYTES;
		m->len -= KNITK_PAGE_BYTES;
		m->ctl = 0;
		m->layout.nr_mailboxes = 0;	/* no more doorbells at addr */
		return 0;
	}
	if (chance(&z->seed, 20) && !m->ctl) {
		/* Dropped pages come back on the next touch (the fault). */
		if (madvise(m->addr, m->len, MADV_DONTNEED))
			FAIL(z, "MADV_DONTNEED: %d", -errno);
		return 0;
	}
	if (chance(&z->seed, 10)) {
		madvise(m->addr, m->len, MADV_DOFORK);
		return 0;
	}
	map_drop(m);
	return 0;
}

/* Random words into the shared region: doorbells, sectors, lanes. */
static int op_touch(struct fz *z)
{
	struct map *m = map_pick(z);
	unsigned int k, n = 1 + below(&z->seed, 8);

	if (!m)
		return 0;
	if (m->ctl)
		return check_ctl(z, m);
	for (k = 0; k < n; k++) {
		size_t off = below(&z->seed, m->len / 8) * 8;
		uint64_t v = rnd(&z->seed);

		/* Favour doorbells and the words at the start of each page. */
		if (chance(&z->seed, 50))
			off &= ~(size_t)(KNITK_PAGE_BYTES - 1) | 0x1c0;
		if (chance(&z->seed, 30))
			v = chance(&z->seed, 50) ? 1 : 1ULL << 32;
		__atomic_store_n((uint64_t *)(m->addr + off), v, __ATOMIC_RELAXED);
	}
	return 0;
}

/* ptrace's way in: /proc/self/mem forces writes past PROT_READ. */
static int op_poke(struct fz *z)
{
	struct map *m = map_pick(z);
	uint64_t v = rnd(&z->seed);
	ssize_t n;
	int fd;

	if (!m || !m->ctl)
		return 0;
	fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = pwrite(fd, &v, sizeof(v), (off_t)(uintptr_t)(m->addr + below(&z->seed, 512) * 8));
	close(fd);
	if (n > 0)
		FAIL(z, "/proc/self/mem wrote the control page");
	return check_ctl(z, m);
}

static int op_poll(struct fz *z)
{
	struct pollfd p[NR_SLOTS];
	int i, n;

	for (i = 0; i < NR_SLOTS; i++) {
		p[i].fd = z->fd[i];
		p[i].events = POLLIN | POLLPRI;
		p[i].revents = 0;
	}
	n = poll(p, NR_SLOTS, (int)below(&z->seed, 2));
	if (n < 0 && errno != EINTR)
		FAIL(z, "poll: %d", -errno);
	for (i = 0; i < NR_SLOTS; i++)
		if (z->fd[i] >= 0 && (p[i].revents & POLLNVAL))
			FAIL(z, "poll: POLLNVAL on open fd %d", z->fd[i]);
	return 0;
}

/* SCM_RIGHTS around the ring of processes: send one, take one. */
static int op_pass(struct fz *z)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char byte = 'k';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	int i = slot_pick(z), fd;

	if (z->sock_out < 0)
		return 0;
	if (chance(&z->seed, 50)) {
		if (z->fd[i] < 0)
			return 0;
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &z->fd[i], sizeof(int));
		if (sendmsg(z->sock_out, &msg, MSG_DONTWAIT) == 1) {
			ep_forget(z->ep[i]);	/* the receiver may attach it */
			z->ok[OK_PASSED]++;
		}
		if (chance(&z->seed, 50))
			slot_close(z, i);	/* only in flight, then */
		return 0;
	}
	if (recvmsg(z->sock_in, &msg, MSG_DONTWAIT) != 1)
		return 0;
	cm = CMSG_FIRSTHDR(&msg);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return 0;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	slot_close(z, i);
	z->fd[i] = fd;
	z->ep[i] = ep_new(0);
	return 0;
}

/* struct knitk_notify_wait.woken as the caller left it: nothing written. */
#define WOKEN_UNTOUCHED	0x5eed5eed5eed5eedULL

static int nw_rung(int ret)
{
	return ret == 0 || ret == -EAGAIN || ret == -ETIMEDOUT ||
	       ret == -EINTR || ret == -EPIPE;
}

/* A deadline for a wait that nothing else will end: past, or a few ms. */
static uint64_t short_deadline(uint64_t *s)
{
	switch (below(s, 4)) {
	case 0: return below(s, 2);
	case 1: return rnd(s) >> 40;
	default: return knitk_now_ns() + below(s, 2 * KNITK_MS);
	}
}

/*
 * KNITK_IOC_NOTIFY_WAIT: a ring as op_notify's (no kick), then a wait as
 * op_wait's.  The errors of before the ring leave woken as it was; every
 * return after it writes woken back, a subset of the doorbells asked for.
 */
static int op_notify_wait(struct fz *z)
{
	struct knitk_notify_wait nw = { .woken = WOKEN_UNTOUCHED };
	int i = slot_pick(z), bad, ret, inval;
	struct ep *e = z->ep[i];
	void *p;

	if (chance(&z->seed, 20))
		nw.doorbells = 0;
	else if (chance(&z->seed, 70))
		nw.doorbells = (1ULL << below(&z->seed, 4)) |
			       (chance(&z->seed, 30) ? 1ULL << 63 : 0);
	else
		nw.doorbells = rnd(&z->seed);
	nw.expected = chance(&z->seed, 70) ? seq_guess(z, i) : (uint32_t)rnd(&z->seed);
	nw.deadline_ns = short_deadline(&z->seed);
	if (chance(&z->seed, 10))
		nw.flags = chance(&z->seed, 50) ? KNITK_WAIT_SPIN :
			   (uint32_t)rnd(&z->seed) | 2U << below(&z->seed, 31);
	if (chance(&z->seed, 5))
		nw.reserved[below(&z->seed, 2)] = rnd(&z->seed) | 1;
	inval = (nw.flags & ~KNITK_WAIT_FLAGS) || nw.reserved[0] || nw.reserved[1];
	p = arg_ptr(z, &nw, sizeof(nw), &bad);
	ret = knitk_ioctl(z->fd[i], KNITK_IOC_NOTIFY_WAIT, p);
	if (z->fd[i] < 0) {
		EXPECT_IN(z, "NOTIFY_WAIT on no fd", ret, EBADF);
		return 0;
	}
	EXPECT_IN(z, "NOTIFY_WAIT", ret, EINVAL, ENOTCONN, EFAULT, EAGAIN,
		  ETIMEDOUT, EINTR, EPIPE);
	if (!ret && (bad || inval))
		FAIL(z, "NOTIFY_WAIT returned 0 with a bad pointer or flags");
	if (bad)
		return 0;
	/* Unknown flag bits: -EINVAL on any attached endpoint. */
	if (inval && ret != -EINVAL && !(ret == -ENOTCONN && !(e && e->known && e->attached)))
		FAIL(z, "NOTIFY_WAIT flags %#x reserved %#llx/%#llx: %d, not -EINVAL",
		     nw.flags, (unsigned long long)nw.reserved[0],
		     (unsigned long long)nw.reserved[1], ret);
	if ((ret == -EINVAL || (ret == -ENOTCONN && e && e->known)) &&
	    nw.woken != WOKEN_UNTOUCHED)
		FAIL(z, "NOTIFY_WAIT %d wrote woken %#llx: not rung", ret,
		     (unsigned long long)nw.woken);
	if (nw_rung(ret) && (nw.woken & ~nw.doorbells))
		FAIL(z, "NOTIFY_WAIT %d: woken %#llx of %#llx asked", ret,
		     (unsigned long long)nw.woken, (unsigned long long)nw.doorbells);
	z->ok[OK_NW_RUNG] += nw_rung(ret);
	return 0;
}

/* ------------------------------------------------------- uring_cmd */

/* What an fd given to a uring command is, as far as the fuzzer knows. */
enum { UK_JOINED, UK_NOROLE, UK_MAYBE, UK_OTHER, UK_BADFD, UK_CLOSED };

/* The layer whose check a command fails first, in io_uring's order. */
enum { UL_SQE, UL_FD, UL_CMD, UL_ROLE, UL_PAYLOAD, UL_WAIT, UL_MAYBE };

/* What a command must complete with. */
struct uexp {
	int layer;
	int want, alt;		/* its layer's errors (negative) */
	int stale;		/* expected seq behind the doorbell's: no sleep */
	int raced;		/* its fd was closed or reused in flight */
	int cancelable;		/* a linked timeout or a cancel aimed at it */
	int skip;		/* IOSQE_CQE_SKIP_SUCCESS: no CQE for a 0 */
};

static const int uring_wait_res[] = {
	0, -EAGAIN, -ETIMEDOUT, -EPIPE, -ECANCELED, -ENOTCONN,
};
static const int uring_any_res[] = {
	0, -EAGAIN, -ETIMEDOUT, -EPIPE, -ECANCELED, -ENOTCONN, -EINVAL,
	-ENOTTY, -EBADF, -EOPNOTSUPP,
};

static int res_in(int res, const int *set, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (res == set[i])
			return 1;
	return 0;
}

#define RES_IN(res, set)	res_in(res, set, sizeof(set) / sizeof(set[0]))

static int uring_res_ok(const struct uexp *x, int res)
{
	if (x->layer == UL_SQE)
		return res == x->want || res == x->alt;
	if (x->skip && res == 0)
		return 0;		/* a success posts no CQE */
	if (x->raced)
		return RES_IN(res, uring_any_res);
	if (x->cancelable && res == -ECANCELED)
		return 1;
	switch (x->layer) {
	case UL_WAIT:
		if (x->stale)
			return res == -EAGAIN || res == -EPIPE ||
			       res == -ENOTCONN || res == -ECANCELED;
		return RES_IN(res, uring_wait_res);
	case UL_MAYBE:
		return res == -EINVAL || RES_IN(res, uring_wait_res);
	default:
		return res == x->want || res == x->alt;
	}
}

/* A deadline: past, near, far, or none (@bounded: never far). */
static uint64_t uring_deadline(uint64_t *s, int bounded)
{
	if (bounded)
		return short_deadline(s);
	switch (below(s, 8)) {
	case 0: return 0;
	case 1: return knitk_now_ns() - 1;
	case 2: case 3: return knitk_now_ns() + below(s, 5 * KNITK_MS);
	case 4: return (1ULL << 63) - 1;	/* KTIME_MAX */
	case 5: return chance(s, 50) ? 1ULL << 63 : KNITK_WAIT_FOREVER - 1;
	default: return KNITK_WAIT_FOREVER;
	}
}

/*
 * An IORING_OP_URING_CMD SQE (@sqe128: 128 bytes) on @fd, of kind @kind
 * (UK_*), whose own doorbell is @d: mostly a valid KNITK_URING_CMD_WAIT
 * for @seq, else one fault among the fields io_uring checks (those that
 * must be zero, ioprio, personality, sqe flags), the fd, cmd_op and the
 * payload (flags, reserved, doorbell, the SQE128 tail).  *@x gets the
 * results allowed.  @simple: no IOSQE_* flags, a bounded deadline.
 */
static void uring_gen(uint64_t *s, struct io_uring_sqe *sqe, int sqe128,
		      int fd, int kind, unsigned int d, uint32_t seq,
		      int simple, struct uexp *x)
{
	struct knitk_uring_wait w = { .expected = seq, .doorbell = (__u8)d };
	unsigned int fault = chance(s, 55) ? 0 : 1 + (unsigned int)below(s, 15);
	__u32 cmd_op = KNITK_URING_CMD_WAIT;
	int payload_bad = 0, cmd_res = 0;

	memset(x, 0, sizeof(*x));
	w.deadline_ns = uring_deadline(s, simple);
	if (chance(s, 15)) {
		w.expected = seq - 1 - (uint32_t)below(s, 1000);
		x->stale = 1;
	}
	memset(sqe, 0, sqe128 ? 128 : 64);
	switch (fault) {
	case 1:
		w.flags = chance(s, 50) ? KNITK_WAIT_SPIN : (__u8)(rnd(s) | 1);
		payload_bad = 1;
		break;
	case 2:
		w.reserved = (__u16)(rnd(s) | 1);
		payload_bad = 1;
		break;
	case 3:
		w.doorbell = (__u8)(d + 1 + below(s, 255));
		payload_bad = 1;
		break;
	case 4:			/* the command of another size or direction */
		cmd_op = chance(s, 50) ?
			 _IOC(_IOC_WRITE, KNITK_IOC_MAGIC, 0x20, near(s, 16, 8) & 0x3fff) :
			 _IOC(below(s, 4), KNITK_IOC_MAGIC, 0x20, 16);
		if (cmd_op != KNITK_URING_CMD_WAIT)
			cmd_res = -EINVAL;
		break;
	case 5:			/* not ours: -ENOTTY */
		cmd_op = chance(s, 50) ? (__u32)rnd(s) :
			 _IOC(below(s, 4), chance(s, 50) ? KNITK_IOC_MAGIC : below(s, 256),
			      below(s, 0x40), below(s, 64));
		if (cmd_op == KNITK_URING_CMD_WAIT)
			break;
		cmd_res = _IOC_TYPE(cmd_op) == KNITK_IOC_MAGIC &&
			  _IOC_NR(cmd_op) == 0x20 ? -EINVAL : -ENOTTY;
		break;
	case 6:
		fd = chance(s, 50) ? -1 : (int)(rnd(s) | 0x40000000);
		kind = UK_BADFD;
		break;
	default:
		break;
	}
	memcpy(sqe->cmd, &w, sizeof(w));
	if (fault == 7 && sqe128) {
		sqe->cmd[sizeof(w) + below(s, 64)] = (__u8)(rnd(s) | 1);
		payload_bad = 1;
	}
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fd;
	sqe->cmd_op = cmd_op;
	x->layer = -1;
	switch (fault) {	/* what io_uring itself refuses */
	case 8:
		sqe->__pad1 = (__u32)(rnd(s) | 1);
		x->layer = UL_SQE;
		x->want = x->alt = -EINVAL;
		break;
	case 9:
		sqe->uring_cmd_flags = 1U << below(s, 32);
		x->layer = UL_SQE;
		x->want = x->alt = -EINVAL;
		/* Fixed buffers (none registered): refused, or unknown then. */
		if (sqe->uring_cmd_flags == IORING_URING_CMD_FIXED)
			x->want = -EFAULT;
		break;
	case 10:
		sqe->ioprio = (__u16)(rnd(s) | 1);
		x->layer = UL_SQE;
		x->want = x->alt = -EINVAL;
		break;
	case 11:
		sqe->personality = (__u16)(rnd(s) | 1);	/* none registered */
		x->layer = UL_SQE;
		x->want = x->alt = -EINVAL;
		break;
	case 12:
		/* Never a link flag: a refused head would hold the next SQE. */
		sqe->flags = chance(s, 50) ? IOSQE_BUFFER_SELECT :
			     (__u8)((0x80 | rnd(s)) & ~(IOSQE_IO_LINK | IOSQE_IO_HARDLINK));
		x->layer = UL_SQE;
		x->want = -EINVAL;
		x->alt = sqe->flags == IOSQE_BUFFER_SELECT ? -EOPNOTSUPP : -EINVAL;
		break;
	case 13:		/* fields URING_CMD does not read: no effect */
		sqe->addr = rnd(s);
		sqe->len = (__u32)rnd(s);
		sqe->splice_fd_in = (__s32)rnd(s);
		break;
	default:
		break;
	}
	if (!simple && x->layer < 0) {
		if (chance(s, 10))
			sqe->flags |= IOSQE_ASYNC;
		if (chance(s, 4)) {
			sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
			x->skip = 1;
		}
	}
	if (x->layer >= 0)
		return;
	if (kind == UK_BADFD || kind == UK_CLOSED) {
		x->layer = UL_FD;
		x->want = -EBADF;
		/* A closed number may be a new ring's fd by now. */
		x->alt = kind == UK_CLOSED ? -EOPNOTSUPP : -EBADF;
	} else if (kind == UK_OTHER) {
		x->layer = UL_FD;
		x->want = x->alt = -EOPNOTSUPP;
	} else if (cmd_res) {
		x->layer = UL_CMD;
		x->want = x->alt = cmd_res;
	} else if (kind == UK_NOROLE) {
		x->layer = UL_ROLE;
		x->want = x->alt = -ENOTCONN;
	} else if (kind == UK_MAYBE) {
		x->layer = UL_MAYBE;
	} else if (payload_bad) {
		x->layer = UL_PAYLOAD;
		x->want = x->alt = -EINVAL;
	} else {
		x->layer = UL_WAIT;
	}
}

static int uring_setup(struct io_uring *ring, unsigned int entries,
		       unsigned int flags)
{
	struct io_uring_params p = { .flags = flags | IORING_SETUP_SUBMIT_ALL,
				     .sq_thread_idle = 2 };

	if (!io_uring_queue_init_params(entries, ring, &p))
		return 0;
	memset(&p, 0, sizeof(p));
	p.flags = flags;
	p.sq_thread_idle = 2;
	return io_uring_queue_init_params(entries, ring, &p);
}

/*
 * A uring_cmd on a slot's endpoint (or a bad or foreign fd) amid the other
 * operations: bounded deadlines, completed before the next operation.
 */
static int op_uring(struct fz *z)
{
	static const unsigned int dbs[] = { 0, 1, 2, KNITK_DOORBELL_HOST };
	struct io_uring_sqe *sqe;
	int i = slot_pick(z), fd = z->fd[i], kind, res;
	unsigned int d;
	struct uexp x;

	if (!z->ring) {
		z->ring = calloc(1, sizeof(*z->ring));
		if (!z->ring)
			return 0;
		if (uring_setup(z->ring, 8, chance(&z->seed, 30) ? IORING_SETUP_SQE128 : 0)) {
			free(z->ring);
			z->ring = NULL;
			FAIL(z, "io_uring_queue_init failed");
		}
	}
	kind = fd < 0 ? UK_BADFD : UK_MAYBE;
	if (chance(&z->seed, 10)) {
		fd = z->ring->ring_fd;	/* io_uring's own: no uring_cmd */
		kind = UK_OTHER;
	}
	d = chance(&z->seed, 90) ? dbs[below(&z->seed, 4)] : (unsigned int)below(&z->seed, 256);
	sqe = io_uring_get_sqe(z->ring);
	if (!sqe)
		FAIL(z, "no SQE free");
	uring_gen(&z->seed, sqe, !!(z->ring->flags & IORING_SETUP_SQE128), fd,
		  kind, d, seq_guess(z, i), 1, &x);
	if (io_uring_submit(z->ring) != 1)
		FAIL(z, "io_uring_submit failed");
	res = next_res(z->ring, NULL);
	if (res == -ETIME)
		FAIL(z, "uring_cmd: no completion in %d s", HANG_GUARD_S);
	if (!uring_res_ok(&x, res))
		FAIL(z, "uring_cmd (layer %d, op %#x, flags %#x, fd %d): %d (%s)",
		     x.layer, sqe->cmd_op, sqe->flags, fd, res, strerror(-res));
	z->ok[OK_URING_WAITED] += (x.layer == UL_WAIT || x.layer == UL_MAYBE) &&
				  (res == 0 || res == -ETIMEDOUT || res == -EAGAIN);
	return 0;
}

static int fuzz_run(struct fz *z, unsigned long ops);

/* A child that inherits everything, runs a few operations and exits. */
static int op_fork(struct fz *z)
{
	struct fz child;
	int st, kill_it = chance(&z->seed, 40);
	pid_t pid;

	child = *z;
	child.seed = child.stream = rnd(&z->seed);
	child.op = 0;
	pid = fork();
	if (pid < 0)
		return 0;
	if (!pid) {
		int i;

		/* Our own records of the shared endpoints: not known any more. */
		for (i = 0; i < NR_SLOTS; i++)
			child.ep[i] = child.fd[i] >= 0 ? ep_new(0) : NULL;
		child.procs = 0;	/* no grandchildren, no ring */
		child.ring = NULL;	/* the parent's: a ring of its own */
		child.sock_out = child.sock_in = -1;
		/* Mappings are not inherited (VM_DONTCOPY) unless MADV_DOFORK. */
		memset(child.map, 0, sizeof(child.map));
		_exit(fuzz_run(&child, 30) ? 1 : 0);
	}
	/* The child may have attached any endpoint it shares with us. */
	for (st = 0; st < NR_SLOTS; st++)
		ep_forget(z->ep[st]);
	if (kill_it) {
		usleep(below(&z->seed, 2000));
		kill(pid, SIGKILL);
	}
	if (waitpid(pid, &st, 0) != pid)
		FAIL(z, "waitpid: %d", -errno);
	if (WIFEXITED(st) && WEXITSTATUS(st))
		FAIL(z, "forked child failed (its ops above)");
	if (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL)
		FAIL(z, "forked child died of signal %d", WTERMSIG(st));
	z->ok[OK_FORK]++;
	return 0;
}

static int (*const ops[])(struct fz *) = {
	op_open, op_open, op_open, op_open, op_dup, op_api,
	op_create, op_create, op_create, op_create, op_create, op_create,
	op_attach, op_attach, op_attach, op_join, op_join, op_join, op_join,
	op_wait, op_wait, op_wait, op_notify, op_notify, op_notify, op_stats,
	op_badioctl, op_mmap, op_mmap, op_mmap, op_mmap, op_mprotect,
	op_mremap, op_munmap, op_munmap, op_touch, op_touch, op_touch,
	op_poke, op_poll, op_poll, op_pass, op_pass, op_pass,
	op_notify_wait, op_notify_wait, op_notify_wait, op_uring, op_uring,
	op_uring, op_word, op_word,
};
#define NR_OPS	(sizeof(ops) / sizeof(ops[0]))

static void fuzz_init(struct fz *z, uint64_t seed, int procs)
{
	memset(z, 0, sizeof(*z));
	z->seed = z->stream = seed;
	z->procs = procs;
	z->sock_out = z->sock_in = -1;
	memset(z->fd, -1, sizeof(z->fd));
	z->ro_page = mmap(NULL, KNITK_PAGE_BYTES, PROT_READ,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	z->hole = mmap(NULL, KNITK_PAGE_BYTES, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static void fuzz_fini(struct fz *z, const char *name)
{
	int i;

	printf("# %s: %lu ops:", name, z->op);
	for (i = 0; i < NR_OKS; i++)
		printf(" %lu %s%s", z->ok[i], ok_names[i], i + 1 < NR_OKS ? "," : "\n");

	for (i = 0; i < NR_SLOTS; i++)
		slot_close(z, i);
	for (i = 0; i < NR_MAPS; i++)
		if (z->map[i].addr)
			map_drop(&z->map[i]);
	if (z->ring) {
		io_uring_queue_exit(z->ring);
		free(z->ring);
		z->ring = NULL;
	}
}

static int fuzz_run(struct fz *z, unsigned long n)
{
	unsigned long end = z->op + n;

	while (z->op < end) {
		uint64_t k = below(&z->seed, NR_OPS + (z->procs ? 1 : 0));

		z->op++;
		if (k == NR_OPS) {
			/* 1 in NR_OPS + 1: rarer with the seeds' help below. */
			if (chance(&z->seed, 10) && op_fork(z))
				return -1;
			continue;
		}
		if (ops[k](z))
			return -1;
	}
	return 0;
}

/* Run @body in a child (so every fd and mapping goes with it), then leaks. */
static void in_child(struct __test_metadata *_metadata, int (*body)(void))
{
	pid_t pid = fork();
	int st;

	ASSERT_LE(0, pid);
	if (!pid)
		_exit(body() ? 1 : 0);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	/* Every knot the child made is freed once it is gone. */
	ASSERT_EQ(0, knitk_live_wait_zero());
}

FIXTURE(fuzz) {
	unsigned long long cap;
};

FIXTURE_SETUP(fuzz)
{
	const char *v;
	long long knots, bytes;

	KNITK_REQUIRE_DEV();
	v = getenv("KNITK_FUZZ_SEED");
	if (v) {
		char *end;

		nr_seeds = 0;
		do {
			seeds[nr_seeds++] = strtoull(v, &end, 0);
			ASSERT_NE(v, end);
			v = end + 1;
		} while (*end == ',' && nr_seeds < MAX_SEEDS);
		ASSERT_EQ('\0', *end);
	}
	v = getenv("KNITK_FUZZ_OPS");
	if (v)
		fuzz_ops = strtoul(v, NULL, 0);
	ASSERT_EQ(0, knitk_live_read(&knots, &bytes));
	ASSERT_EQ(0, knitk_sysfs_read(MAX_KNOT_BYTES, &self->cap));
	ASSERT_EQ(0, knitk_sysfs_write(MAX_KNOT_BYTES, FUZZ_CAP));
}

FIXTURE_TEARDOWN(fuzz)
{
	knitk_sysfs_write(MAX_KNOT_BYTES, self->cap);
}

static int ioctls_body(void)
{
	struct fz z;
	int ret;

	fuzz_init(&z, fuzz_seed, 1);
	ret = fuzz_run(&z, fuzz_ops);
	fuzz_fini(&z, "ioctls");
	return ret;
}

/* Runs @body in a child once per seed. */
static void per_seed(struct __test_metadata *_metadata, int (*body)(void))
{
	unsigned int i;

	for (i = 0; i < nr_seeds; i++) {
		fuzz_seed = seeds[i];
		TH_LOG("seed %#llx, %lu ops: replay with KNITK_FUZZ_SEED=%#llx",
		       (unsigned long long)fuzz_seed, fuzz_ops,
		       (unsigned long long)fuzz_seed);
		in_child(_metadata, body);
		if (!_metadata->passed)
			return;
	}
}

TEST_F_TIMEOUT(fuzz, ioctls, 1800 * MAX_SEEDS)
{
	per_seed(_metadata, ioctls_body);
}

/*
 * NR_PROCS processes in a ring of Unix sockets, started with two shared
 * knots each; the parent SIGKILLs one now and then and starts another in
 * its place, with the next seed.
 */
static int procs_body(void)
{
	int ring[NR_PROCS][2], base[2] = { -1, -1 }, failed = 0;
	unsigned long per = fuzz_ops / 2 / (NR_PROCS * 2), kills = 0, runs = 0;
	uint64_t seed = rnd(&(uint64_t){ fuzz_seed ^ 0x70726f63 });
	pid_t pid[NR_PROCS];
	struct knitk_geometry g;
	int i, st, live = 0;

	knitk_geom_small(&g);
	for (i = 0; i < 2; i++) {
		base[i] = knitk_open();
		if (base[i] < 0 || knitk_create(base[i], &g, NULL))
			return -1;
	}
	for (i = 0; i < NR_PROCS; i++)
		if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, ring[i]))
			return -1;
	/* Process i sends on ring[i][0] and reads ring[i - 1][1]. */
	for (;;) {
		pid_t p;

		for (i = 0; i < NR_PROCS && runs < NR_PROCS * 2; i++) {
			struct fz z;

			if (live & (1 << i))
				continue;
			seed = rnd(&seed);
			runs++;
			p = fork();
			if (p < 0) {
				failed = 1;
				break;
			}
			if (!p) {
				fuzz_init(&z, seed, 1);
				z.fd[0] = base[0];
				z.fd[1] = base[1];
				z.ep[0] = ep_new(0);
				z.ep[1] = ep_new(0);
				z.sock_out = ring[i][0];
				z.sock_in = ring[(i + NR_PROCS - 1) % NR_PROCS][1];
				st = fuzz_run(&z, per);
				fuzz_fini(&z, "procs");
				_exit(st ? 1 : 0);
			}
			pid[i] = p;
			live |= 1 << i;
		}
		if (!live)
			break;
		if (kills < NR_PROCS * 2 && rnd(&seed) % 2) {
			usleep(rnd(&seed) % 20000);
			i = (int)(rnd(&seed) % NR_PROCS);
			if (live & (1 << i)) {
				kill(pid[i], SIGKILL);
				kills++;
			}
		}
		p = waitpid(-1, &st, 0);
		if (p < 0)
			break;
		for (i = 0; i < NR_PROCS; i++)
			if ((live & (1 << i)) && pid[i] == p)
				live &= ~(1 << i);
		if ((WIFEXITED(st) && WEXITSTATUS(st)) ||
		    (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL))
			failed = 1;
	}
	printf("# procs: %lu runs of up to %lu ops, %lu SIGKILLed\n", runs, per, kills);
	for (i = 0; i < NR_PROCS; i++) {
		close(ring[i][0]);
		close(ring[i][1]);
	}
	close(base[0]);
	close(base[1]);
	return failed;
}

TEST_F_TIMEOUT(fuzz, procs, 1800 * MAX_SEEDS)
{
	per_seed(_metadata, procs_body);
}

/* ------------------------------------------------------------ threads */

struct race {
	int host;			/* the host's fd, joined; closed sometimes */
	struct knot k;			/* the host's knot and mapping */
	int ep;				/* the raced endpoint's fd number */
	_Atomic int stop;
	_Atomic unsigned long ops, bad;
	pthread_t waiters[2];
};

/* One racing thread: its own generator, seeded by the round. */
struct racer {
	struct race *r;
	uint64_t s;
};

static void race_bad(struct race *r, const char *what, int ret)
{
	printf("# threads: %s: unexpected %d (%s)\n", what, ret, strerror(-ret));
	atomic_fetch_add(&r->bad, 1);
}

static void on_usr1(int sig)
{
	(void)sig;
}

/* Two of these race to join worker 0, 1 (or the missing 2) on one fd. */
static void *race_joiner(void *arg)
{
	struct racer *x = arg;
	struct race *r = x->r;
	int ret;

	while (!atomic_load(&r->stop)) {
		ret = knitk_join(r->ep, KNITK_ROLE_WORKER, below(&x->s, 3), NULL);
		if (!allowed(ret, (int[]){ EBUSY, EINVAL, EBADF }, 3))
			race_bad(r, "JOIN", ret);
		atomic_fetch_add(&r->ops, 1);
		usleep(below(&x->s, 1000));
	}
	return NULL;
}

static void *race_waiter(void *arg)
{
	struct racer *x = arg;
	struct race *r = x->r;
	struct pollfd p;
	int ret;

	while (!atomic_load(&r->stop)) {
		if (chance(&x->s, 70)) {
			/*
			 * Some without a deadline: the close at the end of
			 * the round ends the role, and must end them too.
			 */
			ret = knitk_wait(r->ep, (uint32_t)below(&x->s, 3),
					 chance(&x->s, 20) ? KNITK_WAIT_FOREVER :
					 knitk_now_ns() + below(&x->s, 20 * KNITK_MS));
			if (!allowed(ret, (int[]){ EAGAIN, ETIMEDOUT, EINTR, ENOTCONN,
						   EPIPE, EBADF }, 6))
				race_bad(r, "WAIT", ret);
		} else {
			p.fd = r->ep;
			p.events = POLLIN | POLLPRI;
			ret = poll(&p, 1, (int)below(&x->s, 20));
			if (ret < 0 && errno != EINTR)
				race_bad(r, "poll", -errno);
		}
		atomic_fetch_add(&r->ops, 1);
	}
	return NULL;
}

static void *race_notifier(void *arg)
{
	struct racer *x = arg;
	struct race *r = x->r;
	int ret;

	while (!atomic_load(&r->stop)) {
		/* Work for worker 0 or 1 now and then: mailbox (0, w). */
		if (chance(&x->s, 30))
			knot_lane_publish(knot_mailbox(&r->k, below(&x->s, 2)),
					  below(&x->s, 64));
		ret = chance(&x->s, 50) ? knitk_notify(r->host, below(&x->s, 4), NULL)
					: knitk_kick(r->host, below(&x->s, 4), NULL);
		if (!allowed(ret, (int[]){ EBADF }, 1))
			race_bad(r, "NOTIFY", ret);
		atomic_fetch_add(&r->ops, 1);
		usleep(below(&x->s, 500));
	}
	return NULL;
}

static void *race_signaller(void *arg)
{
	struct racer *x = arg;
	struct race *r = x->r;

	while (!atomic_load(&r->stop)) {
		pthread_kill(r->waiters[below(&x->s, 2)], SIGUSR1);
		atomic_fetch_add(&r->ops, 1);
		usleep(below(&x->s, 2000));
	}
	return NULL;
}

static int threads_body(void)
{
	static void *(*const fn[])(void *) = {
		race_waiter, race_waiter, race_joiner, race_joiner,
		race_notifier, race_signaller,
	};
	struct sigaction sa = { .sa_handler = on_usr1 };	/* no SA_RESTART */
	unsigned long target = fuzz_ops / 2, rounds = 0, host_closes = 0;
	unsigned long min_rounds = fuzz_ops / 400 > 20 ? fuzz_ops / 400 : 20;
	uint64_t seed = fuzz_seed ^ 0x74687265;
	struct racer x[6];
	struct knitk_geometry g;
	struct race r = { 0 };
	pthread_t th[6];
	int t, fresh = 1;

	sigaction(SIGUSR1, &sa, NULL);
	knitk_geom_small(&g);
	while ((atomic_load(&r.ops) < target || rounds < min_rounds) &&
	       !atomic_load(&r.bad)) {
		if (fresh) {
			if (knot_make(&r.k, &g) ||
			    knitk_join(r.k.fd, KNITK_ROLE_HOST, 0, NULL))
				return -1;
			r.host = r.k.fd;
			fresh = 0;
		}
		r.ep = knitk_open();
		if (r.ep < 0 || knitk_attach(r.ep, r.host, NULL))
			return -1;
		atomic_store(&r.stop, 0);
		for (t = 0; t < 6; t++) {
			x[t].r = &r;
			x[t].s = rnd(&seed);
			pthread_create(&th[t], NULL, fn[t], &x[t]);
			if (t < 2)
				r.waiters[t] = th[t];
		}
		usleep(below(&seed, 30000));
		/* The closes land in the middle of the joins, waits and polls. */
		if (chance(&seed, 25)) {
			close(r.host);		/* the host goes: -EPIPE */
			host_closes++;
			fresh = 1;
		}
		close(r.ep);
		usleep(below(&seed, 10000));
		atomic_store(&r.stop, 1);
		for (t = 0; t < 6; t++)
			pthread_join(th[t], NULL);
		if (fresh) {
			r.k.fd = -1;
			knot_close(&r.k);
		}
		rounds++;
	}
	if (!fresh)
		knot_close(&r.k);
	printf("# threads: %lu ops in %lu rounds, %lu hosts closed, %lu unexpected\n",
	       atomic_load(&r.ops), rounds, host_closes, atomic_load(&r.bad));
	return atomic_load(&r.bad) ? -1 : 0;
}

TEST_F_TIMEOUT(fuzz, threads, 1800 * MAX_SEEDS)
{
	per_seed(_metadata, threads_body);
}

/* ------------------------------------------------------------ uring */

/*
 * Endpoints of a uring round: the host, workers 0 and 1, an attached
 * endpoint without a role, a bare one, and a pipe (no uring_cmd).
 */
enum { UE_HOST, UE_W0, UE_W1, UE_NOROLE, UE_BARE, UE_PIPE, NR_UE };
#define NR_UREC		32
#define UREC_MAX_LIVE	20
#define UD_TIMEOUT	(1ULL << 32)	/* user_data of a linked timeout */
#define UD_CANCEL	(2ULL << 32)	/* of an async cancel */

struct urec {
	int live;
	int ep;			/* UE_*, or -1 */
	unsigned long op;
	struct uexp x;
};

struct uround {
	struct knot k;		/* k.fd is fd[UE_HOST] */
	int fd[NR_UE];		/* -1 once closed */
	int was[NR_UE];		/* the number it had */
	int kfd;		/* the kicker's attached endpoint */
	int pipe_w;
	struct io_uring ring;
	int ring_up, sqe128, registered;
	int reg_fd[NR_UE];	/* the files table, as registered */
	struct urec rec[NR_UREC];
	int nr_live, nr_extra;	/* commands, and timeouts and cancels */
	_Atomic int stop;
	uint64_t kick_seed;
	unsigned long op, res[8], lost, children;
};

static const int ures_errs[8] = { 0, -EAGAIN, -ETIMEDOUT, -EPIPE, -ECANCELED,
				  -ENOTCONN, -EINVAL, 1 };
static const char *const ures_names[8] = { "0", "EAGAIN", "ETIMEDOUT", "EPIPE",
					   "ECANCELED", "ENOTCONN", "EINVAL",
					   "others" };

#define UFAIL(u, fmt, ...) do {						\
	printf("# KNITK_FUZZ_SEED=%#llx, uring op %lu: " fmt "\n",	\
	       (unsigned long long)fuzz_seed, (u)->op, ##__VA_ARGS__);	\
	return -1;							\
} while (0)

/* Kicks and notifies on every doorbell of the round, through kfd. */
static void *uround_kicker(void *arg)
{
	struct uround *u = arg;
	static const __u64 bits[] = { 1, 2, 3, 1ULL << 63, (1ULL << 63) | 3 };
	uint64_t s = u->kick_seed;
	int ret;

	while (!atomic_load(&u->stop)) {
		__u64 b = bits[below(&s, 5)];

		ret = chance(&s, 60) ? knitk_kick(u->kfd, b, NULL)
				     : knitk_notify(u->kfd, b, NULL);
		if (ret) {
			printf("# uring: kick of %#llx: %d\n", (unsigned long long)b, ret);
			atomic_store(&u->stop, 2);
		}
		usleep(below(&s, 4000));
	}
	return NULL;
}

static int ukind(const struct uround *u, int e)
{
	if (u->fd[e] < 0)
		return UK_CLOSED;
	switch (e) {
	case UE_HOST: case UE_W0: case UE_W1: return UK_JOINED;
	case UE_PIPE: return UK_OTHER;
	default: return UK_NOROLE;
	}
}

static unsigned int udoorbell(int e)
{
	return e == UE_W0 ? 0 : e == UE_W1 ? 1 : KNITK_DOORBELL_HOST;
}

static int urec_check(struct uround *u, struct io_uring_cqe *cqe)
{
	__u64 ud = cqe->user_data;
	struct urec *r;
	int res = cqe->res, k;

	if (ud & (UD_TIMEOUT | UD_CANCEL)) {
		u->nr_extra--;
		if (ud & UD_TIMEOUT ? !(res == -ETIME || res == -ECANCELED ||
					res == -EALREADY || res == -ENOENT)
				    : !(res == 0 || res == -ENOENT || res == -EALREADY))
			UFAIL(u, "%s: %d (%s)", ud & UD_TIMEOUT ? "linked timeout" :
			      "async cancel", res, strerror(-res));
		return 0;
	}
	if (ud >= NR_UREC || !u->rec[ud].live)
		UFAIL(u, "a CQE for user_data %#llx, not in flight",
		      (unsigned long long)ud);
	r = &u->rec[ud];
	if (!uring_res_ok(&r->x, res))
		UFAIL(u, "uring_cmd of op %lu (layer %d, ep %d%s%s%s): %d (%s)",
		      r->op, r->x.layer, r->ep, r->x.stale ? ", stale" : "",
		      r->x.raced ? ", raced" : "", r->x.skip ? ", skip" : "",
		      res, strerror(-res));
	for (k = 0; k < 7 && ures_errs[k] != res; k++)
		;
	u->res[k]++;
	r->live = 0;
	if (!r->x.skip)
		u->nr_live--;
	return 0;
}

/* Every CQE there is; with @wait, until no command is left in flight. */
static int ureap(struct uround *u, int wait)
{
	struct __kernel_timespec ts = { .tv_sec = HANG_GUARD_S };
	struct io_uring_cqe *cqe;
	int ret;

	for (;;) {
		if (wait && (u->nr_live || u->nr_extra))
			ret = io_uring_wait_cqe_timeout(&u->ring, &cqe, &ts);
		else
			ret = io_uring_peek_cqe(&u->ring, &cqe);
		if (ret == -EAGAIN)
			return 0;
		if (ret == -EINTR)
			continue;
		if (ret == -ETIME)
			UFAIL(u, "%d commands and %d timeouts or cancels not completed in %d s",
			      u->nr_live, u->nr_extra, HANG_GUARD_S);
		if (ret)
			UFAIL(u, "reaping: %d", ret);
		ret = urec_check(u, cqe);
		io_uring_cqe_seen(&u->ring, cqe);
		if (ret)
			return ret;
	}
}

static int uring_open(struct uround *u, uint64_t *s)
{
	static const unsigned int kinds[] = { 0, 0, IORING_SETUP_SQE128,
					      IORING_SETUP_SQPOLL };
	unsigned int f = kinds[below(s, 4)];

	if (uring_setup(&u->ring, 32, f) && (!f || uring_setup(&u->ring, 32, 0)))
		UFAIL(u, "io_uring_queue_init");
	u->ring_up = 1;
	u->sqe128 = !!(u->ring.flags & IORING_SETUP_SQE128);
	u->registered = 0;
	memset(u->rec, 0, sizeof(u->rec));
	u->nr_live = u->nr_extra = 0;
	return 0;
}

/* The ring goes with its commands in flight: none may hold anything. */
static void uring_drop(struct uround *u)
{
	if (u->ring_up)
		io_uring_queue_exit(&u->ring);
	u->ring_up = 0;
}

static void uround_close(struct uround *u, int e)
{
	int i;

	if (u->fd[e] < 0)
		return;
	if (e == UE_HOST)
		u->k.fd = -1;
	close(u->fd[e]);
	u->fd[e] = -1;
	/* Its commands in flight may now find anything there. */
	for (i = 0; i < NR_UREC; i++)
		if (u->rec[i].live && u->rec[i].ep == e)
			u->rec[i].x.raced = 1;
}

/*
 * io_uring_submit() gave @ret for @n new SQEs: all of them, or with SQPOLL
 * every SQE its thread has not taken yet (the earlier ones too).
 */
static int usubmitted(const struct uround *u, int ret, int n)
{
	return u->ring.flags & IORING_SETUP_SQPOLL ? ret >= n : ret == n;
}

static int usubmit(struct uround *u, uint64_t *s)
{
	struct io_uring_sqe *sqe;
	int e = (int)below(s, NR_UE), fd, kind, slot, n = 1, ret, fixed = 0;
	struct __kernel_timespec ts = { .tv_nsec = (long)below(s, 3 * KNITK_MS) };
	struct urec *r = NULL;
	uint32_t seq;

	/* Room for the command and its timeout (SQPOLL's thread may lag). */
	if (u->nr_live >= UREC_MAX_LIVE || io_uring_sq_space_left(&u->ring) < 2)
		return 0;
	for (slot = 0; slot < NR_UREC; slot++)
		if (!u->rec[slot].live) {
			r = &u->rec[slot];
			break;
		}
	if (!r)
		return 0;
	fd = u->fd[e] >= 0 ? u->fd[e] : u->was[e];
	kind = ukind(u, e);
	if (u->registered && chance(s, 40)) {
		/* The registered file: it outlives the fd's close. */
		fixed = chance(s, 10) ? -1 : 1;
		if (u->reg_fd[e] < 0)
			kind = UK_BADFD;
		else if (kind == UK_CLOSED)
			kind = e == UE_PIPE ? UK_OTHER : UK_NOROLE;
	}
	seq = u->k.data ? knitk_doorbell_seq(knot_doorbell(&u->k, udoorbell(e)))
			: (uint32_t)rnd(s);
	sqe = io_uring_get_sqe(&u->ring);
	if (!sqe)
		UFAIL(u, "no SQE free");
	memset(r, 0, sizeof(*r));
	uring_gen(s, sqe, u->sqe128, fd, kind, udoorbell(e), seq, 0, &r->x);
	r->ep = sqe->fd == fd ? e : -1;
	if (fixed && sqe->fd == fd) {
		sqe->flags |= IOSQE_FIXED_FILE;
		sqe->fd = e;
		if (fixed < 0) {	/* past the table */
			sqe->fd = NR_UE + (int)below(s, 100);
			if (r->x.layer >= UL_FD) {	/* no file: any fd's errors */
				r->x.layer = UL_FD;
				r->x.want = r->x.alt = -EBADF;
			}
		}
	}
	r->live = 1;
	r->op = u->op;
	sqe->user_data = (__u64)slot;
	if (!r->x.skip)
		u->nr_live++;
	if (chance(s, 12) && r->x.layer != UL_SQE) {
		sqe->flags |= IOSQE_IO_LINK;
		r->x.cancelable = 1;
		sqe = io_uring_get_sqe(&u->ring);
		if (!sqe)
			UFAIL(u, "no SQE free for the timeout");
		io_uring_prep_link_timeout(sqe, &ts, 0);
		sqe->user_data = UD_TIMEOUT | slot;
		u->nr_extra++;
		n++;
	}
	ret = io_uring_submit(&u->ring);
	if (!usubmitted(u, ret, n))
		UFAIL(u, "io_uring_submit: %d of %d", ret, n);
	return 0;
}

static int ucancel(struct uround *u, uint64_t *s)
{
	struct urec *r = &u->rec[below(s, NR_UREC)];
	struct io_uring_sqe *sqe;

	if (!r->live || r->x.layer == UL_SQE)
		return 0;
	sqe = io_uring_get_sqe(&u->ring);
	if (!sqe)
		return 0;
	io_uring_prep_cancel64(sqe, (__u64)(r - u->rec), 0);
	sqe->user_data = UD_CANCEL;
	r->x.cancelable = 1;
	u->nr_extra++;
	if (!usubmitted(u, io_uring_submit(&u->ring), 1))
		UFAIL(u, "io_uring_submit of a cancel");
	return 0;
}

/*
 * A child that waits on the round's endpoints through a ring of its own
 * and exits, or is SIGKILLed, with them asleep.
 */
static int uchild(struct uround *u, uint64_t *s)
{
	int st, n = 1 + (int)below(s, 3), kill_it = chance(s, 50);
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return 0;
	if (!pid) {
		struct knot c = u->k;
		struct io_uring ring;
		int i;

		/* Mappings are not inherited: the child maps its own. */
		c.fd = u->kfd;
		c.ctl = NULL;
		c.data = NULL;
		if (knot_map(&c) || io_uring_queue_init(4, &ring, 0))
			_exit(1);
		for (i = 0; i < n; i++) {
			int e = (int)below(s, 3);
			struct io_uring_sqe *sqe;

			if (u->fd[e] < 0)
				continue;	/* before taking an SQE */
			sqe = io_uring_get_sqe(&ring);
			prep_raw_wait(sqe, u->fd[e], udoorbell(e),
				      knitk_doorbell_seq(knot_doorbell(&c, udoorbell(e))),
				      KNITK_WAIT_FOREVER, (__u64)i);
			if (io_uring_submit(&ring) != 1)
				_exit(1);
		}
		usleep(below(s, 5000));
		_exit(0);
	}
	if (kill_it) {
		usleep(below(s, 3000));
		kill(pid, SIGKILL);
	}
	if (waitpid(pid, &st, 0) != pid)
		UFAIL(u, "waitpid: %d", -errno);
	if ((WIFEXITED(st) && WEXITSTATUS(st)) ||
	    (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL))
		UFAIL(u, "ring child: status %#x", st);
	u->children++;
	return 0;
}

static int uround_run(struct uround *u, uint64_t *s, unsigned long ops)
{
	struct knitk_geometry g;
	pthread_t kicker;
	int p[2], e, ret = 0;
	unsigned long end = u->op + ops;

	knitk_geom_small(&g);
	memset(u->fd, -1, sizeof(u->fd));
	if (knot_make(&u->k, &g) || knitk_join(u->k.fd, KNITK_ROLE_HOST, 0, NULL))
		UFAIL(u, "knot");
	u->fd[UE_HOST] = u->k.fd;
	u->fd[UE_W0] = knot_endpoint(&u->k, KNITK_ROLE_WORKER, 0);
	u->fd[UE_W1] = knot_endpoint(&u->k, KNITK_ROLE_WORKER, 1);
	u->fd[UE_NOROLE] = knitk_open();
	u->fd[UE_BARE] = knitk_open();
	u->kfd = knitk_open();
	if (pipe2(p, O_CLOEXEC) || u->fd[UE_W0] < 0 || u->fd[UE_W1] < 0 ||
	    u->fd[UE_NOROLE] < 0 || u->fd[UE_BARE] < 0 || u->kfd < 0 ||
	    knitk_attach(u->fd[UE_NOROLE], u->k.fd, NULL) ||
	    knitk_attach(u->kfd, u->k.fd, NULL))
		UFAIL(u, "endpoints");
	u->fd[UE_PIPE] = p[0];
	u->pipe_w = p[1];
	memcpy(u->was, u->fd, sizeof(u->was));
	if (uring_open(u, s))
		return -1;
	u->kick_seed = rnd(s);
	atomic_store(&u->stop, 0);
	if (pthread_create(&kicker, NULL, uround_kicker, u))
		UFAIL(u, "pthread_create");
	while (u->op < end && !ret && atomic_load(&u->stop) != 2) {
		u->op++;
		switch (below(s, 20)) {
		case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7:
			ret = usubmit(u, s);
			break;
		case 8: case 9: case 10:
			ret = ureap(u, 0);
			break;
		case 11:		/* a lane for worker 0 or 1, then a notify */
			if (u->k.data) {
				knot_lane_publish(knot_mailbox(&u->k, below(s, 2)),
						  (unsigned int)below(s, 64));
				knitk_doorbell_sleeping(knot_doorbell(&u->k, below(s, 2)), 1);
			}
			knitk_notify(u->kfd, 3, NULL);
			break;
		case 12:		/* a role ends, or the host dies */
			if (chance(s, 40))
				uround_close(u, (int)below(s, NR_UE));
			break;
		case 13:		/* the waits do not need the mapping */
			if (u->k.data) {
				knot_unmap(&u->k);
			} else {
				int host = u->k.fd;

				u->k.fd = u->kfd;	/* the host's may be gone */
				ret = knot_map(&u->k);
				u->k.fd = host;
				if (ret)
					UFAIL(u, "knot_map: %d", ret);
			}
			break;
		case 14:
			ret = ucancel(u, s);
			break;
		case 15:
			if (!u->registered && chance(s, 50)) {
				memcpy(u->reg_fd, u->fd, sizeof(u->reg_fd));
				u->registered = !io_uring_register_files(&u->ring,
									 u->reg_fd, NR_UE);
			}
			break;
		case 16:
			if (chance(s, 30))
				ret = uchild(u, s);
			break;
		case 17:
			if (chance(s, 20)) {	/* the ring exits, waits in flight */
				uring_drop(u);
				ret = uring_open(u, s);
			}
			break;
		default:
			usleep(below(s, 2000));
		}
	}
	if (atomic_load(&u->stop) == 2)
		ret = -1;
	/* Every role ends: every command left completes, none is lost. */
	for (e = 0; e < NR_UE; e++)
		uround_close(u, e);
	if (!ret)
		ret = ureap(u, 1);
	atomic_store(&u->stop, 1);
	pthread_join(kicker, NULL);
	uring_drop(u);
	close(u->kfd);
	close(u->pipe_w);
	knot_close(&u->k);
	return ret;
}

static int uring_body(void)
{
	uint64_t seed = rnd(&(uint64_t){ fuzz_seed ^ 0x7572696e67ULL });
	unsigned long total = fuzz_ops / 10, per = 40, rounds = 0;
	struct uround u = { 0 };
	int k, ret = 0;

	while (u.op < total && !ret) {
		ret = uround_run(&u, &seed, per);
		rounds++;
	}
	printf("# uring: %lu ops in %lu rounds, %lu ring children; results:",
	       u.op, rounds, u.children);
	for (k = 0; k < 8; k++)
		printf(" %lu %s%s", u.res[k], ures_names[k], k < 7 ? "," : "\n");
	return ret;
}

TEST_F_TIMEOUT(fuzz, uring, 1800 * MAX_SEEDS)
{
	per_seed(_metadata, uring_body);
}

/* ------------------------------------------------------ notify_wait */

#define HOST_BIT	(1ULL << KNITK_DOORBELL_HOST)

struct nwrace {
	struct knot k;		/* the host, joined in this process */
	int w0;			/* worker 0's endpoint, joined here */
	int kfd;		/* the kicker's attached endpoint */
	int restart;		/* SIGUSR1 is SA_RESTART this round */
	_Atomic int stop, stop_kick;
	_Atomic unsigned long ops, bad, rung, eintr, restarted_eintr;
	pthread_t waiters[2];
};

struct nwracer {
	struct nwrace *r;
	uint64_t s;
	int worker;		/* waits as worker 0, else as the host */
};

static _Atomic unsigned long nw_signals;

static void on_usr1_count(int sig)
{
	(void)sig;
	atomic_fetch_add(&nw_signals, 1);
}

static void nw_bad(struct nwrace *r, const char *what, int ret,
		   const struct knitk_notify_wait *nw)
{
	printf("# notify_wait: %s: %d (%s); doorbells %#llx woken %#llx flags %#x deadline %#llx%s\n",
	       what, ret, strerror(-ret), (unsigned long long)nw->doorbells,
	       (unsigned long long)nw->woken, nw->flags,
	       (unsigned long long)nw->deadline_ns,
	       r && r->restart ? ", SA_RESTART" : "");
	if (r)
		atomic_fetch_add(&r->bad, 1);
}

/*
 * One KNITK_IOC_NOTIFY_WAIT (or, 1 in 5, KNITK_IOC_WAIT) on @fd, doorbell
 * @d, @peer the doorbells it may ring, with random fields; returns 0 if
 * the result is one the uapi documents for them, else 1 (printed).  With
 * @far the deadline may be far or none (something else ends the wait).
 */
static int nw_one(struct nwrace *r, uint64_t *s, int fd, const struct knot *k,
		  unsigned int d, __u64 peer, int far, int restart)
{
	struct knitk_notify_wait nw = { .woken = WOKEN_UNTOUCHED };
	struct knitk_doorbell *db = k->data ? knot_doorbell(k, d) : NULL;
	uint32_t seq = db ? knitk_doorbell_seq(db) : (uint32_t)rnd(s);
	int stale = db && chance(s, 15), inval = 0, bad_db = 0, ret;
	if (db && chance(s, 60))
		knitk_doorbell_sleeping(db, 1);
	switch (below(s, 10)) {
	case 0: nw.doorbells = 0; break;
	case 1:			/* a worker beyond nr_workers */
		nw.doorbells = peer | 1ULL << (2 + below(s, 61));
		bad_db = 1;
		break;
	case 2: nw.doorbells = peer | HOST_BIT | 3; break;
	default: nw.doorbells = peer;
	}
	nw.expected = stale ? seq - 1 - (uint32_t)below(s, 100) : seq;
	switch (below(s, 10)) {
	case 0: nw.deadline_ns = 0; break;
	case 1: nw.deadline_ns = knitk_now_ns() - 1; break;
	case 2: case 3: nw.deadline_ns = knitk_now_ns() + below(s, 5 * KNITK_MS); break;
	case 4: nw.deadline_ns = knitk_now_ns() + below(s, 40 * KNITK_MS); break;
	case 5: nw.deadline_ns = far ? (1ULL << 63) - 1 : 1; break;
	case 6: nw.deadline_ns = far ? 1ULL << 63 : 2; break;
	case 7: nw.deadline_ns = far ? KNITK_WAIT_FOREVER : 3; break;
	default: nw.deadline_ns = knitk_now_ns() + below(s, 2 * KNITK_MS);
	}
	if (chance(s, 25))
		nw.flags = KNITK_WAIT_SPIN;
	if (chance(s, 8)) {
		/* Unknown bits: -EINVAL, whatever else is asked. */
		nw.flags |= 2U << below(s, 31);
		inval = 1;
	}
	if (chance(s, 4)) {
		nw.reserved[below(s, 2)] = rnd(s) | 1;
		inval = 1;
	}
	if (db && chance(s, 30))	/* work for the peer: the notify rings */
		knot_lane_publish(knot_mailbox(k, d == KNITK_DOORBELL_HOST ? 0 :
					       k->layout.nr_request + d),
				  (unsigned int)below(s, 64));
	if (chance(s, 20)) {
		/* The plain wait: restarted under SA_RESTART, never -EINTR. */
		ret = knitk_ioctl(fd, KNITK_IOC_WAIT, &(struct knitk_wait){
			.expected = nw.expected, .flags = nw.flags,
			.deadline_ns = nw.deadline_ns,
			.reserved = nw.reserved[0] | nw.reserved[1] });
		if (db)
			knitk_doorbell_sleeping(db, 0);
		if (inval ? !(ret == -EINVAL || ret == -EBADF) :
		    !allowed(ret, (int[]){ EAGAIN, ETIMEDOUT, EINTR, EPIPE,
					   ENOTCONN, EBADF }, 6) ||
		    (stale && (ret == 0 || ret == -ETIMEDOUT || ret == -EINTR)) ||
		    (restart && ret == -EINTR)) {
			nw_bad(r, "WAIT", ret, &nw);
			return 1;
		}
		return 0;
	}
	ret = knitk_ioctl(fd, KNITK_IOC_NOTIFY_WAIT, &nw);
	if (db)
		knitk_doorbell_sleeping(db, 0);
	if (inval || bad_db) {
		/* Refused before the ring: woken as it was. */
		if (!(ret == -EINVAL || ret == -EBADF ||
		      (!inval && ret == -ENOTCONN)) || nw.woken != WOKEN_UNTOUCHED) {
			nw_bad(r, inval ? "NOTIFY_WAIT with bad flags or reserved" :
			       "NOTIFY_WAIT of a missing worker's doorbell", ret, &nw);
			return 1;
		}
		return 0;
	}
	if (!allowed(ret, (int[]){ EAGAIN, ETIMEDOUT, EINTR, EPIPE, ENOTCONN,
				   EBADF }, 6) ||
	    (stale && (ret == 0 || ret == -ETIMEDOUT || ret == -EINTR)) ||
	    (nw_rung(ret) && (nw.woken & ~nw.doorbells)) ||
	    (ret == -EBADF && nw.woken != WOKEN_UNTOUCHED) ||
	    (ret == -ENOTCONN && nw.woken != WOKEN_UNTOUCHED &&
	     (nw.woken & ~nw.doorbells))) {
		nw_bad(r, "NOTIFY_WAIT", ret, &nw);
		return 1;
	}
	if (r) {
		atomic_fetch_add(&r->rung, nw_rung(ret));
		atomic_fetch_add(&r->eintr, ret == -EINTR);
		atomic_fetch_add(&r->restarted_eintr, restart && ret == -EINTR);
	}
	return 0;
}

static void *nw_waiter(void *arg)
{
	struct nwracer *x = arg;
	struct nwrace *r = x->r;

	while (!atomic_load(&r->stop)) {
		if (x->worker)
			nw_one(r, &x->s, r->w0, &r->k, 0, HOST_BIT, 1, r->restart);
		else
			nw_one(r, &x->s, r->k.fd, &r->k, KNITK_DOORBELL_HOST,
			       1ULL << below(&x->s, 2), 1, r->restart);
		atomic_fetch_add(&r->ops, 1);
	}
	return NULL;
}

/* Kicks end the far waits: every doorbell, every few ms. */
static void *nw_kicker(void *arg)
{
	struct nwracer *x = arg;
	struct nwrace *r = x->r;

	while (!atomic_load(&r->stop_kick)) {
		__u64 b = chance(&x->s, 50) ? HOST_BIT | 3 : 1ULL << below(&x->s, 2) |
			  (chance(&x->s, 50) ? HOST_BIT : 0);
		int ret = chance(&x->s, 70) ? knitk_kick(r->kfd, b, NULL)
					    : knitk_notify(r->kfd, b, NULL);

		if (ret) {
			printf("# notify_wait: kick %#llx: %d\n", (unsigned long long)b, ret);
			atomic_fetch_add(&r->bad, 1);
		}
		usleep(below(&x->s, 5000));
	}
	return NULL;
}

static void *nw_signaller(void *arg)
{
	struct nwracer *x = arg;
	struct nwrace *r = x->r;

	/* Stopped before the waiters are joined: never a joined thread. */
	while (!atomic_load(&r->stop)) {
		pthread_kill(r->waiters[below(&x->s, 2)], SIGUSR1);
		usleep(below(&x->s, 3000));
	}
	return NULL;
}

/*
 * Worker 1 in a process of its own: NOTIFY_WAITs ringing the host, with
 * bounded deadlines, until it is SIGKILLed or has done @n.
 */
static void nw_peer(struct nwrace *r, uint64_t seed, int n)
{
	struct knot c = { .fd = knitk_open() };
	int i, bad = 0;

	if (c.fd < 0 || knitk_attach(c.fd, r->kfd, &c.layout) ||
	    knitk_join(c.fd, KNITK_ROLE_WORKER, 1, NULL) || knot_map(&c))
		_exit(2);
	for (i = 0; i < n; i++)
		bad |= nw_one(NULL, &seed, c.fd, &c, 1, HOST_BIT, 0, r->restart);
	_exit(bad);
}

static int notify_wait_body(void)
{
	static void *(*const fn[])(void *) = {
		nw_waiter, nw_waiter, nw_kicker, nw_signaller,
	};
	unsigned long rounds = fuzz_ops / 1000 > 12 ? fuzz_ops / 1000 : 12, n;
	unsigned long peers = 0, peer_kills = 0, closes = 0, restarts = 0;
	uint64_t seed = rnd(&(uint64_t){ fuzz_seed ^ 0x6e6f7477ULL });
	struct knitk_geometry g;
	struct nwrace r = { 0 };
	struct nwracer x[4];
	pthread_t th[4];
	int t, st;

	knitk_geom_small(&g);
	for (n = 0; n < rounds && !atomic_load(&r.bad); n++) {
		struct sigaction sa = { .sa_handler = on_usr1_count };
		pid_t peer = -1;

		r.restart = chance(&seed, 50);
		restarts += r.restart;
		sa.sa_flags = r.restart ? SA_RESTART : 0;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR1, &sa, NULL);
		if (knot_make(&r.k, &g) ||
		    knitk_join(r.k.fd, KNITK_ROLE_HOST, 0, NULL))
			return -1;
		r.w0 = knot_endpoint(&r.k, KNITK_ROLE_WORKER, 0);
		r.kfd = knitk_open();
		if (r.w0 < 0 || r.kfd < 0 || knitk_attach(r.kfd, r.k.fd, NULL))
			return -1;
		if (chance(&seed, 70)) {
			uint64_t ps = rnd(&seed);

			peer = fork();
			if (peer < 0)
				return -1;
			if (!peer)
				nw_peer(&r, ps, 200);
			peers++;
		}
		atomic_store(&r.stop, 0);
		atomic_store(&r.stop_kick, 0);
		for (t = 0; t < 4; t++) {
			x[t].r = &r;
			x[t].s = rnd(&seed);
			x[t].worker = t == 1;
			pthread_create(&th[t], NULL, fn[t], &x[t]);
			if (t < 2)
				r.waiters[t] = th[t];
		}
		usleep(below(&seed, 60000));
		if (peer > 0 && chance(&seed, 50)) {
			kill(peer, SIGKILL);	/* a death wakes the host */
			peer_kills++;
		}
		usleep(below(&seed, 20000));
		/* Roles end under the waits: -ENOTCONN, and -EPIPE for w0. */
		if (chance(&seed, 40)) {
			int *victim = chance(&seed, 50) ? &r.w0 : &r.k.fd;

			close(*victim);
			*victim = -1;
			closes++;
			usleep(below(&seed, 10000));
		}
		/* The kicker ends the far waits left; then it stops. */
		atomic_store(&r.stop, 1);
		pthread_join(th[3], NULL);
		pthread_join(th[0], NULL);
		pthread_join(th[1], NULL);
		atomic_store(&r.stop_kick, 1);
		pthread_join(th[2], NULL);
		if (r.w0 >= 0)
			close(r.w0);
		close(r.kfd);
		knot_close(&r.k);
		if (peer > 0) {
			kill(peer, SIGKILL);
			if (waitpid(peer, &st, 0) != peer)
				return -1;
			if (WIFEXITED(st) && WEXITSTATUS(st)) {
				printf("# notify_wait: peer exited %d\n", WEXITSTATUS(st));
				atomic_fetch_add(&r.bad, 1);
			}
		}
	}
	printf("# notify_wait: %lu ops in %lu rounds (%lu SA_RESTART), %lu past the ring, "
	       "%lu -EINTR (%lu under SA_RESTART), %lu signals, %lu peers (%lu killed), "
	       "%lu roles ended, %lu unexpected\n",
	       atomic_load(&r.ops), n, restarts, atomic_load(&r.rung),
	       atomic_load(&r.eintr), atomic_load(&r.restarted_eintr),
	       atomic_load(&nw_signals), peers, peer_kills, closes,
	       atomic_load(&r.bad));
	return atomic_load(&r.bad) ? -1 : 0;
}

TEST_F_TIMEOUT(fuzz, notify_wait, 1800 * MAX_SEEDS)
{
	per_seed(_metadata, notify_wait_body);
}

TEST_HARNESS_MAIN
