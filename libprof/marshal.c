/* marshal.c: writes and parses Python's marshal format, version 4 (Python/marshal.c).
 *
 * The writer emits only what every Python 3.4+ loads; the parser accepts everything
 * marshal.dump produces for plain data (any version) and rejects the rest with a
 * message. Called by pstat-write.c and pstat-read.c in the caller's thread. */
#define _GNU_SOURCE
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "marshal.h"

#define LONG_SHIFT 15 /* a marshal long is a sequence of 15-bit digits */
#define LONG_MASK 0x7fff

#define MW_FLUSH_AT (64 * 1024)

/* --- writing -------------------------------------------------------------------- */

void cp_mw_init(struct cp_mw *w, int fd)
{
	memset(w, 0, sizeof(*w));
	w->fd = fd;
}

/* Makes room for `n` more bytes: flushes to the fd, or grows the memory buffer. */
static int mw_reserve(struct cp_mw *w, size_t n)
{
	size_t cap;
	unsigned char *nb;

	if (w->err)
		return w->err;
	if (w->len + n <= w->cap)
		return 0;
	if (w->fd >= 0 && w->len > 0 && cp_mw_flush(w) < 0)
		return w->err;
	if (w->len + n <= w->cap)
		return 0;
	cap = w->cap ? w->cap : MW_FLUSH_AT;
	while (cap < w->len + n) {
		if (cap > SIZE_MAX / 2) {
			w->err = -ENOMEM;
			return w->err;
		}
		cap *= 2;
	}
	nb = realloc(w->buf, cap);
	if (!nb) {
		w->err = -ENOMEM;
		return w->err;
	}
	w->buf = nb;
	w->cap = cap;
	return 0;
}

