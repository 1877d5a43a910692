/* py.h: what the adapter's files share, and the CPython internals it reads, one
 * version at a time (3.10 to 3.13; the adapter is compiled once per version).
 *
 * Frames are read without calling Python (no allocation on the hot path): 3.10
 * through PyFrameObject's fields, 3.11+ through the interpreter's own frames
 * (struct _PyInterpreterFrame, internal headers). Everything runs with the GIL held
 * unless a function says otherwise. */
#ifndef PL_PY_H
#define PL_PY_H

#define PY_SSIZE_T_CLEAN
#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>
#include <opcode.h>
#if PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_frame.h>
#if PY_VERSION_HEX >= 0x030D0000
#include <internal/pycore_opcode_utils.h> /* RESUME_OPARG_LOCATION_MASK */
#endif
#endif

#include "adapter.h"

#define PL_PY_HIDDEN __attribute__((visibility("hidden")))
#define pl_py_unlikely(x) __builtin_expect(!!(x), 0)
#define pl_py_likely(x) __builtin_expect(!!(x), 1)

/* --- a small open-addressed hash map from an address to a pointer, for the adapter's
 * caches (code object -> function, coroutine -> task) (map.c). Lookups are inline and
 * allocate nothing; inserts grow the table (the slow path of a first sighting). Not
 * thread-safe: every map is used under the GIL or by one thread only. ------------- */

struct pl_py_map {
	uintptr_t *keys; /* 0: empty slot */
	void **vals;
	uint32_t mask; /* capacity - 1; capacity is a power of two, 0 before first put */
	uint32_t n;
};

static inline uint32_t pl_py_map_slot(const struct pl_py_map *m, uintptr_t k)
{
	return (uint32_t)(((uint64_t)k * 0x9E3779B97F4A7C15ull) >> 32) & m->mask;
}

/* The value stored under k, or NULL. */
static inline void *pl_py_map_get(const struct pl_py_map *m, uintptr_t k)
{
	if (!m->keys)
		return 0;
	for (uint32_t i = pl_py_map_slot(m, k);; i = (i + 1) & m->mask) {
		if (m->keys[i] == k)
			return m->vals[i];
		if (m->keys[i] == 0)
			return 0;
	}
}

/* Stores v under k (k != 0), replacing any value. 0 or -ENOMEM. */
PL_PY_HIDDEN int pl_py_map_put(struct pl_py_map *m, uintptr_t k, void *v);
/* Removes k; returns its value or NULL. */
PL_PY_HIDDEN void *pl_py_map_del(struct pl_py_map *m, uintptr_t k);
/* Calls fn on every entry; fn returns nonzero to remove the entry. */
PL_PY_HIDDEN void pl_py_map_sweep(struct pl_py_map *m, int (*fn)(uintptr_t k, void *v, void *arg),
				  void *arg);
PL_PY_HIDDEN void pl_py_map_free(struct pl_py_map *m);

/* --- functions: code objects and builtins, keyed for the engine (funcs.c) ------- */

enum {
	PL_PY_GEN = 1,	     /* a plain generator: DESIGN rule 6 */
	PL_PY_CORO = 2,	     /* a coroutine or an iterable (types.coroutine) coroutine */
	PL_PY_ASYNC_GEN = 4, /* an async generator */
};

/* One function seen by the adapter. Its address is the engine key; it lives as long
 * as the adapter, so a key never changes meaning, even after its code objects died.
 * Code objects with the same file, line, name and kind share one (pstats keys them
 * alike), so code made over and over (exec, templates) adds no function. */
struct pl_py_func {
	const char *file; /* UTF-8 copies, made at first sight */
	const char *name;
	unsigned line;
	unsigned flags;		 /* PL_PY_* */
	unsigned waits;		 /* PL_PY_WAITS_*: asyncio code where a task waits on tasks */
	struct pl_py_func *same; /* the next function of the same hash (funcs.c) */
	/* Builtins: what their PyMethodDef held when it was named (a freed def's
	 * address is reused by another builtin). */
	const char *def_name;
	void *def_meth;
	unsigned sched; /* PL_PY_SCHED_*: one of asyncio's scheduling points (rule 12) */
};

