/* adapter-ucontext.c: coroutines made with makecontext and switched with swapcontext
 * and setcontext. Each becomes an engine context with its own shadow stack and
 * virtual clock, named after its entry function.
 *
 * A coroutine's identity is the ucontext_t it was made in, and every ucontext_t a
 * swapcontext saves into: a lock-free table (service.h's address map) maps those
 * addresses to coroutines (an address it does not know is the switching thread's own
 * context). The entry function runs inside a trampoline of ours, which finishes the
 * context when it returns. Runs in the program's threads, on their switch path, maybe
 * in a signal handler (preemptive green threads): no allocation there, and otherwise
 * only when a coroutine is made or first seen in a profiling window.
 *
 * Attached to a running program in sample mode (coprof attach), the coroutines made
 * before the attach have no record: the shim did not see their makecontext. Each gets
 * one at its first switch the bound swapcontext sees (adopted): as the ucontext a
 * switch goes to, saved before with a stack pointer off the thread's own stack, or as
 * the coroutine a switch leaves, running off the thread's own stack with no record.
 * Its stack, walked once (its saved context, or the running one), names it after its
 * entry; from then on it is a task of its own with its waits, as one made after. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime.h"

/* The most arguments an entry function may take (makecontext's argc). Beyond it the
 * coroutine runs unprofiled, as part of the thread that switches to it. */
#define PL_MAX_ARGS 8

struct pl_coro {
	ucontext_t *home; /* the ucontext_t it was made in */
	void (*fn)(void);
	int argc;
	uint64_t args[PL_MAX_ARGS];
	const ucontext_t *link; /* uc_link at makecontext: where it goes when it returns */
	uintptr_t lo, hi;	/* its stack (uc_stack at makecontext) */
	uint64_t id;		/* unique per makecontext: the task id */
	unsigned incarnation;
	int finished;
	int adopted; /* made before the attach: no trampoline, an end no hook sees */
	const char *name;
	char namebuf[24];
	/* the engine context, valid for one profiler (a forked child has its own) and one
	 * thread; the engine keeps it across windows until it is finished */
	struct coprof_ctx *ctx;
	struct coprof *ctx_prof;
	struct coprof_thread *ctx_thread;
	struct pl_coro *next_all;
};

/* ucontext_t address -> the coroutine saved or made there (NULL: a thread's own) */
static struct pl_addrmap map = {
    .mask = (1u << 18) - 1,
    .full = "too many ucontexts; further coroutines count as part of their thread",
};
static atomic_ullong next_id;
static struct pl_coro *all_coros;

static const struct pl_runtime ucontext_runtime = {.name = "ucontext", .native = 1};
static int adopting; /* attached in sample mode: coroutines met unknown are adopted */

void pl_uctx_init(int attached)
{
	adopting = attached && pl_cfg.mode == COPROF_MODE_SAMPLE;
	pl_runtime_add(&ucontext_runtime);
	if (pl_addrmap_make(&map) != 0)
		pl_say("cannot map the coroutine table; coroutines are not profiled");
}

/* The coroutine saved in or made in `uc`; NULL for a thread's own (or unknown). */
static struct pl_coro *map_get(const void *uc)
{
	return pl_addrmap_get(&map, (uintptr_t)uc);
}

/* Records that `uc` now holds `coro`. Returns -1 when the table is full. */
static int map_put(const void *uc, struct pl_coro *coro)
{
	return pl_addrmap_put(&map, (uintptr_t)uc, coro);
}

/* Whether `c` has a context in the engine of this process on thread `th`. */
static int owns_ctx(const struct pl_coro *c, const struct coprof_thread *th)
{
	return th && c->ctx && c->ctx_thread == th && c->ctx_prof == pl_prof;
}

/* The engine context of `c` on thread `th`, made on first use. The same one serves
 * every window: coprof_clear keeps unfinished contexts, so making a new one per window
 * left the old one suspended in the engine for good (a soak with a toggle a second
 * grew by one context per connection that outlived a window). */
