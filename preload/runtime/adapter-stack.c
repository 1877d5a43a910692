/* adapter-stack.c: contexts keyed by the stack they run on. A switch that no adapter
 * reported (State Threads, libco, a hand-written switch) shows at the next __cyg hook
 * as a stack pointer off the running context's stack; the slow path here finds the
 * stack it is on (the thread's own, one met before, or a new one) and switches the
 * engine there. Runs in the program's threads inside the hooks, guard held; makes
 * records and engine contexts (which allocates) only outside signal handlers. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "runtime.h"
#include "signal-safe.h"

/* A detected stack is taken to reach this far below the first frame seen on it (or
 * down to the next stack known below), and this far above: a runtime's own frames over
 * the root function. Frames deeper than PL_STACK_BELOW read as a switch; stacks placed
 * closer together than the sum read as one (README, "Stacks no adapter knows"). */
#define PL_STACK_BELOW ((uintptr_t)60 << 10)
#define PL_STACK_ABOVE ((uintptr_t)2 << 10)

void pl_stack_name(struct pl_stack *s, uintptr_t fn)
{
	struct coprof_func_info info;
	if (pl_syms && pl_symbols_lookup(pl_syms, fn, &info) == 0 && info.name) {
		s->name = info.name;
		return;
	}
	snprintf(s->namebuf, sizeof(s->namebuf), "%p", (void *)fn);
	s->name = s->namebuf;
}

/* Naming reads DWARF (and walking a stack, libunwind's), deeper than the small stack
 * of a coroutine the hook may be on: it runs on a scratch stack of the thread's own,
 * switched to with glibc's functions (not the shim's hooks). The two ucontexts sit at
 * its bottom. */
#define PL_SCRATCH_SIZE ((size_t)512 << 10)
struct scratch {
	ucontext_t run, back;
	void (*fn)(void *);
	void *arg;
};
static __thread struct scratch *scratch PL_TLS;

static void run_on_scratch(void)
{
	scratch->fn(scratch->arg);
}

