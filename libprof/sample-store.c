/* sample-store.c: the engine's store of sampled stacks and their conversion into pstats
 * numbers.
 *
 * Stacks come from coprof_sample (one thread at a time: the shim's folding thread) and
 * are counted per (thread, context, waiting, pcs) in a chained hash table. At dump
 * time cp_samples_build, on the dumping thread, resolves every pc once and adds the
 * functions, caller edges and the stack table into a profile (see sample-store.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "keymap.h"
#include "sample-store.h"

/* One distinct stack with what it was charged. */
struct sstack {
	struct sstack *next; /* hash chain */
	uint64_t hash;
	uint64_t tid;
	const void *ctx;
	uint64_t count;	 /* samples */
	uint64_t weight; /* ns, sum of the periods */
	uint32_t depth;
	uint8_t waiting;
	uintptr_t pcs[]; /* innermost first */
};

struct cp_samples {
	size_t limit; /* bytes */
	size_t used;  /* bytes */
	struct sstack **buckets;
	size_t nbuckets; /* a power of two */
	size_t nstacks;
	uint64_t count; /* samples */
};

#define INITIAL_BUCKETS 1024u

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_stack(uint64_t tid, const void *ctx, int waiting, const uintptr_t *pcs,
			   unsigned depth)
{
	uint64_t h = mix(mix(mix(0, tid), (uintptr_t)ctx), (uint64_t)waiting);
	for (unsigned i = 0; i < depth; i++)
		h = mix(h, pcs[i]);
	return h ^ (h >> 29);
}

int cp_samples_new(size_t memory_limit, struct cp_samples **out)
{
	struct cp_samples *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->limit = memory_limit ? memory_limit : (size_t)256 << 20;
	s->nbuckets = INITIAL_BUCKETS;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	if (!s->buckets) {
		free(s);
		return -ENOMEM;
	}
	s->used = sizeof(*s) + s->nbuckets * sizeof(*s->buckets);
	*out = s;
	return 0;
}

void cp_samples_clear(struct cp_samples *s)
{
	if (!s)
		return;
	for (size_t b = 0; b < s->nbuckets; b++) {
		struct sstack *st = s->buckets[b];
		while (st) {
			struct sstack *next = st->next;
			free(st);
			st = next;
		}
		s->buckets[b] = NULL;
	}
	s->used = sizeof(*s) + s->nbuckets * sizeof(*s->buckets);
	s->nstacks = 0;
	s->count = 0;
}

void cp_samples_free(struct cp_samples *s)
{
	if (!s)
		return;
	cp_samples_clear(s);
	free(s->buckets);
	free(s);
}

/* Doubles the table when it holds more stacks than buckets. Failing to grow is not an
 * error: the chains just get longer. */
static void grow(struct cp_samples *s)
{
	size_t n = s->nbuckets * 2;
	if (s->used + n * sizeof(*s->buckets) > s->limit)
		return;
	struct sstack **b = calloc(n, sizeof(*b));
	if (!b)
		return;
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct sstack *st = s->buckets[i];
		while (st) {
			struct sstack *next = st->next;
			st->next = b[st->hash & (n - 1)];
			b[st->hash & (n - 1)] = st;
			st = next;
		}
	}
	s->used += (n - s->nbuckets) * sizeof(*b);
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = n;
}

