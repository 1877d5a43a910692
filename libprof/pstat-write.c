/* pstat-write.c: serializes a struct cp_profile into a .pstat file (DESIGN "The file").
 *
 * Called by the engine at dump time (the dumping thread, never a signal handler) and
 * by tests. Publishes the file whole or not at all (cp_publish: a temporary file in the
 * target's directory, synced, renamed over a target that is a regular file or nothing).
 * The file holds two marshal objects, version 4:
 *
 * 1. The pstats dict, exactly as cProfile's dump_stats writes it, plus the synthetic
 *    functions of the whole-program tree (whole.h): one root, "<whole program>", over
 *    a node per thread and per task whose edges go down to that context's roots:
 *      {(file, line, name): (cc, nc, tt, ct, {caller_key: (nc, cc, tt, ct)})}
 *    Every caller key is also a top-level key. Times are float seconds, never NaN or
 *    infinite (written as 0.0). Counts are ints (marshal 'l' longs above 2^31-1).
 *    Functions with equal keys are merged (their numbers and edges summed), since a
 *    dict cannot hold a key twice. Key tuples and file names are written once and
 *    then referenced (marshal FLAG_REF / 'r'), which Python 3.4+ loads.
 *
 * 2. The coprof extras, a dict that pstats never reads (it loads one object):
 *      'coprof':   int, the format version (CP_FORMAT_VERSION); marks the object
 *      'clock':    'cpu' | 'wall'            'mode':  'trace' | 'sample'
 *      'pid':      int                       'argv':  [str, ...]
 *      'start', 'stop': float, seconds since the epoch
 *      'hz':       float, sampling rate (0.0 in trace mode)
 *      'overflow': bool, a limit was hit and recording stopped
 *      'dropped':  {counter name: int}       'notes': [str, ...]
 *      'tasks':    [{'id': int, 'name': str, 'runtime': str, 'thread': int (tid),
 *                    'ttot': float s, 'resumes': int, 'state': str,
 *                    'stats': a pstats dict as in 1., the task's own functions;
 *                    in trace mode also 'run_cpu', 'run_wall', 'ready',
 *                    'ready_max', 'waiting': float s (doc/design.md rule 12)}]
 *      'threads':  [{'tid': int, 'name': str, 'ttot': float s, 'switches': int,
 *                    'roots': {key: (nc, cc, tt, ct)}, the calls no caller made on
 *                    the thread's own stack (absent when unknown: sample mode)}]
 *      'stacks':   [(task index into 'tasks' or -1, tid, (key, ...) innermost first,
 *                    samples: int, waiting: bool)]
 *      'synthetic': [key, ...], the functions of 1. that the writer added to join
 *                    every root under one (whole.h); readers that know this key take
 *                    them out again, so report and diff numbers stay the profile's.
 *      'stack_ns': [int, ...], one per entry of 'stacks': the ns its samples were
 *                    charged (under cpu a tick weighs the CPU time since the last
 *                    one, so this is not samples x period). Absent in older files.
 *      'stall_threshold': float s; 'stalls': [(tid, task id, task name, seconds,
 *                    (key, ...) innermost first, behind: int)], longest first: the
 *                    task steps and loop callbacks (task id 0) that held their
 *                    thread at least the threshold long (doc/design.md rule 11),
 *                    each with its longest point's stack and the tasks ready behind
 *                    it (rule 12; -1: not known). Absent in older files, and where
 *                    no step was measured (threshold 0.0); `behind` absent in files
 *                    written before it.
 *      'awaits':   [(tid, waiter task id, waiter name, awaited task id, awaited name,
 *                    kind, count, seconds)], longest first: who awaited whom (kind
 *                    'task', 'gather', 'taskgroup', 'shield' or 'wait'), how often, and for
 *                    how long in all (wall seconds under either clock). Absent in
 *                    older files.
 *    A NULL string of struct cp_profile is written as None. Readers ignore keys they
 *    do not know, so later versions may add keys; references restart in this object.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coprof-private.h"
#include "coprof.h"

#include "keymap.h"
#include "marshal.h"
#include "profile.h"
#include "whole.h"

/* What one marshal object has written so far, for back-references. */
/* Shared strings by address, in front of `strs`: the extras' dict keys are a few
 * literals written once per task or thread, and hashing their text each time cost
 * more than the rest of a task's row. A string's text stays put while one object is
 * written, so its address stands for it; another address with the same text still
 * finds the same reference in `strs`. */
