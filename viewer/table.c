/* table.c: the function table: merges pstats dicts by key (pstats.add), links
 * callers and callees, sorts and filters. Data comes from profiles the file layer read;
 * no curses, no I/O; single-threaded. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "model.h"

/* A zeroed array. Large ones (a 100,000-function file needs tens of MB) are backed by
 * transparent huge pages where the kernel offers them on request: first-touch page
 * faults were a third of the time to open such a file on a VM. Freed with free(). */
static void *big_calloc(size_t n, size_t size)
{
	const size_t huge = (size_t)2 << 20;
	if (!n)
		n = 1;
	if (size && n > SIZE_MAX / size)
		return NULL;
	size_t bytes = n * size;
	if (bytes < 2 * huge)
		return calloc(n, size);
	void *p = NULL;
	bytes = (bytes + huge - 1) & ~(huge - 1);
	if (posix_memalign(&p, huge, bytes))
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE); /* advice only: ignore failure */
	memset(p, 0, bytes);
	return p;
}

static uint64_t key_hash(const struct cp_key *k)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (const char *p = k->name; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	h = (h ^ 0xff) * 1099511628211ull;
	for (const char *p = k->file; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	h ^= k->line * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

static int key_cmp(const struct cp_key *a, const struct cp_key *b)
{
	int c = strcmp(a->name, b->name);
	if (c)
		return c;
	c = strcmp(a->file, b->file);
	if (c)
		return c;
	return (a->line > b->line) - (a->line < b->line);
}

static void stat_add(struct cp_stat *to, const struct cp_stat *s, int swapped)
{
	to->cc += swapped ? s->nc : s->cc;
	to->nc += swapped ? s->cc : s->nc;
	to->tt += s->tt;
	to->ct += s->ct;
}

int64_t vw_table_find(const struct vw_table *t, const struct cp_key *k)
{
	if (!t->nslots)
		return -1;
	for (uint32_t i = key_hash(k) & (t->nslots - 1);; i = (i + 1) & (t->nslots - 1)) {
		uint32_t v = t->slots[i];
		if (!v)
			return -1;
		if (!key_cmp(&t->funcs[v - 1].key, k))
			return v - 1;
	}
}

/* Finds `key` or appends it; the table has room (nslots > 2 * final nfuncs). A missing
 * name or file reads as "". */
static uint32_t find_or_add(struct vw_table *t, const struct cp_key *key)
{
	struct cp_key kk = *key, *k = &kk;
	if (!kk.name)
		kk.name = "";
	if (!kk.file)
		kk.file = "";
	uint32_t i = key_hash(k) & (t->nslots - 1);
	for (;; i = (i + 1) & (t->nslots - 1)) {
		uint32_t v = t->slots[i];
		if (!v)
			break;
		if (!key_cmp(&t->funcs[v - 1].key, k))
			return v - 1;
	}
	t->funcs[t->nfuncs].key = *k;
	t->slots[i] = ++t->nfuncs;
	return t->nfuncs - 1;
}

static int edge_by_func(const void *a, const void *b)
{
	const struct vw_edge *x = a, *y = b;
	return (x->func > y->func) - (x->func < y->func);
}

/* Sorts one callers list by caller and sums the entries naming the same caller (an
 * edge found in several dicts). */
static void merge_callers(struct vw_func *f)
{
	qsort(f->callers, f->ncallers, sizeof(*f->callers), edge_by_func);
	uint32_t m = 0;
	for (uint32_t i = 0; i < f->ncallers; i++) {
		if (m && f->callers[m - 1].func == f->callers[i].func)
			stat_add(&f->callers[m - 1].s, &f->callers[i].s, 0);
		else
			f->callers[m++] = f->callers[i];
	}
	f->ncallers = m;
}

/* Lays out the callers lists in t->edges[0, ne), one slice per function in the order
 * the dicts give them, and the callees lists in t->edges[ne, 2 ne) by a counting sort
 * on the caller: two passes, no global sort, no copy of the edges but these two. */
static int link_edges(struct vw_table *t, const struct cp_stats *const *stats, size_t n,
		      const uint32_t *map, size_t ne)
{
	t->edges = big_calloc(2 * ne, sizeof(*t->edges));
	uint32_t *at = big_calloc((size_t)t->nfuncs + 1, sizeof(*at));
	if (!t->edges || !at) {
		free(at);
		return -ENOMEM;
	}
	size_t base = 0;
	for (size_t i = 0; i < n; i++) {
		for (uint32_t j = 0; j < stats[i]->nfuncs; j++)
			at[map[base + j]] += stats[i]->funcs[j].ncallers;
		base += stats[i]->nfuncs;
	}
	size_t off = 0;
	for (uint32_t f = 0; f < t->nfuncs; f++) {
		t->funcs[f].callers = &t->edges[off];
		off += at[f];
	}
	base = 0;
	for (size_t i = 0; i < n; i++) {
		const struct cp_stats *st = stats[i];
		for (uint32_t j = 0; j < st->nfuncs; j++) {
			const struct cp_func *src = &st->funcs[j];
			struct vw_func *f = &t->funcs[map[base + j]];
			for (uint32_t c = 0; c < src->ncallers; c++) {
				if (src->callers[c].caller >= st->nfuncs)
					continue;
				f->callers[f->ncallers++] = (struct vw_edge){
				    map[base + src->callers[c].caller], src->callers[c].s};
			}
		}
		base += st->nfuncs;
	}
	memset(at, 0, ((size_t)t->nfuncs + 1) * sizeof(*at));
	for (uint32_t f = 0; f < t->nfuncs; f++) {
		if (n > 1 && t->funcs[f].ncallers > 1)
			merge_callers(&t->funcs[f]);
		for (uint32_t c = 0; c < t->funcs[f].ncallers; c++)
			at[t->funcs[f].callers[c].func]++;
	}
	off = ne;
	for (uint32_t f = 0; f < t->nfuncs; f++) {
		t->funcs[f].callees = &t->edges[off];
		off += at[f];
	}
	for (uint32_t f = 0; f < t->nfuncs; f++)
		for (uint32_t c = 0; c < t->funcs[f].ncallers; c++) {
			const struct vw_edge *e = &t->funcs[f].callers[c];
			struct vw_func *g = &t->funcs[e->func];
			g->callees[g->ncallees++] = (struct vw_edge){f, e->s};
		}
	free(at);
	return 0;
}

/* yappi's pstat files hold a function's (total, primitive) where cProfile's hold
 * (primitive, total); their edges are in cProfile's order. Primitive calls can never
 * outnumber calls, so a dict where some function has more is read the other way. */
static int counts_swapped(const struct cp_stats *st)
{
	for (uint32_t j = 0; j < st->nfuncs; j++)
		if (st->funcs[j].s.cc > st->funcs[j].s.nc)
			return 1;
	return 0;
}

int vw_table_build(struct vw_table *t, const struct cp_stats *const *stats, size_t n)
{
	memset(t, 0, sizeof(*t));
	size_t nf = 0, ne = 0;
	for (size_t i = 0; i < n; i++) {
		nf += stats[i]->nfuncs;
		for (uint32_t j = 0; j < stats[i]->nfuncs; j++)
			ne += stats[i]->funcs[j].ncallers;
	}
	if (nf >= UINT32_MAX / 4)
		return -ENOMEM;
	uint32_t nslots = 16;
	while (nslots < 2 * nf)
		nslots *= 2;
	t->funcs = big_calloc(nf, sizeof(*t->funcs));
	t->slots = big_calloc(nslots, sizeof(*t->slots));
	t->nslots = nslots;
	uint32_t *map = big_calloc(nf, sizeof(*map));
	int err = -ENOMEM;
	if (!t->funcs || !t->slots || !map)
		goto out;

	size_t base = 0;
	for (size_t i = 0; i < n; i++) {
		const struct cp_stats *st = stats[i];
		int swapped = counts_swapped(st);
		for (uint32_t j = 0; j < st->nfuncs; j++) {
			map[base + j] = find_or_add(t, &st->funcs[j].key);
			stat_add(&t->funcs[map[base + j]].s, &st->funcs[j].s, swapped);
		}
		base += st->nfuncs;
	}
	err = link_edges(t, stats, n, map, ne);
	for (uint32_t i = 0; i < t->nfuncs; i++) {
		t->total_tt += t->funcs[i].s.tt;
		t->total_nc += t->funcs[i].s.nc;
		t->total_cc += t->funcs[i].s.cc;
	}
out:
	free(map);
	if (err)
		vw_table_free(t);
	return err;
}

void vw_table_free(struct vw_table *t)
{
	free(t->funcs);
	free(t->edges);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

double vw_tavg(const struct cp_stat *s)
{
	return s->nc ? s->ct / (double)s->nc : 0.0;
}

static int num_cmp(double a, double b)
{
	return (a > b) - (a < b);
}

/* Compares two stats for the sort `by`, largest first for numbers; 0 on a tie. */
static int stat_cmp(enum vw_sort by, const struct cp_stat *a, const struct cp_stat *b)
{
	switch (by) {
	case VW_SORT_NCALL:
		if (a->nc != b->nc)
			return a->nc > b->nc ? -1 : 1;
		return (a->cc < b->cc) - (a->cc > b->cc);
	case VW_SORT_TSUB:
		return num_cmp(b->tt, a->tt);
	case VW_SORT_TTOT:
		return num_cmp(b->ct, a->ct);
	case VW_SORT_TAVG:
		return num_cmp(vw_tavg(b), vw_tavg(a));
	default:
		return 0;
	}
}

static int row_cmp(enum vw_sort by, int reverse, const struct cp_key *ka, const struct cp_stat *sa,
		   const struct cp_key *kb, const struct cp_stat *sb)
{
	int c = stat_cmp(by, sa, sb);
	if (!c && by == VW_SORT_FILE) {
		c = strcmp(ka->file, kb->file);
		if (!c)
			c = (ka->line > kb->line) - (ka->line < kb->line);
	}
	if (!c)
		c = key_cmp(ka, kb);
	return reverse ? -c : c;
}

struct sort_ctx {
	const struct vw_table *t;
	const struct vw_query *q;
};

static int index_cmp(const void *a, const void *b, void *arg)
{
	const struct sort_ctx *x = arg;
	const struct vw_func *fa = &x->t->funcs[*(const uint32_t *)a];
	const struct vw_func *fb = &x->t->funcs[*(const uint32_t *)b];
	return row_cmp(x->q->sort, x->q->reverse, &fa->key, &fa->s, &fb->key, &fb->s);
}

static int edge_cmp(const void *a, const void *b, void *arg)
{
	const struct sort_ctx *x = arg;
	const struct vw_edge *ea = a, *eb = b;
	return row_cmp(x->q->sort, x->q->reverse, &x->t->funcs[ea->func].key, &ea->s,
		       &x->t->funcs[eb->func].key, &eb->s);
}

uint32_t vw_table_select(const struct vw_table *t, const struct vw_query *q, uint32_t *out)
{
	uint32_t n = 0;
	const char *f = q->filter && *q->filter ? q->filter : NULL;
	for (uint32_t i = 0; i < t->nfuncs; i++)
		if (!f || strstr(t->funcs[i].key.name, f) || strstr(t->funcs[i].key.file, f))
			out[n++] = i;
	struct sort_ctx x = {t, q};
	qsort_r(out, n, sizeof(*out), index_cmp, &x);
	return n;
}

void vw_edges_sort(const struct vw_table *t, struct vw_edge *e, uint32_t n,
		   const struct vw_query *q)
{
	struct sort_ctx x = {t, q};
	qsort_r(e, n, sizeof(*e), edge_cmp, &x);
}

static const char *const sort_names[VW_SORT_COUNT] = {
    [VW_SORT_NAME] = "name", [VW_SORT_FILE] = "file", [VW_SORT_NCALL] = "ncall",
    [VW_SORT_TSUB] = "tsub", [VW_SORT_TTOT] = "ttot", [VW_SORT_TAVG] = "tavg",
};

int vw_sort_parse(const char *s, enum vw_sort *out)
{
	for (int i = 0; i < VW_SORT_COUNT; i++)
		if (!strcmp(s, sort_names[i])) {
			*out = (enum vw_sort)i;
			return 0;
		}
	return -EINVAL;
}

const char *vw_sort_name(enum vw_sort s)
{
	return s < VW_SORT_COUNT ? sort_names[s] : "?";
}
