/* marshal.h: Python's marshal format (version 4), the encoding of .pstat files.
 *
 * The writer (struct cp_mw) streams objects to a file descriptor or a memory buffer
 * for pstat-write.c. The parser turns bytes from any Python 3 marshal.dump (or from
 * coprof) into a tree of struct cp_mval for pstat-read.c, checking every length and
 * bounding depth. Both run in the caller's thread; nothing here is signal-safe. */
#ifndef CP_MARSHAL_H
#define CP_MARSHAL_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"

/* Type codes, as Python/marshal.c names them (TYPE_NONE...), and the flag that makes
 * an object a reference target. */
#define CP_MT_NULL '0'
#define CP_MT_NONE 'N'
#define CP_MT_FALSE 'F'
#define CP_MT_TRUE 'T'
#define CP_MT_STOPITER 'S'
#define CP_MT_ELLIPSIS '.'
#define CP_MT_INT 'i'
#define CP_MT_INT64 'I'
#define CP_MT_FLOAT 'f'
#define CP_MT_BINARY_FLOAT 'g'
#define CP_MT_COMPLEX 'x'
#define CP_MT_BINARY_COMPLEX 'y'
#define CP_MT_LONG 'l'
#define CP_MT_STRING 's'
#define CP_MT_INTERNED 't'
#define CP_MT_REF 'r'
#define CP_MT_TUPLE '('
#define CP_MT_LIST '['
#define CP_MT_DICT '{'
#define CP_MT_UNICODE 'u'
#define CP_MT_SET '<'
#define CP_MT_FROZENSET '>'
#define CP_MT_ASCII 'a'
#define CP_MT_ASCII_INTERNED 'A'
#define CP_MT_SMALL_TUPLE ')'
#define CP_MT_SHORT_ASCII 'z'
#define CP_MT_SHORT_ASCII_INTERNED 'Z'
#define CP_MFLAG_REF 0x80

/* --- writing -------------------------------------------------------------------- */

struct cp_mw {
	int fd;		    /* -1: keep everything in buf */
	int err;	    /* sticky: the first -errno, then every call is a no-op */
	unsigned char *buf; /* pending bytes (fd >= 0) or the whole output (fd < 0) */
	size_t len, cap;
	uint64_t written; /* bytes flushed to fd */
	uint32_t nrefs;	  /* FLAG_REF objects written in the current object */
};

void cp_mw_init(struct cp_mw *w, int fd);
/* Flushes pending bytes to the fd (no-op in memory mode). Returns w->err. */
int cp_mw_flush(struct cp_mw *w);
/* Frees the buffer; in memory mode, hand it over first with cp_mw_take. */
void cp_mw_fini(struct cp_mw *w);
/* Memory mode: hands the output over through buf and len (caller frees); 0 or w->err. */
int cp_mw_take(struct cp_mw *w, unsigned char **buf, size_t *len);
/* Starts a new top-level object: marshal's reference table restarts per object. */
void cp_mw_begin_object(struct cp_mw *w);

void cp_mw_none(struct cp_mw *w);
void cp_mw_bool(struct cp_mw *w, int v);
void cp_mw_int(struct cp_mw *w, int64_t v);
void cp_mw_uint(struct cp_mw *w, uint64_t v);
/* NaN and infinities are written as 0.0: pstats files never hold them. */
void cp_mw_float(struct cp_mw *w, double v);
/* A str from `len` bytes of UTF-8; invalid sequences become U+FFFD so that every
 * Python decodes it. With ref_out non-NULL the object is flagged as a reference
 * target and *ref_out gets its index. */
void cp_mw_str(struct cp_mw *w, const char *s, size_t len, uint32_t *ref_out);
/* `s` itself when it is valid UTF-8, else a copy in `a` with each invalid byte
 * replaced by U+FFFD, exactly as cp_mw_str writes it; NULL when out of memory. Keys
 * that differ only in invalid bytes are the same key once written. */
struct cp_arena;
const char *cp_utf8_repair(struct cp_arena *a, const char *s);
void cp_mw_tuple(struct cp_mw *w, uint32_t n, uint32_t *ref_out);
void cp_mw_list(struct cp_mw *w, uint32_t n);
void cp_mw_dict_begin(struct cp_mw *w);
void cp_mw_dict_end(struct cp_mw *w);
/* A back-reference to the object that got index `ref` in the current object. */
void cp_mw_ref(struct cp_mw *w, uint32_t ref);

/* --- parsing -------------------------------------------------------------------- */

enum cp_mtype {
	CP_M_NONE,
	CP_M_BOOL,    /* v.i: 0 or 1 */
	CP_M_INT,     /* v.i */
	CP_M_UINT,    /* v.u: a long above INT64_MAX that fits 64 bits */
	CP_M_HUGE,    /* a long beyond 64 bits; v.f approximates it */
	CP_M_FLOAT,   /* v.f */
	CP_M_STR,     /* v.s, n bytes of UTF-8 (or of raw bytes), not NUL-terminated */
	CP_M_BYTES,   /* v.s, n bytes */
	CP_M_TUPLE,   /* v.items[n] */
	CP_M_LIST,    /* v.items[n] */
	CP_M_SET,     /* v.items[n]: set or frozenset */
	CP_M_DICT,    /* v.items[2n]: key, value, key, value... */
	CP_M_OTHER,   /* Ellipsis, StopIteration, complex: carried, never interpreted */
	CP_M_PENDING, /* internal: a container being read, not yet complete */
};

struct cp_mval {
	uint8_t type;	/* enum cp_mtype */
	uint8_t shared; /* a reference target or inside one: lives in the lasting arena */
	uint32_t n;
	union {
		int64_t i;
		uint64_t u;
		double f;
		const char *s;
		const struct cp_mval *items;
	} v;
};

/* Limits against hostile input. Real pstats data nests at most 8 deep. */
#define CP_MARSHAL_MAX_DEPTH 64

/* Parses one marshal object from buf[*pos..len) into *out, advancing *pos past it.
 * Strings point into buf, which must outlive the tree; containers are allocated in
 * `arena`. Returns 0, -EINVAL (malformed, unsupported type, too deep, bad reference)
 * or -ENOMEM, and then writes one line to err. Never reads outside buf. */
int cp_marshal_parse(const unsigned char *buf, size_t len, size_t *pos, struct cp_arena *arena,
		     struct cp_mval *out, char *err, size_t errlen);

/* Called for each key and value of a dict read by cp_marshal_parse_dict. Items of
 * values that are not `shared` live until fn returns only. 0 or a negative errno,
 * which stops the parse (fn writes the message). */
typedef int (*cp_mdict_fn)(void *ctx, const struct cp_mval *key, const struct cp_mval *val);

/* Like cp_marshal_parse for an object that must be a dict, without building it: each
 * pair goes to fn, and the containers only it used are freed from `tmp` right after,
 * so a large pstats dict costs memory for one entry at a time. */
int cp_marshal_parse_dict(const unsigned char *buf, size_t len, size_t *pos, struct cp_arena *arena,
			  struct cp_arena *tmp, cp_mdict_fn fn, void *ctx, char *err,
			  size_t errlen);

/* The name of a value type, for error messages ("dict", "tuple", ...). */
const char *cp_mtype_name(const struct cp_mval *v);

#endif