#define SEEN_STRS 64

struct refs {
	struct cp_keymap keys; /* key tuple -> ref index */
	struct cp_keymap strs; /* file names and extras' dict keys -> ref index */
	struct {
		const char *s;
		uint32_t ref;
	} seen[SEEN_STRS];
};

static const char *nz(const char *s)
{
	return s ? s : "";
}

static int refs_init(struct refs *r)
{
	cp_keymap_init(&r->keys);
	cp_keymap_init(&r->strs);
	memset(r->seen, 0, sizeof(r->seen));
	return 0;
}

static void refs_fini(struct refs *r)
{
	cp_keymap_fini(&r->keys);
	cp_keymap_fini(&r->strs);
}

/* Looks (a, line, b) up in `m`: when it was written before in this object, writes a
 * reference to it and returns 1; otherwise records that it gets ref index w->nrefs
 * (the index the next object written takes) and returns 0. Out of memory: sets the
 * writer's error and returns 1, so the caller writes nothing. */
static int put_ref_if_seen(struct cp_mw *w, struct cp_keymap *m, const char *a, uint64_t line,
			   const char *b)
{
	uint32_t ref = w->nrefs;
	int found;

	if (cp_keymap_get_or_put(m, a, strlen(a), line, b, b ? strlen(b) : 0, &ref, &found) < 0) {
		if (!w->err)
			w->err = -ENOMEM;
		return 1;
	}
	if (found)
		cp_mw_ref(w, ref);
	return found;
}

/* A string written once per object and referenced afterwards. */
static void put_shared_str(struct cp_mw *w, struct refs *r, const char *s)
{
	s = nz(s);
	uint32_t h = (uint32_t)(((uintptr_t)s >> 3) * 0x9E3779B97F4A7C15ull >> 58);
	if (r->seen[h].s == s) {
		cp_mw_ref(w, r->seen[h].ref);
		return;
	}
	size_t n = strlen(s);
	uint32_t ref = w->nrefs;
	int found;
	if (cp_keymap_get_or_put(&r->strs, s, n, 0, NULL, 0, &ref, &found) < 0) {
		if (!w->err)
			w->err = -ENOMEM;
		return;
	}
	if (found)
		cp_mw_ref(w, ref);
	else
		cp_mw_str(w, s, n, &ref); /* flagged: later copies refer to it */
	r->seen[h].s = s;
	r->seen[h].ref = ref;
}

static void put_opt_str(struct cp_mw *w, const char *s)
{
	if (s)
		cp_mw_str(w, s, strlen(s), NULL);
	else
		cp_mw_none(w);
}

/* Writes (file, line, name), or a reference to the same key written earlier in this
 * object. The tuple's ref index is taken before its items, as marshal numbers them. */
static void put_key(struct cp_mw *w, struct refs *r, const struct cp_key *k)
{
	const char *file = nz(k->file), *name = nz(k->name);
	uint32_t ref;

	if (put_ref_if_seen(w, &r->keys, file, k->line, name))
		return;
	cp_mw_tuple(w, 3, &ref); /* flagged: later copies refer to it */
	put_shared_str(w, r, file);
	cp_mw_uint(w, k->line);
	cp_mw_str(w, name, strlen(name), NULL);
}

/* --- merging duplicate keys ------------------------------------------------------ */

static void stat_add(struct cp_stat *to, const struct cp_stat *s)
{
	to->cc += s->cc;
	to->nc += s->nc;
	to->tt += s->tt;
	to->ct += s->ct;
}

/* Checks that callers index funcs; if two functions share a key (or a function lists
 * one caller twice), builds in `scratch` a copy of `in` where they are one function
 * (numbers summed, edges merged by caller) and points *out at it; otherwise *out =
 * in. Edge order is kept. */