static void mw_put(struct cp_mw *w, const void *p, size_t n)
{
	if (mw_reserve(w, n) < 0)
		return;
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static void mw_byte(struct cp_mw *w, unsigned char b)
{
	if (mw_reserve(w, 1) < 0)
		return;
	w->buf[w->len++] = b;
}

static void mw_u32(struct cp_mw *w, uint32_t v)
{
	unsigned char b[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >> 24};

	mw_put(w, b, 4);
}

int cp_mw_flush(struct cp_mw *w)
{
	size_t off = 0;

	if (w->err || w->fd < 0)
		return w->err;
	while (off < w->len) {
		ssize_t r = write(w->fd, w->buf + off, w->len - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			w->err = r < 0 ? -errno : -EIO;
			return w->err;
		}
		off += (size_t)r;
	}
	w->written += w->len;
	w->len = 0;
	return 0;
}

void cp_mw_fini(struct cp_mw *w)
{
	free(w->buf);
	w->buf = NULL;
	w->len = w->cap = 0;
}

int cp_mw_take(struct cp_mw *w, unsigned char **buf, size_t *len)
{
	if (w->err)
		return w->err;
	*buf = w->buf;
	*len = w->len;
	w->buf = NULL;
	w->len = w->cap = 0;
	return 0;
}

void cp_mw_begin_object(struct cp_mw *w)
{
	w->nrefs = 0;
}

/* Writes a type byte, flagged as a reference target when ref_out is given. */
static void mw_type(struct cp_mw *w, unsigned char type, uint32_t *ref_out)
{
	if (ref_out) {
		*ref_out = w->nrefs++;
		type |= CP_MFLAG_REF;
	}
	mw_byte(w, type);
}

void cp_mw_none(struct cp_mw *w)
{
	mw_byte(w, CP_MT_NONE);
}

void cp_mw_bool(struct cp_mw *w, int v)
{
	mw_byte(w, v ? CP_MT_TRUE : CP_MT_FALSE);
}

/* A long is written as its magnitude in 15-bit digits, least significant first,
 * preceded by the digit count, negated for negative numbers. The top digit is never
 * zero: Python rejects unnormalized longs. */
static void mw_long(struct cp_mw *w, uint64_t mag, int neg)
{
	uint16_t digits[5];
	uint32_t n = 0;

	while (mag) {
		digits[n++] = mag & LONG_MASK;
		mag >>= LONG_SHIFT;
	}
	mw_byte(w, CP_MT_LONG);
	mw_u32(w, neg ? 0u - n : n); /* the count, negated: two's complement */
	for (uint32_t i = 0; i < n; i++) {
		unsigned char b[2] = {digits[i] & 0xff, digits[i] >> 8};
		mw_put(w, b, 2);
	}
}

void cp_mw_int(struct cp_mw *w, int64_t v)
{
	if (v >= INT32_MIN && v <= INT32_MAX) {
		mw_byte(w, CP_MT_INT);
		mw_u32(w, (uint32_t)(int32_t)v);
	} else if (v < 0) {
		mw_long(w, (uint64_t)0 - (uint64_t)v, 1);
	} else {
		mw_long(w, (uint64_t)v, 0);
	}
}

void cp_mw_uint(struct cp_mw *w, uint64_t v)
{
	if (v <= INT32_MAX)
		cp_mw_int(w, (int64_t)v);
	else
		mw_long(w, v, 0);
}

void cp_mw_float(struct cp_mw *w, double v)
{
	uint64_t bits;
	unsigned char b[8];

	if (!isfinite(v))
		v = 0.0;
	memcpy(&bits, &v, sizeof(bits));
	for (int i = 0; i < 8; i++)
		b[i] = (bits >> (8 * i)) & 0xff;
	mw_byte(w, CP_MT_BINARY_FLOAT);
	mw_put(w, b, 8);
}

/* Length of the valid UTF-8 sequence at s[0..left), or 0 if it is not one (overlong
 * forms, surrogates and code points above U+10FFFF are invalid, as for Python). */
static size_t utf8_seq(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n > left)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* Writes the payload of a 'u' string, replacing each invalid byte with U+FFFD. */
static void mw_utf8_repaired(struct cp_mw *w, const unsigned char *s, size_t len)
{
	static const unsigned char repl[3] = {0xef, 0xbf, 0xbd};
	size_t out = 0, i, k;

	for (i = 0; i < len; i += k) {
		k = utf8_seq(s + i, len - i);
		out += k ? k : 3;
		if (!k)
			k = 1;
	}
	if (out > INT32_MAX) {
		if (!w->err)
			w->err = -EOVERFLOW;
		return;
	}
	mw_u32(w, (uint32_t)out);
	for (i = 0; i < len; i += k) {
		k = utf8_seq(s + i, len - i);
		if (k) {
			mw_put(w, s + i, k);
		} else {
			mw_put(w, repl, 3);
			k = 1;
		}
	}
}

const char *cp_utf8_repair(struct cp_arena *a, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t len = strlen(str), i, k, out = 0;
	int valid = 1;

	for (i = 0; i < len; i += k) {
		k = utf8_seq(s + i, len - i);
		out += k ? k : 3;
		if (!k) {
			valid = 0;
			k = 1;
		}
	}
	if (valid)
		return str;
	char *r = cp_arena_alloc(a, out + 1);
	if (!r)
		return NULL;
	char *o = r;
	for (i = 0; i < len; i += k) {
		k = utf8_seq(s + i, len - i);
		if (k) {
			memcpy(o, s + i, k);
			o += k;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			k = 1;
		}
	}
	*o = '\0';
	return r;
}

void cp_mw_str(struct cp_mw *w, const char *str, size_t len, uint32_t *ref_out)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	int ascii = 1, valid = 1;

	if (!str)
		len = 0;
	for (size_t i = 0, k; i < len; i += k) {
		if (s[i] < 0x80) {
			k = 1;
			continue;
		}
		ascii = 0;
		k = utf8_seq(s + i, len - i);
		if (!k) {
			valid = 0;
			break;
		}
	}
	if (ascii && len < 256) {
		mw_type(w, CP_MT_SHORT_ASCII, ref_out);
		mw_byte(w, (unsigned char)len);
		mw_put(w, s, len);
		return;
	}
	mw_type(w, CP_MT_UNICODE, ref_out);
	if (!valid) {
		mw_utf8_repaired(w, s, len);
		return;
	}
	if (len > INT32_MAX) {
		if (!w->err)
			w->err = -EOVERFLOW;
		return;
	}
	mw_u32(w, (uint32_t)len);
	mw_put(w, s, len);
}

void cp_mw_tuple(struct cp_mw *w, uint32_t n, uint32_t *ref_out)
{
	if (n < 256) {
		mw_type(w, CP_MT_SMALL_TUPLE, ref_out);
		mw_byte(w, (unsigned char)n);
	} else {
		mw_type(w, CP_MT_TUPLE, ref_out);
		mw_u32(w, n);
	}
}

