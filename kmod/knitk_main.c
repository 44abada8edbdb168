// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: kernel-assisted shared-memory IPC - the /dev/knitk misc device.
 *
 * For a userspace programmer (the structs are in <linux/knitk.h>):
 *
 *   fd = open("/dev/knitk", O_RDWR)       an endpoint, attached to nothing
 *   ioctl(fd, KNITK_IOC_API, &api)        api.api = KNITK_API; returns the
 *                                         features and the ioctls supported
 *   ioctl(fd, KNITK_IOC_CREATE, &c)       make a knot from c.geometry and
 *                                         attach fd to it; c.layout says
 *                                         where everything lives
 *   ioctl(fd2, KNITK_IOC_ATTACH, &a)      attach another endpoint (any
 *                                         process) to the knot of a.fd
 *   mmap(NULL, layout.control_size, PROT_READ, MAP_SHARED, fd, 0)
 *                                         the control page, read-only
 *   mmap(NULL, layout.size - layout.control_size,
 *        PROT_READ | PROT_WRITE, MAP_SHARED, fd, layout.control_size)
 *                                         doorbells, abort bitmap, steal
 *                                         lines and mailboxes
 *   ioctl(fd, KNITK_IOC_JOIN, &j)         become the host or worker N
 *   ioctl(fd, KNITK_IOC_WAIT, &w)         sleep on the own doorbell while
 *                                         its seq equals w.expected
 *   ioctl(fd, KNITK_IOC_NOTIFY, &n)       ring doorbells; only a sleeping
 *                                         owner with pending work is woken,
 *                                         or any with KNITK_NOTIFY_KICK
 *   ioctl(fd, KNITK_IOC_NOTIFY_WAIT, &nw) ring doorbells as NOTIFY does,
 *                                         with a synchronous wake, then
 *                                         wait as WAIT does, in one call
 *   ioctl(fd, KNITK_IOC_STATS, &s)        a doorbell's counters
 *   IORING_OP_URING_CMD, cmd_op KNITK_URING_CMD_WAIT
 *                                         KNITK_IOC_WAIT for an io_uring
 *                                         loop (knitk_uring.c)
 *   poll(fd)                              the own doorbell (the host's when
 *                                         not joined): POLLIN while work is
 *                                         pending, POLLPRI while a role is
 *                                         dead, POLLHUP when the host died;
 *                                         POLLHUP | POLLERR alone once the
 *                                         endpoint's own role has ended;
 *                                         epoll may register at any time
 *   close(fd)                             the joining process's last close
 *                                         of the endpoint, or its exit,
 *                                         marks its role dead in the control
 *                                         page and wakes its peers, whatever
 *                                         forked children, fds in other
 *                                         processes or mappings still hold
 *                                         the file; the last endpoint (and
 *                                         mapping) frees the knot
 *
 * Errors are negative errno values: -EINVAL for bad arguments, reserved
 * fields or unknown flags, -ENOTTY for an unknown ioctl, -ENOTCONN when the
 * endpoint is not attached (or, for WAIT, holds no role), -EBUSY for a second
 * CREATE/ATTACH/JOIN or a role already held, -E2BIG for a knot larger than
 * the max_knot_bytes parameter, -ENOMEM for a knot that does not fit in
 * memory or in the creating user's RLIMIT_MEMLOCK.
 *
 * /dev/knitk is 0666 by default, so knot memory is bounded per user too: a
 * knot's pages are pinned and charged, the way io_uring charges its rings,
 * to the creating user's locked_vm against RLIMIT_MEMLOCK (not for
 * CAP_IPC_LOCK) until the knot is freed, besides the creator's memcg.
 */
#include <linux/compat.h>
#include <linux/err.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "knitk_internal.h"

static ushort mode = 0666;
module_param(mode, ushort, 0444);
MODULE_PARM_DESC(mode, "mode of the /dev/knitk node (default 0666)");

static ulong max_knot_bytes = 256UL << 20;
module_param(max_knot_bytes, ulong, 0644);
MODULE_PARM_DESC(max_knot_bytes, "largest knot CREATE accepts, in bytes");

#define KNITK_FEATURES	(KNITK_FEATURE_STEAL | KNITK_FEATURE_PEER_DEATH | \
			 KNITK_FEATURE_STATS | KNITK_FEATURE_POLL | \
			 KNITK_FEATURE_KICK | KNITK_FEATURE_SPIN | \
			 KNITK_FEATURE_NOTIFY_WAIT | KNITK_FEATURE_URING_CMD | \
			 KNITK_FEATURE_HUGE | KNITK_FEATURE_WORD_WAIT)

