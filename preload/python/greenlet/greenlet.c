/* greenlet.c: greenlets (and so gevent and eventlet) as engine contexts. Each greenlet
 * but a thread's main one gets a context of its own, runtime "greenlet", named after
 * gevent's Greenlet.name, else its run function's qualname; the main greenlet is the
 * thread's own context.
 *
 * Switches are heard through greenlet.settrace. When the program imports
 * greenlet._greenlet (the audit hook's "import" event), the module is loaded there and
 * then and its settrace/gettrace are replaced by ours: the program's tracer is kept,
 * per thread, and called after ours. Our tracer, a C function, is armed in each
 * thread at its next audit event, its next settrace, or (trace mode) its first
 * profiled event. It runs in the greenlet switched to, with the GIL held, after the
 * stack switch. In trace mode it swaps the hook's per-thread asyncio state (hook/thread-state.c's
 * chain) between greenlets, so tasks run inside greenlets keep their own drivers; in
 * sample mode it tells the sampler which context the ticks go to, and keeps the table of
 * switched-out greenlets' outermost frames (suspended.c) that lets the tick handler
 * drop a tick landing between greenlet's restoring of the frames and this tracer. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../hook/hook.h"
#include "greenlet.h"

/* One greenlet seen switching. Lives until the greenlet dies (its last switch out), or
 * until its address is seen again for another object (a greenlet that died unseen). */
struct glet {
	PyObject *ref;		  /* weak reference to the greenlet */
	struct coprof_thread *t;  /* the engine thread whose context this is */
	unsigned forks;		  /* pl_py_forks when made */
	int is_main;		  /* a thread's main greenlet: the thread's own context */
	int named;		  /* its name is final (else: read from its frames later) */
	struct pl_py_chain chain; /* the hook's state while it is switched out */
	/* Sample mode: its outermost frame and that frame's code object (0: not known
	 * yet), and whether the suspended table holds them (it is switched out). */
	uintptr_t base, base_code;
	int listed;
};

/* greenlet address (identity only) -> struct glet; used with the GIL held */
static struct pl_py_map glets;
static int installed;		/* our settrace is in greenlet._greenlet */
static int installing;		/* the import is under way, from the audit hook */
static PyObject *real_settrace; /* greenlet's own settrace (strong) */
static PyObject *tracer_obj;	/* our tracer, as a callable (strong) */

/* Per thread: the program's tracer (strong; NULL: none), whether ours is on in this
 * thread's greenlet state, and the greenlet the tracer last switched to (identity only;
 * NULL: the main one, or none seen). */
static __thread PyObject *prog_trace;
static __thread int armed;
static __thread PyObject *cur_glet;

/* The greenlet `ref` names, borrowed, or NULL when it is gone. No Python code runs. */
static PyObject *ref_target(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
	PyObject *g = NULL;
	if (PyWeakref_GetRef(ref, &g) <= 0)
		return NULL;
	Py_DECREF(g); /* the caller holds it (a tracer argument, or the current one) */
	return g;
#else
	PyObject *g = PyWeakref_GetObject(ref);
	return g && g != Py_None ? g : NULL;
#endif
}

static void glet_free(struct glet *gl)
{
	if (gl->listed)
		pl_py_suspended_del(gl->base);
	Py_XDECREF(gl->ref);
	free(gl->chain.drivers);
	free(gl);
}

/* g's record if it is this thread's, this process's and g's own; NULL otherwise. */
static struct glet *glet_get(PyObject *g, struct coprof_thread *t)
{
	struct glet *gl = pl_py_map_get(&glets, (uintptr_t)g);
	if (!gl)
		return NULL;
	if (gl->t == t && gl->forks == pl_py_forks && gl->ref && ref_target(gl->ref) == g)
		return gl;
	return NULL;
}

/* A str attribute's UTF-8 copy into buf; nonzero when it was one and not empty. Reading
 * an attribute may run Python code (a property): callers check what they hold after. */
