/* adapter-fcontext.c: Boost.Context's switch points (make_fcontext, jump_fcontext and
 * ontop_fcontext of libboost_context.so, under boost::context::fiber, Boost.Fiber and
 * Boost.Coroutine2). Each stack made with make_fcontext is a context, runtime
 * "fcontext", named after its entry function, with the exact bounds of its stack.
 *
 * An fcontext_t is the stack pointer its context suspended at, so a handle names one
 * suspension only: a lock-free table (service.h's address map) maps every handle the
 * program is given (made, or handed over by a jump) to the stack record behind it; a
 * handle it does not know is the thread's own context. Runs in the program's threads,
 * on their switch path (maybe in a signal handler: no allocation there); records are
 * made in make_fcontext.
 *
 * Attached to a running program in sample mode (coprof attach), a fiber made before the
 * attach has no record. It gets one (adopted) as it first jumps away: running off the
 * thread's own stack with no record. Its stack, walked once, names it after its entry,
 * and the handle it leaves maps to it, so it is a task of its own, with its waits, from
 * its next run. (Its bounds stay unknown: sample mode needs none.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "runtime.h"

typedef void *pl_fctx;
struct pl_transfer {
	pl_fctx fctx;
	void *data;
};

static pl_fctx (*real_make)(void *, size_t, void (*)(struct pl_transfer));
static struct pl_transfer (*real_jump)(pl_fctx, void *);
static struct pl_transfer (*real_ontop)(pl_fctx, void *,
					struct pl_transfer (*)(struct pl_transfer));

/* a handle, or a stack's top | 1 -> its stack record (NULL: the thread's own context);
 * made by the first make_fcontext */
static struct pl_addrmap map = {
    .mask = (1u << 16) - 1,
    .full = "too many fcontext handles; further fibers count as part of their thread",
};

PL_EXPORT pl_fctx make_fcontext(void *sp, size_t size, void (*fn)(struct pl_transfer));
PL_EXPORT struct pl_transfer jump_fcontext(pl_fctx to, void *vp);
PL_EXPORT struct pl_transfer ontop_fcontext(pl_fctx to, void *vp,
					    struct pl_transfer (*fn)(struct pl_transfer));

/* Boost.Context's function `name`: next after the shim when it is preloaded; when
 * `coprof attach` loaded it (bind.c), libboost_context is no dependency of the shim's,
 * so it is the program's definition, which is not ours (`own`). */
static void *real_fn(const char *name, void *own)
{
	void *p = dlsym(RTLD_NEXT, name);
	if (!p && (p = dlsym(RTLD_DEFAULT, name)) == own)
		p = NULL;
	return p;
}

static void resolve(void)
{
	if (!real_make)
		real_make = (__typeof__(real_make))real_fn("make_fcontext", (void *)make_fcontext);
	if (!real_jump)
		real_jump = (__typeof__(real_jump))real_fn("jump_fcontext", (void *)jump_fcontext);
	if (!real_ontop)
		real_ontop =
		    (__typeof__(real_ontop))real_fn("ontop_fcontext", (void *)ontop_fcontext);
}

static const struct pl_runtime fcontext_runtime = {.name = "fcontext", .native = 1};
static int adopting; /* attached in sample mode: fibers met unknown are adopted */

/* The table is made by the first make_fcontext: most programs have none. */
void pl_fctx_init(int attached)
{
	adopting = attached && pl_cfg.mode == COPROF_MODE_SAMPLE;
	pl_runtime_add(&fcontext_runtime);
}

/* async-signal-safe */
static struct pl_stack *map_get(uintptr_t k)
{
	return pl_addrmap_get(&map, k);
}

/* async-signal-safe once the table exists (make_fcontext makes it). Returns -1 when
 * the table is full. */
static int map_put(uintptr_t k, struct pl_stack *s)
{
	return pl_addrmap_put(&map, k, s);
}

/* The calling thread leaves `from` (an adopted fiber's record, or NULL: the engine's
 * running context) for `to` (NULL: its own context, or one of no record): the engine
 * and the sampler hear it before the jump. Guard held, in_switch set. */
