/* engine-event.c: the hot path. enter, resume and leave push and pop frames on the
 * running context's shadow stack and keep the pstats four per function and per edge
 * (DESIGN rules 1, 2, 6, 7). Runs on the thread that owns the coprof_thread, inside
 * an event section: no lock, no allocation on the common path, one clock read. */
#include <sched.h>
#include <string.h>

#include "engine-inline.h"

#define HASH_MUL 0x9E3779B97F4A7C15ull

static inline uint32_t hash_key(uintptr_t key, uint32_t cap)
{
	uint64_t h = (uint64_t)key * HASH_MUL;
	return (uint32_t)(h >> 32) & (cap - 1);
}

static inline uint32_t hash_pair(const void *a, const void *b, uint32_t cap)
{
	uint64_t h = ((uint64_t)(uintptr_t)a >> 4) * HASH_MUL ^ ((uint64_t)(uintptr_t)b >> 4);
	h *= HASH_MUL;
	return (uint32_t)(h >> 32) & (cap - 1);
}

/* A table's first size. Tables up to TABLE_DENSE slots fill up to seven eighths: a
 * task's tables are small (asyncio.sleep alone is ten functions; an async_tree_io leaf
 * task 13 on 3.12, 16 functions and 17 edges on 3.10) and hold few lookups (each is
 * made once, then found through the call caches), so a full small table spares each
 * task a few hundred bytes and a growth, and costs fewer instructions than it saves.
 * Larger ones (a thread's own context) stay at most half full, for short probes. */
#define TABLE_FIRST 16
#define TABLE_DENSE 32

/* Nonzero when one more entry needs a larger table. */
static inline int table_full(const struct cp_table *tb)
{
	if (tb->cap <= TABLE_DENSE)
		return (tb->n + 1) * 8 > tb->cap * 7;
	return (tb->n + 1) * 2 > tb->cap;
}

/* Doubles a table's slots (or makes the first ones). Returns 0 when out of memory. */
static int table_grow(struct coprof_ctx *c, struct cp_table *tb, int edges)
{
	uint32_t ncap = tb->cap ? tb->cap * 2 : TABLE_FIRST;
	void **ns = cp_pool_alloc(&c->t->pool, ncap * sizeof(void *));
	if (!ns)
		return 0;
	for (uint32_t i = 0; i < tb->cap; i++) {
		void *e = tb->slots[i];
		if (!e)
			continue;
		uint32_t h;
		if (edges) {
			struct cp_erec *er = e;
			h = hash_pair(er->caller, er->callee, ncap);
		} else {
			h = hash_key(((struct cp_rec *)e)->key, ncap);
		}
		while (ns[h])
			h = (h + 1) & (ncap - 1);
		ns[h] = e;
	}
	cp_pool_free(&c->t->pool, tb->slots, tb->cap * sizeof(void *));
	tb->slots = ns;
	tb->cap = ncap;
	return 1;
}

/* The record of `key` in context c, created on first sight. NULL: out of memory. */
struct cp_rec *cp_rec_get(struct coprof_ctx *c, uintptr_t key)
{
	struct cp_table *tb = &c->recs;
	uint32_t h = 0;
	if (tb->cap) {
		h = hash_key(key, tb->cap);
		struct cp_rec *r;
		while ((r = tb->slots[h])) {
			if (r->key == key)
				return r;
			h = (h + 1) & (tb->cap - 1);
		}
	}
	/* A miss ends on the free slot the new record takes, unless the table grows. */
	if (table_full(tb)) {
		if (!table_grow(c, tb, 0))
			return NULL;
		h = hash_key(key, tb->cap);
		while (tb->slots[h])
			h = (h + 1) & (tb->cap - 1);
	}
	struct cp_rec *r = cp_pool_alloc(&c->t->pool, sizeof(*r));
	if (!r)
		return NULL;
	r->key = key;
	tb->slots[h] = r;
	tb->n++;
	return r;
}

