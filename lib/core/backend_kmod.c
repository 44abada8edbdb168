// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * The kmod backend: /dev/knitk.  Each struct knitk_endpoint is one open of the
 * device (an endpoint).  The control page is mapped read-only and the data
 * region read-write, contiguously at one base: the whole size is reserved
 * PROT_NONE first, then both pieces are mapped over it with MAP_FIXED.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#define KNITK_DEV "/dev/knitk"

/* Open an endpoint; *@features gets the module's features. */
static int kmod_open(uint64_t *features)
{
	struct knitk_api api = { .api = KNITK_API };
	int fd = open(KNITK_DEV, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOENT || errno == ENXIO || errno == ENODEV)
			return -ENODEV;
		return -errno;
	}
	if (ioctl(fd, KNITK_IOC_API, &api) < 0) {
		int ret = -errno;

		close(fd);
		return ret == -ENOTTY ? -ENODEV : ret;
	}
	*features = api.features;
	return fd;
}

static int kmod_map(struct knitk_endpoint *k)
{
	const struct knitk_layout *l = &k->layout;
	char *base, *p;
	int ret;

	if (l->size <= l->control_size)
		return -EPROTO;
	base = mmap(NULL, l->size, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED)
		return -errno;
	p = mmap(base, l->control_size, PROT_READ, MAP_SHARED | MAP_FIXED,
		 k->fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	p = mmap(base + l->control_size, l->size - l->control_size,
		 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, k->fd,
		 (off_t)l->control_size);
	if (p == MAP_FAILED)
		goto fail;
	k->base = base;
	k->map_bytes = l->size;
	k->page_bytes = KNITK_PAGE_BYTES;
	return 0;
fail:
	ret = -errno;
	munmap(base, l->size);
	return ret;
}

/* Close the endpoint of a knot that failed to open; returns @ret. */
static int kmod_fail(struct knitk_endpoint *k, int ret)
{
	close(k->fd);
	k->fd = -1;
	return ret;
}

/*
 * Open an endpoint into k->fd and issue @cmd (CREATE or ATTACH) with @arg.
 * On failure nothing stays open.
 */
static int kmod_open_ioctl(struct knitk_endpoint *k, unsigned long cmd, void *arg)
{
	uint64_t features = 0;
	int ret;

	ret = kmod_open(&features);
	if (ret < 0)
		return ret;
	k->fd = ret;
	/* A module before KNITK_FEATURE_HUGE makes every knot of base pages. */
	if (cmd == KNITK_IOC_CREATE && !(features & KNITK_FEATURE_HUGE))
		((struct knitk_create *)arg)->geometry.flags &= ~KNITK_GEOM_NO_HUGE;
	if (ioctl(k->fd, cmd, arg) < 0)
		return kmod_fail(k, -errno);
	k->can_kick = features & KNITK_FEATURE_KICK;
	k->can_spin = features & KNITK_FEATURE_SPIN;
	k->can_ring_wait = features & KNITK_FEATURE_NOTIFY_WAIT;
	k->can_word_wait = features & KNITK_FEATURE_WORD_WAIT;
	return 0;
}

/* The calling process has CAP_IPC_LOCK in its effective set. */
static bool kmod_cap_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) < 0)
		return false;
	return d[CAP_IPC_LOCK / 32].effective & (1U << (CAP_IPC_LOCK % 32));
}

/*
 * CREATE failed with -ENOMEM: when RLIMIT_MEMLOCK is what refused it (a
 * finite limit, no CAP_IPC_LOCK: the module charges the knot's pages to
 * the user's locked memory then, see kmod/knitk_knot.c), say so in
 * knitk_last_error(), with the bytes needed and the knobs.
 */
static void kmod_memlock_explain(const struct knitk_endpoint *k)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    kmod_cap_ipc_lock())
		return;
	knitk__error_set("knitk: the module refused a knot of %llu bytes for "
			 "RLIMIT_MEMLOCK: it pins them as the user's locked memory, "
			 "%llu bytes at most (shared with the user's other knots "
			 "and mlock()); raise it (ulimit -l, LimitMEMLOCK= in a "
			 "systemd unit, /etc/security/limits.conf), give the "
			 "process CAP_IPC_LOCK, or use the futex backend "
			 "(KNITK_POOL_FALLBACK_FUTEX, KNITK_KNOT_FALLBACK_FUTEX "
			 "or KNITK_KNOT_FUTEX)",
			 (unsigned long long)k->layout.size,
			 (unsigned long long)rl.rlim_cur);
}

static int kmod_create(struct knitk_endpoint *k)
{
	struct knitk_create c;
	int ret;

	memset(&c, 0, sizeof(c));
	c.geometry = k->geom;
	ret = kmod_open_ioctl(k, KNITK_IOC_CREATE, &c);
	if (ret == -ENOMEM)
		kmod_memlock_explain(k);
	if (ret)
		return ret;
	/* The module and knitk_layout_compute must agree on every offset. */
	if (memcmp(&c.layout, &k->layout, sizeof(c.layout)))
		return kmod_fail(k, -EPROTO);
	/* As the knot records them (KNITK_GEOM_NO_HUGE dropped above). */
	k->geom.flags = c.geometry.flags;
	ret = kmod_map(k);
	return ret ? kmod_fail(k, ret) : 0;
}

