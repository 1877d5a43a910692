/* keymap.c: open-addressing hash map from pstats keys (or strings) to indices.
 *
 * Filled by the writer and the reader, one key at a time, in the caller's thread. It
 * grows at half load so that probes stay short; hashing reads 8 bytes at a time.
 * Large tables come from cp_big_calloc (huge pages). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "keymap.h"

#define MUL 0x9e3779b97f4a7c15ULL

void cp_keymap_init(struct cp_keymap *m)
{
	memset(m, 0, sizeof(*m));
}

void cp_keymap_fini(struct cp_keymap *m)
{
	cp_big_free(m->t, m->cap * sizeof(*m->t));
	cp_keymap_init(m);
}

static uint64_t mix(uint64_t h, uint64_t w)
{
	h = (h ^ w) * MUL;
	return h ^ (h >> 29);
}

static uint64_t hash_bytes(uint64_t h, const char *s, size_t len)
{
	uint64_t w;

	while (len >= 8) {
		memcpy(&w, s, 8);
		h = mix(h, w);
		s += 8;
		len -= 8;
	}
	w = 0;
	if (len)
		memcpy(&w, s, len);
	return mix(h, w ^ ((uint64_t)len << 56));
}

static int ent_eq(const struct cp_keymap_ent *e, uint64_t h, const char *file, size_t flen,
		  uint64_t line, const char *name, size_t nlen)
{
	return e->hash == h && e->line == line && e->flen == flen && e->nlen == nlen &&
	       (e->name == NULL) == (name == NULL) && memcmp(e->file, file, flen) == 0 &&
	       (!name || memcmp(e->name, name, nlen) == 0);
}

static int grow(struct cp_keymap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct cp_keymap_ent *t;

	if (cap > SIZE_MAX / sizeof(*t))
		return -ENOMEM;
	t = cp_big_calloc(cap * sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++) {
		struct cp_keymap_ent *e = &m->t[i];
		size_t j;
		if (!e->used)
			continue;
		for (j = e->hash & (cap - 1); t[j].used; j = (j + 1) & (cap - 1))
			;
		t[j] = *e;
	}
	cp_big_free(m->t, m->cap * sizeof(*m->t));
	m->t = t;
	m->cap = cap;
	return 0;
}

/* The slot of (file, line, name), or the empty slot where it belongs; *h gets its hash.
 * The table has a free slot (the caller grew it, or it is not empty). Inlined: the
 * writer looks up every key and string it writes (a call per lookup was 4% of a dump). */
static inline __attribute__((always_inline)) size_t probe(const struct cp_keymap *m, const char *file, size_t flen, uint64_t line,
		    const char *name, size_t nlen, uint64_t *h)
{
	size_t j;

	*h = hash_bytes(mix(line, name ? 1 : 2), file, flen);
	if (name)
		*h = hash_bytes(*h, name, nlen);
	for (j = *h & (m->cap - 1); m->t[j].used; j = (j + 1) & (m->cap - 1))
		if (ent_eq(&m->t[j], *h, file, flen, line, name, nlen))
			break;
	return j;
}

int cp_keymap_find(const struct cp_keymap *m, const char *file, size_t flen, uint64_t line,
		   const char *name, size_t nlen, uint32_t *val)
{
	uint64_t h;

	if (!m->n)
		return 0;
	const struct cp_keymap_ent *e = &m->t[probe(m, file, flen, line, name, nlen, &h)];
	if (!e->used)
		return 0;
	*val = e->val;
	return 1;
}

int cp_keymap_get_or_put(struct cp_keymap *m, const char *file, size_t flen, uint64_t line,
			 const char *name, size_t nlen, uint32_t *val, int *found)
{
	uint64_t h;
	size_t j;

	if (flen > UINT32_MAX || nlen > UINT32_MAX)
		return -ENOMEM;
	if ((m->n + 1) * 2 > m->cap && grow(m) < 0)
		return -ENOMEM;
	j = probe(m, file, flen, line, name, nlen, &h);
	if (m->t[j].used) {
		*val = m->t[j].val;
		*found = 1;
		return 0;
	}
	m->t[j] = (struct cp_keymap_ent){
	    .hash = h,
	    .file = file,
	    .name = name,
	    .line = line,
	    .flen = (uint32_t)flen,
	    .nlen = (uint32_t)nlen,
	    .val = *val,
	    .used = 1,
	};
	m->n++;
	*found = 0;
	return 0;
}

void cp_ptrmap_init(struct cp_ptrmap *m)
{
	memset(m, 0, sizeof(*m));
}

void cp_ptrmap_fini(struct cp_ptrmap *m)
{
	cp_big_free(m->t, m->cap * sizeof(*m->t));
	cp_ptrmap_init(m);
}

static size_t ptr_slot(const void *ptr, size_t cap)
{
	uint64_t h = (uint64_t)(uintptr_t)ptr * MUL;

	return (size_t)(h >> 32) & (cap - 1);
}

int cp_ptrmap_get(const struct cp_ptrmap *m, const void *ptr, uint32_t *val)
{
	if (!m->cap)
		return 0;
	for (size_t j = ptr_slot(ptr, m->cap); m->t[j].ptr; j = (j + 1) & (m->cap - 1)) {
		if (m->t[j].ptr == ptr) {
			*val = m->t[j].val;
			return 1;
		}
	}
	return 0;
}

int cp_ptrmap_put(struct cp_ptrmap *m, const void *ptr, uint32_t val)
{
	size_t j;

	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct cp_ptrmap_ent *t = cp_big_calloc(cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->t[i].ptr)
				continue;
			for (j = ptr_slot(m->t[i].ptr, cap); t[j].ptr; j = (j + 1) & (cap - 1))
				;
			t[j] = m->t[i];
		}
		cp_big_free(m->t, m->cap * sizeof(*m->t));
		m->t = t;
		m->cap = cap;
	}
	for (j = ptr_slot(ptr, m->cap); m->t[j].ptr; j = (j + 1) & (m->cap - 1)) {
		if (m->t[j].ptr == ptr) {
			m->t[j].val = val;
			return 0;
		}
	}
	m->t[j].ptr = ptr;
	m->t[j].val = val;
	m->n++;
	return 0;
}
