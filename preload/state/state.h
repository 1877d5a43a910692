/* state.h: the bottom of libcoprof-preload.so, what every layer above reads: the
 * configuration (config.c), the process's profiler and the flags that say whether it
 * records, the per-thread state the hooks test first, the real functions behind the
 * interposers, and the one way to say something (pl_say). state.c holds the data;
 * lifecycle/ writes it, the other layers read it. The layers: doc/design.md, "The
 * shim's layers". Everything here is hidden: the library exports only its hooks. */
#ifndef PL_STATE_H
#define PL_STATE_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <ucontext.h>

#include "coprof.h"
#include "signal-safe.h"

#define PL_HIDDEN __attribute__((visibility("hidden")))
#define PL_EXPORT __attribute__((visibility("default")))
#define PL_TLS __attribute__((tls_model("initial-exec")))
/* The functions a thread or coroutine of the program's starts in, around its own
 * function (the shim's thread start, the ucontext trampoline, the fcontext entry): in
 * one section, which the linker bounds with __start_/__stop_ symbols, so that a stack
 * sample tells a tick that fell in them, with no frame of the program's over them, from
 * the program calling into the shim (pl_stack_user_depth). */
#define PL_START_CODE __attribute__((section("pl_start_code"), noinline))
/* (weak: a test's library of the sampler alone has no such section; both are then 0) */
extern const char __start_pl_start_code[] __attribute__((weak)) PL_HIDDEN;
extern const char __stop_pl_start_code[] __attribute__((weak)) PL_HIDDEN;
#define pl_likely(x) __builtin_expect(!!(x), 1)
#define pl_unlikely(x) __builtin_expect(!!(x), 0)

/* --- the configuration (config.c): pure, so the viewer, coprof-keeper, the unit tests
 * and the fuzzer call it too ------------------------------------------------------- */

/* The default sampling rate: what costs a busy thread under 1% on the VM coprof is
 * measured on (bench/RESULTS.md, "sample mode, default rate"); odd, so that ticks do
 * not fall in step with periodic work. */
#define PL_DEFAULT_HZ 99

/* COPROF_PY_HOOK: how the Python adapter hears of calls. `profile`: a C profile
 * function on every thread state (every version); `monitoring`: sys.monitoring
 * callbacks under a tool id of coprof's own (3.12+); `evalframe`: a PEP 523
 * frame-evaluation function (3.10, 3.11; no C builtins); `auto`: the cheapest for the
 * version and settings (bench/RESULTS.md). */
enum pl_py_hook {
	PL_PY_HOOK_AUTO,
	PL_PY_HOOK_PROFILE,
	PL_PY_HOOK_MONITORING,
	PL_PY_HOOK_EVALFRAME,
};

struct pl_config {
	enum coprof_clock clock; /* COPROF_CLOCK: cpu|wall (default cpu) */
	enum coprof_mode mode;	 /* COPROF_MODE: trace|sample (default trace) */
	int signo;		 /* COPROF_SIGNAL: toggle signal (default SIGUSR2) */
	int start;		 /* COPROF_START: 1 profile from start, 0 wait for signal */
	unsigned hz;		 /* COPROF_HZ: sampling rate (default PL_DEFAULT_HZ) */
	int builtins;		 /* COPROF_BUILTINS: 1 to key C builtins in Python */
	int native;		 /* COPROF_NATIVE: sample mode, Python frames among the C ones */
	int py_hook;		 /* COPROF_PY_HOOK: enum pl_py_hook */
	char out[PATH_MAX];	 /* COPROF_OUT: path template, %p pid, %n dump number */
	uint64_t interval_ns;	 /* COPROF_INTERVAL: window length; 0: no windows */
	unsigned keep;		 /* COPROF_KEEP: newest files kept; 0: all */
	uint64_t stall_ns;	 /* COPROF_STALL_MS: a task step this long is a stall */
};

/* Reads every COPROF_* variable through `get` (getenv, or a test's table). On a bad
 * value returns -EINVAL and puts one line in err (no "coprof: " prefix, no newline);
 * *cfg then holds the defaults for what was not parsed yet. 0 when all are good. */
