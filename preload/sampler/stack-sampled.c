/* stack-sampled.c: the sampler's side of the stack records (service.h). In the tick
 * handler, which context a tick's stack pointer is on (pl_stack_at_tick). Stacks found
 * in samples (sample mode, a program without -finstrument-functions hooks): the tick
 * handler walks a stack off the thread's own that no adapter reported and notes its
 * outermost frame's stack pointer (sampler-signal.c); here, on the folding thread
 * (which may allocate and lock), that pointer keys the stack, and the stack's first
 * sample makes its context, named after the coroutine's entry function, runtime
 * "stack". Per sampled thread, under the sampler's lock. Fibers the hooks have not named
 * (fcontext, no hooks) get a name from their samples too. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "sampler.h"

/* How far below the lowest stack pointer sampled on a stack a sample whose walk did not
 * reach the stack's end may be and still be charged to it. */
#define PL_FOLD_BELOW ((uintptr_t)64 << 10)

/* One stack met in a thread's samples. */
struct pl_fstack {
	struct pl_fstack *next;
	uintptr_t base;		/* its outermost frame's stack pointer: the stack's identity */
	uintptr_t lo;		/* the lowest stack pointer sampled on it */
	struct coprof_ctx *ctx; /* NULL: the runtime's own stack, charged to the thread */
	struct coprof *prof;	/* the profiler ctx belongs to (a forked child has another) */
	const char *name;	/* the entry function (pl_symbols' string), NULL for none */
	int bottom;		/* named after what the stack's bottom frame called */
};

/* Whether `pc` (a return address unless `leaf`) lies in the program's own code, and its
 * function's name in *name. The shim's code never does, wherever it was built: its
 * fcontext wrappers run on a fiber before its function and after each switch back
 * (entry, jump_fcontext, ontop_fcontext), and a tick there, with no frame of the
 * program's under them yet, named the fiber after them (the first jump's page faults in
 * the handle table draw ticks there under load). */
static int own_pc(uintptr_t pc, int leaf, const char **name)
{
	struct coprof_func_info info;
	if (pl_pc_is_ours(pc))
		return 0;
	if (!pl_syms || pl_symbols_lookup(pl_syms, pc - (leaf ? 0 : 1), &info) != 0 || !info.name)
		return 0;
	*name = info.name;
	return pl_stack_own_function(&info);
}

/* The coroutine's entry on a stack walked to its end (pcs innermost first): the
 * outermost function of the program's own, past the runtime's frames under it (State
 * Threads' thread start, Boost's templates). When that is the stack's bottom frame
 * itself, which has nothing to return to, it is the runtime's start routine (a
 * hand-written switch's trampoline): the entry is the function it called, and
 * *bottom is set. NULL: no frame of the program's own is on the stack. */
const char *pl_stack_entry(const uintptr_t *pcs, uint32_t depth, int *bottom)
{
	const char *name = NULL;
	uint32_t i = depth;
	while (i > 0 && !own_pc(pcs[i - 1], i == 1, &name))
		i--;
	*bottom = 0;
	if (!i)
		return NULL;
	if (i == depth && depth > 1) {
		const char *inner = NULL;
		own_pc(pcs[depth - 2], depth == 2, &inner);
		*bottom = 1;
		return inner;
	}
	return name;
}

/* A new context on `fs` for the entry `name`, or none when nothing of the program's
 * runs there. */
static void start_ctx(struct pl_sthread *st, struct pl_fstack *fs, const char *name, int bottom)
{
	fs->ctx = NULL;
	fs->prof = pl_prof;
	fs->name = name;
	fs->bottom = bottom;
	if (name && st->thread &&
	    coprof_ctx_create_sampled(st->thread, pl_stack_next_id(), name, "stack", &fs->ctx) != 0)
		fs->ctx = NULL;
}

