/* pstat-write.c: placeholder until the file layer lands. */
#include <errno.h>

#include "profile.h"

int cp_profile_write(const struct cp_profile *p, const char *path) { (void)p, (void)path; return -ENOSYS; }
