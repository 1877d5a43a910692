/* hook.c: the hook: CPython's call and return events -> engine events, with one
 * engine context per coroutine chain resumed by a non-coroutine driver (an asyncio
 * task's root coroutine, DESIGN rules 3-6), kept across profiling windows until the
 * task ends. Events come from one of three backends: the C profile function on every
 * thread state (here), sys.monitoring (monitor.c), or a frame-evaluation function
 * (evalframe.c).
 *
 * Events arrive in the thread that runs the code, with the GIL held. Under the profile
 * function each thread state carries its own struct pl_py_thread as the hook's
 * argument; under the other two each thread finds its own in thread-local storage.
 * The control thread puts the hook on and takes it off holding the GIL, so no event
 * runs meanwhile. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-inline.h"
#include "py.h"

#include <internal/pycore_interp.h>

/* Not in the public headers of every version, exported by all of them. */
PyAPI_FUNC(int) _PyEval_SetProfile(PyThreadState *tstate, Py_tracefunc func, PyObject *arg);

/* Tasks switched in while another runs (a coroutine driving another by send()), at
 * most: deeper ones are counted as dropped ("python drivers"). */
#define MAX_DRIVERS 65536

/* The engine's events. The common case of each (recording, the callee the caller's last
 * one, the innermost frame left) runs inline (engine-inline.h): the call into libcoprof
 * was a fifth of the engine's part of an event. */
static inline void ev_enter(struct coprof_thread *t, uintptr_t key)
{
	if (!pl_py_likely(t && cp_push_fast(t, key, 1, 0)))
		coprof_enter(t, key);
}

static inline void ev_resume(struct coprof_thread *t, uintptr_t key)
{
	if (!pl_py_likely(t && cp_push_fast(t, key, 0, 0)))
		coprof_resume(t, key);
}

/* At the thread's last clock reading. */
static inline void ev_resume_again(struct coprof_thread *t, uintptr_t key)
{
	if (!pl_py_likely(t && cp_push_fast(t, key, 0, 1)))
		coprof_resume_again(t, key);
}

static inline void ev_leave(struct coprof_thread *t, uintptr_t key)
{
	if (!pl_py_likely(t && cp_leave_fast(t, key, 0)))
		coprof_leave(t, key);
}

static inline void ev_leave_again(struct coprof_thread *t, uintptr_t key)
{
	if (!pl_py_likely(t && cp_leave_fast(t, key, 1)))
		coprof_leave_again(t, key);
}

#define CORO_FLAGS (CO_COROUTINE | CO_ITERABLE_COROUTINE | CO_ASYNC_GENERATOR)

/* COPROF_PY_HOOK=auto on 3.12+: sys.monitoring when nonzero. Chosen by measurement
 * (bench/python/bench.py, bench/RESULTS.md). */
#define AUTO_MONITORING 1

const struct pl_py_host *pl_py_host;
/* The frame-evaluation backend (evalframe.c) is the one on; it handed over to the
 * profile function in this window (evalframe_hand_over): a new thread's install keeps
 * the profile function. */
static int evalframe, evalframe_handed;
unsigned pl_py_gen;
int pl_py_new_threads;
int pl_py_installed;

/* What ran before a task was switched in: restored when it suspends or finishes. */
struct driver {
	PyObject *root;		/* the root coroutine of that task; NULL: none */
	PyObject *root_code;	/* the code it runs (identity only) */
	struct coprof_ctx *ctx; /* NULL: the thread's own context */
};

struct pl_py_thread {
	struct coprof_thread *t; /* NULL: registration failed, record nothing */
	unsigned gen;		 /* the pl_py_gen this state was made for */
	PyObject *root;		 /* the running task's root coroutine (identity only) */
	PyObject *root_code;	 /* the code root runs, read while it ran (identity only) */
	struct coprof_ctx *ctx;	 /* the running task's context; NULL: the thread's own */
	PyObject *adopting;	 /* a task first seen mid-life, in its first run */
	struct driver *drivers;	 /* grown as tasks nest */
	unsigned ndrivers;
	unsigned cap;
	unsigned lost;		/* drivers not kept (no memory, or MAX_DRIVERS deep) */
	struct pl_py_map agens; /* async generators between a value yield and a resume */
	/* The coroutine frame whose resume was the thread's last event, and the root of
	 * its chain: a frame it resumes in turn (awaiting it) has the same root, found
	 * without walking the chain again. Any other event clears it (chain_resume). */
	PL_PY_FRAME *hint_fr;
	PL_PY_FRAME *hint_root;
	/* When the thread's last event was a generator-like frame's run resumed, or its
	 * yield, timed by the engine: the frame resumed, if it was suspended in a `yield
	 * from` or an await (it resumes the frame it delegates to next, with nothing
	 * between), and the frame a yield went to (it passes the value up next, if it
	 * delegates). The event that follows so shares the clock reading (resume_run,
	 * on_return). Any other event clears them. */
	PL_PY_FRAME *pushed;
	PL_PY_FRAME *yielded_to;
	/* The resume that set `pushed` was a send, not a throw(): the frame goes on with
	 * nothing of the program's before the SEND that resumes the frame it delegates to
	 * (a throw() may run its handler first, and then call anything). */
	int pushed_sent;
	/* When the thread's last event was a plain generator frame's resume or yield:
	 * that frame, the frame below it then (read while it was alive), whether it was
	 * a resume, and chain_is_root's answer for it. The next event of a frame of the
	 * same chain takes the answer from it (gen_is_root). Any other event clears it. */
	PL_PY_FRAME *root_fr;
	PL_PY_FRAME *root_back;
	int root_resumed;
	int root_yes;
	/* The profile backend: an event is under way (the hook may drop the GIL midway,
	 * and the control thread then take the hook off), and the hook was taken off
	 * meanwhile, so the event's end frees this state. Touched with the GIL held. */
	unsigned busy;
	int dead;
	/* The frame-evaluation backend: the thread's C stack [stack_base, stack_low) is
	 * its last part, where the backend hands over to the profile function (0, 0:
	 * not read yet; 1, 1: unknown). */
	uintptr_t stack_base;
	uintptr_t stack_low;
	/* The C stack pointer and Python depth at the last frame run through the slot,
	 * and the C stack a frame one Python call deeper took last (bytes; 0: none
	 * seen yet): stack_short's measure. */
	uintptr_t eval_sp;
	int eval_depth;
	uintptr_t eval_step;
};

/* The names name_task looks up, interned on first use (a C string made a new str at
 * every lookup, four per task). */
enum {
	S_ASYNCIO,
	S_CASYNCIO,
	S_CURRENT_TASK,
	S_GET_RUNNING_LOOP,
	S_CURRENT_TASKS,
	S_GET_CORO,
	S_GET_NAME,
	S_COUNT
};
static const char *const str_text[S_COUNT] = {
    "asyncio",	      "_asyncio", "current_task", "get_running_loop",
    "_current_tasks", "get_coro", "get_name",
};
static PyObject *strs[S_COUNT];
/* _thread.start_new_thread: 3.10 and 3.11 raise no audit event when a thread starts,
 * so its return (the new thread state exists, this thread still holds the GIL) is
 * when the hook goes on the new thread. */
static PyMethodDef *start_thread_ml;
static PyTypeObject *wrapped_type; /* async_generator_wrapped_value, once seen */

/* A task's engine context, kept for the profiler's life: coprof_clear keeps unfinished
 * contexts, so making a new one each window left the old one suspended for good (a
 * soak with a toggle a second listed each open connection once more every window).
 * The hook is off between windows and does not see a task end then, so a weak
 * reference tells whether the coroutine is gone, and its frame whether it returned.
 *
 * The reference is made when the root first suspends, or when the hook goes off during
 * its first run (task_watch): most tasks of a fan-out end in their first run, seen by
 * the hook, and a weak reference each (a collected object) made async_tree's tasks a
 * third dearer. So an entry without one is a task in its first run, alive. */
