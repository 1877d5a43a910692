/* sampler-signal.c: the tick handler of sample mode. async-signal-safe.
 *
 * Runs in the profiled thread, on the signal its own tick source sends: SIGTRAP from
 * its perf task-clock event (cpu), else a real-time signal from its timer. It reads
 * the thread's CPU clock, walks the interrupted stack with libunwind (local only,
 * caches warmed outside the signal by sampler.c) into the thread's ring, and nothing
 * more: no allocation, no lock, errno saved and restored. All but its first few
 * frames run on the thread's tick stack (sampler-stack.c). */
/* async-signal-safe */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "coprof-private.h"
#include "sampler.h"

/* Arming needs no lock: timer_settime and ioctl are async-signal-safe. An event's
 * number gets no ioctl once it is not the event's (the program closed it; the folding
 * thread opens it again), nor under a seccomp filter, which may forbid ioctl: the
 * events then tick on, and the handler drops the ticks while sampling is off. */
void pl_sampler_arm(struct pl_sthread *st, int on)
{
	if (st->perf_fd >= 0) {
		unsigned long req = on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE;
		int fd = st->perf_fd, wake = st->wake_fd;
		if (atomic_load_explicit(&pl_sampler_sandboxed, memory_order_relaxed))
			return;
		if (pl_event_ours(fd, &st->perf_id, 1))
			ioctl(fd, req, 0);
		if (pl_event_ours(wake, &st->wake_id, 1))
			ioctl(wake, req, 0);
		return;
	}
	struct itimerspec its = {0};
	if (on) {
		its.it_value.tv_sec = (time_t)(pl_sconf.period / 1000000000u);
		its.it_value.tv_nsec = (long)(pl_sconf.period % 1000000000u);
		its.it_interval = its.it_value;
	}
	if (st->has_cpu)
		timer_settime(st->cpu, 0, &its, NULL);
	if (st->has_mono)
		timer_settime(st->mono, 0, &its, NULL);
}

/* The thread's CPU time in ns. The kernel's count itself, one system call (about
 * 0.5 us here, against tens for a tick): the TSC clock the engine reads between
 * reschedules ran ahead of it by several ms when the thread lost its CPU to
 * interrupts or to the VM's host without being scheduled out, and a tick after the
 * clock's next anchor then weighed nothing (a 5 ms round of a coroutine read 1.5). */
