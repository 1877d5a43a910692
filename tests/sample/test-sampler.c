/* test-sampler.c: the sampler core (timers, the tick handler, libunwind, the folding
 * thread, wait stacks) on real signals, with a fake engine (stub-shim.c) that records
 * every coprof_sample. Leaves are named with dladdr: this program exports its symbols. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#include "stub-shim.h"

/* Functions the samples must land in; exported, so dladdr names them. */
void spin_heavy(uint64_t n);
void spin_light(uint64_t n);
void spin_off(uint64_t n);
void run_split(uint64_t unit, int rounds);
void coro_wait_here(void);

static volatile uint64_t sink;

#define SPIN(n)                                                                                    \
	do {                                                                                       \
		for (uint64_t i_ = 0; i_ < (n); i_++)                                              \
			sink += i_ * i_;                                                           \
	} while (0)

__attribute__((noinline)) void spin_heavy(uint64_t n)
{
	SPIN(n);
}

__attribute__((noinline)) void spin_light(uint64_t n)
{
	SPIN(n);
}

__attribute__((noinline)) void spin_off(uint64_t n)
{
	SPIN(n);
}

static uint64_t cpu_ns(void);

/* The CPU each of spin_heavy's and spin_light's calls took, summed: twice the
 * iterations are not always twice the time (at -O1 gcc aligns neither loop, and
 * spin_heavy's crossed a cache line: 74% of the CPU, not 67%). */
static uint64_t heavy_cpu, light_cpu;

/* Two thirds of the work in spin_heavy, one third in spin_light. */
__attribute__((noinline)) void run_split(uint64_t unit, int rounds)
{
	for (int r = 0; r < rounds; r++) {
		uint64_t t0 = cpu_ns();
		spin_heavy(2 * unit);
		uint64_t t1 = cpu_ns();
		spin_light(unit);
		heavy_cpu += t1 - t0;
		light_cpu += cpu_ns() - t1;
	}
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Iterations of SPIN that take about 1 ms of CPU. */
static uint64_t unit_1ms(void)
{
	uint64_t n = 100000;
	for (;;) {
		uint64_t t0 = cpu_ns();
		spin_off(n);
		uint64_t dt = cpu_ns() - t0;
		if (dt > 20000000u)
			return n * 1000000u / dt;
		n *= 2;
	}
}

static const char *sym(uintptr_t pc)
{
	Dl_info info;
	if (dladdr((void *)pc, &info) && info.dli_sname)
		return info.dli_sname;
	return "?";
}

/* The ns and count of samples whose leaf is `name` (NULL: any), on `thread` (0: any),
 * waiting or not (-1: either). */
static uint64_t leaf_ns(const char *name, int thread, int waiting, uint64_t *count)
{
	const struct stub_sample *s;
	size_t n = stub_samples(&s);
	uint64_t ns = 0, c = 0;
	for (size_t i = 0; i < n; i++) {
		if ((thread && s[i].thread != thread) || (waiting >= 0 && s[i].waiting != waiting))
			continue;
		if (!name || strcmp(sym(s[i].pcs[0]), name) == 0) {
			ns += s[i].ns;
			c++;
		}
	}
	if (count)
		*count = c;
	return ns;
}

static void sleep_ms(unsigned ms, unsigned *eintr)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000}, rem;
	while (nanosleep(&ts, &rem) < 0 && errno == EINTR) {
		ts = rem;
		if (eintr)
			(*eintr)++;
	}
}

/* Code no unwind information covers, as a runtime's switch written in assembly is (State
 * Threads' register restore): no .cfi directives, so no FDE. */
__asm__(".text\n"
	".globl no_cfi_code\n"
	".type no_cfi_code, @function\n"
	"no_cfi_code:\n"
	"\tnop\n"
	"\tret\n"
	".size no_cfi_code, .-no_cfi_code\n");
void no_cfi_code(void);

/* The same for a caller: calls the function in its first argument, as a coroutine's
 * start routine written in assembly calls the coroutine's entry. */
__asm__(".text\n"
	".globl no_cfi_call\n"
	".type no_cfi_call, @function\n"
	"no_cfi_call:\n"
	"\tpush %rbp\n"
	"\tmov %rsp, %rbp\n"
	"\tcall *%rdi\n"
	"\tpop %rbp\n"
	"\tret\n"
	".size no_cfi_call, .-no_cfi_call\n");
