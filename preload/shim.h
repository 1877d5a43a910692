/* shim.h: what the parts of libcoprof-preload.so share.
 *
 * The shim (shim.c) reads the environment once in its constructor, creates the
 * process's profiler and starts a control thread (control.c) that toggles and dumps.
 * Runtime adapters (instrument, ucontext, sampler, python) plug in through
 * struct pl_runtime. Everything here is internal: the library is built
 * -fvisibility=hidden and exports only its hooks. */
#ifndef PL_SHIM_H
#define PL_SHIM_H

#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "coprof.h"

#define PL_HIDDEN __attribute__((visibility("hidden")))

/* The default sampling rate: what costs a busy thread under 1% on the VM coprof is
 * measured on (bench/RESULTS.md, "sample mode, default rate"); odd, so that ticks do
 * not fall in step with periodic work. */
#define PL_DEFAULT_HZ 99

struct pl_config {
	enum coprof_clock clock; /* COPROF_CLOCK: cpu|wall (default cpu) */
	enum coprof_mode mode;	 /* COPROF_MODE: trace|sample (default trace) */
	int signo;		 /* COPROF_SIGNAL: toggle signal (default SIGUSR2) */
	int start;		 /* COPROF_START: 1 profile from start, 0 wait for signal */
	unsigned hz;		 /* COPROF_HZ: sampling rate (default PL_DEFAULT_HZ) */
	int builtins;		 /* COPROF_BUILTINS: 1 to key C builtins in Python */
	int native;		 /* COPROF_NATIVE: sample mode, Python frames among the C ones */
	int py_hook;		 /* COPROF_PY_HOOK: PL_PY_HOOK_* (python/adapter.h) */
	char out[PATH_MAX];	 /* COPROF_OUT: path template, %p pid, %n dump number */
	uint64_t interval_ns;	 /* COPROF_INTERVAL: window length; 0: no windows */
	unsigned keep;		 /* COPROF_KEEP: newest files kept; 0: all */
};

/* Set once by the constructor; read-only afterwards. */
extern PL_HIDDEN struct pl_config pl_cfg;
/* The process's profiler; NULL when the configuration was bad or coprof is off. */
extern PL_HIDDEN struct coprof *pl_prof;

/* Per-thread state of the shim, in initial-exec TLS (cheap on the hot path). */
struct pl_tls {
	struct coprof_thread *thread;	 /* registered lazily by pl_thread() */
	int guard;			 /* nonzero while inside a hook: no re-entry */
	volatile sig_atomic_t in_switch; /* a context switch is under way (the sampler
					  * drops or defers ticks that land in it) */
	/* the frame address of the hook that set in_switch: a tick whose stack pointer is
	 * not below it (on that stack) comes after the switch, wherever it went */
	uintptr_t switch_sp;
	void *sampler; /* the sampler's per-thread state */
	/* nonzero while libunwind runs for the shim: its signal masks pass the signal
	 * guard untouched (signal-guard.c), its pipe goes to high numbers (fd.c) */
	volatile sig_atomic_t raw_masks;
	/* nonzero in a vfork child (vfork.c), which shares this thread's memory with the
	 * parent until it execs or exits: the shim leaves the parent's state alone */
	int vfork_child;
	/* The stack adapter's hot fields (runtime/stack/stack.h), here so that the __cyg
	 * hooks reach them from the same thread-local base as the rest: the bounds of the
	 * running context's stack [stack_lo, stack_lo + stack_span) (span 0: unknown, the
	 * next event checks), and the root frame of a detected stack (UINTPTR_MAX: none;
	 * 0 in a new thread). */
	uintptr_t stack_lo, stack_span, stack_root_sp;
};

PL_HIDDEN struct pl_tls *pl_tls(void);
/* The calling thread's engine thread, registered on first use; NULL if that failed. */
PL_HIDDEN struct coprof_thread *pl_thread(void);

/* A runtime adapter. Every callback is optional. start/stop run on the control
 * thread (or, for python, where the adapter says); thread_start/thread_exit run in the
 * thread concerned; after_fork_child runs in the child right after fork. fork_pause
 * stops a thread of the runtime's own for the length of a Python os.fork (so Python
 * does not count it) and returns its kernel id (0: none stopped), once joined;
 * fork_resume starts it again, unless it runs (in a child it may already). */
struct pl_runtime {
	const char *name;
	int (*start)(void);
	int (*stop)(void);
	void (*thread_start)(void);
	void (*thread_exit)(void);
	void (*after_fork_child)(void);
	pid_t (*fork_pause)(void);
	void (*fork_resume)(void);
};
PL_HIDDEN void pl_runtime_add(const struct pl_runtime *rt);
/* seccomp.c: the calling thread runs under a seccomp filter (async-signal-safe) */
PL_HIDDEN int pl_seccomp_filtered(void);