static uint64_t thread_cpu_ns(void)
{
	return cp_clock_gettime_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* The next xorshift draw of the thread's generator. */
static uint64_t next_rng(struct pl_sthread *st)
{
	st->rng ^= st->rng << 13;
	st->rng ^= st->rng >> 7;
	st->rng ^= st->rng << 17;
	return st->rng;
}

/* Ticks between two draws of the task-clock event's period (dither_period). */
#define DITHER_EVERY 4

/* Every DITHER_EVERY ticks, draws the task-clock event's period afresh, uniformly from
 * [period/2, 3*period/2): the same rate on average, but ticks that no longer keep step
 * with a program that repeats itself every few periods. With a fixed period a loop
 * whose round is close to a multiple of it is sampled at the same few points of each
 * round for seconds, and one function takes the ticks of the next (a 2:1 split read
 * 0.76 in one run of ten). Each tick is weighed by the CPU time it covers, so uneven
 * intervals change no total. Not every tick: an ioctl that restarts the event's timer
 * costs some 20 us on a VM, where the timer is the hypervisor's; a new spacing every
 * few ticks mixes the phase as well over a run. The event counts the new period from
 * the ioctl, so the time since this tick was due (the interrupt, the signal's
 * delivery) is spread over the next DITHER_EVERY periods, or the rate would fall by it;
 * a lateness of half a period or more is a restart's, and is not. */
static void dither_period(struct pl_sthread *st)
{
	if (atomic_load_explicit(&pl_sampler_sandboxed, memory_order_relaxed))
		return; /* no ioctl, no CPU clock (sampler.c's sandbox) */
	if (st->undrawn && --st->undrawn)
		return;
	uint64_t now = thread_cpu_ns();
	uint64_t late = now > st->due ? now - st->due : 0;
	if (late >= pl_sconf.period / 2)
		late = 0;
	uint64_t p = pl_sconf.period / 2 + next_rng(st) % pl_sconf.period - late / DITHER_EVERY;
	/* The number may be the program's now (it closed ours; a fork child holding the
	 * event keeps it ticking): about 1 us to check, against 3 to 20 for the ioctl. */
	int fd = st->perf_fd;
	if (!pl_event_ours(fd, &st->perf_id, 1))
		return;
	ioctl(fd, PERF_EVENT_IOC_PERIOD, &p);
	st->undrawn = DITHER_EVERY;
	st->due = now + DITHER_EVERY * p;
}

/* The wall weight of a perf tick under wall: the CPU since the last run tick (for a run
 * tick) plus the time off CPU since the last tick of either kind, which the thread spent
 * blocked or preempted where it now resumes (a wake tick comes on its first return to
 * user space after a switch). A gap shorter than a period counts a whole period with
 * probability gap / period, and nothing otherwise: the same on average, and a thread
 * that wakes 50 000 times a second pays for about `rate` stack walks, not 50 000. */
static uint64_t perf_wall_weight(struct pl_sthread *st, int wake)
{
	uint64_t wall = cp_clock_gettime_ns(CLOCK_MONOTONIC);
	/* Under a seccomp filter the CPU clock (a system call) is not read: a run tick
	 * comes each period of CPU time. */
	uint64_t cpu = !atomic_load_explicit(&pl_sampler_sandboxed, memory_order_relaxed)
			   ? thread_cpu_ns()
			   : st->cpu_wall + (wake ? 0 : pl_sconf.period);
	if (!st->wall_last) {
		st->wall_last = wall;
		st->cpu_last = st->cpu_wall = cpu;
		return 0;
	}
	uint64_t dw = wall - st->wall_last, dc = cpu - st->cpu_wall;
	uint64_t off = dw > dc ? dw - dc : 0, run = 0;
	st->wall_last = wall;
	st->cpu_wall = cpu;
	if (!wake) {
		run = cpu - st->cpu_last;
		st->cpu_last = cpu;
	}
	/* The suspended coroutines' waits are counted in periods of wall time. */
	st->wall_acc += dw;
	atomic_fetch_add_explicit(&st->ticks, st->wall_acc / pl_sconf.period, memory_order_relaxed);
	st->wall_acc %= pl_sconf.period;
	if (off < pl_sconf.period)
		off = next_rng(st) % pl_sconf.period < off ? pl_sconf.period : 0;
	return run + off;
}

/* The weight of this tick in ns, or 0 when it counts nothing. `overrun` is the number
 * of expirations the kernel merged into this one (the thread did not run in time);
 * `wake` says a perf tick came from the thread's context-switch event. */
static uint64_t tick_weight(struct pl_sthread *st, unsigned overrun, int perf, int wake)
{
	if (atomic_exchange_explicit(&st->rebase, 0, memory_order_relaxed)) {
		st->cpu_last = 0;
		st->wall_last = 0;
		st->carry = 0;
	}
	if (pl_sconf.wall) {
		uint64_t w;
		if (perf) {
			w = perf_wall_weight(st, wake) + st->carry;
		} else {
			atomic_fetch_add_explicit(&st->ticks, 1 + overrun, memory_order_relaxed);
			w = pl_sconf.period * (1 + overrun) + st->carry;
		}
		if (w && st->tls && st->tls->in_switch) {
			/* A stack walked mid-switch is garbage: defer the tick. */
			st->carry = w;
			atomic_fetch_add_explicit(&st->deferred, 1, memory_order_relaxed);
			return 0;
		}
		st->carry = 0;
		return w;
	}
	if (st->tls && st->tls->in_switch && !pl_sconf.switch_pc) {
		/* Leave cpu_last alone: the next tick counts this CPU time. */
		atomic_fetch_add_explicit(&st->deferred, 1, memory_order_relaxed);
		return 0;
	}
	if (atomic_load_explicit(&pl_sampler_sandboxed, memory_order_relaxed))
		return pl_sconf.period * (1 + overrun); /* no CPU clock (sampler.c's sandbox) */
	uint64_t now = thread_cpu_ns();
	uint64_t last = st->cpu_last;
	st->cpu_last = now;
	if (!last)
		return 0;
	return now - last;
}

/* Walks the interrupted stack into rec. unw_backtrace starts in this handler; the
 * frames above the interrupted pc (the handler, the signal trampoline) are cut off. */
static void capture(struct pl_sthread *st, struct pl_rec *rec, const ucontext_t *uc)
{
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	int n = pl_unw_backtrace(st->tls, uc, rec->pcs, PL_SAMPLE_DEPTH + PL_SAMPLE_SKIP);
	if (n < 0) {
		/* No walk may run (pl_unw_walk, signal-safe.h): keep the pc alone. */
		atomic_fetch_add_explicit(&st->failed, 1, memory_order_relaxed);
		rec->pcs[0] = pc;
		rec->depth = 1;
		return;
	}
	int skip = 0;
	while (skip < n && skip < PL_SAMPLE_SKIP && rec->pcs[skip] != pc)
		skip++;
	if (skip >= n || rec->pcs[skip] != pc) {
		/* Libunwind lost the way through the signal frame: keep the pc alone. */
		atomic_fetch_add_explicit(&st->failed, 1, memory_order_relaxed);
		rec->pcs[0] = pc;
		rec->depth = 1;
		return;
	}
	n -= skip;
	if (n > PL_SAMPLE_DEPTH) {
		n = PL_SAMPLE_DEPTH;
		atomic_fetch_add_explicit(&st->truncated, 1, memory_order_relaxed);
	} else if (skip + n == PL_SAMPLE_DEPTH + PL_SAMPLE_SKIP) {
		atomic_fetch_add_explicit(&st->truncated, 1, memory_order_relaxed);
	}
	if (skip)
		memmove(rec->pcs, rec->pcs + skip, (size_t)n * sizeof(rec->pcs[0]));
	rec->depth = (uint32_t)n;
}

/* Whether the tick interrupted a stack nobody follows: off the thread's own stack, with
 * no context running that an adapter or the Python walker reported, on a thread whose
 * __cyg hooks never ran (they follow stacks themselves). */
static int stack_unknown(const struct pl_sthread *st, uintptr_t sp, const struct coprof_ctx *ctx)
{
	return !ctx && st->own_hi && sp - st->own_lo >= st->own_hi - st->own_lo &&
	       !pl_stack_hooked();
}

/* Walks a stack nobody follows frame by frame into rec: the fold keys the stack by its
 * outermost frame's stack pointer (rec->base), which unw_backtrace does not give. */
static void capture_unknown(struct pl_sthread *st, struct pl_rec *rec, const ucontext_t *uc,
			    uintptr_t sp)
{
	uintptr_t base;
	int n = pl_unw_walk(st->tls, uc, rec->pcs, PL_SAMPLE_DEPTH, &base);
	if (n < 0) {
		atomic_fetch_add_explicit(&st->failed, 1, memory_order_relaxed);
		rec->pcs[0] = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
		n = 1;
	} else if (n == PL_SAMPLE_DEPTH && !base) {
		atomic_fetch_add_explicit(&st->truncated, 1, memory_order_relaxed);
	}
	rec->depth = (uint32_t)n;
	rec->sp = sp;
	rec->base = base;
}

/* The sig_data of the perf event behind a TRAP_PERF siginfo: the kernel puts it right
 * after si_addr (glibc 2.36 has no name for it). */
static uint64_t perf_data(const siginfo_t *si)
{
	unsigned long d;
	memcpy(&d, (const char *)&si->si_addr + sizeof(si->si_addr), sizeof(d));
	return d;
}

static struct sigaction prev_trap; /* SIGTRAP's action before ours (perf ticks) */
/* A SIGTRAP that was not a tick took its default action back (die_of): the handler is no
 * longer ours, but the program did not take the signal. */
static atomic_int trap_released;

/* Whether the kernel forced SIGTRAP on the thread for a fault of its own: a breakpoint
 * (int3), a single step, a debug register. Such a trap ignored or blocked ends the
 * process all the same; a sent one (raise, kill: si_code <= 0) and a perf event's are
 * not forced. */
static int forced(const siginfo_t *si)
{
	return si && si->si_code > 0 && si->si_code != PL_TRAP_PERF;
}

/* Ends the process on `sig` as the kernel would have without us: the default action
 * back, with the kernel's sigaction (the signal guard's keeps ours), and the signal
 * queued again to this thread with its own siginfo. It is blocked while this handler
 * runs, and unblocked in the mask the handler's return restores: it is taken on that
 * return, before the interrupted code runs another instruction (an int3 is not
 * executed again), so the process ends where it would have and a core dump holds the
 * interrupted code's registers, not the handler's. Without a context (not from the
 * kernel) it is unblocked at once. */
static void die_of(int sig, const siginfo_t *si, ucontext_t *uc)
{
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	atomic_store(&trap_released, 1);
	atomic_store_explicit(&pl_sampler_on, 0, memory_order_relaxed);
	pl_sig_real_action(sig, &dfl, NULL);
	pid_t pid = getpid(), tid = (pid_t)syscall(SYS_gettid);
	if (!si || syscall(SYS_rt_tgsigqueueinfo, pid, tid, sig, si) != 0)
		syscall(SYS_tgkill, pid, tid, sig);
	if (uc) {
		sigdelset(&uc->uc_sigmask, sig);
		return;
	}
	sigset_t one;
	sigemptyset(&one);
	sigaddset(&one, sig);
	syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &one, NULL, (size_t)(_NSIG / 8));
}