void no_cfi_call(void (*fn)(void));

/* A tick's walk that reaches its stack's end gives that end (the fold keys a stack no
 * adapter knows by it); one from code without unwind information gives the pc alone
 * and no end, whatever libunwind's frame-pointer guess would reach: under load a tick
 * in State Threads' restore made a third task of a two-coroutine program, and one in a
 * hand-written switch a cycle of frames no root reached. The same stack, the same
 * frames: only the interrupted pc differs. */
__attribute__((noinline)) static void walk_ends(void)
{
	cr_assert_eq(stub_init(0, 997), 0);
	ucontext_t uc;
	uintptr_t pcs[64], base = 0;
	cr_assert_eq(getcontext(&uc), 0);
	int n = stub_unw_walk(&uc, pcs, 64, &base);
	cr_assert(n > 2, "a walk of %d frames", n);
	cr_assert_neq(base, 0, "the walk from a function with unwind information ends");
	uc.uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)&no_cfi_code;
	n = stub_unw_walk(&uc, pcs, 64, &base);
	cr_assert(n == 1 && pcs[0] == (uintptr_t)&no_cfi_code, "%d frames from %#lx", n,
		  (unsigned long)pcs[0]);
	cr_expect_eq(base, 0, "a walk from code with no unwind information gave end %#lx",
		     (unsigned long)base);
}

Test(sampler, walk_from_code_without_unwind_info_has_no_end)
{
	walk_ends();
}

static uintptr_t inside_pcs[64], inside_base;
static int inside_n;

__attribute__((noinline)) static void walk_inside(void)
{
	ucontext_t uc;
	if (getcontext(&uc) == 0)
		inside_n = stub_unw_walk(&uc, inside_pcs, 64, &inside_base);
	__asm__ volatile("" ::: "memory"); /* no tail call: the frame stays */
}

/* A frame without unwind information above the interrupted one is the stack's
 * outermost, as a coroutine's start routine is: the walk ends there (its stack pointer
 * the end), and never goes on by the frame pointer into frames of another stack (past
 * it here: the test's own callers; once, past a hand-written switch's start, a cycle of
 * frames that no root reached). */
Test(sampler, walk_ends_at_a_caller_without_unwind_info)
{
	cr_assert_eq(stub_init(0, 997), 0);
	no_cfi_call(walk_inside);
	cr_assert(inside_n >= 2, "a walk of %d frames", inside_n);
	uintptr_t last = inside_pcs[inside_n - 1];
	cr_expect(last > (uintptr_t)&no_cfi_call && last < (uintptr_t)&no_cfi_call + 16,
		  "the walk went on past no_cfi_call: %d frames, the last at %#lx", inside_n,
		  (unsigned long)last);
	cr_expect_neq(inside_base, 0, "no end");
}

Test(sampler, cpu_split_two_thirds)
{
	cr_assert_eq(stub_init(0, 997), 0);
	uint64_t unit = unit_1ms();
	heavy_cpu = light_cpu = 0;
	stub_start();
	uint64_t t0 = cpu_ns();
	do /* 600 ms of CPU, whatever the calibrated unit says */
		run_split(unit, 10);
	while (cpu_ns() - t0 < 600000000u);
	uint64_t used = cpu_ns() - t0;
	stub_stop();
	uint64_t nh, nl;
	uint64_t h = leaf_ns("spin_heavy", 0, 0, &nh), l = leaf_ns("spin_light", 0, 0, &nl);
	/* About 600 ticks on an idle CPU; fewer where another process preempts this one
	 * (the task clock's period starts again at each schedule-in; the weights still
	 * carry all the CPU), but enough to judge a share. */
	cr_assert_gt(nh + nl, 100, "about 600 ticks expected, got %lu", (unsigned long)(nh + nl));
	double share = 100.0 * (double)h / (double)(h + l);
	double own = 100.0 * (double)heavy_cpu / (double)(heavy_cpu + light_cpu);
	cr_expect(share > own - 5 && share < own + 5, "spin_heavy has %.1f%% of the CPU, not %.1f%%",
		  share, own);
	/* Under cpu the weights add up to the CPU time used. */
	cr_expect(h + l > used * 8 / 10 && h + l < used * 11 / 10,
		  "sampled %lu ns of %lu ns of CPU", (unsigned long)(h + l), (unsigned long)used);
	/* The walk goes through the signal frame into the callers. */
	const struct stub_sample *s;
	size_t n = stub_samples(&s), through = 0, heavy = 0;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(sym(s[i].pcs[0]), "spin_heavy") != 0)
			continue;
		heavy++;
		through += s[i].depth > 2 && strcmp(sym(s[i].pcs[1]), "run_split") == 0;
	}
	cr_expect_gt(through, heavy * 9 / 10, "%zu of %zu stacks reach run_split", through, heavy);
}

