/* sampling.h: the CPython adapter's side of sample mode (COPROF_MODE=sample), compiled
 * into every per-version adapter. The shim's tick handler calls pl_pys_sample (through
 * the pointer the adapter hands back, adapter.h) on the interrupted thread; it reads
 * that thread's frame chain (walk.c) and names each code object into a table of its
 * own (names.c). Both are async-signal-safe: no GIL, no allocation, no lock. */
#ifndef PL_PYS_SAMPLING_H
#define PL_PYS_SAMPLING_H

#include "../py.h"

/* Maps the name table and the string arena (attach time, outside any signal).
 * 0 or -errno. */
PL_PY_HIDDEN int pl_pys_init(void);
/* The adapter's sample function (struct pl_pys_sample in adapter.h). */
PL_PY_HIDDEN int pl_pys_sample(struct pl_py_sample *s);
/* The function key of code object `co`, read from a thread that runs it (its frame
 * holds a reference): its entry in the name table (names.c), made on first sight.
 * 0 when `co` does not look like a live code object or the table is full. */
PL_PY_HIDDEN uintptr_t pl_pys_key(PyCodeObject *co);
/* tasks.c. The context of the asyncio task whose root coroutine `coro` runs on thread
 * state `ts`, any thread's (tick handler, async-signal-safe); NULL: none known (the
 * thread's own). When no scan has listed `coro` yet, s->new_coro and s->new_gen say
 * so (pl_pys_claim). */
PL_PY_HIDDEN struct coprof_ctx *pl_pys_task_ctx(PyThreadState *ts, PyObject *coro,
						struct pl_py_sample *s);
/* The adapter's claim (struct pl_py_adapter in adapter.h): folding thread, no GIL. */
PL_PY_HIDDEN int pl_pys_claim(uintptr_t coro, uintptr_t root_key, unsigned gen,
			      struct coprof_ctx **out);
/* Each tick of a thread with Python frames (see tasks.c). */
PL_PY_HIDDEN void pl_pys_tasks_tick(PyThreadState *ts);
/* Reads the tasks' test knob (attach time). */
PL_PY_HIDDEN void pl_pys_tasks_init(void);
/* The adapter's fold callback (struct pl_py_adapter in adapter.h): folding thread. */
PL_PY_HIDDEN void pl_pys_fold(void);
/* The adapter's after_fold callback: folding thread, outside the sampler's fork lock,
 * no GIL (it may take it). */
PL_PY_HIDDEN void pl_pys_after_fold(void);
/* Right after fork, in the child. */
PL_PY_HIDDEN void pl_pys_tasks_after_fork_child(void);
/* Python begins to finalize (its audit event, main thread): no scan is queued from
 * now on, and none is being queued when this returns. */
PL_PY_HIDDEN void pl_pys_tasks_closing(void);
/* Sampling starts (control thread): waits seen before do not count. */
PL_PY_HIDDEN void pl_pys_tasks_start(void);
/* Nonzero once Python finalizes (thread states of daemon threads are freed then). */
static inline int pl_pys_finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
	return Py_IsFinalizing();
#else
	return _Py_IsFinalizing();
#endif
}
/* steps.c: 3.12+, puts local events on asyncio's Handle._run once asyncio is loaded,
 * so that the loop's steps, and their stalls, are measured (GIL held: each import's
 * audit event, and each task scan, call it until it is on). */
PL_PY_HIDDEN void pl_pys_steps_install(void);
/* The engine's resolver for those keys (dump time, any thread). */
PL_PY_HIDDEN int pl_pys_resolve(void *arg, uintptr_t key, struct coprof_func_info *out);

#endif
