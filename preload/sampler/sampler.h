/* sampler.h: sample mode (COPROF_MODE=sample): the sampler, and what its files share.
 *
 * One struct pl_sthread per profiled thread, allocated by that thread outside any
 * signal. Its ring is written by the tick handler (sampler-signal.c) and by the switch
 * hook (sampler-wait.c) on the owning thread, and read by the folding thread
 * (sampler.c), which alone calls coprof_sample. Producer and consumer only share the
 * ring's head and tail, as atomics. The runtimes (runtime/) tell the sampler of their
 * switches; the tick handler's functions are declared in signal-safe.h. */
#ifndef PL_SAMPLER_H
#define PL_SAMPLER_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <ucontext.h>

#include "python/adapter.h"
#include "service/service.h"
#include "state/state.h"

#define PL_SAMPLE_DEPTH 128 /* frames kept per stack; deeper stacks are truncated */
#define PL_SAMPLE_SKIP 8    /* frames of the handler itself, at most, above the pc */
#define PL_RING_BYTES (256u * 1024) /* records per thread between two folds (a power of 2) */
#define PL_WAIT_SLOTS 256   /* suspended coroutines per thread with a wait stack */
#define PL_HELD_MAX 4096    /* ticks per thread held back for a scan of tasks */

enum pl_rec_kind {
	PL_REC_SAMPLE, /* a tick on the running context: weight is ns */
	PL_REC_WAIT,   /* a suspended coroutine: weight is ticks it waited */
};

struct pl_stack;

/* A record in the ring takes its header and `depth` pcs (pl_rec_size); kind comes
 * first so that the ring's last 8 bytes can hold a record that is never read. */
struct pl_rec {
	uint32_t kind;
	uint32_t depth;
	struct coprof_ctx *ctx; /* NULL: the thread's own context */
	uint64_t weight;
	/* A sample on a stack nobody follows (the fold finds its context: pl_stack_fold):
	 * the interrupted stack pointer, 0 for any other sample; and the stack pointer of
	 * the stack's outermost frame when the walk reached it, else 0. */
	uintptr_t sp, base;
	struct pl_stack *fiber; /* an fcontext fiber the fold may name (pl_stack_fold_name) */
	/* A Python tick that met an asyncio task no scan had listed yet (struct
	 * pl_py_sample's new_coro, else 0): held back until the adapter's claim says
	 * whose it is. new_key: the task's root code key; new_frames: its task_frames. */
	uintptr_t new_coro, new_key;
	uint32_t new_gen, new_frames;
	uintptr_t pcs[PL_SAMPLE_DEPTH + PL_SAMPLE_SKIP]; /* innermost first */
};

/* The stack a coroutine suspended at. `word` is 0 when the slot is free, else
 * PL_WAIT_USED | generation << PL_WAIT_GEN_SHIFT | the tick count it has been charged
 * up to. The owning thread fills ctx and pcs before it publishes word; the folding
 * thread moves the tick count forward by compare-and-swap, so each tick is charged
 * once whichever of the two gets to it. */
struct pl_wait {
	_Atomic uint64_t word;
	struct coprof_ctx *ctx;
	uint32_t depth;
	uint32_t gen;
	uintptr_t pcs[PL_SAMPLE_DEPTH + PL_SAMPLE_SKIP];
};
#define PL_WAIT_USED (1ull << 63)
#define PL_WAIT_GEN_SHIFT 40
#define PL_WAIT_TICKS ((1ull << PL_WAIT_GEN_SHIFT) - 1)

enum pl_timer_id {
	PL_TIMER_MONO = 1, /* wall: CLOCK_MONOTONIC, periodic at the rate */
	PL_TIMER_CPU = 2,  /* cpu without perf events: the thread's CPU clock, periodic */
};

/* si_code of a SIGTRAP sent by a perf event opened with sigtrap=1 (Linux 5.13). */
#define PL_TRAP_PERF 6
/* The sig_data of our events, which the kernel hands back in the siginfo: a SIGTRAP
 * without it is not ours and goes to whoever had SIGTRAP before. */
#define PL_PERF_COOKIE 0x636f70726f66ull /* +1: the context-switch event (wall) */

