/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Whole clients of a long-lived server killed and restarted (the host's
 * server_client_kill_test on the futex backend and the guest's kselftest
 * of the same name on the module), on the core API alone.
 *
 * The server, in this process: a knot of SK_WORKERS worker roles and one
 * submitter, joined as the host, served by two threads.
 *  - The lane thread owns every producer and consumer of the host: it
 *    consumes the return mailbox of each worker role (the client's calls,
 *    worker -> host), answers on that role's request mailbox (host ->
 *    worker) and, for a role whose client process is gone, cleans up:
 *    the calls still pending in the return mailbox are taken and dropped
 *    (acknowledged, their arena bytes freed: the next client's producer
 *    starts from an empty arena, docs/protocol.md A1), a call held
 *    unanswered is dropped, and the request mailbox is reset as its
 *    stand-in consumer (knitk_producer_reset_consumer, L6: answers nobody
 *    read are dropped).  Then both mailboxes must hold nothing and a
 *    reserve of the whole request arena must succeed.
 *  - The door thread listens on an abstract unix socket.  A client sends
 *    the role it wants; once that role is clean the door sends it the
 *    knot's fd (SCM_RIGHTS) and watches a pidfd of it.  When the pidfd
 *    is readable the process is gone: on the futex backend the door marks
 *    the role dead (knitk_endpoint_mark_dead, nobody else would), on the
 *    module the kernel has ended it already (the lane thread checks), and
 *    the lane thread is asked to clean up.
 *
 * A client is this program, re-executed (posix_spawn of /proc/self/exe
 * with SK_CLIENT_ARG): it connects, attaches with the fd it received,
 * joins its worker role, makes ncalls calls, up to SK_PIPELINE in flight
 * (call id in the lane's task_id, request and answer bytes derived from
 * the id, 8 B inline to 6 KiB in the arena; the answer starts with id *
 * 2654435761 + 1; the server takes each client's calls in publish order,
 * also from a client whose producer starts where a dead one's left the
 * lanes) and then stops at one step of the next call, writes a byte to its
 * report pipe and waits for our SIGKILL (placement by step, not by time):
 *   connected (fd not received), attached, joined (between calls),
 *   claimed (lane claimed, payload half written), loan (a claimed lane
 *   with its arena bytes reserved and written, unpublished), published
 *   (not rung), waiting (a call the server holds; killed once its doorbell
 *   sleeps), answer pending (not read), decoded (checked, not
 *   acknowledged), acked; or it leaves cleanly (knitk_endpoint_destroy,
 *   exit 0).  The driver keeps one client per role alive at a time and
 *   starts the next on the same role once the previous one is reaped.
 *
 * The run table (a memfd both sides map) counts per call id: begun by the
 * client, served and dropped by the server, answered (right answer) or
 * wrong at the client.  Exactly once: no call served or answered twice,
 * none both served and dropped, no answer of another call; each call ends
 * in exactly one class, the one its client's kill step implies:
 *   completed (served, answered), never sent (begun, killed before the
 *   publish: claimed, loan), dropped (published, never served: held by
 *   the server at the death), answer discarded (served, answer reset
 *   unread: answer pending), dropped or discarded (published: either,
 *   depending on whether the server served it before the death).
 * After the kills a fresh client on every role still gets its calls
 * served, one of them as large as the arena both ways, and then: the
 * server's fds, pidfds and threads are as before the first client, no
 * child (zombie) is left, the knot counted one death per client that
 * joined, every mailbox is empty and each request arena whole; on the
 * module a probe (the guest's) compares the live knots, their bytes
 * (pinned pages), open endpoints and live roles with the baseline.
 * Every wait is bounded (SK_WAIT_S): a hang is reported with the state.
 * Include knitk.h and proc_count.h first.
 */
#ifndef KNITK_SERVER_KILL_H
#define KNITK_SERVER_KILL_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SK_WORKERS		3
#define SK_INLINE		64
#define SK_ARENA		(32 * 1024)
#define SK_IDS			16	/* call ids per client: [iter * SK_IDS, +SK_IDS) */
#define SK_MAX_CALLS		5	/* complete calls before the kill step */
#define SK_FRESH_CALLS		8	/* calls of each fresh client at the end */
#define SK_PIPELINE		3	/* calls a client has in flight at most */
#define SK_WAIT_S		30	/* every wait's bound: beyond it, a hang */
#define SK_CLIENT_ARG		"--knitk-server-kill-client"
#define SK_TABLE_FD		100	/* the run table, in a client */
#define SK_REPORT_FD		101	/* the client's report pipe */
#define SK_WAITERS		8
#define SK_MAGIC		0x6b6e736bU

enum sk_fn { SK_CALL = 1, SK_HOLD, SK_BIG };

enum sk_step {
	ST_CONNECTED, ST_ATTACHED, ST_JOINED, ST_CLAIMED, ST_LOAN, ST_PUBLISHED,
	ST_WAITING, ST_ANSWER_PENDING, ST_DECODED, ST_ACKED, ST_LEAVE, NR_STEPS
};

static const char *const sk_step_name[NR_STEPS] = {
	"connected", "attached", "joined", "claimed (half written)",
	"loan (arena reserved)", "published", "waiting", "answer pending",
	"decoded", "acked", "leave",
};

/* A client's exit status when it fails (never when killed). */
enum sk_exit {
	SKE_OK, SKE_MAP = 10, SKE_CONNECT, SKE_RECV, SKE_ATTACH, SKE_JOIN,
	SKE_OBJECTS, SKE_SUBMIT, SKE_WAIT, SKE_ANSWER, SKE_HELD_ANSWERED,
	SKE_NOT_KILLED, SKE_REPORT,
};

static const char *sk_exit_name(int code)
{
	static const char *const n[] = {
		"map the run table", "connect", "receive the fd", "attach",
		"join", "make its producer or consumer", "submit", "wait (timed out or failed)",
		"got a wrong answer", "its held call was answered",
		"was not killed at its step", "write its report",
	};

	return code >= SKE_MAP && code <= SKE_REPORT ? n[code - SKE_MAP] : "unknown";
}

/* ------------------------------------------------------------ run table */

struct sk_call {
	_Atomic uint8_t begun, served, dropped, answered, wrong, bad;
	_Atomic uint8_t role;		/* the client's role + 1 */
	uint8_t pad;
};

struct sk_iter {
	uint8_t role, step, ncalls, big;
	_Atomic uint8_t reached;	/* the step the client stopped at, + 1 */
	uint8_t pad[3];
};

struct sk_table {
	uint32_t magic, nr_iters;
	char sock[64];			/* abstract socket name, after a NUL */
	/* then sk_iter[nr_iters], then sk_call[nr_iters * SK_IDS] */
};

static inline struct sk_iter *sk_iters(struct sk_table *t)
{
	return (struct sk_iter *)(t + 1);
}

static inline struct sk_call *sk_calls(struct sk_table *t)
{
	return (struct sk_call *)(sk_iters(t) + t->nr_iters);
}

static inline size_t sk_table_bytes(unsigned int iters)
{
	return sizeof(struct sk_table) + iters * sizeof(struct sk_iter) +
	       (size_t)iters * SK_IDS * sizeof(struct sk_call);
}

/* ------------------------------------------------------------ payloads */

static inline uint64_t sk_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static inline size_t sk_size(uint64_t h)
{
	static const size_t sizes[] = { 8, 16, 40, 64, 200, 1000, 2600, 6000 };

	return sizes[h % 8];
}

static inline size_t sk_req_len(uint64_t id, int fn)
{
	return fn == SK_BIG ? SK_ARENA : sk_size(sk_mix(id));
}

static inline size_t sk_ans_len(uint64_t id, int fn)
{
	return fn == SK_BIG ? SK_ARENA : sk_size(sk_mix(id ^ 0x5555));
}

static inline uint64_t sk_answer_word(uint64_t id)
{
	return id * 2654435761ULL + 1;
}

/* Byte @i of a request (@ans 0) or an answer for call @id. */
static inline unsigned char sk_byte(uint64_t id, int ans, size_t i)
{
	uint64_t w = ans ? sk_answer_word(id) : id;

	return i < 8 ? (unsigned char)(w >> (8 * i)) :
	       (unsigned char)(id * (ans ? 131 : 31) + i * (ans ? 13 : 7) + (i >> 8));
}

static inline void sk_fill(unsigned char *p, size_t from, size_t to, uint64_t id, int ans)
{
	size_t i;

	for (i = from; i < to; i++)
		p[i] = sk_byte(id, ans, i);
}

static inline bool sk_check(const unsigned char *p, size_t len, uint64_t id, int ans)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != sk_byte(id, ans, i))
			return false;
	return true;
}

