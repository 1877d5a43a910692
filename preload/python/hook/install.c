/* install.c: which backend carries the hook's events, and putting it on and off
 * (hook.h): sys.monitoring on 3.12+, the frame-evaluation function on 3.10 and 3.11,
 * the profile function where those cannot serve or COPROF_PY_HOOK asks for it. Runs
 * with the GIL held: in the audit hook, in the shim's control thread (attach.c), and at
 * an event of the profile backend's when a thread was started. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>

#include "hook.h"

/* COPROF_PY_HOOK=auto on 3.12+: sys.monitoring when nonzero. Chosen by measurement
 * (bench/python/bench.py, bench/RESULTS.md). */
#define AUTO_MONITORING 1

int pl_py_new_threads;
int pl_py_installed;

static int monitoring; /* the sys.monitoring backend is the one on */

enum { B_PROFILE, B_MONITORING, B_EVALFRAME };

/* B_*, or -ENOTSUP: none (asked for sys.monitoring before 3.12, said once). auto on
 * 3.10 and 3.11: the frame-evaluation function, unless builtins are keyed (it sees no C
 * call). Chosen by measurement (bench/RESULTS.md, issue 16). */
static int backend(void)
{
	enum pl_py_hook h = pl_py_host->hook;
#if PY_VERSION_HEX >= 0x030C0000
	if (h == PL_PY_HOOK_EVALFRAME) {
		static int said;
		if (!said)
			pl_py_host->say("COPROF_PY_HOOK=evalframe is for Python 3.10 and 3.11 "
					"(this is %d.%d); profiling through %s instead",
					PY_MAJOR_VERSION, PY_MINOR_VERSION,
					AUTO_MONITORING ? "sys.monitoring"
							: "the profile function");
		said = 1;
		h = PL_PY_HOOK_AUTO;
	}
	return h == PL_PY_HOOK_MONITORING || (h == PL_PY_HOOK_AUTO && AUTO_MONITORING)
		   ? B_MONITORING
		   : B_PROFILE;
#else
	static int said;
	if (h == PL_PY_HOOK_AUTO)
		return pl_py_host->builtins ? B_PROFILE : B_EVALFRAME;
	if (h == PL_PY_HOOK_EVALFRAME) {
		if (!pl_py_host->builtins)
			return B_EVALFRAME;
		if (!said)
			pl_py_host->say("COPROF_PY_HOOK=evalframe does not see C builtins, which "
					"COPROF_BUILTINS=1 asks for; profiling through the profile "
					"function instead");
		said = 1;
		return B_PROFILE;
	}
	if (h != PL_PY_HOOK_MONITORING)
		return B_PROFILE;
	if (!said)
		pl_py_host->say("COPROF_PY_HOOK=monitoring needs Python 3.12 or later (this is "
				"%d.%d); Python is not profiled",
				PY_MAJOR_VERSION, PY_MINOR_VERSION);
	said = 1;
	return -ENOTSUP;
#endif
}

/* The backend in use, in the profile's notes: at each window's start (a window may
 * find another frame-evaluation function in the slot where the last one did not, or
 * coprof's own put back), and for a new profiler (a forked child's), not when a thread
 * started later is hooked (after a hand-over the window still began under evalframe). */
static void note_backend(int starting)
{
	static struct coprof *noted;
	struct coprof *p = *pl_py_host->prof;
	if (!p || (p == noted && !starting))
		return;
	noted = p;
	(void)coprof_replace_note(p, "python hook: ",
				  pl_py_evalframe_on
				      ? "python hook: evalframe (PEP 523 frame evaluation)"
				  : monitoring ? "python hook: monitoring (sys.monitoring)"
					       : "python hook: profile (the profile function)");
}

void pl_py_install(PyThreadState *skip)
{
	int starting = !pl_py_installed;
	int b = backend();
	if (b < 0)
		return;
	if (b == B_EVALFRAME && pl_py_evalframe_handed)
		b = B_PROFILE;
	monitoring = 0;
	pl_py_evalframe_on = 0;
	int tls_ok = b != B_PROFILE && pl_py_tls_ready();
	if (b == B_MONITORING) {
		/* No tool id free: said once, and the profile function does the work. */
		monitoring = tls_ok && pl_py_monitor_start() == 0;
	} else if (b == B_EVALFRAME) {
		/* Another frame-evaluation function is in the slot (a debugger's, a
		 * JIT's): it stays, and the profile function does the work; said once
		 * when COPROF_PY_HOOK=evalframe asked for this one. */
		static int said;
		pl_py_evalframe_on = tls_ok && pl_py_evalframe_start() == 0;
		if (!pl_py_evalframe_on && pl_py_host->hook == PL_PY_HOOK_EVALFRAME && !said) {
			said = 1;
			pl_py_host->say("COPROF_PY_HOOK=evalframe: %s; profiling through the "
					"profile function instead",
					tls_ok ? "another frame-evaluation function is installed"
					       : "no thread-local storage");
		}
	}
	if (!monitoring && !pl_py_evalframe_on)
		pl_py_profile_install(skip);
	note_backend(starting);
	__atomic_store_n(&pl_py_installed, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&pl_py_new_threads, 0, __ATOMIC_RELEASE);
}

void pl_py_remove(void)
{
	pl_py_watch_all();
	if (monitoring)
		pl_py_monitor_stop();
	else if (pl_py_evalframe_on)
		pl_py_evalframe_stop();
	else
		pl_py_profile_remove();
	pl_py_evalframe_on = 0; /* a PEP 523 user that chains to eval() finds it silent */
	pl_py_evalframe_handed = 0;
	pl_py_installed = 0;
}

struct pl_py_thread *pl_py_thread_self(void)
{
	if (!pl_py_installed)
		return NULL;
	if (monitoring || pl_py_evalframe_on)
		return thread_current();
	return thread_ready(pl_py_profile_state(PyThreadState_Get()));
}
