// SPDX-License-Identifier: GPL-2.0
/*
 * Packed lanes (knitk_producer_send_packed, knitk_lane_unpack,
 * docs/protocol.md L7), futex backend: every message arrives once and in
 * order, its length and every byte derived from its sequence number, from
 * a writer thread and a writer process, and to a claimant of a stealing
 * mailbox, in records of mixed sizes that include ones that fill a lane
 * exactly; records are packed into as few lanes as they fit and a message
 * too big for a lane is refused with nothing sent; a writer SIGKILLed
 * mid-stream leaves the reader every record it published, none torn;
 * hostile packed lanes (forged lengths and counts: past the end, running
 * over the used bytes, zero, huge) are refused -EBADMSG, lane by lane,
 * with the next lane read as usual and the page past the hostile lane
 * unreadable, so a read outside it would fault; bad arguments get a
 * negative errno.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <knitk.h>

#include "tap.h"
#include "stream_fx.h"

#define NR_MSGS		100000
/* Inline bytes per lane: lanes of 256 bytes, so lane 14 ends on a page. */
#define INLINE		192
#define REC_MAX		(INLINE - KNITK_PACK_PREFIX_BYTES)
/* The lane whose inline bytes end where the sector's second page starts. */
#define EDGE_LANE	14
/* Messages per send_packed call at most. */
#define BATCH_MAX	100

static int fx_init(struct fx *f)
{
	return fx_init_inline(f, INLINE);
}

/*
 * Message @seq's length: 1 to REC_MAX, mixed; every 97th fills a lane
 * alone, every 89th is 1 byte.
 */
static size_t msg_len(uint64_t seq)
{
	if (seq % 97 == 0)
		return REC_MAX;
	if (seq % 89 == 0)
		return 1;
	return 1 + (size_t)((seq * 2654435761ULL) >> 7) % 40;
}

static unsigned char msg_byte(uint64_t seq, size_t j)
{
	return (unsigned char)((seq * 0x9e3779b97f4a7c15ULL) >> 56) ^
	       (unsigned char)(seq >> (8 * (j % 8))) ^ (unsigned char)(j * 31);
}

static void msg_fill(unsigned char *buf, uint64_t seq)
{
	size_t j, len = msg_len(seq);

	for (j = 0; j < len; j++)
		buf[j] = msg_byte(seq, j);
}

/* Whether @r is message @seq, whole. */
static bool msg_is(const struct knitk_record *r, uint64_t seq)
{
	const unsigned char *b = r->data;
	size_t j;

	if (r->len != msg_len(seq))
		return false;
	for (j = 0; j < r->len; j++)
		if (b[j] != msg_byte(seq, j))
			return false;
	return true;
}

/*
 * Send messages @first.. @first + @n - 1 (for ever with @n UINT64_MAX)
 * in calls of 1 to BATCH_MAX messages, ringing after each; under
 * backpressure yield and retry.  0 or a negative errno.
 */
static int send_msgs(struct knitk_producer *p, uint64_t first, uint64_t n)
{
	static unsigned char bufs[BATCH_MAX][REC_MAX];
	uint64_t seq = first, end = n > UINT64_MAX - first ? UINT64_MAX : first + n;
	struct iovec iov[BATCH_MAX];
	unsigned int k, i;
	int ret;

	while (seq < end) {
		k = 1 + (unsigned int)(seq % BATCH_MAX);
		if (end - seq < k)
			k = (unsigned int)(end - seq);
		for (i = 0; i < k; i++) {
			msg_fill(bufs[i], seq + i);
			iov[i] = (struct iovec){ bufs[i], msg_len(seq + i) };
		}
		for (i = 0; i < k; i += (unsigned int)ret) {
			ret = knitk_producer_send_packed(p, NULL, iov + i, k - i);
			if (ret == -EAGAIN) {
				sched_yield();
				ret = 0;
				continue;
			}
			if (ret <= 0)
				return ret ? ret : -EPROTO;
			if (knitk_producer_notify(p) < 0)
				return -EPROTO;
		}
		seq += k;
	}
	return 0;
}

/*
 * Take messages through knitk_consumer_wait until @n came (whole lanes:
 * a few more may) or the wait fails (its error in *@err), checking that
 * they come in order from @first, each whole; returns how many came.  A
 * check that fails sets *@err to -EPROTO.
 */
