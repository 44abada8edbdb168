/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared helpers of the knitk selftests: open an endpoint, create and map a
 * knot, the ioctls as functions returning 0 or a negative errno, and the
 * layout formula of uapi/linux/knitk.h computed independently of the module.
 *
 * Every helper returns an error instead of asserting, so a test states each
 * expectation itself with the harness's ASSERT_ and EXPECT_ macros.
 */
#ifndef KNITK_TEST_H
#define KNITK_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/knitk.h>

#define KNITK_DEV	"/dev/knitk"
#define KNITK_SYSMOD	"/sys/module/knitk"

/* A wake must come long before this; only a lost wake ever reaches it. */
#define KNITK_LONG_NS	(60ULL * 1000 * 1000 * 1000)
#define KNITK_MS	(1000ULL * 1000)

/*
 * The 6.1 harness runs a test body even when its fixture setup skipped, so
 * a skip ends the test process itself; exit status 255 is the harness's
 * "skipped" and the reason is already in its shared results page.  The 6.1
 * harness prints only the reason on a skipped result, so it names the test.
 */
#define KNITK_REQUIRE_DEV() do {					\
	if (access(KNITK_DEV, F_OK) != 0)				\
		SKIP(_exit(255), "%s: %s absent: modprobe knitk first",	\
		     _metadata->name, KNITK_DEV);			\
} while (0)

static inline int knitk_ioctl(int fd, unsigned long cmd, void *arg)
{
	int ret = ioctl(fd, cmd, arg);

	return ret < 0 ? -errno : ret;
}

