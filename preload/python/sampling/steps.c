/* steps.c: asyncio's loop steps in sample mode (doc/design.md rule 11), on 3.12 and
 * later. A tick says where a thread is, not when the loop began or ended a step:
 * sys.monitoring says that for Handle._run alone, through local events on its code
 * object, so no other code pays. Its start begins a step of the thread's own context
 * (coprof_loop_step_begin); its return ends it, as a step of the task whose step or
 * wakeup it ran (the task's id, the one the scans give its sampled context) or of a
 * callback (task id 0, the callback's name). The ticks between give a stall its stack
 * (coprof_step_tick, called by the shim's tick handler).
 *
 * Put on at the first import (its audit event) after asyncio's events module was
 * loaded, or by the first task scan that finds it loaded (attached late), GIL held;
 * and kept: while no window is open each handle costs a call that
 * finds nothing to do. Up to 3.11 there are no local events: sample mode measures no
 * steps there. A handle whose callback raises SystemExit or KeyboardInterrupt
 * unwinds, which no local event tells: its step ends unmeasured at the next start. */
#include <errno.h>
#include <time.h>

#include "sampling.h" /* Python.h first */
#include "coprof-private.h"
#include "python/callback.h"

#if PY_VERSION_HEX >= 0x030C0000

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
	PyObject *h = fr ? pl_py_frame_arg(fr, 0) : NULL;
	PyObject *cb = h ? pl_py_aio_handle_callback(h) : NULL;
	struct coprof_thread *t = cb ? pl_py_host->thread() : NULL;
	step.open = 0;
	if (!t)
		Py_RETURN_NONE;
	PyObject *task = pl_py_aio_task_of(cb);
	step.loop = pl_py_aio_handle_loop(h);
	step.id = (uint64_t)(uintptr_t)task;
	if (!task)
		pl_py_aio_callback_name(cb, step.name, sizeof(step.name));
	step.open = 1;
	coprof_loop_step_begin(t);
	Py_RETURN_NONE;
}

/* Handle._run returns (its `self` is None by then: it drops it to break cycles). A
 * stall counts the tasks behind it from the loop's queues (rule 12's count, as of its
 * end: sample mode sees no task become ready). */
static PyObject *on_return(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kw)
{
	(void)self, (void)args, (void)nargsf, (void)kw;
	if (!step.open)
		Py_RETURN_NONE;
	step.open = 0;
	struct coprof_thread *t = pl_py_host->thread();
	if (!t || !coprof_loop_step_end(t, step.id, step.id ? NULL : step.name))
		Py_RETURN_NONE;
	double now = (double)cp_clock_gettime_ns(CLOCK_MONOTONIC) / 1e9;
	int n = step.loop ? pl_py_aio_behind(step.loop, now) : -1;
	if (n >= 0)
		coprof_stall_behind(t, (uint32_t)n);
	Py_RETURN_NONE;
}

static PyTypeObject callback_type = PL_PY_CALLBACK_TYPE("coprof.step_callback");

/* asyncio.events.Handle._run's code object (a new reference), when asyncio is
 * loaded; NULL otherwise. Imports nothing. */
static PyObject *handle_run_code(void)
{
	PyObject *name = PyUnicode_FromString("asyncio.events");
	PyObject *m = name ? PyImport_GetModule(name) : NULL;
	PyObject *h = m ? PyObject_GetAttrString(m, "Handle") : NULL;
	PyObject *run = h ? PyObject_GetAttrString(h, "_run") : NULL;
	PyObject *code = run && PyFunction_Check(run) ? Py_NewRef(PyFunction_GET_CODE(run)) : NULL;
	Py_XDECREF(run);
	Py_XDECREF(h);
	Py_XDECREF(m);
	Py_XDECREF(name);
	PyErr_Clear();
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

void pl_pys_steps_install(void)
{
}

#endif
