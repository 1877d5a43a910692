/* snapshot.c: turns the engine's records into a struct cp_profile (profile.h). Runs on
 * the dumping thread: it pauses every writer just long enough to copy the numbers (open
 * frames are closed at this instant in the copy only), then, with writers running
 * again, resolves each key once through the resolvers, merges functions with equal
 * (file, line, name), sums threads and contexts, and fills the extras. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine-inline.h"
#include "grow.h"
#include "keymap.h"
#include "sample-store.h"

struct row {
	uintptr_t key;
	uint64_t nc, cc, tt, ct; /* ns */
};

struct erow {
	uint32_t caller, callee; /* rows */
	uint64_t nc, cc, tt, ct;
};

/* The rows of one context; task is its index in the task table, -1 for a thread's own
 * context and its "(finished tasks)" aggregate. */
struct group {
	uint32_t row0, row1, erow0, erow1;
	int64_t task;
	uint32_t thread; /* index into the thread table */
};

/* uint64 -> uint32, open addressing; a value of 0 marks an empty slot (stored +1). */
struct u64map {
	uint64_t *keys;
	uint32_t *vals;
	uint32_t cap, n;
};

struct snap {
	struct coprof *p;
	struct cp_profile *prof;
	struct row *rows;
	uint32_t nrows, crows;
	struct erow *erows;
	uint32_t nerows, cerows;
	struct group *groups;
	uint32_t ngroups, cgroups;
	uint32_t ntasks, nthreads;
	struct u64map keymap;				/* function key -> global function */
	struct u64map ctxmap;				/* context pointer -> task */
	struct cp_resolver resolvers[CP_MAX_RESOLVERS]; /* copied: called without the lock */
	unsigned nresolvers;
	struct cp_key *gkeys; /* global functions, strings in the profile's arena */
	uint32_t ngkeys, cgkeys;
	struct cp_keymap bykey; /* (file, line, name) -> global function */
	uint32_t *row_g;
	int32_t *local;	   /* scratch for build_stats: global -> local function */
	uint32_t *touched; /* scratch: globals set in local */
	uint64_t lost_depth, foreign, nfolded, stalls_dropped;
	struct snap_stall *stalls; /* every thread's, copied while writers are paused */
	uint32_t nstalls, cstalls;
	struct snap_await *awaits; /* every thread's await edges, copied as the stalls */
	uint32_t nawaits, cawaits;
	uint64_t awaits_dropped;
};

struct snap_await {
	uint64_t tid;
	struct cp_await_rec r;
};

struct snap_stall {
	uint64_t tid;
	struct cp_stall_rec r;
	struct cp_tick_stack ticks[CP_STEP_TICKS]; /* sample mode: r.nticks of them */
};

/* Makes room for `need` elements in a malloc'd array. 0 or -ENOMEM. */
static int grow(void *arrp, uint32_t *cap, uint32_t need, size_t elem)
{
	return cp_grow(arrp, cap, need, elem, 64);
}

static uint32_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)x;
}

static int map_find(const struct u64map *m, uint64_t key, uint32_t *val)
{
	if (!m->cap)
		return 0;
	for (uint32_t h = mix(key) & (m->cap - 1);; h = (h + 1) & (m->cap - 1)) {
		if (!m->vals[h])
			return 0;
		if (m->keys[h] == key) {
			*val = m->vals[h] - 1;
			return 1;
		}
	}
}

static int map_put(struct u64map *m, uint64_t key, uint32_t val)
{
	if ((m->n + 1) * 2 > m->cap) {
		struct u64map nm = {0};
		nm.cap = m->cap ? m->cap * 2 : 256;
		nm.keys = malloc(nm.cap * sizeof(*nm.keys));
		nm.vals = calloc(nm.cap, sizeof(*nm.vals));
		if (!nm.keys || !nm.vals) {
			free(nm.keys);
			free(nm.vals);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < m->cap; i++)
			if (m->vals[i])
				map_put(&nm, m->keys[i], m->vals[i] - 1);
		free(m->keys);
		free(m->vals);
		*m = nm;
	}
	uint32_t h = mix(key) & (m->cap - 1);
	while (m->vals[h])
		h = (h + 1) & (m->cap - 1);
	m->keys[h] = key;
	m->vals[h] = val + 1;
	m->n++;
	return 0;
}

/* --- phase 1: copy, with every writer paused --------------------------------------- */

/* Adds the contributions of c's open frames as if they were closed at thread clock
 * `now`: the same arithmetic as the engine's pop (rule 2, rule 7), on the copies. The
 * records' levels count down as the pops would, to find each outermost activation,
 * and are put back afterwards: the writers are paused, and find them as they were. */
