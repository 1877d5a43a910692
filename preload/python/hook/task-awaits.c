/* task-awaits.c: who awaits whom (doc/python.md). When an asyncio task's root coroutine
 * suspends, the value it yields is what its Task will wait on: a Task (an edge to it),
 * a gather's future (an edge to each child), a TaskGroup's end (to each task still in
 * the group), asyncio.wait()'s or wait_for()'s own future (to each pending task it
 * waits for), or a shield's outer future (to the inner task). The waiting task keeps
 * that until it resumes; then each edge goes to the engine with the wall time waited.
 * Objects are read through C getters, struct fields and dicts only: no Python code
 * runs, the GIL is never dropped. GIL held, in the task's thread. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "hook.h"

/* Tasks one wait keeps at most (a gather of more counts the others as dropped). */
#define WAIT_MAX 1024
/* Gathers nested in a gather followed, at most. */
#define NEST_MAX 4

/* What a suspended task waits on. */
struct pl_py_wait {
	uint64_t since; /* ns, CLOCK_MONOTONIC, at the suspension */
	/* One made inside the chain (pl_py_wait_inner) before its task's root yields: the
	 * future it is for and the waiting Task when known (identity only; 0: any); its
	 * ids hold no reference to the awaited table yet. */
	PyObject *fut;
	uint64_t parent;
	unsigned gen; /* the pl_py_gen (profiling window) it began in */
	uint32_t n;
	uint32_t kind;	/* enum coprof_await_kind */
	uint64_t ids[]; /* the awaited tasks (their Task's address, their context's id) */
};

/* A task some suspended task waits on: when it ended (0: not seen yet) and its name
 * then, for the edge; freed when no wait names it any more. */
struct awaited {
	uint64_t end; /* ns, CLOCK_MONOTONIC */
	uint32_t refs;
	char name[40];
};

/* task id -> struct awaited; GIL held */
static struct pl_py_map awaited_map;

/* Entries let go, for reuse (a fan-out makes and frees one per child): at most
 * SPARE_MAX, linked through their first bytes. */
#define SPARE_MAX 4096
static void *spare;
static unsigned nspare;

static struct awaited *awaited_new(void)
{
	struct awaited *a = spare;
	if (!a)
		return calloc(1, sizeof(*a));
	spare = *(void **)a;
	nspare--;
	memset(a, 0, sizeof(*a));
	return a;
}

static void awaited_free(struct awaited *a)
{
	if (!a || nspare >= SPARE_MAX) {
		free(a);
		return;
	}
	*(void **)a = spare;
	spare = a;
	nspare++;
}

/* --- asyncio's types and the C getters read ----------------------------------------- */

/* _asyncio.Task and _asyncio.Future, once that module is imported; asyncio's
 * _GatheringFuture once one is seen (strong references, for the process's life). */
static PyTypeObject *task_type, *future_type, *gathering_type;
/* C getters: Future's _state and _callbacks. */
static PyGetSetDef *get_state, *get_callbacks;
/* Interned names: the attributes read from instance dicts, the code names looked for. */
static PyObject *s_children, *s_tasks, *s_parent, *s_completed, *s_outer_cb;

static PyGetSetDef *find_getter(PyTypeObject *tp, const char *name)
{
	for (; tp; tp = tp->tp_base)
		for (PyGetSetDef *g = tp->tp_getset; g && g->name; g++)
			if (strcmp(g->name, name) == 0)
				return g;
	return NULL;
}

static PyTypeObject *module_type(PyObject *mod, const char *name)
{
	PyObject *t = mod ? PyObject_GetAttrString(mod, name) : NULL;
	if (t && PyType_Check(t))
		return (PyTypeObject *)t;
	Py_XDECREF(t);
	return NULL;
}