/* A bare endpoint: opened, nothing negotiated. */
static inline int knitk_open_raw(void)
{
	int fd = open(KNITK_DEV, O_RDWR | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/* An endpoint after the API handshake, as every real user starts. */
static inline int knitk_open(void)
{
	struct knitk_api api = { .api = KNITK_API };
	int fd = knitk_open_raw();
	int ret;

	if (fd < 0)
		return fd;
	ret = knitk_ioctl(fd, KNITK_IOC_API, &api);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

static inline void knitk_geom(struct knitk_geometry *g, __u32 flags,
			      __u32 workers, __u32 submitters, __u32 inline_bytes,
			      __u32 abort_bits, __u64 arena_bytes)
{
	memset(g, 0, sizeof(*g));
	g->flags = flags;
	g->nr_workers = workers;
	g->nr_submitters = submitters;
	g->lanes = KNITK_LANES;
	g->inline_bytes = inline_bytes;
	g->abort_bits = abort_bits;
	g->arena_bytes = arena_bytes;
}

/* The small knot most tests use: 2 workers, 1 submitter, private lanes. */
static inline void knitk_geom_small(struct knitk_geometry *g)
{
	knitk_geom(g, 0, 2, 1, 64, 64, KNITK_ARENA_ALIGN);
}

static inline int knitk_create(int fd, const struct knitk_geometry *g,
			       struct knitk_layout *l)
{
	struct knitk_create c = { .geometry = *g };
	int ret = knitk_ioctl(fd, KNITK_IOC_CREATE, &c);

	if (!ret && l)
		*l = c.layout;
	return ret;
}

static inline int knitk_attach(int fd, int src, struct knitk_layout *l)
{
	struct knitk_attach a = { .fd = src };
	int ret = knitk_ioctl(fd, KNITK_IOC_ATTACH, &a);

	if (!ret && l)
		*l = a.layout;
	return ret;
}

static inline int knitk_join(int fd, __u32 role, __u32 worker,
			     __u32 *generation)
{
	struct knitk_join j = { .role = role, .worker = worker };
	int ret = knitk_ioctl(fd, KNITK_IOC_JOIN, &j);

	if (!ret && generation)
		*generation = j.generation;
	return ret;
}

static inline int knitk_wait(int fd, __u32 expected, __u64 deadline_ns)
{
	struct knitk_wait w = { .expected = expected,
				.deadline_ns = deadline_ns };

	return knitk_ioctl(fd, KNITK_IOC_WAIT, &w);
}

/* KNITK_IOC_WAIT with @flags (KNITK_WAIT_SPIN). */
static inline int knitk_wait_flags(int fd, __u32 expected, __u32 flags,
				   __u64 deadline_ns)
{
	struct knitk_wait w = { .expected = expected, .flags = flags,
				.deadline_ns = deadline_ns };

	return knitk_ioctl(fd, KNITK_IOC_WAIT, &w);
}

/* KNITK_IOC_NOTIFY_WAIT; *@woken is set whenever the call wrote it. */
static inline int knitk_notify_wait(int fd, __u64 doorbells, __u32 expected,
				    __u32 flags, __u64 deadline_ns,
				    __u64 *woken)
{
	struct knitk_notify_wait nw = { .doorbells = doorbells,
					.woken = ~0ULL,
					.expected = expected, .flags = flags,
					.deadline_ns = deadline_ns };
	int ret = knitk_ioctl(fd, KNITK_IOC_NOTIFY_WAIT, &nw);

	if (woken)
		*woken = nw.woken;
	return ret;
}

static inline int knitk_notify(int fd, __u64 doorbells, __u64 *woken)
{
	struct knitk_notify n = { .doorbells = doorbells };
	int ret = knitk_ioctl(fd, KNITK_IOC_NOTIFY, &n);

	if (!ret && woken)
		*woken = n.woken;
	return ret;
}

/* KNITK_NOTIFY_KICK: ring @doorbells past the idle filter. */
static inline int knitk_kick(int fd, __u64 doorbells, __u64 *woken)
{
	struct knitk_notify n = { .doorbells = doorbells,
				  .flags = KNITK_NOTIFY_KICK };
	int ret = knitk_ioctl(fd, KNITK_IOC_NOTIFY, &n);

	if (!ret && woken)
		*woken = n.woken;
	return ret;
}

static inline int knitk_stats(int fd, __u32 doorbell,
			      struct knitk_doorbell_stats *st)
{
	struct knitk_stats s = { .doorbell = doorbell };
	int ret = knitk_ioctl(fd, KNITK_IOC_STATS, &s);

	if (!ret && st)
		*st = s.stats;
	return ret;
}

static inline __u64 knitk_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * A mapped knot: the read-only control page and the read-write data region
 * (file offset layout.control_size onwards), each mapped exactly.
 */
struct knot {
	int fd;
	struct knitk_layout layout;
	const struct knitk_control *ctl;
	unsigned char *data;
};

static inline int knot_map(struct knot *k)
{
	void *c, *d;

	c = mmap(NULL, k->layout.control_size, PROT_READ, MAP_SHARED, k->fd, 0);
	if (c == MAP_FAILED)
		return -errno;
	d = mmap(NULL, k->layout.size - k->layout.control_size,
		 PROT_READ | PROT_WRITE, MAP_SHARED, k->fd,
		 k->layout.control_size);
	if (d == MAP_FAILED) {
		int err = -errno;

		munmap(c, k->layout.control_size);
		return err;
	}
	k->ctl = c;
	k->data = d;
	return 0;
}

static inline void knot_unmap(struct knot *k)
{
	if (k->ctl)
		munmap((void *)k->ctl, k->layout.control_size);
	if (k->data)
		munmap(k->data, k->layout.size - k->layout.control_size);
	k->ctl = NULL;
	k->data = NULL;
}

/* Open, create and map; on error nothing is left open. */
static inline int knot_make(struct knot *k, const struct knitk_geometry *g)
{
	int ret;

	memset(k, 0, sizeof(*k));
	k->fd = knitk_open();
	if (k->fd < 0)
		return k->fd;
	ret = knitk_create(k->fd, g, &k->layout);
	if (!ret)
		ret = knot_map(k);
	if (ret) {
		close(k->fd);
		k->fd = -1;
	}
	return ret;
}

static inline void knot_close(struct knot *k)
{
	knot_unmap(k);
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
}

/* A new endpoint of k's knot, joined with a role; returns its fd. */
static inline int knot_endpoint(const struct knot *k, __u32 role,
				__u32 worker)
{
	int fd = knitk_open();
	int ret;

	if (fd < 0)
		return fd;
	ret = knitk_attach(fd, k->fd, NULL);
	if (!ret)
		ret = knitk_join(fd, role, worker, NULL);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* A new endpoint of k's knot, attached and unjoined; returns its fd. */
static inline int knot_attached(const struct knot *k)
{
	int fd = knitk_open();

	if (fd >= 0 && knitk_attach(fd, k->fd, NULL)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Pointer to knot offset off (off >= control_size) in the data mapping. */
static inline void *knot_at(const struct knot *k, __u64 off)
{
	return k->data + (off - k->layout.control_size);
}

static inline struct knitk_doorbell *knot_doorbell(const struct knot *k,
						   unsigned int d)
{
	return knot_at(k, k->layout.doorbell_off +
			  (__u64)d * k->layout.doorbell_stride);
}

static inline struct knitk_sector *knot_mailbox(const struct knot *k,
						unsigned int m)
{
	return knot_at(k, k->layout.mailbox_off +
			  (__u64)m * k->layout.mailbox_stride);
}

static inline struct knitk_steal_line *knot_steal_line(const struct knot *k,
						       unsigned int i)
{
	return knot_at(k, k->layout.steal_off +
			  (__u64)i * k->layout.steal_stride);
}

/* Producer side of lane L: toggle its pub bit (the test is the one writer). */
static inline void knot_lane_publish(struct knitk_sector *s, unsigned int L)
{
	/* Pairs with the kernel's acquire load of pub in the notify filter. */
	__atomic_fetch_xor(&s->pub, 1ULL << L, __ATOMIC_RELEASE);
}

static inline void knot_lane_ack(__u64 *ack, unsigned int L)
{
	__atomic_fetch_xor(ack, 1ULL << L, __ATOMIC_RELEASE);
}

static inline void knitk_doorbell_sleeping(struct knitk_doorbell *db, int on)
{
	/* seq_cst: pairs with the full barrier before the waker reads it. */
	__atomic_store_n(&db->sleeping, on ? 1 : 0, __ATOMIC_SEQ_CST);
}

static inline __u32 knitk_doorbell_seq(const struct knitk_doorbell *db)
{
	return __atomic_load_n(&db->seq, __ATOMIC_ACQUIRE);
}

static inline __u64 knitk_load64(const __u64 *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline __u32 knitk_load32(const __u32 *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/*
 * Block until doorbell d has counted at least n waits that went to sleep:
 * the kernel's own word that the waiter is in KNITK_IOC_WAIT, so a notify or
 * signal sent afterwards cannot land before the wait began.
 */
static inline int knitk_wait_asleep(int fd, __u32 d, __u64 n)
{
	struct knitk_doorbell_stats st;
	int ret;

	for (;;) {
		ret = knitk_stats(fd, d, &st);
		if (ret)
			return ret;
		if (st.waits >= n)
			return 0;
		usleep(1000);
	}
}

/* The start of file @path in @buf, NUL-terminated; 0 or a negative errno. */
static inline int knitk_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	return 0;
}

/* String @s written whole to file @path: 0 or a negative errno (-EIO if short). */
static inline int knitk_write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : (n < 0 ? -errno : -EIO);
}

/* Scheduler state letter of thread tid of this process ('S' = asleep). */
static inline char knitk_thread_state(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	if (knitk_read_file(path, buf, sizeof(buf)))
		return '?';
	/* The comm field may hold spaces; the state follows its ')'. */
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static inline pid_t knitk_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Pass fd over the Unix socket sock with SCM_RIGHTS (one byte of data). */
static inline int knitk_send_fd(int sock, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char byte = 'k';
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -errno;
}

/* Receive an fd sent by knitk_send_fd(); -1 on failure. */
static inline int knitk_recv_fd(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int fd;

	if (recvmsg(sock, &msg, 0) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&msg);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/* Read a decimal value from a sysfs file; negative errno on failure. */
static inline int knitk_sysfs_read(const char *path, unsigned long long *v)
{
	char buf[64];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EIO;
	buf[n] = '\0';
	*v = strtoull(buf, NULL, 0);
	return 0;
}

static inline int knitk_sysfs_write(const char *path, unsigned long long v)
{
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%llu\n", v);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, buf, len);
	close(fd);
	return n == len ? 0 : (n < 0 ? -errno : -EIO);
}

/* A small knot whose fd joined as the host: 0 or -1. */
static inline int knot_make_host(struct knot *k)
{
	struct knitk_geometry g;

	knitk_geom_small(&g);
	if (knot_make(k, &g))
		return -1;
	return knitk_join(k->fd, KNITK_ROLE_HOST, 0, NULL) ? -1 : 0;
}

/* A small knot whose fd joined as the host, and an endpoint as worker 0. */
static inline int knot_make_host_worker(struct knot *k, int *worker)
{
	struct knitk_geometry g;

	knitk_geom_small(&g);
	if (knot_make(k, &g) ||
	    knitk_join(k->fd, KNITK_ROLE_HOST, 0, NULL))
		return -1;
	*worker = knot_endpoint(k, KNITK_ROLE_WORKER, 0);
	return *worker < 0 ? -1 : 0;
}

/*
 * The module's fault-injection knobs (kmod/knitk_hooks.c, a module built
 * with KNITK_TEST_HOOKS=y): kick_pause parks a doorbell's next kick before
 * its seq advance, spin_pause a KNITK_WAIT_SPIN wait in its spin.  Write a
 * doorbell to arm, KNITK_PAUSE_OFF to disarm and let a parked pass go on;
 * reads KNITK_PAUSE_PARKED while one is parked.
 */
#define KNITK_KICK_PAUSE	"/sys/kernel/debug/knitk/kick_pause"
#define KNITK_SPIN_PAUSE	"/sys/kernel/debug/knitk/spin_pause"
#define KNITK_PAUSE_OFF		KNITK_NR_DOORBELLS
#define KNITK_PAUSE_PARKED	2

/* Arm @knob on doorbell @d; a module without it is a failure. */
static inline int knitk_pause_arm(const char *knob, unsigned int d)
{
	if (access(knob, F_OK))
		fprintf(stderr, "# %s absent: build the module with KNITK_TEST_HOOKS=y\n",
			knob);
	return knitk_sysfs_write(knob, d);
}

/* Disarm @knob (and release a parked pass) if the module has it. */
static inline void knitk_pause_off(const char *knob)
{
	if (access(knob, F_OK) == 0)
		knitk_sysfs_write(knob, KNITK_PAUSE_OFF);
}

/* Until a pass is parked; negative errno if the knob cannot be read. */
static inline int knitk_pause_wait_parked(const char *knob)
{
	unsigned long long v;
	int ret;

	for (;;) {
		ret = knitk_sysfs_read(knob, &v);
		if (ret || v == KNITK_PAUSE_PARKED)
			return ret;
		usleep(1000);
	}
}

#endif /* KNITK_TEST_H */
