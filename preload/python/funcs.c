/* funcs.c: the adapter's functions, as pstats keys them: code objects
 * (co_filename, co_firstlineno, co_qualname) and, with COPROF_BUILTINS=1, C builtins
 * ("~", 0, "<built-in method ...>"), each named once, at first sight, in the thread that
 * met it (GIL held). Names are copied, so the engine resolves keys from its dumping
 * thread without the GIL, even after Python finalized. */
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

struct pl_py_map pl_py_codes;	  /* code object -> function (holding a reference) */
static struct pl_py_map builtins; /* PyMethodDef -> function */
static struct slab *slabs;	  /* newest first; read by the resolver (any thread) */

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

/* Caches a function for `co` and takes a reference to it, so its address cannot be
 * reused by another code object while the engine may still see it. */
struct pl_py_func *pl_py_func_slow(PyCodeObject *co)
{
	struct pl_py_func *f = func_new();
	if (!f)
		return NULL;
	f->file = utf8_copy(co->co_filename);
#if PY_VERSION_HEX >= 0x030B0000
	f->name = utf8_copy(co->co_qualname);
#else
	f->name = utf8_copy(co->co_name);
#endif
	f->line = (unsigned)co->co_firstlineno;
	int fl = co->co_flags;
	if (fl & (CO_COROUTINE | CO_ITERABLE_COROUTINE))
		f->flags = PL_PY_CORO;
	else if (fl & CO_ASYNC_GENERATOR)
		f->flags = PL_PY_ASYNC_GEN;
	else if (fl & CO_GENERATOR)
		f->flags = PL_PY_GEN;
	Py_INCREF(co);
	f->code = (PyObject *)co;
	/* Out of memory here only means the function is made again next time: wasteful
	 * but correct, since each copy holds its own reference and key. */
	pl_py_map_put(&pl_py_codes, (uintptr_t)co, f);
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
	if (f)
		return f;
	f = func_new();
	if (!f)
		return NULL;
	char buf[256];
	builtin_name(ml, self, mod, buf, sizeof(buf));
	f->file = "~";
	f->name = strdup(buf);
	f->line = 0;
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

static int release_one(uintptr_t k, void *v, void *arg)
{
	(void)k;
	(void)arg;
	struct pl_py_func *f = v;
	if (Py_REFCNT(f->code) > 1)
		return 0; /* alive elsewhere, maybe on a stack: keep it and its key */
	PyObject *code = f->code;
	f->code = NULL;
	Py_DECREF(code);
	return 1;
}

/* Drops the references that only the cache holds (GIL held). Such a code object is on
 * no stack, so none of its calls is open; its function stays, with its names, for the
 * keys the engine holds, and a new code object at the same address gets a new key. */
void pl_py_release(void)
{
	pl_py_map_sweep(&pl_py_codes, release_one, NULL);
}