Test(sampler, wall_counts_every_tick)
{
	cr_assert_eq(stub_init(1, 997), 0);
	uint64_t unit = unit_1ms();
	stub_start();
	uint64_t t0 = wall_ns();
	spin_heavy(unit * 300);
	unsigned eintr = 0;
	sleep_ms(300, &eintr);
	uint64_t elapsed = wall_ns() - t0;
	stub_stop();
	const struct stub_sample *s;
	size_t n = stub_samples(&s);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += s[i].ns;
	/* On CPU, waiting for one or asleep, all of it is wall time. */
	cr_expect(total > elapsed * 8 / 10 && total < elapsed * 12 / 10,
		  "sampled %lu ns of %lu ns of wall time", (unsigned long)total,
		  (unsigned long)elapsed);
	/* The sleep is charged where it slept, and was not cut short to get there. */
	uint64_t slept = leaf_ns("nanosleep", 0, 0, NULL) + leaf_ns("clock_nanosleep", 0, 0, NULL) +
			 leaf_ns("__clock_nanosleep", 0, 0, NULL);
	cr_expect_gt(slept, 250000000u, "%lu ns of the 300 ms sleep sampled in nanosleep",
		     (unsigned long)slept);
	cr_expect_eq(eintr, 0, "the sleep was interrupted %u times", eintr);
}

Test(sampler, cpu_idle_thread_takes_no_tick)
{
	cr_assert_eq(stub_init(0, 997), 0);
	cr_assert(stub_perf(), "perf events are allowed here: the test needs them");
	stub_start();
	unsigned eintr = 0;
	for (int i = 0; i < 50; i++)
		sleep_ms(10, &eintr);
	stub_stop();
	const struct stub_sample *s;
	size_t n = stub_samples(&s);
	/* A tick in a blocked thread would cut its sleep short (500 times at 997 Hz). */
	cr_expect_eq(eintr, 0, "nanosleep was interrupted %u times", eintr);
	cr_expect_lt(n, 10, "an idle thread took %zu samples", n);
}

/* On a steady loop the perf ticks weigh one period of CPU (1.003 ms at 997 Hz) on
 * average, each the CPU time since the previous tick; the period is drawn again every
 * fourth tick from half to one and a half of it (sampler-signal.c: dither_period), so
 * that ticks do not keep step with a loop: about three ticks in ten are shorter than
 * 0.8 of it, three longer than 1.2, and all but a few in between the bounds. */
Test(sampler, cpu_ticks_weigh_the_period_on_average_and_vary)
{
	cr_assert_eq(stub_init(0, 997), 0);
	cr_assert(stub_perf(), "perf events are allowed here: the test needs them");
	uint64_t unit = unit_1ms();
	stub_start();
	uint64_t t0 = cpu_ns();
	do /* 600 ms of CPU, whatever the calibrated unit says (ASan's ran 69 ms once) */
		spin_heavy(unit * 10);
	while (cpu_ns() - t0 < 600000000u);
	stub_stop();
	uint64_t n;
	uint64_t ns = leaf_ns("spin_heavy", 0, 0, &n);
	cr_assert_gt(n, 300, "about 600 ticks expected, got %lu", (unsigned long)n);
	/* 150 draws or so: their mean is the period within 2.4% (one sd). */
	double mean = (double)ns / (double)n, period = 1e9 / 997;
	cr_expect(mean > period * 0.9 && mean < period * 1.1,
		  "a tick weighs %.0f ns on average, the period is %.0f ns", mean, period);
	const struct stub_sample *s;
	size_t all = stub_samples(&s), shorter = 0, longer = 0, inside = 0;
	for (size_t i = 0; i < all; i++) {
		shorter += s[i].ns < period * 0.8;
		longer += s[i].ns > period * 1.2;
		inside += s[i].ns > period * 0.45 && s[i].ns < period * 1.6;
	}
	cr_expect_gt(shorter * 100, all * 15, "%zu of %zu ticks under 0.8 period", shorter, all);
	cr_expect_gt(longer * 100, all * 15, "%zu of %zu ticks over 1.2 periods", longer, all);
	cr_expect_gt(inside * 100, all * 95, "%zu of %zu ticks within 0.45-1.6 periods", inside,
		     all);
}