static struct coprof_ctx *ctx_of(struct coprof_thread *th, struct pl_coro *c)
{
	if (!c)
		return NULL;
	if (owns_ctx(c, th))
		return c->ctx;
	/* Making one allocates: not in a signal handler (a green thread preempted by a
	 * timer); the coroutine counts as part of its thread until a switch outside one. */
	if (pl_sig_maybe_in_handler())
		return NULL;
	/* It ran on another thread before: that thread no longer has it waiting. */
	if (c->ctx && c->ctx_prof == pl_prof)
		pl_sampler_moved(c->ctx);
	struct coprof_ctx *ctx = NULL;
	if (coprof_ctx_create(th, c->id, c->name, "ucontext", &ctx) != 0)
		ctx = NULL;
	c->ctx = ctx;
	c->ctx_prof = pl_prof;
	c->ctx_thread = th;
	return ctx;
}

/* The calling thread now runs `c` (NULL: its own context, or a ucontext of no
 * coroutine of ours: the next event finds out from the stack pointer). */
static void set_cur(struct pl_coro *c)
{
	pl_ntls.cur = c;
	pl_stack_set(NULL, c ? c->lo : 0, c ? c->hi : 0);
}

void pl_uctx_resync(struct coprof_thread *th)
{
	pl_ntls.gen = __atomic_load_n(&pl_gen, __ATOMIC_ACQUIRE);
	if (pl_stls.cur) {
		/* a context of the stack adapters (fcontext, or a detected stack) */
		coprof_ctx_switch(th, pl_stack_ctx(th, pl_stls.cur));
		return;
	}
	struct pl_coro *c = pl_ntls.cur;
	if (c && !c->finished)
		coprof_ctx_switch(th, ctx_of(th, c));
}

/* Tells the engine (and the sampler) that the calling thread goes from `from` to `to`.
 * `from` is `gone` when it cannot be resumed where it is (it left by setcontext, which
 * saves nothing): the sampler does not count it as waiting. Caller holds the guard and
 * has set in_switch. */
static void announce_ex(struct pl_coro *from, struct pl_coro *to, int gone)
{
	if (!__atomic_load_n(&pl_running, __ATOMIC_RELAXED))
		return;
	struct coprof_thread *th = pl_tls_data.thread;
	if (!th && !pl_sig_maybe_in_handler())
		th = pl_thread(); /* registration allocates */
	if (!th)
		return;
	if (pl_ntls.gen != __atomic_load_n(&pl_gen, __ATOMIC_RELAXED))
		pl_uctx_resync(th);
	struct coprof_ctx *cf = gone ? NULL : ctx_of(th, from), *ct = ctx_of(th, to);
	pl_sampler_switch(cf, ct);
	coprof_ctx_switch(th, ct);
}

static void announce(struct pl_coro *from, struct pl_coro *to)
{
	announce_ex(from, to, 0);
}

/* Runs on the coroutine's own stack; `lo` and `hi` are the halves of its record's
 * address (makecontext passes ints). When the entry returns, the context is finished
 * and the one uc_link names becomes current; glibc then switches there itself. */
static PL_START_CODE void trampoline(unsigned lo, unsigned hi)
{
	struct pl_coro *c = (struct pl_coro *)(((uintptr_t)hi << 32) | lo);
	pl_tls_data.in_switch = 0;
	unsigned inc = c->incarnation;
	void (*fn)(void) = c->fn;
	uint64_t a[PL_MAX_ARGS];
	for (int i = 0; i < PL_MAX_ARGS; i++)
		a[i] = c->args[i];
	typedef void (*f8)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
			   uint64_t);
	/* the entry declares at most argc parameters: the extra registers are ignored */
	((f8)(void *)fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);

	struct pl_tls *t = &pl_tls_data;
	int guard = t->guard;
	t->guard = 1;
	/* From here glibc switches to uc_link: whoever resumes there clears in_switch (a
	 * swapcontext of ours), or the sampler sees the switch is over (switch_sp). */
	t->switch_sp = (uintptr_t)__builtin_frame_address(0);
	t->in_switch = 1;
	struct pl_coro *next = map_get(c->link);
	if (next && next->finished)
		next = NULL;
	if (c->incarnation == inc) {
		c->finished = 1;
		/* finished even while profiling is off, or the engine keeps it forever */
		struct coprof_thread *th = pl_tls_data.thread;
		if (owns_ctx(c, th)) {
			pl_sampler_finish(c->ctx);
			coprof_ctx_finish(th, c->ctx);
		}
		if (__atomic_load_n(&pl_running, __ATOMIC_RELAXED)) {
			th = pl_thread();
			if (th && next) {
				/* resumed through uc_link: the sampler must hear it too */
				struct coprof_ctx *nc = ctx_of(th, next);
				pl_sampler_switch(NULL, nc);
				coprof_ctx_switch(th, nc);
			}
		}
	}
	set_cur(next);
	t->guard = guard;
}

