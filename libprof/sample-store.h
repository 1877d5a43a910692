/* sample-store.h: the engine's store of sampled stacks (COPROF_MODE_SAMPLE).
 *
 * Stacks arrive from one thread at a time (the shim's control thread folding its
 * per-thread buffers, via coprof_sample) and are counted per (thread, context,
 * waiting, stack). At dump time cp_samples_build turns them into pstats numbers
 * (tt: leaf samples x period, ct: samples the function appears in x period, nc = cc =
 * sample counts, edges from adjacent frames) and into the extras' stack table. */
#ifndef CP_SAMPLE_STORE_H
#define CP_SAMPLE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "profile.h"

struct cp_samples;

int cp_samples_new(size_t memory_limit, struct cp_samples **out);
void cp_samples_free(struct cp_samples *s);
void cp_samples_clear(struct cp_samples *s);
/* Counts one stack `count` times, each weighing period_ns (a suspended coroutine's
 * wait is charged at once for all the ticks it spanned). `ctx` is an opaque context
 * identity (NULL: the thread's own). Returns -ENOMEM (and counts nothing) once the
 * memory limit is reached. */
int cp_samples_add(struct cp_samples *s, uint64_t tid, const void *ctx, int waiting,
		   const uintptr_t *pcs, unsigned depth, uint64_t period_ns, uint64_t count);
uint64_t cp_samples_count(const struct cp_samples *s);

/* How the engine maps what the store holds onto the profile being built. */
struct cp_samples_map {
	void *arg;
	/* The index of the task for `ctx` in prof->ex.tasks, or -1 for a thread's own. */
	int64_t (*task_index)(void *arg, const void *ctx);
	/* Resolves a pc into a key whose strings live in prof's arena. */
	int (*resolve)(void *arg, uintptr_t pc, struct cp_key *out);
};

/* Adds the sampled functions, edges and stacks into prof (its stats, each task's
 * stats, and ex.stacks), and gives each task and thread whose ttot is still 0 the time
 * sampled in it. pcs are addresses inside their functions: the sampler passes the
 * interrupted pc, and return addresses as libunwind gives them. 0 or -errno. */
int cp_samples_build(const struct cp_samples *s, const struct cp_samples_map *map,
		     struct cp_profile *prof);

#endif