static inline uint64_t sk_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t sk_deadline(void)
{
	return sk_now_ns() + SK_WAIT_S * 1000000000ULL;
}

struct sk_request {
	uint32_t magic, role;
};

struct sk_reply {
	uint32_t magic, role, gen0, pad;
};

/* ------------------------------------------------------------ the client */

static struct sk_iter *sk_my_iter;

/* Stop at @step if it is ours: say so and wait for the SIGKILL. */
static inline void sk_park_if(unsigned int step)
{
	char c = 'P';

	if (sk_my_iter->step != step)
		return;
	atomic_store(&sk_my_iter->reached, (uint8_t)(step + 1));
	if (write(SK_REPORT_FD, &c, 1) != 1)
		_exit(SKE_REPORT);
	for (;;)
		pause();
}

static inline int sk_connect(const char *name)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t n = strlen(name);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memcpy(a.sun_path + 1, name, n);
	if (connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The fd and reply the server sends once our role is clean. */
static inline int sk_recv_fd(int s, struct sk_reply *r)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = r, .iov_len = sizeof(*r) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c;
	struct pollfd p = { .fd = s, .events = POLLIN };
	int fd;

	if (poll(&p, 1, SK_WAIT_S * 1000) != 1)
		return -1;
	if (recvmsg(s, &m, MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(*r) || r->magic != SK_MAGIC)
		return -1;
	c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(fd));
	return fd;
}

/* Claim, fill and publish call @id; the step hooks of the kill target. */
static inline void sk_submit(struct knitk_producer *p, struct sk_call *tab,
			     uint64_t id, int fn, size_t len, bool target, bool ring)
{
	struct knitk_lane_header *h;
	uint64_t deadline = sk_deadline();
	unsigned char *buf;
	void *room;
	int lane, ret;

	atomic_store(&tab[id].role, (uint8_t)(sk_my_iter->role + 1));
	atomic_store(&tab[id].begun, 1);
	/*
	 * Backpressure: the server may answer a call before it acknowledges
	 * the call's lane and frees its arena bytes; wait for them.
	 */
	while ((lane = knitk_lane_claim(p)) == -EAGAIN && sk_now_ns() < deadline)
		usleep(50);
	if (lane < 0 || knitk_lane_header(p, (unsigned int)lane, &h))
		_exit(SKE_SUBMIT);
	while ((ret = knitk_lane_reserve(p, (unsigned int)lane, len, &room)) == -ENOSPC &&
	       sk_now_ns() < deadline)
		usleep(50);
	if (ret)
		_exit(SKE_SUBMIT);
	h->function_id = (uint32_t)fn;
	h->task_id = id;
	buf = room;
	sk_fill(buf, 0, len / 2, id, 0);
	if (target)
		sk_park_if(ST_CLAIMED);
	sk_fill(buf, len / 2, len, id, 0);
	if (target)
		sk_park_if(ST_LOAN);
	if (knitk_lane_publish(p, (unsigned int)lane))
		_exit(SKE_SUBMIT);
	if (target)
		sk_park_if(ST_PUBLISHED);
	if (ring && knitk_producer_notify(p) < 0)
		_exit(SKE_SUBMIT);
}

/*
 * The answers to the @n calls from @id0 on, in flight at once, taken in
 * the order they come, each checked against its own call.
 */
static inline void sk_answers(struct knitk_consumer *c, struct sk_call *tab,
			      uint64_t id0, const int *fns, unsigned int n)
{
	struct knitk_msg msg = { .size = sizeof(msg) };
	uint64_t pending = 0, deadline = sk_deadline(), id, acks;
	unsigned int got = 0, seen = 0;
	int lane, ret;

	while (got < n) {
		ret = knitk_consumer_wait(c, &pending, deadline);
		if (ret == 0 || ret == -EINTR)
			continue;
		if (ret < 0)
			_exit(SKE_WAIT);
		for (acks = 0; (lane = knitk_lane_next(c, &pending)) >= 0;) {
			acks |= 1ULL << lane;
			id = 0;
			if (knitk_lane_decode(c, (unsigned int)lane, &msg) ||
			    (id = msg.header.task_id) < id0 || id >= id0 + n ||
			    (seen & (1U << (id - id0))) ||
			    msg.len != sk_ans_len(id, fns[id - id0]) ||
			    !sk_check(msg.data, msg.len, id, 1)) {
				if (id >= id0 && id < id0 + n)
					atomic_fetch_add(&tab[id].wrong, 1);
				_exit(SKE_ANSWER);
			}
			seen |= 1U << (id - id0);
			atomic_fetch_add(&tab[id].answered, 1);
			got++;
		}
		if (knitk_lane_ack(c, acks))
			_exit(SKE_ANSWER);
	}
}

