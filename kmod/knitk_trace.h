/* SPDX-License-Identifier: GPL-2.0 */
/*
 * knitk: tracepoints, system "knitk" (docs/tracing.md).
 *
 * They explain one slow call where the counters only add up: a notify per
 * doorbell with the idle filter's verdict, a wait from begin to end with
 * how it ended, the spin of a KNITK_WAIT_SPIN wait, a role's join and end
 * (a peer's death), a knot's creation and destruction.  Every field that
 * takes work to find (an id behind a pointer, a verdict, a duration) is
 * found in TP_fast_assign, which runs only while the event is enabled.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM knitk

#if !defined(_KNITK_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _KNITK_TRACE_H

#include <linux/ktime.h>
#include <linux/sched.h>
#include <linux/tracepoint.h>

#include "knitk_internal.h"

/* So that the format files name the enums' values, not their numbers. */
TRACE_DEFINE_ENUM(KNITK_RANG_IDLE);
TRACE_DEFINE_ENUM(KNITK_RANG_AWAKE);
TRACE_DEFINE_ENUM(KNITK_RANG_RACED);
TRACE_DEFINE_ENUM(KNITK_RANG_WOKEN);

TRACE_DEFINE_ENUM(KNITK_WAITED_WORK);
TRACE_DEFINE_ENUM(KNITK_WAITED_KICK);
TRACE_DEFINE_ENUM(KNITK_WAITED_DEATH);
TRACE_DEFINE_ENUM(KNITK_WAITED_SPURIOUS);
TRACE_DEFINE_ENUM(KNITK_WAITED_MISMATCH);
TRACE_DEFINE_ENUM(KNITK_WAITED_TIMEOUT);
TRACE_DEFINE_ENUM(KNITK_WAITED_SIGNAL);
TRACE_DEFINE_ENUM(KNITK_WAITED_HOST_DEAD);
TRACE_DEFINE_ENUM(KNITK_WAITED_ENDED);
TRACE_DEFINE_ENUM(KNITK_WAITED_ERROR);

TRACE_DEFINE_ENUM(KNITK_SPIN_WOKEN);
TRACE_DEFINE_ENUM(KNITK_SPIN_OFF);
TRACE_DEFINE_ENUM(KNITK_SPIN_NO_RINGER);
TRACE_DEFINE_ENUM(KNITK_SPIN_RINGER_OFF);
TRACE_DEFINE_ENUM(KNITK_SPIN_RESCHED);
TRACE_DEFINE_ENUM(KNITK_SPIN_SIGNAL);
TRACE_DEFINE_ENUM(KNITK_SPIN_BUDGET);

TRACE_DEFINE_ENUM(KNITK_LEFT_CLOSE);
TRACE_DEFINE_ENUM(KNITK_LEFT_EXIT);
TRACE_DEFINE_ENUM(KNITK_LEFT_EXIT_WATCH);
TRACE_DEFINE_ENUM(KNITK_LEFT_RELEASE);
TRACE_DEFINE_ENUM(KNITK_LEFT_NO_FD);
TRACE_DEFINE_ENUM(KNITK_LEFT_MM);

#define knitk_show_role(d)	((d) == KNITK_DOORBELL_HOST ? "host" : "worker")

TRACE_EVENT(knitk_knot_create,
	    TP_PROTO(const struct knitk_knot *knot),
	    TP_ARGS(knot),
	    TP_STRUCT__entry(__field(u64, knot)
			     __field(u64, size)
			     __field(u32, workers)
			     __field(u32, submitters)
			     __field(u32, steal)
	    ),
	    TP_fast_assign(__entry->knot = knot->id;
			   __entry->size = knot->layout.size;
			   __entry->workers = knot->geometry.nr_workers;
			   __entry->submitters = knot->geometry.nr_submitters;
			   __entry->steal = !!(knot->geometry.flags &
					       KNITK_GEOM_STEAL);
	    ),
	    TP_printk("knot=%llu size=%llu workers=%u submitters=%u steal=%u",
		      __entry->knot, __entry->size, __entry->workers,
		      __entry->submitters, __entry->steal)
);