/* What a perf event's descriptor was opened on. Perf events share one anonymous inode
 * with eventfd, timerfd and the like, so the event's own id tells ours apart. */
struct pl_event_id {
	dev_t dev;
	ino_t ino;
	uint64_t id; /* PERF_EVENT_IOC_ID */
};

struct pl_sthread {
	struct pl_sthread *next; /* the list of threads, under the sampler's mutex */
	struct coprof_thread *thread;
	struct pl_tls *tls;
	pid_t tid;
	timer_t mono, cpu;
	int has_mono, has_cpu;
	/* The thread's task-clock event and (wall) context-switch event, -1 when it has
	 * none; owned by identity (pl_event_ours): the program may close the number and
	 * reuse it. Written by the thread and, under the list's lock, by the folding
	 * thread when it opens an event again (perf_id first, then the number). */
	volatile sig_atomic_t perf_fd;
	volatile sig_atomic_t wake_fd;
	struct pl_event_id perf_id, wake_id;
	atomic_int dead; /* the thread exited: fold what is left, then free */

	uintptr_t own_lo, own_hi;  /* the thread's own stack; own_hi 0: not known */
	struct pl_fstack *fstacks; /* the folding thread's: stacks found in its samples */

	/* Written by the handler only. CPU times are the thread's CPU clock's. */
	uint64_t cpu_last;     /* ns of CPU time at the last tick counted; 0: none yet */
	uint64_t carry;	       /* wall: ns of ticks deferred because of a switch */
	uint64_t wall_last;    /* wall, perf: ns of CLOCK_MONOTONIC at the last tick */
	uint64_t cpu_wall;     /* wall, perf: ns of CPU time at the last tick */
	uint64_t wall_acc;     /* wall, perf: ns not yet counted in whole ticks */
	uint64_t rng;	       /* perf: xorshift state, never 0 */
	uint64_t due;	       /* perf: ns of CPU time when the next draw's tick is due */
	uint32_t undrawn;      /* perf: run ticks until the next draw (0: the first) */
	atomic_int rebase;     /* set by start: forget cpu_last and carry */
	uint32_t switch_ticks; /* ticks in a row that found in_switch set */

	_Atomic(struct coprof_ctx *) cur; /* the running context, set by the hook */
	_Atomic uint64_t ticks;		  /* wall ticks seen while sampling */
	_Atomic uint64_t deferred, dropped, truncated, failed; /* counters, see sampler.c */
	_Atomic uint64_t py_failed; /* Python frames that could not be read whole */

	/* Byte counts, modulo 2^32: a record is written at head and read at tail. */
	_Atomic uint32_t head; /* producer */
	_Atomic uint32_t tail; /* folding thread */
	_Alignas(struct pl_rec) unsigned char ring[PL_RING_BYTES];

	/* The folding thread's: ticks held back for the adapter's claim (pl_rec's
	 * new_coro), oldest first; at most PL_HELD_MAX. */
	struct pl_rec *held;
	uint32_t nheld, held_cap;

	struct pl_wait *waits;	 /* PL_WAIT_SLOTS, allocated at the first switch (wall) */
	_Atomic uint32_t nwaits; /* slots ever used: scans stop there */
	uint64_t epoch;		 /* sampler epoch the waits belong to */
};

/* Set once by pl_sampler_init; read-only afterwards. */
struct pl_sampler_conf {
	int signo;	   /* the tick signal: SIGTRAP under perf, else a real-time one */
	int wall;	   /* COPROF_CLOCK=wall */
	int perf;	   /* cpu: ticks from a perf task-clock event per thread */
	int perf_user;	   /* perf events may not watch the kernel (exclude_kernel) */
	int cpu_timer;	   /* cpu without perf events: the CPU-time timer alone */
	uint64_t period;   /* ns between ticks */
	uintptr_t self_lo; /* the text of libcoprof-preload.so, skipped in wait stacks */
	uintptr_t self_hi;
	uintptr_t asan_lo;   /* the sanitizer runtime's text, whose swapcontext */
	uintptr_t asan_hi;   /* interceptor may call ours: skipped too */
	uintptr_t switch_pc; /* libc's swapcontext: cpu ticks mid-switch are charged there */
	/* The code of libc's swapcontext [0] and setcontext [1]: a tick there is mid-switch
	 * (its stack pointer may be the target's already). Empty when not found. */
	uintptr_t libc_switch_lo[2], libc_switch_hi[2];
};
extern PL_HIDDEN struct pl_sampler_conf pl_sconf;
/* Nonzero: under cpu, never use perf events (tests and benches of the fallback). */
extern PL_HIDDEN int pl_sampler_force_timer;
extern PL_HIDDEN atomic_int pl_sampler_on;	    /* ticks are counted */
/* The calling thread's state (pl_sampler_self), NULL when it is not sampled. */
extern PL_HIDDEN __thread struct pl_sthread *pl_sampler_tls PL_TLS;
extern PL_HIDDEN _Atomic uint64_t pl_sampler_epoch; /* bumped by every start */