/* Without perf events (forced here, as where perf_event_paranoid is 3 or seccomp
 * denies them), a rate the kernel's tick serves (199 Hz < 250 Hz here) takes the CPU
 * timer alone: the same proportions and CPU totals, and an idle thread takes nothing. */
Test(sampler, cpu_low_rate_rides_the_cpu_timer)
{
	stub_force_timer(1);
	cr_assert_eq(stub_init(0, 199), 0);
	cr_assert(stub_cpu_timer(), "199 Hz under cpu should use the CPU-time timer");
	cr_assert(strstr(stub_note(), "CPU-time timer, at 199 Hz"), "note: %s", stub_note());
	uint64_t unit = unit_1ms();
	stub_start();
	uint64_t t0 = cpu_ns();
	/* About 900 ms of CPU in rounds of varied length: ticks come from the scheduler's
	 * tick here, and a fixed round could keep step with it. */
	uint64_t seed = 1;
	for (int r = 0; r < 300; r++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		run_split(unit * (50 + (seed >> 33) % 101) / 100, 1);
	}
	uint64_t used = cpu_ns() - t0;
	unsigned eintr = 0;
	sleep_ms(300, &eintr);
	stub_stop();
	uint64_t nh, nl;
	uint64_t h = leaf_ns("spin_heavy", 0, 0, &nh), l = leaf_ns("spin_light", 0, 0, &nl);
	uint64_t want = used * 199 / 1000000000u;
	cr_expect(nh + nl > want / 2 && nh + nl < want * 3 / 2, "%lu ticks for about %lu",
		  (unsigned long)(nh + nl), (unsigned long)want);
	/* About 180 samples: a share within 4.5 standard deviations of 2/3 for the count
	 * taken (about 16 points; 3 deviations, 10 points, failed once in an ASan CI run at
	 * 78.0%, as 1 run in 370 would by chance alone); the integration test
	 * (sample-split-199) checks 5 points on more samples. */
	double share = 100.0 * (double)h / (double)(h + l);
	double sd = 100.0 * sqrt((2.0 / 9.0) / (double)(nh + nl));
	cr_expect(share > 66.7 - 4.5 * sd && share < 66.7 + 4.5 * sd,
		  "spin_heavy has %.1f%% of the CPU over %lu samples, not 66.7%% +- %.1f", share,
		  (unsigned long)(nh + nl), 4.5 * sd);
	/* The weights add up to the CPU used (a sample may also land in cpu_ns). */
	uint64_t all = leaf_ns(NULL, 0, 0, NULL);
	cr_expect(all > used * 8 / 10 && all < used * 11 / 10, "sampled %lu ns of %lu ns of CPU",
		  (unsigned long)all, (unsigned long)used);
	cr_expect_eq(eintr, 0, "the sleep was interrupted %u times", eintr);
}

static uint64_t thread_unit, light_cpu_ns;

static void *light_thread(void *arg)
{
	(void)arg;
	stub_thread_start();
	uint64_t t0 = cpu_ns();
	do /* 200 ms of CPU, whatever the calibrated unit says */
		spin_light(thread_unit * 10);
	while (cpu_ns() - t0 < 200000000u);
	light_cpu_ns = cpu_ns() - t0;
	stub_thread_exit();
	return NULL;
}

