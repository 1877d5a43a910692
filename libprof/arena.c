/* arena.c: the bump allocator a profile's data lives in, and the profile's lifetime.
 *
 * Used by the reader (one arena per file read), by the writer for scratch data and
 * by the engine at dump time. Large chunks, and the large arrays of keymap.h, are
 * mappings with transparent huge pages asked for. Not thread-safe: one arena belongs
 * to one thread at a time. Never called from a signal handler. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "keymap.h"
#include "profile.h"

#define ARENA_ALIGN 16
#define ARENA_FIRST (4 * 1024)
#define ARENA_MAX_CHUNK (16 * 1024 * 1024)
/* Chunks this large are mapped on their own, aligned for transparent huge pages: a
 * large profile then costs a few page faults instead of one per 4 KiB (on first
 * touch), which dominated reading a 100,000-function file. */
#define ARENA_HUGE ((size_t)2 * 1024 * 1024)

struct chunk {
	struct chunk *next;
	size_t size; /* bytes usable after the header */
	size_t used;
	size_t mapped; /* bytes mmap'ed for the chunk, or 0: it was calloc'ed */
		       /* data follows, aligned to ARENA_ALIGN */
};

struct cp_arena {
	struct chunk *head; /* the chunk allocations come from; older ones follow */
	size_t next_size;   /* size of the next regular chunk */
};

#define CHUNK_HDR ((sizeof(struct chunk) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1))

struct cp_arena *cp_arena_new(void)
{
	struct cp_arena *a = calloc(1, sizeof(*a));

	if (a)
		a->next_size = ARENA_FIRST;
	return a;
}

/* A zeroed mapping of `size` bytes rounded up to ARENA_HUGE (huge_size), aligned on
 * ARENA_HUGE so that transparent huge pages can back all of it; they are asked for,
 * which is only advice: without them it is an ordinary mapping. */
static size_t huge_size(size_t size)
{
	return (size + ARENA_HUGE - 1) & ~(ARENA_HUGE - 1);
}

static void *huge_map(size_t size)
{
	size_t total = huge_size(size), map = total + ARENA_HUGE; /* room to align */
	char *m, *start;

	if (size > SIZE_MAX / 2)
		return NULL;
	m = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	start = (char *)(((uintptr_t)m + ARENA_HUGE - 1) & ~(uintptr_t)(ARENA_HUGE - 1));
	if (start > m)
		munmap(m, (size_t)(start - m));
	if (start + total < m + map)
		munmap(start + total, (size_t)(m + map - (start + total)));
#ifdef MADV_HUGEPAGE
	madvise(start, total, MADV_HUGEPAGE);
#endif
	return start;
}

/* A zeroed chunk of `size` usable bytes; from ARENA_HUGE up, a huge_map of its own. */
static struct chunk *chunk_new(size_t size)
{
	struct chunk *c;

	if (size > SIZE_MAX / 2 - CHUNK_HDR)
		return NULL;
	if (CHUNK_HDR + size < ARENA_HUGE) {
		c = calloc(1, CHUNK_HDR + size);
		if (c)
			c->size = size;
		return c;
	}
	c = huge_map(CHUNK_HDR + size);
	if (!c)
		return NULL;
	c->mapped = huge_size(CHUNK_HDR + size);
	c->size = c->mapped - CHUNK_HDR;
	return c;
}

/* Large arrays: see keymap.h. From ARENA_HUGE bytes up an array is a huge_map of its
 * own, moved to a larger one as it grows (the copy costs less than the page faults it
 * spares); below, it is ordinary malloc memory, which sanitizers watch byte by byte. */
void *cp_big_resize(void *p, size_t old, size_t size)
{
	void *m;

	if (size < ARENA_HUGE && old < ARENA_HUGE)
		return realloc(p, size);
	if (size >= ARENA_HUGE && old >= ARENA_HUGE && huge_size(size) == huge_size(old))
		return p;
	m = size < ARENA_HUGE ? malloc(size) : huge_map(size);
	if (!m)
		return NULL;
	if (p)
		memcpy(m, p, old < size ? old : size);
	cp_big_free(p, old);
	return m;
}

void *cp_big_calloc(size_t size)
{
	if (size < ARENA_HUGE)
		return calloc(1, size ? size : 1);
	return huge_map(size);
}

void cp_big_free(void *p, size_t size)
{
	if (size < ARENA_HUGE)
		free(p);
	else if (p)
		munmap(p, huge_size(size));
}

static void chunk_free(struct chunk *c)
{
	if (c->mapped)
		munmap(c, c->mapped);
	else
		free(c);
}

/* Returns `size` zeroed bytes aligned for any type, or NULL when out of memory (or
 * when size is absurd). A request larger than a quarter of a regular chunk gets a
 * chunk of its own, linked behind the current one, so the current chunk's free space
 * is not wasted. Size 0 returns a valid unique pointer. */
void *cp_arena_alloc(struct cp_arena *a, size_t size)
{
	struct chunk *c;
	size_t need;

	if (!a || size > SIZE_MAX / 2)
		return NULL;
	need = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	if (need == 0)
		need = ARENA_ALIGN;
	c = a->head;
	if (c && c->size - c->used >= need) {
		void *p = (char *)c + CHUNK_HDR + c->used;
		c->used += need;
		return p;
	}
	if (need > a->next_size / 4) {
		struct chunk *big = chunk_new(need);
		if (!big)
			return NULL;
		big->used = need;
		if (c) {
			big->next = c->next;
			c->next = big;
		} else {
			a->head = big;
		}
		return (char *)big + CHUNK_HDR;
	}
	c = chunk_new(a->next_size);
	if (!c)
		return NULL;
	if (a->next_size < ARENA_MAX_CHUNK)
		a->next_size *= 2;
	c->next = a->head;
	a->head = c;
	c->used = need;
	return (char *)c + CHUNK_HDR;
}

/* A NUL-terminated copy of the `len` bytes at `s` (which need not be terminated). */
const char *cp_arena_strdup(struct cp_arena *a, const char *s, size_t len)
{
	char *d;

	if (len == SIZE_MAX)
		return NULL;
	d = cp_arena_alloc(a, len + 1);
	if (d && len)
		memcpy(d, s, len);
	return d;
}

void cp_arena_free(struct cp_arena *a)
{
	struct chunk *c, *next;

	if (!a)
		return;
	for (c = a->head; c; c = next) {
		next = c->next;
		chunk_free(c);
	}
	free(a);
}

/* Keeps the head chunk (always a regular one: big requests are linked behind it) and
 * zeroes only the part that was handed out, so resetting after small use is cheap. */
void cp_arena_reset(struct cp_arena *a)
{
	struct chunk *c, *next, *keep;

	if (!a || !a->head)
		return;
	keep = a->head;
	for (c = keep->next; c; c = next) {
		next = c->next;
		chunk_free(c);
	}
	memset((char *)keep + CHUNK_HDR, 0, keep->used);
	keep->used = 0;
	keep->next = NULL;
}

int cp_profile_new(struct cp_profile **out)
{
	struct cp_profile *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->arena = cp_arena_new();
	if (!p->arena) {
		free(p);
		return -ENOMEM;
	}
	*out = p;
	return 0;
}

void cp_profile_free(struct cp_profile *p)
{
	if (!p)
		return;
	cp_arena_free(p->arena);
	free(p);
}
