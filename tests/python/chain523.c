/* chain523.c: a PEP 523 user for progs/chained_slot.py, as a debugger or tracer is
 * one: install() keeps the frame-evaluation function it finds in the interpreter's
 * slot and puts its own there, which calls the kept one; uninstall() puts the kept
 * one back. slot() names what the slot holds: "mine", "default" or "other". Built
 * per Python 3.10 and 3.11 (tests/python/meson.build), loaded from its path. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static _PyFrameEvalFunction kept;

#if PY_VERSION_HEX >= 0x030B0000
static PyObject *mine(PyThreadState *ts, struct _PyInterpreterFrame *fr, int throwflag)
#else
static PyObject *mine(PyThreadState *ts, PyFrameObject *fr, int throwflag)
#endif
{
	return kept(ts, fr, throwflag);
}

static PyInterpreterState *interp(void)
{
	return PyThreadState_GetInterpreter(PyThreadState_Get());
}

static PyObject *install(PyObject *self, PyObject *unused)
{
	kept = _PyInterpreterState_GetEvalFrameFunc(interp());
	_PyInterpreterState_SetEvalFrameFunc(interp(), mine);
	Py_RETURN_NONE;
}

static PyObject *uninstall(PyObject *self, PyObject *unused)
{
	_PyInterpreterState_SetEvalFrameFunc(interp(), kept);
	Py_RETURN_NONE;
}

static PyObject *slot(PyObject *self, PyObject *unused)
{
	_PyFrameEvalFunction f = _PyInterpreterState_GetEvalFrameFunc(interp());
	return PyUnicode_FromString(f == mine				  ? "mine"
				    : !f || f == _PyEval_EvalFrameDefault ? "default"
									  : "other");
}

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS, "Puts mine in the slot, chaining to what was there."},
    {"uninstall", uninstall, METH_NOARGS, "Puts back what install() found."},
    {"slot", slot, METH_NOARGS, "What the slot holds: 'mine', 'default' or 'other'."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "chain523",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit_chain523(void);

PyMODINIT_FUNC PyInit_chain523(void)
{
	return PyModule_Create(&module);
}