int cp_samples_add(struct cp_samples *s, uint64_t tid, const void *ctx, int waiting,
		   const uintptr_t *pcs, unsigned depth, uint64_t period_ns, uint64_t count)
{
	if (!s)
		return -EINVAL;
	if (depth == 0 || count == 0)
		return 0;
	waiting = waiting != 0;
	uint64_t h = hash_stack(tid, ctx, waiting, pcs, depth);
	struct sstack **head = &s->buckets[h & (s->nbuckets - 1)];
	for (struct sstack *st = *head; st; st = st->next) {
		if (st->hash == h && st->tid == tid && st->ctx == ctx && st->waiting == waiting &&
		    st->depth == depth && memcmp(st->pcs, pcs, depth * sizeof(*pcs)) == 0) {
			st->count += count;
			st->weight += period_ns * count;
			s->count += count;
			return 0;
		}
	}
	size_t size = sizeof(struct sstack) + depth * sizeof(*pcs);
	if (s->used + size > s->limit)
		return -ENOMEM;
	struct sstack *st = malloc(size);
	if (!st)
		return -ENOMEM;
	st->hash = h;
	st->tid = tid;
	st->ctx = ctx;
	st->count = count;
	st->weight = period_ns * count;
	st->depth = depth;
	st->waiting = (uint8_t)waiting;
	memcpy(st->pcs, pcs, depth * sizeof(*pcs));
	st->next = *head;
	*head = st;
	s->used += size;
	s->nstacks++;
	s->count += count;
	if (s->nstacks > s->nbuckets)
		grow(s);
	return 0;
}

uint64_t cp_samples_count(const struct cp_samples *s)
{
	return s ? s->count : 0;
}

/* --- building: a small open-addressing map used three ways ------------------------- */

struct map_slot {
	uint64_t key;
	uint32_t val;
	uint32_t used;
};

struct map {
	struct map_slot *slots;
	size_t cap; /* a power of two */
	size_t n;
};

static int map_init(struct map *m, size_t want)
{
	m->cap = 64;
	while (m->cap < want * 2)
		m->cap *= 2;
	m->n = 0;
	m->slots = calloc(m->cap, sizeof(*m->slots));
	return m->slots ? 0 : -ENOMEM;
}

static void map_fini(struct map *m)
{
	free(m->slots);
	m->slots = NULL;
}

/* Finds the slot for `key`, or the empty slot where it belongs. */
static struct map_slot *map_slot(const struct map *m, uint64_t key)
{
	size_t i = (size_t)mix(0, key) & (m->cap - 1);
	while (m->slots[i].used && m->slots[i].key != key)
		i = (i + 1) & (m->cap - 1);
	return &m->slots[i];
}

static int map_put(struct map *m, uint64_t key, uint32_t val)
{
	if ((m->n + 1) * 2 > m->cap) {
		struct map bigger = {0};
		bigger.cap = m->cap * 2;
		bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
		if (!bigger.slots)
			return -ENOMEM;
		for (size_t i = 0; i < m->cap; i++)
			if (m->slots[i].used)
				*map_slot(&bigger, m->slots[i].key) = m->slots[i];
		bigger.n = m->n;
		free(m->slots);
		*m = bigger;
	}
	struct map_slot *sl = map_slot(m, key);
	if (!sl->used)
		m->n++;
	sl->key = key;
	sl->val = val;
	sl->used = 1;
	return 0;
}

static int map_get(const struct map *m, uint64_t key, uint32_t *val)
{
	struct map_slot *sl = map_slot(m, key);
	if (!sl->used)
		return 0;
	*val = sl->val;
	return 1;
}

/* (file, line, name) of `k` in keymap `m`: 1 and *val when there, else 0. */
static int key_find(const struct cp_keymap *m, const struct cp_key *k, uint32_t *val)
{
	return cp_keymap_find(m, k->file, strlen(k->file), k->line, k->name, strlen(k->name), val);
}

/* Adds `k` to keymap `m` with value `val` unless an equal key is there: 0 or -ENOMEM. */
static int key_put(struct cp_keymap *m, const struct cp_key *k, uint32_t val)
{
	int found;
	return cp_keymap_get_or_put(m, k->file, strlen(k->file), k->line, k->name, strlen(k->name),
				    &val, &found);
}

/* --- building: accumulate one pstats dict -------------------------------------------- */

struct acc_edge {
	uint32_t caller; /* index into the accumulator's funcs */
	uint64_t stamp;	 /* the last stack that counted this edge's ct */
	struct cp_stat s;
};

struct acc_func {
	uint32_t key;	/* index into the build's keys */
	uint64_t stamp; /* the last stack that counted this function's ct */
	struct cp_stat s;
	struct acc_edge *edges;
	uint32_t nedges, capedges;
};

struct acc {
	struct acc_func *funcs;
	uint32_t nfuncs, cap;
	struct map bykey; /* key index -> funcs index */
};

