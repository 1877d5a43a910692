/* gil.c: the control thread takes the GIL without being starved.
 *
 * A thread waiting for the GIL sleeps for the switch interval (5 ms by default) and
 * asks the holder to let go only when it wakes by timeout and no other thread took the
 * GIL meanwhile. But every release wakes it early, and the holder takes the GIL back
 * before it can. So a thread that drops and retakes the GIL more often than every
 * 5 ms (a loop polling select(..., 0), a socket read that never blocks) starves the
 * control thread: it waited for seconds, for whole toggle windows, which then held
 * nothing.
 *
 * So while the control thread waits, the interval is NUDGE_US: its waits time out
 * before the holder's next release, it asks, and the holder, once asked, does not take
 * the GIL back before another thread has had it. The interval is put back as soon as
 * the control thread holds the GIL, unless the program set another one meanwhile. */
#include "py.h"

#if PY_VERSION_HEX < 0x030C0000
#include <internal/pycore_runtime.h>
#else
#include <internal/pycore_interp.h>
#endif

#define NUDGE_US 50UL

static struct _gil_runtime_state *the_gil(void)
{
#if PY_VERSION_HEX >= 0x030C0000
	return PyInterpreterState_Main()->ceval.gil;
#else
	return &_PyRuntime.ceval.gil;
#endif
}

PyGILState_STATE pl_py_gil_take(void)
{
	struct _gil_runtime_state *g = the_gil();
	unsigned long was = __atomic_load_n(&g->interval, __ATOMIC_RELAXED);
	int nudged =
	    was > NUDGE_US && __atomic_compare_exchange_n(&g->interval, &was, NUDGE_US, 0,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	PyGILState_STATE st = PyGILState_Ensure();
	unsigned long ours = NUDGE_US;
	if (nudged)
		__atomic_compare_exchange_n(&g->interval, &ours, was, 0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
	return st;
}
