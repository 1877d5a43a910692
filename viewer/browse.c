/* browse.c: the viewer's navigation: a stack of screens over the model, each with its
 * rows in display order and a cursor. No curses; driven by cmd-view.c's key loop on the
 * main thread. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "browse.h"

/* Which item the cursor is on, so a re-sort or re-filter can find it again: a function
 * index (FUNCS), or the row's section and function (EDGES: 0 caller, 1 self, 2 callee),
 * or a task or thread index. */
struct mark {
	int section;
	uint32_t item;
	int valid;
};

static struct mark cursor_mark(const struct vw_screen *s)
{
	struct mark k = {0, 0, 0};
	if (!s->nrows)
		return k;
	k.valid = 1;
	if (s->kind == VW_SCR_TREE) {
		k.item = s->cursor; /* tree rows do not move on a sort or filter */
	} else if (s->kind != VW_SCR_EDGES) {
		k.item = s->rows[s->cursor];
	} else if (s->cursor < s->ncallers) {
		k.item = s->edges[s->cursor].func;
	} else if (s->cursor == s->ncallers) {
		k.section = 1;
		k.item = s->func;
	} else {
		k.section = 2;
		k.item = s->edges[s->cursor - 1].func;
	}
	return k;
}

static uint32_t find_mark(const struct vw_screen *s, struct mark k, uint32_t fallback)
{
	if (k.valid)
		for (uint32_t i = 0; i < s->nrows; i++) {
			struct vw_screen probe = *s;
			probe.cursor = i;
			struct mark p = cursor_mark(&probe);
			if (p.section == k.section && p.item == k.item)
				return i;
		}
	return fallback < s->nrows ? fallback : (s->nrows ? s->nrows - 1 : 0);
}

static int by_ttot_desc(const void *a, const void *b, void *arg)
{
	const double *tt = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (tt[x] != tt[y])
		return tt[x] < tt[y] ? 1 : -1;
	return (x > y) - (x < y);
}

/* Tasks and threads are listed by ttot, largest first, then in file order. */
static int list_by_ttot(struct vw_screen *s, const struct vw_model *m)
{
	int tasks = s->kind == VW_SCR_TASKS;
	uint32_t n = tasks ? m->ntasks : m->nthreads;
	double *tt = malloc((n ? n : 1) * sizeof(*tt));
	if (!tt)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		s->rows[i] = i;
		tt[i] = tasks ? m->tasks[i].t->ttot : m->threads[i].t->ttot;
	}
	qsort_r(s->rows, n, sizeof(*s->rows), by_ttot_desc, tt);
	s->nrows = n;
	free(tt);
	return 0;
}

/* Recomputes a screen's rows for the browser's current sort and filter, keeping the
 * cursor on the same item when it is still listed. */
static int refresh(struct vw_browser *b, struct vw_screen *s)
{
	struct mark k = cursor_mark(s);
	uint32_t old = s->cursor;
	switch (s->kind) {
	case VW_SCR_FUNCS:
		s->nrows = vw_table_select(s->table, &b->q, s->rows);
		break;
	case VW_SCR_EDGES: {
		const struct vw_func *f = &s->table->funcs[s->func];
		memcpy(s->edges, f->callers, f->ncallers * sizeof(*s->edges));
		memcpy(s->edges + f->ncallers, f->callees, f->ncallees * sizeof(*s->edges));
		s->ncallers = f->ncallers;
		s->ncallees = f->ncallees;
		struct vw_query q = b->q;
		q.filter = NULL;
		vw_edges_sort(s->table, s->edges, s->ncallers, &q);
		vw_edges_sort(s->table, s->edges + s->ncallers, s->ncallees, &q);
		s->nrows = s->ncallers + 1 + s->ncallees;
		if (!k.valid) {
			k = (struct mark){1, s->func, 1};
		}
		break;
	}
	case VW_SCR_TASKS:
	case VW_SCR_THREADS:
		if (list_by_ttot(s, b->m))
			return -ENOMEM;
		break;
	case VW_SCR_TREE:
		s->nrows = s->tree->n;
		s->cursor = old < s->nrows ? old : 0;
		return 0;
	case VW_SCR_STALLS: /* the model keeps them longest first */
		for (s->nrows = 0; s->nrows < b->m->nstalls; s->nrows++)
			s->rows[s->nrows] = s->nrows;
		s->cursor = old < s->nrows ? old : 0;
		return 0;
	}
	s->cursor = find_mark(s, k, old);
	return 0;
}

