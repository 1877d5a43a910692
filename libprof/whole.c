/* whole.c: joins a profile's roots under one synthetic root (whole.h), for the writer
 * (what snakeviz and gprof2dot draw) and the viewer's tree view. Plain computation on
 * a struct cp_profile, in the caller's thread; everything it builds is in the
 * caller's arena. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "keymap.h"
#include "marshal.h"
#include "whole.h"

/* Below this a remainder is rounding: trace times are whole ns turned into seconds. */
#define EPS 1e-10

struct cp_stat cp_root_part(const struct cp_stats *s, uint32_t i)
{
	const struct cp_func *f = &s->funcs[i];
	uint64_t nc = f->s.nc;
	double tt = f->s.tt, ct = f->s.ct;

	for (uint32_t j = 0; j < f->ncallers; j++) {
		const struct cp_edge *e = &f->callers[j];
		nc = nc > e->s.nc ? nc - e->s.nc : 0;
		tt -= e->s.tt;
		if (e->caller != i)
			ct -= e->s.ct;
	}
	if (tt < EPS)
		tt = 0;
	if (ct < EPS)
		ct = 0;
	return (struct cp_stat){nc, nc, tt, ct};
}

int cp_is_root(const struct cp_stats *s, uint32_t i, const struct cp_stat *part)
{
	return s->funcs[i].ncallers == 0 || part->nc > 0 || part->ct > EPS;
}

/* An edge from a synthetic node (index into the output) to a function. */
struct sedge {
	uint32_t from, to;
	struct cp_stat s;
};

struct build {
	const struct cp_stats *s;
	struct cp_arena *a;
	struct cp_keymap keys; /* every key of the output -> its index */
	struct cp_stat *rem;   /* per function of s: root calls not yet placed */
	struct cp_key *nodes;  /* synthetic keys; nodes[0] is the root */
	uint32_t nnodes, cnodes;
	struct sedge *edges;
	uint32_t nedges, cedges;
	uint32_t *slot; /* per output function: its edge from the current node + 1 */
	uint32_t node0; /* the first edge of the current node */
};

/* What of `part` (a context's root calls of one function) the rest `rem` still has:
 * in a file the engine wrote it is all of it; a hand-made or merged file may claim
 * more root calls in a table than the top-level dict has, and pstats readers expect
 * a function's callers never to add up to more than its calls. */
static struct cp_stat clamp(const struct cp_stat *part, const struct cp_stat *rem)
{
	uint64_t nc = part->nc < rem->nc ? part->nc : rem->nc;
	return (struct cp_stat){nc, nc, part->tt < rem->tt ? part->tt : rem->tt,
				part->ct < rem->ct ? part->ct : rem->ct};
}

static void sub(struct cp_stat *a, const struct cp_stat *b)
{
	a->nc = a->nc > b->nc ? a->nc - b->nc : 0;
	a->cc = a->nc;
	a->tt = a->tt > b->tt ? a->tt - b->tt : 0;
	a->ct = a->ct > b->ct ? a->ct - b->ct : 0;
}

/* Adds synthetic key ("~", 0, "<what>"), made unique with a number ("<what 2>") if a
 * function of the profile, or an earlier node, already has it. The name is checked
 * as it will be written, invalid UTF-8 repaired (two task names that differ only in
 * invalid bytes are one name in the file). */
static int add_node(struct build *b, const char *what)
{
	char n[600];
	const char *name;
	uint32_t idx = b->s->nfuncs + b->nnodes;
	int found = 1;

	snprintf(n, sizeof(n), "<%s>", what);
	for (unsigned k = 2;; k++) {
		uint32_t v = idx;
		if (!(name = cp_utf8_repair(b->a, n)))
			return -ENOMEM;
		if (cp_keymap_get_or_put(&b->keys, "~", 1, 0, name, strlen(name), &v, &found) < 0)
			return -ENOMEM;
		if (!found)
			break;
		snprintf(n, sizeof(n), "<%s %u>", what, k);
	}
	if (cp_grow(&b->nodes, &b->cnodes, b->nnodes + 1, sizeof(*b->nodes), 16) < 0)
		return -ENOMEM;
	const char *copy = cp_arena_strdup(b->a, name, strlen(name));
	if (!copy)
		return -ENOMEM;
	b->nodes[b->nnodes++] = (struct cp_key){"~", 0, copy};
	b->node0 = b->nedges;
	return 0;
}

