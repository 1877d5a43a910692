/* fork.c: keeps os.fork quiet. Python 3.12+ warns, in the parent of os.fork, when the
 * process has more than one thread (it reads /proc/self/stat), and the shim's control
 * thread (and the sampler's folding thread) would count. So the adapter registers
 * callbacks with os.register_at_fork that stop those threads before the fork and start
 * them again after it. They run in the forking thread with the GIL held, and release
 * it while the shim waits, since the control thread may be waiting for it.
 *
 * 3.12 counts between the 'before' and the 'after_in_parent' callbacks; 3.13 counts
 * after the 'after_in_parent' ones, so there the parent's threads start again from a
 * pending call that the forking thread runs once os.fork has returned. */
#include <stdlib.h>

#include "py.h"

/* Calls the shim's pause or resume with the GIL released. */
static void without_gil(void (*fn)(void))
{
	PyThreadState *ts = PyEval_SaveThread();
	fn();
	PyEval_RestoreThread(ts);
}

static void resume_now(void)
{
	without_gil(pl_py_host->fork_resume);
}

#if PY_VERSION_HEX >= 0x030C0000
#include <internal/pycore_interp.h>

/* The interpreter was not finalizing when before_fork let the GIL go: copied into
 * the child by the fork. */
static int fork_unfinalized;
#endif

static PyObject *before_fork(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
#if PY_VERSION_HEX >= 0x030C0000
	fork_unfinalized = !PyThreadState_GetInterpreter(PyThreadState_Get())->finalizing;
#endif
	without_gil(pl_py_host->fork_pause);
	Py_RETURN_NONE;
}

/* In the child, after Python re-made its state there. While before_fork let the GIL
 * go, the main thread may have reached Py_Finalize, which on 3.12 marks the
 * interpreter finalizing before it waits for the other threads (one of them this
 * forking one): without coprof the fork would have come first, so the child, whose
 * only thread is this one, would not refuse new threads ("can't create new thread at
 * interpreter shutdown": CPython's test_3_join_in_forked_from_thread). */
static PyObject *after_fork_child(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
#if PY_VERSION_HEX >= 0x030C0000
	PyInterpreterState *in = PyThreadState_GetInterpreter(PyThreadState_Get());
	if (fork_unfinalized && in->finalizing && !_PyInterpreterState_GetFinalizing(in))
		in->finalizing = 0;
#endif
	resume_now();
	Py_RETURN_NONE;
}

#if PY_VERSION_HEX >= 0x030D0000
PyAPI_FUNC(int)
    _PyEval_AddPendingCall(PyInterpreterState *interp, int (*func)(void *), void *arg, int flags);

#define MAX_REQUEUES 100000

/* One os.fork of the parent, waiting for its thread to leave os.fork. */
struct later {
	PyThreadState *ts;  /* the forking thread */
	PL_PY_FRAME *frame; /* the frame that called os.fork */
	PyCodeObject *code; /* its code (identity only): once that frame returned, its
			     * slot may hold another function's frame */
	unsigned requeues;
};

/* The forking thread runs inside os.fork's callbacks (other 'after_in_parent'
 * callbacks written in Python, which run before 3.13 counts the threads): its frame is
 * below the one that called os.fork. */
static int inside_fork(struct later *l)
{
	PL_PY_FRAME *f = l->ts->current_frame;
	if (f == l->frame)
		return 0;
	for (; f; f = f->previous)
		if (f == l->frame)
			return pl_py_frame_code(f) == l->code;
	return 0;
}

/* A pending call (GIL held, run between two bytecodes of some thread). In the forking
 * thread, still inside os.fork, it waits for the next turn; anywhere else it starts
 * the threads again. MAX_REQUEUES bounds the wait, come what may. */
static int resume_later(void *arg)
{
	struct later *l = arg;
	if (PyThreadState_Get() == l->ts && inside_fork(l) && ++l->requeues < MAX_REQUEUES &&
	    _PyEval_AddPendingCall(l->ts->interp, resume_later, l, 0) == 0)
		return 0;
	free(l);
	resume_now();
	return 0;
}

static PyObject *after_fork_parent(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	PyThreadState *ts = PyThreadState_Get();
	struct later *l = malloc(sizeof(*l));
	if (l) {
		PL_PY_FRAME *f = ts->current_frame;
		*l = (struct later){.ts = ts, .frame = f, .code = f ? pl_py_frame_code(f) : NULL};
		if (_PyEval_AddPendingCall(ts->interp, resume_later, l, 0) == 0)
			Py_RETURN_NONE;
		free(l);
	}
	resume_now();
	Py_RETURN_NONE;
}
#else
/* In the parent, also when fork() failed (Python runs these callbacks then too). */
static PyObject *after_fork_parent(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	resume_now();
	Py_RETURN_NONE;
}
#endif

static PyMethodDef before_def = {"coprof_before_fork", before_fork, METH_NOARGS, NULL};
static PyMethodDef parent_def = {"coprof_after_fork_parent", after_fork_parent, METH_NOARGS, NULL};
static PyMethodDef child_def = {"coprof_after_fork_child", after_fork_child, METH_NOARGS, NULL};

/* Registers the callbacks, once, when the main module is about to run (the audit
 * hook, GIL held). Registered this early, 'before' runs after every other 'before'
 * callback, right before the fork. Python's own exception state is left as it was; a
 * failure only means forks may warn again. */
void pl_py_fork_register(void)
{
	static int done;
	if (done || !pl_py_host->fork_pause || !pl_py_host->fork_resume)
		return;
	done = 1;
	struct pl_py_exc saved;
	pl_py_exc_save(&saved);
	PyObject *posix = PyImport_ImportModule("posix");
	PyObject *reg = posix ? PyObject_GetAttrString(posix, "register_at_fork") : NULL;
	PyObject *before = PyCFunction_New(&before_def, NULL);
	PyObject *parent = PyCFunction_New(&parent_def, NULL);
	PyObject *child = PyCFunction_New(&child_def, NULL);
	PyObject *args = PyTuple_New(0);
	PyObject *kw = NULL;
	if (before && parent && child)
		kw = Py_BuildValue("{s:O,s:O,s:O}", "before", before, "after_in_parent", parent,
				   "after_in_child", child);
	PyObject *r = reg && args && kw ? PyObject_Call(reg, args, kw) : NULL;
	if (!r)
		pl_py_host->say("cannot register with os.register_at_fork; os.fork may warn "
				"that the process is multi-threaded");
	Py_XDECREF(r);
	Py_XDECREF(kw);
	Py_XDECREF(args);
	Py_XDECREF(child);
	Py_XDECREF(parent);
	Py_XDECREF(before);
	Py_XDECREF(reg);
	Py_XDECREF(posix);
	pl_py_exc_restore(&saved);
}
