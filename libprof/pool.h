/* pool.h: per-thread memory for the engine's records, tables and frame stacks.
 *
 * Chunks come from mmap; a pool hands out zeroed blocks by size class with free lists,
 * so the hot path reuses memory without calling libc. Every byte a pool maps is
 * counted in one profiler-wide atomic counter checked against the memory limit only
 * when a chunk is taken. A pool is used by its owning thread only (or by the dumper
 * while that thread is paused). */
#ifndef CP_POOL_H
#define CP_POOL_H

#include <stdatomic.h>
#include <stddef.h>

#define CP_POOL_NCLASSES 134

struct cp_chunk;

struct cp_pool {
	_Atomic size_t *used;	 /* the profiler's byte count */
	size_t limit;		 /* bytes, for all pools together */
	struct cp_chunk *chunks; /* every mapping, small chunks and big blocks */
	char *cur, *end;	 /* the bump area of the newest small chunk */
	void *free[CP_POOL_NCLASSES];
	size_t mapped; /* bytes this pool holds */
};

void cp_pool_init(struct cp_pool *pl, _Atomic size_t *used, size_t limit);
/* A zeroed block of `size` bytes, or NULL when the memory limit would be passed (or
 * mmap failed). Blocks are 8-byte aligned (sizes go by 8 bytes: an edge record is 56). */
void *cp_pool_alloc(struct cp_pool *pl, size_t size);
/* Returns a block; `size` must be the size it was allocated with. */
void cp_pool_free(struct cp_pool *pl, void *ptr, size_t size);
/* Unmaps everything the pool holds and gives its bytes back to the counter. */
void cp_pool_release(struct cp_pool *pl);

#endif