/* Nonzero once what is read is known: asyncio's C module is imported. */
static int types_ready(void)
{
	if (pl_py_likely(task_type))
		return 1;
	PyObject *name = PyUnicode_FromString("_asyncio");
	PyObject *mod = name ? PyImport_GetModule(name) : NULL;
	Py_XDECREF(name);
	PyTypeObject *t = module_type(mod, "Task"), *f = module_type(mod, "Future");
	Py_XDECREF(mod);
	s_children = s_children ? s_children : PyUnicode_InternFromString("_children");
	s_tasks = s_tasks ? s_tasks : PyUnicode_InternFromString("_tasks");
	s_parent = s_parent ? s_parent : PyUnicode_InternFromString("_parent_task");
	s_completed = s_completed ? s_completed : PyUnicode_InternFromString("_on_completed_fut");
	s_outer_cb = s_outer_cb ? s_outer_cb : PyUnicode_InternFromString("_outer_done_callback");
	get_state = f ? find_getter(f, "_state") : NULL;
	get_callbacks = f ? find_getter(f, "_callbacks") : NULL;
	if (!t || !f || !get_state || !get_callbacks || !s_children || !s_tasks || !s_parent ||
	    !s_completed || !s_outer_cb) {
		Py_XDECREF(t);
		Py_XDECREF(f);
		return 0;
	}
	future_type = f;
	task_type = t;
	return 1;
}

/* o read by getter g: a new reference or NULL. */
static PyObject *get_via(PyGetSetDef *g, PyObject *o)
{
	return g && g->get ? g->get(o, g->closure) : NULL;
}

/* o.name read from o's instance dict, when nothing else could answer it: o's type looks
 * attributes up generically and defines no `name` of its own (no property, no
 * descriptor). A new reference, or NULL. */
static PyObject *dict_attr(PyObject *o, PyObject *name)
{
	PyTypeObject *tp = Py_TYPE(o);
	if (tp->tp_getattro != PyObject_GenericGetAttr || _PyType_Lookup(tp, name))
		return NULL;
	return PyObject_GenericGetAttr(o, name);
}

static int is_task(PyObject *o)
{
	return o && PyObject_TypeCheck(o, task_type);
}

/* Nonzero when future f (of _asyncio.Future's layout) is still pending. */
static int pending(PyObject *f)
{
	static PyObject *pending_str; /* the getter's "PENDING", once seen (asyncio's own) */
	PyObject *st = get_via(get_state, f);
	int yes =
	    st && (st == pending_str ||
		   (PyUnicode_Check(st) && PyUnicode_CompareWithASCIIString(st, "PENDING") == 0));
	if (yes && !pending_str) {
		Py_INCREF(st);
		pending_str = st;
	}
	Py_XDECREF(st);
	return yes;
}

/* --- what a yielded future stands for ------------------------------------------------ */

/* The wait being made: tasks go into ids[n], up to WAIT_MAX; `more` counts the rest. */
struct found {
	uint64_t ids[WAIT_MAX];
	PyObject *tasks[WAIT_MAX]; /* borrowed, while the wait is made */
	uint32_t n, kind;
	uint64_t more;
};

static void add_task(struct found *fd, PyObject *task)
{
	if (!pending(task))
		return;
	if (fd->n < WAIT_MAX) {
		fd->tasks[fd->n] = task;
		fd->ids[fd->n++] = (uint64_t)(uintptr_t)task;
	} else
		fd->more++;
}

/* The children of gather future g, tasks or gathers in turn. */
static void gather_children(struct found *fd, PyObject *g, int nest)
{
	PyObject *ch = dict_attr(g, s_children);
	if (ch && PyList_CheckExact(ch))
		for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ch); i++) {
			PyObject *c = PyList_GET_ITEM(ch, i);
			if (is_task(c))
				add_task(fd, c);
			else if (c && Py_TYPE(c) == gathering_type && nest < NEST_MAX)
				gather_children(fd, c, nest + 1);
		}
	Py_XDECREF(ch);
}