/* The caller->callee edge record in context c, created on first sight. */
struct cp_erec *cp_edge_get(struct coprof_ctx *c, struct cp_rec *caller, struct cp_rec *callee)
{
	struct cp_table *tb = &c->edges;
	uint32_t h = 0;
	if (tb->cap) {
		h = hash_pair(caller, callee, tb->cap);
		struct cp_erec *e;
		while ((e = tb->slots[h])) {
			if (e->caller == caller && e->callee == callee)
				return e;
			h = (h + 1) & (tb->cap - 1);
		}
	}
	if (table_full(tb)) {
		if (!table_grow(c, tb, 1))
			return NULL;
		h = hash_pair(caller, callee, tb->cap);
		while (tb->slots[h])
			h = (h + 1) & (tb->cap - 1);
	}
	struct cp_erec *e = cp_pool_alloc(&c->t->pool, sizeof(*e));
	if (!e)
		return NULL;
	e->caller = caller;
	e->callee = callee;
	tb->slots[h] = e;
	tb->n++;
	return e;
}

/* The first size of a context's frame stack (a task runs a few frames deep), and the
 * least it is trimmed to when switched out (it suspends fewer: cp_ctx_stack_trim). */
#define STACK_FIRST 8
#define STACK_TRIMMED 4

/* Makes room for one more frame: doubles the stack up to CP_MAX_DEPTH. Returns 0 when
 * the frame cannot be recorded (cap reached, or memory: then recording stops). */
static int stack_grow(struct coprof_ctx *c)
{
	struct coprof_thread *t = c->t;
	if (c->cap >= CP_MAX_DEPTH)
		return 0;
	uint32_t ncap = c->cap ? c->cap * 2 : STACK_FIRST;
	struct cp_frame *nf = cp_pool_alloc(&t->pool, ncap * sizeof(*nf));
	if (!nf) {
		cp_overflow(t->p, "frame stack");
		return 0;
	}
	for (uint32_t i = 0; i < c->depth; i++)
		nf[i] = c->frames[i];
	cp_pool_free(&t->pool, c->frames, c->cap * sizeof(*nf));
	c->frames = nf;
	c->cap = ncap;
	return 1;
}

void cp_ctx_stack_trim(struct coprof_ctx *c)
{
	struct cp_pool *pl = &c->t->pool;
	if (!c->depth) {
		cp_pool_free(pl, c->frames, c->cap * sizeof(struct cp_frame));
		c->frames = NULL;
		c->cap = 0;
		return;
	}
	if (c->cap <= STACK_TRIMMED || c->depth > c->cap / 4)
		return;
	uint32_t ncap = STACK_TRIMMED;
	while (ncap < c->depth * 2)
		ncap *= 2;
	struct cp_frame *nf = cp_pool_alloc(pl, ncap * sizeof(*nf));
	if (!nf)
		return; /* the stack stays as it was */
	for (uint32_t i = 0; i < c->depth; i++)
		nf[i] = c->frames[i];
	cp_pool_free(pl, c->frames, c->cap * sizeof(*nf));
	c->frames = nf;
	c->cap = ncap;
}

static inline uint32_t call_slot(const struct cp_rec *parent, uintptr_t key)
{
	uint64_t h = ((uint64_t)(uintptr_t)parent >> 4 ^ (uint64_t)key) * HASH_MUL;
	return (uint32_t)(h >> 56) & (CP_CALL_CACHE - 1);
}

/* Adds the pstats four of src to dst, records or edges. */
#define ADD_FOUR(dst, src)                                                                         \
	((dst)->nc += (src)->nc, (dst)->cc += (src)->cc, (dst)->tt += (src)->tt,                   \
	 (dst)->ct += (src)->ct)

/* 1 when caller p can be r's only one so far (cp_rec.via): r has had no activation,
 * or every one was p's call. */
static inline int via_sole(const struct cp_rec *r, const struct cp_rec *p)
{
	return r->via == p || !r->via;
}

/* Record r of c stops having a virtual edge (cp_rec.via): a second caller, or a call
 * with none, is coming. The edge from its one caller so far becomes a record holding
 * r's numbers so far, open activations included, and every frame and call cache that
 * held the virtual edge now holds the record. 0 when out of memory (r unchanged). */