static void close_open_frames(struct snap *s, struct coprof_ctx *c, uint64_t now)
{
	struct coprof_thread *t = c->t;
	uint64_t v = cp_ctx_vnow(c, now);
	uint64_t carry = 0;
	if (!t->cpu && c->is_base && t->cur != c && now > c->away)
		carry = now - c->away; /* rule 9: the driver's time away */
	for (uint32_t i = c->depth; i-- > 0;) {
		struct cp_frame *f = &c->frames[i];
		uint64_t el = v > f->start ? v - f->start : 0;
		uint64_t ch = f->children + carry;
		uint64_t own = el > ch ? el - ch : 0;
		struct row *r = &s->rows[f->rec->snap_idx];
		r->tt += own;
		if (--f->rec->level == 0)
			r->ct += el;
		if (cp_edge_real(f->edge)) { /* a virtual edge's row is copied afterwards */
			struct erow *e = &s->erows[f->edge->snap_idx];
			e->tt += own;
			if (--f->edge->level == 0)
				e->ct += el;
		}
		carry = el;
	}
	for (uint32_t i = 0; i < c->depth; i++) {
		c->frames[i].rec->level++;
		if (cp_edge_real(c->frames[i].edge))
			c->frames[i].edge->level++;
	}
}

static int copy_ctx(struct snap *s, struct coprof_ctx *c, int64_t task, uint64_t now, int active)
{
	if (grow(&s->groups, &s->cgroups, s->ngroups + 1, sizeof(*s->groups)) ||
	    grow(&s->rows, &s->crows, s->nrows + c->recs.n, sizeof(*s->rows)) ||
	    grow(&s->erows, &s->cerows, s->nerows + c->edges.n + c->recs.n, sizeof(*s->erows)))
		return -ENOMEM;
	struct group *g = &s->groups[s->ngroups++];
	g->task = task;
	g->thread = s->nthreads; /* copy_thread adds its row to the table last */
	g->row0 = s->nrows;
	g->erow0 = s->nerows;
	for (uint32_t i = 0; i < c->recs.cap; i++) {
		struct cp_rec *r = c->recs.slots[i];
		if (!r)
			continue;
		r->snap_idx = s->nrows;
		s->rows[s->nrows++] = (struct row){r->key, r->nc, r->cc, r->tt, r->ct};
	}
	for (uint32_t i = 0; i < c->edges.cap; i++) {
		struct cp_erec *e = c->edges.slots[i];
		if (!e)
			continue;
		e->snap_idx = s->nerows;
		s->erows[s->nerows++] = (struct erow){
		    e->caller->snap_idx, e->callee->snap_idx, e->nc, e->cc, e->tt, e->ct};
	}
	if (active && c->depth)
		close_open_frames(s, c, now);
	/* Virtual edges (engine.h: cp_rec.via): the numbers of their callee's row. */
	for (uint32_t i = 0; i < c->recs.cap; i++) {
		struct cp_rec *r = c->recs.slots[i], *p = r ? cp_via_caller(r) : NULL;
		if (!p)
			continue;
		struct row *w = &s->rows[r->snap_idx];
		s->erows[s->nerows++] =
		    (struct erow){p->snap_idx, r->snap_idx, w->nc, w->cc, w->tt, w->ct};
	}
	g->row1 = s->nrows;
	g->erow1 = s->nerows;
	return 0;
}

static const char *ctx_state(const struct coprof_ctx *c)
{
	if (c->state == CP_CTX_FINISHED)
		return "finished";
	return c->t->cur == c ? "running" : "suspended";
}

static const char *sdup(struct snap *s, const char *str)
{
	if (!str)
		str = "";
	return cp_arena_strdup(s->prof->arena, str, strlen(str));
}

/* One context of t's as a row of the task table, with its functions. */
static int copy_task(struct snap *s, struct coprof_thread *t, struct coprof_ctx *c, uint64_t now,
		     int active)
{
	struct cp_extras *ex = &s->prof->ex;
	uint32_t i = s->ntasks++;
	struct cp_task *k = &ex->tasks[i];
	k->id = c->id;
	k->name = sdup(s, c->name);
	k->runtime = sdup(s, c->runtime);
	k->thread = t->tid;
	uint64_t end = c->state == CP_CTX_FINISHED ? c->vend : cp_ctx_vnow(c, now);
	k->ttot = c->begun && end > c->vbegin ? (double)(end - c->vbegin) / 1e9 : 0;
	k->resumes = c->resumes;
	k->state = ctx_state(c);
	if (s->p->opt.mode == COPROF_MODE_TRACE) {
		struct cp_task_time tm;
		k->timed = 1;
		cp_task_time(t, c, now, active, &tm);
		k->run_cpu = (double)tm.run_cpu / 1e9;
		k->run_wall = (double)tm.run_wall / 1e9;
		k->ready = (double)tm.ready / 1e9;
		k->ready_max = (double)tm.ready_max / 1e9;
		uint64_t busy = tm.run_wall + tm.ready;
		k->waiting = tm.life > busy ? (double)(tm.life - busy) / 1e9 : 0;
	}
	if (!k->name || !k->runtime)
		return -ENOMEM;
	int rc = map_put(&s->ctxmap, (uint64_t)(uintptr_t)c, i);
	return rc ? rc : copy_ctx(s, c, i, now, active);
}