static int is_gathering(PyObject *y)
{
	if (pl_py_likely(gathering_type))
		return Py_TYPE(y) == gathering_type;
	if (strcmp(Py_TYPE(y)->tp_name, "_GatheringFuture") != 0 ||
	    !PyObject_TypeCheck(y, future_type))
		return 0;
	gathering_type = Py_TYPE(y);
	Py_INCREF(gathering_type);
	return 1;
}

/* The inner task of a shield whose outer future is f: f's done callback
 * shield.<locals>._outer_done_callback holds it in its closure. */
static PyObject *shield_inner(PyObject *f)
{
	PyObject *cbs = get_via(get_callbacks, f), *inner = NULL;
	for (Py_ssize_t i = 0; cbs && PyList_CheckExact(cbs) && i < PyList_GET_SIZE(cbs) && !inner;
	     i++) {
		PyObject *it = PyList_GET_ITEM(cbs, i);
		PyObject *cb =
		    PyTuple_Check(it) && PyTuple_GET_SIZE(it) ? PyTuple_GET_ITEM(it, 0) : it;
		if (!PyFunction_Check(cb))
			continue;
		PyCodeObject *co = (PyCodeObject *)PyFunction_GET_CODE(cb);
		PyObject *cl = PyFunction_GET_CLOSURE(cb);
		if (co->co_name != s_outer_cb || !cl || !PyTuple_Check(cl))
			continue;
		for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(cl) && !inner; k++) {
			PyObject *cell = PyTuple_GET_ITEM(cl, k);
			PyObject *v = PyCell_Check(cell) ? PyCell_GET(cell) : NULL;
			if (is_task(v))
				inner = v;
		}
	}
	Py_XINCREF(inner);
	Py_XDECREF(cbs);
	return inner;
}

/* The awaited table holds each task of w (one it cannot hold is left out). */
static struct pl_py_wait *wait_hold(struct pl_py_wait *w)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < w->n; i++) {
		struct awaited *a = pl_py_map_get(&awaited_map, (uintptr_t)w->ids[i]);
		if (!a) {
			if (!(a = awaited_new()))
				continue;
			if (pl_py_map_put(&awaited_map, (uintptr_t)w->ids[i], a) != 0) {
				awaited_free(a);
				continue;
			}
		}
		a->refs++;
		w->ids[n++] = w->ids[i];
	}
	w->n = n;
	if (!n) {
		free(w);
		return NULL;
	}
	return w;
}

#if PY_VERSION_HEX >= 0x030B0000 /* 3.10 has no TaskGroup */
static void taskgroup_tasks(struct found *fd, PyObject *tg)
{
	PyObject *set = dict_attr(tg, s_tasks);
	PyObject *it = set && PySet_CheckExact(set) ? PyObject_GetIter(set) : NULL;
	for (PyObject *t; it && (t = PyIter_Next(it));) {
		if (is_task(t))
			add_task(fd, t);
		Py_DECREF(t);
	}
	Py_XDECREF(it);
	Py_XDECREF(set);
}
#endif

/* --- a task's wait ------------------------------------------------------------------ */

/* Only one wait is made at a time (GIL held, no Python code runs meanwhile). */
static struct found found;

/* A wait on the tasks in `found`, or NULL (none, or out of memory). `refs`: the
 * awaited table holds each of them for the wait. */
static struct pl_py_wait *wait_new(const struct found *fd, int refs)
{
	struct pl_py_wait *w;
	if (fd->more && *pl_py_host->prof)
		coprof_count_dropped(*pl_py_host->prof, "python awaited tasks past a wait's 1024",
				     fd->more);
	if (!fd->n || !(w = malloc(sizeof(*w) + fd->n * sizeof(w->ids[0]))))
		return NULL;
	w->since = pl_py_monotonic_ns();
	w->gen = __atomic_load_n(&pl_py_gen, __ATOMIC_RELAXED);
	w->fut = NULL;
	w->parent = 0;
	w->n = fd->n;
	w->kind = fd->kind;
	memcpy(w->ids, fd->ids, fd->n * sizeof(w->ids[0]));
	return refs ? wait_hold(w) : w;
}

