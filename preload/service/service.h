/* service.h: what the shim's mechanisms stand on, above its state (state.h): its own
 * file descriptors, the signal guard, the symbolizer, the program's threads, seccomp
 * and vfork, the lock-free address map, the stack records, and the registry every
 * runtime plugs into. Each runs in whichever thread calls it; what may run in a signal
 * handler is declared in signal-safe.h. */
#ifndef PL_SERVICE_H
#define PL_SERVICE_H

#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "state/state.h"

/* --- the shim's own file descriptors, owned by identity rather than by number (fd.c).
 * A program may close every descriptor it does not know (a daemon's close-all loop,
 * close_range) and reuse the numbers. So the shim keeps its descriptors at high numbers,
 * close-on-exec, remembers the device and inode each one was opened on, and before it
 * writes, reads or closes one checks that the number still names that object. ------ */

#define PL_FD_FLOOR 512 /* the lowest number the shim asks for (less under a low limit) */

struct pl_fd {
	volatile sig_atomic_t fd; /* -1: none */
	dev_t dev;		  /* what fstat said when the shim took it */
	ino_t ino;
};
#define PL_FD_NONE                                                                                 \
	{                                                                                          \
		.fd = -1                                                                           \
	}

/* Takes `fd`, just opened by the shim: moves it to a free number at or above the floor
 * (close-on-exec) and records what it is. The original number is closed. On failure to
 * move it, the original number is kept. 0 or -errno (then `fd` is closed and f is
 * none). Not for signal handlers. */
PL_HIDDEN int pl_fd_adopt(struct pl_fd *f, int fd);
/* Closes f's number only if it still names the object adopted (in a forked child too:
 * a number the program reused is never closed); f is none afterwards. */
PL_HIDDEN void pl_fd_close(struct pl_fd *f);

/* --- the interposers bound into a running program (bind.c) ------------------------ */

/* A name to bind; pl_bind fills in the shim's function of that name (NULL: none) and
 * how many entries it pointed at it. */
struct pl_bind_name {
	const char *name;
	void *ours;
	unsigned bound;
};
/* Points every loaded object's GOT entries for the names at the shim's functions (not
 * the shim's own, the loader's or the vDSO's). 0, or the -errno of the first entry it
 * could not write (the others are bound all the same). */
PL_HIDDEN int pl_bind(struct pl_bind_name *names, size_t n);
/* pl_bind again when the loader has added objects since the count *adds (0 at first),
 * which it moves on: the objects loaded since are bound. 0 when none were added. */
PL_HIDDEN int pl_bind_new(struct pl_bind_name *names, size_t n, unsigned long long *adds);

/* --- the signal guard (signal-guard.c): signals the shim owns ------------------------ */

/* pl_sig_guard keeps `signo` (whose handler the caller has just installed) the shim's:
 * the program's later resets and masks only change what it is told (`prog` at first),
 * and SIG_IGN too when `ign_is_view`. When the program installs a handler of its own,
 * `lost(signo)` runs (it says so on stderr and stops using the signal; maybe in a
 * signal handler, so async-signal-safe) and the program's handler goes in. 0 or
 * -errno. */
PL_HIDDEN int pl_sig_guard(int signo, const struct sigaction *prog, int ign_is_view,
			   void (*lost)(int signo));
/* The kernel's sigaction, past the shim's own interposer. */
PL_HIDDEN int pl_sig_real_action(int signo, const struct sigaction *act, struct sigaction *oact);
/* Blocks every signal in the calling thread, guarded ones too (around creating a thread
 * of the shim's, which inherits the mask); pl_sig_restore puts `old` back. */
PL_HIDDEN void pl_sig_block_all(sigset_t *old);
PL_HIDDEN void pl_sig_restore(const sigset_t *old);
/* Masks asked for by code in [lo, hi) (libunwind's text: it blocks every signal around
 * its lock, for the shim or for the program) pass the guard untouched. */
PL_HIDDEN void pl_sig_raw_masks_from(uintptr_t lo, uintptr_t hi);
/* In a forked child, forgets a view change another thread was making. */
PL_HIDDEN void pl_sig_after_fork_child(void);
/* Notes the handlers installed now, as the interposers note those installed later
 * (pl_sig_maybe_in_handler's evidence): for a shim attached to a running program,
 * whose handlers went in before it. */
PL_HIDDEN void pl_sig_note_handlers(void);
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1U << 31) /* <linux/signal.h>; glibc 2.36 has no name for it */
#endif

