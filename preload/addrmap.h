/* addrmap.h: a lock-free map from an address to a pointer, for the runtime adapters'
 * switch paths (a ucontext_t or an fcontext handle to what runs there). Open addressing
 * with linear probing, bounded; a key, once in, is never taken out, only given another
 * value. Readers and writers run in any thread, in signal handlers too
 * (async-signal-safe) once the table exists: only pl_addrmap_make allocates. */
#ifndef PL_ADDRMAP_H
#define PL_ADDRMAP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define PL_ADDRMAP_PROBE 512 /* slots looked at for one key, at most */

struct pl_addrmap_slot {
	_Atomic uintptr_t key; /* 0: empty */
	_Atomic(void *) val;
};

struct pl_addrmap {
	struct pl_addrmap_slot *_Atomic slots; /* NULL until pl_addrmap_make */
	size_t mask;			       /* slots - 1, a power of two less one */
	const char *full;		       /* said once when a key finds no slot */
	atomic_int said_full;
};

/* Makes the table, once, whichever thread asks first: large enough for glibc to mmap
 * it, so pages are only touched when used. 0, or -1 when out of memory. Not in a
 * signal handler. */
__attribute__((visibility("hidden"))) int pl_addrmap_make(struct pl_addrmap *m);

/* Records that `k` now holds `v`. 0, or -1 when there is no table or no slot (then
 * m->full is said on stderr, once). */
__attribute__((visibility("hidden"))) int pl_addrmap_put(struct pl_addrmap *m, uintptr_t k,
							 void *v);

/* The table exists. */
static inline int pl_addrmap_ready(struct pl_addrmap *m)
{
	return atomic_load_explicit(&m->slots, memory_order_acquire) != NULL;
}

static inline size_t pl_addrmap_hash(uintptr_t k, size_t mask)
{
	return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 40) & mask;
}

/* The value of `k`; NULL when `k` is not in (or is 0, or there is no table). */
static inline void *pl_addrmap_get(struct pl_addrmap *m, uintptr_t k)
{
	struct pl_addrmap_slot *s = atomic_load_explicit(&m->slots, memory_order_acquire);
	if (!s || !k)
		return NULL;
	size_t i = pl_addrmap_hash(k, m->mask);
	for (int n = 0; n < PL_ADDRMAP_PROBE; n++, i = (i + 1) & m->mask) {
		uintptr_t cur = atomic_load_explicit(&s[i].key, memory_order_acquire);
		if (cur == k)
			return atomic_load_explicit(&s[i].val, memory_order_acquire);
		if (cur == 0)
			return NULL;
	}
	return NULL;
}

#endif