static int copy_thread(struct snap *s, struct coprof_thread *t, uint64_t now, int active)
{
	struct cp_extras *ex = &s->prof->ex;
	int rc = copy_ctx(s, &t->base, -1, now, active);
	if (!rc)
		rc = copy_ctx(s, &t->agg, -1, now, active);
	/* A folded task is in "(finished tasks)" alone: its row goes too, so that a
	 * program with a million tasks writes a bounded task table. */
	for (struct coprof_ctx *c = t->ctx_head; c && !rc; c = c->next)
		if (!c->folded)
			rc = copy_task(s, t, c, now, active);
	for (struct coprof_ctx *c = t->sctx_head; c && !rc; c = c->next)
		rc = copy_task(s, t, c, now, active);
	if (rc)
		return rc;
	struct cp_thread *th = &ex->threads[s->nthreads++];
	th->tid = t->tid;
	th->name = sdup(s, t->name);
	uint64_t tt = t->ttot + (active && now > t->run_begin ? now - t->run_begin : 0);
	th->ttot = (double)tt / 1e9;
	th->switches = t->switches;
	s->lost_depth += t->lost_depth;
	s->foreign += t->foreign;
	s->nfolded += t->nfolded;
	s->stalls_dropped += t->stalls_dropped;
	if (t->nstalls && grow(&s->stalls, &s->cstalls, s->nstalls + t->nstalls, sizeof(*s->stalls)))
		return -ENOMEM;
	for (uint32_t i = 0; i < t->nstalls; i++) {
		struct snap_stall *st = &s->stalls[s->nstalls++];
		st->tid = t->tid;
		st->r = t->stalls[i];
		if (st->r.nticks && t->stall_ticks)
			memcpy(st->ticks, t->stall_ticks + i * CP_STEP_TICKS,
			       st->r.nticks * sizeof(st->ticks[0]));
		else
			st->r.nticks = 0;
	}
	s->awaits_dropped += t->awaits_dropped;
	if (t->nawaits && grow(&s->awaits, &s->cawaits, s->nawaits + t->nawaits, sizeof(*s->awaits)))
		return -ENOMEM;
	for (uint32_t i = 0; i < t->nawaits; i++)
		s->awaits[s->nawaits++] = (struct snap_await){t->tid, t->awaits[i]};
	return th->name ? 0 : -ENOMEM;
}

static int copy_all(struct snap *s)
{
	struct coprof *p = s->p;
	struct cp_extras *ex = &s->prof->ex;
	uint32_t nthreads = 0, ntasks = 0;
	for (struct coprof_thread *t = p->threads; t; t = t->next) {
		nthreads++;
		for (struct coprof_ctx *c = t->ctx_head; c; c = c->next)
			ntasks++;
		for (struct coprof_ctx *c = t->sctx_head; c; c = c->next)
			ntasks++;
	}
	ex->tasks = cp_arena_alloc(s->prof->arena, (ntasks + 1) * sizeof(*ex->tasks));
	ex->threads = cp_arena_alloc(s->prof->arena, (nthreads + 1) * sizeof(*ex->threads));
	if (!ex->tasks || !ex->threads)
		return -ENOMEM;
	uint64_t self_tid = (uint64_t)gettid();
	uint32_t st = atomic_load(&p->state);
	int rc = 0;
	for (struct coprof_thread *t = p->threads; t && !rc; t = t->next)
		rc = copy_thread(s, t, cp_thread_now(t, self_tid), cp_thread_active(t, st));
	ex->ntasks = s->ntasks;
	ex->nthreads = s->nthreads;
	return rc;
}

/* --- phase 2: resolve and merge, writers running --------------------------------- */

/* The global function for (file, line, name), added on first sight (strings copied:
 * a resolver's are good until its next call). */
