/* tasks.c: asyncio tasks in sample mode. The tick handler (walk.c) of any thread finds
 * the running task's root coroutine in the interrupted thread's frame chain and asks
 * this file for its engine context (async-signal-safe: a table read, no GIL). The table
 * is filled by scan(), with the GIL, when a tick met a coroutine it did not know: it
 * reads asyncio's own task sets (every loop's tasks, in every thread), makes a context
 * per task for the engine thread that runs the task's loop (named by Task.get_name(),
 * runtime "asyncio"), renames tasks whose name changed and finishes those whose
 * coroutine finished or died; under wall it also reads where each suspended task waits.
 * Where scan() runs: on 3.12+, a pending call any thread that runs bytecode may run
 * (_PyEval_AddPendingCall, not main-thread-only); up to 3.11 pending calls run on the
 * main thread only, so a call the main thread has not run after STALL_FOLDS folds (it
 * is blocked in thread.join(), or sleeps), or one a tick of another thread asked for,
 * is done by the folding thread itself, which takes the GIL for it (gil.c), outside
 * the sampler's fork lock.
 * Contexts: pl_pys_task_ctx and pl_pys_tasks_tick run in the tick handler
 * (async-signal-safe); scan() and what it calls on whichever thread holds the GIL;
 * pl_pys_fold on the shim's folding thread, without the GIL, under the sampler's fork
 * lock; pl_pys_after_fold on the folding thread, outside it.
 *
 * Readers and the writer: the handlers of every thread read the table while scan(),
 * on another thread, may rewrite it. A sequence counter (odd while scan() changes a slot)
 * tells a reader that its read may be torn: it then gives up (the tick goes to the
 * thread's own context). A slot's weak reference, which a reader dereferences, is not
 * let go when its slot is freed but at a later scan that sees no reader in the table
 * (`readers`, counted by the handlers around their read): a reader that found the slot
 * before it was freed is done by then, and one that came later cannot find it.
 * Contexts are never freed by this file: the engine frees a finished one at its next
 * clear, after the dump, and a tick's record that names one only serves as its key.
 *
 * The first-scan gap: a tick that meets a coroutine no scan has listed yet cannot know
 * its task, and the scan it asks for waits for the next fold and then for a thread
 * that holds the GIL (under load, for tenths of a second). Such a tick carries the
 * coroutine's address, its root's code key and the number of scans of asyncio's task
 * sets begun before it (`begun`); the folding thread holds it back and asks
 * pl_pys_claim once that number's next scan has ended. Each scan logs the tasks it
 * lists for the first time (`births`): address, root code key, the scan's number and
 * context. A tick is the task's when the very next scan after it logged a task at that
 * address with that code; else it stays with the thread, as it would have without the
 * wait. A coroutine that finished after the tick and another made at its address is
 * only told apart by its code (two tasks of one coroutine function are not), and one
 * not started yet at the scan never ran at the tick: it is not logged.
 *
 * Liveness: an entry holds a weak reference to its coroutine, made by PyWeakref_NewRef
 * with no callback, which CPython keeps at the head of the coroutine's weak reference
 * list. The handler accepts an entry only when the coroutine on the frame chain has
 * that very reference at the head of its list and the reference still points at it: a
 * coroutine that died has its reference cleared and off its list, so another coroutine
 * that reuses its address is never given the dead task's context or name. */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sampling.h" /* Python.h first */
#include "coprof-private.h"
#if PY_VERSION_HEX < 0x030D0000
#include <internal/pycore_atomic.h>
#include <internal/pycore_interp.h>
#endif
#include <internal/pycore_runtime.h>
#if PY_VERSION_HEX >= 0x030C0000
#include <internal/pycore_ceval.h> /* _PyEval_AddPendingCall */
#endif
#include <sys/syscall.h>
#include <unistd.h>

#define NSLOTS 4096u /* tasks known at once; a power of two */
#define PROBES 64u   /* slots a lookup tries */
#define TOMB ((uintptr_t)1)
#define NUNKNOWN 8u	   /* coroutines no task owns, remembered so as not to rescan */
#define RESCAN_FOLDS 20u   /* folds (10 ms) between full scans while tasks exist */
#define WALL_FULL_FOLDS 5u /* wall: folds between full scans (waits: every fold) */
#define WAIT_MAX 64u	   /* frames of a wait stack */
#define STALL_FOLDS 2u	   /* up to 3.11: folds a queued call may wait before the GIL is taken */

/* Under wall: where a task was suspended at the last scan, and since when. Kept in the
 * slot, which the scan reads anyway: only the stack lies elsewhere. */
struct wait {
	uint64_t last;	 /* ns, CLOCK_MONOTONIC at the scan that last saw it */
	uint64_t pend;	 /* ns waited at keys, not yet handed to the sampler */
	const void *ip;	 /* where the root coroutine was suspended */
	unsigned n;	 /* 0: not suspended */
	unsigned win;	 /* the sampling window it was seen in */
	uintptr_t *keys; /* WAIT_MAX, innermost first; allocated at the first wait */
};
#define EMIT_SCANS 10u /* a wait under way goes to the sampler every so many scans */
/* ns: and once it holds this much: when scans are far apart (a loaded machine delays
 * them) a wait does not keep ten of them unsaid */
#define EMIT_NS 200000000u

/* One task. Written only by scan(), with the GIL; ref and ctx are read by handlers. */
struct slot {
	_Atomic uintptr_t coro;	     /* the task's coroutine; 0: never used; TOMB: freed */
	PyObject *ref;		     /* our weak reference to coro (strong on the weakref) */
	PyObject *name;		     /* the name its context has (strong) */
	struct coprof_ctx *ctx;	     /* a sampled context (coprof_ctx_create_sampled) of owner */
	struct coprof_thread *owner; /* the engine thread running the task's loop */
	unsigned forks;		     /* tforks when made: a fork child's profiler is a new one */
	atomic_int ran;		     /* a tick found it running since the last scan */
	int listed;		     /* its index is in `live` */
	struct wait wait;	     /* wall only */
};

