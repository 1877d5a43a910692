/* clock.h: the engine's clocks, read on the hot path of every enter and leave.
 *
 * One struct cp_clock per registered thread, initialised on that thread (a TSC clock
 * maps a perf event's page for it; no file descriptor stays open). cp_clock_now()
 * returns nanoseconds and is monotonic per thread. Which implementation runs is chosen
 * once, at init; its name goes into the file's extras. Runs in the owning thread only
 * (never in a signal handler). */
#ifndef CP_CLOCK_H
#define CP_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "coprof-private.h"
#include "coprof.h"

#if defined(__x86_64__) || defined(__i386__)
#define CP_CLOCK_HAVE_TSC 1
#else
#define CP_CLOCK_HAVE_TSC 0
#endif

/* The two TSC implementations come first so the hot path tells them apart from the
 * others with one comparison. Both extrapolate a reference clock with the TSC from an
 * anchor (tsc0, ns0), and re-anchor (a "resync") whenever the lock word of the
 * thread's perf task-clock page has changed (the thread was scheduled out, or moved
 * to another CPU, since the anchor) or the anchor is older than `span`.
 *
 * The kernel maps perf pages VM_DONTCOPY: a child process made without CLONE_VM has
 * no page at that address, and a fork made by clone() itself runs no pthread_atfork
 * handler that could set up another. So each TSC clock also points at its process's
 * word (`proc_word`), in a page marked MADV_WIPEONFORK that the kernel zeroes in such a
 * child: a zero there, read before the lock word, means the clock was set up in
 * another process. It then reads through clock_gettime and says so (`orphan`). */
enum cp_clock_impl {
	CP_CLOCK_TSC_CPU,   /* TSC between reschedules, anchored on THREAD_CPUTIME */
	CP_CLOCK_TSC_WALL,  /* TSC between reschedules, anchored on MONOTONIC */
	CP_CLOCK_MONOTONIC, /* clock_gettime(CLOCK_MONOTONIC) (vDSO) */
	CP_CLOCK_CPUTIME,   /* clock_gettime(CLOCK_THREAD_CPUTIME_ID) (a syscall) */
	CP_CLOCK_N_IMPL,
};

/* Fixed-point shift of `mult`: ns = (ticks * mult) >> CP_CLOCK_SHIFT. */
#define CP_CLOCK_SHIFT 32

struct cp_clock {
	/* Hot: read by every cp_clock_now, kept together. */
	enum cp_clock_impl impl;
	uint32_t seq;			   /* the perf page's lock word at the anchor */
	const volatile uint32_t *seq_word; /* the lock word of this thread's perf page */
	uint64_t tsc0;			   /* TSC ticks at the anchor */
	uint64_t ns0;			   /* ns: the reference clock at the anchor */
	uint64_t span;			   /* TSC ticks an anchor is trusted for */
	uint64_t mult;			   /* ns per tick, << CP_CLOCK_SHIFT */
	uint64_t last;			   /* ns: the last value returned, to stay monotonic */
	const volatile uint32_t *proc_word; /* nonzero in the process that set it up */
	/* Cold. */
	void *page;	  /* the perf event's page (which holds the event), or NULL */
	uint64_t resyncs; /* anchors taken so far (tests, bench) */
	int orphan;	  /* set up in another process, which the page stayed in */
};

/* Chooses and initialises the fastest correct implementation of `kind` for the
 * calling thread. Never fails: falls back to clock_gettime. The first call in a
 * process calibrates the TSC against CLOCK_MONOTONIC (about 3 ms, sleeping). */
void cp_clock_init(struct cp_clock *c, enum coprof_clock kind);
/* Releases what init opened (the perf event's mapping); `c` then reads through
 * clock_gettime. Call it once the owning thread no longer reads `c`. A forked child
 * must not use a TSC clock inherited from its parent (its perf event watches the
 * parent's thread): it initialises its own, as it registers its thread anew. */
void cp_clock_fini(struct cp_clock *c);
/* A printable name of the implementation: "tsc-cpu", "tsc-wall", "monotonic",
 * "thread-cputime". */
const char *cp_clock_name(const struct cp_clock *c);

/* Makes later cp_clock_init calls for `kind` use the implementation called `name`
 * (as cp_clock_name prints it), or choose again when `name` is NULL or "auto". For
 * tests and benchmarks; process-wide. A TSC implementation that is unavailable still
 * falls back to clock_gettime. Returns -EINVAL for an unknown name or one that does
 * not measure `kind`. */
int cp_clock_force(enum coprof_clock kind, const char *name);

/* The slow path of cp_clock_now for TSC clocks: takes a new anchor and returns the
 * reference clock's value (not yet clamped to stay monotonic). A clock set up in
 * another process falls back to clock_gettime here, for good, and sets `orphan`. */
uint64_t cp_clock_resync(struct cp_clock *c);

#if CP_CLOCK_HAVE_TSC
/* The TSC. The memory clobber keeps later loads (the lock word) after it in program
 * order; an interrupt between the two is then always seen as a changed lock word. */
static inline uint64_t cp_rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi) : : "memory");
	return (uint64_t)hi << 32 | lo;
}
#endif

/* Whether a TSC clock's anchor holds `d` ticks after it: the clock's process, the
 * thread not scheduled out since, the anchor young enough. d < span also rejects a
 * TSC that went backwards (d wraps around), and keeps d * mult within 64 bits. The
 * process's word is read first: in another process the lock word is not mapped. */
static inline int cp_clock_anchor_holds(const struct cp_clock *c, uint64_t d)
{
	return __builtin_expect(*c->proc_word != 0, 1) && *c->seq_word == c->seq && d < c->span;
}

/* The current value of the clock, before the monotonic clamp. */
static inline uint64_t cp_clock_read(struct cp_clock *c)
{
#if CP_CLOCK_HAVE_TSC
	if (c->impl <= CP_CLOCK_TSC_WALL) {
		uint64_t d = cp_rdtsc() - c->tsc0;
		if (cp_clock_anchor_holds(c, d))
			return c->ns0 + ((d * c->mult) >> CP_CLOCK_SHIFT);
		return cp_clock_resync(c);
	}
#endif
	return cp_clock_gettime_ns(c->impl == CP_CLOCK_CPUTIME ? CLOCK_THREAD_CPUTIME_ID
							       : CLOCK_MONOTONIC);
}

/* Nanoseconds on the clock chosen at init, never less than the previous value. */
static inline uint64_t cp_clock_now(struct cp_clock *c)
{
	uint64_t ns = cp_clock_read(c);
	if (ns < c->last)
		ns = c->last;
	c->last = ns;
	return ns;
}

#endif
