/* pstat-read.c: builds a struct cp_profile from a .pstat file of coprof, cProfile or
 * yappi (layout: the comment atop pstat-write.c).
 *
 * Called by the viewer and tests, in their own thread. The pstats dict is read
 * straight into the profile when it has the usual shape (fast_dict); otherwise it is
 * parsed (marshal.c) and converted one entry at a time. The extras are parsed whole,
 * then walked. Every mismatch with the expected shape is an error with a message,
 * never a crash; time and memory are O(size of the file). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grow.h"
#include "keymap.h"
#include "marshal.h"
#include "profile.h"

/* For the few small helpers of the direct path's inner loop: a call per number cost
 * more than the work. */
#define CP_INLINE __attribute__((always_inline))

/* Largest file read: far above any real profile, low enough to bound memory. */
#define MAX_FILE_SIZE ((size_t)1 << 31)

/* What every part of one file shares while it is converted. */
struct reader {
	struct cp_profile *p;
	struct cp_ptrmap strs; /* shared str (its bytes in the file) -> index in strtab */
	const char **strtab;
	uint32_t nstr, capstr;
	uint64_t budget; /* conversion steps left: shared objects cannot multiply work */
	uint32_t *synth; /* the extras' 'synthetic' keys, as top-level builder indices */
	uint32_t nsynth;
	char *err;
	size_t errlen;
};

/* One pstats dict being converted: its functions, and its keys' indices. Functions
 * are numbered as first met (a caller key may come before its own entry), then put
 * in file order by finish_stats. */
struct builder {
	struct reader *rd;
	struct cp_keymap keys;
	struct cp_ptrmap seen; /* shared key tuple (its items) -> index */
	struct cp_func *funcs; /* cp_big_resize'd while growing, moved into the arena at the end */
	size_t funcs_size;     /* its bytes: at least cap functions */
	uint32_t *defined;     /* per function: its entry's rank in the dict + 1, or 0 */
	uint32_t n, cap, ndefined;
};