/**
 * struct knitk_endpoint - one open of /dev/knitk
 * @lock: serialises CREATE and ATTACH.
 * @knot: the attached knot; set once, published with a release store.
 * @role: the joined role and the process that owns it.
 * @poller: what poll() registers on, from open to release.
 */
struct knitk_endpoint {
	struct mutex lock; /* knot is set once */
	struct knitk_knot *knot;
	struct knitk_role role;
	struct knitk_poller poller;
};

static const struct file_operations knitk_fops;

static struct knitk_knot *knitk_endpoint_knot(struct knitk_endpoint *ep)
{
	/* Pairs with the smp_store_release() in knitk_endpoint_attach(). */
	return smp_load_acquire(&ep->knot);
}

static void knitk_endpoint_attach(struct knitk_endpoint *ep,
				  struct knitk_knot *knot)
{
	/* Unjoined, the endpoint's pollers watch the host's doorbell. */
	knitk_poller_watch(&ep->poller, knot, KNITK_DOORBELL_HOST);
	/* The knot is fully built before other threads of ep can see it. */
	smp_store_release(&ep->knot, knot);
	/* No more EPOLLERR, and maybe EPOLLIN: after the store poll() reads. */
	knitk_poller_wake(&ep->poller);
}

static int knitk_ioctl_api(void __user *argp)
{
	struct knitk_api api;

	if (copy_from_user(&api, argp, sizeof(api)))
		return -EFAULT;
	if (api.api != KNITK_API || api.features & ~KNITK_FEATURES)
		return -EINVAL;
	api.features = KNITK_FEATURES;
	api.ioctls = BIT_ULL(_IOC_NR(KNITK_IOC_API)) |
		     BIT_ULL(_IOC_NR(KNITK_IOC_CREATE)) |
		     BIT_ULL(_IOC_NR(KNITK_IOC_ATTACH)) |
		     BIT_ULL(_IOC_NR(KNITK_IOC_JOIN)) |
		     BIT_ULL(_IOC_NR(KNITK_IOC_WAIT)) |
		     BIT_ULL(_IOC_NR(KNITK_IOC_NOTIFY)) |
		     BIT_ULL(_IOC_NR(KNITK_IOC_STATS)) |
		     BIT_ULL(_IOC_NR(KNITK_IOC_NOTIFY_WAIT)) |
		     BIT_ULL(_IOC_NR(KNITK_IOC_WORD_WAIT)) |
		     BIT_ULL(_IOC_NR(KNITK_IOC_WORD_WAKE));
	if (copy_to_user(argp, &api, sizeof(api)))
		return -EFAULT;
	return 0;
}

static int knitk_ioctl_create(struct knitk_endpoint *ep, void __user *argp)
{
	struct knitk_create c;
	struct knitk_knot *knot;
	int ret;

	if (copy_from_user(&c, argp, sizeof(c)))
		return -EFAULT;

	mutex_lock(&ep->lock);
	if (ep->knot) {
		ret = -EBUSY;
		goto out;
	}
	ret = knitk_geometry_check(&c.geometry);
	if (ret)
		goto out;
	/* The knot records, and CREATE returns, the size its claimants use. */
	c.geometry.region_lanes = knitk_geometry_region_lanes(&c.geometry);
	knitk_layout_compute(&c.geometry, &c.layout);
	ret = knitk_layout_check_size(&c.layout, READ_ONCE(max_knot_bytes));
	if (ret)
		goto out;
	knot = knitk_knot_create(&c.geometry, &c.layout);
	if (IS_ERR(knot)) {
		ret = PTR_ERR(knot);
		goto out;
	}
	if (copy_to_user(argp, &c, sizeof(c))) {
		knitk_knot_put(knot);
		ret = -EFAULT;
		goto out;
	}
	knitk_endpoint_attach(ep, knot);
out:
	mutex_unlock(&ep->lock);
	return ret;
}

