/* attach.c: the adapter's entry point (pl_py_attach, called by the shim's loader in its
 * constructor, before Python initialises), its audit hook, and start/stop.
 *
 * The audit hook runs in Python's threads with the GIL held: at cpython.run_* (the
 * main module is about to run) it registers fork.c's os.fork callbacks and puts the
 * profile hook on, so profiling starts at the main module's first line. Later starts
 * and stops come from the shim's control thread, which takes the GIL (gil.c). In
 * sample mode only the fork callbacks are registered, and the tick handler reads frames
 * through sampling/. The adapter inlines the engine's hot path (engine-inline.h): it
 * loads only next to the libcoprof.so built with the same layout of it. */
#include <errno.h>
#include <string.h>

#include "hook/hook.h"
#include "py.h"
#include "sampling/sampling.h"

#include <internal/pycore_runtime.h>

#if PY_VERSION_HEX < 0x030C0000
#define AUDIT_HEAD (_PyRuntime.audit_hook_head)
#else
#define AUDIT_HEAD (_PyRuntime.audit_hooks.head)
#endif

static int want;		 /* profiling is on for Python: start seen, no stop since */
static int main_started;	 /* the audit hook saw the main module start */
static struct coprof *resolving; /* the profiler our resolver was added to */
/* The raw allocator that made the audit hook's entry: the default one, before Python
 * chose its own (-X dev, PYTHONMALLOC=debug); and the entry, once unlinked. */
static PyMemAllocatorEx hook_alloc;
static _Py_AuditHookEntry *hook_entry;
static int audit(const char *event, PyObject *args, void *data);

static void ensure_resolver(void)
{
	struct coprof *p = *pl_py_host->prof;
	coprof_resolve_fn fn = pl_py_host->profile ? pl_py_resolve : pl_pys_resolve;
	if (p && p != resolving && coprof_add_resolver(p, fn, NULL) == 0)
		resolving = p;
}

/* Python frees its runtime's audit hooks as it finalizes, through the raw allocator
 * of that time. Ours was made in the shim's constructor, before Python set up its
 * allocators: under -X dev or PYTHONMALLOC=debug, freeing it through the debug one
 * aborts the process ("bad ID"). So when the hooks are about to be freed
 * (cpython._PySys_ClearAuditHooks, raised to every hook first), ours leaves the list
 * when the allocator changed since, and is freed at exit by the allocator that made
 * it. Unlinked, not freed yet: Python is walking the list through it now. */
static void audit_unlink(void)
{
	PyMemAllocatorEx now;
	PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &now);
	if (now.malloc == hook_alloc.malloc && now.free == hook_alloc.free &&
	    now.ctx == hook_alloc.ctx)
		return;
	for (_Py_AuditHookEntry **pp = &AUDIT_HEAD; *pp; pp = &(*pp)->next) {
		_Py_AuditHookEntry *e = *pp;
		if (e->hookCFunction == audit && e->userData == &hook_alloc) {
			*pp = e->next;
			hook_entry = e;
			return;
		}
	}
}

__attribute__((destructor)) static void audit_entry_free(void)
{
	if (hook_entry)
		hook_alloc.free(hook_alloc.ctx, hook_entry);
	hook_entry = NULL;
}

/* Cheap for the many events it does not care about: one or two byte compares. */
static int audit(const char *event, PyObject *args, void *data)
{
	(void)data;
	pl_py_greenlet_audit(event, args);
	if (event[0] == 'i' && !pl_py_host->profile && strcmp(event, "import") == 0)
		pl_pys_steps_install(); /* sample mode: once asyncio's events module is in */
	if (event[0] == 'c' && strcmp(event, "cpython._PySys_ClearAuditHooks") == 0) {
		if (!pl_py_host->profile)
			pl_pys_tasks_closing(); /* Python finalizes: no pending call from now */
		audit_unlink();
	} else if (event[0] == 'c' && strncmp(event, "cpython.run_", 12) == 0) {
		/* Sample mode takes the GIL from the folding thread up to 3.11 (tasks.c). */
		if (!main_started && (pl_py_host->profile || PY_VERSION_HEX < 0x030C0000))
			pl_py_gil_at_main();
		main_started = 1;
		pl_py_fork_register();
		if (__atomic_load_n(&want, __ATOMIC_ACQUIRE) && !pl_py_installed)
			pl_py_install(NULL);
	} else if (event[0] == '_' && pl_py_installed &&
		   (strcmp(event, "_thread.start_new_thread") == 0 ||
		    strcmp(event, "_thread.start_joinable_thread") == 0)) {
		/* The new thread state exists once this call returns; its return
		 * event, before the new thread can take the GIL, hooks it (the next
		 * Python event may come after CPython let the GIL go). */
		__atomic_store_n(&pl_py_new_threads, 1, __ATOMIC_RELEASE);
	}
	return 0;
}

/* Starts profiling Python. Before the main module runs, only remembers it (the audit
 * hook installs); in a forked child the hook is still on (the parent's thread state
 * was copied) and Python's locks may be held, so it only resets per-thread state. */