static struct slot slots[NSLOTS];
/* The slots in use (and some freed since), so that a scan reads those only: with
 * 1,000 idle tasks under wall, reading all 4,096 slots every 10 ms cost as much as
 * looking at the tasks. scan() only. */
static uint16_t live[NSLOTS];
static unsigned nlive;
/* Odd while scan() changes a slot: a reader that saw it odd, or changed across its
 * read, gives up. */
static atomic_uint seq;
/* Handlers inside their read of the table, on every thread. */
static atomic_int readers;
/* Weak references of freed slots, let go once no reader is in the table (scan() only). */
static PyObject *grave[NSLOTS];
static unsigned ngrave;
/* scan() under way: a second one (the folding thread's while a pending call's let the
 * GIL go in a finalizer) does nothing. */
static atomic_int scanning;
static unsigned tforks;
static atomic_uint windows; /* sampling starts: a wait seen before one is not counted */
/* Python finalizes: the folding thread queues no call from then on (Py_FinalizeEx
 * frees the queue's lock at its end, maybe under a Py_AddPendingCall). `queuing` is
 * set by the folding thread around its check and call. */
static atomic_int closing, queuing;
static atomic_int want;	      /* a tick met a coroutine of no known task */
static atomic_int pending;    /* a scan is queued: 1 being queued, 2 queued and not run */
static atomic_uint queued_at; /* the fold it was queued at */
static atomic_uint gil_what;  /* up to 3.11: what the folding thread is to scan itself */
static atomic_int want_far;   /* up to 3.11: the tick that asked was not the main thread's */
static atomic_int have_tasks;
static atomic_uint folds;
/* Roots no task owned at a scan, and the fold they were found at: not asked about
 * again for UNKNOWN_FOLDS (their address may be a new task's after that). */
static _Atomic uintptr_t unknown[NUNKNOWN];
static atomic_uint unknown_at[NUNKNOWN];
#define UNKNOWN_FOLDS 5u
static _Atomic uintptr_t asked; /* the last root a tick asked about */
/* Scans that read asyncio's task sets: begun (the number of the last one begun), and
 * ended (the number of the last one ended); scan_now only, read by any thread. */
static atomic_uint begun, ended;
/* The tasks scans listed for the first time, for pl_pys_claim: a ring written by
 * scan_now alone. nbirths counts the entries written, nwriting those begun; a reader
 * reads below nbirths and rechecks nwriting after its read, since the writer may have
 * come round to the entry meanwhile. */
#define NBIRTHS 4096u /* a power of two */
struct birth {
	_Atomic uintptr_t coro;
	_Atomic uintptr_t key;		  /* its root's code key */
	_Atomic(struct coprof_ctx *) ctx; /* the context its slot got */
	atomic_uint scan;		  /* the scan that listed it (begun) */
};
static struct birth births[NBIRTHS];
static atomic_uint nbirths, nwriting;

static unsigned hash(uintptr_t p)
{
	uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull;
	return (unsigned)(h >> 40);
}

static int weak_head_is(PyObject *coro, PyObject *ref)
{
	return ((PyGenObject *)coro)->gi_weakreflist == ref &&
	       ((PyWeakReference *)ref)->wr_object == coro;
}

#if PY_VERSION_HEX < 0x030C0000
/* async-signal-safe. Nonzero when ts is the main thread's: pending calls run there only. */
static int is_main(PyThreadState *ts)
{
	return ts->thread_id == _PyRuntime.main_thread;
}
#endif

/* async-signal-safe. The table's answer for coro, read between two loads of seq: 1 and
 * *out (maybe NULL: no task), or 0 when a scan rewrote the table meanwhile. `coro`
 * runs on the calling thread, so it is alive; a slot's reference is alive while the
 * reader is counted in `readers` (see the header). */
static int lookup(PyObject *coro, struct coprof_ctx **out)
{
	*out = NULL;
	unsigned s1 = atomic_load_explicit(&seq, memory_order_acquire);
	if (s1 & 1)
		return 0;
	unsigned h = hash((uintptr_t)coro);
	struct slot *found = NULL;
	for (unsigned i = 0; i < PROBES; i++) {
		struct slot *sl = &slots[(h + i) & (NSLOTS - 1)];
		uintptr_t c = atomic_load_explicit(&sl->coro, memory_order_acquire);
		if (!c)
			break;
		if (c != (uintptr_t)coro)
			continue;
		PyObject *ref = __atomic_load_n(&sl->ref, __ATOMIC_RELAXED);
		if (__atomic_load_n(&sl->forks, __ATOMIC_RELAXED) == tforks && ref &&
		    weak_head_is(coro, ref)) {
			*out = __atomic_load_n(&sl->ctx, __ATOMIC_RELAXED);
			found = sl;
		}
		break;
	}
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&seq, memory_order_relaxed) != s1) {
		*out = NULL;
		return 0;
	}
	if (found)
		atomic_store_explicit(&found->ran, 1, memory_order_relaxed);
	return 1;
}

