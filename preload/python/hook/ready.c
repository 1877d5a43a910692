/* ready.c: asyncio's loop as the hook sees it at two of its Python functions.
 * BaseEventLoop._call_soon (behind call_soon and call_soon_threadsafe) schedules a
 * task's step or wakeup: the task is ready from then (doc/design.md rule 12).
 * Handle._run runs a handle: a timer handle says when it fell due, and a task whose
 * timer fell due while the loop was busy was ready from then (its wakeup, scheduled
 * once the loop got to the timer, counts back by the timer's lateness); a callback
 * that is no task's step (a protocol's data_received, a call_later callback) is a
 * step of the driver's until Handle._run returns, and may be a stall (rule 11).
 * uvloop and other loops written in C run without these Python frames: their tasks
 * have no ready time, their callbacks no steps.
 *
 * Reads objects only, through their C layout: no Python code runs, nothing is
 * allocated, but once per process, when Task.get_coro is asked once where a C Task
 * keeps its coroutine, and each slot's descriptor is looked up once. GIL held, in the
 * hook's thread. */
#include <stddef.h>

#include "hook.h"

#include <structmember.h>

/* asyncio's C Task type once seen, and the offset of its coroutine in it (0: not
 * found yet; -1: never). The step wrapper's layout (Modules/_asynciomodule.c, 3.10 to
 * 3.13): a head, then the task. */
static PyTypeObject *task_type;
static Py_ssize_t coro_at;
struct step_wrapper {
	PyObject_HEAD
	PyObject *task;
};

/* The timer handle type once seen, and where it keeps `_when` (a __slots__ member):
 * 0, not found yet; -1, never. */
static PyTypeObject *timer_type;
static Py_ssize_t when_at;

/* The type that declares a handle's `_callback` slot (Handle; TimerHandle inherits
 * it), and the slot's offset: 0, not found yet; -1, never. */
static PyTypeObject *handle_type;
static Py_ssize_t callback_at;

/* Finds where task_type keeps a task's coroutine: the one word of `task` equal to
 * what get_coro (a C method) returns. */
static void find_coro(PyObject *task)
{
	struct pl_py_exc e;
	coro_at = -1;
	pl_py_exc_save(&e);
	PyObject *m = PyObject_GetAttrString((PyObject *)task_type, "get_coro");
	PyObject *coro = m && Py_IS_TYPE(m, &PyMethodDescr_Type) ? PyObject_CallOneArg(m, task) : NULL;
	if (coro) {
		PyObject **w = (PyObject **)task;
		Py_ssize_t n = task_type->tp_basicsize / (Py_ssize_t)sizeof(PyObject *);
		for (Py_ssize_t i = sizeof(PyObject) / sizeof(PyObject *); i < n; i++)
			if (w[i] == coro) {
				coro_at = i * (Py_ssize_t)sizeof(PyObject *);
				break;
			}
	}
	Py_XDECREF(coro);
	Py_XDECREF(m);
	PyErr_Clear();
	pl_py_exc_restore(&e);
}

/* The step wrapper's type once seen: "TaskStepMethWrapper" up to 3.11, a heap type
 * "_asyncio.TaskStepMethWrapper" since. */
static PyTypeObject *step_type;

static int is_step_wrapper(PyObject *cb)
{
	if (step_type)
		return Py_TYPE(cb) == step_type;
	const char *n = Py_TYPE(cb)->tp_name;
	if (strncmp(n, "_asyncio.", 9) == 0)
		n += 9;
	if (strcmp(n, "TaskStepMethWrapper") != 0)
		return 0;
	step_type = Py_TYPE(cb);
	return 1;
}

/* The C Task a scheduled callback steps or wakes, or NULL: a builtin method bound to
 * a task (its wakeup), or the step wrapper. */
static PyObject *task_of(PyObject *cb)
{
	PyObject *task;
	if (PyCFunction_Check(cb))
		task = PyCFunction_GET_SELF(cb);
	else if (is_step_wrapper(cb))
		task = ((struct step_wrapper *)cb)->task;
	else
		return NULL;
	if (!task)
		return NULL;
	if (!task_type && strcmp(Py_TYPE(task)->tp_name, "_asyncio.Task") == 0)
		task_type = Py_TYPE(task);
	if (!task_type || !PyObject_TypeCheck(task, task_type))
		return NULL;
	return task;
}