/* Wait for the answer to @id, check it, acknowledge it. */
static inline void sk_answer(struct knitk_consumer *c, struct sk_call *tab,
			     uint64_t id, int fn, bool target)
{
	struct knitk_msg msg = { .size = sizeof(msg) };
	uint64_t pending = 0, deadline = sk_deadline();
	int lane, ret;

	do {
		ret = knitk_consumer_wait(c, &pending, deadline);
	} while (ret == 0 || ret == -EINTR);
	if (ret < 0)
		_exit(SKE_WAIT);
	if (target)
		sk_park_if(ST_ANSWER_PENDING);
	lane = knitk_lane_next(c, &pending);
	if (lane < 0 || pending)
		_exit(SKE_ANSWER);
	if (knitk_lane_decode(c, (unsigned int)lane, &msg) ||
	    msg.header.task_id != id || msg.len != sk_ans_len(id, fn) ||
	    !sk_check(msg.data, msg.len, id, 1)) {
		atomic_fetch_add(&tab[id].wrong, 1);
		_exit(SKE_ANSWER);
	}
	atomic_fetch_add(&tab[id].answered, 1);
	if (target)
		sk_park_if(ST_DECODED);
	if (knitk_lane_ack(c, 1ULL << lane))
		_exit(SKE_ANSWER);
	if (target)
		sk_park_if(ST_ACKED);
}

/*
 * The client's life (argv: SK_CLIENT_ARG <iteration>); ends by our
 * SIGKILL, or by _exit: 0 after a clean leave, else an sk_exit code.
 */
static inline int sk_client_main(int argc, char **argv)
{
	struct knitk_endpoint *ep;
	struct knitk_producer *p;
	struct knitk_consumer *c;
	struct sk_request rq = { .magic = SK_MAGIC };
	struct sk_reply rp;
	struct sk_table *t;
	struct sk_call *tab;
	struct stat st;
	unsigned int it_no, i, n;
	uint64_t base, id;
	int s, fd, w, fn;

	if (argc < 3 || strcmp(argv[1], SK_CLIENT_ARG))
		return 0;
	it_no = (unsigned int)strtoul(argv[2], NULL, 0);
	if (fstat(SK_TABLE_FD, &st))
		_exit(SKE_MAP);
	t = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, SK_TABLE_FD, 0);
	if (t == MAP_FAILED || t->magic != SK_MAGIC || it_no >= t->nr_iters)
		_exit(SKE_MAP);
	close(SK_TABLE_FD);
	sk_my_iter = &sk_iters(t)[it_no];
	tab = sk_calls(t);
	w = sk_my_iter->role;
	base = (uint64_t)it_no * SK_IDS;

	s = sk_connect(t->sock);
	rq.role = (uint32_t)w;
	if (s < 0 || send(s, &rq, sizeof(rq), MSG_NOSIGNAL) != sizeof(rq))
		_exit(SKE_CONNECT);
	sk_park_if(ST_CONNECTED);
	fd = sk_recv_fd(s, &rp);
	if (fd < 0 || rp.role != (uint32_t)w)
		_exit(SKE_RECV);
	close(s);
	if (knitk_endpoint_attach(fd, KNITK_ATTACH_TAKE_FD, &ep))
		_exit(SKE_ATTACH);
	sk_park_if(ST_ATTACHED);
	if (knitk_endpoint_join(ep, KNITK_ROLE_WORKER, (unsigned int)w) < 0)
		_exit(SKE_JOIN);
	if (knitk_producer_create(ep, (unsigned int)knitk_endpoint_return_mailbox(ep, (unsigned int)w), &p) ||
	    knitk_consumer_create(ep, (unsigned int)knitk_endpoint_request_mailbox(ep, 0, (unsigned int)w), &c))
		_exit(SKE_OBJECTS);
	/* Up to SK_PIPELINE calls in flight; the large one alone. */
	for (i = 0; i < sk_my_iter->ncalls; i += n) {
		int fns[SK_PIPELINE];

		for (n = 0; n < SK_PIPELINE && i + n < sk_my_iter->ncalls; n++) {
			fns[n] = sk_my_iter->big && i + n == 1 ? SK_BIG : SK_CALL;
			if (n && fns[n] == SK_BIG)
				break;
			id = base + i + n;
			sk_submit(p, tab, id, fns[n], sk_req_len(id, fns[n]), false, false);
			if (fns[n] == SK_BIG) {
				n++;
				break;
			}
		}
		if (knitk_producer_notify(p) < 0)
			_exit(SKE_SUBMIT);
		sk_answers(c, tab, base + i, fns, n);
	}
	sk_park_if(ST_JOINED);
	if (sk_my_iter->step == ST_LEAVE) {
		knitk_consumer_destroy(c);
		knitk_producer_destroy(p);
		knitk_endpoint_destroy(ep);
		_exit(SKE_OK);
	}
	id = base + sk_my_iter->ncalls;
	fn = sk_my_iter->step == ST_WAITING ? SK_HOLD : SK_CALL;
	/* A loan is a lane with arena bytes. */
	sk_submit(p, tab, id, fn, sk_my_iter->step == ST_LOAN ?
		  1000 + id % 5 * 1000 : sk_req_len(id, fn), true, true);
	if (fn == SK_HOLD) {
		uint64_t pending = 0, deadline = sk_deadline();
		char b = 'P';
		int ret;

		/* Said before the wait: the driver kills once we sleep in it. */
		atomic_store(&sk_my_iter->reached, ST_WAITING + 1);
		if (write(SK_REPORT_FD, &b, 1) != 1)
			_exit(SKE_REPORT);
		do {
			ret = knitk_consumer_wait(c, &pending, deadline);
		} while (ret == 0 || ret == -EINTR);
		_exit(ret > 0 ? SKE_HELD_ANSWERED : SKE_WAIT);
	}
	sk_answer(c, tab, id, fn, true);
	_exit(SKE_NOT_KILLED);
}

/* ------------------------------------------------------------ the server */

enum { SK_FREE, SK_GRANTED, SK_DYING };

struct sk_waiter {
	int conn, pidfd;
};

struct sk_role {
	_Atomic int state;
	/* The door thread's: */
	int pidfd;
	uint32_t gen0;
	struct sk_waiter waiters[SK_WAITERS];
	unsigned int nr_waiters;
	/* The lane thread's: the call it holds unanswered, or -1; the last taken. */
	int64_t held, last;
};

struct sk_server {
	struct knitk_endpoint *ep;
	struct sk_table *tab;
	struct knitk_producer *req[SK_WORKERS];
	struct knitk_consumer *ret[SK_WORKERS];
	unsigned int mb_req[SK_WORKERS], mb_ret[SK_WORKERS];
	int lfd, efd;
	bool futex, can_kick;
	pthread_t lane_th, door_th;
	_Atomic int stop;
	_Atomic uint64_t clean;		/* roles whose process is gone */
	struct sk_role roles[SK_WORKERS];
	/* Tallies. */
	_Atomic uint64_t served, held, dropped, discarded_answers, grants,
		joined, cleanups, waiters_gone, errors;
	char err[256];
	_Atomic int err_set;
};