/* async-signal-safe */
struct coprof_ctx *pl_pys_task_ctx(PyThreadState *ts, PyObject *coro, struct pl_py_sample *s)
{
	unsigned gen = atomic_load_explicit(&begun, memory_order_acquire);
	atomic_fetch_add(&readers, 1);
	atomic_thread_fence(memory_order_seq_cst);
	struct coprof_ctx *ctx;
	int whole = lookup(coro, &ctx);
	atomic_fetch_sub_explicit(&readers, 1, memory_order_release);
	if (!whole || ctx)
		return ctx; /* torn: the scan under way sees it */
	for (unsigned i = 0; i < NUNKNOWN; i++)
		if (atomic_load_explicit(&unknown[i], memory_order_relaxed) == (uintptr_t)coro &&
		    atomic_load_explicit(&folds, memory_order_relaxed) -
			    atomic_load_explicit(&unknown_at[i], memory_order_relaxed) <
			UNKNOWN_FOLDS)
			return NULL;
	atomic_store_explicit(&asked, (uintptr_t)coro, memory_order_relaxed);
#if PY_VERSION_HEX < 0x030C0000
	if (!is_main(ts))
		atomic_store_explicit(&want_far, 1, memory_order_relaxed);
#else
	(void)ts;
#endif
	atomic_store_explicit(&want, 1, memory_order_release);
	s->new_coro = (uintptr_t)coro; /* the scan asked for may claim the tick */
	s->new_gen = gen;
	return NULL;
}

/* async-signal-safe. Up to 3.11 a pending call (main thread only) queued by another
 * thread sets the main thread's eval breaker only when CPython recomputes it there
 * (the queuing thread computes it, as if it were not the main thread): until a GIL
 * switch, a CPU-bound task would run on unseen. While a scan is queued each tick of
 * the main thread sets the breaker itself (interpreter-wide); the main thread then runs
 * the queued call, which computes it anew. 3.12 and 3.13 queue a call any thread may
 * run: 3.12's queuing sets the interpreter-wide breaker and the thread that runs the
 * calls computes it anew; 3.13's sets the bit on the thread holding the GIL (or on the
 * next to take it), and the thread that runs the calls clears its own. */
void pl_pys_tasks_tick(PyThreadState *ts)
{
#if PY_VERSION_HEX < 0x030C0000
	/* Only the main thread runs the call and then computes the breaker anew: set by
	 * another thread's tick, it would stay set, and that thread's eval loop would look
	 * for pending work at every check while the main thread runs no Python. */
	if (atomic_load_explicit(&pending, memory_order_relaxed) == 2 && is_main(ts))
		_Py_atomic_store_relaxed(&ts->interp->ceval.eval_breaker, 1);
#else
	(void)ts;
#endif
}

/* --- the scan: any thread, GIL held ----------------------------------------------- */

static PyObject *s_get_coro, *s_get_name, *s_get_loop, *s_thread_id, *s_native_id;

/* Appends to `out` the tasks of one of asyncio's task sets: a WeakSet (its `data` set
 * of references) or a set. 0, or -1 with an exception set. */
static int add_tasks(PyObject *mod, const char *attr, int weak, PyObject *out)
{
	PyObject *set = PyObject_GetAttrString(mod, attr);
	if (!set) {
		PyErr_Clear();
		return 0;
	}
	PyObject *data = weak ? PyObject_GetAttrString(set, "data") : Py_NewRef(set);
	Py_DECREF(set);
	if (!data || !PyAnySet_Check(data)) {
		Py_XDECREF(data);
		PyErr_Clear();
		return 0;
	}
	/* A C copy: no Python code runs while the set is read. */
	PyObject *items = PySequence_List(data);
	Py_DECREF(data);
	if (!items)
		return -1;
	int rc = 0;
	for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(items); i++) {
		PyObject *t = PyList_GET_ITEM(items, i);
		if (weak) {
			if (!PyWeakref_Check(t))
				continue;
#if PY_VERSION_HEX >= 0x030D0000
			if (PyWeakref_GetRef(t, &t) <= 0) {
				PyErr_Clear();
				continue;
			}
			rc = PyList_Append(out, t);
			Py_DECREF(t);
			continue;
#else
			t = PyWeakref_GetObject(t);
			if (!t || t == Py_None)
				continue;
#endif
		}
		rc = PyList_Append(out, t);
	}
	Py_DECREF(items);
	return rc;
}

/* Every task asyncio knows of (a new list), or NULL when asyncio is not imported. */
static PyObject *all_tasks(void)
{
	static PyObject *mod_name;
	if (!mod_name && !(mod_name = PyUnicode_InternFromString("asyncio.tasks"))) {
		PyErr_Clear();
		return NULL;
	}
	PyObject *mod = PyImport_GetModule(mod_name);
	if (!mod) {
		PyErr_Clear();
		return NULL;
	}
	PyObject *out = PyList_New(0);
	int rc = out ? 0 : -1;
#if PY_VERSION_HEX >= 0x030C0000
	if (rc == 0)
		rc = add_tasks(mod, "_scheduled_tasks", 1, out);
	if (rc == 0)
		rc = add_tasks(mod, "_eager_tasks", 0, out);
#else
	if (rc == 0)
		rc = add_tasks(mod, "_all_tasks", 1, out);
#endif
	Py_DECREF(mod);
	if (rc < 0) {
		PyErr_Clear();
		Py_CLEAR(out);
	}
	return out;
}

static int coro_finished(PyObject *coro)
{
#if PY_VERSION_HEX >= 0x030B0000
	return ((PyGenObject *)coro)->gi_frame_state >= FRAME_COMPLETED;
#else
	PyFrameObject *f = ((PyGenObject *)coro)->gi_frame;
	return !f || f->f_state > FRAME_EXECUTING;
#endif
}

/* The slot of coro, or NULL. */
static struct slot *find(PyObject *coro)
{
	unsigned h = hash((uintptr_t)coro);
	for (unsigned i = 0; i < PROBES; i++) {
		struct slot *sl = &slots[(h + i) & (NSLOTS - 1)];
		uintptr_t c = atomic_load_explicit(&sl->coro, memory_order_relaxed);
		if (!c)
			return NULL;
		if (c == (uintptr_t)coro)
			return sl;
	}
	return NULL;
}

