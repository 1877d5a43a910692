/* uc-preempt.c: preemptive green threads. Two coroutines, green_a and green_b, burn CPU
 * while a SIGALRM timer (every 2 ms) switches between them with swapcontext from inside
 * its handler, for 400 ms and at least 100 switches. Built with -DCOUNT_ALLOC it also
 * counts the allocations made while the handler runs (it allocates nothing itself: any
 * are the profiler's) and prints them. `uc-preempt toggle` raises SIGUSR2 as the timer starts (run it with the
 * profiler waiting for that signal: the window opens while the handler switches).
 *
 * SIGALRM is blocked wherever a switch could go wrong, as a real preemptive scheduler
 * must: the green threads are made with it blocked and unblock it once running (the
 * first switch into one comes from the other's handler, and a timer that expired
 * meanwhile must not fire inside swapcontext, between its mask change and its stack
 * switch), block it again before they return through uc_link, and main drops a pending
 * one before it resumes the last. Without that the program hangs or crashes unprofiled
 * as soon as its handler is slow: `uc-preempt slow` spins 5 ms in the first handlers
 * and in main as the first thread returns, and must still finish.
 * Run by tests/native/safety.py and bench/sample/preempt-loop.py. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>

static ucontext_t main_uc, green[2];
static volatile int cur;
static __thread volatile sig_atomic_t in_handler; /* this thread is in on_alarm */
static volatile unsigned long switches;
static double deadline;
static int slow; /* `slow`: stall where the races above would bite */

#ifdef COUNT_ALLOC
static volatile unsigned long allocs_in_handler;
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
void *malloc(size_t n)
{
	allocs_in_handler += in_handler;
	return __libc_malloc(n);
}
void *calloc(size_t n, size_t m)
{
	allocs_in_handler += in_handler;
	return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n)
{
	allocs_in_handler += in_handler;
	return __libc_realloc(p, n);
}
void free(void *p)
{
	__libc_free(p);
}
#endif

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void stall(void)
{
	double until = now() + 0.005;
	while (now() < until)
		;
}

static void on_alarm(int sig)
{
	(void)sig;
	in_handler = 1;
	if (slow && switches < 3)
		stall();
	int from = cur;
	cur = !from;
	switches++;
	swapcontext(&green[from], &green[!from]);
	in_handler = 0; /* resumed: back in this green thread's own handler frame */
}

/* 400 ms, and at least MIN_SWITCHES handlers: on a loaded machine 400 ms of wall time
 * gave the program 20 (a toggled window then had no time to record a tick), where a
 * quiet one gives 200. */
#define MIN_SWITCHES 100
__attribute__((noinline)) static void green_work(void)
{
	volatile unsigned long x = 0;
	while (now() < deadline || switches < MIN_SWITCHES)
		x++;
}

static void alarm_mask(int how)
{
	sigset_t alrm;
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigprocmask(how, &alrm, NULL);
}

/* Running at last (from main or from the other's handler): take the timer until the
 * work is done, and return through uc_link without it. */
static void green_go(void)
{
	alarm_mask(SIG_UNBLOCK);
	green_work();
	alarm_mask(SIG_BLOCK);
}

static void green_a(void)
{
	swapcontext(&green[0], &main_uc); /* started: wait for the timer */
	green_go();
}

static void green_b(void)
{
	swapcontext(&green[1], &main_uc);
	green_go();
}

/* Makes green thread i and runs it to its first yield. */
static void start_green(int i, void (*fn)(void))
{
	static char stacks[2][256 * 1024];
	getcontext(&green[i]);
	green[i].uc_stack.ss_sp = stacks[i];
	green[i].uc_stack.ss_size = sizeof(stacks[i]);
	green[i].uc_link = &main_uc;
	makecontext(&green[i], fn, 0);
	swapcontext(&main_uc, &green[i]);
}

int main(int argc, char **argv)
{
	slow = argc > 1 && strcmp(argv[1], "slow") == 0;
	alarm_mask(SIG_BLOCK); /* main and the green threads start with it blocked */
	start_green(0, green_a);
	start_green(1, green_b);
	struct sigaction sa = {.sa_handler = on_alarm};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	deadline = now() + 0.4;
	struct itimerval it = {{0, 2000}, {0, 2000}};
	setitimer(ITIMER_REAL, &it, NULL);
	cur = 0;
	if (argc > 1 && strcmp(argv[1], "toggle") == 0)
		raise(SIGUSR2);
	swapcontext(&main_uc, &green[0]); /* back here when one of them returns */
	if (slow)
		stall();
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_IGN); /* drops a pending one: the thread that returned is gone */
	in_handler = 0;
	int other = !cur;
	cur = other;
	swapcontext(&main_uc, &green[other]); /* the other returns from its handler too */
	in_handler = 0;
	printf("switches %lu\n", switches);
#ifdef COUNT_ALLOC
	printf("allocations in the handler: %lu\n", allocs_in_handler);
#endif
	puts("done");
	return 0;
}
