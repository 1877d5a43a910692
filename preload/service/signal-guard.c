/* signal-guard.c: the signals the shim needs (the toggle signal, the sampler's tick)
 * stay its own whatever the program does with signals in general.
 *
 * Every way a program changes a disposition or a mask is interposed: sigaction, signal,
 * bsd_signal, sysv_signal, sigset, sighold, sigrelse, sigignore, sigprocmask,
 * pthread_sigmask, and sigwait, sigwaitinfo, sigtimedwait and signalfd, which would
 * take a guarded signal from under its handler. Resetting a guarded signal to SIG_DFL
 * (and, for the tick, SIG_IGN) or blocking it only changes what the program is told;
 * installing a handler of its own is the program insisting: the part that owned the
 * signal lets go (its `lost` callback says so on stderr) and the program's handler is
 * installed. libunwind blocks every signal around its own lock: the masks its code asks
 * for pass untouched (pl_sig_raw_masks_from), whoever it works for, as do those asked
 * for while it runs for the shim (pl_tls()->raw_masks). In a vfork child (vfork.c)
 * every call passes untouched: its dispositions and mask are its own, the guards' state
 * is the parent's. Runs in the program's threads, maybe in its signal handlers: no
 * lock, no allocation (one spin word, reset in a forked child). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "service.h"

#define MAX_GUARDS 4

struct guard {
	int signo;		 /* 0: a free slot */
	atomic_int owned;	 /* the shim's handler is installed */
	int ign_is_view;	 /* SIG_IGN only changes what the program is told */
	struct sigaction prog;	 /* what the program believes is installed */
	void (*lost)(int signo); /* called before the program's handler goes in */
};

static struct guard guards[MAX_GUARDS];
static atomic_int nguards;
/* The kernel id of the thread changing a guard's view; 0: none. */
static atomic_int busy;
/* Signals (bit signo-1) for which the program installed a handler that blocks its own
 * signal while it runs: pl_sig_maybe_in_handler's evidence. */
static _Atomic uint64_t handled;
/* Masks asked for from [raw_lo, raw_hi) pass untouched. */
static _Atomic uintptr_t raw_lo, raw_hi;
/* Guards (bit i) the program believes it blocked on this thread. */
static __thread unsigned prog_blocked PL_TLS;
/* Guards (bit i) whose signal came while the program believed it blocked on this thread,
 * and which the handler left to it (pl_sig_prog_defer): raised again at the unblock. */
static __thread unsigned prog_pending PL_TLS;

