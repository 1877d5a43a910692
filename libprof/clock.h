/* clock.h: the engine's clocks, read on the hot path of every enter and leave.
 *
 * One struct cp_clock per registered thread, initialised on that thread (a CPU clock
 * opens a perf event for it). cp_clock_now() returns nanoseconds and is monotonic per
 * thread. Which implementation runs is chosen once, at init; its name goes into the
 * file's extras. Runs in the owning thread only (never in a signal handler). */
#ifndef CP_CLOCK_H
#define CP_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "coprof.h"

enum cp_clock_impl {
	CP_CLOCK_MONOTONIC, /* clock_gettime(CLOCK_MONOTONIC) (vDSO) */
	CP_CLOCK_CPUTIME,   /* clock_gettime(CLOCK_THREAD_CPUTIME_ID) (a syscall) */
};

struct cp_clock {
	enum cp_clock_impl impl;
	uint64_t last; /* ns: the last value returned, to stay monotonic */
};

/* Chooses and initialises the fastest correct implementation of `kind` for the
 * calling thread. Never fails: falls back to clock_gettime. */
void cp_clock_init(struct cp_clock *c, enum coprof_clock kind);
/* Releases what init opened (a perf event, its mapping). Calling thread only. */
void cp_clock_fini(struct cp_clock *c);
/* A printable name of the implementation ("monotonic", "thread-cputime", ...). */
const char *cp_clock_name(const struct cp_clock *c);

static inline uint64_t cp_clock_now(struct cp_clock *c)
{
	struct timespec ts;
	clock_gettime(c->impl == CP_CLOCK_CPUTIME ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC,
		      &ts);
	uint64_t ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (ns < c->last)
		ns = c->last;
	c->last = ns;
	return ns;
}

#endif