static uint64_t take_msgs(struct knitk_consumer *c, uint64_t first, uint64_t n,
			  int *err)
{
	struct knitk_msg m[8];
	struct knitk_record r[16];
	uint64_t got = 0, pend, done;
	size_t pos;
	int ret, k, i, j, nr;

	*err = 0;
	while (got < n) {
		ret = knitk_consumer_wait(c, &pend, KNITK_WAIT_FOREVER);
		if (ret < 0) {
			*err = ret;
			return got;
		}
		while (pend) {
			k = knitk_lane_decode_batch(c, &pend, m, 8, sizeof(m[0]));
			if (k <= 0) {
				*err = k ? k : -EPROTO;
				return got;
			}
			done = 0;
			for (i = 0; i < k; i++) {
				done |= 1ULL << m[i].lane;
				if (m[i].header.kind != KNITK_PAYLOAD_PACKED) {
					*err = -EPROTO;
					return got;
				}
				pos = 0;
				nr = 0;
				while ((ret = knitk_lane_unpack(&m[i], &pos, r, 16)) > 0)
					for (j = 0; j < ret; j++, nr++)
						if (!msg_is(&r[j], first + got++)) {
							printf("# message %llu torn or out of order\n",
							       (unsigned long long)(first + got - 1));
							*err = -EPROTO;
							return got;
						}
				if (ret || (uint64_t)nr != m[i].header.value ||
				    pos != m[i].len) {
					*err = -EPROTO;
					return got;
				}
			}
			if (knitk_lane_ack(c, done)) {
				*err = -EPROTO;
				return got;
			}
		}
	}
	return got;
}

static void every_message_once_threads(void)
{
	struct fx f;

	REQUIRE(fx_init(&f) == 0);
	stream_once_threads(&f, send_msgs, take_msgs, NR_MSGS);
}

static void every_message_once_process(void)
{
	struct fx f;

	REQUIRE(fx_init(&f) == 0);
	stream_once_process(&f, send_msgs, take_msgs, NR_MSGS);
}

/*
 * A writer that sends for ever is SIGKILLed while it streams (the reader
 * has taken some of its messages and goes on taking them: the kill lands
 * wherever the writer is).  Once its death is marked, the reader gets
 * every record the writer published, in order and whole, then -EPIPE.
 */
static void killed_writer_leaves_whole_records(void)
{
	struct knitk_consumer *c;
	uint64_t got, more, pend;
	int err, round;
	struct fx f;
	pid_t pid;

	for (round = 0; round < 3; round++) {
		REQUIRE(fx_init(&f) == 0);
		REQUIRE(knitk_consumer_create(f.host, (unsigned int)f.ret_mb, &c) == 0);
		pid = fork_writer(&f, send_msgs, UINT64_MAX, -1, 0);
		REQUIRE(pid > 0);
		got = take_msgs(c, 0, 1000 + 7919 * (uint64_t)round, &err);
		CHECK_EQ(err, 0);
		/* Killed while it streams: lanes of its are pending. */
		while (knitk_lane_scan(c, &pend) == 0)
			sched_yield();
		CHECK_EQ(kill(pid, SIGKILL), 0);
		REQUIRE(waitpid(pid, NULL, 0) == pid);
		CHECK_EQ(knitk_endpoint_mark_dead(f.host, 0), 0);
		/* What it published before it died; its lanes, then -EPIPE. */
		more = take_msgs(c, got, UINT64_MAX, &err);
		CHECK_EQ(err, -EPIPE);
		CHECK(more > 0);
		printf("# round %d: %llu messages before the kill, %llu after\n",
		       round, (unsigned long long)got, (unsigned long long)more);
		CHECK_EQ(knitk_consumer_wait(c, &pend, KNITK_WAIT_FOREVER), -EPIPE);
		knitk_consumer_destroy(c);
		fx_fini(&f);
	}
}

