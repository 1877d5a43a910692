/* hook.h: the hook: CPython's call and return events -> engine events, with one
 * engine context per coroutine chain resumed by a non-coroutine driver (an asyncio
 * task's root coroutine, DESIGN rules 3-6), kept across profiling windows until the
 * task ends. Events come from one of three backends, each in a file of its own: the C
 * profile function on every thread state (backend-profile.c), sys.monitoring
 * (backend-monitoring.c), or a frame-evaluation function (backend-evalframe.c).
 * install.c chooses one and puts it on and off. Each backend's entry point inlines the
 * hot path below: the engine's events (engine-inline.h) and the coroutine rules. What
 * the events keep is the task table (task-table.c, task-names.c) and each thread's
 * state (thread-state.c).
 *
 * Events arrive in the thread that runs the code, with the GIL held. Under the profile
 * function each thread state carries its own struct pl_py_thread as the hook's
 * argument; under the other two each thread finds its own in thread-local storage.
 * The control thread puts the hook on and takes it off holding the GIL, so no event
 * runs meanwhile. */
#ifndef PL_PY_HOOK_H
#define PL_PY_HOOK_H

#include <string.h>
#include <time.h>

#include "engine-inline.h"
#include "python/py.h"

#include <internal/pycore_interp.h>

/* --- the engine's events, inlined ------------------------------------------------- */

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

/* --- one thread's state (thread-state.c) ---------------------------------------- */

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
	 * without walking the chain again. Any other event clears it (pl_py_chain_resume). */
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
	/* The tasks that one of asyncio's coroutines (fn->waits: a TaskGroup's __aexit__,
	 * asyncio.wait's _wait, wait_for) waits on, as it just yielded the future it
	 * waits with (task-awaits.c): the running task waits on them if its root yields
	 * that very future next; a generator-like frame's start or resume in between drops
	 * them. */
	struct pl_py_wait *inner_wait;
	/* Rule 12: how late the timer handle asyncio runs now fell due, ns (0: not a
	 * timer's, or on time), set as each handle starts (ready.c). */
	uint64_t late;
	/* Rule 11: the handle asyncio runs now calls a callback that is no task's step
	 * (a protocol's data_received, a call_later callback): a step of the driver's,
	 * named cb_name, from Handle._run's start to its end (ready.c). */
	uint8_t cb_open;
	char cb_name[48];
};

/* The hook's state for the asyncio chain running in one greenlet (greenlet/greenlet.c):
 * the running task's root and context, the drivers below it. Kept in the greenlet's
 * record while it is switched out, swapped into the thread's state as it runs. */
struct pl_py_chain {
	struct coprof_ctx *base; /* the greenlet's own context; NULL: the thread's own */
	PyObject *root;
	PyObject *root_code;
	struct coprof_ctx *ctx;
	PyObject *adopting;
	void *drivers; /* owned while the greenlet is switched out */
	unsigned ndrivers, cap, lost;
	unsigned gen; /* the pl_py_gen it was saved in: a stale chain restarts at base */
};

/* The calling thread's state under the sys.monitoring and frame-evaluation backends
 * (the profile function's travels with the thread state): read by every event, a load
 * from the thread pointer (the adapter is loaded at start-up, where glibc keeps room
 * for a module's initial-exec TLS). */
extern PL_PY_HIDDEN __thread struct pl_py_thread *pl_py_tls_pt
    __attribute__((tls_model("initial-exec")));
/* Makes the calling thread's state at its first event (no one visits the thread states
 * under those two backends; the thread frees it when it exits, never the control
 * thread, so an event that drops the GIL midway finds its state still there). */
PL_PY_HIDDEN struct pl_py_thread *pl_py_tls_new(void);
/* The thread-local key the above needs, made once: nonzero when it is usable. */
PL_PY_HIDDEN int pl_py_tls_ready(void);
/* Forgets what the last start or fork made stale (thread_ready). */
PL_PY_HIDDEN void pl_py_thread_reset(struct pl_py_thread *pt);
PL_PY_HIDDEN void pl_py_thread_free(struct pl_py_thread *pt);
/* The context a thread's first event of a window finds it in when that is not its own:
 * the greenlet running (greenlet/greenlet.c sets it once greenlet is imported). NULL:
 * none. */
extern PL_PY_HIDDEN struct coprof_ctx *(*pl_py_window_ctx)(struct coprof_thread *t);
/* The chain pt runs (its running task, the drivers under it) into c, which owns its
 * drivers from then on; pt is left with none. */
PL_PY_HIDDEN void pl_py_chain_save(struct pl_py_thread *pt, struct pl_py_chain *c);
/* c's chain becomes pt's (pt's drivers are freed first), if c was saved in pt's
 * generation; else pt starts afresh in c's base context. */
