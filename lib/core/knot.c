// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Knots and endpoints: choosing a backend, create, attach, join, destroy,
 * and the accessors of a knot, the ordered readers of its control page
 * among them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static struct knitk_knot *knot_alloc(const struct knitk_backend_ops *ops)
{
	struct knitk_knot *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	k->ops = ops;
	k->fd = -1;
	k->slot = -1;
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
			    struct knitk_knot **knot)
{
	struct knitk_knot *k = knot_alloc(ops);
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
	*knot = k;
	return 0;
}

KNITK_EXPORT int knitk_knot_create(const struct knitk_geometry *geom,
				   unsigned int flags, struct knitk_knot **knot)
{
	const struct knitk_backend_ops *ops;
	struct knitk_layout layout;
	int ret;

	if (!geom || !knot || (flags & ~(KNITK_KNOT_KMOD | KNITK_KNOT_FUTEX)))
		return -EINVAL;
	ret = knitk_layout_compute(geom, &layout);
	if (ret)
		return ret;
	ret = knot_pick_backend(flags, &ops);
	if (ret)
		return ret;
	if (ops)
		return knot_create_with(ops, geom, &layout, knot);
	ret = knot_create_with(&knitk_backend_kmod, geom, &layout, knot);
	if (ret != -ENODEV)
		return ret;
	return knot_create_with(&knitk_backend_futex, geom, &layout, knot);
}

KNITK_EXPORT int knitk_knot_attach(int fd, unsigned int flags,
				   struct knitk_knot **knot)
{
	const struct knitk_backend_ops *ops;
	struct knitk_knot *k;
	struct stat st;
	int ret;

	if (fd < 0 || !knot || (flags & ~KNITK_ATTACH_TAKE_FD))
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
	if (flags & KNITK_ATTACH_TAKE_FD)
		close(fd);
	*knot = k;
	return 0;
}

KNITK_EXPORT int knitk_knot_join(struct knitk_knot *knot, unsigned int role,
				 unsigned int worker)
{
	int ret;

	if (!knot)
		return -EINVAL;
	if (role == KNITK_ROLE_HOST) {
		if (worker)
			return -EINVAL;
	} else if (role != KNITK_ROLE_WORKER || worker >= knot->geom.nr_workers) {
		return -EINVAL;
	}
	if (knot->slot >= 0)
		return -EALREADY;
	ret = knot->ops->join(knot, role, worker);
	if (ret < 0)
		return ret;
	knot->slot = role == KNITK_ROLE_HOST ? KNITK_DOORBELL_HOST : (int)worker;
	return ret;
}

KNITK_EXPORT void knitk_knot_destroy(struct knitk_knot *knot)
{
	if (!knot)
		return;
	knot->ops->release(knot);
	free(knot);
}

KNITK_EXPORT int knitk_knot_fd(const struct knitk_knot *knot)
{
	return knot ? knot->fd : -EINVAL;
}

KNITK_EXPORT int knitk_knot_backend(const struct knitk_knot *knot)
{
	return knot ? knot->ops->kind : -EINVAL;
}

KNITK_EXPORT int knitk_knot_layout(const struct knitk_knot *knot,
				   struct knitk_layout *layout,
				   struct knitk_geometry *geom)
{
	if (!knot || (!layout && !geom))
		return -EINVAL;
	if (layout)
		*layout = knot->layout;
	if (geom)
		*geom = knot->geom;
	return 0;
}

KNITK_EXPORT int knitk_knot_control(const struct knitk_knot *knot,
				    const struct knitk_control **control)
{
	if (!knot || !control)
		return -EINVAL;
	*control = knot_control(knot);
	return 0;
}

KNITK_EXPORT int knitk_knot_base(const struct knitk_knot *knot, void **base)
{
	if (!knot || !base)
		return -EINVAL;
	*base = knot->base;
	return 0;
}

KNITK_EXPORT int knitk_knot_role_slot(const struct knitk_knot *knot)
{
	if (!knot)
		return -EINVAL;
	return knot->slot < 0 ? -ENOTCONN : knot->slot;
}

static bool knot_slot_valid(const struct knitk_knot *knot, unsigned int slot)
{
	return slot == KNITK_DOORBELL_HOST || slot < knot->geom.nr_workers;
}

KNITK_EXPORT int knitk_knot_mark_dead(struct knitk_knot *knot,
				      unsigned int slot)
{
	if (!knot || !knot_slot_valid(knot, slot))
		return -EINVAL;
	return knot->ops->mark_dead(knot, slot);
}

/*
 * The control page's words, read in the order that makes them agree with
 * each other: the kernel (kmod/knitk_peer.c) or futex_join and
 * futex_mark_dead write them.
 */
KNITK_EXPORT int knitk_knot_deaths(const struct knitk_knot *knot,
				   uint32_t *death_seq, uint64_t *dead)
{
	const struct knitk_control *ctl;
	uint32_t seq;

	if (!knot || (!death_seq && !dead))
		return -EINVAL;
	ctl = knot_control(knot);
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

KNITK_EXPORT int knitk_knot_role(const struct knitk_knot *knot,
				 unsigned int slot, uint32_t *generation)
{
	const struct knitk_control *ctl;
	uint64_t live;

	if (!knot || !knot_slot_valid(knot, slot))
		return -EINVAL;
	ctl = knot_control(knot);
	/*
	 * Acquire pairs with the release of live in knitk_peer_join()
	 * (after the new generation) or the seq_cst RMWs of futex_join():
	 * a live bit seen here comes with its join's generation below.
	 */
	live = atomic_load_explicit(A64(&ctl->live), memory_order_acquire);
	if (generation)
		*generation = atomic_load_explicit(A32(&ctl->generation[slot]),
						   memory_order_acquire);
	return !!(live & (1ULL << slot));
}

KNITK_EXPORT int knitk_knot_host_dead(const struct knitk_knot *knot)
{
	if (!knot)
		return -EINVAL;
	return knot_host_dead(knot);
}

KNITK_EXPORT int knitk_knot_set_event_fd(struct knitk_knot *knot, int efd)
{
	if (!knot || efd < -1)
		return -EINVAL;
	if (knot->ops->kind != KNITK_BACKEND_FUTEX)
		return -EOPNOTSUPP;
	/* Pairs with the acquire in host_event_signal (backend_futex.c). */
	atomic_store_explicit(&knot->event_fd, efd, memory_order_release);
	return 0;
}