static void pack_into_fewest_lanes(void)
{
	static unsigned char a[REC_MAX], b[REC_MAX];
	struct knitk_record r[4];
	struct knitk_consumer *c;
	struct knitk_producer *p;
	struct knitk_msg m[4];
	struct iovec iov[3];
	uint64_t pend;
	size_t pos;
	struct fx f;

	memset(a, 0xa1, sizeof(a));
	memset(b, 0xb2, sizeof(b));
	REQUIRE(fx_init(&f) == 0 && fx_worker(&f) == 0);
	REQUIRE(knitk_producer_create(f.host, (unsigned int)f.req, &p) == 0);
	REQUIRE(knitk_consumer_create(f.worker, (unsigned int)f.req, &c) == 0);

	/* A record of REC_MAX bytes fills a lane alone: two take two lanes. */
	iov[0] = (struct iovec){ a, REC_MAX };
	iov[1] = (struct iovec){ b, REC_MAX };
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 2), 2);
	CHECK_EQ(knitk_lane_scan(c, &pend), 2);
	CHECK_EQ(knitk_lane_decode_batch(c, &pend, m, 4, sizeof(m[0])), 2);
	CHECK_EQ(m[0].header.kind, KNITK_PAYLOAD_PACKED);
	CHECK_EQ(m[0].header.value, 1);
	CHECK_EQ(m[0].len, INLINE);
	pos = 0;
	CHECK_EQ(knitk_lane_unpack(&m[0], &pos, r, 4), 1);
	CHECK(r[0].len == REC_MAX && !memcmp(r[0].data, a, REC_MAX));
	CHECK_EQ(pos, INLINE);
	CHECK_EQ(knitk_lane_unpack(&m[0], &pos, r, 4), 0);
	pos = 0;
	CHECK_EQ(knitk_lane_unpack(&m[1], &pos, r, 4), 1);
	CHECK(r[0].len == REC_MAX && !memcmp(r[0].data, b, REC_MAX));
	CHECK_EQ(knitk_lane_ack(c, (1ULL << m[0].lane) | (1ULL << m[1].lane)), 0);

	/* Two records whose rooms add up to the lane exactly: one lane. */
	iov[0] = (struct iovec){ a, 100 };
	iov[1] = (struct iovec){ b, INLINE - KNITK_PACK_ROOM(100) - KNITK_PACK_PREFIX_BYTES };
	iov[2] = (struct iovec){ a, 1 };
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 2), 2);
	CHECK_EQ(knitk_lane_scan(c, &pend), 1);
	CHECK_EQ(knitk_lane_decode_batch(c, &pend, m, 4, sizeof(m[0])), 1);
	CHECK_EQ(m[0].header.value, 2);
	CHECK_EQ(m[0].len, INLINE);
	CHECK_EQ(knitk_lane_ack(c, 1ULL << m[0].lane), 0);
	/* One byte more than the lane: the third record takes a second. */
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 3), 3);
	CHECK_EQ(knitk_lane_scan(c, &pend), 2);
	CHECK_EQ(knitk_lane_decode_batch(c, &pend, m, 4, sizeof(m[0])), 2);
	CHECK_EQ(m[0].header.value, 2);
	CHECK_EQ(m[1].header.value, 1);
	CHECK_EQ(m[1].len, KNITK_PACK_ROOM(1));
	pos = 0;
	CHECK_EQ(knitk_lane_unpack(&m[1], &pos, r, 4), 1);
	CHECK(r[0].len == 1 && *(const unsigned char *)r[0].data == 0xa1);
	CHECK_EQ(knitk_lane_ack(c, (1ULL << m[0].lane) | (1ULL << m[1].lane)), 0);

	/* The caller's fields of @header go into every lane. */
	{
		struct knitk_lane_header h = { .function_id = 7, .task_id = 99,
					       .tag = 3, .user = 5,
					       .kind = 1234, .value = 77 };

		iov[0] = (struct iovec){ a, REC_MAX };
		iov[1] = (struct iovec){ b, 10 };
		CHECK_EQ(knitk_producer_send_packed(p, &h, iov, 2), 2);
		CHECK_EQ(knitk_lane_scan(c, &pend), 2);
		CHECK_EQ(knitk_lane_decode_batch(c, &pend, m, 4, sizeof(m[0])), 2);
		CHECK(m[1].header.function_id == 7 && m[1].header.task_id == 99 &&
		      m[1].header.tag == 3 && m[1].header.user == 5);
		/* The library's fields are the library's. */
		CHECK_EQ(m[1].header.kind, KNITK_PAYLOAD_PACKED);
		CHECK_EQ(m[1].header.value, 1);
		CHECK_EQ(m[1].header.arena_slot, KNITK_ARENA_NO_SLOT);
		CHECK_EQ(knitk_lane_ack(c, (1ULL << m[0].lane) | (1ULL << m[1].lane)), 0);
	}
	knitk_consumer_destroy(c);
	knitk_producer_destroy(p);
	fx_fini(&f);
}