static void acc_fini(struct acc *a)
{
	for (uint32_t i = 0; i < a->nfuncs; i++)
		free(a->funcs[i].edges);
	free(a->funcs);
	map_fini(&a->bykey);
}

static int acc_func(struct acc *a, uint32_t key, uint32_t *out)
{
	if (!a->bykey.slots && map_init(&a->bykey, 64) < 0)
		return -ENOMEM;
	if (map_get(&a->bykey, key, out))
		return 0;
	if (cp_grow(&a->funcs, &a->cap, a->nfuncs + 1, sizeof(*a->funcs), 64) < 0)
		return -ENOMEM;
	memset(&a->funcs[a->nfuncs], 0, sizeof(a->funcs[0]));
	a->funcs[a->nfuncs].key = key;
	if (map_put(&a->bykey, key, a->nfuncs) < 0)
		return -ENOMEM;
	*out = a->nfuncs++;
	return 0;
}

static struct acc_edge *acc_edge(struct acc_func *f, uint32_t caller)
{
	for (uint32_t i = 0; i < f->nedges; i++)
		if (f->edges[i].caller == caller)
			return &f->edges[i];
	if (cp_grow(&f->edges, &f->capedges, f->nedges + 1, sizeof(*f->edges), 4) < 0)
		return NULL;
	struct acc_edge *e = &f->edges[f->nedges++];
	memset(e, 0, sizeof(*e));
	e->caller = caller;
	return e;
}

/* Charges one stored stack, given as key indexes innermost first, to `a`: tt to the
 * leaf, ct and the counts once per stack to every function and every distinct edge.
 * `stamp` is unique per stack, so recursion counts a function or an edge once. */
static int acc_stack(struct acc *a, const uint32_t *keys, uint32_t depth, uint64_t count,
		     double seconds, uint64_t stamp)
{
	uint32_t callee = 0;
	for (uint32_t i = depth; i-- > 0;) {
		uint32_t fi;
		if (acc_func(a, keys[i], &fi) < 0)
			return -ENOMEM;
		struct acc_func *f = &a->funcs[fi];
		if (f->stamp != stamp) {
			f->stamp = stamp;
			f->s.nc += count;
			f->s.cc += count;
			f->s.ct += seconds;
		}
		if (i == 0)
			f->s.tt += seconds;
		if (i + 1 < depth) {
			struct acc_edge *e = acc_edge(f, callee);
			if (!e)
				return -ENOMEM;
			if (e->stamp != stamp) {
				e->stamp = stamp;
				e->s.nc += count;
				e->s.cc += count;
				e->s.ct += seconds;
			}
			if (i == 0)
				e->s.tt += seconds;
		}
		callee = fi; /* the caller of the next (inner) frame */
	}
	return 0;
}

/* Adds `a` into the pstats dict `dst`, whose arrays live in `arena`: functions with a
 * key already in `dst` are summed, new ones appended, edges likewise. `keys` gives
 * each key index's key. Returns 0 or -ENOMEM; `index`, when not NULL, receives for
 * each accumulator function its index in dst. */
