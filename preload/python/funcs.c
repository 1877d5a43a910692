/* funcs.c: the adapter's functions, as pstats keys them: code objects
 * (co_filename, co_firstlineno, co_qualname) and, with COPROF_BUILTINS=1, C builtins
 * ("~", 0, "<built-in method ...>"), each named once, at first sight, in the thread that
 * met it (GIL held). Names are copied, so the engine resolves keys from its dumping
 * thread without the GIL, even after Python finalized. No code object is kept alive:
 * each carries its function in a code-extra slot of coprof's own, which dies with it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "py.h"

#define SLAB_FUNCS 256

/* Functions live in slabs that are never freed: a key stays valid for the engine. */
struct slab {
	struct slab *next;
	unsigned used;
	struct pl_py_func f[SLAB_FUNCS];
};

static struct pl_py_map by_hash;  /* hash of a function's names -> function (chained) */
static struct pl_py_map builtins; /* PyMethodDef -> function */
static struct slab *slabs;	  /* newest first; read by the resolver (any thread) */
/* The code-extra index that holds a code object's function; -1: not yet asked for;
 * -2: refused (code objects are then not cached, only named again). */
Py_ssize_t pl_py_extra = -1;

static struct pl_py_func *func_new(void)
{
	struct slab *s = slabs;
	if (!s || s->used == SLAB_FUNCS) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		s->next = slabs;
		__atomic_store_n(&slabs, s, __ATOMIC_RELEASE);
	}
	return &s->f[s->used++];
}

/* A UTF-8 copy of a str, made without calling Python (nothing allocated in Python).
 * Lone surrogates become '?'. NULL when out of memory or `s` is not a str. */
static char *utf8_copy(PyObject *s)
{
	if (!s || !PyUnicode_Check(s) || PyUnicode_READY(s) < 0)
		return NULL;
	Py_ssize_t n = PyUnicode_GET_LENGTH(s);
	int kind = PyUnicode_KIND(s);
	const void *data = PyUnicode_DATA(s);
	char *out = malloc((size_t)n * 4 + 1);
	if (!out)
		return NULL;
	char *p = out;
	for (Py_ssize_t i = 0; i < n; i++) {
		Py_UCS4 c = PyUnicode_READ(kind, data, i);
		if (c < 0x80) {
			*p++ = (char)c;
		} else if (c < 0x800) {
			*p++ = (char)(0xC0 | (c >> 6));
			*p++ = (char)(0x80 | (c & 0x3F));
		} else if (c >= 0xD800 && c < 0xE000) {
			*p++ = '?';
		} else if (c < 0x10000) {
			*p++ = (char)(0xE0 | (c >> 12));
			*p++ = (char)(0x80 | ((c >> 6) & 0x3F));
			*p++ = (char)(0x80 | (c & 0x3F));
		} else {
			*p++ = (char)(0xF0 | (c >> 18));
			*p++ = (char)(0x80 | ((c >> 12) & 0x3F));
			*p++ = (char)(0x80 | ((c >> 6) & 0x3F));
			*p++ = (char)(0x80 | (c & 0x3F));
		}
	}
	*p = 0;
	return out;
}

/* Keeps `f` in `co`'s slot (functions are never freed, so the slot needs no free
 * function). Else `co` is named again at its next event. */
static void cache(PyCodeObject *co, struct pl_py_func *f)
{
#if PY_VERSION_HEX >= 0x030C0000
#define REQUEST_EXTRA PyUnstable_Eval_RequestCodeExtraIndex
#define SET_EXTRA PyUnstable_Code_SetExtra
#else
#define REQUEST_EXTRA _PyEval_RequestCodeExtraIndex
#define SET_EXTRA _PyCode_SetExtra
#endif
	if (pl_py_extra == -1) {
		pl_py_extra = REQUEST_EXTRA(NULL);
		if (pl_py_extra < 0)
			pl_py_extra = -2;
	}
	if (pl_py_extra < 0 || SET_EXTRA((PyObject *)co, pl_py_extra, f) < 0)
		PyErr_Clear();
}