struct task {
	struct coprof_ctx *ctx;
	struct coprof_thread *t; /* the engine thread that made it (only it may finish it) */
	PyObject *ref;		 /* weak reference to the root coroutine; NULL: none yet */
	int watched;		 /* task_watch was called: ref is made, or cannot be */
	unsigned forks;		 /* pl_py_forks when made: a parent's context is not ours */
	unsigned gen;		 /* the pl_py_gen it last ran in: its stack was cleared since */
	int rename;		 /* its name is to be read again */
};

unsigned pl_py_forks;
/* root coroutine (identity only) -> struct task; used with the GIL held */
static struct pl_py_map task_map;

static struct task *task_get(struct pl_py_thread *pt, PyObject *root)
{
	struct task *tk = pl_py_map_get(&task_map, (uintptr_t)root);
	return tk && tk->t == pt->t && tk->forks == pl_py_forks ? tk : NULL;
}

static void task_free(struct task *tk)
{
	Py_XDECREF(tk->ref);
	free(tk);
}

/* Makes tk's weak reference to root, which is alive (its task is running). Python's
 * own exception is kept aside. Making it may collect, and a finalizer drop the GIL:
 * the caller checks thread_stale after it. */
static void task_watch(struct task *tk, PyObject *root)
{
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	tk->watched = 1;
	tk->ref = pl_py_weakref(root);
	if (!tk->ref)
		PyErr_Clear();
	pl_py_exc_restore(&e);
}

/* Forgets root's task; finishes its context when it is this thread's. */
static void task_drop(struct pl_py_thread *pt, PyObject *root)
{
	struct task *tk = pl_py_map_del(&task_map, (uintptr_t)root);
	if (!tk)
		return;
	if (tk->t == pt->t && tk->forks == pl_py_forks)
		coprof_ctx_finish(pt->t, tk->ctx);
	task_free(tk);
}

/* Nonzero when the coroutine `ref` names is gone or has returned. Reads the object's
 * state only: no Python code runs, nothing is allocated. */
static int coro_ended(PyObject *ref)
{
	if (!ref)
		return 0;
#if PY_VERSION_HEX >= 0x030D0000
	PyObject *g = NULL;
	if (PyWeakref_GetRef(ref, &g) <= 0)
		return 1;
#else
	PyObject *g = PyWeakref_GetObject(ref);
	if (!g || g == Py_None)
		return 1;
	Py_INCREF(g);
#endif
#if PY_VERSION_HEX >= 0x030B0000 /* coroutines, async generators: a generator's layout */
	int ended = ((PyGenObject *)g)->gi_frame_state >= FRAME_COMPLETED;
#else
	int ended = ((PyGenObject *)g)->gi_frame == NULL;
#endif
	Py_DECREF(g); /* others hold it: no finalizer runs here */
	return ended;
}

/* At this thread's first event of a window: finishes the contexts of its tasks that
 * ended while profiling was off, and forgets a parent's (after fork). */
static int task_sweep(uintptr_t k, void *v, void *arg)
{
	(void)k;
	struct pl_py_thread *pt = arg;
	struct task *tk = v;
	if (tk->forks != pl_py_forks) {
		task_free(tk);
		return 1;
	}
	if (tk->t != pt->t || tk->ctx == pt->ctx || !coro_ended(tk->ref))
		return 0;
	coprof_ctx_finish(pt->t, tk->ctx);
	task_free(tk);
	return 1;
}

/* Finishes the contexts of this thread's tasks whose coroutine is gone or returned
 * without an event: at a window's first event, and when the thread's outermost frame
 * returns. (3.13 closes a coroutine suspended outside any try block with no event at
 * all: one a collection closes stays suspended otherwise, unless a later coroutine
 * happens to start at its address.) */
static void sweep_ended(struct pl_py_thread *pt)
{
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	pl_py_map_sweep(&task_map, task_sweep, pt);
	pl_py_exc_restore(&e);
}

/* The size of task_map at which a new task sweeps it first (sweep_ended): twice what
 * the last sweep left, so a sweep costs O(1) per task made. A task whose coroutine
 * ended with no event seen (none is known left, but a misread chain was one) is so
 * finished while its thread runs on, not kept until the window or the thread ends. */
#define SWEEP_MIN 256
static uint32_t sweep_at = SWEEP_MIN;

static void thread_free(struct pl_py_thread *pt)
{
	free(pt->drivers);
	pl_py_map_free(&pt->agens);
	free(pt);
}

/* What on_call and on_return keep from one event to the next, forgotten. */
static inline void forget_last(struct pl_py_thread *pt)
{
	pt->hint_fr = NULL;
	pt->pushed = NULL;
	pt->yielded_to = NULL;
	pt->root_fr = NULL;
}

/* Forgets what the last start or fork made stale: the stacks (cleared) and, after a
 * fork, the parent's contexts. Tasks keep their contexts (struct task). */
static void thread_reset(struct pl_py_thread *pt)
{
	pl_py_map_free(&pt->agens);
	pt->root = pt->root_code = NULL;
	pt->ctx = NULL;
	pt->adopting = NULL;
	forget_last(pt);
	pt->ndrivers = 0;
	pt->lost = 0;
	pt->gen = __atomic_load_n(&pl_py_gen, __ATOMIC_ACQUIRE);
	pt->t = pl_py_host->thread();
	if (pt->t && (pt->ctx = pl_py_greenlet_current(pt->t)))
		coprof_ctx_switch(pt->t, pt->ctx); /* the window starts in a greenlet */
	if (pt->t)
		sweep_ended(pt);
}

/* pt, brought up to date with the last start or fork; NULL when nothing is recorded
 * for its thread. */
static inline struct pl_py_thread *thread_ready(struct pl_py_thread *pt)
{
	if (pl_py_unlikely(pt && pt->dead))
		return NULL;
	if (pl_py_unlikely(!pt))
		return NULL;
	if (pl_py_unlikely(pt->gen != __atomic_load_n(&pl_py_gen, __ATOMIC_RELAXED)))
		thread_reset(pt);
	return pl_py_likely(pt->t) ? pt : NULL;
}

/* After anything that may have dropped the GIL (a call into Python): nonzero when the
 * control thread stopped or restarted profiling meanwhile, so what pt holds is of a
 * past session and the event must end here. */
static inline int thread_stale(const struct pl_py_thread *pt)
{
	return pt->dead || pt->gen != __atomic_load_n(&pl_py_gen, __ATOMIC_RELAXED);
}

/* --- thread-local state (the sys.monitoring backend) ---------------------------- */

static pthread_key_t tls_key; /* -> struct pl_py_thread, freed when its thread exits */
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_ok;
/* The same pointer, read by every event: the key's value is a call into libc, this a
 * load from the thread pointer (the adapter is loaded at start-up, where glibc keeps
 * room for a module's initial-exec TLS). */
static __thread struct pl_py_thread *tls_pt __attribute__((tls_model("initial-exec")));

static void tls_free(void *p)
{
	tls_pt = NULL;
	thread_free(p);
}

static void tls_init(void)
{
	tls_ok = pthread_key_create(&tls_key, tls_free) == 0;
}

/* Made at the thread's first event: with sys.monitoring no one visits the thread
 * states, and the thread frees it when it exits (the control thread never does, so
 * an event that drops the GIL midway finds its state still there). */
