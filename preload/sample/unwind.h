/* unwind.h: libunwind, loaded for the sampler's own walks and kept out of the program's
 * way (unwind.c). */
#ifndef COPROF_PRELOAD_SAMPLE_UNWIND_H
#define COPROF_PRELOAD_SAMPLE_UNWIND_H

#include <stdint.h>
#include <ucontext.h>

#include "shim.h"

/* Loads libunwind into the process without adding its symbols to the global scope, and
 * has the signal guard pass the masks libunwind's own code asks for. 0, or -1 (said on
 * stderr once: samples then keep the interrupted pc alone). Not in a signal handler. */
PL_HIDDEN int pl_unw_load(void);

/* async-signal-safe: the calling thread's return addresses, innermost first (this
 * function's caller is pcs[0]), at most `max`. -1 when no walk may run: libunwind is not
 * loaded, the numbers of its private pipe name the program's files now (fd.c), or, in a
 * signal handler whose context is `uc` (NULL elsewhere), the interrupted code may be
 * inside libunwind where the signal guard cannot see its masks (unwind.c). */
PL_HIDDEN int pl_unw_backtrace(struct pl_tls *tls, const ucontext_t *uc, uintptr_t *pcs, int max);

/* async-signal-safe: the interrupted stack of a signal whose context is `uc`, innermost
 * first (its pc is pcs[0]), at most `max`, walked frame by frame. *base gets the stack
 * pointer of the outermost frame when the walk reached the end of the stack (a return
 * address of 0 or no caller, past the interrupted frame), else 0. -1 when no walk may run (as for
 * pl_unw_backtrace). */
PL_HIDDEN int pl_unw_walk(struct pl_tls *tls, const ucontext_t *uc, uintptr_t *pcs, int max,
			  uintptr_t *base);

#endif
