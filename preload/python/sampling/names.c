/* names.c: the names of sampled Python functions, made inside the tick handler of the
 * thread that runs them. async-signal-safe.
 *
 * A code object is named (co_filename, co_firstlineno, co_qualname; co_name on 3.10,
 * as trace mode keys it) the first time a tick finds it on a frame, while that frame
 * holds a reference to it: its strings are copied as UTF-8 into an arena mapped at
 * attach time and interned, by content, in a fixed open-addressed table. A key is the
 * index of its table entry with the top bit set (never an address of code, which the
 * shim's symbolizer would claim), so it never dies with the code object, and the dump
 * names it without the GIL. A cache from code object to entry, checked against the
 * code object's string objects and their hashes at each use, spares the copy. */
/* async-signal-safe */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "sampling.h"

#define NAME_SLOTS (1u << 16)	/* distinct functions sampled, at most */
#define ARENA_BYTES (16u << 20) /* their names */
#define PROBES 128		/* slots looked at before the table counts as full */
#define CACHE_SLOTS 4096	/* code object -> entry, direct mapped */
#define MAX_CHARS 512		/* longer file names or qualnames are not sampled */
#define MAX_UTF8 (MAX_CHARS * 4)
#define WAIT_SPINS 100000    /* an entry another thread is writing: how long to wait */
#define KEY_TAG (1ull << 63) /* keys are KEY_TAG | the entry's index */

struct name {
	_Atomic uint64_t hash;	/* of the content; 0: free */
	_Atomic uint32_t ready; /* 0: being written; 1: ready; 2: broken (arena full) */
	uint32_t line;
	uint32_t file_len, name_len;
	const char *file, *name; /* in the arena, NUL-terminated */
};

/* One cached code object, under a sequence lock: odd while a handler writes it. */
struct cached {
	_Atomic uint32_t seq;
	_Atomic uint32_t line;
	_Atomic uintptr_t code, file, name, entry;
	_Atomic Py_hash_t file_hash, name_hash;
};

static struct name *names;
static char *arena;
static _Atomic size_t arena_used;
static struct cached cache[CACHE_SLOTS];

