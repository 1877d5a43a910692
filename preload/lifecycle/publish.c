/* publish.c: a dump becomes a file, at the path COPROF_OUT gives its number. The engine
 * writes it (coprof_dump: a temporary, then rename), unless a route is in place for a
 * process that can no longer write the directory itself (creds.c's keeper), which then
 * takes it or leaves it to the engine. Runs on the control thread or the thread that
 * exits or execs, under control.c's lock. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

#include "lifecycle.h"

static const struct pl_publish_route *_Atomic route;

void pl_publish_route(const struct pl_publish_route *r)
{
	atomic_store(&route, r);
}

int pl_publish_path(unsigned n, int child, char path[PATH_MAX])
{
	return pl_out_path(pl_cfg.out, (long)getpid(), n, child, path, PATH_MAX);
}

int pl_publish_dump(const char *path, unsigned n, int child, int clear)
{
	const struct pl_publish_route *r = atomic_load(&route);
	int rc = r ? r->dump(n, child, clear) : 1;
	if (rc != 1)
		return rc;
	return clear ? coprof_dump_clear(pl_prof, path) : coprof_dump(pl_prof, path);
}

int pl_publish_remove(const char *path, unsigned n, int child)
{
	const struct pl_publish_route *r = atomic_load(&route);
	int rc = r ? r->remove(n, child) : 1;
	if (rc != 1)
		return rc;
	return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
}