static void screen_free(struct vw_screen *s)
{
	if (s->tree) {
		vw_tree_free(s->tree);
		free(s->tree);
	}
	free(s->rows);
	free(s->edges);
	memset(s, 0, sizeof(*s));
}

/* Pushes a screen of `kind` and fills its rows. */
static int push(struct vw_browser *b, enum vw_screen_kind kind, const struct vw_table *t,
		int64_t task, uint32_t func)
{
	if (b->depth == b->cap) {
		uint32_t cap = b->cap ? 2 * b->cap : 8;
		struct vw_screen *st = realloc(b->stack, cap * sizeof(*st));
		if (!st)
			return -ENOMEM;
		b->stack = st;
		b->cap = cap;
	}
	struct vw_screen *s = &b->stack[b->depth];
	memset(s, 0, sizeof(*s));
	s->kind = kind;
	s->table = t;
	s->task = task;
	s->func = func;
	size_t n = 1;
	if (kind == VW_SCR_FUNCS)
		n = t->nfuncs;
	else if (kind == VW_SCR_TASKS)
		n = b->m->ntasks;
	else if (kind == VW_SCR_THREADS)
		n = b->m->nthreads;
	else if (kind == VW_SCR_STALLS)
		n = b->m->nstalls;
	s->rows = calloc(n ? n : 1, sizeof(*s->rows));
	if (kind == VW_SCR_EDGES) {
		const struct vw_func *f = &t->funcs[func];
		s->edges = calloc((size_t)f->ncallers + f->ncallees + 1, sizeof(*s->edges));
	}
	/* The tree opens on the root and the node of every thread and task. */
	if (kind == VW_SCR_TREE && (s->tree = calloc(1, sizeof(*s->tree))) &&
	    vw_tree_init(s->tree, t, func, 2) < 0) {
		vw_tree_free(s->tree);
		free(s->tree);
		s->tree = NULL;
	}
	if (!s->rows || (kind == VW_SCR_EDGES && !s->edges) || (kind == VW_SCR_TREE && !s->tree) ||
	    refresh(b, s)) {
		screen_free(s);
		return -ENOMEM;
	}
	b->depth++;
	return 0;
}

static void pop_to(struct vw_browser *b, uint32_t depth)
{
	while (b->depth > depth)
		screen_free(&b->stack[--b->depth]);
}

int vw_browser_init(struct vw_browser *b, struct vw_model *m)
{
	memset(b, 0, sizeof(*b));
	b->m = m;
	b->q.sort = VW_SORT_TTOT;
	return push(b, VW_SCR_FUNCS, &m->funcs, -1, 0);
}

void vw_browser_free(struct vw_browser *b)
{
	pop_to(b, 0);
	free(b->stack);
	memset(b, 0, sizeof(*b));
}

static void move(struct vw_screen *s, int64_t by)
{
	int64_t c = (int64_t)s->cursor + by;
	if (c >= (int64_t)s->nrows)
		c = (int64_t)s->nrows - 1;
	if (c < 0)
		c = 0;
	s->cursor = (uint32_t)c;
}

/* Enter: from a function row into its callers/callees, from a caller or callee row to
 * that function's, from a task into its own function table, from a stall into its
 * innermost function's callers/callees. */
static int enter(struct vw_browser *b, struct vw_screen *s)
{
	if (!s->nrows)
		return 0;
	switch (s->kind) {
	case VW_SCR_FUNCS:
		return push(b, VW_SCR_EDGES, s->table, s->task, s->rows[s->cursor]);
	case VW_SCR_EDGES: {
		struct mark k = cursor_mark(s);
		if (k.section == 1) {
			b->note =
			    " This is the function itself: Enter on a caller or callee follows it";
			return 0;
		}
		return push(b, VW_SCR_EDGES, s->table, s->task, k.item);
	}
	case VW_SCR_TASKS: {
		uint32_t i = s->rows[s->cursor];
		const struct vw_table *t = vw_model_task_table(b->m, i);
		if (!t)
			return -ENOMEM;
		return push(b, VW_SCR_FUNCS, t, i, 0);
	}
	case VW_SCR_THREADS:
		b->note = "threads have no function table of their own";
		return 0;
	case VW_SCR_STALLS: {
		const struct cp_stall *st = b->m->stalls[s->rows[s->cursor]].s;
		int64_t f = st->depth ? vw_table_find(&b->m->funcs, &st->frames[0]) : -1;
		if (f < 0) {
			b->note = " This stall's stack names no function of the table";
			return 0;
		}
		return push(b, VW_SCR_EDGES, &b->m->funcs, -1, (uint32_t)f);
	}
	case VW_SCR_TREE: {
		struct vw_tnode *r = &s->tree->rows[s->cursor];
		if (r->open)
			vw_tree_close(s->tree, s->cursor);
		else if (!s->tree->t->funcs[r->func].ncallees)
			b->note = " This function calls nothing that was profiled";
		else if (vw_tree_open(s->tree, s->cursor) < 0)
			return -ENOMEM;
		s->nrows = s->tree->n;
		return 0;
	}
	}
	return 0;
}

