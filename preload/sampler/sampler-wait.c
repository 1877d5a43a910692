/* sampler-wait.c: where suspended coroutines wait (sample mode under wall).
 *
 * The ucontext adapter calls pl_sampler_switch on the switching thread, outside any
 * signal, with in_switch set (so the tick handler stays off the ring). The stack a
 * coroutine suspends at is walked once, there, into the thread's wait table. The ticks
 * it waits are charged on that stack when it resumes (a record in the ring) and, for
 * coroutines still suspended, by the folding thread at each fold. The Python adapter's
 * asyncio waits, measured by its scans, go to the engine directly (pl_sampler_wait_record). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "sampler.h"

static uint64_t ticks_now(struct pl_sthread *st)
{
	return atomic_load_explicit(&st->ticks, memory_order_relaxed) & PL_WAIT_TICKS;
}

/* The slot of `ctx` in use, or NULL. Owning thread only. */
static struct pl_wait *find(struct pl_sthread *st, const struct coprof_ctx *ctx)
{
	uint32_t n = atomic_load_explicit(&st->nwaits, memory_order_relaxed);
	for (uint32_t i = 0; i < n; i++) {
		struct pl_wait *w = &st->waits[i];
		if (w->ctx == ctx && atomic_load_explicit(&w->word, memory_order_relaxed))
			return w;
	}
	return NULL;
}

/* Frees the slot of a coroutine that runs again, and pushes the ticks it waited since
 * its last charge into the ring. */
static void release(struct pl_sthread *st, struct pl_wait *w)
{
	uint64_t old = atomic_exchange_explicit(&w->word, 0, memory_order_acq_rel);
	uint64_t since = old & PL_WAIT_TICKS, now = ticks_now(st);
	if (!(old & PL_WAIT_USED) || now <= since ||
	    !atomic_load_explicit(&pl_sampler_on, memory_order_relaxed))
		return;
	struct pl_rec *rec = pl_ring_reserve(st);
	if (!rec) {
		atomic_fetch_add_explicit(&st->dropped, 1, memory_order_relaxed);
		return;
	}
	rec->kind = PL_REC_WAIT;
	rec->ctx = w->ctx;
	rec->weight = now - since;
	rec->depth = w->depth;
	memcpy(rec->pcs, w->pcs, w->depth * sizeof(w->pcs[0]));
	pl_ring_publish(st, rec);
}

/* A free slot, or NULL (counted as dropped). Owning thread only. */
static struct pl_wait *free_slot(struct pl_sthread *st)
{
	uint32_t n = atomic_load_explicit(&st->nwaits, memory_order_relaxed);
	for (uint32_t i = 0; i < n; i++)
		if (!atomic_load_explicit(&st->waits[i].word, memory_order_relaxed))
			return &st->waits[i];
	if (n == PL_WAIT_SLOTS) {
		atomic_fetch_add_explicit(&st->dropped, 1, memory_order_relaxed);
		return NULL;
	}
	atomic_store_explicit(&st->nwaits, n + 1, memory_order_release);
	return &st->waits[n];
}

/* Slot w, filled with its stack, now waits for `ctx` from this tick on. */
static void occupy(struct pl_sthread *st, struct pl_wait *w, struct coprof_ctx *ctx)
{
	w->ctx = ctx;
	w->gen++;
	uint64_t word =
	    PL_WAIT_USED | ((uint64_t)(w->gen & 0x7fffff) << PL_WAIT_GEN_SHIFT) | ticks_now(st);
	atomic_store_explicit(&w->word, word, memory_order_release);
}

/* Walks the calling thread's stack, which is the one `ctx` suspends at, into a free
 * slot. Our own frames (the hook, this function) are cut off, so the leaf is the
 * program's function that called the switch. */
static void suspend(struct pl_sthread *st, struct coprof_ctx *ctx)
{
	struct pl_wait *w = free_slot(st);
	if (!w)
		return;
	int depth = pl_unw_backtrace(st->tls, NULL, w->pcs, PL_SAMPLE_DEPTH + PL_SAMPLE_SKIP);
	if (depth < 0) /* no walk may run (pl_unw_backtrace, signal-safe.h) */
		return;
	int skip = 0;
	while (skip < depth &&
	       ((w->pcs[skip] >= pl_sconf.self_lo && w->pcs[skip] < pl_sconf.self_hi) ||
		(w->pcs[skip] >= pl_sconf.asan_lo && w->pcs[skip] < pl_sconf.asan_hi)))
		skip++;
	depth -= skip;
	if (depth > PL_SAMPLE_DEPTH) {
		depth = PL_SAMPLE_DEPTH;
		atomic_fetch_add_explicit(&st->truncated, 1, memory_order_relaxed);
	}
	if (depth <= 0)
		return;
	memmove(w->pcs, w->pcs + skip, (size_t)depth * sizeof(w->pcs[0]));
	w->depth = (uint32_t)depth;
	occupy(st, w, ctx);
}

/* A start bumps the epoch: what the table held belongs to the profile before it. The
 * table was allocated when the thread started (sampler.c): a switch may run in a
 * signal handler. */
static int prepare(struct pl_sthread *st)
{
	uint64_t epoch = atomic_load_explicit(&pl_sampler_epoch, memory_order_acquire);
	if (!st->waits)
		return -1;
	if (st->epoch != epoch) {
		uint32_t n = atomic_load_explicit(&st->nwaits, memory_order_relaxed);
		for (uint32_t i = 0; i < n; i++)
			atomic_store_explicit(&st->waits[i].word, 0, memory_order_relaxed);
		st->epoch = epoch;
	}
	return 0;
}