static uintptr_t names_hash(const char *file, const char *name, unsigned line, unsigned flags)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (const char *p = file ? file : ""; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	h = (h ^ 0xff) * 0x100000001b3ull;
	for (const char *p = name ? name : ""; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	h ^= ((uint64_t)line << 8) ^ flags;
	return (uintptr_t)(h | 1); /* never 0, the map's empty key */
}

static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* asyncio's functions the hook watches, by where asyncio writes them: its scheduling
 * points (PL_PY_SCHED_*, plain functions: ready.c) and the coroutines in which a task
 * waits on tasks that its root's yield does not name (PL_PY_WAITS_*: task-awaits.c):
 * TaskGroup.__aexit__ (or its helper _aexit), asyncio.wait()'s helper _wait, and
 * wait_for (whose frame task-awaits.c reads only before 3.12, where it waits on a
 * future of its own). Names are matched without their class (qualified from 3.11). */
struct asyncio_fn {
	const char *file, *name;
	unsigned sched, waits;
};
static const struct asyncio_fn asyncio_fns[] = {
    {"/asyncio/base_events.py", "_call_soon", PL_PY_SCHED_CALL_SOON, 0},
    {"/asyncio/events.py", "_run", PL_PY_SCHED_RUN, 0},
    {"/asyncio/taskgroups.py", "__aexit__", 0, PL_PY_WAITS_TASKGROUP},
    {"/asyncio/taskgroups.py", "_aexit", 0, PL_PY_WAITS_TASKGROUP},
    {"/asyncio/tasks.py", "_wait", 0, PL_PY_WAITS_WAIT},
    {"/asyncio/tasks.py", "wait_for", 0, PL_PY_WAITS_WAIT_FOR},
};

/* The row of asyncio_fns for the function named `name` in `file`, or NULL. */
static const struct asyncio_fn *asyncio_fn(const char *file, const char *name)
{
	if (!file || !name)
		return NULL;
	const char *dot = strrchr(name, '.');
	const char *bare = dot ? dot + 1 : name;
	size_t flen = strlen(file);
	for (size_t i = 0; i < sizeof(asyncio_fns) / sizeof(asyncio_fns[0]); i++) {
		size_t n = strlen(asyncio_fns[i].file);
		if (flen >= n && strcmp(file + flen - n, asyncio_fns[i].file) == 0 &&
		    strcmp(bare, asyncio_fns[i].name) == 0)
			return &asyncio_fns[i];
	}
	return NULL;
}

/* The function for `co`'s names, made on first sight of those names, then cached
 * in `co` (pl_py_func_of). */
struct pl_py_func *pl_py_func_slow(PyCodeObject *co)
{
	char *file = utf8_copy(co->co_filename);
#if PY_VERSION_HEX >= 0x030B0000
	char *name = utf8_copy(co->co_qualname);
#else
	char *name = utf8_copy(co->co_name);
#endif
	unsigned line = (unsigned)co->co_firstlineno;
	unsigned flags = 0;
	int fl = co->co_flags;
	if (fl & (CO_COROUTINE | CO_ITERABLE_COROUTINE))
		flags = PL_PY_CORO;
	else if (fl & CO_ASYNC_GENERATOR)
		flags = PL_PY_ASYNC_GEN;
	else if (fl & CO_GENERATOR)
		flags = PL_PY_GEN;
	uintptr_t h = names_hash(file, name, line, flags);
	struct pl_py_func *head = pl_py_map_get(&by_hash, h), *f;
	for (f = head; f; f = f->same)
		if (f->line == line && f->flags == flags && same_str(f->file, file) &&
		    same_str(f->name, name))
			break;
	if (f) {
		free(file);
		free(name);
	} else {
		f = func_new();
		if (!f) {
			free(file);
			free(name);
			return NULL;
		}
		const struct asyncio_fn *a = asyncio_fn(file, name);
		*f = (struct pl_py_func){.file = file,
					 .name = name,
					 .line = line,
					 .flags = flags,
					 .sched = a && !flags ? a->sched : 0,
					 .waits = a && flags == PL_PY_CORO ? a->waits : 0};
		/* Out of memory here only means a twin may be made later: the same
		 * names under two keys, which pstats shows as one. */
		f->same = head;
		if (pl_py_map_put(&by_hash, h, f) != 0)
			f->same = NULL;
	}
	cache(co, f);
	return f;
}

/* Names a builtin as cProfile does: "<built-in method builtins.len>" for functions,
 * "<method 'append' of 'list' objects>" for methods of a type, found by walking the
 * MRO of type(self) for the method table holding this PyMethodDef. */
static void builtin_name(PyMethodDef *ml, PyObject *self, PyObject *mod, char *buf, size_t len)
{
	const char *modname = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
	if (!self) {
		if (modname && strcmp(modname, "builtins") != 0)
			snprintf(buf, len, "<%s.%s>", modname, ml->ml_name);
		else
			snprintf(buf, len, "<%s>", ml->ml_name);
		return;
	}
	if (!PyModule_Check(self)) {
		PyObject *mro = Py_TYPE(self)->tp_mro;
		Py_ssize_t n = mro && PyTuple_Check(mro) ? PyTuple_GET_SIZE(mro) : 0;
		for (Py_ssize_t i = 0; i < n; i++) {
			PyTypeObject *tp = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
			for (PyMethodDef *m = tp->tp_methods; m && m->ml_name; m++) {
				if (m == ml || strcmp(m->ml_name, ml->ml_name) == 0) {
					snprintf(buf, len, "<method '%s' of '%s' objects>",
						 ml->ml_name, tp->tp_name);
					return;
				}
			}
		}
	}
	if (modname)
		snprintf(buf, len, "<built-in method %s.%s>", modname, ml->ml_name);
	else
		snprintf(buf, len, "<built-in method %s>", ml->ml_name);
}

struct pl_py_func *pl_py_builtin_of(PyObject *callable, PyObject *self)
{
	PyMethodDef *ml;
	PyObject *mod = NULL;
	if (PyCFunction_Check(callable)) {
		PyCFunctionObject *fn = (PyCFunctionObject *)callable;
		ml = fn->m_ml;
		self = fn->m_self;
		mod = fn->m_module;
	} else if (self && Py_IS_TYPE(callable, &PyMethodDescr_Type) &&
		   PyObject_TypeCheck(self, PyDescr_TYPE(callable))) {
		/* list.append(lst, x) as sys.monitoring reports lst.append(x): the same
		 * function as the bound method the profile hook sees. */
		ml = ((PyMethodDescrObject *)callable)->d_method;
	} else {
		return NULL;
	}
	/* A method def is shared by every bound copy; its type decides the name. The
	 * type's address is scattered first: two method defs of one table differ in few
	 * bits, and so may two types, so a plain XOR gave Future.cancelled's key to
	 * Task.done. */
	uintptr_t tp = self ? (uintptr_t)Py_TYPE(self) : 0;
	uintptr_t k = (uintptr_t)ml ^ (uintptr_t)((uint64_t)tp * 0x9E3779B97F4A7C15ull);
	struct pl_py_func *f = pl_py_map_get(&builtins, k);
	/* A def freed and reused (pybind11 allocates one per function) is another
	 * builtin: its name or its C function differs. */
	if (pl_py_likely(f) && f->def_meth == (void *)ml->ml_meth &&
	    same_str(f->def_name, ml->ml_name))
		return f;
	f = func_new();
	if (!f)
		return NULL;
	char buf[256];
	builtin_name(ml, self, mod, buf, sizeof(buf));
	f->file = "~";
	f->name = strdup(buf);
	f->line = 0;
	f->def_name = ml->ml_name ? strdup(ml->ml_name) : NULL;
	f->def_meth = (void *)ml->ml_meth;
	pl_py_map_put(&builtins, k, f);
	return f;
}

/* Resolves a key when it is one of ours: it must lie inside one of our slabs, on a
 * function boundary. Slabs are only ever added, so this is safe from any thread. */
int pl_py_resolve(void *arg, uintptr_t key, struct coprof_func_info *out)
{
	(void)arg;
	for (struct slab *s = __atomic_load_n(&slabs, __ATOMIC_ACQUIRE); s; s = s->next) {
		uintptr_t lo = (uintptr_t)s->f, hi = (uintptr_t)(s->f + SLAB_FUNCS);
		if (key < lo || key >= hi || (key - lo) % sizeof(struct pl_py_func))
			continue;
		const struct pl_py_func *f = (const struct pl_py_func *)key;
		out->file = f->file ? f->file : "?";
		out->line = f->line;
		out->name = f->name ? f->name : "?";
		return 0;
	}
	return -ENOENT;
}