static int via_mix(struct coprof_ctx *c, struct cp_rec *r)
{
	struct cp_rec *p = cp_via_caller(r);
	if (p) {
		struct cp_erec *e = cp_edge_get(c, p, r);
		if (!e)
			return 0;
		e->nc = r->nc;
		e->cc = r->cc;
		e->tt = r->tt;
		e->ct = r->ct;
		e->level = r->level;
		if (p->last_rec == r)
			p->last_edge = e;
		struct cp_call *cc = &c->t->calls[call_slot(p, r->key)];
		if (cc->parent == p && cc->key == r->key)
			cc->edge = e;
		for (uint32_t i = 0; i < c->depth; i++)
			if (c->frames[i].rec == r)
				c->frames[i].edge = e;
	}
	r->via = CP_VIA_MIXED;
	return 1;
}

/* The slow part of a push: the callee is not the caller's last callee. Tries the
 * thread's call cache, then the context's tables (creating the records). */
static int push_lookup(struct coprof_ctx *c, struct cp_rec *parent, uintptr_t key,
		       struct cp_rec **rp, struct cp_erec **ep)
{
	struct coprof_thread *t = c->t;
	if (!t->recorded) { /* a thread's first call is a root, so it comes here */
		t->recorded = 1;
		atomic_store_explicit(&t->p->recorded, 1, memory_order_relaxed);
	}
	struct cp_call *cc = NULL;
	if (parent) {
		cc = &t->calls[call_slot(parent, key)];
		if (cc->parent == parent && cc->key == key)
			goto found;
	}
	struct cp_rec *r = cp_rec_get(c, key);
	if (!r) {
		cp_overflow(t->p, "function table");
		return 0;
	}
	if (parent && via_sole(r, parent)) {
		r->via = parent; /* its only caller so far: the edge stays virtual */
		*cc = (struct cp_call){parent, key, r, CP_EDGE_VIRTUAL};
		goto found;
	}
	if (r->via != CP_VIA_MIXED && !via_mix(c, r)) {
		cp_overflow(t->p, "edge table");
		return 0;
	}
	if (!parent) {
		*rp = r;
		*ep = NULL;
		return 1;
	}
	struct cp_erec *e = cp_edge_get(c, parent, r);
	if (!e) {
		cp_overflow(t->p, "edge table");
		return 0;
	}
	*cc = (struct cp_call){parent, key, r, e};
found:
	parent->last_rec = cc->rec;
	parent->last_edge = cc->edge;
	*rp = cc->rec;
	*ep = cc->edge;
	return 1;
}

/* Pushes a frame of `key` on c at thread clock `now` (cp_push_rec), a call or a resumed
 * segment, finding its records and making room first. */
static inline __attribute__((always_inline)) void push(struct coprof_ctx *c, uintptr_t key,
						       uint64_t now, int call)
{
	if (__builtin_expect(c->lost || c->depth == c->cap, 0)) {
		if (c->lost || !stack_grow(c)) {
			c->lost++; /* its leave pops this count, not a frame */
			c->t->lost_depth++;
			return;
		}
	}
	struct cp_frame *f = &c->frames[c->depth];
	struct cp_rec *parent = c->depth ? f[-1].rec : NULL;
	struct cp_rec *r;
	struct cp_erec *e;
	if (parent && parent->last_rec && parent->last_rec->key == key) {
		r = parent->last_rec;
		e = parent->last_edge;
	} else if (!push_lookup(c, parent, key, &r, &e)) {
		c->lost++;
		return;
	}
	cp_push_rec(c, r, e, now, call);
}

uint64_t cp_ctx_vnow(const struct coprof_ctx *c, uint64_t now)
{
	const struct coprof_thread *t = c->t;
	if (t->cpu && t->cur != c)
		return c->away - c->offset; /* its clock stopped when it was switched out */
	return now - c->offset;
}

void cp_ctx_close_all(struct coprof_ctx *c, uint64_t now)
{
	struct coprof_thread *t = c->t;
	c->lost = 0;
	if (!c->depth)
		return;
	/* Rule 9: the driver's time away is its innermost frame's children (wall). */
	if (!t->cpu && c->is_base && t->cur != c && now > c->away)
		c->frames[c->depth - 1].children += now - c->away;
	uint64_t v = cp_ctx_vnow(c, now);
	while (c->depth)
		cp_pop(c, v);
}