/* _call_soon(self, callback, args, context) has started in frame fr. */
static void call_soon(struct pl_py_thread *pt, PL_PY_FRAME *fr)
{
	PyObject *cb = pl_py_frame_arg(fr, 1);
	PyObject *task = cb ? task_of(cb) : NULL;
	if (!task)
		return;
	if (!coro_at)
		find_coro(task);
	if (coro_at < 0)
		return;
	PyObject *coro = *(PyObject **)((char *)task + coro_at);
	if (!coro)
		return;
	uint64_t since = pt->late ? pl_py_monotonic_ns() - pt->late : 0;
	pl_py_task_ready(pt, coro, since);
}

/* Where `type` keeps the object slot `name`, from its member descriptor (-1: it has
 * none), and the type that declares it (in *owner, when not NULL). */
static Py_ssize_t find_slot(PyTypeObject *type, const char *name, PyTypeObject **owner)
{
	struct pl_py_exc e;
	Py_ssize_t at = -1;
	pl_py_exc_save(&e);
	PyObject *d = PyObject_GetAttrString((PyObject *)type, name);
	if (d && Py_IS_TYPE(d, &PyMemberDescr_Type)) {
		PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
		if (m->type == T_OBJECT || m->type == T_OBJECT_EX) {
			at = m->offset;
			if (owner)
				*owner = ((PyMemberDescrObject *)d)->d_common.d_type;
		}
	}
	Py_XDECREF(d);
	PyErr_Clear();
	pl_py_exc_restore(&e);
	return at;
}

/* A callback's name, for a stall's record: its function's qualified name (a bound
 * method's too), a builtin's name, else its type's. Reads only: no Python code runs. */
static void callback_name(PyObject *cb, char *buf, size_t len)
{
	const char *s = Py_TYPE(cb)->tp_name;
	if (PyMethod_Check(cb))
		cb = PyMethod_GET_FUNCTION(cb);
	if (PyFunction_Check(cb)) {
		PyObject *q = ((PyFunctionObject *)cb)->func_qualname;
		if (q && PyUnicode_Check(q) && PyUnicode_IS_COMPACT_ASCII(q))
			s = (const char *)PyUnicode_DATA(q);
	} else if (PyCFunction_Check(cb)) {
		s = ((PyCFunctionObject *)cb)->m_ml->ml_name;
	}
	size_t n = 0;
	for (; s[n] && n + 1 < len; n++)
		buf[n] = s[n];
	buf[n] = 0;
}

/* The handle h asyncio runs now: a callback that is no task's step or wakeup begins a
 * step of the driver's (rule 11). */
static void callback_begin(struct pl_py_thread *pt, PyObject *h)
{
	if (!callback_at) {
		callback_at = find_slot(Py_TYPE(h), "_callback", &handle_type);
		if (callback_at > 0 && !handle_type)
			callback_at = -1;
	}
	if (callback_at < 0 || !PyObject_TypeCheck(h, handle_type))
		return;
	PyObject *cb = *(PyObject **)((char *)h + callback_at);
	if (!cb || task_of(cb))
		return;
	callback_name(cb, pt->cb_name, sizeof(pt->cb_name));
	pt->cb_open = 1;
	coprof_callback_begin(pt->t);
}

void pl_py_sched_return(struct pl_py_thread *pt)
{
	if (!pt->cb_open)
		return;
	pt->cb_open = 0;
	coprof_callback_end(pt->t, pt->cb_name);
}

/* Handle._run(self) has started in frame fr: a timer handle's lateness, the time since
 * it fell due, is what its callback's wakeups count back; a callback that is no
 * task's begins a step. */
static void handle_run(struct pl_py_thread *pt, PL_PY_FRAME *fr)
{
	PyObject *h = pl_py_frame_arg(fr, 0);
	pt->late = 0;
	pt->cb_open = 0;
	if (!h)
		return;
	callback_begin(pt, h);
	if (!timer_type && strcmp(Py_TYPE(h)->tp_name, "TimerHandle") == 0) {
		timer_type = Py_TYPE(h);
		when_at = find_slot(timer_type, "_when", NULL);
	}
	if (Py_TYPE(h) != timer_type || when_at < 0)
		return;
	PyObject *when = *(PyObject **)((char *)h + when_at);
	if (!when || !PyFloat_CheckExact(when))
		return;
	double due = PyFloat_AS_DOUBLE(when) * 1e9;
	uint64_t now = pl_py_monotonic_ns();
	if (due > 0 && due < (double)now)
		pt->late = now - (uint64_t)due;
}

void pl_py_sched_event(struct pl_py_thread *pt, PL_PY_FRAME *fr, unsigned kind)
{
	if (kind == PL_PY_SCHED_CALL_SOON)
		call_soon(pt, fr);
	else if (kind == PL_PY_SCHED_RUN)
		handle_run(pt, fr);
}