static int str_attr(PyObject *o, const char *attr, char *buf, size_t len)
{
	PyObject *v = o ? PyObject_GetAttrString(o, attr) : NULL;
	const char *s = v && PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
	int ok = s && *s;
	if (ok)
		snprintf(buf, len, "%s", s);
	Py_XDECREF(v);
	PyErr_Clear();
	return ok;
}

/* eventlet's green threads all run GreenThread.main, which calls the function given
 * to eventlet.spawn: they are named after that function, from their frames. */
#define EVENTLET_MAIN "GreenThread.main"

/* The name a greenlet's context takes at first sight: gevent's Greenlet.name, else the
 * qualname of its run callable (a bound method's function). 0 when neither is there:
 * greenlet deletes `run` as the greenlet starts, so greenlet(f) is named later from
 * its frames (name_from_frames), and so is an eventlet green thread. */
static int first_name(PyObject *g, char *buf, size_t len)
{
	if (str_attr(g, "name", buf, len))
		return 1;
	PyObject *run = PyObject_GetAttrString(g, "run");
	PyErr_Clear();
	int ok = run && str_attr(run, "__qualname__", buf, len);
	Py_XDECREF(run);
	return ok && strcmp(buf, EVENTLET_MAIN) != 0;
}

/* The qualname (3.10: the name) of a frame's code, into buf; nonzero when not empty. */
static int frame_name(PyFrameObject *f, char *buf, size_t len)
{
	PyCodeObject *co = PyFrame_GetCode(f);
#if PY_VERSION_HEX >= 0x030B0000
	PyObject *nm = co->co_qualname;
#else
	PyObject *nm = co->co_name;
#endif
	const char *s = PyUnicode_Check(nm) ? PyUnicode_AsUTF8(nm) : NULL;
	int ok = s && *s;
	if (ok)
		snprintf(buf, len, "%s", s);
	Py_DECREF(co);
	PyErr_Clear();
	return ok;
}

/* Nonzero when f runs eventlet's GreenThread.main (eventlet/greenthread.py). */
static int is_eventlet_main(PyFrameObject *f)
{
	static const char file[] = "/eventlet/greenthread.py";
	PyCodeObject *co = PyFrame_GetCode(f);
	const char *fn =
	    PyUnicode_Check(co->co_filename) ? PyUnicode_AsUTF8(co->co_filename) : NULL;
	const char *nm = PyUnicode_Check(co->co_name) ? PyUnicode_AsUTF8(co->co_name) : NULL;
	size_t n = fn ? strlen(fn) : 0;
	int yes = nm && strcmp(nm, "main") == 0 && n >= sizeof(file) - 1 &&
		  strcmp(fn + n - (sizeof(file) - 1), file) == 0;
	Py_DECREF(co);
	PyErr_Clear();
	return yes;
}

/* The qualname of the outermost frame of a suspended greenlet: its run function; for
 * an eventlet green thread, the function its GreenThread.main called. */
static int name_from_frames(PyObject *g, char *buf, size_t len)
{
	PyObject *f = PyObject_GetAttrString(g, "gr_frame");
	PyErr_Clear();
	if (!f || !PyFrame_Check(f)) {
		Py_XDECREF(f);
		return 0;
	}
	PyObject *inner = NULL; /* the frame the outermost one called */
	for (PyFrameObject *b; (b = PyFrame_GetBack((PyFrameObject *)f));) {
		Py_XDECREF(inner);
		inner = f;
		f = (PyObject *)b;
	}
	int ok = frame_name((PyFrameObject *)f, buf, len);
	if (ok && inner && is_eventlet_main((PyFrameObject *)f))
		ok = frame_name((PyFrameObject *)inner, buf, len);
	Py_XDECREF(inner);
	Py_DECREF(f);
	return ok;
}

/* Nonzero when g is a main greenlet (it has no parent). */
static int is_main(PyObject *g)
{
	PyObject *p = PyObject_GetAttrString(g, "parent");
	int main = p == Py_None;
	Py_XDECREF(p);
	PyErr_Clear();
	return main;
}

/* Nonzero when greenlet g has finished (its `dead` attribute, read on every switch
 * through a name made once). */