/* A SIGTRAP that is not a tick (a breakpoint, raise) gets what it would have got
 * without us, by the disposition the program believes it set (the signal guard's view:
 * SIG_DFL or SIG_IGN; a handler of its own takes the signal from us): the default
 * action ends the process (die_of); SIG_IGN drops a sent trap, but not a forced one,
 * which the kernel makes fatal. A sent trap the program believes it blocked waits for
 * its unblock; a forced one does not wait (the kernel unblocks it). The handler before
 * ours, if any, runs under the mask the kernel would have given it (ours blocks every
 * signal). */
static void forward_trap(int sig, siginfo_t *si, ucontext_t *uc)
{
	struct sigaction prog;
	if (pl_sig_prog_action(sig, &prog) != 0)
		prog = prev_trap;
	int handler = (prog.sa_flags & SA_SIGINFO) ||
		      (prog.sa_handler != SIG_DFL && prog.sa_handler != SIG_IGN);
	if (!forced(si) && pl_sig_prog_defer(sig))
		return; /* blocked, as the program believes: it gets it when it unblocks */
	if (!handler) {
		if (prog.sa_handler == SIG_DFL || forced(si))
			die_of(sig, si, uc);
		return;
	}
	if (uc) {
		sigset_t m = uc->uc_sigmask;
		for (int s = 1; s < NSIG; s++)
			if (sigismember(&prog.sa_mask, s) == 1)
				sigaddset(&m, s);
		if (!(prog.sa_flags & SA_NODEFER))
			sigaddset(&m, sig);
		/* the kernel's call: the shim's pthread_sigmask would edit the mask */
		syscall(SYS_rt_sigprocmask, SIG_SETMASK, &m, NULL, (size_t)(_NSIG / 8));
	}
	if (prog.sa_flags & SA_SIGINFO)
		prog.sa_sigaction(sig, si, uc);
	else
		prog.sa_handler(sig);
}