void cp_thread_end(struct coprof_thread *t, uint64_t now)
{
	cp_ctx_close_all(&t->base, now);
	for (struct coprof_ctx *c = t->ctx_head; c; c = c->next)
		cp_ctx_close_all(c, now);
	t->ttot += now - t->run_begin;
	cp_task_run_end(t, now);
	t->cur->away = now;
	t->seen = CP_PAUSED;
}

void cp_wait_unpaused(struct coprof_thread *t)
{
	while (atomic_load_explicit(&t->p->state, memory_order_acquire) & CP_PAUSED)
		sched_yield();
}

void cp_thread_orphaned(struct coprof_thread *t)
{
	t->exited = 1;
	t->seen = CP_PAUSED;
}

int cp_thread_begin(struct coprof_thread *t, uint32_t st)
{
	if (!(st & CP_RECORDING) || t->exited)
		return 0;
	uint64_t now = cp_now(t);
	if (t->exited) /* orphaned by that read */
		return 0;
	t->run_begin = now;
	t->seen = st;
	/* A step under way when recording began is not measured: its start is unknown. */
	t->step_open = 0;
	t->step_long = UINT64_MAX;
	/* The running context was "away" since recording stopped on this thread. */
	if (t->cpu && now > t->cur->away)
		t->cur->offset += now - t->cur->away;
	cp_task_run_begin(t, now);
	return 1;
}

/* The clock for an event: read now, or (again) the thread's last reading, which
 * cp_thread_begin has just renewed when a window begins with this event. */
static inline uint64_t event_now(struct coprof_thread *t, int again)
{
	return again ? t->last : cp_now(t);
}

/* An event that pushes: a call (enter) or a resumed segment (resume). The common case
 * is taken inline first (cp_push_fast); this is the whole of it. */
static inline __attribute__((always_inline)) void event_push(struct coprof_thread *t, uintptr_t key,
							     int call, int again)
{
	if (!t || cp_push_fast(t, key, call, again))
		return;
	uint32_t st = cp_section_open(t);
	if (__builtin_expect(st == t->seen, 1) || cp_thread_begin(t, st))
		push(t->cur, key, event_now(t, again), call);
	cp_section_close(t);
}

void coprof_enter(struct coprof_thread *t, uintptr_t key)
{
	event_push(t, key, 1, 0);
}

void coprof_resume(struct coprof_thread *t, uintptr_t key)
{
	event_push(t, key, 0, 0);
}

void coprof_resume_again(struct coprof_thread *t, uintptr_t key)
{
	event_push(t, key, 0, 1);
}

/* Rule 7 and the longjmp case: the innermost frame of `key` is found from the top; the
 * frames above it are closed at the same instant. A key not on the stack is ignored. */
static inline __attribute__((always_inline)) void event_leave(struct coprof_thread *t,
							      uintptr_t key, int again)
{
	if (!t || cp_leave_fast(t, key, again))
		return;
	uint32_t st = cp_section_open(t);
	if (__builtin_expect(st != t->seen, 0) && !cp_thread_begin(t, st))
		goto out;
	struct coprof_ctx *c = t->cur;
	if (c->lost) {
		c->lost--;
		goto out;
	}
	uint32_t i = c->depth;
	while (i && c->frames[i - 1].rec->key != key)
		i--;
	if (!i)
		goto out;
	uint64_t v = event_now(t, again) - c->offset;
	while (c->depth >= i)
		cp_pop_timed(t, c, v);
out:
	cp_section_close(t);
}

void coprof_leave(struct coprof_thread *t, uintptr_t key)
{
	event_leave(t, key, 0);
}

void coprof_leave_again(struct coprof_thread *t, uintptr_t key)
{
	event_leave(t, key, 1);
}

/* Folds how r (of a finished context) was called into a, its counterpart in `into`,
 * before r's numbers are added to a's: a keeps a virtual edge from the counterpart of
 * r's sole caller while that is a's sole caller too; otherwise its edges are records,
 * and r's virtual edge is added to the one from that caller (r's edge records are
 * folded with the context's edges). 0 when out of memory. */