/* A free slot on coro's probe path (after find found none), or NULL: table full. */
static struct slot *free_slot(PyObject *coro)
{
	unsigned h = hash((uintptr_t)coro);
	for (unsigned i = 0; i < PROBES; i++) {
		struct slot *sl = &slots[(h + i) & (NSLOTS - 1)];
		uintptr_t c = atomic_load_explicit(&sl->coro, memory_order_relaxed);
		if (!c || c == TOMB)
			return sl;
	}
	return NULL;
}

/* Around each change of a slot that handlers read (scan() only): seq is odd meanwhile,
 * and a handler whose read it overlapped gives up. Only the changes are covered, not
 * the whole scan: while a scan on another thread holds the GIL, the threads waiting
 * for it keep their ticks (under wall, 4% of a task's ticks were lost to scans of the
 * ASan build every 10 ms). */
static void write_begin(void)
{
	atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static void write_end(void)
{
	atomic_fetch_add_explicit(&seq, 1, memory_order_release);
}

/* Lets go of the weak references of freed slots once no handler reads the table: one
 * that came in after the slots were freed cannot find them (seq_cst: the stores that
 * freed them come before the load of `readers`). Else at the next scan. */
static void bury(void)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (!ngrave || atomic_load(&readers) != 0)
		return;
	for (unsigned i = 0; i < ngrave; i++)
		Py_DECREF(grave[i]);
	ngrave = 0;
}

/* Frees a slot (seq odd); its context is finished when it is this process's
 * profiler's. Its weak reference goes to the grave (bury). */
static void release(struct slot *sl)
{
	if (sl->forks == tforks && sl->ctx && sl->wait.n && sl->wait.pend)
		pl_py_host->task_wait(sl->owner, sl->ctx, sl->wait.keys, sl->wait.n, sl->wait.pend);
	if (sl->forks == tforks && sl->ctx)
		coprof_ctx_finish_sampled(sl->ctx);
	write_begin();
	atomic_store(&sl->coro, TOMB);
	PyObject *ref = sl->ref;
	__atomic_store_n(&sl->ref, NULL, __ATOMIC_RELAXED);
	__atomic_store_n(&sl->ctx, NULL, __ATOMIC_RELAXED);
	write_end();
	sl->owner = NULL;
	if (ref && ngrave == NSLOTS) { /* handlers kept coming: wait for them (microseconds) */
		while (atomic_load(&readers) != 0)
			sched_yield();
		bury();
	}
	if (ref)
		grave[ngrave++] = ref;
	Py_CLEAR(sl->name);
	free(sl->wait.keys);
	memset(&sl->wait, 0, sizeof(sl->wait));
}

static void set_name(struct slot *sl, PyObject *name)
{
	const char *s = PyUnicode_AsUTF8(name);
	if (!s) {
		PyErr_Clear();
		return;
	}
	coprof_ctx_set_name(sl->ctx, s);
	Py_XSETREF(sl->name, Py_NewRef(name));
}

/* Nonzero when coroutine or generator g is suspended (started, not running, not done). */
static int suspended(PyObject *g)
{
#if PY_VERSION_HEX >= 0x030B0000
	int st = ((PyGenObject *)g)->gi_frame_state;
	return st > FRAME_CREATED && st < FRAME_EXECUTING;
#else
	PyFrameObject *f = ((PyGenObject *)g)->gi_frame;
	return f && f->f_state == FRAME_SUSPENDED;
#endif
}

/* Nonzero once coroutine g has begun to run (it may have finished). */
static int started(PyObject *g)
{
#if PY_VERSION_HEX >= 0x030B0000
	return ((PyGenObject *)g)->gi_frame_state > FRAME_CREATED;
#else
	PyFrameObject *f = ((PyGenObject *)g)->gi_frame;
	return !f || f->f_state > FRAME_CREATED;
#endif
}

/* The code object of generator or coroutine g, read from the object (no attribute
 * lookup: cr_code is audited, and its event costs more than the rest). */
static PyCodeObject *gen_code(PyObject *g)
{
#if PY_VERSION_HEX >= 0x030D0000
	return (PyCodeObject *)((PL_PY_FRAME *)((PyGenObject *)g)->gi_iframe)->f_executable;
#elif PY_VERSION_HEX >= 0x030B0000
	return ((PL_PY_FRAME *)((PyGenObject *)g)->gi_iframe)->f_code;
#else
	return (PyCodeObject *)((PyGenObject *)g)->gi_code;
#endif
}

/* The key of a code object, its strings' hashes computed first (with the GIL), so that
 * names.c's cache can vouch for them and the next lookup is a hit. */
static uintptr_t key_of(PyCodeObject *co)
{
	if (!co || !PyCode_Check(co))
		return 0;
#if PY_VERSION_HEX >= 0x030B0000
	PyObject *name = co->co_qualname;
#else
	PyObject *name = co->co_name;
#endif
	if (PyObject_Hash(co->co_filename) == -1 || PyObject_Hash(name) == -1)
		PyErr_Clear();
	return pl_pys_key(co);
}

/* The stack a suspended task waits at, innermost first, into keys: its root
 * coroutine's frame, then what each awaits (cr_await, or a generator's gi_yieldfrom,
 * as types.coroutine's) down to the first that is no coroutine (a Future). The number
 * of frames; 0 when the root is not suspended. No Python code runs (C getters). */
static unsigned await_stack(PyObject *coro, uintptr_t *keys)
{
	static PyObject *s_cr_await, *s_gi_yieldfrom;
	if (!s_cr_await) {
		s_gi_yieldfrom = PyUnicode_InternFromString("gi_yieldfrom");
		s_cr_await = s_gi_yieldfrom ? PyUnicode_InternFromString("cr_await") : NULL;
		if (!s_cr_await) {
			PyErr_Clear();
			return 0;
		}
	}
	if (!suspended(coro))
		return 0;
	uintptr_t chain[WAIT_MAX];
	unsigned n = 0;
	PyObject *g = Py_NewRef(coro);
	while (g && n < WAIT_MAX) {
		int coro_type = PyCoro_CheckExact(g);
		if (!coro_type && !PyGen_CheckExact(g))
			break;
		uintptr_t key = key_of(gen_code(g));
		if (!key)
			break;
		chain[n++] = key;
		PyObject *next = PyObject_GetAttr(g, coro_type ? s_cr_await : s_gi_yieldfrom);
		Py_SETREF(g, next);
	}
	Py_XDECREF(g);
	PyErr_Clear();
	for (unsigned i = 0; i < n; i++)
		keys[i] = chain[n - 1 - i];
	return n;
}

