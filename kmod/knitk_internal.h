/* SPDX-License-Identifier: GPL-2.0 */
/*
 * knitk: internal declarations shared by the files of the module.
 *
 * The uapi header <linux/knitk.h> is the contract with userspace; this file
 * only declares the kernel's own objects: the knot, its doorbell state and
 * the pure helpers that the KUnit suites exercise.
 */
#ifndef _KNITK_INTERNAL_H
#define _KNITK_INTERNAL_H

#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/knitk.h>

struct dentry;
struct file;
struct page;
struct pid;
struct poll_table_struct;
struct task_struct;
struct user_struct;
struct vm_area_struct;

/* Every doorbell a role can own: workers 0..KNITK_MAX_WORKERS-1 and host. */
#define KNITK_SLOT_HOST		KNITK_DOORBELL_HOST
#define KNITK_NO_SLOT		(-1)

/*
 * The counters of a doorbell that KNITK_IOC_STATS reports, in the field
 * order of struct knitk_doorbell_stats (the debugfs columns' order too).
 * knitk_bell_fields[] gives each its field; init, the stats copy and
 * debugfs loop over them.
 */
enum knitk_bell_counter {
	KNITK_BELL_WAITS,
	KNITK_BELL_WAKES,
	KNITK_BELL_SUPPRESSED_IDLE,
	KNITK_BELL_SUPPRESSED_AWAKE,
	KNITK_BELL_SPURIOUS,
	KNITK_BELL_TIMEOUTS,
	KNITK_BELL_MISMATCHES,
	KNITK_BELL_INTERRUPTS,
	KNITK_BELL_KICKS,
	KNITK_BELL_URING_WAITS,
	KNITK_BELL_SPIN_WAKES,
	KNITK_BELL_SPIN_SLEEPS,
	KNITK_NR_BELL_COUNTERS
};

/**
 * struct knitk_bell_field - where a counter goes in the uapi stats
 * @name: the field's name, the counter's debugfs column.
 * @offset: the field's offset in struct knitk_doorbell_stats.
 */
struct knitk_bell_field {
	const char *name;
	size_t offset;
};

extern const struct knitk_bell_field knitk_bell_fields[KNITK_NR_BELL_COUNTERS];

/**
 * struct knitk_bell - the kernel-side half of one doorbell
 * @wq: sleepers of KNITK_IOC_WAIT on this doorbell.
 * @counters: the counters reported by KNITK_IOC_STATS, indexed by enum
 *	knitk_bell_counter; kept in kernel memory so userspace cannot forge
 *	them.
 * @events_begun: kicks and deaths (knitk_doorbell_kick()) that began:
 *	incremented before their seq advance.
 * @events_done: those that ended: incremented after it.  A wait takes
 *	@events_done before its seq check and compares @events_begun once
 *	woken, so an event in flight when it began is not a spurious wake.
 * @ringer_lock: protects @ringer against its replacement while a spinning
 *	wait takes a reference to it.
 * @ringer: the task whose notify last advanced this doorbell's seq, with
 *	a reference held, or NULL: the peer a KNITK_WAIT_SPIN wait watches.
 */
struct knitk_bell {
	wait_queue_head_t wq;
	atomic64_t counters[KNITK_NR_BELL_COUNTERS];
	atomic_t events_begun;
	atomic_t events_done;
	spinlock_t ringer_lock; /* ringer */
	struct task_struct *ringer;
	u64 spin_budget;	/* the owner's, see knitk_spin_adapt() */
};

static inline void knitk_bell_count(struct knitk_bell *bell,
				    enum knitk_bell_counter c)
{
	atomic64_inc(&bell->counters[c]);
}

/**
 * struct knitk_knot - one shared region and everything the kernel keeps on it
 * @ref: one reference per attached endpoint (mappings hold their file).
 * @lock: serialises join and release (live/dead/generation/death_seq/
 *	death_done).
 * @id: number for debugfs, unique while the module is loaded.
 * @geometry: the geometry the knot was created from (kernel copy).
 * @layout: the knot's layout (kernel copy; never read back from the page).
 * @pages: the knot's pages, charged to the creator's memcg.
 * @nr_pages: number of @pages.
 * @base: kernel mapping (vmap) of @pages.
 * @control: the control page, at @base.
 * @debugfs: the knot's debugfs file, or an error pointer.
 * @bells: the kernel half of each doorbell.
 * @user: the creator, whose locked_vm is charged @nr_pages; NULL when the
 *	creator had CAP_IPC_LOCK.
 * @pollers: woken on a death; every attached endpoint's poll state is
 *	chained to it (knitk_poll.c).
 */
