/* helpers.h: what the engine's unit tests share: a fake clock the test moves by hand,
 * function keys named by strings, a profiler set up on the calling thread, and lookups
 * in the in-memory snapshot (cp_snapshot) so numbers are checked to the nanosecond. */
#ifndef TEST_ENGINE_HELPERS_H
#define TEST_ENGINE_HELPERS_H

#include <stdint.h>

#include "coprof.h"
#include "engine.h"
#include "profile.h"

/* The fake clock, in ns. Tests set it before each event. */
extern uint64_t fk_now;
uint64_t fk_clock(void *arg);

/* The key of a function called `name` (resolved back to it by fx_resolve). */
uintptr_t K(const char *name);
int fx_resolve(void *arg, uintptr_t key, struct coprof_func_info *out);

struct fx {
	struct coprof *p;
	struct coprof_thread *t;
	struct cp_profile *prof;
};

/* A started profiler with the fake clock and fx_resolve, and the calling thread. */
void fx_setup(struct fx *f, enum coprof_clock clock);
/* The same in sample mode at 1000 Hz, registered but not started. */
void fx_setup_sample(struct fx *f, enum coprof_clock clock);
/* Takes a snapshot into f->prof (replacing the previous one). */
void fx_snap(struct fx *f);
void fx_teardown(struct fx *f);

/* The test's profiler, and shorthands for events on its thread at a fake time. */
extern struct fx f;
void at(uint64_t t);
void enter(const char *name);
void leave(const char *name);
/* A Criterion .fini: tears f down. */
void fx_fini(void);

const struct cp_func *fx_func(const struct cp_stats *s, const char *name);
const struct cp_stat *fx_edge(const struct cp_stats *s, const char *caller, const char *callee);
const struct cp_task *fx_task(const struct cp_profile *p, uint64_t id);
uint64_t fx_ns(double seconds);

/* Asserts the pstats four of `name` (times in ns) in s. */
void fx_expect(const struct cp_stats *s, const char *name, uint64_t cc, uint64_t nc, uint64_t tt,
	       uint64_t ct);
void fx_expect_edge(const struct cp_stats *s, const char *caller, const char *callee, uint64_t cc,
		    uint64_t nc, uint64_t tt, uint64_t ct);

#endif
