/* backend-monitoring.c: the sys.monitoring backend (CPython 3.12+): C callbacks
 * registered under a tool id of coprof's own, for the events that make up the profile
 * hook's 'call' and 'return', fed to the hook's events (hook.h) with the running
 * interpreter frame (no frame object made).
 * Events are interpreter-wide, so threads started later need nothing. Callbacks run
 * in the thread that runs the code, GIL held; start and stop hold the GIL too (the
 * audit hook, or the shim's control thread). */
#include <errno.h>

#include "hook.h"
#include "python/callback.h" /* after Python.h */

#if PY_VERSION_HEX >= 0x030C0000

/* What a callback says the frame does: the profile hook's 'call' (it starts, resumes or
 * is thrown into), or its 'return' (it returns or yields, or unwinds). */
enum { PL_PY_MON_START, PL_PY_MON_RESUME, PL_PY_MON_THROW };
enum { PL_PY_MON_RETURN, PL_PY_MON_YIELD, PL_PY_MON_UNWIND };

/* The frame running now, when it runs `code` (a callback always comes from the frame
 * of its code; the check keeps a surprise from reaching the engine). */
static inline PL_PY_FRAME *running(PyObject *code)
{
#if PY_VERSION_HEX >= 0x030D0000
	PL_PY_FRAME *fr = PyThreadState_GetUnchecked()->current_frame;
#else
	PL_PY_FRAME *fr = _PyThreadState_UncheckedGet()->cframe->current_frame;
#endif
	return pl_py_likely(fr) && (PyObject *)pl_py_frame_code(fr) == code ? fr : NULL;
}

/* The function of a callback's code object (NULL: out of memory). A plain function's
 * events (no generator or coroutine) need no frame: its code is all the engine keys,
 * as cProfile's callbacks read no frame either. */
static inline struct pl_py_func *code_func(PyObject *code)
{
	return PyCode_Check(code) ? pl_py_func_of((PyCodeObject *)code) : NULL;
}

/* A start, resume or throw() of `code`'s frame (`how`: PL_PY_MON_START, _RESUME or
 * _THROW). A plain function's never reads its frame (on_call_fn does not, for one). */
static inline __attribute__((always_inline)) void mon_call(PyObject *code, int how)
{
	struct pl_py_thread *pt = thread_current();
	if (!pt)
		return;
	struct pl_py_func *fn = code_func(code);
	int plain = fn && !fn->flags && !fn->sched; /* ready.c reads a scheduling point's */
	PL_PY_FRAME *fr = plain ? NULL : running(code);
	if (plain || fr)
		on_call_fn(pt, fr, (PyCodeObject *)code, fn, how == PL_PY_MON_THROW,
			   how == PL_PY_MON_THROW ? -1 : how == PL_PY_MON_START);
}

/* A return, yield (of `arg`) or unwind of `code`'s frame (`how`: PL_PY_MON_RETURN,
 * _YIELD or _UNWIND). */
static inline __attribute__((always_inline)) void mon_return(PyObject *code, PyObject *arg, int how)
{
	struct pl_py_thread *pt = thread_current();
	if (!pt)
		return;
	/* A plain function's return needs its frame only when it may be the thread's
	 * outermost (on_return then sweeps the ended tasks): not while a task runs (its
	 * driver's frames are below), nor above another frame the running context
	 * recorded; Handle._run's always goes there (a loop callback's step ends). A coroutine's end needs it only to tell the running task's root,
	 * which runs other code, or none runs. */
	struct pl_py_func *fn = code_func(code);
	int suspended = how == PL_PY_MON_YIELD;
	if (fn && ((!fn->flags && fn->sched != PL_PY_SCHED_RUN && (pt->ctx || pt->t->cur->depth >= 2)) ||
		   (fn->flags == PL_PY_CORO && !suspended && pt->root_code != code))) {
		forget_last(pt);
		ev_leave(pt->t, (uintptr_t)fn);
		return;
	}
	PL_PY_FRAME *fr = running(code);
	if (fr)
		on_return_fn(pt, fr, fn, arg, suspended);
}

static int tool = -1; /* the id coprof holds; -1: none */

/* Callbacks never fail: an error in a profiler is not the program's, and NULL here
 * would raise in the program. args: code, instruction offset, then the event's own.
 * Each event has a callback of its own, which tells the hook what the frame does, so
 * that each inlines what its event already says.
 *
 * Each callback is an object of a type of coprof's own whose vectorcall is the
 * callback itself: sys.monitoring calls it straight, where a builtin function
 * (PyCFunction) would first fetch the thread state and count a C recursion level
 * around the call (about 30 instructions an event, 3.12). Nothing here calls back
 * into Python, so no recursion check is lost. */
#define ARGS PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames
#define UNUSED_ARGS                                                                                \
	(void)self;                                                                                \
	(void)kwnames
#define NARGS PyVectorcall_NARGS(nargsf)

static PyObject *cb_start(ARGS)
{
	UNUSED_ARGS;
	if (pl_py_likely(NARGS >= 2))
		mon_call(args[0], PL_PY_MON_START);
	Py_RETURN_NONE;
}

static PyObject *cb_resume(ARGS)
{
	UNUSED_ARGS;
	if (pl_py_likely(NARGS >= 2))
		mon_call(args[0], PL_PY_MON_RESUME);
	Py_RETURN_NONE;
}

static PyObject *cb_throw(ARGS)
{
	UNUSED_ARGS;
	if (pl_py_likely(NARGS >= 2))
		mon_call(args[0], PL_PY_MON_THROW);
	Py_RETURN_NONE;
}

