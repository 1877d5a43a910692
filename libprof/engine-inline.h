/* engine-inline.h: the inline pieces every engine event uses: the clock read, the
 * event section that makes a dump consistent, a frame's push and pop, and the common
 * case of an event whole (cp_push_fast, cp_leave_fast), which the CPython adapter
 * inlines too: each of its events is one of them. Owner thread only.
 *
 * An event section: the thread makes its sequence counter odd, then reads the
 * profiler's state word. The dumper sets CP_PAUSED, forces a barrier on every thread
 * (membarrier, or the writers' own full fence when it is unavailable), and waits for
 * every counter to be even. A writer that sees CP_PAUSED leaves its section and waits. */
#ifndef CP_ENGINE_INLINE_H
#define CP_ENGINE_INLINE_H

#include <stddef.h>

#include "engine.h"

/* The thread's clock now. A clock set up in another process (clock.h: a child made
 * without fork's handlers) makes the thread record no more: its data is its parent's
 * copy, which this process is not to write out. */
static inline uint64_t cp_now(struct coprof_thread *t)
{
	uint64_t ns = t->fake ? t->fake(t->fake_arg) : cp_clock_now(&t->clock);
	if (__builtin_expect(t->clock.orphan, 0))
		cp_thread_orphaned(t);
	t->last = ns;
	return ns;
}

/* The first step of opening an event section: the sequence counter made odd (it was
 * *s), then the state word read, which it returns. */
static inline uint32_t cp_section_try(struct coprof_thread *t, uint32_t *s)
{
	*s = atomic_load_explicit(&t->seq, memory_order_relaxed);
	atomic_store_explicit(&t->seq, *s + 1, memory_order_relaxed);
	if (t->fence)
		atomic_thread_fence(memory_order_seq_cst);
	else
		atomic_signal_fence(memory_order_seq_cst);
	return atomic_load_explicit(&t->p->state, memory_order_acquire);
}

/* Leaves a section cp_section_try opened, having written nothing. */
static inline void cp_section_back_out(struct coprof_thread *t, uint32_t s)
{
	atomic_store_explicit(&t->seq, s + 2, memory_order_release);
}

/* Opens an event section; returns the state word seen (never with CP_PAUSED). */
static inline uint32_t cp_section_open(struct coprof_thread *t)
{
	for (;;) {
		uint32_t s, st = cp_section_try(t, &s);
		if (__builtin_expect(!(st & CP_PAUSED), 1))
			return st;
		cp_section_back_out(t, s);
		cp_wait_unpaused(t);
	}
}

static inline void cp_section_close(struct coprof_thread *t)
{
	uint32_t s = atomic_load_explicit(&t->seq, memory_order_relaxed);
	atomic_store_explicit(&t->seq, s + 1, memory_order_release);
}

/* Pushes a frame of record r (edge e: NULL for a frame with no caller in c) on c at
 * thread clock `now`, with room for it. A call (rule 1) counts nc, and cc when the
 * function (or the edge) is not already active in this context; a resumed segment
 * (rule 6) counts neither but still raises the recursion levels, so that each
 * segment's ct adds up when it leaves. */
static inline __attribute__((always_inline)) void
cp_push_rec(struct coprof_ctx *c, struct cp_rec *r, struct cp_erec *e, uint64_t now, int call)
{
	struct cp_frame *f = &c->frames[c->depth++];
	f->rec = r;
	f->edge = e;
	f->start = now - c->offset;
	f->children = 0;
	if (call) {
		r->nc++;
		r->cc += r->level == 0;
		if (cp_edge_real(e)) {
			e->nc++;
			e->cc += e->level == 0;
		}
	}
	r->level++;
	if (cp_edge_real(e))
		e->level++;
}

/* Pops the top frame of c at virtual time v (rule 2). Returns its elapsed time. */
static inline __attribute__((always_inline)) uint64_t cp_pop(struct coprof_ctx *c, uint64_t v)
{
	struct cp_frame *f = &c->frames[--c->depth];
	uint64_t el = v > f->start ? v - f->start : 0;
	uint64_t own = el > f->children ? el - f->children : 0;
	struct cp_rec *r = f->rec;
	r->tt += own;
	if (--r->level == 0)
		r->ct += el;
	struct cp_erec *e = f->edge;
	if (cp_edge_real(e)) {
		e->tt += own;
		if (--e->level == 0)
			e->ct += el;
	}
	if (c->depth)
		f[-1].children += el;
	return el;
}