/* Where a suspended coroutine's frame stopped. */
static const void *root_ip(PyObject *g)
{
#if PY_VERSION_HEX >= 0x030D0000
	return ((PL_PY_FRAME *)((PyGenObject *)g)->gi_iframe)->instr_ptr;
#elif PY_VERSION_HEX >= 0x030B0000
	return ((PL_PY_FRAME *)((PyGenObject *)g)->gi_iframe)->prev_instr;
#else
	PyFrameObject *f = ((PyGenObject *)g)->gi_frame;
	return f ? (const void *)(intptr_t)(f->f_lasti + 1) : NULL;
#endif
}

/* Under wall: a task found suspended at two scans in a row, at the same place, and
 * never running at a tick between them, waited there all that time. Its await chain
 * is read when it suspends anew (its root stopped elsewhere, or it ran); what it waits
 * goes to the sampler as the ticks it missed, when the wait ends and every EMIT_SCANS
 * scans while it lasts (each slot at its own scan: not a thousand idle tasks at once),
 * or sooner once it holds EMIT_NS, and when Python finalizes (pl_pys_tasks_closing). A
 * wait shorter than the scan interval is not seen; one seen counts from the scan that
 * first saw it. */
static void see_wait(struct slot *sl, PyObject *coro, uint64_t now, int emit)
{
	int ran = atomic_exchange_explicit(&sl->ran, 0, memory_order_relaxed);
	struct wait *w = &sl->wait;
	int susp = suspended(coro);
	const void *ip = susp ? root_ip(coro) : NULL;
	unsigned win = atomic_load(&windows);
	if (w->win != win) { /* sampling stopped since: what it held is not this window's */
		w->win = win;
		w->n = 0;
		w->pend = 0;
	}
	if (susp && !ran && w->n && ip == w->ip) {
		w->pend += now - w->last;
		w->last = now;
		if ((emit || w->pend >= EMIT_NS) && w->pend) {
			pl_py_host->task_wait(sl->owner, sl->ctx, w->keys, w->n, w->pend);
			w->pend = 0;
		}
		return;
	}
	if (w->pend && w->n)
		pl_py_host->task_wait(sl->owner, sl->ctx, w->keys, w->n, w->pend);
	w->pend = 0;
	if (susp && !w->keys)
		w->keys = malloc(WAIT_MAX * sizeof(w->keys[0]));
	w->n = susp && w->keys ? await_stack(coro, w->keys) : 0;
	w->ip = ip;
	w->last = now;
}

/* Kernel id of the calling thread. */
static pid_t self_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* The loops met by one scan and their threads: a scan asks threading once per loop. */
struct owners {
	PyObject *loop[8]; /* borrowed: the scan's task list holds them */
	struct coprof_thread *t[8];
	unsigned n;
};

/* The kernel id of the Python thread whose threading.get_ident() is `ident`, from
 * threading's own table (its Thread objects keep their native id): 0 when not found. */
static pid_t native_id_of(PyObject *ident)
{
	if (PyLong_AsUnsignedLong(ident) == PyThread_get_thread_ident())
		return self_tid();
	PyErr_Clear();
	static PyObject *s_threading;
	if (!s_threading && !(s_threading = PyUnicode_InternFromString("threading"))) {
		PyErr_Clear();
		return 0;
	}
	PyObject *mod = PyImport_GetModule(s_threading); /* imported by asyncio */
	PyObject *active = mod ? PyObject_GetAttrString(mod, "_active") : NULL;
	Py_XDECREF(mod);
	PyObject *th = active && PyDict_Check(active) ? PyDict_GetItemWithError(active, ident)
						      : NULL; /* borrowed */
	Py_XINCREF(th);
	Py_XDECREF(active);
	PyObject *nid = th ? PyObject_GetAttr(th, s_native_id) : NULL;
	Py_XDECREF(th);
	long v = nid && PyLong_Check(nid) ? PyLong_AsLong(nid) : 0;
	Py_XDECREF(nid);
	PyErr_Clear();
	return v > 0 ? (pid_t)v : 0;
}

/* The engine thread that runs task's loop (loop._thread_id, set while the loop runs),
 * NULL while it is not known: the loop does not run, or its thread is not sampled.
 * A loop without _thread_id (not asyncio's own) is taken to run on the scanning
 * thread. */
static struct coprof_thread *owner_of(PyObject *task, struct owners *o)
{
	PyObject *loop = PyObject_CallMethodNoArgs(task, s_get_loop);
	if (!loop) {
		PyErr_Clear();
		return NULL;
	}
	for (unsigned i = 0; i < o->n; i++)
		if (o->loop[i] == loop) {
			Py_DECREF(loop);
			return o->t[i];
		}
	pid_t tid = 0;
	PyObject *ident = PyObject_GetAttr(loop, s_thread_id);
	if (!ident) {
		PyErr_Clear();
		tid = self_tid();
	} else if (PyLong_Check(ident)) {
		tid = native_id_of(ident);
	}
	Py_XDECREF(ident);
	struct coprof_thread *t = tid ? pl_py_host->thread_of(tid) : NULL;
	if (o->n < 8) {
		o->loop[o->n] = loop; /* the task holds its loop for the scan */
		o->t[o->n++] = t;
	}
	Py_DECREF(loop);
	return t;
}