Test(sampler, threads_are_sampled_apart)
{
	cr_assert_eq(stub_init(0, 997), 0);
	thread_unit = unit_1ms();
	stub_start();
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, light_thread, NULL), 0);
	uint64_t t0 = cpu_ns();
	do
		spin_heavy(thread_unit * 10);
	while (cpu_ns() - t0 < 200000000u);
	uint64_t heavy_ms = (cpu_ns() - t0) / 1000000u;
	pthread_join(th, NULL); /* it exits before the stop: its samples must survive */
	stub_stop();
	/* Under cpu the weights are CPU time, whatever else runs on the machine: each
	 * thread's function is charged the CPU it measured itself spending there (about
	 * 200 ms; the calibration's unit may be off on a busy machine, the weights not). */
	uint64_t l1, h2, light_ms = light_cpu_ns / 1000000u;
	uint64_t h1 = leaf_ns("spin_heavy", 1, 0, NULL) / 1000000u;
	leaf_ns("spin_light", 1, 0, &l1);
	leaf_ns("spin_heavy", 2, 0, &h2);
	uint64_t l2 = leaf_ns("spin_light", 2, 0, NULL) / 1000000u;
	cr_assert_gt(heavy_ms + light_ms, 100, "the threads ran %lu + %lu ms",
		     (unsigned long)heavy_ms, (unsigned long)light_ms);
	cr_expect(h1 * 10 >= heavy_ms * 8, "main thread: %lu ms sampled in spin_heavy of %lu ms",
		  (unsigned long)h1, (unsigned long)heavy_ms);
	cr_expect(l2 * 10 >= light_ms * 8, "second thread: %lu ms sampled in spin_light of %lu ms",
		  (unsigned long)l2, (unsigned long)light_ms);
	cr_expect_eq(l1 + h2, 0, "no sample lands on the wrong thread");
}

Test(sampler, toggle_samples_only_while_on)
{
	cr_assert_eq(stub_init(0, 997), 0);
	uint64_t unit = unit_1ms(), used = 0;
	for (int i = 0; i < 5; i++) {
		stub_start();
		uint64_t t0 = cpu_ns();
		spin_heavy(unit * 40);
		used += cpu_ns() - t0;
		stub_stop();
		spin_off(unit * 40);
	}
	/* The CPU used while on (about 200 ms): the weights say so even when the machine
	 * is busy and fewer, heavier ticks arrive. */
	uint64_t off;
	uint64_t on = leaf_ns("spin_heavy", 0, -1, NULL) / 1000000u;
	leaf_ns("spin_off", 0, -1, &off);
	cr_expect(on * 10 >= used / 1000000u * 6, "%lu ms sampled while on, of %lu ms",
		  (unsigned long)on, (unsigned long)(used / 1000000u));
	cr_expect_eq(off, 0, "%lu samples while off", (unsigned long)off);
}

static ucontext_t main_uc, co_uc;
static int co_ctx; /* its address is the coroutine's identity */

__attribute__((noinline)) void coro_wait_here(void)
{
	stub_switch(&co_ctx, NULL);
	swapcontext(&co_uc, &main_uc);
	stub_switch_done();
}

static void coro_body(void)
{
	coro_wait_here();
	stub_switch(&co_ctx, NULL); /* finishing: back to main through uc_link */
	stub_finish(&co_ctx);
}