/* Backpressure: a call stops at the first lane it cannot take. */
static void backpressure_sends_a_prefix(void)
{
	static unsigned char a[REC_MAX];
	struct knitk_consumer *c;
	struct knitk_producer *p;
	struct iovec iov[6];
	uint64_t pend;
	struct fx f;
	int i;

	REQUIRE(fx_init(&f) == 0 && fx_worker(&f) == 0);
	REQUIRE(knitk_producer_create(f.host, (unsigned int)f.req, &p) == 0);
	REQUIRE(knitk_consumer_create(f.worker, (unsigned int)f.req, &c) == 0);
	for (i = 0; i < 6; i++)
		iov[i] = (struct iovec){ a, REC_MAX };
	/* 62 lanes taken, 2 left: 2 of 6 lane-sized messages go. */
	for (i = 0; i < 62; i++)
		REQUIRE(knitk_producer_send_packed(p, NULL, iov, 1) == 1);
	/* A bad message past the lanes it could take is not looked at. */
	iov[5].iov_len = 0;
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 6), 2);
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 6), -EAGAIN);
	iov[5].iov_len = REC_MAX;
	CHECK_EQ(knitk_lane_scan(c, &pend), 64);
	CHECK_EQ(knitk_lane_ack(c, pend), 0);
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 6), 6);
	knitk_consumer_destroy(c);
	knitk_producer_destroy(p);
	fx_fini(&f);
}

