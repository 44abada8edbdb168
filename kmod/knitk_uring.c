// SPDX-License-Identifier: GPL-2.0
/*
 * knitk: IORING_OP_URING_CMD on an endpoint - KNITK_URING_CMD_WAIT, the
 * doorbell wait of KNITK_IOC_WAIT for io_uring loops (the uapi's struct
 * knitk_uring_wait is the contract).
 *
 * 6.1 gives a driver no way to learn that io_uring wants a command it
 * holds cancelled, so a wait never parks the command on the doorbell's
 * queue, where a ring exit would wait for it forever.  Issued inline
 * (IO_URING_F_NONBLOCK) the command is only validated, then handed back
 * with -EAGAIN: io_uring copies it and issues it again from one of its
 * io-wq workers, where it sleeps in knitk_doorbell_wait() like the ioctl.
 * io_uring does cancel io-wq work: when the ring exits or its task exits
 * it wakes the worker with a notify signal, which ends the sleep, and the
 * command completes -ECANCELED.  The payload is validated on each issue:
 * the first reads the SQ ring, which userspace may still change.
 */
#ifdef KNITK_HAVE_IO_URING_CMD_H
#include <linux/io_uring/cmd.h>
#else
#include <linux/io_uring.h>
#endif
#include <linux/string.h>

#include "knitk_internal.h"

/* The payload's room in a 64-byte SQE; SQE128 adds 64 reserved bytes. */
#define KNITK_URING_PDU		16
#define KNITK_URING_PDU128	80

static_assert(sizeof(struct knitk_uring_wait) == KNITK_URING_PDU);

/* Complete a command the caller returns -EIOCBQUEUED for. */
static void knitk_uring_done(struct io_uring_cmd *cmd, int ret,
			     unsigned int issue_flags)
{
#ifdef KNITK_URING_DONE_FLAGS
	io_uring_cmd_done(cmd, ret, 0, issue_flags);
#else
	io_uring_cmd_done(cmd, ret, 0);
#endif
}

/* Copy and check the payload; the slot is the caller's own doorbell. */
static int knitk_uring_payload(struct io_uring_cmd *cmd,
			       unsigned int issue_flags, int slot,
			       struct knitk_uring_wait *w)
{
	const u8 *tail = (const u8 *)cmd->cmd + KNITK_URING_PDU;
	unsigned int i;

	memcpy(w, cmd->cmd, sizeof(*w));
	if (w->flags || w->reserved || w->doorbell != slot)
		return -EINVAL;
	if (issue_flags & IO_URING_F_SQE128)
		for (i = 0; i < KNITK_URING_PDU128 - KNITK_URING_PDU; i++)
			if (READ_ONCE(tail[i]))
				return -EINVAL;
	return 0;
}

/**
 * knitk_uring_cmd() - IORING_OP_URING_CMD on an endpoint
 * @cmd: the command
 * @issue_flags: io_uring's IO_URING_F_* flags of this issue
 *
 * Return: the command's result, -EAGAIN to be issued again from io-wq,
 * or -EIOCBQUEUED once its result has been posted.
 */
int knitk_uring_cmd(struct io_uring_cmd *cmd, unsigned int issue_flags)
{
	struct knitk_uring_wait w;
	struct knitk_knot *knot;
	struct knitk_role *r;
	int slot, ret;

	if (cmd->cmd_op != KNITK_URING_CMD_WAIT) {
		/* Our command of another size is a bad payload. */
		if (_IOC_TYPE(cmd->cmd_op) == KNITK_IOC_MAGIC &&
		    _IOC_NR(cmd->cmd_op) == _IOC_NR(KNITK_URING_CMD_WAIT))
			return -EINVAL;
		return -ENOTTY;
	}
	/* The command holds the file, and the file its knot. */
	knot = knitk_file_knot(cmd->file, &r);
	if (!knot)
		return -ENOTCONN;
	slot = READ_ONCE(r->slot);
	if (slot == KNITK_NO_SLOT || READ_ONCE(r->ended))
		return -ENOTCONN;
	ret = knitk_uring_payload(cmd, issue_flags, slot, &w);
	if (ret)
		return ret;
	/* Sleep only in an io-wq worker, which io_uring can cancel. */
	if (issue_flags & IO_URING_F_NONBLOCK)
		return -EAGAIN;
	ret = knitk_doorbell_wait(knot, slot, r, w.expected, 0, w.deadline_ns,
				  true);
	switch (ret) {
	case -EAGAIN:
		/* Returned, it would make io-wq issue the command again. */
		knitk_uring_done(cmd, ret, issue_flags);
		return -EIOCBQUEUED;
	case -ERESTARTSYS:
	case -ENOTCONN:
		/* io-wq's cancel, or the role ended while the wait slept. */
		return -ECANCELED;
	default:
		return ret;
	}
}