/* Logs a slot just made by scan number `scan` for pl_pys_claim, unless its coroutine
 * has not started: then it ran at no tick before this scan. */
static void log_birth(struct slot *sl, PyObject *coro, unsigned scan)
{
	if (!started(coro))
		return;
	uintptr_t key = key_of(gen_code(coro));
	if (!key)
		return;
	unsigned n = atomic_load_explicit(&nbirths, memory_order_relaxed);
	struct birth *b = &births[n & (NBIRTHS - 1)];
	/* A reader rechecks nwriting after its read: moving it first tells one that
	 * reads the entry this one replaces that it is being written over. */
	atomic_store_explicit(&nwriting, n + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&b->coro, (uintptr_t)coro, memory_order_relaxed);
	atomic_store_explicit(&b->key, key, memory_order_relaxed);
	atomic_store_explicit(&b->ctx, sl->ctx, memory_order_relaxed);
	atomic_store_explicit(&b->scan, scan, memory_order_relaxed);
	atomic_store_explicit(&nbirths, n + 1, memory_order_release);
}

/* One task: its slot is made at first sight, renamed when its name changed. `scan`:
 * the number of the scan (begun). */
static void see_task(struct owners *o, PyObject *task, int rename, unsigned scan)
{
	PyObject *coro = PyObject_CallMethodNoArgs(task, s_get_coro);
	if (!coro || !PyCoro_CheckExact(coro) || coro_finished(coro))
		goto out;
	PyObject *name = NULL;
	struct slot *sl = find(coro);
	int known = sl && sl->forks == tforks && sl->ref && weak_head_is(coro, sl->ref);
	if (known && !rename)
		goto out_name;
	name = PyObject_CallMethodNoArgs(task, s_get_name);
	if (!name || !PyUnicode_Check(name))
		goto out_name;
	if (known) {
		if (rename && sl->name != name && PyUnicode_Compare(sl->name, name) != 0)
			set_name(sl, name);
		goto out_name;
	}
	if (sl) /* a dead coroutine's slot at the same address */
		release(sl);
	PyObject *ref = pl_py_weakref(coro);
	if (!ref)
		goto out_name;
	/* Someone's basic reference is ours too (CPython shares it), at the head. */
	const char *s = PyUnicode_AsUTF8(name);
	struct coprof_ctx *ctx = NULL;
	struct coprof_thread *t = s ? owner_of(task, o) : NULL;
	if (!t || !(sl = free_slot(coro)) ||
	    coprof_ctx_create_sampled(t, (uint64_t)(uintptr_t)task, s, "asyncio", &ctx) != 0) {
		Py_DECREF(ref);
		goto out_name;
	}
	write_begin();
	__atomic_store_n(&sl->ref, ref, __ATOMIC_RELAXED);
	sl->name = Py_NewRef(name);
	__atomic_store_n(&sl->ctx, ctx, __ATOMIC_RELAXED);
	sl->owner = t;
	__atomic_store_n(&sl->forks, tforks, __ATOMIC_RELAXED);
	atomic_store_explicit(&sl->coro, (uintptr_t)coro, memory_order_release);
	write_end();
	if (!sl->listed) {
		sl->listed = 1;
		live[nlive++] = (uint16_t)(sl - slots);
	}
	log_birth(sl, coro, scan);
out_name:
	Py_XDECREF(name);
out:
	Py_XDECREF(coro);
	PyErr_Clear();
}

enum {
	SCAN_FULL = 1,	 /* read asyncio's task sets: new tasks */
	SCAN_RENAME = 2, /* and ask each task its name */
	SCAN_WAITS = 4,	 /* (wall) where known tasks wait: done at every scan */
};

static int interned(PyObject **s, const char *text)
{
	if (!*s && !(*s = PyUnicode_InternFromString(text)))
		PyErr_Clear();
	return *s != NULL;
}

/* Looks at every task, with the GIL. Never fails (a failure would raise in the
 * program); Python's own exception is kept aside. */
static void scan_now(unsigned what)
{
	if (atomic_exchange(&scanning, 1))
		return;
	pl_pys_steps_install();
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	int names = interned(&s_get_coro, "get_coro") && interned(&s_get_name, "get_name") &&
		    interned(&s_get_loop, "get_loop") && interned(&s_thread_id, "_thread_id") &&
		    interned(&s_native_id, "_native_id");
	uint64_t now = cp_clock_gettime_ns(CLOCK_MONOTONIC);
	static unsigned scans;
	scans++;
	/* Numbered before the task sets are read: a tick that read the number before
	 * met a coroutine this scan may list (pl_pys_claim). */
	unsigned number = names && (what & SCAN_FULL) ? atomic_fetch_add(&begun, 1) + 1 : 0;
	/* What ticks asked for before it: it lists every task. Only a scan that reads
	 * the task sets can tell that the root a tick asked about is no task's. */
	uintptr_t ask = number ? atomic_exchange(&asked, 0) : 0;
	if (number)
		atomic_store_explicit(&want, 0, memory_order_relaxed);
	PyObject *tasks = number ? all_tasks() : NULL;
	struct owners o = {.n = 0};
	for (Py_ssize_t i = 0; tasks && i < PyList_GET_SIZE(tasks); i++)
		see_task(&o, PyList_GET_ITEM(tasks, i), what & SCAN_RENAME, number);
	int wall = pl_py_host->clock == COPROF_CLOCK_WALL;
	int nlivetasks = 0;
	unsigned kept = 0;
	for (unsigned j = 0; j < nlive; j++) {
		unsigned i = live[j];
		struct slot *sl = &slots[i];
		uintptr_t c = atomic_load_explicit(&sl->coro, memory_order_relaxed);
		if (c == 0 || c == TOMB) {
			sl->listed = 0;
			continue;
		}
		live[kept++] = (uint16_t)i;
		PyObject *coro = (PyObject *)c;
		/* A cleared reference: the coroutine died (its memory may be another's). */
		if (sl->forks != tforks || !sl->ref ||
		    ((PyWeakReference *)sl->ref)->wr_object != coro || coro_finished(coro)) {
			release(sl);
			continue;
		}
		nlivetasks++;
		if (wall)
			see_wait(sl, coro, now, (scans + i) % EMIT_SCANS == 0);
	}
	if (ask && !find((PyObject *)ask)) {
		static unsigned next;
		atomic_store(&unknown_at[next % NUNKNOWN], atomic_load(&folds));
		atomic_store(&unknown[next++ % NUNKNOWN], ask);
	}
	nlive = kept;
	bury();
	if (what & SCAN_FULL)
		atomic_store(&have_tasks, nlivetasks > 0 || (tasks && PyList_GET_SIZE(tasks) > 0));
	Py_XDECREF(tasks);
	if (number)
		atomic_store_explicit(&ended, number, memory_order_release);
	pl_py_exc_restore(&e);
	atomic_store(&scanning, 0);
}

