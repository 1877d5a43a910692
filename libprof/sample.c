/* sample.c: placeholder until the sampling part lands (see sample.h). */
#include <errno.h>

#include "sample.h"

int cp_samples_new(size_t memory_limit, struct cp_samples **out)
{
	(void)memory_limit;
	*out = NULL;
	return 0;
}

void cp_samples_free(struct cp_samples *s)
{
	(void)s;
}

void cp_samples_clear(struct cp_samples *s)
{
	(void)s;
}

int cp_samples_add(struct cp_samples *s, uint64_t tid, const void *ctx, int waiting,
		   const uintptr_t *pcs, unsigned depth, uint64_t period_ns)
{
	(void)s, (void)tid, (void)ctx, (void)waiting, (void)pcs, (void)depth, (void)period_ns;
	return -ENOSYS;
}

uint64_t cp_samples_count(const struct cp_samples *s)
{
	(void)s;
	return 0;
}

int cp_samples_build(const struct cp_samples *s, const struct cp_samples_map *map,
		     struct cp_profile *prof)
{
	(void)s, (void)map, (void)prof;
	return 0;
}