static int knitk_ioctl_attach(struct knitk_endpoint *ep, void __user *argp)
{
	struct knitk_endpoint *src;
	struct knitk_knot *knot;
	struct knitk_attach a;
	struct fd f;
	int ret = 0;

	if (copy_from_user(&a, argp, sizeof(a)))
		return -EFAULT;

	mutex_lock(&ep->lock);
	if (ep->knot) {
		ret = -EBUSY;
		goto out;
	}
	if (a.flags) {
		ret = -EINVAL;
		goto out;
	}
	f = fdget(a.fd);
	if (!f.file) {
		ret = -EBADF;
		goto out;
	}
	if (f.file->f_op != &knitk_fops) {
		ret = -EINVAL;
		goto out_put;
	}
	src = f.file->private_data;
	/* The source file is held by fdget, so its knot reference is too. */
	knot = knitk_endpoint_knot(src);
	if (!knot) {
		ret = -ENOTCONN;
		goto out_put;
	}
	a.layout = knot->layout;
	if (copy_to_user(argp, &a, sizeof(a))) {
		ret = -EFAULT;
		goto out_put;
	}
	knitk_knot_get(knot);
	knitk_endpoint_attach(ep, knot);
out_put:
	fdput(f);
out:
	mutex_unlock(&ep->lock);
	return ret;
}

/*
 * A join or a ring cannot be taken back, so the argument of one is
 * written back unchanged first: an argument that can be read but not
 * written (a read-only page) gives -EFAULT with nothing done, instead of
 * the work being done and then its copy out failing.
 */
static bool knitk_arg_writable(void __user *argp, const void *arg, size_t len)
{
	return !copy_to_user(argp, arg, len);
}

static int knitk_ioctl_join(struct file *file, struct knitk_knot *knot,
			    void __user *argp)
{
	struct knitk_endpoint *ep = file->private_data;
	struct knitk_join j;
	int slot, ret;

	if (copy_from_user(&j, argp, sizeof(j)))
		return -EFAULT;
	if (j.flags)
		return -EINVAL;
	slot = knitk_peer_slot(&knot->geometry, j.role, j.worker);
	if (slot < 0)
		return slot;
	if (!knitk_arg_writable(argp, &j, sizeof(j)))
		return -EFAULT;

	ret = knitk_role_join(&ep->role, knot, file, slot, &j.generation);
	if (ret)
		return ret;
	knitk_poller_watch(&ep->poller, knot, slot);
	knitk_poller_wake(&ep->poller);
	/* Written above: only a page made read-only meanwhile fails here. */
	if (copy_to_user(argp, &j, sizeof(j)))
		return -EFAULT;
	return 0;
}

/* The slot of a joined role that has not ended, or -ENOTCONN. */
static int knitk_endpoint_wait_slot(struct knitk_endpoint *ep)
{
	int slot = READ_ONCE(ep->role.slot);

	if (slot == KNITK_NO_SLOT || READ_ONCE(ep->role.ended))
		return -ENOTCONN;
	return slot;
}

static int knitk_ioctl_wait(struct knitk_endpoint *ep, struct knitk_knot *knot,
			    void __user *argp)
{
	struct knitk_wait w;
	int slot;

	if (copy_from_user(&w, argp, sizeof(w)))
		return -EFAULT;
	if ((w.flags & ~KNITK_WAIT_FLAGS) || w.reserved)
		return -EINVAL;
	slot = knitk_endpoint_wait_slot(ep);
	if (slot < 0)
		return slot;
	return knitk_doorbell_wait(knot, slot, &ep->role, w.expected, w.flags,
				   w.deadline_ns, false);
}

/* Ring, then wait (docs/protocol.md S9); never restarted once rung. */
static int knitk_ioctl_notify_wait(struct knitk_endpoint *ep,
				   struct knitk_knot *knot, void __user *argp)
{
	struct knitk_notify_wait nw;
	int slot, ret;

	if (copy_from_user(&nw, argp, sizeof(nw)))
		return -EFAULT;
	if ((nw.flags & ~KNITK_WAIT_FLAGS) || nw.reserved[0] || nw.reserved[1])
		return -EINVAL;
	slot = knitk_endpoint_wait_slot(ep);
	if (slot < 0)
		return slot;
	/* -EFAULT before the ring, not after it. */
	if (!knitk_arg_writable(argp, &nw, sizeof(nw)))
		return -EFAULT;
	ret = knitk_doorbell_notify_wait(knot, slot, &ep->role, nw.doorbells,
					 nw.expected, nw.flags, nw.deadline_ns,
					 &nw.woken);
	if (ret == -EINVAL)
		return ret;
	if (copy_to_user(argp, &nw, sizeof(nw)))
		return -EFAULT;
	return ret;
}

