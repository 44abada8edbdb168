/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The lane/arena/doorbell stress engine, shared by lib/tests/stress_test.c
 * (futex backend, host) and selftests/knitk/lib_stress_test.c (kmod
 * backend, guest).
 *
 * The host produces n messages of random size (inline up to inline_bytes,
 * arena up to 1 MiB) into the worker's request mailbox; the worker checks
 * every message by sequence (exactly once, in order) and content, acks a
 * batch with one store and returns a credit (the count consumed) on its
 * return mailbox.  Both sides park with no timeout when they have nothing
 * to do: the worker until a request is published, the host (under
 * backpressure) until a credit comes back.  A lost wakeup hangs; the
 * caller's watchdog turns that into a failure.
 */
#ifndef KNITK_STRESS_H
#define KNITK_STRESS_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <knitk.h>

#define STRESS_INLINE	256
#define STRESS_ARENA	(2U << 20)
#define STRESS_MAX_LEN	(1U << 20)

struct stress_result {
	uint64_t n;
	double secs;
	uint64_t bytes;
	struct knitk_wake_stats host;
	struct knitk_wake_stats worker;
	/* kmod backend: the module's counters of doorbells 0 and host */
	int have_kstats;
	struct knitk_doorbell_stats kworker, khost;
	int ok;
	char why[200];
};

static inline uint64_t stress_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* The size of message @i: 70% inline, 29% small arena, 1% up to 1 MiB. */
static inline size_t stress_len(uint64_t i)
{
	uint64_t r = stress_mix(i), c = r % 100, s = r >> 8;

	if (c < 70)
		return (size_t)(s % (STRESS_INLINE + 1));
	if (c < 99)
		return STRESS_INLINE + 1 + (size_t)(s % 8192);
	/* log-uniform from 257 B to 1 MiB */
	{
		unsigned int bits = 9 + (unsigned int)(s % 12);	/* 2^9..2^20 */
		size_t len = (size_t)1 << bits;

		len += (size_t)((s >> 8) % len);
		if (len > STRESS_MAX_LEN)
			len = STRESS_MAX_LEN;
		return len;
	}
}

static inline uint64_t stress_word(uint64_t i, size_t j)
{
	return (i << 32 | (uint64_t)j) * 0x9e3779b97f4a7c15ULL ^ i;
}

static inline void stress_fill(void *buf, uint64_t i, size_t len)
{
	unsigned char *b = buf;
	size_t j;

	for (j = 0; j + 8 <= len; j += 8) {
		uint64_t w = stress_word(i, j);

		memcpy(b + j, &w, 8);
	}
	if (j < len) {
		uint64_t w = stress_word(i, j);

		memcpy(b + j, &w, len - j);
	}
}

static inline int stress_same(const void *buf, uint64_t i, size_t len)
{
	const unsigned char *b = buf;
	size_t j;

	for (j = 0; j + 8 <= len; j += 8) {
		uint64_t w = stress_word(i, j);

		if (memcmp(b + j, &w, 8))
			return 0;
	}
	if (j < len) {
		uint64_t w = stress_word(i, j);

		if (memcmp(b + j, &w, len - j))
			return 0;
	}
	return 1;
}

static inline double stress_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct stress_worker {
	struct knitk_endpoint *knot;	/* this worker's own endpoint */
	uint64_t n;
	struct stress_result *r;	/* ok/why/worker stats written here */
};

