/* arena.c: placeholder until the file layer lands. */
#include <errno.h>

#include "profile.h"

struct cp_arena *cp_arena_new(void) { return NULL; }
void *cp_arena_alloc(struct cp_arena *a, size_t size) { (void)a, (void)size; return NULL; }
const char *cp_arena_strdup(struct cp_arena *a, const char *s, size_t len) { (void)a, (void)s, (void)len; return NULL; }
void cp_arena_free(struct cp_arena *a) { (void)a; }
int cp_profile_new(struct cp_profile **out) { *out = NULL; return -ENOSYS; }
void cp_profile_free(struct cp_profile *p) { (void)p; }