static void forward(ucontext_t *ucp, void (*fn)(void), int argc, const uint64_t *a)
{
	pl_real.makecontext(ucp, fn, argc, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8],
			    a[9], a[10], a[11], a[12], a[13], a[14], a[15]);
}

/* A record for a coroutine made in `ucp`: the one made there before is reused (it
 * has finished, or the program abandoned it), so records never outnumber ucontexts. */
static struct pl_coro *coro_for(ucontext_t *ucp)
{
	struct pl_coro *c = map_get(ucp);
	if (c && c->home == ucp) {
		if (!c->finished && owns_ctx(c, pl_tls_data.thread)) {
			pl_sampler_finish(c->ctx);
			coprof_ctx_finish(pl_tls_data.thread, c->ctx);
		}
		c->incarnation++;
		return c;
	}
	c = calloc(1, sizeof(*c));
	if (c) {
		c->home = ucp;
		/* a list that keeps every record reachable, for leak checkers */
		c->next_all = __atomic_load_n(&all_coros, __ATOMIC_ACQUIRE);
		while (!__atomic_compare_exchange_n(&all_coros, &c->next_all, c, 1,
						    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			;
	}
	return c;
}

static void name_coro(struct pl_coro *c)
{
	struct coprof_func_info info;
	if (pl_syms && pl_symbols_lookup(pl_syms, (uintptr_t)c->fn, &info) == 0 && info.name) {
		c->name = info.name;
		return;
	}
	snprintf(c->namebuf, sizeof(c->namebuf), "%p", (void *)c->fn);
	c->name = c->namebuf;
}

PL_EXPORT void makecontext(ucontext_t *ucp, void (*fn)(void), int argc, ...)
{
	uint64_t a[16] = {0};
	va_list ap;
	va_start(ap, argc);
	for (int i = 0; i < argc && i < 16; i++)
		a[i] = va_arg(ap, uint64_t); /* as glibc reads them on x86-64 */
	va_end(ap);
	if (!pl_real.makecontext)
		pl_resolve_reals();
	struct pl_tls *t = &pl_tls_data;
	if (!pl_active || !pl_addrmap_ready(&map) || t->guard || argc < 0 || argc > PL_MAX_ARGS) {
		if (pl_active && argc > PL_MAX_ARGS)
			pl_say("makecontext with %d arguments (coprof follows up to %d); that "
			       "coroutine counts as part of its thread",
			       argc, PL_MAX_ARGS);
		forward(ucp, fn, argc, a);
		return;
	}
	t->guard = 1;
	struct pl_coro *c = map_get(ucp);
	if (!(c && c->home == ucp) && pl_sig_maybe_in_handler())
		c = NULL; /* a new record allocates: not in a signal handler */
	else
		c = coro_for(ucp);
	if (!c || map_put(ucp, c) != 0) {
		t->guard = 0;
		forward(ucp, fn, argc, a);
		return;
	}
	c->fn = fn;
	c->argc = argc;
	for (int i = 0; i < PL_MAX_ARGS; i++)
		c->args[i] = a[i];
	c->link = ucp->uc_link;
	c->lo = (uintptr_t)ucp->uc_stack.ss_sp;
	c->hi = c->lo + ucp->uc_stack.ss_size;
	c->id = atomic_fetch_add(&next_id, 1) + 1;
	c->finished = 0;
	c->adopted = 0;
	c->ctx = NULL;
	name_coro(c);
	uintptr_t p = (uintptr_t)c;
	pl_real.makecontext(ucp, (void (*)(void))trampoline, 2, (unsigned)p, (unsigned)(p >> 32));
	t->guard = 0;
}

/* --- coroutines made before the attach ------------------------------------------- */

/* A record for the coroutine saved in (or leaving through) `uc`, made before the
 * attach, whose stack walked from `from` gives its entry; NULL when none can be made
 * here (a signal handler, no memory, a full table). */
static struct pl_coro *adopt(ucontext_t *uc, const ucontext_t *from)
{
	if (pl_sig_maybe_in_handler() || !pl_addrmap_ready(&map))
		return NULL;
	struct pl_coro *c = coro_for(uc);
	if (!c || map_put(uc, c) != 0)
		return NULL;
	c->fn = NULL;
	c->argc = 0;
	c->link = NULL;
	c->lo = c->hi = 0; /* unknown: sample mode needs none */
	c->id = atomic_fetch_add(&next_id, 1) + 1;
	c->finished = 0;
	c->adopted = 1;
	c->ctx = NULL;
	c->name = pl_stack_entry_at(from, c->namebuf, sizeof(c->namebuf));
	return c;
}

/* The coroutine a switch goes to through `ucp`: its record, or an adopted one when it
 * was saved before the attach off the thread's own stack; NULL: the thread's own. */
static struct pl_coro *going_to(const ucontext_t *ucp)
{
	struct pl_coro *to = map_get(ucp);
	if (to && to->finished)
		return NULL;
	if (to || !adopting || pl_stls.cur ||
	    pl_on_own_stack((uintptr_t)ucp->uc_mcontext.gregs[REG_RSP]) != 0)
		return to;
	return adopt((ucontext_t *)ucp, ucp);
}

/* The coroutine a switch leaves, saving itself in `oucp`: the running one as the
 * records say (`cur`), adopted when the thread runs off its own stack with no record.
 * An adopted one may have returned through its uc_link, which no hook sees: back on
 * the thread's own stack, the thread's own context is leaving. */
static struct pl_coro *leaving(struct pl_coro *cur, ucontext_t *oucp)
{
	if (!adopting || (cur && !cur->adopted) || pl_stls.cur)
		return cur;
	int own = pl_on_own_stack((uintptr_t)__builtin_frame_address(0));
	if (own != 0)
		return own > 0 ? NULL : cur;
	if (cur)
		return cur;
	ucontext_t here;
	if (getcontext(&here) != 0)
		return NULL;
	return adopt(oucp, &here);
}

/* A switch to `to` that did not happen: the thread is back in `from`, still inside the
 * switch for the sampler (the caller clears in_switch). */
static void switch_failed(struct pl_tls *t, struct pl_coro *from, struct pl_coro *to)
{
	t->guard = 1;
	set_cur(from);
	announce(to, from);
	t->guard = 0;
}

PL_EXPORT int swapcontext(ucontext_t *oucp, const ucontext_t *ucp)
{
	if (!pl_real.swapcontext)
		pl_resolve_reals();
	struct pl_tls *t = &pl_tls_data;
	if (!pl_active || t->guard)
		return pl_real.swapcontext(oucp, ucp);
	t->guard = 1;
	struct pl_coro *from = leaving(pl_ntls.cur, oucp);
	struct pl_coro *to = going_to(ucp);
	map_put(oucp, from);
	set_cur(to);
	t->switch_sp = (uintptr_t)__builtin_frame_address(0);
	t->in_switch = 1;
	announce(from, to);
	t->guard = 0;
	int rc = pl_real.swapcontext(oucp, ucp);
	/* resumed: whoever switched here already made this context current */
	t = &pl_tls_data;
	if (rc != 0)
		switch_failed(t, from, to);
	t->in_switch = 0;
	return rc;
}

PL_EXPORT int setcontext(const ucontext_t *ucp)
{
	if (!pl_real.setcontext)
		pl_resolve_reals();
	struct pl_tls *t = &pl_tls_data;
	if (!pl_active || t->guard)
		return pl_real.setcontext(ucp);
	t->guard = 1;
	struct pl_coro *from = pl_ntls.cur;
	struct pl_coro *to = going_to(ucp);
	set_cur(to);
	/* The target may be a getcontext point no hook of ours passes: the sampler tells
	 * the switch is over when the stack has left this frame (switch_sp). */
	t->switch_sp = (uintptr_t)__builtin_frame_address(0);
	t->in_switch = 1;
	announce_ex(from, to, 1);
	t->guard = 0;
	int rc = pl_real.setcontext(ucp);
	switch_failed(t, from, to); /* only a failure returns */
	t->in_switch = 0;
	return rc;
}