/* PY_RETURN and PY_YIELD pass the value (the profile hook's arg). */
static PyObject *cb_return(ARGS)
{
	UNUSED_ARGS;
	size_t n = NARGS;
	if (pl_py_likely(n >= 2))
		mon_return(args[0], n >= 3 ? args[2] : NULL, PL_PY_MON_RETURN);
	Py_RETURN_NONE;
}

static PyObject *cb_yield(ARGS)
{
	UNUSED_ARGS;
	size_t n = NARGS;
	if (pl_py_likely(n >= 2))
		mon_return(args[0], n >= 3 ? args[2] : NULL, PL_PY_MON_YIELD);
	Py_RETURN_NONE;
}

/* PY_UNWIND passes the exception, which the profile hook's 'return' never sees. */
static PyObject *cb_unwind(ARGS)
{
	UNUSED_ARGS;
	if (pl_py_likely(NARGS >= 2))
		mon_return(args[0], NULL, PL_PY_MON_UNWIND);
	Py_RETURN_NONE;
}

/* CALL comes for every call, C_RETURN and C_RAISE for every call of a non-Python
 * callable: only builtins count, as the profile hook's C events do. args[2] is the
 * callable, args[3] its first argument (self for a method descriptor). */
static void builtin(PyObject *const *args, size_t n, int enter)
{
	struct pl_py_func *fn = n >= 4 ? pl_py_builtin_of(args[2], args[3]) : NULL;
	struct pl_py_thread *pt = fn ? thread_current() : NULL;
	if (pt)
		pl_py_on_builtin(pt, enter, fn);
}

static PyObject *cb_c_call(ARGS)
{
	UNUSED_ARGS;
	builtin(args, NARGS, 1);
	Py_RETURN_NONE;
}

static PyObject *cb_c_return(ARGS)
{
	UNUSED_ARGS;
	builtin(args, NARGS, 0);
	Py_RETURN_NONE;
}

#undef ARGS
#undef UNUSED_ARGS
#undef NARGS

static PyTypeObject callback_type = PL_PY_CALLBACK_TYPE("coprof.callback");

static const vectorcallfunc defs[] = {cb_start, cb_resume, cb_throw,  cb_return,
				      cb_yield, cb_unwind, cb_c_call, cb_c_return};

/* Each event, by its name in sys.monitoring.events, and its callback in defs. */
static const struct {
	const char *name;
	int def;
	int builtins; /* only with COPROF_BUILTINS=1 */
} events[] = {
    {"PY_START", 0, 0},	 {"PY_RESUME", 1, 0}, {"PY_THROW", 2, 0},
    {"PY_RETURN", 3, 0}, {"PY_YIELD", 4, 0},  {"PY_UNWIND", 5, 0},
    {"CALL", 6, 1},	 {"C_RETURN", 7, 1},  {"C_RAISE", 7, 1},
};

#define NDEFS (sizeof(defs) / sizeof(defs[0]))
#define NEVENTS (sizeof(events) / sizeof(events[0]))

static PyObject *callbacks[NDEFS]; /* made once, kept for the process's life */

static int make_callbacks(void)
{
	for (size_t i = 0; i < NDEFS; i++)
		if (!callbacks[i] &&
		    !(callbacks[i] = pl_py_callback_new(&callback_type, defs[i]))) {
			PyErr_Clear();
			return -ENOMEM;
		}
	return 0;
}

/* Registers every callback and turns its events on (on), or unregisters them (None)
 * and turns every event off. 0 or -EINVAL. */
static int wire(PyObject *mon, int on)
{
	long mask = 0;
	int rc = 0;
	for (size_t i = 0; i < NEVENTS; i++) {
		if (events[i].builtins && !pl_py_host->builtins)
			continue;
		long bit = pl_py_mon_event(mon, events[i].name);
		if (bit <= 0) {
			rc = -EINVAL;
			continue;
		}
		PyObject *cb = on ? callbacks[events[i].def] : Py_None;
		if (pl_py_mon_call(mon, "register_callback", "(ilO)", tool, bit, cb) != 0)
			rc = -EINVAL;
		mask |= bit;
	}
	if (pl_py_mon_call(mon, "set_events", "(il)", tool, on ? mask : 0L) != 0)
		rc = -EINVAL;
	return rc;
}

int pl_py_monitor_start(void)
{
	static int said;
	if (tool >= 0)
		return 0;
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	PyObject *mon = PySys_GetObject("monitoring"); /* borrowed */
	int rc = mon && make_callbacks() == 0 ? -EBUSY : -ENOENT;
	if (rc == -EBUSY && (tool = pl_py_mon_claim(mon, 0)) >= 0) {
		rc = wire(mon, 1);
		if (rc != 0)
			pl_py_monitor_stop();
	}
	if (rc != 0 && !said) {
		said = 1;
		pl_py_host->say("sys.monitoring is not usable (%s); profiling through the "
				"profile function instead",
				rc == -EBUSY ? "tool ids 3 and 4 are taken" : "no callbacks");
	}
	pl_py_exc_restore(&e);
	return rc;
}

void pl_py_monitor_stop(void)
{
	if (tool < 0)
		return;
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	PyObject *mon = PySys_GetObject("monitoring");
	if (mon) {
		(void)wire(mon, 0);
		(void)pl_py_mon_call(mon, "free_tool_id", "(i)", tool);
	}
	tool = -1;
	pl_py_exc_restore(&e);
}

#else /* 3.10, 3.11: no sys.monitoring */

int pl_py_monitor_start(void)
{
	return -ENOTSUP;
}

void pl_py_monitor_stop(void)
{
}

#endif