/* The wait queues of a knot's word waiters, hashed by offset. */
#define KNITK_WORD_QUEUE_BITS	4
#define KNITK_WORD_QUEUES	BIT(KNITK_WORD_QUEUE_BITS)

struct knitk_knot {
	struct kref ref;
	struct mutex lock; /* live/dead/generation/death_seq/death_done */
	u64 id;
	struct knitk_geometry geometry;
	struct knitk_layout layout;
	struct page **pages;
	unsigned long nr_pages;
	void *base;
	struct knitk_control *control;
	struct dentry *debugfs;
	struct knitk_bell bells[KNITK_NR_DOORBELLS];
	struct user_struct *user;
	wait_queue_head_t pollers;
	wait_queue_head_t words[KNITK_WORD_QUEUES];
	pid_t pids[KNITK_ROLE_SLOTS]; /* last joiner's tgid per slot, @lock */
};

/**
 * struct knitk_poller - the poll state of one endpoint
 * @wq: what poll() registers on, always; epoll registers only once.
 * @bell: chained to the wait queue of the doorbell the endpoint watches.
 * @events: chained to the knot's @pollers.
 * @bell_wq: where @bell is queued, or NULL.
 * @events_wq: where @events is queued, or NULL.
 */
struct knitk_poller {
	wait_queue_head_t wq;
	struct wait_queue_entry bell;
	struct wait_queue_entry events;
	wait_queue_head_t *bell_wq;
	wait_queue_head_t *events_wq;
};

/**
 * struct knitk_role - the role an endpoint joined and the process owning it
 * @knot: the endpoint's knot once joined, else NULL; published with a
 *	release store after the fields below.
 * @slot: the joined slot or KNITK_NO_SLOT; set once under knot->lock.
 * @ended: the role was marked dead; set once under knot->lock.
 * @owner: the joining thread group (a reference to its struct pid).
 * @exit_wait: entry on @owner's wait_pidfd, woken when the group exits.
 * @exit_work: ends the role after that wake, which runs in atomic context.
 * @exit_ns: when that wake came, if knitk_role_end was traced then, else 0.
 */
struct knitk_role {
	struct knitk_knot *knot;
	int slot;
	bool ended;
	struct pid *owner;
	struct wait_queue_entry exit_wait;
	struct work_struct exit_work;
	u64 exit_ns;
	struct knitk_mm_watch *mm_watch;	/* knitk_mm.c, or NULL */
	struct list_head mm_node;		/* in mm_watch->roles */
	void (*mm_gone)(struct knitk_role *r);	/* its owner's mm went */
};

/*
 * knitk_mm.c: the owner's mm, for the earliest sign of its death; @gone
 * is called, under the watch's lock, when it comes.
 */
void knitk_mm_watch_add(struct knitk_role *r, void (*gone)(struct knitk_role *r));
void knitk_mm_watch_remove(struct knitk_role *r);
void knitk_mm_watch_exit(void);

/* knitk_layout.c: geometry validation and layout math, pure. */
int knitk_geometry_check(const struct knitk_geometry *g);
u32 knitk_geometry_region_lanes(const struct knitk_geometry *g);
void knitk_layout_compute(const struct knitk_geometry *g,
			  struct knitk_layout *l);
int knitk_layout_check_size(const struct knitk_layout *l, u64 max_bytes);

/* knitk_knot.c: knot memory, mmap, reference counting. */
/* A huge chunk of a knot's memory: the pages a PMD entry maps. */
#define KNITK_CHUNK_ORDER	(PMD_SHIFT - PAGE_SHIFT)
#define KNITK_CHUNK_PAGES	BIT(KNITK_CHUNK_ORDER)

/* The huge_chunks module parameter (knitk_knot.c). */
extern bool knitk_huge_chunks;

struct knitk_knot *knitk_knot_create(const struct knitk_geometry *g,
				     const struct knitk_layout *l);
void knitk_knot_get(struct knitk_knot *knot);
void knitk_knot_put(struct knitk_knot *knot);
int knitk_knot_mmap(struct knitk_knot *knot, struct vm_area_struct *vma);
void knitk_knot_debugfs_init(void);
void knitk_knot_debugfs_exit(void);

/* knitk_doorbell.c: the idle filter, wait/notify and statistics. */
enum knitk_verdict {
	KNITK_NOTIFY_IDLE,	/* nothing pending: suppressed_idle */
	KNITK_NOTIFY_AWAKE,	/* owner not sleeping: suppressed_awake */
	KNITK_NOTIFY_DELIVER,	/* advance seq and wake */
};

/*
 * What the tracepoints (knitk_trace.h) report.  Each is decided by a pure
 * helper from what the code path already knows, and only inside
 * TP_fast_assign, so the decision costs nothing while tracing is off.
 */

