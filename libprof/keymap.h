/* keymap.h: a hash map from a pstats key (file, line, name), or from one string, to
 * a 32-bit value: the one interning of keys. The writer uses it to merge duplicate keys
 * and to find marshal references, the reader to turn caller keys into function
 * indices, the dump (snapshot.c, sample-store.c) to give each distinct key one function.
 * Strings are not copied: they must outlive the map. Single-threaded. */
#ifndef CP_KEYMAP_H
#define CP_KEYMAP_H

#include <stddef.h>
#include <stdint.h>

struct cp_keymap_ent {
	uint64_t hash;
	const char *file;
	const char *name; /* NULL for a map of single strings */
	uint64_t line;
	uint32_t flen, nlen;
	uint32_t val;
	uint32_t used;
};

struct cp_keymap {
	struct cp_keymap_ent *t;
	size_t cap; /* a power of two, or 0 */
	size_t n;
};

void cp_keymap_init(struct cp_keymap *m);
void cp_keymap_fini(struct cp_keymap *m);

/* Looks up (file, line, name); when absent, inserts it with value *val and sets
 * *found to 0; when present, sets *val to its value and *found to 1. Pass name NULL
 * (and line 0) to key on a single string. Returns 0 or -ENOMEM. */
int cp_keymap_get_or_put(struct cp_keymap *m, const char *file, size_t flen, uint64_t line,
			 const char *name, size_t nlen, uint32_t *val, int *found);
/* 1 and *val when (file, line, name) is in the map, else 0: for a caller that copies
 * the strings of a key it adds (the map keeps pointers). */
int cp_keymap_find(const struct cp_keymap *m, const char *file, size_t flen, uint64_t line,
		   const char *name, size_t nlen, uint32_t *val);

/* A map from an address to a 32-bit value: the reader's cache in front of a keymap,
 * since marshal references make equal keys share one parsed object. */
struct cp_ptrmap_ent {
	const void *ptr; /* NULL: empty */
	uint32_t val;
};

struct cp_ptrmap {
	struct cp_ptrmap_ent *t;
	size_t cap, n;
};

void cp_ptrmap_init(struct cp_ptrmap *m);
void cp_ptrmap_fini(struct cp_ptrmap *m);
/* 1 and *val when ptr is in the map, else 0. */
int cp_ptrmap_get(const struct cp_ptrmap *m, const void *ptr, uint32_t *val);
/* Adds or replaces ptr (not NULL). 0 or -ENOMEM. */
int cp_ptrmap_put(struct cp_ptrmap *m, const void *ptr, uint32_t val);

/* Large arrays and tables (arena.c), for the maps above and the reader's vectors:
 * from 2 MiB up they are mappings of their own with transparent huge pages asked
 * for, so that filling one costs a few page faults rather than one per 4 KiB.
 * cp_big_resize is realloc (old: the current size in bytes, NULL p with old 0);
 * cp_big_calloc returns zeroed memory; cp_big_free needs the size too. */
void *cp_big_resize(void *p, size_t old, size_t size);
void *cp_big_calloc(size_t size);
void cp_big_free(void *p, size_t size);

#endif
