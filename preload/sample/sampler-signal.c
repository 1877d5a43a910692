/* sampler-signal.c: the tick handler of sample mode. async-signal-safe.
 *
 * Runs in the profiled thread, on the real-time signal its own timers send. It reads
 * the thread's CPU clock, walks the interrupted stack with libunwind (local only,
 * caches warmed outside the signal by sampler.c) into the thread's ring, and nothing
 * more: no allocation, no lock, errno saved and restored. */
/* async-signal-safe */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <errno.h>
#include <libunwind.h>
#include <string.h>
#include <ucontext.h>

#include "sampler-ring.h"

/* Arming needs no lock: timer_settime is async-signal-safe. */
void pl_sampler_arm(struct pl_sthread *st, int on)
{
	struct itimerspec its = {0};
	if (on) {
		its.it_value.tv_sec = (time_t)(pl_sconf.period / 1000000000u);
		its.it_value.tv_nsec = (long)(pl_sconf.period % 1000000000u);
		its.it_interval = its.it_value;
	}
	if (pl_sconf.cpu_timer) {
		timer_settime(st->cpu, 0, &its, NULL);
		return;
	}
	if (st->has_cpu)
		timer_settime(st->cpu, 0, &(struct itimerspec){0}, NULL);
	if (st->has_mono)
		timer_settime(st->mono, 0, &its, NULL);
	atomic_store_explicit(&st->parked, 0, memory_order_relaxed);
}

/* Under cpu an idle thread would still take every tick (and a blocked syscall would
 * see EINTR each time), so a thread that used less than a quarter of a period since
 * the last tick parks: the periodic timer stops and a one-shot timer on the thread's
 * own CPU clock wakes it after one period of CPU. */
static void park(struct pl_sthread *st)
{
	struct itimerspec its = {0};
	its.it_value.tv_sec = (time_t)(pl_sconf.period / 1000000000u);
	its.it_value.tv_nsec = (long)(pl_sconf.period % 1000000000u);
	atomic_store_explicit(&st->parked, 1, memory_order_relaxed);
	timer_settime(st->mono, 0, &(struct itimerspec){0}, NULL);
	timer_settime(st->cpu, 0, &its, NULL);
}

/* The weight of this tick in ns, or 0 when it counts nothing. `overrun` is the number
 * of expirations the kernel merged into this one (the thread did not run in time). */
static uint64_t tick_weight(struct pl_sthread *st, int timer, unsigned overrun)
{
	if (atomic_exchange_explicit(&st->rebase, 0, memory_order_relaxed)) {
		st->cpu_last = 0;
		st->carry = 0;
	}
	if (pl_sconf.wall) {
		atomic_fetch_add_explicit(&st->ticks, 1 + overrun, memory_order_relaxed);
		uint64_t w = pl_sconf.period * (1 + overrun) + st->carry;
		if (st->tls && st->tls->in_switch) {
			/* A stack walked mid-switch is garbage: defer the tick. */
			st->carry = w;
			atomic_fetch_add_explicit(&st->deferred, 1, memory_order_relaxed);
			return 0;
		}
		st->carry = 0;
		return w;
	}
	if (timer == PL_TIMER_CPU && !pl_sconf.cpu_timer) {
		atomic_store_explicit(&st->parked, 0, memory_order_relaxed);
		pl_sampler_arm(st, 1);
	}
	if (st->tls && st->tls->in_switch) {
		/* Leave cpu_last alone: the next tick counts this CPU time. */
		atomic_fetch_add_explicit(&st->deferred, 1, memory_order_relaxed);
		return 0;
	}
	uint64_t now = cp_clock_now(&st->clock);
	uint64_t last = st->cpu_last;
	st->cpu_last = now;
	if (!last)
		return 0;
	uint64_t w = now - last;
	if (timer == PL_TIMER_MONO && st->has_cpu && w < pl_sconf.period / 4)
		park(st);
	return w;
}

/* Walks the interrupted stack into rec. unw_backtrace starts in this handler; the
 * frames above the interrupted pc (the handler, the signal trampoline) are cut off. */
static void capture(struct pl_sthread *st, struct pl_rec *rec, const ucontext_t *uc)
{
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	sig_atomic_t raw = st->tls ? st->tls->raw_masks : 0;
	if (st->tls)
		st->tls->raw_masks = 1; /* libunwind's masks are its own (signal-guard.c) */
	int n = unw_backtrace((void **)rec->pcs, PL_SAMPLE_DEPTH + PL_SAMPLE_SKIP);
	if (st->tls)
		st->tls->raw_masks = raw;
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

#define PL_SWITCH_STACK (256u * 1024) /* stack a switch of ours may use below its hook */
#define PL_STALE_TICKS 16	      /* ticks in a row inside one switch: it is over */

/* The adapter sets in_switch for a switch; when the switch goes where no hook of ours
 * returns (setcontext to a getcontext point, uc_link), nobody clears it. The switch is
 * over when the interrupted stack pointer is not just below the frame that set it, or
 * when PL_STALE_TICKS ticks in a row found it set. */
static int switch_over(struct pl_sthread *st, const ucontext_t *uc)
{
	uintptr_t top = st->tls->switch_sp;
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	if (top && (sp > top || top - sp > PL_SWITCH_STACK))
		return 1;
	return ++st->switch_ticks >= PL_STALE_TICKS;
}

static void on_tick(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	int saved = errno;
	struct pl_sthread *st = pl_sampler_self();
	if (!st)
		goto out;
	if (!atomic_load_explicit(&pl_sampler_on, memory_order_relaxed)) {
		/* A tick that raced a stop: make sure nothing re-armed behind it. */
		pl_sampler_arm(st, 0);
		goto out;
	}
	if (st->tls && st->tls->in_switch && ucv && switch_over(st, ucv))
		st->tls->in_switch = 0;
	if (st->tls && !st->tls->in_switch)
		st->switch_ticks = 0;
	int timer = PL_TIMER_MONO;
	unsigned overrun = 0;
	if (si && si->si_code == SI_TIMER) {
		timer = si->si_value.sival_int;
		overrun = si->si_overrun > 0 ? (unsigned)si->si_overrun : 0;
	}
	uint64_t w = tick_weight(st, timer, overrun);
	if (!w)
		goto out;
	struct pl_rec *rec = pl_ring_reserve(st);
	if (!rec) {
		atomic_fetch_add_explicit(&st->dropped, 1, memory_order_relaxed);
		goto out;
	}
	rec->kind = PL_REC_SAMPLE;
	rec->ctx = atomic_load_explicit(&st->cur, memory_order_relaxed);
	rec->weight = w;
	capture(st, rec, ucv);
	pl_ring_publish(st);
out:
	errno = saved;
}

int pl_sampler_install_handler(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_tick;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	return sigaction(pl_sconf.signo, &sa, NULL) < 0 ? -errno : 0;
}

int pl_sampler_handler_is_ours(void)
{
	struct sigaction cur;
	if (pl_sig_real_action(pl_sconf.signo, NULL, &cur) < 0)
		return 1;
	return (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_tick;
}