static struct pl_py_thread *tls_new(void)
{
	struct pl_py_thread *pt = calloc(1, sizeof(*pt));
	if (!pt)
		return NULL;
	if (pthread_setspecific(tls_key, pt) != 0) {
		free(pt);
		return NULL;
	}
	tls_pt = pt;
	pt->gen = __atomic_load_n(&pl_py_gen, __ATOMIC_RELAXED) - 1;
	return pt;
}

static inline struct pl_py_thread *thread_current(void)
{
	struct pl_py_thread *pt = tls_pt;
	return thread_ready(pl_py_likely(pt) ? pt : tls_new());
}

struct pl_py_thread *pl_py_thread_current(void)
{
	return thread_current();
}

/* --- tasks -------------------------------------------------------------------- */

/* Calls obj.name() only when it is implemented in C: no Python code runs, so the GIL
 * is never dropped while the hook is in the middle of its work (the control thread
 * could otherwise take the hook off and free this thread's state). New reference or
 * NULL. */
static PyObject *str(int i)
{
	if (!strs[i])
		strs[i] = PyUnicode_InternFromString(str_text[i]);
	return strs[i];
}

static PyObject *call_c_method(PyObject *obj, int name)
{
	PyObject *m = str(name) ? PyObject_GetAttr(obj, strs[name]) : NULL;
	PyObject *r = m && PyCFunction_Check(m) ? PyObject_CallNoArgs(m) : NULL;
	Py_XDECREF(m);
	return r;
}

/* asyncio's C Task type (_asyncio.Task), once seen, and its C methods, by name, looked
 * up once (strong references, kept for the process's life). */
static PyTypeObject *c_task_type;
static PyObject *c_task_methods[S_COUNT];

/* task.name() for a task of exactly asyncio's C Task type, whose methods are C: the
 * method descriptor called with the task (no lookup through the type's MRO, no bound
 * method made), as call_c_method would otherwise. */
static PyObject *call_task_method(PyObject *task, int name)
{
	if (!c_task_type && strcmp(Py_TYPE(task)->tp_name, "_asyncio.Task") == 0)
		c_task_type = Py_TYPE(task);
	if (Py_TYPE(task) != c_task_type || !str(name))
		return call_c_method(task, name);
	PyObject *m = c_task_methods[name];
	if (!m) {
		m = PyObject_GetAttr((PyObject *)c_task_type, strs[name]);
		if (!m || !Py_IS_TYPE(m, &PyMethodDescr_Type)) {
			Py_XDECREF(m);
			return call_c_method(task, name);
		}
		c_task_methods[name] = m;
	}
	PyObject *args[1] = {task};
	return PyObject_Vectorcall(m, args, 1, NULL);
}

/* What current_task uses, looked up once their module is imported and kept for the
 * process's life (a strong reference): asyncio.current_task (C from 3.12; a Python
 * function before, never called), _asyncio.get_running_loop and _asyncio._current_tasks
 * (a dict that lives as long as its module). */
static PyObject *cur_task_fn, *get_loop_fn, *cur_tasks;

/* *slot, or module.name once the module is imported (NULL before; an error may be
 * set). */
static PyObject *module_attr(PyObject **slot, int module, int name)
{
	if (*slot)
		return *slot;
	PyObject *m = str(module) ? PyImport_GetModule(strs[module]) : NULL;
	*slot = m && str(name) ? PyObject_GetAttr(m, strs[name]) : NULL;
	Py_XDECREF(m);
	return *slot;
}

/* asyncio's running task: asyncio.current_task where it is C (3.12+), else the C
 * module's own table, _asyncio._current_tasks[get_running_loop()]. New reference or
 * NULL (an error may be set). */
static PyObject *current_task(void)
{
	PyObject *f = module_attr(&cur_task_fn, S_ASYNCIO, S_CURRENT_TASK);
	PyObject *task = f && PyCFunction_Check(f) ? PyObject_CallNoArgs(f) : NULL;
	if (task)
		return task;
	f = module_attr(&get_loop_fn, S_CASYNCIO, S_GET_RUNNING_LOOP);
	PyObject *loop = f && PyCFunction_Check(f) ? PyObject_CallNoArgs(f) : NULL;
	PyObject *tasks = loop ? module_attr(&cur_tasks, S_CASYNCIO, S_CURRENT_TASKS) : NULL;
	if (tasks && PyDict_CheckExact(tasks)) {
		task = PyDict_GetItemWithError(tasks, loop);
		Py_XINCREF(task);
	}
	Py_XDECREF(loop);
	return task;
}

/* s into buf[len], cut to fit: what snprintf("%s") does, at a tenth of its cost (a
 * name or two is copied for every task made). */
static void copy_name(char *buf, size_t len, const char *s)
{
	size_t n = strnlen(s, len - 1);
	memcpy(buf, s, n);
	buf[n] = 0;
}

/* Names a new context after its asyncio task when `coro` is the root of the task
 * running now (Task.get_name(), the task's address as id). Calls into Python once per
 * task; the hook is off meanwhile (CPython does not trace its own profile hook). */
static void name_task(PyObject *coro, char *buf, size_t len, uint64_t *id, const char **rt)
{
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	PyObject *task = current_task();
	if (task && task != Py_None) {
		PyObject *c = call_task_method(task, S_GET_CORO);
		if (c == coro) {
			PyObject *nm = call_task_method(task, S_GET_NAME);
			const char *s = nm && PyUnicode_Check(nm) ? PyUnicode_AsUTF8(nm) : NULL;
			if (s) {
				copy_name(buf, len, s);
				*id = (uint64_t)(uintptr_t)task;
				*rt = "asyncio";
			}
			Py_XDECREF(nm);
		}
		Py_XDECREF(c);
	}
	Py_XDECREF(task);
	pl_py_exc_restore(&e);
}

/* Room for more drivers: 0, or -ENOMEM (also at MAX_DRIVERS). */
static int grow_drivers(struct pl_py_thread *pt)
{
	unsigned cap = pt->cap ? pt->cap * 2 : 16;
	if (cap > MAX_DRIVERS)
		return -ENOMEM;
	struct driver *d = realloc(pt->drivers, cap * sizeof(*d));
	if (!d)
		return -ENOMEM;
	pt->drivers = d;
	pt->cap = cap;
	return 0;
}

static void switch_in(struct pl_py_thread *pt, PyObject *root, struct coprof_ctx *ctx)
{
	if (pl_py_unlikely(pt->ndrivers == pt->cap) && grow_drivers(pt) != 0) {
		pt->lost++;
		if (*pl_py_host->prof)
			coprof_count_dropped(*pl_py_host->prof, "python drivers", 1);
	} else {
		pt->drivers[pt->ndrivers++] = (struct driver){pt->root, pt->root_code, pt->ctx};
	}
	pt->root = root;
	pt->root_code = (PyObject *)pl_py_gen_code(root);
	pt->ctx = ctx;
	coprof_ctx_switch(pt->t, ctx);
}

/* The running task suspended or finished: its driver runs again. */
static void switch_out(struct pl_py_thread *pt, int finished)
{
	struct driver d = {NULL, NULL, NULL};
	if (pt->adopting == pt->root)
		pt->adopting = NULL;
	if (pl_py_unlikely(pt->lost))
		pt->lost--; /* its driver is unknown: the thread's own context runs */
	else if (pt->ndrivers)
		d = pt->drivers[--pt->ndrivers];
	if (finished) {
		struct task *tk = pl_py_map_del(&task_map, (uintptr_t)pt->root);
		coprof_ctx_finish(pt->t, pt->ctx);
		if (tk)
			task_free(tk);
	}
	pt->root = d.root;
	pt->root_code = d.root_code;
	pt->ctx = d.ctx;
	if (!finished || d.ctx)
		coprof_ctx_switch(pt->t, d.ctx);
}