static void bad_arguments(void)
{
	static unsigned char a[REC_MAX + 1];
	struct knitk_msg m = { .size = sizeof(m) }, im = { .size = sizeof(m) };
	struct knitk_record r[2];
	struct knitk_consumer *c;
	struct knitk_producer *p, *p0;
	struct iovec iov[3];
	uint64_t pend;
	size_t pos = 0;
	struct fx f, f0;
	int lane;

	REQUIRE(fx_init(&f) == 0 && fx_worker(&f) == 0);
	REQUIRE(knitk_producer_create(f.host, (unsigned int)f.req, &p) == 0);
	REQUIRE(knitk_consumer_create(f.worker, (unsigned int)f.req, &c) == 0);
	iov[0] = (struct iovec){ a, 8 };
	iov[1] = (struct iovec){ a, 8 };
	iov[2] = (struct iovec){ a, 8 };
	CHECK_EQ(knitk_producer_send_packed(NULL, NULL, iov, 1), -EINVAL);
	CHECK_EQ(knitk_producer_send_packed(p, NULL, NULL, 1), -EINVAL);
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 0), -EINVAL);
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, (unsigned int)INT_MAX + 1), -EINVAL);
	/* One bad message anywhere the call reaches: nothing is sent. */
	iov[2].iov_len = 0;
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 3), -EINVAL);
	iov[2] = (struct iovec){ NULL, 8 };
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 3), -EINVAL);
	iov[2] = (struct iovec){ a, REC_MAX + 1 };
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 3), -EMSGSIZE);
	iov[2] = (struct iovec){ a, SIZE_MAX };
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 3), -EMSGSIZE);
	iov[2] = (struct iovec){ a, SIZE_MAX - 1 };
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 3), -EMSGSIZE);
	/* Also when the bad one would go in a later lane than the first. */
	iov[0] = (struct iovec){ a, REC_MAX };
	iov[2] = (struct iovec){ a, 0 };
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 3), -EINVAL);
	iov[0] = (struct iovec){ a, 8 };
	CHECK_EQ(knitk_lane_scan(c, &pend), 0);
	/* A lane that is not packed is not unpacked. */
	lane = knitk_producer_send(p, &(struct knitk_lane_header){ 0 }, a, 8);
	REQUIRE(lane >= 0);
	CHECK_EQ(knitk_lane_scan(c, &pend), 1);
	CHECK_EQ(knitk_lane_decode(c, (unsigned int)lane, &im), 0);
	CHECK_EQ(im.header.kind, KNITK_PAYLOAD_INLINE);
	CHECK_EQ(knitk_lane_unpack(&im, &pos, r, 2), -EINVAL);
	CHECK_EQ(knitk_lane_ack(c, pend), 0);
	/* A packed one, then every NULL and bound of knitk_lane_unpack. */
	iov[2] = (struct iovec){ a, 8 };
	CHECK_EQ(knitk_producer_send_packed(p, NULL, iov, 3), 3);
	CHECK_EQ(knitk_lane_scan(c, &pend), 1);
	lane = __builtin_ctzll(pend);
	CHECK_EQ(knitk_lane_decode(c, (unsigned int)lane, &m), 0);
	CHECK_EQ(knitk_lane_unpack(NULL, &pos, r, 2), -EINVAL);
	CHECK_EQ(knitk_lane_unpack(&m, NULL, r, 2), -EINVAL);
	CHECK_EQ(knitk_lane_unpack(&m, &pos, NULL, 2), -EINVAL);
	CHECK_EQ(knitk_lane_unpack(&m, &pos, r, 0), -EINVAL);
	pos = m.len + 1;
	CHECK_EQ(knitk_lane_unpack(&m, &pos, r, 2), -EINVAL);
	CHECK_EQ(pos, m.len + 1);
	pos = m.len;
	CHECK_EQ(knitk_lane_unpack(&m, &pos, r, 2), 0);
	/* Two at a time: 2, then 1, then the end. */
	pos = 0;
	CHECK_EQ(knitk_lane_unpack(&m, &pos, r, 2), 2);
	CHECK_EQ(pos, 2 * KNITK_PACK_ROOM(8));
	CHECK_EQ(knitk_lane_unpack(&m, &pos, r, 2), 1);
	CHECK_EQ(knitk_lane_unpack(&m, &pos, r, 2), 0);
	CHECK_EQ(knitk_lane_ack(c, pend), 0);
	knitk_consumer_destroy(c);
	knitk_producer_destroy(p);
	fx_fini(&f);

	/* A knot without inline bytes can carry no record. */
	REQUIRE(fx_init_inline(&f0, 0) == 0);
	REQUIRE(knitk_producer_create(f0.host, (unsigned int)f0.req, &p0) == 0);
	iov[0] = (struct iovec){ a, 1 };
	CHECK_EQ(knitk_producer_send_packed(p0, NULL, iov, 1), -EMSGSIZE);
	knitk_producer_destroy(p0);
	fx_fini(&f0);
}

/*
 * A claimant of a stealing mailbox reads packed lanes from its private
 * copy: every record once, in order (one claimant), a forged lane
 * refused -EBADMSG and the lanes after it read.
 */
