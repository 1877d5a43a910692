/* map.c: growing and deleting in the adapter's address maps (py.h). Linear probing
 * with backward-shift deletion, so there are no tombstones and lookups stay short.
 * Runs under the GIL or in the owning thread. */
#include <errno.h>
#include <stdlib.h>

#include "py.h"

static int grow(struct pl_py_map *m)
{
	uint32_t cap = m->keys ? (m->mask + 1) * 2 : 64;
	uintptr_t *keys = calloc(cap, sizeof(*keys));
	void **vals = calloc(cap, sizeof(*vals));
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	struct pl_py_map nm = {.keys = keys, .vals = vals, .mask = cap - 1, .n = 0};
	if (m->keys) {
		for (uint32_t i = 0; i <= m->mask; i++)
			if (m->keys[i])
				pl_py_map_put(&nm, m->keys[i], m->vals[i]);
	}
	free(m->keys);
	free(m->vals);
	*m = nm;
	return 0;
}

int pl_py_map_put(struct pl_py_map *m, uintptr_t k, void *v)
{
	if (!m->keys || (m->n + 1) * 2 > m->mask + 1) {
		int rc = grow(m);
		if (rc)
			return rc;
	}
	uint32_t i = pl_py_map_slot(m, k);
	while (m->keys[i] && m->keys[i] != k)
		i = (i + 1) & m->mask;
	if (!m->keys[i])
		m->n++;
	m->keys[i] = k;
	m->vals[i] = v;
	return 0;
}

/* Empties slot i and moves later entries of the same probe run back into the hole. */
static void remove_at(struct pl_py_map *m, uint32_t i)
{
	uint32_t j = i;
	for (;;) {
		j = (j + 1) & m->mask;
		if (!m->keys[j])
			break;
		uint32_t home = pl_py_map_slot(m, m->keys[j]);
		/* Entry j may move to i only if its home is not in (i, j]. */
		if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		m->keys[i] = m->keys[j];
		m->vals[i] = m->vals[j];
		i = j;
	}
	m->keys[i] = 0;
	m->vals[i] = 0;
	m->n--;
}

void *pl_py_map_del(struct pl_py_map *m, uintptr_t k)
{
	if (!m->keys)
		return 0;
	for (uint32_t i = pl_py_map_slot(m, k);; i = (i + 1) & m->mask) {
		if (m->keys[i] == 0)
			return 0;
		if (m->keys[i] == k) {
			void *v = m->vals[i];
			remove_at(m, i);
			return v;
		}
	}
}

void pl_py_map_sweep(struct pl_py_map *m, int (*fn)(uintptr_t k, void *v, void *arg), void *arg)
{
	if (!m->keys)
		return;
	/* Removing shifts entries backwards, so a removed slot is looked at again. */
	for (uint32_t i = 0; i <= m->mask;) {
		if (m->keys[i] && fn(m->keys[i], m->vals[i], arg))
			remove_at(m, i);
		else
			i++;
	}
}

void pl_py_map_free(struct pl_py_map *m)
{
	free(m->keys);
	free(m->vals);
	m->keys = 0;
	m->vals = 0;
	m->mask = 0;
	m->n = 0;
}