TRACE_EVENT(knitk_knot_destroy,
	    TP_PROTO(const struct knitk_knot *knot),
	    TP_ARGS(knot),
	    TP_STRUCT__entry(__field(u64, knot)
			     __field(u64, size)
	    ),
	    TP_fast_assign(__entry->knot = knot->id;
			   __entry->size = knot->layout.size;
	    ),
	    TP_printk("knot=%llu size=%llu", __entry->knot, __entry->size)
);

TRACE_EVENT(knitk_role_join,
	    TP_PROTO(const struct knitk_knot *knot, unsigned int slot,
		     u32 generation),
	    TP_ARGS(knot, slot, generation),
	    TP_STRUCT__entry(__field(u64, knot)
			     __field(u32, doorbell)
			     __field(u32, generation)
			     __field(pid_t, pid)
	    ),
	    TP_fast_assign(__entry->knot = knot->id;
			   __entry->doorbell = slot;
			   __entry->generation = generation;
			   __entry->pid = task_tgid_nr(current);
	    ),
	    TP_printk("knot=%llu role=%s doorbell=%u generation=%u pid=%d",
		      __entry->knot, knitk_show_role(__entry->doorbell),
		      __entry->doorbell, __entry->generation, __entry->pid)
);

/*
 * A role ended: the kernel saw its owner die or leave.  kicks: the
 * doorbells the death advances next (the host's for a worker, every
 * worker's for the host); exit_code: the owner's while it exits (the
 * signal that killed it in the low bits); delay_ns: from the exit's wake
 * to this notice, for exit_watch only.
 */
TRACE_EVENT(knitk_role_end,
	    TP_PROTO(const struct knitk_knot *knot, const struct knitk_role *r,
		     enum knitk_left why),
	    TP_ARGS(knot, r, why),
	    TP_STRUCT__entry(__field(u64, knot)
			     __field(u64, kicks)
			     __field(u64, delay_ns)
			     __field(u32, doorbell)
			     __field(u32, generation)
			     __field(u32, death_seq)
			     __field(pid_t, pid)
			     __field(int, exit_code)
			     __field(int, why)
	    ),
	    TP_fast_assign(bool exiting = current->flags & PF_EXITING;

			   __entry->knot = knot->id;
			   __entry->kicks = knitk_role_kicks(&knot->geometry,
							     r->slot);
			   __entry->delay_ns = why == KNITK_LEFT_EXIT_WATCH &&
					       r->exit_ns ?
					       ktime_get_ns() - r->exit_ns : 0;
			   __entry->doorbell = r->slot;
			   __entry->generation =
				READ_ONCE(knot->control->generation[r->slot]);
			   __entry->death_seq =
				READ_ONCE(knot->control->death_seq);
			   __entry->pid = pid_nr(r->owner);
			   __entry->exit_code = exiting ?
						current->exit_code : 0;
			   __entry->why = why == KNITK_LEFT_CLOSE && exiting ?
					  KNITK_LEFT_EXIT : why;
	    ),
	    TP_printk("knot=%llu role=%s doorbell=%u generation=%u pid=%d why=%s exit_code=%#x delay_ns=%llu death_seq=%u kicks=%#llx",
		      __entry->knot, knitk_show_role(__entry->doorbell),
		      __entry->doorbell, __entry->generation, __entry->pid,
		      __print_symbolic(__entry->why,
				       { KNITK_LEFT_CLOSE, "close" },
				       { KNITK_LEFT_EXIT, "exit" },
				       { KNITK_LEFT_EXIT_WATCH, "exit_watch" },
				       { KNITK_LEFT_RELEASE, "release" },
				       { KNITK_LEFT_NO_FD, "no_fd" },
				       { KNITK_LEFT_MM, "mm" }),
		      __entry->exit_code, __entry->delay_ns,
		      __entry->death_seq, __entry->kicks)
);