static int knitk_ioctl_notify(struct knitk_knot *knot, void __user *argp)
{
	struct knitk_notify n;
	int ret;

	if (copy_from_user(&n, argp, sizeof(n)))
		return -EFAULT;
	if ((n.flags & ~KNITK_NOTIFY_FLAGS) || n.reserved)
		return -EINVAL;
	if (!knitk_arg_writable(argp, &n, sizeof(n)))
		return -EFAULT;
	ret = knitk_doorbell_notify(knot, n.doorbells, n.flags, false,
				    &n.woken);
	if (ret)
		return ret;
	if (copy_to_user(argp, &n, sizeof(n)))
		return -EFAULT;
	return 0;
}

static int knitk_ioctl_word_wait(struct knitk_knot *knot, void __user *argp)
{
	struct knitk_word_wait ww;

	if (copy_from_user(&ww, argp, sizeof(ww)))
		return -EFAULT;
	return knitk_word_wait(knot, &ww);
}

static int knitk_ioctl_word_wake(struct knitk_knot *knot, void __user *argp)
{
	struct knitk_word_wake wk;
	int ret;

	if (copy_from_user(&wk, argp, sizeof(wk)))
		return -EFAULT;
	/* -EFAULT before the wake, not after it. */
	if (!knitk_arg_writable(argp, &wk, sizeof(wk)))
		return -EFAULT;
	ret = knitk_word_wake(knot, &wk);
	if (ret)
		return ret;
	if (copy_to_user(argp, &wk, sizeof(wk)))
		return -EFAULT;
	return 0;
}

static int knitk_ioctl_stats(struct knitk_knot *knot, void __user *argp,
			     size_t usize)
{
	struct knitk_stats s;
	size_t n = min(usize, sizeof(s));

	/* A new counter needs a new KNITK_STATS_SIZE_VER*. */
	BUILD_BUG_ON(sizeof(s) != KNITK_STATS_SIZE_VER2);
	if (copy_from_user(&s, argp, offsetof(struct knitk_stats, stats)))
		return -EFAULT;
	if (s.flags || !knitk_doorbell_valid(&knot->geometry, s.doorbell))
		return -EINVAL;
	knitk_doorbell_stats(knot, s.doorbell, &s.stats);
	if (copy_to_user(argp, &s, n))
		return -EFAULT;
	/* A caller with newer headers: counters this module lacks read 0. */
	if (usize > n && clear_user(argp + n, usize - n))
		return -EFAULT;
	return 0;
}

/*
 * KNITK_IOC_STATS of any size from the first version on is the one command
 * (see struct knitk_stats); every other command must match exactly.
 */
static unsigned int knitk_ioctl_cmd(unsigned int cmd)
{
	if (_IOC_TYPE(cmd) == KNITK_IOC_MAGIC &&
	    _IOC_NR(cmd) == _IOC_NR(KNITK_IOC_STATS) &&
	    _IOC_DIR(cmd) == (_IOC_READ | _IOC_WRITE) &&
	    _IOC_SIZE(cmd) >= KNITK_STATS_SIZE_VER0)
		return KNITK_IOC_STATS;
	return cmd;
}

static long knitk_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct knitk_endpoint *ep = file->private_data;
	void __user *argp = (void __user *)arg;
	size_t usize = _IOC_SIZE(cmd);
	struct knitk_knot *knot;

	cmd = knitk_ioctl_cmd(cmd);
	switch (cmd) {
	case KNITK_IOC_API:
		return knitk_ioctl_api(argp);
	case KNITK_IOC_CREATE:
		return knitk_ioctl_create(ep, argp);
	case KNITK_IOC_ATTACH:
		return knitk_ioctl_attach(ep, argp);
	case KNITK_IOC_JOIN:
	case KNITK_IOC_WAIT:
	case KNITK_IOC_NOTIFY:
	case KNITK_IOC_NOTIFY_WAIT:
	case KNITK_IOC_WORD_WAIT:
	case KNITK_IOC_WORD_WAKE:
	case KNITK_IOC_STATS:
		break;
	default:
		return -ENOTTY;
	}

	knot = knitk_endpoint_knot(ep);
	if (!knot)
		return -ENOTCONN;
	switch (cmd) {
	case KNITK_IOC_JOIN:
		return knitk_ioctl_join(file, knot, argp);
	case KNITK_IOC_WAIT:
		return knitk_ioctl_wait(ep, knot, argp);
	case KNITK_IOC_NOTIFY:
		return knitk_ioctl_notify(knot, argp);
	case KNITK_IOC_NOTIFY_WAIT:
		return knitk_ioctl_notify_wait(ep, knot, argp);
	case KNITK_IOC_WORD_WAIT:
		return knitk_ioctl_word_wait(knot, argp);
	case KNITK_IOC_WORD_WAKE:
		return knitk_ioctl_word_wake(knot, argp);
	default:
		return knitk_ioctl_stats(knot, argp, usize);
	}
}

