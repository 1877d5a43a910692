/* aio.c: asyncio's objects as coprof reads them, through their C layout: a scheduled
 * callback's task, a task's coroutine, a handle's callback and a callback's name. The
 * trace hook (hook/ready.c) and sample mode (sampling/steps.c) read the same handles.
 *
 * No Python code runs and nothing is allocated, but once per process, when a type's
 * descriptor is looked up (the task's get_coro, a handle's slots). GIL held. */
#include <stddef.h>
#include <string.h>

#include "py.h"

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

/* The step wrapper's type once seen: "TaskStepMethWrapper" up to 3.11, a heap type
 * "_asyncio.TaskStepMethWrapper" since. */
static PyTypeObject *step_type;

/* The type that declares a handle's `_callback` slot (Handle; TimerHandle inherits
 * it), and the slot's offset: 0, not found yet; -1, never. */
static PyTypeObject *handle_type;
static Py_ssize_t callback_at;

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

PyObject *pl_py_aio_task_of(PyObject *cb)
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

PyObject *pl_py_aio_task_coro(PyObject *task)
{
	if (!coro_at)
		find_coro(task);
	return coro_at > 0 ? *(PyObject **)((char *)task + coro_at) : NULL;
}

Py_ssize_t pl_py_aio_slot(PyTypeObject *type, const char *name, PyTypeObject **owner)
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

PyObject *pl_py_aio_handle_callback(PyObject *h)
{
	if (!callback_at) {
		callback_at = pl_py_aio_slot(Py_TYPE(h), "_callback", &handle_type);
		if (callback_at > 0 && !handle_type)
			callback_at = -1;
	}
	if (callback_at < 0 || !PyObject_TypeCheck(h, handle_type))
		return NULL;
	return *(PyObject **)((char *)h + callback_at);
}

void pl_py_aio_callback_name(PyObject *cb, char *buf, size_t len)
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

/* The object in slot `at` of o (borrowed), or NULL. */
static PyObject *slot_of(PyObject *o, Py_ssize_t at)
{
	return at > 0 ? *(PyObject **)((char *)o + at) : NULL;
}

/* Where a handle keeps its loop and its cancelled flag: 0, not found yet; -1, never. */
static Py_ssize_t loop_at, cancelled_at;

PyObject *pl_py_aio_handle_loop(PyObject *h)
{
	if (!pl_py_aio_handle_callback(h)) /* not a handle (and handle_type unknown) */
		return NULL;
	if (!loop_at)
		loop_at = pl_py_aio_slot(handle_type, "_loop", NULL);
	if (!cancelled_at)
		cancelled_at = pl_py_aio_slot(handle_type, "_cancelled", NULL);
	return cancelled_at > 0 ? slot_of(h, loop_at) : NULL;
}

/* The timer handle type once seen, and where it keeps `_when`: 0, not found yet; -1,
 * never. */
static PyTypeObject *timer_type;
static Py_ssize_t when_at;

double pl_py_aio_timer_when(PyObject *h)
{
	if (!timer_type && strcmp(Py_TYPE(h)->tp_name, "TimerHandle") == 0) {
		timer_type = Py_TYPE(h);
		when_at = pl_py_aio_slot(timer_type, "_when", NULL);
	}
	PyObject *when = Py_TYPE(h) == timer_type ? slot_of(h, when_at) : NULL;
	return when && PyFloat_CheckExact(when) ? PyFloat_AS_DOUBLE(when) : -1.0;
}

int pl_py_aio_behind(PyObject *loop, double now)
{
	if (cancelled_at <= 0)
		return -1;
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	int n = 0;
	/* The timers that fell due before now, which the loop has not moved to the ready
	 * queue yet: each counts as the task it wakes (an asyncio.sleep's). */
	PyObject *due = PyObject_GetAttrString(loop, "_scheduled");
	for (Py_ssize_t i = 0; due && PyList_Check(due) && i < PyList_GET_SIZE(due); i++) {
		PyObject *th = PyList_GET_ITEM(due, i);
		double when = pl_py_aio_timer_when(th);
		n += when >= 0 && when <= now && slot_of(th, cancelled_at) != Py_True;
	}
	/* The ready queue: a task's step or wakeup, or a timer moved there (due). A
	 * timer is known by its when (which learns its type: a count whose timers were all
	 * in the ready queue, none scheduled, found none of them before). */
	PyObject *ready = PyObject_GetAttrString(loop, "_ready");
	PyObject *it = ready ? PyObject_GetIter(ready) : NULL, *x;
	while (it && (x = PyIter_Next(it))) {
		PyObject *cb = pl_py_aio_handle_callback(x);
		n += cb && slot_of(x, cancelled_at) != Py_True &&
		     (pl_py_aio_timer_when(x) >= 0 || pl_py_aio_task_of(cb));
		Py_DECREF(x);
	}
	Py_XDECREF(due);
	Py_XDECREF(it);
	Py_XDECREF(ready);
	PyErr_Clear();
	pl_py_exc_restore(&e);
	return n;
}