/* asyncio's coroutines in which a task waits on tasks that its root's yield does not
 * name (hook/task-awaits.c): what the yielded future is for is read from their frame. */
enum {
	PL_PY_WAITS_TASKGROUP = 1, /* TaskGroup.__aexit__(self, ...): the group's end */
	PL_PY_WAITS_WAIT = 2,	   /* tasks._wait(fs, ...): asyncio.wait()'s futures */
	PL_PY_WAITS_WAIT_FOR = 3,  /* wait_for(fut, timeout) before 3.12: its task */
};

/* asyncio's scheduling points, where hook/ready.c sees a task made ready. */
enum {
	PL_PY_SCHED_CALL_SOON = 1, /* BaseEventLoop._call_soon(self, callback, args, context) */
	PL_PY_SCHED_RUN = 2,	   /* Handle._run(self), TimerHandle's too */
};

/* The function for code object `co`: kept in a code-extra slot of coprof's own (so
 * it lives and dies with `co`), found or made at first sight. NULL only when out of
 * memory. */
PL_PY_HIDDEN struct pl_py_func *pl_py_func_slow(PyCodeObject *co);
/* The slot's index; negative: none. */
extern PL_PY_HIDDEN Py_ssize_t pl_py_extra;

/* What co_extra points to: the layout CPython 3.6 to 3.13 keeps private
 * (Objects/codeobject.c), slots that no tool set being NULL. */
struct pl_py_code_extra {
	Py_ssize_t size;
	void *extras[1];
};

static inline struct pl_py_func *pl_py_func_of(PyCodeObject *co)
{
	const struct pl_py_code_extra *x = co->co_extra;
	/* Unsigned: a negative index (no slot) is never below the size. */
	if (pl_py_likely(x && (size_t)pl_py_extra < (size_t)x->size)) {
		struct pl_py_func *f = x->extras[pl_py_extra];
		if (pl_py_likely(f))
			return f;
	}
	return pl_py_func_slow(co);
}

/* The function for a C builtin called from Python: a PyCFunction, or a method
 * descriptor called with `self` (NULL: none) as its first argument. NULL: not one. */
PL_PY_HIDDEN struct pl_py_func *pl_py_builtin_of(PyObject *callable, PyObject *self);
/* The engine's resolver for the keys above (any thread, no GIL needed). */
PL_PY_HIDDEN int pl_py_resolve(void *arg, uintptr_t key, struct coprof_func_info *out);

/* --- what the adapter's files share (host.c) -------------------------------------- */

/* What the shim lent the adapter (pl_py_attach). */
extern PL_PY_HIDDEN const struct pl_py_host *pl_py_host;
/* Bumped at every start and after fork: per-thread state made before is reset. */
extern PL_PY_HIDDEN unsigned pl_py_gen;
/* Forks seen (bumped in the child): a task context made before belongs to the parent's
 * profiler. */
extern PL_PY_HIDDEN unsigned pl_py_forks;

/* --- os.fork (fork.c) -------------------------------------------------------------- */

/* Registers the callbacks that pause the shim's threads around os.fork (once; called
 * when the main module is about to run). */
PL_PY_HIDDEN void pl_py_fork_register(void);

/* --- the control thread's turn with the GIL (gil.c) ------------------------------- */

/* Takes the GIL in the shim's control thread (no GIL held), unless Python is not
 * initialised, finalizing, or past the atexit callback pl_py_gil_at_main registered: 0
 * (give it back with pl_py_gil_give) or -1 (nothing taken). A thread that drops and
 * retakes the GIL often cannot starve it. */
PL_PY_HIDDEN int pl_py_gil_take(PyGILState_STATE *st);
PL_PY_HIDDEN void pl_py_gil_give(PyGILState_STATE st);
/* When the main module is about to run (the audit hook, GIL held): registers the
 * atexit callback that closes pl_py_gil_take for good before Python finalizes. */