/*
 * One doorbell of a notify through the idle filter.  seq and sleeping:
 * the doorbell's words as the filter read them.
 */
TRACE_EVENT(knitk_notify,
	    TP_PROTO(const struct knitk_knot *knot, unsigned int d,
		     enum knitk_verdict v, u32 seq, u32 sleeping,
		     bool advanced),
	    TP_ARGS(knot, d, v, seq, sleeping, advanced),
	    TP_STRUCT__entry(__field(u64, knot)
			     __field(u32, doorbell)
			     __field(u32, seq)
			     __field(u32, sleeping)
			     __field(int, result)
	    ),
	    TP_fast_assign(__entry->knot = knot->id;
			   __entry->doorbell = d;
			   __entry->seq = seq;
			   __entry->sleeping = sleeping;
			   __entry->result = knitk_notify_rang(v, advanced);
	    ),
	    TP_printk("knot=%llu doorbell=%u result=%s seq=%u sleeping=%#x",
		      __entry->knot, __entry->doorbell,
		      __print_symbolic(__entry->result,
				       { KNITK_RANG_IDLE, "idle" },
				       { KNITK_RANG_AWAKE, "awake" },
				       { KNITK_RANG_RACED, "raced" },
				       { KNITK_RANG_WOKEN, "woken" }),
		      __entry->seq, __entry->sleeping)
);

/* One doorbell rung with KNITK_NOTIFY_KICK, past the filter. */
TRACE_EVENT(knitk_kick,
	    TP_PROTO(const struct knitk_knot *knot, unsigned int d),
	    TP_ARGS(knot, d),
	    TP_STRUCT__entry(__field(u64, knot)
			     __field(u32, doorbell)
			     __field(u32, seq)
	    ),
	    TP_fast_assign(__entry->knot = knot->id;
			   __entry->doorbell = d;
			   __entry->seq = knitk_bell_seq(knot, d);
	    ),
	    TP_printk("knot=%llu doorbell=%u seq=%u",
		      __entry->knot, __entry->doorbell, __entry->seq)
);

/* A whole notify, after its doorbells (sync: a KNITK_IOC_NOTIFY_WAIT's). */
TRACE_EVENT(knitk_ring,
	    TP_PROTO(const struct knitk_knot *knot, u64 asked, u64 woken,
		     u32 flags, bool sync),
	    TP_ARGS(knot, asked, woken, flags, sync),
	    TP_STRUCT__entry(__field(u64, knot)
			     __field(u64, asked)
			     __field(u64, woken)
			     __field(u32, kick)
			     __field(u32, sync)
	    ),
	    TP_fast_assign(__entry->knot = knot->id;
			   __entry->asked = asked;
			   __entry->woken = woken;
			   __entry->kick = !!(flags & KNITK_NOTIFY_KICK);
			   __entry->sync = sync;
	    ),
	    TP_printk("knot=%llu asked=%#llx woken=%#llx kick=%u sync=%u",
		      __entry->knot, __entry->asked, __entry->woken,
		      __entry->kick, __entry->sync)
);

/* seq: the doorbell's seq at the start, to compare with expected. */
TRACE_EVENT(knitk_wait_begin,
	    TP_PROTO(const struct knitk_knot *knot, unsigned int d,
		     u32 expected, u32 flags, u64 deadline_ns, bool uring),
	    TP_ARGS(knot, d, expected, flags, deadline_ns, uring),
	    TP_STRUCT__entry(__field(u64, knot)
			     __field(u64, deadline_ns)
			     __field(u32, doorbell)
			     __field(u32, expected)
			     __field(u32, seq)
			     __field(u32, spin)
			     __field(u32, uring)
	    ),
	    TP_fast_assign(__entry->knot = knot->id;
			   __entry->deadline_ns = deadline_ns;
			   __entry->doorbell = d;
			   __entry->expected = expected;
			   __entry->seq = knitk_bell_seq(knot, d);
			   __entry->spin = !!(flags & KNITK_WAIT_SPIN);
			   __entry->uring = uring;
	    ),
	    TP_printk("knot=%llu doorbell=%u expected=%u seq=%u spin=%u uring=%u deadline_ns=%llu",
		      __entry->knot, __entry->doorbell, __entry->expected,
		      __entry->seq, __entry->spin, __entry->uring,
		      __entry->deadline_ns)
);

