/* mon.c: sys.monitoring (CPython 3.12+) as coprof calls it: for the trace hook's
 * backend (hook/backend-monitoring.c) and sample mode's loop steps (sampling/steps.c),
 * which never run in one process together. GIL held. */
#include <errno.h>
#include <stdarg.h>

#include "py.h"

#if PY_VERSION_HEX >= 0x030C0000

long pl_py_mon_event(PyObject *mon, const char *name)
{
	PyObject *evs = PyObject_GetAttrString(mon, "events");
	PyObject *v = evs ? PyObject_GetAttrString(evs, name) : NULL;
	long bit = v && PyLong_Check(v) ? PyLong_AsLong(v) : -1;
	Py_XDECREF(v);
	Py_XDECREF(evs);
	PyErr_Clear();
	return bit;
}

int pl_py_mon_call(PyObject *mon, const char *fn, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	PyObject *args = Py_VaBuildValue(fmt, ap);
	va_end(ap);
	PyObject *f = args ? PyObject_GetAttrString(mon, fn) : NULL;
	PyObject *r = f ? PyObject_Call(f, args, NULL) : NULL;
	int rc = r ? 0 : -EINVAL;
	Py_XDECREF(r);
	Py_XDECREF(f);
	Py_XDECREF(args);
	PyErr_Clear();
	return rc;
}

int pl_py_mon_claim(PyObject *mon, int local)
{
	/* 0-2 are debugger, coverage and profiler (cProfile uses 2), 5 the optimizer's.
	 * CPython's test_monitoring takes 2, 3 and 4 for its own and wants no tool's
	 * global events on: a tool of local events only starts at 5, which no tool of
	 * CPython's or of the common ones claims. */
	static const int global[] = {3, 4, -1}, only_local[] = {5, 4, 3, -1};
	for (const int *id = local ? only_local : global; *id >= 0; id++)
		if (pl_py_mon_call(mon, "use_tool_id", "(is)", *id, "coprof") == 0)
			return *id;
	return -1;
}

#endif
