/* backend-profile.c: the profile function backend: a C profile function
 * (Py_tracefunc) on every thread state of the interpreter, each carrying its own
 * struct pl_py_thread in a capsule as the function's argument, so the hot path finds
 * it without a lookup. Every Python version has it, and it alone sees C builtins
 * (COPROF_BUILTINS=1). A thread started later gets the hook at its creator's next
 * event, the return of the call that started it (pl_py_new_threads, install.c). Events run in the thread that runs the code,
 * GIL held; installing and removing hold the GIL too. */
#define _GNU_SOURCE
#include <stdlib.h>

#include "hook.h"

/* Not in the public headers of every version, exported by all of them. */
PyAPI_FUNC(int) _PyEval_SetProfile(PyThreadState *tstate, Py_tracefunc func, PyObject *arg);

/* _thread.start_new_thread: 3.10 and 3.11 raise no audit event when a thread starts,
 * so its return (the new thread state exists, this thread still holds the GIL) is
 * when the hook goes on the new thread. */
static PyMethodDef *start_thread_ml;

static void on_c_event(struct pl_py_thread *pt, int what, PyObject *callable)
{
	if (pl_py_unlikely(!pl_py_host->builtins))
		return;
	struct pl_py_func *fn = pl_py_builtin_of(callable, NULL);
	if (fn)
		pl_py_on_builtin(pt, what == PyTrace_C_CALL, fn);
}

/* A capsule's pointer is the first field after the object header in every version
 * (Objects/capsule.c); read directly when the first capsule made showed it there, else
 * through PyCapsule_GetPointer (a call into libpython and a name check per event). */
struct capsule_head {
	PyObject_HEAD void *pointer;
};
static int capsule_direct;

static inline void *capsule_pointer(PyObject *cap)
{
	return pl_py_likely(capsule_direct) ? ((struct capsule_head *)cap)->pointer
					    : PyCapsule_GetPointer(cap, NULL);
}

/* The profile function (Py_tracefunc). Never fails: profiling errors are not the
 * program's; it must not allocate on its common path (a cached function, an engine
 * call). */
static int on_event(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg)
{
	/* The C events, most of them when builtins are off: only a thread start's
	 * return matters then. On 3.10 and 3.11 that is start_new_thread's (no audit
	 * event); on 3.12+ (start_thread_ml stays NULL) the audit hook has flagged the
	 * start, and the C event right after it is that return: CPython may let the
	 * GIL go to the new thread before the creator's next Python event. */
	if (what >= PyTrace_C_CALL && !pl_py_host->builtins &&
	    !__atomic_load_n(&pl_py_new_threads, __ATOMIC_RELAXED) &&
	    (what != PyTrace_C_RETURN || !start_thread_ml || !PyCFunction_Check(arg) ||
	     ((PyCFunctionObject *)arg)->m_ml != start_thread_ml))
		return 0;
	struct pl_py_thread *pt = thread_ready(capsule_pointer(obj));
	if (pl_py_unlikely(!pt))
		return 0;
	pt->busy++;
	if (pl_py_unlikely(__atomic_load_n(&pl_py_new_threads, __ATOMIC_RELAXED))) {
		pl_py_install(NULL);
		if (thread_stale(pt))
			goto out;
	}
	switch (what) {
	case PyTrace_CALL:
		on_call(pt, pl_py_frame(frame), 1); /* a 'call' may be a throw() */
		break;
	case PyTrace_RETURN:
		on_return(pt, pl_py_frame(frame), arg);
		break;
	case PyTrace_C_RETURN:
		if (pl_py_unlikely(PyCFunction_Check(arg) &&
				   ((PyCFunctionObject *)arg)->m_ml == start_thread_ml))
			pl_py_install(NULL);
		/* fall through */
	case PyTrace_C_CALL:
	case PyTrace_C_EXCEPTION:
		on_c_event(pt, what, arg);
		break;
	}
out:
	if (--pt->busy == 0 && pt->dead)
		pl_py_thread_free(pt);
	return 0;
}

/* The hook came off pt's thread state. An event of that thread under way (it dropped
 * the GIL midway) still uses pt: it frees it as it ends. */
static void capsule_free(PyObject *cap)
{
	struct pl_py_thread *pt = PyCapsule_GetPointer(cap, NULL);
	if (pt && pt->busy)
		pt->dead = 1;
	else if (pt)
		pl_py_thread_free(pt);
}

/* Every thread state gets its own state object as the hook's argument, so the hot
 * path finds it without a lookup. A thread started later gets one when the audit
 * hook has flagged it (pl_py_new_threads) and the next event runs. */
#if PY_VERSION_HEX < 0x030C0000
static void find_start_thread(void)
{
	if (start_thread_ml)
		return;
	PyObject *name = PyUnicode_FromString("_thread");
	PyObject *mod = name ? PyImport_GetModule(name) : NULL;
	PyObject *fn = mod ? PyObject_GetAttrString(mod, "start_new_thread") : NULL;
	if (fn && PyCFunction_Check(fn))
		start_thread_ml = ((PyCFunctionObject *)fn)->m_ml;
	Py_XDECREF(fn);
	Py_XDECREF(mod);
	Py_XDECREF(name);
	PyErr_Clear();
}
#endif

