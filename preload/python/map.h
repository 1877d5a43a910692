/* map.h: a small open-addressed hash map from an address to a pointer, for the
 * adapter's caches (code object -> function, coroutine -> task). Lookups are inline
 * and allocate nothing; inserts grow the table (the slow path of a first sighting).
 * Not thread-safe: every map is used under the GIL or by one thread only. */
#ifndef PL_PY_MAP_H
#define PL_PY_MAP_H

#include <stdint.h>

struct pl_py_map {
	uintptr_t *keys; /* 0: empty slot */
	void **vals;
	uint32_t mask; /* capacity - 1; capacity is a power of two, 0 before first put */
	uint32_t n;
};

static inline uint32_t pl_py_map_slot(const struct pl_py_map *m, uintptr_t k)
{
	return (uint32_t)(((uint64_t)k * 0x9E3779B97F4A7C15ull) >> 32) & m->mask;
}

/* The value stored under k, or NULL. */
static inline void *pl_py_map_get(const struct pl_py_map *m, uintptr_t k)
{
	if (!m->keys)
		return 0;
	for (uint32_t i = pl_py_map_slot(m, k);; i = (i + 1) & m->mask) {
		if (m->keys[i] == k)
			return m->vals[i];
		if (m->keys[i] == 0)
			return 0;
	}
}

/* Stores v under k (k != 0), replacing any value. 0 or -ENOMEM. */
int pl_py_map_put(struct pl_py_map *m, uintptr_t k, void *v);
/* Removes k; returns its value or NULL. */
void *pl_py_map_del(struct pl_py_map *m, uintptr_t k);
/* Calls fn on every entry; fn returns nonzero to remove the entry. */
void pl_py_map_sweep(struct pl_py_map *m, int (*fn)(uintptr_t k, void *v, void *arg), void *arg);
void pl_py_map_free(struct pl_py_map *m);

#endif