/* The running task's root suspends: the first time, it gets its weak reference. -1:
 * the state went stale meanwhile (thread_stale); the event ends. */
static int root_suspends(struct pl_py_thread *pt)
{
	struct task *tk = task_get(pt, pt->root);
	if (pl_py_likely(!tk || tk->watched))
		return 0;
	task_watch(tk, pt->root);
	return thread_stale(pt) ? -1 : 0;
}

/* Switches to the task whose root coroutine is `root`, making its context on first
 * sight. `fresh`: the root starts now, so a context left under the same address is a
 * dead coroutine's (its memory was reused) and is finished first. A task seen for the
 * first time in this window (made now, or kept from an earlier one, whose stack the
 * clear emptied) is adopted: its suspended frames are pushed as they resume. -1: the
 * state went stale while asyncio was asked for the task's name (thread_stale); the
 * event ends. */
static int task_enter(struct pl_py_thread *pt, PyObject *root, struct pl_py_func *fn, int fresh)
{
	struct task *tk = task_get(pt, root);
	if (pl_py_unlikely(tk && tk->rename) && !fresh) {
		char name[128] = "";
		uint64_t id;
		const char *rt = NULL;
		name_task(root, name, sizeof(name), &id, &rt);
		if (thread_stale(pt))
			return -1;
		tk = task_get(pt, root); /* asyncio ran no Python code, but be sure */
		if (!tk)
			return 0;
		if (rt)
			coprof_ctx_set_name(tk->ctx, name);
		tk->rename = 0;
	}
	if (fresh && pl_py_map_get(&task_map, (uintptr_t)root)) {
		task_drop(pt, root);
		if (coprof_ctx_current(pt->t) != pt->ctx)
			coprof_ctx_switch(pt->t, pt->ctx);
		tk = NULL;
	}
	if (!tk) {
		char name[128];
		uint64_t id = (uint64_t)(uintptr_t)root;
		if (pl_py_unlikely(task_map.n >= sweep_at)) {
			sweep_ended(pt);
			sweep_at = task_map.n * 2 > SWEEP_MIN ? task_map.n * 2 : SWEEP_MIN;
		}
		const char *rt = NULL;
		struct coprof_ctx *ctx;
		name_task(root, name, sizeof(name), &id, &rt);
		if (thread_stale(pt))
			return -1;
		if (!rt) { /* not an asyncio task's: named after its function */
			copy_name(name, sizeof(name), fn && fn->name ? fn->name : "?");
			rt = "coroutine";
		}
		tk = calloc(1, sizeof(*tk));
		if (!tk)
			return 0;
		if (coprof_ctx_create(pt->t, id, name, rt, &ctx) != 0) {
			task_free(tk);
			return 0;
		}
		tk->ctx = ctx;
		tk->t = pt->t;
		tk->forks = pl_py_forks;
		tk->gen = pt->gen - 1;
		/* An asyncio task run eagerly, by the code that creates it (another
		 * task): asyncio names it once that code goes on (3.12's create_task,
		 * eager_task_factory), so a default name is read again at its next run. */
		tk->rename = fresh && pt->root && rt && strncmp(name, "Task-", 5) == 0;
		struct task *old = pl_py_map_get(&task_map, (uintptr_t)root);
		if (pl_py_map_put(&task_map, (uintptr_t)root, tk) != 0) {
			coprof_ctx_finish(pt->t, ctx);
			task_free(tk);
			return 0;
		}
		if (old) /* another thread's (or a parent's): that thread cannot be asked */
			task_free(old);
	}
	if (tk->gen != pt->gen) {
		/* Started before this window: its suspended frames are pushed as they
		 * resume (counting no call), so the time of this run has its stack. */
		tk->gen = pt->gen;
		if (!fresh)
			pt->adopting = root;
	}
	switch_in(pt, root, tk->ctx);
	return 0;
}

static int is_coro_frame(PL_PY_FRAME *fr)
{
	PyCodeObject *co = fr ? pl_py_frame_code(fr) : NULL;
	return co && (co->co_flags & CORO_FLAGS);
}

static int is_gen_frame(PL_PY_FRAME *fr)
{
	PyCodeObject *co = fr ? pl_py_frame_code(fr) : NULL;
	return co && (co->co_flags & (CORO_FLAGS | CO_GENERATOR));
}

/* The root of the chain a coroutine frame belongs to: the outermost coroutine frame
 * reached from fr through frames that await (or `yield from`) the one above them.
 * Plain generators may be links (a generator __await__, aiohttp's context managers),
 * never the root. A frame that called something that resumed fr (a Task constructor
 * starting it eagerly, send() from a coroutine, a collection closing it) ends the
 * chain: fr is driven, a task of its own. */
static PL_PY_FRAME *chain_root(PL_PY_FRAME *fr, PL_PY_FRAME *back /* fr's caller */)
{
	PL_PY_FRAME *root = is_coro_frame(fr) ? fr : NULL;
	for (PL_PY_FRAME *b = back; is_gen_frame(b) && pl_py_frame_delegating(b);
	     b = pl_py_frame_back(b))
		if (is_coro_frame(b))
			root = b;
	return root;
}

/* Nonzero when the coroutine frame whose caller is `back` (pl_py_frame_back) is the root
 * of its chain (chain_root gives that frame): no coroutine frame awaits it, directly or
 * through generators that delegate. The callers below take `back` once per event. Stops
 * at the first one, where chain_root walks the whole chain (a recursion of awaits
 * made every fresh coroutine cost its depth). */
static inline __attribute__((always_inline)) int chain_is_root(PL_PY_FRAME *back)
{
	for (PL_PY_FRAME *b = back; is_gen_frame(b) && pl_py_frame_delegating(b);
	     b = pl_py_frame_back(b))
		if (is_coro_frame(b))
			return 0;
	return 1;
}

/* chain_is_root for a plain generator frame fr (whose caller is `fr_back`) that starts
 * or resumes (`resumed`) or yields, taken from the thread's last event when that event
 * was a start, resume or yield of a generator frame of the same chain (`last`, `back`,
 * `last_resumed`, `yes`: what the fields root_* held) and nothing that could change the
 * frames below fr ran since:
 * - fr is started or resumed by `last`, started or resumed by the last event (so still
 *   running: alive), which delegates to it: fr's walk is last's, one frame longer, and
 *   that frame is a plain generator (never a coroutine frame);
 * - fr yields after its own start or resume: the frames below a running frame cannot
 *   change;
 * - fr passes up the yield of `last`, whose caller fr was (`back`, read while last
 *   was alive) and is delegating: last's walk went through fr and on as fr's does.
 * `known` says the delegating frame's check is already answered: for a resume, `last`
 * was sent into (no throw()) at the yield of a `yield from` (its `pushed`), so it went
 * on to its SEND, which resumes fr, with nothing between; for a yield, fr is at the
 * yield of a `yield from`.
 * Else walked. The answer is kept for the next event. A generator tree of depth d
 * walked d frames at each of its 2d events per value (11% of pyperformance's
 * generators under perf on 3.10 and 3.11); it now walks at the first start of a
 * chain only (a new subtree's generators start one inside the other). */
static inline int gen_is_root(struct pl_py_thread *pt, PL_PY_FRAME *fr, PL_PY_FRAME *fr_back,
			      int resumed, int known, PL_PY_FRAME *last, PL_PY_FRAME *back,
			      int last_resumed, int yes)
{
	int r;
	if (!last)
		r = chain_is_root(fr_back);
	else if (resumed)
		r = last_resumed && fr_back == last && (known || pl_py_frame_delegating(last))
			? yes
			: chain_is_root(fr_back);
	else if (last == fr && last_resumed)
		r = yes;
	else if (!last_resumed && back == fr && (known || pl_py_frame_delegating(fr)))
		r = yes;
	else
		r = chain_is_root(fr_back);
	pt->root_fr = fr;
	pt->root_back = fr_back;
	pt->root_resumed = resumed;
	pt->root_yes = r;
	return r;
}