static int py_start(void)
{
	__atomic_add_fetch(&pl_py_gen, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&want, 1, __ATOMIC_RELEASE);
	ensure_resolver();
	PyGILState_STATE st;
	if (!main_started || pl_py_installed) /* the audit hook installs at the main module */
		return 0;
	/* A thread that has a thread state of its own before it takes the GIL is the
	 * program's (the Python API's caller, which let the GIL go), and is hooked too;
	 * the control thread's is made for this call only, and is not. */
	PyThreadState *own = PyGILState_GetThisThreadState();
	if (pl_py_gil_take(&st) == 0) {
		if (!pl_py_installed)
			pl_py_install(own ? NULL : PyThreadState_Get());
		pl_py_gil_give(st);
	}
	return 0;
}

/* Stops: takes the hook off every thread state with the GIL held, so no event is
 * under way when the engine stops and dumps. At exit Python is gone; nothing to do.
 * The generation moves on once the hook is off, GIL still held: an event that dropped
 * the GIL midway finds its state stale when it goes on (thread_stale). Moved on
 * before, while this thread waited for the GIL, the program's events went on into the
 * window with their state reset as for a new one: each task was adopted again, its
 * frames pushed a second time on its stack, and the loop's frames went to the task
 * that was running (python-X-slow_stop). */
static int py_stop(void)
{
	__atomic_store_n(&want, 0, __ATOMIC_RELEASE);
	pl_py_host->test_pause("COPROF_TEST_STOP_DELAY_MS"); /* a GIL slow to come */
	PyGILState_STATE st;
	int held = pl_py_installed && pl_py_gil_take(&st) == 0;
	if (held)
		pl_py_remove();
	__atomic_add_fetch(&pl_py_gen, 1, __ATOMIC_RELEASE);
	if (held)
		pl_py_gil_give(st);
	return 0;
}

/* Sample mode: nothing to put on; the profiler (a new one after a fork) must name the
 * keys the tick handler records. */
static int sample_start(void)
{
	ensure_resolver();
	pl_pys_tasks_start();
	return 0;
}

/* Right after fork, in the child: the forking thread is the only one left. */
static void py_after_fork_child(void)
{
	if (!pl_py_host->profile) {
		ensure_resolver(); /* sample mode: the child's profiler names our keys */
		pl_pys_tasks_after_fork_child();
		pl_py_gil_after_fork_child(); /* the folding thread may have held its gate */
		return;
	}
	pl_py_gil_after_fork_child();
	pl_py_forks++; /* the only thread left */
	__atomic_add_fetch(&pl_py_gen, 1, __ATOMIC_RELEASE);
	ensure_resolver();
}

__attribute__((visibility("default"))) int pl_py_attach(const struct pl_py_host *host,
							struct pl_py_adapter *out);

/* The engine this adapter runs against was built with the layout of its structs that
 * the adapter's inlined events read (cp_inline_layout, engine-inline.h): weak, so that
 * a libcoprof.so without the number gives a refusal too, not a failed dlopen. */
extern uint64_t coprof__inline_layout(void) __attribute__((weak));

int pl_py_attach(const struct pl_py_host *host, struct pl_py_adapter *out)
{
	if (!host || host->abi != PL_PY_ABI)
		return -EINVAL;
	uint64_t engine = coprof__inline_layout ? coprof__inline_layout() : 0;
	if (engine != cp_inline_layout()) {
		host->say("the Python adapter was built against another libcoprof.so (engine "
			  "layout %012llx, the adapter's %012llx); Python is not profiled: "
			  "install the two from one build",
			  (unsigned long long)engine, (unsigned long long)cp_inline_layout());
		return -EPROTO;
	}
	pl_py_host = host;
	if (host->profile)
		ensure_resolver();
	/* Documented as safe before Py_Initialize (see audit_unlink). */
	PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &hook_alloc);
	if (PySys_AddAuditHook(audit, &hook_alloc) != 0)
		return -EPERM;
	if (!host->profile) {
		/* Sample mode: the audit hook only registers fork.c's callbacks; the tick
		 * handler reads frames through out->sample (sampling/). */
		if (pl_pys_init() == 0) {
			out->start = sample_start;
			out->after_fork_child = py_after_fork_child;
			out->sample = pl_pys_sample;
			out->fold = pl_pys_fold;
			out->after_fold = pl_pys_after_fold;
			out->claim = pl_pys_claim;
			pl_pys_tasks_init();
		}
		if (host->late) {
			/* `coprof attach`: what the audit hook does at cpython.run_*, done
			 * now (the caller holds the GIL, the main module runs already). */
			main_started = 1;
			if (PY_VERSION_HEX < 0x030C0000)
				pl_py_gil_at_main();
			pl_py_fork_register();
		}
		return 0;
	}
	if (host->late) {
		/* What the audit hook does at cpython.run_*, done now: the caller holds
		 * the GIL, and the main module runs already. */
		main_started = 1;
		pl_py_gil_at_main();
		pl_py_fork_register();
		pl_py_greenlet_late();
	}
	out->start = py_start;
	out->stop = py_stop;
	out->after_fork_child = py_after_fork_child;
	return 0;
}