static int intern(struct snap *s, const char *file, uint64_t line, const char *name, uint32_t *out)
{
	size_t flen = strlen(file), nlen = strlen(name);
	if (cp_keymap_find(&s->bykey, file, flen, line, name, nlen, out))
		return 0;
	if (grow(&s->gkeys, &s->cgkeys, s->ngkeys + 1, sizeof(*s->gkeys)))
		return -ENOMEM;
	struct cp_key *k = &s->gkeys[s->ngkeys];
	k->file = sdup(s, file);
	k->name = sdup(s, name);
	k->line = line;
	if (!k->file || !k->name)
		return -ENOMEM;
	*out = s->ngkeys;
	int found;
	if (cp_keymap_get_or_put(&s->bykey, k->file, flen, line, k->name, nlen, out, &found))
		return -ENOMEM;
	s->ngkeys++;
	return 0;
}

/* The global function of an adapter's key: asked of each resolver once, cached. */
static int resolve(struct snap *s, uintptr_t key, uint32_t *out)
{
	if (map_find(&s->keymap, key, out))
		return 0;
	char hex[32];
	struct coprof_func_info fi = {0};
	unsigned i;
	for (i = 0; i < s->nresolvers; i++) {
		fi = (struct coprof_func_info){0};
		if (s->resolvers[i].fn(s->resolvers[i].arg, key, &fi) == 0)
			break;
	}
	if (i == s->nresolvers || !fi.name) {
		cp_key_unknown(key, hex, sizeof(hex));
		fi = (struct coprof_func_info){"~", 0, hex};
	}
	int rc = intern(s, fi.file ? fi.file : "~", fi.line, fi.name, out);
	return rc ? rc : map_put(&s->keymap, key, *out);
}

struct acc {
	uint64_t nc, cc, tt, ct;
};

struct pair {
	uint32_t callee, caller; /* local functions + 1; 0: empty */
	struct acc a;
};

static void acc_add(struct acc *a, uint64_t nc, uint64_t cc, uint64_t tt, uint64_t ct)
{
	a->nc += nc;
	a->cc += cc;
	a->tt += tt;
	a->ct += ct;
}

static struct cp_stat to_stat(const struct acc *a)
{
	return (struct cp_stat){a->cc, a->nc, (double)a->tt / 1e9, (double)a->ct / 1e9};
}

/* Sums rows [r0, r1) and edge rows [e0, e1) by global function into out. Every caller
 * of an edge is a row of the same range, so it is one of out's functions. */
static int build_stats(struct snap *s, uint32_t r0, uint32_t r1, uint32_t e0, uint32_t e1,
		       struct cp_stats *out)
{
	uint32_t n = 0;
	for (uint32_t r = r0; r < r1; r++) {
		uint32_t g = s->row_g[r];
		if (s->local[g] < 0) {
			s->local[g] = (int32_t)n;
			s->touched[n++] = g;
		}
	}
	uint32_t pcap = 16;
	while (pcap < 2 * (e1 - e0) + 2)
		pcap *= 2;
	struct acc *fa = calloc(n + 1, sizeof(*fa));
	struct pair *pairs = calloc(pcap, sizeof(*pairs));
	uint32_t *ncallers = calloc(n + 1, sizeof(*ncallers));
	int rc = -ENOMEM;
	if (!fa || !pairs || !ncallers)
		goto out;
	for (uint32_t r = r0; r < r1; r++) {
		struct row *w = &s->rows[r];
		acc_add(&fa[s->local[s->row_g[r]]], w->nc, w->cc, w->tt, w->ct);
	}
	for (uint32_t e = e0; e < e1; e++) {
		struct erow *w = &s->erows[e];
		uint32_t callee = (uint32_t)s->local[s->row_g[w->callee]] + 1;
		uint32_t caller = (uint32_t)s->local[s->row_g[w->caller]] + 1;
		uint32_t h = mix(((uint64_t)callee << 32) | caller) & (pcap - 1);
		while (pairs[h].callee && (pairs[h].callee != callee || pairs[h].caller != caller))
			h = (h + 1) & (pcap - 1);
		if (!pairs[h].callee) {
			pairs[h].callee = callee;
			pairs[h].caller = caller;
			ncallers[callee - 1]++;
		}
		acc_add(&pairs[h].a, w->nc, w->cc, w->tt, w->ct);
	}
	out->funcs = cp_arena_alloc(s->prof->arena, (n + 1) * sizeof(*out->funcs));
	if (!out->funcs)
		goto out;
	out->nfuncs = n;
	for (uint32_t i = 0; i < n; i++) {
		struct cp_func *f = &out->funcs[i];
		f->key = s->gkeys[s->touched[i]];
		f->s = to_stat(&fa[i]);
		f->callers =
		    cp_arena_alloc(s->prof->arena, (ncallers[i] + 1) * sizeof(*f->callers));
		if (!f->callers)
			goto out;
	}
	for (uint32_t h = 0; h < pcap; h++) {
		if (!pairs[h].callee)
			continue;
		struct cp_func *f = &out->funcs[pairs[h].callee - 1];
		f->callers[f->ncallers++] =
		    (struct cp_edge){pairs[h].caller - 1, to_stat(&pairs[h].a)};
	}
	rc = 0;
out:
	for (uint32_t i = 0; i < n; i++)
		s->local[s->touched[i]] = -1;
	free(fa);
	free(pairs);
	free(ncallers);
	return rc;
}