/* A plain generator frame ended (returned or raised) after its own start or resume with
 * no event between, so its chain_is_root answer `yes` still holds: the frame it
 * delegated from (`back`), when a plain generator still delegating, has the same one
 * (its walk is fr's, one frame shorter, and that frame is no coroutine frame). It is
 * kept for that frame's next event (its yield or end, or a generator it starts or
 * resumes), as gen_is_root keeps a resumed frame's: a generator tree's subtree ending
 * does not make its parent's next yield walk the chain. */
static inline void gen_returned(struct pl_py_thread *pt, PL_PY_FRAME *back, int yes)
{
	PyCodeObject *co = back ? pl_py_frame_code(back) : NULL;
	if (co && (co->co_flags & CO_GENERATOR) && !(co->co_flags & CORO_FLAGS) &&
	    pl_py_frame_delegating(back)) {
		pt->root_fr = back;
		pt->root_back = NULL;
		pt->root_resumed = 1;
		pt->root_yes = yes;
	}
}

/* A generator-like frame resumes: makes sure the task whose chain it belongs to is
 * the running context. A throw() resumes the innermost frame first, so any frame of
 * the chain may be the first one seen. A plain generator's chain is that of the
 * coroutine frames below it.
 *
 * A task's step resumes its chain from the root outwards, one event per frame, each
 * frame awaiting the next: `hint` is the coroutine frame whose resume was this
 * thread's event just before this one (the caller cleared it after any other event).
 * When fr is resumed by that frame, which awaits it, both have one root: the one
 * found for it, so a chain of depth d costs d steps per resume, not d * d / 2. Frames
 * below a running one cannot change or die meanwhile. */
static int chain_resume(struct pl_py_thread *pt, PL_PY_FRAME *fr, PL_PY_FRAME *back, int is_coro,
			PL_PY_FRAME *hint)
{
	PL_PY_FRAME *root = NULL;
	if (is_coro) {
		if (hint && back == hint && pl_py_frame_delegating(back))
			root = pt->hint_root;
		else
			root = chain_root(fr, back);
		pt->hint_fr = fr;
		pt->hint_root = root;
	} else {
		for (PL_PY_FRAME *f = back; is_coro_frame(f); f = pl_py_frame_back(f))
			root = f;
	}
	if (!root)
		return 0;
	PyObject *g = pl_py_frame_gen(root);
	if (!g || g == pt->root)
		return 0;
	/* A chain no task holds, resumed by a coroutine that called something (a
	 * collection closing a coroutine awaited by a dead task, whose root is closed
	 * first): no task started before profiling to adopt; it unwinds where it is. */
	if (!task_get(pt, g) && is_gen_frame(pl_py_frame_back(root)))
		return 0;
	return task_enter(pt, g, pl_py_func_of(pl_py_frame_code(root)), 0);
}

/* --- events ------------------------------------------------------------------- */

/* A generator-like frame's run resumes (rule 6). When the thread's last event resumed
 * the frame that delegates to fr, nothing of the program's ran between the two (RESUME,
 * the jump back and SEND): fr's run starts at that event's instant, read once. */
static inline void resume_run(struct pl_py_thread *pt, PL_PY_FRAME *fr, PL_PY_FRAME *back,
			      uintptr_t key, PL_PY_FRAME *pushed, int thrown)
{
	if (pushed && back == pushed)
		ev_resume_again(pt->t, key);
	else
		ev_resume(pt->t, key);
	pt->pushed = pl_py_frame_in_yield_from(fr) ? fr : NULL;
	pt->pushed_sent = !thrown;
}

/* The profile hook's 'call': fr starts, resumes or is thrown into (`thrown`: a throw(),
 * or a backend that cannot tell); fn is its code's function (a plain function's frame
 * is never read: NULL will do). `fresh`: 1 when the backend's event says fr starts
 * (sys.monitoring's PY_START), 0 when it says fr resumes (PY_RESUME), -1 when fr is
 * asked. Inlined into each backend's entry point (the hot path of every event). */
static inline __attribute__((always_inline)) void on_call_fn(struct pl_py_thread *pt,
							     PL_PY_FRAME *fr, PyCodeObject *co,
							     struct pl_py_func *fn, int thrown,
							     int fresh)
{
	if (fn && !fn->flags) { /* what the last event kept is for generators only */
		forget_last(pt);
		ev_enter(pt->t, (uintptr_t)fn);
		return;
	}
	PL_PY_FRAME *hint = pt->hint_fr, *pushed = pt->pushed;
	int sent = pt->pushed_sent;
	PL_PY_FRAME *last = pt->root_fr, *last_back = pt->root_back;
	forget_last(pt);
	if (!fn)
		return;
	uintptr_t key = (uintptr_t)fn;
	if (fresh < 0)
		fresh = pl_py_frame_fresh(fr, co);
	if (fn->flags & PL_PY_GEN) {
		/* Rule 6: each run of a generator is timed, one call per generator. A
		 * fresh frame's answer is only kept for the events that follow: its
		 * first yield, a generator it starts or resumes in turn. */
		PL_PY_FRAME *back = pl_py_frame_back(fr);
		int root = gen_is_root(pt, fr, back, 1, pushed == last && sent, last, last_back,
				       pt->root_resumed, pt->root_yes);
		if (fresh) {
			ev_enter(pt->t, key);
			return;
		}
		if (pl_py_unlikely(!root)) {
			/* A link of a coroutine chain (a generator __await__): its yields
			 * are the task's suspensions, so rule 3, as for a coroutine frame
			 * (on_return keeps it on the stack). */
			if (chain_resume(pt, fr, back, 1, hint) < 0)
				return;
			if (pl_py_unlikely(pt->adopting) && pt->adopting == pt->root)
				ev_resume(pt->t, key);
		} else if (!is_coro_frame(back) || chain_resume(pt, fr, back, 0, NULL) == 0) {
			/* (No coroutine frame below: no chain to resume.) */
			resume_run(pt, fr, back, key, pushed, thrown);
		}
		return;
	}
	PyObject *gen = pl_py_frame_gen(fr);
	PL_PY_FRAME *back = pl_py_frame_back(fr);
	if (fresh) {
		/* An async generator's address may be a dead one's that was finalized
		 * between a value yield and a resume, with no event (3.13). */
		if (fn->flags & PL_PY_ASYNC_GEN)
			pl_py_map_del(&pt->agens, (uintptr_t)gen);
		if (gen && chain_is_root(back) && task_enter(pt, gen, fn, 1) < 0)
			return;
		ev_enter(pt->t, key);
		return;
	}
	/* Rule 3: a resumption is not a call; its frames are still on the task's stack. */
	if (chain_resume(pt, fr, back, 1, hint) < 0)
		return;
	if ((fn->flags & PL_PY_ASYNC_GEN) && pl_py_map_del(&pt->agens, (uintptr_t)gen))
		resume_run(pt, fr, back, key, pushed, thrown); /* a new run after a value yield */
	else if (pl_py_unlikely(pt->adopting) && pt->adopting == pt->root)
		ev_resume(pt->t, key);
}