static inline void sk_error(struct sk_server *sv, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static inline void sk_error(struct sk_server *sv, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int expect = 0;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	atomic_fetch_add(&sv->errors, 1);
	printf("# server: %s\n", buf);
	if (atomic_compare_exchange_strong(&sv->err_set, &expect, 1))
		memcpy(sv->err, buf, sizeof(buf));
}

static inline void sk_kick_lanes(struct sk_server *sv)
{
	if (sv->can_kick)
		knitk_doorbell_kick_self(sv->ep);
}

static inline void sk_poke_door(struct sk_server *sv)
{
	uint64_t one = 1;

	if (write(sv->efd, &one, sizeof(one)) != sizeof(one))
		sk_error(sv, "eventfd write: %s", strerror(errno));
}

/*
 * A whole request arena free: claim a lane, reserve every byte, give it
 * back.  The allocator keeps no public count of its free bytes; this is
 * its observable: any live slot makes it -ENOSPC.
 */
static inline int sk_arena_whole(struct knitk_producer *p)
{
	void *buf;
	int lane = knitk_lane_claim(p), ret;

	if (lane < 0)
		return lane;
	ret = knitk_lane_reserve(p, (unsigned int)lane, SK_ARENA, &buf);
	knitk_lane_release(p, (unsigned int)lane);
	return ret;
}

/* Serve (or, @dead, drop) the pending calls of role @w; returns how many. */
static inline int sk_take_calls(struct sk_server *sv, unsigned int w, bool dead)
{
	struct sk_call *tab = sk_calls(sv->tab);
	uint64_t nr_ids = (uint64_t)sv->tab->nr_iters * SK_IDS;
	struct knitk_msg msg = { .size = sizeof(msg) };
	uint64_t pending, done = 0, id;
	unsigned char ans[SK_ARENA];
	int n, lane, ret, fn;

	n = knitk_lane_scan(sv->ret[w], &pending);
	if (n <= 0)
		return n;
	while ((lane = knitk_lane_next(sv->ret[w], &pending)) >= 0) {
		done |= 1ULL << lane;
		ret = knitk_lane_decode(sv->ret[w], (unsigned int)lane, &msg);
		id = msg.header.task_id;
		fn = (int)msg.header.function_id;
		if (ret || id >= nr_ids) {
			sk_error(sv, "role %u: lane %d does not decode (%d) or id %llu out of range",
				 w, lane, ret, (unsigned long long)id);
			continue;
		}
		/* A client publishes in id order, a new one from a new producer. */
		if ((int64_t)id <= sv->roles[w].last)
			sk_error(sv, "role %u: call %llu taken after call %lld: not in publish order",
				 w, (unsigned long long)id, (long long)sv->roles[w].last);
		sv->roles[w].last = (int64_t)id;
		if (atomic_load(&tab[id].role) != w + 1)
			sk_error(sv, "call %llu of role %u came through role %u",
				 (unsigned long long)id, atomic_load(&tab[id].role) - 1u, w);
		/* A loan's length is its own; the others' follow from the id. */
		if ((fn == SK_BIG ? msg.len != SK_ARENA : msg.len < 8) ||
		    !sk_check(msg.data, msg.len, id, 0)) {
			atomic_fetch_add(&tab[id].bad, 1);
			sk_error(sv, "call %llu: request bytes wrong", (unsigned long long)id);
			continue;
		}
		if (dead) {
			atomic_fetch_add(&tab[id].dropped, 1);
			atomic_fetch_add(&sv->dropped, 1);
			continue;
		}
		if (fn == SK_HOLD) {
			if (sv->roles[w].held >= 0)
				sk_error(sv, "role %u: a second held call", w);
			sv->roles[w].held = (int64_t)id;
			atomic_fetch_add(&sv->held, 1);
			continue;
		}
		if (atomic_fetch_add(&tab[id].served, 1))
			sk_error(sv, "call %llu served twice", (unsigned long long)id);
		atomic_fetch_add(&sv->served, 1);
		{
			struct knitk_lane_header h = { .function_id = (uint32_t)fn, .task_id = id };
			size_t len = sk_ans_len(id, fn);

			sk_fill(ans, 0, len, id, 1);
			ret = knitk_producer_send(sv->req[w], &h, ans, len);
			if (ret < 0)
				sk_error(sv, "role %u: answer to call %llu not sent: %s", w,
					 (unsigned long long)id, strerror(-ret));
			else
				knitk_producer_notify(sv->req[w]);
		}
	}
	ret = knitk_lane_ack(sv->ret[w], done);
	if (ret)
		sk_error(sv, "role %u: ack: %s", w, strerror(-ret));
	return n;
}

/* Role @w's process is gone: leave its mailboxes clean for the next client. */
static inline void sk_cleanup(struct sk_server *sv, unsigned int w)
{
	struct sk_call *tab = sk_calls(sv->tab);
	uint64_t pend;
	uint32_t g;
	int ret;

	if (knitk_endpoint_role(sv->ep, w, &g) != 0)
		sk_error(sv, "role %u still live after its process exited", w);
	while (sk_take_calls(sv, w, true) > 0)
		;
	if (sv->roles[w].held >= 0) {
		atomic_fetch_add(&tab[sv->roles[w].held].dropped, 1);
		atomic_fetch_add(&sv->dropped, 1);
		sv->roles[w].held = -1;
	}
	if (!knitk_mailbox_pending(sv->ep, sv->mb_req[w], &pend) && pend)
		atomic_fetch_add(&sv->discarded_answers, (uint64_t)__builtin_popcountll(pend));
	ret = knitk_producer_reset_consumer(sv->req[w]);
	if (ret < 0)
		sk_error(sv, "role %u: reset of its request mailbox: %s", w, strerror(-ret));
	if (knitk_mailbox_pending(sv->ep, sv->mb_ret[w], &pend) || pend)
		sk_error(sv, "role %u: return mailbox not empty after the drain: %#llx", w,
			 (unsigned long long)pend);
	if (knitk_mailbox_pending(sv->ep, sv->mb_req[w], &pend) || pend)
		sk_error(sv, "role %u: request mailbox not empty after the reset: %#llx", w,
			 (unsigned long long)pend);
	ret = sk_arena_whole(sv->req[w]);
	if (ret < 0)
		sk_error(sv, "role %u: request arena not whole after the reset: %s", w,
			 strerror(-ret));
	sv->roles[w].last = -1;
	atomic_fetch_add(&sv->cleanups, 1);
	atomic_store(&sv->roles[w].state, SK_FREE);
	sk_poke_door(sv);
}

static inline void *sk_lane_thread(void *arg)
{
	struct sk_server *sv = arg;
	uint64_t clean, wait_ns = sv->can_kick ? 1000000000ULL : 2000000ULL;
	unsigned int w;
	uint32_t seq;
	int n, ret;

	while (!atomic_load(&sv->stop)) {
		clean = atomic_exchange(&sv->clean, 0);
		for (w = 0; w < SK_WORKERS; w++)
			if (clean & (1ULL << w))
				sk_cleanup(sv, w);
		for (n = 0, w = 0; w < SK_WORKERS; w++)
			n += sk_take_calls(sv, w, false) > 0;
		if (n)
			continue;
		/* Flags after the prepare: a kick after them ends the wait. */
		ret = knitk_doorbell_prepare(sv->ep, &seq);
		if (ret) {
			sk_error(sv, "prepare: %s", strerror(-ret));
			break;
		}
		if (atomic_load(&sv->stop) || atomic_load(&sv->clean)) {
			knitk_doorbell_cancel(sv->ep);
			continue;
		}
		ret = knitk_doorbell_wait(sv->ep, seq, sk_now_ns() + wait_ns);
		if (ret && ret != -ETIMEDOUT && ret != -EINTR) {
			sk_error(sv, "doorbell wait: %s", strerror(-ret));
			break;
		}
	}
	return NULL;
}

static inline int sk_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static inline void sk_waiter_drop(struct sk_role *r, unsigned int i)
{
	close(r->waiters[i].conn);
	close(r->waiters[i].pidfd);
	memmove(&r->waiters[i], &r->waiters[i + 1],
		(r->nr_waiters - i - 1) * sizeof(r->waiters[0]));
	r->nr_waiters--;
}

/* Role @w is clean: hand it to its first waiter still there. */
static inline void sk_grant(struct sk_server *sv, unsigned int w)
{
	struct sk_role *r = &sv->roles[w];
	int kfd = knitk_endpoint_fd(sv->ep);

	while (atomic_load(&r->state) == SK_FREE && r->nr_waiters) {
		struct sk_reply rp = { .magic = SK_MAGIC, .role = w };
		char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
		struct iovec iov = { .iov_base = &rp, .iov_len = sizeof(rp) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
				    .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		uint32_t g;

		if (knitk_endpoint_role(sv->ep, w, &g) != 0)
			sk_error(sv, "role %u live while free", w);
		rp.gen0 = g;
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &kfd, sizeof(kfd));
		if (sendmsg(r->waiters[0].conn, &m, MSG_NOSIGNAL) != (ssize_t)sizeof(rp)) {
			/* Gone before it got the fd. */
			atomic_fetch_add(&sv->waiters_gone, 1);
			sk_waiter_drop(r, 0);
			continue;
		}
		r->gen0 = g;
		r->pidfd = r->waiters[0].pidfd;
		close(r->waiters[0].conn);
		memmove(&r->waiters[0], &r->waiters[1], (r->nr_waiters - 1) * sizeof(r->waiters[0]));
		r->nr_waiters--;
		atomic_store(&r->state, SK_GRANTED);
		atomic_fetch_add(&sv->grants, 1);
	}
}

static inline void sk_accept(struct sk_server *sv)
{
	struct timeval tv = { .tv_sec = 5 };
	struct sk_request rq;
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	struct sk_role *r;
	int conn = accept4(sv->lfd, NULL, NULL, SOCK_CLOEXEC), pidfd;
	struct pollfd pc = { .fd = conn, .events = POLLRDHUP };

	if (conn < 0)
		return;
	setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (recv(conn, &rq, sizeof(rq), MSG_WAITALL) != sizeof(rq) || rq.magic != SK_MAGIC ||
	    rq.role >= SK_WORKERS || getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cr, &cl)) {
		sk_error(sv, "a client's request is malformed or cut");
		close(conn);
		return;
	}
	/*
	 * The pid may be gone, even reused, by now (a client killed before
	 * we accepted it is reaped at once).  Its socket closes before its
	 * pid can be reused, so a peer still connected after the
	 * pidfd_open() means the pidfd is the client's.
	 */
	pidfd = sk_pidfd_open(cr.pid);
	if (pidfd < 0 || poll(&pc, 1, 0) != 0) {
		if (pidfd < 0 && errno != ESRCH)
			sk_error(sv, "pidfd_open(%d): %s", (int)cr.pid, strerror(errno));
		atomic_fetch_add(&sv->waiters_gone, 1);
		if (pidfd >= 0)
			close(pidfd);
		close(conn);
		return;
	}
	r = &sv->roles[rq.role];
	if (r->nr_waiters == SK_WAITERS) {
		sk_error(sv, "role %u: too many clients waiting", rq.role);
		close(conn);
		close(pidfd);
		return;
	}
	r->waiters[r->nr_waiters++] = (struct sk_waiter){ .conn = conn, .pidfd = pidfd };
}