/* The roots of thread `ti`'s own stack (its base context and its folded finished
 * tasks, the groups of task -1): per row, its numbers minus its callers' edges, as
 * cp_root_part computes them (whole.h), summed by function. */
static int thread_roots(struct snap *s, uint32_t ti)
{
	struct cp_thread *th = &s->prof->ex.threads[ti];
	struct acc *part = NULL;
	uint32_t n = 0;
	int rc = 0;

	for (uint32_t gi = 0; gi < s->ngroups; gi++) {
		struct group *g = &s->groups[gi];
		if (g->task >= 0 || g->thread != ti)
			continue;
		uint32_t nr = g->row1 - g->row0;
		int64_t *nc = calloc(nr + 1, sizeof(*nc)), *tt = calloc(nr + 1, sizeof(*tt));
		int64_t *ct = calloc(nr + 1, sizeof(*ct));
		struct acc *np = realloc(part, (n + nr + 1) * sizeof(*part));
		if (np)
			part = np;
		if (!nc || !tt || !ct || !np) {
			free(nc), free(tt), free(ct);
			rc = -ENOMEM;
			break;
		}
		for (uint32_t r = 0; r < nr; r++) {
			nc[r] = (int64_t)s->rows[g->row0 + r].nc;
			tt[r] = (int64_t)s->rows[g->row0 + r].tt;
			ct[r] = (int64_t)s->rows[g->row0 + r].ct;
		}
		for (uint32_t e = g->erow0; e < g->erow1; e++) {
			struct erow *w = &s->erows[e];
			uint32_t c = w->callee - g->row0;
			nc[c] -= (int64_t)w->nc;
			tt[c] -= (int64_t)w->tt;
			if (w->caller != w->callee)
				ct[c] -= (int64_t)w->ct;
		}
		for (uint32_t r = 0; r < nr; r++) {
			if (nc[r] <= 0 && ct[r] <= 0)
				continue;
			uint32_t gf = s->row_g[g->row0 + r];
			if (s->local[gf] < 0) {
				s->local[gf] = (int32_t)n;
				s->touched[n] = gf;
				part[n++] = (struct acc){0};
			}
			acc_add(&part[s->local[gf]], nc[r] > 0 ? (uint64_t)nc[r] : 0,
				nc[r] > 0 ? (uint64_t)nc[r] : 0, tt[r] > 0 ? (uint64_t)tt[r] : 0,
				ct[r] > 0 ? (uint64_t)ct[r] : 0);
		}
		free(nc), free(tt), free(ct);
	}
	if (!rc) {
		th->roots = cp_arena_alloc(s->prof->arena, (n + 1) * sizeof(*th->roots));
		if (!th->roots)
			rc = -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (!rc)
			th->roots[th->nroots++] =
			    (struct cp_root){s->gkeys[s->touched[i]], to_stat(&part[i])};
		s->local[s->touched[i]] = -1;
	}
	free(part);
	return rc;
}

static int build_all(struct snap *s)
{
	s->row_g = malloc((s->nrows + 1) * sizeof(*s->row_g));
	if (!s->row_g)
		return -ENOMEM;
	for (uint32_t r = 0; r < s->nrows; r++) {
		int rc = resolve(s, s->rows[r].key, &s->row_g[r]);
		if (rc)
			return rc;
	}
	s->local = malloc((s->ngkeys + 1) * sizeof(*s->local));
	s->touched = malloc((s->ngkeys + 1) * sizeof(*s->touched));
	if (!s->local || !s->touched)
		return -ENOMEM;
	memset(s->local, 0xff, (s->ngkeys + 1) * sizeof(*s->local));
	int rc = build_stats(s, 0, s->nrows, 0, s->nerows, &s->prof->stats);
	for (uint32_t i = 0; i < s->ngroups && !rc; i++) {
		struct group *g = &s->groups[i];
		if (g->task >= 0)
			rc = build_stats(s, g->row0, g->row1, g->erow0, g->erow1,
					 &s->prof->ex.tasks[g->task].stats);
	}
	for (uint32_t i = 0; i < s->nthreads && !rc; i++)
		rc = thread_roots(s, i);
	return rc;
}