static int is_dead(PyObject *g)
{
	static PyObject *dead_str;
	if (!dead_str && !(dead_str = PyUnicode_InternFromString("dead"))) {
		PyErr_Clear();
		return 0;
	}
	PyObject *v = PyObject_GetAttr(g, dead_str);
	int r = v ? PyObject_IsTrue(v) : 0;
	Py_XDECREF(v);
	PyErr_Clear();
	return r > 0;
}

/* Forgets a record; finishes its context when it is the calling thread's. */
static void glet_drop(PyObject *g, struct coprof_thread *t)
{
	struct glet *gl = pl_py_map_del(&glets, (uintptr_t)g);
	if (!gl)
		return;
	if (!gl->is_main && gl->t == t && gl->forks == pl_py_forks) {
		if (pl_py_host->profile)
			coprof_ctx_finish(t, gl->chain.base);
		else
			pl_py_host->ctx_finish(gl->chain.base);
	}
	glet_free(gl);
}

/* g's record, made at first sight (with its context, unless it is a main greenlet).
 * May run Python code (names, the weak reference): NULL when that failed. */
static struct glet *glet_make(PyObject *g, struct coprof_thread *t)
{
	struct glet *gl = glet_get(g, t);
	if (gl)
		return gl;
	char name[128] = "";
	int main = is_main(g);
	int named = main || first_name(g, name, sizeof(name));
	if (!named)
		snprintf(name, sizeof(name), "%s", Py_TYPE(g)->tp_name);
	PyObject *ref = pl_py_weakref(g);
	if (!ref) {
		PyErr_Clear();
		return NULL;
	}
	/* Python ran: the thread's engine thread may have been replaced (a fork). */
	if (t != pl_py_host->thread() || !(gl = calloc(1, sizeof(*gl)))) {
		Py_DECREF(ref);
		return NULL;
	}
	gl->ref = ref;
	gl->t = t;
	gl->forks = pl_py_forks;
	gl->is_main = main;
	gl->named = named;
	gl->chain.gen = __atomic_load_n(&pl_py_gen, __ATOMIC_RELAXED) - 1;
	if (!main &&
	    coprof_ctx_create(t, (uint64_t)(uintptr_t)g, name, "greenlet", &gl->chain.base) != 0) {
		glet_free(gl);
		return NULL;
	}
	gl->chain.ctx = gl->chain.base;
	struct glet *old = pl_py_map_del(&glets, (uintptr_t)g);
	if (old) /* a dead greenlet's (its address reused) or another thread's */
		glet_free(old);
	if (pl_py_map_put(&glets, (uintptr_t)g, gl) != 0) {
		if (!main)
			coprof_ctx_finish(t, gl->chain.base);
		glet_free(gl);
		return NULL;
	}
	return gl;
}

/* The outermost frame of the chain from f and its code object into *frame and *code
 * (0 when none): the frame a greenlet's chain ends at for as long as it lives (its run
 * function's, or the thread's first for a main greenlet). 3.11+: the outermost frame
 * that has started, not an entry frame on the C stack; that is where the tick handler
 * stops too (sampling/walk.c), and where greenlet (3.12+) ends a suspended greenlet's
 * chain once it has unlinked the C-stack frames from it. */
#if PY_VERSION_HEX >= 0x030B0000
/* `suspended`: f is a switched-out greenlet's (gr_frame), not the running thread's. An
 * entry frame lives on that greenlet's C stack, which another greenlet may be using
 * now (greenlet 3.0.0 on 3.12 left such frames in the chain: following them read
 * whatever the stack holds now and could crash the host); the walk stops there. Where
 * greenlet unlinks them the chain ends at the run function's frame as it does for the
 * tick handler; where it does not, the frame found matches no tick, which is then
 * charged as before this table existed, never dropped wrongly. */