static void announce(struct pl_stack *from, struct pl_stack *to)
{
	if (!__atomic_load_n(&pl_running, __ATOMIC_RELAXED))
		return;
	struct coprof_thread *th = pl_tls_data.thread;
	if (!th && !pl_sig_maybe_in_handler())
		th = pl_thread();
	if (!th)
		return;
	if (pl_ntls.gen != __atomic_load_n(&pl_gen, __ATOMIC_RELAXED))
		pl_uctx_resync(th);
	struct coprof_ctx *cf = from ? pl_stack_ctx(th, from) : coprof_ctx_current(th);
	struct coprof_ctx *ct = pl_stack_ctx(th, to);
	pl_sampler_switch(cf, ct);
	coprof_ctx_switch(th, ct);
}

/* The fiber the calling thread runs, made before the attach and met for the first time
 * as it jumps away (off the thread's own stack, no record): a record of runtime
 * fcontext named after its entry, or NULL (not off the thread's own stack, no memory,
 * a signal handler). */
static struct pl_stack *adopt_running(void)
{
	/* the stack first: a jump from the thread's own costs a compare, where the
	 * handler test is a system call once the program has handlers */
	if (pl_on_own_stack((uintptr_t)__builtin_frame_address(0)) != 0 ||
	    pl_sig_maybe_in_handler() || pl_addrmap_make(&map) != 0)
		return NULL;
	ucontext_t here;
	if (getcontext(&here) != 0)
		return NULL;
	struct pl_stack *s = pl_stack_new();
	if (!s)
		return NULL;
	s->lo = s->hi = 0;
	s->runtime = "fcontext";
	s->fn = NULL;
	s->id = pl_stack_next_id();
	s->ctx = NULL;
	s->finished = 0;
	s->naming = 0;
	s->tries = 0;
	__atomic_store_n(&s->fold_name, NULL, __ATOMIC_RELEASE);
	s->name = pl_stack_entry_at(&here, s->namebuf, sizeof(s->namebuf));
	return s;
}

/* Before a jump or an ontop to handle `to`: remembers where the thread comes from (the
 * resumed side maps the handle it is given to it) and where it goes, then tells the
 * engine unless profiling is off or a hook of ours is under way. `frame` is the frame
 * address of the wrapper that jumps: the switch is under way until the stack pointer
 * leaves it (the tick handler takes a stack pointer above the frame that marked the
 * switch for one that has returned; this function's own frame returns before the jump,
 * and a tick in the wrapper then walked the stack it leaves as the context it goes to:
 * a fiber going back to main made a task of runtime `stack` of its own stack). */
static struct pl_tls *leave_for(pl_fctx to, uintptr_t frame)
{
	struct pl_stack *s = map_get((uintptr_t)to);
	pl_stls.fnext = s; /* a context's first jump goes to entry(), which needs it */
	if (s && s->finished)
		s = NULL;
	pl_stls.fprev = pl_stls.cur;
	pl_stls.ontop_done = 0;
	struct pl_tls *t = &pl_tls_data;
	if (!pl_active || t->guard)
		return NULL;
	t->guard = 1;
	struct pl_stack *adopted = NULL;
	if (adopting && !pl_stls.cur && !pl_ntls.cur)
		pl_stls.fprev = adopted = adopt_running();
	pl_ntls.cur = NULL; /* no ucontext coroutine runs there */
	if (s && s->naming && s->fold_name)
		pl_stack_take_fold_name(s);
	if (s)
		pl_stack_set(s, s->lo, s->hi);
	else
		pl_stack_set(NULL, 0, 0); /* the next event finds the stack it is on */
	t->switch_sp = frame;
	t->in_switch = 1;
	announce(adopted, s);
	t->guard = 0;
	return t;
}

/* Back from a jump: the context that jumped here left handle `from`. */
static void resumed(pl_fctx from)
{
	if (pl_stls.ontop_done)
		pl_stls.ontop_done = 0; /* the function run on top of us recorded it */
	else if (from)
		(void)map_put((uintptr_t)from, pl_stls.fprev);
	pl_tls_data.in_switch = 0;
}

/* How far above entry()'s frame its stack's top lies at most: Boost's context record
 * and alignment, and the frame that calls entry(), take some hundred bytes. */
#define ENTRY_DEPTH 1024

/* The record of the context made on the stack whose frame is at `frame`: the nearest
 * stack top above it that make_fcontext keyed, or NULL. */
static struct pl_stack *made_at(uintptr_t frame)
{
	for (uintptr_t top = frame; top < frame + ENTRY_DEPTH; top++) {
		struct pl_stack *s = map_get(top | 1);
		if (s && s->hi == top && s->lo <= frame)
			return s;
	}
	return NULL;
}