/* The client holding role @w is gone (its pidfd is readable). */
static inline void sk_gone(struct sk_server *sv, unsigned int w)
{
	struct sk_role *r = &sv->roles[w];
	int marked = -EOPNOTSUPP;
	uint32_t g;

	/* The futex backend has no kernel to end the role: we do. */
	if (sv->futex)
		marked = knitk_endpoint_mark_dead(sv->ep, w);
	knitk_endpoint_role(sv->ep, w, &g);
	if (marked == 0 || g != r->gen0)
		atomic_fetch_add(&sv->joined, 1);
	close(r->pidfd);
	r->pidfd = -1;
	atomic_store(&r->state, SK_DYING);
	atomic_fetch_or(&sv->clean, 1ULL << w);
	sk_kick_lanes(sv);
}

static inline void *sk_door_thread(void *arg)
{
	struct sk_server *sv = arg;
	struct pollfd p[2 + SK_WORKERS * (1 + SK_WAITERS)];
	int who[2 + SK_WORKERS * (1 + SK_WAITERS)];
	unsigned int w, i, n;
	uint64_t v;

	while (!atomic_load(&sv->stop)) {
		p[0] = (struct pollfd){ .fd = sv->lfd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = sv->efd, .events = POLLIN };
		n = 2;
		for (w = 0; w < SK_WORKERS; w++) {
			struct sk_role *r = &sv->roles[w];

			if (atomic_load(&r->state) == SK_GRANTED) {
				who[n] = (int)(w * (1 + SK_WAITERS));
				p[n++] = (struct pollfd){ .fd = r->pidfd, .events = POLLIN };
			}
			for (i = 0; i < r->nr_waiters; i++) {
				who[n] = (int)(w * (1 + SK_WAITERS) + 1 + i);
				p[n++] = (struct pollfd){ .fd = r->waiters[i].pidfd, .events = POLLIN };
			}
		}
		if (poll(p, n, 1000) < 0) {
			if (errno != EINTR)
				sk_error(sv, "poll: %s", strerror(errno));
			continue;
		}
		if (p[1].revents && read(sv->efd, &v, sizeof(v)) != sizeof(v))
			sk_error(sv, "eventfd read: %s", strerror(errno));
		/* Waiters from the back, so the indexes stay right. */
		for (i = n; i-- > 2;) {
			if (!p[i].revents)
				continue;
			w = (unsigned int)who[i] / (1 + SK_WAITERS);
			if (who[i] % (1 + SK_WAITERS) == 0) {
				sk_gone(sv, w);
			} else {
				atomic_fetch_add(&sv->waiters_gone, 1);
				sk_waiter_drop(&sv->roles[w], (unsigned int)who[i] % (1 + SK_WAITERS) - 1);
			}
		}
		if (p[0].revents)
			sk_accept(sv);
		for (w = 0; w < SK_WORKERS; w++)
			sk_grant(sv, w);
	}
	return NULL;
}

