/* signal-safe.h: every function of the shim that runs in a signal handler, declared in
 * this one place, whichever layer defines it: the toggle signal's handler (lifecycle/),
 * the sampler's tick handler (sampler/), and what they and _exit call. Each runs in a
 * handler that may have interrupted anything: it touches only atomics, its own thread's
 * state and async-signal-safe system calls (write, read, fstat, ioctl, clock_gettime,
 * timer_settime), takes no lock it may have to wait for, and allocates nothing. The
 * folder headers do not declare these again. No layer's: it includes no header of the
 * shim's, and names the types it needs only. */
#ifndef PL_SIGNAL_SAFE_H
#define PL_SIGNAL_SAFE_H

#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

struct coprof_ctx;
struct pl_addrmap;
struct pl_event_id;
struct pl_fd;
struct pl_py_sample;
struct pl_rec;
struct pl_stack;
struct pl_sthread;
struct pl_tls;

#define PL_SIGNAL_SAFE __attribute__((visibility("hidden")))

/* --- state/ ------------------------------------------------------------------------ */

/* The calling thread's shim state (initial-exec TLS). */
PL_SIGNAL_SAFE struct pl_tls *pl_tls(void);

/* --- service/ ---------------------------------------------------------------------- */

/* f's number while it still names the object adopted, else -1 (fd.c). */
PL_SIGNAL_SAFE int pl_fd_get(const struct pl_fd *f);
/* 0 when a number of libunwind's address-check pipe now names the program's object
 * (libunwind would read, write or close it): walk no stack then (fd.c). */
PL_SIGNAL_SAFE int pl_fd_unw_pipe_safe(void);
/* The calling thread runs under a seccomp filter (seccomp.c). */
PL_SIGNAL_SAFE int pl_seccomp_filtered(void);
/* The program's view of a guarded signal's disposition (what it last set, SIG_DFL or
 * SIG_IGN) into *out: 0, or -1 when the shim does not hold `signo` (any longer)
 * (signal-guard.c). */
PL_SIGNAL_SAFE int pl_sig_prog_action(int signo, struct sigaction *out);
/* A guarded signal that is not the shim's came while the program believes it blocked on
 * the calling thread: 1, and it is raised again to the thread when the program unblocks
 * it (as the kernel would have kept it pending); 0 when the program has it unblocked
 * (signal-guard.c). */
PL_SIGNAL_SAFE int pl_sig_prog_defer(int signo);
/* Nonzero when the calling thread may be running one of the program's signal handlers
 * (a signal it handles is blocked): a hook that would allocate does not. Errs on the
 * side of yes (signal-guard.c). */
PL_SIGNAL_SAFE int pl_sig_maybe_in_handler(void);
/* Records that `k` now holds `v`, once the table exists: 0, or -1 when there is no
 * table or no slot (then m->full is said on stderr, once) (addrmap.c). */
PL_SIGNAL_SAFE int pl_addrmap_put(struct pl_addrmap *m, uintptr_t k, void *v);

/* --- sampler/: the tick handler and what it calls ----------------------------------- */

/* The calling thread's sampler state, NULL when it is not sampled (sampler.c). */
PL_SIGNAL_SAFE struct pl_sthread *pl_sampler_self(void);
/* Nonzero while `fd` still names the perf event `id` was taken from. `full` 0 skips
 * the event-id ioctl (fstat alone: any anonymous inode matches) (sampler.c). */
PL_SIGNAL_SAFE int pl_event_ours(int fd, const struct pl_event_id *id, int full);
/* Arms the thread's tick source (perf event, CPU or mono timer), or disarms it when
 * `on` is 0 (sampler-signal.c). */
PL_SIGNAL_SAFE void pl_sampler_arm(struct pl_sthread *st, int on);
/* Calls fn(arg) on the calling thread's tick stack, or in place when the handler runs on
 * it already or it is busy; `uc` the tick's context (sampler-stack.c). */
PL_SIGNAL_SAFE void pl_tick_stack_run(void (*fn)(void *), void *arg, const ucontext_t *uc);
/* The calling thread's return addresses, innermost first (this function's caller is
 * pcs[0]), at most `max`. -1 when no walk may run: libunwind is not loaded, the numbers
 * of its private pipe name the program's files now (fd.c), or, in a signal handler
 * whose context is `uc` (NULL elsewhere), the interrupted code may be inside libunwind
 * where the signal guard cannot see its masks (unwind.c). */