/* The worker: consume, check, ack, return a credit. */
static inline int stress_worker_run(struct stress_worker *sw)
{
	struct stress_result *r = sw->r;
	struct knitk_consumer *c = NULL;
	struct knitk_producer *p = NULL;
	uint64_t expected = 0, pend, batch;
	int lane, ret, rm;

	rm = knitk_endpoint_return_mailbox(sw->knot, 0);
	if (knitk_endpoint_join(sw->knot, KNITK_ROLE_WORKER, 0) < 0 || rm < 0 ||
	    knitk_consumer_create(sw->knot, 0, &c) ||
	    knitk_producer_create(sw->knot, (unsigned int)rm, &p)) {
		snprintf(r->why, sizeof(r->why), "worker setup failed");
		goto out;
	}
	while (expected < sw->n) {
		if (knitk_lane_scan(c, &pend) == 0) {
			ret = knitk_doorbell_park(sw->knot, KNITK_WAIT_FOREVER);
			if (ret) {
				snprintf(r->why, sizeof(r->why), "worker park: %d", ret);
				goto out;
			}
			continue;
		}
		batch = pend;
		while ((lane = knitk_lane_next(c, &pend)) >= 0) {
			struct knitk_msg m = { .size = sizeof(m) };
			size_t len = stress_len(expected);

			ret = knitk_lane_decode(c, (unsigned int)lane, &m);
			if (ret || m.header.task_id != expected || m.len != len ||
			    m.header.function_id != (uint32_t)(expected * 2654435761U) ||
			    m.header.kind != (len == 0 ? KNITK_PAYLOAD_NONE :
					      len <= STRESS_INLINE ? KNITK_PAYLOAD_INLINE :
					      KNITK_PAYLOAD_ARENA) ||
			    (len && !stress_same(m.data, expected, len))) {
				snprintf(r->why, sizeof(r->why),
					 "message %llu: decode %d, task %llu, len %zu/%zu",
					 (unsigned long long)expected, ret,
					 (unsigned long long)m.header.task_id, m.len, len);
				goto out;
			}
			expected++;
		}
		knitk_lane_ack(c, batch);
		{
			struct knitk_lane_header h = { .value = expected };

			/*
			 * -EAGAIN: the host has 64 credits to drain, so it
			 * is not asleep; skip this one.
			 */
			ret = knitk_producer_send(p, &h, NULL, 0);
			if (ret >= 0)
				knitk_producer_notify(p);
			else if (ret != -EAGAIN) {
				snprintf(r->why, sizeof(r->why), "credit: %d", ret);
				goto out;
			}
		}
	}
	r->ok = 1;
out:
	r->worker.size = sizeof(r->worker);
	knitk_endpoint_wake_stats(sw->knot, &r->worker);
	knitk_producer_destroy(p);
	knitk_consumer_destroy(c);
	return r->ok ? 0 : -1;
}

static inline void *stress_worker_thread(void *arg)
{
	stress_worker_run(arg);
	return NULL;
}

/* Drain credits; returns how many were read. */
static inline int stress_drain(struct knitk_consumer *c, uint64_t *credit)
{
	uint64_t pend, batch;
	int lane, n = 0;

	if (knitk_lane_scan(c, &pend) == 0)
		return 0;
	batch = pend;
	while ((lane = knitk_lane_next(c, &pend)) >= 0) {
		struct knitk_msg m = { .size = sizeof(m) };

		if (knitk_lane_decode(c, (unsigned int)lane, &m) == 0 &&
		    m.header.value > *credit)
			*credit = m.header.value;
		n++;
	}
	knitk_lane_ack(c, batch);
	return n;
}

/* The host side: produce n messages. */
static inline int stress_host_run(struct knitk_endpoint *host, uint64_t n,
				  struct stress_result *r)
{
	struct knitk_producer *p = NULL;
	struct knitk_consumer *c = NULL;
	const struct knitk_control *ctl;
	uint64_t i, credit = 0;
	int ret = -1, lane, rm = knitk_endpoint_return_mailbox(host, 0);

	if (rm < 0 || knitk_endpoint_control(host, &ctl) ||
	    knitk_producer_create(host, 0, &p) ||
	    knitk_consumer_create(host, (unsigned int)rm, &c)) {
		snprintf(r->why, sizeof(r->why), "host setup failed");
		goto out;
	}
	for (i = 0; i < n; i++) {
		size_t len = stress_len(i);
		struct knitk_lane_header *h;
		void *buf;

		for (;;) {
			lane = knitk_lane_claim(p);
			if (lane >= 0) {
				ret = knitk_lane_reserve(p, (unsigned int)lane, len, &buf);
				if (ret == 0)
					break;
				knitk_lane_release(p, (unsigned int)lane);
				if (ret != -ENOSPC) {
					snprintf(r->why, sizeof(r->why), "reserve: %d", ret);
					goto out;
				}
			}
			/* Backpressure: wait for a credit, never spin. */
			if (stress_drain(c, &credit))
				continue;
			if (ctl->dead & 1) {
				snprintf(r->why, sizeof(r->why), "worker died");
				goto out;
			}
			ret = knitk_doorbell_park(host, KNITK_WAIT_FOREVER);
			if (ret) {
				snprintf(r->why, sizeof(r->why), "host park: %d", ret);
				goto out;
			}
		}
		stress_fill(buf, i, len);
		knitk_lane_header(p, (unsigned int)lane, &h);
		h->task_id = i;
		h->function_id = (uint32_t)(i * 2654435761U);
		r->bytes += len;
		knitk_lane_publish(p, (unsigned int)lane);
		knitk_producer_notify(p);
		if ((i & 63) == 63)
			stress_drain(c, &credit);
	}
	ret = 0;
out:
	r->host.size = sizeof(r->host);
	knitk_endpoint_wake_stats(host, &r->host);
	knitk_consumer_destroy(c);
	knitk_producer_destroy(p);
	return ret;
}