static inline int sk_server_start(struct sk_server *sv, struct sk_table *tab,
				  unsigned int knot_flags)
{
	struct knitk_geometry g = {
		.nr_workers = SK_WORKERS, .nr_submitters = 1, .lanes = KNITK_LANES,
		.inline_bytes = SK_INLINE, .arena_bytes = SK_ARENA,
	};
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	static _Atomic unsigned int nr_servers;
	unsigned int w;
	size_t len;
	int ret;

	memset(sv, 0, sizeof(*sv));
	sv->tab = tab;
	sv->lfd = sv->efd = -1;
	ret = knitk_endpoint_create(&g, knot_flags, &sv->ep);
	if (ret)
		return ret;
	ret = knitk_endpoint_join(sv->ep, KNITK_ROLE_HOST, 0);
	if (ret < 0)
		return ret;
	sv->futex = knitk_endpoint_backend(sv->ep) == KNITK_BACKEND_FUTEX;
	sv->can_kick = knitk_doorbell_can_kick(sv->ep) == 1;
	for (w = 0; w < SK_WORKERS; w++) {
		sv->mb_req[w] = (unsigned int)knitk_endpoint_request_mailbox(sv->ep, 0, w);
		sv->mb_ret[w] = (unsigned int)knitk_endpoint_return_mailbox(sv->ep, w);
		ret = knitk_producer_create(sv->ep, sv->mb_req[w], &sv->req[w]);
		if (!ret)
			ret = knitk_consumer_create(sv->ep, sv->mb_ret[w], &sv->ret[w]);
		if (ret)
			return ret;
		sv->roles[w].pidfd = -1;
		sv->roles[w].held = -1;
		sv->roles[w].last = -1;
		ret = sk_arena_whole(sv->req[w]);
		if (ret)
			return ret;
	}
	snprintf(tab->sock, sizeof(tab->sock), "knitk-server-kill-%d-%u", (int)getpid(),
		 atomic_fetch_add(&nr_servers, 1));
	len = strlen(tab->sock);
	memcpy(a.sun_path + 1, tab->sock, len);
	sv->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sv->lfd < 0 ||
	    bind(sv->lfd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) ||
	    listen(sv->lfd, 64))
		return -errno;
	sv->efd = eventfd(0, EFD_CLOEXEC);
	if (sv->efd < 0)
		return -errno;
	ret = pthread_create(&sv->lane_th, NULL, sk_lane_thread, sv);
	if (ret)
		return -ret;
	ret = pthread_create(&sv->door_th, NULL, sk_door_thread, sv);
	if (ret) {
		atomic_store(&sv->stop, 1);
		sk_kick_lanes(sv);
		pthread_join(sv->lane_th, NULL);
		return -ret;
	}
	return 0;
}

static inline void sk_server_stop(struct sk_server *sv)
{
	atomic_store(&sv->stop, 1);
	sk_kick_lanes(sv);
	sk_poke_door(sv);
	pthread_join(sv->lane_th, NULL);
	pthread_join(sv->door_th, NULL);
}

static inline void sk_server_destroy(struct sk_server *sv)
{
	unsigned int w;

	for (w = 0; w < SK_WORKERS; w++) {
		while (sv->roles[w].nr_waiters)
			sk_waiter_drop(&sv->roles[w], 0);
		if (sv->roles[w].pidfd >= 0)
			close(sv->roles[w].pidfd);
		knitk_producer_destroy(sv->req[w]);
		knitk_consumer_destroy(sv->ret[w]);
	}
	knitk_endpoint_destroy(sv->ep);
	if (sv->lfd >= 0)
		close(sv->lfd);
	if (sv->efd >= 0)
		close(sv->efd);
}

/* ------------------------------------------------------------ the driver */

/* What the module says (the guest's probe fills it; 0s elsewhere). */
struct sk_probe {
	long long knots, bytes, endpoints, alive_roles, stat_knots;
};

struct sk_config {
	unsigned int knot_flags, iters;
	int (*probe)(struct sk_probe *out);	/* NULL: no module */
};

enum sk_class { SC_UNTOUCHED, SC_COMPLETED, SC_NEVER_SENT, SC_DROPPED, SC_DISCARDED,
		SC_DROPPED_OR_DISCARDED, SC_INVALID, NR_CLASSES };

static const char *const sk_class_name[NR_CLASSES] = {
	"untouched", "completed", "never sent", "dropped", "answer discarded",
	"dropped or discarded", "invalid",
};

struct sk_tally {
	unsigned int iters, killed, left, failed, at[NR_STEPS];
	uint64_t classes[NR_CLASSES];
	uint64_t twice, wrong, bad, mismatched;
	uint64_t served, dropped, discarded_answers, joined, deaths_seen, cleanups;
	uint64_t server_errors, waiters_gone, grants;
	int fds0, fds1, fds_end, pidfds1, pidfds_end, threads1, threads_end;
	int fds_after, threads0, threads_after;
	bool children_left, fresh_ok, settled, probe_ok;
	struct sk_probe probe1, probe_end;
	double secs;
};

struct sk_slot {
	pid_t pid;
	int rfd;
	unsigned int it;
	uint64_t deadline;
};

static inline int sk_spawn(const char *exe, int tfd, struct sk_slot *s, unsigned int it)
{
	posix_spawn_file_actions_t fa;
	char num[16], *args[4];
	int pfd[2], ret;

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	snprintf(num, sizeof(num), "%u", it);
	args[0] = (char *)exe;
	args[1] = (char *)SK_CLIENT_ARG;
	args[2] = num;
	args[3] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, tfd, SK_TABLE_FD);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], SK_REPORT_FD);
	ret = posix_spawn(&s->pid, exe, &fa, NULL, args, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (ret) {
		close(pfd[0]);
		return -ret;
	}
	s->rfd = pfd[0];
	s->it = it;
	s->deadline = sk_deadline();
	return 0;
}

/* 'S' when @pid sleeps. */
static inline char sk_proc_state(pid_t pid)
{
	char path[64], buf[512], *q;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	q = strrchr(buf, ')');
	return q && q[1] ? q[2] : '?';
}

static inline void sk_describe(struct sk_server *sv, struct sk_slot *s)
{
	struct sk_iter *it = &sk_iters(sv->tab)[s->it];
	uint64_t pr = 0, pq = 0;

	knitk_mailbox_pending(sv->ep, sv->mb_ret[it->role], &pr);
	knitk_mailbox_pending(sv->ep, sv->mb_req[it->role], &pq);
	printf("# client of iteration %u (pid %d, role %u, %u calls, then %s): reached %d,"
	       " process state %c, role state %d, return pending %#llx, request pending %#llx\n",
	       s->it, (int)s->pid, it->role, it->ncalls, sk_step_name[it->step],
	       (int)atomic_load(&it->reached) - 1, sk_proc_state(s->pid),
	       atomic_load(&sv->roles[it->role].state), (unsigned long long)pr,
	       (unsigned long long)pq);
}

/*
 * The client of @s told us something or its pipe closed: kill it at its
 * step (the waiting step once its doorbell sleeps), reap it, count it.
 */
static inline void sk_finish(struct sk_server *sv, struct sk_slot *s, bool timed_out,
			     struct sk_tally *t)
{
	struct sk_iter *it = &sk_iters(sv->tab)[s->it];
	uint64_t awake = 0, deadline = sk_deadline();
	int status = 0;
	char c;
	bool said = !timed_out && read(s->rfd, &c, 1) == 1;

