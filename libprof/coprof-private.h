/* coprof-private.h: the engine-private boundary. All that code outside libprof/ may use
 * of the engine beyond the public API (coprof.h), through libcoprof_private_dep
 * (libprof/meson.build, a static library of its own): the shim, coprof-keeper
 * (preload/keeper/keeper.c) and the CPython adapter. The adapter also inlines the engine's
 * hot path (engine-inline.h), the one other header of libprof/ it may include.
 * scripts/check-layers.py holds every file outside libprof/ to this. Nothing here is
 * exported from libcoprof.so. */
#ifndef COPROF_PRIVATE_H
#define COPROF_PRIVATE_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "coprof.h"

/* Nanoseconds on clock `id` (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID...): the one
 * conversion of a timespec, for the engine, the shim and the adapter. As
 * async-signal-safe as clock_gettime. */
static inline uint64_t cp_clock_gettime_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The layout of the engine structs engine-inline.h reads, as libcoprof.so was built
 * (cp_inline_layout there): the one private name it exports, for the CPython adapter,
 * which inlines that header and refuses to load when its own number differs. */
COPROF_API uint64_t coprof__inline_layout(void);

/* A file to publish whole or not at all (publish.c): `fill` writes its bytes to `fd`
 * (0 or -errno), under a temporary name next to `path`, which then replaces `path` by
 * rename(2). Only nothing, or a regular file, at `path` is replaced: a directory gives
 * -EISDIR, a device, FIFO or socket COPROF_EDEVICE/EFIFO/ESOCKET. The engine's writer
 * (pstat-write.c) and coprof-keeper check that rule from two processes. */
struct cp_publish {
	int dirfd;	  /* AT_FDCWD, or the directory `path` is relative to */
	const char *path; /* the file to replace */
	/* A symbolic link to a regular file is written through (the file it names is
	 * replaced, the link stays; COPROF_ELINK for a link to anything else); 0: a link
	 * is refused (COPROF_ENOFOLLOW), and the temporary is opened O_NOFOLLOW. Only
	 * with AT_FDCWD. */
	int follow;
	long pid;	 /* the temporary is "NAME.tmp.PID.TAGN" */
	const char *tag; /* NULL: none */
	int chown;	 /* give the file to uid:gid (when the writer may) */
	uid_t uid;
	gid_t gid;
	int (*fill)(void *arg, int fd);
	void *arg;
};
/* 0, or the error; no temporary file is left behind on any error. */
int cp_publish(const struct cp_publish *p);

#endif