/* The guard of `signo` while the shim still owns it, or NULL. */
static struct guard *owned_guard(int signo)
{
	if (pl_tls_data.vfork_child) /* the child's dispositions are its own */
		return NULL;
	int n = atomic_load_explicit(&nguards, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (guards[i].signo == signo && signo > 0 && atomic_load(&guards[i].owned))
			return &guards[i];
	return NULL;
}

/* async-signal-safe. A thread that re-enters from a signal handler while it holds the
 * word goes on without it: waiting would never end. */
static int lock_view(void)
{
	int self = (int)syscall(SYS_gettid), free = 0;
	if (atomic_load(&busy) == self)
		return 0;
	while (!atomic_compare_exchange_weak(&busy, &free, self)) {
		free = 0;
		syscall(SYS_sched_yield);
	}
	return 1;
}

static void unlock_view(int held)
{
	if (held)
		atomic_store(&busy, 0);
}

void pl_sig_after_fork_child(void)
{
	atomic_store(&busy, 0); /* its holder, if any, did not come along */
}

int pl_sig_guard(int signo, const struct sigaction *prog, int ign_is_view, void (*lost)(int))
{
	int n = atomic_load(&nguards);
	if (n >= MAX_GUARDS || signo <= 0)
		return -ENOSPC;
	struct guard *g = &guards[n];
	g->signo = signo;
	g->ign_is_view = ign_is_view;
	g->prog = *prog;
	g->lost = lost;
	atomic_store(&g->owned, 1);
	atomic_store_explicit(&nguards, n + 1, memory_order_release);
	return 0;
}

int pl_sig_real_action(int signo, const struct sigaction *act, struct sigaction *oact)
{
	if (!pl_real.sigaction)
		pl_resolve_reals();
	if (!pl_real.sigaction) {
		errno = ENOSYS;
		return -1;
	}
	return pl_real.sigaction(signo, act, oact);
}

/* async-signal-safe. A handler may interrupt the same thread's guarded_action (the
 * view is then read as it was, or as it is being written: either is the program's). */
int pl_sig_prog_action(int signo, struct sigaction *out)
{
	struct guard *g = owned_guard(signo);
	if (!g)
		return -1;
	int held = lock_view();
	*out = g->prog;
	unlock_view(held);
	return 0;
}

void pl_sig_block_all(sigset_t *old)
{
	sigset_t all;
	sigfillset(&all);
	if (!pl_real.pthread_sigmask)
		pl_resolve_reals();
	pl_real.pthread_sigmask(SIG_SETMASK, &all, old);
}

void pl_sig_restore(const sigset_t *old)
{
	pl_real.pthread_sigmask(SIG_SETMASK, old, NULL);
}

/* async-signal-safe */
int pl_sig_maybe_in_handler(void)
{
	uint64_t h = atomic_load_explicit(&handled, memory_order_relaxed);
	if (!h)
		return 0;
	sigset_t cur;
	if (!pl_real.pthread_sigmask || pl_real.pthread_sigmask(SIG_SETMASK, NULL, &cur) != 0)
		return 1;
	for (int s = 1; s <= 64; s++)
		if ((h & (1ull << (s - 1))) && sigismember(&cur, s) == 1)
			return 1;
	return 0;
}

/* Remembers which signals have a handler of the program's (see `handled`). */
static void note_handler(int signo, const struct sigaction *act)
{
	if (signo < 1 || signo > 64 || !act || pl_tls_data.vfork_child)
		return;
	uint64_t bit = 1ull << (signo - 1);
	int has = (act->sa_flags & SA_SIGINFO) ||
		  (act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN);
	if (has && !(act->sa_flags & SA_NODEFER))
		atomic_fetch_or(&handled, bit);
	else
		atomic_fetch_and(&handled, ~bit);
}

void pl_sig_note_handlers(void)
{
	for (int s = 1; s <= 64; s++) {
		struct sigaction now;
		if (s != SIGKILL && s != SIGSTOP && pl_sig_real_action(s, NULL, &now) == 0)
			note_handler(s, &now);
	}
}

static int view_only(const struct guard *g, const struct sigaction *act)
{
	if (act->sa_flags & SA_SIGINFO)
		return 0;
	return act->sa_handler == SIG_DFL || (g->ign_is_view && act->sa_handler == SIG_IGN);
}

/* The program sets or reads a guarded signal's disposition. */
static int guarded_action(struct guard *g, const struct sigaction *act, struct sigaction *oact)
{
	int held = lock_view();
	if (!atomic_load(&g->owned)) {
		unlock_view(held);
		return pl_sig_real_action(g->signo, act, oact);
	}
	struct sigaction old = g->prog;
	int insists = act && !view_only(g, act);
	if (act && !insists)
		g->prog = *act;
	if (insists)
		atomic_store(&g->owned, 0);
	unlock_view(held);
	if (insists) {
		if (g->lost)
			g->lost(g->signo);
		if (pl_sig_real_action(g->signo, act, NULL) != 0)
			return -1;
		note_handler(g->signo, act);
	}
	if (oact)
		*oact = old;
	return 0;
}

PL_EXPORT int sigaction(int signo, const struct sigaction *act, struct sigaction *oact)
{
	struct guard *g = owned_guard(signo);
	if (g)
		return guarded_action(g, act, oact);
	int rc = pl_sig_real_action(signo, act, oact);
	if (rc == 0)
		note_handler(signo, act);
	return rc;
}

typedef void (*pl_handler)(int);

/* signal() and its kin for a guarded signal, with the flags each one means in glibc. */
static pl_handler guarded_signal(struct guard *g, pl_handler handler, int flags, int self_mask)
{
	struct sigaction act, old;
	memset(&act, 0, sizeof(act));
	act.sa_handler = handler;
	act.sa_flags = flags;
	sigemptyset(&act.sa_mask);
	if (self_mask)
		sigaddset(&act.sa_mask, g->signo);
	if (guarded_action(g, &act, &old) != 0)
		return SIG_ERR;
	return (old.sa_flags & SA_SIGINFO) ? (pl_handler)(void *)old.sa_sigaction : old.sa_handler;
}

/* The real function by name, for the kin of signal() that the shim does not keep:
 * looked up once, at the first call. */
#define real(name)                                                                                 \
	({                                                                                         \
		static void *fn_;                                                                  \
		if (!fn_)                                                                          \
			fn_ = dlsym(RTLD_NEXT, name);                                              \
		fn_;                                                                               \
	})

PL_EXPORT pl_handler signal(int signo, pl_handler handler)
{
	struct guard *g = owned_guard(signo);
	if (g)
		return guarded_signal(g, handler, SA_RESTART, 1);
	if (!pl_real.signal)
		pl_resolve_reals();
	if (!pl_real.signal)
		return SIG_ERR;
	pl_handler old = pl_real.signal(signo, handler);
	if (old != SIG_ERR) {
		struct sigaction act = {.sa_handler = handler};
		note_handler(signo, &act);
	}
	return old;
}

/* glibc declares it only for old X/Open levels. */
PL_EXPORT pl_handler bsd_signal(int signo, pl_handler handler);
PL_EXPORT pl_handler bsd_signal(int signo, pl_handler handler)
{
	return signal(signo, handler);
}

PL_EXPORT pl_handler sysv_signal(int signo, pl_handler handler)
{
	struct guard *g = owned_guard(signo);
	if (g)
		return guarded_signal(g, handler, SA_RESETHAND | SA_NODEFER, 0);
	pl_handler (*fn)(int, pl_handler) = (pl_handler(*)(int, pl_handler))real("sysv_signal");
	return fn ? fn(signo, handler) : SIG_ERR;
}

/* The program's view of a guarded signal being blocked on this thread. */
static void set_blocked(const struct guard *g, int on)
{
	unsigned bit = 1u << (g - guards);
	prog_blocked = on ? prog_blocked | bit : prog_blocked & ~bit;
	if (!on && (prog_pending & bit)) {
		prog_pending &= ~bit;
		syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), g->signo);
	}
}

