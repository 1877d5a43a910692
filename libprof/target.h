/* target.h: what a profile's output path may hold for a dump to replace it. Shared by
 * the engine's writer (pstat-write.c) and coprof-keeper (preload/keeper.c), which
 * check the same rule from two processes. */
#ifndef COPROF_TARGET_H
#define COPROF_TARGET_H

#include <errno.h>
#include <sys/stat.h>

#include "coprof.h"

/* 0 when a thing of this mode is a regular file, which a dump replaces; else why it is
 * left alone: -EISDIR or a COPROF_E* code. Links are the caller's to decide. */
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