static void steal_claimant_unpacks(void)
{
	struct knitk_geometry g = {
		.flags = KNITK_GEOM_STEAL, .nr_workers = 1, .nr_submitters = 1,
		.lanes = KNITK_LANES, .inline_bytes = INLINE,
	};
	static unsigned char bufs[BATCH_MAX][REC_MAX];
	struct knitk_endpoint *host, *w;
	struct knitk_producer *p;
	struct knitk_consumer *c;
	struct knitk_lane_header *h;
	struct iovec iov[BATCH_MAX];
	struct knitk_msg m[8];
	struct knitk_record r[16];
	uint64_t sent = 0, got = 0, pend, done;
	unsigned int k, i;
	int ret, n, j, lane, bad = 0, forged = 0;
	size_t pos;
	void *buf;

	REQUIRE(knitk_endpoint_create(&g, KNITK_KNOT_FUTEX, &host) == 0);
	REQUIRE(knitk_endpoint_join(host, KNITK_ROLE_HOST, 0) >= 1);
	REQUIRE(knitk_endpoint_attach(knitk_endpoint_fd(host), 0, &w) == 0);
	REQUIRE(knitk_endpoint_join(w, KNITK_ROLE_WORKER, 0) >= 1);
	REQUIRE(knitk_producer_create(host, 0, &p) == 0);
	REQUIRE(knitk_steal_consumer_create(w, 0,
		(unsigned int)knitk_steal_region_lanes(1, 0), &c) == 0);
	while (sent < 5000 && !tap_case_failed) {
		k = 1 + (unsigned int)(sent % BATCH_MAX);
		for (i = 0; i < k; i++) {
			msg_fill(bufs[i], sent + i);
			iov[i] = (struct iovec){ bufs[i], msg_len(sent + i) };
		}
		REQUIRE((ret = knitk_producer_send_packed(p, NULL, iov, k)) > 0);
		sent += (unsigned int)ret;
		/* Now and then a forged lane among them: one that frames nothing. */
		if (sent % 7 == 0) {
			lane = knitk_lane_claim(p);
			REQUIRE(lane >= 0);
			REQUIRE(knitk_lane_reserve(p, (unsigned int)lane, 8, &buf) == 0);
			REQUIRE(knitk_lane_header(p, (unsigned int)lane, &h) == 0);
			memset(buf, 0xff, 8);
			h->kind = KNITK_PAYLOAD_PACKED;
			h->value = 1;
			REQUIRE(knitk_lane_publish(p, (unsigned int)lane) == 0);
			bad++;
			forged++;
		}
		while (knitk_lane_scan(c, &pend) > 0) {
			while (pend) {
				n = knitk_lane_decode_batch(c, &pend, m, 8, sizeof(m[0]));
				if (n == -EBADMSG) {
					bad--;
					CHECK_EQ(knitk_lane_ack(c, 1ULL << m[0].lane), 0);
					continue;
				}
				REQUIRE(n > 0);
				done = 0;
				for (j = 0; j < n; j++) {
					done |= 1ULL << m[j].lane;
					pos = 0;
					while ((ret = knitk_lane_unpack(&m[j], &pos, r, 16)) > 0)
						for (i = 0; i < (unsigned int)ret; i++)
							CHECK(msg_is(&r[i], got++));
					CHECK_EQ(ret, 0);
				}
				CHECK_EQ(knitk_lane_ack(c, done), 0);
			}
		}
	}
	CHECK_EQ(got, sent);
	/* Every forged lane was refused, once. */
	CHECK(forged > 0);
	CHECK_EQ(bad, 0);
	knitk_consumer_destroy(c);
	knitk_producer_destroy(p);
	knitk_endpoint_destroy(w);
	knitk_endpoint_destroy(host);
}

/* --------------------------------------------------------- hostile lanes */

struct forged {
	const char *what;
	uint64_t length;	/* the header's */
	uint64_t count;		/* the header's value */
	unsigned int nr;	/* prefixes written from the lane's start */
	uint16_t prefix[4];	/* each followed by its bytes, if they fit */
};

/*
 * Each is refused whole.  The lane has INLINE bytes; its last byte is the
 * last of the sector's first page, and the page after is unreadable while
 * the reader looks at it.
 */
static const struct forged forgeries[] = {
	{ "length past the inline bytes", INLINE + 1, 1, 1, { 10 } },
	{ "length 2^32 + 12", (1ULL << 32) + 12, 1, 1, { 10 } },
	{ "length UINT64_MAX", UINT64_MAX, 1, 1, { 10 } },
	{ "record past the lane's end", INLINE, 1, 1, { INLINE - 1 } },
	{ "record of 0xffff bytes", INLINE, 1, 1, { 0xffff } },
	{ "record running past the used length", 12, 1, 1, { 20 } },
	{ "second record running past the used length", 30, 2, 2, { 10, 30 } },
	{ "used length ending inside a record", 20, 2, 2, { 10, 10 } },
	{ "zero-length record", 12, 2, 2, { 0, 10 } },
	{ "zero-length record alone", 2, 1, 1, { 0 } },
	{ "one byte left after the records", 13, 1, 1, { 10 } },
	{ "prefix cut by the lane's end", INLINE, 2, 2, { INLINE - 3, 1 } },
	{ "count 0", 12, 0, 1, { 10 } },
	{ "count one too many", 24, 3, 2, { 10, 10 } },
	{ "count one too few", 24, 1, 2, { 10, 10 } },
	{ "count UINT64_MAX", 12, UINT64_MAX, 1, { 10 } },
	{ "count INLINE", INLINE, INLINE, 1, { INLINE - 2 } },
	{ "empty lane", 0, 0, 0, { 0 } },
	{ "empty lane with a count", 0, 1, 0, { 0 } },
};