/*
 * Run one stress: @flags picks the backend (KNITK_KNOT_FUTEX/KMOD),
 * @processes selects a forked worker (which attaches with the inherited
 * fd) instead of a thread.  Call before any other thread exists.
 */
static inline int stress_run(unsigned int flags, int processes, uint64_t n,
			     struct stress_result *r)
{
	struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = STRESS_INLINE, .arena_bytes = STRESS_ARENA,
	};
	struct stress_worker sw = { .n = n };
	struct stress_result *shared;
	struct knitk_endpoint *host;
	pthread_t th;
	double t0;
	int ret, status;
	pid_t pid = -1;

	memset(r, 0, sizeof(*r));
	r->n = n;
	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return -errno;
	memset(shared, 0, sizeof(*shared));
	ret = knitk_endpoint_create(&g, flags, &host);
	if (ret) {
		snprintf(r->why, sizeof(r->why), "knot create: %d", ret);
		goto out_unmap;
	}
	ret = knitk_endpoint_join(host, KNITK_ROLE_HOST, 0);
	if (ret < 0) {
		snprintf(r->why, sizeof(r->why), "host join: %d", ret);
		goto out;
	}
	sw.r = shared;
	t0 = stress_now();
	if (processes) {
		fflush(stdout);
		pid = fork();
		if (pid < 0) {
			ret = -errno;
			goto out;
		}
		if (pid == 0) {
			ret = knitk_endpoint_attach(knitk_endpoint_fd(host),
						    KNITK_ATTACH_TAKE_FD, &sw.knot);
			if (ret) {
				snprintf(shared->why, sizeof(shared->why),
					 "attach: %d", ret);
				_exit(1);
			}
			ret = stress_worker_run(&sw);
			knitk_endpoint_destroy(sw.knot);
			_exit(ret ? 1 : 0);
		}
	} else {
		ret = knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &sw.knot);
		if (ret) {
			snprintf(r->why, sizeof(r->why), "attach: %d", ret);
			goto out;
		}
		ret = pthread_create(&th, NULL, stress_worker_thread, &sw);
		if (ret) {
			knitk_endpoint_destroy(sw.knot);
			ret = -ret;
			goto out;
		}
	}
	ret = stress_host_run(host, n, r);
	if (ret) {
		/* Tell the worker: its park returns -EPIPE. */
		knitk_endpoint_destroy(host);
		host = NULL;
	}
	if (processes) {
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			shared->ok = 0;
	} else {
		pthread_join(th, NULL);
		knitk_endpoint_destroy(sw.knot);
	}
	r->secs = stress_now() - t0;
	r->worker = shared->worker;
	if (!ret && !shared->ok) {
		snprintf(r->why, sizeof(r->why), "worker: %.150s", shared->why);
		ret = -EPROTO;
	}
	r->ok = !ret;
	if (host && knitk_endpoint_doorbell_stats(host, 0, &r->kworker) == 0 &&
	    knitk_endpoint_doorbell_stats(host, KNITK_DOORBELL_HOST, &r->khost) == 0)
		r->have_kstats = 1;
out:
	knitk_endpoint_destroy(host);
out_unmap:
	munmap(shared, sizeof(*shared));
	return ret;
}

#endif /* KNITK_STRESS_H */
