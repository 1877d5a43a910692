/* task-table.c: the hook's tasks. A task is a coroutine chain resumed by a
 * non-coroutine driver (an asyncio task's root coroutine): one engine context each,
 * kept across profiling windows until the task ends, found by its root coroutine.
 * Switching a task in and out, adopting one first seen mid-life, and telling which
 * chain a resumed frame belongs to. Runs in the thread of the event, GIL held. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hook.h"

/* Tasks switched in while another runs (a coroutine driving another by send()), at
 * most: deeper ones are counted as dropped ("python drivers"). */
#define MAX_DRIVERS 65536

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
	int asyncio;		 /* an asyncio task's: id is its Task's address */
	uint64_t id;		 /* its context's id */
	struct pl_py_wait *wait; /* what it waits on while suspended (task-awaits.c) */
};

/* root coroutine (identity only) -> struct task; used with the GIL held */
static struct pl_py_map task_map;

/* Rule 12: roots made ready before their task's context could be told (a task not run
 * yet, or another thread's) -> the wall clock since then. Each is taken at the task's
 * next resume. A coroutine that never ran (cancelled first) leaves its entry, which a
 * root later made at its address takes, unless its own scheduling replaced it first
 * (asyncio schedules every task's first step); the table is emptied when it holds
 * READY_KEPT of them. */
static struct pl_py_map ready_map;
#define READY_KEPT 65536

static struct task *task_get(struct pl_py_thread *pt, PyObject *root)
{
	struct task *tk = pl_py_map_get(&task_map, (uintptr_t)root);
	return tk && tk->t == pt->t && tk->forks == pl_py_forks ? tk : NULL;
}

static void task_free(struct task *tk)
{
	pl_py_wait_free(tk->wait);
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

/* (3.13 closes a coroutine suspended outside any try block with no event at
 * all: one a collection closes stays suspended otherwise, unless a later coroutine
 * happens to start at its address.) */
void pl_py_sweep_ended(struct pl_py_thread *pt)
{
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	pl_py_map_sweep(&task_map, task_sweep, pt);
	pl_py_exc_restore(&e);
}

/* The size of task_map at which a new task sweeps it first (pl_py_sweep_ended): twice what
 * the last sweep left, so a sweep costs O(1) per task made. A task whose coroutine
 * ended with no event seen (none is known left, but a misread chain was one) is so
 * finished while its thread runs on, not kept until the window or the thread ends. */
#define SWEEP_MIN 256
static uint32_t sweep_at = SWEEP_MIN;

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

void pl_py_switch_out(struct pl_py_thread *pt, int finished)
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
		if (tk && tk->asyncio)
			pl_py_wait_ended(tk->id, pt->ctx);
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

const char *pl_py_task_name(struct pl_py_thread *pt, PyObject *task)
{
	PyObject *coro = pl_py_task_coro(task);
	struct task *tk = coro ? task_get(pt, coro) : NULL;
	Py_XDECREF(coro); /* the task holds it */
	return tk && tk->ctx->name ? tk->ctx->name : NULL;
}

int pl_py_root_suspends(struct pl_py_thread *pt, PyObject *yielded)
{
	struct task *tk = task_get(pt, pt->root);
	struct pl_py_wait *inner = pt->inner_wait;
	pt->inner_wait = NULL;
	if (tk && tk->asyncio && yielded && yielded != Py_None) {
		pl_py_wait_free(tk->wait); /* (a resume not seen) */
		tk->wait = pl_py_wait_begin(pt, tk->id, yielded, inner);
	} else {
		pl_py_wait_free(inner);
	}
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
int pl_py_task_enter(struct pl_py_thread *pt, PyObject *root, struct pl_py_func *fn, int fresh)
{
	struct task *tk = task_get(pt, root);
	if (pl_py_unlikely(tk && tk->rename) && !fresh) {
		char name[128] = "";
		uint64_t id;
		const char *rt = NULL;
		pl_py_name_task(root, name, sizeof(name), &id, &rt);
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
			pl_py_sweep_ended(pt);
			sweep_at = task_map.n * 2 > SWEEP_MIN ? task_map.n * 2 : SWEEP_MIN;
		}
		const char *rt = NULL;
		struct coprof_ctx *ctx;
		pl_py_name_task(root, name, sizeof(name), &id, &rt);
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
		tk->id = id;
		tk->asyncio = strcmp(rt, "asyncio") == 0;
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
	if (pl_py_unlikely(tk->wait)) {
		pl_py_wait_end(pt, tk->ctx, tk->wait);
		tk->wait = NULL;
	}
	if (pl_py_unlikely(ready_map.n)) {
		uintptr_t since = (uintptr_t)pl_py_map_del(&ready_map, (uintptr_t)root);
		if (since)
			coprof_ctx_ready(pt->t, tk->ctx, since);
	}
	switch_in(pt, root, tk->ctx);
	return 0;
}

void pl_py_task_ready(struct pl_py_thread *pt, PyObject *root, uint64_t since)
{
	struct task *tk = task_get(pt, root);
	if (tk) {
		coprof_ctx_ready(pt->t, tk->ctx, since);
		return;
	}
	if (!since)
		since = pl_py_monotonic_ns();
	uintptr_t had = (uintptr_t)pl_py_map_get(&ready_map, (uintptr_t)root);
	if (had && had <= since)
		return; /* ready already: the earlier instant stands */
	if (!had && ready_map.n >= READY_KEPT)
		pl_py_map_free(&ready_map);
	pl_py_map_put(&ready_map, (uintptr_t)root, (void *)(uintptr_t)since);
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
int pl_py_chain_resume(struct pl_py_thread *pt, PL_PY_FRAME *fr, PL_PY_FRAME *back, int is_coro,
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
	return pl_py_task_enter(pt, g, pl_py_func_of(pl_py_frame_code(root)), 0);
}

/* --- before the hook goes off ----------------------------------------------------- */

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
void pl_py_watch_all(void)
{
	PyInterpreterState *in = PyThreadState_GetInterpreter(PyThreadState_Get());
	PyObject *root;
	for (struct task *tk; (tk = unwatched_running(in, &root));)
		task_watch(tk, root);
	pl_py_map_sweep(&task_map, give_up_watch, NULL);
}