static int is_wrapped_value(PyObject *v)
{
	if (!v)
		return 0;
	if (Py_TYPE(v) == wrapped_type)
		return 1;
	if (!wrapped_type && strcmp(Py_TYPE(v)->tp_name, "async_generator_wrapped_value") == 0) {
		wrapped_type = Py_TYPE(v);
		return 1;
	}
	return 0;
}

/* A generator's run ends at a yield (rule 6). When the thread's last event was the
 * yield of the frame fr delegates to and fr passes that value up (a `yield from`:
 * `passes`), nothing of the program's ran between the two (SEND, YIELD_VALUE): fr's
 * run ends at that event's instant, read once. `back` is fr's caller. */
static inline void yield_run(struct pl_py_thread *pt, PL_PY_FRAME *back, uintptr_t key, int passes)
{
	if (passes)
		ev_leave_again(pt->t, key);
	else
		ev_leave(pt->t, key);
	pt->yielded_to = back;
}

/* The profile hook's 'return': fr returns, yields `arg` or unwinds (arg NULL).
 * `suspended`: 1 when the backend's event says fr yields (sys.monitoring's PY_YIELD), 0
 * when it says fr ends (PY_RETURN, PY_UNWIND), -1 when fr is asked. */
static inline __attribute__((always_inline)) void on_return_fn(struct pl_py_thread *pt,
							       PL_PY_FRAME *fr,
							       struct pl_py_func *fn, PyObject *arg,
							       int suspended)
{
	PL_PY_FRAME *yielded_to = pt->yielded_to;
	PL_PY_FRAME *last = pt->root_fr, *last_back = pt->root_back;
	forget_last(pt);
	if (pl_py_unlikely(!fn)) {
		/* Out of memory: nothing to time, but a task's root still suspends or
		 * ends (its entry must not outlive it unwatched). */
		PyObject *gen = pl_py_frame_gen(fr);
		int done = !(suspended < 0 ? pl_py_frame_suspended(fr) : suspended);
		if (gen && gen == pt->root && (done || root_suspends(pt) == 0))
			switch_out(pt, done);
		return;
	}
	uintptr_t key = (uintptr_t)fn;
	if (suspended < 0)
		suspended = fn->flags && pl_py_frame_suspended(fr);
	if (!fn->flags || (fn->flags & PL_PY_GEN)) {
		PL_PY_FRAME *back = pl_py_frame_back(fr);
		if ((fn->flags & PL_PY_GEN) && suspended) {
			/* A generator __await__ (a link: see on_call) suspends the
			 * task with its yield: its frame stays on the task's stack, as does
			 * the coroutine it awaits (rule 3). A frame at the yield of a `yield
			 * from` delegates. */
			int passes = yielded_to == fr && pl_py_frame_in_yield_from(fr);
			if (pl_py_unlikely(!gen_is_root(pt, fr, back, 0, passes, last, last_back,
							pt->root_resumed, pt->root_yes)))
				return;
			yield_run(pt, back, key, passes);
		} else {
			ev_leave(pt->t, key);
			if ((fn->flags & PL_PY_GEN) && last == fr && pt->root_resumed)
				gen_returned(pt, back, pt->root_yes);
		}
		if (pl_py_unlikely(!back))
			sweep_ended(pt); /* the thread's outermost frame: its tasks are over */
		return;
	}
	PyObject *gen = pl_py_frame_gen(fr);
	if (suspended) {
		if ((fn->flags & PL_PY_ASYNC_GEN) && is_wrapped_value(arg)) {
			/* An async generator yields a value to its consumer: rule 6. One
			 * driven by hand (asend().send() from plain code) is a task's root,
			 * which this suspends. */
			ev_leave(pt->t, key);
			pl_py_map_put(&pt->agens, (uintptr_t)gen, gen);
			if (gen == pt->root && root_suspends(pt) == 0)
				switch_out(pt, 0);
			return;
		}
		/* Rule 3: suspended, not returned. The task's root suspending hands the
		 * thread back to the driver (rule 4). */
		if (gen && gen == pt->root && root_suspends(pt) == 0)
			switch_out(pt, 0);
		return;
	}
	ev_leave(pt->t, key);
	if (fn->flags & PL_PY_ASYNC_GEN)
		pl_py_map_del(&pt->agens, (uintptr_t)gen);
	if (gen && gen == pt->root)
		switch_out(pt, 1);
}

/* on_call and on_return for a frame whose function is not known yet. */
static inline __attribute__((always_inline)) void on_call(struct pl_py_thread *pt, PL_PY_FRAME *fr,
							  int thrown)
{
	PyCodeObject *co = pl_py_frame_code(fr);
	on_call_fn(pt, fr, co, co ? pl_py_func_of(co) : NULL, thrown, -1);
}

static inline __attribute__((always_inline)) void on_return(struct pl_py_thread *pt,
							    PL_PY_FRAME *fr, PyObject *arg)
{
	PyCodeObject *co = pl_py_frame_code(fr);
	on_return_fn(pt, fr, co ? pl_py_func_of(co) : NULL, arg, -1);
}

void pl_py_on_builtin(struct pl_py_thread *pt, int enter, struct pl_py_func *fn)
{
	forget_last(pt);
	if (enter)
		ev_enter(pt->t, (uintptr_t)fn);
	else
		ev_leave(pt->t, (uintptr_t)fn);
}

/* --- the sys.monitoring backend's events (monitor.c) ------------------------------ */

#if PY_VERSION_HEX >= 0x030C0000
/* The frame running now, when it runs `code` (a callback always comes from the frame
 * of its code; the check keeps a surprise from reaching the engine). */
static inline PL_PY_FRAME *running(PyObject *code)
{
#if PY_VERSION_HEX >= 0x030D0000
	PL_PY_FRAME *fr = PyThreadState_GetUnchecked()->current_frame;
#else
	PL_PY_FRAME *fr = _PyThreadState_UncheckedGet()->cframe->current_frame;
#endif
	return pl_py_likely(fr) && (PyObject *)pl_py_frame_code(fr) == code ? fr : NULL;
}

/* The function of a callback's code object (NULL: out of memory). A plain function's
 * events (no generator or coroutine) need no frame: its code is all the engine keys,
 * as cProfile's callbacks read no frame either. */
static inline struct pl_py_func *code_func(PyObject *code)
{
	return PyCode_Check(code) ? pl_py_func_of((PyCodeObject *)code) : NULL;
}

/* A start, resume or throw() of `code`'s frame (`how`: PL_PY_MON_START, _RESUME or
 * _THROW). A plain function's never reads its frame (on_call_fn does not, for one). */
static inline __attribute__((always_inline)) void mon_call(PyObject *code, int how)
{
	struct pl_py_thread *pt = thread_current();
	if (!pt)
		return;
	struct pl_py_func *fn = code_func(code);
	int plain = fn && !fn->flags;
	PL_PY_FRAME *fr = plain ? NULL : running(code);
	if (plain || fr)
		on_call_fn(pt, fr, (PyCodeObject *)code, fn, how == PL_PY_MON_THROW,
			   how == PL_PY_MON_THROW ? -1 : how == PL_PY_MON_START);
}

/* A return, yield (of `arg`) or unwind of `code`'s frame (`how`: PL_PY_MON_RETURN,
 * _YIELD or _UNWIND). */
static inline __attribute__((always_inline)) void mon_return(PyObject *code, PyObject *arg, int how)
{
	struct pl_py_thread *pt = thread_current();
	if (!pt)
		return;
	/* A plain function's return needs its frame only when it may be the thread's
	 * outermost (on_return then sweeps the ended tasks): not while a task runs (its
	 * driver's frames are below), nor above another frame the running context
	 * recorded. A coroutine's end needs it only to tell the running task's root,
	 * which runs other code, or none runs. */
	struct pl_py_func *fn = code_func(code);
	int suspended = how == PL_PY_MON_YIELD;
	if (fn && ((!fn->flags && (pt->ctx || pt->t->cur->depth >= 2)) ||
		   (fn->flags == PL_PY_CORO && !suspended && pt->root_code != code))) {
		forget_last(pt);
		ev_leave(pt->t, (uintptr_t)fn);
		return;
	}
	PL_PY_FRAME *fr = running(code);
	if (fr)
		on_return_fn(pt, fr, fn, arg, suspended);
}

