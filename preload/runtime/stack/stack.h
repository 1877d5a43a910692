/* stack.h: contexts keyed by the stack they run on (adapter-stack.c). The fcontext
 * adapter makes them for make_fcontext stacks; the __cyg hooks find the others from the
 * stack pointer: an event whose stack pointer leaves the running context's stack is a
 * switch no adapter reported. Shared by instrument.c and the ucontext and fcontext
 * adapters; runs in the program's threads, on their call and switch paths. */
#ifndef PL_STACK_H
#define PL_STACK_H

#include <stdint.h>

#include "internal.h"

#define PL_STACK_FNS 32 /* instrumented frames kept per detected stack (sample mode) */

/* One stack a context runs on, and the context now running on it. A record outlives its
 * context: a stack the runtime reuses gets the next context on the same record. */
struct pl_stack {
	uintptr_t lo, hi;    /* bytes [lo, hi): the stack's bounds, known or estimated */
	const char *runtime; /* "fcontext", or "stack" for one found from the stack pointer */
	uint64_t id;	     /* the task id of the context now on it */
	int finished;	     /* that context has ended; the next one on it starts a new one */
	int detected;	     /* found from the stack pointer: its root frame returning ends it */
	uintptr_t root_sp;   /* detected: the hooks' frame address at its root's call; a
			      * return seen there ends the context (UINTPTR_MAX: never) */
	void *fn;	     /* fcontext: the entry function make_fcontext was given */
	int naming;	     /* fcontext: named after its entry until a function of the program's
			      * own runs on it (the slow path sees its first calls) */
	int tries;	     /* calls looked at for a name */
	/* fcontext, no hooks (sample mode): the first function of the program's own the
	 * folding thread saw on its samples, taken as its name at the next switch */
	const char *fold_name;
	const char *name;
	char namebuf[24];
	/* sample mode, detected stacks: the instrumented functions entered on it and not
	 * left, outermost first (nfns counts past PL_STACK_FNS): where its context waits
	 * once the thread has left the stack (the sampler's wait stack under wall) */
	uint32_t nfns;
	uintptr_t fns[PL_STACK_FNS];
	/* the engine context, valid for one profiler (a forked child has its own) and one
	 * thread (a fiber that moves to another thread gets another) */
	struct coprof_ctx *ctx;
	struct coprof *ctx_prof;
	struct coprof_thread *ctx_thread;
	struct pl_stack *next_all;  /* every record ever made, for leak checkers */
	struct pl_stack *next_seen; /* detected stacks: the thread's list */
};

/* The calling thread's running stack context beyond struct pl_native_tls: the bounds
 * of the stack it runs on (an event outside them takes the slow path) and the record,
 * NULL on the thread's own stack or a ucontext coroutine. */
struct pl_stack_tls {
	/* (the running stack's bounds and root: struct pl_tls's stack_* fields) */
	struct pl_stack *cur;
	uintptr_t own_lo, own_hi; /* the thread's own stack; own_hi 0: not read yet */
	struct pl_stack *seen;	  /* detected stacks met on this thread, newest first */
	struct pl_stack *fnext;	  /* fcontext: the record the last jump went to */
	struct pl_stack *fprev;	  /* fcontext: the context the last jump left */
	void *ontop_fn;		  /* fcontext: the program's function ontop_fcontext runs */
	int ontop_done;		  /* the resumed jump's handle was already recorded */
};
extern PL_HIDDEN __thread struct pl_stack_tls pl_stls PL_TLS;

#ifndef PL_NO_STACK_CHECK
/* The hot-path test of the __cyg hooks: nonzero when `sp` is off the running stack. */
static inline int pl_stack_off(uintptr_t sp)
{
	return sp - pl_tls_data.stack_lo >= pl_tls_data.stack_span;
}

/* The leave hook's test: nonzero when the frame at `sp` is a detected stack's root. */
static inline int pl_stack_root_left(uintptr_t sp)
{
	return sp >= pl_tls_data.stack_root_sp;
}
#else
/* -DPL_NO_STACK_CHECK: both compares compiled out, the baseline that
 * bench/native/stack-check.py times the hooks against (issue 13's 3 ns budget). Switches
 * no adapter reports are not followed then: never a build to profile with. */
static inline int pl_stack_off(uintptr_t sp)
{
	(void)sp;
	return 0;
}

static inline int pl_stack_root_left(uintptr_t sp)
{
	(void)sp;
	return 0;
}
#endif

/* The slow path: the event at `sp` (calling `key` when `enter`, else leaving it) runs
 * on another stack. Finds or makes its context and switches the engine there. Guard
 * held. */
PL_HIDDEN void pl_stack_moved(struct coprof_thread *th, uintptr_t sp, uintptr_t key, int enter);
/* A detected stack's root frame returned: its context ends. Guard held. */
PL_HIDDEN void pl_stack_root_returned(struct coprof_thread *th, struct pl_stack *s);

/* The engine context of `s` on thread `th`, made on first use (never in a signal
 * handler: NULL then). */
PL_HIDDEN struct coprof_ctx *pl_stack_ctx(struct coprof_thread *th, struct pl_stack *s);
/* Whether `s` has a context in this process's engine on thread `th`. */
PL_HIDDEN int pl_stack_owns_ctx(const struct pl_stack *s, const struct coprof_thread *th);
/* Ends the context on `s` (its engine context finished, the sampler told). */
PL_HIDDEN void pl_stack_finish(struct pl_stack *s);
/* A new record, or NULL (out of memory). Never in a signal handler. */
PL_HIDDEN struct pl_stack *pl_stack_new(void);
/* Names the context on `s` after the function at `fn`. */
PL_HIDDEN void pl_stack_name(struct pl_stack *s, uintptr_t fn);
/* The calling thread ends: frees what the slow path kept for it (threads.c; not a
 * struct pl_runtime, whose count tells the exit message a runtime was there). */
PL_HIDDEN void pl_stack_thread_exit(void);
/* The fold's name for `s` becomes its name (the context's too); on the thread that
 * runs `s`, outside signal handlers. */
PL_HIDDEN void pl_stack_take_fold_name(struct pl_stack *s);
/* Whether a function comes from the program's sources rather than a system header or
 * library (a template of Boost's instantiated in the program, libst). */
PL_HIDDEN int pl_stack_own_function(const struct coprof_func_info *info);
/* A fresh task id, shared by every runtime of the shim's stack contexts. */
PL_HIDDEN uint64_t pl_stack_next_id(void);

/* Sample mode: the hook event (entering `fn`, else leaving it) on detected stack `s`. */
static inline void pl_stack_track(struct pl_stack *s, uintptr_t fn, int enter)
{
	if (enter) {
		if (s->nfns < PL_STACK_FNS)
			s->fns[s->nfns] = fn;
		s->nfns++;
	} else if (s->nfns) {
		s->nfns--;
	}
}

/* The running context is now `s` (NULL: none of ours), on the stack [lo, hi); lo == hi:
 * the bounds are unknown and the next event finds them. For the adapters' switches. */
static inline void pl_stack_set(struct pl_stack *s, uintptr_t lo, uintptr_t hi)
{
	pl_stls.cur = s;
	pl_tls_data.stack_root_sp = s && s->detected ? s->root_sp : UINTPTR_MAX;
	pl_tls_data.stack_lo = lo;
	pl_tls_data.stack_span =
	    s && s->naming ? 0 : hi - lo; /* 0: each event takes the slow path */
}

#endif