int pl_on_scratch(void (*fn)(void *), void *arg)
{
	if (!scratch) {
		void *m = mmap(NULL, PL_SCRATCH_SIZE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		if (m != MAP_FAILED)
			scratch = m;
	}
	if (!scratch || !pl_real.makecontext || !pl_real.swapcontext ||
	    getcontext(&scratch->run) != 0)
		return -1;
	scratch->fn = fn;
	scratch->arg = arg;
	scratch->run.uc_stack.ss_sp = (char *)scratch + sizeof(*scratch);
	scratch->run.uc_stack.ss_size = PL_SCRATCH_SIZE - sizeof(*scratch);
	scratch->run.uc_link = &scratch->back;
	pl_real.makecontext(&scratch->run, run_on_scratch, 0);
	pl_real.swapcontext(&scratch->back, &scratch->run);
	return 0;
}

struct naming {
	struct pl_stack *s;
	uintptr_t fn;
	int own_only; /* name it only after a function of the program's own */
};

static void name_job(void *arg)
{
	struct naming *n = arg;
	struct coprof_func_info info;
	if (!n->own_only)
		pl_stack_name(n->s, n->fn);
	else if (pl_syms && pl_symbols_lookup(pl_syms, n->fn, &info) == 0 && info.name &&
		 pl_stack_own_function(&info)) {
		n->s->name = info.name;
		n->s->naming = 0;
	}
}

static void name_deep(struct pl_stack *s, uintptr_t fn, int own_only)
{
	struct naming n = {s, fn, own_only};
	if (pl_on_scratch(name_job, &n) != 0) {
		snprintf(s->namebuf, sizeof(s->namebuf), "%p", (void *)fn);
		s->name = s->namebuf;
	}
}

/* The calling thread ends: frees what the slow path kept for it. */
static void thread_exit(void)
{
	if (scratch)
		munmap(scratch, PL_SCRATCH_SIZE);
	scratch = NULL;
}

static const struct pl_runtime stack_runtime = {
    .name = "stack",
    .native = 1,
    .thread_exit = thread_exit,
};

void pl_stack_init(void)
{
	pl_runtime_add(&stack_runtime);
}

/* The same context serves every profiling window (coprof_clear keeps unfinished
 * ones), as in the ucontext adapter. */
struct coprof_ctx *pl_stack_ctx(struct coprof_thread *th, struct pl_stack *s)
{
	if (!s || s->finished)
		return NULL;
	if (pl_stack_owns_ctx(s, th))
		return s->ctx;
	if (pl_sig_maybe_in_handler())
		return NULL;
	if (s->ctx && s->ctx_prof == pl_prof)
		pl_sampler_moved(s->ctx); /* it ran on another thread before */
	struct coprof_ctx *ctx = NULL;
	if (coprof_ctx_create(th, s->id, s->name, s->runtime, &ctx) != 0)
		ctx = NULL;
	s->ctx = ctx;
	s->ctx_prof = pl_prof;
	s->ctx_thread = th;
	return ctx;
}

void pl_stack_finish(struct pl_stack *s)
{
	s->finished = 1;
	struct coprof_thread *th = pl_tls_data.thread;
	if (pl_stack_owns_ctx(s, th)) {
		pl_sampler_finish(s->ctx);
		coprof_ctx_finish(th, s->ctx);
	}
}

/* The calling thread's own stack, from its pthread attributes: 0, or -1. Allocates
 * (the main thread's reads /proc/self/maps): never in a signal handler. */
static int read_own_stack(uintptr_t *lo, uintptr_t *hi)
{
	pthread_attr_t a;
	void *addr;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return -1;
	int rc = pthread_attr_getstack(&a, &addr, &size);
	pthread_attr_destroy(&a);
	if (rc != 0)
		return -1;
	*lo = (uintptr_t)addr;
	*hi = (uintptr_t)addr + size;
	return 0;
}

/* The thread's own stack, read once per thread, for the hooks' slow path. */
static int own_bounds(void)
{
	return pl_stls.own_hi ? 0 : read_own_stack(&pl_stls.own_lo, &pl_stls.own_hi);
}

/* The same for the switches' adoption (sample mode): kept apart, because
 * pl_stls.own_hi also says that the hooks ran on this thread (pl_stack_hooked). */
static __thread uintptr_t adopt_lo PL_TLS;
static __thread uintptr_t adopt_hi PL_TLS;

int pl_on_own_stack(uintptr_t sp)
{
	if (!adopt_hi && (pl_sig_maybe_in_handler() || read_own_stack(&adopt_lo, &adopt_hi) != 0))
		return -1;
	return sp - adopt_lo < adopt_hi - adopt_lo;
}

#define ENTRY_DEPTH 64 /* frames walked to name a coroutine made before the attach */

struct entry_job {
	const ucontext_t *at;
	const char *entry;
};

static void entry_walk(void *arg)
{
	struct entry_job *j = arg;
	uintptr_t pcs[ENTRY_DEPTH], base;
	int n = pl_unw_walk(&pl_tls_data, j->at, pcs, ENTRY_DEPTH, &base);
	int bottom;
	j->entry = n > 0 ? pl_stack_entry(pcs, (uint32_t)n, &bottom) : NULL;
}

const char *pl_stack_entry_at(const ucontext_t *at, char *buf, size_t len)
{
	struct entry_job job = {at, NULL};
	if (pl_on_scratch(entry_walk, &job) == 0 && job.entry)
		return job.entry;
	snprintf(buf, len, "%p", (void *)at->uc_mcontext.gregs[REG_RIP]);
	return buf;
}

/* The mapping of /proc/self/maps that holds `sp`, read without allocating. */
static int mapping_of(uintptr_t sp, uintptr_t *lo, uintptr_t *hi)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[4096];
	size_t have = 0;
	int found = -1;
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = 0;
		char *line = buf, *nl;
		while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			*nl = 0;
			unsigned long a, b;
			if (sscanf(line, "%lx-%lx", &a, &b) == 2 && sp >= a && sp < b) {
				*lo = a;
				*hi = b;
				found = 0;
				break;
			}
			line = nl + 1;
		}
		if (!found)
			break;
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1)
			have = 0; /* a line longer than the buffer: not one we need */
	}
	close(fd);
	return found;
}

/* Whether `sp` is on the thread's alternate signal stack (a handler's frames): the
 * program's, or the sampler's tick stack, which stands in for it (and is disarmed
 * while a handler runs on it). */
static int on_altstack(uintptr_t sp)
{
	stack_t ss;
	if (pl_tick_stack_holds(sp))
		return 1;
	if (pl_real_sigaltstack(NULL, &ss) != 0 || (ss.ss_flags & SS_DISABLE))
		return 0;
	return sp - (uintptr_t)ss.ss_sp < ss.ss_size;
}

/* A record for a stack first met at `sp`: bounds estimated around it, inside its
 * mapping and clear of the stacks known beside it. */
static struct pl_stack *detect(uintptr_t sp)
{
	struct pl_stack *s = pl_stack_new();
	if (!s)
		return NULL;
	uintptr_t lo = sp > PL_STACK_BELOW ? sp - PL_STACK_BELOW : 0, hi = sp + PL_STACK_ABOVE;
	uintptr_t mlo, mhi;
	if (mapping_of(sp, &mlo, &mhi) == 0) {
		lo = lo > mlo ? lo : mlo;
		hi = hi < mhi ? hi : mhi;
	}
	for (struct pl_stack *r = pl_stls.seen; r; r = r->next_seen) {
		if (r->hi <= sp && r->hi > lo)
			lo = r->hi;
		if (r->lo > sp && r->lo < hi)
			hi = r->lo;
	}
	s->lo = lo;
	s->hi = hi;
	s->runtime = "stack";
	s->detected = 1;
	s->finished = 1; /* the caller starts its first context */
	s->next_seen = pl_stls.seen;
	pl_stls.seen = s;
	return s;
}