/* One entry point an event, so that each inlines what its event already says. */
void pl_py_mon_start(PyObject *code)
{
	mon_call(code, PL_PY_MON_START);
}

void pl_py_mon_resume(PyObject *code)
{
	mon_call(code, PL_PY_MON_RESUME);
}

void pl_py_mon_throw(PyObject *code)
{
	mon_call(code, PL_PY_MON_THROW);
}

void pl_py_mon_return(PyObject *code, PyObject *arg)
{
	mon_return(code, arg, PL_PY_MON_RETURN);
}

void pl_py_mon_yield(PyObject *code, PyObject *arg)
{
	mon_return(code, arg, PL_PY_MON_YIELD);
}

void pl_py_mon_unwind(PyObject *code)
{
	mon_return(code, NULL, PL_PY_MON_UNWIND);
}
#endif

/* --- the frame-evaluation backend's events (evalframe.c) ------------------------- */

static void evalframe_hand_over(struct pl_py_thread *pt);

/* The last quarter of the calling thread's C stack (at least 128 KiB), or 1, 1 when
 * unknown. */
static void stack_bounds(struct pl_py_thread *pt)
{
	pthread_attr_t a;
	void *lo;
	size_t size;
	pt->stack_base = pt->stack_low = 1;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return;
	if (pthread_attr_getstack(&a, &lo, &size) == 0 && lo && size) {
		size_t margin = size / 4 > 128 * 1024 ? size / 4 : 128 * 1024;
		pt->stack_base = (uintptr_t)lo;
		pt->stack_low = (uintptr_t)lo + (margin < size ? margin : size);
	}
	pthread_attr_destroy(&a);
}

/* A frame one Python call deeper than the last one is this far below it at most, to
 * be taken for the cost of a call (a coroutine's own stack, a greenlet's copy: not). */
#define EVAL_STEP_MAX (64 * 1024)

/* The frame-evaluation backend hands over to the profile function for the C stack: on
 * 3.11 (stack_short). */
#define EVAL_HANDS_OVER (PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000)

/* 3.11: nonzero when the thread must hand over to the profile function before running
 * the frame whose C stack pointer is sp. Each frame run through the slot is a C frame
 * of the interpreter, which otherwise runs Python-to-Python calls in one, and those
 * frames stay on the stack after the hand-over. So the hand-over comes as soon as the
 * rest of the recursion Python allows (the limit less the depth) would not fit above
 * the stack's end at the cost of a call last measured here: most often at the
 * program's first call after it raised the limit that far, with few frames on the
 * stack; at the latest with three quarters of the stack used (a limit that fits, but
 * calls that grew dearer). Frames on another stack than the thread's own (a coroutine
 * library's) are not checked. (3.10 never hands over for its stack: there the profile
 * function takes more C stack per Python call than coprof's eval(), evalframe.c.) */
static inline int stack_short(struct pl_py_thread *pt, PyThreadState *ts, uintptr_t sp)
{
	if (!EVAL_HANDS_OVER)
		return 0;
	if (pl_py_unlikely(!pt->stack_low))
		stack_bounds(pt);
	if (sp < pt->stack_base)
		return 0;
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
	int limit = ts->recursion_limit;
	int depth = limit - ts->recursion_remaining;
#else
	int limit = 0, depth = 0;
#endif
	if (depth == pt->eval_depth + 1 && sp < pt->eval_sp && pt->eval_sp - sp < EVAL_STEP_MAX)
		pt->eval_step = pt->eval_sp - sp;
	pt->eval_sp = sp;
	pt->eval_depth = depth;
	if (pl_py_unlikely(sp < pt->stack_low))
		return 1;
	return depth < limit && (uintptr_t)(limit - depth) * pt->eval_step > sp - pt->stack_base;
}

struct pl_py_eval_run pl_py_eval_call(PyThreadState *ts, PL_PY_FRAME *fr, int thrown)
{
	struct pl_py_eval_run run = {(uintptr_t)fr | (thrown ? PL_PY_EVAL_THROWN : 0), ts};
	/* Off, or another backend on: coprof's function runs only because a PEP 523
	 * user chains to it, or put it back in the slot, where it is taken out (3.11
	 * inlines Python calls again, as with the default the program found). */
	if (pl_py_unlikely(!evalframe)) {
		pl_py_evalframe_stop();
		return run;
	}
	struct pl_py_thread *pt = thread_current();
	if (pl_py_unlikely(!pt || pt->busy))
		return run;
	if (pl_py_unlikely(stack_short(pt, ts, (uintptr_t)__builtin_frame_address(0)))) {
		evalframe_hand_over(pt);
		return run;
	}
	run.word |= PL_PY_EVAL_REPORTED | (pt->gen & 1 ? PL_PY_EVAL_GEN : 0);
	pt->busy = 1;
	on_call(pt, fr, thrown);
	pt->busy = 0;
	return run;
}

PyObject *pl_py_eval_return(uintptr_t word, PyObject *r)
{
	unsigned gen = __atomic_load_n(&pl_py_gen, __ATOMIC_RELAXED);
	struct pl_py_thread *pt = tls_pt;
	if (pl_py_unlikely(!evalframe || !pt || !(word & PL_PY_EVAL_GEN) != !(gen & 1)))
		return r;
	pt = thread_ready(pt);
	if (pl_py_unlikely(!pt))
		return r;
	pt->busy = 1;
	on_return(pt, (PL_PY_FRAME *)(word & ~PL_PY_EVAL_BITS), r);
	pt->busy = 0;
	return r;
}