PL_HIDDEN int pl_config_parse(struct pl_config *cfg, const char *(*get)(const char *name),
			      char *err, size_t errlen);
/* The engine's options as the configuration gives them. */
PL_HIDDEN struct coprof_options pl_config_options(const struct pl_config *cfg);
/* COPROF_HZ and coprof record's --hz: a rate from PL_HZ_MIN to PL_HZ_MAX, the one
 * range check of it. CLOCK_MONOTONIC timers deliver up to about 10 kHz here. 0 or
 * -EINVAL. */
#define PL_HZ_MIN 1
#define PL_HZ_MAX 10000
PL_HIDDEN int pl_parse_hz(const char *s, unsigned *out);
/* The signal number for "USR2", "SIGUSR2", "12", "RTMIN+3"...; -EINVAL for anything
 * else, and for every signal but USR1, USR2 and the real-time ones (the program or
 * libc relies on them). "0" and "none" give 0 (no toggle signal). The one parser of
 * COPROF_SIGNAL and of coprof's --signal. */
PL_HIDDEN int pl_parse_signal(const char *s);
/* Tests only: sleeps the milliseconds (up to 10 s) the environment variable `name`
 * gives, where a test widens a race on purpose; nothing when it is unset. */
PL_HIDDEN void pl_test_pause(const char *name);
/* The path of dump number `n` (from 1) of process `pid` for template `tmpl`: %p is the
 * pid, %n the number, %% a percent sign. Without %n, dumps after the first get ".N"
 * before the extension; in a forked child (`child`), a template without %p gets
 * ".PID" the same way, so parent and child never share a file. 0 or -ENAMETOOLONG. */
PL_HIDDEN int pl_out_path(const char *tmpl, long pid, unsigned n, int child, char *buf, size_t len);

/* --- the toggle state (toggle-state.c): what `coprof toggle` and the shim's control
 * thread say to each other, with no file, socket or fd of its own in the profiled
 * process. Requests travel in the toggle signal: sigqueue(2) carries PL_REQ_* in
 * si_value (a plain kill(2) is a toggle). Answers travel in the control thread's name,
 * which any process of the same user reads in /proc/PID/task/TID/comm: the control
 * thread renames itself after each request it applied. Pure code, also built into
 * coprof. ------------------------------------------------------------------------ */

/* si_value.sival_int of a queued toggle signal */
enum pl_request {
	PL_REQ_TOGGLE = 1, /* start if stopped, stop (and write) if running */
	PL_REQ_START = 2,  /* start, or nothing if running */
	PL_REQ_STOP = 3,   /* stop and write, or nothing if stopped */
};

/* What the last stop did, and whether profiling runs. */
enum pl_toggle_run {
	PL_RUN_ON = 'R',      /* running */
	PL_RUN_OFF = 'S',     /* stopped: never started, or the last stop wrote a file */
	PL_RUN_EMPTY = 'E',   /* stopped: the last window recorded nothing, so no file */
	PL_RUN_FAILED = 'F',  /* stopped: the last file could not be written */
	PL_RUN_EXITING = 'X', /* the program exits: requests are no longer applied */
};

struct pl_toggle_state {
	int signo;	/* the armed toggle signal; 0: the program took it over */
	int run;	/* enum pl_toggle_run */
	int forked;	/* a forked child (its file names get .PID without %p) */
	unsigned seq;	/* requests applied, modulo PL_TS_SEQ_MOD */
	unsigned dumps; /* files written, modulo PL_TS_DUMPS_MOD (the last one's number) */
};

#define PL_TS_PREFIX "coprof"
#define PL_TS_SEQ_MOD (36u * 36u)
#define PL_TS_DUMPS_MOD (36u * 36u * 36u * 36u)
#define PL_TS_LEN 15 /* a thread name's length limit, without the NUL */

