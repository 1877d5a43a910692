/* stub-shim.h: the test side of stub-shim.c (the sampler core with a fake engine). */
#ifndef STUB_SHIM_H
#define STUB_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#define STUB_API __attribute__((visibility("default")))
#define STUB_DEPTH 16

/* One call of coprof_sample, as the fake engine saw it. */
struct stub_sample {
	int thread; /* 1, 2...: the order threads first met the sampler */
	void *ctx;
	unsigned depth;
	int waiting;
	uint64_t ns;
	uintptr_t pcs[STUB_DEPTH]; /* innermost first */
};

STUB_API int stub_init(int wall, unsigned hz); /* pl_sampler_init */
STUB_API void stub_start(void);
STUB_API void stub_stop(void); /* folds everything before it returns */
STUB_API void stub_thread_start(void);
STUB_API void stub_thread_exit(void);
/* Around a context switch, as the ucontext adapter does it. */
STUB_API void stub_switch(void *from, void *to);
STUB_API void stub_switch_done(void);
STUB_API void stub_finish(void *ctx);
/* Valid until the next fold: call after stub_stop. */
STUB_API size_t stub_samples(const struct stub_sample **out);
STUB_API uint64_t stub_dropped(void);
STUB_API const char *stub_note(void);
STUB_API int stub_signo(void); /* the tick signal */
STUB_API int stub_cpu_timer(void); /* the CPU-time timer alone serves the rate */
STUB_API int stub_perf(void);	   /* ticks come from perf task-clock events */
STUB_API void stub_force_timer(int on); /* before stub_init: no perf events */
/* pl_unw_walk on `uc` (after stub_init): the depth, and in *base the outermost frame's
 * stack pointer when the walk reached the stack's end and trusts it, else 0. */
STUB_API int stub_unw_walk(const ucontext_t *uc, uintptr_t *pcs, int max, uintptr_t *base);

#endif