static int is_blocked(const struct guard *g)
{
	return !!(prog_blocked & (1u << (g - guards)));
}

/* async-signal-safe */
int pl_sig_prog_defer(int signo)
{
	struct guard *g = owned_guard(signo);
	if (!g || !is_blocked(g))
		return 0;
	prog_pending |= 1u << (g - guards);
	return 1;
}

PL_EXPORT pl_handler sigset(int signo, pl_handler disp)
{
	struct guard *g = owned_guard(signo);
	if (!g) {
		pl_handler (*fn)(int, pl_handler) = (pl_handler(*)(int, pl_handler))real("sigset");
		return fn ? fn(signo, disp) : SIG_ERR;
	}
	int was = is_blocked(g);
	if (disp == SIG_HOLD) {
		set_blocked(g, 1);
		struct sigaction old;
		guarded_action(g, NULL, &old);
		return was ? SIG_HOLD : old.sa_handler;
	}
	set_blocked(g, 0);
	pl_handler old = guarded_signal(g, disp, 0, 0);
	return was && old != SIG_ERR ? SIG_HOLD : old;
}

PL_EXPORT int sighold(int signo)
{
	struct guard *g = owned_guard(signo);
	if (!g) {
		int (*fn)(int) = (int (*)(int))real("sighold");
		return fn ? fn(signo) : -1;
	}
	set_blocked(g, 1);
	return 0;
}

PL_EXPORT int sigrelse(int signo)
{
	struct guard *g = owned_guard(signo);
	if (!g) {
		int (*fn)(int) = (int (*)(int))real("sigrelse");
		return fn ? fn(signo) : -1;
	}
	set_blocked(g, 0);
	return 0;
}

PL_EXPORT int sigignore(int signo)
{
	struct guard *g = owned_guard(signo);
	if (!g) {
		int (*fn)(int) = (int (*)(int))real("sigignore");
		return fn ? fn(signo) : -1;
	}
	return guarded_signal(g, SIG_IGN, 0, 0) == SIG_ERR ? -1 : 0;
}

/* `set` without the guarded signals, into `out`; returns `set` itself when it has none
 * of them (nothing to change). */
static const sigset_t *without_guarded(const sigset_t *set, sigset_t *out)
{
	int n = atomic_load_explicit(&nguards, memory_order_acquire), copied = 0;
	if (!set)
		return set;
	for (int i = 0; i < n; i++) {
		struct guard *g = &guards[i];
		if (!atomic_load(&g->owned) || sigismember(set, g->signo) != 1)
			continue;
		if (!copied) {
			*out = *set;
			copied = 1;
		}
		sigdelset(out, g->signo);
	}
	return copied ? out : set;
}

/* A mask change: guarded signals are never really blocked; what the program asked for
 * is remembered per thread and shown back to it in the old mask. */
static int guarded_mask(int (*fn)(int, const sigset_t *, sigset_t *), int how, const sigset_t *set,
			sigset_t *old)
{
	int n = atomic_load_explicit(&nguards, memory_order_acquire);
	unsigned before = prog_blocked;
	sigset_t copy;
	const sigset_t *use = without_guarded(set, &copy);
	int rc = fn(how, use, old);
	if (rc != 0)
		return rc;
	for (int i = 0; i < n; i++) {
		struct guard *g = &guards[i];
		if (!atomic_load(&g->owned))
			continue;
		if (old && (before & (1u << i)))
			sigaddset(old, g->signo);
		if (!set)
			continue;
		int in = sigismember(set, g->signo) == 1;
		if (how == SIG_BLOCK && in)
			set_blocked(g, 1);
		else if (how == SIG_UNBLOCK && in)
			set_blocked(g, 0);
		else if (how == SIG_SETMASK)
			set_blocked(g, in);
	}
	return 0;
}