/* A call of el ns just closed on c, longer than any closed in the running task's step
 * so far (rule 11), when it began in this step (under wall a call open across an await
 * ran on). The stack kept is the innermost such call's: one that encloses the call
 * kept (deeper, begun no earlier) only says how long the enclosing one was, as its
 * stack is part of the kept one's. Otherwise this call's stack is kept, innermost
 * first: the frame just popped, then its callers. Cold and out of line: it runs for
 * calls of half the stall threshold or more. */
static __attribute__((noinline, cold, unused)) void
cp_step_longest(struct coprof_thread *t, const struct coprof_ctx *c, uint64_t el)
{
	const struct cp_frame *f = &c->frames[c->depth];
	uint32_t d = c->depth + 1;
	if (f->start < t->step_vbegin)
		return;
	t->step_long = el;
	t->step_long_depth = d;
	if (t->step_depth && d < t->step_kdepth && f->start <= t->step_kstart)
		return;
	uint32_t n = 0;
	for (uint32_t i = d; i-- > 0 && n < CP_STALL_FRAMES;)
		t->step_keys[n++] = c->frames[i].rec->key;
	t->step_depth = n;
	t->step_klen = el;
	t->step_kdepth = d;
	t->step_kstart = f->start;
}

/* Pops the top frame of t's running context at virtual time v, looking at its length
 * for the step's longest point. */
static inline __attribute__((always_inline)) void cp_pop_timed(struct coprof_thread *t,
								struct coprof_ctx *c, uint64_t v)
{
	uint64_t el = cp_pop(c, v);
	if (__builtin_expect(el > t->step_long, 0))
		cp_step_longest(t, c, el);
}

/* Opens an event section for the fast path: 1, or 0 (nothing opened) when the dumper
 * pauses threads or this thread's recording state changed (the full path then waits,
 * or begins a window). */
static inline int cp_section_open_fast(struct coprof_thread *t)
{
	uint32_t s, st = cp_section_try(t, &s);
	/* (t->seen is CP_PAUSED alone after a thread's run ended.) */
	if (__builtin_expect(st == t->seen && !(st & CP_PAUSED), 1))
		return 1;
	cp_section_back_out(t, s);
	return 0;
}

/* The clock for the fast path: the thread's last reading (again), or the TSC between
 * reschedules; 0 when only the full path can read it (a fake clock, a resync due, a
 * clock read through the kernel). */
static inline uint64_t cp_now_fast(struct coprof_thread *t, int again)
{
	if (again)
		return t->last;
#if CP_CLOCK_HAVE_TSC
	struct cp_clock *c = &t->clock;
	if (t->fake || c->impl > CP_CLOCK_TSC_WALL)
		return 0;
	uint64_t d = cp_rdtsc() - c->tsc0;
	if (!cp_clock_anchor_holds(c, d))
		return 0;
	uint64_t ns = c->ns0 + ((d * c->mult) >> CP_CLOCK_SHIFT);
	if (ns < c->last)
		ns = c->last;
	c->last = ns;
	t->last = ns;
	return ns;
#else
	return 0;
#endif
}

/* The common case of coprof_enter, coprof_resume and their _again forms (call,
 * again): recording as the thread last saw it, no frame lost, room on the stack, and
 * the callee the caller's last one (its records at hand). 1 when done, 0 when the
 * full path must take the event (nothing was changed; a section opened and closed).
 * Every read of the context is inside the section, as the full path's. */
static inline __attribute__((always_inline)) int cp_push_fast(struct coprof_thread *t,
							      uintptr_t key, int call, int again)
{
	if (!cp_section_open_fast(t))
		return 0;
	struct coprof_ctx *c = t->cur;
	struct cp_rec *parent = c->depth ? c->frames[c->depth - 1].rec : NULL;
	uint64_t now = 0;
	if (__builtin_expect(!c->lost && c->depth < c->cap && parent && parent->last_rec &&
				 parent->last_rec->key == key,
			     1) &&
	    (now = cp_now_fast(t, again)) != 0)
		cp_push_rec(c, parent->last_rec, parent->last_edge, now, call);
	cp_section_close(t);
	return now != 0;
}

/* The common case of coprof_leave and coprof_leave_again: the function left is the
 * innermost frame's, under the same conditions. 1 when done, 0 otherwise. */
