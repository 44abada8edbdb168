/* SPDX-License-Identifier: LGPL-2.1-or-later OR MIT */
/*
 * The record format of a packed lane (docs/protocol.md L7): a uint16_t
 * length prefix, at least 1, then that many bytes, records back to back
 * in the lane's inline bytes.  The writer's side is here, inline, for
 * knitk_producer_send_packed (lane.c); the reader's checks are packed.c.
 */
#ifndef KNITK_PACKED_H
#define KNITK_PACKED_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "knitk.h"

_Static_assert(KNITK_PACK_PREFIX_BYTES == sizeof(uint16_t),
	       "a record's prefix is one uint16_t");
_Static_assert(KNITK_MAX_INLINE_BYTES <= UINT16_MAX,
	       "a prefix can say the length of any record that fits a lane");

/* Write the record of @len (1..UINT16_MAX) bytes of @data at @dst. */
static inline void knitk__pack_put(char *dst, const void *data, size_t len)
{
	uint16_t prefix = (uint16_t)len;

	memcpy(dst, &prefix, sizeof(prefix));
	dst += sizeof(prefix);
	/* Fixed-size copies for the common small records: no call. */
	switch (len) {
	case 8:
		memcpy(dst, data, 8);
		break;
	case 16:
		memcpy(dst, data, 16);
		break;
	default:
		memcpy(dst, data, len);
		break;
	}
}

/*
 * Whether the @len bytes at @buf are exactly @count records (L7): each
 * prefix and record inside @len, none empty.  Every prefix is read once,
 * checked before anything past it is used.
 */
bool knitk__packed_frames(const char *buf, uint64_t len, uint64_t count);

#endif /* KNITK_PACKED_H */