static int canonical_stats(const struct cp_stats *in, struct cp_arena *scratch,
			   const struct cp_stats **out)
{
	struct cp_keymap km;
	uint32_t *canon = NULL, *uniq = NULL, *slot = NULL, nuniq = 0;
	struct cp_stats *m;
	int r = 0, dup = 0;

	*out = in;
	if (in->nfuncs && !in->funcs)
		return -EINVAL;
	for (uint32_t i = 0; i < in->nfuncs; i++) {
		if (in->funcs[i].ncallers && !in->funcs[i].callers)
			return -EINVAL;
		for (uint32_t j = 0; j < in->funcs[i].ncallers; j++)
			if (in->funcs[i].callers[j].caller >= in->nfuncs)
				return -EINVAL;
	}
	cp_keymap_init(&km);
	canon = calloc(in->nfuncs + 1, sizeof(*canon));
	if (!canon) {
		r = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < in->nfuncs; i++) {
		const struct cp_key *k = &in->funcs[i].key;
		/* Keyed as written: invalid UTF-8 repaired, so two keys that become one
		 * in the file are merged here. */
		const char *file = cp_utf8_repair(scratch, nz(k->file));
		const char *name = cp_utf8_repair(scratch, nz(k->name));
		uint32_t v = nuniq;
		int found;
		if (!file || !name) {
			r = -ENOMEM;
			goto out;
		}
		r = cp_keymap_get_or_put(&km, file, strlen(file), k->line, name, strlen(name), &v,
					 &found);
		if (r < 0)
			goto out;
		canon[i] = v;
		if (found)
			dup = 1;
		else
			nuniq++;
	}
	if (!dup) {
		/* One caller listed twice for a function would be a repeated dict key too. */
		uniq = calloc(in->nfuncs + 1, sizeof(*uniq));
		if (!uniq) {
			r = -ENOMEM;
			goto out;
		}
		for (uint32_t i = 0; i < in->nfuncs; i++) {
			for (uint32_t j = 0; j < in->funcs[i].ncallers; j++) {
				uint32_t c = in->funcs[i].callers[j].caller;
				dup |= uniq[c] == i + 1;
				uniq[c] = i + 1;
			}
		}
		free(uniq);
		uniq = NULL;
		if (!dup)
			goto out;
	}

	m = cp_arena_alloc(scratch, sizeof(*m));
	uniq = calloc(nuniq + 1, sizeof(*uniq));
	slot = malloc((nuniq + 1) * sizeof(*slot));
	if (!m || !uniq || !slot) {
		r = -ENOMEM;
		goto out;
	}
	m->nfuncs = nuniq;
	m->funcs = cp_arena_alloc(scratch, (size_t)nuniq * sizeof(*m->funcs));
	if (!m->funcs) {
		r = -ENOMEM;
		goto out;
	}
	/* Sum the numbers and count the edges each merged function may get. */
	for (uint32_t i = 0; i < in->nfuncs; i++) {
		struct cp_func *f = &m->funcs[canon[i]];
		if (uniq[canon[i]]++ == 0)
			f->key = in->funcs[i].key;
		stat_add(&f->s, &in->funcs[i].s);
		f->ncallers += in->funcs[i].ncallers;
	}
	for (uint32_t u = 0; u < nuniq; u++) {
		m->funcs[u].callers =
		    cp_arena_alloc(scratch, m->funcs[u].ncallers * sizeof(struct cp_edge));
		if (!m->funcs[u].callers) {
			r = -ENOMEM;
			goto out;
		}
		m->funcs[u].ncallers = 0;
	}
	/* slot[caller] is the position of that caller's edge in the function being
	 * merged; uniq[] is reused as a stamp saying which function that is. */
	for (uint32_t u = 0; u < nuniq; u++)
		uniq[u] = UINT32_MAX;
	for (uint32_t i = 0; i < in->nfuncs; i++) {
		struct cp_func *f = &m->funcs[canon[i]];
		for (uint32_t j = 0; j < in->funcs[i].ncallers; j++) {
			const struct cp_edge *e = &in->funcs[i].callers[j];
			uint32_t c = canon[e->caller];
			if (uniq[c] != canon[i]) {
				uniq[c] = canon[i];
				slot[c] = f->ncallers++;
				f->callers[slot[c]].caller = c;
			}
			stat_add(&f->callers[slot[c]].s, &e->s);
		}
	}
	*out = m;
out:
	free(canon);
	free(uniq);
	free(slot);
	cp_keymap_fini(&km);
	return r;
}