/* What one notify did to one doorbell (knitk_notify). */
enum knitk_rang {
	KNITK_RANG_IDLE,	/* suppressed: nothing pending */
	KNITK_RANG_AWAKE,	/* suppressed: the owner was not asleep */
	/* suppressed_awake too: the owner woke, or another notify won. */
	KNITK_RANG_RACED,
	KNITK_RANG_WOKEN,	/* seq advanced, waiters woken */
};

/* How a wait ended (knitk_wait_end). */
enum knitk_waited {
	KNITK_WAITED_WORK,	/* woken, and work is pending */
	KNITK_WAITED_KICK,	/* woken by a kick, nothing pending */
	KNITK_WAITED_DEATH,	/* woken by a peer's death */
	KNITK_WAITED_SPURIOUS,	/* woken for nothing (counted spurious) */
	KNITK_WAITED_MISMATCH,	/* -EAGAIN: seq had moved already */
	KNITK_WAITED_TIMEOUT,	/* -ETIMEDOUT */
	KNITK_WAITED_SIGNAL,	/* -ERESTARTSYS */
	KNITK_WAITED_HOST_DEAD,	/* -EPIPE: a worker's host died */
	KNITK_WAITED_ENDED,	/* -ENOTCONN: the waiter's own role ended */
	KNITK_WAITED_ERROR,	/* anything else */
};

/* Why a KNITK_WAIT_SPIN spin stopped (knitk_spin). */
enum knitk_spin_end {
	KNITK_SPIN_GO,		/* not stopped: spin on */
	KNITK_SPIN_WOKEN,	/* the wait is done: seq moved, or a death */
	KNITK_SPIN_OFF,		/* no budget (S8) or the deadline has passed */
	KNITK_SPIN_NO_RINGER,	/* nobody rang this doorbell yet */
	KNITK_SPIN_RINGER_OFF,	/* the ringer is not on a CPU, or exits */
	KNITK_SPIN_RESCHED,	/* the spinner must give up its CPU */
	KNITK_SPIN_SIGNAL,	/* a signal is pending */
	KNITK_SPIN_BUDGET,	/* spin_ns or the deadline is reached */
};

/* Which path ended a role (knitk_role_end). */
enum knitk_left {
	KNITK_LEFT_CLOSE,	/* the owner closed its last fd */
	KNITK_LEFT_EXIT,	/* the same close, by the owner's exit */
	KNITK_LEFT_EXIT_WATCH,	/* the owner's exit, seen through its pid */
	KNITK_LEFT_RELEASE,	/* the endpoint's file was released */
	KNITK_LEFT_NO_FD,	/* the owner held no fd by the end of JOIN */
	KNITK_LEFT_MM,		/* the owner's exit tore down its mm */
};

/**
 * struct knitk_wait_seen - what one wait learnt, for knitk_wait_end
 * @start_ns: when it began, or 0 when knitk_wait_end was off then.
 * @death_seq: the knot's death_seq then (valid when @start_ns is).
 * @pending: after a wake, a consumed mailbox held work.
 * @event: after a wake, a kick or a death had begun since the seq check.
 */
struct knitk_wait_seen {
	u64 start_ns;
	u32 death_seq;
	bool pending;
	bool event;
};

enum knitk_rang knitk_notify_rang(enum knitk_verdict v, bool advanced);
enum knitk_waited knitk_wait_outcome(int ret, const struct knitk_wait_seen *s,
				     u32 death_seq);
u64 knitk_role_kicks(const struct knitk_geometry *g, unsigned int slot);

bool knitk_doorbell_valid(const struct knitk_geometry *g, unsigned int d);
bool knitk_doorbell_pending(const void *base, const struct knitk_geometry *g,
			    const struct knitk_layout *l, unsigned int d);
enum knitk_verdict knitk_notify_verdict(bool pending, u32 sleeping);
bool knitk_wait_spurious(bool pending, u32 events_begun, u32 events_done);
bool knitk_spin_peer_running(struct task_struct *peer);
u64 knitk_spin_adapt(u64 budget, u64 cap, bool spun, bool woken, u64 waited_ns);
void knitk_bell_init(struct knitk_bell *bell);
struct knitk_doorbell *knitk_doorbell_shared(const struct knitk_knot *knot,
					     unsigned int d);
u32 knitk_bell_seq(const struct knitk_knot *knot, unsigned int d);
void knitk_bell_destroy(struct knitk_bell *bell);
void knitk_doorbell_kick(struct knitk_knot *knot, unsigned int d);
int knitk_doorbell_notify(struct knitk_knot *knot, u64 doorbells, u32 flags,
			  bool sync, u64 *woken);
