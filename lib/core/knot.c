// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Knots and endpoints: choosing a backend, create, attach, join, destroy,
 * and the accessors of a knot, the ordered readers of its control page
 * among them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "../sized.h"

/*
 * knitk_last_error(): one message per thread, as errno is; set and cleared
 * only by knitk_endpoint_create (and through it knitk_pool_create).
 */
static _Thread_local char knot_error[512];
static _Thread_local bool knot_error_set;

void knitk__error_clear(void)
{
	knot_error_set = false;
}

void knitk__error_set(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(knot_error, sizeof(knot_error), fmt, ap);
	va_end(ap);
	knot_error_set = true;
}

KNITK_EXPORT const char *knitk_last_error(void)
{
	return knot_error_set ? knot_error : NULL;
}

static struct knitk_endpoint *knot_alloc(const struct knitk_backend_ops *ops)
{
	struct knitk_endpoint *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->ops = ops;
	k->fd = -1;
	k->doorbell = -1;
	atomic_init(&k->event_fd, -1);
	return k;
}

/* The forced backend from @flags or KNITK_BACKEND, or NULL for automatic. */
static int knot_pick_backend(unsigned int flags,
			     const struct knitk_backend_ops **ops)
{
	const char *env;

	*ops = NULL;
	if (flags == (KNITK_KNOT_KMOD | KNITK_KNOT_FUTEX))
		return -EINVAL;
	if (flags & KNITK_KNOT_KMOD) {
		*ops = &knitk_backend_kmod;
		return 0;
	}
	if (flags & KNITK_KNOT_FUTEX) {
		*ops = &knitk_backend_futex;
		return 0;
	}
	env = getenv("KNITK_BACKEND");
	if (!env || !*env)
		return 0;
	if (!strcmp(env, "kmod"))
		*ops = &knitk_backend_kmod;
	else if (!strcmp(env, "futex"))
		*ops = &knitk_backend_futex;
	else
		return -EINVAL;
	return 0;
}

static int knot_create_with(const struct knitk_backend_ops *ops,
			    const struct knitk_geometry *geom,
			    const struct knitk_layout *layout,
			    struct knitk_endpoint **ep)
{
	struct knitk_endpoint *k = knot_alloc(ops);
	int ret;

	if (!k)
		return -ENOMEM;
	k->geom = *geom;
	k->layout = *layout;
	ret = ops->create(k);
	if (ret) {
		free(k);
		return ret;
	}
	/* As the knot records it (a module older than region_lanes: 0). */
	knitk__geometry_resolve(&k->geom);
	*ep = k;
	return 0;
}

KNITK_EXPORT int knitk_endpoint_create(const struct knitk_geometry *geom,
				       unsigned int flags, struct knitk_endpoint **ep)
{
	const struct knitk_backend_ops *ops;
	struct knitk_geometry g;
	struct knitk_layout layout;
	int ret;

	knitk__error_clear();
	if (!geom || !ep ||
	    (flags & ~(KNITK_KNOT_KMOD | KNITK_KNOT_FUTEX | KNITK_KNOT_FALLBACK_FUTEX |
		       KNITK_KNOT_NO_HUGE)) ||
	    (flags & (KNITK_KNOT_KMOD | KNITK_KNOT_FALLBACK_FUTEX)) ==
	    (KNITK_KNOT_KMOD | KNITK_KNOT_FALLBACK_FUTEX))
		return -EINVAL;
	g = *geom;
	if (flags & KNITK_KNOT_NO_HUGE)
		g.flags |= KNITK_GEOM_NO_HUGE;
	geom = &g;
	ret = knitk_layout_compute(geom, &layout);
	if (ret)
		return ret;
	ret = knot_pick_backend(flags & ~(KNITK_KNOT_FALLBACK_FUTEX | KNITK_KNOT_NO_HUGE),
				&ops);
	if (ret)
		return ret;
	if (ops != &knitk_backend_futex) {
		ret = knot_create_with(&knitk_backend_kmod, geom, &layout, ep);
		/*
		 * The module refused it for RLIMIT_MEMLOCK (the message is
		 * set): the futex backend only when the caller asked, and
		 * the message stays to say so.
		 */
		if (ret == -ENOMEM && knitk_last_error() &&
		    (flags & KNITK_KNOT_FALLBACK_FUTEX))
			return knot_create_with(&knitk_backend_futex, geom, &layout, ep);
		if (ops || ret != -ENODEV)
			return ret;
	}
	return knot_create_with(&knitk_backend_futex, geom, &layout, ep);
}

KNITK_EXPORT int knitk_endpoint_attach(int fd, unsigned int flags,
				       struct knitk_endpoint **ep)
{
	const struct knitk_backend_ops *ops;
	struct knitk_endpoint *k;
	struct stat st;
	int ret;