/* --- the profile function backend ------------------------------------------------ */

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
	/* The C events, most of them when builtins are off: only start_new_thread's
	 * return matters then (3.10, 3.11; start_thread_ml stays NULL on 3.12+). */
	if (what >= PyTrace_C_CALL && !pl_py_host->builtins &&
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
		thread_free(pt);
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
		thread_free(pt);
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

/* The thread states of `in` that run a profile function of the program's own. */
static unsigned count_foreign(PyInterpreterState *in)
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

static void profile_install(PyThreadState *skip)
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

/* The frame-evaluation backend's thread pt runs short of C stack (GIL held, in an
 * event, stack_short): the slot is emptied (3.11 inlines Python calls again) and the
 * profile function goes on every thread that has none for the rest of the window. It
 * reports the returns of the frames whose calls the slot reported (pl_py_eval_return
 * reports none from now on). The calling thread's task state moves to the profile
 * function's state of its thread; other threads' start afresh (their running task is
 * adopted at its next resume). Counted as dropped ("python evalframe stack").
 *
 * A thread that runs a profile function of the program's own (cProfile,
 * sys.setprofile) keeps it: the program's profiler sees every call, and coprof
 * records nothing more on that thread in this window (its frames open then are
 * closed at the dump, as when the program replaces coprof's profile function).
 * Counted as dropped ("python threads kept their profiler", one per thread) and said
 * once in the notes. */
static void evalframe_hand_over(struct pl_py_thread *pt)
{
	pl_py_evalframe_stop();
	evalframe = 0;
	evalframe_handed = 1;
	profile_install(NULL);
	struct coprof *p = *pl_py_host->prof;
	unsigned kept = count_foreign(PyThreadState_GetInterpreter(PyThreadState_Get()));
	if (p)
		coprof_count_dropped(p, "python evalframe stack", 1);
	static struct coprof *said;
	if (p && kept) {
		coprof_count_dropped(p, "python threads kept their profiler", kept);
		if (said != p)
			(void)coprof_set_note(
			    p, "python evalframe stack: a thread that ran a profile function of "
			       "the program's own at the hand-over kept it, and was not profiled "
			       "by coprof for the rest of that window (dropped: python threads "
			       "kept their profiler)");
		said = p;
	}
	PyThreadState *ts = PyThreadState_Get();
	if (ts->c_profilefunc != on_event || !ts->c_profileobj)
		return;
	struct pl_py_thread *np = capsule_pointer(ts->c_profileobj);
	if (!np || np == pt)
		return;
	np->t = pt->t;
	np->gen = pt->gen;
	np->root = pt->root;
	np->root_code = pt->root_code;
	np->ctx = pt->ctx;
	np->adopting = pt->adopting;
	free(np->drivers);
	np->drivers = pt->drivers;
	np->ndrivers = pt->ndrivers;
	np->cap = pt->cap;
	np->lost = pt->lost;
	pl_py_map_free(&np->agens);
	np->agens = pt->agens;
	memset(&pt->agens, 0, sizeof(pt->agens));
	pt->drivers = NULL;
	pt->ndrivers = pt->cap = pt->lost = 0;
	pt->root = pt->root_code = pt->adopting = NULL;
	pt->ctx = NULL;
}

static void profile_remove(void)
{
	PyInterpreterState *in = PyThreadState_GetInterpreter(PyThreadState_Get());
	for (PyThreadState *ts; (ts = next_to_hook(in, NULL, 0));)
		if (set_profile(ts, NULL, NULL) < 0)
			break;
}

/* --- choosing the backend --------------------------------------------------------- */

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
				  evalframe    ? "python hook: evalframe (PEP 523 frame evaluation)"
				  : monitoring ? "python hook: monitoring (sys.monitoring)"
					       : "python hook: profile (the profile function)");
}

void pl_py_install(PyThreadState *skip)
{
	int starting = !pl_py_installed;
	int b = backend();
	if (b < 0)
		return;
	if (b == B_EVALFRAME && evalframe_handed)
		b = B_PROFILE;
	monitoring = 0;
	evalframe = 0;
	if (b != B_PROFILE)
		(void)pthread_once(&tls_once, tls_init);
	if (b == B_MONITORING) {
		/* No tool id free: said once, and the profile function does the work. */
		monitoring = tls_ok && pl_py_monitor_start() == 0;
	} else if (b == B_EVALFRAME) {
		/* Another frame-evaluation function is in the slot (a debugger's, a
		 * JIT's): it stays, and the profile function does the work; said once
		 * when COPROF_PY_HOOK=evalframe asked for this one. */
		static int said;
		evalframe = tls_ok && pl_py_evalframe_start() == 0;
		if (!evalframe && pl_py_host->hook == PL_PY_HOOK_EVALFRAME && !said) {
			said = 1;
			pl_py_host->say("COPROF_PY_HOOK=evalframe: %s; profiling through the "
					"profile function instead",
					tls_ok ? "another frame-evaluation function is installed"
					       : "no thread-local storage");
		}
	}
	if (!monitoring && !evalframe)
		profile_install(skip);
	note_backend(starting);
	__atomic_store_n(&pl_py_installed, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&pl_py_new_threads, 0, __ATOMIC_RELEASE);
}

/* The innermost frame thread state ts runs, or NULL. */
static PL_PY_FRAME *ts_frame(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030D0000
	return ts->current_frame;
#elif PY_VERSION_HEX >= 0x030B0000
	return ts->cframe ? ts->cframe->current_frame : NULL;
#else
	return ts->frame;
#endif
}

/* The first task of this process without a weak reference whose root runs on a thread
 * of `in` (so it is alive), or NULL; *root: that root. */
static struct task *unwatched_running(PyInterpreterState *in, PyObject **root)
{
	for (PyThreadState *ts = PyInterpreterState_ThreadHead(in); ts; ts = PyThreadState_Next(ts))
		for (PL_PY_FRAME *fr = ts_frame(ts); fr; fr = pl_py_frame_back(fr)) {
			PyObject *g = pl_py_frame_gen(fr);
			struct task *tk = g ? pl_py_map_get(&task_map, (uintptr_t)g) : NULL;
			if (tk && !tk->watched && tk->forks == pl_py_forks) {
				*root = g;
				return tk;
			}
		}
	return NULL;
}

static int give_up_watch(uintptr_t k, void *v, void *arg)
{
	(void)k;
	(void)arg;
	((struct task *)v)->watched = 1;
	return 0;
}

/* Before the hook goes off, every task gets its weak reference, the hook being blind
 * to its end from now on: a task without one is in its first run, so its root is on
 * a thread's stack (found there: it is alive). One that is not (its end was missed:
 * out of memory, a program that replaced the profile function, a greenlet switched
 * away) is never looked at again, only known by its address. The walk starts afresh
 * after each reference made: making one may run a finalizer, which may drop the GIL. */
static void watch_all(void)
{
	PyInterpreterState *in = PyThreadState_GetInterpreter(PyThreadState_Get());
	PyObject *root;
	for (struct task *tk; (tk = unwatched_running(in, &root));)
		task_watch(tk, root);
	pl_py_map_sweep(&task_map, give_up_watch, NULL);
}

void pl_py_remove(void)
{
	watch_all();
	if (monitoring)
		pl_py_monitor_stop();
	else if (evalframe)
		pl_py_evalframe_stop();
	else
		profile_remove();
	evalframe = 0; /* a PEP 523 user that chains to eval() finds it silent */
	evalframe_handed = 0;
	pl_py_installed = 0;
}

/* --- greenlets (greenlet/greenlet.c) --------------------------------------------- */

struct pl_py_thread *pl_py_thread_self(void)
{
	if (!pl_py_installed)
		return NULL;
	if (monitoring || evalframe)
		return pl_py_thread_current();
	PyThreadState *ts = PyThreadState_Get();
	if (ts->c_profilefunc != on_event || !ts->c_profileobj)
		return NULL;
	return thread_ready(PyCapsule_GetPointer(ts->c_profileobj, NULL));
}

void pl_py_chain_swap(struct pl_py_thread *pt, struct pl_py_chain *out, struct pl_py_chain *in)
{
	free(out->drivers); /* none: it was moved into pt when `out` last ran */
	out->root = pt->root;
	out->root_code = pt->root_code;
	out->ctx = pt->ctx;
	out->adopting = pt->adopting;
	out->drivers = pt->drivers;
	out->ndrivers = pt->ndrivers;
	out->cap = pt->cap;
	out->lost = pt->lost;
	out->gen = pt->gen;
	pt->pushed = NULL;
	pt->yielded_to = NULL;
	pt->root_fr = NULL;
	pt->drivers = in->drivers;
	pt->cap = in->cap;
	in->drivers = NULL;
	in->cap = 0;
	if (in->gen == pt->gen) {
		pt->root = in->root;
		pt->root_code = in->root_code;
		pt->ctx = in->ctx;
		pt->adopting = in->adopting;
		pt->ndrivers = in->ndrivers;
		pt->lost = in->lost;
	} else { /* saved in an earlier window: the tasks it ran are adopted afresh */
		pt->root = pt->root_code = NULL;
		pt->ctx = in->base;
		pt->adopting = NULL;
		pt->ndrivers = 0;
		pt->lost = 0;
	}
	coprof_ctx_switch(pt->t, pt->ctx);
}