/* The engine thread of the sampled thread whose kernel id is `tid`, NULL when no
 * sampled thread has it (the shim's own threads). Any thread, outside any signal. */
PL_HIDDEN struct coprof_thread *pl_sampler_thread_of(pid_t tid);

/* Nonzero once the process may run under a seccomp filter (sampler.c's sandbox): from
 * then on the sampler makes no system call the program may not expect (no period
 * ioctl, no CPU-clock read in the handler, no event for a new thread). */
extern PL_HIDDEN atomic_int pl_sampler_sandboxed;
/* sampler-signal.c: installs the tick handler on pl_sconf.signo. */
PL_HIDDEN int pl_sampler_install_handler(void);
/* Nonzero while the tick signal's handler is still ours (the program may take the
 * signal for itself later). */
PL_HIDDEN int pl_sampler_handler_is_ours(void);

/* sampler-stack.c: the calling thread's tick stack, mapped (and made its alternate
 * signal stack where it has none) by pl_tick_stack_start, outside any signal, and
 * unmapped by pl_tick_stack_exit; both idempotent (pl_tick_stack_run, the tick
 * handler's, is in signal-safe.h). pl_tick_stack_holds: whether `sp` is on the calling
 * thread's. pl_tick_stack_owns and pl_tick_stack_program_set answer the sigaltstack
 * interposer (struct pl_runtime's altstack_*: the sampler's runtime). */
PL_HIDDEN void pl_tick_stack_start(void);
PL_HIDDEN void pl_tick_stack_exit(void);
PL_HIDDEN int pl_tick_stack_holds(uintptr_t sp);
PL_HIDDEN int pl_tick_stack_owns(const stack_t *ss);
PL_HIDDEN void pl_tick_stack_program_set(int own);
/* The kernel's sigaltstack, past the shim's interposer. */
PL_HIDDEN int pl_real_sigaltstack(const stack_t *ss, stack_t *old);

/* sampler-wait.c: charges the suspended coroutines of `st` the ticks they waited
 * since they were last charged. Folding thread only. */
PL_HIDDEN void pl_sampler_charge_waits(struct pl_sthread *st);
/* A Python task's wait of `ns` at `keys` (innermost first), charged to engine thread
 * `t`, the task's; from any thread outside any signal (runtime/python-loader.c).
 * Under wall only. */
PL_HIDDEN void pl_sampler_wait_record(struct coprof_thread *t, struct coprof_ctx *ctx,
				      const uintptr_t *keys, unsigned n, uint64_t ns);
/* Frees the wait slot of `ctx` in `st`, from any thread: the coroutine runs elsewhere. */
PL_HIDDEN void pl_sampler_drop_wait(struct pl_sthread *st, const struct coprof_ctx *ctx);

static inline int pl_pc_is_ours(uintptr_t pc)
{
	return pc >= pl_sconf.self_lo && pc < pl_sconf.self_hi;
}

/* The depth of a stack (innermost first) without the shim's own frames at its root: a
 * coroutine's entry runs under the ucontext adapter's trampoline (and glibc's
 * __start_context under it), a thread's function under the shim's thread start, and
 * the program's stack starts at its own function. Frames of ours at the leaf end (the
 * program called into the shim) stay, but when they are such a start itself (a tick
 * before the program's function began, or after it returned): 0, nothing of the
 * program's. */
