/* noop-hook.c: the floor of the CPython trace benchmark (bench/python/pyperf.py): a
 * C hook on the same backend coprof uses that does nothing. `profile()` puts a no-op
 * profile function on the calling thread (3.10/3.11: what coprof's adapter uses);
 * `evalframe()` puts a PEP 523 frame-evaluation function on the interpreter that only
 * calls the default one (3.10/3.11: COPROF_PY_HOOK=evalframe); `nothing` is a no-op
 * callable to register as a sys.monitoring callback (3.12+), called as coprof's are: an
 * object whose vectorcall is the callback (no builtin function's call protocol around
 * it, the cheapest call sys.monitoring can make). Built per interpreter by
 * the bench script; imported by its wrapper, in the benchmark's worker process, with the GIL held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../../preload/python/callback.h"

static int noop_event(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
	(void)obj;
	(void)frame;
	(void)what;
	(void)arg;
	return 0;
}

static PyObject *noop_profile(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	PyEval_SetProfile(noop_event, NULL);
	Py_RETURN_NONE;
}

#if PY_VERSION_HEX < 0x030C0000
#if PY_VERSION_HEX >= 0x030B0000
#define NOOP_FRAME struct _PyInterpreterFrame
#else
#define NOOP_FRAME PyFrameObject
#endif

static PyObject *noop_eval(PyThreadState *ts, NOOP_FRAME *frame, int throwflag)
{
	return _PyEval_EvalFrameDefault(ts, frame, throwflag);
}

static PyObject *noop_evalframe(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	_PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), noop_eval);
	Py_RETURN_NONE;
}
#endif

static PyObject *noop_nothing(PyObject *self, PyObject *const *args, size_t nargsf,
			      PyObject *kwnames)
{
	(void)self;
	(void)args;
	(void)nargsf;
	(void)kwnames;
	Py_RETURN_NONE;
}

static PyTypeObject noop_callback_type = PL_PY_CALLBACK_TYPE("coprof_noop.callback");

static PyMethodDef noop_methods[] = {
    {"profile", noop_profile, METH_NOARGS, "Set a no-op C profile function on this thread."},
#if PY_VERSION_HEX < 0x030C0000
    {"evalframe", noop_evalframe, METH_NOARGS,
     "Set a no-op frame-evaluation function on this interpreter."},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef noop_module = {
    PyModuleDef_HEAD_INIT,
    "coprof_noop",
    "The floor of coprof's trace benchmark.",
    -1,
    noop_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit_coprof_noop(void)
{
	PyObject *m = PyModule_Create(&noop_module);
	PyObject *cb = m ? pl_py_callback_new(&noop_callback_type, noop_nothing) : NULL;
	if (!cb)
		return NULL;
	if (PyModule_AddObject(m, "nothing", cb) != 0)
		return NULL;
	return m;
}