/* --- the extras ------------------------------------------------------------------ */

static int read_cmdline(struct snap *s)
{
	struct cp_extras *ex = &s->prof->ex;
	char buf[8192];
	size_t len = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n;
		while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) > 0)
			len += (size_t)n;
		close(fd);
	}
	uint32_t argc = 0;
	for (size_t i = 0; i < len; i++)
		argc += buf[i] == 0;
	if (len && buf[len - 1] != 0)
		argc++;
	ex->argv = cp_arena_alloc(s->prof->arena, (argc + 1) * sizeof(*ex->argv));
	if (!ex->argv)
		return -ENOMEM;
	size_t start = 0;
	for (size_t i = 0; i <= len && ex->argc < argc; i++) {
		if (i == len || buf[i] == 0) {
			ex->argv[ex->argc] =
			    cp_arena_strdup(s->prof->arena, buf + start, i - start);
			if (!ex->argv[ex->argc++])
				return -ENOMEM;
			start = i + 1;
		}
	}
	return 0;
}

static int add_counter(struct snap *s, uint32_t *n, const char *what, uint64_t count)
{
	struct cp_counter *c = &s->prof->ex.dropped[(*n)++];
	c->name = sdup(s, what);
	c->n = count;
	return c->name ? 0 : -ENOMEM;
}

static int fill_extras(struct snap *s)
{
	struct coprof *p = s->p;
	struct cp_extras *ex = &s->prof->ex;
	struct cp_arena *a = s->prof->arena;
	ex->present = 1;
	ex->version = CP_FORMAT_VERSION;
	ex->clock = p->opt.clock == COPROF_CLOCK_CPU ? "cpu" : "wall";
	ex->mode = p->opt.mode == COPROF_MODE_SAMPLE ? "sample" : "trace";
	ex->pid = getpid();
	ex->start = p->start_epoch;
	ex->stop = p->stop_epoch;
	if (!ex->stop && p->started) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ex->stop = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	}
	ex->hz = p->opt.hz;
	ex->overflow = atomic_load(&p->overflow);
	int rc = read_cmdline(s);
	if (rc)
		return rc;
	ex->dropped = cp_arena_alloc(a, (p->ndropped + 5) * sizeof(*ex->dropped));
	ex->notes = cp_arena_alloc(a, (p->nnotes + 3) * sizeof(*ex->notes));
	if (!ex->dropped || !ex->notes)
		return -ENOMEM;
	for (unsigned i = 0; i < p->ndropped && !rc; i++)
		rc = add_counter(s, &ex->ndropped, p->dropped[i].what, p->dropped[i].n);
	if (!rc && s->lost_depth)
		rc = add_counter(s, &ex->ndropped, "calls past the stack depth limit",
				 s->lost_depth);
	if (!rc && s->foreign)
		rc = add_counter(s, &ex->ndropped, "switches to another thread's context",
				 s->foreign);
	if (!rc && s->nfolded)
		rc = add_counter(s, &ex->ndropped, "finished tasks past each thread's newest kept",
				 s->nfolded);
	if (!rc && s->stalls_dropped)
		rc = add_counter(s, &ex->ndropped, "stalls past each thread's longest kept",
				 s->stalls_dropped);
	if (!rc && s->awaits_dropped)
		rc = add_counter(s, &ex->ndropped, "await edges past each thread's table",
				 s->awaits_dropped);
	/* Steps are measured in trace mode, and in sample mode where a runtime says when
	 * its tasks switch (rule 11): a window with no step writes no threshold. */
	if (p->opt.mode == COPROF_MODE_TRACE || atomic_load(&p->stepped))
		ex->stall_threshold = (double)p->opt.stall_ns / 1e9;
	for (unsigned i = 0; i < p->nnotes && !rc; i++)
		if (!(ex->notes[ex->nnotes++] = sdup(s, p->notes[i])))
			rc = -ENOMEM;
	char note[128];
	if (!rc && s->nfolded) {
		snprintf(note, sizeof(note),
			 "%llu finished tasks are only in the totals (each thread's task table "
			 "keeps its %u newest finished)",
			 (unsigned long long)s->nfolded, CP_KEEP_FINISHED);
		if (!(ex->notes[ex->nnotes++] = sdup(s, note)))
			rc = -ENOMEM;
	}
	if (!rc && p->threads) {
		snprintf(note, sizeof(note), "clock implementation: %s",
			 p->opt.fake_clock ? "fake" : cp_clock_name(&p->threads->clock));
		if (!(ex->notes[ex->nnotes++] = sdup(s, note)))
			rc = -ENOMEM;
	}
	return rc;
}