/* Write @fg into the inline bytes at @buf (INLINE of them). */
static void forge_bytes(unsigned char *buf, const struct forged *fg)
{
	size_t off = 0;
	unsigned int i;

	memset(buf, 0x5a, INLINE);
	for (i = 0; i < fg->nr && off + 2 <= INLINE; i++) {
		memcpy(buf + off, &fg->prefix[i], 2);
		off += 2;
		off += fg->prefix[i] < INLINE - off ? fg->prefix[i] : INLINE - off;
	}
}

/* The first byte of the consumer's mapping past lane EDGE_LANE of @mb. */
static unsigned char *edge_of(struct knitk_endpoint *ep, unsigned int mb)
{
	struct knitk_layout l;
	void *base;

	if (knitk_endpoint_layout(ep, &l, NULL) || knitk_endpoint_base(ep, &base))
		return NULL;
	return (unsigned char *)base + l.mailbox_off + (uint64_t)mb * l.mailbox_stride +
	       l.lane_off + (uint64_t)(EDGE_LANE + 1) * l.lane_stride;
}

/*
 * Publish, on lane EDGE_LANE, @fg, then a good packed lane of one 8-byte
 * record (a hostile writer does not go through the library: it claims,
 * reserves and rewrites the header itself).
 */
static int forge_lane(struct knitk_producer *p, const struct forged *fg)
{
	struct knitk_lane_header *h;
	void *buf;
	int lane;

	lane = knitk_lane_claim(p);
	if (lane != EDGE_LANE || knitk_lane_reserve(p, (unsigned int)lane, INLINE, &buf) ||
	    knitk_lane_header(p, (unsigned int)lane, &h))
		return -1;
	forge_bytes(buf, fg);
	h->kind = KNITK_PAYLOAD_PACKED;
	h->length = fg->length;
	h->value = fg->count;
	return knitk_lane_publish(p, (unsigned int)lane) ? -1 : 0;
}

static void hostile_lanes_refused(void)
{
	static const uint64_t good = 0x1122334455667788ULL;
	struct knitk_msg m[4], one = { .size = sizeof(one) };
	struct iovec iov = { (void *)&good, sizeof(good) };
	struct knitk_record r[2];
	struct knitk_consumer *c;
	struct knitk_producer *p;
	unsigned char *edge;
	uint64_t pend, v;
	long page = sysconf(_SC_PAGESIZE);
	unsigned int i;
	int lane;
	size_t pos;
	struct fx f;

	REQUIRE(fx_init(&f) == 0 && fx_worker(&f) == 0);
	REQUIRE(knitk_producer_create(f.host, (unsigned int)f.req, &p) == 0);
	REQUIRE(knitk_consumer_create(f.worker, (unsigned int)f.req, &c) == 0);
	edge = edge_of(f.worker, (unsigned int)f.req);
	REQUIRE(edge && ((uintptr_t)edge % (uintptr_t)page) == 0);
	for (i = 0; i < sizeof(forgeries) / sizeof(forgeries[0]); i++) {
		const struct forged *fg = &forgeries[i];

		/* Bring the producer's cursor round to EDGE_LANE. */
		do {
			lane = knitk_producer_send(p, &(struct knitk_lane_header){ 0 },
						   NULL, 0);
			REQUIRE(lane >= 0);
			REQUIRE(knitk_lane_scan(c, &pend) == 1);
			REQUIRE(knitk_lane_ack(c, pend) == 0);
		} while (lane != EDGE_LANE - 1);
		REQUIRE(forge_lane(p, fg) == 0);
		REQUIRE(knitk_producer_send_packed(p, NULL, &iov, 1) == 1);
		REQUIRE(knitk_lane_scan(c, &pend) == 2);
		/* Past the hostile lane, the reader's mapping is unreadable. */
		REQUIRE(mprotect(edge, (size_t)page, PROT_NONE) == 0);
		CHECK_EQ(knitk_lane_decode(c, EDGE_LANE, &one), -EBADMSG);
		CHECK_EQ(one.lane, EDGE_LANE);
		/* In a batch: refused as the first, kept after a good one. */
		CHECK_EQ(knitk_lane_decode_batch(c, &pend, m, 4, sizeof(m[0])), -EBADMSG);
		CHECK_EQ(m[0].lane, EDGE_LANE);
		REQUIRE(mprotect(edge, (size_t)page, PROT_READ | PROT_WRITE) == 0);
		/* And the reader goes on: the good lane after it is whole. */
		CHECK_EQ(knitk_lane_decode_batch(c, &pend, m, 4, sizeof(m[0])), 1);
		CHECK_EQ(m[0].lane, EDGE_LANE + 1);
		pos = 0;
		CHECK_EQ(knitk_lane_unpack(&m[0], &pos, r, 2), 1);
		memcpy(&v, r[0].data, sizeof(v));
		CHECK(r[0].len == 8 && v == good);
		CHECK_EQ(knitk_lane_ack(c, (1ULL << EDGE_LANE) | (1ULL << (EDGE_LANE + 1))), 0);
		if (tap_case_failed) {
			printf("# forgery: %s\n", fg->what);
			break;
		}
	}
	knitk_consumer_destroy(c);
	knitk_producer_destroy(p);
	fx_fini(&f);
}