/* --- the symbolizer (symbols.c): code addresses of this process as pstats keys (file,
 * line, name). DWARF via libdw (dwfl) for the executable and every shared library, PIE
 * or not; without debug info the ELF symbol table gives (module path, 0, symbol); an
 * address inside a module but in no symbol gives (module path, 0, "0x<offset>").
 * Results are cached. Thread-safe (one mutex); used at dump time by the engine's
 * resolver call, by the adapters to name coroutines and by the sampler for pcs. ----- */

struct pl_symbols;
/* The process's symbolizer, made by the constructor; NULL when it could not be. */
extern PL_HIDDEN struct pl_symbols *pl_syms;

PL_HIDDEN int pl_symbols_new(struct pl_symbols **out);
PL_HIDDEN void pl_symbols_free(struct pl_symbols *s);
/* The function at `pc`: 0 and *out (strings owned by `s`, valid while it lives), or
 * -ENOENT when nothing is known at that address. */
PL_HIDDEN int pl_symbols_lookup(struct pl_symbols *s, uintptr_t pc, struct coprof_func_info *out);
/* A coprof_resolve_fn over a struct pl_symbols (arg). */
PL_HIDDEN int pl_symbols_resolve(void *arg, uintptr_t key, struct coprof_func_info *out);
/* Around fork: the child must not inherit the mutex held. */
PL_HIDDEN void pl_symbols_lock(struct pl_symbols *s);
PL_HIDDEN void pl_symbols_unlock(struct pl_symbols *s);

/* --- the program's threads (threads.c) ---------------------------------------------- */

/* Runs in the constructor, on the main thread: the last program thread to exit ends
 * the process, as glibc would have. */
PL_HIDDEN void pl_threads_init(void);

/* --- the lock-free address map (addrmap.c): from an address to a pointer, for the
 * runtime adapters' switch paths (a ucontext_t or an fcontext handle to what runs
 * there). Open addressing with linear probing, bounded; a key, once in, is never taken
 * out, only given another value. Readers and writers run in any thread, in signal
 * handlers too, once the table exists: only pl_addrmap_make allocates. pl_addrmap_put
 * is in signal-safe.h. ------------------------------------------------------------ */

#define PL_ADDRMAP_PROBE 512 /* slots looked at for one key, at most */

struct pl_addrmap_slot {
	_Atomic uintptr_t key; /* 0: empty */
	_Atomic(void *) val;
};

struct pl_addrmap {
	struct pl_addrmap_slot *_Atomic slots; /* NULL until pl_addrmap_make */
	size_t mask;			       /* slots - 1, a power of two less one */
	const char *full;		       /* said once when a key finds no slot */
	atomic_int said_full;
};

/* Makes the table, once, whichever thread asks first: large enough for glibc to mmap
 * it, so pages are only touched when used. 0, or -1 when out of memory. Not in a
 * signal handler. */
PL_HIDDEN int pl_addrmap_make(struct pl_addrmap *m);

/* The table exists. */
static inline int pl_addrmap_ready(struct pl_addrmap *m)
{
	return atomic_load_explicit(&m->slots, memory_order_acquire) != NULL;
}

static inline size_t pl_addrmap_hash(uintptr_t k, size_t mask)
{
	return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 40) & mask;
}

/* async-signal-safe: the value of `k`; NULL when `k` is not in (or is 0, or there is no
 * table). */
static inline void *pl_addrmap_get(struct pl_addrmap *m, uintptr_t k)
{
	struct pl_addrmap_slot *s = atomic_load_explicit(&m->slots, memory_order_acquire);
	if (!s || !k)
		return NULL;
	size_t i = pl_addrmap_hash(k, m->mask);
	for (int n = 0; n < PL_ADDRMAP_PROBE; n++, i = (i + 1) & m->mask) {
		uintptr_t cur = atomic_load_explicit(&s[i].key, memory_order_acquire);
		if (cur == k)
			return atomic_load_explicit(&s[i].val, memory_order_acquire);
		if (cur == 0)
			return NULL;
	}
	return NULL;
}

/* --- the stack records (stacks.c): one per stack a context runs on that no ucontext
 * names, found from the stack pointer by the __cyg hooks (runtime/adapter-stack.c) or
 * made by the fcontext adapter for make_fcontext stacks; the sampler reads them at a
 * tick and names fibers from its samples (sampler/stack-sampled.c). Written by the
 * thread that runs on them, on its call and switch paths. ------------------------- */

#define PL_STACK_FNS 32 /* instrumented frames kept per detected stack (sample mode) */

/* One stack a context runs on, and the context now running on it. A record outlives its
 * context: a stack the runtime reuses gets the next context on the same record. */