/* The first thread state of `in` that needs the hook put on (on nonzero: it has no
 * profile function) or taken off (it has coprof's), but `skip`; NULL: none left. A
 * profile function of the program's own (sys.setprofile, cProfile) is never replaced
 * nor removed. The list is walked afresh each time: setting the profile function of
 * one thread state may drop the GIL (a finalizer run by the old profile object's
 * release), and any thread may have exited meanwhile. */
static PyThreadState *next_to_hook(PyInterpreterState *in, PyThreadState *skip, int on)
{
	for (PyThreadState *ts = PyInterpreterState_ThreadHead(in); ts; ts = PyThreadState_Next(ts))
		if (ts != skip && (on ? !ts->c_profilefunc : ts->c_profilefunc == on_event))
			return ts;
	return NULL;
}

unsigned pl_py_profile_foreign(PyInterpreterState *in)
{
	unsigned n = 0;
	for (PyThreadState *ts = PyInterpreterState_ThreadHead(in); ts; ts = PyThreadState_Next(ts))
		n += ts->c_profilefunc && ts->c_profilefunc != on_event;
	return n;
}

/* _PyEval_SetProfile(ts) raises the audit event "sys.setprofile" first, and the
 * program's audit hooks written in Python may drop the GIL there (sleep, I/O): `ts`'s
 * thread could then exit and free it under the call, or the control thread take this
 * thread's hook off under the event running now. So the hooks written in Python are
 * set aside while coprof sets its own profile function: they do not see coprof's
 * doing, as they would not without it. C hooks (the runtime's list) still run. */
static int set_profile(PyThreadState *ts, Py_tracefunc fn, PyObject *arg)
{
	PyInterpreterState *in = PyThreadState_GetInterpreter(PyThreadState_Get());
	PyObject *hooks = in->audit_hooks;
	in->audit_hooks = NULL;
	int rc = _PyEval_SetProfile(ts, fn, arg);
	PyObject *added = in->audit_hooks; /* by a finalizer run meanwhile: kept too */
	in->audit_hooks = hooks;
	if (added && hooks && PyList_Check(hooks) && PyList_Check(added)) {
		if (PyList_SetSlice(hooks, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, added) < 0)
			PyErr_Clear();
	} else if (added && !hooks) {
		in->audit_hooks = Py_NewRef(added);
	}
	Py_XDECREF(added);
	if (rc < 0)
		PyErr_Clear();
	return rc;
}

/* sys.getprofile() returns the thread's profile object whatever the function, so
 * under coprof's it returned coprof's capsule where the program expects None
 * (CPython's test_getprofile_all_threads). Put in its place once the profile backend
 * is first used: None where the profile function is coprof's, else what
 * sys.getprofile answers. */
static PyObject *orig_getprofile;

static PyObject *getprofile(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	PyThreadState *ts = PyThreadState_Get();
	if (ts->c_profilefunc == on_event)
		Py_RETURN_NONE;
	return PyObject_CallNoArgs(orig_getprofile);
}

static PyMethodDef getprofile_def = {"getprofile", getprofile, METH_NOARGS,
				     "getprofile()\n\nReturn the profiling function set with "
				     "sys.setprofile."};

static void wrap_getprofile(void)
{
	if (orig_getprofile)
		return;
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	PyObject *orig = PySys_GetObject("getprofile"); /* borrowed: held before replaced */
	Py_XINCREF(orig);
	PyObject *name = PyUnicode_FromString("sys");
	PyObject *ours = orig && name ? PyCFunction_NewEx(&getprofile_def, NULL, name) : NULL;
	if (ours && PySys_SetObject("getprofile", ours) == 0)
		orig_getprofile = orig;
	else
		Py_XDECREF(orig);
	Py_XDECREF(ours);
	Py_XDECREF(name);
	PyErr_Clear();
	pl_py_exc_restore(&e);
}

void pl_py_profile_install(PyThreadState *skip)
{
#if PY_VERSION_HEX < 0x030C0000
	find_start_thread();
#endif
	wrap_getprofile();
	PyInterpreterState *in = PyThreadState_GetInterpreter(PyThreadState_Get());
	for (PyThreadState *ts; (ts = next_to_hook(in, skip, 1));) {
		struct pl_py_thread *pt = calloc(1, sizeof(*pt));
		if (!pt)
			break;
		pt->gen = __atomic_load_n(&pl_py_gen, __ATOMIC_RELAXED) - 1;
		PyObject *cap = PyCapsule_New(pt, NULL, capsule_free);
		if (!cap) {
			free(pt);
			PyErr_Clear();
			break;
		}
		if (!capsule_direct)
			capsule_direct = ((struct capsule_head *)cap)->pointer == (void *)pt;
		int rc = set_profile(ts, on_event, cap);
		Py_DECREF(cap);
		if (rc < 0)
			break; /* a C audit hook refused it: so would it again */
	}
}

void pl_py_profile_remove(void)
{
	PyInterpreterState *in = PyThreadState_GetInterpreter(PyThreadState_Get());
	for (PyThreadState *ts; (ts = next_to_hook(in, NULL, 0));)
		if (set_profile(ts, NULL, NULL) < 0)
			break;
}

struct pl_py_thread *pl_py_profile_state(PyThreadState *ts)
{
	return ts->c_profilefunc == on_event && ts->c_profileobj ? capsule_pointer(ts->c_profileobj)
								 : NULL;
}