/* The thread name for `st`: "coprof" + 2-digit signal + run letter (lower case in a
 * forked child) + 2 base-36 digits of seq + 4 of dumps, e.g. "coprof12R0a0003". */
PL_HIDDEN void pl_toggle_state_format(const struct pl_toggle_state *st, char buf[16]);
/* The opposite; a trailing newline is allowed. 0, or -EINVAL for any other name. */
PL_HIDDEN int pl_toggle_state_parse(const char *name, struct pl_toggle_state *st);

/* --- the process's profiler and its flags (state.c) -------------------------------- */

/* Set once by the constructor; read-only afterwards. */
extern PL_HIDDEN struct pl_config pl_cfg;
/* The process's profiler; NULL when the configuration was bad or coprof is off. */
extern PL_HIDDEN struct coprof *pl_prof;
/* Set by the constructor when a profiler exists: hooks do nothing before that. */
extern PL_HIDDEN int pl_active;
/* Profiling is on (between start and stop). Read relaxed on the hot path. */
extern PL_HIDDEN int pl_running;
/* pl_running and trace mode: the __cyg hooks record. */
extern PL_HIDDEN int pl_tracing;
/* Bumped at every start and after fork: contexts made before must be made again, and
 * each thread re-announces its running context to the engine. */
extern PL_HIDDEN unsigned pl_gen;
/* An instrumented function was called at least once in this process. */
extern PL_HIDDEN int pl_seen_cyg;
/* The pid the shim's state belongs to (set at start and in a forked child); a vfork
 * child shares that state and must not touch it. */
extern PL_HIDDEN int pl_pid;

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
	/* The stack records' hot fields (service.h, struct pl_stack_tls), here so that the
	 * __cyg hooks reach them from the same thread-local base as the rest: the bounds
	 * of the running context's stack [stack_lo, stack_lo + stack_span) (span 0:
	 * unknown, the next event checks), and the root frame of a detected stack
	 * (UINTPTR_MAX: none; 0 in a new thread). */
	uintptr_t stack_lo, stack_span, stack_root_sp;
};

/* The shim's own per-thread state beyond struct pl_tls. */
struct pl_native_tls {
	struct pl_coro *cur; /* the running coroutine; NULL: the thread's own context */
	unsigned gen;	     /* the pl_gen the engine last heard about from this thread */
	int dead;	     /* the thread has exited: ignore everything */
};
extern PL_HIDDEN __thread struct pl_tls pl_tls_data PL_TLS;
extern PL_HIDDEN __thread struct pl_native_tls pl_ntls PL_TLS;

/* The calling thread's engine thread, registered on first use; NULL if that failed. */
PL_HIDDEN struct coprof_thread *pl_thread(void);
/* The name the calling thread should be registered under (its comm). */
PL_HIDDEN void pl_thread_name(char *buf, size_t len);

/* Real functions, resolved once by pl_resolve_reals() with dlsym(RTLD_NEXT). */
struct pl_reals {
	int (*pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	int (*pthread_setname_np)(pthread_t, const char *);
	void (*makecontext)(ucontext_t *, void (*)(void), int, ...);
	int (*swapcontext)(ucontext_t *, const ucontext_t *);
	int (*setcontext)(const ucontext_t *);
	int (*sigaction)(int, const struct sigaction *, struct sigaction *);
	void (*(*signal)(int, void (*)(int)))(int);
	int (*sigprocmask)(int, const sigset_t *, sigset_t *);
	int (*pthread_sigmask)(int, const sigset_t *, sigset_t *);
	void (*exit_)(int); /* _exit */
};
extern PL_HIDDEN struct pl_reals pl_real;
PL_HIDDEN void pl_resolve_reals(void);

/* One line on stderr, prefixed "coprof: ", written with write(2). */
PL_HIDDEN void pl_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The folder of the shim's own file (the build tree's preload/, or the installed
 * libdir), where its helpers lie: "." when the loader gives no folder. 0, or -1 when
 * the loader does not know the file. */
PL_HIDDEN int pl_shim_dir(char *dir, size_t len);

#endif