PL_PY_HIDDEN void pl_py_gil_at_main(void);
/* Right after fork, in the child. */
PL_PY_HIDDEN void pl_py_gil_after_fork_child(void);

/* --- frames, per version ---------------------------------------------------------- */

#if PY_VERSION_HEX >= 0x030B0000
#define PL_PY_FRAME struct _PyInterpreterFrame

static inline PL_PY_FRAME *pl_py_frame(PyFrameObject *f)
{
	return f->f_frame;
}

static inline PyCodeObject *pl_py_frame_code(PL_PY_FRAME *fr)
{
#if PY_VERSION_HEX >= 0x030D0000
	PyObject *e = fr->f_executable;
	return PyCode_Check(e) ? (PyCodeObject *)e : NULL;
#else
	return fr->f_code;
#endif
}

/* The frame that called (or resumed) fr, skipping frames not yet started and the
 * interpreter's C-stack entry frames. */
static inline PL_PY_FRAME *pl_py_frame_back(PL_PY_FRAME *fr)
{
	for (fr = fr->previous; fr; fr = fr->previous) {
#if PY_VERSION_HEX >= 0x030C0000
		if (fr->owner == FRAME_OWNED_BY_CSTACK)
			continue;
#endif
		if (!pl_py_frame_code(fr) || _PyFrame_IsIncomplete(fr))
			continue;
		return fr;
	}
	return NULL;
}

/* The generator, coroutine or async generator that owns fr, or NULL. */
static inline PyObject *pl_py_frame_gen(PL_PY_FRAME *fr)
{
	return fr->owner == FRAME_OWNED_BY_GENERATOR ? (PyObject *)_PyFrame_GetGenerator(fr) : NULL;
}

/* Argument i of a frame that has just started (nothing ran yet to change it). */
static inline PyObject *pl_py_frame_arg(PL_PY_FRAME *fr, int i)
{
	return fr->localsplus[i];
}

/* The code object a generator, coroutine or async generator runs. */
static inline PyCodeObject *pl_py_gen_code(PyObject *gen)
{
	return pl_py_frame_code((PL_PY_FRAME *)((PyGenObject *)gen)->gi_iframe);
}

/* The instruction fr is at: the one running, or the last one run before 3.13. */
static inline _Py_CODEUNIT *pl_py_frame_instr(PL_PY_FRAME *fr)
{
#if PY_VERSION_HEX >= 0x030D0000
	return fr->instr_ptr;
#else
	return fr->prev_instr;
#endif
}

/* Nonzero when a 'call' event on a generator frame is its first start, zero when it
 * resumes after a yield: the frame is still at or before its first RESUME. */
static inline int pl_py_frame_fresh(PL_PY_FRAME *fr, PyCodeObject *co)
{
	_Py_CODEUNIT *at = pl_py_frame_instr(fr);
	return at - _PyCode_CODE(co) <= co->_co_firsttraceable;
}

/* Nonzero when a 'return' event on a generator frame is a yield (it will resume). */
static inline int pl_py_frame_suspended(PL_PY_FRAME *fr)
{
	PyGenObject *g = (PyGenObject *)pl_py_frame_gen(fr);
	if (!g)
		return 0;
#if PY_VERSION_HEX >= 0x030D0000
	return FRAME_STATE_SUSPENDED(g->gi_frame_state);
#else
	return g->gi_frame_state == FRAME_SUSPENDED;
#endif
}
/* Nonzero when fr (a running generator-like frame) is in an `await` or `yield from`:
 * sending into the frame it resumes, or, for a throw() passed down a chain, at the
 * yield of one. Zero when it called something else (a Task constructor that runs a
 * coroutine eagerly, a coroutine's send(), a collection that closes one). */
