// SPDX-License-Identifier: LGPL-2.1-or-later OR MIT
/*
 * Reading the records of a packed lane (docs/protocol.md L7).
 *
 * The lane is in shared memory and its writer is not trusted: every
 * prefix is copied out once and checked against the bytes left before
 * the record it announces is located, so no prefix, however forged (or
 * rewritten under the reader), makes the reader touch a byte outside the
 * lane.  The decode checks the whole lane first (knitk__packed_frames),
 * so a lane that does not frame gives none of its records;
 * knitk_lane_unpack checks each prefix again as it hands the records
 * out, for a writer that rewrites a lane after its publish.
 */
#include <errno.h>

#include "packed.h"

/* The length of the record at @off of @len bytes, or 0 if none fits. */
static inline size_t record_at(const unsigned char *buf, uint64_t len,
			       uint64_t off)
{
	uint16_t prefix;

	if (len - off < KNITK_PACK_PREFIX_BYTES)
		return 0;
	memcpy(&prefix, buf + off, sizeof(prefix));
	if (prefix > len - off - KNITK_PACK_PREFIX_BYTES)
		return 0;
	return prefix;
}

bool knitk__packed_frames(const char *buf, uint64_t len, uint64_t count)
{
	const unsigned char *b = (const unsigned char *)buf;
	uint64_t off = 0, k = 0;
	size_t r;

	/* A record takes 3 bytes at least: no count can pass beyond len / 3. */
	if (!count || count > len / KNITK_PACK_ROOM(1))
		return false;
	while (off < len) {
		r = record_at(b, len, off);
		if (!r || ++k > count)
			return false;
		off += KNITK_PACK_ROOM(r);
	}
	return k == count;
}

KNITK_EXPORT int knitk_lane_unpack(const struct knitk_msg *msg, size_t *pos,
				   struct knitk_record *recs, unsigned int n)
{
	const unsigned char *b;
	uint64_t off, len;
	unsigned int i;
	size_t r;

	if (!msg || !pos || !recs || !n)
		return -EINVAL;
	if (msg->header.kind != KNITK_PAYLOAD_PACKED || !msg->data ||
	    *pos > msg->len)
		return -EINVAL;
	b = msg->data;
	len = msg->len;
	off = *pos;
	for (i = 0; i < n && off < len; i++) {
		r = record_at(b, len, off);
		if (!r) {
			/* Given by the next call, after the good ones. */
			if (!i)
				return -EBADMSG;
			break;
		}
		recs[i].data = b + off + KNITK_PACK_PREFIX_BYTES;
		recs[i].len = r;
		off += KNITK_PACK_ROOM(r);
	}
	*pos = (size_t)off;
	return (int)i;
}
