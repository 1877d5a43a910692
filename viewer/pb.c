/* pb.c: a protocol buffers wire-format writer (see pb.h), just enough for pprof's
 * profile.proto. Runs in the coprof command, single-threaded. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pb.h"

void vw_pb_free(struct vw_pb *b)
{
	free(b->buf);
	*b = (struct vw_pb){0};
}

void vw_pb_reset(struct vw_pb *b)
{
	b->len = 0;
}

/* Makes room for `n` more bytes; 0, or sets the sticky error and returns it. */
static int room(struct vw_pb *b, size_t n)
{
	if (b->err)
		return b->err;
	if (b->cap - b->len >= n)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap - b->len < n) {
		if (cap > SIZE_MAX / 2)
			return b->err = -ENOMEM;
		cap *= 2;
	}
	unsigned char *p = realloc(b->buf, cap);
	if (!p)
		return b->err = -ENOMEM;
	b->buf = p;
	b->cap = cap;
	return 0;
}

/* Base 128, least significant group first, the high bit set on all but the last. */
static void varint(struct vw_pb *b, uint64_t v)
{
	if (room(b, 10))
		return;
	do {
		unsigned char c = v & 0x7f;
		v >>= 7;
		b->buf[b->len++] = c | (v ? 0x80 : 0);
	} while (v);
}

static void tag(struct vw_pb *b, uint32_t field, unsigned wire)
{
	varint(b, (uint64_t)field << 3 | wire);
}

void vw_pb_uint(struct vw_pb *b, uint32_t field, uint64_t v)
{
	tag(b, field, 0);
	varint(b, v);
}

void vw_pb_int(struct vw_pb *b, uint32_t field, int64_t v)
{
	vw_pb_uint(b, field, (uint64_t)v);
}

void vw_pb_bytes(struct vw_pb *b, uint32_t field, const void *p, size_t n)
{
	tag(b, field, 2);
	varint(b, n);
	if (n && !room(b, n)) {
		memcpy(b->buf + b->len, p, n);
		b->len += n;
	}
}

void vw_pb_msg(struct vw_pb *b, uint32_t field, const struct vw_pb *sub)
{
	if (sub->err && !b->err)
		b->err = sub->err;
	vw_pb_bytes(b, field, sub->buf, sub->len);
}

void vw_pb_packed(struct vw_pb *b, uint32_t field, const uint64_t *v, size_t n)
{
	size_t len = 0;
	if (!n)
		return;
	for (size_t i = 0; i < n; i++) {
		uint64_t x = v[i];
		do {
			len++;
			x >>= 7;
		} while (x);
	}
	tag(b, field, 2);
	varint(b, len);
	for (size_t i = 0; i < n; i++)
		varint(b, v[i]);
}
