/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * libknitk: kernel-assisted shared-memory IPC, core layer.
 *
 * A *knot* is one shared region (see <linux/knitk.h> for its layout): a
 * control page, KNITK_NR_DOORBELLS doorbells, an abort bitmap, optional
 * steal lines and the mailboxes.  A struct knitk_endpoint is one *endpoint* of
 * a knot: it is created from a geometry, or attached to an existing knot
 * from an fd, then joined with a role (the host or worker N).
 *
 * A *mailbox* has exactly one producer and (without stealing) one
 * consumer.  The producer claims a lane, writes the lane header and the
 * payload (inline in the lane, or in the mailbox's arena), and publishes;
 * the consumer scans, decodes and acknowledges whole batches with one store.
 * A consumer that finds nothing parks on its endpoint's doorbell; a producer
 * rings the consumer's doorbell after publishing.  Parking forever is safe:
 * sleep and wake follow a lost-wakeup-free protocol, not a timeout.
 *
 * Every function returns 0 or a non-negative value on success and a
 * negative errno value on failure; nothing here prints or touches errno
 * as a means of reporting.  Objects are not shared between threads unless
 * stated: one thread drives a producer, one a consumer; an endpoint's
 * doorbell is parked on by one thread at a time, while any thread may ring.
 *
 * Sized structs.  A struct of this library that a caller fills in or
 * receives and that may grow (knitk_pool_opts, knitk_call_opts,
 * knitk_pool_stats, knitk_worker_info, knitk_wake_stats, knitk_pages,
 * knitk_msg)
 * starts with `uint32_t size`, which the caller sets to the sizeof it was
 * compiled with, e.g. `struct knitk_pool_stats st = { .size = sizeof(st) };`.
 * Fields are only ever appended, and the library, knowing its own size K:
 *   - refuses a size below the struct's KNITK_*_SIZE_VER0 with -EINVAL, and
 *     one above KNITK_SIZED_MAX with -E2BIG;
 *   - input: reads a smaller struct as if zero-extended to K (a binary
 *     built against an older header keeps working), and accepts a larger
 *     one only if every byte past K is zero (else -E2BIG: the caller asks
 *     for something this library cannot do);
 *   - output: writes min(size, K) bytes, never a byte past the caller's
 *     size, and stores that count in @size; fields past it were not
 *     written.
 * Structs that cannot carry a size keep fixed reserved fields that must be
 * zero (-EINVAL otherwise): knitk_task_table (usually a static initialiser;
 * its word of room is the padding it always had) and knitk_submission (an
 * array element, whose stride must not vary; per-call options grow through
 * its sized knitk_call_opts).  struct knitk_record, an output array
 * element of a pointer and a length, is fixed.  uAPI structs follow the
 * uAPI's own rule (reserved fields, checked), and struct knitk_lane_header
 * is a fixed 64-byte wire format.
 *
 * Backends: "kmod" uses /dev/knitk; "futex" uses a memfd of the same layout
 * and shared futexes.  knitk_endpoint_create() picks kmod when /dev/knitk opens,
 * unless the environment variable KNITK_BACKEND=kmod|futex or a
 * KNITK_KNOT_* flag forces one (forcing kmod without the device gives
 * -ENODEV).
 *
 * The worker pool built on this layer is <knitk_pool.h>.
 */
#ifndef KNITK_H
#define KNITK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <linux/knitk.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of these headers, that of VERSION at the top of the source
 * tree (lib/tests/version_test.c holds them to it).  knitk_version() gives
 * the library's own at run time: a program may run against a newer one.
 */
#define KNITK_VERSION_MAJOR		0
#define KNITK_VERSION_MINOR		3
#define KNITK_VERSION_PATCH		0

/* knitk_version - the running library's version, "MAJOR.MINOR.PATCH". */
const char *knitk_version(void);

/* Largest size a sized struct may claim (see "Sized structs" above). */
#define KNITK_SIZED_MAX			4096

/* ---------------------------------------------------------------- layout */

/*
 * knitk_layout_compute - the layout of a knot made from @geom.
 * Validates @geom exactly like KNITK_IOC_CREATE: -EINVAL for unknown flags,
 * non-zero reserved fields, out-of-range counts or sizes, misaligned sizes,
 * or more than KNITK_MAX_MAILBOXES mailboxes.
 */
int knitk_layout_compute(const struct knitk_geometry *geom,
			 struct knitk_layout *layout);

/* ------------------------------------------------------------------ knot */

/* Backends, as returned by knitk_endpoint_backend(). */
#define KNITK_BACKEND_KMOD		1
#define KNITK_BACKEND_FUTEX		2

/* knitk_endpoint_create() flags: force a backend (default: automatic). */
#define KNITK_KNOT_KMOD			(1U << 0)
#define KNITK_KNOT_FUTEX		(1U << 1)
/*
 * Opt-in: when the module refuses the knot for RLIMIT_MEMLOCK, make it on
 * the futex backend instead (never without this flag; not with
 * KNITK_KNOT_KMOD, which forbids it: -EINVAL).  knitk_last_error() still
 * describes the refusal, and knitk_endpoint_backend() tells which backend
 * the knot got.
 */
#define KNITK_KNOT_FALLBACK_FUTEX	(1U << 2)
/*
 * Keep the knot in base pages (sets KNITK_GEOM_NO_HUGE in its geometry).
 * Without it, a knot of KNITK_HUGE_MIN_BYTES or more asks for huge pages
 * and quietly does without when the system has none:
 * knitk_endpoint_pages() tells what it got.
 */
#define KNITK_KNOT_NO_HUGE		(1U << 3)

/* knitk_endpoint_attach() flags. */
#define KNITK_ATTACH_TAKE_FD		(1U << 0)	/* close @fd on success */

struct knitk_endpoint;

/*
 * knitk_endpoint_create - make a new knot from @geom and an endpoint on it.
 * -EINVAL for a bad geometry or unknown flags, -ENODEV when the kmod
 * backend is forced but /dev/knitk does not open, -E2BIG when the module
 * refuses the size, -ENOMEM when memory runs out or, on the module, when
 * the knot would take the user past RLIMIT_MEMLOCK (the module charges
 * knot pages to it unless the caller has CAP_IPC_LOCK): then
 * knitk_last_error() names the limit, the bytes the knot needs and the
 * knobs (ulimit -l, systemd's LimitMEMLOCK=, CAP_IPC_LOCK), and there is
 * no fallback to the futex backend unless @flags asks for it
 * (KNITK_KNOT_FALLBACK_FUTEX).
 */
int knitk_endpoint_create(const struct knitk_geometry *geom, unsigned int flags,
			  struct knitk_endpoint **ep);

/*
 * knitk_last_error - what the last knitk_endpoint_create() of the calling
 * thread (knitk_pool_create() makes one for its knot) had to say beyond
 * its errno, or NULL.  Set when the module refused a knot for RLIMIT_MEMLOCK (the
 * call failed with -ENOMEM, or fell back to the futex backend as
 * KNITK_KNOT_FALLBACK_FUTEX or KNITK_POOL_FALLBACK_FUTEX asked): one
 * line naming RLIMIT_MEMLOCK and its value, the bytes the knot needs, and
 * how to raise it (ulimit -l, LimitMEMLOCK= in a systemd unit,
 * CAP_IPC_LOCK) or use the futex backend.  Cleared (NULL) by every other
 * return of knitk_endpoint_create().  Per thread, as errno; the string is
 * valid until that thread's next knitk_endpoint_create().
 */
const char *knitk_last_error(void);

/*
 * knitk_endpoint_attach - a new endpoint on the knot that @fd belongs to (an fd
 * from knitk_endpoint_fd(), inherited or received).  The backend follows the fd.
 * With KNITK_ATTACH_TAKE_FD the fd is closed on success: a process worker
 * passes it so that only its own endpoint keeps the knot, and its exit is
 * seen as its death.
 */
int knitk_endpoint_attach(int fd, unsigned int flags, struct knitk_endpoint **ep);

/*
 * knitk_endpoint_join - give the endpoint a role: KNITK_ROLE_HOST (@worker 0)
 * or KNITK_ROLE_WORKER with @worker < nr_workers.  Returns the role's join
 * generation as an int >= 1: the 32-bit generation of knitk_endpoint_role
 * while that is at most INT_MAX, and 1 + (generation - 1) % INT_MAX (the
 * subtraction modulo 2^32) once the counter has run past it or wrapped,
 * so never 0 and never the previous join's value.  -EBUSY when a live
 * endpoint holds the role, -EALREADY when this endpoint has joined already.
 */
int knitk_endpoint_join(struct knitk_endpoint *ep, unsigned int role,
			unsigned int worker);

/*
 * knitk_endpoint_destroy - leave, unmap, close.  A joined role ends (it is
 * marked dead) only in the process that joined it and only while it is
 * still this endpoint's: a forked child's destroy of an inherited
 * endpoint, or that of an endpoint whose role was taken by a later join,
 * ends nothing.
 */
void knitk_endpoint_destroy(struct knitk_endpoint *ep);

/* knitk_endpoint_fd - the fd to hand to children (O_CLOEXEC is set on it). */
int knitk_endpoint_fd(const struct knitk_endpoint *ep);

/* knitk_endpoint_backend - KNITK_BACKEND_KMOD or KNITK_BACKEND_FUTEX. */
int knitk_endpoint_backend(const struct knitk_endpoint *ep);

/*
 * knitk_endpoint_layout - copy the knot's layout (and geometry, if
 * non-NULL): the geometry the knot records, whose region_lanes is the
 * stealing knot's region size, never 0 (struct knitk_geometry).
 */
int knitk_endpoint_layout(const struct knitk_endpoint *ep,
			  struct knitk_layout *layout,
			  struct knitk_geometry *geom);

/* struct knitk_pages.flags */
#define KNITK_PAGES_HUGETLB		(1U << 0)	/* futex: a hugetlbfs memfd */
#define KNITK_PAGES_THP			(1U << 1)	/* futex: MADV_HUGEPAGE given */
#define KNITK_PAGES_CHUNKS		(1U << 2)	/* kmod: huge contiguous chunks */

/**
 * struct knitk_pages - the memory behind an endpoint's mapping of its knot
 * @size: sizeof(struct knitk_pages) of the caller (sized struct).
 * @flags: KNITK_PAGES_HUGETLB: the knot is a memfd of hugetlbfs, every
 *	page huge and reserved at create; KNITK_PAGES_THP: a plain memfd
 *	this endpoint mapped huge-page aligned with MADV_HUGEPAGE, for
 *	transparent huge pages where the kernel's shmem_enabled allows;
 *	KNITK_PAGES_CHUNKS: the module allocated (part of) the knot in
 *	physically contiguous chunks of the huge page size, which it maps
 *	with base-page entries.  0: base pages only (KNITK_KNOT_NO_HUGE, a
 *	knot below KNITK_HUGE_MIN_BYTES, or no huge page to be had).
 * @page_bytes: bytes per page of the mapping (the huge page size of a
 *	hugetlbfs knot, else the base page).
 * @map_bytes: bytes this endpoint maps: the knot's layout size, rounded
 *	up to @page_bytes.
 * @huge_bytes: bytes of the knot in huge pages: all of @map_bytes for
 *	KNITK_PAGES_HUGETLB; for KNITK_PAGES_THP, those this process maps
 *	with huge entries now (from /proc/self/smaps: it changes as pages
 *	are touched and reclaimed); for KNITK_PAGES_CHUNKS, the bytes in
 *	contiguous chunks.
 */
struct knitk_pages {
	uint32_t size;
	uint32_t flags;
	uint64_t page_bytes;
	uint64_t map_bytes;
	uint64_t huge_bytes;
};

#define KNITK_PAGES_SIZE_VER0		32	/* first version */

/*
 * knitk_endpoint_pages - what backs the knot @ep maps (struct
 * knitk_pages).  -EINVAL for a NULL argument or a size below
 * KNITK_PAGES_SIZE_VER0, -E2BIG above KNITK_SIZED_MAX.
 */
int knitk_endpoint_pages(const struct knitk_endpoint *ep,
			 struct knitk_pages *pages);

/*
 * knitk_endpoint_control - the control page (read-only; the kernel, or on the
 * futex backend the library, writes it) and the base of the mapping.  Its
 * words change under the reader: knitk_endpoint_deaths, knitk_endpoint_role and
 * knitk_endpoint_host_dead read them in the order that makes them agree.
 */
int knitk_endpoint_control(const struct knitk_endpoint *ep,
			   const struct knitk_control **control);
int knitk_endpoint_base(const struct knitk_endpoint *ep, void **base);

/*
 * knitk_endpoint_deaths - the peer deaths of the knot: *@death_seq, bumped
 * once per role that died or left, then *@dead, bit = role's doorbell (worker
 * id, or KNITK_DOORBELL_HOST), both loaded with acquire: every death that
 * *@death_seq counts has set its bit in *@dead by then (until the role is
 * joined again, which clears it).  Either pointer may be NULL.  A caller
 * that keeps the last *@death_seq it handled sees each death at least once.
 */
int knitk_endpoint_deaths(const struct knitk_endpoint *ep, uint32_t *death_seq,
			  uint64_t *dead);

/*
 * knitk_endpoint_role - whether role @doorbell (worker id or KNITK_DOORBELL_HOST)
 * is held now: 1 when a live endpoint holds it, else 0.  *@generation (if
 * non-NULL) gets the role's join generation, bumped at every join; it is
 * loaded after the live mask, with acquire, so when 1 is returned it is at
 * least the generation of the join that made the role live.  -EINVAL for
 * a @doorbell outside the geometry.
 */
int knitk_endpoint_role(const struct knitk_endpoint *ep, unsigned int doorbell,
			uint32_t *generation);

/*
 * knitk_endpoint_host_dead - 1 when the host role was joined and its endpoint
 * has since been released or marked dead (a worker's cue to stop), else 0.
 */
int knitk_endpoint_host_dead(const struct knitk_endpoint *ep);

/*
 * knitk_endpoint_poll - the endpoint's readiness now, without blocking, as
 * poll() of a module endpoint reports it: a mask of <poll.h> bits.  POLLIN
 * while a mailbox its doorbell (the host's before knitk_endpoint_join)
 * consumes holds a pending lane, POLLPRI while some role is dead, POLLHUP
 * for a worker whose host died.  Once the endpoint's own role has ended
 * (its process exited or closed it on the module, a knitk_endpoint_mark_dead
 * of it on the futex backend, or a later join took the role) it reports
 * POLLHUP | POLLERR and nothing else: never the state of the doorbell the
 * role owned, which may be a new owner's.  On the module this is poll() of
 * knitk_endpoint_fd (whose pollers the role's end wakes); on the futex
 * backend, where the memfd cannot be polled for it, it reads the control
 * page, and the end of the host's role also signals the event fd of the
 * endpoint that marks it (knitk_endpoint_set_event_fd), so an event loop
 * waiting there wakes to find it.  -EINVAL for a NULL @ep.
 */
int knitk_endpoint_poll(const struct knitk_endpoint *ep);

/*
 * knitk_endpoint_doorbell - the doorbell of the endpoint's role: worker id, or
 * KNITK_DOORBELL_HOST; -ENOTCONN before knitk_endpoint_join().
 */
int knitk_endpoint_doorbell(const struct knitk_endpoint *ep);

/*
 * knitk_endpoint_mark_dead - futex backend: record that role @doorbell (worker id
 * or KNITK_DOORBELL_HOST) died: clear its live bit, set its dead bit, bump
 * death_seq and wake the host (or every worker, if @doorbell is the host),
 * and the role's own doorbell, whose waiters then find the role ended
 * (-ENOTCONN), as on the module.  For the pool's process-death detection
 * (pidfd).  On kmod the kernel does this itself: -EOPNOTSUPP.  -ENOENT if
 * the role was not live.
 */
int knitk_endpoint_mark_dead(struct knitk_endpoint *ep, unsigned int doorbell);

/* Mailbox indexes of the knot (see <linux/knitk.h>). */
int knitk_endpoint_request_mailbox(const struct knitk_endpoint *ep,
				   unsigned int submitter, unsigned int worker);
int knitk_endpoint_return_mailbox(const struct knitk_endpoint *ep,
				  unsigned int worker);

/*
 * knitk_mailbox_pending - the lanes of @mailbox published and not yet
 * acknowledged (pub XOR effective ack, both loaded with acquire).
 */
int knitk_mailbox_pending(const struct knitk_endpoint *ep, unsigned int mailbox,
			  uint64_t *pending);

/* ------------------------------------------------------------ lane header */

/* struct knitk_lane_header.kind, written by the library. */
#define KNITK_PAYLOAD_NONE		0	/* no payload */
#define KNITK_PAYLOAD_VALUE		1	/* @value holds a 64-bit value */
#define KNITK_PAYLOAD_INLINE		2	/* @length bytes in the lane */
#define KNITK_PAYLOAD_ARENA		3	/* @length bytes at arena @value */
#define KNITK_PAYLOAD_PACKED		4	/* @value records in @length inline bytes */

/*
 * A packed lane (KNITK_PAYLOAD_PACKED, docs/protocol.md L7) holds records
 * back to back in its inline bytes: each a length prefix of
 * KNITK_PACK_PREFIX_BYTES (a uint16_t in the machine's byte order, 1 at
 * least) and that many bytes, with no padding, so a record's bytes have
 * no alignment.  KNITK_PACK_ROOM(len) is the lane bytes a record of @len
 * bytes takes: a lane of inline_bytes holds records whose rooms add up to
 * at most that, and a record of inline_bytes - KNITK_PACK_PREFIX_BYTES
 * fills a lane alone.
 */
#define KNITK_PACK_PREFIX_BYTES		2
#define KNITK_PACK_ROOM(len)		((size_t)(len) + KNITK_PACK_PREFIX_BYTES)

#define KNITK_ARENA_NO_SLOT		0xffffffffU
#define KNITK_ARENA_SLOTS		64
#define KNITK_ARENA_GRANULE		64

/* struct knitk_lane_header.flags, free for the caller except: */
#define KNITK_LANE_F_ERROR		(1U << 0)	/* a result that is an error */

/**
 * struct knitk_lane_header - the 64-byte header at the start of every lane
 * @function_id: caller: what to run (request) or the function that ran.
 * @flags: caller: KNITK_LANE_F_* and free bits.
 * @task_id: caller: matches a result to its call.
 * @kind: library: KNITK_PAYLOAD_*.
 * @tag: caller: the payload's type tag.
 * @arena_slot: library: allocator slot, or KNITK_ARENA_NO_SLOT.
 * @value: KNITK_PAYLOAD_VALUE: the value; KNITK_PAYLOAD_ARENA (library):
 *	the arena offset; KNITK_PAYLOAD_PACKED (library): the number of
 *	records.
 * @length: library: payload bytes (inline or arena; for a packed lane the
 *	inline bytes its records take, prefixes included).
 * @deadline_ns: caller meta: absolute CLOCK_MONOTONIC deadline, 0 = none.
 * @abort_id: caller meta: abort bit + 1, 0 = none (the pool: its call's
 *	64-bit word in the abort region + 1).
 * @user: free for the caller.
 * @stamp: library: the mailbox's publish count when the lane was published
 *	(claimants of a stealing mailbox take the oldest first).
 */
struct knitk_lane_header {
	uint32_t function_id;
	uint32_t flags;
	uint64_t task_id;
	uint16_t kind;
	uint16_t tag;
	uint32_t arena_slot;
	uint64_t value;
	uint64_t length;
	uint64_t deadline_ns;
	uint32_t abort_id;
	uint32_t user;
	uint64_t stamp;
};

/* ------------------------------------------------------ producer (claim) */

struct knitk_producer;

/*
 * knitk_producer_create - the producer of @mailbox over @ep's mapping.
 * One producer per mailbox; it owns the pub word and the arena table.
 * A stealing request mailbox takes its effective ack from the steal lines.
 */
int knitk_producer_create(struct knitk_endpoint *ep, unsigned int mailbox,
			  struct knitk_producer **producer);
void knitk_producer_destroy(struct knitk_producer *producer);

/*
 * knitk_lane_claim - take a free lane for writing; returns the lane index.
 * The cached ack word is refreshed only when the cached view is full.
 * -EAGAIN when every lane is pending or claimed (backpressure).
 */
int knitk_lane_claim(struct knitk_producer *producer);

/* knitk_lane_header - the header of a claimed lane, to fill in. */
int knitk_lane_header(struct knitk_producer *producer, unsigned int lane,
		      struct knitk_lane_header **header);

/*
 * knitk_lane_reserve - room for @len payload bytes for a claimed lane:
 * inline when @len <= geometry.inline_bytes, else in the arena.  Sets the
 * header's kind, length, arena_slot and value; *@buf receives the bytes to
 * fill.  -ENOSPC when the arena cannot hold it now (backpressure; retry
 * after the consumer frees), -EMSGSIZE when it can never fit.  A lane may
 * be reserved again: the new room replaces the old (whose arena bytes
 * count as free for it); a reserve that fails writes nothing, so the lane
 * keeps the payload, value or reservation it had.
 */
int knitk_lane_reserve(struct knitk_producer *producer, unsigned int lane,
		       size_t len, void **buf);

/* knitk_lane_set_value - a claimed lane carries a 64-bit value. */
int knitk_lane_set_value(struct knitk_producer *producer, unsigned int lane,
			 uint64_t value);

/*
 * knitk_lane_release - give back a claimed, unpublished lane; an arena
 * reservation is rolled back (a private free of the producer).
 */
int knitk_lane_release(struct knitk_producer *producer, unsigned int lane);

/*
 * knitk_lane_publish - hand one claimed lane to the consumer (one release
 * store of the pub word).  knitk_lane_publish_batch publishes every lane
 * of @lanes (all claimed) with one store; their publish order (the one
 * knitk_lane_next gives) is the order they were claimed in.
 */
int knitk_lane_publish(struct knitk_producer *producer, unsigned int lane);
int knitk_lane_publish_batch(struct knitk_producer *producer, uint64_t lanes);

/*
 * knitk_producer_send - claim, reserve, copy @len bytes of @data (or, with
 * @data NULL and @len 0, carry @header->value), fill the caller fields of
 * @header and publish.  Returns the lane; -EAGAIN (no lane) or -ENOSPC
 * (arena full) are backpressure and leave nothing claimed.
 */
int knitk_producer_send(struct knitk_producer *producer,
			const struct knitk_lane_header *header,
			const void *data, size_t len);

/*
 * knitk_producer_send_batch - knitk_producer_send of up to @n messages
 * (1..64) in one call, published with one store of the pub word: message
 * i has the caller fields of @headers[i] (all zero with @headers NULL)
 * and the @len bytes at @data + i * @len (or, with @data NULL and @len 0,
 * carries @headers[i].value).  Lanes are taken in the order
 * knitk_lane_claim takes them and stop at the first message that finds
 * no lane or no arena room.  Returns how many were sent, from the first
 * message on; -EAGAIN or -ENOSPC (backpressure) when not even the first
 * was, and then nothing is claimed.  -EMSGSIZE when @len can never fit.
 */
int knitk_producer_send_batch(struct knitk_producer *producer,
			      const struct knitk_lane_header *headers,
			      const void *data, size_t len, unsigned int n);

/**
 * knitk_producer_send_packed - pack messages into as few lanes as they fit
 * @producer: the mailbox's producer.
 * @header: the caller fields of every lane it fills (NULL: all zero); the
 *	library's fields say KNITK_PAYLOAD_PACKED, the record count and the
 *	bytes used.
 * @msgs: the messages, as for writev(2): message i is the @msgs[i].iov_len
 *	bytes at @msgs[i].iov_base, 1 to inline_bytes - KNITK_PACK_PREFIX_BYTES
 *	bytes (the geometry's inline bytes per lane).
 * @n: how many, 1 to INT_MAX.
 *
 * Copies the messages, in order, as records (KNITK_PACK_ROOM) into the
 * inline bytes of free lanes, filling each lane before it takes the next,
 * and publishes every lane it filled with one release store of the pub
 * word.  The consumer gets the lanes from knitk_lane_decode() or
 * knitk_lane_decode_batch() as messages of kind KNITK_PAYLOAD_PACKED and
 * the records of each, in order, from knitk_lane_unpack(): a mailbox then
 * holds up to 64 lanes of records instead of 64 messages.  Lanes are
 * taken in the order knitk_lane_claim takes them and the call stops at
 * the first lane it cannot take; the messages of the lanes it filled are
 * sent.  On a stealing mailbox each lane goes to one claimant, so the
 * records of one lane stay in order but lanes may be taken by different
 * workers.  The arena is not used.
 *
 * Return: how many messages were sent, from the first on; -EAGAIN
 * (backpressure) when every lane is pending or claimed, and nothing was
 * sent.  Each message is checked before it is copied, and a message the
 * call reaches that cannot be sent fails the whole call, with nothing
 * sent (a message past the last lane the call could take is not looked
 * at: the call returns the count before it): -EINVAL for a NULL
 * @producer or @msgs, an @n of 0 or above INT_MAX, a message of 0 bytes
 * or a NULL iov_base; -EMSGSIZE for a message longer than a lane can
 * hold (then every message is, with inline_bytes 0).
 */
int knitk_producer_send_packed(struct knitk_producer *producer,
			       const struct knitk_lane_header *header,
			       const struct iovec *msgs, unsigned int n);

/*
 * knitk_producer_send_to - knitk_producer_send on a stealing mailbox, the
 * lane reserved for claimant @claimant (a worker) before it is published:
 * no other claimant takes it while @claimant is live (docs/protocol.md
 * T13), so a worker woken for it always finds it.  -EINVAL on a mailbox
 * that does not steal or for a claimant beyond the knot's workers.
 */
int knitk_producer_send_to(struct knitk_producer *producer,
			   unsigned int claimant,
			   const struct knitk_lane_header *header,
			   const void *data, size_t len);

/*
 * knitk_lane_publish_to - knitk_lane_publish of claimed @lane of a
 * stealing mailbox, reserved for claimant @claimant before the publish
 * exactly as knitk_producer_send_to reserves its lane (docs/protocol.md
 * T13): for a payload written in place (knitk_lane_reserve).  -EINVAL on
 * a mailbox that does not steal, for a claimant beyond the knot's workers
 * or a lane out of range, -EPERM for a lane not claimed; nothing is
 * reserved or published then.
 */
int knitk_lane_publish_to(struct knitk_producer *producer, unsigned int lane,
			  unsigned int claimant);

/*
 * knitk_producer_hand_off - on a stealing mailbox, reserve for claimant
 * @claimant the lanes of the oldest region (of @region_lanes lanes) that
 * are published, not claimed, not reserved for a live worker and not in
 * a region a live claimant is claiming (docs/protocol.md T14): a worker
 * woken for them always finds them.  Decided against the claimants by
 * their handshake, so a lane is reserved only if no claimant takes it.
 * @region_lanes is the knot's region size g or 0 for it (see
 * knitk_steal_consumer_create).  Returns how many lanes, 0 if none;
 * -EINVAL, with nothing reserved, on a mailbox that does not steal, for a
 * claimant beyond the knot's workers or a @region_lanes that is neither
 * 0 nor the knot's size.
 */
int knitk_producer_hand_off(struct knitk_producer *producer,
			    unsigned int claimant, unsigned int region_lanes);

/*
 * knitk_producer_stage - knitk_producer_send without the publish: the
 * lane is claimed and filled, and returned; publish it (alone, or with
 * others in one store by knitk_lane_publish_batch) or give it back with
 * knitk_lane_release.  The same errors as knitk_producer_send.
 */
int knitk_producer_stage(struct knitk_producer *producer,
			 const struct knitk_lane_header *header,
			 const void *data, size_t len);

/*
 * knitk_producer_reset_consumer - stand in for the mailbox's consumer,
 * which died: every published lane is acknowledged and every arena slot
 * freed, from the producer's own record of what is outstanding (so a
 * consumer that died inside knitk_lane_ack, its frees stored and its
 * acknowledgement not, is repaired, never undone).  The messages are
 * dropped.  A lane claimed and not yet published stays as it is, claimed,
 * with its payload and its arena reservation: it is published (to the
 * next consumer) or released later as usual.  The caller makes sure no
 * consumer of the mailbox runs until this returns; a consumer created
 * afterwards starts from the state left.  -EOPNOTSUPP for a stealing
 * mailbox.
 */
int knitk_producer_reset_consumer(struct knitk_producer *producer);

/*
 * knitk_lane_arena - the arena bytes of claimed @lane, from the producer's
 * own record: returns their slot (0 to KNITK_ARENA_SLOTS - 1), with their
 * address in this mapping in *@buf, their length in *@len and the number
 * of that placement of the slot in *@placement (each may be NULL);
 * -ENOENT when the lane's payload is not in the arena.
 */
int knitk_lane_arena(struct knitk_producer *producer, unsigned int lane,
		     void **buf, size_t *len, uint64_t *placement);

/*
 * knitk_producer_keep - the consumer kept arena @slot (knitk_lane_ack_keep)
 * and the producer's user now holds its bytes: they stay live, and a
 * stand-in for a dead consumer (knitk_producer_reset_consumer,
 * knitk_producer_reset_claimant) leaves them alone, until
 * knitk_producer_free_kept(@slot) frees them.  @placement is the one
 * knitk_lane_arena gave for the lane: -ESTALE when the slot was placed
 * anew since, or the consumer freed it after all (its bytes are not that
 * lane's any more; nothing is kept).  A consumer that frees a kept slot
 * later makes the allocator count it live; the producer's side cannot
 * tell.  Either may be called from any thread, beside the one that
 * produces (atomic words).  -EINVAL for a slot out of range, or
 * (free_kept) one not kept.
 */
int knitk_producer_keep(struct knitk_producer *producer, unsigned int slot,
			uint64_t placement);
int knitk_producer_free_kept(struct knitk_producer *producer, unsigned int slot);

/*
 * knitk_producer_notify - ring the doorbell(s) of the mailbox's consumer
 * (after publishing).  Returns the number of doorbells woken.
 *
 * knitk_producer_notify_park - the same ring, then park the endpoint's own
 * doorbell until @deadline_ns, in one system call where the backend can
 * (knitk_doorbell_ring_park()): a worker's "answer and wait for the next
 * call".  Returns as knitk_doorbell_park().
 */
int knitk_producer_notify(struct knitk_producer *producer);
int knitk_producer_notify_park(struct knitk_producer *producer,
			       uint64_t deadline_ns);

/* ------------------------------------------------------ consumer (decode) */

struct knitk_consumer;

/**
 * struct knitk_msg - one decoded lane
 * @size: sizeof(struct knitk_msg) of the caller (sized struct, see above);
 *	set once: knitk_lane_decode keeps it valid.
 * @lane: the lane.
 * @header: copy of the lane header.
 * @data: payload bytes (inline area or arena), valid until the lane is
 *	acknowledged; NULL for KNITK_PAYLOAD_NONE/VALUE.
 * @len: payload bytes.
 */
struct knitk_msg {
	uint32_t size;
	unsigned int lane;
	struct knitk_lane_header header;
	const void *data;
	size_t len;
};

/* The first version: 88 bytes with 8-byte pointers. */
#define KNITK_MSG_SIZE_VER0		(72 + 2 * sizeof(void *))

/*
 * knitk_consumer_create - the consumer of a non-stealing @mailbox (the
 * request mailbox of one worker, or a return mailbox).  -EOPNOTSUPP for a
 * stealing request mailbox (see knitk_steal_consumer_create).
 */
int knitk_consumer_create(struct knitk_endpoint *ep, unsigned int mailbox,
			  struct knitk_consumer **consumer);
void knitk_consumer_destroy(struct knitk_consumer *consumer);

/*
 * knitk_lane_scan - the pending lanes, freshly loaded (never cached);
 * returns how many.
 */
int knitk_lane_scan(struct knitk_consumer *consumer, uint64_t *pending);

/*
 * knitk_lane_next - remove from *@pending and return the next lane in
 * consume order (publish order for a single producer, also when a lane
 * staged early is published after lanes claimed later); -ENOENT if empty.
 * The order comes from a cursor kept in @consumer, which each lane taken
 * moves on: walk the mask the last knitk_lane_scan() (or
 * knitk_consumer_wait()) gave, and no copy of it beside, or the lanes
 * come out in another order until the next scan.
 */
int knitk_lane_next(struct knitk_consumer *consumer, uint64_t *pending);

/*
 * knitk_lane_decode - read the header of pending @lane and locate its
 * payload.  -EBADMSG for a header that does not describe a valid payload
 * (the lane must still be acknowledged), and for a packed lane whose
 * records do not frame its bytes (knitk_lane_unpack()).
 */
int knitk_lane_decode(struct knitk_consumer *consumer, unsigned int lane,
		      struct knitk_msg *msg);

/*
 * knitk_lane_decode_batch - knitk_lane_next then knitk_lane_decode for up
 * to @n lanes of *@pending: msgs[i] gets the i-th lane taken, and the
 * return value says how many.  @msg_size is sizeof(struct knitk_msg) of
 * the caller, the stride of @msgs, checked as a sized struct's size is
 * (-EINVAL, -E2BIG) and -EINVAL unless a multiple of the struct's
 * alignment (so every element is aligned as @msgs is); each element is written as knitk_lane_decode writes
 * one, its size included.  A lane that does not decode (its header, or
 * the records of a packed lane) ends the batch: as the first lane it is
 * taken, msgs[0] filled as far as knitk_lane_decode fills it and -EBADMSG
 * returned (the lane must still be acknowledged); after others it stays
 * in *@pending for the next call.
 * -ENOENT if *@pending is empty, -EPERM if it holds a lane that no scan
 * returned as pending.
 */
int knitk_lane_decode_batch(struct knitk_consumer *consumer, uint64_t *pending,
			    struct knitk_msg *msgs, unsigned int n,
			    size_t msg_size);

/**
 * struct knitk_record - one record of a packed lane
 * @data: its bytes, inside the lane's inline bytes, with no alignment
 *	(copy them out, e.g. with memcpy, to read typed values); valid, as
 *	the lane's knitk_msg.data, until the lane is acknowledged.
 * @len: its bytes, at least 1.
 *
 * An array element of fixed layout: it does not grow (no size field).
 */
struct knitk_record {
	const void *data;
	size_t len;
};

/**
 * knitk_lane_unpack - the records of a decoded packed lane, in order
 * @msg: a lane of kind KNITK_PAYLOAD_PACKED, as knitk_lane_decode() or
 *	knitk_lane_decode_batch() filled it, before its lane is acknowledged.
 * @pos: the offset of the next record in @msg's bytes: 0 for the first;
 *	advanced past the records returned.
 * @recs: gets up to @n records.
 * @n: room in @recs, at least 1.
 *
 * The decode has checked the lane whole (docs/protocol.md L7): every
 * prefix and record inside the lane's bytes, none empty, exactly as many
 * as the header counts; a lane that does not frame so was not returned
 * as a message but as -EBADMSG, and none of its records is read.  Each
 * call checks the lengths it reads again against @msg->len before it
 * gives a record, so a writer that breaks the protocol and rewrites a
 * published lane cannot make the reader touch a byte outside it.
 *
 * Return: the number of records stored in @recs, 0 once *@pos is at the
 * end of the lane.  A record that no longer frames (the lane was written
 * after its decode) ends the batch: as the first, -EBADMSG, with *@pos
 * unchanged (read no further records of that lane); after others, they
 * are returned and the next call fails.  -EINVAL for a NULL argument, an
 * @n of 0, a @msg of another kind or a *@pos past @msg->len.
 */
int knitk_lane_unpack(const struct knitk_msg *msg, size_t *pos,
		      struct knitk_record *recs, unsigned int n);

/*
 * knitk_lane_ack - retire every lane of @lanes (all pending): free their
 * arena slots, then one release store of the ack word.
 */
int knitk_lane_ack(struct knitk_consumer *consumer, uint64_t lanes);

/*
 * knitk_lane_ack_keep - knitk_lane_ack, but the arena bytes of the lanes of
 * @keep (a subset of @lanes) stay live: the consumer hands them to the
 * producer's side, which frees them (knitk_producer_free_kept) once its
 * user is done with them, so a reply can be written in place into its
 * request's bytes.  The producer learns which by a message of its own
 * protocol.  -EINVAL when @keep is not within @lanes.
 */
int knitk_lane_ack_keep(struct knitk_consumer *consumer, uint64_t lanes,
			uint64_t keep);

/*
 * knitk_consumer_wait - wait until @consumer has pending lanes, polling
 * while that pays and parking otherwise (docs/protocol.md S10): the wait a
 * consumer's loop needs between its scans.  Returns the number of pending
 * lanes, with *@pending set as knitk_lane_scan() sets it; the lanes stay
 * pending until knitk_lane_ack().
 *
 * It first scans.  Then it polls, but only while the role that produces
 * into the mailbox (the host for a request mailbox, worker w for return
 * mailbox w) is awake, its doorbell's sleeping flag clear, and no more of
 * the knot's roles are awake than CPUs the thread may run on
 * (knitk_endpoint_awake(), read again every 64 parks), and for at most a
 * budget kept in the consumer: halved after a poll that found nothing,
 * doubled (to a cap of tens of microseconds) after a park that a publish
 * ended soon.  Otherwise it parks on the endpoint's doorbell:
 * knitk_doorbell_prepare(), the re-check, knitk_doorbell_wait(), so no
 * publish is missed and an infinite park is safe.  While it polls its own
 * flag is clear, so knitk_producer_notify() on the other side rings
 * nothing (no system call).  The thread that calls it parks on the
 * endpoint's doorbell: one thread at a time, as for knitk_doorbell_park().
 *
 * Returns 0 when a park ended with nothing pending in this mailbox and
 * its writer alive: a knitk_doorbell_kick_self(), work in another mailbox
 * the role consumes, the death of a role that does not write here; call
 * again.  -ETIMEDOUT at @deadline_ns (absolute CLOCK_MONOTONIC, or
 * KNITK_WAIT_FOREVER) with nothing pending; -EPIPE when the writing
 * role's endpoint was released or marked dead (knitk_endpoint_mark_dead()
 * on the futex backend, a death on the module) and nothing is pending
 * (lanes it published before it went are returned first); -EINTR on a
 * signal; -ENOTCONN before knitk_endpoint_join() or once the role ended;
 * -EINVAL for a NULL argument.
 */
int knitk_consumer_wait(struct knitk_consumer *consumer, uint64_t *pending,
			uint64_t deadline_ns);

/* ------------------------------------------------------------- stealing */

/*
 * Work stealing (docs/protocol.md T1-T9).  The 64 lanes of a stealing
 * request mailbox form 64 / g regions of g lanes; every worker consumes
 * the mailbox through a claimant of its own.  knitk_lane_scan() on a
 * claimant claims the oldest published region that no more senior worker
 * wants (a Dekker handshake on the steal lines' want words), copies the
 * claimed lanes' headers and inline payloads out and retires the lanes
 * with one store of the worker's ack word: the lanes it returns belong to
 * this worker alone.  knitk_lane_next() gives them in publish order,
 * knitk_lane_decode() reads them from the copy (arena payloads in place),
 * and knitk_lane_ack() frees their arena slots through the worker's own
 * free word, once the payload is no longer read.
 */

/*
 * knitk_steal_region_lanes - the region size g for @nr_workers claimants:
 * @region_lanes when it is a power of two with 64 / g >= @nr_workers + 1,
 * with 0 the largest such g; -EINVAL otherwise (or for 0 or more than 63
 * workers).
 */
int knitk_steal_region_lanes(unsigned int nr_workers, unsigned int region_lanes);

/*
 * knitk_steal_consumer_create - the claimant of the endpoint's worker role
 * on stealing request @mailbox, in regions of the knot's size g.  A want
 * word names regions, so claimants of different sizes would not see each
 * other's claims and could take a lane twice: the knot records g (struct
 * knitk_geometry.region_lanes, given at knitk_endpoint_create, 0 there
 * for the default of knitk_steal_region_lanes; knitk_endpoint_layout
 * reads it), and @region_lanes must be g or 0 for it.  It takes over
 * the role's steal line: continues from its ack and free words and clears
 * a want word a dead predecessor left.  -EINVAL for bad arguments (any
 * other @region_lanes, legal for the workers or not) or an endpoint not
 * joined as a worker, with nothing of the steal line changed;
 * -EOPNOTSUPP for a non-stealing mailbox.
 */
int knitk_steal_consumer_create(struct knitk_endpoint *ep, unsigned int mailbox,
				unsigned int region_lanes,
				struct knitk_consumer **consumer);

/*
 * knitk_steal_hand_off - on claimant @consumer, claim the oldest region
 * with work not reserved for anyone through the handshake, and reserve
 * its lanes for @worker (another claimant) instead of taking them
 * (docs/protocol.md T13): the wake a worker hands to an idle peer.
 * Returns how many lanes, 0 if none; -EINVAL for a consumer that does not
 * steal, the caller's own worker or one beyond the knot's workers.
 */
int knitk_steal_hand_off(struct knitk_consumer *consumer, unsigned int worker);

/*
 * knitk_producer_track_claims - on a stealing mailbox, from now on a lane
 * a worker retired stays busy for this producer until
 * knitk_producer_claims() has reported it: the caller learns which worker
 * took which lane before the lane is reused.  -EOPNOTSUPP for a
 * non-stealing mailbox.
 */
int knitk_producer_track_claims(struct knitk_producer *producer);

/*
 * knitk_producer_claims - reload the ack words once; @lanes[w] gets the
 * lanes worker w retired since its last report, for w below @nr (at most
 * the knot's workers); they are free from now on.  Returns how many in
 * all.  -EINVAL unless tracking.
 */
int knitk_producer_claims(struct knitk_producer *producer, uint64_t *lanes,
			  unsigned int nr);

/*
 * knitk_producer_reset_claimant - stand in for dead @worker: free every
 * arena slot of a lane it claimed and did not free, and drop the lanes
 * reserved for it (knitk_producer_send_to).  -EBUSY while it has
 * claims not reported yet (knitk_producer_claims first) or its role is
 * held; only until a new worker takes its steal line.  Returns the slots
 * freed.
 */
int knitk_producer_reset_claimant(struct knitk_producer *producer,
				  unsigned int worker);

/* ------------------------------------------------------------ doorbells */

/*
 * Sleep: knitk_doorbell_park() = prepare (read seq, set the sleeping flag,
 * seq_cst), re-check every mailbox the role consumes, wait on seq.  A pool
 * that has other reasons to stay awake calls prepare, checks them, then
 * knitk_doorbell_wait() (which re-checks the mailboxes) or
 * knitk_doorbell_cancel().
 *
 * knitk_doorbell_wait/park return 0 when there may be work (woken, or work
 * or a peer death found by the re-check), -ETIMEDOUT at @deadline_ns
 * (absolute CLOCK_MONOTONIC, or KNITK_WAIT_FOREVER), -EINTR on a signal,
 * -EPIPE for a worker whose host has died (looked at before the
 * mailboxes: lanes it published before it went may still be pending, for
 * one more scan), -ENOTCONN when not joined or (the waits) once the role
 * has ended (docs/protocol.md P4: a wait asleep when it ends is woken, a
 * ring-then-wait of an ended role rings nothing).
 */
int knitk_doorbell_prepare(struct knitk_endpoint *ep, uint32_t *seq);
int knitk_doorbell_wait(struct knitk_endpoint *ep, uint32_t seq,
			uint64_t deadline_ns);
int knitk_doorbell_cancel(struct knitk_endpoint *ep);
int knitk_doorbell_park(struct knitk_endpoint *ep, uint64_t deadline_ns);

/*
 * knitk_doorbell_ring - after publishing, ring every doorbell of the mask
 * @doorbells (bit d = worker d, bit KNITK_DOORBELL_HOST = host) whose owner
 * is asleep with pending work; others are suppressed and counted.  Returns
 * the number woken.
 */
int knitk_doorbell_ring(struct knitk_endpoint *ep, uint64_t doorbells);

/*
 * knitk_doorbell_ring_wait - after knitk_doorbell_prepare() and publishing
 * to a peer, ring @doorbells as knitk_doorbell_ring() does, then wait as
 * knitk_doorbell_wait() does, with its returns.  On the module backend
 * (knitk_doorbell_can_ring_wait() is 1) a hop that sleeps is one system
 * call, KNITK_IOC_NOTIFY_WAIT, whose wake of the peer is synchronous;
 * elsewhere it is a ring, then the wait.  When the re-check finds work (no
 * sleep) the doorbells are still rung.  -EINVAL for a bit naming no
 * doorbell of the knot, before anything is rung.
 *
 * knitk_doorbell_ring_park - prepare, then knitk_doorbell_ring_wait(): what
 * knitk_doorbell_park() is to knitk_doorbell_wait().
 */
int knitk_doorbell_ring_wait(struct knitk_endpoint *ep, uint64_t doorbells,
			     uint32_t seq, uint64_t deadline_ns);
int knitk_doorbell_ring_park(struct knitk_endpoint *ep, uint64_t doorbells,
			     uint64_t deadline_ns);

/*
 * knitk_endpoint_awake - who runs on the knot, for a poll that must not
 * keep the thread it waits for off a CPU: *@awake (if non-NULL) gets bit
 * d for each doorbell d of the knot's roles (its workers and the host)
 * whose sleeping flag is clear (awake, or not parked: a role never
 * joined, or dead with its flag clear, counts too), *@cpus (if non-NULL)
 * the CPUs the calling thread may run on (its affinity mask, at least 1).
 * Returns how many roles are awake.  A poll pays only while that is at
 * most *@cpus: the rule of knitk_consumer_wait() and of the pool's polls.
 * The flags are loaded without ordering, a hint that may be stale by the
 * return.  -EINVAL for a NULL @ep.
 */
int knitk_endpoint_awake(const struct knitk_endpoint *ep, uint64_t *awake,
			 unsigned int *cpus);

/**
 * struct knitk_wait_word - a futex word that also ends a wait
 * @word: a 32-bit word in process-shared memory, such as the futex word
 *	of a robust PTHREAD_PROCESS_SHARED mutex.
 * @value: what the word held when the caller looked at it last.
 */
struct knitk_wait_word {
	const uint32_t *word;
	uint32_t value;
};

/*
 * knitk_doorbell_ring_wait_words - knitk_doorbell_ring_wait() that also
 * ends, returning 0, when one of @nr words (1..KNITK_WAIT_WORDS_MAX) is
 * woken by a futex wake of that word, or no longer holds its value when
 * the wait begins (a later store without a wake does not end it, as with
 * futex(2)): such as the kernel's wake of a robust mutex whose owner
 * thread exited, sent from the start of the owner's exit (a waiter woken
 * by it does not wait for a pidfd's or a second thread's wake), which the
 * kernel sends only when the word has FUTEX_WAITERS set: the caller sets
 * it and waits for the value with it.  The caller looks at its words
 * again after any return.  The futex backend only, with futex_waitv(2)
 * (Linux 5.16): -EOPNOTSUPP elsewhere (the module learns of deaths
 * itself), and -EINVAL for @nr 0 or above the maximum or a NULL or
 * misaligned word; either is returned before anything is rung or waited.
 * -EFAULT for a word the kernel cannot read.  A word that had changed
 * already ends the wait at once, counted as a mismatch, not a wait.
 */
#define KNITK_WAIT_WORDS_MAX	64
int knitk_doorbell_ring_wait_words(struct knitk_endpoint *ep, uint64_t doorbells,
				   uint32_t seq, uint64_t deadline_ns,
				   const struct knitk_wait_word *words,
				   unsigned int nr);

/*
 * knitk_word_wait - sleep while the 32-bit word @word of @ep's knot holds
 * @expected, until knitk_word_wake() of that word from any endpoint of the
 * knot (in any process), @deadline_ns (absolute CLOCK_MONOTONIC, or
 * KNITK_WAIT_FOREVER) or a signal: a futex for the knot's own memory, on
 * both backends (the module's knot pages are no file's, so futex(2) on
 * them fails with EFAULT).  @word lies in the knot's data region (from
 * the layout's control_size to its size, as mapped at the endpoint's
 * base), aligned to 4.  The word is read once the caller is queued: a
 * waker that stores a new value and then wakes is never missed.
 *
 * Returns 0 when woken (re-read the word: a wake does not say it changed),
 * -EAGAIN when the word did not hold @expected, -ETIMEDOUT, -EINTR on a
 * signal (a handler with SA_RESTART may restart the wait instead),
 * -EINVAL for a NULL @ep or @word, a misaligned word or one outside the
 * data region, -ENOTCONN for an endpoint with no knot, -EOPNOTSUPP for a
 * module without KNITK_FEATURE_WORD_WAIT.
 *
 * knitk_word_wake - wake at most @nr (at least 1; UINT_MAX: all) waiters
 * of @word, the longest waiting first, after storing its new value.
 * Returns the number woken, or the errors above (-EINVAL for @nr 0).
 */
int knitk_word_wait(struct knitk_endpoint *ep, const uint32_t *word,
		    uint32_t expected, uint64_t deadline_ns);
int knitk_word_wake(struct knitk_endpoint *ep, const uint32_t *word,
		    unsigned int nr);

/*
 * knitk_doorbell_can_ring_wait - 1 when knitk_doorbell_ring_wait() is one
 * system call (a module with KNITK_FEATURE_NOTIFY_WAIT), else 0.  On that
 * backend the wait of a ring-then-wait also spins in the kernel first,
 * briefly, while the task that last rang it runs (KNITK_FEATURE_SPIN);
 * knitk_doorbell_wait() and knitk_doorbell_park() do not spin.  The
 * pool rings and waits in one call where this is 1 (docs/protocol.md C6).
 */
int knitk_doorbell_can_ring_wait(const struct knitk_endpoint *ep);

/*
 * knitk_doorbell_kick_self - end the wait of the thread parked on this
 * endpoint's own doorbell, with no work pending: for threads that share an
 * endpoint (one hands its park over to another, or an abort needs the
 * parked thread awake).  The kick advances the doorbell's seq: a wait
 * prepared before it returns 0 (a kick in knitk_wake_stats, or a mismatch
 * if it had not slept yet); a wait prepared after it sleeps on, so the
 * kicker first sets a flag that the parker checks after
 * knitk_doorbell_prepare.  -ENOTCONN before
 * knitk_endpoint_join(), -EOPNOTSUPP when the backend cannot kick (see
 * knitk_doorbell_can_kick).
 */
int knitk_doorbell_kick_self(struct knitk_endpoint *ep);

/*
 * knitk_doorbell_can_kick - 1 when knitk_doorbell_kick_self works on this
 * endpoint (the futex backend, or a module with KNITK_FEATURE_KICK), else
 * 0: then a park ends only for work, a peer death or its deadline.
 */
int knitk_doorbell_can_kick(const struct knitk_endpoint *ep);

/*
 * knitk_endpoint_set_event_fd - futex backend: signal eventfd @efd (write 1)
 * each time this endpoint wakes the host doorbell while its sleeping flag
 * is set: a result or a death delivered to a host that declared it will
 * sleep (knitk_doorbell_prepare), never a ring the flag suppresses nor a
 * kick (knitk_doorbell_kick_self), so an event loop can wait on @efd
 * instead of the futex; and when this endpoint ends the host's role (its
 * release, or knitk_endpoint_mark_dead of the host), which
 * knitk_endpoint_poll then reports.  Every endpoint that
 * may wake the host (its workers, and the host itself for deaths it marks)
 * needs it.  @efd -1 stops it.  The caller keeps @efd open while set.
 * -EOPNOTSUPP on the module, whose endpoint fd polls instead; -EINVAL for
 * a NULL @ep or @efd below -1.
 */
int knitk_endpoint_set_event_fd(struct knitk_endpoint *ep, int efd);

/**
 * struct knitk_wake_stats - this endpoint's sleep/wake counters
 * @size: sizeof(struct knitk_wake_stats) of the caller (sized struct).
 * @reserved: written as zero.
 * @waits: waits that went to sleep.
 * @wakes: waits woken with work or a peer event (a death that began
 *	after the wait's prepare, or was still kicking doorbells at it).
 * @spurious: waits woken with nothing pending, no peer event and no kick:
 *	never a wake that a kick or a death caused, however it straddled the
 *	prepare.
 * @mismatches: waits that found seq already moved.
 * @timeouts: waits that reached their deadline.
 * @interrupts: waits ended by a signal.
 * @sent: rings that woke a doorbell.
 * @suppressed_awake: rings dropped because the owner was not sleeping.
 * @suppressed_idle: rings dropped because the owner had nothing pending.
 * @kicks: waits ended by a kick (another thread of the endpoint handing
 *	over its park, or an abort; begun after the prepare or in flight at
 *	it) with nothing pending and no peer event.
 * @event_writes: futex backend: writes to the host's event fd
 *	(knitk_endpoint_set_event_fd) by this endpoint, one per wake of a host
 *	doorbell whose sleeping flag was set; 0 while the host does not wait.
 */
struct knitk_wake_stats {
	uint32_t size;
	uint32_t reserved;
	uint64_t waits;
	uint64_t wakes;
	uint64_t spurious;
	uint64_t mismatches;
	uint64_t timeouts;
	uint64_t interrupts;
	uint64_t sent;
	uint64_t suppressed_awake;
	uint64_t suppressed_idle;
	uint64_t kicks;
	uint64_t event_writes;
};

#define KNITK_WAKE_STATS_SIZE_VER0	88	/* first version */
#define KNITK_WAKE_STATS_SIZE_VER1	96	/* + event_writes */

int knitk_endpoint_wake_stats(const struct knitk_endpoint *ep,
			      struct knitk_wake_stats *stats);

/*
 * knitk_endpoint_doorbell_stats - the module's counters of @doorbell
 * (KNITK_IOC_STATS) into @stats, @size bytes: sizeof(*@stats) of the
 * caller's <linux/knitk.h>, so a program built against older or newer
 * headers gets the counters it knows (those the module lacks read 0).
 * -EINVAL for a @size below KNITK_STATS_SIZE_VER0 - 8 (the first
 * version's counters), -E2BIG for one above KNITK_SIZED_MAX (nothing is
 * written), -EOPNOTSUPP on the futex backend.
 */
int knitk_endpoint_doorbell_stats(struct knitk_endpoint *ep, unsigned int doorbell,
				  struct knitk_doorbell_stats *stats, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* KNITK_H */