/* The context of the task that scan number gen + 1 listed for the first time at
 * address coro with root code root_key (see the header): 1 and *out; 0 when it listed
 * none; -EAGAIN while it has not ended. Any thread but a signal handler's, no GIL: it
 * reads the log only. A context stays valid until the engine's clear, which comes
 * after the stop that settles every tick held back. */
int pl_pys_claim(uintptr_t coro, uintptr_t root_key, unsigned gen, struct coprof_ctx **out)
{
	*out = NULL;
	unsigned want_scan = gen + 1;
	if ((int)(atomic_load_explicit(&ended, memory_order_acquire) - want_scan) < 0)
		return -EAGAIN;
	unsigned n = atomic_load_explicit(&nbirths, memory_order_acquire);
	/* Newest first: the entries of one scan lie together, in the scans' order. */
	for (unsigned back = 1; back <= NBIRTHS && back <= n; back++) {
		struct birth *b = &births[(n - back) & (NBIRTHS - 1)];
		unsigned scan = atomic_load_explicit(&b->scan, memory_order_relaxed);
		uintptr_t c = atomic_load_explicit(&b->coro, memory_order_relaxed);
		uintptr_t k = atomic_load_explicit(&b->key, memory_order_relaxed);
		struct coprof_ctx *ctx = atomic_load_explicit(&b->ctx, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		/* The writer came round to this entry while it was read: older ones too. */
		if (atomic_load_explicit(&nwriting, memory_order_relaxed) - (n - back) > NBIRTHS)
			return 0;
		if ((int)(scan - want_scan) < 0)
			return 0;
		if (scan == want_scan && c == coro && k == root_key && ctx) {
			*out = ctx;
			return 1;
		}
	}
	return 0;
}

/* The pending call. Py_FinalizeEx runs what is queued: nothing is done then. */
static int scan(void *arg)
{
	atomic_store(&pending, 0);
	if (Py_IsInitialized() && !pl_pys_finalizing())
		scan_now((unsigned)(uintptr_t)arg);
	return 0;
}

/* Queues the pending call: on 3.12+ any thread that runs bytecode may run it (the
 * thread of a loop in a worker while the main thread waits in join()); up to 3.11 only
 * the main thread runs pending calls. 0 when queued. */
static int queue_scan(unsigned what)
{
#if PY_VERSION_HEX >= 0x030C0000
	return _PyEval_AddPendingCall(PyInterpreterState_Main(), scan, (void *)(uintptr_t)what,
				      0) == 0
		   ? 0
		   : -1;
#else
	return Py_AddPendingCall(scan, (void *)(uintptr_t)what);
#endif
}

/* COPROF_TEST_SCAN_DELAY_MS (tests only: the first-scan gap of a loaded machine, on
 * purpose): the task sets are read only when a tick asked, that long after the first
 * fold that saw it ask; never now and then. 0: off. Read once by pl_pys_tasks_init. */
static uint64_t test_delay_ns;
static uint64_t test_asked_at; /* ns, the fold that saw the ask; folding thread only */
/* COPROF_TEST_FOLD_EVERY=N (tests only: a folding thread starved by a loaded machine):
 * the adapter acts at one fold in N. 0 or 1: at every fold. */
static unsigned test_fold_every, test_fold_skip;

static unsigned test_delay(unsigned what)
{
	what &= ~(unsigned)(SCAN_FULL | SCAN_RENAME);
	if (!atomic_load_explicit(&want, memory_order_acquire)) {
		test_asked_at = 0;
		return what;
	}
	uint64_t now = cp_clock_gettime_ns(CLOCK_MONOTONIC);
	if (!test_asked_at)
		test_asked_at = now;
	if (now - test_asked_at < test_delay_ns)
		return what;
	test_asked_at = 0;
	return what | SCAN_FULL;
}

/* A test knob's value, 0 when unset; `max` bounds it (a bad value: said, ignored). */
static unsigned long test_knob(const char *name, unsigned long max)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n = v && *v ? strtoul(v, &end, 10) : 0;
	if (v && *v && (*end || n > max)) {
		pl_py_host->say("%s=%s: not a number up to %lu; ignored", name, v, max);
		return 0;
	}
	return n;
}

void pl_pys_tasks_init(void)
{
	test_delay_ns = (uint64_t)test_knob("COPROF_TEST_SCAN_DELAY_MS", 60000) * 1000000u;
	test_fold_every = (unsigned)test_knob("COPROF_TEST_FOLD_EVERY", 1000);
}

/* Folding thread, no GIL: queues a scan when a tick asked for one, or now and then
 * while tasks exist (new names, finished tasks). */