/*
 * A lane rewritten after its decode: knitk_lane_unpack checks every
 * prefix again and never gives a record outside the lane.  The lane's
 * bytes sit at the end of a page whose next page is unreadable.
 */
static void rewritten_lane_never_read_outside(void)
{
	long page = sysconf(_SC_PAGESIZE);
	struct knitk_msg m = { .size = sizeof(m) };
	struct knitk_record r[8];
	unsigned char *map, *lane;
	size_t pos;
	unsigned int i;
	int ret;

	map = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(map != MAP_FAILED);
	REQUIRE(mprotect(map + page, (size_t)page, PROT_NONE) == 0);
	lane = map + page - INLINE;
	m.header.kind = KNITK_PAYLOAD_PACKED;
	m.data = lane;
	m.len = INLINE;
	for (i = 0; i < sizeof(forgeries) / sizeof(forgeries[0]); i++) {
		const struct forged *fg = &forgeries[i];

		forge_bytes(lane, fg);
		/* Whatever the records say, each lies inside the lane. */
		for (pos = 0; (ret = knitk_lane_unpack(&m, &pos, r, 8)) > 0;) {
			int j;

			for (j = 0; j < ret; j++)
				CHECK(r[j].len >= 1 &&
				      (const unsigned char *)r[j].data >= lane + 2 &&
				      (const unsigned char *)r[j].data + r[j].len <= lane + INLINE);
		}
		CHECK(ret == 0 || ret == -EBADMSG);
		CHECK(pos <= INLINE);
		/* A record past the end is refused where it starts. */
		if (ret == -EBADMSG)
			CHECK(pos < INLINE);
	}
	/*
	 * Starting anywhere in a lane of good records (so reading their
	 * bytes as prefixes), no record leaves it.
	 */
	pos = 0;
	for (i = 1; KNITK_PACK_ROOM(msg_len(i)) <= INLINE - pos; i++) {
		uint16_t prefix = (uint16_t)msg_len(i);

		memcpy(lane + pos, &prefix, sizeof(prefix));
		msg_fill(lane + pos + 2, i);
		pos += KNITK_PACK_ROOM(prefix);
	}
	m.len = pos;
	for (pos = 0; pos <= m.len; pos++) {
		size_t at = pos;

		while ((ret = knitk_lane_unpack(&m, &at, r, 1)) > 0)
			CHECK((const unsigned char *)r[0].data + r[0].len <= lane + m.len);
		CHECK(ret == 0 || ret == -EBADMSG);
	}
	munmap(map, 2 * (size_t)page);
}

int main(void)
{
	/* Processes first: fork before any thread exists. */
	TEST(every_message_once_process);
	TEST(killed_writer_leaves_whole_records);
	TEST(every_message_once_threads);
	TEST(pack_into_fewest_lanes);
	TEST(backpressure_sends_a_prefix);
	TEST(steal_claimant_unpacks);
	TEST(bad_arguments);
	TEST(hostile_lanes_refused);
	TEST(rewritten_lane_never_read_outside);
	return tap_exit();
}