static int fold_via(struct coprof_ctx *into, struct cp_rec *a, const struct cp_rec *r)
{
	struct cp_rec *p = cp_via_caller(r);
	struct cp_rec *from = p ? p->last_rec : CP_VIA_MIXED;
	if (from != CP_VIA_MIXED && via_sole(a, from)) {
		a->via = from;
		return 1;
	}
	if (a->via != CP_VIA_MIXED && !via_mix(into, a))
		return 0;
	if (from == CP_VIA_MIXED)
		return 1;
	struct cp_erec *e = cp_edge_get(into, from, a);
	if (!e)
		return 0;
	ADD_FOUR(e, r);
	return 1;
}

/* Adds c's records into `into` (the thread's aggregate) and frees c's tables. Both
 * contexts belong to the calling thread. On out-of-memory the rest is dropped. Each of
 * c's records, finished with, keeps its counterpart in `into` in its call cache
 * (last_rec), so that its edges find both ends without hashing them again. A virtual
 * edge stays virtual in `into` while every record folded into its callee had it. */
void cp_ctx_fold(struct coprof_ctx *into, struct coprof_ctx *c)
{
	int all = 1;
	for (uint32_t i = 0; i < c->recs.cap && all; i++) {
		struct cp_rec *r = c->recs.slots[i];
		if (r && !(r->last_rec = cp_rec_get(into, r->key))) {
			cp_overflow(c->t->p, "function table");
			all = 0;
		}
	}
	for (uint32_t i = 0; i < c->recs.cap && all; i++) {
		struct cp_rec *r = c->recs.slots[i];
		if (!r)
			continue;
		if (r->via && !fold_via(into, r->last_rec, r)) {
			cp_overflow(c->t->p, "edge table");
			all = 0;
			break;
		}
		ADD_FOUR(r->last_rec, r);
	}
	for (uint32_t i = 0; i < c->edges.cap && all; i++) {
		struct cp_erec *e = c->edges.slots[i];
		if (!e)
			continue;
		struct cp_rec *ca = e->caller->last_rec;
		struct cp_rec *ce = e->callee->last_rec;
		struct cp_erec *a = cp_edge_get(into, ca, ce);
		if (!a) {
			cp_overflow(c->t->p, "edge table");
			break;
		}
		ADD_FOUR(a, e);
	}
	cp_ctx_release(c);
	c->folded = 1;
}

/* Clears the thread's call cache entry of caller's call of key, if it holds one. */
static void forget_call(struct coprof_thread *t, const struct cp_rec *caller, uintptr_t key)
{
	struct cp_call *cc = &t->calls[call_slot(caller, key)];
	if (cc->parent == caller)
		*cc = (struct cp_call){0};
}

/* Gives c's records, tables and stack back to the pool; c is empty afterwards. The
 * thread's call cache forgets c's calls: each entry is an edge of its context (made by
 * push_lookup with the edge found), a record or a virtual one, so clearing the slot of
 * each of c's edges leaves no entry naming a record of c, without wiping the whole
 * cache for every task folded. */
void cp_ctx_release(struct coprof_ctx *c)
{
	struct cp_pool *pl = &c->t->pool;
	for (uint32_t i = 0; i < c->edges.cap; i++) {
		struct cp_erec *e = c->edges.slots[i];
		if (e)
			forget_call(c->t, e->caller, e->callee->key);
	}
	for (uint32_t i = 0; i < c->recs.cap; i++) {
		struct cp_rec *r = c->recs.slots[i];
		if (!r)
			continue;
		if (cp_via_caller(r))
			forget_call(c->t, r->via, r->key);
		cp_pool_free(pl, r, sizeof(struct cp_rec));
	}
	for (uint32_t i = 0; i < c->edges.cap; i++)
		if (c->edges.slots[i])
			cp_pool_free(pl, c->edges.slots[i], sizeof(struct cp_erec));
	cp_pool_free(pl, c->recs.slots, c->recs.cap * sizeof(void *));
	cp_pool_free(pl, c->edges.slots, c->edges.cap * sizeof(void *));
	cp_pool_free(pl, c->frames, c->cap * sizeof(struct cp_frame));
	c->recs = (struct cp_table){0};
	c->edges = (struct cp_table){0};
	c->frames = NULL;
	c->depth = c->cap = c->lost = 0;
}