Test(sampler, wall_charges_suspended_coroutine_where_it_waits)
{
	cr_assert_eq(stub_init(1, 997), 0);
	uint64_t unit = unit_1ms();
	static char stack[256 * 1024];
	getcontext(&co_uc);
	co_uc.uc_stack.ss_sp = stack;
	co_uc.uc_stack.ss_size = sizeof(stack);
	co_uc.uc_link = &main_uc;
	makecontext(&co_uc, coro_body, 0);
	stub_start();
	stub_switch(NULL, &co_ctx);
	swapcontext(&main_uc, &co_uc); /* runs until coro_wait_here suspends it */
	stub_switch_done();
	uint64_t t0 = wall_ns();
	spin_heavy(unit * 300);
	uint64_t waited_ms = (wall_ns() - t0) / 1000000u;
	stub_switch(NULL, &co_ctx);
	swapcontext(&main_uc, &co_uc); /* resumes it; it finishes */
	stub_switch_done();
	uint64_t t1 = wall_ns();
	spin_light(unit * 100); /* it finished: no longer waiting */
	uint64_t ran_ms = waited_ms + (wall_ns() - t1) / 1000000u;
	stub_stop();
	const struct stub_sample *s;
	size_t n = stub_samples(&s), waits = 0, at = 0;
	uint64_t mine_ns = 0;
	for (size_t i = 0; i < n; i++) {
		if (!s[i].waiting) {
			mine_ns += s[i].ctx == NULL ? s[i].ns : 0;
			continue;
		}
		waits++;
		cr_assert_eq(s[i].ctx, &co_ctx);
		at += strcmp(sym(s[i].pcs[0]), "coro_wait_here") == 0;
	}
	/* One tick a millisecond while it waited. */
	cr_expect(waits > waited_ms * 3 / 4 && waits < waited_ms * 5 / 4 + 5,
		  "%zu ticks charged to the coroutine that waited %lu ms", waits,
		  (unsigned long)waited_ms);
	cr_expect_eq(at, waits, "%zu of %zu wait stacks end in coro_wait_here", at, waits);
	/* The thread's own samples weigh the wall time it ran (ticks the kernel merged
	 * while the machine was busy count by their weight). */
	uint64_t mine_ms = mine_ns / 1000000u;
	cr_expect(mine_ms > ran_ms * 3 / 4 && mine_ms < ran_ms * 5 / 4 + 5,
		  "the thread's own samples weigh %lu ms of %lu ms", (unsigned long)mine_ms,
		  (unsigned long)ran_ms);
}

static volatile sig_atomic_t own_ticks;

static void own_handler(int sig)
{
	(void)sig;
	own_ticks++;
}

Test(sampler, program_taking_the_tick_signal_stops_sampling)
{
	cr_assert_eq(stub_init(1, 997), 0);
	stub_start();
	sleep_ms(50, NULL);
	signal(stub_signo(), own_handler);
	sleep_ms(300, NULL);
	sig_atomic_t seen = own_ticks;
	sleep_ms(100, NULL);
	cr_expect_lt(seen, 60, "the program got %d of our ticks", (int)seen);
	cr_expect_eq(own_ticks, seen, "ticks went on after sampling gave up");
	cr_expect(strstr(stub_note(), "tick signal") != NULL, "note: %s", stub_note());
	stub_stop();
}

static volatile sig_atomic_t traps;

static void trap_handler(int sig)
{
	(void)sig;
	traps++;
}

/* A program that handles SIGTRAP itself keeps it: perf ticks would reach its handler,
 * so the sampler falls back to the CPU-time timer on a real-time signal, says why, and
 * the program's own SIGTRAPs still reach it. */
Test(sampler, program_with_sigtrap_handler_keeps_it)
{
	signal(SIGTRAP, trap_handler);
	cr_assert_eq(stub_init(0, 997), 0);
	cr_expect(!stub_perf() && stub_cpu_timer(), "perf ticks on a SIGTRAP the program handles");
	cr_expect_neq(stub_signo(), SIGTRAP);
	cr_expect(strstr(stub_note(), "SIGTRAP is taken") != NULL, "note: %s", stub_note());
	uint64_t unit = unit_1ms();
	stub_start();
	raise(SIGTRAP);
	uint64_t t0 = cpu_ns();
	do /* 100 ms of CPU, whatever the calibrated unit says */
		spin_heavy(unit * 10);
	while (cpu_ns() - t0 < 100000000u);
	stub_stop();
	cr_expect_eq(traps, 1, "the program's handler ran %d times for one raise", (int)traps);
	cr_expect_gt(leaf_ns("spin_heavy", 0, 0, NULL), 50000000u, "the timer sampled");
}

/* With perf ticks on SIGTRAP, a SIGTRAP that is not a tick keeps its default action:
 * the process ends on it, as it would without coprof. */
Test(sampler, foreign_sigtrap_keeps_its_default_action, .signal = SIGTRAP)
{
	cr_assert_eq(stub_init(0, 997), 0);
	cr_assert(stub_perf(), "perf events are allowed here: the test needs them");
	stub_start();
	raise(SIGTRAP);
	cr_assert_fail("the SIGTRAP was swallowed");
}