static int kmod_attach(struct knitk_endpoint *k, int fd)
{
	struct knitk_attach a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.fd = fd;
	ret = kmod_open_ioctl(k, KNITK_IOC_ATTACH, &a);
	if (ret)
		return ret;
	k->layout = a.layout;
	ret = kmod_map(k);
	if (ret)
		return kmod_fail(k, ret);
	k->geom = knot_control(k)->geometry;
	if (!knitk__layout_matches_geometry(&k->geom, &k->layout)) {
		munmap(k->base, k->layout.size);
		k->base = NULL;
		return kmod_fail(k, -EPROTO);
	}
	return 0;
}

static int kmod_join(struct knitk_endpoint *k, unsigned int role,
		     unsigned int worker, uint32_t *generation)
{
	struct knitk_join j = { .role = role, .worker = worker };

	if (ioctl(k->fd, KNITK_IOC_JOIN, &j) < 0)
		return -errno;
	*generation = j.generation;
	return 0;
}

static int kmod_wait(struct knitk_endpoint *k, uint32_t seq, uint64_t deadline_ns)
{
	struct knitk_wait w = { .expected = seq, .deadline_ns = deadline_ns };

	if (ioctl(k->fd, KNITK_IOC_WAIT, &w) < 0)
		return -errno;
	return 0;
}

/* The kernel's filter dropped the rest of @mask (idle, or awake by now). */
static void kmod_count_filtered(struct knitk_endpoint *k, uint64_t mask,
				uint64_t woken)
{
	knot_count(k, KC_SUPPRESSED_IDLE,
		   (uint64_t)__builtin_popcountll(mask & ~woken));
}

static int kmod_notify(struct knitk_endpoint *k, uint64_t mask, uint64_t *woken)
{
	struct knitk_notify n = { .doorbells = mask };

	if (ioctl(k->fd, KNITK_IOC_NOTIFY, &n) < 0)
		return -errno;
	kmod_count_filtered(k, mask, n.woken);
	*woken = n.woken;
	return 0;
}

static int kmod_ring_wait(struct knitk_endpoint *k, uint64_t mask, uint32_t seq,
			  uint64_t deadline_ns, uint64_t *woken)
{
	struct knitk_notify_wait nw = {
		.doorbells = mask,
		.expected = seq,
		/*
		 * Only a ring-then-wait spins: its peer was just woken to
		 * answer.  A plain wait does not (not measured faster in the
		 * guest, see docs/protocol.md S8).
		 */
		.flags = k->can_spin ? KNITK_WAIT_SPIN : 0,
		.deadline_ns = deadline_ns,
	};
	int ret = ioctl(k->fd, KNITK_IOC_NOTIFY_WAIT, &nw) < 0 ? -errno : 0;

	/* Rung unless the call was refused before (bad input, no role). */
	if (ret != -EINVAL && ret != -ENOTCONN && ret != -EFAULT) {
		kmod_count_filtered(k, mask, nw.woken);
		*woken = nw.woken;
	}
	return ret;
}

static int kmod_stats(struct knitk_endpoint *k, unsigned int doorbell,
		      struct knitk_doorbell_stats *st)
{
	struct knitk_stats s = { .doorbell = doorbell };

	if (ioctl(k->fd, KNITK_IOC_STATS, &s) < 0)
		return -errno;
	*st = s.stats;
	return 0;
}

static int kmod_mark_dead(struct knitk_endpoint *k, unsigned int doorbell)
{
	(void)k;
	(void)doorbell;
	return -EOPNOTSUPP;
}

static int kmod_kick(struct knitk_endpoint *k)
{
	struct knitk_notify n = {
		.doorbells = 1ULL << k->doorbell,
		.flags = KNITK_NOTIFY_KICK,
	};

	if (ioctl(k->fd, KNITK_IOC_NOTIFY, &n) < 0)
		return -errno;
	return 0;
}

static void kmod_release(struct knitk_endpoint *k)
{
	if (k->base)
		munmap(k->base, k->layout.size);
	if (k->fd >= 0)
		close(k->fd);
}

static int kmod_word_wait(struct knitk_endpoint *k, const uint32_t *word,
			  uint32_t expected, uint64_t deadline_ns)
{
	struct knitk_word_wait w = {
		.offset = (uint64_t)((const char *)word - (const char *)k->base),
		.expected = expected,
		.deadline_ns = deadline_ns,
	};

	if (!k->can_word_wait)
		return -EOPNOTSUPP;
	return ioctl(k->fd, KNITK_IOC_WORD_WAIT, &w) < 0 ? -errno : 0;
}

static int kmod_word_wake(struct knitk_endpoint *k, const uint32_t *word,
			  unsigned int nr)
{
	struct knitk_word_wake w = {
		.offset = (uint64_t)((const char *)word - (const char *)k->base),
		.nr = nr,
	};

	if (!k->can_word_wait)
		return -EOPNOTSUPP;
	if (ioctl(k->fd, KNITK_IOC_WORD_WAKE, &w) < 0)
		return -errno;
	return (int)w.woken;
}

const struct knitk_backend_ops knitk_backend_kmod = {
	.kind		= KNITK_BACKEND_KMOD,
	.create		= kmod_create,
	.attach		= kmod_attach,
	.join		= kmod_join,
	.wait		= kmod_wait,
	.notify		= kmod_notify,
	.stats		= kmod_stats,
	.mark_dead	= kmod_mark_dead,
	.kick		= kmod_kick,
	.ring_wait	= kmod_ring_wait,
	.word_wait	= kmod_word_wait,
	.word_wake	= kmod_word_wake,
	.release	= kmod_release,
};
