/* steps.c: asyncio's loop steps in sample mode (doc/design.md rule 11). A tick says
 * where a thread is, not when the loop began or ended a step: Handle._run's start and
 * end say that, and nothing else pays. Its start begins a step of the thread's own
 * context (coprof_loop_step_begin); its end ends it, as a step of the task whose step
 * or wakeup it ran (the task's id, the one the scans give its sampled context) or of
 * a callback (task id 0, the callback's name). The ticks between give a stall its
 * stack (coprof_step_tick, called by the shim's tick handler).
 *
 * How Handle._run is watched: on 3.12 and later, sys.monitoring's local events on its
 * code object alone (a handle whose callback raises SystemExit or KeyboardInterrupt
 * unwinds, which no local event tells: its step ends unmeasured at the next start).
 * Up to 3.11, which has no local events, Handle._run is replaced on its class by a C
 * method descriptor that calls the original between the two (no Python frame of its
 * own, so no traceback or stack the program prints changes).
 *
 * Put on at the first import (its audit event) after asyncio's events module was
 * loaded, or by the first task scan that finds it loaded (attached late), GIL held;
 * and kept: while no window is open each handle costs a call that finds nothing to
 * do. */
#include <errno.h>
#include <time.h>

#include "sampling.h" /* Python.h first */
#include "coprof-private.h"
#include "python/callback.h"

#define NAME_MAX_STEP 48

/* The step this thread's loop runs: open, of task `id` (0: a callback named `name`),
 * run by `loop` (borrowed: the loop outlives its step). */
static __thread struct {
	int open;
	PyObject *loop;
	uint64_t id;
	char name[NAME_MAX_STEP];
} step;

static int installed; /* tried: on, or not possible */

/* Handle._run(h) starts. */
static void step_begin(PyObject *h)
{
	PyObject *cb = h ? pl_py_aio_handle_callback(h) : NULL;
	struct coprof_thread *t = cb ? pl_py_host->thread() : NULL;
	step.open = 0;
	if (!t)
		return;
	PyObject *task = pl_py_aio_task_of(cb);
	step.loop = pl_py_aio_handle_loop(h);
	step.id = (uint64_t)(uintptr_t)task;
	if (!task)
		pl_py_aio_callback_name(cb, step.name, sizeof(step.name));
	step.open = 1;
	coprof_loop_step_begin(t);
}

/* Handle._run returns. A stall counts the tasks behind it from the loop's queues
 * (rule 12's count, as of its end: sample mode sees no task become ready). */
static void step_end(void)
{
	if (!step.open)
		return;
	step.open = 0;
	struct coprof_thread *t = pl_py_host->thread();
	if (!t || !coprof_loop_step_end(t, step.id, step.id ? NULL : step.name))
		return;
	double now = (double)cp_clock_gettime_ns(CLOCK_MONOTONIC) / 1e9;
	int n = step.loop ? pl_py_aio_behind(step.loop, now) : -1;
	if (n >= 0)
		coprof_stall_behind(t, (uint32_t)n);
}

/* asyncio.events.Handle (a new reference, in *cls) and its _run function (a new
 * reference), when asyncio is loaded and _run is a Python function; NULL otherwise,
 * with no error set. Imports nothing. */
static PyObject *handle_run(PyObject **cls)
{
	PyObject *name = PyUnicode_FromString("asyncio.events");
	PyObject *m = name ? PyImport_GetModule(name) : NULL;
	PyObject *h = m ? PyObject_GetAttrString(m, "Handle") : NULL;
	PyObject *run = h ? PyObject_GetAttrString(h, "_run") : NULL;
	if (run && !PyFunction_Check(run))
		Py_CLEAR(run);
	if (run)
		*cls = Py_NewRef(h);
	Py_XDECREF(h);
	Py_XDECREF(m);
	Py_XDECREF(name);
	PyErr_Clear();
	return run;
}

#if PY_VERSION_HEX >= 0x030C0000

/* The frame running now, when it runs `code`. */
static PL_PY_FRAME *running(PyObject *code)
{
#if PY_VERSION_HEX >= 0x030D0000
	PL_PY_FRAME *fr = PyThreadState_GetUnchecked()->current_frame;
#else
	PL_PY_FRAME *fr = _PyThreadState_UncheckedGet()->cframe->current_frame;
#endif
	return fr && (PyObject *)pl_py_frame_code(fr) == code ? fr : NULL;
}

/* Handle._run(self) starts: args are its code and the instruction offset. */
static PyObject *on_start(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw)
{
	(void)self, (void)kw;
	PL_PY_FRAME *fr = PyVectorcall_NARGS(nargsf) >= 1 ? running(args[0]) : NULL;
	step_begin(fr ? pl_py_frame_arg(fr, 0) : NULL);
	Py_RETURN_NONE;
}