static int merge_into(struct cp_stats *dst, const struct acc *a, const struct cp_key *keys,
		      struct cp_arena *arena, uint32_t *index)
{
	struct cp_keymap old; /* dst's keys -> the first index in dst with that key */
	cp_keymap_init(&old);
	uint32_t n = dst->nfuncs;
	uint32_t *where = malloc((a->nfuncs + 1) * sizeof(*where));
	int err = where ? 0 : -ENOMEM;
	for (uint32_t j = 0; !err && j < dst->nfuncs; j++)
		err = key_put(&old, &dst->funcs[j].key, j);
	for (uint32_t i = 0; !err && i < a->nfuncs; i++)
		if (!key_find(&old, &keys[a->funcs[i].key], &where[i]))
			where[i] = n++;
	cp_keymap_fini(&old);
	if (err) {
		free(where);
		return err;
	}
	struct cp_func *funcs = n ? cp_arena_alloc(arena, n * sizeof(*funcs)) : NULL;
	if (n && !funcs) {
		free(where);
		return -ENOMEM;
	}
	if (dst->nfuncs)
		memcpy(funcs, dst->funcs, dst->nfuncs * sizeof(*funcs));
	for (uint32_t i = 0; i < a->nfuncs; i++) {
		const struct acc_func *af = &a->funcs[i];
		struct cp_func *f = &funcs[where[i]];
		if (where[i] >= dst->nfuncs)
			f->key = keys[af->key];
		f->s.cc += af->s.cc;
		f->s.nc += af->s.nc;
		f->s.tt += af->s.tt;
		f->s.ct += af->s.ct;
		if (!af->nedges)
			continue;
		struct cp_edge *e = cp_arena_alloc(arena, (f->ncallers + af->nedges) * sizeof(*e));
		if (!e) {
			free(where);
			return -ENOMEM;
		}
		if (f->ncallers)
			memcpy(e, f->callers, f->ncallers * sizeof(*e));
		uint32_t ne = f->ncallers;
		for (uint32_t j = 0; j < af->nedges; j++) {
			uint32_t caller = where[af->edges[j].caller];
			uint32_t k = 0;
			while (k < ne && e[k].caller != caller)
				k++;
			if (k == ne) {
				e[ne].caller = caller;
				memset(&e[ne].s, 0, sizeof(e[ne].s));
				ne++;
			}
			e[k].s.cc += af->edges[j].s.cc;
			e[k].s.nc += af->edges[j].s.nc;
			e[k].s.tt += af->edges[j].s.tt;
			e[k].s.ct += af->edges[j].s.ct;
		}
		f->callers = e;
		f->ncallers = ne;
	}
	dst->funcs = funcs;
	dst->nfuncs = n;
	if (index)
		memcpy(index, where, a->nfuncs * sizeof(*where));
	free(where);
	return 0;
}

/* --- building: the whole profile ------------------------------------------------------ */

struct build {
	const struct cp_samples *s;
	const struct cp_samples_map *map;
	struct cp_profile *prof;
	struct cp_key *keys; /* distinct function keys */
	uint32_t nkeys, capkeys;
	struct cp_keymap bykey; /* (file, line, name) -> key index */
	struct map bypc;      /* pc -> key index */
	struct acc top;
	struct acc *tasks; /* one per prof->ex.tasks */
	double *task_s;	   /* s sampled per task, running or waiting */
	uint32_t *scratch; /* key indexes of one stack */
};

/* The key index of `pc`, resolving it (once) through the engine's map. A pc nobody
 * resolves is keyed ("~", 0, "0x<pc>") as coprof_resolve_fn promises. */
static int key_of_pc(struct build *b, uintptr_t pc, uint32_t *out)
{
	if (map_get(&b->bypc, pc, out))
		return 0;
	struct cp_key k = {0};
	if (!b->map->resolve || b->map->resolve(b->map->arg, pc, &k) < 0 || !k.file || !k.name) {
		char buf[2 + 2 * sizeof(pc) + 1];
		static const char hex[] = "0123456789abcdef";
		int n = 0;
		char rev[2 * sizeof(pc)];
		uintptr_t v = pc;
		do {
			rev[n++] = hex[v & 15];
			v >>= 4;
		} while (v);
		buf[0] = '0', buf[1] = 'x';
		for (int i = 0; i < n; i++)
			buf[2 + i] = rev[n - 1 - i];
		k.file = "~";
		k.line = 0;
		k.name = cp_arena_strdup(b->prof->arena, buf, (size_t)n + 2);
		if (!k.name)
			return -ENOMEM;
	}
	uint32_t ki;
	if (!key_find(&b->bykey, &k, &ki)) {
		if (cp_grow(&b->keys, &b->capkeys, b->nkeys + 1, sizeof(*b->keys), 256) < 0)
			return -ENOMEM;
		ki = b->nkeys++;
		b->keys[ki] = k;
		if (key_put(&b->bykey, &k, ki) < 0)
			return -ENOMEM;
	}
	*out = ki;
	return map_put(&b->bypc, pc, ki);
}

