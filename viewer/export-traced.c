/* export-traced.c: splits a traced profile's table by task for the exports. A coprof
 * file's top-level table sums every context's numbers and each task keeps its own
 * table, so the threads' own part is the top level less the tasks'. Runs in the
 * coprof command, single-threaded. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "export-traced.h"

uint64_t vw_ns(double s)
{
	return s > 0 && isfinite(s) ? (uint64_t)llround(s * 1e9) : 0;
}

/* The merged table's caller->callee pairs, each with a slot for what the current
 * file's tasks put on it; per function, what they put outside any edge. */
struct split {
	const struct vw_table *t;
	uint64_t *keys; /* (callee + 1) << 32 | (caller + 1); 0: an empty slot */
	uint64_t *e_ns, *e_nc;
	uint64_t *f_ns, *f_nc;
	uint32_t mask;
	vw_part_fn fn;
	void *arg;
};

static uint32_t pair_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (uint32_t)k;
}

/* The slot of the pair, or -1 when the merged table has no such edge. */
static int64_t pair_slot(const struct split *s, uint32_t callee, uint32_t caller)
{
	uint64_t k = ((uint64_t)callee + 1) << 32 | ((uint64_t)caller + 1);
	for (uint32_t h = pair_hash(k) & s->mask;; h = (h + 1) & s->mask) {
		if (s->keys[h] == k)
			return h;
		if (!s->keys[h])
			return -1;
	}
}

static int split_init(struct split *s, const struct vw_table *t)
{
	uint64_t ne = 0;
	for (uint32_t i = 0; i < t->nfuncs; i++)
		ne += t->funcs[i].ncallers;
	uint64_t n = 16;
	while (n < 2 * ne + 2)
		n *= 2;
	if (n > UINT32_MAX)
		return -ENOMEM;
	s->t = t;
	s->mask = (uint32_t)n - 1;
	s->keys = calloc(n, sizeof(*s->keys));
	s->e_ns = calloc(n, sizeof(*s->e_ns));
	s->e_nc = calloc(n, sizeof(*s->e_nc));
	s->f_ns = calloc(t->nfuncs + 1, sizeof(*s->f_ns));
	s->f_nc = calloc(t->nfuncs + 1, sizeof(*s->f_nc));
	if (!s->keys || !s->e_ns || !s->e_nc || !s->f_ns || !s->f_nc)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->nfuncs; i++)
		for (uint32_t c = 0; c < t->funcs[i].ncallers; c++) {
			uint64_t k =
			    ((uint64_t)i + 1) << 32 | ((uint64_t)t->funcs[i].callers[c].func + 1);
			uint32_t h = pair_hash(k) & s->mask;
			while (s->keys[h] && s->keys[h] != k)
				h = (h + 1) & s->mask;
			s->keys[h] = k;
		}
	return 0;
}

static void split_free(struct split *s)
{
	free(s->keys);
	free(s->e_ns);
	free(s->e_nc);
	free(s->f_ns);
	free(s->f_nc);
}

static uint64_t less(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* Settles one piece already in `part` against its slot (`ns`, `nc`): a task's adds to
 * it; the top level's (`rest` 1) keeps only what the tasks left. Then emits it unless
 * empty. */
static int settle(struct split *s, struct vw_part *part, int64_t caller, uint64_t *ns, uint64_t *nc,
		  int rest)
{
	if (rest) {
		part->ns = less(part->ns, *ns);
		part->nc = less(part->nc, *nc);
	} else {
		*ns += part->ns;
		*nc += part->nc;
	}
	part->caller = caller;
	return part->ns || part->nc ? s->fn(s->arg, part) : 0;
}

/* Emits the pieces of one table `st` of file `ex`: a task's (`rest` 0), whose numbers
 * are added to the slots, or the file's top level (`rest` 1), from which the slots
 * are taken. A function's piece outside its edges is its own time less its edges'. */
static int walk(struct split *s, const struct cp_stats *st, struct vw_part *part, int rest)
{
	for (uint32_t j = 0; j < st->nfuncs; j++) {
		const struct cp_func *f = &st->funcs[j];
		int64_t fi = vw_table_find(s->t, &f->key);
		uint64_t ett = 0, enc = 0;
		int rc;
		if (fi < 0)
			continue;
		part->callee = (uint32_t)fi;
		for (uint32_t c = 0; c < f->ncallers; c++) {
			const struct cp_edge *e = &f->callers[c];
			int64_t ci = e->caller < st->nfuncs
					 ? vw_table_find(s->t, &st->funcs[e->caller].key)
					 : -1;
			int64_t slot = ci < 0 ? -1 : pair_slot(s, (uint32_t)fi, (uint32_t)ci);
			if (slot < 0) /* the merged table dropped it: a malformed edge */
				continue;
			part->ns = vw_ns(e->s.tt);
			part->nc = e->s.nc;
			ett += part->ns;
			enc += part->nc;
			if ((rc = settle(s, part, ci, &s->e_ns[slot], &s->e_nc[slot], rest)))
				return rc;
		}
		part->ns = less(vw_ns(f->s.tt), ett);
		part->nc = less(f->s.nc, enc);
		if ((rc = settle(s, part, -1, &s->f_ns[fi], &s->f_nc[fi], rest)))
			return rc;
	}
	return 0;
}

int vw_traced_parts(const struct vw_model *m, vw_part_fn fn, void *arg)
{
	struct split s = {.fn = fn, .arg = arg};
	int rc = split_init(&s, &m->funcs), used = 0;
	for (uint32_t i = 0; i < m->nprofiles && !rc; i++) {
		const struct cp_profile *p = m->profiles[i];
		const struct cp_extras *ex = &p->ex;
		struct vw_part part = {.ex = ex};
		/* The slots hold one file's tasks: what an earlier file put there would be
		 * taken from this file's rest. */
		if (used) {
			memset(s.e_ns, 0, ((size_t)s.mask + 1) * sizeof(*s.e_ns));
			memset(s.e_nc, 0, ((size_t)s.mask + 1) * sizeof(*s.e_nc));
			memset(s.f_ns, 0, ((size_t)s.t->nfuncs + 1) * sizeof(*s.f_ns));
			memset(s.f_nc, 0, ((size_t)s.t->nfuncs + 1) * sizeof(*s.f_nc));
		}
		used = ex->ntasks > 0;
		for (uint32_t k = 0; k < ex->ntasks && !rc; k++) {
			part.task = &ex->tasks[k];
			part.thread = (int64_t)ex->tasks[k].thread;
			rc = walk(&s, &ex->tasks[k].stats, &part, 0);
		}
		part.task = NULL;
		part.thread = ex->nthreads == 1 ? (int64_t)ex->threads[0].tid : -1;
		if (!rc)
			rc = walk(&s, &p->stats, &part, 1);
	}
	split_free(&s);
	return rc;
}