PL_PY_HIDDEN void pl_py_chain_load(struct pl_py_thread *pt, struct pl_py_chain *c);
/* A greenlet switch: pt's chain is saved into `out`, `in`'s becomes pt's, and the
 * engine runs its context. No Python code runs. */
PL_PY_HIDDEN void pl_py_chain_swap(struct pl_py_thread *pt, struct pl_py_chain *out,
				   struct pl_py_chain *in);
/* async_generator_wrapped_value, once seen (is_wrapped_value). */
extern PL_PY_HIDDEN PyTypeObject *pl_py_wrapped_type;

/* What on_call and on_return keep from one event to the next, forgotten. */
static inline void forget_last(struct pl_py_thread *pt)
{
	pt->hint_fr = NULL;
	pt->pushed = NULL;
	pt->yielded_to = NULL;
	pt->root_fr = NULL;
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
		pl_py_thread_reset(pt);
	return pl_py_likely(pt->t) ? pt : NULL;
}

/* After anything that may have dropped the GIL (a call into Python): nonzero when the
 * control thread stopped or restarted profiling meanwhile, so what pt holds is of a
 * past session and the event must end here. */
static inline int thread_stale(const struct pl_py_thread *pt)
{
	return pt->dead || pt->gen != __atomic_load_n(&pl_py_gen, __ATOMIC_RELAXED);
}

/* The calling thread's state under the sys.monitoring and frame-evaluation backends,
 * brought up to date; NULL: record nothing for this thread. */
static inline struct pl_py_thread *thread_current(void)
{
	struct pl_py_thread *pt = pl_py_tls_pt;
	return thread_ready(pl_py_likely(pt) ? pt : pl_py_tls_new());
}

/* --- the task table (task-table.c, task-names.c) ----------------------------------- */

/* Finishes the contexts of this thread's tasks whose coroutine is gone or returned
 * without an event: at a window's first event, and when the thread's outermost frame
 * returns. */
PL_PY_HIDDEN void pl_py_sweep_ended(struct pl_py_thread *pt);
/* The running task suspended (finished nonzero: or finished): its driver runs again. */
PL_PY_HIDDEN void pl_py_switch_out(struct pl_py_thread *pt, int finished);
/* The running task's root suspends, yielding `yielded` (NULL: unknown): what its task
 * waits on is kept until it resumes (task-awaits.c); the first time, it gets its weak
 * reference. -1: the state went stale meanwhile (thread_stale); the event ends. */
PL_PY_HIDDEN int pl_py_root_suspends(struct pl_py_thread *pt, PyObject *yielded);
/* Switches to the task whose root coroutine is `root`, making its context on first
 * sight (`fresh`: the root starts now). -1: the state went stale; the event ends. */
PL_PY_HIDDEN int pl_py_task_enter(struct pl_py_thread *pt, PyObject *root, struct pl_py_func *fn,
				  int fresh);
/* A generator-like frame resumes: makes sure the task whose chain it belongs to is the
 * running context. -1: the state went stale; the event ends. */
PL_PY_HIDDEN int pl_py_chain_resume(struct pl_py_thread *pt, PL_PY_FRAME *fr, PL_PY_FRAME *back,
				    int is_coro, PL_PY_FRAME *hint);
/* CLOCK_MONOTONIC in ns: the engine's wall clock, which rule 12's instants are on. */
static inline uint64_t pl_py_monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Rule 12: the task whose root coroutine is `root` can run again, since wall clock
 * `since` (CLOCK_MONOTONIC ns; 0: now). A task not run yet, or another thread's, is
 * told at its next resume on its own thread. */
PL_PY_HIDDEN void pl_py_task_ready(struct pl_py_thread *pt, PyObject *root, uint64_t since);
/* One of asyncio's scheduling points (fn->sched, PL_PY_SCHED_*) has started in fr
 * (ready.c). */
PL_PY_HIDDEN void pl_py_sched_event(struct pl_py_thread *pt, PL_PY_FRAME *fr, unsigned kind);
/* Handle._run (fn->sched PL_PY_SCHED_RUN) returns or unwinds: the loop callback it
 * ran, if it was one, ends its step (rule 11). */
PL_PY_HIDDEN void pl_py_sched_return(struct pl_py_thread *pt);
/* Before the hook goes off: every task gets its weak reference (install.c). */
PL_PY_HIDDEN void pl_py_watch_all(void);
/* task.get_coro() for an asyncio Task, when that is a C method: a new reference or
 * NULL (an error may be set). No Python code runs. */
PL_PY_HIDDEN PyObject *pl_py_task_coro(PyObject *task);
/* The name of the context of this thread's task whose Task is `task` (alive), or NULL
 * when it has none yet. No Python code runs. */
