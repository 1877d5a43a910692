/* instrument.c: the -finstrument-functions hooks. glibc exports no-op versions of
 * __cyg_profile_func_enter/exit; being preloaded, ours win. They run in every thread
 * of the program, on every call: no allocation, no lock, no system call on the common
 * path. The key of a function is its address; symbols.c names it at dump time. A stack
 * pointer off the running context's stack is a switch no adapter saw: the slow path in
 * adapter-stack.c finds where the thread went before the event is recorded. */
#include "runtime.h"

/* Common to enter and leave: records only while tracing, never inside another hook
 * nor in a vfork child (vfork.c sets the guard there).
 * Inlined into both hooks, so `event` is a direct call. In sample mode it records
 * nothing but still follows the switches the stack pointer shows, so ticks are
 * charged to the context that runs. */
static inline __attribute__((always_inline)) void
hook(void *fn, void (*event)(struct coprof_thread *, uintptr_t), int enter)
{
	if (pl_unlikely(!pl_seen_cyg) && !pl_tls_data.guard) /* (a vfork child's is not) */
		__atomic_store_n(&pl_seen_cyg, 1, __ATOMIC_RELAXED);
	int record = __atomic_load_n(&pl_tracing, __ATOMIC_RELAXED);
	if (!record) {
		if (pl_likely(!__atomic_load_n(&pl_running, __ATOMIC_RELAXED)))
			return;
		/* sample mode: only a switch, or a call on a stack of ours, needs more */
		if (!pl_stack_off((uintptr_t)__builtin_frame_address(0)) && !pl_stls.cur)
			return;
	}
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
		uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
		if (pl_unlikely(pl_stack_off(sp)))
			pl_stack_moved(th, sp, (uintptr_t)fn, enter);
		if (pl_likely(record))
			event(th, (uintptr_t)fn);
		else if (pl_stls.cur && pl_stls.cur->detected)
			pl_stack_track(pl_stls.cur, (uintptr_t)fn, enter);
		/* the hook of a detected stack's root frame runs highest on it */
		if (!enter && pl_unlikely(pl_stack_root_left(sp)))
			pl_stack_root_returned(th, pl_stls.cur);
	}
	t->guard = 0;
}

static const struct pl_runtime instrument_runtime = {.name = "instrument", .native = 1};

void pl_instrument_init(void)
{
	pl_runtime_add(&instrument_runtime);
}

PL_EXPORT void __cyg_profile_func_enter(void *fn, void *site);
PL_EXPORT void __cyg_profile_func_exit(void *fn, void *site);

PL_EXPORT void __cyg_profile_func_enter(void *fn, void *site)
{
	hook(fn, coprof_enter, 1);
}

PL_EXPORT void __cyg_profile_func_exit(void *fn, void *site)
{
	hook(fn, coprof_leave, 0);
}