int pl_pys_init(void)
{
	if (names)
		return 0;
	void *t = mmap(NULL, NAME_SLOTS * sizeof(struct name), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (t == MAP_FAILED)
		return -errno;
	void *a = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (a == MAP_FAILED) {
		int err = errno;
		munmap(t, NAME_SLOTS * sizeof(struct name));
		return -err;
	}
	arena = a;
	names = t;
	return 0;
}

/* The UTF-8 of str `s` into buf (MAX_UTF8 bytes), read without calling Python. Lone
 * surrogates become '?', as trace mode's copy has them. The length, or -1 when `s`
 * is not an exact, ready str of at most MAX_CHARS characters. */
static long utf8_of(PyObject *s, char *buf)
{
	if (!s || ((uintptr_t)s & 7) || Py_TYPE(s) != &PyUnicode_Type)
		return -1;
	PyASCIIObject *a = (PyASCIIObject *)s;
	Py_ssize_t n = a->length;
	if (n < 0 || n > MAX_CHARS)
		return -1;
#if PY_VERSION_HEX < 0x030C0000
	if (!a->state.ready)
		return -1;
#endif
	unsigned kind = a->state.kind;
	const void *data;
	if (a->state.compact)
		data = a->state.ascii ? (const void *)(a + 1)
				      : (const void *)((PyCompactUnicodeObject *)s + 1);
	else
		data = ((PyUnicodeObject *)s)->data.any;
	if (!data || (kind != 1 && kind != 2 && kind != 4))
		return -1;
	char *p = buf;
	for (Py_ssize_t i = 0; i < n; i++) {
		Py_UCS4 c = kind == 1	? ((const Py_UCS1 *)data)[i]
			    : kind == 2 ? ((const Py_UCS2 *)data)[i]
					: ((const Py_UCS4 *)data)[i];
		if (c < 0x80) {
			*p++ = (char)c;
		} else if (c < 0x800) {
			*p++ = (char)(0xC0 | (c >> 6));
			*p++ = (char)(0x80 | (c & 0x3F));
		} else if ((c >= 0xD800 && c < 0xE000) || c > 0x10FFFF) {
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
	return p - buf;
}

static uint64_t fnv(uint64_t h, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

/* The entry for these names, made if new. NULL when the table or the arena is full,
 * or another thread's handler is still writing the entry after a long wait. */
static struct name *intern(const char *file, size_t flen, const char *name, size_t nlen,
			   unsigned line)
{
	uint64_t h = fnv(0xcbf29ce484222325ull, file, flen);
	h = fnv((h ^ 0xff) * 0x100000001b3ull, name, nlen);
	h = (h ^ line) * 0x100000001b3ull;
	h |= 1; /* 0 marks a free slot */
	uint32_t slot = (uint32_t)(h >> 20) & (NAME_SLOTS - 1);
	for (unsigned i = 0; i < PROBES; i++, slot = (slot + 1) & (NAME_SLOTS - 1)) {
		struct name *e = &names[slot];
		uint64_t cur = atomic_load_explicit(&e->hash, memory_order_acquire);
		if (cur == 0) {
			if (atomic_compare_exchange_strong(&e->hash, &cur, h)) {
				size_t need = flen + nlen + 2;
				size_t at = atomic_fetch_add(&arena_used, need);
				if (at + need > ARENA_BYTES) {
					atomic_store_explicit(&e->ready, 2, memory_order_release);
					return NULL;
				}
				char *f = arena + at;
				memcpy(f, file, flen + 1);
				memcpy(f + flen + 1, name, nlen + 1);
				e->file = f;
				e->name = f + flen + 1;
				e->file_len = (uint32_t)flen;
				e->name_len = (uint32_t)nlen;
				e->line = line;
				atomic_store_explicit(&e->ready, 1, memory_order_release);
				return e;
			}
			/* cur now holds what another handler claimed the slot with */
		}
		if (cur != h)
			continue;
		uint32_t r;
		for (unsigned s = 0;
		     (r = atomic_load_explicit(&e->ready, memory_order_acquire)) == 0; s++)
			if (s == WAIT_SPINS)
				return NULL;
		if (r != 1)
			return NULL;
		if (e->line == line && e->file_len == flen && e->name_len == nlen &&
		    memcmp(e->file, file, flen) == 0 && memcmp(e->name, name, nlen) == 0)
			return e;
	}
	return NULL;
}

static PyObject *qualname_of(PyCodeObject *co)
{
#if PY_VERSION_HEX >= 0x030B0000
	return co->co_qualname;
#else
	return co->co_name;
#endif
}

/* The cached entry for `co` when the cache still describes it: same string objects,
 * with the hashes they had (a string freed and another made at its address differs
 * there), and the same first line. Equal strings and line make an equal key, so a
 * code object that died and left its address to a twin is named right too. */
static uintptr_t cache_get(struct cached *c, PyCodeObject *co, PyObject *file, PyObject *name)
{
	uint32_t s1 = atomic_load_explicit(&c->seq, memory_order_acquire);
	if (s1 & 1)
		return 0;
	uintptr_t e = atomic_load_explicit(&c->entry, memory_order_relaxed);
	int ok =
	    atomic_load_explicit(&c->code, memory_order_relaxed) == (uintptr_t)co &&
	    atomic_load_explicit(&c->file, memory_order_relaxed) == (uintptr_t)file &&
	    atomic_load_explicit(&c->name, memory_order_relaxed) == (uintptr_t)name &&
	    atomic_load_explicit(&c->line, memory_order_relaxed) == (uint32_t)co->co_firstlineno &&
	    atomic_load_explicit(&c->file_hash, memory_order_relaxed) ==
		((PyASCIIObject *)file)->hash &&
	    atomic_load_explicit(&c->name_hash, memory_order_relaxed) ==
		((PyASCIIObject *)name)->hash;
	atomic_thread_fence(memory_order_acquire);
	if (!ok || atomic_load_explicit(&c->seq, memory_order_relaxed) != s1)
		return 0;
	return e;
}

static void cache_put(struct cached *c, PyCodeObject *co, PyObject *file, PyObject *name,
		      uintptr_t e)
{
	Py_hash_t fh = ((PyASCIIObject *)file)->hash, nh = ((PyASCIIObject *)name)->hash;
	if (fh == -1 || nh == -1)
		return; /* a hash not computed yet cannot vouch for the content */
	uint32_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);
	if ((s & 1) || !atomic_compare_exchange_strong(&c->seq, &s, s + 1))
		return; /* another handler writes it now */
	atomic_store_explicit(&c->code, (uintptr_t)co, memory_order_relaxed);
	atomic_store_explicit(&c->file, (uintptr_t)file, memory_order_relaxed);
	atomic_store_explicit(&c->name, (uintptr_t)name, memory_order_relaxed);
	atomic_store_explicit(&c->line, (uint32_t)co->co_firstlineno, memory_order_relaxed);
	atomic_store_explicit(&c->file_hash, fh, memory_order_relaxed);
	atomic_store_explicit(&c->name_hash, nh, memory_order_relaxed);
	atomic_store_explicit(&c->entry, e, memory_order_relaxed);
	atomic_store_explicit(&c->seq, s + 2, memory_order_release);
}

uintptr_t pl_pys_key(PyCodeObject *co)
{
	if (!names || !co || ((uintptr_t)co & 7) || Py_TYPE(co) != &PyCode_Type ||
	    Py_REFCNT(co) <= 0)
		return 0;
	PyObject *file = co->co_filename, *name = qualname_of(co);
	if (!file || !name || ((uintptr_t)file & 7) || ((uintptr_t)name & 7) ||
	    Py_TYPE(file) != &PyUnicode_Type || Py_TYPE(name) != &PyUnicode_Type)
		return 0;
	struct cached *c = &cache[(((uintptr_t)co * 0x9E3779B97F4A7C15ull) >> 40) % CACHE_SLOTS];
	uintptr_t e = cache_get(c, co, file, name);
	if (e)
		return e;
	char fbuf[MAX_UTF8 + 1], nbuf[MAX_UTF8 + 1];
	long fl = utf8_of(file, fbuf), nl = utf8_of(name, nbuf);
	int line = co->co_firstlineno;
	if (fl < 0 || nl < 0 || line < 0)
		return 0;
	struct name *n = intern(fbuf, (size_t)fl, nbuf, (size_t)nl, (unsigned)line);
	if (!n)
		return 0;
	uintptr_t key = (uintptr_t)(KEY_TAG | (uint64_t)(n - names));
	cache_put(c, co, file, name, key);
	return key;
}

int pl_pys_resolve(void *arg, uintptr_t key, struct coprof_func_info *out)
{
	(void)arg;
	if (!names || (key & ~(uintptr_t)KEY_TAG) >= NAME_SLOTS || !(key & KEY_TAG))
		return -ENOENT;
	struct name *e = &names[key & ~(uintptr_t)KEY_TAG];
	if (atomic_load_explicit(&e->ready, memory_order_acquire) != 1)
		return -ENOENT;
	out->file = e->file;
	out->line = e->line;
	out->name = e->name;
	return 0;
}
