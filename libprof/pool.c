/* pool.c: size-class allocator over mmap'd chunks, one per engine thread (pool.h).
 * Runs on the owning thread inside its event sections, or on the dumping thread while
 * the owner is paused (clear, destroy). */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "pool.h"

#define CP_CHUNK_SIZE ((size_t)256 << 10)
#define CP_SMALL_MAX 1024		 /* classes 0..127: multiples of 8 bytes */
#define CP_MEDIUM_MAX ((size_t)64 << 10) /* classes 128..133: 2 KiB .. 64 KiB */

/* The header of every mapping; big blocks (over CP_MEDIUM_MAX) have one each. */
struct cp_chunk {
	struct cp_chunk *next, *prev;
	size_t size; /* bytes mapped, header included */
	size_t pad;
};

struct cp_free {
	struct cp_free *next;
};

void cp_pool_init(struct cp_pool *pl, _Atomic size_t *used, size_t limit)
{
	memset(pl, 0, sizeof(*pl));
	pl->used = used;
	pl->limit = limit;
}

/* The class of a block of `size` bytes (size <= CP_MEDIUM_MAX), and the class size. */
static unsigned size_class(size_t size, size_t *csize)
{
	if (size <= CP_SMALL_MAX) {
		unsigned c = (unsigned)((size + 7) / 8);
		if (c == 0)
			c = 1;
		*csize = (size_t)c * 8;
		return c - 1;
	}
	unsigned c = 128;
	size_t s = 2048;
	while (s < size) {
		s <<= 1;
		c++;
	}
	*csize = s;
	return c;
}

/* Maps `size` bytes if the profiler-wide limit allows it. */
static struct cp_chunk *take(struct cp_pool *pl, size_t size)
{
	size_t before = atomic_fetch_add_explicit(pl->used, size, memory_order_relaxed);
	if (before + size > pl->limit) {
		atomic_fetch_sub_explicit(pl->used, size, memory_order_relaxed);
		return NULL;
	}
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		atomic_fetch_sub_explicit(pl->used, size, memory_order_relaxed);
		return NULL;
	}
	struct cp_chunk *ch = m;
	ch->size = size;
	ch->prev = NULL;
	ch->next = pl->chunks;
	if (pl->chunks)
		pl->chunks->prev = ch;
	pl->chunks = ch;
	pl->mapped += size;
	return ch;
}

static void give_back(struct cp_pool *pl, struct cp_chunk *ch)
{
	if (ch->prev)
		ch->prev->next = ch->next;
	else
		pl->chunks = ch->next;
	if (ch->next)
		ch->next->prev = ch->prev;
	pl->mapped -= ch->size;
	atomic_fetch_sub_explicit(pl->used, ch->size, memory_order_relaxed);
	munmap(ch, ch->size);
}

void *cp_pool_alloc(struct cp_pool *pl, size_t size)
{
	if (size > CP_MEDIUM_MAX) {
		size_t total = (size + sizeof(struct cp_chunk) + 4095) & ~(size_t)4095;
		struct cp_chunk *ch = take(pl, total);
		return ch ? (void *)(ch + 1) : NULL;
	}
	size_t csize;
	unsigned c = size_class(size, &csize);
	struct cp_free *f = pl->free[c];
	if (f) {
		pl->free[c] = f->next;
		memset(f, 0, csize);
		return f;
	}
	if ((size_t)(pl->end - pl->cur) < csize) {
		struct cp_chunk *ch = take(pl, CP_CHUNK_SIZE);
		if (!ch)
			return NULL;
		pl->cur = (char *)(ch + 1);
		pl->end = (char *)ch + CP_CHUNK_SIZE;
	}
	void *p = pl->cur;
	pl->cur += csize;
	return p; /* fresh mmap memory is zero */
}

void cp_pool_free(struct cp_pool *pl, void *ptr, size_t size)
{
	if (!ptr)
		return;
	if (size > CP_MEDIUM_MAX) {
		give_back(pl, (struct cp_chunk *)ptr - 1);
		return;
	}
	size_t csize;
	unsigned c = size_class(size, &csize);
	struct cp_free *f = ptr;
	f->next = pl->free[c];
	pl->free[c] = f;
}

void cp_pool_release(struct cp_pool *pl)
{
	while (pl->chunks)
		give_back(pl, pl->chunks);
	memset(pl->free, 0, sizeof(pl->free));
	pl->cur = pl->end = NULL;
}