PL_PY_HIDDEN const char *pl_py_task_name(struct pl_py_thread *pt, PyObject *task);
/* Names a new context after its asyncio task when `coro` is the root of the task
 * running now: the name into buf, the task's address into *id, "asyncio" into *rt;
 * *rt stays NULL when it is no asyncio task's (task-names.c). */
PL_PY_HIDDEN void pl_py_name_task(PyObject *coro, char *buf, size_t len, uint64_t *id,
				  const char **rt);

/* --- who awaits whom (task-awaits.c) ------------------------------------------------ */

/* What a suspended asyncio task waits on: the tasks, since when. */
struct pl_py_wait;
/* What the task whose Task is at waiter_id waits on as its root yields `yielded`: a
 * Task, a gather's future, a shield's outer future, or (`inner`, taken over: see
 * pl_py_wait_inner) the tasks a TaskGroup's end, asyncio.wait() or wait_for waits on.
 * NULL: no task. No Python code runs. */
PL_PY_HIDDEN struct pl_py_wait *pl_py_wait_begin(struct pl_py_thread *pt, uint64_t waiter_id,
						 PyObject *yielded, struct pl_py_wait *inner);
/* The waiting task (context `waiter`) resumes: each task it waited on is an edge, timed
 * from the suspension to the resume or that task's end. Frees w. */
PL_PY_HIDDEN void pl_py_wait_end(struct pl_py_thread *pt, struct coprof_ctx *waiter,
				 struct pl_py_wait *w);
PL_PY_HIDDEN void pl_py_wait_free(struct pl_py_wait *w);
/* The task whose Task is at `id` (context ctx) ended: a task waiting on it stops
 * waiting on it now. */
PL_PY_HIDDEN void pl_py_wait_ended(uint64_t id, const struct coprof_ctx *ctx);
/* One of asyncio's coroutines where a task waits on tasks (frame fr, of kind `waits`:
 * PL_PY_WAITS_*) yields `yielded`: when that is the future it waits with, the tasks
 * go into pt->inner_wait. */
PL_PY_HIDDEN void pl_py_wait_inner(struct pl_py_thread *pt, PL_PY_FRAME *fr, unsigned waits,
				   PyObject *yielded);

/* s into buf[len], cut to fit: what snprintf("%s") does, at a tenth of its cost (a
 * name or two is copied for every task made). */
static inline void copy_name(char *buf, size_t len, const char *s)
{
	size_t n = strnlen(s, len - 1);
	memcpy(buf, s, n);
	buf[n] = 0;
}

/* --- the coroutine rules, inlined into each backend's events ------------------------ */

static inline int is_coro_frame(PL_PY_FRAME *fr)
{
	PyCodeObject *co = fr ? pl_py_frame_code(fr) : NULL;
	return co && (co->co_flags & CORO_FLAGS);
}

static inline int is_gen_frame(PL_PY_FRAME *fr)
{
	PyCodeObject *co = fr ? pl_py_frame_code(fr) : NULL;
	return co && (co->co_flags & (CORO_FLAGS | CO_GENERATOR));
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
		if (pl_py_unlikely(fn->sched) && fr)
			pl_py_sched_event(pt, fr, fn->sched);
		ev_enter(pt->t, (uintptr_t)fn);
		return;
	}
	PL_PY_FRAME *hint = pt->hint_fr, *pushed = pt->pushed;
	int sent = pt->pushed_sent;
	if (pl_py_unlikely(pt->inner_wait)) {
		pl_py_wait_free(pt->inner_wait);
		pt->inner_wait = NULL;
	}
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
			if (pl_py_chain_resume(pt, fr, back, 1, hint) < 0)
				return;
			if (pl_py_unlikely(pt->adopting) && pt->adopting == pt->root)
				ev_resume(pt->t, key);
		} else if (!is_coro_frame(back) || pl_py_chain_resume(pt, fr, back, 0, NULL) == 0) {
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
		if (gen && chain_is_root(back) && pl_py_task_enter(pt, gen, fn, 1) < 0)
			return;
		ev_enter(pt->t, key);
		return;
	}
	/* Rule 3: a resumption is not a call; its frames are still on the task's stack. */
	if (pl_py_chain_resume(pt, fr, back, 1, hint) < 0)
		return;
	if ((fn->flags & PL_PY_ASYNC_GEN) && pl_py_map_del(&pt->agens, (uintptr_t)gen))
		resume_run(pt, fr, back, key, pushed, thrown); /* a new run after a value yield */
	else if (pl_py_unlikely(pt->adopting) && pt->adopting == pt->root)
		ev_resume(pt->t, key);
}