void pl_sig_raw_masks_from(uintptr_t lo, uintptr_t hi)
{
	atomic_store(&raw_hi, 0);
	atomic_store(&raw_lo, lo);
	atomic_store(&raw_hi, hi);
}

/* A mask call the guard lets through: none guarded, the shim's own libunwind walk, a
 * vfork child (its mask is its own), or a call from libunwind's code (`ra`, the
 * interposer's return address). */
static int mask_passes(uintptr_t ra)
{
	return !atomic_load_explicit(&nguards, memory_order_acquire) || pl_tls_data.raw_masks ||
	       pl_tls_data.vfork_child || (ra >= atomic_load(&raw_lo) && ra < atomic_load(&raw_hi));
}

PL_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	if (!pl_real.pthread_sigmask)
		pl_resolve_reals();
	if (!pl_real.pthread_sigmask)
		return ENOSYS;
	if (mask_passes((uintptr_t)__builtin_return_address(0)))
		return pl_real.pthread_sigmask(how, set, old);
	return guarded_mask(pl_real.pthread_sigmask, how, set, old);
}

PL_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	if (!pl_real.sigprocmask)
		pl_resolve_reals();
	if (!pl_real.sigprocmask) {
		errno = ENOSYS;
		return -1;
	}
	if (mask_passes((uintptr_t)__builtin_return_address(0)))
		return pl_real.sigprocmask(how, set, old);
	return guarded_mask(pl_real.sigprocmask, how, set, old);
}

/* Waiting for signals: a guarded signal is never taken from under its handler. */
PL_EXPORT int sigwait(const sigset_t *set, int *sig)
{
	int (*fn)(const sigset_t *, int *) = (int (*)(const sigset_t *, int *))real("sigwait");
	sigset_t copy;
	return fn ? fn(without_guarded(set, &copy), sig) : ENOSYS;
}

PL_EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	int (*fn)(const sigset_t *, siginfo_t *) =
	    (int (*)(const sigset_t *, siginfo_t *))real("sigwaitinfo");
	sigset_t copy;
	if (!fn) {
		errno = ENOSYS;
		return -1;
	}
	return fn(without_guarded(set, &copy), info);
}

PL_EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *ts)
{
	int (*fn)(const sigset_t *, siginfo_t *, const struct timespec *) =
	    (int (*)(const sigset_t *, siginfo_t *, const struct timespec *))real("sigtimedwait");
	sigset_t copy;
	if (!fn) {
		errno = ENOSYS;
		return -1;
	}
	return fn(without_guarded(set, &copy), info, ts);
}

PL_EXPORT int signalfd(int fd, const sigset_t *mask, int flags)
{
	int (*fn)(int, const sigset_t *, int) =
	    (int (*)(int, const sigset_t *, int))real("signalfd");
	sigset_t copy;
	if (!fn) {
		errno = ENOSYS;
		return -1;
	}
	return fn(fd, without_guarded(mask, &copy), flags);
}

/* The kernel's sigaltstack, past this interposer (glibc's has no state). */
static int real_sigaltstack(const stack_t *ss, stack_t *old)
{
	return (int)syscall(SYS_sigaltstack, ss, old);
}

/* The program's alternate signal stack. Where it has none, a runtime's stands in (the
 * sampler's tick stack, sampler/sampler-stack.c; struct pl_runtime's altstack_*): the
 * program is told it has none, its own replaces the runtime's, and disabling its own
 * puts the runtime's back. Nothing else changes: what the kernel does with the
 * program's own is its to answer (EPERM on it, ENOMEM). */
PL_EXPORT int sigaltstack(const stack_t *ss, stack_t *old)
{
	stack_t cur;
	if (real_sigaltstack(NULL, &cur) != 0)
		return -1;
	int ours = pl_runtimes_altstack_owner(&cur) != NULL;
	if (ss) {
		int mode = ss->ss_flags & ~SS_AUTODISARM;
		if (mode != 0 && mode != SS_ONSTACK && mode != SS_DISABLE) {
			errno = EINVAL;
			return -1;
		}
		if (mode != SS_DISABLE || !ours) {
			if (real_sigaltstack(ss, NULL) != 0)
				return -1;
			if (mode != SS_DISABLE)
				pl_runtimes_altstack_program_set(1);
			else if (!(cur.ss_flags & SS_DISABLE))
				pl_runtimes_altstack_program_set(0);
		}
	}
	if (old && ours)
		*old = (stack_t){.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
	else if (old)
		*old = cur;
	return 0;
}
