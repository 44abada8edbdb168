// SPDX-License-Identifier: GPL-2.0
/*
 * knitk-demo: one request and one reply through /dev/knitk, on the raw uAPI.
 *
 * The host creates a knot of two workers and one submitter and forks a
 * worker process, which opens its own endpoint, attaches to the knot through
 * the inherited fd, maps it and joins as worker 0, then parks on its
 * doorbell.  The host publishes one lane to worker 0 and notifies doorbells
 * 0 and 1: worker 0 is asleep with work pending and is woken, worker 1 has
 * nobody and nothing pending and the notify is suppressed.  Worker 0 answers
 * on its return mailbox and rings the host, which is parked the same way.
 * The host then prints the per-doorbell counters of KNITK_IOC_STATS.
 *
 * Exit status 0 when every step did what the protocol says, 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/knitk.h>

#define DEV		"/dev/knitk"
#define NR_WORKERS	2
#define REQUEST_VALUE	0x6b6e69746bULL	/* what the host sends */
#define REPLY_VALUE	(REQUEST_VALUE + 1)	/* what worker 0 answers */
#define HOST_WAIT_NS	(120ULL * 1000000000ULL)	/* only a lost wake gets here */
#define CHILD_WAIT_S	60

/* One mapped knot, seen by one endpoint. */
struct knot_view {
	int fd;
	struct knitk_layout layout;
	unsigned char *base;
};

static const char *who = "host";

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("%-9s ", who);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static int fail(const char *what, int err)
{
	say("FAIL: %s: %s\n", what, strerror(err < 0 ? -err : err));
	return 1;
}

/* An ioctl as 0 or a negative errno. */
static int kioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) < 0 ? -errno : 0;
}

static struct knitk_doorbell *doorbell(struct knot_view *k, unsigned int d)
{
	return (struct knitk_doorbell *)(k->base + k->layout.doorbell_off +
					 (uint64_t)d * k->layout.doorbell_stride);
}

static unsigned char *mailbox(struct knot_view *k, unsigned int m)
{
	return k->base + k->layout.mailbox_off +
	       (uint64_t)m * k->layout.mailbox_stride;
}

static struct knitk_sector *sector(struct knot_view *k, unsigned int m)
{
	return (struct knitk_sector *)mailbox(k, m);
}

/* The first 8 bytes of a lane header carry the demo's value. */
static uint64_t *lane_value(struct knot_view *k, unsigned int m, unsigned int lane)
{
	return (uint64_t *)(mailbox(k, m) + k->layout.lane_off +
			    (uint64_t)lane * k->layout.lane_stride);
}

static uint64_t pending(struct knot_view *k, unsigned int m)
{
	struct knitk_sector *s = sector(k, m);

	/* Pairs with the release stores that publish and ack lanes. */
	return __atomic_load_n(&s->pub, __ATOMIC_ACQUIRE) ^
	       __atomic_load_n(&s->ack, __ATOMIC_ACQUIRE);
}

/*
 * Maps the knot at one base: the control page read-only, the data region
 * read-write right after it, so every layout offset applies to one pointer.
 */
static int knot_map(struct knot_view *k)
{
	uint64_t csize = k->layout.control_size, size = k->layout.size;
	void *base, *p;

	base = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return -errno;
	p = mmap(base, csize, PROT_READ, MAP_SHARED | MAP_FIXED, k->fd, 0);
	if (p == MAP_FAILED)
		goto err;
	p = mmap((unsigned char *)base + csize, size - csize,
		 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, k->fd, csize);
	if (p == MAP_FAILED)
		goto err;
	k->base = base;
	return 0;
err:
	p = (void *)(intptr_t)-errno;
	munmap(base, size);
	return (int)(intptr_t)p;
}

static int knot_join(struct knot_view *k, uint32_t role, uint32_t worker)
{
	struct knitk_join j = { .role = role, .worker = worker };

	return kioctl(k->fd, KNITK_IOC_JOIN, &j);
}

/*
 * Parks on doorbell d until one of the mailboxes in mask has a pending lane
 * (rule 4 of the design): read seq, set the sleeping flag, re-check the
 * mailboxes, and only then sleep on seq.  Returns the first mailbox with
 * work, or a negative errno from KNITK_IOC_WAIT.
 */
static int park(struct knot_view *k, unsigned int d, uint64_t mask,
		uint64_t deadline_ns)
{
	struct knitk_doorbell *db = doorbell(k, d);

	for (;;) {
		struct knitk_wait w = { .deadline_ns = deadline_ns };
		int ret;

		w.expected = __atomic_load_n(&db->seq, __ATOMIC_ACQUIRE);
		/* seq_cst: pairs with the notifier's read of the flag. */
		__atomic_store_n(&db->sleeping, 1, __ATOMIC_SEQ_CST);
		for (unsigned int m = 0; m < 64; m++) {
			if ((mask >> m & 1) && pending(k, m)) {
				__atomic_store_n(&db->sleeping, 0, __ATOMIC_RELEASE);
				return (int)m;
			}
		}
		ret = kioctl(k->fd, KNITK_IOC_WAIT, &w);
		__atomic_store_n(&db->sleeping, 0, __ATOMIC_RELEASE);
		if (ret && ret != -EAGAIN && ret != -EINTR)
			return ret;
		/* Woken, or seq moved before we slept: re-check. */
	}
}