static void outermost(PL_PY_FRAME *f, int suspended, uintptr_t *frame, uintptr_t *code)
{
	PL_PY_FRAME *last = NULL;
	for (unsigned hops = 0; f && hops < 65536; hops++, f = f->previous) {
#if PY_VERSION_HEX >= 0x030C0000
		if (f->owner == FRAME_OWNED_BY_CSTACK) {
			if (suspended)
				break;
			continue;
		}
#endif
		if (pl_py_frame_code(f) && !_PyFrame_IsIncomplete(f))
			last = f;
	}
	*frame = (uintptr_t)last;
	*code = last ? (uintptr_t)pl_py_frame_code(last) : 0;
}

/* The calling thread's innermost frame. */
static PL_PY_FRAME *running_frame(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030D0000
	return ts->current_frame;
#else
	return ts->cframe ? ts->cframe->current_frame : NULL;
#endif
}
#else
static void outermost(PyFrameObject *f, int suspended, uintptr_t *frame, uintptr_t *code)
{
	(void)suspended; /* frame objects live on the heap */
	PyFrameObject *last = NULL;
	for (unsigned hops = 0; f && hops < 65536; hops++, f = f->f_back)
		last = f;
	*frame = (uintptr_t)last;
	*code = last ? (uintptr_t)last->f_code : 0;
}

static PyFrameObject *running_frame(PyThreadState *ts)
{
	return ts->frame;
}
#endif

/* The outermost frame of switched-out greenlet g, from its top frame (gr_frame; 3.12+:
 * greenlet has unlinked its C-stack frames). Runs no Python code of the program's. */
static void suspended_base(PyObject *g, uintptr_t *frame, uintptr_t *code)
{
	*frame = *code = 0;
	PyObject *f = PyObject_GetAttrString(g, "gr_frame");
	PyErr_Clear();
	if (f && PyFrame_Check(f)) {
#if PY_VERSION_HEX >= 0x030B0000
		outermost(pl_py_frame((PyFrameObject *)f), 1, frame, code);
#else
		outermost((PyFrameObject *)f, 1, frame, code);
#endif
	}
	Py_XDECREF(f);
}

/* Sample mode, after the sampler was told of the switch: `to` runs, so its entry
 * leaves the suspended table (a tick from now on is charged to it) and its outermost
 * frame is read from the thread state; `from` (NULL: unknown or dead) is switched out
 * and enters the table, so that a tick in the window before the tracer's next call
 * that finds its frames restored is dropped, not charged to whoever ran before. */
static void suspended_switch(struct glet *from, PyObject *origin, struct glet *to)
{
	if (to->listed) {
		pl_py_suspended_del(to->base);
		to->listed = 0;
	}
	uintptr_t f, c;
	outermost(running_frame(PyThreadState_Get()), 0, &f, &c);
	if (f) {
		to->base = f;
		to->base_code = c;
	}
	if (!from)
		return;
	if (!from->base) /* a new greenlet: it had no frame when it came in */
		suspended_base(origin, &from->base, &from->base_code);
	if (from->base && !from->listed)
		from->listed =
		    pl_py_suspended_put(from->base, from->base_code, from->chain.base) == 0;
}

/* The switch itself: `from` leaves, `to` runs. Python code may have run before this
 * (names), none runs here. */
static void glet_switch(struct glet *from, struct glet *to)
{
	if (!pl_py_host->profile) {
		pl_py_host->ctx_switch(from ? from->chain.base : NULL, to->chain.base);
		return;
	}
	struct pl_py_thread *pt = pl_py_thread_self();
	if (!pt)
		return; /* profiling is off: the next window starts in cur_glet's */
	/* A greenlet that died unseen keeps nothing of what ran in it. */
	struct pl_py_chain gone = {0};
	pl_py_chain_swap(pt, from ? &from->chain : &gone, &to->chain);
	free(gone.drivers);
}

/* greenlet's trace callback, tracer(event, (origin, target)), run in the target. Never
 * fails on its own account; the program's tracer runs after it and what it returns or
 * raises is what greenlet gets. */
