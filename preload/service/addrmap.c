/* addrmap.c: the lock-free address map's writers (service.h). pl_addrmap_make runs
 * outside signal handlers; pl_addrmap_put anywhere, as the readers do. */
#include <stdlib.h>

#include "service.h"

int pl_addrmap_make(struct pl_addrmap *m)
{
	if (atomic_load_explicit(&m->slots, memory_order_acquire))
		return 0;
	struct pl_addrmap_slot *s = calloc(m->mask + 1, sizeof(*s));
	struct pl_addrmap_slot *none = NULL;
	if (!s)
		return -1;
	if (!atomic_compare_exchange_strong(&m->slots, &none, s))
		free(s); /* another thread made it first */
	return 0;
}

/* async-signal-safe once the table exists */
int pl_addrmap_put(struct pl_addrmap *m, uintptr_t k, void *v)
{
	struct pl_addrmap_slot *s = atomic_load_explicit(&m->slots, memory_order_acquire);
	if (!s || !k)
		return -1;
	size_t i = pl_addrmap_hash(k, m->mask);
	for (int n = 0; n < PL_ADDRMAP_PROBE; n++, i = (i + 1) & m->mask) {
		uintptr_t cur = atomic_load_explicit(&s[i].key, memory_order_acquire);
		if (cur == 0) {
			/* an empty slot: claim it unless another thread just did */
			if (!atomic_compare_exchange_strong(&s[i].key, &cur, k) && cur != k)
				continue;
		} else if (cur != k) {
			continue;
		}
		atomic_store_explicit(&s[i].val, v, memory_order_release);
		return 0;
	}
	if (!atomic_exchange(&m->said_full, 1))
		pl_say("%s", m->full);
	return -1;
}