/* The spin of a KNITK_WAIT_SPIN wait, before it sleeps (if it does). */
TRACE_EVENT(knitk_spin,
	    TP_PROTO(const struct knitk_knot *knot, unsigned int d,
		     u64 start_ns, enum knitk_spin_end end),
	    TP_ARGS(knot, d, start_ns, end),
	    TP_STRUCT__entry(__field(u64, knot)
			     __field(u64, spin_ns)
			     __field(u32, doorbell)
			     __field(int, end)
	    ),
	    TP_fast_assign(__entry->knot = knot->id;
			   __entry->spin_ns = ktime_get_ns() - start_ns;
			   __entry->doorbell = d;
			   __entry->end = end;
	    ),
	    TP_printk("knot=%llu doorbell=%u end=%s spin_ns=%llu",
		      __entry->knot, __entry->doorbell,
		      __print_symbolic(__entry->end,
				       { KNITK_SPIN_WOKEN, "woken" },
				       { KNITK_SPIN_OFF, "off" },
				       { KNITK_SPIN_NO_RINGER, "no_ringer" },
				       { KNITK_SPIN_RINGER_OFF, "ringer_off" },
				       { KNITK_SPIN_RESCHED, "resched" },
				       { KNITK_SPIN_SIGNAL, "signal" },
				       { KNITK_SPIN_BUDGET, "budget" }),
		      __entry->spin_ns)
);

/*
 * ns: the wait's length, 0 when the event was enabled after it began.
 * A death is told from a kick by the knot's death_seq, which moved.
 */
TRACE_EVENT(knitk_wait_end,
	    TP_PROTO(const struct knitk_knot *knot, unsigned int d, int ret,
		     const struct knitk_wait_seen *seen),
	    TP_ARGS(knot, d, ret, seen),
	    TP_STRUCT__entry(__field(u64, knot)
			     __field(u64, ns)
			     __field(u32, doorbell)
			     __field(u32, seq)
			     __field(int, ret)
			     __field(int, outcome)
	    ),
	    TP_fast_assign(u32 deaths = READ_ONCE(knot->control->death_seq);

			   __entry->knot = knot->id;
			   __entry->ns = seen->start_ns ?
					 ktime_get_ns() - seen->start_ns : 0;
			   __entry->doorbell = d;
			   __entry->seq = knitk_bell_seq(knot, d);
			   __entry->ret = ret;
			   __entry->outcome = knitk_wait_outcome(ret, seen,
								 deaths);
	    ),
	    TP_printk("knot=%llu doorbell=%u outcome=%s ret=%d seq=%u ns=%llu",
		      __entry->knot, __entry->doorbell,
		      __print_symbolic(__entry->outcome,
				       { KNITK_WAITED_WORK, "work" },
				       { KNITK_WAITED_KICK, "kick" },
				       { KNITK_WAITED_DEATH, "death" },
				       { KNITK_WAITED_SPURIOUS, "spurious" },
				       { KNITK_WAITED_MISMATCH, "mismatch" },
				       { KNITK_WAITED_TIMEOUT, "timeout" },
				       { KNITK_WAITED_SIGNAL, "signal" },
				       { KNITK_WAITED_HOST_DEAD, "host_dead" },
				       { KNITK_WAITED_ENDED, "ended" },
				       { KNITK_WAITED_ERROR, "error" }),
		      __entry->ret, __entry->seq, __entry->ns)
);

#endif /* _KNITK_TRACE_H */

/* knitk_trace.c is built with -I<this directory> (kmod/Kbuild). */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE knitk_trace
#include <trace/define_trace.h>