/* --- the objects ------------------------------------------------------------------ */

/* One pstats dict. `s` has unique keys and valid caller indices. */
static void put_stats(struct cp_mw *w, struct refs *r, const struct cp_stats *s)
{
	cp_mw_dict_begin(w);
	for (uint32_t i = 0; i < s->nfuncs && !w->err; i++) {
		const struct cp_func *f = &s->funcs[i];
		put_key(w, r, &f->key);
		cp_mw_tuple(w, 5, NULL);
		cp_mw_uint(w, f->s.cc);
		cp_mw_uint(w, f->s.nc);
		cp_mw_float(w, f->s.tt);
		cp_mw_float(w, f->s.ct);
		cp_mw_dict_begin(w);
		for (uint32_t j = 0; j < f->ncallers; j++) {
			const struct cp_edge *e = &f->callers[j];
			put_key(w, r, &s->funcs[e->caller].key);
			cp_mw_tuple(w, 4, NULL);
			cp_mw_uint(w, e->s.nc);
			cp_mw_uint(w, e->s.cc);
			cp_mw_float(w, e->s.tt);
			cp_mw_float(w, e->s.ct);
		}
		cp_mw_dict_end(w);
	}
	cp_mw_dict_end(w);
}

static int put_task(struct cp_mw *w, struct refs *r, const struct cp_task *t,
		    struct cp_arena *scratch)
{
	const struct cp_stats *s;
	int err = canonical_stats(&t->stats, scratch, &s);

	if (err < 0)
		return err;
	cp_mw_dict_begin(w);
	put_shared_str(w, r, "id");
	cp_mw_uint(w, t->id);
	put_shared_str(w, r, "name");
	put_opt_str(w, t->name);
	put_shared_str(w, r, "runtime");
	put_opt_str(w, t->runtime);
	put_shared_str(w, r, "thread");
	cp_mw_uint(w, t->thread);
	put_shared_str(w, r, "ttot");
	cp_mw_float(w, t->ttot);
	put_shared_str(w, r, "resumes");
	cp_mw_uint(w, t->resumes);
	put_shared_str(w, r, "state");
	put_opt_str(w, t->state);
	if (t->timed) {
		static const char *const names[] = {"run_cpu", "run_wall", "ready", "ready_max",
						    "waiting"};
		const double vals[] = {t->run_cpu, t->run_wall, t->ready, t->ready_max, t->waiting};
		for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
			put_shared_str(w, r, names[i]);
			cp_mw_float(w, vals[i] > 0 ? vals[i] : 0);
		}
	}
	put_shared_str(w, r, "stats");
	put_stats(w, r, s);
	cp_mw_dict_end(w);
	return 0;
}

static void put_thread(struct cp_mw *w, struct refs *r, const struct cp_thread *t)
{
	cp_mw_dict_begin(w);
	put_shared_str(w, r, "tid");
	cp_mw_uint(w, t->tid);
	put_shared_str(w, r, "name");
	put_opt_str(w, t->name);
	put_shared_str(w, r, "ttot");
	cp_mw_float(w, t->ttot);
	put_shared_str(w, r, "switches");
	cp_mw_uint(w, t->switches);
	if (t->roots) {
		put_shared_str(w, r, "roots");
		cp_mw_dict_begin(w);
		for (uint32_t i = 0; i < t->nroots; i++) {
			put_key(w, r, &t->roots[i].key);
			cp_mw_tuple(w, 4, NULL);
			cp_mw_uint(w, t->roots[i].s.nc);
			cp_mw_uint(w, t->roots[i].s.cc);
			cp_mw_float(w, t->roots[i].s.tt);
			cp_mw_float(w, t->roots[i].s.ct);
		}
		cp_mw_dict_end(w);
	}
	cp_mw_dict_end(w);
}