#define PL_SWITCH_STACK (256u * 1024) /* stack a switch of ours may use below its hook */
#define PL_STALE_TICKS 16	      /* ticks in a row inside one switch: it is over */

/* The adapter sets in_switch for a switch; when the switch goes where no hook of ours
 * returns (setcontext to a getcontext point, uc_link), nobody clears it. The switch is
 * over when the interrupted pc is out of libc's switch code and the stack pointer is
 * not just below the frame that set it, or when PL_STALE_TICKS ticks in a row found it
 * set. */
static int switch_over(struct pl_sthread *st, const ucontext_t *uc)
{
	uintptr_t top = st->tls->switch_sp;
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	/* Inside libc's swapcontext or setcontext the stack pointer may already be the
	 * target's while the unwind info still describes the caller's frame: not over. */
	for (int i = 0; i < 2; i++)
		if (pc >= pl_sconf.libc_switch_lo[i] && pc < pl_sconf.libc_switch_hi[i])
			return 0;
	if (top && (sp > top || top - sp > PL_SWITCH_STACK))
		return 1;
	return ++st->switch_ticks >= PL_STALE_TICKS;
}

/* A tick, for tick() on the tick stack. */
struct tick {
	ucontext_t *uc;
	unsigned overrun; /* expirations the kernel merged into this one (timers) */
	int perf, wake;	  /* from a perf event; from the context-switch event (wall) */
};