/* The tree's + and -: open the row; close it, or when closed go to its parent. */
static int tree_key(struct vw_browser *b, struct vw_screen *s, enum vw_action a)
{
	if (s->kind != VW_SCR_TREE || !s->nrows) {
		b->note = " + and - open and close rows of the tree (W)";
		return 0;
	}
	struct vw_tnode *r = &s->tree->rows[s->cursor];
	if (a == VW_EXPAND) {
		if (!r->open && vw_tree_open(s->tree, s->cursor) < 0)
			return -ENOMEM;
	} else if (r->open) {
		vw_tree_close(s->tree, s->cursor);
	} else {
		s->cursor = vw_tree_parent(s->tree, s->cursor);
	}
	s->nrows = s->tree->n;
	return 0;
}

int vw_browser_act(struct vw_browser *b, enum vw_action a, uint32_t page)
{
	struct vw_screen *s = vw_browser_top(b);
	b->note = NULL;
	if (page < 1)
		page = 1;
	switch (a) {
	case VW_UP:
		move(s, -1);
		return 0;
	case VW_DOWN:
		move(s, 1);
		return 0;
	case VW_PAGE_UP:
		move(s, -(int64_t)page);
		return 0;
	case VW_PAGE_DOWN:
		move(s, page);
		return 0;
	case VW_HOME:
		s->cursor = 0;
		return 0;
	case VW_END:
		move(s, s->nrows);
		return 0;
	case VW_ENTER:
		return enter(b, s);
	case VW_BACK:
		if (b->depth > 1) {
			pop_to(b, b->depth - 1);
			return refresh(b, vw_browser_top(b));
		}
		return 0;
	case VW_REVERSE:
		b->q.reverse = !b->q.reverse;
		return refresh(b, s);
	case VW_FUNCS:
		pop_to(b, 1);
		return refresh(b, vw_browser_top(b));
	case VW_TASKS:
	case VW_THREADS:
		pop_to(b, 1);
		return push(b, a == VW_TASKS ? VW_SCR_TASKS : VW_SCR_THREADS, NULL, -1, 0);
	case VW_STALLS:
		pop_to(b, 1);
		return push(b, VW_SCR_STALLS, NULL, -1, 0);
	case VW_TREE: {
		uint32_t root;
		const struct vw_table *t = vw_model_whole(b->m, &root);
		if (!t)
			return -ENOMEM;
		pop_to(b, 1);
		return push(b, VW_SCR_TREE, t, -1, root);
	}
	case VW_EXPAND:
	case VW_COLLAPSE:
		return tree_key(b, s, a);
	}
	return 0;
}

int vw_browser_sort(struct vw_browser *b, enum vw_sort s)
{
	b->note = NULL;
	b->q.sort = s;
	b->q.reverse = 0;
	return refresh(b, vw_browser_top(b));
}

int vw_browser_filter(struct vw_browser *b, const char *text)
{
	b->note = NULL;
	size_t n = strlen(text);
	if (n >= sizeof(b->filter))
		n = sizeof(b->filter) - 1;
	memcpy(b->filter, text, n);
	b->filter[n] = 0;
	b->q.filter = n ? b->filter : NULL;
	return refresh(b, vw_browser_top(b));
}

void vw_screen_scroll(struct vw_screen *s, uint32_t height)
{
	if (height < 1)
		height = 1;
	if (s->cursor < s->top)
		s->top = s->cursor;
	else if (s->cursor >= s->top + height)
		s->top = s->cursor - height + 1;
	if (s->nrows <= height)
		s->top = 0;
	else if (s->top > s->nrows - height)
		s->top = s->nrows - height;
}
