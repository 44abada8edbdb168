/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * knitk: kernel-assisted shared-memory IPC.
 *
 * This header is the whole contract between the knitk module and userspace.
 *
 * Protocol for a user of /dev/knitk:
 *
 *  1. open("/dev/knitk") gives an *endpoint*.
 *  2. KNITK_IOC_API negotiates the API version and reports features.
 *  3. KNITK_IOC_CREATE makes a new *knot* from a struct knitk_geometry and
 *     attaches the endpoint to it; the knot's layout comes back in
 *     struct knitk_layout.  Another endpoint (in this or any process that
 *     holds an fd of the knot, e.g. by inheritance or SCM_RIGHTS) joins the
 *     same knot with KNITK_IOC_ATTACH.
 *  4. mmap() maps the knot: the control page (offset 0, read-only) and the
 *     data region (offset layout.control_size, read-write), each exactly.
 *  5. KNITK_IOC_JOIN gives the endpoint a role: the host or worker N.
 *  6. KNITK_IOC_WAIT sleeps on the endpoint's own doorbell; KNITK_IOC_NOTIFY
 *     rings a set of doorbells, delivering a wake only to a waiter that is
 *     asleep and whose mailboxes hold pending work; KNITK_IOC_NOTIFY_WAIT
 *     does both in one call (ring the peer, then wait), and a wait with
 *     KNITK_WAIT_SPIN spins briefly in the kernel while the task that last
 *     rang its doorbell runs.  poll() watches the
 *     same doorbell (an attached endpoint that has not joined watches the
 *     host's): POLLIN while a mailbox it consumes holds a pending lane,
 *     POLLPRI while some role is dead, POLLHUP for a worker whose host has
 *     died, POLLERR while not attached.  Delivered notifies wake pollers
 *     too, so a poller sets its sleeping flag and re-checks first, as
 *     before KNITK_IOC_WAIT; kicks, deaths, CREATE, ATTACH and JOIN wake
 *     them as well.  An epoll registration made at any point of the
 *     endpoint's life (before CREATE or ATTACH, before JOIN, after it)
 *     follows the doorbell the endpoint watches.  KNITK_IOC_WORD_WAIT and
 *     KNITK_IOC_WORD_WAKE are a futex for a 32-bit word of the knot's data
 *     region, for any attached endpoint.
 *  7. A role belongs to the process (thread group) that joined it, not to
 *     the endpoint's file, which forked children, processes that received
 *     an fd of it and mappings may hold as well.  The role ends when that
 *     process exits (by exit, a fatal signal or SIGKILL), when it closes its
 *     last fd of the endpoint (see struct knitk_join), or when the endpoint
 *     is released, whichever comes first, and only once: its bit moves from
 *     live to dead, death_seq is incremented, the host (or, for the
 *     host, every worker) is woken, and then death_done is incremented
 *     (struct knitk_control).  Another endpoint may then join the
 *     role; the ended endpoint cannot join again.  Mappings are not
 *     inherited across fork() unless the process asks with
 *     madvise(MADV_DOFORK): a child that uses the knot attaches and maps an
 *     endpoint of its own.  The knot is freed when its last endpoint and
 *     mapping are gone.
 *
 * Memory of a knot, in order (every offset comes from struct knitk_layout):
 *
 *   control page   struct knitk_control, written by the kernel only
 *   doorbells      KNITK_NR_DOORBELLS x struct knitk_doorbell; worker w rings
 *                  on doorbell w, the host on KNITK_DOORBELL_HOST
 *   abort bitmap   geometry.abort_bits bits of userspace's own words, which
 *                  the kernel never reads (the pool keeps a 64-bit word per
 *                  call there, changed by host and workers alike)
 *   steal lines    (KNITK_GEOM_STEAL only) one struct knitk_steal_line per
 *                  (submit mailbox, worker)
 *   mailboxes      request mailboxes, then one return mailbox per worker;
 *                  each is a struct knitk_sector, KNITK_LANES lanes of
 *                  (KNITK_LANE_HEADER_BYTES + geometry.inline_bytes), then
 *                  the mailbox's arena
 *
 * Every region starts on a KNITK_PAGE_BYTES boundary; the layout of a
 * geometry g is, with P = KNITK_PAGE_BYTES and W = g.nr_workers,
 * S = g.nr_submitters, steal = g.flags & KNITK_GEOM_STEAL:
 *
 *   control_size   = P
 *   doorbell_off   = P, doorbell_stride = KNITK_CACHELINE,
 *   nr_doorbells   = KNITK_NR_DOORBELLS (one page)
 *   abort_off      = 2P, abort_size = round_up(g.abort_bits / 8, P)
 *   steal_off      = abort_off + abort_size if steal, else 0
 *   steal_stride   = KNITK_CACHELINE, nr_steal = steal ? S * W : 0
 *   mailbox_off    = abort_off + abort_size + round_up(nr_steal * 64, P)
 *   nr_request     = steal ? S : S * W, nr_mailboxes = nr_request + W
 *   lane_off       = sizeof(struct knitk_sector)
 *   lane_stride    = KNITK_LANE_HEADER_BYTES + g.inline_bytes
 *   arena_off      = round_up(lane_off + KNITK_LANES * lane_stride, P)
 *   arena_size     = g.arena_bytes
 *   mailbox_stride = arena_off + arena_size
 *   size           = mailbox_off + nr_mailboxes * mailbox_stride
 *
 * nr_mailboxes must not exceed KNITK_MAX_MAILBOXES.
 *
 * Request mailboxes: without KNITK_GEOM_STEAL there is one per (submitter s,
 * worker w), index s * nr_workers + w, consumed by worker w.  With
 * KNITK_GEOM_STEAL there is one per submitter, consumed by every worker
 * through its steal line.  Return mailbox of worker w has index
 * nr_request + w and is consumed by the host.
 */
#ifndef _UAPI_LINUX_KNITK_H
#define _UAPI_LINUX_KNITK_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define KNITK_API			1
#define KNITK_MAGIC			0x6b6e6974	/* "knit" */

/* Features reported (and requestable) in struct knitk_api. */
#define KNITK_FEATURE_STEAL		(1ULL << 0)
#define KNITK_FEATURE_PEER_DEATH	(1ULL << 1)
#define KNITK_FEATURE_STATS		(1ULL << 2)
#define KNITK_FEATURE_POLL		(1ULL << 3)
#define KNITK_FEATURE_KICK		(1ULL << 4)
#define KNITK_FEATURE_SPIN		(1ULL << 5)	/* KNITK_WAIT_SPIN */
#define KNITK_FEATURE_NOTIFY_WAIT	(1ULL << 6)	/* KNITK_IOC_NOTIFY_WAIT */
/* Bit 7: KNITK_URING_CMD_WAIT through IORING_OP_URING_CMD. */
#define KNITK_FEATURE_URING_CMD		(1ULL << 7)
/* Bit 8: KNITK_GEOM_NO_HUGE, and struct knitk_control.huge_bytes. */
#define KNITK_FEATURE_HUGE		(1ULL << 8)
/* Bit 9: KNITK_IOC_WORD_WAIT and KNITK_IOC_WORD_WAKE. */
#define KNITK_FEATURE_WORD_WAIT		(1ULL << 9)

/* Fixed shape. */
#define KNITK_LANES			64
#define KNITK_CACHELINE			64
#define KNITK_LANE_HEADER_BYTES		64
#define KNITK_NR_DOORBELLS		64
#define KNITK_DOORBELL_HOST		63
#define KNITK_ROLE_SLOTS		64	/* workers 0..62, host 63 */
#define KNITK_PAGE_BYTES		4096	/* unit of every region */

/* Geometry limits. */
#define KNITK_MAX_WORKERS		63
#define KNITK_MAX_SUBMITTERS		64
#define KNITK_MAX_INLINE_BYTES		16384
#define KNITK_ARENA_ALIGN		4096
#define KNITK_MAX_ARENA_BYTES		(1ULL << 32)
#define KNITK_ABORT_ALIGN		64
#define KNITK_MAX_ABORT_BITS		(1U << 20)
#define KNITK_MAX_MAILBOXES		4096

/* struct knitk_geometry.flags */
#define KNITK_GEOM_STEAL		(1U << 0)
#define KNITK_GEOM_NO_HUGE		(1U << 1)
#define KNITK_GEOM_FLAGS		(KNITK_GEOM_STEAL | KNITK_GEOM_NO_HUGE)

/*
 * A knot of at least this many bytes is backed by huge pages where the
 * kernel has them (unless KNITK_GEOM_NO_HUGE): the size of a PMD mapping
 * on x86-64 and arm64 with 4 KiB pages.  Smaller knots would waste most
 * of a huge page.
 */
#define KNITK_HUGE_MIN_BYTES		(2ULL << 20)

/**
 * struct knitk_geometry - what a knot is made of
 * @flags: KNITK_GEOM_* flags; KNITK_GEOM_STEAL selects one shared request
 *	mailbox per submitter (work stealing) instead of one per
 *	(submitter, worker).  KNITK_GEOM_NO_HUGE keeps the knot in base
 *	pages: no huge-page-sized chunks on the module, no hugetlb or
 *	transparent huge pages on the futex backend (a knot below
 *	KNITK_HUGE_MIN_BYTES never gets them anyway).  Needs
 *	KNITK_FEATURE_HUGE: an older module refuses it with -EINVAL.
 * @nr_workers: number of worker roles, 1..KNITK_MAX_WORKERS.
 * @nr_submitters: number of producing host channels (one per submitting
 *	thread), 1..KNITK_MAX_SUBMITTERS.
 * @lanes: lanes per mailbox; must be KNITK_LANES.
 * @inline_bytes: inline payload bytes per lane, a multiple of
 *	KNITK_CACHELINE, at most KNITK_MAX_INLINE_BYTES (0 allowed).
 * @abort_bits: size of the abort bitmap in bits, a multiple of
 *	KNITK_ABORT_ALIGN, at most KNITK_MAX_ABORT_BITS (0 allowed).
 * @arena_bytes: arena bytes per mailbox, a multiple of KNITK_ARENA_ALIGN,
 *	at most KNITK_MAX_ARENA_BYTES (0 allowed).
 * @region_lanes: with KNITK_GEOM_STEAL, g, the lanes per region of every
 *	stealing request mailbox (the claimants' handshake names regions):
 *	a power of two with KNITK_LANES / g >= nr_workers + 1, or 0 for the
 *	largest such g.  Must be zero without KNITK_GEOM_STEAL.  The knot
 *	records the size resolved: struct knitk_control.geometry holds g,
 *	never 0, for a stealing knot, so every endpoint that attaches later
 *	reads the size its claimants must use.
 * @reserved0: must be zero.
 * @reserved: must be zero.
 */
struct knitk_geometry {
	__u32 flags;
	__u32 nr_workers;
	__u32 nr_submitters;
	__u32 lanes;
	__u32 inline_bytes;
	__u32 abort_bits;
	__u64 arena_bytes;
	__u32 region_lanes;
	__u32 reserved0;
	__u64 reserved[3];
};

/**
 * struct knitk_layout - where everything of a knot lives
 *
 * All offsets are bytes from the start of the knot (the mmap file offset).
 *
 * @size: total bytes of the knot, a multiple of the page size.
 * @control_size: bytes of the control page region at offset 0 (read-only).
 * @doorbell_off: offset of the doorbell array.
 * @doorbell_stride: bytes per doorbell.
 * @nr_doorbells: always KNITK_NR_DOORBELLS.
 * @abort_off: offset of the abort bitmap (64-bit words).
 * @abort_size: bytes of the abort bitmap region.
 * @steal_off: offset of the steal lines (0 without KNITK_GEOM_STEAL).
 * @steal_stride: bytes per steal line.
 * @nr_steal: number of steal lines, nr_submitters * nr_workers or 0; the
 *	line of (submit mailbox m, worker w) has index m * nr_workers + w.
 * @mailbox_off: offset of mailbox 0.
 * @mailbox_stride: bytes per mailbox, a multiple of the page size.
 * @nr_mailboxes: request plus return mailboxes.
 * @nr_request: request mailboxes; return mailbox of worker w is
 *	nr_request + w.
 * @lane_off: offset of lane 0 within a mailbox (after its sector).
 * @lane_stride: bytes per lane: header plus inline bytes.
 * @arena_off: offset of the arena within a mailbox, page aligned.
 * @arena_size: bytes of arena per mailbox.
 * @reserved: zero.
 */
struct knitk_layout {
	__u64 size;
	__u64 control_size;
	__u64 doorbell_off;
	__u32 doorbell_stride;
	__u32 nr_doorbells;
	__u64 abort_off;
	__u64 abort_size;
	__u64 steal_off;
	__u32 steal_stride;
	__u32 nr_steal;
	__u64 mailbox_off;
	__u64 mailbox_stride;
	__u32 nr_mailboxes;
	__u32 nr_request;
	__u32 lane_off;
	__u32 lane_stride;
	__u64 arena_off;
	__u64 arena_size;
	__u64 reserved[4];
};

/**
 * struct knitk_doorbell - one sleeper's wake word, on its own cache line
 * @seq: wake sequence.  A waiter reads it, sets @sleeping, re-checks its
 *	mailboxes, then sleeps while @seq is unchanged.  With the module, only
 *	the kernel advances it (KNITK_IOC_NOTIFY); without it, the waker does.
 * @sleeping: non-zero while the owner is about to sleep or asleep; set and
 *	cleared by the owner.  A delivered wake advances @seq and clears
 *	@sleeping in one 64-bit compare-and-swap of both words, so further
 *	notifies for the same sleep are suppressed; the owner therefore
 *	updates @sleeping with a compare-and-swap of both words too.
 * @pad: fills the cache line.
 */
struct knitk_doorbell {
	__u32 seq;
	__u32 sleeping;
	__u32 pad[14];
};

/**
 * struct knitk_sector - the shared words of one mailbox, one per cache line
 * @pub: pub word; bit L toggled by the producer when it publishes lane L.
 * @pad0: cache line padding.
 * @ack: ack word; bit L toggled by the consumer when it has read lane L.
 *	Unused on a stealing request mailbox (see struct knitk_steal_line).
 * @pad1: cache line padding.
 * @arena_free: arena free word; bit s toggled (single writer, or atomic
 *	XOR) when arena slot s is freed by the consumer.
 * @pad2: cache line padding.
 * @producer: reserved for the producer.
 * @pad3: cache line padding.
 *
 * Lane L is pending when bit L of @pub and @ack differ, free when they agree.
 */
struct knitk_sector {
	__u64 pub;
	__u64 pad0[7];
	__u64 ack;
	__u64 pad1[7];
	__u64 arena_free;
	__u64 pad2[7];
	__u64 producer;
	__u64 pad3[7];
};

/**
 * struct knitk_steal_line - the words of one worker on one stealing mailbox
 * @ack: this worker's ack word; the mailbox's effective ack word is the XOR
 *	of every worker's @ack.
 * @want: this worker's claim intent (Dekker handshake).
 * @arena_free: this worker's arena free word, XOR-combined by the producer.
 * @resv: lanes reserved for this worker (the hand-off of a wake): set
 *	with an atomic OR by the producer before it publishes them, cleared
 *	with an atomic AND by this worker when it claims them.  No other
 *	live claimant takes a lane reserved for a live worker.  Ignored by
 *	the module.
 * @user: one word for the user of the claimants (the library's pool,
 *	on mailbox 0: who is waking this worker, changed by CAS).  Ignored
 *	by the module.
 * @claims: the claims this worker made on this mailbox, stored by it
 *	(single writer) after each one.  Ignored by the module.
 * @pad: cache line padding.
 */
struct knitk_steal_line {
	__u64 ack;
	__u64 want;
	__u64 arena_free;
	__u64 resv;
	__u64 user;
	__u64 claims;
	__u64 pad[2];
};

/**
 * struct knitk_control - the kernel-written control page
 * @magic: KNITK_MAGIC.
 * @api: KNITK_API.
 * @live: bit r set while role r is held (bit KNITK_DOORBELL_HOST for the
 *	host).  A join stores it with release semantics after @generation,
 *	so a reader that acquires the new bit sees the new generation.
 * @dead: bit r set when role r ended (step 7 of the protocol); cleared
 *	when the role is joined again.  Stored with release semantics after
 *	@live is cleared.
 * @death_seq: incremented once per ended role, with release semantics
 *	after @dead and @live: a reader that acquires a new value sees the
 *	dead bit of that death.
 * @death_done: incremented once per ended role, like @death_seq, but only
 *	after every doorbell its death wakes has been kicked (its seq
 *	advanced), with release semantics.  @death_seq - @death_done is the
 *	number of deaths in flight.  A waiter that reads @death_done
 *	(acquire) before it reads its doorbell's seq, and then sees seq move
 *	with nothing pending, was woken by a death iff @death_seq no longer
 *	equals that value: a death whose kick moved seq past the value read
 *	was not done yet, and had already advanced @death_seq.
 * @generation: per role, incremented on every join.
 * @geometry: the geometry the knot was created from, region_lanes resolved
 *	(see struct knitk_geometry).
 * @layout: the knot's layout.
 * @huge_bytes: bytes of the knot allocated in huge pages when it was made
 *	(KNITK_FEATURE_HUGE; 0 from an older module): on the module, the
 *	bytes in physically contiguous chunks of the PMD size (mapped with
 *	4 KiB entries all the same); on the futex backend, the whole knot
 *	when its memfd is hugetlbfs, else 0 (transparent huge pages of a
 *	plain memfd come and go with the kernel: the library's
 *	knitk_endpoint_pages() counts those).  Fixed after create.
 */
struct knitk_control {
	__u32 magic;
	__u32 api;
	__u64 live;
	__u64 dead;
	__u32 death_seq;
	__u32 death_done;
	__u32 generation[KNITK_ROLE_SLOTS];
	struct knitk_geometry geometry;
	struct knitk_layout layout;
	__u64 huge_bytes;
};

/**
 * struct knitk_api - KNITK_IOC_API, the handshake
 * @api: in: KNITK_API.
 * @features: in: features the caller needs (unknown bits give -EINVAL);
 *	out: every feature supported.
 * @ioctls: out: bit _IOC_NR(cmd) set for every supported ioctl.
 */
struct knitk_api {
	__u64 api;
	__u64 features;
	__u64 ioctls;
};

/**
 * struct knitk_create - KNITK_IOC_CREATE
 * @geometry: in: the knot to make.  Invalid values and non-zero reserved
 *	fields give -EINVAL; a knot larger than the module's max_knot_bytes
 *	parameter gives -E2BIG.  out: the geometry the knot records, the
 *	same but for region_lanes 0 of a stealing knot, resolved to its g.
 * @layout: out: where everything lives.
 *
 * The knot's pages are pinned, so, like io_uring's rings, they are charged
 * to the creating user's locked memory (the locked_vm of its user_struct,
 * shared by all its processes) against the caller's RLIMIT_MEMLOCK, from
 * CREATE until the knot is freed; a caller with CAP_IPC_LOCK is not
 * charged.  Endpoints that ATTACH are not charged.  -ENOMEM when the knot
 * would take the user past RLIMIT_MEMLOCK, or when its memory cannot be
 * allocated (a knot larger than the machine's memory fails at once); the
 * pages also count against the creator's memory cgroup.
 */
struct knitk_create {
	struct knitk_geometry geometry;
	struct knitk_layout layout;
};

/**
 * struct knitk_attach - KNITK_IOC_ATTACH
 * @fd: in: an fd of /dev/knitk attached to the knot to join (-EBADF if not
 *	an open fd, -EINVAL if not a knitk fd, -ENOTCONN if not attached).
 * @flags: in: must be zero.
 * @layout: out: the knot's layout.
 */
struct knitk_attach {
	__s32 fd;
	__u32 flags;
	struct knitk_layout layout;
};

#define KNITK_ROLE_HOST			1
#define KNITK_ROLE_WORKER		2

/**
 * struct knitk_join - KNITK_IOC_JOIN
 * @role: in: KNITK_ROLE_HOST or KNITK_ROLE_WORKER.
 * @worker: in: worker id (< nr_workers) for KNITK_ROLE_WORKER, else zero.
 * @flags: in: must be zero.
 * @generation: out: the role's join generation after this join.
 *
 * A role held by a live endpoint gives -EBUSY; an endpoint joins once.
 * -EFAULT (the argument cannot be read, or cannot be written back) is
 * given before the role is taken.
 *
 * The calling process (its thread group) owns the role.  The role ends
 * when the process has exited, or when one of its threads closes an fd of
 * the endpoint and no file table of the process's threads holds another
 * fd of it (execve() closing an O_CLOEXEC fd counts as a close): a dup()ed
 * fd keeps the role, while fds in other processes (inherited across
 * fork(), or received over SCM_RIGHTS) neither keep it nor end it when
 * closed, and an fd in flight in a socket is in no table.  A thread that
 * unshared its file table counts with the others: closing its copy, or
 * exiting, ends the role only if no other thread of the process keeps an
 * fd.  A process that shares the file table through clone(CLONE_FILES)
 * without being a thread of the owner is another process: its close does
 * not end the role, and the table it keeps does not keep the role past
 * the owner's exit.  A JOIN whose caller closed its last fd of the
 * endpoint before the JOIN completed takes the role and ends it at once
 * (a death like any other), and returns -EBADF.
 */
struct knitk_join {
	__u32 role;
	__u32 worker;
	__u32 flags;
	__u32 generation;
};

#define KNITK_WAIT_FOREVER		(~0ULL)

/* struct knitk_wait.flags and struct knitk_notify_wait.flags */
#define KNITK_WAIT_SPIN			(1U << 0)
#define KNITK_WAIT_FLAGS		(KNITK_WAIT_SPIN)

/**
 * struct knitk_wait - KNITK_IOC_WAIT, sleep on the endpoint's own doorbell
 * @expected: in: the doorbell seq the caller saw before it set its
 *	sleeping flag and re-checked its mailboxes.
 * @flags: in: zero, or KNITK_WAIT_SPIN; other bits give -EINVAL.
 * @deadline_ns: in: absolute CLOCK_MONOTONIC deadline, as the caller's
 *	clock_gettime() reads it (in its time namespace), or
 *	KNITK_WAIT_FOREVER.
 * @reserved: must be zero.
 *
 * Returns 0 when woken (seq moved while asleep), -EAGAIN when seq already
 * differs from @expected, -ETIMEDOUT at the deadline, -EINTR on a signal
 * (restarted instead under SA_RESTART; the deadline is absolute), -EPIPE
 * for a worker whose host has died, -ENOTCONN when not joined or when the
 * endpoint's role has ended, before the wait or while it sleeps (the
 * doorbell then belongs to the role's next joiner, whose wakes a wait of
 * the ended role never takes for its own).
 *
 * With KNITK_WAIT_SPIN the wait, once its seq check passed, first spins
 * in the kernel while the doorbell's *ringer* - the task whose notify last
 * delivered a wake to this doorbell through the idle filter (normally the
 * peer that will ring it next; a kick or a death does not change it) -
 * is running on a CPU that is not preempted, for at most the module's
 * spin_ns parameter.  It sleeps at once when there is no ringer yet, when
 * the ringer is the caller, is not on a CPU, runs on a preempted vCPU or
 * is exiting, and stops spinning when the caller must reschedule or has
 * a signal pending.  The spin ends the wait exactly as a wake would (same
 * returns, same lost-wakeup rules: a notify advances seq while the
 * sleeping flag is set, asleep or spinning).  A wait ended by the spin is
 * counted in spin_wakes, not in waits; one that slept (at once or after
 * spinning) in spin_sleeps and waits.
 */
struct knitk_wait {
	__u32 expected;
	__u32 flags;
	__u64 deadline_ns;
	__u64 reserved;
};

/* struct knitk_notify.flags */
#define KNITK_NOTIFY_KICK		(1U << 0)
#define KNITK_NOTIFY_FLAGS		(KNITK_NOTIFY_KICK)

/**
 * struct knitk_notify - KNITK_IOC_NOTIFY, ring several doorbells
 * @doorbells: in: bit d rings doorbell d (worker d, or KNITK_DOORBELL_HOST);
 *	a bit for a worker beyond nr_workers gives -EINVAL.
 * @woken: out: the doorbells whose seq was advanced and waiter woken.
 * @flags: in: zero, or KNITK_NOTIFY_KICK; other bits give -EINVAL.
 * @reserved: must be zero.
 *
 * A doorbell is rung only if its sleeping flag is set and a mailbox it
 * consumes holds a pending lane; otherwise the notify is suppressed and
 * counted.
 *
 * With KNITK_NOTIFY_KICK every named doorbell is rung regardless of that
 * filter: its seq is advanced and its waiters woken (its sleeping flag is
 * left to its owner), and the kick is counted.  It is meant for an event
 * of the doorbell's own side that no mailbox shows, such as one host
 * thread handing its park over to another or an abort; a wait it ends
 * returns 0 and is not counted as spurious.  Every named doorbell is in
 * @woken.
 *
 * -EFAULT (the argument cannot be read, or cannot be written back) and
 * -EINVAL are given before anything is rung or kicked.
 */
struct knitk_notify {
	__u64 doorbells;
	__u64 woken;
	__u32 flags;
	__u32 reserved;
};

/**
 * struct knitk_notify_wait - KNITK_IOC_NOTIFY_WAIT, ring the peers, then wait
 * @doorbells: in: the doorbells to ring, as for struct knitk_notify (through
 *	the idle filter; there is no kick here).
 * @woken: out: the doorbells whose seq was advanced and waiter woken;
 *	written back on every return once the ring happened.
 * @expected: in: as struct knitk_wait's, for the caller's own doorbell.
 * @flags: in: zero, or KNITK_WAIT_SPIN; other bits give -EINVAL.
 * @deadline_ns: in: as struct knitk_wait's.
 * @reserved: must be zero.
 *
 * One system call for a hop of a round trip: the caller has set its
 * sleeping flag and re-checked its mailboxes (reading @expected first),
 * then published to its peer; the call rings @doorbells as
 * KNITK_IOC_NOTIFY does, but with a synchronous wake (the caller is about
 * to sleep, so the scheduler may run the woken peer on the caller's CPU),
 * then waits on the caller's own doorbell exactly as KNITK_IOC_WAIT with
 * @expected, @flags and @deadline_ns.
 *
 * -EFAULT (the argument cannot be read, or cannot be written back),
 * -EINVAL (bad flags, reserved fields or doorbells) and -ENOTCONN (no
 * role, or an ended one) are given before anything is rung.  After
 * the ring, the returns are those of KNITK_IOC_WAIT, except that a signal
 * always gives -EINTR: the call is never restarted, since its ring is
 * done (a caller continues with KNITK_IOC_WAIT).
 */
struct knitk_notify_wait {
	__u64 doorbells;
	__u64 woken;
	__u32 expected;
	__u32 flags;
	__u64 deadline_ns;
	__u64 reserved[2];
};

/**
 * struct knitk_word_wait - KNITK_IOC_WORD_WAIT, sleep while a word holds a value
 * @offset: in: the byte offset in the knot of a 32-bit word, aligned to 4,
 *	past the control page (layout.control_size) and inside the knot.
 * @expected: in: the value the caller last saw in the word.
 * @flags: must be zero.
 * @deadline_ns: in: as struct knitk_wait's.
 * @reserved: must be zero.
 *
 * What a shared futex does, for a word of the knot, which a shared futex
 * cannot name (the knot's pages belong to no file): the call sleeps while
 * the word holds @expected, until a KNITK_IOC_WORD_WAKE of the same word
 * of the same knot (through any of its endpoints, from any process), the
 * deadline or a signal.  The word is read after the caller is queued,
 * so a waker that stores a new value and then wakes is never missed.
 * Any attached endpoint may wait; no role is needed.
 *
 * Return: 0 when woken (the word may hold any value: re-read it), -EAGAIN
 * when the word did not hold @expected, -ETIMEDOUT at the deadline,
 * -EINTR or a restart on a signal, -EINVAL for a bad offset, flags or
 * reserved field, -ENOTCONN when the endpoint has no knot, -EFAULT when
 * the argument cannot be read.  A wake that reached a waiter is never
 * lost to its timeout or signal: that waiter returns 0.
 */
struct knitk_word_wait {
	__u64 offset;
	__u32 expected;
	__u32 flags;
	__u64 deadline_ns;
	__u64 reserved;
};

/**
 * struct knitk_word_wake - KNITK_IOC_WORD_WAKE, wake the waiters of a word
 * @offset: in: as struct knitk_word_wait's.
 * @nr: in: the most waiters to wake, at least 1; the longest waiting go
 *	first.
 * @flags: must be zero.
 * @woken: out: the waiters woken.
 * @reserved: must be zero.
 *
 * The waker stores the word's new value first, then wakes.  -EINVAL for a
 * bad offset, @nr 0, flags or reserved field; -EFAULT when the argument
 * cannot be read or written back; -ENOTCONN without a knot.
 */
struct knitk_word_wake {
	__u64 offset;
	__u32 nr;
	__u32 flags;
	__u32 woken;
	__u32 reserved;
};

/**
 * struct knitk_doorbell_stats - counters of one doorbell
 * @waits: waits that went to sleep.
 * @wakes: notifies delivered (seq advanced, waiter woken).
 * @suppressed_idle: notifies dropped because no consumed mailbox had work.
 * @suppressed_awake: notifies dropped because the owner was not sleeping.
 * @spurious: waits woken with no pending work and no kick or peer death
 *	(a kick or death in flight when the wait began counts as an event).
 * @timeouts: waits that reached their deadline.
 * @mismatches: waits that returned -EAGAIN without sleeping.
 * @interrupts: waits ended by a signal.
 * @kicks: kicks (KNITK_NOTIFY_KICK) received.
 * @uring_waits: KNITK_URING_CMD_WAIT commands that went to sleep (also
 *	counted in @waits).
 * @spin_wakes: waits (KNITK_WAIT_SPIN) ended during their spin, without
 *	sleeping.
 * @spin_sleeps: KNITK_WAIT_SPIN waits that went to sleep, at once (no
 *	running ringer) or after spinning.
 */
struct knitk_doorbell_stats {
	__u64 waits;
	__u64 wakes;
	__u64 suppressed_idle;
	__u64 suppressed_awake;
	__u64 spurious;
	__u64 timeouts;
	__u64 mismatches;
	__u64 interrupts;
	__u64 kicks;
	__u64 uring_waits;
	__u64 spin_wakes;
	__u64 spin_sleeps;
};

/**
 * struct knitk_stats - KNITK_IOC_STATS
 * @doorbell: in: doorbell index (worker id or KNITK_DOORBELL_HOST).
 * @flags: in: must be zero.
 * @stats: out: the doorbell's counters.
 *
 * The counters grow at their end.  The size encoded in the command is the
 * caller's: the module takes KNITK_IOC_STATS with any size from
 * KNITK_STATS_SIZE_VER0 on (as _IOWR(KNITK_IOC_MAGIC, 0x06, size)), fills
 * the counters it has up to that size and zeroes the rest, so a program
 * built against older or newer headers keeps working.
 */
struct knitk_stats {
	__u32 doorbell;
	__u32 flags;
	struct knitk_doorbell_stats stats;
};

#define KNITK_STATS_SIZE_VER0		80	/* first version: waits..kicks */
#define KNITK_STATS_SIZE_VER1		88	/* + uring_waits */
#define KNITK_STATS_SIZE_VER2		104	/* + spin_wakes, spin_sleeps */

#define KNITK_IOC_MAGIC			0xb7

/**
 * struct knitk_uring_wait - KNITK_URING_CMD_WAIT, the command payload
 * @expected: the doorbell seq the caller saw before it set its sleeping
 *	flag and re-checked its mailboxes, as for KNITK_IOC_WAIT.
 * @doorbell: the caller's own doorbell (its worker id, or
 *	KNITK_DOORBELL_HOST); any other gives -EINVAL.
 * @flags: must be zero: KNITK_WAIT_SPIN is refused here (-EINVAL), since
 *	the wait runs on an io-wq worker whose spinning would only burn a CPU
 *	the submitter is not waiting on.
 * @reserved: must be zero.
 * @deadline_ns: absolute CLOCK_MONOTONIC deadline of the submitting
 *	task's time namespace, or KNITK_WAIT_FOREVER.
 *
 * The 16 bytes of the SQE's command area (struct io_uring_sqe, cmd; with
 * IORING_SETUP_SQE128 the remaining 64 bytes must be zero), submitted as
 * IORING_OP_URING_CMD on a joined endpoint with cmd_op
 * KNITK_URING_CMD_WAIT.  The CQE's res is what KNITK_IOC_WAIT would
 * return: 0 when woken (a delivered notify, a kick or a peer event moved
 * seq), -EAGAIN when seq already differs from @expected, -ETIMEDOUT at the
 * deadline, -EPIPE for a worker whose host died; and -ECANCELED when the
 * wait is cancelled: the ring or the submitting task exits, or the
 * endpoint's role ends (its owner's last close, or its exit) while it
 * sleeps.  -ENOTCONN when the endpoint holds no role, -EINVAL for a bad
 * payload, -ENOTTY for an unknown cmd_op.  A sleeping wait occupies an
 * io_uring async worker (io-wq) until it completes.
 */
struct knitk_uring_wait {
	__u32 expected;
	__u8 doorbell;
	__u8 flags;
	__u16 reserved;
	__u64 deadline_ns;
};

#define KNITK_IOC_API		_IOWR(KNITK_IOC_MAGIC, 0x00, struct knitk_api)
#define KNITK_IOC_CREATE	_IOWR(KNITK_IOC_MAGIC, 0x01, struct knitk_create)
#define KNITK_IOC_ATTACH	_IOWR(KNITK_IOC_MAGIC, 0x02, struct knitk_attach)
#define KNITK_IOC_JOIN		_IOWR(KNITK_IOC_MAGIC, 0x03, struct knitk_join)
#define KNITK_IOC_WAIT		_IOW(KNITK_IOC_MAGIC, 0x04, struct knitk_wait)
#define KNITK_IOC_NOTIFY	_IOWR(KNITK_IOC_MAGIC, 0x05, struct knitk_notify)
#define KNITK_IOC_STATS		_IOWR(KNITK_IOC_MAGIC, 0x06, struct knitk_stats)
#define KNITK_IOC_NOTIFY_WAIT	_IOWR(KNITK_IOC_MAGIC, 0x07, \
				      struct knitk_notify_wait)
#define KNITK_IOC_WORD_WAIT	_IOW(KNITK_IOC_MAGIC, 0x08, struct knitk_word_wait)
#define KNITK_IOC_WORD_WAKE	_IOWR(KNITK_IOC_MAGIC, 0x09, struct knitk_word_wake)

/* cmd_op of IORING_OP_URING_CMD (KNITK_FEATURE_URING_CMD). */
#define KNITK_URING_CMD_WAIT	_IOW(KNITK_IOC_MAGIC, 0x20, struct knitk_uring_wait)

#endif /* _UAPI_LINUX_KNITK_H */
