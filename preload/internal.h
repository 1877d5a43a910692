/* internal.h: what the native parts of the shim share (shim.c, control.c, signals.c,
 * instrument.c, adapter-ucontext.c, threads.c). Not seen by the runtime adapters,
 * which use shim.h. Everything here is hidden; hooks are exported with PL_EXPORT. */
#ifndef PL_INTERNAL_H
#define PL_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <ucontext.h>

#include "fd.h"
#include "shim.h"

#define PL_EXPORT __attribute__((visibility("default")))
#define PL_TLS __attribute__((tls_model("initial-exec")))
#define pl_likely(x) __builtin_expect(!!(x), 1)
#define pl_unlikely(x) __builtin_expect(!!(x), 0)

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

/* The shim's own per-thread state beyond struct pl_tls. */
struct pl_native_tls {
	struct pl_coro *cur; /* the running coroutine; NULL: the thread's own context */
	unsigned gen;	     /* the pl_gen the engine last heard about from this thread */
	int dead;	     /* the thread has exited: ignore everything */
};
extern PL_HIDDEN __thread struct pl_tls pl_tls_data PL_TLS;
extern PL_HIDDEN __thread struct pl_native_tls pl_ntls PL_TLS;

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

/* control.c: starting, stopping and dumping, serialised by one mutex. */
PL_HIDDEN int pl_control_init(void);   /* the pipe and the control thread */
PL_HIDDEN void pl_control_start(void); /* start profiling now */
PL_HIDDEN void pl_control_exit(void);  /* at exit: stop, dump, say what is missing */
/* At _exit (maybe in a signal handler): asks the control thread for the same dump and
 * waits for it a few seconds at most. */
PL_HIDDEN void pl_control_quick_exit(void);
/* exec.c's around exec: stop and dump (1: was on, 0: off, -1: gave up), puts in
 * `state` what the next image takes over (PL_EXEC_ENV); then, if exec failed, remove
 * that file and go on in the same window. At start, the image after exec adopts the
 * state, and once configured does the COPROF_KEEP removal left to it. */
PL_HIDDEN int pl_control_exec_prepare(char *state, size_t len);
PL_HIDDEN void pl_control_exec_failed(int was_running);
PL_HIDDEN void pl_control_adopt_exec(const char *state);
PL_HIDDEN void pl_control_exec_keep(void);
#define PL_EXEC_ENV "COPROF_EXEC_STATE"
/* exec.c: at start, takes PL_EXEC_ENV out of the environment and adopts its state. */
PL_HIDDEN void pl_exec_init(void);
PL_HIDDEN void pl_control_fork_prepare(void);
PL_HIDDEN void pl_control_fork_parent(void);
PL_HIDDEN void pl_control_fork_child(void); /* new pipe, new control thread */
PL_HIDDEN void pl_runtimes_thread_start(void);
PL_HIDDEN void pl_runtimes_thread_exit(void);
PL_HIDDEN void pl_runtimes_after_fork_child(void);

/* signal-handler.c (async-signal-safe) */
extern PL_HIDDEN struct pl_fd pl_toggle_fd; /* the control pipe's write end */
PL_HIDDEN void pl_on_toggle_signal(int sig, siginfo_t *si, void *uc);

/* signals.c: the toggle signal, and the program's own handlers winning over it. */
PL_HIDDEN void pl_signals_install(int signo);
/* The toggle signal while the shim's handler is installed; 0 once the program took it
 * over (or never: COPROF_SIGNAL=none). */
PL_HIDDEN int pl_signals_armed(void);
/* control.c: the control thread publishes its state again (the signal was lost). */
PL_HIDDEN void pl_control_republish(void);

/* signal-guard.c: in a forked child, forgets a view change another thread was making. */
PL_HIDDEN void pl_sig_after_fork_child(void);
/* async-signal-safe: nonzero when the calling thread may be running one of the
 * program's signal handlers (a signal it handles is blocked): a hook that would
 * allocate does not. Errs on the side of yes. */
PL_HIDDEN int pl_sig_maybe_in_handler(void);

/* adapter-ucontext.c */
PL_HIDDEN int pl_uctx_init(void);
/* Tells the engine which context the calling thread runs after a start or a fork. */
PL_HIDDEN void pl_uctx_resync(struct coprof_thread *t);

/* threads.c */
PL_HIDDEN void pl_threads_init(void);
/* The name the calling thread should be registered under (its comm). */
PL_HIDDEN void pl_thread_name(char *buf, size_t len);

/* exit.c: the pid the shim's state belongs to (set at start and in a forked child);
 * a vfork child shares that state and must not touch it. */
extern PL_HIDDEN int pl_pid;

/* symbols.c */
struct pl_symbols;
extern PL_HIDDEN struct pl_symbols *pl_syms;

#endif