u64 knitk_deadline_on_host(u64 deadline_ns, s64 offset_ns);
u64 knitk_caller_deadline(u64 deadline_ns);
bool knitk_deadline_timer(struct hrtimer_sleeper *timer, u64 deadline_ns);
int knitk_sleep_ended(const struct hrtimer_sleeper *timer, bool timed);
void knitk_deadline_timer_end(struct hrtimer_sleeper *timer);
int knitk_doorbell_wait(struct knitk_knot *knot, unsigned int d,
			const struct knitk_role *r, u32 expected,
			u32 flags, u64 deadline_ns, bool uring);
int knitk_doorbell_notify_wait(struct knitk_knot *knot, unsigned int d,
			       const struct knitk_role *r, u64 doorbells,
			       u32 expected, u32 flags, u64 deadline_ns,
			       u64 *woken);
void knitk_doorbell_stats(struct knitk_knot *knot, unsigned int d,
			  struct knitk_doorbell_stats *st);

/* knitk_word.c: KNITK_IOC_WORD_WAIT and KNITK_IOC_WORD_WAKE. */
void knitk_words_init(struct knitk_knot *knot);
bool knitk_word_valid(const struct knitk_layout *l, u64 offset);
int knitk_word_wait(struct knitk_knot *knot, const struct knitk_word_wait *ww);
int knitk_word_wake(struct knitk_knot *knot, struct knitk_word_wake *wk);

/* knitk_uring.c: IORING_OP_URING_CMD on an endpoint. */
struct io_uring_cmd;
int knitk_uring_cmd(struct io_uring_cmd *cmd, unsigned int issue_flags);

/* knitk_main.c: an endpoint file's knot (NULL if none) and role. */
struct knitk_knot *knitk_file_knot(struct file *file, struct knitk_role **r);

/* knitk_poll.c: poll() of an endpoint and its wakes. */
void knitk_poller_init(struct knitk_poller *p);
void knitk_poller_watch(struct knitk_poller *p, struct knitk_knot *knot,
			unsigned int d);
void knitk_poller_wake(struct knitk_poller *p);
void knitk_poller_release(struct knitk_poller *p);
void knitk_poller_register(struct knitk_poller *p, struct file *file,
			   struct poll_table_struct *pt);
__poll_t knitk_poll_mask(struct knitk_knot *knot, unsigned int d);
void knitk_knot_wake_pollers(struct knitk_knot *knot);
bool knitk_poll_role_ended(const struct knitk_role *r);

/* knitk_peer.c: roles, join and death bookkeeping. */
int knitk_peer_slot(const struct knitk_geometry *g, u32 role, u32 worker);
int knitk_peer_join(struct knitk_control *ctl, unsigned int slot,
		    u32 *generation);
void knitk_peer_leave(struct knitk_control *ctl, unsigned int slot);

/**
 * knitk_peer_host_dead() - has the host joined and since been released?
 * @ctl: the control page
 *
 * The dead bit is cleared when a new host joins.
 */
static inline bool knitk_peer_host_dead(const struct knitk_control *ctl)
{
	return READ_ONCE(ctl->dead) & BIT_ULL(KNITK_SLOT_HOST);
}

/**
 * knitk_peer_death_seq() - the current peer-death sequence
 * @ctl: the control page
 */
static inline u32 knitk_peer_death_seq(const struct knitk_control *ctl)
{
	return READ_ONCE(ctl->death_seq);
}

int knitk_peer_take(struct knitk_control *ctl, struct knitk_role *r,
		    unsigned int slot, u32 *generation);
bool knitk_peer_end(struct knitk_control *ctl, struct knitk_role *r);
void knitk_role_init(struct knitk_role *r);
int knitk_role_join(struct knitk_role *r, struct knitk_knot *knot,
		    struct file *file, unsigned int slot, u32 *generation);
void knitk_role_end(struct knitk_role *r, enum knitk_left why);
void knitk_role_flush(struct knitk_role *r, struct file *file, fl_owner_t id);
void knitk_role_release(struct knitk_role *r);

/* knitk_hooks.c: the kselftests' fault injection (KNITK_TEST_HOOKS=y). */
#ifdef KNITK_TEST_HOOKS
void knitk_hooks_init(struct dentry *root);
void knitk_hook_kick(unsigned int d);
void knitk_hook_spin(unsigned int d);
void knitk_hook_counters(struct knitk_knot *knot);
#else
static inline void knitk_hooks_init(struct dentry *root) { }
static inline void knitk_hook_kick(unsigned int d) { }
static inline void knitk_hook_spin(unsigned int d) { }
static inline void knitk_hook_counters(struct knitk_knot *knot) { }
#endif

#endif /* _KNITK_INTERNAL_H */
