/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every byte of a knot's mailboxes, written through one endpoint and read
 * through another: a pattern that differs per byte, per 4 KiB page and
 * per round (@salt), so a page mapped twice or at the wrong offset shows.
 * Plain C: the host tests and the guest's library tests include it.
 */
#ifndef KNITK_KNOT_BYTES_H
#define KNITK_KNOT_BYTES_H

#include <stddef.h>
#include <knitk.h>

/* The bytes from mailbox 0 to the end (*@len of them), or NULL. */
static inline unsigned char *knot_bytes_of(struct knitk_endpoint *k, size_t *len)
{
	struct knitk_layout l;
	void *base = NULL;

	if (knitk_endpoint_layout(k, &l, NULL) || knitk_endpoint_base(k, &base))
		return NULL;
	*len = (size_t)(l.size - l.mailbox_off);
	return (unsigned char *)base + l.mailbox_off;
}

static inline unsigned char knot_bytes_pattern(size_t i, unsigned int salt)
{
	return (unsigned char)(i * 131 + (i >> 12) * 7 + salt);
}

static inline void knot_bytes_fill(unsigned char *d, size_t len, unsigned int salt)
{
	size_t i;

	for (i = 0; i < len; i++)
		d[i] = knot_bytes_pattern(i, salt);
}

/* How many of the @len bytes at @d are not the pattern of @salt. */
static inline size_t knot_bytes_wrong(const unsigned char *d, size_t len,
				      unsigned int salt)
{
	size_t i, bad = 0;

	for (i = 0; i < len; i++)
		bad += d[i] != knot_bytes_pattern(i, salt);
	return bad;
}

#endif /* KNITK_KNOT_BYTES_H */