	if (fd < 0 || !ep || (flags & ~KNITK_ATTACH_TAKE_FD))
		return -EINVAL;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISCHR(st.st_mode))
		ops = &knitk_backend_kmod;
	else if (S_ISREG(st.st_mode))
		ops = &knitk_backend_futex;
	else
		return -EINVAL;
	k = knot_alloc(ops);
	if (!k)
		return -ENOMEM;
	ret = ops->attach(k, fd);
	if (ret) {
		free(k);
		return ret;
	}
	knitk__geometry_resolve(&k->geom);
	if (flags & KNITK_ATTACH_TAKE_FD)
		close(fd);
	*ep = k;
	return 0;
}

KNITK_EXPORT int knitk_endpoint_join(struct knitk_endpoint *ep, unsigned int role,
				     unsigned int worker)
{
	uint32_t gen;
	int ret;

	if (!ep)
		return -EINVAL;
	if (role == KNITK_ROLE_HOST) {
		if (worker)
			return -EINVAL;
	} else if (role != KNITK_ROLE_WORKER || worker >= ep->geom.nr_workers) {
		return -EINVAL;
	}
	if (ep->doorbell >= 0)
		return -EALREADY;
	ret = ep->ops->join(ep, role, worker, &gen);
	if (ret < 0)
		return ret;
	ep->doorbell = role == KNITK_ROLE_HOST ? KNITK_DOORBELL_HOST : (int)worker;
	ep->join_gen = gen;
	/*
	 * The 32-bit generation as an int >= 1 (knitk.h): itself up to
	 * INT_MAX, then counting on from 1, also across its wrap to 0.
	 */
	return (int)((uint32_t)(gen - 1) % (uint32_t)INT_MAX) + 1;
}

KNITK_EXPORT void knitk_endpoint_destroy(struct knitk_endpoint *ep)
{
	if (!ep)
		return;
	ep->ops->release(ep);
	free(ep);
}

KNITK_EXPORT int knitk_endpoint_fd(const struct knitk_endpoint *ep)
{
	return ep ? ep->fd : -EINVAL;
}

KNITK_EXPORT int knitk_endpoint_backend(const struct knitk_endpoint *ep)
{
	return ep ? ep->ops->kind : -EINVAL;
}

KNITK_EXPORT int knitk_endpoint_layout(const struct knitk_endpoint *ep,
				       struct knitk_layout *layout,
				       struct knitk_geometry *geom)
{
	if (!ep || (!layout && !geom))
		return -EINVAL;
	if (layout)
		*layout = ep->layout;
	if (geom)
		*geom = ep->geom;
	return 0;
}

/*
 * Bytes of the mapping at @base that this process maps with huge entries
 * now: the ShmemPmdMapped and FilePmdMapped lines of its vma in
 * /proc/self/smaps (0 when it cannot be read).
 */
static uint64_t knot_pmd_mapped(const void *base)
{
	unsigned long start, end, kb;
	uint64_t bytes = 0;
	bool ours = false;
	char line[256];
	FILE *f;

	f = fopen("/proc/self/smaps", "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		/* A vma's first line; its fields' names are not "hex-hex". */
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2) {
			if (ours)
				break;
			ours = start == (uintptr_t)base;
		} else if (ours && (sscanf(line, "ShmemPmdMapped: %lu kB", &kb) == 1 ||
				    sscanf(line, "FilePmdMapped: %lu kB", &kb) == 1)) {
			bytes += (uint64_t)kb << 10;
		}
	}
	fclose(f);
	return bytes;
}

KNITK__SIZED_VER0(knitk_pages, KNITK_PAGES_SIZE_VER0);

KNITK_EXPORT int knitk_endpoint_pages(const struct knitk_endpoint *ep,
				      struct knitk_pages *pages)
{
	struct knitk_pages p = { 0 };
	uint64_t chunks;

	if (!ep || !pages)
		return -EINVAL;
	p.flags = ep->pages_flags;
	p.page_bytes = ep->page_bytes;
	p.map_bytes = ep->map_bytes;
	if (p.flags & KNITK_PAGES_HUGETLB) {
		p.huge_bytes = p.map_bytes;
	} else if (p.flags & KNITK_PAGES_THP) {
		p.huge_bytes = knot_pmd_mapped(ep->base);
	} else if (ep->ops->kind == KNITK_BACKEND_KMOD) {
		/* Written at create, before any endpoint could map the page. */
		chunks = knot_control(ep)->huge_bytes;
		if (chunks) {
			p.flags |= KNITK_PAGES_CHUNKS;
			p.huge_bytes = chunks;
		}
	}
	return knitk__sized_out(pages, &p, sizeof(p), KNITK_PAGES_SIZE_VER0);
}