/* Handle._run returns (its `self` is None by then: it drops it to break cycles). */
static PyObject *on_return(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw)
{
	(void)self, (void)args, (void)nargsf, (void)kw;
	step_end();
	Py_RETURN_NONE;
}

static PyTypeObject callback_type = PL_PY_CALLBACK_TYPE("coprof.step_callback");

/* asyncio.events.Handle._run's code object (a new reference), when asyncio is
 * loaded; NULL otherwise. Imports nothing. */
static PyObject *handle_run_code(void)
{
	PyObject *h = NULL, *run = handle_run(&h);
	PyObject *code = run ? Py_NewRef(PyFunction_GET_CODE(run)) : NULL;
	Py_XDECREF(run);
	Py_XDECREF(h);
	return code;
}

void pl_pys_steps_install(void)
{
	if (installed)
		return;
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	PyObject *code = handle_run_code();
	if (!code) {
		pl_py_exc_restore(&e);
		return;
	}
	installed = 1;
	PyObject *mon = PySys_GetObject("monitoring"); /* borrowed */
	long start = mon ? pl_py_mon_event(mon, "PY_START") : -1;
	long ret = mon ? pl_py_mon_event(mon, "PY_RETURN") : -1;
	PyObject *cb_start = pl_py_callback_new(&callback_type, on_start);
	PyObject *cb_return = pl_py_callback_new(&callback_type, on_return);
	int tool = start > 0 && ret > 0 && cb_start && cb_return ? pl_py_mon_claim(mon, 1) : -1;
	if (tool >= 0 &&
	    (pl_py_mon_call(mon, "register_callback", "(ilO)", tool, start, cb_start) != 0 ||
	     pl_py_mon_call(mon, "register_callback", "(ilO)", tool, ret, cb_return) != 0 ||
	     pl_py_mon_call(mon, "set_local_events", "(iOl)", tool, code, start | ret) != 0)) {
		(void)pl_py_mon_call(mon, "free_tool_id", "(i)", tool);
		tool = -1;
	}
	if (tool < 0)
		pl_py_host->say("sample mode: sys.monitoring's tool ids 5, 4 and 3 are taken; "
				"the event loop's stalls are not measured");
	/* the callbacks stay referenced by sys.monitoring, or are not needed */
	Py_XDECREF(cb_start);
	Py_XDECREF(cb_return);
	Py_DECREF(code);
	PyErr_Clear();
	pl_py_exc_restore(&e);
}

#else

/* Handle._run's stand-in: the original function, called between the step's bounds.
 * A method descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR): `handle._run()` calls it with
 * the handle first, as a function, with no bound method made. */
struct step_run {
	PyObject_HEAD vectorcallfunc call;
	PyObject *orig;
};

static PyObject *run_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw)
{
	struct pl_py_exc e;
	step_begin(PyVectorcall_NARGS(nargsf) >= 1 ? args[0] : NULL);
	PyErr_Clear(); /* (the step's bookkeeping raises nothing in the program) */
	PyObject *res = PyObject_Vectorcall(((struct step_run *)self)->orig, args, nargsf, kw);
	pl_py_exc_save(&e); /* SystemExit or KeyboardInterrupt, on its way out */
	step_end();
	PyErr_Clear();
	pl_py_exc_restore(&e);
	return res;
}

static PyObject *run_get(PyObject *self, PyObject *obj, PyObject *type)
{
	(void)type;
	if (!obj) {
		Py_INCREF(self);
		return self;
	}
	return PyMethod_New(self, obj);
}

static PyTypeObject run_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "coprof.step_run",
    .tp_basicsize = sizeof(struct step_run),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_vectorcall_offset = offsetof(struct step_run, call),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = run_get,
};

void pl_pys_steps_install(void)
{
	if (installed)
		return;
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	PyObject *h = NULL, *run = handle_run(&h);
	if (run)
		installed = 1;
	struct step_run *r = NULL;
	if (run && PyType_Ready(&run_type) == 0 &&
	    (r = PyObject_New(struct step_run, &run_type))) {
		r->call = run_call;
		r->orig = run; /* kept for good, as the class is */
		run = NULL;
		if (PyObject_SetAttrString(h, "_run", (PyObject *)r) != 0)
			pl_py_host->say("sample mode: asyncio's Handle._run cannot be watched; the "
					"event loop's stalls are not measured");
		Py_DECREF(r);
	}
	Py_XDECREF(run);
	Py_XDECREF(h);
	PyErr_Clear();
	pl_py_exc_restore(&e);
}

#endif
