/* gil.c: when and how the shim's control thread takes the GIL.
 *
 * When: only while Python can hand it over. A thread that waits for the GIL once
 * Python finalizes is ended by Python on the spot: the control thread would die
 * holding the shim's lock, and the exit dump would wait for it forever. So the control
 * thread takes the GIL only under `gate` and while `closed` is 0, and an atexit
 * callback, which Python runs before it finalizes, sets `closed` under that mutex.
 *
 * How: without being starved. A thread waiting for the GIL sleeps for the switch
 * interval (5 ms by default) and asks the holder to let go only when it wakes by
 * timeout and no other thread took the GIL meanwhile. But every release wakes it
 * early, and the holder takes the GIL back before it can. So a thread that drops and
 * retakes the GIL more often than every 5 ms (a loop polling select(..., 0), a socket
 * read that never blocks) starved the control thread: it waited for seconds, for whole
 * toggle windows, which then held nothing. So while the control thread waits, the
 * interval is NUDGE_US: its waits time out before the holder's next release, it asks,
 * and the holder, once asked, does not take the GIL back before another thread has had
 * it. The interval is put back as soon as the control thread holds the GIL, unless the
 * program set another one meanwhile. */
#include <pthread.h>

#include "py.h"

#if PY_VERSION_HEX < 0x030C0000
#include <internal/pycore_runtime.h>
#else
#include <internal/pycore_interp.h>
#endif

#define NUDGE_US 50UL

static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static int closed; /* Python is about to finalize: the GIL is not to be waited for */

static PyObject *at_python_exit(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	Py_BEGIN_ALLOW_THREADS /* a control thread waiting for the GIL finishes first */
	    pthread_mutex_lock(&gate);
	closed = 1;
	pthread_mutex_unlock(&gate);
	Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

static PyMethodDef exit_def = {"coprof_at_exit", at_python_exit, METH_NOARGS, NULL};

/* Registered first, so it runs after the program's own atexit callbacks. */
void pl_py_gil_at_main(void)
{
	struct pl_py_exc saved;
	pl_py_exc_save(&saved);
	PyObject *mod = PyImport_ImportModule("atexit");
	PyObject *fn = PyCFunction_New(&exit_def, NULL);
	PyObject *r = mod && fn ? PyObject_CallMethod(mod, "register", "O", fn) : NULL;
	if (!r)
		pl_py_host->say("cannot register with atexit; a toggle at exit may hang");
	Py_XDECREF(r);
	Py_XDECREF(fn);
	Py_XDECREF(mod);
	pl_py_exc_restore(&saved);
}

void pl_py_gil_after_fork_child(void)
{
	pthread_mutex_init(&gate, NULL);
}

/* Python can take the GIL from another thread: initialised, not finalizing, and a
 * thread of the program still has a thread state. When the last one has gone (a
 * thread that forked returned in the child, which then exits as glibc ends a process
 * whose last thread leaves), PyGILState_Ensure would make the interpreter's first
 * thread state again, which in a forked child is the parent's main thread's, still
 * marked in use: 3.12 aborts ("init_threadstate: thread state already initialized",
 * CPython's test_3_join_in_forked_from_thread). No Python code runs any more then:
 * there is nothing to hook or unhook. */
static int alive(void)
{
#if PY_VERSION_HEX >= 0x030D0000
	if (!Py_IsInitialized() || Py_IsFinalizing())
		return 0;
#else
	if (!Py_IsInitialized() || _Py_IsFinalizing())
		return 0;
#endif
	return PyInterpreterState_ThreadHead(PyInterpreterState_Main()) != NULL;
}

static struct _gil_runtime_state *the_gil(void)
{
#if PY_VERSION_HEX >= 0x030C0000
	return PyInterpreterState_Main()->ceval.gil;
#else
	return &_PyRuntime.ceval.gil;
#endif
}

int pl_py_gil_take(PyGILState_STATE *st)
{
	pthread_mutex_lock(&gate);
	if (closed || !alive()) {
		pthread_mutex_unlock(&gate);
		return -1;
	}
	struct _gil_runtime_state *g = the_gil();
	unsigned long was = __atomic_load_n(&g->interval, __ATOMIC_RELAXED);
	int nudged =
	    was > NUDGE_US && __atomic_compare_exchange_n(&g->interval, &was, NUDGE_US, 0,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	*st = PyGILState_Ensure();
	unsigned long ours = NUDGE_US;
	if (nudged)
		__atomic_compare_exchange_n(&g->interval, &ours, was, 0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
	return 0;
}

void pl_py_gil_give(PyGILState_STATE st)
{
	PyGILState_Release(st);
	pthread_mutex_unlock(&gate);
}
