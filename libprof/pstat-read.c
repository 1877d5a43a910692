/* pstat-read.c: placeholder until the file layer lands. */
#include <errno.h>

#include "profile.h"

int cp_profile_read(const char *path, struct cp_profile **out, char *err, size_t errlen) { (void)path, (void)err, (void)errlen; *out = NULL; return -ENOSYS; }
int cp_profile_read_mem(const void *buf, size_t len, struct cp_profile **out, char *err, size_t errlen) { (void)buf, (void)len, (void)err, (void)errlen; *out = NULL; return -ENOSYS; }
