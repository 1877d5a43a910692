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

/* The frame-by-frame walk, for pl_unw_walk. libunwind's x86-64 ABI as its header
 * declares it (the header is not needed to build): a cursor is 127 words, a context is
 * the signal's ucontext_t, UNW_REG_IP and UNW_REG_SP are registers 16 and 7, and
 * UNW_INIT_SIGNAL_FRAME (libunwind 1.3) says the context is a signal's. */
#define UNW_CURSOR_WORDS 127
#define UNW_REG_IP_X86_64 16
#define UNW_REG_SP_X86_64 7
#define UNW_INIT_SIGNAL_FRAME_FLAG 1
static int (*init2_fn)(void *cursor, void *uc, int flag);
static int (*step_fn)(void *cursor);
static int (*get_reg_fn)(void *cursor, int reg, uintptr_t *val);

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
#if defined(__x86_64__)
	init2_fn = (int (*)(void *, void *, int))dlsym(lib, "_ULx86_64_init_local2");
	step_fn = (int (*)(void *))dlsym(lib, "_ULx86_64_step");
	get_reg_fn = (int (*)(void *, int, uintptr_t *))dlsym(lib, "_ULx86_64_get_reg");
#endif
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

int pl_unw_walk(struct pl_tls *tls, const ucontext_t *uc, uintptr_t *pcs, int max, uintptr_t *base)
{
	*base = 0;
	if (!init2_fn || !step_fn || !get_reg_fn || !pl_fd_unw_pipe_safe())
		return -1;
	sig_atomic_t raw = tls ? tls->raw_masks : 0;
	if (tls)
		tls->raw_masks = 1;
	uint64_t cursor[UNW_CURSOR_WORDS];
	int n = 0, rc = -1;
	uintptr_t ip, sp, last = 0;
	if (init2_fn(cursor, (void *)uc, UNW_INIT_SIGNAL_FRAME_FLAG) == 0) {
		do {
			if (get_reg_fn(cursor, UNW_REG_IP_X86_64, &ip) < 0 ||
			    get_reg_fn(cursor, UNW_REG_SP_X86_64, &sp) < 0) {
				rc = -1;
				break;
			}
			if (!ip && n) {
				rc = 0; /* a return address of 0: the stack's start */
				break;
			}
			pcs[n++] = ip;
			last = sp;
			rc = n < max ? step_fn(cursor) : -1;
		} while (rc > 0);
	}
	if (rc == 0)
		*base = last;
	if (tls)
		tls->raw_masks = raw;
	return n ? n : -1;
}
