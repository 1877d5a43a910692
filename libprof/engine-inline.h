/* engine-inline.h: the inline pieces every engine event uses: the clock read and the
 * event section that makes a dump consistent. Owner thread only.
 *
 * An event section: the thread makes its sequence counter odd, then reads the
 * profiler's state word. The dumper sets CP_PAUSED, forces a barrier on every thread
 * (membarrier, or the writers' own full fence when it is unavailable), and waits for
 * every counter to be even. A writer that sees CP_PAUSED leaves its section and waits. */
#ifndef CP_ENGINE_INLINE_H
#define CP_ENGINE_INLINE_H

#include "engine.h"

static inline uint64_t cp_now(struct coprof_thread *t)
{
	uint64_t ns = t->fake ? t->fake(t->fake_arg) : cp_clock_now(&t->clock);
	t->last = ns;
	return ns;
}

/* Opens an event section; returns the state word seen (never with CP_PAUSED). */
static inline uint32_t cp_section_open(struct coprof_thread *t)
{
	for (;;) {
		uint32_t s = atomic_load_explicit(&t->seq, memory_order_relaxed);
		atomic_store_explicit(&t->seq, s + 1, memory_order_relaxed);
		if (t->fence)
			atomic_thread_fence(memory_order_seq_cst);
		else
			atomic_signal_fence(memory_order_seq_cst);
		uint32_t st = atomic_load_explicit(&t->p->state, memory_order_acquire);
		if (__builtin_expect(!(st & CP_PAUSED), 1))
			return st;
		atomic_store_explicit(&t->seq, s + 2, memory_order_release);
		cp_wait_unpaused(t);
	}
}

static inline void cp_section_close(struct coprof_thread *t)
{
	uint32_t s = atomic_load_explicit(&t->seq, memory_order_relaxed);
	atomic_store_explicit(&t->seq, s + 1, memory_order_release);
}

#endif
