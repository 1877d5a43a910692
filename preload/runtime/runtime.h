/* runtime.h: the runtime adapters of the shim, each plugged in through struct
 * pl_runtime (service.h): the -finstrument-functions hooks (instrument.c), ucontext
 * coroutines (adapter-ucontext.c), Boost.Context fibers (adapter-fcontext.c), stacks no
 * adapter reports, found from the stack pointer (adapter-stack.c), and the loader of the
 * CPython adapter (python-loader.c). They run in the program's threads, on their call
 * and switch paths, and tell the engine and the sampler what runs. */
#ifndef PL_RUNTIME_H
#define PL_RUNTIME_H

#include <stdint.h>

#include "sampler/sampler.h"
#include "service/service.h"
#include "state/state.h"

/* What the lifecycle lends the runtimes: stopping the shim's own threads around a
 * Python os.fork and starting them again (control.c), so that Python never counts
 * them. Pauses nest. */
struct pl_lend {
	void (*threads_pause)(void);
	void (*threads_resume)(void);
	/* The program runs already: the Python API loaded the shim (lifecycle/api.c), so
	 * Python's main module started before the adapter's audit hook was there. */
	int late;
};

/* At start (the constructor, once the profiler exists): each runtime sets itself up
 * and registers, in a fixed order (start runs in it, stop in its reverse): the native
 * adapters, then Python's loader, then the sampler (adapters.c). */
PL_HIDDEN void pl_adapters_init(const struct pl_lend *lend);
/* Each adapter's part of it. pl_python_init returns at once in a process that is not
 * CPython (one dlsym). */
/* `attached`: coprof attach loaded the shim; in sample mode the ucontext adapter then
 * adopts the coroutines made before, at their first switch (adapter-ucontext.c). */
PL_HIDDEN void pl_uctx_init(int attached);
PL_HIDDEN void pl_fctx_init(int attached); /* as pl_uctx_init */
PL_HIDDEN void pl_stack_init(void);
PL_HIDDEN void pl_instrument_init(void);
PL_HIDDEN void pl_python_init(const struct pl_lend *lend);

/* adapter-ucontext.c: the engine hears which context the calling thread runs after a
 * start or a fork (pl_gen moved on). */
PL_HIDDEN void pl_uctx_resync(struct coprof_thread *t);

/* adapter-stack.c, the slow path of the __cyg hooks (guard held): the event at `sp`
 * (calling `key` when `enter`, else leaving it) runs on another stack. Finds or makes
 * its context and switches the engine there. */
PL_HIDDEN void pl_stack_moved(struct coprof_thread *th, uintptr_t sp, uintptr_t key, int enter);
/* Runs fn(arg) on a scratch stack of the calling thread's (512 KiB, made on first use),
 * for what reads DWARF from a coroutine's small stack. -1: none could be had (fn did
 * not run). Never in a signal handler. */
PL_HIDDEN int pl_on_scratch(void (*fn)(void *), void *arg);
/* Attached in sample mode, for adopting coroutines made before the attach: 1 when `sp`
 * lies on the calling thread's own stack, 0 when off it, -1 when that cannot be known
 * (not read yet, in a signal handler). */
PL_HIDDEN int pl_on_own_stack(uintptr_t sp);
/* The name of the coroutine whose stack the context `at` is on: its entry, its stack
 * walked to its end from there (on the scratch stack: the walk and DWARF go deeper than
 * a coroutine's own stack allows), the outermost function of the program's own; when
 * none, `at`'s address written into buf. Never in a signal handler. */
PL_HIDDEN const char *pl_stack_entry_at(const ucontext_t *at, char *buf, size_t len);
/* A detected stack's root frame returned: its context ends. Guard held. */
PL_HIDDEN void pl_stack_root_returned(struct coprof_thread *th, struct pl_stack *s);
/* The engine context of `s` on thread `th`, made on first use (never in a signal
 * handler: NULL then). */
PL_HIDDEN struct coprof_ctx *pl_stack_ctx(struct coprof_thread *th, struct pl_stack *s);
/* Ends the context on `s` (its engine context finished, the sampler told). */
PL_HIDDEN void pl_stack_finish(struct pl_stack *s);
/* Names the context on `s` after the function at `fn`. */
PL_HIDDEN void pl_stack_name(struct pl_stack *s, uintptr_t fn);

#endif