static inline int is_wrapped_value(PyObject *v)
{
	if (!v)
		return 0;
	if (Py_TYPE(v) == pl_py_wrapped_type)
		return 1;
	if (!pl_py_wrapped_type &&
	    strcmp(Py_TYPE(v)->tp_name, "async_generator_wrapped_value") == 0) {
		pl_py_wrapped_type = Py_TYPE(v);
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
		if (gen && gen == pt->root && (done || pl_py_root_suspends(pt, NULL) == 0))
			pl_py_switch_out(pt, done);
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
			if (pl_py_unlikely(fn->sched == PL_PY_SCHED_RUN))
				pl_py_sched_return(pt);
			ev_leave(pt->t, key);
			if ((fn->flags & PL_PY_GEN) && last == fr && pt->root_resumed)
				gen_returned(pt, back, pt->root_yes);
		}
		/* the thread's outermost frame: its tasks are over */
		if (pl_py_unlikely(!back))
			pl_py_sweep_ended(pt);
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
			if (gen == pt->root && pl_py_root_suspends(pt, NULL) == 0)
				pl_py_switch_out(pt, 0);
			return;
		}
		/* Rule 3: suspended, not returned. The task's root suspending hands the
		 * thread back to the driver (rule 4). */
		if (gen && gen == pt->root && pl_py_root_suspends(pt, arg) == 0)
			pl_py_switch_out(pt, 0);
		else if (pl_py_unlikely(fn->waits) && gen != pt->root)
			pl_py_wait_inner(pt, fr, fn->waits, arg);
		return;
	}
	ev_leave(pt->t, key);
	if (fn->flags & PL_PY_ASYNC_GEN)
		pl_py_map_del(&pt->agens, (uintptr_t)gen);
	if (gen && gen == pt->root)
		pl_py_switch_out(pt, 1);
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

/* A C builtin is entered (enter nonzero) or left. */
static inline void pl_py_on_builtin(struct pl_py_thread *pt, int enter, struct pl_py_func *fn)
{
	forget_last(pt);
	if (enter)
		ev_enter(pt->t, (uintptr_t)fn);
	else
		ev_leave(pt->t, (uintptr_t)fn);
}

/* --- the backends (backend-*.c) and their choice (install.c) ------------------------ */

/* The profile function backend: puts coprof's profile function on every thread state
 * of the interpreter that has none, but `skip` (GIL held); takes it off again. */
PL_PY_HIDDEN void pl_py_profile_install(PyThreadState *skip);
PL_PY_HIDDEN void pl_py_profile_remove(void);
/* The state of thread state ts when coprof's profile function is on it, else NULL. */
PL_PY_HIDDEN struct pl_py_thread *pl_py_profile_state(PyThreadState *ts);
/* The thread states of `in` that run a profile function of the program's own. */
PL_PY_HIDDEN unsigned pl_py_profile_foreign(PyInterpreterState *in);

/* The sys.monitoring backend: claims a tool id and turns its events on, interpreter-wide
 * (GIL held). Already on: 0. No free id, or before 3.12: says so once; -EBUSY or
 * -ENOTSUP. Stop turns the events off, unregisters the callbacks and frees the id. */
PL_PY_HIDDEN int pl_py_monitor_start(void);
PL_PY_HIDDEN void pl_py_monitor_stop(void);

/* The frame-evaluation backend: puts coprof's function in the interpreter's
 * frame-evaluation slot (3.10, 3.11; GIL held). 0, also when it is there already;
 * -EBUSY: another one is there (left alone); -ENOTSUP: 3.12+. Stop empties the slot
 * again, if coprof's function is the one in it. */
PL_PY_HIDDEN int pl_py_evalframe_start(void);
PL_PY_HIDDEN void pl_py_evalframe_stop(void);
/* The frame-evaluation backend is the one on; it handed over to the profile function
 * in this window (pl_py_evalframe_hand_over): a new thread's install keeps the profile
 * function. Written by install.c and at the hand-over. */
extern PL_PY_HIDDEN int pl_py_evalframe_on, pl_py_evalframe_handed;

/* Puts the hook on: sys.monitoring's events (3.12+, when COPROF_PY_HOOK picks it),
 * else the profile function on every thread state of the interpreter that lacks it,
 * except `skip` (the control thread's own). */
PL_PY_HIDDEN void pl_py_install(PyThreadState *skip);
/* Takes the hook off every thread state (or sys.monitoring). */
PL_PY_HIDDEN void pl_py_remove(void);
/* A thread was started since the hook was last put on every thread state. */
extern PL_PY_HIDDEN int pl_py_new_threads;
/* The profile hook is on (the thread states that exist carry it). */
extern PL_PY_HIDDEN int pl_py_installed;
/* The calling thread's state while the hook is on (any backend), brought up to date;
 * NULL when profiling is off or nothing is recorded for it (greenlet/greenlet.c). */
PL_PY_HIDDEN struct pl_py_thread *pl_py_thread_self(void);

#endif
