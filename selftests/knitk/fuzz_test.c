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
 *                         (default 12000: 24000 in all)
 *
 *  - ioctls: one process, a table of endpoints, mutated ioctls (geometries
 *    near every limit of uapi/linux/knitk.h, bad pointers, reserved
 *    fields, unknown commands) and mmap/mprotect/mremap/munmap/madvise,
 *    writes of random words into the shared region, pokes at the control
 *    page through /proc/self/mem, poll and fork.  Each result must be one
 *    the uapi documents for that call in that state, and the control page
 *    must keep its magic and layout.
 *  - procs: processes sharing knots by inheritance and SCM_RIGHTS, running
 *    those operations while the parent SIGKILLs and respawns them.
 *  - threads: JOIN, WAIT, NOTIFY, poll and close racing on one endpoint,
 *    signals landing in the waits, the host closed under the workers.
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
       OK_NOTIFIED, OK_FORK, OK_PASSED, NR_OKS };
static const char *const ok_names[NR_OKS] = {
	"creates", "attaches", "joins", "mmaps", "waits woken", "waits timed out",
	"doorbells woken", "forks", "fds passed",
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

/* Commands next to the real ones: other sizes, directions, numbers. */
static int op_badioctl(struct fz *z)
{
	static const unsigned long real[] = {
		KNITK_IOC_API, KNITK_IOC_CREATE, KNITK_IOC_ATTACH, KNITK_IOC_JOIN,
		KNITK_IOC_WAIT, KNITK_IOC_NOTIFY, KNITK_IOC_STATS,
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

TEST_HARNESS_MAIN