static int put_stack(struct cp_mw *w, struct refs *r, const struct cp_profile *p,
		     const struct cp_stack *st)
{
	if (st->task < -1 || (st->task >= 0 && (uint64_t)st->task >= p->ex.ntasks))
		return -EINVAL;
	if (st->depth && !st->frames)
		return -EINVAL;
	for (uint32_t j = 0; j < st->depth; j++)
		if (st->frames[j] >= p->stats.nfuncs)
			return -EINVAL;
	cp_mw_tuple(w, 5, NULL);
	cp_mw_int(w, st->task);
	cp_mw_uint(w, st->thread);
	cp_mw_tuple(w, st->depth, NULL);
	for (uint32_t j = 0; j < st->depth; j++)
		put_key(w, r, &p->stats.funcs[st->frames[j]].key);
	cp_mw_uint(w, st->count);
	cp_mw_bool(w, st->waiting);
	return 0;
}

static int put_stall(struct cp_mw *w, struct refs *r, const struct cp_stall *st)
{
	if (st->depth && !st->frames)
		return -EINVAL;
	cp_mw_tuple(w, 6, NULL);
	cp_mw_uint(w, st->thread);
	cp_mw_uint(w, st->task_id);
	put_opt_str(w, st->task);
	cp_mw_float(w, st->seconds);
	cp_mw_tuple(w, st->depth, NULL);
	for (uint32_t j = 0; j < st->depth; j++)
		put_key(w, r, &st->frames[j]);
	cp_mw_int(w, st->behind);
	return 0;
}

static void put_await(struct cp_mw *w, const struct cp_await *aw)
{
	cp_mw_tuple(w, 8, NULL);
	cp_mw_uint(w, aw->thread);
	cp_mw_uint(w, aw->waiter_id);
	put_opt_str(w, aw->waiter);
	cp_mw_uint(w, aw->awaited_id);
	put_opt_str(w, aw->awaited);
	put_opt_str(w, aw->kind);
	cp_mw_uint(w, aw->count);
	cp_mw_float(w, aw->seconds);
}

static int put_extras(struct cp_mw *w, struct refs *r, const struct cp_profile *p,
		      const struct cp_stats *whole, uint32_t nreal, struct cp_arena *scratch)
{
	const struct cp_extras *x = &p->ex;
	int err;

	cp_mw_dict_begin(w);
	put_shared_str(w, r, "coprof");
	cp_mw_int(w, CP_FORMAT_VERSION);
	put_shared_str(w, r, "clock");
	put_opt_str(w, x->clock);
	put_shared_str(w, r, "mode");
	put_opt_str(w, x->mode);
	put_shared_str(w, r, "pid");
	cp_mw_int(w, x->pid);
	put_shared_str(w, r, "argv");
	cp_mw_list(w, x->argv ? x->argc : 0);
	for (uint32_t i = 0; x->argv && i < x->argc; i++)
		cp_mw_str(w, nz(x->argv[i]), strlen(nz(x->argv[i])), NULL);
	put_shared_str(w, r, "start");
	cp_mw_float(w, x->start);
	put_shared_str(w, r, "stop");
	cp_mw_float(w, x->stop);
	put_shared_str(w, r, "hz");
	cp_mw_float(w, x->hz);
	put_shared_str(w, r, "overflow");
	cp_mw_bool(w, x->overflow);
	put_shared_str(w, r, "dropped");
	cp_mw_dict_begin(w);
	for (uint32_t i = 0; x->dropped && i < x->ndropped; i++) {
		cp_mw_str(w, nz(x->dropped[i].name), strlen(nz(x->dropped[i].name)), NULL);
		cp_mw_uint(w, x->dropped[i].n);
	}
	cp_mw_dict_end(w);
	put_shared_str(w, r, "notes");
	cp_mw_list(w, x->notes ? x->nnotes : 0);
	for (uint32_t i = 0; x->notes && i < x->nnotes; i++)
		cp_mw_str(w, nz(x->notes[i]), strlen(nz(x->notes[i])), NULL);
	put_shared_str(w, r, "tasks");
	cp_mw_list(w, x->tasks ? x->ntasks : 0);
	for (uint32_t i = 0; x->tasks && i < x->ntasks; i++)
		if ((err = put_task(w, r, &x->tasks[i], scratch)) < 0)
			return err;
	put_shared_str(w, r, "threads");
	cp_mw_list(w, x->threads ? x->nthreads : 0);
	for (uint32_t i = 0; x->threads && i < x->nthreads; i++)
		put_thread(w, r, &x->threads[i]);
	put_shared_str(w, r, "stacks");
	cp_mw_list(w, x->stacks ? x->nstacks : 0);
	for (uint32_t i = 0; x->stacks && i < x->nstacks; i++)
		if ((err = put_stack(w, r, p, &x->stacks[i])) < 0)
			return err;
	put_shared_str(w, r, "synthetic");
	cp_mw_list(w, whole->nfuncs - nreal);
	for (uint32_t i = nreal; i < whole->nfuncs; i++)
		put_key(w, r, &whole->funcs[i].key);
	put_shared_str(w, r, "stack_ns");
	cp_mw_list(w, x->stacks ? x->nstacks : 0);
	for (uint32_t i = 0; x->stacks && i < x->nstacks; i++)
		cp_mw_uint(w, x->stacks[i].weight);
	put_shared_str(w, r, "stall_threshold");
	cp_mw_float(w, x->stall_threshold);
	put_shared_str(w, r, "stalls");
	cp_mw_list(w, x->stalls ? x->nstalls : 0);
	for (uint32_t i = 0; x->stalls && i < x->nstalls; i++)
		if ((err = put_stall(w, r, &x->stalls[i])) < 0)
			return err;
	put_shared_str(w, r, "awaits");
	cp_mw_list(w, x->awaits ? x->nawaits : 0);
	for (uint32_t i = 0; x->awaits && i < x->nawaits; i++)
		put_await(w, &x->awaits[i]);
	cp_mw_dict_end(w);
	return w->err;
}