static PyObject *tracer(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
	(void)self;
	PyObject *origin, *target;
	if (n == 2 && PyTuple_Check(args[1]) && PyTuple_GET_SIZE(args[1]) == 2) {
		origin = PyTuple_GET_ITEM(args[1], 0);
		target = PyTuple_GET_ITEM(args[1], 1);
		struct pl_py_exc e;
		pl_py_exc_save(&e);
		struct coprof_thread *t = pl_py_host->thread();
		if (t && origin != target) {
			int dead = is_dead(origin);
			struct glet *to = glet_get(target, t), *from = glet_get(origin, t);
			/* First sightings and names run Python code: the slow path. A greenlet
			 * dead before it was seen gets no context. */
			if (!to || (!dead && (!from || !from->named))) {
				to = glet_make(target, t);
				from = !to || dead ? NULL : glet_make(origin, t);
				if (from && !from->named) {
					char name[128];
					if (name_from_frames(origin, name, sizeof(name)))
						coprof_ctx_set_name(from->chain.base, name);
					from->named = 1;
				}
				to = glet_get(target, t);
				from = glet_get(origin, t);
			}
			if (to && t == pl_py_host->thread()) {
				glet_switch(from, to);
				cur_glet = to->is_main ? NULL : target;
				if (!pl_py_host->profile)
					suspended_switch(dead ? NULL : from, origin, to);
			}
			if (dead)
				glet_drop(origin, t);
		}
		pl_py_exc_restore(&e);
	}
	if (!prog_trace)
		Py_RETURN_NONE;
	PyObject *prog = Py_NewRef(prog_trace);
	PyObject *r = PyObject_Vectorcall(prog, args, (size_t)n, NULL);
	if (!r && prog_trace == prog) {
		/* greenlet takes a tracer that raised off: ours goes with the program's.
		 * The next settrace arms this thread again. */
		Py_CLEAR(prog_trace);
		armed = 0;
	}
	Py_DECREF(prog);
	return r;
}

/* Puts our tracer in this thread's greenlet state; a tracer found there (set through
 * greenlet's own settrace before ours replaced it) becomes the program's. */
static void arm(void)
{
	if (armed || !installed)
		return;
	armed = 1;
	PyObject *prev = PyObject_CallOneArg(real_settrace, tracer_obj);
	if (!prev) {
		PyErr_Clear();
		armed = 0;
		return;
	}
	if (prev != Py_None && prev != tracer_obj && !prog_trace)
		prog_trace = Py_NewRef(prev);
	Py_DECREF(prev);
}

/* greenlet.settrace as the program sees it: its tracer is the one we chain to. */
static PyObject *our_settrace(PyObject *self, PyObject *fn)
{
	(void)self;
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	arm();
	pl_py_exc_restore(&e);
	PyObject *old = prog_trace ? prog_trace : Py_NewRef(Py_None);
	prog_trace = fn == Py_None ? NULL : Py_NewRef(fn);
	return old;
}

static PyObject *our_gettrace(PyObject *self, PyObject *unused)
{
	(void)self;
	(void)unused;
	return Py_NewRef(prog_trace ? prog_trace : Py_None);
}

static PyMethodDef tracer_def = {"coprof_greenlet_tracer", (PyCFunction)(void (*)(void))tracer,
				 METH_FASTCALL, NULL};
static PyMethodDef settrace_def = {"settrace", our_settrace, METH_O,
				   "settrace(callback): sets this thread's greenlet tracer "
				   "(coprof follows switches too)."};
static PyMethodDef gettrace_def = {"gettrace", our_gettrace, METH_NOARGS,
				   "gettrace(): this thread's greenlet tracer, or None."};

uintptr_t pl_py_greenlet_lo, pl_py_greenlet_hi;

struct text_find {
	uintptr_t at, lo, hi;
};

static int text_of(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct text_find *f = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && f->at >= lo && f->at < hi) {
			f->lo = lo;
			f->hi = hi;
			return 1;
		}
	}
	return 0;
}

/* The executable segment of greenlet's C module, found from its settrace's C function:
 * greenlet switches there (and in what it calls) with the thread state's frames half
 * moved; the tick handler stays out of them (sampling/walk.c). */