struct pl_stack {
	uintptr_t lo, hi;    /* bytes [lo, hi): the stack's bounds, known or estimated */
	const char *runtime; /* "fcontext", or "stack" for one found from the stack pointer */
	uint64_t id;	     /* the task id of the context now on it */
	int finished;	     /* that context has ended; the next one on it starts a new one */
	int detected;	     /* found from the stack pointer: its root frame returning ends it */
	uintptr_t root_sp;   /* detected: the hooks' frame address at its root's call; a
			      * return seen there ends the context (UINTPTR_MAX: never) */
	void *fn;	     /* fcontext: the entry function make_fcontext was given */
	int naming;	     /* fcontext: named after its entry until a function of the program's
			      * own runs on it (the slow path sees its first calls) */
	int tries;	     /* calls looked at for a name */
	/* fcontext, no hooks (sample mode): the first function of the program's own the
	 * folding thread saw on its samples, taken as its name at the next switch */
	const char *fold_name;
	const char *name;
	char namebuf[24];
	/* sample mode, detected stacks: the instrumented functions entered on it and not
	 * left, outermost first (nfns counts past PL_STACK_FNS): where its context waits
	 * once the thread has left the stack (the sampler's wait stack under wall) */
	uint32_t nfns;
	uintptr_t fns[PL_STACK_FNS];
	/* the engine context, valid for one profiler (a forked child has its own) and one
	 * thread (a fiber that moves to another thread gets another) */
	struct coprof_ctx *ctx;
	struct coprof *ctx_prof;
	struct coprof_thread *ctx_thread;
	struct pl_stack *next_all;  /* every record ever made, for leak checkers */
	struct pl_stack *next_seen; /* detected stacks: the thread's list */
};

/* The calling thread's running stack context beyond struct pl_native_tls: the bounds
 * of the stack it runs on (an event outside them takes the slow path) and the record,
 * NULL on the thread's own stack or a ucontext coroutine. */
struct pl_stack_tls {
	/* (the running stack's bounds and root: struct pl_tls's stack_* fields) */
	struct pl_stack *cur;
	uintptr_t own_lo, own_hi; /* the thread's own stack; own_hi 0: not read yet */
	struct pl_stack *seen;	  /* detected stacks met on this thread, newest first */
	struct pl_stack *fnext;	  /* fcontext: the record the last jump went to */
	struct pl_stack *fprev;	  /* fcontext: the context the last jump left */
	void *ontop_fn;		  /* fcontext: the program's function ontop_fcontext runs */
	int ontop_done;		  /* the resumed jump's handle was already recorded */
};
extern PL_HIDDEN __thread struct pl_stack_tls pl_stls PL_TLS;

/* A new record, or NULL (out of memory). Never in a signal handler. */
PL_HIDDEN struct pl_stack *pl_stack_new(void);
/* A fresh task id, shared by every runtime of the shim's stack contexts. */
PL_HIDDEN uint64_t pl_stack_next_id(void);
/* Whether `s` has a context in this process's engine on thread `th`. */
PL_HIDDEN int pl_stack_owns_ctx(const struct pl_stack *s, const struct coprof_thread *th);
/* Whether a function comes from the program's sources rather than a system header or
 * library (a template of Boost's instantiated in the program, libst). */
PL_HIDDEN int pl_stack_own_function(const struct coprof_func_info *info);

#ifndef PL_NO_STACK_CHECK
/* The hot-path test of the __cyg hooks: nonzero when `sp` is off the running stack. */
static inline int pl_stack_off(uintptr_t sp)
{
	return sp - pl_tls_data.stack_lo >= pl_tls_data.stack_span;
}

/* The leave hook's test: nonzero when the frame at `sp` is a detected stack's root. */
static inline int pl_stack_root_left(uintptr_t sp)
{
	return sp >= pl_tls_data.stack_root_sp;
}
#else
/* -DPL_NO_STACK_CHECK: both compares compiled out, the baseline that
 * bench/native/stack-check.py times the hooks against (issue 13's 3 ns budget). Switches
 * no adapter reports are not followed then: never a build to profile with. */
static inline int pl_stack_off(uintptr_t sp)
{
	(void)sp;
	return 0;
}

static inline int pl_stack_root_left(uintptr_t sp)
{
	(void)sp;
	return 0;
}
#endif