void cp_mw_list(struct cp_mw *w, uint32_t n)
{
	mw_byte(w, CP_MT_LIST);
	mw_u32(w, n);
}

void cp_mw_dict_begin(struct cp_mw *w)
{
	mw_byte(w, CP_MT_DICT);
}

void cp_mw_dict_end(struct cp_mw *w)
{
	mw_byte(w, CP_MT_NULL);
}

void cp_mw_ref(struct cp_mw *w, uint32_t ref)
{
	mw_byte(w, CP_MT_REF);
	mw_u32(w, ref);
}

/* --- parsing -------------------------------------------------------------------- */

struct parser {
	const unsigned char *buf;
	size_t len, pos;
	struct cp_arena *arena; /* containers that may be referenced, and their contents */
	struct cp_arena *tmp;	/* other containers (NULL: use arena) */
	struct cp_mval *refs;	/* marshal's reference table, in order of CP_MFLAG_REF */
	size_t nrefs, caprefs;
	struct cp_mval *stack; /* items of the containers being read, innermost last */
	size_t nstack, capstack;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 2, 3))) static int fail(struct parser *p, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (p->err && p->errlen) {
		n = snprintf(p->err, p->errlen, "marshal data, offset %zu: ", p->pos);
		if (n >= 0 && (size_t)n < p->errlen) {
			va_start(ap, fmt);
			vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return -EINVAL;
}

static int oom(struct parser *p)
{
	if (p->err && p->errlen)
		snprintf(p->err, p->errlen, "out of memory reading marshal data");
	return -ENOMEM;
}

static int need(struct parser *p, size_t n, const char *what)
{
	if (p->len - p->pos < n)
		return fail(p, "truncated %s (%zu bytes needed, %zu left)", what, n,
			    p->len - p->pos);
	return 0;
}

static int rd_i32(struct parser *p, int32_t *out, const char *what)
{
	const unsigned char *b;

	if (need(p, 4, what) < 0)
		return -EINVAL;
	b = p->buf + p->pos;
	*out = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
			 (uint32_t)b[3] << 24);
	p->pos += 4;
	return 0;
}

/* A length or count; it cannot exceed the bytes left, since every byte or item
 * takes at least one byte: this bounds all allocation by the input's size. */
static int rd_count(struct parser *p, int small, uint32_t *out, const char *what)
{
	int32_t n;

	if (small) {
		if (need(p, 1, what) < 0)
			return -EINVAL;
		*out = p->buf[p->pos++];
	} else {
		if (rd_i32(p, &n, what) < 0)
			return -EINVAL;
		if (n < 0)
			return fail(p, "negative %s length %d", what, (int)n);
		*out = (uint32_t)n;
	}
	if (*out > p->len - p->pos)
		return fail(p, "%s length %u exceeds the %zu bytes left", what, (unsigned)*out,
			    p->len - p->pos);
	return 0;
}

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_init(void)
{
	c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

/* Marshal versions 0 and 1 write floats as repr() text: parse it in the C locale
 * whatever locale the viewer set. */
static int rd_text_float(struct parser *p, double *out)
{
	char text[257], *end;
	uint32_t n;

	if (rd_count(p, 1, &n, "float") < 0)
		return -EINVAL;
	memcpy(text, p->buf + p->pos, n);
	text[n] = '\0';
	p->pos += n;
	pthread_once(&c_locale_once, c_locale_init);
	if (!c_locale)
		return oom(p);
	*out = strtod_l(text, &end, c_locale);
	if (n == 0 || *end != '\0')
		return fail(p, "bad float text");
	return 0;
}

static int rd_binary_float(struct parser *p, double *out)
{
	uint64_t bits = 0;

	if (need(p, 8, "float") < 0)
		return -EINVAL;
	for (int i = 7; i >= 0; i--)
		bits = bits << 8 | p->buf[p->pos + (size_t)i];
	p->pos += 8;
	memcpy(out, &bits, sizeof(*out));
	return 0;
}

static int rd_long(struct parser *p, struct cp_mval *out)
{
	int32_t n;
	uint32_t size;
	uint64_t mag = 0;
	double approx = 0;
	int big = 0;

	if (rd_i32(p, &n, "long") < 0)
		return -EINVAL;
	if (n == INT32_MIN)
		return fail(p, "bad long size");
	size = (uint32_t)(n < 0 ? -n : n);
	if (size > (p->len - p->pos) / 2)
		return fail(p, "long of %u digits exceeds the bytes left", (unsigned)size);
	for (uint32_t i = size; i-- > 0;) {
		const unsigned char *b = p->buf + p->pos + 2 * (size_t)i;
		unsigned d = b[0] | (unsigned)b[1] << 8;
		if (d > LONG_MASK)
			return fail(p, "digit out of range in long");
		if (i == size - 1 && d == 0)
			return fail(p, "unnormalized long");
		if (mag >> (64 - LONG_SHIFT))
			big = 1;
		mag = mag << LONG_SHIFT | d;
		approx = approx * (1 << LONG_SHIFT) + d;
	}
	p->pos += 2 * (size_t)size;
	if (big) {
		out->type = CP_M_HUGE;
		out->v.f = n < 0 ? -approx : approx;
	} else if (n < 0) {
		if (mag > (uint64_t)INT64_MAX + 1) {
			out->type = CP_M_HUGE;
			out->v.f = -approx;
		} else {
			out->type = CP_M_INT;
			out->v.i = (int64_t)(0 - mag);
		}
	} else if (mag > INT64_MAX) {
		out->type = CP_M_UINT;
		out->v.u = mag;
	} else {
		out->type = CP_M_INT;
		out->v.i = (int64_t)mag;
	}
	return 0;
}

/* Reserves the next reference slot, pending until the object is complete. */
static int ref_reserve(struct parser *p, size_t *slot)
{
	if (p->nrefs == p->caprefs) {
		size_t cap = p->caprefs ? p->caprefs * 2 : 256;
		struct cp_mval *nr = realloc(p->refs, cap * sizeof(*nr));
		if (!nr)
			return oom(p);
		p->refs = nr;
		p->caprefs = cap;
	}
	*slot = p->nrefs++;
	p->refs[*slot].type = CP_M_PENDING;
	return 0;
}

static int stack_push(struct parser *p, const struct cp_mval *v)
{
	if (p->nstack == p->capstack) {
		size_t cap = p->capstack ? p->capstack * 2 : 1024;
		struct cp_mval *ns = realloc(p->stack, cap * sizeof(*ns));
		if (!ns)
			return oom(p);
		p->stack = ns;
		p->capstack = cap;
	}
	p->stack[p->nstack++] = *v;
	return 0;
}

/* Moves the items pushed since `base` into an arena as out's items: the lasting one
 * when out is shared (a reference target or inside one), else the temporary one. */
static int stack_pop_into(struct parser *p, size_t base, struct cp_mval *out)
{
	size_t n = p->nstack - base;
	struct cp_arena *a = out->shared || !p->tmp ? p->arena : p->tmp;
	struct cp_mval *items = cp_arena_alloc(a, n * sizeof(*items));

	if (!items)
		return oom(p);
	if (n)
		memcpy(items, p->stack + base, n * sizeof(*items));
	out->v.items = items;
	p->nstack = base;
	return 0;
}

static int parse(struct parser *p, unsigned depth, int shared, struct cp_mval *out);

/* Reads `n` items of a tuple, list or set; they land on the stack first so that a
 * lying count costs nothing before the items are really there. */
static int parse_seq(struct parser *p, unsigned depth, uint32_t n, struct cp_mval *out)
{
	size_t base = p->nstack;
	struct cp_mval item;
	int r;

	for (uint32_t i = 0; i < n; i++) {
		r = parse(p, depth + 1, out->shared, &item);
		if (r < 0)
			return r;
		if (stack_push(p, &item) < 0)
			return -ENOMEM;
	}
	out->n = n;
	return stack_pop_into(p, base, out);
}

static int parse_dict(struct parser *p, unsigned depth, struct cp_mval *out)
{
	size_t base = p->nstack;
	struct cp_mval item;
	int r;

	for (;;) {
		if (need(p, 1, "dict") < 0)
			return -EINVAL;
		if ((p->buf[p->pos] & ~CP_MFLAG_REF) == CP_MT_NULL) {
			p->pos++;
			break;
		}
		for (int k = 0; k < 2; k++) {
			r = parse(p, depth + 1, out->shared, &item);
			if (r < 0)
				return r;
			if (stack_push(p, &item) < 0)
				return -ENOMEM;
		}
		if ((p->nstack - base) / 2 > UINT32_MAX - 1)
			return fail(p, "dict too large");
	}
	out->n = (uint32_t)((p->nstack - base) / 2);
	return stack_pop_into(p, base, out);
}

static int parse_str(struct parser *p, int small, uint8_t type, struct cp_mval *out)
{
	uint32_t n;

	if (rd_count(p, small, &n, "string") < 0)
		return -EINVAL;
	out->type = type;
	out->n = n;
	out->v.s = (const char *)p->buf + p->pos;
	p->pos += n;
	return 0;
}

/* Reads one object. A CP_MFLAG_REF object gets its reference slot before its children
 * are read, as CPython numbers them; a reference to an object not yet complete is
 * rejected, so the tree never has cycles. `shared`: an enclosing object is a
 * reference target, so this one must last as long as the whole parse. */
static int parse(struct parser *p, unsigned depth, int shared, struct cp_mval *out)
{
	unsigned char code, type;
	int flag, r = 0;
	size_t slot = 0;
	uint32_t n;
	int32_t i32;
	double f;

	if (depth > CP_MARSHAL_MAX_DEPTH)
		return fail(p, "nesting deeper than %d", CP_MARSHAL_MAX_DEPTH);
	if (need(p, 1, "object") < 0)
		return -EINVAL;
	code = p->buf[p->pos++];
	flag = code & CP_MFLAG_REF;
	type = code & ~CP_MFLAG_REF;
	memset(out, 0, sizeof(*out));
	out->shared = (uint8_t)(shared || flag);

	switch (type) {
	case CP_MT_NONE:
		out->type = CP_M_NONE;
		return 0;
	case CP_MT_TRUE:
	case CP_MT_FALSE:
		out->type = CP_M_BOOL;
		out->v.i = type == CP_MT_TRUE;
		return 0;
	case CP_MT_STOPITER:
	case CP_MT_ELLIPSIS:
		out->type = CP_M_OTHER;
		return 0;
	case CP_MT_REF:
		if (rd_i32(p, &i32, "reference") < 0)
			return -EINVAL;
		if (i32 < 0 || (size_t)i32 >= p->nrefs)
			return fail(p, "invalid reference %d (%zu objects so far)", (int)i32,
				    p->nrefs);
		if (p->refs[i32].type == CP_M_PENDING)
			return fail(p, "reference %d to an object still being read", (int)i32);
		*out = p->refs[i32];
		out->shared = 1;
		return 0;
	case CP_MT_NULL:
		return fail(p, "unexpected NULL object");
	}

	if (flag && ref_reserve(p, &slot) < 0)
		return -ENOMEM;

	switch (type) {
	case CP_MT_INT:
		r = rd_i32(p, &i32, "int");
		out->type = CP_M_INT;
		out->v.i = i32;
		break;
	case CP_MT_INT64:
		if ((r = need(p, 8, "int64")) == 0) {
			uint64_t u = 0;
			for (int i = 7; i >= 0; i--)
				u = u << 8 | p->buf[p->pos + (size_t)i];
			p->pos += 8;
			out->type = CP_M_INT;
			out->v.i = (int64_t)u;
		}
		break;
	case CP_MT_LONG:
		r = rd_long(p, out);
		break;
	case CP_MT_FLOAT:
		r = rd_text_float(p, &out->v.f);
		out->type = CP_M_FLOAT;
		break;
	case CP_MT_BINARY_FLOAT:
		r = rd_binary_float(p, &out->v.f);
		out->type = CP_M_FLOAT;
		break;
	case CP_MT_COMPLEX:
		r = rd_text_float(p, &f);
		if (r == 0)
			r = rd_text_float(p, &f);
		out->type = CP_M_OTHER;
		break;
	case CP_MT_BINARY_COMPLEX:
		r = need(p, 16, "complex");
		if (r == 0)
			p->pos += 16;
		out->type = CP_M_OTHER;
		break;
	case CP_MT_STRING:
		r = parse_str(p, 0, CP_M_BYTES, out);
		break;
	case CP_MT_UNICODE:
	case CP_MT_INTERNED:
	case CP_MT_ASCII:
	case CP_MT_ASCII_INTERNED:
		r = parse_str(p, 0, CP_M_STR, out);
		break;
	case CP_MT_SHORT_ASCII:
	case CP_MT_SHORT_ASCII_INTERNED:
		r = parse_str(p, 1, CP_M_STR, out);
		break;
	case CP_MT_TUPLE:
	case CP_MT_SMALL_TUPLE:
	case CP_MT_LIST:
	case CP_MT_SET:
	case CP_MT_FROZENSET:
		r = rd_count(p, type == CP_MT_SMALL_TUPLE, &n, "sequence");
		if (r == 0)
			r = parse_seq(p, depth, n, out);
		out->type = CP_M_TUPLE;
		if (type == CP_MT_LIST)
			out->type = CP_M_LIST;
		else if (type == CP_MT_SET || type == CP_MT_FROZENSET)
			out->type = CP_M_SET;
		break;
	case CP_MT_DICT:
		r = parse_dict(p, depth, out);
		out->type = CP_M_DICT;
		break;
	case 'c':
		p->pos--;
		return fail(p, "code objects are not profile data");
	default:
		p->pos--;
		return fail(p, "unknown type code 0x%02x", (unsigned)code);
	}
	if (r < 0)
		return r;
	if (flag)
		p->refs[slot] = *out;
	return 0;
}

int cp_marshal_parse(const unsigned char *buf, size_t len, size_t *pos, struct cp_arena *arena,
		     struct cp_mval *out, char *err, size_t errlen)
{
	struct parser p = {
	    .buf = buf,
	    .len = len,
	    .pos = *pos,
	    .arena = arena,
	    .err = err,
	    .errlen = errlen,
	};
	int r;

	if (p.pos > len)
		return fail(&p, "start beyond the end");
	r = parse(&p, 0, 0, out);
	free(p.refs);
	free(p.stack);
	if (r == 0)
		*pos = p.pos;
	return r;
}

/* The top-level dict is never materialized: each pair is handed to fn, then what it
 * used from `tmp` is reset. Its own reference slot stays pending, which is right:
 * nothing after the dict's end belongs to the same object. */
int cp_marshal_parse_dict(const unsigned char *buf, size_t len, size_t *pos, struct cp_arena *arena,
			  struct cp_arena *tmp, cp_mdict_fn fn, void *ctx, char *err, size_t errlen)
{
	struct parser p = {
	    .buf = buf,
	    .len = len,
	    .pos = *pos,
	    .arena = arena,
	    .tmp = tmp,
	    .err = err,
	    .errlen = errlen,
	};
	struct cp_mval kv[2];
	size_t slot;
	int r = 0;

	if (p.pos >= len) {
		r = fail(&p, "no object");
	} else if ((buf[p.pos] & ~CP_MFLAG_REF) != CP_MT_DICT) {
		r = fail(&p, "expected a dict, found type code 0x%02x", (unsigned)buf[p.pos]);
	} else if ((buf[p.pos++] & CP_MFLAG_REF) && ref_reserve(&p, &slot) < 0) {
		r = -ENOMEM;
	}
	while (r == 0) {
		if ((r = need(&p, 1, "dict")) < 0)
			break;
		if ((p.buf[p.pos] & ~CP_MFLAG_REF) == CP_MT_NULL) {
			p.pos++;
			break;
		}
		if ((r = parse(&p, 1, 0, &kv[0])) < 0 || (r = parse(&p, 1, 0, &kv[1])) < 0)
			break;
		r = fn(ctx, &kv[0], &kv[1]);
		cp_arena_reset(tmp);
	}
	free(p.refs);
	free(p.stack);
	if (r == 0)
		*pos = p.pos;
	return r;
}

const char *cp_mtype_name(const struct cp_mval *v)
{
	static const char *const names[] = {
	    [CP_M_NONE] = "None",   [CP_M_BOOL] = "bool",
	    [CP_M_INT] = "int",	    [CP_M_UINT] = "int",
	    [CP_M_HUGE] = "int",    [CP_M_FLOAT] = "float",
	    [CP_M_STR] = "str",	    [CP_M_BYTES] = "bytes",
	    [CP_M_TUPLE] = "tuple", [CP_M_LIST] = "list",
	    [CP_M_SET] = "set",	    [CP_M_DICT] = "dict",
	    [CP_M_OTHER] = "other", [CP_M_PENDING] = "incomplete object",
	};

	return v->type < sizeof(names) / sizeof(names[0]) ? names[v->type] : "?";
}