/* An edge from the newest node to output function `to`; equal targets are summed. */
static int add_edge(struct build *b, uint32_t to, const struct cp_stat *st)
{
	uint32_t from = b->s->nfuncs + b->nnodes - 1;
	uint32_t k = b->slot[to];

	if (k > b->node0 && k <= b->nedges && b->edges[k - 1].to == to &&
	    b->edges[k - 1].from == from) {
		struct cp_stat *e = &b->edges[k - 1].s;
		e->nc += st->nc;
		e->cc += st->cc;
		e->tt += st->tt;
		e->ct += st->ct;
		return 0;
	}
	if (cp_grow(&b->edges, &b->cedges, b->nedges + 1, sizeof(*b->edges), 64) < 0)
		return -ENOMEM;
	b->edges[b->nedges++] = (struct sedge){from, to, *st};
	b->slot[to] = b->nedges;
	return 0;
}

/* The index in s of key k, or -1. */
static int64_t find(struct build *b, const struct cp_key *k)
{
	const char *file = k->file ? k->file : "", *name = k->name ? k->name : "";
	uint32_t v = UINT32_MAX;
	int found;

	if (cp_keymap_get_or_put(&b->keys, file, strlen(file), k->line, name, strlen(name), &v,
				 &found) < 0)
		return -2;
	return found && v < b->s->nfuncs ? (int64_t)v : -1;
}

/* Hangs the root calls `part` of function `k` from the newest node, as far as the
 * calls the table still leaves unplaced allow (none when `k` is not in the table, or
 * nothing is left of it). 0, or -ENOMEM. */
static int hang(struct build *b, const struct cp_key *k, const struct cp_stat *part)
{
	int64_t g = find(b, k);
	if (g == -2)
		return -ENOMEM;
	if (g < 0)
		return 0;
	struct cp_stat placed = clamp(part, &b->rem[g]);
	if (!placed.nc && placed.ct < EPS && (b->s->funcs[g].ncallers || b->slot[g]))
		return 0;
	sub(&b->rem[g], &placed);
	return add_edge(b, (uint32_t)g, &placed) < 0 ? -ENOMEM : 0;
}