/* signal-guard.c: signals the shim owns. pl_sig_guard keeps `signo` (whose handler the
 * caller has just installed) the shim's: the program's later resets and masks only
 * change what it is told (`prog` at first), and SIG_IGN too when `ign_is_view`. When the
 * program installs a handler of its own, `lost(signo)` runs (it says so on stderr and
 * stops using the signal; maybe in a signal handler, so async-signal-safe) and the
 * program's handler goes in. 0 or -errno. */
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
/* The program's view of a guarded signal's disposition (what it last set, SIG_DFL or
 * SIG_IGN) into *out: 0, or -1 when the shim does not hold `signo` (any longer).
 * async-signal-safe. */
PL_HIDDEN int pl_sig_prog_action(int signo, struct sigaction *out);
/* A guarded signal that is not the shim's came while the program believes it blocked on
 * the calling thread: 1, and it is raised again to the thread when the program unblocks
 * it (as the kernel would have kept it pending); 0 when the program has it unblocked.
 * async-signal-safe. */
PL_HIDDEN int pl_sig_prog_defer(int signo);

/* sample/sampler-stack.c: the tick handler's own stack, per thread (in sample mode). The
 * kernel's sigaltstack, past the shim's interposer; whether `ss` (a thread's alternate
 * stack as the kernel reports it) is the calling thread's tick stack; whether `sp` is on
 * it. pl_tick_stack_program_set: the program set an alternate stack of its own (`own`
 * 1), or disabled it (0: the tick stack takes its place). */
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1U << 31) /* <linux/signal.h>; glibc 2.36 has no name for it */
#endif
PL_HIDDEN int pl_real_sigaltstack(const stack_t *ss, stack_t *old);
PL_HIDDEN int pl_tick_stack_owns(const stack_t *ss);
PL_HIDDEN int pl_tick_stack_holds(uintptr_t sp);
PL_HIDDEN void pl_tick_stack_program_set(int own);

/* One line on stderr, prefixed "coprof: ", written with write(2). */
PL_HIDDEN void pl_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Entry points of the optional parts, called from the shim's constructor. Each
 * returns 0 when it has nothing to do (not a Python process, not sample mode). */
PL_HIDDEN int pl_python_init(void);  /* python-loader.c */
PL_HIDDEN int pl_sampler_init(void); /* sampler.c */
/* A new thread, before anything is set up for it: under a seccomp filter (its
 * creator's), the sampler makes no system call the program may forbid from then on. */
PL_HIDDEN void pl_sampler_thread_check(void);
/* control.c, for the Python adapter's os.fork callbacks (python-loader.c), called
 * without the GIL: pause stops the shim's own threads before the fork; resume, in the
 * parent and in the child after it, starts them again. Pauses nest. */
PL_HIDDEN void pl_control_fork_pause(void);
PL_HIDDEN void pl_control_fork_resume(void);
/* Called by the ucontext adapter on the switching thread, outside any signal, just
 * before every switch from context `from` to `to` (NULL: the thread's own context),
 * with pl_tls()->in_switch already set. In sample mode under wall the sampler captures
 * the stack `from` suspends at here; otherwise it returns at once. */
PL_HIDDEN void pl_sampler_switch(struct coprof_ctx *from, struct coprof_ctx *to);
/* The same for a switch seen after the fact (the stack adapter, runtime/stack/): the
 * thread has left `from`'s stack already, which suspended at `pcs` (innermost first,
 * `depth` of them, what the hooks saw). Outside any signal, or in a handler. */
PL_HIDDEN void pl_sampler_switch_left(struct coprof_ctx *from, const uintptr_t *pcs, uint32_t depth,
				      struct coprof_ctx *to);
/* Called by the ucontext adapter when context `c` finishes (outside any signal): a
 * finished coroutine no longer waits, so the sampler stops charging it, and the thread
 * counts as back in its own context. When the context resumed next is a coroutine,
 * follow with pl_sampler_switch(NULL, next). */
PL_HIDDEN void pl_sampler_finish(struct coprof_ctx *c);
/* Called by the ucontext adapter when a coroutine whose context on its last thread was
 * `c` runs on another thread (outside any signal, or in a handler: no lock is waited
 * for): the thread it left stops charging it as waiting. */
PL_HIDDEN void pl_sampler_moved(struct coprof_ctx *c);

/* async-signal-safe. The context the interrupted stack pointer `sp` is on, when the
 * stack adapter (runtime/stack/) knows better than `cur`, what the switch hooks said:
 * a switch no adapter reported may have happened since the last instrumented call. */
PL_HIDDEN struct coprof_ctx *pl_stack_at_tick(uintptr_t sp, struct coprof_ctx *cur);

int pl_shim_dir(char *dir, size_t len);

#endif