/* --- stalls ---------------------------------------------------------------------- */

static int by_length(const void *x, const void *y)
{
	const struct snap_stall *a = x, *b = y;
	if (a->r.ns != b->r.ns)
		return a->r.ns > b->r.ns ? -1 : 1;
	return a->tid < b->tid ? -1 : a->tid > b->tid;
}

/* A sampled stall's stack (rule 11, sample mode): the innermost function at least half
 * of its step's ticks were in, with the frames above it, innermost first, into
 * st->frames (room for CP_STALL_FRAMES). Frames are compared as functions (resolved),
 * not as addresses: ticks in one function stopped at different instructions. */
static int tick_stack(struct snap *s, const struct snap_stall *from, struct cp_stall *st)
{
	uint32_t g[CP_STEP_TICKS][CP_STALL_FRAMES], n = from->r.nticks;
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < from->ticks[i].depth; k++) {
			int rc = resolve(s, from->ticks[i].keys[k], &g[i][k]);
			if (rc)
				return rc;
		}
	/* For each tick's stack, the longest of its outermost parts that at least half
	 * the ticks share; the longest such part of any. */
	uint32_t best = 0, best_len = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t di = from->ticks[i].depth;
		for (uint32_t len = best_len + 1; len <= di; len++) {
			uint32_t share = 0;
			for (uint32_t j = 0; j < n; j++) {
				uint32_t dj = from->ticks[j].depth, k = 0;
				while (k < len && len <= dj && g[j][dj - 1 - k] == g[i][di - 1 - k])
					k++;
				share += k == len;
			}
			if (2 * share < n)
				break;
			best = i, best_len = len;
		}
	}
	uint32_t d = from->ticks[best].depth;
	for (uint32_t k = 0; k < best_len; k++)
		st->frames[st->depth++] = s->gkeys[g[best][d - best_len + k]];
	return 0;
}

/* The stalls copied from the threads, longest first, their keys resolved. */
static int add_stalls(struct snap *s)
{
	struct cp_extras *ex = &s->prof->ex;
	if (!s->nstalls)
		return 0;
	qsort(s->stalls, s->nstalls, sizeof(*s->stalls), by_length);
	ex->stalls = cp_arena_alloc(s->prof->arena, s->nstalls * sizeof(*ex->stalls));
	if (!ex->stalls)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->nstalls; i++) {
		const struct cp_stall_rec *r = &s->stalls[i].r;
		struct cp_stall *st = &ex->stalls[ex->nstalls++];
		st->thread = s->stalls[i].tid;
		st->task_id = r->ctx_id;
		st->task = sdup(s, r->name);
		/* a task's step an event loop ran (coprof_loop_step_end): the table's name */
		for (uint32_t k = 0; !r->name[0] && r->ctx_id && k < ex->ntasks; k++)
			if (ex->tasks[k].id == r->ctx_id && ex->tasks[k].thread == st->thread) {
				st->task = ex->tasks[k].name;
				break;
			}
		st->seconds = (double)r->ns / 1e9;
		st->behind = r->behind == UINT32_MAX ? -1 : (int64_t)r->behind;
		st->frames = cp_arena_alloc(s->prof->arena,
					    (r->nticks ? CP_STALL_FRAMES : r->depth + 1) * sizeof(*st->frames));
		if (!st->task || !st->frames)
			return -ENOMEM;
		if (r->nticks) {
			int rc = tick_stack(s, &s->stalls[i], st);
			if (rc)
				return rc;
			continue;
		}
		for (uint32_t k = 0; k < r->depth; k++) {
			uint32_t g;
			int rc = resolve(s, r->keys[k], &g);
			if (rc)
				return rc;
			st->frames[st->depth++] = s->gkeys[g];
		}
	}
	return 0;
}

/* --- await edges ----------------------------------------------------------------- */

static int by_wait(const void *x, const void *y)
{
	const struct snap_await *a = x, *b = y;
	if (a->r.ns != b->r.ns)
		return a->r.ns > b->r.ns ? -1 : 1;
	if (a->r.waiter != b->r.waiter)
		return a->r.waiter < b->r.waiter ? -1 : 1;
	return a->r.awaited < b->r.awaited ? -1 : a->r.awaited > b->r.awaited;
}