void pl_sampler_switch(struct coprof_ctx *from, struct coprof_ctx *to)
{
	struct pl_sthread *st = pl_sampler_self();
	if (!st)
		return;
	atomic_store_explicit(&st->cur, to, memory_order_relaxed);
	if (!pl_sconf.wall)
		return;
	if (!atomic_load_explicit(&pl_sampler_on, memory_order_relaxed))
		return;
	if (prepare(st) < 0)
		return;
	struct pl_wait *w;
	if (to && (w = find(st, to)))
		release(st, w);
	if (from && from != to && !find(st, from))
		suspend(st, from);
}

void pl_sampler_switch_left(struct coprof_ctx *from, const uintptr_t *pcs, uint32_t depth,
			    struct coprof_ctx *to)
{
	struct pl_sthread *st = pl_sampler_self();
	if (!st)
		return;
	atomic_store_explicit(&st->cur, to, memory_order_relaxed);
	if (!pl_sconf.wall || !atomic_load_explicit(&pl_sampler_on, memory_order_relaxed) ||
	    prepare(st) < 0)
		return;
	struct pl_wait *w;
	if (to && (w = find(st, to)))
		release(st, w);
	if (!from || from == to || find(st, from) || !depth || !(w = free_slot(st)))
		return;
	if (depth > PL_SAMPLE_DEPTH) {
		depth = PL_SAMPLE_DEPTH;
		atomic_fetch_add_explicit(&st->truncated, 1, memory_order_relaxed);
	}
	memcpy(w->pcs, pcs, depth * sizeof(w->pcs[0]));
	w->depth = depth;
	occupy(st, w, from);
}

/* A finished coroutine returns through uc_link without a switch hook: until the next
 * switch says otherwise, the thread counts as back in its own context (the usual
 * uc_link is the scheduler's) rather than in a coroutine that no longer runs. */
void pl_sampler_finish(struct coprof_ctx *ctx)
{
	struct pl_sthread *st = pl_sampler_self();
	if (!st || !ctx)
		return;
	struct coprof_ctx *cur = ctx;
	atomic_compare_exchange_strong(&st->cur, &cur, NULL);
	if (!st->waits)
		return;
	struct pl_wait *w = find(st, ctx);
	if (w)
		atomic_store_explicit(&w->word, 0, memory_order_release);
}

/* A Python task of engine thread `t` waited `ns` at the stack `keys` (innermost first),
 * seen by the Python adapter on whichever thread scans its tasks (the task's own, the
 * main thread, or the folding thread), outside any signal: charged to the engine at once, in
 * ticks, not through the thread's ring. A scan hands over the waits of hundreds of
 * tasks at a time (each about 25 ticks at 250 Hz): through the ring they overran its
 * 256 records (1,000 idle tasks lost some 1% of their waits) and cost a copy each.
 * The engine's store takes its own lock, so the folding thread may add beside it. */
void pl_sampler_wait_record(struct coprof_thread *t, struct coprof_ctx *ctx, const uintptr_t *keys,
			    unsigned n, uint64_t ns)
{
	uint64_t ticks = (ns + pl_sconf.period / 2) / pl_sconf.period;
	if (!t || !ctx || !n || !ticks || !pl_sconf.wall ||
	    !atomic_load_explicit(&pl_sampler_on, memory_order_relaxed))
		return;
	if (n > PL_SAMPLE_DEPTH) {
		n = PL_SAMPLE_DEPTH;
		struct pl_sthread *st = pl_sampler_self();
		if (st)
			atomic_fetch_add_explicit(&st->truncated, 1, memory_order_relaxed);
	}
	coprof_sample_n(t, ctx, keys, pl_stack_user_depth(keys, n), pl_sconf.period, ticks, 1);
}

void pl_sampler_drop_wait(struct pl_sthread *st, const struct coprof_ctx *ctx)
{
	if (!st->waits)
		return;
	uint32_t n = atomic_load_explicit(&st->nwaits, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		struct pl_wait *w = &st->waits[i];
		uint64_t old = atomic_load_explicit(&w->word, memory_order_acquire);
		/* the generation in word fails the swap if the owner reused the slot */
		if ((old & PL_WAIT_USED) && w->ctx == ctx)
			atomic_compare_exchange_strong(&w->word, &old, 0);
	}
}

void pl_sampler_charge_waits(struct pl_sthread *st)
{
	if (!st->waits || !st->thread ||
	    st->epoch != atomic_load_explicit(&pl_sampler_epoch, memory_order_acquire))
		return;
	static uintptr_t pcs[PL_SAMPLE_DEPTH]; /* the folding thread is alone here */
	uint32_t n = atomic_load_explicit(&st->nwaits, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		struct pl_wait *w = &st->waits[i];
		uint64_t old = atomic_load_explicit(&w->word, memory_order_acquire);
		uint64_t since = old & PL_WAIT_TICKS, now = ticks_now(st);
		if (!(old & PL_WAIT_USED) || now <= since)
			continue;
		/* The copy may be torn if the owner reuses the slot meanwhile; the
		 * generation in word then fails the swap and the copy is thrown away. */
		struct coprof_ctx *ctx = w->ctx;
		uint32_t depth = w->depth;
		if (depth > PL_SAMPLE_DEPTH)
			continue;
		memcpy(pcs, w->pcs, depth * sizeof(pcs[0]));
		depth = pl_stack_user_depth(pcs, depth);
		uint64_t word = (old & ~PL_WAIT_TICKS) | now;
		if (!atomic_compare_exchange_strong(&w->word, &old, word))
			continue;
		coprof_sample_n(st->thread, ctx, pcs, depth, pl_sconf.period, now - since, 1);
	}
}
