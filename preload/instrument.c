/* instrument.c: the -finstrument-functions hooks. glibc exports no-op versions of
 * __cyg_profile_func_enter/exit; being preloaded, ours win. They run in every thread
 * of the program, on every call: no allocation, no lock, no system call. The key of a
 * function is its address; symbols.c names it at dump time. */
#include "internal.h"

/* Common to enter and leave: records only while tracing, never inside another hook.
 * Inlined into both hooks, so `event` is a direct call. */
static inline __attribute__((always_inline)) void
hook(void *fn, void (*event)(struct coprof_thread *, uintptr_t))
{
	if (pl_unlikely(!pl_seen_cyg))
		__atomic_store_n(&pl_seen_cyg, 1, __ATOMIC_RELAXED);
	if (!__atomic_load_n(&pl_tracing, __ATOMIC_RELAXED))
		return;
	struct pl_tls *t = &pl_tls_data;
	if (t->guard)
		return;
	t->guard = 1;
	struct coprof_thread *th = t->thread ? t->thread : pl_thread();
	if (pl_likely(th != NULL)) {
		/* profiling restarted (or the process forked) since this thread last told the
		 * engine which coroutine it runs */
		if (pl_unlikely(pl_ntls.gen != __atomic_load_n(&pl_gen, __ATOMIC_RELAXED)))
			pl_uctx_resync(th);
		event(th, (uintptr_t)fn);
	}
	t->guard = 0;
}

PL_EXPORT void __cyg_profile_func_enter(void *fn, void *site);
PL_EXPORT void __cyg_profile_func_exit(void *fn, void *site);

PL_EXPORT void __cyg_profile_func_enter(void *fn, void *site)
{
	hook(fn, coprof_enter);
}

PL_EXPORT void __cyg_profile_func_exit(void *fn, void *site)
{
	hook(fn, coprof_leave);
}
