/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A one-way stream's fixture, for the tests of a mailbox's reader
 * (consumer_wait_test, packed_lanes_test): a futex knot of one worker and
 * one submitter with the worker's endpoint in this process, and a writer
 * of the stream on a thread or in a forked process that joins worker 0,
 * each running the test's own send function; the exactly-once cases that
 * read its stream with the test's own take function.  Include after
 * tap.h.
 */
#ifndef KNITK_STREAM_FX_H
#define KNITK_STREAM_FX_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <knitk.h>

struct fx {
	struct knitk_endpoint *host, *worker;
	int req, ret_mb;
};

static inline int fx_init_inline(struct fx *f, unsigned int inline_bytes)
{
	struct knitk_geometry g = {
		.nr_workers = 1, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = inline_bytes,
	};

	memset(f, 0, sizeof(*f));
	if (knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &f->host) ||
	    knitk_endpoint_join(f->host, KNITK_ROLE_HOST, 0) < 1)
		return -1;
	f->req = knitk_endpoint_request_mailbox(f->host, 0, 0);
	f->ret_mb = knitk_endpoint_return_mailbox(f->host, 0);
	return f->req < 0 || f->ret_mb < 0 ? -1 : 0;
}

/* The worker's endpoint, in this process. */
static inline int fx_worker(struct fx *f)
{
	if (knitk_endpoint_attach(knitk_endpoint_fd(f->host), 0, &f->worker) ||
	    knitk_endpoint_join(f->worker, KNITK_ROLE_WORKER, 0) < 1)
		return -1;
	return 0;
}

static inline void fx_fini(struct fx *f)
{
	knitk_endpoint_destroy(f->worker);
	knitk_endpoint_destroy(f->host);
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Send messages @first.. @first + @n - 1 (for ever with @n UINT64_MAX). */
typedef int (*stream_send_fn)(struct knitk_producer *p, uint64_t first,
			      uint64_t n);
/*
 * Take @n messages, checking that they come in order from @first, each
 * once and whole; how many came, and the wait's error or -EPROTO in *@err.
 */
typedef uint64_t (*stream_take_fn)(struct knitk_consumer *c, uint64_t first,
				   uint64_t n, int *err);

struct writer_arg {
	struct knitk_endpoint *ep;
	int mailbox;
	stream_send_fn send;
	uint64_t n;
	int ret;
};

static inline void *writer_thread(void *arg)
{
	struct writer_arg *a = arg;
	struct knitk_producer *p;

	a->ret = knitk_producer_create(a->ep, (unsigned int)a->mailbox, &p);
	if (a->ret)
		return NULL;
	a->ret = a->send(p, 0, a->n);
	knitk_producer_destroy(p);
	return NULL;
}

/*
 * A forked writer process holding worker 0's role: it sends @n messages
 * into its return mailbox, then reports on @done (if >= 0) and pauses
 * when @stay, else leaves.
 */
static inline pid_t fork_writer(struct fx *f, stream_send_fn send, uint64_t n,
				int done, int stay)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid != 0)
		return pid;
	{
		struct knitk_endpoint *w;
		struct knitk_producer *p;
		int ret;

		if (knitk_endpoint_attach(knitk_endpoint_fd(f->host), 0, &w) ||
		    knitk_endpoint_join(w, KNITK_ROLE_WORKER, 0) < 1 ||
		    knitk_producer_create(w, (unsigned int)f->ret_mb, &p))
			_exit(2);
		ret = send(p, 0, n);
		if (done >= 0 && write(done, "x", 1) != 1)
			_exit(3);
		while (stay)
			pause();
		knitk_producer_destroy(p);
		knitk_endpoint_destroy(w);
		_exit(ret ? 1 : 0);
	}
}

/*
 * On the knot @f just made (fx_init): @n messages from a writer thread,
 * each once and in order, nothing more.  Ends @f.
 */
static inline void stream_once_threads(struct fx *f, stream_send_fn send,
				       stream_take_fn take, uint64_t n)
{
	struct knitk_consumer *c;
	struct writer_arg a;
	pthread_t th;
	int err;

	REQUIRE(fx_worker(f) == 0);
	REQUIRE(knitk_consumer_create(f->worker, (unsigned int)f->req, &c) == 0);
	a = (struct writer_arg){ .ep = f->host, .mailbox = f->req, .send = send, .n = n };
	REQUIRE(pthread_create(&th, NULL, writer_thread, &a) == 0);
	CHECK_EQ(take(c, 0, n, &err), n);
	CHECK_EQ(err, 0);
	pthread_join(th, NULL);
	CHECK_EQ(a.ret, 0);
	/* Nothing more, nothing twice. */
	CHECK_EQ(knitk_consumer_wait(c, &(uint64_t){ 0 }, 0), -ETIMEDOUT);
	knitk_consumer_destroy(c);
	fx_fini(f);
}

/* The same from a writer process, whose clean leave then ends the wait. */
static inline void stream_once_process(struct fx *f, stream_send_fn send,
				       stream_take_fn take, uint64_t n)
{
	struct knitk_consumer *c;
	int err, status;
	pid_t pid;

	REQUIRE(knitk_consumer_create(f->host, (unsigned int)f->ret_mb, &c) == 0);
	pid = fork_writer(f, send, n, -1, 0);
	REQUIRE(pid > 0);
	CHECK_EQ(take(c, 0, n, &err), n);
	CHECK_EQ(err, 0);
	REQUIRE(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* Its clean leave ended the role: nothing more pending, so -EPIPE. */
	CHECK_EQ(knitk_consumer_wait(c, &(uint64_t){ 0 }, KNITK_WAIT_FOREVER), -EPIPE);
	knitk_consumer_destroy(c);
	fx_fini(f);
}

#endif /* KNITK_STREAM_FX_H */