/* Makes `to` (NULL: the thread's own context) the engine's running context. The stack
 * the previous context left (`from`) is no longer under us: when it is a detected
 * stack, the sampler's wait stack for it is the instrumented frames the hooks saw
 * entered on it and not left (sample mode), innermost first. */
static void engine_switch(struct coprof_thread *th, struct pl_stack *to, struct pl_stack *from)
{
	struct coprof_ctx *c = to ? pl_stack_ctx(th, to) : NULL;
	struct coprof_ctx *was = coprof_ctx_current(th);
	if (was == c)
		return;
	/* The sampler's wait table pushes ring records: the tick handler stays off the
	 * ring meanwhile (sampler-signal.c), as for the adapters' switches. */
	struct pl_tls *t = &pl_tls_data;
	sig_atomic_t in_switch = t->in_switch;
	uintptr_t switch_sp = t->switch_sp;
	t->switch_sp = (uintptr_t)__builtin_frame_address(0);
	t->in_switch = 1;
	if (from && from != to && from->detected && !from->finished && was &&
	    pl_stack_owns_ctx(from, th) && from->ctx == was && from->nfns &&
	    from->nfns <= PL_STACK_FNS) {
		uintptr_t pcs[PL_STACK_FNS];
		for (uint32_t i = 0; i < from->nfns; i++)
			pcs[i] = from->fns[from->nfns - 1 - i];
		pl_sampler_switch_left(was, pcs, from->nfns, c);
	} else {
		pl_sampler_switch(NULL, c);
	}
	t->in_switch = in_switch;
	t->switch_sp = switch_sp;
	coprof_ctx_switch(th, c);
}

void pl_stack_moved(struct coprof_thread *th, uintptr_t sp, uintptr_t key, int enter)
{
	if (!pl_stls.cur || !pl_stls.cur->detected)
		pl_tls_data.stack_root_sp = UINTPTR_MAX; /* a new thread's is 0 */
	struct pl_stack *c = pl_stls.cur;
	if (c && c->naming && sp - c->lo < c->hi - c->lo) {
		/* still on the fiber: a call of the program's own names it */
		if (enter && !pl_sig_maybe_in_handler()) {
			name_deep(c, key, 1);
			if (!c->naming && pl_stack_owns_ctx(c, th))
				coprof_ctx_set_name(c->ctx, c->name);
			else if (++c->tries >= 64)
				c->naming = 0; /* keep the entry's name */
		}
		pl_stack_set(c, c->lo, c->hi);
		return;
	}
	/* Only what allocates (the first bounds, a record, a name) asks whether a signal
	 * handler runs: with the program's handlers installed, that is a system call, and
	 * a switch between known stacks needs none. */
	if (!pl_stls.own_hi && (pl_sig_maybe_in_handler() || own_bounds() != 0)) {
		pl_tls_data.stack_span = 0; /* nothing known: test again at the next event */
		return;
	}
	if (sp - pl_stls.own_lo < pl_stls.own_hi - pl_stls.own_lo) {
		pl_ntls.cur = NULL; /* no ucontext coroutine either */
		pl_stack_set(NULL, pl_stls.own_lo, pl_stls.own_hi);
		engine_switch(th, NULL, c);
		return;
	}
	struct pl_stack *s = pl_stls.seen;
	while (s && sp - s->lo >= s->hi - s->lo)
		s = s->next_seen;
	if ((!s || s->finished) && pl_sig_maybe_in_handler()) {
		pl_tls_data.stack_span = 0;
		return;
	}
	if (!s) {
		if (on_altstack(sp) || !(s = detect(sp))) {
			pl_tls_data.stack_span = 0;
			return;
		}
	}
	if (s->finished) {
		/* a new context on this stack: its first event names it */
		s->finished = 0;
		s->nfns = 0;
		s->root_sp = enter ? sp : UINTPTR_MAX;
		s->id = pl_stack_next_id();
		s->ctx = NULL;
		name_deep(s, key, 0);
	}
	pl_ntls.cur = NULL;
	pl_stack_set(s, s->lo, s->hi);
	engine_switch(th, s, c);
}

void pl_stack_root_returned(struct coprof_thread *th, struct pl_stack *s)
{
	(void)th;
	if (s)
		pl_stack_finish(s);
	pl_stack_set(NULL, 0, 0); /* wherever the runtime goes next, the next event finds it */
}