__attribute__((format(printf, 2, 3))) static int fail(struct reader *rd, const char *fmt, ...)
{
	va_list ap;

	if (rd->err && rd->errlen) {
		va_start(ap, fmt);
		vsnprintf(rd->err, rd->errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int oom(struct reader *rd)
{
	if (rd->err && rd->errlen)
		snprintf(rd->err, rd->errlen, "out of memory");
	return -ENOMEM;
}

static int spend(struct reader *rd, uint64_t steps)
{
	if (rd->budget < steps)
		return fail(rd, "pstats data shares objects too often to be a profile");
	rd->budget -= steps;
	return 0;
}

/* --- values ------------------------------------------------------------------------ */

/* A NUL-terminated arena copy of a str (or bytes, as Python 2 wrote). A string
 * written once and referenced (a file name shared by many keys) is copied once. */
static int get_str(struct reader *rd, const struct cp_mval *v, const char **out, const char *what)
{
	uint32_t idx;

	if (v->type != CP_M_STR && v->type != CP_M_BYTES)
		return fail(rd, "%s: expected a str, found %s", what, cp_mtype_name(v));
	if (v->shared && v->n && cp_ptrmap_get(&rd->strs, v->v.s, &idx)) {
		*out = rd->strtab[idx];
		return 0;
	}
	*out = cp_arena_strdup(rd->p->arena, v->v.s, v->n);
	if (!*out)
		return oom(rd);
	if (!v->shared || !v->n)
		return 0;
	if (cp_grow(&rd->strtab, &rd->capstr, rd->nstr + 1, sizeof(*rd->strtab), 256) < 0)
		return oom(rd);
	if (cp_ptrmap_put(&rd->strs, v->v.s, rd->nstr) < 0)
		return oom(rd);
	rd->strtab[rd->nstr++] = *out;
	return 0;
}

static int get_opt_str(struct reader *rd, const struct cp_mval *v, const char **out,
		       const char *what)
{
	if (v->type == CP_M_NONE) {
		*out = NULL;
		return 0;
	}
	return get_str(rd, v, out, what);
}

/* Bounds on the numbers of a profile, so that no sum, percentage or conversion the
 * viewer makes can overflow or give NaN: a count up to 2^53 (exact in a double and in
 * JSON readers), a time up to 1e9 s (31 years: in ns it still fits callgrind's 64-bit
 * costs). A profiler's rounding may leave a time a hair below zero: down to -1 us it
 * reads as 0; below, the file is refused. */
#define MAX_COUNT ((uint64_t)1 << 53)
#define MAX_TIME 1e9
#define MAX_STAMP 1e11 /* start and stop: seconds since the epoch */
#define NEG_SLACK 1e-6

/* A count: a non-negative int (a whole float is taken too, as pstats.add may make). */
static int get_count(struct reader *rd, const struct cp_mval *v, uint64_t *out, const char *what)
{
	switch (v->type) {
	case CP_M_BOOL:
	case CP_M_INT:
		if (v->v.i < 0)
			return fail(rd, "%s is negative (%lld)", what, (long long)v->v.i);
		*out = (uint64_t)v->v.i;
		break;
	case CP_M_UINT:
		*out = v->v.u;
		break;
	case CP_M_FLOAT:
		if (v->v.f < 0)
			return fail(rd, "%s is negative (%g)", what, v->v.f);
		if (!(v->v.f >= 0 && v->v.f < 18446744073709551616.0))
			return fail(rd, "%s is not a count (%g)", what, v->v.f);
		*out = (uint64_t)v->v.f;
		break;
	default:
		return fail(rd, "%s: expected a count, found %s", what, cp_mtype_name(v));
	}
	if (*out > MAX_COUNT)
		return fail(rd, "%s is too large (%llu; at most 2^53)", what,
			    (unsigned long long)*out);
	return 0;
}

static int get_int(struct reader *rd, const struct cp_mval *v, int64_t *out, const char *what)
{
	if (v->type != CP_M_INT && v->type != CP_M_BOOL)
		return fail(rd, "%s: expected an int, found %s", what, cp_mtype_name(v));
	*out = v->v.i;
	return 0;
}

/* Seconds, from 0 to `max`. NaN, infinities and negative times are refused with the
 * entry's name, so that the viewer never shows them as numbers or writes them. */
static int get_seconds(struct reader *rd, const struct cp_mval *v, double *out, const char *what,
		       double max)
{
	double t;
	switch (v->type) {
	case CP_M_FLOAT:
	case CP_M_HUGE:
		t = v->v.f;
		break;
	case CP_M_INT:
	case CP_M_BOOL:
		t = (double)v->v.i;
		break;
	case CP_M_UINT:
		t = (double)v->v.u;
		break;
	default:
		return fail(rd, "%s: expected a number, found %s", what, cp_mtype_name(v));
	}
	if (isnan(t))
		return fail(rd, "%s is NaN, not a time", what);
	if (isinf(t))
		return fail(rd, "%s is infinite, not a time", what);
	if (t < -NEG_SLACK)
		return fail(rd, "%s is negative (%g s)", what, t);
	if (t > max)
		return fail(rd, "%s is too large (%g s; at most %g)", what, t, max);
	*out = t > 0 ? t : 0.0;
	return 0;
}

static int get_time(struct reader *rd, const struct cp_mval *v, double *out, const char *what)
{
	return get_seconds(rd, v, out, what, MAX_TIME);
}

/* NAME cut to 60 bytes, control characters shown as '?', so messages stay one line. */
static void shown(char *dst, const char *src)
{
	size_t i;
	for (i = 0; i < 60 && src && src[i]; i++) {
		unsigned char c = (unsigned char)src[i];
		dst[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	dst[i] = 0;
}

/* "function 'NAME' (FILE:LINE) FIELD", or for a call "call 'CALLER' (FILE:LINE) ->
 * 'CALLEE' FIELD", naming the numbers a message is about. */
static const char *func_what(char *buf, size_t len, const struct cp_func *f,
			     const struct cp_func *callee, const char *field)
{
	char name[61], file[61], to[61];
	const char *path = f->key.file ? f->key.file : "";
	size_t n = strlen(path);
	shown(name, f->key.name);
	shown(file, n > 60 ? path + n - 60 : path);
	if (callee) {
		shown(to, callee->key.name);
		snprintf(buf, len, "call '%s' (%s:%llu) -> '%s' %s", name, file,
			 (unsigned long long)f->key.line, to, field);
	} else {
		snprintf(buf, len, "function '%s' (%s:%llu) %s", name, file,
			 (unsigned long long)f->key.line, field);
	}
	return buf;
}

/* The four numbers of a function (cc, nc, tt, ct) or of a call from `fn` to `callee`
 * (`edge`: nc, cc, tt, ct). A bad one is named with its function only once found bad,
 * so the common case formats nothing. */
static int get_four(struct reader *rd, const struct cp_mval *it, int edge, struct cp_stat *s,
		    const struct cp_func *fn, const struct cp_func *callee)
{
	const char *names[4] = {edge ? "nc" : "cc", edge ? "cc" : "nc", "tt", "ct"};
	uint64_t *counts[2] = {edge ? &s->nc : &s->cc, edge ? &s->cc : &s->nc};
	double *times[2] = {&s->tt, &s->ct};
	char w[256];

	for (int i = 0; i < 4; i++) {
		int r = i < 2 ? get_count(rd, &it[i], counts[i], names[i])
			      : get_time(rd, &it[i], times[i - 2], names[i]);
		if (r < 0) {
			func_what(w, sizeof(w), fn, callee, names[i]);
			return i < 2 ? get_count(rd, &it[i], counts[i], w)
				     : get_time(rd, &it[i], times[i - 2], w);
		}
	}
	return 0;
}

static int is_seq(const struct cp_mval *v)
{
	return v->type == CP_M_TUPLE || v->type == CP_M_LIST;
}

/* --- pstats dicts ------------------------------------------------------------------ */

static void builder_init(struct builder *b, struct reader *rd)
{
	memset(b, 0, sizeof(*b));
	b->rd = rd;
	cp_keymap_init(&b->keys);
	cp_ptrmap_init(&b->seen);
}

static void builder_fini(struct builder *b)
{
	cp_keymap_fini(&b->keys);
	cp_ptrmap_fini(&b->seen);
	cp_big_free(b->funcs, b->funcs_size);
	cp_big_free(b->defined, (size_t)b->cap * sizeof(*b->defined));
	memset(b, 0, sizeof(*b));
}

/* Appends a function with zero numbers and `line` to the builder (its strings are
 * the caller's to fill): 0, -E2BIG (too many) or -ENOMEM. */
static int builder_add(struct builder *b, uint64_t line, struct cp_func **out)
{
	if (b->n == b->cap) {
		uint32_t cap = b->cap ? b->cap * 2 : 64;
		size_t fs = sizeof(*b->funcs), ds = sizeof(*b->defined);
		struct cp_func *nf;
		uint32_t *nd;
		if (b->cap > UINT32_MAX / 4)
			return -E2BIG;
		nf = cp_big_resize(b->funcs, b->funcs_size, cap * fs);
		if (!nf)
			return -ENOMEM;
		b->funcs = nf;
		b->funcs_size = cap * fs;
		nd = cp_big_resize(b->defined, b->cap * ds, cap * ds);
		if (!nd)
			return -ENOMEM;
		b->defined = nd;
		b->cap = cap;
	}
	b->defined[b->n] = 0;
	*out = &b->funcs[b->n++];
	memset(*out, 0, sizeof(**out));
	(*out)->key.line = line;
	return 0;
}

/* The index of the function keyed by `v`, a (file, line, name) tuple, adding it with
 * zero numbers when it is new. *isnew tells which. */
static int func_index(struct reader *rd, struct builder *b, const struct cp_mval *v, uint32_t *idx,
		      int *isnew, const char *what)
{
	const struct cp_mval *it;
	uint64_t line;
	struct cp_func *f;
	int found, r;

	if (v->type != CP_M_TUPLE || v->n != 3)
		return fail(rd, "%s: a key must be a (file, line, name) tuple, found %s", what,
			    cp_mtype_name(v));
	it = v->v.items;
	if (v->shared && cp_ptrmap_get(&b->seen, it, idx)) {
		*isnew = 0;
		return 0;
	}
	if ((it[0].type != CP_M_STR && it[0].type != CP_M_BYTES) ||
	    (it[2].type != CP_M_STR && it[2].type != CP_M_BYTES))
		return fail(rd, "%s: key file and name must be str", what);
	if ((r = get_count(rd, &it[1], &line, what)) < 0)
		return r;
	*idx = b->n;
	if (cp_keymap_get_or_put(&b->keys, it[0].n ? it[0].v.s : "", it[0].n, line,
				 it[2].n ? it[2].v.s : "", it[2].n, idx, &found) < 0)
		return oom(rd);
	*isnew = !found;
	if (v->shared && cp_ptrmap_put(&b->seen, it, *idx) < 0)
		return oom(rd);
	if (found)
		return 0;
	if ((r = builder_add(b, line, &f)) == -E2BIG)
		return fail(rd, "%s: too many functions", what);
	if (r < 0)
		return oom(rd);
	if ((r = get_str(rd, &it[0], &f->key.file, what)) < 0 ||
	    (r = get_str(rd, &it[2], &f->key.name, what)) < 0)
		return r;
	return 0;
}

/* One caller -> callee edge: (nc, cc, tt, ct) as cProfile writes it, or a bare call
 * count as very old pstats files did. */
static int get_edge(struct reader *rd, const struct cp_mval *v, struct cp_stat *s,
		    const struct cp_func *caller, const struct cp_func *callee)
{
	const struct cp_mval *it = v->v.items;
	char w[256];
	int r;

	if (v->type == CP_M_INT || v->type == CP_M_UINT) {
		if ((r = get_count(rd, v, &s->nc, "nc")) < 0)
			return get_count(rd, v, &s->nc,
					 func_what(w, sizeof(w), caller, callee, "nc"));
		s->cc = s->nc;
		return 0;
	}
	if (!is_seq(v) || v->n != 4)
		return fail(rd, "caller: expected (nc, cc, tt, ct), found %s of %u",
			    cp_mtype_name(v), (unsigned)v->n);
	return get_four(rd, it, 1, s, caller, callee);
}

/* Converts one entry of a pstats dict, key -> (cc, nc, tt, ct, callers). A caller
 * key found nowhere at top level stays a function with zero numbers, so that every
 * caller is one of the functions. */
static int put_entry(struct builder *b, const struct cp_mval *key, const struct cp_mval *v)
{
	struct reader *rd = b->rd;
	const struct cp_mval *it = v->v.items, *cd;
	struct cp_stat s = {0};
	struct cp_edge *edges;
	uint32_t idx;
	int isnew, r;

	if ((r = spend(rd, 1)) < 0 || (r = func_index(rd, b, key, &idx, &isnew, "pstats key")) < 0)
		return r;
	if (b->defined[idx])
		return fail(rd, "pstats entry %u: its key appears twice", (unsigned)b->ndefined);
	b->defined[idx] = ++b->ndefined;
	if (!is_seq(v) || v->n != 5)
		return fail(rd, "pstats entry %u: expected (cc, nc, tt, ct, callers)",
			    (unsigned)b->ndefined);
	if ((r = get_four(rd, it, 0, &s, &b->funcs[idx], NULL)) < 0)
		return r;
	/* yappi writes (ncall, nactualcall) where cProfile has (cc, nc): primitive
	 * calls never outnumber calls, so put such a pair back in order. */
	if (s.cc > s.nc) {
		uint64_t t = s.cc;
		s.cc = s.nc;
		s.nc = t;
	}
	cd = &it[4];
	if (cd->type != CP_M_DICT)
		return fail(rd, "pstats entry %u: callers must be a dict, found %s",
			    (unsigned)b->ndefined, cp_mtype_name(cd));
	if ((r = spend(rd, cd->n)) < 0)
		return r;
	edges = cp_arena_alloc(rd->p->arena, (size_t)cd->n * sizeof(*edges));
	if (!edges)
		return oom(rd);
	for (uint32_t j = 0; j < cd->n; j++) {
		if ((r = func_index(rd, b, &cd->v.items[2 * j], &edges[j].caller, &isnew,
				    "caller key")) < 0 ||
		    (r = get_edge(rd, &cd->v.items[2 * j + 1], &edges[j].s,
				  &b->funcs[edges[j].caller], &b->funcs[idx])) < 0)
			return r;
	}
	b->funcs[idx].s = s;
	b->funcs[idx].callers = edges;
	b->funcs[idx].ncallers = cd->n;
	return 0;
}

static int put_entry_cb(void *ctx, const struct cp_mval *key, const struct cp_mval *val)
{
	return put_entry(ctx, key, val);
}

/* Converts a pstats dict already parsed (a task's, in the extras). */
static int read_stats(struct reader *rd, struct builder *b, const struct cp_mval *d)
{
	int r;

	if (d->type != CP_M_DICT)
		return fail(rd, "pstats data must be a dict, found %s", cp_mtype_name(d));
	for (uint32_t i = 0; i < d->n; i++)
		if ((r = put_entry(b, &d->v.items[2 * i], &d->v.items[2 * i + 1])) < 0)
			return r;
	return 0;
}

/* Moves the functions into the profile's arena: the dict's entries in file order,
 * then functions only named as callers (or stack frames) in the order met. Edges are
 * renumbered; *perm_out, when asked for, maps old indices to new (caller frees). */
static int finish_stats(struct reader *rd, struct builder *b, struct cp_stats *out,
			uint32_t **perm_out)
{
	uint32_t *perm, extra = b->ndefined;
	uint64_t nc = 0;
	double tt = 0;

	/* Each number is bounded (get_count, get_time); so must their sums be, which the
	 * viewer's totals and percentages are made of. */
	for (uint32_t i = 0; i < b->n; i++) {
		nc += b->funcs[i].s.nc;
		tt += b->funcs[i].s.tt;
		if (nc > MAX_COUNT)
			return fail(rd, "the calls of all functions add up to more than 2^53");
		if (tt > MAX_TIME)
			return fail(rd, "the own times of all functions add up to more than %g s",
				    MAX_TIME);
	}
	perm = malloc(((size_t)b->n + 1) * sizeof(*perm));
	if (!perm)
		return oom(rd);
	out->nfuncs = b->n;
	out->funcs = cp_arena_alloc(rd->p->arena, (size_t)b->n * sizeof(*out->funcs));
	if (!out->funcs) {
		free(perm);
		return oom(rd);
	}
	for (uint32_t i = 0; i < b->n; i++)
		perm[i] = b->defined[i] ? b->defined[i] - 1 : extra++;
	for (uint32_t i = 0; i < b->n; i++) {
		struct cp_func *f = &out->funcs[perm[i]];
		*f = b->funcs[i];
		for (uint32_t j = 0; j < f->ncallers; j++)
			f->callers[j].caller = perm[f->callers[j].caller];
	}
	if (perm_out)
		*perm_out = perm;
	else
		free(perm);
	return 0;
}

/* --- the extras ---------------------------------------------------------------------- */

/* The value of str key `name` in dict `d`, or NULL. */
static const struct cp_mval *dict_get(const struct cp_mval *d, const char *name)
{
	size_t len = strlen(name);

	for (uint32_t i = 0; i < d->n; i++) {
		const struct cp_mval *k = &d->v.items[2 * i];
		if (k->type == CP_M_STR && k->n == len && memcmp(k->v.s, name, len) == 0)
			return &d->v.items[2 * i + 1];
	}
	return NULL;
}

/* A list (or tuple) field: *n items, each checked by the caller. Absent: 0 items. */
static int get_list(struct reader *rd, const struct cp_mval *d, const char *name,
		    const struct cp_mval **items, uint32_t *n)
{
	const struct cp_mval *v = dict_get(d, name);

	*items = NULL;
	*n = 0;
	if (!v)
		return 0;
	if (!is_seq(v))
		return fail(rd, "extras '%s': expected a list, found %s", name, cp_mtype_name(v));
	if (spend(rd, v->n) < 0)
		return -EINVAL;
	*items = v->v.items;
	*n = v->n;
	return 0;
}

/* Typed optional fields of an extras dict; absent fields keep their zero value. */
static int field_str(struct reader *rd, const struct cp_mval *d, const char *name, const char **out)
{
	const struct cp_mval *v = dict_get(d, name);

	return v ? get_opt_str(rd, v, out, name) : 0;
}

static int field_count(struct reader *rd, const struct cp_mval *d, const char *name, uint64_t *out)
{
	const struct cp_mval *v = dict_get(d, name);

	return v ? get_count(rd, v, out, name) : 0;
}

static int field_time(struct reader *rd, const struct cp_mval *d, const char *name, double *out)
{
	const struct cp_mval *v = dict_get(d, name);

	return v ? get_time(rd, v, out, name) : 0;
}

static int field_stamp(struct reader *rd, const struct cp_mval *d, const char *name, double *out)
{
	const struct cp_mval *v = dict_get(d, name);

	return v ? get_seconds(rd, v, out, name, MAX_STAMP) : 0;
}

static int read_task(struct reader *rd, const struct cp_mval *d, struct cp_task *t)
{
	const struct cp_mval *stats;
	struct builder b;
	int r;

	if (d->type != CP_M_DICT)
		return fail(rd, "extras task: expected a dict, found %s", cp_mtype_name(d));
	if ((r = field_count(rd, d, "id", &t->id)) < 0 ||
	    (r = field_str(rd, d, "name", &t->name)) < 0 ||
	    (r = field_str(rd, d, "runtime", &t->runtime)) < 0 ||
	    (r = field_count(rd, d, "thread", &t->thread)) < 0 ||
	    (r = field_time(rd, d, "ttot", &t->ttot)) < 0 ||
	    (r = field_count(rd, d, "resumes", &t->resumes)) < 0 ||
	    (r = field_str(rd, d, "state", &t->state)) < 0)
		return r;
	t->timed = dict_get(d, "run_wall") != NULL;
	if (t->timed && ((r = field_time(rd, d, "run_cpu", &t->run_cpu)) < 0 ||
			 (r = field_time(rd, d, "run_wall", &t->run_wall)) < 0 ||
			 (r = field_time(rd, d, "ready", &t->ready)) < 0 ||
			 (r = field_time(rd, d, "ready_max", &t->ready_max)) < 0 ||
			 (r = field_time(rd, d, "waiting", &t->waiting)) < 0))
		return r;
	stats = dict_get(d, "stats");
	if (!stats)
		return 0;
	builder_init(&b, rd);
	r = read_stats(rd, &b, stats);
	if (r == 0)
		r = finish_stats(rd, &b, &t->stats, NULL);
	builder_fini(&b);
	return r;
}

/* A thread's 'roots': {(file, line, name): (nc, cc, tt, ct)}. */
/* A (file, line, name) key of the extras that stands alone: a thread's root, a stall's
 * frame. */
static int get_key(struct reader *rd, const struct cp_mval *k, struct cp_key *out,
		   const char *what)
{
	int r;

	if (k->type != CP_M_TUPLE || k->n != 3)
		return fail(rd, "%s: a key must be a (file, line, name) tuple, found %s", what,
			    cp_mtype_name(k));
	if ((r = get_str(rd, &k->v.items[0], &out->file, what)) < 0 ||
	    (r = get_count(rd, &k->v.items[1], &out->line, what)) < 0 ||
	    (r = get_str(rd, &k->v.items[2], &out->name, what)) < 0)
		return r;
	return 0;
}

static int read_roots(struct reader *rd, const struct cp_mval *d, struct cp_thread *t)
{
	int r;

	if (d->type != CP_M_DICT)
		return fail(rd, "extras thread roots: expected a dict, found %s",
			    cp_mtype_name(d));
	if ((r = spend(rd, d->n)) < 0)
		return r;
	if (!(t->roots = cp_arena_alloc(rd->p->arena, ((size_t)d->n + 1) * sizeof(*t->roots))))
		return oom(rd);
	for (t->nroots = 0; t->nroots < d->n; t->nroots++) {
		const struct cp_mval *k = &d->v.items[2 * t->nroots];
		struct cp_root *o = &t->roots[t->nroots];
		if ((r = get_key(rd, k, &o->key, "extras thread roots")) < 0)
			return r;
		struct cp_func named = {.key = o->key}; /* names the root in a message */
		if ((r = get_edge(rd, &d->v.items[2 * t->nroots + 1], &o->s, &named, NULL)) < 0)
			return r;
	}
	return 0;
}

static int read_thread(struct reader *rd, const struct cp_mval *d, struct cp_thread *t)
{
	const struct cp_mval *roots;

	if (d->type != CP_M_DICT)
		return fail(rd, "extras thread: expected a dict, found %s", cp_mtype_name(d));
	if (field_count(rd, d, "tid", &t->tid) < 0 || field_str(rd, d, "name", &t->name) < 0 ||
	    field_time(rd, d, "ttot", &t->ttot) < 0 ||
	    field_count(rd, d, "switches", &t->switches) < 0)
		return -EINVAL;
	roots = dict_get(d, "roots");
	return roots ? read_roots(rd, roots, t) : 0;
}

/* A stack's frames index the top-level functions (`top`), added if missing. */
static int read_stack(struct reader *rd, struct builder *top, const struct cp_mval *v,
		      struct cp_stack *s, uint32_t ntasks)
{
	const struct cp_mval *it = v->v.items, *fr;
	uint64_t waiting;
	int isnew, r;

	if (!is_seq(v) || v->n != 5)
		return fail(rd, "extras stack: expected (task, tid, frames, count, waiting)");
	if ((r = get_int(rd, &it[0], &s->task, "stack task")) < 0 ||
	    (r = get_count(rd, &it[1], &s->thread, "stack tid")) < 0 ||
	    (r = get_count(rd, &it[3], &s->count, "stack count")) < 0 ||
	    (r = get_count(rd, &it[4], &waiting, "stack waiting")) < 0)
		return r;
	if (s->task < -1 || (s->task >= 0 && (uint64_t)s->task >= ntasks))
		return fail(rd, "extras stack: task index %lld out of range", (long long)s->task);
	s->waiting = waiting != 0;
	fr = &it[2];
	if (!is_seq(fr))
		return fail(rd, "extras stack: frames must be a tuple, found %s",
			    cp_mtype_name(fr));
	if ((r = spend(rd, fr->n)) < 0)
		return r;
	s->depth = fr->n;
	s->frames = cp_arena_alloc(rd->p->arena, (size_t)fr->n * sizeof(*s->frames));
	if (!s->frames)
		return oom(rd);
	for (uint32_t j = 0; j < fr->n; j++)
		if ((r = func_index(rd, top, &fr->v.items[j], &s->frames[j], &isnew,
				    "stack frame")) < 0)
			return r;
	return 0;
}

static int read_stall(struct reader *rd, const struct cp_mval *v, struct cp_stall *s)
{
	const struct cp_mval *it = v->v.items, *fr;
	int r;

	if (!is_seq(v) || (v->n != 5 && v->n != 6))
		return fail(rd, "extras stall: expected (tid, task id, task, seconds, frames, "
				"behind)");
	s->behind = -1; /* a file written before it existed */
	if (v->n == 6 && (r = get_int(rd, &it[5], &s->behind, "stall behind")) < 0)
		return r;
	if ((r = get_count(rd, &it[0], &s->thread, "stall tid")) < 0 ||
	    (r = get_count(rd, &it[1], &s->task_id, "stall task id")) < 0 ||
	    (r = get_opt_str(rd, &it[2], &s->task, "stall task")) < 0 ||
	    (r = get_time(rd, &it[3], &s->seconds, "stall seconds")) < 0)
		return r;
	fr = &it[4];
	if (!is_seq(fr))
		return fail(rd, "extras stall: frames must be a tuple, found %s", cp_mtype_name(fr));
	if ((r = spend(rd, fr->n)) < 0)
		return r;
	s->frames = cp_arena_alloc(rd->p->arena, ((size_t)fr->n + 1) * sizeof(*s->frames));
	if (!s->frames)
		return oom(rd);
	for (s->depth = 0; s->depth < fr->n; s->depth++)
		if ((r = get_key(rd, &fr->v.items[s->depth], &s->frames[s->depth],
				 "extras stall frame")) < 0)
			return r;
	return 0;
}

static int read_await(struct reader *rd, const struct cp_mval *v, struct cp_await *aw)
{
	const struct cp_mval *it = v->v.items;
	int r;

	if (!is_seq(v) || v->n != 8)
		return fail(rd, "extras await: expected (tid, waiter id, waiter, awaited id, "
				"awaited, kind, count, seconds)");
	if ((r = get_count(rd, &it[0], &aw->thread, "await tid")) < 0 ||
	    (r = get_count(rd, &it[1], &aw->waiter_id, "await waiter id")) < 0 ||
	    (r = get_opt_str(rd, &it[2], &aw->waiter, "await waiter")) < 0 ||
	    (r = get_count(rd, &it[3], &aw->awaited_id, "await awaited id")) < 0 ||
	    (r = get_opt_str(rd, &it[4], &aw->awaited, "await awaited")) < 0 ||
	    (r = get_opt_str(rd, &it[5], &aw->kind, "await kind")) < 0 ||
	    (r = get_count(rd, &it[6], &aw->count, "await count")) < 0 ||
	    (r = get_time(rd, &it[7], &aw->seconds, "await seconds")) < 0)
		return r;
	return 0;
}

/* Allocates `n` zeroed elements of `size` for an extras table. */
static void *table(struct reader *rd, uint32_t n, size_t size)
{
	return cp_arena_alloc(rd->p->arena, (size_t)n * size);
}

static int read_extras(struct reader *rd, struct builder *top, const struct cp_mval *d)
{
	struct cp_extras *x = &rd->p->ex;
	const struct cp_mval *v, *items;
	uint32_t n;
	int r;

	if (d->type != CP_M_DICT || !(v = dict_get(d, "coprof")))
		return fail(rd, "data after the pstats dict is not coprof extras");
	if ((r = get_int(rd, v, &x->version, "extras version")) < 0)
		return r;
	x->present = 1;
	if ((r = field_str(rd, d, "clock", &x->clock)) < 0 ||
	    (r = field_str(rd, d, "mode", &x->mode)) < 0 ||
	    (r = field_stamp(rd, d, "start", &x->start)) < 0 ||
	    (r = field_stamp(rd, d, "stop", &x->stop)) < 0 ||
	    (r = field_time(rd, d, "hz", &x->hz)) < 0)
		return r;
	if ((v = dict_get(d, "pid")) && (r = get_int(rd, v, &x->pid, "pid")) < 0)
		return r;
	if ((v = dict_get(d, "overflow"))) {
		uint64_t o;
		if ((r = get_count(rd, v, &o, "overflow")) < 0)
			return r;
		x->overflow = o != 0;
	}

	if ((r = get_list(rd, d, "argv", &items, &n)) < 0)
		return r;
	if (!(x->argv = table(rd, n, sizeof(*x->argv))))
		return oom(rd);
	for (x->argc = 0; x->argc < n; x->argc++)
		if ((r = get_str(rd, &items[x->argc], &x->argv[x->argc], "argv")) < 0)
			return r;

	if ((r = get_list(rd, d, "notes", &items, &n)) < 0)
		return r;
	if (!(x->notes = table(rd, n, sizeof(*x->notes))))
		return oom(rd);
	for (x->nnotes = 0; x->nnotes < n; x->nnotes++)
		if ((r = get_str(rd, &items[x->nnotes], &x->notes[x->nnotes], "notes")) < 0)
			return r;

	if ((v = dict_get(d, "dropped"))) {
		if (v->type != CP_M_DICT)
			return fail(rd, "extras 'dropped': expected a dict, found %s",
				    cp_mtype_name(v));
		if (!(x->dropped = table(rd, v->n, sizeof(*x->dropped))))
			return oom(rd);
		for (x->ndropped = 0; x->ndropped < v->n; x->ndropped++) {
			struct cp_counter *c = &x->dropped[x->ndropped];
			if ((r = get_str(rd, &v->v.items[2 * x->ndropped], &c->name, "dropped")) <
				0 ||
			    (r = get_count(rd, &v->v.items[2 * x->ndropped + 1], &c->n,
					   "dropped")) < 0)
				return r;
		}
	}

	if ((r = get_list(rd, d, "tasks", &items, &n)) < 0)
		return r;
	if (!(x->tasks = table(rd, n, sizeof(*x->tasks))))
		return oom(rd);
	for (x->ntasks = 0; x->ntasks < n; x->ntasks++)
		if ((r = read_task(rd, &items[x->ntasks], &x->tasks[x->ntasks])) < 0)
			return r;

	if ((r = get_list(rd, d, "threads", &items, &n)) < 0)
		return r;
	if (!(x->threads = table(rd, n, sizeof(*x->threads))))
		return oom(rd);
	for (x->nthreads = 0; x->nthreads < n; x->nthreads++)
		if ((r = read_thread(rd, &items[x->nthreads], &x->threads[x->nthreads])) < 0)
			return r;

	if ((r = get_list(rd, d, "stacks", &items, &n)) < 0)
		return r;
	if (!(x->stacks = table(rd, n, sizeof(*x->stacks))))
		return oom(rd);
	for (x->nstacks = 0; x->nstacks < n; x->nstacks++)
		if ((r = read_stack(rd, top, &items[x->nstacks], &x->stacks[x->nstacks],
				    x->ntasks)) < 0)
			return r;

	if ((r = get_list(rd, d, "synthetic", &items, &n)) < 0)
		return r;
	if (!(rd->synth = calloc(n + 1, sizeof(*rd->synth))))
		return oom(rd);
	for (rd->nsynth = 0; rd->nsynth < n; rd->nsynth++) {
		int isnew;
		if ((r = func_index(rd, top, &items[rd->nsynth], &rd->synth[rd->nsynth], &isnew,
				    "synthetic")) < 0)
			return r;
	}
	/* Optional (newer files): each stack's weight in ns, in the order of 'stacks'. */
	if ((r = get_list(rd, d, "stack_ns", &items, &n)) < 0)
		return r;
	if (n && n != x->nstacks)
		return fail(rd, "extras 'stack_ns': %u entries for %u stacks", n, x->nstacks);
	for (uint32_t i = 0; i < n; i++)
		if ((r = get_count(rd, &items[i], &x->stacks[i].weight, "stack_ns")) < 0)
			return r;
	/* Optional (newer files): the stalls and their threshold. */
	if ((r = field_time(rd, d, "stall_threshold", &x->stall_threshold)) < 0 ||
	    (r = get_list(rd, d, "stalls", &items, &n)) < 0)
		return r;
	if (!(x->stalls = table(rd, n, sizeof(*x->stalls))))
		return oom(rd);
	for (x->nstalls = 0; x->nstalls < n; x->nstalls++)
		if ((r = read_stall(rd, &items[x->nstalls], &x->stalls[x->nstalls])) < 0)
			return r;
	/* Optional (newer files): who awaited whom. */
	if ((r = get_list(rd, d, "awaits", &items, &n)) < 0)
		return r;
	if (!(x->awaits = table(rd, n, sizeof(*x->awaits))))
		return oom(rd);
	for (x->nawaits = 0; x->nawaits < n; x->nawaits++)
		if ((r = read_await(rd, &items[x->nawaits], &x->awaits[x->nawaits])) < 0)
			return r;
	return 0;
}

/* Takes the synthetic functions (whole.h) out of the top-level stats, and the edges
 * from them, so that every table shows the profile's own functions. `perm` maps the
 * builder's indices to the stats'. A sampled stack never names one. */
static int strip_synthetic(struct reader *rd, const uint32_t *perm)
{
	struct cp_stats *st = &rd->p->stats;
	struct cp_extras *x = &rd->p->ex;
	uint32_t *to, n = 0;

	if (!rd->nsynth)
		return 0;
	if (!(to = calloc(st->nfuncs + 1, sizeof(*to))))
		return oom(rd);
	for (uint32_t i = 0; i < rd->nsynth; i++)
		to[perm[rd->synth[i]]] = UINT32_MAX;
	for (uint32_t i = 0; i < st->nfuncs; i++)
		if (to[i] != UINT32_MAX)
			to[i] = n++;
	for (uint32_t i = 0; i < st->nfuncs; i++) {
		struct cp_func f = st->funcs[i];
		uint32_t k = 0;
		if (to[i] == UINT32_MAX)
			continue;
		for (uint32_t j = 0; j < f.ncallers; j++)
			if (to[f.callers[j].caller] != UINT32_MAX)
				f.callers[k++] = (struct cp_edge){to[f.callers[j].caller],
								  f.callers[j].s};
		f.ncallers = k;
		st->funcs[to[i]] = f;
	}
	for (uint32_t i = 0; i < x->nstacks; i++)
		for (uint32_t j = 0; j < x->stacks[i].depth; j++) {
			uint32_t *fr = &x->stacks[i].frames[j];
			if (to[*fr] == UINT32_MAX) {
				free(to);
				return fail(rd, "extras stack: a frame names a synthetic function");
			}
			*fr = to[*fr];
		}
	x->nsynthetic = st->nfuncs - n;
	st->nfuncs = n;
	free(to);
	return 0;
}

/* --- the direct path ----------------------------------------------------------------- */

/* The top-level pstats dict is by far the bulk of a file, and its shape is fixed: most
 * of the general path's time went into building a cp_mval for each of its millions of
 * objects only to convert it at once. fast_dict reads that shape straight into the
 * builder. It knows only what cProfile, yappi and coprof write there; on anything else
 * (an unusual type, a reference to a container other than a key, a limit, any
 * malformed byte) it gives up with FAST_NO and the caller starts over on the general
 * path, which then accepts or rejects the file with its message exactly as before. So
 * the two paths agree on every input: this one only has to be memory-safe, and to
 * build what the general path would (same numbers, same order, same budget spent,
 * a referenced string copied once). */

#define FAST_NO 1

/* What a reference slot holds: a scalar's value, a str's bytes, a key tuple's function
 * index, or a container the direct path cannot reuse. */
enum { FREF_PENDING, FREF_SCALAR, FREF_STR, FREF_KEY, FREF_OTHER };

struct fref {
	uint8_t kind;
	uint8_t type;	/* FREF_SCALAR: enum cp_mtype; FREF_STR: CP_M_STR or CP_M_BYTES */
	uint8_t copied; /* FREF_STR: v.s is now its NUL-terminated arena copy */
	uint32_t n;	/* FREF_STR: length */
	union {
		int64_t i;
		uint64_t u;
		double f;
		const char *s; /* FREF_STR: its bytes, in the file or (copied) the arena */
		uint32_t func; /* FREF_KEY */
	} v;
};

struct fast {
	struct reader *rd;
	struct builder *b;
	const unsigned char *p, *end;
	struct fref *refs; /* marshal's reference table, in order of FLAG_REF */
	size_t nrefs, caprefs;
	struct cp_edge *edges; /* the callers of the entry being read */
	size_t nedges, capedges;
};

/* A str as met in a key: where its bytes are, and its reference slot if it has one
 * (SIZE_MAX: none), which keeps the arena copy once made so it is made once. */
struct fstr {
	const char *s;
	uint32_t n;
	uint8_t type;
	size_t slot;
};

static __attribute__((noinline)) int fast_grow_refs(struct fast *f)
{
	size_t cap = f->caprefs ? f->caprefs * 2 : 4096;
	struct fref *nr = cp_big_resize(f->refs, f->caprefs * sizeof(*nr), cap * sizeof(*nr));

	if (!nr)
		return FAST_NO;
	f->refs = nr;
	f->caprefs = cap;
	return 0;
}

static inline CP_INLINE int fast_reserve(struct fast *f, size_t *slot)
{
	if (f->nrefs == f->caprefs && fast_grow_refs(f))
		return FAST_NO;
	*slot = f->nrefs++;
	f->refs[*slot].kind = FREF_PENDING;
	return 0;
}

static uint32_t fast_u32(const unsigned char *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t fast_u64(const unsigned char *b)
{
	return (uint64_t)fast_u32(b) | (uint64_t)fast_u32(b + 4) << 32;
}

/* The slot a 'r' object (its code already read) refers to, if complete. */
static inline CP_INLINE const struct fref *fast_ref(struct fast *f)
{
	uint32_t i;

	if (f->end - f->p < 4)
		return NULL;
	i = fast_u32(f->p);
	f->p += 4;
	if (i >= f->nrefs || f->refs[i].kind == FREF_PENDING)
		return NULL;
	return &f->refs[i];
}

/* A number (int, bool, float) into *out, typed as the general parser types it. */
static inline CP_INLINE int fast_scalar(struct fast *f, struct cp_mval *out)
{
	const struct fref *ref;
	unsigned char code, type;
	size_t slot;

	if (f->p >= f->end)
		return FAST_NO;
	code = *f->p++;
	type = code & ~CP_MFLAG_REF;
	switch (type) {
	case CP_MT_INT:
		if (f->end - f->p < 4)
			return FAST_NO;
		out->type = CP_M_INT;
		out->v.i = (int32_t)fast_u32(f->p);
		f->p += 4;
		break;
	case CP_MT_INT64:
		if (f->end - f->p < 8)
			return FAST_NO;
		out->type = CP_M_INT;
		out->v.i = (int64_t)fast_u64(f->p);
		f->p += 8;
		break;
	case CP_MT_BINARY_FLOAT: {
		uint64_t bits;
		if (f->end - f->p < 8)
			return FAST_NO;
		bits = fast_u64(f->p);
		f->p += 8;
		out->type = CP_M_FLOAT;
		memcpy(&out->v.f, &bits, sizeof(out->v.f));
		break;
	}
	case CP_MT_TRUE:
	case CP_MT_FALSE:
		out->type = CP_M_BOOL;
		out->v.i = type == CP_MT_TRUE;
		return 0; /* no slot: as in the general parser */
	case CP_MT_REF:
		if (!(ref = fast_ref(f)) || ref->kind != FREF_SCALAR)
			return FAST_NO;
		out->type = ref->type;
		out->v.u = ref->v.u;
		return 0;
	default:
		return FAST_NO;
	}
	if (code & CP_MFLAG_REF) {
		if (fast_reserve(f, &slot))
			return FAST_NO;
		f->refs[slot].kind = FREF_SCALAR;
		f->refs[slot].type = out->type;
		f->refs[slot].v.u = out->v.u;
	}
	return 0;
}

static int fast_str(struct fast *f, struct fstr *out)
{
	const struct fref *ref;
	unsigned char code, type;
	uint32_t n;

	if (f->p >= f->end)
		return FAST_NO;
	code = *f->p++;
	type = code & ~CP_MFLAG_REF;
	switch (type) {
	case CP_MT_SHORT_ASCII:
	case CP_MT_SHORT_ASCII_INTERNED:
		if (f->p >= f->end)
			return FAST_NO;
		n = *f->p++;
		break;
	case CP_MT_UNICODE:
	case CP_MT_INTERNED:
	case CP_MT_ASCII:
	case CP_MT_ASCII_INTERNED:
	case CP_MT_STRING:
		if (f->end - f->p < 4)
			return FAST_NO;
		n = fast_u32(f->p);
		f->p += 4;
		break;
	case CP_MT_REF:
		if (!(ref = fast_ref(f)) || ref->kind != FREF_STR)
			return FAST_NO;
		out->s = ref->v.s;
		out->n = ref->n;
		out->type = ref->type;
		out->slot = (size_t)(ref - f->refs);
		return 0;
	default:
		return FAST_NO;
	}
	if (n > (size_t)(f->end - f->p))
		return FAST_NO;
	out->s = (const char *)f->p;
	out->n = n;
	out->type = type == CP_MT_STRING ? CP_M_BYTES : CP_M_STR;
	out->slot = SIZE_MAX;
	f->p += n;
	if (code & CP_MFLAG_REF) {
		if (fast_reserve(f, &out->slot))
			return FAST_NO;
		f->refs[out->slot] =
		    (struct fref){.kind = FREF_STR, .type = out->type, .n = n, .v.s = out->s};
	}
	return 0;
}

/* The arena copy of a key's str, made once per referenced string as get_str does. */
static int fast_copy(struct fast *f, const struct fstr *s, const char **out)
{
	struct fref *ref = s->slot != SIZE_MAX && s->n ? &f->refs[s->slot] : NULL;

	if (ref && ref->copied) {
		*out = ref->v.s;
		return 0;
	}
	if (!(*out = cp_arena_strdup(f->rd->p->arena, s->s, s->n)))
		return FAST_NO;
	if (ref) {
		ref->v.s = *out; /* the same bytes, which keys met later may point to */
		ref->copied = 1;
	}
	return 0;
}

/* A (file, line, name) key, or a reference to one: its function index, the function
 * added when new, as func_index does. */
static int fast_key(struct fast *f, uint32_t *idx)
{
	struct builder *b = f->b;
	const struct fref *ref;
	struct fstr file, name;
	struct cp_mval line;
	unsigned char code, type;
	uint64_t lineno;
	size_t slot = SIZE_MAX;
	struct cp_func *fn;
	int found;

	if (f->end - f->p < 2)
		return FAST_NO;
	code = *f->p++;
	type = code & ~CP_MFLAG_REF;
	if (type == CP_MT_REF) {
		if (!(ref = fast_ref(f)) || ref->kind != FREF_KEY)
			return FAST_NO;
		*idx = ref->v.func;
		return 0;
	}
	if (type != CP_MT_SMALL_TUPLE || *f->p++ != 3)
		return FAST_NO;
	if ((code & CP_MFLAG_REF) && fast_reserve(f, &slot))
		return FAST_NO;
	if (fast_str(f, &file) || fast_scalar(f, &line) || fast_str(f, &name) ||
	    get_count(f->rd, &line, &lineno, "pstats key") < 0)
		return FAST_NO;
	*idx = b->n;
	if (cp_keymap_get_or_put(&b->keys, file.n ? file.s : "", file.n, lineno,
				 name.n ? name.s : "", name.n, idx, &found) < 0)
		return FAST_NO;
	if (slot != SIZE_MAX) {
		f->refs[slot].kind = FREF_KEY;
		f->refs[slot].v.func = *idx;
	}
	if (found)
		return 0;
	if (builder_add(b, lineno, &fn) < 0)
		return FAST_NO;
	if (fast_copy(f, &file, &fn->key.file) || fast_copy(f, &name, &fn->key.name))
		return FAST_NO;
	return 0;
}

/* A sequence header (tuple or list) of exactly `n` items; its slot, if flagged, is
 * marked a container the direct path will not reuse. */
static int fast_seq(struct fast *f, uint32_t n, size_t *slot)
{
	unsigned char code, type;
	uint32_t got;

	if (f->end - f->p < 2)
		return FAST_NO;
	code = *f->p++;
	type = code & ~CP_MFLAG_REF;
	if (type == CP_MT_SMALL_TUPLE) {
		got = *f->p++;
	} else if (type == CP_MT_TUPLE || type == CP_MT_LIST) {
		if (f->end - f->p < 4)
			return FAST_NO;
		got = fast_u32(f->p);
		f->p += 4;
	} else {
		return FAST_NO;
	}
	*slot = SIZE_MAX;
	if (got != n || ((code & CP_MFLAG_REF) && fast_reserve(f, slot)))
		return FAST_NO;
	return 0;
}

static void fast_done(struct fast *f, size_t slot)
{
	if (slot != SIZE_MAX)
		f->refs[slot].kind = FREF_OTHER;
}

/* get_count and get_time, with their commonest case (an int, a finite float) first. */
static inline CP_INLINE int fast_count(struct fast *f, const struct cp_mval *v, uint64_t *out)
{
	if (v->type == CP_M_INT && v->v.i >= 0 && (uint64_t)v->v.i <= MAX_COUNT) {
		*out = (uint64_t)v->v.i;
		return 0;
	}
	return get_count(f->rd, v, out, "") < 0 ? FAST_NO : 0;
}

static inline CP_INLINE int fast_time(struct fast *f, const struct cp_mval *v, double *out)
{
	if (v->type == CP_M_FLOAT && v->v.f >= 0 && v->v.f <= MAX_TIME) {
		*out = v->v.f;
		return 0;
	}
	return get_time(f->rd, v, out, "") < 0 ? FAST_NO : 0;
}

/* The four numbers cc, nc, tt, ct (for an edge, the file has nc first). */
static int fast_stat(struct fast *f, struct cp_stat *s, int edge)
{
	struct cp_mval v[4];

	for (int i = 0; i < 4; i++)
		if (fast_scalar(f, &v[i]))
			return FAST_NO;
	if (fast_count(f, &v[0], edge ? &s->nc : &s->cc) ||
	    fast_count(f, &v[1], edge ? &s->cc : &s->nc) || fast_time(f, &v[2], &s->tt) ||
	    fast_time(f, &v[3], &s->ct))
		return FAST_NO;
	return 0;
}

/* One caller -> callee edge, as get_edge reads it. */
static int fast_edge(struct fast *f, struct cp_stat *s)
{
	struct cp_mval v;
	size_t slot;
	unsigned char type;

	if (f->p >= f->end)
		return FAST_NO;
	type = *f->p & ~CP_MFLAG_REF;
	if (type == CP_MT_SMALL_TUPLE || type == CP_MT_TUPLE || type == CP_MT_LIST) {
		if (fast_seq(f, 4, &slot) || fast_stat(f, s, 1))
			return FAST_NO;
		fast_done(f, slot);
		return 0;
	}
	if (fast_scalar(f, &v) || (v.type != CP_M_INT && v.type != CP_M_UINT) ||
	    get_count(f->rd, &v, &s->nc, "") < 0)
		return FAST_NO;
	s->cc = s->nc;
	return 0;
}

/* One entry, key -> (cc, nc, tt, ct, callers), as put_entry converts it. */
static int fast_entry(struct fast *f)
{
	struct reader *rd = f->rd;
	struct builder *b = f->b;
	struct cp_stat s = {0};
	struct cp_edge *edges;
	size_t vslot, dslot = SIZE_MAX;
	uint32_t idx;
	unsigned char code;

	if (spend(rd, 1) < 0 || fast_key(f, &idx) || b->defined[idx])
		return FAST_NO;
	b->defined[idx] = ++b->ndefined;
	if (fast_seq(f, 5, &vslot) || fast_stat(f, &s, 0) || f->p >= f->end)
		return FAST_NO;
	if (s.cc > s.nc) { /* yappi's order: see put_entry */
		uint64_t t = s.cc;
		s.cc = s.nc;
		s.nc = t;
	}
	code = *f->p++;
	if ((code & ~CP_MFLAG_REF) != CP_MT_DICT ||
	    ((code & CP_MFLAG_REF) && fast_reserve(f, &dslot)))
		return FAST_NO;
	f->nedges = 0;
	for (;;) {
		if (f->p >= f->end)
			return FAST_NO;
		if ((*f->p & ~CP_MFLAG_REF) == CP_MT_NULL) {
			f->p++;
			break;
		}
		if (f->nedges == f->capedges) {
			size_t cap = f->capedges ? f->capedges * 2 : 64;
			struct cp_edge *ne = realloc(f->edges, cap * sizeof(*ne));
			if (!ne)
				return FAST_NO;
			f->edges = ne;
			f->capedges = cap;
		}
		edges = &f->edges[f->nedges];
		memset(edges, 0, sizeof(*edges));
		if (fast_key(f, &edges->caller) || fast_edge(f, &edges->s))
			return FAST_NO;
		if (++f->nedges > UINT32_MAX - 1)
			return FAST_NO;
	}
	fast_done(f, dslot);
	fast_done(f, vslot);
	if (spend(rd, f->nedges) < 0)
		return FAST_NO;
	edges = cp_arena_alloc(rd->p->arena, f->nedges * sizeof(*edges));
	if (!edges)
		return FAST_NO;
	if (f->nedges)
		memcpy(edges, f->edges, f->nedges * sizeof(*edges));
	b->funcs[idx].s = s;
	b->funcs[idx].callers = edges;
	b->funcs[idx].ncallers = (uint32_t)f->nedges;
	return 0;
}

/* Reads the pstats dict at buf[*pos..len) into `b`: 0 and *pos past it, or FAST_NO
 * (then the profile and the builder hold garbage, and the caller starts over). */
static int fast_dict(struct reader *rd, struct builder *b, const unsigned char *buf, size_t len,
		     size_t *pos)
{
	struct fast f = {.rd = rd, .b = b, .p = buf + *pos, .end = buf + len};
	size_t slot;
	int r = FAST_NO;

	if (f.p < f.end && (*f.p & ~CP_MFLAG_REF) == CP_MT_DICT &&
	    !((*f.p++ & CP_MFLAG_REF) && fast_reserve(&f, &slot))) {
		for (;;) {
			if (f.p >= f.end)
				break;
			if ((*f.p & ~CP_MFLAG_REF) == CP_MT_NULL) {
				f.p++;
				r = 0;
				break;
			}
			if (fast_entry(&f))
				break;
		}
	}
	cp_big_free(f.refs, f.caprefs * sizeof(*f.refs));
	free(f.edges);
	if (r == 0)
		*pos = (size_t)(f.p - buf);
	return r;
}

/* --- entry points -------------------------------------------------------------------- */

/* The stacks were read before the functions took their final order. */
static void renumber_stacks(struct cp_extras *x, const uint32_t *perm)
{
	for (uint32_t i = 0; i < x->nstacks; i++)
		for (uint32_t j = 0; j < x->stacks[i].depth; j++)
			x->stacks[i].frames[j] = perm[x->stacks[i].frames[j]];
}

/* Converts the whole file: the pstats dict on the direct path when `fast`, else on
 * the general one, then the extras. Returns FAST_NO when the direct path gave up. */
static int read_all(struct reader *rd, const unsigned char *buf, size_t len, int fast)
{
	struct cp_arena *tree = cp_arena_new(), *tmp = cp_arena_new();
	struct builder top;
	struct cp_mval v;
	uint32_t *perm = NULL;
	size_t pos = 0;
	int r;

	if (!tree || !tmp) {
		cp_arena_free(tree);
		cp_arena_free(tmp);
		return oom(rd);
	}
	builder_init(&top, rd);
	if (fast)
		r = fast_dict(rd, &top, buf, len, &pos);
	else
		r = cp_marshal_parse_dict(buf, len, &pos, tree, tmp, put_entry_cb, &top, rd->err,
					  rd->errlen);
	if (r == 0 && pos < len) {
		r = cp_marshal_parse(buf, len, &pos, tree, &v, rd->err, rd->errlen);
		if (r == 0)
			r = read_extras(rd, &top, &v);
		if (r == 0 && pos < len)
			r = fail(rd, "%zu unexpected bytes after the coprof extras", len - pos);
	}
	if (r == 0)
		r = finish_stats(rd, &top, &rd->p->stats, &perm);
	if (r == 0)
		renumber_stacks(&rd->p->ex, perm);
	if (r == 0)
		r = strip_synthetic(rd, perm);
	free(perm);
	free(rd->synth);
	rd->synth = NULL;
	rd->nsynth = 0;
	builder_fini(&top);
	cp_arena_free(tree);
	cp_arena_free(tmp);
	return r;
}

int cp_profile_read_mem(const void *buf, size_t len, struct cp_profile **out, char *err,
			size_t errlen)
{
	struct reader rd = {.err = err, .errlen = errlen};
	int r;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (len == 0) {
		if (err && errlen)
			snprintf(err, errlen, "empty file: no pstats data");
		return -ENODATA;
	}
	if (len > MAX_FILE_SIZE)
		return fail(&rd, "file of %zu bytes is too large", len);
	/* The direct path first; when it gives up, everything restarts from zero. */
	for (int fast = 1; fast >= 0; fast--) {
		if ((r = cp_profile_new(&rd.p)) < 0)
			return oom(&rd);
		cp_ptrmap_init(&rd.strs);
		rd.strtab = NULL;
		rd.nstr = rd.capstr = 0;
		rd.budget = 2 * (uint64_t)len + 4096;
		r = read_all(&rd, buf, len, fast);
		cp_ptrmap_fini(&rd.strs);
		free(rd.strtab);
		if (r == 0)
			break;
		cp_profile_free(rd.p);
		if (r < 0)
			return r;
		if (err && errlen)
			err[0] = '\0';
	}
	*out = rd.p;
	return 0;
}

/* Reads the whole file into memory (not mmap of the file: a file truncated under us
 * must give an error, not SIGBUS), then converts it. A large file's buffer is a
 * mapping with huge pages (cp_big_resize), which spares a page fault per 4 KiB. */
int cp_profile_read(const char *path, struct cp_profile **out, char *err, size_t errlen)
{
	struct stat st;
	unsigned char *buf = NULL;
	size_t len = 0;
	int fd, r = 0;

	*out = NULL;
	/* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below) */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
	} else if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
	} else if ((uint64_t)st.st_size > MAX_FILE_SIZE) {
		r = -EFBIG;
	} else if (st.st_size > 0 && !(buf = cp_big_resize(NULL, 0, (size_t)st.st_size))) {
		r = -ENOMEM;
	}
	while (r == 0 && len < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO; /* shrank while read */
			break;
		}
		len += (size_t)n;
	}
	if (fd >= 0)
		close(fd);
	if (r == 0) {
		char msg[256] = "";
		r = cp_profile_read_mem(buf, len, out, msg, sizeof(msg));
		if (r < 0 && err && errlen)
			snprintf(err, errlen, "%s: %s", path, msg);
	} else if (err && errlen) {
		snprintf(err, errlen, "%s: %s", path,
			 r == -EINVAL ? "not a regular file" : strerror(-r));
	}
	if (buf)
		cp_big_free(buf, (size_t)st.st_size);
	return r;
}