/* Names the awaited tasks of fd that have a context already (the others are named as
 * they end). */
static void name_tasks(struct pl_py_thread *pt, const struct found *fd)
{
	for (uint32_t i = 0; i < fd->n; i++) {
		struct awaited *a = pl_py_map_get(&awaited_map, (uintptr_t)fd->ids[i]);
		/* (A subclass's get_coro could be looked up through Python code.) */
		const char *name = a && !a->name[0] && Py_TYPE(fd->tasks[i]) == task_type
				       ? pl_py_task_name(pt, fd->tasks[i])
				       : NULL;
		if (name)
			copy_name(a->name, sizeof(a->name), name);
	}
}

struct pl_py_wait *pl_py_wait_begin(struct pl_py_thread *pt, uint64_t waiter_id, PyObject *yielded,
				    struct pl_py_wait *inner)
{
	if (inner) {
		if (inner->fut == yielded && (!inner->parent || inner->parent == waiter_id)) {
			inner->since = pl_py_monotonic_ns();
			inner->gen = __atomic_load_n(&pl_py_gen, __ATOMIC_RELAXED);
			inner->fut = NULL;
			return wait_hold(inner);
		}
		free(inner);
	}
	PyTypeObject *tp = Py_TYPE(yielded);
	/* The common yields, of nothing asyncio follows, cost a look at the type. */
	if (pl_py_likely(task_type) && tp != task_type && tp != future_type &&
	    tp != gathering_type && !PyObject_TypeCheck(yielded, future_type))
		return NULL;
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	struct found *fd = &found;
	struct pl_py_wait *w = NULL;
	if (!types_ready() || !PyObject_TypeCheck(yielded, future_type))
		goto out;
	fd->n = 0;
	fd->more = 0;
	if (is_task(yielded)) {
		fd->kind = COPROF_AWAIT_TASK;
		add_task(fd, yielded);
	} else if (is_gathering(yielded)) {
		fd->kind = COPROF_AWAIT_GATHER;
		gather_children(fd, yielded, 0);
	} else if (tp == future_type) {
		PyObject *o = shield_inner(yielded);
		fd->kind = COPROF_AWAIT_SHIELD;
		if (o)
			add_task(fd, o);
		Py_XDECREF(o);
	}
	/* A gather's children mostly start after it is awaited: they are named as they
	 * end, and asking each for its coroutine now would cost a call apiece. */
	if ((w = wait_new(fd, 1)) && fd->kind != COPROF_AWAIT_GATHER)
		name_tasks(pt, fd);
out:
	pl_py_exc_restore(&e);
	return w;
}

/* The pending tasks of the futures in set or sequence fs (asyncio.wait's argument). */
static void tasks_of(struct found *fd, PyObject *fs)
{
	PyObject *it = fs && (PySet_Check(fs) || PyFrozenSet_Check(fs) || PyList_CheckExact(fs) ||
			      PyTuple_CheckExact(fs))
			   ? PyObject_GetIter(fs)
			   : NULL;
	for (PyObject *t; it && (t = PyIter_Next(it));) {
		if (is_task(t))
			add_task(fd, t);
		Py_DECREF(t);
	}
	Py_XDECREF(it);
}

/* What the frame fr of one of asyncio's coroutines of kind `waits` waits on with the
 * future `yielded`: fd->n tasks (none when it is not that coroutine's own wait), and
 * the Task that waits when the frame tells (*parent; else 0). */
