/* pb.h: the little of protocol buffers' wire format that `export --format pprof`
 * needs: varints, length-delimited fields and packed repeated integers, written into
 * a growing buffer. Messages nest by encoding the inner one into its own buffer and
 * appending it. Single-threaded; no schema, no reading. */
#ifndef VW_PB_H
#define VW_PB_H

#include <stddef.h>
#include <stdint.h>

/* A message being written. `err` is sticky: after the first failed allocation
 * (-ENOMEM) every call does nothing, so callers check once at the end. */
struct vw_pb {
	unsigned char *buf;
	size_t len, cap;
	int err;
};

void vw_pb_free(struct vw_pb *b);
/* Empties `b` for reuse, keeping its memory and its error. */
void vw_pb_reset(struct vw_pb *b);

/* A varint field (wire type 0). `int64` values go as their two's complement, as
 * protobuf's int64 does. Zero is written too: the caller skips defaults it wants to
 * leave out. */
void vw_pb_uint(struct vw_pb *b, uint32_t field, uint64_t v);
void vw_pb_int(struct vw_pb *b, uint32_t field, int64_t v);

/* A length-delimited field (wire type 2): bytes, a string, or a nested message. */
void vw_pb_bytes(struct vw_pb *b, uint32_t field, const void *p, size_t n);
void vw_pb_msg(struct vw_pb *b, uint32_t field, const struct vw_pb *sub);

/* A packed repeated varint field; nothing for n == 0. */
void vw_pb_packed(struct vw_pb *b, uint32_t field, const uint64_t *v, size_t n);

#endif