/* One row of the stack table, before it is written into prof->ex.stacks. */
struct row {
	int64_t task;
	uint64_t tid;
	uint64_t count;
	uint64_t weight; /* ns */
	uint32_t depth;
	uint8_t waiting;
	uint32_t *keys; /* key indexes, innermost first */
};

static int build_rows(struct build *b, struct row **rowsp, uint32_t *nrowsp)
{
	const struct cp_samples *s = b->s;
	struct row *rows = calloc(s->nstacks ? s->nstacks : 1, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	struct map byrow; /* hash of (task, tid, waiting, keys) -> row index */
	if (map_init(&byrow, s->nstacks) < 0) {
		free(rows);
		return -ENOMEM;
	}
	uint32_t nrows = 0;
	uint64_t stamp = 0;
	int err = 0;
	for (size_t bk = 0; !err && bk < s->nbuckets; bk++) {
		for (const struct sstack *st = s->buckets[bk]; !err && st; st = st->next) {
			for (uint32_t i = 0; !err && i < st->depth; i++)
				err = key_of_pc(b, st->pcs[i], &b->scratch[i]);
			if (err)
				break;
			int64_t task =
			    b->map->task_index ? b->map->task_index(b->map->arg, st->ctx) : -1;
			if (task >= (int64_t)b->prof->ex.ntasks)
				task = -1;
			double sec = (double)st->weight / 1e9;
			if (task >= 0)
				b->task_s[task] += sec;
			stamp++;
			err = acc_stack(&b->top, b->scratch, st->depth, st->count, sec, stamp);
			if (!err && task >= 0)
				err = acc_stack(&b->tasks[task], b->scratch, st->depth, st->count,
						sec, stamp);
			if (err)
				break;
			/* Stacks of different pcs in the same functions share one row. */
			uint64_t h = mix(mix(mix(0, (uint64_t)task), st->tid), st->waiting);
			for (uint32_t i = 0; i < st->depth; i++)
				h = mix(h, b->scratch[i]);
			uint32_t ri;
			int found = 0;
			for (uint64_t probe = h; map_get(&byrow, probe, &ri); probe++) {
				struct row *r = &rows[ri];
				if (r->task == task && r->tid == st->tid &&
				    r->waiting == st->waiting && r->depth == st->depth &&
				    memcmp(r->keys, b->scratch, st->depth * sizeof(uint32_t)) ==
					0) {
					r->count += st->count;
					r->weight += st->weight;
					found = 1;
					break;
				}
			}
			if (found)
				continue;
			struct row *r = &rows[nrows];
			r->task = task;
			r->tid = st->tid;
			r->count = st->count;
			r->weight = st->weight;
			r->depth = st->depth;
			r->waiting = st->waiting;
			r->keys = malloc(st->depth * sizeof(uint32_t));
			if (!r->keys) {
				err = -ENOMEM;
				break;
			}
			memcpy(r->keys, b->scratch, st->depth * sizeof(uint32_t));
			uint64_t probe = h;
			while (map_get(&byrow, probe, &ri))
				probe++;
			err = map_put(&byrow, probe, nrows++);
		}
	}
	map_fini(&byrow);
	*rowsp = rows;
	*nrowsp = nrows;
	return err;
}

static uint32_t max_depth(const struct cp_samples *s)
{
	uint32_t d = 1;
	for (size_t bk = 0; bk < s->nbuckets; bk++)
		for (const struct sstack *st = s->buckets[bk]; st; st = st->next)
			if (st->depth > d)
				d = st->depth;
	return d;
}

/* Writes the rows into prof->ex.stacks (appended), with frames indexing the top-level
 * funcs through `index` (key index -> top accumulator index -> funcs index). */
static int write_stacks(struct build *b, const struct row *rows, uint32_t nrows,
			const uint32_t *topindex)
{
	struct cp_extras *ex = &b->prof->ex;
	if (!nrows)
		return 0;
	struct cp_stack *st = cp_arena_alloc(b->prof->arena, (ex->nstacks + nrows) * sizeof(*st));
	if (!st)
		return -ENOMEM;
	if (ex->nstacks)
		memcpy(st, ex->stacks, ex->nstacks * sizeof(*st));
	for (uint32_t i = 0; i < nrows; i++) {
		struct cp_stack *o = &st[ex->nstacks + i];
		o->task = rows[i].task;
		o->thread = rows[i].tid;
		o->count = rows[i].count;
		o->weight = rows[i].weight;
		o->waiting = rows[i].waiting;
		o->depth = rows[i].depth;
		o->frames = cp_arena_alloc(b->prof->arena, rows[i].depth * sizeof(uint32_t));
		if (!o->frames)
			return -ENOMEM;
		for (uint32_t j = 0; j < rows[i].depth; j++) {
			uint32_t ai = 0;
			map_get(&b->top.bykey, rows[i].keys[j], &ai);
			o->frames[j] = topindex[ai];
		}
	}
	ex->stacks = st;
	ex->nstacks += nrows;
	return 0;
}

/* Gives tasks and threads the time sampled in them, where the engine left none: a
 * thread's own samples while it ran (not its coroutines' waits), a task's samples
 * running and, under wall, waiting. */
static void fill_ttot(struct build *b)
{
	struct cp_extras *ex = &b->prof->ex;
	for (uint32_t t = 0; t < ex->ntasks; t++)
		if (ex->tasks[t].ttot == 0)
			ex->tasks[t].ttot = b->task_s[t];
	for (uint32_t i = 0; i < ex->nthreads; i++) {
		if (ex->threads[i].ttot != 0)
			continue;
		uint64_t ns = 0;
		for (size_t bk = 0; bk < b->s->nbuckets; bk++)
			for (const struct sstack *st = b->s->buckets[bk]; st; st = st->next)
				if (st->tid == ex->threads[i].tid && !st->waiting)
					ns += st->weight;
		ex->threads[i].ttot = (double)ns / 1e9;
	}
}

int cp_samples_build(const struct cp_samples *s, const struct cp_samples_map *map,
		     struct cp_profile *prof)
{
	if (!s || !s->nstacks)
		return 0;
	if (!map || !prof || !prof->arena)
		return -EINVAL;
	struct build b = {.s = s, .map = map, .prof = prof};
	struct row *rows = NULL;
	uint32_t nrows = 0, *topindex = NULL;
	int err = 0;
	if (map_init(&b.bypc, 1024) < 0)
		err = -ENOMEM;
	if (!err && prof->ex.ntasks) {
		b.tasks = calloc(prof->ex.ntasks, sizeof(*b.tasks));
		b.task_s = calloc(prof->ex.ntasks, sizeof(*b.task_s));
		err = b.tasks && b.task_s ? 0 : -ENOMEM;
	}
	if (!err) {
		b.scratch = malloc(max_depth(s) * sizeof(*b.scratch));
		err = b.scratch ? 0 : -ENOMEM;
	}
	if (!err)
		err = build_rows(&b, &rows, &nrows);
	if (!err) {
		topindex = malloc((b.top.nfuncs + 1) * sizeof(*topindex));
		err = topindex ? 0 : -ENOMEM;
	}
	if (!err)
		err = merge_into(&prof->stats, &b.top, b.keys, prof->arena, topindex);
	for (uint32_t t = 0; !err && t < prof->ex.ntasks; t++)
		if (b.tasks[t].nfuncs)
			err = merge_into(&prof->ex.tasks[t].stats, &b.tasks[t], b.keys, prof->arena,
					 NULL);
	if (!err)
		err = write_stacks(&b, rows, nrows, topindex);
	if (!err)
		fill_ttot(&b);

	for (uint32_t i = 0; rows && i < nrows; i++)
		free(rows[i].keys);
	free(rows);
	free(topindex);
	if (b.tasks)
		for (uint32_t t = 0; t < prof->ex.ntasks; t++)
			acc_fini(&b.tasks[t]);
	free(b.tasks);
	free(b.task_s);
	acc_fini(&b.top);
	free(b.scratch);
	free(b.keys);
	cp_keymap_fini(&b.bykey);
	map_fini(&b.bypc);
	return err;
}