static void inner_tasks(struct found *fd, PL_PY_FRAME *fr, unsigned waits, PyObject *yielded,
			PyObject **parent)
{
	PyObject *first = pl_py_frame_arg(fr, 0);
	if (!first)
		return;
	if (waits == PL_PY_WAITS_WAIT) {
		/* _wait(fs, timeout, return_when, loop): `await waiter`, a future of its
		 * own that the done callbacks of fs complete */
		fd->kind = COPROF_AWAIT_WAIT;
		tasks_of(fd, first);
	} else if (waits == PL_PY_WAITS_WAIT_FOR) {
#if PY_VERSION_HEX < 0x030C0000
		/* wait_for(fut, timeout): fut, made a task by then, completes `waiter`; a
		 * wait_for without a timeout awaits the task itself (kind task) */
		fd->kind = COPROF_AWAIT_WAIT;
		if (is_task(first) && first != yielded)
			add_task(fd, first);
#endif
	} else if (waits == PL_PY_WAITS_TASKGROUP) {
#if PY_VERSION_HEX >= 0x030B0000 /* 3.10 has no TaskGroup */
		PyObject *fut = dict_attr(first, s_completed);
		if (fut == yielded && (*parent = dict_attr(first, s_parent)) && is_task(*parent)) {
			fd->kind = COPROF_AWAIT_TASKGROUP;
			taskgroup_tasks(fd, first);
		}
		Py_XDECREF(fut);
#endif
	}
}

void pl_py_wait_inner(struct pl_py_thread *pt, PL_PY_FRAME *fr, unsigned waits, PyObject *yielded)
{
	if (!yielded || !pl_py_frame_gen(fr))
		return;
	struct pl_py_exc e;
	pl_py_exc_save(&e);
	PyObject *parent = NULL;
	if (types_ready() && PyObject_TypeCheck(yielded, future_type) && !is_task(yielded)) {
		struct found *fd = &found;
		fd->n = 0;
		fd->more = 0;
		inner_tasks(fd, fr, waits, yielded, &parent);
		pl_py_wait_free(pt->inner_wait);
		if ((pt->inner_wait = wait_new(fd, 0))) {
			pt->inner_wait->fut = yielded;
			pt->inner_wait->parent = is_task(parent) ? (uint64_t)(uintptr_t)parent : 0;
		}
	}
	Py_XDECREF(parent);
	pl_py_exc_restore(&e);
}

/* Lets go of the tasks w names. */
static void wait_release(struct pl_py_wait *w)
{
	if (w->fut) { /* made inside a chain, never held */
		free(w);
		return;
	}
	for (uint32_t i = 0; i < w->n; i++) {
		struct awaited *a = pl_py_map_get(&awaited_map, (uintptr_t)w->ids[i]);
		if (a && --a->refs == 0)
			awaited_free(pl_py_map_del(&awaited_map, (uintptr_t)w->ids[i]));
	}
	free(w);
}

void pl_py_wait_end(struct pl_py_thread *pt, struct coprof_ctx *waiter, struct pl_py_wait *w)
{
	uint64_t now = pl_py_monotonic_ns();
	/* A wait under way when profiling was stopped and started again (pl_py_gen) is
	 * not recorded: it began in a window written already (rule 13). */
	for (uint32_t i = 0; i < w->n && w->gen == pt->gen; i++) {
		const struct awaited *a = pl_py_map_get(&awaited_map, (uintptr_t)w->ids[i]);
		uint64_t end = a && a->end && a->end < now ? a->end : now;
		coprof_await_add(pt->t, waiter, w->ids[i], a && a->name[0] ? a->name : NULL,
				 w->kind, end > w->since ? end - w->since : 0);
	}
	wait_release(w);
}

void pl_py_wait_free(struct pl_py_wait *w)
{
	if (w)
		wait_release(w);
}

void pl_py_wait_ended(uint64_t id, const struct coprof_ctx *ctx)
{
	struct awaited *a = pl_py_map_get(&awaited_map, (uintptr_t)id);
	if (pl_py_likely(!a) || a->end)
		return;
	a->end = pl_py_monotonic_ns();
	copy_name(a->name, sizeof(a->name), ctx && ctx->name ? ctx->name : "");
}