KNITK_EXPORT int knitk_endpoint_control(const struct knitk_endpoint *ep,
					const struct knitk_control **control)
{
	if (!ep || !control)
		return -EINVAL;
	*control = knot_control(ep);
	return 0;
}

KNITK_EXPORT int knitk_endpoint_base(const struct knitk_endpoint *ep, void **base)
{
	if (!ep || !base)
		return -EINVAL;
	*base = ep->base;
	return 0;
}

KNITK_EXPORT int knitk_endpoint_doorbell(const struct knitk_endpoint *ep)
{
	if (!ep)
		return -EINVAL;
	return ep->doorbell < 0 ? -ENOTCONN : ep->doorbell;
}

static bool knot_doorbell_valid(const struct knitk_endpoint *ep, unsigned int doorbell)
{
	return doorbell == KNITK_DOORBELL_HOST || doorbell < ep->geom.nr_workers;
}

KNITK_EXPORT int knitk_endpoint_mark_dead(struct knitk_endpoint *ep,
					  unsigned int doorbell)
{
	if (!ep || !knot_doorbell_valid(ep, doorbell))
		return -EINVAL;
	return ep->ops->mark_dead(ep, doorbell);
}

/*
 * The control page's words, read in the order that makes them agree with
 * each other: the kernel (kmod/knitk_peer.c) or futex_join and
 * futex_mark_dead write them.
 */
KNITK_EXPORT int knitk_endpoint_deaths(const struct knitk_endpoint *ep,
				       uint32_t *death_seq, uint64_t *dead)
{
	const struct knitk_control *ctl;
	uint32_t seq;

	if (!ep || (!death_seq && !dead))
		return -EINVAL;
	ctl = knot_control(ep);
	/*
	 * Acquire pairs with the release of death_seq in knitk_peer_leave()
	 * or the increment in futex_mark_dead(): the dead bit of every
	 * death counted is seen by the load of dead below.
	 */
	seq = atomic_load_explicit(A32(&ctl->death_seq), memory_order_acquire);
	if (death_seq)
		*death_seq = seq;
	if (dead)
		*dead = atomic_load_explicit(A64(&ctl->dead), memory_order_acquire);
	return 0;
}

KNITK_EXPORT int knitk_endpoint_role(const struct knitk_endpoint *ep,
				     unsigned int doorbell, uint32_t *generation)
{
	const struct knitk_control *ctl;
	uint64_t live;

	if (!ep || !knot_doorbell_valid(ep, doorbell))
		return -EINVAL;
	ctl = knot_control(ep);
	/*
	 * Acquire pairs with the release of live in knitk_peer_join()
	 * (after the new generation) or the seq_cst RMWs of futex_join():
	 * a live bit seen here comes with its join's generation below.
	 */
	live = atomic_load_explicit(A64(&ctl->live), memory_order_acquire);
	if (generation)
		*generation = atomic_load_explicit(A32(&ctl->generation[doorbell]),
						   memory_order_acquire);
	return !!(live & (1ULL << doorbell));
}

KNITK_EXPORT int knitk_endpoint_host_dead(const struct knitk_endpoint *ep)
{
	if (!ep)
		return -EINVAL;
	return knot_host_dead(ep);
}

KNITK_EXPORT int knitk_endpoint_poll(const struct knitk_endpoint *ep)
{
	unsigned int d;
	uint32_t seq;
	uint64_t dead;
	int mask = 0;

	if (!ep)
		return -EINVAL;
	if (ep->ops->kind == KNITK_BACKEND_KMOD) {
		struct pollfd p = { .fd = ep->fd, .events = POLLIN | POLLPRI };
		int n;

		while ((n = poll(&p, 1, 0)) < 0 && errno == EINTR)
			;
		if (n < 0)
			return -errno;
		return n ? p.revents : 0;
	}
	/* The module's poll() (kmod/knitk_poll.c), from the control page. */
	if (ep->doorbell >= 0 && knot_role_ended(ep))
		return POLLHUP | POLLERR;
	d = ep->doorbell >= 0 ? (unsigned int)ep->doorbell : KNITK_DOORBELL_HOST;
	if (knitk__endpoint_doorbell_pending(ep, d))
		mask |= POLLIN;
	knitk_endpoint_deaths(ep, &seq, &dead);
	if (dead)
		mask |= POLLPRI;
	if (d != KNITK_DOORBELL_HOST && knot_host_dead(ep))
		mask |= POLLHUP;
	return mask;
}

KNITK_EXPORT int knitk_endpoint_set_event_fd(struct knitk_endpoint *ep, int efd)
{
	if (!ep || efd < -1)
		return -EINVAL;
	if (ep->ops->kind != KNITK_BACKEND_FUTEX)
		return -EOPNOTSUPP;
	/* Pairs with the acquire in host_event_signal (backend_futex.c). */
	atomic_store_explicit(&ep->event_fd, efd, memory_order_release);
	return 0;
}
