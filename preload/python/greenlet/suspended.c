/* suspended.c: the outermost frame of every switched-out greenlet, with its code object
 * and the greenlet's context, in a fixed table. greenlet.c's tracer writes it, GIL held;
 * the tick handler of any thread reads it (sampling/walk.c), lock-free, to tell a tick
 * that lands in a switch window: the frames already the next greenlet's, the sampler
 * still charging the one before. */
/* async-signal-safe: pl_py_suspended_other */
#include "greenlet.h" /* Python.h first */

#include <errno.h>

#define SLOTS 32768u /* a power of two */
#define PROBE 64u    /* slots looked at from a key's home: the table is full past that */
#define TOMB 1u	     /* a removed entry's key: lookups go on past it, a put may reuse it */

/* One switched-out greenlet. A reader checks code before and after it reads ctx, and
 * the frame's own code object against it: a put zeroes code first and sets it last,
 * so a torn or stale entry fails a check (the tick is then sampled as before). */
struct entry {
	uintptr_t frame; /* key: 0 empty, TOMB removed */
	uintptr_t code;	 /* the frame's code object when recorded; 0 while rewritten */
	uintptr_t ctx;	 /* the greenlet's context; 0: a main greenlet (the thread's own) */
};

static struct entry table[SLOTS];
static int full_said;

static uint32_t home(uintptr_t frame)
{
	return (uint32_t)(((uint64_t)(frame >> 3) * 0x9E3779B97F4A7C15ull) >> 40) & (SLOTS - 1);
}

/* The slot holding frame, or NULL. Lock-free: entries change under it. */
static struct entry *find(uintptr_t frame)
{
	uint32_t h = home(frame);
	for (uint32_t i = 0; i < PROBE; i++) {
		struct entry *e = &table[(h + i) & (SLOTS - 1)];
		uintptr_t k = __atomic_load_n(&e->frame, __ATOMIC_ACQUIRE);
		if (k == frame)
			return e;
		if (k == 0)
			return NULL;
	}
	return NULL;
}

int pl_py_suspended_put(uintptr_t frame, uintptr_t code, const struct coprof_ctx *ctx)
{
	if (frame <= TOMB || !code)
		return -EINVAL;
	struct entry *e = find(frame);
	if (!e) {
		uint32_t h = home(frame);
		for (uint32_t i = 0; i < PROBE && !e; i++) {
			struct entry *s = &table[(h + i) & (SLOTS - 1)];
			uintptr_t k = __atomic_load_n(&s->frame, __ATOMIC_RELAXED);
			if (k <= TOMB)
				e = s;
		}
	}
	if (!e) {
		if (!full_said) {
			full_said = 1;
			pl_py_host->say("the table of suspended greenlets is full (%u): ticks in a "
					"greenlet switch may be charged to the greenlet before it",
					SLOTS);
		}
		return -ENOSPC;
	}
	__atomic_store_n(&e->code, 0, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&e->ctx, (uintptr_t)ctx, __ATOMIC_RELAXED);
	__atomic_store_n(&e->frame, frame, __ATOMIC_RELEASE);
	__atomic_store_n(&e->code, code, __ATOMIC_RELEASE);
	return 0;
}

void pl_py_suspended_del(uintptr_t frame)
{
	struct entry *e = frame > TOMB ? find(frame) : NULL;
	if (!e)
		return;
	__atomic_store_n(&e->code, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&e->frame, TOMB, __ATOMIC_RELEASE);
}

/* async-signal-safe */
int pl_py_suspended_other(uintptr_t frame, uintptr_t code, const struct coprof_ctx *cur)
{
	struct entry *e = frame > TOMB && code ? find(frame) : NULL;
	if (!e)
		return 0;
	uintptr_t c1 = __atomic_load_n(&e->code, __ATOMIC_ACQUIRE);
	uintptr_t ctx = __atomic_load_n(&e->ctx, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	uintptr_t k = __atomic_load_n(&e->frame, __ATOMIC_RELAXED);
	uintptr_t c2 = __atomic_load_n(&e->code, __ATOMIC_RELAXED);
	return c1 == code && c2 == code && k == frame && ctx != (uintptr_t)cur;
}
