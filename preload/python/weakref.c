/* weakref.c: the weak references the adapter holds to the coroutines and greenlets it
 * follows, kept out of the host's garbage collector. */
#include "py.h"

#include <internal/pycore_interp.h>

PyObject *pl_py_weakref(PyObject *o)
{
	PyObject *ref = PyWeakref_NewRef(o, NULL);
	/* A count of 1: made now, not the basic reference someone else already holds
	 * (CPython shares it). */
	if (!ref || Py_REFCNT(ref) != 1 || !PyObject_GC_IsTracked(ref))
		return ref;
	/* It has no callback, so it refers to nothing: it cannot be part of a cycle, and
	 * the collector need not traverse it. Its allocation is taken back from the count
	 * that starts young collections, as a freed object's is. */
	PyObject_GC_UnTrack(ref);
	struct gc_generation *young = &PyThreadState_Get()->interp->gc.generations[0];
	if (young->count > 0)
		young->count--;
	return ref;
}