/* The deep part of a tick, on the thread's tick stack when it has one
 * (pl_tick_stack_run): the handler itself leaves little on the interrupted stack. */
__attribute__((noinline)) static void tick(void *arg)
{
	const struct tick *t = arg;
	void *ucv = t->uc;
	unsigned overrun = t->overrun;
	int perf = t->perf, wake = t->wake;
	struct pl_sthread *st = pl_sampler_self();
	if (!st)
		return;
	if (!atomic_load_explicit(&pl_sampler_on, memory_order_relaxed)) {
		/* A tick that raced a stop: make sure nothing re-armed behind it. */
		pl_sampler_arm(st, 0);
		return;
	}
	if (perf && !wake && st->perf_fd >= 0)
		dither_period(st);
	if (st->tls && st->tls->in_switch && ucv && switch_over(st, ucv))
		st->tls->in_switch = 0;
	if (st->tls && !st->tls->in_switch)
		st->switch_ticks = 0;
	uint64_t w = tick_weight(st, overrun, perf, wake);
	if (!w)
		return;
	struct pl_rec *rec = pl_ring_reserve(st);
	if (!rec) {
		atomic_fetch_add_explicit(&st->dropped, 1, memory_order_relaxed);
		return;
	}
	rec->kind = PL_REC_SAMPLE;
	rec->ctx = atomic_load_explicit(&st->cur, memory_order_relaxed);
	if (ucv)
		rec->ctx = pl_stack_at_tick(
		    (uintptr_t)((const ucontext_t *)ucv)->uc_mcontext.gregs[REG_RSP], rec->ctx);
	rec->weight = w;
	rec->sp = rec->base = 0;
	rec->new_coro = 0;
	rec->fiber =
	    rec->ctx && ucv && !pl_stack_hooked()
		? pl_stack_unnamed(rec->ctx,
				   (uintptr_t)((const ucontext_t *)ucv)->uc_mcontext.gregs[REG_RSP])
		: NULL;
	if (!pl_sconf.wall && st->tls && st->tls->in_switch) {
		/* A stack walked mid-switch is garbage, but the CPU is the switch's: under
		 * cpu (no other writer of the ring then) it is charged to swapcontext. */
		rec->pcs[0] = pl_sconf.switch_pc;
		rec->depth = 1;
	} else {
		struct pl_py_sample py;
		py.cur = rec->ctx; /* the adapter drops a greenlet's frames read as another's */
		int n = pl_sampler_python_read(&py, ucv);
		if (n < 0) {
			atomic_fetch_add_explicit(&st->py_failed, 1, memory_order_relaxed);
			return;
		}
		uintptr_t sp =
		    ucv ? (uintptr_t)((const ucontext_t *)ucv)->uc_mcontext.gregs[REG_RSP] : 0;
		if (n == 0 && ucv && stack_unknown(st, sp, rec->ctx))
			capture_unknown(st, rec, ucv, sp);
		else if (n == 0 || pl_cfg.native)
			capture(st, rec, ucv);
		if (n > 0 && pl_cfg.native)
			pl_sampler_python_merge(st, rec, &py, n);
		else if (n > 0)
			pl_sampler_python_fill(st, rec, &py, n, ucv);
		if (n > 0 && py.ctx) { /* the asyncio task running (python/sampling/tasks.c) */
			rec->ctx = py.ctx;
			pl_sampler_python_cut(rec, py.task_frames);
		} else if (n > 0 && py.new_coro && py.task_frames &&
			   py.task_frames <= (unsigned)n) {
			/* A task no scan has listed yet: the fold holds the tick back
			 * until the scan this asked for says whose it is. */
			rec->new_coro = py.new_coro;
			rec->new_key = py.keys[py.task_frames - 1];
			rec->new_gen = py.new_gen;
			rec->new_frames = py.task_frames;
		}
		/* the open step's ticks: where a stall spent its time (rule 11) */
		coprof_step_tick(st->thread, rec->pcs, pl_stack_user_depth(rec->pcs, rec->depth));
	}
	pl_ring_publish(st, rec);
}