static inline uint32_t pl_stack_user_depth(const uintptr_t *pcs, uint32_t depth)
{
	for (uint32_t i = 1; i < depth; i++)
		if (pl_pc_is_ours(pcs[i]) && !pl_pc_is_ours(pcs[i - 1]))
			return i;
	for (uint32_t i = 0; i < depth && pl_pc_is_ours(pcs[i]); i++)
		if (pcs[i] - (uintptr_t)__start_pl_start_code <
		    (uintptr_t)(__stop_pl_start_code - __start_pl_start_code))
			return 0;
	return depth;
}

/* The bytes a record takes in the ring (a multiple of 8). */
static inline uint32_t pl_rec_size(const struct pl_rec *rec)
{
	return (uint32_t)(offsetof(struct pl_rec, pcs) + rec->depth * sizeof(rec->pcs[0]));
}

/* Where the record at byte count `at` starts: a record is whole in the ring, so where
 * less than the largest one fits before the end, the next starts over at its start.
 * Producer and consumer both skip that rest, so no marker is written there. */
static inline uint32_t pl_ring_start(uint32_t at)
{
	uint32_t left = PL_RING_BYTES - at % PL_RING_BYTES;
	return left < sizeof(struct pl_rec) ? at + left : at;
}

/* The ring, for the producers: room for the largest record, or NULL when the ring is
 * too full. A tick stores a few dozen frames, not PL_SAMPLE_DEPTH: the ring holds
 * thousands of them. */
static inline struct pl_rec *pl_ring_reserve(struct pl_sthread *st)
{
	uint32_t at = pl_ring_start(atomic_load_explicit(&st->head, memory_order_relaxed));
	uint32_t t = atomic_load_explicit(&st->tail, memory_order_acquire);
	if ((uint32_t)(at + (uint32_t)sizeof(struct pl_rec) - t) > PL_RING_BYTES)
		return NULL; /* (in 32 bits: the counts wrap every 4 GB of records) */
	return (struct pl_rec *)(void *)&st->ring[at % PL_RING_BYTES];
}

/* The folding thread's: the record at byte count *t, which moves past the ring's
 * unused end; the next is pl_rec_size of it further (read that before the fold cuts
 * the record's frames). */
static inline struct pl_rec *pl_ring_at(struct pl_sthread *st, uint32_t *t)
{
	*t = pl_ring_start(*t);
	return (struct pl_rec *)(void *)&st->ring[*t % PL_RING_BYTES];
}

/* Hands the record filled since pl_ring_reserve to the folding thread. */
static inline void pl_ring_publish(struct pl_sthread *st, const struct pl_rec *rec)
{
	uint32_t at = pl_ring_start(atomic_load_explicit(&st->head, memory_order_relaxed));
	atomic_store_explicit(&st->head, at + pl_rec_size(rec), memory_order_release);
}

/* The coroutine's entry on a stack walked to its end (pcs innermost first): the
 * outermost function of the program's own, past a runtime's frames under it; when that
 * is the stack's bottom frame (a start routine), the function it called, and *bottom is
 * set. NULL: no frame of the program's own. A name of pl_syms's (stack-sampled.c). */
PL_HIDDEN const char *pl_stack_entry(const uintptr_t *pcs, uint32_t depth, int *bottom);
/* stack-sampled.c, on the folding thread: the context of a sample `rec` took
 * on a stack nobody follows (rec->sp set), found from its outermost frame and made on
 * first sight; NULL: the thread's own (its own stack, or a stack with no frame of the
 * program's, the runtime's own). `depth` is the record's depth without the shim's
 * frames. pl_stack_fold_free forgets the thread's stacks. */
PL_HIDDEN struct coprof_ctx *pl_stack_fold(struct pl_sthread *st, const struct pl_rec *rec,
					   uint32_t depth);
PL_HIDDEN void pl_stack_fold_free(struct pl_sthread *st);
/* The fiber of `rec` (rec->fiber) gets a name from its stack: the outermost function of
 * the program's own on it (Boost's templates under it skipped). */
PL_HIDDEN void pl_stack_fold_name(const struct pl_rec *rec, uint32_t depth);
/* The fold's name for `s` becomes its name (the context's too); on the thread that
 * runs `s`, outside signal handlers (the fcontext adapter, at a switch). */