/* The await edges copied from the threads, longest first. */
static int add_awaits(struct snap *s)
{
	static const char *const kinds[COPROF_AWAIT_KINDS] = {"task", "gather", "taskgroup",
							       "shield", "wait"};
	struct cp_extras *ex = &s->prof->ex;
	if (!s->nawaits)
		return 0;
	qsort(s->awaits, s->nawaits, sizeof(*s->awaits), by_wait);
	ex->awaits = cp_arena_alloc(s->prof->arena, s->nawaits * sizeof(*ex->awaits));
	if (!ex->awaits)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->nawaits; i++) {
		const struct cp_await_rec *r = &s->awaits[i].r;
		struct cp_await *aw = &ex->awaits[ex->nawaits++];
		aw->thread = s->awaits[i].tid;
		aw->waiter_id = r->waiter;
		aw->awaited_id = r->awaited;
		aw->waiter = r->wname[0] ? sdup(s, r->wname) : NULL;
		aw->awaited = r->aname[0] ? sdup(s, r->aname) : NULL;
		aw->kind = kinds[r->kind < COPROF_AWAIT_KINDS ? r->kind : 0];
		aw->count = r->count;
		aw->seconds = (double)r->ns / 1e9;
		if ((r->wname[0] && !aw->waiter) || (r->aname[0] && !aw->awaited))
			return -ENOMEM;
	}
	return 0;
}

/* --- sampled stacks -------------------------------------------------------------- */

static int64_t map_task(void *arg, const void *ctx)
{
	struct snap *s = arg;
	uint32_t i;
	return ctx && map_find(&s->ctxmap, (uint64_t)(uintptr_t)ctx, &i) ? (int64_t)i : -1;
}

static int map_resolve(void *arg, uintptr_t pc, struct cp_key *out)
{
	struct snap *s = arg;
	uint32_t g;
	int rc = resolve(s, pc, &g);
	if (!rc)
		*out = s->gkeys[g];
	return rc;
}

/* The stacks of `taken` (a store cp_snapshot_take took over), else of the live store. */
static int add_samples(struct snap *s, struct cp_samples *taken)
{
	struct coprof *p = s->p;
	struct cp_samples_map map = {s, map_task, map_resolve};
	int rc = 0;
	if (taken)
		return cp_samples_count(taken) ? cp_samples_build(taken, &map, s->prof) : 0;
	pthread_mutex_lock(&p->sample_lock);
	if (p->samples && cp_samples_count(p->samples))
		rc = cp_samples_build(p->samples, &map, s->prof);
	pthread_mutex_unlock(&p->sample_lock);
	return rc;
}

int cp_snapshot(struct coprof *p, struct cp_profile **out)
{
	return cp_snapshot_take(p, 0, out);
}

int cp_snapshot_take(struct coprof *p, int clear, struct cp_profile **out)
{
	struct snap s = {.p = p};
	struct cp_samples *fresh = NULL, *taken = NULL;
	int rc = cp_profile_new(&s.prof);
	if (!rc && clear)
		rc = cp_samples_new(p->opt.memory_limit, &fresh);
	if (rc) {
		if (clear)
			coprof_clear(p);
		cp_profile_free(s.prof);
		return rc;
	}
	uint64_t t0;
	pthread_mutex_lock(&p->lock);
	t0 = cp_clock_gettime_ns(CLOCK_MONOTONIC);
	cp_pause(p);
	rc = copy_all(&s);
	if (!rc)
		rc = fill_extras(&s);
	if (clear) {
		/* The folding thread adds to p->samples under sample_lock: from now on it
		 * adds to the fresh store, and this snapshot owns the old one. */
		pthread_mutex_lock(&p->sample_lock);
		taken = p->samples;
		p->samples = fresh;
		pthread_mutex_unlock(&p->sample_lock);
		cp_clear_paused(p);
	}
	cp_unpause(p);
	p->last_pause_ns = cp_clock_gettime_ns(CLOCK_MONOTONIC) - t0;
	s.nresolvers = p->nresolvers;
	memcpy(s.resolvers, p->resolvers, sizeof(s.resolvers));
	pthread_mutex_unlock(&p->lock);
	/* Resolvers may take locks of their own (a GIL): the profiler lock is not held. */
	if (!rc)
		rc = build_all(&s);
	if (!rc)
		rc = add_samples(&s, taken);
	if (!rc)
		rc = add_stalls(&s);
	if (!rc)
		rc = add_awaits(&s);
	cp_samples_free(taken);
	free(s.stalls);
	free(s.awaits);
	free(s.rows);
	free(s.erows);
	free(s.groups);
	free(s.keymap.keys);
	free(s.keymap.vals);
	free(s.ctxmap.keys);
	free(s.ctxmap.vals);
	free(s.gkeys);
	cp_keymap_fini(&s.bykey);
	free(s.row_g);
	free(s.local);
	free(s.touched);
	if (rc) {
		cp_profile_free(s.prof);
		return rc;
	}
	*out = s.prof;
	return 0;
}