/* Every context made by make_fcontext starts here, on its own stack. The shim's jump
 * that enters it told it which record it runs (pl_stls.fnext). A jump of the program's
 * own tells nothing, and fnext is another context's or NULL: one of an object whose
 * entries are not bound yet (coprof attach binds entry after entry, and a dlopened
 * object waits for the control thread), or a handle of Boost's taken past the PLT.
 * Then the record is the one keyed by the top of the stack entry() runs on: fnext
 * would run another context's function here, or none. */
static PL_START_CODE void entry(struct pl_transfer t)
{
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	struct pl_stack *s = pl_stls.fnext;
	if (!s || frame < s->lo || frame >= s->hi || s->hi - frame > ENTRY_DEPTH) {
		struct pl_stack *made = made_at(frame);
		if (made)
			s = made; /* else, as before: a layout of Boost's with its top further up */
	}
	void (*fn)(struct pl_transfer) = (void (*)(struct pl_transfer))s->fn;
	pl_stls.ontop_done = 0;
	resumed(t.fctx);
	fn(t);
	/* Returning ends the context; Boost's code under us then ends the process. */
	struct pl_tls *tls = &pl_tls_data;
	int guard = tls->guard;
	tls->guard = 1;
	pl_stack_finish(s);
	tls->guard = guard;
}

/* Runs the program's function on top of the context jumped to. A context that hands
 * over a null handle cannot be resumed (Boost returns one when a fiber ends and its
 * stack is freed): the context that jumped here is finished. */
static struct pl_transfer on_top(struct pl_transfer t)
{
	struct pl_transfer (*fn)(struct pl_transfer) =
	    (struct pl_transfer(*)(struct pl_transfer))pl_stls.ontop_fn;
	struct pl_stack *from = pl_stls.fprev;
	pl_stls.ontop_done = 0;
	resumed(t.fctx);
	struct pl_transfer r = fn(t);
	struct pl_tls *tls = &pl_tls_data;
	if (!r.fctx && from && !from->finished && pl_active && !tls->guard) {
		tls->guard = 1;
		pl_stack_finish(from);
		tls->guard = 0;
	}
	pl_stls.ontop_done = 1;
	return r;
}

PL_EXPORT pl_fctx make_fcontext(void *sp, size_t size, void (*fn)(struct pl_transfer))
{
	resolve();
	struct pl_tls *t = &pl_tls_data;
	if (!pl_active || t->guard || pl_sig_maybe_in_handler() || pl_addrmap_make(&map) != 0)
		return real_make(sp, size, fn);
	t->guard = 1;
	uintptr_t top = (uintptr_t)sp;
	struct pl_stack *s = map_get(top | 1);
	int keyed = 1; /* the record is found by its stack's top (entry) */
	if (s && s->hi == top) {
		/* the stack is made again: whatever ran on it is over */
		if (!s->finished)
			pl_stack_finish(s);
	} else {
		s = pl_stack_new();
		if (!s) {
			t->guard = 0;
			return real_make(sp, size, fn);
		}
		keyed = map_put(top | 1, s) == 0;
	}
	s->lo = top - size;
	s->hi = top;
	s->runtime = "fcontext";
	s->fn = (void *)fn;
	s->id = pl_stack_next_id();
	s->ctx = NULL;
	s->finished = 0;
	pl_stack_name(s, (uintptr_t)fn);
	s->naming = 1;
	s->tries = 0;
	__atomic_store_n(&s->fold_name, NULL, __ATOMIC_RELEASE);
	pl_fctx h = real_make(sp, size, entry);
	if (!keyed || map_put((uintptr_t)h, s) != 0) {
		/* entry() could not find the program's function: make it plain again */
		s->finished = 1;
		h = real_make(sp, size, fn);
	}
	t->guard = 0;
	return h;
}

PL_EXPORT struct pl_transfer jump_fcontext(pl_fctx to, void *vp)
{
	resolve();
	leave_for(to, (uintptr_t)__builtin_frame_address(0));
	struct pl_transfer r = real_jump(to, vp);
	resumed(r.fctx);
	return r;
}

PL_EXPORT struct pl_transfer ontop_fcontext(pl_fctx to, void *vp,
					    struct pl_transfer (*fn)(struct pl_transfer))
{
	resolve();
	leave_for(to, (uintptr_t)__builtin_frame_address(0));
	pl_stls.ontop_fn = (void *)fn;
	struct pl_transfer r = real_ontop(to, vp, on_top);
	resumed(r.fctx);
	return r;
}