struct coprof_ctx *pl_stack_fold(struct pl_sthread *st, const struct pl_rec *rec, uint32_t depth)
{
	uintptr_t key = rec->base ? rec->base : rec->sp;
	if (key - st->own_lo < st->own_hi - st->own_lo)
		return NULL; /* a signal stack's frames over the thread's own */
	struct pl_fstack *fs = NULL;
	if (rec->base) {
		for (fs = st->fstacks; fs && fs->base != rec->base; fs = fs->next)
			;
	} else {
		/* The walk stopped short: the stack whose outermost frame is the nearest
		 * above, when the sample lies near what was sampled on it. */
		for (struct pl_fstack *f = st->fstacks; f; f = f->next)
			if (f->base >= rec->sp &&
			    (rec->sp >= f->lo || f->lo - rec->sp <= PL_FOLD_BELOW) &&
			    (!fs || f->base < fs->base))
				fs = f;
		if (!fs)
			return NULL;
	}
	if (!fs) {
		if (!(fs = calloc(1, sizeof(*fs))))
			return NULL;
		int bottom;
		const char *name = pl_stack_entry(rec->pcs, depth, &bottom);
		fs->base = rec->base;
		fs->lo = rec->sp;
		fs->next = st->fstacks;
		st->fstacks = fs;
		start_ctx(st, fs, name, bottom);
		return fs->ctx;
	}
	if (rec->sp < fs->lo)
		fs->lo = rec->sp;
	if (fs->prof != pl_prof) {
		start_ctx(st, fs, fs->name, fs->bottom);
	} else if (rec->base && !fs->bottom) {
		/* A runtime that reuses the stack for a coroutine of another entry: the one
		 * before has ended. (Named after its bottom frame's callee, a stack keeps its
		 * task: that callee changes as the coroutine runs.) */
		int bottom;
		const char *name = pl_stack_entry(rec->pcs, depth, &bottom);
		if (name != fs->name && (!name || !fs->name || strcmp(name, fs->name) != 0)) {
			coprof_ctx_finish_sampled(fs->ctx);
			start_ctx(st, fs, name, bottom);
		}
	}
	return fs->ctx;
}

void pl_stack_fold_name(const struct pl_rec *rec, uint32_t depth)
{
	struct pl_stack *s = rec->fiber;
	if (!__atomic_load_n(&s->naming, __ATOMIC_RELAXED) || s->ctx != rec->ctx ||
	    __atomic_load_n(&s->fold_name, __ATOMIC_RELAXED))
		return;
	const char *name = NULL;
	for (uint32_t i = depth; i > 0 && !name; i--)
		if (!own_pc(rec->pcs[i - 1], i == 1, &name))
			name = NULL;
	if (name)
		__atomic_store_n(&s->fold_name, name, __ATOMIC_RELEASE);
}

/* The engine runs the fiber's context from before the jump (the adapter announces it
 * first) to after the jump back: a tick on the maker's stack meanwhile (past the switch
 * code, which the tick handler then no longer defers) would name the fiber after the
 * maker's outermost frames (`_start`, whose file is the executable's when it has no
 * DWARF). Only a tick on the fiber's own stack names it. */
struct pl_stack *pl_stack_unnamed(const struct coprof_ctx *ctx, uintptr_t sp)
{
	struct pl_stack *s = pl_stls.cur;
	return s && s->naming && s->ctx == ctx && sp - s->lo < s->hi - s->lo ? s : NULL;
}

void pl_stack_take_fold_name(struct pl_stack *s)
{
	const char *name = __atomic_load_n(&s->fold_name, __ATOMIC_ACQUIRE);
	if (!name || pl_sig_maybe_in_handler())
		return;
	s->name = name;
	s->naming = 0;
	if (pl_stack_owns_ctx(s, pl_tls_data.thread))
		coprof_ctx_set_name(s->ctx, name);
}

void pl_stack_fold_free(struct pl_sthread *st)
{
	while (st->fstacks) {
		struct pl_fstack *fs = st->fstacks;
		st->fstacks = fs->next;
		free(fs);
	}
}

/* async-signal-safe: reads the thread's own records, which its hooks (which the tick
 * may have interrupted) only prepend to. */
struct coprof_ctx *pl_stack_at_tick(uintptr_t sp, struct coprof_ctx *cur)
{
	if (sp - pl_tls_data.stack_lo < pl_tls_data.stack_span || !pl_stls.own_hi)
		return cur; /* on the running context's stack, or nothing is known */
	struct coprof_thread *th = pl_tls_data.thread;
	if (sp - pl_stls.own_lo < pl_stls.own_hi - pl_stls.own_lo)
		return pl_stls.cur && pl_stls.cur->detected ? NULL : cur;
	for (struct pl_stack *s = pl_stls.seen; s; s = s->next_seen)
		if (sp - s->lo < s->hi - s->lo)
			return !s->finished && pl_stack_owns_ctx(s, th) ? s->ctx : cur;
	return cur;
}

/* async-signal-safe: a read of the thread's own record. */
int pl_stack_hooked(void)
{
	return pl_stls.own_hi != 0;
}