PL_SIGNAL_SAFE int pl_unw_backtrace(struct pl_tls *tls, const ucontext_t *uc, uintptr_t *pcs,
				    int max);
/* The interrupted stack of a signal whose context is `uc`, innermost first (its pc is
 * pcs[0]), at most `max`, walked frame by frame. *base gets the stack pointer of the
 * outermost frame when the walk reached the end of the stack (a return address of 0 or
 * no caller, past the interrupted frame), else 0. -1 when no walk may run (as for
 * pl_unw_backtrace) (unwind.c). */
PL_SIGNAL_SAFE int pl_unw_walk(struct pl_tls *tls, const ucontext_t *uc, uintptr_t *pcs, int max,
			       uintptr_t *base);
/* Reads the thread's Python frames into s through the adapter's reader: their number, 0
 * for none (sample the native stack), -1 when they could not be read whole
 * (sampler-python.c). */
PL_SIGNAL_SAFE int pl_sampler_python_read(struct pl_py_sample *s, const ucontext_t *uc);
/* rec gets the n Python frames of s, the interrupted pc at the leaf when it is not the
 * interpreter's (sampler-python.c). */
PL_SIGNAL_SAFE void pl_sampler_python_fill(struct pl_sthread *st, struct pl_rec *rec,
					   const struct pl_py_sample *s, int n,
					   const ucontext_t *uc);
/* rec holds the native stack: each C frame of the eval loop becomes its Python frames
 * (sampler-python.c). */
PL_SIGNAL_SAFE void pl_sampler_python_merge(struct pl_sthread *st, struct pl_rec *rec,
					    const struct pl_py_sample *s, int n);
/* An asyncio task's sample: rec (filled or merged) ends at its root, the frames-th
 * Python frame from the leaf (Python keys have the top bit set); the loop's frames that
 * drive the task are not the task's (trace mode makes the root a root)
 * (sampler-python.c). */
PL_SIGNAL_SAFE void pl_sampler_python_cut(struct pl_rec *rec, unsigned frames);
/* The context the interrupted stack pointer `sp` is on, when the stack records know
 * better than `cur`, what the switch hooks said: a switch no adapter reported may have
 * happened since the last instrumented call (stack-sampled.c). */
PL_SIGNAL_SAFE struct coprof_ctx *pl_stack_at_tick(uintptr_t sp, struct coprof_ctx *cur);
/* Nonzero once the __cyg hooks followed the calling thread's stacks (an instrumented
 * program: they find its switches themselves) (stack-sampled.c). */
PL_SIGNAL_SAFE int pl_stack_hooked(void);
/* The running fcontext fiber, when no hook has named it yet, `ctx` is its context and
 * `sp`, the interrupted stack pointer, is on its stack (the fold may name it from the
 * tick's stack), else NULL (stack-sampled.c). */
PL_SIGNAL_SAFE struct pl_stack *pl_stack_unnamed(const struct coprof_ctx *ctx, uintptr_t sp);
/* The same as a switch seen after the fact (the stack adapter, runtime/): the thread
 * has left `from`'s stack already, which suspended at `pcs` (innermost first, `depth`
 * of them, what the hooks saw). Outside any signal, or in a handler (sampler-wait.c). */
PL_SIGNAL_SAFE void pl_sampler_switch_left(struct coprof_ctx *from, const uintptr_t *pcs,
					   uint32_t depth, struct coprof_ctx *to);
/* A coroutine whose context on its last thread was `c` runs on another thread
 * (outside any signal, or in a handler: no lock is waited for): the thread it left
 * stops charging it as waiting (sampler.c). */
PL_SIGNAL_SAFE void pl_sampler_moved(struct coprof_ctx *c);

/* --- lifecycle/: the toggle signal's handler and _exit's dump ------------------------ */

/* The toggle signal's handler: one byte to the control pipe (toggle-handler.c). */
PL_SIGNAL_SAFE void pl_on_toggle_signal(int sig, siginfo_t *si, void *uc);
/* The control thread publishes its state again (the toggle signal was lost to the
 * program's handler, which may run in a handler) (control.c). */
PL_SIGNAL_SAFE void pl_control_republish(void);
/* At _exit, maybe in a signal handler: asks the control thread for the last dump and
 * waits for it a few seconds at most; but for a Python process, which dumps itself
 * (control.c). */
PL_SIGNAL_SAFE void pl_control_quick_exit(void);

#endif