/* Encodes the whole file into `w`. Returns 0, -EINVAL for an inconsistent profile
 * (a caller, frame or task index out of range), or the writer's error. */
static int encode(const struct cp_profile *p, struct cp_mw *w)
{
	struct cp_arena *scratch = cp_arena_new();
	const struct cp_stats *s;
	struct cp_stats whole;
	struct refs r;
	int err;

	if (!scratch)
		return -ENOMEM;
	refs_init(&r);
	err = canonical_stats(&p->stats, scratch, &s);
	if (err == 0)
		err = cp_whole_program(p, s, scratch, &whole);
	if (err == 0) {
		cp_mw_begin_object(w);
		put_stats(w, &r, &whole);
		err = w->err;
	}
	if (err == 0) {
		refs_fini(&r);
		refs_init(&r);
		cp_mw_begin_object(w);
		err = put_extras(w, &r, p, &whole, s->nfuncs, scratch);
	}
	refs_fini(&r);
	cp_arena_free(scratch);
	return err ? err : w->err;
}

int cp_profile_encode(const struct cp_profile *p, unsigned char **buf, size_t *len)
{
	struct cp_mw w;
	int err;

	*buf = NULL;
	*len = 0;
	cp_mw_init(&w, -1);
	err = encode(p, &w);
	if (err == 0)
		err = cp_mw_take(&w, buf, len);
	cp_mw_fini(&w);
	return err;
}

int cp_profile_write_fd(const struct cp_profile *p, int fd)
{
	struct cp_mw w;
	int err;

	if (!p || fd < 0)
		return -EINVAL;
	cp_mw_init(&w, fd);
	err = encode(p, &w);
	if (err == 0)
		err = cp_mw_flush(&w);
	cp_mw_fini(&w);
	return err;
}

static int fill(void *p, int fd)
{
	return cp_profile_write_fd(p, fd);
}

int cp_profile_write(const struct cp_profile *p, const char *path)
{
	if (!p || !path)
		return -EINVAL;
	return cp_publish(&(struct cp_publish){
	    .dirfd = AT_FDCWD,
	    .path = path,
	    .follow = 1,
	    .pid = (long)getpid(),
	    .fill = fill,
	    .arg = (void *)p,
	});
}