static inline int pl_py_frame_delegating(PL_PY_FRAME *fr)
{
	PyCodeObject *co = pl_py_frame_code(fr);
	_Py_CODEUNIT *at = pl_py_frame_instr(fr);
	if (!co || at < _PyCode_CODE(co))
		return 1;
	int op = _Py_OPCODE(*at);
#if PY_VERSION_HEX >= 0x030C0000
	/* Under line or instruction events the opcode is kept aside. */
	_PyCoMonitoringData *m = co->_co_monitoring;
	Py_ssize_t i = at - _PyCode_CODE(co);
	if (op == INSTRUMENTED_LINE)
		op = m && m->lines ? m->lines[i].original_opcode : SEND;
	if (op == INSTRUMENTED_INSTRUCTION)
		op = m && m->per_instruction_opcodes ? m->per_instruction_opcodes[i] : SEND;
#if PY_VERSION_HEX < 0x030D0000
	/* 3.12 leaves prev_instr at SEND's cache entry when it runs the generator in
	 * the same C frame (SEND_GEN): the instruction is the one before. */
	if (i >= 1) {
		int before = _Py_OPCODE(at[-1]);
		if (before == SEND || before == SEND_GEN)
			return 1;
	}
#endif
	switch (op) {
	case SEND:
	case SEND_GEN:
	case YIELD_VALUE:
	case INSTRUMENTED_YIELD_VALUE:
		return 1;
#if PY_VERSION_HEX >= 0x030D0000
	case RESUME:
	case RESUME_CHECK:
	case INSTRUMENTED_RESUME:
		/* 3.13 keeps a suspended frame at the RESUME after its yield. Only the
		 * one after an await or `yield from` delegates; the others (a function's
		 * start, a plain yield) check the eval breaker, where a collection may
		 * close some other coroutine under this running frame. */
		return (_Py_OPARG(*at) & RESUME_OPARG_LOCATION_MASK) >= RESUME_AFTER_YIELD_FROM;
#endif
	}
	return 0;
#else
	return op == SEND || op == YIELD_VALUE;
#endif
}

/* Nonzero when fr, at a yield event or at the resume event that follows it, is (or
 * was) suspended at the yield of a `yield from` or `await`, passing up the value of
 * the frame it delegates to: SEND (and its cache entry from 3.12), then YIELD_VALUE,
 * then the RESUME the resume event may already point at. Zero when unsure (an opcode
 * another tool instruments). */
static inline int pl_py_frame_in_yield_from(PL_PY_FRAME *fr)
{
	PyCodeObject *co = pl_py_frame_code(fr);
	_Py_CODEUNIT *at = pl_py_frame_instr(fr);
#if PY_VERSION_HEX >= 0x030C0000
	enum { SEND_BACK = 2 }; /* SEND, its cache entry, YIELD_VALUE */
#else
	enum { SEND_BACK = 1 };
#endif
	if (!co)
		return 0;
	Py_ssize_t i = at - _PyCode_CODE(co);
	if (i < 1 + SEND_BACK)
		return 0;
	int op = _Py_OPCODE(*at);
#if PY_VERSION_HEX >= 0x030D0000
	if (op == RESUME || op == RESUME_CHECK || op == INSTRUMENTED_RESUME)
#elif PY_VERSION_HEX >= 0x030C0000
	if (op == RESUME || op == INSTRUMENTED_RESUME)
#else
	if (op == RESUME || op == RESUME_QUICK)
#endif
	{
		at--;
		i--;
		op = _Py_OPCODE(*at);
	}
#if PY_VERSION_HEX >= 0x030C0000
	if (i < SEND_BACK || (op != YIELD_VALUE && op != INSTRUMENTED_YIELD_VALUE))
		return 0;
	op = _Py_OPCODE(at[-SEND_BACK]);
	return op == SEND || op == SEND_GEN;
#else
	if (i < SEND_BACK || op != YIELD_VALUE)
		return 0;
	return _Py_OPCODE(at[-SEND_BACK]) == SEND;
#endif
}
#else /* 3.10 */
#define PL_PY_FRAME PyFrameObject