PL_HIDDEN void pl_stack_take_fold_name(struct pl_stack *s);

/* sampler-python.c: Python frames (see there). The adapter's frame reader, NULL
 * outside CPython or without an adapter (runtime/python-loader.c sets it). */
extern PL_HIDDEN pl_py_sample_fn pl_sampler_python;
/* The adapter's fold callback (asyncio tasks), called at each fold; NULL: none. */
extern PL_HIDDEN void (*pl_sampler_python_fold)(void);
/* The adapter's callback after each fold, outside the fork lock (it may take the GIL);
 * NULL: none. */
extern PL_HIDDEN void (*pl_sampler_python_after_fold)(void);
/* The adapter's claim of a held tick (struct pl_py_adapter's claim); NULL: none. */
extern PL_HIDDEN int (*pl_sampler_python_claim)(uintptr_t coro, uintptr_t root_key, unsigned gen,
						struct coprof_ctx **out);
/* Finds the interpreter's text and its eval loop (constructor). */
PL_HIDDEN void pl_sampler_python_init(void);

/* The executable segment of the module that holds `at`: fills lo and hi and returns
 * 1, or 0 when no module holds it (sampler.c). Not async-signal-safe. */
struct pl_text_range {
	uintptr_t at;
	uintptr_t lo, hi;
};
PL_HIDDEN int pl_text_range(struct pl_text_range *r);

/* unwind.c: libunwind, loaded for the sampler's own walks and kept out of the program's
 * way. pl_unw_load loads it into the process without adding its symbols to the global
 * scope, and has the signal guard pass the masks libunwind's own code asks for. 0, or
 * -1 (said on stderr once: samples then keep the interrupted pc alone). Not in a signal
 * handler. The walks themselves are in signal-safe.h. */
PL_HIDDEN int pl_unw_load(void);
/* The fork gate (unwind.c): no fork may leave a child libunwind's or the loader's locks
 * held by a walk of another thread. In the sampler's fork-prepare handler,
 * pl_unw_fork_shut turns new walks away and waits (1 s at most) for those under way to
 * end: 1 when they did, else 0. After the fork the parent
 * calls pl_unw_fork_parent: walks run again. The child calls pl_unw_fork_child: 0 when
 * walks run again; -1 when a walk was under way at the fork (here or in an ancestor):
 * then no walk runs in this process ever (samples keep the interrupted pc alone), nor
 * in its children. Async-signal-safe (fork may be called in a signal handler). */
PL_HIDDEN int pl_unw_fork_shut(void);
PL_HIDDEN void pl_unw_fork_parent(void);
PL_HIDDEN int pl_unw_fork_child(void);

/* --- the sampler, for the layers above (sampler.c, sampler-wait.c) ------------------- */

/* At start (runtime/): in sample mode, chooses the tick source, installs the tick
 * handler and registers the sampler's runtime. 0 when it has nothing to do. */
PL_HIDDEN int pl_sampler_init(void);
/* For `coprof attach` (lifecycle/attach.c): the same set-up from a helper thread,
 * which is not sampled; then each thread to sample calls pl_sampler_thread_here. */
PL_HIDDEN int pl_sampler_init_attached(void);
PL_HIDDEN int pl_sampler_thread_here(void); /* 0: the thread is sampled, -1: not */
/* Called by the runtimes on the switching thread, outside any signal, just before
 * every switch from context `from` to `to` (NULL: the thread's own context), with
 * pl_tls()->in_switch already set. In sample mode under wall the sampler captures the
 * stack `from` suspends at here; otherwise it returns at once. (A switch seen after the
 * fact: pl_sampler_switch_left, signal-safe.h.) */
PL_HIDDEN void pl_sampler_switch(struct coprof_ctx *from, struct coprof_ctx *to);
/* Called by the runtimes when context `c` finishes (outside any signal): a finished
 * coroutine no longer waits, so the sampler stops charging it, and the thread counts
 * as back in its own context. When the context resumed next is a coroutine, follow
 * with pl_sampler_switch(NULL, next). (A coroutine that moved: pl_sampler_moved,
 * signal-safe.h.) */
PL_HIDDEN void pl_sampler_finish(struct coprof_ctx *c);

#endif