static int notify(struct knot_view *k, uint64_t doorbells, uint64_t *woken)
{
	struct knitk_notify n = { .doorbells = doorbells };
	int ret = kioctl(k->fd, KNITK_IOC_NOTIFY, &n);

	*woken = n.woken;
	return ret;
}

/* Worker 0, in its own process, with its own endpoint. */
static int worker_main(int inherited_fd)
{
	struct knot_view k = { .fd = -1 };
	struct knitk_attach at = { .fd = inherited_fd };
	unsigned int reply_mb;
	uint64_t value, woken;
	int ret;

	who = "worker 0";
	k.fd = open(DEV, O_RDWR | O_CLOEXEC);
	if (k.fd < 0)
		return fail("open " DEV, errno);
	ret = kioctl(k.fd, KNITK_IOC_ATTACH, &at);
	if (ret)
		return fail("KNITK_IOC_ATTACH", ret);
	/* From here on the worker holds the knot through its own endpoint. */
	close(inherited_fd);
	k.layout = at.layout;
	ret = knot_map(&k);
	if (ret)
		return fail("mmap", ret);
	ret = knot_join(&k, KNITK_ROLE_WORKER, 0);
	if (ret)
		return fail("KNITK_IOC_JOIN worker 0", ret);
	say("attached, mapped %" PRIu64 " bytes, joined; parking\n",
	    (uint64_t)k.layout.size);

	/* Request mailbox of (submitter 0, worker 0) is mailbox 0. */
	ret = park(&k, 0, 1ULL << 0, KNITK_WAIT_FOREVER);
	if (ret < 0)
		return fail("park for a request", ret);
	if (!(pending(&k, 0) & 1))
		return fail("woken without lane 0 pending", EPROTO);
	value = *lane_value(&k, 0, 0);
	say("woken: lane 0 holds %#" PRIx64 "\n", value);
	/* Read the lane before acking it (rule 1). */
	__atomic_store_n(&sector(&k, 0)->ack, sector(&k, 0)->ack ^ 1,
			 __ATOMIC_RELEASE);

	reply_mb = k.layout.nr_request + 0;
	*lane_value(&k, reply_mb, 0) = value == REQUEST_VALUE ? REPLY_VALUE : 0;
	/* Pairs with the host's acquire load of pub in pending(). */
	__atomic_store_n(&sector(&k, reply_mb)->pub,
			 sector(&k, reply_mb)->pub ^ 1, __ATOMIC_RELEASE);
	ret = notify(&k, 1ULL << KNITK_DOORBELL_HOST, &woken);
	if (ret)
		return fail("KNITK_IOC_NOTIFY host", ret);
	say("replied on mailbox %u, notified host (%s)\n", reply_mb,
	    woken ? "woken" : "suppressed: host awake");

	/* Stay until the host leaves: its release wakes us with -EPIPE. */
	ret = park(&k, 0, 1ULL << 0, KNITK_WAIT_FOREVER);
	if (ret != -EPIPE)
		return fail("park until the host leaves", ret < 0 ? ret : EPROTO);
	say("host gone (EPIPE), exiting\n");
	return 0;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Waits for the worker to be asleep, so the demo shows a delivered wake. */
static int wait_worker_asleep(struct knot_view *k)
{
	const struct knitk_control *c = (const void *)k->base;
	uint64_t end = monotonic_ns() + HOST_WAIT_NS;

	while (!(__atomic_load_n(&c->live, __ATOMIC_ACQUIRE) & 1) ||
	       !__atomic_load_n(&doorbell(k, 0)->sleeping, __ATOMIC_SEQ_CST)) {
		if (monotonic_ns() > end)
			return -ETIMEDOUT;
		usleep(1000);
	}
	return 0;
}

/* Reaps the worker; kills it if it does not leave in time. */
static int reap(pid_t pid)
{
	int status;

	for (int i = 0; i < CHILD_WAIT_S * 100; i++) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	say("FAIL: worker did not exit, killed\n");
	return 1;
}

static void print_stats(struct knot_view *k, int *bad)
{
	static const struct { unsigned int d; const char *name; } rows[] = {
		{ 0, "worker 0" }, { 1, "worker 1" },
		{ KNITK_DOORBELL_HOST, "host" },
	};

	printf("\n%-10s %8s %8s %10s %10s %9s\n", "doorbell", "waits", "wakes",
	       "supp.idle", "supp.awake", "spurious");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct knitk_stats st = { .doorbell = rows[i].d };
		struct knitk_doorbell_stats *s = &st.stats;
		int ret = kioctl(k->fd, KNITK_IOC_STATS, &st);

		if (ret) {
			*bad |= fail("KNITK_IOC_STATS", ret);
			continue;
		}
		printf("%-10s %8llu %8llu %10llu %10llu %9llu\n", rows[i].name,
		       s->waits, s->wakes, s->suppressed_idle,
		       s->suppressed_awake, s->spurious);
		/* Worker 1 never ran: its notify must have been suppressed. */
		if (rows[i].d == 1 && (s->wakes || !(s->suppressed_idle + s->suppressed_awake)))
			*bad |= fail("worker 1 was not suppressed", EPROTO);
		if (rows[i].d == 0 && !s->wakes)
			*bad |= fail("worker 0 has no delivered wake", EPROTO);
		if (s->spurious)
			*bad |= fail("spurious wake counted", EPROTO);
	}
	printf("\n");
	fflush(stdout);
}

