/* adapter.h: the meeting point of the shim's Python loader (runtime/python-loader.c) and
 * the CPython adapters (one .so per Python version, built in this folder).
 *
 * The loader runs in the shim's constructor: it finds the interpreter, dlopens the
 * adapter built for its version and calls its one exported symbol with a struct of what
 * the adapter may use from the shim (the adapter cannot call the shim's hidden
 * functions). The adapter answers with its start/stop/fork callbacks. In sample mode
 * the adapter keeps os.fork quiet (fork.c) and lends the tick handler its frame reader
 * (sampling/). */
#ifndef PL_PY_ADAPTER_H
#define PL_PY_ADAPTER_H

#include <sys/types.h>

#include "coprof.h"
#include "state/state.h" /* enum pl_py_hook, COPROF_PY_HOOK's values */

#define PL_PY_ABI 8 /* 6: struct pl_py_sample has cur; 7: struct pl_py_host has late; 8: test_pause */
#define PL_PY_ENTRY "pl_py_attach"

/* What the shim lends the adapter. Pointers stay valid for the process's life. */
struct pl_py_host {
	int abi;	      /* PL_PY_ABI */
	struct coprof **prof; /* the shim's profiler (replaced in a forked child) */
	enum coprof_clock clock;
	int builtins; /* COPROF_BUILTINS=1: key C builtins too */
	/* 0 (sample mode): the adapter serves os.fork below and the tick handler's frame
	 * reader (sampling/); it hooks nothing. */
	int profile;
	/* For os.fork's 'before' and 'after_in_parent'/'after_in_child' callbacks, called
	 * without the GIL: the shim's own threads stop before the fork and start again
	 * after it, so Python never counts them (pl_control_fork_pause, lifecycle/control.c). */
	void (*fork_pause)(void);
	void (*fork_resume)(void);
	/* The calling thread's engine thread, registered on first use; NULL on failure. */
	struct coprof_thread *(*thread)(void);
	/* One line on stderr, prefixed "coprof: ". */
	void (*say)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
	enum pl_py_hook hook; /* COPROF_PY_HOOK */
	/* Sample mode: the calling thread goes from context `from` to `to` (NULL: the
	 * thread's own), or context `c` finished. The engine and the sampler are told
	 * (the sampler charges each tick to the context running). Used by greenlets. */
	void (*ctx_switch)(struct coprof_ctx *from, struct coprof_ctx *to);
	void (*ctx_finish)(struct coprof_ctx *c);
	/* Sample mode under wall: asyncio task `c` of engine thread `t` waited `ns`
	 * suspended at the stack `keys` (adapter keys, innermost first). Any thread,
	 * outside any signal. */
	void (*task_wait)(struct coprof_thread *t, struct coprof_ctx *c, const uintptr_t *keys,
			  unsigned n, uint64_t ns);
	/* Sample mode: the engine thread of the sampled thread whose kernel id is `tid`
	 * (an asyncio loop's thread), NULL when none. Any thread, outside any signal. */
	struct coprof_thread *(*thread_of)(pid_t tid);
	/* Attached while Python runs (the Python API loaded the shim, with the GIL held):
	 * the main module started before the audit hook could see it. */
	int late;
	/* Tests only: sleeps the milliseconds the environment variable `name` gives
	 * (pl_test_pause), where a test widens a race on purpose. */
	void (*test_pause)(const char *name);
};

/* One tick's Python stack, filled by the adapter's sample function in the tick
 * handler of the interrupted thread (python/sampling/walk.c). keys[] are the adapter's
 * function keys (the top bit set: never a code address), innermost first, resolved at dump by the
 * adapter's resolver; groups[i] is the number of frames the i-th innermost run of the eval loop ran
 * (the C frames of _PyEval_EvalFrameDefault that --native replaces). The function returns the
 * number of frames written, 0 when the thread runs no Python code (sample its native stack), or -1
 * when its frames could not be read whole or are another greenlet's (the tick is dropped). */
#define PL_PY_SAMPLE_MAX 128
struct pl_py_sample {
	uintptr_t sp;	    /* the interrupted stack pointer */
	uintptr_t pc;	    /* the interrupted program counter */
	/* Set by the shim: the context the tick is charged to unless the adapter says
	 * otherwise (a greenlet's, from the last ctx_switch; NULL: the thread's own). A
	 * chain that ends at the outermost frame of another, switched-out greenlet is
	 * dropped (-1): greenlet restored its frames before its tracer said it runs. */
	struct coprof_ctx *cur;
	unsigned truncated; /* set when more frames than PL_PY_SAMPLE_MAX */
	unsigned ngroups;
	uintptr_t keys[PL_PY_SAMPLE_MAX];
	uint16_t groups[PL_PY_SAMPLE_MAX];
	/* The asyncio task whose coroutine chain runs (python/sampling/tasks.c): its
	 * context, or NULL when none or it is not known yet (the thread's own). The
	 * task's stack is its first task_frames keys: its root has no caller in it. */
	struct coprof_ctx *ctx;
	unsigned task_frames;
	/* ctx NULL because no scan has listed the running coroutine yet: its address
	 * (else 0) and the number of the scans of tasks begun before this tick. The
	 * adapter's claim may give the tick to the task the next scan finds there. */
	uintptr_t new_coro;
	unsigned new_gen;
};

/* The shim's tick handler calls this when the Python adapter registered it (sample
 * mode, runtime/python-loader.c); NULL otherwise. */
typedef int (*pl_py_sample_fn)(struct pl_py_sample *s);

/* What the adapter gives back. start and stop run on the shim's control thread (or in
 * the constructor, before Python runs); after_fork_child in the child, right after fork,
 * before Python's own after-fork code. */
struct pl_py_adapter {
	int (*start)(void);
	int (*stop)(void);
	void (*after_fork_child)(void);
	/* Sample mode: reads the calling thread's Python frames from inside the tick
	 * handler (async-signal-safe, python/sampling/). NULL in trace mode. */
	int (*sample)(struct pl_py_sample *s);
	/* Sample mode: called by the shim's folding thread at each fold (no GIL, no
	 * signal): the adapter may ask the main thread to look at its asyncio tasks. */
	void (*fold)(void);
	/* Sample mode: called by the folding thread after each fold, outside the
	 * sampler's fork lock, so it may take the GIL (pl_py_gil_take). NULL: none. */
	void (*after_fold)(void);
	/* Sample mode: the task a tick that met no known task (new_coro, new_gen in
	 * struct pl_py_sample; root_key: the key of that coroutine's code) belongs to,
	 * once the scan after it found it: 1 and *out, the task's context; 0: none (the
	 * tick stays with the thread); -EAGAIN: that scan has not ended yet. Folding
	 * thread (or the control thread folding at stop), outside any signal, no GIL.
	 * NULL: none. */
	int (*claim)(uintptr_t coro, uintptr_t root_key, unsigned gen, struct coprof_ctx **out);
};

/* The adapter's entry point: installs its audit hook and fills *out. 0 or -errno;
 * -EPROTO, said on stderr, when the libcoprof.so it runs against was built with
 * another layout of the structs the adapter inlines (engine-inline.h). */
typedef int (*pl_py_attach_fn)(const struct pl_py_host *host, struct pl_py_adapter *out);

#endif
