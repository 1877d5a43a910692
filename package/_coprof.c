/* _coprof.c: coprof._coprof, the Python API's way into the shim. It binds to the
 * coprof_api_* doors of the shim the process already has preloaded, else dlopens the
 * package's own libcoprof-preload.so (whose constructor then does nothing:
 * lifecycle/api.c sets up at the first start). setup runs with the GIL held (the
 * CPython adapter attaches); start, stop, dump and clear release it, since the adapter
 * takes it to put its hook on and off and a toggle's control thread may hold the
 * shim's lock while it waits for it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stddef.h>

static struct {
	int (*setup)(int wall, int builtins, char *err, size_t errlen);
	unsigned (*state)(void);
	int (*start)(void);
	int (*stop)(const char *snap, int *dumped);
	int (*dump)(const char *path);
	int (*clear)(void);
	const char *(*strerror)(int rc);
} api;

/* Fills `api` from handle `h`: 0, or -1 when a door is missing. */
static int bind_from(void *h)
{
#define DOOR(field, name)                                                                          \
	if (!(*(void **)&api.field = dlsym(h, name)))                                              \
		return -1;
	DOOR(setup, "coprof_api_setup");
	DOOR(state, "coprof_api_state");
	DOOR(start, "coprof_api_start");
	DOOR(stop, "coprof_api_stop");
	DOOR(dump, "coprof_api_dump");
	DOOR(clear, "coprof_api_clear");
	DOOR(strerror, "coprof_api_strerror");
#undef DOOR
	return 0;
}

/* bind(shim_path) -> True when the process's preloaded shim is used, False when the
 * package's was loaded. OSError when neither can be. */
static PyObject *py_bind(PyObject *self, PyObject *args)
{
	const char *path;
	if (!PyArg_ParseTuple(args, "s", &path))
		return NULL;
	if (api.setup)
		return PyBool_FromLong(api.state() & 2u);
	if (dlsym(RTLD_DEFAULT, "coprof_api_setup") && bind_from(RTLD_DEFAULT) == 0)
		Py_RETURN_TRUE;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		PyErr_Format(PyExc_OSError, "cannot load %s: %s", path, dlerror());
		return NULL;
	}
	if (bind_from(h) != 0) {
		api.setup = NULL;
		PyErr_Format(PyExc_OSError,
			     "%s has no coprof_api_* entry points (another version?)", path);
		return NULL;
	}
	Py_RETURN_FALSE;
}

#define NEED_BIND()                                                                                \
	if (!api.setup) {                                                                          \
		PyErr_SetString(PyExc_RuntimeError, "coprof._coprof: bind() first");               \
		return NULL;                                                                       \
	}

/* setup(wall, builtins) -> 0, or raises ValueError (another clock) / RuntimeError. */
static PyObject *py_setup(PyObject *self, PyObject *args)
{
	int wall, builtins;
	char err[512];
	if (!PyArg_ParseTuple(args, "pp", &wall, &builtins))
		return NULL;
	NEED_BIND();
	int rc = api.setup(wall, builtins, err, sizeof(err));
	if (rc == -22) { /* -EINVAL: the profiler runs another clock */
		PyErr_SetString(PyExc_ValueError, err);
		return NULL;
	}
	if (rc != 0) {
		PyErr_Format(PyExc_RuntimeError, "coprof cannot profile this process: %s",
			     err[0] ? err : api.strerror(rc));
		return NULL;
	}
	Py_RETURN_NONE;
}

static PyObject *py_state(PyObject *self, PyObject *unused)
{
	NEED_BIND();
	return PyLong_FromUnsignedLong(api.state());
}

static PyObject *py_start(PyObject *self, PyObject *unused)
{
	NEED_BIND();
	int rc;
	Py_BEGIN_ALLOW_THREADS rc = api.start();
	Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}

/* api.stop (`dumped` not NULL) or api.dump on the file-system path `args` holds, the
 * GIL released: 0 and *rc, or -1 with an exception set (not bound, not a path). */
static int path_call(PyObject *args, int *dumped, int *rc)
{
	PyObject *path;
	if (!api.setup) {
		PyErr_SetString(PyExc_RuntimeError, "coprof._coprof: bind() first");
		return -1;
	}
	if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path))
		return -1;
	const char *p = PyBytes_AS_STRING(path);
	Py_BEGIN_ALLOW_THREADS *rc = dumped ? api.stop(p, dumped) : api.dump(p);
	Py_END_ALLOW_THREADS Py_DECREF(path);
	return 0;
}

/* stop(snapshot_path) -> (rc, dumped): rc 1 when nothing was running. */
static PyObject *py_stop(PyObject *self, PyObject *args)
{
	int rc, dumped = 0;
	return path_call(args, &dumped, &rc) ? NULL : Py_BuildValue("ii", rc, dumped);
}

static PyObject *py_dump(PyObject *self, PyObject *args)
{
	int rc;
	return path_call(args, NULL, &rc) ? NULL : PyLong_FromLong(rc);
}

static PyObject *py_clear(PyObject *self, PyObject *unused)
{
	NEED_BIND();
	int rc;
	Py_BEGIN_ALLOW_THREADS rc = api.clear();
	Py_END_ALLOW_THREADS return PyLong_FromLong(rc);
}

static PyObject *py_strerror(PyObject *self, PyObject *args)
{
	int rc;
	if (!PyArg_ParseTuple(args, "i", &rc))
		return NULL;
	NEED_BIND();
	return PyUnicode_FromString(api.strerror(rc));
}

static PyMethodDef methods[] = {
    {"bind", py_bind, METH_VARARGS, "bind(shim_path): use the preloaded shim, else load this one"},
    {"setup", py_setup, METH_VARARGS, "setup(wall, builtins): make sure a profiler exists"},
    {"state", py_state, METH_NOARGS, "bits: 1 set up, 2 preloaded, 4 running, 8 wall, 16 sample"},
    {"start", py_start, METH_NOARGS, "start a window: 0, 1 (one was open), or -errno"},
    {"stop", py_stop, METH_VARARGS, "stop(snapshot) -> (rc, dumped)"},
    {"dump", py_dump, METH_VARARGS, "dump(path): the profile so far: 0 or an error code"},
    {"clear", py_clear, METH_NOARGS, "forget what was recorded: 0 or an error code"},
    {"strerror", py_strerror, METH_VARARGS, "the message of an error code"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "coprof._coprof",
    "The coprof shim's doors for the Python API.",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__coprof(void);

PyMODINIT_FUNC PyInit__coprof(void)
{
	return PyModule_Create(&module);
}