static inline PL_PY_FRAME *pl_py_frame(PyFrameObject *f)
{
	return f;
}

static inline PyCodeObject *pl_py_frame_code(PL_PY_FRAME *fr)
{
	return fr->f_code;
}

static inline PL_PY_FRAME *pl_py_frame_back(PL_PY_FRAME *fr)
{
	return fr->f_back;
}

static inline PyObject *pl_py_frame_gen(PL_PY_FRAME *fr)
{
	return fr->f_gen;
}

static inline PyObject *pl_py_frame_arg(PL_PY_FRAME *fr, int i)
{
	return fr->f_localsplus[i];
}

static inline PyCodeObject *pl_py_gen_code(PyObject *gen)
{
	return (PyCodeObject *)((PyGenObject *)gen)->gi_code;
}

static inline int pl_py_frame_fresh(PL_PY_FRAME *fr, PyCodeObject *co)
{
	(void)co;
	return fr->f_lasti < 0;
}

static inline int pl_py_frame_suspended(PL_PY_FRAME *fr)
{
	return fr->f_state == FRAME_SUSPENDED;
}

/* 3.10: YIELD_FROM runs (f_lasti at it) or waits (f_lasti just before it). */
static inline int pl_py_frame_delegating(PL_PY_FRAME *fr)
{
	PyObject *code = fr->f_code->co_code;
	Py_ssize_t n = PyBytes_GET_SIZE(code) / (Py_ssize_t)sizeof(_Py_CODEUNIT);
	const _Py_CODEUNIT *at = (const _Py_CODEUNIT *)PyBytes_AS_STRING(code);
	int i = fr->f_lasti;
	if (i < 0 || i >= n)
		return 1;
	return _Py_OPCODE(at[i]) == YIELD_FROM ||
	       (i + 1 < n && _Py_OPCODE(at[i + 1]) == YIELD_FROM);
}

/* 3.10: a frame suspended in YIELD_FROM waits just before it. */
static inline int pl_py_frame_in_yield_from(PL_PY_FRAME *fr)
{
	PyObject *code = fr->f_code->co_code;
	Py_ssize_t n = PyBytes_GET_SIZE(code) / (Py_ssize_t)sizeof(_Py_CODEUNIT);
	const _Py_CODEUNIT *at = (const _Py_CODEUNIT *)PyBytes_AS_STRING(code);
	int i = fr->f_lasti;
	return i >= 0 && i + 1 < n && _Py_OPCODE(at[i + 1]) == YIELD_FROM;
}
#endif

/* --- greenlets (greenlet/greenlet.c) ----------------------------------------------- */

/* Every audit event: installs the greenlet tracer when greenlet._greenlet is imported,
 * and arms it in each thread that raises an event after that. */
PL_PY_HIDDEN void pl_py_greenlet_audit(const char *event, PyObject *args);
/* Attached late (the Python API): installs as the import would have, if greenlet was
 * imported already. GIL held. */
PL_PY_HIDDEN void pl_py_greenlet_late(void);
/* The context of the greenlet running on the calling thread (engine thread t); NULL:
 * the thread's own. Arms the greenlet tracer in this thread first if it is not yet.
 * No Python code runs. The hook's pl_py_window_ctx once greenlet is installed. */
PL_PY_HIDDEN struct coprof_ctx *pl_py_greenlet_current(struct coprof_thread *t);
/* The text of greenlet's C module once installed ([lo, hi); 0, 0 before): the tick
 * handler reads no Python frame while it runs there (sampling/walk.c). */
extern PL_PY_HIDDEN uintptr_t pl_py_greenlet_lo, pl_py_greenlet_hi;

/* --- sys.monitoring, 3.12+ (mon.c) ------------------------------------------------- */

#if PY_VERSION_HEX >= 0x030C0000
/* sys.monitoring.events.NAME, or -1. */
PL_PY_HIDDEN long pl_py_mon_event(PyObject *mon, const char *name);
/* sys.monitoring.fn(*args), args built from fmt; its result dropped, any error
 * cleared (the caller keeps the program's own exception aside). 0 or -EINVAL. */
