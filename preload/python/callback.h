/* callback.h: a Python callable whose vectorcall is a C function, called by CPython
 * with nothing around it (a builtin function's call protocol fetches the thread state
 * and counts a C recursion level first). What coprof registers with sys.monitoring,
 * and what the floor of its trace benchmark registers (bench/python/noop-hook.c), so
 * that both are called the same way. Needs Python.h; header-only, so that a module
 * built alone can include it. */
#ifndef PL_PY_CALLBACK_H
#define PL_PY_CALLBACK_H

#include <stddef.h>

struct pl_py_callback {
	PyObject_HEAD vectorcallfunc call;
};

/* A static initialiser of the callbacks' type, called `name`. */
#define PL_PY_CALLBACK_TYPE(name)                                                                  \
	{                                                                                          \
		PyVarObject_HEAD_INIT(NULL, 0).tp_name = (name),                                   \
					    .tp_basicsize = sizeof(struct pl_py_callback),         \
					    .tp_flags =                                            \
						Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,   \
					    .tp_vectorcall_offset =                                \
						offsetof(struct pl_py_callback, call),             \
					    .tp_call = PyVectorcall_Call,                          \
	}

/* A new callback of `type` (made by PL_PY_CALLBACK_TYPE) that runs fn; NULL with an
 * error set. GIL held. */
static inline PyObject *pl_py_callback_new(PyTypeObject *type, vectorcallfunc fn)
{
	if (PyType_Ready(type) != 0)
		return NULL;
	struct pl_py_callback *cb = PyObject_New(struct pl_py_callback, type);
	if (cb)
		cb->call = fn;
	return (PyObject *)cb;
}

#endif
