/* ready.c: when an asyncio task can run again (doc/design.md rule 12), seen where
 * asyncio's own loop schedules it: BaseEventLoop._call_soon (behind call_soon and
 * call_soon_threadsafe), when its callback is a task's step or wakeup, and
 * Handle._run, whose timer handle says when it fell due. A task whose timer fell due
 * while the loop was busy was ready from then: its wakeup, scheduled once the loop got
 * to the timer, counts back by the timer's lateness. uvloop and other loops written in
 * C schedule without Python frames: their tasks have no ready time.
 *
 * Reads objects only, through their C layout: no Python code runs, nothing is
 * allocated, but once per process, when Task.get_coro is asked once where a C Task
 * keeps its coroutine. GIL held, in the hook's thread. */
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

/* Where a handle type keeps `_when`, from its member descriptor. */
static void find_when(PyTypeObject *type)
{
	struct pl_py_exc e;
	when_at = -1;
	pl_py_exc_save(&e);
	PyObject *d = PyObject_GetAttrString((PyObject *)type, "_when");
	if (d && Py_IS_TYPE(d, &PyMemberDescr_Type)) {
		PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
		if (m->type == T_OBJECT || m->type == T_OBJECT_EX)
			when_at = m->offset;
	}
	Py_XDECREF(d);
	PyErr_Clear();
	pl_py_exc_restore(&e);
}

/* Handle._run(self) has started in frame fr: a timer handle's lateness, the time since
 * it fell due, is what its callback's wakeups count back. */
static void handle_run(struct pl_py_thread *pt, PL_PY_FRAME *fr)
{
	PyObject *h = pl_py_frame_arg(fr, 0);
	pt->late = 0;
	if (!h)
		return;
	if (!timer_type && strcmp(Py_TYPE(h)->tp_name, "TimerHandle") == 0) {
		timer_type = Py_TYPE(h);
		find_when(timer_type);
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