static void find_text(PyObject *real)
{
	if (!PyCFunction_Check(real))
		return;
	struct text_find f = {(uintptr_t)((PyCFunctionObject *)real)->m_ml->ml_meth, 0, 0};
	if (dl_iterate_phdr(text_of, &f) == 1) {
		pl_py_greenlet_lo = f.lo;
		__atomic_store_n(&pl_py_greenlet_hi, f.hi, __ATOMIC_RELEASE);
	}
}

/* greenlet._greenlet is loaded: ours replace its settrace and gettrace (greenlet's
 * __init__ copies them from there, after this). */
static void install(PyObject *mod)
{
	PyObject *real = PyObject_GetAttrString(mod, "settrace");
	PyObject *tr = PyCFunction_New(&tracer_def, NULL);
	PyObject *st = PyCFunction_New(&settrace_def, NULL);
	PyObject *gt = PyCFunction_New(&gettrace_def, NULL);
	if (real && tr && st && gt && PyCallable_Check(real) &&
	    PyObject_SetAttrString(mod, "settrace", st) == 0 &&
	    PyObject_SetAttrString(mod, "gettrace", gt) == 0) {
		real_settrace = Py_NewRef(real);
		tracer_obj = Py_NewRef(tr);
		find_text(real);
		pl_py_window_ctx = pl_py_greenlet_current;
		installed = 1;
	}
	Py_XDECREF(real);
	Py_XDECREF(tr);
	Py_XDECREF(st);
	Py_XDECREF(gt);
	PyErr_Clear();
}

void pl_py_greenlet_audit(const char *event, PyObject *args)
{
	if (installed) {
		if (!armed && event[0] != 'c') /* not cpython.*: finalizing, or starting */
			arm();
		return;
	}
	if (installing || strcmp(event, "import") != 0 || !PyTuple_Check(args) ||
	    PyTuple_GET_SIZE(args) < 1)
		return;
	PyObject *name = PyTuple_GET_ITEM(args, 0);
	if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, "greenlet._greenlet"))
		return;
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	installing = 1;
	PyObject *mod = PyImport_ImportModule("greenlet._greenlet");
	if (mod)
		install(mod);
	Py_XDECREF(mod);
	installing = 0;
	arm();
	pl_py_exc_restore(&e);
}

/* Attached late (the Python API), after the program may have imported greenlet: its
 * module is installed now, and the package's own settrace and gettrace, which it
 * copied from the module at its import, are ours too. GIL held. */
void pl_py_greenlet_late(void)
{
	if (installed)
		return;
	PyObject *mods = PySys_GetObject("modules"); /* borrowed */
	PyObject *mod = mods ? PyDict_GetItemString(mods, "greenlet._greenlet") : NULL;
	if (!mod)
		return;
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	install(mod);
	PyObject *pkg = installed ? PyDict_GetItemString(mods, "greenlet") : NULL;
	if (pkg) {
		PyObject *st = PyObject_GetAttrString(mod, "settrace");
		PyObject *gt = PyObject_GetAttrString(mod, "gettrace");
		if (st && gt) {
			PyObject_SetAttrString(pkg, "settrace", st);
			PyObject_SetAttrString(pkg, "gettrace", gt);
		}
		Py_XDECREF(st);
		Py_XDECREF(gt);
		PyErr_Clear();
	}
	if (installed)
		arm();
	pl_py_exc_restore(&e);
}

/* Arms the calling thread from the hook, where no Python code may run (the hook's
 * state would go stale under it): greenlet's settrace runs no Python code of itself,
 * but making this thread's greenlet state allocates, and an allocation may collect
 * garbage and run finalizers; so the collector is off meanwhile. */
static void arm_quietly(void)
{
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	int gc = PyGC_Disable();
	arm();
	if (gc)
		PyGC_Enable();
	pl_py_exc_restore(&e);
}

struct coprof_ctx *pl_py_greenlet_current(struct coprof_thread *t)
{
	if (pl_py_unlikely(installed && !armed))
		arm_quietly();
	struct glet *gl = cur_glet ? pl_py_map_get(&glets, (uintptr_t)cur_glet) : NULL;
	return gl && gl->t == t && gl->forks == pl_py_forks ? gl->chain.base : NULL;
}