static void on_tick(int sig, siginfo_t *si, void *ucv)
{
	int saved = errno;
	struct tick t = {.uc = ucv};
	int ours = sig != SIGTRAP;
	if (si && si->si_code == PL_TRAP_PERF && sig == SIGTRAP) {
		uint64_t d = perf_data(si);
		t.perf = ours = d == PL_PERF_COOKIE || d == PL_PERF_COOKIE + 1;
		t.wake = d == PL_PERF_COOKIE + 1;
	} else if (si && si->si_code == SI_TIMER) {
		int id = si->si_value.sival_int;
		t.overrun = si->si_overrun > 0 ? (unsigned)si->si_overrun : 0;
		ours = ours || id == PL_TIMER_MONO || id == PL_TIMER_CPU;
	}
	if (ours)
		pl_tick_stack_run(tick, &t, ucv);
	else
		forward_trap(sig, si, ucv);
	errno = saved;
}

int pl_sampler_install_handler(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_tick;
	/* SA_ONSTACK: on the thread's tick stack where it has no other (sampler-stack.c) */
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	/* No handler of the program's may run inside a tick: one that switches stacks
	 * (preemptive green threads: swapcontext in a SIGALRM handler) would leave this
	 * tick half done on one stack while the thread, its signal mask now the target's,
	 * takes the next tick on another: two producers in one ring slot, and libunwind's
	 * per-thread trace cache entered twice (issue 19: a wait record of garbage weight
	 * that folded forever, and segfaults in libunwind). */
	sigfillset(&sa.sa_mask);
	return sigaction(pl_sconf.signo, &sa, pl_sconf.signo == SIGTRAP ? &prev_trap : NULL) < 0
		   ? -errno
		   : 0;
}

int pl_sampler_handler_is_ours(void)
{
	struct sigaction cur;
	if (atomic_load(&trap_released) || pl_sig_real_action(pl_sconf.signo, NULL, &cur) < 0)
		return 1;
	return (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_tick;
}
