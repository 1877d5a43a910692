/* tree.c: the whole-program tree's rows (tree.h) and the table behind them, built from
 * the model's profiles with the writer's own synthetic root (libprof/whole.c), so the
 * terminal and snakeviz start from the same tree. Main thread only. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tree.h"
#include "whole.h"

static int grow_rows(struct vw_tree *tr, uint32_t need)
{
	if (need <= tr->cap)
		return 0;
	uint32_t cap = tr->cap ? tr->cap : 64;
	while (cap < need)
		cap *= 2;
	struct vw_tnode *r = realloc(tr->rows, (size_t)cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	tr->rows = r;
	tr->cap = cap;
	return 0;
}

int vw_tree_init(struct vw_tree *tr, const struct vw_table *t, uint32_t root, uint32_t levels)
{
	memset(tr, 0, sizeof(*tr));
	tr->t = t;
	if (grow_rows(tr, 1) < 0)
		return -ENOMEM;
	tr->rows[0] = (struct vw_tnode){root, 0, t->funcs[root].s, 0};
	tr->n = 1;
	tr->total = t->funcs[root].s.ct;
	/* Rows only grow below the row being opened, so one pass from the top opens
	 * every row above `levels`. */
	for (uint32_t i = 0; i < tr->n; i++)
		if (tr->rows[i].depth < levels && vw_tree_open(tr, i) < 0)
			return -ENOMEM;
	return 0;
}

void vw_tree_free(struct vw_tree *tr)
{
	free(tr->rows);
	memset(tr, 0, sizeof(*tr));
}

static int by_ct_desc(const void *a, const void *b, void *arg)
{
	const struct vw_table *t = arg;
	const struct vw_edge *x = a, *y = b;
	if (x->s.ct != y->s.ct)
		return x->s.ct < y->s.ct ? 1 : -1;
	int c = strcmp(t->funcs[x->func].key.name, t->funcs[y->func].key.name);
	return c ? c : (x->func > y->func) - (x->func < y->func);
}

int vw_tree_open(struct vw_tree *tr, uint32_t i)
{
	struct vw_tnode *r = &tr->rows[i];
	const struct vw_func *f = &tr->t->funcs[r->func];
	uint32_t k = f->ncallees;
	if (r->open || !k)
		return 0;
	struct vw_edge *e = malloc((size_t)k * sizeof(*e));
	if (!e || grow_rows(tr, tr->n + k) < 0) {
		free(e);
		return -ENOMEM;
	}
	memcpy(e, f->callees, (size_t)k * sizeof(*e));
	qsort_r(e, k, sizeof(*e), by_ct_desc, (void *)tr->t);
	r = &tr->rows[i];
	memmove(&tr->rows[i + 1 + k], &tr->rows[i + 1], (size_t)(tr->n - i - 1) * sizeof(*r));
	for (uint32_t j = 0; j < k; j++)
		tr->rows[i + 1 + j] = (struct vw_tnode){e[j].func, r->depth + 1, e[j].s, 0};
	r->open = 1;
	tr->n += k;
	free(e);
	return 0;
}

void vw_tree_close(struct vw_tree *tr, uint32_t i)
{
	uint32_t end = i + 1;
	while (end < tr->n && tr->rows[end].depth > tr->rows[i].depth)
		end++;
	memmove(&tr->rows[i + 1], &tr->rows[end], (size_t)(tr->n - end) * sizeof(*tr->rows));
	tr->n -= end - i - 1;
	tr->rows[i].open = 0;
}

uint32_t vw_tree_parent(const struct vw_tree *tr, uint32_t i)
{
	uint32_t d = tr->rows[i].depth;
	while (i > 0 && tr->rows[i].depth >= d)
		i--;
	return i;
}

const struct vw_table *vw_model_whole(struct vw_model *m, uint32_t *root)
{
	if (m->whole) {
		*root = m->whole_root;
		return m->whole;
	}
	struct cp_stats *st = calloc(m->nprofiles + 1, sizeof(*st));
	const struct cp_stats **sp = calloc(m->nprofiles + 1, sizeof(*sp));
	struct vw_table *t = calloc(1, sizeof(*t));
	if (!m->whole_arena)
		m->whole_arena = cp_arena_new();
	int rc = st && sp && t && m->whole_arena ? 0 : -ENOMEM;
	for (uint32_t i = 0; i < m->nprofiles && !rc; i++) {
		rc = cp_whole_program(m->profiles[i], &m->profiles[i]->stats, m->whole_arena,
				      &st[i]);
		sp[i] = &st[i];
	}
	if (!rc)
		rc = vw_table_build(t, sp, m->nprofiles);
	free(st);
	free(sp);
	struct cp_key k = {"~", 0, CP_WHOLE_ROOT};
	int64_t r = rc ? -1 : vw_table_find(t, &k);
	if (r < 0) {
		if (!rc)
			vw_table_free(t);
		free(t);
		return NULL;
	}
	m->whole = t;
	m->whole_root = (uint32_t)r;
	*root = m->whole_root;
	return t;
}