static inline __attribute__((always_inline)) int cp_leave_fast(struct coprof_thread *t,
							       uintptr_t key, int again)
{
	if (!cp_section_open_fast(t))
		return 0;
	struct coprof_ctx *c = t->cur;
	uint64_t now = 0;
	if (__builtin_expect(!c->lost && c->depth && c->frames[c->depth - 1].rec->key == key, 1) &&
	    (now = cp_now_fast(t, again)) != 0)
		cp_pop_timed(t, c, now - c->offset);
	cp_section_close(t);
	return now != 0;
}

/* The layout of everything above, as a number: the size of each struct it reads and the
 * offset of each field, and the constants it compiles in. The CPython adapter inlines
 * this header, so it is built against the engine's private structs; libcoprof.so
 * exports the number it was built with (coprof__inline_layout, coprof-private.h), and
 * the adapter refuses to load when its own differs (python/attach.c): an engine and an
 * adapter from two builds would otherwise read each other's fields at the wrong
 * offsets. A constant expression: computing it costs nothing. */
#define CP_LAYOUT_MIX(h, v) ((((h) ^ (uint64_t)(v)) * 0x100000001b3ull) & 0xffffffffffffull)
#define CP_LAYOUT_FIELDS(X)                                                                        \
	X(sizeof(struct coprof_thread)) X(offsetof(struct coprof_thread, seq))                    \
	X(offsetof(struct coprof_thread, seen)) X(offsetof(struct coprof_thread, p))              \
	X(offsetof(struct coprof_thread, cur)) X(offsetof(struct coprof_thread, fake))            \
	X(offsetof(struct coprof_thread, fake_arg)) X(offsetof(struct coprof_thread, fence))      \
	X(offsetof(struct coprof_thread, last)) X(offsetof(struct coprof_thread, clock))          \
	X(offsetof(struct coprof_thread, step_long))                                              \
	X(offsetof(struct coprof_thread, step_vbegin))                                            \
	X(offsetof(struct coprof_thread, step_depth))                                             \
	X(offsetof(struct coprof_thread, step_keys)) X(CP_STALL_FRAMES)                           \
	X(offsetof(struct coprof, state)) X(sizeof(struct cp_clock))                              \
	X(offsetof(struct cp_clock, impl)) X(offsetof(struct cp_clock, seq))                      \
	X(offsetof(struct cp_clock, seq_word)) X(offsetof(struct cp_clock, tsc0))                 \
	X(offsetof(struct cp_clock, ns0)) X(offsetof(struct cp_clock, span))                      \
	X(offsetof(struct cp_clock, mult)) X(offsetof(struct cp_clock, last))                     \
	X(offsetof(struct cp_clock, proc_word)) X(offsetof(struct cp_clock, orphan))              \
	X(sizeof(struct coprof_ctx)) X(offsetof(struct coprof_ctx, frames))                       \
	X(offsetof(struct coprof_ctx, depth)) X(offsetof(struct coprof_ctx, cap))                 \
	X(offsetof(struct coprof_ctx, lost)) X(offsetof(struct coprof_ctx, offset))               \
	X(sizeof(struct cp_frame)) X(offsetof(struct cp_frame, rec))                              \
	X(offsetof(struct cp_frame, edge)) X(offsetof(struct cp_frame, start))                    \
	X(offsetof(struct cp_frame, children)) X(sizeof(struct cp_rec))                           \
	X(offsetof(struct cp_rec, key)) X(offsetof(struct cp_rec, nc))                            \
	X(offsetof(struct cp_rec, cc)) X(offsetof(struct cp_rec, tt))                             \
	X(offsetof(struct cp_rec, ct)) X(offsetof(struct cp_rec, last_rec))                       \
	X(offsetof(struct cp_rec, last_edge)) X(offsetof(struct cp_rec, level))                   \
	X(sizeof(struct cp_erec)) X(offsetof(struct cp_erec, nc))                                 \
	X(offsetof(struct cp_erec, cc)) X(offsetof(struct cp_erec, tt))                           \
	X(offsetof(struct cp_erec, ct)) X(offsetof(struct cp_erec, level))                        \
	X(CP_PAUSED) X(CP_EDGE_VIRTUAL) X(CP_CLOCK_HAVE_TSC) X(CP_CLOCK_TSC_WALL)                 \
	X(CP_CLOCK_SHIFT)
#define CP_LAYOUT_STEP(v) h = CP_LAYOUT_MIX(h, v);

static inline uint64_t cp_inline_layout(void)
{
	uint64_t h = 0xcbf29ce484222325ull & 0xffffffffffffull;
	CP_LAYOUT_FIELDS(CP_LAYOUT_STEP)
	return h;
}

#endif