void pl_pys_fold(void)
{
	if (test_fold_every > 1 && test_fold_skip++ % test_fold_every != 0)
		return;
	unsigned fold = atomic_fetch_add(&folds, 1) + 1;
	int wall = pl_py_host->clock == COPROF_CLOCK_WALL, tasks = atomic_load(&have_tasks);
	unsigned what = 0;
	if (atomic_load_explicit(&want, memory_order_acquire))
		what |= SCAN_FULL;
	if (tasks && fold % RESCAN_FOLDS == 0)
		what |= SCAN_FULL | SCAN_RENAME;
	if (tasks && wall)
		what |= SCAN_WAITS | (fold % WALL_FULL_FOLDS == 0 ? SCAN_FULL : 0);
	if (test_delay_ns)
		what = test_delay(what);
	if (!what)
		return;
#if PY_VERSION_HEX < 0x030C0000
	/* A thread other than the main one met a new task: the main thread may run no
	 * bytecode for long (join()), and these ticks would go to the thread's own stack
	 * meanwhile; the folding thread scans at once. */
	if ((what & SCAN_FULL) && atomic_exchange(&want_far, 0)) {
		atomic_store(&want, 0);
		atomic_fetch_or(&gil_what, what);
		return;
	}
#endif
	int idle = 0;
	if (!atomic_compare_exchange_strong(&pending, &idle, 1)) {
#if PY_VERSION_HEX < 0x030C0000
		/* Queued already. Not run for STALL_FOLDS folds: the main thread runs no
		 * bytecode (blocked in join(), asleep), so the folding thread scans itself
		 * after this fold (pl_pys_after_fold); the queued call stays, to run when
		 * the main thread comes back. */
		if (fold - atomic_load(&queued_at) >= STALL_FOLDS) {
			if (what & SCAN_FULL)
				atomic_store(&want, 0);
			atomic_fetch_or(&gil_what, what);
		}
#endif
		return;
	}
	if (what & SCAN_FULL)
		atomic_store(&want, 0);
	atomic_store(&queued_at, fold);
	atomic_store(&queuing, 1); /* seq_cst: closing() sees it, or this sees closing */
	if (atomic_load(&closing) || !Py_IsInitialized() || pl_pys_finalizing() ||
	    queue_scan(what) != 0) {
		atomic_store(&queuing, 0);
		atomic_store(&pending, 0);
		return;
	}
	atomic_store(&queuing, 0);
	/* Queued, and not run yet unless the scan reset it: ticks may kick the main thread. */
	int queued = 1;
	atomic_compare_exchange_strong(&pending, &queued, 2);
}

/* Folding thread, outside the sampler's fork lock, no GIL: up to 3.11, the scan the
 * main thread did not run. The GIL is taken as the control thread takes it (gil.c:
 * never once Python finalizes, past the atexit callback that closes the gate), and
 * not under the fork lock: a thread that forks holding the GIL (a C extension's
 * fork()) takes that lock in its prepare handler. With the GIL the folding thread has
 * a thread state of its own for the scan's time (PyGILState_Ensure makes and deletes
 * it); it has no timer, so it is never sampled. */
void pl_pys_after_fold(void)
{
#if PY_VERSION_HEX < 0x030C0000
	unsigned what = atomic_exchange(&gil_what, 0);
	if (!what || atomic_load(&closing))
		return;
	PyGILState_STATE st;
	if (pl_py_gil_take(&st) != 0)
		return;
	if (!pl_pys_finalizing())
		scan_now(what);
	pl_py_gil_give(st);
#endif
}

/* In a fork child (the forking thread alone, no GIL yet): the contexts of the table are
 * the parent's profiler's; the next scan frees their slots. A scan or a reader the fork
 * caught on another thread is gone with it. */
void pl_pys_tasks_after_fork_child(void)
{
	tforks++;
	if (atomic_load(&seq) & 1)
		atomic_fetch_add(&seq, 1);
	atomic_store(&scanning, 0);
	atomic_store(&readers, 0);
	atomic_store(&gil_what, 0);
	atomic_store(&want_far, 0);
	atomic_store(&pending, 0);
	atomic_store(&want, 0);
	for (unsigned i = 0; i < NUNKNOWN; i++)
		atomic_store(&unknown[i], 0);
	/* The log's contexts are the parent's profiler's. */
	for (unsigned i = 0; i < NBIRTHS; i++)
		atomic_store(&births[i].ctx, NULL);
	atomic_store(&nwriting, atomic_load(&nbirths));
}

/* Sampling starts (the control thread). */
void pl_pys_tasks_start(void)
{
	atomic_fetch_add(&windows, 1);
}

/* Python finalizes (main thread, GIL held): no scan runs from now on, so the waits the
 * slots measured and have not handed over yet go to the sampler now. Under load the
 * scans that would have (the one that sees a task run again or finish, or its
 * EMIT_SCANS-th) may never come before the exit: 1,000 idle tasks lost 0.3-1.3 s of
 * their 1.8 s wait each (idle_wall, a CI run). Skipped when a scan is under way (it
 * let the GIL go in a finalizer). */
static void hand_over_waits(void)
{
	if (pl_py_host->clock != COPROF_CLOCK_WALL || atomic_exchange(&scanning, 1))
		return;
	unsigned win = atomic_load(&windows);
	for (unsigned j = 0; j < nlive; j++) {
		struct slot *sl = &slots[live[j]];
		uintptr_t c = atomic_load_explicit(&sl->coro, memory_order_relaxed);
		struct wait *w = &sl->wait;
		if (c == 0 || c == TOMB || sl->forks != tforks || !sl->ctx || w->win != win ||
		    !w->n || !w->pend)
			continue;
		pl_py_host->task_wait(sl->owner, sl->ctx, w->keys, w->n, w->pend);
		w->pend = 0;
	}
	atomic_store(&scanning, 0);
}

void pl_pys_tasks_closing(void)
{
	atomic_store(&closing, 1);
	while (atomic_load(&queuing))
		sched_yield();
	hand_over_waits();
}
