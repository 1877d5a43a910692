/* interval.c: periodic windows. With COPROF_INTERVAL=SECONDS the control thread wakes
 * when the open window ends, and writes it while profiling goes on: coprof_dump_clear
 * pauses the writers only while the numbers are copied and cleared, and the file is
 * written afterwards with no lock the program's threads take. COPROF_KEEP=N removes
 * files beyond the newest N. Runs on the control thread, under control.c's lock. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coprof-private.h"
#include "lifecycle.h"

static uint64_t due;   /* CLOCK_MONOTONIC ns at which the open window ends; 0: none */
static int last_error; /* the -errno of the last failed window, said once; 0 */

void pl_interval_open(void)
{
	due = pl_cfg.interval_ns ? cp_clock_gettime_ns(CLOCK_MONOTONIC) + pl_cfg.interval_ns : 0;
}

void pl_interval_close(void)
{
	due = 0;
}

int pl_interval_wait_ms(void)
{
	/* No window open: profiling may start in another thread (the constructor, a
	 * forked child) without waking this one, so look again an interval later. */
	if (!due)
		return pl_cfg.interval_ns ? (int)(pl_cfg.interval_ns / 1000000) : -1;
	uint64_t now = cp_clock_gettime_ns(CLOCK_MONOTONIC);
	if (now >= due)
		return 0;
	uint64_t ms = (due - now + 999999) / 1000000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

int pl_interval_write_due(unsigned n, int child)
{
	if (!due || !pl_prof)
		return 0;
	uint64_t now = cp_clock_gettime_ns(CLOCK_MONOTONIC);
	if (now < due)
		return 0;
	/* The next window ends one interval after this one did; after a stall (the
	 * machine suspended, a very slow write) it ends one interval from now. */
	due += pl_cfg.interval_ns;
	if (due <= now)
		due = now + pl_cfg.interval_ns;
	char path[PATH_MAX];
	int rc = pl_publish_path(n, child, path);
	if (rc == 0)
		rc = pl_publish_dump(path, n, child, 1);
	if (rc == 0) {
		if (last_error)
			pl_say("windows are written again (%s)", path);
		last_error = 0;
		return 1;
	}
	/* A full or vanished directory fails every window the same way: say it once,
	 * as the OS says it, and keep profiling (each failed window's data is dropped,
	 * not kept). */
	if (rc != COPROF_ENODATA && rc != last_error) {
		pl_say("cannot write the window %s: %s; profiling goes on", path,
		       coprof_strerror(rc));
		last_error = rc;
	}
	return 0;
}

void pl_interval_keep(unsigned n, int child)
{
	char path[PATH_MAX];
	if (!pl_cfg.keep || n <= pl_cfg.keep)
		return;
	if (pl_publish_path(n - pl_cfg.keep, child, path) != 0)
		return;
	int rc = pl_publish_remove(path, n - pl_cfg.keep, child);
	if (rc != 0)
		pl_say("cannot remove the old window %s: %s", path, coprof_strerror(rc));
}