	if (said && it->step == ST_WAITING) {
		/* Asleep in its wait: its doorbell's sleeping flag and the process. */
		for (;;) {
			knitk_endpoint_awake(sv->ep, &awake, NULL);
			if (!(awake & (1ULL << it->role)) && sk_proc_state(s->pid) == 'S')
				break;
			if (sk_now_ns() > deadline) {
				printf("# the waiting client never slept in its wait\n");
				sk_describe(sv, s);
				t->failed++;
				break;
			}
			usleep(100);
		}
	}
	if (timed_out) {
		printf("# no word from a client in %d s\n", SK_WAIT_S);
		sk_describe(sv, s);
	}
	if (said || timed_out)
		kill(s->pid, SIGKILL);
	if (waitpid(s->pid, &status, 0) != s->pid) {
		t->failed++;
	} else if (said && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL &&
		   atomic_load(&it->reached) == it->step + 1) {
		t->killed++;
		t->at[it->step]++;
	} else if (!said && it->step == ST_LEAVE && WIFEXITED(status) && !WEXITSTATUS(status)) {
		t->left++;
		t->at[ST_LEAVE]++;
	} else if (!timed_out) {
		printf("# client of iteration %u (role %u, %u calls, then %s): %s %d (%s)\n",
		       s->it, it->role, it->ncalls, sk_step_name[it->step],
		       WIFEXITED(status) ? "exit" : "signal",
		       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
		       WIFEXITED(status) ? sk_exit_name(WEXITSTATUS(status)) : "");
		t->failed++;
	} else {
		t->failed++;
	}
	close(s->rfd);
	s->pid = 0;
	s->rfd = -1;
}

/* Run the clients of iterations [@from, @to) on every role at once. */
static inline void sk_run_clients(struct sk_server *sv, const char *exe, int tfd,
				  unsigned int from, unsigned int to, struct sk_tally *t)
{
	struct sk_slot slots[SK_WORKERS] = { 0 };
	struct pollfd p[SK_WORKERS];
	unsigned int next = from, w, live = 0;
	uint64_t now;

	for (;;) {
		for (w = 0; w < SK_WORKERS; w++) {
			if (slots[w].pid || next >= to)
				continue;
			sk_iters(sv->tab)[next].role = (uint8_t)w;
			if (sk_spawn(exe, tfd, &slots[w], next)) {
				printf("# posix_spawn: %s\n", strerror(errno));
				t->failed++;
			} else {
				live++;
			}
			next++;
			t->iters++;
		}
		if (!live)
			break;
		for (w = 0; w < SK_WORKERS; w++)
			p[w] = (struct pollfd){ .fd = slots[w].pid ? slots[w].rfd : -1,
						.events = POLLIN };
		if (poll(p, SK_WORKERS, 100) < 0 && errno != EINTR)
			break;
		now = sk_now_ns();
		for (w = 0; w < SK_WORKERS; w++) {
			if (!slots[w].pid)
				continue;
			if (p[w].revents || now > slots[w].deadline) {
				sk_finish(sv, &slots[w], !p[w].revents, t);
				live--;
			}
		}
	}
}

/* Until every role is clean again (bounded). */
static inline bool sk_settle(struct sk_server *sv)
{
	uint64_t deadline = sk_deadline();
	unsigned int w;

	for (;;) {
		bool all = !atomic_load(&sv->clean);

		for (w = 0; w < SK_WORKERS; w++)
			all = all && atomic_load(&sv->roles[w].state) == SK_FREE;
		if (all)
			return true;
		if (sk_now_ns() > deadline) {
			for (w = 0; w < SK_WORKERS; w++)
				printf("# role %u state %d\n", w, atomic_load(&sv->roles[w].state));
			return false;
		}
		usleep(1000);
	}
}

/* The class a call ends in, from the run table, and the one its step implies. */
static inline enum sk_class sk_class_of(const struct sk_call *c)
{
	unsigned int b = atomic_load(&c->begun), s = atomic_load(&c->served),
		     d = atomic_load(&c->dropped), a = atomic_load(&c->answered);

	if (!b)
		return s || d || a ? SC_INVALID : SC_UNTOUCHED;
	if (s > 1 || d > 1 || a > 1 || s + d > 1 || a > s)
		return SC_INVALID;
	if (a)
		return SC_COMPLETED;
	if (s)
		return SC_DISCARDED;
	return d ? SC_DROPPED : SC_NEVER_SENT;
}

static inline enum sk_class sk_class_expected(const struct sk_iter *it, unsigned int c)
{
	if (c < it->ncalls)
		return SC_COMPLETED;
	if (c > it->ncalls)
		return SC_UNTOUCHED;
	switch (it->step) {
	case ST_CLAIMED: case ST_LOAN: return SC_NEVER_SENT;
	case ST_PUBLISHED: return SC_DROPPED_OR_DISCARDED;
	case ST_WAITING: return SC_DROPPED;
	case ST_ANSWER_PENDING: return SC_DISCARDED;
	case ST_DECODED: case ST_ACKED: return SC_COMPLETED;
	default: return SC_UNTOUCHED;
	}
}

static inline void sk_verify(struct sk_table *tab, struct sk_tally *t)
{
	struct sk_call *calls = sk_calls(tab);
	unsigned int i, c, said = 0;

	for (i = 0; i < tab->nr_iters; i++) {
		struct sk_iter *it = &sk_iters(tab)[i];

		for (c = 0; c < SK_IDS; c++) {
			struct sk_call *k = &calls[(uint64_t)i * SK_IDS + c];
			enum sk_class got = sk_class_of(k), want = sk_class_expected(it, c);

			t->classes[got]++;
			t->twice += atomic_load(&k->served) > 1 || atomic_load(&k->answered) > 1 ||
				    atomic_load(&k->served) + atomic_load(&k->dropped) > 1;
			t->wrong += atomic_load(&k->wrong);
			t->bad += atomic_load(&k->bad);
			if (got == want || (want == SC_DROPPED_OR_DISCARDED &&
					    (got == SC_DROPPED || got == SC_DISCARDED)))
				continue;
			t->mismatched++;
			if (said++ < 10)
				printf("# call %llu (iteration %u, role %u, %u calls, then %s): %s,"
				       " expected %s (begun %u served %u dropped %u answered %u)\n",
				       (unsigned long long)i * SK_IDS + c, i, it->role, it->ncalls,
				       sk_step_name[it->step], sk_class_name[got], sk_class_name[want],
				       atomic_load(&k->begun), atomic_load(&k->served),
				       atomic_load(&k->dropped), atomic_load(&k->answered));
		}
	}
}

/*
 * @cfg->iters clients killed (or leaving) at random steps, then a fresh
 * client per role, then every count.  Negative errno when the server or
 * the table cannot be made; the findings in @t.
 */