/* Sample mode: the hook event (entering `fn`, else leaving it) on detected stack `s`. */
static inline void pl_stack_track(struct pl_stack *s, uintptr_t fn, int enter)
{
	if (enter) {
		if (s->nfns < PL_STACK_FNS)
			s->fns[s->nfns] = fn;
		s->nfns++;
	} else if (s->nfns) {
		s->nfns--;
	}
}

/* The running context is now `s` (NULL: none of ours), on the stack [lo, hi); lo == hi:
 * the bounds are unknown and the next event finds them. For the adapters' switches. */
static inline void pl_stack_set(struct pl_stack *s, uintptr_t lo, uintptr_t hi)
{
	pl_stls.cur = s;
	pl_tls_data.stack_root_sp = s && s->detected ? s->root_sp : UINTPTR_MAX;
	pl_tls_data.stack_lo = lo;
	pl_tls_data.stack_span =
	    s && s->naming ? 0 : hi - lo; /* 0: each event takes the slow path */
}

/* --- the runtime registry (runtimes.c): the one interface every runtime plugs in
 * through, the native adapters (runtime/), the sampler and the Python loader alike ---- */

/* A runtime. Every callback is optional. start/stop run on the control thread (or, for
 * python, where the adapter says); thread_early in a new thread before its engine
 * thread is registered (it may not allocate what registering would), thread_start and
 * thread_exit in the thread concerned; after_fork_child runs in the child right after
 * fork. fork_pause stops a thread of the runtime's own for the length of a Python
 * os.fork (so Python does not count it) and returns its kernel id (0: none stopped),
 * once joined; fork_resume starts it again, unless it runs (in a child it may
 * already). sandbox: the program is about to install a seccomp filter (`how` says how
 * it was seen), never in a signal handler. A runtime that holds the thread's alternate
 * signal stack (the sampler's tick stack) answers altstack_owns (whether `ss`, the
 * thread's alternate stack as the kernel reports it, is its own) and hears
 * altstack_program_set (the program set an alternate stack of its own, `own` 1, or
 * disabled it, 0), for the sigaltstack interposer. */
struct pl_runtime {
	const char *name;
	/* One of the shim's adapters of native code, registered in every process: not a
	 * runtime found in this one (the exit note about missing instrumentation). */
	int native;
	int (*start)(void);
	int (*stop)(void);
	void (*thread_early)(void);
	void (*thread_start)(void);
	void (*thread_exit)(void);
	void (*after_fork_child)(void);
	pid_t (*fork_pause)(void);
	void (*fork_resume)(void);
	void (*sandbox)(const char *how);
	int (*altstack_owns)(const stack_t *ss);
	void (*altstack_program_set)(int own);
};
PL_HIDDEN void pl_runtime_add(const struct pl_runtime *rt);
/* The registered runtimes' callbacks: start, thread_early, thread_start, thread_exit,
 * after_fork_child and fork_resume in the order of registration; stop and fork_pause
 * in the reverse. pl_runtimes_fork_pause waits for each thread stopped to be gone. */
PL_HIDDEN void pl_runtimes_start(void);
PL_HIDDEN void pl_runtimes_stop(void);
PL_HIDDEN void pl_runtimes_thread_early(void);
PL_HIDDEN void pl_runtimes_thread_start(void);
PL_HIDDEN void pl_runtimes_thread_exit(void);
PL_HIDDEN void pl_runtimes_after_fork_child(void);
PL_HIDDEN void pl_runtimes_fork_pause(void);
PL_HIDDEN void pl_runtimes_fork_resume(void);
PL_HIDDEN void pl_runtimes_sandbox(const char *how);
/* The runtime holding the calling thread's alternate signal stack, when `ss` is it. */
PL_HIDDEN const struct pl_runtime *pl_runtimes_altstack_owner(const stack_t *ss);
/* Tells every runtime that holds alternate stacks what the program did with its own. */
PL_HIDDEN void pl_runtimes_altstack_program_set(int own);
/* A runtime found in this process that the shim does not follow, having said why on
 * stderr (the CPython adapter refused an engine of another layout): it counts as found,
 * so the exit note about missing instrumentation is not said as well. */
PL_HIDDEN void pl_runtime_refused(void);
/* Runtimes found in this process, the native adapters aside (and those refused). */
PL_HIDDEN int pl_runtimes_found(void);
/* Whether a runtime of this name is registered. */
PL_HIDDEN int pl_runtime_on(const char *name);
/* pthread_join returns once the kernel has cleared the thread's id, a moment before it
 * stops counting the thread in /proc/self/stat (what Python counts): waits for that
 * too, but never more than about 100 ms. */
PL_HIDDEN void pl_wait_thread_gone(pid_t tid);

#endif
