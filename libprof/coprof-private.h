/* coprof-private.h: the engine-private boundary. All that code outside libprof/ may use
 * of the engine beyond the public API (coprof.h), through libcoprof_private_dep
 * (libprof/meson.build): coprof-keeper (preload/keeper.c) and the shim. The CPython
 * adapter also inlines the engine's hot path (engine-inline.h), the one other header
 * of libprof/ it may include. scripts/check-layers.py holds every file outside
 * libprof/ to this. Nothing here is exported from libcoprof.so. */
#ifndef COPROF_PRIVATE_H
#define COPROF_PRIVATE_H

#include <errno.h>
#include <sys/stat.h>

#include "coprof.h"

/* What a profile's output path may hold for a dump to replace it: 0 when a thing of
 * this mode is a regular file, which a dump replaces; else why it is left alone:
 * -EISDIR or a COPROF_E* code. Links are the caller's to decide. The engine's writer
 * (pstat-write.c) and coprof-keeper check the same rule from two processes. */
static inline int cp_target_kind(mode_t mode)
{
	if (S_ISREG(mode))
		return 0;
	if (S_ISDIR(mode))
		return -EISDIR;
	if (S_ISFIFO(mode))
		return COPROF_EFIFO;
	if (S_ISSOCK(mode))
		return COPROF_ESOCKET;
	return COPROF_EDEVICE;
}

#endif
