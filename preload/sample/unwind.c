/* unwind.c: the sampler's stack walks, with libunwind loaded privately.
 *
 * libunwind.so also defines the _Unwind_* functions that C++ exceptions and thread
 * cancellation call. Linked into the shim (a DT_NEEDED of an LD_PRELOAD library), it
 * would come before libgcc_s in the global scope, so C++ code the program loads later
 * (a Python extension, a plugin) would throw through libunwind instead: 12 times slower
 * here, and under sampling a tick could land while that libunwind held its lock, walk
 * with the same libunwind, and wait for the lock forever. dlopen with RTLD_LOCAL keeps
 * those symbols out of the program's lookups; only the sampler calls unw_backtrace.
 *
 * A program that loads libunwind.so itself shares this copy (one soname, one object).
 * libunwind blocks every signal around its lock; the signal guard passes the masks its
 * code asks for (pl_sig_raw_masks_from), so no tick lands while the lock is held,
 * whoever it is working for. */
#define _GNU_SOURCE
#include <dlfcn.h>

#include "fd.h"
#include "sampler-ring.h"
#include "unwind.h"

/* libunwind's ABI has kept this soname since 1.0. */
#define UNWIND_SONAME "libunwind.so.8"

static int (*backtrace_fn)(void **pcs, int max);

int pl_unw_load(void)
{
	if (backtrace_fn)
		return 0;
	void *lib = dlopen(UNWIND_SONAME, RTLD_NOW | RTLD_LOCAL);
	void *fn = lib ? dlsym(lib, "unw_backtrace") : NULL;
	if (!fn) {
		pl_say("sample mode: %s; samples keep the interrupted function alone", dlerror());
		return -1;
	}
	struct pl_text_range r = {.at = (uintptr_t)fn};
	if (pl_text_range(&r))
		pl_sig_raw_masks_from(r.lo, r.hi);
	backtrace_fn = (int (*)(void **, int))fn;
	return 0;
}

int pl_unw_backtrace(struct pl_tls *tls, uintptr_t *pcs, int max)
{
	if (!backtrace_fn || !pl_fd_unw_pipe_safe())
		return -1;
	sig_atomic_t raw = tls ? tls->raw_masks : 0;
	if (tls)
		tls->raw_masks = 1; /* (its masks pass anyway; its pipe is noted by fd.c) */
	int n = backtrace_fn((void **)pcs, max);
	if (tls)
		tls->raw_masks = raw;
	return n;
}