static __poll_t knitk_poll(struct file *file, struct poll_table_struct *pt)
{
	struct knitk_endpoint *ep = file->private_data;
	struct knitk_knot *knot;
	int slot;

	/* First: a CREATE, ATTACH or JOIN after the loads below wakes it. */
	knitk_poller_register(&ep->poller, file, pt);
	knot = knitk_endpoint_knot(ep);
	if (!knot)
		return EPOLLERR;
	slot = READ_ONCE(ep->role.slot);
	if (slot == KNITK_NO_SLOT)
		slot = KNITK_DOORBELL_HOST;
	else if (knitk_poll_role_ended(&ep->role))
		return EPOLLHUP | EPOLLERR;
	return knitk_poll_mask(knot, slot);
}

/**
 * knitk_file_knot() - the knot and role of an endpoint file
 * @file: a /dev/knitk file
 * @r: out: the endpoint's role
 *
 * Return: the attached knot (held by the file), or NULL.
 */
struct knitk_knot *knitk_file_knot(struct file *file, struct knitk_role **r)
{
	struct knitk_endpoint *ep = file->private_data;

	*r = &ep->role;
	return knitk_endpoint_knot(ep);
}

static int knitk_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct knitk_endpoint *ep = file->private_data;
	struct knitk_knot *knot = knitk_endpoint_knot(ep);

	if (!knot)
		return -ENOTCONN;
	return knitk_knot_mmap(knot, vma);
}

static int knitk_open(struct inode *inode, struct file *file)
{
	struct knitk_endpoint *ep;

	ep = kzalloc(sizeof(*ep), GFP_KERNEL_ACCOUNT);
	if (!ep)
		return -ENOMEM;
	mutex_init(&ep->lock);
	knitk_role_init(&ep->role);
	knitk_poller_init(&ep->poller);
	file->private_data = ep;
	return stream_open(inode, file);
}

/* Every close of an fd: the owner's last close ends its role. */
static int knitk_flush(struct file *file, fl_owner_t id)
{
	struct knitk_endpoint *ep = file->private_data;

	knitk_role_flush(&ep->role, file, id);
	return 0;
}

/* Undoes JOIN, then CREATE/ATTACH, then open. */
static int knitk_release(struct inode *inode, struct file *file)
{
	struct knitk_endpoint *ep = file->private_data;
	struct knitk_knot *knot = ep->knot;

	if (knot) {
		knitk_role_release(&ep->role);
		knitk_poller_release(&ep->poller);
		knitk_knot_put(knot);
	}
	mutex_destroy(&ep->lock);
	kfree(ep);
	return 0;
}

static const struct file_operations knitk_fops = {
	.owner		= THIS_MODULE,
	.open		= knitk_open,
	.flush		= knitk_flush,
	.release	= knitk_release,
	.unlocked_ioctl	= knitk_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.mmap		= knitk_mmap,
	.poll		= knitk_poll,
	.uring_cmd	= knitk_uring_cmd,
	.llseek		= no_llseek,
};

static struct miscdevice knitk_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "knitk",
	.fops	= &knitk_fops,
};

static int __init knitk_init(void)
{
	int ret;

	knitk_misc.mode = mode;
	knitk_knot_debugfs_init();
	ret = misc_register(&knitk_misc);
	if (ret)
		knitk_knot_debugfs_exit();
	return ret;
}

static void __exit knitk_exit(void)
{
	misc_deregister(&knitk_misc);
	knitk_knot_debugfs_exit();
	knitk_mm_watch_exit();
}

module_init(knitk_init);
module_exit(knitk_exit);

MODULE_DESCRIPTION("knitk: kernel-assisted shared-memory IPC");
MODULE_AUTHOR("knitk developers");
MODULE_LICENSE("GPL");
#ifdef KNITK_VERSION
MODULE_VERSION(KNITK_VERSION);
#endif