int main(void)
{
	struct knitk_api api = { .api = KNITK_API };
	struct knitk_create cr = {
		.geometry = {
			.nr_workers = NR_WORKERS,
			.nr_submitters = 1,
			.lanes = KNITK_LANES,
			.inline_bytes = 64,
		},
	};
	struct knot_view k = { .fd = -1 };
	unsigned int reply_mb;
	uint64_t woken, reply, ret_mask;
	int ret, bad = 0, child;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	k.fd = open(DEV, O_RDWR | O_CLOEXEC);
	if (k.fd < 0)
		return fail("open " DEV " (modprobe knitk?)", errno);
	ret = kioctl(k.fd, KNITK_IOC_API, &api);
	if (ret)
		return fail("KNITK_IOC_API", ret);
	say("knitk API %llu, features %#llx\n", api.api, api.features);
	ret = kioctl(k.fd, KNITK_IOC_CREATE, &cr);
	if (ret)
		return fail("KNITK_IOC_CREATE", ret);
	k.layout = cr.layout;
	say("knot: %u workers, %u mailboxes, %" PRIu64 " bytes\n", NR_WORKERS,
	    k.layout.nr_mailboxes, (uint64_t)k.layout.size);

	/* The worker gets the knot by inheriting this fd across fork. */
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return fail("fork", errno);
	if (pid == 0) {
		/* O_CLOEXEC only matters across exec; fork keeps the fd. */
		_exit(worker_main(k.fd));
	}

	ret = knot_map(&k);
	if (ret)
		return fail("mmap", ret);
	ret = knot_join(&k, KNITK_ROLE_HOST, 0);
	if (ret)
		return fail("KNITK_IOC_JOIN host", ret);
	ret = wait_worker_asleep(&k);
	if (ret)
		return fail("worker 0 never parked", ret);

	*lane_value(&k, 0, 0) = REQUEST_VALUE;
	/* Pairs with the worker's acquire load of pub in pending(). */
	__atomic_store_n(&sector(&k, 0)->pub, sector(&k, 0)->pub ^ 1,
			 __ATOMIC_RELEASE);
	say("published %#llx on mailbox 0 lane 0\n", REQUEST_VALUE);
	ret = notify(&k, 1ULL << 0 | 1ULL << 1, &woken);
	if (ret)
		return fail("KNITK_IOC_NOTIFY", ret);
	say("notified doorbells 0 and 1: woken %#" PRIx64 " (worker 1 idle)\n",
	    woken);
	if (woken != 1ULL << 0)
		bad |= fail("notify should wake exactly worker 0", EPROTO);

	/* One park covers every return mailbox. */
	ret_mask = ((1ULL << NR_WORKERS) - 1) << k.layout.nr_request;
	ret = park(&k, KNITK_DOORBELL_HOST, ret_mask, monotonic_ns() + HOST_WAIT_NS);
	if (ret < 0) {
		bad |= fail("park for the reply", ret);
	} else {
		reply_mb = (unsigned int)ret;
		reply = *lane_value(&k, reply_mb, 0);
		__atomic_store_n(&sector(&k, reply_mb)->ack,
				 sector(&k, reply_mb)->ack ^ 1, __ATOMIC_RELEASE);
		say("reply on mailbox %u: %#" PRIx64 " (%s)\n", reply_mb, reply,
		    reply == REPLY_VALUE ? "expected" : "WRONG");
		if (reply_mb != k.layout.nr_request || reply != REPLY_VALUE)
			bad = 1;
	}

	print_stats(&k, &bad);

	munmap(k.base, k.layout.size);
	close(k.fd);
	child = reap(pid);
	if (child) {
		say("FAIL: worker exit status %d\n", child);
		bad = 1;
	}
	say("%s\n", bad ? "FAILED" : "done");
	return bad;
}