/* Hangs the roots of `ts` (a task's own stats) from the newest node. */
static int add_task_roots(struct build *b, const struct cp_stats *ts)
{
	for (uint32_t i = 0; i < ts->nfuncs; i++) {
		if (ts->funcs[i].ncallers && !ts->funcs[i].callers)
			continue;
		struct cp_stat part = cp_root_part(ts, i);
		if (!cp_is_root(ts, i, &part))
			continue;
		if (hang(b, &ts->funcs[i].key, &part) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int add_thread_roots(struct build *b, const struct cp_thread *t)
{
	for (uint32_t i = 0; i < t->nroots; i++)
		if (hang(b, &t->roots[i].key, &t->roots[i].s) < 0)
			return -ENOMEM;
	return 0;
}

/* A task's weight (the ct its roots add up to, for choosing the largest) and kind:
 * the function of `s` its heaviest root is (the first of equal ones), its root
 * coroutine; -1 when it has none in `s`. -2: out of memory. */
static int64_t task_kind(struct build *b, const struct cp_stats *ts, double *w)
{
	int64_t kind = -1;
	double top = -1;

	*w = 0;
	for (uint32_t i = 0; i < ts->nfuncs; i++) {
		if (ts->funcs[i].ncallers && !ts->funcs[i].callers)
			continue;
		struct cp_stat part = cp_root_part(ts, i);
		if (!cp_is_root(ts, i, &part))
			continue;
		*w += part.ct;
		if (part.ct > top) {
			top = part.ct;
			kind = find(b, &ts->funcs[i].key);
			if (kind == -2)
				return -2;
		}
	}
	return kind;
}

/* Tasks of one kind: one node in the tree, or one task of its own. */
struct unit {
	double w;
	uint32_t first, last, n; /* its first and last task, and how many */
	int64_t kind;
};

static int by_weight(const void *x, const void *y)
{
	const struct unit *a = x, *b = y;
	if (a->w != b->w)
		return a->w > b->w ? -1 : 1;
	return a->first < b->first ? -1 : a->first > b->first;
}

/* One node per kind of task (issue 37): tasks whose root coroutine is the same
 * function share "<tasks: NAME ×N>", so a pool of identical workers is one wide
 * block whose functions snakeviz can label, not N slivers; a task alone of its kind
 * (or with no root in s) keeps "<task NAME>". The largest CP_WHOLE_MAX_TASKS nodes
 * are drawn, the rest share "<N more tasks>". Per-task numbers stay in the extras. */
static int add_tasks(struct build *b, const struct cp_extras *x)
{
	struct unit *u = calloc(x->ntasks + 1, sizeof(*u));
	uint32_t *next = calloc(x->ntasks + 1, sizeof(*next)); /* of its kind; 0: none */
	uint32_t *of = calloc((size_t)b->s->nfuncs + 1, sizeof(*of)); /* kind -> unit + 1 */
	uint32_t nu = 0;
	char name[600];
	int err = 0;

	if (!u || !next || !of) {
		err = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < x->ntasks; i++) {
		double w;
		int64_t kind = task_kind(b, &x->tasks[i].stats, &w);
		if (kind == -2) {
			err = -ENOMEM;
			goto out;
		}
		uint32_t *at = kind >= 0 ? &of[kind] : NULL;
		if (at && *at) {
			struct unit *v = &u[*at - 1];
			v->w += w;
			v->n++;
			next[v->last] = i;
			v->last = i;
			continue;
		}
		u[nu] = (struct unit){w, i, i, 1, kind};
		if (at)
			*at = nu + 1;
		nu++;
	}
	qsort(u, nu, sizeof(*u), by_weight);
	uint32_t rest = 0;
	for (uint32_t k = CP_WHOLE_MAX_TASKS; k < nu; k++)
		rest += u[k].n;
	for (uint32_t k = 0; k < nu && !err; k++) {
		const struct cp_task *t = &x->tasks[u[k].first];
		if (k < CP_WHOLE_MAX_TASKS && u[k].n > 1) {
			const char *fn = b->s->funcs[u[k].kind].key.name;
			snprintf(name, sizeof(name), "tasks: %s \u00d7%u", fn && *fn ? fn : "?",
				 u[k].n);
			err = add_node(b, name);
		} else if (k < CP_WHOLE_MAX_TASKS) {
			snprintf(name, sizeof(name), "task %s", t->name && *t->name ? t->name : "?");
			err = add_node(b, name);
		} else if (k == CP_WHOLE_MAX_TASKS) {
			snprintf(name, sizeof(name), "%u more tasks", rest);
			err = add_node(b, name);
		}
		for (uint32_t i = u[k].first; !err; i = next[i]) {
			err = add_task_roots(b, &x->tasks[i].stats);
			if (!next[i])
				break;
		}
	}
out:
	free(u);
	free(next);
	free(of);
	return err;
}

/* The function of `s` a sampled stack of the thread's own stack starts at, or -1. */
static int64_t stack_root(struct build *b, const struct cp_profile *p, const struct cp_stack *st)
{
	if (st->task != -1 || !st->depth || !st->frames ||
	    st->frames[st->depth - 1] >= p->stats.nfuncs)
		return -1;
	return find(b, &p->stats.funcs[st->frames[st->depth - 1]].key);
}

/* A sampled profile has no thread roots: its stacks say which thread's own stack
 * started at which function, so the root calls still unplaced (`rem`, after the
 * tasks) are shared among threads in proportion to their samples there. A function
 * that starts stacks but also has callers on them (recursion through other functions:
 * Python's import machinery, which runs a module that imports) has no root part in
 * the stats, which count each stack once per function; it hangs by the samples and
 * weight of the stacks it starts, so that it is reached from the root. */
static int add_sampled_roots(struct build *b, const struct cp_profile *p, uint64_t tid,
			     const uint64_t *total, const struct cp_stat *rem0, uint64_t *mine,
			     uint64_t *wmine)
{
	const struct cp_extras *x = &p->ex;
	for (uint32_t i = 0; i < x->nstacks; i++) {
		int64_t g = stack_root(b, p, &x->stacks[i]);
		if (g == -2)
			return -ENOMEM;
		if (g >= 0 && x->stacks[i].thread == tid) {
			mine[g] += x->stacks[i].count;
			wmine[g] += x->stacks[i].weight;
		}
	}
	for (uint32_t g = 0; g < b->s->nfuncs; g++) {
		if (!mine[g] || !total[g])
			continue;
		double share = (double)mine[g] / (double)total[g];
		struct cp_stat part = {.nc = (uint64_t)((double)rem0[g].nc * share + 0.5),
				       .tt = rem0[g].tt * share,
				       .ct = rem0[g].ct * share};
		struct cp_stat own = cp_root_part(b->s, g);
		if (!own.nc && own.ct < EPS && b->s->funcs[g].ncallers)
			part = (struct cp_stat){mine[g], mine[g], 0, (double)wmine[g] / 1e9};
		else
			part = clamp(&part, &b->rem[g]);
		mine[g] = wmine[g] = 0;
		if (!part.nc && part.ct < EPS)
			continue;
		sub(&b->rem[g], &part);
		if (add_edge(b, g, &part) < 0)
			return -ENOMEM;
	}
	return 0;
}

static int add_threads(struct build *b, const struct cp_profile *p, uint32_t *only)
{
	const struct cp_extras *x = &p->ex;
	uint64_t *total = NULL, *mine = NULL, *wmine = NULL;
	struct cp_stat *rem0 = NULL;
	char name[512];
	int err = 0;

	*only = 0;
	if (x->nstacks) {
		size_t n = (size_t)b->s->nfuncs + 1;
		total = calloc(n, sizeof(*total));
		mine = calloc(n, sizeof(*mine));
		wmine = calloc(n, sizeof(*wmine));
		rem0 = malloc(n * sizeof(*rem0));
		if (!total || !mine || !wmine || !rem0) {
			err = -ENOMEM;
			goto out;
		}
		memcpy(rem0, b->rem, b->s->nfuncs * sizeof(*rem0));
		for (uint32_t i = 0; i < x->nstacks; i++) {
			int64_t g = stack_root(b, p, &x->stacks[i]);
			if (g == -2) {
				err = -ENOMEM;
				goto out;
			}
			if (g >= 0)
				total[g] += x->stacks[i].count;
		}
	}
	for (uint32_t i = 0; i < x->nthreads && !err; i++) {
		const struct cp_thread *t = &x->threads[i];
		if (t->name && *t->name)
			snprintf(name, sizeof(name), "thread %s %llu", t->name,
				 (unsigned long long)t->tid);
		else
			snprintf(name, sizeof(name), "thread %llu", (unsigned long long)t->tid);
		err = add_node(b, name);
		if (!err && t->nroots)
			err = add_thread_roots(b, t);
		else if (!err && total) /* sample mode: the engine's roots are empty */
			err = add_sampled_roots(b, p, t->tid, total, rem0, mine, wmine);
		if (x->nthreads == 1)
			*only = b->nnodes - 1; /* the newest node, as add_edge needs */
	}
out:
	free(total);
	free(mine);
	free(wmine);
	free(rem0);
	return err;
}

/* Moves the edges into `out`'s caller lists and gives each node its numbers. */
static int assemble(struct build *b, struct cp_stats *out)
{
	const struct cp_stats *s = b->s;
	uint32_t n = s->nfuncs + b->nnodes, *extra = calloc(n + 1, sizeof(*extra));
	struct cp_func *f = cp_arena_alloc(b->a, (size_t)(n + 1) * sizeof(*f));

	if (!extra || !f) {
		free(extra);
		return -ENOMEM;
	}
	for (uint32_t e = 0; e < b->nedges; e++)
		extra[b->edges[e].to]++;
	/* Every node but the root has one caller, the root; sums go bottom-up, since
	 * edges only go from nodes to functions or from the root to nodes. */
	for (uint32_t k = 1; k < b->nnodes; k++)
		extra[s->nfuncs + k]++;
	for (uint32_t i = 0; i < n; i++) {
		if (i < s->nfuncs) {
			f[i] = s->funcs[i];
		} else {
			f[i].key = b->nodes[i - s->nfuncs];
			f[i].s = (struct cp_stat){1, 1, 0, 0};
			f[i].ncallers = 0;
		}
		if (!extra[i])
			continue;
		struct cp_edge *c =
		    cp_arena_alloc(b->a, (size_t)(f[i].ncallers + extra[i]) * sizeof(*c));
		if (!c) {
			free(extra);
			return -ENOMEM;
		}
		if (f[i].ncallers)
			memcpy(c, f[i].callers, f[i].ncallers * sizeof(*c));
		f[i].callers = c;
	}
	free(extra);
	double *node_ct = calloc(b->nnodes + 1, sizeof(*node_ct));
	if (!node_ct)
		return -ENOMEM;
	for (uint32_t e = 0; e < b->nedges; e++) {
		const struct sedge *se = &b->edges[e];
		f[se->to].callers[f[se->to].ncallers++] = (struct cp_edge){se->from, se->s};
		node_ct[se->from - s->nfuncs] += se->s.ct;
	}
	uint32_t root = s->nfuncs;
	for (uint32_t k = 1; k < b->nnodes; k++) {
		struct cp_func *nf = &f[root + k];
		nf->s.ct = node_ct[k];
		nf->callers[nf->ncallers++] = (struct cp_edge){root, {1, 1, 0, node_ct[k]}};
		node_ct[0] += node_ct[k];
	}
	f[root].s.ct = node_ct[0];
	free(node_ct);
	out->funcs = f;
	out->nfuncs = n;
	return 0;
}

int cp_whole_program(const struct cp_profile *p, const struct cp_stats *s, struct cp_arena *a,
		     struct cp_stats *out)
{
	struct build b = {.s = s, .a = a};
	const struct cp_extras *x = &p->ex;
	uint32_t only = 0;
	int err = -ENOMEM;

	cp_keymap_init(&b.keys);
	b.rem = calloc(s->nfuncs + 1, sizeof(*b.rem));
	/* Room for a slot per output function: nodes are at most tasks + threads + 2. */
	b.slot = calloc((size_t)s->nfuncs + 1, sizeof(*b.slot)); /* edges end at functions */
	if (!b.rem || !b.slot)
		goto out;
	for (uint32_t i = 0; i < s->nfuncs; i++) {
		const struct cp_key *k = &s->funcs[i].key;
		const char *file = k->file ? k->file : "", *name = k->name ? k->name : "";
		uint32_t v = i;
		int found;
		if (cp_keymap_get_or_put(&b.keys, file, strlen(file), k->line, name, strlen(name),
					 &v, &found) < 0)
			goto out;
		/* a node's name must differ from the key as written, invalid UTF-8 repaired */
		const char *rf = cp_utf8_repair(b.a, file), *rn = cp_utf8_repair(b.a, name);
		uint32_t w = i;
		if (!rf || !rn ||
		    ((rf != file || rn != name) &&
		     cp_keymap_get_or_put(&b.keys, rf, strlen(rf), k->line, rn, strlen(rn), &w,
					  &found) < 0))
			goto out;
		b.rem[i] = cp_root_part(s, i);
		if (!cp_is_root(s, i, &b.rem[i]))
			b.rem[i] = (struct cp_stat){0};
	}
	/* Tasks before threads, so that the only thread's node is the newest when the
	 * rest is hung from it (add_edge merges equal targets of the newest node). */
	if ((err = add_node(&b, CP_WHOLE_ROOT_WHAT)) < 0 || (err = add_tasks(&b, x)) < 0 ||
	    (err = add_threads(&b, p, &only)) < 0)
		goto out;
	/* What no table placed (and functions nobody calls nor placed): under the only
	 * thread, else under the root, which has no other edges in b.edges. */
	for (uint32_t i = 0; i < s->nfuncs && !err; i++) {
		const struct cp_stat *r = &b.rem[i];
		if (!r->nc && r->ct < EPS && (s->funcs[i].ncallers || b.slot[i]))
			continue;
		if (only) {
			err = add_edge(&b, i, r);
		} else if (cp_grow(&b.edges, &b.cedges, b.nedges + 1, sizeof(*b.edges), 64) < 0) {
			err = -ENOMEM;
		} else {
			b.edges[b.nedges++] = (struct sedge){s->nfuncs, i, *r};
			b.slot[i] = b.nedges;
		}
	}
	if (err)
		goto out;
	err = assemble(&b, out);
out:
	cp_keymap_fini(&b.keys);
	free(b.rem);
	free(b.slot);
	free(b.nodes);
	free(b.edges);
	return err;
}
