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
 * Reads objects only, through their C layout (aio.c): no Python code runs, nothing is
 * allocated. GIL held, in the hook's thread. */
#include <stddef.h>

#include "hook.h"

/* _call_soon(self, callback, args, context) has started in frame fr. */
static void call_soon(struct pl_py_thread *pt, PL_PY_FRAME *fr)
{
	PyObject *cb = pl_py_frame_arg(fr, 1);
	PyObject *task = cb ? pl_py_aio_task_of(cb) : NULL;
	PyObject *coro = task ? pl_py_aio_task_coro(task) : NULL;
	if (!coro)
		return;
	uint64_t since = pt->late ? pl_py_monotonic_ns() - pt->late : 0;
	pl_py_task_ready(pt, coro, since);
}

/* The handle h asyncio runs now: a callback that is no task's step or wakeup begins a
 * step of the driver's (rule 11). */
static void callback_begin(struct pl_py_thread *pt, PyObject *h)
{
	PyObject *cb = pl_py_aio_handle_callback(h);
	if (!cb || pl_py_aio_task_of(cb))
		return;
	pl_py_aio_callback_name(cb, pt->cb_name, sizeof(pt->cb_name));
	pt->cb_open = 1;
	coprof_loop_step_begin(pt->t);
}

void pl_py_sched_return(struct pl_py_thread *pt)
{
	if (!pt->cb_open)
		return;
	pt->cb_open = 0;
	coprof_loop_step_end(pt->t, 0, pt->cb_name);
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
	double due = pl_py_aio_timer_when(h) * 1e9;
	if (due <= 0)
		return; /* no timer's */
	uint64_t now = pl_py_monotonic_ns();
	if (due < (double)now)
		pt->late = now - (uint64_t)due;
}

void pl_py_sched_event(struct pl_py_thread *pt, PL_PY_FRAME *fr, unsigned kind)
{
	if (kind == PL_PY_SCHED_CALL_SOON)
		call_soon(pt, fr);
	else if (kind == PL_PY_SCHED_RUN)
		handle_run(pt, fr);
}