static inline int sk_run(const struct sk_config *cfg, struct sk_tally *t)
{
	unsigned int nr = cfg->iters + SK_WORKERS, i, w;
	uint64_t seed, t0 = sk_now_ns(), pend;
	struct sk_server *sv;
	struct sk_table *tab;
	uint32_t ds0 = 0, ds1 = 0;
	char exe[4096];
	ssize_t n;
	int tfd, ret;
	const char *env = getenv("KNITK_SERVER_KILL_SEED");

	memset(t, 0, sizeof(*t));
	t->threads0 = count_threads();
	t->fds0 = count_fds(false);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -errno;
	exe[n] = 0;
	tfd = memfd_create("knitk-server-kill", MFD_CLOEXEC);
	if (tfd < 0)
		return -errno;
	if (ftruncate(tfd, (off_t)sk_table_bytes(nr))) {
		close(tfd);
		return -errno;
	}
	tab = mmap(NULL, sk_table_bytes(nr), PROT_READ | PROT_WRITE, MAP_SHARED, tfd, 0);
	if (tab == MAP_FAILED) {
		close(tfd);
		return -errno;
	}
	tab->magic = SK_MAGIC;
	tab->nr_iters = nr;
	seed = env ? strtoull(env, NULL, 0) : sk_now_ns();
	printf("# seed %llu (KNITK_SERVER_KILL_SEED), %u clients\n", (unsigned long long)seed,
	       cfg->iters);
	for (i = 0; i < nr; i++) {
		struct sk_iter *it = &sk_iters(tab)[i];
		uint64_t r = sk_mix(seed + i);

		if (i < cfg->iters) {
			it->step = (uint8_t)(i % NR_STEPS);
			it->ncalls = (uint8_t)(it->step <= ST_ATTACHED ? 0 : r % (SK_MAX_CALLS + 1));
		} else {
			/* The fresh clients: calls, one as large as the arena. */
			it->step = ST_LEAVE;
			it->ncalls = SK_FRESH_CALLS;
			it->big = 1;
		}
	}
	/* Mixed steps, one per client in turn. */
	for (i = cfg->iters; i > 1; i--) {
		unsigned int j = (unsigned int)(sk_mix(seed ^ (i * 0x9e37ULL)) % i);
		struct sk_iter x = sk_iters(tab)[i - 1];

		sk_iters(tab)[i - 1] = sk_iters(tab)[j];
		sk_iters(tab)[j] = x;
	}
	sv = calloc(1, sizeof(*sv));
	if (!sv) {
		ret = -ENOMEM;
		goto out_tab;
	}
	ret = sk_server_start(sv, tab, cfg->knot_flags);
	if (ret) {
		sk_server_destroy(sv);
		goto out_sv;
	}
	knitk_endpoint_deaths(sv->ep, &ds0, NULL);
	/* The baseline: the server up, no client yet. */
	t->fds1 = count_fds(false);
	t->pidfds1 = count_fds(true);
	t->threads1 = count_threads();
	if (cfg->probe)
		t->probe_ok = !cfg->probe(&t->probe1);

	sk_run_clients(sv, exe, tfd, 0, cfg->iters, t);
	t->settled = sk_settle(sv);
	/* The server still serves: a fresh client on every role. */
	i = t->failed;
	w = t->left;
	sk_run_clients(sv, exe, tfd, cfg->iters, nr, t);
	t->fresh_ok = t->failed == i && t->left == w + SK_WORKERS;
	t->settled = sk_settle(sv) && t->settled;

	t->fds_end = count_fds(false);
	t->pidfds_end = count_fds(true);
	t->threads_end = count_threads();
	t->children_left = !no_children();
	if (cfg->probe)
		t->probe_ok = !cfg->probe(&t->probe_end) && t->probe_ok;
	knitk_endpoint_deaths(sv->ep, &ds1, NULL);
	t->deaths_seen = ds1 - ds0;
	sk_server_stop(sv);
	/* Stopped: the mailboxes are ours to look at. */
	for (w = 0; w < SK_WORKERS; w++) {
		if (knitk_mailbox_pending(sv->ep, sv->mb_req[w], &pend) || pend ||
		    knitk_mailbox_pending(sv->ep, sv->mb_ret[w], &pend) || pend ||
		    sk_arena_whole(sv->req[w]))
			sk_error(sv, "role %u: a mailbox not empty or its request arena not whole at the end", w);
	}
	sk_verify(tab, t);
	t->served = atomic_load(&sv->served);
	t->dropped = atomic_load(&sv->dropped);
	t->discarded_answers = atomic_load(&sv->discarded_answers);
	t->joined = atomic_load(&sv->joined);
	t->cleanups = atomic_load(&sv->cleanups);
	t->server_errors = atomic_load(&sv->errors);
	t->waiters_gone = atomic_load(&sv->waiters_gone);
	t->grants = atomic_load(&sv->grants);
	sk_server_destroy(sv);
	ret = 0;
out_sv:
	free(sv);
out_tab:
	munmap(tab, sk_table_bytes(nr));
	close(tfd);
	t->fds_after = count_fds(false);
	t->threads_after = count_threads();
	t->secs = (double)(sk_now_ns() - t0) / 1e9;
	return ret;
}

static inline void sk_print(const struct sk_tally *t)
{
	unsigned int s;

	printf("# %u clients in %.1f s: %u killed, %u left, %u failed; by step:", t->iters,
	       t->secs, t->killed, t->left, t->failed);
	for (s = 0; s < NR_STEPS; s++)
		printf(" %s %u%s", sk_step_name[s], t->at[s], s + 1 < NR_STEPS ? "," : "\n");
	printf("# calls: %llu completed, %llu never sent, %llu dropped, %llu answer discarded,"
	       " %llu invalid; %llu served, %llu twice, %llu wrong, %llu bad, %llu not as expected\n",
	       (unsigned long long)t->classes[SC_COMPLETED],
	       (unsigned long long)t->classes[SC_NEVER_SENT],
	       (unsigned long long)t->classes[SC_DROPPED],
	       (unsigned long long)t->classes[SC_DISCARDED],
	       (unsigned long long)t->classes[SC_INVALID], (unsigned long long)t->served,
	       (unsigned long long)t->twice, (unsigned long long)t->wrong,
	       (unsigned long long)t->bad, (unsigned long long)t->mismatched);
	printf("# server: %llu grants, %llu cleanups, %llu roles joined and ended, knot's death_seq +%llu,"
	       " %llu clients gone before their grant, %llu errors\n",
	       (unsigned long long)t->grants,
	       (unsigned long long)t->cleanups, (unsigned long long)t->joined,
	       (unsigned long long)t->deaths_seen, (unsigned long long)t->waiters_gone,
	       (unsigned long long)t->server_errors);
	printf("# fds %d -> %d (pidfds %d -> %d), threads %d -> %d; after the server: fds %d -> %d,"
	       " threads %d -> %d; children left: %s\n", t->fds1, t->fds_end, t->pidfds1,
	       t->pidfds_end, t->threads1, t->threads_end, t->fds0, t->fds_after, t->threads0,
	       t->threads_after, t->children_left ? "yes" : "no");
}

#endif /* KNITK_SERVER_KILL_H */