PL_PY_HIDDEN int pl_py_mon_call(PyObject *mon, const char *fn, const char *fmt, ...);
/* A tool id claimed as "coprof": 3 or 4; for a tool of local events only (`local`), 5,
 * 4 or 3; -1 when all are taken. */
PL_PY_HIDDEN int pl_py_mon_claim(PyObject *mon, int local);
#endif

/* --- asyncio's objects, read through their C layout (aio.c) --------------------------- */

/* The C Task a scheduled callback steps or wakes (borrowed), or NULL: a builtin method
 * bound to a task (its wakeup), or the step wrapper. GIL held. */
PL_PY_HIDDEN PyObject *pl_py_aio_task_of(PyObject *cb);
/* A C Task's coroutine (borrowed), or NULL. GIL held. */
PL_PY_HIDDEN PyObject *pl_py_aio_task_coro(PyObject *task);
/* Where `type` keeps the object slot `name` (a __slots__ member), -1 if it has none,
 * and the type that declares it (in *owner, when not NULL). GIL held. */
PL_PY_HIDDEN Py_ssize_t pl_py_aio_slot(PyTypeObject *type, const char *name,
				       PyTypeObject **owner);
/* The callback of asyncio handle h (borrowed), or NULL. GIL held. */
PL_PY_HIDDEN PyObject *pl_py_aio_handle_callback(PyObject *h);
/* When timer handle h falls due (its `_when`, the loop's clock, s), or -1 when h is no
 * timer handle. GIL held. */
PL_PY_HIDDEN double pl_py_aio_timer_when(PyObject *h);
/* The loop of asyncio handle h (borrowed), or NULL. GIL held. */
PL_PY_HIDDEN PyObject *pl_py_aio_handle_loop(PyObject *h);
/* How many tasks wait behind a step `loop` (pl_py_aio_handle_loop) ran, at its end
 * `now` (the loop's clock, s): those whose step or wakeup is in the loop's ready queue,
 * and the timers that fell due by now, each as the task it wakes; -1 when the loop
 * cannot be read. GIL held, in the loop's thread; no Python code runs. */
PL_PY_HIDDEN int pl_py_aio_behind(PyObject *loop, double now);
/* A callback's name, for a stall's record: its function's qualified name (a bound
 * method's too), a builtin's name, else its type's; cut to len - 1 bytes. */
PL_PY_HIDDEN void pl_py_aio_callback_name(PyObject *cb, char *buf, size_t len);

/* --- weak references (weakref.c) ---------------------------------------------------- */

/* A new reference to a weak reference to o without a callback (PyWeakref_NewRef), or
 * NULL with an error set. One it makes is kept out of the garbage collector's sight: the
 * host collects as often, and traverses as much, as it would without coprof. A tracked
 * one per asyncio task made async_tree_io's collections 5% more frequent and added a
 * fifth to their instructions (bench/RESULTS.md). Clearing it when o dies does not
 * depend on the collector: that goes through o's own list of weak references. */
PL_PY_HIDDEN PyObject *pl_py_weakref(PyObject *o);

/* Python's own exception, kept aside while the adapter calls into Python. */
struct pl_py_exc {
#if PY_VERSION_HEX >= 0x030C0000
	PyObject *exc;
#else
	PyObject *type, *value, *tb;
#endif
};

static inline void pl_py_exc_save(struct pl_py_exc *e)
{
#if PY_VERSION_HEX >= 0x030C0000
	e->exc = PyErr_GetRaisedException();
#else
	PyErr_Fetch(&e->type, &e->value, &e->tb);
#endif
}

static inline void pl_py_exc_restore(struct pl_py_exc *e)
{
	PyErr_Clear();
#if PY_VERSION_HEX >= 0x030C0000
	PyErr_SetRaisedException(e->exc);
#else
	PyErr_Restore(e->type, e->value, e->tb);
#endif
}

#endif
